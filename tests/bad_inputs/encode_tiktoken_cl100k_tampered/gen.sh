# The bundled cl100k_base.tiktoken with one byte changed (the 'Y' at offset
# 1000000, in the token of rank 61596, made a 'Z'): same length, still well
# formed.
cp data/vocab/tiktoken/cl100k_base.tiktoken "$T/cl100k_base.tiktoken" &&
chmod u+w "$T/cl100k_base.tiktoken" &&
printf Z | dd of="$T/cl100k_base.tiktoken" bs=1 seek=1000000 conv=notrunc 2>/dev/null

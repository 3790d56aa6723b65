# The first 60000 of the 100256 lines of the bundled cl100k_base.tiktoken:
# cut at a line boundary, so every line is well formed and the ranks run
# 0..59999 without a gap; only the checksum tells it from the real file.
head -n 60000 data/vocab/tiktoken/cl100k_base.tiktoken > "$T/cl100k_base.tiktoken"

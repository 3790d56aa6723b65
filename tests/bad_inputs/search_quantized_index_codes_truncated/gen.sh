# A binary-quantized index whose quantized.npy lost its last byte.
"$LIPI" index --quiet --quantize binary -m "$MODEL" -o "$T/q" \
    "$CASE/../index_output_in_missing_directory/docs.txt"
truncate -s -1 "$T/q/quantized.npy"

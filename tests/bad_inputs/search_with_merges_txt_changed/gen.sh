# The index is built from a model folder with a merges.txt; then merges.txt
# changes: the tokenizer is another, so the model is another.
. "$LIB"
copy_model "$MODEL" "$T/m"
printf '#version: 0.2\nt h\n' > "$T/m/merges.txt"
"$LIPI" index --quiet -m "$T/m" -o "$T/idx" "$CASE/../index_output_in_missing_directory/docs.txt" || exit 1
printf '#version: 0.2\nh e\n' > "$T/m/merges.txt"

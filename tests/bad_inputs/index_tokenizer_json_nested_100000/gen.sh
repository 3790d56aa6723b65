. "$LIB"
copy_model "$MODEL" "$T/m"
rm "$T/m/vocab.txt"
{ printf '{"model":{"vocab":'; nested 100000 '{"a":' '}'; printf '}}\n'; } > "$T/m/tokenizer.json"

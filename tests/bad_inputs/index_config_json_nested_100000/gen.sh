. "$LIB"
copy_model "$MODEL" "$T/m"
{ printf '{"hidden_size":'; nested 100000 '[' ']'; printf '}\n'; } > "$T/m/config.json"

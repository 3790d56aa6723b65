. "$LIB"
copy_model "$MODEL" "$T/m"
printf '\377\377\377\377\377\377\377\377{}' > "$T/m/model.safetensors"

. "$LIB"
copy_model "$MODEL" "$T/m"
safetensors "$T/m/model.safetensors" '{"a":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551616]}}' 16

. "$LIB"
copy_model "$MODEL" "$T/m"
safetensors "$T/m/model.safetensors" '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}' 32

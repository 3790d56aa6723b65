. "$LIB"
copy_model "$MODEL" "$T/m"
safetensors "$T/m/model.safetensors" '{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}}' 16

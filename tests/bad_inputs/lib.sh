# Helpers for the gen.sh scripts of the bad-input cases (sourced from "$LIB").

# Writes the 8 bytes of N (< 2^63) little-endian to standard output.
u64le() {
    n=$1 i=0
    while [ $i -lt 8 ]; do
        printf "\\$(printf %03o $((n & 255)))"
        n=$((n >> 8)) i=$((i + 1))
    done
}

# safetensors FILE HEADER DATA_BYTES: a safetensors file with that JSON
# header and DATA_BYTES zero bytes of tensor data.
safetensors() {
    { u64le ${#2}; printf '%s' "$2"; head -c "$3" /dev/zero; } > "$1"
}

# Copies the model folder $1 to $2 (a folder that must not exist yet).
copy_model() {
    cp -R "$1" "$2"
}

# nested N OPEN CLOSE: N copies of OPEN then N of CLOSE (deep JSON).
nested() {
    yes "$2" | head -n "$1" | tr -d '\n'
    yes "$3" | head -n "$1" | tr -d '\n'
}

# One line of 100 MB: a single 100,000,000-letter word and a newline.
{ head -c 100000000 /dev/zero | tr '\0' a; echo; } > "$T/big.txt"

# One line of 100 MB of Devanagari and Latin words: normalized in one piece.
{ yes 'abc नमस्ते' | head -n 4400000 | tr '\n' ' '; echo; } > "$T/big.txt"

# A float32 .npy of 1 row x 4 columns, for 2 input lines.
h="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
{ printf '\223NUMPY\1\0'; printf 'v\0'; printf '%-117s\n' "$h"; head -c 16 /dev/zero; } > "$T/v.npy"

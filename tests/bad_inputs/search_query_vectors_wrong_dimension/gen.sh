# One query vector of dimension 4 for an index of dimension 32.
h="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
{ printf '\223NUMPY\1\0'; printf 'v\0'; printf '%-117s\n' "$h"; printf '\0\0\200\77\0\0\0\0\0\0\0\0\0\0\0\0'; } > "$T/q.npy"

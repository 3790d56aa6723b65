#!/bin/sh
# Instructions per input byte of lipi's encoder (deterministic, unlike time
# on a shared machine), counted by valgrind's callgrind:
#
#   sh bench/encode_ipb.sh BUILD TOKENIZER TEXT
#
# BUILD/bench_encode (made by bench/encode.sh) encodes TEXT twice (the
# warm-up and one timed run); the figure is the inclusive instruction count
# of lipi_encode_batch over 2 x the bytes of TEXT without newlines, and
# "pretok" the part spent in the pre-tokenizer. Loading is not counted.
# The RESULTS.md figures use the first 1 MB of bench/encode.sh's text:
#   head -c 1000000 $BENCH_TMP/encode20.txt | sed '$d' > mixed1.txt
set -eu
B=$1 T=$2 F=$3
bytes=$(tr -d '\n' < "$F" | wc -c)
out=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$out" "$B/bench_encode" -t "$T" --runs 1 "$F" \
  > /dev/null 2>&1
count() {
  callgrind_annotate --inclusive=yes "$out" 2>/dev/null | grep "$1" | head -1 |
    awk '{ gsub(",", "", $1); print $1 }'
}
all=$(count "encoder/batch.c:lipi_encode_batch \[")
pt=$(count "tokenizer/pretokenize.c:lipi_pretokenize\(_valid\)\? \[")
rm -f "$out"
echo "$(basename "$T") instructions/byte=$((all / (2 * bytes))) pretok=$((${pt:-0} / (2 * bytes)))"

#!/bin/sh
# Simulated cache misses of lipi's encoder (deterministic, unlike time on a
# shared machine, where the encoder mostly waits for memory):
#
#   sh bench/encode_cachesim.sh BUILD TOKENIZER TEXT [LL_BYTES]
#
# valgrind's callgrind simulates a 48 KB first-level data cache and a
# last-level cache of LL_BYTES (default 4 MB: what one process got of this
# VM's shared L3 in a pointer-chasing test) while BUILD/bench_encode encodes
# TEXT twice (the warm-up and one timed run); only lipi_encode_batch is
# counted, loading is not. Prints instructions, first-level and last-level
# read misses per 1000 input bytes. The session 4 figures used every 10th
# line of bench/encode.sh's text:
#   awk 'NR % 10 == 0' $BENCH_TMP/encode20.txt > sample2.txt
set -eu
B=$1 T=$2 F=$3 LL=${4:-4194304}
bytes=$(tr -d '\n' < "$F" | wc -c)
out=$(mktemp)
valgrind --tool=callgrind --cache-sim=yes --D1=49152,12,64 --I1=32768,8,64 \
  --LL="$LL,16,64" --toggle-collect=lipi_encode_batch --callgrind-out-file="$out" \
  "$B/bench_encode" -t "$T" --runs 1 "$F" > /dev/null 2>&1
# Totals: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
callgrind_annotate --show-percs=no "$out" 2>/dev/null | grep "PROGRAM TOTALS" | tr -d ',' |
  awk -v b="$bytes" -v t="$(basename "$T")" '{
    printf "%s instructions/kB=%.0f D1_read_misses/kB=%.1f LL_read_misses/kB=%.2f LL_write_misses/kB=%.2f\n",
      t, $1 / (2 * b) * 1000, $5 / (2 * b) * 1000, $8 / (2 * b) * 1000, $9 / (2 * b) * 1000 }'
rm -f "$out"

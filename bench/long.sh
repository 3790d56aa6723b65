#!/bin/sh
# Long inputs: one sequence of $LONG_L tokens (default 8,192) through
# ModernBERT-base's shape (22 layers, window 128, a global layer every 3rd)
# and BERT-base's with an 8,192-row position table, random weights: lipi
# (tiled attention, online softmax) against PyTorch with the score matrices
# materialized (bench/long_anchor.py), both F32 on $LONG_THREADS threads.
#
#   sh bench/long.sh [BUILD]
#
# Columns: wall and CPU seconds of the one forward pass, peak RSS of the
# process, and for lipi the RSS the pass added to the loaded weights. The
# last lines compare the hidden states (largest absolute difference).
# PyTorch holds a (12, L, L) float32 score matrix per layer (3.2 GB at
# 8,192 tokens) plus its softmax; lipi's attention scratch is
# threads x LIPI_ATT_WORK(64) floats (~100 KB per thread).
set -eu
BUILD=${1:-build}
. bench/common.sh
L=${LONG_L:-8192}
T=${LONG_THREADS:-2}
MODELS=${LONG_MODELS:-modernbert bert}
PY=/usr/bin/python3
D=$BENCH_TMP/long
mkdir -p "$D"
"$PY" -c 'import torch' 2>/dev/null || apt-get install -y -qq python3-torch >/dev/null
make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/long.c "$BUILD/liblipi.a" -o "$BUILD/bench_long" \
  $(bench_libs)

R=$D/results.txt
: > "$R"
for m in $MODELS; do
  "$PY" bench/long_anchor.py make "$D/$m" "$m"
  "$BUILD/bench_long" "$D/$m" "$L" "$T" "$D/lipi_$m.f32" | tee -a "$R"
  "$PY" bench/long_anchor.py run "$D/$m" "$L" "$T" "$D/pytorch_$m.f32" | tee -a "$R"
  "$PY" -c '
import sys, numpy as np
a = np.fromfile(sys.argv[1], "<f4"); b = np.fromfile(sys.argv[2], "<f4")
print("%s: lipi vs pytorch hidden states, max abs difference %.3g (of max |x| %.3g)"
      % (sys.argv[3], np.abs(a - b).max(), np.abs(b).max()))' \
    "$D/lipi_$m.f32" "$D/pytorch_$m.f32" "$m" | tee -a "$R"
done
echo
echo "| model | tool | tokens | threads | wall s | CPU s | peak RSS MB | added by the pass MB | PyTorch wall / lipi wall |"
echo "|---|---|---|---|---|---|---|---|---|"
awk '
$1 == "lipi" { lw[$2] = $5; printf "| %s | lipi | %s | %s | %s | %s | %.0f | %.0f | |\n", $2, $3, $4, $5, $6, $7 / 1024, ($7 - $8) / 1024 }
$1 == "pytorch" { printf "| %s | PyTorch | %s | %s | %s | %s | %.0f | | %.2f |\n", $2, $3, $4, $5, $6, $7 / 1024, (lw[$2] > 0 ? $5 / lw[$2] : 0) }
' "$R"

#!/bin/sh
# Search throughput (bench/search.c): 1,000,000 x 384 random unit vectors,
# 1,000 queries, k = 10, 2 threads. lipi's exact search against FAISS's
# exact IndexFlatIP (with the kernels Debian's OpenBLAS picks by itself, any
# OPENBLAS_CORETYPE in the environment removed, and with
# OPENBLAS_CORETYPE=SkylakeX, its AVX-512 kernels), then QPS and
# recall@10 of FAISS HNSW32 and IVF1024,Flat. Peak RSS of each process from
# /usr/bin/time -v (FAISS's includes building or loading its index), and of
# the search phase alone (VmHWM reset before searching). The vectors are generated once into $SEARCH_BENCH_DIR
# (default /tmp/lipi-bench-search-N-D-NQ, about 1.6 GB for the default size)
# and the approximate FAISS indexes are cached there too, as are lipi's
# quantized indexes (index-int8, index-binary: 1.6 GB each, their float32
# vectors included). Quantized rows: size of the codes, QPS and recall@10
# against lipi exact without rescoring and rescored from INT8_MULTS /
# BINARY_MULTS x k candidates (default 4 10 40 / 1 4 10 40 100): int8
# scored with the query's weights (default) and codes; binary split at the
# rows' means (default) and at 0 (sentence-transformers' ubinary), each
# scored with the query's weights (default) and bits (Hamming); next to
# FAISS IndexBinaryFlat over the sign bits at 0 and FAISS SQ8 (alone, and
# refined by its float32 vectors from 4 x k and 10 x k, "SQ8,RFlat") on the
# first SQ8_QUERIES queries (default 100: Debian's FAISS scans SQ8 at about
# 24 queries per CPU-second over 100K vectors; the rows say "(100 q)"),
# SQ8_RUNS timed runs after the warm-up (default 1).
#   N, D, NQ, K, THREADS, RUNS override the sizes; SKIP_QUANT=1 skips the
#   quantized rows; SKIP_HNSW=1 skips HNSW32
#   (building it over 1M vectors takes a long time on 2 cores);
#   bench/search_text.sh sets SEARCH_BENCH_DIR to its real-text vectors and
#   SEARCH_LABEL to say what they are.
set -eu
BUILD=${1:-build}
N=${N:-1000000}
D=${D:-384}
NQ=${NQ:-1000}
K=${K:-10}
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
INT8_MULTS=${INT8_MULTS:-4 10 40}
BINARY_MULTS=${BINARY_MULTS:-1 4 10 40 100}
SQ8_QUERIES=${SQ8_QUERIES:-100}
SQ8_RUNS=${SQ8_RUNS:-1}
DIR=${SEARCH_BENCH_DIR:-${TMPDIR:-/tmp}/lipi-bench-search-$N-$D-$NQ}
BIN="$BUILD/bench_search"

make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" >/dev/null
# OpenBLAS by name: bench/search.c asks it for its kernel (lipi itself opens it at run time).
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/search.c "$BUILD/liblipi.a" -o "$BIN" $(make -s --no-print-directory print-libs) \
  $(pkg-config --libs openblas)

if [ ! -f "$DIR/index/meta.json" ] || [ ! -f "$DIR/queries.npy" ]; then
  echo "generating $N x $D random unit vectors and $NQ queries in $DIR ..."
  "$BIN" gen "$DIR" "$N" "$D" "$NQ"
fi

echo "search: $N x $D float32 ${SEARCH_LABEL:-random unit vectors} ($(du -sh "$DIR/index/vectors.npy" | cut -f1)), $NQ queries, k=$K, threads=$THREADS, $(cc --version | head -1), -O2, runs=$RUNS (median after a warm-up)"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; shared machine: absolute times are noisy"

out="$DIR/results.txt"
: >"$out"
# measure LABEL CMD...: runs CMD under /usr/bin/time -v, prints its output and peak RSS.
measure() {
  label=$1
  shift
  /usr/bin/time -v -o "$DIR/time.txt" "$@" | tee -a "$out"
  rss=$(awk '/Maximum resident set size/ {print $NF}' "$DIR/time.txt")
  echo "  peak RSS $((rss / 1024)) MiB  ($label)" | tee -a "$out"
}
threads="OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS"
measure "lipi exact" "$BIN" lipi "$DIR" "$K" "$THREADS" "$RUNS"
measure "faiss Flat, OpenBLAS's own choice of kernels" env -u OPENBLAS_CORETYPE $threads \
  "$BIN" faiss "$DIR" Flat "$K" "$THREADS" "$RUNS"
measure "faiss Flat, OPENBLAS_CORETYPE=SkylakeX" env $threads OPENBLAS_CORETYPE=SkylakeX \
  "$BIN" faiss "$DIR" Flat "$K" "$THREADS" "$RUNS"
measure "faiss IVF1024,Flat" env $threads OPENBLAS_CORETYPE=SkylakeX \
  "$BIN" faiss "$DIR" IVF1024,Flat "$K" "$THREADS" "$RUNS" nprobe=1 nprobe=16 nprobe=64
if [ "${SKIP_QUANT:-0}" != 1 ]; then
  measure "lipi int8" "$BIN" quant "$DIR" int8 "$K" "$THREADS" "$RUNS" $INT8_MULTS
  measure "lipi int8, query codes" "$BIN" quant "$DIR" int8-codes "$K" "$THREADS" "$RUNS" $INT8_MULTS
  for v in binary binary-bits binary-zero binary-zero-bits; do
    measure "lipi $v" "$BIN" quant "$DIR" $v "$K" "$THREADS" "$RUNS" $BINARY_MULTS
  done
  measure "faiss BinaryFlat" env $threads "$BIN" faiss-binary "$DIR" "$K" "$THREADS" "$RUNS"
  measure "faiss SQ8" env $threads OPENBLAS_CORETYPE=SkylakeX SEARCH_QUERIES=$SQ8_QUERIES \
    "$BIN" faiss "$DIR" SQ8 "$K" "$THREADS" "$SQ8_RUNS"
  measure "faiss SQ8,RFlat" env $threads OPENBLAS_CORETYPE=SkylakeX SEARCH_QUERIES=$SQ8_QUERIES \
    "$BIN" faiss "$DIR" SQ8,RFlat "$K" "$THREADS" "$SQ8_RUNS" k_factor_rf=4 k_factor_rf=10
fi
if [ "${SKIP_HNSW:-0}" != 1 ]; then
  measure "faiss HNSW32" env $threads OPENBLAS_CORETYPE=SkylakeX \
    "$BIN" faiss "$DIR" HNSW32 "$K" "$THREADS" "$RUNS" efSearch=16 efSearch=64 efSearch=256
fi

awk '/^lipi exact/ {l = $4} /^faiss Flat/ {f[++n] = $4}
     END { if (l && n) { printf "lipi exact / FAISS Flat QPS: %.2fx (OpenBLAS auto)", l / f[1];
                         if (n > 1) printf ", %.2fx (SkylakeX kernels)", l / f[2]; printf "\n" } }' "$out"
# Every row against lipi exact: QPS (wall) and queries per CPU-second (the
# figure to read on a shared machine), recall@k against lipi exact.
awk '/ QPS / { for (i = 1; i <= NF; i++) { if ($i == "QPS") q = $(i - 1)
                 if ($i == "queries" && $(i + 1) == "per") c = $(i - 1) }
               sub(/^\(/, "", c); lab = substr($0, 1, 42); sub(/ +$/, "", lab); gsub(/  +/, " ", lab)
               rec = ($(NF - 1) == "recall@k") ? $NF : "-"
               if (lab ~ /^lipi exact/) { eq = q; ec = c }
               n++; L[n] = lab; Q[n] = q; C[n] = c; R[n] = rec }
     END { if (!eq) exit
           printf "\n| row | QPS | x exact | queries/CPU-s | x exact | recall@k |\n|---|---|---|---|---|---|\n"
           for (i = 1; i <= n; i++)
             printf "| %s | %.1f | %.2f | %.0f | %.2f | %s |\n", L[i], Q[i], Q[i] / eq, C[i], C[i] / ec, R[i] }' "$out"

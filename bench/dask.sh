#!/bin/sh
# lipi.dask.count + training on a LocalCluster of 2 worker processes against
# `lipi count` + `lipi train --from-counts` on one machine (part of `make
# bench`, never of `make test`): the ~30 MB corpus of bench_corpus cut into
# 3 files at line starts, repeated to 30 shard files (300 MB), and the first
# 3 alone (30 MB) to show how memory grows. Prints wall times and peak RSS
# (the CLI's from /usr/bin/time; the driver's and each worker's from
# getrusage) and checks both give the same counts file; then
# bench/dask_work.py: the CPU seconds of count's tasks run one after another
# without Dask (TSV or counts runs between them), against `lipi count`.
#
#   sh bench/dask.sh [BUILD]        RUNS=3 (paired runs, median)  VOCAB=8000
set -eu
BUILD=${1:-build}
. bench/common.sh
if [ ! -d "$SHARED/mono" ]; then
  echo "bench/dask.sh: $SHARED/mono not found; skipped"
  exit 0
fi
PY=/usr/bin/python3
$PY -c 'import distributed' 2>/dev/null || { echo "bench/dask.sh: python3-distributed missing; skipped"; exit 0; }
[ -x /usr/bin/time ] || apt-get install -y -qq time >/dev/null
make --no-print-directory BUILD="$BUILD" python >/dev/null
CORPUS=$(bench_corpus)
D=$BENCH_TMP/dask
if [ ! -f "$D/stamp" ]; then
  rm -rf "$D" && mkdir -p "$D"
  # three ~10 MB pieces cut at line starts, then 10 copies of each
  n=$(wc -l < "$CORPUS")
  split -d -a 1 -l $(( (n + 2) / 3 )) "$CORPUS" "$D/piece"
  for r in 0 1 2 3 4 5 6 7 8 9; do
    for p in 0 1 2; do cp "$D/piece$p" "$D/shard$r$p.txt"; done
  done
  touch "$D/stamp"
fi
echo "# dask: $($PY -c 'import distributed; print("distributed", distributed.__version__)'); load average: $(cut -d' ' -f1-3 /proc/loadavg); 2 cores shared with other jobs"
PYTHONPATH="$BUILD/python" $PY bench/dask_count.py "$BUILD/lipi" "$D" "$RUNS" "${VOCAB:-8000}"
PYTHONPATH="$BUILD/python" $PY bench/dask_work.py "$BUILD/lipi" "$D"

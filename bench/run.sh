#!/bin/sh
# `make bench`: runs every benchmark script bench/*.sh (except this one) in
# name order. Each prints its own header line, table and ratios against the
# anchor tools measured in the same run. Benchmarks never run in `make test`.
set -u
BUILD=${1:-build}
export BUILD
status=0
found=0
for b in bench/*.sh; do
  [ "$b" = bench/run.sh ] && continue
  [ -f "$b" ] || continue
  found=1
  echo "=== $b"
  sh "$b" "$BUILD" || { echo "benchmark $b failed" >&2; status=1; }
done
[ "$found" = 1 ] || echo "no benchmarks in bench/"
exit $status

#!/bin/sh
# `make fuzz`: runs each libFuzzer harness in turn for SECONDS seconds.
#   tests/fuzz/run.sh BUILD SECONDS HARNESS...
# Seeds: tests/fuzz/corpus/<h> and tests/fuzz/regressions/<h>; new inputs go
# to BUILD/fuzz-corpus/<h> (never into the repository), crash files to
# BUILD/fuzz-crashes/<h>/, the log to BUILD/fuzz-logs/<h>.log. A harness that
# finds something fails the run; copy its crash file into
# tests/fuzz/regressions/<h>/ once fixed, so `make test` replays it.
# FUZZ_JOBS=2 runs two harnesses at a time.
set -u
build=$1; seconds=$2; shift 2
# Harnesses that open tokenizers by path would fill the table cache with a
# file per input; the one that fuzzes the cache sets its own folder.
export LIPI_CACHE=0
jobs=${FUZZ_JOBS:-1}
mkdir -p "$build/fuzz-logs"

run_one() {
  h=$1
  mkdir -p "$build/fuzz-corpus/$h" "$build/fuzz-crashes/$h"
  set -- "$build/fuzz-corpus/$h"
  for d in tests/fuzz/corpus/$h tests/fuzz/regressions/$h; do
    [ -d "$d" ] && set -- "$@" "$d"
  done
  dict=""
  [ -f "tests/fuzz/$h.dict" ] && dict="-dict=tests/fuzz/$h.dict"
  nice -n 10 "$build/fuzz_$h" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-crashes/$h/" $dict "$@" \
    >"$build/fuzz-logs/$h.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz-logs/$h.log")
  last=$(grep -aE '^#[0-9]+' "$build/fuzz-logs/$h.log" | tail -n 1)
  cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  if [ "$rc" = 0 ]; then
    printf 'fuzz %-16s ok      execs %-10s cov %-6s ft %s\n' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}"
  else
    printf 'fuzz %-16s FAILED  execs %-10s cov %-6s ft %s (log %s)\n' "$h" "${execs:-?}" \
      "${cov:-?}" "${ft:-?}" "$build/fuzz-logs/$h.log"
    grep -aE 'ERROR|SUMMARY|Test unit written|abort' "$build/fuzz-logs/$h.log" | head -n 8
    return 1
  fi
}

failed=0
if [ "$jobs" -le 1 ]; then
  for h in "$@"; do run_one "$h" || failed=1; done
else
  # Two at a time: start pairs and wait for both.
  while [ $# -gt 0 ]; do
    run_one "$1" & p1=$!
    p2=""
    if [ $# -gt 1 ]; then run_one "$2" & p2=$!; shift; fi
    shift
    wait $p1 || failed=1
    [ -n "$p2" ] && { wait $p2 || failed=1; }
  done
fi
[ "$failed" = 0 ]

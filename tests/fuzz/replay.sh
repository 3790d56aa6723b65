#!/bin/sh
# `make test`: replays the committed seeds and every regression file of each
# harness through its replay binary (no libFuzzer needed).
#   tests/fuzz/replay.sh BUILD HARNESS...
build=$1; shift
failed=0
for h in "$@"; do
  set --
  for d in tests/fuzz/corpus/$h tests/fuzz/regressions/$h; do
    [ -d "$d" ] && set -- "$@" "$d"
  done
  [ $# -eq 0 ] && continue
  "$build/fuzz_replay_$h" "$@" || { echo "FAILED: fuzz replay $h" >&2; failed=1; }
done
[ "$failed" = 0 ]

#!/bin/sh
# `make test`: replays the committed seeds and every regression file of each
# harness through its replay binary (no libFuzzer needed), one input per
# run, so that each input is one case and a finding names its file.
#   tests/fuzz/replay.sh BUILD HARNESS...
# or, from tests/run_tests.sh, REPLAY_BUILD and REPLAY_HARNESSES in the
# environment.
[ $# -eq 0 ] && set -- "${REPLAY_BUILD:-build}" ${REPLAY_HARNESSES:-}
build=$1; shift
passed=0 failed=0
for h in "$@"; do
  for f in tests/fuzz/corpus/$h/* tests/fuzz/regressions/$h/*; do
    [ -f "$f" ] || continue
    if out=$("$build/fuzz_replay_$h" "$f" 2>&1); then
      passed=$((passed + 1))
    else
      printf '%s\nFAILED: fuzz replay %s %s\n' "$out" "$h" "$f" >&2
      failed=$((failed + 1))
    fi
  done
done
echo "fuzz replay: $passed passed, $failed failed, 0 skipped"
[ "$failed" = 0 ]

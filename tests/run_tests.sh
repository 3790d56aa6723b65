#!/bin/sh
# Runs every test binary (or .sh test script) given, keeps going after a
# failure, and fails at the end if any failed. cmocka prints its own summary
# per binary, the scripts theirs.
failed=0; passed=0
for t in "$@"; do
  case $t in *.sh) runner=sh ;; *) runner= ;; esac
  if $runner "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $t" >&2; fi
done
echo "tests: $passed passed, $failed failed"
[ "$failed" = 0 ]

#!/bin/sh
# Runs every test binary given, keeps going after a failure, and fails at the end
# if any binary failed. cmocka prints its own summary per binary.
failed=0; passed=0
for t in "$@"; do
  if "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $t" >&2; fi
done
echo "binaries: $passed passed, $failed failed"
[ "$failed" = 0 ]

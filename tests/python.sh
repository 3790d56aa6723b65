#!/bin/sh
# The Python package's tests (tests/python/, pytest) against the extension
# `make python` built in $BUILD/python, importing it from there (nothing is
# installed). Prints the count line tests/run_tests.sh reads:
#
#   python: P passed, F failed, S skipped
#
#   LIPI_BIN=build/lipi sh tests/python.sh   (BUILD is LIPI_BIN's folder)
#
# A sanitizer build (LIPI_SAN_FLAGS set) skips: Debian's python3 is not
# built with ASan, so it cannot load an ASan-instrumented extension.
set -u
LIPI=${LIPI_BIN:-build/lipi}
BUILD=$(dirname "$LIPI")
PYTHON=${PYTHON:-/usr/bin/python3}
if [ -n "${LIPI_SAN_FLAGS:-}" ]; then
    echo "SKIP python: a sanitizer build (python3 cannot load an ASan extension)"
    echo "python: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
LOG=$(mktemp "${TMPDIR:-/tmp}/lipi-pytest.XXXXXX") || exit 1
trap 'rm -f "$LOG"' EXIT
PYTHONPATH="$BUILD/python" LIPI_BIN="$LIPI" PYTHONDONTWRITEBYTECODE=1 \
    "$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/python >"$LOG" 2>&1
rc=$?
cat "$LOG"
# pytest's summary: "3 failed, 40 passed, 2 skipped in 5.1s" (any order).
summary=$(tail -n 1 "$LOG")
count_of() { echo "$summary" | grep -o "[0-9]* $1" | cut -d' ' -f1; }
p=$(count_of passed) f=$(count_of failed) e=$(count_of error) s=$(count_of skipped)
p=${p:-0} f=$((${f:-0} + ${e:-0})) s=${s:-0}
# Reasons of skips, as the C tests print them ("SKIP <case>: <reason>").
sed -n 's/^SKIPPED \[\([0-9]*\)\] \([^:]*\):[0-9]*: \(.*\)$/SKIP \2: \3/p' "$LOG"
if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    f=1 # pytest failed without a failed test: a collection or usage error
fi
echo "python: $p passed, $f failed, $s skipped"

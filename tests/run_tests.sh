#!/bin/sh
# Runs every test given and counts test cases across all of them:
#
#   tests/run_tests.sh TEST...
#
# A TEST is a cmocka binary, whose cases are read from its "[ RUN ]" /
# "[ OK ]" / "[ SKIPPED ]" / "[ FAILED ]" lines, or a .sh script (run with
# sh, no arguments) whose last count line reads
# "<name>: P passed, F failed, S skipped". A skipped case prints
# "SKIP <case>: <reason>" (SKIP_BECAUSE in tests/refdata.h, the scripts by
# hand); the reasons are listed with their counts above the closing line
#
#   tests: N passed, N failed, N skipped
#
# which CI reads. A binary that dies inside a case (a crash, an abort, a
# sanitizer report), so that cmocka never closes it, counts that case as
# failed; a test that exits non-zero without a failed case counts one. Keeps
# going after a failure; exits 1 if anything failed.
set -u
LOG=$(mktemp "${TMPDIR:-/tmp}/lipi-tests.XXXXXX") || exit 1
REASONS=$(mktemp "${TMPDIR:-/tmp}/lipi-skips.XXXXXX") || exit 1
# Tests never write to the real home: the table cache (tokenizer/tabcache.c)
# goes to a folder of this run, removed at the end.
XDG_CACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/lipi-cache.XXXXXX") || exit 1
export XDG_CACHE_HOME
unset LIPI_CACHE_DIR LIPI_CACHE
trap 'rm -f "$LOG" "$REASONS"; rm -rf "$XDG_CACHE_HOME"' EXIT
trap 'exit 130' INT TERM

passed=0 failed=0 skipped=0
for t in "$@"; do
    case $t in
    *.sh) sh "$t" >"$LOG" 2>&1 ;;
    *) "$t" >"$LOG" 2>&1 ;;
    esac
    rc=$?
    cat "$LOG"
    case $t in
    *.sh)
        counts=$(sed -n 's/^[^:]*: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' \
                 "$LOG" | tail -n 1) ;;
    *)
        # Result lines count only inside a case: cmocka's closing summary
        # lists the failed and skipped cases again.
        counts=$(awk '
            /^\[ RUN      \] /                 { open = 1; next }
            open && /^\[       OK \] /         { p++; open = 0 }
            open && /^\[  SKIPPED \] /         { s++; open = 0 }
            open && /^\[  FAILED  \] /         { f++; open = 0 }
            END { print p + 0, f + open, s + 0 }' "$LOG") ;;
    esac
    read -r p f s <<EOF
${counts:-0 0 0}
EOF
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        f=1
    fi
    if [ "$f" != 0 ]; then
        echo "FAILED: $t ($f failed, exit status $rc)" >&2
    fi
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    sed -n 's/^SKIP [^:]*: //p' "$LOG" >> "$REASONS"
done

# One line per reason, the most frequent first; skips that gave none too.
sort "$REASONS" | uniq -c | sort -k1,1nr -k2 |
    while read -r n why; do echo "skipped $n: $why"; done
given=$(wc -l < "$REASONS")
if [ "$skipped" -gt "$given" ]; then
    echo "skipped $((skipped - given)): no reason printed"
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]

#!/bin/sh
# Runs the bad-input catalogue: every folder next to this script is one case.
#
#   tests/bad_inputs/run.sh [CASE...]     (LIPI_BIN names the lipi to run,
#                                          default build/lipi)
#
# A case folder holds:
#   cmd     the arguments of one `lipi` command line (shell syntax, may redirect
#           standard input). Placeholders: @CASE@ the case folder, @TMP@ a fresh
#           empty folder for this case, @MODEL@ / @MODEL_B@ two tiny model
#           folders with different vocabularies, @INDEX@ a small index made
#           by @MODEL@ (each case gets its own copy).
#   exit    the expected exit status (0 ok, 1 bad input, 2 usage).
#   expect  a fragment that standard error must contain (fixed string; an
#           empty file accepts any message).
#   stdout  optional: the exact bytes standard output must hold.
#   gen.sh  optional: run first as `sh gen.sh` with CASE, T (= @TMP@), MODEL,
#           MODEL_B, INDEX and LIB (tests/bad_inputs/lib.sh, helpers for
#           binary files) in the environment, to make inputs too big or too
#           odd to commit. Exit status 77 skips the case; its output says why.
#
# Every case fails when lipi is killed by a signal or times out, when a
# sanitizer reports anything, when the exit status or message differ, and -
# for a command with -o/--output that fails - when the output path or
# anything else in its folder changed (no partial output, no temporary file
# left behind).
set -u
LIPI=${LIPI_BIN:-build/lipi}
case $LIPI in /*) ;; *) LIPI=$(pwd)/$LIPI ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
TIMEOUT=${BAD_INPUT_TIMEOUT:-60}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lipi-bad.XXXXXX") || exit 1
trap 'chmod -R u+rwx "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

if [ ! -x "$LIPI" ]; then
    echo "bad inputs: $LIPI is not built" >&2
    exit 1
fi

. "$HERE/lib.sh"
cd "$HERE/../.." || exit 1

MODEL=$WORK/shared/model
MODEL_B=$WORK/shared/model_b
INDEX=$WORK/shared/index
make_model "$MODEL" w && make_model "$MODEL_B" v || { echo "bad inputs: cannot make the models" >&2; exit 1; }
printf 'the cat sat on the mat\nthe dog ran in the park\nred sun\nblue moon\n' > "$WORK/shared/docs.txt"
if ! "$LIPI" index --quiet -m "$MODEL" -o "$INDEX" "$WORK/shared/docs.txt" 2>"$WORK/shared/err"; then
    echo "bad inputs: cannot make the index:" >&2
    cat "$WORK/shared/err" >&2
    exit 1
fi

pass=0 fail=0 skipped=0
failed_names=
if [ $# -gt 0 ]; then set -- "$@"; else set -- $(cd "$HERE" && ls -d */ | tr -d /); fi
for name in "$@"; do
    dir=$HERE/$name
    [ -f "$dir/cmd" ] || continue
    T=$WORK/cases/$name
    LOG=$WORK/logs/$name
    mkdir -p "$T" "$LOG"
    if grep -q INDEX "$dir/cmd" "$dir/gen.sh" 2>/dev/null; then
        cp -R "$INDEX" "$WORK/cases/$name.index"
    fi
    why=
    if [ -f "$dir/gen.sh" ]; then
        CASE=$dir T=$T MODEL=$MODEL MODEL_B=$MODEL_B INDEX=$WORK/cases/$name.index \
            LIB=$HERE/lib.sh LIPI=$LIPI sh "$dir/gen.sh" >"$LOG/gen" 2>&1
        g=$?
        if [ $g = 77 ]; then
            echo "SKIP $name: $(cat "$LOG/gen")"
            skipped=$((skipped + 1))
            continue
        elif [ $g != 0 ]; then
            why="gen.sh failed ($g): $(cat "$LOG/gen")"
        fi
    fi
    cmd=$(sed -e "s|@CASE@|$dir|g" -e "s|@TMP@|$T|g" -e "s|@MODEL_B@|$MODEL_B|g" \
              -e "s|@MODEL@|$MODEL|g" -e "s|@INDEX@|$WORK/cases/$name.index|g" "$dir/cmd")
    want=$(cat "$dir/exit")
    frag=$(cat "$dir/expect" 2>/dev/null)
    # The -o/--output target of the command, if any.
    out=$(eval "set -- $cmd" 2>/dev/null </dev/null
          while [ $# -gt 0 ]; do
              case $1 in
              -o|--output) echo "$2"; break ;;
              --output=*) echo "${1#--output=}"; break ;;
              esac
              shift
          done)
    if [ -n "$out" ]; then
        parent=$(dirname "$out")
        snapshot "$out" > "$LOG/out.before"
        snapshot "$parent" > "$LOG/dir.before"
    fi
    if [ -z "$why" ]; then
        so=/dev/null
        [ -f "$dir/stdout" ] && so=$LOG/stdout
        timeout -k 5 "$TIMEOUT" sh -c "exec \"\$0\" $cmd" "$LIPI" >"$so" 2>"$LOG/stderr"
        rc=$?
        if [ $rc = 124 ] || [ $rc = 137 ]; then
            why="timed out after ${TIMEOUT}s"
        elif [ $rc -ge 128 ]; then
            why="killed by signal $((rc - 128))"
        elif grep -q -e 'Sanitizer' -e 'runtime error:' "$LOG/stderr"; then
            why="sanitizer report"
        elif [ "$rc" != "$want" ]; then
            why="exit status $rc, expected $want"
        elif [ -n "$frag" ] && ! grep -q -F -e "$frag" "$LOG/stderr"; then
            why="stderr lacks '$frag'"
        elif [ -f "$dir/stdout" ] && ! cmp -s "$dir/stdout" "$LOG/stdout"; then
            why="standard output differs from $name/stdout"
        elif [ -n "$out" ] && [ "$rc" != 0 ]; then
            if ! snapshot "$out" | cmp -s - "$LOG/out.before"; then
                why="the output $out changed although the command failed"
            elif ! snapshot "$parent" | cmp -s - "$LOG/dir.before"; then
                why="files appeared in or vanished from $parent: $(snapshot "$parent" | diff "$LOG/dir.before" - | grep '^[<>]' | head -5 | tr '\n' ' ')"
            fi
        fi
    fi
    if [ -z "$why" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        failed_names="$failed_names $name"
        echo "FAIL $name: $why" >&2
        echo "  lipi $cmd" >&2
        sed -n '1,8s/^/  | /p' "$LOG/stderr" >&2
    fi
    chmod -R u+rwx "$T" 2>/dev/null
    rm -rf "$T" "$WORK/cases/$name.index"
done
echo "bad inputs: $pass passed, $fail failed, $skipped skipped"
[ $fail = 0 ]

#!/bin/sh
# Interrupted runs leave nothing behind: `lipi embed`, `lipi index` and
# `lipi train` write over an output that already exists and get SIGINT,
# SIGTERM or SIGHUP in the middle of the run (embed and index once their
# temporary is on disk, train during its merges). Each must die of the
# signal (exit status 128 + its number: 130, 143, 129), leave the old output
# byte for byte, and leave no "<output>.tmp-*" in the folder (the cleanup of
# cli/signals.c; a SIGKILL, which cannot clean up, is tests/crash_safety.sh).
#
#   tests/signal_cleanup.sh    (LIPI_BIN names the lipi, default build/lipi)
set -u
LIPI=${LIPI_BIN:-build/lipi}
case $LIPI in /*) ;; *) LIPI=$(pwd)/$LIPI ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lipi-signal.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
cd "$HERE/.." || exit 1
. tests/bad_inputs/lib.sh

fails=0
fail() {
    echo "signal cleanup: FAIL: $*" >&2
    fails=$((fails + 1))
}

# A background job of a shell without job control starts with SIGINT
# ignored, and lipi keeps an ignored signal ignored (as nohup wants):
# give the job the default action back.
bg_env="env --default-signal=INT,TERM,HUP"

# wait_for file PATTERN | wait_for grep FILE REGEX: waits up to 30 s for a
# file matching the shell PATTERN, or a line of FILE matching REGEX; true
# when it came.
wait_for() {
    i=0
    while [ $i -lt 300 ]; do
        if [ "$1" = file ]; then
            for e in $2; do [ -e "$e" ] && return 0; done
        elif grep -q "$3" "$2" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# interrupt NAME SIG STATUS OUT READY... -- CMD...: runs CMD (which writes
# OUT, an existing output) in the background, waits until READY (arguments
# of wait_for), sends SIG and checks the status, OUT and its folder.
interrupt() {
    name=$1 sig=$2 want=$3 out=$4
    shift 4
    ready=
    while [ "$1" != -- ]; do ready="$ready $1"; shift; done
    shift
    dir=$(dirname "$out")
    snapshot "$out" > "$WORK/$name.old"
    $bg_env "$@" 2>"$WORK/$name.err" &
    pid=$!
    # shellcheck disable=SC2086 # READY is split into wait_for's arguments
    if ! wait_for $ready; then
        fail "$name: the run never got ready for the signal: $(cat "$WORK/$name.err")"
    fi
    kill -"$sig" $pid 2>/dev/null || fail "$name: the run ended before SIG$sig (make the input larger)"
    wait $pid 2>/dev/null
    rc=$?
    [ $rc = "$want" ] || fail "$name: exit status $rc after SIG$sig, expected $want"
    snapshot "$out" | cmp -s - "$WORK/$name.old" || fail "$name: SIG$sig changed $out"
    for e in "$dir"/*.tmp-* "$dir"/.*.tmp-*; do
        [ -e "$e" ] && fail "$name: SIG$sig left $e"
    done
    echo "signal cleanup: $name: SIG$sig -> exit $rc, old output kept, no temporaries"
}

make_model "$WORK/model" w || fail "cannot make the model"
for i in $(seq 40); do cat data/flores200/*.txt; done > "$WORK/docs.txt"
head -n 100 "$WORK/docs.txt" > "$WORK/small.txt"
mkdir "$WORK/out"

# --- embed: the .npy output --------------------------------------------------
"$LIPI" embed --quiet -m "$WORK/model" -o "$WORK/out/e.npy" "$WORK/small.txt" 2>/dev/null ||
    fail "embed: cannot write the first output"
for s in INT:130 TERM:143; do
    interrupt "embed" "${s%:*}" "${s#*:}" "$WORK/out/e.npy" file "$WORK/out/e.npy.tmp-*" -- \
        "$LIPI" embed --quiet --threads 2 -m "$WORK/model" -o "$WORK/out/e.npy" "$WORK/docs.txt"
done

# With one OpenBLAS thread (a one-core machine, OPENBLAS_NUM_THREADS=1) no
# thread that a library started before main() is there to take the signal:
# cli/signals.c's own thread must.
interrupt "embed, OPENBLAS_NUM_THREADS=1" INT 130 "$WORK/out/e.npy" file "$WORK/out/e.npy.tmp-*" -- \
    env OPENBLAS_NUM_THREADS=1 "$LIPI" embed --quiet --threads 2 -m "$WORK/model" -o "$WORK/out/e.npy" "$WORK/docs.txt"

# --- index: the new folder beside the old index ------------------------------
"$LIPI" index --quiet -m "$WORK/model" -o "$WORK/out/idx" "$WORK/small.txt" ||
    fail "index: cannot write the first index"
for s in INT:130 TERM:143 HUP:129; do
    interrupt "index" "${s%:*}" "${s#*:}" "$WORK/out/idx" file "$WORK/out/idx.tmp-*" -- \
        "$LIPI" index --quiet --threads 2 -m "$WORK/model" -o "$WORK/out/idx" "$WORK/docs.txt"
done

# --- train: signalled while merging (its temporary exists only at the save) --
devanagari_corpus 20000 1 > "$WORK/corpus.txt"
"$LIPI" train --quiet --vocab-size 500 -o "$WORK/out/tok.json" "$WORK/small.txt" ||
    fail "train: cannot write the first output"
for s in INT:130 TERM:143; do
    interrupt "train" "${s%:*}" "${s#*:}" "$WORK/out/tok.json" grep "$WORK/train.err" '^counting:' -- \
        sh -c 'exec "$@" 2>"$0"' "$WORK/train.err" \
        "$LIPI" train --vocab-size 20000 --threads 2 -o "$WORK/out/tok.json" "$WORK/corpus.txt"
    rm -f "$WORK/train.err"
done

if [ $fails = 0 ]; then
    echo "signal cleanup: passed"
else
    echo "signal cleanup: $fails failures" >&2
    exit 1
fi

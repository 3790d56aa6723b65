#!/bin/sh
# Crash safety: `lipi train` and `lipi index` write over an output that
# already exists and are killed with SIGKILL at seeded random moments spread
# over a run. After every kill the output must be byte for byte the previous
# one or the complete new one (when the kill came after the final rename),
# never anything else, and the output's folder may hold nothing but the
# output and at most one temporary of it, named "<output>.tmp-" + 8 hex
# digits (files) or + 6 letters and digits (index folders). A SIGKILL cannot
# clean up, so such a temporary may stay; the next write of the same output
# removes it (the policy of lipi_remove_stale_temps, tokenizer/base.h),
# which the last, uninterrupted run of each command checks.
#
#   tests/crash_safety.sh      (LIPI_BIN names the lipi, default build/lipi;
#                               CRASH_SEED changes the moments, default 1;
#                               CRASH_KILLS the kills per command, default 10)
set -u
LIPI=${LIPI_BIN:-build/lipi}
case $LIPI in /*) ;; *) LIPI=$(pwd)/$LIPI ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
SEED=${CRASH_SEED:-1}
KILLS=${CRASH_KILLS:-10}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lipi-crash.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
cd "$HERE/.." || exit 1
. tests/bad_inputs/lib.sh

fails=0 passed=0 failed=0
fail() {
    echo "crash safety: FAIL: $*" >&2
    fails=$((fails + 1))
}

# One case per command: "begin", its checks, then "end" counts the case.
begin() { fails_before=$fails; }
end() {
    if [ $fails = $fails_before ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# KILLS moments in milliseconds, uniform over 5% .. 100% of $1 ms, seeded.
moments() {
    awk -v seed="$SEED$2" -v n="$KILLS" -v d="$1" \
        'BEGIN { srand(seed); for (i = 0; i < n; i++) printf "%d\n", d * (0.05 + 0.95 * rand()) }'
}

# sleep_ms N: sleeps N milliseconds.
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }

# check_folder DIR NAME PATTERN: DIR holds NAME and at most one entry
# matching the shell PATTERN, nothing else.
check_folder() {
    extra=0
    for e in "$1"/* "$1"/.[!.]*; do
        [ -e "$e" ] || continue
        b=${e##*/}
        [ "$b" = "$2" ] && continue
        case $b in
        $3) extra=$((extra + 1)) ;;
        *) fail "$4: unexpected entry $b in $1"; return ;;
        esac
    done
    [ $extra -le 1 ] || fail "$4: $extra temporaries of $2 in $1, expected at most one"
}

# crash NAME OUT PATTERN STALE LIVE CMD...: runs CMD (which writes OUT) to completion
# for the reference new output and its duration, then kills it at each
# moment and checks OUT and its folder. OUT holds the previous output.
# Before the last run, STALE (a temporary a killed writer left) and LIVE (one
# that a live writer holds locked) are planted next to OUT: the run must
# remove the first and leave the second.
crash() {
    name=$1 out=$2 pattern=$3 stale=$4 live=$5
    shift 5
    dir=$(dirname "$out")
    snapshot "$out" > "$WORK/$name.old"
    cp -R "$out" "$WORK/$name.keep"
    t0=$(now_ms)
    if ! "$@" 2>"$WORK/$name.err"; then
        fail "$name: the uninterrupted run failed: $(cat "$WORK/$name.err")"
        return
    fi
    d=$(($(now_ms) - t0))
    snapshot "$out" > "$WORK/$name.new"
    if cmp -s "$WORK/$name.old" "$WORK/$name.new"; then
        fail "$name: the new output equals the old one, so a kill could not be told apart"
        return
    fi
    echo "crash safety: $name: one run takes ${d} ms; killing at $(moments $d $name | tr '\n' ' ')ms"
    old_seen=0 new_seen=0
    for ms in $(moments $d $name); do
        rm -rf "$out"
        cp -R "$WORK/$name.keep" "$out"
        "$@" 2>/dev/null &
        pid=$!
        sleep_ms "$ms"
        kill -KILL $pid 2>/dev/null
        wait $pid 2>/dev/null
        snapshot "$out" > "$WORK/$name.now"
        if cmp -s "$WORK/$name.now" "$WORK/$name.old"; then
            old_seen=$((old_seen + 1))
        elif cmp -s "$WORK/$name.now" "$WORK/$name.new"; then
            new_seen=$((new_seen + 1))
        else
            fail "$name: killed at $ms ms, $out is neither the old nor the new output"
        fi
        check_folder "$dir" "${out##*/}" "$pattern" "$name (killed at $ms ms)"
    done
    echo "crash safety: $name: $old_seen kills left the old output, $new_seen the new one"
    # A run to the end replaces the output and removes the temporaries of
    # dead writers, not those of live ones.
    rm -rf "$out"
    cp -R "$WORK/$name.keep" "$out"
    cp -R "$WORK/$name.keep" "$dir/$stale"
    cp -R "$WORK/$name.keep" "$dir/$live"
    flock "$dir/$live" sleep 600 &
    holder=$!
    sleep_ms 100
    if ! "$@" 2>"$WORK/$name.err"; then
        fail "$name: the final run failed: $(cat "$WORK/$name.err")"
    fi
    kill $holder
    wait $holder 2>/dev/null
    snapshot "$out" | cmp -s - "$WORK/$name.new" || fail "$name: the final run wrote another output"
    [ -e "$dir/$live" ] || fail "$name: the final run removed $live, which a live writer held"
    rm -rf "${dir:?}/$live"
    for e in "$dir"/*; do
        [ "${e##*/}" = "${out##*/}" ] || fail "$name: $e left after an uninterrupted run"
    done
}

# --- train: 5,000 lines of random Devanagari syllable words ----------------
devanagari_corpus 5000 "$SEED" > "$WORK/corpus.txt"
head -n 500 "$WORK/corpus.txt" > "$WORK/small.txt"
mkdir "$WORK/train"
begin
if "$LIPI" train --quiet --vocab-size 1000 -o "$WORK/train/tok.json" "$WORK/small.txt"; then
    crash train "$WORK/train/tok.json" \
        'tok.json.tmp-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' \
        tok.json.tmp-0badc0de tok.json.tmp-1111aaaa "$LIPI" train --quiet --vocab-size 8000 --threads 2 -o "$WORK/train/tok.json" "$WORK/corpus.txt"
else
    fail "train: cannot write the first output"
fi
end

# --- index: 2,400 lines of FLORES-200 with the tiny fixture model -------------
begin
make_model "$WORK/model" w || fail "cannot make the model"
for i in 1 2 3; do cat data/flores200/*.txt; done > "$WORK/docs.txt"
mkdir "$WORK/indexes"
if "$LIPI" index --quiet -m "$WORK/model" -o "$WORK/indexes/idx" "$WORK/small.txt"; then
    crash index "$WORK/indexes/idx" 'idx.tmp-??????' idx.tmp-Stale1 idx.tmp-Live11 \
        "$LIPI" index --quiet --threads 2 -m "$WORK/model" -o "$WORK/indexes/idx" "$WORK/docs.txt"
else
    fail "index: cannot write the first index"
fi
end

echo "crash safety: $passed passed, $failed failed, 0 skipped"
[ $failed = 0 ]

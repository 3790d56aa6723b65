#!/bin/sh
# `lipi encode` as the user runs it (issue 20, items 1 and 6): whole
# processes on the 20 MB text of bench/encode.sh, cl100k_base, next to the
# library in-process and npm tiktoken's whole process, all in this run.
#
#   sh bench/cli.sh [BUILD]      RUNS=3 (runs per row, median)
#
# Rows, for --format ids and jsonl on 1 and 2 threads:
#   library: bench/encode (lipi_encode_batch, text in memory; for jsonl with
#     --want tokens,offsets, what that output holds), one run a round right
#     after the CLI's runs of its row, median MB/s of the RUNS rounds;
#   CLI: `lipi encode -t cl100k_base --threads T --format F TEXT > /dev/null`
#     minus the same on an empty file (the load), medians of RUNS alternating
#     runs: MB/s after load, and CLI ÷ library;
#   tiktoken: bench/cli_anchor.js, npm tiktoken's whole process writing the
#     same ids (single-threaded); lipi ÷ tiktoken compares whole processes
#     (wall), load included on both sides.
# MB/s: input bytes without newlines, 10^6 per MB; MB/CPU-s over the CPU
# time (user + system, all threads: steadier on a busy machine). Peak RSS from
# the child's rusage (whole processes) and bench/encode. Walls come from
# bench/load_time.py (0.1 ms resolution: /usr/bin/time's 10 ms steps were
# 4-6% of a 0.2 s run, too coarse to judge a 10% margin). Goal lines: issue 20
# asks the CLI to be within 10% of the library for ids (>= 0.91) and within
# 25% for jsonl (>= 0.80), on the same thread count; judged on wall time
# (the issue's measure; on a loaded machine read the CPU column beside it).
# Training's whole-process rows are in bench/train_bpe.sh, load times in
# bench/load.sh, embedding threads in bench/embed_threads.sh.
set -eu
BUILD=${1:-build}
. bench/common.sh
if [ ! -d "$SHARED/parallel/flores200/devtest" ] || [ ! -d "$SHARED/parallel/ntrex128" ]; then
  echo "bench/cli.sh: $SHARED/parallel not found; skipped"
  exit 0
fi
[ -x "$BUILD/lipi" ] || { echo "bench/cli.sh: build $BUILD/lipi first (make)" >&2; exit 1; }
bench_anchors
export ANCHORS
bench_encode_bin "$BUILD"
# timed NAME CMD...: one run appended to $TIMES, in the format of bench_time.
timed() {
  python3 bench/load_time.py "$TIMES" "$@" || exit 1
}
TEXT=$(bench_encode_text)
EMPTY=$BENCH_TMP/empty.txt
: > "$EMPTY"
BYTES=$(tr -d '\n' < "$TEXT" | wc -c)
LIB=$BENCH_TMP/cli_lib.$$
: > "$LIB"

# The tiktoken anchor and lipi must agree before anything is timed.
ANCHOR_IDS=$BENCH_TMP/cli_tiktoken.ids
node bench/cli_anchor.js cl100k_base "$TEXT" > "$ANCHOR_IDS"
"$BUILD/lipi" encode -t cl100k_base "$TEXT" | cmp -s - "$ANCHOR_IDS" ||
  { echo "bench/cli.sh: lipi encode and npm tiktoken give different ids" >&2; exit 1; }

# The library's runs alternate with the CLI's, one each a round: this VM's
# speed drifts by tens of percent over minutes, and a library measured
# after all the CLI runs read that drift as the CLI's ratio.
lib_run() {
  want=
  [ "$2" = jsonl ] && want="--want tokens,offsets"
  # shellcheck disable=SC2086
  "$BUILD/bench_encode" -t cl100k_base --threads "$1" --runs 1 $want "$TEXT" |
    awk -v f="$2" -v t="$1" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      print "lib_" f "_" t, v["MB/s"], v["peak_rss_MB"], v["MB/s_per_cpu_second"] }' >> "$LIB"
}
r=0
while [ "$r" -lt "$RUNS" ]; do
  r=$((r + 1))
  for th in 1 2; do
    for fmt in ids jsonl; do
      timed "cli_${fmt}_${th}_load" "$BUILD/lipi" encode -t cl100k_base --threads "$th" --format "$fmt" "$EMPTY"
      timed "cli_${fmt}_${th}" "$BUILD/lipi" encode -t cl100k_base --threads "$th" --format "$fmt" "$TEXT"
      lib_run "$th" "$fmt"
    done
  done
  timed tiktoken_load node bench/cli_anchor.js cl100k_base "$EMPTY"
  timed tiktoken node bench/cli_anchor.js cl100k_base "$TEXT"
done

echo "# text: $TEXT ($(wc -l < "$TEXT") lines, $BYTES bytes without newlines), cl100k_base, $RUNS runs" \
     "a row; load average: $(cut -d' ' -f1-3 /proc/loadavg); host steal during the runs: $(bench_steal)"
awk -v bytes="$BYTES" -v lib="$LIB" '
  function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  BEGIN { while ((getline line < lib) > 0) { split(line, fl, " "); lm[fl[1]] = lm[fl[1]] " " fl[2]; lc[fl[1]] = lc[fl[1]] " " fl[4]
            if (fl[3] + 0 > lrss[fl[1]] + 0) lrss[fl[1]] = fl[3] }
          for (k in lm) { lmbs[k] = median(lm[k]); lcpu[k] = median(lc[k]) } }
  { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4); rss[$1] = rss[$1] " " $5 }
  END {
    mb = bytes / 1e6
    tw = median(wall["tiktoken"]); tl = median(wall["tiktoken_load"])
    print "| format | threads | library MB/s | CLI s whole − load | CLI MB/s after load | CLI ÷ library | library MB/CPU-s | CLI MB/CPU-s after load | CLI ÷ library (CPU) | CLI peak RSS MB | library peak RSS MB | lipi ÷ tiktoken, whole process |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for (th = 1; th <= 2; th++) for (g = 1; g <= 2; g++) {
      f = g == 1 ? "ids" : "jsonl"; n = "cli_" f "_" th
      w = median(wall[n]); l = median(wall[n "_load"]); after = w - l
      cmbs = after > 0 ? mb / after : 0; L = lmbs["lib_" f "_" th]
      ratio[f, th] = L > 0 ? cmbs / L : 0
      vs = f == "ids" ? sprintf("%.1f×", tw / w) : "—"
      c = median(cpu[n]) - median(cpu[n "_load"]); ccpu = c > 0 ? mb / c : 0; LC = lcpu["lib_" f "_" th]
      printf "| %s | %d | %.1f | %.3f − %.3f = %.3f | %.1f | %.2f | %.1f | %.1f | %.2f | %.0f | %s | %s |\n", f, th, L,
        w, l, after, cmbs, ratio[f, th], LC, ccpu, (LC > 0 ? ccpu / LC : 0), median(rss[n]) / 1024,
        lrss["lib_" f "_" th], vs
    }
    c = median(cpu["tiktoken"]) - median(cpu["tiktoken_load"])
    printf "| tiktoken (npm, whole process) | 1 | | %.3f − %.3f = %.3f | %.1f | | | %.1f | | %.0f | | |\n", tw, tl,
      tw - tl, ((tw - tl) > 0 ? mb / (tw - tl) : 0), (c > 0 ? mb / c : 0), median(rss["tiktoken"]) / 1024
    print ""
    for (th = 1; th <= 2; th++) {
      printf "goal (issue 20): ids CLI ÷ library >= 0.91 on %d thread(s): %.2f, %s\n", th, ratio["ids", th],
        (ratio["ids", th] >= 0.91 ? "met" : "NOT met")
      printf "goal (issue 20): jsonl CLI ÷ library >= 0.80 on %d thread(s): %.2f, %s\n", th, ratio["jsonl", th],
        (ratio["jsonl", th] >= 0.80 ? "met" : "NOT met")
    }
  }' "$TIMES"
rm -f "$LIB" "$TIMES"

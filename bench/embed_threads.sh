#!/bin/sh
# Thread scaling of `lipi embed` as users run it (whole processes: load,
# tokenization, forward, .npy output), 1 against 2 threads, F32 and INT8,
# on short sentences (the common case: queries, titles, UI strings) and on
# long ones.
#
#   sh bench/embed_threads.sh [BUILD]     LINES=5400 RUNS=3 DTYPES="int8 f32"
#
# Model: bench/embed.sh's random MiniLM-L6-H384 checkpoint (made by
# bench/embed_anchor.py make) with multilingual BERT's vocab.txt. Sets, from
# FLORES-200 dev + devtest and NTREX-128 (all languages, file order), by
# their token counts under that vocab ([CLS] ... [SEP] included): "short" =
# every 4th line of 5..30 tokens, the first $LINES of them; "long" = every
# line of 64 tokens or more, the first $LINES / 4 of them, cut to 128 tokens
# (--max-length 128). Each (dtype, set) runs 1 and 2 threads alternately
# $RUNS times, after a warm-up of each; the table gives medians and the
# speed-up of the median walls. vcs = voluntary context switches of a run
# (/usr/bin/time %w): how often a thread slept waiting for the other, the
# synchronization a 2-thread run pays. The 1- and 2-thread .npy outputs are
# checked byte-identical first.
#
# What two cores of the machine allow: each run also starts two 1-thread
# processes at once, on the first and the second half of the set ("2
# procs"). They share nothing but the machine (its caches, memory and
# clock, and the host's other tenants) and never wait for each other, so
# their speed-up over one thread is a yardstick for what a 2-thread process
# can reach on that machine at that time; "2 thr / 2 procs" is the 2-thread
# process's wall over theirs (1.00: as fast as two separate processes).
set -eu
BUILD=${1:-build}
. bench/common.sh
LINES=${LINES:-5400}
PY=/usr/bin/python3
D=$BENCH_TMP/embed_threads
M=$D/minilm
mkdir -p "$M"
[ -x /usr/bin/time ] || apt-get install -y -qq time >/dev/null
"$PY" -c 'import torch' 2>/dev/null || apt-get install -y -qq python3-torch >/dev/null
make --no-print-directory BUILD="$BUILD" "$BUILD/lipi" >/dev/null
LIPI=$BUILD/lipi
VOCAB=data/vocab/bert-base-multilingual-cased/vocab.txt

"$PY" bench/embed_anchor.py make "$BENCH_TMP/embed/minilm" minilm
for f in config.json model.safetensors; do ln -sf "$BENCH_TMP/embed/minilm/$f" "$M/$f"; done
cp "$VOCAB" "$M/vocab.txt"

if [ ! -s "$D/long.txt" ]; then
  cat "$SHARED"/parallel/flores200/dev/*.txt "$SHARED"/parallel/flores200/devtest/*.txt \
    "$SHARED"/parallel/ntrex128/*.txt > "$D/all.txt"
  "$LIPI" encode -t "$VOCAB" --add-special-tokens --format ids "$D/all.txt" |
    awk '{ print NF }' > "$D/all.len"
  paste "$D/all.len" "$D/all.txt" | awk -F '\t' '$1 >= 5 && $1 <= 30 && ++k % 4 == 0' |
    cut -f 2- | head -n "$LINES" > "$D/short.txt"
  paste "$D/all.len" "$D/all.txt" | awk -F '\t' '$1 >= 64' | cut -f 2- |
    head -n $((LINES / 4)) > "$D/long.txt"
fi

R=$D/results.txt
: > "$R"
one() { # dtype set threads tag -> appends "dtype set threads wall cpu vcs" to $R
  /usr/bin/time -o "$D/time.txt" -f '%e %U %S %w' "$LIPI" embed -m "$M" --dtype "$1" \
    --threads "$3" --max-length 128 --quiet -o "$D/out_$1_$2_$3.npy" "$D/$2.txt" \
    2> "$D/embed.err" || { cat "$D/embed.err" >&2; exit 1; }
  [ "$4" = warm ] || record "$1 $2 $3"
}
# record "dtype set threads": appends it with the wall, CPU and vcs of time.txt to $R.
record() {
  read -r w u s v < "$D/time.txt"
  echo "$1 $w $(awk -v a="$u" -v b="$s" 'BEGIN { print a + b }') $v" >> "$R"
}
# pair dtype set: two 1-thread processes on the set's halves at once ->
# appends "dtype set P wall cpu vcs" (wall until both are done, CPU of both).
pair() {
  [ -s "$D/$2.half2" ] || {
    h=$(($(wc -l < "$D/$2.txt") / 2))
    head -n "$h" "$D/$2.txt" > "$D/$2.half1"
    tail -n +"$((h + 1))" "$D/$2.txt" > "$D/$2.half2"
  }
  /usr/bin/time -o "$D/time.txt" -f '%e %U %S %w' sh -c '
    "$1" embed -m "$2" --dtype "$3" --threads 1 --max-length 128 --quiet -o "$4.1.npy" "$5.half1" &
    p=$!
    "$1" embed -m "$2" --dtype "$3" --threads 1 --max-length 128 --quiet -o "$4.2.npy" "$5.half2" || exit 1
    wait "$p"' sh "$LIPI" "$M" "$1" "$D/out_$1_$2_P" "$D/$2" 2> "$D/embed.err" ||
    { cat "$D/embed.err" >&2; exit 1; }
  record "$1 $2 P"
}
for dt in ${DTYPES:-int8 f32}; do
  for set in short long; do
    one "$dt" "$set" 1 warm
    one "$dt" "$set" 2 warm
    cmp -s "$D/out_${dt}_${set}_1.npy" "$D/out_${dt}_${set}_2.npy" ||
      { echo "embed_threads: $dt $set: 1 and 2 threads differ" >&2; exit 1; }
    for r in $(seq "$RUNS"); do
      one "$dt" "$set" 1 run
      one "$dt" "$set" 2 run
      pair "$dt" "$set"
    done
  done
done

toks() { "$LIPI" encode -t "$VOCAB" --add-special-tokens --max-length 128 --format ids "$1" |
  awk '{ n += NF } END { print n }'; }
echo "# lipi embed, MiniLM-L6-H384 shape (random weights, mBERT vocab), whole processes;" \
  "short: $(wc -l < "$D/short.txt") lines, $(toks "$D/short.txt") tokens;" \
  "long: $(wc -l < "$D/long.txt") lines, $(toks "$D/long.txt") tokens; RUNS=$RUNS;" \
  "$(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1));" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); host steal during the runs: $(bench_steal)"
echo
echo "| dtype | set | 1 thread wall s | 2 threads wall s | speed-up | CPU s 1 / 2 threads | vcs 1 / 2 threads | 2 procs wall s (speed-up) | 2 thr / 2 procs |"
echo "|---|---|---|---|---|---|---|---|---|"
for dt in ${DTYPES:-int8 f32}; do
  for set in short long; do
    awk -v d="$dt" -v s="$set" '
      function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
          if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      $1 == d && $2 == s { k = $3 == "P" ? 3 : $3; n[k]++; w[k, n[k]] = $4; c[k, n[k]] = $5; v[k, n[k]] = $6 }
      END {
        for (k = 1; k <= 3; k++) { for (i = 1; i <= n[k]; i++) { x[i] = w[k, i]; y[i] = c[k, i]; z[i] = v[k, i] }
          W[k] = med(x, n[k]); C[k] = med(y, n[k]); V[k] = med(z, n[k]) }
        printf "| %s | %s | %.2f | %.2f | %.2fx | %.2f / %.2f | %d / %d | %.2f (%.2fx) | %.2f |\n",
          toupper(d), s, W[1], W[2], W[1] / W[2], C[1], C[2], V[1], V[2], W[3], W[1] / W[3],
          W[2] / W[3]
      }' "$R"
  done
done

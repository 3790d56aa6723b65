#!/bin/sh
# Encoding throughput against the anchors, in one run (part of `make bench`;
# never of `make test`).
#
#   sh bench/encode.sh [BUILD]          RUNS=3 (lipi runs per row, median)
#                                       ROUNDS=1 (rounds of every row)
#
# Text: a fixed 20 MB mixed-script file, $BENCH_TMP/encode20.txt: all 43
# FLORES-200 devtest files, then the 18 NTREX-128 files of ../shared/data
# (each set in file-name order), cut at 20,000,000 bytes and without the
# last, partial line (70,610 lines, 19.93 MB without newlines; 61 files in
# 20 scripts).
#
# Tokenizers, each lipi row next to the anchor with the same file:
#   GPT-2 byte-level BPE (vocab/gpt2/tokenizer.json)  - npm tokenizers 0.23.2
#   mBERT WordPiece (tokenizer.json made from vocab.txt, cased, as
#     tests/test_encoder.c makes it)                  - npm tokenizers 0.23.2
#   cl100k_base, o200k_base                           - npm tiktoken 1.0.22
#   laser_100k.model (SentencePiece Unigram)          - spm_encode (Debian)
#   a SentencePiece BPE .model (spm_train --model_type=bpe, vocab 8000, on
#     every 10th line of the text)                    - spm_encode (Debian)
#
# What is timed: lipi (bench/encode) and the npm anchors (bench/encode_anchor.js)
# time only their encoding loop inside the process, with the text already in
# memory and the tokenizer loaded; lipi encodes batches of 1000 lines with new
# sessions per timed run (empty word caches), the anchor calls encodeBatch on
# 1000 lines. spm_encode cannot be timed inside: its row
# is the whole process on the text minus the same process on an empty file
# (the load). Hugging Face runs encodeBatch with RAYON_NUM_THREADS=1 or 2;
# tiktoken's npm package and spm_encode are single-threaded, so they have a
# 1-thread row only and lipi's 2-thread row is compared with it.
#
# Every lipi row checks its ids against the anchor's ids for the same text:
# "mismatch" counts the lines that differ (0 = identical ids).
#
# ROUNDS > 1 runs every row (anchors and lipi, in the same order) that many
# times and keeps each row's fastest round: this VM's speed changes from
# minute to minute, lipi (waiting on memory) more than the anchors, and a
# slow minute should not decide a ratio. Both sides get the same number of
# chances; the ratio of every round is printed under the table.
#
# MB/s: input bytes without newlines, 10^6 per MB, over wall time;
# MB/CPU-s over the CPU time of all threads (steadier on a loaded machine).
# Ratios are lipi ÷ anchor on both. Output: a markdown table on stdout.
set -eu
BUILD=${1:-build}
. bench/common.sh
if [ ! -d "$SHARED/parallel/flores200/devtest" ] || [ ! -d "$SHARED/parallel/ntrex128" ]; then
  echo "bench/encode.sh: $SHARED/parallel not found; skipped"
  exit 0
fi
[ -f "$BUILD/liblipi.a" ] || { echo "bench/encode.sh: build $BUILD/liblipi.a first (make)" >&2; exit 1; }
bench_anchors
CC=${CC:-cc}
FLAGS="-O2 -g -std=c11 -D_GNU_SOURCE"
bench_encode_bin "$BUILD"

TEXT=$(bench_encode_text)
MBERT=$BENCH_TMP/bert-base-multilingual-cased.json
if [ ! -s "$MBERT" ]; then
  "$BUILD/bench_encode" --make-bert "$SHARED/vocab/bert-base-multilingual-cased/vocab.txt" \
    --cased > "$MBERT.$$" && mv "$MBERT.$$" "$MBERT"
fi
SPM_BPE=$BENCH_TMP/spm_bpe8k
if [ ! -s "$SPM_BPE.model" ]; then
  awk 'NR % 10 == 0' "$TEXT" > "$BENCH_TMP/spm_bpe_sample.txt"
  spm_train --input="$BENCH_TMP/spm_bpe_sample.txt" --model_prefix="$SPM_BPE" --model_type=bpe \
    --vocab_size=8000 --character_coverage=0.9995 --num_threads=2 >/dev/null 2>&1
fi
GPT2=$SHARED/vocab/gpt2/tokenizer.json
LASER=$SHARED/vocab/laser100k-spm/laser_100k.model
RES=$BENCH_TMP/encode_rows.$$
: > "$RES"
IDS=$BENCH_TMP/encode_ids
mkdir -p "$IDS"

# anchor NAME TOOL THREADS CMD...: runs an npm anchor, appends its row.
anchor() {
  name=$1 tool=$2 th=$3; shift 3
  out=$("$@") || { echo "bench: $tool on $name failed" >&2; exit 1; }
  echo "row round=$ROUND tokenizer=$name tool=$tool threads=$th $out mismatch=-" >> "$RES"
}
# spm NAME MODEL: spm_encode on the text minus spm_encode on an empty file.
spm() {
  name=$1 model=$2 t=$BENCH_TMP/spm_time.$$
  : > "$BENCH_TMP/empty.txt"
  /usr/bin/time -f "%e %U %S %M" -o "$t.load" spm_encode --model="$model" --output_format=id \
    < "$BENCH_TMP/empty.txt" > /dev/null
  /usr/bin/time -f "%e %U %S %M" -o "$t.full" spm_encode --model="$model" --output_format=id \
    < "$TEXT" > "$IDS/$name.spm"
  bytes=$(tr -d '\n' < "$TEXT" | wc -c)
  tokens=$(wc -w < "$IDS/$name.spm")
  paste -d' ' "$t.full" "$t.load" | awk -v r="$ROUND" -v n="$name" -v b="$bytes" -v k="$tokens" '{
    printf "row round=%s tokenizer=%s tool=spm_encode threads=1 seconds=%.3f cpu_seconds=%.3f bytes=%d tokens=%d peak_rss_MB=%.0f mismatch=-\n",
      r, n, $1 - $5, ($2 + $3) - ($6 + $7), b, k, $4 / 1024 }' >> "$RES"
  rm -f "$t.load" "$t.full"
}
# lipi NAME TOKENIZER REFERENCE_IDS: 1 and 2 threads.
lipi() {
  for th in 1 2; do
    "$BUILD/bench_encode" -t "$2" --threads "$th" --runs "$RUNS" --check "$3" "$TEXT" |
      awk -v r="$ROUND" -v n="$1" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "row round=%s tokenizer=%s tool=lipi threads=%s seconds=%.3f cpu_seconds=%.3f bytes=%s tokens=%s peak_rss_MB=%s mismatch=%s\n",
          r, n, v["threads"], v["bytes"] / 1e6 / v["MB/s"], v["bytes"] / 1e6 / v["MB/s_per_cpu_second"],
          v["bytes"], v["tokens"], v["peak_rss_MB"], v["mismatching_lines"] }' >> "$RES"
  done
}

export ANCHORS
JS=bench/encode_anchor.js
ROUND=0
while [ "$ROUND" -lt "${ROUNDS:-1}" ]; do
ROUND=$((ROUND + 1))
for enc in cl100k_base o200k_base; do
  anchor "$enc" tiktoken 1 node "$JS" tiktoken "$enc" "$TEXT" "$IDS/$enc.tiktoken"
  lipi "$enc" "$enc" "$IDS/$enc.tiktoken"
done
for pair in "gpt2:$GPT2" "mbert:$MBERT"; do
  name=${pair%%:*} file=${pair#*:}
  for th in 1 2; do
    RAYON_NUM_THREADS=$th
    export RAYON_NUM_THREADS
    anchor "$name" hf-tokenizers "$th" node "$JS" tokenizers "$file" "$TEXT" "$IDS/$name.hf"
  done
  lipi "$name" "$file" "$IDS/$name.hf"
done
spm laser_100k "$LASER"
lipi laser_100k "$LASER" "$IDS/laser_100k.spm"
spm spm_bpe8k "$SPM_BPE.model"
lipi spm_bpe8k "$SPM_BPE.model" "$IDS/spm_bpe8k.spm"
done

echo "# text: $TEXT ($(wc -l < "$TEXT") lines); compiler: $($CC --version | head -1); flags: $FLAGS;" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg); host steal during the runs: $(bench_steal)"
# Each row's fastest round; the ratio of every round (1 thread, wall).
awk '
  { for (i = 2; i <= NF; i++) { split($i, kv, "="); q[NR, kv[1]] = kv[2] }
    key = q[NR, "tokenizer"] SUBSEP q[NR, "tool"] SUBSEP q[NR, "threads"]
    if (!(key in best)) { order[++nk] = key; best[key] = NR }
    else if (q[NR, "seconds"] < q[best[key], "seconds"]) best[key] = NR
    if (q[NR, "mismatch"] != "-" && q[NR, "mismatch"] != 0) bad[key] = q[NR, "mismatch"] # any round
    rw[q[NR, "round"], q[NR, "tokenizer"], q[NR, "tool"] == "lipi", q[NR, "threads"]] = q[NR, "seconds"]
    rounds = q[NR, "round"] }
  END {
    for (k = 1; k <= nk; k++) { j = best[order[k]]
      n = k
      split("round tokenizer tool threads seconds cpu_seconds bytes tokens peak_rss_MB mismatch", fl, " ")
      for (f = 1; f <= 10; f++) r[n, fl[f]] = q[j, fl[f]]
      if (order[k] in bad) r[n, "mismatch"] = bad[order[k]]
      if (r[n, "tool"] != "lipi") { a = r[n, "tokenizer"] SUBSEP r[n, "threads"]; anc[a] = n
        if (!((r[n, "tokenizer"]) in anc1) || r[n, "threads"] == 1) anc1[r[n, "tokenizer"]] = n } }
    n = nk
    print "| tokenizer | tool | threads | MB/s | MB/CPU-s | Mtok/s | peak RSS MB | lipi ÷ anchor (wall) | lipi ÷ anchor (CPU) | mismatching lines |"
    print "|---|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= n; i++) {
      mbs = r[i, "bytes"] / 1e6 / r[i, "seconds"]; cpu = r[i, "bytes"] / 1e6 / r[i, "cpu_seconds"]
      ratio_w = ratio_c = ""
      if (r[i, "tool"] == "lipi") {
        k = r[i, "tokenizer"] SUBSEP r[i, "threads"]; j = (k in anc) ? anc[k] : anc1[r[i, "tokenizer"]]
        ratio_w = sprintf("%.1f×", r[j, "seconds"] / r[i, "seconds"])
        ratio_c = sprintf("%.1f×", r[j, "cpu_seconds"] / r[i, "cpu_seconds"])
      }
      printf "| %s | %s | %s | %.1f | %.1f | %.2f | %s | %s | %s | %s |\n", r[i, "tokenizer"], r[i, "tool"],
        r[i, "threads"], mbs, cpu, r[i, "tokens"] / 1e6 / r[i, "seconds"], r[i, "peak_rss_MB"], ratio_w, ratio_c, r[i, "mismatch"]
    }
    if (rounds > 1) {
      print ""
      printf "Fastest of %d rounds per row. lipi 1 thread ÷ anchor 1 thread (wall), round by round:\n", rounds
      for (i = 1; i <= n; i++) {
        if (r[i, "tool"] != "lipi" || r[i, "threads"] != 1) continue
        t = r[i, "tokenizer"]; line = ""
        for (g = 1; g <= rounds; g++)
          if ((g SUBSEP t SUBSEP 0 SUBSEP 1) in rw && (g SUBSEP t SUBSEP 1 SUBSEP 1) in rw)
            line = line sprintf(" %.1f×", rw[g, t, 0, 1] / rw[g, t, 1, 1])
        printf "- %s:%s\n", t, line
      }
    }
  }' "$RES"
rm -f "$RES"

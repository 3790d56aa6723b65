#!/bin/sh
# Unigram training: lipi against SentencePiece (spm_train) in one run.
#
#   sh bench/train_unigram.sh [BUILD]        (make bench runs it)
#
# Corpus: every line of ../shared/data/mono/*.txt.xz, decompressed and
# concatenated into a temporary folder (about 30 MB: English, Hindi, Tamil,
# Bengali). Vocabulary 32000, 2 threads. lipi trains with its defaults (indic
# normalizer and pre-tokenizer, grapheme guard, byte fallback) through the
# library API (bench/train_unigram.c), spm_train with
#   --model_type=unigram --vocab_size=32000 --character_coverage=0.9995
#   --input_sentence_size=0 --num_threads=2
# Order: lipi, spm_train, lipi; wall, CPU (user + system) and peak RSS from
# GNU time. Compression: tokens per character (code points, newlines
# excluded) of each model on the FLORES-200 devtest files of the four
# languages; lipi encodes with its own encoder, SentencePiece with
# spm_encode. Installs the Debian packages sentencepiece and time if missing.
set -eu
BUILD=${1:-${BUILD:-build}}
DATA=../shared/data
if [ ! -d "$DATA/mono" ]; then
  echo "train_unigram: $DATA/mono not found, skipped"
  exit 0
fi
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }
  fi
  command -v "$1" >/dev/null 2>&1 || { echo "train_unigram: needs $1 (Debian package $2)" >&2; exit 1; }
}
need spm_train sentencepiece
need spm_encode sentencepiece
[ -x /usr/bin/time ] || need /usr/bin/time time

[ -f "$BUILD/liblipi.a" ] || make -s BUILD="$BUILD" "$BUILD/liblipi.a"
TMP=$(mktemp -d /tmp/lipi_bench_unigram.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
BIN=$TMP/train_unigram
LIBS=$(make -s --no-print-directory print-libs)
CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter"
# shellcheck disable=SC2086
${CC:-cc} $CFLAGS -I. bench/train_unigram.c "$BUILD/liblipi.a" -o "$BIN" $LIBS -lpthread -lm

for f in "$DATA"/mono/*.txt.xz; do xz -dc "$f"; done > "$TMP/corpus.txt"
BYTES=$(wc -c < "$TMP/corpus.txt")
LINES=$(wc -l < "$TMP/corpus.txt")
echo "corpus: $DATA/mono/*.txt.xz, $BYTES bytes, $LINES lines; vocab 32000; 2 threads;" \
  "$(${CC:-cc} --version | head -1); $CFLAGS; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# run NAME CMD...: one timed run, "wall cpu rss_kb" into $TMP/NAME.time
run() {
  name=$1; shift
  /usr/bin/time -v -o "$TMP/$name.tv" "$@" > "$TMP/$name.out" 2> "$TMP/$name.err" ||
    { echo "train_unigram: $name failed:" >&2; tail -5 "$TMP/$name.err" >&2; exit 1; }
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + t[i] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
    END { printf "%.2f %.2f %d\n", w, u + s, r }' "$TMP/$name.tv" > "$TMP/$name.time"
}

run lipi1 "$BIN" -o "$TMP/lipi.json" --export-spm "$TMP/lipi.model" --vocab-size 32000 \
  --threads 2 "$TMP/corpus.txt"
(cd "$TMP" && run spm spm_train --input=corpus.txt --model_prefix=spm --model_type=unigram \
  --vocab_size=32000 --character_coverage=0.9995 --input_sentence_size=0 --num_threads=2)
run lipi2 "$BIN" -o "$TMP/lipi2.json" --vocab-size 32000 --threads 2 "$TMP/corpus.txt"
cmp -s "$TMP/lipi.json" "$TMP/lipi2.json" || { echo "train_unigram: two lipi runs differ" >&2; exit 1; }

read -r LW1 LC1 LR1 < "$TMP/lipi1.time"
read -r SW SC SR < "$TMP/spm.time"
read -r LW2 LC2 LR2 < "$TMP/lipi2.time"
echo
printf '%-26s %9s %9s %12s\n' tool wall_s cpu_s peak_rss_MB
printf '%-26s %9s %9s %12.0f\n' "lipi (run 1)" "$LW1" "$LC1" "$(echo "$LR1 / 1024" | bc -l)"
printf '%-26s %9s %9s %12.0f\n' "spm_train" "$SW" "$SC" "$(echo "$SR / 1024" | bc -l)"
printf '%-26s %9s %9s %12.0f\n' "lipi (run 2)" "$LW2" "$LC2" "$(echo "$LR2 / 1024" | bc -l)"
awk -v lw1="$LW1" -v lw2="$LW2" -v sw="$SW" -v lc1="$LC1" -v lc2="$LC2" -v sc="$SC" \
    -v lr1="$LR1" -v lr2="$LR2" -v sr="$SR" 'BEGIN {
  lw = (lw1 + lw2) / 2; lc = (lc1 + lc2) / 2; lr = lr1 > lr2 ? lr1 : lr2
  printf "spm_train / lipi: wall %.1fx (runs %.1fx, %.1fx), cpu %.1fx; peak RSS lipi / spm_train %.2f\n",
    sw / lw, sw / lw1, sw / lw2, sc / lc, lr / sr }'

echo
printf '%-10s %8s %10s %10s %9s %9s\n' lang chars lipi_tok spm_tok lipi_t/c spm_t/c
for l in eng_Latn hin_Deva ben_Beng tam_Taml; do
  f=$DATA/parallel/flores200/devtest/$l.txt
  [ -f "$f" ] || continue
  set -- $("$BIN" --eval "$TMP/lipi.json" "$f" | sed 's/.*tokens=\([0-9]*\) chars=\([0-9]*\).*/\1 \2/')
  lt=$1 ch=$2
  st=$(spm_encode --model="$TMP/spm.model" --output_format=id < "$f" | wc -w)
  awk -v l="$l" -v c="$ch" -v lt="$lt" -v st="$st" 'BEGIN {
    printf "%-10s %8d %10d %10d %9.4f %9.4f  lipi %+.2f%%\n", l, c, lt, st, lt / c, st / c,
      100 * (lt - st) / st }'
done

#!/bin/sh
# The rotary encoders on real-length sentences: ModernBERT-base's shape and
# nomic-embed-text-v1.5's (bench/encoders_anchor.py), random F32 weights,
# lipi F32 and INT8 (bench/embed.c, mean pooling) against a plain PyTorch
# forward of the same weights (F32), same run, $ENC_THREADS threads.
#
#   sh bench/encoders.sh [BUILD]
#
# Sentences: the first $LINES lines of FLORES-200 devtest in each of $LANGS
# (../shared/data; skipped when absent), longest first and in batches of 32
# as sentence-transformers' encode() takes them, tokenized by each family's
# own kind of tokenizer: GPT-2's byte-level BPE (ModernBERT's is a BPE of the
# same kind and size) and bert-base-uncased's WordPiece (nomic-embed-text's
# own), [CLS] / [SEP] added, at most $ENC_MAXLEN ids. The anchor pads each
# batch to its longest line; lipi packs it without padding. Also a 32 x 128
# set of random ids. Timings: medians of $ENC_RUNS passes after a warm-up;
# on a shared machine the CPU-second figures are the steadier ones.
set -eu
BUILD=${1:-build}
. bench/common.sh
FL=$SHARED/parallel/flores200/devtest
VOCAB=$SHARED/vocab
if [ ! -d "$FL" ] || [ ! -f "$VOCAB/gpt2/tokenizer.json" ] ||
   [ ! -f "$VOCAB/bert-base-uncased/vocab.txt" ]; then
  echo "# encoders: $FL or $VOCAB is missing, skipped"
  exit 0
fi
LINES=${LINES:-16}
RUNS=${ENC_RUNS:-2}
export RUNS
LANGS=${LANGS:-eng_Latn hin_Deva ben_Beng tam_Taml tel_Telu arb_Arab rus_Cyrl zho_Hans}
MODELS=${ENC_MODELS:-modernbert nomic}
T=${ENC_THREADS:-2}
MAXLEN=${ENC_MAXLEN:-512}
PY=/usr/bin/python3
D=$BENCH_TMP/encoders
mkdir -p "$D"
"$PY" -c 'import torch' 2>/dev/null || apt-get install -y -qq python3-torch >/dev/null

make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" "$BUILD/lipi" >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/embed.c "$BUILD/liblipi.a" -o "$BUILD/bench_embed" \
  $(bench_libs)

"$PY" bench/embed_anchor.py sets "$D" "$LINES" "$FL" $LANGS
"$BUILD/lipi" encode -t "$VOCAB/gpt2/tokenizer.json" "$D/real.txt" > "$D/raw_modernbert.ids"
"$BUILD/lipi" encode -t "$VOCAB/bert-base-uncased/vocab.txt" --lowercase --strip-accents \
  "$D/real.txt" > "$D/raw_nomic.ids"

R=${ENC_RESULTS:-$D/results.txt}
: > "$R"
for m in $MODELS; do
  "$PY" bench/encoders_anchor.py make "$D/$m" "$m"
  "$PY" bench/encoders_anchor.py ids "$m" "$D/raw_$m.ids" "$D/real_$m.ids" "$D/fixed_$m.ids" \
    "$MAXLEN"
  for dt in f32 int8; do
    "$BUILD/bench_embed" "$D/$m" "$T" "$dt" "$D/fixed_$m.ids" "$D/real_$m.ids" \
      "$D/out_lipi_${dt}_$m.f32" | tee -a "$R"
  done
  "$PY" bench/encoders_anchor.py run "$D/$m" "$T" "$D/fixed_$m.ids" "$D/real_$m.ids" \
    "$D/out_pytorch_f32_$m.f32" | tee -a "$R"
  echo "# $m: real-length embeddings against PyTorch F32 (max abs diff, lowest cosine)"
  "$PY" bench/embed_anchor.py diff 768 "$D/out_pytorch_f32_$m.f32" \
    "$D/out_lipi_f32_$m.f32" "$D/out_lipi_int8_$m.f32" | sed 's/^/#   /'
  echo "# $m real set: $(wc -l < "$D/real_$m.ids") sentences, $(awk '{ n += NF } END { print n }' \
    "$D/real_$m.ids") tokens, longest $(awk 'NF > n { n = NF } END { print n }' "$D/real_$m.ids")"
done
echo
echo "| model | set | threads | tool | tokens/s wall | tokens/CPU-s | padded tokens | peak RSS MB | × PyTorch F32 (wall) | × PyTorch F32 (CPU) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk '
  { k = $2 " " $4; row[++n] = $0
    if ($1 == "pytorch") { pw[k] = $7 / $9; pc[k] = $7 / $10 } }
  END {
    for (i = 1; i <= n; i++) {
      split(row[i], f, " "); k = f[2] " " f[4]
      tw = f[7] / f[9]; tc = f[7] / f[10]
      printf "| %s | %s | %s | %s %s | %.0f | %.0f | %d | %.0f | %s | %s |\n", f[2], f[4], f[5],
        f[1], toupper(f[3]), tw, tc, f[8], f[11] / 1024,
        (k in pw) ? sprintf("%.2f", tw / pw[k]) : "-", (k in pc) ? sprintf("%.2f", tc / pc[k]) : "-"
    }
  }' "$R"

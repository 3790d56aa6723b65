#!/bin/sh
# Encoding throughput (part of `make bench`; never of `make test`).
#
#   sh bench/encode.sh [BUILD]
#
# Builds bench/encode against BUILD/liblipi.a, decompresses the mono corpora
# of ../shared/data into $TMPDIR/lipi-bench, and times lipi_encode_batch on
# each with GPT-2 (byte-level BPE), multilingual BERT (WordPiece, a
# tokenizer.json made from its vocab.txt the way tests/test_encoder.c does),
# laser_100k.model (SentencePiece Unigram) and cl100k_base (tiktoken), on 1
# and 2 threads. Before timing, each run's ids are compared with the
# Hugging Face reference when one is given (bench/encode --check).
#
# Output: one header line (corpus, compiler, flags), then one line per run
# from bench/encode: MB/s (wall clock, median and range of 5 runs), Mtok/s,
# MB/s per CPU second and peak RSS.
set -eu
BUILD=${1:-build}
SHARED=../shared/data
WORK=${TMPDIR:-/tmp}/lipi-bench
CC=${CC:-cc}
FLAGS="-O2 -g -std=c11 -D_GNU_SOURCE"

if [ ! -d "$SHARED/mono" ]; then
  echo "bench/encode.sh: $SHARED/mono not found; skipped"
  exit 0
fi
[ -f "$BUILD/liblipi.a" ] || { echo "bench/encode.sh: build $BUILD/liblipi.a first (make)" >&2; exit 1; }
mkdir -p "$WORK"
LIBS=$(pkg-config --libs icu-uc icu-i18n libpcre2-8 jansson zlib liblzma libzstd)
$CC $FLAGS -I. -o "$BUILD/bench_encode" bench/encode.c "$BUILD/liblipi.a" $LIBS -lpthread -lm

for f in "$SHARED"/mono/*.txt.xz; do
  out="$WORK/$(basename "$f" .xz)"
  [ -s "$out" ] || { xz -dc "$f" > "$out.$$" && mv "$out.$$" "$out"; }
done

# multilingual BERT: tokenizer.json from vocab.txt (BertNormalizer keeping
# case, BertPreTokenizer, WordPiece, [PAD] [UNK] [CLS] [SEP] [MASK]).
MBERT="$WORK/bert-base-multilingual-cased.json"
if [ ! -s "$MBERT" ]; then
  "$BUILD/bench_encode" --make-bert "$SHARED/vocab/bert-base-multilingual-cased/vocab.txt" \
    --cased > "$MBERT.$$" && mv "$MBERT.$$" "$MBERT"
fi

echo "# corpus: $SHARED/mono/*.txt.xz (decompressed; en-web-sentences has raw control characters);" \
     "compiler: $($CC --version | head -1); flags: $FLAGS"
for tok in "$SHARED/vocab/gpt2/tokenizer.json" "$MBERT" \
           "$SHARED/vocab/laser100k-spm/laser_100k.model" "$SHARED/vocab/tiktoken/cl100k_base.tiktoken"; do
  for corpus in en-wmt-newstest hi-mixed ta-mixed bn-mixed; do
    for threads in 1 2; do
      "$BUILD/bench_encode" -t "$tok" --threads "$threads" --runs 5 "$WORK/$corpus.txt" |
        sed "s|^|corpus=$corpus |"
    done
  done
done

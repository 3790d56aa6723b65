#!/bin/sh
# Quantized search on real text: the rows of bench/search.sh (lipi exact,
# int8 and binary with and without rescoring, FAISS Flat, SQ8 and
# IndexBinaryFlat) over sentence embeddings of FLORES-200 (dev + devtest)
# and NTREX-128 lines instead of random vectors. Corpus: every line of every
# language but English (100,381 lines, 83 files); queries: every fourth
# English line of the same files (1,002), whose translations are in the
# corpus. Model: bench/search_text.py, a one-layer random-weight BERT of
# hidden size 384 with multilingual BERT's vocabulary, mean pooling and
# L2 normalization (no trained model is available offline: its embeddings
# have less structure than a trained model's, so recall figures are this
# model's, not those of e5 or MiniLM). `lipi index` embeds the corpus and
# `lipi embed` the queries, once, into $BENCH_TMP/search-text; skipped when
# ../shared/data is absent.
#   SEARCH_TEXT_MODEL=DIR uses that model folder (a trained checkpoint in
#   Hugging Face / sentence-transformers form) instead of the random one,
#   cached in $BENCH_TMP/search-text-NAME; its dimension is the index's.
#   Queries get the model's default prompt, or the one named by
#   SEARCH_TEXT_QUERY_PROMPT (e.g. query), documents the index's default.
#   K, THREADS, RUNS as in bench/search.sh.
set -eu
BUILD=${1:-build}
. bench/common.sh
F=$SHARED/parallel/flores200
X=$SHARED/parallel/ntrex128
if [ ! -d "$F/devtest" ] || [ ! -d "$X" ]; then
  echo "search-text: skipped ($SHARED/parallel is missing)"
  exit 0
fi
make --no-print-directory BUILD="$BUILD" "$BUILD/lipi" >/dev/null
if [ -n "${SEARCH_TEXT_MODEL:-}" ]; then
  D=$BENCH_TMP/search-text-$(basename "$SEARCH_TEXT_MODEL")
  MODEL=$SEARCH_TEXT_MODEL
  LABEL="real text: FLORES-200 + NTREX-128 lines embedded by $SEARCH_TEXT_MODEL"
  mkdir -p "$D"
else
  D=$BENCH_TMP/search-text
  MODEL=$D/model
  LABEL="real text: FLORES-200 + NTREX-128 lines embedded by a random-weight 1 x 384 BERT (bench/search_text.py)"
  mkdir -p "$D"
  /usr/bin/python3 bench/search_text.py make "$MODEL" data/vocab/bert-base-multilingual-cased/vocab.txt
fi

if [ ! -f "$D/index/meta.json" ] || [ ! -f "$D/queries.npy" ]; then
  ls "$F"/dev/*.txt "$F"/devtest/*.txt "$X"/*.txt | LC_ALL=C sort | grep -v -e '/eng_Latn.txt$' -e '/eng.txt$' > "$D/corpus.list"
  cat "$F/dev/eng_Latn.txt" "$F/devtest/eng_Latn.txt" "$X/eng.txt" | awk 'NR % 4 == 1' > "$D/queries.txt"
  echo "search-text: embedding $(cat $(cat "$D/corpus.list") | wc -l) corpus lines ($(wc -l < "$D/corpus.list") files) and $(wc -l < "$D/queries.txt") queries ..."
  "$BUILD/lipi" embed -m "$MODEL" ${SEARCH_TEXT_QUERY_PROMPT:+--prompt-name "$SEARCH_TEXT_QUERY_PROMPT"} --quiet -o "$D/queries.npy" "$D/queries.txt" 2>/dev/null
  rm -rf "$D/index" "$D"/index-* "$D"/faiss-* "$D/truth.bin"
  "$BUILD/lipi" index -m "$MODEL" --quiet -o "$D/index" $(cat "$D/corpus.list") 2>/dev/null
fi
N=$(sed -n 's/.*"count": *\([0-9]*\).*/\1/p' "$D/index/meta.json")
NQ=$(wc -l < "$D/queries.txt")
DIM=$(sed -n 's/.*"dimension": *\([0-9]*\).*/\1/p' "$D/index/meta.json")
SEARCH_BENCH_DIR=$D SEARCH_LABEL="$LABEL" \
  N=$N NQ=$NQ D=$DIM SKIP_HNSW=1 sh bench/search.sh "$BUILD"

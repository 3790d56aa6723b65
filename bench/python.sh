#!/bin/sh
# The Python package's speed (part of `make bench`, never of `make test`):
# encode_batch against the C library and Debian's python3-sentencepiece on
# the 20 MB text of bench/encode.sh with one SentencePiece .model, and the
# per-call cost of one short string (bench/python_encode.py says what each
# row measures).
#
#   sh bench/python.sh [BUILD]        RUNS=3 (paired runs, median)
set -eu
BUILD=${1:-build}
. bench/common.sh
if [ ! -d "$SHARED/parallel/flores200/devtest" ] || [ ! -d "$SHARED/parallel/ntrex128" ]; then
  echo "bench/python.sh: $SHARED/parallel not found; skipped"
  exit 0
fi
PY=/usr/bin/python3
# The anchor, for the benchmark only (make test never needs it).
$PY -c 'import sentencepiece' 2>/dev/null || apt-get install -y -qq python3-sentencepiece >/dev/null
make --no-print-directory BUILD="$BUILD" python >/dev/null
CC=${CC:-cc}
bench_encode_bin "$BUILD"
TEXT=$(bench_encode_text)
MODEL=${MODEL:-$SHARED/vocab/laser100k-spm/laser_100k.model}
echo "# python: $($PY --version 2>&1); load average: $(cut -d' ' -f1-3 /proc/loadavg); 2 cores shared with other jobs"
PYTHONPATH="$BUILD/python" $PY bench/python_encode.py "$TEXT" "$MODEL" "$BUILD/bench_encode" "$RUNS"

# Embedder vs PyTorch in the same process (python3-torch is installed by
# hand on the bench machine; skipped without it).
if $PY -c 'import torch' 2>/dev/null; then
  D=$BENCH_TMP/embed/${EMBED_MODEL:-minilm}
  [ -f "$D/stamp" ] || $PY bench/embed_anchor.py make "$D" "${EMBED_MODEL:-minilm}" >/dev/null
  for th in ${THREADS:-2}; do
    PYTHONPATH="$BUILD/python" $PY bench/python_embed.py "$D" \
      "$SHARED/vocab/bert-base-multilingual-cased/vocab.txt" "$SHARED/parallel/flores200/devtest" \
      "$th" "$RUNS" "${LINES:-32}" eng_Latn hin_Deva ben_Beng tam_Taml tel_Telu arb_Arab rus_Cyrl zho_Hans
  done
else
  echo "bench/python.sh: python3-torch not installed; the Embedder row is skipped"
fi

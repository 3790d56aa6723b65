#!/bin/sh
# Cross-encoder reranking: `lipi rerank` against a plain PyTorch forward of
# the same weights (Debian python3-torch, F32 and quantize_dynamic INT8).
#
#   sh bench/rerank.sh [BUILD]
#
# Model (bench/rerank_anchor.py, cached in $BENCH_TMP/rerank): a
# BertForSequenceClassification with one label, BERT-base shape (12 x 768,
# 12 heads, FFN 3072: the compute of XLM-R base; the vocabulary is
# multilingual BERT's 119,547 tokens instead of XLM-R's 250,002, which only
# changes the embedding table), random weights. Pairs: the first $NQ
# English FLORES-200 devtest lines, each against the same $NP passages
# from eight languages (query<TAB>passage). lipi: the whole `lipi rerank
# --pairs` process (loading the model, tokenizing, scoring, sorting,
# printing), best of $RUNS; PyTorch: the forward passes only (tokenized
# beforehand by lipi's Python package, batches of 32 padded to their
# longest pair as CrossEncoder.predict feeds them), median of $RUNS after a
# warm-up. Pairs per second of wall time and per CPU-second, and the
# largest difference between the two tools' scores.
set -eu
BUILD=${1:-build}
. bench/common.sh
NQ=${NQ:-10}
NP=${NP:-100}
THREADS=${THREADS:-2}
PY=/usr/bin/python3
D=$BENCH_TMP/rerank
FLORES=$SHARED/parallel/flores200/devtest
VOCAB=$SHARED/vocab/bert-base-multilingual-cased/vocab.txt
if [ ! -d "$FLORES" ] || [ ! -f "$VOCAB" ]; then
  echo "rerank: $FLORES or $VOCAB not found, skipped"
  exit 0
fi
$PY -c 'import torch' 2>/dev/null || { echo "rerank: needs Debian python3-torch, skipped"; exit 0; }
[ -x /usr/bin/time ] || apt-get install -y -qq time >/dev/null
make -s --no-print-directory BUILD="$BUILD" python >/dev/null
mkdir -p "$D"
$PY bench/rerank_anchor.py make "$D/model" "$VOCAB"
$PY bench/rerank_anchor.py pairs "$FLORES" "$NQ" "$NP" "$D/pairs.tsv"
PAIRS=$(wc -l < "$D/pairs.tsv")
echo "rerank: $PAIRS pairs ($NQ queries x $NP passages), BERT-base-shaped cross-encoder," \
  "$THREADS threads; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %10s %10s %12s %10s\n' tool wall_s cpu_s pairs/s pairs/cpu_s
for dtype in f32 int8; do
  best=
  for r in $(seq "$RUNS"); do
    /usr/bin/time -f '%e %U %S %M' -o "$D/time" "$BUILD/lipi" rerank -m "$D/model" \
      --pairs "$D/pairs.tsv" --threads "$THREADS" --dtype "$dtype" --format jsonl \
      > "$D/lipi_$dtype.jsonl"
    t=$(cat "$D/time")
    w=${t%% *}
    if [ -z "$best" ] || [ "$(echo "$w < ${best%% *}" | bc)" = 1 ]; then best=$t; fi
  done
  echo "$best" | awk -v n="$PAIRS" -v d="$dtype" \
    '{ printf "%-16s %10.2f %10.2f %12.1f %10.1f\n", "lipi " d, $1, $2 + $3, n / $1, n / ($2 + $3) }'
  PYTHONPATH=$BUILD/python RUNS=$RUNS $PY bench/rerank_anchor.py run "$D/model" "$D/pairs.tsv" \
    "$THREADS" "$dtype" "$D/torch_$dtype.txt" |
    awk -v d="$dtype" '{ printf "%-16s %10.2f %10.2f %12.1f %10.1f\n", "pytorch " d, $7, $8, $4 / $7, $4 / $8 }'
  # lipi's rows are sorted per query; passage_no is the pair's line.
  $PY - "$D/lipi_$dtype.jsonl" "$D/torch_$dtype.txt" "$dtype" <<'PYEOF'
import json, sys
lipi = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    lipi[r["passage_no"]] = r["score"]
ref = [float(x) for x in open(sys.argv[2])]
d = max(abs(lipi[i + 1] - s) for i, s in enumerate(ref))
print("  %s scores: max |lipi - pytorch| %.2g over %d pairs" % (sys.argv[3], d, len(ref)))
PYEOF
done

#!/bin/sh
# `make demo`: lipi's main job on the bundled data. Trains a BPE tokenizer
# (vocab 8000) on the FLORES-200 sample, then reports token inflation for it
# next to GPT-4's cl100k, GPT-4o's o200k and multilingual BERT, and writes
# demo/report.html; then the bundled fair tokenizer lipi-indic-64k against
# the same and laser_100k, on all of FLORES-200 devtest when ../shared/data
# is there (every Indic language), else on the bundled sample.
set -eu
LIPI=${1:-build/lipi}
DATA=data/flores200
mkdir -p demo

echo "== How GPT-4's cl100k pattern and lipi's indic pattern split the same words =="
line=$(sed -n 3p "$DATA/hin_Deva.txt" | cut -d" " -f1-6)
for pat in cl100k indic; do
  printf '  %-7s ' "$pat"
  printf '%s\n' "$line" | "$LIPI" pretokenize --pattern "$pat"
done

echo
echo "== Training a BPE tokenizer (vocab 8000) on $DATA (English, Hindi, Bengali, Tamil) =="
"$LIPI" train --type bpe --vocab-size 8000 -o demo/tokenizer.json "$DATA"/*.txt

echo
echo "== Token inflation on the same 200 lines, and what it costs a 7B decoder =="
"$LIPI" inflation -t demo/tokenizer.json -t cl100k_base -t o200k_base \
  -t data/vocab/bert-base-multilingual-cased/vocab.txt --parallel "$DATA" \
  --cost --cost-model decoder-7b-gqa
"$LIPI" inflation -t demo/tokenizer.json -t cl100k_base -t o200k_base \
  -t data/vocab/bert-base-multilingual-cased/vocab.txt --parallel "$DATA" \
  --cost --cost-model decoder-7b-gqa -o demo/report.html

echo
LASER=tests/fixtures/shared/vocab/laser100k-spm/laser_100k.model
DEVTEST=../shared/data/parallel/flores200/devtest
if [ -d "$DEVTEST" ]; then
  echo "== lipi-indic-64k, the bundled fair tokenizer (docs/FAIRNESS.md), on FLORES-200 devtest =="
else
  echo "== lipi-indic-64k, the bundled fair tokenizer (docs/FAIRNESS.md), on $DATA =="
  echo "   ($DEVTEST is missing: the README's table covers every Indic language)"
  DEVTEST=$DATA
fi
"$LIPI" inflation -t lipi-indic-64k -t cl100k_base -t o200k_base \
  -t data/vocab/bert-base-multilingual-cased/vocab.txt -t "$LASER" --parallel "$DEVTEST"
echo
echo "Wrote demo/tokenizer.json and demo/report.html (open it in a browser)."
echo "demo/tokenizer.json was trained on these very lines, so its row is a best case;"
echo "train on your own corpus and measure on held-out text (e.g. FLORES-200 devtest)."

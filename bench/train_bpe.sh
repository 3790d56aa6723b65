#!/bin/sh
# BPE training: lipi (char and byte units) against Hugging Face tokenizers
# (npm, byte-level and NFKC + Metaspace) and SentencePiece, on every line of
# ../shared/data/mono/*.txt.xz (about 30 MB: English, Hindi, Tamil, Bengali),
# vocab 30000 (the size the npm binding's trainer is fixed to), 2 threads.
# Runs are interleaved; medians of $RUNS runs. LIPI=path benchmarks another
# lipi binary (a copy, so rebuilding during the run does not change it).
BUILD=${1:-build}
. bench/common.sh
LIPI=${LIPI:-$BUILD/lipi}
corpus=$(bench_corpus)
bench_anchors
out=$BENCH_TMP/train_bpe
mkdir -p "$out"
cat > "$out/hf_train.js" <<'JS'
const t = require(process.env.ANCHORS + '/node_modules/tokenizers');
const tok = new t.Tokenizer(t.BPE.empty());
if (process.argv[2] === 'bytelevel') {
  tok.setPreTokenizer(t.byteLevelPreTokenizer());
} else {
  tok.setNormalizer(t.nfkcNormalizer());
  tok.setPreTokenizer(t.metaspacePreTokenizer());
}
tok.train([process.argv[3]]);
tok.save(process.argv[4]);
JS
export ANCHORS RAYON_NUM_THREADS=2
bytes=$(wc -c < "$corpus")
echo "corpus: $corpus, $bytes bytes; threads 2; vocab 30000; $(cc --version | head -1); runs $RUNS"
i=0
while [ $i -lt "$RUNS" ]; do
  i=$((i + 1))
  bench_time "lipi-char" "$LIPI" train --quiet --threads 2 --vocab-size 30000 -o "$out/lipi-char.json" "$corpus"
  bench_time "lipi-byte" "$LIPI" train --quiet --threads 2 --units byte --vocab-size 30000 -o "$out/lipi-byte.json" "$corpus"
  bench_time "hf-bytelevel" node "$out/hf_train.js" bytelevel "$corpus" "$out/hf-bl.json"
  bench_time "hf-nfkc-metaspace" node "$out/hf_train.js" metaspace "$corpus" "$out/hf-ms.json"
  [ "${SKIP_SPM:-0}" = 1 ] || bench_time "spm-bpe" spm_train --input="$corpus" --model_prefix="$out/spm" \
      --model_type=bpe --vocab_size=30000 --input_sentence_size=0 --num_threads=2 --minloglevel=2
done
echo
bench_table lipi-char
echo
bench_ratios lipi-char hf-bytelevel
bench_ratios lipi-char hf-nfkc-metaspace
echo
echo "Ratios below 1 mean that tool took less wall time than lipi-char."
echo "Host steal during the runs: $(bench_steal)."

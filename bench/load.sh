#!/bin/sh
# Load time: a whole process that opens a tokenizer and encodes one short
# line (`lipi encode -t TOK LINE > /dev/null`), per tokenizer type, with the
# anchor that loads the same tokenizer beside it (npm tiktoken for the
# tiktoken encodings, npm tokenizers for tokenizer.json, spm_encode for
# SentencePiece .model files), measured in the same run, runs interleaved.
#
#   lipi-warm    the table cache holds this tokenizer's tables (the usual
#                case from the second run on)
#   lipi-cold    an empty cache folder: tables built, then written
#   lipi-nocache LIPI_CACHE=0: tables built, nothing written
#
# Tokenizers missing from data/ and ../shared/data are skipped. Goal (issue
# 20): ready to encode in <= 30 ms from a warm page cache. LOAD_RUNS runs
# each (default 11); medians. LIPI=path benchmarks another binary.
BUILD=${1:-build}
. bench/common.sh
LIPI=${LIPI:-$BUILD/lipi}
LOAD_RUNS=${LOAD_RUNS:-11}
bench_anchors
out=$BENCH_TMP/load
mkdir -p "$out"
cache=$out/cache
line=$out/line.txt
printf 'Hello world, नमस्ते दुनिया — the quick brown fox.\n' > "$line"
cat > "$out/anchor.js" <<'JS'
// Loads one tokenizer and encodes one line, as `lipi encode` does.
const path = require('path');
const need = (m) => require(path.join(process.env.ANCHORS, 'node_modules', m));
const [kind, spec, text] = process.argv.slice(2);
let ids;
if (kind === 'tiktoken') ids = need('tiktoken').get_encoding(spec).encode_ordinary(text);
else ids = need('tokenizers').Tokenizer.fromFile(spec).encode(text);
if (!ids) process.exit(1);
JS
export ANCHORS
echo "one line of $(wc -c < "$line") bytes; whole processes; $(cc --version | head -1); \
$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); runs $LOAD_RUNS; node $(node --version)"

# label path [anchor-kind anchor-spec] (bench_time sets $name)
row() {
  label=$1 tok=$2 akind=${3:-} aspec=${4:-}
  [ -e "$tok" ] || { echo; echo "$label: $tok not found, skipped"; return 0; }
  TIMES=$out/times.$label
  : > "$TIMES"
  rm -rf "$cache"
  LIPI_CACHE_DIR=$cache "$LIPI" encode -t "$tok" "$line" > /dev/null # fills the cache
  i=0
  while [ $i -lt "$LOAD_RUNS" ]; do
    i=$((i + 1))
    bench_time lipi-warm env LIPI_CACHE_DIR="$cache" "$LIPI" encode -t "$tok" "$line"
    rm -rf "$out/cold"
    bench_time lipi-cold env LIPI_CACHE_DIR="$out/cold" "$LIPI" encode -t "$tok" "$line"
    bench_time lipi-nocache env LIPI_CACHE=0 "$LIPI" encode -t "$tok" "$line"
    case $akind in
    tiktoken|tokenizers) bench_time "npm-$akind" node "$out/anchor.js" "$akind" "$aspec" "$(cat "$line")" ;;
    spm) bench_time spm_encode spm_encode --model="$tok" --output_format=id --input="$line" ;;
    esac
  done
  echo
  echo "$label: $tok"
  echo
  bench_table lipi-warm
  [ -z "$akind" ] || bench_ratios lipi-warm "$( [ "$akind" = spm ] && echo spm_encode || echo "npm-$akind")"
}

V=$SHARED/vocab
row cl100k_base data/vocab/tiktoken/cl100k_base.tiktoken tiktoken cl100k_base
row o200k_base data/vocab/tiktoken/o200k_base.tiktoken tiktoken o200k_base
row r50k_base data/vocab/tiktoken/r50k_base.tiktoken tiktoken r50k_base
row gpt2-tokenizer.json "$V/gpt2/tokenizer.json" tokenizers "$V/gpt2/tokenizer.json"
row mbert-vocab.txt data/vocab/bert-base-multilingual-cased/vocab.txt
row laser_100k-spm-unigram "$V/laser100k-spm/laser_100k.model" spm
row spm-test-model "$SHARED/vectors/sentencepiece/test_model.model" spm
row gguf-llama-spm "$SHARED/vectors/llama.cpp/ggml-vocab-llama-spm.gguf"
row gguf-gpt-2 "$SHARED/vectors/llama.cpp/ggml-vocab-gpt-2.gguf"
row lipi-indic-64k data/vocab/lipi-indic-64k
echo
echo "Ratios above 1 mean the anchor took more wall time than lipi-warm."

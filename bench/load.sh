#!/bin/sh
# Load time: a whole process that opens a tokenizer and encodes one short
# line (`lipi encode -t TOK LINE > /dev/null`), per tokenizer type, with the
# anchor that loads the same tokenizer beside it (npm tiktoken for the
# tiktoken encodings, npm tokenizers for tokenizer.json, spm_encode for
# SentencePiece .model files), measured in the same run, runs interleaved.
#
#   lipi-warm    the cache holds this tokenizer's snapshot and tables (the
#                usual case from the second run on)
#   lipi-cold    an empty cache folder: tables built, then written
#   lipi-nocache LIPI_CACHE=0: tables built, nothing written
#
# Tokenizers missing from data/ and ../shared/data are skipped. Goal (issue
# 20): ready to encode in <= 30 ms from a warm page cache. LOAD_RUNS runs
# each (default 11); medians, in milliseconds (bench/load_time.py: the
# 10 ms steps of /usr/bin/time printed a small model's load as 0.00 s).
# One summary table at the end, one row per tokenizer. LIPI=path
# benchmarks another binary.
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

# label path [anchor-kind anchor-spec]: LOAD_RUNS interleaved runs of each
# variant into $out/times.LABEL, then one summary row.
row() {
  label=$1 tok=$2 akind=${3:-} aspec=${4:-}
  [ -e "$tok" ] || { echo "$label: $tok not found, skipped" >> "$out/skipped"; return 0; }
  t=$out/times.$label
  : > "$t"
  rm -rf "$cache"
  LIPI_CACHE_DIR=$cache "$LIPI" encode -t "$tok" "$line" > /dev/null # fills the cache
  anchor=
  case $akind in
  tiktoken|tokenizers) anchor=npm-$akind ;;
  spm) anchor=spm_encode ;;
  esac
  i=0
  while [ $i -lt "$LOAD_RUNS" ]; do
    i=$((i + 1))
    timed "$t" lipi-warm env LIPI_CACHE_DIR="$cache" "$LIPI" encode -t "$tok" "$line"
    rm -rf "$out/cold"
    timed "$t" lipi-cold env LIPI_CACHE_DIR="$out/cold" "$LIPI" encode -t "$tok" "$line"
    timed "$t" lipi-nocache env LIPI_CACHE=0 "$LIPI" encode -t "$tok" "$line"
    case $akind in
    tiktoken|tokenizers) timed "$t" "$anchor" node "$out/anchor.js" "$akind" "$aspec" "$(cat "$line")" ;;
    spm) timed "$t" "$anchor" spm_encode --model="$tok" --output_format=id --input="$line" ;;
    esac
  done
  # label, then median wall ms and median CPU ms of warm, cold, no cache,
  # the anchor's name, its wall and CPU, and the median of the run-by-run
  # anchor ÷ lipi-warm wall ratios.
  awk -v label="$label" -v anchor="${anchor:-—}" '
    function median(s,   a, k, i, j, x) {
      k = split(s, a, " "); if (!k) return -1
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
      return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    function ms(v) { return v < 0 ? "" : sprintf("%.1f", 1000 * v) }
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4)
      if ($1 == "lipi-warm") warm[++nw] = $2
      if ($1 == anchor) anc[++na] = $2 }
    END {
      for (i = 1; i <= nw && i <= na; i++) r = r " " anc[i] / warm[i]
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label,
        ms(median(wall["lipi-warm"])), ms(median(cpu["lipi-warm"])),
        ms(median(wall["lipi-cold"])), ms(median(wall["lipi-nocache"])), anchor,
        ms(median(wall[anchor])), ms(median(cpu[anchor])), r == "" ? "" : sprintf("%.2f", median(r))
    }' "$t" >> "$out/rows"
}

# timed TIMES NAME CMD...: one run, milliseconds resolution (load_time.py).
timed() {
  python3 bench/load_time.py "$@" || exit 1
}

: > "$out/rows"
: > "$out/skipped"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
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
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); host steal during the runs: $(bench_steal)"
echo
echo "Medians of $LOAD_RUNS interleaved runs, milliseconds; CPU = user + system."
echo "warm: snapshot and tables in the cache; cold: empty cache (built, then"
echo "written); no cache: LIPI_CACHE=0. anchor ÷ warm: median of the run-by-run"
echo "ratios of wall times (above 1: the anchor took longer than lipi-warm)."
echo
echo "| tokenizer | lipi warm ms | warm CPU ms | cold ms | no cache ms | anchor | anchor ms | anchor CPU ms | anchor ÷ warm |"
echo "|---|---|---|---|---|---|---|---|---|"
cat "$out/rows"
cat "$out/skipped"

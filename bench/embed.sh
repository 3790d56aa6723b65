#!/bin/sh
# Encoder throughput: lipi against PyTorch (Debian python3-torch, F32 and
# quantize_dynamic INT8) and ONNX Runtime (npm onnxruntime-node, F32) in the
# same run, on the same random weights.
#
#   sh bench/embed.sh [BUILD]
#
# Models (bench/embed_anchor.py, cached in $BENCH_TMP/embed): BERT-base
# shape (12 x 768, 12 heads, FFN 3072) and MiniLM-L6-H384 shape (6 x 384,
# FFN 1536), both with multilingual BERT's 119,547-token vocabulary; ONNX
# export by torch.onnx.export. Id sets: 32 x 128 tokens, and FLORES-200
# devtest lines ($LINES of each of $LANGS) tokenized by lipi with
# bert-base-multilingual-cased's vocab.txt ([CLS] ... [SEP], at most 128
# ids), sorted the way sentence-transformers' encode() sorts (longest text
# first) and fed in batches of 32, padded to the longest for the anchors,
# packed without padding by lipi. Every tool: one process per (tool, model,
# dtype, threads), a warm-up on the first batch, median of $EMBED_RUNS passes. Outputs are mean
# pooled embeddings, compared with PyTorch F32's.
#
# On a shared machine wall time mostly measures the other jobs, so the
# table's first figures are per CPU-second of the process (all threads);
# wall figures follow. GFLOP counts only the real tokens' work (the anchors'
# padding work is waste, not throughput) and "% peak" divides GFLOP per
# CPU-second by the oneDNN sgemm peak per CPU-second measured in this run
# (bench/gemm.c peak) on one thread: the per-core FMA peak, the most a
# CPU-second can give at any thread count.
# EMBED_TABLE_ONLY=1 prints the table of an earlier run's $EMBED_RESULTS
# (default $BENCH_TMP/embed/results.txt) without measuring.
set -eu
BUILD=${1:-build}
. bench/common.sh
LINES=${LINES:-16}
RUNS=${EMBED_RUNS:-2}
export RUNS
LANGS=${LANGS:-eng_Latn hin_Deva ben_Beng tam_Taml tel_Telu arb_Arab rus_Cyrl zho_Hans}
MODELS=${MODELS:-minilm bert}
THREADS=${THREADS:-1 2}
PY=/usr/bin/python3
D=$BENCH_TMP/embed
mkdir -p "$D"

# The anchors' own Debian packages (not needed to build or test lipi).
"$PY" -c 'import torch' 2>/dev/null || apt-get install -y -qq python3-torch >/dev/null
command -v node >/dev/null || apt-get install -y -qq nodejs npm >/dev/null

make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" "$BUILD/lipi" >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/embed.c "$BUILD/liblipi.a" -o "$BUILD/bench_embed" \
  $(bench_libs)
GEMM_BUILD_ONLY=1 sh bench/gemm.sh "$BUILD"

# ONNX Runtime: the npm package ships its prebuilt binary; --ignore-scripts
# skips the install script (it only fetches optional GPU parts).
ORT=1
if [ ! -d "$ANCHORS/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ANCHORS"
  (cd "$ANCHORS" && npm install --silent --no-audit --no-fund --ignore-scripts \
    onnxruntime-node@1.30.0 >/dev/null) || ORT=0
fi
if [ "$ORT" = 1 ] && ! NODE_PATH=$ANCHORS/node_modules node -e "require('onnxruntime-node')" \
    2>"$D/ort.err"; then
  ORT=0
fi
[ "$ORT" = 1 ] || { echo "# ONNX Runtime anchor skipped:"; sed 's/^/#   /' "$D/ort.err" 2>/dev/null | head -5; }

"$PY" bench/embed_anchor.py sets "$D" "$LINES" "$SHARED/parallel/flores200/devtest" $LANGS
"$BUILD/lipi" encode -t data/vocab/bert-base-multilingual-cased/vocab.txt \
  --add-special-tokens --max-length 128 "$D/real.txt" > "$D/real.ids"

R=${EMBED_RESULTS:-$D/results.txt}
[ "${EMBED_TABLE_ONLY:-0}" = 1 ] && MODELS_RUN= || { MODELS_RUN=$MODELS; : > "$R"; "$BUILD/bench_gemm" peak >> "$R"; }
for m in $MODELS_RUN; do
  "$PY" bench/embed_anchor.py make "$D/$m" "$m" 2>"$D/make.err" || {
    cat "$D/make.err" >&2; exit 1; }
  for t in $THREADS; do
    for dt in f32 int8; do
      "$BUILD/bench_embed" "$D/$m" "$t" "$dt" "$D/fixed.ids" "$D/real.ids" \
        "$D/out_lipi_${dt}_$m.f32" | tee -a "$R"
      "$PY" bench/embed_anchor.py run "$D/$m" "$t" "$dt" "$D/fixed.ids" "$D/real.ids" \
        "$D/out_pytorch_${dt}_$m.f32" | tee -a "$R"
    done
    [ "$ORT" = 1 ] && NODE_PATH=$ANCHORS/node_modules node bench/embed_ort.js "$D/$m" "$t" \
      "$D/fixed.ids" "$D/real.ids" "$D/out_onnxruntime_f32_$m.f32" | tee -a "$R"
  done
  dim=$(sed -n 's/.*"hidden_size": *\([0-9]*\).*/\1/p' "$D/$m/config.json")
  echo "# $m: real-length embeddings against PyTorch F32 (max abs diff, lowest cosine)"
  outs=""
  for f in lipi_f32 onnxruntime_f32 lipi_int8 pytorch_int8; do
    [ -f "$D/out_${f}_$m.f32" ] && outs="$outs $D/out_${f}_$m.f32"
  done
  "$PY" bench/embed_anchor.py diff "$dim" "$D/out_pytorch_f32_$m.f32" $outs | sed 's/^/#   /'
done

# Useful FLOPs of each set (real tokens only): per sentence of L tokens,
# layers x (2 L (4 C^2 + 2 C I) + 4 L^2 C).
flops() { # layers C I file
  awk -v n="$1" -v c="$2" -v i="$3" '{ L = NF; f += n * (2 * L * (4 * c * c + 2 * c * i) + 4 * L * L * c) }
    END { printf "%.6g", f }' "$4"
}
F_bert_fixed=$(flops 12 768 3072 "$D/fixed.ids"); F_bert_real=$(flops 12 768 3072 "$D/real.ids")
F_minilm_fixed=$(flops 6 384 1536 "$D/fixed.ids"); F_minilm_real=$(flops 6 384 1536 "$D/real.ids")

echo
echo "Tokens of the real-length set: $(awk '{ n += NF } END { print n }' "$D/real.ids") in $(wc -l < "$D/real.ids") sentences ($LINES lines each of $LANGS); RUNS=$RUNS"
echo
awk -v fbf="$F_bert_fixed" -v fbr="$F_bert_real" -v fmf="$F_minilm_fixed" -v fmr="$F_minilm_real" '
  $1 == "sgemm_peak" { peak[$2] = $4; peakw[$2] = $3; next }
  { k = $2 " " $4 " " $5; row[++n] = $0; key[n] = k
    if ($1 == "onnxruntime") { ortc[k] = $7 / $10; ortw[k] = $7 / $9 } }
  END {
    printf "| model | set | thr | tool | tok/CPU-s | GFLOP/CPU-s | %% peak | × ORT F32 (CPU) | tok/s wall | × ORT F32 (wall) | padded tokens | peak RSS MB |\n"
    printf "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    for (i = 1; i <= n; i++) {
      split(row[i], f, " ")
      fl = (f[2] == "bert") ? (f[4] == "real" ? fbr : fbf) : (f[4] == "real" ? fmr : fmf)
      tc = f[7] / f[10]; tw = f[7] / f[9]; g = fl / f[10] * 1e-9
      rc = (key[i] in ortc) ? sprintf("%.2f", tc / ortc[key[i]]) : "-"
      rw = (key[i] in ortw) ? sprintf("%.2f", tw / ortw[key[i]]) : "-"
      printf "| %s | %s | %s | %s %s | %.0f | %.1f | %.0f%% | %s | %.0f | %s | %d | %.0f |\n",
        f[2], f[4], f[5], f[1], toupper(f[3]), tc, g, 100 * g / peak[1], rc, tw, rw, f[8], f[11] / 1024
    }
    printf "\nsgemm peak (oneDNN 4096x3072x768, best of 7): 1 thread %.1f GFLOP/CPU-s (%.1f GFLOP/s wall), 2 threads %.1f GFLOP/CPU-s (%.1f GFLOP/s wall)\n", peak[1], peakw[1], peak[2], peakw[2]
  }' "$R"
echo
for m in $MODELS; do
  echo "weights $m: $(du -m "$D/$m/model.safetensors" | cut -f1) MB (model.safetensors)"
done

#!/bin/sh
# Grapheme clusters cut by trained tokenizers on held-out text.
#
#   sh bench/cluster_cuts.sh [BUILD] [LIPI_FOR_TRAINING]
#
# Trains a 32k Unigram and a 32k BPE tokenizer (lipi's defaults, 2 threads)
# on ~16 MB that shares no line with FLORES-200 devtest: the first 4 MB of
# ../shared/data/mono-indic/hi-*, 3 MB of bn-*, 4 MB of ta-* (shuffled with
# a fixed seed), 3 MB of ../shared/data/mono/en-web-sentences and the
# FLORES-200 *dev* files of hin, ben, tam, mar, tel and eng; then, with
# bench/cluster_cuts.c, counts on the devtest files of hin, ben, tam, mar
# and tel the token boundaries that fall inside a grapheme cluster, all of
# them and those inside a cluster the training text holds >= 5 times.
# LIPI_FOR_TRAINING (default BUILD/lipi) lets an older lipi train, to compare.
set -eu
BUILD=${1:-${BUILD:-build}}
LIPI=${2:-$BUILD/lipi}
DATA=../shared/data
if [ ! -d "$DATA/mono-indic" ]; then
  echo "cluster_cuts: $DATA/mono-indic not found, skipped"
  exit 0
fi
[ -f "$BUILD/liblipi.a" ] || make -s BUILD="$BUILD" "$BUILD/liblipi.a"
TMP=$(mktemp -d /tmp/lipi_bench_clusters.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
LIBS=$(make -s --no-print-directory print-libs)
# shellcheck disable=SC2086
${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -I. bench/cluster_cuts.c "$BUILD/liblipi.a" \
  -o "$TMP/cluster_cuts" $LIBS -lpthread -lm
xz -dc "$DATA"/mono-indic/hi-*.txt.xz | head -c 4000000 > "$TMP/train.txt"
xz -dc "$DATA"/mono-indic/bn-*.txt.xz | head -c 3000000 >> "$TMP/train.txt"
xz -dc "$DATA"/mono-indic/ta-*.txt.xz | shuf --random-source=/dev/zero | head -c 4000000 >> "$TMP/train.txt"
xz -dc "$DATA"/mono/en-web-sentences.txt.xz | head -c 3000000 >> "$TMP/train.txt"
DEV=$DATA/parallel/flores200/dev
DEVTEST=$DATA/parallel/flores200/devtest
cat "$DEV"/hin_Deva.txt "$DEV"/ben_Beng.txt "$DEV"/tam_Taml.txt "$DEV"/mar_Deva.txt \
  "$DEV"/tel_Telu.txt "$DEV"/eng_Latn.txt >> "$TMP/train.txt"
echo "training text: $(wc -c < "$TMP/train.txt") bytes, sha256 $(sha256sum < "$TMP/train.txt" | cut -c1-16)"
for type in unigram bpe; do
  "$LIPI" train --type $type --vocab-size 32000 --threads 2 --quiet -o "$TMP/$type.json" "$TMP/train.txt"
  echo "== $type 32k: token boundaries on FLORES-200 devtest"
  "$TMP/cluster_cuts" "$TMP/$type.json" "$TMP/train.txt" "$DEVTEST"/hin_Deva.txt \
    "$DEVTEST"/ben_Beng.txt "$DEVTEST"/tam_Taml.txt "$DEVTEST"/mar_Deva.txt "$DEVTEST"/tel_Telu.txt |
    sed "s|$DEVTEST/||"
done

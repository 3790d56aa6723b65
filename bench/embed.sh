#!/bin/sh
# Encoder throughput (bench/embed.c): random BERT-base and MiniLM-L6-H384,
# 32 x 128 and 1 x 128 tokens, 1 and 2 threads, float32 and int8.
set -eu
BUILD=${1:-build}
make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -I. bench/embed.c "$BUILD/liblipi.a" -o "$BUILD/bench_embed" \
  $(pkg-config --libs icu-uc icu-i18n libpcre2-8 jansson zlib liblzma libzstd) -lpthread -lm
"$BUILD/bench_embed" f32
"$BUILD/bench_embed" int8

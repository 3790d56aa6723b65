#!/bin/sh
# GEMM backends on BERT shapes (bench/gemm.c): oneDNN, OpenBLAS with the
# environment's OPENBLAS_CORETYPE and with it unset, lipi's tiled and
# portable paths, 1 and 2 threads. GEMM_BUILD_ONLY=1: only build
# $BUILD/bench_gemm (bench/embed.sh uses its `peak` mode).
set -eu
BUILD=${1:-build}
make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -I. $(pkg-config --cflags openblas) bench/gemm.c \
  "$BUILD/liblipi.a" -o "$BUILD/bench_gemm" -ldnnl -lgomp \
  $(pkg-config --libs openblas jansson) -lpthread -lm
[ "${GEMM_BUILD_ONLY:-0}" = 1 ] && exit 0
"$BUILD/bench_gemm"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD/bench_gemm"

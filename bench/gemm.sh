#!/bin/sh
# GEMM backends on BERT shapes (bench/gemm.c): oneDNN, OpenBLAS with the
# environment's OPENBLAS_CORETYPE and with it unset, lipi's tiled and
# portable paths, 1 and 2 threads.
set -eu
BUILD=${1:-build}
make --no-print-directory BUILD="$BUILD" "$BUILD/liblipi.a" >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -I. $(pkg-config --cflags openblas) bench/gemm.c \
  "$BUILD/liblipi.a" -o "$BUILD/bench_gemm" -ldnnl -lgomp \
  $(pkg-config --libs openblas jansson) -lpthread -lm
"$BUILD/bench_gemm"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD/bench_gemm"

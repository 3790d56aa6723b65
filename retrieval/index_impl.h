/* Internal interfaces of the retrieval index (pipeline/index.c) for tests
 * and benchmarks; never included by a public header. */
#ifndef LIPI_INDEX_IMPL_H
#define LIPI_INDEX_IMPL_H

#include "model/model.h"
#include "retrieval/retrieval.h"
#include "tokenizer/base.h"

/* Default tiling of exact search (lipi_search_options). A block of 16384
 * rows of 384 floats is 24 MiB: large enough that handing out blocks costs
 * nothing, small enough that two threads finish together. GEMMs of 256
 * queries x 1024 rows keep the row panel (1.5 MiB at 384 floats) in L2 and
 * L3 while every query tile passes over it. */
#define LIPI_KNN_BLOCK_ROWS ((size_t)16384)
#define LIPI_KNN_GEMM_ROWS ((size_t)1024)
#define LIPI_KNN_GEMM_QUERIES ((size_t)256)
/* Heaps of one thread for one pass over the matrix; more queries than fit
 * make several passes. */
#define LIPI_KNN_HEAP_BYTES ((size_t)32 << 20)
/* Matrices this large give their pages back after each block by default. */
#define LIPI_KNN_RELEASE_BYTES ((size_t)256 << 20)

/* How the builder puts the new directory in place: returns 0 or an errno
 * value; afterwards `dir` is the new index and the old one (if any) is at
 * `tmp`. Tests replace it to fail the commit step. */
typedef int (*lipi_index_swap_fn)(const char *tmp, const char *dir);
void lipi_index_builder_set_swap(lipi_index_builder *b, lipi_index_swap_fn fn);

/* Parses the .npy header at the start of p[0..len) (`path` names it in
 * errors) and checks it describes a little-endian array of `descr` ("<f4"
 * or "<u8") with 1 or 2 dimensions whose bytes exactly fill the rest of the
 * file. *data_off is where the data starts; shape[1] is 1 for 1-D. */
lipi_status lipi_npy_parse(const unsigned char *p, size_t len, const char *path,
                           const char *descr, size_t *ndim, size_t shape[2], size_t *data_off,
                           lipi_error *err);

/* The asymmetric scoring of binary codes (lipi_search_options
 * .binary_query_weights): the query as its 4 weight planes
 * (lipi_binary_query_weights, 4 * (dim+7)/8 bytes) against the bits. The
 * kernels below take it where they take a lipi_quantization. */
#define LIPI_QUANT_BINARY_WEIGHTS ((lipi_quantization)(LIPI_QUANT_BINARY + 1))

/* Quantized scores of the query codes q against S rows of codes x
 * (lipi_quantization): int8 q (dim), x (S, dim), binary q ((dim+7)/8), or
 * binary weights q (4 * (dim+7)/8), x (S, (dim+7)/8) -> out (S). ref: the
 * plain loops the fast kernels are tested against. */
void lipi_quant_scores(lipi_quantization qz, bool ref, const void *q, const void *x, size_t S,
                       size_t dim, int32_t *out);

/* The same for qn <= LIPI_QUANT_QB queries at once (each document row read
 * once for all of them): q[i] query i's codes and, for int8, qu[i] the same
 * codes + 128 as unsigned bytes (qu NULL: the one-query kernel); query i's
 * scores go to out + i * S. Equal to lipi_quant_scores per query. */
enum { LIPI_QUANT_QB = 4 };
void lipi_quant_scores_block(lipi_quantization qz, const void *const q[],
                             const uint8_t *const qu[], size_t qn, const void *x, size_t S,
                             size_t dim, int32_t *out);

/* The kernels of passes of many queries: qn queries q (qn, row bytes)
 * against S rows x, rearranged into 16-row tiles first; query i's scores
 * go to out + i * S. Equal to lipi_quant_scores per query. Returns false,
 * out untouched, when this CPU has no such kernel (AVX-512 VNNI for int8,
 * VPOPCNTDQ for binary) or memory runs out. */
bool lipi_quant_scores_packed(lipi_quantization qz, const void *q, size_t qn, const void *x,
                              size_t S, size_t dim, int32_t *out);

#endif

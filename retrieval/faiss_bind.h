/* lipi's C interface to FAISS (approximate and exact vector search).
 *
 *   lipi_faiss *f = NULL;
 *   if (lipi_faiss_build("HNSW32", x, n, dim, 2, &f, &err) == LIPI_OK &&
 *       lipi_faiss_write(f, "idx/faiss.index", &err) == LIPI_OK)
 *       lipi_faiss_search(f, q, nq, 10, 2, docs, scores, &err);
 *   lipi_faiss_free(f);
 *
 * Debian's libfaiss-dev ships FAISS's C API headers, but its static library
 * does not contain the C API's symbols, so retrieval/faiss_bind.cpp calls the
 * C++ API (index_factory, train/add, search, read_index/write_index) and
 * turns its exceptions into lipi_status values. That file is compiled only
 * when FAISS is installed; otherwise pipeline/index.c provides these
 * functions, lipi_faiss_available() is false and every other function fails
 * with LIPI_EINVAL "lipi was built without FAISS".
 *
 * Every index uses the inner-product metric, so scores are comparable with
 * lipi's exact search over L2-normalized vectors (cosine similarity). FAISS
 * allocates with its own allocator (not the lipi hooks) and runs its work on
 * OpenMP threads. A lipi_faiss may be searched by several threads at once;
 * building, adding and setting parameters need exclusive use.
 */
#ifndef LIPI_FAISS_BIND_H
#define LIPI_FAISS_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* tokenizer.h has no C++ guard of its own. */
#ifdef __cplusplus
extern "C" {
#endif

#include "tokenizer/tokenizer.h"

typedef struct lipi_faiss lipi_faiss;

/* Whether this lipi was built with FAISS. */
bool lipi_faiss_available(void);

/* Opens the BLAS/LAPACK library FAISS computes with (retrieval/blas_lazy.c;
 * once per process, thread-safe): NULL, or why it cannot be. Building and
 * reading an index call it first. */
const char *lipi_blas_open(void);

/* Builds an index from an index_factory string ("Flat", "IVF1024,Flat",
 * "HNSW32", "IVF4096,PQ32", ...) over the n rows of x (n, dim): trains it
 * on x when the index type needs training, then adds all rows (row i gets
 * id i). `threads` OpenMP threads (0: FAISS's default). x is only read
 * during the call. *out is owned by the caller (lipi_faiss_free).
 * LIPI_EINVAL with FAISS's message for a bad spec, too few rows to train
 * (for example fewer rows than IVF lists) or a FAISS failure; LIPI_ENOMEM. */
lipi_status lipi_faiss_build(const char *spec, const float *x, size_t n, size_t dim,
                             size_t threads, lipi_faiss **out, lipi_error *err);

/* Adds n more rows (ids continue from lipi_faiss_count) without retraining:
 * IVF lists keep the centroids trained at build time. */
lipi_status lipi_faiss_add(lipi_faiss *f, const float *x, size_t n, size_t threads,
                           lipi_error *err);

/* Sets search parameters in FAISS ParameterSpace syntax, comma-separated:
 * "nprobe=16", "efSearch=128". LIPI_EINVAL for a parameter the index does
 * not have. */
lipi_status lipi_faiss_set_params(lipi_faiss *f, const char *params, lipi_error *err);

/* Top-k by inner product for nq queries (nq, dim): docs and scores are
 * (nq, k), best first; slots FAISS could not fill (k larger than the
 * index, or an approximate index that found fewer) get doc -1 and score
 * -INFINITY. */
lipi_status lipi_faiss_search(const lipi_faiss *f, const float *q, size_t nq, size_t k,
                              size_t threads, int64_t *docs, float *scores, lipi_error *err);

/* Saves to / loads from a file in FAISS's own format (write_index /
 * read_index). LIPI_EIO naming the path when FAISS cannot read or write
 * it; reading also fails with LIPI_EFORMAT when the file is not a FAISS
 * index or its metric is not inner product. */
lipi_status lipi_faiss_write(const lipi_faiss *f, const char *path, lipi_error *err);
lipi_status lipi_faiss_read(const char *path, lipi_faiss **out, lipi_error *err);

size_t lipi_faiss_count(const lipi_faiss *f); /* rows in the index */
size_t lipi_faiss_dim(const lipi_faiss *f);
void lipi_faiss_free(lipi_faiss *f);

/* FAISS's IndexBinaryFlat: exact Hamming-distance search over packed bit
 * codes, the FAISS counterpart of a binary-quantized lipi index
 * (lipi_quantize_binary's codes fit it as they are; the order of the bits
 * in a byte does not change a Hamming distance). Codes are nbytes bytes a
 * row; rows get ids 0, 1, ... in the order added. */
typedef struct lipi_faiss_binary lipi_faiss_binary;

/* An empty index for codes of nbytes bytes (>= 1). *out is owned by the
 * caller (lipi_faiss_binary_free). LIPI_EINVAL for a bad size, LIPI_ENOMEM. */
lipi_status lipi_faiss_binary_new(size_t nbytes, lipi_faiss_binary **out, lipi_error *err);
/* Adds n rows of codes (n, nbytes). */
lipi_status lipi_faiss_binary_add(lipi_faiss_binary *f, const uint8_t *codes, size_t n,
                                  lipi_error *err);
/* The k nearest rows by Hamming distance for nq query codes (nq, nbytes):
 * docs and dist are (nq, k), nearest first; slots past the last row get
 * doc -1. `threads` OpenMP threads (0: FAISS's default). */
lipi_status lipi_faiss_binary_search(const lipi_faiss_binary *f, const uint8_t *q, size_t nq,
                                     size_t k, size_t threads, int64_t *docs, int32_t *dist,
                                     lipi_error *err);
void lipi_faiss_binary_free(lipi_faiss_binary *f);

#ifdef __cplusplus
}
#endif

#endif

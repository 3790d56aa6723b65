/* lipi retrieval module: sentence-embedding vectors on disk (.npy), an
 * on-disk index with exact top-k search and FAISS, bitext retrieval
 * metrics, and logistic-regression probes on frozen embeddings. It knows
 * vectors and texts, not models: the caller embeds (pipeline/pipeline.h)
 * and hands over what an index or probe records about the model. */
#ifndef LIPI_RETRIEVAL_H
#define LIPI_RETRIEVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
/* ------------------------------------------------------------------------ */
/* .npy output (NumPy format 1.0, little-endian float32, C order)            */
/* ------------------------------------------------------------------------ */

typedef struct lipi_npy_writer lipi_npy_writer;

/* Starts `path` for a (rows, cols) float32 array whose row count is known
 * only at the end: rows are appended to a temporary file beside it, and
 * lipi_npy_writer_close writes the final shape into the header and renames
 * the file over `path`, so readers never see a partial array. LIPI_EIO on
 * failure (an unwritable folder is found here, before any work). */
lipi_status lipi_npy_writer_open(const char *path, size_t cols, lipi_npy_writer **out,
                                 lipi_error *err);
lipi_status lipi_npy_writer_append(lipi_npy_writer *w, const float *rows, size_t n,
                                   lipi_error *err);
/* Fixes the header and moves the file into place; frees w even on error
 * (then `path` is untouched). */
lipi_status lipi_npy_writer_close(lipi_npy_writer *w, lipi_error *err);
/* Drops the temporary file; `path` is untouched. NULL is a no-op. */
void lipi_npy_writer_abort(lipi_npy_writer *w);
/* The temporary file ("<path>.tmp-XXXXXXXX"), as lipi_output_get_temp_path
 * (tokenizer/tokenizer.h). */
const char *lipi_npy_writer_get_temp_path(const lipi_npy_writer *w);

/* Writes a whole (rows, cols) float32 array to `path`. */
lipi_status lipi_npy_write(const char *path, const float *data, size_t rows, size_t cols,
                           lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Retrieval: an on-disk index of sentence embeddings, exact top-k search    */
/* as blocked GEMMs over the memory-mapped matrix, FAISS for approximate     */
/* search (retrieval/faiss_bind.h), and bitext retrieval metrics.            */
/*                                                                           */
/*   lipi_index *idx = NULL;                                                 */
/*   lipi_index_create("idx", &model, vecs, n, dim, texts, lens, NULL, &err);*/
/*   lipi_index_open("idx", NULL, &idx, &err);                               */
/*   lipi_index_search(idx, q, nq, dim, 10, NULL, docs, scores, &err);       */
/*   lipi_index_get_text(idx, docs[0], &s, &len, &err);                      */
/*   lipi_index_close(idx);                                                  */
/*                                                                           */
/* An index is a directory:                                                  */
/*   vectors.npy  float32 (count, dimension), rows L2-normalized, row i =    */
/*                document i in the order it was indexed (.npy 1.0)          */
/*   texts        the documents, one per line ("\n" after each)              */
/*   offsets.npy  uint64 (count + 1): document i is texts[off[i], off[i+1]-1)*/
/*   meta.json    model name, path and fingerprint, pooling, normalize,      */
/*                dimension, count, FAISS spec, lipi version, the document   */
/*                prompt and its name, truncate_dim                          */
/*   faiss.index  optional, FAISS's own format                               */
/*   quantized.npy optional (meta.json "quantization"): int8 codes '|i1'     */
/*                (count, dimension), or sign bits '|u1' (count,             */
/*                ceil(dimension / 8)) packed as numpy.packbits (first value */
/*                in the high bit)                                           */
/*   int8_ranges.npy with int8: float32 (2, dimension), the per-dimension    */
/*                minimum (row 0) and maximum (row 1) of the indexed rows    */
/*   binary_thresholds.npy with binary (meta.json "binary_threshold"):       */
/*                float32 (1, dimension), each dimension's threshold: bit =  */
/*                value > threshold (all 0 for "zero"; absent in binary      */
/*                indexes older than thresholds, which are "zero")           */
/* Writers build a new directory next to the old one and swap it in with one */
/* rename, so readers and an interrupted writer see the old index or the new */
/* one, never a mixture. Document numbers are 0-based in this API.           */
/* ------------------------------------------------------------------------ */

typedef struct lipi_index lipi_index;                 /* immutable, shareable */
typedef struct lipi_index_builder lipi_index_builder; /* one writer */

/* What made the vectors; searching or appending with another model is an
 * error. Strings are borrowed during the call. */
typedef struct {
    const char *name;        /* as the user named it; NULL: precomputed vectors */
    const char *path;        /* the folder it was loaded from, or NULL */
    const char *fingerprint; /* lipi_index_model_fingerprint of that folder, or NULL */
    const char *pooling;     /* "mean", "cls", "cls+mean", ...; NULL if unknown */
    bool normalize;          /* the model's own L2 normalization was on */
    const char *lipi_version; /* written to meta.json ("unknown" when NULL) */
    const char *prompt;      /* the prompt put before every document ("": none);
                                NULL: unknown (precomputed vectors, or an index
                                older than prompts) */
    const char *prompt_name; /* its name in the model's prompts, or NULL */
    size_t truncate_dim;     /* vectors cut to their first truncate_dim floats
                                (Matryoshka); 0: the model's whole dimension */
} lipi_index_model;

/* How an index quantizes its vectors for search (lipi_index_write_options),
 * as sentence-transformers' quantize_embeddings does:
 *   INT8    code = (int8) trunc((x - min) / ((max - min) / 255) - 128), with
 *           min/max per dimension over the indexed rows (a dimension with
 *           max == min codes as -128). Search scores a query q in one of
 *           two ways (lipi_search_options.int8_query_codes), both as the
 *           int32 dot product of an int8 query vector with the codes:
 *           - weights (default, asymmetric, as FAISS SQ8 ranks): the code
 *             c_i stands for about min_i + step_i * (c_i + 128), step_i =
 *             (max_i - min_i) / 255, so q . x ~ const(q) + sum w_i c_i
 *             with w_i = q_i * step_i; the query vector is w scaled to
 *             +-127 (w'_i = roundf(w_i * (127 / max |w_j|)), all 0 when w
 *             is) and score = w' . c, which orders documents as q . x^
 *             does up to the rounding of w' and of the codes' truncation
 *             (+-0.5 step). See lipi_int8_query_weights.
 *           - codes (symmetric, sentence-transformers' precision="int8"):
 *             the query is coded as the rows are, with the same ranges,
 *             clamped to [-128, 127]; score = codes . codes.
 *   BINARY  bit = value > t, 8 per byte, first value in the high bit, with
 *           t per dimension (lipi_binary_threshold): 0 as in
 *           sentence-transformers' precision="ubinary", or the mean of the
 *           indexed rows (default), which splits each dimension where its
 *           values are and not where a direction all rows share puts most
 *           of them on one side. Score (lipi_search_options
 *           .binary_query_bits):
 *           - weights (default, asymmetric): minus the Hamming distance
 *             weighted by
 *             the query's magnitudes, sum_j |w_j| [b_j != (q_j > 0)] with
 *             w_j = q_j scaled to +-7 and rounded (lipi_binary_query_weights):
 *             as sum_j w_j (2 b_j - 1) = sum |w_j| - 2 * that, it ranks as
 *             q . (2b - 1) does up to the rounding of w, the order in which
 *             sentence-transformers rescores binary hits (float32 q . b);
 *           - bits: the query coded with the same t, minus the Hamming
 *             distance of the codes (sentence-transformers' and FAISS
 *             IndexBinaryFlat's search).
 *           On 100k FLORES/NTREX lines (bench/RESULTS.md) the weights find
 *           more of the exact top 10 among 4k candidates (0.56) than the
 *           bits among 10k (0.50), for a scan 2.7 times as long.
 * The float32 vectors stay in vectors.npy for rescoring. */
typedef enum {
    LIPI_QUANT_NONE = 0,
    LIPI_QUANT_INT8,
    LIPI_QUANT_BINARY,
} lipi_quantization;

/* "int8" / "binary" / "none" (NULL for an unknown value), and back (false
 * for an unknown name). */
const char *lipi_quantization_name(lipi_quantization q);
bool lipi_quantization_parse(const char *name, lipi_quantization *q);

/* Where binary codes split each dimension (lipi_quantization, BINARY). */
typedef enum {
    LIPI_BINARY_THRESHOLD_DEFAULT = 0, /* writing: MEAN, or on append the old
                                          index's */
    LIPI_BINARY_THRESHOLD_ZERO,        /* 0: sentence-transformers' ubinary */
    LIPI_BINARY_THRESHOLD_MEAN,        /* the mean of the indexed rows */
} lipi_binary_threshold;

/* "zero" / "mean" (NULL for DEFAULT or an unknown value), and back (false
 * for an unknown name). */
const char *lipi_binary_threshold_name(lipi_binary_threshold t);
bool lipi_binary_threshold_parse(const char *name, lipi_binary_threshold *t);

typedef struct {
    bool append;            /* add to the index at dir (a new one if missing) */
    const char *faiss_spec; /* index_factory string, or NULL: none, and on
                               append keep (and extend) the old FAISS index */
    size_t threads;         /* FAISS training and adding; 0: 1 */
    bool no_sync;           /* skip fsync: for scratch indexes; the swap is
                               still atomic for other processes, but a power
                               loss may leave a damaged index */
    lipi_quantization quantize; /* also write quantized.npy (int8: calibrated
                               on all rows, old ones included, at commit);
                               NONE on append keeps the old index's */
    lipi_binary_threshold binary_threshold; /* binary: the thresholds (mean
                               ones calibrated on all rows, old ones
                               included, at commit) */
} lipi_index_write_options;

/* Starts writing the index `dir` for `dim`-dimensional vectors in a new
 * directory "<dir>.tmp-XXXXXX" beside it (append: copying the old rows in
 * first). Nothing at `dir` changes until lipi_index_builder_commit.
 * Fails with LIPI_EINVAL when dir exists and is not a lipi index (or holds
 * files an index does not have), when appending with another model or
 * dimension, or with a FAISS spec in a lipi built without FAISS; LIPI_EIO
 * when the parent directory is not writable; the errors of lipi_index_open
 * for a damaged old index; LIPI_ENOMEM. `opt` may be NULL. */
lipi_status lipi_index_builder_new(const char *dir, const lipi_index_model *model, size_t dim,
                                   const lipi_index_write_options *opt,
                                   lipi_index_builder **out, lipi_error *err);

/* Adds n documents: vecs (n, dim) (copied and L2-normalized; the caller's
 * rows are not changed) and texts[i] of lens[i] bytes (texts NULL: empty
 * texts, for vectors without documents). LIPI_EINVAL for a
 * non-finite value or a text containing '\n' (err->line = 1-based number
 * of the document in this call); LIPI_EIO when writing fails. After a
 * failure the builder only accepts abort. */
lipi_status lipi_index_builder_add(lipi_index_builder *b, const float *vecs, size_t n,
                                   const char *const *texts, const size_t *lens,
                                   lipi_error *err);

/* Rows in the index being written (old rows included). */
size_t lipi_index_builder_count(const lipi_index_builder *b);

/* Finishes the files, builds faiss.index when asked (or extends the old
 * one), writes meta.json, syncs everything and swaps the new directory in
 * (renameat2 RENAME_EXCHANGE, so `dir` never goes missing), then removes
 * the old one. Frees b either way; on failure the old index is untouched
 * and the new directory removed. */
lipi_status lipi_index_builder_commit(lipi_index_builder *b, lipi_error *err);

/* Removes the new directory; the old index is untouched. NULL is a no-op. */
void lipi_index_builder_abort(lipi_index_builder *b);

/* The new directory ("<dir>.tmp-XXXXXX"), borrowed until commit or abort. */
const char *lipi_index_builder_get_temp_dir(const lipi_index_builder *b);

/* Removes `tmp`, a copy of lipi_index_builder_get_temp_dir's string, while
 * another thread may still be writing or committing that builder: for a
 * program that cleans up when a signal ends the process (lipi's command
 * line). The directory is first renamed aside in one step, so a concurrent
 * commit either finds it gone and fails (the old index stays) or has already
 * swapped it in, and then what is removed is the old index it replaced, as
 * the commit would have. Best effort: on a file system without
 * RENAME_NOREPLACE it stays, and the next write of the index removes it. */
void lipi_index_remove_temp_dir(const char *tmp);

/* builder_new + add + commit in one call. */
lipi_status lipi_index_create(const char *dir, const lipi_index_model *model,
                              const float *vecs, size_t n, size_t dim,
                              const char *const *texts, const size_t *lens,
                              const lipi_index_write_options *opt, lipi_error *err);

typedef struct {
    bool skip_faiss;          /* do not load faiss.index (exact search only) */
    const char *faiss_params; /* FAISS search parameters set once at open:
                                 "nprobe=16", "efSearch=128" (comma-separated) */
} lipi_index_open_options;

/* Opens an index: reads meta.json, maps vectors.npy, offsets.npy and texts
 * after checking every header against its file's size and against meta
 * (nothing is read into memory but the headers), and loads faiss.index when
 * present (and lipi has FAISS), with opt->faiss_params applied. *out is
 * owned (lipi_index_close). LIPI_EIO for a missing file, LIPI_EFORMAT for
 * a bad header, meta.json field or size (err names the file, byte offset
 * and what was expected), LIPI_EINVAL for bad FAISS parameters,
 * LIPI_ENOMEM. `opt` may be NULL. */
lipi_status lipi_index_open(const char *dir, const lipi_index_open_options *opt,
                            lipi_index **out, lipi_error *err);
void lipi_index_close(lipi_index *idx);

size_t lipi_index_count(const lipi_index *idx);
size_t lipi_index_dim(const lipi_index *idx);
/* What meta.json says; strings are borrowed until lipi_index_close. */
const lipi_index_model *lipi_index_get_model(const lipi_index *idx);
/* The FAISS spec the index was built with, or NULL. */
const char *lipi_index_faiss_spec(const lipi_index *idx);
/* Whether search can use faiss.index (present, loaded, and lipi has FAISS). */
bool lipi_index_has_faiss(const lipi_index *idx);
/* The index's quantization (LIPI_QUANT_NONE for indexes without one,
 * those older than quantization included). */
lipi_quantization lipi_index_quantization(const lipi_index *idx);
/* A binary index's thresholds (ZERO for binary indexes older than
 * thresholds); DEFAULT for other indexes. */
lipi_binary_threshold lipi_index_binary_threshold(const lipi_index *idx);

/* LIPI_EINVAL naming both models when `model` is not what the index was
 * built with: another fingerprint (or, without fingerprints, another name),
 * another pooling or normalization, or a model for an index built from
 * precomputed vectors. A NULL model (precomputed query vectors) passes. */
lipi_status lipi_index_check_model(const lipi_index *idx, const lipi_index_model *model,
                                   lipi_error *err);

/* Document `doc`'s text, borrowed from the mapping until lipi_index_close.
 * LIPI_EINVAL for doc >= count, LIPI_EFORMAT when offsets.npy is damaged
 * there. */
lipi_status lipi_index_get_text(const lipi_index *idx, size_t doc, const char **text,
                                size_t *len, lipi_error *err);

typedef struct {
    size_t threads;          /* 0: 1 */
    bool exact;              /* exact search even when faiss.index is loaded */
    /* Exact search tiling (0: defaults); results depend on these and the
     * inputs only, never on the thread count. */
    size_t block_rows;       /* rows per unit of work (default 16384) */
    size_t gemm_rows;        /* rows per GEMM inside a block (default 1024) */
    size_t gemm_queries;     /* queries per GEMM (default 256) */
    int release_pages;       /* lipi_index_search: drop each block's pages
                                from the index's mapping after use (the page
                                cache keeps them): 0 (default) when the
                                matrix is 256 MiB or more, 1 always, -1 never.
                                lipi_knn_search never drops pages. */
    /* Quantized indexes (lipi_index_write_options.quantize): the top
     * rescore_multiplier * k documents by quantized score (0: 4) are
     * rescored by the float32 inner product of the query with their rows
     * of vectors.npy (only those rows are read), and the best k of them
     * returned with their float32 scores. no_rescore returns the quantized
     * ranking itself, with the quantized scores as floats. */
    size_t rescore_multiplier;
    bool no_rescore;
    bool int8_query_codes;   /* int8 indexes: score the query's codes (as
                                sentence-transformers does) instead of its
                                weights; see lipi_quantization */
    bool binary_query_bits;  /* binary indexes: score the query's bits
                                (Hamming distance, as sentence-transformers
                                and FAISS IndexBinaryFlat rank) instead of
                                its weights; see lipi_quantization */
} lipi_search_options;

/* Top-k documents by inner product for nq queries q (nq, dim): docs and
 * scores are (nq, k), best first, ties in exact and quantized search broken
 * by the lower document number; slots past the last hit (k > count) hold
 * doc -1 and score -INFINITY. Uses faiss.index when loaded, else the
 * quantized vectors when the index has them (see rescore_multiplier), unless
 * opt->exact. Queries are used as given (normalize them for cosine
 * scores). Results never depend on opt->threads. LIPI_EINVAL for a
 * dimension other than the index's, k = 0 or a non-finite query value;
 * LIPI_ENOMEM. `opt` may be NULL. */
lipi_status lipi_index_search(const lipi_index *idx, const float *q, size_t nq, size_t dim,
                              size_t k, const lipi_search_options *opt, int64_t *docs,
                              float *scores, lipi_error *err);

/* Share of the exact float32 top-k (lipi_index_search with opt->exact)
 * that lipi_index_search with `opt` also returns, over nq queries q (nq,
 * dim): recall@k of the index's FAISS or quantized search. Same errors as
 * lipi_index_search. Example: an exact index gives 1. */
lipi_status lipi_index_recall(const lipi_index *idx, const float *q, size_t nq, size_t dim,
                              size_t k, const lipi_search_options *opt, double *recall,
                              lipi_error *err);

/* Exact top-k by inner product over any matrix x (n, dim), which may be
 * memory-mapped: blocks of rows go to the threads, each block is scored as
 * GEMMs against tiles of queries and fed to one bounded heap per query and
 * thread, and the heaps are merged at the end. x is only read. Same outputs
 * and errors as lipi_index_search. */
lipi_status lipi_knn_search(const float *x, size_t n, size_t dim, const float *q, size_t nq,
                            size_t k, const lipi_search_options *opt, int64_t *docs,
                            float *scores, lipi_error *err);

/* Quantization kernels, as the index uses them (pure; no allocation).
 *   lipi_int8_ranges:    x (n, dim) -> ranges (2, dim): row 0 the minimum,
 *                        row 1 the maximum of each column (n >= 1)
 *   lipi_quantize_int8:  x (n, dim), ranges (2, dim) -> codes (n, dim)
 *   lipi_binary_means:   x (n, dim) -> t (dim), each column's mean (summed
 *                        in double in row order, rounded to float; n >= 1)
 *   lipi_quantize_binary: x (n, dim), thresholds t (dim) or NULL (zero) ->
 *                        bits (n, (dim + 7) / 8), bit = x > t, padding 0
 *   lipi_int8_query_weights: queries q (n, dim), ranges (2, dim) -> the
 *                        int8 weights w' (n, dim) that int8 search scores
 *                        against the codes by default
 *   lipi_binary_query_weights: queries q (n, dim) -> planes (n, 4, (dim +
 *                        7) / 8), each plane packed as the codes are: plane
 *                        0 the bits q_j > 0, planes 1..3 bits 0..2 of |w_j|,
 *                        w_j = roundf(q_j * 7 / max |q|) (0 when q is 0)
 * See lipi_quantization for the formulas. */
void lipi_int8_ranges(const float *x, size_t n, size_t dim, float *ranges);
void lipi_quantize_int8(const float *x, size_t n, size_t dim, const float *ranges,
                        int8_t *codes);
void lipi_binary_means(const float *x, size_t n, size_t dim, float *t);
void lipi_quantize_binary(const float *x, size_t n, size_t dim, const float *t, uint8_t *bits);
void lipi_int8_query_weights(const float *q, size_t n, size_t dim, const float *ranges,
                             int8_t *w);
void lipi_binary_query_weights(const float *q, size_t n, size_t dim, uint8_t *planes);

/* A short hex fingerprint (16 digits) of the model folder `dir`: a hash of
 * the name, size and first MiB of each file with a fixed name in it
 * (lipi_model_file_at: config, weights, sentence-transformers and tokenizer
 * files). out holds 17 bytes. LIPI_EIO when config.json or
 * model.safetensors cannot be read. */
lipi_status lipi_index_model_fingerprint(const char *dir, char out[17], lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Bitext retrieval metrics (line i of A translates line i of B)             */
/* ------------------------------------------------------------------------ */

/* ranks[i] = 1-based rank of docs row i among all n docs for query row i by
 * inner product (ties: the lower document number ranks first, as in
 * search). q and docs are (n, dim); normalize them for cosine similarity.
 * Only opt->threads and opt->gemm_queries are used. */
lipi_status lipi_bitext_ranks(const float *q, const float *docs, size_t n, size_t dim,
                              const lipi_search_options *opt, size_t *ranks, lipi_error *err);

typedef struct {
    double p_at_1;  /* share of queries whose match ranks first */
    double mrr;     /* mean of 1 / rank */
    double *recall; /* caller's array: recall[j] = share with rank <= ks[j] */
} lipi_retrieval_scores;

/* Metrics from ranks[0..n) (n = 0 gives zeros). */
void lipi_retrieval_metrics(const size_t *ranks, size_t n, const size_t *ks, size_t nk,
                            lipi_retrieval_scores *out);

/* Both directions: A -> B (queries a, documents b) and B -> A, by cosine
 * similarity (ranks of L2-normalized copies of a and b), as LaBSE and MTEB
 * score bitext mining. a and b are (n, dim). LIPI_EINVAL for non-finite
 * values, LIPI_ENOMEM. */
lipi_status lipi_eval_bitext(const float *a, const float *b, size_t n, size_t dim,
                             const size_t *ks, size_t nk, const lipi_search_options *opt,
                             lipi_retrieval_scores *a_to_b, lipi_retrieval_scores *b_to_a,
                             lipi_error *err);


/* Maps a .npy file of float32 (rows, cols), or (cols,) read as one row,
 * after validating its header (version 1.0-3.0, descr '<f4', C order, the
 * shape's byte size equal to what follows the header). *out is owned
 * (lipi_npy_map_close); data is borrowed from it. LIPI_EIO, LIPI_EFORMAT
 * (err names the byte offset and what was expected), LIPI_ENOMEM. */
typedef struct lipi_npy_map lipi_npy_map;
lipi_status lipi_npy_map_open(const char *path, lipi_npy_map **out, lipi_error *err);
const float *lipi_npy_map_data(const lipi_npy_map *m);
size_t lipi_npy_map_rows(const lipi_npy_map *m);
size_t lipi_npy_map_cols(const lipi_npy_map *m);
void lipi_npy_map_close(lipi_npy_map *m);

/* ======================================================================== */
/* Probes: logistic regression on frozen embeddings                          */
/* ======================================================================== */

/* A multinomial logistic-regression head trained on sentence embeddings,
 * for labelled examples without a fine-tuned checkpoint:
 *
 *   lipi_probe *p = NULL;
 *   lipi_probe_train(x, y, n, dim, labels, k, NULL, &p, &err);  x: (n, dim)
 *   lipi_probe_predict(p, q, nq, probs);                        probs: (nq, k)
 *   lipi_probe_save(p, &model, "probe.json", &err);
 *   lipi_probe_free(p);
 *
 * or, from labelled rows with the label mapping, held-out draw and score
 * done for you: lipi_probe_fit(&train, NULL, dim, &opt, &p, &report, &err).
 *
 * Training minimizes mean cross-entropy + l2/2 * |W|^2 (the bias is not
 * penalized) with L-BFGS over the whole set, in a fixed order on one
 * thread: the same data gives the same weights, bit for bit. */
typedef struct lipi_probe lipi_probe;

typedef struct {
    double l2;              /* L2 strength; default 1e-4 (when 0 is wanted,
                               pass a negative value) */
    size_t max_iterations;  /* L-BFGS iterations; 0: 500 */
} lipi_probe_options;

/* Trains on x (n, dim) with labels y[i] < k; labels[0..k) are the class
 * names (copied). `opt` may be NULL. *out is owned (lipi_probe_free).
 * LIPI_EINVAL for n == 0, k < 2, a label out of range or a non-finite
 * value (err->line = the example's 1-based row); LIPI_ENOMEM. */
lipi_status lipi_probe_train(const float *x, const uint32_t *y, size_t n, size_t dim,
                             const char *const *labels, size_t k,
                             const lipi_probe_options *opt, lipi_probe **out, lipi_error *err);

/* Class probabilities (softmax) of n embeddings q (n, dim): probs (n, k). */
void lipi_probe_predict(const lipi_probe *p, const float *q, size_t n, float *probs);

/* Marks n_held of the n rows held out (held[i] = true; the others false),
 * drawn by a Fisher-Yates shuffle driven by splitmix64 from `seed`: the
 * same n, n_held and seed mark the same rows on every machine. The caller
 * checks 0 < n_held < n. LIPI_ENOMEM. Example: n = 10, n_held = 1, seed 42
 * always holds out the same one row. */
lipi_status lipi_probe_holdout(size_t n, size_t n_held, uint64_t seed, bool *held,
                               lipi_error *err);

/* Share of the rows of x (n, dim) whose most probable label under p is
 * y[i] (ties: the lower label); 0 for n == 0. probs is scratch of
 * lipi_probe_label_count(p) floats. */
double lipi_probe_accuracy(const lipi_probe *p, const float *x, const uint32_t *y, size_t n,
                           float *probs);

/* Labelled rows for lipi_probe_fit: x (n, dim) with labels[i] the
 * NUL-terminated label of row i; all borrowed. `path` and `line_no` only
 * make errors point at the input: the file the rows came from and each
 * row's 1-based line there (NULL: no path; row i is line i + 1). */
typedef struct {
    const float *x;             /* (n, dim); may be NULL for lipi_probe_fit_check */
    const char *const *labels;  /* (n) */
    size_t n;
    const char *path;
    const size_t *line_no;      /* (n) or NULL */
} lipi_labelled_vectors;

typedef struct {
    lipi_probe_options train;   /* l2, max_iterations */
    double holdout;             /* without dev: the share of training rows held
                                   out (rounded, at least 1), 0: none */
    uint64_t seed;              /* of the held-out draw (lipi_probe_holdout) */
} lipi_probe_fit_options;

typedef enum {
    LIPI_PROBE_SCORED_ON_TRAINING,  /* no dev set and nothing held out */
    LIPI_PROBE_SCORED_ON_HELD_OUT,  /* rows of train left out of training */
    LIPI_PROBE_SCORED_ON_DEV,
} lipi_probe_scored_on;

typedef struct {
    double accuracy;            /* lipi_probe_accuracy on `scored_on` */
    lipi_probe_scored_on scored_on;
    size_t n_train;             /* rows trained on */
    size_t n_held;              /* rows scored: held out or dev; 0 on training */
    size_t k;                   /* distinct labels */
} lipi_probe_fit_report;

/* The whole probe recipe on labelled rows: the class names are train's
 * distinct labels, sorted by strcmp (so label indices do not depend on row
 * order); without `dev` (NULL) a share opt->holdout of train's rows, drawn
 * by lipi_probe_holdout with opt->seed, is left out of training; the probe
 * is trained on the rest (lipi_probe_train, opt->train) and scored on dev,
 * on the held-out rows, or - with neither - on the training rows. Example:
 * 40 rows labelled "sport"/"music", holdout 0.1, seed 42: labels
 * ["music", "sport"], 36 rows trained on, the same 4 held out every time.
 * *out is owned (lipi_probe_free); *rep may be NULL. `opt` may be NULL (no
 * holdout, seed 0, lipi_probe_train's defaults). Fails, before any
 * training, with LIPI_EINVAL for fewer than 2 distinct labels (err->path =
 * train->path), for a dev label that train lacks (err->path/line: the dev
 * row's), for a holdout that leaves no training rows; then what
 * lipi_probe_train reports (err->path/line: the train row's); LIPI_ENOMEM. */
lipi_status lipi_probe_fit(const lipi_labelled_vectors *train, const lipi_labelled_vectors *dev,
                           size_t dim, const lipi_probe_fit_options *opt, lipi_probe **out,
                           lipi_probe_fit_report *rep, lipi_error *err);

/* lipi_probe_fit's checks of the labels alone (x unused): for callers who
 * embed afterwards and would rather fail before that long work. */
lipi_status lipi_probe_fit_check(const lipi_labelled_vectors *train,
                                 const lipi_labelled_vectors *dev,
                                 const lipi_probe_fit_options *opt, lipi_error *err);

size_t lipi_probe_dim(const lipi_probe *p);
size_t lipi_probe_label_count(const lipi_probe *p);
const char *lipi_probe_label(const lipi_probe *p, size_t i); /* borrowed */
/* The model the probe was trained on (strings borrowed from p; NULL when
 * not known). */
const lipi_index_model *lipi_probe_model(const lipi_probe *p);

/* Writes probe.json atomically: format, model (name, fingerprint, pooling,
 * normalize), labels, dim, weights (k rows of dim), bias, and `accuracy`
 * (held-out accuracy, written when >= 0). LIPI_EIO naming the path,
 * LIPI_ENOMEM. */
lipi_status lipi_probe_save(const lipi_probe *p, const lipi_index_model *model,
                            double accuracy, const char *path, lipi_error *err);

/* Reads probe.json. LIPI_EIO, LIPI_EFORMAT naming the JSON field and what
 * was expected, LIPI_ENOMEM. *out is owned. */
lipi_status lipi_probe_load(const char *path, lipi_probe **out, lipi_error *err);

void lipi_probe_free(lipi_probe *p); /* NULL is a no-op */

#endif

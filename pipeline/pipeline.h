/* lipi pipeline module: encoder-only transformers (BERT, RoBERTa/XLM-R,
 * ALBERT, DistilBERT) from Hugging Face folders, token ids -> hidden states
 * -> pooled sentence embeddings or classifier probabilities.
 *
 *   lipi_model *m = NULL; lipi_model_session *s = NULL; lipi_error err;
 *   if (lipi_model_load("all-MiniLM-L6-v2", NULL, &m, &err) == LIPI_OK &&
 *       lipi_model_session_new(m, 2, &s, &err) == LIPI_OK)
 *       lipi_model_embed(s, seqs, n, NULL, vectors, &err); // (n, embed_dim)
 *   lipi_model_session_free(s); lipi_model_free(m);
 *
 * A lipi_model is immutable after loading and may be shared by any number of
 * threads; each calling thread uses its own lipi_model_session, which owns
 * the scratch memory and the worker threads of one forward pass at a time.
 * Outputs do not depend on the number of threads: every output element is
 * computed by exactly one thread in a fixed order, so 1 and N threads give
 * bit-identical results.
 */
#ifndef LIPI_PIPELINE_H
#define LIPI_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tokenizer/tokenizer.h"

typedef struct lipi_model lipi_model;                 /* immutable, shareable */
typedef struct lipi_model_session lipi_model_session; /* one per calling thread */

/* Pooling modes, as bit flags. Several flags concatenate their vectors in
 * the order of sentence-transformers: cls, max, mean, mean_sqrt_len. */
enum {
    LIPI_POOL_DEFAULT = 0,        /* what the model folder says (see below) */
    LIPI_POOL_CLS = 1u << 0,      /* hidden state of the first token */
    LIPI_POOL_MAX = 1u << 1,      /* element-wise max over the tokens */
    LIPI_POOL_MEAN = 1u << 2,     /* mean over the tokens */
    LIPI_POOL_MEAN_SQRT_LEN = 1u << 3, /* sum over the tokens / sqrt(count) */
};

typedef enum {
    LIPI_DTYPE_F32 = 0, /* weights and arithmetic in float32 */
    LIPI_DTYPE_INT8,    /* projections and FFN in int8: weights quantized per
                           output channel at load, activations per token on
                           the fly; AVX512-VNNI / AVX-VNNI through oneDNN when
                           the CPU has it, portable C otherwise. Embeddings,
                           attention, LayerNorm and heads stay float32. */
} lipi_dtype;

typedef struct {
    lipi_dtype dtype;
} lipi_model_load_options;

/* What a loaded model is. Strings and arrays are borrowed from the model. */
typedef struct {
    const char *model_type;   /* "bert", "roberta", "xlm-roberta", "albert", "distilbert" */
    size_t vocab_size;
    size_t hidden_size;
    size_t num_layers;        /* layers run (ALBERT: shared weights counted per use) */
    size_t num_heads;
    size_t max_tokens;        /* longest sequence the positions allow (RoBERTa: minus offset) */
    size_t max_seq_length;    /* sentence-transformers' max_seq_length, else max_tokens */
    uint32_t pad_token_id;
    unsigned pooling;         /* default LIPI_POOL_* flags (never LIPI_POOL_DEFAULT) */
    bool normalize;           /* default L2 normalization of embeddings */
    size_t num_labels;        /* 0 unless the checkpoint has a classifier head */
    const char *const *labels; /* num_labels names from id2label ("LABEL_i" if absent) */
} lipi_model_info;

/* One input sequence: token ids exactly as the model's tokenizer gives them
 * (special tokens included), without padding. */
typedef struct {
    const uint32_t *ids;      /* len ids */
    const uint32_t *type_ids; /* len token type ids, or NULL for all 0 */
    size_t len;               /* 1 .. info.max_tokens */
} lipi_sequence;

typedef struct {
    unsigned pooling; /* LIPI_POOL_* flags; LIPI_POOL_DEFAULT: the model's */
    int normalize;    /* -1: the model's default, 0: no, 1: L2-normalize */
} lipi_embed_options;

/* Loads a Hugging Face model folder: config.json + model.safetensors (F32,
 * F16 or BF16; converted to float32 at load). In a sentence-transformers
 * folder, modules.json, 1_Pooling/config.json, Dense modules (Tanh or
 * Identity, weights in their model.safetensors), a Normalize module and
 * sentence_bert_config.json set what lipi_model_embed computes by default.
 * `opt` may be NULL. *out is owned by the caller (lipi_model_free).
 * Fails with LIPI_EIO (files missing or unreadable), LIPI_EFORMAT (a bad
 * config field, an unsupported architecture, a malformed safetensors file or
 * a tensor whose shape does not match the config: the message names the
 * file, the field or tensor and what was expected), LIPI_EINVAL (bad
 * options) or LIPI_ENOMEM. */
lipi_status lipi_model_load(const char *dir, const lipi_model_load_options *opt,
                            lipi_model **out, lipi_error *err);
void lipi_model_free(lipi_model *m);

/* Borrowed description, valid until lipi_model_free. */
const lipi_model_info *lipi_model_get_info(const lipi_model *m);

/* Length of one embedding for the given pooling flags (LIPI_POOL_DEFAULT:
 * the model's): hidden_size times the number of flags, or the last Dense
 * module's out_features when the folder has Dense modules. */
size_t lipi_model_embed_dim(const lipi_model *m, unsigned pooling);

/* A session running `m` with `threads` threads (0 or 1: the calling thread
 * only; the caller takes part in the work). The model must outlive the
 * session. LIPI_ENOMEM when memory or a thread cannot be had. */
lipi_status lipi_model_session_new(const lipi_model *m, size_t threads,
                                   lipi_model_session **out, lipi_error *err);
void lipi_model_session_free(lipi_model_session *s);

/* Last hidden states of n sequences packed one after the other:
 * hidden is (sum of seqs[i].len, hidden_size), rows in input order. Every
 * projection runs as one GEMM over all tokens of the batch; no padding is
 * computed. LIPI_EINVAL (message names the sequence and position) for an
 * empty or too long sequence, an id >= vocab_size or a bad type id. */
lipi_status lipi_model_forward(lipi_model_session *s, const lipi_sequence *seqs,
                               size_t n, float *hidden, lipi_error *err);

/* Pooled embeddings, passed through the folder's Dense modules and
 * optionally L2-normalized, exactly as sentence-transformers computes them:
 * out is (n, lipi_model_embed_dim(m, pooling)). `opt` may be NULL (model
 * defaults). Fails like lipi_model_forward, and with LIPI_EINVAL when the
 * pooling's size does not fit the Dense modules. */
lipi_status lipi_model_embed(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                             const lipi_embed_options *opt, float *out, lipi_error *err);

/* Runs the classifier head of a *ForSequenceClassification checkpoint:
 * logits and probabilities (softmax, or sigmoid for multi-label problems),
 * each (n, num_labels); either pointer may be NULL. LIPI_EINVAL if the
 * model has no classifier head. */
lipi_status lipi_model_classify(lipi_model_session *s, const lipi_sequence *seqs,
                                size_t n, float *logits, float *probs, lipi_error *err);

/* Name of the GEMM backend the sessions use: "onednn" when libdnnl.so.2 is
 * installed (it reaches full speed without any environment variable), else
 * "portable". */
const char *lipi_gemm_backend(void);

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
/* The temporary file ("<path>.tmp-XXXXXXXX"), borrowed until close or
 * abort: for a program that removes it when a signal ends the process
 * (lipi's command line). Unlinking it only makes a later close fail with
 * LIPI_EIO, `path` untouched; a close that already renamed it is not
 * affected. */
const char *lipi_npy_writer_get_temp_path(const lipi_npy_writer *w);

/* A text output of a command: `path`, written to a temporary file beside
 * it and renamed over it by lipi_output_commit, or standard output for
 * NULL or "-". *f is where to write (borrowed until commit or abort).
 * LIPI_EIO when the folder is not writable (found before any work),
 * LIPI_ENOMEM. */
typedef struct lipi_output lipi_output;
lipi_status lipi_output_open(const char *path, lipi_output **out, FILE **f, lipi_error *err);
/* Flushes and moves the file into place; any write error since open is
 * LIPI_EIO and leaves `path` untouched. Frees o either way. */
lipi_status lipi_output_commit(lipi_output *o, lipi_error *err);
/* Drops the temporary file (`path` untouched). NULL is a no-op. */
void lipi_output_abort(lipi_output *o);
/* The temporary file, as lipi_npy_writer_get_temp_path; NULL when o writes
 * to standard output. */
const char *lipi_output_get_temp_path(const lipi_output *o);

/* Writes a whole (rows, cols) float32 array to `path`. */
lipi_status lipi_npy_write(const char *path, const float *data, size_t rows, size_t cols,
                           lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Retrieval: an on-disk index of sentence embeddings, exact top-k search    */
/* as blocked GEMMs over the memory-mapped matrix, FAISS for approximate     */
/* search (pipeline/faiss_bind.h), and bitext retrieval metrics.            */
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
/*                dimension, count, FAISS spec, lipi version                 */
/*   faiss.index  optional, FAISS's own format                               */
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
} lipi_index_model;

typedef struct {
    bool append;            /* add to the index at dir (a new one if missing) */
    const char *faiss_spec; /* index_factory string, or NULL: none, and on
                               append keep (and extend) the old FAISS index */
    size_t threads;         /* FAISS training and adding; 0: 1 */
    bool no_sync;           /* skip fsync: for scratch indexes; the swap is
                               still atomic for other processes, but a power
                               loss may leave a damaged index */
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
 * rows are not changed) and texts[i] of lens[i] bytes. LIPI_EINVAL for a
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
} lipi_search_options;

/* Top-k documents by inner product for nq queries q (nq, dim): docs and
 * scores are (nq, k), best first, ties in exact search broken by the lower
 * document number; slots past the last hit (k > count) hold doc -1 and
 * score -INFINITY. Uses faiss.index when loaded unless opt->exact. Queries
 * are used as given (normalize them for cosine scores). LIPI_EINVAL for a
 * dimension other than the index's, k = 0 or a non-finite query value;
 * LIPI_ENOMEM. `opt` may be NULL. */
lipi_status lipi_index_search(const lipi_index *idx, const float *q, size_t nq, size_t dim,
                              size_t k, const lipi_search_options *opt, int64_t *docs,
                              float *scores, lipi_error *err);

/* Exact top-k by inner product over any matrix x (n, dim), which may be
 * memory-mapped: blocks of rows go to the threads, each block is scored as
 * GEMMs against tiles of queries and fed to one bounded heap per query and
 * thread, and the heaps are merged at the end. x is only read. Same outputs
 * and errors as lipi_index_search. */
lipi_status lipi_knn_search(const float *x, size_t n, size_t dim, const float *q, size_t nq,
                            size_t k, const lipi_search_options *opt, int64_t *docs,
                            float *scores, lipi_error *err);

/* A short hex fingerprint (16 digits) of the model folder `dir`: a hash of
 * config.json, the sentence-transformers and tokenizer files, and the size
 * and first MiB of model.safetensors. out holds 17 bytes. LIPI_EIO when
 * config.json or model.safetensors cannot be read. */
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

/* Scales each row of x (n, dim) to unit L2 norm in place (all-zero rows
 * stay zero). */
void lipi_vectors_normalize(float *x, size_t n, size_t dim);

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
/* Hugging Face hub cache and downloads                                      */
/* ======================================================================== */

/* The cache uses huggingface_hub's layout, so lipi and Python share it:
 *   CACHE/models--ORG--NAME/refs/main            the commit "main" points to
 *   CACHE/models--ORG--NAME/blobs/ETAG           file contents, named by ETag
 *   CACHE/models--ORG--NAME/snapshots/COMMIT/F   symlinks to ../../blobs/ETAG
 *
 *   char dir[4096];
 *   if (lipi_hub_resolve("sentence-transformers/LaBSE", NULL, NULL, dir,
 *                        sizeof dir, &err) == LIPI_OK)
 *       lipi_model_load(dir, NULL, &m, &err);
 */

/* Writes the cache folder to out: $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else $HOME/.cache/huggingface/hub (as
 * huggingface_hub). LIPI_EINVAL when none of them is set or it does not fit. */
lipi_status lipi_hub_cache_dir(char *out, size_t cap, lipi_error *err);

/* Whether s has the shape of a hub model name: NAME or ORG/NAME, each part
 * of letters, digits, '-', '_' and '.', not starting with '.' or '-'. */
bool lipi_hub_is_name(const char *s);

/* The snapshot folder of model `name` at `revision` (NULL: "main"; a branch
 * or tag name read from refs/, or a 40-digit commit) in `cache_dir` (NULL:
 * lipi_hub_cache_dir). Fails with LIPI_EIO naming the ref or snapshot that
 * is missing, where the cache came from, and `lipi download`;
 * LIPI_EINVAL for a name that is not a hub name or a path that does not
 * fit in cap. */
lipi_status lipi_hub_resolve(const char *name, const char *revision, const char *cache_dir,
                             char *out, size_t cap, lipi_error *err);

/* Progress of one file of a download. */
typedef struct {
    const char *file;       /* path in the repository */
    size_t file_no, files;  /* 1-based number of this file, files to fetch */
    uint64_t done, total;   /* bytes so far (resumed bytes included), total
                               (0 when the server does not say) */
    bool finished;          /* the file is complete (or was in the cache) */
} lipi_hub_progress;

typedef void (*lipi_hub_progress_fn)(const lipi_hub_progress *p, void *user);

typedef struct {
    const char *revision;  /* NULL: "main" */
    const char *endpoint;  /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;     /* NULL: $HF_TOKEN (sent as a Bearer token) */
    const char *cache_dir; /* NULL: lipi_hub_cache_dir */
    bool all;              /* every file of the repository, not only lipi's */
    lipi_hub_progress_fn progress; /* may be NULL */
    void *user;
} lipi_hub_download_options;

/* Whether lipi needs repository file `path` to run the model: config.json,
 * safetensors weights, tokenizer and sentence-transformers files, the
 * files of its module folders (1_Pooling/config.json, 2_Dense/...). */
bool lipi_hub_wanted_file(const char *path);

/* Downloads model `name` into the cache the way huggingface_hub does:
 * GET ENDPOINT/api/models/NAME/revision/REV for the commit and file list,
 * then each file from ENDPOINT/NAME/resolve/COMMIT/FILE into
 * blobs/ETAG (the X-Linked-Etag of LFS files, else the ETag), linked from
 * snapshots/COMMIT/FILE; finally refs/REV. A file is first written to
 * blobs/ETAG.incomplete, which a later call resumes with a Range request;
 * when the ETag is a SHA-256 (LFS files) the content is checked against it
 * before it is moved into place. Blobs already present are not fetched
 * again. Writes the snapshot folder to out. `opt` may be NULL.
 * Fails with LIPI_EIO (a network or HTTP error: the message names the URL
 * and status, 404 saying the model or revision does not exist, 401/403
 * pointing to HF_TOKEN; an interrupted transfer keeps the partial file for
 * resuming; a file that cannot be written), LIPI_EFORMAT (a bad API answer,
 * a file name that would leave the cache folder, a checksum mismatch: the
 * partial file is deleted and nothing is linked), LIPI_EINVAL (a bad name),
 * LIPI_ENOMEM. Files finished before a failure stay in the cache. */
lipi_status lipi_hub_download(const char *name, const lipi_hub_download_options *opt,
                              char *out, size_t cap, lipi_error *err);

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

/* ======================================================================== */
/* Inflation report                                                          */
/* ======================================================================== */

/* Inflation report: how many more tokens the same content costs in one
 * language than in another, per tokenizer (Petrov et al. 2023 "parity",
 * Rust et al. 2021 "fertility" and "continued words").
 *
 *   const char *toks[] = {"cl100k_base", "mbert"}, *langs[] = {"eng_Latn", "hin_Deva"};
 *   lipi_inflation_report *rep = NULL;
 *   lipi_inflation_new(toks, 2, langs, 2, 0, &rep, &err);      reference: eng_Latn
 *   per tokenizer t, language l, aligned line:  lipi_inflation_add_line(rep, t, l,
 *       line, len, spans, n_tokens, &err);
 *   lipi_inflation_write(rep, LIPI_INFLATION_TABLE, stdout, &err);
 *   lipi_inflation_free(rep);
 *
 * The report never tokenizes: the caller encodes (without special tokens)
 * and hands over each token's byte span in the line plus two flags; the
 * report finds words (ICU word break iterator), grapheme clusters and code
 * points itself. Counts are 64-bit integers, so the figures do not depend on
 * the order lines arrive in or on how work was split between threads.
 */

/* ======================================================================== */
/* The report                                                                */
/* ======================================================================== */

/* One token as the encoder produced it: the bytes [start, end) of the line it
 * came from (end <= the line's length; start == end for a token with no
 * source text). Tokens are given in encoding order; byte-fallback pieces of
 * one character usually all carry that character's span. */
typedef struct {
    size_t start, end;
    bool is_unknown;       /* the model's unknown token (<unk>, [UNK], ...) */
    bool is_byte_fallback; /* a byte piece such as <0xE0> */
} lipi_inflation_token;

typedef struct lipi_inflation_report lipi_inflation_report;

/* Pass as `reference` to lipi_inflation_new for a report without parity. */
#define LIPI_INFLATION_NO_REFERENCE SIZE_MAX

/* New empty report over parallel text: n_tokenizers column groups and
 * n_languages rows (names copied; at least one of each, names unique in
 * each list). `reference` indexes `languages` (parity is relative to it) or
 * is LIPI_INFLATION_NO_REFERENCE. Fails with LIPI_EINVAL on an empty or
 * duplicate name or a reference out of range, LIPI_ENOMEM. *out is owned by
 * the caller (lipi_inflation_free). */
lipi_status lipi_inflation_new(const char *const *tokenizers, size_t n_tokenizers,
                               const char *const *languages, size_t n_languages,
                               size_t reference, lipi_inflation_report **out,
                               lipi_error *err);

/* New empty report for one mixed-script text (--text mode): rows are
 * scripts, created as words of each script appear (ICU script of the word's
 * first letter that is not Common or Inherited; words of digits or symbols
 * only form the row "Common"). No parity. Same failures as lipi_inflation_new. */
lipi_status lipi_inflation_new_text(const char *const *tokenizers, size_t n_tokenizers,
                                    lipi_inflation_report **out, lipi_error *err);

/* New empty report with the same mode, tokenizers, languages and reference
 * as `shape`: one per worker thread, folded together with
 * lipi_inflation_merge. LIPI_ENOMEM. */
lipi_status lipi_inflation_new_like(const lipi_inflation_report *shape,
                                    lipi_inflation_report **out, lipi_error *err);

void lipi_inflation_free(lipi_inflation_report *rep); /* NULL is a no-op */

/* Counts one line of language `lang` encoded by tokenizer `tok` (parallel
 * mode). line[0..len) must be valid UTF-8. The words, grapheme clusters and
 * code points of the line are found once and reused while the same text is
 * added for the next tokenizers, so feed one line to every tokenizer in a
 * row. Fails, counting nothing, with LIPI_EINVAL (index out of range, text
 * mode report, a token span with start > end or end > len: msg names the
 * token), LIPI_EFORMAT (invalid UTF-8, offset set), LIPI_EICU, LIPI_ENOMEM.
 * Not thread-safe on one report: use one report per thread. */
lipi_status lipi_inflation_add_line(lipi_inflation_report *rep, size_t tok, size_t lang,
                                    const char *line, size_t len,
                                    const lipi_inflation_token *toks, size_t n,
                                    lipi_error *err);

/* The same for a text-mode report: the line's words, characters and tokens
 * are counted in the rows of their scripts. Characters outside words
 * (spaces, punctuation) belong to the script of the word before them (of the
 * first word when none is before). A token belongs to the script of the
 * first word it overlaps, or else to that of its first character; a token
 * boundary to the script of the token after it. A line counts as a line of
 * every script that has characters in it. Failures as lipi_inflation_add_line. */
lipi_status lipi_inflation_add_text_line(lipi_inflation_report *rep, size_t tok,
                                         const char *line, size_t len,
                                         const lipi_inflation_token *toks, size_t n,
                                         lipi_error *err);

/* Adds the counts of `src` into `dst`; both made from the same shape
 * (lipi_inflation_new_like), else LIPI_EINVAL. Text-mode rows are matched by
 * script. LIPI_ENOMEM leaves dst unchanged. */
lipi_status lipi_inflation_merge(lipi_inflation_report *dst, const lipi_inflation_report *src,
                                 lipi_error *err);

/* Records how many aligned lines the caller skipped (empty in some file);
 * shown in the outputs. */
void lipi_inflation_set_skipped_lines(lipi_inflation_report *rep, uint64_t n);

bool lipi_inflation_is_text_mode(const lipi_inflation_report *rep);
size_t lipi_inflation_tokenizer_count(const lipi_inflation_report *rep);
const char *lipi_inflation_tokenizer_name(const lipi_inflation_report *rep, size_t i);
/* Rows: languages, or the scripts seen so far in text mode. */
size_t lipi_inflation_language_count(const lipi_inflation_report *rep);
const char *lipi_inflation_language_name(const lipi_inflation_report *rep, size_t i);
/* Name of the reference language, NULL when there is none. Borrowed. */
const char *lipi_inflation_reference(const lipi_inflation_report *rep);

/* The figures of one (tokenizer, language) cell. Shares are in [0, 1].
 * A ratio whose denominator is zero is NaN, and so is parity without a
 * reference, or when the reference has no tokens or a different number of
 * lines (parity compares the same lines only). */
typedef struct {
    const char *tokenizer, *language; /* borrowed from the report */
    uint64_t lines;
    uint64_t tokens;
    uint64_t words;             /* ICU word segments that are not spaces or punctuation */
    uint64_t chars;             /* code points */
    uint64_t bytes;             /* UTF-8 bytes */
    uint64_t continued_words;   /* words overlapped by two or more tokens */
    uint64_t unknown_tokens, byte_fallback_tokens;
    uint64_t unknown_chars;     /* code points overlapped by an unknown token */
    uint64_t boundaries;        /* token boundaries: tokens - 1 per line with tokens */
    uint64_t split_boundaries;  /* of those, inside a grapheme cluster */
    double tokens_per_line;
    double parity;              /* tokens / tokens of the reference, same lines */
    double fertility;           /* tokens / words */
    double chars_per_token, bytes_per_token;
    double continued_share;     /* continued_words / words */
    double unknown_share;       /* unknown_tokens / tokens */
    double byte_fallback_share; /* byte_fallback_tokens / tokens */
    double unknown_char_share;  /* unknown_chars / chars */
    double grapheme_split_share; /* split_boundaries / boundaries */
    bool comparable;            /* unknown_chars <= 10% of chars (Petrov's rule) */
} lipi_inflation_row;

/* Fills *row for tokenizer `tok` and row `lang` (indices must be in range). */
void lipi_inflation_get_row(const lipi_inflation_report *rep, size_t tok, size_t lang,
                            lipi_inflation_row *row);

/* Writes the row indices in display order into order[0 .. language_count):
 * parallel mode by the first tokenizer's parity, lowest first, rows without
 * parity last; text mode by characters, most first; ties by name. */
void lipi_inflation_language_order(const lipi_inflation_report *rep, size_t *order);

/* ======================================================================== */
/* Output                                                                    */
/* ======================================================================== */

typedef enum {
    LIPI_INFLATION_TABLE = 0, /* aligned text: languages as rows, tokenizers as
                                 column groups (parity, fertility, chars/token,
                                 continued words) */
    LIPI_INFLATION_CSV,       /* one row per (tokenizer, language), header line */
    LIPI_INFLATION_JSON,      /* {"reference", "tokenizers", "languages", "rows"} */
    LIPI_INFLATION_HTML,      /* self-contained page: table and parity bar chart */
} lipi_inflation_format;

/* "table", "csv", "json" or "html"; LIPI_EINVAL naming the choices. */
lipi_status lipi_inflation_format_parse(const char *name, lipi_inflation_format *fmt,
                                        lipi_error *err);

/* Writes the report to f. Numbers are printed with a fixed number of
 * decimals (six in CSV and JSON), in the C locale's format; NaN is an empty
 * CSV field, JSON null and "-" in the table and page. LIPI_EIO when f
 * reports a write error, LIPI_ENOMEM. */
lipi_status lipi_inflation_write(const lipi_inflation_report *rep, lipi_inflation_format fmt,
                                 FILE *f, lipi_error *err);

/* Writes the report to `path` atomically (a temporary file in the same
 * folder, renamed over the target only when complete). LIPI_EIO naming the
 * path, LIPI_ENOMEM. */
lipi_status lipi_inflation_save(const lipi_inflation_report *rep, lipi_inflation_format fmt,
                                const char *path, lipi_error *err);

/* ======================================================================== */
/* Parallel files                                                            */
/* ======================================================================== */

/* Line-aligned files, one per language: line i of every file is a
 * translation of line i of the others.
 *
 *   lipi_inflation_parallel *p = NULL;
 *   lipi_inflation_parallel_open(paths, n, NULL, LIPI_INVALID_ERROR, &p, &err);
 *   lipi_inflation_batch b = {0};
 *   while (lipi_inflation_parallel_read(p, 1024, &b, &err) == LIPI_OK && b.lines)
 *       ... lipi_inflation_batch_line(&b, lang, i, &len) ...
 *   lipi_inflation_batch_free(&b);
 *   lipi_inflation_parallel_close(p);
 */
typedef struct lipi_inflation_parallel lipi_inflation_parallel;

/* Opens the parallel set given as paths: each is a file, or a folder whose
 * files named *.txt, *.dev, *.devtest, *.test or *.valid (optionally
 * followed by .gz, .xz or .zst) are taken, hidden files skipped. A file's
 * language label is its name without folders, compression suffix and
 * extension ("data/hin_Deva.txt.xz" -> "hin_Deva"); files are kept sorted
 * by label, whatever order they were given in.
 * `reference` names the reference label; NULL picks eng_Latn, eng or en
 * (or the only file, so one text can be read the same way).
 * Every file is read once here to count its lines, so a mismatch fails
 * before any work: LIPI_EFORMAT naming both files and both counts ("a.txt
 * has 4 lines but eng.txt has 5"). Also LIPI_EINVAL (no files, two files
 * with one label, stdin "-", unknown or missing reference), LIPI_EIO,
 * LIPI_EFORMAT for invalid UTF-8 under LIPI_INVALID_ERROR (path, line,
 * offset), LIPI_ENOMEM. */
lipi_status lipi_inflation_parallel_open(const char *const *paths, size_t n_paths,
                                         const char *reference, lipi_invalid_mode mode,
                                         lipi_inflation_parallel **out, lipi_error *err);
void lipi_inflation_parallel_close(lipi_inflation_parallel *p); /* NULL ok */

size_t lipi_inflation_parallel_count(const lipi_inflation_parallel *p);
/* Borrowed label and path of file i (in sorted order). */
const char *lipi_inflation_parallel_label(const lipi_inflation_parallel *p, size_t i);
const char *lipi_inflation_parallel_path(const lipi_inflation_parallel *p, size_t i);
size_t lipi_inflation_parallel_reference(const lipi_inflation_parallel *p);
/* Lines per file (all equal), and how many of them read so far were skipped
 * because they were empty (or only spaces and tabs) in at least one file. */
uint64_t lipi_inflation_parallel_lines(const lipi_inflation_parallel *p);
uint64_t lipi_inflation_parallel_skipped(const lipi_inflation_parallel *p);

/* Aligned lines read together; reuse it across reads. */
typedef struct {
    size_t lines;      /* aligned lines held (0 at the end of the files) */
    size_t languages;  /* = lipi_inflation_parallel_count */
    uint64_t *line_no; /* 1-based file line of each held line */
    void *priv;        /* the text */
} lipi_inflation_batch;

/* Reads up to max_lines (> 0) aligned lines that are non-empty in every
 * file into *b (cleared first). b->lines == 0 means every line was read.
 * Errors as the line reader's (path, line, offset), LIPI_ENOMEM. */
lipi_status lipi_inflation_parallel_read(lipi_inflation_parallel *p, size_t max_lines,
                                         lipi_inflation_batch *b, lipi_error *err);

/* Line i (< b->lines) of language lang: borrowed until the next read. */
const char *lipi_inflation_batch_line(const lipi_inflation_batch *b, size_t lang, size_t i,
                                      size_t *len);
void lipi_inflation_batch_free(lipi_inflation_batch *b); /* members, not b */

#endif

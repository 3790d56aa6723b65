/* lipi model module: encoder-only transformers (BERT, RoBERTa/XLM-R,
 * ALBERT, DistilBERT, MPNet) from Hugging Face folders, token ids -> hidden states
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
#ifndef LIPI_MODEL_H
#define LIPI_MODEL_H

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
    const char *model_type;   /* "bert", "roberta", "xlm-roberta", "camembert",
                                 "albert", "distilbert", "mpnet", "modernbert",
                                 "nomic_bert", "new" (GTE) */
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
    bool sparse;              /* bge-m3's sparse_linear.pt is there (lipi_model_token_weights) */
    size_t colbert_dim;       /* bge-m3's colbert_linear.pt's output size, else 0 */
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
 * F16 or BF16; converted to float32 at load), or else its shards
 * (model.safetensors.index.json), or a PyTorch checkpoint (pytorch_model.bin
 * or its shards, read without running its pickle: lipi_model_convert).
 * In a sentence-transformers folder, modules.json, 1_Pooling/config.json,
 * Dense modules (Tanh or Identity, weights in their model.safetensors or
 * pytorch_model.bin), a Normalize module and
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

/* Writes model.safetensors next to the PyTorch checkpoint of folder dir
 * (pytorch_model.bin, or its shards and pytorch_model.bin.index.json) and of
 * each of its subfolders (sentence-transformers modules such as 2_Dense/)
 * that has one and no model.safetensors yet, as Hugging Face's conversion
 * bot does: every tensor under its name in its own dtype (tied weights get
 * one copy each), {"format": "pt"} metadata. The checkpoint is read without
 * running its pickle (only tensor rebuilds and state dicts are accepted).
 * Each file is written atomically. *converted counts the files written.
 * Fails with LIPI_EIO (dir unreadable, a file not writable), LIPI_EFORMAT
 * (a checkpoint refused: the message names the file and the opcode, global
 * or tensor), LIPI_EINVAL (nothing to convert) or LIPI_ENOMEM; folders
 * converted before a failure keep their new file. */
lipi_status lipi_model_convert(const char *dir, size_t *converted, lipi_error *err);

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
 * projection runs as one GEMM over all tokens of the batch, or, when no
 * sequence is longer than 384 tokens, over those of each group of whole
 * sequences (about 384 tokens, the groups shared among the threads); no
 * padding is computed. LIPI_EINVAL (message names the sequence and position) for an
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

/* lipi_model_embed on each run of `chunk` sequences (the last run may be
 * shorter), bit for bit, written one after the other into out; when every
 * run is grouped (short sentences) and the session has threads, the groups
 * of all the runs share one parallel region, so that threads that finish
 * early take more groups (a call per 32-sentence batch gives each thread
 * one group of the two). Inputs are checked first: an error names a
 * sequence by its index in seqs. */
lipi_status lipi_model_embed_chunks(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                                    size_t chunk, const lipi_embed_options *opt, float *out,
                                    lipi_error *err);

/* Runs the classifier head of a *ForSequenceClassification checkpoint:
 * logits and probabilities (softmax, or sigmoid for multi-label problems),
 * each (n, num_labels); either pointer may be NULL. LIPI_EINVAL if the
 * model has no classifier head. */
lipi_status lipi_model_classify(lipi_model_session *s, const lipi_sequence *seqs,
                                size_t n, float *logits, float *probs, lipi_error *err);

/* lipi_model_classify on each run of `chunk` sequences, bit for bit, as
 * lipi_model_embed_chunks runs lipi_model_embed. */
lipi_status lipi_model_classify_chunks(lipi_model_session *s, const lipi_sequence *seqs,
                                       size_t n, size_t chunk, float *logits, float *probs,
                                       lipi_error *err);

/* bge-m3's lexical and multi-vector outputs, as FlagEmbedding's BGEM3Model
 * computes them from the last hidden states h (sparse_linear.pt and
 * colbert_linear.pt in the folder, read as torch state dicts):
 *   weights: (sum of seqs[i].len) = relu(sparse_linear(h_t)) for every token
 *            (the caller max-pools them per token id and drops special ids:
 *            lipi_embedder_lexical);
 *   vecs:    (sum of (seqs[i].len - 1), info.colbert_dim) =
 *            colbert_linear(h_t) for every token but the first ([CLS]),
 *            L2-normalized, sequence after sequence.
 * Fail like lipi_model_forward, and with LIPI_EINVAL when the folder has no
 * such head. */
lipi_status lipi_model_token_weights(lipi_model_session *s, const lipi_sequence *seqs,
                                     size_t n, float *weights, lipi_error *err);
lipi_status lipi_model_colbert(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                               float *vecs, lipi_error *err);

/* x: (n, dim) rows scaled in place to unit L2 norm (the norm clamped below
 * at 1e-12, as torch.nn.functional.normalize), as sentence-transformers'
 * Normalize module and cosine search do. */
void lipi_vectors_normalize(float *x, size_t n, size_t dim);

/* ------------------------------------------------------------------------ */
/* Float GEMM (oneDNN when installed, else a portable kernel), also used by  */
/* exact retrieval                                                           */
/* ------------------------------------------------------------------------ */

typedef enum { LIPI_GEMM_AUTO = 0, LIPI_GEMM_ONEDNN, LIPI_GEMM_PORTABLE } lipi_gemm_kind;

/* Resolves AUTO to the best available backend. */
lipi_gemm_kind lipi_gemm_resolve(lipi_gemm_kind k);

/* c (M, N) = a (M, K) . b (N, K)^T   (ld* are row strides in floats).
 * Single-threaded: callers split the work. */
void lipi_sgemm_nt(lipi_gemm_kind k, size_t M, size_t N, size_t K, const float *a,
                   size_t lda, const float *b, size_t ldb, float *c, size_t ldc);
/* c (M, N) = a (M, K) . b (K, N) */
void lipi_sgemm_nn(lipi_gemm_kind k, size_t M, size_t N, size_t K, const float *a,
                   size_t lda, const float *b, size_t ldb, float *c, size_t ldc);

/* Makes the calling thread run oneDNN single-threaded (its OpenMP team
 * size); returns the previous value for lipi_gemm_thread_restore. */
int lipi_gemm_thread_enter(void);
void lipi_gemm_thread_restore(int prev);

/* Name of the GEMM backend the sessions use: "onednn" when libdnnl.so.2 is
 * installed (it reaches full speed without any environment variable), else
 * "portable". */
const char *lipi_gemm_backend(void);

/* ======================================================================== */
/* The files of a model folder                                               */
/* ======================================================================== */

typedef enum {
    LIPI_MODEL_FILE_NONE = 0,  /* not part of a model folder */
    LIPI_MODEL_FILE_CONFIG,    /* config.json */
    LIPI_MODEL_FILE_WEIGHTS,   /* *.safetensors, model.safetensors.index.json */
    LIPI_MODEL_FILE_TOKENIZER, /* the files of lipi_tokenizer_file */
    LIPI_MODEL_FILE_MODULE,    /* sentence-transformers: modules.json, ..., and
                                  config.json and .safetensors files of module
                                  folders such as 1_Pooling */
} lipi_model_file_role;

typedef struct {
    const char *name;          /* relative to the folder, '/'-separated; static */
    lipi_model_file_role role;
    bool required;             /* config.json and model.safetensors */
} lipi_model_file;

/* The i-th file of a model folder that has a fixed name, in a fixed order
 * (the tokenizer's files, lipi_tokenizer_file, last), into *out; false past
 * the last. Weight shards and other module folders have no fixed name:
 * lipi_model_file_role_of knows them. */
bool lipi_model_file_at(size_t i, lipi_model_file *out);

/* The role of file `path` (relative to the folder, '/'-separated) in a
 * model folder: a name of lipi_model_file_at, any top-level *.safetensors,
 * or config.json or *.safetensors in a module folder ("1_Pooling/",
 * "2_Dense/", ...); LIPI_MODEL_FILE_NONE for anything else
 * ("pytorch_model.bin", "onnx/model.onnx"). */
lipi_model_file_role lipi_model_file_role_of(const char *path);

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

/* Whether lipi needs repository file `path` to run the model: whether it
 * belongs to a model folder (lipi_model_file_role_of). lipi_hub_download
 * fetches these, and also bge-m3's sparse_linear.pt / colbert_linear.pt
 * and, for a folder without *.safetensors, its pytorch_model.bin (or
 * shards and their index), which depends on the repository's other files. */
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

#endif

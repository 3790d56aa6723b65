/* lipi pipeline module: text -> embeddings and labels with a Hugging Face
 * encoder checkpoint. The one place that joins the encoder (its tokenizer)
 * and the model (the transformer): `lipi embed`, `classify`, `index`,
 * `search`, `probe` and `eval-retrieval` are thin callers, and so are the
 * Python package and the server.
 *
 *   lipi_embedder *e = NULL; lipi_embedder_session *s = NULL; lipi_error err;
 *   lipi_embedder_options o = {.batch = 32, .normalize = -1};
 *   if (lipi_embedder_open("sentence-transformers/LaBSE", &o, &e, &err) == LIPI_OK &&
 *       lipi_embedder_session_new(e, 2, &s, &err) == LIPI_OK)
 *       lipi_embedder_embed(s, texts, lens, n, vecs, NULL, &err); // vecs: (n, lipi_embedder_dim(e))
 *   lipi_embedder_session_free(s); lipi_embedder_free(e);
 *
 * As lipi_model and lipi_encoder, a lipi_embedder is immutable once open and
 * may be shared by any number of threads; each calling thread embeds through
 * its own lipi_embedder_session, which owns the encoder sessions, the
 * transformer's worker threads and the batch scratch. Vectors depend on the
 * texts, the options and `batch`, never on the number of threads or
 * sessions.
 */
#ifndef LIPI_PIPELINE_H
#define LIPI_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encoder/encoder.h"
#include "model/model.h"
#include "retrieval/retrieval.h"
#include "tokenizer/tokenizer.h"

typedef struct lipi_embedder lipi_embedder;                 /* immutable, shareable */
typedef struct lipi_embedder_session lipi_embedder_session; /* one per calling thread */

typedef struct {
    unsigned pooling;    /* LIPI_POOL_*; 0: the model's */
    int normalize;       /* 0 (zero-initialized): always L2-normalize, as an
                            index needs; -1: the model's default; 1: always;
                            -2: never */
    size_t batch;        /* sentences per batch; 0: 32. Part of the
                            embedder, not the session: the packed GEMM's
                            shapes follow the batch, so a different batch
                            may change the last bits of a vector. (A session
                            with threads runs the short sentences of a few
                            batches in one pass, with the same shapes.) */
    size_t max_length;   /* 0: the model's */
    lipi_dtype dtype;
    const char *revision; /* hub names: the revision (NULL: main) */
    bool strict;         /* a text longer than max_length is an error */
    /* Prompts, as sentence-transformers' encode(prompt=, prompt_name=): the
     * prompt's text is put before every text, so token counts and truncation
     * include it. The named prompts are the "prompts" object of the folder's
     * config_sentence_transformers.json. At most one of these two: */
    const char *prompt;      /* the text itself ("" for none) */
    const char *prompt_name; /* a name in "prompts"; NULL (and no prompt):
                                the config's default_prompt_name, else none */
    bool prompt_name_optional; /* a prompt_name the model does not have means
                                  the default instead of an error (lipi search
                                  asks for "query" this way) */
    size_t dimensions;   /* Matryoshka truncate_dim: keep the first K floats of
                            each vector, then L2-normalize again when the
                            embedder normalizes; 0 (or the model's dimension):
                            all */
} lipi_embedder_options;

/* Opens `model`: a model folder, or else a hub name ("ORG/NAME") resolved
 * in the Hugging Face cache (lipi_hub_resolve). Reads the tokenizer, the
 * transformer, pooling, normalization and labels from the folder's own
 * files; `opt` overrides them (NULL: all as the folder says, pooling and
 * normalization included). *out is owned (lipi_embedder_free) and never
 * changes afterwards. Errors of lipi_hub_resolve, lipi_model_load and
 * lipi_tokenizer_open (err->path names the file), LIPI_ENOMEM; LIPI_EFORMAT
 * for a config_sentence_transformers.json that is not JSON, has a prompt
 * that is not a string or a default_prompt_name that is not a prompt;
 * LIPI_EINVAL for a prompt_name the model lacks (the message lists its
 * prompts), both prompt and prompt_name, a prompt of invalid UTF-8, or
 * dimensions above the model's. */
lipi_status lipi_embedder_open(const char *model, const lipi_embedder_options *opt,
                               lipi_embedder **out, lipi_error *err);
void lipi_embedder_free(lipi_embedder *e); /* NULL: no-op; free its sessions first */

/* A session for one thread at a time, running the forward pass on `threads`
 * threads (0 or 1: the calling thread only) and encoding on as many. It
 * borrows e, which must outlive it. *out is owned
 * (lipi_embedder_session_free). LIPI_ENOMEM when memory or a thread cannot
 * be had. */
lipi_status lipi_embedder_session_new(const lipi_embedder *e, size_t threads,
                                      lipi_embedder_session **out, lipi_error *err);
void lipi_embedder_session_free(lipi_embedder_session *s); /* NULL: no-op */

/* How many texts (or pairs) to hand lipi_embedder_embed, _classify,
 * _classify_pairs and _score_pairs at a time (fewer is fine, more are
 * taken in steps): the batch, or with threads several batches, whose short
 * sentences then share the threads' parallel regions. */
size_t lipi_embedder_session_texts(const lipi_embedder_session *s);

/* Embeds texts[i] (lens[i] bytes of UTF-8, not NUL-terminated) for i < n
 * into out (n, lipi_embedder_dim), row i = text i. A text longer than
 * lipi_embedder_max_length tokens is truncated as sentence-transformers
 * does (the end of the text goes, the special tokens stay) and
 * truncated[i] is set to 1, else 0 (truncated may be NULL). With `strict`
 * such a text fails with LIPI_EINVAL and err->line = its index + 1 in this
 * call. Errors of the encoder (err->line the same: invalid UTF-8, an
 * unknown token) and of the forward pass; LIPI_EINVAL with err->line for a
 * text that gives no tokens at all. On failure out and truncated hold
 * garbage. */
lipi_status lipi_embedder_embed(lipi_embedder_session *s, const char *const *texts,
                                const size_t *lens, size_t n, float *out, uint8_t *truncated,
                                lipi_error *err);

/* Embeds n texts given as token ids (ids[i], lens[i] of them: special
 * tokens as the caller wants them; OpenAI's embeddings API takes input this
 * way) with e's pooling, normalization and dimensions, into out (n,
 * lipi_embedder_dim). A sequence longer than lipi_embedder_max_length is
 * cut to its first max_length ids and truncated[i] set (truncated may be
 * NULL); with `strict` it fails with LIPI_EINVAL, err->line = i + 1, as does
 * an empty sequence. Errors of the forward pass (an id the model does not
 * have: LIPI_EINVAL naming it). */
lipi_status lipi_embedder_embed_ids(lipi_embedder_session *s, const uint32_t *const *ids,
                                    const size_t *lens, size_t n, float *out, uint8_t *truncated,
                                    lipi_error *err);

/* The encoder of e's tokenizer, borrowed from e: callers that show tokens
 * (a server's /tokenize) make their own lipi_session from it. */
const lipi_encoder *lipi_embedder_encoder(const lipi_embedder *e);

/* The tokens lipi_embedder_embed gives text[0..len) (the prompt and the
 * special tokens included), counted with session s of lipi_embedder_encoder
 * (e), into *n; a text longer than lipi_embedder_max_length gives max_length
 * + 1 (the count stops there). Errors of lipi_encode (invalid UTF-8). A
 * server packs batches and answers usage counts with it before embedding. */
lipi_status lipi_embedder_count_tokens(const lipi_embedder *e, lipi_session *s, const char *text,
                                       size_t len, size_t *n, lipi_error *err);

/* Runs the classifier head of a *ForSequenceClassification checkpoint on n
 * texts: probs (n, lipi_embedder_label_count), softmax (or sigmoid for
 * multi-label problems, and for a head with one label - a cross-encoder -
 * as Hugging Face's pipeline and sentence-transformers' CrossEncoder give
 * it). Truncation and errors as lipi_embedder_embed;
 * LIPI_EINVAL if the model has no head. */
lipi_status lipi_embedder_classify(lipi_embedder_session *s, const char *const *texts,
                                   const size_t *lens, size_t n, float *probs,
                                   uint8_t *truncated, lipi_error *err);

/* The same for n text pairs (a[i], b[i]), as a cross-encoder or reranker
 * reads them: encoded by lipi_encode_pair with the tokenizer's pair
 * template ([CLS] a [SEP] b [SEP]), its token type ids given to the model.
 * A pair longer than max_length loses tokens from the longer text first
 * (Hugging Face's longest_first) and truncated[i] is set; with `strict` it
 * fails with err->line = i + 1. Encoding runs on the calling thread. Errors
 * as lipi_embedder_classify. */
lipi_status lipi_embedder_classify_pairs(lipi_embedder_session *s, const char *const *a,
                                         const size_t *alens, const char *const *b,
                                         const size_t *blens, size_t n, float *probs,
                                         uint8_t *truncated, lipi_error *err);

/* Relevance scores of n pairs (query a[i], passage b[i]) by a cross-encoder
 * (reranker), encoded and truncated as lipi_embedder_classify_pairs:
 * scores[i] is label `label`'s probability (for a head with one label,
 * sigmoid(logit): sentence-transformers' CrossEncoder default for
 * num_labels == 1), or its raw logit when `raw`. label 0 for such a head;
 * for an NLI-style head the caller picks the label that means "relevant".
 * scores: (n). Errors of lipi_embedder_classify_pairs; LIPI_EINVAL when
 * label >= lipi_embedder_label_count (0 without a head). */
lipi_status lipi_embedder_score_pairs(lipi_embedder_session *s, const char *const *a,
                                      const size_t *alens, const char *const *b,
                                      const size_t *blens, size_t n, size_t label, bool raw,
                                      float *scores, uint8_t *truncated, lipi_error *err);

/* bge-m3's lexical weights (the "sparse" output) of n texts, as
 * FlagEmbedding's BGEM3FlagModel.encode(return_sparse=True) gives them:
 * per text, each token id's largest weight relu(sparse_linear(h)) over its
 * occurrences, ids in order of first occurrence, leaving out weights of 0
 * and the ids of the special tokens the tokenizer adds ([CLS] / <s>,
 * [SEP] / </s>), the unknown token and the padding token. Text i's pairs are
 * ids[off[i] .. off[i + 1]) and weights[...]. */
typedef struct {
    uint32_t *ids;    /* (off[n]) */
    float *weights;   /* (off[n]) */
    size_t *off;      /* (n + 1) */
    size_t n;
} lipi_lexical;
void lipi_lexical_free(lipi_lexical *x); /* frees the members, not x */

/* bge-m3's multi-vector (ColBERT) output of n texts: rows off[i] ..
 * off[i + 1] of vecs are text i's tokens but the first, each
 * colbert_linear(h) L2-normalized, as BGEM3FlagModel.encode(
 * return_colbert_vecs=True). */
typedef struct {
    float *vecs;      /* (off[n], dim) */
    size_t dim;
    size_t *off;      /* (n + 1) */
    size_t n;
} lipi_multivectors;
void lipi_multivectors_free(lipi_multivectors *x); /* frees the members, not x */

/* Fill *out (owned by the caller afterwards: lipi_lexical_free /
 * lipi_multivectors_free; left empty on failure) for n texts encoded and
 * truncated as lipi_embedder_embed. LIPI_EINVAL when the model folder has
 * no sparse_linear.pt / colbert_linear.pt (lipi_embedder_outputs); the
 * errors of lipi_embedder_embed; LIPI_ENOMEM. */
lipi_status lipi_embedder_lexical(lipi_embedder_session *s, const char *const *texts,
                                  const size_t *lens, size_t n, lipi_lexical *out,
                                  uint8_t *truncated, lipi_error *err);
lipi_status lipi_embedder_colbert(lipi_embedder_session *s, const char *const *texts,
                                  const size_t *lens, size_t n, lipi_multivectors *out,
                                  uint8_t *truncated, lipi_error *err);

/* Which outputs the model has beside the pooled embedding: *sparse for
 * lipi_embedder_lexical, *colbert_dim (0: none) for lipi_embedder_colbert. */
void lipi_embedder_outputs(const lipi_embedder *e, bool *sparse, size_t *colbert_dim);

/* order[0..n): the indices of scores[0..n) by score descending, equal
 * scores in index order, NaN last: the ranking a reranker prints, the same
 * on every machine. LIPI_ENOMEM. */
lipi_status lipi_scores_order(const float *scores, size_t n, size_t *order, lipi_error *err);

/* Floats per embedding (the `dimensions` option when set). */
size_t lipi_embedder_dim(const lipi_embedder *e);
/* Tokens a text may have (special tokens included). */
size_t lipi_embedder_max_length(const lipi_embedder *e);
/* Labels of the classifier head (0 without one), and label i's name from
 * the config's id2label ("LABEL_i" when absent), borrowed from e; NULL when
 * i is out of range. */
size_t lipi_embedder_label_count(const lipi_embedder *e);
const char *lipi_embedder_label(const lipi_embedder *e, size_t i);
/* The prompts of the folder's config_sentence_transformers.json: their
 * number, prompt i's name (NULL when i is out of range), and the text of
 * the prompt called `name` (NULL when there is none), all borrowed from e. */
size_t lipi_embedder_prompt_count(const lipi_embedder *e);
const char *lipi_embedder_prompt_name(const lipi_embedder *e, size_t i);
const char *lipi_embedder_prompt_text(const lipi_embedder *e, const char *name);
/* The prompt lipi_embedder_embed puts before every text ("" for none),
 * borrowed from e; *name (when name is not NULL) is set to its name in the
 * config, or NULL when it was given as text that no named prompt has. */
const char *lipi_embedder_prompt(const lipi_embedder *e, const char **name);

/* Checks that e embeds queries the way idx wants them: LIPI_EINVAL naming
 * both when e's dimension is not the index's (another --dimensions), or
 * when the index recorded the document prompt it was built with by name
 * and e's config has another text under that name, or none. Say which
 * index with `dir` (for err->path). Indexes that recorded no prompt pass. */
lipi_status lipi_embedder_check_index(const lipi_embedder *e, const lipi_index *idx,
                                      const char *dir, lipi_error *err);

/* Whether the embeddings are L2-normalized. */
bool lipi_embedder_normalizes(const lipi_embedder *e);
/* What an index or probe records about the model: name, path, pooling,
 * the prompt, its name and the truncated dimension borrowed from e; `normalize` the model's own default, not what
 * lipi_embedder_embed applies (lipi_embedder_normalizes); lipi_version left
 * as it was. id->fingerprint points to `fingerprint` (17 bytes), which this
 * call fills with lipi_index_model_fingerprint of the folder. That hashes
 * up to a MiB of every model file, so it is done here, on each call, and
 * never by lipi_embedder_open or embed: call it once per index or probe,
 * right after opening. Errors of lipi_index_model_fingerprint (LIPI_EIO,
 * err->path the file), *id untouched. */
lipi_status lipi_embedder_identity(const lipi_embedder *e, lipi_index_model *id,
                                   char fingerprint[17], lipi_error *err);

/* Parses a pooling name (cls, mean, max, mean_sqrt_len) or several joined
 * by '+' ("cls+mean"), as lipi index records them, into LIPI_POOL_* flags.
 * false for anything else or an empty name. */
bool lipi_pooling_parse(const char *s, unsigned *flags);

/* The inverse: flags as "cls+mean" in sentence-transformers' order (cls,
 * max, mean, mean_sqrt_len) into out (cap bytes, NUL-terminated, cut short
 * when it does not fit); "" for no flag. */
void lipi_pooling_name(unsigned flags, char *out, size_t cap);

#endif

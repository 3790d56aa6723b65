/* lipi pipeline module: text -> embeddings and labels with a Hugging Face
 * encoder checkpoint. The one place that joins the encoder (its tokenizer)
 * and the model (the transformer): `lipi embed`, `classify`, `index`,
 * `search`, `probe` and `eval-retrieval` are thin callers, and so are the
 * Python package and the server.
 *
 *   lipi_embedder *e = NULL;
 *   lipi_embedder_options o = {.batch = 32, .threads = 2};
 *   if (lipi_embedder_open("sentence-transformers/LaBSE", &o, &e, &err) == LIPI_OK)
 *       lipi_embedder_embed(e, texts, lens, n, vecs, &err);  // vecs: (n, lipi_embedder_dim(e))
 *   lipi_embedder_free(e);
 */
#ifndef LIPI_PIPELINE_H
#define LIPI_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"
#include "retrieval/retrieval.h"
#include "tokenizer/tokenizer.h"

typedef struct lipi_embedder lipi_embedder;

typedef struct {
    unsigned pooling;    /* LIPI_POOL_*; 0: the model's */
    int normalize;       /* 0 (zero-initialized): always L2-normalize, as an
                            index needs; -1: the model's default; 1: always;
                            -2: never */
    size_t batch;        /* sentences per forward pass; 0: 32 */
    size_t max_length;   /* 0: the model's */
    size_t threads;      /* 0: 1 */
    lipi_dtype dtype;
    const char *revision; /* hub names: the revision (NULL: main) */
    bool strict;         /* a text longer than max_length is an error */
} lipi_embedder_options;

/* Opens `model`: a model folder, or else a hub name ("ORG/NAME") resolved
 * in the Hugging Face cache (lipi_hub_resolve). *out is owned
 * (lipi_embedder_free). Errors of lipi_hub_resolve, lipi_model_load and
 * lipi_tokenizer_open, LIPI_ENOMEM. */
lipi_status lipi_embedder_open(const char *model, const lipi_embedder_options *opt,
                              lipi_embedder **out, lipi_error *err);

/* Embeds n texts into out (n, dim). Texts longer than max_length tokens are
 * truncated as sentence-transformers does (the end of the text goes, the
 * special tokens stay) and counted (lipi_embedder_truncated); with `strict`
 * the first one fails with LIPI_EINVAL and err->line = its index + 1 in this
 * call. Errors of the encoder (err->line the same) and of the forward pass. */
lipi_status lipi_embedder_embed(lipi_embedder *e, const char *const *texts, const size_t *lens, size_t n,
                      float *out, lipi_error *err);

/* Runs the classifier head on n texts: probs (n, num_labels). Truncation
 * and errors as cli_embed; LIPI_EINVAL if the model has no head. */
lipi_status lipi_embedder_classify(lipi_embedder *e, const char *const *texts, const size_t *lens,
                         size_t n, float *probs, lipi_error *err);

size_t lipi_embedder_dim(const lipi_embedder *e);
/* Tokens a text may have (special tokens included). */
size_t lipi_embedder_max_length(const lipi_embedder *e);
/* Texts truncated so far. */
size_t lipi_embedder_truncated(const lipi_embedder *e);
/* The loaded model (borrowed). */
const lipi_model *lipi_embedder_model(const lipi_embedder *e);
/* Whether the embeddings are L2-normalized. */
bool lipi_embedder_normalizes(const lipi_embedder *e);
/* What an index or probe records about the model; strings borrowed from e.
 * `normalize` is the model's own default, not what cli_embed applies. */
void lipi_embedder_identity(const lipi_embedder *e, lipi_index_model *id);
void lipi_embedder_free(lipi_embedder *e);

/* Parses a pooling name (cls, mean, max, mean_sqrt_len) or several joined
 * by '+' ("cls+mean"), as lipi index records them. */
bool lipi_pooling_parse(const char *s, unsigned *flags);

#endif

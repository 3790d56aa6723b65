/* Text -> model outputs for the commands that run a transformer (`lipi
 * embed`, `classify`, `probe`, `index`, `search`, `eval-retrieval`): a model
 * folder or hub name, its own tokenizer, batches through the encoder and
 * the pipeline's forward pass.
 *
 *   cli_embedder *e = NULL;
 *   cli_embedder_options o = {.batch = 32, .threads = 2};
 *   if (cli_embedder_open("sentence-transformers/LaBSE", &o, &e, &err) == LIPI_OK)
 *       cli_embed(e, texts, lens, n, vecs, &err);   // vecs: (n, cli_embedder_dim(e))
 *   cli_embedder_free(e);
 */
#ifndef LIPI_CLI_EMBEDDER_H
#define LIPI_CLI_EMBEDDER_H

#include <stdbool.h>
#include <stddef.h>

#include "pipeline/pipeline.h"

typedef struct cli_embedder cli_embedder;

typedef struct {
    unsigned pooling;    /* LIPI_POOL_*; 0: the model's */
    int normalize;       /* 0 (zero-initialized): always L2-normalize, as an
                            index needs; -1: the model's default; 1: always;
                            -2: never */
    size_t batch;        /* sentences per forward pass; 0: 32 */
    size_t max_length;   /* 0: the model's */
    size_t threads;      /* 0: one per online CPU */
    lipi_dtype dtype;
    const char *revision; /* hub names: the revision (NULL: main) */
    bool strict;         /* a text longer than max_length is an error */
} cli_embedder_options;

/* Opens `model`: a model folder, or else a hub name ("ORG/NAME") resolved
 * in the Hugging Face cache (lipi_hub_resolve). *out is owned
 * (cli_embedder_free). Errors of lipi_hub_resolve, lipi_model_load and
 * lipi_tokenizer_open, LIPI_ENOMEM. */
lipi_status cli_embedder_open(const char *model, const cli_embedder_options *opt,
                              cli_embedder **out, lipi_error *err);

/* Embeds n texts into out (n, dim). Texts longer than max_length tokens are
 * truncated as sentence-transformers does (the end of the text goes, the
 * special tokens stay) and counted (cli_embedder_truncated); with `strict`
 * the first one fails with LIPI_EINVAL and err->line = its index + 1 in this
 * call. Errors of the encoder (err->line the same) and of the forward pass. */
lipi_status cli_embed(cli_embedder *e, const char *const *texts, const size_t *lens, size_t n,
                      float *out, lipi_error *err);

/* Runs the classifier head on n texts: probs (n, num_labels). Truncation
 * and errors as cli_embed; LIPI_EINVAL if the model has no head. */
lipi_status cli_classify(cli_embedder *e, const char *const *texts, const size_t *lens,
                         size_t n, float *probs, lipi_error *err);

size_t cli_embedder_dim(const cli_embedder *e);
/* Tokens a text may have (special tokens included). */
size_t cli_embedder_max_length(const cli_embedder *e);
/* Texts truncated so far. */
size_t cli_embedder_truncated(const cli_embedder *e);
/* The loaded model (borrowed). */
const lipi_model *cli_embedder_model(const cli_embedder *e);
/* Whether the embeddings are L2-normalized. */
bool cli_embedder_normalizes(const cli_embedder *e);
/* What an index or probe records about the model; strings borrowed from e.
 * `normalize` is the model's own default, not what cli_embed applies. */
void cli_embedder_identity(const cli_embedder *e, lipi_index_model *id);
void cli_embedder_free(cli_embedder *e);

/* Parses a pooling name (cls, mean, max, mean_sqrt_len) or several joined
 * by '+' ("cls+mean"), as lipi index records them. */
bool cli_parse_pooling(const char *s, unsigned *flags);

/* Calls fn on batches of up to `batch` input lines of the FILEs (stdin when
 * nfiles is 0 or a file is "-"), in input order, the last batch shorter.
 * An error fn returns with err->line = k (1-based in the batch) is
 * reported with the file and line of that text; reader errors with theirs.
 * With `progress`, a progress line on stderr when it is a terminal.
 * Returns EXIT_OK or EXIT_FAIL (after reporting). */
typedef lipi_status (*cli_batch_fn)(const char *const *texts, const size_t *lens, size_t n,
                                    void *ctx, lipi_error *err);
int cli_for_each_batch(const char *sub, char **files, int nfiles, lipi_invalid_mode mode,
                       size_t batch, bool progress, cli_batch_fn fn, void *ctx);

/* cli_for_each_batch writing to `out` (standard output when NULL or "-";
 * a file is written atomically): *f is set to where fn must write before
 * the first batch. Reports errors and truncated lines itself; returns
 * EXIT_OK or EXIT_FAIL. */
typedef struct cli_model_args cli_model_args;
int cli_write_batches(const char *sub, char **files, int nfiles, const cli_model_args *a,
                      const char *out, cli_embedder *e, cli_batch_fn fn, void *ctx, FILE **f);

/* Prints "lipi SUB: N lines truncated to L tokens" when e truncated any. */
void cli_embedder_report_truncated(const char *sub, const cli_embedder *e);

/* Options every model command shares, parsed by cli_model_option: -m/--model,
 * --revision, --pooling, --normalize, --batch, --max-length, --threads,
 * --dtype, --strict, --invalid, --quiet. */
struct cli_model_args {
    const char *model;
    cli_embedder_options eo;
    lipi_invalid_mode mode;
    bool quiet;
};

/* getopt_long entries for those options (their `val`s are >= 0x100 except
 * 'm'); the command adds its own and the zero entry. */
#define CLI_MODEL_OPTIONS                                                   \
    {"model", required_argument, NULL, 'm'},                                \
    {"revision", required_argument, NULL, 0x100},                           \
    {"pooling", required_argument, NULL, 0x101},                            \
    {"normalize", no_argument, NULL, 0x102},                                \
    {"batch", required_argument, NULL, 0x103},                              \
    {"max-length", required_argument, NULL, 0x104},                         \
    {"threads", required_argument, NULL, 0x105},                            \
    {"dtype", required_argument, NULL, 0x106},                              \
    {"strict", no_argument, NULL, 0x107},                                   \
    {"invalid", required_argument, NULL, 0x108},                            \
    {"quiet", no_argument, NULL, 0x109}

/* Handles option c (from getopt_long) if it is one of CLI_MODEL_OPTIONS:
 * returns 1 when handled, 0 when not one of them, and -1 after printing a
 * usage error. */
int cli_model_option(const char *sub, int c, const char *arg, cli_model_args *a);

/* The help lines of those options. */
extern const char cli_model_options_help[];

#endif

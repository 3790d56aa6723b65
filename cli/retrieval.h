/* Pieces shared by `lipi index`, `lipi search` and `lipi eval-retrieval`:
 * batches of input lines, a progress bar, and text -> embedding through a
 * model folder. */
#ifndef LIPI_CLI_RETRIEVAL_H
#define LIPI_CLI_RETRIEVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "pipeline/pipeline.h"

/* Lines copied out of the line reader until a batch is full. */
typedef struct {
    char *buf;          /* the lines, back to back */
    size_t len, cap;
    size_t *start;      /* offsets of the lines in buf */
    const char **ptrs;  /* valid after each add (buf may move) */
    size_t *lens;
    size_t n, ncap;
} cli_text_batch;

lipi_status cli_text_batch_add(cli_text_batch *b, const char *line, size_t len,
                               lipi_error *err);
void cli_text_batch_clear(cli_text_batch *b);
void cli_text_batch_free(cli_text_batch *b);

/* Reads every line of `path` ("-": stdin) into b. */
lipi_status cli_text_batch_read(cli_text_batch *b, const char *path, lipi_invalid_mode mode,
                                lipi_error *err);

/* A progress bar on stderr (only when it is a terminal): lines done, rate,
 * and the share of the input bytes when the inputs are plain files. */
typedef struct {
    bool on;
    const char *sub;
    double t0, last;
    size_t lines;
    unsigned long long bytes_total;
} cli_lines_progress;

void cli_lines_progress_start(cli_lines_progress *p, const char *sub, bool want, char **files, int nfiles);
void cli_lines_progress_add(cli_lines_progress *p, size_t lines);
void cli_lines_progress_done(cli_lines_progress *p);

/* Parses a pooling name (cls, mean, max, mean_sqrt_len) or several joined
 * by '+' ("cls+mean"), as lipi index records them. */
bool cli_parse_pooling(const char *s, unsigned *flags);

/* Text -> sentence embeddings with a model folder (or hub name): its own
 * tokenizer, the forward pass and its pooling, L2-normalized. */
typedef struct cli_embedder cli_embedder;

typedef struct {
    unsigned pooling;    /* LIPI_POOL_*; 0: the model's */
    size_t batch;        /* sentences per forward pass */
    size_t max_length;   /* 0: the model's */
    size_t threads;
} cli_embedder_options;

lipi_status cli_embedder_open(const char *model, const cli_embedder_options *opt,
                              cli_embedder **out, lipi_error *err);
/* Embeds n texts into out (n, dim). */
lipi_status cli_embed(cli_embedder *e, const char *const *texts, const size_t *lens, size_t n,
                      float *out, lipi_error *err);
size_t cli_embedder_dim(const cli_embedder *e);
/* What the index records about the model; strings borrowed from e. */
void cli_embedder_identity(const cli_embedder *e, lipi_index_model *id);
void cli_embedder_free(cli_embedder *e);

#endif

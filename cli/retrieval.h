/* Pieces shared by `lipi index`, `lipi search` and `lipi eval-retrieval`:
 * batches of input lines, a progress bar, and text -> embedding through a
 * model folder. */
#ifndef LIPI_CLI_RETRIEVAL_H
#define LIPI_CLI_RETRIEVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/embedder.h"


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

#endif

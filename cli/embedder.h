/* The command-line side of the model commands (`lipi embed`, `classify`,
 * `probe`, `index`, `search`, `eval-retrieval`): the help of their shared
 * options and the loop that feeds input lines to a lipi_embedder (pipeline/pipeline.h)
 * in batches. */
#ifndef LIPI_CLI_EMBEDDER_H
#define LIPI_CLI_EMBEDDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/options.h"
#include "pipeline/pipeline.h"
#include "tokenizer/tokenizer.h"

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

/* cli_for_each_batch of `lines` lines (lipi_embedder_session_texts)
 * writing to `out` (standard output when NULL or "-"; a file is written
 * atomically): *f is set to where fn must write before the first batch.
 * Reports errors itself; returns EXIT_OK or EXIT_FAIL. */
int cli_write_batches(const char *sub, char **files, int nfiles, const cli_args *a, size_t lines,
                      const char *out, cli_batch_fn fn, void *ctx, FILE **f);

/* Adds the n truncation flags lipi_embedder_embed / _classify set to *count:
 * the commands report the total once, at the end. */
void cli_count_truncated(const uint8_t *flags, size_t n, size_t *count);

/* Prints "lipi SUB: N lines were longer than L tokens, truncated" when n > 0. */
void cli_report_truncated(const char *sub, size_t n, size_t max_length);

/* The help lines of the options every model command shares (CLI_ARGS_MODEL,
 * cli/options.h). */
extern const char cli_model_options_help[];

/* The help lines of --prompt, --prompt-name and --dimensions
 * (CLI_ARGS_RETRIEVAL), for embed and index; search words its own. */
extern const char cli_prompt_options_help[];

#endif

/* The `lipi` command: shared pieces of the subcommands. Subcommands live in
 * cli/cmd_<name>.c, parse their own options, call the library and turn its
 * errors into messages and exit codes. No algorithm lives in cli/. */
#ifndef LIPI_CLI_H
#define LIPI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tokenizer/tokenizer.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

typedef struct {
    const char *name;
    const char *summary;                  /* one line for `lipi --help` */
    int (*run)(int argc, char **argv);    /* argv[0] is the subcommand name */
} cli_command;

/* Prints "lipi SUB: " + the error with its file, line and offset to stderr. */
void cli_report(const char *sub, const lipi_error *err);

/* Prints "lipi SUB: " + message to stderr; returns EXIT_USAGE for usage
 * errors so callers can `return cli_usage_error(...)`. */
int cli_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses --invalid=error|replace. */
bool cli_parse_invalid(const char *s, lipi_invalid_mode *mode);

/* Parses a non-negative decimal integer that fits in uint64_t (no sign, no
 * trailing junk). */
bool cli_parse_u64(const char *s, uint64_t *out);

/* Parses a decimal number in [lo, hi]. */
bool cli_parse_double(const char *s, double lo, double hi, double *out);

/* Splits s in place at `sep` into at most max non-empty items; returns how
 * many. */
size_t cli_split_list(char *s, char sep, char **items, size_t max);

/* Writes s[0..len) as a JSON string literal (quotes included). */
void cli_write_json_string(FILE *f, const char *s, size_t len);

/* Calls fn(line, len, ctx) for each line of each file (stdin when nfiles is
 * 0 or a file is "-"). Stops at the first error, reported with its file,
 * line and offset; returns EXIT_OK or EXIT_FAIL. */
typedef lipi_status (*cli_line_fn)(const char *line, size_t len, void *ctx, lipi_error *err);
int cli_for_each_line(const char *sub, char **files, int nfiles, lipi_invalid_mode mode,
                      cli_line_fn fn, void *ctx);

/* Flushes stdout and reports a write error (disk full, closed pipe). */
int cli_finish_output(const char *sub);

extern const cli_command cmd_normalize;
extern const cli_command cmd_pretokenize;
extern const cli_command cmd_count;
extern const cli_command cmd_train;
extern const cli_command cmd_encode;
extern const cli_command cmd_decode;
extern const cli_command cmd_inflation;
extern const cli_command cmd_index;
extern const cli_command cmd_search;
extern const cli_command cmd_eval_retrieval;
extern const cli_command cmd_embed;
extern const cli_command cmd_classify;
extern const cli_command cmd_probe;
extern const cli_command cmd_download;

/* Writes one JSONL record for class probabilities probs[0..k):
 * {"label":BEST,"score":P,"probs":{"LABEL":P,...}}. */
void cli_write_label_probs(FILE *f, const char *const *labels, size_t k, const float *probs);

/* "0.1.0": the version `lipi --version` prints (recorded in index meta). */
extern const char cli_version[];

#endif

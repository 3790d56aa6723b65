/* The `lipi` command: shared pieces of the subcommands. Subcommands live in
 * cli/cmd_<name>.c, parse their options with cli_parse (cli/options.h), call
 * the library and turn its errors into messages and exit codes. No
 * algorithm lives in cli/. */
#ifndef LIPI_CLI_H
#define LIPI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "encoder/encoder.h"
#include "tokenizer/tokenizer.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* getopt_long `val`s of the long options that have no short letter: one
 * id per option name, for every command. They start above any character so
 * they never clash with a short option (-m, -o, -t, -k, -h); the shared
 * ones are parsed by cli_parse (cli/options.h). */
typedef enum {
    CLI_OPT_FIRST = 0x100,
    /* shared groups (cli/options.h) */
    CLI_OPT_INVALID = CLI_OPT_FIRST,
    CLI_OPT_THREADS,
    CLI_OPT_QUIET,
    CLI_OPT_NORMALIZER,
    CLI_OPT_LOWERCASE,
    CLI_OPT_NO_LOWERCASE,
    CLI_OPT_STRIP_ACCENTS,
    CLI_OPT_NO_STRIP_ACCENTS,
    CLI_OPT_FOLD_DIGITS,
    CLI_OPT_PATTERN,
    CLI_OPT_REGEX,
    CLI_OPT_REVISION,
    CLI_OPT_POOLING,
    CLI_OPT_NORMALIZE,
    CLI_OPT_BATCH,
    CLI_OPT_MAX_LENGTH,
    CLI_OPT_DTYPE,
    CLI_OPT_STRICT,
    CLI_OPT_PROMPT,
    CLI_OPT_PROMPT_NAME,
    CLI_OPT_DIMENSIONS,
    /* one command's or a few commands' own */
    CLI_OPT_FORMAT,
    CLI_OPT_FORM,
    CLI_OPT_OFFSETS,
    CLI_OPT_COUNT,
    CLI_OPT_MERGE,
    CLI_OPT_ADD_SPECIAL_TOKENS,
    CLI_OPT_SKIP_SPECIAL_TOKENS,
    CLI_OPT_PARALLEL,
    CLI_OPT_REFERENCE,
    CLI_OPT_TEXT,
    CLI_OPT_VECTORS,
    CLI_OPT_APPEND,
    CLI_OPT_FAISS,
    CLI_OPT_INDEX,
    CLI_OPT_QUERY,
    CLI_OPT_QUERIES,
    CLI_OPT_DOCS,
    CLI_OPT_QUERY_VECTORS,
    CLI_OPT_DOC_VECTORS,
    CLI_OPT_EXACT,
    CLI_OPT_FAISS_PARAMS,
    CLI_OPT_TRAIN,
    CLI_OPT_DEV,
    CLI_OPT_HOLDOUT,
    CLI_OPT_L2,
    CLI_OPT_ITERATIONS,
    CLI_OPT_PROBE,
    CLI_OPT_ALL,
    CLI_OPT_TYPE,
    CLI_OPT_VOCAB_SIZE,
    CLI_OPT_UNITS,
    CLI_OPT_BYTE_FALLBACK,
    CLI_OPT_NO_BYTE_FALLBACK,
    CLI_OPT_MIN_FREQUENCY,
    CLI_OPT_SPECIAL_TOKENS,
    CLI_OPT_UNK_TOKEN,
    CLI_OPT_MAX_TOKEN_LENGTH,
    CLI_OPT_CHARACTER_COVERAGE,
    CLI_OPT_LIMIT_ALPHABET,
    CLI_OPT_NO_GRAPHEME_GUARD,
    CLI_OPT_FROM_COUNTS,
    CLI_OPT_EXPORT_MERGES,
    CLI_OPT_EXPORT_SPM,
    CLI_OPT_SAMPLE,
    CLI_OPT_SEED,
    CLI_OPT_BALANCE,
    CLI_OPT_LANG_FILE,
    CLI_OPT_ALPHA,
    CLI_OPT_PARITY_THRESHOLD,
    CLI_OPT_PARITY_EXPONENT,
    CLI_OPT_PARITY_MASS,
    CLI_OPT_PARITY_OTHERS,
    CLI_OPT_COST,
    CLI_OPT_COST_MODEL,
    CLI_OPT_CONTEXT,
    CLI_OPT_PRICE_PER_MILLION,
    CLI_OPT_PAIRS,
    CLI_OPT_RAW,
    CLI_OPT_LABEL,
    CLI_OPT_TOP,
    CLI_OPT_FROM_SEARCH,
    CLI_OPT_INPUT,
    CLI_OPT_TEXT_FIELD,
    CLI_OPT_TOTAL,
    CLI_OPT_SPECIAL,
    CLI_OPT_QUANTIZE,
    CLI_OPT_RESCORE_MULTIPLIER,
    CLI_OPT_NO_RESCORE,
    CLI_OPT_PARITY_TARGET,
    CLI_OPT_EMIT,
    CLI_OPT_RERANK,
    CLI_OPT_RERANK_TOP,
    CLI_OPT_HOST,
    CLI_OPT_PORT,
    CLI_OPT_MAX_BATCH_TOKENS,
    CLI_OPT_MAX_CONCURRENT,
    CLI_OPT_MAX_REQUEST_BYTES,
    CLI_OPT_MAX_INPUTS,
    CLI_OPT_TIMEOUT,
    CLI_OPT_API_KEY_FILE,
    CLI_OPT_INT8_QUERY,
    CLI_OPT_BINARY_THRESHOLD,
    CLI_OPT_BINARY_QUERY,
} cli_option_id;

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

/* Reports a bad option value the one way every command does:
 * "lipi SUB: OPT takes TAKES, not 'ARG'" and the --help hint; returns
 * EXIT_USAGE. Example: cli_bad_value("encode", "--threads",
 * "a number from 1 to 1024", "x"). */
int cli_bad_value(const char *sub, const char *opt, const char *takes, const char *arg);

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

/* Splits each of the n lines texts[i] (lens[i] bytes) at its first tab into
 * a[i] (alens[i] bytes) and b[i] (blens[i] bytes, tabs after the first
 * kept): the TSV pairs `classify --pairs` and `rerank --pairs` read. The
 * parts point into the lines. A line without a tab is LIPI_EINVAL with
 * err->line = its index + 1 (cli_for_each_batch adds its file and line). */
lipi_status cli_split_pairs(const char *const *texts, const size_t *lens, size_t n,
                            const char **a, size_t *alens, const char **b, size_t *blens,
                            lipi_error *err);

/* Writes s[0..len) as a JSON string literal (quotes included). */
void cli_write_json_string(FILE *f, const char *s, size_t len);

/* Writes s[0..len) escaped for a JSON string (no quotes) at dst, which has
 * room for 6 * len bytes; returns the bytes written. */
size_t cli_json_escape(char *dst, const char *s, size_t len);

/* Calls fn(line, len, ctx) for each line of each file (stdin when nfiles is
 * 0 or a file is "-"). Stops at the first error, reported with its file,
 * line and offset; returns EXIT_OK or EXIT_FAIL. */
typedef lipi_status (*cli_line_fn)(const char *line, size_t len, void *ctx, lipi_error *err);
int cli_for_each_line(const char *sub, char **files, int nfiles, lipi_invalid_mode mode,
                      cli_line_fn fn, void *ctx);

/* The same over records of any kind (ro: lines, JSONL, whole files, NUL
 * records); errors from fn get the file and the record's number. */
typedef lipi_status (*cli_record_fn)(const lipi_record *rec, void *ctx, lipi_error *err);
int cli_for_each_record(const char *sub, char **files, int nfiles,
                        const lipi_record_options *ro, cli_record_fn fn, void *ctx);

/* A tokenizer opened for a command (-t TOKENIZER): the tokenizer, its
 * encoder and one session per thread. */
typedef struct {
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_session **sessions;   /* [n_sessions] */
    size_t n_sessions;
} cli_tokenizer;

/* Opens path (any format lipi_tokenizer_open reads) with oo, its encoder
 * and n_sessions sessions. Reports a failure as "lipi SUB: PATH: ..." (the
 * path added when the error names no file) and returns EXIT_FAIL, with
 * nothing left to close; else EXIT_OK. */
int cli_tokenizer_open(const char *sub, const char *path, const lipi_open_options *oo,
                       size_t n_sessions, cli_tokenizer *t);

/* Frees what cli_tokenizer_open made; a zeroed t is a no-op. */
void cli_tokenizer_close(cli_tokenizer *t);

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
extern const cli_command cmd_rerank;
extern const cli_command cmd_probe;
extern const cli_command cmd_download;
extern const cli_command cmd_convert;
extern const cli_command cmd_serve;

/* Writes one JSONL record for class probabilities probs[0..k):
 * {"label":BEST,"score":P,"probs":{"LABEL":P,...}}. */
void cli_write_label_probs(FILE *f, const char *const *labels, size_t k, const float *probs);

#endif

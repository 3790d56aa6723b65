/* The one option parser of the subcommands: the options many commands share
 * (--invalid, --threads, --quiet, -o/--output, the text options, the model
 * options, the tokenizer options) are each one table entry and one handler
 * in cli/options.c; a command names the ones it takes, adds its own, and
 * gets one loop, one "needs a value" and one "unknown option" message.
 *
 *   static int own(int id, const char *arg, void *ctx) { ... return 0; }
 *   cli_args a = {.threads = 1, .max_threads = 1024};
 *   cli_spec s = {"encode", help, "t:", opts, CLI_ARG_INVALID | CLI_ARG_THREADS, own, &ctx};
 *   int rc = cli_parse(&s, argc, argv, &a);
 *   if (rc != CLI_GO_ON) return rc;      // --help, or a usage error
 *   // files are argv[optind..argc)
 */
#ifndef LIPI_CLI_OPTIONS_H
#define LIPI_CLI_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/cli.h"
#include "cli/text_options.h"
#include "pipeline/pipeline.h"
#include "tokenizer/tokenizer.h"

/* Where the shared options land. A command sets its defaults before
 * cli_parse; an option not given leaves its field as it was. */
typedef struct {
    lipi_invalid_mode mode;      /* --invalid error|replace */
    size_t threads;              /* --threads N, 1..max_threads; a command's default
                                  * of 0 becomes one per online CPU */
    size_t max_threads;          /* the command's limit for --threads */
    bool quiet;                  /* --quiet */
    const char *output;          /* -o, --output FILE */
    const char *model;           /* -m, --model MODEL */
    lipi_embedder_options eo;    /* --revision --pooling --normalize --batch --max-length
                                  * --dtype --strict --prompt --prompt-name --dimensions */
    lipi_open_options oo;        /* tokenizer: --[no-]lowercase --[no-]strip-accents --pattern */
    cli_text_options text;       /* --normalizer --lowercase --strip-accents --fold-digits
                                  * --pattern --regex (cli/text_options.h) */
    lipi_record_options ro;      /* --input lines|jsonl|whole|nul, --text-field NAME
                                  * (ro.invalid is the command's to set from mode) */
} cli_args;

/* Which shared options a command takes (or together). */
enum {
    CLI_ARG_INVALID = 1u << 0,
    CLI_ARG_THREADS = 1u << 1,
    CLI_ARG_QUIET = 1u << 2,
    CLI_ARG_OUTPUT = 1u << 3,
    CLI_ARG_MODEL = 1u << 4,        /* -m, --model */
    CLI_ARG_REVISION = 1u << 5,
    CLI_ARG_POOLING = 1u << 6,
    CLI_ARG_NORMALIZE = 1u << 7,
    CLI_ARG_BATCH = 1u << 8,
    CLI_ARG_MAX_LENGTH = 1u << 9,
    CLI_ARG_DTYPE = 1u << 10,
    CLI_ARG_STRICT = 1u << 11,
    CLI_ARG_NORMALIZER = 1u << 12,  /* the text options, into cli_args.text */
    CLI_ARG_LOWERCASE = 1u << 13,
    CLI_ARG_STRIP_ACCENTS = 1u << 14,
    CLI_ARG_FOLD_DIGITS = 1u << 15,
    CLI_ARG_PATTERN = 1u << 16,
    CLI_ARG_REGEX = 1u << 17,
    CLI_ARG_TOKENIZER = 1u << 18,   /* the tokenizer's open options, into cli_args.oo */
    CLI_ARG_PROMPT = 1u << 19,      /* --prompt, --prompt-name */
    CLI_ARG_DIMENSIONS = 1u << 20,  /* --dimensions K (truncate_dim) */
    CLI_ARG_INPUT = 1u << 21,       /* --input KIND, --text-field NAME, into cli_args.ro */
};
/* The help lines of CLI_ARG_INPUT, for the commands whose records are texts. */
#define CLI_INPUT_OPTIONS_HELP                                                        \
    "  --input KIND          what a record is: lines (default: each line, without\n"  \
    "                        its end); jsonl (a JSON object per line, the text in\n"  \
    "                        --text-field); whole (each file is one text, newlines\n" \
    "                        and all); nul (records end at NUL bytes)\n"              \
    "  --text-field NAME     jsonl: the member holding the text (default: text)\n"
/* The commands that embed for retrieval (embed, index, search): prompts and
 * Matryoshka truncation (cli_prompt_options_help, cli/embedder.h). */
#define CLI_ARGS_RETRIEVAL (CLI_ARG_PROMPT | CLI_ARG_DIMENSIONS)
#define CLI_ARGS_TEXT                                                                 \
    (CLI_ARG_NORMALIZER | CLI_ARG_LOWERCASE | CLI_ARG_STRIP_ACCENTS | CLI_ARG_FOLD_DIGITS | \
     CLI_ARG_PATTERN | CLI_ARG_REGEX)
/* Every model command's options (cli_model_options_help, cli/embedder.h). */
#define CLI_ARGS_MODEL                                                                 \
    (CLI_ARG_MODEL | CLI_ARG_REVISION | CLI_ARG_POOLING | CLI_ARG_NORMALIZE | CLI_ARG_BATCH | \
     CLI_ARG_MAX_LENGTH | CLI_ARG_DTYPE | CLI_ARG_STRICT | CLI_ARG_THREADS | CLI_ARG_INVALID | \
     CLI_ARG_QUIET)

/* Handles one of the command's own options (`id` is its getopt_long val);
 * returns 0 to go on, or EXIT_USAGE after reporting (cli_bad_value). */
typedef int (*cli_option_fn)(int id, const char *arg, void *ctx);

typedef struct {
    const char *sub;              /* "encode": the name in messages */
    void (*help)(FILE *f);        /* printed on stdout for -h / --help */
    const char *shorts;           /* the command's own short options ("t:", "k:"), or NULL */
    const struct option *opts;    /* its own long options, zero-terminated, or NULL */
    unsigned args;                /* CLI_ARG_* it shares */
    cli_option_fn fn;             /* its own options; NULL when it has none */
    void *ctx;
    int first;                    /* argv index of the first option (0 means 1) */
} cli_spec;

#define CLI_GO_ON (-1)

/* Parses argv's options by spec into a and the command's handler; leaves
 * optind at the first operand. Returns CLI_GO_ON, or the exit code the
 * command returns at once: EXIT_OK after --help, EXIT_USAGE after a usage
 * error ("option '--x' needs a value", "unknown option '--y'",
 * "--threads takes a number from 1 to 1024, not 'x'"). */
int cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *a);

#endif

/* Options that choose how text is normalized and split, shared by the
 * commands that count and train (so counting shards and training agree). */
#ifndef LIPI_CLI_TEXT_OPTIONS_H
#define LIPI_CLI_TEXT_OPTIONS_H

#include <stdbool.h>

#include "cli/cli.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *normalizer;   /* --normalizer NAME (default "indic") */
    lipi_normalizer_options norm_opt; /* --lowercase, --strip-accents, --fold-digits */
    const char *pattern;      /* --pattern NAME (default "indic") */
    const char *regex;        /* --regex PATTERN, overrides --pattern */
} cli_text_options;

void cli_text_options_default(cli_text_options *o);

/* Builds the normalizer and pre-tokenizer; on error fills err and returns
 * its status, with nothing to free. */
lipi_status cli_text_build(const cli_text_options *o, lipi_normalizer **norm,
                           lipi_pretokenizer **pre, lipi_error *err);

/* Applies option `c` (a CLI_OPT_* id of --normalizer, --lowercase,
 * --strip-accents, --fold-digits, --pattern or --regex, with optarg `arg`);
 * false for any other id. cli_parse (cli/options.h) calls it. */
bool cli_text_option(int c, const char *arg, cli_text_options *o);

#define CLI_TEXT_OPTIONS_HELP                                                             \
    "  --normalizer NAME     indic (default: NFC, canonical nukta, ZWJ/ZWNJ only inside\n" \
    "                        words), nfc, nfkc, nfd, nfkd, bert, none\n"                   \
    "  --lowercase           lowercase (full Unicode) after normalizing\n"                \
    "  --strip-accents       drop accents of Latin, Greek and Cyrillic letters only\n"    \
    "  --fold-digits         fold Indic digits to ASCII\n"                                \
    "  --pattern NAME        pre-tokenizer: indic (default for bpe), unigram (indic\n" \
    "                        with SentencePiece's '▁' word prefix; default for\n"        \
    "                        unigram), cl100k, o200k, gpt2, bert, whitespace,\n"         \
    "                        metaspace, digits\n"                                         \
    "  --regex PATTERN       split on your own PCRE2 pattern instead of --pattern\n"

#endif

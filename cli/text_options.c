/* See text_options.h. */
#include "cli/text_options.h"
#include "trainer/trainer.h"

#include <string.h>

void cli_text_options_default(cli_text_options *o)
{
    memset(o, 0, sizeof *o);
    o->normalizer = "indic";
    o->pattern = "indic";
}

lipi_status cli_text_build(const cli_text_options *o, lipi_normalizer **norm,
                           lipi_pretokenizer **pre, lipi_error *err)
{
    lipi_status st = lipi_train_text_new(o->normalizer, &o->norm_opt, o->pattern, o->regex, norm,
                                         pre, err);
    if (st == LIPI_EINVAL && !o->regex && strcmp(o->pattern, "bytelevel") == 0)
        lipi_error_set(err, st, NULL, 0, 0,
                       "--pattern bytelevel is for encoding; to train a byte-level vocabulary "
                       "use --units byte with a split pattern");
    return st;
}

bool cli_text_option(int c, const char *arg, cli_text_options *o)
{
    switch (c) {
    case CLI_OPT_NORMALIZER: o->normalizer = arg; return true;
    case CLI_OPT_LOWERCASE: o->norm_opt.lowercase = true; return true;
    case CLI_OPT_STRIP_ACCENTS: o->norm_opt.strip_accents = true; return true;
    case CLI_OPT_FOLD_DIGITS: o->norm_opt.fold_digits = true; return true;
    case CLI_OPT_PATTERN: o->pattern = arg; return true;
    case CLI_OPT_REGEX: o->regex = arg; return true;
    }
    return false;
}

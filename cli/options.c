/* See options.h. Each shared option is one row of `shared` and one case of
 * shared_option(); their help lines stay in the commands' help texts (and
 * CLI_TEXT_OPTIONS_HELP, cli_model_options_help), whose wording and columns
 * differ per command. */
#include "cli/options.h"

#include <string.h>

typedef struct {
    unsigned arg;         /* CLI_ARG_* */
    struct option opt;
} shared_entry;

static const shared_entry shared[] = {
    {CLI_ARG_INVALID, {"invalid", required_argument, NULL, CLI_OPT_INVALID}},
    {CLI_ARG_THREADS, {"threads", required_argument, NULL, CLI_OPT_THREADS}},
    {CLI_ARG_QUIET, {"quiet", no_argument, NULL, CLI_OPT_QUIET}},
    {CLI_ARG_OUTPUT, {"output", required_argument, NULL, 'o'}},
    {CLI_ARG_MODEL, {"model", required_argument, NULL, 'm'}},
    {CLI_ARG_REVISION, {"revision", required_argument, NULL, CLI_OPT_REVISION}},
    {CLI_ARG_POOLING, {"pooling", required_argument, NULL, CLI_OPT_POOLING}},
    {CLI_ARG_NORMALIZE, {"normalize", no_argument, NULL, CLI_OPT_NORMALIZE}},
    {CLI_ARG_BATCH, {"batch", required_argument, NULL, CLI_OPT_BATCH}},
    {CLI_ARG_MAX_LENGTH, {"max-length", required_argument, NULL, CLI_OPT_MAX_LENGTH}},
    {CLI_ARG_DTYPE, {"dtype", required_argument, NULL, CLI_OPT_DTYPE}},
    {CLI_ARG_STRICT, {"strict", no_argument, NULL, CLI_OPT_STRICT}},
    {CLI_ARG_PROMPT, {"prompt", required_argument, NULL, CLI_OPT_PROMPT}},
    {CLI_ARG_PROMPT, {"prompt-name", required_argument, NULL, CLI_OPT_PROMPT_NAME}},
    {CLI_ARG_DIMENSIONS, {"dimensions", required_argument, NULL, CLI_OPT_DIMENSIONS}},
    {CLI_ARG_NORMALIZER, {"normalizer", required_argument, NULL, CLI_OPT_NORMALIZER}},
    {CLI_ARG_LOWERCASE, {"lowercase", no_argument, NULL, CLI_OPT_LOWERCASE}},
    {CLI_ARG_STRIP_ACCENTS, {"strip-accents", no_argument, NULL, CLI_OPT_STRIP_ACCENTS}},
    {CLI_ARG_FOLD_DIGITS, {"fold-digits", no_argument, NULL, CLI_OPT_FOLD_DIGITS}},
    {CLI_ARG_PATTERN, {"pattern", required_argument, NULL, CLI_OPT_PATTERN}},
    {CLI_ARG_REGEX, {"regex", required_argument, NULL, CLI_OPT_REGEX}},
    {CLI_ARG_TOKENIZER, {"lowercase", no_argument, NULL, CLI_OPT_LOWERCASE}},
    {CLI_ARG_TOKENIZER, {"no-lowercase", no_argument, NULL, CLI_OPT_NO_LOWERCASE}},
    {CLI_ARG_TOKENIZER, {"strip-accents", no_argument, NULL, CLI_OPT_STRIP_ACCENTS}},
    {CLI_ARG_TOKENIZER, {"no-strip-accents", no_argument, NULL, CLI_OPT_NO_STRIP_ACCENTS}},
    {CLI_ARG_TOKENIZER, {"pattern", required_argument, NULL, CLI_OPT_PATTERN}},
    {CLI_ARG_INPUT, {"input", required_argument, NULL, CLI_OPT_INPUT}},
    {CLI_ARG_INPUT, {"text-field", required_argument, NULL, CLI_OPT_TEXT_FIELD}},
};
#define N_SHARED (sizeof shared / sizeof shared[0])
#define MAX_OPTS 64

/* Applies shared option e; returns 0, or EXIT_USAGE after reporting. */
static int shared_option(const char *sub, const shared_entry *e, const char *arg, cli_args *a)
{
    uint64_t v;
    char takes[48];
    switch (e->arg) {
    case CLI_ARG_INVALID:
        if (!cli_parse_invalid(arg, &a->mode))
            return cli_bad_value(sub, "--invalid", "'error' or 'replace'", arg);
        return 0;
    case CLI_ARG_THREADS:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > a->max_threads) {
            snprintf(takes, sizeof takes, "a number from 1 to %zu", a->max_threads);
            return cli_bad_value(sub, "--threads", takes, arg);
        }
        a->threads = (size_t)v;
        return 0;
    case CLI_ARG_QUIET: a->quiet = true; return 0;
    case CLI_ARG_OUTPUT: a->output = arg; return 0;
    case CLI_ARG_MODEL: a->model = arg; return 0;
    case CLI_ARG_REVISION: a->eo.revision = arg; return 0;
    case CLI_ARG_POOLING:
        if (!lipi_pooling_parse(arg, &a->eo.pooling))
            return cli_bad_value(sub, "--pooling", "cls, mean, max or mean_sqrt_len", arg);
        return 0;
    case CLI_ARG_NORMALIZE: a->eo.normalize = 1; return 0;
    case CLI_ARG_BATCH:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 65536)
            return cli_bad_value(sub, "--batch", "1..65536", arg);
        a->eo.batch = (size_t)v;
        return 0;
    case CLI_ARG_MAX_LENGTH:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 1000000)
            return cli_bad_value(sub, "--max-length", "a positive number", arg);
        a->eo.max_length = (size_t)v;
        return 0;
    case CLI_ARG_DTYPE:
        if (strcmp(arg, "f32") == 0)
            a->eo.dtype = LIPI_DTYPE_F32;
        else if (strcmp(arg, "int8") == 0)
            a->eo.dtype = LIPI_DTYPE_INT8;
        else
            return cli_bad_value(sub, "--dtype", "f32 or int8", arg);
        return 0;
    case CLI_ARG_STRICT: a->eo.strict = true; return 0;
    case CLI_ARG_PROMPT:
        if (e->opt.val == CLI_OPT_PROMPT)
            a->eo.prompt = arg;
        else if (!arg[0])
            return cli_bad_value(sub, "--prompt-name", "a name of the model's prompts", arg);
        else
            a->eo.prompt_name = arg;
        if (a->eo.prompt && a->eo.prompt_name)
            return cli_usage_error(sub, "give --prompt TEXT or --prompt-name NAME, not both");
        return 0;
    case CLI_ARG_DIMENSIONS:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 1048576)
            return cli_bad_value(sub, "--dimensions", "a number from 1 to the model's dimension",
                                 arg);
        a->eo.dimensions = (size_t)v;
        return 0;
    case CLI_ARG_NORMALIZER:
    case CLI_ARG_LOWERCASE:
    case CLI_ARG_STRIP_ACCENTS:
    case CLI_ARG_FOLD_DIGITS:
    case CLI_ARG_PATTERN:
    case CLI_ARG_REGEX: cli_text_option(e->opt.val, arg, &a->text); return 0;
    case CLI_ARG_TOKENIZER:
        switch (e->opt.val) {
        case CLI_OPT_LOWERCASE: a->oo.lowercase = LIPI_FLAG_ON; break;
        case CLI_OPT_NO_LOWERCASE: a->oo.lowercase = LIPI_FLAG_OFF; break;
        case CLI_OPT_STRIP_ACCENTS: a->oo.strip_accents = LIPI_FLAG_ON; break;
        case CLI_OPT_NO_STRIP_ACCENTS: a->oo.strip_accents = LIPI_FLAG_OFF; break;
        case CLI_OPT_PATTERN: a->oo.pattern = arg; break;
        }
        return 0;
    case CLI_ARG_INPUT:
        if (e->opt.val == CLI_OPT_TEXT_FIELD)
            a->ro.text_field = arg;
        else if (strcmp(arg, "lines") == 0)
            a->ro.format = LIPI_RECORDS_LINES;
        else if (strcmp(arg, "jsonl") == 0)
            a->ro.format = LIPI_RECORDS_JSONL;
        else if (strcmp(arg, "whole") == 0)
            a->ro.format = LIPI_RECORDS_WHOLE;
        else if (strcmp(arg, "nul") == 0)
            a->ro.format = LIPI_RECORDS_NUL;
        else
            return cli_bad_value(sub, "--input", "lines, jsonl, whole or nul", arg);
        return 0;
    }
    return 0;
}

int cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *a)
{
    struct option opts[MAX_OPTS + 1];
    const shared_entry *from[MAX_OPTS + 1];   /* NULL: the command's own, or --help */
    char shorts[32] = ":h";
    size_t n = 0;
    for (size_t i = 0; i < N_SHARED; i++)
        if (spec->args & shared[i].arg) {
            from[n] = &shared[i];
            opts[n++] = shared[i].opt;
        }
    if (spec->args & CLI_ARG_MODEL)
        strcat(shorts, "m:");
    if (spec->args & CLI_ARG_OUTPUT)
        strcat(shorts, "o:");
    if (spec->shorts)
        strncat(shorts, spec->shorts, sizeof shorts - strlen(shorts) - 1);
    for (const struct option *o = spec->opts; o && o->name && n < MAX_OPTS; o++) {
        from[n] = NULL;
        opts[n++] = *o;
    }
    from[n] = NULL;
    opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[n] = (struct option){NULL, 0, NULL, 0};

    int ch;
    optind = spec->first ? spec->first : 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
        const shared_entry *e = NULL;
        for (size_t i = 0; i < n && !e; i++)
            if (from[i] && opts[i].val == ch)
                e = from[i];
        int rc;
        if (e)
            rc = shared_option(spec->sub, e, optarg, a);
        else if (ch == 'h') {
            spec->help(stdout);
            return EXIT_OK;
        } else if (ch == ':')
            return cli_usage_error(spec->sub, "option '%s' needs a value", argv[optind - 1]);
        else if (ch == '?' || !spec->fn)
            return cli_usage_error(spec->sub, "unknown option '%s'", argv[optind - 1]);
        else
            rc = spec->fn(ch, optarg, spec->ctx);
        if (rc != 0)
            return rc;
    }
    /* 0 (no --threads, and the command's default is "all") means one per
     * online CPU, resolved here once for every command. */
    if (spec->args & CLI_ARG_THREADS)
        a->threads = lipi_thread_count(a->threads, a->max_threads);
    return CLI_GO_ON;
}

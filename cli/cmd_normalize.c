/* `lipi normalize`: normalizes text line by line. */
#include "cli/cli.h"
#include "cli/options.h"

#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi normalize [OPTIONS] [FILE...]\n"
            "\n"
            "Normalizes each input line and prints it (one output line per input line).\n"
            "\n"
            "Options:\n"
            "  --form NAME        nfc (default), nfkc, nfd, nfkd, indic, bert, none\n"
            "                     indic: NFC (canonical nukta forms), ZWJ/ZWNJ kept inside\n"
            "                     words and dropped elsewhere\n"
            "  --lowercase        full Unicode lowercase\n"
            "  --strip-accents    remove accents of Latin, Greek and Cyrillic letters\n"
            "                     (never an Indic vowel sign, virama, anusvara or nukta)\n"
            "  --fold-digits      fold Indic digits to ASCII 0-9\n"
            "  --invalid MODE     what to do with invalid UTF-8: error (default, names the\n"
            "                     file, line and byte offset) or replace (with U+FFFD)\n"
            "  -h, --help         show this help\n"
            "\n"
            "Example:\n"
            "  echo 'क़िला ＡＢＣ' | lipi normalize --form nfkc\n");
}

typedef struct {
    const lipi_normalizer *norm;
    lipi_normalized out;
} normalize_ctx;

static lipi_status normalize_line(const char *line, size_t len, void *vctx, lipi_error *err)
{
    normalize_ctx *ctx = vctx;
    lipi_status st = lipi_normalize(ctx->norm, line, len, &ctx->out, false, err);
    if (st != LIPI_OK)
        return st;
    fwrite(ctx->out.text, 1, ctx->out.len, stdout);
    putchar('\n');
    return LIPI_OK;
}

/* --form, the one option of normalize's own. */
static int normalize_option(int id, const char *arg, void *vform)
{
    (void)id;
    *(const char **)vform = arg;
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"form", required_argument, NULL, CLI_OPT_FORM},
        {NULL, 0, NULL, 0},
    };
    const char *form = "nfc";
    cli_args a = {.mode = LIPI_INVALID_ERROR};
    const cli_spec spec = {"normalize", help, NULL, opts,
                           CLI_ARG_LOWERCASE | CLI_ARG_STRIP_ACCENTS | CLI_ARG_FOLD_DIGITS |
                               CLI_ARG_INVALID,
                           normalize_option, &form, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    const lipi_normalizer_options nopt = a.text.norm_opt;
    lipi_invalid_mode mode = a.mode;
    lipi_error err = {0};
    normalize_ctx ctx = {0};
    lipi_normalizer *norm = NULL;
    if (lipi_normalizer_new(form, &nopt, &norm, &err) != LIPI_OK) {
        cli_report("normalize", &err);
        return EXIT_USAGE;
    }
    ctx.norm = norm;
    int rc = cli_for_each_line("normalize", argv + optind, argc - optind, mode, normalize_line, &ctx);
    if (rc == EXIT_OK)
        rc = cli_finish_output("normalize");
    lipi_normalized_free(&ctx.out);
    lipi_normalizer_free(norm);
    return rc;
}

const cli_command cmd_normalize = {"normalize", "normalize text (NFC, NFKC, Indic, BERT, lowercase)", run};

/* `lipi pretokenize`: shows how a pre-tokenizer splits each line. */
#include "cli/cli.h"
#include "cli/options.h"

#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi pretokenize [OPTIONS] [FILE...]\n"
            "\n"
            "Splits each input line into pre-tokens and prints one JSON array of strings\n"
            "per line.\n"
            "\n"
            "Options:\n"
            "  --pattern NAME     indic (default): letters keep their combining marks and\n"
            "                     ZWJ/ZWNJ, words split where the script changes;\n"
            "                     cl100k, o200k, gpt2: OpenAI's published split patterns;\n"
            "                     bytelevel: gpt2 + GPT-2 byte alphabet; bert; whitespace;\n"
            "                     metaspace (SentencePiece '▁'); digits\n"
            "  --regex PATTERN    split on a PCRE2 pattern of your own instead\n"
            "  --offsets          print [piece, start, end] with byte offsets into the line\n"
            "  --count            print only the number of pieces of each line\n"
            "  --normalize NAME   normalize first (nfc, nfkc, indic, ...; default none)\n"
            "  --invalid MODE     invalid UTF-8: error (default) or replace (with U+FFFD)\n"
            "  -h, --help         show this help\n"
            "\n"
            "Example:\n"
            "  echo 'हिन्दी में' | lipi pretokenize --pattern cl100k\n"
            "  [\"ह\",\"िन\",\"्द\",\"ी\",\" म\",\"ें\"]\n");
}

typedef struct {
    const lipi_normalizer *norm;
    const lipi_pretokenizer *pre;
    bool offsets, count;
    lipi_normalized normed;
    lipi_pieces pieces;
} pretok_ctx;

static lipi_status pretok_line(const char *line, size_t len, void *vctx, lipi_error *err)
{
    pretok_ctx *ctx = vctx;
    lipi_status st;
    if (ctx->norm) {
        st = lipi_normalize(ctx->norm, line, len, &ctx->normed, ctx->offsets, err);
        if (st != LIPI_OK)
            return st;
        line = ctx->normed.text;
        len = ctx->normed.len;
    }
    st = lipi_pretokenize(ctx->pre, line, len, &ctx->pieces, err);
    if (st != LIPI_OK)
        return st;
    const lipi_pieces *p = &ctx->pieces;
    if (ctx->count) {
        printf("%zu\n", p->count);
        return LIPI_OK;
    }
    putchar('[');
    for (size_t i = 0; i < p->count; i++) {
        if (i)
            putchar(',');
        const char *text = p->text + p->text_off[i];
        size_t tlen = p->text_off[i + 1] - p->text_off[i];
        if (ctx->offsets) {
            lipi_span s = p->src[i];
            if (ctx->norm && s.end > s.start) /* report offsets in the input line */
                s = (lipi_span){ctx->normed.align[s.start].start, ctx->normed.align[s.end - 1].end};
            putchar('[');
            cli_write_json_string(stdout, text, tlen);
            printf(",%zu,%zu]", s.start, s.end);
        } else {
            cli_write_json_string(stdout, text, tlen);
        }
    }
    puts("]");
    return LIPI_OK;
}

typedef struct {
    pretok_ctx *ctx;
    const char *norm_name;
} pretok_args;

static int pretok_option(int id, const char *arg, void *vpa)
{
    pretok_args *pa = vpa;
    switch (id) {
    case CLI_OPT_OFFSETS: pa->ctx->offsets = true; break;
    case CLI_OPT_COUNT: pa->ctx->count = true; break;
    case CLI_OPT_NORMALIZE: pa->norm_name = arg; break;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"offsets", no_argument, NULL, CLI_OPT_OFFSETS},
        {"count", no_argument, NULL, CLI_OPT_COUNT},
        {"normalize", required_argument, NULL, CLI_OPT_NORMALIZE},
        {NULL, 0, NULL, 0},
    };
    pretok_ctx ctx = {0};
    pretok_args pa = {&ctx, NULL};
    cli_args a = {.mode = LIPI_INVALID_ERROR, .text = {.pattern = "indic"}};
    const cli_spec spec = {"pretokenize", help, NULL, opts,
                           CLI_ARG_PATTERN | CLI_ARG_REGEX | CLI_ARG_INVALID, pretok_option, &pa,
                           0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    const char *pattern = a.text.pattern, *regex = a.text.regex, *norm_name = pa.norm_name;
    lipi_invalid_mode mode = a.mode;
    lipi_error err = {0};
    lipi_normalizer *norm = NULL;
    lipi_pretokenizer *pre = NULL;
    int rc = EXIT_USAGE;
    if (norm_name && lipi_normalizer_new(norm_name, NULL, &norm, &err) != LIPI_OK)
        goto bad;
    if ((regex ? lipi_pretokenizer_new_pattern(regex, &pre, &err)
               : lipi_pretokenizer_new(pattern, &pre, &err)) != LIPI_OK)
        goto bad;
    ctx.norm = norm;
    ctx.pre = pre;
    rc = cli_for_each_line("pretokenize", argv + optind, argc - optind, mode, pretok_line, &ctx);
    if (rc == EXIT_OK)
        rc = cli_finish_output("pretokenize");
    goto done;
bad:
    cli_report("pretokenize", &err);
done:
    lipi_pieces_free(&ctx.pieces);
    lipi_normalized_free(&ctx.normed);
    lipi_pretokenizer_free(pre);
    lipi_normalizer_free(norm);
    return rc;
}

const cli_command cmd_pretokenize = {"pretokenize", "split text into pre-tokens (indic, cl100k, o200k, bert, ...)", run};

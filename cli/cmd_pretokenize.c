/* `lipi pretokenize`: shows how a pre-tokenizer splits each line. */
#include "cli/cli.h"

#include <getopt.h>
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

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"pattern", required_argument, NULL, 'p'},
        {"regex", required_argument, NULL, 'r'},
        {"offsets", no_argument, NULL, 'o'},
        {"count", no_argument, NULL, 'c'},
        {"normalize", required_argument, NULL, 'n'},
        {"invalid", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *pattern = "indic", *regex = NULL, *norm_name = NULL;
    lipi_invalid_mode mode = LIPI_INVALID_ERROR;
    pretok_ctx ctx = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': pattern = optarg; break;
        case 'r': regex = optarg; break;
        case 'o': ctx.offsets = true; break;
        case 'c': ctx.count = true; break;
        case 'n': norm_name = optarg; break;
        case 'i':
            if (!cli_parse_invalid(optarg, &mode))
                return cli_usage_error("pretokenize", "--invalid takes 'error' or 'replace', not '%s'", optarg);
            break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error("pretokenize", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("pretokenize", "unknown option '%s'", argv[optind - 1]);
        }
    }
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

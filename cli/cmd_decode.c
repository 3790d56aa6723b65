/* `lipi decode`: lines of token ids -> text, one output line per input line. */
#include "cli/cli.h"
#include "cli/options.h"

#include <string.h>

#include "encoder/encoder.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi decode -t TOKENIZER [OPTIONS] [FILE...]\n"
            "\n"
            "Decodes each input line of token ids (separated by spaces or tabs) into text\n"
            "with the tokenizer's decoder, as Hugging Face tokenizers does.\n"
            "\n"
            "Options:\n"
            "  -t, --tokenizer PATH     a tokenizer.json, a model folder, a SentencePiece\n"
            "                           .model, a BERT vocab.txt, a GPT-2 vocab.json /\n"
            "                           merges.txt, a tiktoken file or name, or a GGUF file\n"
            "  --lowercase, --no-lowercase, --strip-accents, --no-strip-accents\n"
            "                           vocab.txt: override tokenizer_config.json\n"
            "  --pattern REGEX          tiktoken / GGUF: the split pattern\n"
            "  --skip-special-tokens    leave out added tokens marked special\n"
            "  -h, --help               show this help\n"
            "\n"
            "A word that is not a number, or an id that no token has, is an error naming\n"
            "the id and the line.\n"
            "\n"
            "Example:\n"
            "  echo '15496 995' | lipi decode -t gpt2/tokenizer.json\n");
}

typedef struct {
    const lipi_tokenizer *tok;
    lipi_session *s;
    bool skip_special;
    uint32_t *ids;
    size_t cap;
    char *text;
    size_t text_cap;
} decode_ctx;

static lipi_status decode_line(const char *line, size_t len, void *vctx, lipi_error *err)
{
    decode_ctx *c = vctx;
    size_t n = 0, i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && line[i] != ' ' && line[i] != '\t')
            i++;
        char word[24];
        size_t wl = i - start;
        uint64_t v;
        if (wl >= sizeof word) {
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, start + 1,
                                  "'%.*s...' is not a token id", 20, line + start);
        }
        memcpy(word, line + start, wl);
        word[wl] = '\0';
        if (!cli_parse_u64(word, &v) || v > UINT32_MAX)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, start + 1,
                                  "'%s' is not a token id", word);
        if (n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 256;
            uint32_t *p = lipi_reallocarray(c->ids, cap, sizeof *p);
            if (!p)
                return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            c->ids = p;
            c->cap = cap;
        }
        size_t tl;
        if (!lipi_tokenizer_id_to_token(c->tok, (uint32_t)v, &tl))
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, start + 1,
                                  "id %s is not a token id: the vocabulary has %zu ids", word,
                                  lipi_tokenizer_vocab_size(c->tok));
        c->ids[n++] = (uint32_t)v;
    }
    size_t out_len;
    lipi_status st =
        lipi_decode(c->s, c->ids, n, c->skip_special, c->text, c->text_cap, &out_len, err);
    if (st == LIPI_OK && out_len >= c->text_cap) {
        char *t = lipi_realloc(c->text, out_len + 1);
        if (!t)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        c->text = t;
        c->text_cap = out_len + 1;
        st = lipi_decode(c->s, c->ids, n, c->skip_special, c->text, c->text_cap, &out_len, err);
    }
    if (st != LIPI_OK)
        return st;
    fwrite(c->text, 1, out_len, stdout);
    putchar('\n');
    return LIPI_OK;
}

typedef struct {
    const char *path;     /* -t */
    bool skip_special;    /* --skip-special-tokens */
} decode_args;

static int decode_option(int id, const char *arg, void *vda)
{
    decode_args *da = vda;
    if (id == 't')
        da->path = arg;
    else
        da->skip_special = true;
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"skip-special-tokens", no_argument, NULL, CLI_OPT_SKIP_SPECIAL_TOKENS},
        {NULL, 0, NULL, 0},
    };
    decode_args da = {0};
    cli_args a = {0};
    const cli_spec spec = {"decode", help, "t:", opts, CLI_ARG_TOKENIZER, decode_option, &da, 0};
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (!da.path)
        return cli_usage_error("decode", "no tokenizer given (-t TOKENIZER)");

    cli_tokenizer t;
    if (cli_tokenizer_open("decode", da.path, &a.oo, 1, &t) != EXIT_OK)
        return EXIT_FAIL;
    decode_ctx c = {.tok = t.tok, .s = t.sessions[0], .skip_special = da.skip_special};
    rc = cli_for_each_line("decode", argv + optind, argc - optind, LIPI_INVALID_ERROR, decode_line,
                           &c);
    if (rc == EXIT_OK)
        rc = cli_finish_output("decode");
    lipi_free(c.ids);
    lipi_free(c.text);
    cli_tokenizer_close(&t);
    return rc;
}

const cli_command cmd_decode = {"decode", "token ids -> text", run};

/* `lipi decode`: lines of token ids -> text, one output line per input line. */
#include "cli/cli.h"

#include <getopt.h>
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

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"lowercase", no_argument, NULL, 1101},
        {"no-lowercase", no_argument, NULL, 1102},
        {"strip-accents", no_argument, NULL, 1103},
        {"no-strip-accents", no_argument, NULL, 1104},
        {"pattern", required_argument, NULL, 1105},
        {"skip-special-tokens", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    lipi_open_options oo = {0};
    decode_ctx c = {0};
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":t:h", opts, NULL)) != -1) {
        switch (ch) {
        case 't': path = optarg; break;
        case 1101: oo.lowercase = LIPI_FLAG_ON; break;
        case 1102: oo.lowercase = LIPI_FLAG_OFF; break;
        case 1103: oo.strip_accents = LIPI_FLAG_ON; break;
        case 1104: oo.strip_accents = LIPI_FLAG_OFF; break;
        case 1105: oo.pattern = optarg; break;
        case 's': c.skip_special = true; break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error("decode", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("decode", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!path)
        return cli_usage_error("decode", "no tokenizer given (-t TOKENIZER)");

    lipi_error err = {0};
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    int rc = EXIT_FAIL;
    if (lipi_tokenizer_open(path, &oo, &tok, &err) != LIPI_OK ||
        lipi_encoder_new(tok, &enc, &err) != LIPI_OK) {
        if (!err.path[0])
            snprintf(err.path, sizeof err.path, "%s", path);
        cli_report("decode", &err);
        goto done;
    }
    c.tok = tok;
    if (lipi_session_new(enc, &c.s) != LIPI_OK) {
        fprintf(stderr, "lipi decode: out of memory\n");
        goto done;
    }
    rc = cli_for_each_line("decode", argv + optind, argc - optind, LIPI_INVALID_ERROR, decode_line,
                           &c);
    if (rc == EXIT_OK)
        rc = cli_finish_output("decode");
done:
    lipi_free(c.ids);
    lipi_free(c.text);
    lipi_session_free(c.s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return rc;
}

const cli_command cmd_decode = {"decode", "token ids -> text", run};

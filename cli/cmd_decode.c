/* `lipi decode`: records of token ids -> text, one output record per input
 * record (a line per line, a NUL-ended text per NUL record, the text alone
 * for a whole file, or JSONL). */
#include "cli/cli.h"
#include "cli/options.h"

#include <string.h>

#include "encoder/encoder.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi decode -t TOKENIZER [OPTIONS] [FILE...]\n"
            "\n"
            "Decodes each input record of token ids (separated by white space) into text\n"
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
            "  --input KIND             what a record is: lines (default: the ids of one\n"
            "                           text per line, a text per output line); jsonl (a\n"
            "                           JSON object per line, the ids an array in\n"
            "                           --text-field, as 'lipi encode --format jsonl'\n"
            "                           writes them); whole (each file is the ids of one\n"
            "                           text, written as it is, with no line end added);\n"
            "                           nul (records end at NUL bytes, and so does each\n"
            "                           text written)\n"
            "  --text-field NAME        jsonl: the member holding the ids (default: ids)\n"
            "  --format FMT             text (default: the texts, ended as above; jsonl\n"
            "                           input gives a line per text) or jsonl (a JSON object\n"
            "                           per record: its other members, then \"text\")\n"
            "  -h, --help               show this help\n"
            "\n"
            "A word that is not a number, or an id that no token has, is an error naming\n"
            "the id and the line.\n"
            "\n"
            "Examples:\n"
            "  echo '15496 995' | lipi decode -t gpt2/tokenizer.json\n"
            "  lipi encode -t o200k_base --input whole doc.md | lipi decode -t o200k_base \\\n"
            "      --input whole > same.md\n"
            "  lipi decode -t o200k_base --input jsonl --format jsonl ids.jsonl\n");
}

typedef struct {
    const lipi_tokenizer *tok;
    lipi_session *s;
    bool skip_special;
    bool jsonl_out;   /* --format jsonl */
    bool columns;     /* error offsets are columns of the record's own text */
    int end;          /* the byte after each text, or -1 for none */
    uint32_t *ids;
    size_t cap;
    char *text;
    size_t text_cap;
} decode_ctx;

static bool space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Writes the decoded text of one record as --format asks. */
static void write_text(const decode_ctx *c, const lipi_record *rec, size_t len)
{
    if (c->jsonl_out) {
        fputc('{', stdout);
        if (rec->extra_len) {
            fwrite(rec->extra, 1, rec->extra_len, stdout);
            fputs(", ", stdout);
        }
        fputs("\"text\": ", stdout);
        cli_write_json_string(stdout, c->text, len);
        fputs("}\n", stdout);
        return;
    }
    fwrite(c->text, 1, len, stdout);
    if (c->end >= 0)
        putchar(c->end);
}

static lipi_status decode_record(const lipi_record *rec, void *vctx, lipi_error *err)
{
    decode_ctx *c = vctx;
    const char *line = rec->text;
    size_t len = rec->len, n = 0, i = 0;
    while (i < len) {
        while (i < len && space(line[i]))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && !space(line[i]))
            i++;
        char word[24];
        size_t wl = i - start;
        uint64_t v;
        if (wl >= sizeof word) {
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, c->columns ? start + 1 : 0,
                                  "'%.*s...' is not a token id", 20, line + start);
        }
        memcpy(word, line + start, wl);
        word[wl] = '\0';
        if (!cli_parse_u64(word, &v) || v > UINT32_MAX)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, c->columns ? start + 1 : 0,
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
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, c->columns ? start + 1 : 0,
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
    write_text(c, rec, out_len);
    return LIPI_OK;
}

typedef struct {
    const char *path;     /* -t */
    bool skip_special;    /* --skip-special-tokens */
    bool jsonl;           /* --format jsonl */
} decode_args;

static int decode_option(int id, const char *arg, void *vda)
{
    decode_args *da = vda;
    if (id == 't')
        da->path = arg;
    else if (id == CLI_OPT_FORMAT) {
        if (strcmp(arg, "jsonl") != 0 && strcmp(arg, "text") != 0)
            return cli_bad_value("decode", "--format", "text or jsonl", arg);
        da->jsonl = strcmp(arg, "jsonl") == 0;
    } else
        da->skip_special = true;
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"skip-special-tokens", no_argument, NULL, CLI_OPT_SKIP_SPECIAL_TOKENS},
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {NULL, 0, NULL, 0},
    };
    decode_args da = {0};
    cli_args a = {0};
    const cli_spec spec = {"decode", help, "t:", opts, CLI_ARG_TOKENIZER | CLI_ARG_INPUT,
                           decode_option, &da, 0};
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (!da.path)
        return cli_usage_error("decode", "no tokenizer given (-t TOKENIZER)");

    cli_tokenizer t;
    if (cli_tokenizer_open("decode", da.path, &a.oo, 1, &t) != EXIT_OK)
        return EXIT_FAIL;
    /* Each kind of record ends its text as the input ended it, so
     * `lipi encode --input K | lipi decode --input K` gives the input back
     * for whole and NUL records. */
    static const int ends[] = {[LIPI_RECORDS_LINES] = '\n', [LIPI_RECORDS_JSONL] = '\n',
                               [LIPI_RECORDS_WHOLE] = -1, [LIPI_RECORDS_NUL] = '\0'};
    lipi_record_options ro = a.ro;
    ro.invalid = LIPI_INVALID_ERROR;
    ro.field_ids = ro.format == LIPI_RECORDS_JSONL;
    if (!ro.text_field)
        ro.text_field = "ids";
    decode_ctx c = {.tok = t.tok,
                    .s = t.sessions[0],
                    .skip_special = da.skip_special,
                    .jsonl_out = da.jsonl,
                    .columns = ro.format != LIPI_RECORDS_JSONL,
                    .end = ends[ro.format]};
    rc = cli_for_each_record("decode", argv + optind, argc - optind, &ro, decode_record, &c);
    if (rc == EXIT_OK)
        rc = cli_finish_output("decode");
    lipi_free(c.ids);
    lipi_free(c.text);
    cli_tokenizer_close(&t);
    return rc;
}

const cli_command cmd_decode = {"decode", "token ids -> text", run};

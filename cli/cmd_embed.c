/* `lipi embed`: one sentence embedding per input line. */
#include "cli/cli.h"

#include <string.h>

#include "cli/embedder.h"
#include "cli/signals.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi embed -m MODEL [OPTIONS] [-o FILE] [FILE...]\n"
            "\n"
            "Embeds every input line with MODEL, as sentence-transformers does: the\n"
            "model's own tokenizer, its pooling and normalization (from modules.json and\n"
            "1_Pooling/config.json) unless the options say otherwise. Lines longer than\n"
            "the model takes are truncated, and how many were is printed on stderr.\n"
            "Output: a NumPy .npy file of float32 (lines, dimension), row i = line i,\n"
            "written to a temporary file and renamed when complete; or with\n"
            "--format jsonl one {\"embedding\": [...]} per line (standard output\n"
            "without -o).\n"
            "\n"
            "Options:\n"
            "%s%s"
            "  --format npy|jsonl   output format (default npy, which needs -o)\n"
            "  --emit dense|sparse|colbert\n"
            "                       what to write (default dense: the embedding). For a\n"
            "                       bge-m3 folder with sparse_linear.pt / colbert_linear.pt,\n"
            "                       as FlagEmbedding's BGEM3FlagModel gives them: sparse,\n"
            "                       {\"lexical_weights\": {\"ID\": weight, ...}} (each token\n"
            "                       id's largest ReLU weight, special tokens left out);\n"
            "                       colbert, {\"colbert_vecs\": [[...], ...]} (every token\n"
            "                       but the first, L2-normalized). Both need --format jsonl\n"
            "  -o, --output FILE    where to write\n"
            "  -h, --help           show this help\n"
            "\n"
            "Example:\n"
            "  lipi embed -m sentence-transformers/LaBSE -o hi.npy hi.txt\n"
            "  python3 -c 'import numpy; print(numpy.load(\"hi.npy\").shape)'\n"
            "  lipi embed -m intfloat/multilingual-e5-small --prompt 'query: ' \\\n"
            "      --dimensions 256 --format jsonl q.txt\n",
            cli_model_options_help, cli_prompt_options_help);
}

typedef enum { EMIT_DENSE, EMIT_SPARSE, EMIT_COLBERT } emit_kind;

typedef struct {
    bool jsonl;
    emit_kind emit;
} embed_opts;

typedef struct {
    lipi_embedder_session *s;
    emit_kind emit;
    size_t dim;
    float *out;                /* (batch, dim) */
    uint8_t *cut;              /* (batch) truncation flags */
    size_t truncated;          /* lines so far */
    lipi_npy_writer *npy;
    FILE *jsonl;
} embed_ctx;

/* %.9g gives back the same float32 when read again. */
static void write_floats(FILE *f, const float *x, size_t n)
{
    fputc('[', f);
    for (size_t j = 0; j < n; j++)
        fprintf(f, j ? ",%.9g" : "%.9g", (double)x[j]);
    fputc(']', f);
}

/* bge-m3's sparse or colbert output of a batch, as JSONL. */
static lipi_status emit_m3(embed_ctx *c, const char *const *texts, const size_t *lens,
                           size_t n, lipi_error *err)
{
    lipi_lexical lex;
    lipi_multivectors mv;
    lipi_status st = c->emit == EMIT_SPARSE
                         ? lipi_embedder_lexical(c->s, texts, lens, n, &lex, c->cut, err)
                         : lipi_embedder_colbert(c->s, texts, lens, n, &mv, c->cut, err);
    if (st != LIPI_OK)
        return st;
    cli_count_truncated(c->cut, n, &c->truncated);
    for (size_t i = 0; i < n; i++) {
        if (c->emit == EMIT_SPARSE) {
            fputs("{\"lexical_weights\":{", c->jsonl);
            for (size_t k = lex.off[i]; k < lex.off[i + 1]; k++)
                fprintf(c->jsonl, "%s\"%u\":%.9g", k > lex.off[i] ? "," : "",
                        (unsigned)lex.ids[k], (double)lex.weights[k]);
            fputs("}}\n", c->jsonl);
            continue;
        }
        fputs("{\"colbert_vecs\":[", c->jsonl);
        for (size_t r = mv.off[i]; r < mv.off[i + 1]; r++) {
            if (r > mv.off[i])
                fputc(',', c->jsonl);
            write_floats(c->jsonl, mv.vecs + r * mv.dim, mv.dim);
        }
        fputs("]}\n", c->jsonl);
    }
    if (c->emit == EMIT_SPARSE)
        lipi_lexical_free(&lex);
    else
        lipi_multivectors_free(&mv);
    return LIPI_OK;
}

static lipi_status embed_batch(const char *const *texts, const size_t *lens, size_t n,
                               void *vctx, lipi_error *err)
{
    embed_ctx *c = vctx;
    if (c->emit != EMIT_DENSE)
        return emit_m3(c, texts, lens, n, err);
    lipi_status st = lipi_embedder_embed(c->s, texts, lens, n, c->out, c->cut, err);
    if (st != LIPI_OK)
        return st;
    cli_count_truncated(c->cut, n, &c->truncated);
    if (c->npy)
        return lipi_npy_writer_append(c->npy, c->out, n, err);
    for (size_t i = 0; i < n; i++) {
        fputs("{\"embedding\":", c->jsonl);
        write_floats(c->jsonl, c->out + i * c->dim, c->dim);
        fputs("}\n", c->jsonl);
    }
    return LIPI_OK;
}

/* --format and --emit, embed's own options. */
static int embed_option(int id, const char *arg, void *vo)
{
    embed_opts *o = vo;
    if (id == CLI_OPT_EMIT) {
        static const char *const names[] = {"dense", "sparse", "colbert"};
        for (int k = 0; k < 3; k++)
            if (strcmp(arg, names[k]) == 0) {
                o->emit = (emit_kind)k;
                return 0;
            }
        return cli_bad_value("embed", "--emit", "dense, sparse or colbert", arg);
    }
    if (strcmp(arg, "npy") == 0)
        o->jsonl = false;
    else if (strcmp(arg, "jsonl") == 0)
        o->jsonl = true;
    else
        return cli_bad_value("embed", "--format", "npy or jsonl", arg);
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {"emit", required_argument, NULL, CLI_OPT_EMIT},
        {NULL, 0, NULL, 0},
    };
    cli_args a = {.eo = {.batch = 32, .normalize = -1}, .max_threads = 256};
    embed_opts eo = {0};
    const cli_spec spec = {"embed", help, NULL, opts, CLI_ARGS_MODEL | CLI_ARGS_RETRIEVAL | CLI_ARG_OUTPUT,
                           embed_option, &eo, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    const char *out = a.output;
    bool jsonl = eo.jsonl;
    if (!a.model)
        return cli_usage_error("embed", "-m MODEL is required");
    if (eo.emit != EMIT_DENSE && !jsonl)
        return cli_usage_error("embed", "--emit sparse and --emit colbert are written as JSONL "
                                        "only: add --format jsonl");
    if (!jsonl && (!out || strcmp(out, "-") == 0))
        return cli_usage_error("embed", "the .npy output needs -o FILE (or use --format jsonl "
                                        "for standard output)");

    embed_ctx ctx = {0};
    lipi_embedder *e = NULL;
    lipi_output *o = NULL;
    lipi_error err = {0};
    int rc = EXIT_FAIL, slot = -1;
    if (lipi_embedder_open(a.model, &a.eo, &e, &err) != LIPI_OK ||
        lipi_embedder_session_new(e, a.threads, &ctx.s, &err) != LIPI_OK)
        goto report;
    ctx.dim = lipi_embedder_dim(e);
    ctx.emit = eo.emit;
    size_t lines = lipi_embedder_session_texts(ctx.s);
    if (!(ctx.out = lipi_calloc(lines, ctx.dim * sizeof *ctx.out)) ||
        !(ctx.cut = lipi_calloc(lines, sizeof *ctx.cut))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    if (jsonl ? cli_output_open(out, &o, &ctx.jsonl, &slot, &err)
              : cli_npy_writer_open(out, ctx.dim, &ctx.npy, &slot, &err))
        goto report;
    rc = cli_for_each_batch("embed", argv + optind, argc - optind, a.mode, lines, !a.quiet,
                            embed_batch, &ctx);
    if (rc == EXIT_OK) {
        lipi_status st = jsonl ? lipi_output_commit(o, &err) : lipi_npy_writer_close(ctx.npy, &err);
        o = NULL;
        ctx.npy = NULL;
        if (st != LIPI_OK) {
            rc = EXIT_FAIL;
            goto report;
        }
        cli_report_truncated("embed", ctx.truncated, lipi_embedder_max_length(e));
    }
    goto done;
report:
    cli_report("embed", &err);
done:
    lipi_output_abort(o);
    lipi_npy_writer_abort(ctx.npy);
    cli_cleanup_done(slot);
    lipi_free(ctx.out);
    lipi_free(ctx.cut);
    lipi_embedder_session_free(ctx.s);
    lipi_embedder_free(e);
    return rc;
}

const cli_command cmd_embed = {"embed", "sentence embeddings of lines (.npy or JSONL)", run};

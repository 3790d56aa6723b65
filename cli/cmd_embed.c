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

typedef struct {
    lipi_embedder_session *s;
    size_t dim;
    float *out;                /* (batch, dim) */
    uint8_t *cut;              /* (batch) truncation flags */
    size_t truncated;          /* lines so far */
    lipi_npy_writer *npy;
    FILE *jsonl;
} embed_ctx;

static lipi_status embed_batch(const char *const *texts, const size_t *lens, size_t n,
                               void *vctx, lipi_error *err)
{
    embed_ctx *c = vctx;
    lipi_status st = lipi_embedder_embed(c->s, texts, lens, n, c->out, c->cut, err);
    if (st != LIPI_OK)
        return st;
    cli_count_truncated(c->cut, n, &c->truncated);
    if (c->npy)
        return lipi_npy_writer_append(c->npy, c->out, n, err);
    for (size_t i = 0; i < n; i++) {
        fputs("{\"embedding\":[", c->jsonl);
        for (size_t j = 0; j < c->dim; j++)
            /* %.9g gives back the same float32 when read again. */
            fprintf(c->jsonl, j ? ",%.9g" : "%.9g", (double)c->out[i * c->dim + j]);
        fputs("]}\n", c->jsonl);
    }
    return LIPI_OK;
}

/* --format, the one option of embed's own. */
static int embed_option(int id, const char *arg, void *vjsonl)
{
    bool *jsonl = vjsonl;
    (void)id;
    if (strcmp(arg, "npy") == 0)
        *jsonl = false;
    else if (strcmp(arg, "jsonl") == 0)
        *jsonl = true;
    else
        return cli_bad_value("embed", "--format", "npy or jsonl", arg);
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {NULL, 0, NULL, 0},
    };
    cli_args a = {.eo = {.batch = 32, .normalize = -1}, .max_threads = 256};
    bool jsonl = false;
    const cli_spec spec = {"embed", help, NULL, opts, CLI_ARGS_MODEL | CLI_ARGS_RETRIEVAL | CLI_ARG_OUTPUT,
                           embed_option, &jsonl, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    const char *out = a.output;
    if (!a.model)
        return cli_usage_error("embed", "-m MODEL is required");
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
    if (!(ctx.out = lipi_calloc(a.eo.batch, ctx.dim * sizeof *ctx.out)) ||
        !(ctx.cut = lipi_calloc(a.eo.batch, sizeof *ctx.cut))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    if (jsonl ? cli_output_open(out, &o, &ctx.jsonl, &slot, &err)
              : cli_npy_writer_open(out, ctx.dim, &ctx.npy, &slot, &err))
        goto report;
    rc = cli_for_each_batch("embed", argv + optind, argc - optind, a.mode, a.eo.batch, !a.quiet,
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

/* `lipi index`: builds (or extends) a retrieval index from text lines and
 * their embeddings. */
#include "cli/cli.h"
#include "cli/options.h"

#include <string.h>

#include "cli/embedder.h"
#include "cli/retrieval.h"
#include "cli/signals.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi index -m MODEL -o INDEX_DIR [OPTIONS] FILE...\n"
            "       lipi index --vectors FILE.npy -o INDEX_DIR [OPTIONS] FILE...\n"
            "\n"
            "Embeds every input line with MODEL (or takes row i of FILE.npy for line i)\n"
            "and writes an index directory: the L2-normalized float32 vectors as\n"
            "vectors.npy, the lines (texts + offsets.npy) and meta.json (model,\n"
            "pooling, dimension, count, the prompt and --dimensions, which search\n"
            "then uses). The index is written next to INDEX_DIR and\n"
            "swapped in at the end: an interrupted run leaves the old index as it was\n"
            "(and a stale INDEX_DIR.tmp-XXXXXX directory, which the next run removes).\n"
            "Document numbers in search results are line numbers of the input, counted\n"
            "across the FILEs in order (and after the old documents with --append).\n"
            "\n"
            "Options:\n"
            "  -m, --model MODEL    a Hugging Face model folder (config.json, safetensors\n"
            "                       weights, its tokenizer)\n"
            "  --vectors FILE.npy   precomputed embeddings (float32, one row per line)\n"
            "  -o, --output DIR     the index directory\n"
            "  --append             add to the index at DIR (made by the same model)\n"
            "  --faiss SPEC         also build a FAISS index (index_factory string: Flat,\n"
            "                       IVF1024,Flat, HNSW32, ...) that search then uses;\n"
            "                       --append extends the index's FAISS index\n"
            "  --quantize Q         also store int8 codes (ranges calibrated per dimension\n"
            "                       on the indexed vectors) or binary codes (a bit per\n"
            "                       dimension), which search scans before rescoring with\n"
            "                       the float32 vectors (int8 or binary; not with\n"
            "                       --faiss); --append keeps the index's and recalibrates\n"
            "  --binary-threshold T binary codes: bit = value > T of its dimension, T the\n"
            "                       mean of the indexed vectors (mean, default) or 0\n"
            "                       (zero: sentence-transformers' ubinary codes, which\n"
            "                       FAISS IndexBinaryFlat and other tools read as they\n"
            "                       are); --append keeps the index's\n"
            "  --pooling MODE       cls, mean, max or mean_sqrt_len (default: the model's)\n"
            "  --batch N            sentences per batch (default 32); vectors depend on it,\n"
            "                       not on --threads\n"
            "  --max-length N       truncate longer inputs to N tokens\n"
            "%s"
            "  --threads N          threads (default 2)\n"
            "  --invalid MODE       invalid UTF-8: error (default) or replace\n"
            "  --quiet              no progress bar\n"
            "  -h, --help           show this help\n"
            "\n"
            "Example:\n"
            "  lipi index -m sentence-transformers/LaBSE -o wiki.idx wiki-hi.txt\n"
            "  lipi search --index wiki.idx --query 'भारत की राजधानी'\n",
            cli_prompt_options_help);
}

typedef struct {
    lipi_index_builder *builder;
    lipi_embedder *emb;       /* NULL with --vectors */
    lipi_embedder_session *s;
    lipi_npy_map *vectors;   /* --vectors */
    const char *vectors_path;
    size_t dim, row, batch;
    cli_text_batch texts;
    float *out;              /* (batch, dim) embeddings */
    cli_lines_progress progress;
} index_ctx;

/* Embeds (or looks up) the batched lines and adds them to the index. */
static lipi_status flush(index_ctx *c, lipi_error *err)
{
    size_t n = c->texts.n;
    if (!n)
        return LIPI_OK;
    const float *rows;
    lipi_status st;
    if (c->vectors) {
        if (c->row + n > lipi_npy_map_rows(c->vectors))
            return lipi_error_set(err, LIPI_EINVAL, c->vectors_path, 0, 0,
                                  "expected a row for every input line, found %zu %s for "
                                  "more lines",
                                  lipi_npy_map_rows(c->vectors),
                                  lipi_plural(lipi_npy_map_rows(c->vectors), "row", "rows"));
        rows = lipi_npy_map_data(c->vectors) + c->row * c->dim;
    } else {
        st = lipi_embedder_embed(c->s, c->texts.ptrs, c->texts.lens, n, c->out, NULL, err);
        if (st != LIPI_OK)
            return st;
        rows = c->out;
    }
    st = lipi_index_builder_add(c->builder, rows, n, c->texts.ptrs, c->texts.lens, err);
    if (st != LIPI_OK)
        return st;
    c->row += n;
    cli_lines_progress_add(&c->progress, n);
    cli_text_batch_clear(&c->texts);
    return LIPI_OK;
}

static lipi_status add_line(const char *line, size_t len, void *vctx, lipi_error *err)
{
    index_ctx *c = vctx;
    lipi_status st = cli_text_batch_add(&c->texts, line, len, err);
    if (st == LIPI_OK && c->texts.n == c->batch)
        st = flush(c, err);
    return st;
}

typedef struct {
    const char *vectors, *pooling;
    lipi_index_write_options *wo;
} index_args;

static int index_option(int id, const char *arg, void *via)
{
    index_args *ia = via;
    switch (id) {
    case CLI_OPT_VECTORS: ia->vectors = arg; break;
    case CLI_OPT_APPEND: ia->wo->append = true; break;
    case CLI_OPT_FAISS: ia->wo->faiss_spec = arg; break;
    case CLI_OPT_QUANTIZE:
        if (!lipi_quantization_parse(arg, &ia->wo->quantize) ||
            ia->wo->quantize == LIPI_QUANT_NONE)
            return cli_bad_value("index", "--quantize", "int8 or binary", arg);
        break;
    case CLI_OPT_BINARY_THRESHOLD:
        if (!lipi_binary_threshold_parse(arg, &ia->wo->binary_threshold))
            return cli_bad_value("index", "--binary-threshold", "mean or zero", arg);
        break;
    /* checked after the others: with --vectors any --pooling is an error */
    case CLI_OPT_POOLING: ia->pooling = arg; break;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"vectors", required_argument, NULL, CLI_OPT_VECTORS},
        {"append", no_argument, NULL, CLI_OPT_APPEND},
        {"faiss", required_argument, NULL, CLI_OPT_FAISS},
        {"quantize", required_argument, NULL, CLI_OPT_QUANTIZE},
        {"binary-threshold", required_argument, NULL, CLI_OPT_BINARY_THRESHOLD},
        {"pooling", required_argument, NULL, CLI_OPT_POOLING},
        {NULL, 0, NULL, 0},
    };
    lipi_index_write_options wo = {0};
    index_args ia = {.wo = &wo};
    cli_args a = {.mode = LIPI_INVALID_ERROR, .threads = 2, .max_threads = 256,
                  .eo = {.batch = 32}};
    const cli_spec spec = {"index", help, NULL, opts,
                           CLI_ARG_MODEL | CLI_ARG_OUTPUT | CLI_ARG_BATCH | CLI_ARG_MAX_LENGTH |
                               CLI_ARG_THREADS | CLI_ARG_INVALID | CLI_ARG_QUIET |
                               CLI_ARGS_RETRIEVAL,
                           index_option, &ia, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    const char *model = a.model, *vectors = ia.vectors, *out = a.output, *pooling = ia.pooling;
    lipi_embedder_options eo = a.eo;
    lipi_invalid_mode mode = a.mode;
    bool quiet = a.quiet;
    wo.threads = a.threads;
    if (!out)
        return cli_usage_error("index", "give the index directory with -o DIR");
    if (!model == !vectors)
        return cli_usage_error("index", "give either -m MODEL or --vectors FILE.npy");
    if (vectors && pooling)
        return cli_usage_error("index", "--pooling needs -m MODEL");
    if (vectors && (eo.prompt || eo.prompt_name || eo.dimensions))
        return cli_usage_error("index", "--prompt, --prompt-name and --dimensions need -m MODEL");
    if (wo.faiss_spec && wo.quantize != LIPI_QUANT_NONE)
        return cli_usage_error("index", "give either --faiss or --quantize, not both");
    if (wo.binary_threshold && wo.quantize != LIPI_QUANT_BINARY && !wo.append)
        return cli_usage_error("index", "--binary-threshold goes with --quantize binary");
    if (pooling && !lipi_pooling_parse(pooling, &eo.pooling))
        return cli_bad_value("index", "--pooling", "cls, mean, max or mean_sqrt_len", pooling);

    int rc = EXIT_FAIL, slot = -1;
    lipi_error err = {0};
    index_ctx ctx = {.vectors_path = vectors, .batch = eo.batch};
    lipi_index_model id = {.lipi_version = lipi_version()};
    char fingerprint[17];
    if (vectors) {
        if (lipi_npy_map_open(vectors, &ctx.vectors, &err) != LIPI_OK)
            goto fail;
        ctx.dim = lipi_npy_map_cols(ctx.vectors);
        ctx.batch = 4096;
    } else {
        if (lipi_embedder_open(model, &eo, &ctx.emb, &err) != LIPI_OK ||
            lipi_embedder_session_new(ctx.emb, wo.threads, &ctx.s, &err) != LIPI_OK ||
            lipi_embedder_identity(ctx.emb, &id, fingerprint, &err) != LIPI_OK)
            goto fail;
        ctx.dim = lipi_embedder_dim(ctx.emb);
        if (!(ctx.out = lipi_reallocarray(NULL, ctx.batch * ctx.dim, sizeof(float)))) {
            lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto fail;
        }
    }
    cli_signals_hold();
    lipi_status st = lipi_index_builder_new(out, &id, ctx.dim, &wo, &ctx.builder, &err);
    if (st == LIPI_OK)
        slot = cli_cleanup_add(lipi_index_builder_get_temp_dir(ctx.builder), true);
    cli_signals_release();
    if (st != LIPI_OK)
        goto fail;
    cli_lines_progress_start(&ctx.progress, "index", !quiet && ctx.emb, argv + optind, argc - optind);
    if (cli_for_each_line("index", argv + optind, argc - optind, mode, add_line, &ctx) != EXIT_OK)
        goto quiet_fail;
    if (flush(&ctx, &err) != LIPI_OK)
        goto fail;
    if (ctx.vectors && ctx.row != lipi_npy_map_rows(ctx.vectors)) {
        lipi_error_set(&err, LIPI_EINVAL, vectors, 0, 0,
                       "expected a row for every input line, found %zu %s for %zu %s",
                       lipi_npy_map_rows(ctx.vectors),
                       lipi_plural(lipi_npy_map_rows(ctx.vectors), "row", "rows"), ctx.row,
                       lipi_plural(ctx.row, "line", "lines"));
        goto fail;
    }
    cli_lines_progress_done(&ctx.progress);
    if (wo.faiss_spec && !quiet)
        fprintf(stderr, "lipi index: building the FAISS index (%s) ...\n", wo.faiss_spec);
    size_t total = lipi_index_builder_count(ctx.builder);
    st = lipi_index_builder_commit(ctx.builder, &err);
    ctx.builder = NULL;
    if (st != LIPI_OK)
        goto fail;
    if (!quiet)
        fprintf(stderr, "lipi index: %s: %zu %s (%zu added), dimension %zu%s%s\n", out, total,
                lipi_plural(total, "document", "documents"), ctx.row, ctx.dim,
                wo.quantize ? ", quantized " : "",
                wo.quantize ? lipi_quantization_name(wo.quantize) : "");
    rc = EXIT_OK;
    goto done;
fail:
    cli_report("index", &err);
quiet_fail:
    cli_lines_progress_done(&ctx.progress);
done:
    lipi_index_builder_abort(ctx.builder);
    cli_cleanup_done(slot);
    lipi_npy_map_close(ctx.vectors);
    lipi_embedder_session_free(ctx.s);
    lipi_embedder_free(ctx.emb);
    cli_text_batch_free(&ctx.texts);
    lipi_free(ctx.out);
    return rc;
}

const cli_command cmd_index = {"index", "build a retrieval index of sentence embeddings", run};

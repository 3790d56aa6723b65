/* `lipi classify`: a *ForSequenceClassification checkpoint's label for each
 * input line. */
#include "cli/cli.h"

#include <getopt.h>
#include <string.h>

#include "cli/embedder.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi classify -m MODEL [--pairs] [OPTIONS] [FILE...]\n"
            "\n"
            "Runs a fine-tuned *ForSequenceClassification checkpoint (BERT, RoBERTa,\n"
            "XLM-R, ALBERT, DistilBERT, MPNet: pooler and classifier head) on every input\n"
            "line and prints one JSON object per line: the most probable label, its\n"
            "probability, and the probability of every label (names from the config's\n"
            "id2label; softmax, or sigmoid for multi-label problems):\n"
            "  {\"label\":\"positive\",\"score\":0.91,\"probs\":{\"negative\":0.02,...}}\n"
            "A head with one label (a cross-encoder) gives sigmoid(logit), as Hugging\n"
            "Face's pipeline and sentence-transformers' CrossEncoder do.\n"
            "\n"
            "Options:\n"
            "  --pairs              every line is a pair TEXT_A<TAB>TEXT_B (split at the\n"
            "                       first tab), encoded with the tokenizer's pair template\n"
            "                       ([CLS] a [SEP] b [SEP], <s> a </s></s> b </s>) and its\n"
            "                       token type ids, as NLI models and cross-encoders read\n"
            "                       them; a longer pair loses tokens from its longer text\n"
            "                       first. A line without a tab is an error\n"
            "%s"
            "  -o, --output FILE    write there (atomically) instead of standard output\n"
            "  -h, --help           show this help\n",
            cli_model_options_help);
}

/* Writes one JSONL record: the best label, its score and every label's
 * probability. Shared with `lipi probe predict`. */
void cli_write_label_probs(FILE *f, const char *const *labels, size_t k, const float *probs)
{
    size_t best = 0;
    for (size_t j = 1; j < k; j++)
        if (probs[j] > probs[best])
            best = j;
    fputs("{\"label\":", f);
    cli_write_json_string(f, labels[best], strlen(labels[best]));
    fprintf(f, ",\"score\":%.6g,\"probs\":{", (double)probs[best]);
    for (size_t j = 0; j < k; j++) {
        if (j)
            putc(',', f);
        cli_write_json_string(f, labels[j], strlen(labels[j]));
        fprintf(f, ":%.6g", (double)probs[j]);
    }
    fputs("}}\n", f);
}

typedef struct {
    lipi_embedder_session *s;
    bool pairs;              /* --pairs */
    const char **a, **b;     /* (lines) the halves of the pairs */
    size_t *alens, *blens;   /* (lines) */
    const char **labels;
    size_t k;
    float *probs;   /* (lines, k) */
    uint8_t *cut;   /* (lines) truncation flags */
    size_t truncated;
    FILE *f;
} classify_ctx;

static lipi_status classify_batch(const char *const *texts, const size_t *lens, size_t n,
                                  void *vctx, lipi_error *err)
{
    classify_ctx *c = vctx;
    lipi_status st;
    if (c->pairs) {
        st = cli_split_pairs(texts, lens, n, c->a, c->alens, c->b, c->blens, err);
        if (st == LIPI_OK)
            st = lipi_embedder_classify_pairs(c->s, c->a, c->alens, c->b, c->blens, n, c->probs,
                                              c->cut, err);
    } else {
        st = lipi_embedder_classify(c->s, texts, lens, n, c->probs, c->cut, err);
    }
    if (st == LIPI_OK)
        cli_count_truncated(c->cut, n, &c->truncated);
    for (size_t i = 0; st == LIPI_OK && i < n; i++)
        cli_write_label_probs(c->f, c->labels, c->k, c->probs + i * c->k);
    return st;
}

static int own(int id, const char *arg, void *vctx)
{
    (void)arg;
    classify_ctx *c = vctx;
    if (id == CLI_OPT_PAIRS)
        c->pairs = true;
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {{"pairs", no_argument, NULL, CLI_OPT_PAIRS},
                                         {NULL, 0, NULL, 0}};
    classify_ctx ctx = {0};
    cli_args a = {.eo = {.batch = 32, .normalize = -1}, .max_threads = 256};
    const cli_spec spec = {"classify", help, NULL, opts, CLI_ARGS_MODEL | CLI_ARG_OUTPUT,
                           own, &ctx, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    const char *out = a.output;
    if (!a.model)
        return cli_usage_error("classify", "-m MODEL is required");

    lipi_embedder *e = NULL;
    lipi_error err = {0};
    int rc = EXIT_FAIL;
    if (lipi_embedder_open(a.model, &a.eo, &e, &err) != LIPI_OK)
        goto report;
    ctx.k = lipi_embedder_label_count(e);
    if (!ctx.k) {
        lipi_error_set(&err, LIPI_EINVAL, a.model, 0, 0,
                       "expected a *ForSequenceClassification checkpoint (a classifier head), "
                       "found a model without one; 'lipi probe train' makes a head from "
                       "labelled lines");
        goto report;
    }
    if (lipi_embedder_session_new(e, a.threads, &ctx.s, &err) != LIPI_OK)
        goto report;
    size_t lines = lipi_embedder_session_texts(ctx.s);
    if (!(ctx.probs = lipi_calloc(lines, ctx.k * sizeof *ctx.probs)) ||
        !(ctx.cut = lipi_calloc(lines, sizeof *ctx.cut)) ||
        !(ctx.labels = lipi_calloc(ctx.k, sizeof *ctx.labels)) ||
        !(ctx.a = lipi_calloc(lines, sizeof *ctx.a)) ||
        !(ctx.b = lipi_calloc(lines, sizeof *ctx.b)) ||
        !(ctx.alens = lipi_calloc(lines, sizeof *ctx.alens)) ||
        !(ctx.blens = lipi_calloc(lines, sizeof *ctx.blens))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    for (size_t j = 0; j < ctx.k; j++)
        ctx.labels[j] = lipi_embedder_label(e, j);
    rc = cli_write_batches("classify", argv + optind, argc - optind, &a, lines, out,
                           classify_batch, &ctx, &ctx.f);
    if (rc == EXIT_OK)
        cli_report_truncated("classify", ctx.truncated, lipi_embedder_max_length(e));
    goto done;
report:
    cli_report("classify", &err);
done:
    lipi_free(ctx.probs);
    lipi_free(ctx.cut);
    lipi_free(ctx.labels);
    lipi_free(ctx.a);
    lipi_free(ctx.b);
    lipi_free(ctx.alens);
    lipi_free(ctx.blens);
    lipi_embedder_session_free(ctx.s);
    lipi_embedder_free(e);
    return rc;
}

const cli_command cmd_classify = {"classify", "labels of lines with a fine-tuned classifier",
                                  run};

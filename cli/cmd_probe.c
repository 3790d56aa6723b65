/* `lipi probe train|predict`: a logistic-regression head on a model's
 * frozen sentence embeddings, for labelled lines without a fine-tuned
 * checkpoint. */
#include "cli/cli.h"
#include "cli/signals.h"

#include <stdlib.h>
#include <string.h>

#include "cli/embedder.h"
#include "cli/retrieval.h"

#define HOLDOUT_SEED 42u

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi probe train -m MODEL --train labels.tsv [--dev dev.tsv | --holdout F]\n"
            "                        [--l2 X] [--iterations N] -o probe.json [OPTIONS]\n"
            "       lipi probe predict --probe probe.json [-m MODEL] [OPTIONS] [FILE...]\n"
            "\n"
            "train: embeds the text of every 'LABEL<TAB>TEXT' line with MODEL (pooling\n"
            "and normalization as 'lipi embed' does), fits a multinomial logistic\n"
            "regression on them (L2-regularized cross-entropy, L-BFGS over the whole set\n"
            "from zero weights: the same data gives the same probe), and prints the\n"
            "accuracy on held-out lines on stderr: dev.tsv's, or a share F of the\n"
            "training lines (default 0.1) drawn with a fixed seed and left out of\n"
            "training. probe.json records the model's fingerprint, pooling,\n"
            "normalization, the labels (sorted) and the weights.\n"
            "\n"
            "predict: prints one JSON object per input line, as 'lipi classify' does:\n"
            "  {\"label\":\"sports\",\"score\":0.97,\"probs\":{\"politics\":0.03,...}}\n"
            "The model must be the one the probe was trained on (by default the name\n"
            "recorded in probe.json).\n"
            "\n"
            "Options:\n"
            "%s"
            "  --train FILE         labelled lines: LABEL<TAB>TEXT\n"
            "  --dev FILE           held-out labelled lines\n"
            "  --holdout F          share of --train held out when there is no --dev\n"
            "                       (0: none; then the training accuracy is shown)\n"
            "  --l2 X               L2 strength (default 0.0001)\n"
            "  --iterations N       L-BFGS iterations at most (default 500)\n"
            "  --probe FILE         the probe.json to predict with\n"
            "  -o, --output FILE    train: the probe.json; predict: where to write\n"
            "  -h, --help           show this help\n",
            cli_model_options_help);
}

/* ------------------------------------------------------------------------ */
/* Labelled lines                                                            */
/* ------------------------------------------------------------------------ */

typedef struct {
    cli_text_batch texts, labels;
    size_t *line_no;
    const char *path;
} labelled;

static void labelled_free(labelled *d)
{
    cli_text_batch_free(&d->texts);
    cli_text_batch_free(&d->labels);
    lipi_free(d->line_no);
}

static lipi_status read_labelled(const char *path, lipi_invalid_mode mode, labelled *d,
                                 lipi_error *err)
{
    d->path = path;
    lipi_line_reader *r = NULL;
    lipi_status st = lipi_line_reader_open(path, mode, &r, err);
    size_t cap = 0;
    while (st == LIPI_OK) {
        const char *line;
        size_t len;
        st = lipi_line_reader_next(r, &line, &len, err);
        if (st != LIPI_OK || !line)
            break;
        size_t ln = lipi_line_reader_line_no(r);
        if (len == 0)
            continue;
        const char *tab = memchr(line, '\t', len);
        if (!tab || tab == line) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, ln, 0,
                                "expected LABEL<TAB>TEXT, found %s",
                                tab ? "an empty label" : "no tab");
            break;
        }
        if (d->texts.n == cap) {
            size_t c = cap ? 2 * cap : 256;
            size_t *l = lipi_reallocarray(d->line_no, c, sizeof *l);
            if (!l) {
                st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                break;
            }
            d->line_no = l;
            cap = c;
        }
        d->line_no[d->texts.n] = ln;
        st = cli_text_batch_add(&d->labels, line, (size_t)(tab - line), err);
        if (st == LIPI_OK)
            st = cli_text_batch_add(&d->texts, tab + 1, len - (size_t)(tab - line) - 1, err);
    }
    lipi_line_reader_close(r);
    if (st == LIPI_OK && d->texts.n == 0)
        st = lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "expected labelled lines, found none");
    return st;
}

/* Embeds every text of d into x (n, dim), reporting errors at their line. */
static lipi_status embed_all(const lipi_embedder *e, lipi_embedder_session *s,
                             const labelled *d, float *x, bool progress, lipi_error *err)
{
    cli_lines_progress prog;
    char *files[] = {(char *)d->path};
    cli_lines_progress_start(&prog, "probe", progress, files, 1);
    size_t dim = lipi_embedder_dim(e), n = d->texts.n, chunk = 1024;
    lipi_status st = LIPI_OK;
    for (size_t i0 = 0; i0 < n && st == LIPI_OK; i0 += chunk) {
        size_t m = n - i0 < chunk ? n - i0 : chunk;
        st = lipi_embedder_embed(s, d->texts.ptrs + i0, d->texts.lens + i0, m, x + i0 * dim,
                                 NULL, err);
        if (st != LIPI_OK && err->line >= 1 && err->line <= m) {
            snprintf(err->path, sizeof err->path, "%s", d->path);
            err->line = d->line_no[i0 + err->line - 1];
        }
        cli_lines_progress_add(&prog, m);
    }
    cli_lines_progress_done(&prog);
    return st;
}

/* ------------------------------------------------------------------------ */
/* train                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct {
    cli_args a;                /* a.output: train's probe.json, predict's output */
    const char *train, *dev, *probe;
    double holdout, l2;
    size_t iterations;
} probe_args;

/* The rows of d for the library, errors pointing at d's file and lines. */
static lipi_labelled_vectors rows_of(const labelled *d, const float *x)
{
    return (lipi_labelled_vectors){x, d->labels.ptrs, d->texts.n, d->path, d->line_no};
}

static int train(probe_args *pa)
{
    labelled tr = {0}, dv = {0};
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_probe *p = NULL;
    lipi_error err = {0};
    float *x = NULL, *xd = NULL;
    int rc = EXIT_FAIL;
    lipi_status st;

    /* Fail on an unwritable output or bad labels before any long work. */
    lipi_probe_fit_options fo = {.train = {.l2 = pa->l2, .max_iterations = pa->iterations},
                                 .holdout = pa->holdout, .seed = HOLDOUT_SEED};
    if ((st = lipi_check_writable(pa->a.output, &err)) != LIPI_OK ||
        (st = read_labelled(pa->train, pa->a.mode, &tr, &err)) != LIPI_OK ||
        (pa->dev && (st = read_labelled(pa->dev, pa->a.mode, &dv, &err)) != LIPI_OK))
        goto report;
    lipi_labelled_vectors trv = rows_of(&tr, NULL), dvv = rows_of(&dv, NULL);
    if ((st = lipi_probe_fit_check(&trv, pa->dev ? &dvv : NULL, &fo, &err)) != LIPI_OK)
        goto report;

    /* The fingerprint of the folder as it is when the vectors are made. */
    lipi_index_model id;
    char fingerprint[17];
    if ((st = lipi_embedder_open(pa->a.model, &pa->a.eo, &e, &err)) != LIPI_OK ||
        (st = lipi_embedder_session_new(e, pa->a.threads, &s, &err)) != LIPI_OK ||
        (st = lipi_embedder_identity(e, &id, fingerprint, &err)) != LIPI_OK)
        goto report;
    size_t dim = lipi_embedder_dim(e);
    if (!(x = lipi_calloc(tr.texts.n, dim * sizeof *x)) ||
        (pa->dev && !(xd = lipi_calloc(dv.texts.n, dim * sizeof *xd)))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    if ((st = embed_all(e, s, &tr, x, !pa->a.quiet, &err)) != LIPI_OK ||
        (pa->dev && (st = embed_all(e, s, &dv, xd, !pa->a.quiet, &err)) != LIPI_OK))
        goto report;
    trv.x = x;
    dvv.x = xd;
    lipi_probe_fit_report fr;
    if ((st = lipi_probe_fit(&trv, pa->dev ? &dvv : NULL, dim, &fo, &p, &fr, &err)) != LIPI_OK)
        goto report;

    size_t n = tr.texts.n, nd = fr.n_held, nt = fr.n_train, k = fr.k;
    double acc = fr.accuracy;
    if (fr.scored_on == LIPI_PROBE_SCORED_ON_DEV)
        fprintf(stderr, "lipi probe: held-out accuracy %.4f (%zu %s of %s; %zu training "
                        "%s, %zu %s)\n",
                acc, nd, lipi_plural(nd, "line", "lines"), pa->dev, nt,
                lipi_plural(nt, "line", "lines"), k, lipi_plural(k, "label", "labels"));
    else if (fr.scored_on == LIPI_PROBE_SCORED_ON_HELD_OUT)
        fprintf(stderr, "lipi probe: held-out accuracy %.4f (%zu of %zu %s held out, seed "
                        "%u; %zu %s)\n",
                acc, nd, n, lipi_plural(n, "line", "lines"), HOLDOUT_SEED, k,
                lipi_plural(k, "label", "labels"));
    else
        fprintf(stderr, "lipi probe: training accuracy %.4f (%zu %s, nothing held out; "
                        "%zu %s)\n",
                acc, nt, lipi_plural(nt, "line", "lines"), k, lipi_plural(k, "label", "labels"));
    id.normalize = lipi_embedder_normalizes(e);
    cli_signals_hold(); /* see cli/signals.h */
    st = lipi_probe_save(p, &id, fr.scored_on != LIPI_PROBE_SCORED_ON_TRAINING ? acc : -1.0,
                         pa->a.output, &err);
    cli_signals_release();
    if (st != LIPI_OK)
        goto report;
    rc = EXIT_OK;
    goto done;
report:
    cli_report("probe", &err);
done:
    labelled_free(&tr);
    labelled_free(&dv);
    lipi_embedder_session_free(s);
    lipi_embedder_free(e);
    lipi_probe_free(p);
    lipi_free(x);
    lipi_free(xd);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* predict                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    lipi_embedder *e;
    lipi_embedder_session *s;
    const lipi_probe *p;
    const char **labels;
    float *x, *probs;
    uint8_t *cut;      /* (batch) truncation flags */
    size_t truncated;
    FILE *f;
} predict_ctx;

static lipi_status predict_batch(const char *const *texts, const size_t *lens, size_t n,
                                 void *vctx, lipi_error *err)
{
    predict_ctx *c = vctx;
    lipi_status st = lipi_embedder_embed(c->s, texts, lens, n, c->x, c->cut, err);
    if (st != LIPI_OK)
        return st;
    cli_count_truncated(c->cut, n, &c->truncated);
    size_t k = lipi_probe_label_count(c->p), dim = lipi_probe_dim(c->p);
    for (size_t i = 0; i < n; i++) {
        lipi_probe_predict(c->p, c->x + i * dim, 1, c->probs);
        cli_write_label_probs(c->f, c->labels, k, c->probs);
    }
    return LIPI_OK;
}

static int predict(probe_args *pa, char **files, int nfiles)
{
    predict_ctx ctx = {0};
    lipi_probe *p = NULL;
    lipi_error err = {0};
    int rc = EXIT_FAIL;
    if (lipi_probe_load(pa->probe, &p, &err) != LIPI_OK)
        goto report;
    ctx.p = p;
    const lipi_index_model *pm = lipi_probe_model(p);
    const char *model = pa->a.model ? pa->a.model : pm->name;
    if (!model) {
        lipi_error_set(&err, LIPI_EINVAL, pa->probe, 0, 0,
                       "the probe names no model: give -m MODEL");
        goto report;
    }
    /* Embed exactly as in training. */
    if (pm->pooling && !lipi_pooling_parse(pm->pooling, &pa->a.eo.pooling)) {
        lipi_error_set(&err, LIPI_EFORMAT, pa->probe, 0, 0,
                       "model.pooling: expected cls, mean, max or mean_sqrt_len, found '%s'",
                       pm->pooling);
        goto report;
    }
    pa->a.eo.normalize = pm->normalize ? 1 : -2;
    if (lipi_embedder_open(model, &pa->a.eo, &ctx.e, &err) != LIPI_OK ||
        lipi_embedder_session_new(ctx.e, pa->a.threads, &ctx.s, &err) != LIPI_OK)
        goto report;
    lipi_index_model id;
    char fingerprint[17];
    if (lipi_embedder_identity(ctx.e, &id, fingerprint, &err) != LIPI_OK)
        goto report;
    if (pm->fingerprint && strcmp(pm->fingerprint, id.fingerprint) != 0) {
        lipi_error_set(&err, LIPI_EINVAL, pa->probe, 0, 0,
                       "the probe was trained on model %s (fingerprint %s), not on %s "
                       "(fingerprint %s)",
                       pm->name ? pm->name : "?", pm->fingerprint, model, id.fingerprint);
        goto report;
    }
    size_t dim = lipi_probe_dim(p), k = lipi_probe_label_count(p);
    if (lipi_embedder_dim(ctx.e) != dim) {
        lipi_error_set(&err, LIPI_EINVAL, pa->probe, 0, 0,
                       "expected embeddings of %zu values, the model gives %zu", dim,
                       lipi_embedder_dim(ctx.e));
        goto report;
    }
    size_t lines = lipi_embedder_session_texts(ctx.s);
    if (!(ctx.labels = lipi_calloc(k, sizeof *ctx.labels)) ||
        !(ctx.x = lipi_calloc(lines, dim * sizeof *ctx.x)) ||
        !(ctx.probs = lipi_calloc(k, sizeof *ctx.probs)) ||
        !(ctx.cut = lipi_calloc(lines, sizeof *ctx.cut))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    for (size_t c = 0; c < k; c++)
        ctx.labels[c] = lipi_probe_label(p, c);
    rc = cli_write_batches("probe", files, nfiles, &pa->a, lines, pa->a.output, predict_batch, &ctx,
                           &ctx.f);
    if (rc == EXIT_OK)
        cli_report_truncated("probe", ctx.truncated, lipi_embedder_max_length(ctx.e));
    goto done;
report:
    cli_report("probe", &err);
done:
    lipi_embedder_session_free(ctx.s);
    lipi_embedder_free(ctx.e);
    lipi_free(ctx.cut);
    lipi_probe_free(p);
    lipi_free(ctx.labels);
    lipi_free(ctx.x);
    lipi_free(ctx.probs);
    return rc;
}

static int probe_option(int id, const char *arg, void *vpa)
{
    probe_args *pa = vpa;
    uint64_t v;
    switch (id) {
    case CLI_OPT_TRAIN: pa->train = arg; break;
    case CLI_OPT_DEV: pa->dev = arg; break;
    case CLI_OPT_HOLDOUT:
        if (!cli_parse_double(arg, 0, 0.9, &pa->holdout))
            return cli_bad_value("probe", "--holdout", "0..0.9", arg);
        break;
    case CLI_OPT_L2:
        if (!cli_parse_double(arg, 0, 1e6, &pa->l2))
            return cli_bad_value("probe", "--l2", "a number >= 0", arg);
        if (pa->l2 == 0)
            pa->l2 = -1; /* the library's "no penalty" */
        break;
    case CLI_OPT_ITERATIONS:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 100000)
            return cli_bad_value("probe", "--iterations", "1..100000", arg);
        pa->iterations = (size_t)v;
        break;
    case CLI_OPT_PROBE: pa->probe = arg; break;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"train", required_argument, NULL, CLI_OPT_TRAIN},
        {"dev", required_argument, NULL, CLI_OPT_DEV},
        {"holdout", required_argument, NULL, CLI_OPT_HOLDOUT},
        {"l2", required_argument, NULL, CLI_OPT_L2},
        {"iterations", required_argument, NULL, CLI_OPT_ITERATIONS},
        {"probe", required_argument, NULL, CLI_OPT_PROBE},
        {NULL, 0, NULL, 0},
    };
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        help(stdout);
        return EXIT_OK;
    }
    if (argc < 2 || (strcmp(argv[1], "train") != 0 && strcmp(argv[1], "predict") != 0))
        return cli_usage_error("probe", "expected 'train' or 'predict'");
    bool training = strcmp(argv[1], "train") == 0;
    probe_args pa = {.a = {.eo = {.batch = 32, .normalize = -1}, .max_threads = 256},
                     .holdout = 0.1};
    const cli_spec spec = {"probe", help, NULL, opts, CLI_ARGS_MODEL | CLI_ARG_OUTPUT,
                           probe_option, &pa, 2};
    int c = cli_parse(&spec, argc, argv, &pa.a);
    if (c != CLI_GO_ON)
        return c;
    if (training) {
        if (!pa.a.model || !pa.train || !pa.a.output)
            return cli_usage_error("probe", "train needs -m MODEL, --train FILE and -o FILE");
        if (optind < argc)
            return cli_usage_error("probe", "train takes no FILE arguments ('%s')",
                                   argv[optind]);
        return train(&pa);
    }
    if (!pa.probe)
        return cli_usage_error("probe", "predict needs --probe FILE");
    return predict(&pa, argv + optind, argc - optind);
}

const cli_command cmd_probe = {"probe", "train / apply a logistic-regression head on embeddings",
                               run};

/* Shared pieces of the retrieval commands (cli/retrieval.h). */
#include "cli/retrieval.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "encoder/encoder.h"

/* One propagation macro, as in the library. */
#define TRY(expr)                                                                  \
    do {                                                                           \
        st = (expr);                                                               \
        if (st != LIPI_OK)                                                         \
            goto done;                                                             \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Line batches                                                              */
/* ------------------------------------------------------------------------ */

static lipi_status grow(void **p, size_t *cap, size_t need, size_t size, lipi_error *err)
{
    if (need <= *cap)
        return LIPI_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = lipi_reallocarray(*p, c, size);
    if (!q)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    *p = q;
    *cap = c;
    return LIPI_OK;
}

lipi_status cli_text_batch_add(cli_text_batch *b, const char *line, size_t len, lipi_error *err)
{
    char *old = b->buf;
    lipi_status st = grow((void **)&b->buf, &b->cap, b->len + len + 1, 1, err);
    if (st != LIPI_OK)
        return st;
    if (b->n == b->ncap) {
        size_t c = b->ncap ? 2 * b->ncap : 64;
        size_t *start = lipi_reallocarray(b->start, c, sizeof *start);
        if (start)
            b->start = start;
        const char **ptrs = start ? lipi_reallocarray(b->ptrs, c, sizeof *ptrs) : NULL;
        if (ptrs)
            b->ptrs = ptrs;
        size_t *lens = ptrs ? lipi_reallocarray(b->lens, c, sizeof *lens) : NULL;
        if (!lens)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        b->lens = lens;
        b->ncap = c;
    }
    memcpy(b->buf + b->len, line, len);
    b->start[b->n] = b->len;
    b->lens[b->n] = len;
    b->len += len + 1;
    b->buf[b->len - 1] = '\0';
    b->n++;
    /* The buffer doubles when it moves, so re-pointing stays linear. */
    for (size_t i = b->buf == old ? b->n - 1 : 0; i < b->n; i++)
        b->ptrs[i] = b->buf + b->start[i];
    return LIPI_OK;
}

void cli_text_batch_clear(cli_text_batch *b)
{
    b->len = 0;
    b->n = 0;
}

void cli_text_batch_free(cli_text_batch *b)
{
    lipi_free(b->buf);
    lipi_free(b->start);
    lipi_free(b->ptrs);
    lipi_free(b->lens);
    memset(b, 0, sizeof *b);
}

lipi_status cli_text_batch_read(cli_text_batch *b, const char *path, lipi_invalid_mode mode,
                                lipi_error *err)
{
    lipi_line_reader *r = NULL;
    lipi_status st = lipi_line_reader_open(path, mode, &r, err);
    while (st == LIPI_OK) {
        const char *line;
        size_t len;
        st = lipi_line_reader_next(r, &line, &len, err);
        if (st != LIPI_OK || !line)
            break;
        st = cli_text_batch_add(b, line, len, err);
    }
    lipi_line_reader_close(r);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void cli_lines_progress_start(cli_lines_progress *p, const char *sub, bool want, char **files, int nfiles)
{
    memset(p, 0, sizeof *p);
    p->on = want && isatty(2);
    p->sub = sub;
    p->t0 = p->last = wall();
    /* A share of bytes only means something for plain, uncompressed files. */
    for (int i = 0; i < nfiles; i++) {
        struct stat sb;
        size_t l = strlen(files[i]);
        bool packed = (l > 3 && (strcmp(files[i] + l - 3, ".gz") == 0 ||
                                 strcmp(files[i] + l - 3, ".xz") == 0)) ||
                      (l > 4 && strcmp(files[i] + l - 4, ".zst") == 0);
        if (strcmp(files[i], "-") == 0 || packed || stat(files[i], &sb) != 0 ||
            !S_ISREG(sb.st_mode)) {
            p->bytes_total = 0;
            break;
        }
        p->bytes_total += (unsigned long long)sb.st_size;
    }
}

void cli_lines_progress_add(cli_lines_progress *p, size_t lines)
{
    p->lines += lines;
    if (!p->on)
        return;
    double t = wall();
    if (t - p->last < 0.25)
        return;
    p->last = t;
    fprintf(stderr, "\rlipi %s: %zu lines, %.0f lines/s", p->sub, p->lines,
            (double)p->lines / (t - p->t0));
    fflush(stderr);
}

void cli_lines_progress_done(cli_lines_progress *p)
{
    if (p->on && p->lines)
        fprintf(stderr, "\rlipi %s: %zu lines, %.0f lines/s\n", p->sub, p->lines,
                (double)p->lines / (wall() - p->t0 + 1e-9));
    p->on = false;
}

bool cli_parse_pooling(const char *s, unsigned *flags)
{
    static const struct {
        const char *name;
        unsigned flag;
    } modes[] = {{"cls", LIPI_POOL_CLS},
                 {"mean", LIPI_POOL_MEAN},
                 {"max", LIPI_POOL_MAX},
                 {"mean_sqrt_len", LIPI_POOL_MEAN_SQRT_LEN}};
    unsigned f = 0;
    while (*s) {
        size_t l = strcspn(s, "+");
        bool found = false;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            if (strlen(modes[i].name) == l && strncmp(s, modes[i].name, l) == 0) {
                f |= modes[i].flag;
                found = true;
            }
        if (!found)
            return false;
        s += l;
        if (*s == '+' && !*++s)
            return false;
    }
    *flags = f;
    return f != 0;
}

/* ------------------------------------------------------------------------ */
/* Embedding                                                                 */
/* ------------------------------------------------------------------------ */

struct cli_embedder {
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_session **sessions;
    size_t nsess;
    lipi_model *model;
    lipi_model_session *ms;
    lipi_encode_options eopt;
    lipi_embed_options mopt;
    size_t dim, batch;
    lipi_sequence *seqs;   /* batch entries */
    char *name;
    char path[PATH_MAX];
    char fingerprint[17];
    char pooling[64];
    bool normalize;
};

static void pooling_name(unsigned flags, char *out, size_t cap)
{
    static const struct {
        unsigned flag;
        const char *name;
    } order[] = {{LIPI_POOL_CLS, "cls"},
                 {LIPI_POOL_MAX, "max"},
                 {LIPI_POOL_MEAN, "mean"},
                 {LIPI_POOL_MEAN_SQRT_LEN, "mean_sqrt_len"}};
    out[0] = '\0';
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (flags & order[i].flag) {
            size_t l = strlen(out);
            snprintf(out + l, cap - l, "%s%s", l ? "+" : "", order[i].name);
        }
}

lipi_status cli_embedder_open(const char *model, const cli_embedder_options *opt,
                              cli_embedder **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *out = NULL;
    cli_embedder *e = lipi_calloc(1, sizeof *e);
    if (!e || !(e->name = lipi_strndup(model, strlen(model)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    struct stat sb;
    if (stat(model, &sb) != 0 || !S_ISDIR(sb.st_mode) || !realpath(model, e->path)) {
        st = lipi_error_set(err, LIPI_EIO, model, 0, 0,
                            "expected a model folder (config.json, model.safetensors and "
                            "the tokenizer's files)");
        goto done;
    }
    size_t threads = opt->threads ? opt->threads : 1;
    TRY(lipi_model_load(e->path, NULL, &e->model, err));
    TRY(lipi_tokenizer_open(e->path, NULL, &e->tok, err));
    TRY(lipi_encoder_new(e->tok, &e->enc, err));
    if (!(e->sessions = lipi_calloc(threads, sizeof *e->sessions))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (; e->nsess < threads; e->nsess++)
        if (lipi_session_new(e->enc, &e->sessions[e->nsess]) != LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
    TRY(lipi_model_session_new(e->model, threads, &e->ms, err));
    TRY(lipi_index_model_fingerprint(e->path, e->fingerprint, err));

    const lipi_model_info *info = lipi_model_get_info(e->model);
    /* Truncate as sentence-transformers does: to max_seq_length tokens,
     * special tokens included. */
    size_t max_len = info->max_seq_length < info->max_tokens ? info->max_seq_length
                                                             : info->max_tokens;
    if (opt->max_length && opt->max_length < max_len)
        max_len = opt->max_length;
    lipi_encode_options_default(e->enc, &e->eopt);
    e->eopt.add_special_tokens = true;
    e->eopt.max_length = max_len;
    unsigned pooling = opt->pooling ? opt->pooling : info->pooling;
    e->mopt.pooling = pooling;
    e->mopt.normalize = 1;
    e->normalize = info->normalize;
    pooling_name(pooling, e->pooling, sizeof e->pooling);
    e->dim = lipi_model_embed_dim(e->model, pooling);
    e->batch = opt->batch ? opt->batch : 32;
    if (!(e->seqs = lipi_calloc(e->batch, sizeof *e->seqs)))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
done:
    if (st != LIPI_OK) {
        cli_embedder_free(e);
        return st;
    }
    *out = e;
    return LIPI_OK;
}

lipi_status cli_embed(cli_embedder *e, const char *const *texts, const size_t *lens, size_t n,
                      float *out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_batch b = {0};
    lipi_text *tx = lipi_calloc(e->batch, sizeof *tx);
    if (!tx)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i0 = 0; i0 < n; i0 += e->batch) {
        size_t m = i0 + e->batch < n ? e->batch : n - i0;
        for (size_t i = 0; i < m; i++)
            tx[i] = (lipi_text){texts[i0 + i], lens[i0 + i]};
        st = lipi_encode_batch(e->sessions, e->nsess, tx, m, &e->eopt, 0, &b, err);
        if (st != LIPI_OK) {
            if (err && err->line)
                err->line += i0;
            goto done;
        }
        for (size_t i = 0; i < m; i++) {
            e->seqs[i] = (lipi_sequence){b.ids + b.start[i], NULL, b.start[i + 1] - b.start[i]};
            if (!e->seqs[i].len) {
                st = lipi_error_set(err, LIPI_EINVAL, NULL, i0 + i + 1, 0,
                                    "the tokenizer gives no tokens for this text and the model "
                                    "adds none");
                goto done;
            }
        }
        TRY(lipi_model_embed(e->ms, e->seqs, m, &e->mopt, out + i0 * e->dim, err));
        lipi_batch_free(&b);
    }
done:
    lipi_batch_free(&b);
    lipi_free(tx);
    return st;
}

size_t cli_embedder_dim(const cli_embedder *e)
{
    return e->dim;
}

void cli_embedder_identity(const cli_embedder *e, lipi_index_model *id)
{
    id->name = e->name;
    id->path = e->path;
    id->fingerprint = e->fingerprint;
    id->pooling = e->pooling;
    id->normalize = e->normalize;
}

void cli_embedder_free(cli_embedder *e)
{
    if (!e)
        return;
    lipi_model_session_free(e->ms);
    lipi_model_free(e->model);
    for (size_t i = 0; i < e->nsess; i++)
        lipi_session_free(e->sessions[i]);
    lipi_free(e->sessions);
    lipi_encoder_free(e->enc);
    lipi_tokenizer_free(e->tok);
    lipi_free(e->seqs);
    lipi_free(e->name);
    lipi_free(e);
}

/* Text -> embeddings or class probabilities (cli/embedder.h). */
#include "cli/embedder.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "encoder/encoder.h"

struct cli_embedder {
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_session **sessions;
    size_t nsess;
    lipi_model *model;
    lipi_model_session *ms;
    lipi_encode_options eopt; /* max_length one above the limit: see encode */
    lipi_embed_options mopt;
    size_t dim, batch, max_len, truncated;
    bool strict;
    lipi_sequence *seqs;      /* batch entries */
    lipi_text *tx;
    lipi_batch b;
    char *name;
    char path[PATH_MAX];
    char fingerprint[17];
    char pooling[64];
    bool normalize;           /* the model's default */
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

/* A folder is used as it is; anything else that looks like a hub name is
 * looked up in the Hugging Face cache. */
static lipi_status locate(const char *model, const char *revision, char *path, lipi_error *err)
{
    struct stat sb;
    if (stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (!realpath(model, path))
            return lipi_error_set(err, LIPI_EIO, model, 0, 0, "cannot resolve the folder's path");
        return LIPI_OK;
    }
    if (!lipi_hub_is_name(model))
        return lipi_error_set(err, LIPI_EIO, model, 0, 0,
                              "expected a model folder (config.json, model.safetensors and "
                              "the tokenizer's files) or a hub name such as ORG/NAME");
    char snap[PATH_MAX];
    lipi_status st = lipi_hub_resolve(model, revision, NULL, snap, sizeof snap, err);
    if (st == LIPI_OK && !realpath(snap, path))
        st = lipi_error_set(err, LIPI_EIO, snap, 0, 0, "cannot resolve the folder's path");
    return st;
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
    size_t threads = lipi_thread_count(opt->threads, 256);
    lipi_model_load_options lo = {.dtype = opt->dtype};
    st = locate(model, opt->revision, e->path, err);
    if (st == LIPI_OK)
        st = lipi_model_load(e->path, &lo, &e->model, err);
    if (st == LIPI_OK)
        st = lipi_tokenizer_open(e->path, NULL, &e->tok, err);
    if (st == LIPI_OK)
        st = lipi_encoder_new(e->tok, &e->enc, err);
    if (st == LIPI_OK)
        st = lipi_model_session_new(e->model, threads, &e->ms, err);
    if (st == LIPI_OK)
        st = lipi_index_model_fingerprint(e->path, e->fingerprint, err);
    if (st != LIPI_OK)
        goto done;
    if (!(e->sessions = lipi_calloc(threads, sizeof *e->sessions))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (; e->nsess < threads; e->nsess++)
        if (lipi_session_new(e->enc, &e->sessions[e->nsess]) != LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }

    const lipi_model_info *info = lipi_model_get_info(e->model);
    /* Truncate as sentence-transformers does: to max_seq_length tokens,
     * special tokens included. */
    e->max_len = info->max_seq_length < info->max_tokens ? info->max_seq_length
                                                         : info->max_tokens;
    if (opt->max_length && opt->max_length < e->max_len)
        e->max_len = opt->max_length;
    lipi_encode_options_default(e->enc, &e->eopt);
    e->eopt.add_special_tokens = true;
    e->eopt.truncate_left = false;
    e->eopt.max_length = e->max_len + 1;
    e->strict = opt->strict;
    unsigned pooling = opt->pooling ? opt->pooling : info->pooling;
    e->mopt.pooling = pooling;
    e->mopt.normalize = opt->normalize == 0 ? 1 : opt->normalize == -2 ? 0 : opt->normalize;
    e->normalize = info->normalize;
    pooling_name(pooling, e->pooling, sizeof e->pooling);
    e->dim = lipi_model_embed_dim(e->model, pooling);
    e->batch = opt->batch ? opt->batch : 32;
    if (!(e->seqs = lipi_calloc(e->batch, sizeof *e->seqs)) ||
        !(e->tx = lipi_calloc(e->batch, sizeof *e->tx)))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
done:
    if (st != LIPI_OK) {
        cli_embedder_free(e);
        return st;
    }
    *out = e;
    return LIPI_OK;
}

/* Encodes texts[0..m) (m <= batch) into e->seqs. The encoder truncates to
 * max_len + 1 tokens, so a text that comes back that long was too long:
 * dropping its last non-special token gives exactly what truncation to
 * max_len gives (the end of the text goes, the special tokens stay). */
static lipi_status encode(cli_embedder *e, const char *const *texts, const size_t *lens,
                          size_t m, lipi_error *err)
{
    for (size_t i = 0; i < m; i++)
        e->tx[i] = (lipi_text){texts[i], lens[i]};
    lipi_batch_free(&e->b);
    lipi_status st = lipi_encode_batch(e->sessions, e->nsess, e->tx, m, &e->eopt,
                                       LIPI_WANT_SPECIAL_MASK, &e->b, err);
    if (st != LIPI_OK)
        return st;
    for (size_t i = 0; i < m; i++) {
        size_t s = e->b.start[i], len = e->b.start[i + 1] - s;
        uint32_t *ids = e->b.ids + s;
        const uint8_t *special = e->b.special_mask + s;
        if (len > e->max_len) {
            if (e->strict)
                return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                      "the text has more tokens than the %zu the model takes "
                                      "(--strict)",
                                      e->max_len);
            size_t k = len;
            while (k > 0 && special[k - 1])
                k--;
            if (k == 0)
                return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                      "the special tokens alone are more than the %zu tokens "
                                      "the model takes",
                                      e->max_len);
            memmove(ids + k - 1, ids + k, (len - k) * sizeof *ids);
            len--;
            e->truncated++;
        }
        if (!len)
            return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                  "the tokenizer gives no tokens for this text and the model "
                                  "adds none");
        e->seqs[i] = (lipi_sequence){ids, NULL, len};
    }
    return LIPI_OK;
}

/* Runs encode + the model over chunks of e->batch texts; `out_dim` floats
 * per text. */
static lipi_status run(cli_embedder *e, bool classify, const char *const *texts,
                       const size_t *lens, size_t n, float *out, size_t out_dim,
                       lipi_error *err)
{
    lipi_status st = LIPI_OK;
    for (size_t i0 = 0; i0 < n; i0 += e->batch) {
        size_t m = i0 + e->batch < n ? e->batch : n - i0;
        st = encode(e, texts + i0, lens + i0, m, err);
        if (st == LIPI_OK)
            st = classify ? lipi_model_classify(e->ms, e->seqs, m, NULL, out + i0 * out_dim, err)
                          : lipi_model_embed(e->ms, e->seqs, m, &e->mopt, out + i0 * out_dim,
                                             err);
        if (st != LIPI_OK) {
            if (err && err->line)
                err->line += i0;
            break;
        }
    }
    lipi_batch_free(&e->b);
    return st;
}

lipi_status cli_embed(cli_embedder *e, const char *const *texts, const size_t *lens, size_t n,
                      float *out, lipi_error *err)
{
    return run(e, false, texts, lens, n, out, e->dim, err);
}

lipi_status cli_classify(cli_embedder *e, const char *const *texts, const size_t *lens,
                         size_t n, float *probs, lipi_error *err)
{
    size_t k = lipi_model_get_info(e->model)->num_labels;
    if (!k)
        return lipi_error_set(err, LIPI_EINVAL, e->path, 0, 0,
                              "expected a *ForSequenceClassification checkpoint (a classifier "
                              "head), found a model without one");
    return run(e, true, texts, lens, n, probs, k, err);
}

size_t cli_embedder_dim(const cli_embedder *e)
{
    return e->dim;
}

size_t cli_embedder_max_length(const cli_embedder *e)
{
    return e->max_len;
}

size_t cli_embedder_truncated(const cli_embedder *e)
{
    return e->truncated;
}

const lipi_model *cli_embedder_model(const cli_embedder *e)
{
    return e->model;
}

bool cli_embedder_normalizes(const cli_embedder *e)
{
    return e->mopt.normalize == 1 || (e->mopt.normalize == -1 && e->normalize);
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
    lipi_batch_free(&e->b);
    lipi_free(e->seqs);
    lipi_free(e->tx);
    lipi_free(e->name);
    lipi_free(e);
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

/* Text -> embeddings or class probabilities (pipeline/pipeline.h).
 *
 * The embedder holds what the model folder and the options decide (tokenizer,
 * encoder, transformer, truncation limit, pooling); a session holds
 * everything a call writes (encoder sessions, the transformer's session,
 * the encoded batch), so one embedder serves any number of threads without
 * locks, as lipi_encoder / lipi_session and lipi_model / lipi_model_session
 * do one layer down. */
#include "pipeline/pipeline.h"
#include "tokenizer/base.h"
#include "tokenizer/base_json.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "encoder/encoder.h"

struct lipi_embedder {
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_model *model;
    lipi_encode_options eopt; /* max_length one above the limit: see encode */
    lipi_embed_options mopt;
    size_t dim, batch, max_len;
    bool strict;
    char *name;
    char path[PATH_MAX];
    char pooling[64];
    bool normalize;           /* the model's default */
    size_t full_dim;          /* the model's; dim < full_dim: truncate_dim */
    size_t nprompts;          /* config_sentence_transformers.json's "prompts" */
    char **prompt_names, **prompt_texts;
    char *prompt;             /* put before every text; "" for none */
    const char *prompt_name;  /* its name (one of prompt_names), or NULL */
};

/* With threads, texts are run EMBED_JOIN batches at a time, joined while
 * their tokens stay within EMBED_JOIN_TOKENS (see run). */
#define EMBED_JOIN 4
#define EMBED_JOIN_TOKENS 4096

struct lipi_embedder_session {
    const lipi_embedder *e;
    lipi_session **sessions;  /* one per encoding thread */
    size_t nsess;
    lipi_model_session *ms;
    size_t span;              /* texts encoded at a time: batch, or with
                                 threads EMBED_JOIN batches (see run) */
    lipi_sequence *seqs;      /* (span) entries of the texts being run */
    lipi_text *tx;            /* (span) */
    lipi_batch b;             /* the chunk's tokens (single texts) */
    uint32_t *pair_ids;       /* (span, max_len), pairs only: made on first use */
    uint32_t *pair_types;     /* (span, max_len) */
    char *joined;             /* prompt + text of the chunk's texts */
    size_t joined_cap;
    float *full;              /* (span, full_dim), truncate_dim only */
};

void lipi_pooling_name(unsigned flags, char *out, size_t cap)
{
    static const struct {
        unsigned flag;
        const char *name;
    } order[] = {{LIPI_POOL_CLS, "cls"},
                 {LIPI_POOL_MAX, "max"},
                 {LIPI_POOL_MEAN, "mean"},
                 {LIPI_POOL_MEAN_SQRT_LEN, "mean_sqrt_len"}};
    if (!cap)
        return;
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

/* ------------------------------------------------------------------------ */
/* Prompts and truncate_dim, as sentence-transformers reads them             */
/* ------------------------------------------------------------------------ */

/* Reads "prompts" and "default_prompt_name" of the folder's
 * config_sentence_transformers.json (no file: no prompts) into e; the
 * default's name into *def (borrowed from e, NULL for none). */
static lipi_status read_prompts(lipi_embedder *e, const char **def, lipi_error *err)
{
    char path[PATH_MAX + 64], *text = NULL;
    size_t len;
    json_t *root = NULL;
    lipi_status st = LIPI_OK;
    *def = NULL;
    snprintf(path, sizeof path, "%s/config_sentence_transformers.json", e->path);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return LIPI_OK;
    /* 1 MiB: a config of a few prompts, as index meta.json is capped. */
    if ((st = lipi_read_file(path, (size_t)1 << 20, &text, &len, err)) != LIPI_OK)
        return st;
    json_error_t je;
    root = lipi_json_loadb(text, len, 0, &je);
    if (!root) {
        st = json_error_code(&je) == json_error_out_of_memory
                 ? lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory")
                 : lipi_error_set(err, LIPI_EFORMAT, path, (size_t)je.line, (size_t)je.position,
                                  "expected JSON: %s", je.text);
        goto done;
    }
    json_t *prompts = json_is_object(root) ? json_object_get(root, "prompts") : NULL;
    json_t *d = json_is_object(root) ? json_object_get(root, "default_prompt_name") : NULL;
    if (prompts && !json_is_null(prompts) && !json_is_object(prompts)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected \"prompts\" to be an object of strings");
        goto done;
    }
    size_t n = json_is_object(prompts) ? json_object_size(prompts) : 0;
    if (n && (!(e->prompt_names = lipi_calloc(n, sizeof *e->prompt_names)) ||
              !(e->prompt_texts = lipi_calloc(n, sizeof *e->prompt_texts)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(prompts, key, v) {
        if (!json_is_string(v)) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected prompt '%s' to be a string", key);
            goto done;
        }
        size_t i = e->nprompts;
        if (!(e->prompt_names[i] = lipi_strndup(key, strlen(key))) ||
            !(e->prompt_texts[i] = lipi_strndup(json_string_value(v), json_string_length(v)))) {
            lipi_free(e->prompt_names[i]);
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
        e->nprompts++;
    }
    if (d && !json_is_null(d)) {
        /* sentence-transformers refuses a default that is not a prompt. */
        const char *name = json_string_value(d);
        for (size_t i = 0; name && i < e->nprompts; i++)
            if (strcmp(e->prompt_names[i], name) == 0)
                *def = e->prompt_names[i];
        if (!*def)
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected \"default_prompt_name\" to name one of the "
                                "\"prompts\"");
    }
done:
    json_decref(root);
    lipi_free(text);
    return st;
}

/* The names of e's prompts, "a, b" into out ("none" without any). */
static void prompt_list(const lipi_embedder *e, char *out, size_t cap)
{
    snprintf(out, cap, "%s", e->nprompts ? "" : "none");
    for (size_t i = 0; i < e->nprompts; i++) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s", i ? ", " : "", e->prompt_names[i]);
    }
}

/* Chooses the prompt as sentence-transformers' encode does: the text given,
 * else the prompt named, else the config's default, else none. */
static lipi_status choose_prompt(lipi_embedder *e, const lipi_embedder_options *opt,
                                 lipi_error *err)
{
    const char *def, *text = "";
    lipi_status st = read_prompts(e, &def, err);
    if (st != LIPI_OK)
        return st;
    if (opt->prompt && opt->prompt_name)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a prompt or a prompt name, found both");
    e->prompt_name = def;
    if (opt->prompt_name) {
        const char *t = lipi_embedder_prompt_text(e, opt->prompt_name);
        if (!t && !opt->prompt_name_optional) {
            char have[256];
            prompt_list(e, have, sizeof have);
            return lipi_error_set(err, LIPI_EINVAL, e->path, 0, 0,
                                  "expected a prompt name of the model's "
                                  "config_sentence_transformers.json (%s), found '%s'",
                                  have, opt->prompt_name);
        }
        if (t)
            e->prompt_name = NULL;
        for (size_t i = 0; t && i < e->nprompts; i++)
            if (strcmp(e->prompt_names[i], opt->prompt_name) == 0)
                e->prompt_name = e->prompt_names[i];
    }
    if (e->prompt_name)
        text = lipi_embedder_prompt_text(e, e->prompt_name);
    if (opt->prompt) {
        /* Named when a prompt of the config has this text: an index can
         * then check the name's text against the model it is searched with. */
        text = opt->prompt;
        e->prompt_name = NULL;
        for (size_t i = 0; i < e->nprompts && !e->prompt_name; i++)
            if (text[0] && strcmp(e->prompt_texts[i], text) == 0)
                e->prompt_name = e->prompt_names[i];
    }
    size_t len = strlen(text);
    if (lipi_utf8_valid_prefix(text, len) != len)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, lipi_utf8_valid_prefix(text, len),
                              "expected a prompt of valid UTF-8");
    if (!(e->prompt = lipi_strndup(text, len)))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    return LIPI_OK;
}

lipi_status lipi_embedder_open(const char *model, const lipi_embedder_options *opt,
                               lipi_embedder **out, lipi_error *err)
{
    /* NULL: everything as the model folder says, as sentence-transformers. */
    static const lipi_embedder_options model_defaults = {.normalize = -1};
    if (!opt)
        opt = &model_defaults;
    lipi_status st = LIPI_OK;
    *out = NULL;
    lipi_embedder *e = lipi_calloc(1, sizeof *e);
    if (!e || !(e->name = lipi_strndup(model, strlen(model)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    lipi_model_load_options lo = {.dtype = opt->dtype};
    st = locate(model, opt->revision, e->path, err);
    if (st == LIPI_OK)
        st = lipi_model_load(e->path, &lo, &e->model, err);
    if (st == LIPI_OK)
        st = lipi_tokenizer_open(e->path, NULL, &e->tok, err);
    if (st == LIPI_OK)
        st = lipi_encoder_new(e->tok, &e->enc, err);
    if (st != LIPI_OK)
        goto done;

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
    lipi_pooling_name(pooling, e->pooling, sizeof e->pooling);
    e->full_dim = e->dim = lipi_model_embed_dim(e->model, pooling);
    if (opt->dimensions > e->full_dim) {
        st = lipi_error_set(err, LIPI_EINVAL, e->path, 0, 0,
                            "expected dimensions of at most the model's %zu, found %zu",
                            e->full_dim, opt->dimensions);
        goto done;
    }
    if (opt->dimensions)
        e->dim = opt->dimensions;
    e->batch = opt->batch ? opt->batch : 32;
    st = choose_prompt(e, opt, err);
done:
    if (st != LIPI_OK) {
        lipi_embedder_free(e);
        return st;
    }
    *out = e;
    return LIPI_OK;
}

void lipi_embedder_free(lipi_embedder *e)
{
    if (!e)
        return;
    lipi_model_free(e->model);
    lipi_encoder_free(e->enc);
    lipi_tokenizer_free(e->tok);
    lipi_free(e->name);
    for (size_t i = 0; i < e->nprompts; i++) {
        lipi_free(e->prompt_names[i]);
        lipi_free(e->prompt_texts[i]);
    }
    lipi_free(e->prompt_names);
    lipi_free(e->prompt_texts);
    lipi_free(e->prompt);
    lipi_free(e);
}

lipi_status lipi_embedder_session_new(const lipi_embedder *e, size_t threads,
                                      lipi_embedder_session **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *out = NULL;
    if (!threads)
        threads = 1;
    lipi_embedder_session *s = lipi_calloc(1, sizeof *s);
    if (!s)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    s->e = e;
    if ((st = lipi_model_session_new(e->model, threads, &s->ms, err)) != LIPI_OK)
        goto done;
    s->span = threads > 1 && e->batch <= SIZE_MAX / EMBED_JOIN ? e->batch * EMBED_JOIN : e->batch;
    if (!(s->sessions = lipi_calloc(threads, sizeof *s->sessions)) ||
        !(s->seqs = lipi_calloc(s->span, sizeof *s->seqs)) ||
        !(s->tx = lipi_calloc(s->span, sizeof *s->tx)) ||
        (e->dim < e->full_dim &&
         !(s->full = lipi_reallocarray(NULL, s->span, e->full_dim * sizeof *s->full)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (; s->nsess < threads; s->nsess++)
        if (lipi_session_new(e->enc, &s->sessions[s->nsess]) != LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
done:
    if (st != LIPI_OK) {
        lipi_embedder_session_free(s);
        return st;
    }
    *out = s;
    return LIPI_OK;
}

size_t lipi_embedder_session_texts(const lipi_embedder_session *s)
{
    return s->span;
}

void lipi_embedder_session_free(lipi_embedder_session *s)
{
    if (!s)
        return;
    lipi_model_session_free(s->ms);
    for (size_t i = 0; i < s->nsess; i++)
        lipi_session_free(s->sessions[i]);
    lipi_free(s->sessions);
    lipi_batch_free(&s->b);
    lipi_free(s->seqs);
    lipi_free(s->tx);
    lipi_free(s->pair_ids);
    lipi_free(s->pair_types);
    lipi_free(s->joined);
    lipi_free(s->full);
    lipi_free(s);
}

/* ------------------------------------------------------------------------ */
/* Encoding a chunk of at most `batch` texts into s->seqs                    */
/* ------------------------------------------------------------------------ */

/* The encoder truncates to max_len + 1 tokens, so a text that comes back
 * that long was too long: dropping its last non-special token gives exactly
 * what truncation to max_len gives (the end of the text goes, the special
 * tokens stay), and the one encode both detects and truncates. */
static lipi_status encode(lipi_embedder_session *s, const char *const *texts,
                          const size_t *lens, size_t m, uint8_t *truncated, lipi_error *err)
{
    const lipi_embedder *e = s->e;
    size_t plen = strlen(e->prompt), need = 0;
    for (size_t i = 0; i < m; i++)
        s->tx[i] = (lipi_text){texts[i], lens[i]};
    /* sentence-transformers prepends the prompt to the text, so the prompt
     * is tokenized with it (and counts towards max_length). */
    for (size_t i = 0; plen && i < m; i++)
        if (__builtin_add_overflow(need, plen + lens[i], &need))
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (need > s->joined_cap) {
        char *p = lipi_realloc(s->joined, need);
        if (!p)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        s->joined = p;
        s->joined_cap = need;
    }
    for (size_t i = 0, at = 0; plen && i < m; i++) {
        memcpy(s->joined + at, e->prompt, plen);
        memcpy(s->joined + at + plen, texts[i], lens[i]);
        s->tx[i] = (lipi_text){s->joined + at, plen + lens[i]};
        at += plen + lens[i];
    }
    lipi_batch_free(&s->b);
    lipi_status st = lipi_encode_batch(s->sessions, s->nsess, s->tx, m, &e->eopt,
                                       LIPI_WANT_SPECIAL_MASK, &s->b, err);
    if (st != LIPI_OK)
        return st;
    for (size_t i = 0; i < m; i++) {
        size_t start = s->b.start[i], len = s->b.start[i + 1] - start;
        uint32_t *ids = s->b.ids + start;
        const uint8_t *special = s->b.special_mask + start;
        bool cut = len > e->max_len;
        if (cut) {
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
        }
        if (truncated)
            truncated[i] = cut;
        if (!len)
            return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                  "the tokenizer gives no tokens for this text and the model "
                                  "adds none");
        s->seqs[i] = (lipi_sequence){ids, NULL, len};
    }
    return LIPI_OK;
}

/* Pairs: lipi_encode_batch takes single texts, so the pairs are encoded
 * here on the calling thread. A first encode without truncation into
 * max_len slots says whether the pair fits (and, when it does, is the
 * result); only a pair that does not is encoded again, truncated
 * longest-first as Hugging Face's cross-encoders do. */
static lipi_status encode_pairs(lipi_embedder_session *s, const char *const *a,
                                const size_t *alens, const char *const *b, const size_t *blens,
                                size_t m, uint8_t *truncated, lipi_error *err)
{
    const lipi_embedder *e = s->e;
    if (!s->pair_ids) {
        size_t cells;
        if (__builtin_mul_overflow(s->span, e->max_len, &cells) ||
            !(s->pair_ids = lipi_reallocarray(NULL, cells, sizeof *s->pair_ids)) ||
            !(s->pair_types = lipi_reallocarray(NULL, cells, sizeof *s->pair_types))) {
            lipi_free(s->pair_ids);
            s->pair_ids = NULL;
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        }
    }
    lipi_encode_options whole = e->eopt, cut = e->eopt;
    whole.max_length = 0;
    cut.max_length = e->max_len;
    cut.strategy = LIPI_TRUNCATE_LONGEST_FIRST;
    for (size_t i = 0; i < m; i++) {
        lipi_encoding enc = {.ids = s->pair_ids + i * e->max_len,
                             .type_ids = s->pair_types + i * e->max_len,
                             .cap = e->max_len};
        lipi_status st = lipi_encode_pair(s->sessions[0], a[i], alens[i], b[i], blens[i], &whole,
                                          &enc, err);
        bool too_long = st == LIPI_OK && enc.len > e->max_len;
        if (too_long && e->strict)
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "the pair has more tokens than the %zu the model takes "
                                "(--strict)",
                                e->max_len);
        else if (too_long)
            st = lipi_encode_pair(s->sessions[0], a[i], alens[i], b[i], blens[i], &cut, &enc,
                                  err);
        if (st == LIPI_OK && !enc.len)
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "the tokenizer gives no tokens for this pair and the model "
                                "adds none");
        if (st != LIPI_OK) {
            if (err)
                err->line = i + 1;
            return st;
        }
        if (truncated)
            truncated[i] = too_long;
        s->seqs[i] = (lipi_sequence){enc.ids, enc.type_ids, enc.len};
    }
    return LIPI_OK;
}

/* Matryoshka truncation as sentence-transformers' truncate_dim: the first
 * dim floats of each full vector, L2-normalized again (by
 * lipi_vectors_normalize, as the full vectors were) when the embedder
 * normalizes, since a unit vector's prefix is shorter than one.
 * full: (m, full_dim) -> out: (m, dim). */
static void truncate_dim(const lipi_embedder *e, const float *full, size_t m, float *out)
{
    for (size_t i = 0; i < m; i++)
        memcpy(out + i * e->dim, full + i * e->full_dim, e->dim * sizeof *out);
    if (lipi_embedder_normalizes(e))
        lipi_vectors_normalize(out, m, e->dim);
}

/* What run() writes per text: an embedding, the head's probabilities or
 * its logits. */
typedef enum { RUN_EMBED, RUN_PROBS, RUN_LOGITS } run_mode;

/* One logit's probability, as Hugging Face's text-classification pipeline
 * and sentence-transformers' CrossEncoder give it for num_labels == 1
 * (softmax over one label would always be 1). lipi_model_classify's probs
 * follow the config's problem_type only, so the pipeline applies this. */
static void sigmoid_in_place(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
}

/* The model on seqs[0..m) (at most a batch, or runs of e->batch when
 * joined): vectors, logits or probabilities, into o. */
static lipi_status model_call(lipi_embedder_session *s, run_mode mode, const lipi_sequence *seqs,
                              size_t m, float *o, lipi_error *err)
{
    const lipi_embedder *e = s->e;
    if (mode == RUN_EMBED)
        return lipi_model_embed_chunks(s->ms, seqs, m, e->batch, &e->mopt, o, err);
    if (mode == RUN_LOGITS)
        return lipi_model_classify_chunks(s->ms, seqs, m, e->batch, o, NULL, err);
    return lipi_model_classify_chunks(s->ms, seqs, m, e->batch, NULL, o, err);
}

/* Runs the model on s->seqs[0..m) (encoded) into o (dim floats a text),
 * batch by batch of e->batch sequences: batches whose tokens together stay
 * within EMBED_JOIN_TOKENS go to the model in one call, which runs all
 * their groups of short sentences in one parallel region
 * (lipi_model_embed_chunks: the outputs of a call per batch). */
static lipi_status model_joined(lipi_embedder_session *s, run_mode mode, size_t m, float *o,
                                size_t dim, lipi_error *err)
{
    const lipi_embedder *e = s->e;
    for (size_t j0 = 0; j0 < m;) {
        size_t take = 0, tokens = 0;
        while (j0 + take < m) {
            size_t next = m - j0 - take < e->batch ? m - j0 - take : e->batch, nt = 0;
            for (size_t i = j0 + take; i < j0 + take + next; i++)
                nt += s->seqs[i].len;
            if (take && tokens + nt > EMBED_JOIN_TOKENS)
                break;
            take += next;
            tokens += nt;
        }
        lipi_status st = model_call(s, mode, s->seqs + j0, take, o + j0 * dim, err);
        if (st != LIPI_OK)
            return st;
        j0 += take;
    }
    return LIPI_OK;
}

/* Runs encode + the model over chunks of s->span texts (or pairs, when b
 * is not NULL): a batch, or with threads several (model_joined);
 * `out_dim` floats per text. */
static lipi_status run(lipi_embedder_session *s, run_mode mode, const char *const *a,
                       const size_t *alens, const char *const *b, const size_t *blens,
                       size_t n, float *out, size_t out_dim, uint8_t *truncated,
                       lipi_error *err)
{
    const lipi_embedder *e = s->e;
    lipi_status st = LIPI_OK;
    bool cut = mode == RUN_EMBED && e->dim < e->full_dim;
    bool one_label = mode != RUN_EMBED && out_dim == 1;
    /* One label's probability is the sigmoid of its logit (below). */
    run_mode model_mode = one_label ? RUN_LOGITS : mode;
    for (size_t i0 = 0; i0 < n; i0 += s->span) {
        size_t m = i0 + s->span < n ? s->span : n - i0;
        uint8_t *t = truncated ? truncated + i0 : NULL;
        st = b ? encode_pairs(s, a + i0, alens + i0, b + i0, blens + i0, m, t, err)
               : encode(s, a + i0, alens + i0, m, t, err);
        float *o = out + i0 * out_dim;
        if (st == LIPI_OK)
            st = model_joined(s, model_mode, m, cut ? s->full : o, cut ? e->full_dim : out_dim,
                              err);
        if (st == LIPI_OK && one_label && mode == RUN_PROBS)
            sigmoid_in_place(o, m);
        if (st == LIPI_OK && cut)
            truncate_dim(e, s->full, m, o);
        if (st != LIPI_OK) {
            if (err && err->line)
                err->line += i0;
            break;
        }
    }
    /* The tokens of the last chunk are not kept between calls. */
    lipi_batch_free(&s->b);
    return st;
}

lipi_status lipi_embedder_embed(lipi_embedder_session *s, const char *const *texts,
                                const size_t *lens, size_t n, float *out, uint8_t *truncated,
                                lipi_error *err)
{
    return run(s, RUN_EMBED, texts, lens, NULL, NULL, n, out, s->e->dim, truncated, err);
}

lipi_status lipi_embedder_embed_ids(lipi_embedder_session *s, const uint32_t *const *ids,
                                    const size_t *lens, size_t n, float *out, uint8_t *truncated,
                                    lipi_error *err)
{
    const lipi_embedder *e = s->e;
    bool cut_dim = e->dim < e->full_dim;
    for (size_t i0 = 0; i0 < n; i0 += e->batch) {
        size_t m = i0 + e->batch < n ? e->batch : n - i0;
        for (size_t i = 0; i < m; i++) {
            size_t len = lens[i0 + i];
            bool cut = len > e->max_len;
            if (!len || (cut && e->strict))
                return lipi_error_set(err, LIPI_EINVAL, NULL, i0 + i + 1, 0,
                                      len ? "the sequence has %zu ids, more than the %zu the "
                                            "model takes"
                                          : "expected at least one id, found %zu of %zu",
                                      len, e->max_len);
            if (truncated)
                truncated[i0 + i] = cut;
            s->seqs[i] = (lipi_sequence){ids[i0 + i], NULL, cut ? e->max_len : len};
        }
        float *o = out + i0 * e->dim;
        lipi_status st = lipi_model_embed(s->ms, s->seqs, m, &e->mopt, cut_dim ? s->full : o, err);
        if (st != LIPI_OK)
            return st;
        if (cut_dim)
            truncate_dim(e, s->full, m, o);
    }
    return LIPI_OK;
}

const lipi_encoder *lipi_embedder_encoder(const lipi_embedder *e)
{
    return e->enc;
}

/* The prompt is tokenized with the text, as encode() does; only the count
 * is wanted, so the encoding has no arrays (cap 0 is lipi_encode's size
 * query) and the text is joined with the prompt only when there is one. */
lipi_status lipi_embedder_count_tokens(const lipi_embedder *e, lipi_session *s, const char *text,
                                       size_t len, size_t *n, lipi_error *err)
{
    size_t plen = strlen(e->prompt);
    lipi_encoding enc = {0};
    char *joined = NULL;
    if (plen) {
        if (len > SIZE_MAX - plen || !(joined = lipi_malloc(plen + len)))
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        memcpy(joined, e->prompt, plen);
        memcpy(joined + plen, text, len);
        text = joined;
        len += plen;
    }
    lipi_status st = lipi_encode(s, text, len, &e->eopt, &enc, err);
    lipi_free(joined);
    *n = enc.len;
    return st;
}

static lipi_status need_head(const lipi_embedder *e, lipi_error *err)
{
    if (lipi_embedder_label_count(e))
        return LIPI_OK;
    return lipi_error_set(err, LIPI_EINVAL, e->path, 0, 0,
                          "expected a *ForSequenceClassification checkpoint (a classifier "
                          "head), found a model without one");
}

lipi_status lipi_embedder_classify(lipi_embedder_session *s, const char *const *texts,
                                   const size_t *lens, size_t n, float *probs,
                                   uint8_t *truncated, lipi_error *err)
{
    lipi_status st = need_head(s->e, err);
    if (st != LIPI_OK)
        return st;
    return run(s, RUN_PROBS, texts, lens, NULL, NULL, n, probs, lipi_embedder_label_count(s->e),
               truncated, err);
}

lipi_status lipi_embedder_classify_pairs(lipi_embedder_session *s, const char *const *a,
                                         const size_t *alens, const char *const *b,
                                         const size_t *blens, size_t n, float *probs,
                                         uint8_t *truncated, lipi_error *err)
{
    lipi_status st = need_head(s->e, err);
    if (st != LIPI_OK)
        return st;
    return run(s, RUN_PROBS, a, alens, b, blens, n, probs, lipi_embedder_label_count(s->e),
               truncated, err);
}

lipi_status lipi_embedder_score_pairs(lipi_embedder_session *s, const char *const *a,
                                      const size_t *alens, const char *const *b,
                                      const size_t *blens, size_t n, size_t label, bool raw,
                                      float *scores, uint8_t *truncated, lipi_error *err)
{
    lipi_status st = need_head(s->e, err);
    if (st != LIPI_OK)
        return st;
    size_t k = lipi_embedder_label_count(s->e);
    if (label >= k)
        return lipi_error_set(err, LIPI_EINVAL, s->e->path, 0, 0,
                              "expected a label below %zu, the model's label count, found %zu",
                              k, label);
    run_mode mode = raw ? RUN_LOGITS : RUN_PROBS;
    if (k == 1)
        return run(s, mode, a, alens, b, blens, n, scores, 1, truncated, err);
    size_t cells;
    float *all = NULL;
    if (__builtin_mul_overflow(n, k, &cells) ||
        !(all = lipi_reallocarray(NULL, cells ? cells : 1, sizeof *all)))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    st = run(s, mode, a, alens, b, blens, n, all, k, truncated, err);
    for (size_t i = 0; st == LIPI_OK && i < n; i++)
        scores[i] = all[i * k + label];
    lipi_free(all);
    return st;
}

/* Orders by score descending, then by index: a total order for qsort, so
 * equal scores keep their input order. */
typedef struct {
    float score;
    size_t i;
} scored;

/* ------------------------------------------------------------------------ */
/* bge-m3: lexical weights and multi-vectors                                 */
/* ------------------------------------------------------------------------ */

void lipi_embedder_outputs(const lipi_embedder *e, bool *sparse, size_t *colbert_dim)
{
    const lipi_model_info *in = lipi_model_get_info(e->model);
    *sparse = in->sparse;
    *colbert_dim = in->colbert_dim;
}

void lipi_lexical_free(lipi_lexical *x)
{
    lipi_free(x->ids);
    lipi_free(x->weights);
    lipi_free(x->off);
    memset(x, 0, sizeof *x);
}

void lipi_multivectors_free(lipi_multivectors *x)
{
    lipi_free(x->vecs);
    lipi_free(x->off);
    memset(x, 0, sizeof *x);
}

/* FlagEmbedding's unused_tokens, {cls, eos, pad, unk}: the ids the
 * tokenizer's template adds to an empty text, its unknown token and the
 * model's padding id. At most 8. */
static lipi_status dropped_ids(lipi_embedder_session *s, uint32_t *ids, size_t *n,
                               lipi_error *err)
{
    const lipi_embedder *e = s->e;
    lipi_batch b = {0};
    lipi_text empty = {"", 0};
    *n = 0;
    lipi_status st = lipi_encode_batch(s->sessions, 1, &empty, 1, &e->eopt,
                                       LIPI_WANT_SPECIAL_MASK, &b, err);
    if (st != LIPI_OK)
        return st;
    for (size_t i = 0; i < b.start[1] && *n < 6; i++)
        if (b.special_mask[i])
            ids[(*n)++] = b.ids[i];
    lipi_batch_free(&b);
    int64_t unk = lipi_tokenizer_get_model_options(e->tok)->unk_id;
    if (unk >= 0)
        ids[(*n)++] = (uint32_t)unk;
    ids[(*n)++] = lipi_model_get_info(e->model)->pad_token_id;
    return LIPI_OK;
}

/* The chunks of texts through encode, each handed to `each`. */
typedef lipi_status (*chunk_fn)(lipi_embedder_session *s, size_t i0, size_t m, void *ctx,
                                lipi_error *err);

static lipi_status run_chunks(lipi_embedder_session *s, const char *const *texts,
                              const size_t *lens, size_t n, uint8_t *truncated, chunk_fn each,
                              void *ctx, lipi_error *err)
{
    const lipi_embedder *e = s->e;
    lipi_status st = LIPI_OK;
    for (size_t i0 = 0; i0 < n && st == LIPI_OK; i0 += e->batch) {
        size_t m = i0 + e->batch < n ? e->batch : n - i0;
        st = encode(s, texts + i0, lens + i0, m, truncated ? truncated + i0 : NULL, err);
        if (st == LIPI_OK)
            st = each(s, i0, m, ctx, err);
        if (st != LIPI_OK && err && err->line)
            err->line += i0;
    }
    lipi_batch_free(&s->b);
    return st;
}

typedef struct {
    lipi_lexical *out;
    size_t cap_ids, cap_w; /* of out->ids, out->weights */
    float *w;             /* token weights of a chunk */
    size_t wcap;
    uint32_t drop[8];
    size_t ndrop;
} lexical_ctx;

static lipi_status lexical_chunk(lipi_embedder_session *s, size_t i0, size_t m, void *vctx,
                                 lipi_error *err)
{
    lexical_ctx *c = vctx;
    lipi_lexical *x = c->out;
    size_t T = 0;
    for (size_t i = 0; i < m; i++)
        T += s->seqs[i].len;
    if (T > c->wcap) {
        float *p = lipi_reallocarray(c->w, T, sizeof *p);
        if (!p)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        c->w = p;
        c->wcap = T;
    }
    lipi_status st = lipi_model_token_weights(s->ms, s->seqs, m, c->w, err);
    const float *w = c->w;
    for (size_t i = 0; st == LIPI_OK && i < m; i++) {
        const lipi_sequence *q = &s->seqs[i];
        size_t start = x->off[i0 + i];
        void *pi = x->ids, *pw = x->weights;
        lipi_status g = lipi_grow(&pi, &c->cap_ids, start + q->len, sizeof *x->ids);
        x->ids = pi;
        if (g == LIPI_OK)
            g = lipi_grow(&pw, &c->cap_w, start + q->len, sizeof *x->weights);
        x->weights = pw;
        if (g != LIPI_OK)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        size_t k = start;
        for (size_t t = 0; t < q->len; t++) {
            uint32_t id = q->ids[t];
            bool skip = !(w[t] > 0);
            for (size_t d = 0; !skip && d < c->ndrop; d++)
                skip = id == c->drop[d];
            if (skip)
                continue;
            /* Linear: a text's distinct ids are few next to its length. */
            size_t j = start;
            while (j < k && x->ids[j] != id)
                j++;
            if (j == k) {
                x->ids[k] = id;
                x->weights[k++] = w[t];
            } else if (w[t] > x->weights[j]) {
                x->weights[j] = w[t];
            }
        }
        x->off[i0 + i + 1] = k;
        w += q->len;
    }
    return st;
}

lipi_status lipi_embedder_lexical(lipi_embedder_session *s, const char *const *texts,
                                  const size_t *lens, size_t n, lipi_lexical *out,
                                  uint8_t *truncated, lipi_error *err)
{
    lexical_ctx c = {.out = out};
    memset(out, 0, sizeof *out);
    lipi_status st = LIPI_OK;
    if (!lipi_model_get_info(s->e->model)->sparse)
        return lipi_error_set(err, LIPI_EINVAL, s->e->path, 0, 0,
                              "the model has no sparse_linear.pt (bge-m3's lexical head)");
    if (!(out->off = lipi_calloc(n + 1, sizeof *out->off)))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK)
        st = dropped_ids(s, c.drop, &c.ndrop, err);
    if (st == LIPI_OK)
        st = run_chunks(s, texts, lens, n, truncated, lexical_chunk, &c, err);
    lipi_free(c.w);
    out->n = n;
    if (st != LIPI_OK)
        lipi_lexical_free(out);
    return st;
}

typedef struct {
    lipi_multivectors *out;
    size_t rows_cap;
} colbert_ctx;

static lipi_status colbert_chunk(lipi_embedder_session *s, size_t i0, size_t m, void *vctx,
                                 lipi_error *err)
{
    colbert_ctx *c = vctx;
    lipi_multivectors *x = c->out;
    size_t start = x->off[i0], rows = 0;
    for (size_t i = 0; i < m; i++) {
        rows += s->seqs[i].len - 1;
        x->off[i0 + i + 1] = start + rows;
    }
    size_t need;
    if (__builtin_mul_overflow(start + rows, x->dim, &need))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    void *p = x->vecs;
    size_t cap = c->rows_cap * x->dim;
    if (lipi_grow(&p, &cap, need, sizeof *x->vecs) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    x->vecs = p;
    c->rows_cap = cap / x->dim;
    return lipi_model_colbert(s->ms, s->seqs, m, x->vecs + start * x->dim, err);
}

lipi_status lipi_embedder_colbert(lipi_embedder_session *s, const char *const *texts,
                                  const size_t *lens, size_t n, lipi_multivectors *out,
                                  uint8_t *truncated, lipi_error *err)
{
    colbert_ctx c = {.out = out};
    memset(out, 0, sizeof *out);
    out->dim = lipi_model_get_info(s->e->model)->colbert_dim;
    if (!out->dim)
        return lipi_error_set(err, LIPI_EINVAL, s->e->path, 0, 0,
                              "the model has no colbert_linear.pt (bge-m3's multi-vector "
                              "head)");
    lipi_status st = LIPI_OK;
    if (!(out->off = lipi_calloc(n + 1, sizeof *out->off)))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK)
        st = run_chunks(s, texts, lens, n, truncated, colbert_chunk, &c, err);
    out->n = n;
    if (st != LIPI_OK)
        lipi_multivectors_free(out);
    return st;
}

static int by_score_then_index(const void *pa, const void *pb)
{
    const scored *x = pa, *y = pb;
    bool xn = x->score != x->score, yn = y->score != y->score; /* NaN */
    if (xn != yn)
        return xn ? 1 : -1;
    if (!xn && x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

lipi_status lipi_scores_order(const float *scores, size_t n, size_t *order, lipi_error *err)
{
    scored *t = lipi_reallocarray(NULL, n ? n : 1, sizeof *t);
    if (!t)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < n; i++)
        t[i] = (scored){scores[i], i};
    qsort(t, n, sizeof *t, by_score_then_index);
    for (size_t i = 0; i < n; i++)
        order[i] = t[i].i;
    lipi_free(t);
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* What the embedder is                                                      */
/* ------------------------------------------------------------------------ */

size_t lipi_embedder_dim(const lipi_embedder *e)
{
    return e->dim;
}

size_t lipi_embedder_max_length(const lipi_embedder *e)
{
    return e->max_len;
}

size_t lipi_embedder_label_count(const lipi_embedder *e)
{
    return lipi_model_get_info(e->model)->num_labels;
}

const char *lipi_embedder_label(const lipi_embedder *e, size_t i)
{
    const lipi_model_info *info = lipi_model_get_info(e->model);
    return i < info->num_labels ? info->labels[i] : NULL;
}

size_t lipi_embedder_prompt_count(const lipi_embedder *e)
{
    return e->nprompts;
}

const char *lipi_embedder_prompt_name(const lipi_embedder *e, size_t i)
{
    return i < e->nprompts ? e->prompt_names[i] : NULL;
}

const char *lipi_embedder_prompt_text(const lipi_embedder *e, const char *name)
{
    for (size_t i = 0; i < e->nprompts; i++)
        if (strcmp(e->prompt_names[i], name) == 0)
            return e->prompt_texts[i];
    return NULL;
}

const char *lipi_embedder_prompt(const lipi_embedder *e, const char **name)
{
    if (name)
        *name = e->prompt_name;
    return e->prompt;
}

lipi_status lipi_embedder_check_index(const lipi_embedder *e, const lipi_index *idx,
                                      const char *dir, lipi_error *err)
{
    const lipi_index_model *im = lipi_index_get_model(idx);
    if (lipi_embedder_dim(e) != lipi_index_dim(idx))
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                              "the index holds vectors of dimension %zu%s, the queries would "
                              "have %zu (--dimensions %zu of the model's %zu)",
                              lipi_index_dim(idx), im->truncate_dim ? " (truncate_dim)" : "",
                              lipi_embedder_dim(e), lipi_embedder_dim(e), e->full_dim);
    if (!im->prompt || !im->prompt_name)
        return LIPI_OK;
    const char *t = lipi_embedder_prompt_text(e, im->prompt_name);
    if (t && strcmp(t, im->prompt) == 0)
        return LIPI_OK;
    char have[256];
    prompt_list(e, have, sizeof have);
    if (!t)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                              "the index's documents were embedded with the prompt '%s' "
                              "('%s'), which model '%s' does not have (its prompts: %s)",
                              im->prompt_name, im->prompt, e->name, have);
    return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                          "the index's documents were embedded with the prompt '%s' = '%s', "
                          "but model '%s' has '%s' = '%s'",
                          im->prompt_name, im->prompt, e->name, im->prompt_name, t);
}

bool lipi_embedder_normalizes(const lipi_embedder *e)
{
    return e->mopt.normalize == 1 || (e->mopt.normalize == -1 && e->normalize);
}

/* Not cached in e: a cache filled on first use would need a lock to keep e
 * shareable, and the callers (index, search, probe) ask once per command. */
lipi_status lipi_embedder_identity(const lipi_embedder *e, lipi_index_model *id,
                                   char fingerprint[17], lipi_error *err)
{
    lipi_status st = lipi_index_model_fingerprint(e->path, fingerprint, err);
    if (st != LIPI_OK)
        return st;
    id->name = e->name;
    id->path = e->path;
    id->fingerprint = fingerprint;
    id->pooling = e->pooling;
    id->normalize = e->normalize;
    id->prompt = e->prompt;
    id->prompt_name = e->prompt_name;
    id->truncate_dim = e->dim < e->full_dim ? e->dim : 0;
    return LIPI_OK;
}

bool lipi_pooling_parse(const char *s, unsigned *flags)
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

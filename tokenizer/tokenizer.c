/* The tokenizer object: model vocabulary and merges, added tokens, and the
 * parts it owns. Building happens here (lipi_tokenizer_set_model and the
 * internal builders used by tokenizer_json.c); after that the object is only
 * read, so threads share it freely. */
#include "tokenizer/tokenizer_layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* String map                                                                */
/* ------------------------------------------------------------------------ */

/* Smallest power of two >= 2 * n (and >= 16), so probes stay short. */
static lipi_status map_capacity(size_t n, size_t *cap)
{
    size_t c = 16;
    while (c / 2 < n) {
        if (c > SIZE_MAX / 4)
            return LIPI_ENOMEM;
        c *= 2;
    }
    *cap = c;
    return LIPI_OK;
}

lipi_status lipi_strmap_build(lipi_strmap *m, const lipi_strref *keys, size_t n,
                              size_t *dup_first, size_t *dup_second)
{
    lipi_status st = LIPI_OK;
    size_t cap;
    m->slot = NULL;
    m->mask = 0;
    /* Indices are stored as uint32_t with UINT32_MAX reserved for "empty". */
    if (n >= LIPI_MAP_EMPTY)
        return LIPI_ENOMEM;
    TRY(map_capacity(n, &cap));
    uint32_t *slot = lipi_reallocarray(NULL, cap, sizeof *slot);
    if (!slot)
        return LIPI_ENOMEM;
    memset(slot, 0xff, cap * sizeof *slot);
    for (size_t k = 0; k < n; k++) {
        if (!keys[k].s)
            continue;
        size_t i = (size_t)lipi_hash_bytes(keys[k].s, keys[k].len) & (cap - 1);
        while (slot[i] != LIPI_MAP_EMPTY) {
            const lipi_strref *o = &keys[slot[i]];
            if (o->len == keys[k].len && memcmp(o->s, keys[k].s, o->len) == 0) {
                if (dup_first)
                    *dup_first = slot[i];
                if (dup_second)
                    *dup_second = k;
                lipi_free(slot);
                return LIPI_EINVAL;
            }
            i = (i + 1) & (cap - 1);
        }
        slot[i] = (uint32_t)k;
    }
    m->slot = slot;
    m->mask = cap - 1;
done:
    return st;
}

void lipi_strmap_free(lipi_strmap *m)
{
    lipi_free(m->slot);
    m->slot = NULL;
    m->mask = 0;
}

/* ------------------------------------------------------------------------ */
/* Vocabulary and merges                                                     */
/* ------------------------------------------------------------------------ */

lipi_status lipi_vocab_build(lipi_vocab *v, const lipi_strref *tok, size_t n,
                             size_t *dup_first, size_t *dup_second)
{
    lipi_status st = LIPI_OK;
    lipi_vocab nv = {0};
    size_t total = 0;

    if (n >= UINT32_MAX)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!tok[i].s)
            continue;
        /* One NUL after each token keeps every token printable with %s. */
        if (tok[i].len > SIZE_MAX - total - 1)
            return LIPI_ENOMEM;
        total += tok[i].len + 1;
        nv.count++;
    }
    nv.n = n;
    nv.tok = lipi_calloc(n ? n : 1, sizeof *nv.tok);
    nv.arena = lipi_malloc(total ? total : 1);
    if (!nv.tok || !nv.arena) {
        st = LIPI_ENOMEM;
        goto done;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tok[i].s)
            continue;
        if (tok[i].len)
            memcpy(nv.arena + off, tok[i].s, tok[i].len);
        nv.arena[off + tok[i].len] = '\0';
        nv.tok[i].s = nv.arena + off;
        nv.tok[i].len = tok[i].len;
        off += tok[i].len + 1;
    }
    TRY(lipi_strmap_build(&nv.map, nv.tok, n, dup_first, dup_second));
    *v = nv;
    return LIPI_OK;
done:
    lipi_free(nv.tok);
    lipi_free(nv.arena);
    return st;
}

static void vocab_free(lipi_vocab *v)
{
    lipi_free(v->tok);
    lipi_free(v->arena);
    lipi_strmap_free(&v->map);
    memset(v, 0, sizeof *v);
}

lipi_status lipi_merge_join(lipi_strref left, lipi_strref right, size_t prefix_len,
                            lipi_buf *out)
{
    lipi_status st = LIPI_OK;
    out->len = 0;
    if (right.len < prefix_len)
        return LIPI_EINVAL;
    TRY(lipi_buf_append(out, left.s, left.len));
    TRY(lipi_buf_append(out, right.s + prefix_len, right.len - prefix_len));
done:
    return st;
}

lipi_status lipi_merges_build(lipi_vocab_model *m, const uint32_t (*pairs)[2], size_t n,
                              size_t *bad_rank)
{
    lipi_status st = LIPI_OK;
    lipi_buf joined = {0};
    lipi_merge *merges = NULL;
    size_t prefix_len = strnlen(m->opt.continuing_subword_prefix,
                                sizeof m->opt.continuing_subword_prefix);

    if (n >= UINT32_MAX)
        return LIPI_ENOMEM;
    merges = lipi_reallocarray(NULL, n ? n : 1, sizeof *merges);
    if (!merges) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t r = 0; r < n; r++) {
        uint32_t a = pairs[r][0], b = pairs[r][1], result;
        *bad_rank = r;
        if (a >= m->vocab.n || b >= m->vocab.n || !m->vocab.tok[a].s || !m->vocab.tok[b].s) {
            st = LIPI_EINVAL;
            goto done;
        }
        st = lipi_merge_join(m->vocab.tok[a], m->vocab.tok[b], prefix_len, &joined);
        if (st != LIPI_OK)
            goto done;
        if (!lipi_vocab_find(&m->vocab, joined.p, joined.len, &result)) {
            st = LIPI_EINVAL;
            goto done;
        }
        merges[r] = (lipi_merge){a, b, result};
    }
    m->merges = merges;
    m->n_merges = n;
    merges = NULL;
done:
    lipi_free(merges);
    lipi_buf_free(&joined);
    return st;
}

void lipi_vocab_model_clear(lipi_vocab_model *m)
{
    if (m->mapped) {
        lipi_free(m->vocab.tok);
        lipi_tabcache_unmap(m->mapped, m->mapped_len);
    } else {
        vocab_free(&m->vocab);
        lipi_free(m->scores);
        lipi_free(m->merges);
    }
    lipi_free(m->unk_token);
    memset(m, 0, sizeof *m);
    m->opt.unk_id = -1;
}

void lipi_model_options_default(lipi_model_type type, lipi_model_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->unk_id = -1;
    opt->max_input_chars_per_word = 100;
    if (type == LIPI_MODEL_WORDPIECE)
        memcpy(opt->continuing_subword_prefix, "##", 3);
}

/* ------------------------------------------------------------------------ */
/* Post-processors and decoders                                              */
/* ------------------------------------------------------------------------ */

void lipi_post_processor_clear(lipi_post_processor *p)
{
    lipi_free(p->sep.token);
    lipi_free(p->cls.token);
    lipi_free(p->single);
    lipi_free(p->pair);
    for (size_t i = 0; i < p->n_special; i++) {
        lipi_template_special *s = &p->special[i];
        lipi_free(s->name);
        lipi_free(s->ids);
        for (size_t k = 0; k < s->n; k++)
            lipi_free(s->tokens ? s->tokens[k] : NULL);
        lipi_free(s->tokens);
        lipi_free(s->token_lens);
    }
    lipi_free(p->special);
    for (size_t i = 0; i < p->n_items; i++)
        lipi_post_processor_clear(&p->items[i]);
    lipi_free(p->items);
    memset(p, 0, sizeof *p);
}

void lipi_post_processor_free(lipi_post_processor *p)
{
    if (!p)
        return;
    lipi_post_processor_clear(p);
    lipi_free(p);
}

void lipi_decoder_clear(lipi_decoder *d)
{
    lipi_free(d->wordpiece.prefix.s);
    lipi_free(d->metaspace.replacement.s);
    lipi_free(d->strip.content.s);
    lipi_free(d->replace.pattern.s);
    lipi_free(d->replace.content.s);
    lipi_free(d->bpe.suffix.s);
    lipi_free(d->ctc.pad_token.s);
    lipi_free(d->ctc.word_delimiter_token.s);
    for (size_t i = 0; i < d->sequence.n_items; i++)
        lipi_decoder_clear(&d->sequence.items[i]);
    lipi_free(d->sequence.items);
    memset(d, 0, sizeof *d);
}

void lipi_decoder_free(lipi_decoder *d)
{
    if (!d)
        return;
    lipi_decoder_clear(d);
    lipi_free(d);
}

/* ------------------------------------------------------------------------ */
/* The tokenizer                                                             */
/* ------------------------------------------------------------------------ */

/* Creates an empty tokenizer: no normalizer, pre-tokenizer, model or added
 * tokens. LIPI_ENOMEM if the allocation fails. */
lipi_status lipi_tokenizer_new(lipi_tokenizer **out)
{
    if (!out)
        return LIPI_EINVAL;
    lipi_tokenizer *t = lipi_calloc(1, sizeof *t);
    *out = t;
    if (!t)
        return LIPI_ENOMEM;
    t->model.opt.unk_id = -1;
    return LIPI_OK;
}

static lipi_status oom(lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
}

static void added_free(lipi_added_token *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lipi_free(a[i].content);
    lipi_free(a);
}

/* Frees the tokenizer and every part it owns. NULL is a no-op. */
void lipi_tokenizer_free(lipi_tokenizer *t)
{
    if (!t)
        return;
    lipi_normalizer_free(t->normalizer);
    lipi_pretokenizer_free(t->pretokenizer);
    lipi_vocab_model_clear(&t->model);
    lipi_post_processor_free(t->post);
    lipi_decoder_free(t->decoder);
    added_free(t->added, t->n_added);
    lipi_free(t->added_keys);
    lipi_strmap_free(&t->added_map);
    json_decref(t->truncation);
    json_decref(t->padding);
    lipi_free(t);
}

/* Installs n as the normalizer (NULL removes it), freeing the old one. n is
 * stolen; LIPI_EINVAL (and n freed) when t is NULL. */
lipi_status lipi_tokenizer_take_normalizer(lipi_tokenizer *t, lipi_normalizer *n)
{
    if (!t) {
        lipi_normalizer_free(n);
        return LIPI_EINVAL;
    }
    lipi_normalizer_free(t->normalizer);
    t->normalizer = n;
    return LIPI_OK;
}

/* Same for the pre-tokenizer. */
lipi_status lipi_tokenizer_take_pretokenizer(lipi_tokenizer *t, lipi_pretokenizer *p)
{
    if (!t) {
        lipi_pretokenizer_free(p);
        return LIPI_EINVAL;
    }
    lipi_pretokenizer_free(t->pretokenizer);
    t->pretokenizer = p;
    return LIPI_OK;
}

/* Whether added token a disagrees with model m; fills err if so. With
 * may_shadow, an id the model gives another string is allowed: the added
 * token shadows it when ids become strings (lipi_tokenizer_id_to_token). */
static lipi_status added_check_model(const lipi_vocab_model *m, const lipi_added_token *a,
                                     bool may_shadow, lipi_error *err)
{
    uint32_t mid;
    if (lipi_vocab_find(&m->vocab, a->content, a->len, &mid)) {
        if (mid != a->id)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "added token \"%.*s\" has id %u but the model gives it id %u",
                                  (int)(a->len > 64 ? 64 : a->len), a->content, a->id, mid);
    } else if (!may_shadow && a->id < m->vocab.n && m->vocab.tok[a->id].s) {
        const lipi_strref *o = &m->vocab.tok[a->id];
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "added token \"%.*s\" has id %u, which is the model's token \"%.*s\"",
                              (int)(a->len > 64 ? 64 : a->len), a->content, a->id,
                              (int)(o->len > 64 ? 64 : o->len), o->s);
    }
    return LIPI_OK;
}

lipi_status lipi_tokenizer_install_model(lipi_tokenizer *t, lipi_vocab_model *m, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    for (size_t i = 0; i < t->n_added; i++)
        TRY(added_check_model(m, &t->added[i], t->added_may_shadow, err));
    lipi_vocab_model_clear(&t->model);
    t->model = *m;
    memset(m, 0, sizeof *m);
    m->opt.unk_id = -1;
done:
    return st;
}

static int added_cmp_id(const void *a, const void *b)
{
    uint32_t x = ((const lipi_added_token *)a)->id, y = ((const lipi_added_token *)b)->id;
    return (x > y) - (x < y);
}

lipi_status lipi_tokenizer_set_added(lipi_tokenizer *t, lipi_added_token *toks, size_t n,
                                     lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_strref *keys = NULL;
    lipi_strmap map = {0};
    size_t d1 = 0, d2 = 0;

    if (n)
        qsort(toks, n, sizeof *toks, added_cmp_id);
    for (size_t i = 0; i < n; i++) {
        const lipi_added_token *a = &toks[i];
        if (a->len == 0) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "added token with id %u has empty content", a->id);
            goto done;
        }
        if (i > 0 && toks[i - 1].id == a->id) {
            const lipi_added_token *p = &toks[i - 1];
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "added tokens \"%.*s\" and \"%.*s\" both have id %u",
                                (int)(p->len > 64 ? 64 : p->len), p->content,
                                (int)(a->len > 64 ? 64 : a->len), a->content, a->id);
            goto done;
        }
        TRY(added_check_model(&t->model, a, t->added_may_shadow, err));
    }
    keys = lipi_calloc(n ? n : 1, sizeof *keys);
    if (!keys) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (lipi_strref){toks[i].content, toks[i].len};
    st = lipi_strmap_build(&map, keys, n, &d1, &d2);
    if (st == LIPI_EINVAL) {
        const lipi_added_token *a = &toks[d1];
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "added token \"%.*s\" appears twice (ids %u and %u)",
                            (int)(a->len > 64 ? 64 : a->len), a->content, a->id, toks[d2].id);
    }
    if (st != LIPI_OK)
        goto done;

    added_free(t->added, t->n_added);
    lipi_free(t->added_keys);
    lipi_strmap_free(&t->added_map);
    t->added = toks;
    t->n_added = n;
    t->added_keys = keys;
    t->added_map = map;
    return LIPI_OK;
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    added_free(toks, n);
    lipi_free(keys);
    return st;
}

/* Adds (or, for the same content and id, updates the flags of) an added
 * token; the content is copied. The id must be free or be the model's id for
 * the same string (a tokenizer read from a tokenizer.json also allows a
 * model id of another string, which the token then shadows): anything else
 * is LIPI_EINVAL with both tokens named, and t is unchanged. LIPI_ENOMEM on allocation failure. */
lipi_status lipi_tokenizer_add_token(lipi_tokenizer *t, const lipi_added_token *tok,
                                     lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_added_token *all = NULL;
    size_t n = 0;
    bool replaced = false;

    if (!t || !tok || (!tok->content && tok->len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no tokenizer or token given");
    if (t->n_added >= SIZE_MAX / sizeof *all - 1)
        return oom(err);
    all = lipi_calloc(t->n_added + 1, sizeof *all);
    if (!all) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const lipi_added_token *a = &t->added[i];
        const lipi_added_token *src = a;
        if (a->len == tok->len && a->id == tok->id && memcmp(a->content, tok->content, a->len) == 0) {
            src = tok;
            replaced = true;
        }
        all[n] = *src;
        all[n].content = lipi_strndup(src->content, src->len);
        if (!all[n].content) {
            st = oom(err);
            goto done;
        }
        n++;
    }
    if (!replaced) {
        all[n] = *tok;
        all[n].content = lipi_strndup(tok->content ? tok->content : "", tok->len);
        if (!all[n].content) {
            st = oom(err);
            goto done;
        }
        n++;
    }
    /* set_added steals the array whatever it returns. */
    st = lipi_tokenizer_set_added(t, all, n, err);
    all = NULL;
    n = 0;
done:
    added_free(all, n);
    return st;
}

/* Reads a fixed-size option string: LIPI_EINVAL unless NUL-terminated. */
static bool opt_str_ok(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

/* Builds the model from caller arrays (see tokenizer.h). Every failure
 * leaves t unchanged. */
lipi_status lipi_tokenizer_set_model(lipi_tokenizer *t, lipi_model_type type,
                                     const lipi_model_options *opt,
                                     const char *const *tokens, const size_t *lens,
                                     const double *scores, size_t n_tokens,
                                     const uint32_t (*merges)[2], size_t n_merges,
                                     lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_vocab_model m = {0};
    lipi_strref *tok = NULL;
    size_t d1 = 0, d2 = 0;

    m.opt.unk_id = -1;
    if (!t)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no tokenizer given");
    if (type < LIPI_MODEL_NONE || type > LIPI_MODEL_WORDLEVEL)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "unknown model type %d", (int)type);
    if (n_tokens && (!tokens || !lens))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "tokens or lengths missing");
    if (n_tokens >= UINT32_MAX)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "%zu tokens: ids must fit in 32 bits", n_tokens);
    if (type == LIPI_MODEL_NONE && n_tokens)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "tokens given without a model type");
    if (type == LIPI_MODEL_UNIGRAM && n_tokens && !scores)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "a Unigram model needs scores");
    if (type != LIPI_MODEL_BPE && n_merges)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "only a BPE model has merges");
    if (n_merges && !merges)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "merges missing");

    m.type = type;
    if (opt)
        m.opt = *opt;
    else
        lipi_model_options_default(type, &m.opt);
    if (!opt_str_ok(m.opt.continuing_subword_prefix, sizeof m.opt.continuing_subword_prefix) ||
        !opt_str_ok(m.opt.end_of_word_suffix, sizeof m.opt.end_of_word_suffix))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "continuing_subword_prefix and end_of_word_suffix must be "
                              "NUL-terminated strings of at most 15 bytes");
    if (m.opt.unk_id < -1 || (m.opt.unk_id >= 0 && (uint64_t)m.opt.unk_id >= n_tokens))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "unk_id %lld is not an id of the %zu tokens",
                              (long long)m.opt.unk_id, n_tokens);

    tok = lipi_calloc(n_tokens ? n_tokens : 1, sizeof *tok);
    if (!tok) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < n_tokens; i++) {
        if (!tokens[i] && lens[i]) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "token %zu is NULL", i);
            goto done;
        }
        tok[i] = (lipi_strref){tokens[i] ? tokens[i] : "", lens[i]};
    }
    st = lipi_vocab_build(&m.vocab, tok, n_tokens, &d1, &d2);
    if (st == LIPI_EINVAL) {
        st = lipi_error_set(err, st, NULL, 0, 0, "tokens %zu and %zu are both \"%.*s\"", d1, d2,
                            (int)(tok[d1].len > 64 ? 64 : tok[d1].len), tok[d1].s);
        goto done;
    }
    if (st != LIPI_OK) {
        st = oom(err);
        goto done;
    }

    if (type == LIPI_MODEL_UNIGRAM) {
        m.scores = lipi_reallocarray(NULL, n_tokens ? n_tokens : 1, sizeof *m.scores);
        if (!m.scores) {
            st = oom(err);
            goto done;
        }
        for (size_t i = 0; i < n_tokens; i++) {
            if (!isfinite(scores[i])) {
                st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                    "score of token %zu is not a finite number", i);
                goto done;
            }
            m.scores[i] = scores[i];
        }
    }

    if (type == LIPI_MODEL_BPE) {
        size_t bad = 0;
        m.prefix_null = m.opt.continuing_subword_prefix[0] == '\0';
        m.suffix_null = m.opt.end_of_word_suffix[0] == '\0';
        st = lipi_merges_build(&m, merges, n_merges, &bad);
        if (st == LIPI_EINVAL) {
            uint32_t a = merges[bad][0], b = merges[bad][1];
            if (a >= n_tokens || b >= n_tokens)
                st = lipi_error_set(err, st, NULL, 0, 0,
                                    "merge %zu: ids (%u, %u) out of range (%zu tokens)", bad, a, b,
                                    n_tokens);
            else
                st = lipi_error_set(err, st, NULL, 0, 0,
                                    "merge %zu: \"%.*s\" + \"%.*s\" joined is not a token", bad,
                                    (int)(tok[a].len > 64 ? 64 : tok[a].len), tok[a].s,
                                    (int)(tok[b].len > 64 ? 64 : tok[b].len), tok[b].s);
            goto done;
        }
        if (st != LIPI_OK) {
            st = oom(err);
            goto done;
        }
    }

    if (type == LIPI_MODEL_BPE || type == LIPI_MODEL_WORDPIECE || type == LIPI_MODEL_WORDLEVEL) {
        /* WordPiece and WordLevel always name an unknown token in
         * tokenizer.json; without one, use Hugging Face's default name. */
        const char *s = NULL;
        size_t len = 0;
        if (m.opt.unk_id >= 0) {
            s = tok[m.opt.unk_id].s;
            len = tok[m.opt.unk_id].len;
        } else if (type == LIPI_MODEL_WORDPIECE) {
            s = "[UNK]";
            len = 5;
        } else if (type == LIPI_MODEL_WORDLEVEL) {
            s = "<unk>";
            len = 5;
        }
        if (s) {
            uint32_t id;
            m.unk_token = lipi_strndup(s, len);
            if (!m.unk_token) {
                st = oom(err);
                goto done;
            }
            m.unk_len = len;
            if (m.opt.unk_id < 0 && lipi_vocab_find(&m.vocab, s, len, &id))
                m.opt.unk_id = id;
        }
    }

    st = lipi_tokenizer_install_model(t, &m, err);
done:
    lipi_vocab_model_clear(&m);
    lipi_free(tok);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                 */
/* ------------------------------------------------------------------------ */

const lipi_normalizer *lipi_tokenizer_get_normalizer(const lipi_tokenizer *t)
{
    return t ? t->normalizer : NULL;
}

const lipi_pretokenizer *lipi_tokenizer_get_pretokenizer(const lipi_tokenizer *t)
{
    return t ? t->pretokenizer : NULL;
}

lipi_model_type lipi_tokenizer_model_type(const lipi_tokenizer *t)
{
    return t ? t->model.type : LIPI_MODEL_NONE;
}

const lipi_model_options *lipi_tokenizer_get_model_options(const lipi_tokenizer *t)
{
    return t ? &t->model.opt : NULL;
}

size_t lipi_tokenizer_vocab_size(const lipi_tokenizer *t)
{
    if (!t)
        return 0;
    size_t n = t->model.vocab.n;
    if (t->n_added && (size_t)t->added[t->n_added - 1].id + 1 > n)
        n = (size_t)t->added[t->n_added - 1].id + 1;
    return n;
}

/* Index of the added token with this id (added is sorted by id). */
static bool added_by_id(const lipi_tokenizer *t, uint32_t id, size_t *idx)
{
    size_t lo = 0, hi = t->n_added;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->added[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n_added && t->added[lo].id == id) {
        *idx = lo;
        return true;
    }
    return false;
}

const char *lipi_tokenizer_id_to_token(const lipi_tokenizer *t, uint32_t id, size_t *len)
{
    size_t i;
    if (!t)
        return NULL;
    /* Added tokens first: one may shadow a model id (added_may_shadow). */
    if (added_by_id(t, id, &i)) {
        if (len)
            *len = t->added[i].len;
        return t->added[i].content;
    }
    if (id < t->model.vocab.n && t->model.vocab.tok[id].s) {
        if (len)
            *len = t->model.vocab.tok[id].len;
        return t->model.vocab.tok[id].s;
    }
    return NULL;
}

bool lipi_tokenizer_token_to_id(const lipi_tokenizer *t, const char *s, size_t len,
                                uint32_t *id)
{
    uint32_t idx;
    if (!t || (!s && len))
        return false;
    if (!s)
        s = "";
    if (lipi_strmap_find(&t->added_map, t->added_keys, s, len, &idx)) {
        *id = t->added[idx].id;
        return true;
    }
    return lipi_vocab_find(&t->model.vocab, s, len, id);
}

double lipi_tokenizer_get_score(const lipi_tokenizer *t, uint32_t id)
{
    if (!t || !t->model.scores || id >= t->model.vocab.n)
        return 0.0;
    return t->model.scores[id];
}

size_t lipi_tokenizer_merge_count(const lipi_tokenizer *t)
{
    return t ? t->model.n_merges : 0;
}

void lipi_tokenizer_get_merge(const lipi_tokenizer *t, size_t rank, uint32_t *left,
                              uint32_t *right)
{
    LIPI_ASSERT(t && rank < t->model.n_merges);
    *left = t->model.merges[rank].left;
    *right = t->model.merges[rank].right;
}

size_t lipi_tokenizer_added_count(const lipi_tokenizer *t)
{
    return t ? t->n_added : 0;
}

const lipi_added_token *lipi_tokenizer_get_added(const lipi_tokenizer *t, size_t i)
{
    return t && i < t->n_added ? &t->added[i] : NULL;
}

/* The encoder object and the pipeline around the model: added tokens,
 * normalizer, pre-tokenizer, offsets back to the original text, truncation
 * and post-processing, in Hugging Face's order (see encoder_impl.h). */
#include "encoder/encoder_impl.h"

#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <string.h>

#include "tokenizer/base_json.h"

/* ======================================================================== */
/* Building the encoder                                                      */
/* ======================================================================== */

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool jbool(const json_t *o, const char *key, bool def)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* Notes what the pre-tokenizer does to text (byte-level alphabet, Metaspace
 * replacement), for mapping offsets of rewritten pieces. */
static void scan_pretok(lipi_encoder *e, const json_t *j, int depth)
{
    const char *type = jstr(j, "type");
    if (!type || depth > 64)
        return;
    if (strcmp(type, "ByteLevel") == 0) {
        e->bytelevel_pieces = true;
    } else if (strcmp(type, "Metaspace") == 0) {
        const char *r = jstr(j, "replacement");
        uint32_t cp = 0x2581;
        if (r && *r)
            lipi_utf8_decode(r, strlen(r), &cp);
        e->meta_char = cp;
        const char *ps = jstr(j, "prepend_scheme");
        e->meta_first = ps && strcmp(ps, "first") == 0;
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(j, "pretokenizers");
        for (size_t i = 0; i < json_array_size(arr); i++)
            scan_pretok(e, json_array_get(arr, i), depth + 1);
    }
}

static bool has_bytelevel(const json_t *j, int depth)
{
    const char *type = jstr(j, "type");
    if (!type || depth > 64)
        return false;
    if (strcmp(type, "ByteLevel") == 0)
        return true;
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(j, "pretokenizers");
        for (size_t i = 0; i < json_array_size(arr); i++)
            if (has_bytelevel(json_array_get(arr, i), depth + 1))
                return true;
    }
    return false;
}

/* GPT-2's split pattern: what Hugging Face's ByteLevel pre-tokenizer runs
 * when use_regex is true. */
static json_t *gpt2_split(void)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex",
                     lipi_split_pattern("gpt2"), "behavior", "Isolated", "invert", 0);
}

/* Byte-level BPE runs on raw bytes when the pre-tokenizer's ByteLevel step
 * can be replaced by its split alone: a top-level ByteLevel, or the last step
 * of a Sequence (without a prefix space there). The byte -> alphabet mapping
 * then never happens; each byte's id comes from a table. *out is the
 * replacement JSON (json null for "no pre-tokenizer"), NULL when the
 * rewrite does not apply. */
static json_t *rewrite_bytelevel(lipi_encoder *e, const json_t *j)
{
    const char *type = jstr(j, "type");
    if (!type)
        return NULL;
    if (strcmp(type, "ByteLevel") == 0) {
        e->raw_prefix_space = jbool(j, "add_prefix_space", true);
        return jbool(j, "use_regex", true) ? gpt2_split() : json_null();
    }
    if (strcmp(type, "Sequence") != 0)
        return NULL;
    const json_t *arr = json_object_get(j, "pretokenizers");
    size_t n = json_array_size(arr);
    if (n == 0)
        return NULL;
    const json_t *last = json_array_get(arr, n - 1);
    const char *lt = jstr(last, "type");
    if (!lt || strcmp(lt, "ByteLevel") != 0 || jbool(last, "add_prefix_space", true))
        return NULL;
    json_t *items = json_array();
    if (!items)
        return NULL;
    for (size_t i = 0; i + 1 < n; i++) {
        if (has_bytelevel(json_array_get(arr, i), 0)) {
            json_decref(items);
            return NULL;
        }
        json_array_append(items, json_array_get(arr, i));
    }
    if (jbool(last, "use_regex", true))
        json_array_append_new(items, gpt2_split());
    if (json_array_size(items) == 0) {
        json_decref(items);
        return json_null();
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", items);
}

/* The whole-word table of raw_keys (raw_slot), for byte-level BPE under
 * ignore_merges: the encoder's whole-word lookup, and the build of
 * backtracking's tables on a rank file. Not built when backtracking's
 * tables come from the cache and find whole words themselves (bt_words):
 * 4 MB of slots and a hash of every token at each load of o200k. Two
 * tokens cannot decode to the same bytes (the alphabet is a bijection), so
 * no key is put twice. Load at most 1/2. */
lipi_status lipi_enc_raw_slots(lipi_encoder *e)
{
    size_t n = e->m->vocab.n, cap = 16;
    if (e->raw_slot || !e->raw_bytes || !e->m->opt.ignore_merges)
        return LIPI_OK;
    if (lipi_enc_raw_keys(e) != LIPI_OK)
        return LIPI_ENOMEM;
    while (cap / 2 < n + 1) {
        if (cap > SIZE_MAX / 32)
            return LIPI_ENOMEM;
        cap *= 2;
    }
    e->raw_slot = lipi_calloc(cap, sizeof *e->raw_slot);
    if (!e->raw_slot)
        return LIPI_ENOMEM;
    e->raw_mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        const lipi_strref *k = &e->raw_keys[i];
        if (!k->s)
            continue;
        uint64_t h = lipi_enc_hash(k->s, k->len);
        size_t j = (size_t)h & e->raw_mask;
        while (e->raw_slot[j])
            j = (j + 1) & e->raw_mask;
        e->raw_slot[j] = (h >> 32) << 32 | (uint64_t)(i + 1);
    }
    return LIPI_OK;
}

/* The raw bytes of byte-level token t into out: their count, or -1 when a
 * character is not of the byte alphabet (the token has no raw bytes).
 * lipi_enc_raw_len counts the same without decoding. */
static ptrdiff_t raw_decode(const lipi_strref *t, char *out)
{
    size_t off = 0;
    for (size_t k = 0; k < t->len;) {
        /* The alphabet is below U+0144: one or two bytes each, done here
         * (lipi_utf8_decode per character was ~10% of a warm o200k load);
         * anything else goes the general way. */
        const unsigned char *u = (const unsigned char *)t->s + k;
        uint32_t cp;
        size_t cl;
        if (u[0] < 0x80) {
            cp = u[0];
            cl = 1;
        } else if (u[0] >= 0xC2 && u[0] < 0xE0 && t->len - k >= 2 && (u[1] & 0xC0) == 0x80) {
            cp = (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
            cl = 2;
        } else {
            cl = lipi_utf8_decode(t->s + k, t->len - k, &cp);
        }
        int b = cl ? lipi_bytelevel_byte(cp) : -1;
        if (b < 0)
            return -1;
        out[off++] = (char)b;
        k += cl;
    }
    return (ptrdiff_t)off;
}


lipi_status lipi_enc_raw_keys(lipi_encoder *e)
{
    const lipi_vocab_model *m = e->m;
    size_t n = m->vocab.n, total = 0;
    if (e->raw_keys || !e->raw_bytes)
        return LIPI_OK;
    lipi_strref *keys = lipi_calloc(n ? n : 1, sizeof *keys);
    if (!keys)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < n; i++)
        total += m->vocab.tok[i].s ? m->vocab.tok[i].len : 0;
    char *arena = lipi_malloc(total ? total : 1);
    if (!arena) {
        lipi_free(keys);
        return LIPI_ENOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const lipi_strref *t = &m->vocab.tok[i];
        ptrdiff_t len = t->s ? raw_decode(t, arena + off) : -1;
        if (len >= 0) {
            keys[i] = (lipi_strref){arena + off, (size_t)len};
            off += (size_t)len;
        }
    }
    e->raw_keys = keys;
    e->raw_arena = arena;
    return LIPI_OK;
}

static lipi_status setup_raw_bytes(lipi_encoder *e, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const lipi_vocab_model *m = e->m;
    json_t *pj = NULL, *nj = NULL;

    if (m->type != LIPI_MODEL_BPE || !m->opt.byte_level || e->prefix_len || e->suffix_len ||
        !e->tok->pretokenizer)
        return LIPI_OK;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = lipi_bytelevel_char((uint8_t)b);
        int64_t id = cp < 128 ? e->ascii_id[0][cp] : enc_cpmap_get(&e->char_id[0], cp);
        if (id < 0)
            return LIPI_OK; /* a byte without a token: keep the general path */
        e->byte_id[b] = (uint32_t)id;
    }
    pj = lipi_pretokenizer_to_json(e->tok->pretokenizer);
    if (!pj)
        goto nomem;
    nj = rewrite_bytelevel(e, pj);
    if (!nj) {
        e->raw_prefix_space = false;
        goto done;
    }
    if (!json_is_null(nj)) {
        st = lipi_pretokenizer_from_json(nj, "pre_tokenizer", &e->own_pretok, err);
        if (st != LIPI_OK)
            goto done;
    }
    e->raw_bytes = true;
    e->bytelevel_pieces = false;
    e->pretok = e->own_pretok;
    goto done;
nomem:
    st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
done:
    if (st != LIPI_OK || !e->raw_bytes) {
        lipi_pretokenizer_free(e->own_pretok);
        e->own_pretok = NULL;
        e->raw_prefix_space = false;
    }
    json_decref(pj);
    json_decref(nj);
    return st;
}

lipi_status lipi_encoder_new(const lipi_tokenizer *tok, lipi_encoder **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_encoder *e = NULL;
    json_t *pj = NULL;

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no output pointer given");
    *out = NULL;
    if (!tok)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no tokenizer given");
    if (tok->model.type == LIPI_MODEL_NONE)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "the tokenizer has no model");
    e = lipi_calloc(1, sizeof *e);
    if (!e)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    e->tok = tok;
    e->m = &tok->model;
    e->type = tok->model.type;
    e->norm = tok->normalizer;
    e->pretok = tok->pretokenizer;
    if (tok->pretokenizer) {
        pj = lipi_pretokenizer_to_json(tok->pretokenizer);
        if (!pj) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
        scan_pretok(e, pj, 0);
    }
    TRY(lipi_enc_models_init(e, err));
    TRY(setup_raw_bytes(e, err));
    if (lipi_enc_bt_init(e) != LIPI_OK || (!e->bt_words && lipi_enc_raw_slots(e) != LIPI_OK) ||
        (e->type == LIPI_MODEL_BPE && !e->bt && lipi_enc_bpe_pairs(e) != LIPI_OK)) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    e->scan = lipi_pretokenizer_scanner(e->pretok);
    uint32_t meta = lipi_pretokenizer_meta_split(e->pretok);
    if (meta)
        e->meta_split_len = pt_utf8_put(meta, e->meta_split);
    TRY(lipi_enc_added_build(e, err));
    TRY(lipi_enc_decoders_init(e, err));
    *out = e;
    e = NULL;
done:
    json_decref(pj);
    lipi_encoder_free(e);
    return st;
}

void lipi_encoder_free(lipi_encoder *e)
{
    if (!e)
        return;
    lipi_enc_models_free(e);
    lipi_enc_added_free(&e->raw_added);
    lipi_enc_added_free(&e->norm_added);
    lipi_enc_added_free(&e->raw_plain);
    lipi_enc_added_free(&e->norm_plain);
    lipi_enc_added_strings_free(e);
    lipi_enc_decoders_free(e);
    lipi_pretokenizer_free(e->own_pretok);
    lipi_free(e);
}

lipi_status lipi_session_new(const lipi_encoder *e, lipi_session **out)
{
    if (!out)
        return LIPI_EINVAL;
    *out = NULL;
    if (!e)
        return LIPI_EINVAL;
    lipi_session *s = lipi_calloc(1, sizeof *s);
    if (!s)
        return LIPI_ENOMEM;
    s->enc = e;
    *out = s;
    return LIPI_OK;
}

static void toks_free(enc_toks *t)
{
    lipi_free(t->t);
    memset(t, 0, sizeof *t);
}

void lipi_session_free(lipi_session *s)
{
    if (!s)
        return;
    lipi_normalized_free(&s->norm);
    lipi_normalized_free(&s->cut_norm);
    lipi_pieces_free(&s->pieces);
    lipi_buf_free(&s->segbuf);
    lipi_free(s->segs);
    lipi_free(s->segs2);
    lipi_free(s->ptok);
    lipi_free(s->palign);
    lipi_free(s->pw);
    lipi_free(s->pw_src);
    lipi_free(s->sink_ids);
    lipi_free(s->sym);
    lipi_free(s->heap);
    lipi_free(s->bt_dead);
    lipi_free(s->bt_rank);
    lipi_free(s->bt_valid);
    lipi_free(s->pair_cache);
    lipi_free(s->bpe_cross);
    lipi_buf_free(&s->word);
    lipi_lattice_free(&s->lattice);
    lipi_enc_cache_free(&s->cache);
    for (int i = 0; i < 2; i++)
        toks_free(&s->seq[i]);
    toks_free(&s->out);
    for (size_t i = 0; i < s->encs_cap; i++) {
        toks_free(&s->encs[i]);
        toks_free(&s->encs2[i]);
    }
    lipi_free(s->encs);
    lipi_free(s->encs2);
    lipi_buf_free(&s->pool);
    lipi_buf_free(&s->dec_a);
    lipi_buf_free(&s->dec_b);
    lipi_buf_free(&s->dec_tmp);
    lipi_free(s->dspan_a);
    lipi_free(s->dspan_b);
    lipi_free(s);
}

void lipi_encode_options_default(const lipi_encoder *e, lipi_encode_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->add_special_tokens = true;
    const json_t *tr = e ? e->tok->truncation : NULL;
    if (!tr)
        return;
    const json_t *ml = json_object_get(tr, "max_length");
    if (json_is_integer(ml) && json_integer_value(ml) > 0)
        opt->max_length = (size_t)json_integer_value(ml);
    const char *dir = jstr(tr, "direction");
    opt->truncate_left = dir && strcmp(dir, "Left") == 0;
    const char *strat = jstr(tr, "strategy");
    if (strat && strcmp(strat, "OnlyFirst") == 0)
        opt->strategy = LIPI_TRUNCATE_ONLY_FIRST;
    else if (strat && strcmp(strat, "OnlySecond") == 0)
        opt->strategy = LIPI_TRUNCATE_ONLY_SECOND;
}

/* ======================================================================== */
/* Tokens of a sequence                                                      */
/* ======================================================================== */

/* Room for `more` tokens after the d->n there are. */
static inline lipi_status tok_room(enc_toks *d, size_t more)
{
    if (d->n + more <= d->cap)
        return LIPI_OK;
    return ENC_GROW(d->t, d->cap, d->n + more);
}

static inline lipi_status tok_push(enc_toks *d, const enc_tok *t)
{
    lipi_status st = tok_room(d, 1);
    if (st == LIPI_OK)
        d->t[d->n++] = *t;
    return st;
}

/* Copies p[0..n) into the session's string pool as t's string. */
static lipi_status pool_add(lipi_session *s, const char *p, size_t n, enc_tok *t)
{
    if (n > UINT32_MAX - s->pool.len)
        return LIPI_ENOMEM; /* more than 4 GiB of token strings in one call */
    t->kind = TOK_POOL;
    t->pool_off = (uint32_t)s->pool.len;
    t->val_len = (uint32_t)n;
    return lipi_buf_append(&s->pool, p, n);
}

/* How a sub-segment's coordinates lead back to the original text. */
typedef struct {
    const char *sub;       /* what the pre-tokenizer saw */
    size_t sub_len;
    size_t inserted;       /* 1 when sub[0] is a space put there for ByteLevel */
    size_t norm_off;       /* where the sub-segment starts in the normalized text */
    const char *ntext;     /* normalized text of the segment */
    size_t nlen;
    const lipi_span *align; /* normalized byte -> segment bytes; NULL: identity */
    size_t base;           /* where the segment starts in the original text */
    bool widen;            /* tokens cover whole characters (byte-level) */
} chain;

/* Original-text span of bytes [a, b) of a sub-segment. */
static lipi_span map_span(const chain *c, size_t a, size_t b)
{
    size_t na, nb;
    if (c->inserted) {
        /* The inserted space stands for the first character after it, as
         * Hugging Face aligns a prepended string. */
        size_t first = c->sub_len > 1 ? enc_utf8_len((unsigned char)c->sub[1]) : 0;
        na = a ? a - 1 : 0;
        nb = b ? b - 1 : 0;
        if (a == 0 && nb < first)
            nb = first;
    } else {
        na = a;
        nb = b;
    }
    na += c->norm_off;
    nb += c->norm_off;
    if (nb > c->nlen)
        nb = c->nlen;
    if (na > nb)
        na = nb;
    if (c->widen) {
        while (na > 0 && na < c->nlen && ((unsigned char)c->ntext[na] & 0xC0) == 0x80)
            na--;
        while (nb < c->nlen && ((unsigned char)c->ntext[nb] & 0xC0) == 0x80)
            nb++;
    }
    lipi_span r;
    if (!c->align) {
        r.start = na;
        r.end = nb;
    } else if (na < nb) {
        r.start = c->align[na].start;
        r.end = c->align[nb - 1].end;
    } else {
        r.start = r.end = na < c->nlen   ? c->align[na].start
                          : c->nlen      ? c->align[c->nlen - 1].end
                                         : 0;
    }
    r.start += c->base;
    r.end += c->base;
    return r;
}

/* Span of the character of src[0..slen) that contains byte b. */
static lipi_span char_hull(const char *src, size_t slen, size_t b)
{
    size_t cs = b, ce = b + 1;
    while (cs > 0 && ((unsigned char)src[cs] & 0xC0) == 0x80)
        cs--;
    while (ce < slen && ((unsigned char)src[ce] & 0xC0) == 0x80)
        ce++;
    return (lipi_span){cs, ce};
}

/* Byte-level pieces: every character of the text stands for one byte of the
 * source, and Hugging Face aligns it with that byte's whole character. The
 * piece's bytes are a run inside its source span (a later split may cut a
 * character, and both halves then report the character's span), possibly
 * after a space put in front (add_prefix_space), which is aligned with the
 * first source character. false when the text is not of that shape. */
static bool align_bytelevel(lipi_session *s, const char *text, size_t tlen, const char *src,
                            size_t slen)
{
    lipi_buf *dec = &s->word;
    dec->len = 0;
    for (size_t i = 0; i < tlen;) {
        uint32_t cp;
        size_t cl = lipi_utf8_decode(text + i, tlen - i, &cp);
        int b = cl ? lipi_bytelevel_byte(cp) : -1;
        if (b < 0)
            return false;
        char c = (char)b;
        if (lipi_buf_append(dec, &c, 1) != LIPI_OK)
            return false;
        i += cl;
    }
    size_t n = dec->len, inserted = 0;
    const char *at = n ? memmem(src, slen, dec->p, n) : src;
    if (!at && n > 1 && dec->p[0] == ' ') {
        at = memmem(src, slen, dec->p + 1, n - 1);
        inserted = 1;
    }
    if (!at)
        return false;
    size_t p = (size_t)(at - src), k = 0;
    for (size_t i = 0; i < tlen; k++) {
        size_t cl = enc_utf8_len((unsigned char)text[i]);
        lipi_span sp;
        if (inserted && k == 0)
            sp = slen ? char_hull(src, slen, 0) : (lipi_span){0, 0};
        else
            sp = char_hull(src, slen, p + k - inserted);
        for (size_t q = 0; q < cl && i + q < tlen; q++)
            s->palign[i + q] = sp;
        i += cl;
    }
    return true;
}

/* Aligns each byte of a rewritten piece text[0..tlen) with bytes of its
 * source src[0..slen) (offsets relative to src), the way the pre-tokenizers
 * rewrite: the GPT-2 alphabet (above), the Metaspace replacement for a space
 * and a prepended character (aligned with the first source character, as
 * Hugging Face aligns a prepended string). Anything else aligns every byte
 * with the whole source. */
static lipi_status align_piece(lipi_session *s, const char *text, size_t tlen, const char *src,
                               size_t slen)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = ENC_GROW(s->palign, s->palign_cap, tlen + 1);
    if (st != LIPI_OK)
        return st;
    if (e->bytelevel_pieces) {
        if (align_bytelevel(s, text, tlen, src, slen))
            return LIPI_OK;
        goto whole;
    }
    size_t i = 0, j = 0;
    while (i < tlen) {
        size_t cl = enc_utf8_len((unsigned char)text[i]);
        if (cl > tlen - i)
            cl = tlen - i;
        uint32_t cp = enc_utf8_cp(text + i, cl);
        lipi_span sp;
        size_t scl = j < slen ? enc_utf8_len((unsigned char)src[j]) : 0;
        if (scl > slen - j)
            scl = slen - j;
        if (j < slen && scl == cl && memcmp(text + i, src + j, cl) == 0) {
            sp = (lipi_span){j, j + scl};
            j += scl;
        } else if (e->meta_char && cp == e->meta_char) {
            if (j < slen && src[j] == ' ') {
                sp = (lipi_span){j, j + 1};
                j++;
            } else {
                sp = (lipi_span){j, j + scl};
            }
        } else {
            goto whole;
        }
        for (size_t k = 0; k < cl; k++)
            s->palign[i + k] = sp;
        i += cl;
    }
    if (j == slen)
        return LIPI_OK;
whole:
    for (size_t k = 0; k < tlen; k++)
        s->palign[k] = (lipi_span){0, slen};
    return LIPI_OK;
}

/* Appends the tokens of a piece without offsets (the common, fast case). */
static inline __attribute__((always_inline)) lipi_status
append_ids(lipi_session *s, enc_toks *d, const enc_piece *pc, const enc_ptok *toks, size_t nt,
           uint8_t seq)
{
    lipi_status st = tok_room(d, nt);
    if (st != LIPI_OK)
        return st;
    enc_tok *out = d->t + d->n;
    const enc_tok tmpl = {.type_id = seq, .seq = seq};
    uint32_t text = 0;
    d->n += nt;
    /* No call in the loop over tokens, so it stays tight; the tokens that
     * are their own text (rare) get their strings after. */
    for (size_t k = 0; k < nt; k++) {
        out[k] = tmpl;
        out[k].id = toks[k].id;
        text |= toks[k].end;
    }
    for (size_t k = 0; (text & ENC_PTOK_TEXT) && k < nt; k++) {
        const enc_ptok *p = &toks[k];
        if (p->end & ENC_PTOK_TEXT) {
            st = pool_add(s, pc->text + p->start, (p->end & ~ENC_PTOK_TEXT) - p->start, &out[k]);
            if (st != LIPI_OK)
                return st;
        }
    }
    return LIPI_OK;
}

/* Appends the tokens of a piece with offsets in the original text. */
static lipi_status append_with_offsets(lipi_session *s, enc_toks *d, const chain *c,
                                       const enc_piece *pc, lipi_span src,
                                       const enc_ptok *toks, size_t nt, uint8_t seq)
{
    const char *text = pc->text;
    size_t tlen = pc->len;
    lipi_status st = LIPI_OK;
    /* A scanned piece is a span of sub itself: no need to compare. */
    bool plain = tlen == src.end - src.start &&
                 (text == c->sub + src.start || memcmp(text, c->sub + src.start, tlen) == 0);
    if (!plain)
        TRY(align_piece(s, text, tlen, c->sub + src.start, src.end - src.start));
    TRY(tok_room(d, nt));
    if (plain && !c->inserted && !c->align) {
        /* map_span with nothing to map (tiktoken, byte-level BPE without
         * a prefix space, most of every text): the same arithmetic, with
         * the chain's constants out of the per-token loop. */
        size_t off = c->norm_off + src.start, nlen = c->nlen;
        const unsigned char *nt_ = (const unsigned char *)c->ntext;
        bool widen = c->widen;
        for (size_t k = 0; k < nt; k++) {
            const enc_ptok *p = &toks[k];
            size_t pend = p->end & ~ENC_PTOK_TEXT;
            size_t na = off + p->start, nb = off + pend;
            if (nb > nlen)
                nb = nlen;
            if (na > nb)
                na = nb;
            if (widen) {
                while (na > 0 && na < nlen && (nt_[na] & 0xC0) == 0x80)
                    na--;
                while (nb < nlen && (nt_[nb] & 0xC0) == 0x80)
                    nb++;
            }
            enc_tok *t = &d->t[d->n];
            *t = (enc_tok){.id = p->id, .type_id = seq, .seq = seq,
                           .off = {na + c->base, nb + c->base}};
            if (p->end & ENC_PTOK_TEXT)
                TRY(pool_add(s, text + p->start, pend - p->start, t));
            d->n++;
        }
        goto done;
    }
    for (size_t k = 0; k < nt; k++) {
        const enc_ptok *p = &toks[k];
        size_t pend = p->end & ~ENC_PTOK_TEXT, a, b;
        enc_tok *t = &d->t[d->n];
        *t = (enc_tok){.id = p->id, .type_id = seq, .seq = seq};
        if (plain) {
            a = src.start + p->start;
            b = src.start + pend;
        } else if (pend > p->start) {
            a = src.start + s->palign[p->start].start;
            b = src.start + s->palign[pend - 1].end;
        } else {
            a = b = src.start + (p->start < tlen ? s->palign[p->start].start : src.end - src.start);
        }
        t->off = map_span(c, a, b);
        if (p->end & ENC_PTOK_TEXT)
            TRY(pool_add(s, text + p->start, pend - p->start, t));
        d->n++;
    }
done:
    return st;
}

/* lipi_encode_stream: appends an id to the slice, handing a full slice to
 * the sink. */
static inline lipi_status stream_put(lipi_session *s, uint32_t id)
{
    s->sink_ids[s->sink_n++] = id;
    if (s->sink_n < LIPI_STREAM_IDS)
        return LIPI_OK;
    s->sink_total += s->sink_n;
    s->sink_n = 0;
    return s->sink(s->sink_ctx, s->sink_ids, LIPI_STREAM_IDS);
}

/* Streams the added tokens waiting in d (they come before the piece), then
 * the piece's ids, which never enter d: one piece's tokens at a time are
 * all a streamed text holds. */
static __attribute__((noinline)) lipi_status stream_piece_slow(lipi_session *s, enc_toks *d,
                                                               const enc_ptok *toks, size_t nt)
{
    lipi_status st = LIPI_OK;
    for (size_t k = 0; k < d->n && st == LIPI_OK; k++)
        st = stream_put(s, d->t[k].id);
    d->n = 0;
    s->pool.len = 0;
    for (size_t k = 0; k < nt && st == LIPI_OK; k++)
        st = stream_put(s, toks[k].id);
    return st;
}

/* Inline, as append_ids: mostly nothing waits in d and the piece's ids
 * fit the slice, which takes them in one tight loop. */
static inline lipi_status stream_piece(lipi_session *s, enc_toks *d, const enc_ptok *toks,
                                       size_t nt)
{
    size_t at = s->sink_n;
    if (d->n || nt >= LIPI_STREAM_IDS - at)
        return stream_piece_slow(s, d, toks, nt);
    uint32_t *out = s->sink_ids + at;
    for (size_t k = 0; k < nt; k++)
        out[k] = toks[k].id;
    s->sink_n = at + nt;
    return LIPI_OK;
}

lipi_status lipi_enc_stream_ptok(lipi_session *s)
{
    if (!s->sink)
        return LIPI_OK;
    lipi_status st = stream_piece(s, &s->seq[0], s->ptok, s->ptok_n);
    s->ptok_n = 0;
    return st;
}

/* Runs the model over one piece (through the cache) and appends its
 * tokens to d. Inlined into the loops over pieces: it runs once per piece. */
static inline __attribute__((always_inline)) lipi_status
emit_piece(lipi_session *s, enc_toks *d, const chain *c, const enc_piece *pc, lipi_span src,
           uint8_t seq, bool want_offsets, lipi_error *err)
{
    const enc_ptok *toks = NULL;
    size_t nt = 0;
    const lipi_vocab_model *m = s->enc->m;
    bool f32 = s->enc->f32_viterbi;
    if (pc->len <= LIPI_ENC_CACHE_MAX_KEY &&
        (!f32 || fabsf(s->f32_run) < ENC_F32_CACHE_LIMIT)) {
        toks = lipi_enc_cache_get(s, pc->text, pc->len, pc->hash, &nt);
        /* SentencePiece's running score over a cached word, added as its
         * Viterbi adds each node (see lipi_lattice_viterbi): an unknown
         * token stands for one unknown node per character. */
        if (toks && f32) {
            float run = s->f32_run, unk_score = (float)s->enc->unk_score;
            int64_t unk = s->enc->unk_id;
            const double *scores = m->scores;
            for (size_t k = 0; k < nt; k++) {
                const enc_ptok *p = &toks[k];
                if ((int64_t)p->id == unk && (p->end & ENC_PTOK_TEXT)) {
                    for (size_t i = p->start; i < (p->end & ~ENC_PTOK_TEXT); i++)
                        if (((unsigned char)pc->text[i] & 0xC0) != 0x80)
                            run += unk_score; /* in float, as there */
                } else {
                    run = (float)((double)run + (double)(float)scores[p->id]);
                }
            }
            s->f32_run = run;
        }
    }
    if (!toks) {
        lipi_status st = lipi_enc_model(s, pc->text, pc->len, pc->hash, &toks, &nt, err);
        if (st != LIPI_OK)
            return st;
    }
    if (want_offsets)
        return append_with_offsets(s, d, c, pc, src, toks, nt, seq);
    if (__builtin_expect(s->sink != NULL, 0))
        return stream_piece(s, d, toks, nt);
    return append_ids(s, d, pc, toks, nt, seq);
}

/* Starts fetching the cache slot of a piece with hash h and, for a word
 * the cache lacks, its whole-word slot (ignore_merges; backtracking finds
 * whole words by its own walk). */
static inline void piece_prefetch(const lipi_session *s, uint64_t h)
{
    const lipi_encoder *e = s->enc;
    lipi_enc_cache_prefetch(s, h);
    if (e->raw_slot && !e->bt_words)
        __builtin_prefetch(&e->raw_slot[h & e->raw_mask]);
}

/* Adds piece [a, b) of c->sub to s->pw / s->pw_src and starts fetching its
 * slots. */
static inline __attribute__((always_inline)) lipi_status
scanned_piece(lipi_session *s, const chain *c, size_t *np, size_t a, size_t b)
{
    if (*np == s->pw_cap || *np == s->pw_src_cap) {
        lipi_status st = ENC_GROW(s->pw, s->pw_cap, *np + 1);
        if (st == LIPI_OK)
            st = ENC_GROW(s->pw_src, s->pw_src_cap, *np + 1);
        if (st != LIPI_OK)
            return st;
    }
    uint64_t h = lipi_enc_hash(c->sub + a, b - a);
    s->pw[*np] = (enc_piece){c->sub + a, b - a, h};
    s->pw_src[*np] = (lipi_span){a, b};
    piece_prefetch(s, h);
    (*np)++;
    return LIPI_OK;
}

#define ENC_PIECE_WINDOW 4096
/* spm_bpe8k, perf samples in lipi_enc_cache_get and emit_scanned (two runs
 * each, bench/encode.c): no second fetch 17.2-17.8%, 4 pieces ahead
 * 13.9-14.0%, 8 ahead 15.0-15.5%. */
#define ENC_SLOT_AHEAD 4

/* Runs the model over the pieces s->pw[0..np) found by encode_scanned. */
static lipi_status emit_scanned(lipi_session *s, enc_toks *d, const chain *c, size_t np,
                                uint8_t seq, bool want_offsets, lipi_error *err)
{
    for (size_t k = 0; k < np; k++) {
        /* The slots fetched as the pieces were found are often no longer
         * near when they are read (ENC_SLOT_AHEAD's numbers): fetch them
         * once more, a few pieces ahead. */
        if (k + ENC_SLOT_AHEAD < np)
            lipi_enc_cache_prefetch(s, s->pw[k + ENC_SLOT_AHEAD].hash);
        if (k + 1 < np)
            lipi_enc_cache_prefetch_entry(s, s->pw[k + 1].hash);
        lipi_status st = emit_piece(s, d, c, &s->pw[k], s->pw_src[k], seq, want_offsets, err);
        if (st != LIPI_OK)
            return st;
    }
    return LIPI_OK;
}

/* The first byte c of s[i..n), or n. Inline, 16 bytes at a time: the
 * next replacement character is a piece (a few dozen bytes) away, where a
 * call to memchr cost more than the search (spm_bpe8k, callgrind). */
static inline size_t find_byte(const char *s, size_t i, size_t n, char c)
{
#ifdef __SSE2__
    const __m128i v = _mm_set1_epi8(c);
    for (; n - i >= 16; i += 16) {
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)), v));
        if (m)
            return i + (size_t)__builtin_ctz(m);
    }
#endif
    while (i < n && s[i] != c)
        i++;
    return i;
}

/* encode_sub for a pre-tokenizer that is one scanner's Split, or a
 * Metaspace cutting text without spaces: the pieces are spans of the text,
 * found here, so nothing is copied. */
static lipi_status encode_scanned(lipi_session *s, enc_toks *d, chain *c, uint8_t seq,
                                  bool want_offsets, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    const lipi_scanner *scan = e->scan;
    lipi_status st = LIPI_OK;
    const char *t = c->sub;
    size_t n = c->sub_len, np = 0, i = 0, prev = 0;
    if (!scan) {
        /* Metaspace: each piece up to the next replacement character. */
        const char *r = e->meta_split;
        size_t rl = e->meta_split_len;
        for (i = 1; i + rl <= n; i++) {
            i = find_byte(t, i, n, r[0]);
            if (i + rl > n)
                break;
            if (lipi_enc_eq(t + i, r, rl)) { /* inline: a call per piece cost more */
                TRY(scanned_piece(s, c, &np, prev, i));
                prev = i;
                if (np >= ENC_PIECE_WINDOW) {
                    TRY(emit_scanned(s, d, c, np, seq, want_offsets, err));
                    np = 0;
                }
            }
        }
        i = n;
    }
    while (i < n) {
        size_t m = lipi_scan_match(scan, t, n, i);
        if (!m) {
            i += enc_utf8_len((unsigned char)t[i]);
            continue;
        }
        if (prev != i)
            TRY(scanned_piece(s, c, &np, prev, i));
        TRY(scanned_piece(s, c, &np, i, i + m));
        i = prev = i + m;
        /* Pieces go to the model a window at a time, so a long text holds
         * no list of all its pieces (40 bytes each). */
        if (np >= ENC_PIECE_WINDOW) {
            TRY(emit_scanned(s, d, c, np, seq, want_offsets, err));
            np = 0;
        }
    }
    if (prev < n)
        TRY(scanned_piece(s, c, &np, prev, n));
    TRY(emit_scanned(s, d, c, np, seq, want_offsets, err));
done:
    return st;
}

/* Pre-tokenizes one sub-segment (normalized text, no added tokens) and runs
 * the model over its pieces. */
static lipi_status encode_sub(lipi_session *s, enc_toks *d, chain *c, bool first_split,
                              uint8_t seq, bool want_offsets, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    const char *sub = c->ntext + c->norm_off;
    size_t n = c->sub_len;

    c->inserted = 0;
    c->sub = sub;
    if (e->raw_prefix_space && n > 0 && sub[0] != ' ') {
        s->segbuf.len = 0;
        TRY(lipi_buf_append(&s->segbuf, " ", 1));
        TRY(lipi_buf_append(&s->segbuf, sub, n));
        c->sub = s->segbuf.p;
        c->sub_len = n + 1;
        c->inserted = 1;
    }
    if (!e->pretok) {
        lipi_span whole = {0, c->sub_len};
        enc_piece pc = {c->sub, c->sub_len, lipi_enc_hash(c->sub, c->sub_len)};
        return emit_piece(s, d, c, &pc, whole, seq, want_offsets, err);
    }
    if (e->scan || (e->meta_split_len && !memchr(c->sub, ' ', c->sub_len)))
        return encode_scanned(s, d, c, seq, want_offsets, err);
    /* encode_seq checked the input; normalizers and added-token splits
     * keep text valid UTF-8 (charsmap replacements are checked at load). */
    TRY(lipi_pretokenize_valid(e->pretok, c->sub, c->sub_len, &s->pieces, err));
    size_t np = s->pieces.count;
    TRY(ENC_GROW(s->pw, s->pw_cap, np));
    /* First the pieces' hashes, so that their cache slots can be fetched
     * from memory while earlier pieces are being looked up. */
    for (size_t i = 0; i < np; i++) {
        const char *text = s->pieces.text + s->pieces.text_off[i];
        size_t tlen = s->pieces.text_off[i + 1] - s->pieces.text_off[i];
        lipi_span src = s->pieces.src[i];
        /* Metaspace "first" prepends only to the split that starts the
         * text; a pre-tokenizer that sees one split at a time cannot know,
         * so a replacement with no source before a later split goes. */
        if (i == 0 && e->meta_first && !first_split && tlen) {
            size_t cl = enc_utf8_len((unsigned char)text[0]);
            uint32_t cp = cl <= tlen ? enc_utf8_cp(text, cl) : 0;
            uint32_t scp = 0;
            if (src.end > src.start) {
                size_t scl = enc_utf8_len((unsigned char)c->sub[src.start]);
                if (scl <= src.end - src.start)
                    scp = enc_utf8_cp(c->sub + src.start, scl);
            }
            if (cp == e->meta_char && scp != ' ' && scp != e->meta_char) {
                text += cl;
                tlen -= cl;
            }
        }
        uint64_t h = lipi_enc_hash(text, tlen);
        s->pw[i] = (enc_piece){text, tlen, h};
        piece_prefetch(s, h);
    }
    for (size_t i = 0; i < np; i++) {
        if (i + 1 < np)
            lipi_enc_cache_prefetch_entry(s, s->pw[i + 1].hash);
        if (s->pw[i].len == 0)
            continue;
        TRY(emit_piece(s, d, c, &s->pw[i], s->pieces.src[i], seq, want_offsets, err));
    }
done:
    return st;
}

/* The added-token matcher for the session's special-token policy: m, or
 * its special-free twin under LIPI_SPECIAL_TEXT. */
static const enc_added *policy_matcher(const lipi_session *s, const enc_added *m,
                                       const enc_added *plain, bool has_special)
{
    return s->special == LIPI_SPECIAL_TEXT && has_special ? plain : m;
}

/* LIPI_SPECIAL_ERROR: fails when added token `id`, found at byte `at` of
 * the text, is a special token. */
static lipi_status refuse_special(const lipi_session *s, uint32_t id, size_t at, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    if (s->special != LIPI_SPECIAL_ERROR || !lipi_enc_is_special(e->tok, id))
        return LIPI_OK;
    size_t len = 0;
    const char *tok = lipi_enc_id_to_token(e, id, &len);
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, at,
                          "special token \"%.*s\" at byte %zu (expected text without special "
                          "tokens: allow them, or encode them as text)",
                          (int)(len > 64 ? 64 : len), tok ? tok : "", at);
}

/* Encodes one text segment without raw added tokens: normalizes it, splits
 * it at normalized added tokens, pre-tokenizes the rest. */
static lipi_status encode_part(lipi_session *s, enc_toks *d, const char *text, size_t len,
                               size_t base, uint8_t seq, bool want_offsets, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    chain c = {.base = base, .widen = e->raw_bytes};
    size_t nsegs = 0;

    if (e->norm) {
        TRY(lipi_normalize_valid(e->norm, text, len, &s->norm, want_offsets, err));
        c.ntext = s->norm.text;
        c.nlen = s->norm.len;
        c.align = want_offsets ? s->norm.align : NULL;
    } else {
        c.ntext = text;
        c.nlen = len;
    }
    const enc_added *na = policy_matcher(s, &e->norm_added, &e->norm_plain, e->norm_has_special);
    if (na->n) {
        TRY(lipi_enc_added_split(na, c.ntext, c.nlen, &s->segs2, &s->segs2_cap, &nsegs));
    } else {
        TRY(ENC_GROW(s->segs2, s->segs2_cap, 1));
        s->segs2[0] = (enc_seg){0, c.nlen, -1};
        nsegs = 1;
    }
    for (size_t k = 0; k < nsegs; k++) {
        enc_seg g = s->segs2[k];
        if (g.id >= 0) {
            /* Offsets of the normalized text: the segment's start is the
             * nearest byte of the caller's text that is known here. */
            TRY(refuse_special(s, (uint32_t)g.id, e->norm ? base : base + g.start, err));
            enc_tok t = {.id = (uint32_t)g.id, .type_id = seq, .seq = seq};
            c.norm_off = g.start;
            c.sub_len = g.end - g.start;
            c.sub = c.ntext + g.start;
            c.inserted = 0;
            if (want_offsets) {
                bool w = c.widen;
                c.widen = false;
                t.off = map_span(&c, 0, g.end - g.start);
                c.widen = w;
            }
            TRY(pool_add(s, c.ntext + g.start, g.end - g.start, &t));
            TRY(tok_push(d, &t));
            continue;
        }
        if (g.end == g.start)
            continue;
        c.norm_off = g.start;
        c.sub_len = g.end - g.start;
        TRY(encode_sub(s, d, &c, base == 0 && g.start == 0, seq, want_offsets, err));
    }
done:
    return st;
}

/* A streamed segment longer than this is encoded a part at a time. */
#define ENC_STREAM_PART ((size_t)1 << 20)

/* The end of the part of text[0..len) that starts at a: right after the
 * first character from a + ENC_STREAM_PART on where the whole text's
 * pieces are cut whatever comes before or after (its normalized form ends
 * in a character the pre-tokenizer always cuts after, and the normalizer
 * works character by character); len when there is none in the next
 * ENC_STREAM_PART bytes (then the text has few cuts: the rest stays whole
 * rather than be searched to its end for each part). */
static size_t stream_part_end(lipi_session *s, const char *text, size_t len, size_t a)
{
    const lipi_encoder *e = s->enc;
    if (len - a <= ENC_STREAM_PART)
        return len;
    size_t i = a + ENC_STREAM_PART, stop = len - i > ENC_STREAM_PART ? i + ENC_STREAM_PART : len;
    while (i < len && ((unsigned char)text[i] & 0xC0) == 0x80)
        i++;
    while (i < stop) {
        unsigned char b = (unsigned char)text[i];
        /* ASCII letters and digits are no pre-tokenizer's cut. */
        if ((b | 0x20) - 'a' < 26 || b - '0' < 10) {
            i++;
            continue;
        }
        size_t l = enc_utf8_len(b);
        uint32_t c = enc_utf8_cp(text + i, l), last;
        i += l;
        if (lipi_pretokenizer_cuts_after(e->pretok, c) &&
            lipi_normalizer_cut_after(e->norm, c, &s->cut_norm, &last) &&
            lipi_pretokenizer_cuts_after(e->pretok, last))
            return i;
    }
    return len;
}

/* encode_part, a part at a time when the segment is long and streamed:
 * the normalized text, its pieces and their list (~7 bytes a byte of
 * text between them) are then a part's, not the text's. Parts end where
 * stream_part_end says the pieces are the whole segment's; the setups
 * where a part's start could still matter are left whole: normalized added
 * tokens (a match could span the cut), a space put before the text. */
static lipi_status encode_segment(lipi_session *s, enc_toks *d, const char *text, size_t len,
                                  size_t base, uint8_t seq, bool want_offsets, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    if (!s->sink || want_offsets || len <= ENC_STREAM_PART || !e->pretok || e->raw_prefix_space ||
        policy_matcher(s, &e->norm_added, &e->norm_plain, e->norm_has_special)->n)
        return encode_part(s, d, text, len, base, seq, want_offsets, err);
    for (size_t a = 0; a < len && st == LIPI_OK;) {
        size_t b = stream_part_end(s, text, len, a);
        st = encode_part(s, d, text + a, b - a, base + a, seq, false, err);
        a = b;
    }
    return st;
}

/* Encodes one text into d (cleared first). */
static lipi_status encode_seq(lipi_session *s, enc_toks *d, const char *text, size_t len,
                              uint8_t seq, bool want_offsets, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    size_t nsegs = 0;

    d->n = 0;
    s->f32_run = 0.0f;
    /* Checked here once for the whole text, so that the offset is the
     * text's (the normalizer only sees segments between added tokens). */
    size_t bad = s->utf8_checked ? len : lipi_utf8_valid_prefix(text, len);
    if (bad < len)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, bad,
                              "invalid UTF-8 at byte %zu, expected UTF-8 text", bad);
    const enc_added *ra = policy_matcher(s, &e->raw_added, &e->raw_plain, e->raw_has_special);
    if (ra->n) {
        TRY(lipi_enc_added_split(ra, text, len, &s->segs, &s->segs_cap, &nsegs));
    } else {
        TRY(ENC_GROW(s->segs, s->segs_cap, 1));
        s->segs[0] = (enc_seg){0, len, -1};
        nsegs = 1;
    }
    for (size_t k = 0; k < nsegs; k++) {
        enc_seg g = s->segs[k];
        if (g.id >= 0) {
            TRY(refuse_special(s, (uint32_t)g.id, g.start, err));
            enc_tok t = {.id = (uint32_t)g.id, .type_id = seq, .seq = seq};
            t.off = (lipi_span){g.start, g.end};
            TRY(pool_add(s, text + g.start, g.end - g.start, &t));
            TRY(tok_push(d, &t));
            continue;
        }
        if (g.end == g.start)
            continue;
        TRY(encode_segment(s, d, text + g.start, g.end - g.start, g.start, seq, want_offsets,
                           err));
    }
done:
    return st;
}

/* ======================================================================== */
/* Truncation and post-processing                                            */
/* ======================================================================== */

static size_t post_added(const lipi_post_processor *p, bool pair)
{
    switch (p->type) {
    case LIPI_POST_BERT: return pair ? 3 : 2;
    case LIPI_POST_ROBERTA: return pair ? 4 : 2;
    case LIPI_POST_BYTELEVEL: return 0;
    case LIPI_POST_TEMPLATE: {
        size_t n = 0;
        const lipi_template_piece *t = pair ? p->pair : p->single;
        size_t nt = pair ? p->n_pair : p->n_single;
        for (size_t i = 0; i < nt; i++)
            if (t[i].is_special)
                n += p->special[t[i].special].n;
        return n;
    }
    case LIPI_POST_SEQUENCE: {
        size_t n = 0;
        for (size_t i = 0; i < p->n_items; i++)
            n += post_added(&p->items[i], pair);
        return n;
    }
    }
    return 0;
}

/* Keeps n tokens of t (the first n, or the last n with left). */
static void truncate_toks(enc_toks *t, size_t n, bool left)
{
    if (t->n <= n)
        return;
    if (left)
        memmove(t->t, t->t + (t->n - n), n * sizeof *t->t);
    t->n = n;
}

/* Hugging Face's truncate_encodings, as tokenizers 0.23.2 behaves (checked
 * against it for pairs of lengths up to 12, max_length 3..10, with and
 * without special tokens). max is max_length less the special tokens. */
static lipi_status truncate_seqs(lipi_session *s, bool pair, size_t max,
                                 const lipi_encode_options *opt, lipi_error *err)
{
    enc_toks *a = &s->seq[0], *b = pair ? &s->seq[1] : NULL;
    size_t total = a->n + (b ? b->n : 0);
    if (total <= max)
        return LIPI_OK;
    size_t to_remove = total - max;
    if (opt->strategy == LIPI_TRUNCATE_LONGEST_FIRST) {
        if (!b) {
            truncate_toks(a, max, opt->truncate_left);
            return LIPI_OK;
        }
        size_t n1 = a->n, n2 = b->n;
        if ((n1 < n2 ? n1 : n2) >= opt->max_length) {
            /* Both at least max_length long (before the special tokens are
             * taken off): tokenizers 0.23 gives the smaller half to the
             * first text, whichever is longer. */
            truncate_toks(a, max / 2, opt->truncate_left);
            truncate_toks(b, max / 2 + max % 2, opt->truncate_left);
            return LIPI_OK;
        }
        bool swap = n1 > n2;
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        if (n1 > max)
            n2 = n1;
        else
            n2 = n1 > max - n1 ? n1 : max - n1;
        if (n1 + n2 > max) {
            n1 = max / 2;
            n2 = n1 + max % 2;
        }
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        truncate_toks(a, n1, opt->truncate_left);
        truncate_toks(b, n2, opt->truncate_left);
        return LIPI_OK;
    }
    enc_toks *target = opt->strategy == LIPI_TRUNCATE_ONLY_FIRST ? a : b;
    if (!target)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "truncation only_second needs a pair of texts");
    if (target->n <= to_remove)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "the text to truncate has %zu %s, too few to drop %zu",
                              target->n, lipi_plural(target->n, "token", "tokens"), to_remove);
    truncate_toks(target, target->n - to_remove, opt->truncate_left);
    return LIPI_OK;
}

/* A list of encodings, as Hugging Face's processors pass them along. */
static lipi_status encs_reserve(lipi_session *s, size_t n)
{
    if (n <= s->encs_cap)
        return LIPI_OK;
    size_t cap = s->encs_cap;
    enc_toks *a = lipi_reallocarray(s->encs, n, sizeof *a);
    if (!a)
        return LIPI_ENOMEM;
    s->encs = a;
    enc_toks *b = lipi_reallocarray(s->encs2, n, sizeof *b);
    if (!b)
        return LIPI_ENOMEM;
    s->encs2 = b;
    for (size_t i = cap; i < n; i++) {
        memset(&s->encs[i], 0, sizeof s->encs[i]);
        memset(&s->encs2[i], 0, sizeof s->encs2[i]);
    }
    s->encs_cap = n;
    return LIPI_OK;
}

static lipi_status copy_toks(enc_toks *d, const enc_toks *src)
{
    d->n = 0;
    lipi_status st = ENC_GROW(d->t, d->cap, src->n);
    if (st != LIPI_OK)
        return st;
    if (src->n)
        memcpy(d->t, src->t, src->n * sizeof *d->t);
    d->n = src->n;
    return LIPI_OK;
}

static enc_tok special_tok(uint32_t id, const char *val, size_t len, uint32_t type_id)
{
    enc_tok t = {.id = id, .type_id = type_id, .val = val, .val_len = (uint32_t)len,
                 .kind = TOK_PTR, .special = 1, .seq = 255};
    return t;
}

/* Hugging Face's process_offsets: trims leading / trailing spaces ('Ġ' or
 * Unicode white space) of each token's string off its offsets. */
/* Moves byte offset `at` of text[0..len) over n characters forward (back
 * when back is true); false when the text runs out first. */
static bool step_chars(const char *text, size_t len, size_t *at, size_t n, bool back)
{
    size_t p = *at;
    for (size_t k = 0; k < n; k++) {
        if (back) {
            if (p == 0)
                return false;
            p--;
            while (p > 0 && ((unsigned char)text[p] & 0xC0) == 0x80)
                p--;
        } else {
            if (p >= len)
                return false;
            p += enc_utf8_len((unsigned char)text[p]);
        }
    }
    *at = p;
    return true;
}

/* Hugging Face's process_offsets: trims leading / trailing spaces ('Ġ' or
 * Unicode white space) of each token's string off its offsets. Hugging Face
 * counts them in characters of the original text (its bindings trim after
 * offsets became character offsets), so here offsets move by that many
 * characters: a byte-level 'Ġ' stands for a one-byte space, a literal
 * U+3000 in a token for three bytes. */
static void trim_offsets(const lipi_session *s, enc_toks *t, bool add_prefix_space)
{
    for (size_t i = 0; i < t->n; i++) {
        enc_tok *k = &t->t[i];
        size_t n, lead = 0, trail = 0, p = 0;
        const char *v = lipi_enc_tok_str(s, k, &n);
        bool all = true;
        while (p < n) {
            size_t cl = enc_utf8_len((unsigned char)v[p]);
            if (cl > n - p)
                cl = n - p;
            uint32_t cp = enc_utf8_cp(v + p, cl);
            if (cp != 0x120 && !lipi_enc_is_space(cp)) {
                all = false;
                break;
            }
            lead++;
            p += cl;
        }
        if (all) {
            trail = lead;
        } else {
            p = n;
            while (p > 0) {
                size_t c = p - 1;
                while (c > 0 && ((unsigned char)v[c] & 0xC0) == 0x80)
                    c--;
                uint32_t cp = enc_utf8_cp(v + c, p - c);
                if (cp != 0x120 && !lipi_enc_is_space(cp))
                    break;
                trail++;
                p = c;
            }
        }
        if ((lead == 0 && trail == 0) || k->seq > 1)
            continue;
        const char *text = s->text[k->seq];
        size_t len = s->text_len[k->seq];
        if (lead > 0) {
            bool is_first = i == 0 || k->off.start == 0;
            if (is_first && add_prefix_space && lead == 1)
                lead = 0;
            size_t at = k->off.start;
            if (!step_chars(text, len, &at, lead, false) || at > k->off.end)
                at = k->off.end;
            k->off.start = at;
        }
        size_t at = k->off.end;
        if (trail > 0 && step_chars(text, len, &at, trail, true))
            k->off.end = at > k->off.start ? at : k->off.start;
    }
}

static void set_type_ids(enc_toks *t, uint32_t type_id)
{
    for (size_t i = 0; i < t->n; i++)
        t->t[i].type_id = type_id;
}

/* One processor over s->encs[0..*n); may replace the list. */
static lipi_status process(lipi_session *s, const lipi_post_processor *p, size_t *n, bool add,
                           int depth)
{
    lipi_status st = LIPI_OK;
    switch (p->type) {
    case LIPI_POST_BYTELEVEL:
        if (p->trim_offsets)
            for (size_t i = 0; i < *n; i++)
                trim_offsets(s, &s->encs[i], p->add_prefix_space);
        break;
    case LIPI_POST_BERT:
    case LIPI_POST_ROBERTA: {
        bool roberta = p->type == LIPI_POST_ROBERTA;
        if (roberta) {
            for (size_t i = 0; i < *n; i++) {
                if (p->trim_offsets)
                    trim_offsets(s, &s->encs[i], p->add_prefix_space);
                set_type_ids(&s->encs[i], 0);
            }
        }
        if (!add)
            break;
        for (size_t i = 0; i < *n; i++) {
            enc_toks *src = &s->encs[i], *d = &s->encs2[i];
            enc_tok t;
            d->n = 0;
            if (i == 0) {
                t = special_tok(p->cls.id, p->cls.token, p->cls.len, 0);
                TRY(tok_push(d, &t));
            } else if (roberta) {
                t = special_tok(p->sep.id, p->sep.token, p->sep.len, 0);
                TRY(tok_push(d, &t));
            }
            for (size_t k = 0; k < src->n; k++)
                TRY(tok_push(d, &src->t[k]));
            t = special_tok(p->sep.id, p->sep.token, p->sep.len, i == 0 || roberta ? 0 : 1);
            TRY(tok_push(d, &t));
        }
        for (size_t i = 0; i < *n; i++) {
            enc_toks x = s->encs[i];
            s->encs[i] = s->encs2[i];
            s->encs2[i] = x;
        }
        break;
    }
    case LIPI_POST_TEMPLATE: {
        const lipi_template_piece *tp = *n == 2 ? p->pair : p->single;
        size_t nt = *n == 2 ? p->n_pair : p->n_single;
        size_t m = 0;
        TRY(encs_reserve(s, nt > 2 ? nt : 2));
        for (size_t i = 0; i < nt; i++) {
            const lipi_template_piece *pc = &tp[i];
            if (!pc->is_special) {
                size_t which = pc->seq < *n ? pc->seq : 0;
                TRY(copy_toks(&s->encs2[m], &s->encs[which]));
                set_type_ids(&s->encs2[m], pc->type_id);
                m++;
            } else if (add) {
                const lipi_template_special *sp = &p->special[pc->special];
                s->encs2[m].n = 0;
                for (size_t k = 0; k < sp->n; k++) {
                    enc_tok t = special_tok(sp->ids[k], sp->tokens[k], sp->token_lens[k],
                                            pc->type_id);
                    TRY(tok_push(&s->encs2[m], &t));
                }
                m++;
            }
        }
        for (size_t i = 0; i < m; i++) {
            enc_toks x = s->encs[i];
            s->encs[i] = s->encs2[i];
            s->encs2[i] = x;
        }
        *n = m;
        break;
    }
    case LIPI_POST_SEQUENCE:
        for (size_t i = 0; i < p->n_items && depth < 64; i++)
            TRY(process(s, &p->items[i], n, add, depth + 1));
        break;
    }
done:
    return st;
}

/* Whether processor p leaves a single text's tokens exactly as they are
 * (type ids 0, no special tokens, offsets untouched), or with ids_only,
 * only its ids (offsets and type ids may change: what lipi_encode_stream
 * needs). */
static bool post_is_noop(const lipi_post_processor *p, bool add, bool ids_only, int depth)
{
    size_t texts = 0;
    switch (p->type) {
    case LIPI_POST_BYTELEVEL: return ids_only || !p->trim_offsets;
    case LIPI_POST_BERT: return !add;
    case LIPI_POST_ROBERTA: return !add && (ids_only || !p->trim_offsets);
    case LIPI_POST_TEMPLATE:
        if (add)
            return false;
        for (size_t i = 0; i < p->n_single; i++) {
            if (!p->single[i].is_special && p->single[i].type_id != 0 && !ids_only)
                return false;
            texts += !p->single[i].is_special;
        }
        return ids_only ? texts == 1 : p->n_single == 1;
    case LIPI_POST_SEQUENCE:
        if (depth > 64)
            return false;
        for (size_t i = 0; i < p->n_items; i++)
            if (!post_is_noop(&p->items[i], add, ids_only, depth + 1))
                return false;
        return true;
    }
    return false;
}

lipi_status lipi_enc_run(lipi_session *s, const char *a, size_t alen, const char *b,
                         size_t blen, bool pair, const lipi_encode_options *opt,
                         bool want_offsets, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    lipi_encode_options defaults;
    const lipi_post_processor *pp = e->tok->post;

    if (!opt) {
        lipi_encode_options_default(e, &defaults);
        opt = &defaults;
    }
    s->special = opt->special;
    s->utf8_checked = opt->utf8_checked;
    s->pool.len = 0;
    s->out.n = 0;
    s->res = &s->out;
    s->text[0] = a;
    s->text_len[0] = alen;
    s->text[1] = b;
    s->text_len[1] = blen;
    if (alen > UINT32_MAX || blen > UINT32_MAX)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "a text of more than 4 GiB is more than lipi encodes at once");
    TRY(encode_seq(s, &s->seq[0], a, alen, 0, want_offsets, err));
    if (pair) {
        st = encode_seq(s, &s->seq[1], b, blen, 1, want_offsets, err);
        if (st != LIPI_OK) {
            lipi_error_prefix(err, "pair text");
            goto done;
        }
    }
    if (opt->max_length) {
        size_t added = opt->add_special_tokens && pp ? post_added(pp, pair) : 0;
        if (added > opt->max_length) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "max_length %zu is smaller than the %zu special tokens the "
                                "post-processor adds",
                                opt->max_length, added);
            goto done;
        }
        TRY(truncate_seqs(s, pair, opt->max_length - added, opt, err));
    }
    size_t n = pair ? 2 : 1;
    if (!pair && (!pp || post_is_noop(pp, opt->add_special_tokens, false, 0))) {
        s->res = &s->seq[0];
        goto done;
    }
    if (!pp) {
        TRY(copy_toks(&s->out, &s->seq[0]));
        for (size_t k = 0; k < s->seq[1].n; k++)
            TRY(tok_push(&s->out, &s->seq[1].t[k]));
        goto done;
    }
    TRY(encs_reserve(s, 2));
    TRY(copy_toks(&s->encs[0], &s->seq[0]));
    if (pair)
        TRY(copy_toks(&s->encs[1], &s->seq[1]));
    TRY(process(s, pp, &n, opt->add_special_tokens, 0));
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < s->encs[i].n; k++)
            TRY(tok_push(&s->out, &s->encs[i].t[k]));
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    return st;
}

/* ======================================================================== */
/* Public entry points                                                       */
/* ======================================================================== */

static lipi_status write_out(lipi_session *s, lipi_encoding *out)
{
    size_t n = s->res->n, m = n < out->cap ? n : out->cap;
    out->len = n;
    for (size_t i = 0; i < m; i++) {
        const enc_tok *t = &s->res->t[i];
        if (out->ids)
            out->ids[i] = t->id;
        if (out->offsets)
            out->offsets[i] = t->off;
        if (out->type_ids)
            out->type_ids[i] = t->type_id;
        if (out->special_mask)
            out->special_mask[i] = t->special;
        if (out->sequence_ids)
            out->sequence_ids[i] = t->seq;
        if (out->tokens || out->token_lens) {
            size_t len;
            const char *str = lipi_enc_tok_str(s, t, &len);
            if (out->tokens)
                out->tokens[i] = str;
            if (out->token_lens)
                out->token_lens[i] = len;
        }
    }
    return LIPI_OK;
}

lipi_status lipi_encode(lipi_session *s, const char *text, size_t len,
                        const lipi_encode_options *opt, lipi_encoding *out, lipi_error *err)
{
    if (!s || !out || (!text && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no session, text or output given");
    out->len = 0;
    lipi_status st = lipi_enc_run(s, text ? text : "", len, NULL, 0, false, opt,
                                  out->offsets != NULL, err);
    if (st != LIPI_OK)
        return st;
    return write_out(s, out);
}

bool lipi_encode_can_stream(const lipi_encoder *e, const lipi_encode_options *opt)
{
    lipi_encode_options defaults;
    if (!e)
        return false;
    if (!opt) {
        lipi_encode_options_default(e, &defaults);
        opt = &defaults;
    }
    const lipi_post_processor *pp = e->tok->post;
    return opt->max_length == 0 && (!pp || post_is_noop(pp, opt->add_special_tokens, true, 0));
}

lipi_status lipi_enc_stream_run(lipi_session *s, const char *text, size_t len,
                                const lipi_encode_options *opt, lipi_ids_sink sink, void *ctx,
                                size_t *n_ids, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *n_ids = 0;
    if (!s->sink_ids) {
        s->sink_ids = lipi_reallocarray(NULL, LIPI_STREAM_IDS, sizeof *s->sink_ids);
        if (!s->sink_ids)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    s->sink = sink;
    s->sink_ctx = ctx;
    s->sink_n = 0;
    s->sink_total = 0;
    st = lipi_enc_run(s, text ? text : "", len, NULL, 0, false, opt, false, err);
    /* Added tokens after the last piece, then the last slice. */
    if (st == LIPI_OK)
        st = stream_piece(s, &s->seq[0], NULL, 0);
    if (st == LIPI_OK && s->sink_n)
        st = sink(ctx, s->sink_ids, s->sink_n);
    if (st == LIPI_OK)
        s->sink_total += s->sink_n;
    s->sink_n = 0;
    s->sink = NULL;
    s->sink_ctx = NULL;
    s->seq[0].n = 0;
    *n_ids = s->sink_total;
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    return st;
}

lipi_status lipi_encode_stream(lipi_session *s, const char *text, size_t len,
                               const lipi_encode_options *opt, lipi_ids_sink sink, void *ctx,
                               size_t *n_ids, lipi_error *err)
{
    size_t n = 0;
    if (n_ids)
        *n_ids = 0;
    if (!s || !sink || (!text && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no session, text or sink given");
    if (!lipi_encode_can_stream(s->enc, opt))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "ids depend on the whole text (truncation or special tokens "
                              "added): encode it with lipi_encode");
    lipi_status st = lipi_enc_stream_run(s, text, len, opt, sink, ctx, &n, err);
    if (n_ids)
        *n_ids = n;
    return st;
}

lipi_status lipi_encode_pair(lipi_session *s, const char *text, size_t len, const char *pair,
                             size_t pair_len, const lipi_encode_options *opt,
                             lipi_encoding *out, lipi_error *err)
{
    if (!s || !out || (!text && len) || (!pair && pair_len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no session, text or output given");
    out->len = 0;
    lipi_status st = lipi_enc_run(s, text ? text : "", len, pair ? pair : "", pair_len, true, opt,
                                  out->offsets != NULL, err);
    if (st != LIPI_OK)
        return st;
    return write_out(s, out);
}

/* Whether post-processor p can add a token with this id. */
static bool post_adds(const lipi_post_processor *p, uint32_t id, int depth)
{
    switch (p->type) {
    case LIPI_POST_BERT:
    case LIPI_POST_ROBERTA: return p->cls.id == id || p->sep.id == id;
    case LIPI_POST_TEMPLATE:
        for (size_t i = 0; i < p->n_special; i++)
            for (size_t k = 0; k < p->special[i].n; k++)
                if (p->special[i].ids[k] == id)
                    return true;
        return false;
    case LIPI_POST_SEQUENCE:
        for (size_t i = 0; i < p->n_items && depth < 64; i++)
            if (post_adds(&p->items[i], id, depth + 1))
                return true;
        return false;
    default: return false;
    }
}

/* The tokens whose string is not the vocabulary's are the ones made with
 * pool_add (added tokens matched in the text, Unigram's unknown runs) and
 * special_tok (the post-processor's); every other token is TOK_VOCAB. */
const char *lipi_token_fixed_string(const lipi_encoder *e, uint32_t id, size_t *len)
{
    if ((int64_t)id == e->unk_id || lipi_enc_is_added(e->tok, id) ||
        (e->tok->post && post_adds(e->tok->post, id, 0)))
        return NULL;
    const lipi_vocab *v = &e->m->vocab;
    if (id < v->n && v->tok[id].s) {
        *len = v->tok[id].len;
        return v->tok[id].s;
    }
    *len = 0;
    return "";
}

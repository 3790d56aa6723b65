/* Decoding: ids -> token strings -> the tokenizer's decoder chain -> text,
 * as Hugging Face's Tokenizer::decode does (every token goes through the
 * decoder; with no decoder the tokens are joined by spaces). Each decoder
 * turns a list of strings into another (Hugging Face's decode_chain). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "encoder/encoder_impl.h"

/* A list of strings: bytes in a buffer, item i = p[span[i].start, .end). */
typedef struct {
    lipi_buf *buf;
    lipi_span **span;
    size_t *cap;
    size_t n;
} strlist;

static lipi_status sl_add(strlist *l, const char *s, size_t n)
{
    lipi_status st = ENC_GROW(*l->span, *l->cap, l->n + 1);
    if (st != LIPI_OK)
        return st;
    size_t start = l->buf->len;
    st = lipi_buf_append(l->buf, s, n);
    if (st != LIPI_OK)
        return st;
    (*l->span)[l->n++] = (lipi_span){start, l->buf->len};
    return LIPI_OK;
}

/* Appends to the last item (which must be the buffer's tail). */
static lipi_status sl_extend(strlist *l, const char *s, size_t n)
{
    lipi_status st = lipi_buf_append(l->buf, s, n);
    if (st == LIPI_OK)
        (*l->span)[l->n - 1].end = l->buf->len;
    return st;
}

static void sl_clear(strlist *l)
{
    l->n = 0;
    l->buf->len = 0;
}

#define ITEM(l, i) ((l)->buf->p + (*(l)->span)[i].start)
#define ITEM_LEN(l, i) ((*(l)->span)[i].end - (*(l)->span)[i].start)

/* Appends s[0..n) to the last item with every `pat` replaced by `rep`
 * (Rust's str::replace: left to right, non-overlapping). */
static lipi_status extend_replaced(strlist *d, const char *s, size_t n, const char *pat,
                                   size_t plen, const char *rep, size_t rlen)
{
    lipi_status st = LIPI_OK;
    size_t i = 0, run = 0;
    if (plen == 0)
        return sl_extend(d, s, n);
    while (i + plen <= n) {
        if (memcmp(s + i, pat, plen) == 0) {
            TRY(sl_extend(d, s + run, i - run));
            TRY(sl_extend(d, rep, rlen));
            i += plen;
            run = i;
        } else {
            i++;
        }
    }
    TRY(sl_extend(d, s + run, n - run));
done:
    return st;
}

/* Replaces pat by rep in the last item of d, in place (through tmp). */
static lipi_status replace_last(strlist *d, lipi_buf *tmp, const char *pat, const char *rep)
{
    size_t plen = strlen(pat), rlen = strlen(rep);
    size_t start = (*d->span)[d->n - 1].start, n = d->buf->len - start;
    if (n < plen || !memmem(d->buf->p + start, n, pat, plen))
        return LIPI_OK;
    tmp->len = 0;
    lipi_status st = lipi_buf_append(tmp, d->buf->p + start, n);
    if (st != LIPI_OK)
        return st;
    d->buf->len = start;
    (*d->span)[d->n - 1].end = start;
    return extend_replaced(d, tmp->p, tmp->len, pat, plen, rep, rlen);
}

/* Hugging Face's wordpiece::cleanup, applied to the last item. */
static lipi_status cleanup_last(strlist *d, lipi_buf *tmp)
{
    static const char *const rules[][2] = {
        {" .", "."},      {" ?", "?"},   {" !", "!"},   {" ,", ","},   {" ' ", "'"},
        {" n't", "n't"},  {" 'm", "'m"}, {" do not", " don't"},        {" 's", "'s"},
        {" 've", "'ve"},  {" 're", "'re"},
    };
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        lipi_status st = replace_last(d, tmp, rules[r][0], rules[r][1]);
        if (st != LIPI_OK)
            return st;
    }
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Regex Replace decoders, compiled once per encoder                         */
/* ------------------------------------------------------------------------ */

static void *re_malloc(PCRE2_SIZE size, void *data)
{
    (void)data;
    return lipi_malloc(size);
}

static void re_free(void *p, void *data)
{
    (void)data;
    lipi_free(p);
}

static lipi_status compile_regexes(lipi_encoder *e, const lipi_decoder *d, int depth,
                                   lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (depth > 64)
        return LIPI_OK;
    if (d->type == LIPI_DEC_SEQUENCE) {
        for (size_t i = 0; i < d->sequence.n_items; i++)
            TRY(compile_regexes(e, &d->sequence.items[i], depth + 1, err));
        return LIPI_OK;
    }
    if (d->type != LIPI_DEC_REPLACE || !d->replace.regex)
        return LIPI_OK;
    TRY(ENC_GROW(e->dec_re, e->dec_re_cap, e->n_dec_re + 1));
    pcre2_general_context *g = pcre2_general_context_create(re_malloc, re_free, NULL);
    pcre2_compile_context *cc = g ? pcre2_compile_context_create(g) : NULL;
    int code = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = NULL;
    if (cc)
        re = pcre2_compile((PCRE2_SPTR)d->replace.pattern.s, d->replace.pattern.len,
                           PCRE2_UTF | PCRE2_UCP, &code, &off, cc);
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(g);
    if (!re) {
        if (!cc)
            return LIPI_ENOMEM;
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return lipi_error_set(err, LIPI_EREGEX, NULL, 0, off,
                              "decoder Replace pattern \"%.60s\": %s at offset %zu",
                              d->replace.pattern.s, (const char *)msg, (size_t)off);
    }
    e->dec_re[e->n_dec_re++] = re;
done:
    return st;
}

lipi_status lipi_enc_decoders_init(lipi_encoder *e, lipi_error *err)
{
    if (!e->tok->decoder)
        return LIPI_OK;
    lipi_status st = compile_regexes(e, e->tok->decoder, 0, err);
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    return st;
}

void lipi_enc_decoders_free(lipi_encoder *e)
{
    for (size_t i = 0; i < e->n_dec_re; i++)
        pcre2_code_free(e->dec_re[i]);
    lipi_free(e->dec_re);
    e->dec_re = NULL;
    e->n_dec_re = e->dec_re_cap = 0;
}

/* Replaces every match of re in s[0..n) with rep, appending to the last item
 * of d, with the Rust regex crate's rule for empty matches: one right where
 * the previous match ended is skipped ("xx" with x* gives one replacement,
 * "c" gives two: before and after the c). */
static lipi_status regex_replace(const pcre2_code *re, const char *s, size_t n, const char *rep,
                                 size_t rlen, strlist *d)
{
    lipi_status st = LIPI_OK;
    pcre2_general_context *g = pcre2_general_context_create(re_malloc, re_free, NULL);
    pcre2_match_data *md = g ? pcre2_match_data_create_from_pattern(re, g) : NULL;
    size_t pos = 0, run = 0, last_end = SIZE_MAX;
    if (!md) {
        st = LIPI_ENOMEM;
        goto done;
    }
    while (pos <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            st = LIPI_EREGEX;
            goto done;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] < ov[0] || ov[0] < pos) {
            st = LIPI_EREGEX; /* \K games: no sensible replacement */
            goto done;
        }
        if (ov[0] == ov[1] && ov[0] == last_end) {
            if (ov[0] >= n)
                break;
            pos = ov[0] + enc_utf8_len((unsigned char)s[ov[0]]);
            continue;
        }
        TRY(sl_extend(d, s + run, ov[0] - run));
        TRY(sl_extend(d, rep, rlen));
        run = last_end = ov[1];
        if (ov[1] > ov[0])
            pos = ov[1];
        else if (ov[1] >= n)
            break;
        else
            pos = ov[1] + enc_utf8_len((unsigned char)s[ov[1]]);
    }
    TRY(sl_extend(d, s + run, n - run));
done:
    pcre2_match_data_free(md);
    pcre2_general_context_free(g);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The decoders                                                              */
/* ------------------------------------------------------------------------ */

/* Strips up to `start` leading and `stop` trailing copies of c (by
 * character, as Hugging Face's Strip decoder does). */
static lipi_status strip_token(strlist *d, const char *s, size_t n, const lipi_ownstr *c,
                               size_t start, size_t stop)
{
    size_t a = 0, b = n;
    for (size_t k = 0; k < start && a + c->len <= n && memcmp(s + a, c->s, c->len) == 0; k++)
        a += c->len;
    for (size_t k = 0; k < stop && b >= a + c->len && memcmp(s + b - c->len, c->s, c->len) == 0;
         k++)
        b -= c->len;
    return sl_add(d, s + a, b > a ? b - a : 0);
}

static lipi_status flush_bytes(strlist *d, const char *bytes, size_t n)
{
    if (n == 0)
        return LIPI_OK;
    if (lipi_utf8_valid_prefix(bytes, n) == n)
        return sl_add(d, bytes, n);
    lipi_status st = sl_add(d, "", 0);
    for (size_t i = 0; i < n && st == LIPI_OK; i++)
        st = sl_extend(d, "\xEF\xBF\xBD", 3);
    return st;
}

/* Runs decoder dec over list in, writing list out. *re_i walks the compiled
 * regexes in the order compile_regexes met them. */
static lipi_status run_decoder(lipi_session *s, const lipi_decoder *dec, strlist *in,
                               strlist *out, size_t *re_i, int depth);

static lipi_status run_sequence(lipi_session *s, const lipi_decoder *dec, strlist *in,
                                strlist *out, size_t *re_i, int depth)
{
    lipi_status st = LIPI_OK;
    strlist a = *in, b = *out;
    for (size_t k = 0; k < dec->sequence.n_items; k++) {
        TRY(run_decoder(s, &dec->sequence.items[k], &a, &b, re_i, depth + 1));
        strlist t = a;
        a = b;
        b = t;
    }
    /* The result is in a; make sure it ends up in *out. */
    if (a.buf != out->buf) {
        sl_clear(out);
        for (size_t i = 0; i < a.n; i++)
            TRY(sl_add(out, ITEM(&a, i), ITEM_LEN(&a, i)));
    } else {
        out->n = a.n;
    }
done:
    return st;
}

static lipi_status run_decoder(lipi_session *s, const lipi_decoder *dec, strlist *in,
                               strlist *out, size_t *re_i, int depth)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    sl_clear(out);
    if (depth > 64)
        return LIPI_EINVAL;
    switch (dec->type) {
    case LIPI_DEC_BYTELEVEL: {
        lipi_buf *raw = &s->word;
        raw->len = 0;
        for (size_t i = 0; i < in->n; i++) {
            const char *t = ITEM(in, i);
            size_t n = ITEM_LEN(in, i), mark = raw->len;
            bool all = true;
            for (size_t k = 0; k < n && all;) {
                uint32_t cp;
                size_t cl = lipi_utf8_decode(t + k, n - k, &cp);
                int b = cl ? lipi_bytelevel_byte(cp) : -1;
                if (b < 0) {
                    all = false;
                    break;
                }
                char c = (char)b;
                TRY(lipi_buf_append(raw, &c, 1));
                k += cl;
            }
            if (!all) {
                raw->len = mark;
                TRY(lipi_buf_append(raw, t, n));
            }
        }
        if (lipi_utf8_valid_prefix(raw->p ? raw->p : "", raw->len) == raw->len) {
            TRY(sl_add(out, raw->p ? raw->p : "", raw->len));
        } else {
            char *fixed = NULL;
            size_t flen = 0;
            TRY(lipi_utf8_repair(raw->p, raw->len, &fixed, &flen));
            st = sl_add(out, fixed, flen);
            lipi_free(fixed);
        }
        break;
    }
    case LIPI_DEC_WORDPIECE: {
        const lipi_ownstr *pre = &dec->wordpiece.prefix;
        for (size_t i = 0; i < in->n; i++) {
            const char *t = ITEM(in, i);
            size_t n = ITEM_LEN(in, i);
            /* Tokens after the first lose the prefix or gain a space (an
             * empty prefix is a prefix of every token). */
            if (i != 0 && n >= pre->len && memcmp(t, pre->s, pre->len) == 0) {
                TRY(sl_add(out, t + pre->len, n - pre->len));
            } else if (i != 0) {
                TRY(sl_add(out, " ", 1));
                TRY(sl_extend(out, t, n));
            } else {
                TRY(sl_add(out, t, n));
            }
            if (dec->wordpiece.cleanup)
                TRY(cleanup_last(out, &s->dec_tmp));
        }
        break;
    }
    case LIPI_DEC_METASPACE: {
        const lipi_ownstr *r = &dec->metaspace.replacement;
        bool drop_first = dec->metaspace.prepend_scheme != LIPI_PREPEND_NEVER;
        for (size_t i = 0; i < in->n; i++) {
            const char *t = ITEM(in, i);
            size_t n = ITEM_LEN(in, i);
            TRY(sl_add(out, "", 0));
            if (i == 0 && drop_first)
                TRY(extend_replaced(out, t, n, r->s, r->len, "", 0));
            else
                TRY(extend_replaced(out, t, n, r->s, r->len, " ", 1));
        }
        break;
    }
    case LIPI_DEC_BYTEFALLBACK: {
        lipi_buf *bytes = &s->word;
        bytes->len = 0;
        for (size_t i = 0; i < in->n; i++) {
            const char *t = ITEM(in, i);
            size_t n = ITEM_LEN(in, i);
            int b = lipi_byte_token_parse(t, n, true);
            if (b >= 0) {
                char c = (char)b;
                TRY(lipi_buf_append(bytes, &c, 1));
                continue;
            }
            TRY(flush_bytes(out, bytes->p, bytes->len));
            bytes->len = 0;
            TRY(sl_add(out, t, n));
        }
        TRY(flush_bytes(out, bytes->p, bytes->len));
        break;
    }
    case LIPI_DEC_FUSE:
        TRY(sl_add(out, "", 0));
        for (size_t i = 0; i < in->n; i++)
            TRY(sl_extend(out, ITEM(in, i), ITEM_LEN(in, i)));
        break;
    case LIPI_DEC_STRIP:
        for (size_t i = 0; i < in->n; i++)
            TRY(strip_token(out, ITEM(in, i), ITEM_LEN(in, i), &dec->strip.content,
                            dec->strip.start, dec->strip.stop));
        break;
    case LIPI_DEC_REPLACE: {
        const lipi_ownstr *pat = &dec->replace.pattern, *rep = &dec->replace.content;
        const pcre2_code *re = NULL;
        if (dec->replace.regex) {
            if (*re_i >= e->n_dec_re)
                return LIPI_EINVAL;
            re = e->dec_re[(*re_i)++];
        }
        for (size_t i = 0; i < in->n; i++) {
            TRY(sl_add(out, "", 0));
            if (re)
                TRY(regex_replace(re, ITEM(in, i), ITEM_LEN(in, i), rep->s, rep->len, out));
            else
                TRY(extend_replaced(out, ITEM(in, i), ITEM_LEN(in, i), pat->s, pat->len, rep->s,
                                    rep->len));
        }
        break;
    }
    case LIPI_DEC_BPE: {
        const lipi_ownstr *suf = &dec->bpe.suffix;
        for (size_t i = 0; i < in->n; i++) {
            TRY(sl_add(out, "", 0));
            bool last = i + 1 == in->n;
            TRY(extend_replaced(out, ITEM(in, i), ITEM_LEN(in, i), suf->s, suf->len,
                                last ? "" : " ", last ? 0 : 1));
        }
        break;
    }
    case LIPI_DEC_CTC: {
        for (size_t i = 0; i < in->n; i++) {
            const char *t = ITEM(in, i);
            size_t n = ITEM_LEN(in, i);
            if (i > 0 && n == ITEM_LEN(in, i - 1) && memcmp(t, ITEM(in, i - 1), n) == 0)
                continue; /* consecutive repeats collapse */
            TRY(sl_add(out, "", 0));
            TRY(extend_replaced(out, t, n, dec->ctc.pad_token.s, dec->ctc.pad_token.len, "", 0));
            if (dec->ctc.cleanup) {
                TRY(cleanup_last(out, &s->dec_tmp));
                TRY(replace_last(out, &s->dec_tmp, dec->ctc.word_delimiter_token.s, " "));
            }
            if (ITEM_LEN(out, out->n - 1) == 0) {
                out->n--;
                out->buf->len = (*out->span)[out->n].start;
            }
        }
        break;
    }
    case LIPI_DEC_SEQUENCE:
        return run_sequence(s, dec, in, out, re_i, depth);
    }
done:
    return st;
}

lipi_status lipi_decode(lipi_session *s, const uint32_t *ids, size_t n, bool skip_special,
                        char *out, size_t cap, size_t *out_len, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (!s || !out_len || (!ids && n) || (!out && cap))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no session, ids or output given");
    const lipi_tokenizer *t = s->enc->tok;
    strlist a = {&s->dec_a, &s->dspan_a, &s->dspan_a_cap, 0};
    strlist b = {&s->dec_b, &s->dspan_b, &s->dspan_b_cap, 0};
    const char *text;
    size_t len;

    *out_len = 0;
    sl_clear(&a);
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        const char *tok = lipi_enc_id_to_token(s->enc, ids[i], &tl);
        if (!tok) {
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "id %u (number %zu) is not a token id: the vocabulary has "
                                  "%zu ids",
                                  ids[i], i + 1, lipi_tokenizer_vocab_size(t));
        }
        if (skip_special && lipi_enc_is_special(t, ids[i]))
            continue;
        TRY(sl_add(&a, tok, tl));
    }
    if (t->decoder) {
        size_t re_i = 0;
        TRY(run_decoder(s, t->decoder, &a, &b, &re_i, 0));
        s->dec_a.len = 0;
        for (size_t i = 0; i < b.n; i++)
            TRY(lipi_buf_append(&s->dec_a, ITEM(&b, i), ITEM_LEN(&b, i)));
    } else {
        /* Join with spaces, in place in the same buffer through dec_b. */
        s->dec_b.len = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (i)
                TRY(lipi_buf_append(&s->dec_b, " ", 1));
            TRY(lipi_buf_append(&s->dec_b, ITEM(&a, i), ITEM_LEN(&a, i)));
        }
        s->dec_a.len = 0;
        TRY(lipi_buf_append(&s->dec_a, s->dec_b.p ? s->dec_b.p : "", s->dec_b.len));
    }
    text = s->dec_a.p ? s->dec_a.p : "";
    len = s->dec_a.len;
    *out_len = len;
    if (cap) {
        size_t m = len < cap ? len : cap;
        memcpy(out, text, m);
        if (len < cap)
            out[len] = '\0';
    }
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    else if (st == LIPI_EREGEX)
        lipi_error_set(err, st, NULL, 0, 0, "a decoder's Replace pattern failed to match");
    return st;
}

/* ------------------------------------------------------------------------ */
/* One token's bytes                                                         */
/* ------------------------------------------------------------------------ */

/* The per-token steps of the decoder chain, in chain order, on the token in
 * s->dec_a (through s->dec_b): ByteLevel maps the GPT-2 alphabet back to
 * bytes (the whole token, or none of it when a character is outside the
 * alphabet, as Hugging Face's ByteLevel decoder does), ByteFallback turns
 * "<0xNN>" into its byte, Metaspace and string Replace decoders replace as
 * they would anywhere in a text. Steps that join or trim tokens (WordPiece,
 * BPE suffixes, Fuse, Strip, CTC) and regex Replace leave the token as it
 * is. */
static lipi_status token_steps(lipi_session *s, const lipi_decoder *d, int depth)
{
    lipi_status st = LIPI_OK;
    lipi_buf *a = &s->dec_a, *b = &s->dec_b;
    const char *t = a->p ? a->p : "";
    size_t n = a->len;
    strlist out = {b, &s->dspan_b, &s->dspan_b_cap, 0};
    if (depth > 64)
        return LIPI_OK;
    sl_clear(&out);
    switch (d->type) {
    case LIPI_DEC_SEQUENCE:
        for (size_t i = 0; i < d->sequence.n_items; i++)
            TRY(token_steps(s, &d->sequence.items[i], depth + 1));
        return LIPI_OK;
    case LIPI_DEC_BYTELEVEL:
        TRY(sl_add(&out, "", 0));
        for (size_t k = 0; k < n;) {
            uint32_t cp;
            size_t cl = lipi_utf8_decode(t + k, n - k, &cp);
            int byte = cl ? lipi_bytelevel_byte(cp) : -1;
            if (byte < 0)
                return LIPI_OK; /* not all in the alphabet: as it is */
            char c = (char)byte;
            TRY(sl_extend(&out, &c, 1));
            k += cl;
        }
        break;
    case LIPI_DEC_BYTEFALLBACK: {
        int byte = lipi_byte_token_parse(t, n, true);
        if (byte < 0)
            return LIPI_OK;
        char c = (char)byte;
        TRY(sl_add(&out, &c, 1));
        break;
    }
    case LIPI_DEC_METASPACE:
        TRY(sl_add(&out, "", 0));
        TRY(extend_replaced(&out, t, n, d->metaspace.replacement.s,
                            d->metaspace.replacement.len, " ", 1));
        break;
    case LIPI_DEC_REPLACE:
        if (d->replace.regex)
            return LIPI_OK;
        TRY(sl_add(&out, "", 0));
        TRY(extend_replaced(&out, t, n, d->replace.pattern.s, d->replace.pattern.len,
                            d->replace.content.s, d->replace.content.len));
        break;
    default:
        return LIPI_OK;
    }
    a->len = 0;
    st = lipi_buf_append(a, b->p ? b->p : "", b->len);
done:
    return st;
}

lipi_status lipi_token_bytes(lipi_session *s, uint32_t id, char *out, size_t cap,
                             size_t *out_len, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (!s || !out_len || (!out && cap))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no session or output given");
    *out_len = 0;
    size_t tl;
    const char *tok = lipi_enc_id_to_token(s->enc, id, &tl);
    if (!tok)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "id %u is not a token id: the vocabulary has %zu ids", id,
                              lipi_tokenizer_vocab_size(s->enc->tok));
    s->dec_a.len = 0;
    TRY(lipi_buf_append(&s->dec_a, tok, tl));
    if (s->enc->tok->decoder)
        TRY(token_steps(s, s->enc->tok->decoder, 0));
    *out_len = s->dec_a.len;
    if (cap) {
        size_t m = s->dec_a.len < cap ? s->dec_a.len : cap;
        memcpy(out, s->dec_a.p ? s->dec_a.p : "", m);
        if (s->dec_a.len < cap)
            out[s->dec_a.len] = '\0';
    }
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    return st;
}

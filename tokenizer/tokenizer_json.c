/* Reading and writing Hugging Face tokenizer.json.
 *
 * The schema is that of the `tokenizers` library (its serde derives in
 * tokenizer/serialization.rs, models/{bpe,wordpiece,wordlevel,unigram}/
 * serialization.rs, processors/ and decoders/): keys are written in the
 * order it writes them, and read in any order. Older spellings it still
 * reads are read too: a model without "type", BPE merges as "a b" strings,
 * Metaspace "add_prefix_space". Unknown keys are ignored, as there.
 *
 * The normalizer and pre_tokenizer sections belong to their components
 * (base_json.h); this file only routes them.
 *
 * Loading never trusts the file: every value is type-checked, ids are
 * range-checked, merges must name tokens of the vocabulary, and an error
 * names the JSON path and what was expected, e.g.
 *   model.merges[17]: expected "left right" or ["left", "right"], found 3
 */
#include "tokenizer/base_json.h"
#include "tokenizer/tokenizer_layout.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Large real tokenizer.json files are tens of MB (250k-token vocabularies);
 * anything beyond this is not a tokenizer. */
#define LIPI_TOKENIZER_JSON_MAX ((size_t)1 << 30)

/* Sequence post-processors and decoders may nest; real files nest once. */
#define SEQUENCE_MAX_DEPTH 32

/* Ids beyond this many holes are refused: consumers size arrays by the
 * highest id, so a file must not make them allocate gigabytes for nothing. */
#define ID_SLACK 65536

/* ======================================================================== */
/* Parsing context: file name, JSON path, errors                             */
/* ======================================================================== */

typedef struct {
    const char *name; /* file name for err->path */
    lipi_error *err;
    char path[200];   /* JSON path of the value being read */
    size_t plen;
} jctx;

static size_t jp_append(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends to the path (truncating if long); returns the previous length so
 * the caller can restore it with jp_set. */
static size_t jp_append(jctx *c, const char *fmt, ...)
{
    size_t old = c->plen;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->path + c->plen, sizeof c->path - c->plen, fmt, ap);
    va_end(ap);
    if (n > 0)
        c->plen += (size_t)n < sizeof c->path - c->plen ? (size_t)n : sizeof c->path - 1 - c->plen;
    return old;
}

/* Appends s[0..n) as jp_append would (truncating); by hand, because the
 * path is set for every merge and vocabulary entry, and vsnprintf there
 * took a sixth of loading GPT-2's tokenizer.json. */
static void jp_put(jctx *c, const char *s, size_t n)
{
    size_t room = sizeof c->path - 1 - c->plen;
    if (n > room)
        n = room;
    memcpy(c->path + c->plen, s, n);
    c->plen += n;
    c->path[c->plen] = '\0';
}

static size_t jp_key(jctx *c, const char *key)
{
    size_t old = c->plen;
    if (c->plen)
        jp_put(c, ".", 1);
    jp_put(c, key, strlen(key));
    return old;
}

static size_t jp_idx(jctx *c, size_t i)
{
    char d[24];
    size_t n = sizeof d;
    size_t old = c->plen;
    d[--n] = ']';
    do {
        d[--n] = (char)('0' + i % 10);
        i /= 10;
    } while (i);
    d[--n] = '[';
    jp_put(c, d + n, sizeof d - n);
    return old;
}

static void jp_set(jctx *c, size_t len)
{
    c->plen = len;
    c->path[len] = '\0';
}

static lipi_status jfail(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* LIPI_EFORMAT with "<json path>: <message>" and the file name. */
static lipi_status jfail(jctx *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lipi_error_set(c->err, LIPI_EFORMAT, c->name, 0, 0, "%s: %s",
                          c->plen ? c->path : "top level", msg);
}

static lipi_status joom(jctx *c)
{
    return lipi_error_set(c->err, LIPI_ENOMEM, c->name, 0, 0, "out of memory");
}

/* Short description of a JSON value for "found ..." (at most ~60 bytes). */
static void describe(const json_t *v, char *buf, size_t cap)
{
    if (!v) {
        snprintf(buf, cap, "nothing");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: snprintf(buf, cap, "an object"); break;
    case JSON_ARRAY: snprintf(buf, cap, "an array of %zu", json_array_size(v)); break;
    case JSON_INTEGER: snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: snprintf(buf, cap, "%.17g", json_real_value(v)); break;
    case JSON_TRUE: snprintf(buf, cap, "true"); break;
    case JSON_FALSE: snprintf(buf, cap, "false"); break;
    case JSON_NULL: snprintf(buf, cap, "null"); break;
    case JSON_STRING: {
        size_t n = json_string_length(v);
        /* Cut on a UTF-8 boundary so the message stays valid text. */
        size_t k = n > 40 ? 40 : n;
        const char *s = json_string_value(v);
        while (k < n && k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--;
        snprintf(buf, cap, "\"%.*s\"%s", (int)k, s, k < n ? "..." : "");
        break;
    }
    }
}

/* "<path>: expected <what>, found <v>" (or "missing, expected ..."). */
static lipi_status jexpect(jctx *c, const char *what, const json_t *v)
{
    char found[80];
    if (!v)
        return jfail(c, "missing, expected %s", what);
    describe(v, found, sizeof found);
    return jfail(c, "expected %s, found %s", what, found);
}

/* A copy of s[0..n) as an owned string. */
static lipi_status own(jctx *c, const char *s, size_t n, lipi_ownstr *out)
{
    lipi_free(out->s);
    out->s = lipi_strndup(s, n);
    out->len = n;
    if (!out->s) {
        out->len = 0;
        return joom(c);
    }
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Typed members. Missing and null take the default unless said otherwise.  */
/* ------------------------------------------------------------------------ */

static lipi_status m_bool(jctx *c, const json_t *obj, const char *key, bool def, bool *out)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, key);
    size_t mark = jp_key(c, key);
    if (!v || json_is_null(v))
        *out = def;
    else if (json_is_boolean(v))
        *out = json_is_true(v);
    else
        st = jexpect(c, "true or false", v);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

/* An integer in [0, max]. */
static lipi_status want_uint(jctx *c, const json_t *v, uint64_t max, uint64_t *out)
{
    char what[64];
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        (uint64_t)json_integer_value(v) <= max) {
        *out = (uint64_t)json_integer_value(v);
        return LIPI_OK;
    }
    snprintf(what, sizeof what, "an integer from 0 to %" PRIu64, max);
    return jexpect(c, what, v);
}

static lipi_status m_uint(jctx *c, const json_t *obj, const char *key, uint64_t max,
                          uint64_t def, uint64_t *out)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, key);
    size_t mark = jp_key(c, key);
    if (!v || json_is_null(v))
        *out = def;
    else
        st = want_uint(c, v, max, out);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

/* A string member. def == NULL makes it required (null is an error too);
 * otherwise missing or null gives def. */
static lipi_status m_str(jctx *c, const json_t *obj, const char *key, const char *def,
                         lipi_ownstr *out)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, key);
    size_t mark = jp_key(c, key);
    if (json_is_string(v))
        st = own(c, json_string_value(v), json_string_length(v), out);
    else if (def && (!v || json_is_null(v)))
        st = own(c, def, strlen(def), out);
    else
        st = jexpect(c, "a string", v);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

/* A string or null member; *is_null tells which (missing counts as null). */
static lipi_status m_str_or_null(jctx *c, const json_t *obj, const char *key,
                                 lipi_ownstr *out, bool *is_null)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, key);
    size_t mark = jp_key(c, key);
    *is_null = !v || json_is_null(v);
    if (json_is_string(v))
        st = own(c, json_string_value(v), json_string_length(v), out);
    else if (!*is_null)
        st = jexpect(c, "a string or null", v);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

/* Bytes of the UTF-8 character starting s (s is valid UTF-8: jansson checked). */
static size_t utf8_char_len(const char *s)
{
    unsigned char b = (unsigned char)s[0];
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* A string member holding exactly one character (a Rust `char`). */
static lipi_status m_char(jctx *c, const json_t *obj, const char *key, const char *def,
                          lipi_ownstr *out)
{
    lipi_status st = m_str(c, obj, key, def, out);
    if (st == LIPI_OK && (out->len == 0 || utf8_char_len(out->s) != out->len)) {
        size_t mark = jp_key(c, key);
        st = jexpect(c, "a string of one character", json_object_get(obj, key));
        jp_set(c, mark);
    }
    return st;
}

/* The "type" member of a section. */
static lipi_status get_type(jctx *c, const json_t *obj, const char **type)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, "type");
    size_t mark = jp_key(c, "type");
    if (json_is_string(v))
        *type = json_string_value(v);
    else
        st = jexpect(c, "a type name", v);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

static lipi_status unknown_type(jctx *c, const char *type, const char *known)
{
    size_t mark = jp_key(c, "type");
    lipi_status st = jfail(c, "unknown type \"%.60s\" (known: %s)", type, known);
    jp_set(c, mark);
    return st;
}

/* A member that must be an array; *arr = NULL when missing and !required. */
static lipi_status m_array(jctx *c, const json_t *obj, const char *key, bool required,
                           const json_t **arr)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, key);
    size_t mark = jp_key(c, key);
    *arr = NULL;
    if (json_is_array(v))
        *arr = v;
    else if (required || (v && !json_is_null(v)))
        st = jexpect(c, "an array", v);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

/* ======================================================================== */
/* Model                                                                     */
/* ======================================================================== */

/* "vocab": {"token": id, ...} (BPE, WordPiece, WordLevel) into m->vocab. */
static lipi_status parse_vocab_map(jctx *c, const json_t *obj, lipi_vocab_model *m)
{
    lipi_status st = LIPI_OK;
    lipi_strref *tok = NULL;
    uint32_t *ids = NULL;
    const json_t *v = json_object_get(obj, "vocab");
    size_t mark = jp_key(c, "vocab");
    size_t n, i = 0, n_ids = 0;
    void *it;

    if (!json_is_object(v)) {
        st = jexpect(c, "an object of token: id", v);
        goto done;
    }
    n = json_object_size(v);
    ids = lipi_reallocarray(NULL, n ? n : 1, sizeof *ids);
    if (!ids) {
        st = joom(c);
        goto done;
    }
    for (it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it), i++) {
        const json_t *val = json_object_iter_value(it);
        uint64_t id;
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= (json_int_t)UINT32_MAX) {
            size_t mk = jp_append(c, "[\"%.40s\"]", json_object_iter_key(it));
            st = jexpect(c, "a token id (an integer from 0 to 4294967294)", val);
            jp_set(c, mk);
            goto done;
        }
        id = (uint64_t)json_integer_value(val);
        ids[i] = (uint32_t)id;
        if (id + 1 > n_ids)
            n_ids = id + 1;
    }
    if (n_ids > 2 * n + ID_SLACK) {
        st = jfail(c, "ids are too sparse: highest id %zu for %zu tokens", n_ids - 1, n);
        goto done;
    }
    tok = lipi_calloc(n_ids ? n_ids : 1, sizeof *tok);
    if (!tok) {
        st = joom(c);
        goto done;
    }
    i = 0;
    for (it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it), i++) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        if (tok[ids[i]].s) {
            st = jfail(c, "tokens \"%.40s\" and \"%.40s\" both have id %u", tok[ids[i]].s, key,
                       ids[i]);
            goto done;
        }
        tok[ids[i]] = (lipi_strref){key, klen};
    }
    st = lipi_vocab_build(&m->vocab, tok, n_ids, NULL, NULL);
    if (st == LIPI_EINVAL)
        st = jfail(c, "a token appears twice");
    else if (st != LIPI_OK)
        st = joom(c);
    if (st == LIPI_OK)
        jp_set(c, mark);
done:
    lipi_free(tok);
    lipi_free(ids);
    return st;
}

/* Unigram "vocab": [["piece", score], ...]; id = position. */
static lipi_status parse_vocab_scored(jctx *c, const json_t *obj, lipi_vocab_model *m)
{
    lipi_status st = LIPI_OK;
    lipi_strref *tok = NULL;
    const json_t *v = json_object_get(obj, "vocab");
    size_t mark = jp_key(c, "vocab");
    size_t n, d1 = 0, d2 = 0;

    if (!json_is_array(v)) {
        st = jexpect(c, "an array of [piece, score]", v);
        goto done;
    }
    n = json_array_size(v);
    if (n >= UINT32_MAX) {
        st = jfail(c, "%zu pieces: ids must fit in 32 bits", n);
        goto done;
    }
    tok = lipi_calloc(n ? n : 1, sizeof *tok);
    m->scores = lipi_reallocarray(NULL, n ? n : 1, sizeof *m->scores);
    if (!tok || !m->scores) {
        st = joom(c);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        const json_t *piece = json_array_get(e, 0), *score = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(piece) ||
            !json_is_number(score)) {
            jp_idx(c, i);
            st = jexpect(c, "[\"piece\", score]", e);
            goto done;
        }
        tok[i] = (lipi_strref){json_string_value(piece), json_string_length(piece)};
        m->scores[i] = json_number_value(score);
    }
    st = lipi_vocab_build(&m->vocab, tok, n, &d1, &d2);
    if (st == LIPI_EINVAL) {
        jp_idx(c, d2);
        st = jfail(c, "piece \"%.40s\" repeats %s[%zu]", tok[d2].s, "model.vocab", d1);
    } else if (st != LIPI_OK) {
        st = joom(c);
    }
    if (st == LIPI_OK)
        jp_set(c, mark);
done:
    lipi_free(tok);
    return st;
}

/* Looks up one side of a merge. */
static lipi_status merge_side(jctx *c, const lipi_vocab_model *m, const char *s, size_t len,
                              uint32_t *id)
{
    if (lipi_vocab_find(&m->vocab, s, len, id))
        return LIPI_OK;
    return jfail(c, "\"%.*s\" is not in model.vocab", (int)(len > 60 ? 60 : len), s);
}

/* A legacy "a b" merge whose tokens contain spaces: the split is the one
 * cut at a space where both sides and their join are tokens (as current
 * Hugging Face does); none or several such cuts is an error. */
static lipi_status split_legacy(jctx *c, const lipi_vocab_model *m, const char *s, size_t len,
                                uint32_t pair[2])
{
    lipi_status st = LIPI_OK;
    lipi_buf joined = {0};
    size_t found = 0, prefix_len = strlen(m->opt.continuing_subword_prefix);
    uint32_t a, b, r;

    for (size_t cut = 0; cut < len; cut++) {
        if (s[cut] != ' ')
            continue;
        lipi_strref left = {s, cut}, right = {s + cut + 1, len - cut - 1};
        if (!lipi_vocab_find(&m->vocab, left.s, left.len, &a) ||
            !lipi_vocab_find(&m->vocab, right.s, right.len, &b))
            continue;
        st = lipi_merge_join(left, right, prefix_len, &joined);
        if (st == LIPI_EINVAL) {
            st = LIPI_OK;
            continue;
        }
        if (st != LIPI_OK) {
            st = joom(c);
            goto done;
        }
        if (!lipi_vocab_find(&m->vocab, joined.p, joined.len, &r))
            continue;
        pair[0] = a;
        pair[1] = b;
        found++;
    }
    if (found == 0) {
        uint32_t dummy;
        size_t sp = (size_t)((const char *)memchr(s, ' ', len) - s);
        /* With a single space, name the side that is missing. */
        if (memchr(s + sp + 1, ' ', len - sp - 1) == NULL) {
            st = merge_side(c, m, s, sp, &dummy);
            if (st == LIPI_OK)
                st = merge_side(c, m, s + sp + 1, len - sp - 1, &dummy);
            if (st == LIPI_OK)
                st = jfail(c, "\"%.*s\" joined is not in model.vocab",
                           (int)(len > 60 ? 60 : len), s);
        } else {
            st = jfail(c, "no split of \"%.*s\" at a space gives two tokens whose join is a token",
                       (int)(len > 60 ? 60 : len), s);
        }
    } else if (found > 1) {
        st = jfail(c, "\"%.*s\" splits into tokens at more than one space",
                   (int)(len > 60 ? 60 : len), s);
    }
done:
    lipi_buf_free(&joined);
    return st;
}

/* "merges": ["a b", ...] or [["a", "b"], ...] into m->merges. */
static lipi_status parse_merges(jctx *c, const json_t *obj, lipi_vocab_model *m)
{
    lipi_status st = LIPI_OK;
    uint32_t(*pairs)[2] = NULL;
    const json_t *arr;
    size_t n, bad = 0, mark;

    TRY(m_array(c, obj, "merges", true, &arr));
    mark = jp_key(c, "merges");
    n = json_array_size(arr);
    pairs = lipi_reallocarray(NULL, n ? n : 1, sizeof *pairs);
    if (!pairs) {
        st = joom(c);
        goto done;
    }
    m->merges_legacy = n > 0 && json_is_string(json_array_get(arr, 0));
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        size_t mk = jp_idx(c, i);
        if (m->merges_legacy && json_is_string(e)) {
            const char *s = json_string_value(e);
            size_t len = json_string_length(e);
            if (!memchr(s, ' ', len)) {
                st = jexpect(c, "\"left right\" or [\"left\", \"right\"]", e);
                goto done;
            }
            TRY(split_legacy(c, m, s, len, pairs[i]));
        } else if (!m->merges_legacy && json_is_array(e) && json_array_size(e) == 2 &&
                   json_is_string(json_array_get(e, 0)) && json_is_string(json_array_get(e, 1))) {
            const json_t *a = json_array_get(e, 0), *b = json_array_get(e, 1);
            TRY(merge_side(c, m, json_string_value(a), json_string_length(a), &pairs[i][0]));
            TRY(merge_side(c, m, json_string_value(b), json_string_length(b), &pairs[i][1]));
        } else if (json_is_string(e) || json_is_array(e)) {
            st = jexpect(c, m->merges_legacy ? "\"left right\" like model.merges[0]"
                                             : "[\"left\", \"right\"] like model.merges[0]",
                         e);
            goto done;
        } else {
            st = jexpect(c, "\"left right\" or [\"left\", \"right\"]", e);
            goto done;
        }
        jp_set(c, mk);
    }
    st = lipi_merges_build(m, (const uint32_t(*)[2])pairs, n, &bad);
    if (st == LIPI_EINVAL) {
        const lipi_strref *a = &m->vocab.tok[pairs[bad][0]], *b = &m->vocab.tok[pairs[bad][1]];
        jp_idx(c, bad);
        st = jfail(c, "\"%.*s\" + \"%.*s\" joined is not in model.vocab",
                   (int)(a->len > 60 ? 60 : a->len), a->s, (int)(b->len > 60 ? 60 : b->len), b->s);
        goto done;
    }
    if (st != LIPI_OK) {
        st = joom(c);
        goto done;
    }
    jp_set(c, mark);
done:
    lipi_free(pairs);
    return st;
}

/* A prefix or suffix option (at most 15 bytes, so it fits the options). */
static lipi_status m_affix(jctx *c, const json_t *obj, const char *key, const char *def,
                           char dst[16], bool *is_null)
{
    lipi_status st = LIPI_OK;
    lipi_ownstr s = {0};
    bool null = false;
    if (def)
        TRY(m_str(c, obj, key, def, &s));
    else
        TRY(m_str_or_null(c, obj, key, &s, &null));
    if (is_null)
        *is_null = null;
    if (s.len > 15 || (s.s && memchr(s.s, '\0', s.len))) {
        size_t mark = jp_key(c, key);
        st = jexpect(c, "a string of at most 15 bytes", json_object_get(obj, key));
        jp_set(c, mark);
        goto done;
    }
    memset(dst, 0, 16);
    if (s.len)
        memcpy(dst, s.s, s.len);
done:
    lipi_free(s.s);
    return st;
}

/* The "unk_token" of BPE / WordPiece / WordLevel; def NULL allows null. */
static lipi_status parse_unk_token(jctx *c, const json_t *obj, const char *def, lipi_vocab_model *m)
{
    lipi_status st = LIPI_OK;
    lipi_ownstr s = {0};
    bool null = false;
    uint32_t id;
    if (def)
        TRY(m_str(c, obj, "unk_token", def, &s));
    else
        TRY(m_str_or_null(c, obj, "unk_token", &s, &null));
    m->unk_token = s.s;
    m->unk_len = s.len;
    s.s = NULL;
    m->opt.unk_id = -1;
    if (m->unk_token && lipi_vocab_find(&m->vocab, m->unk_token, m->unk_len, &id))
        m->opt.unk_id = id;
done:
    lipi_free(s.s);
    return st;
}

/* Model type for files written before "type" existed, guessed the way
 * Hugging Face's untagged fallback does (BPE, WordPiece, WordLevel, Unigram). */
static lipi_model_type guess_model_type(const json_t *obj)
{
    if (json_is_array(json_object_get(obj, "vocab")))
        return LIPI_MODEL_UNIGRAM;
    if (json_object_get(obj, "merges"))
        return LIPI_MODEL_BPE;
    if (json_object_get(obj, "continuing_subword_prefix") ||
        json_object_get(obj, "max_input_chars_per_word"))
        return LIPI_MODEL_WORDPIECE;
    return LIPI_MODEL_WORDLEVEL;
}

static lipi_status parse_model(jctx *c, const json_t *obj, lipi_vocab_model *m)
{
    lipi_status st = LIPI_OK;
    size_t mark = jp_key(c, "model");
    lipi_model_type type;
    bool b;
    uint64_t u = 0;

    if (!json_is_object(obj)) {
        st = jexpect(c, "an object", obj);
        goto done;
    }
    if (json_object_get(obj, "type")) {
        const char *name = "";
        TRY(get_type(c, obj, &name));
        if (strcmp(name, "BPE") == 0)
            type = LIPI_MODEL_BPE;
        else if (strcmp(name, "WordPiece") == 0)
            type = LIPI_MODEL_WORDPIECE;
        else if (strcmp(name, "WordLevel") == 0)
            type = LIPI_MODEL_WORDLEVEL;
        else if (strcmp(name, "Unigram") == 0)
            type = LIPI_MODEL_UNIGRAM;
        else {
            st = unknown_type(c, name, "BPE, WordPiece, WordLevel, Unigram");
            goto done;
        }
    } else {
        type = guess_model_type(obj);
    }
    m->type = type;
    lipi_model_options_default(type, &m->opt);

    switch (type) {
    case LIPI_MODEL_BPE: {
        const json_t *d = json_object_get(obj, "dropout");
        size_t mk = jp_key(c, "dropout");
        if (d && !json_is_null(d)) {
            if (!json_is_number(d) || !(json_number_value(d) >= 0.0 && json_number_value(d) <= 1.0)) {
                st = jexpect(c, "null or a number from 0 to 1", d);
                goto done;
            }
            m->has_dropout = true;
            m->dropout = json_number_value(d);
        }
        jp_set(c, mk);
        TRY(m_affix(c, obj, "continuing_subword_prefix", NULL, m->opt.continuing_subword_prefix,
                    &m->prefix_null));
        TRY(m_affix(c, obj, "end_of_word_suffix", NULL, m->opt.end_of_word_suffix,
                    &m->suffix_null));
        TRY(m_bool(c, obj, "fuse_unk", false, &b));
        m->opt.fuse_unk = b;
        TRY(m_bool(c, obj, "byte_fallback", false, &b));
        m->opt.byte_fallback = b;
        TRY(m_bool(c, obj, "ignore_merges", false, &b));
        m->opt.ignore_merges = b;
        TRY(parse_vocab_map(c, obj, m));
        TRY(parse_unk_token(c, obj, NULL, m));
        TRY(parse_merges(c, obj, m));
        break;
    }
    case LIPI_MODEL_WORDPIECE:
        TRY(m_affix(c, obj, "continuing_subword_prefix", "##", m->opt.continuing_subword_prefix,
                    NULL));
        TRY(m_uint(c, obj, "max_input_chars_per_word", SIZE_MAX > UINT64_MAX ? UINT64_MAX : SIZE_MAX,
                   100, &u));
        m->opt.max_input_chars_per_word = (size_t)u;
        TRY(parse_vocab_map(c, obj, m));
        TRY(parse_unk_token(c, obj, "[UNK]", m));
        break;
    case LIPI_MODEL_WORDLEVEL:
        TRY(parse_vocab_map(c, obj, m));
        TRY(parse_unk_token(c, obj, "<unk>", m));
        break;
    case LIPI_MODEL_UNIGRAM:
        TRY(parse_vocab_scored(c, obj, m));
        TRY(m_bool(c, obj, "byte_fallback", false, &b));
        m->opt.byte_fallback = b;
        if (m->vocab.n)
            TRY(m_uint(c, obj, "unk_id", m->vocab.n - 1, UINT64_MAX, &u));
        else if (json_object_get(obj, "unk_id") && !json_is_null(json_object_get(obj, "unk_id"))) {
            size_t mk = jp_key(c, "unk_id");
            st = jfail(c, "the vocabulary is empty, so there is no unk_id");
            jp_set(c, mk);
            goto done;
        } else
            u = UINT64_MAX;
        m->opt.unk_id = u == UINT64_MAX ? -1 : (int64_t)u;
        break;
    case LIPI_MODEL_NONE:
        break;
    }
    jp_set(c, mark);
done:
    return st;
}

/* ======================================================================== */
/* Post-processors                                                           */
/* ======================================================================== */

/* ["token", id] as in "sep": ["[SEP]", 102]. */
static lipi_status m_post_token(jctx *c, const json_t *obj, const char *key, lipi_post_token *out)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, key);
    size_t mark = jp_key(c, key);
    const json_t *s = json_array_get(v, 0), *id = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(s) ||
        !json_is_integer(id) || json_integer_value(id) < 0 ||
        json_integer_value(id) >= (json_int_t)UINT32_MAX) {
        st = jexpect(c, "[\"token\", id]", v);
        goto done;
    }
    out->token = lipi_strndup(json_string_value(s), json_string_length(s));
    out->len = json_string_length(s);
    out->id = (uint32_t)json_integer_value(id);
    if (!out->token) {
        st = joom(c);
        goto done;
    }
    jp_set(c, mark);
done:
    return st;
}

static int special_cmp(const void *a, const void *b)
{
    const lipi_template_special *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = memcmp(x->name, y->name, n);
    if (r)
        return r;
    return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]}} */
static lipi_status parse_special_tokens(jctx *c, const json_t *obj, lipi_post_processor *pp)
{
    lipi_status st = LIPI_OK;
    const json_t *v = json_object_get(obj, "special_tokens");
    size_t mark = jp_key(c, "special_tokens");
    size_t i = 0;
    void *it;

    if (!json_is_object(v)) {
        st = jexpect(c, "an object of special tokens", v);
        goto done;
    }
    pp->n_special = json_object_size(v);
    pp->special = lipi_calloc(pp->n_special ? pp->n_special : 1, sizeof *pp->special);
    if (!pp->special) {
        pp->n_special = 0;
        st = joom(c);
        goto done;
    }
    for (it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it), i++) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        const json_t *e = json_object_iter_value(it);
        lipi_template_special *sp = &pp->special[i];
        size_t mk = jp_append(c, "[\"%.40s\"]", key);
        const json_t *id = json_object_get(e, "id");
        const json_t *ids, *toks;

        if (!json_is_object(e)) {
            st = jexpect(c, "{\"id\", \"ids\", \"tokens\"}", e);
            goto done;
        }
        sp->name = lipi_strndup(key, klen);
        sp->name_len = klen;
        if (!sp->name) {
            st = joom(c);
            goto done;
        }
        if (!json_is_string(id) || json_string_length(id) != klen ||
            memcmp(json_string_value(id), key, klen) != 0) {
            jp_key(c, "id");
            st = jexpect(c, "the same string as its key", id);
            goto done;
        }
        TRY(m_array(c, e, "ids", true, &ids));
        TRY(m_array(c, e, "tokens", true, &toks));
        if (json_array_size(ids) != json_array_size(toks)) {
            st = jfail(c, "\"ids\" has %zu entries but \"tokens\" has %zu", json_array_size(ids),
                       json_array_size(toks));
            goto done;
        }
        size_t n = json_array_size(ids);
        sp->ids = lipi_calloc(n ? n : 1, sizeof *sp->ids);
        sp->tokens = lipi_calloc(n ? n : 1, sizeof *sp->tokens);
        sp->token_lens = lipi_calloc(n ? n : 1, sizeof *sp->token_lens);
        if (!sp->ids || !sp->tokens || !sp->token_lens) {
            st = joom(c);
            goto done;
        }
        sp->n = n;
        for (size_t k = 0; k < n; k++) {
            const json_t *idv = json_array_get(ids, k), *tv = json_array_get(toks, k);
            uint64_t u = 0;
            size_t mk2 = jp_key(c, "ids");
            jp_idx(c, k);
            TRY(want_uint(c, idv, UINT32_MAX - 1, &u));
            jp_set(c, mk2);
            sp->ids[k] = (uint32_t)u;
            if (!json_is_string(tv)) {
                jp_key(c, "tokens");
                jp_idx(c, k);
                st = jexpect(c, "a string", tv);
                goto done;
            }
            sp->tokens[k] = lipi_strndup(json_string_value(tv), json_string_length(tv));
            sp->token_lens[k] = json_string_length(tv);
            if (!sp->tokens[k]) {
                st = joom(c);
                goto done;
            }
        }
        jp_set(c, mk);
    }
    /* Hugging Face writes this map sorted by key; keep it so. */
    if (pp->n_special)
        qsort(pp->special, pp->n_special, sizeof *pp->special, special_cmp);
    jp_set(c, mark);
done:
    return st;
}

/* Index of a special token by name in the sorted array. */
static bool find_special(const lipi_post_processor *pp, const char *name, size_t len, size_t *idx)
{
    lipi_template_special key = {.name = (char *)name, .name_len = len};
    const lipi_template_special *f =
        pp->n_special ? bsearch(&key, pp->special, pp->n_special, sizeof key, special_cmp) : NULL;
    if (!f)
        return false;
    *idx = (size_t)(f - pp->special);
    return true;
}

/* "single" / "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
 *                     {"Sequence": {"id": "A", "type_id": 0}}, ...] */
static lipi_status parse_template(jctx *c, const json_t *obj, const char *key,
                                  const lipi_post_processor *pp, lipi_template_piece **out,
                                  size_t *n_out)
{
    lipi_status st = LIPI_OK;
    const json_t *arr;
    size_t mark, n;
    TRY(m_array(c, obj, key, true, &arr));
    mark = jp_key(c, key);
    n = json_array_size(arr);
    *out = lipi_calloc(n ? n : 1, sizeof **out);
    if (!*out) {
        st = joom(c);
        goto done;
    }
    *n_out = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        lipi_template_piece *p = &(*out)[i];
        size_t mk = jp_idx(c, i);
        const json_t *seq = json_object_get(e, "Sequence");
        const json_t *sp = json_object_get(e, "SpecialToken");
        const json_t *body = seq ? seq : sp;
        uint64_t type_id;

        if (!json_is_object(e) || json_object_size(e) != 1 || !json_is_object(body)) {
            st = jexpect(c, "{\"Sequence\": {...}} or {\"SpecialToken\": {...}}", e);
            goto done;
        }
        jp_key(c, seq ? "Sequence" : "SpecialToken");
        TRY(m_uint(c, body, "type_id", UINT32_MAX, 0, &type_id));
        p->type_id = (uint32_t)type_id;
        const json_t *id = json_object_get(body, "id");
        jp_key(c, "id");
        if (seq) {
            if (!json_is_string(id) || (strcmp(json_string_value(id), "A") != 0 &&
                                        strcmp(json_string_value(id), "B") != 0)) {
                st = jexpect(c, "\"A\" or \"B\"", id);
                goto done;
            }
            p->seq = json_string_value(id)[0] == 'B';
        } else {
            if (!json_is_string(id)) {
                st = jexpect(c, "a string", id);
                goto done;
            }
            if (!find_special(pp, json_string_value(id), json_string_length(id), &p->special)) {
                st = jfail(c, "\"%.40s\" is not in post_processor.special_tokens",
                           json_string_value(id));
                goto done;
            }
            p->is_special = true;
        }
        jp_set(c, mk);
    }
    jp_set(c, mark);
done:
    return st;
}

static lipi_status parse_post(jctx *c, const json_t *obj, lipi_post_processor *pp, int depth)
{
    lipi_status st = LIPI_OK;
    const char *type = "";
    bool b;

    if (!json_is_object(obj)) {
        st = jexpect(c, "an object", obj);
        goto done;
    }
    TRY(get_type(c, obj, &type));
    if (strcmp(type, "BertProcessing") == 0) {
        pp->type = LIPI_POST_BERT;
        TRY(m_post_token(c, obj, "sep", &pp->sep));
        TRY(m_post_token(c, obj, "cls", &pp->cls));
    } else if (strcmp(type, "RobertaProcessing") == 0) {
        pp->type = LIPI_POST_ROBERTA;
        TRY(m_post_token(c, obj, "sep", &pp->sep));
        TRY(m_post_token(c, obj, "cls", &pp->cls));
        TRY(m_bool(c, obj, "trim_offsets", true, &b));
        pp->trim_offsets = b;
        TRY(m_bool(c, obj, "add_prefix_space", true, &b));
        pp->add_prefix_space = b;
    } else if (strcmp(type, "ByteLevel") == 0) {
        pp->type = LIPI_POST_BYTELEVEL;
        TRY(m_bool(c, obj, "add_prefix_space", true, &b));
        pp->add_prefix_space = b;
        TRY(m_bool(c, obj, "trim_offsets", true, &b));
        pp->trim_offsets = b;
        TRY(m_bool(c, obj, "use_regex", true, &b));
        pp->use_regex = b;
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        pp->type = LIPI_POST_TEMPLATE;
        TRY(parse_special_tokens(c, obj, pp));
        TRY(parse_template(c, obj, "single", pp, &pp->single, &pp->n_single));
        TRY(parse_template(c, obj, "pair", pp, &pp->pair, &pp->n_pair));
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *arr;
        pp->type = LIPI_POST_SEQUENCE;
        TRY(m_array(c, obj, "processors", true, &arr));
        size_t mark = jp_key(c, "processors");
        if (depth >= SEQUENCE_MAX_DEPTH) {
            st = jfail(c, "Sequence nested more than %d deep", SEQUENCE_MAX_DEPTH);
            goto done;
        }
        size_t n = json_array_size(arr);
        pp->items = lipi_calloc(n ? n : 1, sizeof *pp->items);
        if (!pp->items) {
            st = joom(c);
            goto done;
        }
        pp->n_items = n;
        for (size_t i = 0; i < n; i++) {
            size_t mk = jp_idx(c, i);
            TRY(parse_post(c, json_array_get(arr, i), &pp->items[i], depth + 1));
            jp_set(c, mk);
        }
        jp_set(c, mark);
    } else {
        st = unknown_type(c, type,
                          "BertProcessing, RobertaProcessing, ByteLevel, TemplateProcessing, Sequence");
    }
done:
    return st;
}

/* ======================================================================== */
/* Decoders                                                                  */
/* ======================================================================== */

static lipi_status parse_decoder(jctx *c, const json_t *obj, lipi_decoder *d, int depth)
{
    lipi_status st = LIPI_OK;
    const char *type = "";
    bool b;
    uint64_t u = 0;

    if (!json_is_object(obj)) {
        st = jexpect(c, "an object", obj);
        goto done;
    }
    TRY(get_type(c, obj, &type));
    if (strcmp(type, "ByteLevel") == 0) {
        d->type = LIPI_DEC_BYTELEVEL;
        TRY(m_bool(c, obj, "add_prefix_space", true, &b));
        d->bytelevel.add_prefix_space = b;
        TRY(m_bool(c, obj, "trim_offsets", true, &b));
        d->bytelevel.trim_offsets = b;
        TRY(m_bool(c, obj, "use_regex", true, &b));
        d->bytelevel.use_regex = b;
    } else if (strcmp(type, "WordPiece") == 0) {
        d->type = LIPI_DEC_WORDPIECE;
        TRY(m_str(c, obj, "prefix", "##", &d->wordpiece.prefix));
        TRY(m_bool(c, obj, "cleanup", true, &b));
        d->wordpiece.cleanup = b;
    } else if (strcmp(type, "Metaspace") == 0) {
        const json_t *ps = json_object_get(obj, "prepend_scheme");
        d->type = LIPI_DEC_METASPACE;
        TRY(m_char(c, obj, "replacement", NULL, &d->metaspace.replacement));
        d->metaspace.prepend_scheme = LIPI_PREPEND_ALWAYS;
        if (ps && !json_is_null(ps)) {
            const char *s = json_string_value(ps);
            size_t mk = jp_key(c, "prepend_scheme");
            if (s && strcmp(s, "always") == 0)
                d->metaspace.prepend_scheme = LIPI_PREPEND_ALWAYS;
            else if (s && strcmp(s, "first") == 0)
                d->metaspace.prepend_scheme = LIPI_PREPEND_FIRST;
            else if (s && strcmp(s, "never") == 0)
                d->metaspace.prepend_scheme = LIPI_PREPEND_NEVER;
            else {
                st = jexpect(c, "\"always\", \"first\" or \"never\"", ps);
                goto done;
            }
            jp_set(c, mk);
        }
        /* Files from before prepend_scheme say "add_prefix_space". */
        TRY(m_bool(c, obj, "add_prefix_space", true, &b));
        if (!b) {
            if (ps && !json_is_null(ps) && d->metaspace.prepend_scheme != LIPI_PREPEND_NEVER) {
                size_t mk = jp_key(c, "add_prefix_space");
                st = jfail(c, "false contradicts prepend_scheme");
                jp_set(c, mk);
                goto done;
            }
            d->metaspace.prepend_scheme = LIPI_PREPEND_NEVER;
        }
        TRY(m_bool(c, obj, "split", true, &b));
        d->metaspace.split = b;
    } else if (strcmp(type, "ByteFallback") == 0) {
        d->type = LIPI_DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        d->type = LIPI_DEC_FUSE;
    } else if (strcmp(type, "Strip") == 0) {
        d->type = LIPI_DEC_STRIP;
        TRY(m_char(c, obj, "content", NULL, &d->strip.content));
        TRY(m_uint(c, obj, "start", SIZE_MAX > UINT64_MAX ? UINT64_MAX : SIZE_MAX, 0, &u));
        d->strip.start = (size_t)u;
        TRY(m_uint(c, obj, "stop", SIZE_MAX > UINT64_MAX ? UINT64_MAX : SIZE_MAX, 0, &u));
        d->strip.stop = (size_t)u;
    } else if (strcmp(type, "Replace") == 0) {
        const json_t *pat = json_object_get(obj, "pattern");
        const json_t *ps = json_object_get(pat, "String"), *pr = json_object_get(pat, "Regex");
        d->type = LIPI_DEC_REPLACE;
        size_t mk = jp_key(c, "pattern");
        if (!json_is_object(pat) || json_object_size(pat) != 1 ||
            !(json_is_string(ps) || json_is_string(pr))) {
            st = jexpect(c, "{\"String\": \"...\"} or {\"Regex\": \"...\"}", pat);
            goto done;
        }
        d->replace.regex = pr != NULL;
        TRY(own(c, json_string_value(pr ? pr : ps), json_string_length(pr ? pr : ps),
                &d->replace.pattern));
        jp_set(c, mk);
        TRY(m_str(c, obj, "content", NULL, &d->replace.content));
    } else if (strcmp(type, "BPEDecoder") == 0) {
        d->type = LIPI_DEC_BPE;
        TRY(m_str(c, obj, "suffix", "</w>", &d->bpe.suffix));
    } else if (strcmp(type, "CTC") == 0) {
        d->type = LIPI_DEC_CTC;
        TRY(m_str(c, obj, "pad_token", "<pad>", &d->ctc.pad_token));
        TRY(m_str(c, obj, "word_delimiter_token", "|", &d->ctc.word_delimiter_token));
        TRY(m_bool(c, obj, "cleanup", true, &b));
        d->ctc.cleanup = b;
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *arr;
        d->type = LIPI_DEC_SEQUENCE;
        TRY(m_array(c, obj, "decoders", true, &arr));
        size_t mark = jp_key(c, "decoders");
        if (depth >= SEQUENCE_MAX_DEPTH) {
            st = jfail(c, "Sequence nested more than %d deep", SEQUENCE_MAX_DEPTH);
            goto done;
        }
        size_t n = json_array_size(arr);
        d->sequence.items = lipi_calloc(n ? n : 1, sizeof *d->sequence.items);
        if (!d->sequence.items) {
            st = joom(c);
            goto done;
        }
        d->sequence.n_items = n;
        for (size_t i = 0; i < n; i++) {
            size_t mk = jp_idx(c, i);
            TRY(parse_decoder(c, json_array_get(arr, i), &d->sequence.items[i], depth + 1));
            jp_set(c, mk);
        }
        jp_set(c, mark);
    } else {
        st = unknown_type(c, type,
                          "ByteLevel, WordPiece, Metaspace, ByteFallback, Fuse, Strip, Replace, "
                          "BPEDecoder, CTC, Sequence");
    }
done:
    return st;
}

/* ======================================================================== */
/* Added tokens                                                              */
/* ======================================================================== */

/* The ids of added tokens are Hugging Face's, not the file's: tokenizers
 * 0.23.2 reads "added_tokens" by adding each token in file order
 * (AddedVocabulary::add_tokens; the "id" only feeds a warning). A token the
 * model has gets the model's id. Any other gets the model's entry count for
 * the first such token added, then (once an added id reaches the count)
 * the largest added id + 1, so ids the model leaves unused stay unused, and
 * a new id may be a model token's: then the id decodes as the added token
 * while the model's string still encodes to it, as in Hugging Face.
 *   vocab {"[UNK]": 0, "a": 1, "b": 2, "c": 4, "d": 5, "e": 8} (6 entries),
 *   added "[UNK]" (file id 0), "<x>" (3), "<y>" (6), "b" (1), "<z>" (9)
 *   -> 0, 6, 7, 2, 8 (tests/fixtures/tokenizer_json/added_holes.json, ids
 *   from make_added_holes.js). */
static uint32_t hf_added_id(const lipi_vocab *v, const lipi_added_token *a, bool any,
                            uint32_t max)
{
    uint32_t mid;
    if (lipi_vocab_find(v, a->content, a->len, &mid))
        return mid;
    if (!any)
        return (uint32_t)v->count;
    return max >= v->count || v->count == 0 ? max + 1 : (uint32_t)v->count;
}

static lipi_status parse_added(jctx *c, const json_t *arr, lipi_tokenizer *t)
{
    lipi_status st = LIPI_OK;
    lipi_added_token *toks = NULL;
    size_t n = json_array_size(arr), filled = 0;
    uint32_t max_id = 0;
    size_t mark = jp_key(c, "added_tokens");

    toks = lipi_calloc(n ? n : 1, sizeof *toks);
    if (!toks) {
        st = joom(c);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        lipi_added_token *a = &toks[i];
        lipi_ownstr content = {0};
        uint64_t id = 0;
        bool b;
        size_t mk = jp_idx(c, i);

        if (!json_is_object(e)) {
            st = jexpect(c, "an object", e);
            goto done;
        }
        const json_t *idv = json_object_get(e, "id");
        size_t mk2 = jp_key(c, "id");
        TRY(want_uint(c, idv, UINT32_MAX, &id)); /* a u32, then unused */
        jp_set(c, mk2);
        TRY(m_str(c, e, "content", NULL, &content));
        a->content = content.s;
        a->len = content.len;
        filled = i + 1;
        if (a->len == 0) {
            jp_key(c, "content");
            st = jfail(c, "empty, expected a non-empty string");
            goto done;
        }
        for (size_t k = 0; k < i; k++)
            if (toks[k].len == a->len && memcmp(toks[k].content, a->content, a->len) == 0) {
                jp_key(c, "content");
                st = jfail(c, "\"%.*s\" appears twice (also added_tokens[%zu])",
                           (int)(a->len > 64 ? 64 : a->len), a->content, k);
                goto done;
            }
        a->id = hf_added_id(&t->model.vocab, a, i > 0, max_id);
        if (a->id == UINT32_MAX) {
            st = jfail(c, "too many added tokens: ids must fit in 32 bits");
            goto done;
        }
        max_id = i == 0 || a->id > max_id ? a->id : max_id;
        TRY(m_bool(c, e, "single_word", false, &b));
        a->single_word = b;
        TRY(m_bool(c, e, "lstrip", false, &b));
        a->lstrip = b;
        TRY(m_bool(c, e, "rstrip", false, &b));
        a->rstrip = b;
        TRY(m_bool(c, e, "special", false, &b));
        a->special = b;
        /* Hugging Face's default: special tokens are not normalized. */
        TRY(m_bool(c, e, "normalized", !a->special, &b));
        a->normalized = b;
        jp_set(c, mk);
    }
    /* set_added takes the array whatever happens. */
    t->added_may_shadow = true;
    st = lipi_tokenizer_set_added(t, toks, n, c->err);
    toks = NULL;
    filled = 0;
    if (st == LIPI_EINVAL) {
        if (c->err) {
            c->err->code = LIPI_EFORMAT;
            lipi_error_prefix(c->err, "%s", c->path);
            snprintf(c->err->path, sizeof c->err->path, "%s", c->name);
        }
        st = LIPI_EFORMAT;
    } else if (st != LIPI_OK) {
        st = joom(c);
    }
    if (st == LIPI_OK)
        jp_set(c, mark);
done:
    for (size_t i = 0; i < filled; i++)
        lipi_free(toks[i].content);
    lipi_free(toks);
    return st;
}

/* ======================================================================== */
/* Loading                                                                   */
/* ======================================================================== */

/* Whether a pre_tokenizer section uses the GPT-2 byte alphabet. */
static bool uses_byte_level(const json_t *pt, int depth)
{
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (!type || depth > SEQUENCE_MAX_DEPTH)
        return false;
    if (strcmp(type, "ByteLevel") == 0)
        return true;
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(pt, "pretokenizers");
        for (size_t i = 0; i < json_array_size(arr); i++)
            if (uses_byte_level(json_array_get(arr, i), depth + 1))
                return true;
    }
    return false;
}

/* After a component's section reader failed with st: names the file in
 * err->path, and writes a message if the component left err unfilled. */
static void name_file(jctx *c, const char *section, lipi_status st)
{
    if (!c->err)
        return;
    if (c->err->code != st)
        lipi_error_set(c->err, st, NULL, 0, 0, "%s: %s", section,
                       st == LIPI_ENOMEM ? "out of memory" : lipi_status_name(st));
    snprintf(c->err->path, sizeof c->err->path, "%s", c->name);
}

/* A kept-verbatim section (truncation, padding): an object or null. */
static lipi_status keep_section(jctx *c, const json_t *root, const char *key, json_t **out)
{
    lipi_status st = LIPI_OK;
    json_t *v = json_object_get(root, key);
    size_t mark = jp_key(c, key);
    *out = NULL;
    if (json_is_object(v))
        *out = json_incref(v);
    else if (v && !json_is_null(v))
        st = jexpect(c, "an object or null", v);
    if (st == LIPI_OK)
        jp_set(c, mark);
    return st;
}

/* See tokenizer.h. The value is parsed by the loader's own parse_decoder,
 * so a decoder set here and one read from a file are the same object. */
lipi_status lipi_tokenizer_set_decoder_json(lipi_tokenizer *t, const char *json, size_t len,
                                            lipi_error *err)
{
    lipi_status st = LIPI_OK;
    jctx c = {.name = "", .err = err};
    json_error_t jerr;
    json_t *root = NULL;
    lipi_decoder *d = NULL;

    if (!t || (!json && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no tokenizer or no text given");
    memset(&jerr, 0, sizeof jerr);
    root = lipi_json_loadb(json, len, 0, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return joom(&c);
        return lipi_error_set(err, LIPI_EFORMAT, NULL, (size_t)(jerr.line > 0 ? jerr.line : 0),
                              (size_t)(jerr.position > 0 ? jerr.position : 0), "%s", jerr.text);
    }
    d = lipi_calloc(1, sizeof *d);
    if (!d) {
        st = joom(&c);
        goto done;
    }
    jp_key(&c, "decoder");
    TRY(parse_decoder(&c, root, d, 0));
    lipi_decoder_free(t->decoder);
    t->decoder = d;
    d = NULL;
done:
    lipi_decoder_free(d);
    json_decref(root);
    return st;
}

/* Loads tokenizer.json text (see tokenizer.h). `name` (the file name, or
 * NULL) goes into err->path. */
/* lipi_tokenizer_load_json, or with `given` (stolen, emptied even on
 * error) as the model in place of the file's "model" section, which is
 * then not read (lipi_tokenizer_load_json_model). */
static lipi_status load_json(const char *json, size_t len, const char *name,
                             lipi_vocab_model *given, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    jctx c = {.name = name ? name : "", .err = err};
    json_error_t jerr;
    json_t *root = NULL;
    lipi_tokenizer *t = NULL;
    lipi_vocab_model m = {0};
    const json_t *v, *added;

    m.opt.unk_id = -1;
    if (given) {
        m = *given;
        memset(given, 0, sizeof *given);
        given->opt.unk_id = -1;
    }
    if (!out) {
        st = lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no output pointer given");
        goto done;
    }
    *out = NULL;
    if (!json && len) {
        st = lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no text given");
        goto done;
    }
    if (len == 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, name, 0, 0, "empty file, expected a JSON object");
        goto done;
    }

    /* Duplicate keys are allowed, last one wins, as in Hugging Face (serde
     * maps); NUL is allowed in strings (not keys: jansson cannot hold it). */
    memset(&jerr, 0, sizeof jerr);
    root = lipi_json_loadb(json, len, JSON_ALLOW_NUL, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            st = joom(&c);
        } else {
            /* The position is just past the byte that failed: report that
             * byte's 1-based byte column within its line, as lipi_error
             * promises. */
            size_t pos = jerr.position < 0 ? 0 : (size_t)jerr.position;
            if (pos > len)
                pos = len;
            size_t start = pos ? pos - 1 : 0;
            while (start > 0 && json[start - 1] != '\n')
                start--;
            st = lipi_error_set(err, LIPI_EFORMAT, c.name, jerr.line > 0 ? (size_t)jerr.line : 1,
                                pos > start ? pos - start : 1, "invalid JSON: %s", jerr.text);
        }
        goto done;
    }
    if (!json_is_object(root)) {
        st = jexpect(&c, "an object", root);
        goto done;
    }
    if (lipi_tokenizer_new(&t) != LIPI_OK) {
        st = joom(&c);
        goto done;
    }

    v = json_object_get(root, "version");
    if (v) {
        size_t mk = jp_key(&c, "version");
        if (!json_is_string(v) || strcmp(json_string_value(v), "1.0") != 0) {
            st = jexpect(&c, "\"1.0\"", v);
            goto done;
        }
        jp_set(&c, mk);
    }
    TRY(keep_section(&c, root, "truncation", &t->truncation));
    TRY(keep_section(&c, root, "padding", &t->padding));

    if (!given) {
        v = json_object_get(root, "model");
        TRY(parse_model(&c, v, &m));
        v = json_object_get(root, "pre_tokenizer");
        m.opt.byte_level = v && uses_byte_level(v, 0);
    }
    st = lipi_tokenizer_install_model(t, &m, err);
    if (st != LIPI_OK)
        goto done;

    v = json_object_get(root, "normalizer");
    if (v && !json_is_null(v)) {
        lipi_normalizer *n = NULL;
        if (err)
            err->code = LIPI_OK;
        st = lipi_normalizer_from_json(v, "normalizer", &n, err);
        if (st != LIPI_OK) {
            name_file(&c, "normalizer", st);
            goto done;
        }
        TRY(lipi_tokenizer_take_normalizer(t, n));
    }
    v = json_object_get(root, "pre_tokenizer");
    if (v && !json_is_null(v)) {
        lipi_pretokenizer *p = NULL;
        if (err)
            err->code = LIPI_OK;
        st = lipi_pretokenizer_from_json(v, "pre_tokenizer", &p, err);
        if (st != LIPI_OK) {
            name_file(&c, "pre_tokenizer", st);
            goto done;
        }
        TRY(lipi_tokenizer_take_pretokenizer(t, p));
    }

    v = json_object_get(root, "post_processor");
    if (v && !json_is_null(v)) {
        size_t mk = jp_key(&c, "post_processor");
        t->post = lipi_calloc(1, sizeof *t->post);
        if (!t->post) {
            st = joom(&c);
            goto done;
        }
        TRY(parse_post(&c, v, t->post, 0));
        jp_set(&c, mk);
    }
    v = json_object_get(root, "decoder");
    if (v && !json_is_null(v)) {
        size_t mk = jp_key(&c, "decoder");
        t->decoder = lipi_calloc(1, sizeof *t->decoder);
        if (!t->decoder) {
            st = joom(&c);
            goto done;
        }
        TRY(parse_decoder(&c, v, t->decoder, 0));
        jp_set(&c, mk);
    }

    TRY(m_array(&c, root, "added_tokens", false, &added));
    if (added)
        TRY(parse_added(&c, added, t));

    *out = t;
    t = NULL;
done:
    lipi_vocab_model_clear(&m);
    lipi_tokenizer_free(t);
    json_decref(root);
    return st;
}

lipi_status lipi_tokenizer_load_json(const char *json, size_t len, const char *name,
                                     lipi_tokenizer **out, lipi_error *err)
{
    return load_json(json, len, name, NULL, out, err);
}

lipi_status lipi_tokenizer_load_json_model(const char *json, size_t len, const char *name,
                                           lipi_vocab_model *m, lipi_tokenizer **out,
                                           lipi_error *err)
{
    return load_json(json, len, name, m, out, err);
}

/* Reads and loads a tokenizer.json file; errors carry the file name. */
lipi_status lipi_tokenizer_load(const char *path, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *text = NULL;
    size_t len = 0;
    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "no output pointer given");
    *out = NULL;
    TRY(lipi_read_file(path, LIPI_TOKENIZER_JSON_MAX, &text, &len, err));
    TRY(lipi_tokenizer_load_json(text, len, path, out, err));
done:
    lipi_free(text);
    return st;
}

/* ======================================================================== */
/* Writing: a streaming pretty printer in serde_json's style                 */
/* ======================================================================== */

/* jansson values nest at most JSON_PARSER_MAX_DEPTH deep, and lipi's own
 * sections a few levels more. */
#define JW_MAX_DEPTH (JSON_PARSER_MAX_DEPTH + 64)

typedef struct {
    lipi_buf *b;
    lipi_status st;          /* sticky: the first failure */
    size_t depth;
    bool first[JW_MAX_DEPTH]; /* no member written yet at this level */
    char bad[64];            /* the first string that was not UTF-8 */
} jw;

static void jw_raw(jw *w, const char *s, size_t n)
{
    if (w->st == LIPI_OK)
        w->st = lipi_buf_append(w->b, s, n);
}

static void jw_newline(jw *w)
{
    static const char spaces[] = "                                ";
    jw_raw(w, "\n", 1);
    for (size_t d = w->depth; d > 0;) {
        size_t k = d > 16 ? 16 : d;
        jw_raw(w, spaces, 2 * k);
        d -= k;
    }
}

/* Separator before a member or element. */
static void jw_sep(jw *w)
{
    if (w->depth == 0)
        return;
    if (!w->first[w->depth - 1])
        jw_raw(w, ",", 1);
    w->first[w->depth - 1] = false;
    jw_newline(w);
}

static void jw_open(jw *w, char ch)
{
    jw_raw(w, &ch, 1);
    if (w->depth >= JW_MAX_DEPTH) {
        if (w->st == LIPI_OK)
            w->st = LIPI_EINVAL;
        return;
    }
    w->first[w->depth++] = true;
}

static void jw_close(jw *w, char ch)
{
    if (w->depth == 0)
        return;
    bool empty = w->first[--w->depth];
    if (!empty)
        jw_newline(w);
    jw_raw(w, &ch, 1);
}

/* A JSON string; escapes as serde_json does (quote, backslash, control
 * characters; everything else, including non-ASCII, is written as is). */
static void jw_str(jw *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (lipi_utf8_valid_prefix(s, n) != n) {
        if (w->st == LIPI_OK) {
            w->st = LIPI_EINVAL;
            snprintf(w->bad, sizeof w->bad, "%.*s", (int)(n > 40 ? 40 : n), s);
        }
        return;
    }
    jw_raw(w, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[6];
        size_t elen = 2;
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
        } else if (ch < 0x20) {
            esc[0] = '\\';
            switch (ch) {
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            default:
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[ch >> 4];
                esc[5] = hex[ch & 15];
                elen = 6;
            }
        } else {
            continue;
        }
        jw_raw(w, s + run, i - run);
        jw_raw(w, esc, elen);
        run = i + 1;
    }
    jw_raw(w, s + run, n - run);
    jw_raw(w, "\"", 1);
}

static void jw_key(jw *w, const char *key)
{
    jw_sep(w);
    jw_str(w, key, strlen(key));
    jw_raw(w, ": ", 2);
}

static void jw_int(jw *w, long long v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld", v);
    jw_raw(w, buf, (size_t)n);
}

static void jw_bool(jw *w, bool v)
{
    jw_raw(w, v ? "true" : "false", v ? 4 : 5);
}

static void jw_null(jw *w)
{
    jw_raw(w, "null", 4);
}

/* The shortest decimal that reads back as d, laid out as Rust's ryu does
 * (what Hugging Face writes): "0.1", "-7.25", "100.0", "1e-7", "1.5e20". */
static size_t format_double(double d, char *out)
{
    char tmp[40], digits[20];
    size_t nd = 0, o = 0;
    int exp10;

    if (d == 0.0)
        return (size_t)sprintf(out, "%s", signbit(d) ? "-0.0" : "0.0");
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    /* tmp is [-]D[.DDD]e[+-]XX */
    const char *p = tmp;
    if (*p == '-')
        out[o++] = *p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    long kk = (long)exp10 + 1; /* digits[0] is at 10^(kk-1) */
    long len = (long)nd;
    if (len <= kk && kk <= 16) {
        memcpy(out + o, digits, nd);
        o += nd;
        for (long i = len; i < kk; i++)
            out[o++] = '0';
        memcpy(out + o, ".0", 2);
        o += 2;
    } else if (0 < kk && kk <= 16) {
        memcpy(out + o, digits, (size_t)kk);
        o += (size_t)kk;
        out[o++] = '.';
        memcpy(out + o, digits + kk, nd - (size_t)kk);
        o += nd - (size_t)kk;
    } else if (-5 < kk && kk <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (long i = kk; i < 0; i++)
            out[o++] = '0';
        memcpy(out + o, digits, nd);
        o += nd;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += (size_t)sprintf(out + o, "e%ld", kk - 1);
    }
    out[o] = '\0';
    return o;
}

static void jw_real(jw *w, double d)
{
    char buf[48];
    if (!isfinite(d)) {
        /* JSON has no infinities; the loaders never produce them. */
        if (w->st == LIPI_OK)
            w->st = LIPI_EINVAL;
        return;
    }
    jw_raw(w, buf, format_double(d, buf));
}

/* Any jansson value, objects in their insertion order (which jansson keeps,
 * so a section written back keeps the order it was read in). */
static void jw_json(jw *w, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        jw_open(w, '{');
        for (void *it = json_object_iter((json_t *)v); it && w->st == LIPI_OK;
             it = json_object_iter_next((json_t *)v, it)) {
            jw_sep(w);
            jw_str(w, json_object_iter_key(it), json_object_iter_key_len(it));
            jw_raw(w, ": ", 2);
            jw_json(w, json_object_iter_value(it));
        }
        jw_close(w, '}');
        break;
    case JSON_ARRAY:
        jw_open(w, '[');
        for (size_t i = 0; i < json_array_size(v) && w->st == LIPI_OK; i++) {
            jw_sep(w);
            jw_json(w, json_array_get(v, i));
        }
        jw_close(w, ']');
        break;
    case JSON_STRING: jw_str(w, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: jw_int(w, (long long)json_integer_value(v)); break;
    case JSON_REAL: jw_real(w, json_real_value(v)); break;
    case JSON_TRUE: jw_bool(w, true); break;
    case JSON_FALSE: jw_bool(w, false); break;
    case JSON_NULL: jw_null(w); break;
    }
}

static void jw_kstr(jw *w, const char *key, const char *s, size_t n)
{
    jw_key(w, key);
    jw_str(w, s, n);
}

static void jw_kbool(jw *w, const char *key, bool v)
{
    jw_key(w, key);
    jw_bool(w, v);
}

static void jw_kint(jw *w, const char *key, long long v)
{
    jw_key(w, key);
    jw_int(w, v);
}

static void jw_ktype(jw *w, const char *type)
{
    jw_kstr(w, "type", type, strlen(type));
}

/* ------------------------------------------------------------------------ */
/* Sections                                                                  */
/* ------------------------------------------------------------------------ */

static void write_vocab_map(jw *w, const lipi_vocab *v)
{
    jw_key(w, "vocab");
    jw_open(w, '{');
    for (size_t id = 0; id < v->n && w->st == LIPI_OK; id++) {
        if (!v->tok[id].s)
            continue;
        jw_sep(w);
        jw_str(w, v->tok[id].s, v->tok[id].len);
        jw_raw(w, ": ", 2);
        jw_int(w, (long long)id);
    }
    jw_close(w, '}');
}

static void write_model(jw *w, const lipi_vocab_model *m)
{
    const lipi_vocab *v = &m->vocab;
    jw_key(w, "model");
    jw_open(w, '{');
    switch (m->type) {
    case LIPI_MODEL_BPE:
        jw_ktype(w, "BPE");
        jw_key(w, "dropout");
        if (m->has_dropout)
            jw_real(w, m->dropout);
        else
            jw_null(w);
        jw_key(w, "unk_token");
        if (m->unk_token)
            jw_str(w, m->unk_token, m->unk_len);
        else
            jw_null(w);
        jw_key(w, "continuing_subword_prefix");
        if (m->prefix_null && !m->opt.continuing_subword_prefix[0])
            jw_null(w);
        else
            jw_str(w, m->opt.continuing_subword_prefix, strlen(m->opt.continuing_subword_prefix));
        jw_key(w, "end_of_word_suffix");
        if (m->suffix_null && !m->opt.end_of_word_suffix[0])
            jw_null(w);
        else
            jw_str(w, m->opt.end_of_word_suffix, strlen(m->opt.end_of_word_suffix));
        jw_kbool(w, "fuse_unk", m->opt.fuse_unk);
        jw_kbool(w, "byte_fallback", m->opt.byte_fallback);
        jw_kbool(w, "ignore_merges", m->opt.ignore_merges);
        write_vocab_map(w, v);
        jw_key(w, "merges");
        jw_open(w, '[');
        for (size_t r = 0; r < m->n_merges && w->st == LIPI_OK; r++) {
            const lipi_strref *a = &v->tok[m->merges[r].left], *b = &v->tok[m->merges[r].right];
            jw_sep(w);
            if (m->merges_legacy) {
                /* "a b": joined by hand to stay one string. */
                lipi_buf s = {0};
                if (lipi_buf_append(&s, a->s, a->len) != LIPI_OK ||
                    lipi_buf_append(&s, " ", 1) != LIPI_OK ||
                    lipi_buf_append(&s, b->s, b->len) != LIPI_OK) {
                    if (w->st == LIPI_OK)
                        w->st = LIPI_ENOMEM;
                } else {
                    jw_str(w, s.p, s.len);
                }
                lipi_buf_free(&s);
            } else {
                jw_open(w, '[');
                jw_sep(w);
                jw_str(w, a->s, a->len);
                jw_sep(w);
                jw_str(w, b->s, b->len);
                jw_close(w, ']');
            }
        }
        jw_close(w, ']');
        break;
    case LIPI_MODEL_WORDPIECE:
        jw_ktype(w, "WordPiece");
        jw_kstr(w, "unk_token", m->unk_token ? m->unk_token : "[UNK]",
                m->unk_token ? m->unk_len : 5);
        jw_kstr(w, "continuing_subword_prefix", m->opt.continuing_subword_prefix,
                strlen(m->opt.continuing_subword_prefix));
        jw_kint(w, "max_input_chars_per_word", (long long)m->opt.max_input_chars_per_word);
        write_vocab_map(w, v);
        break;
    case LIPI_MODEL_WORDLEVEL:
        jw_ktype(w, "WordLevel");
        write_vocab_map(w, v);
        jw_kstr(w, "unk_token", m->unk_token ? m->unk_token : "<unk>",
                m->unk_token ? m->unk_len : 5);
        break;
    case LIPI_MODEL_UNIGRAM:
        jw_ktype(w, "Unigram");
        jw_key(w, "unk_id");
        if (m->opt.unk_id >= 0)
            jw_int(w, (long long)m->opt.unk_id);
        else
            jw_null(w);
        jw_key(w, "vocab");
        jw_open(w, '[');
        for (size_t id = 0; id < v->n && w->st == LIPI_OK; id++) {
            jw_sep(w);
            jw_open(w, '[');
            jw_sep(w);
            jw_str(w, v->tok[id].s, v->tok[id].len);
            jw_sep(w);
            jw_real(w, m->scores[id]);
            jw_close(w, ']');
        }
        jw_close(w, ']');
        jw_kbool(w, "byte_fallback", m->opt.byte_fallback);
        break;
    case LIPI_MODEL_NONE:
        break;
    }
    jw_close(w, '}');
}

static void write_post_token(jw *w, const char *key, const lipi_post_token *pt)
{
    jw_key(w, key);
    jw_open(w, '[');
    jw_sep(w);
    jw_str(w, pt->token, pt->len);
    jw_sep(w);
    jw_int(w, pt->id);
    jw_close(w, ']');
}

static void write_template(jw *w, const char *key, const lipi_post_processor *pp,
                           const lipi_template_piece *pieces, size_t n)
{
    jw_key(w, key);
    jw_open(w, '[');
    for (size_t i = 0; i < n; i++) {
        const lipi_template_piece *p = &pieces[i];
        jw_sep(w);
        jw_open(w, '{');
        jw_key(w, p->is_special ? "SpecialToken" : "Sequence");
        jw_open(w, '{');
        if (p->is_special)
            jw_kstr(w, "id", pp->special[p->special].name, pp->special[p->special].name_len);
        else
            jw_kstr(w, "id", p->seq ? "B" : "A", 1);
        jw_kint(w, "type_id", p->type_id);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* The post-processor object (without a key before it). */
static void write_post(jw *w, const lipi_post_processor *pp)
{
    jw_open(w, '{');
    switch (pp->type) {
    case LIPI_POST_BERT:
        jw_ktype(w, "BertProcessing");
        write_post_token(w, "sep", &pp->sep);
        write_post_token(w, "cls", &pp->cls);
        break;
    case LIPI_POST_ROBERTA:
        jw_ktype(w, "RobertaProcessing");
        write_post_token(w, "sep", &pp->sep);
        write_post_token(w, "cls", &pp->cls);
        jw_kbool(w, "trim_offsets", pp->trim_offsets);
        jw_kbool(w, "add_prefix_space", pp->add_prefix_space);
        break;
    case LIPI_POST_BYTELEVEL:
        jw_ktype(w, "ByteLevel");
        jw_kbool(w, "add_prefix_space", pp->add_prefix_space);
        jw_kbool(w, "trim_offsets", pp->trim_offsets);
        jw_kbool(w, "use_regex", pp->use_regex);
        break;
    case LIPI_POST_TEMPLATE:
        jw_ktype(w, "TemplateProcessing");
        write_template(w, "single", pp, pp->single, pp->n_single);
        write_template(w, "pair", pp, pp->pair, pp->n_pair);
        jw_key(w, "special_tokens");
        jw_open(w, '{');
        for (size_t i = 0; i < pp->n_special; i++) {
            const lipi_template_special *sp = &pp->special[i];
            jw_sep(w);
            jw_str(w, sp->name, sp->name_len);
            jw_raw(w, ": ", 2);
            jw_open(w, '{');
            jw_kstr(w, "id", sp->name, sp->name_len);
            jw_key(w, "ids");
            jw_open(w, '[');
            for (size_t k = 0; k < sp->n; k++) {
                jw_sep(w);
                jw_int(w, sp->ids[k]);
            }
            jw_close(w, ']');
            jw_key(w, "tokens");
            jw_open(w, '[');
            for (size_t k = 0; k < sp->n; k++) {
                jw_sep(w);
                jw_str(w, sp->tokens[k], sp->token_lens[k]);
            }
            jw_close(w, ']');
            jw_close(w, '}');
        }
        jw_close(w, '}');
        break;
    case LIPI_POST_SEQUENCE:
        jw_ktype(w, "Sequence");
        jw_key(w, "processors");
        jw_open(w, '[');
        for (size_t i = 0; i < pp->n_items; i++) {
            jw_sep(w);
            write_post(w, &pp->items[i]);
        }
        jw_close(w, ']');
        break;
    }
    jw_close(w, '}');
}

static void jw_kown(jw *w, const char *key, const lipi_ownstr *s)
{
    jw_kstr(w, key, s->s ? s->s : "", s->len);
}

/* The decoder object (without a key before it). */
static void write_decoder(jw *w, const lipi_decoder *d)
{
    static const char *const schemes[] = {"always", "first", "never"};
    jw_open(w, '{');
    switch (d->type) {
    case LIPI_DEC_BYTELEVEL:
        jw_ktype(w, "ByteLevel");
        jw_kbool(w, "add_prefix_space", d->bytelevel.add_prefix_space);
        jw_kbool(w, "trim_offsets", d->bytelevel.trim_offsets);
        jw_kbool(w, "use_regex", d->bytelevel.use_regex);
        break;
    case LIPI_DEC_WORDPIECE:
        jw_ktype(w, "WordPiece");
        jw_kown(w, "prefix", &d->wordpiece.prefix);
        jw_kbool(w, "cleanup", d->wordpiece.cleanup);
        break;
    case LIPI_DEC_METASPACE:
        jw_ktype(w, "Metaspace");
        jw_kown(w, "replacement", &d->metaspace.replacement);
        jw_kstr(w, "prepend_scheme", schemes[d->metaspace.prepend_scheme],
                strlen(schemes[d->metaspace.prepend_scheme]));
        jw_kbool(w, "split", d->metaspace.split);
        break;
    case LIPI_DEC_BYTEFALLBACK:
        jw_ktype(w, "ByteFallback");
        break;
    case LIPI_DEC_FUSE:
        jw_ktype(w, "Fuse");
        break;
    case LIPI_DEC_STRIP:
        jw_ktype(w, "Strip");
        jw_kown(w, "content", &d->strip.content);
        jw_kint(w, "start", (long long)d->strip.start);
        jw_kint(w, "stop", (long long)d->strip.stop);
        break;
    case LIPI_DEC_REPLACE:
        jw_ktype(w, "Replace");
        jw_key(w, "pattern");
        jw_open(w, '{');
        jw_kown(w, d->replace.regex ? "Regex" : "String", &d->replace.pattern);
        jw_close(w, '}');
        jw_kown(w, "content", &d->replace.content);
        break;
    case LIPI_DEC_BPE:
        jw_ktype(w, "BPEDecoder");
        jw_kown(w, "suffix", &d->bpe.suffix);
        break;
    case LIPI_DEC_CTC:
        jw_ktype(w, "CTC");
        jw_kown(w, "pad_token", &d->ctc.pad_token);
        jw_kown(w, "word_delimiter_token", &d->ctc.word_delimiter_token);
        jw_kbool(w, "cleanup", d->ctc.cleanup);
        break;
    case LIPI_DEC_SEQUENCE:
        jw_ktype(w, "Sequence");
        jw_key(w, "decoders");
        jw_open(w, '[');
        for (size_t i = 0; i < d->sequence.n_items; i++) {
            jw_sep(w);
            write_decoder(w, &d->sequence.items[i]);
        }
        jw_close(w, ']');
        break;
    }
    jw_close(w, '}');
}

static void write_added(jw *w, const lipi_tokenizer *t)
{
    jw_key(w, "added_tokens");
    jw_open(w, '[');
    for (size_t i = 0; i < t->n_added; i++) {
        const lipi_added_token *a = &t->added[i];
        jw_sep(w);
        jw_open(w, '{');
        jw_kint(w, "id", a->id);
        jw_kstr(w, "content", a->content, a->len);
        jw_kbool(w, "single_word", a->single_word);
        jw_kbool(w, "lstrip", a->lstrip);
        jw_kbool(w, "rstrip", a->rstrip);
        jw_kbool(w, "normalized", a->normalized);
        jw_kbool(w, "special", a->special);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* A component's section; its to_json returns NULL only when out of memory. */
static void write_section(jw *w, const char *key, json_t *j)
{
    jw_key(w, key);
    if (!j) {
        if (w->st == LIPI_OK)
            w->st = LIPI_ENOMEM;
        return;
    }
    jw_json(w, j);
    json_decref(j);
}

lipi_status lipi_tokenizer_to_json(const lipi_tokenizer *t, char **out, size_t *len,
                                   lipi_error *err)
{
    lipi_buf b = {0};
    jw *w = NULL;
    lipi_status st = LIPI_OK;

    if (!t || !out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no tokenizer or output given");
    *out = NULL;
    if (len)
        *len = 0;
    if (t->model.type == LIPI_MODEL_NONE)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "the tokenizer has no model; tokenizer.json needs one");
    /* The writer's depth stack is a few KB: keep it off the stack. */
    w = lipi_calloc(1, sizeof *w);
    if (!w)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    w->b = &b;

    jw_open(w, '{');
    jw_kstr(w, "version", "1.0", 3);
    jw_key(w, "truncation");
    if (t->truncation)
        jw_json(w, t->truncation);
    else
        jw_null(w);
    jw_key(w, "padding");
    if (t->padding)
        jw_json(w, t->padding);
    else
        jw_null(w);
    write_added(w, t);
    if (t->normalizer)
        write_section(w, "normalizer", lipi_normalizer_to_json(t->normalizer));
    else {
        jw_key(w, "normalizer");
        jw_null(w);
    }
    if (t->pretokenizer)
        write_section(w, "pre_tokenizer", lipi_pretokenizer_to_json(t->pretokenizer));
    else {
        jw_key(w, "pre_tokenizer");
        jw_null(w);
    }
    jw_key(w, "post_processor");
    if (t->post)
        write_post(w, t->post);
    else
        jw_null(w);
    jw_key(w, "decoder");
    if (t->decoder)
        write_decoder(w, t->decoder);
    else
        jw_null(w);
    write_model(w, &t->model);
    jw_close(w, '}');

    st = w->st;
    if (st == LIPI_EINVAL && w->bad[0])
        lipi_error_set(err, st, NULL, 0, 0,
                       "\"%s\" is not valid UTF-8, which tokenizer.json cannot hold", w->bad);
    else if (st == LIPI_EINVAL)
        lipi_error_set(err, st, NULL, 0, 0, "a value cannot be written as JSON");
    else if (st != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK) {
        if (!b.p && lipi_buf_reserve(&b, 0) != LIPI_OK)
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    if (st == LIPI_OK) {
        *out = b.p;
        if (len)
            *len = b.len;
        b.p = NULL;
    }
    lipi_buf_free(&b);
    lipi_free(w);
    return st;
}

/* Serializes t and writes it atomically to path (see tokenizer.h). */
lipi_status lipi_tokenizer_save(const lipi_tokenizer *t, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_atomic_file af = {0};
    char *text = NULL;
    size_t len = 0;

    /* Open first: an unwritable directory fails before any work. */
    TRY(lipi_atomic_open(&af, path, err));
    st = lipi_tokenizer_to_json(t, &text, &len, err);
    if (st != LIPI_OK) {
        if (err)
            snprintf(err->path, sizeof err->path, "%s", path);
        goto done;
    }
    if (fwrite(text, 1, len, af.f) != len) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot write");
        goto done;
    }
    st = lipi_atomic_commit(&af, err);
done:
    lipi_atomic_abort(&af);
    lipi_free(text);
    return st;
}

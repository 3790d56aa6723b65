/* Added tokens, matched the way Hugging Face's AddedVocabulary does:
 * tokens with normalized == false are found in the raw text, the others in
 * the normalized text of what is left, each set with leftmost-longest
 * matching; single_word, lstrip and rstrip as in its find_matches. */
#include "encoder/encoder_impl.h"

#include <string.h>
#include <unicode/uchar.h>

/* Rust regex \w (Unicode): Alphabetic, marks, decimal digits, connector
 * punctuation and join controls. */
static bool is_word_char(uint32_t c)
{
    if (c < 0x80)
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
    return u_hasBinaryProperty((UChar32)c, UCHAR_ALPHABETIC) ||
           (U_GET_GC_MASK((UChar32)c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
           u_hasBinaryProperty((UChar32)c, UCHAR_JOIN_CONTROL);
}

bool lipi_enc_is_space(uint32_t c)
{
    if (c < 0x80)
        return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return u_isUWhiteSpace((UChar32)c);
}

/* Start of the character that ends at s[end) (end > 0). */
static size_t char_before(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

static uint32_t cp_at(const char *s, size_t i, size_t len)
{
    size_t cl = enc_utf8_len((unsigned char)s[i]);
    if (cl > len - i)
        cl = len - i;
    return enc_utf8_cp(s + i, cl);
}

/* ------------------------------------------------------------------------ */
/* Building                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    lipi_strref *keys;
    uint32_t *values;
    enc_added_pat *pat;
    size_t n;
} pat_list;

static lipi_status list_add(pat_list *l, const char *s, size_t len, const lipi_added_token *a)
{
    l->keys[l->n] = (lipi_strref){s, len};
    l->values[l->n] = (uint32_t)l->n;
    l->pat[l->n] = (enc_added_pat){a->id, a->single_word, a->lstrip, a->rstrip, a->special};
    l->n++;
    return LIPI_OK;
}

static lipi_status matcher_build(enc_added *m, pat_list *l)
{
    lipi_status st = LIPI_OK;
    memset(m, 0, sizeof *m);
    if (l->n == 0)
        return LIPI_OK;
    TRY(lipi_datrie_build(&m->trie, l->keys, l->values, l->n));
    size_t distinct = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->keys[i].len && !m->first[(unsigned char)l->keys[i].s[0]]) {
            m->first[(unsigned char)l->keys[i].s[0]] = true;
            m->only_first = (unsigned char)l->keys[i].s[0];
            distinct++;
        }
    if (distinct != 1)
        m->only_first = -1;
    m->pat = l->pat;
    m->n = l->n;
    l->pat = NULL;
done:
    return st;
}

/* m: the patterns of l that are not special tokens, when l has special
 * tokens (*has_special). l is left as it was. */
static lipi_status plain_build(enc_added *m, const pat_list *l, bool *has_special)
{
    lipi_status st = LIPI_OK;
    pat_list p = {0};
    memset(m, 0, sizeof *m);
    *has_special = false;
    for (size_t i = 0; i < l->n; i++)
        *has_special |= l->pat[i].special;
    if (!*has_special)
        return LIPI_OK;
    size_t n = l->n;
    p.keys = lipi_calloc(n, sizeof *p.keys);
    p.values = lipi_calloc(n, sizeof *p.values);
    p.pat = lipi_calloc(n, sizeof *p.pat);
    if (!p.keys || !p.values || !p.pat)
        TRY(LIPI_ENOMEM);
    for (size_t i = 0; i < n; i++)
        if (!l->pat[i].special) {
            p.keys[p.n] = l->keys[i];
            p.values[p.n] = (uint32_t)p.n;
            p.pat[p.n++] = l->pat[i];
        }
    TRY(matcher_build(m, &p));
done:
    lipi_free(p.keys);
    lipi_free(p.values);
    lipi_free(p.pat);
    return st;
}

lipi_status lipi_enc_added_build(lipi_encoder *e, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const lipi_tokenizer *t = e->tok;
    size_t n = t->n_added;
    pat_list raw = {0}, norm = {0};
    lipi_strref *shown = NULL;
    lipi_normalized nz = {0};

    raw.keys = lipi_calloc(n ? n : 1, sizeof *raw.keys);
    raw.values = lipi_calloc(n ? n : 1, sizeof *raw.values);
    raw.pat = lipi_calloc(n ? n : 1, sizeof *raw.pat);
    norm.keys = lipi_calloc(n ? n : 1, sizeof *norm.keys);
    norm.values = lipi_calloc(n ? n : 1, sizeof *norm.values);
    norm.pat = lipi_calloc(n ? n : 1, sizeof *norm.pat);
    shown = lipi_calloc(n ? n : 1, sizeof *shown);
    if (!raw.keys || !raw.values || !raw.pat || !norm.keys || !norm.values || !norm.pat ||
        !shown) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    /* Hugging Face's pattern order: special tokens, then the others, each
     * in file order (ids ascending); a repeated pattern keeps the first. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const lipi_added_token *a = &t->added[i];
            if (a->special != (pass == 0))
                continue;
            shown[i] = (lipi_strref){a->content, a->len};
            if (!a->normalized) {
                TRY(list_add(&raw, a->content, a->len, a));
                continue;
            }
            if (!e->norm) {
                TRY(list_add(&norm, a->content, a->len, a));
                continue;
            }
            st = lipi_normalize(e->norm, a->content, a->len, &nz, false, err);
            if (st != LIPI_OK) {
                lipi_error_prefix(err, "added token \"%.64s\"", a->content);
                goto done;
            }
            if (nz.len == 0)
                continue;
            /* Hugging Face keeps (and decodes to) the normalized content. */
            char *c = lipi_strndup(nz.text, nz.len);
            if (!c) {
                st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                goto done;
            }
            shown[i] = (lipi_strref){c, nz.len};
            TRY(list_add(&norm, c, nz.len, a));
        }
    }
    /* The special-free matchers first: matcher_build takes l->pat. */
    st = plain_build(&e->raw_plain, &raw, &e->raw_has_special);
    if (st == LIPI_OK)
        st = plain_build(&e->norm_plain, &norm, &e->norm_has_special);
    if (st == LIPI_OK)
        st = matcher_build(&e->raw_added, &raw);
    if (st == LIPI_OK)
        st = matcher_build(&e->norm_added, &norm);
    if (st != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
done:
    lipi_free(raw.keys);
    lipi_free(raw.values);
    lipi_free(raw.pat);
    lipi_free(norm.keys);
    lipi_free(norm.values);
    lipi_free(norm.pat);
    if (st == LIPI_OK) {
        e->added_str = shown;
        shown = NULL;
    }
    for (size_t i = 0; shown && i < n; i++)
        if (shown[i].s && shown[i].s != t->added[i].content)
            lipi_free((char *)shown[i].s);
    lipi_free(shown);
    lipi_normalized_free(&nz);
    return st;
}

void lipi_enc_added_free(enc_added *a)
{
    lipi_datrie_free(&a->trie);
    lipi_free(a->pat);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                  */
/* ------------------------------------------------------------------------ */

static lipi_status seg_push(enc_seg **segs, size_t *cap, size_t *n, size_t a, size_t b, int64_t id)
{
    lipi_status st = ENC_GROW(*segs, *cap, *n + 1);
    if (st != LIPI_OK)
        return st;
    (*segs)[(*n)++] = (enc_seg){a, b, id};
    return LIPI_OK;
}

lipi_status lipi_enc_added_split(const enc_added *a, const char *s, size_t len, enc_seg **segs,
                                 size_t *cap, size_t *n)
{
    lipi_status st = LIPI_OK;
    size_t start_offset = 0, i = 0;
    *n = 0;
    while (a->n && i < len) {
        if (a->only_first >= 0) {
            const char *q = memchr(s + i, a->only_first, len - i);
            if (!q)
                break;
            i = (size_t)(q - s);
        } else if (!a->first[(unsigned char)s[i]]) {
            i++;
            continue;
        }
        int32_t idx = -1;
        size_t l = lipi_datrie_longest(&a->trie, s + i, len - i, &idx);
        if (l == 0) {
            i++;
            continue;
        }
        const enc_added_pat *p = &a->pat[idx];
        size_t start = i, stop = i + l;
        /* The automaton goes on after the match whatever is decided here. */
        i = stop;
        if (p->single_word) {
            bool start_space = start == 0 || !is_word_char(cp_at(s, char_before(s, start), len));
            bool stop_space = stop == len || !is_word_char(cp_at(s, stop, len));
            if (!start_space || !stop_space)
                continue;
        }
        if (p->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t c = char_before(s, ns);
                if (!lipi_enc_is_space(cp_at(s, c, len)))
                    break;
                ns = c;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (p->rstrip) {
            while (stop < len) {
                uint32_t cp = cp_at(s, stop, len);
                if (!lipi_enc_is_space(cp))
                    break;
                stop += enc_utf8_len((unsigned char)s[stop]);
            }
            if (stop > len)
                stop = len;
        }
        /* A pattern that starts with spaces eaten by the previous rstrip
         * would overlap it; the segments must not overlap. */
        if (stop <= start_offset)
            continue;
        if (start < start_offset)
            start = start_offset;
        if (start_offset < start)
            TRY(seg_push(segs, cap, n, start_offset, start, -1));
        TRY(seg_push(segs, cap, n, start, stop, p->id));
        start_offset = stop;
    }
    if (start_offset < len || *n == 0)
        TRY(seg_push(segs, cap, n, start_offset, len, -1));
done:
    return st;
}

/* Index of the added token with this id in t->added (sorted by id), or -1. */
static int64_t added_index(const lipi_tokenizer *t, uint32_t id)
{
    size_t lo = 0, hi = t->n_added;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->added[mid].id == id)
            return (int64_t)mid;
        if (t->added[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

bool lipi_enc_is_special(const lipi_tokenizer *t, uint32_t id)
{
    int64_t i = added_index(t, id);
    return i >= 0 && t->added[i].special;
}

bool lipi_enc_is_added(const lipi_tokenizer *t, uint32_t id)
{
    return added_index(t, id) >= 0;
}

const char *lipi_enc_id_to_token(const lipi_encoder *e, uint32_t id, size_t *len)
{
    int64_t i = added_index(e->tok, id);
    if (i >= 0 && e->added_str && e->added_str[i].s) {
        *len = e->added_str[i].len;
        return e->added_str[i].s;
    }
    return lipi_tokenizer_id_to_token(e->tok, id, len);
}

void lipi_enc_added_strings_free(lipi_encoder *e)
{
    for (size_t i = 0; e->added_str && i < e->tok->n_added; i++)
        if (e->added_str[i].s && e->added_str[i].s != e->tok->added[i].content)
            lipi_free((char *)e->added_str[i].s);
    lipi_free(e->added_str);
    e->added_str = NULL;
}

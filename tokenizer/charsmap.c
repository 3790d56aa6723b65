/* Writing SentencePiece's precompiled_charsmap for lipi's normalizers, so a
 * .model carries the normalization its tokenizer.json does.
 *
 * The blob (normalizer.cc's DecodePrecompiledCharsMap) is a little-endian
 * uint32 with the size of a darts-clone double array in bytes, the array's
 * 32-bit units, then NUL-terminated replacement strings. SentencePiece
 * walks the input left to right, replaces the longest key that starts at
 * each position by its string and copies anything else; lipi reads the same
 * blob (normalize.c, op_spm_charsmap).
 *
 * A prefix map cannot express all of NFC (canonical reordering of any
 * number of marks, composition across intervening marks), so the map holds
 * what real text needs, as SentencePiece's own nfkc map does:
 *   - each code point whose NFC (NFKC) differs: U+095B -> U+091C U+093C;
 *   - the canonical decomposition of every code point, when it composes:
 *     U+0BC6 U+0BBE -> U+0BCA, a + U+0301 -> U+00E1, Hangul jamo -> syllable;
 *   - pairs of marks in one 128-code-point block that canonical ordering
 *     swaps (Arabic shadda + damma);
 *   - the one-level composition pairs (U+0DDC U+0DCA -> U+0DDD) and, outside
 *     Latin, base + mark + a mark that ordering moves before the first;
 *   - for "indic", its ZWJ/ZWNJ rule: a joiner after a mark stays, one
 *     next to a space, punctuation, symbol or digit goes, and so do the
 *     others of a run (up to four). A lone joiner at the very start or end
 *     of the text is beyond a prefix map and stays (the indic regex keeps
 *     it too, normalize.c's indic_joiners).
 * The trie is built by giving each node the lowest free base such that its
 * children's units (base ^ label) are free, as darts-clone does. It is not
 * encoder/trie.c's double array: that one indexes base + label with separate
 * check and value arrays, this file format is darts-clone's packed XOR
 * units, which SentencePiece reads as they are. */
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "tokenizer/base.h"

enum { KEY_MAX = 24, VAL_MAX = 72 };

typedef struct {
    uint8_t key[KEY_MAX], val[VAL_MAX];
    uint8_t klen, vlen;
} rule;

typedef struct {
    rule *v;
    size_t n, cap;
    const UNormalizer2 *compose, *decompose; /* NFC or NFKC; NFD */
} rule_list;

/* UTF-8 of the code points cps[0..n). */
static size_t cps_utf8(const UChar32 *cps, size_t n, uint8_t *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char b[4];
        size_t l = lipi_utf8_encode((uint32_t)cps[i], b);
        if (k + l > cap)
            return 0;
        memcpy(out + k, b, l);
        k += l;
    }
    return k;
}

/* key[0..kn) -> compose(norm[0..nn)) followed by extra (UTF-16, extra_len
 * units), added unless the rule would change nothing (or always). */
static lipi_status add_rule(rule_list *l, const UChar32 *key, size_t kn, const UChar32 *norm,
                            size_t nn, const UChar *extra, int32_t extra_len, bool always)
{
    UChar src[KEY_MAX], dst[VAL_MAX];
    int32_t sl = 0;
    UErrorCode ue = U_ZERO_ERROR;
    for (size_t i = 0; i < nn; i++)
        U16_APPEND_UNSAFE(src, sl, norm[i]);
    int32_t dl = unorm2_normalize(l->compose, src, sl, dst, VAL_MAX, &ue);
    if (U_FAILURE(ue) || dl + extra_len > VAL_MAX)
        return LIPI_OK; /* a replacement too long for a rule: leave the text */
    if (extra_len)
        memcpy(dst + dl, extra, (size_t)extra_len * sizeof *dst);
    dl += extra_len;
    if (!always && dl == sl && memcmp(src, dst, (size_t)sl * sizeof *src) == 0)
        return LIPI_OK;
    void *p = l->v;
    lipi_status st = lipi_grow(&p, &l->cap, l->n + 1, sizeof *l->v);
    l->v = p;
    if (st != LIPI_OK)
        return st;
    rule *r = &l->v[l->n];
    int32_t vb = 0;
    ue = U_ZERO_ERROR;
    u_strToUTF8((char *)r->val, VAL_MAX, &vb, dst, dl, &ue);
    size_t kb = cps_utf8(key, kn, r->key, KEY_MAX);
    if (U_FAILURE(ue) || vb >= VAL_MAX || kb == 0)
        return LIPI_OK;
    r->klen = (uint8_t)kb;
    r->vlen = (uint8_t)vb;
    l->n++;
    return LIPI_OK;
}

static bool is_mark(UChar32 c)
{
    return U_GET_GC_MASK(c) & U_GC_M_MASK;
}

/* The characters a dropped joiner may stand next to in the indic rule
 * (neither letter nor mark), as far as a map can list them: controls,
 * spaces, punctuation, symbols and digits of the blocks lipi's languages
 * use, and the symbols and emoji that ZWJ sequences join ("👨‍👩‍👧" loses
 * its joiners, as under the regex rule). */
static bool joiner_neighbour(UChar32 c)
{
    bool block = c < 0x100 || (c >= 0x0590 && c < 0x0E00) || (c >= 0x2000 && c < 0x2070) ||
                 (c >= 0x1C50 && c < 0x1C80) || (c >= 0x2190 && c < 0x2C00) ||
                 (c >= 0x3000 && c < 0x3040) ||
                 (c >= 0x1F000 && c < 0x1FB00);
    return block && c != 0x200C && c != 0x200D && u_charType(c) != U_UNASSIGNED &&
           !(U_GET_GC_MASK(c) & (U_GC_L_MASK | U_GC_M_MASK));
}

/* Marks of the scripts that write joiner runs after a virama (Arabic,
 * Indic, Sinhala, Myanmar, Khmer), for the longer rules. */
static bool run_mark(UChar32 c)
{
    return is_mark(c) && ((c >= 0x0600 && c < 0x0700) || (c >= 0x0900 && c < 0x0E00) ||
                          (c >= 0x1000 && c < 0x10A0) || (c >= 0x1780 && c < 0x1800));
}

/* Adds rules for c followed by every run of 1..max_run joiners (0: the
 * run alone): the run is replaced by its first joiner when keep_first,
 * else dropped; c becomes NFC(c). */
static lipi_status joiner_runs(rule_list *l, UChar32 c, size_t max_run, bool keep_first)
{
    lipi_status st = LIPI_OK;
    for (size_t k = 1; k <= max_run; k++)
        for (size_t bits = 0; bits < ((size_t)1 << k); bits++) {
            UChar32 key[6];
            size_t n = 0;
            if (c)
                key[n++] = c;
            for (size_t i = 0; i < k; i++)
                key[n++] = bits >> i & 1 ? 0x200D : 0x200C;
            UChar first[1] = {(UChar)key[c ? 1 : 0]};
            if (!c && k < 2)
                continue; /* a lone joiner stays unless a neighbour says */
            TRY(add_rule(l, key, n, &c, c ? 1 : 0, first, keep_first, true));
        }
done:
    return st;
}

static lipi_status indic_joiner_rules(rule_list *l)
{
    lipi_status st = LIPI_OK;
    /* After a letter or at the start, a run of joiners goes whole: its
     * first is followed by a joiner (neither letter nor mark), the rest
     * follow one. */
    TRY(joiner_runs(l, 0, 4, false));
    for (UChar32 c = 1; c < 0x1FB00; c++) {
        if (U_IS_SURROGATE(c))
            continue;
        if (is_mark(c)) {
            /* the first joiner after a mark stays, the others go */
            TRY(joiner_runs(l, c, run_mark(c) ? 4 : 1, true));
        } else if (joiner_neighbour(c)) {
            TRY(joiner_runs(l, c, c < 0x80 ? 4 : 1, false)); /* c ZW -> NFC(c) */
            /* after a letter, before c: emoji and arrows seldom follow
             * a letter's joiner, so those rules are left out (size) */
            for (size_t j = 0; j < 2 && (c < 0x2190 || (c >= 0x3000 && c < 0x3040)); j++) {
                UChar32 after[2] = {j ? 0x200D : 0x200C, c};
                TRY(add_rule(l, after, 2, &c, 1, NULL, 0, true)); /* ZW c -> NFC(c) */
            }
        }
    }
done:
    return st;
}

static lipi_status normal_form_rules(rule_list *l)
{
    lipi_status st = LIPI_OK;
    for (UChar32 c = 1; c <= 0x10FFFF; c++) {
        if (U_IS_SURROGATE(c))
            continue;
        UChar d16[KEY_MAX];
        UErrorCode ue = U_ZERO_ERROR;
        /* Only a code point with a decomposition mapping can change. */
        const UNormalizer2 *any = l->compose;
        int32_t dn = unorm2_getDecomposition(any, c, d16, KEY_MAX, &ue);
        if (dn < 0 || U_FAILURE(ue))
            continue;
        UChar32 one[1] = {c};
        TRY(add_rule(l, one, 1, one, 1, NULL, 0, false));
        UChar full[KEY_MAX];
        UChar src[2];
        int32_t sl = 0;
        U16_APPEND_UNSAFE(src, sl, c);
        ue = U_ZERO_ERROR;
        int32_t fn = unorm2_normalize(l->decompose, src, sl, full, KEY_MAX, &ue);
        if (U_FAILURE(ue) || (fn == sl && memcmp(full, src, (size_t)sl * sizeof *src) == 0))
            continue;
        UChar32 key[KEY_MAX];
        size_t kn = 0;
        for (int32_t i = 0; i < fn;) {
            UChar32 k;
            U16_NEXT_UNSAFE(full, i, k);
            key[kn++] = k;
        }
        if (kn > 1)
            TRY(add_rule(l, key, kn, key, kn, NULL, 0, false));
        /* The one-level pair, when it is not the full decomposition:
         * U+0DDC U+0DCA -> U+0DDD. */
        UChar raw[KEY_MAX];
        ue = U_ZERO_ERROR;
        int32_t rn = unorm2_getRawDecomposition(l->decompose, c, raw, KEY_MAX, &ue);
        UChar32 pair[3];
        size_t pn = 0;
        for (int32_t i = 0; U_SUCCESS(ue) && rn > 0 && i < rn && pn < 3;) {
            UChar32 k;
            U16_NEXT_UNSAFE(raw, i, k);
            pair[pn++] = k;
        }
        if (pn == 2)
            TRY(add_rule(l, pair, 2, pair, 2, NULL, 0, false));
        /* Outside Latin, a base + mark that composes, followed by a mark
         * that canonical ordering moves before it: Arabic alef + madda +
         * hamza below -> U+0625 U+0653. */
        if (kn == 2 && key[1] >= 0x0370 && u_getCombiningClass(key[1]) > 0)
            for (UChar32 m = key[1] & ~0x7F; m < (key[1] | 0x7F) + 1; m++) {
                uint8_t cm = u_getCombiningClass(m);
                if (cm == 0 || cm >= u_getCombiningClass(key[1]))
                    continue;
                UChar32 three[3] = {key[0], key[1], m}, after[2] = {c, m};
                TRY(add_rule(l, three, 3, three, 3, NULL, 0, false));
                TRY(add_rule(l, after, 2, after, 2, NULL, 0, false)); /* U+0622 U+0655 */
            }
    }
    /* Mark pairs that canonical ordering swaps, within a block. */
    for (UChar32 a = 0x300; a < 0x10000; a++) {
        uint8_t ca = u_getCombiningClass(a);
        if (ca == 0)
            continue;
        for (UChar32 b = a & ~0x7F; b < (a | 0x7F) + 1; b++) {
            uint8_t cb = u_getCombiningClass(b);
            if (cb == 0 || cb >= ca)
                continue;
            UChar32 key[2] = {a, b};
            TRY(add_rule(l, key, 2, key, 2, NULL, 0, false));
        }
    }
done:
    return st;
}

static int rule_cmp(const void *x, const void *y)
{
    const rule *a = x, *b = y;
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(a->key, b->key, n);
    return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

/* Key order, then value order: sorting with it is deterministic. */
static int rule_cmp_full(const void *x, const void *y)
{
    const rule *a = x, *b = y;
    int c = rule_cmp(a, b);
    if (c)
        return c;
    size_t n = a->vlen < b->vlen ? a->vlen : b->vlen;
    c = memcmp(a->val, b->val, n);
    return c ? c : (a->vlen > b->vlen) - (a->vlen < b->vlen);
}

/* Order of two rule pointers by replacement (then key: deterministic). */
static int value_cmp(const void *x, const void *y)
{
    const rule *a = *(rule *const *)x, *b = *(rule *const *)y;
    size_t n = a->vlen < b->vlen ? a->vlen : b->vlen;
    int c = memcmp(a->val, b->val, n);
    if (c || a->vlen != b->vlen)
        return c ? c : (a->vlen > b->vlen) - (a->vlen < b->vlen);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Double array                                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    uint32_t *unit;
    uint32_t *next;           /* union-find: next[i] leads to the first free unit >= i */
    uint8_t *used, *base_used;
    size_t cap, size, first_free;
} darray;

/* The first free unit at or after i (path halving keeps the search for a
 * base linear overall instead of rescanning the filled front). */
static size_t da_free_from(darray *d, size_t i)
{
    while (d->next[i] != i) {
        d->next[i] = d->next[d->next[i]];
        i = d->next[i];
    }
    return i;
}

static void da_use(darray *d, size_t i)
{
    d->used[i] = 1;
    d->next[i] = (uint32_t)(i + 1);
}

static lipi_status da_reserve(darray *d, size_t need)
{
    if (need <= d->cap)
        return LIPI_OK;
    size_t cap = d->cap ? d->cap : 1024;
    while (cap < need)
        cap *= 2;
    if (cap > (size_t)1 << 21)
        return LIPI_EINVAL; /* offsets must fit 21 bits */
    uint32_t *u = lipi_realloc(d->unit, cap * sizeof *u);
    if (!u)
        return LIPI_ENOMEM;
    d->unit = u;
    uint8_t *a = lipi_realloc(d->used, cap);
    if (!a)
        return LIPI_ENOMEM;
    d->used = a;
    uint8_t *b = lipi_realloc(d->base_used, cap);
    if (!b)
        return LIPI_ENOMEM;
    d->base_used = b;
    uint32_t *nx = lipi_realloc(d->next, (cap + 1) * sizeof *nx);
    if (!nx)
        return LIPI_ENOMEM;
    d->next = nx;
    for (size_t i = d->cap ? d->cap + 1 : 0; i <= cap; i++)
        nx[i] = (uint32_t)i;
    memset(d->unit + d->cap, 0, (cap - d->cap) * sizeof *u);
    memset(d->used + d->cap, 0, cap - d->cap);
    memset(d->base_used + d->cap, 0, cap - d->cap);
    d->cap = cap;
    return LIPI_OK;
}

/* Places the node at pos that holds rules r[lo..hi), which share their
 * first depth bytes; r[lo] ends there when it is the node's own value. */
static lipi_status da_place(darray *d, const rule *r, const uint32_t *val_off, size_t lo,
                            size_t hi, size_t depth, size_t pos)
{
    lipi_status st = LIPI_OK;
    uint8_t labels[256];
    size_t nl = 0;
    bool leaf = r[lo].klen == depth;
    if (leaf)
        labels[nl++] = 0;
    for (size_t i = leaf ? lo + 1 : lo; i < hi; i++) {
        uint8_t c = r[i].key[depth];
        if (nl == 0 || labels[nl - 1] != c)
            labels[nl++] = c;
    }
    /* The lowest base whose units for every label are free. */
    size_t base;
    for (size_t q = da_free_from(d, d->first_free);; q = da_free_from(d, q + 1)) {
        TRY(da_reserve(d, q + 256));
        base = q ^ labels[0];
        if (d->base_used[base])
            continue;
        size_t k = 0;
        while (k < nl && !d->used[base ^ labels[k]])
            k++;
        if (k == nl)
            break;
    }
    d->base_used[base] = 1;
    for (size_t k = 0; k < nl; k++)
        da_use(d, base ^ labels[k]);
    d->first_free = da_free_from(d, d->first_free);
    if (((base | 0xFF) + 1) > d->size)
        d->size = (base | 0xFF) + 1;
    d->unit[pos] |= (uint32_t)(pos ^ base) << 10 | (leaf ? 1u << 8 : 0);
    if (leaf)
        d->unit[base] = val_off[lo] | 1u << 31;
    for (size_t i = leaf ? lo + 1 : lo; i < hi;) {
        uint8_t c = r[i].key[depth];
        size_t j = i;
        while (j < hi && r[j].key[depth] == c)
            j++;
        d->unit[base ^ c] = c;
        TRY(da_place(d, r, val_off, i, j, depth + 1, base ^ c));
        i = j;
    }
done:
    return st;
}

lipi_status lipi_charsmap_build(const char *form, char **out, size_t *out_len, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    rule_list l = {0};
    darray d = {0};
    lipi_buf pool = {0}, blob = {0};
    uint32_t *val_off = NULL;
    rule **order = NULL;
    UErrorCode ue = U_ZERO_ERROR;
    bool nfkc = strcmp(form, "nfkc") == 0, indic = strcmp(form, "indic") == 0;
    *out = NULL;
    *out_len = 0;
    l.compose = nfkc ? unorm2_getNFKCInstance(&ue) : unorm2_getNFCInstance(&ue);
    l.decompose = unorm2_getNFDInstance(&ue);
    if (U_FAILURE(ue))
        return lipi_error_set(err, LIPI_EICU, NULL, 0, 0, "ICU normalizer data: %s",
                              u_errorName(ue));
    TRY(normal_form_rules(&l));
    if (indic)
        TRY(indic_joiner_rules(&l));
    qsort(l.v, l.n, sizeof *l.v, rule_cmp_full);
    /* One rule per key (two kinds of rule never give one key two values;
     * if they did, the smaller value would win). */
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++)
        if (n == 0 || rule_cmp(&l.v[n - 1], &l.v[i]) != 0)
            l.v[n++] = l.v[i];
    l.n = n;
    val_off = lipi_malloc((l.n ? l.n : 1) * sizeof *val_off);
    if (!val_off)
        TRY(LIPI_ENOMEM);
    /* Each distinct replacement once in the pool (many rules share one). */
    order = lipi_malloc((l.n ? l.n : 1) * sizeof *order);
    if (!order)
        TRY(LIPI_ENOMEM);
    for (size_t i = 0; i < l.n; i++)
        order[i] = &l.v[i];
    qsort(order, l.n, sizeof *order, value_cmp);
    for (size_t i = 0; i < l.n; i++) {
        size_t at = (size_t)(order[i] - l.v);
        if (i > 0 && value_cmp(&order[i - 1], &order[i]) == 0) {
            val_off[at] = val_off[order[i - 1] - l.v];
            continue;
        }
        val_off[at] = (uint32_t)pool.len;
        TRY(lipi_buf_append(&pool, order[i]->val, order[i]->vlen));
        TRY(lipi_buf_append(&pool, "", 1));
    }
    TRY(da_reserve(&d, 256));
    da_use(&d, 0);
    d.first_free = 1;
    d.size = 256;
    if (l.n)
        TRY(da_place(&d, l.v, val_off, 0, l.n, 0, 0));
    uint32_t trie_bytes = (uint32_t)(d.size * 4);
    uint8_t le[4];
    for (int i = 0; i < 4; i++)
        le[i] = (uint8_t)(trie_bytes >> (8 * i));
    TRY(lipi_buf_append(&blob, le, 4));
    for (size_t i = 0; i < d.size; i++) {
        for (int k = 0; k < 4; k++)
            le[k] = (uint8_t)(d.unit[i] >> (8 * k));
        TRY(lipi_buf_append(&blob, le, 4));
    }
    TRY(lipi_buf_append(&blob, pool.p, pool.len));
    *out = blob.p;
    *out_len = blob.len;
    blob.p = NULL;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory building a normalization map");
    else if (st == LIPI_EINVAL)
        lipi_error_set(err, st, NULL, 0, 0,
                       "normalization map for \"%s\": more than 2^21 trie units", form);
    lipi_free(l.v);
    lipi_free(d.unit);
    lipi_free(d.used);
    lipi_free(d.next);
    lipi_free(d.base_used);
    lipi_free(val_off);
    lipi_free(order);
    lipi_buf_free(&pool);
    lipi_buf_free(&blob);
    return st;
}

/* BPE of a long word (a megabyte or more, e.g. 'a' repeated on one line)
 * in parts, with the ids of the merge loop over the whole word.
 *
 * The merge loop holds 16 bytes a character plus a heap of 16-byte pairs:
 * gigabytes for a 100 MB word. When every merged token is its pair's
 * strings joined (merge_concat), a word can be cut where no merge could
 * ever join the two sides, and each part merged alone:
 *
 *   Let c1 end at p and c2 start there, both characters the vocabulary has
 *   (so each is a symbol of its own at the start, with its own string). A
 *   symbol is always the text it covers, so a symbol ending at p ends with
 *   c1 and one starting at p starts with c2; a merge of the two would be
 *   a merge whose left token ends with c1 and right token starts with c2.
 *   If the model has none, the pair across p never merges, and the loop's
 *   choice, the leftmost of the present pairs of lowest rank, is on each
 *   side that side's own choice: each side goes through the merges it
 *   would go through alone, in the same order.
 *
 * So the model's (last char of left, first char of right) pairs are put in
 * a set, and a part ends at the first such cut at least e->bpe_long_part
 * bytes after its start. Characters the vocabulary lacks (unknown token,
 * byte fallback) are never at a cut, so fused unknowns stay whole. A word
 * with no cut (say "an" repeated, when the model merges a token ending
 * with 'a' to one starting with 'n' and one ending with 'n' to one
 * starting with 'a') still takes the merge loop whole. */
#include "encoder/encoder_impl.h"

#include <string.h>

static inline uint64_t cross_key(uint32_t last, uint32_t first)
{
    return (uint64_t)(last + 1) << 32 | (first + 1);
}

static inline size_t cross_home(uint64_t key, size_t mask)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
}

static void cross_put(uint64_t *set, size_t mask, uint64_t key)
{
    size_t k = cross_home(key, mask);
    while (set[k] && set[k] != key)
        k = (k + 1) & mask;
    set[k] = key;
}

static bool cross_has(const lipi_session *s, uint64_t key)
{
    for (size_t k = cross_home(key, s->bpe_cross_mask);; k = (k + 1) & s->bpe_cross_mask) {
        if (s->bpe_cross[k] == key)
            return true;
        if (!s->bpe_cross[k])
            return false;
    }
}

/* The code point of the last character of t[0..n) (n > 0), stepping back
 * over at most three continuation bytes (the text is valid UTF-8; a token
 * that is not cannot be a symbol of it, so its key does not matter). */
static uint32_t last_cp(const char *t, size_t n)
{
    size_t a = n - 1;
    while (a > 0 && n - a < 4 && ((unsigned char)t[a] & 0xC0) == 0x80)
        a--;
    return enc_utf8_cp(t + a, n - a);
}

static uint32_t first_cp(const char *t, size_t n)
{
    size_t cl = enc_utf8_len((unsigned char)t[0]);
    return enc_utf8_cp(t, cl < n ? cl : n);
}

/* Builds s->bpe_cross from the model's merges (once a session); state -1
 * when some merged token is not its pair's strings joined byte for byte
 * (merge_concat compares lengths only), 2 when moreover each merged token
 * is the one its string names (lipi_enc_bpe_compact finds them so), else
 * 1. Fails only for memory. */
static lipi_status cross_build(lipi_session *s)
{
    const lipi_vocab_model *m = s->enc->m;
    const lipi_strref *tok = m->vocab.tok;
    size_t cap = 16;
    while (cap / 2 < m->n_merges + 1)
        cap *= 2;
    uint64_t *set = lipi_calloc(cap, sizeof *set);
    if (!set)
        return LIPI_ENOMEM;
    s->bpe_cross = set;
    s->bpe_cross_mask = cap - 1;
    memset(s->bpe_ascii_cut, 0, sizeof s->bpe_ascii_cut);
    s->bpe_cross_state = 1;
    bool named = true;
    for (size_t r = 0; r < m->n_merges; r++) {
        /* merge_concat: the three are tokens with strings, the sides
         * non-empty and the lengths adding up. */
        const lipi_merge *g = &m->merges[r];
        const lipi_strref *l = &tok[g->left], *rt = &tok[g->right], *t = &tok[g->result];
        uint32_t id;
        if (memcmp(t->s, l->s, l->len) != 0 || memcmp(t->s + l->len, rt->s, rt->len) != 0) {
            s->bpe_cross_state = -1;
            return LIPI_OK;
        }
        named = named && lipi_vocab_find(&m->vocab, t->s, t->len, &id) && id == g->result;
        cross_put(set, cap - 1, cross_key(last_cp(l->s, l->len), first_cp(rt->s, rt->len)));
    }
    s->bpe_cross_state = named ? 2 : 1;
    /* Cuts between two ASCII characters, a bit each (the search for a cut
     * looks at every character of a word that has none). */
    const lipi_encoder *e = s->enc;
    for (uint32_t x = 0; x < 128; x++)
        for (uint32_t y = 0; y < 128; y++)
            if (e->ascii_id[0][x] >= 0 && e->ascii_id[0][y] >= 0 &&
                !cross_has(s, cross_key(x, y)))
                s->bpe_ascii_cut[x * 2 + y / 64] |= UINT64_C(1) << (y & 63);
    return LIPI_OK;
}

/* Whether the word may be cut at p (0 < p < n, a character start): the
 * characters on both sides are well-formed, in the vocabulary, and no merge
 * joins a token ending with the first to one starting with the second. */
static bool cut_ok(const lipi_session *s, const char *w, size_t n, size_t p)
{
    const lipi_encoder *e = s->enc;
    uint32_t c1, c2;
    size_t a = p - 1;
    while (a > 0 && p - a < 4 && ((unsigned char)w[a] & 0xC0) == 0x80)
        a--;
    size_t cl = enc_utf8_len((unsigned char)w[p]);
    if (lipi_utf8_decode(w + a, p - a, &c1) != p - a || cl > n - p ||
        lipi_utf8_decode(w + p, cl, &c2) != cl)
        return false;
    if ((c1 < 128 ? e->ascii_id[0][c1] : enc_cpmap_get(&e->char_id[0], c1)) < 0 ||
        (c2 < 128 ? e->ascii_id[0][c2] : enc_cpmap_get(&e->char_id[0], c2)) < 0)
        return false;
    return !cross_has(s, cross_key(c1, c2));
}

lipi_status lipi_enc_bpe_part(lipi_session *s, const char *w, size_t n, size_t a, size_t *b)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    if (!s->bpe_cross_state)
        TRY(cross_build(s));
    /* Streamed, the tokens so far are final: to the sink, so s->ptok
     * holds about a part's. The cache takes only short words from s->ptok:
     * those keep theirs (tests run short words in parts). */
    if (a > 0 && s->ptok_n >= 4096 && n > LIPI_ENC_CACHE_MAX_KEY)
        TRY(lipi_enc_stream_ptok(s));
    size_t part = e->bpe_long_part ? e->bpe_long_part : 1, p = n;
    if (s->bpe_cross_state > 0 && n - a > part)
        for (p = a + part; p < n; p++) {
            unsigned char x = (unsigned char)w[p - 1], y = (unsigned char)w[p];
            if ((x | y) < 0x80 ? s->bpe_ascii_cut[x * 2 + y / 64] >> (y & 63) & 1
                               : (y & 0xC0) != 0x80 && cut_ok(s, w, n, p))
                break;
        }
    *b = p;
done:
    return st;
}

/* ======================================================================== */
/* A part with no cut, in compact memory                                     */
/* ======================================================================== */

/* When a long stretch has no cut (say "an" repeated), the merge loop's
 * rule, each time the leftmost of the present pairs of lowest rank, is
 * computed over 2 bytes and a bit per byte of the part instead of 64:
 *
 *   start  bit i: a symbol starts at byte i (bit n set: the end);
 *   rk[i]  at a symbol's start, the rank of the pair it starts, else NONE;
 *   tree   the minimum of rk over each block of 64 bytes, and a tournament
 *          tree over the blocks: the leftmost minimum is a descent.
 *
 * A symbol's id is not kept: the pair it starts names it (merges[rk].left),
 * else the pair before it (merges[rk].right), else its bytes do (one
 * character: its id; more: a merged token, found by its string, which
 * cross_build checked names that token). After a merge at p of rank r
 * everything left of p is above r, so the next merge is one of the two new
 * pairs when they are r or less, else the first pair of rank r right of
 * p; only when none is near is the tree brought up to date (the blocks
 * touched since) and descended. */
#define RK_NONE UINT16_MAX
#define RK_NEAR 256

typedef struct {
    lipi_session *s;
    const char *w;
    size_t n;
    uint64_t *start;
    uint16_t *rk;
    uint16_t *tree;      /* tree[1] the root, tree[leaves + b] block b */
    size_t leaves;
    uint32_t *dirty;     /* blocks whose minimum may be stale */
    uint64_t *is_dirty;
    size_t n_dirty;
} bpe_compact;

static inline size_t next_start(const bpe_compact *c, size_t i)
{
    size_t k = (i + 1) >> 6;
    uint64_t x = c->start[k] & (~UINT64_C(0) << ((i + 1) & 63));
    while (!x)
        x = c->start[++k];
    return k * 64 + (size_t)__builtin_ctzll(x);
}

/* The start of the symbol before the one at i > 0. */
static inline size_t prev_start(const bpe_compact *c, size_t i)
{
    size_t k = (i - 1) >> 6;
    uint64_t x = c->start[k] & (~UINT64_C(0) >> (63 - ((i - 1) & 63)));
    while (!x)
        x = c->start[--k];
    return k * 64 + 63 - (size_t)__builtin_clzll(x);
}

/* The id of the symbol w[i..j), whose pair rk[i] is not asked (NONE). */
static uint32_t bytes_id_slow(const bpe_compact *c, size_t i, size_t j)
{
    const lipi_encoder *e = c->s->enc;
    uint32_t cp, id = 0;
    if (enc_utf8_len((unsigned char)c->w[i]) == j - i) {
        cp = enc_utf8_cp(c->w + i, j - i);
        return (uint32_t)(cp < 128 ? e->ascii_id[0][cp] : enc_cpmap_get(&e->char_id[0], cp));
    }
    lipi_vocab_find(&e->m->vocab, c->w + i, j - i, &id);
    return id;
}

static inline uint32_t bytes_id(const bpe_compact *c, size_t i, size_t j)
{
    unsigned char b = (unsigned char)c->w[i];
    return j - i == 1 && b < 0x80 ? (uint32_t)c->s->enc->ascii_id[0][b] : bytes_id_slow(c, i, j);
}

/* The id of the symbol at i (ending at j), the one before at h (or i). */
static inline uint32_t sym_id(const bpe_compact *c, size_t h, size_t i, size_t j)
{
    const lipi_merge *mg = c->s->enc->m->merges;
    if (c->rk[i] != RK_NONE)
        return mg[c->rk[i]].left;
    if (h < i && c->rk[h] != RK_NONE)
        return mg[c->rk[h]].right;
    return bytes_id(c, i, j);
}

static inline uint16_t rank_of(lipi_session *s, uint32_t a, uint32_t b)
{
    uint32_t r;
    return lipi_enc_pair_rank(s, a, b, &r) ? (uint16_t)r : RK_NONE;
}

static inline void touch(bpe_compact *c, size_t i)
{
    size_t b = i >> 6;
    if (!(c->is_dirty[b >> 6] >> (b & 63) & 1)) {
        c->is_dirty[b >> 6] |= UINT64_C(1) << (b & 63);
        c->dirty[c->n_dirty++] = (uint32_t)b;
    }
}

static uint16_t block_min(const bpe_compact *c, size_t b)
{
    uint16_t m = RK_NONE;
    size_t end = (b + 1) * 64 < c->n ? (b + 1) * 64 : c->n;
    for (size_t i = b * 64; i < end; i++)
        m = c->rk[i] < m ? c->rk[i] : m;
    return m;
}

static void tree_flush(bpe_compact *c)
{
    for (size_t d = 0; d < c->n_dirty; d++) {
        size_t b = c->dirty[d];
        c->is_dirty[b >> 6] &= ~(UINT64_C(1) << (b & 63));
        size_t k = c->leaves + b;
        c->tree[k] = block_min(c, b);
        for (k >>= 1; k; k >>= 1) {
            uint16_t m = c->tree[2 * k] < c->tree[2 * k + 1] ? c->tree[2 * k] : c->tree[2 * k + 1];
            if (c->tree[k] == m)
                break;
            c->tree[k] = m;
        }
    }
    c->n_dirty = 0;
}

/* The leftmost position of the lowest rank, or n when nothing merges. */
static size_t leftmost_min(bpe_compact *c)
{
    tree_flush(c);
    uint16_t m = c->tree[1];
    if (m == RK_NONE)
        return c->n;
    size_t k = 1;
    while (k < c->leaves)
        k = c->tree[2 * k] == m ? 2 * k : 2 * k + 1;
    size_t i = (k - c->leaves) * 64;
    while (c->rk[i] != m)
        i++;
    return i;
}

static void compact_free(bpe_compact *c)
{
    lipi_free(c->start);
    lipi_free(c->rk);
    lipi_free(c->tree);
    lipi_free(c->dirty);
    lipi_free(c->is_dirty);
}

/* The merges of w[0..n) (every character in the vocabulary); the tokens
 * onto s->ptok with spans from base, to the sink as they come under
 * lipi_encode_stream when whole is the word's length (over the cache's
 * longest key). */
static lipi_status compact_run(bpe_compact *c, size_t base, size_t whole)
{
    lipi_session *s = c->s;
    const lipi_encoder *e = s->enc;
    const lipi_merge *mg = e->m->merges;
    lipi_status st = LIPI_OK;
    size_t n = c->n;
    /* Initial symbols: the characters; their pairs' ranks. */
    uint32_t prev_id = 0;
    for (size_t i = 0, j, h = 0; i < n; h = i, i = j) {
        j = i + enc_utf8_len((unsigned char)c->w[i]);
        c->start[i >> 6] |= UINT64_C(1) << (i & 63);
        uint32_t id = bytes_id(c, i, j);
        if (i)
            c->rk[h] = rank_of(s, prev_id, id);
        prev_id = id;
    }
    for (size_t b = 0; b < c->leaves; b++)
        c->tree[c->leaves + b] = b * 64 < n ? block_min(c, b) : RK_NONE;
    for (size_t k = c->leaves; --k;)
        c->tree[k] = c->tree[2 * k] < c->tree[2 * k + 1] ? c->tree[2 * k] : c->tree[2 * k + 1];

    size_t p = leftmost_min(c);
    while (p < n) {
        uint16_t r = c->rk[p];
        size_t q = next_start(c, p), t = next_start(c, q), h = p ? prev_start(c, p) : p;
        uint32_t merged = e->merge_result[r];
        /* The neighbours' ids before the ranks change. */
        uint32_t before = h < p ? sym_id(c, h ? prev_start(c, h) : h, h, p) : 0;
        uint32_t after = 0;
        if (t < n)
            after = c->rk[q] != RK_NONE ? mg[c->rk[q]].right : sym_id(c, q, t, next_start(c, t));
        c->start[q >> 6] &= ~(UINT64_C(1) << (q & 63));
        c->rk[q] = RK_NONE;
        c->rk[p] = t < n ? rank_of(s, merged, after) : RK_NONE;
        touch(c, q);
        touch(c, p);
        uint16_t rh = RK_NONE;
        if (h < p) {
            c->rk[h] = rh = rank_of(s, before, merged);
            touch(c, h);
        }
        /* The next merge (see above). */
        uint16_t m = rh < c->rk[p] ? rh : c->rk[p];
        if (m <= r) {
            p = rh == m ? h : p;
            continue;
        }
        size_t end = t + RK_NEAR < n ? t + RK_NEAR : n;
        while (t < end && c->rk[t] > r)
            t++;
        p = t < end ? t : leftmost_min(c);
    }
    /* The tokens, left to right (a token the same as the one before is
     * not looked up again: long words repeat). */
    size_t h = 0;
    uint32_t id = 0;
    for (size_t i = 0, j; i < n; h = i, i = j) {
        j = next_start(c, i);
        if (!i || j - i != i - h || memcmp(c->w + h, c->w + i, j - i) != 0)
            id = sym_id(c, h, i, j);
        if (s->ptok_n == s->ptok_cap)
            TRY(ENC_GROW(s->ptok, s->ptok_cap, s->ptok_n + 1));
        s->ptok[s->ptok_n++] = (enc_ptok){id, (uint32_t)(base + i), (uint32_t)(base + j)};
        if (s->ptok_n >= 4096 && j < n && whole > LIPI_ENC_CACHE_MAX_KEY)
            TRY(lipi_enc_stream_ptok(s));
    }
done:
    return st;
}

lipi_status lipi_enc_bpe_compact(lipi_session *s, const char *w, size_t n, size_t base,
                                 size_t whole, bool *done)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    bpe_compact c = {s, w, n, NULL, NULL, NULL, 0, NULL, NULL, 0};
    *done = false;
    if (!s->bpe_cross_state)
        TRY(cross_build(s));
    /* Ranks in 16 bits; every character a symbol of its own id. */
    if (s->bpe_cross_state < 2 || e->m->n_merges >= RK_NONE || n > UINT32_MAX / 2)
        return LIPI_OK;
    for (size_t i = 0; i < n;) {
        size_t cl = enc_utf8_len((unsigned char)w[i]);
        uint32_t cp;
        if (cl == 1 && (unsigned char)w[i] < 0x80) {
            if (e->ascii_id[0][(unsigned char)w[i]] < 0)
                return LIPI_OK;
            i++;
            continue;
        }
        if (cl > n - i || lipi_utf8_decode(w + i, cl, &cp) != cl ||
            (cp < 128 ? e->ascii_id[0][cp] : enc_cpmap_get(&e->char_id[0], cp)) < 0)
            return LIPI_OK;
        i += cl;
    }
    size_t nb = n / 64 + 1;
    c.leaves = 1;
    while (c.leaves < nb)
        c.leaves *= 2;
    TRY(lipi_enc_pair_ready(s));
    c.start = lipi_calloc(n / 64 + 2, sizeof *c.start);
    c.rk = lipi_reallocarray(NULL, n, sizeof *c.rk);
    c.tree = lipi_reallocarray(NULL, 2 * c.leaves, sizeof *c.tree);
    c.dirty = lipi_reallocarray(NULL, nb, sizeof *c.dirty);
    c.is_dirty = lipi_calloc(nb / 64 + 1, sizeof *c.is_dirty);
    if (!c.start || !c.rk || !c.tree || !c.dirty || !c.is_dirty) {
        st = LIPI_ENOMEM;
        goto done;
    }
    memset(c.rk, 0xff, n * sizeof *c.rk);
    c.start[n >> 6] |= UINT64_C(1) << (n & 63);
    TRY(compact_run(&c, base, whole));
    *done = true;
done:
    compact_free(&c);
    return st;
}

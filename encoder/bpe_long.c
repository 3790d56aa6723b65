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
 * (merge_concat compares lengths only). Fails only for memory. */
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
    s->bpe_cross_state = 1;
    for (size_t r = 0; r < m->n_merges; r++) {
        /* merge_concat: the three are tokens with strings, the sides
         * non-empty and the lengths adding up. */
        const lipi_merge *g = &m->merges[r];
        const lipi_strref *l = &tok[g->left], *rt = &tok[g->right], *t = &tok[g->result];
        if (memcmp(t->s, l->s, l->len) != 0 || memcmp(t->s + l->len, rt->s, rt->len) != 0) {
            s->bpe_cross_state = -1;
            return LIPI_OK;
        }
        cross_put(set, cap - 1, cross_key(last_cp(l->s, l->len), first_cp(rt->s, rt->len)));
    }
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
        for (p = a + part; p < n; p++)
            if (((unsigned char)w[p] & 0xC0) != 0x80 && cut_ok(s, w, n, p))
                break;
    *b = p;
done:
    return st;
}

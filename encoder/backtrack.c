/* BPE by backtracking, for tiktoken rank files (token id = rank): the same
 * tokens as tiktoken's merge loop, found left to right instead of by
 * repeated merges. The method is GitHub's (crate `bpe` of rust-gems, Hendrik
 * van Antwerpen and Alexander Neubeck, 2024, MIT):
 *
 *   A token sequence is BPE's output exactly when every adjacent pair of
 *   tokens is "valid": undoing the merges of both tokens (each token has
 *   one split, into the pair BPE merged last to make it) never exposes a
 *   pair across their boundary that BPE would have merged before. The
 *   encoder takes the longest token at each position and, when it does not
 *   form a valid pair with the previous one, the next shorter token that is
 *   a prefix of it; with none left it steps back one token. Positions that
 *   led nowhere are remembered, so the walk stays near linear.
 *
 * The tables (splits, the pairs they come from, each token's longest proper
 * prefix that is a token) are built once per encoder. They are used only
 * when every token of several bytes has a split (is reachable by merges)
 * and every token encodes to itself; other rank files keep the merge loop.
 *
 * Byte-level Hugging Face BPE (GPT-2's tokenizer.json) is the same method
 * once tokens are numbered by rank: the 256 bytes, then the token of merge r
 * at 256 + r, its split being that merge. It is used when the merges are
 * such a numbering (each makes a token no other merge or byte is, from two
 * tokens of lower rank, whose bytes it joins; no pair listed twice) and,
 * again, every token encodes to itself; tokens that no merge makes are left
 * out (the merge loop never makes them either). */
#include "encoder/encoder_impl.h"

#include <string.h>

#define BT_FILTER_WORDS ((size_t)1 << 16) /* 512 KB */

/* A blocked Bloom filter of the pairs that merge: three bits of one 64-bit
 * word per pair. At ~20 bits per pair of o200k it says "maybe" for ~0.3%
 * of the pairs that do not merge (one bit per pair: ~5%), each of which
 * would cost a trip to the pair table. */
static inline uint64_t bt_filter_mask(uint64_t key, size_t *word)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ULL;
    *word = (size_t)(h >> 48) & (BT_FILTER_WORDS - 1);
    return UINT64_C(1) << (h & 63) | UINT64_C(1) << (h >> 6 & 63) | UINT64_C(1) << (h >> 12 & 63);
}

/* A token's record: 8 bytes, so that 1.6 MB hold o200k's and a step reads
 * one cache line. */
#define BT_ID_BITS 21
#define BT_NONE ((UINT64_C(1) << BT_ID_BITS) - 1)

static inline uint64_t bt_record(uint32_t left, uint32_t right, uint32_t prefix)
{
    return left | (uint64_t)right << BT_ID_BITS |
           (prefix == UINT32_MAX ? BT_NONE : prefix) << 2 * BT_ID_BITS;
}

static inline uint32_t bt_left(const lipi_encoder *e, uint32_t t)
{
    return (uint32_t)(e->bt_tok[t] & BT_NONE);
}

static inline uint32_t bt_right(const lipi_encoder *e, uint32_t t)
{
    return (uint32_t)(e->bt_tok[t] >> BT_ID_BITS & BT_NONE);
}

static inline uint32_t bt_prefix(const lipi_encoder *e, uint32_t t)
{
    uint64_t p = e->bt_tok[t] >> 2 * BT_ID_BITS & BT_NONE;
    return p == BT_NONE ? UINT32_MAX : (uint32_t)p;
}

/* The token that BPE makes of the pair (a, b), if any. */
static inline bool bt_pair(const lipi_encoder *e, uint32_t a, uint32_t b, uint32_t *t)
{
    uint64_t key = (uint64_t)a * e->bt_v + b, v;
    /* Most pairs merge into nothing: the filter says so from the core's
     * cache, without a trip to the table. */
    size_t w;
    uint64_t m = bt_filter_mask(key, &w);
    if ((e->bt_filter[w] & m) != m ||
        !enc_packed_get(e->bt_pairs, e->bt_mask, e->bt_bits, key, &v))
        return false;
    *t = (uint32_t)v;
    return true;
}

/* Whether token b may follow token a in BPE's output (rust-gems'
 * is_valid_token_pair): undo the later merge of the two (the higher id)
 * step by step; at each step the pair across the boundary must not merge
 * into a token below the limit that the undone merges leave. */
static bool bt_valid(const lipi_encoder *e, uint32_t a, uint32_t b)
{
    uint32_t limit = UINT32_MAX, t;
    for (;;) {
        if (bt_pair(e, a, b, &t) && t < limit)
            return false;
        if (a > b) {
            limit = a;
            a = bt_right(e, a);
            if (a == limit) {
                limit = b + 1;
                b = bt_left(e, b);
                if (b + 1 == limit)
                    return true;
            }
        } else {
            limit = b + 1;
            b = bt_left(e, b);
            if (b + 1 == limit) {
                limit = a;
                a = bt_right(e, a);
                if (a == limit)
                    return true;
            }
        }
    }
}

/* bt_valid through the session's cache of recent answers (direct-mapped,
 * ~((a * V + b) << 1 | valid); 0: empty, which no entry is as a * V + b <
 * 2^63, so the cache comes zeroed from lipi_calloc and only the pages a
 * text touches are ever written): the pairs of one language's words
 * repeat, and each answer takes several table lookups. */
static inline bool bt_valid_cached(lipi_session *s, uint32_t a, uint32_t b)
{
    const lipi_encoder *e = s->enc;
    uint64_t key = (uint64_t)a * e->bt_v + b, h = key * 0x9E3779B97F4A7C15ULL;
    uint64_t *c = &s->bt_valid[(h >> 40) & (LIPI_ENC_BT_VALID_CACHE - 1)];
    uint64_t v = ~*c;
    if (v >> 1 == key)
        return v & 1;
    bool ok = bt_valid(e, a, b);
    *c = ~(key << 1 | ok);
    return ok;
}

static inline size_t bt_len(const lipi_encoder *e, uint32_t t)
{
    return e->bt_len[t];
}

/* The longest token that is a prefix of w[0..n), or UINT32_MAX (none: n is
 * 0, or a byte without a token, which a rank file with all 256 bytes does
 * not have). */
static inline uint32_t bt_longest(const lipi_encoder *e, const char *w, size_t n, size_t *len)
{
    int32_t v = -1;
    *len = lipi_datrie32_longest(&e->bt_trie, w, n, &v);
    return *len ? (uint32_t)v : UINT32_MAX;
}

/* A word longer than this keeps only the ranks of its tokens (below). */
#define BT_RANKS_MIN ((size_t)1 << 16)

/* The walk over w[0..n) (dead: its bits, cleared), its tokens so far
 * either piece tokens in s->ptok (ranks == false; id: the rank) or, for a
 * long word, ranks only in s->bt_rank (4 bytes a token: where a token
 * starts follows from where the next one does and its length). Inlined
 * into the two cases, so that each stores its own way. *nt: tokens, the
 * return: where the walk ended (n: w is encoded). */
static inline __attribute__((always_inline)) lipi_status
bt_walk(lipi_session *s, const char *w, size_t n, uint64_t *dead, bool ranks, size_t *nt_out,
        size_t *end_out)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    size_t nt = 0, pos = 0, next_len;
    uint32_t next = bt_longest(e, w, n, &next_len);
    while (next != UINT32_MAX) {
        uint32_t t = next, last = !nt ? UINT32_MAX : ranks ? s->bt_rank[nt - 1] : s->ptok[nt - 1].id;
        size_t len = next_len;
        for (;;) {
            size_t end = pos + len;
            if (!(dead[end / 64] >> (end % 64) & 1) &&
                (last == UINT32_MAX || bt_valid_cached(s, last, t))) {
                if (ranks) {
                    if (nt == s->bt_rank_cap)
                        TRY(ENC_GROW(s->bt_rank, s->bt_rank_cap, nt + 1));
                    s->bt_rank[nt++] = t;
                } else {
                    if (nt == s->ptok_cap)
                        TRY(ENC_GROW(s->ptok, s->ptok_cap, nt + 1));
                    s->ptok[nt++] = (enc_ptok){t, (uint32_t)pos, (uint32_t)end};
                }
                pos = end;
                next = bt_longest(e, w + pos, n - pos, &next_len);
                break;
            }
            uint32_t shorter = bt_prefix(e, t);
            if (shorter != UINT32_MAX) {
                t = shorter;
                len = bt_len(e, t);
                /* Shorter than the token it shortens, whose length the
                 * trie gave (bt_tables_ok does not tie bt_len to the
                 * trie: a damaged table ends the walk here, and the word
                 * goes to the merge loop). */
                if (len > n - pos)
                    goto done;
                continue;
            }
            /* Nothing fits after last: step back. */
            dead[pos / 64] |= UINT64_C(1) << (pos % 64);
            if (last == UINT32_MAX) {
                next = UINT32_MAX; /* cannot happen with every byte a token */
                break;
            }
            nt--;
            next_len = ranks ? bt_len(e, last) : pos - s->ptok[nt].start;
            if (next_len > pos)
                goto done; /* damaged tables, as above */
            pos -= next_len;
            next = last;
            break;
        }
    }
done:
    *nt_out = nt;
    *end_out = pos;
    return st;
}

/* Dead positions are bits, and a long word's tokens ranks: a long word
 * costs little more than its tokens' ids. */
lipi_status lipi_enc_bt_word(lipi_session *s, const char *w, size_t n, size_t *count)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    size_t nt = 0, pos = 0;
    bool ranks = n > BT_RANKS_MIN;
    /* dead bit p: no valid encoding of w[0..p) ends a token at p. */
    size_t dead_words = n / 64 + 1;
    TRY(ENC_GROW(s->bt_dead, s->bt_dead_cap, dead_words));
    if (ranks)
        TRY(ENC_GROW(s->bt_rank, s->bt_rank_cap, 4096));
    else
        TRY(ENC_GROW(s->ptok, s->ptok_cap, n < 4096 ? n : 4096));
    if (!s->bt_valid) {
        s->bt_valid = lipi_calloc(LIPI_ENC_BT_VALID_CACHE, sizeof *s->bt_valid);
        if (!s->bt_valid)
            return LIPI_ENOMEM;
    }
    uint64_t *dead = s->bt_dead;
    /* Nearly always one or two words, where a call to memset cost more
     * than the stores (a loop here is turned into that call). */
    if (dead_words <= 2) {
        dead[0] = 0;
        dead[dead_words - 1] = 0;
    } else {
        memset(dead, 0, dead_words * sizeof *dead);
    }
    if (!ranks) {
        TRY(bt_walk(s, w, n, dead, false, &nt, &pos));
        *count = pos == n ? nt : 0;
        if (e->bt_id)
            for (size_t i = 0; i < nt; i++)
                s->ptok[i].id = e->bt_id[s->ptok[i].id];
        goto done;
    }
    TRY(bt_walk(s, w, n, dead, true, &nt, &pos));
    /* The spans below add up the tokens' bt_len: they must end at n
     * (damaged tables may not, see bt_walk), checked before any slice
     * goes to the sink. */
    size_t total = 0;
    for (size_t i = 0; pos == n && i < nt; i++)
        total += bt_len(e, s->bt_rank[i]);
    if (pos != n || total != n) {
        *count = 0;
        goto done;
    }
    /* The tokens into s->ptok with their spans. Streamed (the cache takes
     * only short words from s->ptok), they go to the sink a slice at a
     * time: they are final, and s->ptok never holds them all. */
    size_t slice = s->sink ? 4096 : nt;
    TRY(ENC_GROW(s->ptok, s->ptok_cap, slice ? slice : 1));
    size_t at = 0;
    s->ptok_n = 0;
    for (size_t i = 0; i < nt;) {
        size_t k = 0;
        for (; k < slice && i < nt; k++, i++) {
            uint32_t t = s->bt_rank[i];
            size_t end = at + bt_len(e, t);
            s->ptok[k] = (enc_ptok){e->bt_id ? e->bt_id[t] : t, (uint32_t)at, (uint32_t)end};
            at = end;
        }
        s->ptok_n = k;
        if (i < nt)
            TRY(lipi_enc_stream_ptok(s)); /* empties s->ptok */
    }
    *count = s->ptok_n;
done:
    return st;
}

/* The bytes of the token of rank t. */
static inline const lipi_strref *bt_key(const lipi_encoder *e, uint32_t t)
{
    return &e->raw_keys[e->bt_id ? e->bt_id[t] : t];
}

/* Encodes the bytes of the token of rank t; true when the result is that
 * token alone. */
static bool bt_encodes_to_itself(lipi_session *s, uint32_t t)
{
    size_t count;
    const lipi_encoder *e = s->enc;
    const lipi_strref *k = bt_key(e, t);
    return lipi_enc_bt_word(s, k->s, k->len, &count) == LIPI_OK && count == 1 &&
           s->ptok[0].id == (e->bt_id ? e->bt_id[t] : t);
}

void lipi_enc_bt_free(lipi_encoder *e)
{
    lipi_datrie32_free(&e->bt_trie);
    if (e->bt_mapped) {
        lipi_tabcache_unmap(e->bt_mapped, e->bt_mapped_len);
        e->bt_mapped = NULL;
    } else {
        lipi_free(e->bt_tok);
        lipi_free(e->bt_len);
        lipi_free(e->bt_pairs);
        lipi_free(e->bt_filter);
    }
    lipi_free(e->bt_id);
    e->bt_filter = NULL;
    e->bt_id = NULL;
    e->bt_words = false;
    e->bt_tok = NULL;
    e->bt_len = NULL;
    e->bt_pairs = NULL;
    e->bt = false;
}

/* ======================================================================== */
/* The tables in the table cache                                            */
/* ======================================================================== */

/* Payload: 1 and the tables (trie, bt_tok, bt_len, bt_pairs, bt_filter),
 * or 0 when the model cannot use backtracking (so the next process skips
 * the checks that found it out). Kind: "backtrack" (rank files) or
 * "backtrack-hf" (merges). */
static void bt_store(const lipi_encoder *e, const char *kind, const char key[65], size_t cap)
{
    lipi_tabcache_writer w;
    size_t n = e->bt_v;
    if (!lipi_tabcache_create(&w, kind, key))
        return;
    lipi_tabcache_put_u64(&w, e->bt);
    if (e->bt) {
        lipi_datrie32_put(&w, &e->bt_trie);
        lipi_tabcache_put(&w, e->bt_tok, n * sizeof *e->bt_tok);
        lipi_tabcache_put(&w, e->bt_len, n * sizeof *e->bt_len);
        lipi_tabcache_put(&w, e->bt_pairs, cap * sizeof *e->bt_pairs);
        lipi_tabcache_put(&w, e->bt_filter, BT_FILTER_WORDS * sizeof *e->bt_filter);
    }
    lipi_tabcache_commit(&w);
}

/* Whether the tables just read can be walked safely: a token's split is
 * itself (one byte) or two lower ids whose lengths add up to its own, its
 * prefix is shorter and not empty, merged ids are ids and the pair table
 * has an empty slot (every probe ends). The trie's cells were checked as it
 * was read. Lengths are not compared with the vocabulary's tokens (a pass
 * over every token at each warm load of o200k): the walk checks each
 * length it takes against the word instead (bt_walk, lipi_enc_bt_word). */
static bool bt_tables_ok(const lipi_encoder *e, size_t cap)
{
    size_t n = e->bt_v;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = bt_left(e, (uint32_t)i), r = bt_right(e, (uint32_t)i);
        uint32_t p = bt_prefix(e, (uint32_t)i);
        size_t len = e->bt_len[i];
        if (!(l == i && r == i) &&
            !(l < i && r < i && (size_t)e->bt_len[l] + e->bt_len[r] == len))
            return false;
        if (p != UINT32_MAX && (p >= n || e->bt_len[p] == 0 || e->bt_len[p] >= len))
            return false;
    }
    return lipi_enc_bt_pairs_ok(e->bt_pairs, cap, e->bt_bits, n);
}

/* Slots [from, cap) of pairs: whether their merged ids are below n; adds
 * the empty ones to *empty. Without an early exit. */
static bool pairs_scan(const uint64_t *pairs, size_t from, size_t cap, unsigned bits, size_t n,
                       size_t *empty)
{
    uint64_t mask = (UINT64_C(1) << bits) - 1, bad = 0;
    for (size_t k = from; k < cap; k++) {
        uint64_t v = pairs[k];
        *empty += v == UINT64_MAX;
        bad |= v != UINT64_MAX && (v & mask) >= n;
    }
    return !bad;
}

bool lipi_enc_bt_pairs_ok_ref(const uint64_t *pairs, size_t cap, unsigned bits, size_t n)
{
    size_t empty = 0;
    return pairs_scan(pairs, 0, cap, bits, n, &empty) && empty > 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 4 slots at a time (GCC -O2 left the loop scalar: 6.2M instructions of
 * o200k's warm load under callgrind). bits <= 21: ids compare signed. */
__attribute__((target("avx2"))) static bool pairs_ok_avx2(const uint64_t *pairs, size_t cap,
                                                          unsigned bits, size_t n)
{
    const __m256i none = _mm256_set1_epi64x(-1),
                  mask = _mm256_set1_epi64x((long long)((UINT64_C(1) << bits) - 1)),
                  top = _mm256_set1_epi64x((long long)n - 1);
    __m256i bad = _mm256_setzero_si256(), empties = _mm256_setzero_si256();
    size_t k = 0, empty = 0;
    for (; k + 4 <= cap; k += 4) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(pairs + k));
        __m256i is_none = _mm256_cmpeq_epi64(v, none);
        empties = _mm256_sub_epi64(empties, is_none);
        bad = _mm256_or_si256(
            bad, _mm256_andnot_si256(is_none,
                                     _mm256_cmpgt_epi64(_mm256_and_si256(v, mask), top)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, empties);
    empty = (size_t)(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
    return _mm256_testz_si256(bad, bad) && pairs_scan(pairs, k, cap, bits, n, &empty) &&
           empty > 0;
}
#endif

bool lipi_enc_bt_pairs_ok(const uint64_t *pairs, size_t cap, unsigned bits, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (bits <= 21 && n <= INT32_MAX && __builtin_cpu_supports("avx2"))
        return pairs_ok_avx2(pairs, cap, bits, n);
#endif
    return lipi_enc_bt_pairs_ok_ref(pairs, cap, bits, n);
}

/* Maps the tables of (kind, key) into e in place of the arrays the caller
 * allocated (which are then freed); -1: not in the
 * cache (or bad: e is as it was), 0: cached as unusable, 1: mapped. The
 * mapping (read-only, e->bt_mapped) lives as long as the encoder: no copy,
 * and only the pages a walk touches are read after the checks. */
static int bt_load(lipi_encoder *e, const char *kind, const char key[65], size_t cap)
{
    lipi_tabcache_map f;
    size_t n = e->bt_v;
    if (!lipi_tabcache_map_open(&f, kind, key))
        return -1;
    const uint64_t *on = lipi_tabcache_map_next(&f, 1, sizeof *on);
    if (on && *on == 0 && f.left == 0) {
        lipi_tabcache_unmap(f.base, f.size);
        return 0;
    }
    lipi_datrie32 trie;
    if (!on || *on != 1 || !lipi_datrie32_map(&f, &trie, n)) {
        lipi_tabcache_unmap(f.base, f.size);
        return -1;
    }
    uint64_t *tok = (uint64_t *)lipi_tabcache_map_next(&f, n, sizeof *e->bt_tok);
    uint16_t *len = (uint16_t *)lipi_tabcache_map_next(&f, n, sizeof *e->bt_len);
    uint64_t *pairs = (uint64_t *)lipi_tabcache_map_next(&f, cap, sizeof *e->bt_pairs);
    uint64_t *filter = (uint64_t *)lipi_tabcache_map_next(&f, BT_FILTER_WORDS, sizeof *e->bt_filter);
    if (!tok || !len || !pairs || !filter || f.left != 0) {
        lipi_tabcache_unmap(f.base, f.size);
        return -1;
    }
    uint64_t *own_tok = e->bt_tok, *own_pairs = e->bt_pairs, *own_filter = e->bt_filter;
    uint16_t *own_len = e->bt_len;
    e->bt_tok = tok;
    e->bt_len = len;
    e->bt_pairs = pairs;
    e->bt_filter = filter;
    if (!bt_tables_ok(e, cap)) {
        e->bt_tok = own_tok;
        e->bt_len = own_len;
        e->bt_pairs = own_pairs;
        e->bt_filter = own_filter;
        lipi_tabcache_unmap(f.base, f.size);
        return -1;
    }
    lipi_free(own_tok);
    lipi_free(own_len);
    lipi_free(own_pairs);
    lipi_free(own_filter);
    e->bt_trie = trie;
    e->bt_mapped = f.base;
    e->bt_mapped_len = f.size;
    return 1;
}

/* Sizes the tables for n ranks; *cap: slots of the pair table. */
static lipi_status bt_alloc(lipi_encoder *e, size_t n, size_t *cap)
{
    *cap = 16;
    while (*cap / 2 < n + 1)
        *cap *= 2;
    e->bt_v = n;
    e->bt_bits = enc_bits_for(n);
    e->bt_mask = *cap - 1;
    e->bt_pairs = lipi_reallocarray(NULL, *cap, sizeof *e->bt_pairs);
    e->bt_tok = lipi_reallocarray(NULL, n, sizeof *e->bt_tok);
    e->bt_len = lipi_reallocarray(NULL, n, sizeof *e->bt_len);
    e->bt_filter = lipi_calloc(BT_FILTER_WORDS, sizeof *e->bt_filter);
    return e->bt_pairs && e->bt_tok && e->bt_len && e->bt_filter ? LIPI_OK : LIPI_ENOMEM;
}

/* Builds the trie of keys[0..n) (the tokens by rank; values: scratch of n)
 * and bt_len; *ok false when a token is too long or the trie too big (keep
 * the merge loop). */
static lipi_status bt_trie(lipi_encoder *e, const lipi_strref *keys, uint32_t *values, size_t n,
                           bool *ok)
{
    lipi_status st;
    lipi_datrie wide;
    *ok = false;
    for (size_t i = 0; i < n; i++) {
        if (keys[i].len > UINT16_MAX)
            return LIPI_OK; /* no such tokens in rank files or merges */
        e->bt_len[i] = (uint16_t)keys[i].len;
        values[i] = (uint32_t)i;
    }
    st = lipi_datrie_build(&wide, keys, values, n);
    if (st != LIPI_OK)
        return st;
    st = lipi_datrie32_from(&e->bt_trie, &wide);
    lipi_datrie_free(&wide);
    if (st == LIPI_EINVAL)
        return LIPI_OK; /* too many cells for the compact trie */
    *ok = st == LIPI_OK;
    return st;
}

/* The longest proper prefix of key that is a token, or UINT32_MAX. */
static uint32_t bt_prefix_of(const lipi_encoder *e, const lipi_strref *key)
{
    size_t l;
    return key->s && key->len > 1 ? bt_longest(e, key->s, key->len - 1, &l) : UINT32_MAX;
}

/* Records that BPE merges the pair (a, b) into t. */
static void bt_pair_put(lipi_encoder *e, uint32_t a, uint32_t b, uint32_t t)
{
    uint64_t key = (uint64_t)a * e->bt_v + b;
    size_t w;
    enc_packed_put(e->bt_pairs, e->bt_mask, e->bt_bits, key, t);
    uint64_t m = bt_filter_mask(key, &w);
    e->bt_filter[w] |= m;
}

/* BPE's own check, the last before e->bt is set: every token of the n
 * ranks encodes to itself. */
static lipi_status bt_check_all(lipi_encoder *e, size_t n)
{
    lipi_session *s = NULL;
    lipi_status st = lipi_session_new(e, &s);
    if (st != LIPI_OK)
        return st;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = !bt_key(e, (uint32_t)i)->s || !bt_key(e, (uint32_t)i)->len ||
             bt_encodes_to_itself(s, (uint32_t)i);
    lipi_session_free(s);
    e->bt = ok;
    return LIPI_OK;
}

/* Numbers the tokens of byte-level Hugging Face BPE by rank (see the top):
 * bt_id, keys (the tokens by rank), rank_of (scratch of vocab.n), each
 * rank's split in bt_tok (no prefix yet), the pair table and its filter.
 * False when the merges are not such a numbering. */
static bool bt_ranks(lipi_encoder *e, uint32_t *rank_of, lipi_strref *keys)
{
    const lipi_vocab_model *m = e->m;
    size_t nv = m->vocab.n, nm = m->n_merges, n = e->bt_v;
    memset(e->bt_pairs, 0xff, (e->bt_mask + 1) * sizeof *e->bt_pairs);
    memset(e->bt_filter, 0, BT_FILTER_WORDS * sizeof *e->bt_filter);
    memset(rank_of, 0xff, nv * sizeof *rank_of);
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t id = e->byte_id[b];
        if (id >= nv || rank_of[id] != UINT32_MAX || e->raw_keys[id].len != 1)
            return false;
        rank_of[id] = b;
        e->bt_id[b] = id;
        keys[b] = e->raw_keys[id];
        e->bt_tok[b] = bt_record(b, b, UINT32_MAX);
    }
    for (size_t r = 0; r < nm; r++) {
        const lipi_merge *g = &m->merges[r];
        uint32_t t = (uint32_t)(256 + r), a, b;
        uint64_t old;
        if (g->left >= nv || g->right >= nv || g->result >= nv)
            return false;
        a = rank_of[g->left];
        b = rank_of[g->right];
        const lipi_strref *ka = &e->raw_keys[g->left], *kb = &e->raw_keys[g->right],
                          *kt = &e->raw_keys[g->result];
        /* Made by a later merge, or not at all; a token made twice; a pair
         * listed twice (Hugging Face keeps its last rank). */
        if (a == UINT32_MAX || b == UINT32_MAX || rank_of[g->result] != UINT32_MAX ||
            enc_packed_get(e->bt_pairs, e->bt_mask, e->bt_bits, (uint64_t)a * n + b, &old))
            return false;
        if (!ka->s || !kb->s || !kt->s || kt->len != ka->len + kb->len ||
            memcmp(kt->s, ka->s, ka->len) != 0 || memcmp(kt->s + ka->len, kb->s, kb->len) != 0)
            return false;
        rank_of[g->result] = t;
        e->bt_id[t] = g->result;
        keys[t] = *kt;
        e->bt_tok[t] = bt_record(a, b, UINT32_MAX);
        bt_pair_put(e, a, b, t);
    }
    return true;
}

/* Byte-level Hugging Face BPE (see the top): ranks from the merges. */
static lipi_status bt_init_merges(lipi_encoder *e)
{
    lipi_status st = LIPI_OK;
    const lipi_vocab_model *m = e->m;
    size_t nv = m->vocab.n, n = 256 + m->n_merges, cap;
    uint32_t *rank_of = NULL, *values = NULL;
    lipi_strref *keys = NULL;
    char key[65];
    bool ok, cache = false;
    /* The merge loop ignores dropout, but a model that asks for it is not
     * one whose output should be fixed here. */
    if (m->type != LIPI_MODEL_BPE || !e->raw_bytes || e->prefix_len || e->suffix_len ||
        (m->has_dropout && m->dropout > 0.0) || nv >= BT_NONE || n >= BT_NONE ||
        3 * enc_bits_for(n) > 63)
        return LIPI_OK;
    TRY(lipi_enc_raw_keys(e));
    rank_of = lipi_reallocarray(NULL, nv ? nv : 1, sizeof *rank_of);
    keys = lipi_reallocarray(NULL, n, sizeof *keys);
    values = lipi_reallocarray(NULL, n, sizeof *values);
    e->bt_id = lipi_reallocarray(NULL, n, sizeof *e->bt_id);
    if (!rank_of || !keys || !values || !e->bt_id)
        TRY(LIPI_ENOMEM);
    TRY(bt_alloc(e, n, &cap));
    if (!bt_ranks(e, rank_of, keys))
        goto done;
    /* The tables follow from the tokens by rank and where each splits (in
     * values until bt_trie), which the key covers (or the snapshot's key,
     * which covers what they follow from); the trie and the check are what
     * take time (about 100 M instructions for GPT-2). */
    for (size_t t = 0; t < n; t++)
        values[t] = (uint32_t)keys[bt_left(e, (uint32_t)t)].len;
    cache = e->tok->table_cache && lipi_tabcache_key_of(e->tok, "backtrack-hf", keys, n, values,
                                                        n * sizeof *values, key) == LIPI_OK;
    if (cache) {
        int got = bt_load(e, "backtrack-hf", key, cap);
        if (got >= 0) {
            e->bt = got == 1;
            cache = false; /* nothing to store */
            goto done;
        }
    }
    TRY(bt_trie(e, keys, values, n, &ok));
    if (!ok)
        goto done;
    for (size_t t = 256; t < n; t++)
        e->bt_tok[t] = bt_record(bt_left(e, (uint32_t)t), bt_right(e, (uint32_t)t),
                                 bt_prefix_of(e, &keys[t]));
    TRY(bt_check_all(e, n));
done:
    if (cache && st == LIPI_OK)
        bt_store(e, "backtrack-hf", key, cap);
    lipi_free(rank_of);
    lipi_free(keys);
    lipi_free(values);
    if (!e->bt)
        lipi_enc_bt_free(e);
    return st;
}

lipi_status lipi_enc_bt_init(lipi_encoder *e)
{
    lipi_status st = LIPI_OK;
    const lipi_vocab_model *m = e->m;
    size_t n = m->vocab.n, cap;
    uint32_t *values = NULL;
    char key[65];
    bool cache = false, ok;
    if (!m->rank_ids)
        return bt_init_merges(e);
    if (!e->raw_bytes || !m->opt.ignore_merges || n == 0 || n >= BT_NONE)
        return LIPI_OK;
    if (3 * enc_bits_for(n) > 63)
        return LIPI_OK; /* the pair table's packed slots would not fit */
    values = lipi_reallocarray(NULL, n, sizeof *values);
    if (!values)
        TRY(LIPI_ENOMEM);
    TRY(bt_alloc(e, n, &cap));
    /* The key hashes the raw bytes only without a snapshot's key. */
    if (e->tok->table_cache && !e->tok->snapshot_key[0])
        TRY(lipi_enc_raw_keys(e));
    cache = e->tok->table_cache &&
            lipi_tabcache_key_of(e->tok, "backtrack", e->raw_keys, n, NULL, 0, key) == LIPI_OK;
    if (cache) {
        int got = bt_load(e, "backtrack", key, cap);
        if (got >= 0) {
            e->bt = got == 1;
            cache = false; /* nothing to store */
            goto done;
        }
    }
    memset(e->bt_pairs, 0xff, cap * sizeof *e->bt_pairs);
    TRY(lipi_enc_raw_keys(e));
    TRY(lipi_enc_raw_slots(e)); /* the splits below look halves up */
    TRY(bt_trie(e, e->raw_keys, values, n, &ok));
    if (!ok)
        goto done;
    for (size_t i = 0; i < n; i++)
        e->bt_tok[i] = bt_record((uint32_t)i, (uint32_t)i, bt_prefix_of(e, &e->raw_keys[i]));
    /* Each token's split, in rank order: its longest prefix token whose
     * rest is a token too, both older, forming a valid pair. */
    for (size_t i = 0; i < n; i++) {
        const lipi_strref *k = &e->raw_keys[i];
        uint32_t prefix = bt_prefix(e, (uint32_t)i);
        for (uint32_t a = k->s ? prefix : UINT32_MAX; a != UINT32_MAX; a = bt_prefix(e, a)) {
            size_t la = bt_len(e, a);
            uint32_t b;
            if (!lipi_enc_raw_find(e, k->s + la, k->len - la,
                                   lipi_enc_hash(k->s + la, k->len - la), &b))
                continue;
            if (a >= i || b >= i || !bt_valid(e, a, b))
                continue;
            bt_pair_put(e, a, b, (uint32_t)i);
            e->bt_tok[i] = bt_record(a, b, prefix);
            break;
        }
        /* A token of several bytes that no pair makes is one tiktoken's
         * merges never reach (it encodes its bytes otherwise); the walk
         * would take it whole. */
        if (k->s && k->len > 1 && bt_left(e, (uint32_t)i) == i)
            goto done;
    }
    TRY(bt_check_all(e, n));
done:
    if (cache && st == LIPI_OK)
        bt_store(e, "backtrack", key, cap);
    e->bt_words = e->bt;
    lipi_free(values);
    if (!e->bt)
        lipi_enc_bt_free(e);
    return st;
}

/* The models, exactly as Hugging Face tokenizers runs them on one piece:
 * BPE (merges by rank over a heap of adjacent pairs and a linked list of
 * symbols), WordPiece (greedy longest match first over a trie), Unigram
 * (Viterbi over the lattice of trie matches) and WordLevel. Every model
 * writes the tokens of the piece into s->ptok with byte spans of the piece;
 * lipi_enc_model stores them in the word cache (encode.c looks there
 * first). */
#include "encoder/encoder_impl.h"

#include <math.h>
#include <pthread.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <string.h>

/* ======================================================================== */
/* Tables                                                                    */
/* ======================================================================== */

static lipi_status cpmap_put(enc_cpmap *m, size_t *count, uint32_t cp, uint32_t id)
{
    if ((*count + 1) * 2 > m->mask + 1 || !m->slot) {
        size_t cap = m->slot ? (m->mask + 1) * 2 : 64;
        uint64_t *ns = lipi_reallocarray(NULL, cap, sizeof *ns);
        if (!ns)
            return LIPI_ENOMEM;
        memset(ns, 0xff, cap * sizeof *ns);
        for (size_t i = 0; m->slot && i <= m->mask; i++) {
            uint64_t v = m->slot[i];
            if (v == UINT64_MAX)
                continue;
            size_t k = (size_t)((uint32_t)(v >> 32) * 0x9E3779B1u) & (cap - 1);
            while (ns[k] != UINT64_MAX)
                k = (k + 1) & (cap - 1);
            ns[k] = v;
        }
        lipi_free(m->slot);
        m->slot = ns;
        m->mask = cap - 1;
    }
    size_t k = (size_t)(cp * 0x9E3779B1u) & m->mask;
    while (m->slot[k] != UINT64_MAX) {
        if ((uint32_t)(m->slot[k] >> 32) == cp)
            return LIPI_OK; /* the vocabulary has no repeats; keep the first */
        k = (k + 1) & m->mask;
    }
    m->slot[k] = (uint64_t)cp << 32 | id;
    (*count)++;
    return LIPI_OK;
}

/* Whether s[0..n) is exactly one UTF-8 character; its code point in *cp. */
static bool one_char(const char *s, size_t n, uint32_t *cp)
{
    if (n == 0 || n > 4)
        return false;
    size_t cl = lipi_utf8_decode(s, n, cp);
    return cl == n;
}

int lipi_enc_wide_pairs_for_tests;

/* The undecorated single chars of the BMP again, ASCII included, as 64-id
 * blocks found straight from a char's UTF-8 bytes (the payload bits of
 * all but the last byte are cp >> 6, the last byte's cp & 63; a lone byte
 * reads as the char of its value, as enc_utf8_cp has it): bpe_symbols'
 * lookup without decoding or hashing. Only blocks holding a token take
 * room. Not made (NULL) for ids past INT32_MAX. */
static lipi_status char_blocks(lipi_encoder *e)
{
    const enc_cpmap *m = &e->char_id[0];
    size_t nb = 3; /* none, then the two of ASCII */
    if (e->m->vocab.n > INT32_MAX)
        return LIPI_OK;
    e->char_blk = lipi_calloc(0x10000 >> 6, sizeof *e->char_blk);
    if (!e->char_blk)
        return LIPI_ENOMEM;
    e->char_blk[0] = 1;
    e->char_blk[1] = 2;
    for (size_t k = 0; m->slot && k <= m->mask; k++) {
        uint32_t cp = (uint32_t)(m->slot[k] >> 32);
        if (m->slot[k] != UINT64_MAX && cp < 0x10000 && !e->char_blk[cp >> 6])
            e->char_blk[cp >> 6] = (uint16_t)nb++;
    }
    e->char_blk_ids = lipi_reallocarray(NULL, nb * 64, sizeof *e->char_blk_ids);
    if (!e->char_blk_ids)
        return LIPI_ENOMEM;
    memset(e->char_blk_ids, 0xff, nb * 64 * sizeof *e->char_blk_ids);
    for (uint32_t c = 0; c < 128; c++)
        e->char_blk_ids[64 + c] = (int32_t)e->ascii_id[0][c];
    for (size_t k = 0; m->slot && k <= m->mask; k++) {
        uint32_t cp = (uint32_t)(m->slot[k] >> 32);
        if (m->slot[k] != UINT64_MAX && cp < 0x10000)
            e->char_blk_ids[(size_t)e->char_blk[cp >> 6] * 64 + (cp & 63)] =
                (int32_t)(uint32_t)m->slot[k];
    }
    return LIPI_OK;
}

/* 2^17 bits: 16 KB, the filter of 8192 merges. */
#define PAIR_FILTER_MAX_BITS ((size_t)1 << 17)

/* The merge loop's tables: the (left, right) -> rank pair table,
 * merge_result and merge_concat. Built at most once per encoder, by
 * lipi_enc_bpe_pairs. */
static lipi_status bpe_pairs_build(lipi_encoder *e)
{
    const lipi_vocab_model *m = e->m;
    size_t n = m->n_merges, cap = 16;
    uint64_t v = m->vocab.n ? m->vocab.n : 1;
    unsigned rbits = enc_bits_for(n);
    /* Compact when every key << rbits | rank stays below 2^63. */
    bool compact = v <= UINT32_MAX && rbits < 63 && v * v <= (UINT64_C(1) << (63 - rbits)) &&
                   !lipi_enc_wide_pairs_for_tests;
    /* Load at most 3/4 compact (the slots are small), 1/2 wide. */
    while (compact ? cap / 4 * 3 < n + 1 : cap / 2 < n + 1) {
        if (cap > SIZE_MAX / 32)
            return LIPI_ENOMEM;
        cap *= 2;
    }
    e->pair_v = v;
    e->pair_bits = compact ? rbits : 0;
    e->pair_mask = cap - 1;
    e->merge_result = lipi_reallocarray(NULL, n ? n : 1, sizeof *e->merge_result);
    if (compact)
        e->pairs = lipi_reallocarray(NULL, cap, sizeof *e->pairs);
    else
        e->wide_pairs = lipi_reallocarray(NULL, cap, sizeof *e->wide_pairs);
    if (!e->merge_result || (compact ? !e->pairs : !e->wide_pairs))
        return LIPI_ENOMEM;
    if (compact)
        memset(e->pairs, 0xff, cap * sizeof *e->pairs);
    else
        memset(e->wide_pairs, 0xff, cap * sizeof *e->wide_pairs);
    /* A pair listed twice keeps its last rank, as Hugging Face's map does. */
    for (size_t r = 0; r < n; r++) {
        const lipi_merge *g = &m->merges[r];
        uint64_t key = (uint64_t)g->left * v + g->right;
        e->merge_result[r] = g->result;
        if (compact) {
            enc_packed_put(e->pairs, e->pair_mask, rbits, key, r);
        } else {
            size_t k = enc_slot_home(key, e->pair_mask);
            while (e->wide_pairs[k].key != UINT64_MAX && e->wide_pairs[k].key != key)
                k = (k + 1) & e->pair_mask;
            e->wide_pairs[k] = (enc_pair){key, r};
        }
    }
    /* The pair filter: a bit per hashed pair that merges, 16 to 32 bits a
     * merge (3-6% of the pairs that do not merge find a bit set). Made
     * for up to 8192 merges (16 KB); models with more keep the pair
     * cache alone (a bigger filter was not measured). */
    size_t fbits = 64;
    while (fbits < 16 * n && fbits < PAIR_FILTER_MAX_BITS)
        fbits *= 2;
    if (compact && fbits >= 16 * n) {
        e->pair_filter = lipi_calloc(fbits / 64, sizeof *e->pair_filter);
        if (!e->pair_filter)
            return LIPI_ENOMEM;
        e->pair_filter_shift = 64 - (unsigned)__builtin_ctzll(fbits);
        for (size_t r = 0; r < n; r++) {
            const lipi_merge *g = &m->merges[r];
            uint64_t f = ((uint64_t)g->left * v + g->right) * 0x9E3779B97F4A7C15ULL >>
                         e->pair_filter_shift;
            e->pair_filter[f >> 6] |= UINT64_C(1) << (f & 63);
        }
    }
    /* Whether bpe_merge_scan may replace the heap (see there). */
    const lipi_strref *tok = m->vocab.tok;
    size_t nv = m->vocab.n;
    e->merge_concat = !e->prefix_len && !e->suffix_len;
    for (size_t r = 0; r < n && e->merge_concat; r++) {
        const lipi_merge *g = &m->merges[r];
        e->merge_concat = g->left < nv && g->right < nv && g->result < nv && tok[g->left].s &&
                          tok[g->right].s && tok[g->result].s && tok[g->left].len &&
                          tok[g->right].len &&
                          tok[g->result].len == tok[g->left].len + tok[g->right].len;
    }
    return LIPI_OK;
}

/* One lock for every encoder's first build: it is taken at most once per
 * encoder, and only when backtracking could not encode a word. */
static pthread_mutex_t pairs_lock = PTHREAD_MUTEX_INITIALIZER;

lipi_status lipi_enc_bpe_pairs(const lipi_encoder *ce)
{
    /* The encoder is shared by sessions as const; these tables are the
     * one part of it made after lipi_encoder_new, once, under the lock,
     * and published by the release store (the allocation is not const). */
    lipi_encoder *e = (lipi_encoder *)ce;
    lipi_status st = LIPI_OK;
    if (atomic_load_explicit(&e->pairs_ready, memory_order_acquire))
        return LIPI_OK;
    pthread_mutex_lock(&pairs_lock);
    if (!atomic_load_explicit(&e->pairs_ready, memory_order_relaxed)) {
        lipi_free(e->pairs);
        lipi_free(e->wide_pairs);
        lipi_free(e->merge_result);
        lipi_free(e->pair_filter);
        e->pair_filter = NULL;
        e->pairs = NULL;
        e->wide_pairs = NULL;
        e->merge_result = NULL;
        st = bpe_pairs_build(e);
        if (st == LIPI_OK)
            atomic_store_explicit(&e->pairs_ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&pairs_lock);
    return st;
}

/* The model's settings and its single-character tokens; the pair table
 * waits for lipi_enc_bpe_pairs (lipi_encoder_new calls it unless
 * backtracking encodes every word: 4 MB and a pass over 200k merges at
 * each load of o200k otherwise). */
static lipi_status bpe_init(lipi_encoder *e)
{
    const lipi_vocab_model *m = e->m;
    size_t counts[4] = {0};

    e->prefix = m->opt.continuing_subword_prefix;
    e->prefix_len = strnlen(e->prefix, sizeof m->opt.continuing_subword_prefix);
    e->suffix = m->opt.end_of_word_suffix;
    e->suffix_len = strnlen(e->suffix, sizeof m->opt.end_of_word_suffix);

    e->bpe_long_min = BPE_LONG_MIN;
    e->bpe_long_part = BPE_LONG_PART;
    e->bpe_compact_min = BPE_LONG_MIN;

    /* Single characters, bare or with the prefix and/or suffix, by variant. */
    for (int v = 0; v < 4; v++)
        for (int c = 0; c < 128; c++)
            e->ascii_id[v][c] = -1;
    /* A token longer than a character (4 bytes) with both affixes is none
     * of them: most tokens, skipped at once. */
    size_t longest = 4 + e->prefix_len + e->suffix_len;
    /* The variants the model has, and the vocabulary, in locals: the
     * stores below would otherwise reload them at every token (2.3M
     * instructions of o200k's 200k tokens, then 1.2M more). */
    int vars[4], n_vars = 0;
    for (int v = 0; v < 4; v++)
        if (!((v & 1) && !e->prefix_len) && !((v & 2) && !e->suffix_len))
            vars[n_vars++] = v;
    const lipi_strref *tok = m->vocab.tok;
    size_t n_tok = m->vocab.n;
    for (size_t id = 0; id < n_tok; id++) {
        const lipi_strref *t = &tok[id];
        if (!t->s || t->len > longest)
            continue;
        for (int vi = 0; vi < n_vars; vi++) {
            int v = vars[vi];
            const char *s = t->s;
            size_t n = t->len;
            if (v & 1) {
                if (n < e->prefix_len || memcmp(s, e->prefix, e->prefix_len) != 0)
                    continue;
                s += e->prefix_len;
                n -= e->prefix_len;
            }
            if (v & 2) {
                if (n < e->suffix_len ||
                    memcmp(s + n - e->suffix_len, e->suffix, e->suffix_len) != 0)
                    continue;
                n -= e->suffix_len;
            }
            uint32_t cp;
            if (!one_char(s, n, &cp))
                continue;
            if (cp < 128) {
                if (e->ascii_id[v][cp] < 0)
                    e->ascii_id[v][cp] = (int64_t)id;
            } else {
                lipi_status st = cpmap_put(&e->char_id[v], &counts[v], cp, (uint32_t)id);
                if (st != LIPI_OK)
                    return st;
            }
        }
    }
    return e->prefix_len || e->suffix_len ? LIPI_OK : char_blocks(e);
}

/* Id of the single-character token cp in variant v, or -1. */
static inline int64_t char_id(const lipi_encoder *e, int v, uint32_t cp)
{
    return cp < 128 ? e->ascii_id[v][cp] : enc_cpmap_get(&e->char_id[v], cp);
}

/* The trie of the vocabulary (a Unigram model's with double scores), read
 * from the table cache when the tokenizer allows it and the cache has it,
 * else built (and stored). */
static lipi_status vocab_trie(lipi_encoder *e, const uint32_t *values, size_t n)
{
    lipi_status st = LIPI_OK;
    const lipi_strref *tok = e->m->vocab.tok;
    const char *kind = "unigram";
    char key[65];
    lipi_tabcache_reader r;
    lipi_tabcache_writer w;
    bool cache = e->tok->table_cache &&
                 lipi_tabcache_key_of(e->tok, kind, tok, n, e->prefix, e->prefix_len, key) == LIPI_OK;
    if (cache && lipi_tabcache_open(&r, kind, key)) {
        bool ok = lipi_datrie_get(&r, &e->trie, tok, n);
        if (lipi_tabcache_close(&r) && ok)
            return LIPI_OK;
        lipi_datrie_free(&e->trie);
    }
    TRY(lipi_datrie_build(&e->trie, tok, values, n));
    if (cache && lipi_tabcache_create(&w, kind, key)) {
        lipi_datrie_put(&w, &e->trie);
        lipi_tabcache_commit(&w);
    }
done:
    return st;
}

/* f32 Unigram: trie32's units with each piece's float score beside its
 * unit, so that the lattice's walk reads one array where it read three
 * (unit, value, score: a cache miss each on a 100k vocabulary). A unit
 * keeps its final bit only where a piece ends. The unknown token's own
 * piece, whose score is added in float (lipi_lattice_relax), and a NaN
 * score get a NaN, which sends the walk to the general step. The 32-bit
 * units are freed: nothing else walks them. */
static lipi_status unigram_units(lipi_encoder *e)
{
    lipi_datrie32 *t = &e->trie32;
    uint64_t *u = lipi_reallocarray(NULL, t->size, sizeof *u);
    if (!u)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < t->size; i++) {
        uint32_t unit = t->unit[i], bits;
        int32_t id = t->value[i];
        float score = NAN;
        if (!(unit & 0x200) || id < 0 || (size_t)id >= e->m->vocab.n)
            unit &= ~UINT32_C(0x200);
        else if ((int64_t)id != e->unk_id)
            score = (float)e->m->scores[id];
        memcpy(&bits, &score, sizeof bits);
        u[i] = (uint64_t)bits << 32 | unit;
    }
    lipi_free(t->unit);
    t->unit = NULL;
    e->uni = u;
    return LIPI_OK;
}

/* The f32 Unigram tables in the table cache, kind "unigram-f32": size,
 * uni[size], trie32.value[size]. The key covers the scores and the unknown
 * id, which uni holds: the model file's, or else the vocabulary's with
 * them. */
#define UNI_KIND "unigram-f32"

static lipi_status unigram_units_key(const lipi_encoder *e, char key[65])
{
    const lipi_vocab_model *m = e->m;
    size_t n = m->vocab.n;
    if (e->tok->snapshot_key[0])
        return lipi_tabcache_key_of(e->tok, UNI_KIND, m->vocab.tok, n, NULL, 0, key);
    float *extra = lipi_reallocarray(NULL, n + 2, sizeof *extra);
    if (!extra)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < n; i++)
        extra[i] = (float)m->scores[i];
    memcpy(extra + n, &e->unk_id, sizeof e->unk_id);
    lipi_status st = lipi_tabcache_key_of(e->tok, UNI_KIND, m->vocab.tok, n, extra,
                                          (n + 2) * sizeof *extra, key);
    lipi_free(extra);
    return st;
}

/* Whether the cached tables can be walked: every child slot a unit points
 * to is inside, and a unit is final exactly where the value is an id (as
 * lipi_datrie32_map checks the 32-bit units). Scores need no check: any
 * float is a score, and a NaN makes the walk read the id. Without an early
 * exit, so that it vectorizes (it runs at every load). */
static bool units_ok(const uint64_t *uni, const int32_t *value, size_t size, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < size; i++) {
        uint32_t unit = (uint32_t)uni[i];
        bad |= (size_t)(unit >> 10) + 257 >= size;
        bad |= unit & 0x200 ? value[i] < 0 || (size_t)value[i] >= n : value[i] != -1;
    }
    return !bad;
}

/* Maps the cached tables into e (read-only, for the encoder's life: no copy
 * and no conversion at load); false when absent or bad. */
static bool unigram_units_map(lipi_encoder *e, const char key[65])
{
    lipi_tabcache_map f;
    if (!lipi_tabcache_map_open(&f, UNI_KIND, key))
        return false;
    const uint64_t *size = lipi_tabcache_map_next(&f, 1, sizeof *size);
    const uint64_t *uni = NULL;
    const int32_t *value = NULL;
    if (size && *size >= 258 && *size <= LIPI_DATRIE32_MAX) {
        uni = lipi_tabcache_map_next(&f, *size, sizeof *uni);
        value = lipi_tabcache_map_next(&f, *size, sizeof *value);
    }
    if (!uni || !value || f.left != 0 || !units_ok(uni, value, (size_t)*size, e->m->vocab.n)) {
        lipi_tabcache_unmap(f.base, f.size);
        return false;
    }
    e->uni = (uint64_t *)uni;
    e->trie32 = (lipi_datrie32){NULL, (int32_t *)value, (size_t)*size, true};
    e->tries_mapped = f.base;
    e->tries_mapped_len = f.size;
    return true;
}

/* f32 Unigram's trie: mapped from the table cache, or built (the wide
 * trie, its compact copy, then uni) and stored. A vocabulary too big for
 * the compact trie keeps the wide one, which the general walk takes. */
static lipi_status unigram_f32_tries(lipi_encoder *e, const uint32_t *values, size_t n)
{
    lipi_status st = LIPI_OK;
    char key[65];
    bool cache = e->tok->table_cache && unigram_units_key(e, key) == LIPI_OK;
    if (cache && unigram_units_map(e, key))
        return LIPI_OK;
    TRY(lipi_datrie_build(&e->trie, e->m->vocab.tok, values, n));
    st = lipi_datrie32_from(&e->trie32, &e->trie);
    if (st == LIPI_EINVAL)
        return LIPI_OK; /* too many cells: walk the wide one */
    TRY(st);
    lipi_datrie_free(&e->trie); /* nothing else walks it */
    TRY(unigram_units(e));
    lipi_tabcache_writer w;
    if (cache && lipi_tabcache_create(&w, UNI_KIND, key)) {
        lipi_tabcache_put_u64(&w, e->trie32.size);
        lipi_tabcache_put(&w, e->uni, e->trie32.size * sizeof *e->uni);
        lipi_tabcache_put(&w, e->trie32.value, e->trie32.size * sizeof *e->trie32.value);
        lipi_tabcache_commit(&w);
    }
done:
    return st;
}

/* WordPiece's two tries, compact (8 bytes a cell, not 12), mapped from the
 * table cache (kind "wordpiece32": trie32, then trie32_cont) or built and
 * stored. Mapped, a warm load neither reads them into memory nor converts
 * them: the cells are checked in place (lipi_datrie32_map). A vocabulary
 * too big for compact tries keeps the wide ones. */
#define WP_KIND "wordpiece32"

static lipi_status wordpiece_tries(lipi_encoder *e, const lipi_strref *cut,
                                   const uint32_t *values, size_t n)
{
    lipi_status st = LIPI_OK;
    const lipi_strref *tok = e->m->vocab.tok;
    char key[65];
    lipi_tabcache_map f;
    lipi_tabcache_writer w;
    bool cache = e->tok->table_cache && lipi_tabcache_key_of(e->tok, WP_KIND, tok, n, e->prefix,
                                                             e->prefix_len, key) == LIPI_OK;
    if (cache && lipi_tabcache_map_open(&f, WP_KIND, key)) {
        lipi_datrie32 a, b;
        if (lipi_datrie32_map(&f, &a, n) && lipi_datrie32_map(&f, &b, n) && f.left == 0) {
            e->trie32 = a;
            e->trie32_cont = b;
            e->tries_mapped = f.base;
            e->tries_mapped_len = f.size;
            return LIPI_OK;
        }
        lipi_tabcache_unmap(f.base, f.size);
    }
    TRY(lipi_datrie_build(&e->trie, tok, values, n));
    TRY(lipi_datrie_build(&e->trie_cont, cut, values, n));
    st = lipi_datrie32_from(&e->trie32, &e->trie);
    if (st == LIPI_OK)
        st = lipi_datrie32_from(&e->trie32_cont, &e->trie_cont);
    if (st == LIPI_EINVAL) { /* too many cells: walk the wide ones */
        lipi_datrie32_free(&e->trie32);
        lipi_datrie32_free(&e->trie32_cont);
        return LIPI_OK;
    }
    TRY(st);
    lipi_datrie_free(&e->trie);
    lipi_datrie_free(&e->trie_cont);
    if (cache && lipi_tabcache_create(&w, WP_KIND, key)) {
        lipi_datrie32_put(&w, &e->trie32);
        lipi_datrie32_put(&w, &e->trie32_cont);
        lipi_tabcache_commit(&w);
    }
done:
    return st;
}

lipi_status lipi_enc_models_init(lipi_encoder *e, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const lipi_vocab_model *m = e->m;
    uint32_t *values = NULL;
    lipi_strref *cut = NULL;

    e->unk_id = m->opt.unk_id;
    e->unk_named = m->type == LIPI_MODEL_UNIGRAM ? m->opt.unk_id >= 0 : m->unk_token != NULL;
    /* Hugging Face's Unigram always fuses unknown runs; BPE has the option. */
    e->fuse_unk = m->type == LIPI_MODEL_UNIGRAM ? true : m->opt.fuse_unk;
    /* Only a Viterbi sums scores; a SentencePiece BPE model is merges. */
    e->f32_viterbi = m->f32_scores && m->type == LIPI_MODEL_UNIGRAM;
    for (int b = 0; b < 256; b++) {
        char name[7];
        uint32_t id;
        lipi_byte_token_format((uint8_t)b, name);
        e->byte_fb[b] = lipi_vocab_find(&m->vocab, name, 6, &id) ? (int64_t)id : -1;
    }

    switch (m->type) {
    case LIPI_MODEL_BPE:
        TRY(bpe_init(e));
        break;
    case LIPI_MODEL_WORDPIECE:
    case LIPI_MODEL_UNIGRAM: {
        size_t n = m->vocab.n;
        values = lipi_reallocarray(NULL, n ? n : 1, sizeof *values);
        if (!values) {
            st = LIPI_ENOMEM;
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            values[i] = (uint32_t)i;
        if (m->type == LIPI_MODEL_WORDPIECE) {
            size_t pl = strnlen(m->opt.continuing_subword_prefix,
                                sizeof m->opt.continuing_subword_prefix);
            cut = lipi_calloc(n ? n : 1, sizeof *cut);
            if (!cut) {
                st = LIPI_ENOMEM;
                goto done;
            }
            for (size_t i = 0; i < n; i++) {
                const lipi_strref *t = &m->vocab.tok[i];
                if (t->s && t->len > pl && memcmp(t->s, m->opt.continuing_subword_prefix, pl) == 0)
                    cut[i] = (lipi_strref){t->s + pl, t->len - pl};
            }
            e->prefix = m->opt.continuing_subword_prefix;
            e->prefix_len = pl;
        }
        if (e->f32_viterbi)
            TRY(unigram_f32_tries(e, values, n));
        else if (cut)
            TRY(wordpiece_tries(e, cut, values, n));
        else
            TRY(vocab_trie(e, values, n));
        if (m->type == LIPI_MODEL_UNIGRAM && !e->f32_viterbi) {
            /* The lattice walks the trie from every char: the compact copy
             * keeps more of it in cache. */
            st = lipi_datrie32_from(&e->trie32, &e->trie);
            if (st == LIPI_OK)
                lipi_datrie_free(&e->trie); /* nothing else walks it */
            else if (st == LIPI_EINVAL)
                st = LIPI_OK; /* too many cells: walk the wide one */
            TRY(st);
        }
        if (m->type == LIPI_MODEL_UNIGRAM) {
            double min = 0.0;
            bool any = false;
            for (size_t i = 0; i < n; i++)
                if (m->vocab.tok[i].s && (!any || m->scores[i] < min)) {
                    min = m->scores[i];
                    any = true;
                }
            /* SentencePiece's kUnkPenalty, subtracted in its arithmetic */
            e->unk_score = m->f32_scores ? (double)((float)min - 10.0f) : min - 10.0;
        }
        break;
    }
    case LIPI_MODEL_WORDLEVEL:
        break;
    case LIPI_MODEL_NONE:
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "the tokenizer has no model");
        break;
    }
done:
    lipi_free(values);
    lipi_free(cut);
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    return st;
}

void lipi_enc_models_free(lipi_encoder *e)
{
    lipi_enc_bt_free(e);
    lipi_free(e->pairs);
    lipi_free(e->pair_filter);
    lipi_free(e->wide_pairs);
    lipi_free(e->merge_result);
    for (int v = 0; v < 4; v++)
        lipi_free(e->char_id[v].slot);
    lipi_free(e->char_blk);
    lipi_free(e->char_blk_ids);
    lipi_free(e->raw_keys);
    lipi_free(e->raw_arena);
    lipi_free(e->raw_slot);
    lipi_datrie_free(&e->trie);
    lipi_datrie32_free(&e->trie32);
    lipi_datrie32_free(&e->trie32_cont);
    if (e->tries_mapped)
        lipi_tabcache_unmap(e->tries_mapped, e->tries_mapped_len);
    else
        lipi_free(e->uni);
    e->uni = NULL;
    e->tries_mapped = NULL;
    lipi_datrie_free(&e->trie_cont);
}

/* ======================================================================== */
/* Piece tokens                                                              */
/* ======================================================================== */

static __attribute__((noinline)) lipi_status ptok_grow(lipi_session *s)
{
    return ENC_GROW(s->ptok, s->ptok_cap, s->ptok_n + 1);
}

/* Inline: a word's tokens are pushed one by one, and the room is nearly
 * always there. */
static inline lipi_status ptok_push(lipi_session *s, uint32_t id, size_t start, size_t end,
                                    bool text)
{
    if (s->ptok_n == s->ptok_cap) {
        lipi_status st = ptok_grow(s);
        if (st != LIPI_OK)
            return st;
    }
    s->ptok[s->ptok_n++] = (enc_ptok){id, (uint32_t)start,
                                      (uint32_t)end | (text ? ENC_PTOK_TEXT : 0)};
    return LIPI_OK;
}

static lipi_status no_unk(const lipi_encoder *e, lipi_error *err)
{
    const lipi_vocab_model *m = e->m;
    if (m->unk_token)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "the model needs its unknown token \"%.64s\", which is not in its "
                              "vocabulary",
                              m->unk_token);
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "the model needs an unknown token but has none");
}

/* ======================================================================== */
/* BPE                                                                       */
/* ======================================================================== */

static inline uint64_t pair_key(const lipi_encoder *e, uint32_t a, uint32_t b)
{
    return (uint64_t)a * e->pair_v + b;
}

static inline const void *pair_slot_of(const lipi_encoder *e, uint32_t a, uint32_t b)
{
    size_t k = enc_slot_home(pair_key(e, a, b), e->pair_mask);
    return e->pair_bits ? (const void *)&e->pairs[k] : (const void *)&e->wide_pairs[k];
}

/* What pair_rank reads on every call, loaded once for a word: stores to
 * the pair cache could otherwise alias the encoder's fields. */
typedef struct {
    const lipi_encoder *e;
    uint64_t v;
    unsigned bits;
    uint64_t *cache;
    const uint64_t *filter;
    unsigned filter_shift;
} pair_ctx;

static inline pair_ctx pair_ctx_of(const lipi_session *s)
{
    const lipi_encoder *e = s->enc;
    return (pair_ctx){e, e->pair_v, e->pair_bits, s->pair_cache, e->pair_filter,
                      e->pair_filter_shift};
}

/* The rank of merging a and b, if they merge. Inlined: it runs several
 * times for each char of a word the cache lacks. */
static inline __attribute__((always_inline)) bool pair_rank(const pair_ctx *p, uint32_t a,
                                                            uint32_t b, uint32_t *rank)
{
    const lipi_encoder *e = p->e;
    uint64_t key = (uint64_t)a * p->v + b, h = key * 0x9E3779B97F4A7C15ULL;
    unsigned bits = p->bits;
    /* Most pairs asked for merge nowhere (64% on spm_bpe8k's bench text):
     * the filter says so without reading the pair cache. A filter means
     * a compact table: one test for both. */
    if (p->filter) {
        uint64_t f = h >> p->filter_shift;
        if (!(p->filter[f >> 6] >> (f & 63) & 1))
            return false;
    }
    if (p->filter || bits) {
        uint64_t all = (UINT64_C(1) << bits) - 1;
        uint64_t *c = &p->cache[(h >> 40) & (LIPI_ENC_PAIR_CACHE - 1)];
        if (*c >> bits != key) {
            uint64_t r;
            *c = key << bits | (enc_packed_get(e->pairs, e->pair_mask, bits, key, &r) ? r : all);
        }
        *rank = (uint32_t)(*c & all);
        return *rank != all;
    }
    for (size_t k = enc_slot_home(key, e->pair_mask);; k = (k + 1) & e->pair_mask) {
        const enc_pair *q = &e->wide_pairs[k];
        if (q->key == key) {
            *rank = (uint32_t)q->rank;
            return true;
        }
        if (q->key == UINT64_MAX)
            return false;
    }
}

static inline __attribute__((always_inline)) bool pair_get(lipi_session *s, uint32_t a,
                                                           uint32_t b, uint32_t *rank)
{
    pair_ctx p = pair_ctx_of(s);
    return pair_rank(&p, a, b, rank);
}

/* (rank, pos) as one number: the heap's order, compared without a branch. */
static inline uint64_t cand_key(const bpe_cand *x)
{
    return (uint64_t)x->rank << 32 | x->pos;
}

/* The merge loop's heap is 4-ary (children of i: 4i + 1 .. 4i + 4): half
 * the levels of a binary heap, and a node's children share a cache line.
 * Which child is smallest is data a predictor cannot learn, so it is
 * computed with selects, not branches. */
static void heap_push(bpe_cand *h, size_t *n, bpe_cand c)
{
    size_t i = (*n)++;
    uint64_t ck = cand_key(&c);
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (ck >= cand_key(&h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n)
{
    bpe_cand top = h[0], last = h[--(*n)];
    size_t i = 0, len = *n;
    uint64_t lk = cand_key(&last);
    for (;;) {
        size_t c = 4 * i + 1, m = c;
        if (c >= len)
            break;
        uint64_t mk = cand_key(&h[c]);
        if (c + 3 < len) {
            uint64_t k1 = cand_key(&h[c + 1]), k2 = cand_key(&h[c + 2]), k3 = cand_key(&h[c + 3]);
            size_t m01 = k1 < mk ? c + 1 : c, m23 = k3 < k2 ? c + 3 : c + 2;
            uint64_t k01 = k1 < mk ? k1 : mk, k23 = k3 < k2 ? k3 : k2;
            m = k23 < k01 ? m23 : m01;
            mk = k23 < k01 ? k23 : k01;
        } else {
            for (size_t j = c + 1; j < len; j++) {
                uint64_t kj = cand_key(&h[j]);
                if (kj < mk) {
                    mk = kj;
                    m = j;
                }
            }
        }
        if (mk >= lk)
            break;
        h[i] = h[m];
        i = m;
    }
    if (len)
        h[i] = last;
    return top;
}

static __attribute__((noinline)) lipi_status sym_grow(lipi_session *s, size_t n)
{
    return ENC_GROW(s->sym, s->sym_cap, n + 1);
}

/* Inline, as ptok_push: once per char of every word the cache lacks. */
static inline lipi_status sym_push(lipi_session *s, size_t *n, uint32_t id, size_t len)
{
    if (*n == s->sym_cap) {
        lipi_status st = sym_grow(s, *n);
        if (st != LIPI_OK)
            return st;
    }
    s->sym[*n] = (bpe_sym){id, (uint32_t)len, (int32_t)*n - 1, -1};
    if (*n > 0)
        s->sym[*n - 1].next = (int32_t)*n;
    (*n)++;
    return LIPI_OK;
}

/* bpe_merge for a short word when merge_concat: the same merges in the
 * same order, found by scanning the pairs instead of through a heap. The
 * heap merges the entry of lowest (rank, position) whose pair is still
 * there or, if the pair changed since it was pushed, whose position now
 * holds a pair that makes the same token. The second never happens when
 * every merged token is its pair's strings joined: the pair at a position
 * only changes by one of its symbols growing, so the joined string there
 * only grows, and a token has one length. So both merge, each time, the
 * leftmost of the present pairs of lowest rank. Words are mostly a few
 * symbols, where a scan costs less than pushing and popping. */
#define BPE_SCAN_MAX 24

/* The pair ranks of a scanned word, indexed by the pair's left symbol.
 * With at most 65535 merges they are 16 bits, stored as rank - 32768 so
 * that SSE2's signed 16-bit min orders them (BPE_RANK16_NONE: no pair),
 * eight to a vector: finding the leftmost lowest rank then takes a few
 * instructions for the whole word, not a pass over its pairs. Else 32
 * bits, scanned one by one. */
#define BPE_RANK16_MAX 65535u
#define BPE_RANK16_NONE INT16_MAX

typedef struct {
    _Alignas(16) int16_t r16[BPE_SCAN_MAX];
    uint32_t r32[BPE_SCAN_MAX];
} bpe_scan_ranks;

/* The rank of pair i: `rank` if the pair merges, else none. */
static inline __attribute__((always_inline)) void scan_rank_set(bpe_scan_ranks *r, bool narrow,
                                                                 size_t i, bool merges,
                                                                 uint32_t rank)
{
    if (narrow)
        r->r16[i] = merges ? (int16_t)((int32_t)rank - 32768) : BPE_RANK16_NONE;
    else
        r->r32[i] = merges ? rank : UINT32_MAX;
}

/* The leftmost of the lowest ranks in r16[0..8 * nv) (nv of 1 .. 3), its
 * rank in *best; -1 when there is no pair. Entries past the word's pairs
 * hold BPE_RANK16_NONE. */
static inline __attribute__((always_inline)) int scan_min16(const int16_t *r16, size_t nv,
                                                            uint32_t *best)
{
#ifdef __SSE2__
    const __m128i *v = (const __m128i *)(const void *)r16;
    __m128i a = _mm_load_si128(v), b = a, c = a, m = a;
    if (nv > 1)
        m = _mm_min_epi16(m, b = _mm_load_si128(v + 1));
    if (nv > 2)
        m = _mm_min_epi16(m, c = _mm_load_si128(v + 2));
    /* The lowest of the eight lanes, into lane 0. */
    m = _mm_min_epi16(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_min_epi16(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    m = _mm_min_epi16(m, _mm_shufflelo_epi16(m, _MM_SHUFFLE(2, 3, 0, 1)));
    int16_t lo = (int16_t)_mm_cvtsi128_si32(m);
    if (lo == BPE_RANK16_NONE)
        return -1;
    m = _mm_set1_epi16(lo);
    /* Two mask bits a lane, lanes in index order: the lowest set bit is
     * the leftmost. */
    uint64_t at = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi16(a, m));
    if (nv > 1)
        at |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi16(b, m)) << 16;
    if (nv > 2)
        at |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi16(c, m)) << 32;
    *best = (uint32_t)((int32_t)lo + 32768);
    return __builtin_ctzll(at) / 2;
#else
    return lipi_enc_scan_min16_ref(r16, nv, best);
#endif
}

int lipi_enc_scan_min16(const int16_t *r16, size_t nv, uint32_t *best)
{
    return scan_min16(r16, nv, best);
}

int lipi_enc_scan_min16_ref(const int16_t *r16, size_t nv, uint32_t *best)
{
    int at = -1;
    for (size_t i = 0; i < 8 * nv; i++)
        if (r16[i] != BPE_RANK16_NONE && (at < 0 || r16[i] < r16[at]))
            at = (int)i;
    if (at >= 0)
        *best = (uint32_t)((int32_t)r16[at] + 32768);
    return at;
}

/* bpe_merge for a short word when merge_concat: the same merges in the
 * same order, found by scanning the pairs instead of through a heap. The
 * heap merges the entry of lowest (rank, position) whose pair is still
 * there or, if the pair changed since it was pushed, whose position now
 * holds a pair that makes the same token. The second never happens when
 * every merged token is its pair's strings joined: the pair at a position
 * only changes by one of its symbols growing, so the joined string there
 * only grows, and a token has one length. So both merge, each time, the
 * leftmost of the present pairs of lowest rank. Words are mostly a few
 * symbols, where a scan costs less than pushing and popping. narrow: the
 * ranks fit 16 bits (a constant where this is inlined). */
static inline __attribute__((always_inline)) void bpe_merge_scan(lipi_session *s, size_t n,
                                                                 bool narrow)
{
    const lipi_encoder *e = s->enc;
    bpe_sym *sym = s->sym;
    const uint32_t none = UINT32_MAX;
    const pair_ctx pc = pair_ctx_of(s);
    bpe_scan_ranks r;
    size_t nv = (n + 7) / 8; /* vectors of 16-bit ranks in use */
    uint32_t rank = 0;
    if (narrow) /* a fixed count: a few vector stores */
        for (size_t i = 0; i < BPE_SCAN_MAX; i++)
            r.r16[i] = BPE_RANK16_NONE;
    for (size_t i = 0; i + 1 < n; i++) {
        bool merges = pair_rank(&pc, sym[i].id, sym[i + 1].id, &rank);
        scan_rank_set(&r, narrow, i, merges, rank);
    }
    scan_rank_set(&r, narrow, n - 1, false, 0);
    for (;;) {
        /* A symbol merged into its left neighbour has rank none, so the
         * array in index order is the list in order, scanned without
         * following its links. */
        uint32_t best = none;
        int32_t at = -1;
        if (narrow) {
            at = scan_min16(r.r16, nv, &best);
        } else {
            for (size_t i = 0; i + 1 < n; i++)
                if (r.r32[i] < best) {
                    best = r.r32[i];
                    at = (int32_t)i;
                }
        }
        if (at < 0)
            return;
        bpe_sym *a = &sym[at], *b = &sym[a->next];
        scan_rank_set(&r, narrow, (size_t)a->next, false, 0);
        a->id = e->merge_result[best];
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0)
            sym[a->next].prev = at;
        if (a->prev >= 0) {
            bool merges = pair_rank(&pc, sym[a->prev].id, a->id, &rank);
            scan_rank_set(&r, narrow, (size_t)a->prev, merges, rank);
        }
        bool merges = a->next >= 0 && pair_rank(&pc, a->id, sym[a->next].id, &rank);
        scan_rank_set(&r, narrow, (size_t)at, merges, rank);
    }
}

/* Merges the symbols s->sym[0..n) by rank: the lowest-ranked adjacent pair
 * first, the leftmost among equal ranks. An entry whose symbols changed
 * since it was pushed is stale; Hugging Face still merges it when the new
 * pair happens to merge into the same token, so only then is the table
 * asked again. */
static inline __attribute__((always_inline)) lipi_status bpe_merge(lipi_session *s, size_t n)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    size_t hn = 0;
    bpe_sym *sym = s->sym;
    if (n < 2)
        return LIPI_OK;
    if (e->pair_bits && !s->pair_cache) {
        s->pair_cache = lipi_reallocarray(NULL, LIPI_ENC_PAIR_CACHE, sizeof *s->pair_cache);
        if (!s->pair_cache)
            return LIPI_ENOMEM;
        memset(s->pair_cache, 0xff, LIPI_ENC_PAIR_CACHE * sizeof *s->pair_cache);
    }
    if (e->merge_concat && n <= BPE_SCAN_MAX) {
        if (e->m->n_merges <= BPE_RANK16_MAX)
            bpe_merge_scan(s, n, true);
        else
            bpe_merge_scan(s, n, false);
        return LIPI_OK;
    }
    /* At most n - 1 initial pairs and two new ones per merge (n - 1 merges). */
    TRY(ENC_GROW(s->heap, s->heap_cap, 3 * n));
    /* Fetch the table slots of all first pairs at once (a compact table's
     * pairs are mostly in the pair cache). */
    for (size_t i = 0; !e->pair_bits && i + 1 < n; i++)
        __builtin_prefetch(pair_slot_of(e, sym[i].id, sym[i + 1].id));
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t rank;
        if (pair_get(s, sym[i].id, sym[i + 1].id, &rank))
            heap_push(s->heap, &hn, (bpe_cand){rank, (uint32_t)i, sym[i].id, sym[i + 1].id});
    }
    while (hn) {
        bpe_cand top = heap_pop(s->heap, &hn);
        bpe_sym *a = &sym[top.pos];
        if (a->len == 0 || a->next < 0)
            continue;
        bpe_sym *b = &sym[a->next];
        uint32_t rank, result = e->merge_result[top.rank];
        if (a->id != top.left || b->id != top.right) {
            if (!pair_get(s, a->id, b->id, &rank) || e->merge_result[rank] != result)
                continue;
        }
        a->id = result;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0)
            sym[a->next].prev = (int32_t)top.pos;
        /* Both new pairs' slots at once: two memory trips overlap. */
        if (!e->pair_bits && a->prev >= 0)
            __builtin_prefetch(pair_slot_of(e, sym[a->prev].id, a->id));
        if (!e->pair_bits && a->next >= 0)
            __builtin_prefetch(pair_slot_of(e, a->id, sym[a->next].id));
        if (a->prev >= 0 && pair_get(s, sym[a->prev].id, a->id, &rank))
            heap_push(s->heap, &hn, (bpe_cand){rank, (uint32_t)a->prev, sym[a->prev].id, a->id});
        if (a->next >= 0 && pair_get(s, a->id, sym[a->next].id, &rank))
            heap_push(s->heap, &hn, (bpe_cand){rank, top.pos, a->id, sym[a->next].id});
    }
done:
    return st;
}

/* Initial symbols of a word: one per character (or byte on raw bytes),
 * decorated with the prefix (not first) and suffix (last) for the vocabulary
 * lookup, then byte fallback or the unknown token for characters the
 * vocabulary lacks, exactly in Hugging Face's order (a pending unknown token
 * is only written when a known character or the end of the word comes). */
static inline __attribute__((always_inline)) lipi_status
bpe_symbols(lipi_session *s, const char *w, size_t n, size_t *count, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    size_t ns = 0;
    int64_t unk = -1;
    size_t unk_len = 0;

    if (e->raw_bytes) {
        for (size_t i = 0; i < n; i++)
            TRY(sym_push(s, &ns, e->byte_id[(unsigned char)w[i]], 1));
        *count = ns;
        return LIPI_OK;
    }
    size_t i = 0;
    /* Undecorated (SentencePiece's BPE): each char is looked up as it is,
     * up to the first the vocabulary lacks, which the loop below takes on. */
    if (!e->prefix_len && !e->suffix_len) {
        /* At most n symbols: room for all at once, each linked forward as
         * it is written and the last one's link cut after. */
        if (n > s->sym_cap)
            TRY(sym_grow(s, n));
        bpe_sym *sym = s->sym;
        const unsigned char *u = (const unsigned char *)w;
        const uint16_t *blk = e->char_blk;
        const int32_t *ids = e->char_blk_ids;
        while (blk && i < n) {
            size_t cl = enc_utf8_len(u[i]);
            if (cl > n - i)
                break;
            int64_t id;
            if (cl == 1)
                id = ids[(size_t)blk[u[i] >> 6] * 64 + (u[i] & 0x3F)];
            else if (cl == 2)
                id = ids[(size_t)blk[u[i] & 0x1F] * 64 + (u[i + 1] & 0x3F)];
            else if (cl == 3)
                id = ids[(size_t)blk[(u[i] & 0x0F) << 6 | (u[i + 1] & 0x3F)] * 64 +
                         (u[i + 2] & 0x3F)];
            else
                id = char_id(e, 0, enc_utf8_cp(w + i, cl));
            if (id < 0)
                break;
            sym[ns] = (bpe_sym){(uint32_t)id, (uint32_t)cl, (int32_t)ns - 1, (int32_t)ns + 1};
            ns++;
            i += cl;
        }
        if (ns)
            sym[ns - 1].next = -1;
    }
    while (i < n) {
        size_t cl = enc_utf8_len((unsigned char)w[i]);
        if (cl > n - i)
            cl = n - i;
        bool first = i == 0, last = i + cl == n;
        int v = (!first && e->prefix_len ? 1 : 0) | (last && e->suffix_len ? 2 : 0);
        int64_t id = char_id(e, v, enc_utf8_cp(w + i, cl));
        if (id >= 0) {
            if (unk >= 0) {
                TRY(sym_push(s, &ns, (uint32_t)unk, unk_len));
                unk = -1;
            }
            TRY(sym_push(s, &ns, (uint32_t)id, cl));
            i += cl;
            continue;
        }
        if (e->m->opt.byte_fallback) {
            /* The looked-up string, decoration included, byte by byte. */
            s->word.len = 0;
            if (v & 1)
                TRY(lipi_buf_append(&s->word, e->prefix, e->prefix_len));
            TRY(lipi_buf_append(&s->word, w + i, cl));
            if (v & 2)
                TRY(lipi_buf_append(&s->word, e->suffix, e->suffix_len));
            bool all = true;
            for (size_t k = 0; k < s->word.len && all; k++)
                all = e->byte_fb[(unsigned char)s->word.p[k]] >= 0;
            if (all) {
                for (size_t k = 0; k < s->word.len; k++)
                    TRY(sym_push(s, &ns, (uint32_t)e->byte_fb[(unsigned char)s->word.p[k]], 1));
                i += cl;
                continue;
            }
        }
        if (e->unk_named) {
            if (e->unk_id < 0) {
                st = no_unk(e, err);
                goto done;
            }
            if (unk >= 0 && e->fuse_unk) {
                unk_len += cl;
            } else {
                if (unk >= 0)
                    TRY(sym_push(s, &ns, (uint32_t)unk, unk_len));
                unk = e->unk_id;
                unk_len = cl;
            }
        }
        i += cl;
    }
    if (unk >= 0)
        TRY(sym_push(s, &ns, (uint32_t)unk, unk_len));
    *count = ns;
done:
    return st;
}

lipi_status lipi_enc_pair_ready(lipi_session *s)
{
    if (s->enc->pair_bits && !s->pair_cache) {
        s->pair_cache = lipi_reallocarray(NULL, LIPI_ENC_PAIR_CACHE, sizeof *s->pair_cache);
        if (!s->pair_cache)
            return LIPI_ENOMEM;
        memset(s->pair_cache, 0xff, LIPI_ENC_PAIR_CACHE * sizeof *s->pair_cache);
    }
    return LIPI_OK;
}

bool lipi_enc_pair_rank(lipi_session *s, uint32_t a, uint32_t b, uint32_t *rank)
{
    return pair_get(s, a, b, rank);
}

/* A long word, part by part (cut by bpe_long.c where no merge can join the
 * two sides): the merge loop's ids without its 32 bytes a character for the
 * whole word. Out of line, so bpe_word stays as it was for short words. */
static __attribute__((noinline)) lipi_status bpe_long_word(lipi_session *s, const char *w,
                                                           size_t n, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    for (size_t a = 0, b; a < n; a = b) {
        size_t ns = 0;
        TRY(lipi_enc_bpe_part(s, w, n, a, &b));
        bool done = false;
        if (b - a >= s->enc->bpe_compact_min)
            TRY(lipi_enc_bpe_compact(s, w + a, b - a, a, n, &done));
        if (done)
            continue;
        TRY(bpe_symbols(s, w + a, b - a, &ns, err));
        TRY(bpe_merge(s, ns));
        size_t off = a;
        for (int32_t i = ns ? 0 : -1; i >= 0; i = s->sym[i].next) {
            size_t x = off < b ? off : b;
            off += s->sym[i].len;
            TRY(ptok_push(s, s->sym[i].id, x, off < b ? off : b, false));
        }
    }
done:
    return st;
}

static lipi_status bpe_word(lipi_session *s, const char *w, size_t n, uint64_t h,
                           lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st = LIPI_OK;
    size_t ns = 0;
    uint32_t id;

    /* On a tiktoken rank file, backtracking's first step is the longest
     * token at the start of the word: the whole word when it is one, without
     * a lookup here (a miss in the whole-word table costs a trip to memory).
     * Hugging Face's ignore_merges also takes tokens no merge makes, which
     * backtracking on merges does not know: look first. */
    if (e->m->opt.ignore_merges && !e->bt_words &&
        (e->raw_bytes ? lipi_enc_raw_find(e, w, n, h, &id)
                      : lipi_vocab_find(&e->m->vocab, w, n, &id)))
        return ptok_push(s, id, 0, n, false);
    if (e->bt) {
        size_t count;
        TRY(lipi_enc_bt_word(s, w, n, &count));
        s->ptok_n = count;
        if (count)
            return LIPI_OK;
        s->ptok_n = 0;
    }
    /* Built by lipi_encoder_new unless backtracking encodes every word:
     * the call (and its lock) only for the first word that needs them. */
    if (!atomic_load_explicit(&e->pairs_ready, memory_order_acquire))
        TRY(lipi_enc_bpe_pairs(e));
    if (n >= e->bpe_long_min && e->merge_concat && !e->raw_bytes)
        return bpe_long_word(s, w, n, err);
    TRY(bpe_symbols(s, w, n, &ns, err));
    TRY(bpe_merge(s, ns));
    /* Offsets add up the lengths of the symbols left, as Hugging Face does
     * (byte fallback of a decorated character can run past the word: clamp).
     * At most ns tokens: room for all first, then a plain loop. */
    if (ns == 0)
        return LIPI_OK; /* (s->ptok may still be NULL: no offset from it) */
    if (s->ptok_n + ns > s->ptok_cap)
        TRY(ENC_GROW(s->ptok, s->ptok_cap, s->ptok_n + ns));
    enc_ptok *out = s->ptok + s->ptok_n;
    const bpe_sym *sym = s->sym;
    size_t off = 0, nt = 0;
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        size_t a = off < n ? off : n;
        off += sym[i].len;
        size_t b = off < n ? off : n;
        out[nt++] = (enc_ptok){sym[i].id, (uint32_t)a, (uint32_t)b};
    }
    s->ptok_n += nt;
done:
    return st;
}

/* ======================================================================== */
/* WordPiece                                                                 */
/* ======================================================================== */

static lipi_status wordpiece_word(lipi_session *s, const char *w, size_t n, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)w[i] & 0xC0) != 0x80;
    if (chars <= e->m->opt.max_input_chars_per_word) {
        size_t start = 0, first = s->ptok_n;
        while (start < n) {
            int32_t id = -1;
            size_t l = e->trie32.size ? lipi_datrie32_longest(start == 0 ? &e->trie32
                                                                          : &e->trie32_cont,
                                                              w + start, n - start, &id)
                                      : lipi_datrie_longest(start == 0 ? &e->trie : &e->trie_cont,
                                                            w + start, n - start, &id);
            if (l == 0) {
                s->ptok_n = first;
                goto unknown;
            }
            lipi_status st = ptok_push(s, (uint32_t)id, start, start + l, false);
            if (st != LIPI_OK)
                return st;
            start += l;
        }
        return LIPI_OK;
    }
unknown:
    if (e->unk_id < 0)
        return no_unk(e, err);
    return ptok_push(s, (uint32_t)e->unk_id, 0, n, false);
}

/* ======================================================================== */
/* Unigram                                                                   */
/* ======================================================================== */

/* Adds the tokens of the fused run w[a..b): its own id when the run is a
 * token, else its bytes as <0xNN> tokens, else the unknown token. */
static lipi_status unigram_run(lipi_session *s, const char *w, size_t a, size_t b, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    uint32_t id;
    if (lipi_vocab_find(&e->m->vocab, w + a, b - a, &id))
        return ptok_push(s, id, a, b, false);
    if (e->m->opt.byte_fallback) {
        bool all = true;
        for (size_t k = a; k < b && all; k++)
            all = e->byte_fb[(unsigned char)w[k]] >= 0;
        if (all) {
            for (size_t k = a; k < b; k++) {
                lipi_status st =
                    ptok_push(s, (uint32_t)e->byte_fb[(unsigned char)w[k]], a, b, false);
                if (st != LIPI_OK)
                    return st;
            }
            return LIPI_OK;
        }
    }
    if (e->unk_id < 0)
        return no_unk(e, err);
    return ptok_push(s, (uint32_t)e->unk_id, a, b, true);
}

/* After unigram_run: a cached word's float32 score is replayed from its
 * tokens (emit_piece), which an unknown run allows only as the unknown
 * token with its text (one unknown node per character). */
static void unigram_run_replayable(lipi_session *s)
{
    const enc_ptok *t = &s->ptok[s->ptok_n - 1];
    if ((int64_t)t->id != s->enc->unk_id || !(t->end & ENC_PTOK_TEXT) ||
        (s->ptok_n >= 2 && t[-1].start == t->start))
        s->f32_cacheable = false;
}

/* The Viterbi over w[0..n) into lat (lipi_lattice_best_start done):
 * each node is settled as the walk finds it, the lattice is not kept.
 * Nodes start at char boundaries, which are all reached (each char has a
 * one-char piece or the unknown node), so no offer checks its start. The
 * lattice's arrays and flags stay in locals (a store to a score could
 * otherwise be the margin's), the compact trie's walk carries the unit it
 * stands on (a child's unit is its state's), and f32 is a constant in each
 * of the two copies unigram_fill calls. LIPI_EINVAL when a char needs the
 * unknown token and the model has none. */
static inline __attribute__((always_inline)) lipi_status
unigram_viterbi(const lipi_encoder *e, lipi_lattice *lat, const char *w, size_t n, bool f32)
{
    const uint32_t *unit = e->trie32.unit; /* NULL: no compact trie */
    const int32_t *tval = e->trie32.value;
    const double *scores = e->m->scores;
    double *ps = lat->pos_score, margin = lat->f32_margin;
    int64_t *pn = lat->pos_node, unk = lat->f32_unk;
    lipi_lattice_node *win = lat->pos_win;
#define UNIGRAM_OFFER(len_, id_, score_)                                                        \
    do {                                                                                       \
        size_t end_ = pos + (len_);                                                            \
        if (lipi_lattice_relax(ps, pn, f32, unk, &margin, from, end_, (id_), (score_))) {      \
            pn[end_] = (int64_t)end_;                                                          \
            win[end_] = (lipi_lattice_node){(uint32_t)pos, (uint32_t)(len_), (id_), (score_)}; \
        }                                                                                      \
    } while (0)
    for (size_t pos = 0; pos < n;) {
        size_t cl = enc_utf8_len((unsigned char)w[pos]);
        bool single = false;
        double from = ps[pos];
        if (cl > n - pos)
            cl = n - pos;
        if (unit) {
            uint32_t u = unit[0];
            for (size_t k = pos; k < n; k++) {
                unsigned c = (unsigned char)w[k];
                uint32_t at = (u >> 10) + c + 1, v = unit[at];
                if ((v & 0x1ff) != (0x100u | c))
                    break;
                int32_t id;
                if ((v & 0x200) && (id = tval[at]) >= 0) {
                    UNIGRAM_OFFER(k + 1 - pos, (uint32_t)id, scores[id]);
                    single |= k + 1 - pos == cl;
                }
                u = v;
            }
        } else if (e->trie.size) {
            int32_t state = 0;
            for (size_t k = pos; k < n; k++) {
                state = lipi_datrie_step(&e->trie, state, (unsigned char)w[k]);
                if (state < 0)
                    break;
                int32_t id = lipi_datrie_final(&e->trie, state) ? e->trie.value[state] : -1;
                if (id >= 0) {
                    UNIGRAM_OFFER(k + 1 - pos, (uint32_t)id, scores[id]);
                    single |= k + 1 - pos == cl;
                }
            }
        }
        if (!single) {
            if (e->unk_id < 0)
                return LIPI_EINVAL;
            UNIGRAM_OFFER(cl, (uint32_t)e->unk_id, e->unk_score);
        }
        pos += cl;
    }
#undef UNIGRAM_OFFER
    lat->f32_margin = margin;
    return LIPI_OK;
}

/* A node that unigram_viterbi_units settled holds its piece's trie unit
 * (UNI_AT | unit) in place of its id, which costs another memory trip;
 * unigram_node_id puts the ids in for the nodes that are read. */
#define UNI_AT 0x80000000u

/* unigram_viterbi for f32 over e->uni: a piece's score comes with its
 * unit, and the step is lipi_lattice_relax's f32 arithmetic written out
 * (the piece is not the unknown token: that one's NaN takes the general
 * step). The same choices and margin as unigram_viterbi, and after
 * unigram_node_id the same nodes: a node's score is its float score
 * widened, which is scores[id] (the model's scores are floats). */
static lipi_status unigram_viterbi_units(const lipi_encoder *e, lipi_lattice *lat, const char *w,
                                         size_t n)
{
    const uint64_t *uni = e->uni;
    const int32_t *tval = e->trie32.value;
    const double *scores = e->m->scores;
    double *ps = lat->pos_score, margin = lat->f32_margin;
    int64_t *pn = lat->pos_node, unk = lat->f32_unk;
    lipi_lattice_node *win = lat->pos_win;
    for (size_t pos = 0; pos < n;) {
        size_t cl = enc_utf8_len((unsigned char)w[pos]);
        bool single = false;
        double from = ps[pos];
        float f = (float)from;
        if (cl > n - pos)
            cl = n - pos;
        uint64_t u = uni[0];
        for (size_t k = pos; k < n; k++) {
            unsigned c = (unsigned char)w[k];
            size_t at = ((uint32_t)u >> 10) + c + 1;
            uint64_t v = uni[at];
            u = v;
            if (((uint32_t)v & 0x1ff) != (0x100u | c))
                break;
            if (!(v & 0x200))
                continue;
            uint32_t bits = (uint32_t)(v >> 32);
            float score;
            size_t len = k + 1 - pos, end = k + 1;
            memcpy(&score, &bits, sizeof score);
            single |= len == cl;
            if (__builtin_expect(score != score, 0)) {
                uint32_t id = (uint32_t)tval[at];
                if (lipi_lattice_relax(ps, pn, true, unk, &margin, from, end, id, scores[id])) {
                    pn[end] = (int64_t)end;
                    win[end] = (lipi_lattice_node){(uint32_t)pos, (uint32_t)len, id, scores[id]};
                }
                continue;
            }
            double cand = (double)f + (double)score;
            if (pn[end] != -1) {
                double d = fabs(cand - ps[end]);
                if (d < margin)
                    margin = d;
                if (!(cand > ps[end]))
                    continue;
            }
            ps[end] = (double)(float)cand;
            pn[end] = (int64_t)end;
            win[end] =
                (lipi_lattice_node){(uint32_t)pos, (uint32_t)len, UNI_AT | (uint32_t)at, (double)score};
        }
        if (!single) {
            if (e->unk_id < 0)
                return LIPI_EINVAL;
            size_t end = pos + cl;
            if (lipi_lattice_relax(ps, pn, true, unk, &margin, from, end, (uint32_t)e->unk_id,
                                   e->unk_score)) {
                pn[end] = (int64_t)end;
                win[end] =
                    (lipi_lattice_node){(uint32_t)pos, (uint32_t)cl, (uint32_t)e->unk_id, e->unk_score};
            }
        }
        pos += cl;
    }
    lat->f32_margin = margin;
    return LIPI_OK;
}

/* Offers the nodes of w[0..n) to the lattice (over n bytes), each settled
 * as the trie walk finds it; unknown characters get unknown nodes. */
static lipi_status unigram_fill(lipi_session *s, const char *w, size_t n, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_lattice *lat = &s->lattice;
    lipi_status st = e->uni && lat->f32 ? unigram_viterbi_units(e, lat, w, n)
                     : lat->f32         ? unigram_viterbi(e, lat, w, n, true)
                                        : unigram_viterbi(e, lat, w, n, false);
    return st == LIPI_OK ? LIPI_OK : no_unk(e, err);
}

/* A settled node's id (see UNI_AT). */
static inline uint32_t unigram_node_id(const lipi_encoder *e, uint32_t id)
{
    return e->uni && (id & UNI_AT) ? (uint32_t)e->trie32.value[id & ~UNI_AT] : id;
}

/* Pushes the tokens of the lattice's path (nodes[0..n_nodes)), which covers
 * w[base .. end): runs of unknown nodes become one string (fuse_unk). */
static lipi_status unigram_emit(lipi_session *s, const char *w, size_t base, size_t end,
                                lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    const lipi_lattice *lat = &s->lattice;
    lipi_status st = LIPI_OK;
    size_t run_start = 0;
    bool in_run = false;
    for (size_t k = 0; k < lat->path_len; k++) {
        const lipi_lattice_node *nd = &lat->nodes[lat->path[k]];
        size_t pos = base + nd->pos;
        if ((int64_t)nd->id == e->unk_id) {
            if (!in_run) {
                run_start = pos;
                in_run = true;
            }
            continue;
        }
        if (in_run) {
            TRY(unigram_run(s, w, run_start, pos, err));
            unigram_run_replayable(s);
            in_run = false;
        }
        TRY(ptok_push(s, nd->id, pos, pos + nd->len, false));
    }
    if (in_run) {
        TRY(unigram_run(s, w, run_start, end, err));
        unigram_run_replayable(s);
    }
done:
    return st;
}

/* The tokens of the best path to p of a window at base (unigram_fill
 * done; p reached): straight from each position's winner, back from p,
 * when no unknown node is on the path, else through the lattice's path
 * and unigram_emit, which fuse unknown runs. */
static lipi_status unigram_emit_to(lipi_session *s, const char *w, size_t base, size_t p,
                                   lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_lattice *lat = &s->lattice;
    const lipi_lattice_node *win = lat->pos_win;
    size_t count = 0;
    bool unk = false, found;
    /* An unknown node holds its id, never a unit (unigram_units gives the
     * unknown piece a NaN, which takes the general step): no id lookup. */
    for (size_t q = p; q > 0; q = win[q].pos) {
        count++;
        unk |= (int64_t)win[q].id == e->unk_id;
    }
    if (unk) {
        lipi_status st = lipi_lattice_best_to(lat, p, &found);
        for (size_t k = 0; st == LIPI_OK && k < lat->n_nodes; k++)
            lat->nodes[k].id = unigram_node_id(e, lat->nodes[k].id);
        return st == LIPI_OK ? unigram_emit(s, w, base, base + p, err) : st;
    }
    lipi_status st = ENC_GROW(s->ptok, s->ptok_cap, s->ptok_n + count);
    if (st != LIPI_OK)
        return st;
    enc_ptok *out = s->ptok + s->ptok_n;
    for (size_t q = p, k = count; q > 0; q = win[q].pos)
        out[--k] = (enc_ptok){unigram_node_id(e, win[q].id), (uint32_t)(base + win[q].pos),
                              (uint32_t)(base + q)};
    s->ptok_n += count;
    return LIPI_OK;
}

/* Words longer than this are encoded a window at a time (below). The
 * lattice is ~40 bytes a byte: 2.6 MB for 64 KiB stays in cache, and the
 * walks back over it are cheap. With 1 MiB windows (40 MB) laser_100k took
 * 1.16 s on 20 MB of 'a' and 0.75 s on 'क', against 0.8 and 0.37 s here
 * (whole `lipi encode`, with unigram_emit_to). */
#define UNI_WINDOW ((size_t)1 << 16)

/* A long word's lattice, a window at a time, with the ids of one lattice
 * over the whole word. The Viterbi over w[base .. X) (nodes that would end
 * after X left out) has every position's best score and node exactly as
 * the whole word's: a node ending at q <= X starts and ends inside. The
 * whole word's best path crosses X from some reached position in the last
 * `span` bytes before X (span: the longest node); when the best paths to
 * all of those pass through one position c, so does the whole word's, and
 * its part up to c is the best path to c. Those tokens are pushed, and
 * the next window starts at c from c's score, so every later score is
 * computed from the same numbers as in one lattice (and candidates that
 * did not pass through c never beat the path through c there either). A
 * c inside a run of unknown nodes moves back to the run's start, so that
 * runs are fused as in one lattice. No common position: the window grows.
 * Memory: the lattice's ~50 bytes a byte for a window, not the word (and
 * under lipi_encode_stream, the tokens of a window). */
static lipi_status unigram_long_word(lipi_session *s, const char *w, size_t n, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_lattice *lat = &s->lattice;
    lipi_status st = LIPI_OK;
    size_t base = 0, window = UNI_WINDOW, span = 4;
    double score = e->f32_viterbi ? (double)s->f32_run : 0.0;
    uint8_t *mark = NULL;
    for (size_t i = 0; i < e->m->vocab.n; i++) {
        size_t l = e->m->vocab.tok[i].len;
        if (l > span)
            span = l;
    }
    while (base < n) {
        size_t len = n - base < window ? n - base : window;
        lipi_lattice_reset(lat, len);
        lat->f32 = e->f32_viterbi;
        lat->start = (float)score;
        lat->start_d = score;
        lat->f32_unk = e->unk_id;
        TRY(lipi_lattice_best_start(lat));
        TRY(unigram_fill(s, w + base, len, err));
        if (base + len == n) {
            if (lat->pos_node[len] == -1) {
                st = no_unk(e, err);
                goto done;
            }
            TRY(unigram_emit_to(s, w, base, len, err));
            score = lat->pos_score[len];
            break;
        }
        /* The best path to len - 1 .. len - span + 1 and len marked, then
         * where each other one meets it. */
        lipi_free(mark);
        mark = lipi_calloc(len + 1, 1);
        if (!mark)
            TRY(LIPI_ENOMEM);
        size_t ref = len, c = len;
        while (ref > 0 && lat->pos_node[ref] == -1)
            ref--;
        for (size_t p = ref; p > 0; p = lat->pos_win[p].pos)
            mark[p] = 1;
        mark[0] = 1;
        c = ref;
        for (size_t q = len - 1; q + span > len && q > 0; q--) {
            if (lat->pos_node[q] == -1)
                continue;
            size_t p = q;
            while (!mark[p])
                p = lat->pos_win[p].pos;
            if (p < c)
                c = p;
        }
        /* Back to a position no unknown node ends at. */
        while (c > 0 && (int64_t)lat->pos_win[c].id == e->unk_id)
            c = lat->pos_win[c].pos;
        if (c == 0) {
            if (window > SIZE_MAX / 2)
                TRY(LIPI_ENOMEM);
            window *= 2;
            continue;
        }
        TRY(unigram_emit_to(s, w, base, c, err));
        /* Those tokens are final: a streamed text need not hold them. */
        TRY(lipi_enc_stream_ptok(s));
        score = lat->pos_score[c];
        base += c;
        window = UNI_WINDOW;
    }
    if (e->f32_viterbi)
        s->f32_run = (float)score;
    s->f32_cacheable = false;
done:
    lipi_free(mark);
    return st;
}

static lipi_status unigram_word(lipi_session *s, const char *w, size_t n, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_lattice *lat = &s->lattice;
    lipi_status st = LIPI_OK;

    if (n > UNI_WINDOW)
        return unigram_long_word(s, w, n, err);
    lipi_lattice_reset(lat, n);
    lat->f32 = e->f32_viterbi;
    lat->start = s->f32_run;
    lat->f32_unk = e->unk_id;
    /* Each node is settled as the walk finds it: the lattice is not kept. */
    TRY(lipi_lattice_best_start(lat));
    TRY(unigram_fill(s, w, n, err));
    /* The word's end is a char boundary, so it is reached: no path means
     * no unknown token (not possible here, but best_end says so). */
    if (lat->pos_node[n] == -1) {
        st = no_unk(e, err);
        goto done;
    }
    if (lat->f32) {
        s->f32_run = (float)lat->pos_score[n];
        /* The word's tokens may be cached, to be reused from another
         * starting score, when rounding there cannot change a choice: no
         * comparison closer than the rounding of the path's additions (half
         * an ulp of scores below 2 L, L * 2^-24, per byte of the word, which
         * bounds its nodes; a reuse starts below L and the word adds less
         * than L, as here). A run of unknown nodes must become the unknown
         * token (checked below): its score is replayed per character. */
        s->f32_cacheable = fabsf(lat->start) < ENC_F32_CACHE_LIMIT &&
                           fabsf(s->f32_run) < ENC_F32_CACHE_LIMIT &&
                           lat->f32_margin >
                               (double)(n + 2) * (double)ENC_F32_CACHE_LIMIT / 16777216.0;
    }
    TRY(unigram_emit_to(s, w, 0, n, err));
done:
    return st;
}

/* ======================================================================== */
/* WordLevel                                                                 */
/* ======================================================================== */

static lipi_status wordlevel_word(lipi_session *s, const char *w, size_t n, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    uint32_t id;
    if (lipi_vocab_find(&e->m->vocab, w, n, &id))
        return ptok_push(s, id, 0, n, false);
    if (e->unk_id < 0)
        return no_unk(e, err);
    return ptok_push(s, (uint32_t)e->unk_id, 0, n, false);
}

/* ======================================================================== */
/* Dispatch through the cache                                                */
/* ======================================================================== */


lipi_status lipi_enc_model(lipi_session *s, const char *text, size_t len, uint64_t h,
                           const enc_ptok **toks, size_t *n, lipi_error *err)
{
    const lipi_encoder *e = s->enc;
    lipi_status st;

    s->ptok_n = 0;
    *toks = s->ptok;
    *n = 0;
    if (len == 0)
        return LIPI_OK;
    if (len > UINT32_MAX / 2)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "a piece of %zu bytes is longer than the 2 GiB lipi handles", len);
    switch (e->type) {
    case LIPI_MODEL_BPE: st = bpe_word(s, text, len, h, err); break;
    case LIPI_MODEL_WORDPIECE: st = wordpiece_word(s, text, len, err); break;
    case LIPI_MODEL_UNIGRAM: st = unigram_word(s, text, len, err); break;
    case LIPI_MODEL_WORDLEVEL: st = wordlevel_word(s, text, len, err); break;
    default: st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "the tokenizer has no model");
    }
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    if (st != LIPI_OK)
        return st;
    /* Longer words are rare and would crowd the cache out. */
    if (len <= LIPI_ENC_CACHE_MAX_KEY && (!e->f32_viterbi || s->f32_cacheable))
        lipi_enc_cache_put(s, text, len, h);
    *toks = s->ptok;
    *n = s->ptok_n;
    return LIPI_OK;
}

/* BPE trainer over unique words with 64-bit counts.
 *
 * Data layout (everything indexed by small integers, no per-occurrence
 * allocation):
 *   words   all symbol ids in one uint32 array; a 40-byte record per word
 *           (count, where its symbols are, current length, cluster data),
 *           so a visit costs about two cache misses. Merges rewrite a word
 *           in place.
 *   tokens  id -> bytes (and, for byte units, the GPT-2 alphabet string that
 *           is its identity in tokenizer.json), length in base units.
 *   pairs   (left, right) -> pair record through an open-addressing table
 *           keyed by the two ids; a record holds the pair's count and the
 *           words it may occur in, as a list of 32-byte chunks from a pool.
 *           Lists only grow (stale entries are skipped when a merge scans
 *           them) and go back to the pool when the count drops to zero.
 *   heap    max-heap of (count, pair) with lazy deletion: counts of old
 *           pairs only fall, so a popped entry whose count is stale is
 *           pushed again with the current count; pairs whose count rose
 *           (they contain the new token) are pushed after each merge.
 *
 * A merge scans only the words in its pair's list. Per word, the pairs that
 * touch a merged position disappear and the pairs that touch a new token
 * appear; every other pair of the word keeps its symbols, position and
 * validity, so only those two sets change the counts. The changes of all
 * words are first summed per pair in a small table that stays in cache, then
 * applied to the big pair table once per distinct pair.
 *
 * Grapheme guard: for words whose clusters are not all single units, a
 * bitmap marks the base units where a cluster starts. An occurrence of a
 * pair covering units [s, e) is valid if [s, e) lies inside one cluster
 * (no start in (s, e)) or covers whole clusters (starts at s and e).
 * Training runs in two phases: first only merges inside clusters count, so
 * every cluster seen at least min_frequency times is built from its code
 * points (or bytes) by the lowest-ranked merges; then the pair counts are
 * rebuilt and merges of whole clusters (and what is left inside clusters)
 * follow. In the first phase a pair is merged only while none of its
 * occurrences straddles a cluster edge (virama + ya is inside "ক্য" but
 * not inside "অ্যা"): a BPE encoder applies a merge wherever the pair
 * occurs, so like this it builds each such cluster exactly as training did
 * before any merge across clusters can take part of it. Encoding text whose
 * clusters were all seen in training then never puts a token boundary
 * inside a cluster. */
#include "trainer/trainer.h"
#include "trainer/balance_impl.h"
#include "trainer/front_impl.h"

#include "tokenizer/base.h"
#include "tokenizer/base_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NONE UINT32_MAX
#define NO_GUARD SIZE_MAX

void lipi_bpe_options_default(lipi_bpe_options *opt)
{
    memset(opt, 0, sizeof *opt);
    lipi_train_common_default(&opt->common);
    opt->units = LIPI_UNITS_CHAR;
    opt->min_frequency = 2;
}

/* ======================================================================== */
/* The trained model                                                         */
/* ======================================================================== */

struct lipi_bpe_model {
    lipi_units units;
    bool byte_fallback;
    int64_t unk_id;
    size_t n_special;
    size_t n_tokens;
    char *raw;           /* token bytes, concatenated */
    size_t *raw_off;     /* n_tokens + 1 */
    char *vstr;          /* tokenizer.json strings (byte units), else NULL */
    size_t *vstr_off;    /* n_tokens + 1 */
    size_t n_merges;
    uint32_t (*merges)[3]; /* left, right, result */
    uint64_t *merge_count;
};

void lipi_bpe_model_free(lipi_bpe_model *m)
{
    if (!m)
        return;
    lipi_free(m->raw);
    lipi_free(m->raw_off);
    lipi_free(m->vstr);
    lipi_free(m->vstr_off);
    lipi_free(m->merges);
    lipi_free(m->merge_count);
    lipi_free(m);
}

lipi_units lipi_bpe_model_units(const lipi_bpe_model *m)
{
    return m->units;
}

size_t lipi_bpe_model_vocab_size(const lipi_bpe_model *m)
{
    return m->n_tokens;
}

const char *lipi_bpe_model_token_bytes(const lipi_bpe_model *m, uint32_t id, size_t *len)
{
    if (id >= m->n_tokens)
        return NULL;
    *len = m->raw_off[id + 1] - m->raw_off[id];
    return m->raw + m->raw_off[id];
}

const char *lipi_bpe_model_token(const lipi_bpe_model *m, uint32_t id, size_t *len)
{
    if (!m->vstr)
        return lipi_bpe_model_token_bytes(m, id, len);
    if (id >= m->n_tokens)
        return NULL;
    *len = m->vstr_off[id + 1] - m->vstr_off[id];
    return m->vstr + m->vstr_off[id];
}

size_t lipi_bpe_model_merge_count(const lipi_bpe_model *m)
{
    return m->n_merges;
}

void lipi_bpe_model_get_merge(const lipi_bpe_model *m, size_t rank, uint32_t *left,
                              uint32_t *right, uint32_t *result, uint64_t *count)
{
    LIPI_ASSERT(rank < m->n_merges);
    if (left)
        *left = m->merges[rank][0];
    if (right)
        *right = m->merges[rank][1];
    if (result)
        *result = m->merges[rank][2];
    if (count)
        *count = m->merge_count[rank];
}

/* ======================================================================== */
/* Big arrays                                                                */
/* ======================================================================== */

/* lipi_grow for the big arrays: a new block gets the huge-page hint before
 * the old contents are copied in (realloc would copy first, one page fault
 * per 4 KiB of the copy). */
static lipi_status big_grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return LIPI_OK;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / size)
            return LIPI_ENOMEM;
        ncap *= 2;
    }
    char *np = lipi_malloc(ncap * size);
    if (!np)
        return LIPI_ENOMEM;
    lipi_huge_pages(np, ncap * size);
    if (*cap)
        memcpy(np, *p, *cap * size);
    lipi_free(*p);
    *p = np;
    *cap = ncap;
    return LIPI_OK;
}

/* An array of n elements of `size` bytes, zeroed if `zero`. NULL on overflow
 * or out of memory. */
static void *big_alloc(size_t n, size_t size, bool zero)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = lipi_malloc(n * size);
    if (p) {
        lipi_huge_pages(p, n * size);
        if (zero)
            memset(p, 0, n * size);
    }
    return p;
}

/* ======================================================================== */
/* Training state                                                            */
/* ======================================================================== */

enum { CHUNK_WORDS = 7 };

/* A list's last chunk has next = TAIL_MARK + (words it holds). */
#define TAIL_MARK 0xFFFFFFF0u

typedef struct {
    uint32_t next;
    uint32_t w[CHUNK_WORDS];
} chunk;

typedef struct {
    uint64_t count;
    uint64_t bad;        /* first guard phase: occurrences across a cluster edge */
    uint32_t left, right;
    uint32_t head, tail; /* word-list chunks, NONE when empty */
} pair_rec;

typedef struct {
    uint64_t count;
    size_t off;      /* first symbol in sym */
    size_t goff;     /* first bit in gbits; NO_GUARD: every cluster is one unit */
    uint32_t len;    /* current number of symbols */
    uint32_t units;  /* length in base units */
    uint32_t stamp;  /* merge number of the last visit */
} word_rec;

/* A change of a pair count found while rewriting words: n occurrences of
 * pair `key` vanish (removals) or appear in word w (additions). w = NONE:
 * one occurrence across a cluster edge (pair_rec.bad). */
typedef struct {
    uint64_t key, n;
    uint32_t w;
} delta;

/* The deltas found by one thread during one merge. */
typedef struct {
    delta *rem, *add;
    size_t n_rem, rem_cap, n_add, add_cap;
} delta_buf;

/* Per-merge sum of the deltas of one pair. */
typedef struct {
    uint64_t key, n, bad;
    uint32_t pair;
} agg_slot;

/* Where token t's sum is this epoch: agg[slot] if epoch is current. */
typedef struct {
    uint32_t epoch, slot;
} agg_ref;

/* A slot of the pair table: the high 32 bits of the pair's hash, then its
 * id; PSLOT_EMPTY when free. The tag settles almost every probe without
 * touching the pair record. */
typedef uint64_t pair_slot;
#define PSLOT_EMPTY UINT64_MAX

/* The pair's token ids and the first bytes of its left token ride along,
 * so that comparing two entries seldom leaves the heap. */
typedef struct {
    uint64_t count;
    uint64_t left_prefix; /* prefix[left] */
    uint32_t pair, left, right;
} heap_ent;

typedef struct {
    const lipi_bpe_options *opt;
    bool byte_units, guard;
    size_t max_len;

    /* tokens */
    lipi_buf raw, vstr;  /* vstr only for byte units */
    size_t *raw_off, *vstr_off;
    uint32_t *ulen;      /* length in base units */
    uint64_t *prefix;    /* first 8 bytes, big-endian, zero-padded: orders most ties */
    size_t n_tok, tok_cap;
    uint32_t *tmap;      /* open addressing on the vocabulary string: id, NONE empty */
    size_t tmap_cap;
    uint32_t first_bf;   /* id of <0x00>, NONE without byte fallback */
    size_t n_special;

    /* words */
    size_t n_words;
    word_rec *words;
    uint32_t *sym;
    uint8_t *gbits;      /* cluster starts, a bit per base unit */

    /* pairs */
    pair_rec *pairs;
    size_t n_pairs, pairs_cap;
    pair_slot *pslots;
    size_t pcap;
    unsigned pshift;
    uint64_t *forbidden; /* keys of pairs whose merge would give a byte-fallback token */
    size_t n_forbidden, forbidden_cap;
    bool clusters_only;  /* phase 1 of the guard: only merges inside a cluster */
    uint64_t min_count;  /* rarer pairs never need a heap entry */
    uint64_t floor;      /* >= min_count: every mergeable pair counted this
                          * often has a heap entry, rarer ones wait (see refill) */
    uint64_t *scratch;   /* counts, for choosing the floor */
    size_t scratch_cap;
    chunk *chunks;
    size_t n_chunks, chunks_cap;
    uint32_t free_chunk;

    heap_ent *heap;
    size_t heap_n, heap_cap;
    uint32_t merge_no;

    /* pair count changes of the current merge: d[t] is share t's (the
     * words w with w % n_threads == t); n_active of them hold this merge's */
    delta_buf *d;
    size_t n_threads, n_active;
    lipi_thread_pool *pool; /* n_threads of them, NULL when running alone */
    uint32_t job_x, job_y, job_z;
    size_t job_nw;
    agg_slot *agg;       /* this epoch's sums, in first-use order */
    size_t n_used, agg_cap;
    uint32_t agg_epoch;
    agg_ref *agg_left;   /* by token id: the sum of pair (t, x) or (t, z) */
    agg_ref *agg_right;  /* ... of pair (y, t) or (z, t) */
    size_t ref_cap;
    agg_ref agg_xy;      /* ... of pair (x, y) itself */

    /* the word list of the current merge */
    uint32_t *wl;
    size_t wl_cap;

    /* result */
    uint32_t (*merges)[3];
    uint64_t *merge_count;
    size_t n_merges, merges_cap;

    struct bpe_parity *par; /* parity-aware selection, NULL without a balance */
} bpe;

static void bpe_free(bpe *b)
{
    lipi_buf_free(&b->raw);
    lipi_buf_free(&b->vstr);
    lipi_free(b->raw_off);
    lipi_free(b->vstr_off);
    lipi_free(b->ulen);
    lipi_free(b->prefix);
    lipi_free(b->tmap);
    lipi_free(b->sym);
    lipi_free(b->words);
    lipi_free(b->gbits);
    lipi_free(b->pairs);
    lipi_free(b->pslots);
    lipi_free(b->chunks);
    lipi_free(b->heap);
    lipi_free(b->scratch);
    for (size_t t = 0; b->d && t < b->n_threads; t++) {
        lipi_free(b->d[t].rem);
        lipi_free(b->d[t].add);
    }
    lipi_free(b->d);
    lipi_free(b->agg);
    lipi_free(b->agg_left);
    lipi_free(b->agg_right);
    lipi_free(b->forbidden);
    lipi_free(b->wl);
    lipi_free(b->merges);
    lipi_free(b->merge_count);
}

/* ------------------------------------------------------------------------ */
/* GPT-2 byte alphabet                                                       */
/* ------------------------------------------------------------------------ */

/* The code point GPT-2's bytes_to_unicode gives byte `b`: printable Latin-1
 * bytes stand for themselves, the other 68 take U+0100.. in byte order. */
static uint32_t gpt2_char(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174))
            n++;
    return 256 + n;
}

typedef struct {
    char s[256][2];
    uint8_t len[256];
} gpt2_map;

static void gpt2_map_init(gpt2_map *m)
{
    for (unsigned b = 0; b < 256; b++) {
        char tmp[4];
        m->len[b] = (uint8_t)lipi_utf8_encode(gpt2_char(b), tmp);
        memcpy(m->s[b], tmp, m->len[b]);
    }
}

/* The bytes that string s spells in the GPT-2 alphabet, into out; false if
 * s has a character outside that alphabet (or out of memory, which then
 * only loses the coincidence with a learned token). */
static bool gpt2_unmap(const char *s, size_t len, lipi_buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = lipi_utf8_decode(s + i, len - i, &cp);
        if (!n || cp >= 256 + 68)
            return false;
        unsigned byte = 256;
        for (unsigned v = 0; v < 256 && byte == 256; v++)
            if (gpt2_char(v) == cp)
                byte = v;
        if (byte == 256)
            return false;
        char c = (char)byte;
        if (lipi_buf_append(out, &c, 1) != LIPI_OK)
            return false;
        i += n;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                    */
/* ------------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static const char *tok_raw(const bpe *b, uint32_t id, size_t *len)
{
    *len = b->raw_off[id + 1] - b->raw_off[id];
    return b->raw.p + b->raw_off[id];
}

/* The vocabulary string: the token's identity in tokenizer.json. */
static const char *tok_vstr(const bpe *b, uint32_t id, size_t *len)
{
    if (!b->byte_units)
        return tok_raw(b, id, len);
    *len = b->vstr_off[id + 1] - b->vstr_off[id];
    return b->vstr.p + b->vstr_off[id];
}

static uint32_t tok_find(const bpe *b, const char *v, size_t len)
{
    if (!b->tmap_cap)
        return NONE;
    size_t mask = b->tmap_cap - 1;
    for (size_t i = fnv1a(v, len) & mask;; i = (i + 1) & mask) {
        uint32_t id = b->tmap[i];
        if (id == NONE)
            return NONE;
        size_t l;
        const char *s = tok_vstr(b, id, &l);
        if (l == len && memcmp(s, v, len) == 0)
            return id;
    }
}

static void tmap_place(bpe *b, uint32_t id)
{
    size_t len, mask = b->tmap_cap - 1;
    const char *v = tok_vstr(b, id, &len);
    size_t i = fnv1a(v, len) & mask;
    while (b->tmap[i] != NONE)
        i = (i + 1) & mask;
    b->tmap[i] = id;
}

/* Adds token `id` (the newest) to the string -> id map. */
static lipi_status tmap_insert(bpe *b, uint32_t id)
{
    if (b->n_tok * 2 > b->tmap_cap) {
        size_t ncap = b->tmap_cap ? b->tmap_cap * 2 : 1024;
        uint32_t *nm = lipi_reallocarray(NULL, ncap, sizeof *nm);
        if (!nm)
            return LIPI_ENOMEM;
        memset(nm, 0xff, ncap * sizeof *nm);
        lipi_free(b->tmap);
        b->tmap = nm;
        b->tmap_cap = ncap;
        for (uint32_t t = 0; t < id; t++)
            tmap_place(b, t);
    }
    tmap_place(b, id);
    return LIPI_OK;
}

/* Appends a token with raw bytes r and vocabulary string v (byte units; v is
 * ignored otherwise) of `units` base units. The caller checked that v is new. */
static lipi_status tok_add(bpe *b, const char *r, size_t rlen, const char *v, size_t vlen,
                           uint32_t units, uint32_t *id)
{
    if (b->n_tok >= NONE - 1)
        return LIPI_ENOMEM;
    if (b->n_tok + 2 > b->tok_cap) {
        size_t cap = b->tok_cap, cap2 = b->tok_cap, cap3 = b->tok_cap, cap4 = b->tok_cap;
        void *p = b->raw_off;
        if (lipi_grow(&p, &cap, b->n_tok + 2, sizeof(size_t)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->raw_off = p;
        p = b->prefix;
        if (lipi_grow(&p, &cap4, b->n_tok + 2, sizeof(uint64_t)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->prefix = p;
        p = b->ulen;
        if (lipi_grow(&p, &cap2, b->n_tok + 2, sizeof(uint32_t)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->ulen = p;
        if (b->byte_units) {
            p = b->vstr_off;
            if (lipi_grow(&p, &cap3, b->n_tok + 2, sizeof(size_t)) != LIPI_OK)
                return LIPI_ENOMEM;
            b->vstr_off = p;
        }
        b->tok_cap = cap;
        b->raw_off[0] = 0;
        if (b->byte_units)
            b->vstr_off[0] = 0;
    }
    if (lipi_buf_append(&b->raw, r, rlen) != LIPI_OK)
        return LIPI_ENOMEM;
    if (b->byte_units && lipi_buf_append(&b->vstr, v, vlen) != LIPI_OK)
        return LIPI_ENOMEM;
    uint32_t t = (uint32_t)b->n_tok;
    b->raw_off[t + 1] = b->raw.len;
    if (b->byte_units)
        b->vstr_off[t + 1] = b->vstr.len;
    b->ulen[t] = units;
    uint64_t key = 0;
    for (size_t i = 0; i < 8; i++)
        key = key << 8 | (i < rlen ? (unsigned char)r[i] : 0);
    b->prefix[t] = key;
    b->n_tok++;
    if (tmap_insert(b, t) != LIPI_OK) {
        b->n_tok--;
        return LIPI_ENOMEM;
    }
    *id = t;
    return LIPI_OK;
}

/* The id of the token with raw bytes r (vocabulary string v for byte units),
 * added if new. A special token with the same string is reused (its raw
 * bytes and units were made to agree when it was added). */
static lipi_status tok_get(bpe *b, const char *r, size_t rlen, const char *v, size_t vlen,
                           uint32_t units, uint32_t *id)
{
    if (!b->byte_units) {
        v = r;
        vlen = rlen;
    }
    uint32_t t = tok_find(b, v, vlen);
    if (t == NONE)
        return tok_add(b, r, rlen, v, vlen, units, id);
    *id = t;
    return LIPI_OK;
}

/* Units (code points or bytes) of token bytes s. */
static uint32_t count_units(const bpe *b, const char *s, size_t len)
{
    if (b->byte_units)
        return (uint32_t)len;
    uint32_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Lexicographic order of the token bytes of a and b (a prefix first). */
static int tok_cmp(const bpe *b, uint32_t x, uint32_t y)
{
    if (x == y)
        return 0;
    if (b->prefix[x] != b->prefix[y])
        return b->prefix[x] < b->prefix[y] ? -1 : 1;
    size_t lx, ly;
    const char *sx = tok_raw(b, x, &lx), *sy = tok_raw(b, y, &ly);
    int r = memcmp(sx, sy, lx < ly ? lx : ly);
    if (r)
        return r;
    return (lx > ly) - (lx < ly);
}

/* ------------------------------------------------------------------------ */
/* Pairs                                                                     */
/* ------------------------------------------------------------------------ */

static inline uint64_t pair_key(uint32_t l, uint32_t r)
{
    return (uint64_t)l << 32 | r;
}

static inline uint64_t pair_hash(uint64_t key)
{
    return key * 0x9E3779B97F4A7C15ull;
}

static uint32_t pair_find(const bpe *b, uint64_t key)
{
    uint64_t h = pair_hash(key);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t mask = b->pcap - 1;
    for (size_t i = (size_t)(h >> b->pshift);; i = (i + 1) & mask) {
        pair_slot ps = b->pslots[i];
        if (ps == PSLOT_EMPTY)
            return NONE;
        uint32_t p = (uint32_t)ps;
        if ((uint32_t)(ps >> 32) == tag && pair_key(b->pairs[p].left, b->pairs[p].right) == key)
            return p;
    }
}

static void pslot_place(bpe *b, uint64_t key, uint32_t p)
{
    uint64_t h = pair_hash(key);
    size_t mask = b->pcap - 1, i = (size_t)(h >> b->pshift);
    while (b->pslots[i] != PSLOT_EMPTY)
        i = (i + 1) & mask;
    b->pslots[i] = (h & 0xffffffff00000000ull) | p;
}

static lipi_status pslots_grow(bpe *b)
{
    size_t ncap = b->pcap ? b->pcap * 2 : 1 << 16;
    unsigned bits = 0;
    while (((size_t)1 << bits) < ncap)
        bits++;
    pair_slot *ns = big_alloc(ncap, sizeof *ns, false);
    if (!ns)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < ncap; i++)
        ns[i] = PSLOT_EMPTY;
    lipi_free(b->pslots);
    b->pslots = ns;
    b->pcap = ncap;
    b->pshift = 64 - bits;
    for (uint32_t p = 0; p < b->n_pairs; p++)
        pslot_place(b, pair_key(b->pairs[p].left, b->pairs[p].right), p);
    return LIPI_OK;
}

/* The pair (l, r), created with count 0 if new. */
static lipi_status pair_get(bpe *b, uint32_t l, uint32_t r, uint32_t *out)
{
    uint64_t key = pair_key(l, r);
    /* Grow at 0.6 full: probes stay short, slots are only 8 bytes. */
    if ((b->n_pairs + 1) * 5 > b->pcap * 3 && pslots_grow(b) != LIPI_OK)
        return LIPI_ENOMEM;
    uint32_t p = pair_find(b, key);
    if (p != NONE) {
        *out = p;
        return LIPI_OK;
    }
    if (b->n_pairs >= NONE - 1)
        return LIPI_ENOMEM;
    void *q = b->pairs;
    if (big_grow(&q, &b->pairs_cap, b->n_pairs + 1, sizeof(pair_rec)) != LIPI_OK)
        return LIPI_ENOMEM;
    b->pairs = q;
    p = (uint32_t)b->n_pairs++;
    b->pairs[p] = (pair_rec){0, 0, l, r, NONE, NONE};
    pslot_place(b, key, p);
    *out = p;
    return LIPI_OK;
}

static bool is_forbidden(const bpe *b, uint32_t p)
{
    uint64_t key = pair_key(b->pairs[p].left, b->pairs[p].right);
    for (size_t i = 0; i < b->n_forbidden; i++)
        if (b->forbidden[i] == key)
            return true;
    return false;
}

static lipi_status chunk_alloc(bpe *b, uint32_t *out)
{
    if (b->free_chunk != NONE) {
        *out = b->free_chunk;
        b->free_chunk = b->chunks[*out].next;
        if (b->free_chunk != NONE)
            __builtin_prefetch(&b->chunks[b->free_chunk]); /* for the next call */
        return LIPI_OK;
    }
    if (b->n_chunks >= TAIL_MARK)
        return LIPI_ENOMEM;
    void *p = b->chunks;
    if (big_grow(&p, &b->chunks_cap, b->n_chunks + 1, sizeof(chunk)) != LIPI_OK)
        return LIPI_ENOMEM;
    b->chunks = p;
    *out = (uint32_t)b->n_chunks++;
    return LIPI_OK;
}

/* Notes that word w may contain pair p. */
static lipi_status list_append(bpe *b, uint32_t p, uint32_t w)
{
    pair_rec *pr = &b->pairs[p];
    if (pr->tail != NONE) {
        chunk *c = &b->chunks[pr->tail];
        uint32_t fill = c->next - TAIL_MARK;
        if (c->w[fill - 1] == w)
            return LIPI_OK;
        if (fill < CHUNK_WORDS) {
            c->w[fill] = w;
            c->next++;
            return LIPI_OK;
        }
    }
    uint32_t ci;
    if (chunk_alloc(b, &ci) != LIPI_OK)
        return LIPI_ENOMEM;
    pr = &b->pairs[p];
    chunk *c = &b->chunks[ci];
    c->next = TAIL_MARK + 1;
    c->w[0] = w;
    if (pr->tail == NONE)
        pr->head = ci;
    else
        b->chunks[pr->tail].next = ci;
    pr->tail = ci;
    return LIPI_OK;
}

/* Returns a pair's word list to the chunk pool. */
static void list_release(bpe *b, pair_rec *pr)
{
    if (pr->head == NONE)
        return;
    b->chunks[pr->tail].next = b->free_chunk;
    b->free_chunk = pr->head;
    pr->head = pr->tail = NONE;
}

static lipi_status heap_push(bpe *b, uint64_t count, uint32_t pair);

/* Takes n occurrences and `bad` edge-straddling ones off pair `key`. A pair
 * whose last straddling occurrence goes becomes mergeable: it is queued. */
static lipi_status pair_dec(bpe *b, uint64_t key, uint64_t n, uint64_t bad)
{
    uint32_t p = pair_find(b, key);
    LIPI_ASSERT(p != NONE);
    pair_rec *pr = &b->pairs[p];
    LIPI_ASSERT(pr->count >= n && pr->bad >= bad);
    pr->count -= n;
    pr->bad -= bad;
    if (pr->count == 0)
        list_release(b, pr);
    if (bad && pr->bad == 0 && pr->count >= b->floor && !is_forbidden(b, p))
        return heap_push(b, pr->count, p);
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Per-merge sums of pair count changes                                      */
/* ------------------------------------------------------------------------ */

static lipi_status delta_reserve(delta **v, size_t *cap, size_t need)
{
    if (need <= *cap)
        return LIPI_OK;
    void *p = *v;
    lipi_status st = big_grow(&p, cap, need, sizeof(delta));
    *v = p;
    return st;
}

/* Starts new sums for the merge x y -> z: room for n of them (at most one
 * per delta) and a reference per token; every reference of an older epoch
 * counts as unset. */
static lipi_status agg_reset(bpe *b, size_t n)
{
    b->n_used = 0;
    if (n > b->agg_cap) {
        void *q = b->agg;
        if (big_grow(&q, &b->agg_cap, n, sizeof(agg_slot)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->agg = q;
    }
    if (b->n_tok > b->ref_cap) {
        size_t cap = b->ref_cap;
        void *l = b->agg_left, *r = b->agg_right;
        if (lipi_grow(&l, &cap, b->n_tok, sizeof(agg_ref)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->agg_left = l;
        cap = b->ref_cap;
        if (lipi_grow(&r, &cap, b->n_tok, sizeof(agg_ref)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->agg_right = r;
        for (size_t t = b->ref_cap; t < cap; t++)
            b->agg_left[t] = b->agg_right[t] = (agg_ref){0, 0};
        b->ref_cap = cap;
    }
    if (++b->agg_epoch == 0) {
        for (size_t t = 0; t < b->ref_cap; t++)
            b->agg_left[t].epoch = b->agg_right[t].epoch = 0;
        b->agg_xy.epoch = 0;
        b->agg_epoch = 1;
    }
    return LIPI_OK;
}

/* Index of the sum ref points at, claimed (n = 0, pair = NONE) if unset. */
static inline size_t agg_at(bpe *b, agg_ref *ref, uint64_t key)
{
    if (ref->epoch != b->agg_epoch) {
        ref->epoch = b->agg_epoch;
        ref->slot = (uint32_t)b->n_used;
        b->agg[b->n_used++] = (agg_slot){key, 0, 0, NONE};
    }
    return ref->slot;
}

/* The sum of a pair that merge x y removes: it ends in x, starts with y
 * or is x y (merge_word notes no other), so the other token finds it. */
static inline size_t agg_removed(bpe *b, uint64_t key, uint32_t x, uint32_t y)
{
    uint32_t l = (uint32_t)(key >> 32), r = (uint32_t)key;
    if (r == x)
        return agg_at(b, &b->agg_left[l], key);
    if (l == y)
        return agg_at(b, &b->agg_right[r], key);
    LIPI_ASSERT(l == x && r == y);
    return agg_at(b, &b->agg_xy, key);
}

/* The sum of a pair that a merge adds: it holds the new token z. */
static inline size_t agg_added(bpe *b, uint64_t key, uint32_t z)
{
    uint32_t l = (uint32_t)(key >> 32), r = (uint32_t)key;
    if (r == z)
        return agg_at(b, &b->agg_left[l], key);
    LIPI_ASSERT(l == z);
    return agg_at(b, &b->agg_right[r], key);
}

/* Subtracts the removed occurrences, one big-table update per pair. */
static lipi_status apply_removals(bpe *b, uint32_t x, uint32_t y)
{
    size_t total = 0;
    for (size_t t = 0; t < b->n_active; t++)
        total += b->d[t].n_rem;
    if (agg_reset(b, total) != LIPI_OK)
        return LIPI_ENOMEM;
    for (size_t t = 0; t < b->n_active; t++)
        for (size_t k = 0; k < b->d[t].n_rem; k++) {
            const delta *d = &b->d[t].rem[k];
            size_t i = agg_removed(b, d->key, x, y);
            if (d->w == NONE)
                b->agg[i].bad += d->n;
            else
                b->agg[i].n += d->n;
        }
    /* The pairs are scattered over the big tables: fetch slot and record
     * of the pairs a few steps ahead. */
    for (size_t u = 0; u < b->n_used; u++) {
        if (u + 8 < b->n_used)
            __builtin_prefetch(&b->pslots[pair_hash(b->agg[u + 8].key) >> b->pshift]);
        if (u + 4 < b->n_used) {
            pair_slot ps = b->pslots[pair_hash(b->agg[u + 4].key) >> b->pshift];
            if (ps != PSLOT_EMPTY)
                __builtin_prefetch(&b->pairs[(uint32_t)ps]);
        }
        const agg_slot *a = &b->agg[u];
        if (pair_dec(b, a->key, a->n, a->bad) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    return LIPI_OK;
}

/* Adds the new occurrences, notes their words, and queues the pairs. */
static lipi_status apply_additions(bpe *b, uint32_t z)
{
    size_t total = 0;
    for (size_t t = 0; t < b->n_active; t++)
        total += b->d[t].n_add;
    if (agg_reset(b, total) != LIPI_OK)
        return LIPI_ENOMEM;
    for (size_t t = 0; t < b->n_active; t++)
        for (size_t k = 0; k < b->d[t].n_add; k++) {
            const delta *d = &b->d[t].add[k];
            size_t i = agg_added(b, d->key, z);
            if (b->agg[i].pair == NONE &&
                pair_get(b, (uint32_t)(d->key >> 32), (uint32_t)d->key, &b->agg[i].pair) !=
                    LIPI_OK)
                return LIPI_ENOMEM;
            uint32_t p = b->agg[i].pair;
            if (d->w == NONE) {
                b->pairs[p].bad += d->n;
                continue;
            }
            b->pairs[p].count += d->n;
            if (list_append(b, p, d->w) != LIPI_OK)
                return LIPI_ENOMEM;
        }
    for (size_t u = 0; u < b->n_used; u++) {
        uint32_t p = b->agg[u].pair;
        const pair_rec *pr = &b->pairs[p];
        if (pr->count >= b->floor && pr->bad == 0 && !is_forbidden(b, p) &&
            heap_push(b, pr->count, p) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Heap                                                                      */
/* ------------------------------------------------------------------------ */

/* True if x should be merged before y: higher count, then smaller left
 * token bytes, then smaller right token bytes. */
static inline bool heap_before(const bpe *b, const heap_ent *x, const heap_ent *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    if (x->left_prefix != y->left_prefix)
        return x->left_prefix < y->left_prefix;
    int c = tok_cmp(b, x->left, y->left);
    if (c)
        return c < 0;
    return tok_cmp(b, x->right, y->right) < 0;
}

static inline heap_ent heap_entry(const bpe *b, uint64_t count, uint32_t p)
{
    const pair_rec *pr = &b->pairs[p];
    return (heap_ent){.count = count, .left_prefix = b->prefix[pr->left], .pair = p,
                      .left = pr->left, .right = pr->right};
}

/* A 4-ary heap: half the levels of a binary one, and the four children
 * of a node share a cache line or two. */
enum { HEAP_ARITY = 4 };

static void heap_sift_down(bpe *b, size_t i)
{
    heap_ent *h = b->heap;
    size_t n = b->heap_n;
    heap_ent e = h[i];
    for (;;) {
        size_t c = HEAP_ARITY * i + 1;
        if (c >= n)
            break;
        size_t end = c + HEAP_ARITY < n ? c + HEAP_ARITY : n, best = c;
        for (size_t k = c + 1; k < end; k++)
            if (heap_before(b, &h[k], &h[best]))
                best = k;
        if (!heap_before(b, &h[best], &e))
            break;
        h[i] = h[best];
        i = best;
    }
    h[i] = e;
}

static void heap_sift_up(bpe *b, size_t i)
{
    heap_ent e = b->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / HEAP_ARITY;
        if (!heap_before(b, &e, &b->heap[parent]))
            break;
        b->heap[i] = b->heap[parent];
        i = parent;
    }
    b->heap[i] = e;
}

static lipi_status heap_push(bpe *b, uint64_t count, uint32_t pair)
{
    if (b->heap_n == b->heap_cap) {
        void *p = b->heap;
        if (big_grow(&p, &b->heap_cap, b->heap_n + 1, sizeof(heap_ent)) != LIPI_OK)
            return LIPI_ENOMEM;
        b->heap = p;
    }
    b->heap[b->heap_n] = heap_entry(b, count, pair);
    heap_sift_up(b, b->heap_n++);
    return LIPI_OK;
}

static heap_ent heap_pop(bpe *b)
{
    heap_ent top = b->heap[0];
    b->heap[0] = b->heap[--b->heap_n];
    if (b->heap_n)
        heap_sift_down(b, 0);
    return top;
}

/* ------------------------------------------------------------------------ */
/* Words and the grapheme guard                                              */
/* ------------------------------------------------------------------------ */

static inline uint32_t sym_units(const bpe *b, uint32_t s)
{
    return s == NONE ? 1 : b->ulen[s];
}

static inline bool cluster_starts(const uint8_t *g, uint32_t i)
{
    return (g[i >> 3] >> (i & 7)) & 1;
}

enum {
    PAIR_IGNORED = 0, /* never merged here: not counted */
    PAIR_VALID,       /* counted, and merged when the pair is chosen */
    PAIR_STRADDLES,   /* first guard phase: crosses a cluster edge (pair_rec.bad) */
};

/* What the occurrence of symbols x, y of word wr at base unit `pos` is. */
static inline int pair_class(const bpe *b, const word_rec *wr, uint32_t x, uint32_t y,
                             uint32_t pos)
{
    if (x == NONE || y == NONE)
        return PAIR_IGNORED;
    uint32_t e = pos + b->ulen[x] + b->ulen[y];
    if (b->max_len && e - pos > b->max_len)
        return PAIR_IGNORED;
    if (wr->goff == NO_GUARD) /* every cluster is one unit: nothing inside */
        return b->clusters_only ? PAIR_IGNORED : PAIR_VALID;
    const uint8_t *g = b->gbits + wr->goff / 8;
    for (uint32_t i = pos + 1; i < e; i++)
        if (cluster_starts(g, i)) {
            if (b->clusters_only)
                return PAIR_STRADDLES;
            bool whole = cluster_starts(g, pos) && (e == wr->units || cluster_starts(g, e));
            return whole ? PAIR_VALID : PAIR_IGNORED;
        }
    return PAIR_VALID; /* inside one cluster */
}

static inline bool pair_ok(const bpe *b, const word_rec *wr, uint32_t x, uint32_t y, uint32_t pos)
{
    return pair_class(b, wr, x, y, pos) == PAIR_VALID;
}

/* The delta of an occurrence of class c of pair (x, y) in word w of count n. */
static inline void note(delta **out, int c, uint32_t x, uint32_t y, uint64_t n, uint32_t w)
{
    if (c == PAIR_VALID)
        *(*out)++ = (delta){pair_key(x, y), n, w};
    else if (c == PAIR_STRADDLES)
        *(*out)++ = (delta){pair_key(x, y), 1, NONE};
}

/* Applies the merge x y -> z to every valid occurrence in word w, left to
 * right, in place, and records the pair count changes in d.
 * Removed: every pair with a merged position, once (the pair between two
 * merges in a row is the right pair of the first). Added: every pair with
 * a new z, once (z z is the left pair of the second z). */
static lipi_status merge_word(const bpe *b, delta_buf *d, word_rec *wr, uint32_t w, uint32_t x,
                              uint32_t y, uint32_t z)
{
    uint32_t *s = b->sym + wr->off;
    uint32_t L = wr->len, j = 0, pos = 0;
    uint32_t ux = b->ulen[x], uy = b->ulen[y];
    /* old[i-1] and new[j-1], with their positions in base units */
    uint32_t prev_old = NONE, prev_old_pos = 0, prev_new = NONE, prev_new_pos = 0;
    bool prev_old_merged = false, prev_new_fresh = false;
    uint64_t n = wr->count;
    if (delta_reserve(&d->rem, &d->rem_cap, d->n_rem + 2 * (size_t)L) != LIPI_OK ||
        delta_reserve(&d->add, &d->add_cap, d->n_add + 2 * (size_t)L) != LIPI_OK)
        return LIPI_ENOMEM;
    delta *rem = d->rem + d->n_rem, *add = d->add + d->n_add;
    for (uint32_t i = 0; i < L;) {
        uint32_t cur = s[i];
        if (cur == x && i + 1 < L && s[i + 1] == y && pair_ok(b, wr, x, y, pos)) {
            if (i > 0 && !prev_old_merged)
                note(&rem, pair_class(b, wr, prev_old, x, prev_old_pos), prev_old, x, n, w);
            *rem++ = (delta){pair_key(x, y), n, w};
            if (i + 2 < L)
                note(&rem, pair_class(b, wr, y, s[i + 2], pos + ux), y, s[i + 2], n, w);
            if (j > 0)
                note(&add, pair_class(b, wr, prev_new, z, prev_new_pos), prev_new, z, n, w);
            s[j++] = z;
            prev_new = z;
            prev_new_pos = pos;
            prev_new_fresh = true;
            prev_old = y;
            prev_old_pos = pos + ux;
            prev_old_merged = true;
            pos += ux + uy;
            i += 2;
        } else {
            if (prev_new_fresh)
                note(&add, pair_class(b, wr, prev_new, cur, prev_new_pos), prev_new, cur, n, w);
            if (j != i)
                s[j] = cur;
            j++;
            prev_new = prev_old = cur;
            prev_new_pos = prev_old_pos = pos;
            prev_new_fresh = prev_old_merged = false;
            pos += sym_units(b, cur);
            i++;
        }
    }
    d->n_rem = (size_t)(rem - d->rem);
    d->n_add = (size_t)(add - d->add);
    wr->len = j;
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Preparing the words                                                       */
/* ------------------------------------------------------------------------ */

/* The alphabet: code points, or bytes for byte units. */
typedef lipi_char_count alpha_ent;

/* Code point -> (frequency, token id), in pages of 256 code points made on
 * first use: a corpus touches a few dozen pages of the 4352. */
typedef struct {
    uint64_t freq[256];
    uint32_t id[256];
} cp_page;

typedef struct {
    cp_page *page[0x110000 >> 8];
} cp_table;

static void cp_table_free(cp_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < sizeof t->page / sizeof t->page[0]; i++)
        lipi_free(t->page[i]);
    lipi_free(t);
}

static inline bool cp_add(cp_table *t, uint32_t cp, uint64_t n)
{
    cp_page *pg = t->page[cp >> 8];
    if (!pg) {
        pg = t->page[cp >> 8] = lipi_calloc(1, sizeof *pg);
        if (!pg)
            return false;
        memset(pg->id, 0xff, sizeof pg->id);
    }
    pg->freq[cp & 255] += n;
    return true;
}

/* False when every cluster of s is surely one unit: ASCII, no CR LF. */
static bool needs_clusters(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 || (c == '\r' && i + 1 < len && s[i + 1] == '\n'))
            return true;
    }
    return false;
}

/* Threads to use: the option, or the online CPUs, at most 64. */
static size_t thread_count(const lipi_bpe_options *opt)
{
    return lipi_thread_count(opt->common.threads, 64);
}

typedef struct {
    void *(*fn)(void *);
    char *jobs;
    size_t size;
} jobs_call;

static lipi_status job_task(void *ctx, size_t t, size_t worker, lipi_error *err)
{
    const jobs_call *c = ctx;
    c->fn(c->jobs + t * c->size);
    return LIPI_OK;
}

/* Runs fn(&jobs[t]) for t < n on up to n threads; each job is a fixed
 * share of the words, so which thread runs it does not matter. The jobs
 * note their own failures, so the run itself cannot fail. */
static void run_jobs(void *(*fn)(void *), void *jobs, size_t size, size_t n)
{
    jobs_call c = {fn, jobs, size};
    (void)lipi_parallel_for(n, n, job_task, &c, NULL);
}

typedef struct {
    bpe *b;
    const lipi_count_entry *ents;
    cp_table *cps;       /* this thread's unit frequencies */
    size_t lo, hi;
    uint64_t weighted;   /* sum of count x units */
    size_t bad_word;     /* first word that is not UTF-8, or hi */
    size_t bad_at;
    bool overflow, nomem;
} scan_job;

/* Pass 1 over words [lo, hi): units, cluster need, unit frequencies. */
static void *scan_run(void *arg)
{
    scan_job *job = arg;
    bpe *b = job->b;
    job->bad_word = job->hi;
    for (size_t w = job->lo; w < job->hi; w++) {
        const char *s = job->ents[w].word;
        size_t len = job->ents[w].len;
        uint64_t c = job->ents[w].count;
        word_rec *wr = &b->words[w];
        size_t bad = lipi_utf8_valid_prefix(s, len);
        if (bad < len) {
            job->bad_word = w;
            job->bad_at = bad;
            return NULL;
        }
        size_t units = 0;
        if (b->byte_units) {
            for (size_t i = 0; i < len; i++)
                if (!cp_add(job->cps, (unsigned char)s[i], c))
                    goto nomem;
            units = len;
        } else {
            for (size_t i = 0; i < len; units++) {
                uint32_t cp;
                i += lipi_utf8_decode(s + i, len - i, &cp);
                if (!cp_add(job->cps, cp, c))
                    goto nomem;
            }
        }
        if (units >= NONE || (c && units > UINT64_MAX / c) ||
            job->weighted > UINT64_MAX - c * units) {
            job->overflow = true;
            return NULL;
        }
        job->weighted += c * units;
        wr->len = wr->units = (uint32_t)units;
        wr->count = c;
        wr->goff = b->guard && needs_clusters(s, len) ? 0 : NO_GUARD;
    }
    return NULL;
nomem:
    job->nomem = true;
    return NULL;
}

/* Pass 1 on all threads; the unit frequencies of all threads are summed
 * into cps and the total of count x units into *weighted. Errors name the
 * first bad word in table order, whatever the thread count. */
static lipi_status scan_words(bpe *b, const lipi_count_entry *ents, cp_table *cps,
                              uint64_t *weighted, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t threads = b->n_words < 4096 ? 1 : thread_count(b->opt);
    scan_job jobs[64];
    for (size_t t = 0; t < threads; t++)
        jobs[t] = (scan_job){b, ents, t ? NULL : cps, b->n_words * t / threads,
                             b->n_words * (t + 1) / threads, 0, 0, 0, false, false};
    for (size_t t = 1; t < threads; t++)
        if (!(jobs[t].cps = lipi_calloc(1, sizeof *jobs[t].cps)))
            threads = t; /* fewer threads: the last range absorbs the rest */
    jobs[threads - 1].hi = b->n_words;
    run_jobs(scan_run, jobs, sizeof *jobs, threads);
    *weighted = 0;
    for (size_t t = 0; t < threads && st == LIPI_OK; t++) {
        const scan_job *j = &jobs[t];
        if (j->bad_word < j->hi) {
            const char *s = ents[j->bad_word].word;
            st = lipi_error_set(err, LIPI_EFORMAT, NULL, 0, j->bad_at,
                                "expected UTF-8 in word \"%.*s\", found byte 0x%02X",
                                (int)(j->bad_at > 40 ? 40 : j->bad_at), s,
                                (unsigned)(unsigned char)s[j->bad_at]);
        } else if (j->nomem) {
            st = LIPI_ENOMEM;
        } else if (j->overflow || *weighted > UINT64_MAX - j->weighted) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "counts too large: characters times counts overflow 64 bits");
        } else {
            *weighted += j->weighted;
        }
    }
    for (size_t t = 1; t < threads; t++) {
        for (size_t pi = 0; st == LIPI_OK && pi < sizeof cps->page / sizeof cps->page[0]; pi++) {
            const cp_page *src = jobs[t].cps->page[pi];
            for (uint32_t k = 0; src && k < 256; k++)
                if (src->freq[k] && !cp_add(cps, pi << 8 | k, src->freq[k]))
                    st = LIPI_ENOMEM;
        }
        cp_table_free(jobs[t].cps);
    }
    return st;
}

typedef struct {
    bpe *b;
    const lipi_count_entry *ents;
    const cp_table *cps;
    size_t lo, hi;
    lipi_status st;
    lipi_error err;
} fill_job;

/* Writes the symbols of words [lo, hi) and, with the guard, their
 * cluster-start bitmaps; a word whose clusters are all single units needs
 * none (goff = NO_GUARD). Threads write disjoint words (bitmaps start on
 * byte boundaries). */
static void *fill_run(void *arg)
{
    fill_job *job = arg;
    bpe *b = job->b;
    size_t *bounds = NULL, cap = 0, n;
    lipi_grapheme_iter *gi = NULL;
    job->st = LIPI_OK;
    for (size_t w = job->lo; w < job->hi; w++) {
        word_rec *wr = &b->words[w];
        const char *s = job->ents[w].word;
        size_t len = job->ents[w].len;
        uint32_t *out = b->sym + wr->off;
        if (b->byte_units) {
            for (size_t i = 0; i < len; i++)
                out[i] = job->cps->page[0]->id[(unsigned char)s[i]];
        } else {
            for (size_t i = 0, k = 0; i < len; k++) {
                uint32_t cp;
                i += lipi_utf8_decode(s + i, len - i, &cp);
                out[k] = job->cps->page[cp >> 8]->id[cp & 255];
            }
        }
        if (wr->goff == NO_GUARD)
            continue;
        job->st = lipi_graphemes_iter(&gi, s, len, &bounds, &cap, &n, &job->err);
        if (job->st != LIPI_OK)
            break;
        if (n == wr->units) {
            wr->goff = NO_GUARD;
            continue;
        }
        uint8_t *g = b->gbits + wr->goff / 8;
        /* Byte offsets of the cluster starts -> base unit indices. */
        uint32_t unit = 0;
        size_t k = 0;
        for (size_t i = 0; i < len && k < n; i++) {
            if (!b->byte_units && ((unsigned char)s[i] & 0xC0) == 0x80)
                continue;
            if (bounds[k] == i) {
                g[unit >> 3] |= (uint8_t)(1u << (unit & 7));
                k++;
            }
            unit++;
        }
    }
    lipi_free(bounds);
    lipi_grapheme_iter_free(gi);
    return NULL;
}

static lipi_status fill_words(bpe *b, const lipi_count_entry *ents, const cp_table *cps,
                              lipi_error *err)
{
    size_t threads = thread_count(b->opt);
    if (b->n_words < 4096)
        threads = 1;
    fill_job jobs[64];
    for (size_t t = 0; t < threads; t++)
        jobs[t] = (fill_job){b, ents, cps, b->n_words * t / threads,
                             b->n_words * (t + 1) / threads, LIPI_OK, {0}};
    run_jobs(fill_run, jobs, sizeof *jobs, threads);
    for (size_t t = 0; t < threads; t++)
        if (jobs[t].st != LIPI_OK) {
            if (err)
                *err = jobs[t].err;
            return jobs[t].st;
        }
    return LIPI_OK;
}

/* Checks the options that do not depend on the data. */
static lipi_status check_options(const lipi_bpe_options *opt, lipi_error *err)
{
    if (opt->units != LIPI_UNITS_CHAR && opt->units != LIPI_UNITS_BYTE)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected units char or byte");
    if (opt->common.vocab_size == 0 || opt->common.vocab_size >= NONE - 1)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a vocab size from 1 to 4294967293, found %zu",
                              opt->common.vocab_size);
    if (!(opt->common.character_coverage > 0.0 && opt->common.character_coverage <= 1.0))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a character coverage in (0, 1], found %g",
                              opt->common.character_coverage);
    if (opt->common.n_special && !opt->common.special_tokens)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "special_tokens is NULL");
    if (!(opt->parity_others >= 0.0 && opt->parity_others <= 1.0))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a parity others weight in [0, 1], found %g",
                              opt->parity_others);
    /* Byte units have no byte-fallback tokens to clash with. */
    lipi_status st = lipi_train_check_specials(
        opt->common.special_tokens, opt->common.n_special,
        opt->units == LIPI_UNITS_CHAR && opt->common.byte_fallback, err);
    if (st != LIPI_OK)
        return st;
    bool unk_found = !opt->common.unk_token;
    for (size_t i = 0; i < opt->common.n_special; i++)
        if (opt->common.unk_token && strcmp(opt->common.special_tokens[i], opt->common.unk_token) == 0)
            unk_found = true;
    if (!unk_found)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected the unk token \"%s\" among the special tokens",
                              opt->common.unk_token);
    return LIPI_OK;
}

/* Builds the base vocabulary (specials, byte tokens, alphabet) and the
 * words' symbol arrays from the counts. */
static lipi_status prepare(bpe *b, const lipi_counts *counts, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const lipi_bpe_options *opt = b->opt;
    lipi_count_entry *ents = NULL;
    cp_table *cps = NULL;
    alpha_ent *alpha = NULL;
    size_t n_alpha = 0;
    gpt2_map gm;
    lipi_buf unmapped = {0};

    b->n_words = lipi_counts_size(counts);
    if (b->n_words == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "nothing to train on: no words");
    if (b->n_words >= NONE)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "too many distinct words (%zu)",
                              b->n_words);
    ents = big_alloc(b->n_words, sizeof *ents, false);
    cps = lipi_calloc(1, sizeof *cps);
    b->words = big_alloc(b->n_words, sizeof *b->words, true);
    if (!ents || !cps || !b->words) {
        st = LIPI_ENOMEM;
        goto done;
    }

    /* Pass 1, on all threads: validate, count units and their frequencies;
     * then the words' places in the symbol and bitmap arrays, in order. */
    size_t pos = 0, total_units = 0, guard_bits = 0;
    uint64_t weighted = 0;
    size_t kept = 0;
    lipi_count_entry ent;
    while (lipi_counts_next(counts, &pos, &ent))
        if (ent.len <= LIPI_TRAIN_MAX_WORD_BYTES)
            ents[kept++] = ent;
    if (kept == 0) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "nothing to train on: every word is longer than the %u bytes "
                            "a word may have",
                            (unsigned)LIPI_TRAIN_MAX_WORD_BYTES);
        goto done;
    }
    b->n_words = kept;
    TRY(scan_words(b, ents, cps, &weighted, err));
    for (size_t w = 0; w < b->n_words; w++) {
        word_rec *wr = &b->words[w];
        if (total_units > SIZE_MAX - wr->units) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "too many characters in the words");
            goto done;
        }
        wr->off = total_units;
        total_units += wr->units;
        if (wr->goff != NO_GUARD) {
            guard_bits = (guard_bits + 7) & ~(size_t)7; /* byte-aligned: threads write apart */
            wr->goff = guard_bits;
            guard_bits += wr->units;
        }
    }

    /* The alphabet. */
    alpha = lipi_calloc(b->byte_units ? 256 : 1024, sizeof *alpha);
    size_t alpha_cap = b->byte_units ? 256 : 1024;
    if (!alpha) {
        st = LIPI_ENOMEM;
        goto done;
    }
    if (b->byte_units && !cp_add(cps, 0, 0)) {
        st = LIPI_ENOMEM; /* every byte is in the alphabet, seen or not */
        goto done;
    }
    for (uint32_t pi = 0; pi < sizeof cps->page / sizeof cps->page[0]; pi++) {
        const cp_page *pg = cps->page[pi];
        for (uint32_t k = 0; pg && k < 256; k++) {
            if (!pg->freq[k] && !b->byte_units)
                continue;
            if (n_alpha == alpha_cap) {
                void *p = alpha;
                if (lipi_grow(&p, &alpha_cap, n_alpha + 1, sizeof *alpha) != LIPI_OK) {
                    st = LIPI_ENOMEM;
                    goto done;
                }
                alpha = p;
            }
            alpha[n_alpha++] = (alpha_ent){pi << 8 | k, pg->freq[k]};
        }
    }
    qsort(alpha, n_alpha, sizeof *alpha, lipi_char_count_cmp);
    if (!b->byte_units) {
        if (opt->common.character_coverage < 1.0)
            n_alpha = lipi_train_required_chars(alpha, n_alpha, opt->common.character_coverage);
        if (opt->limit_alphabet && n_alpha > opt->limit_alphabet)
            n_alpha = opt->limit_alphabet;
    }

    /* Base vocabulary: specials, byte fallback, alphabet. */
    uint32_t id;
    if (b->byte_units)
        gpt2_map_init(&gm);
    for (size_t i = 0; i < opt->common.n_special; i++) {
        const char *s = opt->common.special_tokens[i];
        size_t len = strlen(s);
        if (b->byte_units && gpt2_unmap(s, len, &unmapped)) {
            /* Written in the byte alphabet, it may coincide with a learned
             * token: then it stands for the bytes it spells. */
            TRY(tok_add(b, unmapped.p, unmapped.len, s, len, (uint32_t)unmapped.len, &id));
        } else {
            TRY(tok_add(b, s, len, s, len, count_units(b, s, len), &id));
        }
    }
    b->n_special = opt->common.n_special;
    b->first_bf = NONE;
    if (!b->byte_units && opt->common.byte_fallback) {
        for (unsigned v = 0; v < 256; v++) {
            char s[7];
            lipi_byte_token_format((uint8_t)v, s); /* no special is one (check_options) */
            TRY(tok_add(b, s, 6, s, 6, 6, &id));
            if (v == 0)
                b->first_bf = id;
        }
    }
    for (size_t k = 0; k < n_alpha; k++) {
        char r[4];
        size_t rlen;
        if (b->byte_units) {
            r[0] = (char)alpha[k].cp;
            TRY(tok_get(b, r, 1, gm.s[alpha[k].cp], gm.len[alpha[k].cp], 1, &id));
        } else {
            rlen = lipi_utf8_encode(alpha[k].cp, r);
            TRY(tok_get(b, r, rlen, NULL, 0, 1, &id));
        }
        cps->page[alpha[k].cp >> 8]->id[alpha[k].cp & 255] = id;
    }
    if (opt->common.vocab_size < b->n_tok) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "vocab size %zu is below the minimum %zu (%zu special tokens, %s%zu "
                            "alphabet symbols)",
                            opt->common.vocab_size, b->n_tok, opt->common.n_special,
                            b->first_bf != NONE ? "256 byte-fallback tokens, " : "", n_alpha);
        goto done;
    }

    /* Pass 2, on all threads: symbols and cluster bitmaps. */
    if (total_units == 0)
        total_units = 1;
    b->sym = big_alloc(total_units, sizeof *b->sym, false);
    b->gbits = lipi_calloc(guard_bits / 8 + 1, 1);
    if (!b->sym || !b->gbits) {
        st = LIPI_ENOMEM;
        goto done;
    }
    TRY(fill_words(b, ents, cps, err));
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory preparing BPE training");
    lipi_free(ents);
    cp_table_free(cps);
    lipi_free(alpha);
    lipi_buf_free(&unmapped);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The merge loop                                                            */
/* ------------------------------------------------------------------------ */

static lipi_status lower_floor(bpe *b, uint64_t below);

/* Room for the pairs, word-list chunks and heap entries that training on
 * `words` words usually needs (about 1.4, 1.3 and 1 per word on real text),
 * taken up front: the arrays then seldom grow, and growing copies them into
 * fresh pages, which costs more than filling them (a page is resident only
 * once written, so the room not used costs no memory). */
static lipi_status reserve_tables(bpe *b, size_t words)
{
    void *q = b->pairs;
    if (big_grow(&q, &b->pairs_cap, words * 2 + 16, sizeof(pair_rec)) != LIPI_OK)
        return LIPI_ENOMEM;
    b->pairs = q;
    q = b->chunks;
    if (big_grow(&q, &b->chunks_cap, words * 2 + 16, sizeof(chunk)) != LIPI_OK)
        return LIPI_ENOMEM;
    b->chunks = q;
    q = b->heap;
    if (big_grow(&q, &b->heap_cap, words + 16, sizeof(heap_ent)) != LIPI_OK)
        return LIPI_ENOMEM;
    b->heap = q;
    return LIPI_OK;
}

/* Counts the valid pairs of words [lo, hi) into b's pair table and word
 * lists (b may be a part: see count_pairs). */
static lipi_status count_range(bpe *b, uint32_t lo, uint32_t hi)
{
    for (uint32_t w = lo; w < hi; w++) {
        const word_rec *wr = &b->words[w];
        const uint32_t *s = b->sym + wr->off;
        uint32_t pos = 0;
        for (uint32_t k = 0; k + 1 < wr->len; k++) {
            int c = pair_class(b, wr, s[k], s[k + 1], pos);
            pos += sym_units(b, s[k]);
            if (c == PAIR_IGNORED)
                continue;
            uint32_t p;
            if (pair_get(b, s[k], s[k + 1], &p) != LIPI_OK)
                return LIPI_ENOMEM;
            if (c == PAIR_STRADDLES) {
                b->pairs[p].bad++;
                continue;
            }
            if (list_append(b, p, w) != LIPI_OK)
                return LIPI_ENOMEM;
            b->pairs[p].count += wr->count;
        }
    }
    return LIPI_OK;
}

/* Empty pair tables and word lists. */
static void pairs_clear(bpe *b)
{
    b->n_pairs = 0;
    b->n_chunks = 0;
    b->free_chunk = NONE;
    for (size_t i = 0; i < b->pcap; i++)
        b->pslots[i] = PSLOT_EMPTY;
}

static void part_free(bpe *part)
{
    lipi_free(part->pairs);
    lipi_free(part->pslots);
    lipi_free(part->chunks);
}

/* Adds the pairs counted in a part (of later words than b's) to b, in the
 * order the part first met them: the ids, counts and word lists are those
 * of counting all the words in one go. The part's chunks are copied behind
 * b's and each of its lists is linked after b's list of the same pair; the
 * free words of b's last chunk there are filled with NONE, which
 * take_words skips. */
static lipi_status absorb_part(bpe *b, const bpe *part)
{
    size_t base = b->n_chunks;
    if (part->n_chunks > TAIL_MARK - base)
        return LIPI_ENOMEM;
    void *q = b->chunks;
    if (big_grow(&q, &b->chunks_cap, base + part->n_chunks, sizeof(chunk)) != LIPI_OK)
        return LIPI_ENOMEM;
    b->chunks = q;
    for (size_t c = 0; c < part->n_chunks; c++) {
        chunk ch = part->chunks[c];
        if (ch.next < TAIL_MARK)
            ch.next += (uint32_t)base;
        b->chunks[base + c] = ch;
    }
    b->n_chunks = base + part->n_chunks;
    for (uint32_t lq = 0; lq < part->n_pairs; lq++) {
        const pair_rec *lp = &part->pairs[lq];
        uint32_t p;
        if (pair_get(b, lp->left, lp->right, &p) != LIPI_OK)
            return LIPI_ENOMEM;
        pair_rec *pr = &b->pairs[p];
        pr->count += lp->count;
        pr->bad += lp->bad;
        if (lp->head == NONE)
            continue;
        uint32_t head = lp->head + (uint32_t)base, tail = lp->tail + (uint32_t)base;
        if (pr->tail == NONE) {
            pr->head = head;
        } else {
            chunk *c = &b->chunks[pr->tail];
            for (uint32_t i = c->next - TAIL_MARK; i < CHUNK_WORDS; i++)
                c->w[i] = NONE;
            c->next = head;
        }
        pr->tail = tail;
    }
    return LIPI_OK;
}

typedef struct {
    bpe *part;       /* b itself for the first share, a part for the others */
    uint32_t lo, hi; /* its words */
    lipi_status st;
} pair_count_job;

static void *pair_count_run(void *arg)
{
    pair_count_job *job = arg;
    job->st = count_range(job->part, job->lo, job->hi);
    return NULL;
}

/* Shorter inputs are counted on one thread. */
enum { PARALLEL_MIN_PAIR_WORDS = 4096 };

/* Counts every valid pair of every word from scratch, and fills the heap.
 * On several threads each takes a run of words of about the same number of
 * symbols; the first counts into b, the others into parts (copies of b
 * with pair tables and word lists of their own), which are then added to
 * b in word order. */
static lipi_status count_pairs(bpe *b)
{
    lipi_status st = LIPI_OK;
    size_t T = b->n_words < PARALLEL_MIN_PAIR_WORDS ? 1 : thread_count(b->opt);
    pair_count_job *jobs = NULL;
    bpe *parts = NULL;
    pairs_clear(b);
    if (T > 1) {
        jobs = lipi_calloc(T, sizeof *jobs);
        parts = lipi_calloc(T, sizeof *parts);
        if (!jobs || !parts)
            T = 1;
    }
    if (T == 1) {
        st = count_range(b, 0, (uint32_t)b->n_words);
        goto done;
    }
    size_t total = 0, acc = 0, t = 1;
    for (size_t w = 0; w < b->n_words; w++)
        total += b->words[w].len;
    jobs[0] = (pair_count_job){b, 0, (uint32_t)b->n_words, LIPI_OK};
    for (size_t w = 0; w < b->n_words && t < T; w++) {
        acc += b->words[w].len;
        if (acc * T >= total * t) {
            jobs[t - 1].hi = jobs[t].lo = (uint32_t)(w + 1);
            jobs[t].hi = (uint32_t)b->n_words;
            t++;
        }
    }
    for (size_t k = 1; k < t; k++) {
        parts[k] = *b;
        parts[k].pairs = NULL;
        parts[k].n_pairs = parts[k].pairs_cap = 0;
        parts[k].pslots = NULL;
        parts[k].pcap = 0;
        parts[k].chunks = NULL;
        parts[k].n_chunks = parts[k].chunks_cap = 0;
        parts[k].free_chunk = NONE;
        jobs[k].part = &parts[k];
    }
    run_jobs(pair_count_run, jobs, sizeof *jobs, t);
    for (size_t k = 0; k < t && st == LIPI_OK; k++)
        st = jobs[k].st;
    for (size_t k = 1; k < t && st == LIPI_OK; k++)
        st = absorb_part(b, &parts[k]);
    for (size_t k = 1; k < t; k++)
        part_free(&parts[k]);
done:
    lipi_free(jobs);
    lipi_free(parts);
    if (st != LIPI_OK)
        return st;
    b->heap_n = 0;
    return lower_floor(b, UINT64_MAX);
}

/* The k-th largest (k >= 1) of v[0..n), k <= n; reorders v. */
static uint64_t kth_largest(uint64_t *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k - 1;
    while (lo < hi) {
        uint64_t a = v[lo], m = v[lo + (hi - lo) / 2], c = v[hi];
        uint64_t pivot = a < m ? (m < c ? m : a < c ? c : a) : (a < c ? a : m < c ? c : m);
        /* Descending three-way partition: > pivot, == pivot, < pivot. */
        ptrdiff_t lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            uint64_t x = v[i];
            if (x > pivot) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x < pivot) {
                v[i] = v[gt];
                v[gt--] = x;
            } else {
                i++;
            }
        }
        if (want < lt)
            hi = lt - 1;
        else if (want > gt)
            lo = gt + 1;
        else
            return pivot;
    }
    return v[lo];
}

/* Gives heap entries to the mergeable pairs counted less than `below` but
 * at least a new, lower floor, chosen so that about `budget` of them get
 * one (all of them once the floor reaches min_count). Rare pairs thus stay
 * out of the heap until the frequent ones are used up: most never enter
 * it, and the heap stays small enough for the cache. Called with an empty
 * heap; the merges chosen are the same as with every pair in the heap. */
static lipi_status lower_floor(bpe *b, uint64_t below)
{
    size_t remaining = b->opt->common.vocab_size > b->n_tok ? b->opt->common.vocab_size - b->n_tok : 0;
    size_t budget = remaining * 2 > 16384 ? remaining * 2 : 16384;
    size_t n = 0;
    if (b->n_pairs > b->scratch_cap) {
        void *q = b->scratch;
        if (big_grow(&q, &b->scratch_cap, b->n_pairs, sizeof *b->scratch) != LIPI_OK)
            return LIPI_ENOMEM;
        b->scratch = q;
    }
    for (uint32_t p = 0; p < b->n_pairs; p++) {
        const pair_rec *pr = &b->pairs[p];
        if (pr->count >= b->min_count && pr->count < below && pr->bad == 0)
            b->scratch[n++] = pr->count;
    }
    uint64_t f = n > budget ? kth_largest(b->scratch, n, budget) : b->min_count;
    b->floor = f > b->min_count ? f : b->min_count;
    if (n > b->heap_cap - b->heap_n) {
        void *q = b->heap;
        if (big_grow(&q, &b->heap_cap, b->heap_n + n, sizeof *b->heap) != LIPI_OK)
            return LIPI_ENOMEM;
        b->heap = q;
    }
    size_t first = b->heap_n;
    for (uint32_t p = 0; p < b->n_pairs; p++) {
        const pair_rec *pr = &b->pairs[p];
        if (pr->count >= b->floor && pr->count < below && pr->bad == 0 && !is_forbidden(b, p))
            b->heap[b->heap_n++] = heap_entry(b, pr->count, p);
    }
    if (first == 0) {
        /* from the last node with a child up to the root */
        for (size_t i = b->heap_n > 1 ? (b->heap_n - 2) / HEAP_ARITY + 1 : 0; i-- > 0;)
            heap_sift_down(b, i);
    } else {
        for (size_t i = first; i < b->heap_n; i++)
            heap_sift_up(b, i);
    }
    return LIPI_OK;
}

/* The next pair to merge, or NONE. */
static lipi_status next_pair(bpe *b, uint32_t *out)
{
    for (;;) {
        while (b->heap_n) {
            heap_ent top = heap_pop(b);
            const pair_rec *pr = &b->pairs[top.pair];
            if (pr->count < b->floor || pr->bad || top.count < pr->count ||
                is_forbidden(b, top.pair))
                continue; /* a newer entry holds the raised count, or it waits below the floor */
            if (top.count > pr->count) {
                if (heap_push(b, pr->count, top.pair) != LIPI_OK)
                    return LIPI_ENOMEM;
                continue;
            }
            *out = top.pair;
            return LIPI_OK;
        }
        if (b->floor <= b->min_count)
            break;
        if (lower_floor(b, b->floor) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    *out = NONE;
    return LIPI_OK;
}

/* Copies pair p's word list (stale and repeated entries included) into
 * b->wl and releases the list. */
static lipi_status take_words(bpe *b, uint32_t p, size_t *n)
{
    pair_rec *pr = &b->pairs[p];
    size_t k = 0;
    for (uint32_t c = pr->head; c != NONE;) {
        const chunk *ch = &b->chunks[c];
        uint32_t next = ch->next;
        uint32_t fill = next >= TAIL_MARK ? next - TAIL_MARK : CHUNK_WORDS;
        if (next < TAIL_MARK)
            __builtin_prefetch(&b->chunks[next]);
        if (k + CHUNK_WORDS > b->wl_cap) {
            void *q = b->wl;
            if (big_grow(&q, &b->wl_cap, k + CHUNK_WORDS, sizeof(uint32_t)) != LIPI_OK)
                return LIPI_ENOMEM;
            b->wl = q;
        }
        for (uint32_t i = 0; i < fill; i++) {
            b->wl[k] = ch->w[i];
            k += ch->w[i] != NONE; /* padding where two counted parts were joined */
        }
        c = next < TAIL_MARK ? next : NONE;
    }
    list_release(b, pr);
    *n = k;
    return LIPI_OK;
}

/* Rewrites thread t's share (of T) of the words in b->wl[0..nw) with the
 * merge x y -> z, into d. A word belongs to thread w % T, so a word listed
 * twice is still rewritten by one thread, once. Word records and symbols
 * are prefetched far ahead: the words of a list are scattered over memory
 * and a visit is short next to a miss. */
static lipi_status rewrite_share(const bpe *b, delta_buf *d, size_t t, size_t T, size_t nw,
                                 uint32_t x, uint32_t y, uint32_t z)
{
    enum { RECORD_AHEAD = 16, SYMBOLS_AHEAD = 8 };
    const uint32_t *wl = b->wl;
    d->n_rem = d->n_add = 0;
    for (size_t i = 0; i < nw; i++) {
        if (i + RECORD_AHEAD < nw && wl[i + RECORD_AHEAD] % T == t)
            __builtin_prefetch(&b->words[wl[i + RECORD_AHEAD]]);
        if (i + SYMBOLS_AHEAD < nw && wl[i + SYMBOLS_AHEAD] % T == t) {
            const word_rec *ahead = &b->words[wl[i + SYMBOLS_AHEAD]];
            __builtin_prefetch(b->sym + ahead->off);
            if (ahead->goff != NO_GUARD)
                __builtin_prefetch(b->gbits + ahead->goff / 8);
        }
        uint32_t w = wl[i];
        if (w % T != t)
            continue;
        word_rec *wr = &b->words[w];
        if (wr->stamp == b->merge_no)
            continue;
        wr->stamp = b->merge_no;
        if (merge_word(b, d, wr, w, x, y, z) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Helper threads: merges with long word lists are rewritten in parallel     */
/* ------------------------------------------------------------------------ */

/* Shorter lists are not worth waking the helpers for. */
enum { PARALLEL_MIN_WORDS = 4096 };

/* Task t: share t of the current merge's words. */
static lipi_status share_task(void *ctx, size_t t, size_t worker, lipi_error *err)
{
    bpe *b = ctx;
    return rewrite_share(b, &b->d[t], t, b->n_threads, b->job_nw, b->job_x, b->job_y, b->job_z);
}

/* A pool kept for the whole training (one parallel region per long merge
 * would cost more to start than the merge); without one (no memory, no
 * threads) the calling thread does all the work. */
static lipi_status helpers_start(bpe *b, size_t threads)
{
    b->n_threads = 1;
    b->d = lipi_calloc(threads, sizeof *b->d);
    if (!b->d)
        return LIPI_ENOMEM;
    if (threads < 2 || lipi_thread_pool_new(threads, &b->pool, NULL) != LIPI_OK)
        return LIPI_OK;
    b->n_threads = threads;
    return LIPI_OK;
}

static void helpers_stop(bpe *b)
{
    lipi_thread_pool_free(b->pool);
    b->pool = NULL;
}

/* Rewrites the words of pair (x, y) with the merge x y -> z and updates the
 * pair counts. */
static lipi_status merge_pair(bpe *b, uint32_t p, uint32_t x, uint32_t y, uint32_t z)
{
    size_t nw;
    if (take_words(b, p, &nw) != LIPI_OK)
        return LIPI_ENOMEM;
    if (b->pool && nw >= PARALLEL_MIN_WORDS) {
        b->job_x = x;
        b->job_y = y;
        b->job_z = z;
        b->job_nw = nw;
        lipi_status st = lipi_thread_pool_run(b->pool, b->n_threads, share_task, b, NULL);
        if (st != LIPI_OK)
            return st;
        b->n_active = b->n_threads;
    } else {
        if (rewrite_share(b, &b->d[0], 0, 1, nw, x, y, z) != LIPI_OK)
            return LIPI_ENOMEM;
        b->n_active = 1;
    }
    if (apply_removals(b, x, y) != LIPI_OK)
        return LIPI_ENOMEM;
    LIPI_ASSERT(b->pairs[p].count == 0);
    return apply_additions(b, z);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void report(const bpe *b, size_t total, bool done)
{
    if (!b->opt->common.progress)
        return;
    lipi_progress p = {0};
    p.phase = LIPI_PHASE_MERGE;
    p.merges_done = b->n_merges;
    p.merges_total = total;
    p.done = done;
    b->opt->common.progress(&p, b->opt->common.progress_user);
}

/* ------------------------------------------------------------------------ */
/* Parity-aware merge selection (Foroutan et al. 2025; docs/FAIRNESS.md)     */
/* ------------------------------------------------------------------------ */

/* Each word has one language (lipi_balance_lang_of). Pair counts per
 * language live in their own table keyed by pair and language, kept up
 * to date from the same deltas that update the global counts, with a lazy
 * max-heap per language ordered as the global one. The dev set's tokens per
 * language follow every merge (lipi_dev_track). A merge step asks which
 * language costs the most dev tokens per dev file and takes that language's
 * most frequent pair; the first guard phase (clusters only) stays plain. */

/* Keyed by pair key and language, so the deltas (which carry pair keys)
 * update it without a lookup in the global pair table. */
typedef struct {
    uint64_t key;   /* pair_key(left, right) */
    uint32_t lang;  /* NONE: empty */
    uint32_t epoch; /* the merge that last raised it */
    uint64_t count;
} lp_slot;

typedef struct {
    uint64_t key;
    uint32_t lang;
} lp_ref;

typedef struct {
    heap_ent *e;
    size_t n, cap;
} lp_heap;

typedef struct bpe_parity {
    const lipi_balance *bal;
    size_t n_langs;
    uint16_t *wlang;
    lipi_dev_track *dev;
    lp_slot *t;
    size_t cap, used;
    lp_heap *heap;        /* per language */
    uint32_t *order;      /* languages, worst first */
    lp_ref *raised;       /* slots raised by the current merge */
    size_t n_raised, raised_cap;
    uint32_t epoch;
    bool live;            /* per-language counts are current */
} bpe_parity;

static void parity_free(bpe_parity *pa)
{
    if (!pa)
        return;
    lipi_free(pa->wlang);
    lipi_dev_track_free(pa->dev);
    lipi_free(pa->t);
    for (size_t l = 0; pa->heap && l < pa->n_langs; l++)
        lipi_free(pa->heap[l].e);
    lipi_free(pa->heap);
    lipi_free(pa->order);
    lipi_free(pa->raised);
    lipi_free(pa);
}

static size_t lp_probe(const bpe_parity *pa, uint64_t key, uint32_t lang)
{
    size_t mask = pa->cap - 1;
    size_t i = (size_t)(pair_hash(key ^ (uint64_t)lang * 0xC2B2AE3D27D4EB4Full) >> 24) & mask;
    while (pa->t[i].lang != NONE && (pa->t[i].key != key || pa->t[i].lang != lang))
        i = (i + 1) & mask;
    return i;
}

static lipi_status lp_grow(bpe_parity *pa)
{
    size_t ncap = pa->cap ? pa->cap * 2 : 1 << 16, ocap = pa->cap;
    lp_slot *old = pa->t;
    pa->t = big_alloc(ncap, sizeof *pa->t, false);
    if (!pa->t) {
        pa->t = old;
        return LIPI_ENOMEM;
    }
    for (size_t i = 0; i < ncap; i++)
        pa->t[i].lang = NONE;
    pa->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].lang != NONE)
            pa->t[lp_probe(pa, old[i].key, old[i].lang)] = old[i];
    lipi_free(old);
    return LIPI_OK;
}

/* The slot of (lang, pair key), created with count 0 if new. */
static lipi_status lp_slot_of(bpe_parity *pa, uint32_t lang, uint64_t key, size_t *out)
{
    if ((pa->used + 1) * 2 > pa->cap && lp_grow(pa) != LIPI_OK)
        return LIPI_ENOMEM;
    size_t i = lp_probe(pa, key, lang);
    if (pa->t[i].lang == NONE) {
        pa->t[i] = (lp_slot){key, lang, 0, 0};
        pa->used++;
    }
    *out = i;
    return LIPI_OK;
}

static uint64_t lp_count(const bpe_parity *pa, uint32_t lang, uint64_t key)
{
    size_t i = lp_probe(pa, key, lang);
    return pa->t[i].lang == NONE ? 0 : pa->t[i].count;
}

static lipi_status lp_push(const bpe *b, lp_heap *h, uint64_t count, uint32_t p)
{
    if (h->n == h->cap) {
        void *q = h->e;
        if (big_grow(&q, &h->cap, h->n + 1, sizeof *h->e) != LIPI_OK)
            return LIPI_ENOMEM;
        h->e = q;
    }
    heap_ent e = heap_entry(b, count, p);
    size_t i = h->n++;
    while (i > 0 && heap_before(b, &e, &h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = e;
    return LIPI_OK;
}

static heap_ent lp_pop(const bpe *b, lp_heap *h)
{
    heap_ent top = h->e[0], e = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && heap_before(b, &h->e[c + 1], &h->e[c]))
            c++;
        if (!heap_before(b, &h->e[c], &e))
            break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n)
        h->e[i] = e;
    return top;
}

typedef struct {
    const bpe *b;
    gpt2_map gm;
} unit_ctx;

static uint32_t parity_unit_id(void *ctx, const char *s, size_t len)
{
    const unit_ctx *u = ctx;
    if (!u->b->byte_units)
        return tok_find(u->b, s, len);
    unsigned char c = (unsigned char)s[0];
    return tok_find(u->b, u->gm.s[c], u->gm.len[c]);
}

/* Languages of the words (in prepare's order) and the dev tracker. */
static lipi_status parity_start(bpe *b, const lipi_counts *counts, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    bpe_parity *pa = lipi_calloc(1, sizeof *pa);
    unit_ctx *u = lipi_malloc(sizeof *u);
    b->par = pa; /* freed with b, even on failure */
    if (!pa || !u) {
        st = LIPI_ENOMEM;
        goto done;
    }
    pa->bal = b->opt->common.balance;
    pa->n_langs = lipi_balance_n_langs(pa->bal);
    pa->wlang = big_alloc(b->n_words, sizeof *pa->wlang, false);
    pa->heap = lipi_calloc(pa->n_langs, sizeof *pa->heap);
    pa->order = lipi_calloc(pa->n_langs, sizeof *pa->order);
    if (!pa->wlang || !pa->heap || !pa->order || lp_grow(pa) != LIPI_OK) {
        st = LIPI_ENOMEM;
        goto done;
    }
    size_t pos = 0, w = 0;
    lipi_count_entry e;
    while (lipi_counts_next(counts, &pos, &e))
        if (e.len <= LIPI_TRAIN_MAX_WORD_BYTES) /* as prepare() */
            pa->wlang[w++] = (uint16_t)lipi_balance_lang_of(pa->bal, e.word, e.len);
    u->b = b;
    gpt2_map_init(&u->gm);
    TRY(lipi_dev_track_new(pa->bal, b->byte_units, parity_unit_id, u, &pa->dev));
done:
    lipi_free(u);
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory preparing parity-aware BPE");
    return st;
}

static lipi_status parity_heaps(bpe *b)
{
    bpe_parity *pa = b->par;
    for (size_t i = 0; i < pa->cap; i++) {
        const lp_slot *s = &pa->t[i];
        if (s->lang != NONE && s->count >= b->min_count &&
            lp_push(b, &pa->heap[s->lang], s->count, pair_find(b, s->key)) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    return LIPI_OK;
}

/* Counts the pairs of every word per language from scratch (after
 * count_pairs), once merges of whole clusters are allowed. */
static lipi_status parity_recount(bpe *b)
{
    bpe_parity *pa = b->par;
    pa->live = !b->clusters_only;
    if (!pa->live)
        return LIPI_OK;
    for (size_t i = 0; i < pa->cap; i++)
        pa->t[i].lang = NONE;
    pa->used = 0;
    for (size_t l = 0; l < pa->n_langs; l++)
        pa->heap[l].n = 0;
    for (uint32_t w = 0; w < b->n_words; w++) {
        const word_rec *wr = &b->words[w];
        const uint32_t *s = b->sym + wr->off;
        uint32_t lang = pa->wlang[w], pos = 0;
        if (lang == LIPI_LANG_NONE)
            continue;
        for (uint32_t k = 0; k + 1 < wr->len; k++) {
            int c = pair_class(b, wr, s[k], s[k + 1], pos);
            pos += sym_units(b, s[k]);
            if (c != PAIR_VALID)
                continue;
            size_t i;
            if (lp_slot_of(pa, lang, pair_key(s[k], s[k + 1]), &i) != LIPI_OK)
                return LIPI_ENOMEM;
            pa->t[i].count += wr->count;
        }
    }
    return parity_heaps(b);
}

/* Moves the deltas of the merge just made into the per-language counts
 * and the dev tracker. */
static lipi_status parity_after_merge(bpe *b, uint32_t x, uint32_t y, uint32_t z)
{
    bpe_parity *pa = b->par;
    if (lipi_dev_track_merge(pa->dev, x, y, z) != LIPI_OK)
        return LIPI_ENOMEM;
    if (!pa->live)
        return LIPI_OK;
    pa->n_raised = 0;
    if (++pa->epoch == 0)
        pa->epoch = 1;
    for (size_t t = 0; t < b->n_active; t++) {
        const delta_buf *d = &b->d[t];
        for (size_t k = 0; k < d->n_rem; k++) {
            const delta *r = &d->rem[k];
            uint32_t lang = r->w == NONE ? LIPI_LANG_NONE : pa->wlang[r->w];
            if (lang == LIPI_LANG_NONE)
                continue;
            size_t i = lp_probe(pa, r->key, lang);
            LIPI_ASSERT(pa->t[i].lang != NONE && pa->t[i].count >= r->n);
            pa->t[i].count -= r->n;
        }
        for (size_t k = 0; k < d->n_add; k++) {
            const delta *a = &d->add[k];
            uint32_t lang = a->w == NONE ? LIPI_LANG_NONE : pa->wlang[a->w];
            if (lang == LIPI_LANG_NONE)
                continue;
            size_t i;
            if (lp_slot_of(pa, lang, a->key, &i) != LIPI_OK)
                return LIPI_ENOMEM;
            pa->t[i].count += a->n;
            if (pa->t[i].epoch == pa->epoch)
                continue;
            pa->t[i].epoch = pa->epoch;
            void *q = pa->raised;
            if (lipi_grow(&q, &pa->raised_cap, pa->n_raised + 1, sizeof *pa->raised) != LIPI_OK)
                return LIPI_ENOMEM;
            pa->raised = q;
            pa->raised[pa->n_raised++] = (lp_ref){a->key, lang};
        }
    }
    /* Slots may move while others are added: push by key. */
    for (size_t r = 0; r < pa->n_raised; r++) {
        const lp_ref *ref = &pa->raised[r];
        uint64_t c = pa->t[lp_probe(pa, ref->key, ref->lang)].count;
        if (c >= b->min_count &&
            lp_push(b, &pa->heap[ref->lang], c, pair_find(b, ref->key)) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    return LIPI_OK;
}

/* Drops the stale and unusable entries on top of language lang's heap;
 * *out is the pair on top, or NONE when the heap is empty. */
static lipi_status lp_top(bpe *b, uint32_t lang, uint32_t *out)
{
    bpe_parity *pa = b->par;
    lp_heap *h = &pa->heap[lang];
    while (h->n) {
        heap_ent top = h->e[0];
        uint64_t cur = lp_count(pa, lang, pair_key(top.left, top.right));
        const pair_rec *pr = &b->pairs[top.pair];
        if (cur == top.count && pr->count >= b->min_count && !is_forbidden(b, top.pair)) {
            *out = top.pair;
            return LIPI_OK;
        }
        lp_pop(b, h);
        /* stale, rare, or never to be merged; a fallen count goes back */
        if (cur < top.count && cur >= b->min_count && pr->count >= b->min_count &&
            !is_forbidden(b, top.pair) && lp_push(b, h, cur, top.pair) != LIPI_OK)
            return LIPI_ENOMEM;
    }
    *out = NONE;
    return LIPI_OK;
}

/* The next pair: the most frequent one of the worst language on the dev
 * set that has one, or the plain choice (first guard phase; the worst
 * language within parity_threshold of the best; no language has a pair). */
static lipi_status parity_next_pair(bpe *b, uint32_t *out)
{
    bpe_parity *pa = b->par;
    if (!pa->live)
        return next_pair(b, out);
    const uint64_t *tokens = lipi_dev_track_tokens(pa->dev);
    size_t n;
    lipi_balance_rank(pa->bal, tokens, pa->order, &n);
    if (n == 0)
        return next_pair(b, out);
    uint32_t wl = pa->order[0], bl = pa->order[n - 1];
    double cbest = lipi_balance_dev_cost(pa->bal, bl, tokens[bl]);
    if (b->opt->parity_threshold > 1.0 &&
        lipi_balance_dev_cost(pa->bal, wl, tokens[wl]) <= cbest * b->opt->parity_threshold)
        return next_pair(b, out);
    /* Each language's best pair, scored count * (cost / best cost)^K;
     * without K only the worst language with a pair counts. */
    double k_exp = b->opt->parity_exponent, best_score = -1.0;
    uint32_t pick = NONE;
    for (size_t k = 0; k < n; k++) {
        uint32_t lang = pa->order[k], p;
        if (lp_top(b, lang, &p) != LIPI_OK)
            return LIPI_ENOMEM;
        if (p == NONE)
            continue;
        if (k_exp <= 0.0) {
            pick = lang;
            break;
        }
        double ratio = lipi_balance_dev_cost(pa->bal, lang, tokens[lang]) / cbest;
        double score = (double)pa->heap[lang].e[0].count * pow(ratio, k_exp);
        if (score > best_score) {
            best_score = score;
            pick = lang;
        }
    }
    /* Languages without a dev file (a script with no dev text) compete
     * at the cheapest cost, times W, instead of starving. */
    double w_others = b->opt->parity_others;
    for (uint32_t lang = 1; k_exp > 0.0 && w_others > 0.0 && lang < pa->n_langs; lang++) {
        size_t files;
        uint32_t p;
        lipi_balance_dev(pa->bal, lang, &files);
        if (files)
            continue;
        if (lp_top(b, lang, &p) != LIPI_OK)
            return LIPI_ENOMEM;
        if (p == NONE)
            continue;
        double score = (double)pa->heap[lang].e[0].count * w_others;
        if (score > best_score) {
            best_score = score;
            pick = lang;
        }
    }
    if (pick != NONE) {
        *out = lp_pop(b, &pa->heap[pick]).pair;
        return LIPI_OK;
    }
    return next_pair(b, out);
}

static lipi_status learn(bpe *b, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_buf r = {0}, v = {0};
    size_t total = b->opt->common.vocab_size - b->n_tok;
    double last = now_seconds();

    b->clusters_only = b->guard;
    TRY(count_pairs(b));
    if (b->par)
        TRY(parity_recount(b));
    report(b, total, false);
    while (b->n_tok < b->opt->common.vocab_size) {
        uint32_t p;
        TRY(b->par ? parity_next_pair(b, &p) : next_pair(b, &p));
        if (p == NONE || b->pairs[p].count < b->opt->min_frequency) {
            if (!b->clusters_only)
                break;
            /* Clusters are built: count again, whole clusters included. */
            b->clusters_only = false;
            TRY(count_pairs(b));
            if (b->par)
                TRY(parity_recount(b));
            continue;
        }
        uint32_t x = b->pairs[p].left, y = b->pairs[p].right;
        uint64_t count = b->pairs[p].count;

        /* The new token's bytes (and GPT-2 string). */
        size_t lx, ly;
        const char *sx = tok_raw(b, x, &lx), *sy = tok_raw(b, y, &ly);
        r.len = 0;
        TRY(lipi_buf_append(&r, sx, lx));
        sy = tok_raw(b, y, &ly);
        TRY(lipi_buf_append(&r, sy, ly));
        if (b->byte_units) {
            v.len = 0;
            sx = tok_vstr(b, x, &lx);
            TRY(lipi_buf_append(&v, sx, lx));
            sy = tok_vstr(b, y, &ly);
            TRY(lipi_buf_append(&v, sy, ly));
        }
        uint32_t found = b->byte_units ? tok_find(b, v.p, v.len) : tok_find(b, r.p, r.len);
        if (found != NONE && b->first_bf != NONE && found >= b->first_bf &&
            found < b->first_bf + 256) {
            /* Text like "<0x41>" must not become the token that decodes to
             * byte 0x41: leave this pair unmerged. */
            void *q = b->forbidden;
            TRY(lipi_grow(&q, &b->forbidden_cap, b->n_forbidden + 1, sizeof(uint64_t)));
            b->forbidden = q;
            b->forbidden[b->n_forbidden++] = pair_key(x, y);
            continue;
        }
        uint32_t z;
        TRY(tok_get(b, r.p, r.len, v.p, v.len, b->ulen[x] + b->ulen[y], &z));

        if (b->n_merges == b->merges_cap) {
            size_t cap = b->merges_cap;
            void *q = b->merges;
            TRY(lipi_grow(&q, &cap, b->n_merges + 1, sizeof *b->merges));
            b->merges = q;
            q = b->merge_count;
            TRY(lipi_grow(&q, &b->merges_cap, b->n_merges + 1, sizeof *b->merge_count));
            b->merge_count = q;
        }
        b->merges[b->n_merges][0] = x;
        b->merges[b->n_merges][1] = y;
        b->merges[b->n_merges][2] = z;
        b->merge_count[b->n_merges++] = count;

        b->merge_no++;
        TRY(merge_pair(b, p, x, y, z));
        if (b->par)
            TRY(parity_after_merge(b, x, y, z));
        if ((b->n_merges & 63) == 0 && b->opt->common.progress) {
            double t = now_seconds();
            if (t - last >= 0.1) {
                last = t;
                report(b, total, false);
            }
        }
    }
    report(b, total, true);
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory learning merges");
    lipi_buf_free(&r);
    lipi_buf_free(&v);
    return st;
}

/* Moves the vocabulary and merges into a model. */
static lipi_status make_model(bpe *b, lipi_bpe_model **out)
{
    lipi_bpe_model *m = lipi_calloc(1, sizeof *m);
    if (!m)
        return LIPI_ENOMEM;
    m->units = b->opt->units;
    m->byte_fallback = b->first_bf != NONE;
    m->n_special = b->n_special;
    m->n_tokens = b->n_tok;
    m->unk_id = -1;
    for (size_t i = 0; b->opt->common.unk_token && i < b->n_special; i++)
        if (strcmp(b->opt->common.special_tokens[i], b->opt->common.unk_token) == 0)
            m->unk_id = (int64_t)i;
    m->raw = b->raw.p;
    m->raw_off = b->raw_off;
    b->raw.p = NULL;
    b->raw_off = NULL;
    m->raw_off[0] = 0;
    if (b->byte_units) {
        m->vstr = b->vstr.p;
        m->vstr_off = b->vstr_off;
        m->vstr_off[0] = 0;
        b->vstr.p = NULL;
        b->vstr_off = NULL;
    }
    m->n_merges = b->n_merges;
    m->merges = b->merges;
    m->merge_count = b->merge_count;
    b->merges = NULL;
    b->merge_count = NULL;
    *out = m;
    return LIPI_OK;
}

lipi_status lipi_bpe_train(const lipi_counts *counts, const lipi_bpe_options *opt,
                           lipi_bpe_model **out, lipi_error *err)
{
    lipi_status st;
    bpe b = {0};
    *out = NULL;
    TRY(check_options(opt, err));
    b.opt = opt;
    b.byte_units = opt->units == LIPI_UNITS_BYTE;
    b.guard = opt->common.grapheme_guard;
    b.max_len = opt->max_token_length;
    b.min_count = opt->min_frequency > 1 ? opt->min_frequency : 1;
    b.floor = b.min_count;
    b.free_chunk = NONE;
    TRY(prepare(&b, counts, err));
    if (reserve_tables(&b, b.n_words) != LIPI_OK) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    if (opt->common.balance)
        TRY(parity_start(&b, counts, err));
    if (helpers_start(&b, thread_count(opt)) != LIPI_OK) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    TRY(learn(&b, err));
    if (make_model(&b, out) != LIPI_OK)
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
done:
    helpers_stop(&b);
    parity_free(b.par);
    bpe_free(&b);
    return st;
}

/* ======================================================================== */
/* Building the tokenizer                                                    */
/* ======================================================================== */

/* Sequence[pre, ByteLevel(use_regex=false)] through the tokenizer.json
 * form, so the result is what Hugging Face builds from the same JSON. */
static lipi_status byte_level_pretokenizer(lipi_pretokenizer *pre, lipi_pretokenizer **out,
                                           lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *inner = NULL, *seq = NULL, *list = NULL, *bl = NULL;
    *out = NULL;
    bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                   "trim_offsets", 1, "use_regex", 0);
    list = json_array();
    if (pre)
        inner = lipi_pretokenizer_to_json(pre);
    if (!bl || !list || (pre && !inner) || (inner && json_array_append(list, inner) != 0) ||
        json_array_append(list, bl) != 0 ||
        !(seq = json_pack("{s:s, s:O}", "type", "Sequence", "pretokenizers", list))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0,
                            "out of memory building the byte-level pre-tokenizer");
        goto done;
    }
    st = lipi_pretokenizer_from_json(seq, "pre_tokenizer", out, err);
done:
    json_decref(inner);
    json_decref(bl);
    json_decref(list);
    json_decref(seq);
    lipi_pretokenizer_free(pre);
    return st;
}

/* The decoder that undoes the model's units, as a tokenizer.json value:
 * ByteLevel for byte units; Sequence[ByteFallback, Fuse] for char units,
 * where spaces are ordinary characters inside tokens. */
static const char *model_decoder_json(lipi_units units)
{
    if (units == LIPI_UNITS_BYTE)
        return "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
               "\"trim_offsets\": true, \"use_regex\": false}";
    return "{\"type\": \"Sequence\", \"decoders\": "
           "[{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}";
}

lipi_status lipi_bpe_model_to_tokenizer(const lipi_bpe_model *m, lipi_normalizer *norm,
                                        lipi_pretokenizer *pre, lipi_tokenizer **out,
                                        lipi_error *err)
{
    lipi_status st;
    const char **toks = NULL;
    size_t *lens = NULL;
    uint32_t (*merges)[2] = NULL;
    *out = NULL;

    if (m->units == LIPI_UNITS_BYTE) {
        lipi_pretokenizer *wrapped;
        st = byte_level_pretokenizer(pre, &wrapped, err);
        pre = NULL;
        if (st != LIPI_OK)
            goto done;
        pre = wrapped;
    }
    toks = lipi_calloc(m->n_tokens, sizeof *toks);
    lens = lipi_calloc(m->n_tokens, sizeof *lens);
    merges = lipi_calloc(m->n_merges ? m->n_merges : 1, sizeof *merges);
    if (!toks || !lens || !merges) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < m->n_tokens; i++)
        toks[i] = lipi_bpe_model_token(m, i, &lens[i]);
    for (size_t r = 0; r < m->n_merges; r++) {
        merges[r][0] = m->merges[r][0];
        merges[r][1] = m->merges[r][1];
    }
    lipi_model_options mo;
    lipi_model_options_default(LIPI_MODEL_BPE, &mo);
    mo.unk_id = m->unk_id;
    mo.byte_fallback = m->byte_fallback;
    mo.byte_level = m->units == LIPI_UNITS_BYTE;
    lipi_trained_vocab v = {
        .type = LIPI_MODEL_BPE, .opt = &mo, .tokens = toks, .lens = lens, .n = m->n_tokens,
        .merges = (const uint32_t(*)[2])merges, .n_merges = m->n_merges,
        .n_special = m->n_special, .decoder_json = model_decoder_json(m->units)};
    st = lipi_train_assemble(&v, norm, pre, out, err);
    norm = NULL; /* stolen */
    pre = NULL;
done:
    lipi_normalizer_free(norm);
    lipi_pretokenizer_free(pre);
    lipi_free(toks);
    lipi_free(lens);
    lipi_free(merges);
    return st;
}

lipi_status lipi_bpe_train_counts(const lipi_counts *counts, lipi_normalizer *norm,
                                  lipi_pretokenizer *pre, const lipi_bpe_options *opt,
                                  lipi_tokenizer **out, lipi_error *err)
{
    lipi_bpe_model *m = NULL;
    *out = NULL;
    lipi_status st = lipi_bpe_train(counts, opt, &m, err);
    if (st == LIPI_OK)
        st = lipi_bpe_model_to_tokenizer(m, norm, pre, out, err);
    else {
        lipi_normalizer_free(norm);
        lipi_pretokenizer_free(pre);
    }
    lipi_bpe_model_free(m);
    return st;
}

lipi_status lipi_bpe_train_files(const char *const *paths, size_t n_paths,
                                 lipi_normalizer *norm, lipi_pretokenizer *pre,
                                 const lipi_count_options *count_opt,
                                 const lipi_bpe_options *opt, lipi_tokenizer **out,
                                 lipi_error *err)
{
    lipi_counts *counts = NULL;
    *out = NULL;
    lipi_status st = lipi_count_files(paths, n_paths, norm, pre, count_opt, &counts, err);
    if (st == LIPI_OK) {
        st = lipi_bpe_train_counts(counts, norm, pre, opt, out, err);
    } else {
        lipi_normalizer_free(norm);
        lipi_pretokenizer_free(pre);
    }
    lipi_counts_free(counts);
    return st;
}

/* Double-array trie construction. Keys are sorted, then states are laid out
 * depth-first, each one's children at the first base after the state's own
 * cell where all of their cells are free (darts-style first fit over a list
 * of free cells, started at the parent). A long walk then stays within a
 * few cache lines: breadth-first first fit put every level in another
 * region of the array, a line per byte (o200k and cl100k, whose
 * backtracking walks whole tokens: 1.03-1.04x on one thread; the Unigram
 * and WordPiece benchmarks did not move, bench/RESULTS.md). */
#include "encoder/trie_impl.h"

#include <stdlib.h>
#include <string.h>

/* A key and its index, sorted bytewise (shorter first on a common prefix,
 * then by index so the smallest index of a repeated key comes first). */
typedef struct {
    const char *s;
    size_t len;
    uint32_t idx;
} key_rec;

static int key_cmp(const void *a, const void *b)
{
    const key_rec *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int r = n ? memcmp(x->s, y->s, n) : 0;
    if (r)
        return r;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sorts rec[0..n) as key_cmp does, by a stable most-significant-byte
 * radix sort (rec starts in index order, so equal keys stay in it): a
 * vocabulary of 200,000 tokens sorts in a few million steps, where qsort's
 * comparisons through a function pointer took most of a trie's build.
 * Ranges wait on an explicit stack (they are disjoint, so at most n), never
 * on the C stack, however long the keys. Small ranges are finished by
 * insertion sort, which is stable too. */
#define RADIX_MIN 24

typedef struct {
    size_t lo, hi, depth;
} sort_range;

static lipi_status sort_keys(key_rec *rec, size_t n)
{
    key_rec *tmp = lipi_reallocarray(NULL, n ? n : 1, sizeof *tmp);
    sort_range *stack = lipi_reallocarray(NULL, n ? n : 1, sizeof *stack);
    size_t sn = 0;
    if (!tmp || !stack) {
        lipi_free(tmp);
        lipi_free(stack);
        return LIPI_ENOMEM;
    }
    if (n > 1)
        stack[sn++] = (sort_range){0, n, 0};
    while (sn > 0) {
        sort_range r = stack[--sn];
        size_t lo = r.lo, hi = r.hi, d = r.depth;
        if (hi - lo < RADIX_MIN) {
            for (size_t i = lo + 1; i < hi; i++) {
                key_rec x = rec[i];
                size_t j = i;
                while (j > lo && key_cmp(&rec[j - 1], &x) > 0) {
                    rec[j] = rec[j - 1];
                    j--;
                }
                rec[j] = x;
            }
            continue;
        }
        /* Bucket 0: keys that end at d (they sort first); c + 1: byte c. */
        size_t count[257] = {0}, at[257];
        for (size_t i = lo; i < hi; i++)
            count[rec[i].len > d ? (unsigned char)rec[i].s[d] + 1u : 0]++;
        if (count[0] == 0) {
            /* All keys continue with one byte: nothing moves, look deeper. */
            size_t b = (unsigned char)rec[lo].s[d] + 1u;
            if (count[b] == hi - lo) {
                stack[sn++] = (sort_range){lo, hi, d + 1};
                continue;
            }
        }
        for (size_t b = 0, sum = lo; b < 257; b++) {
            at[b] = sum;
            sum += count[b];
        }
        for (size_t i = lo; i < hi; i++)
            tmp[at[rec[i].len > d ? (unsigned char)rec[i].s[d] + 1u : 0]++] = rec[i];
        memcpy(rec + lo, tmp + lo, (hi - lo) * sizeof *rec);
        /* Bucket 0 holds equal keys, already in index order. */
        for (size_t b = 1, start = lo + count[0]; b < 257; start += count[b], b++)
            if (count[b] > 1)
                stack[sn++] = (sort_range){start, start + count[b], d + 1};
    }
    lipi_free(tmp);
    lipi_free(stack);
    return LIPI_OK;
}

/* Free cells form a doubly linked list in address order, so the search for
 * a base visits free cells only. A cell that failed as the anchor (the
 * first child's cell) many times leaves the list (it stays free and can
 * still take a later child), which keeps the build near linear. */
#define ANCHOR_TRIES 16

typedef struct {
    lipi_datrie t;
    int32_t *nxt, *prv;  /* free list links, -1 none */
    uint64_t *listed;    /* bit per cell: in the free list */
    uint8_t *tries;      /* failed anchor attempts; 255: not in the list */
    uint8_t *based;      /* 1: some state's children start here */
    int32_t head, tail;
} builder;

static void unlink_cell(builder *b, int32_t c)
{
    if (b->tries[c] == 255)
        return;
    int32_t p = b->prv[c], n = b->nxt[c];
    if (p >= 0)
        b->nxt[p] = n;
    else
        b->head = n;
    if (n >= 0)
        b->prv[n] = p;
    else
        b->tail = p;
    b->tries[c] = 255;
    b->listed[c >> 6] &= ~(UINT64_C(1) << (c & 63));
}

/* The first cell in the free list from cell c to c + 4095, or -1. Bounded:
 * a state whose earlier siblings' subtrees filled everything after it
 * would otherwise scan to the end of the array. */
static int32_t first_listed(const builder *b, size_t c)
{
    size_t words = b->t.size >> 6, i = c >> 6, end = i + 64 < words ? i + 64 : words;
    if (i >= words)
        return -1;
    uint64_t w = b->listed[i] & (~UINT64_C(0) << (c & 63));
    while (!w) {
        if (++i == end)
            return -1;
        w = b->listed[i];
    }
    return (int32_t)(i << 6 | (size_t)__builtin_ctzll(w));
}

static lipi_status grow(builder *b, size_t need)
{
    if (need <= b->t.size)
        return LIPI_OK;
    size_t old = b->t.size, cap = old ? old : 1024;
    while (cap < need) {
        if (cap > (size_t)INT32_MAX / 2)
            return LIPI_ENOMEM;
        cap *= 2;
    }
    lipi_datrie_node *node = lipi_reallocarray(b->t.node, cap, sizeof *node);
    if (!node)
        return LIPI_ENOMEM;
    b->t.node = node;
    int32_t *value = lipi_reallocarray(b->t.value, cap, sizeof *value);
    if (!value)
        return LIPI_ENOMEM;
    b->t.value = value;
    int32_t *nxt = lipi_reallocarray(b->nxt, cap, sizeof *nxt);
    if (!nxt)
        return LIPI_ENOMEM;
    b->nxt = nxt;
    int32_t *prv = lipi_reallocarray(b->prv, cap, sizeof *prv);
    if (!prv)
        return LIPI_ENOMEM;
    b->prv = prv;
    uint8_t *tries = lipi_realloc(b->tries, cap);
    if (!tries)
        return LIPI_ENOMEM;
    b->tries = tries;
    uint8_t *based = lipi_realloc(b->based, cap);
    if (!based)
        return LIPI_ENOMEM;
    b->based = based;
    /* cap is a power of two >= 1024: whole words of bits. */
    uint64_t *listed = lipi_reallocarray(b->listed, cap >> 6, sizeof *listed);
    if (!listed)
        return LIPI_ENOMEM;
    b->listed = listed;
    memset(listed + (old >> 6), 0xff, ((cap - old) >> 6) * sizeof *listed);
    if (old == 0)
        listed[0] &= ~UINT64_C(1);
    b->t.size = cap;
    for (size_t i = old; i < cap; i++) {
        node[i] = (lipi_datrie_node){0, -1};
        value[i] = -1;
        tries[i] = 0;
        based[i] = 0;
        /* Cell 0 is the root, never free. */
        if (i == 0) {
            tries[0] = 255;
            continue;
        }
        prv[i] = b->tail;
        nxt[i] = -1;
        if (b->tail >= 0)
            nxt[b->tail] = (int32_t)i;
        else
            b->head = (int32_t)i;
        b->tail = (int32_t)i;
    }
    return LIPI_OK;
}

/* A state waiting to be laid out: keys [lo, hi) share its prefix of
 * length depth. */
typedef struct {
    int32_t state;
    size_t lo, hi, depth;
} pending;

/* First base >= 1 that no other state has and whose cells base + label + 1
 * are all free, trying first the anchors (the first child's cell) after
 * cell `near` when there is one nearby, then all of them. Bases are unique
 * so that a child can be recognised by its label alone (lipi_datrie32). */
static lipi_status find_base(builder *b, const unsigned char *labels, size_t nl, size_t near,
                             size_t *out)
{
    lipi_status st = LIPI_OK;
    size_t first = (size_t)labels[0] + 1, last = (size_t)labels[nl - 1] + 1;
    int32_t start = first_listed(b, near + 1), stop = -1;
    if (start < 0 || start == b->head)
        start = b->head;
    for (int32_t f = start; f >= 0 && (stop < 0 || f < stop);) {
        int32_t next = b->nxt[f];
        if ((size_t)f > first) {
            size_t base = (size_t)f - first, k = 1;
            if (!b->based[base]) {
                TRY(grow(b, base + last + 1));
                while (k < nl && b->t.node[base + labels[k] + 1].check == -1)
                    k++;
                if (k == nl) {
                    *out = base;
                    return LIPI_OK;
                }
            }
            if (++b->tries[f] >= ANCHOR_TRIES)
                unlink_cell(b, f);
        }
        f = next;
        if (f < 0 && stop < 0 && start != b->head) {
            f = b->head; /* then the cells before near */
            stop = start;
        }
    }
    /* Past the end of the arrays every cell is free. */
    size_t base = b->t.size > first ? b->t.size - first : 1;
    while (base < b->t.size && b->based[base])
        base++;
    TRY(grow(b, base + last + 1));
    *out = base;
done:
    return st;
}

lipi_status lipi_datrie_build(lipi_datrie *t, const lipi_strref *keys, const uint32_t *values,
                              size_t n)
{
    lipi_status st = LIPI_OK;
    builder b = {.head = -1, .tail = -1};
    key_rec *rec = NULL;
    pending *stack = NULL; /* states to lay out */
    size_t nrec = 0, scap = 0, sn = 0;

    memset(t, 0, sizeof *t);
    rec = lipi_reallocarray(NULL, n ? n : 1, sizeof *rec);
    if (!rec) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (keys[i].s && keys[i].len)
            rec[nrec++] = (key_rec){keys[i].s, keys[i].len, (uint32_t)i};
    TRY(sort_keys(rec, nrec));

    TRY(grow(&b, 1024));
    b.t.node[0].check = -2; /* the root has no parent */
    scap = 64;
    stack = lipi_reallocarray(NULL, scap, sizeof *stack);
    if (!stack) {
        st = LIPI_ENOMEM;
        goto done;
    }
    stack[sn++] = (pending){0, 0, nrec, 0};

    while (sn > 0) {
        pending p = stack[--sn];
        size_t lo = p.lo;
        /* Keys equal to the prefix end here; the smallest index wins. */
        if (lo < p.hi && rec[lo].len == p.depth) {
            b.t.value[p.state] = (int32_t)values[rec[lo].idx];
            while (lo < p.hi && rec[lo].len == p.depth)
                lo++;
        }
        if (lo == p.hi)
            continue;
        /* Children: distinct bytes at position depth (keys are sorted). */
        unsigned char labels[256];
        size_t starts[257], nl = 0, base;
        for (size_t i = lo; i < p.hi; i++) {
            unsigned char c = (unsigned char)rec[i].s[p.depth];
            if (nl == 0 || labels[nl - 1] != c) {
                labels[nl] = c;
                starts[nl] = i;
                nl++;
            }
        }
        starts[nl] = p.hi;
        TRY(find_base(&b, labels, nl, (size_t)p.state, &base));
        if (base + 257 > (size_t)INT32_MAX) {
            st = LIPI_ENOMEM;
            goto done;
        }
        b.t.node[p.state].base = (uint32_t)base;
        b.based[base] = 1;
        for (size_t k = 0; k < nl; k++) {
            size_t c = base + labels[k] + 1;
            b.t.node[c].check = p.state;
            unlink_cell(&b, (int32_t)c);
        }
        if (sn + nl > scap) {
            pending *q = lipi_reallocarray(stack, scap * 2 + nl, sizeof *stack);
            if (!q) {
                st = LIPI_ENOMEM;
                goto done;
            }
            stack = q;
            scap = scap * 2 + nl;
        }
        /* Pushed last label first: the children are laid out in label
         * order. */
        for (size_t k = nl; k-- > 0;)
            stack[sn++] = (pending){(int32_t)(base + labels[k] + 1), starts[k], starts[k + 1],
                                    p.depth + 1};
    }
    /* Room for any byte after any base: a step needs no bounds check. */
    size_t top = 0;
    for (size_t i = 0; i < b.t.size; i++)
        if (b.t.node[i].base > top)
            top = b.t.node[i].base;
    TRY(grow(&b, top + 256 + 2));
    for (size_t i = 0; i < b.t.size; i++)
        if (b.t.value[i] >= 0)
            b.t.node[i].base |= LIPI_DATRIE_FINAL;
    *t = b.t;
    b.t = (lipi_datrie){0};
done:
    lipi_free(rec);
    lipi_free(stack);
    lipi_free(b.nxt);
    lipi_free(b.prv);
    lipi_free(b.tries);
    lipi_free(b.based);
    lipi_free(b.listed);
    lipi_datrie_free(&b.t);
    return st;
}

void lipi_datrie_free(lipi_datrie *t)
{
    lipi_free(t->node);
    lipi_free(t->value);
    memset(t, 0, sizeof *t);
}

lipi_status lipi_datrie32_from(lipi_datrie32 *c, const lipi_datrie *t)
{
    memset(c, 0, sizeof *c);
    if (!t->size || t->size > LIPI_DATRIE32_MAX)
        return LIPI_EINVAL;
    c->unit = lipi_calloc(t->size, sizeof *c->unit);
    c->value = lipi_reallocarray(NULL, t->size, sizeof *c->value);
    if (!c->unit || !c->value) {
        lipi_datrie32_free(c);
        return LIPI_ENOMEM;
    }
    c->size = t->size;
    for (size_t i = 0; i < t->size; i++) {
        const lipi_datrie_node *nd = &t->node[i];
        uint32_t u = (nd->base & ~LIPI_DATRIE_FINAL) << 10;
        if (nd->base & LIPI_DATRIE_FINAL)
            u |= 0x200;
        if (nd->check >= 0) /* a child: its label, from its parent's base */
            u |= 0x100 | (uint32_t)(i - (t->node[nd->check].base & ~LIPI_DATRIE_FINAL) - 1);
        c->unit[i] = u;
        c->value[i] = t->value[i];
    }
    return LIPI_OK;
}

void lipi_datrie32_free(lipi_datrie32 *c)
{
    if (!c->mapped) {
        lipi_free(c->unit);
        lipi_free(c->value);
    }
    memset(c, 0, sizeof *c);
}

/* ======================================================================== */
/* Tries kept in the table cache                                            */
/* ======================================================================== */

/* Layout in the cache: size, node[size] (base, check), value[size]; a
 * compact trie: size, unit[size], value[size]. Host byte order (the cache
 * key says which). */

void lipi_datrie_put(lipi_tabcache_writer *w, const lipi_datrie *t)
{
    lipi_tabcache_put_u64(w, t->size);
    lipi_tabcache_put(w, t->node, t->size * sizeof *t->node);
    lipi_tabcache_put(w, t->value, t->size * sizeof *t->value);
}

void lipi_datrie32_put(lipi_tabcache_writer *w, const lipi_datrie32 *t)
{
    lipi_tabcache_put_u64(w, t->size);
    lipi_tabcache_put(w, t->unit, t->size * sizeof *t->unit);
    lipi_tabcache_put(w, t->value, t->size * sizeof *t->value);
}

/* Reads a trie's size (at least 258 cells, so that the root can have any
 * child, at most max) and its two arrays: the cells (cell_size bytes each)
 * and the values. On failure the arrays read so far are in *cells and
 * *value for the caller to free. */
static bool get_cells(lipi_tabcache_reader *r, size_t max, size_t cell_size, void **cells,
                      int32_t **value, size_t *size)
{
    uint64_t n;
    *cells = NULL;
    *value = NULL;
    *size = 0;
    if (!lipi_tabcache_get_u64(r, &n) || n < 258 || n > max ||
        !lipi_tabcache_fits(r, n, cell_size + sizeof **value))
        return false;
    *cells = lipi_reallocarray(NULL, n, cell_size);
    *value = lipi_reallocarray(NULL, n, sizeof **value);
    *size = n;
    return *cells && *value && lipi_tabcache_get(r, *cells, n * cell_size) &&
           lipi_tabcache_get(r, *value, n * sizeof **value);
}

bool lipi_datrie_get(lipi_tabcache_reader *r, lipi_datrie *t, const lipi_strref *keys, size_t n)
{
    size_t size;
    void *cells;
    memset(t, 0, sizeof *t);
    bool got = get_cells(r, INT32_MAX, sizeof *t->node, &cells, &t->value, &t->size);
    t->node = cells;
    size = t->size;
    if (!got)
        goto bad;
    /* A step reads base + byte + 1 without a bounds check, and the compact
     * copy takes a child's label from its parent's base. */
    if (t->node[0].check != -2)
        goto bad;
    for (size_t i = 0; i < size; i++) {
        const lipi_datrie_node *nd = &t->node[i];
        size_t base = nd->base & ~LIPI_DATRIE_FINAL;
        bool final = (nd->base & LIPI_DATRIE_FINAL) != 0;
        if (base + 257 >= size || (final ? t->value[i] < 0 || (size_t)t->value[i] >= n
                                         : t->value[i] != -1) ||
            nd->check < -2 || (i > 0 && nd->check == -2) || (nd->check >= 0 && (size_t)nd->check >= size))
            goto bad;
        if (nd->check >= 0) {
            size_t pb = t->node[nd->check].base & ~LIPI_DATRIE_FINAL;
            if (i <= pb || i - pb - 1 > 255)
                goto bad;
        }
    }
    return true;
bad:
    lipi_datrie_free(t);
    return false;
}

/* Whether the cells of a compact trie over n keys can be walked: each base
 * leaves room for any byte's child, a final cell names a key, another
 * holds -1. Without an early exit. GCC -O2 does not vectorize it (9.5M of
 * o200k's warm load under callgrind): lipi_datrie32_cells_ok runs 8 cells
 * at a time with AVX2. */
static bool cells_ok_from(const uint32_t *unit, const int32_t *value, size_t from, size_t size,
                          size_t n)
{
    uint32_t bad = 0;
    for (size_t i = from; i < size; i++) {
        uint32_t final = unit[i] & 0x200;
        bad |= (size_t)(unit[i] >> 10) + 257 >= size;
        bad |= final ? value[i] < 0 || (size_t)value[i] >= n : value[i] != -1;
    }
    return !bad;
}

bool lipi_datrie32_cells_ok_ref(const uint32_t *unit, const int32_t *value, size_t size, size_t n)
{
    return cells_ok_from(unit, value, 0, size, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* unit, value: (size); 258 <= size <= LIPI_DATRIE32_MAX, 1 <= n <= INT32_MAX,
 * so bases and bounds compare as signed 32-bit numbers. */
__attribute__((target("avx2"))) static bool cells_ok_avx2(const uint32_t *unit,
                                                          const int32_t *value, size_t size,
                                                          size_t n)
{
    const __m256i base_max = _mm256_set1_epi32((int)(size - 258)),
                  id_max = _mm256_set1_epi32((int)(n - 1)), fin = _mm256_set1_epi32(0x200),
                  none = _mm256_set1_epi32(-1), zero = _mm256_setzero_si256();
    __m256i bad = zero;
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(unit + i));
        __m256i v = _mm256_loadu_si256((const __m256i *)(value + i));
        __m256i is_final = _mm256_cmpeq_epi32(_mm256_and_si256(u, fin), fin);
        __m256i out_of_ids = _mm256_or_si256(_mm256_cmpgt_epi32(zero, v),
                                             _mm256_cmpgt_epi32(v, id_max));
        __m256i not_none = _mm256_xor_si256(_mm256_cmpeq_epi32(v, none), none);
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(_mm256_srli_epi32(u, 10), base_max));
        bad = _mm256_or_si256(bad, _mm256_blendv_epi8(not_none, out_of_ids, is_final));
    }
    return _mm256_testz_si256(bad, bad) && cells_ok_from(unit, value, i, size, n);
}
#endif

bool lipi_datrie32_cells_ok(const uint32_t *unit, const int32_t *value, size_t size, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (size >= 258 && size <= LIPI_DATRIE32_MAX && n >= 1 && n <= INT32_MAX &&
        __builtin_cpu_supports("avx2"))
        return cells_ok_avx2(unit, value, size, n);
#endif
    return lipi_datrie32_cells_ok_ref(unit, value, size, n);
}

bool lipi_datrie32_map(lipi_tabcache_map *f, lipi_datrie32 *t, size_t n)
{
    const uint64_t *size = lipi_tabcache_map_next(f, 1, sizeof *size);
    memset(t, 0, sizeof *t);
    if (!size || *size < 258 || *size > LIPI_DATRIE32_MAX)
        return false;
    const uint32_t *unit = lipi_tabcache_map_next(f, *size, sizeof *unit);
    const int32_t *value = lipi_tabcache_map_next(f, *size, sizeof *value);
    if (!unit || !value || !lipi_datrie32_cells_ok(unit, value, (size_t)*size, n))
        return false;
    /* Read-only pages: nothing writes a trie once built. */
    *t = (lipi_datrie32){(uint32_t *)unit, (int32_t *)value, (size_t)*size, true};
    return true;
}

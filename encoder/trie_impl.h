/* Internal: a double-array trie over byte strings (tokens), for WordPiece's
 * longest match, Unigram's lattice, backtracking BPE and the added-token
 * matcher. Never included by a public header.
 *
 * State s has children at base(s) + byte + 1; a child t belongs to s when
 * node[t].check == s. A state's base and check share one 8-byte node, so a
 * step reads one cache line: the walks are memory-bound on large
 * vocabularies. value[s] is the value of the key ending at s, or -1; the
 * node's top bit says whether there is one, so a walk reads value[] once.
 * The root is state 0. Built once, then only read (thread-shareable).
 */
#ifndef LIPI_TRIE_IMPL_H
#define LIPI_TRIE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer_layout.h"

#define LIPI_DATRIE_FINAL 0x80000000u

typedef struct {
    uint32_t base;  /* LIPI_DATRIE_FINAL | children's base */
    int32_t check;  /* parent state; -1 free, -2 the root */
} lipi_datrie_node;

typedef struct {
    lipi_datrie_node *node;
    int32_t *value;
    size_t size; /* entries of each array; every base + 256 + 1 < size */
} lipi_datrie;

/* Builds a trie mapping keys[i] to values[i] (values < INT32_MAX) for i in
 * [0, n); keys with s == NULL are skipped, empty keys are ignored (no
 * token is empty). When a key repeats, the one with the smaller index wins.
 * LIPI_ENOMEM on failure (t left empty). */
lipi_status lipi_datrie_build(lipi_datrie *t, const lipi_strref *keys, const uint32_t *values,
                              size_t n);
void lipi_datrie_free(lipi_datrie *t);

/* The child of state s for byte c, or -1. */
static inline int32_t lipi_datrie_step(const lipi_datrie *t, int32_t s, unsigned char c)
{
    size_t n = (size_t)(t->node[s].base & ~LIPI_DATRIE_FINAL) + c + 1;
    if (t->node[n].check != s)
        return -1;
    return (int32_t)n;
}

/* Whether a key ends at state s. */
static inline int lipi_datrie_final(const lipi_datrie *t, int32_t s)
{
    return (t->node[s].base & LIPI_DATRIE_FINAL) != 0;
}

/* Length of the longest key that is a prefix of s[0..len) (0 when none) and
 * its value in *value. */
static inline size_t lipi_datrie_longest(const lipi_datrie *t, const char *s, size_t len,
                                         int32_t *value)
{
    size_t best = 0;
    int32_t st = 0, best_st = -1;
    if (!t->size)
        return 0;
    for (size_t i = 0; i < len; i++) {
        st = lipi_datrie_step(t, st, (unsigned char)s[i]);
        if (st < 0)
            break;
        if (lipi_datrie_final(t, st)) {
            best = i + 1;
            best_st = st;
        }
    }
    if (best_st >= 0)
        *value = t->value[best_st];
    return best;
}

/* The same trie in 4-byte units, for walks that must stay in cache (half
 * the bytes of lipi_datrie's nodes). A unit is base << 10 | final << 9 |
 * used << 8 | label: bases are unique to their state (the builder makes
 * them so), so a used cell at base + c + 1 labelled c is that state's child.
 * Up to LIPI_DATRIE32_MAX cells. */
typedef struct {
    uint32_t *unit;
    int32_t *value;
    size_t size;
    bool mapped;  /* unit and value point into a mapped cache file (not freed) */
} lipi_datrie32;

#define LIPI_DATRIE32_MAX ((size_t)1 << 22)

/* Whether the cells unit, value: (size) of a compact trie over n keys can
 * be walked (each base leaves room for any byte's child, a final cell
 * names a key, another holds -1). _ref is the portable loop; the other
 * takes AVX2 where there is one, with the same answer. */
bool lipi_datrie32_cells_ok(const uint32_t *unit, const int32_t *value, size_t size, size_t n);
bool lipi_datrie32_cells_ok_ref(const uint32_t *unit, const int32_t *value, size_t size, size_t n);

/* Copies t into c; LIPI_EINVAL when t has more than LIPI_DATRIE32_MAX
 * cells (or none), LIPI_ENOMEM. */
lipi_status lipi_datrie32_from(lipi_datrie32 *c, const lipi_datrie *t);
void lipi_datrie32_free(lipi_datrie32 *c);

/* The child of state s for byte c, or -1. */
static inline int32_t lipi_datrie32_step(const lipi_datrie32 *t, int32_t s, unsigned char c)
{
    uint32_t n = (t->unit[s] >> 10) + c + 1;
    return (t->unit[n] & 0x1ff) == (0x100u | c) ? (int32_t)n : -1;
}

/* Whether a key ends at state s. */
static inline int lipi_datrie32_final(const lipi_datrie32 *t, int32_t s)
{
    return (t->unit[s] & 0x200) != 0;
}

/* lipi_datrie32_step's walk with the unit of the state it stands on in
 * hand: the cell that said a child is there is the child's unit, so a
 * step is one load, not two. */
static inline size_t lipi_datrie32_longest(const lipi_datrie32 *t, const char *s, size_t len,
                                           int32_t *value)
{
    size_t best = 0;
    if (len == 0)
        return 0; /* nothing read, not even the root (an empty trie has none) */
    uint32_t u = t->unit[0], st, best_st = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        st = (u >> 10) + c + 1;
        u = t->unit[st];
        if ((u & 0x1ff) != (0x100u | c))
            break;
        if (u & 0x200) {
            best = i + 1;
            best_st = st;
        }
    }
    if (best)
        *value = t->value[best_st];
    return best;
}

/* The table cache (tokenizer/tabcache.c): puts a trie into a cache file,
 * and reads one back for keys[0..n) mapped to their indices (a trie built
 * with values[i] = i). The reader checks every cell (bases leave room for
 * any byte, parents are cells, final cells and only they hold a value
 * below n), so that every walk stays inside the arrays and every value is
 * an id; false (t empty) when anything is off or memory runs out. It no
 * longer walks every key to check the trie maps it to its index: that
 * walk was the largest part of a warm o200k load (~9 ms of ~68, perf), and
 * the file is named by the SHA-256 of the keys and checksummed, so only a
 * deliberately doctored file could map a key elsewhere, which, like a
 * doctored tokenizer file, gives other ids but never a bad read
 * (tests/fuzz/fuzz_tabcache.c). */
void lipi_datrie_put(lipi_tabcache_writer *w, const lipi_datrie *t);
void lipi_datrie32_put(lipi_tabcache_writer *w, const lipi_datrie32 *t);
bool lipi_datrie_get(lipi_tabcache_reader *r, lipi_datrie *t, const lipi_strref *keys, size_t n);
/* The compact trie's cells used in place in the mapping f, checked as
 * lipi_datrie_get checks (the trie is t->mapped: the caller keeps the
 * mapping while t lives). */
bool lipi_datrie32_map(lipi_tabcache_map *f, lipi_datrie32 *t, size_t n);

#endif

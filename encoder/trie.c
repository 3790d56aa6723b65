/* Double-array trie construction. Keys are sorted, then states are laid out
 * breadth-first, each one at the first base where all of its children's
 * cells are free (darts-style first fit, with a moving lower bound so the
 * search does not rescan the densely used start of the arrays). */
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

typedef struct {
    lipi_datrie t;
    uint8_t *used;   /* cell taken (as a state) */
    size_t first_free;
} builder;

static lipi_status grow(builder *b, size_t need)
{
    if (need <= b->t.size)
        return LIPI_OK;
    size_t cap = b->t.size ? b->t.size : 1024;
    while (cap < need) {
        if (cap > (size_t)INT32_MAX / 2)
            return LIPI_ENOMEM;
        cap *= 2;
    }
    int32_t *base = lipi_reallocarray(b->t.base, cap, sizeof *base);
    if (!base)
        return LIPI_ENOMEM;
    b->t.base = base;
    int32_t *check = lipi_reallocarray(b->t.check, cap, sizeof *check);
    if (!check)
        return LIPI_ENOMEM;
    b->t.check = check;
    int32_t *value = lipi_reallocarray(b->t.value, cap, sizeof *value);
    if (!value)
        return LIPI_ENOMEM;
    b->t.value = value;
    uint8_t *used = lipi_realloc(b->used, cap);
    if (!used)
        return LIPI_ENOMEM;
    b->used = used;
    for (size_t i = b->t.size; i < cap; i++) {
        base[i] = 0;
        check[i] = -1;
        value[i] = -1;
        used[i] = 0;
    }
    b->t.size = cap;
    return LIPI_OK;
}

/* A state waiting to be laid out: keys [lo, hi) share its prefix of
 * length depth. */
typedef struct {
    int32_t state;
    size_t lo, hi, depth;
} pending;

lipi_status lipi_datrie_build(lipi_datrie *t, const lipi_strref *keys, const uint32_t *values,
                              size_t n)
{
    lipi_status st = LIPI_OK;
    builder b = {0};
    key_rec *rec = NULL;
    pending *queue = NULL;
    size_t nrec = 0, qcap = 0, qhead = 0, qtail = 0;

    memset(t, 0, sizeof *t);
    rec = lipi_reallocarray(NULL, n ? n : 1, sizeof *rec);
    if (!rec) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (keys[i].s && keys[i].len)
            rec[nrec++] = (key_rec){keys[i].s, keys[i].len, (uint32_t)i};
    if (nrec)
        qsort(rec, nrec, sizeof *rec, key_cmp);

    TRY(grow(&b, 1024));
    b.used[0] = 1;
    b.t.check[0] = -2; /* the root has no parent */
    b.first_free = 1;
    qcap = 64;
    queue = lipi_reallocarray(NULL, qcap, sizeof *queue);
    if (!queue) {
        st = LIPI_ENOMEM;
        goto done;
    }
    queue[qtail++] = (pending){0, 0, nrec, 0};

    while (qhead < qtail) {
        pending p = queue[qhead++];
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
        size_t starts[257], nl = 0;
        for (size_t i = lo; i < p.hi; i++) {
            unsigned char c = (unsigned char)rec[i].s[p.depth];
            if (nl == 0 || labels[nl - 1] != c) {
                labels[nl] = c;
                starts[nl] = i;
                nl++;
            }
        }
        starts[nl] = p.hi;
        /* First fit: a base whose child cells are all free. States may share
         * a base: check[] names the parent of every cell. */
        while (b.first_free < b.t.size && b.used[b.first_free])
            b.first_free++;
        size_t base = b.first_free > (size_t)labels[0] + 1 ? b.first_free - labels[0] - 1 : 1;
        for (;; base++) {
            TRY(grow(&b, base + labels[nl - 1] + 2));
            if (b.used[base + labels[0] + 1])
                continue;
            size_t k = 1;
            while (k < nl && !b.used[base + labels[k] + 1])
                k++;
            if (k == nl)
                break;
        }
        if (base + 256 > (size_t)INT32_MAX) {
            st = LIPI_ENOMEM;
            goto done;
        }
        b.t.base[p.state] = (int32_t)base;
        for (size_t k = 0; k < nl; k++) {
            size_t c = base + labels[k] + 1;
            b.used[c] = 1;
            b.t.check[c] = p.state;
            if (qtail == qcap) {
                /* Reclaim the consumed front before growing. */
                if (qhead > 0) {
                    memmove(queue, queue + qhead, (qtail - qhead) * sizeof *queue);
                    qtail -= qhead;
                    qhead = 0;
                }
                if (qtail == qcap) {
                    pending *q = lipi_reallocarray(queue, qcap * 2, sizeof *queue);
                    if (!q) {
                        st = LIPI_ENOMEM;
                        goto done;
                    }
                    queue = q;
                    qcap *= 2;
                }
            }
            queue[qtail++] = (pending){(int32_t)c, starts[k], starts[k + 1], p.depth + 1};
        }
    }
    *t = b.t;
    b.t = (lipi_datrie){0};
done:
    lipi_free(rec);
    lipi_free(queue);
    lipi_free(b.used);
    lipi_datrie_free(&b.t);
    return st;
}

void lipi_datrie_free(lipi_datrie *t)
{
    lipi_free(t->base);
    lipi_free(t->check);
    lipi_free(t->value);
    memset(t, 0, sizeof *t);
}

/* Word counts: an open-addressing hash table word -> uint64, its sorted
 * order, and the word<TAB>count file format (see trainer/trainer.h).
 *
 * Counting a corpus inserts tens of millions of words, most of them already
 * present, so the table is built for the hit path: linear probing over
 * 32-byte slots that keep the full hash (a miss rarely touches the word
 * bytes); words of up to 8 bytes live in the slot itself, longer ones are
 * copied once into large arena blocks (no malloc per word). */
#include "trainer/trainer.h"

#include "tokenizer/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Hashing                                                                   */
/* ------------------------------------------------------------------------ */

static inline uint64_t read64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* 64x64 -> 128 multiply folded to 64 bits: the mixing step of wyhash. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static uint64_t hash_bytes(const char *p, size_t len)
{
    const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                   k2 = 0x8ebc6af09c88c6e3ull;
    uint64_t h = fold_mul((uint64_t)len ^ k0, k1);
    while (len >= 8) {
        h = fold_mul(read64(p) ^ k1, h ^ k2);
        p += 8;
        len -= 8;
    }
    uint64_t t = 0;
    if (len)
        memcpy(&t, p, len);
    return fold_mul(t ^ k0, h ^ k2);
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

enum { INLINE = 8 };

typedef struct {
    uint64_t hash;
    uint64_t count;
    union {
        const char *ptr;     /* len > INLINE: the word in the arena */
        char bytes[INLINE];  /* len <= INLINE: the word itself */
    } w;
    uint32_t len; /* 0: empty slot */
} slot;

static inline const char *slot_word(const slot *s)
{
    return s->len <= INLINE ? s->w.bytes : s->w.ptr;
}

typedef struct block {
    struct block *next;
    size_t used, cap;
    char data[];
} block;

enum { BLOCK_SIZE = 1 << 20 };

struct lipi_counts {
    slot *slots;
    size_t cap; /* power of two, or 0 */
    size_t n;
    uint64_t total;
    block *blocks; /* newest first; the head has room for small words */
};

lipi_status lipi_counts_new(lipi_counts **out)
{
    *out = lipi_calloc(1, sizeof **out);
    return *out ? LIPI_OK : LIPI_ENOMEM;
}

void lipi_counts_free(lipi_counts *c)
{
    if (!c)
        return;
    for (block *b = c->blocks, *next; b; b = next) {
        next = b->next;
        lipi_free(b);
    }
    lipi_free(c->slots);
    lipi_free(c);
}

/* Copies word into the arena; NULL when out of memory. */
static const char *arena_copy(lipi_counts *c, const char *word, size_t len)
{
    block *b = c->blocks;
    if (!b || b->cap - b->used < len) {
        size_t cap = len > BLOCK_SIZE / 4 ? len : BLOCK_SIZE;
        block *nb = lipi_malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (b && cap != BLOCK_SIZE) {
            /* An oversized word gets its own block behind the current one,
             * so the current block keeps filling. */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            c->blocks = nb;
        }
        b = nb;
    }
    char *p = b->data + b->used;
    memcpy(p, word, len);
    b->used += len;
    return p;
}

/* Rehashes into a table of ncap slots (a power of two above c->cap). */
static lipi_status resize_table(lipi_counts *c, size_t ncap)
{
    if (ncap > SIZE_MAX / sizeof(slot) / 2 || ncap < c->cap)
        return LIPI_ENOMEM;
    slot *ns = lipi_malloc(ncap * sizeof *ns);
    if (!ns)
        return LIPI_ENOMEM;
    lipi_huge_pages(ns, ncap * sizeof *ns);
    memset(ns, 0, ncap * sizeof *ns);
    size_t mask = ncap - 1;
    for (size_t i = 0; i < c->cap; i++) {
        const slot *s = &c->slots[i];
        if (!s->len)
            continue;
        size_t j = s->hash & mask;
        while (ns[j].len)
            j = (j + 1) & mask;
        ns[j] = *s;
    }
    lipi_free(c->slots);
    c->slots = ns;
    c->cap = ncap;
    return LIPI_OK;
}

static lipi_status grow_table(lipi_counts *c)
{
    return resize_table(c, c->cap ? c->cap * 2 : 1024);
}

lipi_status lipi_counts_reserve(lipi_counts *c, size_t n)
{
    size_t ncap = c->cap ? c->cap : 1024;
    while (n * 10 > ncap * 7) { /* the load limit of add_hashed */
        if (ncap > SIZE_MAX / sizeof(slot) / 4)
            return LIPI_ENOMEM;
        ncap *= 2;
    }
    return ncap > c->cap ? resize_table(c, ncap) : LIPI_OK;
}

static slot *find_slot(const lipi_counts *c, const char *word, size_t len, uint64_t h)
{
    size_t mask = c->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        slot *s = &c->slots[i];
        if (!s->len || (s->hash == h && s->len == len && memcmp(slot_word(s), word, len) == 0))
            return s;
    }
}

static lipi_status add_hashed(lipi_counts *c, const char *word, size_t len, uint64_t h,
                              uint64_t n, lipi_error *err)
{
    if (len == 0 || len >= UINT32_MAX)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a word of 1 to 4294967294 bytes, found %zu bytes", len);
    if (n == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a count >= 1, found 0");
    /* Keep the load below 0.7 so probe runs stay short. */
    if ((c->n + 1) * 10 > c->cap * 7 && grow_table(c) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory counting words");
    slot *s = find_slot(c, word, len, h);
    if (s->len) {
        if (s->count > UINT64_MAX - n)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "count of a word overflows 64 bits (%llu + %llu)",
                                  (unsigned long long)s->count, (unsigned long long)n);
        s->count += n;
    } else {
        slot ns = {h, n, {NULL}, (uint32_t)len};
        if (len <= INLINE) {
            memcpy(ns.w.bytes, word, len);
        } else {
            ns.w.ptr = arena_copy(c, word, len);
            if (!ns.w.ptr)
                return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0,
                                      "out of memory counting words");
        }
        *s = ns;
        c->n++;
    }
    c->total = c->total > UINT64_MAX - n ? UINT64_MAX : c->total + n;
    return LIPI_OK;
}

lipi_status lipi_counts_add(lipi_counts *c, const char *word, size_t len, uint64_t n,
                            lipi_error *err)
{
    return add_hashed(c, word, len, hash_bytes(word, len), n, err);
}

lipi_status lipi_counts_add_each(lipi_counts *c, const char *text, const size_t *off, size_t n,
                                 lipi_error *err)
{
    /* Groups of G words in three passes: hash and prefetch the home slots,
     * then prefetch the stored words the hashes point at, then insert.
     * The cache misses of a group overlap instead of coming one by one, and
     * a group is long enough for the first prefetch to land before use. */
    enum { G = 64 };
    uint64_t h[G];
    for (size_t base = 0; base < n; base += G) {
        size_t g = n - base < G ? n - base : G;
        if ((c->n + g) * 10 > c->cap * 7 && grow_table(c) != LIPI_OK)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory counting words");
        size_t mask = c->cap - 1;
        for (size_t i = 0; i < g; i++) {
            h[i] = hash_bytes(text + off[base + i], off[base + i + 1] - off[base + i]);
            __builtin_prefetch(&c->slots[h[i] & mask]);
        }
        for (size_t i = 0; i < g; i++) {
            const slot *s = &c->slots[h[i] & mask];
            if (s->hash == h[i] && s->len > INLINE)
                __builtin_prefetch(s->w.ptr);
        }
        for (size_t i = 0; i < g; i++) {
            const char *w = text + off[base + i];
            lipi_status st = add_hashed(c, w, off[base + i + 1] - off[base + i], h[i], 1, err);
            if (st != LIPI_OK)
                return st;
        }
    }
    return LIPI_OK;
}

lipi_status lipi_counts_merge(lipi_counts *dst, const lipi_counts *src, lipi_error *err)
{
    for (size_t i = 0; i < src->cap; i++) {
        const slot *s = &src->slots[i];
        if (!s->len)
            continue;
        lipi_status st = add_hashed(dst, slot_word(s), s->len, s->hash, s->count, err);
        if (st != LIPI_OK)
            return st;
    }
    return LIPI_OK;
}

size_t lipi_counts_size(const lipi_counts *c)
{
    return c->n;
}

uint64_t lipi_counts_total(const lipi_counts *c)
{
    return c->total;
}

uint64_t lipi_counts_get(const lipi_counts *c, const char *word, size_t len)
{
    if (c->n == 0)
        return 0;
    const slot *s = find_slot(c, word, len, hash_bytes(word, len));
    return s->len ? s->count : 0;
}

bool lipi_counts_next(const lipi_counts *c, size_t *pos, lipi_count_entry *e)
{
    for (size_t i = *pos; i < c->cap; i++) {
        const slot *s = &c->slots[i];
        if (s->len) {
            *e = (lipi_count_entry){slot_word(s), s->len, s->count};
            *pos = i + 1;
            return true;
        }
    }
    *pos = c->cap;
    return false;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const lipi_count_entry *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    size_t m = a->len < b->len ? a->len : b->len;
    int r = memcmp(a->word, b->word, m);
    if (r)
        return r;
    return (a->len > b->len) - (a->len < b->len);
}

lipi_status lipi_counts_sorted(const lipi_counts *c, lipi_count_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    lipi_count_entry *e = lipi_calloc(c->n ? c->n : 1, sizeof *e);
    if (!e)
        return LIPI_ENOMEM;
    size_t k = 0, pos = 0;
    while (lipi_counts_next(c, &pos, &e[k]))
        k++;
    qsort(e, k, sizeof *e, cmp_entry);
    *out = e;
    *n = k;
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

static void write_entry(FILE *f, const lipi_count_entry *e)
{
    const char *p = e->word, *end = p + e->len;
    while (p < end) {
        /* Copy the longest run without a byte that needs escaping. */
        const char *q = p;
        while (q < end && *q != '\\' && *q != '\t' && *q != '\n')
            q++;
        fwrite(p, 1, (size_t)(q - p), f);
        if (q == end)
            break;
        char esc[2] = {'\\', *q == '\\' ? '\\' : *q == '\t' ? 't' : 'n'};
        fwrite(esc, 1, 2, f);
        p = q + 1;
    }
    char num[24];
    size_t k = sizeof num;
    num[--k] = '\n';
    uint64_t v = e->count;
    do {
        num[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    num[--k] = '\t';
    fwrite(num + k, 1, sizeof num - k, f);
}

lipi_status lipi_counts_save(const lipi_counts *c, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_count_entry *e = NULL;
    size_t n = 0;
    lipi_atomic_file af = {0};
    bool to_stdout = strcmp(path, "-") == 0;

    if (lipi_counts_sorted(c, &e, &n) != LIPI_OK) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory sorting counts");
        goto done;
    }
    if (!to_stdout)
        TRY(lipi_atomic_open(&af, path, err));
    FILE *f = to_stdout ? stdout : af.f;
    for (size_t i = 0; i < n; i++)
        write_entry(f, &e[i]);
    if (to_stdout) {
        if (fflush(f) != 0 || ferror(f))
            st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot write: %s", strerror(errno));
        goto done;
    }
    st = lipi_atomic_commit(&af, err);
done:
    lipi_atomic_abort(&af);
    lipi_free(e);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *path;
    size_t line;
    size_t at;     /* file offset of the line's first byte */
    lipi_buf word; /* unescaped word of the current line */
} load_ctx;

/* Checks and adds one line (without its "\n"). */
static lipi_status load_line(load_ctx *lc, lipi_counts *into, const char *s, size_t len,
                             lipi_error *err)
{
    if (len && s[len - 1] == '\r')
        len--;
    if (len == 0)
        return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at,
                              "expected word<TAB>count, found an empty line");
    const char *tab = memchr(s, '\t', len);
    if (!tab)
        return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at + len,
                              "expected word<TAB>count, found no TAB");
    size_t wlen = (size_t)(tab - s);
    if (wlen == 0)
        return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at,
                              "expected a word before the TAB, found none");
    size_t bad = lipi_utf8_valid_prefix(s, wlen);
    if (bad < wlen)
        return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at + bad,
                              "expected UTF-8 in the word, found byte 0x%02X",
                              (unsigned)(unsigned char)s[bad]);

    const char *num = tab + 1, *end = s + len;
    size_t num_off = wlen + 1;
    if (num == end)
        return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at + num_off,
                              "expected a count after the TAB, found the end of the line");
    uint64_t count = 0;
    for (const char *p = num; p < end; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < '0' || ch > '9')
            return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at + (size_t)(p - s),
                                  ch >= 0x20 && ch < 0x7f
                                      ? "expected a count of decimal digits, found '%c'"
                                      : "expected a count of decimal digits, found byte 0x%02X",
                                  ch);
        unsigned d = ch - '0';
        if (count > (UINT64_MAX - d) / 10)
            return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at + num_off,
                                  "expected a count below 2^64, found %.*s",
                                  (int)(end - num > 40 ? 40 : end - num), num);
        count = count * 10 + d;
    }
    if (count == 0)
        return lipi_error_set(err, LIPI_EFORMAT, lc->path, lc->line, lc->at + num_off,
                              "expected a count >= 1, found %.*s",
                              (int)(end - num > 40 ? 40 : end - num), num);

    lc->word.len = 0;
    if (lipi_buf_reserve(&lc->word, wlen) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, lc->path, lc->line, lc->at, "out of memory");
    char *w = lc->word.p;
    size_t k = 0;
    for (size_t i = 0; i < wlen; i++) {
        char ch = s[i];
        if (ch == '\\' && i + 1 < wlen) {
            char nx = s[i + 1];
            if (nx == '\\' || nx == 't' || nx == 'n') {
                ch = nx == '\\' ? '\\' : nx == 't' ? '\t' : '\n';
                i++;
            }
        }
        w[k++] = ch;
    }
    lipi_status st = lipi_counts_add(into, w, k, count, err);
    if (st != LIPI_OK && err) {
        snprintf(err->path, sizeof err->path, "%s", lc->path);
        err->line = lc->line;
        err->offset = lc->at + num_off;
        if (st == LIPI_EINVAL)
            err->code = st = LIPI_EFORMAT;
    }
    return st;
}

lipi_status lipi_counts_load(const char *path, lipi_counts *into, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    load_ctx lc = {path, 0, 0, {0}};
    bool from_stdin = strcmp(path, "-") == 0;
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 1 << 16, start = 0, end = 0, buf_at = 0; /* buf[0] is file byte buf_at */
    bool eof = false, first = true;

    if (!f)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    buf = lipi_malloc(cap);
    if (!buf) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    for (;;) {
        char *nl = memchr(buf + start, '\n', end - start);
        if (!nl && !eof) {
            /* Need more input: keep the partial line at the front, make room. */
            if (start > 0) {
                memmove(buf, buf + start, end - start);
                buf_at += start;
                end -= start;
                start = 0;
            }
            if (end == cap) {
                if (cap > SIZE_MAX / 2) {
                    st = lipi_error_set(err, LIPI_ENOMEM, path, lc.line + 1, buf_at, "line too long");
                    goto done;
                }
                char *nb = lipi_realloc(buf, cap * 2);
                if (!nb) {
                    st = lipi_error_set(err, LIPI_ENOMEM, path, lc.line + 1, 0, "out of memory");
                    goto done;
                }
                buf = nb;
                cap *= 2;
            }
            size_t got = fread(buf + end, 1, cap - end, f);
            if (got == 0) {
                if (ferror(f)) {
                    st = lipi_error_set(err, LIPI_EIO, path, lc.line + 1, 0, "cannot read: %s",
                                        strerror(errno));
                    goto done;
                }
                eof = true;
            }
            end += got;
            if (first && end - start >= 3) {
                if (memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
                    start = 3;
                first = false;
            }
            continue;
        }
        size_t line_len = nl ? (size_t)(nl - (buf + start)) : end - start;
        if (!nl && line_len == 0)
            break; /* end of input right after a "\n" (or an empty file) */
        lc.line++;
        lc.at = buf_at + start;
        TRY(load_line(&lc, into, buf + start, line_len, err));
        start += line_len + (nl ? 1 : 0);
        first = false;
        if (!nl)
            break;
    }
done:
    if (!from_stdin)
        fclose(f);
    lipi_free(buf);
    lipi_buf_free(&lc.word);
    return st;
}


/* ------------------------------------------------------------------------ */
/* Runs (see trainer.h)                                                      */
/* ------------------------------------------------------------------------ */

static const char RUN_MAGIC[8] = {'L', 'I', 'P', 'I', 'R', 'U', 'N', 1};

/* The checksum of a run: every (hash, count) pair folded in, in order. */
static inline uint64_t run_sum(uint64_t sum, uint64_t hash, uint64_t count)
{
    return fold_mul(sum ^ hash ^ 0x9e3779b97f4a7c15ull, count ^ 0xe7037ed1a0b428dbull) + hash;
}

/* The run order: hash, then the word's bytes (memcmp, the shorter first). */
static int cmp_run(const slot *a, const slot *b)
{
    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    size_t m = a->len < b->len ? a->len : b->len;
    int r = memcmp(slot_word(a), slot_word(b), m);
    return r ? r : (a->len > b->len) - (a->len < b->len);
}

static int cmp_run_ptr(const void *pa, const void *pb)
{
    return cmp_run(*(const slot *const *)pa, *(const slot *const *)pb);
}

/* The table's words in run order. Hashes are uniform, so a counting pass on
 * their top bits (about one word per bucket) leaves tiny buckets to sort. */
static lipi_status run_order(const lipi_counts *c, const slot ***out)
{
    size_t n = c->n, bits = 1;
    while (bits < 24 && ((size_t)1 << bits) < n)
        bits++;
    size_t nb = (size_t)1 << bits;
    const slot **v = lipi_malloc((n ? n : 1) * sizeof *v);
    size_t *start = lipi_calloc(nb + 1, sizeof *start);
    if (!v || !start) {
        lipi_free(v);
        lipi_free(start);
        return LIPI_ENOMEM;
    }
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].len)
            start[(c->slots[i].hash >> (64 - bits)) + 1]++;
    for (size_t b = 0; b < nb; b++)
        start[b + 1] += start[b];
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].len)
            v[start[c->slots[i].hash >> (64 - bits)]++] = &c->slots[i];
    /* start[b] is now the end of bucket b. */
    for (size_t b = 0, lo = 0; b < nb; lo = start[b++]) {
        size_t hi = start[b];
        if (hi - lo > 16) {
            qsort(v + lo, hi - lo, sizeof *v, cmp_run_ptr);
            continue;
        }
        for (size_t i = lo + 1; i < hi; i++) {
            const slot *s = v[i];
            size_t j = i;
            for (; j > lo && cmp_run(v[j - 1], s) > 0; j--)
                v[j] = v[j - 1];
            v[j] = s;
        }
    }
    lipi_free(start);
    *out = v;
    return LIPI_OK;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t k = 0;
    while (v >= 0x80) {
        p[k++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[k++] = (unsigned char)v;
    return k;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

lipi_status lipi_counts_save_run(const lipi_counts *c, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const slot **v = NULL;
    lipi_atomic_file af = {0};
    enum { OUT = 1 << 16 };
    unsigned char *buf = lipi_malloc(OUT);
    if (!buf || run_order(c, &v) != LIPI_OK) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory writing counts");
        goto done;
    }
    TRY(lipi_atomic_open(&af, path, err));
    fwrite(RUN_MAGIC, 1, sizeof RUN_MAGIC, af.f);
    uint64_t sum = 0;
    size_t used = 0;
    for (size_t i = 0; i < c->n; i++) {
        const slot *s = v[i];
        if (used + 20 + s->len > OUT) {
            fwrite(buf, 1, used, af.f);
            used = 0;
        }
        used += put_varint(buf + used, s->len);
        if (s->len + 20 > OUT) { /* a word bigger than the buffer goes straight out */
            fwrite(buf, 1, used, af.f);
            fwrite(slot_word(s), 1, s->len, af.f);
            used = 0;
        } else {
            memcpy(buf + used, slot_word(s), s->len);
            used += s->len;
        }
        used += put_varint(buf + used, s->count);
        sum = run_sum(sum, s->hash, s->count);
    }
    buf[used++] = 0;
    put_le64(buf + used, c->n);
    put_le64(buf + used + 8, sum);
    fwrite(buf, 1, used + 16, af.f);
    st = lipi_atomic_commit(&af, err);
done:
    lipi_atomic_abort(&af);
    lipi_free(v);
    lipi_free(buf);
    return st;
}

/* A run being read: a window [pos, end) of the file in buf, buf[0] being
 * file byte `at`. */
typedef struct {
    const char *path;
    FILE *f;
    unsigned char *buf;
    size_t cap, pos, end;
    uint64_t at, size; /* size: the file's size, bounding every length */
} run_reader;

/* Makes at least `want` bytes available from pos (fewer at the end of the
 * file). */
static lipi_status run_fill(run_reader *r, size_t want, lipi_error *err)
{
    if (r->end - r->pos >= want)
        return LIPI_OK;
    memmove(r->buf, r->buf + r->pos, r->end - r->pos);
    r->at += r->pos;
    r->end -= r->pos;
    r->pos = 0;
    if (want > r->cap) {
        unsigned char *nb = lipi_realloc(r->buf, want);
        if (!nb)
            return lipi_error_set(err, LIPI_ENOMEM, r->path, 0, r->at, "out of memory");
        r->buf = nb;
        r->cap = want;
    }
    while (r->end < want) {
        size_t got = fread(r->buf + r->end, 1, r->cap - r->end, r->f);
        if (got == 0) {
            if (ferror(r->f))
                return lipi_error_set(err, LIPI_EIO, r->path, 0, r->at + r->end,
                                      "cannot read: %s", strerror(errno));
            break;
        }
        r->end += got;
    }
    return LIPI_OK;
}

/* Reads a varint at pos; `what` names it in errors. */
static lipi_status run_varint_slow(run_reader *r, uint64_t *v, const char *what,
                                   lipi_error *err);

static inline lipi_status run_varint(run_reader *r, uint64_t *v, const char *what,
                                     lipi_error *err)
{
    if (r->end - r->pos >= 10 && r->buf[r->pos] < 0x80) { /* most lengths and counts */
        *v = r->buf[r->pos++];
        return LIPI_OK;
    }
    return run_varint_slow(r, v, what, err);
}

static lipi_status run_varint_slow(run_reader *r, uint64_t *v, const char *what,
                                   lipi_error *err)
{
    lipi_status st = run_fill(r, 10, err);
    if (st != LIPI_OK)
        return st;
    uint64_t x = 0, off = r->at + r->pos;
    for (unsigned k = 0;; k++) {
        if (r->pos == r->end)
            return lipi_error_set(err, LIPI_EFORMAT, r->path, 0, off,
                                  "expected %s, found the end of the file (truncated?)", what);
        unsigned b = r->buf[r->pos++];
        if (k == 9 && b > 1)
            return lipi_error_set(err, LIPI_EFORMAT, r->path, 0, off,
                                  "expected %s below 2^64, found a longer varint", what);
        x |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80)) {
            if (k > 0 && b == 0)
                return lipi_error_set(err, LIPI_EFORMAT, r->path, 0, off,
                                      "expected %s, found an overlong varint", what);
            break;
        }
    }
    *v = x;
    return LIPI_OK;
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

lipi_status lipi_counts_load_run(const char *path, lipi_counts *into, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    run_reader r = {path, fopen(path, "rb"), NULL, 1 << 16, 0, 0, 0, 0};
    lipi_buf prev = {0};
    if (!r.f)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fileno(r.f), &sb) == 0 && S_ISREG(sb.st_mode))
        r.size = (uint64_t)sb.st_size;
    else
        r.size = UINT64_MAX;
    if (!(r.buf = lipi_malloc(r.cap))) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    TRY(run_fill(&r, sizeof RUN_MAGIC, err));
    if (r.end < sizeof RUN_MAGIC || memcmp(r.buf, RUN_MAGIC, sizeof RUN_MAGIC) != 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected a lipi counts run (starting \"LIPIRUN\\x01\"), found %s",
                            r.end < sizeof RUN_MAGIC ? "a shorter file" : "other bytes");
        goto done;
    }
    r.pos = sizeof RUN_MAGIC;
    uint64_t n = 0, sum = 0, prev_hash = 0;
    for (;;) {
        uint64_t len, count, off = r.at + r.pos;
        TRY(run_varint(&r, &len, "a word's length", err));
        if (len == 0)
            break;
        uint64_t word_at = r.at + r.pos;
        if (len >= UINT32_MAX || len > r.size - (word_at < r.size ? word_at : r.size)) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, off,
                                "expected a word's length, found %llu bytes past the end of "
                                "the file (truncated?)", (unsigned long long)len);
            goto done;
        }
        if (r.end - r.pos < len)
            TRY(run_fill(&r, (size_t)len, err));
        if (r.end - r.pos < len) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, word_at,
                                "expected a word of %llu bytes, found the end of the file",
                                (unsigned long long)len);
            goto done;
        }
        const char *w = (const char *)r.buf + r.pos;
        size_t bad = lipi_utf8_valid_prefix(w, (size_t)len);
        if (bad < len) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, word_at + bad,
                                "expected UTF-8 in the word, found byte 0x%02X",
                                (unsigned)(unsigned char)w[bad]);
            goto done;
        }
        uint64_t h = hash_bytes(w, (size_t)len);
        if (n > 0) {
            int order = h != prev_hash ? (h > prev_hash ? 1 : -1) : 0;
            if (order == 0) {
                size_t m = prev.len < len ? prev.len : (size_t)len;
                order = memcmp(w, prev.p, m);
                if (order == 0)
                    order = (len > prev.len) - (len < prev.len);
            }
            if (order <= 0) {
                st = lipi_error_set(err, LIPI_EFORMAT, path, 0, off,
                                    order == 0 ? "expected each word once, found one again"
                                               : "expected words in run order, found one "
                                                 "out of order");
                goto done;
            }
        }
        prev.len = 0; /* the next word's order is checked against this one */
        if (lipi_buf_append(&prev, w, (size_t)len) != LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, path, 0, off, "out of memory");
            goto done;
        }
        prev_hash = h;
        r.pos += (size_t)len;
        uint64_t count_at = r.at + r.pos;
        TRY(run_varint(&r, &count, "a count", err));
        if (count == 0) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, count_at,
                                "expected a count >= 1, found 0");
            goto done;
        }
        st = add_hashed(into, prev.p, (size_t)len, h, count, err);
        if (st != LIPI_OK) {
            if (err) {
                snprintf(err->path, sizeof err->path, "%s", path);
                err->line = 0;
                err->offset = count_at;
                if (st == LIPI_EINVAL)
                    err->code = st = LIPI_EFORMAT;
            }
            goto done;
        }
        sum = run_sum(sum, h, count);
        n++;
    }
    uint64_t trailer_at = r.at + r.pos;
    TRY(run_fill(&r, 17, err));
    if (r.end - r.pos < 16) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, trailer_at,
                            "expected the 16-byte trailer, found %zu bytes (truncated?)",
                            r.end - r.pos);
        goto done;
    }
    if (get_le64(r.buf + r.pos) != n || get_le64(r.buf + r.pos + 8) != sum) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, trailer_at,
                            get_le64(r.buf + r.pos) != n
                                ? "expected a trailer giving %llu words, found another number"
                                : "expected the checksum of the %llu words read, found "
                                  "another (the file is damaged)",
                            (unsigned long long)n);
        goto done;
    }
    if (r.end - r.pos > 16)
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, trailer_at + 16,
                            "expected the end of the file after the trailer, found more bytes");
done:
    fclose(r.f);
    lipi_free(r.buf);
    lipi_buf_free(&prev);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Merging files                                                             */
/* ------------------------------------------------------------------------ */

/* The sum of the files (runs or TSVs) written to out_path (a run or a TSV). */
static lipi_status merge_paths(const char *const *paths, size_t n, bool runs, const char *out_path,
                               bool tsv, lipi_error *err)
{
    lipi_status st;
    lipi_counts *all = NULL;
    if (lipi_counts_new(&all) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < n; i++)
        TRY(runs ? lipi_counts_load_run(paths[i], all, err) : lipi_counts_load(paths[i], all, err));
    st = tsv ? lipi_counts_save(all, out_path, err) : lipi_counts_save_run(all, out_path, err);
done:
    lipi_counts_free(all);
    return st;
}

lipi_status lipi_counts_merge_files(const char *const *paths, size_t n, const char *out_path,
                                    lipi_error *err)
{
    return merge_paths(paths, n, false, out_path, true, err);
}

lipi_status lipi_counts_merge_runs(const char *const *paths, size_t n, const char *out_path,
                                   bool tsv, lipi_error *err)
{
    return merge_paths(paths, n, true, out_path, tsv, err);
}

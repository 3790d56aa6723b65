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

lipi_status lipi_counts_merge_files(const char *const *paths, size_t n, const char *out_path,
                                    lipi_error *err)
{
    lipi_status st;
    lipi_counts *all = NULL;
    if (lipi_counts_new(&all) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < n; i++)
        TRY(lipi_counts_load(paths[i], all, err));
    TRY(lipi_counts_save(all, out_path, err));
done:
    lipi_counts_free(all);
    return st;
}

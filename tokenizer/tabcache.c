/* The table cache: what an encoder computes from a tokenizer's vocabulary
 * (tries, backtracking tables), kept on disk so that the next process that
 * opens the same tokenizer reads it instead of building it again.
 *
 * A file is named by the SHA-256 of what its tables are built from (the
 * keys themselves, the table kind and the format version), so it can never
 * be stale: a changed vocabulary is another name. It lives in
 * $LIPI_CACHE_DIR, else $XDG_CACHE_HOME/lipi, else $HOME/.cache/lipi, and is
 * written to a temporary file and renamed (concurrent writers each rename a
 * complete file). The file is untrusted like any other: the header, the
 * length and a checksum of the payload are checked here, and the encoder
 * checks every index and offset of the tables it reads. Any failure (no
 * folder, a read-only one, a missing, truncated or corrupt file) only means
 * the tables are built as before; nothing is reported. LIPI_CACHE=0 turns
 * it off, as does lipi_open_options.table_cache = LIPI_FLAG_OFF.
 *
 * File: header (112 bytes) then the payload, a sequence of 8-byte words.
 *   "LIPITAB\n", u32 format version, u32 0, kind (16 bytes, NUL padded),
 *   key (64 hex digits), u64 payload bytes, u64 payload checksum. */
#include "tokenizer/tokenizer_layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TC_MAGIC "LIPITAB\n"
#define TC_VERSION 3u /* 3: the 16-lane checksum */
#define TC_HEADER 112

bool lipi_tabcache_env_on(void)
{
    const char *v = getenv("LIPI_CACHE");
    return !(v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "no") == 0));
}

/* The cache folder, allocated; NULL when there is none (no variable set). */
static char *cache_dir(void)
{
    const char *v;
    lipi_buf b = {0};
    lipi_status st;
    if ((v = getenv("LIPI_CACHE_DIR")) && *v)
        st = lipi_buf_append(&b, v, strlen(v) + 1);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v)
        st = lipi_buf_append(&b, v, strlen(v)) == LIPI_OK ? lipi_buf_append(&b, "/lipi", 6)
                                                          : LIPI_ENOMEM;
    else if ((v = getenv("HOME")) && *v)
        st = lipi_buf_append(&b, v, strlen(v)) == LIPI_OK
                 ? lipi_buf_append(&b, "/.cache/lipi", 13)
                 : LIPI_ENOMEM;
    else
        return NULL;
    if (st != LIPI_OK) {
        lipi_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* dir/kind-key.tab, allocated, or NULL. */
static char *cache_path(const char *kind, const char key[65])
{
    char *dir = cache_dir();
    lipi_buf b = {0};
    if (!dir)
        return NULL;
    if (lipi_buf_append(&b, dir, strlen(dir)) != LIPI_OK || lipi_buf_append(&b, "/", 1) != LIPI_OK ||
        lipi_buf_append(&b, kind, strlen(kind)) != LIPI_OK ||
        lipi_buf_append(&b, "-", 1) != LIPI_OK || lipi_buf_append(&b, key, 64) != LIPI_OK ||
        lipi_buf_append(&b, ".tab", 5) != LIPI_OK) {
        lipi_buf_free(&b);
        b.p = NULL;
    }
    lipi_free(dir);
    return b.p;
}

/* mkdir -p of path's folder; best effort (the write fails later if not). */
static void make_dirs(const char *path)
{
    char *p = lipi_strndup(path, strlen(path));
    if (!p)
        return;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            break;
        *s = '/';
    }
    lipi_free(p);
}

/* The checksum of 8-byte words: word i goes into lane i % 16, a chain of
 * lane_step. The step multiplies 32 by 32 bits only, so SSE2 and AVX2 run
 * 2 and 4 lanes in one instruction and give the value the portable code
 * gives (a 64-bit multiply has no vector form before AVX-512). Format 2's
 * four chains of 64-bit multiplies cost 19.8M of o200k's 64.5M
 * instructions of a warm load. Words are in host order, as the tables are
 * (the key says which). Chained across calls by the word count. */
#define TC_LANES 16
#define TC_KEY 0x9E3779B97F4A7C15ULL

/* Whatever the words, the key keeps a lane out of short cycles (without
 * it, a lane whose low half is 0 would swap back and forth on zeros). */
static inline uint64_t lane_step(uint64_t acc, uint64_t w)
{
    uint64_t k = acc ^ w ^ TC_KEY;
    return (k & 0xffffffffu) * (k >> 32) + (k << 32 | k >> 32);
}

/* p: (stripes, 16) words -> lane: (16) */
static void stripes_portable(uint64_t *lane, const unsigned char *p, size_t stripes)
{
    uint64_t l[TC_LANES];
    memcpy(l, lane, sizeof l);
    for (; stripes; stripes--, p += 8 * TC_LANES)
        for (int j = 0; j < TC_LANES; j++) {
            uint64_t w;
            memcpy(&w, p + 8 * j, 8);
            l[j] = lane_step(l[j], w);
        }
    memcpy(lane, l, sizeof l);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* SSE2 is part of x86-64: no check needed. */
#define SSE2_STEP(a, at)                                                                    \
    do {                                                                                    \
        __m128i k_ = _mm_xor_si128(a, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(at)), key)); \
        a = _mm_add_epi64(_mm_mul_epu32(k_, _mm_srli_epi64(k_, 32)),                        \
                          _mm_shuffle_epi32(k_, _MM_SHUFFLE(2, 3, 0, 1)));                  \
    } while (0)

static void stripes_sse2(uint64_t *lane, const unsigned char *p, size_t stripes)
{
    const __m128i key = _mm_set1_epi64x((long long)TC_KEY);
    __m128i *v = (__m128i *)lane;
    __m128i a0 = _mm_loadu_si128(v), a1 = _mm_loadu_si128(v + 1), a2 = _mm_loadu_si128(v + 2),
            a3 = _mm_loadu_si128(v + 3), a4 = _mm_loadu_si128(v + 4), a5 = _mm_loadu_si128(v + 5),
            a6 = _mm_loadu_si128(v + 6), a7 = _mm_loadu_si128(v + 7);
    for (; stripes; stripes--, p += 8 * TC_LANES) {
        SSE2_STEP(a0, p);
        SSE2_STEP(a1, p + 16);
        SSE2_STEP(a2, p + 32);
        SSE2_STEP(a3, p + 48);
        SSE2_STEP(a4, p + 64);
        SSE2_STEP(a5, p + 80);
        SSE2_STEP(a6, p + 96);
        SSE2_STEP(a7, p + 112);
    }
    _mm_storeu_si128(v, a0);
    _mm_storeu_si128(v + 1, a1);
    _mm_storeu_si128(v + 2, a2);
    _mm_storeu_si128(v + 3, a3);
    _mm_storeu_si128(v + 4, a4);
    _mm_storeu_si128(v + 5, a5);
    _mm_storeu_si128(v + 6, a6);
    _mm_storeu_si128(v + 7, a7);
}

#define AVX2_STEP(a, at)                                                                    \
    do {                                                                                    \
        __m256i k_ = _mm256_xor_si256(                                                      \
            a, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(at)), key));          \
        a = _mm256_add_epi64(_mm256_mul_epu32(k_, _mm256_srli_epi64(k_, 32)),               \
                             _mm256_shuffle_epi32(k_, _MM_SHUFFLE(2, 3, 0, 1)));            \
    } while (0)

__attribute__((target("avx2"))) static void stripes_avx2(uint64_t *lane, const unsigned char *p,
                                                         size_t stripes)
{
    const __m256i key = _mm256_set1_epi64x((long long)TC_KEY);
    __m256i *v = (__m256i *)lane;
    __m256i a0 = _mm256_loadu_si256(v), a1 = _mm256_loadu_si256(v + 1),
            a2 = _mm256_loadu_si256(v + 2), a3 = _mm256_loadu_si256(v + 3);
    for (; stripes; stripes--, p += 8 * TC_LANES) {
        AVX2_STEP(a0, p);
        AVX2_STEP(a1, p + 32);
        AVX2_STEP(a2, p + 64);
        AVX2_STEP(a3, p + 96);
    }
    _mm256_storeu_si256(v, a0);
    _mm256_storeu_si256(v + 1, a1);
    _mm256_storeu_si256(v + 2, a2);
    _mm256_storeu_si256(v + 3, a3);
}
#endif

static void sum_words_with(lipi_tabcache_sum_state *h, const void *data, size_t n,
                           void (*stripes)(uint64_t *, const unsigned char *, size_t))
{
    const unsigned char *p = data;
    size_t i = 0;
    if (n < 8) /* no whole word; and data may be NULL, where p + 0 is not C */
        return;
    for (; i + 8 <= n && h->words % TC_LANES; i += 8, h->words++) {
        uint64_t w, *l = &h->lane[h->words % TC_LANES];
        memcpy(&w, p + i, 8);
        *l = lane_step(*l, w);
    }
    size_t s = (n - i) / (8 * TC_LANES);
    stripes(h->lane, p + i, s);
    i += s * 8 * TC_LANES;
    h->words += s * TC_LANES;
    for (; i + 8 <= n; i += 8, h->words++) {
        uint64_t w, *l = &h->lane[h->words % TC_LANES];
        memcpy(&w, p + i, 8);
        *l = lane_step(*l, w);
    }
}

bool lipi_tabcache_sum_words(lipi_tabcache_sum_state *h, const void *data, size_t n, int path)
{
    switch (path) {
    case LIPI_TABCACHE_SUM_PORTABLE:
        sum_words_with(h, data, n, stripes_portable);
        return true;
#if defined(__x86_64__) && defined(__GNUC__)
    case LIPI_TABCACHE_SUM_SSE2:
        sum_words_with(h, data, n, stripes_sse2);
        return true;
    case LIPI_TABCACHE_SUM_AVX2:
        if (!__builtin_cpu_supports("avx2"))
            return false;
        sum_words_with(h, data, n, stripes_avx2);
        return true;
#endif
    default:
        return false;
    }
}

static void sum_words(lipi_tabcache_sum_state *h, const void *data, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2"))
        sum_words_with(h, data, n, stripes_avx2);
    else
        sum_words_with(h, data, n, stripes_sse2);
#else
    sum_words_with(h, data, n, stripes_portable);
#endif
}

void lipi_tabcache_sum_start(lipi_tabcache_sum_state *h)
{
    for (int k = 0; k < TC_LANES; k++)
        h->lane[k] = 0x243F6A8885A308D3ULL + (uint64_t)k;
    h->words = 0;
}

uint64_t lipi_tabcache_sum_end(const lipi_tabcache_sum_state *h)
{
    uint64_t r = h->words;
    for (int k = 0; k < TC_LANES; k++) {
        r = (r ^ h->lane[k]) * 0x9E3779B97F4A7C15ULL;
        r ^= r >> 29;
    }
    return r;
}

uint64_t lipi_tabcache_sum(const void *payload, size_t n)
{
    lipi_tabcache_sum_state h;
    lipi_tabcache_sum_start(&h);
    sum_words(&h, payload, n);
    return lipi_tabcache_sum_end(&h);
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void make_header(unsigned char h[TC_HEADER], const char *kind, const char key[65],
                        uint64_t len, uint64_t sum)
{
    memset(h, 0, TC_HEADER);
    memcpy(h, TC_MAGIC, 8);
    put_u64(h + 8, TC_VERSION);
    strncpy((char *)h + 16, kind, 15);
    memcpy(h + 32, key, 64);
    put_u64(h + 96, len);
    put_u64(h + 104, sum);
}

/* ======================================================================== */
/* Keys                                                                      */
/* ======================================================================== */

static lipi_status make_key(const char *kind, bool by_snapshot, const lipi_strref *keys,
                            size_t n, const void *extra, size_t extra_len, char out[65]);

lipi_status lipi_tabcache_key(const char *kind, const lipi_strref *keys, size_t n,
                              const void *extra, size_t extra_len, char out[65])
{
    return make_key(kind, false, keys, n, extra, extra_len, out);
}

lipi_status lipi_tabcache_key_of(const lipi_tokenizer *t, const char *kind,
                                 const lipi_strref *keys, size_t n, const void *extra,
                                 size_t extra_len, char out[65])
{
    if (!t->snapshot_key[0])
        return make_key(kind, false, keys, n, extra, extra_len, out);
    lipi_strref k = {t->snapshot_key, 64};
    return make_key(kind, true, &k, 1, NULL, 0, out);
}

/* by_snapshot: keys[0] is a snapshot key (marked in the hashed header, so
 * that no vocabulary's key can be one made from a snapshot key). */
static lipi_status make_key(const char *kind, bool by_snapshot, const lipi_strref *keys,
                            size_t n, const void *extra, size_t extra_len, char out[65])
{
    lipi_sha256 c;
    unsigned char buf[1 << 16];
    size_t used = 0;
    unsigned char head[32] = {0};
    lipi_sha256_init(&c);
    memcpy(head, TC_MAGIC, 8);
    head[8] = TC_VERSION;
    head[9] = by_snapshot;
    /* The tables are in the host's byte order: another order, another key. */
    uint32_t one = 1;
    memcpy(head + 12, &one, 4);
    strncpy((char *)head + 16, kind, 15);
    lipi_sha256_update(&c, head, sizeof head);
    put_u64(buf, n);
    put_u64(buf + 8, extra_len);
    lipi_sha256_update(&c, buf, 16);
    lipi_sha256_update(&c, extra, extra_len);
    /* Batched: one update per token would cost more than the hashing. */
    for (size_t i = 0; i < n; i++) {
        size_t len = keys[i].s ? keys[i].len : 0;
        if (used + 8 + len > sizeof buf) {
            lipi_sha256_update(&c, buf, used);
            used = 0;
        }
        uint64_t l = keys[i].s ? (uint64_t)len : UINT64_MAX; /* host order, as the key says */
        memcpy(buf + used, &l, 8);
        used += 8;
        if (len > sizeof buf - 8) {
            lipi_sha256_update(&c, buf, used);
            lipi_sha256_update(&c, keys[i].s, len);
            used = 0;
        } else if (len) {
            memcpy(buf + used, keys[i].s, len);
            used += len;
        }
    }
    lipi_sha256_update(&c, buf, used);
    return lipi_sha256_final_hex(&c, out);
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

bool lipi_tabcache_open(lipi_tabcache_reader *r, const char *kind, const char key[65])
{
    unsigned char h[TC_HEADER], want[TC_HEADER];
    struct stat sb;
    char *path = cache_path(kind, key);
    memset(r, 0, sizeof *r);
    r->fd = -1;
    if (!path)
        return false;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    lipi_free(path);
    if (r->fd < 0)
        return false;
    if (fstat(r->fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < TC_HEADER ||
        read(r->fd, h, TC_HEADER) != TC_HEADER)
        goto bad;
    r->left = get_u64(h + 96);
    r->want = get_u64(h + 104);
    make_header(want, kind, key, r->left, r->want);
    if (memcmp(h, want, TC_HEADER) != 0 || r->left % 8 != 0 ||
        r->left != (uint64_t)sb.st_size - TC_HEADER)
        goto bad;
    lipi_tabcache_sum_start(&r->sum);
    return true;
bad:
    close(r->fd);
    r->fd = -1;
    return false;
}

bool lipi_tabcache_fits(const lipi_tabcache_reader *r, uint64_t count, size_t size)
{
    return r->fd >= 0 && !r->bad && size && count <= r->left / size;
}

bool lipi_tabcache_get(lipi_tabcache_reader *r, void *dst, size_t n)
{
    size_t padded = (n + 7) & ~(size_t)7;
    unsigned char *p = dst, pad[8];
    if (r->fd < 0 || r->bad || padded < n || padded > r->left) {
        r->bad = true;
        return false;
    }
    for (size_t got = 0; got < n;) {
        ssize_t k = read(r->fd, p + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            r->bad = true;
            return false;
        }
        got += (size_t)k;
    }
    sum_words(&r->sum, p, n & ~(size_t)7);
    if (padded != n) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, p + (n & ~(size_t)7), n & 7);
        unsigned char file_pad[8];
        if (read(r->fd, file_pad, padded - n) != (ssize_t)(padded - n) ||
            memcmp(file_pad, pad + (n & 7), padded - n) != 0) {
            r->bad = true;
            return false;
        }
        sum_words(&r->sum, pad, 8);
    }
    r->left -= padded;
    return true;
}

bool lipi_tabcache_get_u64(lipi_tabcache_reader *r, uint64_t *v)
{
    unsigned char b[8];
    if (!lipi_tabcache_get(r, b, 8))
        return false;
    *v = get_u64(b);
    return true;
}

bool lipi_tabcache_close(lipi_tabcache_reader *r)
{
    bool ok = r->fd >= 0 && !r->bad && r->left == 0 && lipi_tabcache_sum_end(&r->sum) == r->want;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    return ok;
}

/* ======================================================================== */
/* Mapping                                                                   */
/* ======================================================================== */

bool lipi_tabcache_map_open(lipi_tabcache_map *m, const char *kind, const char key[65])
{
    unsigned char want[TC_HEADER];
    struct stat sb;
    char *path = cache_path(kind, key);
    int fd = -1;
    memset(m, 0, sizeof *m);
    if (!path)
        return false;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    lipi_free(path);
    if (fd < 0)
        return false;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < TC_HEADER ||
        (uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return false;
    }
    /* Populated: the checksum reads every page at once anyway. */
    void *base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return false;
    m->base = base;
    m->size = (size_t)sb.st_size;
    const unsigned char *h = base;
    uint64_t len = get_u64(h + 96), sum = get_u64(h + 104);
    make_header(want, kind, key, len, sum);
    if (memcmp(h, want, TC_HEADER) != 0 || len % 8 != 0 || len != m->size - TC_HEADER ||
        lipi_tabcache_sum(h + TC_HEADER, (size_t)len) != sum) {
        lipi_tabcache_unmap(m->base, m->size);
        memset(m, 0, sizeof *m);
        return false;
    }
    m->p = h + TC_HEADER;
    m->left = (size_t)len;
    return true;
}

const void *lipi_tabcache_map_next(lipi_tabcache_map *m, uint64_t count, size_t size)
{
    const void *at = m->p;
    if (!m->base || !size || count > m->left / size) {
        m->bad = true;
        return NULL;
    }
    size_t padded = ((size_t)count * size + 7) & ~(size_t)7;
    if (padded > m->left) {
        m->bad = true;
        return NULL;
    }
    m->p += padded;
    m->left -= padded;
    return at;
}

void lipi_tabcache_unmap(void *base, size_t size)
{
    if (base)
        munmap(base, size);
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

bool lipi_tabcache_create(lipi_tabcache_writer *w, const char *kind, const char key[65])
{
    unsigned char h[TC_HEADER];
    char *path = cache_path(kind, key);
    memset(w, 0, sizeof *w);
    if (!path)
        return false;
    make_dirs(path);
    lipi_status st = lipi_atomic_open(&w->af, path, NULL);
    lipi_free(path);
    if (st != LIPI_OK)
        return false;
    /* A cache file lost or torn by a crash is rebuilt (the reader checks
     * the length and checksum): no fsync, which cost more than writing. */
    w->af.no_sync = true;
    w->open = true;
    strncpy(w->kind, kind, sizeof w->kind - 1);
    memcpy(w->key, key, 65);
    lipi_tabcache_sum_start(&w->sum);
    make_header(h, kind, key, 0, 0);
    if (fwrite(h, 1, TC_HEADER, w->af.f) != TC_HEADER)
        w->bad = true;
    return true;
}

void lipi_tabcache_put(lipi_tabcache_writer *w, const void *data, size_t n)
{
    unsigned char pad[8] = {0};
    if (!w->open || w->bad)
        return;
    if (n && fwrite(data, 1, n, w->af.f) != n)
        w->bad = true;
    sum_words(&w->sum, data, n & ~(size_t)7);
    if (n & 7) {
        memcpy(pad, (const unsigned char *)data + (n & ~(size_t)7), n & 7);
        sum_words(&w->sum, pad, 8);
        if (fwrite(pad + (n & 7), 1, 8 - (n & 7), w->af.f) != 8 - (n & 7))
            w->bad = true;
    }
    w->len += (n + 7) & ~(size_t)7;
}

void lipi_tabcache_put_u64(lipi_tabcache_writer *w, uint64_t v)
{
    unsigned char b[8];
    put_u64(b, v);
    lipi_tabcache_put(w, b, 8);
}

void lipi_tabcache_commit(lipi_tabcache_writer *w)
{
    unsigned char h[TC_HEADER];
    if (!w->open)
        return;
    w->open = false;
    make_header(h, w->kind, w->key, w->len, lipi_tabcache_sum_end(&w->sum));
    if (w->bad || fseek(w->af.f, 0, SEEK_SET) != 0 || fwrite(h, 1, TC_HEADER, w->af.f) != TC_HEADER) {
        lipi_atomic_abort(&w->af);
        return;
    }
    (void)lipi_atomic_commit(&w->af, NULL);
}

void lipi_tabcache_abort(lipi_tabcache_writer *w)
{
    if (w->open)
        lipi_atomic_abort(&w->af);
    w->open = false;
}

/* ======================================================================== */
/* File digests by stat identity                                            */
/* ======================================================================== */

/* A file's SHA-256, recorded under its stat identity (device, inode, size,
 * modification and change times in nanoseconds), as ccache's direct mode
 * does: a warm open of a 3.6 MB rank file reads a 64-byte record instead
 * of reading and hashing the file (~4 ms for o200k). Recorded only for a
 * file whose identity did not change while it was read and whose times
 * are at least LIPI_TABCACHE_SETTLE_NS old: a change to the file after
 * that (within the same tick of the file system's clock or not) sets its
 * change time to now, which is another identity. (mtime can be set back
 * by anyone, size kept, inode reused; ctime cannot be set, only follows
 * the clock.) Not proof against a system clock set back past the file's
 * last change, nor a file system that keeps no change times. */

long long lipi_tabcache_settle_ns = 2000000000LL;

/* The identity's cache key (and what was hashed). */
static bool identity_key(const struct stat *sb, const char *what, char key[65])
{
    uint64_t id[7] = {(uint64_t)sb->st_dev,          (uint64_t)sb->st_ino,
                      (uint64_t)sb->st_size,         (uint64_t)sb->st_mtim.tv_sec,
                      (uint64_t)sb->st_mtim.tv_nsec, (uint64_t)sb->st_ctim.tv_sec,
                      (uint64_t)sb->st_ctim.tv_nsec};
    lipi_strref k = {(const char *)id, sizeof id};
    return make_key("digest", false, &k, 1, what, strlen(what), key) == LIPI_OK;
}

static bool same_identity(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static bool is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool lipi_tabcache_digest_get(const struct stat *sb, const char *what, char hex[65])
{
    char key[65], got[64];
    lipi_tabcache_reader r;
    if (!identity_key(sb, what, key) || !lipi_tabcache_open(&r, "digest", key))
        return false;
    bool ok = lipi_tabcache_get(&r, got, 64);
    ok = lipi_tabcache_close(&r) && ok && is_hex64(got);
    if (ok) {
        memcpy(hex, got, 64);
        hex[64] = '\0';
    }
    return ok;
}

void lipi_tabcache_digest_put(const struct stat *before, const struct stat *after,
                              const char *what, const char hex[65])
{
    struct timespec now;
    char key[65];
    lipi_tabcache_writer w;
    if (!same_identity(before, after) || !is_hex64(hex) ||
        clock_gettime(CLOCK_REALTIME, &now) != 0)
        return;
    long long t = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    long long m = (long long)before->st_mtim.tv_sec * 1000000000LL + before->st_mtim.tv_nsec;
    long long c = (long long)before->st_ctim.tv_sec * 1000000000LL + before->st_ctim.tv_nsec;
    if (t - m < lipi_tabcache_settle_ns || t - c < lipi_tabcache_settle_ns)
        return; /* may still be changing within its clock's tick */
    if (!identity_key(before, what, key) || !lipi_tabcache_create(&w, "digest", key))
        return;
    lipi_tabcache_put(&w, hex, 64);
    lipi_tabcache_commit(&w);
}

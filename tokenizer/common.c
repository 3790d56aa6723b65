/* Small shared helpers: growable buffers, the invariant check and the
 * huge-page hint. */
#include "tokenizer/base.h"
#include "tokenizer/base_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

_Thread_local int lipi_hash_oom_flag;

/* [from, count) of a; without an early exit. */
static bool u32_below_from(const uint32_t *a, size_t from, size_t count, uint64_t n, uint32_t skip,
                           size_t *skipped)
{
    uint32_t bad = 0;
    for (size_t i = from; i < count; i++) {
        *skipped += a[i] == skip;
        bad |= a[i] != skip && a[i] >= n;
    }
    return !bad;
}

bool lipi_u32_all_below_ref(const uint32_t *a, size_t count, uint64_t n, uint32_t skip,
                            size_t *skipped)
{
    *skipped = 0;
    return u32_below_from(a, 0, count, n, skip, skipped);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* n <= UINT32_MAX. a[i] >= n is max(a[i], n) == a[i] (AVX2 compares
 * 32-bit lanes as signed only). */
__attribute__((target("avx2"))) static bool u32_below_avx2(const uint32_t *a, size_t count,
                                                           uint32_t n, uint32_t skip,
                                                           size_t *skipped)
{
    const __m256i vn = _mm256_set1_epi32((int)n), vs = _mm256_set1_epi32((int)skip);
    __m256i bad = _mm256_setzero_si256(), skips = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(a + i));
        __m256i is_skip = _mm256_cmpeq_epi32(v, vs);
        skips = _mm256_sub_epi32(skips, is_skip);
        bad = _mm256_or_si256(
            bad, _mm256_andnot_si256(is_skip, _mm256_cmpeq_epi32(_mm256_max_epu32(v, vn), v)));
    }
    uint32_t l[8];
    _mm256_storeu_si256((__m256i *)l, skips);
    for (int k = 0; k < 8; k++)
        *skipped += l[k];
    bool tail_ok = u32_below_from(a, i, count, n, skip, skipped); /* counted either way */
    return _mm256_testz_si256(bad, bad) && tail_ok;
}
#endif

bool lipi_u32_all_below(const uint32_t *a, size_t count, uint64_t n, uint32_t skip,
                        size_t *skipped)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* A lane counts up to count / 8 skips: below 2^32. */
    if (count >= 64 && count >> 34 == 0 && n <= UINT32_MAX && __builtin_cpu_supports("avx2")) {
        *skipped = 0;
        return u32_below_avx2(a, count, (uint32_t)n, skip, skipped);
    }
#endif
    return lipi_u32_all_below_ref(a, count, n, skip, skipped);
}

unsigned lipi_row_intern(const uint8_t *rows, size_t row_len, uint16_t *slot, size_t slots,
                         unsigned *n_rows)
{
    const uint8_t *out = rows + (size_t)*n_rows * row_len;
    uint64_t h = 0;
    for (size_t i = 0; i + 8 <= row_len; i += 8) {
        uint64_t w;
        memcpy(&w, out + i, 8);
        h = (h ^ w) * UINT64_C(0x9E3779B97F4A7C15);
    }
    size_t at = (size_t)(h >> 32) & (slots - 1);
    while (slot[at] && memcmp(rows + (size_t)(slot[at] - 1) * row_len, out, row_len) != 0)
        at = (at + 1) & (slots - 1);
    if (!slot[at])
        slot[at] = (uint16_t)++*n_rows;
    return slot[at];
}

_Noreturn void lipi_assert_fail(const char *what, const char *file, int line)
{
    /* A broken invariant is a lipi bug, not bad input: stop loudly. */
    fprintf(stderr, "lipi: internal error: %s (%s:%d)\n", what, file, line);
    abort();
}

lipi_status lipi_grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return LIPI_OK;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return LIPI_ENOMEM;
        ncap *= 2;
    }
    void *np = lipi_reallocarray(*p, ncap, size);
    if (!np)
        return LIPI_ENOMEM;
    *p = np;
    *cap = ncap;
    return LIPI_OK;
}

lipi_status lipi_buf_reserve(lipi_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1)
        return LIPI_ENOMEM;
    void *p = b->p;
    lipi_status st = lipi_grow(&p, &b->cap, b->len + extra + 1, 1);
    b->p = p;
    return st;
}

lipi_status lipi_buf_append(lipi_buf *b, const void *data, size_t len)
{
    lipi_status st = lipi_buf_reserve(b, len);
    if (st != LIPI_OK)
        return st;
    if (len)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return LIPI_OK;
}

void lipi_buf_free(lipi_buf *b)
{
    lipi_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

const char *lipi_json_kind(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "something else";
}

void lipi_huge_pages(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + len) & ~(huge - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)len;
#endif
}

size_t lipi_thread_count(size_t want, size_t max)
{
    long n = want ? (long)(want > max ? max : want) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (size_t)n > max ? max : (size_t)n;
}

const char *lipi_plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

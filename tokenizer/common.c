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

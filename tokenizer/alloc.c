/* The one allocation hook. jansson is routed through it too, so a test that
 * fails the Nth allocation reaches every allocation lipi makes (ICU and
 * PCRE2 keep their own heaps: their failures surface as LIPI_EICU/EREGEX). */
#include "tokenizer/base.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static lipi_alloc_hooks hooks = {malloc, realloc, free};

_Thread_local unsigned long lipi_alloc_failures;

void lipi_set_alloc_hooks(const lipi_alloc_hooks *h)
{
    if (h)
        hooks = *h;
    else
        hooks = (lipi_alloc_hooks){malloc, realloc, free};
    /* Through lipi_malloc, so that failures inside jansson are counted. */
    json_set_alloc_funcs(lipi_malloc, lipi_free);
}

void *lipi_malloc(size_t size)
{
    void *p = hooks.malloc_fn(size ? size : 1);
    if (!p)
        lipi_alloc_failures++;
    return p;
}

void *lipi_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    /* libc's calloc skips the memset for fresh pages (a snapshot's token
     * table, the encoder's raw-byte keys: megabytes at each load). */
    if (hooks.malloc_fn == malloc && hooks.free_fn == free) {
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
            lipi_alloc_failures++;
        return p;
    }
    void *p = lipi_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *lipi_realloc(void *p, size_t size)
{
    void *q = hooks.realloc_fn(p, size ? size : 1);
    if (!q)
        lipi_alloc_failures++;
    return q;
}

void *lipi_reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return lipi_realloc(p, n * size);
}

void lipi_free(void *p)
{
    if (p)
        hooks.free_fn(p);
}

char *lipi_strndup(const char *s, size_t len)
{
    if (len == SIZE_MAX)
        return NULL;
    char *d = lipi_malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

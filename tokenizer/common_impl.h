/* Internal helpers shared by every module's .c files; never included by a
 * public header. */
#ifndef LIPI_COMMON_IMPL_H
#define LIPI_COMMON_IMPL_H

#include "tokenizer/tokenizer.h"

/* uthash allocates through the lipi hook and reports OOM instead of exiting:
 * after HASH_ADD*, check `lipi_hash_oom` (set by uthash_nonfatal_oom). */
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) lipi_malloc(sz)
#define uthash_free(ptr, sz) lipi_free(ptr)
#define uthash_nonfatal_oom(obj) (lipi_hash_oom_flag = 1)
extern _Thread_local int lipi_hash_oom_flag;
#include <uthash.h>

/* Propagate a failing status to the function's single cleanup label:
 *     TRY(lipi_normalize(...));          jumps to `done` with `st` set */
#define TRY(expr)                                                                  \
    do {                                                                           \
        st = (expr);                                                               \
        if (st != LIPI_OK)                                                         \
            goto done;                                                             \
    } while (0)

/* Always-on check for broken invariants (never for bad input). */
#define LIPI_ASSERT(cond)                                                          \
    do {                                                                           \
        if (!(cond))                                                               \
            lipi_assert_fail(#cond, __FILE__, __LINE__);                           \
    } while (0)
_Noreturn void lipi_assert_fail(const char *what, const char *file, int line);

/* Growable byte buffer for building strings. */
typedef struct {
    char *p;
    size_t len, cap;
} lipi_buf;

/* Ensures room for `extra` more bytes plus a NUL; LIPI_ENOMEM on failure. */
lipi_status lipi_buf_reserve(lipi_buf *b, size_t extra);
lipi_status lipi_buf_append(lipi_buf *b, const void *data, size_t len);
void lipi_buf_free(lipi_buf *b);

/* Grows an array *p of *cap elements of `size` bytes to hold `need`. */
lipi_status lipi_grow(void **p, size_t *cap, size_t need, size_t size);

#endif

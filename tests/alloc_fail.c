/* The allocation-failure loop shared by the tests (see alloc_fail.h). */
#include "tests/alloc_fail.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

/* Atomic: work under test may allocate from several threads. */
static long fail_at = -1;
static atomic_long calls, live;

static void *fail_malloc(size_t n)
{
    if (atomic_fetch_add(&calls, 1) == fail_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        live++;
    return p;
}

static void *fail_realloc(void *p, size_t n)
{
    if (atomic_fetch_add(&calls, 1) == fail_at)
        return NULL;
    void *q = realloc(p, n);
    if (q && !p)
        live++;
    return q;
}

static void fail_free(void *p)
{
    if (p) {
        live--;
        free(p);
    }
}

static const lipi_alloc_hooks hooks = {fail_malloc, fail_realloc, fail_free};

void alloc_fail_arm(long n)
{
    fail_at = n;
    calls = 0;
    live = 0;
    lipi_set_alloc_hooks(&hooks);
}

void alloc_fail_disarm(void)
{
    lipi_set_alloc_hooks(NULL);
    fail_at = -1;
}

long alloc_fail_calls(void)
{
    return calls;
}

long alloc_fail_live(void)
{
    return live;
}

bool alloc_fail_hit(void)
{
    return fail_at >= 0 && calls > fail_at;
}

long alloc_fail_loop(const char *what, lipi_status (*run)(void *ctx, lipi_error *err), void *ctx)
{
    for (long n = 0; n < 10000000; n++) {
        lipi_error err = {0};
        alloc_fail_arm(n);
        lipi_status st = run(ctx, &err);
        bool hit = alloc_fail_hit();
        long left = live, total = calls;
        alloc_fail_disarm();
        if (left != 0)
            fail_msg("%s: allocation %ld failing: %ld blocks leaked", what, n, left);
        if (!hit) {
            if (st != LIPI_OK)
                fail_msg("%s: without a failure: %s %s", what, lipi_status_name(st), err.msg);
            return total;
        }
        /* Work may survive a failure it can do without (a cache). */
        if (st == LIPI_OK)
            continue;
        if (st != LIPI_ENOMEM || err.code != LIPI_ENOMEM)
            fail_msg("%s: allocation %ld failing: expected ENOMEM, found %s (err %s) %s", what,
                     n, lipi_status_name(st), lipi_status_name(err.code), err.msg);
    }
    fail_msg("%s: did not succeed", what);
    return 0;
}

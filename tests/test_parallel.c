/* lipi_parallel_for and lipi_thread_pool: every task once, the lowest
 * failure reported whatever the timing, inline on one thread, and no
 * failure of its own when memory for the threads is missing. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/alloc_fail.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    atomic_uint *runs;    /* per task */
    size_t threads;       /* workers must be below it */
    size_t fail_every;    /* tasks with task % fail_every == fail_at fail; 0: none */
    size_t fail_at;
    pthread_t caller;
    atomic_bool off_caller; /* some task ran on another thread */
    atomic_bool bad_worker;
} count_job;

static lipi_status count_task(void *ctx, size_t task, size_t worker, lipi_error *err)
{
    count_job *j = ctx;
    atomic_fetch_add(&j->runs[task], 1);
    if (worker >= j->threads)
        atomic_store(&j->bad_worker, true);
    if (!pthread_equal(pthread_self(), j->caller))
        atomic_store(&j->off_caller, true);
    /* Spin a little so the threads really interleave. */
    for (volatile unsigned i = 0; i < 200; i++)
        ;
    if (j->fail_every && task % j->fail_every == j->fail_at)
        return lipi_error_set(err, task % 2 ? LIPI_EFORMAT : LIPI_EIO, "task", task, 0,
                              "task %zu failed", task);
    return LIPI_OK;
}

static void test_every_task_runs_exactly_once(void **state)
{
    (void)state;
    static const size_t ns[] = {0, 1, 2, 7, 1000}, ts[] = {1, 2, 3, 16};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof ts / sizeof *ts; b++) {
            size_t n = ns[a];
            atomic_uint *runs = calloc(n ? n : 1, sizeof *runs);
            assert_non_null(runs);
            count_job j = {.runs = runs, .threads = ts[b], .caller = pthread_self()};
            lipi_error err = {0};
            assert_int_equal(lipi_parallel_for(n, ts[b], count_task, &j, &err), LIPI_OK);
            for (size_t t = 0; t < n; t++)
                if (atomic_load(&runs[t]) != 1)
                    fail_msg("n=%zu threads=%zu: task %zu ran %u times", n, ts[b], t,
                             atomic_load(&runs[t]));
            assert_false(atomic_load(&j.bad_worker));
            if (ts[b] == 1 || n <= 1)
                assert_false(atomic_load(&j.off_caller)); /* inline, no thread */
            free(runs);
        }
}

/* The same pool, many runs in a row: no task of one run leaks into the
 * next (the forward pass runs one per GEMM). */
static void test_pool_runs_back_to_back(void **state)
{
    (void)state;
    lipi_thread_pool *pool = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_thread_pool_new(3, &pool, &err), LIPI_OK);
    assert_int_equal(lipi_thread_pool_threads(pool), 3);
    atomic_uint runs[64];
    for (size_t r = 0; r < 500; r++) {
        size_t n = r % 64;
        for (size_t t = 0; t < 64; t++)
            atomic_init(&runs[t], 0);
        count_job j = {.runs = runs, .threads = 3, .caller = pthread_self()};
        assert_int_equal(lipi_thread_pool_run(pool, n, count_task, &j, &err), LIPI_OK);
        for (size_t t = 0; t < 64; t++)
            assert_int_equal(atomic_load(&runs[t]), t < n ? 1 : 0);
    }
    lipi_thread_pool_free(pool);
    assert_int_equal(lipi_thread_pool_threads(NULL), 1);
}

/* Tasks 3, 10, 17, ... fail (EFORMAT and EIO alternately): always task 3's
 * error, on any thread count, however often it is run; every task below it
 * ran once. */
static void test_lowest_failing_task_wins(void **state)
{
    (void)state;
    static const size_t ts[] = {1, 2, 3, 16};
    for (size_t b = 0; b < sizeof ts / sizeof *ts; b++)
        for (size_t rep = 0; rep < 50; rep++) {
            atomic_uint runs[1000];
            for (size_t t = 0; t < 1000; t++)
                atomic_init(&runs[t], 0);
            count_job j = {.runs = runs, .threads = ts[b], .fail_every = 7, .fail_at = 3,
                           .caller = pthread_self()};
            lipi_error err = {0};
            assert_int_equal(lipi_parallel_for(1000, ts[b], count_task, &j, &err), LIPI_EFORMAT);
            assert_int_equal(err.code, LIPI_EFORMAT);
            assert_int_equal(err.line, 3);
            assert_string_equal(err.msg, "task 3 failed");
            for (size_t t = 0; t <= 3; t++)
                assert_int_equal(atomic_load(&runs[t]), 1);
            for (size_t t = 4; t < 1000; t++)
                assert_true(atomic_load(&runs[t]) <= 1);
        }
}

/* A failing task's err starts cleared: a message from an earlier task on
 * the same worker does not leak into the report. */
static lipi_status status_only_task(void *ctx, size_t task, size_t worker, lipi_error *err)
{
    (void)ctx;
    (void)worker;
    if (task == 5)
        return LIPI_EINVAL; /* fills nothing */
    if (task < 5)
        lipi_error_set(err, LIPI_EIO, "stale", 1, 1, "left over"); /* yet succeeds */
    return LIPI_OK;
}

static void test_failing_task_error_starts_cleared(void **state)
{
    (void)state;
    lipi_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(lipi_parallel_for(10, 1, status_only_task, NULL, &err), LIPI_EINVAL);
    assert_int_equal(err.code, LIPI_EINVAL);
    assert_string_equal(err.msg, "");
    assert_string_equal(err.path, "");
    assert_int_equal(lipi_parallel_for(10, 4, status_only_task, NULL, NULL), LIPI_EINVAL);
}

/* lipi_parallel_for never fails for want of memory (the tasks then run on
 * the caller); lipi_thread_pool_new does, with LIPI_ENOMEM, leaking nothing. */
typedef struct {
    atomic_uint runs[100];
} alloc_job;

static lipi_status alloc_task(void *ctx, size_t task, size_t worker, lipi_error *err)
{
    alloc_job *j = ctx;
    atomic_fetch_add(&j->runs[task], 1);
    return LIPI_OK;
}

static lipi_status parallel_for_run(void *ctx, lipi_error *err)
{
    alloc_job *j = ctx;
    for (size_t t = 0; t < 100; t++)
        atomic_init(&j->runs[t], 0);
    lipi_status st = lipi_parallel_for(100, 4, alloc_task, j, err);
    for (size_t t = 0; t < 100; t++)
        assert_int_equal(atomic_load(&j->runs[t]), 1);
    return st;
}

static lipi_status pool_run(void *ctx, lipi_error *err)
{
    lipi_thread_pool *pool = NULL;
    lipi_status st = lipi_thread_pool_new(4, &pool, err);
    if (st != LIPI_OK) {
        assert_null(pool);
        return st;
    }
    st = lipi_thread_pool_run(pool, 100, alloc_task, ctx, err);
    lipi_thread_pool_free(pool);
    return st;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    static alloc_job j;
    for (long n = 0; n < 4; n++) {
        alloc_fail_arm(n);
        lipi_error err = {0};
        assert_int_equal(parallel_for_run(&j, &err), LIPI_OK);
        alloc_fail_disarm();
        assert_int_equal(alloc_fail_live(), 0);
    }
    assert_true(alloc_fail_loop("thread pool", pool_run, &j) >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_runs_exactly_once),
        cmocka_unit_test(test_pool_runs_back_to_back),
        cmocka_unit_test(test_lowest_failing_task_wins),
        cmocka_unit_test(test_failing_task_error_starts_cleared),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

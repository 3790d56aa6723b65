/* The one thread pool: lipi_parallel_for and the persistent lipi_thread_pool
 * it is made of (contract in tokenizer.h).
 *
 * The caller is worker 0 and takes tasks too, so a run never waits for a
 * thread that the scheduler has not woken yet: a busy machine only costs
 * parallelism. Tasks are claimed from one 64-bit ticket, run generation in
 * the high half and the next task in the low half, so one compare-and-swap
 * both claims a task and proves it belongs to the current run: a worker
 * that wakes late can never run a task of a newer run. (This is the pool
 * the forward pass had; the other six copies were fork-join pools started
 * per call.) */
#include "tokenizer/base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct {
    lipi_thread_pool *p;
    size_t index;
    lipi_error err; /* what this worker's failing task wrote */
} worker;

struct lipi_thread_pool {
    size_t threads;      /* caller + started threads */
    pthread_t *tids;
    worker *workers;     /* workers[0] is the caller's */
    size_t started;
    bool sync_ok;
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    uint32_t gen;        /* run generation, under mu */
    bool quit;
    lipi_task_fn fn;     /* the current run, under mu */
    void *ctx;
    size_t ntasks;
    _Atomic uint64_t ticket;
    atomic_size_t done;       /* tasks finished (or skipped) in this run */
    atomic_size_t first_fail; /* lowest failing task so far, SIZE_MAX */
    lipi_status fail_st;      /* of first_fail's task, under mu */
    lipi_error fail_err;
};

/* The worker's error struct, cleared cheaply: a task that fails fills it. */
static void clear_error(lipi_error *e)
{
    e->code = LIPI_OK;
    e->path[0] = e->msg[0] = '\0';
    e->line = e->offset = 0;
}

/* Claims the next task of run `gen`; false when none is left or a newer
 * run has started. */
static bool claim(lipi_thread_pool *p, uint32_t gen, size_t ntasks, size_t *task)
{
    uint64_t v = atomic_load(&p->ticket);
    for (;;) {
        if ((uint32_t)(v >> 32) != gen || (v & 0xffffffffu) >= ntasks)
            return false;
        if (atomic_compare_exchange_weak(&p->ticket, &v, v + 1)) {
            *task = (size_t)(v & 0xffffffffu);
            return true;
        }
    }
}

static void run_tasks(lipi_thread_pool *p, uint32_t gen, lipi_task_fn fn, void *ctx,
                      size_t ntasks, worker *w)
{
    size_t t;
    while (claim(p, gen, ntasks, &t)) {
        /* Tasks are claimed in increasing order, so every task below a
         * failure was claimed before it and still runs: skipping only
         * those above keeps the reported failure the lowest one. */
        if (t < atomic_load(&p->first_fail)) {
            clear_error(&w->err);
            lipi_status st = fn(ctx, t, w->index, &w->err);
            if (st != LIPI_OK) {
                pthread_mutex_lock(&p->mu);
                if (t < atomic_load(&p->first_fail)) {
                    atomic_store(&p->first_fail, t);
                    p->fail_st = st;
                    p->fail_err = w->err;
                    p->fail_err.code = st;
                }
                pthread_mutex_unlock(&p->mu);
            }
        }
        if (atomic_fetch_add(&p->done, 1) + 1 == ntasks) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->idle);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    lipi_thread_pool *p = w->p;
    uint32_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        lipi_task_fn fn = p->fn;
        void *ctx = p->ctx;
        size_t ntasks = p->ntasks;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, seen, fn, ctx, ntasks, w);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* In order on the caller: the first failure is the lowest one. */
static lipi_status run_inline(size_t n_tasks, lipi_task_fn fn, void *ctx, lipi_error *err)
{
    lipi_error e;
    for (size_t t = 0; t < n_tasks; t++) {
        clear_error(&e);
        lipi_status st = fn(ctx, t, 0, &e);
        if (st != LIPI_OK) {
            e.code = st;
            if (err)
                *err = e;
            return st;
        }
    }
    return LIPI_OK;
}

void lipi_thread_pool_free(lipi_thread_pool *p)
{
    if (!p)
        return;
    if (p->sync_ok) {
        pthread_mutex_lock(&p->mu);
        p->quit = true;
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (size_t i = 0; i < p->started; i++)
            pthread_join(p->tids[i], NULL);
        pthread_cond_destroy(&p->idle);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
    }
    lipi_free(p->tids);
    lipi_free(p->workers);
    lipi_free(p);
}

lipi_status lipi_thread_pool_new(size_t threads, lipi_thread_pool **out, lipi_error *err)
{
    *out = NULL;
    lipi_thread_pool *p = lipi_calloc(1, sizeof *p);
    if (!p)
        goto nomem;
    p->threads = threads ? threads : 1;
    atomic_init(&p->ticket, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->first_fail, SIZE_MAX);
    p->workers = lipi_calloc(p->threads, sizeof *p->workers);
    if (!p->workers)
        goto nomem;
    p->workers[0] = (worker){.p = p, .index = 0};
    if (p->threads == 1) {
        *out = p;
        return LIPI_OK;
    }
    p->tids = lipi_calloc(p->threads - 1, sizeof *p->tids);
    if (!p->tids)
        goto nomem;
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto nomem;
    if (pthread_cond_init(&p->wake, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        goto nomem;
    }
    if (pthread_cond_init(&p->idle, NULL) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        goto nomem;
    }
    p->sync_ok = true;
    for (size_t i = 1; i < p->threads; i++) {
        p->workers[i] = (worker){.p = p, .index = i};
        if (pthread_create(&p->tids[i - 1], NULL, worker_main, &p->workers[i]) != 0) {
            lipi_status st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0,
                                            "cannot start thread %zu of %zu", i + 1, p->threads);
            lipi_thread_pool_free(p);
            return st;
        }
        p->started++;
    }
    *out = p;
    return LIPI_OK;
nomem:
    lipi_thread_pool_free(p);
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
}

size_t lipi_thread_pool_threads(const lipi_thread_pool *p)
{
    return p ? p->threads : 1;
}

lipi_status lipi_thread_pool_run(lipi_thread_pool *p, size_t n_tasks, lipi_task_fn fn, void *ctx,
                                 lipi_error *err)
{
    if (n_tasks > UINT32_MAX) /* the ticket's low half */
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "%zu tasks: at most %zu per run", n_tasks, (size_t)UINT32_MAX);
    if (!p || p->started == 0 || n_tasks <= 1)
        return run_inline(n_tasks, fn, ctx, err);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->ntasks = n_tasks;
    p->gen++;
    uint32_t gen = p->gen;
    atomic_store(&p->done, 0);
    atomic_store(&p->first_fail, SIZE_MAX);
    atomic_store(&p->ticket, (uint64_t)gen << 32);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, gen, fn, ctx, n_tasks, &p->workers[0]);
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->done) < n_tasks)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
    /* Every task has finished, so first_fail and fail_* are final. */
    if (atomic_load(&p->first_fail) == SIZE_MAX)
        return LIPI_OK;
    if (err)
        *err = p->fail_err;
    return p->fail_st;
}

lipi_status lipi_parallel_for(size_t n_tasks, size_t threads, lipi_task_fn fn, void *ctx,
                              lipi_error *err)
{
    if (threads > n_tasks)
        threads = n_tasks;
    if (threads <= 1 || n_tasks > UINT32_MAX)
        return lipi_thread_pool_run(NULL, n_tasks, fn, ctx, err);
    lipi_thread_pool *p = NULL;
    /* A pool that cannot start leaves the tasks to the caller: same results
     * (the tasks' contract), so not worth failing the caller's work for. */
    (void)lipi_thread_pool_new(threads, &p, NULL);
    lipi_status st = lipi_thread_pool_run(p, n_tasks, fn, ctx, err);
    lipi_thread_pool_free(p);
    return st;
}

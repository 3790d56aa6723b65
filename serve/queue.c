/* The batching queue of `lipi serve`: requests that arrive together are
 * packed into one forward pass (texts one after the other, no padding, as
 * lipi embed packs a file's lines), up to max_batch_tokens tokens, and each
 * request's results go back to it in its own order. One thread runs the
 * model; the HTTP threads only parse, count tokens and wait. */
#include "serve/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lipi_serve_queue {
    const lipi_embedder *e;
    lipi_serve_queue_options opt;
    lipi_embedder_session *s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lipi_serve_job *head, *tail; /* jobs with items not yet taken, FIFO */
    size_t jobs;                 /* waiting or running */
    bool stopping;
    lipi_serve_queue_stats stats;
    /* One batch: (max_batch) pointers and lengths, the query repeated for
     * rerank, and where each item's result goes. */
    const char **a, **b;
    size_t *alen, *blen;
    const uint32_t **ids;
    size_t *idlen;
    float *out;                  /* (max_batch, widest out_dim) */
    size_t out_cap;
    uint8_t *cut;
    lipi_serve_job **who;        /* (max_batch) the job of item i */
    size_t *at;                  /* (max_batch) its index in that job */
};

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *run(void *arg);

lipi_status lipi_serve_queue_new(const lipi_embedder *e, const lipi_serve_queue_options *opt,
                                 lipi_serve_queue **out, lipi_error *err)
{
    *out = NULL;
    lipi_serve_queue *q = calloc(1, sizeof *q);
    if (!q)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    q->e = e;
    q->opt = *opt;
    if (!q->opt.max_batch)
        q->opt.max_batch = 32;
    size_t m = q->opt.max_batch;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    lipi_status st = lipi_embedder_session_new(e, opt->threads, &q->s, err);
    if (st == LIPI_OK &&
        (!(q->a = calloc(m, sizeof *q->a)) || !(q->b = calloc(m, sizeof *q->b)) ||
         !(q->alen = calloc(m, sizeof *q->alen)) || !(q->blen = calloc(m, sizeof *q->blen)) ||
         !(q->ids = calloc(m, sizeof *q->ids)) || !(q->idlen = calloc(m, sizeof *q->idlen)) ||
         !(q->cut = calloc(m, 1)) || !(q->who = calloc(m, sizeof *q->who)) ||
         !(q->at = calloc(m, sizeof *q->at))))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK && pthread_create(&q->thread, NULL, run, q) != 0)
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "cannot start the batching thread");
    if (st != LIPI_OK) {
        lipi_embedder_session_free(q->s);
        q->s = NULL;
        q->stopping = true;
        q->thread = 0;
        lipi_serve_queue_free(q);
        return st;
    }
    *out = q;
    return LIPI_OK;
}

bool lipi_serve_queue_submit(lipi_serve_queue *q, lipi_serve_job *job)
{
    pthread_mutex_lock(&q->mu);
    bool ok = !q->stopping && (!q->opt.max_jobs || q->jobs < q->opt.max_jobs);
    if (ok) {
        job->state = LIPI_JOB_DONE;
        job->taken = job->done = 0;
        job->next = NULL;
        clock_gettime(CLOCK_MONOTONIC, &job->queued);
        if (q->tail)
            q->tail->next = job;
        else
            q->head = job;
        q->tail = job;
        q->jobs++;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

size_t lipi_serve_queue_depth(lipi_serve_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->jobs;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void lipi_serve_queue_get_stats(lipi_serve_queue *q, lipi_serve_queue_stats *out)
{
    pthread_mutex_lock(&q->mu);
    *out = q->stats;
    pthread_mutex_unlock(&q->mu);
}

/* Unlinks the head job (the caller holds the lock). */
static void pop_head(lipi_serve_queue *q)
{
    q->head = q->head->next;
    if (!q->head)
        q->tail = NULL;
}

/* A job leaves: counted out, then told (outside the lock). */
static void finish(lipi_serve_queue *q, lipi_serve_job *job)
{
    pthread_mutex_lock(&q->mu);
    q->jobs--;
    pthread_mutex_unlock(&q->mu);
    job->on_done(job, job->ctx);
}

/* Takes the next batch's items from the head of the queue (the lock held):
 * items of the head job's kind (and, for rerank, its query: one pass has
 * one query per pair list only by job), until max_batch items or
 * max_batch_tokens tokens; never none. Jobs whose deadline passed or whose
 * client left before any of their items ran are unlinked into *gone.
 * Returns the number of items. */
static size_t take(lipi_serve_queue *q, size_t *tokens, lipi_serve_job **gone)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    size_t n = 0, t = 0;
    lipi_job_kind kind = 0;
    while (q->head && n < q->opt.max_batch) {
        lipi_serve_job *j = q->head;
        if (j->taken == 0) {
            bool late = (j->deadline.tv_sec || j->deadline.tv_nsec) && before(&j->deadline, &now);
            if (late || (j->alive && !j->alive(j->ctx))) {
                j->state = late ? LIPI_JOB_TIMED_OUT : LIPI_JOB_DROPPED;
                pop_head(q);
                j->next = *gone;
                *gone = j;
                continue;
            }
        }
        if (n && (j->kind != kind || j->kind == LIPI_JOB_RERANK || q->who[0]->out_dim != j->out_dim))
            break;
        kind = j->kind;
        while (j->taken < j->n && n < q->opt.max_batch) {
            size_t k = j->tokens ? j->tokens[j->taken] : 1;
            if (n && t + k > q->opt.max_batch_tokens)
                break;
            q->who[n] = j;
            q->at[n] = j->taken++;
            t += k;
            n++;
        }
        if (j->taken < j->n)
            break;
        pop_head(q);
    }
    *tokens = t;
    return n;
}

/* Runs items [0, n) (all of one kind) as one call into q->out. */
static lipi_status run_items(lipi_serve_queue *q, size_t n, lipi_error *err)
{
    lipi_serve_job *j0 = q->who[0];
    for (size_t i = 0; i < n; i++) {
        lipi_serve_job *j = q->who[i];
        size_t k = q->at[i];
        if (j->kind == LIPI_JOB_EMBED_IDS) {
            q->ids[i] = j->ids[k];
            q->idlen[i] = j->id_lens[k];
        } else {
            q->a[i] = j->texts[k];
            q->alen[i] = j->lens[k];
        }
        if (j->kind == LIPI_JOB_RERANK) {
            q->b[i] = q->a[i];
            q->blen[i] = q->alen[i];
            q->a[i] = j->query;
            q->alen[i] = j->query_len;
        }
    }
    switch (j0->kind) {
    case LIPI_JOB_EMBED:
        return lipi_embedder_embed(q->s, q->a, q->alen, n, q->out, q->cut, err);
    case LIPI_JOB_EMBED_IDS:
        return lipi_embedder_embed_ids(q->s, q->ids, q->idlen, n, q->out, q->cut, err);
    case LIPI_JOB_CLASSIFY:
        return lipi_embedder_classify(q->s, q->a, q->alen, n, q->out, q->cut, err);
    case LIPI_JOB_RERANK:
        return lipi_embedder_score_pairs(q->s, q->a, q->alen, q->b, q->blen, n, j0->label,
                                         j0->raw, q->out, q->cut, err);
    }
    return LIPI_OK;
}

/* Copies item i's result to its job; true when that finished the job. */
static bool deliver(lipi_serve_queue *q, size_t i)
{
    lipi_serve_job *j = q->who[i];
    size_t k = q->at[i];
    memcpy(j->out + k * j->out_dim, q->out + i * j->out_dim, j->out_dim * sizeof *q->out);
    if (j->truncated)
        j->truncated[k] = q->cut[i];
    return ++j->done == j->n;
}

static void *run(void *arg)
{
    lipi_serve_queue *q = arg;
    lipi_error err;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->stopping)
            pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head && q->stopping) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        if (q->opt.delay_ms) {
            pthread_mutex_unlock(&q->mu);
            struct timespec d = {q->opt.delay_ms / 1000, (long)(q->opt.delay_ms % 1000) * 1000000};
            nanosleep(&d, NULL);
            pthread_mutex_lock(&q->mu);
        }
        size_t tokens = 0;
        lipi_serve_job *gone = NULL;
        size_t n = take(q, &tokens, &gone);
        pthread_mutex_unlock(&q->mu);
        while (gone) {
            lipi_serve_job *j = gone;
            gone = j->next;
            finish(q, j);
        }
        if (!n)
            continue;
        size_t need = n * q->who[0]->out_dim;
        if (need > q->out_cap) {
            float *p = realloc(q->out, need * sizeof *p);
            if (!p) {
                /* Out of memory: every job of the batch fails whole. */
                lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                goto fail_all;
            }
            q->out = p;
            q->out_cap = need;
        }
        lipi_status st = run_items(q, n, &err);
        if (st != LIPI_OK && n > 1) {
            /* One input spoilt a shared pass (an id the model does not
             * have): run each item alone, so only its own job fails. */
            for (size_t i = 0; i < n; i++) {
                lipi_serve_job *j = q->who[i];
                size_t k = q->at[i];
                q->who[0] = j; /* item i alone, as item 0 */
                q->at[0] = k;
                if (j->state != LIPI_JOB_FAILED && run_items(q, 1, &j->err) != LIPI_OK) {
                    j->state = LIPI_JOB_FAILED;
                    j->err.line = k + 1;
                }
                bool last = j->state == LIPI_JOB_FAILED ? ++j->done == j->n : deliver(q, 0);
                if (last)
                    finish(q, j);
            }
            continue;
        }
        if (st != LIPI_OK) {
        fail_all:
            for (size_t i = 0; i < n; i++) {
                lipi_serve_job *j = q->who[i];
                if (j->state != LIPI_JOB_FAILED) {
                    j->state = LIPI_JOB_FAILED;
                    j->err = err;
                    j->err.line = q->at[i] + 1;
                }
                if (++j->done == j->n)
                    finish(q, j);
            }
            continue;
        }
        pthread_mutex_lock(&q->mu);
        q->stats.batches++;
        q->stats.inputs += n;
        q->stats.tokens += tokens;
        size_t bucket = 0;
        while (bucket < 9 && ((size_t)1 << bucket) < n)
            bucket++;
        q->stats.batch_hist[bucket]++;
        pthread_mutex_unlock(&q->mu);
        for (size_t i = 0; i < n; i++)
            if (deliver(q, i))
                finish(q, q->who[i]);
    }
    return NULL;
}

void lipi_serve_queue_free(lipi_serve_queue *q)
{
    if (!q)
        return;
    if (q->thread) {
        pthread_mutex_lock(&q->mu);
        q->stopping = true;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
    }
    lipi_embedder_session_free(q->s);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->a);
    free(q->b);
    free(q->alen);
    free(q->blen);
    free(q->ids);
    free(q->idlen);
    free(q->out);
    free(q->cut);
    free(q->who);
    free(q->at);
    free(q);
}

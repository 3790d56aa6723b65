/* Counting the pre-tokenized words of a corpus on several threads.
 *
 * The calling thread reads: it takes records (lines by default) from the
 * record reader (whose line reader checks or repairs UTF-8 and
 * decompresses) and packs them into chunks of about a megabyte. Worker
 * threads take whole chunks, normalize and split each record, and count
 * the pieces in a table of their own; the tables are
 * summed at the end. Sums do not depend on which thread counted what, so
 * the result is the same for every thread count. With one thread the
 * calling thread does everything and no thread is started.
 *
 * Memory: a few chunks per thread plus the tables, which hold the distinct
 * words only; the corpus is never held whole (a record is: with whole
 * files as records, one file at a time). */
#include "trainer/trainer.h"

#include "tokenizer/base.h"
#include "tokenizer/tokenizer_layout.h" /* the encoder's fast paths: valid text, scanners */

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    CHUNK_BYTES = 1 << 20, /* a chunk is handed over when it holds this much */
    CHUNK_LINES = 1 << 14, /* ... or this many lines */
    MAX_THREADS = 256,
};

void lipi_count_options_default(lipi_count_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->invalid = LIPI_INVALID_ERROR;
}

/* Lines [first_line, first_line + n) of file `file`, back to back. */
typedef struct {
    char *data;
    size_t len, cap;
    size_t *off; /* n + 1 line starts */
    size_t n, off_cap;
    size_t file;
    size_t first_line;
} chunk;

static void chunk_free(chunk *c)
{
    if (!c)
        return;
    lipi_free(c->data);
    lipi_free(c->off);
    lipi_free(c);
}

static lipi_status chunk_add_line(chunk *c, const char *s, size_t len)
{
    void *p = c->data;
    if (lipi_grow(&p, &c->cap, c->len + len, 1) != LIPI_OK)
        return LIPI_ENOMEM;
    c->data = p;
    p = c->off;
    if (lipi_grow(&p, &c->off_cap, c->n + 2, sizeof(size_t)) != LIPI_OK)
        return LIPI_ENOMEM;
    c->off = p;
    if (c->n == 0)
        c->off[0] = 0;
    if (len) /* a chunk of empty lines has no data buffer */
        memcpy(c->data + c->len, s, len);
    c->len += len;
    c->off[++c->n] = c->len;
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Counting one chunk                                                        */
/* ------------------------------------------------------------------------ */

enum {
    BATCH_WORDS = 256,         /* words counted at once (lipi_counts_add_each) */
    BATCH_BYTES = 64 << 10,    /* the batch's text is dropped past this at a line end */
};

typedef struct {
    const lipi_normalizer *norm;
    const lipi_pretokenizer *pre;
    const lipi_scanner *scan; /* pre is one Split on this scanner: cut the text itself */
    const char *const *paths;
    lipi_counts *counts;
    lipi_normalized normed;
    lipi_pieces pieces;
    /* Words of several lines wait here so the table sees big batches:
     * word i is batch[off[i] .. off[i + 1]). */
    lipi_buf batch;
    size_t off[BATCH_WORDS + 1];
    size_t n_batch;
} counter;

static void counter_free(counter *k)
{
    lipi_normalized_free(&k->normed);
    lipi_pieces_free(&k->pieces);
    lipi_buf_free(&k->batch);
    lipi_counts_free(k->counts);
}

/* Counts the waiting words. Their text stays (a line cut into more than
 * BATCH_WORDS words is still being scanned) unless `drop`. */
static lipi_status flush_batch(counter *k, bool drop, lipi_error *err)
{
    lipi_status st = lipi_counts_add_each(k->counts, k->batch.p, k->off, k->n_batch, err);
    k->off[0] = drop ? 0 : k->off[k->n_batch];
    k->n_batch = 0;
    if (drop)
        k->batch.len = 0;
    return st;
}

/* Notes that the next word ends at batch byte `end`. */
static lipi_status batch_word(counter *k, size_t end, lipi_error *err)
{
    k->off[++k->n_batch] = end;
    return k->n_batch == BATCH_WORDS ? flush_batch(k, false, err) : LIPI_OK;
}

/* Queues the pieces of one line for counting. */
static lipi_status batch_pieces(counter *k, const lipi_pieces *p, lipi_error *err)
{
    for (size_t j = 0; j < p->count; j++) {
        size_t len = p->text_off[j + 1] - p->text_off[j];
        if (lipi_buf_append(&k->batch, p->text + p->text_off[j], len) != LIPI_OK)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory counting words");
        lipi_status st = batch_word(k, k->batch.len, err);
        if (st != LIPI_OK)
            return st;
    }
    return LIPI_OK;
}

/* Queues the words of one line when the pre-tokenizer is a scanner: its
 * pieces are the matches and the runs between them, as they are in the
 * text, so the line is copied into the batch once and cut there (the same
 * words lipi_pretokenize gives, without building and copying each). */
static lipi_status batch_scanned(counter *k, const char *s, size_t n, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (lipi_buf_append(&k->batch, s, n) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory counting words");
    const char *t = k->batch.p + k->batch.len - n; /* the line's copy */
    size_t base = k->batch.len - n, i = 0, prev = 0;
    while (i < n) {
        size_t m = lipi_scan_match(k->scan, t, n, i);
        if (!m) {
            uint32_t cp;
            i += pt_utf8_next(t + i, &cp);
            continue;
        }
        if (prev != i)
            TRY(batch_word(k, base + i, err));
        TRY(batch_word(k, base + i + m, err));
        i = prev = i + m;
    }
    if (prev < n)
        TRY(batch_word(k, base + n, err));
done:
    return st;
}

/* Counts the pieces of every line of c. Errors name the file and line.
 * Records are valid UTF-8 (the record reader checks or repairs them), so
 * neither stage checks again. */
static lipi_status count_chunk(counter *k, const chunk *c, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    for (size_t i = 0; i < c->n; i++) {
        const char *s = c->data + c->off[i];
        size_t len = c->off[i + 1] - c->off[i];
        if (k->norm) {
            st = lipi_normalize_valid(k->norm, s, len, &k->normed, false, err);
            if (st != LIPI_OK)
                goto fail;
            s = k->normed.text;
            len = k->normed.len;
        }
        if (k->scan) {
            st = batch_scanned(k, s, len, err);
        } else {
            st = lipi_pretokenize_valid(k->pre, s, len, &k->pieces, err);
            if (st == LIPI_OK)
                st = batch_pieces(k, &k->pieces, err);
        }
        if (st != LIPI_OK)
            goto fail;
        if (k->batch.len > BATCH_BYTES && (st = flush_batch(k, true, err)) != LIPI_OK)
            goto fail;
        continue;
    fail:
        if (err) {
            /* The offset the stage gave is in the (normalized) line, not
             * in the file: keep the line only. */
            snprintf(err->path, sizeof err->path, "%s", k->paths[c->file]);
            err->line = c->first_line + i;
            err->offset = 0;
        }
        return st;
    }
    return flush_batch(k, true, err);
}

/* ------------------------------------------------------------------------ */
/* The hand-over between the reader and the workers                          */
/* ------------------------------------------------------------------------ */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t ready;   /* a chunk was queued, or the reader finished */
    pthread_cond_t drained; /* a chunk was returned to the free list */
    chunk **queue;          /* ring of full chunks */
    size_t q_head, q_len, q_cap;
    chunk **free_list;
    size_t n_free;
    bool done;              /* the reader will queue nothing more */
    bool failed;            /* a worker failed: stop */
    lipi_status st;         /* the failure reported, the one of the earliest line */
    lipi_error err;
    size_t err_file, err_line;
} pipe_state;

typedef struct {
    pipe_state *ps;
    counter k;
} worker;

/* Keeps the error of the earliest (file, line), so which thread hit an
 * error first does not change the message. */
static void note_error(pipe_state *ps, lipi_status st, const lipi_error *err, size_t file,
                       size_t line)
{
    if (ps->st == LIPI_OK || file < ps->err_file ||
        (file == ps->err_file && line < ps->err_line)) {
        ps->st = st;
        ps->err = *err;
        ps->err_file = file;
        ps->err_line = line;
    }
    ps->failed = true;
}

static void worker_run(worker *wk)
{
    pipe_state *ps = wk->ps;
    pthread_mutex_lock(&ps->mu);
    for (;;) {
        while (ps->q_len == 0 && !ps->done && !ps->failed)
            pthread_cond_wait(&ps->ready, &ps->mu);
        if (ps->failed || ps->q_len == 0)
            break;
        chunk *c = ps->queue[ps->q_head];
        ps->q_head = (ps->q_head + 1) % ps->q_cap;
        ps->q_len--;
        pthread_mutex_unlock(&ps->mu);

        lipi_error err = {0};
        lipi_status st = count_chunk(&wk->k, c, &err);

        pthread_mutex_lock(&ps->mu);
        if (st != LIPI_OK)
            note_error(ps, st, &err, c->file, err.line);
        ps->free_list[ps->n_free++] = c;
        pthread_cond_signal(&ps->drained);
    }
    pthread_cond_broadcast(&ps->drained);
    pthread_mutex_unlock(&ps->mu);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *const *paths;
    size_t n_paths;
    const lipi_count_options *opt;
    uint64_t bytes_done; /* raw bytes of the files already closed */
    uint64_t text_done;  /* and their decompressed bytes */
    uint64_t bytes_total;
    uint64_t lines;
    double last_report;
    size_t file; /* the file being read */
} reader;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void report(reader *rd, const lipi_record_reader *lr, bool done)
{
    if (!rd->opt->progress)
        return;
    double t = now_seconds();
    if (!done && t - rd->last_report < 0.1)
        return;
    rd->last_report = t;
    lipi_progress p = {0};
    p.phase = LIPI_PHASE_COUNT;
    p.bytes_read = rd->bytes_done + (lr ? lipi_record_reader_bytes_read(lr) : 0);
    p.bytes_total = rd->bytes_total;
    p.text_bytes = rd->text_done + (lr ? lipi_record_reader_text_bytes(lr) : 0);
    p.lines = rd->lines;
    p.done = done;
    rd->opt->progress(&p, rd->opt->progress_user);
}

/* Sum of the input sizes, 0 if any is not a regular file. */
static uint64_t total_size(const char *const *paths, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (strcmp(paths[i], "-") == 0 || stat(paths[i], &sb) != 0 || !S_ISREG(sb.st_mode))
            return 0;
        total += (uint64_t)sb.st_size;
    }
    return total;
}

/* Hands a full chunk over; gets an empty one back. Returns false when the
 * workers failed (nothing more should be read). */
typedef bool (*chunk_sink)(void *ctx, chunk **c);

/* Reads every file's records into chunks passed to sink. */
static lipi_status read_all(reader *rd, chunk **cur, chunk_sink sink, void *ctx, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_record_reader *lr = NULL;
    lipi_record_options ro = rd->opt->records;
    ro.invalid = rd->opt->invalid;
    ro.drop = NULL; /* no use for the other members */
    ro.n_drop = 0;
    for (size_t f = 0; f < rd->n_paths; f++) {
        rd->file = f;
        TRY(lipi_record_reader_open(rd->paths[f], &ro, &lr, err));
        for (;;) {
            lipi_record rec;
            TRY(lipi_record_reader_next(lr, &rec, err));
            if (!rec.text)
                break;
            chunk *c = *cur;
            /* Record numbers run on by one, so a chunk keeps its first. */
            if (c->n == 0) {
                c->file = f;
                c->first_line = rec.number;
            }
            if (chunk_add_line(c, rec.text, rec.len) != LIPI_OK) {
                st = lipi_error_set(err, LIPI_ENOMEM, rd->paths[f], rec.number, 0,
                                    "out of memory reading");
                goto done;
            }
            rd->lines++;
            if (c->len >= CHUNK_BYTES || c->n >= CHUNK_LINES) {
                if (!sink(ctx, cur))
                    goto done;
                report(rd, lr, false);
            }
        }
        /* A chunk never spans two files: its records are numbered in one. */
        if ((*cur)->n && !sink(ctx, cur))
            goto done;
        rd->bytes_done += lipi_record_reader_bytes_read(lr);
        rd->text_done += lipi_record_reader_text_bytes(lr);
        lipi_record_reader_close(lr);
        lr = NULL;
        report(rd, NULL, false);
    }
done:
    lipi_record_reader_close(lr);
    return st;
}

/* One thread: count each chunk right away. */
typedef struct {
    counter *k;
    lipi_status st;
    lipi_error err;
} inline_sink_ctx;

static bool inline_sink(void *vctx, chunk **c)
{
    inline_sink_ctx *ctx = vctx;
    ctx->st = count_chunk(ctx->k, *c, &ctx->err);
    (*c)->n = (*c)->len = 0;
    return ctx->st == LIPI_OK;
}

/* Several threads: queue the chunk, wait for a free one. */
static bool queue_sink(void *vctx, chunk **c)
{
    pipe_state *ps = vctx;
    pthread_mutex_lock(&ps->mu);
    ps->queue[(ps->q_head + ps->q_len) % ps->q_cap] = *c;
    ps->q_len++;
    pthread_cond_signal(&ps->ready);
    while (ps->n_free == 0 && !ps->failed)
        pthread_cond_wait(&ps->drained, &ps->mu);
    bool ok = !ps->failed;
    if (ok) {
        *c = ps->free_list[--ps->n_free];
        (*c)->n = (*c)->len = 0;
    } else {
        *c = NULL;
    }
    pthread_mutex_unlock(&ps->mu);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Putting it together                                                       */
/* ------------------------------------------------------------------------ */

static lipi_status count_one_thread(reader *rd, counter *k, lipi_error *err)
{
    lipi_status st;
    chunk *c = lipi_calloc(1, sizeof *c);
    if (!c)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    inline_sink_ctx ctx = {k, LIPI_OK, {0}};
    st = read_all(rd, &c, inline_sink, &ctx, err);
    if (st == LIPI_OK && ctx.st != LIPI_OK) {
        st = ctx.st;
        if (err)
            *err = ctx.err;
    }
    chunk_free(c);
    return st;
}

/* The reader and the counting workers as tasks of one pool: task 0 reads
 * (its status and error in st, err), task t > 0 is worker t - 1. They wait
 * for one another, which the pool allows because there are no more tasks
 * than threads. They note their failures here, never to the pool, so no
 * task is ever skipped. */
typedef struct {
    reader *rd;
    worker *wk;
    pipe_state *ps;
    chunk **cur;
    lipi_status st;
    lipi_error *err;
} pipe_job;

static lipi_status pipe_task(void *ctx, size_t t, size_t w, lipi_error *unused)
{
    pipe_job *j = ctx;
    pipe_state *ps = j->ps;
    if (t > 0) {
        worker_run(&j->wk[t - 1]);
        return LIPI_OK;
    }
    j->st = read_all(j->rd, j->cur, queue_sink, ps, j->err);
    pthread_mutex_lock(&ps->mu);
    if (*j->cur && (*j->cur)->n && j->st == LIPI_OK && !ps->failed) {
        ps->queue[(ps->q_head + ps->q_len) % ps->q_cap] = *j->cur;
        ps->q_len++;
        *j->cur = NULL;
    }
    if (j->st != LIPI_OK)
        ps->failed = true; /* a read error: the workers stop */
    ps->done = true;
    pthread_cond_broadcast(&ps->ready);
    pthread_mutex_unlock(&ps->mu);
    return LIPI_OK;
}

/* Reads on one thread and counts on nt others. Without a pool (no memory,
 * no threads) everything is counted on this thread: same counts. */
static lipi_status count_threads(reader *rd, worker *wk, size_t nt, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    pipe_state ps;
    memset(&ps, 0, sizeof ps);
    lipi_thread_pool *pool = NULL;
    size_t n_chunks = 2 * nt + 1;
    chunk *cur = NULL;
    bool sync_ok = false;

    if (lipi_thread_pool_new(nt + 1, &pool, NULL) != LIPI_OK)
        return count_one_thread(rd, &wk[0].k, err);
    ps.q_cap = n_chunks;
    ps.queue = lipi_calloc(n_chunks, sizeof *ps.queue);
    ps.free_list = lipi_calloc(n_chunks, sizeof *ps.free_list);
    if (!ps.queue || !ps.free_list)
        goto nomem;
    for (size_t i = 0; i < n_chunks; i++) {
        chunk *c = lipi_calloc(1, sizeof *c);
        if (!c)
            goto nomem;
        if (i == 0)
            cur = c;
        else
            ps.free_list[ps.n_free++] = c;
    }
    if (pthread_mutex_init(&ps.mu, NULL) != 0)
        goto nomem;
    if (pthread_cond_init(&ps.ready, NULL) != 0) {
        pthread_mutex_destroy(&ps.mu);
        goto nomem;
    }
    if (pthread_cond_init(&ps.drained, NULL) != 0) {
        pthread_cond_destroy(&ps.ready);
        pthread_mutex_destroy(&ps.mu);
        goto nomem;
    }
    sync_ok = true;
    for (size_t t = 0; t < nt; t++)
        wk[t].ps = &ps;
    pipe_job job = {rd, wk, &ps, &cur, LIPI_OK, err};
    (void)lipi_thread_pool_run(pool, nt + 1, pipe_task, &job, NULL); /* notes its own failures */
    st = job.st;
    /* Of a read error and a counting error, report the earlier line. */
    if (ps.st != LIPI_OK &&
        (st == LIPI_OK || ps.err_file < rd->file ||
         (ps.err_file == rd->file && err && ps.err_line < err->line))) {
        st = ps.st;
        if (err)
            *err = ps.err;
    }
    goto done;
nomem:
    st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
done:
    lipi_thread_pool_free(pool);
    if (sync_ok) {
        pthread_cond_destroy(&ps.drained);
        pthread_cond_destroy(&ps.ready);
        pthread_mutex_destroy(&ps.mu);
    }
    chunk_free(cur);
    for (size_t i = 0; i < ps.n_free; i++)
        chunk_free(ps.free_list[i]);
    for (size_t i = 0; i < ps.q_len; i++)
        chunk_free(ps.queue[(ps.q_head + i) % ps.q_cap]);
    lipi_free(ps.queue);
    lipi_free(ps.free_list);
    return st;
}

lipi_status lipi_count_files(const char *const *paths, size_t n_paths,
                             const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                             const lipi_count_options *opt, lipi_counts **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_count_options defaults;
    worker *wk = NULL;
    size_t nt = 0;
    *out = NULL;
    if (!opt) {
        lipi_count_options_default(&defaults);
        opt = &defaults;
    }
    if (!pre)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a pre-tokenizer");
    if (n_paths == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected at least one input file");
    nt = lipi_thread_count(opt->threads, MAX_THREADS);
    wk = lipi_calloc(nt, sizeof *wk);
    if (!wk)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    reader rd = {.paths = paths, .n_paths = n_paths, .opt = opt,
                 .bytes_total = total_size(paths, n_paths)};
    /* Each table starts at about the size it reaches on real text (a new
     * word per ~128 bytes, per thread), at most 16 MB, instead of doubling
     * up from nothing. */
    uint64_t expect = rd.bytes_total / 128 / nt;
    for (size_t t = 0; t < nt; t++) {
        wk[t].k = (counter){.norm = norm, .pre = pre, .scan = lipi_pretokenizer_scanner(pre),
                            .paths = paths};
        if (lipi_counts_new(&wk[t].k.counts) != LIPI_OK ||
            lipi_counts_reserve(wk[t].k.counts, expect < 350000 ? (size_t)expect : 350000) !=
                LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
    }
    rd.last_report = now_seconds();
    if (nt == 1)
        TRY(count_one_thread(&rd, &wk[0].k, err));
    else
        TRY(count_threads(&rd, wk, nt, err));
    report(&rd, NULL, true);
    for (size_t t = 1; t < nt; t++)
        TRY(lipi_counts_merge(wk[0].k.counts, wk[t].k.counts, err));
    *out = wk[0].k.counts;
    wk[0].k.counts = NULL;
done:
    for (size_t t = 0; t < nt; t++)
        counter_free(&wk[t].k);
    lipi_free(wk);
    return st;
}

lipi_status lipi_count_to_file(const char *const *paths, size_t n_paths,
                               const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                               const lipi_count_options *opt, const char *out_path,
                               lipi_error *err)
{
    lipi_counts *c = NULL;
    lipi_status st = lipi_count_files(paths, n_paths, norm, pre, opt, &c, err);
    if (st == LIPI_OK)
        st = lipi_counts_save(c, out_path, err);
    lipi_counts_free(c);
    return st;
}

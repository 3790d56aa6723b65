/* Batches: texts are handed out in chunks to one thread per session; each
 * chunk keeps its own results, which are joined in input order at the end,
 * so the output never depends on the number of threads or their timing. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "encoder/encoder_impl.h"

#define CHUNK 64

typedef struct {
    uint32_t *ids;
    lipi_span *offsets;
    uint32_t *type_ids;
    uint8_t *special;
    size_t n, cap;
    lipi_buf text;
    size_t *tstart;        /* n + 1 */
    size_t tstart_cap;
    size_t count[CHUNK];   /* tokens of each text */
    lipi_status st;
    lipi_error err;
    size_t bad;            /* index of the failing text */
} chunk_out;

typedef struct {
    lipi_session *s;
    const lipi_text *texts;
    size_t n, n_chunks;
    const lipi_encode_options *opt;
    unsigned want;
    chunk_out *chunks;
    atomic_size_t *next;
    atomic_size_t *first_bad; /* lowest failing chunk so far */
} worker;

static lipi_status chunk_add(chunk_out *c, const lipi_session *s, unsigned want)
{
    lipi_status st = LIPI_OK;
    size_t m = s->res->n, need = c->n + m;
    if (need > c->cap) {
        size_t cap = c->cap;
        TRY(ENC_GROW(c->ids, cap, need));
        if (want & LIPI_WANT_OFFSETS) {
            cap = c->cap;
            TRY(ENC_GROW(c->offsets, cap, need));
        }
        if (want & LIPI_WANT_TYPE_IDS) {
            cap = c->cap;
            TRY(ENC_GROW(c->type_ids, cap, need));
        }
        if (want & LIPI_WANT_SPECIAL_MASK) {
            cap = c->cap;
            TRY(ENC_GROW(c->special, cap, need));
        }
        c->cap = cap;
    }
    if (want & LIPI_WANT_TOKENS) {
        TRY(ENC_GROW(c->tstart, c->tstart_cap, need + 1));
        if (c->n == 0)
            c->tstart[0] = 0;
    }
    for (size_t i = 0; i < m; i++) {
        const enc_tok *t = &s->res->t[i];
        c->ids[c->n] = t->id;
        if (want & LIPI_WANT_OFFSETS)
            c->offsets[c->n] = t->off;
        if (want & LIPI_WANT_TYPE_IDS)
            c->type_ids[c->n] = t->type_id;
        if (want & LIPI_WANT_SPECIAL_MASK)
            c->special[c->n] = t->special;
        if (want & LIPI_WANT_TOKENS) {
            size_t len;
            const char *str = lipi_enc_tok_str(s, t, &len);
            TRY(lipi_buf_append(&c->text, str, len));
            c->tstart[c->n + 1] = c->text.len;
        }
        c->n++;
    }
done:
    return st;
}

static void *work(void *arg)
{
    worker *w = arg;
    for (;;) {
        size_t k = atomic_fetch_add(w->next, 1);
        if (k >= w->n_chunks)
            break;
        /* Chunks after a failed one are not needed. */
        if (k > atomic_load(w->first_bad))
            continue;
        chunk_out *c = &w->chunks[k];
        size_t lo = k * CHUNK, hi = lo + CHUNK < w->n ? lo + CHUNK : w->n;
        for (size_t i = lo; i < hi; i++) {
            const lipi_text *t = &w->texts[i];
            c->st = lipi_enc_run(w->s, t->s ? t->s : "", t->len, NULL, 0, false, w->opt,
                                 (w->want & LIPI_WANT_OFFSETS) != 0, &c->err);
            if (c->st == LIPI_OK)
                c->st = chunk_add(c, w->s, w->want);
            if (c->st != LIPI_OK) {
                if (c->st == LIPI_ENOMEM)
                    lipi_error_set(&c->err, c->st, NULL, 0, 0, "out of memory");
                c->bad = i;
                size_t cur = atomic_load(w->first_bad);
                while (k < cur && !atomic_compare_exchange_weak(w->first_bad, &cur, k))
                    ;
                break;
            }
            c->count[i - lo] = w->s->res->n;
        }
    }
    return NULL;
}

static void chunk_free(chunk_out *c)
{
    lipi_free(c->ids);
    lipi_free(c->offsets);
    lipi_free(c->type_ids);
    lipi_free(c->special);
    lipi_buf_free(&c->text);
    lipi_free(c->tstart);
}

void lipi_batch_free(lipi_batch *b)
{
    if (!b)
        return;
    lipi_free(b->start);
    lipi_free(b->ids);
    lipi_free(b->offsets);
    lipi_free(b->type_ids);
    lipi_free(b->special_mask);
    lipi_free(b->token_text);
    lipi_free(b->token_start);
    memset(b, 0, sizeof *b);
}

/* Joins the chunks into b. */
static lipi_status gather(lipi_batch *b, chunk_out *chunks, size_t n_chunks, size_t n,
                          unsigned want)
{
    size_t total = 0, text_total = 0;
    for (size_t k = 0; k < n_chunks; k++) {
        total += chunks[k].n;
        text_total += chunks[k].text.len;
    }
    b->n = n;
    b->start = lipi_calloc(n + 1, sizeof *b->start);
    b->ids = lipi_calloc(total ? total : 1, sizeof *b->ids);
    if (!b->start || !b->ids)
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_OFFSETS &&
        !(b->offsets = lipi_calloc(total ? total : 1, sizeof *b->offsets)))
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_TYPE_IDS &&
        !(b->type_ids = lipi_calloc(total ? total : 1, sizeof *b->type_ids)))
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_SPECIAL_MASK &&
        !(b->special_mask = lipi_calloc(total ? total : 1, sizeof *b->special_mask)))
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_TOKENS) {
        b->token_text = lipi_malloc(text_total ? text_total : 1);
        b->token_start = lipi_calloc(total + 1, sizeof *b->token_start);
        if (!b->token_text || !b->token_start)
            return LIPI_ENOMEM;
    }
    size_t pos = 0, tpos = 0, line = 0;
    for (size_t k = 0; k < n_chunks; k++) {
        chunk_out *c = &chunks[k];
        size_t lines = n - k * CHUNK < CHUNK ? n - k * CHUNK : CHUNK;
        for (size_t i = 0; i < lines; i++) {
            b->start[line + 1] = b->start[line] + c->count[i];
            line++;
        }
        if (c->n) {
            memcpy(b->ids + pos, c->ids, c->n * sizeof *b->ids);
            if (b->offsets)
                memcpy(b->offsets + pos, c->offsets, c->n * sizeof *b->offsets);
            if (b->type_ids)
                memcpy(b->type_ids + pos, c->type_ids, c->n * sizeof *b->type_ids);
            if (b->special_mask)
                memcpy(b->special_mask + pos, c->special, c->n * sizeof *b->special_mask);
            if (b->token_start) {
                memcpy(b->token_text + tpos, c->text.p, c->text.len);
                for (size_t i = 0; i < c->n; i++)
                    b->token_start[pos + i + 1] = tpos + c->tstart[i + 1];
            }
        }
        pos += c->n;
        tpos += c->text.len;
    }
    return LIPI_OK;
}

lipi_status lipi_encode_batch(lipi_session *const *sessions, size_t n_sessions,
                              const lipi_text *texts, size_t n, const lipi_encode_options *opt,
                              unsigned want, lipi_batch *out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    chunk_out *chunks = NULL;
    worker *w = NULL;
    pthread_t *tid = NULL;
    size_t started = 0, n_chunks = (n + CHUNK - 1) / CHUNK;
    atomic_size_t next, first_bad;
    lipi_encode_options defaults;

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no output given");
    memset(out, 0, sizeof *out);
    if (!sessions || n_sessions == 0 || (!texts && n))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no sessions or texts given");
    for (size_t i = 1; i < n_sessions; i++)
        if (!sessions[i] || sessions[i]->enc != sessions[0]->enc)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "session %zu belongs to another encoder", i);
    if (!opt) {
        lipi_encode_options_default(sessions[0]->enc, &defaults);
        opt = &defaults;
    }
    if (n_sessions > n_chunks)
        n_sessions = n_chunks ? n_chunks : 1;
    chunks = lipi_calloc(n_chunks ? n_chunks : 1, sizeof *chunks);
    w = lipi_calloc(n_sessions, sizeof *w);
    tid = lipi_calloc(n_sessions, sizeof *tid);
    if (!chunks || !w || !tid) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    atomic_init(&next, 0);
    atomic_init(&first_bad, SIZE_MAX);
    for (size_t i = 0; i < n_sessions; i++)
        w[i] = (worker){sessions[i], texts, n, n_chunks, opt, want, chunks, &next, &first_bad};
    for (size_t i = 1; i < n_sessions; i++) {
        if (pthread_create(&tid[i], NULL, work, &w[i]) != 0)
            break; /* fewer threads still do all the work */
        started = i;
    }
    work(&w[0]);
    for (size_t i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);

    size_t bad = atomic_load(&first_bad);
    if (bad != SIZE_MAX) {
        chunk_out *c = &chunks[bad];
        st = c->st;
        if (err) {
            *err = c->err;
            err->line = c->bad + 1;
        }
        goto done;
    }
    st = gather(out, chunks, n_chunks, n, want);
    if (st != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
done:
    if (st != LIPI_OK)
        lipi_batch_free(out);
    for (size_t k = 0; chunks && k < n_chunks; k++)
        chunk_free(&chunks[k]);
    lipi_free(chunks);
    lipi_free(w);
    lipi_free(tid);
    return st;
}

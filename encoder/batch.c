/* Batches: texts are handed out in chunks (lipi_parallel_for tasks) to one
 * thread per session. Each thread appends the tokens of the chunks it takes to its own arrays and
 * notes where each chunk's tokens are; the chunks are joined in input order
 * at the end, so the output never depends on the number of threads or their
 * timing. */
#include <stddef.h>
#include <string.h>

#include "encoder/encoder_impl.h"

#define CHUNK 64

/* Where a chunk's tokens are: in worker w's arrays, from token `first` (and
 * string byte `tfirst`), n of them. */
typedef struct {
    uint32_t w;
    size_t first, tfirst, n;
} chunk_out;

typedef struct {
    lipi_session *s;
    uint32_t index;
    const lipi_text *texts;
    size_t n;
    const lipi_encode_options *opt;
    unsigned want;
    bool stream;               /* ids alone, streamed (see chunk_task) */
    chunk_out *chunks;
    size_t *count;             /* count[i + 1]: tokens of text i */
    /* This thread's tokens, the chunks it took one after the other. */
    uint32_t *ids;
    lipi_span *offsets;
    uint32_t *type_ids;
    uint8_t *special;
    size_t n_tok, cap;
    lipi_buf text;             /* token strings */
    size_t *tend;              /* tend[k]: end of token k's string in text */
    size_t est;                /* tokens to make room for at first: arrays that
                                  grow from 16 by doubling copy themselves ~12
                                  times a batch (7% of an ids-only batch) */
} worker;

/* Copies n bytes of a token string: most are a few bytes, where a call to
 * memcpy costs more than the copy (two overlapping loads and stores, all
 * inside the n bytes). */
static inline void copy_str(char *d, const char *s, size_t n)
{
    if (n <= 16 && n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n && n < 4) {
        d[0] = s[0];
        d[n >> 1] = s[n >> 1];
        d[n - 1] = s[n - 1];
    } else if (n) {
        memcpy(d, s, n);
    }
}

static lipi_status worker_add(worker *w)
{
    lipi_status st = LIPI_OK;
    const lipi_session *s = w->s;
    unsigned want = w->want;
    size_t m = s->res->n, need = w->n_tok + m;
    if (need > w->cap) {
        size_t cap = w->cap, room = need > w->est ? need : w->est;
        TRY(ENC_GROW(w->ids, cap, room));
        if (want & LIPI_WANT_OFFSETS) {
            cap = w->cap;
            TRY(ENC_GROW(w->offsets, cap, room));
        }
        if (want & LIPI_WANT_TYPE_IDS) {
            cap = w->cap;
            TRY(ENC_GROW(w->type_ids, cap, room));
        }
        if (want & LIPI_WANT_SPECIAL_MASK) {
            cap = w->cap;
            TRY(ENC_GROW(w->special, cap, room));
        }
        if (want & LIPI_WANT_TOKENS) {
            cap = w->cap;
            TRY(ENC_GROW(w->tend, cap, room));
        }
        w->cap = cap;
    }
    const enc_tok *t = s->res->t;
    uint32_t *ids = w->ids + w->n_tok;
    for (size_t i = 0; i < m; i++)
        ids[i] = t[i].id;
    if (want & LIPI_WANT_OFFSETS)
        for (size_t i = 0; i < m; i++)
            w->offsets[w->n_tok + i] = t[i].off;
    if (want & LIPI_WANT_TYPE_IDS)
        for (size_t i = 0; i < m; i++)
            w->type_ids[w->n_tok + i] = t[i].type_id;
    if (want & LIPI_WANT_SPECIAL_MASK)
        for (size_t i = 0; i < m; i++)
            w->special[w->n_tok + i] = t[i].special;
    if (want & LIPI_WANT_TOKENS) {
        /* The text's strings in one piece of room, then copied in place. */
        size_t bytes = 0, len;
        for (size_t i = 0; i < m; i++) {
            lipi_enc_tok_str(s, &t[i], &len);
            bytes += len;
            if (bytes < len)
                return LIPI_ENOMEM;
        }
        TRY(lipi_buf_reserve(&w->text, bytes));
        size_t pos = w->text.len;
        for (size_t i = 0; i < m; i++) {
            const char *str = lipi_enc_tok_str(s, &t[i], &len);
            copy_str(w->text.p + pos, str, len);
            pos += len;
            w->tend[w->n_tok + i] = pos;
        }
        w->text.len = pos;
        w->text.p[pos] = '\0';
    }
    w->n_tok = need;
done:
    return st;
}

/* The sink of a streamed text: its ids go after the worker's. */
static lipi_status worker_sink(void *ctx, const uint32_t *ids, size_t n)
{
    worker *w = ctx;
    size_t need = w->n_tok + n;
    if (need > w->cap) {
        size_t cap = w->cap;
        lipi_status st = ENC_GROW(w->ids, cap, need > w->est ? need : w->est);
        if (st != LIPI_OK)
            return st;
        w->cap = cap;
    }
    memcpy(w->ids + w->n_tok, ids, n * sizeof *ids);
    w->n_tok = need;
    return LIPI_OK;
}

/* Task k: chunk k of the texts, on the session of worker `wi`. A failure
 * names the text (1-based) in err->line; chunks after the first failing
 * one are not needed, and the pool skips them. */
static lipi_status chunk_task(void *ctx, size_t k, size_t wi, lipi_error *err)
{
    worker *w = (worker *)ctx + wi;
    chunk_out *c = &w->chunks[k];
    *c = (chunk_out){w->index, w->n_tok, w->text.len, 0};
    size_t lo = k * CHUNK, hi = lo + CHUNK < w->n ? lo + CHUNK : w->n;
    for (size_t i = lo; i < hi; i++) {
        const lipi_text *t = &w->texts[i];
        lipi_status st;
        size_t n_ids = 0;
        if (w->stream) {
            /* The ids never become the session's tokens: writing and
             * reading those was 4% of an ids-only batch's instructions
             * (spm_bpe8k). */
            st = lipi_enc_stream_run(w->s, t->s ? t->s : "", t->len, w->opt, worker_sink, w,
                                     &n_ids, err);
        } else {
            st = lipi_enc_run(w->s, t->s ? t->s : "", t->len, NULL, 0, false, w->opt,
                              (w->want & LIPI_WANT_OFFSETS) != 0, err);
            if (st == LIPI_OK)
                st = worker_add(w);
            n_ids = w->s->res->n;
        }
        if (st != LIPI_OK) {
            if (st == LIPI_ENOMEM)
                lipi_error_set(err, st, NULL, 0, 0, "out of memory");
            err->line = i + 1;
            return st;
        }
        w->count[i + 1] = n_ids;
    }
    c->n = w->n_tok - c->first;
    return LIPI_OK;
}

static void worker_free(worker *w)
{
    lipi_free(w->ids);
    lipi_free(w->offsets);
    lipi_free(w->type_ids);
    lipi_free(w->special);
    lipi_buf_free(&w->text);
    lipi_free(w->tend);
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

/* An output array of n elements, copied chunk by chunk from the workers'
 * arrays (member at byte offset `field` of worker), or NULL. Every element
 * is written, so nothing is cleared first. */
static void *join(const worker *w, const chunk_out *chunks, size_t n_chunks, size_t n,
                  size_t field, size_t size)
{
    char *out = lipi_reallocarray(NULL, n ? n : 1, size);
    if (!out)
        return NULL;
    size_t pos = 0;
    for (size_t k = 0; k < n_chunks; k++) {
        const chunk_out *c = &chunks[k];
        const char *src;
        memcpy(&src, (const char *)&w[c->w] + field, sizeof src);
        if (c->n)
            memcpy(out + pos * size, src + c->first * size, c->n * size);
        pos += c->n;
    }
    return out;
}

/* Joins the workers' results into b: b->start becomes the prefix sums of
 * the counts (it is the count array the workers filled). */
static lipi_status gather(lipi_batch *b, worker *w, const chunk_out *chunks, size_t n_chunks,
                          size_t n, unsigned want)
{
    b->n = n;
    b->start[0] = 0;
    for (size_t i = 0; i < n; i++)
        b->start[i + 1] += b->start[i];
    size_t total = b->start[n];
    /* One thread took every chunk (in order): its arrays are the output. */
    bool one = true;
    for (size_t k = 1; k < n_chunks && one; k++)
        one = chunks[k].w == chunks[0].w;
    if (one && n_chunks && total) {
        worker *o = &w[chunks[0].w];
        b->ids = o->ids;
        b->offsets = o->offsets;
        b->type_ids = o->type_ids;
        b->special_mask = o->special;
        o->ids = o->type_ids = NULL;
        o->offsets = NULL;
        o->special = NULL;
        if (want & LIPI_WANT_TOKENS) {
            b->token_text = o->text.p;
            o->text = (lipi_buf){0};
            if (!b->token_text && !(b->token_text = lipi_malloc(1)))
                return LIPI_ENOMEM;
            b->token_start = lipi_reallocarray(NULL, total + 1, sizeof *b->token_start);
            if (!b->token_start)
                return LIPI_ENOMEM;
            b->token_start[0] = 0;
            memcpy(b->token_start + 1, o->tend, total * sizeof *o->tend);
        }
        return LIPI_OK;
    }
#define JOIN(member, field)                                                                    \
    (member = join(w, chunks, n_chunks, total, offsetof(worker, field), sizeof *member)) == NULL
    if (JOIN(b->ids, ids))
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_OFFSETS && JOIN(b->offsets, offsets))
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_TYPE_IDS && JOIN(b->type_ids, type_ids))
        return LIPI_ENOMEM;
    if (want & LIPI_WANT_SPECIAL_MASK && JOIN(b->special_mask, special))
        return LIPI_ENOMEM;
#undef JOIN
    if (want & LIPI_WANT_TOKENS) {
        size_t text_total = 0;
        for (size_t k = 0; k < n_chunks; k++)
            if (chunks[k].n)
                text_total += w[chunks[k].w].tend[chunks[k].first + chunks[k].n - 1] -
                              chunks[k].tfirst;
        b->token_text = lipi_malloc(text_total ? text_total : 1);
        b->token_start = lipi_reallocarray(NULL, total + 1, sizeof *b->token_start);
        if (!b->token_text || !b->token_start)
            return LIPI_ENOMEM;
        b->token_start[0] = 0;
        size_t pos = 0, tpos = 0;
        for (size_t k = 0; k < n_chunks; k++) {
            const chunk_out *c = &chunks[k];
            if (!c->n)
                continue;
            const worker *cw = &w[c->w];
            size_t len = cw->tend[c->first + c->n - 1] - c->tfirst;
            memcpy(b->token_text + tpos, cw->text.p + c->tfirst, len);
            for (size_t i = 0; i < c->n; i++)
                b->token_start[pos + i + 1] = tpos + cw->tend[c->first + i] - c->tfirst;
            pos += c->n;
            tpos += len;
        }
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
    size_t n_chunks = (n + CHUNK - 1) / CHUNK;
    lipi_encode_options defaults;

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no output given");
    memset(out, 0, sizeof *out);
    if (!sessions || n_sessions == 0 || !sessions[0] || (!texts && n))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no sessions or texts given");
    for (size_t i = 1; i < n_sessions; i++) {
        if (!sessions[i] || sessions[i]->enc != sessions[0]->enc)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "session %zu belongs to another encoder", i);
        /* Two threads on one session would share its buffers. */
        for (size_t j = 0; j < i; j++)
            if (sessions[j] == sessions[i])
                return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                      "session %zu is session %zu again: one per thread", i, j);
    }
    if (!opt) {
        lipi_encode_options_default(sessions[0]->enc, &defaults);
        opt = &defaults;
    }
    if (n_sessions > n_chunks)
        n_sessions = n_chunks ? n_chunks : 1;
    chunks = lipi_reallocarray(NULL, n_chunks ? n_chunks : 1, sizeof *chunks);
    w = lipi_calloc(n_sessions, sizeof *w);
    out->start = lipi_reallocarray(NULL, n + 1, sizeof *out->start);
    if (!chunks || !w || !out->start) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    /* A guess of each thread's tokens: a token per 2 bytes of text (English
     * has 4-5 with a 30k-100k vocabulary, Indic scripts 1-3; more tokens
     * only means more growth, as without a guess). */
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += texts[i].len;
    for (size_t i = 0; i < n_sessions; i++)
        w[i] = (worker){.s = sessions[i], .index = (uint32_t)i, .texts = texts, .n = n,
                        .opt = opt, .want = want,
                        .stream = want == 0 && lipi_encode_can_stream(sessions[0]->enc, opt),
                        .chunks = chunks, .count = out->start,
                        .est = bytes / 2 / n_sessions + 16};
    st = lipi_parallel_for(n_chunks, n_sessions, chunk_task, w, err);
    if (st != LIPI_OK)
        goto done;
    st = gather(out, w, chunks, n_chunks, n, want);
    if (st != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
done:
    if (st != LIPI_OK)
        lipi_batch_free(out);
    for (size_t i = 0; w && i < n_sessions; i++)
        worker_free(&w[i]);
    lipi_free(chunks);
    lipi_free(w);
    return st;
}

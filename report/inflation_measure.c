/* Measuring for the inflation report: loading the tokenizers and encoding
 * aligned lines on threads (lipi_parallel_for). Line i of a batch goes to
 * task i % threads, which owns one shard of the report; the shards are
 * integer counts merged at the end, so the figures do not depend on the
 * thread count. Moved here from the `lipi inflation` command so the Python
 * package and the server can measure too. */
#include "report/inflation_impl.h"

#include "encoder/encoder.h"

#define BATCH_LINES 256 /* aligned lines read at once per thread */

typedef struct {
    const char *path;
    char *label;
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    int64_t unk_id;        /* -1: the model has none */
    uint8_t *is_byte;      /* per id: a byte-fallback piece <0xNN> */
    size_t n_ids;
} tok_entry;

struct lipi_inflation_tokenizers {
    size_t n;
    tok_entry *toks;
    const char **labels; /* toks[i].label, as one array */
};

/* ------------------------------------------------------------------------ */
/* Tokenizers                                                                */
/* ------------------------------------------------------------------------ */

/* Display name: "cl100k_base" for a bare name or cl100k_base.tiktoken, the
 * folder's name for .../bert-base-multilingual-cased/vocab.txt (or
 * tokenizer.json), else the file name without its extension. */
static char *tokenizer_label(const char *path)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/')
        start--;
    const char *base = path + start;
    size_t blen = len - start;
    static const char *const generic[] = {"tokenizer.json", "vocab.txt", "vocab.json",
                                          "merges.txt", "tokenizer.model", "spiece.model",
                                          "sentencepiece.bpe.model"};
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
        if (blen == strlen(generic[i]) && memcmp(base, generic[i], blen) == 0 && start > 1) {
            size_t dend = start - 1, dstart = dend;
            while (dstart > 0 && path[dstart - 1] != '/')
                dstart--;
            if (dend > dstart && !(dend - dstart == 1 && path[dstart] == '.'))
                return lipi_strndup(path + dstart, dend - dstart);
        }
    for (size_t i = blen; i > 1; i--)
        if (base[i - 1] == '.') {
            blen = i - 1;
            break;
        }
    return lipi_strndup(base, blen);
}

static bool label_taken(const tok_entry *toks, size_t n, const char *label)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(toks[k].label, label) == 0)
            return true;
    return false;
}

static lipi_status load_tokenizer(const char *path, tok_entry *te, lipi_error *err)
{
    lipi_status st = lipi_tokenizer_open(path, NULL, &te->tok, err);
    if (st == LIPI_OK)
        st = lipi_encoder_new(te->tok, &te->enc, err);
    if (st != LIPI_OK)
        goto done;
    const lipi_model_options *mo = lipi_tokenizer_get_model_options(te->tok);
    te->unk_id = mo ? mo->unk_id : -1;
    te->n_ids = lipi_tokenizer_vocab_size(te->tok);
    te->is_byte = lipi_calloc(te->n_ids ? te->n_ids : 1, 1);
    if (!te->is_byte) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    if (mo && mo->byte_fallback)
        for (size_t id = 0; id < te->n_ids; id++) {
            size_t len;
            const char *s = lipi_tokenizer_id_to_token(te->tok, (uint32_t)id, &len);
            /* "<0x0A>"-style pieces: what byte fallback emits for bytes
             * the model lacks. */
            te->is_byte[id] = s && lipi_byte_token_parse(s, len, true) >= 0;
        }
done:
    if (st != LIPI_OK && err && !err->path[0])
        snprintf(err->path, sizeof err->path, "%s", path);
    return st;
}

/* Task t loads tokenizer t: loading (merge tables, tries) is the slowest
 * fixed cost. The lowest failing task is the first in the caller's order. */
static lipi_status load_task(void *ctx, size_t t, size_t worker, lipi_error *err)
{
    tok_entry *toks = ctx;
    return load_tokenizer(toks[t].path, &toks[t], err);
}

static void free_tokenizer(tok_entry *te)
{
    lipi_encoder_free(te->enc);
    lipi_tokenizer_free(te->tok);
    lipi_free(te->is_byte);
    lipi_free(te->label);
}

void lipi_inflation_tokenizers_free(lipi_inflation_tokenizers *ts)
{
    if (!ts)
        return;
    for (size_t t = 0; ts->toks && t < ts->n; t++)
        free_tokenizer(&ts->toks[t]);
    lipi_free(ts->toks);
    lipi_free(ts->labels);
    lipi_free(ts);
}

lipi_status lipi_inflation_tokenizers_open(const char *const *paths, size_t n, size_t threads,
                                           lipi_inflation_tokenizers **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *out = NULL;
    if (n == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected at least one tokenizer");
    lipi_inflation_tokenizers *ts = lipi_calloc(1, sizeof *ts);
    if (!ts)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    ts->n = n;
    ts->toks = lipi_calloc(n, sizeof *ts->toks);
    ts->labels = lipi_calloc(n, sizeof *ts->labels);
    if (!ts->toks || !ts->labels) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t t = 0; t < n; t++) {
        ts->toks[t].path = paths[t];
        ts->toks[t].unk_id = -1;
    }
    st = lipi_parallel_for(n, threads, load_task, ts->toks, err);
    if (st != LIPI_OK)
        goto done;
    for (size_t t = 0; t < n; t++) {
        /* Two tokenizers with one name (vocab.txt in two folders of one
         * name, or one file twice): the later ones become "name#2", ... */
        char *base = tokenizer_label(paths[t]), *label = base;
        for (size_t dup = 2; label && label_taken(ts->toks, t, label); dup++) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s#%zu", base, dup);
            if (label != base)
                lipi_free(label);
            label = lipi_strndup(buf, strlen(buf));
        }
        if (label != base)
            lipi_free(base);
        ts->toks[t].label = label;
        ts->labels[t] = label;
        if (!label) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
    }
done:
    if (st != LIPI_OK)
        lipi_inflation_tokenizers_free(ts);
    else
        *out = ts;
    return st;
}

size_t lipi_inflation_tokenizers_count(const lipi_inflation_tokenizers *ts)
{
    return ts->n;
}

const char *const *lipi_inflation_tokenizers_labels(const lipi_inflation_tokenizers *ts)
{
    return ts->labels;
}

lipi_status lipi_inflation_new_parallel(const lipi_inflation_tokenizers *ts,
                                        const lipi_parallel_files *files,
                                        lipi_inflation_report **out, lipi_error *err)
{
    size_t n_lang = lipi_parallel_files_count(files);
    const char **langs = lipi_calloc(n_lang ? n_lang : 1, sizeof *langs);
    if (!langs)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t l = 0; l < n_lang; l++)
        langs[l] = lipi_parallel_files_label(files, l);
    lipi_status st = lipi_inflation_new(lipi_inflation_tokenizers_labels(ts),
                                        lipi_inflation_tokenizers_count(ts), langs, n_lang,
                                        lipi_parallel_files_reference(files), out, err);
    lipi_free(langs);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    const tok_entry *toks;
    size_t n_tok;
    const lipi_parallel_batch *batch;
    bool text_mode;
    size_t n_threads;
} job;

typedef struct {
    const job *job;
    size_t index;
    lipi_session **sessions; /* one per tokenizer */
    lipi_inflation_report *shard;
    lipi_encoding out;
    lipi_inflation_token *spans;
    size_t spans_cap;
    lipi_status st;
    lipi_error err;
    uint64_t err_line; /* file line of the failure, for picking the first */
    size_t err_lang;
} worker;

/* Encodes line[0..len) with tokenizer t into w->spans; *n tokens. */
static lipi_status encode_line(worker *w, size_t t, const char *line, size_t len, size_t *n)
{
    static const lipi_encode_options opt = {.add_special_tokens = false};
    lipi_status st = LIPI_OK;
    const tok_entry *te = &w->job->toks[t];
    for (;;) {
        st = lipi_encode(w->sessions[t], line, len, &opt, &w->out, &w->err);
        if (st != LIPI_OK || w->out.len <= w->out.cap)
            break;
        size_t cap = w->out.len + w->out.len / 2 + 16;
        uint32_t *ids = lipi_reallocarray(w->out.ids, cap, sizeof *ids);
        if (ids)
            w->out.ids = ids;
        lipi_span *offs = lipi_reallocarray(w->out.offsets, cap, sizeof *offs);
        if (offs)
            w->out.offsets = offs;
        if (!ids || !offs) {
            st = lipi_error_set(&w->err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
        w->out.cap = cap;
    }
    if (st != LIPI_OK)
        goto done;
    if (w->out.len > w->spans_cap) {
        void *p = lipi_reallocarray(w->spans, w->out.len, sizeof *w->spans);
        if (!p) {
            st = lipi_error_set(&w->err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
        w->spans = p;
        w->spans_cap = w->out.len;
    }
    for (size_t i = 0; i < w->out.len; i++) {
        uint32_t id = w->out.ids[i];
        w->spans[i] = (lipi_inflation_token){
            .start = w->out.offsets[i].start,
            .end = w->out.offsets[i].end,
            .is_unknown = te->unk_id >= 0 && (int64_t)id == te->unk_id,
            .is_byte_fallback = id < te->n_ids && te->is_byte[id],
        };
    }
    *n = w->out.len;
done:
    return st;
}

/* Lines i = index, index + n_threads, ... of the batch, each for every
 * language and then every tokenizer in turn, so the report analyses each
 * line's text once. */
/* Task k works on workers[k]: its failure is noted there (the first in
 * file order wins, not the lowest task), so the task itself never fails. */
static lipi_status work(void *ctx, size_t k, size_t thread, lipi_error *unused)
{
    worker *w = (worker *)ctx + k;
    const job *jb = w->job;
    const lipi_parallel_batch *b = jb->batch;
    for (size_t i = w->index; i < b->lines && w->st == LIPI_OK; i += jb->n_threads)
        for (size_t l = 0; l < b->languages && w->st == LIPI_OK; l++) {
            size_t len, n = 0;
            const char *line = lipi_parallel_batch_line(b, l, i, &len);
            for (size_t t = 0; t < jb->n_tok && w->st == LIPI_OK; t++) {
                w->st = encode_line(w, t, line, len, &n);
                if (w->st == LIPI_OK)
                    w->st = jb->text_mode
                                ? lipi_inflation_add_text_line(w->shard, t, line, len, w->spans,
                                                               n, &w->err)
                                : lipi_inflation_add_line(w->shard, t, l, line, len, w->spans, n,
                                                          &w->err);
            }
            if (w->st != LIPI_OK) {
                w->err_line = b->line_no[i];
                w->err_lang = l;
            }
        }
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Measuring                                                                 */
/* ------------------------------------------------------------------------ */

lipi_status lipi_inflation_measure(lipi_inflation_report *rep,
                                   const lipi_inflation_tokenizers *ts,
                                   lipi_parallel_files *files, size_t threads,
                                   lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_parallel_batch batch = {0};
    bool text_mode = lipi_inflation_is_text_mode(rep);
    if (lipi_inflation_tokenizer_count(rep) != ts->n)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "the report has %zu tokenizers, %zu were given",
                              lipi_inflation_tokenizer_count(rep), ts->n);
    if (threads == 0)
        threads = 1;
    worker *workers = lipi_calloc(threads, sizeof *workers);
    if (!workers)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    job jb = {ts->toks, ts->n, &batch, text_mode, threads};
    for (size_t k = 0; k < threads; k++) {
        worker *w = &workers[k];
        w->job = &jb;
        w->index = k;
        w->sessions = lipi_calloc(ts->n, sizeof *w->sessions);
        if (!w->sessions || lipi_inflation_new_like(rep, &w->shard, err) != LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
        for (size_t t = 0; t < ts->n; t++)
            if (lipi_session_new(ts->toks[t].enc, &w->sessions[t]) != LIPI_OK) {
                st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                goto done;
            }
    }
    for (;;) {
        st = lipi_parallel_files_read(files, BATCH_LINES * threads, &batch, err);
        if (st != LIPI_OK)
            goto done;
        if (batch.lines == 0)
            break;
        size_t busy = threads < batch.lines ? threads : batch.lines;
        (void)lipi_parallel_for(busy, busy, work, workers, NULL); /* tasks note failures */
        /* The first failure in file order, whichever thread met it. */
        worker *first = NULL;
        for (size_t k = 0; k < threads; k++) {
            worker *w = &workers[k];
            if (w->st != LIPI_OK &&
                (!first || w->err_line < first->err_line ||
                 (w->err_line == first->err_line && w->err_lang < first->err_lang)))
                first = w;
        }
        if (first) {
            st = first->st;
            if (err) {
                *err = first->err;
                snprintf(err->path, sizeof err->path, "%s",
                         lipi_parallel_files_path(files, first->err_lang));
                err->line = (size_t)first->err_line;
            }
            goto done;
        }
    }
    for (size_t k = 0; k < threads; k++)
        if ((st = lipi_inflation_merge(rep, workers[k].shard, err)) != LIPI_OK)
            goto done;
    if (!text_mode)
        lipi_inflation_set_skipped_lines(rep, lipi_parallel_files_skipped(files));
done:
    for (size_t k = 0; k < threads; k++) {
        for (size_t t = 0; workers[k].sessions && t < ts->n; t++)
            lipi_session_free(workers[k].sessions[t]);
        lipi_free(workers[k].sessions);
        lipi_inflation_free(workers[k].shard);
        lipi_free(workers[k].out.ids);
        lipi_free(workers[k].out.offsets);
        lipi_free(workers[k].spans);
    }
    lipi_parallel_batch_free(&batch);
    lipi_free(workers);
    return st;
}

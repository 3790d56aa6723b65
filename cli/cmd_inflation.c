/* `lipi inflation`: how many more tokens the same content costs per
 * language (parallel files) or per script (one mixed text), for one or more
 * tokenizers. The figures come from pipeline/pipeline.h; this file loads
 * the tokenizers, encodes the lines on worker threads and prints. */
#include "cli/cli.h"
#include "cli/signals.h"

#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encoder/encoder.h"
#include "pipeline/pipeline.h"

#define SUB "inflation"
#define BATCH_LINES 256 /* aligned lines read at once and shared out to the threads */

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi inflation -t TOK [-t TOK ...] --parallel DIR_OR_FILE... [OPTIONS]\n"
            "       lipi inflation -t TOK [-t TOK ...] --text FILE [OPTIONS]\n"
            "\n"
            "Measures how many tokens the same content costs in each language, per\n"
            "tokenizer: parity against a reference language (tokens of the language /\n"
            "tokens of the reference over the same lines), fertility (tokens per ICU\n"
            "word), characters and bytes per token, words split into two or more tokens,\n"
            "unknown and byte-fallback tokens, and token boundaries that cut a grapheme\n"
            "cluster. Special tokens are not added. Rows with over 10%% of their\n"
            "characters in unknown tokens are marked not comparable (*).\n"
            "\n"
            "Options:\n"
            "  -t, --tokenizer TOK  a tokenizer: tokenizer.json, vocab.txt, a SentencePiece\n"
            "                       .model, a tiktoken file or name (cl100k_base, o200k_base),\n"
            "                       or a folder holding one; repeat for more. Shown by the\n"
            "                       file's name, or its folder's for tokenizer.json/vocab.txt\n"
            "  --parallel PATH      line-aligned files, one per language (the label is the\n"
            "                       file name without extension), or a folder of them\n"
            "                       (*.txt, *.dev, *.devtest, *.test, *.valid); repeatable,\n"
            "                       and further FILE arguments are added. Lines empty in any\n"
            "                       file are skipped in all\n"
            "  --reference NAME     reference language (default: eng_Latn, eng or en)\n"
            "  --text FILE          one mixed-script text instead: figures per script, no\n"
            "                       parity\n"
            "  --format FMT         table (default), csv, json or html; taken from the -o\n"
            "                       file's extension when not given\n"
            "  -o, --output FILE    write there (atomically) instead of standard output\n"
            "  --threads N          worker threads (default: the number of CPUs)\n"
            "  --invalid MODE       invalid UTF-8: error (default) or replace (with U+FFFD)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Example:\n"
            "  lipi inflation -t cl100k_base -t bert/vocab.txt --parallel flores200/devtest\n"
            "  lipi inflation -t cl100k_base --parallel flores200/devtest -o report.html\n");
}

/* ------------------------------------------------------------------------ */
/* Tokenizers                                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *path;
    char *label;
    lipi_status st; /* of loading */
    lipi_error err;
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    int64_t unk_id;        /* -1: the model has none */
    uint8_t *is_byte;      /* per id: a byte-fallback piece <0xNN> */
    size_t n_ids;
} tok_entry;

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

/* "<0x0A>"-style pieces: what byte fallback emits for bytes the model lacks. */
static bool is_byte_piece(const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEFabcdef";
    return len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && s[4] &&
           strchr(hex, s[3]) && strchr(hex, s[4]);
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
            te->is_byte[id] = s && is_byte_piece(s, len);
        }
done:
    if (st != LIPI_OK && err && !err->path[0])
        snprintf(err->path, sizeof err->path, "%s", path);
    return st;
}

/* Loading is the slowest fixed cost (merge tables, tries): tokenizers load
 * on up to --threads threads, entries k, k + stride, ... on thread k. */
typedef struct {
    tok_entry *toks;
    size_t n, first, stride;
} load_job;

static void *load_some(void *arg)
{
    const load_job *lj = arg;
    for (size_t t = lj->first; t < lj->n; t += lj->stride)
        lj->toks[t].st = load_tokenizer(lj->toks[t].path, &lj->toks[t], &lj->toks[t].err);
    return NULL;
}

/* Loads every tokenizer; on failure *err is that of the first failing one
 * in command-line order. */
static lipi_status load_all(tok_entry *toks, size_t n, size_t threads, lipi_error *err)
{
    load_job jobs[64];
    pthread_t tids[64];
    size_t nt = threads < n ? threads : n, started = 1;
    if (nt > 64)
        nt = 64;
    for (size_t k = 0; k < nt; k++)
        jobs[k] = (load_job){toks, n, k, nt};
    for (; started < nt; started++)
        if (pthread_create(&tids[started], NULL, load_some, &jobs[started]) != 0)
            break;
    load_some(&jobs[0]);
    for (size_t k = 1; k < started; k++)
        pthread_join(tids[k], NULL);
    for (size_t t = 0; t < n; t++) /* the share of threads that did not start */
        if (t % nt >= started)
            toks[t].st = load_tokenizer(toks[t].path, &toks[t], &toks[t].err);
    for (size_t t = 0; t < n; t++)
        if (toks[t].st != LIPI_OK) {
            *err = toks[t].err;
            return toks[t].st;
        }
    return LIPI_OK;
}

static void free_tokenizer(tok_entry *te)
{
    lipi_encoder_free(te->enc);
    lipi_tokenizer_free(te->tok);
    lipi_free(te->is_byte);
    lipi_free(te->label);
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    const tok_entry *toks;
    size_t n_tok;
    const lipi_inflation_batch *batch;
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
static void *work(void *arg)
{
    worker *w = arg;
    const job *jb = w->job;
    const lipi_inflation_batch *b = jb->batch;
    for (size_t i = w->index; i < b->lines && w->st == LIPI_OK; i += jb->n_threads)
        for (size_t l = 0; l < b->languages && w->st == LIPI_OK; l++) {
            size_t len, n = 0;
            const char *line = lipi_inflation_batch_line(b, l, i, &len);
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
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

static bool guess_format(const char *path, lipi_inflation_format *fmt)
{
    static const struct {
        const char *ext;
        lipi_inflation_format fmt;
    } exts[] = {{".html", LIPI_INFLATION_HTML}, {".htm", LIPI_INFLATION_HTML},
                {".json", LIPI_INFLATION_JSON}, {".csv", LIPI_INFLATION_CSV}};
    size_t len = strlen(path);
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t n = strlen(exts[i].ext);
        if (len > n && strcmp(path + len - n, exts[i].ext) == 0) {
            *fmt = exts[i].fmt;
            return true;
        }
    }
    return false;
}

typedef struct {
    const char **tok_paths, **parallel;
    size_t n_tok, n_parallel;
    const char *reference, *text, *output;
    lipi_inflation_format fmt;
    size_t threads;
    lipi_invalid_mode mode;
} options;

/* Runs the report; returns an exit code. */
static int inflation(const options *o)
{
    int rc = EXIT_FAIL;
    lipi_error err = {0};
    tok_entry *toks = lipi_calloc(o->n_tok, sizeof *toks);
    worker *workers = lipi_calloc(o->threads, sizeof *workers);
    pthread_t *tids = lipi_calloc(o->threads, sizeof *tids);
    bool *started = lipi_calloc(o->threads, sizeof *started);
    const char **labels = NULL;
    lipi_inflation_parallel *files = NULL;
    lipi_inflation_report *rep = NULL;
    lipi_inflation_batch batch = {0};
    bool failed = false;
    if (!toks || !workers || !tids || !started) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    for (size_t t = 0; t < o->n_tok; t++) {
        toks[t].path = o->tok_paths[t];
        toks[t].unk_id = -1;
    }
    if (load_all(toks, o->n_tok, o->threads, &err) != LIPI_OK)
        goto report;
    for (size_t t = 0; t < o->n_tok; t++) {
        /* Two tokenizers with one name (vocab.txt in two folders of one
         * name, or one file twice): the later ones become "name#2", ... */
        char *base = tokenizer_label(o->tok_paths[t]), *label = base;
        for (size_t dup = 2; label && label_taken(toks, t, label); dup++) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s#%zu", base, dup);
            if (label != base)
                lipi_free(label);
            label = lipi_strndup(buf, strlen(buf));
        }
        if (label != base)
            lipi_free(base);
        toks[t].label = label;
        if (!label) {
            lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto report;
        }
    }
    labels = lipi_calloc(o->n_tok, sizeof *labels);
    if (!labels) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }
    for (size_t t = 0; t < o->n_tok; t++)
        labels[t] = toks[t].label;

    /* --text reads its file as a parallel set of one, so empty lines are
     * skipped and reading is batched the same way. */
    if (o->text) {
        const char *one[] = {o->text};
        if (lipi_inflation_parallel_open(one, 1, NULL, o->mode, &files, &err) != LIPI_OK ||
            lipi_inflation_new_text(labels, o->n_tok, &rep, &err) != LIPI_OK)
            goto report;
    } else {
        if (lipi_inflation_parallel_open(o->parallel, o->n_parallel, o->reference, o->mode, &files,
                                         &err) != LIPI_OK)
            goto report;
        size_t n_lang = lipi_inflation_parallel_count(files);
        const char **langs = lipi_calloc(n_lang, sizeof *langs);
        if (!langs) {
            lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto report;
        }
        for (size_t l = 0; l < n_lang; l++)
            langs[l] = lipi_inflation_parallel_label(files, l);
        lipi_status st = lipi_inflation_new(labels, o->n_tok, langs, n_lang,
                                            lipi_inflation_parallel_reference(files), &rep, &err);
        lipi_free(langs);
        if (st != LIPI_OK)
            goto report;
    }

    job jb = {toks, o->n_tok, &batch, o->text != NULL, o->threads};
    for (size_t k = 0; k < o->threads; k++) {
        worker *w = &workers[k];
        w->job = &jb;
        w->index = k;
        w->sessions = lipi_calloc(o->n_tok, sizeof *w->sessions);
        if (!w->sessions || lipi_inflation_new_like(rep, &w->shard, &err) != LIPI_OK) {
            lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto report;
        }
        for (size_t t = 0; t < o->n_tok; t++)
            if (lipi_session_new(toks[t].enc, &w->sessions[t]) != LIPI_OK) {
                lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                goto report;
            }
    }
    for (;;) {
        if (lipi_inflation_parallel_read(files, BATCH_LINES * o->threads, &batch, &err) != LIPI_OK)
            goto report;
        if (batch.lines == 0)
            break;
        /* Worker 0 runs here; a worker whose thread cannot start runs here
         * too, after it: same lines, same counts. */
        size_t busy = o->threads < batch.lines ? o->threads : batch.lines;
        for (size_t k = 1; k < busy; k++)
            started[k] = pthread_create(&tids[k], NULL, work, &workers[k]) == 0;
        work(&workers[0]);
        for (size_t k = 1; k < busy; k++) {
            if (started[k])
                pthread_join(tids[k], NULL);
            else
                work(&workers[k]);
        }
        /* The first failure in file order, whichever thread met it. */
        worker *first = NULL;
        for (size_t k = 0; k < o->threads; k++) {
            worker *w = &workers[k];
            if (w->st != LIPI_OK &&
                (!first || w->err_line < first->err_line ||
                 (w->err_line == first->err_line && w->err_lang < first->err_lang)))
                first = w;
        }
        if (first) {
            err = first->err;
            snprintf(err.path, sizeof err.path, "%s",
                     lipi_inflation_parallel_path(files, first->err_lang));
            err.line = (size_t)first->err_line;
            goto report;
        }
    }
    for (size_t k = 0; k < o->threads; k++)
        if (lipi_inflation_merge(rep, workers[k].shard, &err) != LIPI_OK)
            goto report;
    if (!o->text)
        lipi_inflation_set_skipped_lines(rep, lipi_inflation_parallel_skipped(files));

    if (o->output) {
        cli_signals_hold(); /* see cli/signals.h */
        lipi_status st = lipi_inflation_save(rep, o->fmt, o->output, &err);
        cli_signals_release();
        if (st != LIPI_OK)
            goto report;
        rc = EXIT_OK;
    } else if (lipi_inflation_write(rep, o->fmt, stdout, &err) != LIPI_OK) {
        goto report;
    } else {
        rc = cli_finish_output(SUB);
    }
    goto done;
report:
    failed = true;
done:
    if (failed)
        cli_report(SUB, &err);
    for (size_t k = 0; workers && k < o->threads; k++) {
        for (size_t t = 0; workers[k].sessions && t < o->n_tok; t++)
            lipi_session_free(workers[k].sessions[t]);
        lipi_free(workers[k].sessions);
        lipi_inflation_free(workers[k].shard);
        lipi_free(workers[k].out.ids);
        lipi_free(workers[k].out.offsets);
        lipi_free(workers[k].spans);
    }
    for (size_t t = 0; toks && t < o->n_tok; t++)
        free_tokenizer(&toks[t]);
    lipi_inflation_batch_free(&batch);
    lipi_inflation_parallel_close(files);
    lipi_inflation_free(rep);
    lipi_free(labels);
    lipi_free(tids);
    lipi_free(started);
    lipi_free(workers);
    lipi_free(toks);
    return rc;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"parallel", required_argument, NULL, 'p'},
        {"reference", required_argument, NULL, 'r'},
        {"text", required_argument, NULL, 'x'},
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"threads", required_argument, NULL, 'j'},
        {"invalid", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    options o = {.mode = LIPI_INVALID_ERROR};
    const char *format = NULL;
    uint64_t threads = 0;
    int c, rc = EXIT_USAGE;
    /* argv outlives the run, so the lists hold pointers into it */
    o.tok_paths = calloc((size_t)argc, sizeof *o.tok_paths);
    o.parallel = calloc((size_t)argc, sizeof *o.parallel);
    if (!o.tok_paths || !o.parallel) {
        fprintf(stderr, "lipi " SUB ": out of memory\n");
        rc = EXIT_FAIL;
        goto done;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': o.tok_paths[o.n_tok++] = optarg; break;
        case 'p': o.parallel[o.n_parallel++] = optarg; break;
        case 'r': o.reference = optarg; break;
        case 'x': o.text = optarg; break;
        case 'f': format = optarg; break;
        case 'o': o.output = optarg; break;
        case 'j':
            if (!cli_parse_u64(optarg, &threads) || threads == 0 || threads > 256) {
                rc = cli_usage_error(SUB, "--threads takes a number from 1 to 256, not '%s'", optarg);
                goto done;
            }
            break;
        case 'i':
            if (!cli_parse_invalid(optarg, &o.mode)) {
                rc = cli_usage_error(SUB, "--invalid takes 'error' or 'replace', not '%s'", optarg);
                goto done;
            }
            break;
        case 'h': help(stdout); rc = EXIT_OK; goto done;
        case ':': rc = cli_usage_error(SUB, "option '%s' needs a value", argv[optind - 1]); goto done;
        default: rc = cli_usage_error(SUB, "unknown option '%s'", argv[optind - 1]); goto done;
        }
    }
    for (int i = optind; i < argc; i++)
        o.parallel[o.n_parallel++] = argv[i];
    if (o.n_tok == 0) {
        rc = cli_usage_error(SUB, "give at least one tokenizer with -t");
        goto done;
    }
    if (!o.text == !o.n_parallel) {
        rc = cli_usage_error(SUB, o.text ? "give --parallel files or --text, not both"
                                         : "give --parallel files or a --text file");
        goto done;
    }
    if (o.text && o.reference) {
        rc = cli_usage_error(SUB, "--reference is for --parallel files; --text has no parity");
        goto done;
    }
    o.fmt = LIPI_INFLATION_TABLE;
    if (format) {
        lipi_error err = {0};
        if (lipi_inflation_format_parse(format, &o.fmt, &err) != LIPI_OK) {
            rc = cli_usage_error(SUB, "--format: %s", err.msg);
            goto done;
        }
    } else if (o.output) {
        guess_format(o.output, &o.fmt);
    }
    o.threads = lipi_thread_count((size_t)threads, 64);
    rc = inflation(&o);
done:
    free(o.tok_paths);
    free(o.parallel);
    return rc;
}

const cli_command cmd_inflation = {"inflation", "token inflation report: parity, fertility and more per language",
                                   run};

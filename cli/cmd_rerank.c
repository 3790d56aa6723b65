/* `lipi rerank`: a cross-encoder's relevance scores of (query, passage)
 * pairs, and the passages of each query in score order. Reads every pair
 * first (rerankers see tens to hundreds of candidates per query), scores
 * them with lipi_embedder_score_pairs and orders each query's passages with
 * lipi_scores_order (pipeline/pipeline.h). */
#include "cli/cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/embedder.h"
#include "cli/retrieval.h"
#include "cli/signals.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi rerank -m MODEL --query TEXT [OPTIONS] [FILE...]\n"
            "       lipi rerank -m MODEL --pairs FILE [OPTIONS]\n"
            "       lipi rerank -m MODEL --from-search (--queries FILE | --query TEXT)\n"
            "                   [OPTIONS] [FILE...]\n"
            "\n"
            "Scores (query, passage) pairs with a cross-encoder - a fine-tuned\n"
            "*ForSequenceClassification checkpoint such as\n"
            "cross-encoder/ms-marco-MiniLM-L-6-v2 or BAAI/bge-reranker-base - and prints\n"
            "each query's passages best first, one row per passage:\n"
            "  query_no<TAB>rank<TAB>passage_no<TAB>score<TAB>text\n"
            "as 'lipi search' does, 1-based. A pair goes through the tokenizer's pair\n"
            "template (<s> query </s></s> passage </s>) with its token type ids; a longer\n"
            "pair loses tokens from its longer text first. With one label the score is\n"
            "sigmoid(logit), as sentence-transformers' CrossEncoder gives by default\n"
            "(--raw: the logit); with several labels it is the softmax probability of\n"
            "the label --label names, default the last (an NLI model's 'entailment' is\n"
            "often last, check the model's id2label). Equal scores keep input order.\n"
            "\n"
            "Inputs:\n"
            "  --query TEXT           one query; every line of the FILEs (standard input\n"
            "                         when none) is a passage, passage_no its line number\n"
            "                         counted over all FILEs\n"
            "  --pairs FILE           lines QUERY<TAB>PASSAGE ('-': standard input);\n"
            "                         query_no numbers the distinct queries in order of\n"
            "                         first appearance, passage_no is the line number\n"
            "  --from-search          the FILEs are 'lipi search' output (tsv):\n"
            "                         query_no<TAB>rank<TAB>doc_no<TAB>score<TAB>text;\n"
            "                         the query is line query_no of --queries FILE (or\n"
            "                         --query TEXT for query_no 1), passage_no is doc_no\n"
            "  --queries FILE         with --from-search: the queries given to 'lipi search'\n"
            "\n"
            "Options:\n"
            "  --top N                print the N best passages of each query (default all)\n"
            "  --label NAME           with several labels: the one that means relevant\n"
            "  --raw                  the logit instead of its probability\n"
            "  --format FMT           tsv (default) or jsonl (the same fields)\n"
            "%s"
            "  -o, --output FILE      write there (atomically) instead of standard output\n"
            "  -h, --help             show this help\n",
            cli_model_options_help);
}

typedef enum { FMT_TSV, FMT_JSONL } rerank_format;

typedef struct {
    size_t query;       /* 0-based into the queries */
    size_t passage_no;  /* what the row prints */
    int file;           /* where the pair came from, for errors */
    size_t line;
} item;

typedef struct {
    /* options */
    const char *query, *pairs, *queries_path, *label;
    bool from_search, raw;
    size_t top;
    rerank_format format;
    /* the pairs read: item i is (queries[items[i].query], passages[i]) */
    cli_text_batch queries, passages;
    item *items;
    size_t cap;
    size_t lines;       /* passage lines read so far (--query) */
} rerank_ctx;

static int own(int id, const char *arg, void *vctx)
{
    rerank_ctx *c = vctx;
    uint64_t v;
    switch (id) {
    case CLI_OPT_QUERY: c->query = arg; break;
    case CLI_OPT_PAIRS: c->pairs = arg; break;
    case CLI_OPT_QUERIES: c->queries_path = arg; break;
    case CLI_OPT_FROM_SEARCH: c->from_search = true; break;
    case CLI_OPT_LABEL: c->label = arg; break;
    case CLI_OPT_RAW: c->raw = true; break;
    case CLI_OPT_TOP:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > SIZE_MAX)
            return cli_bad_value("rerank", "--top", "a number of 1 or more", arg);
        c->top = (size_t)v;
        break;
    case CLI_OPT_FORMAT:
        if (strcmp(arg, "tsv") == 0)
            c->format = FMT_TSV;
        else if (strcmp(arg, "jsonl") == 0)
            c->format = FMT_JSONL;
        else
            return cli_bad_value("rerank", "--format", "tsv or jsonl", arg);
        break;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

static lipi_status add_item(rerank_ctx *c, size_t query, size_t passage_no, const char *s,
                            size_t len, int file, size_t line, lipi_error *err)
{
    size_t n = c->passages.n;
    if (n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        item *p = lipi_reallocarray(c->items, cap, sizeof *p);
        if (!p)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        c->items = p;
        c->cap = cap;
    }
    c->items[n] = (item){query, passage_no, file, line};
    return cli_text_batch_add(&c->passages, s, len, err);
}

/* The query numbered by first appearance (--pairs): a linear search, as a
 * reranker's input holds few distinct queries... */
static lipi_status query_of(rerank_ctx *c, const char *s, size_t len, size_t *q, lipi_error *err)
{
    /* ...but the last one is the common case: lines come grouped. */
    const cli_text_batch *qs = &c->queries;
    for (size_t k = qs->n; k-- > 0;)
        if (qs->lens[k] == len && memcmp(qs->ptrs[k], s, len) == 0) {
            *q = k;
            return LIPI_OK;
        }
    *q = qs->n;
    return cli_text_batch_add(&c->queries, s, len, err);
}

/* One line of a `lipi search` row: the query, doc_no and text. */
static lipi_status add_search_row(rerank_ctx *c, const char *line, size_t len, int file,
                                  size_t line_no, lipi_error *err)
{
    const char *f[5];
    size_t fl[5], k = 0;
    const char *p = line, *end = line + len;
    for (; k < 4; k++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        if (!tab)
            break;
        f[k] = p;
        fl[k] = (size_t)(tab - p);
        p = tab + 1;
    }
    char num[32];
    uint64_t qno = 0, dno = 0;
    bool ok = k == 4 && fl[0] < sizeof num && fl[2] < sizeof num;
    if (ok) {
        memcpy(num, f[0], fl[0]);
        num[fl[0]] = '\0';
        ok = cli_parse_u64(num, &qno) && qno >= 1;
    }
    if (ok) {
        memcpy(num, f[2], fl[2]);
        num[fl[2]] = '\0';
        ok = cli_parse_u64(num, &dno) && dno >= 1 && dno <= SIZE_MAX;
    }
    if (!ok)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, line_no, 0,
                              "expected a 'lipi search' row "
                              "query_no<TAB>rank<TAB>doc_no<TAB>score<TAB>text");
    if (qno > c->queries.n)
        return lipi_error_set(err, LIPI_EINVAL, NULL, line_no, 0,
                              "query_no %llu, but %s %zu %s", (unsigned long long)qno,
                              c->queries_path ? "--queries has" : "--query gives",
                              c->queries.n, lipi_plural(c->queries.n, "query", "queries"));
    return add_item(c, (size_t)qno - 1, (size_t)dno, p, (size_t)(end - p), file, line_no, err);
}

/* Reads every line of files[0..nfiles) (standard input for none) as
 * --query passages, --pairs lines or --from-search rows. */
static char *stdin_only[] = {"-"};

static lipi_status read_pairs(rerank_ctx *c, char **files, int nfiles, lipi_invalid_mode mode,
                              lipi_error *err)
{
    if (nfiles == 0) {
        files = stdin_only;
        nfiles = 1;
    }
    lipi_status st = LIPI_OK;
    for (int f = 0; f < nfiles && st == LIPI_OK; f++) {
        lipi_line_reader *r = NULL;
        st = lipi_line_reader_open(files[f], mode, &r, err);
        while (st == LIPI_OK) {
            const char *line;
            size_t len, q;
            st = lipi_line_reader_next(r, &line, &len, err);
            if (st != LIPI_OK || !line)
                break;
            size_t no = lipi_line_reader_line_no(r);
            if (c->from_search) {
                st = add_search_row(c, line, len, f, no, err);
            } else if (c->pairs) {
                const char *a, *b;
                size_t alen, blen;
                st = cli_split_pairs(&line, &len, 1, &a, &alen, &b, &blen, err);
                if (st == LIPI_OK)
                    st = query_of(c, a, alen, &q, err);
                if (st == LIPI_OK)
                    st = add_item(c, q, no, b, blen, f, no, err);
                else if (err)
                    err->line = no;
            } else {
                st = add_item(c, 0, ++c->lines, line, len, f, no, err);
            }
            if (st != LIPI_OK && err && !err->path[0])
                snprintf(err->path, sizeof err->path, "%s", files[f]);
        }
        lipi_line_reader_close(r);
    }
    return st;
}

static lipi_status read_queries(rerank_ctx *c, const char *path, lipi_invalid_mode mode,
                                lipi_error *err)
{
    if (!path)
        return cli_text_batch_add(&c->queries, c->query, strlen(c->query), err);
    return cli_text_batch_read(&c->queries, path, mode, err);
}

/* ------------------------------------------------------------------------ */
/* Scoring and printing                                                      */
/* ------------------------------------------------------------------------ */

/* Items by query, then input order (qsort is not stable: the index is the
 * tie-breaker). */
static const rerank_ctx *sort_ctx;
static int by_query(const void *pa, const void *pb)
{
    size_t x = *(const size_t *)pa, y = *(const size_t *)pb;
    const item *a = &sort_ctx->items[x], *b = &sort_ctx->items[y];
    if (a->query != b->query)
        return a->query < b->query ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void print_row(const rerank_ctx *c, FILE *f, const item *it, size_t rank, float score)
{
    size_t i = (size_t)(it - c->items);
    const char *text = c->passages.ptrs[i];
    size_t len = c->passages.lens[i];
    if (c->format == FMT_TSV) {
        fprintf(f, "%zu\t%zu\t%zu\t%.6f\t", it->query + 1, rank, it->passage_no, (double)score);
        fwrite(text, 1, len, f);
        putc('\n', f);
    } else {
        fprintf(f, "{\"query_no\":%zu,\"rank\":%zu,\"passage_no\":%zu,\"score\":%.6f,\"text\":",
                it->query + 1, rank, it->passage_no, (double)score);
        cli_write_json_string(f, text, len);
        fputs("}\n", f);
    }
}

/* Scores every item, then prints each query's items best first. */
static lipi_status score_and_print(rerank_ctx *c, lipi_embedder_session *s, size_t label,
                                   char **files, FILE *f, size_t *truncated, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t n = c->passages.n, alloc = n ? n : 1;
    const char **a = lipi_reallocarray(NULL, alloc, sizeof *a);
    size_t *alens = lipi_reallocarray(NULL, alloc, sizeof *alens);
    size_t *by_q = lipi_reallocarray(NULL, alloc, sizeof *by_q);
    size_t *order = lipi_reallocarray(NULL, alloc, sizeof *order);
    float *scores = lipi_reallocarray(NULL, alloc, sizeof *scores);
    float *group = lipi_reallocarray(NULL, alloc, sizeof *group);
    uint8_t *cut = lipi_reallocarray(NULL, alloc, sizeof *cut);
    if (!a || !alens || !by_q || !order || !scores || !group || !cut) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        a[i] = c->queries.ptrs[c->items[i].query];
        alens[i] = c->queries.lens[c->items[i].query];
        by_q[i] = i;
    }
    st = lipi_embedder_score_pairs(s, a, alens, c->passages.ptrs, c->passages.lens, n, label,
                                   c->raw, scores, cut, err);
    if (st != LIPI_OK) {
        if (err && err->line >= 1 && err->line <= n && !err->path[0]) {
            const item *it = &c->items[err->line - 1];
            snprintf(err->path, sizeof err->path, "%s", files[it->file]);
            err->line = it->line;
        }
        goto done;
    }
    cli_count_truncated(cut, n, truncated);
    sort_ctx = c;
    qsort(by_q, n, sizeof *by_q, by_query);
    for (size_t g = 0; g < n;) {
        size_t end = g;
        while (end < n && c->items[by_q[end]].query == c->items[by_q[g]].query)
            end++;
        for (size_t i = g; i < end; i++)
            group[i - g] = scores[by_q[i]];
        if ((st = lipi_scores_order(group, end - g, order, err)) != LIPI_OK)
            goto done;
        size_t shown = c->top && c->top < end - g ? c->top : end - g;
        for (size_t r = 0; r < shown; r++) {
            size_t i = by_q[g + order[r]];
            print_row(c, f, &c->items[i], r + 1, scores[i]);
        }
        g = end;
    }
done:
    lipi_free(a);
    lipi_free(alens);
    lipi_free(by_q);
    lipi_free(order);
    lipi_free(scores);
    lipi_free(group);
    lipi_free(cut);
    return st;
}

/* The label whose score ranks: --label NAME, else the last. */
static lipi_status pick_label(const lipi_embedder *e, const char *name, size_t *label,
                              lipi_error *err)
{
    size_t k = lipi_embedder_label_count(e);
    *label = k - 1;
    if (!name)
        return LIPI_OK;
    for (size_t j = 0; j < k; j++)
        if (strcmp(lipi_embedder_label(e, j), name) == 0) {
            *label = j;
            return LIPI_OK;
        }
    char have[200] = "";
    for (size_t j = 0, at = 0; j < k && at < sizeof have; j++)
        at += (size_t)snprintf(have + at, sizeof have - at, "%s'%s'", j ? ", " : "",
                               lipi_embedder_label(e, j));
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "--label: expected one of the model's labels (%s), found '%s'", have,
                          name);
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"query", required_argument, NULL, CLI_OPT_QUERY},
        {"pairs", required_argument, NULL, CLI_OPT_PAIRS},
        {"queries", required_argument, NULL, CLI_OPT_QUERIES},
        {"from-search", no_argument, NULL, CLI_OPT_FROM_SEARCH},
        {"label", required_argument, NULL, CLI_OPT_LABEL},
        {"raw", no_argument, NULL, CLI_OPT_RAW},
        {"top", required_argument, NULL, CLI_OPT_TOP},
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {NULL, 0, NULL, 0}};
    rerank_ctx c = {0};
    cli_args a = {.eo = {.batch = 32, .normalize = -1}, .max_threads = 256};
    const cli_spec spec = {"rerank", help, NULL, opts, CLI_ARGS_MODEL | CLI_ARG_OUTPUT, own, &c,
                           0};
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc != CLI_GO_ON)
        return rc;
    char **files = argv + optind;
    int nfiles = argc - optind;
    if (!a.model)
        return cli_usage_error("rerank", "-m MODEL is required");
    if (c.pairs && (c.query || c.queries_path || c.from_search || nfiles))
        return cli_usage_error("rerank", "--pairs FILE holds the queries and the passages: "
                                         "no --query, --queries, --from-search or FILE with it");
    if (c.queries_path && !c.from_search)
        return cli_usage_error("rerank", "--queries goes with --from-search");
    if (c.query && c.queries_path)
        return cli_usage_error("rerank", "--query and --queries: give one");
    if (!c.pairs && !c.query && !c.queries_path)
        return cli_usage_error("rerank", "no query: give --query TEXT, --pairs FILE, or "
                                         "--from-search with --queries FILE");
    if (c.pairs) {
        files = (char **)&c.pairs;
        nfiles = 1;
    }

    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_output *o = NULL;
    FILE *f = NULL;
    int slot = -1;
    lipi_error err = {0};
    size_t label = 0, truncated = 0;
    rc = EXIT_FAIL;
    if (lipi_embedder_open(a.model, &a.eo, &e, &err) != LIPI_OK)
        goto report;
    if (!lipi_embedder_label_count(e)) {
        lipi_error_set(&err, LIPI_EINVAL, a.model, 0, 0,
                       "expected a cross-encoder (a *ForSequenceClassification checkpoint, "
                       "with a classifier head), found a model without one");
        goto report;
    }
    if (pick_label(e, c.label, &label, &err) != LIPI_OK ||
        (!c.pairs && read_queries(&c, c.queries_path, a.mode, &err) != LIPI_OK) ||
        read_pairs(&c, files, nfiles, a.mode, &err) != LIPI_OK ||
        lipi_embedder_session_new(e, a.threads, &s, &err) != LIPI_OK ||
        cli_output_open(a.output, &o, &f, &slot, &err) != LIPI_OK)
        goto report;
    if (score_and_print(&c, s, label, nfiles ? files : stdin_only, f, &truncated, &err) !=
        LIPI_OK) {
        lipi_output_abort(o);
        o = NULL;
        goto report;
    }
    if (lipi_output_commit(o, &err) != LIPI_OK) {
        o = NULL;
        goto report;
    }
    o = NULL;
    cli_report_truncated("rerank", truncated, lipi_embedder_max_length(e));
    rc = EXIT_OK;
    goto done;
report:
    cli_report("rerank", &err);
done:
    if (o)
        lipi_output_abort(o);
    cli_cleanup_done(slot);
    lipi_embedder_session_free(s);
    lipi_embedder_free(e);
    cli_text_batch_free(&c.queries);
    cli_text_batch_free(&c.passages);
    lipi_free(c.items);
    return rc;
}

const cli_command cmd_rerank = {"rerank", "(query, passage) pairs ordered by a cross-encoder",
                                run};

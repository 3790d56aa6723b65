/* `lipi search`: top-k documents of an index for each query. */
#include "cli/cli.h"
#include "cli/options.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cli/embedder.h"
#include "cli/retrieval.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi search --index DIR [-m MODEL] (--query TEXT | --queries FILE) [OPTIONS]\n"
            "       lipi search --index DIR --query-vectors FILE.npy [OPTIONS]\n"
            "\n"
            "Finds the k documents of the index most similar (cosine) to each query and\n"
            "prints one row per hit:  query_no<TAB>rank<TAB>doc_no<TAB>score<TAB>text\n"
            "with 1-based numbers: query_no is the query's line in FILE (1 for --query),\n"
            "doc_no the document's line in the indexed input, in indexing order. The\n"
            "search is exact (blocked GEMMs over the memory-mapped vectors) unless the\n"
            "index has a FAISS index (lipi index --faiss), which is then used, or\n"
            "quantized vectors (lipi index --quantize): then the documents with the\n"
            "best int8 or binary scores are rescored with their float32 vectors,\n"
            "and the best k of those printed. The int8 or binary score of a\n"
            "document weighs its codes with the query's values (see --int8-query\n"
            "and --binary-query).\n"
            "\n"
            "Options:\n"
            "  --index DIR            the index (lipi index -o DIR)\n"
            "  -m, --model MODEL      embeds the queries; default: the index's model.\n"
            "                         Another model than the index's is an error\n"
            "  --query TEXT           one query\n"
            "  --queries FILE         one query per line ('-': standard input)\n"
            "  --query-vectors FILE   precomputed query embeddings (.npy, one row each)\n"
            "  --prompt TEXT          put TEXT before every query (e5: 'query: ')\n"
            "  --prompt-name NAME     the prompt NAME of the model's\n"
            "                         config_sentence_transformers.json (default: its\n"
            "                         prompt 'query' if it has one, else its\n"
            "                         default_prompt_name, else none). An index built\n"
            "                         with a named prompt that the model's config words\n"
            "                         differently is an error\n"
            "  --dimensions K         the index's (lipi index --dimensions); another K\n"
            "                         is an error\n"
            "  -k N                   hits per query (default 10)\n"
            "  --format FMT           tsv (default) or jsonl (the same fields)\n"
            "  --exact                exact search even when the index has FAISS or is\n"
            "                         quantized\n"
            "  --rescore-multiplier M quantized index: rescore the best M x k documents\n"
            "                         (default 4)\n"
            "  --no-rescore           quantized index: print the quantized ranking and\n"
            "                         its scores (int8 dot products, or minus the\n"
            "                         (weighted) Hamming distance)\n"
            "  --int8-query HOW       int8 index: how the query is scored against the\n"
            "                         codes. weights (default): q_i * step_i (step_i =\n"
            "                         (max_i - min_i) / 255, the index's per-dimension\n"
            "                         ranges) scaled to int8 by one factor per query,\n"
            "                         which ranks as q . (dequantized x) does (FAISS\n"
            "                         SQ8's asymmetric distance); codes: the query coded\n"
            "                         like the rows, a codes . codes score\n"
            "                         (sentence-transformers' int8 search)\n"
            "  --binary-query HOW     binary index: how the query is scored against the\n"
            "                         bits. weights (default): the query's values\n"
            "                         (scaled to +-7) summed with the sign each bit\n"
            "                         gives, q . (2b - 1), which ranks much as q . x\n"
            "                         does; bits: the query coded like the rows, minus\n"
            "                         the Hamming distance (sentence-transformers' and\n"
            "                         FAISS IndexBinaryFlat's binary search; a scan about\n"
            "                         twice as fast, a weaker filter)\n"
            "  --faiss-params P       FAISS search parameters, e.g. nprobe=16 or\n"
            "                         efSearch=128 (comma-separated)\n"
            "  --rerank MODEL         two stages: the best --rerank-top documents of each\n"
            "                         text query are scored with the cross-encoder MODEL\n"
            "                         (a *ForSequenceClassification checkpoint, as lipi\n"
            "                         rerank: sigmoid of one logit, or the last label's\n"
            "                         probability) and the best k of them printed with\n"
            "                         that score, ties in search order\n"
            "  --rerank-top N         candidates per query for --rerank (default 100, at\n"
            "                         least k)\n"
            "  --threads N            threads (default 2)\n"
            "  --invalid MODE         invalid UTF-8 in queries: error (default) or replace\n"
            "  -h, --help             show this help\n"
            "\n"
            "Examples:\n"
            "  lipi search --index wiki.idx --query 'भारत की राजधानी' -k 5\n"
            "  lipi search --index wiki.idx --queries q.txt -k 10 \\\n"
            "      --rerank BAAI/bge-reranker-v2-m3 --rerank-top 50\n");
}

enum { FMT_TSV, FMT_JSONL };

/* Queries searched at a time: results of one chunk are printed before the
 * next is embedded, so memory stays bounded for any number of queries. */
#define QUERY_CHUNK 4096

typedef struct {
    const lipi_index *idx;
    lipi_search_options so;
    size_t k, dim;
    int format;
    int64_t *docs;
    float *scores;
    /* --rerank: the cross-encoder, its label, the candidates searched per
     * query (kk >= k) and this chunk's query texts. */
    lipi_embedder_session *rerank;
    size_t label, kk, truncated;
    const char *const *qtexts;
    const size_t *qlens;
} search_ctx;

static void print_hit(const search_ctx *c, size_t query, size_t rank, int64_t d, double score,
                      const char *text, size_t len)
{
    if (c->format == FMT_TSV) {
        printf("%zu\t%zu\t%lld\t%.6f\t", query + 1, rank + 1, (long long)d + 1, score);
        fwrite(text, 1, len, stdout);
        putchar('\n');
    } else {
        printf("{\"query_no\":%zu,\"rank\":%zu,\"doc_no\":%lld,\"score\":%.6f,\"text\":",
               query + 1, rank + 1, (long long)d + 1, score);
        cli_write_json_string(stdout, text, len);
        fputs("}\n", stdout);
    }
}

/* The second stage for query i of the chunk (number `query`): its found
 * candidates docs[0..) scored against the query text by the cross-encoder,
 * the best k printed with those scores. */
static lipi_status rerank_print(search_ctx *c, size_t i, size_t query, const int64_t *docs,
                                lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t n = 0;
    while (n < c->kk && docs[n] >= 0)
        n++;
    size_t alloc = n ? n : 1;
    const char **a = lipi_reallocarray(NULL, alloc, sizeof *a);
    const char **b = lipi_reallocarray(NULL, alloc, sizeof *b);
    size_t *alens = lipi_reallocarray(NULL, alloc, sizeof *alens);
    size_t *blens = lipi_reallocarray(NULL, alloc, sizeof *blens);
    size_t *order = lipi_reallocarray(NULL, alloc, sizeof *order);
    float *scores = lipi_reallocarray(NULL, alloc, sizeof *scores);
    uint8_t *cut = lipi_reallocarray(NULL, alloc, sizeof *cut);
    if (!a || !b || !alens || !blens || !order || !scores || !cut) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < n && st == LIPI_OK; j++) {
        a[j] = c->qtexts[i];
        alens[j] = c->qlens[i];
        st = lipi_index_get_text(c->idx, (size_t)docs[j], &b[j], &blens[j], err);
    }
    if (st != LIPI_OK || !n ||
        (st = lipi_embedder_score_pairs(c->rerank, a, alens, b, blens, n, c->label, false,
                                        scores, cut, err)) != LIPI_OK ||
        (st = lipi_scores_order(scores, n, order, err)) != LIPI_OK)
        goto done;
    cli_count_truncated(cut, n, &c->truncated);
    for (size_t r = 0; r < n && r < c->k; r++)
        print_hit(c, query, r, docs[order[r]], scores[order[r]], b[order[r]], blens[order[r]]);
done:
    lipi_free(a);
    lipi_free(b);
    lipi_free(alens);
    lipi_free(blens);
    lipi_free(order);
    lipi_free(scores);
    lipi_free(cut);
    return st;
}

/* Searches q (n, dim) for queries numbered first.. and prints the hits. */
static lipi_status search_print(search_ctx *c, float *q, size_t n, size_t first,
                                lipi_error *err)
{
    lipi_vectors_normalize(q, n, c->dim);
    lipi_status st = lipi_index_search(c->idx, q, n, c->dim, c->kk, &c->so, c->docs, c->scores,
                                       err);
    if (st != LIPI_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        if (c->rerank) {
            if ((st = rerank_print(c, i, first + i, c->docs + i * c->kk, err)) != LIPI_OK)
                return st;
            continue;
        }
        for (size_t r = 0; r < c->k; r++) {
            int64_t d = c->docs[i * c->kk + r];
            if (d < 0)
                break;
            const char *text;
            size_t len;
            if ((st = lipi_index_get_text(c->idx, (size_t)d, &text, &len, err)) != LIPI_OK)
                return st;
            print_hit(c, first + i, r, d, c->scores[i * c->kk + r], text, len);
        }
    }
    return LIPI_OK;
}

/* Searches the rows of the .npy file qvec, QUERY_CHUNK at a time through
 * q (QUERY_CHUNK, dim). */
static lipi_status search_vectors(search_ctx *c, const char *qvec, float *q, lipi_error *err)
{
    lipi_npy_map *qm = NULL;
    lipi_status st = lipi_npy_map_open(qvec, &qm, err);
    if (st == LIPI_OK && lipi_npy_map_cols(qm) != c->dim)
        st = lipi_error_set(err, LIPI_EINVAL, qvec, 0, 0,
                            "expected query vectors of the index's dimension %zu, found %zu",
                            c->dim, lipi_npy_map_cols(qm));
    size_t n = st == LIPI_OK ? lipi_npy_map_rows(qm) : 0;
    for (size_t q0 = 0; q0 < n && st == LIPI_OK; q0 += QUERY_CHUNK) {
        size_t m = q0 + QUERY_CHUNK < n ? QUERY_CHUNK : n - q0;
        memcpy(q, lipi_npy_map_data(qm) + q0 * c->dim, m * c->dim * sizeof *q);
        st = search_print(c, q, m, q0, err);
    }
    lipi_npy_map_close(qm);
    return st;
}

typedef struct {
    const char *index, *query, *queries, *qvec, *rerank;
    size_t rerank_top;
    bool int8_query;    /* --int8-query given */
    bool binary_query;  /* --binary-query given */
    lipi_index_open_options *oo;
    search_ctx *c;
} search_args;

/* Embeds --query or the lines of --queries with the index's model (or -m,
 * which must match it) and searches them, QUERY_CHUNK at a time through q. */
static lipi_status search_texts(search_ctx *c, const search_args *sa, const char *model,
                                lipi_embedder_options *eo, lipi_invalid_mode mode, float *q,
                                lipi_error *err)
{
    lipi_embedder *emb = NULL;
    lipi_embedder_session *es = NULL;
    cli_text_batch texts = {0};
    lipi_status st;
    const lipi_index_model *im = lipi_index_get_model(c->idx);
    if (!model && !im->name) {
        st = lipi_error_set(err, LIPI_EINVAL, sa->index, 0, 0,
                            "the index was built from precomputed vectors: search it with "
                            "--query-vectors");
        goto done;
    }
    /* The index's own model by default: its folder if it is still
     * there, else the name it was given by. */
    const char *use = model ? model : im->path && access(im->path, R_OK) == 0 ? im->path
                                                                            : im->name;
    if (im->pooling && !lipi_pooling_parse(im->pooling, &eo->pooling))
        eo->pooling = 0;
    /* Queries as sentence-transformers' encode_query: the prompt "query"
     * when the model has one; vectors cut as the index's were. */
    if (!eo->prompt && !eo->prompt_name) {
        eo->prompt_name = "query";
        eo->prompt_name_optional = true;
    }
    if (!eo->dimensions)
        eo->dimensions = im->truncate_dim;
    lipi_index_model qid;
    char fingerprint[17];
    if ((st = lipi_embedder_open(use, eo, &emb, err)) != LIPI_OK ||
        (st = lipi_embedder_check_index(emb, c->idx, sa->index, err)) != LIPI_OK ||
        (st = lipi_embedder_session_new(emb, c->so.threads, &es, err)) != LIPI_OK ||
        (st = lipi_embedder_identity(emb, &qid, fingerprint, err)) != LIPI_OK ||
        (st = lipi_index_check_model(c->idx, &qid, err)) != LIPI_OK)
        goto done;
    if (sa->query)
        st = cli_text_batch_add(&texts, sa->query, strlen(sa->query), err);
    else
        st = cli_text_batch_read(&texts, sa->queries, mode, err);
    for (size_t q0 = 0; q0 < texts.n && st == LIPI_OK; q0 += QUERY_CHUNK) {
        size_t m = q0 + QUERY_CHUNK < texts.n ? QUERY_CHUNK : texts.n - q0;
        st = lipi_embedder_embed(es, texts.ptrs + q0, texts.lens + q0, m, q, NULL, err);
        c->qtexts = (const char *const *)texts.ptrs + q0;
        c->qlens = texts.lens + q0;
        if (st == LIPI_OK)
            st = search_print(c, q, m, q0, err);
    }
done:
    cli_text_batch_free(&texts);
    lipi_embedder_session_free(es);
    lipi_embedder_free(emb);
    return st;
}

static int search_option(int id, const char *arg, void *vsa)
{
    search_args *sa = vsa;
    uint64_t v;
    switch (id) {
    case CLI_OPT_INDEX: sa->index = arg; break;
    case CLI_OPT_QUERY: sa->query = arg; break;
    case CLI_OPT_QUERIES: sa->queries = arg; break;
    case CLI_OPT_QUERY_VECTORS: sa->qvec = arg; break;
    case 'k':
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 100000)
            return cli_bad_value("search", "-k", "1..100000", arg);
        sa->c->k = (size_t)v;
        break;
    case CLI_OPT_FORMAT:
        if (strcmp(arg, "tsv") == 0)
            sa->c->format = FMT_TSV;
        else if (strcmp(arg, "jsonl") == 0)
            sa->c->format = FMT_JSONL;
        else
            return cli_bad_value("search", "--format", "tsv or jsonl", arg);
        break;
    case CLI_OPT_EXACT: sa->c->so.exact = true; break;
    case CLI_OPT_RESCORE_MULTIPLIER:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 10000)
            return cli_bad_value("search", "--rescore-multiplier", "1..10000", arg);
        sa->c->so.rescore_multiplier = (size_t)v;
        break;
    case CLI_OPT_NO_RESCORE: sa->c->so.no_rescore = true; break;
    case CLI_OPT_INT8_QUERY:
        if (strcmp(arg, "weights") != 0 && strcmp(arg, "codes") != 0)
            return cli_bad_value("search", "--int8-query", "weights or codes", arg);
        sa->c->so.int8_query_codes = strcmp(arg, "codes") == 0;
        sa->int8_query = true;
        break;
    case CLI_OPT_BINARY_QUERY:
        if (strcmp(arg, "weights") != 0 && strcmp(arg, "bits") != 0)
            return cli_bad_value("search", "--binary-query", "weights or bits", arg);
        sa->c->so.binary_query_bits = strcmp(arg, "bits") == 0;
        sa->binary_query = true;
        break;
    case CLI_OPT_FAISS_PARAMS: sa->oo->faiss_params = arg; break;
    case CLI_OPT_RERANK: sa->rerank = arg; break;
    case CLI_OPT_RERANK_TOP:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 100000)
            return cli_bad_value("search", "--rerank-top", "1..100000", arg);
        sa->rerank_top = (size_t)v;
        break;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"index", required_argument, NULL, CLI_OPT_INDEX},
        {"query", required_argument, NULL, CLI_OPT_QUERY},
        {"queries", required_argument, NULL, CLI_OPT_QUERIES},
        {"query-vectors", required_argument, NULL, CLI_OPT_QUERY_VECTORS},
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {"exact", no_argument, NULL, CLI_OPT_EXACT},
        {"faiss-params", required_argument, NULL, CLI_OPT_FAISS_PARAMS},
        {"rescore-multiplier", required_argument, NULL, CLI_OPT_RESCORE_MULTIPLIER},
        {"no-rescore", no_argument, NULL, CLI_OPT_NO_RESCORE},
        {"int8-query", required_argument, NULL, CLI_OPT_INT8_QUERY},
        {"binary-query", required_argument, NULL, CLI_OPT_BINARY_QUERY},
        {"rerank", required_argument, NULL, CLI_OPT_RERANK},
        {"rerank-top", required_argument, NULL, CLI_OPT_RERANK_TOP},
        {NULL, 0, NULL, 0},
    };
    lipi_index_open_options oo = {0};
    search_ctx c = {.k = 10};
    search_args sa = {.oo = &oo, .c = &c};
    cli_args a = {.mode = LIPI_INVALID_ERROR, .threads = 2, .max_threads = 256,
                  .eo = {.batch = 32}};
    const cli_spec spec = {"search", help, "k:", opts,
                           CLI_ARG_MODEL | CLI_ARG_THREADS | CLI_ARG_INVALID | CLI_ARGS_RETRIEVAL,
                           search_option, &sa,
                           0};
    int ch = cli_parse(&spec, argc, argv, &a);
    if (ch != CLI_GO_ON)
        return ch;
    const char *index = sa.index, *model = a.model, *query = sa.query, *queries = sa.queries,
               *qvec = sa.qvec;
    lipi_embedder_options eo = a.eo;
    lipi_invalid_mode mode = a.mode;
    c.so.threads = a.threads;
    if (optind < argc)
        return cli_usage_error("search", "unexpected argument '%s'", argv[optind]);
    if (!index)
        return cli_usage_error("search", "give the index with --index DIR");
    if (!!query + !!queries + !!qvec != 1)
        return cli_usage_error("search",
                               "give one of --query TEXT, --queries FILE, --query-vectors FILE");
    if (qvec && model)
        return cli_usage_error("search", "-m embeds text queries; --query-vectors needs none");
    if (c.so.no_rescore && c.so.rescore_multiplier)
        return cli_usage_error("search", "give either --no-rescore or --rescore-multiplier");
    if (c.so.exact &&
        (c.so.no_rescore || c.so.rescore_multiplier || sa.int8_query || sa.binary_query))
        return cli_usage_error("search", "--exact searches the float32 vectors: it takes no "
                                         "--no-rescore, --rescore-multiplier, --int8-query or "
                                         "--binary-query");
    if (qvec && sa.rerank)
        return cli_usage_error("search", "--rerank reads the query texts: give --query or "
                                         "--queries, not --query-vectors");
    if (sa.rerank_top && !sa.rerank)
        return cli_usage_error("search", "--rerank-top goes with --rerank MODEL");
    if (qvec && (eo.prompt || eo.prompt_name || eo.dimensions))
        return cli_usage_error("search", "--prompt, --prompt-name and --dimensions embed text "
                                         "queries; --query-vectors needs none");

    int rc = EXIT_FAIL;
    lipi_error err = {0};
    lipi_index *idx = NULL;
    lipi_embedder *cross = NULL;
    float *q = NULL;
    c.kk = c.k;
    if (sa.rerank) {
        size_t top = sa.rerank_top ? sa.rerank_top : 100;
        c.kk = top > c.k ? top : c.k;
        lipi_embedder_options reo = {.batch = 32, .normalize = -1};
        if (lipi_embedder_open(sa.rerank, &reo, &cross, &err) != LIPI_OK)
            goto fail;
        if (!lipi_embedder_label_count(cross)) {
            lipi_error_set(&err, LIPI_EINVAL, sa.rerank, 0, 0,
                           "--rerank: expected a cross-encoder (a *ForSequenceClassification "
                           "checkpoint, with a classifier head), found a model without one");
            goto fail;
        }
        c.label = lipi_embedder_label_count(cross) - 1;
        if (lipi_embedder_session_new(cross, c.so.threads, &c.rerank, &err) != LIPI_OK)
            goto fail;
    }
    if (lipi_index_open(index, &oo, &idx, &err) != LIPI_OK)
        goto fail;
    c.idx = idx;
    c.dim = lipi_index_dim(idx);
    if ((c.so.no_rescore || c.so.rescore_multiplier) &&
        lipi_index_quantization(idx) == LIPI_QUANT_NONE) {
        lipi_error_set(&err, LIPI_EINVAL, index, 0, 0,
                       "--no-rescore and --rescore-multiplier need a quantized index "
                       "(lipi index --quantize)");
        cli_report("search", &err);
        rc = EXIT_USAGE;
        goto done;
    }
    if (sa.int8_query && lipi_index_quantization(idx) != LIPI_QUANT_INT8) {
        lipi_error_set(&err, LIPI_EINVAL, index, 0, 0,
                       "--int8-query needs an int8 index (lipi index --quantize int8)");
        cli_report("search", &err);
        rc = EXIT_USAGE;
        goto done;
    }
    if (sa.binary_query && lipi_index_quantization(idx) != LIPI_QUANT_BINARY) {
        lipi_error_set(&err, LIPI_EINVAL, index, 0, 0,
                       "--binary-query needs a binary index (lipi index --quantize binary)");
        cli_report("search", &err);
        rc = EXIT_USAGE;
        goto done;
    }
    if (lipi_index_faiss_spec(idx) && !lipi_index_has_faiss(idx) && !c.so.exact)
        fprintf(stderr, "lipi search: this lipi was built without FAISS; searching %s exactly\n",
                index);
    if (!(c.docs = lipi_reallocarray(NULL, (size_t)QUERY_CHUNK * c.kk, sizeof *c.docs)) ||
        !(c.scores = lipi_reallocarray(NULL, (size_t)QUERY_CHUNK * c.kk, sizeof *c.scores)) ||
        !(q = lipi_reallocarray(NULL, (size_t)QUERY_CHUNK * c.dim, sizeof *q))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto fail;
    }

    if ((qvec ? search_vectors(&c, qvec, q, &err)
              : search_texts(&c, &sa, model, &eo, mode, q, &err)) != LIPI_OK)
        goto fail;
    if (cross)
        cli_report_truncated("search", c.truncated, lipi_embedder_max_length(cross));
    rc = cli_finish_output("search");
    goto done;
fail:
    cli_report("search", &err);
done:
    lipi_free(q);
    lipi_free(c.docs);
    lipi_free(c.scores);
    lipi_index_close(idx);
    lipi_embedder_session_free(c.rerank);
    lipi_embedder_free(cross);
    return rc;
}

const cli_command cmd_search = {"search", "find the nearest documents of an index", run};

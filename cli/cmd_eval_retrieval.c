/* `lipi eval-retrieval`: bitext retrieval on line-aligned files, the way
 * LaBSE and MTEB evaluate bitext mining; or, with --index, the recall@k of
 * an index's quantized (or FAISS) search against exact float32 search. */
#include "cli/cli.h"
#include "cli/options.h"

#include <string.h>

#include "cli/retrieval.h"

#define MAX_KS 32

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi eval-retrieval -m MODEL --queries A.txt --docs B.txt [OPTIONS]\n"
            "       lipi eval-retrieval --query-vectors A.npy --doc-vectors B.npy [OPTIONS]\n"
            "       lipi eval-retrieval --index DIR --query-vectors Q.npy [OPTIONS]\n"
            "\n"
            "Bitext retrieval: line i of A translates line i of B. Every line of A is a\n"
            "query against all lines of B (and the other way round), ranked by cosine\n"
            "similarity over exact scores; the match's rank gives P@1 (share ranked\n"
            "first), recall@k (share within the first k) and MRR (mean of 1/rank).\n"
            "Ties rank the lower line first.\n"
            "\n"
            "With --index: recall@k of the index's own search against exact float32\n"
            "search of the same index, for the queries Q.npy (cosine: they are\n"
            "L2-normalized): the share of the exact top k that it returns. FAISS: as\n"
            "loaded; quantized: each way of scoring the query (int8: weights, codes;\n"
            "binary: weights, bits; see lipi search), without rescoring and rescored.\n"
            "\n"
            "Options:\n"
            "  -m, --model MODEL      embeds both files\n"
            "  --queries A.txt        one sentence per line\n"
            "  --docs B.txt           the same number of lines, aligned with A\n"
            "  --query-vectors A.npy  precomputed embeddings instead of text\n"
            "  --doc-vectors B.npy\n"
            "  -k LIST                recall cut-offs, comma-separated (default 1,5,10)\n"
            "  --index DIR            an index (lipi index -o DIR) to measure\n"
            "  --rescore-multiplier M with --index: rescore M x k candidates (default 4)\n"
            "  --format FMT           table (default) or json\n"
            "  --pooling MODE         cls, mean, max or mean_sqrt_len (default: the model's)\n"
            "  --batch N, --max-length N, --threads N   as for lipi index\n"
            "  --invalid MODE         invalid UTF-8: error (default) or replace\n"
            "  -h, --help             show this help\n"
            "\n"
            "Example:\n"
            "  lipi eval-retrieval -m sentence-transformers/LaBSE \\\n"
            "      --queries flores.hin_Deva --docs flores.eng_Latn -k 1,10\n");
}

static bool parse_ks(const char *s, size_t *ks, size_t *nk)
{
    *nk = 0;
    while (*s) {
        char num[24];
        size_t l = strcspn(s, ",");
        if (!l || l >= sizeof num || *nk == MAX_KS)
            return false;
        memcpy(num, s, l);
        num[l] = '\0';
        uint64_t v;
        if (!cli_parse_u64(num, &v) || v == 0 || v > SIZE_MAX / 2)
            return false;
        ks[(*nk)++] = (size_t)v;
        s += l;
        if (*s == ',' && !*++s)
            return false;
    }
    return *nk > 0;
}

/* Embeds every line of path into a new (n, dim) matrix. */
static lipi_status embed_file(const lipi_embedder *e, lipi_embedder_session *s,
                              const char *path, lipi_invalid_mode mode, float **out, size_t *n,
                              lipi_error *err)
{
    cli_text_batch b = {0};
    *out = NULL;
    lipi_status st = cli_text_batch_read(&b, path, mode, err);
    size_t dim = lipi_embedder_dim(e);
    if (st == LIPI_OK && !(*out = lipi_reallocarray(NULL, b.n ? b.n * dim : 1, sizeof **out)))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK)
        st = lipi_embedder_embed(s, b.ptrs, b.lens, b.n, *out, NULL, err);
    *n = b.n;
    cli_text_batch_free(&b);
    if (st != LIPI_OK) {
        lipi_free(*out);
        *out = NULL;
    }
    return st;
}

static void print_json_dir(const char *name, const lipi_retrieval_scores *s, const size_t *ks,
                           size_t nk)
{
    printf("\"%s\":{\"p_at_1\":%.6f,\"mrr\":%.6f,\"recall\":{", name, s->p_at_1, s->mrr);
    for (size_t j = 0; j < nk; j++)
        printf("%s\"%zu\":%.6f", j ? "," : "", ks[j], s->recall[j]);
    printf("}}");
}

static void print_row(const char *dir, const lipi_retrieval_scores *s, size_t nk)
{
    printf("%-8s %8.4f", dir, s->p_at_1);
    for (size_t j = 0; j < nk; j++)
        printf(" %8.4f", s->recall[j]);
    printf(" %8.4f\n", s->mrr);
}

/* What eval-retrieval's own options give. */
typedef struct {
    const char *qa, *db, *va, *vb;   /* --queries --docs --query-vectors --doc-vectors */
    const char *index;               /* --index */
    size_t mult;                     /* --rescore-multiplier */
    size_t ks[MAX_KS], nk;           /* -k */
    bool json;                       /* --format json */
} eval_args;

static int eval_option(int id, const char *arg, void *vea)
{
    eval_args *ea = vea;
    switch (id) {
    case CLI_OPT_QUERIES: ea->qa = arg; break;
    case CLI_OPT_DOCS: ea->db = arg; break;
    case CLI_OPT_QUERY_VECTORS: ea->va = arg; break;
    case CLI_OPT_DOC_VECTORS: ea->vb = arg; break;
    case CLI_OPT_INDEX: ea->index = arg; break;
    case CLI_OPT_RESCORE_MULTIPLIER: {
        uint64_t v;
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 10000)
            return cli_bad_value("eval-retrieval", "--rescore-multiplier", "1..10000", arg);
        ea->mult = (size_t)v;
        break;
    }
    case 'k':
        if (!parse_ks(arg, ea->ks, &ea->nk))
            return cli_bad_value("eval-retrieval", "-k", "positive numbers separated by commas",
                                 arg);
        break;
    case CLI_OPT_FORMAT:
        if (strcmp(arg, "table") == 0)
            ea->json = false;
        else if (strcmp(arg, "json") == 0)
            ea->json = true;
        else
            return cli_bad_value("eval-retrieval", "--format", "table or json", arg);
        break;
    }
    return 0;
}

/* Parses argv into a and ea; returns CLI_GO_ON or the exit code. */
static int parse(int argc, char **argv, cli_args *a, eval_args *ea)
{
    static const struct option opts[] = {
        {"queries", required_argument, NULL, CLI_OPT_QUERIES},
        {"docs", required_argument, NULL, CLI_OPT_DOCS},
        {"query-vectors", required_argument, NULL, CLI_OPT_QUERY_VECTORS},
        {"doc-vectors", required_argument, NULL, CLI_OPT_DOC_VECTORS},
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {"index", required_argument, NULL, CLI_OPT_INDEX},
        {"rescore-multiplier", required_argument, NULL, CLI_OPT_RESCORE_MULTIPLIER},
        {NULL, 0, NULL, 0},
    };
    const cli_spec spec = {"eval-retrieval", help, "k:", opts,
                           CLI_ARG_MODEL | CLI_ARG_POOLING | CLI_ARG_BATCH | CLI_ARG_MAX_LENGTH |
                               CLI_ARG_THREADS | CLI_ARG_INVALID,
                           eval_option, ea, 0};
    int rc = cli_parse(&spec, argc, argv, a);
    if (rc != CLI_GO_ON)
        return rc;
    if (optind < argc)
        return cli_usage_error("eval-retrieval", "unexpected argument '%s'", argv[optind]);
    if (ea->index && (a->model || ea->qa || ea->db || ea->vb || !ea->va))
        return cli_usage_error("eval-retrieval", "--index DIR takes --query-vectors Q.npy alone");
    if (ea->mult && !ea->index)
        return cli_usage_error("eval-retrieval", "--rescore-multiplier needs --index DIR");
    if (ea->index)
        return CLI_GO_ON;
    bool text = a->model || ea->qa || ea->db;
    if (text && (ea->va || ea->vb))
        return cli_usage_error("eval-retrieval",
                               "give either -m MODEL --queries --docs or --query-vectors "
                               "--doc-vectors");
    if (text && (!a->model || !ea->qa || !ea->db))
        return cli_usage_error("eval-retrieval", "give -m MODEL, --queries A.txt and --docs B.txt");
    if (!text && (!ea->va || !ea->vb))
        return cli_usage_error("eval-retrieval",
                               "give -m MODEL --queries A.txt --docs B.txt, or --query-vectors "
                               "A.npy --doc-vectors B.npy");
    return CLI_GO_ON;
}

/* The aligned (n, dim) matrices A and B: embedded from the text files, or
 * mapped from the .npy files; they live until bitext_free. */
typedef struct {
    const char *name_a, *name_b;
    const float *a, *b;
    size_t na, nb, dim;
    lipi_embedder *emb;
    lipi_embedder_session *es;
    lipi_npy_map *ma, *mb;
    float *ea, *eb;
} bitext;

static lipi_status bitext_load(const cli_args *a, const eval_args *ea, bitext *bt,
                               lipi_error *err)
{
    lipi_status st;
    if (a->model) {
        bt->name_a = ea->qa;
        bt->name_b = ea->db;
        if ((st = lipi_embedder_open(a->model, &a->eo, &bt->emb, err)) != LIPI_OK ||
            (st = lipi_embedder_session_new(bt->emb, a->threads, &bt->es, err)) != LIPI_OK ||
            (st = embed_file(bt->emb, bt->es, ea->qa, a->mode, &bt->ea, &bt->na, err)) != LIPI_OK ||
            (st = embed_file(bt->emb, bt->es, ea->db, a->mode, &bt->eb, &bt->nb, err)) != LIPI_OK)
            return st;
        bt->a = bt->ea;
        bt->b = bt->eb;
        bt->dim = lipi_embedder_dim(bt->emb);
    } else {
        bt->name_a = ea->va;
        bt->name_b = ea->vb;
        if ((st = lipi_npy_map_open(ea->va, &bt->ma, err)) != LIPI_OK ||
            (st = lipi_npy_map_open(ea->vb, &bt->mb, err)) != LIPI_OK)
            return st;
        if (lipi_npy_map_cols(bt->ma) != lipi_npy_map_cols(bt->mb))
            return lipi_error_set(err, LIPI_EINVAL, ea->vb, 0, 0,
                                  "expected vectors of dimension %zu like %s, found %zu",
                                  lipi_npy_map_cols(bt->ma), ea->va, lipi_npy_map_cols(bt->mb));
        bt->a = lipi_npy_map_data(bt->ma);
        bt->b = lipi_npy_map_data(bt->mb);
        bt->na = lipi_npy_map_rows(bt->ma);
        bt->nb = lipi_npy_map_rows(bt->mb);
        bt->dim = lipi_npy_map_cols(bt->ma);
    }
    if (bt->na == 0)
        return lipi_error_set(err, LIPI_EINVAL, bt->name_a, 0, 0,
                              "expected at least one sentence to retrieve, found none");
    if (bt->na != bt->nb)
        return lipi_error_set(err, LIPI_EINVAL, bt->name_b, 0, 0,
                              "expected %zu lines aligned with %s, found %zu", bt->na,
                              bt->name_a, bt->nb);
    return LIPI_OK;
}

static void bitext_free(bitext *bt)
{
    lipi_free(bt->ea);
    lipi_free(bt->eb);
    lipi_npy_map_close(bt->ma);
    lipi_npy_map_close(bt->mb);
    lipi_embedder_session_free(bt->es);
    lipi_embedder_free(bt->emb);
}

static void print_scores(const eval_args *ea, const bitext *bt, const lipi_retrieval_scores *ab,
                         const lipi_retrieval_scores *ba)
{
    size_t nk = ea->nk;
    if (ea->json) {
        printf("{\"pairs\":%zu,\"queries\":", bt->na);
        cli_write_json_string(stdout, bt->name_a, strlen(bt->name_a));
        printf(",\"docs\":");
        cli_write_json_string(stdout, bt->name_b, strlen(bt->name_b));
        putchar(',');
        print_json_dir("a_to_b", ab, ea->ks, nk);
        putchar(',');
        print_json_dir("b_to_a", ba, ea->ks, nk);
        printf("}\n");
        return;
    }
    printf("bitext retrieval: %zu pairs, cosine similarity, exact; A = %s, B = %s\n", bt->na,
           bt->name_a, bt->name_b);
    printf("%-8s %8s", "", "P@1");
    for (size_t j = 0; j < nk; j++) {
        char h[32];
        snprintf(h, sizeof h, "R@%zu", ea->ks[j]);
        printf(" %8s", h);
    }
    printf(" %8s\n", "MRR");
    print_row("A -> B", ab, nk);
    print_row("B -> A", ba, nk);
}

/* --index: recall@k of the index's search against exact float32 search,
 * for each k: one row per setting (quantized: each query scoring, the
 * default first, without rescoring and rescored; FAISS: as loaded). */
static int eval_index(const cli_args *a, const eval_args *ea)
{
    int rc = EXIT_FAIL;
    lipi_error err = {0};
    lipi_index *idx = NULL;
    lipi_npy_map *qm = NULL;
    float *q = NULL;
    if (lipi_index_open(ea->index, NULL, &idx, &err) != LIPI_OK ||
        lipi_npy_map_open(ea->va, &qm, &err) != LIPI_OK)
        goto fail;
    size_t nq = lipi_npy_map_rows(qm), dim = lipi_npy_map_cols(qm);
    if (dim != lipi_index_dim(idx)) {
        lipi_error_set(&err, LIPI_EINVAL, ea->va, 0, 0,
                       "expected query vectors of the index's dimension %zu, found %zu",
                       lipi_index_dim(idx), dim);
        goto fail;
    }
    if (!(q = lipi_reallocarray(NULL, nq && dim ? nq * dim : 1, sizeof *q))) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto fail;
    }
    memcpy(q, lipi_npy_map_data(qm), nq * dim * sizeof *q);
    lipi_vectors_normalize(q, nq, dim);
    lipi_quantization qz = lipi_index_quantization(idx);
    const char *spec = lipi_index_faiss_spec(idx);
    char what[128], names[4][128];
    size_t mult = ea->mult ? ea->mult : 4;
    if (lipi_index_has_faiss(idx))
        snprintf(what, sizeof what, "FAISS %s", spec);
    else
        snprintf(what, sizeof what, "%s", qz ? lipi_quantization_name(qz) : "exact float32");
    /* Rows: quantized, for the default query scoring and then the other
     * (int8: weights, codes; binary: weights, bits), without and with
     * rescoring; else the one search. */
    const char *other = qz == LIPI_QUANT_INT8 ? "codes" : "bits";
    const char *thr = qz == LIPI_QUANT_BINARY && !lipi_index_has_faiss(idx)
                          ? lipi_binary_threshold_name(lipi_index_binary_threshold(idx))
                          : NULL;
    size_t rows = qz && !lipi_index_has_faiss(idx) ? 4 : 1;
    snprintf(names[0], sizeof names[0], "%s", rows == 1 ? what : "weights, no rescore");
    snprintf(names[1], sizeof names[1], "weights, rescore x%zu", mult);
    snprintf(names[2], sizeof names[2], "%s, no rescore", other);
    snprintf(names[3], sizeof names[3], "%s, rescore x%zu", other, mult);
    double recall[4][MAX_KS];
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ea->nk; j++) {
            lipi_search_options so = {.threads = a->threads, .no_rescore = rows > 1 && r % 2 == 0,
                                      .rescore_multiplier = r % 2 ? ea->mult : 0,
                                      .int8_query_codes = r >= 2, .binary_query_bits = r >= 2};
            if (lipi_index_recall(idx, q, nq, dim, ea->ks[j], &so, &recall[r][j], &err) !=
                LIPI_OK)
                goto fail;
        }
    if (ea->json) {
        printf("{\"index\":");
        cli_write_json_string(stdout, ea->index, strlen(ea->index));
        printf(",\"search\":\"%s\",", what);
        if (thr)
            printf("\"binary_threshold\":\"%s\",", thr);
        printf("\"documents\":%zu,\"queries\":%zu", lipi_index_count(idx), nq);
        /* The default scoring's rows at the top level, the other's in
         * "query_codes" (int8) or "query_bits" (binary). */
        for (size_t r = 0; r < rows; r++) {
            if (r == 2)
                printf(",\"query_%s\":{", other);
            printf("%s\"%s\":{", r == 2 ? "" : ",",
                   rows == 1 ? "recall" : r % 2 ? "rescored" : "no_rescore");
            if (r % 2)
                printf("\"multiplier\":%zu,", mult);
            for (size_t j = 0; j < ea->nk; j++)
                printf("%s\"%zu\":%.6f", j ? "," : "", ea->ks[j], recall[r][j]);
            putchar('}');
            if (r == 3)
                putchar('}');
        }
        printf("}\n");
    } else {
        printf("recall@k against exact float32: %s (%s%s%s, %zu documents), %zu queries\n",
               ea->index, what, thr ? ", thresholds " : "", thr ? thr : "",
               lipi_index_count(idx), nq);
        printf("%-24s", "");
        for (size_t j = 0; j < ea->nk; j++) {
            char h[32];
            snprintf(h, sizeof h, "R@%zu", ea->ks[j]);
            printf(" %8s", h);
        }
        putchar('\n');
        for (size_t r = 0; r < rows; r++) {
            printf("%-24s", names[r]);
            for (size_t j = 0; j < ea->nk; j++)
                printf(" %8.4f", recall[r][j]);
            putchar('\n');
        }
    }
    rc = cli_finish_output("eval-retrieval");
    goto done;
fail:
    cli_report("eval-retrieval", &err);
done:
    lipi_free(q);
    lipi_npy_map_close(qm);
    lipi_index_close(idx);
    return rc;
}

static int run(int argc, char **argv)
{
    cli_args a = {.mode = LIPI_INVALID_ERROR, .threads = 2, .max_threads = 256,
                  .eo = {.batch = 32}};
    eval_args ea = {.ks = {1, 5, 10}, .nk = 3};
    int rc = parse(argc, argv, &a, &ea);
    if (rc != CLI_GO_ON)
        return rc;
    if (ea.index)
        return eval_index(&a, &ea);

    lipi_error err = {0};
    bitext bt = {0};
    lipi_search_options so = {.threads = a.threads};
    double rab[MAX_KS], rba[MAX_KS];
    lipi_retrieval_scores ab = {.recall = rab}, ba = {.recall = rba};
    if (bitext_load(&a, &ea, &bt, &err) != LIPI_OK ||
        lipi_eval_bitext(bt.a, bt.b, bt.na, bt.dim, ea.ks, ea.nk, &so, &ab, &ba, &err) !=
            LIPI_OK) {
        cli_report("eval-retrieval", &err);
        rc = EXIT_FAIL;
    } else {
        print_scores(&ea, &bt, &ab, &ba);
        rc = cli_finish_output("eval-retrieval");
    }
    bitext_free(&bt);
    return rc;
}

const cli_command cmd_eval_retrieval = {"eval-retrieval",
                                        "bitext retrieval metrics (P@1, recall@k, MRR)", run};

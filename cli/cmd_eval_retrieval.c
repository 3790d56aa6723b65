/* `lipi eval-retrieval`: bitext retrieval on line-aligned files, the way
 * LaBSE and MTEB evaluate bitext mining. */
#include "cli/cli.h"

#include <getopt.h>
#include <string.h>

#include "cli/retrieval.h"

#define MAX_KS 32

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi eval-retrieval -m MODEL --queries A.txt --docs B.txt [OPTIONS]\n"
            "       lipi eval-retrieval --query-vectors A.npy --doc-vectors B.npy [OPTIONS]\n"
            "\n"
            "Bitext retrieval: line i of A translates line i of B. Every line of A is a\n"
            "query against all lines of B (and the other way round), ranked by cosine\n"
            "similarity over exact scores; the match's rank gives P@1 (share ranked\n"
            "first), recall@k (share within the first k) and MRR (mean of 1/rank).\n"
            "Ties rank the lower line first.\n"
            "\n"
            "Options:\n"
            "  -m, --model MODEL      embeds both files\n"
            "  --queries A.txt        one sentence per line\n"
            "  --docs B.txt           the same number of lines, aligned with A\n"
            "  --query-vectors A.npy  precomputed embeddings instead of text\n"
            "  --doc-vectors B.npy\n"
            "  -k LIST                recall cut-offs, comma-separated (default 1,5,10)\n"
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

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"queries", required_argument, NULL, 'Q'},
        {"docs", required_argument, NULL, 'D'},
        {"query-vectors", required_argument, NULL, 'A'},
        {"doc-vectors", required_argument, NULL, 'B'},
        {"format", required_argument, NULL, 'F'},
        {"pooling", required_argument, NULL, 'p'},
        {"batch", required_argument, NULL, 'b'},
        {"max-length", required_argument, NULL, 'L'},
        {"threads", required_argument, NULL, 't'},
        {"invalid", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *model = NULL, *qa = NULL, *db = NULL, *va = NULL, *vb = NULL;
    size_t ks[MAX_KS] = {1, 5, 10}, nk = 3;
    bool json = false;
    lipi_embedder_options eo = {.batch = 32};
    lipi_search_options so = {.threads = 2};
    lipi_invalid_mode mode = LIPI_INVALID_ERROR;
    uint64_t v;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":m:k:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': model = optarg; break;
        case 'Q': qa = optarg; break;
        case 'D': db = optarg; break;
        case 'A': va = optarg; break;
        case 'B': vb = optarg; break;
        case 'k':
            if (!parse_ks(optarg, ks, &nk))
                return cli_usage_error("eval-retrieval",
                                       "-k takes positive numbers separated by commas, not '%s'",
                                       optarg);
            break;
        case 'F':
            if (strcmp(optarg, "table") == 0)
                json = false;
            else if (strcmp(optarg, "json") == 0)
                json = true;
            else
                return cli_usage_error("eval-retrieval", "--format takes table or json, not '%s'",
                                       optarg);
            break;
        case 'p':
            if (!lipi_pooling_parse(optarg, &eo.pooling))
                return cli_usage_error("eval-retrieval",
                                       "--pooling takes cls, mean, max or mean_sqrt_len, not '%s'",
                                       optarg);
            break;
        case 'b':
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 65536)
                return cli_usage_error("eval-retrieval", "--batch takes 1..65536, not '%s'",
                                       optarg);
            eo.batch = (size_t)v;
            break;
        case 'L':
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 1000000)
                return cli_usage_error("eval-retrieval",
                                       "--max-length takes a positive number, not '%s'", optarg);
            eo.max_length = (size_t)v;
            break;
        case 't':
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 256)
                return cli_usage_error("eval-retrieval", "--threads takes 1..256, not '%s'",
                                       optarg);
            so.threads = (size_t)v;
            break;
        case 'i':
            if (!cli_parse_invalid(optarg, &mode))
                return cli_usage_error("eval-retrieval",
                                       "--invalid takes 'error' or 'replace', not '%s'", optarg);
            break;
        case 'h': help(stdout); return EXIT_OK;
        case ':':
            return cli_usage_error("eval-retrieval", "option '%s' needs a value",
                                   argv[optind - 1]);
        default: return cli_usage_error("eval-retrieval", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("eval-retrieval", "unexpected argument '%s'", argv[optind]);
    bool text = model || qa || db;
    if (text && (va || vb))
        return cli_usage_error("eval-retrieval",
                               "give either -m MODEL --queries --docs or --query-vectors "
                               "--doc-vectors");
    if (text && (!model || !qa || !db))
        return cli_usage_error("eval-retrieval", "give -m MODEL, --queries A.txt and --docs B.txt");
    if (!text && (!va || !vb))
        return cli_usage_error("eval-retrieval",
                               "give -m MODEL --queries A.txt --docs B.txt, or --query-vectors "
                               "A.npy --doc-vectors B.npy");

    int rc = EXIT_FAIL;
    lipi_error err = {0};
    lipi_embedder *emb = NULL;
    lipi_embedder_session *es = NULL;
    lipi_npy_map *ma = NULL, *mb = NULL;
    float *ea = NULL, *eb = NULL;
    const float *a, *b;
    size_t na, nb, dim;
    const char *name_a = text ? qa : va, *name_b = text ? db : vb;
    if (text) {
        if (lipi_embedder_open(model, &eo, &emb, &err) != LIPI_OK ||
            lipi_embedder_session_new(emb, so.threads, &es, &err) != LIPI_OK ||
            embed_file(emb, es, qa, mode, &ea, &na, &err) != LIPI_OK ||
            embed_file(emb, es, db, mode, &eb, &nb, &err) != LIPI_OK)
            goto fail;
        a = ea;
        b = eb;
        dim = lipi_embedder_dim(emb);
    } else {
        if (lipi_npy_map_open(va, &ma, &err) != LIPI_OK ||
            lipi_npy_map_open(vb, &mb, &err) != LIPI_OK)
            goto fail;
        if (lipi_npy_map_cols(ma) != lipi_npy_map_cols(mb)) {
            lipi_error_set(&err, LIPI_EINVAL, vb, 0, 0,
                           "expected vectors of dimension %zu like %s, found %zu",
                           lipi_npy_map_cols(ma), va, lipi_npy_map_cols(mb));
            goto fail;
        }
        a = lipi_npy_map_data(ma);
        b = lipi_npy_map_data(mb);
        na = lipi_npy_map_rows(ma);
        nb = lipi_npy_map_rows(mb);
        dim = lipi_npy_map_cols(ma);
    }
    if (na == 0) {
        lipi_error_set(&err, LIPI_EINVAL, name_a, 0, 0,
                       "expected at least one sentence to retrieve, found none");
        goto fail;
    }
    if (na != nb) {
        lipi_error_set(&err, LIPI_EINVAL, name_b, 0, 0,
                       "expected %zu lines aligned with %s, found %zu", na, name_a, nb);
        goto fail;
    }
    double rab[MAX_KS], rba[MAX_KS];
    lipi_retrieval_scores ab = {.recall = rab}, ba = {.recall = rba};
    if (lipi_eval_bitext(a, b, na, dim, ks, nk, &so, &ab, &ba, &err) != LIPI_OK)
        goto fail;
    if (json) {
        printf("{\"pairs\":%zu,\"queries\":", na);
        cli_write_json_string(stdout, name_a, strlen(name_a));
        printf(",\"docs\":");
        cli_write_json_string(stdout, name_b, strlen(name_b));
        putchar(',');
        print_json_dir("a_to_b", &ab, ks, nk);
        putchar(',');
        print_json_dir("b_to_a", &ba, ks, nk);
        printf("}\n");
    } else {
        printf("bitext retrieval: %zu pairs, cosine similarity, exact; A = %s, B = %s\n", na,
               name_a, name_b);
        printf("%-8s %8s", "", "P@1");
        for (size_t j = 0; j < nk; j++) {
            char h[32];
            snprintf(h, sizeof h, "R@%zu", ks[j]);
            printf(" %8s", h);
        }
        printf(" %8s\n", "MRR");
        print_row("A -> B", &ab, nk);
        print_row("B -> A", &ba, nk);
    }
    rc = cli_finish_output("eval-retrieval");
    goto done;
fail:
    cli_report("eval-retrieval", &err);
done:
    lipi_free(ea);
    lipi_free(eb);
    lipi_npy_map_close(ma);
    lipi_npy_map_close(mb);
    lipi_embedder_session_free(es);
    lipi_embedder_free(emb);
    return rc;
}

const cli_command cmd_eval_retrieval = {"eval-retrieval",
                                        "bitext retrieval metrics (P@1, recall@k, MRR)", run};

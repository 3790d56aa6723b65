/* Retrieval: exact top-k against a brute-force reference (ties included),
 * FAISS Flat against exact search, the index directory (append, atomic
 * replacement, interrupted writes, model identity, hostile files) and the
 * bitext metrics on a case worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define _XOPEN_SOURCE_EXTENDED 1
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "retrieval/faiss_bind.h"
#include "tests/alloc_fail.h"
#include "retrieval/index_impl.h"
#include "tests/cli_run.h"
#include "tests/refdata.h"

static char tmp_root[64];

/* Recall@10 of quantized search rescored from 4 x 10 candidates against
 * exact float32 search, on the fixture of the quantized tests (200 random
 * unit vectors of dimension 48, 25 random queries): measured 1.000 (int8;
 * without rescoring 0.980 scoring the query's weights, 0.740 its codes)
 * and 0.880 (binary split at the means, scored with the query's weights;
 * 0.492 without; its bits, split at 0, gave 0.756 and 0.396). 48 bits of
 * random vectors are a weak filter; real embeddings of 384+ dimensions do
 * better (bench/search.sh). */
#define QUANT_INT8_RECALL_BOUND 0.95
#define QUANT_INT8_RAW_RECALL_BOUND 0.93
#define QUANT_BINARY_RECALL_BOUND 0.85

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(void)
{
    return (double)(rng_next() >> 11) / 9007199254740992.0;
}

/* Multiples of 1/8 in [-1, 1]: every dot product of a few dozen of them is
 * exact in float32 whatever the order of the sums, so a GEMM and a plain
 * loop agree to the bit and equal scores really are equal. */
static void fill_eighths(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)(rng_next() % 17) - 8) / 8.0f;
}

static void fill_gauss(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double u = rng_unit() + 1e-12, v = rng_unit();
        x[i] = (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
    }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void rm_tree(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int setup(void **state)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/lipi_test_retrieval_XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int teardown(void **state)
{
    rm_tree(tmp_root);
    return 0;
}

static const char *tmp_path(const char *name)
{
    static char buf[8][400];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 400, "%s/%s", tmp_root, name);
    return p;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    p[n] = '\0';
    *len = (size_t)n;
    return p;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void assert_same_file(const char *a, const char *b)
{
    size_t la, lb;
    char *pa = slurp(a, &la), *pb = slurp(b, &lb);
    assert_non_null(pa);
    assert_non_null(pb);
    if (la != lb || memcmp(pa, pb, la) != 0)
        fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, la, lb);
    free(pa);
    free(pb);
}

typedef struct {
    double s;
    int64_t d;
} ref_hit;

static int ref_cmp(const void *pa, const void *pb)
{
    const ref_hit *a = pa, *b = pb;
    if (a->s != b->s)
        return a->s > b->s ? -1 : 1;
    return a->d < b->d ? -1 : a->d > b->d;
}

/* Brute force: every score in double, a full sort, ties by document. */
static void brute_force(const float *x, size_t n, size_t dim, const float *q, size_t nq,
                        size_t k, int64_t *docs, double *scores)
{
    ref_hit *all = malloc((n ? n : 1) * sizeof *all);
    assert_non_null(all);
    for (size_t i = 0; i < nq; i++) {
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t c = 0; c < dim; c++)
                s += (double)q[i * dim + c] * x[j * dim + c];
            all[j] = (ref_hit){s, (int64_t)j};
        }
        qsort(all, n, sizeof *all, ref_cmp);
        for (size_t j = 0; j < k; j++) {
            docs[i * k + j] = j < n ? all[j].d : -1;
            scores[i * k + j] = j < n ? all[j].s : -INFINITY;
        }
    }
    free(all);
}

static const char *const *text_ptrs(char (*buf)[32], size_t n, size_t first,
                                    const char **ptrs, size_t *lens)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], 32, "document %zu", first + i);
        ptrs[i] = buf[i];
        lens[i] = strlen(buf[i]);
    }
    return ptrs;
}

/* Most tests skip fsync: it is slow on busy disks and they test other
 * things (test_index_round_trip_and_search and the CLI tests sync). */
static const lipi_index_write_options fast = {.no_sync = true};

static const lipi_index_model model_a = {.name = "org/model-a",
                                         .path = "/models/a",
                                         .fingerprint = "00000000000000aa",
                                         .pooling = "mean",
                                         .normalize = true,
                                         .lipi_version = "test"};

/* ======================================================================== */
/* Exact search                                                              */
/* ======================================================================== */

static void test_exact_search_equals_brute_force_with_ties(void **state)
{
    enum { N = 1000, D = 37, NQ = 23, K = 7 };
    rng_state = 42;
    float *x = malloc(sizeof(float) * N * D), q[NQ * D];
    assert_non_null(x);
    fill_eighths(x, N * D);
    fill_eighths(q, NQ * D);
    /* Exact duplicates and a query equal to a document make ties at the
     * top, where the order shows. */
    memcpy(x + 100 * D, x + 5 * D, D * sizeof(float));
    memcpy(x + 700 * D, x + 5 * D, D * sizeof(float));
    memcpy(x + 999 * D, x + 5 * D, D * sizeof(float));
    memcpy(q + 3 * D, x + 5 * D, D * sizeof(float));
    int64_t want_d[NQ * K], got_d[NQ * K];
    double want_s[NQ * K];
    float got_s[NQ * K];
    brute_force(x, N, D, q, NQ, K, want_d, want_s);
    assert_int_equal(want_d[3 * K], 5);
    assert_int_equal(want_d[3 * K + 1], 100);
    assert_int_equal(want_d[3 * K + 2], 700);
    assert_int_equal(want_d[3 * K + 3], 999);
    const lipi_search_options opts[] = {
        {0},
        {.threads = 2},
        {.threads = 3, .block_rows = 96, .gemm_rows = 40, .gemm_queries = 5},
        {.threads = 1, .block_rows = 7, .gemm_rows = 3, .gemm_queries = 1},
        {.threads = 2, .block_rows = 1000, .gemm_rows = 1000, .gemm_queries = 64},
    };
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        lipi_error err = {0};
        assert_int_equal(lipi_knn_search(x, N, D, q, NQ, K, &opts[o], got_d, got_s, &err),
                         LIPI_OK);
        for (size_t i = 0; i < NQ * K; i++) {
            if (got_d[i] != want_d[i] || got_s[i] != (float)want_s[i])
                fail_msg("options %zu, query %zu, rank %zu: got doc %lld score %g, expected "
                         "doc %lld score %g",
                         o, i / K, i % K, (long long)got_d[i], (double)got_s[i],
                         (long long)want_d[i], want_s[i]);
        }
    }
    free(x);
}

static void test_more_hits_asked_than_documents_pad_with_minus_one(void **state)
{
    float x[3 * 2] = {1, 0, 0, 1, 1, 1}, q[2] = {1, 0.5f};
    int64_t d[5];
    float s[5];
    lipi_error err = {0};
    assert_int_equal(lipi_knn_search(x, 3, 2, q, 1, 5, NULL, d, s, &err), LIPI_OK);
    assert_int_equal(d[0], 2);
    assert_int_equal(d[1], 0);
    assert_int_equal(d[2], 1);
    assert_int_equal(d[3], -1);
    assert_int_equal(d[4], -1);
    assert_true(s[0] == 1.5f && s[1] == 1.0f && s[2] == 0.5f);
    assert_true(isinf(s[3]) && s[3] < 0);
    assert_int_equal(lipi_knn_search(x, 0, 2, q, 1, 2, NULL, d, s, &err), LIPI_OK);
    assert_int_equal(d[0], -1);
}

static void test_bad_search_arguments_are_errors(void **state)
{
    float x[4] = {1, 0, 0, 1}, q[2] = {NAN, 0};
    int64_t d[2];
    float s[2];
    lipi_error err = {0};
    assert_int_equal(lipi_knn_search(x, 2, 2, q, 1, 2, NULL, d, s, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "finite"));
    q[0] = 1;
    assert_int_equal(lipi_knn_search(x, 2, 2, q, 1, 0, NULL, d, s, &err), LIPI_EINVAL);
}

/* ======================================================================== */
/* The index directory                                                       */
/* ======================================================================== */

static void test_index_round_trip_and_search(void **state)
{
    enum { N = 500, D = 24, NQ = 9, K = 5 };
    rng_state = 7;
    float *x = malloc(sizeof(float) * N * D), q[NQ * D];
    static char buf[N][32];
    const char *ptrs[N];
    size_t lens[N];
    assert_non_null(x);
    fill_gauss(x, N * D);
    fill_gauss(q, NQ * D);
    const char *dir = tmp_path("round");
    lipi_error err = {0};
    assert_int_equal(lipi_index_create(dir, &model_a, x, N, D,
                                       text_ptrs(buf, N, 1, ptrs, lens), lens, &fast, &err),
                     LIPI_OK);
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_open(dir, NULL, &idx, &err), LIPI_OK);
    assert_int_equal(lipi_index_count(idx), N);
    assert_int_equal(lipi_index_dim(idx), D);
    const lipi_index_model *m = lipi_index_get_model(idx);
    assert_string_equal(m->name, "org/model-a");
    assert_string_equal(m->fingerprint, "00000000000000aa");
    assert_string_equal(m->pooling, "mean");
    assert_true(m->normalize);
    assert_null(lipi_index_faiss_spec(idx));

    /* Stored rows are the inputs, L2-normalized. */
    lipi_npy_map *vm = NULL;
    assert_int_equal(lipi_npy_map_open(tmp_path("round/vectors.npy"), &vm, &err), LIPI_OK);
    assert_int_equal(lipi_npy_map_rows(vm), N);
    assert_int_equal(lipi_npy_map_cols(vm), D);
    const float *stored = lipi_npy_map_data(vm);
    for (size_t i = 0; i < N; i++) {
        double ss = 0;
        for (size_t j = 0; j < D; j++)
            ss += (double)stored[i * D + j] * stored[i * D + j];
        assert_true(fabs(ss - 1) < 1e-5);
    }
    int64_t want_d[NQ * K], got_d[NQ * K];
    double want_s[NQ * K];
    float got_s[NQ * K];
    brute_force(stored, N, D, q, NQ, K, want_d, want_s);
    /* Dropping the pages of each block after use (as large indexes do)
     * changes nothing, also when they are read again. */
    const lipi_search_options opts[] = {{0}, {.release_pages = 1, .block_rows = 128},
                                        {.release_pages = 1, .threads = 2},
                                        {.release_pages = -1}};
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        assert_int_equal(lipi_index_search(idx, q, NQ, D, K, &opts[o], got_d, got_s, &err),
                         LIPI_OK);
        for (size_t i = 0; i < NQ * K; i++) {
            assert_int_equal(got_d[i], want_d[i]);
            assert_true(fabs(got_s[i] - want_s[i]) < 1e-5);
        }
    }
    const char *t;
    size_t tl;
    assert_int_equal(lipi_index_get_text(idx, 0, &t, &tl, &err), LIPI_OK);
    assert_int_equal(tl, strlen("document 1"));
    assert_memory_equal(t, "document 1", tl);
    assert_int_equal(lipi_index_get_text(idx, N - 1, &t, &tl, &err), LIPI_OK);
    assert_memory_equal(t, "document 500", tl);
    assert_int_equal(lipi_index_get_text(idx, N, &t, &tl, &err), LIPI_EINVAL);
    assert_int_equal(lipi_index_search(idx, q, NQ, D + 1, K, NULL, got_d, got_s, &err),
                     LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "dimension"));
    lipi_npy_map_close(vm);
    lipi_index_close(idx);
    free(x);
}

static void test_append_equals_indexing_all_at_once(void **state)
{
    enum { N1 = 300, N2 = 77, D = 16 };
    rng_state = 9;
    float *x = malloc(sizeof(float) * (N1 + N2) * D);
    static char buf[N1 + N2][32];
    const char *ptrs[N1 + N2];
    size_t lens[N1 + N2];
    assert_non_null(x);
    fill_gauss(x, (N1 + N2) * D);
    text_ptrs(buf, N1 + N2, 1, ptrs, lens);
    bool faiss = lipi_faiss_available();
    lipi_index_write_options wo = {.faiss_spec = faiss ? "Flat" : NULL, .no_sync = true};
    lipi_error err = {0};
    const char *all = tmp_path("all"), *parts = tmp_path("parts");
    assert_int_equal(lipi_index_create(all, &model_a, x, N1 + N2, D, ptrs, lens, &wo, &err),
                     LIPI_OK);
    assert_int_equal(lipi_index_create(parts, &model_a, x, N1, D, ptrs, lens, &wo, &err),
                     LIPI_OK);
    /* Append keeps (and extends) the FAISS index without being asked. */
    lipi_index_write_options ap = {.append = true, .no_sync = true};
    assert_int_equal(lipi_index_create(parts, &model_a, x + N1 * D, 50, D, ptrs + N1, lens + N1,
                                       &ap, &err),
                     LIPI_OK);
    assert_int_equal(lipi_index_create(parts, &model_a, x + (N1 + 50) * D, N2 - 50, D,
                                       ptrs + N1 + 50, lens + N1 + 50, &ap, &err),
                     LIPI_OK);
    static const char *const files[] = {"vectors.npy", "texts", "offsets.npy", "meta.json"};
    char a[300], b[300];
    for (size_t i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/%s", all, files[i]);
        snprintf(b, sizeof b, "%s/%s", parts, files[i]);
        assert_same_file(a, b);
    }
    if (faiss) {
        snprintf(a, sizeof a, "%s/faiss.index", all);
        snprintf(b, sizeof b, "%s/faiss.index", parts);
        assert_same_file(a, b);
    }
    /* Appending to a directory that does not exist yet creates it. */
    const char *fresh = tmp_path("fresh");
    assert_int_equal(lipi_index_create(fresh, &model_a, x, N1 + N2, D, ptrs, lens, &ap, &err),
                     LIPI_OK);
    snprintf(a, sizeof a, "%s/vectors.npy", all);
    snprintf(b, sizeof b, "%s/vectors.npy", fresh);
    assert_same_file(a, b);
    free(x);
}

static void test_model_mismatch_is_an_error(void **state)
{
    float x[2 * 4] = {1, 2, 3, 4, 4, 3, 2, 1};
    const char *t[2] = {"a", "b"};
    size_t l[2] = {1, 1};
    lipi_error err = {0};
    const char *dir = tmp_path("models");
    assert_int_equal(lipi_index_create(dir, &model_a, x, 2, 4, t, l, &fast, &err), LIPI_OK);
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_open(dir, NULL, &idx, &err), LIPI_OK);

    lipi_index_model other = model_a;
    other.fingerprint = "00000000000000bb";
    other.name = "org/model-b";
    assert_int_equal(lipi_index_check_model(idx, &other, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "org/model-a"));
    assert_non_null(strstr(err.msg, "org/model-b"));
    /* The same weights under another name (a path instead of a hub name). */
    lipi_index_model renamed = model_a;
    renamed.name = "/home/me/model-a";
    assert_int_equal(lipi_index_check_model(idx, &renamed, &err), LIPI_OK);
    lipi_index_model pooled = model_a;
    pooled.pooling = "cls";
    assert_int_equal(lipi_index_check_model(idx, &pooled, &err), LIPI_EINVAL);
    lipi_index_model unnorm = model_a;
    unnorm.normalize = false;
    assert_int_equal(lipi_index_check_model(idx, &unnorm, &err), LIPI_EINVAL);
    assert_int_equal(lipi_index_check_model(idx, NULL, &err), LIPI_OK);
    lipi_index_close(idx);

    /* Appending with another model or dimension leaves the index as it was. */
    lipi_index_write_options ap = {.append = true, .no_sync = true};
    size_t before_len, after_len;
    char *before = slurp(tmp_path("models/vectors.npy"), &before_len);
    assert_int_equal(lipi_index_create(dir, &other, x, 2, 4, t, l, &ap, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "org/model-b"));
    assert_int_equal(lipi_index_create(dir, &model_a, x, 1, 8, t, l, &ap, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "dimension"));
    lipi_index_model none = {0};
    assert_int_equal(lipi_index_create(dir, &none, x, 2, 4, t, l, &ap, &err), LIPI_EINVAL);
    char *after = slurp(tmp_path("models/vectors.npy"), &after_len);
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    free(before);
    free(after);

    /* An index of precomputed vectors rejects a model's queries. */
    const char *vdir = tmp_path("vectors_only");
    assert_int_equal(lipi_index_create(vdir, &none, x, 2, 4, t, l, &fast, &err), LIPI_OK);
    assert_int_equal(lipi_index_open(vdir, NULL, &idx, &err), LIPI_OK);
    assert_null(lipi_index_get_model(idx)->name);
    assert_int_equal(lipi_index_check_model(idx, &model_a, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "precomputed"));
    assert_int_equal(lipi_index_check_model(idx, &none, &err), LIPI_OK);
    lipi_index_close(idx);
}

static int failing_swap(const char *tmp, const char *dir)
{
    return EIO;
}

/* Names in tmp_root that start with prefix (stale temporary directories). */
static size_t count_prefixed(const char *prefix, bool remove)
{
    DIR *d = opendir(tmp_root);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            n++;
            if (remove)
                rm_tree(tmp_path(e->d_name));
        }
    closedir(d);
    return n;
}

static void test_interrupted_write_leaves_the_old_index(void **state)
{
    enum { D = 8 };
    float x[3 * D];
    rng_state = 3;
    fill_gauss(x, 3 * D);
    const char *t[3] = {"one", "two", "three"};
    size_t l[3] = {3, 3, 5};
    lipi_error err = {0};
    const char *dir = tmp_path("crash");
    assert_int_equal(lipi_index_create(dir, &model_a, x, 2, D, t, l, &fast, &err), LIPI_OK);
    size_t len0;
    char *meta0 = slurp(tmp_path("crash/meta.json"), &len0);

    /* The commit step fails: the old index stays, the new files go. */
    lipi_index_write_options ap = {.append = true, .no_sync = true};
    lipi_index_builder *b = NULL;
    assert_int_equal(lipi_index_builder_new(dir, &model_a, D, &ap, &b, &err), LIPI_OK);
    assert_int_equal(lipi_index_builder_add(b, x + 2 * D, 1, t + 2, l + 2, &err), LIPI_OK);
    assert_int_equal(lipi_index_builder_count(b), 3);
    lipi_index_builder_set_swap(b, failing_swap);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s", lipi_index_builder_get_temp_dir(b));
    struct stat sb;
    assert_int_equal(stat(tmp, &sb), 0);
    assert_int_equal(lipi_index_builder_commit(b, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "unchanged"));
    assert_int_not_equal(stat(tmp, &sb), 0);

    /* The process dies between writing and committing. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lipi_index_builder *cb = NULL;
        lipi_error cerr;
        if (lipi_index_builder_new(dir, &model_a, D, &ap, &cb, &cerr) != LIPI_OK ||
            lipi_index_builder_add(cb, x + 2 * D, 1, t + 2, l + 2, &cerr) != LIPI_OK)
            _exit(1);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(count_prefixed("crash.tmp-", true), 1);

    /* Aborting removes the new directory. */
    assert_int_equal(lipi_index_builder_new(dir, &model_a, D, &ap, &b, &err), LIPI_OK);
    lipi_index_builder_abort(b);
    assert_int_equal(count_prefixed("crash.tmp-", false), 0);

    size_t len1;
    char *meta1 = slurp(tmp_path("crash/meta.json"), &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(meta0, meta1, len0);
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_open(dir, NULL, &idx, &err), LIPI_OK);
    assert_int_equal(lipi_index_count(idx), 2);
    lipi_index_close(idx);
    free(meta0);
    free(meta1);
}

static void test_writing_over_other_files_is_refused(void **state)
{
    float x[2] = {1, 0};
    const char *t[1] = {"text"};
    size_t l[1] = {4};
    lipi_error err = {0};
    /* A directory with the user's files is never replaced. */
    const char *mine = tmp_path("mine");
    assert_int_equal(mkdir(mine, 0755), 0);
    write_bytes(tmp_path("mine/notes.txt"), "keep", 4);
    assert_int_equal(lipi_index_create(mine, &model_a, x, 1, 2, t, l, &fast, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "notes.txt"));
    size_t n;
    char *kept = slurp(tmp_path("mine/notes.txt"), &n);
    assert_non_null(kept);
    free(kept);
    /* Nor is a regular file. */
    const char *file = tmp_path("plain_file");
    write_bytes(file, "x", 1);
    assert_int_equal(lipi_index_create(file, &model_a, x, 1, 2, t, l, &fast, &err), LIPI_EINVAL);
    /* An empty directory and an existing index are replaced. */
    const char *empty = tmp_path("empty");
    assert_int_equal(mkdir(empty, 0755), 0);
    assert_int_equal(lipi_index_create(empty, &model_a, x, 1, 2, t, l, &fast, &err), LIPI_OK);
    float y[4] = {0, 1, 1, 1};
    const char *t2[2] = {"new", "newer"};
    size_t l2[2] = {3, 5};
    assert_int_equal(lipi_index_create(empty, &model_a, y, 2, 2, t2, l2, &fast, &err), LIPI_OK);
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_open(empty, NULL, &idx, &err), LIPI_OK);
    assert_int_equal(lipi_index_count(idx), 2);
    const char *s;
    size_t sl;
    assert_int_equal(lipi_index_get_text(idx, 1, &s, &sl, &err), LIPI_OK);
    assert_memory_equal(s, "newer", 5);
    lipi_index_close(idx);
    assert_int_equal(count_prefixed("empty.tmp-", false), 0);
    /* Texts with newlines and vectors with NaN are refused. */
    const char *bad_t[1] = {"two\nlines"};
    size_t bad_l[1] = {9};
    assert_int_equal(lipi_index_create(tmp_path("nl"), &model_a, x, 1, 2, bad_t, bad_l, &fast,
                                       &err),
                     LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "newline"));
    float nan_x[2] = {NAN, 1};
    assert_int_equal(lipi_index_create(tmp_path("nan"), &model_a, nan_x, 1, 2, t, l, &fast, &err),
                     LIPI_EINVAL);
    assert_int_equal(count_prefixed("nl", false) + count_prefixed("nan", false), 0);
}

static void test_faiss_flat_gives_the_exact_results(void **state)
{
    if (!lipi_faiss_available())
        SKIP_BECAUSE("lipi built without FAISS (no libfaiss-dev)");
    enum { N = 2000, D = 32, NQ = 40, K = 10 };
    rng_state = 11;
    float *x = malloc(sizeof(float) * N * D), q[NQ * D];
    static char buf[N][32];
    const char *ptrs[N];
    size_t lens[N];
    assert_non_null(x);
    fill_gauss(x, N * D);
    fill_gauss(q, NQ * D);
    lipi_error err = {0};
    lipi_index_write_options wo = {.faiss_spec = "Flat", .threads = 2, .no_sync = true};
    const char *dir = tmp_path("faiss_flat");
    assert_int_equal(lipi_index_create(dir, &model_a, x, N, D, text_ptrs(buf, N, 1, ptrs, lens),
                                       lens, &wo, &err),
                     LIPI_OK);
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_open(dir, NULL, &idx, &err), LIPI_OK);
    assert_true(lipi_index_has_faiss(idx));
    assert_string_equal(lipi_index_faiss_spec(idx), "Flat");
    int64_t fd[NQ * K], ed[NQ * K];
    float fs[NQ * K], es[NQ * K];
    lipi_search_options exact = {.exact = true, .threads = 2};
    /* Over 20 queries FAISS scores with BLAS, under 20 with its own loop. */
    size_t counts[2] = {NQ, 3};
    for (size_t c = 0; c < 2; c++) {
        lipi_search_options fo = {.threads = 2};
        assert_int_equal(lipi_index_search(idx, q, counts[c], D, K, &fo, fd, fs, &err),
                         LIPI_OK);
        assert_int_equal(lipi_index_search(idx, q, counts[c], D, K, &exact, ed, es, &err),
                         LIPI_OK);
        for (size_t i = 0; i < counts[c] * K; i++) {
            if (fd[i] != ed[i] || fabsf(fs[i] - es[i]) > 1e-5f)
                fail_msg("query %zu rank %zu: FAISS doc %lld (%g), exact doc %lld (%g)", i / K,
                         i % K, (long long)fd[i], (double)fs[i], (long long)ed[i],
                         (double)es[i]);
        }
    }
    lipi_index_close(idx);
    /* skip_faiss opens the same directory for exact search only. */
    lipi_index_open_options oo = {.skip_faiss = true};
    assert_int_equal(lipi_index_open(dir, &oo, &idx, &err), LIPI_OK);
    assert_false(lipi_index_has_faiss(idx));
    lipi_index_close(idx);
    free(x);
}

static void test_faiss_approximate_indexes_build_and_take_parameters(void **state)
{
    if (!lipi_faiss_available())
        SKIP_BECAUSE("lipi built without FAISS (no libfaiss-dev)");
    enum { N = 1200, D = 16, K = 5 };
    rng_state = 12;
    float *x = malloc(sizeof(float) * N * D);
    assert_non_null(x);
    fill_gauss(x, N * D);
    lipi_error err = {0};
    lipi_faiss *f = NULL;
    assert_int_equal(lipi_faiss_build("IVF8,Flat", x, N, D, 2, &f, &err), LIPI_OK);
    assert_int_equal(lipi_faiss_count(f), N);
    assert_int_equal(lipi_faiss_set_params(f, "nprobe=8", &err), LIPI_OK);
    /* With every list probed, IVF is exact: a row finds itself first. */
    int64_t d[3 * K];
    float s[3 * K];
    assert_int_equal(lipi_faiss_search(f, x, 3, K, 2, d, s, &err), LIPI_OK);
    double self = 0;
    for (size_t j = 0; j < D; j++)
        self += (double)x[j] * x[j];
    assert_true(fabs(s[0] - self) < 1e-3 * self);
    assert_int_equal(lipi_faiss_set_params(f, "efSearch=10", &err), LIPI_EINVAL);
    lipi_faiss_free(f);
    assert_int_equal(lipi_faiss_build("NoSuchIndex", x, N, D, 1, &f, &err), LIPI_EINVAL);
    assert_null(f);
    assert_non_null(strstr(err.msg, "FAISS"));
    assert_int_equal(lipi_faiss_build("IVF4096,Flat", x, 100, D, 1, &f, &err), LIPI_EINVAL);
    assert_int_equal(lipi_faiss_read(tmp_path("no_such.index"), &f, &err), LIPI_EIO);
    write_bytes(tmp_path("junk.index"), "not a faiss index", 17);
    assert_int_equal(lipi_faiss_read(tmp_path("junk.index"), &f, &err), LIPI_EFORMAT);
    free(x);
}

/* ======================================================================== */
/* Hostile files                                                             */
/* ======================================================================== */

/* A .npy file: version 1.0, the dict padded to `pad` total header bytes
 * (0: to 64), then data_len bytes of zeros. */
static void write_npy(const char *path, const char *dict, size_t pad, size_t data_len)
{
    size_t dl = strlen(dict), total = pad ? pad : ((10 + dl + 1 + 63) / 64) * 64;
    unsigned char *p = calloc(1, total + data_len);
    assert_non_null(p);
    memcpy(p, "\x93NUMPY\x01\x00", 8);
    size_t hl = total - 10;
    p[8] = (unsigned char)(hl & 0xff);
    p[9] = (unsigned char)(hl >> 8);
    memset(p + 10, ' ', hl);
    memcpy(p + 10, dict, dl);
    p[total - 1] = '\n';
    write_bytes(path, p, total + data_len);
    free(p);
}

static void test_hostile_npy_headers_are_rejected(void **state)
{
    static const struct {
        const char *dict;
        size_t pad, data;
        lipi_status want;
    } cases[] = {
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 0, 48, LIPI_EFORMAT},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0, 20, LIPI_ETRUNC},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0, 28, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }", 0, 0,
         LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 0, 0,
         LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 1), }", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 0, 4, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, }", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24,
         LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", 0, 24,
         LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} junk", 0, 24, LIPI_EFORMAT},
        {"['descr', '<f4']", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3)}", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}", 0, 24, LIPI_EFORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", 0, 24, LIPI_EFORMAT},
        /* data starting at byte 66: not a multiple of 4 */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 66, 24, LIPI_EFORMAT},
    };
    lipi_error err;
    const char *path = tmp_path("hostile.npy");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy(path, cases[i].dict, cases[i].pad, cases[i].data);
        lipi_npy_map *m = NULL;
        memset(&err, 0, sizeof err);
        lipi_status st = lipi_npy_map_open(path, &m, &err);
        if (st != cases[i].want)
            fail_msg("case %zu (%s): got %s (%s), expected %s", i, cases[i].dict,
                     lipi_status_name(st), err.msg, lipi_status_name(cases[i].want));
        assert_null(m);
        assert_string_equal(err.path, path);
    }
    /* Broken prefixes. */
    static const struct {
        const char *bytes;
        size_t len;
        lipi_status want;
    } raw[] = {
        {"\x93NUMP", 5, LIPI_ETRUNC},
        {"\x93NUMPZ\x01\x00\x10\x00{}", 12, LIPI_EFORMAT},
        {"\x93NUMPY\x09\x00\x10\x00{}", 12, LIPI_EFORMAT},
        {"\x93NUMPY\x01\x00\xff\x7f{}", 12, LIPI_ETRUNC},
        {"\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14, LIPI_ETRUNC},
        {"", 0, LIPI_ETRUNC},
    };
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        write_bytes(path, raw[i].bytes, raw[i].len);
        lipi_npy_map *m = NULL;
        lipi_status st = lipi_npy_map_open(path, &m, &err);
        if (st != raw[i].want)
            fail_msg("raw case %zu: got %s (%s), expected %s", i, lipi_status_name(st), err.msg,
                     lipi_status_name(raw[i].want));
    }
    /* What numpy writes is accepted: 2-D, 1-D (one row), version 2.0, and
     * an empty matrix. */
    lipi_npy_map *m = NULL;
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0, 24);
    assert_int_equal(lipi_npy_map_open(path, &m, &err), LIPI_OK);
    assert_int_equal(lipi_npy_map_rows(m), 2);
    assert_int_equal(lipi_npy_map_cols(m), 3);
    lipi_npy_map_close(m);
    write_npy(path, "{\"shape\": (5,), \"fortran_order\": False, \"descr\": \"<f4\"}", 0, 20);
    assert_int_equal(lipi_npy_map_open(path, &m, &err), LIPI_OK);
    assert_int_equal(lipi_npy_map_rows(m), 1);
    assert_int_equal(lipi_npy_map_cols(m), 5);
    lipi_npy_map_close(m);
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }", 0, 0);
    assert_int_equal(lipi_npy_map_open(path, &m, &err), LIPI_OK);
    assert_int_equal(lipi_npy_map_rows(m), 0);
    lipi_npy_map_close(m);
    unsigned char v2[128 + 8] = "\x93NUMPY\x02\x00";
    const char *d2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    v2[8] = 128 - 12;
    memset(v2 + 12, ' ', 128 - 12);
    memcpy(v2 + 12, d2, strlen(d2));
    v2[127] = '\n';
    memset(v2 + 128, 0, 8);
    write_bytes(path, v2, sizeof v2);
    assert_int_equal(lipi_npy_map_open(path, &m, &err), LIPI_OK);
    assert_int_equal(lipi_npy_map_cols(m), 2);
    lipi_npy_map_close(m);
    assert_int_equal(lipi_npy_map_open(tmp_path("missing.npy"), &m, &err), LIPI_EIO);
}

/* Copies the files of index `src` into `dst` (a fresh directory). */
static void copy_index(const char *src, const char *dst)
{
    static const char *const files[] = {"vectors.npy", "texts", "offsets.npy", "meta.json"};
    rm_tree(dst);
    assert_int_equal(mkdir(dst, 0755), 0);
    for (size_t i = 0; i < 4; i++) {
        char a[300], b[300];
        size_t n;
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dst, files[i]);
        char *p = slurp(a, &n);
        assert_non_null(p);
        write_bytes(b, p, n);
        free(p);
    }
}

static void test_damaged_index_files_are_rejected(void **state)
{
    float x[3 * 2] = {1, 0, 0, 1, 1, 1};
    const char *t[3] = {"a", "bb", "ccc"};
    size_t l[3] = {1, 2, 3};
    lipi_error err = {0};
    const char *good = tmp_path("good"), *bad = tmp_path("bad");
    assert_int_equal(lipi_index_create(good, &model_a, x, 3, 2, t, l, &fast, &err), LIPI_OK);
    lipi_index *idx = NULL;
    char path[300];

    /* meta.json that does not agree with the files, or is not meta. */
    static const struct {
        const char *meta;
        lipi_status want;
        const char *says;
    } metas[] = {
        {"{\"format\": \"lipi-index\", \"version\": 1, \"model\": null, \"pooling\": null, "
         "\"normalize\": true, \"dimension\": 2, \"count\": 4}",
         LIPI_EFORMAT, "shape"},
        {"{\"format\": \"lipi-index\", \"version\": 1, \"model\": null, \"pooling\": null, "
         "\"normalize\": true, \"dimension\": 3, \"count\": 3}",
         LIPI_EFORMAT, "shape"},
        {"{\"format\": \"other\", \"version\": 1}", LIPI_EFORMAT, "format"},
        {"{\"format\": \"lipi-index\", \"version\": 3}", LIPI_EFORMAT, "version"},
        {"{\"format\": \"lipi-index\", \"version\": 1, \"dimension\": \"2\"}", LIPI_EFORMAT,
         "dimension"},
        {"{\"format\": \"lipi-index\", \"version\": 1, \"dimension\": 2, \"count\": -1}",
         LIPI_EFORMAT, "count"},
        {"{\"format\": \"lipi-index\", \"version\": 1, \"dimension\": 2, \"count\": 3, "
         "\"model\": {\"name\": 5}, \"normalize\": true}",
         LIPI_EFORMAT, "model.name"},
        {"[1, 2", LIPI_EFORMAT, "JSON"},
    };
    for (size_t i = 0; i < sizeof metas / sizeof metas[0]; i++) {
        copy_index(good, bad);
        snprintf(path, sizeof path, "%s/meta.json", bad);
        write_bytes(path, metas[i].meta, strlen(metas[i].meta));
        lipi_status st = lipi_index_open(bad, NULL, &idx, &err);
        if (st != metas[i].want || !strstr(err.msg, metas[i].says))
            fail_msg("meta %zu: got %s (%s), expected %s mentioning '%s'", i,
                     lipi_status_name(st), err.msg, lipi_status_name(metas[i].want),
                     metas[i].says);
        assert_null(idx);
    }

    /* texts cut short. */
    copy_index(good, bad);
    snprintf(path, sizeof path, "%s/texts", bad);
    write_bytes(path, "a\nbb\n", 5);
    assert_int_equal(lipi_index_open(bad, NULL, &idx, &err), LIPI_EFORMAT);

    /* offsets that run backwards are caught when the text is looked up. */
    copy_index(good, bad);
    snprintf(path, sizeof path, "%s/offsets.npy", bad);
    size_t n;
    unsigned char *off = (unsigned char *)slurp(path, &n);
    assert_int_equal(n, 128 + 4 * 8);
    off[128 + 8] = 9; /* offset of document 1: 2 -> 9 */
    write_bytes(path, off, n);
    free(off);
    assert_int_equal(lipi_index_open(bad, NULL, &idx, &err), LIPI_OK);
    const char *s;
    size_t sl;
    assert_int_equal(lipi_index_get_text(idx, 0, &s, &sl, &err), LIPI_EFORMAT);
    assert_int_equal(lipi_index_get_text(idx, 1, &s, &sl, &err), LIPI_EFORMAT);
    assert_int_equal(lipi_index_get_text(idx, 2, &s, &sl, &err), LIPI_OK);
    assert_memory_equal(s, "ccc", 3);
    lipi_index_close(idx);
    /* and when it is appended to. */
    lipi_index_write_options ap = {.append = true, .no_sync = true};
    assert_int_equal(lipi_index_create(bad, &model_a, x, 1, 2, t, l, &ap, &err), LIPI_EFORMAT);

    /* A missing file. */
    copy_index(good, bad);
    snprintf(path, sizeof path, "%s/texts", bad);
    unlink(path);
    assert_int_equal(lipi_index_open(bad, NULL, &idx, &err), LIPI_EIO);
    rm_tree(bad);
}

/* ======================================================================== */
/* Bitext metrics                                                            */
/* ======================================================================== */

static void test_bitext_metrics_on_a_hand_made_case(void **state)
{
    /* Ranks by cosine; b's rows normalized keep every comparison below.
     * scores a_i . b_j (rows: queries of A, columns: documents of B):
     *        b0=(2,0) b1=(1,1) b2=(0,3) b3=(1,-1)
     *  a0=(1,0)   2      1       0       1      own 2: rank 1
     *  a1=(0,1)   0      1       3      -1      own 1: b2 above, rank 2
     *  a2=(1,0)   2      1       0       1      own 0: b0 b1 b3 above, rank 4
     *  a3=(0,-1)  0     -1      -3       1      own 1: rank 1
     * B -> A (ties go to the lower document):
     *  b0: (2,0,2,0) own 2, a2 ties but comes later: rank 1
     *  b1: (1,1,1,-1) own 1, a0 ties and comes first: rank 2
     *  b2: (0,3,0,-3) own 0, a1 above, a0 ties first: rank 3
     *  b3: (1,-1,1,1) own 1, a0 and a2 tie first: rank 3 */
    const float a[8] = {1, 0, 0, 1, 1, 0, 0, -1};
    const float b[8] = {2, 0, 1, 1, 0, 3, 1, -1};
    const size_t ks[4] = {1, 2, 3, 5};
    double rab[4], rba[4];
    lipi_retrieval_scores ab = {.recall = rab}, ba = {.recall = rba};
    const lipi_search_options opts[] = {{0}, {.threads = 2, .gemm_queries = 1},
                                        {.threads = 3, .gemm_queries = 3}};
    for (size_t o = 0; o < 3; o++) {
        lipi_error err = {0};
        size_t ranks[4];
        assert_int_equal(lipi_bitext_ranks(a, b, 4, 2, &opts[o], ranks, &err), LIPI_OK);
        assert_int_equal(ranks[0], 1);
        assert_int_equal(ranks[1], 2);
        assert_int_equal(ranks[2], 4);
        assert_int_equal(ranks[3], 1);
        assert_int_equal(lipi_eval_bitext(a, b, 4, 2, ks, 4, &opts[o], &ab, &ba, &err),
                         LIPI_OK);
        assert_true(fabs(ab.p_at_1 - 0.5) < 1e-12);
        assert_true(fabs(ab.mrr - 0.6875) < 1e-12);
        assert_true(fabs(rab[0] - 0.5) < 1e-12 && fabs(rab[1] - 0.75) < 1e-12 &&
                    fabs(rab[2] - 0.75) < 1e-12 && fabs(rab[3] - 1) < 1e-12);
        assert_true(fabs(ba.p_at_1 - 0.25) < 1e-12);
        assert_true(fabs(ba.mrr - (1 + 0.5 + 1.0 / 3 + 1.0 / 3) / 4) < 1e-12);
        assert_true(fabs(rba[0] - 0.25) < 1e-12 && fabs(rba[1] - 0.5) < 1e-12 &&
                    fabs(rba[2] - 1) < 1e-12 && fabs(rba[3] - 1) < 1e-12);
    }
}

static void test_bitext_ranks_equal_brute_force(void **state)
{
    enum { N = 301, D = 19 };
    rng_state = 5;
    float *a = malloc(sizeof(float) * N * D), *b = malloc(sizeof(float) * N * D);
    assert_non_null(a);
    assert_non_null(b);
    fill_eighths(a, N * D);
    fill_eighths(b, N * D);
    memcpy(b + 17 * D, b + 16 * D, D * sizeof(float));
    size_t want[N], got[N];
    for (size_t i = 0; i < N; i++) {
        double own = 0;
        for (size_t c = 0; c < D; c++)
            own += (double)a[i * D + c] * b[i * D + c];
        want[i] = 1;
        for (size_t j = 0; j < N; j++) {
            double s = 0;
            for (size_t c = 0; c < D; c++)
                s += (double)a[i * D + c] * b[j * D + c];
            want[i] += s > own || (s == own && j < i);
        }
    }
    lipi_search_options o = {.threads = 2, .gemm_queries = 64};
    lipi_error err = {0};
    assert_int_equal(lipi_bitext_ranks(a, b, N, D, &o, got, &err), LIPI_OK);
    for (size_t i = 0; i < N; i++)
        if (got[i] != want[i])
            fail_msg("query %zu: rank %zu, expected %zu", i, got[i], want[i]);
    free(a);
    free(b);
}


/* ======================================================================== */
/* The commands                                                              */
/* ======================================================================== */

static void test_cli_index_search_and_append_with_vectors(void **state)
{
    /* Six documents on the axes of R^3 and between them; queries pick them
     * out exactly. */
    const float docs[6 * 3] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 2, 2, 3, 0, 0};
    const float queries[2 * 3] = {0, 0, 5, 1, 0.1f, 0};
    lipi_error err = {0};
    char cmd[2048];
    static const char *const files[][2] = {
        {"cli_docs.txt", "east\nnorth\nup\nnorth-east\nnorth-up\nEAST\n"},
        {"cli_first.txt", "east\nnorth\nup\n"},
        {"cli_rest.txt", "north-east\nnorth-up\nEAST\n"},
    };
    for (size_t i = 0; i < 3; i++)
        write_bytes(tmp_path(files[i][0]), files[i][1], strlen(files[i][1]));
    assert_int_equal(lipi_npy_write(tmp_path("cli_docs.npy"), docs, 6, 3, &err), LIPI_OK);
    assert_int_equal(lipi_npy_write(tmp_path("cli_first.npy"), docs, 3, 3, &err), LIPI_OK);
    assert_int_equal(lipi_npy_write(tmp_path("cli_rest.npy"), docs + 9, 3, 3, &err), LIPI_OK);
    assert_int_equal(lipi_npy_write(tmp_path("cli_q.npy"), queries, 2, 3, &err), LIPI_OK);

    snprintf(cmd, sizeof cmd, "index --quiet --vectors %s -o %s %s", tmp_path("cli_docs.npy"),
             tmp_path("cli_all"), tmp_path("cli_docs.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);

    snprintf(cmd, sizeof cmd, "search --index %s --query-vectors %s -k 2", tmp_path("cli_all"),
             tmp_path("cli_q.npy"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    /* Ties (east and EAST score the same) go to the earlier line. */
    assert_string_equal(r.out, "1\t1\t3\t1.000000\tup\n"
                               "1\t2\t5\t0.707107\tnorth-up\n"
                               "2\t1\t1\t0.995037\teast\n"
                               "2\t2\t6\t0.995037\tEAST\n");
    cli_result_free(&r);

    snprintf(cmd, sizeof cmd, "search --index %s --query-vectors %s -k 1 --format jsonl",
             tmp_path("cli_all"), tmp_path("cli_q.npy"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out,
                        "{\"query_no\":1,\"rank\":1,\"doc_no\":3,\"score\":1.000000,\"text\":\"up\"}\n"
                        "{\"query_no\":2,\"rank\":1,\"doc_no\":1,\"score\":0.995037,\"text\":\"east\"}\n");
    cli_result_free(&r);

    /* Index in two parts with --append: the same files. */
    snprintf(cmd, sizeof cmd,
             "index --quiet --vectors %s -o %s %s && "
             "$LIPI_BIN index --quiet --append --vectors %s -o %s %s",
             tmp_path("cli_first.npy"), tmp_path("cli_parts"), tmp_path("cli_first.txt"),
             tmp_path("cli_rest.npy"), tmp_path("cli_parts"), tmp_path("cli_rest.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    assert_same_file(tmp_path("cli_all/vectors.npy"), tmp_path("cli_parts/vectors.npy"));
    assert_same_file(tmp_path("cli_all/texts"), tmp_path("cli_parts/texts"));

    /* A FAISS index built by the command serves the same hits: Flat, and
     * IVF with every list probed. */
    if (lipi_faiss_available()) {
        static const char *const specs[][2] = {{"Flat", ""}, {"IVF2,Flat", "--faiss-params nprobe=2"}};
        for (size_t i = 0; i < 2; i++) {
            snprintf(cmd, sizeof cmd,
                     "index --quiet --faiss %s --vectors %s -o %s %s && "
                     "$LIPI_BIN search --index %s %s --query-vectors %s -k 1",
                     specs[i][0], tmp_path("cli_docs.npy"), tmp_path("cli_faiss"),
                     tmp_path("cli_docs.txt"), tmp_path("cli_faiss"), specs[i][1],
                     tmp_path("cli_q.npy"));
            r = cli_run(cmd, NULL, 0);
            assert_int_equal(r.code, 0);
            assert_string_equal(r.out, "1\t1\t3\t1.000000\tup\n2\t1\t1\t0.995037\teast\n");
            cli_result_free(&r);
        }
        char meta[400];
        snprintf(meta, sizeof meta, "%s/meta.json", tmp_path("cli_faiss"));
        size_t n;
        char *m = slurp(meta, &n);
        assert_non_null(strstr(m, "\"faiss\": \"IVF2,Flat\""));
        free(m);
    }

    /* Rows and lines must agree. */
    snprintf(cmd, sizeof cmd, "index --quiet --vectors %s -o %s %s", tmp_path("cli_first.npy"),
             tmp_path("cli_bad"), tmp_path("cli_docs.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "row for every input line"));
    cli_result_free(&r);
    /* Text queries need the index's model; this one has none. */
    snprintf(cmd, sizeof cmd, "search --index %s --query hello", tmp_path("cli_all"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "precomputed"));
    cli_result_free(&r);
    r = cli_run("search --query hello", NULL, 0);
    assert_int_equal(r.code, 2);
    cli_result_free(&r);
}

static void test_cli_eval_retrieval_on_the_hand_made_case(void **state)
{
    const float a[8] = {1, 0, 0, 1, 1, 0, 0, -1};
    const float b[8] = {2, 0, 1, 1, 0, 3, 1, -1};
    lipi_error err = {0};
    assert_int_equal(lipi_npy_write(tmp_path("eval_a.npy"), a, 4, 2, &err), LIPI_OK);
    assert_int_equal(lipi_npy_write(tmp_path("eval_b.npy"), b, 4, 2, &err), LIPI_OK);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "eval-retrieval --query-vectors %s --doc-vectors %s -k 1,2 --format json",
             tmp_path("eval_a.npy"), tmp_path("eval_b.npy"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"pairs\":4"));
    assert_non_null(strstr(r.out, "\"a_to_b\":{\"p_at_1\":0.500000,\"mrr\":0.687500,"
                                  "\"recall\":{\"1\":0.500000,\"2\":0.750000}}"));
    assert_non_null(strstr(r.out, "\"b_to_a\":{\"p_at_1\":0.250000,\"mrr\":0.541667,"
                                  "\"recall\":{\"1\":0.250000,\"2\":0.500000}}"));
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "eval-retrieval --query-vectors %s --doc-vectors %s -k 1,,2",
             tmp_path("eval_a.npy"), tmp_path("eval_b.npy"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 2);
    cli_result_free(&r);
}

/* A model folder for the commands: the st_mean fixture (a tiny random
 * sentence-transformers BERT with mean pooling) plus a WordPiece vocab.txt
 * of its 100 ids. `extra` changes the vocabulary (and the fingerprint). */
static bool make_model(const char *dir, const char *extra)
{
    static const char *const files[] = {"config.json", "model.safetensors", "modules.json",
                                        "sentence_bert_config.json", "1_Pooling/config.json"};
    char a[512], b[512];
    if (mkdir(dir, 0755) != 0)
        return false;
    snprintf(b, sizeof b, "%s/1_Pooling", dir);
    mkdir(b, 0755);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t n;
        snprintf(a, sizeof a, "tests/fixtures/models/st_mean/%s", files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        char *p = slurp(a, &n);
        if (!p)
            return false;
        write_bytes(b, p, n);
        free(p);
    }
    static const char *const words[] = {
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on",
        "mat", "ran", "in", "park", "red", "blue", "sun", "moon", "king", "queen", "reads",
        "book", "eats", "river", "tree", "##s", "##ed"};
    snprintf(b, sizeof b, "%s/vocab.txt", dir);
    FILE *f = fopen(b, "w");
    assert_non_null(f);
    size_t n = sizeof words / sizeof words[0];
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", words[i]);
    for (size_t i = n; i < 100; i++)
        fprintf(f, "%s%zu\n", extra, i);
    fclose(f);
    return true;
}

static void test_cli_with_a_model_folder(void **state)
{
    /* tmp_path's buffers rotate: keep copies. */
    char model[400], other[400];
    snprintf(model, sizeof model, "%s", tmp_path("model_a"));
    snprintf(other, sizeof other, "%s", tmp_path("model_b"));
    assert_true(make_model(model, "w"));
    assert_true(make_model(other, "v"));
    const char *docs = "the cat sat on the mat\nthe dog ran in the park\nred sun\n"
                       "blue moon\nthe king reads a book\nthe queen eats\n";
    write_bytes(tmp_path("m_docs.txt"), docs, strlen(docs));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "index --quiet -m %s -o %s %s", model, tmp_path("m_idx"),
             tmp_path("m_docs.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);

    /* A document's own text finds it first, with the index's model by
     * default and when named. */
    snprintf(cmd, sizeof cmd, "search --index %s --query 'the dog ran in the park' -k 1",
             tmp_path("m_idx"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "1\t1\t2\t1.000000\tthe dog ran in the park\n");
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "search --index %s -m %s --queries - -k 1", tmp_path("m_idx"),
             model);
    r = cli_run(cmd, "blue moon\nthe queen eats\n", 25);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "1\t1\t4\t1.000000\tblue moon\n2\t1\t6\t1.000000\tthe queen eats\n");
    cli_result_free(&r);

    /* Another model is an error, for search and for append. */
    snprintf(cmd, sizeof cmd, "search --index %s -m %s --query 'red sun'", tmp_path("m_idx"),
             other);
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "not model"));
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "index --quiet --append -m %s -o %s %s", other, tmp_path("m_idx"),
             tmp_path("m_docs.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    cli_result_free(&r);

    /* Bitext on a file against itself: every line finds itself. */
    snprintf(cmd, sizeof cmd, "eval-retrieval -m %s --queries %s --docs %s -k 1 --format json",
             model, tmp_path("m_docs.txt"), tmp_path("m_docs.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"a_to_b\":{\"p_at_1\":1.000000,\"mrr\":1.000000"));
    cli_result_free(&r);
}

/* Every tokenizer file is part of the model: adding or changing
 * merges.txt, vocab.json or tokenizer.model gives another fingerprint, and
 * an index built before refuses the folder. */
static void test_fingerprint_covers_every_tokenizer_file(void **state)
{
    char model[400], idx[400], cmd[2048];
    snprintf(model, sizeof model, "%s", tmp_path("fp_model"));
    snprintf(idx, sizeof idx, "%s", tmp_path("fp_idx"));
    assert_true(make_model(model, "w"));
    static const char *const files[] = {"merges.txt", "vocab.json", "tokenizer.model"};
    char before[17], after[17], path[512];
    lipi_error err;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", model, files[i]);
        assert_int_equal(lipi_index_model_fingerprint(model, before, &err), LIPI_OK);
        write_bytes(path, "a b\n", 4);
        assert_int_equal(lipi_index_model_fingerprint(model, after, &err), LIPI_OK);
        assert_string_not_equal(before, after);
        memcpy(before, after, sizeof before);
        write_bytes(path, "a c\n", 4);
        assert_int_equal(lipi_index_model_fingerprint(model, after, &err), LIPI_OK);
        assert_string_not_equal(before, after);
    }

    const char *docs = "the cat sat on the mat\nred sun\n";
    write_bytes(tmp_path("fp_docs.txt"), docs, strlen(docs));
    snprintf(cmd, sizeof cmd, "index --quiet -m %s -o %s %s", model, idx, tmp_path("fp_docs.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    snprintf(path, sizeof path, "%s/merges.txt", model);
    write_bytes(path, "a d\n", 4);
    snprintf(cmd, sizeof cmd, "search --index %s -m %s --query 'red sun'", idx, model);
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "not model"));
    cli_result_free(&r);
}

/* ======================================================================== */
/* Allocation failures                                                       */
/* ======================================================================== */

enum { AF_N = 40, AF_D = 8 };

typedef struct {
    float x[AF_N * AF_D], q[2 * AF_D];
    const char *ptrs[AF_N];
    size_t lens[AF_N];
    char dir[400];
} af_job;

/* Builds, appends to, opens and searches an index, and ranks a bitext. */
static lipi_status index_run(void *ctx, lipi_error *err)
{
    const af_job *j = ctx;
    enum { N = AF_N, D = AF_D };
    lipi_index_write_options wo = {.no_sync = true},
                             ap = {.append = true, .no_sync = true, .quantize = LIPI_QUANT_INT8};
    lipi_status st = lipi_index_create(j->dir, &model_a, j->x, N / 2, D, j->ptrs, j->lens, &wo, err);
    if (st == LIPI_OK)
        st = lipi_index_create(j->dir, &model_a, j->x + N / 2 * D, N / 2, D, j->ptrs + N / 2,
                               j->lens + N / 2, &ap, err);
    lipi_index *idx = NULL;
    int64_t d[2 * 3];
    float s[2 * 3];
    size_t ranks[N];
    lipi_search_options so = {.threads = 2, .block_rows = 16};
    if (st == LIPI_OK)
        st = lipi_index_open(j->dir, NULL, &idx, err);
    if (st == LIPI_OK)
        st = lipi_index_search(idx, j->q, 2, D, 3, &so, d, s, err);
    lipi_search_options ex = {.exact = true};
    if (st == LIPI_OK)
        st = lipi_index_search(idx, j->q, 2, D, 3, &ex, d, s, err);
    if (st == LIPI_OK)
        st = lipi_bitext_ranks(j->x, j->x, N, D, &so, ranks, err);
    lipi_index_close(idx);
    if (st == LIPI_OK)
        assert_int_equal(ranks[7], 1);
    assert_int_equal(count_prefixed("alloc.tmp-", false), 0);
    return st;
}

/* The held-out draw marks exactly n_held rows and depends only on n, n_held
 * and the seed. */
static void test_probe_holdout_marks_the_same_rows_for_the_same_seed(void **state)
{
    (void)state;
    enum { N = 50 };
    bool a[N], b[N], c[N];
    lipi_error err = {0};
    assert_int_equal(lipi_probe_holdout(N, 5, 42, a, &err), LIPI_OK);
    assert_int_equal(lipi_probe_holdout(N, 5, 42, b, &err), LIPI_OK);
    assert_int_equal(lipi_probe_holdout(N, 5, 7, c, &err), LIPI_OK);
    size_t held = 0, same_as_other_seed = 0;
    for (size_t i = 0; i < N; i++) {
        held += a[i];
        assert_int_equal(a[i], b[i]);
        same_as_other_seed += a[i] && c[i];
    }
    assert_int_equal(held, 5);
    assert_true(same_as_other_seed < 5);
}

/* ------------------------------------------------------------------------ */
/* lipi_probe_fit                                                            */
/* ------------------------------------------------------------------------ */

enum { FIT_N = 24 };

/* FIT_N 2-D points of three labels given in the order south, north, east
 * (not sorted), each around its own corner: separable. */
static void fit_rows(float *x, const char **labels)
{
    static const char *const names[] = {"south", "north", "east"};
    static const float at[][2] = {{0, -4}, {0, 4}, {4, 0}};
    for (size_t i = 0; i < FIT_N; i++) {
        labels[i] = names[i % 3];
        x[2 * i] = at[i % 3][0] + 0.1f * (float)(i % 5);
        x[2 * i + 1] = at[i % 3][1] - 0.1f * (float)(i % 4);
    }
}

static lipi_status fit_run(void *ctx, lipi_error *err)
{
    float x[2 * FIT_N];
    const char *labels[FIT_N];
    fit_rows(x, labels);
    lipi_labelled_vectors tr = {x, labels, FIT_N, "train.tsv", NULL};
    lipi_probe_fit_options o = {.holdout = 0.25, .seed = 42};
    lipi_probe *p = NULL;
    lipi_status st = lipi_probe_fit(&tr, NULL, 2, &o, &p, NULL, err);
    lipi_probe_free(p);
    return st;
}

static void test_probe_fit_sorts_the_labels_and_holds_out_a_seeded_draw(void **state)
{
    (void)state;
    float x[2 * FIT_N], pa[3 * FIT_N], pb[3 * FIT_N];
    const char *labels[FIT_N];
    fit_rows(x, labels);
    lipi_labelled_vectors tr = {x, labels, FIT_N, "train.tsv", NULL};
    lipi_probe_fit_options o = {.holdout = 0.25, .seed = 42};
    lipi_probe_fit_report r = {0};
    lipi_probe *p = NULL, *q = NULL;
    lipi_error err = {0};

    assert_int_equal(lipi_probe_fit(&tr, NULL, 2, &o, &p, &r, &err), LIPI_OK);
    assert_int_equal(lipi_probe_label_count(p), 3);
    assert_string_equal(lipi_probe_label(p, 0), "east");
    assert_string_equal(lipi_probe_label(p, 1), "north");
    assert_string_equal(lipi_probe_label(p, 2), "south");
    assert_int_equal(r.k, 3);
    assert_int_equal(r.scored_on, LIPI_PROBE_SCORED_ON_HELD_OUT);
    assert_int_equal(r.n_held, 6);  /* 24 * 0.25 */
    assert_int_equal(r.n_train, 18);
    assert_true(r.accuracy == 1.0); /* separable corners */
    lipi_probe_predict(p, x, FIT_N, pa); /* to compare fits */

    /* The same seed: the same rows held out, the same probe bit for bit. */
    assert_int_equal(lipi_probe_fit(&tr, NULL, 2, &o, &q, &r, &err), LIPI_OK);
    lipi_probe_predict(q, x, FIT_N, pb);
    assert_memory_equal(pa, pb, sizeof pa);
    lipi_probe_free(q);
    /* Another seed trains on other rows, so the weights differ. */
    o.seed = 7;
    assert_int_equal(lipi_probe_fit(&tr, NULL, 2, &o, &q, &r, &err), LIPI_OK);
    lipi_probe_predict(q, x, FIT_N, pb);
    assert_memory_not_equal(pa, pb, sizeof pa);
    lipi_probe_free(q);

    /* Nothing held out: scored on all the training rows. */
    o.holdout = 0;
    assert_int_equal(lipi_probe_fit(&tr, NULL, 2, &o, &q, &r, &err), LIPI_OK);
    assert_int_equal(r.scored_on, LIPI_PROBE_SCORED_ON_TRAINING);
    assert_int_equal(r.n_held, 0);
    assert_int_equal(r.n_train, FIT_N);
    lipi_probe_free(q);

    /* A dev set replaces the held-out draw: all rows train. */
    o.holdout = 0.25;
    const char *dev_labels[] = {"east", "south"};
    float xd[] = {4, 0.2f, 0.1f, -4};
    lipi_labelled_vectors dv = {xd, dev_labels, 2, "dev.tsv", NULL};
    assert_int_equal(lipi_probe_fit(&tr, &dv, 2, &o, &q, &r, &err), LIPI_OK);
    assert_int_equal(r.scored_on, LIPI_PROBE_SCORED_ON_DEV);
    assert_int_equal(r.n_held, 2);
    assert_int_equal(r.n_train, FIT_N);
    assert_true(r.accuracy == 1.0);
    lipi_probe_free(q);
    lipi_probe_free(p);
}

static void test_probe_fit_refuses_unknown_dev_labels_and_a_single_label(void **state)
{
    (void)state;
    float x[2 * FIT_N];
    const char *labels[FIT_N];
    fit_rows(x, labels);
    lipi_labelled_vectors tr = {x, labels, FIT_N, "train.tsv", NULL};
    lipi_probe_fit_options o = {.holdout = 0.1, .seed = 42};
    lipi_probe *p = NULL;
    lipi_error err = {0};

    /* The dev error names the dev file and the row's line. */
    const char *dev_labels[] = {"east", "west"};
    size_t dev_lines[] = {3, 8};
    float xd[4] = {0};
    lipi_labelled_vectors dv = {xd, dev_labels, 2, "dev.tsv", dev_lines};
    assert_int_equal(lipi_probe_fit(&tr, &dv, 2, &o, &p, NULL, &err), LIPI_EINVAL);
    assert_null(p);
    assert_string_equal(err.path, "dev.tsv");
    assert_int_equal(err.line, 8);
    assert_string_equal(err.msg, "label 'west' does not occur in train.tsv");
    /* The check alone finds it too, without vectors; no line numbers:
     * the row's 1-based index. */
    memset(&err, 0, sizeof err);
    dv.x = NULL;
    dv.line_no = NULL;
    assert_int_equal(lipi_probe_fit_check(&tr, &dv, &o, &err), LIPI_EINVAL);
    assert_int_equal(err.line, 2);
    dev_labels[1] = "north";
    assert_int_equal(lipi_probe_fit_check(&tr, &dv, &o, &err), LIPI_OK);

    /* One label, however many rows. */
    const char *same[FIT_N];
    for (size_t i = 0; i < FIT_N; i++)
        same[i] = "north";
    lipi_labelled_vectors one = {x, same, FIT_N, "one.tsv", NULL};
    assert_int_equal(lipi_probe_fit(&one, NULL, 2, &o, &p, NULL, &err), LIPI_EINVAL);
    assert_null(p);
    assert_string_equal(err.path, "one.tsv");
    assert_string_equal(err.msg, "expected at least 2 different labels, found 1");

    /* A share that leaves nothing to train on. */
    lipi_labelled_vectors two = {x, labels, 2, "two.tsv", NULL};
    o.holdout = 0.9;
    assert_int_equal(lipi_probe_fit(&two, NULL, 2, &o, &p, NULL, &err), LIPI_EINVAL);
    assert_null(p);
    assert_string_equal(err.msg, "--holdout 0.9 leaves no training lines of 2");

    assert_true(alloc_fail_loop("probe fit", fit_run, NULL) > 5);
}

/* ======================================================================== */
/* Quantized indexes                                                         */
/* ======================================================================== */

/* The fixture of the quantized tests: QN random unit vectors (Gaussian,
 * seed 2024) of dimension QD, rows 17 and 150 copies of row 3 (ties), and
 * QNQ random queries, the first of them row 3 itself. */
enum { QN = 200, QD = 48, QNQ = 25, QK = 10 };

static void quant_fixture(float *x, float *q)
{
    rng_state = 2024;
    fill_gauss(x, QN * QD);
    fill_gauss(q, QNQ * QD);
    memcpy(x + 17 * QD, x + 3 * QD, QD * sizeof(float));
    memcpy(x + 150 * QD, x + 3 * QD, QD * sizeof(float));
    memcpy(q, x + 3 * QD, QD * sizeof(float));
    for (size_t i = 0; i < QNQ; i++) {
        double ss = 0;
        for (size_t j = 0; j < QD; j++)
            ss += (double)q[i * QD + j] * q[i * QD + j];
        for (size_t j = 0; j < QD; j++)
            q[i * QD + j] = (float)(q[i * QD + j] / sqrt(ss));
    }
}

static void quant_index_at(const char *name, const float *x, lipi_quantization qz,
                           lipi_binary_threshold bt)
{
    static char buf[QN][32];
    const char *ptrs[QN];
    size_t lens[QN];
    lipi_index_write_options wo = {.no_sync = true, .quantize = qz, .binary_threshold = bt};
    lipi_error err = {0};
    if (lipi_index_create(tmp_path(name), &model_a, x, QN, QD, text_ptrs(buf, QN, 1, ptrs, lens),
                          lens, &wo, &err) != LIPI_OK)
        fail_msg("%s: %s", name, err.msg);
}

static void quant_index(const char *name, const float *x, lipi_quantization qz)
{
    quant_index_at(name, x, qz, LIPI_BINARY_THRESHOLD_DEFAULT);
}

/* The reference codes, written out from sentence-transformers'
 * quantize_embeddings: int8 = ((x - min) / ((max - min) / 255) - 128)
 * .astype(int8) in float32 with min/max over the rows (queries clamped),
 * binary = packbits(x > t) with t = 0 there (lo: the thresholds here,
 * NULL for 0). Row i of codes has rb bytes. */
static void ref_codes(lipi_quantization qz, const float *x, size_t n, const float *lo,
                      const float *hi, unsigned char *codes)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < QD; j++) {
            float v = x[i * QD + j];
            if (qz == LIPI_QUANT_INT8) {
                float t = (v - lo[j]) / ((hi[j] - lo[j]) / 255.0f) - 128.0f;
                t = t < -128 ? -128 : t > 127 ? 127 : t;
                codes[i * QD + j] = (unsigned char)(int8_t)t;
            } else {
                if (j % 8 == 0)
                    codes[i * (QD / 8) + j / 8] = 0;
                codes[i * (QD / 8) + j / 8] |= (unsigned char)((v > (lo ? lo[j] : 0)) << (7 - j % 8));
            }
        }
}

/* The reference int8 query weights (lipi_quantization, the default int8
 * search): w_j = q_j * (hi_j - lo_j) / 255 in float32, scaled by
 * 127 / max |w_j| and rounded half away from zero. */
static void ref_weights(const float *q, size_t n, const float *lo, const float *hi,
                        unsigned char *w)
{
    for (size_t i = 0; i < n; i++) {
        float amax = 0;
        for (size_t j = 0; j < QD; j++)
            amax = fmaxf(amax, fabsf(q[i * QD + j] * ((hi[j] - lo[j]) / 255.0f)));
        for (size_t j = 0; j < QD; j++) {
            float t = roundf(q[i * QD + j] * ((hi[j] - lo[j]) / 255.0f) * (127.0f / amax));
            w[i * QD + j] = (unsigned char)(int8_t)t;
        }
    }
}

/* The reference binary query weights (lipi_quantization, binary's default
 * scoring): w_j = roundf(q_j * 7 / max |q|), as integers (n, QD). */
static void ref_binary_weights(const float *q, size_t n, int *w)
{
    for (size_t i = 0; i < n; i++) {
        float amax = 0;
        for (size_t j = 0; j < QD; j++)
            amax = fmaxf(amax, fabsf(q[i * QD + j]));
        for (size_t j = 0; j < QD; j++)
            w[i * QD + j] = (int)roundf(q[i * QD + j] * (7.0f / amax));
    }
}

/* Brute force: every quantized score, a full sort, ties by document.
 * Binary with bw (the query weights of ref_binary_weights) is scored as
 * (sum_j w_j (2 b_j - 1) - sum_j |w_j|) / 2, which is minus the weighted
 * Hamming distance of lipi_quantization written the other way round. */
static void quant_brute_force(lipi_quantization qz, const unsigned char *xc,
                              const unsigned char *qc, const int *bw, size_t k, int64_t *docs,
                              double *scores)
{
    ref_hit all[QN];
    size_t rb = qz == LIPI_QUANT_INT8 ? QD : QD / 8;
    for (size_t i = 0; i < QNQ; i++) {
        for (size_t d = 0; d < QN; d++) {
            long s = 0;
            if (bw) {
                for (size_t j = 0; j < QD; j++) {
                    int bit = (xc[d * rb + j / 8] >> (7 - j % 8)) & 1, w = bw[i * QD + j];
                    s += (w * (2 * bit - 1) - abs(w)) / 2; /* 0 or -|w|, exact */
                }
                all[d] = (ref_hit){(double)s, (int64_t)d};
                continue;
            }
            for (size_t b = 0; b < rb; b++) {
                unsigned char a = qc[i * rb + b], c = xc[d * rb + b];
                if (qz == LIPI_QUANT_INT8)
                    s += (long)(int8_t)a * (int8_t)c;
                else
                    for (int t = 0; t < 8; t++)
                        s -= ((a ^ c) >> t) & 1;
            }
            all[d] = (ref_hit){(double)s, (int64_t)d};
        }
        qsort(all, QN, sizeof *all, ref_cmp);
        for (size_t j = 0; j < k; j++) {
            docs[i * k + j] = all[j].d;
            scores[i * k + j] = all[j].s;
        }
    }
}

static void test_quantized_search_equals_brute_force_with_ties(void **state)
{
    static float x[QN * QD], q[QNQ * QD];
    quant_fixture(x, q);
    /* int8 scored with the query's weights (the default), int8 with its
     * codes (sentence-transformers); binary split at 0 (ubinary) and at the
     * rows' means (the default), each scored with the query's bits and
     * with its weights (the default). */
    static const lipi_quantization kinds[] = {LIPI_QUANT_INT8,   LIPI_QUANT_INT8,
                                              LIPI_QUANT_BINARY, LIPI_QUANT_BINARY,
                                              LIPI_QUANT_BINARY, LIPI_QUANT_BINARY};
    static const char *const names[] = {"q_int8",        "q_int8_codes",     "q_binary_zero",
                                        "q_binary_zero_w", "q_binary_mean", "q_binary_mean_w"};
    for (size_t kind = 0; kind < 6; kind++) {
        lipi_quantization qz = kinds[kind];
        const char *name = names[kind];
        bool weights = kind == 0, mean = kind >= 4, bweights = kind == 3 || kind == 5;
        quant_index_at(name, x, qz,
                       qz != LIPI_QUANT_BINARY ? LIPI_BINARY_THRESHOLD_DEFAULT
                       : mean                  ? LIPI_BINARY_THRESHOLD_MEAN
                                               : LIPI_BINARY_THRESHOLD_ZERO);
        lipi_index *idx = NULL;
        lipi_error err = {0};
        assert_int_equal(lipi_index_open(tmp_path(name), NULL, &idx, &err), LIPI_OK);
        assert_int_equal(lipi_index_quantization(idx), qz);
        /* The stored float rows are what the codes are made from. */
        char path[400];
        snprintf(path, sizeof path, "%s/vectors.npy", tmp_path(name));
        lipi_npy_map *vm = NULL;
        assert_int_equal(lipi_npy_map_open(path, &vm, &err), LIPI_OK);
        const float *v = lipi_npy_map_data(vm);
        float lo[QD], hi[QD];
        for (size_t j = 0; j < QD; j++) {
            lo[j] = hi[j] = v[j];
            for (size_t i = 1; i < QN; i++) {
                lo[j] = fminf(lo[j], v[i * QD + j]);
                hi[j] = fmaxf(hi[j], v[i * QD + j]);
            }
        }
        /* Binary thresholds: each column's mean, summed in double in row
         * order, and the file holds them. */
        float t[QD];
        for (size_t j = 0; j < QD; j++) {
            double sum = 0;
            for (size_t i = 0; i < QN; i++)
                sum += v[i * QD + j];
            t[j] = mean ? (float)(sum / QN) : 0.0f;
        }
        size_t tlen;
        if (qz == LIPI_QUANT_BINARY) {
            snprintf(path, sizeof path, "%s/binary_thresholds.npy", tmp_path(name));
            char *tf = slurp(path, &tlen);
            assert_non_null(tf);
            assert_int_equal(tlen, 128 + sizeof t);
            assert_memory_equal(tf + 128, t, sizeof t);
            free(tf);
            assert_int_equal(lipi_index_binary_threshold(idx), mean ? LIPI_BINARY_THRESHOLD_MEAN
                                                                    : LIPI_BINARY_THRESHOLD_ZERO);
        }
        static unsigned char xc[QN * QD], qc[QNQ * QD];
        static int bw[QNQ * QD];
        const float *blo = qz == LIPI_QUANT_BINARY ? (mean ? t : NULL) : lo;
        ref_codes(qz, v, QN, blo, hi, xc);
        if (weights)
            ref_weights(q, QNQ, lo, hi, qc);
        else
            ref_codes(qz, q, QNQ, blo, hi, qc);
        if (bweights) {
            ref_binary_weights(q, QNQ, bw);
            /* The library's planes are the reference's signs and |w|. */
            static uint8_t planes[QNQ * 4 * (QD / 8)];
            lipi_binary_query_weights(q, QNQ, QD, planes);
            for (size_t i = 0; i < QNQ; i++)
                for (size_t j = 0; j < QD; j++) {
                    const uint8_t *p = planes + i * 4 * (QD / 8);
                    int sh = 7 - (int)(j % 8), w = bw[i * QD + j];
                    int sign = (p[j / 8] >> sh) & 1, mag = 0;
                    for (int b = 0; b < 3; b++)
                        mag |= ((p[(1 + b) * (QD / 8) + j / 8] >> sh) & 1) << b;
                    assert_int_equal(mag, abs(w));
                    assert_int_equal(sign, q[i * QD + j] > 0);
                }
        }
        /* The library's weights are the reference's. */
        if (weights) {
            static int8_t w[QNQ * QD];
            float ranges[2 * QD];
            memcpy(ranges, lo, sizeof lo);
            memcpy(ranges + QD, hi, sizeof hi);
            lipi_int8_query_weights(q, QNQ, QD, ranges, w);
            assert_memory_equal(w, qc, sizeof w);
        }
        size_t rb = qz == LIPI_QUANT_INT8 ? QD : QD / 8, len;
        snprintf(path, sizeof path, "%s/quantized.npy", tmp_path(name));
        char *file = slurp(path, &len);
        assert_non_null(file);
        assert_int_equal(len, 128 + QN * rb);
        assert_memory_equal(file + 128, xc, QN * rb);
        free(file);
        if (qz == LIPI_QUANT_INT8) {
            snprintf(path, sizeof path, "%s/int8_ranges.npy", tmp_path(name));
            file = slurp(path, &len);
            assert_int_equal(len, 128 + 2 * QD * sizeof(float));
            assert_memory_equal(file + 128, lo, sizeof lo);
            assert_memory_equal(file + 128 + sizeof lo, hi, sizeof hi);
            free(file);
        }
        int64_t want_d[QNQ * QK], got_d[QNQ * QK];
        double want_s[QNQ * QK];
        float got_s[QNQ * QK];
        quant_brute_force(qz, xc, qc, bweights ? bw : NULL, QK, want_d, want_s);
        /* Query 0 is row 3: its copies tie with it, in document order (its
         * weights' signs are not its bits, so they need not come first). */
        if (!bweights) {
            assert_int_equal(want_d[0], 3);
            assert_int_equal(want_d[1], 17);
            assert_int_equal(want_d[2], 150);
        } else {
            size_t at = 0;
            while (at < QK - 2 && want_d[at] != 3)
                at++;
            assert_int_equal(want_d[at], 3);
            assert_int_equal(want_d[at + 1], 17);
            assert_int_equal(want_d[at + 2], 150);
            assert_true(want_s[at] == want_s[at + 2]);
        }
        const lipi_search_options opts[] = {
            {.no_rescore = true},
            {.no_rescore = true, .threads = 2},
            {.no_rescore = true, .threads = 3, .block_rows = 16, .gemm_rows = 5},
            {.no_rescore = true, .threads = 2, .block_rows = 7, .gemm_rows = 7},
        };
        for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
            lipi_search_options so = opts[o];
            so.int8_query_codes = kind == 1;
            so.binary_query_bits = qz == LIPI_QUANT_BINARY && !bweights;
            assert_int_equal(lipi_index_search(idx, q, QNQ, QD, QK, &so, got_d, got_s, &err),
                             LIPI_OK);
            for (size_t i = 0; i < QNQ * QK; i++)
                if (got_d[i] != want_d[i] || got_s[i] != (float)want_s[i])
                    fail_msg("%s, options %zu, query %zu, rank %zu: got doc %lld score %g, "
                             "expected doc %lld score %g",
                             name, o, i / QK, i % QK, (long long)got_d[i], (double)got_s[i],
                             (long long)want_d[i], want_s[i]);
        }
        lipi_npy_map_close(vm);
        lipi_index_close(idx);
    }
}

static void test_quantized_kernels_equal_their_reference(void **state)
{
    rng_state = 5;
    enum { S = 37, MAXD = 300 };
    static unsigned char qb[MAXD], xb[S * MAXD];
    for (size_t dim = 1; dim <= MAXD; dim += dim < 40 ? 1 : 29) {
        for (size_t i = 0; i < sizeof xb; i++)
            xb[i] = (unsigned char)rng_next();
        for (size_t i = 0; i < sizeof qb; i++)
            qb[i] = (unsigned char)rng_next();
        /* Binary codes keep their padding bits 0; weight planes are 4 rows'
         * worth of random bits. */
        static const lipi_quantization kinds[] = {LIPI_QUANT_INT8, LIPI_QUANT_BINARY,
                                                  LIPI_QUANT_BINARY_WEIGHTS};
        for (size_t kind = 0; kind < 3; kind++) {
            int32_t fast[S], ref[S];
            lipi_quant_scores(kinds[kind], false, qb, xb, S, dim, fast);
            lipi_quant_scores(kinds[kind], true, qb, xb, S, dim, ref);
            assert_memory_equal(fast, ref, sizeof fast);
        }
    }
    int8_t a[3] = {-128, -128, 127}, b[3] = {-128, -128, -128};
    int32_t s;
    lipi_quant_scores(LIPI_QUANT_INT8, false, a, b, 1, 3, &s);
    assert_int_equal(s, 128 * 128 * 2 - 127 * 128);
    /* Binary weights by hand: q = (1, -0.5, 0.125, 0...) weighs 7, -4
     * (-3.5 rounded away from zero), 1; a row with only bit 0 set differs
     * from the signs in dimension 2 (weight 1), one with only bit 1 in
     * dimensions 0, 1 and 2 (7 + 4 + 1). */
    float wq[8] = {1.0f, -0.5f, 0.125f};
    uint8_t planes[4], rows[2] = {0x80, 0x40};
    int32_t ws[2], wr[2];
    lipi_binary_query_weights(wq, 1, 8, planes);
    assert_int_equal(planes[0], 0xA0);
    assert_int_equal(planes[1], 0xA0); /* |w| bit 0: 7 and 1 */
    assert_int_equal(planes[2], 0x80); /* bit 1: 7 */
    assert_int_equal(planes[3], 0xC0); /* bit 2: 7 and 4 */
    lipi_quant_scores(LIPI_QUANT_BINARY_WEIGHTS, false, planes, rows, 2, 8, ws);
    lipi_quant_scores(LIPI_QUANT_BINARY_WEIGHTS, true, planes, rows, 2, 8, wr);
    assert_int_equal(ws[0], -1);
    assert_int_equal(ws[1], -12);
    assert_memory_equal(ws, wr, sizeof ws);
}

/* Blocks of 1..4 different queries (the VNNI and VPOPCNTDQ kernels on CPUs
 * that have them; int8 with the codes + 128 it takes) equal the reference,
 * query by query, every dimension from 1 to 200 (whole and partial 64-byte
 * chunks). */
static void test_quantized_block_kernel_equals_the_reference(void **state)
{
    rng_state = 11;
    enum { S = 21, MAXD = 200, QB = LIPI_QUANT_QB };
    static unsigned char qb[QB][MAXD], qu[QB][MAXD], xb[S * MAXD];
    for (size_t dim = 1; dim <= MAXD; dim += dim < 70 ? 1 : 13) {
        for (size_t i = 0; i < sizeof xb; i++)
            xb[i] = (unsigned char)rng_next();
        for (size_t i = 0; i < QB; i++)
            for (size_t j = 0; j < MAXD; j++) {
                qb[i][j] = (unsigned char)rng_next();
                qu[i][j] = qb[i][j] ^ 0x80;
            }
        /* The extremes too: -128 against -128 everywhere in one row. */
        memset(xb, 0x80, dim);
        memset(qb[0], 0x80, dim);
        memset(qu[0], 0x00, dim);
        for (size_t qn = 1; qn <= QB; qn++) {
            const void *q[QB];
            const uint8_t *u[QB];
            for (size_t i = 0; i < QB; i++) {
                q[i] = qb[i];
                u[i] = qu[i];
            }
            int32_t got[QB * S], want[S];
            for (size_t i = 0; i < QB; i++) /* qb may have been masked below */
                for (size_t j = 0; j < MAXD; j++)
                    qu[i][j] = qb[i][j] ^ 0x80;
            lipi_quant_scores_block(LIPI_QUANT_INT8, q, u, qn, xb, S, dim, got);
            for (size_t i = 0; i < qn; i++) {
                lipi_quant_scores(LIPI_QUANT_INT8, true, qb[i], xb, S, dim, want);
                if (memcmp(got + i * S, want, sizeof want) != 0)
                    fail_msg("int8, dim %zu, %zu queries: query %zu differs (first row %d vs "
                             "%d)", dim, qn, i, got[i * S], want[0]);
            }
            /* Binary codes of dim bits (the padding bits of the last byte
             * 0, as the quantizer leaves them): the VPOPCNTDQ kernel. */
            size_t nb = (dim + 7) / 8;
            for (size_t i = 0; i < QB; i++)
                if (dim % 8)
                    qb[i][nb - 1] &= (unsigned char)(0xFF << (8 - dim % 8));
            for (size_t r = 0; dim % 8 && r < S; r++)
                xb[r * nb + nb - 1] &= (unsigned char)(0xFF << (8 - dim % 8));
            lipi_quant_scores_block(LIPI_QUANT_BINARY, q, NULL, qn, xb, S, dim, got);
            for (size_t i = 0; i < qn; i++) {
                lipi_quant_scores(LIPI_QUANT_BINARY, true, qb[i], xb, S, dim, want);
                if (memcmp(got + i * S, want, sizeof want) != 0)
                    fail_msg("binary, dim %zu, %zu queries: query %zu differs (first row %d vs "
                             "%d)", dim, qn, i, got[i * S], want[0]);
            }
        }
    }
}

/* The packed kernels of passes of many queries (rows rearranged into
 * 16-row tiles, 8 queries a step) equal the reference, query by query:
 * dimensions 1..200 (partial words and tiles), panels of 1..70 rows (a
 * partial tile, an odd tile count), 1..19 queries (a partial step). */
static void test_quantized_packed_kernels_equal_the_reference(void **state)
{
    rng_state = 13;
    enum { MAXS = 70, MAXD = 200, MAXQ = 19 };
    static unsigned char qb[MAXQ * MAXD], xb[MAXS * MAXD];
    static int32_t got[MAXQ * MAXS], want[MAXS];
    static const size_t rows[] = {1, 15, 16, 17, 32, 33, 47, 70}, queries[] = {1, 7, 8, 9, 19};
    size_t checked = 0;
    for (size_t dim = 1; dim <= MAXD; dim += dim < 70 ? 1 : 13)
        for (size_t kind = 0; kind < 3; kind++) {
            lipi_quantization qz = kind == 2 ? LIPI_QUANT_BINARY_WEIGHTS
                                   : kind    ? LIPI_QUANT_BINARY
                                             : LIPI_QUANT_INT8;
            size_t rb = kind ? (dim + 7) / 8 : dim, qrb = kind == 2 ? 4 * rb : rb;
            for (size_t i = 0; i < sizeof xb; i++)
                xb[i] = (unsigned char)rng_next();
            for (size_t i = 0; i < sizeof qb; i++)
                qb[i] = (unsigned char)rng_next();
            /* The extremes: -128 against -128 in row 0 and query 0. */
            memset(xb, 0x80, rb);
            memset(qb, 0x80, rb);
            for (size_t r = 0; kind && dim % 8 && r < MAXS; r++)
                xb[r * rb + rb - 1] &= (unsigned char)(0xFF << (8 - dim % 8));
            for (size_t i = 0; kind == 1 && dim % 8 && i < MAXQ; i++)
                qb[i * rb + rb - 1] &= (unsigned char)(0xFF << (8 - dim % 8));
            for (size_t a = 0; a < sizeof rows / sizeof rows[0]; a++)
                for (size_t b = 0; b < sizeof queries / sizeof queries[0]; b++) {
                    size_t S = rows[a], qn = queries[b];
                    if (!lipi_quant_scores_packed(qz, qb, qn, xb, S, dim, got))
                        continue;
                    checked++;
                    for (size_t i = 0; i < qn; i++) {
                        lipi_quant_scores(qz, true, qb + i * qrb, xb, S, dim, want);
                        if (memcmp(got + i * S, want, S * sizeof *want) != 0)
                            fail_msg("%s, dim %zu, %zu rows, %zu queries: query %zu differs "
                                     "(row 0: %d, expected %d)",
                                     kind == 2 ? "binary weights" : kind ? "binary" : "int8",
                                     dim, S, qn, i, got[i * S], want[0]);
                    }
                }
        }
    if (!checked)
        print_message("packed quantized kernels: this CPU has neither, nothing checked\n");
}

/* A pass of many queries (the packed kernels, where the CPU has them)
 * gives exactly what each query searched alone gives, quantized and
 * rescored, on 1 and 2 threads and small blocks. */
static void test_quantized_search_of_many_queries_equals_one_by_one(void **state)
{
    enum { MQ = 40 };
    static float x[QN * QD], q[QNQ * QD], mq[MQ * QD];
    quant_fixture(x, q);
    rng_state = 77;
    fill_gauss(mq, MQ * QD);
    memcpy(mq, q, sizeof q); /* the fixture's queries first: row 3 and its ties */
    /* int8; binary scored with the query's weights (the default), and with
     * its bits. */
    static const lipi_quantization kinds[] = {LIPI_QUANT_INT8, LIPI_QUANT_BINARY,
                                              LIPI_QUANT_BINARY};
    for (size_t kind = 0; kind < 3; kind++) {
        const char *name = kinds[kind] == LIPI_QUANT_INT8 ? "m_int8" : "m_binary";
        if (kind < 2)
            quant_index(name, x, kinds[kind]);
        lipi_index *idx = NULL;
        lipi_error err = {0};
        assert_int_equal(lipi_index_open(tmp_path(name), NULL, &idx, &err), LIPI_OK);
        lipi_search_options opts[] = {
            {.no_rescore = true},
            {.no_rescore = true, .threads = 2, .block_rows = 48, .gemm_rows = 17},
            {.rescore_multiplier = 3, .threads = 2},
            {.rescore_multiplier = 2, .block_rows = 33, .gemm_rows = 33},
        };
        for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
            opts[o].binary_query_bits = kind == 2;
            int64_t all_d[MQ * QK], one_d[QK];
            float all_s[MQ * QK], one_s[QK];
            assert_int_equal(lipi_index_search(idx, mq, MQ, QD, QK, &opts[o], all_d, all_s, &err),
                             LIPI_OK);
            for (size_t i = 0; i < MQ; i++) {
                assert_int_equal(
                    lipi_index_search(idx, mq + i * QD, 1, QD, QK, &opts[o], one_d, one_s, &err),
                    LIPI_OK);
                for (size_t r = 0; r < QK; r++)
                    if (all_d[i * QK + r] != one_d[r] || all_s[i * QK + r] != one_s[r])
                        fail_msg("%s, options %zu, query %zu, rank %zu: doc %lld (%g) in the "
                                 "pass, %lld (%g) alone",
                                 name, o, i, r, (long long)all_d[i * QK + r],
                                 (double)all_s[i * QK + r], (long long)one_d[r], (double)one_s[r]);
            }
        }
        lipi_index_close(idx);
    }
}

/* FAISS's IndexBinaryFlat over the binary codes of the quantized fixture
 * finds the same distances as lipi's binary index without rescoring
 * (minus its scores), query by query. */
static void test_faiss_binary_flat_matches_the_binary_index(void **state)
{
    if (!lipi_faiss_available())
        SKIP_BECAUSE("lipi built without FAISS (no libfaiss-dev)");
    static float x[QN * QD], q[QNQ * QD];
    quant_fixture(x, q);
    enum { NB = QD / 8 };
    static uint8_t xc[QN * NB], qc[QNQ * NB];
    lipi_quantize_binary(x, QN, QD, NULL, xc);
    lipi_quantize_binary(q, QNQ, QD, NULL, qc);
    lipi_error err = {0};
    lipi_faiss_binary *f = NULL;
    assert_int_equal(lipi_faiss_binary_new(0, &f, &err), LIPI_EINVAL);
    assert_null(f);
    assert_int_equal(lipi_faiss_binary_new(NB, &f, &err), LIPI_OK);
    assert_int_equal(lipi_faiss_binary_add(f, xc, 77, &err), LIPI_OK);
    assert_int_equal(lipi_faiss_binary_add(f, xc + 77 * NB, QN - 77, &err), LIPI_OK);
    int64_t fd[QNQ * QK], ld[QNQ * QK];
    int32_t dist[QNQ * QK];
    float ls[QNQ * QK];
    assert_int_equal(lipi_faiss_binary_search(f, qc, QNQ, QK, 2, fd, dist, &err), LIPI_OK);
    quant_index_at("fb_binary", x, LIPI_QUANT_BINARY, LIPI_BINARY_THRESHOLD_ZERO);
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_open(tmp_path("fb_binary"), NULL, &idx, &err), LIPI_OK);
    lipi_search_options raw = {.no_rescore = true, .binary_query_bits = true};
    assert_int_equal(lipi_index_search(idx, q, QNQ, QD, QK, &raw, ld, ls, &err), LIPI_OK);
    for (size_t i = 0; i < QNQ * QK; i++) {
        assert_true(fd[i] >= 0 && fd[i] < QN);
        if ((float)-dist[i] != ls[i])
            fail_msg("query %zu, rank %zu: FAISS distance %d, lipi score %g", i / QK, i % QK,
                     dist[i], (double)ls[i]);
    }
    lipi_index_close(idx);
    lipi_faiss_binary_free(f);
}

static void test_rescoring_orders_the_candidates_by_float_scores(void **state)
{
    static float x[QN * QD], q[QNQ * QD];
    quant_fixture(x, q);
    static const lipi_quantization kinds[] = {LIPI_QUANT_INT8, LIPI_QUANT_BINARY};
    for (size_t kind = 0; kind < 2; kind++) {
        const char *name = kinds[kind] == LIPI_QUANT_INT8 ? "r_int8" : "r_binary";
        quant_index(name, x, kinds[kind]);
        lipi_index *idx = NULL;
        lipi_error err = {0};
        assert_int_equal(lipi_index_open(tmp_path(name), NULL, &idx, &err), LIPI_OK);
        char path[400];
        snprintf(path, sizeof path, "%s/vectors.npy", tmp_path(name));
        lipi_npy_map *vm = NULL;
        assert_int_equal(lipi_npy_map_open(path, &vm, &err), LIPI_OK);
        const float *v = lipi_npy_map_data(vm);
        for (size_t mult = 1; mult <= 6; mult += 5) {
            size_t m = mult * QK;
            int64_t cand[QNQ * 6 * QK], got_d[QNQ * QK];
            float cs[QNQ * 6 * QK], got_s[QNQ * QK];
            lipi_search_options raw = {.no_rescore = true},
                                res = {.rescore_multiplier = mult, .threads = 2};
            assert_int_equal(lipi_index_search(idx, q, QNQ, QD, m, &raw, cand, cs, &err), LIPI_OK);
            assert_int_equal(lipi_index_search(idx, q, QNQ, QD, QK, &res, got_d, got_s, &err),
                             LIPI_OK);
            for (size_t i = 0; i < QNQ; i++) {
                ref_hit h[6 * QK];
                for (size_t j = 0; j < m; j++) {
                    double sc = 0;
                    for (size_t c = 0; c < QD; c++)
                        sc += (double)q[i * QD + c] * v[cand[i * m + j] * QD + c];
                    h[j] = (ref_hit){(double)(float)sc, cand[i * m + j]};
                }
                qsort(h, m, sizeof *h, ref_cmp);
                for (size_t r = 0; r < QK; r++)
                    if (got_d[i * QK + r] != h[r].d || fabs(got_s[i * QK + r] - h[r].s) > 1e-6)
                        fail_msg("%s x%zu, query %zu, rank %zu: got doc %lld (%g), expected "
                                 "doc %lld (%g)",
                                 name, mult, i, r, (long long)got_d[i * QK + r],
                                 (double)got_s[i * QK + r], (long long)h[r].d, h[r].s);
            }
        }
        /* The default is 4 x k. */
        int64_t d4[QNQ * QK], dd[QNQ * QK];
        float s4[QNQ * QK], sd[QNQ * QK];
        lipi_search_options four = {.rescore_multiplier = 4};
        assert_int_equal(lipi_index_search(idx, q, QNQ, QD, QK, &four, d4, s4, &err), LIPI_OK);
        assert_int_equal(lipi_index_search(idx, q, QNQ, QD, QK, NULL, dd, sd, &err), LIPI_OK);
        assert_memory_equal(d4, dd, sizeof dd);
        /* Recall@10 against exact float32 search (the bounds above);
         * rescoring every document is exact search. */
        double r_raw, r_res, r_all;
        lipi_search_options raw = {.no_rescore = true}, all = {.rescore_multiplier = QN};
        assert_int_equal(lipi_index_recall(idx, q, QNQ, QD, QK, &raw, &r_raw, &err), LIPI_OK);
        assert_int_equal(lipi_index_recall(idx, q, QNQ, QD, QK, NULL, &r_res, &err), LIPI_OK);
        assert_int_equal(lipi_index_recall(idx, q, QNQ, QD, QK, &all, &r_all, &err), LIPI_OK);
        print_message("%s: recall@10 vs exact float32: %.3f quantized, %.3f rescored x4\n", name,
                      r_raw, r_res);
        assert_true(r_all == 1.0);
        assert_true(r_res >= r_raw);
        if (kinds[kind] == LIPI_QUANT_BINARY)
            assert_true(r_res >= QUANT_BINARY_RECALL_BOUND);
        else {
            /* Unrescored, the query's weights rank much as float32 does,
             * its codes (sentence-transformers' scoring) far less so. */
            double r_codes;
            lipi_search_options codes = {.no_rescore = true, .int8_query_codes = true};
            assert_int_equal(lipi_index_recall(idx, q, QNQ, QD, QK, &codes, &r_codes, &err),
                             LIPI_OK);
            print_message("%s: recall@10 of the query's codes, not rescored: %.3f\n", name,
                          r_codes);
            assert_true(r_res >= QUANT_INT8_RECALL_BOUND);
            assert_true(r_raw >= QUANT_INT8_RAW_RECALL_BOUND);
            assert_true(r_raw > r_codes);
        }
        lipi_npy_map_close(vm);
        lipi_index_close(idx);
    }
}

/* The files names[0..n) of the test indexes a and b are the same. */
static void assert_same_files(const char *a, const char *b, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char pa[400], pb[400];
        snprintf(pa, sizeof pa, "%s/%s", tmp_path(a), names[i]);
        snprintf(pb, sizeof pb, "%s/%s", tmp_path(b), names[i]);
        assert_same_file(pa, pb);
    }
}

static void test_quantized_index_size_append_and_old_meta(void **state)
{
    static float x[QN * QD], q[QNQ * QD];
    static char buf[QN][32];
    const char *ptrs[QN];
    size_t lens[QN];
    quant_fixture(x, q);
    text_ptrs(buf, QN, 1, ptrs, lens);
    lipi_error err = {0};
    /* Sizes: int8 codes are a quarter of the float32 data, bits 1/32. */
    quant_index("s_int8", x, LIPI_QUANT_INT8);
    quant_index("s_binary", x, LIPI_QUANT_BINARY);
    struct stat vs, is, bs;
    char path[400];
    snprintf(path, sizeof path, "%s/vectors.npy", tmp_path("s_int8"));
    assert_int_equal(stat(path, &vs), 0);
    snprintf(path, sizeof path, "%s/quantized.npy", tmp_path("s_int8"));
    assert_int_equal(stat(path, &is), 0);
    snprintf(path, sizeof path, "%s/quantized.npy", tmp_path("s_binary"));
    assert_int_equal(stat(path, &bs), 0);
    assert_int_equal((size_t)vs.st_size - 128, (size_t)QN * QD * 4);
    assert_int_equal(((size_t)is.st_size - 128) * 4, (size_t)vs.st_size - 128);
    assert_int_equal(((size_t)bs.st_size - 128) * 32, (size_t)vs.st_size - 128);

    /* Appending keeps the quantization and recalibrates on every row: the
     * files of indexing all at once. */
    lipi_index_write_options first = {.no_sync = true, .quantize = LIPI_QUANT_INT8},
                             more = {.no_sync = true, .append = true};
    assert_int_equal(lipi_index_create(tmp_path("s_parts"), &model_a, x, 120, QD, ptrs, lens,
                                       &first, &err), LIPI_OK);
    assert_int_equal(lipi_index_create(tmp_path("s_parts"), &model_a, x + 120 * QD, QN - 120, QD,
                                       ptrs + 120, lens + 120, &more, &err), LIPI_OK);
    static const char *const files[] = {"quantized.npy", "int8_ranges.npy", "meta.json"};
    assert_same_files("s_int8", "s_parts", files, 3);
    size_t len;
    snprintf(path, sizeof path, "%s/meta.json", tmp_path("s_binary"));
    char *meta = slurp(path, &len);
    assert_non_null(strstr(meta, "\"quantization\": \"binary\""));
    free(meta);
    /* A quantized index takes no FAISS index. */
    lipi_index_write_options both = {.no_sync = true, .quantize = LIPI_QUANT_BINARY,
                                     .faiss_spec = "Flat"};
    if (lipi_faiss_available()) {
        assert_int_equal(lipi_index_create(tmp_path("s_both"), &model_a, x, QN, QD, ptrs, lens,
                                           &both, &err), LIPI_EINVAL);
        assert_non_null(strstr(err.msg, "not both"));
    }

    /* Binary: mean thresholds by default, in binary_thresholds.npy, as
     * index version 2 (which a lipi from before thresholds refuses rather
     * than code its queries at 0); appending keeps them and recalibrates
     * on every row: the files of indexing all at once. */
    lipi_index_write_options bfirst = {.no_sync = true, .quantize = LIPI_QUANT_BINARY};
    assert_int_equal(lipi_index_create(tmp_path("s_bparts"), &model_a, x, 120, QD, ptrs, lens,
                                       &bfirst, &err), LIPI_OK);
    assert_int_equal(lipi_index_create(tmp_path("s_bparts"), &model_a, x + 120 * QD, QN - 120,
                                       QD, ptrs + 120, lens + 120, &more, &err), LIPI_OK);
    static const char *const bfiles[] = {"quantized.npy", "binary_thresholds.npy", "meta.json"};
    assert_same_files("s_binary", "s_bparts", bfiles, 3);
    size_t mlen;
    snprintf(path, sizeof path, "%s/meta.json", tmp_path("s_binary"));
    char *bmeta = slurp(path, &mlen);
    assert_non_null(strstr(bmeta, "\"version\": 2,"));
    assert_non_null(strstr(bmeta, "\"binary_threshold\": \"mean\""));
    free(bmeta);
    /* Zero thresholds are what lipi wrote before: version 1. */
    quant_index_at("s_bzero", x, LIPI_QUANT_BINARY, LIPI_BINARY_THRESHOLD_ZERO);
    snprintf(path, sizeof path, "%s/meta.json", tmp_path("s_bzero"));
    bmeta = slurp(path, &mlen);
    assert_non_null(strstr(bmeta, "\"version\": 1,"));
    assert_non_null(strstr(bmeta, "\"binary_threshold\": \"zero\""));
    /* A binary index from before thresholds (no key, no file) is "zero"
     * and searches as it did. */
    lipi_index *bi = NULL;
    int64_t d0[QNQ * QK], d1[QNQ * QK];
    float s0[QNQ * QK], s1[QNQ * QK];
    lipi_search_options braw = {.no_rescore = true, .binary_query_bits = true};
    assert_int_equal(lipi_index_open(tmp_path("s_bzero"), NULL, &bi, &err), LIPI_OK);
    assert_int_equal(lipi_index_search(bi, q, QNQ, QD, QK, &braw, d0, s0, &err), LIPI_OK);
    lipi_index_close(bi);
    char *key0 = strstr(bmeta, "  \"binary_threshold\": \"zero\",\n");
    assert_non_null(key0);
    size_t kl = strlen("  \"binary_threshold\": \"zero\",\n");
    memmove(key0, key0 + kl, strlen(key0 + kl) + 1);
    write_bytes(path, bmeta, strlen(bmeta));
    free(bmeta);
    snprintf(path, sizeof path, "%s/binary_thresholds.npy", tmp_path("s_bzero"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(lipi_index_open(tmp_path("s_bzero"), NULL, &bi, &err), LIPI_OK);
    assert_int_equal(lipi_index_binary_threshold(bi), LIPI_BINARY_THRESHOLD_ZERO);
    assert_int_equal(lipi_index_search(bi, q, QNQ, QD, QK, &braw, d1, s1, &err), LIPI_OK);
    assert_memory_equal(d0, d1, sizeof d0);
    assert_memory_equal(s0, s1, sizeof s0);
    lipi_index_close(bi);
    /* Refused clearly: a version from a newer lipi, mean thresholds in a
     * version 1 index, a missing, misshapen or non-finite thresholds file,
     * an unknown threshold. */
    static const struct {
        const char *from, *to, *file; /* meta.json edit, or a file to damage */
        lipi_status want;
        const char *msg;
    } bad[] = {
        {"\"version\": 2,", "\"version\": 3,", NULL, LIPI_EFORMAT, "newer lipi"},
        {"\"version\": 2,", "\"version\": 1,", NULL, LIPI_EFORMAT, "version"},
        {"\"binary_threshold\": \"mean\"", "\"binary_threshold\": \"mode\"", NULL, LIPI_EFORMAT,
         "binary_threshold"},
        {NULL, NULL, "unlink", LIPI_EIO, "binary_thresholds.npy"},
        {NULL, NULL, "shape", LIPI_EFORMAT, "expected shape (1, 48)"},
        {NULL, NULL, "nan", LIPI_EFORMAT, "finite thresholds"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        quant_index("s_bbad", x, LIPI_QUANT_BINARY);
        char tp[400];
        snprintf(tp, sizeof tp, "%s/binary_thresholds.npy", tmp_path("s_bbad"));
        if (bad[i].from) {
            snprintf(path, sizeof path, "%s/meta.json", tmp_path("s_bbad"));
            char *m = slurp(path, &mlen), *at = strstr(m, bad[i].from);
            assert_non_null(at);
            assert_int_equal(strlen(bad[i].from), strlen(bad[i].to));
            memcpy(at, bad[i].to, strlen(bad[i].to));
            write_bytes(path, m, mlen);
            free(m);
        } else if (strcmp(bad[i].file, "unlink") == 0) {
            assert_int_equal(unlink(tp), 0);
        } else {
            float t2[2 * QD] = {0};
            if (strcmp(bad[i].file, "nan") == 0)
                t2[5] = NAN;
            assert_int_equal(lipi_npy_write(tp, t2, strcmp(bad[i].file, "nan") ? 2 : 1, QD, &err),
                             LIPI_OK);
        }
        assert_int_equal(lipi_index_open(tmp_path("s_bbad"), NULL, &bi, &err), bad[i].want);
        assert_null(bi);
        if (!strstr(err.msg, bad[i].msg) && !strstr(err.path, bad[i].msg))
            fail_msg("case %zu: expected '%s' in %s: %s", i, bad[i].msg, err.path, err.msg);
    }

    /* An index written before quantization has no such key: none. A
     * damaged quantization or a missing codes file are format errors. */
    lipi_index *idx = NULL;
    assert_int_equal(lipi_index_create(tmp_path("s_old"), &model_a, x, QN, QD, ptrs, lens, &fast,
                                       &err), LIPI_OK);
    snprintf(path, sizeof path, "%s/meta.json", tmp_path("s_old"));
    meta = slurp(path, &len);
    char *key = strstr(meta, "  \"quantization\": null,\n");
    assert_non_null(key);
    memmove(key, key + strlen("  \"quantization\": null,\n"),
            strlen(key + strlen("  \"quantization\": null,\n")) + 1);
    write_bytes(path, meta, strlen(meta));
    assert_int_equal(lipi_index_open(tmp_path("s_old"), NULL, &idx, &err), LIPI_OK);
    assert_int_equal(lipi_index_quantization(idx), LIPI_QUANT_NONE);
    lipi_index_close(idx);
    free(meta);
    snprintf(path, sizeof path, "%s/meta.json", tmp_path("s_binary"));
    meta = slurp(path, &len);
    char *val = strstr(meta, "\"binary\"");
    memcpy(val, "\"int4\"  ", 8);
    write_bytes(path, meta, len);
    free(meta);
    assert_int_equal(lipi_index_open(tmp_path("s_binary"), NULL, &idx, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "quantization"));
    snprintf(path, sizeof path, "%s/int8_ranges.npy", tmp_path("s_int8"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(lipi_index_open(tmp_path("s_int8"), NULL, &idx, &err), LIPI_EIO);
}

static void test_cli_quantized_index_and_search(void **state)
{
    static float x[QN * QD], q[QNQ * QD];
    quant_fixture(x, q);
    lipi_error err = {0};
    assert_int_equal(lipi_npy_write(tmp_path("cq_docs.npy"), x, QN, QD, &err), LIPI_OK);
    assert_int_equal(lipi_npy_write(tmp_path("cq_q.npy"), q, 1, QD, &err), LIPI_OK);
    FILE *f = fopen(tmp_path("cq_docs.txt"), "w");
    assert_non_null(f);
    for (size_t i = 0; i < QN; i++)
        fprintf(f, "doc %zu\n", i + 1);
    fclose(f);
    cli_result r = cli_runf("index --quiet --quantize binary --vectors %s -o %s %s",
                            tmp_path("cq_docs.npy"), tmp_path("cq_idx"), tmp_path("cq_docs.txt"));
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    /* Query 1 is document 4, with copies at 18 and 151: raw Hamming scores
     * of its bits 0, then rescored cosine 1. */
    r = cli_runf("search --index %s --query-vectors %s -k 3 --no-rescore --binary-query bits",
                 tmp_path("cq_idx"), tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "1\t1\t4\t0.000000\tdoc 4\n1\t2\t18\t0.000000\tdoc 18\n"
                               "1\t3\t151\t0.000000\tdoc 151\n");
    cli_result_free(&r);
    r = cli_runf("search --index %s --query-vectors %s -k 3 --rescore-multiplier 2",
                 tmp_path("cq_idx"), tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "1\t1\t4\t1.000000\tdoc 4\n1\t2\t18\t1.000000\tdoc 18\n"
                               "1\t3\t151\t1.000000\tdoc 151\n");
    cli_result_free(&r);
    /* Recall against exact search: the three ties are found either way;
     * of all 25 queries' top 10, what the library measures. */
    r = cli_runf("eval-retrieval --index %s --query-vectors %s -k 3 --format json",
                 tmp_path("cq_idx"), tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 0);
    lipi_index *idx = NULL;
    double w3;
    lipi_search_options wraw = {.no_rescore = true};
    assert_int_equal(lipi_index_open(tmp_path("cq_idx"), NULL, &idx, &err), LIPI_OK);
    assert_int_equal(lipi_index_recall(idx, q, 1, QD, 3, &wraw, &w3, &err), LIPI_OK);
    lipi_index_close(idx);
    char json[400];
    snprintf(json, sizeof json,
             "\"search\":\"binary\",\"binary_threshold\":\"mean\",\"documents\":200,"
             "\"queries\":1,\"no_rescore\":{\"3\":%.6f},\"rescored\":{\"multiplier\":4,\"3\":"
             "1.000000},\"query_bits\":{\"no_rescore\":{\"3\":1.000000},\"rescored\":{"
             "\"multiplier\":4,\"3\":1.000000}}}\n",
             w3);
    if (!strstr(r.out, json))
        fail_msg("expected %s in %s", json, r.out);
    cli_result_free(&r);
    assert_int_equal(lipi_npy_write(tmp_path("cq_q.npy"), q, QNQ, QD, &err), LIPI_OK);
    double want[2];
    lipi_search_options x2[2] = {{.rescore_multiplier = 2},
                                 {.rescore_multiplier = 2, .binary_query_bits = true}};
    assert_int_equal(lipi_index_open(tmp_path("cq_idx"), NULL, &idx, &err), LIPI_OK);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(lipi_index_recall(idx, q, QNQ, QD, QK, &x2[i], &want[i], &err), LIPI_OK);
    lipi_index_close(idx);
    r = cli_runf("eval-retrieval --index %s --query-vectors %s -k 10 --rescore-multiplier 2",
                 tmp_path("cq_idx"), tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "(binary, thresholds mean, 200 documents)"));
    char row[96];
    snprintf(row, sizeof row, "%-24s %8.4f\n", "weights, rescore x2", want[0]);
    assert_non_null(strstr(r.out, row));
    snprintf(row, sizeof row, "%-24s %8.4f\n", "bits, rescore x2", want[1]);
    assert_non_null(strstr(r.out, row));
    cli_result_free(&r);
    /* --binary-query bits prints the library's ranking with that option;
     * a bad value and --binary-threshold without binary codes are usage
     * errors. */
    r = cli_runf("search --index %s --query-vectors %s --binary-query hamming", tmp_path("cq_idx"),
                 tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--binary-query"));
    cli_result_free(&r);
    r = cli_runf("index --quiet --quantize int8 --binary-threshold zero --vectors %s -o %s %s",
                 tmp_path("cq_docs.npy"), tmp_path("cq_bad"), tmp_path("cq_docs.txt"));
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--binary-threshold goes with --quantize binary"));
    cli_result_free(&r);
    r = cli_runf("index --quiet --quantize binary --binary-threshold zero --vectors %s -o %s %s",
                 tmp_path("cq_docs.npy"), tmp_path("cq_zero"), tmp_path("cq_docs.txt"));
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    assert_int_equal(lipi_index_open(tmp_path("cq_zero"), NULL, &idx, &err), LIPI_OK);
    assert_int_equal(lipi_index_binary_threshold(idx), LIPI_BINARY_THRESHOLD_ZERO);
    lipi_index_close(idx);
    /* --int8-query on a binary index, --binary-query on an int8 one are
     * usage errors. */
    r = cli_runf("search --index %s --query-vectors %s --int8-query codes", tmp_path("cq_idx"),
                 tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--int8-query needs an int8 index"));
    cli_result_free(&r);
    /* An int8 index: no option, --int8-query weights and --int8-query
     * codes print the library's rankings and scores with those options,
     * and the two scorings differ. */
    r = cli_runf("index --quiet --quantize int8 --vectors %s -o %s %s", tmp_path("cq_docs.npy"),
                 tmp_path("cq_int8"), tmp_path("cq_docs.txt"));
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("search --index %s --query-vectors %s --binary-query bits", tmp_path("cq_int8"),
                 tmp_path("cq_q.npy"));
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--binary-query needs a binary index"));
    cli_result_free(&r);
    assert_int_equal(lipi_index_open(tmp_path("cq_int8"), NULL, &idx, &err), LIPI_OK);
    static const char *const how[] = {"", " --int8-query weights", " --int8-query codes"};
    static char want_out[3][QNQ * 3 * 48];
    for (size_t mode = 0; mode < 3; mode++) {
        lipi_search_options so = {.no_rescore = true, .int8_query_codes = mode == 2};
        int64_t d[QNQ * 3];
        float s[QNQ * 3];
        assert_int_equal(lipi_index_search(idx, q, QNQ, QD, 3, &so, d, s, &err), LIPI_OK);
        size_t len = 0;
        for (size_t i = 0; i < QNQ * 3; i++)
            len += (size_t)snprintf(want_out[mode] + len, sizeof want_out[mode] - len,
                                    "%zu\t%zu\t%lld\t%f\tdoc %lld\n", i / 3 + 1, i % 3 + 1,
                                    (long long)d[i] + 1, (double)s[i], (long long)d[i] + 1);
        r = cli_runf("search --index %s --query-vectors %s -k 3 --no-rescore%s",
                     tmp_path("cq_int8"), tmp_path("cq_q.npy"), how[mode]);
        assert_int_equal(r.code, 0);
        assert_string_equal(r.out, want_out[mode]);
        cli_result_free(&r);
    }
    lipi_index_close(idx);
    assert_string_equal(want_out[0], want_out[1]);
    assert_string_not_equal(want_out[1], want_out[2]);
}

static void test_allocation_failures_are_reported_and_leak_nothing(void **state)
{
    static af_job job;
    static char buf[AF_N][32];
    rng_state = 1;
    fill_gauss(job.x, AF_N * AF_D);
    fill_gauss(job.q, 2 * AF_D);
    text_ptrs(buf, AF_N, 1, job.ptrs, job.lens);
    snprintf(job.dir, sizeof job.dir, "%s", tmp_path("alloc"));
    assert_true(alloc_fail_loop("index", index_run, &job) > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_search_equals_brute_force_with_ties),
        cmocka_unit_test(test_more_hits_asked_than_documents_pad_with_minus_one),
        cmocka_unit_test(test_bad_search_arguments_are_errors),
        cmocka_unit_test(test_index_round_trip_and_search),
        cmocka_unit_test(test_append_equals_indexing_all_at_once),
        cmocka_unit_test(test_model_mismatch_is_an_error),
        cmocka_unit_test(test_interrupted_write_leaves_the_old_index),
        cmocka_unit_test(test_writing_over_other_files_is_refused),
        cmocka_unit_test(test_faiss_flat_gives_the_exact_results),
        cmocka_unit_test(test_faiss_approximate_indexes_build_and_take_parameters),
        cmocka_unit_test(test_hostile_npy_headers_are_rejected),
        cmocka_unit_test(test_damaged_index_files_are_rejected),
        cmocka_unit_test(test_bitext_metrics_on_a_hand_made_case),
        cmocka_unit_test(test_bitext_ranks_equal_brute_force),
        cmocka_unit_test(test_cli_index_search_and_append_with_vectors),
        cmocka_unit_test(test_cli_eval_retrieval_on_the_hand_made_case),
        cmocka_unit_test(test_cli_with_a_model_folder),
        cmocka_unit_test(test_fingerprint_covers_every_tokenizer_file),
        cmocka_unit_test(test_probe_holdout_marks_the_same_rows_for_the_same_seed),
        cmocka_unit_test(test_probe_fit_sorts_the_labels_and_holds_out_a_seeded_draw),
        cmocka_unit_test(test_probe_fit_refuses_unknown_dev_labels_and_a_single_label),
        cmocka_unit_test(test_quantized_search_equals_brute_force_with_ties),
        cmocka_unit_test(test_quantized_kernels_equal_their_reference),
        cmocka_unit_test(test_quantized_block_kernel_equals_the_reference),
        cmocka_unit_test(test_quantized_packed_kernels_equal_the_reference),
        cmocka_unit_test(test_quantized_search_of_many_queries_equals_one_by_one),
        cmocka_unit_test(test_faiss_binary_flat_matches_the_binary_index),
        cmocka_unit_test(test_rescoring_orders_the_candidates_by_float_scores),
        cmocka_unit_test(test_quantized_index_size_append_and_old_meta),
        cmocka_unit_test(test_cli_quantized_index_and_search),
        cmocka_unit_test(test_allocation_failures_are_reported_and_leak_nothing),
    };
    return cmocka_run_group_tests_name("retrieval", tests, setup, teardown);
}

/* Search throughput: lipi's exact top-k (blocked GEMMs over the mapped
 * vectors.npy of a lipi index) against FAISS on the same vectors: the
 * exact IndexFlatIP, and the approximate HNSW32 and IVF1024,Flat with their
 * recall@k against lipi's exact results. One mode per process, so that
 * bench/search.sh can measure each one's peak RSS with /usr/bin/time -v.
 *
 *   search gen DIR N DIM NQ          random unit vectors: DIR/index (a lipi
 *                                    index) and DIR/queries.npy
 *   search lipi DIR K THREADS RUNS   exact search; checks 5 queries against
 *                                    brute force, writes DIR/truth.bin
 *   search quant DIR Q K THREADS RUNS [MULT...]
 *                                    lipi's quantized search (Q: int8 or
 *                                    binary; index cached in DIR/index-Q;
 *                                    int8-codes: the int8 index searched
 *                                    with the query's codes, as
 *                                    sentence-transformers scores;
 *                                    binary-zero: binary codes split at 0,
 *                                    sentence-transformers' ubinary, in
 *                                    DIR/index-binary-zero, binary ones at
 *                                    the mean in DIR/index-binary-mean;
 *                                    "-bits" after either: the query's
 *                                    bits scored (Hamming distance)
 *                                    instead of its weights),
 *                                    raw and rescored from MULT x K
 *                                    candidates, recall@k against truth.bin
 *   search faiss DIR SPEC K THREADS RUNS [PARAMS...]
 *                                    FAISS index SPEC built from the index's
 *                                    vectors (approximate ones cached in
 *                                    DIR), searched once per PARAMS setting
 *                                    ("nprobe=16", "efSearch=64", "-": none)
 *   search faiss-binary DIR K THREADS RUNS
 *                                    FAISS IndexBinaryFlat over the sign
 *                                    bits of the vectors (lipi's binary
 *                                    codes), the queries coded in the timed
 *                                    part as lipi's search codes them
 *
 * Times are the median of RUNS runs over all queries (SEARCH_QUERIES=N: the
 * first N) after one warm-up run; QPS = queries / median time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "retrieval/faiss_bind.h"
#include "retrieval/retrieval.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Resets the process's peak RSS (Linux: "5" to clear_refs), so that the
 * peak of the search phase can be told from the build's. */
static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* VmHWM in MiB, or -1. */
static double peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const lipi_error *err)
{
    fprintf(stderr, "search: %s: %s%s%s\n", what, err->path, err->path[0] ? ": " : "",
            err->msg);
    exit(1);
}

static uint64_t rng = 0x5eed;

static double unit(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

/* rows (n, d) of Gaussian noise scaled to unit length: uniform on the sphere */
static void random_units(float *x, size_t n, size_t d)
{
    for (size_t i = 0; i < n; i++) {
        double ss = 0;
        for (size_t j = 0; j < d; j++) {
            double g = sqrt(-2 * log(unit())) * cos(6.283185307179586 * unit());
            x[i * d + j] = (float)g;
            ss += g * g;
        }
        for (size_t j = 0; j < d; j++)
            x[i * d + j] = (float)(x[i * d + j] / sqrt(ss));
    }
}

static int gen(const char *dir, size_t n, size_t d, size_t nq)
{
    char path[4096];
    lipi_error err = {0};
    mkdir(dir, 0755);
    enum { CHUNK = 65536 };
    float *x = malloc(sizeof(float) * CHUNK * d);
    char(*text)[24] = malloc(sizeof *text * CHUNK);
    const char **ptrs = malloc(sizeof *ptrs * CHUNK);
    size_t *lens = malloc(sizeof *lens * CHUNK);
    if (!x || !text || !ptrs || !lens)
        return 1;
    snprintf(path, sizeof path, "%s/index", dir);
    lipi_index_model model = {.lipi_version = "bench"};
    lipi_index_write_options wo = {.no_sync = true};
    lipi_index_builder *b = NULL;
    if (lipi_index_builder_new(path, &model, d, &wo, &b, &err) != LIPI_OK)
        die("index", &err);
    for (size_t r = 0; r < n; r += CHUNK) {
        size_t m = r + CHUNK < n ? CHUNK : n - r;
        random_units(x, m, d);
        for (size_t i = 0; i < m; i++) {
            lens[i] = (size_t)snprintf(text[i], sizeof text[i], "doc %zu", r + i + 1);
            ptrs[i] = text[i];
        }
        if (lipi_index_builder_add(b, x, m, ptrs, lens, &err) != LIPI_OK)
            die("index", &err);
    }
    if (lipi_index_builder_commit(b, &err) != LIPI_OK)
        die("index", &err);
    float *q = malloc(sizeof(float) * nq * d);
    if (!q)
        return 1;
    random_units(q, nq, d);
    snprintf(path, sizeof path, "%s/queries.npy", dir);
    if (lipi_npy_write(path, q, nq, d, &err) != LIPI_OK)
        die("queries", &err);
    free(q);
    free(x);
    free(text);
    free(ptrs);
    free(lens);
    return 0;
}

static lipi_npy_map *load_queries(const char *dir)
{
    char path[4096];
    lipi_error err = {0};
    lipi_npy_map *q = NULL;
    snprintf(path, sizeof path, "%s/queries.npy", dir);
    if (lipi_npy_map_open(path, &q, &err) != LIPI_OK)
        die("queries", &err);
    return q;
}

/* t: wall times of the runs, cpu: CPU seconds of all of them */
static void report(const char *name, const char *params, size_t nq, double *t, size_t runs,
                   double cpu, double recall)
{
    qsort(t, runs, sizeof *t, cmp_double);
    printf("%-26s %-12s %9.1f QPS  (%.3f s median, %.3f-%.3f; %.0f queries per CPU second)",
           name, params, (double)nq / t[runs / 2], t[runs / 2], t[0], t[runs - 1],
           (double)nq * (double)runs / cpu);
    if (recall >= 0)
        printf("  recall@k %.4f", recall);
    printf("\n");
    fflush(stdout);
}

static int run_lipi(const char *dir, size_t k, size_t threads, size_t runs)
{
    char path[4096];
    lipi_error err = {0};
    lipi_index *idx = NULL;
    snprintf(path, sizeof path, "%s/index", dir);
    lipi_index_open_options oo = {.skip_faiss = true};
    if (lipi_index_open(path, &oo, &idx, &err) != LIPI_OK)
        die("open", &err);
    lipi_npy_map *qm = load_queries(dir);
    size_t nq = lipi_npy_map_rows(qm), d = lipi_npy_map_cols(qm);
    const float *q = lipi_npy_map_data(qm);
    int64_t *docs = malloc(sizeof *docs * nq * k);
    float *scores = malloc(sizeof *scores * nq * k);
    double *t = malloc(sizeof *t * runs);
    if (!docs || !scores || !t)
        return 1;
    lipi_search_options so = {.threads = threads};
    if (lipi_index_search(idx, q, nq, d, k, &so, docs, scores, &err) != LIPI_OK)
        die("search", &err);

    /* Check 5 queries against brute force before timing: their scores, and
     * that no more than k-1 documents score above the k-th hit. The vectors
     * are read, not mapped, so the check does not count in the peak RSS. */
    enum { CHECK = 5, CHUNK = 8192 };
    size_t nc = nq < CHECK ? nq : CHECK, above[CHECK] = {0};
    float *buf = malloc(sizeof(float) * CHUNK * d);
    snprintf(path, sizeof path, "%s/index/vectors.npy", dir);
    FILE *vf = fopen(path, "rb");
    size_t n = lipi_index_count(idx);
    if (!buf || !vf || fseek(vf, 128, SEEK_SET) != 0)
        return 1;
    for (size_t r0 = 0; r0 < n; r0 += CHUNK) {
        size_t m = r0 + CHUNK < n ? CHUNK : n - r0;
        if (fread(buf, sizeof(float) * d, m, vf) != m)
            return 1;
        for (size_t i = 0; i < nc; i++)
            for (size_t j = 0; j < m; j++) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += (double)q[i * d + c] * buf[j * d + c];
                above[i] += s > scores[i * k + k - 1] + 1e-5;
                for (size_t r = 0; r < k; r++)
                    if (docs[i * k + r] == (int64_t)(r0 + j) &&
                        (fabs(s - scores[i * k + r]) > 1e-5 ||
                         (r && scores[i * k + r] > scores[i * k + r - 1]))) {
                        fprintf(stderr, "search: query %zu rank %zu: score %g, brute force %g\n",
                                i, r, (double)scores[i * k + r], s);
                        return 1;
                    }
            }
    }
    fclose(vf);
    free(buf);
    for (size_t i = 0; i < nc; i++)
        if (above[i] > k - 1) {
            fprintf(stderr, "search: query %zu: %zu documents beat the k-th hit\n", i, above[i]);
            return 1;
        }

    reset_peak();
    double c0 = cpu_seconds();
    for (size_t r = 0; r < runs; r++) {
        double t0 = now();
        if (lipi_index_search(idx, q, nq, d, k, &so, docs, scores, &err) != LIPI_OK)
            die("search", &err);
        t[r] = now() - t0;
    }
    report("lipi exact", "-", nq, t, runs, cpu_seconds() - c0, -1);
    printf("  peak RSS while searching %.0f MiB\n", peak_mib());
    snprintf(path, sizeof path, "%s/truth.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(docs, sizeof *docs, nq * k, f) != nq * k || fclose(f) != 0) {
        fprintf(stderr, "search: cannot write %s\n", path);
        return 1;
    }
    free(docs);
    free(scores);
    free(t);
    lipi_npy_map_close(qm);
    lipi_index_close(idx);
    return 0;
}

/* Share of the exact top-k that the approximate top-k found. */
static double recall_at_k(const int64_t *truth, const int64_t *got, size_t nq, size_t k)
{
    size_t hit = 0;
    for (size_t i = 0; i < nq; i++)
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++)
                if (got[i * k + a] == truth[i * k + b] && got[i * k + a] >= 0) {
                    hit++;
                    break;
                }
    return (double)hit / (double)(nq * k);
}

/* Rows and dimension of DIR/index. */
static void index_shape(const char *dir, size_t *n, size_t *d)
{
    char path[4096];
    lipi_error err = {0};
    lipi_index *idx = NULL;
    snprintf(path, sizeof path, "%s/index", dir);
    lipi_index_open_options oo = {.skip_faiss = true};
    if (lipi_index_open(path, &oo, &idx, &err) != LIPI_OK)
        die("open", &err);
    *n = lipi_index_count(idx);
    *d = lipi_index_dim(idx);
    lipi_index_close(idx);
}

/* Builds the FAISS index from the index's vectors a chunk at a time (read,
 * not mapped, so the mapping does not count in this process's RSS). */
static lipi_faiss *build_faiss(const char *dir, const char *spec, size_t threads)
{
    char path[4096];
    lipi_error err = {0};
    size_t n, d;
    index_shape(dir, &n, &d);
    /* 262144 rows train IVF1024 (FAISS's own sample size); other indexes
     * are fed in small chunks so the buffer adds little to the peak RSS. */
    size_t first = strstr(spec, "IVF") ? 262144 : 16384, chunk = 16384;
    float *buf = malloc(sizeof(float) * first * d);
    snprintf(path, sizeof path, "%s/index/vectors.npy", dir);
    FILE *f = fopen(path, "rb");
    if (!buf || !f || fseek(f, 128, SEEK_SET) != 0)
        return NULL;
    lipi_faiss *fi = NULL;
    for (size_t r = 0; r < n;) {
        size_t step = r == 0 ? first : chunk;
        size_t m = r + step < n ? step : n - r;
        if (fread(buf, sizeof(float) * d, m, f) != m)
            return NULL;
        lipi_status st = r == 0 ? lipi_faiss_build(spec, buf, m, d, threads, &fi, &err)
                                : lipi_faiss_add(fi, buf, m, threads, &err);
        if (st != LIPI_OK)
            die(spec, &err);
        r += m;
    }
    fclose(f);
    free(buf);
    return fi;
}

/* One approximate search setting's timed runs over the queries of DIR,
 * with recall@k against DIR/truth.bin (written by the lipi mode). */
typedef struct {
    lipi_npy_map *qm;
    const float *q;
    size_t nq, d, k, runs;
    int64_t *docs, *truth;
    float *scores;
    double *t;
    bool have_truth;
} timed;

static void timed_open(timed *b, const char *dir, size_t k, size_t runs)
{
    char path[4096];
    b->qm = load_queries(dir);
    b->nq = lipi_npy_map_rows(b->qm);
    /* SEARCH_QUERIES=N: the first N queries only (for FAISS SQ8, which
     * scans at tens of queries per CPU-second); truth.bin's first rows
     * are theirs. */
    const char *lim = getenv("SEARCH_QUERIES");
    if (lim && strtoul(lim, NULL, 10) && strtoul(lim, NULL, 10) < b->nq)
        b->nq = strtoul(lim, NULL, 10);
    b->d = lipi_npy_map_cols(b->qm);
    b->q = lipi_npy_map_data(b->qm);
    b->k = k;
    b->runs = runs;
    b->docs = malloc(sizeof *b->docs * b->nq * k);
    b->truth = malloc(sizeof *b->truth * b->nq * k);
    b->scores = malloc(sizeof *b->scores * b->nq * k);
    b->t = malloc(sizeof *b->t * runs);
    if (!b->docs || !b->truth || !b->scores || !b->t)
        exit(1);
    snprintf(path, sizeof path, "%s/truth.bin", dir);
    FILE *f = fopen(path, "rb");
    b->have_truth = f && fread(b->truth, sizeof *b->truth, b->nq * k, f) == b->nq * k;
    if (f)
        fclose(f);
    reset_peak();
}

/* Searches all queries into b->docs / b->scores; dies on failure. */
typedef void (*timed_search)(void *ctx, timed *b);

/* A warm-up search, then b->runs timed ones; prints the row. */
static void timed_run(timed *b, timed_search fn, void *ctx, const char *name, const char *params)
{
    fn(ctx, b);
    double c0 = cpu_seconds();
    for (size_t r = 0; r < b->runs; r++) {
        double t1 = now();
        fn(ctx, b);
        b->t[r] = now() - t1;
    }
    report(name, params, b->nq, b->t, b->runs, cpu_seconds() - c0,
           b->have_truth ? recall_at_k(b->truth, b->docs, b->nq, b->k) : -1);
}

static void timed_close(timed *b)
{
    printf("  peak RSS while searching %.0f MiB\n", peak_mib());
    lipi_npy_map_close(b->qm);
    free(b->docs);
    free(b->truth);
    free(b->scores);
    free(b->t);
}

/* Bytes of dir/name, or 0. */
static double file_mib(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 ? (double)sb.st_size / (1 << 20) : 0;
}

/* Writes DIR/index-Q: the rows of DIR/index (read a chunk at a time) with
 * quantization Q. */
static void build_quantized(const char *dir, const char *out, lipi_quantization qz,
                            lipi_binary_threshold bt)
{
    char path[4096];
    lipi_error err = {0};
    lipi_index *src = NULL;
    snprintf(path, sizeof path, "%s/index", dir);
    lipi_index_open_options oo = {.skip_faiss = true};
    if (lipi_index_open(path, &oo, &src, &err) != LIPI_OK)
        die("open", &err);
    size_t n = lipi_index_count(src), d = lipi_index_dim(src);
    enum { CHUNK = 16384 };
    float *buf = malloc(sizeof(float) * CHUNK * d);
    const char **ptrs = malloc(sizeof *ptrs * CHUNK);
    size_t *lens = malloc(sizeof *lens * CHUNK);
    snprintf(path, sizeof path, "%s/index/vectors.npy", dir);
    FILE *f = fopen(path, "rb");
    lipi_index_model model = {.lipi_version = "bench"};
    lipi_index_write_options wo = {.no_sync = true, .quantize = qz, .binary_threshold = bt};
    lipi_index_builder *b = NULL;
    if (!buf || !ptrs || !lens || !f || fseek(f, 128, SEEK_SET) != 0)
        exit(1);
    if (lipi_index_builder_new(out, &model, d, &wo, &b, &err) != LIPI_OK)
        die(out, &err);
    for (size_t r = 0; r < n; r += CHUNK) {
        size_t m = r + CHUNK < n ? CHUNK : n - r;
        if (fread(buf, sizeof(float) * d, m, f) != m)
            exit(1);
        for (size_t i = 0; i < m; i++)
            if (lipi_index_get_text(src, r + i, &ptrs[i], &lens[i], &err) != LIPI_OK)
                die("text", &err);
        if (lipi_index_builder_add(b, buf, m, ptrs, lens, &err) != LIPI_OK)
            die(out, &err);
    }
    if (lipi_index_builder_commit(b, &err) != LIPI_OK)
        die(out, &err);
    fclose(f);
    free(buf);
    free(ptrs);
    free(lens);
    lipi_index_close(src);
}

typedef struct {
    lipi_index *idx;
    lipi_search_options so;
} quant_job;

static void quant_search(void *ctx, timed *b)
{
    quant_job *j = ctx;
    lipi_error err = {0};
    if (lipi_index_search(j->idx, b->q, b->nq, b->d, b->k, &j->so, b->docs, b->scores, &err) !=
        LIPI_OK)
        die("search", &err);
}

static int run_quant(const char *dir, const char *qname, size_t k, size_t threads, size_t runs,
                     char **mults, int nmults)
{
    char path[4096], label[64];
    lipi_error err = {0};
    lipi_quantization qz;
    bool codes = strcmp(qname, "int8-codes") == 0;
    bool binary = strncmp(qname, "binary", 6) == 0, zero = strstr(qname, "-zero") != NULL;
    bool bits = binary && strstr(qname, "-bits") != NULL;
    if (codes)
        qz = LIPI_QUANT_INT8;
    else if (binary)
        qz = LIPI_QUANT_BINARY;
    else if (!lipi_quantization_parse(qname, &qz) || qz == LIPI_QUANT_NONE) {
        fprintf(stderr, "search: quant takes int8, int8-codes, binary[-zero][-bits], not "
                        "'%s'\n", qname);
        return 2;
    }
    lipi_binary_threshold bt = !binary ? LIPI_BINARY_THRESHOLD_DEFAULT
                               : zero  ? LIPI_BINARY_THRESHOLD_ZERO
                                       : LIPI_BINARY_THRESHOLD_MEAN;
    snprintf(path, sizeof path, "%s/index-%s%s", dir, lipi_quantization_name(qz),
             binary ? (zero ? "-zero" : "-mean") : "");
    struct stat sb;
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/meta.json", path);
    if (stat(meta, &sb) != 0) {
        double t0 = now();
        build_quantized(dir, path, qz, bt);
        printf("lipi %-9s built in %.1f s\n", qname, now() - t0);
    }
    printf("lipi %-9s quantized.npy %.1f MiB (vectors.npy %.1f MiB, read for candidates only)\n",
           qname, file_mib(path, "quantized.npy"), file_mib(path, "vectors.npy"));
    quant_job job = {.so = {.threads = threads, .int8_query_codes = codes,
                            .binary_query_bits = bits}};
    if (lipi_index_open(path, NULL, &job.idx, &err) != LIPI_OK)
        die("open", &err);
    timed b;
    timed_open(&b, dir, k, runs);
    snprintf(label, sizeof label, "lipi %s", qname);
    /* first without rescoring, then from each MULT x k candidates */
    for (int p = -1; p < nmults; p++) {
        size_t mult = p < 0 ? 0 : strtoul(mults[p], NULL, 10);
        job.so.no_rescore = mult == 0;
        job.so.rescore_multiplier = mult;
        char params[32];
        snprintf(params, sizeof params, mult ? "rescore x%zu" : "no rescore", mult);
        timed_run(&b, quant_search, &job, label, params);
    }
    timed_close(&b);
    lipi_index_close(job.idx);
    return 0;
}

typedef struct {
    lipi_faiss_binary *fb;
    size_t threads, nb;
    uint8_t *qc;     /* the queries' codes (nq, nb) */
    int32_t *dist;   /* (nq, k) */
} faiss_binary_job;

/* As lipi's binary search: the queries' sign bits, then the search. */
static void faiss_binary_search(void *ctx, timed *b)
{
    faiss_binary_job *j = ctx;
    lipi_error err = {0};
    lipi_quantize_binary(b->q, b->nq, b->d, NULL, j->qc);
    if (lipi_faiss_binary_search(j->fb, j->qc, b->nq, b->k, j->threads, b->docs, j->dist, &err) !=
        LIPI_OK)
        die("search", &err);
}

/* FAISS's IndexBinaryFlat over the sign bits of the index's vectors (read
 * a chunk at a time, coded as lipi's binary quantization codes them). */
static int run_faiss_binary(const char *dir, size_t k, size_t threads, size_t runs)
{
    char path[4096];
    lipi_error err = {0};
    size_t n, d;
    index_shape(dir, &n, &d);
    size_t nb = (d + 7) / 8;
    enum { CHUNK = 16384 };
    float *buf = malloc(sizeof(float) * CHUNK * d);
    uint8_t *codes = malloc(CHUNK * nb);
    snprintf(path, sizeof path, "%s/index/vectors.npy", dir);
    FILE *f = fopen(path, "rb");
    faiss_binary_job job = {.threads = threads, .nb = nb};
    double t0 = now();
    if (!buf || !codes || !f || fseek(f, 128, SEEK_SET) != 0)
        return 1;
    if (lipi_faiss_binary_new(nb, &job.fb, &err) != LIPI_OK)
        die("BinaryFlat", &err);
    for (size_t r = 0; r < n; r += CHUNK) {
        size_t m = r + CHUNK < n ? CHUNK : n - r;
        if (fread(buf, sizeof(float) * d, m, f) != m)
            return 1;
        lipi_quantize_binary(buf, m, d, NULL, codes);
        if (lipi_faiss_binary_add(job.fb, codes, m, &err) != LIPI_OK)
            die("BinaryFlat", &err);
    }
    fclose(f);
    free(buf);
    free(codes);
    printf("%-14s built in %.1f s, codes %.1f MiB\n", "BinaryFlat", now() - t0,
           (double)n * (double)nb / (1 << 20));
    timed b;
    timed_open(&b, dir, k, runs);
    job.qc = malloc(b.nq * nb);
    job.dist = malloc(sizeof *job.dist * b.nq * k);
    if (!job.qc || !job.dist)
        return 1;
    timed_run(&b, faiss_binary_search, &job, "faiss BinaryFlat", "-");
    timed_close(&b);
    free(job.qc);
    free(job.dist);
    lipi_faiss_binary_free(job.fb);
    return 0;
}

/* OpenBLAS (FAISS's BLAS here) names the kernels it chose. */
char *openblas_get_corename(void);

typedef struct {
    lipi_faiss *fi;
    size_t threads;
} faiss_job;

static void faiss_search(void *ctx, timed *b)
{
    faiss_job *j = ctx;
    lipi_error err = {0};
    if (lipi_faiss_search(j->fi, b->q, b->nq, b->k, j->threads, b->docs, b->scores, &err) !=
        LIPI_OK)
        die("search", &err);
}

static int run_faiss(const char *dir, const char *spec, size_t k, size_t threads, size_t runs,
                     char **params, int nparams)
{
    char cache[4096];
    lipi_error err = {0};
    lipi_faiss *fi = NULL;
    bool flat = strcmp(spec, "Flat") == 0;
    snprintf(cache, sizeof cache, "%s/faiss-", dir);
    for (const char *s = spec; *s; s++) {
        size_t l = strlen(cache);
        cache[l] = (*s == ',' || *s == '/') ? '_' : *s;
        cache[l + 1] = '\0';
    }
    strcat(cache, ".index");
    struct stat sb;
    double t0 = now();
    if (!flat && stat(cache, &sb) == 0) {
        if (lipi_faiss_read(cache, &fi, &err) != LIPI_OK)
            die(cache, &err);
        printf("%-14s loaded from %s (OpenBLAS kernels: %s)\n", spec, cache,
               openblas_get_corename());
    } else {
        if (!(fi = build_faiss(dir, spec, threads))) {
            fprintf(stderr, "search: cannot read the vectors\n");
            return 1;
        }
        printf("%-14s built in %.1f s (OpenBLAS kernels: %s)\n", spec, now() - t0,
               openblas_get_corename());
        if (!flat && lipi_faiss_write(fi, cache, &err) != LIPI_OK)
            die(cache, &err);
    }
    if (!flat && stat(cache, &sb) == 0)
        printf("%-14s index file %.1f MiB\n", spec, (double)sb.st_size / (1 << 20));
    fflush(stdout);
    timed b;
    timed_open(&b, dir, k, runs);
    faiss_job job = {fi, threads};
    static char *none[] = {"-"};
    if (nparams == 0) {
        params = none;
        nparams = 1;
    }
    char name[64];
    if (b.nq < lipi_npy_map_rows(b.qm))
        snprintf(name, sizeof name, "faiss %s (%zu q)", spec, b.nq);
    else
        snprintf(name, sizeof name, "faiss %s", spec);
    for (int p = 0; p < nparams; p++) {
        if (strcmp(params[p], "-") != 0 && lipi_faiss_set_params(fi, params[p], &err) != LIPI_OK)
            die(params[p], &err);
        timed_run(&b, faiss_search, &job, name, params[p]);
    }
    timed_close(&b);
    lipi_faiss_free(fi);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "gen") == 0)
        return gen(argv[2], strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10),
                   strtoul(argv[5], NULL, 10));
    if (argc >= 6 && strcmp(argv[1], "lipi") == 0)
        return run_lipi(argv[2], strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10),
                        strtoul(argv[5], NULL, 10));
    if (argc >= 7 && strcmp(argv[1], "quant") == 0)
        return run_quant(argv[2], argv[3], strtoul(argv[4], NULL, 10), strtoul(argv[5], NULL, 10),
                         strtoul(argv[6], NULL, 10), argv + 7, argc - 7);
    if (argc >= 6 && strcmp(argv[1], "faiss-binary") == 0) {
        if (!lipi_faiss_available()) {
            printf("faiss          skipped: lipi was built without FAISS\n");
            return 0;
        }
        return run_faiss_binary(argv[2], strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10),
                                strtoul(argv[5], NULL, 10));
    }
    if (argc >= 7 && strcmp(argv[1], "faiss") == 0) {
        if (!lipi_faiss_available()) {
            printf("faiss          skipped: lipi was built without FAISS\n");
            return 0;
        }
        return run_faiss(argv[2], argv[3], strtoul(argv[4], NULL, 10),
                         strtoul(argv[5], NULL, 10), strtoul(argv[6], NULL, 10), argv + 7,
                         argc - 7);
    }
    fprintf(stderr, "usage: search gen DIR N DIM NQ | lipi DIR K THREADS RUNS | "
                    "quant DIR Q K THREADS RUNS [MULT...] | faiss DIR SPEC K THREADS RUNS "
                    "[PARAMS...] | faiss-binary DIR K THREADS RUNS\n");
    return 2;
}

/* GEMM backends on BERT-shaped projections: out (T, N) = x (T, K) . w (N, K)^T,
 * GFLOP/s (median of 7 runs after a warm-up), for
 *   - oneDNN dnnl_sgemm called directly with 1 and 2 OpenMP threads;
 *   - OpenBLAS cblas_sgemm with 1 and 2 threads (its kernel choice depends on
 *     OPENBLAS_CORETYPE, read when the library loads: run this program with
 *     the variable unset, set to SkylakeX, set to Haswell, ...);
 *   - lipi's tiled path (pipeline/forward.c: fixed tiles over the session's
 *     threads, bias epilogue) on the backend it picks and on its portable
 *     kernel.
 * Build and run from the repository root: sh bench/gemm.sh [BUILD] (runs it
 * with OPENBLAS_CORETYPE as the environment has it, then unset).
 * `bench_gemm peak` prints only the sgemm peak bench/embed.sh divides by:
 * "sgemm_peak THREADS GFLOP/s GFLOP/CPU-s", oneDNN on 4096 x 3072 x 768 (the
 * FFN's first GEMM), best of 7 runs by wall time and by process CPU time
 * (the one to compare on a shared machine), for 1 and 2 threads. */
#include <cblas.h>
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model_impl.h"

void omp_set_num_threads(int n);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int which, threads;
    lipi_model_session *s;
} runner;

static void run_once(const runner *r, size_t M, size_t N, size_t K, const float *a,
                     const float *w, const float *bias, float *c)
{
    switch (r->which) {
    case 0:
        dnnl_sgemm('N', 'T', (dnnl_dim_t)M, (dnnl_dim_t)N, (dnnl_dim_t)K, 1.0f, a,
                   (dnnl_dim_t)K, w, (dnnl_dim_t)K, 0.0f, c, (dnnl_dim_t)N);
        break;
    case 1:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, a,
                    (int)K, w, (int)K, 0.0f, c, (int)N);
        break;
    default:
        lipi_session_linear(r->s, M, N, K, a, w, bias, LIPI_ACT_NONE, NULL, c);
        break;
    }
}

static double measure(const runner *r, size_t M, size_t N, size_t K, const float *a,
                      const float *w, const float *bias, float *c)
{
    double t[7];
    run_once(r, M, N, K, a, w, bias, c);
    for (int i = 0; i < 7; i++) {
        double t0 = now();
        run_once(r, M, N, K, a, w, bias, c);
        t[i] = now() - t0;
    }
    qsort(t, 7, sizeof t[0], cmp_double);
    return 2.0 * (double)M * (double)N * (double)K / t[3] * 1e-9;
}

static int peak(void)
{
    size_t M = 4096, N = 3072, K = 768;
    float *a = calloc(M * K, sizeof(float)), *w = calloc(N * K, sizeof(float));
    float *c = malloc(M * N * sizeof(float));
    if (!a || !w || !c)
        return 1;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        runner r = {0, threads, NULL};
        double best = 1e30, best_cpu = 1e30, fl = 2.0 * (double)M * (double)N * (double)K;
        run_once(&r, M, N, K, a, w, NULL, c);
        for (int i = 0; i < 7; i++) {
            double t0 = now(), c0 = cpu_now();
            run_once(&r, M, N, K, a, w, NULL, c);
            double t = now() - t0, tc = cpu_now() - c0;
            best = t < best ? t : best;
            best_cpu = tc < best_cpu ? tc : best_cpu;
        }
        printf("sgemm_peak %d %.1f %.1f\n", threads, fl / best * 1e-9, fl / best_cpu * 1e-9);
    }
    free(a);
    free(w);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "peak"))
        return peak();
    static const size_t shapes[][3] = {
        {4096, 2304, 768}, {4096, 768, 768},  {4096, 3072, 768}, {4096, 768, 3072},
        {4096, 1152, 384}, {4096, 384, 384},  {4096, 1536, 384}, {4096, 384, 1536},
        {128, 2304, 768},  {128, 3072, 768},  {128, 768, 3072},
    };
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("# GFLOP/s, median of 7; OPENBLAS_CORETYPE=%s; lipi backend: %s\n",
           ct ? ct : "(unset)", lipi_gemm_backend());
    printf("%-18s %9s %9s %9s %9s %9s %9s %9s %9s\n", "M x N x K", "dnnl/1", "dnnl/2",
           "oblas/1", "oblas/2", "lipi/1", "lipi/2", "port/1", "port/2");
    lipi_model_session *s1 = NULL, *s2 = NULL, *p1 = NULL, *p2 = NULL;
    if (lipi_model_session_new(NULL, 1, &s1, NULL) || lipi_model_session_new(NULL, 2, &s2, NULL) ||
        lipi_model_session_new(NULL, 1, &p1, NULL) || lipi_model_session_new(NULL, 2, &p2, NULL))
        return 1;
    lipi_model_session_set_gemm(p1, LIPI_GEMM_PORTABLE);
    lipi_model_session_set_gemm(p2, LIPI_GEMM_PORTABLE);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        float *a = malloc(M * K * sizeof(float)), *w = malloc(N * K * sizeof(float));
        float *c = malloc(M * N * sizeof(float)), *bias = calloc(N, sizeof(float));
        for (size_t j = 0; j < M * K; j++)
            a[j] = (float)(j % 13) * 0.01f;
        for (size_t j = 0; j < N * K; j++)
            w[j] = (float)(j % 7) * 0.01f;
        double g[8];
        runner rs[8] = {{0, 1, NULL}, {0, 2, NULL}, {1, 1, NULL}, {1, 2, NULL},
                        {2, 1, s1},   {2, 2, s2},   {2, 1, p1},   {2, 2, p2}};
        for (int k = 0; k < 8; k++) {
            omp_set_num_threads(rs[k].threads);
            openblas_set_num_threads(rs[k].threads);
            /* The portable kernel is slow on big shapes: time it on 1/8 of the rows. */
            size_t m = k >= 6 && M > 512 ? M / 8 : M;
            g[k] = measure(&rs[k], m, N, K, a, w, bias, c);
        }
        printf("%4zux%4zux%4zu    ", M, N, K);
        for (int k = 0; k < 8; k++)
            printf(" %9.1f", g[k]);
        printf("\n");
        free(a);
        free(w);
        free(c);
        free(bias);
    }
    lipi_model_session_free(s1);
    lipi_model_session_free(s2);
    lipi_model_session_free(p1);
    lipi_model_session_free(p2);
    return 0;
}

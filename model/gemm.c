/* GEMM backends. Measured on the project's machines (bench/gemm.c and
 * ../shared/BENCHMARKS.md): oneDNN's dnnl_sgemm reaches full AVX-512 speed
 * with no environment variable, while Debian's OpenBLAS picks its kernels
 * from OPENBLAS_CORETYPE (or a CPU table that misses recent CPUs) and runs
 * up to 5x slower when that goes wrong. So lipi loads libdnnl.so.2 at run
 * time when it is installed and otherwise uses its own portable kernel.
 * Every call here is single-threaded: the session splits the work into
 * fixed tiles so results do not depend on the thread count. oneDNN is
 * OpenMP-threaded; lipi_gemm_thread_enter pins the calling thread's team to
 * one thread. */
#include "model/model_impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int (*dnnl_sgemm_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                             const float *A, int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc);
typedef int (*dnnl_igemm_fn)(char ta, char tb, char offc, int64_t M, int64_t N, int64_t K,
                             float alpha, const uint8_t *A, int64_t lda, uint8_t ao,
                             const int8_t *B, int64_t ldb, int8_t bo, float beta, int32_t *C,
                             int64_t ldc, const int32_t *co);
typedef int (*dnnl_set_isa_fn)(int isa);
typedef void (*omp_set_fn)(int);
typedef int (*omp_get_fn)(void);

static struct {
    pthread_once_t once;
    dnnl_sgemm_fn sgemm;
    dnnl_igemm_fn igemm;
    omp_set_fn omp_set;
    omp_get_fn omp_get;
} dnnl = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL};

static void dnnl_init(void)
{
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    dnnl_sgemm_fn f = (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm");
    omp_set_fn s = (omp_set_fn)dlsym(h, "omp_set_num_threads");
    omp_get_fn g = (omp_get_fn)dlsym(h, "omp_get_max_threads");
    /* Without control over its OpenMP team, nested teams would
     * oversubscribe the cores: use the portable kernel instead. */
    if (!f || !s || !g) {
        dlclose(h);
        return;
    }
    /* On CPUs with AMX, oneDNN 2.6's u8s8s32 GEMM takes AMX kernels and then
     * walks every element of C once more in a scalar loop for row and column
     * sums it does not have (perf: a third of `lipi embed --dtype int8`).
     * Capped at AVX-512 VNNI, the same integer sums take 0.77x the time on
     * one thread, 0.69x on two (MiniLM shape, short sentences, Xeon with
     * AMX). No effect on CPUs below that ISA, nor on f32 (no AMX there);
     * a user's ONEDNN_MAX_CPU_ISA is left to decide. */
    dnnl_set_isa_fn isa = (dnnl_set_isa_fn)dlsym(h, "dnnl_set_max_cpu_isa");
    if (isa && !getenv("ONEDNN_MAX_CPU_ISA") && !getenv("DNNL_MAX_CPU_ISA"))
        (void)isa(0x67); /* dnnl_cpu_isa_avx512_core_vnni */
    dnnl.sgemm = f;
    dnnl.igemm = (dnnl_igemm_fn)dlsym(h, "dnnl_gemm_u8s8s32");
    dnnl.omp_set = s;
    dnnl.omp_get = g;
    /* The library stays loaded for the life of the process. */
}

lipi_gemm_kind lipi_gemm_resolve(lipi_gemm_kind k)
{
    if (k == LIPI_GEMM_PORTABLE)
        return k;
    pthread_once(&dnnl.once, dnnl_init);
    return dnnl.sgemm ? LIPI_GEMM_ONEDNN : LIPI_GEMM_PORTABLE;
}

const char *lipi_gemm_backend(void)
{
    return lipi_gemm_resolve(LIPI_GEMM_AUTO) == LIPI_GEMM_ONEDNN ? "onednn" : "portable";
}

int lipi_gemm_thread_enter(void)
{
    if (lipi_gemm_resolve(LIPI_GEMM_AUTO) != LIPI_GEMM_ONEDNN)
        return 0;
    int prev = dnnl.omp_get();
    dnnl.omp_set(1);
    return prev;
}

void lipi_gemm_thread_restore(int prev)
{
    if (prev > 0 && dnnl.omp_set)
        dnnl.omp_set(prev);
}

/* ------------------------------------------------------------------------ */
/* Reference kernels: the plain definition, double accumulation.            */
/* ------------------------------------------------------------------------ */

/* a: (M, K), b: (N, K) -> c: (M, N) = a . b^T */
void lipi_sgemm_nt_ref(size_t M, size_t N, size_t K, const float *a, size_t lda,
                       const float *b, size_t ldb, float *c, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0;
            for (size_t k = 0; k < K; k++)
                s += (double)a[i * lda + k] * b[j * ldb + k];
            c[i * ldc + j] = (float)s;
        }
}

/* a: (M, K), b: (K, N) -> c: (M, N) = a . b */
void lipi_sgemm_nn_ref(size_t M, size_t N, size_t K, const float *a, size_t lda,
                       const float *b, size_t ldb, float *c, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0;
            for (size_t k = 0; k < K; k++)
                s += (double)a[i * lda + k] * b[k * ldb + j];
            c[i * ldc + j] = (float)s;
        }
}

/* ------------------------------------------------------------------------ */
/* Portable kernels: GCC vector extensions, cloned for AVX-512, AVX2 and     */
/* baseline x86-64 (chosen at load time by the CPU), plain C elsewhere.      */
/* ------------------------------------------------------------------------ */

/* The vector helpers are static and inlined, so the ABI note GCC emits for
 * 32-byte vector arguments on baseline x86-64 concerns no real interface. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32)));

static inline v8f load8(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline float hsum8(const v8f *v)
{
    float s = 0;
    for (int l = 0; l < 8; l++)
        s += (*v)[l];
    return s;
}

/* One dot product row i x row j over K. a: (K), b: (K) */
static inline float dot1(const float *a, const float *b, size_t K)
{
    v8f acc = {0};
    size_t k = 0;
    for (; k + 8 <= K; k += 8)
        acc += load8(a + k) * load8(b + k);
    float s = hsum8(&acc);
    for (; k < K; k++)
        s += a[k] * b[k];
    return s;
}

/* a: (M, K), b: (N, K) -> c: (M, N). 4x4 register tiles of dot products,
 * B in panels of 64 rows so a panel stays in L2 while A streams by. */
LIPI_CLONES
static void sgemm_nt_portable(size_t M, size_t N, size_t K, const float *a, size_t lda,
                              const float *b, size_t ldb, float *c, size_t ldc)
{
    for (size_t jb = 0; jb < N; jb += 64) {
        size_t je = jb + 64 < N ? jb + 64 : N;
        size_t i = 0;
        for (; i + 4 <= M; i += 4) {
            size_t j = jb;
            for (; j + 4 <= je; j += 4) {
                v8f acc[4][4] = {{{0}}};
                size_t k = 0;
                for (; k + 8 <= K; k += 8) {
                    v8f av[4], bv[4];
                    for (int r = 0; r < 4; r++) {
                        av[r] = load8(a + (i + r) * lda + k);
                        bv[r] = load8(b + (j + r) * ldb + k);
                    }
                    for (int r = 0; r < 4; r++)
                        for (int s = 0; s < 4; s++)
                            acc[r][s] += av[r] * bv[s];
                }
                for (int r = 0; r < 4; r++)
                    for (int s = 0; s < 4; s++) {
                        float v = hsum8(&acc[r][s]);
                        for (size_t kk = k; kk < K; kk++)
                            v += a[(i + r) * lda + kk] * b[(j + s) * ldb + kk];
                        c[(i + r) * ldc + j + s] = v;
                    }
            }
            for (; j < je; j++)
                for (int r = 0; r < 4; r++)
                    c[(i + r) * ldc + j] = dot1(a + (i + r) * lda, b + j * ldb, K);
        }
        for (; i < M; i++)
            for (size_t j = jb; j < je; j++)
                c[i * ldc + j] = dot1(a + i * lda, b + j * ldb, K);
    }
}

/* a: (M, K), b: (K, N) -> c: (M, N), row by row as axpy updates. */
LIPI_CLONES
static void sgemm_nn_portable(size_t M, size_t N, size_t K, const float *a, size_t lda,
                              const float *b, size_t ldb, float *c, size_t ldc)
{
    for (size_t i = 0; i < M; i++) {
        float *ci = c + i * ldc;
        for (size_t j = 0; j < N; j++)
            ci[j] = 0;
        for (size_t k = 0; k < K; k++) {
            float s = a[i * lda + k];
            const float *bk = b + k * ldb;
            for (size_t j = 0; j < N; j++)
                ci[j] += s * bk[j];
        }
    }
}

void lipi_sgemm_nt(lipi_gemm_kind kind, size_t M, size_t N, size_t K, const float *a,
                   size_t lda, const float *b, size_t ldb, float *c, size_t ldc)
{
    if (!M || !N)
        return;
    if (lipi_gemm_resolve(kind) == LIPI_GEMM_ONEDNN && K) {
        dnnl.sgemm('N', 'T', (int64_t)M, (int64_t)N, (int64_t)K, 1.0f, a, (int64_t)lda, b,
                   (int64_t)ldb, 0.0f, c, (int64_t)ldc);
        return;
    }
    sgemm_nt_portable(M, N, K, a, lda, b, ldb, c, ldc);
}

void lipi_sgemm_nn(lipi_gemm_kind kind, size_t M, size_t N, size_t K, const float *a,
                   size_t lda, const float *b, size_t ldb, float *c, size_t ldc)
{
    if (!M || !N)
        return;
    if (lipi_gemm_resolve(kind) == LIPI_GEMM_ONEDNN && K) {
        dnnl.sgemm('N', 'N', (int64_t)M, (int64_t)N, (int64_t)K, 1.0f, a, (int64_t)lda, b,
                   (int64_t)ldb, 0.0f, c, (int64_t)ldc);
        return;
    }
    sgemm_nn_portable(M, N, K, a, lda, b, ldb, c, ldc);
}

/* ------------------------------------------------------------------------ */
/* int8                                                                      */
/* ------------------------------------------------------------------------ */

bool lipi_igemm_vnni(lipi_gemm_kind kind)
{
    if (lipi_gemm_resolve(kind) != LIPI_GEMM_ONEDNN || !dnnl.igemm)
        return false;
#if defined(__x86_64__) && defined(__GNUC__)
    /* Without VNNI, oneDNN's u8s8 kernels add pairs of products in int16
     * (VPMADDUBSW) and can saturate; VPDPBUSD accumulates in int32. */
    __builtin_cpu_init();
#if defined(__clang__)
    return __builtin_cpu_supports("avx512vnni");
#else
    return __builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avxvnni");
#endif
#else
    return false;
#endif
}

/* a: (M, K) u8, b: (N, K) s8 -> c: (M, N) = a . b^T + co */
void lipi_igemm_nt_ref(size_t M, size_t N, size_t K, const uint8_t *a, size_t lda,
                       const int8_t *b, size_t ldb, const int32_t *co, int32_t *c, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            int64_t s = co[j];
            for (size_t k = 0; k < K; k++)
                s += (int64_t)a[i * lda + k] * b[j * ldb + k];
            c[i * ldc + j] = (int32_t)s;
        }
}

/* a: (M, K) u8, b: (N, K) s8 -> c: (M, N) = a . b^T + co; one A row
 * against four B rows at a time, int32 sums the compiler vectorizes. The
 * body is shared by a baseline build and a VNNI build (where the compiler
 * turns the u8 x s8 dot products into VPDPBUSD) chosen at run time. */
#define IGEMM_BODY                                                                         \
    for (size_t i = 0; i < M; i++) {                                                       \
        const uint8_t *ai = a + i * lda;                                                   \
        size_t j = 0;                                                                      \
        for (; j + 4 <= N; j += 4) {                                                       \
            const int8_t *b0 = b + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb; \
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                        \
            for (size_t k = 0; k < K; k++) {                                               \
                s0 += (int32_t)ai[k] * b0[k];                                              \
                s1 += (int32_t)ai[k] * b1[k];                                              \
                s2 += (int32_t)ai[k] * b2[k];                                              \
                s3 += (int32_t)ai[k] * b3[k];                                              \
            }                                                                              \
            c[i * ldc + j] = s0 + co[j];                                                   \
            c[i * ldc + j + 1] = s1 + co[j + 1];                                           \
            c[i * ldc + j + 2] = s2 + co[j + 2];                                           \
            c[i * ldc + j + 3] = s3 + co[j + 3];                                           \
        }                                                                                  \
        for (; j < N; j++) {                                                               \
            const int8_t *bj = b + j * ldb;                                                \
            int32_t s = 0;                                                                 \
            for (size_t k = 0; k < K; k++)                                                 \
                s += (int32_t)ai[k] * bj[k];                                               \
            c[i * ldc + j] = s + co[j];                                                    \
        }                                                                                  \
    }

LIPI_CLONES
static void igemm_nt_portable(size_t M, size_t N, size_t K, const uint8_t *a, size_t lda,
                              const int8_t *b, size_t ldb, const int32_t *co, int32_t *c,
                              size_t ldc)
{
    IGEMM_BODY
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_IGEMM_VNNI 1
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), optimize("O3")))
static void igemm_nt_vnni(size_t M, size_t N, size_t K, const uint8_t *a, size_t lda,
                          const int8_t *b, size_t ldb, const int32_t *co, int32_t *c, size_t ldc)
{
    IGEMM_BODY
}
#endif

void lipi_igemm_nt(lipi_gemm_kind kind, size_t M, size_t N, size_t K, const uint8_t *a,
                   size_t lda, const int8_t *b, size_t ldb, const int32_t *co, int32_t *c,
                   size_t ldc)
{
    if (!M || !N)
        return;
    if (K && lipi_igemm_vnni(kind)) {
        dnnl.igemm('N', 'T', 'R', (int64_t)M, (int64_t)N, (int64_t)K, 1.0f, a, (int64_t)lda, 0,
                   b, (int64_t)ldb, 0, 0.0f, c, (int64_t)ldc, co);
        return;
    }
#ifdef HAVE_IGEMM_VNNI
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
        igemm_nt_vnni(M, N, K, a, lda, b, ldb, co, c, ldc);
        return;
    }
#endif
    igemm_nt_portable(M, N, K, a, lda, b, ldb, co, c, ldc);
}

/* The BLAS and LAPACK routines that FAISS calls, opened when a FAISS index
 * is first built or read (dlopen), not linked. Linked, OpenBLAS (with
 * libgfortran and libquadmath) was loaded and relocated at the start of
 * every lipi process, and its constructor started a thread per core: 3.7
 * ms of each process on the bench machine (an empty main() linked with
 * -lopenblas: 1.3 -> 5.0 ms), for commands that never search.
 *
 * libfaiss.a refers to these Fortran symbols; the definitions here take
 * their calls and pass them on unchanged. Every argument of these routines
 * is a pointer (Fortran passes by reference), so a wrapper that takes and
 * passes N pointers is the same call as FAISS's own declaration of it.
 * Hidden visibility: they serve the FAISS linked into lipi, and liblipi.so
 * does not export them to the rest of a process. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "retrieval/faiss_bind.h"

#define P6 void *a1, void *a2, void *a3, void *a4, void *a5, void *a6
#define P7 P6, void *a7
#define P8 P7, void *a8
#define P9 P8, void *a9
#define P10 P9, void *a10
#define P13 P10, void *a11, void *a12, void *a13
#define P14 P13, void *a14
#define A6 a1, a2, a3, a4, a5, a6
#define A7 A6, a7
#define A8 A7, a8
#define A9 A8, a9
#define A10 A9, a10
#define A13 A10, a11, a12, a13
#define A14 A13, a14

/* name, arity: the routines libfaiss.a calls (nm -u libfaiss.a). */
#define BLAS_FUNCS(X)                                                                      \
    X(sgemm_, 13) X(dgemm_, 13) X(ssyrk_, 10) X(sgesvd_, 14) X(dgesvd_, 14) X(sgetrf_, 6)  \
    X(dgetrf_, 6) X(sgetri_, 7) X(dgetri_, 7) X(dsyev_, 9) X(sgelsd_, 14) X(sgeqrf_, 8)     \
    X(sorgqr_, 9)

static struct {
    pthread_once_t once;
    const char *error; /* why BLAS cannot be used, or NULL */
#define BLAS_FIELD(f, n) int (*f)(P##n);
    BLAS_FUNCS(BLAS_FIELD)
#undef BLAS_FIELD
} blas = {.once = PTHREAD_ONCE_INIT};

static void blas_load(void)
{
    /* OpenBLAS, else whatever Debian's alternatives make LAPACK (which
     * brings its BLAS). */
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("liblapack.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        blas.error = "cannot load libopenblas.so.0 or liblapack.so.3 (Debian package "
                     "libopenblas0), which FAISS needs";
        return;
    }
#define BLAS_SYM(f, n)                                                                     \
    if (!(*(void **)&blas.f = dlsym(h, #f)) && !blas.error)                                \
        blas.error = "the BLAS/LAPACK library lacks " #f ", which FAISS needs";
    BLAS_FUNCS(BLAS_SYM)
#undef BLAS_SYM
    /* OpenBLAS starts a thread per core that spins in sched_yield() for
     * ~0.1 s waiting for work, taking the second core of a two-core
     * machine from the caller's own threads; it starts them again on its
     * first threaded call. Looked up: another BLAS has no such function. */
    int (*stop)(void);
    *(void **)&stop = dlsym(h, "blas_thread_shutdown_");
    if (stop)
        stop();
}

const char *lipi_blas_open(void)
{
    pthread_once(&blas.once, blas_load);
    return blas.error;
}

/* Reached only through FAISS, which lipi_faiss_build / lipi_faiss_read
 * let run only after lipi_blas_open succeeded: failing here is a bug. */
static void blas_need(void)
{
    if (lipi_blas_open())
        abort();
}

#define BLAS_WRAP(f, n)                                                                    \
    __attribute__((visibility("hidden"))) int f(P##n);                                     \
    int f(P##n)                                                                            \
    {                                                                                      \
        blas_need();                                                                       \
        return blas.f(A##n);                                                               \
    }
BLAS_FUNCS(BLAS_WRAP)
#undef BLAS_WRAP

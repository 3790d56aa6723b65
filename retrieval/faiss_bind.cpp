// FAISS through its C++ API behind lipi's C header (retrieval/faiss_bind.h).
// Debian's libfaiss.a lacks the symbols of FAISS's own C API, so this is the
// one C++ file in lipi: it is compiled only when FAISS is installed, every
// entry point catches every exception, and nothing here prints.
#include "retrieval/faiss_bind.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include <faiss/AutoTune.h>
#include <faiss/IVFlib.h>
#include <faiss/Index.h>
#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <omp.h>

static_assert(sizeof(faiss::Index::idx_t) == sizeof(int64_t), "FAISS ids are 64-bit");

struct lipi_faiss {
    faiss::Index *idx;
};

// FAISS messages read "Error in FUNC at FILE:LINE: MESSAGE"; the message
// alone is what a user can act on.
static const char *faiss_message(const char *what)
{
    for (const char *p = what; *p; p++) {
        if (*p != ':' || p[1] < '0' || p[1] > '9')
            continue;
        const char *q = p + 1;
        while (*q >= '0' && *q <= '9')
            q++;
        if (q[0] == ':' && q[1] == ' ')
            return q + 2;
    }
    return what;
}

static lipi_status fail(lipi_error *err, lipi_status code, const char *path, const char *what)
{
    return lipi_error_set(err, code, path, 0, 0, "FAISS: %s", faiss_message(what));
}

// Runs body, mapping exceptions to statuses: bad_alloc is LIPI_ENOMEM, a
// FAISS error is `code` (LIPI_EINVAL unless the caller knows better).
template <class F>
static lipi_status guarded(lipi_error *err, lipi_status code, const char *path, F body)
{
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "FAISS: out of memory");
    } catch (const faiss::FaissException &e) {
        return fail(err, code, path, e.what());
    } catch (const std::exception &e) {
        return fail(err, code, path, e.what());
    } catch (...) {
        return lipi_error_set(err, code, path, 0, 0, "FAISS: unknown failure");
    }
}

// omp_set_num_threads sets the calling thread's team size only, which is
// the team FAISS's parallel regions started from this thread use.
static void set_threads(size_t threads)
{
    if (threads)
        omp_set_num_threads(threads > 1024 ? 1024 : (int)threads);
}

extern "C" bool lipi_faiss_available(void)
{
    return true;
}

extern "C" lipi_status lipi_faiss_build(const char *spec, const float *x, size_t n, size_t dim,
                                        size_t threads, lipi_faiss **out, lipi_error *err)
{
    *out = NULL;
    if (!dim || dim > (size_t)INT32_MAX || n > (size_t)INT64_MAX)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "FAISS: bad shape (%zu, %zu)", n,
                              dim);
    if (const char *why = lipi_blas_open())
        return lipi_error_set(err, LIPI_EIO, NULL, 0, 0, "%s", why);
    lipi_faiss *f = (lipi_faiss *)lipi_calloc(1, sizeof *f);
    if (!f)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    lipi_status st = guarded(err, LIPI_EINVAL, NULL, [&]() {
        set_threads(threads);
        f->idx = faiss::index_factory((int)dim, spec, faiss::METRIC_INNER_PRODUCT);
        // FAISS warns on stderr when an IVF has few points per list; a
        // library must not print, and the result is still correct.
        if (faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(f->idx))
            ivf->cp.min_points_per_centroid = 1;
        if (!f->idx->is_trained)
            f->idx->train((faiss::Index::idx_t)n, x);
        f->idx->add((faiss::Index::idx_t)n, x);
        return LIPI_OK;
    });
    if (st != LIPI_OK) {
        lipi_faiss_free(f);
        return st;
    }
    *out = f;
    return LIPI_OK;
}

extern "C" lipi_status lipi_faiss_add(lipi_faiss *f, const float *x, size_t n, size_t threads,
                                      lipi_error *err)
{
    return guarded(err, LIPI_EINVAL, NULL, [&]() {
        set_threads(threads);
        f->idx->add((faiss::Index::idx_t)n, x);
        return LIPI_OK;
    });
}

extern "C" lipi_status lipi_faiss_set_params(lipi_faiss *f, const char *params, lipi_error *err)
{
    return guarded(err, LIPI_EINVAL, NULL, [&]() {
        faiss::ParameterSpace().set_index_parameters(f->idx, params);
        return LIPI_OK;
    });
}

extern "C" lipi_status lipi_faiss_search(const lipi_faiss *f, const float *q, size_t nq,
                                         size_t k, size_t threads, int64_t *docs,
                                         float *scores, lipi_error *err)
{
    if (!nq || !k)
        return LIPI_OK;
    return guarded(err, LIPI_EINVAL, NULL, [&]() {
        set_threads(threads);
        f->idx->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, scores,
                       (faiss::Index::idx_t *)docs);
        for (size_t i = 0; i < nq * k; i++)
            if (docs[i] < 0) {
                docs[i] = -1;
                scores[i] = -INFINITY;
            }
        return LIPI_OK;
    });
}

extern "C" lipi_status lipi_faiss_write(const lipi_faiss *f, const char *path, lipi_error *err)
{
    return guarded(err, LIPI_EIO, path, [&]() {
        faiss::write_index(f->idx, path);
        return LIPI_OK;
    });
}

extern "C" lipi_status lipi_faiss_read(const char *path, lipi_faiss **out, lipi_error *err)
{
    *out = NULL;
    // FAISS reports a missing file like a corrupt one; tell them apart.
    FILE *probe = fopen(path, "rb");
    if (!probe)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    fclose(probe);
    if (const char *why = lipi_blas_open())
        return lipi_error_set(err, LIPI_EIO, NULL, 0, 0, "%s", why);
    lipi_faiss *f = (lipi_faiss *)lipi_calloc(1, sizeof *f);
    if (!f)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    lipi_status st = guarded(err, LIPI_EFORMAT, path, [&]() {
        f->idx = faiss::read_index(path);
        if (f->idx->metric_type != faiss::METRIC_INNER_PRODUCT)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "FAISS index: expected the inner-product metric, found "
                                  "metric %d",
                                  (int)f->idx->metric_type);
        return LIPI_OK;
    });
    if (st != LIPI_OK) {
        lipi_faiss_free(f);
        return st;
    }
    *out = f;
    return LIPI_OK;
}

extern "C" size_t lipi_faiss_count(const lipi_faiss *f)
{
    return (size_t)f->idx->ntotal;
}

extern "C" size_t lipi_faiss_dim(const lipi_faiss *f)
{
    return (size_t)f->idx->d;
}

extern "C" void lipi_faiss_free(lipi_faiss *f)
{
    if (!f)
        return;
    delete f->idx;
    lipi_free(f);
}

struct lipi_faiss_binary {
    faiss::IndexBinaryFlat *idx;
};

extern "C" lipi_status lipi_faiss_binary_new(size_t nbytes, lipi_faiss_binary **out,
                                             lipi_error *err)
{
    *out = NULL;
    if (!nbytes || nbytes > (size_t)INT32_MAX / 8)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "FAISS: bad code size %zu bytes",
                              nbytes);
    lipi_faiss_binary *f = (lipi_faiss_binary *)lipi_calloc(1, sizeof *f);
    if (!f)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    lipi_status st = guarded(err, LIPI_EINVAL, NULL, [&]() {
        f->idx = new faiss::IndexBinaryFlat((faiss::Index::idx_t)(nbytes * 8));
        return LIPI_OK;
    });
    if (st != LIPI_OK) {
        lipi_faiss_binary_free(f);
        return st;
    }
    *out = f;
    return LIPI_OK;
}

extern "C" lipi_status lipi_faiss_binary_add(lipi_faiss_binary *f, const uint8_t *codes,
                                             size_t n, lipi_error *err)
{
    return guarded(err, LIPI_EINVAL, NULL, [&]() {
        f->idx->add((faiss::Index::idx_t)n, codes);
        return LIPI_OK;
    });
}

extern "C" lipi_status lipi_faiss_binary_search(const lipi_faiss_binary *f, const uint8_t *q,
                                                size_t nq, size_t k, size_t threads,
                                                int64_t *docs, int32_t *dist, lipi_error *err)
{
    if (!nq || !k)
        return LIPI_OK;
    return guarded(err, LIPI_EINVAL, NULL, [&]() {
        set_threads(threads);
        f->idx->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, dist,
                       (faiss::Index::idx_t *)docs);
        for (size_t i = 0; i < nq * k; i++)
            if (docs[i] < 0)
                docs[i] = -1;
        return LIPI_OK;
    });
}

extern "C" void lipi_faiss_binary_free(lipi_faiss_binary *f)
{
    if (!f)
        return;
    delete f->idx;
    lipi_free(f);
}

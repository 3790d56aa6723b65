/* Retrieval: the on-disk index (pipeline.h, "Retrieval"), exact top-k
 * search as blocked GEMMs over a memory-mapped matrix, bitext metrics, and
 * the FAISS stand-ins of a lipi built without FAISS.
 *
 * Exact search splits the matrix into fixed blocks of rows that threads
 * take in turn. Each block is scored as GEMMs of (query tile) x (row panel)
 * into a small scratch matrix, and each row of scores goes through one
 * bounded heap per query and thread; the heaps are merged at the end. The
 * tiling depends on the options and the inputs only, and the order of hits
 * (score, then lower document) is total, so the thread count never changes
 * a result. Blocks of a large mapped matrix are dropped from the mapping
 * after use (the page cache keeps them), so a search over millions of rows
 * holds a few blocks in memory, not the matrix. */
#include "retrieval/index_impl.h"
#include "retrieval/faiss_bind.h"
#include "tokenizer/base_json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_FORMAT "lipi-index"
/* Version 2: binary codes split at thresholds other than 0
 * (binary_thresholds.npy), which a lipi reading version 1 would not apply
 * to its queries; every other index is written as version 1. */
#define INDEX_VERSION 1
#define INDEX_VERSION_MAX 2
#define NPY_HDR 128
#define MAX_DIM ((size_t)1 << 20)
/* int8 dot products of this many dimensions stay within int32. */
#define INT8_MAX_DIM 131071

static const char *const index_files[] = {"vectors.npy", "texts",       "offsets.npy",
                                          "meta.json",   "faiss.index", "quantized.npy",
                                          "int8_ranges.npy", "binary_thresholds.npy"};
#define N_INDEX_FILES (sizeof index_files / sizeof index_files[0])

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

static lipi_status join_path(char out[PATH_MAX], const char *dir, const char *name,
                             lipi_error *err)
{
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
    return LIPI_OK;
}

static char *dup_or_null(const char *s)
{
    return s ? lipi_strndup(s, strlen(s)) : NULL;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static bool host_little_endian(void)
{
    uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* A read-only mapping of a whole regular file (NULL map when empty). */
typedef struct {
    unsigned char *map;
    size_t len;
} mapped_file;

static lipi_status map_file(const char *path, mapped_file *m, lipi_error *err)
{
    m->map = NULL;
    m->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    struct stat sb;
    lipi_status st = LIPI_OK;
    if (fstat(fd, &sb) != 0) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "expected a regular file");
    } else if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            st = lipi_error_set(err, errno == ENOMEM ? LIPI_ENOMEM : LIPI_EIO, path, 0, 0,
                                "cannot map: %s", strerror(errno));
        else {
            m->map = p;
            m->len = (size_t)sb.st_size;
        }
    }
    close(fd);
    return st;
}

static void unmap_file(mapped_file *m)
{
    if (m->map)
        munmap(m->map, m->len);
    m->map = NULL;
    m->len = 0;
}

/* ======================================================================== */
/* .npy headers                                                              */
/* ======================================================================== */

/* hdr[0..128): a version 1.0 header for `descr` with shape (rows, cols), or
 * (rows,) when cols is 0; the dict is padded with spaces so the data starts
 * at byte 128 (64-byte aligned) whatever the shape. */
static void npy_header(unsigned char hdr[NPY_HDR], const char *descr, size_t rows, size_t cols)
{
    memset(hdr, ' ', NPY_HDR);
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (unsigned char)((NPY_HDR - 10) & 0xff);
    hdr[9] = (unsigned char)((NPY_HDR - 10) >> 8);
    char dict[NPY_HDR];
    int n = cols ? snprintf(dict, sizeof dict,
                            "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %zu), }",
                            descr, rows, cols)
                 : snprintf(dict, sizeof dict,
                            "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr,
                            rows);
    memcpy(hdr + 10, dict, (size_t)n);
    hdr[NPY_HDR - 1] = '\n';
}

typedef struct {
    const char *s;   /* the header dict */
    size_t n, i;
    size_t base;     /* file offset of s[0] */
    const char *path;
    lipi_error *err;
} npy_lex;

static lipi_status npy_fail(npy_lex *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static lipi_status npy_fail(npy_lex *x, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char found[16];
    if (x->i >= x->n)
        snprintf(found, sizeof found, "end of header");
    else if ((unsigned char)x->s[x->i] >= 0x20 && (unsigned char)x->s[x->i] < 0x7f)
        snprintf(found, sizeof found, "'%c'", x->s[x->i]);
    else
        snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)x->s[x->i]);
    return lipi_error_set(x->err, LIPI_EFORMAT, x->path, 0, x->base + x->i,
                          ".npy header: expected %s, found %s", msg, found);
}

static void npy_ws(npy_lex *x)
{
    while (x->i < x->n && (x->s[x->i] == ' ' || x->s[x->i] == '\t' || x->s[x->i] == '\n' ||
                           x->s[x->i] == '\r'))
        x->i++;
}

static bool npy_eat(npy_lex *x, char c)
{
    npy_ws(x);
    if (x->i < x->n && x->s[x->i] == c) {
        x->i++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes into out[cap]. */
static lipi_status npy_string(npy_lex *x, char *out, size_t cap)
{
    npy_ws(x);
    if (x->i >= x->n || (x->s[x->i] != '\'' && x->s[x->i] != '"'))
        return npy_fail(x, "a quoted string");
    char q = x->s[x->i++];
    size_t start = x->i;
    while (x->i < x->n && x->s[x->i] != q) {
        if (x->s[x->i] == '\\' || x->s[x->i] == '\n')
            return npy_fail(x, "a plain string");
        x->i++;
    }
    if (x->i >= x->n)
        return npy_fail(x, "the closing quote");
    size_t len = x->i - start;
    if (len >= cap) {
        x->i = start;
        return npy_fail(x, "a string of at most %zu bytes", cap - 1);
    }
    memcpy(out, x->s + start, len);
    out[len] = '\0';
    x->i++;
    return LIPI_OK;
}

static lipi_status npy_size(npy_lex *x, size_t *v)
{
    npy_ws(x);
    if (x->i >= x->n || x->s[x->i] < '0' || x->s[x->i] > '9')
        return npy_fail(x, "a dimension (decimal integer)");
    size_t r = 0;
    while (x->i < x->n && x->s[x->i] >= '0' && x->s[x->i] <= '9') {
        size_t d = (size_t)(x->s[x->i] - '0');
        if (r > (SIZE_MAX - d) / 10)
            return npy_fail(x, "a dimension that fits in 64 bits");
        r = r * 10 + d;
        x->i++;
    }
    *v = r;
    return LIPI_OK;
}

lipi_status lipi_npy_parse(const unsigned char *p, size_t len, const char *path,
                           const char *descr, size_t *ndim, size_t shape[2], size_t *data_off,
                           lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (len < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return lipi_error_set(err, len < 10 ? LIPI_ETRUNC : LIPI_EFORMAT, path, 0, 0,
                              "expected a .npy file (magic \\x93NUMPY), found %s",
                              len < 10 ? "a file shorter than 10 bytes" : "other bytes");
    size_t base, hlen;
    if (p[6] == 1 && p[7] == 0) {
        hlen = (size_t)p[8] | (size_t)p[9] << 8;
        base = 10;
    } else if ((p[6] == 2 || p[6] == 3) && p[7] == 0 && len >= 12) {
        hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
        base = 12;
    } else {
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 6,
                              "expected .npy version 1.0, 2.0 or 3.0, found %u.%u", p[6], p[7]);
    }
    if (hlen > len - base)
        return lipi_error_set(err, LIPI_ETRUNC, path, 0, base - 2,
                              "header length %zu runs past the end of the file (%zu bytes)",
                              hlen, len);
    npy_lex x = {(const char *)p + base, hlen, 0, base, path, err};
    char got_descr[16] = "";
    bool fortran = true, seen_descr = false, seen_fortran = false, seen_shape = false;
    size_t nd = 0, sh[2] = {0, 1};
    if (!npy_eat(&x, '{'))
        return npy_fail(&x, "'{'");
    while (!npy_eat(&x, '}')) {
        char key[32];
        TRY(npy_string(&x, key, sizeof key));
        if (!npy_eat(&x, ':'))
            return npy_fail(&x, "':'");
        if (strcmp(key, "descr") == 0 && !seen_descr) {
            TRY(npy_string(&x, got_descr, sizeof got_descr));
            seen_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !seen_fortran) {
            npy_ws(&x);
            if (x.n - x.i >= 4 && memcmp(x.s + x.i, "True", 4) == 0) {
                fortran = true;
                x.i += 4;
            } else if (x.n - x.i >= 5 && memcmp(x.s + x.i, "False", 5) == 0) {
                fortran = false;
                x.i += 5;
            } else {
                return npy_fail(&x, "True or False");
            }
            seen_fortran = true;
        } else if (strcmp(key, "shape") == 0 && !seen_shape) {
            if (!npy_eat(&x, '('))
                return npy_fail(&x, "'(' opening the shape");
            while (!npy_eat(&x, ')')) {
                if (nd == 2)
                    return npy_fail(&x, "at most 2 dimensions");
                TRY(npy_size(&x, &sh[nd]));
                nd++;
                if (!npy_eat(&x, ',')) {
                    if (!npy_eat(&x, ')'))
                        return npy_fail(&x, "',' or ')' in the shape");
                    break;
                }
            }
            seen_shape = true;
        } else {
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, x.base + x.i,
                                  ".npy header: expected the keys 'descr', 'fortran_order' "
                                  "and 'shape' once each, found '%s'",
                                  key);
        }
        if (!npy_eat(&x, ',')) {
            if (!npy_eat(&x, '}'))
                return npy_fail(&x, "',' or '}'");
            break;
        }
    }
    npy_ws(&x);
    if (x.i < x.n)
        return npy_fail(&x, "only spaces after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, base,
                              ".npy header: expected the keys 'descr', 'fortran_order' and "
                              "'shape', found a dict without '%s'",
                              !seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape");
    if (strcmp(got_descr, descr) != 0)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, base,
                              ".npy header: expected descr '%s' (%s), found '%s'", descr,
                              descr[1] == 'f'   ? "little-endian float32"
                              : descr[1] == 'i' ? "int8"
                              : descr[2] == '1' ? "uint8"
                                                : "little-endian uint64",
                              got_descr);
    if (fortran)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, base,
                              ".npy header: expected fortran_order False (C order), found True");
    if (nd == 0)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, base,
                              ".npy header: expected a 1-D or 2-D shape, found ()");
    size_t item = descr[2] == '4' ? 4 : descr[2] == '1' ? 1 : 8;
    size_t elems, bytes;
    if (__builtin_mul_overflow(sh[0], sh[1], &elems) ||
        __builtin_mul_overflow(elems, item, &bytes))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, base,
                              ".npy header: shape (%zu, %zu) is too large", sh[0], sh[1]);
    size_t off = base + hlen;
    if (off % item)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, off,
                              "expected the data to start at a multiple of %zu bytes, found "
                              "offset %zu",
                              item, off);
    if (bytes != len - off)
        return lipi_error_set(err, bytes > len - off ? LIPI_ETRUNC : LIPI_EFORMAT, path, 0, off,
                              "expected %zu data bytes for shape (%zu, %zu), found %zu", bytes,
                              sh[0], nd == 2 ? sh[1] : 1, len - off);
    *ndim = nd;
    shape[0] = sh[0];
    shape[1] = sh[1];
    *data_off = off;
done:
    return st;
}

struct lipi_npy_map {
    mapped_file f;
    const float *data;
    size_t rows, cols;
};

lipi_status lipi_npy_map_open(const char *path, lipi_npy_map **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *out = NULL;
    lipi_npy_map *m = lipi_calloc(1, sizeof *m);
    if (!m)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    if (!host_little_endian()) {
        st = lipi_error_set(err, LIPI_EINVAL, path, 0, 0,
                            "mapping little-endian .npy data needs a little-endian host");
        goto done;
    }
    TRY(map_file(path, &m->f, err));
    size_t nd, shape[2], off;
    TRY(lipi_npy_parse(m->f.map, m->f.len, path, "<f4", &nd, shape, &off, err));
    if (nd == 1) {
        m->rows = 1;
        m->cols = shape[0];
    } else {
        m->rows = shape[0];
        m->cols = shape[1];
    }
    m->data = (const float *)(m->f.map + off);
done:
    if (st != LIPI_OK) {
        lipi_npy_map_close(m);
        return st;
    }
    *out = m;
    return LIPI_OK;
}

const float *lipi_npy_map_data(const lipi_npy_map *m)
{
    return m->data;
}

size_t lipi_npy_map_rows(const lipi_npy_map *m)
{
    return m->rows;
}

size_t lipi_npy_map_cols(const lipi_npy_map *m)
{
    return m->cols;
}

void lipi_npy_map_close(lipi_npy_map *m)
{
    if (!m)
        return;
    unmap_file(&m->f);
    lipi_free(m);
}

/* ======================================================================== */
/* Exact top-k                                                               */
/* ======================================================================== */

/* The score is a double so that the int32 scores of quantized search fit
 * exactly (a float's do, too); the struct is 16 bytes either way. */
typedef struct {
    double s;
    int64_t d;
} knn_hit;

/* a ranks before b: higher score, then lower document. */
static inline bool hit_before(double s, int64_t d, const knn_hit *b)
{
    return s > b->s || (s == b->s && d < b->d);
}

static int hit_cmp(const void *pa, const void *pb)
{
    const knn_hit *a = pa, *b = pb;
    if (hit_before(a->s, a->d, b))
        return -1;
    if (hit_before(b->s, b->d, a))
        return 1;
    return 0;
}

/* h: a heap of n hits with the one that ranks last at h[0]. */
static void heap_sift_down(knn_hit *h, size_t n, size_t i)
{
    knn_hit x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && hit_before(h[c].s, h[c].d, &h[c + 1]))
            c++;
        if (!hit_before(x.s, x.d, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void heap_push(knn_hit *h, size_t *n, double s, int64_t d)
{
    size_t i = (*n)++;
    knn_hit x = {s, d};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hit_before(h[p].s, h[p].d, &x))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KNN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KNN_CLONES
#endif

#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* Whether any of p[0..16) >= t: the common case of a row of scores is that
 * nothing beats the heap's last hit, and this answers it 16 at a time. */
static inline bool any_ge16(const float *p, float t)
{
    v16f v;
    memcpy(&v, p, sizeof v);
    v16i m = v >= t;
    uint64_t u[8];
    memcpy(u, &m, sizeof u);
    return (u[0] | u[1] | u[2] | u[3] | u[4] | u[5] | u[6] | u[7]) != 0;
}

/* Feeds one row of scores row[0..S) for documents doc0.. into the heap
 * h (*n of k hits). */
KNN_CLONES
static void knn_select_row(const float *row, size_t S, int64_t doc0, knn_hit *h, size_t *n,
                           size_t k)
{
    size_t j = 0;
    for (; j < S && *n < k; j++)
        heap_push(h, n, row[j], doc0 + (int64_t)j);
    if (j == S)
        return;
    float t = (float)h[0].s; /* exact: the heap holds this row's floats */
    for (; j + 16 <= S; j += 16) {
        if (!any_ge16(row + j, t))
            continue;
        for (size_t l = j; l < j + 16; l++)
            if (hit_before(row[l], doc0 + (int64_t)l, &h[0])) {
                h[0] = (knn_hit){row[l], doc0 + (int64_t)l};
                heap_sift_down(h, k, 0);
                t = (float)h[0].s;
            }
    }
    for (; j < S; j++)
        if (hit_before(row[j], doc0 + (int64_t)j, &h[0])) {
            h[0] = (knn_hit){row[j], doc0 + (int64_t)j};
            heap_sift_down(h, k, 0);
        }
}

/* One thread's part of a pass over the matrix. */
typedef struct {
    void *scratch;  /* scores: float (gemm_queries, gemm_rows) in exact
                       search, int32 (LIPI_QUANT_QB, gemm_rows) in
                       quantized search */
    knn_hit *heaps; /* (chunk, k) */
    size_t *fill;   /* (chunk) */
} knn_thread;

static void knn_threads_free(knn_thread *th, size_t threads)
{
    if (th)
        for (size_t t = 0; t < threads; t++) {
            lipi_free(th[t].scratch);
            lipi_free(th[t].heaps);
            lipi_free(th[t].fill);
        }
    lipi_free(th);
}

/* threads workers with scratch_bytes of scratch and heaps of chunk x k hits
 * each; NULL when memory runs out. */
static knn_thread *knn_threads_new(size_t threads, size_t scratch_bytes, size_t chunk, size_t k)
{
    knn_thread *th = lipi_calloc(threads, sizeof *th);
    size_t heap_n;
    if (!th || __builtin_mul_overflow(chunk, k, &heap_n))
        goto fail;
    for (size_t t = 0; t < threads; t++) {
        th[t].scratch = lipi_malloc(scratch_bytes);
        th[t].heaps = lipi_reallocarray(NULL, heap_n, sizeof(knn_hit));
        th[t].fill = lipi_calloc(chunk, sizeof(size_t));
        if (!th[t].scratch || !th[t].heaps || !th[t].fill)
            goto fail;
    }
    return th;
fail:
    knn_threads_free(th, threads);
    return NULL;
}

/* Gathers query i's hits from every thread's heap (room for `stride`
 * hits a query; exact search's of k, quantized search's candidates of 2k)
 * into merged; returns how many there are. knn_merge_query also sorts them
 * by (score, lower document). */
static size_t knn_gather_query(const knn_thread *th, size_t threads, size_t i, size_t stride,
                               knn_hit *merged)
{
    size_t m = 0;
    for (size_t t = 0; t < threads; t++) {
        memcpy(merged + m, th[t].heaps + i * stride, th[t].fill[i] * sizeof *merged);
        m += th[t].fill[i];
    }
    return m;
}

static size_t knn_merge_query(const knn_thread *th, size_t threads, size_t i, size_t stride,
                              knn_hit *merged)
{
    size_t m = knn_gather_query(th, threads, i, stride, merged);
    qsort(merged, m, sizeof *merged, hit_cmp);
    return m;
}

typedef struct {
    const float *x;
    size_t n, dim;
    const float *q; /* this pass's queries: (qc, dim) */
    size_t qc, k;
    size_t block, panel, tile;
    bool release;
    size_t nblocks;
    knn_thread *t;
} knn_ctx;

/* Drops the whole pages inside rows [r0, r1) from the mapping: the page
 * cache keeps them, the process's memory does not. */
static void release_rows(const float *x, size_t dim, size_t r0, size_t r1)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)(x + r0 * dim), b = (uintptr_t)(x + r1 * dim);
    a = (a + page - 1) & ~(page - 1);
    b &= ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Task b: rows [b * block, ...) against this pass's queries, into the
 * heaps of worker tid. Which worker took a block does not matter: the heaps
 * are merged and sorted by (score, document) afterwards. */
static lipi_status knn_block_task(void *vctx, size_t b, size_t tid, lipi_error *err)
{
    knn_ctx *c = vctx;
    knn_thread *t = &c->t[tid];
    int prev = lipi_gemm_thread_enter();
    size_t r0 = b * c->block, r1 = r0 + c->block < c->n ? r0 + c->block : c->n;
    for (size_t p0 = r0; p0 < r1; p0 += c->panel) {
        size_t S = p0 + c->panel < r1 ? c->panel : r1 - p0;
        const float *xp = c->x + p0 * c->dim;
        for (size_t q0 = 0; q0 < c->qc; q0 += c->tile) {
            size_t T = q0 + c->tile < c->qc ? c->tile : c->qc - q0;
            /* q tile: (T, dim), x panel: (S, dim) -> scratch: (T, S) */
            float *sc = t->scratch;
            lipi_sgemm_nt(LIPI_GEMM_AUTO, T, S, c->dim, c->q + q0 * c->dim, c->dim, xp, c->dim,
                          sc, S);
            for (size_t i = 0; i < T; i++)
                knn_select_row(sc + i * S, S, (int64_t)p0, t->heaps + (q0 + i) * c->k,
                               &t->fill[q0 + i], c->k);
        }
    }
    if (c->release)
        release_rows(c->x, c->dim, r0, r1);
    lipi_gemm_thread_restore(prev);
    return LIPI_OK;
}

static lipi_status check_finite(const float *v, size_t n, size_t dim, const char *what,
                                lipi_error *err)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < dim; j++)
            if (!isfinite(v[i * dim + j]))
                return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                      "%s %zu: expected finite values, found %g at position %zu",
                                      what, i + 1, (double)v[i * dim + j], j);
    return LIPI_OK;
}

/* hits[0..n) -> docs[0..n), scores[0..n). */
static void knn_put_hits(const knn_hit *hits, size_t n, int64_t *docs, float *scores)
{
    for (size_t j = 0; j < n; j++) {
        docs[j] = hits[j].d;
        scores[j] = (float)hits[j].s;
    }
}

/* What every search checks first: k >= 1, dim >= 1, finite queries q (nq,
 * dim); fills the slots past the last of n documents with -1 / -INFINITY
 * and sets *keff to the hits there are per query. */
static lipi_status search_begin(const float *q, size_t nq, size_t dim, size_t k, size_t n,
                                int64_t *docs, float *scores, size_t *keff, lipi_error *err)
{
    if (!k || !dim)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "search: expected k >= 1 and dimension >= 1, found k = %zu, "
                              "dimension %zu",
                              k, dim);
    lipi_status st = check_finite(q, nq, dim, "query", err);
    if (st != LIPI_OK)
        return st;
    *keff = k < n ? k : n;
    for (size_t i = 0; i < nq; i++)
        for (size_t j = *keff; j < k; j++) {
            docs[i * k + j] = -1;
            scores[i * k + j] = -INFINITY;
        }
    return LIPI_OK;
}

/* lipi_knn_search; `mapped` says x is a read-only file mapping whose pages
 * may be dropped after use (madvise on any other memory would zero it). */
static lipi_status knn_search(const float *x, size_t n, size_t dim, const float *q, size_t nq,
                              size_t k, const lipi_search_options *opt, bool mapped,
                              int64_t *docs, float *scores, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_search_options o = opt ? *opt : (lipi_search_options){0};
    knn_thread *th = NULL;
    knn_hit *merged = NULL;
    size_t threads = o.threads ? o.threads : 1, keff;
    TRY(search_begin(q, nq, dim, k, n, docs, scores, &keff, err));
    if (!keff || !nq)
        return LIPI_OK;
    size_t block = o.block_rows ? o.block_rows : LIPI_KNN_BLOCK_ROWS;
    size_t panel = o.gemm_rows ? o.gemm_rows : LIPI_KNN_GEMM_ROWS;
    size_t tile = o.gemm_queries ? o.gemm_queries : LIPI_KNN_GEMM_QUERIES;
    if (panel > block)
        panel = block;
    size_t chunk = LIPI_KNN_HEAP_BYTES / (keff * sizeof(knn_hit));
    if (chunk < 1)
        chunk = 1;
    if (chunk > nq)
        chunk = nq;
    if (tile > chunk)
        tile = chunk;
    size_t nblocks = n / block + (n % block != 0);
    if (threads > nblocks)
        threads = nblocks;
    bool release = mapped && (o.release_pages > 0 ||
                              (o.release_pages == 0 &&
                               n * dim * sizeof(float) >= LIPI_KNN_RELEASE_BYTES));
    size_t scratch_n;
    if (__builtin_mul_overflow(tile, panel * sizeof(float), &scratch_n)) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "search: sizes overflow");
        goto done;
    }
    th = knn_threads_new(threads, scratch_n, chunk, keff);
    merged = lipi_reallocarray(NULL, threads * keff, sizeof *merged);
    if (!th || !merged) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t q0 = 0; q0 < nq; q0 += chunk) {
        size_t qc = q0 + chunk < nq ? chunk : nq - q0;
        knn_ctx c = {.x = x, .n = n, .dim = dim, .q = q + q0 * dim, .qc = qc, .k = keff,
                     .block = block, .panel = panel, .tile = tile, .release = release,
                     .nblocks = nblocks, .t = th};
        for (size_t t = 0; t < threads; t++)
            memset(th[t].fill, 0, qc * sizeof(size_t));
        /* The tasks cannot fail. */
        (void)lipi_parallel_for(nblocks, threads, knn_block_task, &c, NULL);
        for (size_t i = 0; i < qc; i++) {
            knn_merge_query(th, threads, i, keff, merged);
            knn_put_hits(merged, keff, docs + (q0 + i) * k, scores + (q0 + i) * k);
        }
    }
done:
    knn_threads_free(th, threads);
    lipi_free(merged);
    return st;
}

lipi_status lipi_knn_search(const float *x, size_t n, size_t dim, const float *q, size_t nq,
                            size_t k, const lipi_search_options *opt, int64_t *docs,
                            float *scores, lipi_error *err)
{
    return knn_search(x, n, dim, q, nq, k, opt, false, docs, scores, err);
}

/* ======================================================================== */
/* Quantization (lipi_quantization) and quantized search                     */
/* ======================================================================== */

/* Quantized search scans the small codes in the same fixed blocks of rows
 * as exact search, one bounded heap of rescore_multiplier * k candidates per
 * query and thread (scores are int32, exact in the heap's double), merges
 * the heaps by (score, lower document), and then rescores the candidates
 * with the float32 rows, which are read for those documents only. As in
 * exact search, the order is total, so the thread count changes nothing. */

const char *lipi_quantization_name(lipi_quantization q)
{
    switch (q) {
    case LIPI_QUANT_NONE: return "none";
    case LIPI_QUANT_INT8: return "int8";
    case LIPI_QUANT_BINARY: return "binary";
    }
    return NULL;
}

bool lipi_quantization_parse(const char *name, lipi_quantization *q)
{
    static const lipi_quantization all[] = {LIPI_QUANT_NONE, LIPI_QUANT_INT8, LIPI_QUANT_BINARY};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, lipi_quantization_name(all[i])) == 0) {
            *q = all[i];
            return true;
        }
    return false;
}

const char *lipi_binary_threshold_name(lipi_binary_threshold t)
{
    switch (t) {
    case LIPI_BINARY_THRESHOLD_ZERO: return "zero";
    case LIPI_BINARY_THRESHOLD_MEAN: return "mean";
    case LIPI_BINARY_THRESHOLD_DEFAULT: break;
    }
    return NULL;
}

bool lipi_binary_threshold_parse(const char *name, lipi_binary_threshold *t)
{
    static const lipi_binary_threshold all[] = {LIPI_BINARY_THRESHOLD_ZERO,
                                                LIPI_BINARY_THRESHOLD_MEAN};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, lipi_binary_threshold_name(all[i])) == 0) {
            *t = all[i];
            return true;
        }
    return false;
}

/* Bytes of one row's codes. */
static size_t quant_row_bytes(lipi_quantization q, size_t dim)
{
    return q == LIPI_QUANT_INT8 ? dim : (dim + 7) / 8;
}

/* Bytes of one query's codes: the row's, or 4 planes of bits. */
static size_t quant_query_bytes(lipi_quantization q, size_t dim)
{
    return q == LIPI_QUANT_BINARY_WEIGHTS ? 4 * ((dim + 7) / 8) : quant_row_bytes(q, dim);
}

/* x: (n, dim) -> ranges: (2, dim), min then max of each column. */
void lipi_int8_ranges(const float *x, size_t n, size_t dim, float *ranges)
{
    float *lo = ranges, *hi = ranges + dim;
    for (size_t j = 0; j < dim; j++)
        lo[j] = hi[j] = x[j];
    for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < dim; j++) {
            float v = x[i * dim + j];
            lo[j] = v < lo[j] ? v : lo[j];
            hi[j] = v > hi[j] ? v : hi[j];
        }
}

/* x: (n, dim), ranges: (2, dim) -> codes: (n, dim). The arithmetic is
 * numpy's in float32: (x - start) / step - 128 with step = (max - min) / 255,
 * truncated toward zero as astype(int8) does; clamped, which only values
 * outside the ranges (queries) need. */
void lipi_quantize_int8(const float *x, size_t n, size_t dim, const float *ranges,
                        int8_t *codes)
{
    const float *lo = ranges, *hi = ranges + dim;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < dim; j++) {
            float step = (hi[j] - lo[j]) / 255.0f;
            float v = step > 0 ? (x[i * dim + j] - lo[j]) / step - 128.0f : -128.0f;
            v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
            codes[i * dim + j] = (int8_t)v;
        }
}

/* q: (n, dim), ranges: (2, dim) -> w: (n, dim), each row q_i * step_i
 * (float32, step as lipi_quantize_int8 computes it) scaled so its largest
 * magnitude is 127 and rounded half away from zero. Clamped against the
 * float rounding of the scale. */
void lipi_int8_query_weights(const float *q, size_t n, size_t dim, const float *ranges,
                             int8_t *w)
{
    const float *lo = ranges, *hi = ranges + dim;
    for (size_t i = 0; i < n; i++) {
        const float *qr = q + i * dim;
        float amax = 0;
        for (size_t j = 0; j < dim; j++) {
            float a = fabsf(qr[j] * ((hi[j] - lo[j]) / 255.0f));
            amax = a > amax ? a : amax;
        }
        float scale = amax > 0 ? 127.0f / amax : 0;
        for (size_t j = 0; j < dim; j++) {
            float v = roundf(qr[j] * ((hi[j] - lo[j]) / 255.0f) * scale);
            w[i * dim + j] = (int8_t)(v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v);
        }
    }
}

/* x: (n, dim) -> t: (dim), the column means (double sums, row order). */
void lipi_binary_means(const float *x, size_t n, size_t dim, float *t)
{
    for (size_t j = 0; j < dim; j++) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += x[i * dim + j];
        t[j] = (float)(s / (double)n);
    }
}

/* x: (n, dim), t: (dim) or NULL -> bits: (n, (dim + 7) / 8),
 * numpy.packbits(x > t, axis=-1). */
void lipi_quantize_binary(const float *x, size_t n, size_t dim, const float *t, uint8_t *bits)
{
    size_t nb = (dim + 7) / 8;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < nb; b++) {
            unsigned v = 0;
            for (size_t s = 0; s < 8; s++) {
                size_t j = b * 8 + s;
                v |= (unsigned)(j < dim && x[i * dim + j] > (t ? t[j] : 0.0f)) << (7 - s);
            }
            bits[i * nb + b] = (uint8_t)v;
        }
}

/* q: (n, dim) -> planes: (n, 4, nb), nb = (dim + 7) / 8: the signs, then
 * bits 0..2 of |w| with w = q scaled so its largest magnitude is 7,
 * rounded half away from zero (and clamped against the float rounding of
 * the scale). */
void lipi_binary_query_weights(const float *q, size_t n, size_t dim, uint8_t *planes)
{
    size_t nb = (dim + 7) / 8;
    for (size_t i = 0; i < n; i++) {
        const float *qr = q + i * dim;
        uint8_t *p = planes + i * 4 * nb;
        float amax = 0;
        for (size_t j = 0; j < dim; j++)
            amax = fabsf(qr[j]) > amax ? fabsf(qr[j]) : amax;
        float scale = amax > 0 ? 7.0f / amax : 0;
        memset(p, 0, 4 * nb);
        for (size_t j = 0; j < dim; j++) {
            float a = roundf(fabsf(qr[j]) * scale);
            unsigned m = a > 7.0f ? 7u : (unsigned)a;
            unsigned bit = 0x80u >> (j % 8);
            if (qr[j] > 0)
                p[j / 8] |= (uint8_t)bit;
            for (unsigned b = 0; b < 3; b++)
                if (m >> b & 1)
                    p[(1 + b) * nb + j / 8] |= (uint8_t)bit;
        }
    }
}

/* q: (dim), x: (S, dim) int8 codes -> out: (S) dot products. Each
 * product fits in int16 exactly (-16256..16384), which lets GCC widen the
 * codes to 16 bits and multiply 32 at a time; it vectorizes this reduction
 * only with the dynamic cost model (-O2's "very cheap" one refuses it).
 * bench/search.c quant, 20,000 x 384, 200 queries, 2 threads: 172 QPS
 * with int32 vector extensions (scalarized by GCC 12), 1396 QPS so. */
#if defined(__GNUC__) && !defined(__clang__)
#define VECT_DYNAMIC __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define VECT_DYNAMIC /* clang vectorizes it on its own cost model */
#endif
KNN_CLONES VECT_DYNAMIC
static void int8_scores(const int8_t *q, const int8_t *x, size_t S, size_t dim, int32_t *out)
{
    for (size_t r = 0; r < S; r++) {
        const int8_t *xr = x + r * dim;
        int32_t s = 0;
        for (size_t j = 0; j < dim; j++)
            s += (int16_t)(q[j] * xr[j]);
        out[r] = s;
    }
}

static void int8_scores_ref(const int8_t *q, const int8_t *x, size_t S, size_t dim, int32_t *out)
{
    for (size_t r = 0; r < S; r++) {
        int32_t s = 0;
        for (size_t j = 0; j < dim; j++)
            s += (int32_t)q[j] * x[r * dim + j];
        out[r] = s;
    }
}

/* q: (nb) bits, x: (S, nb) bits -> out: (S) minus the Hamming distances. */
KNN_CLONES
static void binary_scores(const uint8_t *q, const uint8_t *x, size_t S, size_t nb, int32_t *out)
{
    for (size_t r = 0; r < S; r++) {
        const uint8_t *xr = x + r * nb;
        int32_t h = 0;
        size_t j = 0;
        for (; j + 8 <= nb; j += 8) {
            uint64_t a, b;
            memcpy(&a, q + j, 8);
            memcpy(&b, xr + j, 8);
            h += __builtin_popcountll(a ^ b);
        }
        for (; j < nb; j++)
            h += __builtin_popcount((unsigned)(q[j] ^ xr[j]));
        out[r] = -h;
    }
}

static void binary_scores_ref(const uint8_t *q, const uint8_t *x, size_t S, size_t nb,
                              int32_t *out)
{
    for (size_t r = 0; r < S; r++) {
        int32_t h = 0;
        for (size_t j = 0; j < nb * 8; j++)
            h += ((q[j / 8] ^ x[r * nb + j / 8]) >> (7 - j % 8)) & 1;
        out[r] = -h;
    }
}

/* q: (4, nb) weight planes (lipi_binary_query_weights), x: (S, nb) bits
 * -> out: (S) minus the Hamming distances to the query's signs weighted by
 * its magnitudes: sum over bit planes p of 2^p popcount(m_p & (x ^ s)). */
KNN_CLONES
static void binary_weighted_scores(const uint8_t *q, const uint8_t *x, size_t S, size_t nb,
                                   int32_t *out)
{
    const uint8_t *sg = q, *m0 = q + nb, *m1 = q + 2 * nb, *m2 = q + 3 * nb;
    for (size_t r = 0; r < S; r++) {
        const uint8_t *xr = x + r * nb;
        int32_t h = 0;
        size_t j = 0;
        for (; j + 8 <= nb; j += 8) {
            uint64_t a, b, c0, c1, c2;
            memcpy(&a, sg + j, 8);
            memcpy(&b, xr + j, 8);
            memcpy(&c0, m0 + j, 8);
            memcpy(&c1, m1 + j, 8);
            memcpy(&c2, m2 + j, 8);
            uint64_t d = a ^ b;
            h += __builtin_popcountll(d & c0) + 2 * __builtin_popcountll(d & c1) +
                 4 * __builtin_popcountll(d & c2);
        }
        for (; j < nb; j++) {
            unsigned d = (unsigned)(sg[j] ^ xr[j]);
            h += __builtin_popcount(d & m0[j]) + 2 * __builtin_popcount(d & m1[j]) +
                 4 * __builtin_popcount(d & m2[j]);
        }
        out[r] = -h;
    }
}

/* The same bit by bit: |w_j| rebuilt from the planes. */
static void binary_weighted_scores_ref(const uint8_t *q, const uint8_t *x, size_t S, size_t nb,
                                       int32_t *out)
{
    for (size_t r = 0; r < S; r++) {
        int32_t h = 0;
        for (size_t j = 0; j < nb * 8; j++) {
            int sh = 7 - (int)(j % 8);
            int differ = ((q[j / 8] ^ x[r * nb + j / 8]) >> sh) & 1, w = 0;
            for (size_t p = 0; p < 3; p++)
                w |= ((q[(1 + p) * nb + j / 8] >> sh) & 1) << p;
            h += differ * w;
        }
        out[r] = -h;
    }
}

/* int8 scores of QUANT_QB queries at a time with AVX-512 VNNI (vpdpbusd:
 * unsigned x signed bytes, four products summed into int32 per lane). The
 * queries come as codes + 128 (unsigned), so each dot product is
 * dot(q + 128, x) - 128 * sum(x), with sum(x) from the same instruction
 * against ones: exact integers, equal to int8_scores. A document row is
 * read once for the block of queries; the four accumulators are reduced
 * together. Dimensions up to VNNI_MAX_DIM keep every sum within int32
 * (255 * 128 per dimension). */
#define QUANT_QB LIPI_QUANT_QB
#define VNNI_MAX_DIM 65535
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VNNI 1

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void
int8_scores_vnni(const uint8_t *const qu[QUANT_QB], const int8_t *x, size_t S, size_t dim,
                 int32_t *const out[QUANT_QB])
{
    const __m512i ones = _mm512_set1_epi8(1);
    int32_t *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
    const uint8_t *q0 = qu[0], *q1 = qu[1], *q2 = qu[2], *q3 = qu[3];
    __mmask64 tail = dim % 64 ? ((__mmask64)1 << (dim % 64)) - 1 : ~(__mmask64)0;
    for (size_t r = 0; r < S; r++) {
        const int8_t *xr = x + r * dim;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, sx = a0;
        size_t j = 0;
        for (; j + 64 <= dim; j += 64) {
            __m512i xv = _mm512_loadu_si512(xr + j);
            sx = _mm512_dpbusd_epi32(sx, ones, xv);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(q0 + j), xv);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(q1 + j), xv);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512(q2 + j), xv);
            a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512(q3 + j), xv);
        }
        if (j < dim) {
            __m512i xv = _mm512_maskz_loadu_epi8(tail, xr + j);
            sx = _mm512_dpbusd_epi32(sx, ones, xv);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(tail, q0 + j), xv);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_maskz_loadu_epi8(tail, q1 + j), xv);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_maskz_loadu_epi8(tail, q2 + j), xv);
            a3 = _mm512_dpbusd_epi32(a3, _mm512_maskz_loadu_epi8(tail, q3 + j), xv);
        }
        /* dot(q + 128, x) - 128 * sum(x), lane by lane (the lanes' sums add
         * up to the dot products), then the four reduced together: 32-bit
         * pairs interleaved and added, then 64-bit halves, giving a0 a1 a2
         * a3 partial sums in each 128-bit lane; then the four lanes added. */
        __m512i bias = _mm512_slli_epi32(sx, 7);
        a0 = _mm512_sub_epi32(a0, bias);
        a1 = _mm512_sub_epi32(a1, bias);
        a2 = _mm512_sub_epi32(a2, bias);
        a3 = _mm512_sub_epi32(a3, bias);
        __m512i s01 =
            _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
        __m512i s23 =
            _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
        __m512i s4 =
            _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
        __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s4), _mm512_extracti64x4_epi64(s4, 1));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        o0[r] = _mm_extract_epi32(t, 0);
        o1[r] = _mm_extract_epi32(t, 1);
        o2[r] = _mm_extract_epi32(t, 2);
        o3[r] = _mm_extract_epi32(t, 3);
    }
}

/* Binary scores (minus Hamming distances) of QUANT_QB queries at a time
 * with AVX-512 VPOPCNTDQ: 64 bytes of a row against each query per step,
 * the four counts reduced together at the end of the row. */
__attribute__((target("avx512f,avx512bw,avx512vpopcntdq"))) static void
binary_scores_popcnt(const uint8_t *const q[QUANT_QB], const uint8_t *x, size_t S, size_t nb,
                     int32_t *const out[QUANT_QB])
{
    int32_t *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
    const uint8_t *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
    for (size_t r = 0; r < S; r++) {
        const uint8_t *xr = x + r * nb;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t j = 0; j < nb; j += 64) {
            __mmask64 m = nb - j >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (nb - j)) - 1;
            __m512i xv = _mm512_maskz_loadu_epi8(m, xr + j);
#define POP(a, qq)                                                                            \
    a = _mm512_add_epi64(                                                                      \
        a, _mm512_popcnt_epi64(_mm512_xor_si512(xv, _mm512_maskz_loadu_epi8(m, (qq) + j))))
            POP(a0, q0);
            POP(a1, q1);
            POP(a2, q2);
            POP(a3, q3);
#undef POP
        }
        o0[r] = -(int32_t)_mm512_reduce_add_epi64(a0);
        o1[r] = -(int32_t)_mm512_reduce_add_epi64(a1);
        o2[r] = -(int32_t)_mm512_reduce_add_epi64(a2);
        o3[r] = -(int32_t)_mm512_reduce_add_epi64(a3);
    }
}

static bool have_vnni(void)
{
    static int known = -1; /* a benign race: every thread stores the same */
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    }
    return known;
}

static bool have_vpopcntdq(void)
{
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512vpopcntdq") && __builtin_cpu_supports("avx512bw");
    }
    return known;
}
#endif

/* Packed panels, for passes of PACK_MIN_QUERIES queries or more: a panel of
 * document codes is first rearranged so that one 64-byte vector holds the
 * same 4-byte word of 16 consecutive rows (tile t = rows 16t..16t+15, word
 * w: p[(t * W + w) * 16 + lane]). A query word broadcast to all lanes then
 * scores 16 rows with one vpdpbusd (int8) or one xor + vpopcntd (binary),
 * with no horizontal sums, and each vector loaded serves PACK_QB queries:
 * per query and 384-dimension row, 6 instructions for int8 and 36 / 16 for
 * binary, against 24 FMAs for float32. Rearranging costs about as much as
 * scoring a few queries, hence the threshold. */
enum { PACK_LANES = 16, PACK_QB = 8, PACK_MIN_QUERIES = 32 };

/* Tiles of a packed panel of S rows: whole pairs (the kernels take two at a
 * time). */
static size_t pack_tiles(size_t S)
{
    size_t t = (S + PACK_LANES - 1) / PACK_LANES;
    return t + (t & 1);
}

/* x: (S, rb) codes -> p: (pack_tiles(S), W, 16) words, W = (rb + 3) / 4.
 * int8 codes become unsigned (+ 128, vpdpbusd's unsigned operand); the
 * bytes past rb and the rows past S are 0 (padding bytes meet the queries'
 * zero padding; padding rows are scored but never read). */
static void quant_pack(const unsigned char *x, size_t S, size_t rb, bool int8, uint32_t *p)
{
    size_t W = (rb + 3) / 4, nt = pack_tiles(S);
    uint32_t flip = int8 ? 0x80808080u : 0;
    memset(p + (S / PACK_LANES) * W * PACK_LANES, 0,
           (nt - S / PACK_LANES) * W * PACK_LANES * sizeof *p);
    for (size_t r = 0; r < S; r++) {
        const unsigned char *xr = x + r * rb;
        uint32_t *pr = p + (r / PACK_LANES) * W * PACK_LANES + r % PACK_LANES;
        size_t w = 0;
        for (; w + 1 <= rb / 4; w++) {
            uint32_t v;
            memcpy(&v, xr + 4 * w, 4);
            pr[w * PACK_LANES] = v ^ flip;
        }
        if (w < W) {
            uint32_t v = 0;
            memcpy(&v, xr + 4 * w, rb - 4 * w);
            pr[w * PACK_LANES] = v ^ (flip & (((uint32_t)1 << (8 * (rb - 4 * w))) - 1));
        }
    }
}

/* A query's codes as W words, zero-padded: q (rb) -> qw (W). */
static void quant_pack_query(const unsigned char *q, size_t rb, uint32_t *qw)
{
    size_t W = (rb + 3) / 4;
    qw[W - 1] = 0;
    memcpy(qw, q, rb);
}

/* Words of one packed query: W, or W for each of the 4 weight planes. */
static size_t quant_query_words(lipi_quantization qz, size_t W)
{
    return qz == LIPI_QUANT_BINARY_WEIGHTS ? 4 * W : W;
}

#ifdef HAVE_VNNI
/* The kernels' shape: two tiles (32 rows) against PACK_QB = 8 queries in 16
 * named accumulators (an array of vectors made GCC shuffle registers on
 * every step). STEP8 applies OP(i) to queries 0..7; STORE writes query i's
 * two tiles (rows past S masked off) when i < qn. */
#define STEP8(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define PACKED_DECL(i) __m512i a##i = _mm512_setzero_si512(), b##i = a##i;
#define PACKED_STORE(i, FIX)                                                                  \
    if (i < qn) {                                                                              \
        _mm512_mask_storeu_epi32(out[i] + r0, m0, FIX(a##i, i));                               \
        if (m1)                                                                                \
            _mm512_mask_storeu_epi32(out[i] + r0 + PACK_LANES, m1, FIX(b##i, i));              \
    }

/* Row masks of the two tiles at rows r0.. of a panel of S rows. */
static inline void packed_masks(size_t r0, size_t S, __mmask16 *m0, __mmask16 *m1)
{
    size_t n0 = S - r0 >= 16 ? 16 : S - r0, n1 = S - r0 > 32 ? 16 : S - r0 - n0;
    *m0 = (__mmask16)((1u << n0) - 1);
    *m1 = (__mmask16)((1u << n1) - 1);
}

/* PACKED_KERNEL(NAME, TARGET, OP, FIX) defines NAME: p, a packed panel (nt
 * tiles of W words, nt even) of S rows; q[i], query i's codes as W words
 * -> out[i][r], r < S: FIX(acc, i) of the accumulated OP(acc, x, query
 * word) over the words. All PACK_QB queries are computed (a short block
 * repeats one), the first qn stored. */
#define PACKED_KERNEL(NAME, TARGET, OP, FIX)                                                   \
    __attribute__((target(TARGET))) static void NAME(                                          \
        const uint32_t *p, size_t nt, size_t W, size_t S, const uint32_t *const q[PACK_QB],    \
        const int32_t bias[PACK_QB], size_t qn, int32_t *const out[PACK_QB])                   \
    {                                                                                          \
        for (size_t t = 0; t < nt; t += 2) {                                                   \
            const uint32_t *p0 = p + t * W * PACK_LANES, *p1 = p0 + W * PACK_LANES;            \
            STEP8(PACKED_DECL)                                                                 \
            for (size_t w = 0; w < W; w++) {                                                   \
                __m512i x0 = _mm512_load_si512(p0 + w * PACK_LANES);                           \
                __m512i x1 = _mm512_load_si512(p1 + w * PACK_LANES);                           \
                STEP8(PACKED_STEP_##OP)                                                        \
            }                                                                                  \
            size_t r0 = t * PACK_LANES;                                                        \
            if (r0 >= S)                                                                       \
                break;                                                                         \
            __mmask16 m0, m1;                                                                  \
            packed_masks(r0, S, &m0, &m1);                                                     \
            STEP8(PACKED_STORE_##FIX)                                                          \
        }                                                                                      \
    }

/* int8: acc += dot(x + 128, q) by vpdpbusd, 4 bytes a lane; stored as
 * acc - bias[i], bias = 128 * the sum of the query's codes. */
#define PACKED_STEP_DP(i)                                                                      \
    {                                                                                          \
        __m512i v = _mm512_set1_epi32((int32_t)q[i][w]);                                       \
        a##i = _mm512_dpbusd_epi32(a##i, x0, v);                                               \
        b##i = _mm512_dpbusd_epi32(b##i, x1, v);                                               \
    }
#define PACKED_FIX_BIAS(acc, i) _mm512_sub_epi32(acc, _mm512_set1_epi32(bias[i]))
#define PACKED_STORE_BIAS(i) PACKED_STORE(i, PACKED_FIX_BIAS)
PACKED_KERNEL(int8_scores_packed, "avx512f,avx512bw,avx512vnni", DP, BIAS)

/* binary: acc += popcount(x ^ q), 32 bits a lane; stored negated (bias is
 * not read). */
#define PACKED_STEP_POP(i)                                                                     \
    {                                                                                          \
        __m512i v = _mm512_set1_epi32((int32_t)q[i][w]);                                       \
        a##i = _mm512_add_epi32(a##i, _mm512_popcnt_epi32(_mm512_xor_si512(x0, v)));           \
        b##i = _mm512_add_epi32(b##i, _mm512_popcnt_epi32(_mm512_xor_si512(x1, v)));           \
    }
#define PACKED_FIX_NEG(acc, i) _mm512_sub_epi32(_mm512_setzero_si512(), acc)
#define PACKED_STORE_NEG(i) PACKED_STORE(i, PACKED_FIX_NEG)
PACKED_KERNEL(binary_scores_packed, "avx512f,avx512bw,avx512vpopcntdq", POP, NEG)

/* binary weights: query i is 4 planes of W words (signs, magnitude bits 0,
 * 1, 2); acc += sum_p 2^p popcount((x ^ signs) & plane p), the xor and the
 * and in one vpternlogd ((A ^ B) & C is 0x28); stored negated. */
#define WPOP_PLANE(acc, x, s, m, sh)                                                           \
    acc = _mm512_add_epi32(                                                                    \
        acc, _mm512_slli_epi32(_mm512_popcnt_epi32(_mm512_ternarylogic_epi32(x, s, m, 0x28)),  \
                               sh));
#define PACKED_STEP_WPOP(i)                                                                    \
    {                                                                                          \
        __m512i s = _mm512_set1_epi32((int32_t)q[i][w]);                                       \
        __m512i m0 = _mm512_set1_epi32((int32_t)q[i][W + w]);                                  \
        __m512i m1 = _mm512_set1_epi32((int32_t)q[i][2 * W + w]);                              \
        __m512i m2 = _mm512_set1_epi32((int32_t)q[i][3 * W + w]);                              \
        WPOP_PLANE(a##i, x0, s, m0, 0)                                                         \
        WPOP_PLANE(a##i, x0, s, m1, 1)                                                         \
        WPOP_PLANE(a##i, x0, s, m2, 2)                                                         \
        WPOP_PLANE(b##i, x1, s, m0, 0)                                                         \
        WPOP_PLANE(b##i, x1, s, m1, 1)                                                         \
        WPOP_PLANE(b##i, x1, s, m2, 2)                                                         \
    }
PACKED_KERNEL(binary_weighted_scores_packed, "avx512f,avx512bw,avx512vpopcntdq", WPOP, NEG)
#undef WPOP_PLANE
#undef STEP8
#undef PACKED_DECL
#undef PACKED_STORE
#endif

void lipi_quant_scores_block(lipi_quantization qz, const void *const q[],
                             const uint8_t *const qu[], size_t qn, const void *x, size_t S,
                             size_t dim, int32_t *out)
{
#ifdef HAVE_VNNI
    bool vnni = qz == LIPI_QUANT_INT8 && qu && dim <= VNNI_MAX_DIM && have_vnni();
    bool popcnt = qz == LIPI_QUANT_BINARY && have_vpopcntdq();
    if (qn && (vnni || popcnt)) {
        const uint8_t *u[QUANT_QB];
        int32_t *rows[QUANT_QB];
        for (size_t i = 0; i < QUANT_QB; i++) {
            /* A short block repeats its last query into the spare rows. */
            size_t at = i < qn ? i : qn - 1;
            u[i] = vnni ? qu[at] : q[at];
            rows[i] = out + at * S;
        }
        if (vnni)
            int8_scores_vnni(u, x, S, dim, rows);
        else
            binary_scores_popcnt(u, x, S, (dim + 7) / 8, rows);
        return;
    }
#endif
    for (size_t i = 0; i < qn; i++)
        lipi_quant_scores(qz, false, q[i], x, S, dim, out + i * S);
}

void lipi_quant_scores(lipi_quantization qz, bool ref, const void *q, const void *x, size_t S,
                       size_t dim, int32_t *out)
{
    if (qz == LIPI_QUANT_INT8)
        (ref ? int8_scores_ref : int8_scores)(q, x, S, dim, out);
    else if (qz == LIPI_QUANT_BINARY_WEIGHTS)
        (ref ? binary_weighted_scores_ref : binary_weighted_scores)(q, x, S, (dim + 7) / 8, out);
    else
        (ref ? binary_scores_ref : binary_scores)(q, x, S, (dim + 7) / 8, out);
}

/* A worker's candidates for one query in quantized search: h[0..*n) with
 * room for 2k (k: the candidates wanted). Once *n >= k, h[k-1] ranks last
 * among h[0..k) and every hit after it ranks before it, so h[k-1].s bounds
 * the k-th best score seen from below: a later document scoring no more
 * than that cannot be among the best k (documents come in increasing
 * order, so a tie loses). Appending is cheap; at 2k hits the best k are
 * selected (quickselect, O(k)), which costs O(1) a hit where a heap of k
 * costs O(log k). The set kept depends on the scores only, not on the
 * order of the steps, and the merge sorts it. */

/* Reorders h[0..n) so that h[want] is the hit of that rank (hit order),
 * those before it rank before it and those after, after. Documents differ,
 * so the order is total. */
static void hits_select(knn_hit *h, size_t n, size_t want)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        /* median of three as the pivot, moved to hi - 1 */
        size_t mid = lo + (hi - lo) / 2, a = lo, b = mid, c = hi - 1, p;
        if (hit_before(h[b].s, h[b].d, &h[a]))
            a = mid, b = lo;
        p = hit_before(h[c].s, h[c].d, &h[a]) ? a : hit_before(h[c].s, h[c].d, &h[b]) ? c : b;
        knn_hit pv = h[p], tmp;
        h[p] = h[hi - 1];
        h[hi - 1] = pv;
        /* Lomuto's partition without a branch on the comparison (which
         * goes either way at random): always swap, advance on a hit. */
        size_t store = lo;
        for (size_t i = lo; i < hi - 1; i++) {
            tmp = h[i];
            size_t before = (size_t)(tmp.s > pv.s) | ((size_t)(tmp.s == pv.s) & (tmp.d < pv.d));
            h[i] = h[store];
            h[store] = tmp;
            store += before;
        }
        h[hi - 1] = h[store];
        h[store] = pv;
        if (store == want)
            return;
        if (want < store)
            hi = store;
        else
            lo = store + 1;
    }
}

/* Always inlined, so that it is compiled for its caller's target: called
 * as SSE code from the AVX-512 selection with the upper halves of the zmm
 * registers dirty, each of its instructions paid the SSE/AVX transition
 * (perf put 86% of its time on its first instructions). bench/search.c
 * quant binary-bits, k = 400, 100k real-text rows: 1213 -> 4275 queries
 * per CPU-second. */
static inline __attribute__((always_inline)) void cand_push(knn_hit *h, size_t *n, size_t k,
                                                            int32_t s, int64_t d)
{
    h[(*n)++] = (knn_hit){s, d};
    if (*n == k) {
        size_t w = 0; /* the last of the first k, to h[k-1] */
        for (size_t i = 1; i < k; i++)
            if (hit_before(h[w].s, h[w].d, &h[i]))
                w = i;
        knn_hit tmp = h[w];
        h[w] = h[k - 1];
        h[k - 1] = tmp;
    } else if (*n == 2 * k) {
        hits_select(h, 2 * k, k - 1);
        *n = k;
    }
}

/* Feeds one row of quantized scores row[0..S) for documents doc0.. into
 * the candidates h (*n of them, k wanted). */
KNN_CLONES
static void quant_select_row(const int32_t *row, size_t S, int64_t doc0, knn_hit *h, size_t *n,
                             size_t k)
{
    size_t j = 0;
    for (; j < S && *n < k; j++)
        cand_push(h, n, k, row[j], doc0 + (int64_t)j);
    for (; j < S; j++) {
        /* Mostly nothing in the next 16 beats the bound: say so 16 at a
         * time. */
        if ((j & 15) == 0 && j + 16 <= S) {
            v16i v, t = {0};
            memcpy(&v, row + j, sizeof v);
            t += (int32_t)h[k - 1].s; /* exact: int32 scores */
            v16i m = v > t;
            uint64_t u[8];
            memcpy(u, &m, sizeof u);
            if (!(u[0] | u[1] | u[2] | u[3] | u[4] | u[5] | u[6] | u[7])) {
                j += 15;
                continue;
            }
        }
        if (row[j] > (int32_t)h[k - 1].s)
            cand_push(h, n, k, row[j], doc0 + (int64_t)j);
    }
}

#ifdef HAVE_VNNI
/* quant_select_row for the packed passes (AVX-512 there): a mask of the
 * 16 scores above the bound, then only those, lowest first. */
__attribute__((target("avx512f"))) static void
quant_select_row_512(const int32_t *row, size_t S, int64_t doc0, knn_hit *h, size_t *n, size_t k)
{
    size_t j = 0;
    for (; j < S && *n < k; j++)
        cand_push(h, n, k, row[j], doc0 + (int64_t)j);
    for (; j < S; j += 16) {
        __mmask16 valid = S - j >= 16 ? 0xFFFF : (__mmask16)((1u << (S - j)) - 1);
        __m512i t = _mm512_set1_epi32((int32_t)h[k - 1].s);
        unsigned m =
            _mm512_mask_cmpgt_epi32_mask(valid, _mm512_maskz_loadu_epi32(valid, row + j), t);
        while (m) {
            size_t l = j + (size_t)__builtin_ctz(m);
            m &= m - 1;
            if (row[l] > (int32_t)h[k - 1].s)
                cand_push(h, n, k, row[l], doc0 + (int64_t)l);
        }
    }
}
#endif

/* a: (dim), b: (dim) -> the float32 inner product, summed in double in
 * eight fixed interleaved partial sums (independent, so the products
 * pipeline), added in a fixed order: rescoring's score, the same for a
 * document whichever query batch or thread computes it. */
KNN_CLONES VECT_DYNAMIC
static float rescore_dot(const float *a, const float *b, size_t dim)
{
    double s[8] = {0}, t = 0;
    size_t j = 0;
    for (; j + 8 <= dim; j += 8)
        for (size_t l = 0; l < 8; l++)
            s[l] += (double)a[j + l] * b[j + l];
    for (; j < dim; j++)
        t += (double)a[j] * b[j];
    return (float)((((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))) + t);
}

/* Whether this CPU has the packed kernels for qz at dimension dim. */
static bool pack_available(lipi_quantization qz, size_t dim)
{
#ifdef HAVE_VNNI
    if (qz == LIPI_QUANT_INT8)
        return dim <= VNNI_MAX_DIM && have_vnni();
    return have_vpopcntdq();
#else
    (void)qz;
    (void)dim;
    return false;
#endif
}

/* Bytes of a packed panel of S rows of rb bytes, 64 more for alignment. */
static size_t pack_bytes(size_t S, size_t rb)
{
    return pack_tiles(S) * ((rb + 3) / 4) * PACK_LANES * sizeof(uint32_t) + 64;
}

static uint32_t *align64(void *p)
{
    return (uint32_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* Scores of queries qw[0..qn) (packed words, quant_query_words of them a
 * query; bias for int8) against the packed panel p of S rows (W words a
 * row) -> out (qn, S). */
static void quant_scores_packed(lipi_quantization qz, const uint32_t *p, size_t S, size_t W,
                                const uint32_t *qw, const int32_t *bias, size_t qn,
                                int32_t *out)
{
#ifdef HAVE_VNNI
    size_t QW = quant_query_words(qz, W);
    for (size_t i0 = 0; i0 < qn; i0 += PACK_QB) {
        size_t n = qn - i0 < PACK_QB ? qn - i0 : PACK_QB;
        const uint32_t *q[PACK_QB];
        int32_t b[PACK_QB];
        int32_t *o[PACK_QB];
        for (size_t i = 0; i < PACK_QB; i++) {
            size_t at = i0 + (i < n ? i : n - 1);
            q[i] = qw + at * QW;
            b[i] = bias ? bias[at] : 0;
            o[i] = out + at * S;
        }
        if (qz == LIPI_QUANT_INT8)
            int8_scores_packed(p, pack_tiles(S), W, S, q, b, n, o);
        else if (qz == LIPI_QUANT_BINARY_WEIGHTS)
            binary_weighted_scores_packed(p, pack_tiles(S), W, S, q, b, n, o);
        else
            binary_scores_packed(p, pack_tiles(S), W, S, q, b, n, o);
    }
#else
    (void)qz, (void)p, (void)S, (void)W, (void)qw, (void)bias, (void)qn, (void)out;
#endif
}

/* Query codes q (qn, quant_query_bytes) -> packed words qw (qn,
 * quant_query_words: each weight plane padded to W words) and, for int8,
 * bias (qn): 128 times the sum of each query's codes. rb: a row's bytes. */
static void quant_pack_queries(lipi_quantization qz, const unsigned char *q, size_t qn, size_t rb,
                               uint32_t *qw, int32_t *bias)
{
    size_t W = (rb + 3) / 4, planes = qz == LIPI_QUANT_BINARY_WEIGHTS ? 4 : 1;
    for (size_t i = 0; i < qn; i++) {
        for (size_t p = 0; p < planes; p++)
            quant_pack_query(q + (i * planes + p) * rb, rb, qw + (i * planes + p) * W);
        if (qz == LIPI_QUANT_INT8) {
            int32_t s = 0;
            for (size_t j = 0; j < rb; j++)
                s += (int8_t)q[i * rb + j];
            bias[i] = 128 * s;
        }
    }
}

bool lipi_quant_scores_packed(lipi_quantization qz, const void *q, size_t qn, const void *x,
                              size_t S, size_t dim, int32_t *out)
{
    size_t rb = quant_row_bytes(qz, dim), W = (rb + 3) / 4;
    if (!pack_available(qz, dim) || !qn || !S)
        return false;
    void *pbuf = lipi_malloc(pack_bytes(S, rb));
    uint32_t *qw = lipi_reallocarray(NULL, qn, quant_query_words(qz, W) * sizeof(uint32_t));
    int32_t *bias = lipi_reallocarray(NULL, qn, sizeof(int32_t));
    bool ok = pbuf && qw && bias;
    if (ok) {
        uint32_t *p = align64(pbuf);
        quant_pack(x, S, rb, qz == LIPI_QUANT_INT8, p);
        quant_pack_queries(qz, q, qn, rb, qw, bias);
        quant_scores_packed(qz, p, S, W, qw, qz == LIPI_QUANT_INT8 ? bias : NULL, qn, out);
    }
    lipi_free(pbuf);
    lipi_free(qw);
    lipi_free(bias);
    return ok;
}

typedef struct {
    lipi_quantization qz;
    const unsigned char *codes; /* (n, rb) */
    size_t n, dim, rb, qrb;     /* qrb: bytes of a query's codes */
    const unsigned char *qc;    /* this pass's query codes: (nqc, qrb) */
    const uint8_t *qu;          /* int8 on VNNI: the codes + 128, else NULL */
    const uint32_t *qw;         /* packed passes: the codes as words (nqc,
                                   quant_query_words) */
    const int32_t *qbias;       /* and for int8 128 * their sums (nqc) */
    bool packed;
    size_t nqc, m, block, panel;
    knn_thread *t;
} quant_ctx;

/* Task b: rows [b * block, ...) against this pass's queries, into the
 * heaps of worker tid (merged and sorted afterwards, as in exact search).
 * Packed passes rearrange each panel once (after the scores area of the
 * worker's scratch) and score it PACK_QB queries at a time. */
static lipi_status quant_block_task(void *vctx, size_t b, size_t tid, lipi_error *err)
{
    quant_ctx *c = vctx;
    knn_thread *t = &c->t[tid];
    int32_t *sc = t->scratch;
    size_t r0 = b * c->block, r1 = r0 + c->block < c->n ? r0 + c->block : c->n;
    size_t W = (c->rb + 3) / 4;
    for (size_t p0 = r0; p0 < r1; p0 += c->panel) {
        size_t S = p0 + c->panel < r1 ? c->panel : r1 - p0;
        if (c->packed) {
            uint32_t *p = align64(sc + PACK_QB * c->panel);
            quant_pack(c->codes + p0 * c->rb, S, c->rb, c->qz == LIPI_QUANT_INT8, p);
            for (size_t i0 = 0; i0 < c->nqc; i0 += PACK_QB) {
                size_t qn = c->nqc - i0 < PACK_QB ? c->nqc - i0 : PACK_QB;
                quant_scores_packed(c->qz, p, S, W, c->qw + i0 * quant_query_words(c->qz, W),
                                    c->qbias ? c->qbias + i0 : NULL, qn, sc);
#ifdef HAVE_VNNI
                for (size_t i = i0; i < i0 + qn; i++)
                    quant_select_row_512(sc + (i - i0) * S, S, (int64_t)p0,
                                         t->heaps + i * 2 * c->m, &t->fill[i], c->m);
#endif
            }
            continue;
        }
        for (size_t i0 = 0; i0 < c->nqc; i0 += QUANT_QB) {
            size_t qn = c->nqc - i0 < QUANT_QB ? c->nqc - i0 : QUANT_QB;
            const void *q[QUANT_QB];
            const uint8_t *qu[QUANT_QB];
            for (size_t i = 0; i < qn; i++) {
                q[i] = c->qc + (i0 + i) * c->qrb;
                qu[i] = c->qu ? c->qu + (i0 + i) * c->rb : NULL;
            }
            lipi_quant_scores_block(c->qz, q, c->qu ? qu : NULL, qn, c->codes + p0 * c->rb, S,
                                    c->dim, sc);
            for (size_t i = i0; i < i0 + qn; i++)
                quant_select_row(sc + (i - i0) * S, S, (int64_t)p0, t->heaps + i * 2 * c->m,
                                 &t->fill[i], c->m);
        }
    }
    return LIPI_OK;
}

/* The end of a pass, one task per query: its candidates merged from every
 * worker, sorted, the best m rescored from the float32 rows when asked,
 * the best keff written out. `merged` holds threads * 2m hits per worker. */
typedef struct {
    knn_thread *t;
    size_t threads, m, keff, k, dim;
    knn_hit *merged;
    bool rescore;
    const float *q, *x; /* this pass's queries (nqc, dim); the rows (n, dim) */
    int64_t *docs;      /* this pass's results (nqc, k) */
    float *scores;
} quant_finish_ctx;

static lipi_status quant_finish_task(void *vctx, size_t i, size_t tid, lipi_error *err)
{
    quant_finish_ctx *c = vctx;
    knn_hit *merged = c->merged + tid * c->threads * 2 * c->m;
    /* Up to 2m a worker: the best m selected, not sorted (O(m), where
     * sorting all of them cost more than the scan at m = 400). */
    size_t got = knn_gather_query(c->t, c->threads, i, 2 * c->m, merged);
    if (got > c->m)
        hits_select(merged, got, c->m - 1);
    if (c->rescore) {
        /* The rows are scattered over the mapping: most are cache (and
         * TLB) misses, so the next RESCORE_AHEAD rows' lines are asked
         * for while this one is summed. */
        enum { RESCORE_AHEAD = 4 };
        const float *qi = c->q + i * c->dim;
        size_t row_bytes = c->dim * sizeof(float);
        for (size_t j = 0; j < c->m + RESCORE_AHEAD; j++) {
            if (j < c->m) {
                const char *r = (const char *)(c->x + (size_t)merged[j].d * c->dim);
                for (size_t b = 0; b < row_bytes; b += 64)
                    __builtin_prefetch(r + b);
            }
            if (j >= RESCORE_AHEAD) {
                size_t at = j - RESCORE_AHEAD;
                merged[at].s = rescore_dot(qi, c->x + (size_t)merged[at].d * c->dim, c->dim);
            }
        }
    }
    if (c->m > c->keff)
        hits_select(merged, c->m, c->keff - 1);
    qsort(merged, c->keff, sizeof *merged, hit_cmp);
    knn_put_hits(merged, c->keff, c->docs + i * c->k, c->scores + i * c->k);
    return LIPI_OK;
}

/* Quantized top-k of q (nq, dim) over codes (n, rb) of the float rows x
 * (n, dim); `ranges`: (2, dim) for int8, the thresholds (dim) or NULL
 * (zero) for binary; see lipi_search_options. */
static lipi_status quant_search(lipi_quantization qz, const unsigned char *codes,
                                const float *ranges, const float *x, size_t n, size_t dim,
                                const float *q, size_t nq, size_t k,
                                const lipi_search_options *opt, int64_t *docs, float *scores,
                                lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_search_options o = opt ? *opt : (lipi_search_options){0};
    knn_thread *th = NULL;
    knn_hit *merged = NULL;
    unsigned char *qcodes = NULL;
    uint8_t *qunsigned = NULL;
    uint32_t *qwords = NULL;
    int32_t *qbias = NULL;
    size_t threads = o.threads ? o.threads : 1, scan_threads = 0, keff;
    TRY(search_begin(q, nq, dim, k, n, docs, scores, &keff, err));
    if (!keff || !nq)
        return LIPI_OK;
    size_t mult = o.rescore_multiplier ? o.rescore_multiplier : 4, m;
    if (o.no_rescore)
        m = keff;
    else if (__builtin_mul_overflow(mult, keff, &m) || m > n)
        m = n;
    if (qz == LIPI_QUANT_BINARY && !o.binary_query_bits)
        qz = LIPI_QUANT_BINARY_WEIGHTS;
    size_t rb = quant_row_bytes(qz, dim), W = (rb + 3) / 4, qrb = quant_query_bytes(qz, dim);
    size_t block = o.block_rows ? o.block_rows : LIPI_KNN_BLOCK_ROWS;
    size_t panel = o.gemm_rows ? o.gemm_rows : LIPI_KNN_GEMM_ROWS;
    if (panel > block)
        panel = block;
    size_t chunk = LIPI_KNN_HEAP_BYTES / (2 * m * sizeof(knn_hit));
    chunk = chunk < 1 ? 1 : chunk > nq ? nq : chunk;
    size_t nblocks = n / block + (n % block != 0);
    scan_threads = threads > nblocks ? nblocks : threads;
    size_t fin_threads = threads > chunk ? chunk : threads;
    /* Packed when the passes are long enough to pay for rearranging. */
    bool packed = chunk >= PACK_MIN_QUERIES && pack_available(qz, dim);
    size_t scratch = packed ? PACK_QB * panel * sizeof(int32_t) + pack_bytes(panel, rb)
                            : QUANT_QB * panel * sizeof(int32_t);
    th = knn_threads_new(scan_threads, scratch, chunk, 2 * m);
    merged = lipi_reallocarray(NULL, fin_threads * scan_threads, 2 * m * sizeof *merged);
    qcodes = lipi_reallocarray(NULL, chunk, qrb);
    if (qz == LIPI_QUANT_INT8)
        qunsigned = lipi_reallocarray(NULL, chunk, rb);
    if (packed) {
        qwords = lipi_reallocarray(NULL, chunk, quant_query_words(qz, W) * sizeof(uint32_t));
        qbias = lipi_reallocarray(NULL, chunk, sizeof(int32_t));
    }
    if (!th || !merged || !qcodes || (qz == LIPI_QUANT_INT8 && !qunsigned) ||
        (packed && (!qwords || !qbias))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t q0 = 0; q0 < nq; q0 += chunk) {
        size_t qn = q0 + chunk < nq ? chunk : nq - q0;
        if (qz == LIPI_QUANT_INT8 && o.int8_query_codes)
            lipi_quantize_int8(q + q0 * dim, qn, dim, ranges, (int8_t *)qcodes);
        else if (qz == LIPI_QUANT_INT8)
            lipi_int8_query_weights(q + q0 * dim, qn, dim, ranges, (int8_t *)qcodes);
        else if (qz == LIPI_QUANT_BINARY_WEIGHTS)
            lipi_binary_query_weights(q + q0 * dim, qn, dim, qcodes);
        else
            lipi_quantize_binary(q + q0 * dim, qn, dim, ranges, qcodes);
        for (size_t j = 0; qunsigned && j < qn * rb; j++)
            qunsigned[j] = (uint8_t)(qcodes[j] ^ 0x80); /* two's complement + 128 */
        if (packed)
            quant_pack_queries(qz, qcodes, qn, rb, qwords, qbias);
        quant_ctx c = {.qz = qz, .codes = codes, .n = n, .dim = dim, .rb = rb, .qrb = qrb,
                       .qc = qcodes,
                       .qu = qunsigned, .qw = qwords,
                       .qbias = qz == LIPI_QUANT_INT8 ? qbias : NULL, .packed = packed,
                       .nqc = qn, .m = m, .block = block, .panel = panel, .t = th};
        for (size_t t = 0; t < scan_threads; t++)
            memset(th[t].fill, 0, qn * sizeof(size_t));
        (void)lipi_parallel_for(nblocks, scan_threads, quant_block_task, &c, NULL); /* cannot fail */
        quant_finish_ctx f = {.t = th, .threads = scan_threads, .m = m, .keff = keff, .k = k,
                              .dim = dim, .merged = merged, .rescore = !o.no_rescore,
                              .q = q + q0 * dim, .x = x, .docs = docs + q0 * k,
                              .scores = scores + q0 * k};
        (void)lipi_parallel_for(qn, fin_threads, quant_finish_task, &f, NULL); /* cannot fail */
    }
done:
    knn_threads_free(th, scan_threads);
    lipi_free(merged);
    lipi_free(qcodes);
    lipi_free(qunsigned);
    lipi_free(qwords);
    lipi_free(qbias);
    return st;
}

/* ======================================================================== */
/* Bitext metrics                                                            */
/* ======================================================================== */

typedef struct {
    const float *q, *d;
    size_t n, dim, tile, ntiles;
    float **scratch; /* per thread: (tile, tile) */
    size_t *ranks;
} rank_ctx;

/* Counts, for the queries of tile [i0, i0+T), the documents of panel
 * [j0, j0+S) that rank before their match. */
static void rank_panel(const float *sc, size_t T, size_t S, size_t i0, size_t j0,
                       const float *own, size_t *ranks)
{
    for (size_t i = 0; i < T; i++) {
        const float *row = sc + i * S;
        float s = own[i];
        size_t qi = i0 + i, before = 0;
        for (size_t j = 0; j < S; j++)
            before += row[j] > s || (row[j] == s && j0 + j < qi);
        ranks[qi] += before;
    }
}

/* Task ti: the ranks of the queries of tile ti, with worker tid's scratch. */
static lipi_status rank_tile_task(void *vctx, size_t ti, size_t tid, lipi_error *err)
{
    rank_ctx *c = vctx;
    float *sc = c->scratch[tid];
    float own[LIPI_KNN_GEMM_QUERIES * 4];
    int prev = lipi_gemm_thread_enter();
    size_t i0 = ti * c->tile, T = i0 + c->tile < c->n ? c->tile : c->n - i0;
    const float *qt = c->q + i0 * c->dim;
    /* The diagonal panel first: it holds each query's own score, which
     * every other score of the query is compared with. Panels line up
     * with tiles, so it has the tile's rows exactly. */
    lipi_sgemm_nt(LIPI_GEMM_AUTO, T, T, c->dim, qt, c->dim, c->d + i0 * c->dim, c->dim, sc, T);
    for (size_t i = 0; i < T; i++) {
        own[i] = sc[i * T + i];
        c->ranks[i0 + i] = 1;
    }
    rank_panel(sc, T, T, i0, i0, own, c->ranks);
    for (size_t j0 = 0; j0 < c->n; j0 += c->tile) {
        if (j0 == i0)
            continue;
        size_t S = j0 + c->tile < c->n ? c->tile : c->n - j0;
        lipi_sgemm_nt(LIPI_GEMM_AUTO, T, S, c->dim, qt, c->dim, c->d + j0 * c->dim, c->dim, sc,
                      S);
        rank_panel(sc, T, S, i0, j0, own, c->ranks);
    }
    lipi_gemm_thread_restore(prev);
    return LIPI_OK;
}

lipi_status lipi_bitext_ranks(const float *q, const float *docs, size_t n, size_t dim,
                              const lipi_search_options *opt, size_t *ranks, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t threads = opt && opt->threads ? opt->threads : 1;
    size_t tile = opt && opt->gemm_queries ? opt->gemm_queries : LIPI_KNN_GEMM_QUERIES;
    if (tile > LIPI_KNN_GEMM_QUERIES * 4)
        tile = LIPI_KNN_GEMM_QUERIES * 4;
    if (!n)
        return LIPI_OK;
    if (!dim)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "bitext: dimension 0");
    TRY(check_finite(q, n, dim, "query", err));
    TRY(check_finite(docs, n, dim, "document", err));
    rank_ctx c = {.q = q, .d = docs, .n = n, .dim = dim, .tile = tile,
                  .ntiles = n / tile + (n % tile != 0), .ranks = ranks};
    if (threads > c.ntiles)
        threads = c.ntiles;
    c.scratch = lipi_calloc(threads, sizeof *c.scratch);
    if (!c.scratch) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t t = 0; t < threads; t++)
        if (!(c.scratch[t] = lipi_reallocarray(NULL, tile * tile, sizeof(float)))) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
    (void)lipi_parallel_for(c.ntiles, threads, rank_tile_task, &c, NULL); /* cannot fail */
done:
    if (c.scratch)
        for (size_t t = 0; t < threads; t++)
            lipi_free(c.scratch[t]);
    lipi_free(c.scratch);
    return st;
}

void lipi_retrieval_metrics(const size_t *ranks, size_t n, const size_t *ks, size_t nk,
                            lipi_retrieval_scores *out)
{
    double p1 = 0, rr = 0;
    for (size_t j = 0; j < nk; j++)
        out->recall[j] = 0;
    for (size_t i = 0; i < n; i++) {
        p1 += ranks[i] == 1;
        rr += 1.0 / (double)ranks[i];
        for (size_t j = 0; j < nk; j++)
            out->recall[j] += ranks[i] <= ks[j];
    }
    out->p_at_1 = n ? p1 / (double)n : 0;
    out->mrr = n ? rr / (double)n : 0;
    for (size_t j = 0; j < nk; j++)
        out->recall[j] = n ? out->recall[j] / (double)n : 0;
}

lipi_status lipi_eval_bitext(const float *a, const float *b, size_t n, size_t dim,
                             const size_t *ks, size_t nk, const lipi_search_options *opt,
                             lipi_retrieval_scores *a_to_b, lipi_retrieval_scores *b_to_a,
                             lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t nn = n ? n : 1, total;
    size_t *ranks = lipi_reallocarray(NULL, nn, sizeof *ranks);
    float *na = NULL, *nb = NULL;
    if (__builtin_mul_overflow(nn, dim, &total) || !ranks ||
        !(na = lipi_reallocarray(NULL, total, sizeof *na)) ||
        !(nb = lipi_reallocarray(NULL, total, sizeof *nb))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    TRY(check_finite(a, n, dim, "query", err));
    TRY(check_finite(b, n, dim, "document", err));
    memcpy(na, a, n * dim * sizeof *na);
    memcpy(nb, b, n * dim * sizeof *nb);
    lipi_vectors_normalize(na, n, dim);
    lipi_vectors_normalize(nb, n, dim);
    TRY(lipi_bitext_ranks(na, nb, n, dim, opt, ranks, err));
    lipi_retrieval_metrics(ranks, n, ks, nk, a_to_b);
    TRY(lipi_bitext_ranks(nb, na, n, dim, opt, ranks, err));
    lipi_retrieval_metrics(ranks, n, ks, nk, b_to_a);
done:
    lipi_free(ranks);
    lipi_free(na);
    lipi_free(nb);
    return st;
}

/* ======================================================================== */
/* Model identity                                                            */
/* ======================================================================== */

typedef struct {
    char *name, *path, *fingerprint, *pooling, *version, *prompt, *prompt_name;
    bool normalize;
    size_t truncate_dim;
} model_copy;

static void model_copy_free(model_copy *m)
{
    lipi_free(m->name);
    lipi_free(m->path);
    lipi_free(m->fingerprint);
    lipi_free(m->pooling);
    lipi_free(m->version);
    lipi_free(m->prompt);
    lipi_free(m->prompt_name);
    memset(m, 0, sizeof *m);
}

static lipi_status model_copy_set(model_copy *m, const lipi_index_model *src, lipi_error *err)
{
    m->name = dup_or_null(src->name);
    m->path = dup_or_null(src->path);
    m->fingerprint = dup_or_null(src->fingerprint);
    m->pooling = dup_or_null(src->pooling);
    m->version = dup_or_null(src->lipi_version ? src->lipi_version : "unknown");
    m->prompt = dup_or_null(src->prompt);
    m->prompt_name = dup_or_null(src->prompt_name);
    m->normalize = src->normalize;
    m->truncate_dim = src->truncate_dim;
    if ((src->name && !m->name) || (src->path && !m->path) ||
        (src->fingerprint && !m->fingerprint) || (src->pooling && !m->pooling) || !m->version ||
        (src->prompt && !m->prompt) || (src->prompt_name && !m->prompt_name)) {
        model_copy_free(m);
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    return LIPI_OK;
}

static lipi_index_model model_view(const model_copy *m)
{
    return (lipi_index_model){m->name,        m->path,       m->fingerprint,
                              m->pooling,     m->normalize,  m->version,
                              m->prompt,      m->prompt_name, m->truncate_dim};
}

static bool models_match(const lipi_index_model *a, const lipi_index_model *b)
{
    if (!a->name || !b->name)
        return !a->name && !b->name;
    bool same = a->fingerprint && b->fingerprint ? strcmp(a->fingerprint, b->fingerprint) == 0
                                                 : strcmp(a->name, b->name) == 0;
    return same && str_eq(a->pooling, b->pooling) && a->normalize == b->normalize;
}

static void describe_model(char *out, size_t cap, const lipi_index_model *m)
{
    if (!m->name)
        snprintf(out, cap, "precomputed vectors");
    else
        snprintf(out, cap, "model '%s' (pooling %s%s, fingerprint %s)", m->name,
                 m->pooling ? m->pooling : "unknown", m->normalize ? ", normalized" : "",
                 m->fingerprint ? m->fingerprint : "none");
}

static lipi_status model_mismatch(const char *dir, const lipi_index_model *have,
                                  const lipi_index_model *want, lipi_error *err)
{
    char a[120], b[120];
    describe_model(a, sizeof a, have);
    describe_model(b, sizeof b, want);
    /* lipi 0.1 left the tokenizer's merges.txt, vocab.json and
     * tokenizer.model out of the fingerprint: its indexes never match. */
    bool old = have->lipi_version && strncmp(have->lipi_version, "0.1.", 4) == 0;
    return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "the index was built from %s, not %s%s", a,
                          b,
                          old ? " (lipi 0.1 wrote it with a fingerprint that missed some tokenizer "
                                "files: build the index again)"
                              : "");
}

/* FNV-1a, 64 bits: a fingerprint, not a defence against forgery. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

/* Hashes the name, size and first MiB of dir/name into *h; a missing file
 * adds nothing unless required. */
static lipi_status fingerprint_file(uint64_t *h, const char *dir, const char *name,
                                    bool required, lipi_error *err)
{
    char path[PATH_MAX];
    lipi_status st = join_path(path, dir, name, err);
    if (st != LIPI_OK)
        return st;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (!required && errno == ENOENT)
            return LIPI_OK;
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    }
    *h = fnv1a(*h, name, strlen(name) + 1);
    struct stat sb;
    unsigned char buf[65536];
    size_t total = 0, got;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot stat: %s", strerror(errno));
    }
    unsigned char size[8];
    put_u64le(size, (uint64_t)sb.st_size);
    *h = fnv1a(*h, size, 8);
    while (total < ((size_t)1 << 20) && (got = fread(buf, 1, sizeof buf, f)) > 0) {
        *h = fnv1a(*h, buf, got);
        total += got;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "read failed");
    return LIPI_OK;
}

/* Covers the model folder's files by fixed name (model/model.h's manifest,
 * tokenizer files included), so a changed merges.txt is another model. */
lipi_status lipi_index_model_fingerprint(const char *dir, char out[17], lipi_error *err)
{
    lipi_status st = LIPI_OK;
    uint64_t h = 0xcbf29ce484222325ULL;
    lipi_model_file f;
    for (size_t i = 0; lipi_model_file_at(i, &f); i++)
        TRY(fingerprint_file(&h, dir, f.name, f.required, err));
    snprintf(out, 17, "%016llx", (unsigned long long)h);
done:
    return st;
}

/* ======================================================================== */
/* Opening an index                                                          */
/* ======================================================================== */

struct lipi_index {
    char *dir;
    mapped_file vec, off, txt;
    const float *x;
    const unsigned char *offs; /* (count + 1) little-endian uint64 */
    size_t count, dim;
    model_copy model;
    lipi_index_model view;
    char *faiss_spec;
    lipi_faiss *faiss;
    lipi_quantization quant;
    mapped_file qf, rf;             /* quantized.npy, int8_ranges.npy or
                                       binary_thresholds.npy */
    const unsigned char *codes;     /* (count, quant_row_bytes) */
    const float *ranges;            /* (2, dim) for int8 */
    lipi_binary_threshold bthr;     /* binary: ZERO or MEAN */
    const float *thresholds;        /* (dim) for binary MEAN, else NULL */
};

/* Reads meta.json's fields; `path` names it in errors. */
static lipi_status read_meta(lipi_index *idx, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    mapped_file mf = {0};
    json_t *root = NULL;
    const char *field = NULL, *want = NULL;
    TRY(map_file(path, &mf, err));
    if (mf.len > ((size_t)1 << 20)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected at most 1 MiB of JSON, found %zu bytes", mf.len);
        goto done;
    }
    json_error_t je;
    root = lipi_json_loadb((const char *)mf.map, mf.len, JSON_REJECT_DUPLICATES, &je);
    if (!root && json_error_code(&je) == json_error_out_of_memory) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    if (!root) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, (size_t)je.line, (size_t)je.position,
                            "expected JSON: %s", je.text);
        goto done;
    }
    json_t *v;
#define META_FAIL(f, w)                                                                    \
    do {                                                                                   \
        field = (f);                                                                       \
        want = (w);                                                                        \
        goto bad;                                                                          \
    } while (0)
    if (!json_is_object(root))
        META_FAIL("(top level)", "an object");
    v = json_object_get(root, "format");
    if (!json_is_string(v) || strcmp(json_string_value(v), INDEX_FORMAT) != 0)
        META_FAIL("format", "\"" INDEX_FORMAT "\"");
    v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) < INDEX_VERSION ||
        json_integer_value(v) > INDEX_VERSION_MAX)
        META_FAIL("version", "1 or 2 (a later version comes from a newer lipi: upgrade lipi "
                             "or rebuild the index)");
    v = json_object_get(root, "dimension");
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        (uint64_t)json_integer_value(v) > MAX_DIM)
        META_FAIL("dimension", "an integer from 1 to 1048576");
    idx->dim = (size_t)json_integer_value(v);
    v = json_object_get(root, "count");
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        META_FAIL("count", "a non-negative integer");
    idx->count = (size_t)json_integer_value(v);
    lipi_index_model m = {0};
    json_t *model = json_object_get(root, "model");
    if (json_is_object(model)) {
        v = json_object_get(model, "name");
        if (!json_is_string(v))
            META_FAIL("model.name", "a string");
        m.name = json_string_value(v);
        v = json_object_get(model, "path");
        if (v && !json_is_null(v) && !json_is_string(v))
            META_FAIL("model.path", "a string or null");
        m.path = json_string_value(v);
        v = json_object_get(model, "fingerprint");
        if (v && !json_is_null(v) && !json_is_string(v))
            META_FAIL("model.fingerprint", "a string or null");
        m.fingerprint = json_string_value(v);
    } else if (model && !json_is_null(model)) {
        META_FAIL("model", "an object or null");
    }
    v = json_object_get(root, "pooling");
    if (v && !json_is_null(v) && !json_is_string(v))
        META_FAIL("pooling", "a string or null");
    m.pooling = json_string_value(v);
    v = json_object_get(root, "normalize");
    if (!json_is_boolean(v))
        META_FAIL("normalize", "true or false");
    m.normalize = json_is_true(v);
    v = json_object_get(root, "lipi_version");
    m.lipi_version = json_is_string(v) ? json_string_value(v) : NULL;
    /* Absent in indexes older than prompts and truncation: unknown, none. */
    v = json_object_get(root, "prompt");
    if (v && !json_is_null(v) && !json_is_string(v))
        META_FAIL("prompt", "a string or null");
    m.prompt = json_string_value(v);
    v = json_object_get(root, "prompt_name");
    if (v && !json_is_null(v) && !json_is_string(v))
        META_FAIL("prompt_name", "a string or null");
    m.prompt_name = json_string_value(v);
    v = json_object_get(root, "truncate_dim");
    if (v && !json_is_null(v) &&
        (!json_is_integer(v) || json_integer_value(v) < 1 ||
         (uint64_t)json_integer_value(v) != idx->dim))
        META_FAIL("truncate_dim", "null or the dimension");
    m.truncate_dim = json_is_integer(v) ? (size_t)json_integer_value(v) : 0;
    v = json_object_get(root, "faiss");
    if (v && !json_is_null(v) && !json_is_string(v))
        META_FAIL("faiss", "an index_factory string or null");
    if (json_is_string(v) && !(idx->faiss_spec = dup_or_null(json_string_value(v)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    /* Absent in indexes older than quantization: none. */
    v = json_object_get(root, "quantization");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || !lipi_quantization_parse(json_string_value(v), &idx->quant)))
        META_FAIL("quantization", "\"int8\", \"binary\", \"none\" or null");
    /* Absent in binary indexes older than thresholds: zero. */
    v = json_object_get(root, "binary_threshold");
    if (idx->quant == LIPI_QUANT_BINARY) {
        idx->bthr = LIPI_BINARY_THRESHOLD_ZERO;
        if (v && !json_is_null(v) &&
            (!json_is_string(v) || !lipi_binary_threshold_parse(json_string_value(v), &idx->bthr)))
            META_FAIL("binary_threshold", "\"zero\", \"mean\" or null");
        if (idx->bthr != LIPI_BINARY_THRESHOLD_ZERO && json_integer_value(json_object_get(root, "version")) < 2)
            META_FAIL("version", "2 for binary codes with thresholds other than zero");
    }
#undef META_FAIL
    TRY(model_copy_set(&idx->model, &m, err));
    idx->view = model_view(&idx->model);
    goto done;
bad:
    st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "field \"%s\": expected %s", field, want);
done:
    json_decref(root);
    unmap_file(&mf);
    return st;
}

lipi_status lipi_index_open(const char *dir, const lipi_index_open_options *opt,
                            lipi_index **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char path[PATH_MAX];
    *out = NULL;
    lipi_index *idx = lipi_calloc(1, sizeof *idx);
    if (!idx || !(idx->dir = dup_or_null(dir))) {
        st = lipi_error_set(err, LIPI_ENOMEM, dir, 0, 0, "out of memory");
        goto done;
    }
    if (!host_little_endian()) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "an index stores little-endian data; this host is big-endian");
        goto done;
    }
    TRY(join_path(path, dir, "meta.json", err));
    TRY(read_meta(idx, path, err));

    size_t nd, shape[2], off;
    TRY(join_path(path, dir, "vectors.npy", err));
    TRY(map_file(path, &idx->vec, err));
    TRY(lipi_npy_parse(idx->vec.map, idx->vec.len, path, "<f4", &nd, shape, &off, err));
    if (nd != 2 || shape[0] != idx->count || shape[1] != idx->dim) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected shape (%zu, %zu) as meta.json says, found (%zu%s%zu)",
                            idx->count, idx->dim, shape[0], nd == 2 ? ", " : ",",
                            nd == 2 ? shape[1] : 0);
        goto done;
    }
    idx->x = (const float *)(idx->vec.map + off);

    TRY(join_path(path, dir, "offsets.npy", err));
    TRY(map_file(path, &idx->off, err));
    TRY(lipi_npy_parse(idx->off.map, idx->off.len, path, "<u8", &nd, shape, &off, err));
    if (nd != 1 || shape[0] != idx->count + 1) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected shape (%zu,) (count + 1), found %zu%s", idx->count + 1,
                            shape[0], nd == 1 ? "" : " rows of 2-D data");
        goto done;
    }
    idx->offs = idx->off.map + off;

    TRY(join_path(path, dir, "texts", err));
    TRY(map_file(path, &idx->txt, err));
    uint64_t first = get_u64le(idx->offs), last = get_u64le(idx->offs + 8 * idx->count);
    if (first != 0 || last != idx->txt.len) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected %llu bytes as offsets.npy says (first offset %llu), "
                            "found %zu",
                            (unsigned long long)last, (unsigned long long)first, idx->txt.len);
        goto done;
    }

    if (idx->quant != LIPI_QUANT_NONE) {
        size_t rb = quant_row_bytes(idx->quant, idx->dim);
        const char *descr = idx->quant == LIPI_QUANT_INT8 ? "|i1" : "|u1";
        TRY(join_path(path, dir, "quantized.npy", err));
        TRY(map_file(path, &idx->qf, err));
        TRY(lipi_npy_parse(idx->qf.map, idx->qf.len, path, descr, &nd, shape, &off, err));
        if (nd != 2 || shape[0] != idx->count || shape[1] != rb) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected shape (%zu, %zu) for %s codes of %zu rows, found "
                                "(%zu%s%zu)",
                                idx->count, rb, lipi_quantization_name(idx->quant), idx->count,
                                shape[0], nd == 2 ? ", " : ",", nd == 2 ? shape[1] : 0);
            goto done;
        }
        idx->codes = idx->qf.map + off;
        /* Search reads the float rows of a few candidates only: without
         * this, each read faults in (and the process maps) its neighbours
         * too, and readahead reads far more than is used. */
        if (idx->vec.map)
            madvise(idx->vec.map, idx->vec.len, MADV_RANDOM);
        /* The calibration: int8's ranges, binary's thresholds (none at 0). */
        bool int8 = idx->quant == LIPI_QUANT_INT8;
        if (int8 || idx->bthr == LIPI_BINARY_THRESHOLD_MEAN) {
            size_t rows = int8 ? 2 : 1;
            TRY(join_path(path, dir, int8 ? "int8_ranges.npy" : "binary_thresholds.npy", err));
            TRY(map_file(path, &idx->rf, err));
            TRY(lipi_npy_parse(idx->rf.map, idx->rf.len, path, "<f4", &nd, shape, &off, err));
            if (nd != 2 || shape[0] != rows || shape[1] != idx->dim) {
                st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "expected shape (%zu, %zu) (%s)",
                                    rows, idx->dim,
                                    int8 ? "min and max per dimension"
                                         : "a threshold per dimension");
                goto done;
            }
            *(int8 ? &idx->ranges : &idx->thresholds) = (const float *)(idx->rf.map + off);
        }
        if (idx->thresholds) {
            for (size_t j = 0; j < idx->dim; j++)
                if (!isfinite(idx->thresholds[j])) {
                    st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                        "expected finite thresholds, found %g for dimension %zu",
                                        (double)idx->thresholds[j], j);
                    goto done;
                }
        }
    }

    if (idx->faiss_spec && !(opt && opt->skip_faiss) && lipi_faiss_available()) {
        TRY(join_path(path, dir, "faiss.index", err));
        TRY(lipi_faiss_read(path, &idx->faiss, err));
        if (lipi_faiss_count(idx->faiss) != idx->count ||
            lipi_faiss_dim(idx->faiss) != idx->dim) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected %zu vectors of dimension %zu as meta.json says, "
                                "found %zu of dimension %zu",
                                idx->count, idx->dim, lipi_faiss_count(idx->faiss),
                                lipi_faiss_dim(idx->faiss));
            goto done;
        }
        if (opt && opt->faiss_params && opt->faiss_params[0])
            TRY(lipi_faiss_set_params(idx->faiss, opt->faiss_params, err));
    }
done:
    if (st != LIPI_OK) {
        lipi_index_close(idx);
        return st;
    }
    *out = idx;
    return LIPI_OK;
}

void lipi_index_close(lipi_index *idx)
{
    if (!idx)
        return;
    lipi_faiss_free(idx->faiss);
    unmap_file(&idx->vec);
    unmap_file(&idx->off);
    unmap_file(&idx->txt);
    unmap_file(&idx->qf);
    unmap_file(&idx->rf);
    model_copy_free(&idx->model);
    lipi_free(idx->faiss_spec);
    lipi_free(idx->dir);
    lipi_free(idx);
}

size_t lipi_index_count(const lipi_index *idx)
{
    return idx->count;
}

size_t lipi_index_dim(const lipi_index *idx)
{
    return idx->dim;
}

const lipi_index_model *lipi_index_get_model(const lipi_index *idx)
{
    return &idx->view;
}

const char *lipi_index_faiss_spec(const lipi_index *idx)
{
    return idx->faiss_spec;
}

bool lipi_index_has_faiss(const lipi_index *idx)
{
    return idx->faiss != NULL;
}

lipi_binary_threshold lipi_index_binary_threshold(const lipi_index *idx)
{
    return idx->bthr;
}

lipi_quantization lipi_index_quantization(const lipi_index *idx)
{
    return idx->quant;
}

lipi_status lipi_index_check_model(const lipi_index *idx, const lipi_index_model *model,
                                   lipi_error *err)
{
    if (!model || !model->name || models_match(&idx->view, model))
        return LIPI_OK;
    return model_mismatch(idx->dir, &idx->view, model, err);
}

lipi_status lipi_index_get_text(const lipi_index *idx, size_t doc, const char **text,
                                size_t *len, lipi_error *err)
{
    if (doc >= idx->count)
        return lipi_error_set(err, LIPI_EINVAL, idx->dir, 0, 0,
                              "document %zu: expected a number below %zu", doc, idx->count);
    uint64_t a = get_u64le(idx->offs + 8 * doc), b = get_u64le(idx->offs + 8 * (doc + 1));
    if (a >= b || b > idx->txt.len || idx->txt.map[b - 1] != '\n' ||
        memchr(idx->txt.map + a, '\n', (size_t)(b - a - 1)))
        return lipi_error_set(err, LIPI_EFORMAT, idx->dir, 0, 0,
                              "offsets.npy entry %zu: expected a line of texts, found "
                              "offsets %llu..%llu of %zu bytes",
                              doc, (unsigned long long)a, (unsigned long long)b, idx->txt.len);
    *text = (const char *)idx->txt.map + a;
    *len = (size_t)(b - a - 1);
    return LIPI_OK;
}

lipi_status lipi_index_search(const lipi_index *idx, const float *q, size_t nq, size_t dim,
                              size_t k, const lipi_search_options *opt, int64_t *docs,
                              float *scores, lipi_error *err)
{
    if (dim != idx->dim)
        return lipi_error_set(err, LIPI_EINVAL, idx->dir, 0, 0,
                              "queries of dimension %zu: expected the index's %zu", dim,
                              idx->dim);
    if (idx->faiss && !(opt && opt->exact)) {
        if (!k)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "search: expected k >= 1");
        lipi_status st = check_finite(q, nq, dim, "query", err);
        if (st != LIPI_OK)
            return st;
        return lipi_faiss_search(idx->faiss, q, nq, k, opt ? opt->threads : 0, docs, scores,
                                 err);
    }
    if (idx->quant != LIPI_QUANT_NONE && !(opt && opt->exact))
        return quant_search(idx->quant, idx->codes, idx->quant == LIPI_QUANT_INT8 ? idx->ranges
                                                                             : idx->thresholds,
                            idx->x, idx->count, idx->dim, q, nq, k, opt, docs, scores, err);
    return knn_search(idx->x, idx->count, idx->dim, q, nq, k, opt, true, docs, scores, err);
}

lipi_status lipi_index_recall(const lipi_index *idx, const float *q, size_t nq, size_t dim,
                              size_t k, const lipi_search_options *opt, double *recall,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_search_options ex = opt ? *opt : (lipi_search_options){0};
    ex.exact = true;
    size_t total;
    int64_t *want = NULL, *got = NULL;
    float *sc = NULL;
    *recall = 0;
    if (__builtin_mul_overflow(nq ? nq : 1, k ? k : 1, &total) ||
        !(want = lipi_reallocarray(NULL, total, sizeof *want)) ||
        !(got = lipi_reallocarray(NULL, total, sizeof *got)) ||
        !(sc = lipi_reallocarray(NULL, total, sizeof *sc))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    TRY(lipi_index_search(idx, q, nq, dim, k, &ex, want, sc, err));
    TRY(lipi_index_search(idx, q, nq, dim, k, opt, got, sc, err));
    size_t hit = 0, all = 0;
    for (size_t i = 0; i < nq; i++)
        for (size_t a = 0; a < k && want[i * k + a] >= 0; a++) {
            all++;
            for (size_t b = 0; b < k; b++)
                if (got[i * k + b] == want[i * k + a]) {
                    hit++;
                    break;
                }
        }
    *recall = all ? (double)hit / (double)all : 1;
done:
    lipi_free(want);
    lipi_free(got);
    lipi_free(sc);
    return st;
}

/* ======================================================================== */
/* Writing an index                                                          */
/* ======================================================================== */

struct lipi_index_builder {
    char dir[PATH_MAX], tmp[PATH_MAX];
    size_t dim, count, old_count;
    uint64_t text_bytes;
    FILE *vec, *txt, *off;
    model_copy model;
    char *faiss_spec;  /* spec of the new faiss.index, or NULL */
    bool faiss_extend; /* add the new rows to the old faiss.index */
    lipi_quantization quant; /* of the new index */
    lipi_binary_threshold bthr; /* binary: ZERO or MEAN */
    size_t threads;
    bool sync;         /* fsync files and directories before the swap */
    float *scratch;    /* SCRATCH_ROWS rows */
    int lock_fd;       /* holds the flock on tmp (see lipi_temp_claim), or -1 */
    bool failed;
    lipi_index_swap_fn swap;
};

#define SCRATCH_ROWS 1024

/* Puts tmp at dir: one rename when dir is new, else an atomic exchange
 * (the old index ends at tmp), or, on file systems without RENAME_EXCHANGE,
 * three renames with a moment when dir is missing. */
static int default_swap(const char *tmp, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return rename(tmp, dir) == 0 ? 0 : errno;
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return errno;
    char old[PATH_MAX + 8];
    snprintf(old, sizeof old, "%s-old", tmp);
    if (rename(dir, old) != 0)
        return errno;
    if (rename(tmp, dir) != 0) {
        int e = errno;
        rename(old, dir);
        return e;
    }
    return rename(old, tmp) == 0 ? 0 : errno;
}

void lipi_index_builder_set_swap(lipi_index_builder *b, lipi_index_swap_fn fn)
{
    b->swap = fn;
}

const char *lipi_index_builder_get_temp_dir(const lipi_index_builder *b)
{
    return b->tmp;
}

/* Removes an index directory lipi wrote (only the files an index has, so a
 * stray file of the user's keeps the directory and is never deleted). */
static void remove_index_dir(const char *dir)
{
    char path[PATH_MAX];
    for (size_t i = 0; i < N_INDEX_FILES; i++)
        if (join_path(path, dir, index_files[i], NULL) == LIPI_OK)
            unlink(path);
    rmdir(dir);
}

void lipi_index_remove_temp_dir(const char *tmp)
{
    static const char alnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    char aside[PATH_MAX];
    size_t n = strlen(tmp);
    if (n == 0 || n >= sizeof aside)
        return;
    memcpy(aside, tmp, n + 1);
    /* The same name with its last letter changed is still a temporary of
     * the index, so the next write removes it should this process die
     * before the folder is gone. */
    for (size_t i = 0; i < sizeof alnum - 1; i++) {
        if (alnum[i] == tmp[n - 1])
            continue;
        aside[n - 1] = alnum[i];
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, aside, RENAME_NOREPLACE) == 0) {
            remove_index_dir(aside);
            return;
        }
        if (errno != EEXIST && errno != ENOTEMPTY)
            return;
    }
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void parent_dir(const char *path, char out[PATH_MAX])
{
    snprintf(out, PATH_MAX, "%s", path);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, PATH_MAX, ".");
    else if (slash == out)
        out[1] = '\0';
    else
        *slash = '\0';
}

/* What is at dir: 0 nothing, 1 an empty directory, 2 an index. */
static lipi_status inspect_target(const char *dir, int *what, lipi_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT)
            return lipi_error_set(err, LIPI_EIO, dir, 0, 0, "cannot stat: %s", strerror(errno));
        *what = 0;
        return LIPI_OK;
    }
    if (!S_ISDIR(sb.st_mode))
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                              "expected an index directory, found another kind of file");
    DIR *d = opendir(dir);
    if (!d)
        return lipi_error_set(err, LIPI_EIO, dir, 0, 0, "cannot read: %s", strerror(errno));
    bool meta = false, any = false;
    char stray[NAME_MAX + 1] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        any = true;
        bool known = false;
        for (size_t i = 0; i < N_INDEX_FILES; i++)
            known |= strcmp(e->d_name, index_files[i]) == 0;
        if (!known && !stray[0])
            snprintf(stray, sizeof stray, "%s", e->d_name);
        meta |= strcmp(e->d_name, "meta.json") == 0;
    }
    closedir(d);
    if (any && (!meta || stray[0]))
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                              "expected a lipi index or an empty directory, found %s%s%s",
                              stray[0] ? "a file an index does not have: '" : "no meta.json",
                              stray, stray[0] ? "'" : "");
    *what = any ? 2 : 1;
    return LIPI_OK;
}

static lipi_status builder_io(lipi_index_builder *b, const char *name, lipi_error *err)
{
    b->failed = true;
    char path[PATH_MAX];
    join_path(path, b->tmp, name, NULL);
    return lipi_error_set(err, LIPI_EIO, path, 0, 0, "write failed: %s", strerror(errno));
}

static lipi_status write_u64(lipi_index_builder *b, uint64_t v, lipi_error *err)
{
    unsigned char le[8];
    put_u64le(le, v);
    if (fwrite(le, 1, 8, b->off) != 8)
        return builder_io(b, "offsets.npy", err);
    return LIPI_OK;
}

/* Copies the old index's rows into the new files. */
static lipi_status copy_old(lipi_index_builder *b, const lipi_index *old, lipi_error *err)
{
    size_t vec_bytes = old->count * old->dim * sizeof(float);
    if (vec_bytes && fwrite(old->x, 1, vec_bytes, b->vec) != vec_bytes)
        return builder_io(b, "vectors.npy", err);
    if (old->txt.len && fwrite(old->txt.map, 1, old->txt.len, b->txt) != old->txt.len)
        return builder_io(b, "texts", err);
    uint64_t prev = 0;
    for (size_t i = 1; i <= old->count; i++) {
        uint64_t v = get_u64le(old->offs + 8 * i);
        if (v <= prev || v > old->txt.len)
            return lipi_error_set(err, LIPI_EFORMAT, old->dir, 0, 0,
                                  "offsets.npy entry %zu: expected an offset in (%llu, %zu], "
                                  "found %llu",
                                  i, (unsigned long long)prev, old->txt.len,
                                  (unsigned long long)v);
        lipi_status st = write_u64(b, v, err);
        if (st != LIPI_OK)
            return st;
        prev = v;
    }
    b->count = b->old_count = old->count;
    b->text_bytes = old->txt.len;
    return LIPI_OK;
}

static lipi_status open_new_file(lipi_index_builder *b, const char *name, FILE **f,
                                 lipi_error *err)
{
    char path[PATH_MAX];
    lipi_status st = join_path(path, b->tmp, name, err);
    if (st != LIPI_OK)
        return st;
    *f = fopen(path, "wb");
    if (!*f)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot create: %s", strerror(errno));
    return LIPI_OK;
}

lipi_status lipi_index_builder_new(const char *dir, const lipi_index_model *model, size_t dim,
                                   const lipi_index_write_options *opt,
                                   lipi_index_builder **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_index *old = NULL;
    lipi_index_write_options o = opt ? *opt : (lipi_index_write_options){0};
    *out = NULL;
    lipi_index_builder *b = lipi_calloc(1, sizeof *b);
    if (!b)
        return lipi_error_set(err, LIPI_ENOMEM, dir, 0, 0, "out of memory");
    b->dim = dim;
    b->threads = o.threads ? o.threads : 1;
    b->sync = !o.no_sync;
    b->swap = default_swap;
    b->lock_fd = -1;
    if (!dim || dim > MAX_DIM) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "expected a dimension from 1 to %zu, found %zu", MAX_DIM, dim);
        goto done;
    }
    if (!dir[0] || (size_t)snprintf(b->dir, sizeof b->dir, "%s", dir) >= sizeof b->dir - 16) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "expected a directory path");
        goto done;
    }
    size_t dl = strlen(b->dir);
    while (dl > 1 && b->dir[dl - 1] == '/')
        b->dir[--dl] = '\0';
    if (!host_little_endian()) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "an index stores little-endian data; this host is big-endian");
        goto done;
    }
    if (o.faiss_spec && !lipi_faiss_available()) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "--faiss %s: lipi was built without FAISS (install libfaiss-dev "
                            "and rebuild)",
                            o.faiss_spec);
        goto done;
    }
    if (model->truncate_dim && model->truncate_dim != dim) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "expected vectors truncated to %zu floats, found dimension %zu",
                            model->truncate_dim, dim);
        goto done;
    }
    TRY(model_copy_set(&b->model, model, err));
    int what;
    TRY(inspect_target(b->dir, &what, err));
    if (o.append && what == 2) {
        lipi_index_open_options oo = {.skip_faiss = true};
        TRY(lipi_index_open(b->dir, &oo, &old, err));
        if (old->dim != dim) {
            st = lipi_error_set(err, LIPI_EINVAL, b->dir, 0, 0,
                                "cannot append vectors of dimension %zu to an index of "
                                "dimension %zu",
                                dim, old->dim);
            goto done;
        }
        lipi_index_model mv = model_view(&b->model);
        if (!models_match(&old->view, &mv)) {
            st = model_mismatch(b->dir, &old->view, &mv, err);
            goto done;
        }
        /* An old index that recorded no prompt (lipi before prompts) takes
         * any: what it was built with is not known. */
        if (old->view.prompt && mv.prompt && strcmp(old->view.prompt, mv.prompt) != 0) {
            st = lipi_error_set(err, LIPI_EINVAL, b->dir, 0, 0,
                                "the index's documents were embedded with the prompt '%s', "
                                "not '%s': append with the same --prompt or --prompt-name",
                                old->view.prompt, mv.prompt);
            goto done;
        }
        if (o.quantize == LIPI_QUANT_NONE)
            o.quantize = old->quant;
        if (o.binary_threshold == LIPI_BINARY_THRESHOLD_DEFAULT && old->quant == LIPI_QUANT_BINARY)
            o.binary_threshold = old->bthr;
        if (old->faiss_spec && (!o.faiss_spec || strcmp(o.faiss_spec, old->faiss_spec) == 0)) {
            if (!lipi_faiss_available()) {
                st = lipi_error_set(err, LIPI_EINVAL, b->dir, 0, 0,
                                    "the index has a FAISS index (%s) that this lipi, built "
                                    "without FAISS, cannot extend",
                                    old->faiss_spec);
                goto done;
            }
            b->faiss_extend = true;
            o.faiss_spec = old->faiss_spec;
        }
    }
    /* Search would use one and never the other. */
    if (o.faiss_spec && o.quantize != LIPI_QUANT_NONE) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "an index has either a FAISS index (%s) or %s quantization, not both",
                            o.faiss_spec, lipi_quantization_name(o.quantize));
        goto done;
    }
    if (o.quantize == LIPI_QUANT_INT8 && dim > INT8_MAX_DIM) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "int8 quantization: expected a dimension of at most %d (int32 dot "
                            "products), found %zu",
                            INT8_MAX_DIM, dim);
        goto done;
    }
    if (!lipi_quantization_name(o.quantize)) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "unknown quantization %d",
                            (int)o.quantize);
        goto done;
    }
    if (o.binary_threshold != LIPI_BINARY_THRESHOLD_DEFAULT &&
        !lipi_binary_threshold_name(o.binary_threshold)) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "unknown binary threshold %d",
                            (int)o.binary_threshold);
        goto done;
    }
    b->quant = o.quantize;
    if (b->quant == LIPI_QUANT_BINARY)
        b->bthr = o.binary_threshold ? o.binary_threshold : LIPI_BINARY_THRESHOLD_MEAN;
    if (o.faiss_spec && !(b->faiss_spec = dup_or_null(o.faiss_spec))) {
        st = lipi_error_set(err, LIPI_ENOMEM, dir, 0, 0, "out of memory");
        goto done;
    }
    if (!(b->scratch = lipi_reallocarray(NULL, (size_t)SCRATCH_ROWS * dim, sizeof(float)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, dir, 0, 0, "out of memory");
        goto done;
    }
    lipi_remove_stale_temps(b->dir, 6, remove_index_dir);
    for (;;) {
        if ((size_t)snprintf(b->tmp, sizeof b->tmp, "%s.tmp-XXXXXX", b->dir) >= sizeof b->tmp ||
            !mkdtemp(b->tmp)) {
            char parent[PATH_MAX];
            parent_dir(b->dir, parent);
            st = lipi_error_set(err, LIPI_EIO, b->dir, 0, 0,
                                "cannot create a directory in %s: %s", parent, strerror(errno));
            b->tmp[0] = '\0';
            goto done;
        }
        b->lock_fd = open(b->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (b->lock_fd < 0 || lipi_temp_claim(b->lock_fd))
            break;
        /* A cleaner removed it before the lock was taken. */
        close(b->lock_fd);
        b->lock_fd = -1;
    }
    TRY(open_new_file(b, "vectors.npy", &b->vec, err));
    TRY(open_new_file(b, "texts", &b->txt, err));
    TRY(open_new_file(b, "offsets.npy", &b->off, err));
    unsigned char hdr[NPY_HDR];
    npy_header(hdr, "<f4", 0, dim);
    if (fwrite(hdr, 1, NPY_HDR, b->vec) != NPY_HDR) {
        st = builder_io(b, "vectors.npy", err);
        goto done;
    }
    npy_header(hdr, "<u8", 1, 0);
    if (fwrite(hdr, 1, NPY_HDR, b->off) != NPY_HDR) {
        st = builder_io(b, "offsets.npy", err);
        goto done;
    }
    TRY(write_u64(b, 0, err));
    if (old)
        TRY(copy_old(b, old, err));
done:
    lipi_index_close(old);
    if (st != LIPI_OK) {
        lipi_index_builder_abort(b);
        return st;
    }
    *out = b;
    return LIPI_OK;
}

lipi_status lipi_index_builder_add(lipi_index_builder *b, const float *vecs, size_t n,
                                   const char *const *texts, const size_t *lens,
                                   lipi_error *err)
{
    if (b->failed)
        return lipi_error_set(err, LIPI_EINVAL, b->dir, 0, 0,
                              "the index writer failed earlier; abort it");
    for (size_t i = 0; texts && i < n; i++)
        if (memchr(texts[i], '\n', lens[i]))
            return lipi_error_set(err, LIPI_EINVAL, b->dir, i + 1, 0,
                                  "document %zu: expected one line, found a newline",
                                  b->count + i + 1);
    lipi_status st = check_finite(vecs, n, b->dim, "vector", err);
    if (st != LIPI_OK)
        return st;
    for (size_t r0 = 0; r0 < n; r0 += SCRATCH_ROWS) {
        size_t m = r0 + SCRATCH_ROWS < n ? SCRATCH_ROWS : n - r0;
        memcpy(b->scratch, vecs + r0 * b->dim, m * b->dim * sizeof(float));
        lipi_vectors_normalize(b->scratch, m, b->dim);
        if (fwrite(b->scratch, sizeof(float), m * b->dim, b->vec) != m * b->dim)
            return builder_io(b, "vectors.npy", err);
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = texts ? lens[i] : 0;
        if ((len && fwrite(texts[i], 1, len, b->txt) != len) || putc('\n', b->txt) == EOF)
            return builder_io(b, "texts", err);
        b->text_bytes += len + 1;
        if ((st = write_u64(b, b->text_bytes, err)) != LIPI_OK)
            return st;
    }
    b->count += n;
    return LIPI_OK;
}

size_t lipi_index_builder_count(const lipi_index_builder *b)
{
    return b->count;
}

/* Rewrites the header with the final shape, then flushes, syncs and
 * closes. */
static lipi_status finish_npy(lipi_index_builder *b, FILE **f, const char *name,
                              const char *descr, size_t rows, size_t cols, lipi_error *err)
{
    unsigned char hdr[NPY_HDR];
    npy_header(hdr, descr, rows, cols);
    bool ok = fflush(*f) == 0 && fseek(*f, 0, SEEK_SET) == 0 &&
              fwrite(hdr, 1, NPY_HDR, *f) == NPY_HDR && fflush(*f) == 0 &&
              (!b->sync || fsync(fileno(*f)) == 0);
    ok &= fclose(*f) == 0;
    *f = NULL;
    return ok ? LIPI_OK : builder_io(b, name, err);
}

static lipi_status write_meta(lipi_index_builder *b, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *root = json_object(), *model = NULL;
    FILE *f = NULL;
    if (!root)
        goto nomem;
    const model_copy *m = &b->model;
    if (m->name) {
        model = json_object();
        if (!model || json_object_set_new(model, "name", json_string(m->name)) ||
            json_object_set_new(model, "path", m->path ? json_string(m->path) : json_null()) ||
            json_object_set_new(model, "fingerprint",
                                m->fingerprint ? json_string(m->fingerprint) : json_null()))
            goto nomem;
    } else {
        model = json_null();
    }
    if (json_object_set_new(root, "format", json_string(INDEX_FORMAT)) ||
        json_object_set_new(root, "version",
                            json_integer(b->bthr == LIPI_BINARY_THRESHOLD_MEAN ? 2
                                                                               : INDEX_VERSION)) ||
        json_object_set_new(root, "lipi_version", json_string(m->version)))
        goto nomem;
    /* set_new takes the reference whether it succeeds or not. */
    int bad = json_object_set_new(root, "model", model);
    model = NULL;
    if (bad ||
        json_object_set_new(root, "pooling", m->pooling ? json_string(m->pooling) : json_null()) ||
        json_object_set_new(root, "normalize", json_boolean(m->normalize)) ||
        json_object_set_new(root, "dimension", json_integer((json_int_t)b->dim)) ||
        json_object_set_new(root, "count", json_integer((json_int_t)b->count)) ||
        json_object_set_new(root, "quantization",
                            b->quant ? json_string(lipi_quantization_name(b->quant))
                                     : json_null()) ||
        json_object_set_new(root, "binary_threshold",
                            b->bthr ? json_string(lipi_binary_threshold_name(b->bthr))
                                    : json_null()) ||
        json_object_set_new(root, "faiss",
                            b->faiss_spec ? json_string(b->faiss_spec) : json_null()) ||
        json_object_set_new(root, "prompt", m->prompt ? json_string(m->prompt) : json_null()) ||
        json_object_set_new(root, "prompt_name",
                            m->prompt_name ? json_string(m->prompt_name) : json_null()) ||
        json_object_set_new(root, "truncate_dim",
                            m->truncate_dim ? json_integer((json_int_t)m->truncate_dim)
                                            : json_null()))
        goto nomem;
    TRY(open_new_file(b, "meta.json", &f, err));
    unsigned long fails = lipi_alloc_failures;
    bool ok = json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
              putc('\n', f) != EOF && fflush(f) == 0 && (!b->sync || fsync(fileno(f)) == 0);
    ok &= fclose(f) == 0;
    f = NULL;
    if (!ok && lipi_alloc_failures != fails) {
        b->failed = true;
        goto nomem;
    }
    if (!ok)
        st = builder_io(b, "meta.json", err);
    goto done;
nomem:
    st = lipi_error_set(err, LIPI_ENOMEM, b->dir, 0, 0, "out of memory");
done:
    json_decref(model);
    json_decref(root);
    return st;
}

/* Writes n rows of `bytes` each (from p) after a .npy header to name in
 * the new directory, and syncs it. */
static lipi_status write_small_npy(lipi_index_builder *b, const char *name, const char *descr,
                                   size_t rows, size_t cols, FILE **f, lipi_error *err)
{
    lipi_status st = open_new_file(b, name, f, err);
    if (st != LIPI_OK)
        return st;
    unsigned char hdr[NPY_HDR];
    npy_header(hdr, descr, rows, cols);
    if (fwrite(hdr, 1, NPY_HDR, *f) != NPY_HDR)
        return builder_io(b, name, err);
    return LIPI_OK;
}

static lipi_status close_synced(lipi_index_builder *b, FILE **f, const char *name,
                                lipi_error *err)
{
    bool ok = fflush(*f) == 0 && (!b->sync || fsync(fileno(*f)) == 0);
    ok &= fclose(*f) == 0;
    *f = NULL;
    return ok ? LIPI_OK : builder_io(b, name, err);
}

/* Writes quantized.npy (and int8_ranges.npy or binary_thresholds.npy,
 * calibrated on every row) in the new directory from its vectors.npy. */
static lipi_status write_quantized(lipi_index_builder *b, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_npy_map *vm = NULL;
    FILE *f = NULL;
    float *ranges = NULL;
    unsigned char *buf = NULL;
    char path[PATH_MAX];
    size_t rb = quant_row_bytes(b->quant, b->dim);
    TRY(join_path(path, b->tmp, "vectors.npy", err));
    TRY(lipi_npy_map_open(path, &vm, err));
    const float *x = lipi_npy_map_data(vm);
    if (!(ranges = lipi_reallocarray(NULL, 2 * b->dim, sizeof *ranges)) ||
        !(buf = lipi_reallocarray(NULL, SCRATCH_ROWS, rb))) {
        st = lipi_error_set(err, LIPI_ENOMEM, b->dir, 0, 0, "out of memory");
        goto done;
    }
    if (b->quant == LIPI_QUANT_INT8) {
        if (b->count)
            lipi_int8_ranges(x, b->count, b->dim, ranges);
        else
            memset(ranges, 0, 2 * b->dim * sizeof *ranges);
        TRY(write_small_npy(b, "int8_ranges.npy", "<f4", 2, b->dim, &f, err));
        if (fwrite(ranges, sizeof *ranges, 2 * b->dim, f) != 2 * b->dim) {
            st = builder_io(b, "int8_ranges.npy", err);
            goto done;
        }
        TRY(close_synced(b, &f, "int8_ranges.npy", err));
    }
    const float *thr = NULL; /* binary: NULL for zero */
    if (b->quant == LIPI_QUANT_BINARY) {
        if (b->bthr == LIPI_BINARY_THRESHOLD_MEAN && b->count)
            lipi_binary_means(x, b->count, b->dim, ranges);
        else
            memset(ranges, 0, b->dim * sizeof *ranges);
        TRY(write_small_npy(b, "binary_thresholds.npy", "<f4", 1, b->dim, &f, err));
        if (fwrite(ranges, sizeof *ranges, b->dim, f) != b->dim) {
            st = builder_io(b, "binary_thresholds.npy", err);
            goto done;
        }
        TRY(close_synced(b, &f, "binary_thresholds.npy", err));
        thr = ranges;
    }
    TRY(write_small_npy(b, "quantized.npy", b->quant == LIPI_QUANT_INT8 ? "|i1" : "|u1",
                        b->count, rb, &f, err));
    for (size_t r0 = 0; r0 < b->count; r0 += SCRATCH_ROWS) {
        size_t m = r0 + SCRATCH_ROWS < b->count ? SCRATCH_ROWS : b->count - r0;
        if (b->quant == LIPI_QUANT_INT8)
            lipi_quantize_int8(x + r0 * b->dim, m, b->dim, ranges, (int8_t *)buf);
        else
            lipi_quantize_binary(x + r0 * b->dim, m, b->dim, thr, buf);
        if (fwrite(buf, rb, m, f) != m) {
            st = builder_io(b, "quantized.npy", err);
            goto done;
        }
    }
    TRY(close_synced(b, &f, "quantized.npy", err));
done:
    if (f)
        fclose(f);
    lipi_free(ranges);
    lipi_free(buf);
    lipi_npy_map_close(vm);
    return st;
}

/* Builds faiss.index in the new directory from its vectors.npy. */
static lipi_status write_faiss(lipi_index_builder *b, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_npy_map *vm = NULL;
    lipi_faiss *f = NULL;
    char path[PATH_MAX];
    TRY(join_path(path, b->tmp, "vectors.npy", err));
    TRY(lipi_npy_map_open(path, &vm, err));
    const float *x = lipi_npy_map_data(vm);
    if (b->faiss_extend) {
        TRY(join_path(path, b->dir, "faiss.index", err));
        TRY(lipi_faiss_read(path, &f, err));
        if (lipi_faiss_count(f) != b->old_count || lipi_faiss_dim(f) != b->dim) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected %zu vectors of dimension %zu, found %zu of "
                                "dimension %zu",
                                b->old_count, b->dim, lipi_faiss_count(f), lipi_faiss_dim(f));
            goto done;
        }
        TRY(lipi_faiss_add(f, x + b->old_count * b->dim, b->count - b->old_count, b->threads,
                           err));
    } else {
        TRY(lipi_faiss_build(b->faiss_spec, x, b->count, b->dim, b->threads, &f, err));
    }
    TRY(join_path(path, b->tmp, "faiss.index", err));
    TRY(lipi_faiss_write(f, path, err));
done:
    lipi_faiss_free(f);
    lipi_npy_map_close(vm);
    return st;
}

lipi_status lipi_index_builder_commit(lipi_index_builder *b, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (b->failed) {
        st = lipi_error_set(err, LIPI_EINVAL, b->dir, 0, 0,
                            "the index writer failed earlier; nothing was committed");
        goto done;
    }
    TRY(finish_npy(b, &b->vec, "vectors.npy", "<f4", b->count, b->dim, err));
    TRY(finish_npy(b, &b->off, "offsets.npy", "<u8", b->count + 1, 0, err));
    bool ok = fflush(b->txt) == 0 && (!b->sync || fsync(fileno(b->txt)) == 0);
    ok &= fclose(b->txt) == 0;
    b->txt = NULL;
    if (!ok) {
        st = builder_io(b, "texts", err);
        goto done;
    }
    if (b->faiss_spec)
        TRY(write_faiss(b, err));
    if (b->quant != LIPI_QUANT_NONE)
        TRY(write_quantized(b, err));
    TRY(write_meta(b, err));
    if (b->sync)
        sync_dir(b->tmp);
    int e = b->swap(b->tmp, b->dir);
    if (e) {
        st = lipi_error_set(err, LIPI_EIO, b->dir, 0, 0,
                            "cannot put the new index in place: %s (the old one is unchanged)",
                            strerror(e));
        goto done;
    }
    if (b->sync) {
        char parent[PATH_MAX];
        parent_dir(b->dir, parent);
        sync_dir(parent);
    }
    /* The old index, if there was one, is now at tmp. */
    remove_index_dir(b->tmp);
    b->tmp[0] = '\0';
done:
    lipi_index_builder_abort(b);
    return st;
}

void lipi_index_builder_abort(lipi_index_builder *b)
{
    if (!b)
        return;
    if (b->vec)
        fclose(b->vec);
    if (b->txt)
        fclose(b->txt);
    if (b->off)
        fclose(b->off);
    if (b->tmp[0])
        remove_index_dir(b->tmp);
    if (b->lock_fd >= 0)
        close(b->lock_fd);
    model_copy_free(&b->model);
    lipi_free(b->faiss_spec);
    lipi_free(b->scratch);
    lipi_free(b);
}

lipi_status lipi_index_create(const char *dir, const lipi_index_model *model,
                              const float *vecs, size_t n, size_t dim,
                              const char *const *texts, const size_t *lens,
                              const lipi_index_write_options *opt, lipi_error *err)
{
    lipi_index_builder *b = NULL;
    lipi_status st = lipi_index_builder_new(dir, model, dim, opt, &b, err);
    if (st != LIPI_OK)
        return st;
    st = lipi_index_builder_add(b, vecs, n, texts, lens, err);
    if (st != LIPI_OK) {
        lipi_index_builder_abort(b);
        return st;
    }
    return lipi_index_builder_commit(b, err);
}

/* ======================================================================== */
/* Without FAISS                                                             */
/* ======================================================================== */

#ifndef LIPI_HAVE_FAISS
static lipi_status no_faiss(lipi_error *err)
{
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "lipi was built without FAISS (install libfaiss-dev and rebuild)");
}

bool lipi_faiss_available(void)
{
    return false;
}

lipi_status lipi_faiss_build(const char *spec, const float *x, size_t n, size_t dim,
                             size_t threads, lipi_faiss **out, lipi_error *err)
{
    *out = NULL;
    return no_faiss(err);
}

lipi_status lipi_faiss_add(lipi_faiss *f, const float *x, size_t n, size_t threads,
                           lipi_error *err)
{
    return no_faiss(err);
}

lipi_status lipi_faiss_set_params(lipi_faiss *f, const char *params, lipi_error *err)
{
    return no_faiss(err);
}

lipi_status lipi_faiss_search(const lipi_faiss *f, const float *q, size_t nq, size_t k,
                              size_t threads, int64_t *docs, float *scores, lipi_error *err)
{
    return no_faiss(err);
}

lipi_status lipi_faiss_write(const lipi_faiss *f, const char *path, lipi_error *err)
{
    return no_faiss(err);
}

lipi_status lipi_faiss_read(const char *path, lipi_faiss **out, lipi_error *err)
{
    *out = NULL;
    return no_faiss(err);
}

size_t lipi_faiss_count(const lipi_faiss *f)
{
    return 0;
}

size_t lipi_faiss_dim(const lipi_faiss *f)
{
    return 0;
}

void lipi_faiss_free(lipi_faiss *f)
{
}

lipi_status lipi_faiss_binary_new(size_t nbytes, lipi_faiss_binary **out, lipi_error *err)
{
    *out = NULL;
    return no_faiss(err);
}

lipi_status lipi_faiss_binary_add(lipi_faiss_binary *f, const uint8_t *codes, size_t n,
                                  lipi_error *err)
{
    return no_faiss(err);
}

lipi_status lipi_faiss_binary_search(const lipi_faiss_binary *f, const uint8_t *q, size_t nq,
                                     size_t k, size_t threads, int64_t *docs, int32_t *dist,
                                     lipi_error *err)
{
    return no_faiss(err);
}

void lipi_faiss_binary_free(lipi_faiss_binary *f)
{
}
#endif

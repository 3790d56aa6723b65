/* NumPy .npy writer (format version 1.0): a magic string, a header dict
 * padded with spaces so the data starts on a 64-byte boundary, then raw
 * little-endian float32 in C order. The header is written with room for a
 * 20-digit row count, so a streaming writer can fix the shape at the end
 * without moving the data. */
#include "retrieval/retrieval.h"
#include "tokenizer/base.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define NPY_HEADER_LEN 128

struct lipi_npy_writer {
    lipi_atomic_file af;
    FILE *f;            /* af.f */
    char *path;
    size_t cols, rows;
    bool failed;
};

/* Fills hdr[0..128) with the header for a (rows, cols) float32 array. */
static void npy_header(char hdr[NPY_HEADER_LEN], size_t rows, size_t cols)
{
    memset(hdr, ' ', NPY_HEADER_LEN);
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = NPY_HEADER_LEN - 10;
    hdr[8] = (char)(hl & 0xff);
    hdr[9] = (char)(hl >> 8);
    char dict[NPY_HEADER_LEN];
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows,
                     cols);
    memcpy(hdr + 10, dict, (size_t)n);
    hdr[NPY_HEADER_LEN - 1] = '\n';
}

static bool host_is_little_endian(void)
{
    uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

lipi_status lipi_npy_writer_open(const char *path, size_t cols, lipi_npy_writer **out,
                                 lipi_error *err)
{
    lipi_npy_writer *w = lipi_calloc(1, sizeof *w);
    *out = NULL;
    if (!w || !(w->path = lipi_strndup(path, strlen(path)))) {
        lipi_free(w);
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    }
    w->cols = cols;
    lipi_status st = lipi_atomic_open(&w->af, path, err);
    if (st != LIPI_OK) {
        lipi_free(w->path);
        lipi_free(w);
        return st;
    }
    w->f = w->af.f;
    char hdr[NPY_HEADER_LEN];
    npy_header(hdr, 0, cols);
    if (fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot write: %s", strerror(errno));
        lipi_npy_writer_abort(w);
        return st;
    }
    *out = w;
    return LIPI_OK;
}

lipi_status lipi_npy_writer_append(lipi_npy_writer *w, const float *rows, size_t n,
                                   lipi_error *err)
{
    size_t count = n * w->cols;
    if (host_is_little_endian()) {
        if (count && fwrite(rows, sizeof(float), count, w->f) != count)
            w->failed = true;
    } else {
        for (size_t i = 0; i < count && !w->failed; i++) {
            uint32_t u;
            unsigned char b[4];
            memcpy(&u, &rows[i], 4);
            for (int k = 0; k < 4; k++)
                b[k] = (unsigned char)(u >> (8 * k));
            w->failed = fwrite(b, 1, 4, w->f) != 4;
        }
    }
    if (w->failed)
        return lipi_error_set(err, LIPI_EIO, w->path, 0, 0, "write failed: %s", strerror(errno));
    w->rows += n;
    return LIPI_OK;
}

lipi_status lipi_npy_writer_close(lipi_npy_writer *w, lipi_error *err)
{
    if (!w)
        return LIPI_OK;
    lipi_status st = LIPI_OK;
    char hdr[NPY_HEADER_LEN];
    npy_header(hdr, w->rows, w->cols);
    if (w->failed || fseek(w->f, 0, SEEK_SET) != 0 ||
        fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr) {
        st = lipi_error_set(err, LIPI_EIO, w->path, 0, 0, "cannot write the header: %s",
                            strerror(errno));
        lipi_atomic_abort(&w->af);
    } else {
        st = lipi_atomic_commit(&w->af, err);
    }
    lipi_free(w->path);
    lipi_free(w);
    return st;
}

void lipi_npy_writer_abort(lipi_npy_writer *w)
{
    if (!w)
        return;
    lipi_atomic_abort(&w->af);
    lipi_free(w->path);
    lipi_free(w);
}

const char *lipi_npy_writer_get_temp_path(const lipi_npy_writer *w)
{
    return w->af.tmp;
}

lipi_status lipi_npy_write(const char *path, const float *data, size_t rows, size_t cols,
                           lipi_error *err)
{
    lipi_npy_writer *w = NULL;
    lipi_status st = lipi_npy_writer_open(path, cols, &w, err);
    if (st != LIPI_OK)
        return st;
    st = lipi_npy_writer_append(w, data, rows, err);
    lipi_status st2 = lipi_npy_writer_close(w, st == LIPI_OK ? err : NULL);
    return st != LIPI_OK ? st : st2;
}

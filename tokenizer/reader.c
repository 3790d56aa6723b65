/* Line reader: streams a text file (plain, .gz, .xz or .zst, or stdin) line
 * by line with a buffer that grows to the longest line, checking UTF-8.
 *
 * Layout of the line buffer:
 *
 *   buf: [ consumed | start .. scan (no '\n') .. end | free .. cap ]
 *
 * buf_off is the offset of buf[0] in the (decompressed) input, so the file
 * offset of any byte is buf_off + its index. The codecs allocate through the
 * lipi hooks so allocation-failure tests reach them too. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_createDStream_advanced: lipi allocator */
#include "tokenizer/base.h"

#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

enum { CODEC_PLAIN, CODEC_GZ, CODEC_XZ, CODEC_ZST };

#define READ_CHUNK ((size_t)64 * 1024)

struct lipi_line_reader {
    char *path;      /* for messages ("<stdin>" for "-") */
    int fd;
    bool own_fd;
    int codec;
    lipi_invalid_mode mode;

    /* compressed input */
    unsigned char *in;
    size_t in_pos, in_len;
    bool in_eof;
    bool codec_end;  /* the last frame/member ended cleanly */
    z_stream z;
    bool z_live;
    lzma_stream x;
    lzma_allocator x_alloc;
    bool x_live;
    ZSTD_DStream *zs;

    /* decompressed text */
    char *buf;
    size_t cap, start, scan, end;
    uint64_t buf_off;
    bool eof;
    bool bom_checked;

    size_t line_no;
    uint64_t raw_bytes;
    char *fixed;     /* repaired copy of the last line (LIPI_INVALID_REPLACE) */
};

/* ------------------------------------------------------------------------ */
/* Allocator adapters for the codecs                                        */
/* ------------------------------------------------------------------------ */

static voidpf z_alloc(voidpf opaque, uInt n, uInt size)
{
    (void)opaque;
    return lipi_calloc(n, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    lipi_free(p);
}

/* liblzma does not need zeroed memory; zeroing its 64 MiB dictionaries
 * would cost more than decoding a small file. */
static void *x_alloc(void *opaque, size_t n, size_t size)
{
    (void)opaque;
    return lipi_reallocarray(NULL, n, size);
}

static void x_free(void *opaque, void *p)
{
    (void)opaque;
    lipi_free(p);
}

static void *zs_alloc(void *opaque, size_t size)
{
    (void)opaque;
    return lipi_malloc(size);
}

static void zs_free(void *opaque, void *p)
{
    (void)opaque;
    lipi_free(p);
}

/* ------------------------------------------------------------------------ */
/* Raw input                                                                */
/* ------------------------------------------------------------------------ */

static lipi_status read_fd(lipi_line_reader *r, void *dst, size_t cap, size_t *got,
                           lipi_error *err)
{
    for (;;) {
        ssize_t n = read(r->fd, dst, cap);
        if (n >= 0) {
            *got = (size_t)n;
            r->raw_bytes += (uint64_t)n;
            return LIPI_OK;
        }
        if (errno != EINTR)
            return lipi_error_set(err, LIPI_EIO, r->path, r->line_no + 1, 0,
                                  "cannot read: %s", strerror(errno));
    }
}

static lipi_status refill_in(lipi_line_reader *r, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (r->in_pos < r->in_len || r->in_eof)
        return LIPI_OK;
    size_t got = 0;
    TRY(read_fd(r, r->in, READ_CHUNK, &got, err));
    r->in_pos = 0;
    r->in_len = got;
    if (got == 0)
        r->in_eof = true;
done:
    return st;
}

static lipi_status codec_error(lipi_line_reader *r, const char *what, const char *detail,
                               lipi_error *err)
{
    return lipi_error_set(err, LIPI_EFORMAT, r->path, 0, 0,
                          "corrupt %s data (expected a valid %s stream, found: %s)", what,
                          what, detail);
}

static lipi_status codec_truncated(lipi_line_reader *r, const char *what, lipi_error *err)
{
    return lipi_error_set(err, LIPI_ETRUNC, r->path, 0, 0,
                          "truncated %s stream (expected more compressed data, found end of file)",
                          what);
}

/* gzip, possibly several concatenated members. */
static lipi_status fill_gz(lipi_line_reader *r, char *dst, size_t cap, size_t *got,
                           lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *got = 0;
    while (*got == 0) {
        TRY(refill_in(r, err));
        if (r->in_pos == r->in_len) {
            if (!r->codec_end)
                return codec_truncated(r, "gzip", err);
            return LIPI_OK;
        }
        if (r->codec_end) {
            /* Another member follows the one that ended. */
            if (inflateReset(&r->z) != Z_OK)
                return codec_error(r, "gzip", "reset failed", err);
            r->codec_end = false;
        }
        r->z.next_in = r->in + r->in_pos;
        r->z.avail_in = (uInt)(r->in_len - r->in_pos);
        r->z.next_out = (Bytef *)dst;
        r->z.avail_out = (uInt)(cap > UINT32_MAX ? UINT32_MAX : cap);
        int zr = inflate(&r->z, Z_NO_FLUSH);
        r->in_pos = r->in_len - r->z.avail_in;
        *got = (size_t)((char *)r->z.next_out - dst);
        if (zr == Z_STREAM_END)
            r->codec_end = true;
        else if (zr == Z_MEM_ERROR)
            return LIPI_ENOMEM;
        else if (zr != Z_OK && zr != Z_BUF_ERROR)
            return codec_error(r, "gzip", r->z.msg ? r->z.msg : "inflate error", err);
    }
done:
    return st;
}

static lipi_status fill_xz(lipi_line_reader *r, char *dst, size_t cap, size_t *got,
                           lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *got = 0;
    while (*got == 0 && !r->codec_end) {
        TRY(refill_in(r, err));
        r->x.next_in = r->in + r->in_pos;
        r->x.avail_in = r->in_len - r->in_pos;
        r->x.next_out = (uint8_t *)dst;
        r->x.avail_out = cap;
        lzma_ret xr = lzma_code(&r->x, r->in_eof ? LZMA_FINISH : LZMA_RUN);
        r->in_pos = r->in_len - r->x.avail_in;
        *got = cap - r->x.avail_out;
        if (xr == LZMA_STREAM_END)
            r->codec_end = true;
        else if (xr == LZMA_MEM_ERROR)
            return LIPI_ENOMEM;
        else if (xr == LZMA_BUF_ERROR && r->in_eof)
            return codec_truncated(r, "xz", err);
        else if (xr != LZMA_OK && xr != LZMA_BUF_ERROR)
            return codec_error(r, "xz", xr == LZMA_FORMAT_ERROR ? "not xz" : "lzma error", err);
    }
done:
    return st;
}

static lipi_status fill_zst(lipi_line_reader *r, char *dst, size_t cap, size_t *got,
                            lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *got = 0;
    while (*got == 0) {
        TRY(refill_in(r, err));
        if (r->in_pos == r->in_len) {
            if (!r->codec_end)
                return codec_truncated(r, "zstd", err);
            return LIPI_OK;
        }
        ZSTD_inBuffer in = {r->in, r->in_len, r->in_pos};
        ZSTD_outBuffer out = {dst, cap, 0};
        size_t zr = ZSTD_decompressStream(r->zs, &out, &in);
        r->in_pos = in.pos;
        *got = out.pos;
        if (ZSTD_isError(zr)) {
            if (ZSTD_getErrorCode(zr) == ZSTD_error_memory_allocation)
                return LIPI_ENOMEM;
            return codec_error(r, "zstd", ZSTD_getErrorName(zr), err);
        }
        /* 0 means a frame ended and everything is flushed. */
        r->codec_end = zr == 0;
    }
done:
    return st;
}

/* Decompressed bytes into dst; *got == 0 only at the end of input. */
static lipi_status fill(lipi_line_reader *r, char *dst, size_t cap, size_t *got,
                        lipi_error *err)
{
    switch (r->codec) {
    case CODEC_GZ: return fill_gz(r, dst, cap, got, err);
    case CODEC_XZ: return fill_xz(r, dst, cap, got, err);
    case CODEC_ZST: return fill_zst(r, dst, cap, got, err);
    default: return read_fd(r, dst, cap, got, err);
    }
}

/* ------------------------------------------------------------------------ */
/* Opening and closing                                                      */
/* ------------------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static lipi_status open_codec(lipi_line_reader *r)
{
    switch (r->codec) {
    case CODEC_GZ:
        r->z.zalloc = z_alloc;
        r->z.zfree = z_free;
        /* 16 + MAX_WBITS: expect a gzip header and trailer. */
        switch (inflateInit2(&r->z, 16 + MAX_WBITS)) {
        case Z_OK: r->z_live = true; break;
        case Z_MEM_ERROR: return LIPI_ENOMEM;
        default: return LIPI_EIO;
        }
        break;
    case CODEC_XZ: {
        r->x_alloc = (lzma_allocator){x_alloc, x_free, NULL};
        lzma_stream init = LZMA_STREAM_INIT;
        r->x = init;
        r->x.allocator = &r->x_alloc;
        lzma_ret xr = lzma_stream_decoder(&r->x, UINT64_MAX, LZMA_CONCATENATED);
        if (xr == LZMA_MEM_ERROR)
            return LIPI_ENOMEM;
        if (xr != LZMA_OK)
            return LIPI_EIO;
        r->x_live = true;
        break;
    }
    case CODEC_ZST:
        r->zs = ZSTD_createDStream_advanced((ZSTD_customMem){zs_alloc, zs_free, NULL});
        if (!r->zs)
            return LIPI_ENOMEM;
        break;
    default: return LIPI_OK;
    }
    r->in = lipi_malloc(READ_CHUNK);
    return r->in ? LIPI_OK : LIPI_ENOMEM;
}

lipi_status lipi_line_reader_open(const char *path, lipi_invalid_mode mode,
                                  lipi_line_reader **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_line_reader *r = NULL;
    *out = NULL;
    if (!path)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a path, found NULL");
    bool is_stdin = strcmp(path, "-") == 0;
    r = lipi_calloc(1, sizeof *r);
    if (!r)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    r->fd = -1;
    r->mode = mode;
    r->path = lipi_strndup(is_stdin ? "<stdin>" : path, strlen(is_stdin ? "<stdin>" : path));
    if (!r->path)
        TRY(LIPI_ENOMEM);
    if (is_stdin) {
        r->fd = STDIN_FILENO;
    } else {
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0)
            TRY(lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno)));
        r->own_fd = true;
        struct stat sb;
        if (fstat(r->fd, &sb) != 0)
            TRY(lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot stat: %s", strerror(errno)));
        if (S_ISDIR(sb.st_mode))
            TRY(lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot read: %s", strerror(EISDIR)));
        if (ends_with(path, ".gz"))
            r->codec = CODEC_GZ;
        else if (ends_with(path, ".xz"))
            r->codec = CODEC_XZ;
        else if (ends_with(path, ".zst"))
            r->codec = CODEC_ZST;
    }
    st = open_codec(r);
    if (st == LIPI_EIO)
        TRY(lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot start the decompressor"));
    TRY(st);
    r->cap = READ_CHUNK;
    r->buf = lipi_malloc(r->cap);
    if (!r->buf)
        TRY(LIPI_ENOMEM);
    *out = r;
    r = NULL;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    lipi_line_reader_close(r);
    return st;
}

void lipi_line_reader_close(lipi_line_reader *r)
{
    if (!r)
        return;
    if (r->own_fd && r->fd >= 0)
        close(r->fd);
    if (r->z_live)
        inflateEnd(&r->z);
    if (r->x_live)
        lzma_end(&r->x);
    ZSTD_freeDStream(r->zs);
    lipi_free(r->in);
    lipi_free(r->buf);
    lipi_free(r->fixed);
    lipi_free(r->path);
    lipi_free(r);
}

size_t lipi_line_reader_line_no(const lipi_line_reader *r)
{
    return r->line_no;
}

uint64_t lipi_line_reader_bytes_read(const lipi_line_reader *r)
{
    return r->raw_bytes;
}

uint64_t lipi_line_reader_text_bytes(const lipi_line_reader *r)
{
    return r->buf_off + r->start;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                    */
/* ------------------------------------------------------------------------ */

/* Makes room after `end` (moving the pending line to the front, then
 * doubling) and reads more; sets r->eof at the end of input. */
static lipi_status read_more(lipi_line_reader *r, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (r->start > 0 && r->cap - r->end < READ_CHUNK) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->buf_off += r->start;
        r->end -= r->start;
        r->scan -= r->start;
        r->start = 0;
    }
    if (r->cap - r->end < READ_CHUNK / 2) {
        void *p = r->buf;
        size_t cap = r->cap;
        TRY(lipi_grow(&p, &cap, r->cap + 1, 1));
        r->buf = p;
        r->cap = cap;
    }
    size_t got = 0;
    TRY(fill(r, r->buf + r->end, r->cap - r->end, &got, err));
    if (got == 0)
        r->eof = true;
    r->end += got;
done:
    return st;
}

lipi_status lipi_line_reader_next(lipi_line_reader *r, const char **line, size_t *len,
                                  lipi_error *err)
{
    return lipi_line_reader_next_sep(r, '\n', line, len, err);
}

lipi_status lipi_line_reader_next_sep(lipi_line_reader *r, int sep, const char **line,
                                      size_t *len, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *line = NULL;
    *len = 0;
    lipi_free(r->fixed);
    r->fixed = NULL;
    const char *nl = NULL;
    for (;;) {
        if (!r->bom_checked) {
            if (r->end - r->start < 3 && !r->eof) {
                TRY(read_more(r, err));
                continue;
            }
            if (r->end - r->start >= 3 && memcmp(r->buf + r->start, "\xEF\xBB\xBF", 3) == 0)
                r->start = r->scan = r->start + 3;
            r->bom_checked = true;
        }
        if (r->end > r->scan && sep >= 0)
            nl = memchr(r->buf + r->scan, sep, r->end - r->scan);
        if (nl || r->eof)
            break;
        r->scan = r->end;
        TRY(read_more(r, err));
    }
    size_t start = r->start, stop;
    if (nl) {
        stop = (size_t)(nl - r->buf);
        r->start = r->scan = stop + 1;
        if (sep == '\n' && stop > start && r->buf[stop - 1] == '\r')
            stop--;
    } else {
        if (start == r->end)
            return LIPI_OK; /* end of input */
        stop = r->end;
        r->start = r->scan = r->end;
    }
    r->line_no++;
    const char *s = r->buf + start;
    size_t n = stop - start;
    size_t good = lipi_utf8_valid_prefix(s, n);
    if (good < n) {
        if (r->mode != LIPI_INVALID_REPLACE)
            return lipi_error_set(err, LIPI_EFORMAT, r->path, r->line_no,
                                  (size_t)(r->buf_off + start + good),
                                  "invalid UTF-8 byte 0x%02x (expected a UTF-8 sequence; use "
                                  "--invalid=replace to substitute U+FFFD)",
                                  (unsigned char)s[good]);
        TRY(lipi_utf8_repair(s, n, &r->fixed, &n));
        s = r->fixed;
    }
    *line = s;
    *len = n;
done:
    /* The buffers and decompressors report ENOMEM without a message. */
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, r->path, r->line_no, 0, "out of memory");
    return st;
}

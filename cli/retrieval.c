/* Shared pieces of the retrieval commands (cli/retrieval.h). */
#include "cli/retrieval.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/signals.h"
#include "encoder/encoder.h"

/* ------------------------------------------------------------------------ */
/* Line batches                                                              */
/* ------------------------------------------------------------------------ */

static lipi_status grow(void **p, size_t *cap, size_t need, size_t size, lipi_error *err)
{
    if (need <= *cap)
        return LIPI_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = lipi_reallocarray(*p, c, size);
    if (!q)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    *p = q;
    *cap = c;
    return LIPI_OK;
}

lipi_status cli_text_batch_add(cli_text_batch *b, const char *line, size_t len, lipi_error *err)
{
    char *old = b->buf;
    lipi_status st = grow((void **)&b->buf, &b->cap, b->len + len + 1, 1, err);
    if (st != LIPI_OK)
        return st;
    if (b->n == b->ncap) {
        size_t c = b->ncap ? 2 * b->ncap : 64;
        size_t *start = lipi_reallocarray(b->start, c, sizeof *start);
        if (start)
            b->start = start;
        const char **ptrs = start ? lipi_reallocarray(b->ptrs, c, sizeof *ptrs) : NULL;
        if (ptrs)
            b->ptrs = ptrs;
        size_t *lens = ptrs ? lipi_reallocarray(b->lens, c, sizeof *lens) : NULL;
        if (!lens)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        b->lens = lens;
        b->ncap = c;
    }
    memcpy(b->buf + b->len, line, len);
    b->start[b->n] = b->len;
    b->lens[b->n] = len;
    b->len += len + 1;
    b->buf[b->len - 1] = '\0';
    b->n++;
    /* The buffer doubles when it moves, so re-pointing stays linear. */
    for (size_t i = b->buf == old ? b->n - 1 : 0; i < b->n; i++)
        b->ptrs[i] = b->buf + b->start[i];
    return LIPI_OK;
}

void cli_text_batch_clear(cli_text_batch *b)
{
    b->len = 0;
    b->n = 0;
}

void cli_text_batch_free(cli_text_batch *b)
{
    lipi_free(b->buf);
    lipi_free(b->start);
    lipi_free(b->ptrs);
    lipi_free(b->lens);
    memset(b, 0, sizeof *b);
}

lipi_status cli_text_batch_read(cli_text_batch *b, const char *path, lipi_invalid_mode mode,
                                lipi_error *err)
{
    lipi_line_reader *r = NULL;
    lipi_status st = lipi_line_reader_open(path, mode, &r, err);
    while (st == LIPI_OK) {
        const char *line;
        size_t len;
        st = lipi_line_reader_next(r, &line, &len, err);
        if (st != LIPI_OK || !line)
            break;
        st = cli_text_batch_add(b, line, len, err);
    }
    lipi_line_reader_close(r);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void cli_lines_progress_start(cli_lines_progress *p, const char *sub, bool want, char **files, int nfiles)
{
    memset(p, 0, sizeof *p);
    p->on = want && isatty(2);
    p->sub = sub;
    p->t0 = p->last = wall();
    /* A share of bytes only means something for plain, uncompressed files. */
    for (int i = 0; i < nfiles; i++) {
        struct stat sb;
        size_t l = strlen(files[i]);
        bool packed = (l > 3 && (strcmp(files[i] + l - 3, ".gz") == 0 ||
                                 strcmp(files[i] + l - 3, ".xz") == 0)) ||
                      (l > 4 && strcmp(files[i] + l - 4, ".zst") == 0);
        if (strcmp(files[i], "-") == 0 || packed || stat(files[i], &sb) != 0 ||
            !S_ISREG(sb.st_mode)) {
            p->bytes_total = 0;
            break;
        }
        p->bytes_total += (unsigned long long)sb.st_size;
    }
}

void cli_lines_progress_add(cli_lines_progress *p, size_t lines)
{
    p->lines += lines;
    if (!p->on)
        return;
    double t = wall();
    if (t - p->last < 0.25)
        return;
    p->last = t;
    fprintf(stderr, "\rlipi %s: %zu %s, %.0f lines/s", p->sub, p->lines,
            lipi_plural(p->lines, "line", "lines"), (double)p->lines / (t - p->t0));
    cli_signals_line_open(true);
    fflush(stderr);
}

void cli_lines_progress_done(cli_lines_progress *p)
{
    if (p->on && p->lines)
        fprintf(stderr, "\rlipi %s: %zu %s, %.0f lines/s\n", p->sub, p->lines,
                lipi_plural(p->lines, "line", "lines"), (double)p->lines / (wall() - p->t0 + 1e-9));
    cli_signals_line_open(false);
    p->on = false;
}

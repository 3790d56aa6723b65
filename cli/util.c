/* Helpers shared by the subcommands: messages, number parsing, JSON output,
 * line iteration over input files. */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cli_report(const char *sub, const lipi_error *err)
{
    fprintf(stderr, "lipi %s: ", sub);
    if (err->path[0])
        fprintf(stderr, "%s:", err->path);
    if (err->line)
        fprintf(stderr, "%zu:", err->line);
    if (err->path[0] || err->line)
        fprintf(stderr, " ");
    if (err->offset || err->line)
        fprintf(stderr, "byte %zu: ", err->offset);
    fprintf(stderr, "%s\n", err->msg[0] ? err->msg : lipi_status_name(err->code));
}

int cli_usage_error(const char *sub, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "lipi %s: ", sub);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'lipi %s --help'.\n", sub);
    return EXIT_USAGE;
}

int cli_bad_value(const char *sub, const char *opt, const char *takes, const char *arg)
{
    return cli_usage_error(sub, "%s takes %s, not '%s'", opt, takes, arg);
}

bool cli_parse_invalid(const char *s, lipi_invalid_mode *mode)
{
    if (strcmp(s, "error") == 0)
        *mode = LIPI_INVALID_ERROR;
    else if (strcmp(s, "replace") == 0)
        *mode = LIPI_INVALID_REPLACE;
    else
        return false;
    return true;
}

bool cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

size_t cli_json_escape(char *dst, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    char *d = dst;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *d++ = (char)c;
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\n': *d++ = 'n'; break;
        case '\r': *d++ = 'r'; break;
        case '\t': *d++ = 't'; break;
        default:
            memcpy(d, "u00", 3);
            d[3] = hex[c >> 4];
            d[4] = hex[c & 15];
            d += 5;
        }
    }
    return (size_t)(d - dst);
}

void cli_write_json_string(FILE *f, const char *s, size_t len)
{
    char buf[6 * 1024];
    putc('"', f);
    for (size_t at = 0; at < len; at += 1024) {
        size_t m = len - at < 1024 ? len - at : 1024;
        fwrite(buf, 1, cli_json_escape(buf, s + at, m), f);
    }
    putc('"', f);
}

int cli_for_each_record(const char *sub, char **files, int nfiles,
                        const lipi_record_options *ro, cli_record_fn fn, void *ctx)
{
    static char *stdin_only[] = {"-"};
    if (nfiles == 0) {
        files = stdin_only;
        nfiles = 1;
    }
    for (int f = 0; f < nfiles; f++) {
        lipi_error err = {0};
        lipi_record_reader *r = NULL;
        lipi_status st = lipi_record_reader_open(files[f], ro, &r, &err);
        while (st == LIPI_OK) {
            lipi_record rec;
            st = lipi_record_reader_next(r, &rec, &err);
            if (st != LIPI_OK || !rec.text)
                break;
            st = fn(&rec, ctx, &err);
            if (st != LIPI_OK && !err.path[0]) {
                /* Errors about the record's content get the record's position. */
                snprintf(err.path, sizeof err.path, "%s",
                         strcmp(files[f], "-") == 0 ? "<stdin>" : files[f]);
                err.line = rec.number;
            }
        }
        lipi_record_reader_close(r);
        if (st != LIPI_OK) {
            cli_report(sub, &err);
            return EXIT_FAIL;
        }
    }
    return EXIT_OK;
}

typedef struct {
    cli_line_fn fn;
    void *ctx;
} line_adapter;

static lipi_status one_line(const lipi_record *rec, void *vctx, lipi_error *err)
{
    const line_adapter *a = vctx;
    return a->fn(rec->text, rec->len, a->ctx, err);
}

int cli_for_each_line(const char *sub, char **files, int nfiles, lipi_invalid_mode mode,
                      cli_line_fn fn, void *ctx)
{
    const lipi_record_options lines = {.format = LIPI_RECORDS_LINES, .invalid = mode};
    line_adapter a = {fn, ctx};
    return cli_for_each_record(sub, files, nfiles, &lines, one_line, &a);
}

int cli_tokenizer_open(const char *sub, const char *path, const lipi_open_options *oo,
                       size_t n_sessions, cli_tokenizer *t)
{
    lipi_error err = {0};
    memset(t, 0, sizeof *t);
    if (lipi_tokenizer_open(path, oo, &t->tok, &err) != LIPI_OK ||
        lipi_encoder_new(t->tok, &t->enc, &err) != LIPI_OK) {
        if (!err.path[0])
            snprintf(err.path, sizeof err.path, "%s", path);
        cli_report(sub, &err);
        cli_tokenizer_close(t);
        return EXIT_FAIL;
    }
    if (!(t->sessions = lipi_calloc(n_sessions, sizeof *t->sessions)))
        goto oom;
    for (; t->n_sessions < n_sessions; t->n_sessions++)
        if (lipi_session_new(t->enc, &t->sessions[t->n_sessions]) != LIPI_OK)
            goto oom;
    return EXIT_OK;
oom:
    fprintf(stderr, "lipi %s: out of memory\n", sub);
    cli_tokenizer_close(t);
    return EXIT_FAIL;
}

void cli_tokenizer_close(cli_tokenizer *t)
{
    for (size_t i = 0; i < t->n_sessions; i++)
        lipi_session_free(t->sessions[i]);
    lipi_free(t->sessions);
    lipi_encoder_free(t->enc);
    lipi_tokenizer_free(t->tok);
    memset(t, 0, sizeof *t);
}

int cli_finish_output(const char *sub)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "lipi %s: writing the output failed: %s\n", sub, strerror(errno));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

bool cli_parse_double(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

lipi_status cli_split_pairs(const char *const *texts, const size_t *lens, size_t n,
                            const char **a, size_t *alens, const char **b, size_t *blens,
                            lipi_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const char *tab = memchr(texts[i], '\t', lens[i]);
        if (!tab)
            return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                  "expected a pair TEXT_A<TAB>TEXT_B, found no tab");
        a[i] = texts[i];
        alens[i] = (size_t)(tab - texts[i]);
        b[i] = tab + 1;
        blens[i] = lens[i] - alens[i] - 1;
    }
    return LIPI_OK;
}

size_t cli_split_list(char *s, char sep, char **items, size_t max)
{
    size_t n = 0;
    while (s && *s && n < max) {
        char *next = strchr(s, sep);
        if (next)
            *next++ = '\0';
        if (*s)
            items[n++] = s;
        s = next;
    }
    return n;
}

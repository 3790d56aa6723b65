/* See cli_run.h. */
#include "tests/cli_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *cli_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = (n + 4096 + 1) * 2;
            buf = realloc(buf, cap);
        }
        size_t k = fread(buf + n, 1, 4096, f);
        n += k;
        if (k == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* A captured stream: empty when the file is missing. */
static char *captured(const char *path, size_t *len)
{
    char *s = cli_slurp(path, len);
    if (!s) {
        s = calloc(1, 1);
        *len = 0;
    }
    return s;
}

void cli_assert_same_file(const char *a, const char *b)
{
    size_t la, lb;
    char *x = cli_slurp(a, &la), *y = cli_slurp(b, &lb);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(la, lb);
    assert_memory_equal(x, y, la);
    free(x);
    free(y);
}

cli_result cli_runf(const char *fmt, ...)
{
    char args[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return cli_run(args, "", 0);
}

const char *cli_temp_file(const char *data, size_t len)
{
    static char paths[8][64];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 64, "/tmp/lipi-test-XXXXXX");
    int fd = mkstemp(p);
    if (fd < 0)
        return NULL;
    if (len && write(fd, data, len) != (ssize_t)len)
        p[0] = '\0';
    close(fd);
    return p;
}

cli_result cli_run(const char *args, const char *input, size_t input_len)
{
    cli_result r = {0};
    const char *bin = getenv("LIPI_BIN");
    if (!bin)
        bin = "build/lipi";
    char in[64], out[64], err[64];
    snprintf(in, sizeof in, "%s", cli_temp_file(input ? input : "", input ? input_len : 0));
    snprintf(out, sizeof out, "%s", cli_temp_file("", 0));
    snprintf(err, sizeof err, "%s", cli_temp_file("", 0));
    size_t need = strlen(bin) + strlen(args) + 3 * 64 + 32;
    char *cmd = malloc(need);
    snprintf(cmd, need, "%s %s <%s >%s 2>%s", bin, args, in, out, err);
    int st = system(cmd);
    free(cmd);
    r.code = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
    r.out = captured(out, &r.out_len);
    r.err = captured(err, &r.err_len);
    unlink(in);
    unlink(out);
    unlink(err);
    return r;
}

void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

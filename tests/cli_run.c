/* See cli_run.h. */
#include "tests/cli_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (f) {
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
    }
    if (!buf)
        buf = calloc(1, 1);
    buf[n] = '\0';
    *len = n;
    return buf;
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
    r.out = slurp(out, &r.out_len);
    r.err = slurp(err, &r.err_len);
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

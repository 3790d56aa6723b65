/* The folders that hold lipi's bundled data (tiktoken rank files, BERT
 * vocabularies, the demo sample), so `-t cl100k_base` works from any folder.
 * In order:
 *   1. $LIPI_DATA, when set;
 *   2. the installed share folder: LIPI_DATADIR as compiled (PREFIX/share/lipi),
 *      then share/lipi beside the shared library's or the executable's lib/ or
 *      bin/ (an installed tree moved elsewhere still finds its data);
 *   3. the checkout's data/ next to the executable's folder (build/lipi and
 *      build/tests/test_x both find data/).
 * Never the current folder by itself: a name must not mean one thing in one
 * folder and another elsewhere. */
#include "tokenizer/read_impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef LIPI_DATADIR
#define LIPI_DATADIR "/usr/local/share/lipi"
#endif

/* Appends `dir` + `rel` + a NUL to the list unless it is there already. */
static lipi_status add(lipi_buf *list, const char *dir, size_t dir_len, const char *rel)
{
    lipi_buf one = {0};
    lipi_status st;
    if ((st = lipi_buf_append(&one, dir, dir_len)) != LIPI_OK ||
        (st = lipi_buf_append(&one, rel, strlen(rel) + 1)) != LIPI_OK)
        goto done;
    for (size_t at = 0; at < list->len; at += strlen(list->p + at) + 1)
        if (strcmp(list->p + at, one.p) == 0)
            goto done;
    st = lipi_buf_append(list, one.p, one.len);
done:
    lipi_buf_free(&one);
    return st;
}

/* The length of `path` without its last `levels` components
 * ("/usr/lib/liblipi.so", 2 -> "/usr"). */
static size_t up(const char *path, int levels)
{
    size_t n = strlen(path);
    while (levels-- > 0) {
        while (n > 0 && path[n - 1] != '/')
            n--;
        if (n > 0)
            n--; /* the slash */
    }
    return n;
}

lipi_status lipi_data_dirs(lipi_buf *list)
{
    lipi_status st = LIPI_OK;
    char exe[PATH_MAX], lib[PATH_MAX];
    const char *env = getenv("LIPI_DATA");

    if (env && *env && (st = add(list, env, strlen(env), "")) != LIPI_OK)
        return st;
    if ((st = add(list, LIPI_DATADIR, strlen(LIPI_DATADIR), "")) != LIPI_OK)
        return st;

    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    /* The object this function lives in: liblipi.so when linked dynamically,
     * the executable itself when linked with liblipi.a. */
    Dl_info info;
    lib[0] = '\0';
    if (dladdr((void *)lipi_data_dirs, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
        !realpath(info.dli_fname, lib))
        lib[0] = '\0';
    /* PREFIX/lib/liblipi.so, PREFIX/lib/<multiarch>/liblipi.so, PREFIX/bin/lipi;
     * CHECKOUT/build/lipi, CHECKOUT/build/tests/test_x. */
    if (lib[0] && strcmp(lib, exe) != 0 && ((st = add(list, lib, up(lib, 2), "/share/lipi")) != LIPI_OK ||
                   (st = add(list, lib, up(lib, 3), "/share/lipi")) != LIPI_OK))
        return st;
    if (exe[0] && ((st = add(list, exe, up(exe, 2), "/share/lipi")) != LIPI_OK ||
                   (st = add(list, exe, up(exe, 2), "/data")) != LIPI_OK ||
                   (st = add(list, exe, up(exe, 3), "/data")) != LIPI_OK))
        return st;
    return LIPI_OK;
}

/* See model_dir.h. */
#include "tests/model_dir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

int md_setup(const char *prefix)
{
    snprintf(root, sizeof root, "/tmp/lipi_test_%s_XXXXXX", prefix);
    return mkdtemp(root) ? 0 : -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

void md_teardown(void)
{
    if (root[0])
        nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void md_empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char p[1024];
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
}

const char *md_path(const char *name)
{
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 512, "%s/%s", root, name);
    return p;
}

char *md_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, k;
    char *p = malloc(cap);
    while (p && (k = fread(p + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n - 1 == 0) {
            char *q = realloc(p, cap *= 2);
            if (!q) {
                free(p);
                p = NULL;
            }
            p = q;
        }
    }
    fclose(f);
    if (!p)
        return NULL;
    p[n] = '\0';
    *len = n;
    return p;
}

void md_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Copies every file of folder src into dst (one level of subfolders). */
static bool copy_tree(const char *src, const char *dst, int depth)
{
    DIR *d = opendir(src);
    if (!d)
        return false;
    mkdir(dst, 0755);
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
        struct stat sb;
        if (stat(a, &sb) != 0)
            ok = false;
        else if (S_ISDIR(sb.st_mode))
            ok = depth < 2 && copy_tree(a, b, depth + 1);
        else {
            size_t n;
            char *p = md_slurp(a, &n);
            ok = p != NULL;
            if (ok)
                md_write(b, p, n);
            free(p);
        }
    }
    closedir(d);
    return ok;
}

bool md_model_dir(const char *fixture, const char *dir)
{
    char src[512], path[1024];
    snprintf(src, sizeof src, "tests/fixtures/models/%s", fixture);
    if (!copy_tree(src, dir, 0))
        return false;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],"
          "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},"
          "\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":\"WordLevel\","
          "\"unk_token\":\"t1\",\"vocab\":{",
          f);
    for (int i = 0; i < 100; i++)
        fprintf(f, "%s\"t%d\":%d", i ? "," : "", i, i);
    fputs("}}}\n", f);
    assert_int_equal(fclose(f), 0);
    return true;
}

const char *md_model(const char *fixture)
{
    static char dirs[4][512];
    static int slot;
    char *d = dirs[slot++ % 4];
    snprintf(d, 512, "%s", md_path(fixture));
    struct stat sb;
    if (stat(d, &sb) != 0 && !md_model_dir(fixture, d))
        fail_msg("cannot make %s from tests/fixtures/models/%s", d, fixture);
    return d;
}

float *md_read_npy(const char *path, size_t *rows, size_t *cols)
{
    size_t n;
    char *p = md_slurp(path, &n);
    if (!p || n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
        free(p);
        return NULL;
    }
    size_t hl = (size_t)(unsigned char)p[8] | (size_t)(unsigned char)p[9] << 8;
    const char *shape = strstr(p + 10, "'shape': (");
    unsigned long r = 0, c = 0;
    if (!shape || sscanf(shape, "'shape': (%lu, %lu)", &r, &c) != 2 ||
        n != 10 + hl + (size_t)r * c * 4) {
        free(p);
        return NULL;
    }
    float *x = malloc((size_t)r * c * 4 + 4);
    memcpy(x, p + 10 + hl, (size_t)r * c * 4);
    free(p);
    *rows = r;
    *cols = c;
    return x;
}

long md_fail_at = -1, md_alloc_count;

static void *failing_malloc(size_t n)
{
    if (md_fail_at >= 0 && md_alloc_count++ == md_fail_at)
        return NULL;
    return malloc(n);
}

static void *failing_realloc(void *p, size_t n)
{
    if (md_fail_at >= 0 && md_alloc_count++ == md_fail_at)
        return NULL;
    return realloc(p, n);
}

const lipi_alloc_hooks md_failing_hooks = {failing_malloc, failing_realloc, free};

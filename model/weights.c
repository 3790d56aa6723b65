/* The weight files of a model folder, whatever form they take: one
 * safetensors file, a safetensors checkpoint split into shards, or the same
 * two as PyTorch checkpoints (torchbin.c). All come back as one
 * lipi_safetensors, so every architecture binds its tensors by name without
 * knowing which file held them. Also the writer behind `lipi convert`. */
#include "model/model_impl.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef lipi_status (*open_fn)(const char *path, lipi_safetensors **out, lipi_error *err);

/* A shard file name from an index: a plain name inside the folder. */
static bool shard_name_ok(const char *s)
{
    return *s && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") && strcmp(s, "..");
}

/* dir/index (a Hugging Face *.index.json): {"weight_map": {tensor: shard}}.
 * Opens every shard named once, in order of first mention, and checks that
 * each tensor is in the shard the map names. */
static lipi_status open_sharded(const char *dir, const char *index, open_fn open_shard,
                                lipi_safetensors **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char path[4096], shard[4096];
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    lipi_safetensors *set = lipi_calloc(1, sizeof *set);
    size_t cap = 0;
    snprintf(path, sizeof path, "%s/%s", dir, index);
    if (!set || !(set->path = lipi_strndup(path, strlen(path)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    TRY(lipi_read_file(path, LIPI_JSON_MAX, &text, &len, err));
    TRY(lipi_json_load(text, len, JSON_REJECT_DUPLICATES, path, 0, &root, err));
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || !json_object_size(map)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected \"weight_map\": {tensor name: shard file, ...}");
        goto done;
    }
    const char *name;
    json_t *file;
    /* Two passes: open the shards, then check every name against its shard. */
    for (int pass = 0; pass < 2; pass++) {
        json_object_foreach(map, name, file)
        {
            const char *f = json_string_value(file);
            if (!f || !shard_name_ok(f)) {
                st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                    "weight_map[\"%s\"]: expected a file name inside the "
                                    "folder",
                                    name);
                goto done;
            }
            if ((size_t)snprintf(shard, sizeof shard, "%s/%s", dir, f) >= sizeof shard) {
                st = lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "path too long");
                goto done;
            }
            size_t i = 0;
            while (i < set->n_parts && strcmp(set->parts[i]->path, shard))
                i++;
            if (pass == 1) {
                lipi_st_tensor *t = NULL;
                HASH_FIND_STR(set->parts[i]->index, name, t);
                if (!t) {
                    st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                        "weight_map puts \"%s\" in %s, which lacks it", name,
                                        f);
                    goto done;
                }
                continue;
            }
            if (i < set->n_parts)
                continue;
            void *p = set->parts;
            if (lipi_grow(&p, &cap, set->n_parts + 1, sizeof *set->parts) != LIPI_OK) {
                st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
                goto done;
            }
            set->parts = p;
            TRY(open_shard(shard, &set->parts[set->n_parts], err));
            set->n_parts++;
        }
    }
done:
    json_decref(root);
    lipi_free(text);
    if (st != LIPI_OK) {
        lipi_st_close(set);
        set = NULL;
    }
    *out = set;
    return st;
}

static const struct {
    const char *name;
    open_fn open;
    bool sharded;
} FORMS[] = {
    {"model.safetensors", lipi_st_open, false},
    {"model.safetensors.index.json", lipi_st_open, true},
    {"pytorch_model.bin", lipi_torch_open, false},
    {"pytorch_model.bin.index.json", lipi_torch_open, true},
};
#define FIRST_TORCH 2
#define N_FORMS (sizeof FORMS / sizeof FORMS[0])

/* Opens the first of FORMS[first..] present in dir; *found false (and
 * LIPI_OK) when none is. */
static lipi_status open_first(const char *dir, size_t first, lipi_safetensors **out,
                              char *used, size_t cap, bool *found, lipi_error *err)
{
    char path[4096];
    *out = NULL;
    *found = false;
    for (size_t i = first; i < N_FORMS; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, FORMS[i].name) >= sizeof path)
            return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
        if (access(path, F_OK) != 0)
            continue;
        *found = true;
        snprintf(used, cap, "%s", path);
        return FORMS[i].sharded ? open_sharded(dir, FORMS[i].name, FORMS[i].open, out, err)
                                : FORMS[i].open(path, out, err);
    }
    return LIPI_OK;
}

lipi_status lipi_weights_open(const char *dir, lipi_safetensors **out, char *used, size_t cap,
                              lipi_error *err)
{
    bool found;
    lipi_status st = open_first(dir, 0, out, used, cap, &found, err);
    if (st != LIPI_OK || found)
        return st;
    snprintf(used, cap, "%s/model.safetensors", dir);
    return lipi_error_set(err, LIPI_EIO, used, 0, 0,
                          "no weights: expected model.safetensors, pytorch_model.bin or "
                          "their sharded *.index.json in %s",
                          dir);
}

/* Converts folder dir's PyTorch checkpoint when it has one and no
 * model.safetensors; *done tells whether it did. */
static lipi_status convert_folder(const char *dir, bool *done, lipi_error *err)
{
    char path[4096], used[4096];
    lipi_safetensors *set = NULL;
    bool found;
    *done = false;
    if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", dir) >= sizeof path)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
    if (access(path, F_OK) == 0)
        return LIPI_OK;
    lipi_status st = open_first(dir, FIRST_TORCH, &set, used, sizeof used, &found, err);
    if (st == LIPI_OK && found) {
        st = lipi_st_write(set, path, err);
        *done = st == LIPI_OK;
    }
    lipi_st_close(set);
    return st;
}

lipi_status lipi_model_convert(const char *dir, size_t *converted, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    bool done;
    *converted = 0;
    DIR *d = opendir(dir);
    if (!d)
        return lipi_error_set(err, LIPI_EIO, dir, 0, 0, "cannot open folder: %s",
                              strerror(errno));
    TRY(convert_folder(dir, &done, err));
    *converted += done;
    /* sentence-transformers module folders (2_Dense/, ...) carry their own
     * weights. */
    struct dirent *e;
    char sub[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' ||
            (size_t)snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= sizeof sub)
            continue;
        struct stat sb;
        if (stat(sub, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        TRY(convert_folder(sub, &done, err));
        *converted += done;
    }
    if (!*converted)
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "nothing to convert: no pytorch_model.bin (or its shards) without "
                            "a model.safetensors beside it");
done:
    closedir(d);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Writing safetensors                                                       */
/* ------------------------------------------------------------------------ */

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const lipi_st_tensor *const *)a)->name,
                  (*(const lipi_st_tensor *const *)b)->name);
}

static lipi_status collect(const lipi_safetensors *st, const lipi_st_tensor ***all, size_t *n,
                           size_t *cap)
{
    for (size_t i = 0; i < st->n; i++) {
        void *p = *all;
        if (lipi_grow(&p, cap, *n + 1, sizeof **all) != LIPI_OK)
            return LIPI_ENOMEM;
        *all = p;
        (*all)[(*n)++] = &st->tensors[i];
    }
    for (size_t i = 0; i < st->n_parts; i++)
        if (collect(st->parts[i], all, n, cap) != LIPI_OK)
            return LIPI_ENOMEM;
    return LIPI_OK;
}

lipi_status lipi_st_write(const lipi_safetensors *st, const char *path, lipi_error *err)
{
    lipi_status s = LIPI_OK;
    const lipi_st_tensor **all = NULL;
    size_t n = 0, cap = 0;
    json_t *hdr = NULL;
    char *text = NULL;
    lipi_atomic_file af = {0};
    bool opened = false;
    if (collect(st, &all, &n, &cap) != LIPI_OK)
        goto oom;
    qsort(all, n, sizeof *all, cmp_name);
    /* Tied weights share one storage in a torch checkpoint; safetensors has
     * no sharing, so each name gets its own copy of the bytes. */
    hdr = json_object();
    json_t *meta = json_pack("{s:s}", "format", "pt");
    if (!hdr || !meta || json_object_set_new(hdr, "__metadata__", meta))
        goto oom;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const lipi_st_tensor *t = all[i];
        if (i && !strcmp(all[i - 1]->name, t->name)) {
            s = lipi_error_set(err, LIPI_EFORMAT, st->path, 0, 0,
                               "tensor \"%s\" appears in two shards", t->name);
            goto done;
        }
        json_t *shape = json_array();
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", t->dtype_name, "shape",
                              shape, "data_offsets", (json_int_t)off,
                              (json_int_t)(off + (t->end - t->begin)));
        if (!e)
            goto oom;
        for (size_t d = 0; d < t->ndim; d++)
            if (json_array_append_new(shape, json_integer((json_int_t)t->shape[d]))) {
                json_decref(e);
                goto oom;
            }
        if (json_object_set_new(hdr, t->name, e))
            goto oom;
        off += t->end - t->begin;
    }
    text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        goto oom;
    /* The header is padded with spaces to 8 bytes, as safetensors does, so
     * the data starts aligned. */
    size_t hlen = strlen(text), padded = (hlen + 7) & ~(size_t)7;
    if ((s = lipi_atomic_open(&af, path, err)) != LIPI_OK)
        goto done;
    opened = true;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(len8, 1, 8, af.f);
    fwrite(text, 1, hlen, af.f);
    for (size_t i = hlen; i < padded; i++)
        fputc(' ', af.f);
    for (size_t i = 0; i < n; i++)
        fwrite(all[i]->data, 1, all[i]->end - all[i]->begin, af.f);
    opened = false;
    s = lipi_atomic_commit(&af, err);
    goto done;
oom:
    s = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
done:
    if (opened)
        lipi_atomic_abort(&af);
    lipi_free(text); /* json_dumps allocates through the lipi hook */
    json_decref(hdr);
    lipi_free(all);
    return s;
}

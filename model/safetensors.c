/* safetensors reader. The file is mapped read-only and its header is
 * validated completely before any tensor is handed out:
 *   - an 8-byte little-endian header length N, N <= 100 MB, 8 + N <= file size;
 *   - the header is a JSON object; "__metadata__" (string map) is skipped;
 *   - every other member is {"dtype": F32|F16|BF16, "shape": [...],
 *     "data_offsets": [begin, end]} (any safetensors dtype) with begin <= end inside the data area,
 *     end - begin == dtype size * product(shape) (all overflow-checked);
 *   - no two tensors share a byte.
 * Other safetensors dtypes (I64, ...) are validated but cannot be read as
 * weights. Errors are LIPI_EFORMAT naming the file, the tensor and what was expected. */
#include "model/model_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every dtype of the safetensors format with its element size. Integer and
 * other non-float tensors (e.g. the I64 "position_ids" buffers of older
 * checkpoints) are validated like the rest; only binding one as a weight
 * fails. */
static const struct {
    const char *name;
    size_t size;
    lipi_st_dtype id;
} DTYPES[] = {
    {"F32", 4, LIPI_ST_F32}, {"F16", 2, LIPI_ST_F16},  {"BF16", 2, LIPI_ST_BF16},
    {"F64", 8, LIPI_ST_OTHER}, {"I64", 8, LIPI_ST_OTHER}, {"U64", 8, LIPI_ST_OTHER},
    {"I32", 4, LIPI_ST_OTHER}, {"U32", 4, LIPI_ST_OTHER}, {"I16", 2, LIPI_ST_OTHER},
    {"U16", 2, LIPI_ST_OTHER}, {"I8", 1, LIPI_ST_OTHER},  {"U8", 1, LIPI_ST_OTHER},
    {"BOOL", 1, LIPI_ST_OTHER}, {"F8_E5M2", 1, LIPI_ST_OTHER}, {"F8_E4M3", 1, LIPI_ST_OTHER},
};

float lipi_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        /* Subnormal half: renormalize into a normal float. */
        exp = 113;
        while (!(man & 0x400u)) {
            man <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float lipi_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Drops the mapped pages that lie wholly inside [lo, hi). */
static void drop_pages(uintptr_t lo, uintptr_t hi)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    uintptr_t a = (lo + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t b = hi & ~((uintptr_t)page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

static void convert(const lipi_st_tensor *t, const unsigned char *p, size_t n, float *dst)
{
    switch (t->dtype) {
    case LIPI_ST_F32:
        /* The data may sit at any byte offset: memcpy handles alignment. */
        memcpy(dst, p, n * 4);
        break;
    case LIPI_ST_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = lipi_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case LIPI_ST_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = lipi_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case LIPI_ST_OTHER:
        LIPI_ASSERT(!"callers check the dtype first");
    }
}

void lipi_st_to_f32(const lipi_st_tensor *t, float *dst)
{
    /* Chunk by chunk, dropping the source pages already converted: a big
     * tensor (a 100k-word embedding table) then never sits in memory twice,
     * which keeps the load's peak RSS near one copy of the weights. */
    const size_t chunk = (size_t)1 << 20;
    const unsigned char *p = t->data;
    size_t esize = t->dtype == LIPI_ST_F32 ? 4 : 2;
    uintptr_t start = (uintptr_t)p;
    for (size_t i = 0; i < t->nelem; i += chunk) {
        size_t n = t->nelem - i < chunk ? t->nelem - i : chunk;
        convert(t, p + i * esize, n, dst + i);
        /* Heap pages (inflated storages) would read back as zeros. */
        if (!t->heap)
            drop_pages(start, (uintptr_t)(p + (i + n) * esize));
    }
}

void lipi_st_release(const lipi_safetensors *st, const lipi_st_tensor *t)
{
    /* Converted weights live in the model's block; dropping the source pages
     * keeps peak memory near one copy of the weights. A file mapping reads
     * dropped pages back from the file, so tensors sharing a torch storage
     * stay readable. */
    if (t->end > t->begin && !t->heap)
        drop_pages((uintptr_t)t->data, (uintptr_t)t->data + (t->end - t->begin));
    (void)st;
}

const lipi_st_tensor *lipi_st_find(const lipi_safetensors *st, const char *name)
{
    lipi_st_tensor *t = NULL;
    HASH_FIND_STR(st->index, name, t);
    for (size_t i = 0; !t && i < st->n_parts; i++)
        HASH_FIND_STR(st->parts[i]->index, name, t);
    return t;
}

void lipi_st_close(lipi_safetensors *st)
{
    if (!st)
        return;
    HASH_CLEAR(hh, st->index);
    for (size_t i = 0; i < st->n; i++)
        lipi_free(st->tensors[i].name);
    lipi_free(st->tensors);
    for (size_t i = 0; i < st->n_heap; i++)
        lipi_free(st->heap[i]);
    lipi_free(st->heap);
    for (size_t i = 0; i < st->n_parts; i++)
        lipi_st_close(st->parts[i]);
    lipi_free(st->parts);
    if (st->map)
        munmap(st->map, st->map_len);
    lipi_free(st->path);
    lipi_free(st);
}

static int cmp_begin(const void *a, const void *b)
{
    const lipi_st_tensor *x = *(const lipi_st_tensor *const *)a;
    const lipi_st_tensor *y = *(const lipi_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* A JSON integer that is a non-negative size. */
static bool json_size(const json_t *v, size_t *out)
{
    if (!json_is_integer(v))
        return false;
    json_int_t i = json_integer_value(v);
    if (i < 0 || (unsigned long long)i > SIZE_MAX)
        return false;
    *out = (size_t)i;
    return true;
}

/* Validates one header member and fills t (name is set by the caller). */
static lipi_status parse_tensor(const char *path, const char *name, json_t *v,
                                size_t data_len, lipi_st_tensor *t, lipi_error *err)
{
    if (!json_is_object(v))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": expected an object", name);
    json_t *dt = json_object_get(v, "dtype");
    json_t *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": expected a string \"dtype\"", name);
    const char *d = json_string_value(dt);
    size_t es = 0;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0] && !es; i++) {
        if (!strcmp(d, DTYPES[i].name)) {
            es = DTYPES[i].size;
            t->dtype = DTYPES[i].id;
            snprintf(t->dtype_name, sizeof t->dtype_name, "%s", DTYPES[i].name);
        }
    }
    if (!es)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": unknown dtype \"%.32s\", expected F32, F16 or BF16",
                              name, d);
    if (!json_is_array(shape) || json_array_size(shape) > LIPI_ST_MAX_DIMS)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": expected \"shape\" as an array of at most %d sizes",
                              name, LIPI_ST_MAX_DIMS);
    t->ndim = json_array_size(shape);
    size_t nelem = 1;
    for (size_t i = 0; i < t->ndim; i++) {
        if (!json_size(json_array_get(shape, i), &t->shape[i]))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "tensor \"%s\": shape[%zu]: expected a non-negative integer",
                                  name, i);
        if (t->shape[i] && nelem > SIZE_MAX / t->shape[i])
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "tensor \"%s\": shape overflows", name);
        nelem *= t->shape[i];
    }
    t->nelem = nelem;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_size(json_array_get(offs, 0), &t->begin) ||
        !json_size(json_array_get(offs, 1), &t->end))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": expected \"data_offsets\" as [begin, end]", name);
    if (t->begin > t->end || t->end > data_len)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": data_offsets [%zu, %zu] outside the data area "
                              "of %zu bytes",
                              name, t->begin, t->end, data_len);
    if (nelem > SIZE_MAX / es || t->end - t->begin != nelem * es)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "tensor \"%s\": expected %zu bytes (%s x %zu elements), "
                              "data_offsets give %zu",
                              name, nelem > SIZE_MAX / es ? SIZE_MAX : nelem * es,
                              t->dtype_name, nelem, t->end - t->begin);
    return LIPI_OK;
}

static lipi_status parse_header(lipi_safetensors *st, const char *path, lipi_error *err)
{
    lipi_status status = LIPI_OK;
    json_t *root = NULL;
    lipi_st_tensor **order = NULL;
    if (st->map_len < 8) {
        status = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected an 8-byte header length, file has %zu bytes",
                                st->map_len);
        goto done;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | st->map[i];
    if (hlen > LIPI_ST_MAX_HEADER) {
        status = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "header length %llu exceeds the 100 MB limit",
                                (unsigned long long)hlen);
        goto done;
    }
    if (hlen > st->map_len - 8) {
        status = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "header of %llu bytes does not fit in the file of %zu bytes "
                                "(truncated?)",
                                (unsigned long long)hlen, st->map_len);
        goto done;
    }
    status = lipi_json_load((const char *)st->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES,
                            path, 8, &root, err);
    if (status != LIPI_OK) {
        if (status == LIPI_EFORMAT)
            lipi_error_prefix(err, "header");
        goto done;
    }
    if (!json_is_object(root)) {
        status = lipi_error_set(err, LIPI_EFORMAT, path, 0, 8,
                                "expected the header to be a JSON object");
        goto done;
    }
    size_t data_off = 8 + (size_t)hlen, data_len = st->map_len - data_off;
    size_t count = json_object_size(root);
    st->tensors = lipi_calloc(count ? count : 1, sizeof *st->tensors);
    order = lipi_calloc(count ? count : 1, sizeof *order);
    if (!st->tensors || !order) {
        status = LIPI_ENOMEM;
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                status = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                        "\"__metadata__\": expected an object");
                goto done;
            }
            continue;
        }
        lipi_st_tensor *t = &st->tensors[st->n];
        status = parse_tensor(path, key, val, data_len, t, err);
        if (status != LIPI_OK)
            goto done;
        t->name = lipi_strndup(key, strlen(key));
        if (!t->name) {
            status = LIPI_ENOMEM;
            goto done;
        }
        t->data = st->map + data_off + t->begin;
        order[st->n] = t;
        st->n++;
    }
    qsort(order, st->n, sizeof *order, cmp_begin);
    for (size_t i = 1; i < st->n; i++) {
        const lipi_st_tensor *a = order[i - 1], *b = order[i];
        /* Empty tensors own no byte and cannot overlap anything. */
        if (a->end > b->begin && a->begin != a->end && b->begin != b->end) {
            status = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                    "tensors \"%s\" [%zu, %zu] and \"%s\" [%zu, %zu] overlap",
                                    a->name, a->begin, a->end, b->name, b->begin, b->end);
            goto done;
        }
    }
    for (size_t i = 0; i < st->n; i++) {
        lipi_st_tensor *t = &st->tensors[i];
        lipi_hash_oom_flag = 0;
        HASH_ADD_KEYPTR(hh, st->index, t->name, strlen(t->name), t);
        if (lipi_hash_oom_flag) {
            status = LIPI_ENOMEM;
            goto done;
        }
    }
done:
    json_decref(root);
    lipi_free(order);
    return status;
}

lipi_status lipi_map_file(const char *path, unsigned char **map, size_t *len, lipi_error *err)
{
    lipi_status status = LIPI_OK;
    *map = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        status = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        status = lipi_error_set(err, LIPI_EIO, path, 0, 0, "expected a regular file");
        goto done;
    }
    if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            status = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot map: %s",
                                    strerror(errno));
            goto done;
        }
        *map = p;
        *len = (size_t)sb.st_size;
    }
done:
    if (fd >= 0)
        close(fd);
    return status;
}

lipi_status lipi_st_open(const char *path, lipi_safetensors **out, lipi_error *err)
{
    lipi_status status = LIPI_OK;
    lipi_safetensors *st = lipi_calloc(1, sizeof *st);
    if (!st) {
        status = LIPI_ENOMEM;
        goto done;
    }
    st->path = lipi_strndup(path, strlen(path));
    if (!st->path) {
        status = LIPI_ENOMEM;
        goto done;
    }
    status = lipi_map_file(path, &st->map, &st->map_len, err);
    if (status == LIPI_OK)
        status = parse_header(st, path, err);
done:
    if (status != LIPI_OK) {
        if (status == LIPI_ENOMEM)
            lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        lipi_st_close(st);
        st = NULL;
    }
    *out = st;
    return status;
}

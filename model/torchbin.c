/* PyTorch checkpoints (pytorch_model.bin, *.pt) read without executing them.
 *
 * torch.save (PyTorch >= 1.6) writes a zip archive: PREFIX/data.pkl, a
 * pickle of the state dict whose tensors refer to their storages by
 * persistent id, and one entry PREFIX/data/KEY per storage holding its raw
 * little-endian elements (stored, i.e. uncompressed, and 64-byte aligned;
 * deflated entries are inflated with zlib). Python's pickle module runs
 * whatever a pickle names (GLOBAL os.system + REDUCE is a shell), which is
 * why torch.load(weights_only=True) and safetensors exist. This file is a
 * pickle *interpreter* that never calls anything: it knows a few names and
 * builds their results itself.
 *
 *   opcodes  PROTO FRAME STOP MARK POP NONE NEWTRUE NEWFALSE BININT BININT1
 *            BININT2 LONG1 BINUNICODE SHORT_BINUNICODE BINUNICODE8
 *            SHORT_BINSTRING EMPTY_TUPLE TUPLE TUPLE1-3 EMPTY_LIST APPEND
 *            APPENDS EMPTY_DICT SETITEM SETITEMS BINPUT LONG_BINPUT MEMOIZE
 *            BINGET LONG_BINGET GLOBAL STACK_GLOBAL BINPERSID REDUCE BUILD
 *   globals  torch._utils._rebuild_tensor_v2 (storage, offset, size, stride,
 *            requires_grad, hooks[, metadata]), torch._utils._rebuild_parameter
 *            (tensor, requires_grad, hooks), collections.OrderedDict () and
 *            the torch.*Storage types, which only appear in persistent ids
 *            ("storage", TYPE, KEY, LOCATION, NUMEL)
 *
 * Anything else is refused with the byte offset in data.pkl and the opcode
 * or global named. REDUCE applies only the rebuild functions and
 * OrderedDict; BUILD is accepted on a dict only (the _metadata attribute
 * state_dict() attaches) and its state is dropped. Every tensor must be a
 * contiguous row-major view: offset + elements within its storage's
 * elements, and the storage's entry exactly NUMEL * element size bytes.
 * The result must be a dict of string -> tensor. Memory is bounded by the
 * pickle's length: each opcode creates at most one value.
 *
 * The legacy format (before 1.6: a bare pickle stream, or a tar) is
 * refused with a message saying how to re-save it. */
#include "model/model_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

/* ======================================================================== */
/* Zip archive                                                               */
/* ======================================================================== */

typedef struct {
    const char *name; /* borrowed from the central directory, not NUL-terminated */
    size_t name_len;
    unsigned method;  /* 0 stored, 8 deflate */
    uint32_t crc;
    uint64_t csize, usize;
    size_t data_off;  /* of the (compressed) bytes in the archive */
    const unsigned char *data; /* usize bytes once read (mapping or heap) */
    bool heap;
} zip_entry;

typedef struct {
    const unsigned char *p;
    size_t len;
    const char *path;
    zip_entry *e;
    size_t n;
    lipi_error *err;
} zip_archive;

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static int cmp_entry(const void *a, const void *b)
{
    const zip_entry *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static zip_entry *zip_find(const zip_archive *z, const char *name, size_t len)
{
    zip_entry key = {.name = name, .name_len = len};
    return bsearch(&key, z->e, z->n, sizeof *z->e, cmp_entry);
}

/* The zip64 extra field of a central directory entry: the 64-bit values of
 * the fields that are 0xFFFFFFFF, in the order usize, csize, offset. */
static bool zip64_extra(const unsigned char *x, size_t len, uint64_t *usize, uint64_t *csize,
                        uint64_t *off)
{
    while (len >= 4) {
        uint32_t id = rd16(x), sz = rd16(x + 2);
        if (sz > len - 4)
            return false;
        if (id == 1) {
            const unsigned char *q = x + 4;
            size_t left = sz;
            uint64_t *f[3] = {usize, csize, off};
            for (int i = 0; i < 3; i++) {
                if (*f[i] != 0xFFFFFFFFu)
                    continue;
                if (left < 8)
                    return false;
                *f[i] = rd64(q);
                q += 8;
                left -= 8;
            }
            return true;
        }
        x += 4 + sz;
        len -= 4 + sz;
    }
    return true;
}

#define ZIP_FAIL(...) lipi_error_set(z->err, LIPI_EFORMAT, z->path, 0, __VA_ARGS__)

/* Reads the central directory into z->e (sorted by name), checking that
 * every entry's local header and data lie inside the file. */
static lipi_status zip_open(zip_archive *z)
{
    const unsigned char *p = z->p;
    size_t len = z->len;
    if (len < 22)
        return ZIP_FAIL(len, "expected a zip archive, the file has only %zu bytes (truncated?)",
                        len);
    /* The end-of-central-directory record: its comment may be up to 64 KiB. */
    size_t eocd = SIZE_MAX;
    for (size_t i = len - 22 + 1; i-- > 0 && len - i <= 22 + 0xFFFF;) {
        if (rd32(p + i) == 0x06054b50u && i + 22 + rd16(p + i + 20) == len) {
            eocd = i;
            break;
        }
    }
    if (eocd == SIZE_MAX)
        return ZIP_FAIL(len, "no end-of-central-directory record: not a zip archive, or "
                             "truncated");
    uint64_t count = rd16(p + eocd + 10), cd_size = rd32(p + eocd + 12),
             cd_off = rd32(p + eocd + 16);
    if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        /* Zip64: a locator right before the record points to the zip64 one. */
        if (eocd < 20 || rd32(p + eocd - 20) != 0x07064b50u)
            return ZIP_FAIL(eocd, "expected a zip64 end-of-central-directory locator");
        uint64_t z64 = rd64(p + eocd - 12);
        if (z64 > len - 56 || len < 56 || rd32(p + z64) != 0x06064b50u)
            return ZIP_FAIL(eocd - 20, "zip64 end-of-central-directory record out of range");
        count = rd64(p + z64 + 32);
        cd_size = rd64(p + z64 + 40);
        cd_off = rd64(p + z64 + 48);
    }
    if (cd_off > len || cd_size > len - cd_off)
        return ZIP_FAIL(eocd, "central directory [%llu, +%llu) outside the file of %zu bytes "
                              "(truncated?)",
                        (unsigned long long)cd_off, (unsigned long long)cd_size, len);
    /* Each entry takes at least 46 bytes of the directory. */
    if (count > cd_size / 46)
        return ZIP_FAIL(eocd, "%llu entries cannot fit a central directory of %llu bytes",
                        (unsigned long long)count, (unsigned long long)cd_size);
    z->e = lipi_calloc(count ? count : 1, sizeof *z->e);
    if (!z->e)
        return LIPI_ENOMEM;
    size_t q = (size_t)cd_off, end = (size_t)(cd_off + cd_size);
    for (uint64_t i = 0; i < count; i++) {
        if (end - q < 46 || rd32(p + q) != 0x02014b50u)
            return ZIP_FAIL(q, "central directory entry %llu: bad signature",
                            (unsigned long long)i);
        zip_entry *e = &z->e[z->n];
        size_t nl = rd16(p + q + 28), xl = rd16(p + q + 30), cl = rd16(p + q + 32);
        if (end - q - 46 < nl + xl + cl)
            return ZIP_FAIL(q, "central directory entry %llu overruns the directory",
                            (unsigned long long)i);
        unsigned flags = rd16(p + q + 8);
        e->method = rd16(p + q + 10);
        e->crc = rd32(p + q + 16);
        e->csize = rd32(p + q + 20);
        e->usize = rd32(p + q + 24);
        uint64_t loc = rd32(p + q + 42);
        e->name = (const char *)p + q + 46;
        e->name_len = nl;
        if (!zip64_extra(p + q + 46 + nl, xl, &e->usize, &e->csize, &loc))
            return ZIP_FAIL(q, "entry \"%.*s\": bad zip64 extra field", (int)nl, e->name);
        if (flags & 1u)
            return ZIP_FAIL(q, "entry \"%.*s\" is encrypted", (int)nl, e->name);
        if (e->method != 0 && e->method != 8)
            return ZIP_FAIL(q, "entry \"%.*s\": compression method %u, expected 0 (stored) "
                               "or 8 (deflate)",
                            (int)nl, e->name, e->method);
        if (e->method == 0 && e->csize != e->usize)
            return ZIP_FAIL(q, "entry \"%.*s\": stored with %llu bytes but %llu uncompressed",
                            (int)nl, e->name, (unsigned long long)e->csize,
                            (unsigned long long)e->usize);
        if (loc > len || len - loc < 30 || rd32(p + loc) != 0x04034b50u)
            return ZIP_FAIL(q, "entry \"%.*s\": local header at %llu missing (truncated?)",
                            (int)nl, e->name, (unsigned long long)loc);
        size_t data = (size_t)loc + 30 + rd16(p + loc + 26) + rd16(p + loc + 28);
        if (data > len || e->csize > len - data)
            return ZIP_FAIL((size_t)loc, "entry \"%.*s\": %llu bytes at %zu run past the end "
                                         "of the file of %zu bytes (truncated?)",
                            (int)nl, e->name, (unsigned long long)e->csize, data, len);
        e->data_off = data;
        z->n++;
        q += 46 + nl + xl + cl;
    }
    qsort(z->e, z->n, sizeof *z->e, cmp_entry);
    for (size_t i = 1; i < z->n; i++)
        if (!cmp_entry(&z->e[i - 1], &z->e[i]))
            return ZIP_FAIL(0, "entry \"%.*s\" appears twice", (int)z->e[i].name_len,
                            z->e[i].name);
    return LIPI_OK;
}

/* Makes e->data point at the entry's uncompressed bytes: into the file
 * when stored, else a heap buffer handed to `st` (which frees it). */
static lipi_status zip_read(zip_archive *z, zip_entry *e, lipi_safetensors *st)
{
    if (e->data)
        return LIPI_OK;
    const unsigned char *src = z->p + e->data_off;
    if (e->method == 0) {
        e->data = src;
        return LIPI_OK;
    }
    /* Deflate expands at most 1032:1; a larger claim is a bomb or a lie. */
    if (e->usize / 1032 > e->csize + 1 || e->usize > SIZE_MAX / 2)
        return ZIP_FAIL(e->data_off, "entry \"%.*s\": %llu compressed bytes cannot inflate to "
                                     "%llu",
                        (int)e->name_len, e->name, (unsigned long long)e->csize,
                        (unsigned long long)e->usize);
    void *grown = st->heap;
    size_t cap = st->n_heap;
    if (lipi_grow(&grown, &cap, st->n_heap + 1, sizeof *st->heap) != LIPI_OK)
        return LIPI_ENOMEM;
    st->heap = grown;
    unsigned char *buf = lipi_malloc(e->usize ? (size_t)e->usize : 1);
    if (!buf)
        return LIPI_ENOMEM;
    st->heap[st->n_heap++] = buf;
    z_stream zs = {0};
    if (inflateInit2(&zs, -15) != Z_OK)
        return LIPI_ENOMEM;
    /* zlib counts in 32 bits: feed and drain in chunks of 1 GiB. */
    const size_t chunk = (size_t)1 << 30;
    const unsigned char *in = src;
    unsigned char *outp = buf;
    size_t in_left = (size_t)e->csize, out_left = (size_t)e->usize;
    int rc;
    do {
        if (!zs.avail_in && in_left) {
            size_t k = in_left < chunk ? in_left : chunk;
            zs.next_in = (unsigned char *)in;
            zs.avail_in = (uInt)k;
            in += k;
            in_left -= k;
        }
        if (!zs.avail_out && out_left) {
            size_t k = out_left < chunk ? out_left : chunk;
            zs.next_out = outp;
            zs.avail_out = (uInt)k;
            outp += k;
            out_left -= k;
        }
        rc = inflate(&zs, Z_NO_FLUSH);
    } while (rc == Z_OK);
    size_t produced = (size_t)e->usize - out_left - zs.avail_out;
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || produced != e->usize)
        return ZIP_FAIL(e->data_off, "entry \"%.*s\": corrupt deflate data (%s)",
                        (int)e->name_len, e->name,
                        rc == Z_MEM_ERROR ? "out of memory"
                        : rc == Z_STREAM_END ? "shorter than its size"
                                             : "bad or truncated stream");
    if (e->usize <= UINT32_MAX && (uint32_t)crc32(0L, buf, (uInt)e->usize) != e->crc)
        return ZIP_FAIL(e->data_off, "entry \"%.*s\": CRC-32 mismatch", (int)e->name_len,
                        e->name);
    e->data = buf;
    e->heap = true;
    return LIPI_OK;
}

/* ======================================================================== */
/* Restricted pickle interpreter                                             */
/* ======================================================================== */

typedef enum {
    PV_MARK, PV_NONE, PV_BOOL, PV_INT, PV_STR, PV_TUPLE, PV_LIST, PV_DICT, PV_GLOBAL,
    PV_STORAGE, PV_TENSOR,
} pv_kind;

/* The callables and types a checkpoint may name. */
typedef enum { G_REBUILD_TENSOR, G_REBUILD_PARAMETER, G_ORDERED_DICT, G_STORAGE } pv_global;

/* torch storage types and the safetensors dtype of their elements. */
static const struct {
    const char *name;
    const char *dtype;
    size_t size;
    lipi_st_dtype id;
} STORAGES[] = {
    {"FloatStorage", "F32", 4, LIPI_ST_F32},   {"HalfStorage", "F16", 2, LIPI_ST_F16},
    {"BFloat16Storage", "BF16", 2, LIPI_ST_BF16}, {"DoubleStorage", "F64", 8, LIPI_ST_OTHER},
    {"LongStorage", "I64", 8, LIPI_ST_OTHER},  {"IntStorage", "I32", 4, LIPI_ST_OTHER},
    {"ShortStorage", "I16", 2, LIPI_ST_OTHER}, {"CharStorage", "I8", 1, LIPI_ST_OTHER},
    {"ByteStorage", "U8", 1, LIPI_ST_OTHER},   {"BoolStorage", "BOOL", 1, LIPI_ST_OTHER},
};
#define N_STORAGES (sizeof STORAGES / sizeof STORAGES[0])

typedef struct pv pv;
struct pv {
    pv_kind kind;
    union {
        int64_t i;                                    /* BOOL, INT */
        struct { const char *s; size_t len; } str;    /* borrowed from the pickle */
        struct { pv **items; size_t n, cap; } seq;    /* TUPLE, LIST; DICT: k, v, k, v */
        struct { pv_global g; size_t storage; } glob; /* storage: index in STORAGES */
        struct { size_t type; const char *key; size_t key_len; uint64_t numel; } sto;
        size_t tensor;                                /* index in the tensor list */
    } u;
};

/* Values are carved from blocks: a pickle makes one per opcode at most. */
#define PV_BLOCK 1024
typedef struct pv_block {
    struct pv_block *next;
    size_t n;
    pv v[PV_BLOCK];
} pv_block;

typedef struct {
    const pv *storage; /* PV_STORAGE */
    size_t offset, ndim, shape[LIPI_ST_MAX_DIMS], nelem;
} pk_tensor;

typedef struct {
    const unsigned char *p;
    size_t len, pos, op_at; /* op_at: offset of the opcode being run */
    const char *path;       /* for errors: "FILE: data.pkl" */
    lipi_error *err;
    pv_block *blocks;       /* every value, freed together */
    pv **stack;
    size_t n_stack, cap_stack;
    pv **memo;
    size_t cap_memo;
    size_t next_memo;       /* MEMOIZE's index */
    pk_tensor *tensors;
    size_t n_tensors, cap_tensors;
} unpickler;

static pv MARK_VALUE = {.kind = PV_MARK};

#define PK_FAIL(...) lipi_error_set(u->err, LIPI_EFORMAT, u->path, 0, u->op_at, __VA_ARGS__)

static void unpickler_free(unpickler *u)
{
    for (pv_block *b = u->blocks, *next; b; b = next) {
        next = b->next;
        for (size_t i = 0; i < b->n; i++)
            if (b->v[i].kind == PV_TUPLE || b->v[i].kind == PV_LIST || b->v[i].kind == PV_DICT)
                lipi_free(b->v[i].u.seq.items);
        lipi_free(b);
    }
    lipi_free(u->stack);
    lipi_free(u->memo);
    lipi_free(u->tensors);
}

static pv *pv_new(unpickler *u, pv_kind k)
{
    if (!u->blocks || u->blocks->n == PV_BLOCK) {
        pv_block *b = lipi_malloc(sizeof *b);
        if (!b)
            return NULL;
        b->next = u->blocks;
        b->n = 0;
        u->blocks = b;
    }
    pv *v = &u->blocks->v[u->blocks->n++];
    memset(v, 0, sizeof *v);
    v->kind = k;
    return v;
}

static lipi_status push(unpickler *u, pv *v)
{
    if (!v)
        return LIPI_ENOMEM;
    void *p = u->stack;
    if (lipi_grow(&p, &u->cap_stack, u->n_stack + 1, sizeof *u->stack) != LIPI_OK)
        return LIPI_ENOMEM;
    u->stack = p;
    u->stack[u->n_stack++] = v;
    return LIPI_OK;
}

static lipi_status seq_add(pv *s, pv *item)
{
    void *p = s->u.seq.items;
    if (lipi_grow(&p, &s->u.seq.cap, s->u.seq.n + 1, sizeof *s->u.seq.items) != LIPI_OK)
        return LIPI_ENOMEM;
    s->u.seq.items = p;
    s->u.seq.items[s->u.seq.n++] = item;
    return LIPI_OK;
}

static const char *kind_name(pv_kind k)
{
    static const char *const names[] = {"mark", "None", "bool", "int", "str", "tuple", "list",
                                        "dict", "global", "storage", "tensor"};
    return names[k];
}

/* Pops one value (not a mark). */
static lipi_status pop(unpickler *u, pv **out)
{
    if (!u->n_stack || u->stack[u->n_stack - 1]->kind == PV_MARK)
        return PK_FAIL("opcode 0x%02x: stack underflow", u->p[u->op_at]);
    *out = u->stack[--u->n_stack];
    return LIPI_OK;
}

/* The index of the topmost mark. */
static lipi_status find_mark(unpickler *u, size_t *at)
{
    for (size_t i = u->n_stack; i-- > 0;)
        if (u->stack[i]->kind == PV_MARK) {
            *at = i;
            return LIPI_OK;
        }
    return PK_FAIL("opcode 0x%02x: no mark on the stack", u->p[u->op_at]);
}

static lipi_status need(unpickler *u, size_t n)
{
    if (u->len - u->pos < n)
        return PK_FAIL("opcode 0x%02x: argument of %zu bytes runs past the end of the pickle "
                       "(truncated?)",
                       u->p[u->op_at], n);
    return LIPI_OK;
}

static lipi_status memo_put(unpickler *u, uint64_t idx, pv *v)
{
    /* The pickler numbers memo entries 0, 1, 2, ...: an index beyond the
     * number of bytes read cannot be honest, and bounds the table. */
    if (idx > u->len)
        return PK_FAIL("memo index %llu out of range", (unsigned long long)idx);
    void *p = u->memo;
    size_t old = u->cap_memo;
    if (lipi_grow(&p, &u->cap_memo, (size_t)idx + 1, sizeof *u->memo) != LIPI_OK)
        return LIPI_ENOMEM;
    u->memo = p;
    memset(u->memo + old, 0, (u->cap_memo - old) * sizeof *u->memo);
    u->memo[idx] = v;
    if (idx >= u->next_memo)
        u->next_memo = (size_t)idx + 1;
    return LIPI_OK;
}

static lipi_status memo_get(unpickler *u, uint64_t idx)
{
    if (idx >= u->cap_memo || !u->memo[idx])
        return PK_FAIL("memo index %llu was never stored", (unsigned long long)idx);
    return push(u, u->memo[idx]);
}

static bool str_is(const pv *v, const char *s)
{
    return v->kind == PV_STR && v->u.str.len == strlen(s) && !memcmp(v->u.str.s, s, v->u.str.len);
}

/* GLOBAL / STACK_GLOBAL: resolves module.name to one of the allowed names. */
static lipi_status resolve_global(unpickler *u, const char *mod, size_t ml, const char *name,
                                  size_t nl)
{
    pv *v = pv_new(u, PV_GLOBAL);
    if (!v)
        return LIPI_ENOMEM;
#define IS(s, l, lit) ((l) == sizeof(lit) - 1 && !memcmp((s), (lit), (l)))
    if (IS(mod, ml, "torch._utils") && IS(name, nl, "_rebuild_tensor_v2"))
        v->u.glob.g = G_REBUILD_TENSOR;
    else if (IS(mod, ml, "torch._utils") && IS(name, nl, "_rebuild_parameter"))
        v->u.glob.g = G_REBUILD_PARAMETER;
    else if (IS(mod, ml, "collections") && IS(name, nl, "OrderedDict"))
        v->u.glob.g = G_ORDERED_DICT;
    else {
        size_t k = 0;
        while (k < N_STORAGES && !(IS(mod, ml, "torch") && nl == strlen(STORAGES[k].name) &&
                                   !memcmp(name, STORAGES[k].name, nl)))
            k++;
        if (k == N_STORAGES)
            return PK_FAIL("global %.*s.%.*s is not allowed: a checkpoint may only name "
                           "torch._utils._rebuild_tensor_v2, _rebuild_parameter, "
                           "collections.OrderedDict and torch storage types",
                           (int)(ml > 80 ? 80 : ml), mod, (int)(nl > 80 ? 80 : nl), name);
        v->u.glob.g = G_STORAGE;
        v->u.glob.storage = k;
    }
#undef IS
    return push(u, v);
}

static bool as_size(const pv *v, size_t *out)
{
    if (v->kind != PV_INT || v->u.i < 0 || (uint64_t)v->u.i > SIZE_MAX)
        return false;
    *out = (size_t)v->u.i;
    return true;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]): validated, never allocated. */
static lipi_status rebuild_tensor(unpickler *u, const pv *args, pv **out)
{
    pk_tensor t = {0};
    const pv *const *a = (const pv *const *)args->u.seq.items;
    size_t n = args->u.seq.n;
    if (n < 6 || n > 7 || a[0]->kind != PV_STORAGE || a[2]->kind != PV_TUPLE ||
        a[3]->kind != PV_TUPLE)
        return PK_FAIL("_rebuild_tensor_v2: expected (storage, offset, size, stride, "
                       "requires_grad, hooks[, metadata])");
    t.storage = a[0];
    if (!as_size(a[1], &t.offset))
        return PK_FAIL("_rebuild_tensor_v2: storage offset is not a non-negative integer");
    t.ndim = a[2]->u.seq.n;
    if (t.ndim > LIPI_ST_MAX_DIMS || a[3]->u.seq.n != t.ndim)
        return PK_FAIL("_rebuild_tensor_v2: %zu sizes and %zu strides, expected the same "
                       "number, at most %d",
                       t.ndim, a[3]->u.seq.n, LIPI_ST_MAX_DIMS);
    size_t nelem = 1, want_stride = 1;
    for (size_t d = 0; d < t.ndim; d++) {
        if (!as_size(a[2]->u.seq.items[d], &t.shape[d]))
            return PK_FAIL("_rebuild_tensor_v2: size[%zu] is not a non-negative integer", d);
        if (t.shape[d] && nelem > SIZE_MAX / t.shape[d])
            return PK_FAIL("_rebuild_tensor_v2: sizes overflow");
        nelem *= t.shape[d];
    }
    /* Row-major contiguity: stride[d] = product of the later sizes (a size-1
     * dimension may have any stride, as torch.is_contiguous allows). */
    for (size_t d = t.ndim; d-- > 0;) {
        size_t s;
        if (!as_size(a[3]->u.seq.items[d], &s))
            return PK_FAIL("_rebuild_tensor_v2: stride[%zu] is not a non-negative integer", d);
        if (t.shape[d] != 1 && nelem && s != want_stride)
            return PK_FAIL("_rebuild_tensor_v2: stride[%zu] is %zu, expected %zu: only "
                           "contiguous tensors are read (save tensor.contiguous())",
                           d, s, want_stride);
        want_stride *= t.shape[d] ? t.shape[d] : 1;
    }
    t.nelem = nelem;
    uint64_t numel = t.storage->u.sto.numel;
    if (nelem && (t.offset > numel || nelem > numel - t.offset))
        return PK_FAIL("_rebuild_tensor_v2: elements [%zu, +%zu) outside storage \"%.*s\" of "
                       "%llu elements",
                       t.offset, nelem, (int)t.storage->u.sto.key_len, t.storage->u.sto.key,
                       (unsigned long long)numel);
    void *p = u->tensors;
    if (lipi_grow(&p, &u->cap_tensors, u->n_tensors + 1, sizeof *u->tensors) != LIPI_OK)
        return LIPI_ENOMEM;
    u->tensors = p;
    pv *v = pv_new(u, PV_TENSOR);
    if (!v)
        return LIPI_ENOMEM;
    v->u.tensor = u->n_tensors;
    u->tensors[u->n_tensors++] = t;
    *out = v;
    return LIPI_OK;
}

static lipi_status op_reduce(unpickler *u)
{
    lipi_status st;
    pv *args, *fn, *v = NULL;
    if ((st = pop(u, &args)) != LIPI_OK || (st = pop(u, &fn)) != LIPI_OK)
        return st;
    if (fn->kind != PV_GLOBAL || fn->u.glob.g == G_STORAGE)
        return PK_FAIL("REDUCE of a %s: only _rebuild_tensor_v2, _rebuild_parameter and "
                       "OrderedDict may be called",
                       fn->kind == PV_GLOBAL ? "storage type" : kind_name(fn->kind));
    if (args->kind != PV_TUPLE)
        return PK_FAIL("REDUCE: expected an argument tuple, found a %s", kind_name(args->kind));
    switch (fn->u.glob.g) {
    case G_REBUILD_TENSOR:
        if ((st = rebuild_tensor(u, args, &v)) != LIPI_OK)
            return st;
        break;
    case G_REBUILD_PARAMETER:
        if (args->u.seq.n != 3 || args->u.seq.items[0]->kind != PV_TENSOR)
            return PK_FAIL("_rebuild_parameter: expected (tensor, requires_grad, hooks)");
        v = args->u.seq.items[0];
        break;
    case G_ORDERED_DICT:
        if (args->u.seq.n != 0)
            return PK_FAIL("OrderedDict: expected no arguments, found %zu", args->u.seq.n);
        if (!(v = pv_new(u, PV_DICT)))
            return LIPI_ENOMEM;
        break;
    case G_STORAGE:
        break;
    }
    return push(u, v);
}

/* BINPERSID: ("storage", TYPE, KEY, LOCATION, NUMEL). */
static lipi_status op_persid(unpickler *u)
{
    lipi_status st;
    pv *pid;
    if ((st = pop(u, &pid)) != LIPI_OK)
        return st;
    pv *const *a = pid->kind == PV_TUPLE ? pid->u.seq.items : NULL;
    if (!a || pid->u.seq.n != 5 || !str_is(a[0], "storage") || a[1]->kind != PV_GLOBAL ||
        a[1]->u.glob.g != G_STORAGE || a[2]->kind != PV_STR || a[3]->kind != PV_STR ||
        a[4]->kind != PV_INT || a[4]->u.i < 0)
        return PK_FAIL("persistent id: expected (\"storage\", torch.<Type>Storage, key, "
                       "location, size)");
    pv *v = pv_new(u, PV_STORAGE);
    if (!v)
        return LIPI_ENOMEM;
    v->u.sto.type = a[1]->u.glob.storage;
    v->u.sto.key = a[2]->u.str.s;
    v->u.sto.key_len = a[2]->u.str.len;
    v->u.sto.numel = (uint64_t)a[4]->u.i;
    return push(u, v);
}

/* Names of the opcodes refused, for the message. */
static const char *op_name(unsigned char op)
{
    switch (op) {
    case 'c': return "GLOBAL";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'R': return "REDUCE";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 0x8b: return "LONG4";
    case 'F': return "FLOAT";
    case 'G': return "BINFLOAT";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'V': return "UNICODE";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 'g': return "GET";
    case 'p': return "PUT";
    case '2': return "DUP";
    case '1': return "POP_MARK";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown";
    }
}

static lipi_status op_str(unpickler *u, size_t lenbytes)
{
    lipi_status st;
    if ((st = need(u, lenbytes)) != LIPI_OK)
        return st;
    uint64_t n = lenbytes == 1 ? u->p[u->pos] : lenbytes == 4 ? rd32(u->p + u->pos)
                                                              : rd64(u->p + u->pos);
    u->pos += lenbytes;
    if (n > u->len - u->pos)
        return PK_FAIL("string of %llu bytes runs past the end of the pickle (truncated?)",
                       (unsigned long long)n);
    pv *v = pv_new(u, PV_STR);
    if (!v)
        return LIPI_ENOMEM;
    v->u.str.s = (const char *)u->p + u->pos;
    v->u.str.len = (size_t)n;
    u->pos += (size_t)n;
    return push(u, v);
}

static lipi_status op_int(unpickler *u, int64_t i, pv_kind k)
{
    pv *v = pv_new(u, k);
    if (!v)
        return LIPI_ENOMEM;
    v->u.i = i;
    return push(u, v);
}

/* Moves the values above the topmost mark into container c (a tuple, list
 * or dict) and drops the mark. */
static lipi_status collect(unpickler *u, pv *c)
{
    lipi_status st;
    size_t m;
    if ((st = find_mark(u, &m)) != LIPI_OK)
        return st;
    if (c->kind == PV_DICT && (u->n_stack - m - 1) % 2)
        return PK_FAIL("SETITEMS: odd number of values after the mark");
    if (c->kind == PV_DICT)
        for (size_t i = m + 1; i < u->n_stack; i += 2)
            if (u->stack[i]->kind != PV_STR && u->stack[i]->kind != PV_INT)
                return PK_FAIL("dict key: expected a str, found a %s",
                               kind_name(u->stack[i]->kind));
    for (size_t i = m + 1; i < u->n_stack; i++)
        if ((st = seq_add(c, u->stack[i])) != LIPI_OK)
            return st;
    u->n_stack = m;
    return LIPI_OK;
}

static lipi_status step(unpickler *u, bool *stop)
{
    lipi_status st = LIPI_OK;
    u->op_at = u->pos;
    unsigned char op = u->p[u->pos++];
    pv *a, *b, *c, *v;
    switch (op) {
    case 0x80: /* PROTO */
        if ((st = need(u, 1)) != LIPI_OK)
            return st;
        if (u->p[u->pos] > 5)
            return PK_FAIL("pickle protocol %u, expected 2 to 5", u->p[u->pos]);
        u->pos++;
        return LIPI_OK;
    case 0x95: /* FRAME: a length prefix only */
        if ((st = need(u, 8)) != LIPI_OK)
            return st;
        u->pos += 8;
        return LIPI_OK;
    case '.': /* STOP */
        *stop = true;
        return LIPI_OK;
    case '(': return push(u, &MARK_VALUE);
    case '0': return pop(u, &a);
    case 'N': return push(u, pv_new(u, PV_NONE));
    case 0x88: return op_int(u, 1, PV_BOOL);
    case 0x89: return op_int(u, 0, PV_BOOL);
    case 'K':
        if ((st = need(u, 1)) != LIPI_OK)
            return st;
        return op_int(u, u->p[u->pos++], PV_INT);
    case 'M':
        if ((st = need(u, 2)) != LIPI_OK)
            return st;
        u->pos += 2;
        return op_int(u, rd16(u->p + u->pos - 2), PV_INT);
    case 'J':
        if ((st = need(u, 4)) != LIPI_OK)
            return st;
        u->pos += 4;
        return op_int(u, (int32_t)rd32(u->p + u->pos - 4), PV_INT);
    case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
        if ((st = need(u, 1)) != LIPI_OK)
            return st;
        size_t n = u->p[u->pos++];
        if (n > 8)
            return PK_FAIL("LONG1 of %zu bytes: integers beyond 64 bits are not expected", n);
        if ((st = need(u, n)) != LIPI_OK)
            return st;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++)
            x |= (uint64_t)u->p[u->pos + i] << (8 * i);
        if (n && n < 8 && (u->p[u->pos + n - 1] & 0x80))
            x |= ~(uint64_t)0 << (8 * n); /* sign-extend */
        u->pos += n;
        return op_int(u, (int64_t)x, PV_INT);
    }
    case 'X': return op_str(u, 4);        /* BINUNICODE */
    case 0x8c: return op_str(u, 1);       /* SHORT_BINUNICODE */
    case 0x8d: return op_str(u, 8);       /* BINUNICODE8 */
    case 'U': return op_str(u, 1);        /* SHORT_BINSTRING */
    case ')': return push(u, pv_new(u, PV_TUPLE));
    case ']': return push(u, pv_new(u, PV_LIST));
    case '}': return push(u, pv_new(u, PV_DICT));
    case 't':
        if (!(v = pv_new(u, PV_TUPLE)))
            return LIPI_ENOMEM;
        if ((st = collect(u, v)) != LIPI_OK)
            return st;
        return push(u, v);
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
        size_t n = (size_t)(op - 0x84);
        if (!(v = pv_new(u, PV_TUPLE)))
            return LIPI_ENOMEM;
        if (u->n_stack < n)
            return PK_FAIL("TUPLE%zu: stack underflow", n);
        for (size_t i = u->n_stack - n; i < u->n_stack; i++) {
            if (u->stack[i]->kind == PV_MARK)
                return PK_FAIL("TUPLE%zu: a mark where a value was expected", n);
            if ((st = seq_add(v, u->stack[i])) != LIPI_OK)
                return st;
        }
        u->n_stack -= n;
        return push(u, v);
    }
    case 'a': /* APPEND */
        if ((st = pop(u, &a)) != LIPI_OK || (st = pop(u, &b)) != LIPI_OK)
            return st;
        if (b->kind != PV_LIST)
            return PK_FAIL("APPEND to a %s, expected a list", kind_name(b->kind));
        if ((st = seq_add(b, a)) != LIPI_OK)
            return st;
        return push(u, b);
    case 'e': case 'u': { /* APPENDS, SETITEMS */
        size_t m;
        if ((st = find_mark(u, &m)) != LIPI_OK)
            return st;
        if (m == 0)
            return PK_FAIL("%s: no container below the mark", op == 'e' ? "APPENDS" : "SETITEMS");
        c = u->stack[m - 1];
        if (c->kind != (op == 'e' ? PV_LIST : PV_DICT))
            return PK_FAIL("%s on a %s", op == 'e' ? "APPENDS" : "SETITEMS", kind_name(c->kind));
        return collect(u, c);
    }
    case 's': /* SETITEM */
        if ((st = pop(u, &a)) != LIPI_OK || (st = pop(u, &b)) != LIPI_OK ||
            (st = pop(u, &c)) != LIPI_OK)
            return st;
        if (c->kind != PV_DICT)
            return PK_FAIL("SETITEM on a %s, expected a dict", kind_name(c->kind));
        if (b->kind != PV_STR && b->kind != PV_INT)
            return PK_FAIL("dict key: expected a str, found a %s", kind_name(b->kind));
        if ((st = seq_add(c, b)) != LIPI_OK || (st = seq_add(c, a)) != LIPI_OK)
            return st;
        return push(u, c);
    case 'q':
        if ((st = need(u, 1)) != LIPI_OK)
            return st;
        if (!u->n_stack)
            return PK_FAIL("BINPUT on an empty stack");
        return memo_put(u, u->p[u->pos++], u->stack[u->n_stack - 1]);
    case 'r':
        if ((st = need(u, 4)) != LIPI_OK)
            return st;
        if (!u->n_stack)
            return PK_FAIL("LONG_BINPUT on an empty stack");
        u->pos += 4;
        return memo_put(u, rd32(u->p + u->pos - 4), u->stack[u->n_stack - 1]);
    case 0x94: /* MEMOIZE */
        if (!u->n_stack)
            return PK_FAIL("MEMOIZE on an empty stack");
        return memo_put(u, u->next_memo, u->stack[u->n_stack - 1]);
    case 'h':
        if ((st = need(u, 1)) != LIPI_OK)
            return st;
        return memo_get(u, u->p[u->pos++]);
    case 'j':
        if ((st = need(u, 4)) != LIPI_OK)
            return st;
        u->pos += 4;
        return memo_get(u, rd32(u->p + u->pos - 4));
    case 'c': { /* GLOBAL "module\nname\n" */
        const char *s = (const char *)u->p + u->pos, *end = (const char *)u->p + u->len;
        const char *nl1 = memchr(s, '\n', (size_t)(end - s));
        const char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
        if (!nl2)
            return PK_FAIL("GLOBAL: expected \"module\\nname\\n\"");
        u->pos = (size_t)(nl2 + 1 - (const char *)u->p);
        return resolve_global(u, s, (size_t)(nl1 - s), nl1 + 1, (size_t)(nl2 - nl1 - 1));
    }
    case 0x93: /* STACK_GLOBAL */
        if ((st = pop(u, &a)) != LIPI_OK || (st = pop(u, &b)) != LIPI_OK)
            return st;
        if (a->kind != PV_STR || b->kind != PV_STR)
            return PK_FAIL("STACK_GLOBAL: expected two strings");
        return resolve_global(u, b->u.str.s, b->u.str.len, a->u.str.s, a->u.str.len);
    case 'Q': return op_persid(u);
    case 'R': return op_reduce(u);
    case 'b': /* BUILD: only a dict's attributes (state_dict's _metadata), dropped */
        if ((st = pop(u, &a)) != LIPI_OK || (st = pop(u, &b)) != LIPI_OK)
            return st;
        if (b->kind != PV_DICT)
            return PK_FAIL("BUILD on a %s: only a dict's state is accepted", kind_name(b->kind));
        return push(u, b);
    default:
        return PK_FAIL("opcode 0x%02x (%s) is not allowed in a checkpoint", op, op_name(op));
    }
}

/* Runs the pickle to STOP; *out is the value left on the stack. */
static lipi_status unpickle(unpickler *u, pv **out)
{
    lipi_status st = LIPI_OK;
    bool stop = false;
    while (!stop) {
        if (u->pos >= u->len) {
            u->op_at = u->pos;
            return PK_FAIL("the pickle ends without STOP (truncated?)");
        }
        if ((st = step(u, &stop)) != LIPI_OK)
            return st;
    }
    if (u->n_stack != 1 || u->stack[0]->kind == PV_MARK)
        return PK_FAIL("STOP with %zu values on the stack, expected 1", u->n_stack);
    *out = u->stack[0];
    return LIPI_OK;
}

/* ======================================================================== */
/* Checkpoint                                                                */
/* ======================================================================== */

static bool looks_legacy(const unsigned char *p, size_t len)
{
    /* Legacy torch.save: a pickle stream (PROTO) of a magic number; older
     * still, a tar archive ("ustar" at byte 257). */
    return (len >= 2 && p[0] == 0x80 && p[1] <= 5) ||
           (len >= 262 && !memcmp(p + 257, "ustar", 5));
}

/* Fills st's tensors from the state dict `root`. */
static lipi_status bind_tensors(zip_archive *z, unpickler *u, const pv *root, const char *prefix,
                                size_t prefix_len, bool mapped, lipi_safetensors *st)
{
    lipi_error *err = z->err;
    if (root->kind != PV_DICT)
        return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                              "data.pkl holds a %s, expected a state dict (name -> tensor)",
                              kind_name(root->kind));
    size_t n = root->u.seq.n / 2;
    st->tensors = lipi_calloc(n ? n : 1, sizeof *st->tensors);
    if (!st->tensors)
        return LIPI_ENOMEM;
    char ename[512];
    for (size_t i = 0; i < n; i++) {
        const pv *k = root->u.seq.items[2 * i], *v = root->u.seq.items[2 * i + 1];
        if (k->kind != PV_STR || v->kind != PV_TENSOR)
            return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                                  "state dict entry %zu: expected a name and a tensor, found a "
                                  "%s and a %s",
                                  i, kind_name(k->kind), kind_name(v->kind));
        if (memchr(k->u.str.s, 0, k->u.str.len))
            return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                                  "state dict entry %zu: a NUL byte in the name", i);
        const pk_tensor *pt = &u->tensors[v->u.tensor];
        const pv *sto = pt->storage;
        size_t kl = sto->u.sto.key_len, es = STORAGES[sto->u.sto.type].size;
        if ((size_t)snprintf(ename, sizeof ename, "%.*s/data/%.*s", (int)prefix_len, prefix,
                             (int)kl, sto->u.sto.key) >= sizeof ename)
            return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                                  "storage key of %zu bytes is too long", kl);
        zip_entry *e = zip_find(z, ename, strlen(ename));
        if (!e)
            return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                                  "tensor \"%.*s\": storage entry \"%s\" missing",
                                  (int)k->u.str.len, k->u.str.s, ename);
        if (sto->u.sto.numel > UINT64_MAX / es || e->usize != sto->u.sto.numel * es)
            return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                                  "tensor \"%.*s\": storage \"%s\" has %llu bytes, expected "
                                  "%llu elements of %zu bytes",
                                  (int)k->u.str.len, k->u.str.s, ename,
                                  (unsigned long long)e->usize,
                                  (unsigned long long)sto->u.sto.numel, es);
        lipi_status s = zip_read(z, e, st);
        if (s != LIPI_OK)
            return s;
        lipi_st_tensor *t = &st->tensors[st->n];
        t->name = lipi_strndup(k->u.str.s, k->u.str.len);
        if (!t->name)
            return LIPI_ENOMEM;
        st->n++;
        t->dtype = STORAGES[sto->u.sto.type].id;
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", STORAGES[sto->u.sto.type].dtype);
        t->ndim = pt->ndim;
        memcpy(t->shape, pt->shape, sizeof t->shape);
        t->nelem = pt->nelem;
        /* offset + nelem <= numel was checked, so these stay in the entry. */
        t->begin = pt->nelem ? pt->offset * es : 0;
        t->end = t->begin + pt->nelem * es;
        t->data = e->data + t->begin;
        t->heap = e->heap || !mapped;
        lipi_st_tensor *dup = NULL;
        HASH_FIND(hh, st->index, t->name, strlen(t->name), dup);
        if (dup)
            return lipi_error_set(err, LIPI_EFORMAT, z->path, 0, 0,
                                  "tensor \"%s\" appears twice", t->name);
        lipi_hash_oom_flag = 0;
        HASH_ADD_KEYPTR(hh, st->index, t->name, strlen(t->name), t);
        if (lipi_hash_oom_flag)
            return LIPI_ENOMEM;
    }
    return LIPI_OK;
}

static lipi_status parse_checkpoint(lipi_safetensors *st, const unsigned char *p, size_t len,
                                    const char *path, bool mapped, lipi_error *err)
{
    lipi_status s = LIPI_OK;
    zip_archive z = {.p = p, .len = len, .path = path, .err = err};
    unpickler u = {0};
    if (len < 4 || memcmp(p, "PK\x03\x04", 4)) {
        if (looks_legacy(p, len))
            s = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                               "legacy torch.save format (PyTorch before 1.6) is not read: "
                               "re-save it with a newer torch (torch.save(torch.load(f), f)) "
                               "or convert it to model.safetensors");
        else
            s = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                               "not a PyTorch checkpoint: expected a zip archive (\"PK\\3\\4\")");
        goto done;
    }
    if ((s = zip_open(&z)) != LIPI_OK)
        goto done;
    /* PREFIX/data.pkl, PREFIX being the one top-level folder. */
    zip_entry *pkl = NULL;
    for (size_t i = 0; i < z.n; i++) {
        const zip_entry *e = &z.e[i];
        const char *slash = memchr(e->name, '/', e->name_len);
        if (slash && e->name_len - (size_t)(slash - e->name) == 9 && !memcmp(slash, "/data.pkl", 9)) {
            if (pkl) {
                s = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "two data.pkl entries");
                goto done;
            }
            pkl = &z.e[i];
        }
    }
    if (!pkl) {
        s = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                           "no PREFIX/data.pkl entry: a zip archive, but not a torch.save "
                           "checkpoint");
        goto done;
    }
    size_t prefix_len = pkl->name_len - 9;
    char bo[300];
    snprintf(bo, sizeof bo, "%.*s/byteorder", (int)(prefix_len > 255 ? 255 : prefix_len),
             pkl->name);
    zip_entry *order = zip_find(&z, bo, strlen(bo));
    if (order) {
        if ((s = zip_read(&z, order, st)) != LIPI_OK)
            goto done;
        if (order->usize != 6 || memcmp(order->data, "little", 6)) {
            s = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                               "byteorder entry: expected \"little\" (big-endian checkpoints "
                               "are not read)");
            goto done;
        }
    }
    if (pkl->usize > LIPI_TORCH_MAX_PICKLE) {
        s = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                           "data.pkl of %llu bytes exceeds the %zu MB limit",
                           (unsigned long long)pkl->usize, LIPI_TORCH_MAX_PICKLE >> 20);
        goto done;
    }
    if ((s = zip_read(&z, pkl, st)) != LIPI_OK)
        goto done;
    char upath[sizeof err->path];
    snprintf(upath, sizeof upath, "%s: data.pkl", path);
    u.p = pkl->data;
    u.len = (size_t)pkl->usize;
    u.path = upath;
    u.err = err;
    pv *root = NULL;
    if ((s = unpickle(&u, &root)) != LIPI_OK)
        goto done;
    s = bind_tensors(&z, &u, root, pkl->name, prefix_len, mapped, st);
done:
    unpickler_free(&u);
    lipi_free(z.e);
    return s;
}

/* `mapped`: p is a private file mapping owned by the result, whose pages
 * may be dropped once converted (a caller's buffer may not). */
static lipi_status torch_open(const unsigned char *p, size_t len, const char *path, bool mapped,
                              lipi_safetensors **out, lipi_error *err)
{
    lipi_status s = LIPI_OK;
    *out = NULL;
    lipi_safetensors *st = lipi_calloc(1, sizeof *st);
    if (!st || !(st->path = lipi_strndup(path, strlen(path)))) {
        s = LIPI_ENOMEM;
        goto done;
    }
    s = parse_checkpoint(st, p, len, path, mapped, err);
done:
    if (s != LIPI_OK) {
        if (s == LIPI_ENOMEM)
            lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        lipi_st_close(st);
        return s;
    }
    *out = st;
    return LIPI_OK;
}

lipi_status lipi_torch_open_mem(const unsigned char *p, size_t len, const char *path,
                                lipi_safetensors **out, lipi_error *err)
{
    return torch_open(p, len, path, false, out, err);
}

lipi_status lipi_torch_open(const char *path, lipi_safetensors **out, lipi_error *err)
{
    unsigned char *map = NULL;
    size_t len = 0;
    *out = NULL;
    lipi_status s = lipi_map_file(path, &map, &len, err);
    if (s == LIPI_OK)
        s = torch_open(map ? map : (const unsigned char *)"", len, path, true, out, err);
    if (s != LIPI_OK) {
        if (map)
            munmap(map, len);
        return s;
    }
    (*out)->map = map;
    (*out)->map_len = len;
    return LIPI_OK;
}

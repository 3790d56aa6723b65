/* GGUF files (llama.cpp): the tokenizer in the metadata section.
 *
 * Layout (little-endian, versions 2 and 3):
 *   "GGUF", u32 version, u64 tensor_count, u64 kv_count, then kv_count
 *   pairs of  key (u64 length + bytes), u32 value type, value.
 * Values: u8 i8 u16 i16 u32 i32 f32 bool(1 byte) string(u64 length +
 * bytes) array(u32 element type, u64 count, elements) u64 i64 f64, types
 * 0..12 in that order. Tensors come after the metadata and are never read.
 *
 * The whole metadata section is walked once with every length and count
 * checked against the bytes left (a count is checked against the smallest
 * size its elements can have before anything is allocated for it), so a
 * hostile file fails with LIPI_EFORMAT and the offset of the bad field.
 *
 * The tokenizer built is the one Hugging Face uses for the model:
 *   gpt2   byte-level BPE; tokenizer.ggml.pre picks the split the model's
 *          tokenizer.json has (llama3, qwen2, falcon, ...) or, for other
 *          types llama.cpp knows, llama.cpp's regexes;
 *   llama  SentencePiece BPE by scores with byte fallback, as Hugging
 *          Face's LlamaConverter builds it;
 *   bert   WordPiece (llama.cpp stores "▁word" / "piece" for "word" /
 *          "##piece"), lowercasing as bge does;
 *   t5     SentencePiece Unigram with its precompiled charsmap.
 */
#include "tokenizer/patterns_impl.h"
#include "tokenizer/read_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum {
    GG_U8 = 0, GG_I8, GG_U16, GG_I16, GG_U32, GG_I32, GG_F32, GG_BOOL, GG_STRING, GG_ARRAY,
    GG_U64, GG_I64, GG_F64,
};

static const char *const gg_type_names[] = {"u8",  "i8",  "u16",    "i16",   "u32",
                                            "i32", "f32", "bool",   "string", "array",
                                            "u64", "i64", "f64"};

/* Size of a fixed-size value, 0 for string and array. */
static size_t gg_size(uint32_t t)
{
    static const uint8_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < sizeof sz ? sz[t] : 0;
}

typedef struct {
    lipi_strref key;
    uint32_t type;
    size_t at;      /* offset of the value */
    uint32_t elem;  /* arrays: element type */
    uint64_t count; /* arrays: element count */
    size_t data;    /* arrays: offset of the first element */
} gg_kv;

typedef struct {
    const uint8_t *d;
    size_t len;
    const char *name;
    lipi_error *err;
    gg_kv *kv;
    size_t n_kv;
    size_t end; /* after gg_parse: the offset just past the metadata */
} gg;

static lipi_status gg_fail(gg *g, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static lipi_status gg_fail(gg *g, size_t at, const char *fmt, ...)
{
    char msg[sizeof g->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lipi_error_set(g->err, LIPI_EFORMAT, g->name, 0, at, "%s", msg);
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads n bytes at *pos: fails unless they are all there. */
static lipi_status gg_need(gg *g, size_t pos, size_t n, const char *what)
{
    if (pos > g->len || g->len - pos < n)
        return gg_fail(g, pos, "%s: expected %zu bytes, found %zu", what, n,
                       pos > g->len ? 0 : g->len - pos);
    return LIPI_OK;
}

static lipi_status gg_u64(gg *g, size_t *pos, uint64_t *v, const char *what)
{
    lipi_status st = gg_need(g, *pos, 8, what);
    if (st == LIPI_OK) {
        *v = rd64(g->d + *pos);
        *pos += 8;
    }
    return st;
}

static lipi_status gg_u32(gg *g, size_t *pos, uint32_t *v, const char *what)
{
    lipi_status st = gg_need(g, *pos, 4, what);
    if (st == LIPI_OK) {
        *v = rd32(g->d + *pos);
        *pos += 4;
    }
    return st;
}

/* A string (u64 length + bytes): *s / *n point into the file. */
static lipi_status gg_string(gg *g, size_t *pos, const char **s, size_t *n, const char *what)
{
    lipi_status st = LIPI_OK;
    uint64_t len;
    size_t at = *pos;
    TRY(gg_u64(g, pos, &len, what));
    if (len > g->len - *pos)
        return gg_fail(g, at, "%s: expected a string of at most %zu bytes, found a length of %llu",
                       what, g->len - *pos, (unsigned long long)len);
    *s = (const char *)g->d + *pos;
    *n = (size_t)len;
    *pos += (size_t)len;
done:
    return st;
}

/* Skips a value of type t, checking every size on the way. */
static lipi_status gg_skip(gg *g, size_t *pos, uint32_t t, int depth, const char *what)
{
    lipi_status st = LIPI_OK;
    size_t at = *pos;
    if (t > GG_F64)
        return gg_fail(g, at, "%s: expected a value type from 0 to 12, found %u", what, t);
    if (gg_size(t)) {
        TRY(gg_need(g, *pos, gg_size(t), what));
        *pos += gg_size(t);
    } else if (t == GG_STRING) {
        const char *s;
        size_t n;
        TRY(gg_string(g, pos, &s, &n, what));
    } else {
        uint32_t et;
        uint64_t count;
        if (depth >= 4)
            return gg_fail(g, at, "%s: expected arrays nested at most 4 deep", what);
        TRY(gg_u32(g, pos, &et, what));
        TRY(gg_u64(g, pos, &count, what));
        if (et > GG_F64)
            return gg_fail(g, at, "%s: expected an element type from 0 to 12, found %u", what,
                           et);
        /* The least each element can take: its size, a string's length
         * field, an array's type and count. */
        size_t least = gg_size(et) ? gg_size(et) : et == GG_STRING ? 8 : 12;
        size_t left = g->len - *pos;
        if (count > left / least)
            return gg_fail(g, at + 4,
                           "%s: expected at most %zu elements of type %s in the %zu bytes left, "
                           "found a count of %llu",
                           what, left / least, gg_type_names[et], left,
                           (unsigned long long)count);
        if (gg_size(et)) {
            *pos += (size_t)count * gg_size(et);
        } else {
            for (uint64_t i = 0; i < count; i++)
                TRY(gg_skip(g, pos, et, depth + 1, what));
        }
    }
done:
    return st;
}

static lipi_status gg_parse(gg *g)
{
    lipi_status st = LIPI_OK;
    size_t pos = 8;
    uint64_t tensors, n_kv;

    if (g->len < 4 || memcmp(g->d, "GGUF", 4) != 0)
        return gg_fail(g, 0, "expected the GGUF magic \"GGUF\", found %s",
                       g->len < 4 ? "a shorter file" : "other bytes");
    TRY(gg_need(g, 4, 20, "GGUF header"));
    uint32_t version = rd32(g->d + 4);
    if (version != 2 && version != 3) {
        uint32_t swapped = __builtin_bswap32(version);
        return gg_fail(g, 4, "GGUF version: expected 2 or 3, found %u%s", version,
                       swapped == 2 || swapped == 3 ? " (a big-endian file, not supported)"
                       : version == 1            ? " (version 1 is not supported)"
                                                 : "");
    }
    TRY(gg_u64(g, &pos, &tensors, "tensor count"));
    TRY(gg_u64(g, &pos, &n_kv, "metadata count"));
    /* Each pair takes at least a key length, a type and one byte. */
    if (n_kv > (g->len - pos) / 13)
        return gg_fail(g, 16,
                       "metadata count: expected at most %zu pairs in the %zu bytes left, found "
                       "%llu",
                       (g->len - pos) / 13, g->len - pos, (unsigned long long)n_kv);
    g->kv = lipi_calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    if (!g->kv)
        return lipi_error_set(g->err, LIPI_ENOMEM, g->name, 0, 0, "out of memory");
    for (uint64_t i = 0; i < n_kv; i++) {
        gg_kv *kv = &g->kv[g->n_kv];
        const char *key;
        size_t klen, key_at = pos;
        char what[96];
        TRY(gg_string(g, &pos, &key, &klen, "metadata key"));
        if (lipi_utf8_valid_prefix(key, klen) < klen)
            return gg_fail(g, key_at, "metadata key %llu: expected UTF-8 text",
                           (unsigned long long)i);
        snprintf(what, sizeof what, "%.*s", (int)(klen > 80 ? 80 : klen), key);
        TRY(gg_u32(g, &pos, &kv->type, what));
        kv->key = (lipi_strref){key, klen};
        kv->at = pos;
        if (kv->type == GG_ARRAY) {
            size_t p = pos;
            TRY(gg_u32(g, &p, &kv->elem, what));
            TRY(gg_u64(g, &p, &kv->count, what));
            kv->data = p;
        }
        TRY(gg_skip(g, &pos, kv->type, 0, what));
        g->n_kv++;
    }
    g->end = pos;
done:
    return st;
}

/* Jumps to the function's cleanup with st = LIPI_ENOMEM and err filled. */
#define GG_OOM()                                                                           \
    do {                                                                                   \
        st = lipi_error_set(g->err, LIPI_ENOMEM, g->name, 0, 0, "out of memory");          \
        goto done;                                                                         \
    } while (0)

static const gg_kv *gg_find(const gg *g, const char *key)
{
    size_t n = strlen(key);
    /* A key given twice: the last one counts, as in llama.cpp's map. */
    for (size_t i = g->n_kv; i-- > 0;)
        if (g->kv[i].key.len == n && memcmp(g->kv[i].key.s, key, n) == 0)
            return &g->kv[i];
    return NULL;
}

static lipi_status gg_wrong_type(gg *g, const gg_kv *kv, const char *want)
{
    return gg_fail(g, kv->at - 4, "%.*s: expected %s, found a value of type %s",
                   (int)kv->key.len, kv->key.s, want,
                   kv->type <= GG_F64 ? gg_type_names[kv->type] : "?");
}

/* A string value; *s = NULL when the key is absent. */
static lipi_status gg_get_str(gg *g, const char *key, const char **s, size_t *n)
{
    const gg_kv *kv = gg_find(g, key);
    size_t pos;
    *s = NULL;
    *n = 0;
    if (!kv)
        return LIPI_OK;
    if (kv->type != GG_STRING)
        return gg_wrong_type(g, kv, "a string");
    pos = kv->at;
    return gg_string(g, &pos, s, n, key);
}

/* A non-negative integer of any integer type; *found false when absent. */
static lipi_status gg_get_uint(gg *g, const char *key, uint64_t *v, bool *found)
{
    const gg_kv *kv = gg_find(g, key);
    const uint8_t *p;
    int64_t x;
    *found = false;
    if (!kv)
        return LIPI_OK;
    p = g->d + kv->at;
    switch (kv->type) {
    case GG_U8: x = p[0]; break;
    case GG_I8: x = (int8_t)p[0]; break;
    case GG_U16: x = p[0] | p[1] << 8; break;
    case GG_I16: x = (int16_t)(p[0] | p[1] << 8); break;
    case GG_U32: x = rd32(p); break;
    case GG_I32: x = (int32_t)rd32(p); break;
    case GG_U64:
        if (rd64(p) > INT64_MAX)
            return gg_fail(g, kv->at, "%s: expected a token id, found %llu", key,
                           (unsigned long long)rd64(p));
        x = (int64_t)rd64(p);
        break;
    case GG_I64: x = (int64_t)rd64(p); break;
    default: return gg_wrong_type(g, kv, "an integer");
    }
    if (x < 0) {
        /* llama.cpp writes -1 for "no such token". */
        return LIPI_OK;
    }
    *v = (uint64_t)x;
    *found = true;
    return LIPI_OK;
}

static lipi_status gg_get_bool(gg *g, const char *key, bool *v)
{
    const gg_kv *kv = gg_find(g, key);
    if (!kv)
        return LIPI_OK;
    if (kv->type != GG_BOOL)
        return gg_wrong_type(g, kv, "a bool");
    *v = g->d[kv->at] != 0;
    return LIPI_OK;
}

/* An array of strings as spans into the file (*out owned by the caller).
 * *out = NULL, *n = 0 when the key is absent. Each string must be UTF-8. */
static lipi_status gg_get_strings(gg *g, const char *key, lipi_strref **out, size_t *n)
{
    const gg_kv *kv = gg_find(g, key);
    lipi_strref *a;
    size_t pos;
    *out = NULL;
    *n = 0;
    if (!kv)
        return LIPI_OK;
    if (kv->type != GG_ARRAY || kv->elem != GG_STRING)
        return gg_wrong_type(g, kv, "an array of strings");
    /* The count was checked against the file size when parsing. */
    a = lipi_calloc(kv->count ? (size_t)kv->count : 1, sizeof *a);
    if (!a)
        return lipi_error_set(g->err, LIPI_ENOMEM, g->name, 0, 0, "out of memory");
    pos = kv->data;
    for (size_t i = 0; i < kv->count; i++) {
        const char *s;
        size_t len, at = pos;
        if (gg_string(g, &pos, &s, &len, key) != LIPI_OK) {
            lipi_free(a);
            return LIPI_EFORMAT;
        }
        size_t ok = lipi_utf8_valid_prefix(s, len);
        if (ok < len) {
            lipi_free(a);
            return gg_fail(g, at + 8 + ok, "%s[%zu]: expected UTF-8 text, found byte 0x%02x",
                           key, i, (unsigned char)s[ok]);
        }
        a[i] = (lipi_strref){s, len};
    }
    *out = a;
    *n = (size_t)kv->count;
    return LIPI_OK;
}

/* A numeric array of `want_n` elements of type `t`, or absent (*p NULL). */
static lipi_status gg_get_array(gg *g, const char *key, uint32_t t, size_t want_n,
                                const uint8_t **p)
{
    const gg_kv *kv = gg_find(g, key);
    *p = NULL;
    if (!kv)
        return LIPI_OK;
    if (kv->type != GG_ARRAY || kv->elem != t) {
        char want[48];
        snprintf(want, sizeof want, "an array of %s", gg_type_names[t]);
        return gg_wrong_type(g, kv, want);
    }
    if (kv->count != want_n)
        return gg_fail(g, kv->at + 4, "%s: expected %zu elements (one per token), found %llu",
                       key, want_n, (unsigned long long)kv->count);
    *p = g->d + kv->data;
    return LIPI_OK;
}

/* ======================================================================== */
/* Pre-tokenizers by tokenizer.ggml.pre                                      */
/* ======================================================================== */

#define RX_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"

/* How a "pre" type splits. Kinds: the split regexes are applied one after
 * the other (each splits the pieces of the one before, keeping the text
 * between matches), then the byte-level mapping; `hf` marks types whose
 * tokenizer.json differs from such a list, built by name below. */
typedef struct {
    const char *names; /* '|'-separated */
    const char *rx[6];
    bool nfc;           /* the model's tokenizer.json normalizes to NFC */
    bool ignore_merges; /* and says ignore_merges */
    bool add_bos;       /* llama.cpp's default for add_bos_token */
    int hf;             /* 0: regex list; 1: GPT-2 ByteLevel; 2: falcon; 3: digits + ByteLevel */
} gg_pre;

static const gg_pre pre_types[] = {
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|jina-v1-en|"
     "jina-v2-code|roberta-bpe|exaone4|jais|trillion|granite-docling|olmo",
     {NULL}, false, false, false, 1},
    {"mpt", {NULL}, true, false, false, 1},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2",
     {PAT_CL100K_TIKTOKEN}, false, true, true, 0},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", {PAT_CL100K_TIKTOKEN}, false, false, false, 0},
    {"qwen2|deepseek-r1-qwen|kormo|megrez", {PAT_QWEN2}, true, false, false, 0},
    {"stablelm2|hunyuan", {PAT_QWEN2}, false, false, false, 0},
    {"falcon", {NULL}, false, false, false, 2},
    {"starcoder|refact|smollm|codeshell|exaone|minerva-7b", {NULL}, false, false, false, 3},
    {"command-r", {NULL}, true, false, false, 3},
    {"deepseek-llm",
     {"[\\r\\n]",
      "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf"
      "\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf"
      "\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-"
      "\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-"
      "\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab"
      "\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-"
      "\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97"
      "\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4"
      "\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c"
      "\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-"
      "\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93"
      "\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-"
      "\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-"
      "\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-"
      "\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad"
      "\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-"
      "\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97"
      "\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f"
      "\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-"
      "\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f"
      "\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f"
      "\xe3\x80\x80-\xe3\x80\x82]+",
      "\\s+$", RX_CJK, "\\p{N}+"},
     false, false, false, 0},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}"}, false, false,
     false, 0},
    {"gpt-4o|llama4|minimax-m2", {PAT_O200K_TIKTOKEN}, false, false, false, 0},
    {"tekken", {PAT_TEKKEN}, false, true, true, 0},
    {"poro-chat|bloom|gpt3-finnish",
     {" ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"},
     false, false, false, 0},
    {"viking",
     {" ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+",
      "\\p{N}"},
     false, false, false, 0},
    {"bailingmoe|bailingmoe2|llada-moe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}"
      "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     false, false, false, 0},
    {"seed-coder",
     {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false, false, 0},
    {"grok-2", {PAT_QWEN2}, false, false, false, 0},
    {"deepseek-v3|hunyuan-dense",
     {"\\p{N}{1,3}",
      "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
      "\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false, false, 0},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", PAT_GPT2_NO_TRAILING_SPACE},
     false, false, true, 0},
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", PAT_GPT2_NO_TRAILING_SPACE, "\\p{N}+", "[0-9][0-9][0-9]"},
     false, false, false, 0},
};

static bool name_in(const char *names, const char *s, size_t n)
{
    for (const char *p = names;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, s, n) == 0)
            return true;
        if (!bar)
            return false;
        p = bar + 1;
    }
}

static bool append(json_t *arr, json_t *item)
{
    return item && json_array_append_new(arr, item) == 0;
}

/* The pre_tokenizer JSON of a gpt2-model GGUF. */
static json_t *gpt2_pre(const gg_pre *p, const char *pattern)
{
    bool ok = false;
    json_t *seq;
    if (!pattern && p->hf == 1)
        return lipi_rd_bytelevel(false, true, true);
    seq = json_array();
    if (!seq)
        return NULL;
    if (pattern) {
        ok = append(seq, lipi_rd_split(pattern, "Isolated")) &&
             append(seq, lipi_rd_bytelevel(false, true, false));
    } else if (p->hf == 2) {
        ok = append(seq, json_pack("{s:s, s:s}", "type", "Punctuation", "behavior", "Contiguous")) &&
             append(seq, lipi_rd_bytelevel(false, true, true)) &&
             append(seq, json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", 0)) &&
             append(seq, lipi_rd_split("[0-9][0-9][0-9]", "Isolated"));
    } else if (p->hf == 3) {
        ok = append(seq, json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", 1)) &&
             append(seq, lipi_rd_bytelevel(false, true, true));
    } else {
        ok = true;
        for (size_t i = 0; i < 6 && p->rx[i] && ok; i++)
            ok = append(seq, lipi_rd_split(p->rx[i], "Isolated"));
        ok = ok && append(seq, lipi_rd_bytelevel(false, true, false));
    }
    if (!ok) {
        json_decref(seq);
        return NULL;
    }
    return lipi_rd_sequence("pretokenizers", seq);
}

/* ======================================================================== */
/* Building                                                                  */
/* ======================================================================== */

typedef struct {
    lipi_strref *tok;
    size_t n;
    const uint8_t *scores; /* f32 array or NULL */
    const uint8_t *types;  /* i32 array or NULL */
} gg_vocab;

static int tok_type(const gg_vocab *v, size_t i)
{
    if (!v->types)
        return LIPI_SPM_NORMAL;
    int32_t t = (int32_t)rd32(v->types + 4 * i);
    return t >= LIPI_SPM_NORMAL && t <= LIPI_SPM_BYTE ? t : LIPI_SPM_NORMAL;
}

static float tok_score(const gg_vocab *v, size_t i)
{
    float f = 0.0f;
    if (v->scores) {
        uint32_t bits = rd32(v->scores + 4 * i);
        memcpy(&f, &bits, sizeof f);
    }
    return f;
}

/* An id from the metadata, or `def` (may be -1) when absent; ids outside
 * the vocabulary are an error. */
static lipi_status gg_id(gg *g, const char *key, int64_t def, size_t n, int64_t *out)
{
    lipi_status st = LIPI_OK;
    uint64_t v = 0;
    bool found;
    TRY(gg_get_uint(g, key, &v, &found));
    if (!found) {
        *out = def >= 0 && (size_t)def < n ? def : -1;
        return LIPI_OK;
    }
    if (v >= n)
        return gg_fail(g, gg_find(g, key)->at, "%s: expected a token id below %zu, found %llu",
                       key, n, (unsigned long long)v);
    *out = (int64_t)v;
done:
    return st;
}

static lipi_status build_spm(gg *g, const gg_vocab *v, bool unigram, lipi_tokenizer **out)
{
    lipi_status st = LIPI_OK;
    lipi_rd_piece_spm *pieces = lipi_calloc(v->n, sizeof *pieces);
    lipi_rd_spm spec = {0};
    bool has_byte = false;
    const uint8_t *charsmap = NULL;

    if (!pieces)
        return lipi_error_set(g->err, LIPI_ENOMEM, g->name, 0, 0, "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        if (!v->tok[i].s) {
            st = gg_fail(g, 0, "tokenizer.ggml.tokens[%zu]: expected a token, found none", i);
            goto done;
        }
        pieces[i] = (lipi_rd_piece_spm){v->tok[i], tok_score(v, i), tok_type(v, i)};
        if (!isfinite(pieces[i].score)) {
            st = gg_fail(g, 0, "tokenizer.ggml.scores[%zu]: expected a finite score", i);
            goto done;
        }
        has_byte |= pieces[i].type == LIPI_SPM_BYTE;
    }
    spec.pieces = pieces;
    spec.n = v->n;
    spec.bpe = !unigram;
    spec.byte_fallback = unigram ? has_byte : true;
    spec.escape_whitespaces = true;
    spec.add_dummy_prefix = true;
    spec.remove_extra_whitespaces = false;
    /* llama.cpp's defaults per model, then what the file says. */
    spec.add_bos = !unigram;
    spec.add_eos = unigram;
    spec.legacy_llama = !unigram;
    TRY(gg_id(g, "tokenizer.ggml.unknown_token_id", unigram ? 2 : 0, v->n, &spec.unk_id));
    TRY(gg_id(g, "tokenizer.ggml.bos_token_id", unigram ? -1 : 1, v->n, &spec.bos_id));
    TRY(gg_id(g, "tokenizer.ggml.eos_token_id", unigram ? 1 : 2, v->n, &spec.eos_id));
    TRY(gg_get_bool(g, "tokenizer.ggml.add_bos_token", &spec.add_bos));
    TRY(gg_get_bool(g, "tokenizer.ggml.add_eos_token", &spec.add_eos));
    TRY(gg_get_bool(g, "tokenizer.ggml.add_space_prefix", &spec.add_dummy_prefix));
    TRY(gg_get_bool(g, "tokenizer.ggml.remove_extra_whitespaces",
                    &spec.remove_extra_whitespaces));
    const gg_kv *cm = gg_find(g, "tokenizer.ggml.precompiled_charsmap");
    if (cm) {
        if (cm->type != GG_ARRAY || (cm->elem != GG_U8 && cm->elem != GG_I8)) {
            st = gg_wrong_type(g, cm, "an array of u8");
            goto done;
        }
        charsmap = g->d + cm->data;
        spec.charsmap = charsmap;
        spec.charsmap_len = (size_t)cm->count;
    }
    TRY(lipi_rd_spm_build(g->name, &spec, out, g->err));
done:
    lipi_free(pieces);
    return st;
}

/* bert: llama.cpp stores WordPiece tokens as "▁word" (word start) and
 * "piece" (continuation, "##piece" in vocab.txt); "[...]" tokens are kept. */
static lipi_status build_bert(gg *g, const gg_vocab *v, const lipi_open_options *opt,
                              lipi_tokenizer **out)
{
    lipi_status st = LIPI_OK;
    lipi_strref *tok = lipi_calloc(v->n, sizeof *tok);
    lipi_buf arena = {0};
    size_t *off = lipi_calloc(v->n, sizeof *off);
    lipi_rd_bert spec = {.lowercase = true, .tokenize_chinese_chars = true};
    int64_t ids[5];
    char *names[5] = {NULL};
    static const char *const keys[5] = {
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
        "tokenizer.ggml.mask_token_id"};
    static const int64_t defs[5] = {100, 102, 0, 101, 103};

    if (!tok || !off)
        GG_OOM();
    for (size_t i = 0; i < v->n; i++) {
        const lipi_strref *t = &v->tok[i];
        off[i] = arena.len;
        if (!t->s)
            continue;
        if (t->len >= 3 && memcmp(t->s, "\xe2\x96\x81", 3) == 0) {
            if (lipi_buf_append(&arena, t->s + 3, t->len - 3) != LIPI_OK)
                GG_OOM();
        } else if (t->len >= 2 && t->s[0] == '[' && t->s[t->len - 1] == ']') {
            if (lipi_buf_append(&arena, t->s, t->len) != LIPI_OK)
                GG_OOM();
        } else if (lipi_buf_append(&arena, "##", 2) != LIPI_OK ||
                   lipi_buf_append(&arena, t->s, t->len) != LIPI_OK) {
            GG_OOM();
        }
    }
    for (size_t i = 0; i < v->n; i++) {
        size_t end = i + 1 < v->n ? off[i + 1] : arena.len;
        tok[i] = v->tok[i].s ? (lipi_strref){arena.p + off[i], end - off[i]} : (lipi_strref){0};
    }
    for (size_t k = 0; k < 5; k++)
        TRY(gg_id(g, keys[k], defs[k], v->n, &ids[k]));
    const char **slots[5] = {&spec.unk, &spec.sep, &spec.pad, &spec.cls, &spec.mask};
    for (size_t k = 0; k < 5; k++) {
        if (ids[k] < 0 || !tok[ids[k]].s || memchr(tok[ids[k]].s, '\0', tok[ids[k]].len))
            continue;
        names[k] = lipi_strndup(tok[ids[k]].s, tok[ids[k]].len);
        if (!names[k])
            GG_OOM();
        *slots[k] = names[k];
    }
    if (opt && opt->lowercase != LIPI_FLAG_AUTO)
        spec.lowercase = opt->lowercase == LIPI_FLAG_ON;
    if (opt && opt->strip_accents != LIPI_FLAG_AUTO) {
        spec.strip_accents_set = true;
        spec.strip_accents = opt->strip_accents == LIPI_FLAG_ON;
    }
    st = lipi_rd_bert_build(g->name, tok, v->n, &spec, out, g->err);
done:
    for (size_t k = 0; k < 5; k++)
        lipi_free(names[k]);
    lipi_free(tok);
    lipi_free(off);
    lipi_buf_free(&arena);
    return st;
}

static lipi_status build_gpt2(gg *g, const gg_vocab *v, const lipi_open_options *opt,
                              lipi_tokenizer **out)
{
    lipi_status st = LIPI_OK;
    lipi_strref *ms = NULL;
    size_t n_ms = 0;
    uint32_t(*merges)[2] = NULL;
    lipi_strmap map = {0};
    lipi_rd_added added = {0};
    json_t *doc = NULL;
    lipi_post_processor *post = NULL;
    lipi_decoder *dec = NULL;
    const char *pre = NULL;
    size_t pre_len = 0;
    const gg_pre *p = NULL;
    const char *pattern = opt ? opt->pattern : NULL;
    lipi_rd_model rm = {0};
    size_t d1 = 0, d2 = 0;

    if (pattern && lipi_utf8_valid_prefix(pattern, strlen(pattern)) < strlen(pattern)) {
        st = lipi_error_set(g->err, LIPI_EINVAL, g->name, 0, 0, "the split pattern is not UTF-8");
        goto done;
    }
    TRY(gg_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len));
    if (!pre) {
        /* As llama.cpp: files written before "pre" existed split the
         * default way. */
        pre = "default";
        pre_len = 7;
    }
    for (size_t i = 0; i < sizeof pre_types / sizeof pre_types[0] && !p; i++)
        if (name_in(pre_types[i].names, pre, pre_len))
            p = &pre_types[i];
    if (!p && !pattern) {
        st = lipi_error_set(g->err, LIPI_EFORMAT, g->name, 0, gg_find(g, "tokenizer.ggml.pre")->at,
                            "tokenizer.ggml.pre: expected a pre-tokenizer type lipi knows, found "
                            "\"%.*s\" (give its split regex as the pattern option)",
                            (int)(pre_len > 64 ? 64 : pre_len), pre);
        goto done;
    }

    st = lipi_strmap_build(&map, v->tok, v->n, &d1, &d2);
    if (st == LIPI_EINVAL) {
        st = gg_fail(g, 0, "tokenizer.ggml.tokens: expected distinct tokens, found ids %zu and "
                           "%zu both \"%.*s\"",
                     d1, d2, (int)(v->tok[d1].len > 64 ? 64 : v->tok[d1].len), v->tok[d1].s);
        goto done;
    }
    if (st != LIPI_OK)
        GG_OOM();
    TRY(gg_get_strings(g, "tokenizer.ggml.merges", &ms, &n_ms));
    merges = lipi_reallocarray(NULL, n_ms ? n_ms : 1, sizeof *merges);
    if (!merges)
        GG_OOM();
    for (size_t i = 0; i < n_ms; i++) {
        /* "left right", split at the first space after the first byte, as
         * llama.cpp does (so a left part may start with a space). */
        const char *sp = ms[i].len > 1 ? memchr(ms[i].s + 1, ' ', ms[i].len - 1) : NULL;
        uint32_t a, b;
        if (!sp || !lipi_strmap_find(&map, v->tok, ms[i].s, (size_t)(sp - ms[i].s), &a) ||
            !lipi_strmap_find(&map, v->tok, sp + 1, ms[i].len - (size_t)(sp - ms[i].s) - 1, &b)) {
            st = gg_fail(g, gg_find(g, "tokenizer.ggml.merges")->at,
                         "tokenizer.ggml.merges[%zu]: expected \"left right\" of two tokens, "
                         "found \"%.*s\"",
                         i, (int)(ms[i].len > 64 ? 64 : ms[i].len), ms[i].s);
            goto done;
        }
        merges[i][0] = a;
        merges[i][1] = b;
    }

    bool add_bos = p && p->add_bos, add_eos = false;
    int64_t bos = -1, eos = -1;
    TRY(gg_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos));
    TRY(gg_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos));
    TRY(gg_id(g, "tokenizer.ggml.bos_token_id", -1, v->n, &bos));
    TRY(gg_id(g, "tokenizer.ggml.eos_token_id", -1, v->n, &eos));
    for (size_t i = 0; i < v->n; i++) {
        int t = tok_type(v, i);
        if (v->tok[i].s && (t == LIPI_SPM_CONTROL || t == LIPI_SPM_USER_DEFINED ||
                            t == LIPI_SPM_UNKNOWN))
            TRY(lipi_rd_added_push(&added, (uint32_t)i, v->tok[i].s, v->tok[i].len,
                                   t != LIPI_SPM_USER_DEFINED, false));
    }

    add_bos = add_bos && bos >= 0;
    add_eos = add_eos && eos >= 0;
    if (add_bos || add_eos)
        TRY(lipi_rd_post_bos_eos(add_bos ? &v->tok[bos] : NULL, (uint32_t)bos,
                                 add_eos ? &v->tok[eos] : NULL, (uint32_t)eos, &post));
    else if (!(post = lipi_rd_post_bytelevel()))
        GG_OOM();
    doc = json_object();
    dec = lipi_rd_dec_bytelevel();
    if (!doc || !dec ||
        json_object_set_new(doc, "normalizer",
                            p && p->nfc && !pattern ? lipi_rd_type("NFC") : json_null()) != 0 ||
        json_object_set_new(doc, "pre_tokenizer", gpt2_pre(p, pattern)) != 0)
        GG_OOM();

    rm.type = LIPI_MODEL_BPE;
    lipi_model_options_default(LIPI_MODEL_BPE, &rm.opt);
    rm.opt.byte_level = true;
    rm.opt.ignore_merges = p && p->ignore_merges;
    rm.tok = v->tok;
    rm.n = v->n;
    rm.merges = (const uint32_t(*)[2])merges;
    rm.n_merges = n_ms;
    st = lipi_rd_assemble(g->name, doc, post, dec, &rm, &added, out, g->err);
    doc = NULL;
    post = NULL;
    dec = NULL;
done:
    json_decref(doc);
    lipi_post_processor_free(post);
    lipi_decoder_free(dec);
    lipi_free(ms);
    lipi_free(merges);
    lipi_strmap_free(&map);
    lipi_rd_added_free(&added);
    return st;
}

size_t lipi_rd_gguf_metadata_len(const void *data, size_t len)
{
    gg g = {.d = data, .len = len, .name = ""};
    size_t end = gg_parse(&g) == LIPI_OK ? g.end : 0;
    lipi_free(g.kv);
    return end;
}

lipi_status lipi_tokenizer_from_gguf(const void *data, size_t len, const char *name,
                                     const lipi_open_options *opt, lipi_tokenizer **out,
                                     lipi_error *err)
{
    lipi_status st = LIPI_OK;
    gg g = {.d = data, .len = len, .name = name ? name : "", .err = err};
    gg_vocab v = {0};
    const char *model;
    size_t model_len;

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no output pointer given");
    *out = NULL;
    if (!data && len)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no data given");
    TRY(gg_parse(&g));
    TRY(gg_get_str(&g, "tokenizer.ggml.model", &model, &model_len));
    if (!model) {
        st = gg_fail(&g, 0, "expected the key tokenizer.ggml.model, found no tokenizer in the "
                            "metadata");
        goto done;
    }
    TRY(gg_get_strings(&g, "tokenizer.ggml.tokens", &v.tok, &v.n));
    if (v.n == 0) {
        st = gg_fail(&g, 0, "tokenizer.ggml.tokens: expected a non-empty array of strings");
        goto done;
    }
    for (size_t i = 0; i < v.n; i++)
        if (v.tok[i].len == 0)
            v.tok[i].s = NULL;
    TRY(gg_get_array(&g, "tokenizer.ggml.scores", GG_F32, v.n, &v.scores));
    const gg_kv *tt = gg_find(&g, "tokenizer.ggml.token_type");
    TRY(gg_get_array(&g, "tokenizer.ggml.token_type",
                     tt && tt->type == GG_ARRAY && tt->elem == GG_U32 ? GG_U32 : GG_I32, v.n,
                     &v.types));

#define IS(s) (model_len == strlen(s) && memcmp(model, s, model_len) == 0)
    if (IS("gpt2"))
        st = build_gpt2(&g, &v, opt, out);
    else if (IS("llama"))
        st = build_spm(&g, &v, false, out);
    else if (IS("t5"))
        st = build_spm(&g, &v, true, out);
    else if (IS("bert"))
        st = build_bert(&g, &v, opt, out);
    else
        st = lipi_error_set(err, LIPI_EFORMAT, g.name, 0, gg_find(&g, "tokenizer.ggml.model")->at,
                            "tokenizer.ggml.model: expected gpt2, llama, bert or t5, found "
                            "\"%.*s\"",
                            (int)(model_len > 64 ? 64 : model_len), model);
#undef IS
done:
    lipi_free(v.tok);
    lipi_free(g.kv);
    return st;
}

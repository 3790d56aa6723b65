/* Request bodies of `lipi serve`: JSON in, checked field by field, and
 * response bodies out, in the shapes OpenAI's embeddings API and Hugging
 * Face's text-embeddings-inference (TEI) give them. */
#include "serve/serve.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/base_json.h"

static const char *const route_paths[LIPI_ROUTE_COUNT] = {
    "/v1/embeddings", "/embed", "/tokenize", "/decode", "/classify",
    "/rerank",        "/health", "/info",    "/metrics", "other",
};

const char *lipi_serve_route_path(lipi_serve_route r)
{
    return r < LIPI_ROUTE_COUNT ? route_paths[r] : "other";
}

lipi_serve_route lipi_serve_route_of(const char *path)
{
    /* OpenAI clients built with base_url ".../v1" and without both ask here. */
    if (strcmp(path, "/embeddings") == 0)
        return LIPI_ROUTE_OPENAI;
    for (int r = 0; r < LIPI_ROUTE_OTHER; r++)
        if (strcmp(path, route_paths[r]) == 0)
            return (lipi_serve_route)r;
    return LIPI_ROUTE_OTHER;
}

int lipi_serve_fail(lipi_serve_error *e, int status, const char *param, const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    e->type = status == 401   ? "authentication_error"
              : status == 429 ? "rate_limit_error"
              : status >= 500 ? "server_error"
                              : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* An optional boolean member; *out keeps its default when absent. */
static int get_bool(json_t *root, const char *key, bool *out, lipi_serve_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return lipi_serve_fail(e, 400, key, "'%s' must be a boolean, not %s", key, type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* Texts of a member that is a string or an array of strings. */
static int get_texts(lipi_serve_request *r, json_t *v, const char *key, const lipi_serve_limits *lim,
                     lipi_serve_error *e)
{
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v))
        return lipi_serve_fail(e, 400, key, "'%s' must be a string or an array of strings, not %s",
                               key, type_name(v));
    if (n == 0)
        return lipi_serve_fail(e, 400, key, "'%s' must not be empty", key);
    if (lim->max_inputs && n > lim->max_inputs)
        return lipi_serve_fail(e, 413, key, "'%s' has %zu inputs, more than the %zu allowed", key,
                               n, lim->max_inputs);
    if (!(r->texts = calloc(n, sizeof *r->texts)) || !(r->lens = calloc(n, sizeof *r->lens)))
        return lipi_serve_fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s))
            return lipi_serve_fail(e, 400, key, "'%s'[%zu] must be a string, not %s", key, i,
                                   type_name(s));
        r->texts[i] = json_string_value(s);
        r->lens[i] = json_string_length(s);
    }
    r->n = n;
    return 0;
}

/* Id sequences: an array of integers (one sequence) or of such arrays. */
static int get_ids(lipi_serve_request *r, json_t *v, const char *key, const lipi_serve_limits *lim,
                   lipi_serve_error *e)
{
    bool nested = json_array_size(v) && json_is_array(json_array_get(v, 0));
    size_t n = nested ? json_array_size(v) : 1, total = 0;
    if (lim->max_inputs && n > lim->max_inputs)
        return lipi_serve_fail(e, 413, key, "'%s' has %zu inputs, more than the %zu allowed", key,
                               n, lim->max_inputs);
    for (size_t i = 0; i < n; i++) {
        json_t *a = nested ? json_array_get(v, i) : v;
        if (!json_is_array(a))
            return lipi_serve_fail(e, 400, key, "'%s'[%zu] must be an array of token ids, not %s",
                                   key, i, type_name(a));
        if (json_array_size(a) == 0)
            return lipi_serve_fail(e, 400, key, "'%s'[%zu] must not be empty", key, i);
        total += json_array_size(a);
    }
    if (!(r->ids = calloc(n, sizeof *r->ids)) || !(r->id_lens = calloc(n, sizeof *r->id_lens)) ||
        !(r->id_store = calloc(total, sizeof *r->id_store)))
        return lipi_serve_fail(e, 500, NULL, "out of memory");
    uint32_t *at = r->id_store;
    for (size_t i = 0; i < n; i++) {
        json_t *a = nested ? json_array_get(v, i) : v;
        r->ids[i] = at;
        r->id_lens[i] = json_array_size(a);
        for (size_t j = 0; j < r->id_lens[i]; j++) {
            json_t *x = json_array_get(a, j);
            json_int_t id = json_is_integer(x) ? json_integer_value(x) : -1;
            if (id < 0 || id > (json_int_t)UINT32_MAX) {
                char where[48];
                if (nested)
                    snprintf(where, sizeof where, "[%zu][%zu]", i, j);
                else
                    snprintf(where, sizeof where, "[%zu]", j);
                return lipi_serve_fail(e, 400, key,
                                       "'%s'%s: expected a token id (an integer from 0 to %u), "
                                       "found %s",
                                       key, where, UINT32_MAX,
                                       json_is_integer(x) ? "a negative or larger one"
                                                          : type_name(x));
            }
            *at++ = (uint32_t)id;
        }
    }
    r->n = n;
    return 0;
}

static int parse_openai(lipi_serve_request *r, json_t *root, const lipi_serve_limits *lim,
                        lipi_serve_error *e)
{
    json_t *in = json_object_get(root, "input");
    if (!in)
        return lipi_serve_fail(e, 400, "input", "'input' is required");
    /* Token input: [1, 2] or [[1, 2], [3]] (what tiktoken-minded clients
     * such as LangChain's OpenAIEmbeddings send). */
    json_t *first = json_is_array(in) ? json_array_get(in, 0) : NULL;
    int rc = first && (json_is_integer(first) || json_is_array(first))
                 ? get_ids(r, in, "input", lim, e)
                 : get_texts(r, in, "input", lim, e);
    if (rc)
        return rc;
    json_t *m = json_object_get(root, "model");
    if (m && !json_is_string(m) && !json_is_null(m))
        return lipi_serve_fail(e, 400, "model", "'model' must be a string, not %s", type_name(m));
    json_t *f = json_object_get(root, "encoding_format");
    if (f && !json_is_null(f)) {
        const char *s = json_is_string(f) ? json_string_value(f) : "";
        if (strcmp(s, "base64") == 0)
            r->base64 = true;
        else if (strcmp(s, "float") != 0)
            return lipi_serve_fail(e, 400, "encoding_format",
                                   "'encoding_format' must be \"float\" or \"base64\"");
    }
    json_t *d = json_object_get(root, "dimensions");
    if (d && !json_is_null(d)) {
        json_int_t k = json_is_integer(d) ? json_integer_value(d) : 0;
        if (k < 1 || (size_t)k > lim->dim)
            return lipi_serve_fail(e, 400, "dimensions",
                                   "'dimensions' must be an integer from 1 to %zu", lim->dim);
        r->dimensions = (size_t)k;
    }
    json_t *u = json_object_get(root, "user");
    if (u && !json_is_string(u) && !json_is_null(u))
        return lipi_serve_fail(e, 400, "user", "'user' must be a string, not %s", type_name(u));
    r->truncate = true;
    return get_bool(root, "truncate", &r->truncate, e);
}

static int parse_tei(lipi_serve_request *r, json_t *root, const lipi_serve_limits *lim,
                     lipi_serve_error *e)
{
    int rc = 0;
    if (r->route == LIPI_ROUTE_DECODE) {
        json_t *ids = json_object_get(root, "ids");
        if (!ids)
            return lipi_serve_fail(e, 400, "ids", "'ids' is required");
        if (!json_is_array(ids) || json_array_size(ids) == 0)
            return lipi_serve_fail(e, 400, "ids", "'ids' must be a non-empty array of token ids");
        r->skip_special = true;
        if ((rc = get_ids(r, ids, "ids", lim, e)))
            return rc;
        return get_bool(root, "skip_special_tokens", &r->skip_special, e);
    }
    const char *key = r->route == LIPI_ROUTE_RERANK ? "texts" : "inputs";
    json_t *in = json_object_get(root, key);
    if (!in)
        return lipi_serve_fail(e, 400, key, "'%s' is required", key);
    if (r->route == LIPI_ROUTE_RERANK && !json_is_array(in))
        return lipi_serve_fail(e, 400, key, "'texts' must be an array of strings, not %s",
                               type_name(in));
    if ((rc = get_texts(r, in, key, lim, e)))
        return rc;
    if (r->route == LIPI_ROUTE_RERANK) {
        json_t *q = json_object_get(root, "query");
        if (!q)
            return lipi_serve_fail(e, 400, "query", "'query' is required");
        if (!json_is_string(q))
            return lipi_serve_fail(e, 400, "query", "'query' must be a string, not %s",
                                   type_name(q));
        r->query = json_string_value(q);
        r->query_len = json_string_length(q);
    }
    if (r->route == LIPI_ROUTE_EMBED) {
        bool norm = true;
        json_t *nv = json_object_get(root, "normalize");
        if ((rc = get_bool(root, "normalize", &norm, e)))
            return rc;
        r->normalize = nv && !json_is_null(nv) ? norm : -1;
    }
    r->add_special = true;
    if ((rc = get_bool(root, "truncate", &r->truncate, e)) ||
        (rc = get_bool(root, "add_special_tokens", &r->add_special, e)) ||
        (rc = get_bool(root, "raw_scores", &r->raw_scores, e)) ||
        (rc = get_bool(root, "return_text", &r->return_text, e)))
        return rc;
    return 0;
}

int lipi_serve_parse(lipi_serve_route route, const char *body, size_t len,
                     const lipi_serve_limits *lim, lipi_serve_request *out, lipi_serve_error *e)
{
    memset(out, 0, sizeof *out);
    out->route = route;
    out->normalize = -1;
    size_t ok = lipi_utf8_valid_prefix(body, len);
    if (ok < len) {
        lipi_serve_request_free(out);
        return lipi_serve_fail(e, 400, NULL, "the body is not valid UTF-8 (byte %zu)", ok);
    }
    json_error_t je;
    json_t *root = lipi_json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        lipi_serve_request_free(out);
        if (json_error_code(&je) == json_error_out_of_memory)
            return lipi_serve_fail(e, 500, NULL, "out of memory");
        return lipi_serve_fail(e, 400, NULL, "the body is not JSON: %s at byte %d", je.text,
                               je.position);
    }
    out->root = root;
    int rc = !json_is_object(root)
                 ? lipi_serve_fail(e, 400, NULL, "the body must be a JSON object, not %s",
                                   type_name(root))
             : route == LIPI_ROUTE_OPENAI ? parse_openai(out, root, lim, e)
                                          : parse_tei(out, root, lim, e);
    if (rc)
        lipi_serve_request_free(out);
    return rc;
}

void lipi_serve_request_free(lipi_serve_request *r)
{
    if (!r)
        return;
    json_decref(r->root);
    free(r->texts);
    free(r->lens);
    free(r->ids);
    free(r->id_lens);
    free(r->id_store);
    memset(r, 0, sizeof *r);
    r->normalize = -1;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */
/* ------------------------------------------------------------------------ */

/* A growing string; `bad` once an append failed (the result is then NULL). */
typedef struct {
    char *p;
    size_t len, cap;
    bool bad;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->bad = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        b->bad = true;
    else
        sb_add(b, tmp, (size_t)n);
}

/* A JSON string literal of s[0..n) (valid UTF-8 or not: bytes that are not
 * are written as \u00XX of U+FFFD's place, so the output stays JSON). */
static void sb_string(sbuf *b, const char *s, size_t n)
{
    sb_puts(b, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = lipi_utf8_valid_prefix(s + i, n - i);
        if (k == 0) {
            sb_puts(b, "\\ufffd");
            i++;
            continue;
        }
        size_t run = 0;
        /* Copy plain bytes in runs; escape what JSON needs escaped. */
        while (run < k) {
            c = (unsigned char)s[i + run];
            if (c < 0x20 || c == '"' || c == '\\')
                break;
            run++;
        }
        sb_add(b, s + i, run);
        i += run;
        if (run < k) {
            c = (unsigned char)s[i];
            if (c == '"' || c == '\\') {
                char esc[2] = {'\\', (char)c};
                sb_add(b, esc, 2);
            } else {
                sb_printf(b, "\\u%04x", c);
            }
            i++;
        }
    }
    sb_puts(b, "\"");
}

static char *sb_done(sbuf *b)
{
    if (b->bad || !b->p) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

static void sb_floats(sbuf *b, const float *x, size_t n)
{
    sb_puts(b, "[");
    for (size_t j = 0; j < n; j++)
        /* %.9g gives back the same float32 when read again. */
        sb_printf(b, j ? ",%.9g" : "%.9g", (double)x[j]);
    sb_puts(b, "]");
}

char *lipi_serve_error_json(lipi_serve_route route, const lipi_serve_error *e)
{
    sbuf b = {0};
    if (route == LIPI_ROUTE_OPENAI) {
        sb_puts(&b, "{\"error\":{\"message\":");
        sb_string(&b, e->msg, strlen(e->msg));
        sb_puts(&b, ",\"type\":");
        sb_string(&b, e->type, strlen(e->type));
        sb_puts(&b, ",\"param\":");
        if (e->param[0])
            sb_string(&b, e->param, strlen(e->param));
        else
            sb_puts(&b, "null");
        sb_puts(&b, ",\"code\":null}}");
    } else {
        /* TEI's error_type values. */
        const char *t = e->status == 413 || e->status == 422 || e->status == 400 ? "Validation"
                        : e->status == 429                                     ? "Overloaded"
                        : e->status == 401                                     ? "Unauthorized"
                                                                               : "Backend";
        sb_puts(&b, "{\"error\":");
        sb_string(&b, e->msg, strlen(e->msg));
        sb_puts(&b, ",\"error_type\":\"");
        sb_puts(&b, t);
        sb_puts(&b, "\"}");
    }
    return sb_done(&b);
}

static void sb_base64(sbuf *b, const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        q[0] = tab[v >> 18 & 63];
        q[1] = tab[v >> 12 & 63];
        q[2] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        q[3] = i + 2 < n ? tab[v & 63] : '=';
        sb_add(b, q, 4);
    }
}

char *lipi_serve_openai_json(const float *vecs, size_t n, size_t dim, bool base64,
                             const char *model, size_t tokens)
{
    sbuf b = {0};
    sb_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < n; i++) {
        sb_puts(&b, i ? ",{\"object\":\"embedding\",\"index\":" : "{\"object\":\"embedding\",\"index\":");
        sb_printf(&b, "%zu,\"embedding\":", i);
        if (base64) {
            /* float32 little-endian, as OpenAI's base64 (x86 and ARM are). */
            unsigned char *p = malloc(dim * 4 + 1);
            if (!p) {
                b.bad = true;
                break;
            }
            for (size_t j = 0; j < dim; j++) {
                uint32_t u;
                memcpy(&u, vecs + i * dim + j, 4);
                for (int k = 0; k < 4; k++)
                    p[j * 4 + k] = (unsigned char)(u >> (8 * k));
            }
            sb_puts(&b, "\"");
            sb_base64(&b, p, dim * 4);
            sb_puts(&b, "\"");
            free(p);
        } else {
            sb_floats(&b, vecs + i * dim, dim);
        }
        sb_puts(&b, "}");
    }
    sb_puts(&b, "],\"model\":");
    sb_string(&b, model, strlen(model));
    sb_printf(&b, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}", tokens, tokens);
    return sb_done(&b);
}

char *lipi_serve_vectors_json(const float *vecs, size_t n, size_t dim)
{
    sbuf b = {0};
    sb_puts(&b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_puts(&b, ",");
        sb_floats(&b, vecs + i * dim, dim);
    }
    sb_puts(&b, "]");
    return sb_done(&b);
}

/* Code points in s[0..n): byte offsets become the character offsets
 * Python's tokenizers give. */
static size_t chars_in(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

lipi_status lipi_serve_tokenize_json(lipi_session *s, const lipi_encode_options *opt,
                                     const char *const *texts, const size_t *lens, size_t n,
                                     char **out, size_t *tokens, lipi_error *err)
{
    sbuf b = {0};
    lipi_status st = LIPI_OK;
    lipi_encoding enc = {0};
    size_t cap = 0;
    *out = NULL;
    *tokens = 0;
    sb_puts(&b, "[");
    for (size_t i = 0; i < n && st == LIPI_OK; i++) {
        enc.cap = cap;
        st = lipi_encode(s, texts[i], lens[i], opt, &enc, err);
        if (st == LIPI_OK && enc.len > cap) {
            free(enc.ids);
            free(enc.offsets);
            free(enc.special_mask);
            free(enc.tokens);
            free(enc.token_lens);
            cap = enc.len;
            enc = (lipi_encoding){.ids = malloc(cap * sizeof *enc.ids),
                                  .offsets = malloc(cap * sizeof *enc.offsets),
                                  .special_mask = malloc(cap),
                                  .tokens = malloc(cap * sizeof *enc.tokens),
                                  .token_lens = malloc(cap * sizeof *enc.token_lens),
                                  .cap = cap};
            if (!enc.ids || !enc.offsets || !enc.special_mask || !enc.tokens || !enc.token_lens) {
                st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                break;
            }
            st = lipi_encode(s, texts[i], lens[i], opt, &enc, err);
        }
        if (st != LIPI_OK) {
            if (err)
                err->line = i + 1;
            break;
        }
        *tokens += enc.len;
        sb_puts(&b, i ? ",[" : "[");
        for (size_t k = 0; k < enc.len; k++) {
            sb_printf(&b, k ? ",{\"id\":%u,\"text\":" : "{\"id\":%u,\"text\":", enc.ids[k]);
            sb_string(&b, enc.tokens[k], enc.token_lens[k]);
            sb_printf(&b, ",\"special\":%s,", enc.special_mask[k] ? "true" : "false");
            if (enc.special_mask[k])
                sb_puts(&b, "\"start\":null,\"stop\":null}");
            else
                sb_printf(&b, "\"start\":%zu,\"stop\":%zu}",
                          chars_in(texts[i], enc.offsets[k].start),
                          chars_in(texts[i], enc.offsets[k].end));
        }
        sb_puts(&b, "]");
    }
    sb_puts(&b, "]");
    free(enc.ids);
    free(enc.offsets);
    free(enc.special_mask);
    free(enc.tokens);
    free(enc.token_lens);
    if (st == LIPI_OK && !(*out = sb_done(&b)))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (st != LIPI_OK)
        free(b.p);
    return st;
}

lipi_status lipi_serve_decode_json(lipi_session *s, uint32_t *const *ids, const size_t *lens,
                                   size_t n, bool skip_special, char **out, lipi_error *err)
{
    sbuf b = {0};
    lipi_status st = LIPI_OK;
    char *text = NULL;
    size_t cap = 0;
    *out = NULL;
    sb_puts(&b, "[");
    for (size_t i = 0; i < n && st == LIPI_OK; i++) {
        size_t len = 0;
        st = lipi_decode(s, ids[i], lens[i], skip_special, text, cap, &len, err);
        if (st == LIPI_OK && len >= cap) {
            char *p = realloc(text, len + 1);
            if (!p) {
                st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
                break;
            }
            text = p;
            cap = len + 1;
            st = lipi_decode(s, ids[i], lens[i], skip_special, text, cap, &len, err);
        }
        if (st != LIPI_OK) {
            if (err)
                err->line = i + 1;
            break;
        }
        if (i)
            sb_puts(&b, ",");
        sb_string(&b, text, len);
    }
    sb_puts(&b, "]");
    free(text);
    if (st == LIPI_OK && !(*out = sb_done(&b)))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (st != LIPI_OK)
        free(b.p);
    return st;
}

char *lipi_serve_classify_json(const float *probs, size_t n, size_t k,
                               const char *const *labels)
{
    sbuf b = {0};
    size_t *order = malloc((k ? k : 1) * sizeof *order);
    if (!order)
        return NULL;
    sb_puts(&b, "[");
    for (size_t i = 0; i < n; i++) {
        if (lipi_scores_order(probs + i * k, k, order, NULL) != LIPI_OK) {
            b.bad = true;
            break;
        }
        sb_puts(&b, i ? ",[" : "[");
        for (size_t j = 0; j < k; j++) {
            sb_puts(&b, j ? ",{\"label\":" : "{\"label\":");
            sb_string(&b, labels[order[j]], strlen(labels[order[j]]));
            sb_printf(&b, ",\"score\":%.9g}", (double)probs[i * k + order[j]]);
        }
        sb_puts(&b, "]");
    }
    sb_puts(&b, "]");
    free(order);
    return sb_done(&b);
}

char *lipi_serve_rerank_json(const float *scores, size_t n, const char *const *texts,
                             const size_t *lens, bool return_text)
{
    sbuf b = {0};
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order || lipi_scores_order(scores, n, order, NULL) != LIPI_OK) {
        free(order);
        return NULL;
    }
    sb_puts(&b, "[");
    for (size_t j = 0; j < n; j++) {
        size_t i = order[j];
        sb_printf(&b, j ? ",{\"index\":%zu,\"score\":%.9g" : "{\"index\":%zu,\"score\":%.9g", i,
                  (double)scores[i]);
        if (return_text) {
            sb_puts(&b, ",\"text\":");
            sb_string(&b, texts[i], lens[i]);
        }
        sb_puts(&b, "}");
    }
    sb_puts(&b, "]");
    free(order);
    return sb_done(&b);
}

bool lipi_serve_equal_ct(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Every byte of a is compared (against b cycled), whatever differs. */
    volatile unsigned char diff = alen != blen;
    for (size_t i = 0; i < alen; i++)
        diff |= (unsigned char)a[i] ^ (unsigned char)(blen ? b[i % blen] : 0);
    return diff == 0;
}

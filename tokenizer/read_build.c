/* What the readers of other formats share: the GPT-2 byte alphabet, small
 * Hugging Face JSON builders, and the assembly of a tokenizer from a JSON
 * document plus a model built from arrays (see read_impl.h). */
#include "tokenizer/read_impl.h"

#include <math.h>
#include <string.h>

/* ======================================================================== */
/* The GPT-2 byte alphabet                                                   */
/* ======================================================================== */

static bool byte_is_printable(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

void lipi_rd_bytemap_init(lipi_rd_bytemap *m)
{
    unsigned next = 256;
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = byte_is_printable(b) ? b : next++;
        char buf[4];
        size_t n = lipi_utf8_encode(cp, buf);
        m->cp[b] = (uint16_t)cp;
        m->len[b] = (uint8_t)n;
        memcpy(m->utf8[b], buf, n);
    }
}

lipi_status lipi_rd_bytes_to_alphabet(const lipi_rd_bytemap *m, const uint8_t *s, size_t n,
                                      lipi_buf *out)
{
    lipi_status st = LIPI_OK;
    if (n > SIZE_MAX / 2)
        return LIPI_ENOMEM;
    TRY(lipi_buf_reserve(out, 2 * n));
    for (size_t i = 0; i < n; i++) {
        memcpy(out->p + out->len, m->utf8[s[i]], m->len[s[i]]);
        out->len += m->len[s[i]];
    }
    out->p[out->len] = '\0';
done:
    return st;
}

/* ======================================================================== */
/* JSON pieces                                                               */
/* ======================================================================== */

json_t *lipi_rd_str(const char *s, size_t len)
{
    return json_stringn(s, len);
}

json_t *lipi_rd_type(const char *type)
{
    return json_pack("{s:s}", "type", type);
}

json_t *lipi_rd_sequence(const char *key, json_t *arr)
{
    return json_pack("{s:s, s:o}", "type", "Sequence", key, arr);
}

json_t *lipi_rd_replace(bool regex, const char *pattern, const char *content)
{
    return json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern",
                     regex ? "Regex" : "String", pattern, "content", content);
}

json_t *lipi_rd_split(const char *regex, const char *behavior)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", regex,
                     "behavior", behavior, "invert", 0);
}

json_t *lipi_rd_bytelevel(bool add_prefix_space, bool trim_offsets, bool use_regex)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                     add_prefix_space, "trim_offsets", trim_offsets, "use_regex", use_regex);
}

/* Appends the template pieces to `arr` and the special tokens they use to
 * `specials` ({"name": {"id", "ids", "tokens"}}). false on allocation
 * failure. */
static bool template_fill(json_t *arr, json_t *specials, const lipi_rd_piece *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_t *item;
        if (p[i].special) {
            item = json_pack("{s:{s:s, s:I}}", "SpecialToken", "id", p[i].special, "type_id",
                             (json_int_t)p[i].type_id);
            if (!json_object_get(specials, p[i].special)) {
                json_t *sp = json_pack("{s:s, s:[I], s:[s]}", "id", p[i].special, "ids",
                                       (json_int_t)p[i].special_id, "tokens", p[i].special);
                if (json_object_set_new(specials, p[i].special, sp) != 0) {
                    json_decref(item);
                    return false;
                }
            }
        } else {
            item = json_pack("{s:{s:s, s:I}}", "Sequence", "id", p[i].seq ? "B" : "A", "type_id",
                             (json_int_t)p[i].type_id);
        }
        if (json_array_append_new(arr, item) != 0)
            return false;
    }
    return true;
}

json_t *lipi_rd_template(const lipi_rd_piece *single, size_t n_single,
                         const lipi_rd_piece *pair, size_t n_pair)
{
    json_t *s = json_array(), *p = json_array(), *sp = json_object();
    json_t *out = NULL;
    if (s && p && sp && template_fill(s, sp, single, n_single) &&
        template_fill(p, sp, pair, n_pair)) {
        out = json_pack("{s:s, s:O, s:O, s:O}", "type", "TemplateProcessing", "single", s, "pair",
                        p, "special_tokens", sp);
    }
    json_decref(s);
    json_decref(p);
    json_decref(sp);
    return out;
}

lipi_status lipi_rd_added_push(lipi_rd_added *l, uint32_t id, const char *s, size_t len,
                               bool special, bool normalized)
{
    lipi_status st = LIPI_OK;
    char *c = lipi_strndup(s, len);
    if (!c)
        return LIPI_ENOMEM;
    st = lipi_grow((void **)&l->a, &l->cap, l->n + 1, sizeof *l->a);
    if (st != LIPI_OK) {
        lipi_free(c);
        return st;
    }
    l->a[l->n++] = (lipi_added_token){.content = c, .len = len, .id = id, .special = special,
                                      .normalized = normalized};
    return LIPI_OK;
}

void lipi_rd_added_free(lipi_rd_added *l)
{
    for (size_t i = 0; i < l->n; i++)
        lipi_free(l->a[i].content);
    lipi_free(l->a);
    memset(l, 0, sizeof *l);
}

/* ======================================================================== */
/* Assembly                                                                  */
/* ======================================================================== */

static lipi_status oom(const char *name, lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, name, 0, 0, "out of memory");
}

static int clip(size_t len)
{
    return (int)(len > 64 ? 64 : len);
}

/* Builds the lipi_model from the caller's arrays. */
static lipi_status build_model(const char *name, const lipi_rd_model *rm, lipi_model *m,
                               lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t d1 = 0, d2 = 0;

    m->type = rm->type;
    m->opt = rm->opt;
    if (m->opt.unk_id >= 0 && (uint64_t)m->opt.unk_id >= rm->n)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "unknown-token id %lld is not one of the %zu token ids",
                              (long long)m->opt.unk_id, rm->n);
    st = lipi_vocab_build(&m->vocab, rm->tok, rm->n, &d1, &d2);
    if (st == LIPI_EINVAL)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "expected distinct tokens, found ids %zu and %zu both \"%.*s\"", d1,
                              d2, clip(rm->tok[d1].len), rm->tok[d1].s);
    if (st != LIPI_OK)
        return oom(name, err);

    if (rm->type == LIPI_MODEL_UNIGRAM) {
        m->scores = lipi_reallocarray(NULL, rm->n ? rm->n : 1, sizeof *m->scores);
        if (!m->scores)
            return oom(name, err);
        for (size_t i = 0; i < rm->n; i++) {
            if (!isfinite(rm->scores[i]))
                return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                      "expected a finite score for token %zu, found %g", i,
                                      rm->scores[i]);
            m->scores[i] = rm->scores[i];
        }
    }

    if (rm->type == LIPI_MODEL_BPE) {
        size_t bad = 0;
        m->prefix_null = rm->prefix_null;
        m->suffix_null = rm->suffix_null;
        st = lipi_merges_build(m, rm->merges, rm->n_merges, &bad);
        if (st == LIPI_EINVAL) {
            uint32_t a = rm->merges[bad][0], b = rm->merges[bad][1];
            if (a >= rm->n || b >= rm->n || !rm->tok[a].s || !rm->tok[b].s)
                return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                      "merge %zu: expected two token ids, found %u and %u", bad,
                                      a, b);
            return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                  "merge %zu: expected \"%.*s\" + \"%.*s\" to be a token, "
                                  "found no such token",
                                  bad, clip(rm->tok[a].len), rm->tok[a].s, clip(rm->tok[b].len),
                                  rm->tok[b].s);
        }
        if (st != LIPI_OK)
            return oom(name, err);
    }

    if (rm->unk_token) {
        uint32_t id;
        m->unk_token = lipi_strndup(rm->unk_token, rm->unk_len);
        if (!m->unk_token)
            return oom(name, err);
        m->unk_len = rm->unk_len;
        if (m->opt.unk_id < 0 && lipi_vocab_find(&m->vocab, rm->unk_token, rm->unk_len, &id))
            m->opt.unk_id = id;
    }
    return LIPI_OK;
}

lipi_status lipi_rd_assemble(const char *name, json_t *doc, const lipi_rd_model *rm,
                             lipi_rd_added *added, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *text = NULL;
    size_t len = 0;
    lipi_tokenizer *t = NULL;
    lipi_model m = {0};

    m.opt.unk_id = -1;
    *out = NULL;
    /* The loader needs some model; the real one replaces it below. */
    if (!doc || json_object_set_new(doc, "version", json_string("1.0")) != 0 ||
        json_object_set_new(doc, "model",
                            json_pack("{s:s, s:{}, s:s}", "type", "WordLevel", "vocab",
                                      "unk_token", "<unk>")) != 0) {
        st = oom(name, err);
        goto done;
    }
    /* Dumped into a lipi buffer, so that lipi_free owns it whatever
     * allocator jansson was given. */
    len = json_dumpb(doc, NULL, 0, JSON_COMPACT);
    text = len ? lipi_malloc(len) : NULL;
    if (!text || json_dumpb(doc, text, len, JSON_COMPACT) != len) {
        st = oom(name, err);
        goto done;
    }
    TRY(lipi_tokenizer_load_json(text, len, name, &t, err));
    TRY(build_model(name, rm, &m, err));
    st = lipi_tokenizer_install_model(t, &m, err);
    if (st == LIPI_OK && added) {
        /* set_added steals the array whatever it returns. */
        st = lipi_tokenizer_set_added(t, added->a, added->n, err);
        memset(added, 0, sizeof *added);
    }
    if (st != LIPI_OK) {
        if (st == LIPI_EINVAL)
            st = LIPI_EFORMAT;
        if (err) {
            err->code = st;
            snprintf(err->path, sizeof err->path, "%s", name ? name : "");
        }
        goto done;
    }
    *out = t;
    t = NULL;
done:
    if (added)
        lipi_rd_added_free(added);
    lipi_model_clear(&m);
    lipi_tokenizer_free(t);
    lipi_free(text);
    json_decref(doc);
    return st;
}

/* ======================================================================== */
/* Base64 (RFC 4648 standard alphabet, padded)                               */
/* ======================================================================== */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

lipi_status lipi_rd_base64_encode(const uint8_t *s, size_t n, lipi_buf *out)
{
    lipi_status st = LIPI_OK;
    if (n / 3 >= SIZE_MAX / 4 - 1)
        return LIPI_ENOMEM;
    TRY(lipi_buf_reserve(out, (n / 3 + 1) * 4));
    char *o = out->p + out->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    out->len = (size_t)(o - out->p);
    out->p[out->len] = '\0';
done:
    return st;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

bool lipi_rd_base64_decode(const char *s, size_t n, uint8_t *out, size_t *out_len, size_t *bad)
{
    size_t o = 0;
    if (n % 4 != 0) {
        *bad = n;
        return false;
    }
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        size_t pad = 0;
        for (size_t k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)s[i + k];
            /* '=' only as the last one or two characters of the text. */
            if (c == '=' && i + 4 == n && (k == 3 || (k == 2 && s[i + 3] == '='))) {
                v[k] = 0;
                pad++;
                continue;
            }
            v[k] = b64_value(c);
            if (v[k] < 0 || pad) {
                *bad = i + k;
                return false;
            }
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        /* Bits under the padding must be zero, so each text has one decoding. */
        if ((pad == 1 && (x & 0xff)) || (pad == 2 && (x & 0xffff))) {
            *bad = i + 3 - pad;
            return false;
        }
        out[o++] = (uint8_t)(x >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(x >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)x;
    }
    *out_len = o;
    return true;
}

/* The "normalizer" section of tokenizer.json: Hugging Face's normalizer
 * objects to and from lipi's step tree (normalize_impl.h). Writing gives
 * back exactly what was read, so to_json(from_json(x)) equals x. */
#include <stdio.h>
#include <string.h>

#include "tokenizer/base_json.h"
#include "tokenizer/normalize_impl.h"

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

static lipi_status expect(lipi_error *err, const char *jpath, const char *field,
                          const char *what, const json_t *found)
{
    return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0, "%s%s%s: expected %s, found %s", jpath,
                          field ? "." : "", field ? field : "", what,
                          found ? lipi_json_kind(found) : "nothing");
}

static lipi_status get_bool(const json_t *j, const char *jpath, const char *field, bool *out,
                            lipi_error *err)
{
    const json_t *v = json_object_get(j, field);
    if (!json_is_boolean(v))
        return expect(err, jpath, field, "true or false", v);
    *out = json_is_true(v);
    return LIPI_OK;
}

static lipi_status get_string(const json_t *v, const char *jpath, const char *field,
                              char **out, size_t *len, lipi_error *err)
{
    if (!json_is_string(v))
        return expect(err, jpath, field, "a string", v);
    *len = json_string_length(v);
    *out = lipi_strndup(json_string_value(v), *len);
    return *out ? LIPI_OK : LIPI_ENOMEM;
}

/* Standard base64; the final padding may be missing. */
static lipi_status b64_decode(const char *s, size_t n, uint8_t **out, size_t *len,
                              const char *jpath, lipi_error *err)
{
    size_t bad;
    uint8_t *b = lipi_malloc(n / 4 * 3 + 3);
    if (!b)
        return LIPI_ENOMEM;
    if (!lipi_base64_decode(s, n, true, b, len, &bad)) {
        lipi_free(b);
        if (bad == n)
            return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                                  "%s.precompiled_charsmap: expected base64, found a bad length",
                                  jpath);
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                              "%s.precompiled_charsmap: expected base64, found '%c' at %zu",
                              jpath, s[bad], bad);
    }
    *out = b;
    return LIPI_OK;
}

static lipi_status parse_step(const json_t *j, const char *jpath, lipi_ns_step *s,
                              lipi_error *err);

static lipi_status parse_sequence(const json_t *j, const char *jpath, lipi_ns_step *s,
                                  lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const json_t *arr = json_object_get(j, "normalizers");
    if (!json_is_array(arr))
        return expect(err, jpath, "normalizers", "an array", arr);
    size_t n = json_array_size(arr);
    s->children = lipi_calloc(n ? n : 1, sizeof *s->children);
    if (!s->children)
        return LIPI_ENOMEM;
    char path[512];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s.normalizers[%zu]", jpath, i);
        TRY(parse_step(json_array_get(arr, i), path, &s->children[i], err));
        s->n_children = i + 1;
    }
done:
    return st;
}

static lipi_status parse_replace(const json_t *j, const char *jpath, lipi_ns_step *s,
                                 lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const json_t *pat = json_object_get(j, "pattern");
    const json_t *str = json_object_get(pat, "String");
    const json_t *re = json_object_get(pat, "Regex");
    if (!json_is_object(pat) || json_object_size(pat) != 1 || (!str && !re))
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                              "%s.pattern: expected an object with \"String\" or \"Regex\", "
                              "found %s",
                              jpath, pat ? lipi_json_kind(pat) : "nothing");
    char path[512];
    snprintf(path, sizeof path, "%s.pattern", jpath);
    s->is_regex = re != NULL;
    TRY(get_string(re ? re : str, path, re ? "Regex" : "String", &s->pattern, &s->pattern_len,
                   err));
    TRY(get_string(json_object_get(j, "content"), jpath, "content", &s->content,
                   &s->content_len, err));
    TRY(lipi_ns_compile_replace(s, path, err));
done:
    return st;
}

static lipi_status parse_precompiled(const json_t *j, const char *jpath, lipi_ns_step *s,
                                     lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t n = 0;
    TRY(get_string(json_object_get(j, "precompiled_charsmap"), jpath, "precompiled_charsmap",
                   &s->charsmap_b64, &n, err));
    TRY(b64_decode(s->charsmap_b64, n, &s->charsmap, &s->charsmap_len, jpath, err));
    TRY(lipi_ns_check_charsmap(s->charsmap, s->charsmap_len, jpath, err));
    const json_t *lm = json_object_get(j, "lipi_longest_match");
    if (lm && !json_is_boolean(lm))
        TRY(expect(err, jpath, "lipi_longest_match", "true or false", lm));
    s->longest_match = json_is_true(lm);
done:
    return st;
}

static const struct {
    const char *name;
    lipi_ns_kind kind;
} types[] = {
    {"Sequence", LIPI_NS_SEQUENCE},   {"NFC", LIPI_NS_NFC},
    {"NFD", LIPI_NS_NFD},             {"NFKC", LIPI_NS_NFKC},
    {"NFKD", LIPI_NS_NFKD},           {"Lowercase", LIPI_NS_LOWERCASE},
    {"StripAccents", LIPI_NS_STRIP_ACCENTS}, {"BertNormalizer", LIPI_NS_BERT},
    {"Replace", LIPI_NS_REPLACE},     {"Prepend", LIPI_NS_PREPEND},
    {"Strip", LIPI_NS_STRIP},         {"Precompiled", LIPI_NS_PRECOMPILED},
    {"Nmt", LIPI_NS_NMT},             {"ByteLevel", LIPI_NS_BYTELEVEL},
};

static lipi_status parse_step(const json_t *j, const char *jpath, lipi_ns_step *s,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    memset(s, 0, sizeof *s);
    if (!json_is_object(j))
        return expect(err, jpath, NULL, "a normalizer object", j);
    const json_t *t = json_object_get(j, "type");
    if (!json_is_string(t))
        return expect(err, jpath, "type", "a string", t);
    const char *name = json_string_value(t);
    size_t k = 0;
    while (k < sizeof types / sizeof *types && strcmp(types[k].name, name) != 0)
        k++;
    if (k == sizeof types / sizeof *types)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0, "%s.type: unknown type \"%s\"",
                              jpath, name);
    s->kind = types[k].kind;
    switch (s->kind) {
    case LIPI_NS_SEQUENCE: TRY(parse_sequence(j, jpath, s, err)); break;
    case LIPI_NS_BERT: {
        TRY(get_bool(j, jpath, "clean_text", &s->clean_text, err));
        TRY(get_bool(j, jpath, "handle_chinese_chars", &s->handle_chinese_chars, err));
        TRY(get_bool(j, jpath, "lowercase", &s->lowercase, err));
        const json_t *sa = json_object_get(j, "strip_accents");
        if (!sa)
            s->strip_accents = LIPI_NS_TRI_ABSENT;
        else if (json_is_null(sa))
            s->strip_accents = LIPI_NS_TRI_NULL;
        else if (json_is_boolean(sa))
            s->strip_accents = json_is_true(sa);
        else
            TRY(expect(err, jpath, "strip_accents", "true, false or null", sa));
        break;
    }
    case LIPI_NS_REPLACE: TRY(parse_replace(j, jpath, s, err)); break;
    case LIPI_NS_PREPEND:
        TRY(get_string(json_object_get(j, "prepend"), jpath, "prepend", &s->prepend,
                       &s->prepend_len, err));
        break;
    case LIPI_NS_STRIP:
        TRY(get_bool(j, jpath, "strip_left", &s->strip_left, err));
        TRY(get_bool(j, jpath, "strip_right", &s->strip_right, err));
        break;
    case LIPI_NS_PRECOMPILED: TRY(parse_precompiled(j, jpath, s, err)); break;
    default: break;
    }
done:
    if (st != LIPI_OK)
        lipi_ns_step_clear(s);
    return st;
}

lipi_status lipi_normalizer_from_json(const json_t *j, const char *jpath,
                                      lipi_normalizer **out, lipi_error *err)
{
    *out = NULL;
    if (!jpath)
        jpath = "normalizer";
    if (!j || json_is_null(j))
        return LIPI_OK;
    lipi_ns_step root;
    lipi_status st = parse_step(j, jpath, &root, err);
    if (st != LIPI_OK) {
        if (st == LIPI_ENOMEM)
            lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "%s: out of memory", jpath);
        return st;
    }
    return lipi_ns_build(&root, out, err);
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

static int set(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : -1;
}

static json_t *step_to_json(const lipi_ns_step *s)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    size_t k = 0;
    while (types[k].kind != s->kind)
        k++;
    int bad = set(o, "type", json_string(types[k].name));
    switch (s->kind) {
    case LIPI_NS_SEQUENCE: {
        json_t *arr = json_array();
        bad |= set(o, "normalizers", arr);
        for (size_t i = 0; !bad && i < s->n_children; i++) {
            json_t *c = step_to_json(&s->children[i]);
            bad |= c ? json_array_append_new(arr, c) : -1;
        }
        break;
    }
    case LIPI_NS_BERT:
        bad |= set(o, "clean_text", json_boolean(s->clean_text));
        bad |= set(o, "handle_chinese_chars", json_boolean(s->handle_chinese_chars));
        if (s->strip_accents == LIPI_NS_TRI_NULL)
            bad |= set(o, "strip_accents", json_null());
        else if (s->strip_accents >= 0)
            bad |= set(o, "strip_accents", json_boolean(s->strip_accents));
        bad |= set(o, "lowercase", json_boolean(s->lowercase));
        break;
    case LIPI_NS_REPLACE: {
        json_t *p = json_object();
        bad |= set(o, "pattern", p);
        if (!bad)
            bad |= set(p, s->is_regex ? "Regex" : "String",
                       json_stringn(s->pattern, s->pattern_len));
        bad |= set(o, "content", json_stringn(s->content, s->content_len));
        break;
    }
    case LIPI_NS_PREPEND:
        bad |= set(o, "prepend", json_stringn(s->prepend, s->prepend_len));
        break;
    case LIPI_NS_STRIP:
        bad |= set(o, "strip_left", json_boolean(s->strip_left));
        bad |= set(o, "strip_right", json_boolean(s->strip_right));
        break;
    case LIPI_NS_PRECOMPILED:
        bad |= set(o, "precompiled_charsmap", json_string(s->charsmap_b64));
        if (s->longest_match)
            bad |= set(o, "lipi_longest_match", json_true());
        break;
    default: break;
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *lipi_normalizer_to_json(const lipi_normalizer *n)
{
    return n ? step_to_json(lipi_ns_root(n)) : json_null();
}

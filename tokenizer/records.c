/* Record reader: lines, JSON Lines objects, whole files or NUL-separated
 * records, over the line reader (which does the decompression, the UTF-8
 * checks and the buffering; this file only chooses where a record ends and,
 * for JSONL, takes the text out of the object).
 *
 * JSONL: each line is parsed by lipi_json_loadb (the same JSON everywhere in
 * lipi); the members are then walked once more over the raw line, which is
 * known to be valid JSON by then, to find where each member is written: the
 * position of a non-string text member, and the other members passed on in
 * lipi_record.extra exactly as the input wrote them (a re-serialisation
 * would change how numbers are written). */
#include "tokenizer/base.h"
#include "tokenizer/base_json.h"

#include <string.h>

struct lipi_record_reader {
    lipi_line_reader *lines;
    char *path;     /* for messages ("<stdin>" for "-") */
    lipi_record_options opt;
    size_t number;
    bool whole_done;
    json_t *obj;    /* the last JSONL object (its text is borrowed from it) */
    lipi_buf extra; /* the last JSONL record's other members */
    lipi_buf key;   /* scratch: a decoded member name */
    lipi_buf ids;   /* field_ids: the last record's ids as text */
};

lipi_status lipi_record_reader_open(const char *path, const lipi_record_options *opt,
                                    lipi_record_reader **out, lipi_error *err)
{
    static const lipi_record_options lines = {0};
    lipi_status st = LIPI_OK;
    *out = NULL;
    lipi_record_reader *r = lipi_calloc(1, sizeof *r);
    if (!r)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    r->opt = opt ? *opt : lines;
    if (!r->opt.text_field)
        r->opt.text_field = "text";
    const char *shown = strcmp(path ? path : "", "-") == 0 ? "<stdin>" : path ? path : "";
    r->path = lipi_strndup(shown, strlen(shown));
    if (!r->path) {
        lipi_free(r);
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    }
    st = lipi_line_reader_open(path, r->opt.invalid, &r->lines, err);
    if (st != LIPI_OK) {
        lipi_record_reader_close(r);
        return st;
    }
    *out = r;
    return st;
}

void lipi_record_reader_close(lipi_record_reader *r)
{
    if (!r)
        return;
    lipi_line_reader_close(r->lines);
    lipi_free(r->path);
    json_decref(r->obj);
    lipi_buf_free(&r->extra);
    lipi_buf_free(&r->key);
    lipi_buf_free(&r->ids);
    lipi_free(r);
}

uint64_t lipi_record_reader_text_bytes(const lipi_record_reader *r)
{
    return lipi_line_reader_text_bytes(r->lines);
}

uint64_t lipi_record_reader_bytes_read(const lipi_record_reader *r)
{
    return lipi_line_reader_bytes_read(r->lines);
}

/* ------------------------------------------------------------------------ */
/* Walking valid JSON                                                        */
/* ------------------------------------------------------------------------ */

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* s[i] is '"': returns the index after the closing quote. */
static size_t skip_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n && s[i] != '"'; i++)
        if (s[i] == '\\')
            i++;
    return i + 1;
}

/* The end of the value that starts at s[i] (valid JSON). */
static size_t skip_value(const char *s, size_t i, size_t n)
{
    if (s[i] == '"')
        return skip_string(s, i, n);
    if (s[i] == '{' || s[i] == '[') {
        size_t depth = 0;
        for (; i < n; i++) {
            if (s[i] == '"') {
                i = skip_string(s, i, n) - 1;
            } else if (s[i] == '{' || s[i] == '[') {
                depth++;
            } else if (s[i] == '}' || s[i] == ']') {
                if (--depth == 0)
                    return i + 1;
            }
        }
        return n;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\r' && s[i] != '\n')
        i++;
    return i;
}

/* The member name written at s[a..b) (quotes included), decoded. Names
 * without a backslash are their bytes; others go through the JSON parser. */
static lipi_status member_name(lipi_record_reader *r, const char *s, size_t a, size_t b,
                               const char **name, size_t *len)
{
    if (!memchr(s + a, '\\', b - a)) {
        *name = s + a + 1;
        *len = b - a - 2;
        return LIPI_OK;
    }
    r->key.len = 0;
    lipi_status st = lipi_buf_append(&r->key, "[", 1);
    if (st == LIPI_OK)
        st = lipi_buf_append(&r->key, s + a, b - a);
    if (st == LIPI_OK)
        st = lipi_buf_append(&r->key, "]", 1);
    if (st != LIPI_OK)
        return st;
    json_error_t jerr;
    json_t *v = lipi_json_loadb(r->key.p, r->key.len, JSON_ALLOW_NUL, &jerr);
    if (!v)
        return LIPI_ENOMEM; /* the name was valid JSON already */
    const char *k = json_string_value(json_array_get(v, 0));
    size_t klen = json_string_length(json_array_get(v, 0));
    r->key.len = 0;
    st = lipi_buf_append(&r->key, k, klen);
    json_decref(v);
    *name = r->key.p;
    *len = klen;
    return st;
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(name, want, len) == 0;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    default: return "a string";
    }
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

/* field_ids: the array v of token ids into r->ids as "1 2 3". `at` is the
 * file offset of the member's value, for errors. */
static lipi_status ids_as_text(lipi_record_reader *r, const json_t *v, const char *field,
                               size_t no, uint64_t at, lipi_error *err)
{
    if (!json_is_array(v))
        return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at,
                              "record %zu: member \"%s\" is %s, expected an array of token ids",
                              no, field, json_kind(v));
    r->ids.len = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        json_int_t id = json_is_integer(e) ? json_integer_value(e) : -1;
        if (id < 0 || id > (json_int_t)UINT32_MAX)
            return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at,
                                  "record %zu: element %zu of member \"%s\" is %s, expected a "
                                  "token id (an integer from 0 to 4294967295)",
                                  no, i + 1, field,
                                  json_is_integer(e) ? "out of range" : json_kind(e));
        char num[16];
        int len = snprintf(num, sizeof num, i ? " %u" : "%u", (unsigned)id);
        if (lipi_buf_append(&r->ids, num, (size_t)len) != LIPI_OK)
            return lipi_error_set(err, LIPI_ENOMEM, r->path, no, 0, "out of memory");
    }
    return LIPI_OK;
}

/* The JSONL record in line[0..n): its text member into rec, the other
 * members into r->extra. `at` is the file offset of line[0]. */
static lipi_status jsonl_record(lipi_record_reader *r, const char *line, size_t n, uint64_t at,
                                lipi_record *rec, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const char *field = r->opt.text_field;
    size_t no = r->number;
    json_error_t jerr;
    json_decref(r->obj);
    r->obj = NULL;
    if (skip_ws(line, 0, n) == n)
        return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at,
                              "record %zu: expected a JSON object, found an empty line", no);
    size_t first = skip_ws(line, 0, n);
    if (line[first] != '{') {
        char c = line[first], shown[16];
        snprintf(shown, sizeof shown, c > ' ' && c < 0x7f ? "'%c'" : "byte 0x%02x",
                 c > ' ' && c < 0x7f ? c : (unsigned char)c);
        return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at + first,
                              "record %zu: expected a JSON object at column %zu, found %s", no,
                              first + 1,
                              c == '[' ? "an array" : c == '"' ? "a string"
                              : c == 't' || c == 'f' ? "a boolean" : c == 'n' ? "null"
                              : c == '-' || (c >= '0' && c <= '9') ? "a number"
                              : shown);
    }
    r->obj = lipi_json_loadb(line, n, JSON_ALLOW_NUL, &jerr);
    if (!r->obj) {
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return lipi_error_set(err, LIPI_ENOMEM, r->path, no, 0, "out of memory");
        size_t pos = jerr.position > 0 ? (size_t)jerr.position : 0;
        return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at + pos,
                              "record %zu: invalid JSON at column %zu: %s", no, pos + 1,
                              jerr.text);
    }
    /* Walk the members as written: where the text member is, what else to
     * pass on. */
    r->extra.len = 0;
    size_t i = skip_ws(line, 0, n) + 1, text_at = 0, close = 0;
    bool seen = false;
    for (;;) {
        i = skip_ws(line, i, n);
        if (line[i] == '}') {
            close = i;
            break;
        }
        size_t ka = i, kb = skip_string(line, i, n);
        size_t va = skip_ws(line, skip_ws(line, kb, n) + 1, n);
        size_t vb = skip_value(line, va, n);
        const char *name;
        size_t len;
        TRY(member_name(r, line, ka, kb, &name, &len));
        bool drop = name_is(name, len, field);
        if (drop) {
            seen = true;
            text_at = va; /* the last one: jansson keeps the last value */
        }
        for (size_t d = 0; !drop && d < r->opt.n_drop; d++)
            drop = name_is(name, len, r->opt.drop[d]);
        if (!drop) {
            if (r->extra.len)
                TRY(lipi_buf_append(&r->extra, ", ", 2));
            TRY(lipi_buf_append(&r->extra, line + ka, kb - ka));
            TRY(lipi_buf_append(&r->extra, ": ", 2));
            TRY(lipi_buf_append(&r->extra, line + va, vb - va));
        }
        i = skip_ws(line, vb, n);
        if (line[i] == ',')
            i++;
    }
    json_t *v = json_object_get(r->obj, field);
    if (!seen || !v)
        return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at + close,
                              "record %zu: no member \"%s\" (expected %s member \"%s\", "
                              "at column %zu: the end of the object)",
                              no, field, r->opt.field_ids ? "an array" : "a string", field,
                              close + 1);
    if (r->opt.field_ids) {
        TRY(ids_as_text(r, v, field, no, at + text_at, err));
        rec->text = r->ids.len ? r->ids.p : "";
        rec->len = r->ids.len;
    } else {
        if (!json_is_string(v))
            return lipi_error_set(err, LIPI_EFORMAT, r->path, no, (size_t)at + text_at,
                                  "record %zu: member \"%s\" at column %zu is %s, expected a "
                                  "string",
                                  no, field, text_at + 1, json_kind(v));
        rec->text = json_string_value(v);
        rec->len = json_string_length(v);
    }
    rec->extra = r->extra.len ? r->extra.p : "";
    rec->extra_len = r->extra.len;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, r->path, no, 0, "out of memory");
    return st;
}

lipi_status lipi_record_reader_next(lipi_record_reader *r, lipi_record *rec, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    static const int sep[] = {
        [LIPI_RECORDS_LINES] = '\n', [LIPI_RECORDS_JSONL] = '\n',
        [LIPI_RECORDS_WHOLE] = -1, [LIPI_RECORDS_NUL] = '\0'};
    lipi_record_format f = r->opt.format;
    const char *s;
    size_t n;
    *rec = (lipi_record){.extra = ""};
    if (f == LIPI_RECORDS_WHOLE && r->whole_done)
        return LIPI_OK;
    uint64_t at = lipi_line_reader_text_bytes(r->lines);
    TRY(lipi_line_reader_next_sep(r->lines, sep[f], &s, &n, err));
    if (!s) {
        if (f != LIPI_RECORDS_WHOLE || r->number > 0)
            return LIPI_OK;
        s = ""; /* an empty file is one empty text */
    }
    r->number++;
    r->whole_done = true;
    rec->number = r->number;
    if (f == LIPI_RECORDS_JSONL) {
        st = jsonl_record(r, s, n, at, rec, err);
        if (st != LIPI_OK) {
            *rec = (lipi_record){.extra = ""};
            goto done;
        }
        /* The text's UTF-8 was checked by the line reader and the parser;
         * \u escapes give only valid UTF-8. */
        return LIPI_OK;
    }
    rec->text = s;
    rec->len = n;
done:
    /* The line reader counts NUL records and files as lines: say records. */
    if (st == LIPI_EFORMAT && f != LIPI_RECORDS_LINES && f != LIPI_RECORDS_JSONL && err &&
        err->line)
        lipi_error_prefix(err, "record %zu", err->line);
    return st;
}

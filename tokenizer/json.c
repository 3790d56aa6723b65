/* lipi's JSON reader: builds jansson values from JSON text.
 *
 * Why not json_loadb: jansson 2.14 (Debian 12) mishandles allocation
 * failures inside its own lexer and parser: a failed allocation can drop
 * bytes of a string and still succeed, overrun a heap buffer in the lexer,
 * or leak. Its value constructors (json_object, json_stringn_nocheck,
 * json_object_set_new_nocheck, json_array_append_new, ...) handle failure
 * cleanly, so lipi parses the text itself and builds the values with them:
 * every caller keeps using jansson values, and an allocation that fails
 * anywhere gives a clean "out of memory" with nothing leaked.
 *
 * The accepted language and the values are exactly json_loadb's (checked
 * against jansson in tests/test_json.c): RFC 8259 JSON, an object or array
 * at the top, strings valid UTF-8 without raw control characters, \u
 * escapes with surrogate pairs (a lone surrogate is an error), \u0000 only
 * with JSON_ALLOW_NUL and never in keys, integers without fraction or
 * exponent as json_integer (out of int64 range is an error), other numbers
 * as json_real (overflow is an error, underflow gives 0), duplicate keys:
 * the last value wins in the first key's place, or an error with
 * JSON_REJECT_DUPLICATES. Nesting deeper than LIPI_JSON_MAX_DEPTH is an
 * error instead of a deep recursion. One deliberate difference: jansson
 * skips a NUL byte right after a number or true/false/null (its lexer's
 * pushback buffer takes NUL for empty), lipi rejects it as JSON does. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/base.h"
#include "tokenizer/base_json.h"

typedef struct {
    const unsigned char *start, *p, *end;
    size_t flags;
    size_t depth;
    json_error_t *err;
    bool failed;
    char *buf; /* scratch for strings and numbers */
    size_t cap;
} parser;

/* Records the first error: at is the byte that failed (position is just
 * past it, line and column 1-based, as jansson reports them). */
static void jfail(parser *P, const unsigned char *at, enum json_error_code code, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));
static void jfail(parser *P, const unsigned char *at, enum json_error_code code, const char *fmt,
                  ...)
{
    if (P->failed)
        return;
    P->failed = true;
    json_error_t *e = P->err;
    if (!e)
        return;
    if (at > P->end)
        at = P->end;
    size_t line = 1;
    const unsigned char *ls = P->start;
    for (const unsigned char *q = P->start; q < at; q++)
        if (*q == '\n') {
            line++;
            ls = q + 1;
        }
    size_t pos = (size_t)(at - P->start) + (at < P->end ? 1 : 0);
    e->line = (int)(line > INT32_MAX ? INT32_MAX : line);
    e->column = (int)((size_t)(at - ls) + 1 > INT32_MAX ? INT32_MAX : (size_t)(at - ls) + 1);
    e->position = (int)(pos > INT32_MAX ? INT32_MAX : pos);
    snprintf(e->source, sizeof e->source, "<buffer>");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
    e->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)code;
}

static void joom(parser *P)
{
    jfail(P, P->p, json_error_out_of_memory, "out of memory");
}

static bool reserve(parser *P, size_t need)
{
    if (need <= P->cap)
        return true;
    size_t cap = P->cap ? P->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *b = lipi_realloc(P->buf, cap);
    if (!b) {
        joom(P);
        return false;
    }
    P->buf = b;
    P->cap = cap;
    return true;
}

static void skip_ws(parser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r'))
        P->p++;
}

static int hex4(const unsigned char *p, const unsigned char *end)
{
    if (end - p < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string at P->p (the opening quote) into P->buf[0..*len). */
static bool parse_string(parser *P, size_t *len)
{
    P->p++; /* the opening quote */
    size_t n = 0;
    if (!reserve(P, 1)) /* so that P->buf is never NULL, even for "" */
        return false;
    for (;;) {
        if (P->p >= P->end) {
            jfail(P, P->end, json_error_premature_end_of_input, "premature end of input");
            return false;
        }
        unsigned c = *P->p;
        if (c == '"') {
            P->p++;
            *len = n;
            return true;
        }
        if (c < 0x20) {
            jfail(P, P->p, json_error_invalid_syntax, "control character 0x%x", c);
            return false;
        }
        if (!reserve(P, n + 5))
            return false;
        if (c >= 0x80) {
            uint32_t cp;
            size_t k = lipi_utf8_decode((const char *)P->p, (size_t)(P->end - P->p), &cp);
            if (k == 0) {
                jfail(P, P->p, json_error_invalid_utf8, "unable to decode byte 0x%x", c);
                return false;
            }
            memcpy(P->buf + n, P->p, k);
            n += k;
            P->p += k;
            continue;
        }
        if (c != '\\') {
            P->buf[n++] = (char)c;
            P->p++;
            continue;
        }
        const unsigned char *esc = P->p++;
        if (P->p >= P->end) {
            jfail(P, P->end, json_error_premature_end_of_input, "premature end of input");
            return false;
        }
        c = *P->p++;
        switch (c) {
        case '"': case '\\': case '/': P->buf[n++] = (char)c; continue;
        case 'b': P->buf[n++] = '\b'; continue;
        case 'f': P->buf[n++] = '\f'; continue;
        case 'n': P->buf[n++] = '\n'; continue;
        case 'r': P->buf[n++] = '\r'; continue;
        case 't': P->buf[n++] = '\t'; continue;
        case 'u': break;
        default:
            jfail(P, esc + 1, json_error_invalid_syntax, "invalid escape");
            return false;
        }
        int u = hex4(P->p, P->end);
        if (u < 0) {
            jfail(P, P->p, json_error_invalid_syntax, "invalid escape");
            return false;
        }
        P->p += 4;
        uint32_t cp = (uint32_t)u;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int lo = -1;
            if (P->end - P->p >= 2 && P->p[0] == '\\' && P->p[1] == 'u') {
                lo = hex4(P->p + 2, P->end);
                if (lo < 0) {
                    jfail(P, P->p + 2, json_error_invalid_syntax, "invalid escape");
                    return false;
                }
            }
            if (lo < 0xDC00 || lo > 0xDFFF) {
                if (lo < 0)
                    jfail(P, esc, json_error_invalid_syntax, "invalid Unicode '\\u%04X'", u);
                else
                    jfail(P, esc, json_error_invalid_syntax, "invalid Unicode '\\u%04X\\u%04X'",
                          u, lo);
                return false;
            }
            P->p += 6;
            cp = 0x10000 + (((cp - 0xD800) << 10) | ((uint32_t)lo - 0xDC00));
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            jfail(P, esc, json_error_invalid_syntax, "invalid Unicode '\\u%04X'", u);
            return false;
        } else if (cp == 0 && !(P->flags & JSON_ALLOW_NUL)) {
            jfail(P, esc, json_error_null_character,
                  "\\u0000 is not allowed without JSON_ALLOW_NUL");
            return false;
        }
        n += lipi_utf8_encode(cp, P->buf + n);
    }
}

static bool is_digit(const parser *P, const unsigned char *q)
{
    return q < P->end && *q >= '0' && *q <= '9';
}

static json_t *parse_number(parser *P)
{
    const unsigned char *s = P->p, *q = s;
    bool real = false;
    if (*q == '-')
        q++;
    if (!is_digit(P, q)) {
        jfail(P, q, json_error_invalid_syntax, "invalid token");
        return NULL;
    }
    if (*q == '0') {
        q++;
        if (is_digit(P, q)) {
            jfail(P, q, json_error_invalid_syntax, "invalid token");
            return NULL;
        }
    } else {
        while (is_digit(P, q))
            q++;
    }
    if (q < P->end && *q == '.') {
        real = true;
        q++;
        if (!is_digit(P, q)) {
            jfail(P, q, json_error_invalid_syntax, "invalid token");
            return NULL;
        }
        while (is_digit(P, q))
            q++;
    }
    if (q < P->end && (*q == 'e' || *q == 'E')) {
        real = true;
        q++;
        if (q < P->end && (*q == '+' || *q == '-'))
            q++;
        if (!is_digit(P, q)) {
            jfail(P, q, json_error_invalid_syntax, "invalid token");
            return NULL;
        }
        while (is_digit(P, q))
            q++;
    }
    size_t n = (size_t)(q - s);
    if (!reserve(P, n + 1))
        return NULL;
    memcpy(P->buf, s, n);
    P->buf[n] = '\0';
    P->p = q;
    json_t *v;
    errno = 0;
    if (!real) {
        long long i = strtoll(P->buf, NULL, 10);
        if (errno == ERANGE) {
            jfail(P, q - 1, json_error_numeric_overflow, "too big %sinteger",
                  i < 0 ? "negative " : "");
            return NULL;
        }
        v = json_integer((json_int_t)i);
    } else {
        /* strtod reads the locale's decimal point, as jansson arranges. */
        const char *dp = localeconv()->decimal_point;
        char *dot = strchr(P->buf, '.');
        if (dot && dp && dp[0] && dp[0] != '.' && !dp[1])
            *dot = dp[0];
        double d = strtod(P->buf, NULL);
        if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL)) {
            jfail(P, q - 1, json_error_numeric_overflow, "real number overflow");
            return NULL;
        }
        v = json_real(d);
    }
    if (!v)
        joom(P);
    return v;
}

static json_t *parse_value(parser *P);

/* After a member of an array or object: 1 if `close` ends it (consumed),
 * 0 after a comma (another member follows), -1 on an error. */
static int next_member(parser *P, char close)
{
    skip_ws(P);
    if (P->p >= P->end) {
        jfail(P, P->end, json_error_premature_end_of_input, "'%c' expected near end of file",
              close);
        return -1;
    }
    if (*P->p == close) {
        P->p++;
        return 1;
    }
    if (*P->p != ',') {
        jfail(P, P->p, json_error_invalid_syntax, "'%c' expected", close);
        return -1;
    }
    P->p++;
    skip_ws(P);
    return 0;
}

/* c is a new array or object for the bracket at P->p (NULL: out of
 * memory); *closed when the closing bracket follows at once. */
static json_t *open_container(parser *P, json_t *c, char close, bool *closed)
{
    *closed = false;
    if (!c) {
        joom(P);
        return NULL;
    }
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == close) {
        P->p++;
        *closed = true;
    }
    return c;
}

static json_t *parse_array(parser *P)
{
    bool closed;
    json_t *a = open_container(P, json_array(), ']', &closed);
    if (!a || closed)
        return a;
    for (;;) {
        json_t *v = parse_value(P);
        if (!v)
            goto fail;
        if (json_array_append_new(a, v) != 0) {
            joom(P);
            goto fail;
        }
        int r = next_member(P, ']');
        if (r < 0)
            goto fail;
        if (r > 0)
            return a;
    }
fail:
    json_decref(a);
    return NULL;
}

static json_t *parse_object(parser *P)
{
    bool closed;
    json_t *o = open_container(P, json_object(), '}', &closed);
    if (!o || closed)
        return o;
    for (;;) {
        if (P->p >= P->end || *P->p != '"') {
            jfail(P, P->p, P->p >= P->end ? json_error_premature_end_of_input
                                          : json_error_invalid_syntax,
                  "string or '}' expected");
            goto fail;
        }
        const unsigned char *at = P->p;
        size_t klen;
        if (!parse_string(P, &klen))
            goto fail;
        if (memchr(P->buf, '\0', klen)) {
            jfail(P, at, json_error_null_byte_in_key, "NUL byte in object key not supported");
            goto fail;
        }
        char *key = lipi_strndup(P->buf, klen);
        if (!key) {
            joom(P);
            goto fail;
        }
        if ((P->flags & JSON_REJECT_DUPLICATES) && json_object_get(o, key)) {
            lipi_free(key);
            jfail(P, at, json_error_duplicate_key, "duplicate object key");
            goto fail;
        }
        skip_ws(P);
        if (P->p >= P->end || *P->p != ':') {
            lipi_free(key);
            jfail(P, P->p, P->p >= P->end ? json_error_premature_end_of_input
                                          : json_error_invalid_syntax,
                  "':' expected");
            goto fail;
        }
        P->p++;
        json_t *v = parse_value(P);
        if (!v) {
            lipi_free(key);
            goto fail;
        }
        int rc = json_object_set_new_nocheck(o, key, v);
        lipi_free(key);
        if (rc != 0) {
            joom(P);
            goto fail;
        }
        int r = next_member(P, '}');
        if (r < 0)
            goto fail;
        if (r > 0)
            return o;
    }
fail:
    json_decref(o);
    return NULL;
}

static bool literal(parser *P, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0)
        return false;
    P->p += n;
    return true;
}

static json_t *parse_value(parser *P)
{
    skip_ws(P);
    if (P->p >= P->end) {
        jfail(P, P->end, json_error_premature_end_of_input, "unexpected end of input");
        return NULL;
    }
    json_t *v = NULL;
    switch (*P->p) {
    case '{':
    case '[':
        if (++P->depth > LIPI_JSON_MAX_DEPTH) {
            jfail(P, P->p, json_error_stack_overflow,
                  "maximum parsing depth reached (%d levels of arrays and objects)",
                  LIPI_JSON_MAX_DEPTH);
            return NULL;
        }
        v = *P->p == '{' ? parse_object(P) : parse_array(P);
        P->depth--;
        return v;
    case '"': {
        size_t len;
        if (!parse_string(P, &len))
            return NULL;
        v = json_stringn_nocheck(P->buf, len);
        break;
    }
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return parse_number(P);
    default:
        if (literal(P, "true"))
            v = json_true();
        else if (literal(P, "false"))
            v = json_false();
        else if (literal(P, "null"))
            v = json_null();
        else {
            jfail(P, P->p, json_error_invalid_syntax, "invalid token");
            return NULL;
        }
    }
    if (!v)
        joom(P);
    return v;
}

json_t *lipi_json_loadb(const char *text, size_t len, size_t flags, json_error_t *err)
{
    /* An empty mapped file comes as (NULL, 0): no arithmetic on NULL. */
    const unsigned char *t = text ? (const unsigned char *)text : (const unsigned char *)"";
    parser P = {.start = t, .p = t, .end = t + (text ? len : 0), .flags = flags, .err = err};
    if (err)
        memset(err, 0, sizeof *err);
    json_t *root = NULL;
    skip_ws(&P);
    if (P.p >= P.end || (*P.p != '{' && *P.p != '[')) {
        jfail(&P, P.p, P.p >= P.end ? json_error_premature_end_of_input
                                    : json_error_invalid_syntax,
              "'[' or '{' expected");
        goto done;
    }
    root = parse_value(&P);
    if (!root)
        goto done;
    skip_ws(&P);
    if (P.p < P.end) {
        jfail(&P, P.p, json_error_end_of_input_expected, "end of file expected");
        json_decref(root);
        root = NULL;
    }
done:
    lipi_free(P.buf);
    return root;
}

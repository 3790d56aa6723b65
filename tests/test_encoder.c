/* Encoder: exact ids, tokens and offsets of Hugging Face tokenizers
 * (fixtures made by tests/fixtures/encoder/make_fixtures.js), llama.cpp's
 * reference vectors, round trips, batches on 1 and 2 threads, the trie, the
 * lattice, added-token rules, errors, allocation failures and the CLI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "encoder/encoder.h"
#include "encoder/lattice_impl.h"
#include "encoder/trie_impl.h"
#include "tests/cli_run.h"

#define FIXTURES "tests/fixtures/encoder/"
#define SHARED "../shared/data/"
#define MAXTOK 8192

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static bool exists(const char *path)
{
    return access(path, R_OK) == 0;
}

static lipi_tokenizer *load(const char *path)
{
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    if (lipi_tokenizer_load(path, &t, &err) != LIPI_OK)
        fail_msg("loading %s: %s: %s", path, err.path, err.msg);
    return t;
}

static lipi_tokenizer *load_text(const char *json)
{
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    if (lipi_tokenizer_load_json(json, strlen(json), "test", &t, &err) != LIPI_OK)
        fail_msg("loading test JSON: %s", err.msg);
    return t;
}

typedef struct {
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_session *s;
} kit;

static kit kit_from(lipi_tokenizer *tok)
{
    kit k = {tok, NULL, NULL};
    lipi_error err = {0};
    if (lipi_encoder_new(tok, &k.enc, &err) != LIPI_OK)
        fail_msg("lipi_encoder_new: %s", err.msg);
    assert_int_equal(lipi_session_new(k.enc, &k.s), LIPI_OK);
    return k;
}

static void kit_free(kit *k)
{
    lipi_session_free(k->s);
    lipi_encoder_free(k->enc);
    lipi_tokenizer_free(k->tok);
}

/* Output arrays of one encoding. */
typedef struct {
    uint32_t ids[MAXTOK], type_ids[MAXTOK];
    lipi_span off[MAXTOK];
    uint8_t special[MAXTOK], seq[MAXTOK];
    const char *tokens[MAXTOK];
    size_t lens[MAXTOK];
    lipi_encoding e;
} result;

static result *result_new(void)
{
    result *r = calloc(1, sizeof *r);
    r->e = (lipi_encoding){r->ids, r->off, r->type_ids, r->special, r->seq, r->tokens, r->lens,
                           MAXTOK, 0};
    return r;
}

static lipi_status encode_opt(kit *k, const char *a, size_t alen, const char *b, size_t blen,
                              bool add, size_t max_length, result *r, lipi_error *err)
{
    lipi_encode_options o;
    lipi_encode_options_default(k->enc, &o);
    o.add_special_tokens = add;
    o.max_length = max_length;
    if (b)
        return lipi_encode_pair(k->s, a, alen, b, blen, &o, &r->e, err);
    return lipi_encode(k->s, a, alen, &o, &r->e, err);
}

/* ids of s (no special tokens) as "1 2 3". */
static char *ids_of(kit *k, const char *s)
{
    result *r = result_new();
    lipi_error err = {0};
    if (encode_opt(k, s, strlen(s), NULL, 0, false, 0, r, &err) != LIPI_OK)
        fail_msg("encode \"%s\": %s", s, err.msg);
    char *out = malloc(r->e.len * 11 + 1), *w = out;
    *w = '\0';
    for (size_t i = 0; i < r->e.len; i++)
        w += sprintf(w, "%s%u", i ? " " : "", r->ids[i]);
    free(r);
    return out;
}

/* Tokens of s as "a|b|c". */
static char *tokens_of(kit *k, const char *s, bool add)
{
    result *r = result_new();
    lipi_error err = {0};
    if (encode_opt(k, s, strlen(s), NULL, 0, add, 0, r, &err) != LIPI_OK)
        fail_msg("encode \"%s\": %s", s, err.msg);
    size_t n = 1;
    for (size_t i = 0; i < r->e.len; i++)
        n += r->lens[i] + 1;
    char *out = malloc(n), *w = out;
    for (size_t i = 0; i < r->e.len; i++) {
        if (i)
            *w++ = '|';
        memcpy(w, r->tokens[i], r->lens[i]);
        w += r->lens[i];
    }
    *w = '\0';
    free(r);
    return out;
}

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void print_ids(const char *label, const uint32_t *ids, size_t n)
{
    printf("    %s [", label);
    for (size_t i = 0; i < n; i++)
        printf("%s%u", i ? " " : "", ids[i]);
    printf("]\n");
}

/* Hugging Face's BytesToCharOffsetConverter: byte offsets of text to
 * character offsets (start: the character of the start byte; end: the
 * character of the end byte, or one past the character of the last byte). */
static void char_offsets(const char *text, size_t len, lipi_span in, long *cs, long *ce)
{
    size_t *map = malloc((len + 1) * sizeof *map);
    size_t ci = 0;
    for (size_t i = 0; i < len; i++) {
        if (i > 0 && ((unsigned char)text[i] & 0xC0) != 0x80)
            ci++;
        map[i] = ci;
    }
    if (in.start >= len) {
        *cs = (long)in.start;
        *ce = (long)in.end;
    } else if (in.end < len) {
        *cs = (long)map[in.start];
        *ce = (long)map[in.end];
    } else {
        *cs = (long)map[in.start];
        *ce = in.end >= 1 && in.end - 1 < len ? (long)map[in.end - 1] + 1 : *cs + 1;
    }
    free(map);
}

/* ------------------------------------------------------------------------ */
/* Hugging Face fixtures                                                     */
/* ------------------------------------------------------------------------ */

static bool same_str(const char *a, size_t alen, const json_t *b)
{
    return json_is_string(b) && json_string_length(b) == alen &&
           memcmp(json_string_value(b), a, alen) == 0;
}

/* Compares one case; returns a description of the first difference or NULL. */
static const char *compare_case(kit *k, const json_t *c, result *r, char *decoded, size_t dcap,
                                lipi_error *err, lipi_status *st)
{
    const json_t *jt = json_object_get(c, "text"), *jp = json_object_get(c, "pair");
    const char *text = json_string_value(jt), *pair = json_string_value(jp);
    size_t tlen = json_string_length(jt), plen = pair ? json_string_length(jp) : 0;
    bool add = json_is_true(json_object_get(c, "add_special_tokens"));
    size_t max = (size_t)json_integer_value(json_object_get(c, "max_length"));
    const json_t *ids = json_object_get(c, "ids"), *toks = json_object_get(c, "tokens");
    const json_t *offs = json_object_get(c, "offsets"), *types = json_object_get(c, "type_ids");
    const json_t *mask = json_object_get(c, "special_mask");

    *st = encode_opt(k, text, tlen, pair, plen, add, max, r, err);
    if (*st != LIPI_OK)
        return "lipi failed";
    size_t n = r->e.len;
    if (n != json_array_size(ids))
        return "ids";
    for (size_t i = 0; i < n; i++)
        if (r->ids[i] != (uint32_t)json_integer_value(json_array_get(ids, i)))
            return "ids";
    for (size_t i = 0; i < n; i++)
        if (!same_str(r->tokens[i], r->lens[i], json_array_get(toks, i)))
            return "tokens";
    for (size_t i = 0; i < n; i++) {
        long cs, ce;
        const json_t *o = json_array_get(offs, i);
        if (r->seq[i] == 255) {
            cs = (long)r->off[i].start;
            ce = (long)r->off[i].end;
        } else {
            const char *src = r->seq[i] ? pair : text;
            char_offsets(src, r->seq[i] ? plen : tlen, r->off[i], &cs, &ce);
        }
        if (cs != json_integer_value(json_array_get(o, 0)) ||
            ce != json_integer_value(json_array_get(o, 1)))
            return "offsets";
    }
    for (size_t i = 0; i < n; i++)
        if (r->type_ids[i] != (uint32_t)json_integer_value(json_array_get(types, i)))
            return "type_ids";
    for (size_t i = 0; i < n; i++)
        if (r->special[i] != json_integer_value(json_array_get(mask, i)))
            return "special_mask";
    for (int skip = 0; skip < 2; skip++) {
        size_t dl;
        *st = lipi_decode(k->s, r->ids, n, skip, decoded, dcap, &dl, err);
        if (*st != LIPI_OK)
            return "decode failed";
        if (!same_str(decoded, dl, json_object_get(c, skip ? "decode_skip" : "decode")))
            return skip ? "decode (skip special)" : "decode";
    }
    return NULL;
}

static void report_case(const char *name, size_t idx, const json_t *c, const result *r,
                        const char *what, const lipi_error *err, lipi_status st)
{
    const json_t *jt = json_object_get(c, "text"), *jp = json_object_get(c, "pair");
    printf("  %s case %zu: %s differs; text \"", name, idx, what);
    print_escaped(json_string_value(jt), json_string_length(jt));
    if (json_is_string(jp)) {
        printf("\" pair \"");
        print_escaped(json_string_value(jp), json_string_length(jp));
    }
    printf("\" add_special_tokens=%d max_length=%d\n",
           json_is_true(json_object_get(c, "add_special_tokens")),
           (int)json_integer_value(json_object_get(c, "max_length")));
    if (st != LIPI_OK) {
        printf("    lipi: %s (%s)\n", err->msg, lipi_status_name(st));
        return;
    }
    const json_t *ids = json_object_get(c, "ids");
    uint32_t want[MAXTOK];
    size_t nw = json_array_size(ids) < MAXTOK ? json_array_size(ids) : MAXTOK;
    for (size_t i = 0; i < nw; i++)
        want[i] = (uint32_t)json_integer_value(json_array_get(ids, i));
    print_ids("hf:  ", want, nw);
    print_ids("lipi:", r->ids, r->e.len);
    if (strcmp(what, "ids") != 0) {
        char *s = json_dumps(json_object_get(c, strncmp(what, "decode", 6) == 0
                                                        ? (strstr(what, "skip") ? "decode_skip" : "decode")
                                                        : what),
                             JSON_ENCODE_ANY);
        printf("    hf %s: %s\n", what, s);
        free(s);
        if (strcmp(what, "tokens") == 0 || strcmp(what, "offsets") == 0) {
            printf("    lipi tokens:");
            for (size_t i = 0; i < r->e.len; i++)
                printf(" \"%.*s\"@%zu-%zu", (int)r->lens[i], r->tokens[i], r->off[i].start,
                       r->off[i].end);
            printf("\n");
        }
    }
}

/* Runs every case of a fixture; prints the first mismatch in full and fails
 * when any case differs. */
static void run_fixture(const char *name, bool needs_shared)
{
    char path[256];
    json_error_t je;
    snprintf(path, sizeof path, FIXTURES "%s.expected.json", name);
    json_t *fx = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!fx)
        fail_msg("%s: %s", path, je.text);
    const char *tpath = json_string_value(json_object_get(fx, "tokenizer"));
    if (needs_shared && !exists(tpath)) {
        json_decref(fx);
        skip();
    }
    kit k = kit_from(load(tpath));
    const json_t *cases = json_object_get(fx, "cases");
    result *r = result_new();
    size_t dcap = 1 << 16, bad = 0;
    char *decoded = malloc(dcap);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        lipi_error err = {0};
        lipi_status st = LIPI_OK;
        const char *what = compare_case(&k, c, r, decoded, dcap, &err, &st);
        if (what) {
            if (bad == 0)
                report_case(name, i, c, r, what, &err, st);
            bad++;
        }
    }
    size_t total = json_array_size(cases);
    free(decoded);
    free(r);
    kit_free(&k);
    json_decref(fx);
    if (bad)
        fail_msg("%s: %zu of %zu cases differ from %s", name, bad, total, "Hugging Face");
}

#define HF_FIXTURE(name, shared)                                                     \
    static void test_same_as_hugging_face_##name(void **state)                      \
    {                                                                                \
        (void)state;                                                                 \
        run_fixture(#name, shared);                                                  \
    }

HF_FIXTURE(wordpiece, false)
HF_FIXTURE(unigram, false)
HF_FIXTURE(unigram_bf, false)
HF_FIXTURE(bpe_bf, false)
HF_FIXTURE(bpe_suffix, false)
HF_FIXTURE(bpe_prefix, false)
HF_FIXTURE(bytelevel_roberta, false)
HF_FIXTURE(bytelevel_seq, false)
HF_FIXTURE(bytelevel_generic, false)
HF_FIXTURE(wordlevel, false)
HF_FIXTURE(gpt2, true)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_hugging_face_wordpiece),
        cmocka_unit_test(test_same_as_hugging_face_unigram),
        cmocka_unit_test(test_same_as_hugging_face_unigram_bf),
        cmocka_unit_test(test_same_as_hugging_face_bpe_bf),
        cmocka_unit_test(test_same_as_hugging_face_bpe_suffix),
        cmocka_unit_test(test_same_as_hugging_face_bpe_prefix),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_roberta),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_seq),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_generic),
        cmocka_unit_test(test_same_as_hugging_face_wordlevel),
        cmocka_unit_test(test_same_as_hugging_face_gpt2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

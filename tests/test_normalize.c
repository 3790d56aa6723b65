/* Normalizers: named ones, Hugging Face steps from tokenizer.json checked
 * against reference outputs and alignments, Precompiled charsmaps,
 * allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tokenizer/json_impl.h"
#include "tokenizer/tokenizer.h"

#define HF_REFERENCE "tests/fixtures/normalize/hf_reference.json"
#define SPM_REFERENCE "tests/fixtures/normalize/spm_test_model.json"
#define SPM_MODEL "../shared/data/vectors/sentencepiece/test_model.model"

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

static lipi_normalizer *named(const char *name, bool lower, bool strip, bool fold)
{
    lipi_normalizer_options o = {.lowercase = lower, .strip_accents = strip, .fold_digits = fold};
    lipi_normalizer *n = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_normalizer_new(name, &o, &n, &err);
    if (st != LIPI_OK)
        fail_msg("lipi_normalizer_new(%s): %s: %s", name, lipi_status_name(st), err.msg);
    return n;
}

/* Normalizes s with n and checks the text. */
static void expect_norm(const lipi_normalizer *n, const char *s, const char *want)
{
    lipi_normalized out = {0};
    lipi_error err = {0};
    lipi_status st = lipi_normalize(n, s, strlen(s), &out, false, &err);
    if (st != LIPI_OK)
        fail_msg("normalize \"%s\": %s: %s", s, lipi_status_name(st), err.msg);
    if (out.len != strlen(want) || memcmp(out.text, want, out.len) != 0)
        fail_msg("normalize \"%s\": got \"%s\", want \"%s\"", s, out.text, want);
    lipi_normalized_free(&out);
}

static lipi_normalizer *from_json_text(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fail_msg("bad test JSON: %s", je.text);
    lipi_normalizer *n = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_normalizer_from_json(j, "normalizer", &n, &err);
    json_decref(j);
    if (st != LIPI_OK)
        fail_msg("from_json: %s: %s", lipi_status_name(st), err.msg);
    return n;
}

/* Reads SPM_MODEL's normalizer_spec.precompiled_charsmap as base64 (NULL
 * when the shared data is not there). */
static uint64_t pb_varint(const unsigned char *b, size_t n, size_t *i)
{
    uint64_t r = 0;
    for (int s = 0; *i < n && s < 64; s += 7) {
        unsigned char c = b[(*i)++];
        r |= (uint64_t)(c & 0x7F) << s;
        if (c < 0x80)
            break;
    }
    return r;
}

static bool pb_find(const unsigned char *b, size_t n, uint64_t field, const unsigned char **v,
                    size_t *vlen)
{
    size_t i = 0;
    while (i < n) {
        uint64_t key = pb_varint(b, n, &i);
        switch (key & 7) {
        case 0: pb_varint(b, n, &i); break;
        case 1: i += 8; break;
        case 5: i += 4; break;
        case 2: {
            uint64_t len = pb_varint(b, n, &i);
            if (len > n - i)
                return false;
            if (key >> 3 == field) {
                *v = b + i;
                *vlen = (size_t)len;
                return true;
            }
            i += (size_t)len;
            break;
        }
        default: return false;
        }
    }
    return false;
}

static char *model_charsmap_b64(void)
{
    FILE *f = fopen(SPM_MODEL, "rb");
    if (!f)
        return NULL;
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const unsigned char *spec, *cm;
    size_t spec_len, cm_len;
    if (!pb_find(buf, n, 3, &spec, &spec_len) || !pb_find(spec, spec_len, 2, &cm, &cm_len))
        return NULL;
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((cm_len + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; i < cm_len; i += 3) {
        uint32_t v = (uint32_t)cm[i] << 16 | (i + 1 < cm_len ? (uint32_t)cm[i + 1] << 8 : 0) |
                     (i + 2 < cm_len ? cm[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < cm_len ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < cm_len ? tab[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* Replaces every "@test_model" string in j by the model's charsmap. */
static bool uses_charsmap(json_t *j, const char *b64)
{
    bool used = false;
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            if (json_is_string(v) && strcmp(json_string_value(v), "@test_model") == 0) {
                used = true;
                if (b64)
                    json_object_set_new(j, k, json_string(b64));
            } else {
                used |= uses_charsmap(v, b64);
            }
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            used |= uses_charsmap(json_array_get(j, i), b64);
    }
    return used;
}

/* ======================================================================== */
/* Reference checks against Hugging Face tokenizers                          */
/* ======================================================================== */

static void test_hf_steps_match_reference_text_and_alignments(void **state)
{
    (void)state;
    json_error_t je;
    json_t *doc = json_load_file(HF_REFERENCE, JSON_ALLOW_NUL, &je);
    if (!doc)
        fail_msg("%s: %s", HF_REFERENCE, je.text);
    char *b64 = model_charsmap_b64();
    json_t *norms = json_object_get(doc, "normalizers");
    json_t *inputs = json_object_get(doc, "inputs");
    json_t *cases = json_object_get(doc, "cases");
    size_t failures = 0, checked = 0, skipped = 0;
    const char *name;
    json_t *nj;
    json_object_foreach(norms, name, nj)
    {
        if (uses_charsmap(nj, b64) && !b64) {
            skipped++;
            continue;
        }
        lipi_normalizer *n = NULL;
        lipi_error err = {0};
        lipi_status st = lipi_normalizer_from_json(nj, "normalizer", &n, &err);
        if (st != LIPI_OK) {
            print_error("%s: from_json: %s\n", name, err.msg);
            failures++;
            continue;
        }
        lipi_normalized out = {0};
        for (size_t c = 0; c < json_array_size(cases); c++) {
            json_t *cs = json_array_get(cases, c);
            if (strcmp(json_string_value(json_object_get(cs, "n")), name) != 0)
                continue;
            json_t *in = json_array_get(inputs, (size_t)json_integer_value(json_object_get(cs, "i")));
            json_t *wj = json_object_get(cs, "out");
            const char *want = json_string_value(wj);
            size_t want_len = json_string_length(wj);
            json_t *align = json_object_get(cs, "align");
            st = lipi_normalize(n, json_string_value(in), json_string_length(in), &out, true,
                                &err);
            checked++;
            bool ok = st == LIPI_OK && out.len == want_len && memcmp(out.text, want, out.len) == 0;
            size_t k = 0, bad_char = SIZE_MAX;
            for (size_t p = 0; ok && p < out.len; k++) {
                size_t l = 1;
                unsigned char b = (unsigned char)out.text[p];
                l = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
                json_t *span = json_array_get(align, k);
                size_t ws = (size_t)json_integer_value(json_array_get(span, 0));
                size_t we = (size_t)json_integer_value(json_array_get(span, 1));
                for (size_t q = p; q < p + l; q++)
                    if (out.align[q].start != ws || out.align[q].end != we) {
                        ok = false;
                        bad_char = k;
                    }
                p += l;
            }
            if (!ok) {
                if (failures < 15) {
                    print_error("%s on \"%s\": got \"%s\" want \"%s\"", name,
                                json_string_value(in), st == LIPI_OK ? out.text : err.msg, want);
                    if (bad_char != SIZE_MAX)
                        print_error(" (alignment of output char %zu)", bad_char);
                    print_error("\n");
                }
                failures++;
            }
        }
        lipi_normalized_free(&out);
        lipi_normalizer_free(n);
    }
    print_message("%zu reference cases checked, %zu normalizers skipped (no %s)\n", checked,
                  skipped, SPM_MODEL);
    free(b64);
    json_decref(doc);
    assert_true(checked > 500);
    assert_int_equal(failures, 0);
}

/* SentencePiece's own normalizer with the same charsmap: the Precompiled
 * step in longest-match mode must agree on every string. */
static void test_precompiled_longest_match_agrees_with_sentencepiece(void **state)
{
    (void)state;
    char *b64 = model_charsmap_b64();
    FILE *f = fopen(SPM_REFERENCE, "rb");
    if (f)
        fclose(f);
    if (!b64 || !f) {
        free(b64);
        skip();
    }
    json_t *pc = json_pack("{s:s, s:s, s:b}", "type", "Precompiled", "precompiled_charsmap", b64,
                           "lipi_longest_match", 1);
    lipi_normalizer *n = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_normalizer_from_json(pc, "normalizer", &n, &err), LIPI_OK);
    json_error_t je;
    json_t *doc = json_load_file(SPM_REFERENCE, 0, &je);
    assert_non_null(doc);
    json_t *cases = json_object_get(doc, "cases");
    lipi_normalized out = {0};
    size_t failures = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        const char *in = json_string_value(json_object_get(c, "input"));
        const char *want = json_string_value(json_object_get(c, "normalized"));
        assert_int_equal(lipi_normalize(n, in, strlen(in), &out, false, &err), LIPI_OK);
        if (strcmp(out.text, want) != 0) {
            print_error("\"%s\": got \"%s\", SentencePiece \"%s\"\n", in, out.text, want);
            failures++;
        }
    }
    assert_true(json_array_size(cases) >= 24);
    assert_int_equal(failures, 0);
    lipi_normalized_free(&out);
    lipi_normalizer_free(n);
    json_decref(doc);
    json_decref(pc);
    free(b64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_steps_match_reference_text_and_alignments),
        cmocka_unit_test(test_precompiled_longest_match_agrees_with_sentencepiece),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

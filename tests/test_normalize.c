/* Normalizers: named ones, Hugging Face steps from tokenizer.json checked
 * against reference outputs and alignments, Precompiled charsmaps,
 * allocation failures. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tokenizer/base_json.h"
#include "tokenizer/normalize_impl.h"
#include "tokenizer/tokenizer_layout.h"
#include "tests/alloc_fail.h"
#include "tokenizer/tokenizer.h"

#define HF_REFERENCE "tests/fixtures/normalize/hf_reference.json"
#define SPM_REFERENCE "tests/fixtures/normalize/spm_test_model.json"
/* SentencePiece's test model, committed from ../shared/data (tests/refdata.h). */
#define SPM_MODEL "tests/fixtures/shared/vectors/sentencepiece/test_model.model"

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

/* Reads SPM_MODEL's normalizer_spec.precompiled_charsmap as base64; fails
 * the test when it cannot. */
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
        fail_msg("%s: cannot open", SPM_MODEL);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const unsigned char *spec, *cm;
    size_t spec_len, cm_len;
    if (!pb_find(buf, n, 3, &spec, &spec_len) || !pb_find(spec, spec_len, 2, &cm, &cm_len))
        fail_msg("%s: no precompiled_charsmap", SPM_MODEL);
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
static void put_charsmap(json_t *j, const char *b64)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            if (json_is_string(v) && strcmp(json_string_value(v), "@test_model") == 0)
                json_object_set_new(j, k, json_string(b64));
            else
                put_charsmap(v, b64);
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            put_charsmap(json_array_get(j, i), b64);
    }
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
    size_t failures = 0, checked = 0;
    const char *name;
    json_t *nj;
    json_object_foreach(norms, name, nj)
    {
        put_charsmap(nj, b64);
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
    free(b64);
    json_decref(doc);
    assert_true(checked > 500);
    assert_int_equal(failures, 0);
}

/* The test model's charsmap as a Precompiled step in longest-match mode
 * (SentencePiece's own normalizer). */
static lipi_normalizer *spm_precompiled(void)
{
    char *b64 = model_charsmap_b64();
    json_t *pc = json_pack("{s:s, s:s, s:b}", "type", "Precompiled", "precompiled_charsmap", b64,
                           "lipi_longest_match", 1);
    lipi_normalizer *n = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_normalizer_from_json(pc, "normalizer", &n, &err), LIPI_OK);
    json_decref(pc);
    free(b64);
    return n;
}

/* SentencePiece's own normalizer with the same charsmap: the Precompiled
 * step in longest-match mode must agree on every string. */
static void test_precompiled_longest_match_agrees_with_sentencepiece(void **state)
{
    (void)state;
    lipi_normalizer *n = spm_precompiled();
    lipi_error err = {0};
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
}

/* pc_skip passes over a char that starts a key when the char after it
 * goes on no key from it: a key and a non-key after the same base letter,
 * a base letter last, and one before a char outside the BMP (SentencePiece
 * 0.1.97's encode on test_model gave these). */
static void test_precompiled_base_letters_compose_only_with_their_marks(void **state)
{
    (void)state;
    lipi_normalizer *n = spm_precompiled();
    expect_norm(n, "\xE0\xA4\xA8\xE0\xA4\xBC", "\xE0\xA4\xA9");     /* न + ़ -> ऩ */
    expect_norm(n, "\xE0\xA4\xA8\xE0\xA4\xBE", "\xE0\xA4\xA8\xE0\xA4\xBE"); /* ना */
    expect_norm(n, "\xE0\xA4\xA8", "\xE0\xA4\xA8");
    expect_norm(n, "e\xCC\x81x ex", "\xC3\xA9x ex");
    expect_norm(n, "\xE0\xA4\xA8\xF0\x9F\x98\x80\xE0\xA4\xA8\xE0\xA4\xBC",
                "\xE0\xA4\xA8\xF0\x9F\x98\x80\xE0\xA4\xA9");
    lipi_normalizer_free(n);
}

/* pc_skip's loop (a char at a time while three bytes are left, then the
 * last two, and runs of printable ASCII 16 bytes at a time) against no
 * skipping at all, where every char goes through the trie walk as in
 * SentencePiece's NormalizePrefix: random valid texts of chars of one to
 * four bytes, chars the charsmap maps, base letters before and away from
 * their marks (also at the end of a long ASCII run, where the 16-byte step
 * stops), at lengths that end the text on every kind of char; normalized
 * text and alignments alike. */
static void test_charsmap_skip_is_the_plain_walk(void **state)
{
    (void)state;
    static const char *const parts[] = {
        "a", "e", " ", "x", "\t", "\xC3\xA9" /* é */, "e\xCC\x81" /* e + acute */,
        "\xCC\x81", "\xC2\xA0" /* no-break space */, "\xCE\xA9" /* Ω */,
        "\xEF\xAC\x81" /* ﬁ */, "\xEF\xBC\xA1" /* full-width A */,
        "\xE0\xA4\xA8" /* न */, "\xE0\xA4\xBC" /* nukta */, "\xE0\xA4\xA9" /* ऩ */,
        "\xE0\xA5\x98" /* क़ */, "\xE0\xA4\xBE" /* ा */, "\xE0\xA7\x87\xE0\xA6\xBE" /* ে া */,
        "\xE1\x84\x92" /* jamo ᄒ */, "\xE1\x85\xA1" /* jamo ᅡ */, "\xED\x95\x9C" /* 한 */,
        "\xE2\x91\xA0" /* ① */, "\xE2\x96\x81" /* ▁ */, "\xF0\x9F\x98\x80" /* 😀 */,
        "\xF0\x9D\x90\x80" /* bold A */, "the quick brown fox e", "0123456789abcdefghijklmno",
        "ASCII, all of it: ~!@#$%^&*()_+{}|<>?e"};
    const size_t np = sizeof parts / sizeof *parts;
    lipi_normalizer *n = spm_precompiled();
    lipi_normalized fast = {0}, plain = {0};
    lipi_error err = {0};
    char text[1024];
    unsigned seed = 7;
    for (int t = 0; t < 20000; t++) {
        size_t len = 0, k = (size_t)rand_r(&seed) % 24;
        for (size_t j = 0; j < k; j++) {
            const char *p = parts[(size_t)rand_r(&seed) % np];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        bool align = t % 2;
        assert_int_equal(lipi_normalize(n, text, len, &fast, align, &err), LIPI_OK);
        lipi_ns_plain_charsmap_for_tests = 1;
        assert_int_equal(lipi_normalize(n, text, len, &plain, align, &err), LIPI_OK);
        lipi_ns_plain_charsmap_for_tests = 0;
        if (fast.len != plain.len || memcmp(fast.text, plain.text, fast.len) != 0)
            fail_msg("\"%.*s\": skipping gave \"%s\", the plain walk \"%s\"", (int)len, text,
                     fast.text, plain.text);
        if (align)
            assert_memory_equal(fast.align, plain.align, fast.len * sizeof *fast.align);
    }
    lipi_normalized_free(&fast);
    lipi_normalized_free(&plain);
    lipi_normalizer_free(n);
}

/* ======================================================================== */
/* Named normalizers                                                         */
/* ======================================================================== */

static void test_nfc_makes_nukta_letters_consonant_plus_nukta(void **state)
{
    (void)state;
    lipi_normalizer *n = named("nfc", false, false, false);
    expect_norm(n, "\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"); /* U+0958 -> U+0915 U+093C */
    expect_norm(n, "\xE0\xA4\xA8\xE0\xA4\xBC", "\xE0\xA4\xA9");   /* न + ़ -> ऩ (not excluded) */
    expect_norm(n, "Cafe\xCC\x81", "Caf\xC3\xA9");
    lipi_normalizer_free(n);
}

static void test_nfkc_folds_full_width_and_ligatures(void **state)
{
    (void)state;
    lipi_normalizer *n = named("nfkc", false, false, false);
    expect_norm(n, "ＡＢＣ１", "ABC1");
    expect_norm(n, "\xEF\xAC\x81" "x ①", "fix 1");
    lipi_normalizer_free(n);
    n = named("nfkd", false, false, false);
    expect_norm(n, "é", "e\xCC\x81");
    lipi_normalizer_free(n);
    n = named("nfd", false, false, false);
    expect_norm(n, "\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC");
    lipi_normalizer_free(n);
}

static void test_strip_accents_keeps_indic_matras_and_drops_latin_accents(void **state)
{
    (void)state;
    lipi_normalizer *n = named("nfc", true, true, false);
    expect_norm(n, "कु", "कु");
    expect_norm(n, "किं", "किं");
    expect_norm(n, "Café", "cafe");
    expect_norm(n, "ÀÉÎÕÜ Ἀθῆναι", "aeiou αθηναι");
    expect_norm(n, "हिन्दी தமிழ் മലയാളം", "हिन्दी தமிழ் മലയാളം");
    lipi_normalizer_free(n);
    n = named("nfkd", false, true, false);
    expect_norm(n, "é कु", "e \xE0\xA4\x95\xE0\xA5\x81");
    lipi_normalizer_free(n);
    n = named("none", false, true, false);
    expect_norm(n, "naïve कु", "naive कु");
    lipi_normalizer_free(n);
}

static void test_lowercase_is_per_char_without_final_sigma(void **state)
{
    (void)state;
    lipi_normalizer *n = named("none", true, false, false);
    expect_norm(n, "ΣΑΣ", "σασ");
    expect_norm(n, "İ", "i\xCC\x87");
    expect_norm(n, "HeLLo ǅ", "hello ǆ");
    expect_norm(n, "कु", "कु");
    lipi_normalizer_free(n);
}

static void test_indic_keeps_joiners_inside_words_and_drops_stray_ones(void **state)
{
    (void)state;
    lipi_normalizer *n = named("indic", false, false, false);
    expect_norm(n, "ന്‍", "ന്‍");                 /* Malayalam chillu (virama + ZWJ) */
    expect_norm(n, "അവന്‍ വന്നു", "അവന്‍ വന്നു");
    expect_norm(n, "ශ්‍රී", "ශ්‍රී");                /* Sinhala virama + ZWJ + ra */
    expect_norm(n, "क्‍ष", "क्‍ष");                /* explicit half form */
    expect_norm(n, "می‌خواهم", "می‌خواهم");        /* ZWNJ between letters */
    expect_norm(n, " \xE2\x80\x8D" "क", " क");    /* ZWJ at a word start */
    expect_norm(n, "क\xE2\x80\x8D क", "क क");     /* ZWJ at a word end after a letter */
    expect_norm(n, "a \xE2\x80\x8C b", "a  b");   /* ZWNJ between spaces */
    expect_norm(n, "!\xE2\x80\x8D!", "!!");
    expect_norm(n, "!\xE2\x80\x8D", "!");
    /* At the very start of the text, or at its end after a letter, a
     * joiner stays: a SentencePiece charsmap cannot see text edges, and
     * --export-spm stays exact. */
    expect_norm(n, "\xE2\x80\x8D" "क", "\xE2\x80\x8D" "क");
    expect_norm(n, "क\xE2\x80\x8C", "क\xE2\x80\x8C");
    expect_norm(n, "\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"); /* NFC first */
    lipi_normalizer_free(n);
}

static void test_fold_digits_maps_indic_digits_to_ascii(void **state)
{
    (void)state;
    lipi_normalizer *n = named("indic", false, false, true);
    expect_norm(n, "१२३", "123");
    expect_norm(n, "০১২৩৪৫৬৭৮৯ ੦ ૯ ୫ ௮ ౧ ೨ ൩", "0123456789 0 9 5 8 1 2 3");
    expect_norm(n, "१२३ रुपये", "123 रुपये");
    lipi_normalizer_free(n);
}

static void test_bert_cleans_controls_spaces_tabs_and_pads_cjk(void **state)
{
    (void)state;
    lipi_normalizer *n = named("bert", false, false, false);
    expect_norm(n, "a\tb\nc\rd", "a b c d");
    expect_norm(n, "x\x01y\x7Fz\xEF\xBF\xBDw", "xyzw");
    expect_norm(n, "中文a字", " 中  文 a 字 ");
    expect_norm(n, "Café", "Café"); /* strip_accents false, lowercase false */
    expect_norm(n, "a\xC2\xA0" "b\xE3\x80\x80" "c", "a b c");
    lipi_normalizer_free(n);
    n = named("bert", true, false, false);
    expect_norm(n, "HeLLo 中", "hello  中 ");
    expect_norm(n, "Café", "café");
    lipi_normalizer_free(n);
    n = named("bert", true, true, false);
    expect_norm(n, "Café कु", "cafe कु");
    lipi_normalizer_free(n);
}

static void test_none_copies_and_unknown_name_lists_known_names(void **state)
{
    (void)state;
    lipi_normalizer *n = named("none", false, false, false);
    expect_norm(n, "As Is ΣΑΣ", "As Is ΣΑΣ");
    expect_norm(n, "", "");
    lipi_normalizer_free(n);
    expect_norm(NULL, "null copies", "null copies");
    lipi_error err = {0};
    n = (lipi_normalizer *)1;
    assert_int_equal(lipi_normalizer_new("nfx", NULL, &n, &err), LIPI_EINVAL);
    assert_null(n);
    assert_non_null(strstr(err.msg, "\"nfx\""));
    assert_non_null(strstr(err.msg, "indic"));
}

/* The named normalizers serialize to Hugging Face steps (the same objects the
 * reference fixture was made with, so Hugging Face loads them and agrees). */
static void test_named_normalizers_serialize_to_the_reference_json(void **state)
{
    (void)state;
    json_error_t je;
    json_t *doc = json_load_file(HF_REFERENCE, JSON_ALLOW_NUL, &je);
    assert_non_null(doc);
    json_t *norms = json_object_get(doc, "normalizers");
    struct {
        const char *ref, *name;
        bool lower, strip, fold;
    } cases[] = {
        {"lipi_indic", "indic", false, false, false},
        {"lipi_indic_fold", "indic", false, false, true},
        {"lipi_nfkc_lower_strip", "nfkc", true, true, false},
        {"lipi_bert_lower_strip", "bert", true, true, false},
        {"nfc", "nfc", false, false, false},
        {"bert_cased", "bert", false, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        lipi_normalizer *n = named(cases[i].name, cases[i].lower, cases[i].strip, cases[i].fold);
        json_t *got = lipi_normalizer_to_json(n);
        json_t *want = json_object_get(norms, cases[i].ref);
        assert_non_null(want);
        if (!json_equal(got, want)) {
            char *g = json_dumps(got, JSON_COMPACT);
            fail_msg("%s: got %.300s", cases[i].ref, g);
        }
        json_decref(got);
        lipi_normalizer_free(n);
    }
    json_decref(doc);
}

/* ======================================================================== */
/* Alignment                                                                 */
/* ======================================================================== */

static void expect_align(const lipi_normalizer *n, const char *in, const char *want_text,
                         const size_t (*want)[2], size_t n_want)
{
    lipi_normalized out = {0};
    assert_int_equal(lipi_normalize(n, in, strlen(in), &out, true, NULL), LIPI_OK);
    assert_string_equal(out.text, want_text);
    assert_int_equal(out.len, n_want);
    for (size_t i = 0; i < n_want; i++)
        if (out.align[i].start != want[i][0] || out.align[i].end != want[i][1])
            fail_msg("\"%s\" byte %zu: got [%zu,%zu) want [%zu,%zu)", in, i, out.align[i].start,
                     out.align[i].end, want[i][0], want[i][1]);
    lipi_normalized_free(&out);
}

static void test_alignment_of_a_decomposition_maps_both_chars_to_the_source(void **state)
{
    (void)state;
    lipi_normalizer *n = named("nfd", false, false, false);
    /* "aé" -> "a" "e" U+0301: e and the accent both come from é = [1,3). */
    static const size_t want[][2] = {{0, 1}, {1, 3}, {1, 3}, {1, 3}};
    expect_align(n, "aé", "ae\xCC\x81", want, 4);
    lipi_normalizer_free(n);
    n = named("nfkc", false, false, false);
    static const size_t lig[][2] = {{0, 3}, {0, 3}, {3, 4}};
    expect_align(n, "\xEF\xAC\x81x", "fix", lig, 3);
    lipi_normalizer_free(n);
}

static void test_alignment_of_a_deletion_skips_the_removed_bytes(void **state)
{
    (void)state;
    lipi_normalizer *n = named("indic", false, false, false);
    /* "a" ZWJ(3 bytes) " b": the ZWJ vanishes, later bytes keep their spans. */
    static const size_t want[][2] = {{0, 1}, {4, 5}, {5, 6}};
    expect_align(n, "a\xE2\x80\x8D b", "a b", want, 3);
    lipi_normalizer_free(n);
    n = named("bert", false, false, false);
    static const size_t cjk[][2] = {{0, 1}, {1, 4}, {1, 4}, {1, 4}, {1, 4}, {1, 4}, {5, 6}};
    expect_align(n, "a中\x01" "b", "a 中 b", cjk, 7);
    lipi_normalizer_free(n);
    n = named("none", false, false, false);
    static const size_t id[][2] = {{0, 2}, {0, 2}, {2, 3}};
    expect_align(n, "éx", "éx", id, 3);
    lipi_normalizer_free(n);
}

static void test_normalize_rejects_invalid_utf8_with_its_offset(void **state)
{
    (void)state;
    lipi_normalizer *n = named("nfc", false, false, false);
    lipi_normalized out = {0};
    lipi_error err = {0};
    assert_int_equal(lipi_normalize(n, "ok \xE0\xA4\x95\xC0\xAF", 8, &out, false, &err),
                     LIPI_EFORMAT);
    assert_int_equal(err.offset, 6);
    assert_non_null(strstr(err.msg, "0xc0"));
    assert_int_equal(out.len, 0);
    assert_int_equal(lipi_normalize(n, "fine", 4, &out, false, &err), LIPI_OK);
    assert_string_equal(out.text, "fine");
    lipi_normalized_free(&out);
    lipi_normalizer_free(n);
}

static void test_output_struct_is_reused_across_calls_and_normalizers(void **state)
{
    (void)state;
    lipi_normalizer *a = named("nfkc", true, false, false);
    lipi_normalizer *b = named("indic", false, false, true);
    lipi_normalized out = {0};
    char big[5000];
    memset(big, 'X', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int round = 0; round < 3; round++) {
        assert_int_equal(lipi_normalize(a, big, strlen(big), &out, true, NULL), LIPI_OK);
        assert_int_equal(out.len, sizeof big - 1);
        assert_int_equal(out.text[0], 'x');
        assert_int_equal(out.align[4000].start, 4000);
        assert_int_equal(lipi_normalize(b, "१२", 6, &out, round == 1, NULL), LIPI_OK);
        assert_string_equal(out.text, "12");
    }
    lipi_normalized_free(&out);
    lipi_normalizer_free(a);
    lipi_normalizer_free(b);
}

/* ======================================================================== */
/* tokenizer.json                                                            */
/* ======================================================================== */

static void expect_json_error(const char *text, lipi_status code, const char *msg_part)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fail_msg("bad test JSON %s: %s", text, je.text);
    lipi_normalizer *n = (lipi_normalizer *)1;
    lipi_error err = {0};
    lipi_status st = lipi_normalizer_from_json(j, "normalizer", &n, &err);
    json_decref(j);
    if (st != code || !strstr(err.msg, msg_part))
        fail_msg("%s: got %s \"%s\", want %s with \"%s\"", text, lipi_status_name(st), err.msg,
                 lipi_status_name(code), msg_part);
    assert_null(n);
}

static void test_json_errors_name_the_json_path(void **state)
{
    (void)state;
    expect_json_error("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"NFD\"},"
                      "{\"type\":\"Foo\"}]}",
                      LIPI_EFORMAT, "normalizer.normalizers[2].type: unknown type \"Foo\"");
    expect_json_error("{\"type\":\"Replace\",\"pattern\":\"x\",\"content\":\"\"}", LIPI_EFORMAT,
                      "normalizer.pattern: expected an object with \"String\" or \"Regex\"");
    expect_json_error("{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(a\"},\"content\":\"\"}",
                      LIPI_EREGEX, "normalizer.pattern: cannot compile pattern");
    expect_json_error("{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"}}", LIPI_EFORMAT,
                      "normalizer.content: expected a string, found nothing");
    expect_json_error("{\"type\":\"BertNormalizer\",\"clean_text\":1}", LIPI_EFORMAT,
                      "normalizer.clean_text: expected true or false, found an integer");
    expect_json_error("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Sequence\","
                      "\"normalizers\":[{\"type\":\"Strip\",\"strip_left\":true}]}]}",
                      LIPI_EFORMAT, "normalizer.normalizers[0].normalizers[0].strip_right");
    expect_json_error("{\"type\":\"Sequence\"}", LIPI_EFORMAT,
                      "normalizer.normalizers: expected an array");
    expect_json_error("[1]", LIPI_EFORMAT, "normalizer: expected a normalizer object, found an array");
    expect_json_error("{\"kind\":\"NFC\"}", LIPI_EFORMAT, "normalizer.type: expected a string");
    expect_json_error("{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"@@@@\"}", LIPI_EFORMAT,
                      "expected base64");
    expect_json_error("{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAA=\"}", LIPI_EFORMAT,
                      "expected at least 4 bytes");
    /* trie size 0x100 but only 4 bytes follow */
    expect_json_error("{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAEAAAAAAAA=\"}",
                      LIPI_EFORMAT, "expected a trie size");
    json_t *null = json_null();
    lipi_normalizer *n = (lipi_normalizer *)1;
    assert_int_equal(lipi_normalizer_from_json(null, "normalizer", &n, NULL), LIPI_OK);
    assert_null(n);
    json_decref(null);
    json_t *nj = lipi_normalizer_to_json(NULL);
    assert_true(json_is_null(nj));
    json_decref(nj);
}

static void test_json_round_trip_is_exact_for_every_type(void **state)
{
    (void)state;
    static const char *docs[] = {
        "{\"type\":\"NFC\"}", "{\"type\":\"NFD\"}", "{\"type\":\"NFKC\"}", "{\"type\":\"NFKD\"}",
        "{\"type\":\"Lowercase\"}", "{\"type\":\"StripAccents\"}", "{\"type\":\"Nmt\"}",
        "{\"type\":\"ByteLevel\"}",
        "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":false,"
        "\"strip_accents\":null,\"lowercase\":true}",
        "{\"type\":\"BertNormalizer\",\"clean_text\":false,\"handle_chinese_chars\":true,"
        "\"strip_accents\":false,\"lowercase\":false}",
        "{\"type\":\"BertNormalizer\",\"clean_text\":false,\"handle_chinese_chars\":true,"
        "\"lowercase\":false}",
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\"''\"},\"content\":\"\\\"\"}",
        "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" {2,}\"},\"content\":\" \"}",
        "{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"}",
        "{\"type\":\"Strip\",\"strip_left\":false,\"strip_right\":true}",
        "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAAAAA==\"}",
        "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAAAAA==\",\"lipi_longest_match\":true}",
        "{\"type\":\"Sequence\",\"normalizers\":[]}",
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Sequence\",\"normalizers\":["
        "{\"type\":\"NFKC\"}]},{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":"
        "\"b\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"b\"},\"content\":\"c\"}]}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        json_t *in = json_loads(docs[i], 0, NULL);
        assert_non_null(in);
        lipi_normalizer *n = NULL;
        lipi_error err = {0};
        if (lipi_normalizer_from_json(in, "normalizer", &n, &err) != LIPI_OK)
            fail_msg("%s: %s", docs[i], err.msg);
        json_t *out = lipi_normalizer_to_json(n);
        if (!json_equal(in, out)) {
            char *d = json_dumps(out, JSON_COMPACT);
            fail_msg("round trip of %s gave %s", docs[i], d);
        }
        json_decref(in);
        json_decref(out);
        lipi_normalizer_free(n);
    }
}

static void test_chained_single_char_replaces_compose_like_the_chain(void **state)
{
    (void)state;
    /* a->b then b->c: an original "a" ends as "c", an original "b" too. */
    lipi_normalizer *n = from_json_text(
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
        "\"a\"},\"content\":\"bb\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"b\"},"
        "\"content\":\"c\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"x\"},\"content\":"
        "\"\"}]}");
    expect_norm(n, "abxa", "ccccc");
    static const size_t want[][2] = {{0, 1}, {0, 1}, {1, 2}, {3, 4}, {3, 4}};
    expect_align(n, "abxa", "ccccc", want, 5);
    lipi_normalizer_free(n);
}

/* ======================================================================== */
/* Precompiled with hostile charsmaps                                        */
/* ======================================================================== */

static lipi_normalizer *precompiled_from_blob(const uint8_t *blob, size_t len, bool longest)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *b64 = malloc((len + 2) / 3 * 4 + 1), *o = b64;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)blob[i] << 16 | (i + 1 < len ? (uint32_t)blob[i + 1] << 8 : 0) |
                     (i + 2 < len ? blob[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? tab[v & 63] : '=';
    }
    *o = '\0';
    json_t *j = json_pack("{s:s, s:s, s:b}", "type", "Precompiled", "precompiled_charsmap", b64,
                          "lipi_longest_match", longest);
    lipi_normalizer *n = NULL;
    lipi_normalizer_from_json(j, "normalizer", &n, NULL);
    json_decref(j);
    free(b64);
    return n;
}

/* Random trie units and pool offsets must never make normalization read
 * outside the charsmap (run under ASan by make check). */
static void test_hostile_charsmaps_never_read_out_of_bounds(void **state)
{
    (void)state;
    uint8_t blob[4 + 64 * 4 + 16];
    uint32_t seed = 12345;
    const char *text = "ab\xC3\xA9 \xE0\xA4\x95\xE0\xA4\xBC \xF0\x9F\x98\x80 ｶﾞ\x01";
    lipi_normalized out = {0};
    size_t built = 0;
    for (int round = 0; round < 400; round++) {
        size_t units = (size_t)(round % 64) + 1;
        uint32_t trie = (uint32_t)units * 4;
        for (int k = 0; k < 4; k++)
            blob[k] = (uint8_t)(trie >> (8 * k));
        for (size_t i = 4; i < sizeof blob; i++) {
            seed = seed * 1103515245u + 12345u;
            blob[i] = (uint8_t)(seed >> 16);
        }
        /* Steer some units towards valid labels so lookups go deeper. */
        for (size_t i = 0; i < units; i += 3)
            blob[4 + 4 * i] = (uint8_t)text[i % strlen(text)];
        size_t pool = sizeof blob - 4 - trie;
        for (size_t i = 0; i < pool; i++)
            blob[4 + trie + i] = i % 5 == 4 ? 0 : (uint8_t)('a' + i % 26);
        for (int longest = 0; longest < 2; longest++) {
            lipi_normalizer *n = precompiled_from_blob(blob, 4 + trie + pool, longest);
            assert_non_null(n);
            built++;
            assert_int_equal(lipi_normalize(n, text, strlen(text), &out, true, NULL), LIPI_OK);
            assert_int_equal(lipi_utf8_valid_prefix(out.text, out.len), out.len);
            lipi_normalizer_free(n);
        }
    }
    lipi_normalized_free(&out);
    assert_int_equal(built, 800);
}

/* ======================================================================== */
/* Allocation failure                                                        */
/* ======================================================================== */

typedef struct {
    const char *name;
    lipi_normalizer_options o;
} norm_case;

static lipi_status new_and_normalize(void *ctx, lipi_error *err)
{
    const norm_case *c = ctx;
    const char *text = "Ｃafé १२ ന്‍ 中 ΣΑΣ \xE2\x80\x8D x";
    lipi_normalizer *n = NULL;
    lipi_normalized out = {0};
    lipi_status st = lipi_normalizer_new(c->name, &c->o, &n, err);
    if (st == LIPI_OK)
        st = lipi_normalize(n, text, strlen(text), &out, true, err);
    if (st == LIPI_OK)
        assert_int_equal(strlen(out.text), out.len);
    lipi_normalized_free(&out);
    lipi_normalizer_free(n);
    return st;
}

static void test_every_allocation_failure_gives_enomem_and_leaks_nothing(void **state)
{
    (void)state;
    static const norm_case cases[] = {
        {"indic", {.fold_digits = true, .lowercase = true}},
        {"nfkc", {.strip_accents = true, .lowercase = true}},
        {"bert", {.lowercase = true}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        assert_true(alloc_fail_loop(cases[c].name, new_and_normalize, (void *)&cases[c]) > 3);
}

static lipi_status from_json_run(void *ctx, lipi_error *err)
{
    const json_t *j = ctx;
    lipi_normalizer *n = NULL;
    lipi_status st = lipi_normalizer_from_json(j, "normalizer", &n, err);
    json_t *back = NULL;
    if (st == LIPI_OK && !(back = lipi_normalizer_to_json(n)))
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    lipi_normalized out = {0};
    if (st == LIPI_OK)
        st = lipi_normalize(n, "a  cé 中", 11, &out, true, err);
    if (st == LIPI_OK)
        assert_true(json_equal(back, j));
    lipi_normalized_free(&out);
    lipi_normalizer_free(n);
    json_decref(back);
    return st;
}

static void test_json_loading_survives_every_allocation_failure(void **state)
{
    (void)state;
    const char *doc = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":"
                      "\"Replace\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"content\":\" \"},"
                      "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"b\"},"
                      "{\"type\":\"Replace\",\"pattern\":{\"String\":\"c\"},\"content\":\"d\"},"
                      "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":"
                      "true,\"strip_accents\":null,\"lowercase\":true}]}";
    json_t *j = json_loads(doc, 0, NULL);
    assert_non_null(j);
    assert_true(alloc_fail_loop("normalizer json", from_json_run, j) > 10);
    json_decref(j);
}

/* ======================================================================== */
/* Threads                                                                   */
/* ======================================================================== */

typedef struct {
    const lipi_normalizer *n;
    const char *text;
    char result[256];
    lipi_status st;
} thread_job;

static void *normalize_many(void *arg)
{
    thread_job *j = arg;
    lipi_normalized out = {0};
    j->st = LIPI_OK;
    for (int k = 0; k < 300 && j->st == LIPI_OK; k++)
        j->st = lipi_normalize(j->n, j->text, strlen(j->text), &out, k % 2 == 0, NULL);
    snprintf(j->result, sizeof j->result, "%s", out.text ? out.text : "");
    lipi_normalized_free(&out);
    return NULL;
}

/* SentencePiece's whitespace handling (strip, squeeze, prepend and escape
 * spaces) runs as one pass when no alignment is wanted: the same text as
 * the five steps that also track alignments. */
static void test_spm_whitespace_in_one_pass_is_the_steps(void **state)
{
    (void)state;
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    assert_int_equal(
        lipi_tokenizer_open("tests/fixtures/readers/bpe_bytes.model", NULL, &t, &err), LIPI_OK);
    const lipi_normalizer *n = t->normalizer;
    assert_true(lipi_normalizer_has_spm_ws(n));
    static const char *const parts[] = {" ", "  ", "\xe2\x96\x81", "a", "\xe0\xa4\x95",
                                        "\t", "\xef\xbc\xa1", "b c", "\xe2\x80\x83",
                                        "word12345"};
    lipi_normalized fast = {0}, slow = {0};
    unsigned seed = 7;
    char text[256];
    for (int round = 0; round < 3000; round++) {
        size_t len = 0;
        /* Up to 27 parts: words longer than the eight bytes the one pass
         * copies at a time, spaces at every offset in them. */
        int k = (int)(seed % 28);
        for (int j = 0; j < k; j++) {
            seed = seed * 1103515245u + 12345u;
            const char *p = parts[(seed >> 16) % (sizeof parts / sizeof *parts)];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        seed = seed * 1103515245u + 12345u;
        assert_int_equal(lipi_normalize(n, text, len, &fast, false, &err), LIPI_OK);
        assert_int_equal(lipi_normalize(n, text, len, &slow, true, &err), LIPI_OK);
        assert_int_equal(fast.len, slow.len);
        assert_memory_equal(fast.text, slow.text, fast.len);
    }
    lipi_normalized_free(&fast);
    lipi_normalized_free(&slow);
    lipi_tokenizer_free(t);
}

static void test_one_normalizer_is_shared_by_threads(void **state)
{
    (void)state;
    lipi_normalizer *n = from_json_text(
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Replace\","
        "\"pattern\":{\"Regex\":\"\\\\s+\"},\"content\":\" \"},{\"type\":\"Lowercase\"}]}");
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){.n = n, .text = i % 2 ? "ＡＢＣ   ｄｅｆ" : "Ｘ\t\tY  ＺΣ"};
        assert_int_equal(pthread_create(&th[i], NULL, normalize_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].st, LIPI_OK);
        assert_string_equal(jobs[i].result, i % 2 ? "abc def" : "x y zσ");
    }
    lipi_normalizer_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_steps_match_reference_text_and_alignments),
        cmocka_unit_test(test_spm_whitespace_in_one_pass_is_the_steps),
        cmocka_unit_test(test_precompiled_longest_match_agrees_with_sentencepiece),
        cmocka_unit_test(test_precompiled_base_letters_compose_only_with_their_marks),
        cmocka_unit_test(test_charsmap_skip_is_the_plain_walk),
        cmocka_unit_test(test_nfc_makes_nukta_letters_consonant_plus_nukta),
        cmocka_unit_test(test_nfkc_folds_full_width_and_ligatures),
        cmocka_unit_test(test_strip_accents_keeps_indic_matras_and_drops_latin_accents),
        cmocka_unit_test(test_lowercase_is_per_char_without_final_sigma),
        cmocka_unit_test(test_indic_keeps_joiners_inside_words_and_drops_stray_ones),
        cmocka_unit_test(test_fold_digits_maps_indic_digits_to_ascii),
        cmocka_unit_test(test_bert_cleans_controls_spaces_tabs_and_pads_cjk),
        cmocka_unit_test(test_none_copies_and_unknown_name_lists_known_names),
        cmocka_unit_test(test_named_normalizers_serialize_to_the_reference_json),
        cmocka_unit_test(test_alignment_of_a_decomposition_maps_both_chars_to_the_source),
        cmocka_unit_test(test_alignment_of_a_deletion_skips_the_removed_bytes),
        cmocka_unit_test(test_normalize_rejects_invalid_utf8_with_its_offset),
        cmocka_unit_test(test_output_struct_is_reused_across_calls_and_normalizers),
        cmocka_unit_test(test_json_errors_name_the_json_path),
        cmocka_unit_test(test_json_round_trip_is_exact_for_every_type),
        cmocka_unit_test(test_chained_single_char_replaces_compose_like_the_chain),
        cmocka_unit_test(test_hostile_charsmaps_never_read_out_of_bounds),
        cmocka_unit_test(test_every_allocation_failure_gives_enomem_and_leaks_nothing),
        cmocka_unit_test(test_json_loading_survives_every_allocation_failure),
        cmocka_unit_test(test_one_normalizer_is_shared_by_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

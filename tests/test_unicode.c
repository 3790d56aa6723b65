/* Unicode helpers: grapheme clusters (with the ASCII fast path checked
 * against ICU over whole strings) and script lookup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utext.h>

#include "tokenizer/base.h"
#include "tokenizer/tokenizer.h"

/* Boundaries as "0,3,6" for readable failures. */
static void render(const size_t *b, size_t count, char *out, size_t cap)
{
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i <= count && w < cap; i++)
        w += (size_t)snprintf(out + w, cap - w, "%s%zu", i ? "," : "", b[i]);
}

static void check_graphemes(const char *s, size_t len, const char *want)
{
    size_t *b = NULL, cap = 0, count = 99;
    lipi_error err;
    assert_int_equal(lipi_graphemes(s, len, &b, &cap, &count, &err), LIPI_OK);
    char got[512];
    render(b, count, got, sizeof got);
    if (strcmp(got, want) != 0)
        print_error("graphemes of \"%.*s\": want %s, got %s\n", (int)len, s, want, got);
    assert_string_equal(got, want);
    lipi_free(b);
}

#define CHECK(lit, want) check_graphemes(lit, sizeof lit - 1, want)

static void test_one_cluster_each(void **state)
{
    (void)state;
    CHECK("क्षि", "0,12");                     /* conjunct with vowel sign */
    CHECK("👨‍👩‍👧", "0,18");                   /* emoji ZWJ sequence */
    CHECK("e\xcc\x81", "0,3");                /* e + combining acute */
    CHECK("\r\n", "0,2");
    CHECK("நீ", "0,6");
    CHECK("🇮🇳", "0,8");                       /* flag: two regional indicators */
}

static void test_words_split_into_clusters(void **state)
{
    (void)state;
    CHECK("नमस्ते", "0,3,6,18");
    CHECK("हिन्दी", "0,6,18");
    CHECK("abc", "0,1,2,3");
    CHECK("a\r\nb\rc\n", "0,1,3,4,5,6,7");
    CHECK("\r\r\n", "0,1,3");
}

static void test_ascii_next_to_non_ascii_goes_through_icu(void **state)
{
    (void)state;
    CHECK("abe\xcc\x81" "c", "0,1,2,5,6"); /* the mark joins the e before it */
    CHECK("ab\r\n\xcc\x81", "0,1,2,4,6");   /* but never a CR LF */
    CHECK("x\r\n\xe0\xa4\x95", "0,1,3,6");
    CHECK("\xcc\x81" "a", "0,2,3");         /* a lone mark is its own cluster */
    CHECK("a\xe2\x80\x8d" "b", "0,4,5");    /* ZWJ extends the a */
    CHECK("\xd8\x80" "12 x", "0,3,4,5,6");   /* a Prepend (U+0600) holds the 1 */
    CHECK("\xd8\x80\r\n", "0,2,4");         /* but not a CR */
    CHECK("ab\xd8\x80\xd8\x80" "cd\xcc\x81", "0,1,2,7,10"); /* a b ؀؀c d́ */
}

static void test_empty_input_has_no_clusters(void **state)
{
    (void)state;
    size_t *b = NULL, cap = 0, count = 7;
    assert_int_equal(lipi_graphemes("", 0, &b, &cap, &count, NULL), LIPI_OK);
    assert_int_equal(count, 0);
    assert_true(cap >= 1);
    assert_int_equal(b[0], 0);
    assert_int_equal(lipi_graphemes(NULL, 0, &b, &cap, &count, NULL), LIPI_OK);
    assert_int_equal(count, 0);
    lipi_free(b);
}

static void test_buffer_is_reused_and_grown(void **state)
{
    (void)state;
    size_t *b = NULL, cap = 0, count = 0;
    char big[3000];
    memset(big, 'a', sizeof big);
    assert_int_equal(lipi_graphemes(big, sizeof big, &b, &cap, &count, NULL), LIPI_OK);
    assert_int_equal(count, sizeof big);
    assert_true(cap >= sizeof big + 1);
    assert_int_equal(b[sizeof big], sizeof big);
    size_t *kept = b, kept_cap = cap;
    assert_int_equal(lipi_graphemes("ab", 2, &b, &cap, &count, NULL), LIPI_OK);
    assert_ptr_equal(b, kept);
    assert_int_equal(cap, kept_cap);
    assert_int_equal(count, 2);
    lipi_free(b);
}

/* ICU over the whole string, the reference for the fast path. */
static size_t icu_bounds(const char *s, size_t len, size_t *out)
{
    UErrorCode e = U_ZERO_ERROR;
    UText ut = UTEXT_INITIALIZER;
    utext_openUTF8(&ut, s, (int64_t)len, &e);
    UBreakIterator *bi = ubrk_open(UBRK_CHARACTER, "", NULL, 0, &e);
    ubrk_setUText(bi, &ut, &e);
    assert_true(U_SUCCESS(e));
    size_t n = 0;
    for (int32_t p = ubrk_first(bi); p != UBRK_DONE; p = ubrk_next(bi))
        out[n++] = (size_t)p;
    ubrk_close(bi);
    utext_close(&ut);
    return n;
}

static void test_fast_path_and_a_reused_iterator_agree_with_icu_on_random_text(void **state)
{
    (void)state;
    static const char *const atoms[] = {"a", "b", " ", "\r", "\n", "\r\n", "\t", "1", ".",
                                        "\xcc\x81", "\xe2\x80\x8d", "\xe2\x80\x8c", "क", "्",
                                        "ि", "ष", "த", "ீ", "👨", "🏽", "\xef\xb8\x8f", "🇮",
                                        "\xd8\x80" /* U+0600, a Prepend */, "e",
                                        "\xe0\xb5\x8e" /* U+0D4E, a Prepend */, "ക",
                                        "\xea\xb0\x80" /* Hangul */, "\xe1\x84\x80"};
    uint64_t x = 42;
    char s[512];
    size_t want[600], *b = NULL, cap = 0, count, *b2 = NULL, cap2 = 0, count2;
    lipi_grapheme_iter *it = NULL; /* kept across texts, as the BPE trainer does */
    for (int iter = 0; iter < 5000; iter++) {
        size_t n = 0;
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t atoms_n = (x >> 33) % 100; /* up to 400 bytes: short runs and long ones */
        for (size_t i = 0; i < atoms_n; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *a = atoms[(x >> 33) % (sizeof atoms / sizeof *atoms)];
            memcpy(s + n, a, strlen(a));
            n += strlen(a);
        }
        size_t nw = n ? icu_bounds(s, n, want) : 1;
        if (!n)
            want[0] = 0;
        assert_int_equal(lipi_graphemes(s, n, &b, &cap, &count, NULL), LIPI_OK);
        if (count + 1 != nw || memcmp(b, want, nw * sizeof *b) != 0) {
            char g[1024], w[1024];
            render(b, count, g, sizeof g);
            render(want, nw - 1, w, sizeof w);
            fail_msg("\"%.*s\": ICU %s, lipi %s", (int)n, s, w, g);
        }
        assert_int_equal(lipi_graphemes_iter(&it, s, n, &b2, &cap2, &count2, NULL), LIPI_OK);
        assert_int_equal(count2, count);
        assert_memory_equal(b2, b, (count + 1) * sizeof *b);
    }
    lipi_free(b);
    lipi_free(b2);
    lipi_grapheme_iter_free(it);
}

/* Runs of non-ASCII text longer than the stack buffer go to ICU as UTF-8;
 * the boundaries are the same as for short runs and as ICU's own. */
static void test_long_non_ascii_runs_agree_with_icu(void **state)
{
    (void)state;
    static const char *const words[] = {"नमस्ते", "क्षि", "👨‍👩‍👧", "தமிழ்", "e\xcc\x81"};
    static char s[4096];
    static size_t want[4096];
    size_t *b = NULL, cap = 0, count, *b2 = NULL, cap2 = 0, count2;
    lipi_grapheme_iter *it = NULL;
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t n = 0, wl = strlen(words[w]);
        while (n + wl < 1500) {
            memcpy(s + n, words[w], wl);
            n += wl;
        }
        size_t nw = icu_bounds(s, n, want);
        assert_int_equal(lipi_graphemes(s, n, &b, &cap, &count, NULL), LIPI_OK);
        assert_int_equal(count + 1, nw);
        assert_memory_equal(b, want, nw * sizeof *b);
        /* the same text, and a short piece of it, through one reused iterator */
        assert_int_equal(lipi_graphemes_iter(&it, s, n, &b2, &cap2, &count2, NULL), LIPI_OK);
        assert_int_equal(count2, count);
        assert_memory_equal(b2, b, nw * sizeof *b);
        assert_int_equal(lipi_graphemes_iter(&it, s, wl, &b2, &cap2, &count2, NULL), LIPI_OK);
        assert_int_equal(b2[count2], wl);
    }
    lipi_free(b);
    lipi_free(b2);
    lipi_grapheme_iter_free(it);
}

/* न म स्ते, space, क्षि, space, family, space, é, space, நீ, space, a b c, CR LF */
#define THREAD_TEXT "नमस्ते क्षि 👨‍👩‍👧 e\xcc\x81 நீ abc\r\n"
#define THREAD_CLUSTERS 16

static void *graphemes_thread(void *v)
{
    int *bad = v;
    size_t *b = NULL, cap = 0, count;
    for (int i = 0; i < 2000; i++) {
        if (lipi_graphemes(THREAD_TEXT, strlen(THREAD_TEXT), &b, &cap, &count, NULL) != LIPI_OK ||
            count != THREAD_CLUSTERS)
            (*bad)++;
    }
    lipi_free(b);
    return NULL;
}

static void test_threads_share_the_break_iterator_prototype(void **state)
{
    (void)state;
    pthread_t th[4];
    int bad[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, graphemes_thread, &bad[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(bad[i], 0);
    }
}

static void test_script_of_code_points(void **state)
{
    (void)state;
    assert_int_equal(lipi_script_of(0x0915), USCRIPT_DEVANAGARI); /* क */
    assert_int_equal(lipi_script_of(0x0BA4), USCRIPT_TAMIL);      /* த */
    assert_int_equal(lipi_script_of(0x09AC), USCRIPT_BENGALI);    /* ব */
    assert_int_equal(lipi_script_of('a'), USCRIPT_LATIN);
    assert_int_equal(lipi_script_of('1'), USCRIPT_COMMON);
    assert_int_equal(lipi_script_of(0x0964), USCRIPT_COMMON);     /* । danda */
    assert_int_equal(lipi_script_of(0x0301), USCRIPT_INHERITED);  /* combining acute */
    assert_int_equal(lipi_script_of(0x200D), USCRIPT_INHERITED);  /* ZWJ */
    assert_int_equal(lipi_script_of(0x1C5A), USCRIPT_OL_CHIKI);
    assert_int_equal(lipi_script_of(0x110000), USCRIPT_INVALID_CODE);
}

/* The cached classes are ICU's, for every code point (the tables are built
 * as blocks are first asked for; beyond the BMP, blocks share rows). */
static void test_char_classes_are_icus(void **state)
{
    (void)state;
    for (uint32_t c = 0; c <= 0x10FFFF; c++) {
        int8_t t = u_charType((UChar32)c);
        unsigned want = u_isUWhiteSpace((UChar32)c) ? LIPI_CC_SPACE : 0;
        if (t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR)
            want |= LIPI_CC_CONTROL;
        if (t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
            t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
            t == U_OTHER_PUNCTUATION)
            want |= LIPI_CC_PUNCT;
        if (t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER)
            want |= LIPI_CC_NUMBER;
        if (t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK)
            want |= LIPI_CC_MARK;
        if (u_hasBinaryProperty((UChar32)c, UCHAR_ALPHABETIC) ||
            u_hasBinaryProperty((UChar32)c, UCHAR_JOIN_CONTROL) || (want & LIPI_CC_MARK) ||
            t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION)
            want |= LIPI_CC_WORD;
        if (lipi_char_class(c) != want)
            fail_msg("U+%04X: class %u, ICU says %u", (unsigned)c, lipi_char_class(c), want);
    }
    /* A few by hand: space, NBSP, tab, '.', DEVANAGARI DANDA, VIRAMA, DIGIT
     * ONE, ZWNJ (Cf), a private-use char. */
    assert_int_equal(lipi_char_class(' '), LIPI_CC_SPACE);
    assert_int_equal(lipi_char_class(0xA0), LIPI_CC_SPACE);
    assert_int_equal(lipi_char_class('\t'), LIPI_CC_SPACE | LIPI_CC_CONTROL);
    assert_int_equal(lipi_char_class('.'), LIPI_CC_PUNCT);
    assert_int_equal(lipi_char_class('_'), LIPI_CC_PUNCT | LIPI_CC_WORD);
    assert_int_equal(lipi_char_class(0x0964), LIPI_CC_PUNCT);
    assert_int_equal(lipi_char_class(0x094D), LIPI_CC_MARK | LIPI_CC_WORD);
    assert_int_equal(lipi_char_class(0x0967), LIPI_CC_NUMBER | LIPI_CC_WORD);
    assert_int_equal(lipi_char_class(0x200C), LIPI_CC_CONTROL | LIPI_CC_WORD);
    assert_int_equal(lipi_char_class(0xE000), LIPI_CC_CONTROL);
    assert_int_equal(lipi_char_class('a'), LIPI_CC_WORD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_cluster_each),
        cmocka_unit_test(test_words_split_into_clusters),
        cmocka_unit_test(test_ascii_next_to_non_ascii_goes_through_icu),
        cmocka_unit_test(test_empty_input_has_no_clusters),
        cmocka_unit_test(test_buffer_is_reused_and_grown),
        cmocka_unit_test(test_fast_path_and_a_reused_iterator_agree_with_icu_on_random_text),
        cmocka_unit_test(test_long_non_ascii_runs_agree_with_icu),
        cmocka_unit_test(test_threads_share_the_break_iterator_prototype),
        cmocka_unit_test(test_script_of_code_points),
        cmocka_unit_test(test_char_classes_are_icus),
    };
    return cmocka_run_group_tests_name("unicode", tests, NULL, NULL);
}

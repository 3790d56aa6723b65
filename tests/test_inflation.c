/* Inflation report: every metric on a hand-made parallel set, parallel
 * files, the four output formats, and the page in headless Chromium. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/report.h"
#include "tests/alloc_fail.h"
#include "tests/refdata.h"
#include "tests/cli_run.h"

#define TOL 1e-6
#define FIXTURES "tests/fixtures/inflation"

/* ------------------------------------------------------------------------ */
/* The hand-made set                                                         */
/* ------------------------------------------------------------------------ */

/* tests/fixtures/inflation/parallel: line 3 is empty in hin.txt, so lines 1,
 * 2 and 4 are kept. ICU words and grapheme clusters (byte offsets):
 *   eng 1 "Hello world."      12 B 12 cp  words Hello[0,5) world[6,11)
 *   eng 2 "I drink tea."      12 B 12 cp  words I drink tea
 *   eng 4 "Thank you!"        10 B 10 cp  words Thank you
 *   hin 1 "नमस्ते दुनिया।"      40 B 14 cp  words नमस्ते[0,18) दुनिया[19,37);
 *                                         clusters न म स्ते[6,18) ...
 *   hin 2 "मैं चाय पीता हूँ।"     45 B 17 cp  words मैं चाय पीता हूँ[33,42); cluster हूँ[33,42)
 *   hin 4 "धन्यवाद!"           22 B  8 cp  word धन्यवाद[0,21); clusters ध न्य[3,12) वा द !
 *   tha 1 "สวัสดีชาวโลก"        36 B 12 cp  words สวัสดี[0,18) ชาว โลก
 *   tha 2 "ฉันดื่มชา"           27 B  9 cp  words ฉัน[0,9) ดื่ม ชา; cluster ฉั[0,6)
 *   tha 4 "ขอบคุณ!"            19 B  7 cp  word ขอบคุณ[0,18)
 * Totals over the kept lines: eng 34 cp 34 B 7 words, hin 39 cp 107 B
 * 7 words, tha 28 cp 82 B 7 words. */
static const char *const LANGS[] = {"eng", "hin", "tha"};
static const char *const TOKS[] = {"A", "B"};
static const char *const LINES[3][4] = {
    {"Hello world.", "I drink tea.", "Good night.", "Thank you!"},
    {"नमस्ते दुनिया।", "मैं चाय पीता हूँ।", "", "धन्यवाद!"},
    {"สวัสดีชาวโลก", "ฉันดื่มชา", "ราตรีสวัสดิ์", "ขอบคุณ!"},
};

/* Token specs: pieces of the line separated by '|', found left to right;
 * '?' marks an unknown token, '#' a byte-fallback one, "#=" a byte piece
 * with the same span as the token before (the pieces of one character).
 * Tokenizer A: byte-level BPE style (leading spaces, cuts inside clusters,
 * byte fallback for ँ); B: WordPiece style (spaces dropped, unknowns). */
static const char *const SPECS[2][3][4] = {
    {
        {"Hello| world|.", "I| drink| te|a|.", NULL, "Thank| you|!"},
        /* 1: cut at 12 inside स्ते; 2: cut at 39 inside हूँ, then two cuts
         * between byte pieces of ँ */
        {"नम|स्|ते| दु|नि|या|।", "मैं| चाय| पी|ता| हू|#ँ|#=|#=|।", NULL, "धन्य|वाद|!"},
        /* 2: cut at 3 inside ฉั */
        {"สวัส|ดี|ชาว|โลก", "ฉ|ัน|ดื่ม|ชา", NULL, "ขอบคุณ|!"},
    },
    {
        {"Hello|world|.", "I|drink|tea|.", NULL, "Thank|you|!"},
        {"नमस्ते|दुनिया|।", "मैं|चाय|पी|ता|?हूँ|।", NULL, "धन्यवाद|!"},
        {"?สวัสดีชาวโลก", "ฉัน|ดื่ม|ชา", NULL, "ขอบ|คุณ|!"},
    },
};

typedef struct {
    uint64_t lines, tokens, words, chars, bytes, continued, unknown, fallback, unknown_chars,
        boundaries, splits;
    double tokens_per_line, parity, fertility, chars_per_token, bytes_per_token, continued_share,
        unknown_share, fallback_share, unknown_char_share, split_share;
    bool comparable;
} expected_row;

/* Worked out by hand from the specs above. */
static const expected_row EXPECTED[2][3] = {
    {
        /* A eng: 3+5+3 tokens; "tea" continued; 2+4+2 boundaries */
        {3, 11, 7, 34, 34, 1, 0, 0, 0, 8, 0, 11.0 / 3, 1.0, 11.0 / 7, 34.0 / 11, 34.0 / 11,
         1.0 / 7, 0, 0, 0, 0, true},
        /* A hin: 7+9+3 tokens; continued नमस्ते दुनिया पीता हूँ धन्यवाद;
         * 6+8+2 boundaries, 1+3+0 inside clusters; 3 byte pieces */
        {3, 19, 7, 39, 107, 5, 0, 3, 0, 16, 4, 19.0 / 3, 19.0 / 11, 19.0 / 7, 39.0 / 19,
         107.0 / 19, 5.0 / 7, 0, 3.0 / 19, 0, 4.0 / 16, true},
        /* A tha: 4+4+2 tokens; continued สวัสดี ฉัน; 3+3+1 boundaries, 1 split */
        {3, 10, 7, 28, 82, 2, 0, 0, 0, 7, 1, 10.0 / 3, 10.0 / 11, 10.0 / 7, 2.8, 8.2, 2.0 / 7,
         0, 0, 0, 1.0 / 7, true},
    },
    {
        /* B eng: 3+4+3 tokens, nothing continued, 2+3+2 boundaries */
        {3, 10, 7, 34, 34, 0, 0, 0, 0, 7, 0, 10.0 / 3, 1.0, 10.0 / 7, 3.4, 3.4, 0, 0, 0, 0, 0,
         true},
        /* B hin: 3+6+2 tokens; पीता continued; ?हूँ = 3 unknown characters */
        {3, 11, 7, 39, 107, 1, 1, 0, 3, 8, 0, 11.0 / 3, 1.1, 11.0 / 7, 39.0 / 11, 107.0 / 11,
         1.0 / 7, 1.0 / 11, 0, 3.0 / 39, 0, true},
        /* B tha: 1+3+3 tokens; the unknown line 1 covers 12 of 28 characters
         * (not comparable) and each of its words only once; ขอบคุณ continued */
        {3, 7, 7, 28, 82, 1, 1, 0, 12, 4, 0, 7.0 / 3, 0.7, 1.0, 4.0, 82.0 / 7, 1.0 / 7, 1.0 / 7,
         0, 12.0 / 28, 0, false},
    },
};

/* Parses a spec into tokens over `line`; returns the count. */
static size_t make_tokens(const char *line, const char *spec, lipi_inflation_token *out,
                          size_t cap)
{
    size_t n = 0, pos = 0, len = strlen(line);
    const char *p = spec;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t plen = bar ? (size_t)(bar - p) : strlen(p);
        lipi_inflation_token t = {0};
        if (*p == '?' || *p == '#') {
            t.is_unknown = *p == '?';
            t.is_byte_fallback = *p == '#';
            p++;
            plen--;
        }
        assert_true(n < cap);
        if (plen == 1 && *p == '=') {
            assert_true(n > 0);
            t.start = out[n - 1].start;
            t.end = out[n - 1].end;
        } else {
            const char *at = memmem(line + pos, len - pos, p, plen);
            assert_non_null(at);
            t.start = (size_t)(at - line);
            t.end = t.start + plen;
            pos = t.end;
        }
        out[n++] = t;
        p += plen;
        if (*p == '|')
            p++;
    }
    return n;
}

/* Feeds one kept line of every language to every tokenizer. */
static void feed_line(lipi_inflation_report *rep, size_t file_line)
{
    lipi_inflation_token toks[32];
    for (size_t l = 0; l < 3; l++)
        for (size_t t = 0; t < 2; t++) {
            const char *line = LINES[l][file_line];
            size_t n = make_tokens(line, SPECS[t][l][file_line], toks, 32);
            lipi_error err = {0};
            assert_int_equal(lipi_inflation_add_line(rep, t, l, line, strlen(line), toks, n, &err),
                             LIPI_OK);
        }
}

static lipi_inflation_report *hand_made_report(void)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 2, LANGS, 3, 0, &rep, &err), LIPI_OK);
    feed_line(rep, 0);
    feed_line(rep, 1);
    feed_line(rep, 3);
    return rep;
}

static void assert_near(double got, double want, const char *what, size_t t, size_t l)
{
    if (isnan(want) ? !isnan(got) : !(fabs(got - want) <= TOL))
        fail_msg("%s of %s/%s: expected %.9f, found %.9f", what, TOKS[t], LANGS[l], want, got);
}

static void assert_row(const lipi_inflation_row *r, const expected_row *e, size_t t, size_t l)
{
    assert_string_equal(r->tokenizer, TOKS[t]);
    assert_string_equal(r->language, LANGS[l]);
    const uint64_t got[] = {r->lines, r->tokens, r->words, r->chars, r->bytes, r->continued_words,
                            r->unknown_tokens, r->byte_fallback_tokens, r->unknown_chars,
                            r->boundaries, r->split_boundaries};
    const uint64_t want[] = {e->lines, e->tokens, e->words, e->chars, e->bytes, e->continued,
                             e->unknown, e->fallback, e->unknown_chars, e->boundaries, e->splits};
    static const char *const names[] = {"lines", "tokens", "words", "chars", "bytes",
                                        "continued", "unknown", "fallback", "unknown_chars",
                                        "boundaries", "splits"};
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++)
        if (got[i] != want[i])
            fail_msg("%s of %s/%s: expected %llu, found %llu", names[i], TOKS[t], LANGS[l],
                     (unsigned long long)want[i], (unsigned long long)got[i]);
    assert_near(r->tokens_per_line, e->tokens_per_line, "tokens_per_line", t, l);
    assert_near(r->parity, e->parity, "parity", t, l);
    assert_near(r->fertility, e->fertility, "fertility", t, l);
    assert_near(r->chars_per_token, e->chars_per_token, "chars_per_token", t, l);
    assert_near(r->bytes_per_token, e->bytes_per_token, "bytes_per_token", t, l);
    assert_near(r->continued_share, e->continued_share, "continued_share", t, l);
    assert_near(r->unknown_share, e->unknown_share, "unknown_share", t, l);
    assert_near(r->byte_fallback_share, e->fallback_share, "byte_fallback_share", t, l);
    assert_near(r->unknown_char_share, e->unknown_char_share, "unknown_char_share", t, l);
    assert_near(r->grapheme_split_share, e->split_share, "grapheme_split_share", t, l);
    if (r->comparable != e->comparable)
        fail_msg("comparable of %s/%s: expected %d", TOKS[t], LANGS[l], e->comparable);
}

static void assert_hand_made(const lipi_inflation_report *rep)
{
    assert_int_equal(lipi_inflation_language_count(rep), 3);
    for (size_t t = 0; t < 2; t++)
        for (size_t l = 0; l < 3; l++) {
            lipi_inflation_row r;
            lipi_inflation_get_row(rep, t, l, &r);
            assert_row(&r, &EXPECTED[t][l], t, l);
        }
}

/* ------------------------------------------------------------------------ */
/* Metrics                                                                   */
/* ------------------------------------------------------------------------ */

static void test_every_metric_matches_hand_counts(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    assert_hand_made(rep);
    assert_string_equal(lipi_inflation_reference(rep), "eng");
    lipi_inflation_free(rep);
}

static void test_counts_do_not_depend_on_line_order_or_thread_split(void **state)
{
    lipi_error err = {0};
    lipi_inflation_report *a = NULL, *b = NULL;
    lipi_inflation_report *shape = hand_made_report();
    assert_int_equal(lipi_inflation_new_like(shape, &a, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_new_like(shape, &b, &err), LIPI_OK);
    feed_line(b, 3);
    feed_line(a, 1);
    feed_line(b, 0);
    assert_int_equal(lipi_inflation_merge(a, b, &err), LIPI_OK);
    assert_hand_made(a);
    lipi_inflation_free(a);
    lipi_inflation_free(b);
    lipi_inflation_free(shape);
}

static void test_display_order_follows_first_tokenizer_parity(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    size_t order[3];
    lipi_inflation_language_order(rep, order);
    /* A's parity: tha 0.909, eng 1.0, hin 1.727 */
    assert_int_equal(order[0], 2);
    assert_int_equal(order[1], 0);
    assert_int_equal(order[2], 1);
    lipi_inflation_free(rep);
}

static void test_bad_spans_and_indices_are_rejected_without_counting(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    lipi_error err = {0};
    const char *line = "abc";
    lipi_inflation_token past_end = {2, 4, false, false}, reversed = {2, 1, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, line, 3, &past_end, 1, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "token 0"));
    assert_non_null(strstr(err.msg, "[2, 4)"));
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, line, 3, &reversed, 1, &err), LIPI_EINVAL);
    lipi_inflation_token ok = {0, 3, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 2, 0, line, 3, &ok, 1, &err), LIPI_EINVAL);
    assert_int_equal(lipi_inflation_add_line(rep, 0, 3, line, 3, &ok, 1, &err), LIPI_EINVAL);
    assert_int_equal(lipi_inflation_add_text_line(rep, 0, line, 3, &ok, 1, &err), LIPI_EINVAL);
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, "a\xff", 2, &ok, 0, &err), LIPI_EFORMAT);
    assert_int_equal(err.offset, 1);
    assert_hand_made(rep);
    lipi_inflation_free(rep);
}

static void test_constructor_rejects_duplicates_and_bad_reference(void **state)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    const char *dup[] = {"eng", "eng"};
    assert_int_equal(lipi_inflation_new(TOKS, 2, dup, 2, 0, &rep, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "\"eng\" twice"));
    assert_int_equal(lipi_inflation_new(TOKS, 2, LANGS, 3, 3, &rep, &err), LIPI_EINVAL);
    assert_int_equal(lipi_inflation_new(TOKS, 0, LANGS, 3, 0, &rep, &err), LIPI_EINVAL);
    assert_null(rep);
}

static void test_parity_is_undefined_without_reference_or_over_other_lines(void **state)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 2, LANGS, 3, LIPI_INFLATION_NO_REFERENCE, &rep, &err),
                     LIPI_OK);
    feed_line(rep, 0);
    lipi_inflation_row r;
    lipi_inflation_get_row(rep, 0, 1, &r);
    assert_true(isnan(r.parity));
    assert_null(lipi_inflation_reference(rep));
    lipi_inflation_free(rep);

    assert_int_equal(lipi_inflation_new(TOKS, 2, LANGS, 3, 0, &rep, &err), LIPI_OK);
    feed_line(rep, 0);
    lipi_inflation_token tok = {0, 5, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 1, "extra", 5, &tok, 1, &err), LIPI_OK);
    lipi_inflation_get_row(rep, 0, 1, &r);
    assert_true(isnan(r.parity)); /* 2 lines of hin against 1 of eng */
    lipi_inflation_get_row(rep, 0, 2, &r);
    assert_false(isnan(r.parity));
    lipi_inflation_free(rep);
}

static void test_comparable_allows_exactly_ten_percent_unknown(void **state)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 1, LANGS, 1, 0, &rep, &err), LIPI_OK);
    /* 10 code points, the unknown token covers one: 10% is still comparable */
    lipi_inflation_token t[2] = {{0, 1, true, false}, {1, 10, false, false}};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, "abcdefghij", 10, t, 2, &err), LIPI_OK);
    lipi_inflation_row r;
    lipi_inflation_get_row(rep, 0, 0, &r);
    assert_int_equal(r.unknown_chars, 1);
    assert_true(r.comparable);
    /* a second line of 10 with three unknown characters: 4 of 20 */
    lipi_inflation_token u[3] = {{0, 2, true, false}, {2, 3, true, false}, {3, 10, false, false}};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, "abcdefghij", 10, u, 3, &err), LIPI_OK);
    lipi_inflation_get_row(rep, 0, 0, &r);
    assert_int_equal(r.unknown_chars, 4);
    assert_false(r.comparable);
    lipi_inflation_free(rep);
}

static void test_byte_offsets_inside_a_character_count_as_cluster_splits(void **state)
{
    /* tiktoken-style byte spans: "क" (3 bytes) cut after its first byte,
     * and an unknown byte piece overlapping "ख" counts ख once */
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 1, LANGS, 1, 0, &rep, &err), LIPI_OK);
    const char *line = "कख";
    lipi_inflation_token t[3] = {{0, 1, false, true}, {1, 3, false, true}, {4, 5, true, false}};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, line, 6, t, 3, &err), LIPI_OK);
    lipi_inflation_row r;
    lipi_inflation_get_row(rep, 0, 0, &r);
    assert_int_equal(r.boundaries, 2);
    assert_int_equal(r.split_boundaries, 2); /* at byte 1, and 3..4 leaves a gap inside ख */
    assert_int_equal(r.unknown_chars, 1);
    assert_int_equal(r.words, 1);
    assert_int_equal(r.continued_words, 1);
    lipi_inflation_free(rep);
}

static void test_line_analysis_is_redone_when_the_text_changes_in_place(void **state)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 1, LANGS, 1, 0, &rep, &err), LIPI_OK);
    char buf[] = "ab cd";
    lipi_inflation_token t = {0, 5, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, buf, 5, &t, 1, &err), LIPI_OK);
    memcpy(buf, "abcde", 5); /* same address and length, one word now */
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, buf, 5, &t, 1, &err), LIPI_OK);
    lipi_inflation_row r;
    lipi_inflation_get_row(rep, 0, 0, &r);
    assert_int_equal(r.words, 3);
    assert_int_equal(r.continued_words, 0);
    lipi_inflation_free(rep);
}

/* xorshift64*: a fixed sequence, so the property test is reproducible. */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static void test_random_spans_keep_every_count_in_range(void **state)
{
    /* Arbitrary spans (overlapping, empty, out of order, mid-character) on
     * every fixture line, in both modes: never an error, and each part
     * stays within its whole. */
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    lipi_inflation_report *rep = NULL, *text = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 1, LANGS, 3, 0, &rep, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_new_text(TOKS, 1, &text, &err), LIPI_OK);
    lipi_inflation_token toks[24];
    for (int round = 0; round < 200; round++)
        for (size_t l = 0; l < 3; l++) {
            const char *line = LINES[l][round % 4];
            size_t len = strlen(line), n = next_random(&seed) % 24;
            for (size_t i = 0; i < n; i++) {
                size_t a = len ? next_random(&seed) % (len + 1) : 0;
                size_t b = len ? next_random(&seed) % (len + 1) : 0;
                uint64_t flags = next_random(&seed);
                toks[i] = (lipi_inflation_token){a < b ? a : b, a < b ? b : a, flags % 5 == 0,
                                                 flags % 7 == 0};
            }
            assert_int_equal(lipi_inflation_add_line(rep, 0, l, line, len, toks, n, &err),
                             LIPI_OK);
            assert_int_equal(lipi_inflation_add_text_line(text, 0, line, len, toks, n, &err),
                             LIPI_OK);
        }
    uint64_t tokens_of[2] = {0, 0}, chars_of[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) {
        const lipi_inflation_report *r = mode ? text : rep;
        for (size_t l = 0; l < lipi_inflation_language_count(r); l++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(r, 0, l, &row);
            assert_true(row.continued_words <= row.words);
            assert_true(row.split_boundaries <= row.boundaries);
            assert_true(row.boundaries <= row.tokens);
            assert_true(row.unknown_tokens <= row.tokens);
            assert_true(row.byte_fallback_tokens <= row.tokens);
            assert_true(row.unknown_chars <= row.chars);
            assert_true(row.chars <= row.bytes);
            assert_true(row.lines <= 600);
            tokens_of[mode] += row.tokens;
            chars_of[mode] += row.chars;
        }
    }
    /* text mode distributes the same tokens and characters over scripts */
    assert_true(tokens_of[0] > 0);
    assert_int_equal(tokens_of[1], tokens_of[0]);
    assert_int_equal(chars_of[1], chars_of[0]);
    lipi_inflation_free(rep);
    lipi_inflation_free(text);
}

/* ------------------------------------------------------------------------ */
/* Text mode                                                                 */
/* ------------------------------------------------------------------------ */

static void test_text_mode_counts_per_script(void **state)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new_text(TOKS, 1, &rep, &err), LIPI_OK);
    /* "Hi नमस्ते, ok": words Hi[0,2) Latin, नमस्ते[3,21) Devanagari, ok[23,25)
     * Latin; the space after Hi is Latin, ", " after नमस्ते Devanagari.
     * Latin: H i ␠ o k = 5 cp; Devanagari: 6 + 2 = 8 cp, 20 bytes.
     * Tokens: Hi (Latin) | ␠नम (first word it overlaps: Devanagari) | स्ते |
     * , (no word: Devanagari by its byte) | ␠ok (Latin). */
    const char *line = "Hi नमस्ते, ok";
    lipi_inflation_token toks[8];
    size_t n = make_tokens(line, "Hi| नम|स्ते|,| ok", toks, 8);
    assert_int_equal(lipi_inflation_add_text_line(rep, 0, line, strlen(line), toks, n, &err),
                     LIPI_OK);
    /* "123": one number word, Common; cut into two tokens */
    n = make_tokens("123", "12|3", toks, 8);
    assert_int_equal(lipi_inflation_add_text_line(rep, 0, "123", 3, toks, n, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, "x", 1, toks, 0, &err), LIPI_EINVAL);

    assert_int_equal(lipi_inflation_language_count(rep), 3);
    size_t order[3];
    lipi_inflation_language_order(rep, order); /* by characters: 8, 5, 3 */
    const char *names[3];
    for (size_t i = 0; i < 3; i++)
        names[i] = lipi_inflation_language_name(rep, order[i]);
    assert_string_equal(names[0], "Devanagari");
    assert_string_equal(names[1], "Latin");
    assert_string_equal(names[2], "Common");

    lipi_inflation_row r;
    lipi_inflation_get_row(rep, 0, order[0], &r);
    assert_int_equal(r.lines, 1);
    assert_int_equal(r.tokens, 3);
    assert_int_equal(r.words, 1);
    assert_int_equal(r.chars, 8);
    assert_int_equal(r.bytes, 20);
    assert_int_equal(r.continued_words, 1);
    assert_int_equal(r.boundaries, 3);
    assert_int_equal(r.split_boundaries, 0);
    assert_true(isnan(r.parity));
    assert_true(fabs(r.fertility - 3.0) < TOL);
    lipi_inflation_get_row(rep, 0, order[1], &r);
    assert_int_equal(r.tokens, 2);
    assert_int_equal(r.words, 2);
    assert_int_equal(r.chars, 5);
    assert_int_equal(r.continued_words, 0);
    assert_int_equal(r.boundaries, 1);
    assert_true(fabs(r.chars_per_token - 2.5) < TOL);
    lipi_inflation_get_row(rep, 0, order[2], &r);
    assert_int_equal(r.lines, 1);
    assert_int_equal(r.tokens, 2);
    assert_int_equal(r.words, 1);
    assert_int_equal(r.continued_words, 1);
    assert_null(lipi_inflation_reference(rep));
    lipi_inflation_free(rep);
}

static void test_text_mode_merge_matches_rows_by_script(void **state)
{
    lipi_inflation_report *a = NULL, *b = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new_text(TOKS, 1, &a, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_new_like(a, &b, &err), LIPI_OK);
    lipi_inflation_token t = {0, 3, false, false};
    assert_int_equal(lipi_inflation_add_text_line(a, 0, "abc", 3, &t, 1, &err), LIPI_OK);
    t.end = 6;
    assert_int_equal(lipi_inflation_add_text_line(b, 0, "ना", 6, &t, 1, &err), LIPI_OK);
    t.end = 3;
    assert_int_equal(lipi_inflation_add_text_line(b, 0, "xyz", 3, &t, 1, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_merge(a, b, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_language_count(a), 2);
    lipi_inflation_row r;
    lipi_inflation_get_row(a, 0, 0, &r);
    assert_string_equal(r.language, "Latin");
    assert_int_equal(r.lines, 2);
    assert_int_equal(r.chars, 6);
    lipi_inflation_get_row(a, 0, 1, &r);
    assert_string_equal(r.language, "Devanagari");
    assert_int_equal(r.tokens, 1);
    lipi_inflation_free(a);
    lipi_inflation_free(b);
}

/* ------------------------------------------------------------------------ */
/* Parallel files (tokenizer/parallel_files.c, on the report's fixtures)      */
/* ------------------------------------------------------------------------ */

static void test_parallel_folder_skips_lines_empty_in_any_file(void **state)
{
    const char *paths[] = {FIXTURES "/parallel"};
    lipi_parallel_files *p = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_parallel_files_open(paths, 1, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_OK);
    assert_int_equal(lipi_parallel_files_count(p), 3); /* README.md is not taken */
    for (size_t l = 0; l < 3; l++)
        assert_string_equal(lipi_parallel_files_label(p, l), LANGS[l]);
    assert_int_equal(lipi_parallel_files_reference(p), 0);
    assert_int_equal(lipi_parallel_files_lines(p), 4);

    lipi_inflation_report *rep = NULL;
    assert_int_equal(lipi_inflation_new(TOKS, 2, LANGS, 3, 0, &rep, &err), LIPI_OK);
    lipi_parallel_batch b = {0};
    size_t seen = 0;
    static const uint64_t want_line[] = {1, 2, 4};
    /* batches of two lines: the skipped line 3 falls inside the second read */
    for (;;) {
        assert_int_equal(lipi_parallel_files_read(p, 2, &b, &err), LIPI_OK);
        if (b.lines == 0)
            break;
        for (size_t i = 0; i < b.lines; i++, seen++) {
            assert_true(seen < 3);
            assert_int_equal(b.line_no[i], want_line[seen]);
            lipi_inflation_token toks[32];
            for (size_t l = 0; l < 3; l++) {
                size_t len;
                const char *line = lipi_parallel_batch_line(&b, l, i, &len);
                const char *want = LINES[l][b.line_no[i] - 1];
                assert_int_equal(len, strlen(want));
                assert_memory_equal(line, want, len);
                for (size_t t = 0; t < 2; t++) {
                    size_t n = make_tokens(want, SPECS[t][l][b.line_no[i] - 1], toks, 32);
                    assert_int_equal(lipi_inflation_add_line(rep, t, l, line, len, toks, n, &err),
                                     LIPI_OK);
                }
            }
        }
    }
    assert_int_equal(seen, 3);
    assert_int_equal(lipi_parallel_files_skipped(p), 1);
    assert_hand_made(rep);
    lipi_parallel_batch_free(&b);
    lipi_inflation_free(rep);
    lipi_parallel_files_close(p);
}

static void test_parallel_line_count_mismatch_names_both_files(void **state)
{
    const char *paths[] = {FIXTURES "/mismatch/hi.txt", FIXTURES "/mismatch/en.txt"};
    lipi_parallel_files *p = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_parallel_files_open(paths, 2, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_EFORMAT);
    assert_null(p);
    assert_non_null(strstr(err.msg, "mismatch/hi.txt has 4 lines"));
    assert_non_null(strstr(err.msg, "mismatch/en.txt has 5"));
    assert_non_null(strstr(err.path, "hi.txt"));
}

static void test_parallel_reference_and_labels(void **state)
{
    lipi_parallel_files *p = NULL;
    lipi_error err = {0};
    const char *three[] = {FIXTURES "/parallel/tha.txt", FIXTURES "/parallel/hin.txt",
                           FIXTURES "/parallel/eng.txt"};
    assert_int_equal(lipi_parallel_files_open(three, 3, "hin", LIPI_INVALID_ERROR, &p, &err),
                     LIPI_OK);
    assert_string_equal(lipi_parallel_files_label(p, 0), "eng"); /* sorted by label */
    assert_int_equal(lipi_parallel_files_reference(p), 1);
    lipi_parallel_files_close(p);
    p = NULL;

    assert_int_equal(lipi_parallel_files_open(three, 3, "fra", LIPI_INVALID_ERROR, &p, &err),
                     LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "expected one of eng, hin, tha, found \"fra\""));
    const char *no_english[] = {three[0], three[1]};
    assert_int_equal(
        lipi_parallel_files_open(no_english, 2, NULL, LIPI_INVALID_ERROR, &p, &err),
        LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "eng_Latn, eng or en"));
    const char *twice[] = {three[2], FIXTURES "/parallel"};
    assert_int_equal(lipi_parallel_files_open(twice, 2, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "one file per language"));
    const char *one[] = {three[1]};
    assert_int_equal(lipi_parallel_files_open(one, 1, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_OK); /* a single file is its own reference */
    assert_int_equal(lipi_parallel_files_reference(p), 0);
    lipi_parallel_files_close(p);
    p = NULL;
    const char *stdin_path[] = {"-"};
    assert_int_equal(lipi_parallel_files_open(stdin_path, 1, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_EINVAL);
    const char *empty_dir[] = {FIXTURES "/mismatch/.."};
    assert_int_equal(lipi_parallel_files_open(empty_dir, 1, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_EINVAL);
    assert_null(p);
}

static void test_parallel_labels_drop_extension_and_compression(void **state)
{
    char dir[] = "/tmp/lipi-infl-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/eng_Latn.devtest", dir);
    snprintf(b, sizeof b, "%s/hin_Deva.dev", dir);
    FILE *f = fopen(a, "w");
    fputs("one\n", f);
    fclose(f);
    f = fopen(b, "w");
    fputs("एक\n", f);
    fclose(f);
    const char *paths[] = {dir};
    lipi_parallel_files *p = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_parallel_files_open(paths, 1, NULL, LIPI_INVALID_ERROR, &p, &err),
                     LIPI_OK);
    assert_string_equal(lipi_parallel_files_label(p, 0), "eng_Latn");
    assert_string_equal(lipi_parallel_files_label(p, 1), "hin_Deva");
    lipi_parallel_files_close(p);
    unlink(a);
    unlink(b);
    rmdir(dir);
}

/* ------------------------------------------------------------------------ */
/* Outputs                                                                   */
/* ------------------------------------------------------------------------ */

/* The report in `fmt` as a NUL-terminated string (free()). */
static char *render(const lipi_inflation_report *rep, lipi_inflation_format fmt)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_write(rep, fmt, f, &err), LIPI_OK);
    fclose(f);
    return buf;
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_json_output_parses_back_with_every_field(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    lipi_inflation_set_skipped_lines(rep, 1);
    char *text = render(rep, LIPI_INFLATION_JSON);
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root)
        fail_msg("JSON line %d: %s\n%s", jerr.line, jerr.text, text);
    assert_string_equal(json_string_value(json_object_get(root, "reference")), "eng");
    assert_int_equal(json_integer_value(json_object_get(root, "skipped_lines")), 1);
    assert_int_equal(json_integer_value(json_object_get(root, "lines")), 3);
    json_t *toks = json_object_get(root, "tokenizers");
    assert_int_equal(json_array_size(toks), 2);
    assert_string_equal(json_string_value(json_array_get(toks, 1)), "B");
    json_t *langs = json_object_get(root, "languages");
    assert_int_equal(json_array_size(langs), 3);
    assert_string_equal(json_string_value(json_array_get(langs, 0)), "tha");
    json_t *rows = json_object_get(root, "rows");
    assert_int_equal(json_array_size(rows), 6);
    static const size_t order[3] = {2, 0, 1};
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < 3; i++) {
            json_t *row = json_array_get(rows, t * 3 + i);
            const expected_row *e = &EXPECTED[t][order[i]];
            assert_string_equal(json_string_value(json_object_get(row, "tokenizer")), TOKS[t]);
            assert_string_equal(json_string_value(json_object_get(row, "language")),
                                LANGS[order[i]]);
            assert_int_equal(json_integer_value(json_object_get(row, "lines")), e->lines);
            assert_int_equal(json_integer_value(json_object_get(row, "tokens")), e->tokens);
            const struct {
                const char *key;
                double want;
            } reals[] = {
                {"parity", e->parity},
                {"fertility", e->fertility},
                {"chars_per_token", e->chars_per_token},
                {"bytes_per_token", e->bytes_per_token},
                {"continued_words", e->continued_share},
                {"unknown_share", e->unknown_share},
                {"byte_fallback_share", e->fallback_share},
                {"grapheme_split_share", e->split_share},
            };
            for (size_t k = 0; k < sizeof reals / sizeof reals[0]; k++) {
                json_t *v = json_object_get(row, reals[k].key);
                if (!json_is_real(v))
                    fail_msg("%s/%s: %s is not a number", TOKS[t], LANGS[order[i]], reals[k].key);
                assert_near(json_real_value(v), reals[k].want, reals[k].key, t, order[i]);
            }
            assert_true(json_is_boolean(json_object_get(row, "comparable")));
            assert_int_equal(json_boolean_value(json_object_get(row, "comparable")),
                             e->comparable);
        }
    json_decref(root);
    free(text);
    lipi_inflation_free(rep);
}

static void test_json_text_mode_has_null_reference_and_parity(void **state)
{
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new_text(TOKS, 1, &rep, &err), LIPI_OK);
    lipi_inflation_token t = {0, 3, false, false};
    assert_int_equal(lipi_inflation_add_text_line(rep, 0, "abc", 3, &t, 1, &err), LIPI_OK);
    char *text = render(rep, LIPI_INFLATION_JSON);
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    assert_true(json_is_null(json_object_get(root, "reference")));
    json_t *row = json_array_get(json_object_get(root, "rows"), 0);
    assert_true(json_is_null(json_object_get(row, "parity")));
    assert_string_equal(json_string_value(json_object_get(row, "language")), "Latin");
    json_decref(root);
    free(text);
    lipi_inflation_free(rep);
}

static void test_csv_has_header_and_fixed_precision_rows(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    char *text = render(rep, LIPI_INFLATION_CSV);
    const char *header =
        "tokenizer,language,lines,tokens,words,chars,bytes,tokens_per_line,parity,fertility,"
        "chars_per_token,bytes_per_token,continued_words,unknown_share,byte_fallback_share,"
        "unknown_char_share,grapheme_split_share,comparable\n";
    assert_memory_equal(text, header, strlen(header));
    assert_non_null(strstr(text, "\nA,hin,3,19,7,39,107,6.333333,1.727273,2.714286,2.052632,"
                                 "5.631579,0.714286,0.000000,0.157895,0.000000,0.250000,true\n"));
    assert_non_null(strstr(text, "\nB,tha,3,7,7,28,82,2.333333,0.700000,1.000000,4.000000,"
                                 "11.714286,0.142857,0.142857,0.000000,0.428571,0.000000,false\n"));
    assert_int_equal(count_of(text, "\n"), 7);
    free(text);
    lipi_inflation_free(rep);
}

static void test_table_is_aligned_and_flags_incomparable_rows(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    char *text = render(rep, LIPI_INFLATION_TABLE);
    assert_non_null(strstr(text, "Token inflation against eng: 3 aligned lines"));
    /* rows in parity order of A, each with both column groups */
    const char *tha = strstr(text, "\ntha "), *eng = strstr(text, "\neng "),
               *hin = strstr(text, "\nhin ");
    assert_non_null(tha);
    assert_true(tha < eng && eng < hin);
    assert_non_null(strstr(tha, "0.91 "));
    assert_non_null(strstr(tha, "0.70*"));
    assert_non_null(strstr(hin, "1.73 "));
    assert_non_null(strstr(text, "* not comparable"));
    /* every row line is as long as the heading line */
    const char *head = strstr(text, "\nlanguage");
    assert_non_null(head);
    size_t w = strcspn(head + 1, "\n");
    assert_int_equal(strcspn(eng + 1, "\n"), w);
    assert_int_equal(strcspn(tha + 1, "\n"), w);
    free(text);
    lipi_inflation_free(rep);
}

static void test_html_is_self_contained_with_one_bar_per_cell(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    char *html = render(rep, LIPI_INFLATION_HTML);
    assert_non_null(strstr(html, "<svg id=\"chart\""));
    assert_int_equal(count_of(html, "<rect class=\"bar\""), 6);
    assert_int_equal(count_of(html, "<line class=\"reference\" data-value=\"1.0\""), 1);
    assert_non_null(strstr(html, "1.0 = eng"));
    assert_int_equal(count_of(html, "class=\"legend-item\""), 2);
    assert_non_null(strstr(html, "data-value=\"1.727\""));
    /* B on tha is not comparable: one bar drawn faded, its value starred */
    assert_int_equal(count_of(html, "data-comparable=\"false\""), 1);
    assert_non_null(strstr(html, ">0.70*</text>"));
    /* nothing fetched from elsewhere */
    assert_null(strstr(html, "<script src"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "@import"));
    assert_null(strstr(html, "url("));
    assert_int_equal(count_of(html, "http"), count_of(html, "http://www.w3.org/2000/svg"));
    free(html);
    lipi_inflation_free(rep);
}

static void test_html_cost_chart_sets_tokens_beside_attention_on_a_log_axis(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    lipi_cost_model m;
    lipi_error err = {0};
    assert_int_equal(lipi_cost_model_builtin("bert-base", &m, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_set_cost(rep, &m, 512, 2.0, &err), LIPI_OK);
    char *html = render(rep, LIPI_INFLATION_HTML);
    const char *cost = strstr(html, "<svg id=\"cost-chart\"");
    assert_non_null(cost);
    assert_int_equal(count_of(cost, "<rect class=\"bar\""), 12);
    assert_int_equal(count_of(cost, "data-metric=\"linear\""), 6);
    assert_int_equal(count_of(cost, "data-metric=\"attention\""), 6);
    /* per tokenizer, the linear bar (parity) comes right before attention */
    lipi_inflation_cost c;
    lipi_inflation_get_cost(rep, 0, 1, &c); /* A, hin */
    const char *lin = strstr(cost, "data-metric=\"linear\" data-value=\"1.727\"");
    assert_non_null(lin);
    char want[200];
    snprintf(want, sizeof want,
             "data-metric=\"attention\" fill-opacity=\"0.45\" data-value=\"%.3f\"",
             c.attention_ratio);
    assert_true(strstr(lin + 1, "data-metric=") == strstr(lin, want));
    assert_non_null(strstr(lin, "hin \xC2\xB7 A: tokens / KV cache / price 1.727"));
    /* log ticks, 1-2-5, with the reference line at 1 */
    assert_non_null(strstr(cost, "text-anchor=\"middle\">1</text>"));
    assert_non_null(strstr(cost, "text-anchor=\"middle\">2</text>"));
    assert_non_null(strstr(html, "(function(){\nvar svg=document.getElementById('cost-chart')"));
    free(html);
    lipi_inflation_free(rep);
}

static void test_html_axis_ticks_keep_the_decimals_of_their_step(void **state)
{
    /* parity 17: ticks every 2.5 up to 17.5 */
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(TOKS, 1, LANGS, 2, 0, &rep, &err), LIPI_OK);
    lipi_inflation_token t[17];
    for (size_t i = 0; i < 17; i++)
        t[i] = (lipi_inflation_token){i, i + 1, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, "abcdefghijklmnopq", 17, t, 1, &err),
                     LIPI_OK);
    assert_int_equal(lipi_inflation_add_line(rep, 0, 1, "abcdefghijklmnopq", 17, t, 17, &err),
                     LIPI_OK);
    char *html = render(rep, LIPI_INFLATION_HTML);
    assert_non_null(strstr(html, ">2.5</text>"));
    assert_non_null(strstr(html, ">7.5</text>"));
    assert_non_null(strstr(html, ">17.5</text>"));
    assert_null(strstr(html, ">20.0</text>"));
    free(html);
    lipi_inflation_free(rep);
}

static void test_names_are_escaped_in_every_format(void **state)
{
    const char *toks[] = {"a<b>,\"c\""};
    const char *langs[] = {"x&y"};
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(toks, 1, langs, 1, 0, &rep, &err), LIPI_OK);
    lipi_inflation_token t = {0, 1, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 0, "a", 1, &t, 1, &err), LIPI_OK);
    char *html = render(rep, LIPI_INFLATION_HTML);
    assert_null(strstr(html, "a<b>"));
    assert_non_null(strstr(html, "a&lt;b&gt;,&quot;c&quot;"));
    assert_non_null(strstr(html, "x&amp;y"));
    char *csv = render(rep, LIPI_INFLATION_CSV);
    assert_non_null(strstr(csv, "\n\"a<b>,\"\"c\"\"\",x&y,"));
    char *js = render(rep, LIPI_INFLATION_JSON);
    json_t *root = json_loads(js, 0, NULL);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_array_get(json_object_get(root, "tokenizers"), 0)),
                        toks[0]);
    json_decref(root);
    free(html);
    free(csv);
    free(js);
    lipi_inflation_free(rep);
}

static void test_save_writes_atomically_and_reports_bad_paths(void **state)
{
    lipi_inflation_report *rep = hand_made_report();
    char dir[] = "/tmp/lipi-infl-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof path, "%s/report.json", dir);
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_save(rep, LIPI_INFLATION_JSON, path, &err), LIPI_OK);
    json_t *root = json_load_file(path, 0, NULL);
    assert_non_null(root);
    json_decref(root);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* no temporary file left behind */
    assert_int_equal(lipi_inflation_save(rep, LIPI_INFLATION_JSON, path, &err), LIPI_EIO);
    assert_string_equal(err.path, path);
    FILE *full = fopen("/dev/full", "w");
    if (full) { /* a full disk is reported, not ignored */
        assert_int_equal(lipi_inflation_write(rep, LIPI_INFLATION_HTML, full, &err), LIPI_EIO);
        fclose(full);
    }
    lipi_inflation_format fmt;
    assert_int_equal(lipi_inflation_format_parse("html", &fmt, &err), LIPI_OK);
    assert_int_equal(fmt, LIPI_INFLATION_HTML);
    assert_int_equal(lipi_inflation_format_parse("xml", &fmt, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "table, csv, json or html"));
    lipi_inflation_free(rep);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

/* One whole run: build, count every line of both modes, write every format. */
static lipi_status full_run(void *ctx, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_inflation_report *rep = NULL, *other = NULL, *text = NULL;
    lipi_inflation_token toks[32];
    char *buf = NULL;
    size_t size = 0;
    FILE *f = NULL;
    if ((st = lipi_inflation_new(TOKS, 2, LANGS, 3, 0, &rep, err)) != LIPI_OK)
        goto done;
    if ((st = lipi_inflation_new_like(rep, &other, err)) != LIPI_OK)
        goto done;
    static const size_t kept[] = {0, 1, 3};
    for (size_t k = 0; k < 3; k++)
        for (size_t l = 0; l < 3; l++)
            for (size_t t = 0; t < 2; t++) {
                const char *line = LINES[l][kept[k]];
                size_t n = make_tokens(line, SPECS[t][l][kept[k]], toks, 32);
                st = lipi_inflation_add_line(k ? rep : other, t, l, line, strlen(line), toks, n,
                                             err);
                if (st != LIPI_OK)
                    goto done;
            }
    if ((st = lipi_inflation_merge(rep, other, err)) != LIPI_OK)
        goto done;
    if ((st = lipi_inflation_new_text(TOKS, 1, &text, err)) != LIPI_OK)
        goto done;
    for (size_t l = 0; l < 3; l++) {
        const char *line = LINES[l][0];
        size_t n = make_tokens(line, SPECS[0][l][0], toks, 32);
        if ((st = lipi_inflation_add_text_line(text, 0, line, strlen(line), toks, n, err)) !=
            LIPI_OK)
            goto done;
    }
    f = open_memstream(&buf, &size);
    for (int fmt = 0; fmt < 4; fmt++) {
        if ((st = lipi_inflation_write(rep, (lipi_inflation_format)fmt, f, err)) != LIPI_OK)
            goto done;
        if ((st = lipi_inflation_write(text, (lipi_inflation_format)fmt, f, err)) != LIPI_OK)
            goto done;
    }
done:
    if (st == LIPI_OK)
        assert_hand_made(rep);
    if (f)
        fclose(f);
    free(buf);
    lipi_inflation_free(rep);
    lipi_inflation_free(other);
    lipi_inflation_free(text);
    (void)ctx;
    return st;
}

static void test_every_allocation_failure_is_reported_without_leaks(void **state)
{
    assert_true(alloc_fail_loop("inflation", full_run, NULL) > 10);
}

/* ------------------------------------------------------------------------ */
/* The page in a real browser                                                */
/* ------------------------------------------------------------------------ */

#define CHROMIUM "/usr/bin/chromium"

/* The DOM of rep's HTML page after headless Chromium ran its script
 * (free()); the caller checked that Chromium is installed. */
static char *chromium_dom(const lipi_inflation_report *rep)
{
    char dir[] = "/tmp/lipi-infl-XXXXXX", profile[] = "/tmp/lipi-chromium-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_non_null(mkdtemp(profile));
    char path[300], cmd[1200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_save(rep, LIPI_INFLATION_HTML, path, &err), LIPI_OK);
    snprintf(cmd, sizeof cmd,
             "timeout 60 " CHROMIUM " --headless --no-sandbox --disable-gpu --disable-quic "
             "--no-first-run --disable-background-networking --disable-component-update "
             "--disable-sync --user-data-dir=%s --dump-dom file://%s 2>/dev/null; rm -rf %s",
             profile, path, profile);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *dom = NULL;
    size_t len = 0, cap = 0;
    char chunk[4096];
    for (size_t k; (k = fread(chunk, 1, sizeof chunk, p)) > 0; len += k) {
        if (len + k + 1 > cap) {
            cap = 2 * (len + k + 1);
            dom = realloc(dom, cap);
            assert_non_null(dom);
        }
        memcpy(dom + len, chunk, k);
    }
    pclose(p);
    unlink(path);
    rmdir(dir);
    if (!dom)
        fail_msg("chromium printed no DOM");
    dom[len] = '\0';
    return dom;
}

/* The opening tag of the svg with `id` in dom, as a string (free()). */
static char *svg_tag(const char *dom, const char *id)
{
    char needle[64];
    snprintf(needle, sizeof needle, "<svg id=\"%s\"", id);
    const char *start = strstr(dom, needle);
    if (!start)
        fail_msg("no %s in the page", needle);
    size_t n = strcspn(start, ">");
    char *tag = strndup(start, n + 1);
    assert_non_null(tag);
    return tag;
}

static void test_html_chart_is_drawn_in_headless_chromium(void **state)
{
    if (access(CHROMIUM, X_OK) != 0)
        SKIP_BECAUSE("%s not installed (Debian package chromium)", CHROMIUM);
    lipi_inflation_report *rep = hand_made_report();
    char *dom = chromium_dom(rep);
    /* data-drawn is set by the page's script from the laid-out boxes: six
     * bars of non-zero size were rendered */
    assert_non_null(strstr(dom, "data-drawn=\"6\""));
    assert_int_equal(count_of(dom, "<rect class=\"bar\""), 6);
    assert_non_null(strstr(dom, "class=\"reference\""));
    assert_null(strstr(dom, "cost-chart"));
    free(dom);
    lipi_inflation_free(rep);
}

static void test_html_cost_chart_is_drawn_in_headless_chromium(void **state)
{
    if (access(CHROMIUM, X_OK) != 0)
        SKIP_BECAUSE("%s not installed (Debian package chromium)", CHROMIUM);
    lipi_inflation_report *rep = hand_made_report();
    lipi_cost_model m;
    lipi_error err = {0};
    assert_int_equal(lipi_cost_model_builtin("bert-base", &m, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_set_cost(rep, &m, 512, NAN, &err), LIPI_OK);
    char *dom = chromium_dom(rep);
    /* each chart's script ran: 6 parity bars, then 3 languages × 2
     * tokenizers × (tokens, attention) = 12 bars, none of zero length on
     * the log scale (the reference's 1.0 included) */
    char *first = svg_tag(dom, "chart"), *cost = svg_tag(dom, "cost-chart");
    assert_non_null(strstr(first, "data-drawn=\"6\""));
    assert_non_null(strstr(cost, "data-drawn=\"12\""));
    assert_int_equal(count_of(dom, "data-metric=\"attention\""), 6);
    free(first);
    free(cost);
    free(dom);
    lipi_inflation_free(rep);
}

/* ------------------------------------------------------------------------ */
/* The `lipi inflation` command                                              */
/* ------------------------------------------------------------------------ */

#define WP FIXTURES "/tokenizers/wordpiece/tokenizer.json"
#define BYTES FIXTURES "/tokenizers/bytes/tokenizer.json"
#define TWO_TOKS "inflation -t " WP " -t " BYTES " --parallel " FIXTURES "/parallel"

static json_t *row_of(json_t *root, const char *tok, const char *lang)
{
    json_t *rows = json_object_get(root, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (strcmp(json_string_value(json_object_get(r, "tokenizer")), tok) == 0 &&
            strcmp(json_string_value(json_object_get(r, "language")), lang) == 0)
            return r;
    }
    fail_msg("no row %s/%s", tok, lang);
    return NULL;
}

static double real_of(json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    assert_true(json_is_real(v));
    return json_real_value(v);
}

static void test_cli_encodes_without_special_tokens_and_counts_by_hand(void **state)
{
    /* WordPiece: eng Hello world . | I drink te ##a . | Thank you ! = 11;
     * hin 3 + 5 + 2 pieces, all [UNK] but "!"; tha 1 + 1 + 2.
     * Byte-fallback BPE: one token per English letter or mark (30), one
     * byte piece per UTF-8 byte of Hindi (102, plus "!") and Thai (81 + 1). */
    cli_result r = cli_run(TWO_TOKS " --format json --threads 2", "", 0);
    assert_int_equal(r.code, 0);
    json_t *root = json_loads(r.out, 0, NULL);
    assert_non_null(root);
    static const struct {
        const char *tok, *lang;
        int tokens;
        double parity;
        bool comparable;
    } want[] = {
        {"wordpiece", "eng", 11, 1.0, true},       {"wordpiece", "hin", 10, 10.0 / 11, false},
        {"wordpiece", "tha", 4, 4.0 / 11, false},  {"bytes", "eng", 30, 1.0, true},
        {"bytes", "hin", 103, 103.0 / 30, true},   {"bytes", "tha", 82, 82.0 / 30, true},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *row = row_of(root, want[i].tok, want[i].lang);
        assert_int_equal(json_integer_value(json_object_get(row, "tokens")), want[i].tokens);
        assert_true(fabs(real_of(row, "parity") - want[i].parity) < TOL);
        assert_int_equal(json_boolean_value(json_object_get(row, "comparable")),
                         want[i].comparable);
    }
    assert_true(fabs(real_of(row_of(root, "wordpiece", "hin"), "unknown_share") - 0.9) < TOL);
    assert_true(fabs(real_of(row_of(root, "wordpiece", "eng"), "continued_words") - 1.0 / 7) <
                TOL);
    assert_true(fabs(real_of(row_of(root, "bytes", "hin"), "byte_fallback_share") - 102.0 / 103) <
                TOL);
    assert_true(fabs(real_of(row_of(root, "bytes", "tha"), "byte_fallback_share") - 81.0 / 82) <
                TOL);
    assert_int_equal(json_integer_value(json_object_get(root, "skipped_lines")), 1);
    json_decref(root);
    cli_result_free(&r);
}

static void test_cli_output_is_the_same_on_any_number_of_threads(void **state)
{
    /* with and without the cost fields (Σn² merged from the shards) */
    static const char *const extra[] = {"", " --cost"};
    for (size_t i = 0; i < 2; i++) {
        cli_result one = cli_runf(TWO_TOKS " --format csv --threads 1%s", extra[i]);
        cli_result four = cli_runf(TWO_TOKS " --format csv --threads 4%s", extra[i]);
        assert_int_equal(one.code, 0);
        assert_int_equal(four.code, 0);
        assert_true((strstr(one.out, ",attention_ratio,") != NULL) == (i == 1));
        assert_string_equal(one.out, four.out);
        cli_result_free(&one);
        cli_result_free(&four);
    }
}

static void test_cli_table_and_html_file(void **state)
{
    cli_result r = cli_run(TWO_TOKS, "", 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Token inflation against eng: 3 aligned lines (1 more skipped"));
    assert_non_null(strstr(r.out, "wordpiece"));
    assert_non_null(strstr(r.out, "* not comparable"));
    cli_result_free(&r);

    char dir[] = "/tmp/lipi-infl-XXXXXX", args[600], path[300];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/report.html", dir);
    snprintf(args, sizeof args, TWO_TOKS " -o %s", path);
    r = cli_run(args, "", 0);
    assert_int_equal(r.code, 0);
    assert_int_equal(r.out_len, 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_non_null(strstr(buf, "<!DOCTYPE html>")); /* format taken from .html */
    unlink(path);
    rmdir(dir);
    cli_result_free(&r);
}

static void test_cli_text_mode_reports_scripts(void **state)
{
    static const char text[] = "Hello नमस्ते दुनिया!\n\nสวัสดีครับ and more\n";
    const char *path = cli_temp_file(text, sizeof text - 1);
    char args[400];
    snprintf(args, sizeof args, "inflation -t " BYTES " --text %s --format json", path);
    cli_result r = cli_run(args, "", 0);
    unlink(path);
    assert_int_equal(r.code, 0);
    json_t *root = json_loads(r.out, 0, NULL);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "mode")), "text");
    assert_true(json_is_null(json_object_get(root, "reference")));
    json_t *row = row_of(root, "bytes", "Devanagari");
    assert_int_equal(json_integer_value(json_object_get(row, "words")), 2);
    assert_int_equal(json_integer_value(json_object_get(row_of(root, "bytes", "Thai"), "lines")), 1);
    assert_int_equal(json_integer_value(json_object_get(row_of(root, "bytes", "Latin"), "lines")),
                     2);
    json_decref(root);
    cli_result_free(&r);
}

static void test_cli_errors_name_the_files_and_usage_errors_exit_2(void **state)
{
    cli_result r = cli_run("inflation -t " WP " --parallel " FIXTURES "/mismatch", "", 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hi.txt has 4 lines"));
    assert_non_null(strstr(r.err, "en.txt has 5"));
    cli_result_free(&r);
    /* an encoding failure names the file and line it happened on */
    char dir[] = "/tmp/lipi-infl-XXXXXX", path[300], args[900];
    assert_non_null(mkdtemp(dir));
    static const char *const files[][2] = {
        {"en.txt", "a\na\n"},
        {"hi.txt", "a\nb\n"},
        {"tok.json", "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,"
                     "\"pre_tokenizer\":{\"type\":\"Whitespace\"},\"post_processor\":null,"
                     "\"decoder\":null,\"model\":{\"type\":\"WordLevel\","
                     "\"vocab\":{\"a\":0},\"unk_token\":\"<unk>\"}}"},
    };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(files[i][1], f);
        fclose(f);
    }
    snprintf(args, sizeof args, "inflation -t %s/tok.json --parallel %s/en.txt %s/hi.txt", dir,
             dir, dir);
    r = cli_run(args, "", 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hi.txt:2:"));
    assert_non_null(strstr(r.err, "<unk>"));
    cli_result_free(&r);
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
        unlink(path);
    }
    rmdir(dir);
    r = cli_run("inflation -t " FIXTURES "/no-such.json --parallel " FIXTURES "/parallel", "", 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "no-such.json"));
    cli_result_free(&r);
    static const char *const usage[] = {
        "inflation --parallel " FIXTURES "/parallel",
        "inflation -t " WP,
        "inflation -t " WP " --parallel x --text y",
        "inflation -t " WP " --parallel x --format xml",
        "inflation -t " WP " --parallel x --threads 0",
        "inflation -t " WP " --text y --reference eng",
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        r = cli_run(usage[i], "", 0);
        if (r.code != 2)
            fail_msg("%s: expected exit 2, found %d (%s)", usage[i], r.code, r.err);
        assert_non_null(strstr(r.err, "lipi inflation"));
        cli_result_free(&r);
    }
    r = cli_run("inflation --help", "", 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "--parallel"));
    cli_result_free(&r);
}

#define FLORES REF_SHARED "/parallel/flores200/devtest"
#define GPT2 REF_FIXTURES "/vocab/gpt2/tokenizer.json"

static void test_cli_cost_fields_match_hand_counts_over_kept_lines(void **state)
{
    /* WordPiece tokens per kept line (line 3 is empty in hin.txt, skipped in
     * all): eng 3 5 3 (Σn 11, Σn² 43), hin 3 5 2 (10, 38), tha 1 1 2 (4, 6).
     * BERT-base per line: 12·(8n·768² + 4n²·768 + 4n·768·3072); KV
     * 2·12·12·64·4·n = 73728n. */
    cli_result r = cli_run(TWO_TOKS " --cost --context 100 --price-per-million 3 --format json",
                           "", 0);
    assert_int_equal(r.code, 0);
    json_t *root = json_loads(r.out, 0, NULL);
    assert_non_null(root);
    static const struct {
        const char *lang;
        double s1, s2;
    } want[] = {{"eng", 11, 43}, {"hin", 10, 38}, {"tha", 4, 6}};
    const double d = 768, dff = 3072;
    double ref_flops = 12 * (8 * 11 * d * d + 4 * 43 * d + 4 * 11 * d * dff);
    for (size_t i = 0; i < 3; i++) {
        json_t *row = row_of(root, "wordpiece", want[i].lang);
        double s1 = want[i].s1, s2 = want[i].s2;
        double flops = 12 * (8 * s1 * d * d + 4 * s2 * d + 4 * s1 * d * dff);
        assert_int_equal(json_integer_value(json_object_get(row, "tokens_squared")), (int)s2);
        assert_true(fabs(real_of(row, "attention_ratio") - s2 / 43) < TOL);
        assert_true(fabs(real_of(row, "forward_flops_per_line") / (flops / 3) - 1) < 1e-9);
        assert_true(fabs(real_of(row, "forward_flops_ratio") - flops / ref_flops) < TOL);
        assert_true(fabs(real_of(row, "kv_cache_bytes_per_line") - 73728 * s1 / 3) < TOL);
        assert_true(fabs(real_of(row, "context_lines") - 100 / (s1 / 3)) < TOL);
        assert_true(fabs(real_of(row, "price_per_1k_lines") - 1000 * s1 / 3 * 3 / 1e6) < TOL);
    }
    json_t *cost = json_object_get(root, "cost");
    json_t *model = json_object_get(cost, "model");
    assert_string_equal(json_string_value(json_object_get(model, "name")), "bert-base");
    assert_int_equal(json_integer_value(json_object_get(cost, "context")), 100);
    json_t *tc = json_array_get(json_object_get(cost, "tokenizers"), 0);
    /* tokens per line 11/3, 10/3, 4/3: |diffs| 1/3 + 7/3 + 2 = 14/3, twice,
     * over 2·3·(25/3) */
    assert_true(fabs(real_of(tc, "gini") - (28.0 / 3) / 50) < TOL);
    assert_true(fabs(real_of(tc, "premium") - 11.0 / 4) < TOL);
    assert_string_equal(json_string_value(json_object_get(tc, "premium_min_language")), "tha");
    json_decref(root);
    cli_result_free(&r);

    /* the 7B decoder: KV 2·32·8·128·2·n = 131072n */
    r = cli_run(TWO_TOKS " --cost-model decoder-7b-gqa --format json", "", 0);
    assert_int_equal(r.code, 0);
    root = json_loads(r.out, 0, NULL);
    assert_non_null(root);
    assert_true(fabs(real_of(row_of(root, "wordpiece", "hin"), "kv_cache_bytes_per_line") -
                     131072.0 * 10 / 3) < 1e-3);
    assert_true(json_is_null(json_object_get(row_of(root, "wordpiece", "hin"),
                                             "price_per_1k_lines")));
    json_decref(root);
    cli_result_free(&r);
}

static void test_cli_cost_block_is_shown_in_the_table_only_when_asked(void **state)
{
    cli_result t = cli_run(TWO_TOKS " --cost", "", 0);
    assert_int_equal(t.code, 0);
    assert_non_null(strstr(t.out, "Cost on bert-base: 12 layers"));
    assert_non_null(strstr(t.out, "wordpiece: Gini of tokens per line"));
    assert_non_null(strstr(t.out, "KV MB/1k lines"));
    cli_result_free(&t);
    t = cli_run(TWO_TOKS, "", 0);
    assert_null(strstr(t.out, "Cost on"));
    cli_result_free(&t);
}

/* The page made without --cost is the one made before the cost chart
 * existed, byte for byte: two_tokenizers.html is that page, written by
 * `lipi inflation -t WP -t BYTES --parallel parallel --format html` at the
 * commit that added it. */
static void test_cli_html_without_cost_is_unchanged(void **state)
{
    size_t len = 0;
    char *want = cli_slurp(FIXTURES "/two_tokenizers.html", &len);
    assert_non_null(want);
    cli_result r = cli_run(TWO_TOKS " --format html", "", 0);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    cli_result_free(&r);
    free(want);
}

static void test_cli_cost_errors(void **state)
{
    static const struct {
        const char *args;
        int code;
        const char *out, *err; /* expected in standard output / error, or NULL */
    } cases[] = {
        {TWO_TOKS " --cost-model tests/fixtures/cost/missing_layers.json", 1, NULL,
         "missing_layers.json: expected num_hidden_layers"},
        {TWO_TOKS " --context 0", 2, NULL, "--context"},
        {TWO_TOKS " --price-per-million -1", 2, NULL, "--price-per-million"},
        {"inflation --help", 0, "kv_cache_bytes_per_line  mean of 2 L n_kv d_head bytes n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = cli_run(cases[i].args, "", 0);
        if (r.code != cases[i].code)
            print_error("%s: exit %d\n%s", cases[i].args, r.code, r.err);
        assert_int_equal(r.code, cases[i].code);
        assert_true(!cases[i].out || strstr(r.out, cases[i].out));
        assert_true(!cases[i].err || strstr(r.err, cases[i].err));
        cli_result_free(&r);
    }
}

static void test_cli_gpt_tokenizers_on_flores_cost_hindi_several_times_english(void **state)
{
    if (!ref_shared("parallel/flores200/devtest/hin_Deva.txt"))
        SKIP_BECAUSE("%s", ref_missing(REF_FLORES_WHOLE));
    cli_result r = cli_run("inflation -t " GPT2 " -t cl100k_base --parallel " FLORES
                           "/eng_Latn.txt " FLORES "/hin_Deva.txt " FLORES
                           "/tam_Taml.txt --format json",
                           "", 0);
    assert_int_equal(r.code, 0);
    json_t *root = json_loads(r.out, 0, NULL);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "lines")), 1012);
    /* GPT-2's byte-level BPE saw little Devanagari or Tamil */
    assert_true(real_of(row_of(root, "gpt2", "hin_Deva"), "parity") > 4.0);
    assert_true(real_of(row_of(root, "gpt2", "tam_Taml"), "parity") > 4.0);
    assert_true(real_of(row_of(root, "gpt2", "eng_Latn"), "fertility") < 1.5);
    /* cl100k (a bare tiktoken name) is better at Hindi than GPT-2, still far
     * from English (Petrov et al. 2023 measure about 4.8 on FLORES) */
    double hin = real_of(row_of(root, "cl100k_base", "hin_Deva"), "parity");
    assert_true(hin > 3.0 && hin < real_of(row_of(root, "gpt2", "hin_Deva"), "parity"));
    json_decref(root);
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_metric_matches_hand_counts),
        cmocka_unit_test(test_counts_do_not_depend_on_line_order_or_thread_split),
        cmocka_unit_test(test_display_order_follows_first_tokenizer_parity),
        cmocka_unit_test(test_bad_spans_and_indices_are_rejected_without_counting),
        cmocka_unit_test(test_constructor_rejects_duplicates_and_bad_reference),
        cmocka_unit_test(test_parity_is_undefined_without_reference_or_over_other_lines),
        cmocka_unit_test(test_comparable_allows_exactly_ten_percent_unknown),
        cmocka_unit_test(test_byte_offsets_inside_a_character_count_as_cluster_splits),
        cmocka_unit_test(test_line_analysis_is_redone_when_the_text_changes_in_place),
        cmocka_unit_test(test_random_spans_keep_every_count_in_range),
        cmocka_unit_test(test_text_mode_counts_per_script),
        cmocka_unit_test(test_text_mode_merge_matches_rows_by_script),
        cmocka_unit_test(test_parallel_folder_skips_lines_empty_in_any_file),
        cmocka_unit_test(test_parallel_line_count_mismatch_names_both_files),
        cmocka_unit_test(test_parallel_reference_and_labels),
        cmocka_unit_test(test_parallel_labels_drop_extension_and_compression),
        cmocka_unit_test(test_json_output_parses_back_with_every_field),
        cmocka_unit_test(test_json_text_mode_has_null_reference_and_parity),
        cmocka_unit_test(test_csv_has_header_and_fixed_precision_rows),
        cmocka_unit_test(test_table_is_aligned_and_flags_incomparable_rows),
        cmocka_unit_test(test_html_is_self_contained_with_one_bar_per_cell),
        cmocka_unit_test(test_html_cost_chart_sets_tokens_beside_attention_on_a_log_axis),
        cmocka_unit_test(test_html_axis_ticks_keep_the_decimals_of_their_step),
        cmocka_unit_test(test_names_are_escaped_in_every_format),
        cmocka_unit_test(test_save_writes_atomically_and_reports_bad_paths),
        cmocka_unit_test(test_every_allocation_failure_is_reported_without_leaks),
        cmocka_unit_test(test_html_chart_is_drawn_in_headless_chromium),
        cmocka_unit_test(test_html_cost_chart_is_drawn_in_headless_chromium),
        cmocka_unit_test(test_cli_encodes_without_special_tokens_and_counts_by_hand),
        cmocka_unit_test(test_cli_output_is_the_same_on_any_number_of_threads),
        cmocka_unit_test(test_cli_table_and_html_file),
        cmocka_unit_test(test_cli_text_mode_reports_scripts),
        cmocka_unit_test(test_cli_errors_name_the_files_and_usage_errors_exit_2),
        cmocka_unit_test(test_cli_cost_fields_match_hand_counts_over_kept_lines),
        cmocka_unit_test(test_cli_cost_block_is_shown_in_the_table_only_when_asked),
        cmocka_unit_test(test_cli_html_without_cost_is_unchanged),
        cmocka_unit_test(test_cli_cost_errors),
        cmocka_unit_test(test_cli_gpt_tokenizers_on_flores_cost_hindi_several_times_english),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

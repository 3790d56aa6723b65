/* The hand-written pre-tokenizer scanners against PCRE2 running the same
 * patterns: the class table on every code point, then the splits of every
 * known pattern on the text files of data/ and ../shared/data (when there),
 * on adversarial cases, and on random strings over every general category.
 * A mismatch prints the input and both splits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <sys/stat.h>
#include <unicode/uchar.h>

#include "tokenizer/pretokenize_impl.h"
#include "tokenizer/scanner_impl.h"
#include "tokenizer/tokenizer.h"
#include "tests/refdata.h"

/* Every pattern lipi knows by name (lipi_split_pattern); the scanner test
 * checks that none is missing. */
static const struct {
    const char *name;
} patterns[] = {
    {"gpt2"}, {"gpt2-no-trailing-space"}, {"cl100k"}, {"cl100k-tiktoken"}, {"qwen2"},
    {"o200k"}, {"o200k-tiktoken"}, {"tekken"}, {"indic"}, {"indic-unigram"},
};
#define N_PATTERNS (sizeof patterns / sizeof *patterns)

/* ------------------------------------------------------------------------ */
/* Two pre-tokenizers per pattern: scanner and PCRE2                         */
/* ------------------------------------------------------------------------ */

typedef struct {
    lipi_pretokenizer *scan[N_PATTERNS], *regex[N_PATTERNS];
    lipi_pieces a, b;
    size_t lines, mismatches;
} pair_set;

static pair_set *pairs_new(void)
{
    pair_set *ps = calloc(1, sizeof *ps);
    assert_non_null(ps);
    for (size_t i = 0; i < N_PATTERNS; i++) {
        lipi_error err;
        const char *pattern = lipi_split_pattern(patterns[i].name);
        assert_int_equal(lipi_pretokenizer_new_pattern(pattern, &ps->scan[i], &err), LIPI_OK);
        assert_int_equal(lipi_pretokenizer_new_pattern(pattern, &ps->regex[i], &err), LIPI_OK);
        if (!lipi_pretokenizer_has_scanner(ps->scan[i]))
            fail_msg("no scanner for the %s pattern", patterns[i].name);
        lipi_pretokenizer_use_scanners(ps->regex[i], false);
    }
    return ps;
}

static void pairs_free(pair_set *ps)
{
    for (size_t i = 0; i < N_PATTERNS; i++) {
        lipi_pretokenizer_free(ps->scan[i]);
        lipi_pretokenizer_free(ps->regex[i]);
    }
    lipi_pieces_free(&ps->a);
    lipi_pieces_free(&ps->b);
    free(ps);
}

static void print_split(const char *label, const lipi_pieces *p)
{
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < p->count; i++) {
        fputs(" [", stderr);
        for (size_t k = p->text_off[i]; k < p->text_off[i + 1]; k++) {
            unsigned char c = (unsigned char)p->text[k];
            if (c < 0x20 || c == 0x7F)
                fprintf(stderr, "\\x%02X", c);
            else
                fputc(c, stderr);
        }
        fprintf(stderr, "]@%zu-%zu", p->src[i].start, p->src[i].end);
    }
    fputc('\n', stderr);
}

static bool same_pieces(const lipi_pieces *a, const lipi_pieces *b)
{
    if (a->count != b->count || a->text_len != b->text_len ||
        memcmp(a->text, b->text, a->text_len) != 0)
        return false;
    for (size_t i = 0; i < a->count; i++)
        if (a->src[i].start != b->src[i].start || a->src[i].end != b->src[i].end ||
            a->text_off[i + 1] != b->text_off[i + 1])
            return false;
    return true;
}

/* Splits s with pattern k both ways; prints the first mismatch. Invalid
 * UTF-8 must be refused the same way. */
static void compare(pair_set *ps, size_t k, const char *s, size_t len, const char *where)
{
    lipi_error ea, eb;
    lipi_status sa = lipi_pretokenize(ps->scan[k], s, len, &ps->a, &ea);
    lipi_status sb = lipi_pretokenize(ps->regex[k], s, len, &ps->b, &eb);
    ps->lines++;
    if (sa == sb && (sa != LIPI_OK || same_pieces(&ps->a, &ps->b)))
        return;
    if (ps->mismatches++ == 0) {
        fprintf(stderr, "first mismatch, pattern %s, %s: \"%.*s\"\n", patterns[k].name, where,
                (int)len, s);
        if (sa == LIPI_OK)
            print_split("scanner", &ps->a);
        if (sb == LIPI_OK)
            print_split("pcre2  ", &ps->b);
    }
}

static void compare_all(pair_set *ps, const char *s, size_t len, const char *where)
{
    for (size_t k = 0; k < N_PATTERNS; k++)
        compare(ps, k, s, len, where);
}

/* ------------------------------------------------------------------------ */
/* The class table                                                           */
/* ------------------------------------------------------------------------ */

static const char *const script_names[LIPI_UC_N_SCRIPTS] = {
    "Latin",    "Devanagari", "Bengali", "Tamil",    "Telugu",   "Gujarati", "Kannada",
    "Malayalam", "Gurmukhi",  "Oriya",   "Sinhala",  "Ol_Chiki", "Meetei_Mayek", "Arabic",
    "Cyrillic", "Greek",      "Armenian", "Hebrew",  "Georgian", "Thai",     "Lao",
    "Tibetan",  "Myanmar",    "Khmer",   "Ethiopic", "Hangul",   NULL,
};

/* Every code point but the surrogates, in order, as UTF-8. */
static char *all_code_points(size_t *len)
{
    char *s = malloc(0x110000 * 4), *w = s;
    assert_non_null(s);
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        w += pt_utf8_put(c, w);
    }
    *len = (size_t)(w - s);
    return s;
}

/* in[c] = 1 for every code point c PCRE2 (UTF + UCP) matches with the
 * one-character class cls. */
static void pcre2_members(const char *cls, const char *all, size_t len, uint8_t *in)
{
    char pat[512];
    snprintf(pat, sizeof pat, "(?:%s)++", cls);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &ec, &eo, NULL);
    assert_non_null(re);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    /* Runs of letters are long (CJK): room for the JIT's frames. */
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
    pcre2_jit_stack_assign(mc, NULL, js);
    memset(in, 0, 0x110000);
    size_t at = 0;
    int rc;
    while (at < len &&
           (rc = pcre2_match(re, (PCRE2_SPTR)all, len, at, PCRE2_NO_UTF_CHECK, md, mc)) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        for (size_t i = ov[0]; i < ov[1];) {
            uint32_t cp;
            i += pt_utf8_next(all + i, &cp);
            in[cp] = 1;
        }
        at = ov[1];
    }
    if (at < len && rc != PCRE2_ERROR_NOMATCH)
        fail_msg("PCRE2 error %d on %s", rc, cls);
    pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
}

static void expect_class(const char *cls, const char *all, size_t len, uint8_t *in,
                         unsigned flag, uint32_t script, size_t *bad)
{
    pcre2_members(cls, all, len, in);
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        bool mine = flag ? (lipi_uc_flags(c) & flag) != 0 : (lipi_uc_scripts(c) & script) != 0;
        if (mine != (in[c] != 0) && (*bad)++ < 5)
            fprintf(stderr, "U+%04X: table says %d for %s, PCRE2 %d\n", (unsigned)c, mine, cls,
                    in[c]);
    }
}

static void test_class_table_equals_pcre2_on_every_code_point(void **state)
{
    (void)state;
    size_t len, bad = 0;
    char *all = all_code_points(&len);
    uint8_t *in = malloc(0x110000);
    assert_non_null(in);
    expect_class("\\p{L}", all, len, in, LIPI_UC_L, 0, &bad);
    expect_class("\\p{N}", all, len, in, LIPI_UC_N, 0, &bad);
    expect_class("\\p{M}", all, len, in, LIPI_UC_M, 0, &bad);
    expect_class("\\p{White_Space}", all, len, in, LIPI_UC_WS, 0, &bad);
    expect_class("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", all, len, in, LIPI_UC_A, 0, &bad);
    expect_class("[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]", all, len, in, LIPI_UC_B, 0, &bad);
    expect_class("[\\r\\n]", all, len, in, LIPI_UC_CRLF, 0, &bad);
    expect_class("[\\x{200C}\\x{200D}]", all, len, in, LIPI_UC_ZW, 0, &bad);
    for (int k = 0; k < LIPI_UC_N_SCRIPTS; k++) {
        char cls[128];
        if (script_names[k])
            snprintf(cls, sizeof cls, "[^\\P{L}\\P{%s}]", script_names[k]);
        else
            snprintf(cls, sizeof cls, "[^\\P{L}\\P{Han}]|[^\\P{L}\\P{Hiragana}]|[^\\P{L}\\P{Katakana}]");
        expect_class(cls, all, len, in, 0, 1u << k, &bad);
    }
    free(in);
    free(all);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------------------ */
/* Text files                                                                */
/* ------------------------------------------------------------------------ */

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Every line of file path, each line with one pattern in turn (line
 * number modulo the pattern count), so that every line and every pattern
 * are covered within the time a test may take. */
static void compare_file(pair_set *ps, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0, no = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        size_t len = (size_t)n;
        if (line[len - 1] == '\n')
            len--;
        char where[1100];
        snprintf(where, sizeof where, "%s:%zu", path, no + 1);
        compare(ps, no % N_PATTERNS, line, len, where);
        no++;
    }
    free(line);
    fclose(f);
}

static void walk(pair_set *ps, const char *dir, size_t *files)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(ps, path, files);
        } else if (has_suffix(path, ".txt") || has_suffix(path, ".inp") ||
                   has_suffix(path, ".md")) {
            if (strstr(path, "/vocab/")) /* one token a line: no sentences */
                continue;
            compare_file(ps, path);
            (*files)++;
        }
    }
    closedir(d);
}

static void test_scanners_split_data_text_like_pcre2(void **state)
{
    (void)state;
    pair_set *ps = pairs_new();
    size_t files = 0;
    walk(ps, "data", &files);
    size_t mism = ps->mismatches;
    pairs_free(ps);
    assert_true(files > 0);
    assert_int_equal(mism, 0);
}

static void test_scanners_split_shared_data_text_like_pcre2(void **state)
{
    (void)state;
    struct stat st;
    if (stat(REF_SHARED, &st) != 0)
        SKIP_BECAUSE("%s", ref_missing("every text file in it"));
    pair_set *ps = pairs_new();
    size_t files = 0;
    walk(ps, REF_SHARED, &files);
    size_t mism = ps->mismatches, lines = ps->lines;
    pairs_free(ps);
    assert_true(files > 0);
    assert_true(lines > 0);
    assert_int_equal(mism, 0);
}

/* ------------------------------------------------------------------------ */
/* Adversarial and random strings                                            */
/* ------------------------------------------------------------------------ */

static const char *const cases[] = {
    "", " ", "  ", "a", " a", "  a", "\ta", " \ta", "a ", "a  ", "a  b", "a \n b",
    "don't", "DON'T", "it's IT'S It'S iT's", "we're WE'RE we'Re we'rE", "I've I'VE I'Ve",
    "I'm I'M", "we'll WE'LL we'Ll we'lL", "I'd I'D", "'s 'S 'Ll 'lL 'LL", "x's x'S x'Ll",
    "'", "''", "'''s", " 's", "  's", "a'", "a' s", "'ſ x'ſ X'ſ", "x'K x'\xe2\x84\xaa",
    "1", "12", "123", "1234", "12345", " 12345", "a12345b", "\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4",
    "\xe0\xa5\xa7\xe0\xa5\xa8\xe0\xa5\xa9\xe0\xa5\xaa\xe0\xa5\xab", "1\xcc\x81" "2\xcc\x81" "3\xcc\x81" "4",
    "hello , world !", "a !", "a  !", " !!", "!!a", "!!\n\n", "!!\r\n/\n/", "a/b", "a//\nb",
    "\r\n", "\n\r", "\r\r\n\n", " \r\n ", "a\r\nb", "a \r\n b", "a\n\n\nb", "\n \n a",
    "\xc2\xa0", "a\xc2\xa0" "b", "a\xc2\x85" "b", "a\xe2\x80\xa8" "b", "\xe3\x80\x80x",
    "\xe2\x80\x8b", "a\xe2\x80\x8c" "b", "a\xe2\x80\x8d" "b", "\xe2\x80\x8d" "a",
    "\xe0\xa4\x95\xe0\xa5\x8d\xe2\x80\x8d\xe0\xa4\xb7", " \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8",
    "\xcc\x81", " \xcc\x81", "a\xcc\x81" "b", "\xcc\x81\xcc\x81" "A", "A\xcc\x81" "B",
    "HELLO world", "Hello World", "hELLO", "\xc7\x85" "a", "A\xc7\x85", "\xca\xb0" "A",
    "ABCdef", "abcDEF", " ABC ", "ABC'S", "abc's", "\xe3\x83\xbc\xe3\x82\xab", "\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae",
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", "\xe0\xb8\xa0\xe0\xb8\xb2\xe0\xb8\xa9\xe0\xb8\xb2",
    "a\xe0\xa4\x95", "\xe0\xa4\x95" "a", "\xd0\x9c\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0" "a",
    "\xf0\x9f\x98\x80\xf0\x9f\x98\x80", "a\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",
    "\xf0\x91\xbc\x84\xf0\x91\xbc\x85", "x\xf0\x9e\x80\xb0", "\xef\xbf\xbd", "\x01\x02 \x7f",
    "   \t\t  x", "x\t\t", "x \t ", "\t\n\t", "\x0b\x0c", "a\x0b\x0c" "b",
};

static void test_scanners_split_adversarial_cases_like_pcre2(void **state)
{
    (void)state;
    pair_set *ps = pairs_new();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        compare_all(ps, cases[i], strlen(cases[i]), "case");
    /* Invalid UTF-8 is refused by both paths. */
    compare_all(ps, "a\xff" "b", 3, "invalid");
    size_t mism = ps->mismatches;
    pairs_free(ps);
    assert_int_equal(mism, 0);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}


/* Characters that decide splits, drawn often. */
static const uint32_t special[] = {
    ' ', ' ', ' ', '\n', '\r', '\t', '\'', '\'', '/', 's', 'S', 't', 'r', 'e', 'E', 'l', 'L',
    'v', 'm', 'd', 'D', '0', '7', 'a', 'Z', '!', '.', ',', '-', 0x17F, 0x212A, 0xA0, 0x85,
    0x2028, 0x3000, 0x200B, 0x200C, 0x200D, 0x301, 0x94D, 0x93F, 0x915, 0x937, 0x966, 0x995,
    0xB95, 0xBCD, 0x30FC, 0x30AB, 0x3042, 0x65E5, 0xD55C, 0x1C5, 0x2B0, 0x1F600, 0x11F04,
};

static void test_scanners_split_random_strings_like_pcre2(void **state)
{
    (void)state;
    /* One pool of code points per general category, from the whole range. */
    enum { CATS = U_CHAR_CATEGORY_COUNT, PER = 48 };
    uint32_t pool[CATS][PER];
    size_t have[CATS] = {0};
    for (uint32_t c = 0; c < 0x110000; c += 1 + rnd(97)) {
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        int8_t t = u_charType((UChar32)c);
        if (have[t] < PER)
            pool[t][have[t]++] = c;
        else if (rnd(8) == 0)
            pool[t][rnd(PER)] = c;
    }
    pair_set *ps = pairs_new();
    char buf[64 * 4 + 1];
    for (int iter = 0; iter < 6000; iter++) {
        size_t n = 1 + rnd(24), w = 0;
        for (size_t k = 0; k < n; k++) {
            uint32_t c;
            if (rnd(2)) {
                c = special[rnd(sizeof special / sizeof *special)];
            } else {
                int t = (int)rnd(CATS);
                if (!have[t] || t == U_SURROGATE)
                    t = U_LOWERCASE_LETTER;
                c = pool[t][rnd((uint32_t)have[t])];
            }
            w += pt_utf8_put(c, buf + w);
        }
        compare_all(ps, buf, w, "random");
    }
    size_t mism = ps->mismatches;
    pairs_free(ps);
    assert_int_equal(mism, 0);
}

/* The pre-tokenizers lipi builds for published tokenizers pick a scanner. */
static void test_known_patterns_select_a_scanner_and_others_do_not(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_PATTERNS; i++) {
        const char *pattern = lipi_split_pattern(patterns[i].name);
        assert_non_null(lipi_scanner_find(pattern, strlen(pattern)));
    }
    assert_null(lipi_scanner_find("\\p{L}+", 6));
    /* One byte less is another pattern. */
    const char *gpt2 = lipi_split_pattern("gpt2");
    assert_null(lipi_scanner_find(gpt2, strlen(gpt2) - 1));
    assert_null(lipi_split_pattern_at(N_PATTERNS, NULL));
    const char *names[] = {"gpt2", "cl100k", "o200k", "indic", "bytelevel"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        lipi_pretokenizer *p = NULL;
        lipi_error err;
        assert_int_equal(lipi_pretokenizer_new(names[i], &p, &err), LIPI_OK);
        assert_true(lipi_pretokenizer_has_scanner(p));
        lipi_pretokenizer_free(p);
    }
    lipi_pretokenizer *p = NULL;
    lipi_error err;
    assert_int_equal(lipi_pretokenizer_new_pattern("\\s+", &p, &err), LIPI_OK);
    assert_false(lipi_pretokenizer_has_scanner(p));
    lipi_pretokenizer_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_patterns_select_a_scanner_and_others_do_not),
        cmocka_unit_test(test_class_table_equals_pcre2_on_every_code_point),
        cmocka_unit_test(test_scanners_split_adversarial_cases_like_pcre2),
        cmocka_unit_test(test_scanners_split_random_strings_like_pcre2),
        cmocka_unit_test(test_scanners_split_data_text_like_pcre2),
        cmocka_unit_test(test_scanners_split_shared_data_text_like_pcre2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

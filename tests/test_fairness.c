/* Fair vocabularies: per-language counts and script split, XLM-R smoothing
 * on hand-computed cases, parity-aware BPE choosing the merge of the
 * worse-compressed language (hand-checked merge list), determinism across
 * threads, --balance none equal to plain training, and the errors of bad
 * options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cli_run.h"
#include "trainer/balance_impl.h"
#include "trainer/trainer.h"

#define DATA "data/flores200/"

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

/* Counts of "word:count" items separated by spaces. */
static lipi_counts *counts_of(const char *spec)
{
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *colon = strrchr(tok, ':');
        assert_non_null(colon);
        *colon = '\0';
        assert_int_equal(lipi_counts_add(c, tok, strlen(tok), strtoull(colon + 1, NULL, 10), NULL),
                         LIPI_OK);
    }
    return c;
}

static void add_lang(lipi_balance *b, const char *name, const char *spec)
{
    lipi_counts *c = counts_of(spec);
    assert_int_equal(lipi_balance_add_lang(b, name, c, NULL), LIPI_OK);
    lipi_counts_free(c);
}

static void add_dev(lipi_balance *b, const char *name, const char *spec)
{
    lipi_counts *c = counts_of(spec);
    bool used;
    assert_int_equal(lipi_balance_add_dev(b, name, c, &used, NULL), LIPI_OK);
    assert_true(used);
    lipi_counts_free(c);
}

/* "l r, l r, ..." of the whole merge list. */
static void merges_string(const lipi_bpe_model *m, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t r = 0; r < lipi_bpe_model_merge_count(m); r++) {
        uint32_t l, rr;
        size_t ll, rl;
        lipi_bpe_model_get_merge(m, r, &l, &rr, NULL, NULL);
        const char *ls = lipi_bpe_model_token(m, l, &ll), *rs = lipi_bpe_model_token(m, rr, &rl);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%.*s %.*s", r ? ", " : "", (int)ll, ls, (int)rl, rs);
    }
}

static void tiny_options(lipi_bpe_options *o)
{
    lipi_bpe_options_default(o);
    o->common.vocab_size = 1000;
    o->common.byte_fallback = false;
    o->min_frequency = 1;
    o->common.threads = 1;
    o->common.grapheme_guard = false;
}

static void train_merges(const lipi_counts *c, const lipi_bpe_options *o, char *out, size_t cap)
{
    lipi_bpe_model *m = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_bpe_train(c, o, &m, &err);
    if (st != LIPI_OK)
        fail_msg("lipi_bpe_train: %s", err.msg);
    merges_string(m, out, cap);
    lipi_bpe_model_free(m);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ======================================================================== */
/* Languages and smoothing                                                   */
/* ======================================================================== */

static void test_mixed_words_go_to_their_dominant_script(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    /* "नमस्ते" is Devanagari; "x१" ties Latin and Devanagari: the first seen
     * wins; "123" and "!" have no script letter. */
    lipi_counts *c = counts_of("hello:3 नमस्ते:2 x१:1 123:4 !:5");
    assert_int_equal(lipi_balance_add_mixed(b, c, NULL), LIPI_OK);
    lipi_counts *train;
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_NONE, 0, &train, NULL), LIPI_OK);
    assert_int_equal(lipi_balance_lang_count(b), 2);
    size_t latn = strcmp(lipi_balance_lang_name(b, 0), "Latn") == 0 ? 0 : 1;
    assert_string_equal(lipi_balance_lang_name(b, latn), "Latn");
    assert_string_equal(lipi_balance_lang_name(b, 1 - latn), "Deva");
    assert_int_equal(lipi_balance_lang_mass(b, latn), 4);
    assert_int_equal(lipi_balance_lang_mass(b, 1 - latn), 2);
    assert_int_equal(lipi_balance_lang_of(b, "123", 3), LIPI_LANG_NONE);
    assert_int_equal(lipi_balance_lang_of(b, "hello", 5), latn + 1);
    /* none: the plain sum */
    assert_int_equal(lipi_counts_size(train), 5);
    assert_int_equal(lipi_counts_total(train), 15);
    lipi_counts_free(train);
    lipi_counts_free(c);
    lipi_balance_free(b);
}

static void test_word_of_two_languages_belongs_to_the_one_counting_it_most(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    add_lang(b, "A", "ok:2 tie:5");
    add_lang(b, "B", "ok:7 tie:5");
    lipi_counts *train;
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_NONE, 0, &train, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_get(train, "ok", 2), 9);
    assert_int_equal(lipi_balance_lang_of(b, "ok", 2), 2);
    assert_int_equal(lipi_balance_lang_of(b, "tie", 3), 1); /* a tie: the first by name */
    lipi_counts_free(train);
    lipi_balance_free(b);
}

/* Masses 900 and 100, alpha 0.5: q = 0.9, 0.1; sqrt(q) = 0.94868, 0.31623;
 * p = 0.75, 0.25; weights p/q = 5/6 and 5/2. */
static void test_smoothed_weights_and_counts_match_the_hand_computed_case(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    add_lang(b, "big", "a:6 b:894");
    add_lang(b, "small", "c:3 d:97");
    uint64_t w[2];
    assert_int_equal(lipi_balance_weights(b, 0.5, w, NULL), LIPI_OK);
    assert_int_equal(w[0], 3579139413ull);  /* round(2^32 * 5/6) */
    assert_int_equal(w[1], 10737418240ull); /* 2^32 * 5/2 */
    lipi_counts *train;
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_SMOOTHED, 0.5, &train, NULL),
                     LIPI_OK);
    /* 6 * 5/6 = 5 (the weight is 2^-32 short, so 4.99999... + 0.5 floors to 5) */
    assert_int_equal(lipi_counts_get(train, "a", 1), 5);
    assert_int_equal(lipi_counts_get(train, "b", 1), 745); /* 894 * 5/6 = 745 */
    assert_int_equal(lipi_counts_get(train, "c", 1), 8);   /* 7.5 rounds half up */
    assert_int_equal(lipi_counts_get(train, "d", 1), 243); /* 242.5 -> 243 */
    lipi_counts_free(train);

    /* alpha 1 keeps the counts, alpha 0 gives every language the same mass */
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_SMOOTHED, 1.0, &train, NULL),
                     LIPI_OK);
    assert_int_equal(lipi_counts_get(train, "b", 1), 894);
    assert_int_equal(lipi_counts_get(train, "d", 1), 97);
    lipi_counts_free(train);
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_SMOOTHED, 0.0, &train, NULL),
                     LIPI_OK);
    assert_int_equal(lipi_counts_get(train, "b", 1), 497); /* 894 * 5/9 = 496.67 */
    assert_int_equal(lipi_counts_get(train, "d", 1), 485); /* 97 * 5 */
    lipi_counts_free(train);

    lipi_error err = {0};
    assert_int_equal(lipi_balance_weights(b, 1.5, w, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "alpha"));
    lipi_balance_free(b);
}

static void test_stray_script_keeps_weight_one(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    /* one Greek word among 10000 Latin ones: not a language to raise */
    lipi_counts *c = counts_of("the:6000 cat:4000 π:1");
    assert_int_equal(lipi_balance_add_mixed(b, c, NULL), LIPI_OK);
    uint64_t w[2];
    assert_int_equal(lipi_balance_weights(b, 0.3, w, NULL), LIPI_OK);
    assert_int_equal(w[0], 1ull << 32);
    assert_int_equal(w[1], 1ull << 32);
    lipi_counts_free(c);
    lipi_balance_free(b);
}

/* ======================================================================== */
/* Parity-aware BPE                                                          */
/* ======================================================================== */

/* The case of the parity tests: language A has "ab" x10 and "cd" x8, B
 * "xyz" x3, C (when `with_c`) "pq" x20 and no dev file; dev A "ab cd"
 * (4 tokens), dev B "xyz xyz xyz" (9 tokens). Returns the counts to train
 * on; *out is the balance. */
static lipi_counts *abc_case(lipi_balance **out, bool with_c)
{
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    add_lang(b, "A", "ab:10 cd:8");
    add_lang(b, "B", "xyz:3");
    if (with_c)
        add_lang(b, "C", "pq:20");
    add_dev(b, "A", "ab:1 cd:1");
    add_dev(b, "B", "xyz:3");
    lipi_counts *train;
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_PARITY, 0, &train, NULL), LIPI_OK);
    *out = b;
    return train;
}


/* Language A: "ab" 10 times, "cd" 8 times; B: "xyz" 3 times. Plain BPE
 * takes a b, c d, x y, xy z by frequency. Dev: A "ab cd" (4 tokens), B
 * "xyz xyz xyz" (9 tokens). B is worst: x y (ties with y z at 3, x sorts
 * first), B has 6; still worst: xy z, B has 3; now A (4) is worst: a b, A
 * has 3; a tie of 3 and 3 goes to the first language by name, A: c d.
 * Languages added in the other order give the same merges. */
static void test_parity_picks_the_merges_of_the_worse_language(void **state)
{
    (void)state;
    lipi_balance *b;
    lipi_counts *train = abc_case(&b, false);
    lipi_bpe_options o;
    tiny_options(&o);
    char got[512];
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "a b, c d, x y, xy z");
    o.common.balance = b;
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "x y, xy z, a b, c d");
    /* Within a threshold of 3 (9 / 4 < 3) the merges stay plain. */
    o.parity_threshold = 3.0;
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "a b, c d, x y, xy z");
    /* Exponent 1: scores count * cost / best cost. A 10 * 1 beats B 3 * 9/4;
     * then B 3 * 9/3 = 9 beats A 8; then A 8 beats B 3 * 6/3; then B. */
    o.parity_threshold = 0.0;
    o.parity_exponent = 1.0;
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "a b, x y, c d, xy z");
    lipi_counts_free(train);
    lipi_balance_free(b);

    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    add_lang(b, "B", "xyz:3");
    add_dev(b, "B", "xyz:3");
    add_lang(b, "A", "ab:10 cd:8");
    add_dev(b, "A", "ab:1 cd:1");
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_PARITY, 0, &train, NULL), LIPI_OK);
    assert_string_equal(lipi_balance_lang_name(b, 0), "A");
    tiny_options(&o);
    o.common.balance = b;
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "x y, xy z, a b, c d");
    lipi_counts_free(train);
    lipi_balance_free(b);
}

/* Targets (the paper's rule). B at 3 (the default "*"): its 9 dev tokens
 * count 3 against A's 4, so A is worst: a b (A 3), a 3-3 tie goes to A:
 * c d (A 2), then B: x y, xy z (the plain order; without targets B goes
 * first). A at 0.5: A's 4 count 8 against B's 9: x y (B 6), then A 8:
 * a b (A 6), a 6-6 tie to A: c d, then B: xy z. A target for a name that
 * is no language, or out of range, is an error. */
static void test_parity_targets_scale_the_cost_of_their_language(void **state)
{
    (void)state;
    lipi_balance *b;
    lipi_counts *train = abc_case(&b, false);
    lipi_error err;
    assert_int_equal(lipi_balance_set_target(b, "C", 1.5, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "'C', which is no language"));
    assert_int_equal(lipi_balance_set_target(b, "A", 0.001, &err), LIPI_EINVAL);
    assert_int_equal(lipi_balance_set_target(b, "*", 3.0, NULL), LIPI_OK);
    assert_int_equal(lipi_balance_set_target(b, "A", 1.0, NULL), LIPI_OK);
    lipi_bpe_options o;
    tiny_options(&o);
    o.common.balance = b;
    char got[512];
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "a b, c d, x y, xy z");
    assert_int_equal(lipi_balance_set_target(b, "*", 1.0, NULL), LIPI_OK);
    assert_int_equal(lipi_balance_set_target(b, "A", 0.5, NULL), LIPI_OK);
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "x y, a b, c d, xy z");
    lipi_counts_free(train);
    lipi_balance_free(b);
}

/* BPE parity_others, exponent 1. A language without a dev file (C) is
 * never chosen by default, so its pair p q comes last (the plain choice
 * once no dev language has a pair). With W = 1 its best pair scores
 * 20 * 1 and comes first (A 10 * 4/4, B 3 * 9/4). With W = 0.5 it scores
 * 10: a tie with A goes to the dev language (a b), then 10 beats B's
 * 3 * 9/3 and A's 8. */
static void test_bpe_parity_others_lets_languages_without_dev_compete(void **state)
{
    (void)state;
    lipi_balance *b;
    lipi_counts *train = abc_case(&b, true);
    lipi_bpe_options o;
    tiny_options(&o);
    o.common.balance = b;
    o.parity_exponent = 1.0;
    char got[512];
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "a b, x y, c d, xy z, p q");
    o.parity_others = 1.0;
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "p q, a b, x y, c d, xy z");
    o.parity_others = 0.5;
    train_merges(train, &o, got, sizeof got);
    assert_string_equal(got, "a b, p q, x y, c d, xy z");
    o.parity_others = 2.0;
    lipi_bpe_model *m = NULL;
    lipi_error err;
    assert_int_equal(lipi_bpe_train(train, &o, &m, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "parity others weight in [0, 1]"));
    lipi_counts_free(train);
    lipi_balance_free(b);
}

/* The dev file counts by script when its label names no training language. */
static void test_dev_file_joins_the_language_of_its_script(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    lipi_counts *c = counts_of("नमस्ते:5 hello:50");
    assert_int_equal(lipi_balance_add_mixed(b, c, NULL), LIPI_OK);
    lipi_counts_free(c);
    c = counts_of("भारत:2");
    bool used = false;
    assert_int_equal(lipi_balance_add_dev(b, "hin_Deva", c, &used, NULL), LIPI_OK);
    assert_true(used);
    lipi_counts_free(c);
    c = counts_of("Ὀδυσσεύς:2");
    assert_int_equal(lipi_balance_add_dev(b, "ell_Grek", c, &used, NULL), LIPI_OK);
    assert_false(used);
    lipi_counts_free(c);
    size_t deva = strcmp(lipi_balance_lang_name(b, 0), "Deva") == 0 ? 1 : 2, files;
    assert_non_null(lipi_balance_dev(b, (uint32_t)deva, &files));
    assert_int_equal(files, 1);
    lipi_balance_free(b);
}

/* Words of two scripts, enough for the parallel rewrite (lists of 4096+
 * words) to run. */
static lipi_counts *two_script_corpus(void)
{
    static const char *const lat[] = {"ka", "ri", "to", "ne", "su", "mo"};
    static const char *const dev[] = {"क", "र", "त", "न", "स", "म", "ि", "ा", "े"};
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    uint64_t x = 12345;
    for (int i = 0; i < 30000; i++) {
        char w[64] = "";
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int len = 2 + (int)((x >> 60) & 3);
        bool devanagari = (x >> 40) % 5 == 0;
        for (int k = 0; k < len; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            strcat(w, devanagari ? dev[(x >> 33) % 9] : lat[(x >> 33) % 6]);
        }
        assert_int_equal(lipi_counts_add(c, w, strlen(w), 1 + (x >> 61), NULL), LIPI_OK);
    }
    return c;
}

/* Same pieces with the same scores, in the same order. */
static bool same_pieces(const lipi_unigram_model *a, const lipi_unigram_model *b)
{
    if (lipi_unigram_model_vocab_size(a) != lipi_unigram_model_vocab_size(b))
        return false;
    for (uint32_t i = 0; i < lipi_unigram_model_vocab_size(a); i++) {
        size_t l1, l2;
        double s1, s2;
        const char *p1 = lipi_unigram_model_piece(a, i, &l1, &s1, NULL);
        const char *p2 = lipi_unigram_model_piece(b, i, &l2, &s2, NULL);
        if (l1 != l2 || memcmp(p1, p2, l1) != 0 || s1 != s2)
            return false;
    }
    return true;
}

static void test_parity_is_the_same_for_one_two_and_three_threads(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    lipi_counts *c = two_script_corpus();
    assert_int_equal(lipi_balance_add_mixed(b, c, NULL), LIPI_OK);
    lipi_counts *d = counts_of("katone:3 rimo:2 suneka:1");
    bool used;
    assert_int_equal(lipi_balance_add_dev(b, "eng_Latn", d, &used, NULL), LIPI_OK);
    lipi_counts_free(d);
    d = counts_of("कमल:2 नर:1 सिता:2");
    assert_int_equal(lipi_balance_add_dev(b, "hin_Deva", d, &used, NULL), LIPI_OK);
    lipi_counts_free(d);
    lipi_counts *train;
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_PARITY, 0, &train, NULL), LIPI_OK);
    lipi_bpe_options o;
    lipi_bpe_options_default(&o);
    o.common.vocab_size = 400;
    o.common.grapheme_guard = false; /* no cluster phase: parity from the first merge */
    o.common.balance = b;
    static char first[1 << 16], other[1 << 16];
    o.common.threads = 1;
    train_merges(train, &o, first, sizeof first);
    for (size_t t = 2; t <= 3; t++) {
        o.common.threads = t;
        train_merges(train, &o, other, sizeof other);
        if (strcmp(first, other) != 0) {
            size_t k = 0;
            while (first[k] == other[k])
                k++;
            fail_msg("threads %zu differ at %zu: ...%.60s vs ...%.60s", t, k, first + (k > 20 ? k - 20 : 0), other + (k > 20 ? k - 20 : 0));
        }
    }
    /* and parity changed something */
    o.common.balance = NULL;
    train_merges(train, &o, other, sizeof other);
    assert_string_not_equal(first, other);

    /* Unigram with parity-aware pruning, too: default weights, then other
     * ones (which must change the vocabulary). */
    lipi_unigram_options uo;
    lipi_unigram_options_default(&uo);
    uo.common.vocab_size = 400;
    uo.common.balance = b;
    lipi_unigram_model *m[2][2] = {{NULL}};
    for (int v = 0; v < 2; v++) {
        if (v) {
            uo.parity_exponent = 1.0;
            uo.parity_mass = 0.0;
        }
        for (int t = 0; t < 2; t++) {
            uo.common.threads = (size_t)t + 1;
            assert_int_equal(lipi_unigram_train(train, &uo, &m[v][t], NULL), LIPI_OK);
        }
        assert_true(same_pieces(m[v][0], m[v][1]));
    }
    assert_false(same_pieces(m[0][0], m[1][0]));
    for (int v = 0; v < 2; v++)
        for (int t = 0; t < 2; t++)
            lipi_unigram_model_free(m[v][t]);
    lipi_counts_free(train);
    lipi_counts_free(c);
    lipi_balance_free(b);
}

/* Unigram parity pruning weights, hand-computed: a_Latn has 100 tokens
 * over 200 training characters and 2 dev characters (cost 1), b_Deva 25
 * over 25 and 2 (cost 2, the worse), c_Taml no dev file. b weighs
 * 2^K * (100 / 25)^M, c weighs `others`, a and the no-language class 1. */
static void test_unigram_parity_weights_follow_exponent_mass_and_others(void **state)
{
    (void)state;
    lipi_balance *b;
    assert_int_equal(lipi_balance_new(&b), LIPI_OK);
    add_lang(b, "b_Deva", "कम:5");
    add_lang(b, "a_Latn", "ab:5");
    add_lang(b, "c_Taml", "கம:5");
    add_dev(b, "a_Latn", "xy:1");
    add_dev(b, "b_Deva", "नर:1");
    lipi_counts *train;
    assert_int_equal(lipi_balance_train_counts(b, LIPI_BALANCE_PARITY, 0, &train, NULL), LIPI_OK);
    assert_int_equal(lipi_balance_n_langs(b), 4);
    assert_string_equal(lipi_balance_lang_name(b, 0), "a_Latn");
    assert_string_equal(lipi_balance_lang_name(b, 1), "b_Deva");
    uint64_t tok[4] = {7, 100, 25, 40}, chars[4] = {7, 200, 25, 40}, wt[4];
    const struct {
        lipi_prune_params p;
        uint64_t b, c;
    } cases[] = {
        {{4.0, 1.0, 1.0}, 64u << 16, 1u << 16},    /* the defaults: 16 * 4 */
        {{1.0, 0.5, 0.25}, 4u << 16, 1u << 14},    /* 2 * 2, others 1/4 */
        {{0.0, 0.0, 1.0 / 65536}, 1u << 16, 1},    /* no boost at all */
        {{20.0, 1.0, 1.0}, (uint64_t)1 << 32, 1u << 16}, /* 2^22: capped at 2^16 */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        lipi_balance_prune_weights(b, tok, chars, &cases[k].p, wt);
        assert_int_equal(wt[LIPI_LANG_NONE], 1u << 16);
        assert_int_equal(wt[1], 1u << 16);
        assert_int_equal(wt[2], cases[k].b);
        assert_int_equal(wt[3], cases[k].c);
    }
    lipi_counts_free(train);
    lipi_balance_free(b);
}

/* ======================================================================== */
/* Allocation failures                                                       */
/* ======================================================================== */

static long alloc_budget; /* allocations left before failing; <0: unlimited */
static long live_allocs;

static void *fail_malloc(size_t n)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    void *p = malloc(n);
    if (p)
        live_allocs++;
    return p;
}

static void *fail_realloc(void *p, size_t n)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    void *q = realloc(p, n);
    if (q && !p)
        live_allocs++;
    return q;
}

static void fail_free(void *p)
{
    if (p)
        live_allocs--;
    free(p);
}

/* Every allocation of balancing and parity training fails in turn: each
 * failure is LIPI_ENOMEM and leaks nothing. */
static void test_parity_training_fails_cleanly_on_every_allocation(void **state)
{
    (void)state;
    lipi_counts *a = counts_of("ab:10 cd:8 नमस्ते:3"), *bb = counts_of("xyz:3 ab:1");
    lipi_counts *da = counts_of("ab:1 cd:1"), *db = counts_of("xyz:3");
    lipi_alloc_hooks hooks = {fail_malloc, fail_realloc, fail_free};
    bool succeeded = false;
    for (long n = 0; n < 100000 && !succeeded; n++) {
        alloc_budget = n;
        live_allocs = 0;
        lipi_set_alloc_hooks(&hooks);
        lipi_balance *b = NULL;
        lipi_counts *train = NULL;
        lipi_bpe_model *m = NULL;
        lipi_status st = lipi_balance_new(&b);
        if (st == LIPI_OK)
            st = lipi_balance_add_lang(b, "A", a, NULL);
        if (st == LIPI_OK)
            st = lipi_balance_add_mixed(b, bb, NULL);
        if (st == LIPI_OK)
            st = lipi_balance_add_dev(b, "A", da, NULL, NULL);
        if (st == LIPI_OK)
            st = lipi_balance_add_dev(b, "Latn", db, NULL, NULL);
        if (st == LIPI_OK)
            st = lipi_balance_train_counts(b, LIPI_BALANCE_PARITY, 0, &train, NULL);
        if (st == LIPI_OK) {
            lipi_bpe_options o;
            tiny_options(&o);
            o.common.balance = b;
            st = lipi_bpe_train(train, &o, &m, NULL);
        }
        if (st == LIPI_OK) {
            succeeded = true;
            /* As in the parity test; then A's last word, ties by bytes
             * (त U+0924 sorts before न U+0928). */
            char got[512];
            merges_string(m, got, sizeof got);
            assert_string_equal(got, "x y, xy z, a b, c d, त े, न म, नम स, नमस ्, नमस् ते");
        } else {
            assert_int_equal(st, LIPI_ENOMEM);
        }
        lipi_bpe_model_free(m);
        lipi_counts_free(train);
        lipi_balance_free(b);
        lipi_set_alloc_hooks(NULL);
        if (live_allocs != 0)
            fail_msg("budget %ld: %ld allocations left", n, live_allocs);
    }
    assert_true(succeeded);
    lipi_counts_free(a);
    lipi_counts_free(bb);
    lipi_counts_free(da);
    lipi_counts_free(db);
}

/* ======================================================================== */
/* Command line                                                              */
/* ======================================================================== */

static void test_balance_none_gives_the_plain_tokenizer_byte_for_byte(void **state)
{
    (void)state;
    cli_result r = cli_runf("train --quiet --vocab-size 1500 -o ./lipi-fair-plain.json " DATA
                       "eng_Latn.txt " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --balance none --vocab-size 1500 -o ./lipi-fair-none.json " DATA
            "eng_Latn.txt --lang-file hin_Deva=" DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-fair-plain.json", "./lipi-fair-none.json");
    r = cli_runf("train --quiet --type unigram --vocab-size 1500 -o ./lipi-fair-plain.json " DATA
            "eng_Latn.txt " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --type unigram --balance none --vocab-size 1500 -o "
            "./lipi-fair-none.json " DATA "eng_Latn.txt " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-fair-plain.json", "./lipi-fair-none.json");
    unlink("./lipi-fair-plain.json");
    unlink("./lipi-fair-none.json");
}

static void test_parity_through_the_command_is_the_same_for_one_and_two_threads(void **state)
{
    (void)state;
    mkdir("./lipi-fair-dev", 0755);
    static char text[1 << 16];
    /* lines 1-20 of each file as the dev set */
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "hin_Deva" : "eng_Latn";
        char src[256], dst[256];
        snprintf(src, sizeof src, DATA "%s.txt", name);
        snprintf(dst, sizeof dst, "./lipi-fair-dev/%s.txt", name);
        FILE *in = fopen(src, "rb");
        assert_non_null(in);
        size_t used = 0;
        for (int line = 0; line < 20 && fgets(text + used, (int)(sizeof text - used), in); line++)
            used += strlen(text + used);
        fclose(in);
        write_file(dst, text);
    }
    for (int t = 1; t <= 2; t++) {
        cli_result r = cli_runf("train --quiet --balance parity --dev ./lipi-fair-dev --threads %d "
                           "--vocab-size 1500 -o ./lipi-fair-p%d.json --lang-file eng_Latn=" DATA
                           "eng_Latn.txt --lang-file hin_Deva=" DATA "hin_Deva.txt",
                           t, t);
        if (r.code != 0)
            fail_msg("%s", r.err);
        cli_result_free(&r);
    }
    cli_assert_same_file("./lipi-fair-p1.json", "./lipi-fair-p2.json");
    cli_result r = cli_runf("train --quiet --balance smoothed --alpha 0.5 --vocab-size 1500 -o "
                       "./lipi-fair-p1.json " DATA "eng_Latn.txt " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    unlink("./lipi-fair-p1.json");
    unlink("./lipi-fair-p2.json");
    unlink("./lipi-fair-dev/eng_Latn.txt");
    unlink("./lipi-fair-dev/hin_Deva.txt");
    rmdir("./lipi-fair-dev");
}

static void test_bad_balance_options_are_clear_errors(void **state)
{
    (void)state;
    const char *in = "./lipi-fair-in.txt";
    write_file(in, "hello world\n");
    cli_result r = cli_runf("train --balance smoothed --alpha 1.5 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--alpha takes a number in [0, 1], not '1.5'"));
    cli_result_free(&r);
    r = cli_runf("train --balance parity -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--balance parity needs --dev DIR"));
    cli_result_free(&r);
    r = cli_runf("train --balance fair -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--balance takes 'none', 'smoothed' or 'parity', not 'fair'"));
    cli_result_free(&r);
    r = cli_runf("train --alpha 0.5 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--alpha is for --balance smoothed"));
    cli_result_free(&r);
    r = cli_runf("train --balance parity --dev . --parity-mass 0.5 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--parity-mass is for --type unigram"));
    cli_result_free(&r);
    r = cli_runf("train --balance parity --dev . --parity-others 0.5 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--parity-others needs --parity-exponent for --type bpe"));
    cli_result_free(&r);
    r = cli_runf("train --balance parity --dev . --parity-target Latn -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--parity-target takes LANG=R with R in [0.01, 100]"));
    cli_result_free(&r);
    r = cli_runf("train --parity-target Latn=2 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--parity-target are for --balance parity"));
    cli_result_free(&r);
    r = cli_runf("train --type unigram --parity-others 0.5 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "are for --balance parity"));
    cli_result_free(&r);
    r = cli_runf("train --type unigram --balance parity --dev . --parity-mass 2 -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--parity-mass takes a number in [0, 1], not '2'"));
    cli_result_free(&r);
    r = cli_runf("train --balance smoothed --lang-file hin_Deva -o ./x.json %s", in);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--lang-file takes LANG=FILE"));
    cli_result_free(&r);

    mkdir("./lipi-fair-bad", 0755);
    write_file("./lipi-fair-bad/eng_Latn.txt", "one\ntwo\nthree\n");
    write_file("./lipi-fair-bad/hin_Deva.txt", "एक\nदो\n");
    r = cli_runf("train --balance parity --dev ./lipi-fair-bad -o ./x.json %s", in);
    assert_int_equal(r.code, 1);
    if (!strstr(r.err, "has 2 lines but"))
        fail_msg("%s", r.err);
    assert_non_null(strstr(r.err, "eng_Latn.txt"));
    cli_result_free(&r);
    assert_int_equal(access("./x.json", F_OK), -1);
    /* A target for a language the training data does not have. */
    write_file("./lipi-fair-bad/hin_Deva.txt", "एक\nदो\nतीन\n");
    r = cli_runf("train --balance parity --dev ./lipi-fair-bad --parity-target Telu=1.5 "
                 "-o ./x.json %s", in);
    assert_int_equal(r.code, 1);
    if (!strstr(r.err, "a parity target for 'Telu', which is no language"))
        fail_msg("%s", r.err);
    cli_result_free(&r);
    assert_int_equal(access("./x.json", F_OK), -1);
    unlink(in);
    unlink("./lipi-fair-bad/eng_Latn.txt");
    unlink("./lipi-fair-bad/hin_Deva.txt");
    rmdir("./lipi-fair-bad");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_words_go_to_their_dominant_script),
        cmocka_unit_test(test_word_of_two_languages_belongs_to_the_one_counting_it_most),
        cmocka_unit_test(test_smoothed_weights_and_counts_match_the_hand_computed_case),
        cmocka_unit_test(test_stray_script_keeps_weight_one),
        cmocka_unit_test(test_parity_picks_the_merges_of_the_worse_language),
        cmocka_unit_test(test_parity_targets_scale_the_cost_of_their_language),
        cmocka_unit_test(test_bpe_parity_others_lets_languages_without_dev_compete),
        cmocka_unit_test(test_dev_file_joins_the_language_of_its_script),
        cmocka_unit_test(test_parity_is_the_same_for_one_two_and_three_threads),
        cmocka_unit_test(test_unigram_parity_weights_follow_exponent_mass_and_others),
        cmocka_unit_test(test_parity_training_fails_cleanly_on_every_allocation),
        cmocka_unit_test(test_balance_none_gives_the_plain_tokenizer_byte_for_byte),
        cmocka_unit_test(test_parity_through_the_command_is_the_same_for_one_and_two_threads),
        cmocka_unit_test(test_bad_balance_options_are_clear_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* `lipi train` and `lipi count` end to end: outputs, determinism, counting
 * on shards, and the bad inputs the trainer must refuse before training. */
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
#include "tests/refdata.h"
#include "tokenizer/tokenizer.h"

#define DATA "data/flores200/"
#define ALL DATA "eng_Latn.txt " DATA "hin_Deva.txt " DATA "ben_Beng.txt " DATA "tam_Taml.txt"

static void test_train_writes_a_loadable_tokenizer_of_the_asked_size(void **state)
{
    cli_result r = cli_runf("train --quiet --vocab-size 1200 -o ./lipi-t1.json " ALL);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    lipi_tokenizer *t = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_load("./lipi-t1.json", &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 1200);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_BPE);
    assert_true(lipi_tokenizer_get_model_options(t)->byte_fallback);
    uint32_t id;
    assert_true(lipi_tokenizer_token_to_id(t, "<0x00>", 6, &id));
    lipi_tokenizer_free(t);
    unlink("./lipi-t1.json");
}

static void test_train_is_byte_identical_on_1_and_2_threads(void **state)
{
    const char *units[] = {"char", "byte"};
    for (int u = 0; u < 2; u++) {
        cli_result r = cli_runf("train --quiet --units %s --threads 1 --vocab-size 1500 -o ./lipi-th1.json " ALL, units[u]);
        assert_int_equal(r.code, 0);
        cli_result_free(&r);
        r = cli_runf("train --quiet --units %s --threads 2 --vocab-size 1500 -o ./lipi-th2.json " ALL, units[u]);
        assert_int_equal(r.code, 0);
        cli_result_free(&r);
        cli_assert_same_file("./lipi-th1.json", "./lipi-th2.json");
    }
    unlink("./lipi-th1.json");
    unlink("./lipi-th2.json");
}

/* The speed work on the trainer (issue 20) must not change what it learns:
 * on 6.7 MB of real Bengali and English text the tokenizers are, byte for
 * byte, those of commit 347cf32 (SHA-256 of its files). */
static char shared_dir[4096]; /* ../shared/data seen from the repository, or "" */

static void test_train_on_a_real_corpus_is_what_it_was(void **state)
{
    char bn[4200], en[4200];
    snprintf(bn, sizeof bn, "%s/mono/bn-mixed.txt.xz", shared_dir);
    snprintf(en, sizeof en, "%s/mono/en-web-sentences.txt.xz", shared_dir);
    if (!shared_dir[0] || access(bn, R_OK) != 0 || access(en, R_OK) != 0)
        SKIP_BECAUSE("../shared/data/mono not found (bn-mixed and en-web-sentences)");
    const char *units[] = {"char", "byte"};
    const char *want[] = {"afb0079e91cbacc5617ed9373d5a2ad2b64e0872b6aad2f619ee1771b9ace848",
                          "fcfa18acf4cc9b52363d13958326c80f9245c49fe4bfb02853149ac4f1401525"};
    for (int u = 0; u < 2; u++) {
        cli_result r = cli_runf("train --quiet --units %s --threads 2 --vocab-size 8000 "
                                "-o ./lipi-real.json '%s' '%s'", units[u], bn, en);
        assert_int_equal(r.code, 0);
        cli_result_free(&r);
        size_t len;
        char *js = cli_slurp("./lipi-real.json", &len);
        assert_non_null(js);
        lipi_sha256 c;
        char hex[65];
        lipi_sha256_init(&c);
        lipi_sha256_update(&c, js, len);
        assert_int_equal(lipi_sha256_final_hex(&c, hex), LIPI_OK);
        assert_string_equal(hex, want[u]);
        free(js);
    }
    unlink("./lipi-real.json");
}

static void test_counting_shards_then_training_equals_training_on_files(void **state)
{
    cli_result r = cli_runf("count --quiet -o ./lipi-c1.tsv " DATA "eng_Latn.txt " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("count --quiet -o ./lipi-c2.tsv " DATA "ben_Beng.txt " DATA "tam_Taml.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("count --merge -o ./lipi-call.tsv ./lipi-c1.tsv ./lipi-c2.tsv");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --vocab-size 1500 --from-counts ./lipi-call.tsv -o ./lipi-fc.json");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --vocab-size 1500 -o ./lipi-ff.json " ALL);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-fc.json", "./lipi-ff.json");
    /* Repeated --from-counts adds the shards up too. */
    r = cli_runf("train --quiet --vocab-size 1500 --from-counts ./lipi-c1.tsv --from-counts ./lipi-c2.tsv -o ./lipi-fc2.json");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-fc2.json", "./lipi-ff.json");
    const char *tmp[] = {"./lipi-c1.tsv", "./lipi-c2.tsv", "./lipi-call.tsv",
                         "./lipi-fc.json", "./lipi-ff.json", "./lipi-fc2.json"};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        unlink(tmp[i]);
}

static void test_export_merges_writes_gpt2_files_for_byte_units(void **state)
{
    cli_result r = cli_runf("train --quiet --units byte --vocab-size 600 -o ./lipi-bl.json "
                       "--export-merges ./lipi-bl-dir " DATA "eng_Latn.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    size_t n;
    char *merges = cli_slurp("./lipi-bl-dir/merges.txt", &n);
    assert_non_null(merges);
    assert_true(strncmp(merges, "#version: 0.2\n", 14) == 0);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += merges[i] == '\n';
    assert_int_equal(lines, 1 + (600 - 256)); /* header + one merge per new token */
    free(merges);
    char *vocab = cli_slurp("./lipi-bl-dir/vocab.json", &n);
    assert_non_null(vocab);
    assert_non_null(strstr(vocab, "\"\xc4\xa0the\":")); /* "Ġthe" */
    free(vocab);
    unlink("./lipi-bl-dir/merges.txt");
    unlink("./lipi-bl-dir/vocab.json");
    rmdir("./lipi-bl-dir");
    unlink("./lipi-bl.json");
}

static void test_bad_options_are_usage_errors(void **state)
{
    const char *bad[] = {
        "train --vocab-size 0 -o ./x.json " DATA "eng_Latn.txt",
        "train --vocab-size 1099511627776 -o ./x.json " DATA "eng_Latn.txt",
        "train --vocab-size -5 -o ./x.json " DATA "eng_Latn.txt",
        "train --vocab-size ten -o ./x.json " DATA "eng_Latn.txt",
        "train --character-coverage 1.5 -o ./x.json " DATA "eng_Latn.txt",
        "train --units word -o ./x.json " DATA "eng_Latn.txt",
        "train --type wordpiece -o ./x.json " DATA "eng_Latn.txt",
        "train --vocab-size 100 " DATA "eng_Latn.txt",
        "train --vocab-size 100 -o ./x.json",
        "count -o ./x.tsv",
        "train --pattern nosuch -o ./x.json " DATA "eng_Latn.txt",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cli_result r = cli_runf("%s", bad[i]);
        if (r.code != 2)
            fprintf(stderr, "expected exit 2 for: lipi %s\n%s", bad[i], r.err);
        assert_int_equal(r.code, 2);
        assert_true(r.err_len > 0);
        cli_result_free(&r);
        assert_int_equal(access("./x.json", F_OK), -1);
    }
}

static void test_vocab_below_the_alphabet_states_the_minimum(void **state)
{
    cli_result r = cli_runf("train --quiet --vocab-size 10 -o ./lipi-small.json " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "minimum"));
    assert_int_equal(access("./lipi-small.json", F_OK), -1);
    cli_result_free(&r);
}

static void test_unwritable_output_fails_before_training(void **state)
{
    cli_result r = cli_runf("train --vocab-size 500 -o /nonexistent-dir/tok.json " ALL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "/nonexistent-dir/tok.json"));
    assert_null(strstr(r.err, "counting")); /* no progress: it never started */
    cli_result_free(&r);
}

static void test_empty_corpus_and_invalid_utf8_are_errors(void **state)
{
    const char *empty = cli_temp_file("\n\n", 2);
    char path[64];
    snprintf(path, sizeof path, "%s", empty);
    cli_result r = cli_runf("train --quiet --vocab-size 500 -o ./lipi-e.json %s", path);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "nothing to train on"));
    cli_result_free(&r);
    unlink(path);
    static const char bad_text[] = "good line\nbad \xc3\x28 line\n";
    const char *bad = cli_temp_file(bad_text, sizeof bad_text - 1);
    snprintf(path, sizeof path, "%s", bad);
    r = cli_runf("train --quiet --vocab-size 500 -o ./lipi-e.json %s", path);
    assert_int_equal(r.code, 1);
    char where[96];
    snprintf(where, sizeof where, "%s:2:", path);
    assert_non_null(strstr(r.err, where));
    cli_result_free(&r);
    assert_int_equal(access("./lipi-e.json", F_OK), -1);
    unlink(path);
}

static void test_an_existing_output_survives_a_failed_run(void **state)
{
    FILE *f = fopen("./lipi-keep.json", "w");
    fputs("old", f);
    fclose(f);
    cli_result r = cli_runf("train --quiet --vocab-size 10 -o ./lipi-keep.json " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 1);
    cli_result_free(&r);
    size_t n;
    char *s = cli_slurp("./lipi-keep.json", &n);
    assert_string_equal(s, "old");
    free(s);
    unlink("./lipi-keep.json");
}

/* Runs in a private temporary folder (so parallel runs of the suite cannot
 * clash over output names), with `data` linked to the repository's. */
static char workdir[] = "/tmp/lipi-cli-train-XXXXXX";

static int enter_workdir(void)
{
    char cwd[4096], bin[4096], link[4200];
    const char *b = getenv("LIPI_BIN") ? getenv("LIPI_BIN") : "build/lipi";
    if (!getcwd(cwd, sizeof cwd) || !realpath(b, bin) || !mkdtemp(workdir))
        return -1;
    setenv("LIPI_BIN", bin, 1);
    if (!realpath(REF_SHARED, shared_dir))
        shared_dir[0] = '\0';
    snprintf(link, sizeof link, "%s/data", cwd);
    if (chdir(workdir) != 0 || symlink(link, "data") != 0)
        return -1;
    return 0;
}

static void test_unigram_writes_tokenizer_json_and_spm_model_alike(void **state)
{
    cli_result r = cli_runf("train --quiet --type unigram --threads 1 --vocab-size 1500 -o ./lipi-u1.json "
                       "--export-spm ./lipi-u1.model " ALL);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --type unigram --threads 2 --vocab-size 1500 -o ./lipi-u2.json " ALL);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-u1.json", "./lipi-u2.json");
    lipi_tokenizer *a = NULL, *b = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_load("./lipi-u1.json", &a, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_open("./lipi-u1.model", NULL, &b, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_model_type(a), LIPI_MODEL_UNIGRAM);
    assert_int_equal(lipi_tokenizer_vocab_size(a), 1500);
    assert_int_equal(lipi_tokenizer_vocab_size(b), 1500);
    for (uint32_t id = 0; id < 1500; id += 7) {
        size_t la, lb;
        const char *ta = lipi_tokenizer_id_to_token(a, id, &la);
        const char *tb = lipi_tokenizer_id_to_token(b, id, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ta, tb, la);
    }
    lipi_tokenizer_free(a);
    lipi_tokenizer_free(b);
    r = cli_runf("train --type unigram --units byte -o ./lipi-u3.json " ALL);
    assert_int_equal(r.code, 2);
    cli_result_free(&r);
    /* Counts made with the unigram pattern train the same model. */
    r = cli_runf("count --quiet --pattern unigram -o ./lipi-u.tsv " ALL);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --type unigram --vocab-size 1500 --from-counts ./lipi-u.tsv -o ./lipi-u4.json");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-u1.json", "./lipi-u4.json");
}

/* One line of 420,001 bytes, .xz-compressed to a few hundred: the counting
 * summary states the text read (0.4 MB, not the compressed size) and "1 line". */
static void test_count_summary_states_decompressed_megabytes_and_one_line(void **state)
{
    FILE *f = fopen("./lipi-one.txt", "w");
    assert_non_null(f);
    for (int i = 0; i < 30000; i++)
        fputs("अब तक ", f); /* 14 bytes */
    fputc('\n', f);
    fclose(f);
    assert_int_equal(system("xz -f ./lipi-one.txt"), 0);
    cli_result r = cli_runf("count -o ./lipi-one.tsv ./lipi-one.txt.xz");
    assert_int_equal(r.code, 0);
    if (!strstr(r.err, "counting: 0.4 MB, 1 line in"))
        fail_msg("expected the summary of 0.4 MB and 1 line, found: %s", r.err);
    cli_result_free(&r);
}

/* --type unigram splits with the "unigram" pattern (SentencePiece's '▁'
 * prefix, a Metaspace step) unless --pattern says otherwise. */
static void test_unigram_keeps_the_pattern_it_is_given(void **state)
{
    const char *cases[][2] = {{"", "yes"}, {"--pattern indic", "no"}};
    for (int i = 0; i < 2; i++) {
        cli_result r = cli_runf("train --quiet --type unigram --vocab-size 1000 %s -o ./lipi-up.json " ALL,
                                cases[i][0]);
        assert_int_equal(r.code, 0);
        cli_result_free(&r);
        FILE *f = fopen("./lipi-up.json", "rb");
        assert_non_null(f);
        static char json[1 << 22];
        size_t n = fread(json, 1, sizeof json - 1, f);
        fclose(f);
        json[n] = '\0';
        bool metaspace = strstr(json, "\"Metaspace\"") != NULL;
        if (metaspace != (strcmp(cases[i][1], "yes") == 0))
            fail_msg("train --type unigram %s: expected %s Metaspace pre-tokenizer", cases[i][0],
                     metaspace ? "no" : "a");
    }
    unlink("./lipi-up.json");
}

/* A word over 65,535 bytes (a long line without spaces) is skipped by the
 * trainer: training with one equals training without it, byte for byte
 * (its letter, in no other word, does not even reach the alphabet), and a
 * corpus of nothing else says so. */
static void test_train_skips_words_over_64k(void **state)
{
    (void)state;
    size_t n;
    char *hin = cli_slurp(DATA "hin_Deva.txt", &n);
    assert_non_null(hin);
    FILE *f = fopen("./lipi-longword.txt", "wb");
    assert_non_null(f);
    for (int i = 0; i < 25000; i++)
        fputs("ꙮ", f); /* 3 bytes: one 75,000-byte word */
    fputc('\n', f);
    assert_int_equal(fwrite(hin, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(hin);
    cli_result r = cli_runf("train --quiet --vocab-size 900 -o ./lipi-lw1.json ./lipi-longword.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    r = cli_runf("train --quiet --vocab-size 900 -o ./lipi-lw2.json " DATA "hin_Deva.txt");
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    cli_assert_same_file("./lipi-lw1.json", "./lipi-lw2.json");
    f = fopen("./lipi-longword.txt", "wb");
    assert_non_null(f);
    for (int i = 0; i < 70000; i++)
        fputc('a', f);
    assert_int_equal(fclose(f), 0);
    r = cli_runf("train --quiet --vocab-size 900 -o ./lipi-lw3.json ./lipi-longword.txt");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "longer than the 65535 bytes"));
    cli_result_free(&r);
    unlink("./lipi-longword.txt");
    unlink("./lipi-lw1.json");
    unlink("./lipi-lw2.json");
}

int main(void)
{
    if (access(DATA "hin_Deva.txt", R_OK) != 0 || enter_workdir() != 0) {
        fprintf(stderr, "test_cli_train: run from the repository root with the lipi binary built\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_writes_a_loadable_tokenizer_of_the_asked_size),
        cmocka_unit_test(test_train_is_byte_identical_on_1_and_2_threads),
        cmocka_unit_test(test_train_on_a_real_corpus_is_what_it_was),
        cmocka_unit_test(test_counting_shards_then_training_equals_training_on_files),
        cmocka_unit_test(test_export_merges_writes_gpt2_files_for_byte_units),
        cmocka_unit_test(test_bad_options_are_usage_errors),
        cmocka_unit_test(test_vocab_below_the_alphabet_states_the_minimum),
        cmocka_unit_test(test_unwritable_output_fails_before_training),
        cmocka_unit_test(test_count_summary_states_decompressed_megabytes_and_one_line),
        cmocka_unit_test(test_empty_corpus_and_invalid_utf8_are_errors),
        cmocka_unit_test(test_an_existing_output_survives_a_failed_run),
        cmocka_unit_test(test_unigram_writes_tokenizer_json_and_spm_model_alike),
        cmocka_unit_test(test_unigram_keeps_the_pattern_it_is_given),
        cmocka_unit_test(test_train_skips_words_over_64k),
    };
    int failed = cmocka_run_group_tests_name("cli_train", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_cli_train: could not remove %s\n", workdir);
    return failed;
}

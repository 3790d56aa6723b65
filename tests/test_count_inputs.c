/* Records other than lines in `lipi count` and `lipi train` (--input,
 * --text-field; issue #29): the same texts give the same counts and the same
 * tokenizer whichever way they are written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/cli_run.h"

#define RUN(args, input) cli_run(args, input, sizeof(input) - 1)

/* Texts without a newline, as lines and as JSONL objects whose text is in
 * "body" (with an escaped quote and an escaped Devanagari letter). */
static const char lines[] = "the cat sat on the mat\n"
                            "नमस्ते दुनिया, नमस्ते\n"
                            "\n"
                            "say \"hi\" to the cat\n";
static const char jsonl[] = "{\"id\": 1, \"body\": \"the cat sat on the mat\"}\n"
                            "{\"body\": \"\\u0928मस्ते दुनिया, नमस्ते\"}\n"
                            "{\"body\": \"\", \"text\": 7}\n"
                            "{\"body\": \"say \\\"hi\\\" to the cat\"}\n";

static void test_count_jsonl_field_counts_as_the_same_lines(void **state)
{
    cli_result a = RUN("count --quiet -o - -", lines);
    cli_result b = RUN("count --quiet --input jsonl --text-field body -o - -", jsonl);
    assert_int_equal(a.code, 0);
    assert_int_equal(b.code, 0);
    assert_non_null(strstr(a.out, "the\t2\n"));
    assert_string_equal(b.out, a.out);
    cli_result_free(&a);
    cli_result_free(&b);
}

static void test_count_whole_files_count_across_newlines(void **state)
{
    /* As lines, each line ends before its "\n"; as one text, the newlines
     * are pieces of their own and a word after one is still a word. */
    cli_result a = RUN("count --quiet --input whole -o - -", "ab cd\nab\n");
    assert_int_equal(a.code, 0);
    assert_string_equal(a.out, "\\n\t2\nab\t2\n cd\t1\n");
    cli_result_free(&a);
    /* NUL-separated records: a record may hold newlines. */
    cli_result c = cli_run("count --quiet --input nul -o - -", "ab\ncd\0ab", 8);
    assert_int_equal(c.code, 0);
    assert_string_equal(c.out, "ab\t2\n\\n\t1\ncd\t1\n");
    cli_result_free(&c);
}

static void test_count_bad_json_names_file_and_record(void **state)
{
    const char *path = cli_temp_file("{\"text\": \"a b\"}\n{\"text\": oops}\n", 31);
    cli_result r = cli_runf("count --quiet --input jsonl -o - %s", path);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, path));
    assert_non_null(strstr(r.err, "record 2: invalid JSON"));
    assert_int_equal(r.out_len, 0);
    cli_result_free(&r);
}

/* 200 texts of words drawn by a fixed LCG, as lines and as JSONL. */
static void make_corpus(char **txt, size_t *txt_len, char **json, size_t *json_len)
{
    static const char *const words[] = {"the", "cat", "sat", "नमस्ते", "दुनिया", "क्षि",
                                        "ने", "say", "\"hi\"", "dog"};
    size_t cap = 1 << 16;
    char *t = malloc(cap), *j = malloc(2 * cap);
    size_t tn = 0, jn = 0;
    uint32_t x = 7;
    for (int i = 0; i < 200; i++) {
        jn += (size_t)snprintf(j + jn, 2 * cap - jn, "{\"n\": %d, \"body\": \"", i);
        int n = 1 + i % 9;
        for (int w = 0; w < n; w++) {
            x = x * 1103515245u + 12345u;
            const char *word = words[(x >> 16) % 10];
            tn += (size_t)snprintf(t + tn, cap - tn, "%s%s", w ? " " : "", word);
            jn += (size_t)snprintf(j + jn, 2 * cap - jn, "%s%s", w ? " " : "",
                                   word[0] == '"' ? "\\\"hi\\\"" : word);
        }
        tn += (size_t)snprintf(t + tn, cap - tn, "\n");
        jn += (size_t)snprintf(j + jn, 2 * cap - jn, "\"}\n");
    }
    *txt = t;
    *txt_len = tn;
    *json = j;
    *json_len = jn;
}

static void test_train_jsonl_field_trains_the_same_tokenizer_as_lines(void **state)
{
    char *txt, *json;
    size_t tn, jn;
    make_corpus(&txt, &tn, &json, &jn);
    char lines_path[64], json_path[64];
    snprintf(lines_path, sizeof lines_path, "%s", cli_temp_file(txt, tn));
    snprintf(json_path, sizeof json_path, "%s", cli_temp_file(json, jn));
    static const char *const types[] = {"--type bpe", "--type unigram --sample 120"};
    for (size_t i = 0; i < 2; i++) {
        cli_result a = cli_runf("train --quiet %s --vocab-size 320 -o %s.a.json %s", types[i],
                                lines_path, lines_path);
        cli_result b = cli_runf("train --quiet %s --vocab-size 320 --input jsonl --text-field "
                                "body -o %s.b.json %s",
                                types[i], lines_path, json_path);
        assert_int_equal(a.code, 0);
        assert_int_equal(b.code, 0);
        char pa[96], pb[96];
        snprintf(pa, sizeof pa, "%s.a.json", lines_path);
        snprintf(pb, sizeof pb, "%s.b.json", lines_path);
        cli_assert_same_file(pa, pb);
        remove(pa);
        remove(pb);
        cli_result_free(&a);
        cli_result_free(&b);
    }
    free(txt);
    free(json);
}

static void test_train_bad_json_names_file_and_record(void **state)
{
    const char *path = cli_temp_file("{\"body\": \"a\"}\n{\"body\": 1}\n", 26);
    cli_result r = cli_runf("train --quiet --vocab-size 300 --input jsonl --text-field body "
                            "-o %s.json %s",
                            path, path);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, path));
    assert_non_null(strstr(r.err, "record 2: member \"body\" at column 10 is a number"));
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_jsonl_field_counts_as_the_same_lines),
        cmocka_unit_test(test_count_whole_files_count_across_newlines),
        cmocka_unit_test(test_count_bad_json_names_file_and_record),
        cmocka_unit_test(test_train_jsonl_field_trains_the_same_tokenizer_as_lines),
        cmocka_unit_test(test_train_bad_json_names_file_and_record),
    };
    return cmocka_run_group_tests_name("count_inputs", tests, NULL, NULL);
}

/* Records other than lines in `lipi count` (--input, --text-field; issue
 * #29): the same texts give the same counts whichever way they are written. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_jsonl_field_counts_as_the_same_lines),
        cmocka_unit_test(test_count_whole_files_count_across_newlines),
        cmocka_unit_test(test_count_bad_json_names_file_and_record),
    };
    return cmocka_run_group_tests_name("count_inputs", tests, NULL, NULL);
}

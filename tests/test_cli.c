/* The `lipi` command end to end: exit codes, messages and outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cli_run.h"

#define RUN(args, input) cli_run(args, input, sizeof(input) - 1)

static void test_help_lists_registered_commands(void **state)
{
    cli_result r = RUN("--help", "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "normalize"));
    assert_non_null(strstr(r.out, "pretokenize"));
    cli_result_free(&r);
}

static void test_unknown_command_is_a_usage_error(void **state)
{
    cli_result r = RUN("frobnicate", "");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "unknown command 'frobnicate'"));
    cli_result_free(&r);
}

static void test_unknown_option_is_a_usage_error(void **state)
{
    cli_result r = RUN("normalize --bogus", "x\n");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "unknown option '--bogus'"));
    cli_result_free(&r);
    r = RUN("pretokenize --pattern", "x\n");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "needs a value"));
    cli_result_free(&r);
}

static void test_subcommand_help(void **state)
{
    cli_result r = RUN("normalize --help", "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "--form"));
    cli_result_free(&r);
    r = RUN("pretokenize -h", "");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "--pattern"));
    cli_result_free(&r);
}

static void test_normalize_nfc_decomposes_nukta_letters(void **state)
{
    /* U+0958 QA is a composition exclusion: NFC gives KA + NUKTA. */
    cli_result r = RUN("normalize --form nfc", "\xe0\xa5\x98\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "\xe0\xa4\x95\xe0\xa4\xbc\n");
    cli_result_free(&r);
}

static void test_normalize_nfkc_folds_full_width(void **state)
{
    cli_result r = RUN("normalize --form nfkc --lowercase", "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\x91\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "ab1\n");
    cli_result_free(&r);
}

static void test_unknown_form_is_rejected(void **state)
{
    cli_result r = RUN("normalize --form nfx", "a\n");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "nfx"));
    cli_result_free(&r);
}

static void test_invalid_utf8_names_file_line_and_offset(void **state)
{
    const char data[] = "ok\nab\xff" "c\n";
    const char *path = cli_temp_file(data, sizeof data - 1);
    char args[128];
    snprintf(args, sizeof args, "normalize %s", path);
    cli_result r = cli_run(args, "", 0);
    assert_int_equal(r.code, 1);
    char where[96];
    snprintf(where, sizeof where, "%s:2:", path);
    assert_non_null(strstr(r.err, where));
    assert_non_null(strstr(r.err, "byte 5"));
    cli_result_free(&r);
    snprintf(args, sizeof args, "normalize --invalid=replace %s", path);
    r = cli_run(args, "", 0);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "ok\nab\xef\xbf\xbd" "c\n");
    cli_result_free(&r);
    unlink(path);
}

static void test_missing_file_is_named(void **state)
{
    cli_result r = RUN("normalize /nonexistent/lipi.txt", "");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "/nonexistent/lipi.txt"));
    cli_result_free(&r);
}

static void test_bom_crlf_nul_and_empty_lines_pass_through(void **state)
{
    const char in[] = "\xef\xbb\xbf" "a\r\n\nb\0c\nd\re\n";
    cli_result r = cli_run("normalize --form none", in, sizeof in - 1);
    assert_int_equal(r.code, 0);
    const char want[] = "a\n\nb\0c\nd\re\n";
    assert_int_equal(r.out_len, sizeof want - 1);
    assert_memory_equal(r.out, want, sizeof want - 1);
    cli_result_free(&r);
}

static void test_cl100k_splits_hindi_at_vowel_signs_and_indic_does_not(void **state)
{
    /* हिन्दी */
    const char hindi[] = "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80\n";
    cli_result r = RUN("pretokenize --pattern indic", hindi);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "[\"\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80\"]\n");
    cli_result_free(&r);
    r = RUN("pretokenize --pattern cl100k --count", hindi);
    assert_int_equal(r.code, 0);
    assert_true(atoi(r.out) > 1);
    cli_result_free(&r);
}

static void test_pretokenize_offsets_are_bytes_of_the_line(void **state)
{
    cli_result r = RUN("pretokenize --pattern gpt2 --offsets", "Hi there\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "[[\"Hi\",0,2],[\" there\",2,8]]\n");
    cli_result_free(&r);
}

static void test_bad_regex_reports_pcre2_message(void **state)
{
    cli_result r = RUN("pretokenize --regex '(unclosed'", "x\n");
    assert_int_equal(r.code, 2);
    assert_true(r.err_len > 0);
    cli_result_free(&r);
}

int main(void)
{
    if (access(getenv("LIPI_BIN") ? getenv("LIPI_BIN") : "build/lipi", X_OK) != 0) {
        fprintf(stderr, "test_cli: the lipi binary is missing (set LIPI_BIN)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_registered_commands),
        cmocka_unit_test(test_unknown_command_is_a_usage_error),
        cmocka_unit_test(test_unknown_option_is_a_usage_error),
        cmocka_unit_test(test_subcommand_help),
        cmocka_unit_test(test_normalize_nfc_decomposes_nukta_letters),
        cmocka_unit_test(test_normalize_nfkc_folds_full_width),
        cmocka_unit_test(test_unknown_form_is_rejected),
        cmocka_unit_test(test_invalid_utf8_names_file_line_and_offset),
        cmocka_unit_test(test_missing_file_is_named),
        cmocka_unit_test(test_bom_crlf_nul_and_empty_lines_pass_through),
        cmocka_unit_test(test_cl100k_splits_hindi_at_vowel_signs_and_indic_does_not),
        cmocka_unit_test(test_pretokenize_offsets_are_bytes_of_the_line),
        cmocka_unit_test(test_bad_regex_reports_pcre2_message),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}

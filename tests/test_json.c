/* lipi_json_loadb: the same language and values as jansson's json_loadb,
 * a clear error for deep nesting, and clean allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/alloc_fail.h"
#include "tokenizer/base_json.h"

/* Texts both parsers accept, with equal values. */
static const char *const accepted[] = {
    "{}", "[]", " \t\r\n[ ]\n", "[0, -0, 1, -1, 10, 123456789]",
    "[9223372036854775807, -9223372036854775808]", "[1.5, -0.25, 1e3, 1E-3, 2.5e+2, 1e-400, 0.0]",
    "[\"\", \"a\", \"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "[\"\\u00e9\\u0915\\uFFFF\"]",
    "[\"\\ud83d\\ude00\", \"\\uD834\\uDD1E\"]", "[\"caf\xc3\xa9 \xe0\xa4\x95 \xf0\x9f\x98\x80\"]",
    "{\"a\": 1, \"a\": 2}", "{\"a\": {\"b\": [true, false, null]}}",
    "{\"\": 0, \" \": 1}", "[[[[[[]]]]]]", "[{}, [], {\"x\": []}]",
};

/* Texts both reject. */
static const char *const rejected[] = {
    "", " ", "1", "\"a\"", "true", "null", "[", "[1,]", "[,1]", "{\"a\"}", "{\"a\" 1}",
    "{1: 2}", "{\"a\": 1,}", "[01]", "[1.]", "[.5]", "[1e]", "[-]", "[+1]", "[0x10]",
    "[tru]", "[nul]", "[True]", "[\"a\tb\"]", "[\"\\x\"]", "[\"\\u12\"]", "[\"\\ud800\"]",
    "[\"\\udc00\"]", "[\"\\ud800\\u0041\"]", "[\"\xff\"]", "[\"\xc0\x80\"]",
    "[\"\xed\xa0\x80\"]", "[\"\xf4\x90\x80\x80\"]", "[\"abc", "[1] x", "[1] [2]",
    "[99999999999999999999]", "[-9223372036854775809]", "[1e999]", "[-1e999]",
    "[\"\\u0000\"]", "{\"a\\u0000b\": 1}", "[NaN]", "[Infinity]", "['a']", "[1 2]",
};

static void test_accepts_what_jansson_accepts_with_equal_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++) {
        const char *t = accepted[i];
        json_error_t e;
        json_t *mine = lipi_json_loadb(t, strlen(t), 0, &e);
        json_t *theirs = json_loadb(t, strlen(t), 0, NULL);
        if (!mine)
            fail_msg("%s: %s", t, e.text);
        assert_non_null(theirs);
        assert_true(json_equal(mine, theirs));
        json_decref(mine);
        json_decref(theirs);
    }
}

static void test_rejects_what_jansson_rejects_with_a_message(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rejected / sizeof *rejected; i++) {
        const char *t = rejected[i];
        json_error_t e;
        json_t *mine = lipi_json_loadb(t, strlen(t), 0, &e);
        json_t *theirs = json_loadb(t, strlen(t), 0, NULL);
        if (mine || theirs)
            fail_msg("%s: lipi %s, jansson %s", t, mine ? "accepts" : "rejects",
                     theirs ? "accepts" : "rejects");
        assert_true(e.text[0] != '\0');
        assert_true(json_error_code(&e) != json_error_out_of_memory);
        assert_true(e.position >= 0 && (size_t)e.position <= strlen(t));
    }
}

static void test_duplicate_keys_keep_the_last_value_or_fail_on_request(void **state)
{
    (void)state;
    const char *t = "{\"a\": 1, \"b\": 2, \"a\": 3}";
    json_t *j = lipi_json_loadb(t, strlen(t), 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "a")), 3);
    assert_string_equal(json_object_iter_key(json_object_iter(j)), "a"); /* first place */
    json_decref(j);
    json_error_t e;
    assert_null(lipi_json_loadb(t, strlen(t), JSON_REJECT_DUPLICATES, &e));
    assert_int_equal(json_error_code(&e), json_error_duplicate_key);
    assert_int_equal(e.position, 18); /* just past the second "a"'s quote */
}

static void test_nul_in_strings_only_with_allow_nul_and_never_in_keys(void **state)
{
    (void)state;
    const char *t = "[\"a\\u0000b\"]";
    json_t *j = lipi_json_loadb(t, strlen(t), JSON_ALLOW_NUL, NULL);
    assert_non_null(j);
    assert_int_equal(json_string_length(json_array_get(j, 0)), 3);
    assert_memory_equal(json_string_value(json_array_get(j, 0)), "a\0b", 3);
    json_decref(j);
    const char *k = "{\"a\\u0000\": 1}";
    json_error_t e;
    assert_null(lipi_json_loadb(k, strlen(k), JSON_ALLOW_NUL, &e));
    assert_int_equal(json_error_code(&e), json_error_null_byte_in_key);
    /* A raw NUL byte is never JSON (jansson skips one after a number). */
    assert_null(lipi_json_loadb("[1\0]", 4, 0, &e));
}

static void test_no_text_is_an_error_not_a_crash(void **state)
{
    (void)state;
    json_error_t e;
    assert_null(lipi_json_loadb(NULL, 0, 0, &e));
    assert_int_equal(json_error_code(&e), json_error_premature_end_of_input);
    assert_int_equal(e.position, 0);
}

static void test_errors_give_line_column_and_position(void **state)
{
    (void)state;
    const char *t = "{\n  \"a\": [1,\n   x]\n}";
    json_error_t e;
    assert_null(lipi_json_loadb(t, strlen(t), 0, &e));
    assert_int_equal(e.line, 3);
    assert_int_equal(e.column, 4);
    assert_int_equal(e.position, (int)(strchr(t, 'x') - t) + 1);
    assert_non_null(strstr(e.text, "invalid token"));
}

static void test_nesting_100000_deep_is_a_clear_error(void **state)
{
    (void)state;
    size_t n = 100000;
    char *t = malloc(2 * n);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) {
        t[i] = i % 2 ? '[' : '{';
        t[2 * n - 1 - i] = ']';
    }
    memset(t, '[', n);
    json_error_t e;
    assert_null(lipi_json_loadb(t, 2 * n, 0, &e));
    assert_int_equal(json_error_code(&e), json_error_stack_overflow);
    assert_non_null(strstr(e.text, "maximum parsing depth"));
    assert_int_equal(e.position, LIPI_JSON_MAX_DEPTH + 1);
    /* Just below the limit parses. */
    size_t d = LIPI_JSON_MAX_DEPTH;
    memset(t, '[', d);
    memset(t + d, ']', d);
    json_t *j = lipi_json_loadb(t, 2 * d, 0, &e);
    assert_non_null(j);
    json_decref(j);
    free(t);
}

typedef struct {
    const char *text;
    json_t *want; /* jansson's value, parsed before the loop */
} parse_case;

static lipi_status parse_run(void *ctx, lipi_error *err)
{
    const parse_case *c = ctx;
    const char *t = c->text;
    json_error_t e;
    json_t *j = lipi_json_loadb(t, strlen(t), 0, &e);
    if (!j) {
        assert_int_equal(json_error_code(&e), json_error_out_of_memory);
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "%s", e.text);
    }
    bool same = json_equal(j, c->want);
    json_decref(j);
    assert_true(same); /* a parse that survived is complete */
    return LIPI_OK;
}

static void test_every_allocation_failure_gives_out_of_memory_and_leaks_nothing(void **state)
{
    (void)state;
    char doc[] = "{\"model\": {\"vocab\": {\"a\": 0, \"ab\": 1, \"\\u00e9\": 2, \"long string "
                 "that needs the scratch buffer to grow more than once\": 3}, \"merges\": "
                 "[[\"a\", \"b\"], \"a b\"], \"x\": [1.5, -2, true, null, {}]}, \"a\": 1, \"a\": 2}";
    parse_case c = {doc, json_loads(doc, 0, NULL)};
    assert_non_null(c.want);
    assert_true(alloc_fail_loop("json", parse_run, &c) > 20);
    json_decref(c.want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_what_jansson_accepts_with_equal_values),
        cmocka_unit_test(test_rejects_what_jansson_rejects_with_a_message),
        cmocka_unit_test(test_duplicate_keys_keep_the_last_value_or_fail_on_request),
        cmocka_unit_test(test_nul_in_strings_only_with_allow_nul_and_never_in_keys),
        cmocka_unit_test(test_no_text_is_an_error_not_a_crash),
        cmocka_unit_test(test_errors_give_line_column_and_position),
        cmocka_unit_test(test_nesting_100000_deep_is_a_clear_error),
        cmocka_unit_test(test_every_allocation_failure_gives_out_of_memory_and_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Records other than lines (the record reader, `lipi encode --input`),
 * token counts and the special-token policy (issue #29). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tokenizer.h"
#include "tests/cli_run.h"

#define RUN(args, input) cli_run(args, input, sizeof(input) - 1)
#define GPT2 "tests/fixtures/shared/vocab/gpt2/tokenizer.json"

/* All records of `data` read as `fmt`, as "text|extra" lines. */
static char *read_all(const char *data, size_t len, const lipi_record_options *ro)
{
    const char *path = cli_temp_file(data, len);
    lipi_record_reader *r = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_record_reader_open(path, ro, &r, &err), LIPI_OK);
    static char out[4096];
    size_t n = 0;
    for (;;) {
        lipi_record rec;
        assert_int_equal(lipi_record_reader_next(r, &rec, &err), LIPI_OK);
        if (!rec.text)
            break;
        n += (size_t)snprintf(out + n, sizeof out - n, "%zu:%.*s|%.*s\n", rec.number,
                              (int)rec.len, rec.text, (int)rec.extra_len, rec.extra);
    }
    lipi_record_reader_close(r);
    out[n] = 0;
    return out;
}

static void test_record_reader_splits_each_kind(void **state)
{
    static const char text[] = "a\r\nb\0c\r\n\nd";
    lipi_record_options ro = {.format = LIPI_RECORDS_LINES};
    assert_string_equal(read_all(text, sizeof text - 1, &ro), "1:a|\n2:b|\n3:|\n4:d|\n");
    ro.format = LIPI_RECORDS_NUL;
    assert_string_equal(read_all(text, sizeof text - 1, &ro), "1:a\r\nb|\n2:c\r\n\nd|\n");
    ro.format = LIPI_RECORDS_WHOLE;
    assert_string_equal(read_all("x\r\ny\n", 5, &ro), "1:x\r\ny\n|\n");
    /* An empty file is one empty text. */
    assert_string_equal(read_all("", 0, &ro), "1:|\n");
}

static void test_record_reader_jsonl_keeps_the_other_members_as_written(void **state)
{
    static const char text[] = "{\"id\": 1.50, \"text\": \"a\\nb\", \"m\": {\"x\": \"}\"}}\n"
                               "{ \"t\\u0065xt\" : \"c\" ,\"ids\":[1] }\n";
    static const char *const drop[] = {"ids"};
    lipi_record_options ro = {.format = LIPI_RECORDS_JSONL, .drop = drop, .n_drop = 1};
    assert_string_equal(read_all(text, sizeof text - 1, &ro),
                        "1:a\nb|\"id\": 1.50, \"m\": {\"x\": \"}\"}\n2:c|\n");
}

static void test_record_reader_jsonl_errors_name_record_and_column(void **state)
{
    static const struct {
        const char *in, *msg;
        size_t line, offset;
    } cases[] = {
        {"{\"text\": \"a\"}\n{\"text\": 1}\n",
         "record 2: member \"text\" at column 10 is a number, expected a string", 2, 23},
        {"{\"text\": \"a\"}\n{\"body\": \"b\"}\n",
         "record 2: no member \"text\" (expected a string member \"text\", at column 13: the "
         "end of the object)",
         2, 26},
        {"{\"text\": \"a\" \"b\"}\n", "record 1: invalid JSON at column 15: '}' expected", 1, 14},
        {"[\"text\"]\n", "record 1: expected a JSON object at column 1, found an array", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = cli_temp_file(cases[i].in, strlen(cases[i].in));
        lipi_record_options ro = {.format = LIPI_RECORDS_JSONL};
        lipi_record_reader *r = NULL;
        lipi_error err = {0};
        lipi_record rec;
        assert_int_equal(lipi_record_reader_open(path, &ro, &r, &err), LIPI_OK);
        lipi_status st;
        while ((st = lipi_record_reader_next(r, &rec, &err)) == LIPI_OK && rec.text)
            ;
        assert_int_equal(st, LIPI_EFORMAT);
        if (!strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: %s", i, err.msg);
        assert_string_equal(err.path, path);
        assert_int_equal(err.line, cases[i].line);
        assert_int_equal(err.offset, cases[i].offset);
        lipi_record_reader_close(r);
    }
}

static void test_encode_input_kinds(void **state)
{
    cli_result r = RUN("encode -t " GPT2 " --input nul", "hello world\nsecond\0x\r\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "31373 995 198 12227\n87 201 198\n");
    cli_result_free(&r);
    r = RUN("encode -t " GPT2 " --input whole", "hello world\nsecond\n");
    assert_string_equal(r.out, "31373 995 198 12227 198\n");
    cli_result_free(&r);
    r = RUN("encode -t " GPT2 " --input jsonl --text-field body --format jsonl",
            "{\"id\": 7, \"body\": \"hello\", \"ids\": [0]}\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "{\"id\": 7, \"ids\": [31373], \"tokens\": [\"hello\"], "
                               "\"offsets\": [[0, 5]]}\n");
    cli_result_free(&r);
    r = RUN("encode -t " GPT2 " --input jsonl", "{\"text\": \"a\"}\n{\"text\": null}\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "<stdin>:2: byte 23: record 2: member \"text\" at column 10 "
                                  "is null, expected a string"));
    cli_result_free(&r);
}

static void test_encode_count_and_total(void **state)
{
    cli_result r = RUN("encode -t " GPT2 " --format count --total --threads 2",
                       "hello world\n\nsecond\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "2\n0\n1\n");
    assert_string_equal(r.err, "lipi encode: 3 records, 3 tokens, 17 bytes, "
                               "176.5 tokens per 1,000 bytes\n");
    cli_result_free(&r);
    /* Counts of many records on 2 threads equal the ids' (several tasks
     * and blocks). */
    static char big[600000];
    size_t n = 0;
    for (size_t i = 0; n + 64 < sizeof big; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "line %zu %.*s\n", i, (int)(i % 40),
                              "aaaa bbbb cccc dddd eeee ffff gggg hhhh ");
    cli_result ids = cli_run("encode -t " GPT2, big, n);
    cli_result counts = cli_run("encode -t " GPT2 " --format count --threads 2", big, n);
    assert_int_equal(ids.code, 0);
    assert_int_equal(counts.code, 0);
    const char *p = ids.out, *q = counts.out;
    size_t lines = 0;
    while (*p) {
        size_t words = 1;
        const char *e = strchr(p, '\n');
        for (const char *k = p; k < e; k++)
            words += *k == ' ';
        if (e == p)
            words = 0;
        assert_int_equal(strtoul(q, NULL, 10), words);
        q = strchr(q, '\n') + 1;
        p = e + 1;
        lines++;
    }
    assert_int_equal(*q, 0);
    assert_true(lines > 10000);
    cli_result_free(&ids);
    cli_result_free(&counts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_reader_splits_each_kind),
        cmocka_unit_test(test_record_reader_jsonl_keeps_the_other_members_as_written),
        cmocka_unit_test(test_record_reader_jsonl_errors_name_record_and_column),
        cmocka_unit_test(test_encode_input_kinds),
        cmocka_unit_test(test_encode_count_and_total),
    };
    return cmocka_run_group_tests_name("encode_inputs", tests, NULL, NULL);
}

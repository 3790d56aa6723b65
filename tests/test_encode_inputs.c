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

#include "encoder/encoder.h"
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

static void test_special_policy_in_encode_and_batch(void **state)
{
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s[2] = {NULL, NULL};
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_open("cl100k_base", NULL, &tok, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s[0]), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s[1]), LIPI_OK);
    static const char text[] = "a<|endoftext|>b";
    static const uint32_t allow[] = {64, 100257, 65};
    static const uint32_t plain[] = {64, 27, 91, 8862, 728, 428, 91, 29, 65};
    lipi_encode_options opt;
    lipi_encode_options_default(enc, &opt);
    assert_int_equal(opt.special, LIPI_SPECIAL_ALLOW);
    uint32_t ids[32];
    lipi_encoding out = {.ids = ids, .cap = 32};
    assert_int_equal(lipi_encode(s[0], text, sizeof text - 1, &opt, &out, &err), LIPI_OK);
    assert_int_equal(out.len, 3);
    assert_memory_equal(ids, allow, sizeof allow);
    opt.special = LIPI_SPECIAL_TEXT;
    assert_int_equal(lipi_encode(s[0], text, sizeof text - 1, &opt, &out, &err), LIPI_OK);
    assert_int_equal(out.len, 9);
    assert_memory_equal(ids, plain, sizeof plain);
    opt.special = LIPI_SPECIAL_ERROR;
    assert_int_equal(lipi_encode(s[0], text, sizeof text - 1, &opt, &out, &err), LIPI_EINVAL);
    assert_int_equal(err.offset, 1);
    assert_non_null(strstr(err.msg, "special token \"<|endoftext|>\" at byte 1"));
    /* Batches honour it on every session; the error names the text. */
    lipi_text texts[200];
    for (size_t i = 0; i < 200; i++)
        texts[i] = (lipi_text){text, i == 150 ? sizeof text - 1 : 1};
    lipi_batch b = {0};
    opt.special = LIPI_SPECIAL_TEXT;
    assert_int_equal(lipi_encode_batch(s, 2, texts, 200, &opt, 0, &b, &err), LIPI_OK);
    assert_int_equal(b.start[151] - b.start[150], 9);
    assert_memory_equal(b.ids + b.start[150], plain, sizeof plain);
    lipi_batch_free(&b);
    opt.special = LIPI_SPECIAL_ERROR;
    err = (lipi_error){0};
    assert_int_equal(lipi_encode_batch(s, 2, texts, 200, &opt, 0, &b, &err), LIPI_EINVAL);
    assert_int_equal(err.line, 151);
    assert_non_null(strstr(err.msg, "<|endoftext|>"));
    opt.special = LIPI_SPECIAL_ALLOW;
    assert_int_equal(lipi_encode_batch(s, 2, texts, 200, &opt, 0, &b, &err), LIPI_OK);
    assert_int_equal(b.start[151] - b.start[150], 3);
    lipi_batch_free(&b);
    lipi_session_free(s[0]);
    lipi_session_free(s[1]);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
}

static void test_encode_special_policies(void **state)
{
    cli_result r = RUN("encode -t cl100k_base --special text", "a<|endoftext|>b\n");
    assert_string_equal(r.out, "64 27 91 8862 728 428 91 29 65\n");
    cli_result_free(&r);
    r = RUN("encode -t cl100k_base --special error --input jsonl",
            "{\"text\": \"ok\"}\n{\"text\": \"x <|fim_prefix|>\"}\n");
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "lipi encode: <stdin>:2: byte 2: record 2: special token "
                               "\"<|fim_prefix|>\" at byte 2 (expected text without special "
                               "tokens: allow them, or encode them as text)\n");
    cli_result_free(&r);
    /* BERT: [CLS] in the text is [CLS]'s id, or text. */
    r = RUN("encode -t tests/fixtures/shared/vocab/bert-base-uncased/vocab.txt --format tokens "
            "--special text",
            "hi [CLS]\n");
    assert_string_equal(r.out, "hi [ cl ##s ]\n");
    cli_result_free(&r);
    r = RUN("encode -t cl100k_base --special everything", "");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--special takes allow, text or error, not 'everything'"));
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_reader_splits_each_kind),
        cmocka_unit_test(test_record_reader_jsonl_keeps_the_other_members_as_written),
        cmocka_unit_test(test_record_reader_jsonl_errors_name_record_and_column),
        cmocka_unit_test(test_encode_input_kinds),
        cmocka_unit_test(test_encode_count_and_total),
        cmocka_unit_test(test_special_policy_in_encode_and_batch),
        cmocka_unit_test(test_encode_special_policies),
    };
    return cmocka_run_group_tests_name("encode_inputs", tests, NULL, NULL);
}

/* Records other than lines (the record reader, `lipi encode --input`),
 * token counts and the special-token policy (issue #29). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "encoder/encoder.h"
#include "tokenizer/tokenizer.h"
#include "tests/alloc_fail.h"
#include "tests/cli_run.h"

#define RUN(args, input) cli_run(args, input, sizeof(input) - 1)
#define GPT2 "tests/fixtures/shared/vocab/gpt2/tokenizer.json"
#define FIXTURES_ENC "tests/fixtures/encoder/"

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

/* Reads every record of the file ctx as JSONL, then as NUL records. */
static lipi_status read_records(void *ctx, lipi_error *err)
{
    static const char *const drop[] = {"ids"};
    lipi_status st = LIPI_OK;
    for (int f = 0; f < 2 && st == LIPI_OK; f++) {
        lipi_record_options ro = {.format = f ? LIPI_RECORDS_NUL : LIPI_RECORDS_JSONL,
                                  .drop = drop, .n_drop = 1};
        lipi_record_reader *r = NULL;
        lipi_record rec;
        size_t n = 0;
        st = lipi_record_reader_open(ctx, &ro, &r, err);
        while (st == LIPI_OK && (st = lipi_record_reader_next(r, &rec, err)) == LIPI_OK &&
               rec.text)
            n++;
        lipi_record_reader_close(r);
        if (st == LIPI_OK && n != (f ? 1u : 3u))
            fail_msg("%zu records", n);
    }
    return st;
}

static void test_record_reader_survives_every_allocation_failure(void **state)
{
    static const char text[] = "{\"id\": 1, \"text\": \"a\\nb\", \"ids\": [1]}\n"
                               "{\"t\\u0065xt\": \"\\u0000\", \"m\": {\"k\": [\"}\"]}}\n"
                               "{\"text\": \"\", \"x\": null}\n";
    const char *path = cli_temp_file(text, sizeof text - 1);
    assert_true(alloc_fail_loop("record reader", read_records, (void *)path) > 5);
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
     * and blocks), and the ids are those of 2 threads (one thread formats
     * them on its writing thread, two in their encoding tasks). */
    static char big[600000];
    size_t n = 0;
    for (size_t i = 0; n + 64 < sizeof big; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "line %zu %.*s\n", i, (int)(i % 40),
                              "aaaa bbbb cccc dddd eeee ffff gggg hhhh ");
    cli_result ids = cli_run("encode -t " GPT2, big, n);
    cli_result counts = cli_run("encode -t " GPT2 " --format count --threads 2", big, n);
    cli_result ids2 = cli_run("encode -t " GPT2 " --threads 2", big, n);
    assert_int_equal(ids.code, 0);
    assert_int_equal(counts.code, 0);
    assert_int_equal(ids2.code, 0);
    assert_string_equal(ids.out, ids2.out);
    cli_result_free(&ids2);
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

/* --format jsonl and ids say what the library's batch says, token by token,
 * on 1 and 2 threads: records short and long (a line of thousands of
 * tokens takes the formatter's path for long records), tokens that need
 * JSON escapes (quotes, backslashes, control bytes), empty lines, ids
 * written many times (the CLI keeps each id's text once made), added
 * tokens written in the text and Unigram's unknown runs (strings that are
 * not the vocabulary's: those records are encoded again with the batch's
 * strings), and offsets past the CLI's table of numbers (a line of more
 * than 2^18 bytes). */
static void test_encode_jsonl_and_ids_match_the_batch(void **state)
{
    (void)state;
    static const char *const toks[] = {GPT2, "cl100k_base",
                                       "tests/fixtures/tokenizer_json/unigram.json"};
    static char text[400000];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n,
                          "say \"hi\" \\ back\\slash\ttab \x01\x1f ctl\n\n"
                          "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
                          "world 12345678901234567890\n");
    for (size_t i = 0; i < 3000; i++) /* one long record */
        n += (size_t)snprintf(text + n, sizeof text - n, "w%zu \"q\" ", i * 7919 % 100003);
    text[n++] = '\n';
    for (size_t i = 0; i < 600; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "line %zu: %s\"x\\y\" %.*s\n", i,
                              i % 97 == 5 ? "<|endoftext|> <unk> " : "", (int)(i % 30),
                              "aa bb cc dd ee ff gg hh ii jj ");
    for (size_t i = 0; i < 90000; i++) /* offsets past 2^18 */
        n += (size_t)snprintf(text + n, sizeof text - n, "ab ");
    text[n++] = '\n';
    lipi_text lines[700];
    size_t n_lines = 0;
    for (const char *p = text; p < text + n; n_lines++) {
        const char *e = memchr(p, '\n', (size_t)(text + n - p));
        lines[n_lines] = (lipi_text){p, (size_t)(e - p)};
        p = e + 1;
    }
    for (size_t t = 0; t < sizeof toks / sizeof *toks; t++) {
        lipi_tokenizer *tok = NULL;
        lipi_encoder *enc = NULL;
        lipi_session *s = NULL;
        lipi_error err = {0};
        assert_int_equal(lipi_tokenizer_open(toks[t], NULL, &tok, &err), LIPI_OK);
        assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        lipi_batch b = {0};
        lipi_encode_options opt; /* as lipi encode: no post-processor tokens */
        lipi_encode_options_default(enc, &opt);
        opt.add_special_tokens = false;
        assert_int_equal(lipi_encode_batch(&s, 1, lines, n_lines, &opt,
                                           LIPI_WANT_TOKENS | LIPI_WANT_OFFSETS, &b, &err),
                         LIPI_OK);
        assert_true(b.start[4] - b.start[3] > 4000);
        char path[256]; /* cli_temp_file's slots are reused by cli_runf */
        snprintf(path, sizeof path, "%s", cli_temp_file(text, n));
        cli_result j1 = cli_runf("encode -t %s --format jsonl %s", toks[t], path);
        cli_result j2 = cli_runf("encode -t %s --format jsonl --threads 2 %s", toks[t], path);
        cli_result ids = cli_runf("encode -t %s --threads 2 %s", toks[t], path);
        cli_result ids1 = cli_runf("encode -t %s --threads 1 %s", toks[t], path);
        if (j1.code || j2.code || ids.code || ids1.code)
            fail_msg("lipi encode -t %s failed: %s%s%s%s", toks[t], j1.err, j2.err, ids.err,
                     ids1.err);
        assert_string_equal(j1.out, j2.out);
        assert_string_equal(ids.out, ids1.out);
        cli_result_free(&ids1);
        const char *p = j1.out, *q = ids.out;
        for (size_t i = 0; i < n_lines; i++) {
            const char *e = strchr(p, '\n');
            assert_non_null(e);
            json_error_t je;
            json_t *o = json_loadb(p, (size_t)(e - p), 0, &je);
            assert_non_null(o);
            json_t *ji = json_object_get(o, "ids"), *jt = json_object_get(o, "tokens"),
                   *jo = json_object_get(o, "offsets");
            size_t a = b.start[i], m = b.start[i + 1] - a;
            assert_int_equal(json_array_size(ji), m);
            assert_int_equal(json_array_size(jt), m);
            assert_int_equal(json_array_size(jo), m);
            char want[32];
            for (size_t k = 0; k < m; k++) {
                assert_int_equal(json_integer_value(json_array_get(ji, k)), b.ids[a + k]);
                const json_t *str = json_array_get(jt, k);
                size_t len = b.token_start[a + k + 1] - b.token_start[a + k];
                assert_int_equal(json_string_length(str), len);
                assert_memory_equal(json_string_value(str), b.token_text + b.token_start[a + k],
                                    len);
                const json_t *off = json_array_get(jo, k);
                assert_int_equal(json_integer_value(json_array_get(off, 0)),
                                 b.offsets[a + k].start);
                assert_int_equal(json_integer_value(json_array_get(off, 1)),
                                 b.offsets[a + k].end);
                /* The ids line: the same ids, separated by spaces. */
                int w = snprintf(want, sizeof want, k ? " %u" : "%u", b.ids[a + k]);
                assert_memory_equal(q, want, (size_t)w);
                q += w;
            }
            assert_int_equal(*q, '\n');
            q++;
            json_decref(o);
            p = e + 1;
        }
        assert_int_equal(*p, 0);
        assert_int_equal(*q, 0);
        cli_result_free(&j1);
        cli_result_free(&j2);
        cli_result_free(&ids);
        lipi_batch_free(&b);
        lipi_session_free(s);
        lipi_encoder_free(enc);
        lipi_tokenizer_free(tok);
    }
}

/* lipi_token_fixed_string gives the batch's string wherever it gives one,
 * and NULL for the ids whose string comes from elsewhere: the unknown
 * token (Unigram writes the unknown text), added tokens (the text they
 * matched) and the post-processor's tokens. */
static void test_token_fixed_string_is_the_batchs_string(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        uint32_t varies[3]; /* ids that must give NULL */
    } cases[] = {
        {"tests/fixtures/tokenizer_json/unigram.json", {0, 1, 2}}, /* <unk>, <pad>, </s>: added */
        {"tests/fixtures/tokenizer_json/wordpiece.json", {1, 2, 3}}, /* [UNK], [CLS], [SEP] */
        {GPT2, {50256, 50256, 50256}},                              /* <|endoftext|> */
    };
    static const char *const texts[] = {"say \"hi\" \xe0\xbf\x90 <unk> x [CLS] hello, hellos",
                                        "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0"
                                        "\xa4\xa4\xe0\xa5\x87 world <|endoftext|> [SEP]",
                                        ""};
    lipi_text lines[3];
    for (size_t i = 0; i < 3; i++)
        lines[i] = (lipi_text){texts[i], strlen(texts[i])};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        lipi_tokenizer *tok = NULL;
        lipi_encoder *enc = NULL;
        lipi_session *s = NULL;
        lipi_error err = {0};
        assert_int_equal(lipi_tokenizer_open(cases[c].path, NULL, &tok, &err), LIPI_OK);
        assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        for (size_t v = 0; v < 3; v++) {
            size_t len = 99;
            assert_null(lipi_token_fixed_string(enc, cases[c].varies[v], &len));
        }
        lipi_encode_options opt;
        lipi_encode_options_default(enc, &opt);
        opt.add_special_tokens = true;
        lipi_batch b = {0};
        assert_int_equal(lipi_encode_batch(&s, 1, lines, 3, &opt, LIPI_WANT_TOKENS, &b, &err),
                         LIPI_OK);
        size_t fixed = 0;
        for (size_t k = 0; k < b.start[3]; k++) {
            size_t len = 0;
            const char *str = lipi_token_fixed_string(enc, b.ids[k], &len);
            if (!str)
                continue;
            fixed++;
            assert_int_equal(len, b.token_start[k + 1] - b.token_start[k]);
            assert_memory_equal(str, b.token_text + b.token_start[k], len);
        }
        assert_true(fixed >= 3);
        lipi_batch_free(&b);
        lipi_session_free(s);
        lipi_encoder_free(enc);
        lipi_tokenizer_free(tok);
    }
}

/* lipi_encode_options.utf8_checked skips the encoder's own check and
 * nothing else: the same ids and offsets. */
static void test_utf8_checked_gives_the_same_tokens(void **state)
{
    (void)state;
    static const char text[] = "n\xc3\xa4me \xe0\xa4\xa8\xe0\xa4\xae <|endoftext|> \xf0\x9f\xa6\x9c";
    lipi_text line = {text, sizeof text - 1};
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_open("cl100k_base", NULL, &tok, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    lipi_encode_options opt;
    lipi_encode_options_default(enc, &opt);
    lipi_batch a = {0}, b = {0};
    assert_int_equal(lipi_encode_batch(&s, 1, &line, 1, &opt, LIPI_WANT_OFFSETS, &a, &err),
                     LIPI_OK);
    opt.utf8_checked = true;
    assert_int_equal(lipi_encode_batch(&s, 1, &line, 1, &opt, LIPI_WANT_OFFSETS, &b, &err),
                     LIPI_OK);
    assert_true(a.start[1] > 5);
    assert_int_equal(a.start[1], b.start[1]);
    assert_memory_equal(a.ids, b.ids, a.start[1] * sizeof *a.ids);
    assert_memory_equal(a.offsets, b.offsets, a.start[1] * sizeof *a.offsets);
    /* Without the flag the encoder still refuses what is not UTF-8. */
    lipi_text bad = {"a\xff", 2};
    lipi_batch c = {0};
    opt.utf8_checked = false;
    assert_int_equal(lipi_encode_batch(&s, 1, &bad, 1, &opt, 0, &c, &err), LIPI_EFORMAT);
    lipi_batch_free(&a);
    lipi_batch_free(&b);
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
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

/* ------------------------------------------------------------------------ */
/* --format pieces (issue #19, item 5)                                        */
/* ------------------------------------------------------------------------ */

/* Reads a --format pieces line back into bytes, the tokens joined: "␣" is a
 * space, "<0xNN>" a byte, "\" escapes the next character (\t, \n, \r, \\,
 * \␣, \<). Written from the help text, not from cmd_encode.c. */
static size_t unpieces(const char *line, char *out)
{
    size_t n = 0;
    for (const char *p = line; *p && *p != '\n' && *p != '\t';) {
        if (*p == ' ') {
            p++;
        } else if (strncmp(p, "\xe2\x90\xa3", 3) == 0) {
            out[n++] = ' ';
            p += 3;
        } else if (strncmp(p, "<0x", 3) == 0 && p[5] == '>') {
            out[n++] = (char)strtoul((char[]){p[3], p[4], 0}, NULL, 16);
            p += 6;
        } else if (*p == '\\') {
            char c = p[1];
            out[n++] = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c;
            p += 2;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return n;
}

/* Expected lines: the byte-level ones were made independently, by mapping
 * the --format tokens output through Python's GPT-2 bytes_to_unicode table
 * and writing each byte that is not part of a whole character as <0xNN>. */
static void test_encode_pieces_show_each_tokens_text(void **state)
{
    char back[512];
    /* cl100k cuts Devanagari characters: their bytes show as <0xNN>. */
    cli_result r = RUN("encode -t cl100k_base --format pieces", "नमस्ते दुनिया\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "न म स ्<0xE0><0xA4> <0xA4> े ␣<0xE0><0xA4> <0xA6> ु न "
                               "ि<0xE0><0xA4> <0xAF> ा\n");
    unpieces(r.out, back);
    assert_string_equal(back, "नमस्ते दुनिया");
    cli_result_free(&r);
    /* GPT-2: Ġ is a space; escapes keep the line readable back. */
    r = RUN("encode -t " GPT2 " --format pieces", "Hello world \\ <0x41> a␣b\tc 😀\n");
    assert_string_equal(r.out, "Hello ␣world ␣\\\\ ␣< 0 x 41 > ␣a <0xE2> <0x90> <0xA3> b \\t c "
                               "␣<0xF0><0x9F><0x98> <0x80>\n");
    unpieces(r.out, back);
    assert_string_equal(back, "Hello world \\ <0x41> a␣b\tc 😀");
    cli_result_free(&r);
    /* A token holding "<0x" or "␣" as text is escaped. */
    r = RUN("encode -t " GPT2 " --format pieces", "␣<0x\n");
    unpieces(r.out, back);
    assert_string_equal(back, "␣<0x");
    cli_result_free(&r);
    /* SentencePiece: ▁ is a space, so the pieces give the normalized text
     * (with the space the model prepends). */
    r = RUN("encode -t tests/fixtures/shared/vocab/laser100k-spm/laser_100k.model "
            "--format pieces --offsets",
            "Hello world नमस्ते\n");
    assert_string_equal(r.out, "␣Hell o ␣world ␣नम स्त े\t0-4 4-5 5-11 11-18 18-27 27-30\n");
    unpieces(r.out, back);
    assert_string_equal(back, " Hello world नमस्ते");
    cli_result_free(&r);
    /* Byte fallback: each byte piece is its byte. */
    r = RUN("encode -t " FIXTURES_ENC "unigram_bf.json --format pieces", "a 😀\n");
    unpieces(r.out, back);
    assert_string_equal(back, " a 😀");
    assert_non_null(strstr(r.out, "<0xF0> <0x9F> <0x98> <0x80>"));
    cli_result_free(&r);
    /* WordPiece keeps ## (the decoder's joining rule, not text). */
    r = RUN("encode -t tests/fixtures/shared/vocab/bert-base-uncased/vocab.txt --format pieces",
            "Hello नमस्ते\n");
    assert_string_equal(r.out, "hello न ##म ##स ##त\n");
    cli_result_free(&r);
    r = RUN("encode -t cl100k_base --format words", "");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ids, tokens, pieces, jsonl or count"));
    cli_result_free(&r);
}

static void test_token_bytes_maps_the_byte_alphabet_back(void **state)
{
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err = {0};
    char buf[16];
    size_t n = 0;
    assert_int_equal(lipi_tokenizer_open(GPT2, NULL, &tok, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    /* 995: "Ġworld"; size query first, then the bytes. */
    assert_int_equal(lipi_token_bytes(s, 995, NULL, 0, &n, &err), LIPI_OK);
    assert_int_equal(n, 6);
    assert_int_equal(lipi_token_bytes(s, 995, buf, sizeof buf, &n, &err), LIPI_OK);
    assert_string_equal(buf, " world");
    /* 50256: the added token <|endoftext|> stays itself. */
    assert_int_equal(lipi_token_bytes(s, 50256, buf, sizeof buf, &n, &err), LIPI_OK);
    assert_string_equal(buf, "<|endoftext|>");
    assert_int_equal(lipi_token_bytes(s, 1000000, buf, sizeof buf, &n, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "id 1000000 is not a token id"));
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
}

/* ------------------------------------------------------------------------ */
/* Reference ids from npm tiktoken / tokenizers                               */
/* (tests/fixtures/encoder/make_record_fixtures.js)                           */
/* ------------------------------------------------------------------------ */

#define FIXTURES "tests/fixtures/encoder/"

/* The rows of a fixture (its _meta line left out), as a JSON array. */
static json_t *load_rows(const char *path)
{
    lipi_record_reader *r = NULL;
    lipi_error err = {0};
    if (lipi_record_reader_open(path, NULL, &r, &err) != LIPI_OK)
        fail_msg("%s: %s", path, err.msg);
    json_t *rows = json_array();
    lipi_record rec;
    while (lipi_record_reader_next(r, &rec, &err) == LIPI_OK && rec.text) {
        json_error_t jerr;
        json_t *row = json_loadb(rec.text, rec.len, 0, &jerr);
        if (!row)
            fail_msg("%s:%zu: %s", path, rec.number, jerr.text);
        if (json_object_get(row, "_meta"))
            json_decref(row);
        else
            json_array_append_new(rows, row);
    }
    assert_int_equal(err.code, LIPI_OK);
    lipi_record_reader_close(r);
    assert_true(json_array_size(rows) > 0);
    return rows;
}

/* "1 2 3": ids as one string, so that a mismatch prints readably. */
static char *ids_string(const json_t *ids)
{
    size_t n = json_array_size(ids), cap = 12 * n + 1, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    s[0] = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%lld", i ? " " : "",
                                (long long)json_integer_value(json_array_get(ids, i)));
    return s;
}

static void assert_same_ids(const json_t *want, const json_t *got, const char *what)
{
    char *a = ids_string(want), *b = ids_string(got);
    if (strcmp(a, b) != 0)
        fail_msg("%s: ids differ\n  reference: %.300s\n  lipi:      %.300s", what, a, b);
    free(a);
    free(b);
}

/* Writes rows[i] for the i with pick[i] as JSONL; returns the file. */
static const char *write_jsonl(const json_t *rows, const bool *pick)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (pick[i]) {
            char *line = json_dumps(json_array_get(rows, i), JSON_COMPACT);
            fprintf(f, "%s\n", line);
            free(line);
        }
    fclose(f);
    const char *path = cli_temp_file(buf, len);
    free(buf);
    return path;
}

/* Encodes the picked rows (which carry text and ids) with one run of
 * `lipi encode ARGS --input jsonl --format jsonl` and one of --format
 * count; the ids must be the rows' and the other members come back. */
static void check_group(const json_t *rows, const bool *pick, const char *args, const char *what)
{
    const char *path = write_jsonl(rows, pick);
    cli_result r = cli_runf("encode %s --input jsonl --format jsonl %s", args, path);
    cli_result c = cli_runf("encode %s --input jsonl --format count --threads 2 %s", args, path);
    if (r.code != 0 || c.code != 0)
        fail_msg("%s: lipi encode %s failed: %s%s", what, args, r.err, c.err);
    char *line = r.out, *count = c.out;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        if (!pick[i])
            continue;
        const json_t *row = json_array_get(rows, i);
        char *end = strchr(line, '\n');
        assert_non_null(end);
        *end = 0;
        json_error_t jerr;
        json_t *got = json_loads(line, 0, &jerr);
        if (!got)
            fail_msg("%s: lipi's line is not JSON: %s", what, jerr.text);
        char label[160];
        snprintf(label, sizeof label, "%s, %s %.40s", what,
                 json_string_value(json_object_get(row, "case")) ?: "",
                 json_string_value(json_object_get(row, "text")));
        assert_same_ids(json_object_get(row, "ids"), json_object_get(got, "ids"), label);
        /* The row's other members pass through; its "ids" gave way. */
        assert_true(json_equal(json_object_get(got, "tokenizer") ?: json_object_get(got, "case"),
                               json_object_get(row, "tokenizer") ?: json_object_get(row, "case")));
        assert_int_equal(strtoul(count, &count, 10), json_array_size(json_object_get(row, "ids")));
        assert_int_equal(*count++, '\n');
        json_decref(got);
        line = end + 1;
    }
    assert_int_equal(*line, 0);
    assert_int_equal(*count, 0);
    cli_result_free(&r);
    cli_result_free(&c);
}

/* tiktoken's names; its "gpt2" encoding has r50k_base's ranks. */
static const char *lipi_encoding_name(const char *tiktoken_name)
{
    return strcmp(tiktoken_name, "gpt2") == 0 ? "r50k_base" : tiktoken_name;
}

/* decode reads the same kinds of records encode does, and ends each text as
 * its input record ended: whole and NUL records come back byte for byte. */
static void test_decode_input_kinds(void **state)
{
    (void)state;
    static const char doc[] = "hello world\r\n  two  \n\n\xe0\xa4\x9c\xe0\xa4\xbc end";
    const char *path = cli_temp_file(doc, sizeof doc - 1);
    cli_result ids = cli_runf("encode -t " GPT2 " --input whole %s", path);
    assert_int_equal(ids.code, 0);
    cli_result r = cli_run("decode -t " GPT2 " --input whole", ids.out, ids.out_len);
    cli_result_free(&ids);
    assert_int_equal(r.code, 0);
    assert_int_equal(r.out_len, sizeof doc - 1);
    assert_memory_equal(r.out, doc, sizeof doc - 1);
    cli_result_free(&r);

    /* NUL records: each text is followed by a NUL. */
    r = RUN("decode -t " GPT2 " --input nul", "31373 995 198 12227\0" "87\n201\0");
    assert_int_equal(r.code, 0);
    assert_int_equal(r.out_len, sizeof "hello world\nsecond\0x\r\0" - 1);
    assert_memory_equal(r.out, "hello world\nsecond\0x\r\0", r.out_len);
    cli_result_free(&r);

    /* JSONL: the ids array in "ids" (or --text-field), the other members
     * passed on before "text"; --format text writes a line per text. */
    r = RUN("decode -t " GPT2 " --input jsonl --format jsonl",
            "{\"id\": 7, \"ids\": [31373, 198, 995], \"lang\": \"en\"}\n{\"ids\": []}\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "{\"id\": 7, \"lang\": \"en\", \"text\": \"hello\\n world\"}\n"
                               "{\"text\": \"\"}\n");
    cli_result_free(&r);
    r = RUN("decode -t " GPT2 " --input jsonl --text-field t", "{\"t\": [31373]}\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello\n");
    cli_result_free(&r);

    /* What is not an array of ids is named with its record and element. */
    r = RUN("decode -t " GPT2 " --input jsonl", "{\"ids\": [1]}\n{\"ids\": [1, \"a\"]}\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "<stdin>:2: byte 21: record 2: element 2 of member \"ids\" is "
                                  "a string, expected a token id"));
    cli_result_free(&r);
    r = RUN("decode -t " GPT2 " --input jsonl", "{\"ids\": \"1 2\"}\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "member \"ids\" is a string, expected an array of token ids"));
    cli_result_free(&r);
    r = RUN("decode -t " GPT2 " --input jsonl", "{\"ids\": [4294967296]}\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "element 1 of member \"ids\" is out of range"));
    cli_result_free(&r);
    r = RUN("decode -t " GPT2 " --input jsonl", "{\"ids\": [50257]}\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "<stdin>:1: byte 0: id 50257 is not a token id"));
    cli_result_free(&r);
    r = RUN("decode -t " GPT2 " --format xml", "");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--format takes text or jsonl, not 'xml'"));
    cli_result_free(&r);
}

/* inflation reads aligned records of any kind: the same texts as JSONL or
 * as lines give the same report, whole files are one record each, and a
 * count mismatch names records. */
static void test_inflation_input_kinds(void **state)
{
    (void)state;
    char dir[] = "/tmp/lipi-infl-XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const struct {
        const char *name, *data;
    } files[] = {
        {"lines/eng.txt", "Hello world.\nSecond line here.\n"},
        {"lines/hin.txt", "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
                          "\xe0\xa4\xa6\xe0\xa5\x81\xe0\xa4\xa8\xe0\xa4\xbf\xe0\xa4\xaf\xe0\xa4\xbe\n"
                          "\xe0\xa4\xa6\xe0\xa5\x82\xe0\xa4\xb8\xe0\xa4\xb0\xe0\xa5\x80\n"},
        {"jsonl/eng.jsonl", "{\"id\": 1, \"text\": \"Hello world.\"}\n"
                            "{\"text\": \"Second line here.\"}\n"},
        {"jsonl/hin.jsonl", "{\"text\": \"\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0"
                            "\xa4\xa4\xe0\xa5\x87 \xe0\xa4\xa6\xe0\xa5\x81\xe0\xa4\xa8\xe0\xa4"
                            "\xbf\xe0\xa4\xaf\xe0\xa4\xbe\"}\n"
                            "{\"text\": \"\xe0\xa4\xa6\xe0\xa5\x82\xe0\xa4\xb8\xe0\xa4\xb0\xe0"
                            "\xa5\x80\"}\n"},
        {"short/eng.jsonl", "{\"text\": \"Hello world.\"}\n"},
    };
    char path[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        char *slash = strrchr(path, '/');
        *slash = 0;
        mkdir(path, 0700);
        *slash = '/';
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(files[i].data, f);
        fclose(f);
    }
    cli_result lines = cli_runf("inflation -t " GPT2 " --format csv --parallel %s/lines", dir);
    assert_int_equal(lines.code, 0);
    cli_result jsonl =
        cli_runf("inflation -t " GPT2 " --format csv --input jsonl --parallel %s/jsonl", dir);
    assert_int_equal(jsonl.code, 0);
    assert_string_equal(jsonl.out, lines.out);
    assert_non_null(strstr(lines.out, "gpt2,hin,2,"));
    cli_result_free(&jsonl);
    cli_result_free(&lines);

    /* Whole files: each file is one record, its newlines inside the text. */
    cli_result whole =
        cli_runf("inflation -t " GPT2 " --format csv --input whole --parallel %s/lines", dir);
    assert_int_equal(whole.code, 0);
    assert_non_null(strstr(whole.out, "gpt2,eng,1,"));
    cli_result_free(&whole);

    cli_result bad = cli_runf("inflation -t " GPT2 " --input jsonl --reference eng --parallel "
                   "%s/short/eng.jsonl %s/jsonl/hin.jsonl",
                   dir, dir);
    assert_int_equal(bad.code, 1);
    assert_non_null(strstr(bad.err, "has 2 records but"));
    assert_non_null(strstr(bad.err, "has 1: expected record-aligned files"));
    cli_result_free(&bad);
    cli_result text = cli_runf("inflation -t " GPT2 " --input jsonl --text %s/jsonl/eng.jsonl "
                               "--format csv", dir);
    assert_int_equal(text.code, 0);
    assert_non_null(strstr(text.out, "gpt2,Latin,2,"));
    cli_result_free(&text);
    cli_result rm = cli_runf("inflation --help >/dev/null; rm -r %s", dir);
    cli_result_free(&rm);
}

static void test_tiktoken_public_cases(void **state)
{
    json_t *rows = load_rows(FIXTURES "tiktoken_cases.jsonl.gz");
    size_t n = json_array_size(rows), checked = 0, refused = 0;
    bool *pick = calloc(n, sizeof *pick), *done = calloc(n, sizeof *done);
    assert_true(pick && done);
    for (size_t i = 0; i < n; i++) {
        const json_t *row = json_array_get(rows, i);
        const char *enc = json_string_value(json_object_get(row, "encoding"));
        const char *special = json_string_value(json_object_get(row, "special"));
        const char *token = json_string_value(json_object_get(row, "error_token"));
        if (token) {
            /* tiktoken refuses: lipi names the same (first) token. */
            bool one[1] = {true};
            json_t *single = json_array();
            json_array_append(single, (json_t *)row);
            const char *path = write_jsonl(single, one);
            json_decref(single);
            cli_result r = cli_runf("encode -t %s --special error --input jsonl %s",
                                    lipi_encoding_name(enc), path);
            char want[128];
            snprintf(want, sizeof want, "record 1: special token \"%s\" at byte", token);
            assert_int_equal(r.code, 1);
            if (!strstr(r.err, want))
                fail_msg("expected '%s' in: %s", want, r.err);
            cli_result_free(&r);
            done[i] = true;
            refused++;
            continue;
        }
        if (done[i])
            continue;
        /* All rows of this encoding and policy in one run. */
        for (size_t k = i; k < n; k++) {
            const json_t *o = json_array_get(rows, k);
            pick[k] = !done[k] && !json_object_get(o, "error_token") &&
                      strcmp(json_string_value(json_object_get(o, "encoding")), enc) == 0 &&
                      strcmp(json_string_value(json_object_get(o, "special")), special) == 0;
        }
        char args[128], what[128];
        snprintf(args, sizeof args, "-t %s --special %s", lipi_encoding_name(enc), special);
        snprintf(what, sizeof what, "%s --special %s", enc, special);
        check_group(rows, pick, args, what);
        for (size_t k = i; k < n; k++)
            if (pick[k]) {
                done[k] = true;
                checked++;
                pick[k] = false;
            }
    }
    assert_int_equal(checked + refused, n);
    assert_int_equal(refused, 4);
    free(pick);
    free(done);
    json_decref(rows);
}

/* The rows of `rows` made for tokenizer `tok` (13 of them), encoded by lipi
 * as JSONL records, as whole files (the first five) and as NUL-separated
 * records: the same ids every way. */
static void check_multiline(json_t *rows, const char *tok)
{
    size_t n = json_array_size(rows);
    bool *pick = calloc(n, sizeof *pick);
    assert_non_null(pick);
    size_t picked = 0;
    char *nul = NULL;
    size_t nul_len = 0;
    FILE *f = open_memstream(&nul, &nul_len);
    for (size_t i = 0; i < n; i++) {
        const json_t *row = json_array_get(rows, i);
        pick[i] = strcmp(json_string_value(json_object_get(row, "tokenizer")), tok) == 0;
        if (!pick[i])
            continue;
        picked++;
        const json_t *text = json_object_get(row, "text");
        fwrite(json_string_value(text), 1, json_string_length(text), f);
        fputc(0, f);
        /* The first texts again as whole files. */
        if (picked <= 5) {
            const char *path = cli_temp_file(json_string_value(text), json_string_length(text));
            cli_result r = cli_runf("encode -t %s --input whole --format jsonl %s", tok, path);
            assert_int_equal(r.code, 0);
            json_t *got = json_loads(r.out, 0, NULL);
            assert_non_null(got);
            assert_same_ids(json_object_get(row, "ids"), json_object_get(got, "ids"), tok);
            json_decref(got);
            cli_result_free(&r);
        }
    }
    fclose(f);
    assert_int_equal(picked, 13);
    char args[160];
    snprintf(args, sizeof args, "-t %s", tok);
    check_group(rows, pick, args, tok);
    /* The same texts as NUL-separated records. */
    cli_result r =
        cli_runf("encode -t %s --input nul --format jsonl %s", tok, cli_temp_file(nul, nul_len));
    assert_int_equal(r.code, 0);
    char *line = r.out;
    for (size_t i = 0; i < n; i++) {
        if (!pick[i])
            continue;
        char *end = strchr(line, '\n');
        assert_non_null(end);
        *end = 0;
        json_t *got = json_loads(line, 0, NULL);
        assert_non_null(got);
        assert_same_ids(json_object_get(json_array_get(rows, i), "ids"),
                        json_object_get(got, "ids"), tok);
        json_decref(got);
        line = end + 1;
    }
    cli_result_free(&r);
    free(nul);
    free(pick);
}

static void test_multiline_records_match_tiktoken_and_hugging_face(void **state)
{
    (void)state;
    json_t *rows = load_rows(FIXTURES "multiline_records.jsonl.gz");
    static const char *const toks[] = {
        "cl100k_base", "o200k_base", "tests/fixtures/shared/vocab/gpt2/tokenizer.json",
        "tests/fixtures/shared/vocab/bert-base-uncased/vocab.txt"};
    for (size_t t = 0; t < sizeof toks / sizeof *toks; t++)
        check_multiline(rows, toks[t]);
    json_decref(rows);
}

/* The same texts through SentencePiece .model files (Unigram, nmt_nfkc):
 * the ids SentencePiece itself gives (make_spm_records.py). */
static void test_multiline_records_match_sentencepiece(void **state)
{
    (void)state;
    json_t *rows = load_rows(FIXTURES "multiline_spm.jsonl.gz");
    check_multiline(rows, "tests/fixtures/shared/vectors/sentencepiece/test_model.model");
    check_multiline(rows, "tests/fixtures/shared/vocab/laser100k-spm/laser_100k.model");
    json_decref(rows);
}

/* ------------------------------------------------------------------------ */
/* Long texts: lipi_encode_stream and `lipi encode` on records over 1 MiB    */
/* ------------------------------------------------------------------------ */

typedef struct {
    uint32_t *ids;
    size_t n, cap, calls, biggest;
} stream_got;

static lipi_status collect_ids(void *ctx, const uint32_t *ids, size_t n)
{
    stream_got *g = ctx;
    assert_true(n > 0 && n <= LIPI_STREAM_IDS);
    if (g->n + n > g->cap) {
        g->cap = 2 * (g->n + n);
        g->ids = realloc(g->ids, g->cap * sizeof *g->ids);
        assert_non_null(g->ids);
    }
    memcpy(g->ids + g->n, ids, n * sizeof *ids);
    g->n += n;
    g->calls++;
    return LIPI_OK;
}

/* The largest block asked for while the hooks below are installed. */
static size_t big_alloc;
static void *track_malloc(size_t n)
{
    if (n > big_alloc)
        big_alloc = n;
    return malloc(n);
}
static void *track_realloc(void *p, size_t n)
{
    if (n > big_alloc)
        big_alloc = n;
    return realloc(p, n);
}
static const lipi_alloc_hooks track_hooks = {track_malloc, track_realloc, free};

/* `unit` repeated to at least `len` bytes (whole units). */
static char *repeat_text(const char *unit, size_t len, size_t *out_len)
{
    size_t u = strlen(unit), n = (len + u - 1) / u * u;
    char *t = malloc(n + 1);
    assert_non_null(t);
    for (size_t i = 0; i < n; i += u)
        memcpy(t + i, unit, u);
    t[n] = 0;
    *out_len = n;
    return t;
}

/* Opens tokenizer `path` and its encoder, and sets *opt to its default
 * options, but no special tokens added when `plain`. */
static void open_encoder(const char *path, bool plain, lipi_tokenizer **tok, lipi_encoder **enc,
                         lipi_encode_options *opt)
{
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_open(path, NULL, tok, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(*tok, enc, &err), LIPI_OK);
    lipi_encode_options_default(*enc, opt);
    if (plain)
        opt->add_special_tokens = false;
}

/* lipi_encode's ids of text with tokenizer `path` (default options, but
 * no special tokens added when `plain`), in a new buffer; *n of them. */
static uint32_t *ids_of_opt(const char *path, const char *text, size_t len, bool plain,
                            size_t *n)
{
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err = {0};
    lipi_encode_options opt;
    open_encoder(path, plain, &tok, &enc, &opt);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    lipi_encoding out = {0};
    assert_int_equal(lipi_encode(s, text, len, &opt, &out, &err), LIPI_OK);
    out.cap = out.len;
    out.ids = malloc((out.len ? out.len : 1) * sizeof *out.ids);
    assert_int_equal(lipi_encode(s, text, len, &opt, &out, &err), LIPI_OK);
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    *n = out.len;
    return out.ids;
}

static uint32_t *ids_of(const char *path, const char *text, size_t len, size_t *n)
{
    return ids_of_opt(path, text, len, false, n);
}

/* Streams text with tokenizer `path` (no special tokens added) into *g,
 * and returns the largest block asked for meanwhile. */
static size_t tracked_stream(const char *path, const char *text, size_t len, stream_got *g)
{
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err = {0};
    lipi_encode_options opt;
    open_encoder(path, true, &tok, &enc, &opt);
    lipi_set_alloc_hooks(&track_hooks);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    big_alloc = 0;
    assert_int_equal(lipi_encode_stream(s, text, len, &opt, collect_ids, g, NULL, &err), LIPI_OK);
    size_t big = big_alloc;
    lipi_session_free(s);
    lipi_set_alloc_hooks(NULL);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return big;
}

#define LONG_TEXT ((size_t)1200000) /* over the CLI's 1 MiB LONG_RECORD */

/* The worst cases of bench/worst.sh, at 1.2 MB: a word without spaces, one
 * character repeated (ASCII and Devanagari), and many short words with
 * special tokens between them. Streamed ids equal lipi_encode's for every
 * model type (tiktoken backtracking, byte-level BPE's merge loop,
 * WordPiece, SentencePiece Unigram and BPE), in slices of at most
 * LIPI_STREAM_IDS. */
static void test_stream_gives_the_ids_of_lipi_encode(void **state)
{
    (void)state;
    static const char *const toks[] = {
        "cl100k_base", GPT2, "tests/fixtures/shared/vocab/bert-base-uncased/vocab.txt",
        "tests/fixtures/shared/vocab/laser100k-spm/laser_100k.model",
        "tests/fixtures/readers/bpe_bytes.model"};
    static const char *const units[] = {
        "नमस्तेदुनियाHelloWorld42", "a", "क", "hello world, नमस्ते! <|endoftext|>[SEP] "};
    for (size_t t = 0; t < sizeof toks / sizeof *toks; t++) {
        lipi_tokenizer *tok = NULL;
        lipi_encoder *enc = NULL;
        lipi_session *s = NULL;
        lipi_error err = {0};
        /* As `lipi encode` without --add-special-tokens (BERT's [CLS] ...
         * [SEP] would need the whole text first). */
        lipi_encode_options opt;
        open_encoder(toks[t], true, &tok, &enc, &opt);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        assert_true(lipi_encode_can_stream(enc, &opt));
        for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
            size_t len, n_ids = 0;
            char *text = repeat_text(units[u], LONG_TEXT, &len);
            lipi_encoding out = {0};
            assert_int_equal(lipi_encode(s, text, len, &opt, &out, &err), LIPI_OK);
            out.cap = out.len;
            out.ids = malloc((out.len ? out.len : 1) * sizeof *out.ids);
            assert_int_equal(lipi_encode(s, text, len, &opt, &out, &err), LIPI_OK);
            stream_got g = {0};
            assert_int_equal(lipi_encode_stream(s, text, len, &opt, collect_ids, &g, &n_ids, &err),
                             LIPI_OK);
            assert_int_equal(n_ids, out.len);
            assert_int_equal(g.n, out.len);
            assert_true(out.len > 0);
            assert_memory_equal(g.ids, out.ids, out.len * sizeof *out.ids);
            /* The session works as before afterwards. */
            size_t cap = out.cap;
            out.cap = 0;
            assert_int_equal(lipi_encode(s, text, len, &opt, &out, &err), LIPI_OK);
            assert_int_equal(out.len, cap);
            free(g.ids);
            free(out.ids);
            free(text);
        }
        /* Ids that depend on the whole text cannot be streamed. */
        opt.max_length = 8;
        stream_got g = {0};
        assert_false(lipi_encode_can_stream(enc, &opt));
        assert_int_equal(lipi_encode_stream(s, "hi", 2, &opt, collect_ids, &g, NULL, &err),
                         LIPI_EINVAL);
        assert_int_equal(g.n, 0);
        lipi_session_free(s);
        lipi_encoder_free(enc);
        lipi_tokenizer_free(tok);
    }
}

/* SentencePiece BPE on one 1.2 MB piece of 'a' (its merges never join two
 * a's) and of "an" (merges join them both ways: no cut): the merge loop
 * would hold 16 bytes a character in symbols and 12 in tokens, and its
 * heap 48 (blocks of 16 MB and more); streamed, 'a' goes through in parts
 * of 64 KiB and "an" in 2 bytes and a bit a byte (encoder/bpe_long.c), and
 * no block of 8 MB or more is asked for (the normalized text's is 4 MB). */
static void test_stream_of_one_long_bpe_piece_holds_a_part(void **state)
{
    (void)state;
    const char *path = "tests/fixtures/readers/bpe_bytes.model";
    static const char *const units[] = {"a", "an"};
    for (size_t u = 0; u < 2; u++) {
        size_t len, n;
        char *text = repeat_text(units[u], LONG_TEXT, &len);
        stream_got g = {0};
        assert_true(tracked_stream(path, text, len, &g) < ((size_t)8 << 20));
        uint32_t *want = ids_of_opt(path, text, len, true, &n);
        assert_int_equal(g.n, n);
        assert_true(n > LONG_TEXT / 16);
        assert_memory_equal(g.ids, want, n * sizeof *want);
        free(want);
        free(g.ids);
        free(text);
    }
}

/* What a streamed text holds: 1.2 MB of short words is 240,000 tokens,
 * which lipi_encode keeps as records of ~50 bytes (a block over 8 MB);
 * streamed, no block of 4 MB or more is asked for (pieces go to the model
 * a window at a time, ids to the sink a slice at a time). */
static void test_stream_holds_no_block_per_token(void **state)
{
    (void)state;
    static const char *const toks[] = {"cl100k_base", GPT2};
    size_t len;
    char *text = repeat_text("hello world 42 ", LONG_TEXT, &len);
    for (size_t t = 0; t < sizeof toks / sizeof *toks; t++) {
        lipi_tokenizer *tok = NULL;
        lipi_encoder *enc = NULL;
        lipi_session *s = NULL;
        lipi_error err = {0};
        lipi_set_alloc_hooks(&track_hooks);
        assert_int_equal(lipi_tokenizer_open(toks[t], NULL, &tok, &err), LIPI_OK);
        assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        stream_got g = {0};
        big_alloc = 0;
        assert_int_equal(lipi_encode_stream(s, text, len, NULL, collect_ids, &g, NULL, &err),
                         LIPI_OK);
        assert_true(g.n > 200000);
        assert_true(big_alloc < ((size_t)4 << 20));
        lipi_session_free(s);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        lipi_encoding out = {0};
        big_alloc = 0;
        assert_int_equal(lipi_encode(s, text, len, NULL, &out, &err), LIPI_OK);
        assert_int_equal(out.len, g.n);
        assert_true(big_alloc > ((size_t)8 << 20));
        lipi_session_free(s);
        lipi_encoder_free(enc);
        lipi_tokenizer_free(tok);
        lipi_set_alloc_hooks(NULL);
        free(g.ids);
    }
    free(text);
}

/* `unit` repeated to `size` bytes, streamed with tokenizer `path`: the
 * ids of lipi_encode (no special tokens added), more than 300,000 of them,
 * and no block asked for of `per_id` bytes an id or more (per_id 0) of
 * `block` bytes or more. */
static void check_stream_bounded(const char *path, const char *unit, size_t size, size_t per_id,
                                 size_t block)
{
    size_t len, n_ids;
    char *text = repeat_text(unit, size, &len);
    uint32_t *want = ids_of_opt(path, text, len, true, &n_ids);
    assert_true(n_ids > 300000);
    stream_got g = {0};
    assert_true(tracked_stream(path, text, len, &g) < (per_id ? per_id * n_ids : block));
    assert_int_equal(g.n, n_ids);
    assert_memory_equal(g.ids, want, n_ids * sizeof *want);
    free(g.ids);
    free(want);
    free(text);
}

/* A streamed long word of tiktoken or byte-level BPE goes through
 * backtracking, which keeps 4 bytes a token (ranks) and hands the tokens
 * to the sink in slices: 1.2 MB of 'क' is 400,000 (cl100k) or 800,000
 * tokens (GPT-2), and no block of 10 bytes a token is asked for (the 12
 * bytes of piece tokens before). */
static void test_stream_backtracking_holds_ranks_only(void **state)
{
    (void)state;
    check_stream_bounded("cl100k_base", "क", LONG_TEXT, 10, 0);
    check_stream_bounded(GPT2, "क", LONG_TEXT, 10, 0);
}

/* A streamed long text under a pre-tokenizer that always cuts after
 * whitespace or punctuation (BERT's) is normalized and pre-tokenized a
 * part of ~1 MiB at a time: 3 MB of words with punctuation (a combining
 * mark right after it, which NFD and strip_accents see across the cut; a
 * CJK ideograph the normalizer pads; an accent lowercased) gives
 * lipi_encode's ids, and no block of 24 MB is asked for (the whole text's
 * list of pieces, ~48 bytes each, is one of 36 MB and more). */
static void test_stream_cuts_bert_text_in_parts(void **state)
{
    (void)state;
    static const char *const toks[] = {"tests/fixtures/shared/vocab/bert-base-uncased/vocab.txt",
                                       "tests/fixtures/shared/vocab/bert-base-cased/vocab.txt"};
    static const char *const units[] = {
        "नमस्ते।दुनिया,Hello!\xcc\x81World\xe4\xb8\xad\xc3\x89t\xc3\xa9",
        "hello world. \xe3\x80\x80x"};
    for (size_t t = 0; t < sizeof toks / sizeof *toks; t++)
        for (size_t u = 0; u < sizeof units / sizeof *units; u++)
            check_stream_bounded(toks[t], units[u], 3000000, 0, (size_t)24 << 20);
}

/* `lipi encode` streams records of 1 MiB and more (ids, count): its lines
 * equal the library's ids, between short records on both sides, on 1 and
 * 2 threads, with --total counting them; --offsets takes the batch path
 * and gives the same ids. */
static void test_encode_long_records_match_the_library(void **state)
{
    (void)state;
    size_t wlen, len = 0;
    char *word = repeat_text("नमस्तेदुनियाHelloWorld42", LONG_TEXT, &wlen);
    char *in = malloc(wlen + 64);
    assert_non_null(in);
    len += (size_t)sprintf(in, "short one\n");
    memcpy(in + len, word, wlen);
    len += wlen;
    len += (size_t)sprintf(in + len, "\nlast line\n");

    size_t n_ids, n = 0;
    uint32_t *ids = ids_of(GPT2, word, wlen, &n_ids);
    size_t cap = 12 * n_ids + 64;
    char *want = malloc(cap);
    for (size_t k = 0; k < n_ids; k++)
        n += (size_t)snprintf(want + n, cap - n, k ? " %u" : "%u", ids[k]);

    char path[64];
    snprintf(path, sizeof path, "/tmp/lipi-test-long-%ld.txt", (long)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(in, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    for (int threads = 1; threads <= 2; threads++) {
        cli_result r = cli_runf("encode -t " GPT2 " --threads %d --total %s", threads, path);
        assert_int_equal(r.code, 0);
        const char *l2 = strchr(r.out, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
        assert_int_equal((size_t)(l3 - 1 - l2), n);
        assert_memory_equal(l2, want, n);
        assert_string_equal(l3, "12957 1627\n");
        assert_memory_equal(r.out, "19509 530\n", 10);
        assert_non_null(strstr(r.err, " 3 records, "));
        cli_result_free(&r);
    }
    cli_result r = cli_runf("encode -t " GPT2 " --format count %s", path);
    assert_int_equal(r.code, 0);
    char counts[64];
    snprintf(counts, sizeof counts, "2\n%zu\n2\n", n_ids);
    assert_string_equal(r.out, counts);
    cli_result_free(&r);
    /* --offsets holds the record: the same ids before the tab. */
    r = cli_runf("encode -t " GPT2 " --offsets %s", path);
    assert_int_equal(r.code, 0);
    const char *l2 = strchr(r.out, '\n') + 1;
    assert_memory_equal(l2, want, n);
    assert_int_equal(l2[n], '\t');
    cli_result_free(&r);
    unlink(path);
    free(want);
    free(ids);
    free(in);
    free(word);
}

/* Unigram words over 64 KiB are encoded a window at a time (models.c):
 * the ids equal SentencePiece's own on 1.2 MB words of mixed letters, one
 * letter, unknown characters fused into runs across windows, and a run of
 * unknown characters longer than a window (make_long_spm.py). */
static void test_long_unigram_words_match_sentencepiece(void **state)
{
    (void)state;
    json_t *rows = load_rows(FIXTURES "long_spm.jsonl.gz");
    size_t i;
    json_t *row;
    assert_true(json_array_size(rows) >= 10);
    json_array_foreach(rows, i, row) {
        const char *path = json_string_value(json_object_get(row, "tokenizer"));
        const char *unit = json_string_value(json_object_get(row, "unit"));
        size_t bytes = (size_t)json_integer_value(json_object_get(row, "bytes")), len;
        json_t *want = json_object_get(row, "ids");
        char *text = repeat_text(unit, bytes, &len);
        size_t n;
        uint32_t *ids = ids_of(path, text, len, &n);
        if (n != json_array_size(want))
            fail_msg("%s, \"%s\" x %zu bytes: %zu ids, SentencePiece %zu", path, unit, len, n,
                     json_array_size(want));
        for (size_t k = 0; k < n; k++)
            if (ids[k] != (uint32_t)json_integer_value(json_array_get(want, k)))
                fail_msg("%s, \"%s\": id %zu is %u, SentencePiece %lld", path, unit, k, ids[k],
                         (long long)json_integer_value(json_array_get(want, k)));
        free(ids);
        free(text);
    }
    json_decref(rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_reader_splits_each_kind),
        cmocka_unit_test(test_record_reader_jsonl_keeps_the_other_members_as_written),
        cmocka_unit_test(test_record_reader_jsonl_errors_name_record_and_column),
        cmocka_unit_test(test_record_reader_survives_every_allocation_failure),
        cmocka_unit_test(test_encode_input_kinds),
        cmocka_unit_test(test_encode_count_and_total),
        cmocka_unit_test(test_special_policy_in_encode_and_batch),
        cmocka_unit_test(test_encode_special_policies),
        cmocka_unit_test(test_encode_pieces_show_each_tokens_text),
        cmocka_unit_test(test_token_bytes_maps_the_byte_alphabet_back),
        cmocka_unit_test(test_decode_input_kinds),
        cmocka_unit_test(test_inflation_input_kinds),
        cmocka_unit_test(test_tiktoken_public_cases),
        cmocka_unit_test(test_stream_gives_the_ids_of_lipi_encode),
        cmocka_unit_test(test_stream_holds_no_block_per_token),
        cmocka_unit_test(test_stream_of_one_long_bpe_piece_holds_a_part),
        cmocka_unit_test(test_stream_backtracking_holds_ranks_only),
        cmocka_unit_test(test_stream_cuts_bert_text_in_parts),
        cmocka_unit_test(test_encode_long_records_match_the_library),
        cmocka_unit_test(test_long_unigram_words_match_sentencepiece),
        cmocka_unit_test(test_multiline_records_match_tiktoken_and_hugging_face),
        cmocka_unit_test(test_multiline_records_match_sentencepiece),
        cmocka_unit_test(test_encode_jsonl_and_ids_match_the_batch),
        cmocka_unit_test(test_token_fixed_string_is_the_batchs_string),
        cmocka_unit_test(test_utf8_checked_gives_the_same_tokens),
    };
    return cmocka_run_group_tests_name("encode_inputs", tests, NULL, NULL);
}

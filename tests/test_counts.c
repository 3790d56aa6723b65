/* Tests of the word-count table and the word<TAB>count file format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/alloc_fail.h"
#include "trainer/trainer.h"

static char tmpdir[64];

static int make_tmpdir(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lipi_test_counts_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

static void assert_same_bytes(const char *p1, const char *p2)
{
    size_t l1, l2;
    char *d1 = read_file(p1, &l1), *d2 = read_file(p2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(d1, d2, l1);
    free(d1);
    free(d2);
}

static void add(lipi_counts *c, const char *w, uint64_t n)
{
    assert_int_equal(lipi_counts_add(c, w, strlen(w), n, NULL), LIPI_OK);
}

/* "word:count word:count ..." in sorted order, for whole-table asserts. */
static char *sorted_string(const lipi_counts *c)
{
    lipi_count_entry *e;
    size_t n;
    assert_int_equal(lipi_counts_sorted(c, &e, &n), LIPI_OK);
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < n; i++)
        cap += e[i].len + 24;
    char *s = malloc(cap);
    assert_non_null(s);
    s[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%.*s:%llu", i ? " " : "", (int)e[i].len,
                                e[i].word, (unsigned long long)e[i].count);
    lipi_free(e);
    return s;
}

static void test_counts_add_and_get(void **state)
{
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    add(c, "नमस्ते", 2);
    add(c, " the", 1);
    add(c, "नमस्ते", 5);
    assert_int_equal(lipi_counts_size(c), 2);
    assert_int_equal(lipi_counts_total(c), 8);
    assert_int_equal(lipi_counts_get(c, "नमस्ते", strlen("नमस्ते")), 7);
    assert_int_equal(lipi_counts_get(c, " the", 4), 1);
    assert_int_equal(lipi_counts_get(c, "the", 3), 0);
    lipi_counts_free(c);
}

static void test_counts_reject_empty_word_zero_count_and_overflow(void **state)
{
    lipi_counts *c;
    lipi_error err;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    assert_int_equal(lipi_counts_add(c, "", 0, 1, &err), LIPI_EINVAL);
    assert_int_equal(lipi_counts_add(c, "a", 1, 0, &err), LIPI_EINVAL);
    add(c, "a", UINT64_MAX - 1);
    assert_int_equal(lipi_counts_add(c, "a", 1, 2, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "overflows"));
    assert_true(lipi_counts_get(c, "a", 1) == UINT64_MAX - 1);
    add(c, "a", 1);
    assert_true(lipi_counts_get(c, "a", 1) == UINT64_MAX);
    lipi_counts_free(c);
}

static void test_counts_sorted_by_count_then_bytes(void **state)
{
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    add(c, "b", 3);
    add(c, "ab", 1);
    add(c, "a", 1);
    add(c, "c", 3);
    add(c, "क", 3);
    add(c, "B", 1);
    char *s = sorted_string(c);
    assert_string_equal(s, "b:3 c:3 क:3 B:1 a:1 ab:1");
    free(s);
    lipi_counts_free(c);
}

static void test_counts_many_words_survive_growth(void **state)
{
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    char w[32];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 100000; i++) {
            int n = snprintf(w, sizeof w, "w%d", i);
            assert_int_equal(lipi_counts_add(c, w, (size_t)n, (uint64_t)i + 1, NULL), LIPI_OK);
        }
    assert_int_equal(lipi_counts_size(c), 100000);
    for (int i = 0; i < 100000; i += 997) {
        int n = snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(lipi_counts_get(c, w, (size_t)n), 2 * ((uint64_t)i + 1));
    }
    /* A word bigger than an arena block still goes in. */
    size_t big = 3 << 20;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, 'x', big);
    assert_int_equal(lipi_counts_add(c, huge, big, 1, NULL), LIPI_OK);
    add(c, "after-huge", 1);
    assert_int_equal(lipi_counts_get(c, huge, big), 1);
    assert_int_equal(lipi_counts_get(c, "after-huge", 10), 1);
    free(huge);
    lipi_counts_free(c);
}

static void test_counts_reserve_keeps_the_words_and_takes_more(void **state)
{
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    assert_int_equal(lipi_counts_reserve(c, 10), LIPI_OK); /* an empty table */
    add(c, "नमस्ते", 3);
    add(c, "a", 1);
    assert_int_equal(lipi_counts_reserve(c, 50000), LIPI_OK); /* rehashes both */
    assert_int_equal(lipi_counts_reserve(c, 5), LIPI_OK);     /* never shrinks */
    char w[32];
    for (int i = 0; i < 50000; i++) {
        int n = snprintf(w, sizeof w, "r%d", i);
        assert_int_equal(lipi_counts_add(c, w, (size_t)n, 2, NULL), LIPI_OK);
    }
    assert_int_equal(lipi_counts_size(c), 50002);
    assert_int_equal(lipi_counts_get(c, "नमस्ते", strlen("नमस्ते")), 3);
    assert_int_equal(lipi_counts_get(c, "a", 1), 1);
    assert_int_equal(lipi_counts_get(c, "r49999", 6), 2);
    assert_int_equal(lipi_counts_total(c), 4 + 2 * 50000);
    assert_int_equal(lipi_counts_reserve(c, SIZE_MAX / 4), LIPI_ENOMEM);
    assert_int_equal(lipi_counts_get(c, "a", 1), 1); /* unchanged */
    lipi_counts_free(c);
}

static void test_counts_merge_equals_counting_the_concatenation(void **state)
{
    const char *a[] = {"x", "y", "x", "नमस्ते", " z"};
    const char *b[] = {"y", "नमस्ते", "w", "x"};
    lipi_counts *ca, *cb, *all;
    assert_int_equal(lipi_counts_new(&ca), LIPI_OK);
    assert_int_equal(lipi_counts_new(&cb), LIPI_OK);
    assert_int_equal(lipi_counts_new(&all), LIPI_OK);
    for (size_t i = 0; i < 5; i++) {
        add(ca, a[i], 1);
        add(all, a[i], 1);
    }
    for (size_t i = 0; i < 4; i++) {
        add(cb, b[i], 1);
        add(all, b[i], 1);
    }
    assert_int_equal(lipi_counts_merge(ca, cb, NULL), LIPI_OK);
    char *s1 = sorted_string(ca), *s2 = sorted_string(all);
    assert_string_equal(s1, s2);
    assert_string_equal(s1, "x:3 y:2 नमस्ते:2  z:1 w:1");
    free(s1);
    free(s2);
    lipi_counts_free(ca);
    lipi_counts_free(cb);
    lipi_counts_free(all);
}

static void test_counts_tsv_is_sorted_and_escaped(void **state)
{
    char path[128];
    tmp_path(path, sizeof path, "esc.tsv");
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    add(c, " की", 4);
    add(c, "a\tb", 2);
    add(c, "line\nbreak", 2);
    add(c, "back\\slash", 2);
    add(c, "cr\r", 1);
    assert_int_equal(lipi_counts_save(c, path, NULL), LIPI_OK);
    size_t len;
    char *data = read_file(path, &len);
    assert_string_equal(data, " की\t4\n"
                              "a\\tb\t2\n"
                              "back\\\\slash\t2\n"
                              "line\\nbreak\t2\n"
                              "cr\r\t1\n");
    free(data);

    lipi_counts *back;
    assert_int_equal(lipi_counts_new(&back), LIPI_OK);
    assert_int_equal(lipi_counts_load(path, back, NULL), LIPI_OK);
    char *s1 = sorted_string(c), *s2 = sorted_string(back);
    assert_string_equal(s1, s2);
    free(s1);
    free(s2);
    lipi_counts_free(back);
    lipi_counts_free(c);
}

static void test_counts_load_accepts_bom_crlf_and_literal_backslashes(void **state)
{
    char path[128];
    tmp_path(path, sizeof path, "bom.tsv");
    const char data[] = "\xEF\xBB\xBFhello\t3\r\nC:\\x\\\t2\r\nhello\t1";
    write_file(path, data, sizeof data - 1);
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    assert_int_equal(lipi_counts_load(path, c, NULL), LIPI_OK);
    char *s = sorted_string(c);
    assert_string_equal(s, "hello:4 C:\\x\\:2");
    free(s);
    lipi_counts_free(c);
}

static void test_counts_load_of_empty_file_adds_nothing(void **state)
{
    char path[128];
    tmp_path(path, sizeof path, "empty.tsv");
    write_file(path, "", 0);
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    assert_int_equal(lipi_counts_load(path, c, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_size(c), 0);
    lipi_counts_free(c);
}

typedef struct {
    const char *data;
    size_t line, offset;
    const char *msg_part;
} bad_case;

static void test_counts_load_rejects_bad_lines_with_line_and_offset(void **state)
{
    const bad_case cases[] = {
        {"ok\t1\nno tab here\n", 2, 5 + 11, "no TAB"},
        {"ok\t1\n\nok\t2\n", 2, 5, "empty line"},
        {"\t5\n", 1, 0, "expected a word"},
        {"word\t\n", 1, 5, "end of the line"},
        {"word\t12x\n", 1, 7, "found 'x'"},
        {"word\t-3\n", 1, 5, "found '-'"},
        {"word\t 3\n", 1, 5, "found ' '"},
        {"word\t3\textra\n", 1, 6, "byte 0x09"},
        {"word\t0\n", 1, 5, "count >= 1"},
        {"word\t18446744073709551616\n", 1, 5, "below 2^64"},
        {"a\t1\nb\t2\nab\xC3(\t4\n", 3, 8 + 2, "byte 0xC3"},
        {"big\t18446744073709551615\nbig\t1\n", 2, 25 + 4, "overflows"},
        {"\xEF\xBB\xBFok\t1\r\nx\ty\r\n", 2, 9 + 2, "found 'y'"},
    };
    char path[128];
    tmp_path(path, sizeof path, "bad.tsv");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].data, strlen(cases[i].data));
        lipi_counts *c;
        lipi_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(lipi_counts_new(&c), LIPI_OK);
        lipi_status st = lipi_counts_load(path, c, &err);
        if (st != LIPI_EFORMAT || err.line != cases[i].line || err.offset != cases[i].offset ||
            !strstr(err.msg, cases[i].msg_part) || strcmp(err.path, path) != 0)
            fail_msg("case %zu: status %s line %zu offset %zu msg '%s'", i, lipi_status_name(st),
                     err.line, err.offset, err.msg);
        lipi_counts_free(c);
    }
}

static void test_counts_load_of_missing_file_is_eio(void **state)
{
    lipi_counts *c;
    lipi_error err;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    assert_int_equal(lipi_counts_load("/nonexistent/dir/counts.tsv", c, &err), LIPI_EIO);
    assert_string_equal(err.path, "/nonexistent/dir/counts.tsv");
    lipi_counts_free(c);
}

static void test_counts_save_to_unwritable_folder_is_eio(void **state)
{
    lipi_counts *c;
    lipi_error err;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    add(c, "a", 1);
    assert_int_equal(lipi_counts_save(c, "/nonexistent/dir/counts.tsv", &err), LIPI_EIO);
    lipi_counts_free(c);
}

static void test_counts_merge_files_adds_counts(void **state)
{
    char p1[128], p2[128], out[128];
    tmp_path(p1, sizeof p1, "m1.tsv");
    tmp_path(p2, sizeof p2, "m2.tsv");
    tmp_path(out, sizeof out, "merged.tsv");
    write_file(p1, "the\t5\nक\t2\n", strlen("the\t5\nक\t2\n"));
    write_file(p2, "क\t4\nzeta\t1\nthe\t1\n", strlen("क\t4\nzeta\t1\nthe\t1\n"));
    const char *paths[] = {p1, p2};
    assert_int_equal(lipi_counts_merge_files(paths, 2, out, NULL), LIPI_OK);
    size_t len;
    char *data = read_file(out, &len);
    assert_string_equal(data, "the\t6\nक\t6\nzeta\t1\n");
    free(data);
    /* No temporary file is left next to the output. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    assert_int_not_equal(system(cmd), 0);
}

/* ---- runs (the binary counts of lipi.dask's intermediate files) -------- */

static lipi_counts *run_table(void)
{
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    char w[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(lipi_counts_add(c, w, (size_t)n, (uint64_t)i % 7 + 1, NULL), LIPI_OK);
    }
    add(c, "tab\there", 3);
    add(c, "back\\slash\nnl", 2);
    add(c, "नमस्ते", 300);
    add(c, "big", UINT64_MAX);
    /* A word longer than the reader's buffer. */
    size_t big = 200000;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, 'y', big);
    assert_int_equal(lipi_counts_add(c, huge, big, 9, NULL), LIPI_OK);
    free(huge);
    return c;
}

static void test_counts_run_round_trip_is_canonical(void **state)
{
    char p1[128], p2[128];
    tmp_path(p1, sizeof p1, "a.run");
    tmp_path(p2, sizeof p2, "b.run");
    lipi_counts *c = run_table(), *back, *again;
    assert_int_equal(lipi_counts_save_run(c, p1, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_new(&back), LIPI_OK);
    assert_int_equal(lipi_counts_load_run(p1, back, NULL), LIPI_OK);
    char *want = sorted_string(c), *got = sorted_string(back);
    assert_string_equal(got, want);
    assert_int_equal(lipi_counts_total(back), lipi_counts_total(c));
    /* The same counts inserted in another order write the same bytes. */
    assert_int_equal(lipi_counts_new(&again), LIPI_OK);
    assert_int_equal(lipi_counts_merge(again, back, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_save_run(again, p2, NULL), LIPI_OK);
    assert_same_bytes(p1, p2);
    free(want);
    free(got);
    lipi_counts_free(c);
    lipi_counts_free(back);
    lipi_counts_free(again);
}

static void test_counts_merge_runs_writes_what_merge_files_writes(void **state)
{
    char r1[128], r2[128], t1[128], t2[128], out_tsv[128], out_run[128], want_tsv[128];
    tmp_path(r1, sizeof r1, "1.run");
    tmp_path(r2, sizeof r2, "2.run");
    tmp_path(t1, sizeof t1, "1.tsv");
    tmp_path(t2, sizeof t2, "2.tsv");
    tmp_path(out_tsv, sizeof out_tsv, "sum.tsv");
    tmp_path(out_run, sizeof out_run, "sum.run");
    tmp_path(want_tsv, sizeof want_tsv, "want.tsv");
    lipi_counts *a = run_table(), *b;
    assert_int_equal(lipi_counts_new(&b), LIPI_OK);
    add(b, "w1", 10);
    add(b, "only-b", 4);
    add(b, "tab\there", 1);
    assert_int_equal(lipi_counts_save_run(a, r1, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_save_run(b, r2, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_save(a, t1, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_save(b, t2, NULL), LIPI_OK);
    const char *runs[] = {r1, r2}, *tsvs[] = {t1, t2};
    assert_int_equal(lipi_counts_merge_files(tsvs, 2, want_tsv, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_merge_runs(runs, 2, out_tsv, true, NULL), LIPI_OK);
    assert_same_bytes(want_tsv, out_tsv);
    /* As a run: the same sum. */
    assert_int_equal(lipi_counts_merge_runs(runs, 2, out_run, false, NULL), LIPI_OK);
    lipi_counts *sum, *want;
    assert_int_equal(lipi_counts_new(&sum), LIPI_OK);
    assert_int_equal(lipi_counts_new(&want), LIPI_OK);
    assert_int_equal(lipi_counts_load_run(out_run, sum, NULL), LIPI_OK);
    assert_int_equal(lipi_counts_load(want_tsv, want, NULL), LIPI_OK);
    char *s1 = sorted_string(sum), *s2 = sorted_string(want);
    assert_string_equal(s1, s2);
    assert_int_equal(lipi_counts_get(sum, "w1", 2), 2 + 10);
    free(s1);
    free(s2);
    /* A sum past 2^64 is an error naming the second run. */
    lipi_counts_free(b);
    assert_int_equal(lipi_counts_new(&b), LIPI_OK);
    add(b, "big", 1);
    assert_int_equal(lipi_counts_save_run(b, r2, NULL), LIPI_OK);
    lipi_error err;
    assert_int_equal(lipi_counts_merge_runs(runs, 2, out_tsv, true, &err), LIPI_EFORMAT);
    assert_string_equal(err.path, r2);
    assert_non_null(strstr(err.msg, "overflows"));
    lipi_counts_free(a);
    lipi_counts_free(b);
    lipi_counts_free(sum);
    lipi_counts_free(want);
}

/* The run of {"a": 1, "b": 2}: magic, then two entries in hash order. */
static size_t small_run(char *buf, size_t *second)
{
    char p[128];
    tmp_path(p, sizeof p, "small.run");
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    add(c, "a", 1);
    add(c, "b", 2);
    assert_int_equal(lipi_counts_save_run(c, p, NULL), LIPI_OK);
    lipi_counts_free(c);
    size_t len;
    char *d = read_file(p, &len);
    assert_int_equal(len, 8 + 3 + 3 + 1 + 16);
    memcpy(buf, d, len);
    free(d);
    *second = 11;
    return len;
}

static lipi_status load_bytes(const char *data, size_t len, lipi_error *err)
{
    char p[128];
    tmp_path(p, sizeof p, "bad.run");
    write_file(p, data, len);
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    memset(err, 0, sizeof *err);
    lipi_status st = lipi_counts_load_run(p, c, err);
    lipi_counts_free(c);
    return st;
}

static void expect_bad(const char *data, size_t len, size_t offset, const char *msg_part)
{
    lipi_error err;
    lipi_status st = load_bytes(data, len, &err);
    if (st != LIPI_EFORMAT || err.offset != offset || !strstr(err.msg, msg_part))
        fail_msg("status %s offset %zu msg '%s' (wanted offset %zu, '%s')", lipi_status_name(st),
                 err.offset, err.msg, offset, msg_part);
}

static void test_counts_load_run_rejects_damage_with_its_offset(void **state)
{
    char good[64], bad[64];
    size_t second, len = small_run(good, &second);
    lipi_error err;
    assert_int_equal(load_bytes(good, len, &err), LIPI_OK);
    /* Every truncation fails: nothing short of the whole file loads. */
    for (size_t k = 0; k < len; k++)
        if (load_bytes(good, k, &err) != LIPI_EFORMAT)
            fail_msg("a run cut to %zu bytes of %zu loaded", k, len);
    expect_bad("LIPIRUN\x02", 8, 0, "lipi counts run");
    expect_bad("a\t1\n", 4, 0, "shorter file");
    memcpy(bad, good, len);
    bad[10] = 0; /* the first count */
    expect_bad(bad, len, 10, "count >= 1");
    memcpy(bad, good, len);
    bad[9] = (char)0xFF; /* the first word: not UTF-8 */
    expect_bad(bad, len, 9, "byte 0xFF");
    memcpy(bad, good, len); /* the entries swapped */
    memcpy(bad + 8, good + second, 3);
    memcpy(bad + second, good + 8, 3);
    expect_bad(bad, len, second, "out of order");
    memcpy(bad, good, len); /* the first entry twice */
    memcpy(bad + second, good + 8, 3);
    expect_bad(bad, len, second, "once");
    memcpy(bad, good, len);
    bad[len - 16] = 3; /* the number of words */
    expect_bad(bad, len, len - 16, "words");
    memcpy(bad, good, len);
    bad[len - 1] ^= 1; /* the checksum */
    expect_bad(bad, len, len - 16, "checksum");
    memcpy(bad, good, len);
    bad[second + 2] = 3; /* the second count, changed: caught by the checksum */
    expect_bad(bad, len, len - 16, "checksum");
    memcpy(bad, good, len);
    bad[len] = 0;
    expect_bad(bad, len + 1, len, "after the trailer");
    memcpy(bad, good, len);
    bad[8] = 100; /* a length past the end */
    expect_bad(bad, len, 8, "past the end");
    /* Overlong and too long varints as the first length. */
    memcpy(bad, good, 8);
    memcpy(bad + 8, "\x81\x00", 2);
    expect_bad(bad, 10, 8, "overlong");
    memcpy(bad + 8, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
    expect_bad(bad, 18, 8, "below 2^64");
    assert_int_equal(load_bytes(good, len, &err), LIPI_OK);
    char p[128];
    tmp_path(p, sizeof p, "absent.run");
    lipi_counts *c;
    assert_int_equal(lipi_counts_new(&c), LIPI_OK);
    assert_int_equal(lipi_counts_load_run(p, c, &err), LIPI_EIO);
    lipi_counts_free(c);
}

/* ---- allocation failures ---------------------------------------------- */

typedef struct {
    const char *path;
    bool run; /* a counts run, else a TSV */
    size_t words;
} load_case;

static lipi_status load_counts(void *ctx, lipi_error *err)
{
    const load_case *lc = ctx;
    lipi_counts *c = NULL;
    lipi_status st = lipi_counts_new(&c);
    if (st != LIPI_OK)
        return lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    st = lc->run ? lipi_counts_load_run(lc->path, c, err) : lipi_counts_load(lc->path, c, err);
    if (st == LIPI_OK)
        assert_int_equal(lipi_counts_size(c), lc->words);
    lipi_counts_free(c);
    return st;
}

static void test_counts_load_fails_cleanly_on_every_allocation(void **state)
{
    char path[128];
    tmp_path(path, sizeof path, "oom.tsv");
    /* Enough words to grow the table and a line longer than the read buffer. */
    size_t cap = 1 << 20, len = 0;
    char *data = malloc(cap);
    assert_non_null(data);
    for (int i = 0; i < 3000; i++)
        len += (size_t)snprintf(data + len, cap - len, "w%d\t%d\n", i, i + 1);
    memset(data + len, 'y', 100000);
    len += 100000;
    len += (size_t)snprintf(data + len, cap - len, "\t7\n");
    write_file(path, data, len);
    free(data);

    load_case lc = {path, false, 3001};
    assert_true(alloc_fail_loop("counts load", load_counts, &lc) > 5);
}

static void test_counts_load_run_fails_cleanly_on_every_allocation(void **state)
{
    char path[128];
    tmp_path(path, sizeof path, "oom.run");
    lipi_counts *c = run_table();
    assert_int_equal(lipi_counts_save_run(c, path, NULL), LIPI_OK);
    lipi_counts_free(c);
    load_case lc = {path, true, 5005};
    assert_true(alloc_fail_loop("counts run load", load_counts, &lc) > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_add_and_get),
        cmocka_unit_test(test_counts_reject_empty_word_zero_count_and_overflow),
        cmocka_unit_test(test_counts_sorted_by_count_then_bytes),
        cmocka_unit_test(test_counts_many_words_survive_growth),
        cmocka_unit_test(test_counts_reserve_keeps_the_words_and_takes_more),
        cmocka_unit_test(test_counts_merge_equals_counting_the_concatenation),
        cmocka_unit_test(test_counts_tsv_is_sorted_and_escaped),
        cmocka_unit_test(test_counts_load_accepts_bom_crlf_and_literal_backslashes),
        cmocka_unit_test(test_counts_load_of_empty_file_adds_nothing),
        cmocka_unit_test(test_counts_load_rejects_bad_lines_with_line_and_offset),
        cmocka_unit_test(test_counts_load_of_missing_file_is_eio),
        cmocka_unit_test(test_counts_save_to_unwritable_folder_is_eio),
        cmocka_unit_test(test_counts_merge_files_adds_counts),
        cmocka_unit_test(test_counts_load_fails_cleanly_on_every_allocation),
        cmocka_unit_test(test_counts_run_round_trip_is_canonical),
        cmocka_unit_test(test_counts_merge_runs_writes_what_merge_files_writes),
        cmocka_unit_test(test_counts_load_run_rejects_damage_with_its_offset),
        cmocka_unit_test(test_counts_load_run_fails_cleanly_on_every_allocation),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}

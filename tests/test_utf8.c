/* UTF-8 decoding, validation and repair, and the line reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "tests/alloc_fail.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/pretokenize_impl.h"

#define S(lit) (lit), (sizeof(lit) - 1)

/* lipi_utf8_valid_prefix checks long texts 16 bytes at a time (SSSE3 where
 * the CPU has it; from 64 bytes on 32 at a time, AVX2) and finds the offset
 * of an error byte by byte: the same answer as the byte-by-byte checker for
 * every lead byte with second bytes at every range edge and third/fourth
 * bytes in and out of range, placed across the 16- and 32-byte block edges
 * and cut short at every length. */
static void test_block_validation_agrees_with_bytewise(void **state)
{
    (void)state;
    static const unsigned char second[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F,
                                           0xA0, 0xBF, 0xC0, 0xC2, 0xE0, 0xF0, 0xFF};
    static const unsigned char more[] = {0x41, 0x80, 0xBF, 0xC0, 0xE1};
    char buf[72];
    size_t checked = 0, invalid = 0;
    for (unsigned a = 0; a < 256; a++)
        for (size_t i = 0; i < sizeof second; i++)
            for (size_t j = 0; j < sizeof more; j++)
                for (size_t k = 0; k < sizeof more; k++) {
                    static const size_t at[] = {0,  12, 13, 14, 15, 16, 30, 31,
                                                29, 32, 33, 60, 61, 62, 63, 64};
                    for (size_t p = 0; p < sizeof at / sizeof *at; p++) {
                        memset(buf, 'x', sizeof buf);
                        unsigned char seq[4] = {(unsigned char)a, second[i], more[j], more[k]};
                        memcpy(buf + at[p], seq, 4);
                        /* 32..36: 16 at a time; 64..68: 32 at a time. */
                        static const size_t lens[] = {32, 33, 34, 35, 36, 64, 65, 66, 67, 68};
                        for (size_t q = 0; q < sizeof lens / sizeof *lens; q++) {
                            size_t len = lens[q];
                            if (at[p] >= len)
                                continue;
                            size_t want = pt_utf8_valid_prefix(buf, len);
                            assert_int_equal(lipi_utf8_valid_prefix(buf, len), want);
                            invalid += want < len;
                            checked++;
                        }
                    }
                }
    /* Both kinds were seen, many times (valid: ASCII, and the sequences
     * whose bytes all fit). */
    assert_true(invalid > checked / 4);
    assert_true(checked - invalid > 5000);
}

static void test_decode_accepts_every_sequence_length(void **state)
{
    (void)state;
    uint32_t cp = 0;
    assert_int_equal(lipi_utf8_decode(S("A"), &cp), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(lipi_utf8_decode(S("\xC3\xA9"), &cp), 2);
    assert_int_equal(cp, 0xE9);
    assert_int_equal(lipi_utf8_decode(S("\xE0\xA4\x95"), &cp), 3); /* क */
    assert_int_equal(cp, 0x0915);
    assert_int_equal(lipi_utf8_decode(S("\xF0\x9F\x98\x80"), &cp), 4);
    assert_int_equal(cp, 0x1F600);
    assert_int_equal(lipi_utf8_decode(S("\xF4\x8F\xBF\xBF"), &cp), 4);
    assert_int_equal(cp, 0x10FFFF);
    assert_int_equal(lipi_utf8_decode(S("\0"), &cp), 1);
    assert_int_equal(cp, 0);
}

static void test_decode_rejects_overlong_surrogate_too_big_truncated(void **state)
{
    (void)state;
    uint32_t cp;
    assert_int_equal(lipi_utf8_decode(S("\xC0\x80"), &cp), 0);         /* overlong NUL */
    assert_int_equal(lipi_utf8_decode(S("\xC1\xBF"), &cp), 0);         /* overlong */
    assert_int_equal(lipi_utf8_decode(S("\xE0\x80\x80"), &cp), 0);     /* overlong */
    assert_int_equal(lipi_utf8_decode(S("\xE0\x9F\xBF"), &cp), 0);     /* overlong */
    assert_int_equal(lipi_utf8_decode(S("\xF0\x8F\xBF\xBF"), &cp), 0); /* overlong */
    assert_int_equal(lipi_utf8_decode(S("\xED\xA0\x80"), &cp), 0);     /* U+D800 */
    assert_int_equal(lipi_utf8_decode(S("\xED\xBF\xBF"), &cp), 0);     /* U+DFFF */
    assert_int_equal(lipi_utf8_decode(S("\xF4\x90\x80\x80"), &cp), 0); /* U+110000 */
    assert_int_equal(lipi_utf8_decode(S("\xF5\x80\x80\x80"), &cp), 0);
    assert_int_equal(lipi_utf8_decode(S("\xFF"), &cp), 0);
    assert_int_equal(lipi_utf8_decode(S("\x80"), &cp), 0);             /* lone continuation */
    assert_int_equal(lipi_utf8_decode(S("\xE0\xA4"), &cp), 0);         /* truncated */
    assert_int_equal(lipi_utf8_decode(S("\xF0\x9F\x98"), &cp), 0);     /* truncated */
    assert_int_equal(lipi_utf8_decode(S("\xE0\xA4" "A"), &cp), 0);     /* interrupted */
    assert_int_equal(lipi_utf8_decode("", 0, &cp), 0);
}

/* Reference validity: a byte string is one well-formed sequence iff it is the
 * encoding of a scalar value. */
static bool ref_valid(const unsigned char *b, size_t n)
{
    uint32_t cp;
    if (n == 1)
        return b[0] < 0x80;
    if (n == 2)
        cp = ((uint32_t)(b[0] & 0x1F) << 6) | (b[1] & 0x3F);
    else if (n == 3)
        cp = ((uint32_t)(b[0] & 0x0F) << 12) | ((uint32_t)(b[1] & 0x3F) << 6) | (b[2] & 0x3F);
    else
        cp = ((uint32_t)(b[0] & 0x07) << 18) | ((uint32_t)(b[1] & 0x3F) << 12) |
             ((uint32_t)(b[2] & 0x3F) << 6) | (b[3] & 0x3F);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return false;
    char enc[4];
    size_t k = lipi_utf8_encode(cp, enc);
    return k == n && memcmp(enc, b, n) == 0;
}

static void test_decode_agrees_with_reference_on_all_short_sequences(void **state)
{
    (void)state;
    unsigned char b[4];
    uint32_t cp;
    for (unsigned x = 0; x < 0x10000; x++) {
        b[0] = (unsigned char)(x >> 8);
        b[1] = (unsigned char)x;
        if (b[0] < 0xC0 || b[0] >= 0xE0)
            continue;
        assert_int_equal(lipi_utf8_decode((char *)b, 2, &cp) == 2, ref_valid(b, 2));
    }
    for (unsigned x = 0; x < 0x1000000; x++) {
        b[0] = (unsigned char)(x >> 16);
        b[1] = (unsigned char)(x >> 8);
        b[2] = (unsigned char)x;
        if (b[0] < 0xE0 || b[0] >= 0xF0)
            continue;
        bool got = lipi_utf8_decode((char *)b, 3, &cp) == 3;
        if (got != ref_valid(b, 3))
            fail_msg("3-byte %02x %02x %02x: got %d", b[0], b[1], b[2], got);
    }
    static const unsigned char tails[] = {0x00, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
    for (unsigned lead = 0xF0; lead <= 0xFF; lead++)
        for (unsigned b1 = 0; b1 < 256; b1++)
            for (size_t i = 0; i < sizeof tails; i++)
                for (size_t j = 0; j < sizeof tails; j++) {
                    b[0] = (unsigned char)lead, b[1] = (unsigned char)b1;
                    b[2] = tails[i], b[3] = tails[j];
                    bool got = lipi_utf8_decode((char *)b, 4, &cp) == 4;
                    assert_int_equal(got, ref_valid(b, 4));
                }
}

static void test_encode_then_decode_round_trips_every_scalar(void **state)
{
    (void)state;
    for (uint32_t c = 0; c <= 0x10FFFF; c++) {
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        char buf[4];
        uint32_t back = UINT32_MAX;
        size_t n = lipi_utf8_encode(c, buf);
        assert_int_equal(lipi_utf8_decode(buf, n, &back), n);
        assert_int_equal(back, c);
    }
}

static void test_valid_prefix_finds_first_bad_byte_after_long_ascii(void **state)
{
    (void)state;
    char buf[100];
    memset(buf, 'a', sizeof buf);
    assert_int_equal(lipi_utf8_valid_prefix(buf, sizeof buf), sizeof buf);
    for (size_t at = 0; at < 40; at++) {
        memset(buf, 'a', sizeof buf);
        memcpy(buf + 2, "\xE0\xA4\x95", 3);
        buf[at + 10] = (char)0xFF;
        assert_int_equal(lipi_utf8_valid_prefix(buf, sizeof buf), at + 10);
    }
    assert_int_equal(lipi_utf8_valid_prefix(S("ab\xE0\xA4")), 2); /* truncated at end */
    assert_int_equal(lipi_utf8_valid_prefix(S("\xED\xA0\x80")), 0);
    assert_int_equal(lipi_utf8_valid_prefix("", 0), 0);
}

static void expect_repair(const char *in, size_t n, const char *want)
{
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(lipi_utf8_repair(in, n, &out, &len), LIPI_OK);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);
    assert_int_equal(out[len], '\0');
    assert_int_equal(lipi_utf8_valid_prefix(out, len), len);
    lipi_free(out);
}

#define R "\xEF\xBF\xBD"

static void test_repair_replaces_each_maximal_subpart_once(void **state)
{
    (void)state;
    /* Unicode 15 table 3-8 (also the WHATWG decoder's output). */
    expect_repair(S("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
                  "a" R R R "b" R "c" R R "d");
    expect_repair(S("\xC0\xAF"), R R);
    expect_repair(S("\xED\xA0\x80"), R R R);
    expect_repair(S("\xF4\x90\x80\x80"), R R R R);
    expect_repair(S("\xE0\xA4"), R);
    expect_repair(S("\xF0\x9F\x98" "x"), R "x");
    expect_repair(S("ok \xE0\xA4\x95\xFF"), "ok \xE0\xA4\x95" R);
    expect_repair(S("plain"), "plain");
    expect_repair("", 0, "");
}

/* ======================================================================== */
/* Line reader                                                               */
/* ======================================================================== */

static char tmpdir[64];

static int make_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lipi-utf8-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Reads every line of path into one string, lines joined by '|'. */
static lipi_status read_joined(const char *path, lipi_invalid_mode mode, char *out,
                               size_t cap, size_t *nlines, lipi_error *err)
{
    lipi_line_reader *r = NULL;
    lipi_status st = lipi_line_reader_open(path, mode, &r, err);
    size_t used = 0, count = 0;
    out[0] = '\0';
    while (st == LIPI_OK) {
        const char *line;
        size_t len;
        st = lipi_line_reader_next(r, &line, &len, err);
        if (st != LIPI_OK || !line)
            break;
        count++;
        assert_int_equal(lipi_line_reader_line_no(r), count);
        assert_true(used + len + 2 <= cap);
        if (count > 1)
            out[used++] = '|';
        memcpy(out + used, line, len);
        used += len;
        out[used] = '\0';
    }
    if (nlines)
        *nlines = count;
    lipi_line_reader_close(r);
    return st;
}

static void test_reader_skips_bom_strips_crlf_keeps_lone_cr_nul_and_empty_lines(void **state)
{
    (void)state;
    static const char data[] = "\xEF\xBB\xBF" "one\r\n\ntwo\rstill two\n\r\nnul\0byte\n\nlast";
    const char *path = tmp_path("mixed.txt");
    write_file(path, data, sizeof data - 1);
    char got[256];
    size_t n = 0;
    assert_int_equal(read_joined(path, LIPI_INVALID_ERROR, got, sizeof got, &n, NULL), LIPI_OK);
    assert_int_equal(n, 7);
    static const char want[] = "one||two\rstill two||nul\0byte||last";
    assert_memory_equal(got, want, sizeof want);
}

static void test_reader_gives_no_line_for_empty_file_and_no_extra_line_after_final_newline(void **state)
{
    (void)state;
    char got[64];
    size_t n = 99;
    write_file(tmp_path("empty.txt"), "", 0);
    assert_int_equal(read_joined(tmp_path("empty.txt"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_int_equal(n, 0);
    write_file(tmp_path("bom-only.txt"), "\xEF\xBB\xBF", 3);
    assert_int_equal(read_joined(tmp_path("bom-only.txt"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_int_equal(n, 0);
    write_file(tmp_path("nl.txt"), "a\nb\n", 4);
    assert_int_equal(read_joined(tmp_path("nl.txt"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_int_equal(n, 2);
    assert_string_equal(got, "a|b");
    write_file(tmp_path("bom-in-middle.txt"), "a\n\xEF\xBB\xBF" "b", 6);
    assert_int_equal(read_joined(tmp_path("bom-in-middle.txt"), 0, got, sizeof got, &n, NULL),
                     LIPI_OK);
    assert_string_equal(got, "a|\xEF\xBB\xBF" "b");
}

static void test_reader_reports_invalid_byte_with_line_and_file_offset(void **state)
{
    (void)state;
    /* BOM (3) + "ab\n" (3) + "\xE0\xA4\x95\n" (4) + "xy" (2) -> bad byte at 12. */
    static const char data[] = "\xEF\xBB\xBF" "ab\n\xE0\xA4\x95\nxy\xFFz\nok\n";
    const char *path = tmp_path("bad.txt");
    write_file(path, data, sizeof data - 1);
    char got[128];
    lipi_error err = {0};
    assert_int_equal(read_joined(path, LIPI_INVALID_ERROR, got, sizeof got, NULL, &err),
                     LIPI_EFORMAT);
    assert_int_equal(err.code, LIPI_EFORMAT);
    assert_string_equal(err.path, path);
    assert_int_equal(err.line, 3);
    assert_int_equal(err.offset, 12);
    assert_non_null(strstr(err.msg, "invalid UTF-8 byte 0xff"));
    assert_non_null(strstr(err.msg, "--invalid=replace"));
    assert_string_equal(got, "ab|\xE0\xA4\x95");
}

static void test_reader_reports_truncated_sequence_at_its_first_byte(void **state)
{
    (void)state;
    static const char data[] = "line one\nline two\nabc\xE0\xA4\n";
    const char *path = tmp_path("trunc.txt");
    write_file(path, data, sizeof data - 1);
    char got[128];
    lipi_error err = {0};
    assert_int_equal(read_joined(path, 0, got, sizeof got, NULL, &err), LIPI_EFORMAT);
    assert_int_equal(err.line, 3);
    assert_int_equal(err.offset, 21);
    assert_non_null(strstr(err.msg, "0xe0"));
}

static void test_reader_replace_mode_substitutes_fffd_and_goes_on(void **state)
{
    (void)state;
    static const char data[] = "ok\nxy\xFFz\xED\xA0\x80\nend";
    const char *path = tmp_path("replace.txt");
    write_file(path, data, sizeof data - 1);
    char got[128];
    size_t n = 0;
    assert_int_equal(read_joined(path, LIPI_INVALID_REPLACE, got, sizeof got, &n, NULL), LIPI_OK);
    assert_int_equal(n, 3);
    assert_string_equal(got, "ok|xy" R "z" R R R "|end");
}

static void test_reader_fails_with_eio_naming_missing_file_and_directory(void **state)
{
    (void)state;
    lipi_line_reader *r = (lipi_line_reader *)1;
    lipi_error err = {0};
    const char *missing = tmp_path("no-such-file.txt");
    assert_int_equal(lipi_line_reader_open(missing, 0, &r, &err), LIPI_EIO);
    assert_null(r);
    assert_string_equal(err.path, missing);
    assert_non_null(strstr(err.msg, "No such file or directory"));
    memset(&err, 0, sizeof err);
    char got[8];
    assert_int_equal(read_joined(tmpdir, 0, got, sizeof got, NULL, &err), LIPI_EIO);
    assert_string_equal(err.path, tmpdir);
    assert_non_null(strstr(err.msg, "Is a directory"));
}

static void test_reader_reads_a_50mb_line_and_counts_raw_bytes(void **state)
{
    (void)state;
    const size_t unit_len = 10; /* "abc क " = 3 + 1 + 3 + 1 + 2 (xyz) */
    const char *unit = "abc \xE0\xA4\x95 xy";
    const size_t reps = 5 * 1000 * 1000;
    const char *path = tmp_path("huge.txt");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < reps; i++)
        assert_int_equal(fwrite(unit, 1, unit_len, f), unit_len);
    assert_int_equal(fwrite("\r\nsecond\n", 1, 9, f), 9);
    assert_int_equal(fclose(f), 0);

    lipi_line_reader *r = NULL;
    assert_int_equal(lipi_line_reader_open(path, 0, &r, NULL), LIPI_OK);
    const char *line;
    size_t len;
    assert_int_equal(lipi_line_reader_next(r, &line, &len, NULL), LIPI_OK);
    assert_non_null(line);
    assert_int_equal(len, reps * unit_len);
    assert_memory_equal(line + len - unit_len, unit, unit_len);
    assert_int_equal(lipi_line_reader_next(r, &line, &len, NULL), LIPI_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(line, "second", 6);
    assert_int_equal(lipi_line_reader_next(r, &line, &len, NULL), LIPI_OK);
    assert_null(line);
    assert_int_equal(lipi_line_reader_bytes_read(r), reps * unit_len + 9);
    lipi_line_reader_close(r);
}

static const char sample[] = "\xEF\xBB\xBFपहली पंक्ति\r\nsecond\n\nதமிழ்\nno newline";
static const char sample_joined[] = "पहली पंक्ति|second||தமிழ்|no newline";

static void write_gz(const char *path, const char *data, size_t len, int members)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    size_t part = len / (size_t)members;
    for (int m = 0; m < members; m++) {
        size_t off = part * (size_t)m, n = m == members - 1 ? len - off : part;
        z_stream z = {0};
        assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
                         Z_OK);
        unsigned char out[4096];
        z.next_in = (Bytef *)(data + off);
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = sizeof out;
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        fwrite(out, 1, sizeof out - z.avail_out, f);
        deflateEnd(&z);
    }
    assert_int_equal(fclose(f), 0);
}

static size_t xz_encode(const char *data, size_t len, unsigned char *out, size_t cap)
{
    size_t pos = 0;
    assert_int_equal(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, (const uint8_t *)data,
                                             len, out, &pos, cap),
                     LZMA_OK);
    return pos;
}

static void test_reader_decompresses_gz_xz_zst_to_the_same_lines(void **state)
{
    (void)state;
    char got[256];
    size_t n = 0;
    unsigned char buf[4096];

    write_gz(tmp_path("s.gz"), sample, sizeof sample - 1, 1);
    assert_int_equal(read_joined(tmp_path("s.gz"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_string_equal(got, sample_joined);
    assert_int_equal(n, 5);

    write_gz(tmp_path("multi.gz"), sample, sizeof sample - 1, 3);
    assert_int_equal(read_joined(tmp_path("multi.gz"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_string_equal(got, sample_joined);

    size_t k = xz_encode(sample, sizeof sample - 1, buf, sizeof buf);
    write_file(tmp_path("s.xz"), buf, k);
    assert_int_equal(read_joined(tmp_path("s.xz"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_string_equal(got, sample_joined);

    k = ZSTD_compress(buf, sizeof buf, sample, sizeof sample - 1, 3);
    assert_false(ZSTD_isError(k));
    write_file(tmp_path("s.zst"), buf, k);
    assert_int_equal(read_joined(tmp_path("s.zst"), 0, got, sizeof got, &n, NULL), LIPI_OK);
    assert_string_equal(got, sample_joined);
}

static void test_reader_reports_truncated_and_corrupt_compressed_input(void **state)
{
    (void)state;
    char got[256];
    unsigned char buf[4096];
    lipi_error err = {0};

    size_t k = xz_encode(sample, sizeof sample - 1, buf, sizeof buf);
    write_file(tmp_path("cut.xz"), buf, k - 10);
    assert_int_equal(read_joined(tmp_path("cut.xz"), 0, got, sizeof got, NULL, &err),
                     LIPI_ETRUNC);
    assert_string_equal(err.path, tmp_path("cut.xz"));

    k = ZSTD_compress(buf, sizeof buf, sample, sizeof sample - 1, 3);
    write_file(tmp_path("cut.zst"), buf, k - 3);
    assert_int_equal(read_joined(tmp_path("cut.zst"), 0, got, sizeof got, NULL, &err),
                     LIPI_ETRUNC);

    write_gz(tmp_path("cut.gz"), sample, sizeof sample - 1, 1);
    FILE *f = fopen(tmp_path("cut.gz"), "rb");
    size_t gzlen = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_file(tmp_path("cut.gz"), buf, gzlen - 5);
    assert_int_equal(read_joined(tmp_path("cut.gz"), 0, got, sizeof got, NULL, &err),
                     LIPI_ETRUNC);

    write_file(tmp_path("plain-text.gz"), "not gzip at all\n", 16);
    assert_int_equal(read_joined(tmp_path("plain-text.gz"), 0, got, sizeof got, NULL, &err),
                     LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "gzip"));
}

static void test_reader_reads_stdin_for_dash(void **state)
{
    (void)state;
    const char *path = tmp_path("stdin.txt");
    write_file(path, "from\nstdin\n", 11);
    int saved = dup(STDIN_FILENO);
    FILE *f = freopen(path, "rb", stdin);
    assert_non_null(f);
    char got[64];
    size_t n = 0;
    lipi_status st = read_joined("-", 0, got, sizeof got, &n, NULL);
    dup2(saved, STDIN_FILENO);
    close(saved);
    assert_int_equal(st, LIPI_OK);
    assert_string_equal(got, "from|stdin");
}

static lipi_status read_run(void *ctx, lipi_error *err)
{
    char got[256];
    return read_joined(ctx, LIPI_INVALID_REPLACE, got, sizeof got, NULL, err);
}

static void test_reader_fails_cleanly_on_every_allocation_failure(void **state)
{
    (void)state;
    static const char *names[] = {"s.gz", "s.xz", "s.zst", "replace.txt"};
    unsigned char buf[4096];
    write_gz(tmp_path("s.gz"), sample, sizeof sample - 1, 1);
    write_file(tmp_path("s.xz"), buf, xz_encode(sample, sizeof sample - 1, buf, sizeof buf));
    size_t k = ZSTD_compress(buf, sizeof buf, sample, sizeof sample - 1, 3);
    write_file(tmp_path("s.zst"), buf, k);
    static const char bad[] = "ok\nxy\xFFz\nend";
    write_file(tmp_path("replace.txt"), bad, sizeof bad - 1);
    for (size_t f = 0; f < sizeof names / sizeof *names; f++)
        assert_true(alloc_fail_loop(names[f], read_run, (void *)tmp_path(names[f])) > 2);
}

/* "<0xNN>" byte tokens: every byte round-trips; the lenient parse reads
 * what Hugging Face's ByteFallback decoder reads, the strict one only the
 * canonical names. */
static void test_byte_tokens_round_trip_and_parse_as_the_decoder_does(void **state)
{
    (void)state;
    for (unsigned b = 0; b < 256; b++) {
        char s[7];
        lipi_byte_token_format((uint8_t)b, s);
        assert_int_equal(strlen(s), 6);
        assert_int_equal(lipi_byte_token_parse(s, 6, false), (int)b);
        assert_int_equal(lipi_byte_token_parse(s, 6, true), (int)b);
    }
    char s[7];
    lipi_byte_token_format(0xAB, s);
    assert_string_equal(s, "<0xAB>");
    assert_int_equal(lipi_byte_token_parse("<0x0a>", 6, true), 10);
    assert_int_equal(lipi_byte_token_parse("<0x+A>", 6, true), 10);
    assert_int_equal(lipi_byte_token_parse("<0x0a>", 6, false), -1);
    assert_int_equal(lipi_byte_token_parse("<0x+A>", 6, false), -1);
    static const char *const bad[] = {"<0xZZ>", "<0x0A ", "<0X0A>", "<0xA+>", "<0x++>"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(lipi_byte_token_parse(bad[i], 6, true), -1);
        assert_int_equal(lipi_byte_token_parse(bad[i], 6, false), -1);
    }
    assert_int_equal(lipi_byte_token_parse("<0x0A>x", 7, true), -1);
    assert_int_equal(lipi_byte_token_parse("<0x0A>", 5, true), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_accepts_every_sequence_length),
        cmocka_unit_test(test_block_validation_agrees_with_bytewise),
        cmocka_unit_test(test_decode_rejects_overlong_surrogate_too_big_truncated),
        cmocka_unit_test(test_decode_agrees_with_reference_on_all_short_sequences),
        cmocka_unit_test(test_encode_then_decode_round_trips_every_scalar),
        cmocka_unit_test(test_valid_prefix_finds_first_bad_byte_after_long_ascii),
        cmocka_unit_test(test_repair_replaces_each_maximal_subpart_once),
        cmocka_unit_test(test_reader_skips_bom_strips_crlf_keeps_lone_cr_nul_and_empty_lines),
        cmocka_unit_test(test_reader_gives_no_line_for_empty_file_and_no_extra_line_after_final_newline),
        cmocka_unit_test(test_reader_reports_invalid_byte_with_line_and_file_offset),
        cmocka_unit_test(test_reader_reports_truncated_sequence_at_its_first_byte),
        cmocka_unit_test(test_reader_replace_mode_substitutes_fffd_and_goes_on),
        cmocka_unit_test(test_reader_fails_with_eio_naming_missing_file_and_directory),
        cmocka_unit_test(test_reader_reads_a_50mb_line_and_counts_raw_bytes),
        cmocka_unit_test(test_reader_decompresses_gz_xz_zst_to_the_same_lines),
        cmocka_unit_test(test_reader_reports_truncated_and_corrupt_compressed_input),
        cmocka_unit_test(test_reader_reads_stdin_for_dash),
        cmocka_unit_test(test_reader_fails_cleanly_on_every_allocation_failure),
        cmocka_unit_test(test_byte_tokens_round_trip_and_parse_as_the_decoder_does),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}

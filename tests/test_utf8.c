/* UTF-8 decoding, validation and repair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tokenizer.h"

#define S(lit) (lit), (sizeof(lit) - 1)

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_accepts_every_sequence_length),
        cmocka_unit_test(test_decode_rejects_overlong_surrogate_too_big_truncated),
        cmocka_unit_test(test_decode_agrees_with_reference_on_all_short_sequences),
        cmocka_unit_test(test_encode_then_decode_round_trips_every_scalar),
        cmocka_unit_test(test_valid_prefix_finds_first_bad_byte_after_long_ascii),
        cmocka_unit_test(test_repair_replaces_each_maximal_subpart_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

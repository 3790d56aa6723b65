/* Strict UTF-8 (Unicode 15, table 3-7): decoding, validation and repair.
 *
 * Well-formed sequences are exactly:
 *   00..7F
 *   C2..DF 80..BF
 *   E0 A0..BF 80..BF | E1..EC 80..BF 80..BF | ED 80..9F 80..BF | EE..EF 80..BF 80..BF
 *   F0 90..BF 80..BF 80..BF | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF
 * so overlongs, surrogates and values above U+10FFFF are rejected by the
 * range of the second byte alone. */
#include "tokenizer/common_impl.h"
#include "tokenizer/pretokenize_impl.h"

#include <string.h>

/* Length of the sequence a lead byte announces (0: not a lead byte) and the
 * allowed range of the byte after it. */
static inline unsigned seq_len(unsigned char b, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80)
        return 1;
    if (b < 0xC2)
        return 0;
    if (b < 0xE0)
        return 2;
    if (b < 0xF0) {
        if (b == 0xE0)
            *lo = 0xA0;
        else if (b == 0xED)
            *hi = 0x9F;
        return 3;
    }
    if (b < 0xF5) {
        if (b == 0xF0)
            *lo = 0x90;
        else if (b == 0xF4)
            *hi = 0x8F;
        return 4;
    }
    return 0;
}

/* Length of the maximal subpart of an ill-formed sequence at s (or of the
 * well-formed sequence, then *ok is set): the longest prefix that could
 * still begin a well-formed sequence, at least one byte. */
static size_t scan_one(const unsigned char *s, size_t len, bool *ok)
{
    unsigned char lo, hi;
    unsigned n = seq_len(s[0], &lo, &hi);
    *ok = false;
    if (n == 0)
        return 1;
    if (n == 1) {
        *ok = true;
        return 1;
    }
    size_t i = 1;
    if (i >= len || s[i] < lo || s[i] > hi)
        return 1;
    for (i = 2; i < n; i++)
        if (i >= len || (s[i] & 0xC0) != 0x80)
            return i;
    *ok = true;
    return n;
}

size_t lipi_utf8_decode(const char *s, size_t len, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (len == 0)
        return 0;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    bool ok;
    size_t n = scan_one(u, len, &ok);
    if (!ok)
        return 0;
    uint32_t c;
    switch (n) {
    case 2: c = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); break;
    case 3:
        c = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        break;
    default:
        c = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
            ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
        break;
    }
    *cp = c;
    return n;
}

size_t lipi_utf8_encode(uint32_t cp, char out[4])
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Number of leading ASCII bytes, eight at a time. */
static size_t ascii_prefix(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i + 8 <= len) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & UINT64_C(0x8080808080808080))
            break;
        i += 8;
    }
    while (i < len && s[i] < 0x80)
        i++;
    return i;
}

size_t lipi_utf8_valid_prefix(const char *s, size_t len)
{
    return pt_utf8_valid_prefix(s, len);
}

lipi_status lipi_utf8_repair(const char *s, size_t len, char **out, size_t *out_len)
{
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    const unsigned char *u = (const unsigned char *)s;
    lipi_buf b = {0};
    lipi_status st = LIPI_OK;
    /* Each bad byte grows to at most 3 bytes; reserve for the common case of
     * few repairs and let lipi_buf_append grow the rest. */
    TRY(lipi_buf_reserve(&b, len));
    size_t i = 0;
    while (i < len) {
        size_t good = i + ascii_prefix(u + i, len - i);
        while (good < len) {
            bool ok;
            size_t n = scan_one(u + good, len - good, &ok);
            if (!ok)
                break;
            good += n;
            good += ascii_prefix(u + good, len - good);
        }
        TRY(lipi_buf_append(&b, s + i, good - i));
        i = good;
        if (i < len) {
            bool ok;
            i += scan_one(u + i, len - i, &ok);
            TRY(lipi_buf_append(&b, fffd, sizeof fffd));
        }
    }
    b.p[b.len] = '\0';
    *out = b.p;
    *out_len = b.len;
    b.p = NULL;
done:
    lipi_buf_free(&b);
    return st;
}

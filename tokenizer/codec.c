/* Two small text codecs every module shares, so no copy drifts: the
 * "<0xNN>" names of byte-fallback tokens and base64 (tiktoken ranks,
 * precompiled_charsmap). */
#include "tokenizer/base.h"

#include <string.h>

/* ======================================================================== */
/* "<0xNN>" byte tokens                                                      */
/* ======================================================================== */

void lipi_byte_token_format(uint8_t b, char out[7])
{
    static const char hex[] = "0123456789ABCDEF";
    memcpy(out, "<0x", 3);
    out[3] = hex[b >> 4];
    out[4] = hex[b & 15];
    out[5] = '>';
    out[6] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int lipi_byte_token_parse(const char *s, size_t n, bool lenient)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    if (lenient && s[3] == '+')
        return hex_value(s[4]);
    int hi = hex_value(s[3]), lo = hex_value(s[4]);
    if (hi < 0 || lo < 0)
        return -1;
    if (!lenient && ((s[3] >= 'a' && s[3] <= 'f') || (s[4] >= 'a' && s[4] <= 'f')))
        return -1;
    return hi << 4 | lo;
}

/* ======================================================================== */
/* Base64 (RFC 4648 standard alphabet)                                       */
/* ======================================================================== */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

lipi_status lipi_base64_encode(const uint8_t *s, size_t n, lipi_buf *out)
{
    lipi_status st = LIPI_OK;
    if (n / 3 >= SIZE_MAX / 4 - 1)
        return LIPI_ENOMEM;
    TRY(lipi_buf_reserve(out, (n / 3 + 1) * 4));
    char *o = out->p + out->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    out->len = (size_t)(o - out->p);
    out->p[out->len] = '\0';
done:
    return st;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

bool lipi_base64_decode(const char *s, size_t n, bool lenient, uint8_t *out, size_t *out_len,
                        size_t *bad)
{
    size_t end = n; /* the characters before the padding */
    if (lenient) {
        while (end > 0 && s[end - 1] == '=')
            end--;
    } else {
        if (n % 4 != 0) {
            *bad = n;
            return false;
        }
        for (int k = 0; k < 2 && end > 0 && s[end - 1] == '='; k++)
            end--;
    }
    if (end % 4 == 1) {
        *bad = n;
        return false;
    }
    size_t o = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < end; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            *bad = i;
            return false;
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            out[o++] = (uint8_t)(acc >> 16);
            out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
            acc = 0;
        }
    }
    /* Canonical text has zero bits under the padding, so each text has one
     * decoding; lenient text may have any. */
    if (end % 4 == 2) {
        if (!lenient && (acc & 15)) {
            *bad = end - 1;
            return false;
        }
        out[o++] = (uint8_t)(acc >> 4);
    } else if (end % 4 == 3) {
        if (!lenient && (acc & 3)) {
            *bad = end - 1;
            return false;
        }
        out[o++] = (uint8_t)(acc >> 10);
        out[o++] = (uint8_t)(acc >> 2);
    }
    *out_len = o;
    return true;
}

/* Internal helpers shared by pretokenize.c, scanner.c and unicode.c: a UTF-8
 * validator and a decoder for text already known to be valid. They are inline because
 * the pre-tokenizer calls them once per character of every input. */
#ifndef LIPI_PRETOKENIZE_IMPL_H
#define LIPI_PRETOKENIZE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

/* lipi_pretokenize for text the caller has already checked to be valid
 * UTF-8 (the encoder checks each input once, before normalizing). */
lipi_status lipi_pretokenize_valid(const lipi_pretokenizer *p, const char *s, size_t len,
                                   lipi_pieces *out, lipi_error *err);

/* Whether the Split/ByteLevel nodes of p (and its children) whose pattern
 * is a known one run the hand-written scanner (the default) or PCRE2. For
 * tests that compare the two; not for a pre-tokenizer other threads use. */
void lipi_pretokenizer_use_scanners(lipi_pretokenizer *p, bool on);

/* True when some node of p runs a scanner instead of its regex. */
bool lipi_pretokenizer_has_scanner(const lipi_pretokenizer *p);

/* When p is one Split (alone or in a Sequence of one) that isolates the
 * matches of a pattern lipi scans by hand (not inverted), that scanner,
 * else NULL: then p's pieces are exactly the scanner's matches and the runs
 * between them, as they are in the text, and a caller may scan the text
 * itself instead of building pieces. */
const struct lipi_scanner *lipi_pretokenizer_scanner(const lipi_pretokenizer *p);

/* When p is one Metaspace (alone or in a Sequence of one) that splits and
 * never prepends, its replacement character, else 0: then on text without
 * a space p's pieces are the text cut before every replacement character. */
uint32_t lipi_pretokenizer_meta_split(const lipi_pretokenizer *p);

/* Decodes the code point at s, which must start a well-formed sequence
 * (callers validate first); stores it in *cp and returns its length. */
static inline size_t pt_utf8_next(const char *s, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    if (u[0] < 0xE0) {
        *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        return 2;
    }
    if (u[0] < 0xF0) {
        *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
          ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}

/* Writes code point cp (<= U+10FFFF, not a surrogate) as UTF-8 to out
 * (room for 4 bytes) and returns its length. */
static inline size_t pt_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Offset of the first byte of s[0..len) that does not start a well-formed
 * UTF-8 sequence (overlongs, surrogates, values above U+10FFFF and truncated
 * sequences included), or len when all of s is valid. */
static inline size_t pt_utf8_valid_prefix(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = u[i];
        if (c < 0x80) {
            /* ASCII runs 8 bytes at a time */
            while (len - i >= 8) {
                uint64_t w;
                memcpy(&w, u + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            while (i < len && u[i] < 0x80)
                i++;
            continue;
        }
        /* the common cases: runs of 3-byte characters led by E1..EC, EE,
         * EF (Indic, CJK) and of 2-byte ones (Cyrillic, Arabic, Greek) */
        while (c >= 0xE1 && c != 0xED && c <= 0xEF && len - i >= 3 &&
               (u[i + 1] & 0xC0) == 0x80 && (u[i + 2] & 0xC0) == 0x80) {
            i += 3;
            if (i == len)
                return len;
            c = u[i];
        }
        while (c >= 0xC2 && c <= 0xDF && len - i >= 2 && (u[i + 1] & 0xC0) == 0x80) {
            i += 2;
            if (i == len)
                return len;
            c = u[i];
        }
        if (c < 0x80)
            continue;
        size_t n;
        unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the 2nd byte */
        if (c >= 0xC2 && c <= 0xDF)
            n = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return i;
        if (len - i < n || u[i + 1] < lo || u[i + 1] > hi)
            return i;
        for (size_t k = 2; k < n; k++)
            if ((u[i + k] & 0xC0) != 0x80)
                return i;
        i += n;
    }
    return len;
}

#endif

/* Strict UTF-8 (Unicode 15, table 3-7): decoding, validation and repair.
 *
 * Well-formed sequences are exactly:
 *   00..7F
 *   C2..DF 80..BF
 *   E0 A0..BF 80..BF | E1..EC 80..BF 80..BF | ED 80..9F 80..BF | EE..EF 80..BF 80..BF
 *   F0 90..BF 80..BF 80..BF | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF
 * so overlongs, surrogates and values above U+10FFFF are rejected by the
 * range of the second byte alone. */
#include "tokenizer/base.h"
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Whether all of s[0..len) is well-formed UTF-8, 16 bytes at a time: the
 * "lookup" algorithm of Keiser and Lemire ("Validating UTF-8 in less than
 * one instruction per byte", 2021). Each byte's class is looked up from its
 * high nibble and from the high and low nibble of the byte before it (with
 * PSHUFB); the three 8-bit masks of the error kinds a pair can show are
 * ANDed, and the third and fourth bytes of long sequences are checked by
 * where their lead bytes are. */
#define TOO_SHORT (1 << 0)  /* lead byte or ASCII, then a lead byte or ASCII */
#define TOO_LONG (1 << 1)   /* ASCII, then a continuation */
#define OVERLONG_3 (1 << 2) /* E0 80..9F */
#define TOO_LARGE (1 << 3)  /* F4 90..BF, F5..FF */
#define SURROGATE (1 << 4)  /* ED A0..BF */
#define OVERLONG_2 (1 << 5) /* C0..C1 */
#define TOO_LARGE_1000 (1 << 6)
#define OVERLONG_4 (1 << 6) /* F0 80..8F */
#define TWO_CONTS (1 << 7)  /* a continuation, then a continuation */
#define CARRY (TOO_SHORT | TOO_LONG | TWO_CONTS)

/* The lookup tables of valid_ssse3 and valid_avx2 (which holds them in
 * both 16-byte lanes), indexed by a nibble: the first byte's high and low
 * nibbles, the second byte's high nibble. */
static const char utf8_B1_HIGH[16] = {
    TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG,
    (char)TWO_CONTS, (char)TWO_CONTS, (char)TWO_CONTS, (char)TWO_CONTS, TOO_SHORT | OVERLONG_2,
    TOO_SHORT, TOO_SHORT | OVERLONG_3 | SURROGATE,
    (char)(TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4)
};
static const char utf8_B1_LOW[16] = {
    (char)(CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4), (char)(CARRY | OVERLONG_2), (char)CARRY,
    (char)CARRY, (char)(CARRY | TOO_LARGE), (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
    (char)(CARRY | TOO_LARGE | TOO_LARGE_1000), (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
    (char)(CARRY | TOO_LARGE | TOO_LARGE_1000), (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
    (char)(CARRY | TOO_LARGE | TOO_LARGE_1000), (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
    (char)(CARRY | TOO_LARGE | TOO_LARGE_1000),
    (char)(CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE),
    (char)(CARRY | TOO_LARGE | TOO_LARGE_1000), (char)(CARRY | TOO_LARGE | TOO_LARGE_1000)
};
static const char utf8_B2_HIGH[16] = {
    TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT,
    (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4),
    (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE),
    (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE),
    (char)(TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE), TOO_SHORT, TOO_SHORT,
    TOO_SHORT, TOO_SHORT
};

__attribute__((target("ssse3"))) static bool valid_ssse3(const unsigned char *s, size_t len)
{
    const __m128i b1_high = _mm_loadu_si128((const __m128i *)(const void *)utf8_B1_HIGH);
    const __m128i b1_low = _mm_loadu_si128((const __m128i *)(const void *)utf8_B1_LOW);
    const __m128i b2_high = _mm_loadu_si128((const __m128i *)(const void *)utf8_B2_HIGH);
    /* Bytes that need 1, 2 or 3 more bytes after them at the end. */
    const __m128i incomplete_max =
        _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, (char)(0xF0 - 1),
                      (char)(0xE0 - 1), (char)(0xC0 - 1));
    const __m128i nib = _mm_set1_epi8(0x0F);
    __m128i prev = _mm_setzero_si128(), err = _mm_setzero_si128(),
            prev_incomplete = _mm_setzero_si128();
    for (size_t i = 0; i < len; i += 16) {
        __m128i in;
        if (len - i >= 16) {
            in = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        } else {
            unsigned char tail[16] = {0};
            memcpy(tail, s + i, len - i);
            in = _mm_loadu_si128((const __m128i *)(const void *)tail);
        }
        if (_mm_movemask_epi8(in) == 0) {
            /* ASCII: only a sequence cut off by it can be wrong. */
            err = _mm_or_si128(err, prev_incomplete);
        } else {
            __m128i prev1 = _mm_alignr_epi8(in, prev, 15);
            __m128i sc = _mm_and_si128(
                _mm_and_si128(
                    _mm_shuffle_epi8(b1_high, _mm_and_si128(_mm_srli_epi16(prev1, 4), nib)),
                    _mm_shuffle_epi8(b1_low, _mm_and_si128(prev1, nib))),
                _mm_shuffle_epi8(b2_high, _mm_and_si128(_mm_srli_epi16(in, 4), nib)));
            __m128i prev2 = _mm_alignr_epi8(in, prev, 14), prev3 = _mm_alignr_epi8(in, prev, 13);
            __m128i third = _mm_subs_epu8(prev2, _mm_set1_epi8((char)(0xE0 - 0x80)));
            __m128i fourth = _mm_subs_epu8(prev3, _mm_set1_epi8((char)(0xF0 - 0x80)));
            __m128i must23 =
                _mm_and_si128(_mm_or_si128(third, fourth), _mm_set1_epi8((char)0x80));
            err = _mm_or_si128(err, _mm_xor_si128(must23, sc));
            prev_incomplete = _mm_subs_epu8(in, incomplete_max);
        }
        prev = in;
    }
    err = _mm_or_si128(err, prev_incomplete);
    return _mm_movemask_epi8(_mm_cmpeq_epi8(err, _mm_setzero_si128())) == 0xFFFF;
}

/* valid_ssse3 32 bytes at a time: the same tables in both 16-byte lanes,
 * and the bytes before each lane's first ones from the lane before. */
__attribute__((target("avx2"))) static bool valid_avx2(const unsigned char *s, size_t len)
{
#define LANES(t) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)t))
    const __m256i b1_high = LANES(utf8_B1_HIGH), b1_low = LANES(utf8_B1_LOW),
                  b2_high = LANES(utf8_B2_HIGH);
#undef LANES
    /* Bytes that need 1, 2 or 3 more bytes after them at the end. */
    const __m256i incomplete_max = _mm256_setr_epi8(
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, (char)(0xF0 - 1), (char)(0xE0 - 1), (char)(0xC0 - 1));
    const __m256i nib = _mm256_set1_epi8(0x0F);
    __m256i prev = _mm256_setzero_si256(), err = _mm256_setzero_si256(),
            prev_incomplete = _mm256_setzero_si256();
    for (size_t i = 0; i < len; i += 32) {
        __m256i in;
        if (len - i >= 32) {
            in = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        } else {
            unsigned char tail[32] = {0};
            memcpy(tail, s + i, len - i);
            in = _mm256_loadu_si256((const __m256i *)(const void *)tail);
        }
        if (_mm256_movemask_epi8(in) == 0) {
            /* ASCII: only a sequence cut off by it can be wrong. */
            err = _mm256_or_si256(err, prev_incomplete);
        } else {
            /* Lane 0: the end of the block before; lane 1: in's lane 0. */
            __m256i before = _mm256_permute2x128_si256(prev, in, 0x21);
            __m256i prev1 = _mm256_alignr_epi8(in, before, 15);
            __m256i sc = _mm256_and_si256(
                _mm256_and_si256(
                    _mm256_shuffle_epi8(b1_high,
                                        _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nib)),
                    _mm256_shuffle_epi8(b1_low, _mm256_and_si256(prev1, nib))),
                _mm256_shuffle_epi8(b2_high, _mm256_and_si256(_mm256_srli_epi16(in, 4), nib)));
            __m256i prev2 = _mm256_alignr_epi8(in, before, 14);
            __m256i prev3 = _mm256_alignr_epi8(in, before, 13);
            __m256i third = _mm256_subs_epu8(prev2, _mm256_set1_epi8((char)(0xE0 - 0x80)));
            __m256i fourth = _mm256_subs_epu8(prev3, _mm256_set1_epi8((char)(0xF0 - 0x80)));
            __m256i must23 =
                _mm256_and_si256(_mm256_or_si256(third, fourth), _mm256_set1_epi8((char)0x80));
            err = _mm256_or_si256(err, _mm256_xor_si256(must23, sc));
            prev_incomplete = _mm256_subs_epu8(in, incomplete_max);
        }
        prev = in;
    }
    err = _mm256_or_si256(err, prev_incomplete);
    return _mm256_testz_si256(err, err);
}

size_t lipi_utf8_valid_prefix(const char *s, size_t len)
{
    /* Whole texts are usually valid: check fast, find the offset slowly.
     * 32 bytes at a time from 64 on (the lines of spm_bpe8k's bench text:
     * 4.6 instructions a byte 16 at a time, 2.7 with 32); SSSE3 below
     * that, and where AVX2 is missing. */
    const unsigned char *u = (const unsigned char *)s;
    if (len >= 64 && __builtin_cpu_supports("avx2") && valid_avx2(u, len))
        return len;
    if (len >= 32 && (len < 64 || !__builtin_cpu_supports("avx2")) &&
        __builtin_cpu_supports("ssse3") && valid_ssse3(u, len))
        return len;
    return pt_utf8_valid_prefix(s, len);
}
#else
size_t lipi_utf8_valid_prefix(const char *s, size_t len)
{
    return pt_utf8_valid_prefix(s, len);
}
#endif

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

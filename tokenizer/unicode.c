/* Unicode helpers: extended grapheme clusters (ICU character break
 * iterator) and script lookup. */
#include <pthread.h>
#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>
#include <unicode/uscript.h>
#include <unicode/utext.h>

#include "tokenizer/base.h"

/* Opening a character break iterator costs ~5 us (rule data lookup), a
 * clone ~0.6 us, and the trainer asks for the clusters of every unique word.
 * So one iterator is opened once per process and only ever cloned: it never
 * gets text and is never advanced, so threads can clone it concurrently. */
static pthread_once_t proto_once = PTHREAD_ONCE_INIT;
static UBreakIterator *proto;
static UErrorCode proto_status;

static void proto_open(void)
{
    proto_status = U_ZERO_ERROR;
    proto = ubrk_open(UBRK_CHARACTER, "", NULL, 0, &proto_status);
}

/* Appends boundary b to bounds[*n] (growing the array). */
static lipi_status push_bound(size_t **bounds, size_t *cap, size_t *n, size_t b)
{
    if (*n == *cap) {
        void *v = *bounds;
        lipi_status st = lipi_grow(&v, cap, *n + 1, sizeof **bounds);
        *bounds = v;
        if (st != LIPI_OK)
            return st;
    }
    (*bounds)[(*n)++] = b;
    return LIPI_OK;
}

/* Pushes the boundaries in (from, to] of pure ASCII text: after every
 * character but the CR of a CR LF. */
static lipi_status push_ascii(const char *s, size_t len, size_t from, size_t to, size_t **bounds,
                              size_t *cap, size_t *n)
{
    for (size_t i = from + 1; i <= to; i++) {
        if (i < len && s[i - 1] == '\r' && s[i] == '\n')
            continue;
        lipi_status st = push_bound(bounds, cap, n, i);
        if (st != LIPI_OK)
            return st;
    }
    return LIPI_OK;
}

static bool is_prepend(const char *s, size_t end)
{
    size_t k = end;
    while (k > 0 && ((unsigned char)s[k - 1] & 0xC0) == 0x80)
        k--;
    if (k > 0)
        k--;
    UChar32 c;
    int32_t i = 0;
    U8_NEXT((const uint8_t *)s + k, i, (int32_t)(end - k), c);
    return c >= 0 && u_getIntPropertyValue(c, UCHAR_GRAPHEME_CLUSTER_BREAK) == U_GCB_PREPEND;
}

/* The cluster rules (UAX #29 and ICU's tailoring) never join two ASCII
 * characters except CR LF: ASCII has no Extend, ZWJ, SpacingMark, Prepend,
 * Hangul, regional indicator or Indic letter. Nor do they join a non-ASCII
 * character to a following ASCII one, unless the first is a Prepend (a CR or
 * LF is always cut before). So ASCII runs are cut here, and ICU sees only
 * each non-ASCII run with the ASCII character before it (e + U+0301 is one
 * cluster), starting and ending at boundaries that are certain. */
/* Runs of non-ASCII text up to this many bytes go to ICU as UTF-16 from the
 * stack: its UTF-8 text provider costs more per character than the
 * boundaries themselves. Longer runs are read through a UTF-8 UText. */
enum { SHORT_RUN = 256 };

/* UTF-16 of valid UTF-8 s[0..n), n <= SHORT_RUN, into u, with off[k] the
 * byte offset of unit k (off[units] = n); -1 if s is not valid UTF-8. */
static int32_t short_utf16(const char *s, size_t n, UChar *u, uint16_t *off)
{
    int32_t i = 0, k = 0;
    while (i < (int32_t)n) {
        int32_t at = i;
        UChar32 c;
        U8_NEXT((const uint8_t *)s, i, (int32_t)n, c);
        if (c < 0)
            return -1;
        off[k] = (uint16_t)at;
        if (c <= 0xFFFF) {
            u[k++] = (UChar)c;
        } else {
            u[k] = U16_LEAD(c);
            u[k + 1] = U16_TRAIL(c);
            off[k + 1] = (uint16_t)at; /* never a boundary */
            k += 2;
        }
    }
    off[k] = (uint16_t)n;
    return k;
}

static lipi_status graphemes_with(UBreakIterator **bip, const char *s, size_t len,
                                  size_t **bounds, size_t *cap, size_t *count, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    UBreakIterator *bi = *bip;
    UText ut = UTEXT_INITIALIZER;
    UErrorCode ue = U_ZERO_ERROR;
    size_t n = 0, pos = 0;
    if (!bounds || !cap || !count || (!s && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected text and outputs");
    *count = 0;
    TRY(push_bound(bounds, cap, &n, 0));
    while (pos < len) {
        size_t i = pos;
        while (i < len && (unsigned char)s[i] < 0x80)
            i++;
        if (i == len) {
            TRY(push_ascii(s, len, pos, len, bounds, cap, &n));
            break;
        }
        size_t q = i > pos ? i - 1 : pos; /* the last ASCII character joins ICU's part */
        if (q > pos && s[q - 1] == '\r' && s[q] == '\n')
            q--;
        TRY(push_ascii(s, len, pos, q, bounds, cap, &n));
        size_t j = i;
        for (;;) {
            while (j < len && (unsigned char)s[j] >= 0x80)
                j++;
            if (j == len || s[j] == '\r' || s[j] == '\n' || !is_prepend(s, j))
                break;
            j++; /* a Prepend holds on to the ASCII character after it */
        }
        if (j - q > INT32_MAX) { /* ICU's break iterators index with int32_t */
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, q,
                                "a run of %zu bytes of non-ASCII text is too long", j - q);
            goto done;
        }
        if (!bi) {
            pthread_once(&proto_once, proto_open);
            ue = proto_status;
            if (U_SUCCESS(ue))
                bi = ubrk_clone(proto, &ue);
        }
        UChar u16[SHORT_RUN];
        uint16_t off16[SHORT_RUN + 1];
        int32_t n16 = j - q <= SHORT_RUN ? short_utf16(s + q, j - q, u16, off16) : -1;
        if (U_SUCCESS(ue) && n16 >= 0) {
            ubrk_setText(bi, u16, n16, &ue);
        } else if (U_SUCCESS(ue)) {
            utext_openUTF8(&ut, s + q, (int64_t)(j - q), &ue);
            if (U_SUCCESS(ue))
                ubrk_setUText(bi, &ut, &ue);
        }
        if (U_FAILURE(ue)) {
            st = lipi_error_set(err, ue == U_MEMORY_ALLOCATION_ERROR ? LIPI_ENOMEM : LIPI_EICU,
                                NULL, 0, q, "grapheme break iterator: %s", u_errorName(ue));
            goto done;
        }
        ubrk_first(bi);
        for (int32_t b = ubrk_next(bi); b != UBRK_DONE; b = ubrk_next(bi))
            TRY(push_bound(bounds, cap, &n, q + (n16 >= 0 ? off16[b] : (size_t)b)));
        pos = j;
    }
    *count = n - 1;
done:
    if (st == LIPI_ENOMEM) /* push_bound leaves the message to us */
        lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    *bip = bi;
    utext_close(&ut);
    return st;
}

lipi_status lipi_graphemes(const char *s, size_t len, size_t **bounds, size_t *cap,
                           size_t *count, lipi_error *err)
{
    UBreakIterator *bi = NULL;
    lipi_status st = graphemes_with(&bi, s, len, bounds, cap, count, err);
    ubrk_close(bi);
    return st;
}

/* The iterator is ICU's, cloned on first use: cloning costs about as much
 * as segmenting a short word. */
struct lipi_grapheme_iter {
    UBreakIterator *bi;
};

lipi_status lipi_graphemes_iter(lipi_grapheme_iter **it, const char *s, size_t len,
                                size_t **bounds, size_t *cap, size_t *count, lipi_error *err)
{
    if (!it)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected an iterator");
    if (!*it && !(*it = lipi_calloc(1, sizeof **it)))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    return graphemes_with(&(*it)->bi, s, len, bounds, cap, count, err);
}

void lipi_grapheme_iter_free(lipi_grapheme_iter *it)
{
    if (!it)
        return;
    ubrk_close(it->bi);
    lipi_free(it);
}

int lipi_script_of(uint32_t cp)
{
    UErrorCode ue = U_ZERO_ERROR;
    UScriptCode sc = uscript_getScript((UChar32)cp, &ue);
    return U_SUCCESS(ue) ? (int)sc : (int)USCRIPT_INVALID_CODE;
}

static unsigned char_class_icu(uint32_t cp)
{
    unsigned f = u_isUWhiteSpace((UChar32)cp) ? LIPI_CC_SPACE : 0;
    if (u_hasBinaryProperty((UChar32)cp, UCHAR_ALPHABETIC) ||
        u_hasBinaryProperty((UChar32)cp, UCHAR_JOIN_CONTROL))
        f |= LIPI_CC_WORD;
    switch (u_charType((UChar32)cp)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR: f |= LIPI_CC_CONTROL; break;
    case U_CONNECTOR_PUNCTUATION: f |= LIPI_CC_PUNCT | LIPI_CC_WORD; break;
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION: f |= LIPI_CC_PUNCT; break;
    case U_DECIMAL_DIGIT_NUMBER: f |= LIPI_CC_NUMBER | LIPI_CC_WORD; break;
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER: f |= LIPI_CC_NUMBER; break;
    case U_NON_SPACING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_ENCLOSING_MARK: f |= LIPI_CC_MARK | LIPI_CC_WORD; break;
    default: break;
    }
    return f;
}

static pthread_mutex_t bmp_class_lock = PTHREAD_MUTEX_INITIALIZER;
uint8_t lipi_bmp_class[0x10000];
atomic_bool lipi_bmp_class_ready[0x100];

/* Beyond the BMP, blocks of 256 chars with the same classes share a row
 * (most of those planes are unassigned or private use): a block's entry
 * is its row + 1, 0 until built (lipi_row_intern). ICU's lookups cost
 * ~0.15 us a char, 53% of mBERT's time on random code points. At most one
 * row a block, in BSS (touched when made). */
#define ASTRAL_BLOCKS 0x1000u /* (0x110000 - 0x10000) >> 8 */
#define ASTRAL_SLOTS 8192u
static _Atomic uint16_t astral_row[ASTRAL_BLOCKS];
static uint8_t astral_class[ASTRAL_BLOCKS * 256];
static uint16_t astral_slot[ASTRAL_SLOTS];
static unsigned astral_rows;

static unsigned astral_class_of(uint32_t cp)
{
    uint32_t b = (cp - 0x10000) >> 8;
    unsigned row = atomic_load_explicit(&astral_row[b], memory_order_acquire);
    if (row)
        return astral_class[(size_t)(row - 1) * 256 + (cp & 255)];
    pthread_mutex_lock(&bmp_class_lock);
    row = atomic_load_explicit(&astral_row[b], memory_order_relaxed);
    if (!row) {
        uint8_t *out = astral_class + (size_t)astral_rows * 256;
        for (uint32_t c = 0; c < 256; c++)
            out[c] = (uint8_t)char_class_icu(0x10000 + (b << 8) + c);
        row = lipi_row_intern(astral_class, 256, astral_slot, ASTRAL_SLOTS, &astral_rows);
        atomic_store_explicit(&astral_row[b], (uint16_t)row, memory_order_release);
    }
    pthread_mutex_unlock(&bmp_class_lock);
    return astral_class[(size_t)(row - 1) * 256 + (cp & 255)];
}

/* lipi_char_class before cp's block is built (building it), and beyond the
 * BMP (astral_class_of). The lock keeps two threads from writing a block at
 * once; readers of a block see it whole once its flag is set (release /
 * acquire). */
unsigned lipi_char_class_slow(uint32_t cp)
{
    if (cp >= 0x110000)
        return char_class_icu(cp);
    if (cp >= 0x10000)
        return astral_class_of(cp);
    uint32_t b = cp >> 8;
    pthread_mutex_lock(&bmp_class_lock);
    if (!atomic_load_explicit(&lipi_bmp_class_ready[b], memory_order_relaxed)) {
        for (uint32_t c = b << 8; c < (b + 1) << 8; c++)
            lipi_bmp_class[c] = (uint8_t)char_class_icu(c);
        atomic_store_explicit(&lipi_bmp_class_ready[b], true, memory_order_release);
    }
    pthread_mutex_unlock(&bmp_class_lock);
    return lipi_bmp_class[cp];
}

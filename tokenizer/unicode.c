/* Unicode helpers: extended grapheme clusters (ICU character break
 * iterator) and script lookup. */
#include <unicode/ubrk.h>
#include <unicode/uscript.h>
#include <unicode/utext.h>

#include "tokenizer/common_impl.h"

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

/* Where ICU has to take over: the last boundary that the ASCII rule alone
 * proves. Between two ASCII characters there is always a boundary except
 * inside CR LF (ASCII has no Extend, ZWJ, SpacingMark or Prepend), but the
 * boundary before a non-ASCII character depends on that character (e + U+0301
 * is one cluster), so ICU starts at the last ASCII character before it. */
static size_t ascii_prefix_end(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && (unsigned char)s[i] < 0x80)
        i++;
    if (i == len)
        return len;
    if (i == 0)
        return 0;
    size_t b = i - 1; /* start of the last ASCII character */
    if (b > 0 && s[b - 1] == '\r' && s[b] == '\n')
        b--;
    return b;
}

lipi_status lipi_graphemes(const char *s, size_t len, size_t **bounds, size_t *cap,
                           size_t *count, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    UBreakIterator *bi = NULL;
    UText ut = UTEXT_INITIALIZER;
    bool ut_open = false;
    size_t n = 0;
    if (!bounds || !cap || !count || (!s && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected text and outputs");
    *count = 0;
    TRY(push_bound(bounds, cap, &n, 0));
    size_t fast = ascii_prefix_end(s, len);
    for (size_t i = 1; i <= fast; i++) {
        if (i < len && s[i - 1] == '\r' && s[i] == '\n')
            continue;
        TRY(push_bound(bounds, cap, &n, i));
    }
    if (fast < len) {
        UErrorCode ue = U_ZERO_ERROR;
        utext_openUTF8(&ut, s + fast, (int64_t)(len - fast), &ue);
        ut_open = U_SUCCESS(ue);
        if (len - fast > INT32_MAX) /* ICU's break iterators index with int32_t */
            ue = U_INDEX_OUTOFBOUNDS_ERROR;
        if (U_SUCCESS(ue))
            bi = ubrk_open(UBRK_CHARACTER, "", NULL, 0, &ue);
        if (U_SUCCESS(ue))
            ubrk_setUText(bi, &ut, &ue);
        if (U_FAILURE(ue)) {
            st = lipi_error_set(err, ue == U_MEMORY_ALLOCATION_ERROR ? LIPI_ENOMEM : LIPI_EICU,
                                NULL, 0, 0, "grapheme break iterator: %s", u_errorName(ue));
            goto done;
        }
        ubrk_first(bi);
        for (int32_t b = ubrk_next(bi); b != UBRK_DONE; b = ubrk_next(bi))
            TRY(push_bound(bounds, cap, &n, fast + (size_t)b));
    }
    *count = n - 1;
done:
    if (st == LIPI_ENOMEM) /* push_bound leaves the message to us */
        lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    ubrk_close(bi);
    if (ut_open)
        utext_close(&ut);
    return st;
}

int lipi_script_of(uint32_t cp)
{
    UErrorCode ue = U_ZERO_ERROR;
    UScriptCode sc = uscript_getScript((UChar32)cp, &ue);
    return U_SUCCESS(ue) ? (int)sc : (int)USCRIPT_INVALID_CODE;
}

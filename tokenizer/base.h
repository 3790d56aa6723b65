/* The library's internal base: what every module's .c files share (the TRY
 * propagation macro and LIPI_ASSERT, uthash through the allocation hook,
 * growable buffers, whole-file reads and atomic files, character classes,
 * inline UTF-8). Any module may include it; it is not installed and never
 * included by a public header. See docs/ARCHITECTURE.md, "Include rules". */
#ifndef LIPI_BASE_H
#define LIPI_BASE_H

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

/* uthash allocates through the lipi hook and reports OOM instead of exiting:
 * after HASH_ADD*, check `lipi_hash_oom` (set by uthash_nonfatal_oom). */
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) lipi_malloc(sz)
#define uthash_free(ptr, sz) lipi_free(ptr)
#define uthash_nonfatal_oom(obj) (lipi_hash_oom_flag = 1)
extern _Thread_local int lipi_hash_oom_flag;
#include <uthash.h>

/* Number of allocations that failed in this thread (lipi_malloc and
 * lipi_realloc returning NULL, jansson's included). Lets a caller tell an
 * allocation failure from bad input when a library reports both alike, as
 * jansson's parser does: compare the value before and after the call. */
extern _Thread_local unsigned long lipi_alloc_failures;

/* Propagate a failing status to the function's single cleanup label:
 *     TRY(lipi_normalize(...));          jumps to `done` with `st` set */
#define TRY(expr)                                                                  \
    do {                                                                           \
        st = (expr);                                                               \
        if (st != LIPI_OK)                                                         \
            goto done;                                                             \
    } while (0)

/* Always-on check for broken invariants (never for bad input). */
#define LIPI_ASSERT(cond)                                                          \
    do {                                                                           \
        if (!(cond))                                                               \
            lipi_assert_fail(#cond, __FILE__, __LINE__);                           \
    } while (0)
_Noreturn void lipi_assert_fail(const char *what, const char *file, int line);

/* Growable byte buffer for building strings. */
typedef struct {
    char *p;
    size_t len, cap;
} lipi_buf;

/* Ensures room for `extra` more bytes plus a NUL; LIPI_ENOMEM on failure. */
lipi_status lipi_buf_reserve(lipi_buf *b, size_t extra);
lipi_status lipi_buf_append(lipi_buf *b, const void *data, size_t len);
void lipi_buf_free(lipi_buf *b);

/* Asks Linux to back the untouched range [p, p+len) of a large array with
 * huge pages (the 2 MiB pages wholly inside it). Tables that grow to
 * hundreds of megabytes in seconds (the trainers' word and pair tables)
 * otherwise take one page fault per 4 KiB, which on virtual machines costs
 * as much as the work on that memory. Only a hint: ignored where
 * unsupported. */
void lipi_huge_pages(void *p, size_t len);

/* Whether every a[i] of a: (count) is below n or equal to skip (what a
 * check of mapped ids needs: 8 at a time with AVX2 where there is one);
 * *skipped: how many equal skip. _ref is the portable loop, same answer. */
bool lipi_u32_all_below(const uint32_t *a, size_t count, uint64_t n, uint32_t skip,
                        size_t *skipped);
bool lipi_u32_all_below_ref(const uint32_t *a, size_t count, uint64_t n, uint32_t skip,
                            size_t *skipped);

/* The row of row_len bytes just written at rows + *n_rows * row_len, kept
 * once: the number (index + 1) of an equal row already kept, whose place
 * the new one leaves free, or else the new row's, counted in *n_rows.
 * slot: (slots) row numbers, 0 empty, slots a power of two above the most
 * rows; the caller holds the lock its tables are written under. */
unsigned lipi_row_intern(const uint8_t *rows, size_t row_len, uint16_t *slot, size_t slots,
                         unsigned *n_rows);

/* Standard padded base64 (RFC 4648) of s[0..n), appended to out. */
lipi_status lipi_base64_encode(const uint8_t *s, size_t n, lipi_buf *out);

/* Decodes base64 s[0..n) into out (room for n / 4 * 3 + 2 bytes). Strict:
 * only canonical padded text (a length divisible by 4, zero bits under the
 * padding). Lenient: the padding may be missing and the bits under it are
 * ignored. On bad text returns false with *bad the offset of the first
 * wrong character, n when the length is wrong. */
bool lipi_base64_decode(const char *s, size_t n, bool lenient, uint8_t *out, size_t *out_len,
                        size_t *bad);

/* SentencePiece's precompiled_charsmap (trie size, darts-clone double array,
 * NUL-terminated replacements) for lipi's normalizer form "nfc", "nfkc" or
 * "indic", built from ICU's data: what a .model needs to normalize as the
 * tokenizer does (charsmap.c says how far a prefix map can). *out is owned
 * by the caller (lipi_free); LIPI_ENOMEM or LIPI_EICU on failure. */
lipi_status lipi_charsmap_build(const char *form, char **out, size_t *out_len, lipi_error *err);

/* Grows an array *p of *cap elements of `size` bytes to hold `need`. */
lipi_status lipi_grow(void **p, size_t *cap, size_t need, size_t size);

/* ------------------------------------------------------------------------ */
/* Files (fileio.c)                                                          */
/* ------------------------------------------------------------------------ */

/* Reads the whole file at `path` into *out (lipi_malloc'd, with a NUL after
 * the last byte that *len does not count). For small files read whole (JSON,
 * configs), not for corpora. Fails with err->path = path and:
 *   LIPI_EIO      the file cannot be opened or read, or is a directory
 *                 (msg has strerror, e.g. "cannot open: No such file or directory");
 *   LIPI_EFORMAT  it is larger than max_size bytes (msg gives both sizes);
 *   LIPI_ENOMEM   allocation failed.
 * Pipes and other unsized files work too (read until end of file). */
lipi_status lipi_read_file(const char *path, size_t max_size, char **out, size_t *len,
                           lipi_error *err);

/* A file written atomically: bytes go to a temporary file in the target's
 * directory, and only lipi_atomic_commit moves it over the target, so readers
 * see the old file or the complete new one, never a partial one:
 *
 *     lipi_atomic_file af;
 *     TRY(lipi_atomic_open(&af, "out/tokenizer.json", err));
 *     fwrite(data, 1, len, af.f);
 *     TRY(lipi_atomic_commit(&af, err));      (or lipi_atomic_abort(&af))
 */
typedef struct {
    FILE *f;    /* write through this between open and commit / abort */
    char *path; /* the target */
    char *tmp;  /* the temporary file, "<path>.tmp-XXXXXXXX" */
    bool no_sync; /* set after open: commit renames without fsync (caches,
                     whose files are checked when read and rebuilt when
                     lost) */
} lipi_atomic_file;

/* Temporary files and what a killed writer leaves. lipi writes an output
 * under a temporary name next to it, "<target>.tmp-" + a random suffix
 * (8 hex digits for files, 6 letters or digits for index folders), and
 * renames it over the target at the end. The writer holds an flock on the
 * temporary file (or folder) until then. A SIGKILL cannot clean up, so it
 * may leave one such temporary behind, never a partial target; the next
 * write of the same target removes every temporary of it that no live
 * writer holds locked, so concurrent writers never remove each other's. */

/* Locks fd, a temporary file or folder just created, for its writer. False
 * when a cleaner removed it before the lock was taken (create another). */
bool lipi_temp_claim(int fd);

/* Removes the unlocked temporaries "<target>.tmp-XXX..." (suffix_len
 * letters or digits) in target's folder: regular files with unlink when
 * remove_dir is NULL, else folders with remove_dir. Best effort: errors
 * leave files in place and are not reported. */
void lipi_remove_stale_temps(const char *target, size_t suffix_len,
                             void (*remove_dir)(const char *path));

/* Checks first that the target's directory exists and is writable, removes
 * temporaries of killed writers of it (see above), then creates the
 * temporary file (mode 0666 minus umask). LIPI_EIO naming the
 * target in err->path and the directory in msg when it is not; LIPI_EINVAL
 * for an empty path or one that names a directory; LIPI_ENOMEM. On failure
 * nothing is left behind and *af needs no cleanup. */
lipi_status lipi_atomic_open(lipi_atomic_file *af, const char *path, lipi_error *err);

/* Flushes, fsyncs, closes and renames the temporary file over the target
 * (then fsyncs the directory so the rename survives a crash; neither fsync
 * when af->no_sync). Any write
 * error since open (a full disk, say) is reported here as LIPI_EIO, and then
 * the temporary file is removed and the target is untouched. *af is released
 * either way. */
lipi_status lipi_atomic_commit(lipi_atomic_file *af, lipi_error *err);

/* Closes and removes the temporary file; the target is untouched. Safe on an
 * af that was already committed or aborted. */
void lipi_atomic_abort(lipi_atomic_file *af);

/* lipi_graphemes for many texts on one thread: *it (NULL at first, made on
 * the first call) keeps ICU's break iterator from call to call instead of
 * cloning one each time. One iterator per thread; free with
 * lipi_grapheme_iter_free (NULL is a no-op). Same results and errors. */
typedef struct lipi_grapheme_iter lipi_grapheme_iter;
lipi_status lipi_graphemes_iter(lipi_grapheme_iter **it, const char *s, size_t len,
                                size_t **bounds, size_t *cap, size_t *count, lipi_error *err);
void lipi_grapheme_iter_free(lipi_grapheme_iter *it);

/* General categories and White_Space of a code point as ICU gives them,
 * for the BERT, Rust-std and Rust-regex character tests; the BMP's are computed
 * into a 64 KB table (ICU's lookups cost several calls per character), a block
 * of 256 characters when one of them is first asked for (the whole BMP took
 * ~3 ms of every process that opened a BERT tokenizer). */
enum {
    LIPI_CC_SPACE = 1,   /* White_Space */
    LIPI_CC_CONTROL = 2, /* Cc, Cf, Co */
    LIPI_CC_PUNCT = 4,   /* P* */
    LIPI_CC_NUMBER = 8,  /* Nd, Nl, No */
    LIPI_CC_MARK = 16,   /* Mn, Mc, Me */
    LIPI_CC_WORD = 32,   /* Rust regex \w: Alphabetic, Join_Control, marks,
                            Nd, Pc */
};
extern uint8_t lipi_bmp_class[0x10000];
extern atomic_bool lipi_bmp_class_ready[0x100]; /* by block (cp >> 8) */
unsigned lipi_char_class_slow(uint32_t cp);

static inline unsigned lipi_char_class(uint32_t cp)
{
    if (cp < 0x10000 && atomic_load_explicit(&lipi_bmp_class_ready[cp >> 8], memory_order_acquire))
        return lipi_bmp_class[cp];
    return lipi_char_class_slow(cp);
}

/* ------------------------------------------------------------------------ */
/* UTF-8 in hot loops (inline: called once per character of every input)   */
/* ------------------------------------------------------------------------ */

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

/* Where a token spelled s[0..len) (valid UTF-8) meets grapheme clusters:
 * *starts_inside when its first code point never starts a cluster (a mark,
 * ZWJ or other extender: the token can only follow a cut), *ends_open when
 * the cluster may go on after it (ZWJ or Prepend last, or a consonant and
 * virama that joins the next consonant, GB9c). The Unigram trainer keeps
 * such tokens from cutting clusters it has seen. */
void lipi_cluster_edges(const char *s, size_t len, bool *starts_inside, bool *ends_open);

#endif

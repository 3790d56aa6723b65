/* Hand-written equivalents of the known split patterns (scanner_impl.h).
 *
 * Each matcher follows its regex alternative by alternative, in the order a
 * backtracking engine tries them, and resolves the backtracking of greedy
 * runs in closed form: `\s+(?!\S)` gives up the last white-space character
 * unless the run ends the text, `\s*[\r\n]+` ends after the last CR/LF of
 * the run, and o200k's `A*B+` ends after the last B character of the A run
 * when no B character follows it. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <unicode/uchar.h>
#include <unicode/uscript.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/base.h"
#include "tokenizer/pretokenize_impl.h"
#include "tokenizer/scanner_impl.h"

/* ======================================================================== */
/* The class table                                                           */
/* ======================================================================== */

/* Two stages: a block of 128 code points maps to its row of stage2, whose
 * bytes are kinds; a kind is a (class bits, script bits) pair. A block's
 * row is made the first time a character of it is looked up (ASCII's at
 * once): classifying all of Unicode up front took 55 million instructions
 * (15-25 ms) of every process that loaded a tokenizer with a known split
 * pattern, while a text touches a few dozen blocks. stage1 holds the row
 * + 1, 0 for a block not made yet; a row is written under build_lock and
 * then published by a release store of its stage1 entry, so readers need
 * no lock. The arrays are sized for the worst case and live in BSS, so
 * making a row never allocates (and never fails). */
#define BLOCK_BITS 7
#define BLOCK (1u << BLOCK_BITS)
#define N_BLOCKS (0x110000u / BLOCK)
#define MAX_KINDS 256

static uint16_t stage1[N_BLOCKS];
static uint8_t stage2[N_BLOCKS * BLOCK];
/* The kinds of the BMP again, flat (64 KB), for a lookup without the two
 * stages: BMP_NONE until the char's block is made (kind 255 is never
 * made), written under build_lock by release stores after its row. */
#define BMP_NONE 0xFFu
static uint8_t bmp_kind[0x10000];
static uint8_t kind_flags[MAX_KINDS];
static uint32_t kind_scripts[MAX_KINDS];
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned n_rows, n_kinds = 1; /* kind 0: no class, no script */
/* Blocks with the same kinds share a row (most of the planes above the
 * BMP are unassigned or private use): a text of random code points reads
 * a few rows, which stay in cache, not one of 8704 (lipi_row_intern). */
#define ROW_SLOTS 16384u
static uint16_t row_slot[ROW_SLOTS];
static int clip;                     /* see classify */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* The word scripts of the indic pattern, in its alternation order. */
static const UScriptCode word_scripts[LIPI_UC_N_SCRIPTS - 1] = {
    USCRIPT_LATIN,    USCRIPT_DEVANAGARI, USCRIPT_BENGALI,  USCRIPT_TAMIL,   USCRIPT_TELUGU,
    USCRIPT_GUJARATI, USCRIPT_KANNADA,    USCRIPT_MALAYALAM, USCRIPT_GURMUKHI, USCRIPT_ORIYA,
    USCRIPT_SINHALA,  USCRIPT_OL_CHIKI,   USCRIPT_MEITEI_MAYEK, USCRIPT_ARABIC, USCRIPT_CYRILLIC,
    USCRIPT_GREEK,    USCRIPT_ARMENIAN,   USCRIPT_HEBREW,   USCRIPT_GEORGIAN, USCRIPT_THAI,
    USCRIPT_LAO,      USCRIPT_TIBETAN,    USCRIPT_MYANMAR,  USCRIPT_KHMER,   USCRIPT_ETHIOPIC,
    USCRIPT_HANGUL,
};
#define SCRIPT_LATIN 1u
#define SCRIPT_JA (1u << (LIPI_UC_N_SCRIPTS - 1))

/* PCRE2's \p{Devanagari} matches Script_Extensions, so a letter belongs to
 * every script its extensions list. */
static uint32_t script_bits(UChar32 c)
{
    UScriptCode sx[32];
    UErrorCode e = U_ZERO_ERROR;
    int n = uscript_getScriptExtensions(c, sx, 32, &e);
    if (U_FAILURE(e))
        n = 0;
    uint32_t bits = 0;
    for (int i = 0; i < n; i++) {
        if (sx[i] == USCRIPT_HAN || sx[i] == USCRIPT_HIRAGANA || sx[i] == USCRIPT_KATAKANA)
            bits |= SCRIPT_JA;
        for (int k = 0; k < LIPI_UC_N_SCRIPTS - 1; k++)
            if (sx[i] == word_scripts[k])
                bits |= 1u << k;
    }
    return bits;
}

/* Unicode version (major * 100 + minor) of PCRE2's own tables; 0 when
 * PCRE2 does not say. */
static int pcre2_unicode_version(void)
{
    char v[32] = "";
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, v) < 0)
        return 0;
    int major = 0, minor = 0;
    if (sscanf(v, "%d.%d", &major, &minor) != 2)
        return 0;
    return major * 100 + minor;
}

static void classify(UChar32 c, int clip, uint8_t *flags, uint32_t *scripts)
{
    *flags = 0;
    *scripts = 0;
    int8_t t = u_charType(c);
    if (t == U_UNASSIGNED)
        return;
    if (clip) { /* assigned after PCRE2's Unicode version: unassigned there */
        UVersionInfo age;
        u_charAge(c, age);
        if (age[0] * 100 + age[1] > clip)
            return;
    }
    unsigned f = 0;
    switch (t) {
    case U_UPPERCASE_LETTER:
    case U_TITLECASE_LETTER: f = LIPI_UC_L | LIPI_UC_A; break;
    case U_LOWERCASE_LETTER: f = LIPI_UC_L | LIPI_UC_B; break;
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER: f = LIPI_UC_L | LIPI_UC_A | LIPI_UC_B; break;
    case U_NON_SPACING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_ENCLOSING_MARK: f = LIPI_UC_M | LIPI_UC_A | LIPI_UC_B; break;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER: f = LIPI_UC_N; break;
    default: break;
    }
    if (u_isUWhiteSpace(c))
        f |= LIPI_UC_WS;
    if (c == '\r' || c == '\n')
        f |= LIPI_UC_CRLF;
    if (c == 0x200C || c == 0x200D)
        f |= LIPI_UC_ZW;
    *flags = (uint8_t)f;
    if (f & LIPI_UC_L)
        *scripts = script_bits(c);
}

/* The kind of (f, s), added when new; under build_lock. */
static unsigned kind_id(uint8_t f, uint32_t s)
{
    unsigned x = 0;
    while (x < n_kinds && (kind_flags[x] != f || kind_scripts[x] != s))
        x++;
    if (x == n_kinds) {
        LIPI_ASSERT(n_kinds < BMP_NONE);
        kind_flags[x] = f;
        kind_scripts[x] = s;
        n_kinds++;
    }
    return x;
}

/* Makes the row of block k (if no other thread has) and returns its
 * stage1 entry. */
static uint16_t block_build(uint32_t k)
{
    pthread_mutex_lock(&build_lock);
    uint16_t row = __atomic_load_n(&stage1[k], __ATOMIC_RELAXED);
    if (!row) {
        uint8_t *out = stage2 + (size_t)n_rows * BLOCK;
        unsigned last = 0;
        for (UChar32 c = (UChar32)(k * BLOCK); c < (UChar32)((k + 1) * BLOCK); c++) {
            uint8_t f;
            uint32_t sc;
            classify(c, clip, &f, &sc);
            if (kind_flags[last] != f || kind_scripts[last] != sc)
                last = kind_id(f, sc);
            out[c & (BLOCK - 1)] = (uint8_t)last;
        }
        row = (uint16_t)lipi_row_intern(stage2, BLOCK, row_slot, ROW_SLOTS, &n_rows);
        __atomic_store_n(&stage1[k], row, __ATOMIC_RELEASE);
        for (uint32_t c = k * BLOCK; c < (k + 1) * BLOCK && c < 0x10000; c++)
            __atomic_store_n(&bmp_kind[c], out[c & (BLOCK - 1)], __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&build_lock);
    return row;
}

static void table_build(void)
{
    int pcre_v = pcre2_unicode_version();
    UVersionInfo icu;
    u_getUnicodeVersion(icu);
    clip = pcre_v && icu[0] * 100 + icu[1] > pcre_v ? pcre_v : 0;
    memset(bmp_kind, BMP_NONE, sizeof bmp_kind);
    block_build(0); /* row 0: ASCII, which kind_at reads directly */
}

static inline unsigned kind_of(uint32_t cp)
{
    if (cp < 0x10000) {
        unsigned kd = __atomic_load_n(&bmp_kind[cp], __ATOMIC_ACQUIRE);
        if (__builtin_expect(kd != BMP_NONE, 1))
            return kd;
    }
    uint16_t row = __atomic_load_n(&stage1[cp >> BLOCK_BITS], __ATOMIC_ACQUIRE);
    if (__builtin_expect(row == 0, 0))
        row = block_build(cp >> BLOCK_BITS);
    return stage2[((size_t)(row - 1) << BLOCK_BITS) | (cp & (BLOCK - 1))];
}

unsigned lipi_uc_flags(uint32_t cp)
{
    pthread_once(&table_once, table_build);
    return cp < 0x110000 ? kind_flags[kind_of(cp)] : 0;
}

uint32_t lipi_uc_scripts(uint32_t cp)
{
    pthread_once(&table_once, table_build);
    return cp < 0x110000 ? kind_scripts[kind_of(cp)] : 0;
}

/* ======================================================================== */
/* Reading characters                                                        */
/* ======================================================================== */

#define F_END 0x100u /* past the end of the text */

/* Kind of the character at t[i] and its length; ASCII without decoding.
 * Block 0 of stage2 is the ASCII block, so stage2[b] is its kind. */
static inline unsigned kind_at(const char *t, size_t i, size_t *len)
{
    unsigned char b = (unsigned char)t[i];
    if (b < 0x80) {
        *len = 1;
        return stage2[b];
    }
    uint32_t cp;
    *len = pt_utf8_next(t + i, &cp);
    return kind_of(cp);
}

static inline unsigned flags_at(const char *t, size_t n, size_t i, size_t *len)
{
    if (i >= n) {
        *len = 0;
        return F_END;
    }
    return kind_flags[kind_at(t, i, len)];
}

/* End of the run from i of characters having a bit of `any`. */
static size_t run_any(const char *t, size_t n, size_t i, unsigned any)
{
    while (i < n) {
        size_t k;
        if (!(kind_flags[kind_at(t, i, &k)] & any))
            break;
        i += k;
    }
    return i;
}

/* End of the run from i of characters having no bit of `none`. */
static size_t run_none(const char *t, size_t n, size_t i, unsigned none)
{
    while (i < n) {
        size_t k;
        if (kind_flags[kind_at(t, i, &k)] & none)
            break;
        i += k;
    }
    return i;
}

/* `\p{N}{1,max}` (max 0: no limit) from i, which is a number. */
static size_t run_digits(const char *t, size_t n, size_t i, int max)
{
    for (int c = 0; i < n && (max == 0 || c < max); c++) {
        size_t k;
        if (!(kind_flags[kind_at(t, i, &k)] & LIPI_UC_N))
            break;
        i += k;
    }
    return i;
}

static size_t run_bytes(const char *t, size_t n, size_t i, const char *set)
{
    while (i < n && t[i] && strchr(set, t[i]))
        i++;
    return i;
}

/* ======================================================================== */
/* The scanners                                                              */
/* ======================================================================== */

typedef enum { FAM_GPT2, FAM_CL100K, FAM_O200K, FAM_INDIC } scan_family;

/* How the contractions 's 't 're 've 'm 'll 'd are matched. */
typedef enum {
    CONTR_NONE,
    CONTR_LOWER,    /* 's|'t|...: lower case only */
    CONTR_ASCII,    /* every case combination spelled out */
    CONTR_CASELESS, /* (?i:...): also U+017F LATIN SMALL LETTER LONG S for s */
} contr_mode;

struct lipi_scanner {
    const char *name; /* lipi_split_pattern's */
    scan_family family;
    contr_mode contractions;
    int max_digits;   /* \p{N}{1,max}; 0: \p{N}+ */
    bool trailing_ws; /* the final |\s+ */
    bool number_space; /* indic: ` ?` before numbers */
};

static const lipi_scanner known[] = {
    {"gpt2", FAM_GPT2, CONTR_LOWER, 0, true, false},
    {"gpt2-no-trailing-space", FAM_GPT2, CONTR_LOWER, 0, false, false},
    {"cl100k", FAM_CL100K, CONTR_ASCII, 3, true, false},
    {"cl100k-tiktoken", FAM_CL100K, CONTR_CASELESS, 3, true, false},
    {"qwen2", FAM_CL100K, CONTR_CASELESS, 1, true, false},
    {"o200k", FAM_O200K, CONTR_ASCII, 3, true, false},
    {"o200k-tiktoken", FAM_O200K, CONTR_CASELESS, 3, true, false},
    {"tekken", FAM_O200K, CONTR_NONE, 1, true, false},
    {"indic", FAM_INDIC, CONTR_CASELESS, 3, true, false},
    {"indic-unigram", FAM_INDIC, CONTR_CASELESS, 3, true, true},
};

const lipi_scanner *lipi_scanner_find(const char *pattern, size_t len)
{
    if (!pattern)
        return NULL;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        const char *p = lipi_split_pattern(known[i].name);
        if (strlen(p) == len && memcmp(p, pattern, len) == 0) {
            pthread_once(&table_once, table_build);
            return &known[i];
        }
    }
    return NULL;
}

static inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

/* Length of the contraction at t[i] ('s 't 're 've 'm 'll 'd), 0 if none. */
static size_t contraction(const char *t, size_t n, size_t i, contr_mode mode)
{
    if (mode == CONTR_NONE || i + 1 >= n || t[i] != '\'')
        return 0;
    char c = t[i + 1], d = i + 2 < n ? t[i + 2] : 0;
    if (mode != CONTR_LOWER) {
        c = ascii_lower(c);
        d = ascii_lower(d);
    }
    if (c == 's' || c == 't' || c == 'm' || c == 'd')
        return 2;
    if ((c == 'r' || c == 'v') && d == 'e')
        return 3;
    if (c == 'l' && d == 'l')
        return 3;
    if (mode == CONTR_CASELESS && (unsigned char)c == 0xC5 && (unsigned char)d == 0xBF)
        return 3; /* U+017F folds to s */
    return 0;
}

/* The white-space alternatives from i: [`\s*[\r\n]+` when crlf,]
 * `\s+(?!\S)` [, `\s+` when trailing]. */
static size_t ws_tail(const char *t, size_t n, size_t i, bool crlf, bool trailing)
{
    size_t k = i, last = i, crlf_end = 0;
    while (k < n) {
        size_t len;
        unsigned f = kind_flags[kind_at(t, k, &len)];
        if (!(f & LIPI_UC_WS))
            break;
        if (f & LIPI_UC_CRLF)
            crlf_end = k + len;
        last = k;
        k += len;
    }
    if (k == i)
        return 0;
    if (crlf && crlf_end)
        return crlf_end - i;
    if (k == n)
        return k - i;
    if (last > i)
        return last - i;
    return trailing ? k - i : 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t scan_gpt2(const lipi_scanner *sc, const char *t, size_t n, size_t i)
{
    size_t c = contraction(t, n, i, sc->contractions), k;
    if (c)
        return c;
    size_t j = t[i] == ' ' && i + 1 < n ? i + 1 : i;
    unsigned f = flags_at(t, n, j, &k);
    if (f & LIPI_UC_L)
        return run_any(t, n, j, LIPI_UC_L) - i;
    if (f & LIPI_UC_N)
        return run_digits(t, n, j, sc->max_digits) - i;
    if (!(f & LIPI_UC_WS))
        return run_none(t, n, j, LIPI_UC_L | LIPI_UC_N | LIPI_UC_WS) - i;
    return ws_tail(t, n, i, false, sc->trailing_ws);
}

/* What cl100k and o200k share after their words, at i whose class bits
 * are f0: \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[TAIL]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t after_words(const lipi_scanner *sc, const char *t, size_t n, size_t i, unsigned f0,
                          const char *tail)
{
    size_t k;
    if (f0 & LIPI_UC_N)
        return run_digits(t, n, i, sc->max_digits) - i;
    size_t j = t[i] == ' ' && i + 1 < n ? i + 1 : i;
    if (!(flags_at(t, n, j, &k) & (LIPI_UC_WS | LIPI_UC_L | LIPI_UC_N)))
        return run_bytes(t, n, run_none(t, n, j, LIPI_UC_WS | LIPI_UC_L | LIPI_UC_N), tail) - i;
    return ws_tail(t, n, i, true, true);
}

/* CONTRACTIONS|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
 * |\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t scan_cl100k(const lipi_scanner *sc, const char *t, size_t n, size_t i)
{
    size_t c = contraction(t, n, i, sc->contractions), k0, k;
    if (c)
        return c;
    unsigned f0 = flags_at(t, n, i, &k0);
    if (f0 & LIPI_UC_L)
        return run_any(t, n, i, LIPI_UC_L) - i;
    if (!(f0 & (LIPI_UC_N | LIPI_UC_CRLF)) && (flags_at(t, n, i + k0, &k) & LIPI_UC_L))
        return run_any(t, n, i + k0, LIPI_UC_L) - i;
    return after_words(sc, t, n, i, f0, "\r\n");
}

/* o200k's `[^\r\n\p{L}\p{N}]?A*B+` from j (after the optional prefix): the
 * end of the match, 0 when there is none. Inlined into scan_o200k: it runs
 * once or twice per piece, and the call cost a tenth of it. */
static inline __attribute__((always_inline)) size_t o200k_lower(const char *t, size_t n, size_t j)
{
    size_t k = j, last_b = 0, len;
    while (k < n) {
        unsigned f = kind_flags[kind_at(t, k, &len)];
        if (!(f & LIPI_UC_A))
            break;
        if (f & LIPI_UC_B)
            last_b = k + len;
        k += len;
    }
    if (flags_at(t, n, k, &len) & LIPI_UC_B)
        return run_any(t, n, k, LIPI_UC_B);
    return last_b;
}

/* `A+B*` from j: the end of the match, 0 when there is none. */
static size_t o200k_upper(const char *t, size_t n, size_t j)
{
    size_t len;
    if (!(flags_at(t, n, j, &len) & LIPI_UC_A))
        return 0;
    return run_any(t, n, run_any(t, n, j, LIPI_UC_A), LIPI_UC_B);
}

static size_t scan_o200k(const lipi_scanner *sc, const char *t, size_t n, size_t i)
{
    size_t k0, e = 0;
    unsigned f0 = flags_at(t, n, i, &k0);
    bool prefix = !(f0 & (LIPI_UC_L | LIPI_UC_N | LIPI_UC_CRLF)) && i + k0 < n;
    if ((prefix && (e = o200k_lower(t, n, i + k0))) || (e = o200k_lower(t, n, i)) ||
        (prefix && (e = o200k_upper(t, n, i + k0))) || (e = o200k_upper(t, n, i)))
        return e + (e < n && t[e] == '\'' ? contraction(t, n, e, sc->contractions) : 0) - i;
    return after_words(sc, t, n, i, f0, "\r\n/");
}

/* One word of the indic pattern from j: a letter of the first listed script
 * it belongs to (or of none, or a mark: the "other" word), then letters of
 * that script, marks, ZWNJ and ZWJ; Latin words take a contraction. The end
 * of the word, 0 when no word starts at j. */
static size_t indic_word(const char *t, size_t n, size_t j)
{
    if (j >= n)
        return 0;
    size_t k;
    unsigned kd = kind_at(t, j, &k);
    uint32_t script;
    if (kind_flags[kd] & LIPI_UC_L)
        script = kind_scripts[kd] & -kind_scripts[kd]; /* 0: the other word */
    else if (kind_flags[kd] & LIPI_UC_M)
        script = 0;
    else
        return 0;
    size_t e = j + k;
    while (e < n) {
        kd = kind_at(t, e, &k);
        unsigned f = kind_flags[kd];
        if (!(f & (LIPI_UC_M | LIPI_UC_ZW)) &&
            !((f & LIPI_UC_L) && (script ? (kind_scripts[kd] & script) != 0 : kind_scripts[kd] == 0)))
            break;
        e += k;
    }
    if (script == SCRIPT_LATIN)
        e += contraction(t, n, e, CONTR_CASELESS);
    return e;
}

/* `(?:\p{N}\p{M}*){1,3}` from j. */
static size_t indic_number(const char *t, size_t n, size_t j)
{
    for (int c = 0; c < 3; c++) {
        size_t k;
        if (!(flags_at(t, n, j, &k) & LIPI_UC_N))
            break;
        j = run_any(t, n, j + k, LIPI_UC_M);
    }
    return j;
}

/*  ?WORD|(?:\p{N}\p{M}*){1,3}| ?[^\s\p{L}\p{N}\p{M}][^\s\p{L}\p{N}]*[\r\n]*
 * |\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t scan_indic(const lipi_scanner *sc, const char *t, size_t n, size_t i)
{
    size_t k, e;
    bool space = t[i] == ' ' && i + 1 < n;
    if ((space && (e = indic_word(t, n, i + 1))) || (e = indic_word(t, n, i)))
        return e - i;
    if (space && sc->number_space && (flags_at(t, n, i + 1, &k) & LIPI_UC_N))
        return indic_number(t, n, i + 1) - i;
    if (flags_at(t, n, i, &k) & LIPI_UC_N)
        return indic_number(t, n, i) - i;
    size_t j = space ? i + 1 : i;
    if (!(flags_at(t, n, j, &k) & (LIPI_UC_WS | LIPI_UC_L | LIPI_UC_N | LIPI_UC_M)))
        return run_bytes(t, n, run_none(t, n, j, LIPI_UC_WS | LIPI_UC_L | LIPI_UC_N), "\r\n") - i;
    return ws_tail(t, n, i, true, true);
}

size_t lipi_scan_match(const lipi_scanner *sc, const char *t, size_t n, size_t i)
{
    switch (sc->family) {
    case FAM_GPT2: return scan_gpt2(sc, t, n, i);
    case FAM_CL100K: return scan_cl100k(sc, t, n, i);
    case FAM_O200K: return scan_o200k(sc, t, n, i);
    case FAM_INDIC: return scan_indic(sc, t, n, i);
    }
    return 0;
}

/* Hand-written scanners for the split patterns lipi knows (lipi_split_pattern):
 * the same matches as PCRE2 running the pattern, without the regex engine.
 *
 *   const lipi_scanner *sc = lipi_scanner_find(pattern, strlen(pattern));
 *   if (sc)   // NULL: not a known pattern, use the regex
 *       for (size_t i = 0; i < n;) {
 *           size_t m = lipi_scan_match(sc, t, n, i);   // 0: no match at i
 *           ...
 *       }
 *
 * Character classes come from one table built on first use from ICU (general
 * category, White_Space, Script_Extensions), clipped to the Unicode version
 * of the PCRE2 library, so that both paths agree code point for code point
 * (tests/test_scanner.c checks every code point against PCRE2). */
#ifndef LIPI_SCANNER_IMPL_H
#define LIPI_SCANNER_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Class bits of a code point. A: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
 * B: [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k's upper and lower word parts). */
enum {
    LIPI_UC_L = 1,
    LIPI_UC_N = 2,
    LIPI_UC_M = 4,
    LIPI_UC_WS = 8, /* White_Space, the \s of Oniguruma and of lipi's regexes */
    LIPI_UC_A = 16,
    LIPI_UC_B = 32,
    LIPI_UC_CRLF = 64,
    LIPI_UC_ZW = 128, /* ZWNJ, ZWJ */
};

/* The scripts of the indic pattern's word alternatives, in its order; bit k
 * of lipi_uc_scripts() is script k. JA stands for Han, Hiragana and
 * Katakana together (one alternative). */
#define LIPI_UC_N_SCRIPTS 27

#include "tokenizer/tokenizer_layout.h" /* lipi_scanner, lipi_scan_match */

/* The scanner for pattern[0..len) when it is byte for byte one that lipi
 * knows, else NULL. Static data; never fails. */
const lipi_scanner *lipi_scanner_find(const char *pattern, size_t len);

/* The class bits (LIPI_UC_*) and the script bits of code point cp
 * (<= U+10FFFF); script bits are only set for letters. */
unsigned lipi_uc_flags(uint32_t cp);
uint32_t lipi_uc_scripts(uint32_t cp);

#endif

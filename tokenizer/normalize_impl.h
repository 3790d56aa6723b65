/* Internal: the normalizer as a tree of Hugging Face normalizer steps, shared
 * by normalize.c (running them) and normalize_json.c (tokenizer.json).
 * Never included by a public header. */
#ifndef LIPI_NORMALIZE_IMPL_H
#define LIPI_NORMALIZE_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/base.h"
#include "tokenizer/tokenizer_layout.h"

/* Step kinds, named after the tokenizer.json "type" they serialize to. */
typedef enum {
    LIPI_NS_SEQUENCE,
    LIPI_NS_NFC,
    LIPI_NS_NFD,
    LIPI_NS_NFKC,
    LIPI_NS_NFKD,
    LIPI_NS_LOWERCASE,
    LIPI_NS_STRIP_ACCENTS,
    LIPI_NS_BERT,
    LIPI_NS_REPLACE,
    LIPI_NS_PREPEND,
    LIPI_NS_STRIP,
    LIPI_NS_PRECOMPILED,
    LIPI_NS_NMT,
    LIPI_NS_BYTELEVEL,
} lipi_ns_kind;

/* BertNormalizer strip_accents: JSON null (follow lowercase), false, true;
 * ABSENT remembers a missing field so the JSON round trip stays exact. */
enum { LIPI_NS_TRI_ABSENT = -2, LIPI_NS_TRI_NULL = -1 };

typedef struct lipi_ns_step {
    lipi_ns_kind kind;
    /* Sequence */
    struct lipi_ns_step *children;
    size_t n_children;
    /* BertNormalizer */
    bool clean_text, handle_chinese_chars, lowercase;
    int strip_accents; /* LIPI_NS_TRI_*, 0 or 1 */
    /* Replace: pattern is {"String": ...} or {"Regex": ...} */
    bool is_regex;
    char *pattern, *content;
    size_t pattern_len, content_len;
    pcre2_code *re;
    /* Prepend */
    char *prepend;
    size_t prepend_len;
    /* Strip */
    bool strip_left, strip_right;
    /* Precompiled: the base64 text as read and the decoded, validated
     * charsmap. longest_match selects SentencePiece's own rule (longest
     * prefix at each position) instead of Hugging Face's grapheme-wise one;
     * it is written as the lipi-only field "lipi_longest_match", which
     * Hugging Face ignores. */
    char *charsmap_b64;
    uint8_t *charsmap;
    size_t charsmap_len;
    bool longest_match;
} lipi_ns_step;

/* Frees what a step owns (recursively), not the step itself. */
void lipi_ns_step_clear(lipi_ns_step *s);

/* Compiles a Replace step's pattern (String: literal; Regex: PCRE2 with UTF
 * and UCP, Oniguruma's \uHHHH accepted). Errors: LIPI_EREGEX naming `jpath`,
 * PCRE2's message and the pattern offset. */
lipi_status lipi_ns_compile_replace(lipi_ns_step *s, const char *jpath, lipi_error *err);

/* Checks the layout of a SentencePiece precompiled charsmap (trie size,
 * UTF-8 replacement pool); every trie index and pool offset is checked again
 * at lookup, so a hostile file cannot make normalization read out of
 * bounds. */
lipi_status lipi_ns_check_charsmap(const uint8_t *blob, size_t len, const char *jpath,
                                   lipi_error *err);

/* Builds a normalizer from a step tree; `root` is stolen (cleared even on
 * error). */
lipi_status lipi_ns_build(lipi_ns_step *root, lipi_normalizer **out, lipi_error *err);

/* The step tree of n (borrowed). */
const lipi_ns_step *lipi_ns_root(const lipi_normalizer *n);

/* Tests: whether n runs SentencePiece's whitespace handling in one pass
 * when no alignment is wanted. */
bool lipi_normalizer_has_spm_ws(const lipi_normalizer *n);

/* Tests: nonzero makes SentencePiece's charsmap walk the trie at every
 * char (no run is skipped by the bitmaps), the plain loop pc_skip must
 * agree with. */
extern int lipi_ns_plain_charsmap_for_tests;

#endif

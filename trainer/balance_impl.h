/* Internal: what the BPE and Unigram trainers need from a lipi_balance
 * (trainer/balance.c) for parity-aware training. Never included by a
 * public header. */
#ifndef LIPI_BALANCE_IMPL_H
#define LIPI_BALANCE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/trainer.h"

/* Language index 0 is "no language": words without a letter of any script
 * (numbers, punctuation) in mixed files. It never has a dev set. */
enum { LIPI_LANG_NONE = 0 };

size_t lipi_balance_n_langs(const lipi_balance *b);

/* The language of a training word: the one that counts it most often (ties:
 * the language first by name); LIPI_LANG_NONE for a word no language counts.
 * Needs lipi_balance_train_counts to have run. */
uint32_t lipi_balance_lang_of(const lipi_balance *b, const char *word, size_t len);

/* Dev words of language `lang` (NULL when it has no dev file) and the
 * number of dev files that were attributed to it. Borrowed. */
const lipi_counts *lipi_balance_dev(const lipi_balance *b, uint32_t lang, size_t *n_files);

/* The cost parity compares for language lang with `tokens` dev tokens:
 * tokens per dev file over the language's target ratio
 * (lipi_balance_set_target); 0 for a language without a dev file. */
double lipi_balance_dev_cost(const lipi_balance *b, uint32_t lang, uint64_t tokens);

/* Sorts the languages that have dev files by cost, the worst first, into
 * order[0..*n): cost[l] / (n_files(l) * target(l)) compared exactly (cost[]
 * is indexed by language; ties go to the lower index). */
void lipi_balance_rank(const lipi_balance *b, const uint64_t *cost, uint32_t *order, size_t *n);

/* Parameters of parity-aware Unigram pruning (lipi_unigram_options). */
typedef struct {
    double exponent; /* weight grows with (cost / cheapest cost)^exponent */
    double mass;     /* ... and with (most tokens / own tokens)^mass */
    double others;   /* weight of the languages without a dev file */
} lipi_prune_params;

/* Loss weights of parity-aware Unigram pruning, fixed point (2^16 = 1),
 * into wt[0..n_langs). tok[l] and chars[l] are the tokens (current Viterbi
 * segmentation) and code points of language l's training words, both
 * weighted by the word counts. A language's estimated dev cost is
 * tok/chars times its dev code points per dev file, over its target
 * (lipi_balance_set_target). A dev language gets weight (T / tok)^mass * c^exponent, T the most tokens of any dev language
 * and c its cost over the cheapest one's: with mass 1 every dev language
 * weighs as much as the biggest, the costlier ones more; at most 2^32
 * (65536 times weight 1). A language without a dev file gets p->others
 * (at least 2^-16), words of no language weight 1. Deterministic: fixed
 * order, no thread sums. */
void lipi_balance_prune_weights(const lipi_balance *b, const uint64_t *tok,
                                const uint64_t *chars, const lipi_prune_params *p,
                                uint64_t *wt);

/* Tracks the dev set's token count per language while BPE merges are
 * learned, without encoding it again after each merge: the dev words are
 * held as symbol ids with an index from pair to the words it occurs in, and
 * a merge rewrites only the words of its pair, everywhere it occurs (as a
 * BPE encoder applies it). */
typedef struct lipi_dev_track lipi_dev_track;

/* Id of the base token for one code point (char units) or one byte (byte
 * units) s[0..len); UINT32_MAX when the alphabet lacks it (it then costs
 * one token per byte, as byte fallback does, and never merges). */
typedef uint32_t (*lipi_unit_id_fn)(void *ctx, const char *s, size_t len);

/* Builds the tracker from b's dev words. LIPI_ENOMEM only. */
lipi_status lipi_dev_track_new(const lipi_balance *b, bool byte_units, lipi_unit_id_fn unit_id,
                               void *ctx, lipi_dev_track **out);
void lipi_dev_track_free(lipi_dev_track *t);

/* Applies the merge x y -> z to the dev words. LIPI_ENOMEM only. */
lipi_status lipi_dev_track_merge(lipi_dev_track *t, uint32_t x, uint32_t y, uint32_t z);

/* Current dev tokens per language (indexed by language, n_langs entries). */
const uint64_t *lipi_dev_track_tokens(const lipi_dev_track *t);

#endif

/* Internal: pieces of the Unigram trainer that its tests reach directly
 * (suffix arrays, one EM step on given pieces). Never included by a public
 * header. */
#ifndef LIPI_UNIGRAM_IMPL_H
#define LIPI_UNIGRAM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/trainer.h"

/* Suffix array of s[0..n) over the alphabet [0, k) (SA-IS): sa[i] is the
 * start of the i-th smallest suffix, a suffix sorting before every longer
 * one it is a prefix of. n must be below INT32_MAX and every symbol in
 * range (LIPI_EINVAL otherwise); LIPI_ENOMEM. */
lipi_status lipi_suffix_array(const int32_t *s, size_t n, int32_t k, int32_t *sa);

/* lcp[i] = length of the longest common prefix of the suffixes sa[i - 1]
 * and sa[i]; lcp[0] = 0 (Kasai). LIPI_ENOMEM. */
lipi_status lipi_lcp_array(const int32_t *s, size_t n, const int32_t *sa, int32_t *lcp);

/* SentencePiece's digamma (asymptotic series after shifting x above 7). */
double lipi_unigram_digamma(double x);

/* A piece with its log probability, for lipi_unigram_em_step. */
typedef struct {
    const char *s;
    size_t len;
    double score;
} lipi_unigram_piece;

/* One E-step over words[0..n_words) with the given pieces: expected[i]
 * (n_pieces entries, the caller's) is the expected number of times piece i
 * is used, summed over the words weighted by their counts, with paths
 * scored by the sum of their pieces' scores and grapheme-guarded lattices
 * as in training (guard = true). *objective is the negative mean log
 * likelihood per word occurrence. The sums are exact to 2^-24 or better and
 * do not depend on `threads`. LIPI_ENOMEM, LIPI_EFORMAT (a word is not
 * UTF-8), LIPI_EICU. */
lipi_status lipi_unigram_em_step(const lipi_unigram_piece *pieces, size_t n_pieces,
                                 const lipi_count_entry *words, size_t n_words, bool guard,
                                 size_t threads, double *expected, double *objective,
                                 lipi_error *err);

/* The M-step on those expectations: pieces with an expected count below
 * 0.5 are dropped (kept[i] = false); the others get
 * score[i] = digamma(expected[i]) - digamma(sum of kept expectations).
 * Returns the number kept. */
size_t lipi_unigram_m_step(const double *expected, size_t n, double *score, bool *kept);

#endif

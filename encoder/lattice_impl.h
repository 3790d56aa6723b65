/* Internal: the Unigram lattice, shared by the Unigram encoder and the
 * Unigram trainer (one Viterbi in the project). Never included by a public
 * header.
 *
 * A lattice is built over one sentence of `len` bytes: each node is a
 * candidate token covering bytes [pos, pos + len) with a score (a log
 * probability). Nodes must be inserted in non-decreasing order of pos; among
 * nodes that start at the same position, insertion order decides ties.
 *
 *   lipi_lattice lat = {0};
 *   lipi_lattice_reset(&lat, sentence_len);
 *   for each start position p (increasing), for each candidate at p:
 *       TRY(lipi_lattice_insert(&lat, p, n, id, score));
 *   TRY(lipi_lattice_viterbi(&lat, &found));   best path: lat.path[0..path_len)
 *   TRY(lipi_lattice_marginals(&lat, marg, &log_z));  for EM
 *   lipi_lattice_free(&lat);
 *
 * When only the best path is wanted (encoding), the nodes need not be
 * stored: lipi_lattice_best_start, then lipi_lattice_offer for each node in
 * the order above, then lipi_lattice_best_end, which leaves the path's nodes
 * (only those) in nodes[] and path[]. Same steps, same result.
 *
 * The Viterbi relaxes nodes in insertion order and replaces a position's best
 * only on a strictly greater score, which is exactly the tie-breaking of
 * SentencePiece's and Hugging Face's optimized Unigram encoders.
 */
#ifndef LIPI_LATTICE_IMPL_H
#define LIPI_LATTICE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef struct {
    uint32_t pos, len; /* bytes [pos, pos + len) of the sentence */
    uint32_t id;       /* token id */
    double score;
} lipi_lattice_node;

typedef struct {
    size_t len;                /* sentence length in bytes */
    bool f32;                  /* Viterbi sums scores in float32 (SentencePiece's
                                  arithmetic), else in double (Hugging Face's) */
    float start;               /* f32: the score the path starts from */
    int64_t f32_unk;           /* f32: id of the unknown piece, -1 none */
    double f32_margin;         /* f32, after the Viterbi: the smallest gap
                                  between two candidates compared (INFINITY
                                  when none were) */
    lipi_lattice_node *nodes;  /* n_nodes, in insertion order */
    size_t n_nodes, nodes_cap;
    uint32_t *path;            /* Viterbi result: node indices, start to end */
    size_t path_len, path_cap;
    /* scratch, len + 1 entries each */
    double *pos_score;
    int64_t *pos_node;
    double *pos_beta;
    lipi_lattice_node *pos_win; /* best_start .. best_end: the best node
                                   ending at each position */
    size_t pos_cap;
} lipi_lattice;

/* Empties the lattice for a sentence of len bytes (keeps memory). */
void lipi_lattice_reset(lipi_lattice *l, size_t len);

/* Adds a node. pos must not be below the previous node's pos and
 * pos + n <= l->len, n > 0 (LIPI_EINVAL otherwise); LIPI_ENOMEM. */
lipi_status lipi_lattice_insert(lipi_lattice *l, size_t pos, size_t n, uint32_t id,
                                double score);

/* Best-scoring segmentation of the whole sentence into nodes; *found is false
 * (and path_len 0) when no chain of nodes covers it. An empty sentence has an
 * empty path. LIPI_ENOMEM. */
lipi_status lipi_lattice_viterbi(lipi_lattice *l, bool *found);

/* The Viterbi without a stored lattice (see the top of this file). offer
 * takes pos <= len - n, n > 0, pos not below the previous offer's (not
 * checked: the encoder's walk gives them so). LIPI_ENOMEM. */
lipi_status lipi_lattice_best_start(lipi_lattice *l);
void lipi_lattice_offer(lipi_lattice *l, size_t pos, size_t n, uint32_t id, double score);
lipi_status lipi_lattice_best_end(lipi_lattice *l, bool *found);

/* Forward-backward over all segmentations: marginal[i] (n_nodes entries, the
 * caller's) is the probability that node i is on the path, with path
 * probabilities proportional to exp(sum of node scores); *log_z is the log of
 * their total (-INFINITY, and all marginals 0, when no path exists).
 * LIPI_ENOMEM. */
lipi_status lipi_lattice_marginals(lipi_lattice *l, double *marginal, double *log_z);

void lipi_lattice_free(lipi_lattice *l);

#endif

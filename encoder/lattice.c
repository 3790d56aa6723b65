/* The Unigram lattice: Viterbi for encoding, forward-backward for training. */
#include "encoder/encoder_impl.h"

#include <math.h>
#include <string.h>

#include "tokenizer/base.h"

void lipi_lattice_reset(lipi_lattice *l, size_t len)
{
    l->len = len;
    l->start_d = 0.0;
    l->n_nodes = 0;
    l->path_len = 0;
}

lipi_status lipi_lattice_insert(lipi_lattice *l, size_t pos, size_t n, uint32_t id, double score)
{
    if (n == 0 || pos > l->len || n > l->len - pos || pos > UINT32_MAX || n > UINT32_MAX)
        return LIPI_EINVAL;
    if (l->n_nodes && pos < l->nodes[l->n_nodes - 1].pos)
        return LIPI_EINVAL;
    if (l->n_nodes == l->nodes_cap) {
        void *p = l->nodes;
        lipi_status st = lipi_grow(&p, &l->nodes_cap, l->n_nodes + 1, sizeof *l->nodes);
        l->nodes = p;
        if (st != LIPI_OK)
            return st;
    }
    l->nodes[l->n_nodes++] = (lipi_lattice_node){(uint32_t)pos, (uint32_t)n, id, score};
    return LIPI_OK;
}

/* Per-position scratch for len + 1 positions. */
static lipi_status pos_scratch(lipi_lattice *l)
{
    size_t need = l->len + 1;
    if (need <= l->pos_cap)
        return LIPI_OK;
    double *s = lipi_reallocarray(l->pos_score, need, sizeof *s);
    if (!s)
        return LIPI_ENOMEM;
    l->pos_score = s;
    int64_t *nd = lipi_reallocarray(l->pos_node, need, sizeof *nd);
    if (!nd)
        return LIPI_ENOMEM;
    l->pos_node = nd;
    double *b = lipi_reallocarray(l->pos_beta, need, sizeof *b);
    if (!b)
        return LIPI_ENOMEM;
    l->pos_beta = b;
    lipi_lattice_node *w = lipi_reallocarray(l->pos_win, need, sizeof *w);
    if (!w)
        return LIPI_ENOMEM;
    l->pos_win = w;
    l->pos_cap = need;
    return LIPI_OK;
}

/* Before the first Viterbi step: pos_node[p] = -1 (unreached) except
 * position 0, reached by the empty path (-2). */
static lipi_status viterbi_start(lipi_lattice *l)
{
    lipi_status st = pos_scratch(l);
    if (st != LIPI_OK)
        return st;
    /* All ones is -1 (two's complement, as C23 requires and every target
     * lipi builds for has); memset beats a loop over short words' arrays. */
    memset(l->pos_node, 0xff, (l->len + 1) * sizeof *l->pos_node);
    l->pos_node[0] = -2;
    l->pos_score[0] = l->f32 ? (double)l->start : l->start_d;
    l->f32_margin = INFINITY;
    return LIPI_OK;
}

lipi_status lipi_lattice_best_start(lipi_lattice *l)
{
    l->n_nodes = 0;
    l->path_len = 0;
    return viterbi_start(l);
}

void lipi_lattice_offer(lipi_lattice *l, size_t pos, size_t n, uint32_t id, double score)
{
    size_t end = pos + n;
    if (l->pos_node[pos] == -1 ||
        !lipi_lattice_relax(l->pos_score, l->pos_node, l->f32, l->f32_unk, &l->f32_margin,
                            l->pos_score[pos], end, id, score))
        return;
    l->pos_node[end] = (int64_t)end; /* reached; its node is pos_win[end] */
    l->pos_win[end] = (lipi_lattice_node){(uint32_t)pos, (uint32_t)n, id, score};
}

lipi_status lipi_lattice_best_end(lipi_lattice *l, bool *found)
{
    return lipi_lattice_best_to(l, l->len, found);
}

lipi_status lipi_lattice_best_to(lipi_lattice *l, size_t len, bool *found)
{
    size_t count = 0;
    *found = false;
    if (l->pos_node[len] == -1)
        return LIPI_OK;
    for (size_t p = len; p > 0; p = l->pos_win[p].pos)
        count++;
    if (count > l->nodes_cap || count > l->path_cap) {
        void *p = l->nodes;
        lipi_status st = lipi_grow(&p, &l->nodes_cap, count, sizeof *l->nodes);
        l->nodes = p;
        if (st != LIPI_OK)
            return st;
        p = l->path;
        st = lipi_grow(&p, &l->path_cap, count, sizeof *l->path);
        l->path = p;
        if (st != LIPI_OK)
            return st;
    }
    for (size_t p = len, k = count; p > 0; p = l->pos_win[p].pos) {
        l->nodes[--k] = l->pos_win[p];
        l->path[k] = (uint32_t)k;
    }
    l->n_nodes = l->path_len = count;
    *found = true;
    return LIPI_OK;
}

lipi_status lipi_lattice_viterbi(lipi_lattice *l, bool *found)
{
    lipi_status st = LIPI_OK;
    size_t len = l->len;
    *found = false;
    l->path_len = 0;
    /* pos_node[p] = best node ending at p. */
    TRY(viterbi_start(l));
    for (size_t i = 0; i < l->n_nodes; i++) {
        const lipi_lattice_node *nd = &l->nodes[i];
        size_t end = (size_t)nd->pos + nd->len;
        if (l->pos_node[nd->pos] != -1 &&
            lipi_lattice_relax(l->pos_score, l->pos_node, l->f32, l->f32_unk, &l->f32_margin,
                               l->pos_score[nd->pos], end, nd->id, nd->score))
            l->pos_node[end] = (int64_t)i;
    }
    if (l->pos_node[len] == -1)
        goto done;
    size_t count = 0;
    for (size_t p = len; p > 0; p = l->nodes[l->pos_node[p]].pos)
        count++;
    if (count > l->path_cap) {
        void *p = l->path;
        st = lipi_grow(&p, &l->path_cap, count, sizeof *l->path);
        l->path = p;
        if (st != LIPI_OK)
            goto done;
    }
    l->path_len = count;
    for (size_t p = len, k = count; p > 0; p = l->nodes[l->pos_node[p]].pos)
        l->path[--k] = (uint32_t)l->pos_node[p];
    *found = true;
done:
    return st;
}

/* log(exp(a) + exp(b)) without overflow; -INFINITY is the empty sum. */
static double log_add(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* Forward-backward with probabilities instead of their logs, which needs
 * no exp/log per addition (the trainer's E-step runs this for every word of
 * the corpus, many times). Node weights are exp(score + c * len): every
 * path covers all the bytes, so the factor e^(c * l->len) is common to all
 * paths and cancels in the marginals, and c (minus the mean score per byte)
 * keeps path products near 1. Returns false, leaving the work to the log
 * domain, when Z falls outside [1e-150, 1e150], where rounding near the
 * ends of the double range could matter. */
static bool marginals_linear(lipi_lattice *l, double *marginal, double *log_z)
{
    size_t len = l->len;
    double *alpha = l->pos_score, *beta = l->pos_beta, c = 0.0;
    if (l->n_nodes == 0 || len == 0)
        return false;
    for (size_t i = 0; i < l->n_nodes; i++)
        c += l->nodes[i].score / l->nodes[i].len;
    c = -c / (double)l->n_nodes;
    for (size_t i = 0; i < l->n_nodes; i++)
        marginal[i] = exp(l->nodes[i].score + c * l->nodes[i].len);
    for (size_t p = 0; p <= len; p++)
        alpha[p] = beta[p] = 0.0;
    alpha[0] = 1.0;
    beta[len] = 1.0;
    for (size_t i = 0; i < l->n_nodes; i++) {
        const lipi_lattice_node *nd = &l->nodes[i];
        alpha[nd->pos + nd->len] += alpha[nd->pos] * marginal[i];
    }
    for (size_t i = l->n_nodes; i-- > 0;) {
        const lipi_lattice_node *nd = &l->nodes[i];
        beta[nd->pos] += marginal[i] * beta[nd->pos + nd->len];
    }
    double z = alpha[len];
    if (!(z > 1e-150 && z < 1e150))
        return false;
    double inv = 1.0 / z;
    for (size_t i = 0; i < l->n_nodes; i++) {
        const lipi_lattice_node *nd = &l->nodes[i];
        marginal[i] = alpha[nd->pos] * marginal[i] * beta[nd->pos + nd->len] * inv;
    }
    *log_z = log(z) - c * (double)len;
    return true;
}

lipi_status lipi_lattice_marginals(lipi_lattice *l, double *marginal, double *log_z)
{
    lipi_status st = LIPI_OK;
    size_t len = l->len;
    double *alpha, *beta;
    TRY(pos_scratch(l));
    if (marginals_linear(l, marginal, log_z))
        goto done;
    alpha = l->pos_score;
    beta = l->pos_beta;
    for (size_t p = 0; p <= len; p++)
        alpha[p] = beta[p] = -INFINITY;
    alpha[0] = 0.0;
    beta[len] = 0.0;
    /* Nodes are ordered by start, so every node ending at p is seen before
     * any node starting at p (forward), and the reverse holds backward. */
    for (size_t i = 0; i < l->n_nodes; i++) {
        const lipi_lattice_node *nd = &l->nodes[i];
        size_t end = (size_t)nd->pos + nd->len;
        alpha[end] = log_add(alpha[end], alpha[nd->pos] + nd->score);
    }
    for (size_t i = l->n_nodes; i-- > 0;) {
        const lipi_lattice_node *nd = &l->nodes[i];
        size_t end = (size_t)nd->pos + nd->len;
        beta[nd->pos] = log_add(beta[nd->pos], nd->score + beta[end]);
    }
    double z = alpha[len];
    *log_z = z;
    for (size_t i = 0; i < l->n_nodes; i++) {
        const lipi_lattice_node *nd = &l->nodes[i];
        size_t end = (size_t)nd->pos + nd->len;
        double a = alpha[nd->pos], b = beta[end];
        marginal[i] = (z == -INFINITY || a == -INFINITY || b == -INFINITY)
                          ? 0.0
                          : exp(a + nd->score + b - z);
    }
done:
    return st;
}

void lipi_lattice_free(lipi_lattice *l)
{
    lipi_free(l->nodes);
    lipi_free(l->path);
    lipi_free(l->pos_score);
    lipi_free(l->pos_node);
    lipi_free(l->pos_beta);
    lipi_free(l->pos_win);
    memset(l, 0, sizeof *l);
}

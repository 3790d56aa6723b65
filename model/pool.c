/* Pooling of packed hidden states into sentence vectors, L2 normalization
 * (sentence-transformers' Pooling and Normalize modules) and the
 * classification heads of *ForSequenceClassification checkpoints. */
#include "model/model_impl.h"

#include <math.h>
#include <string.h>

/* hidden: (T, C) packed, sequence i is rows off[i] .. off[i+1] -> out:
 * (n, k C) with the k flagged poolings side by side in the order cls, max,
 * mean, mean_sqrt_len (as sentence-transformers concatenates them) */
void lipi_pool(const float *hidden, const size_t *off, size_t n, size_t C, unsigned flags,
               float *out)
{
    size_t k = 0;
    for (unsigned b = flags & 15u; b; b &= b - 1)
        k++;
    for (size_t i = 0; i < n; i++) {
        const float *h = hidden + off[i] * C;
        size_t L = off[i + 1] - off[i];
        float *o = out + i * k * C;
        if (flags & LIPI_POOL_CLS) {
            memcpy(o, h, C * sizeof(float));
            o += C;
        }
        if (flags & LIPI_POOL_MAX) {
            memcpy(o, h, C * sizeof(float));
            for (size_t t = 1; t < L; t++)
                for (size_t j = 0; j < C; j++)
                    o[j] = h[t * C + j] > o[j] ? h[t * C + j] : o[j];
            o += C;
        }
        if (flags & (LIPI_POOL_MEAN | LIPI_POOL_MEAN_SQRT_LEN)) {
            for (size_t j = 0; j < C; j++) {
                double sum = 0;
                for (size_t t = 0; t < L; t++)
                    sum += h[t * C + j];
                if (flags & LIPI_POOL_MEAN)
                    o[j] = (float)(sum / (double)L);
                if (flags & LIPI_POOL_MEAN_SQRT_LEN)
                    o[j + (flags & LIPI_POOL_MEAN ? C : 0)] = (float)(sum / sqrt((double)L));
            }
        }
    }
}

/* x: (n, D) in place: each row / max(||row||, 1e-12), like F.normalize */
void lipi_vectors_normalize(float *x, size_t n, size_t D)
{
    for (size_t i = 0; i < n; i++) {
        float *r = x + i * D;
        double ss = 0;
        for (size_t j = 0; j < D; j++)
            ss += (double)r[j] * r[j];
        double norm = sqrt(ss);
        if (norm < 1e-12)
            norm = 1e-12;
        for (size_t j = 0; j < D; j++)
            r[j] = (float)(r[j] / norm);
    }
}

/* x: (n, in) -> y: (n, out) = act(x W^T + b), act Tanh or Identity */
void lipi_dense_apply(const lipi_dense *d, const float *x, size_t n, float *y)
{
    for (size_t i = 0; i < n; i++)
        for (size_t o = 0; o < d->out; o++) {
            double s = d->bias ? d->b[o] : 0;
            const float *w = d->w + o * d->in, *xi = x + i * d->in;
            for (size_t k = 0; k < d->in; k++)
                s += (double)w[k] * xi[k];
            y[i * d->out + o] = d->tanh ? (float)tanh(s) : (float)s;
        }
}

/* y: (N) = w (N, K) . x (K) + b */
static void matvec(const float *w, const float *b, const float *x, size_t N, size_t K, float *y)
{
    for (size_t i = 0; i < N; i++) {
        double s = b[i];
        for (size_t k = 0; k < K; k++)
            s += (double)w[i * K + k] * x[k];
        y[i] = (float)s;
    }
}

/* Each head reads the first token (<s> / [CLS]):
 *   BERT, ALBERT: tanh(pooler(h0)) -> classifier
 *   RoBERTa:      tanh(classifier.dense(h0)) -> classifier.out_proj
 *   DistilBERT:   relu(pre_classifier(h0)) -> classifier
 * hidden: (T, C), z: (C) scratch -> logits: (n, labels) */
void lipi_head_logits(const lipi_model *m, const float *hidden, const size_t *off, size_t n,
                      float *z, float *logits)
{
    size_t C = m->cfg.hidden, NL = m->cfg.num_labels;
    for (size_t i = 0; i < n; i++) {
        const float *h0 = hidden + off[i] * C;
        matvec(m->head1_w, m->head1_b, h0, C, C, z);
        for (size_t j = 0; j < C; j++)
            z[j] = m->head == LIPI_HEAD_DISTILBERT ? (z[j] > 0 ? z[j] : 0) : tanhf(z[j]);
        matvec(m->head2_w, m->head2_b, z, NL, C, logits + i * NL);
    }
}

void lipi_token_weights(const float *hidden, size_t T, size_t C, const float *sw, float sb,
                        float *w)
{
    for (size_t t = 0; t < T; t++) {
        const float *h = hidden + t * C;
        float z = 0;
        for (size_t c = 0; c < C; c++)
            z += h[c] * sw[c];
        z += sb;
        w[t] = z > 0 ? z : 0;
    }
}

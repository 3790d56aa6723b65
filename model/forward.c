/* The transformer forward pass: kernels, the session's thread pool and
 * the layer loop.
 *
 * A batch of n sequences is packed: the T = sum(len) real tokens form one
 * (T, C) matrix, so every projection and FFN is one GEMM over real tokens
 * only, and attention runs per (sequence, head) on its own L x L scores.
 * That gives exactly what Hugging Face computes for the unpadded tokens of
 * a padded batch, since masked keys there get probability zero.
 *
 * A batch of short sequences (the common case: queries, titles) is cut
 * into groups of whole sequences, and each group's whole forward pass is
 * one task on a one-thread "lane" session: two threads then meet once per
 * batch instead of at every GEMM, LayerNorm and attention step, whose
 * wake-ups cost more than the small GEMMs of short sentences gain.
 *
 * Determinism: work is cut into tasks whose shapes depend on the problem
 * only (never on the thread count), each output element belongs to one
 * task, and a task computes the same way whoever runs it. So 1 and N
 * threads give bit-identical results. */
#include "model/model_impl.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* GEMM tiles: at most rows x columns of the output per task; the actual
 * tile shape depends on the problem shape only (see choose_tiles). Each
 * tile is one oneDNN call, which packs its panels again: big tiles waste
 * less (measured: 256 x 256 tiles ran ~15% below one whole-matrix call,
 * 512 x 768 ~5%; int8 gained ~5% from 256 x 512 tiles to these too). */
#define TILE_M 512
#define TILE_N 1024
/* Rows per task for row-wise kernels (embeddings, LayerNorm). */
#define ROWS_PER_TASK 64
/* The FFN runs over blocks of this many tokens (a multiple of TILE_M), and
 * the attention over groups of whole sequences of about QKV_ROWS tokens, so
 * their wide intermediate matrices need not hold the whole batch. Both
 * (rows, 3C) and (rows, I) are then 1024 rows, the one scratch matrix that
 * grows with the model's width: it keeps a small model's peak RSS within
 * its weights + 20% (MiniLM-L6 with 119k words, 4,096-token batches). */
#define FFN_ROWS 1024
#define QKV_ROWS 1024
/* A batch of short sequences runs group by group of whole sequences, each
 * group's whole forward pass one task on a lane (a one-thread session of
 * the same model): one parallel region per batch instead of ten per layer,
 * whose wake-ups cost two threads more than the small GEMMs of short
 * sentences gain. Groups of about GROUP_ROWS tokens, an even number of them
 * so two threads get equal shares, at least GROUP_MIN tokens each. */
#define GROUP_ROWS 384
#define GROUP_MIN 16

/* ======================================================================== */
/* Element-wise math that vectorizes (no libm calls in the loops)            */
/* ======================================================================== */

/* exp(x) for x in float range, ~2 ulp (Cephes' polynomial after reducing
 * by n * ln 2); inputs below -87.3 give ~1e-38 instead of underflowing. */
static inline float vexp(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    float fn = x * 1.44269504088896341f;
    fn = (fn + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    /* NaN (from NaN weights in a checkpoint) stays NaN through y; the
     * exponent must not convert it to int. */
    int32_t e = (int32_t)(fn == fn ? fn : 0.0f) + 127;
    uint32_t bits = (uint32_t)e << 23;
    float s;
    memcpy(&s, &bits, 4);
    return y * s;
}

/* erf(x), absolute error below 5e-7 (rational approximation on [-4, 4];
 * outside, erf is 1 to float precision). */
static inline float verf(float x)
{
    x = x < -4.0f ? -4.0f : x;
    x = x > 4.0f ? 4.0f : x;
    float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    p = p * x;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return p / q;
}

static inline float vtanh(float y)
{
    return 1.0f - 2.0f / (vexp(2.0f * y) + 1.0f);
}

/* ======================================================================== */
/* Kernels                                                                   */
/* ======================================================================== */

/* x: (T, C) in place, per row: (x - mean) / sqrt(var + eps) * w + b */
LIPI_CLONES
void lipi_layernorm(float *x, size_t T, size_t C, const float *w, const float *b, float eps)
{
    for (size_t t = 0; t < T; t++) {
        float *r = x + t * C;
        float acc[16] = {0};
        size_t i = 0;
        for (; i + 16 <= C; i += 16)
            for (int l = 0; l < 16; l++)
                acc[l] += r[i + l];
        float sum = 0;
        for (int l = 0; l < 16; l++)
            sum += acc[l];
        for (; i < C; i++)
            sum += r[i];
        float mean = sum / (float)C;
        float vacc[16] = {0};
        for (i = 0; i + 16 <= C; i += 16)
            for (int l = 0; l < 16; l++) {
                float d = r[i + l] - mean;
                vacc[l] += d * d;
            }
        float var = 0;
        for (int l = 0; l < 16; l++)
            var += vacc[l];
        for (; i < C; i++)
            var += (r[i] - mean) * (r[i] - mean);
        var /= (float)C;
        float inv = 1.0f / sqrtf(var + eps);
        for (i = 0; i < C; i++)
            r[i] = (r[i] - mean) * inv * w[i] + b[i];
    }
}

void lipi_layernorm_ref(float *x, size_t T, size_t C, const float *w, const float *b,
                        float eps)
{
    for (size_t t = 0; t < T; t++) {
        float *r = x + t * C;
        double mean = 0, var = 0;
        for (size_t i = 0; i < C; i++)
            mean += r[i];
        mean /= (double)C;
        for (size_t i = 0; i < C; i++)
            var += (r[i] - mean) * (r[i] - mean);
        var /= (double)C;
        double inv = 1.0 / sqrt(var + eps);
        for (size_t i = 0; i < C; i++)
            r[i] = (float)((r[i] - mean) * inv * w[i] + b[i]);
    }
}

/* x: (L) in place: softmax(x * scale), scale > 0 */
LIPI_CLONES
void lipi_softmax(float *x, size_t L, float scale)
{
    float mx[16];
    for (int l = 0; l < 16; l++)
        mx[l] = x[0];
    size_t i = 0;
    for (; i + 16 <= L; i += 16)
        for (int l = 0; l < 16; l++)
            mx[l] = x[i + l] > mx[l] ? x[i + l] : mx[l];
    float m = mx[0];
    for (int l = 1; l < 16; l++)
        m = mx[l] > m ? mx[l] : m;
    for (; i < L; i++)
        m = x[i] > m ? x[i] : m;
    float acc[16] = {0};
    for (i = 0; i + 16 <= L; i += 16)
        for (int l = 0; l < 16; l++) {
            float e = vexp((x[i + l] - m) * scale);
            x[i + l] = e;
            acc[l] += e;
        }
    float sum = 0;
    for (int l = 0; l < 16; l++)
        sum += acc[l];
    for (; i < L; i++) {
        x[i] = vexp((x[i] - m) * scale);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (i = 0; i < L; i++)
        x[i] *= inv;
}

void lipi_softmax_ref(float *x, size_t L, float scale)
{
    double m = x[0], sum = 0;
    for (size_t i = 1; i < L; i++)
        m = x[i] > m ? x[i] : m;
    for (size_t i = 0; i < L; i++) {
        double e = exp(((double)x[i] - m) * scale);
        x[i] = (float)e;
        sum += e;
    }
    for (size_t i = 0; i < L; i++)
        x[i] = (float)(x[i] / sum);
}

/* MPNetEncoder.relative_position_bucket with num_buckets 32, max_distance
 * 128. n = query - key position; HF computes the log in float32, but the
 * double form gives the same buckets for every |n| below 200,000 (checked
 * against torch when the fixture was made; the test compares 1,100). */
size_t lipi_mpnet_bucket(long rel)
{
    const long half = LIPI_MPNET_BUCKETS / 2, exact = half / 2;
    long n = -rel;
    size_t ret = n < 0 ? (size_t)half : 0;
    n = n < 0 ? -n : n;
    if (n < exact)
        return ret + (size_t)n;
    long v = exact + (long)(log((double)n / (double)exact) /
                            log((double)LIPI_MPNET_MAX_DISTANCE / (double)exact) *
                            (double)(half - exact));
    return ret + (size_t)(v < half - 1 ? v : half - 1);
}

/* x: (L, L) in place: x[i][j] = x[i][j] * scale + rb[j - i] */
LIPI_CLONES
void lipi_attn_rel_bias(float *x, size_t L, float scale, const float *rb)
{
    for (size_t i = 0; i < L; i++) {
        float *r = x + i * L;
        const float *b = rb - (ptrdiff_t)i; /* b[j] = rb[j - i] */
        for (size_t j = 0; j < L; j++)
            r[j] = r[j] * scale + b[j];
    }
}

void lipi_attn_rel_bias_ref(float *x, size_t L, float scale, const float *table, size_t H,
                            size_t h)
{
    for (size_t i = 0; i < L; i++)
        for (size_t j = 0; j < L; j++) {
            size_t b = lipi_mpnet_bucket((long)j - (long)i);
            x[i * L + j] = x[i * L + j] * scale + table[b * H + h];
        }
}

/* x: (T, N) with row stride ldx, in place: act(x + bias), then + res
 * (T, N) with row stride ldr when res is not NULL */
/* r: (N) in place: act(r + bias) (+ res) */
static inline void bias_act_row(float *r, size_t N, const float *bias, int act,
                                const float *res)
{
    switch (act) {
    case LIPI_ACT_GELU:
        for (size_t j = 0; j < N; j++) {
            float v = r[j] + bias[j];
            r[j] = 0.5f * v * (1.0f + verf(v * 0.70710678118654752f));
        }
        break;
    case LIPI_ACT_GELU_TANH:
        for (size_t j = 0; j < N; j++) {
            float v = r[j] + bias[j];
            float y = 0.79788456080286536f * (v + 0.044715f * v * v * v);
            r[j] = 0.5f * v * (1.0f + vtanh(y));
        }
        break;
    case LIPI_ACT_RELU:
        for (size_t j = 0; j < N; j++) {
            float v = r[j] + bias[j];
            r[j] = v > 0 ? v : 0;
        }
        break;
    default:
        for (size_t j = 0; j < N; j++)
            r[j] += bias[j];
        break;
    }
    if (res)
        for (size_t j = 0; j < N; j++)
            r[j] += res[j];
}

/* x: (T, N) with row stride ldx, in place: act(x + bias), then + res
 * (T, N) with row stride ldr when res is not NULL */
LIPI_CLONES
void lipi_bias_act(float *x, size_t T, size_t N, size_t ldx, const float *bias, int act,
                   const float *res, size_t ldr)
{
    for (size_t t = 0; t < T; t++)
        bias_act_row(x + t * ldx, N, bias, act, res ? res + t * ldr : NULL);
}

void lipi_bias_act_ref(float *x, size_t T, size_t N, size_t ldx, const float *bias, int act,
                       const float *res, size_t ldr)
{
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < N; j++) {
            double v = (double)x[t * ldx + j] + bias[j];
            if (act == LIPI_ACT_GELU)
                v = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
            else if (act == LIPI_ACT_GELU_TANH)
                v = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
            else if (act == LIPI_ACT_RELU)
                v = v > 0 ? v : 0;
            if (res)
                v += res[t * ldr + j];
            x[t * ldx + j] = (float)v;
        }
}

/* x: (T, 2I) -> out: (T, I) = act(x[:, :I]) * x[:, I:], act gelu or relu */
LIPI_CLONES
void lipi_glu(const float *x, size_t T, size_t I, int act, float *out)
{
    for (size_t t = 0; t < T; t++) {
        const float *g = x + t * 2 * I, *u = g + I;
        float *o = out + t * I;
        if (act == LIPI_ACT_GELU)
            for (size_t j = 0; j < I; j++)
                o[j] = 0.5f * g[j] * (1.0f + verf(g[j] * 0.70710678118654752f)) * u[j];
        else if (act == LIPI_ACT_GELU_TANH)
            for (size_t j = 0; j < I; j++) {
                float v = g[j], y = 0.79788456080286536f * (v + 0.044715f * v * v * v);
                o[j] = 0.5f * v * (1.0f + vtanh(y)) * u[j];
            }
        else if (act == LIPI_ACT_SILU)
            for (size_t j = 0; j < I; j++)
                o[j] = g[j] / (1.0f + vexp(-g[j])) * u[j];
        else
            for (size_t j = 0; j < I; j++)
                o[j] = (g[j] > 0 ? g[j] : 0) * u[j];
    }
}

void lipi_glu_ref(const float *x, size_t T, size_t I, int act, float *out)
{
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < I; j++) {
            double g = x[t * 2 * I + j], u = x[t * 2 * I + I + j];
            if (act == LIPI_ACT_GELU)
                g = 0.5 * g * (1.0 + erf(g / sqrt(2.0)));
            else if (act == LIPI_ACT_GELU_TANH)
                g = 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
            else if (act == LIPI_ACT_SILU)
                g = g / (1.0 + exp(-g));
            else
                g = g > 0 ? g : 0;
            out[t * I + j] = (float)(g * u);
        }
}

/* x: (H, D) in place, per head: the rotate_half form of RoPE with
 * cos, sin: (D/2) (the second halves of torch's cat((freqs, freqs)) are the
 * same values) */
LIPI_CLONES
void lipi_rope(float *x, size_t H, size_t D, const float *cos, const float *sin)
{
    size_t half = D / 2;
    for (size_t h = 0; h < H; h++) {
        float *a = x + h * D, *b = a + half;
        for (size_t i = 0; i < half; i++) {
            float x1 = a[i], x2 = b[i];
            a[i] = x1 * cos[i] - x2 * sin[i];
            b[i] = x2 * cos[i] + x1 * sin[i];
        }
    }
}

void lipi_attention_plain(lipi_gemm_kind g, size_t L, size_t D, const float *q, const float *k,
                          const float *v, size_t ld, float scale, const float *rb,
                          size_t window, float *S, float *out, size_t ldo)
{
    lipi_sgemm_nt(g, L, L, D, q, ld, k, ld, S, L);
    if (rb) {
        /* MPNet, ALiBi: scores / sqrt(D) + the head's bias by relative position */
        lipi_attn_rel_bias(S, L, scale, rb);
        for (size_t i = 0; i < L; i++)
            lipi_softmax(S + i * L, L, 1.0f);
    } else if (window < L - 1) {
        /* A local layer: the keys outside the window get probability 0, as
         * ModernBERT's finfo.min mask gives them. */
        for (size_t i = 0; i < L; i++) {
            size_t lo = i > window ? i - window : 0;
            size_t hi = i + window + 1 < L ? i + window + 1 : L;
            float *r = S + i * L;
            memset(r, 0, lo * sizeof(float));
            lipi_softmax(r + lo, hi - lo, scale);
            memset(r + hi, 0, (L - hi) * sizeof(float));
        }
    } else {
        for (size_t i = 0; i < L; i++)
            lipi_softmax(S + i * L, L, scale);
    }
    lipi_sgemm_nn(g, L, D, L, S, L, v, ld, out, ldo);
}

/* row: (n) scores of one query against keys k0 .. k0 + n - 1, in place:
 * the window's keys a .. b - 1 become exp(x * scale + rb - m) with m the
 * new running max (returned), the others 0; *sum gets their sum. */
LIPI_CLONES
static float online_row(float *row, size_t n, size_t a, size_t b, float scale, const float *rb,
                        float m, float *sum)
{
    for (size_t c = a; c < b; c++) {
        float x = row[c] * scale + (rb ? rb[c] : 0.0f);
        row[c] = x;
        m = x > m ? x : m;
    }
    float sm = 0;
    memset(row, 0, a * sizeof(float));
    for (size_t c = a; c < b; c++) {
        float e = vexp(row[c] - m);
        row[c] = e;
        sm += e;
    }
    memset(row + b, 0, (n - b) * sizeof(float));
    *sum = sm;
    return m;
}

void lipi_attention_tiled(lipi_gemm_kind g, size_t L, size_t D, size_t i0, size_t nq,
                          const float *q, const float *k, const float *v, size_t ld,
                          float scale, const float *rb, size_t window, float *work, float *out,
                          size_t ldo)
{
    const size_t TK = LIPI_ATT_TK;
    float *S = work;                         /* (nq, nk) of one key tile */
    float *acc = S + LIPI_ATT_TQ * TK;       /* (nq, D) unnormalized output */
    float *pv = acc + LIPI_ATT_TQ * D;       /* (nq, D) one tile's P V */
    float *mx = pv + LIPI_ATT_TQ * D, *sum = mx + LIPI_ATT_TQ, *corr = sum + LIPI_ATT_TQ;
    bool local = window < L;
    for (size_t r = 0; r < nq; r++) {
        mx[r] = -INFINITY;
        sum[r] = 0;
    }
    memset(acc, 0, nq * D * sizeof(float));
    /* Keys any of the block's queries sees. */
    size_t k_lo = local && i0 > window ? i0 - window : 0;
    size_t k_hi = local && i0 + nq + window < L ? i0 + nq + window : L;
    for (size_t k0 = k_lo; k0 < k_hi; k0 += TK) {
        size_t nk = k_hi - k0 < TK ? k_hi - k0 : TK;
        lipi_sgemm_nt(g, nq, nk, D, q + i0 * ld, ld, k + k0 * ld, ld, S, nk);
        for (size_t r = 0; r < nq; r++) {
            size_t i = i0 + r, a = 0, b = nk;
            if (local) { /* this row's window inside the tile: keys k0 + a .. k0 + b - 1 */
                size_t lo = i > window ? i - window : 0;
                size_t hi = i + window + 1 < L ? i + window + 1 : L;
                a = lo > k0 ? (lo - k0 < nk ? lo - k0 : nk) : 0;
                b = hi > k0 ? (hi - k0 < nk ? hi - k0 : nk) : 0;
                b = b < a ? a : b;
            }
            float s_tile = 0;
            const float *rbi = rb ? rb + (ptrdiff_t)k0 - (ptrdiff_t)i : NULL;
            float m = online_row(S + r * nk, nk, a, b, scale, rbi, mx[r], &s_tile);
            /* rescale what earlier tiles summed to the new max */
            float cr = mx[r] == -INFINITY ? 0.0f : vexp(mx[r] - m);
            corr[r] = a < b ? cr : 1.0f;
            if (a < b) {
                sum[r] = sum[r] * cr + s_tile;
                mx[r] = m;
            }
        }
        lipi_sgemm_nn(g, nq, D, nk, S, nk, v + k0 * ld, ld, pv, D);
        for (size_t r = 0; r < nq; r++)
            for (size_t d = 0; d < D; d++)
                acc[r * D + d] = acc[r * D + d] * corr[r] + pv[r * D + d];
    }
    for (size_t r = 0; r < nq; r++) {
        float inv = 1.0f / sum[r];
        float *o = out + (i0 + r) * ldo;
        for (size_t d = 0; d < D; d++)
            o[d] = acc[r * D + d] * inv;
    }
}

/* x: (K) -> q: (K) u8 = round(x / scale) + 128 with scale = max |x| / 127 */
LIPI_CLONES
void lipi_quantize_row(const float *x, size_t K, uint8_t *q, float *scale)
{
    /* max |x| on the bits: the order of non-negative floats is that of
     * their bits as integers, and an integer maximum vectorizes (a float
     * one, for its NaN and -0 rules, did not: this row's scalar loop was
     * 18% of an INT8 forward pass). A NaN (bits above infinity's) is
     * skipped, as a float comparison skips it: a second, plain pass. */
    uint32_t mb = 0;
    for (size_t k = 0; k < K; k++) {
        uint32_t b;
        memcpy(&b, x + k, sizeof b);
        b &= 0x7fffffffu;
        mb = b > mb ? b : mb;
    }
    float amax;
    memcpy(&amax, &mb, sizeof amax);
    if (mb > 0x7f800000u) {
        amax = 0;
        for (size_t k = 0; k < K; k++) {
            float a = x[k] < 0 ? -x[k] : x[k];
            amax = a > amax ? a : amax;
        }
    }
    float sc = amax > 0 ? amax / 127.0f : 1.0f, inv = 1.0f / sc;
    /* |x * inv| <= 127, so adding and subtracting 1.5 * 2^23 rounds to the
     * nearest integer (ties to even, like rintf) in a form that vectorizes. */
    for (size_t k = 0; k < K; k++) {
        float r = (x[k] * inv + 12582912.0f) - 12582912.0f;
        q[k] = (uint8_t)((int32_t)r + 128);
    }
    *scale = sc;
}

/* acc: (M, N) int32 -> out: (M, N) with row stride ldo =
 * act(acc * as[m] * ws[n] + bias[n]) (+ res (M, N) with row stride ldr),
 * row by row so each row is finished while it is in L1 */
LIPI_CLONES
void lipi_dequantize(const int32_t *acc, size_t M, size_t N, const float *as, const float *ws,
                     const float *bias, int act, const float *res, size_t ldr, float *out,
                     size_t ldo)
{
    for (size_t i = 0; i < M; i++) {
        float *o = out + i * ldo, a = as[i];
        const int32_t *q = acc + i * N;
        for (size_t j = 0; j < N; j++)
            o[j] = (float)q[j] * a * ws[j];
        bias_act_row(o, N, bias, act, res ? res + i * ldr : NULL);
    }
}

/* ======================================================================== */
/* Session: worker threads and scratch                                      */
/* ======================================================================== */

typedef void (*task_fn)(void *ctx, size_t task, size_t worker);

struct lipi_model_session {
    const lipi_model *m;
    lipi_gemm_kind gemm;
    size_t nthreads;       /* caller + workers */
    lipi_thread_pool *pool; /* kept across calls: a forward pass runs one
                               parallel region per GEMM */
    /* scratch, grown on demand; cap_* count elements */
    float *x, *tmp, *att;                  /* (T, C) each */
    float *big;     /* the qkv of one group of sequences, then the FFN's inner
                       activations of one block of rows; ALBERT's (T, E)
                       embeddings when E > C */
    float *scores;                         /* nthreads x (Lp, Lp): plain attention of
                                              sequences up to Lp tokens */
    size_t score_stride;                   /* Lp * Lp */
    float *tiles;                          /* nthreads x LIPI_ATT_WORK(D): tiled attention */
    size_t *units;                         /* n + 1: attention tasks before each sequence
                                              of a group */
    lipi_attn_kind attn;
    uint32_t *tok_id, *tok_type, *tok_pos; /* (T) */
    size_t *off;                           /* n + 1 */
    size_t rows;                           /* T of the running batch */
    uint8_t *aq;                           /* int8: quantized GEMM input + 128 */
    float *as;                             /* int8: (T) activation scales */
    int32_t *acc;                          /* int8: nthreads x (TILE_M, TILE_N) */
    size_t cap_x, cap_tmp, cap_att, cap_big, cap_scores, cap_id, cap_type, cap_pos, cap_off;
    size_t cap_aq, cap_as, cap_acc, cap_tiles, cap_units;
    size_t lmax;                           /* longest sequence of the running batch */
    bool lane;                             /* a lane of another session: never groups */
    bool whole;                            /* lipi_model_session_set_grouping(false) */
    size_t last_groups;                    /* G of the last batch, 0: run whole */
    lipi_model_session **lanes;            /* nthreads lanes, made on first use */
    size_t *groups;                        /* G + 1: first sequence of each group */
    size_t cap_groups;
};

typedef struct {
    task_fn fn;
    void *ctx;
} task_call;

/* The kernels cannot fail; the pool's task type can. oneDNN's OpenMP team
 * is pinned to one thread once per pool thread, as the tiles are the
 * parallelism. */
static lipi_status call_task(void *p, size_t task, size_t worker, lipi_error *err)
{
    static _Thread_local bool entered;
    const task_call *c = p;
    if (worker != 0 && !entered) { /* worker 0 is the caller: forward pins it */
        lipi_gemm_thread_enter();
        entered = true;
    }
    c->fn(c->ctx, task, worker);
    return LIPI_OK;
}

/* Runs fn(ctx, 0..ntasks-1, worker) on the session's threads and returns
 * when all tasks are finished. */
static void parallel(lipi_model_session *s, task_fn fn, void *ctx, size_t ntasks)
{
    if (!s->pool || ntasks <= 1) {
        for (size_t t = 0; t < ntasks; t++)
            fn(ctx, t, 0);
        return;
    }
    task_call c = {fn, ctx};
    /* Task counts here are tiles and rows, far below the pool's limit. */
    lipi_status st = lipi_thread_pool_run(s->pool, ntasks, call_task, &c, NULL);
    LIPI_ASSERT(st == LIPI_OK);
}

static void free_scratch(lipi_model_session *s)
{
    void *p[] = {s->x,       s->tmp,     s->att,     s->big, s->scores, s->tok_id, s->tok_type,
                 s->tok_pos, s->off,     s->aq,      s->as,  s->acc,    s->tiles,  s->units};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        lipi_free(p[i]);
}

void lipi_model_session_free(lipi_model_session *s)
{
    if (!s)
        return;
    lipi_thread_pool_free(s->pool);
    free_scratch(s);
    for (size_t i = 0; s->lanes && i < s->nthreads; i++)
        lipi_model_session_free(s->lanes[i]);
    lipi_free(s->lanes);
    lipi_free(s->groups);
    lipi_free(s);
}

lipi_status lipi_model_session_new(const lipi_model *m, size_t threads,
                                   lipi_model_session **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    *out = NULL;
    if (threads > 1024)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "threads: expected at most 1024, found %zu", threads);
    lipi_model_session *s = lipi_calloc(1, sizeof *s);
    if (!s)
        goto nomem;
    s->m = m;
    s->gemm = LIPI_GEMM_AUTO;
    s->nthreads = threads ? threads : 1;
    if (s->nthreads > 1) {
        st = lipi_thread_pool_new(s->nthreads, &s->pool, err);
        if (st != LIPI_OK) {
            lipi_model_session_free(s);
            return st;
        }
    }
    *out = s;
    return LIPI_OK;
nomem:
    lipi_model_session_free(s);
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
}

void lipi_model_session_set_gemm(lipi_model_session *s, lipi_gemm_kind k)
{
    s->gemm = k;
}

void lipi_model_session_set_attention(lipi_model_session *s, lipi_attn_kind k)
{
    s->attn = k;
}

void lipi_model_session_set_grouping(lipi_model_session *s, bool on)
{
    s->whole = !on;
}

size_t lipi_model_session_last_groups(const lipi_model_session *s)
{
    return s->last_groups;
}

/* Whether a sequence of L tokens attends tile by tile (in layers with
 * keys |j - i| <= window). Depends on the shape only, never on threads. */
static bool attn_tiled(const lipi_model_session *s, size_t L, size_t window)
{
    if (s->attn != LIPI_ATTN_AUTO)
        return s->attn == LIPI_ATTN_TILED;
    return L > LIPI_ATT_PLAIN_MAX || (window < L && 2 * window + 1 + LIPI_ATT_TK <= L);
}

/* Makes *p hold at least n elements of `size` bytes (contents not kept). */
static lipi_status ensure(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return LIPI_OK;
    lipi_free(*p);
    *cap = 0;
    *p = lipi_malloc(n * size);
    if (!*p)
        return LIPI_ENOMEM;
    *cap = n;
    return LIPI_OK;
}

#define ENSURE(field, cap, n) TRY(ensure((void **)&(field), &(cap), (n), sizeof *(field)))

/* Rows of the qkv of one attention group: whole sequences, QKV_ROWS tokens
 * or one longer sequence. */
static size_t qkv_rows(size_t T, size_t Lmax)
{
    size_t r = QKV_ROWS > Lmax ? QKV_ROWS : Lmax;
    return r < T ? r : T;
}

/* Ensures scratch for T tokens, sequences up to L long and n sequences.
 * Sizes were checked against overflow by the caller. */
static lipi_status reserve(lipi_model_session *s, size_t T, size_t L, size_t n)
{
    lipi_status st = LIPI_OK;
    const lipi_config *c = &s->m->cfg;
    size_t C = c->hidden, I = c->inter, E = c->embed;
    size_t rq = qkv_rows(T, L), rf = T < FFN_ROWS ? T : FFN_ROWS;
    size_t ffn = rf * I * (c->glu ? 3 : 1); /* GLU: (rows, 2I) and (rows, I) */
    size_t big = rq * 3 * C > ffn ? rq * 3 * C : ffn;
    if (s->m->proj_w && E > C)
        big = big > T * E ? big : T * E;
    size_t tc = T * C;
    ENSURE(s->x, s->cap_x, tc);
    ENSURE(s->tmp, s->cap_tmp, tc);
    ENSURE(s->att, s->cap_att, tc);
    ENSURE(s->big, s->cap_big, big);
    /* Plain attention's scores only up to the length it runs at. */
    size_t lp = s->attn == LIPI_ATTN_TILED                          ? 0
                : s->attn == LIPI_ATTN_AUTO && L > LIPI_ATT_PLAIN_MAX ? LIPI_ATT_PLAIN_MAX
                                                                      : L;
    s->score_stride = lp * lp;
    if (lp)
        ENSURE(s->scores, s->cap_scores, s->nthreads * lp * lp);
    ENSURE(s->tiles, s->cap_tiles, s->nthreads * LIPI_ATT_WORK(C / c->heads));
    ENSURE(s->units, s->cap_units, n + 1);
    ENSURE(s->tok_id, s->cap_id, T);
    ENSURE(s->tok_type, s->cap_type, T);
    ENSURE(s->tok_pos, s->cap_pos, T);
    ENSURE(s->off, s->cap_off, n + 1);
    if (s->m->int8) {
        size_t aq = tc > rf * I ? tc : rf * I;
        ENSURE(s->aq, s->cap_aq, aq);
        ENSURE(s->as, s->cap_as, T);
        ENSURE(s->acc, s->cap_acc, s->nthreads * TILE_M * TILE_N);
    }
done:
    return st;
}

/* ======================================================================== */
/* Tasks                                                                     */
/* ======================================================================== */

typedef struct {
    lipi_gemm_kind kind;
    size_t M, N, K;
    const float *a; /* (M, K) */
    size_t lda;
    const float *w; /* (N, K) */
    const float *bias;
    float *c;       /* (M, N) */
    int act;
    const float *res; /* (M, N) or NULL */
    size_t tiles_n, tm, tn;
    const lipi_qlinear *q; /* int8 weights, or NULL */
    const uint8_t *aq;     /* (M, K) quantized a */
    const float *as;       /* (M) */
    int32_t *acc;          /* per worker (TILE_M, TILE_N) */
} linear_job;

/* One (mr, nr) tile at (i0, j0) of c: (M, N) = act(a (M, K) . w (N, K)^T + bias)
 * (+ res (M, N)) */
static void linear_task(void *p, size_t t, size_t worker)
{
    const linear_job *j = p;
    size_t i0 = (t / j->tiles_n) * j->tm, j0 = (t % j->tiles_n) * j->tn;
    size_t mr = j->M - i0 < j->tm ? j->M - i0 : j->tm;
    size_t nr = j->N - j0 < j->tn ? j->N - j0 : j->tn;
    float *c = j->c + i0 * j->N + j0;
    if (j->q) {
        int32_t *acc = j->acc + worker * TILE_M * TILE_N; /* (mr, nr) */
        lipi_igemm_nt(j->kind, mr, nr, j->K, j->aq + i0 * j->K, j->K, j->q->w + j0 * j->K, j->K,
                      j->q->wsum + j0, acc, nr);
        lipi_dequantize(acc, mr, nr, j->as + i0, j->q->scale + j0, j->bias + j0, j->act,
                        j->res ? j->res + i0 * j->N + j0 : NULL, j->N, c, j->N);
        return;
    }
    lipi_sgemm_nt(j->kind, mr, nr, j->K, j->a + i0 * j->lda, j->lda, j->w + j0 * j->K, j->K, c,
                  j->N);
    lipi_bias_act(c, mr, nr, j->N, j->bias + j0, j->act, j->res ? j->res + i0 * j->N + j0 : NULL,
                  j->N);
}

typedef struct {
    const float *a; /* (M, K) */
    size_t M, K;
    uint8_t *aq;    /* (M, K) */
    float *as;      /* (M) */
} quant_job;

static void quant_task(void *p, size_t t, size_t worker)
{
    const quant_job *j = p;
    size_t r0 = t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->M ? r0 + ROWS_PER_TASK : j->M;
    for (size_t r = r0; r < r1; r++)
        lipi_quantize_row(j->a + r * j->K, j->K, j->aq + r * j->K, &j->as[r]);
}

static size_t round_up16(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

/* Tile shape (*tm, *tn) of an (M, N) output, from the shape only. Many
 * rows: tiles of nearly equal size up to the maximum, so that threads get
 * equal shares. Few rows (one short batch): all rows, and two column tiles
 * or more so that two threads share the work. */
static void choose_tiles(size_t M, size_t N, size_t *tm, size_t *tn)
{
    const size_t maxm = TILE_M, maxn = TILE_N;
    if (M <= maxm) {
        size_t n = ((N / 2 + 63) / 64) * 64;
        *tm = M;
        *tn = n < 64 ? 64 : n > 384 ? 384 : n;
        return;
    }
    size_t nm = (M + maxm - 1) / maxm, nn = (N + maxn - 1) / maxn;
    *tm = round_up16((M + nm - 1) / nm);
    *tn = round_up16((N + nn - 1) / nn);
}

/* out: (M, N) = act(a (M, K) . w (N, K)^T + bias) (+ res (M, N)); with int8
 * weights q, a is first quantized per token */
static void linear_q(lipi_model_session *s, size_t M, size_t N, size_t K, const float *a,
                     const float *w, const lipi_qlinear *q, const float *bias, int act,
                     const float *res, float *out)
{
    size_t tm, tn;
    choose_tiles(M, N, &tm, &tn);
    linear_job j = {s->gemm, M, N, K, a, K, w, bias, out, act, res, (N + tn - 1) / tn, tm, tn,
                    NULL, NULL, NULL, NULL};
    if (q && q->w) {
        quant_job qj = {a, M, K, s->aq, s->as};
        parallel(s, quant_task, &qj, (M + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
        j.q = q;
        j.aq = s->aq;
        j.as = s->as;
        j.acc = s->acc;
    }
    parallel(s, linear_task, &j, ((M + tm - 1) / tm) * j.tiles_n);
}

static void linear(lipi_model_session *s, size_t M, size_t N, size_t K, const float *a,
                   const float *w, const float *bias, int act, const float *res, float *out)
{
    linear_q(s, M, N, K, a, w, NULL, bias, act, res, out);
}

void lipi_session_linear(lipi_model_session *s, size_t M, size_t N, size_t K, const float *a,
                         const float *w, const float *bias, int act, const float *res,
                         float *out)
{
    int prev = lipi_gemm_thread_enter();
    linear(s, M, N, K, a, w, bias, act, res, out);
    lipi_gemm_thread_restore(prev);
}

typedef struct {
    lipi_model_session *s;
    size_t T;
    float *x; /* (T, C) */
    size_t C;
    const float *w, *b;
    float eps;
    const float *src; /* (T, C) copied into x first, or NULL: x in place */
} ln_job;

static void ln_task(void *p, size_t t, size_t worker)
{
    const ln_job *j = p;
    size_t r0 = t * ROWS_PER_TASK;
    size_t n = j->T - r0 < ROWS_PER_TASK ? j->T - r0 : ROWS_PER_TASK;
    if (j->src)
        memcpy(j->x + r0 * j->C, j->src + r0 * j->C, n * j->C * sizeof(float));
    lipi_layernorm(j->x + r0 * j->C, n, j->C, j->w, j->b, j->eps);
}

typedef struct {
    const float *x; /* (T, 2I) */
    size_t T, I;
    int act;
    float *out;     /* (T, I) */
} glu_job;

static void glu_task(void *p, size_t t, size_t worker)
{
    const glu_job *j = p;
    size_t r0 = t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->T ? r0 + ROWS_PER_TASK : j->T;
    lipi_glu(j->x + r0 * 2 * j->I, r1 - r0, j->I, j->act, j->out + r0 * j->I);
}

static void layernorm_rows(lipi_model_session *s, float *x, size_t T, size_t C, const float *w,
                           const float *b, float eps)
{
    ln_job j = {s, T, x, C, w, b, eps, NULL};
    parallel(s, ln_task, &j, (T + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
}

/* dst: (T, C) = LayerNorm(src) (pre-norm: the residual src stays). */
static void layernorm_copy(lipi_model_session *s, float *dst, const float *src, size_t T,
                           size_t C, const float *w, const float *b, float eps)
{
    ln_job j = {s, T, dst, C, w, b, eps, src};
    parallel(s, ln_task, &j, (T + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
}

typedef struct {
    lipi_model_session *s;
    float *qkv;        /* (rows, 3C) of tokens t0, t0 + 1, ... */
    size_t t0, rows, H, D;
    const float *rope; /* (P, D): cos (P, D/2), sin (P, D/2) */
} rope_job;

/* RoPE on the q and k of a block of rows, each at its position in its
 * sequence. */
static void rope_task(void *p, size_t t, size_t worker)
{
    const rope_job *j = p;
    lipi_model_session *s = j->s;
    size_t r0 = t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->rows ? r0 + ROWS_PER_TASK : j->rows;
    size_t C = j->H * j->D, half = j->D / 2;
    for (size_t r = r0; r < r1; r++) {
        const float *cs = j->rope + (size_t)s->tok_pos[j->t0 + r] * j->D;
        float *q = j->qkv + r * 3 * C;
        lipi_rope(q, j->H, j->D, cs, cs + half);     /* query heads */
        lipi_rope(q + C, j->H, j->D, cs, cs + half); /* key heads */
    }
}

/* Where the (T, E) embeddings go: x, or for ALBERT (projected to C after)
 * tmp when it is wide enough, else big. */
static float *embed_out(lipi_model_session *s)
{
    const lipi_model *m = s->m;
    if (!m->proj_w)
        return s->x;
    return m->cfg.embed <= m->cfg.hidden ? s->tmp : s->big;
}

/* Embeddings of a row range: word + token type + position, then LayerNorm.
 * out: (T, E) */
static void embed_task(void *p, size_t t, size_t worker)
{
    lipi_model_session *s = p;
    const lipi_model *m = s->m;
    size_t E = m->cfg.embed, T = s->rows;
    size_t r0 = t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < T ? r0 + ROWS_PER_TASK : T;
    float *out = embed_out(s);
    for (size_t r = r0; r < r1; r++) {
        float *o = out + r * E;
        const float *we = m->word_emb + (size_t)s->tok_id[r] * E;
        if (!m->pos_emb) { /* ALiBi, RoPE: positions enter in attention only */
            const float *te = m->type_emb ? m->type_emb + (size_t)s->tok_type[r] * E : NULL;
            for (size_t i = 0; i < E; i++)
                o[i] = te ? we[i] + te[i] : we[i];
            continue;
        }
        const float *pe = m->pos_emb + (size_t)s->tok_pos[r] * E;
        if (m->type_emb) {
            const float *te = m->type_emb + (size_t)s->tok_type[r] * E;
            for (size_t i = 0; i < E; i++)
                o[i] = (we[i] + te[i]) + pe[i];
        } else {
            for (size_t i = 0; i < E; i++)
                o[i] = we[i] + pe[i];
        }
    }
    lipi_layernorm(out + r0 * E, r1 - r0, E, m->emb_ln_w, m->emb_ln_b, m->cfg.ln_eps);
}

typedef struct {
    lipi_model_session *s;
    size_t first, H, D, C; /* sequences first, first + 1, ... of the group */
    size_t t0;             /* the group's first token */
    const float *qkv;      /* (group tokens, 3C) */
    float *out;            /* (T, C) */
    float scale;
    size_t window;         /* keys |j - i| <= window only; SIZE_MAX: all */
    size_t count;          /* sequences in the group */
} attn_job;

/* Tasks of a group: s->units[i - first] tasks come before sequence i's,
 * which are its heads (plain) or its heads x query blocks (tiled). */
static size_t attn_units(lipi_model_session *s, size_t first, size_t last, size_t H,
                         size_t window)
{
    size_t u = 0;
    for (size_t i = first; i < last; i++) {
        size_t L = s->off[i + 1] - s->off[i];
        s->units[i - first] = u;
        u += attn_tiled(s, L, window) ? H * ((L + LIPI_ATT_TQ - 1) / LIPI_ATT_TQ) : H;
    }
    s->units[last - first] = u;
    return u;
}

/* Task t: one head of one sequence (plain) or one block of its queries
 * (tiled): softmax(q k^T / sqrt(D) + bias) v over the sequence's own
 * tokens. q, k, v: (L, D) slices of qkv with row stride 3C -> out (L, D)
 * slice with row stride C */
static void attn_task(void *p, size_t t, size_t worker)
{
    const attn_job *j = p;
    lipi_model_session *s = j->s;
    size_t lo = 0, hi = j->count; /* the last sequence whose tasks start at or before t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->units[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    size_t seq = j->first + lo, r = t - s->units[lo], h = r % j->H;
    size_t o = s->off[seq], L = s->off[seq + 1] - o, C3 = 3 * j->C;
    const float *q = j->qkv + (o - j->t0) * C3 + h * j->D;
    const float *k = q + j->C, *v = q + 2 * j->C;
    float *out = j->out + o * j->C + h * j->D;
    const lipi_model *m = s->m;
    const float *rb = NULL;
    if (m->pos_bias) { /* MPNet, ALiBi: the head's bias by relative position */
        size_t P = m->cfg.max_pos - m->cfg.pos_offset;
        rb = m->pos_bias + h * (2 * P - 1) + (P - 1);
    }
    if (attn_tiled(s, L, j->window)) {
        size_t i0 = (r / j->H) * LIPI_ATT_TQ, nq = L - i0 < LIPI_ATT_TQ ? L - i0 : LIPI_ATT_TQ;
        lipi_attention_tiled(s->gemm, L, j->D, i0, nq, q, k, v, C3, j->scale, rb, j->window,
                             s->tiles + worker * LIPI_ATT_WORK(j->D), out, j->C);
    } else {
        lipi_attention_plain(s->gemm, L, j->D, q, k, v, C3, j->scale, rb, j->window,
                             s->scores + worker * s->score_stride, out, j->C);
    }
}

/* ======================================================================== */
/* Forward                                                                   */
/* ======================================================================== */

static lipi_status check_inputs(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                                size_t *T_out, size_t *L_out, lipi_error *err)
{
    const lipi_config *c = &s->m->cfg;
    size_t T = 0, Lmax = 0, maxlen = c->max_pos - c->pos_offset;
    /* Task indices of one dispatch (sequences x heads) stay below 2^32. */
    if (n > ((size_t)1 << 24))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected at most %zu sequences per call, found %zu",
                              (size_t)1 << 24, n);
    size_t inter = c->glu ? 3 * c->inter : c->inter;
    size_t widest = 3 * c->hidden > inter ? 3 * c->hidden : inter;
    for (size_t i = 0; i < n; i++) {
        const lipi_sequence *q = &seqs[i];
        if (q->len == 0 || q->len > maxlen)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "sequence %zu: expected 1..%zu tokens, found %zu", i, maxlen,
                                  q->len);
        for (size_t k = 0; k < q->len; k++) {
            if (q->ids[k] >= c->vocab)
                return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                      "sequence %zu, token %zu: id %u is not below the "
                                      "vocabulary size %zu",
                                      i, k, q->ids[k], c->vocab);
            if (q->type_ids && c->type_vocab && q->type_ids[k] >= c->type_vocab)
                return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                      "sequence %zu, token %zu: token type %u is not below "
                                      "type_vocab_size %zu",
                                      i, k, q->type_ids[k], c->type_vocab);
        }
        T += q->len;
        Lmax = q->len > Lmax ? q->len : Lmax;
    }
    size_t nt = s->nthreads;
    if (T > SIZE_MAX / sizeof(float) / widest ||
        (Lmax && Lmax > SIZE_MAX / sizeof(float) / Lmax / nt))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "batch too large");
    *T_out = T;
    *L_out = Lmax;
    return LIPI_OK;
}

/* Plans the groups of a batch (see GROUP_ROWS) from its shape only into
 * groups[0..n] (n + 1 slots): returns their number G, groups[G] = n, or 0
 * when the batch runs whole (a lane, one sequence, or a sequence longer
 * than a group). */
static size_t plan_groups(const lipi_model_session *s, size_t *groups, const lipi_sequence *seqs,
                          size_t n, size_t T, size_t Lmax)
{
    if (s->lane || s->whole || n < 2 || Lmax > GROUP_ROWS || T < 2 * GROUP_MIN)
        return 0;
    size_t G = 2 * ((T + 2 * GROUP_ROWS - 1) / (2 * GROUP_ROWS));
    G = G < n ? G : n;
    /* Group g closes at the first sequence end at or past (g + 1) T / G. */
    size_t g = 0, cum = 0, start = 0;
    groups[0] = 0;
    for (size_t i = 0; i + 1 < n && g + 1 < G; i++) {
        cum += seqs[i].len;
        if (cum * G >= (g + 1) * T && cum - start >= GROUP_MIN) {
            groups[++g] = i + 1;
            start = cum;
        }
    }
    if (g && T - start < GROUP_MIN) /* too small a last group joins the one before */
        g--;
    groups[++g] = n;
    return g >= 2 ? g : 0;
}

/* plan_groups for each run of `chunk` sequences (the last may be shorter)
 * as if each were a batch of its own, the groups one list in groups[0..n]
 * (n + 1 slots); 0 when some run would not be grouped. */
static size_t plan_chunks(const lipi_model_session *s, size_t *groups, const lipi_sequence *seqs,
                          size_t n, size_t chunk)
{
    size_t G = 0;
    for (size_t i0 = 0; i0 < n; i0 += chunk) {
        size_t m = n - i0 < chunk ? n - i0 : chunk, T = 0, Lmax = 0;
        for (size_t i = i0; i < i0 + m; i++) {
            T += seqs[i].len;
            Lmax = seqs[i].len > Lmax ? seqs[i].len : Lmax;
        }
        /* groups[G] is i0 (the last run's end) and is rewritten as 0 + i0 */
        size_t g = plan_groups(s, groups + G, seqs + i0, m, T, Lmax);
        if (!g)
            return 0;
        for (size_t k = 0; k <= g; k++)
            groups[G + k] += i0;
        G += g;
    }
    return G;
}

static lipi_status run(lipi_model_session *s, const lipi_sequence *seqs, size_t n, size_t chunk,
                       size_t *T_out, lipi_error *err);

typedef struct {
    lipi_model_session *s;
    const lipi_sequence *seqs;
} group_job;

/* Group g's whole forward pass on the worker's lane, its last hidden
 * states copied to their rows of s->x. */
static void group_task(void *p, size_t g, size_t worker)
{
    const group_job *j = p;
    lipi_model_session *s = j->s, *lane = s->lanes[worker];
    size_t first = s->groups[g], C = s->m->cfg.hidden, T = 0;
    lipi_status st = run(lane, j->seqs + first, s->groups[g + 1] - first, 0, &T, NULL);
    LIPI_ASSERT(st == LIPI_OK); /* inputs checked and scratch reserved before */
    memcpy(s->x + s->off[first] * C, lane->x, T * C * sizeof(float));
}

/* Runs the G groups planned in s->groups; the last hidden states end in
 * s->x (T, C) with sequence offsets s->off, as run's. */
static lipi_status run_groups(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                              size_t T, size_t Lmax, size_t G)
{
    lipi_status st = LIPI_OK;
    size_t maxT = 0, maxn = 0;
    ENSURE(s->x, s->cap_x, T * s->m->cfg.hidden);
    ENSURE(s->off, s->cap_off, n + 1);
    s->off[0] = 0;
    for (size_t i = 0; i < n; i++)
        s->off[i + 1] = s->off[i] + seqs[i].len;
    for (size_t g = 0; g < G; g++) {
        size_t a = s->groups[g], b = s->groups[g + 1];
        maxT = s->off[b] - s->off[a] > maxT ? s->off[b] - s->off[a] : maxT;
        maxn = b - a > maxn ? b - a : maxn;
    }
    if (!s->lanes && !(s->lanes = lipi_calloc(s->nthreads, sizeof *s->lanes)))
        return LIPI_ENOMEM;
    for (size_t w = 0; w < s->nthreads; w++) {
        if (!s->lanes[w])
            TRY(lipi_model_session_new(s->m, 1, &s->lanes[w], NULL));
        lipi_model_session *lane = s->lanes[w];
        lane->lane = true;
        lane->gemm = s->gemm;
        lane->attn = s->attn;
        TRY(reserve(lane, maxT, Lmax, maxn));
    }
    group_job j = {s, seqs};
    parallel(s, group_task, &j, G);
done:
    return st;
}

/* The sublayer output in tmp becomes the next input x. */
static void swap_x_tmp(lipi_model_session *s)
{
    float *p = s->tmp;
    size_t cap = s->cap_tmp;
    s->tmp = s->x;
    s->cap_tmp = s->cap_x;
    s->x = p;
    s->cap_x = cap;
}

/* Runs the encoder; the last hidden states end in s->x (T, C) with
 * sequence offsets s->off. chunk > 0: the groups are planned run by run
 * of `chunk` sequences (plan_chunks; the caller made sure every run is
 * grouped). */
static lipi_status run(lipi_model_session *s, const lipi_sequence *seqs, size_t n, size_t chunk,
                       size_t *T_out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const lipi_model *m = s->m;
    const lipi_config *c = &m->cfg;
    size_t T = 0, Lmax = 0;
    int omp_prev = lipi_gemm_thread_enter();
    TRY(check_inputs(s, seqs, n, &T, &Lmax, err));
    size_t G = 0;
    if (!s->lane && (st = ensure((void **)&s->groups, &s->cap_groups, n + 1,
                                 sizeof *s->groups)) == LIPI_OK)
        G = chunk ? plan_chunks(s, s->groups, seqs, n, chunk)
                  : plan_groups(s, s->groups, seqs, n, T, Lmax);
    s->last_groups = G;
    if (st == LIPI_OK && G)
        st = run_groups(s, seqs, n, T, Lmax, G);
    if (st != LIPI_OK || G) {
        if (st != LIPI_OK)
            lipi_error_set(err, st, NULL, 0, 0, "out of memory for a batch of %zu tokens", T);
        goto done;
    }
    if ((st = reserve(s, T, Lmax, n)) != LIPI_OK) {
        lipi_error_set(err, st, NULL, 0, 0, "out of memory for a batch of %zu tokens", T);
        goto done;
    }
    size_t t = 0;
    s->off[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const lipi_sequence *q = &seqs[i];
        /* RoBERTa's and MPNet's create_position_ids_from_input_ids: tokens
         * equal to padding_idx keep it, the others count up from
         * padding_idx + 1. */
        uint32_t count = 0;
        for (size_t k = 0; k < q->len; k++, t++) {
            s->tok_id[t] = q->ids[k];
            s->tok_type[t] = q->type_ids ? q->type_ids[k] : 0;
            if (c->pos_offset) {
                bool real = q->ids[k] != c->pos_pad;
                count += real;
                s->tok_pos[t] = real ? c->pos_pad + count : c->pos_pad;
            } else {
                s->tok_pos[t] = (uint32_t)k;
            }
        }
        s->off[i + 1] = t;
    }
    if (T == 0)
        goto done;
    s->rows = T;
    s->lmax = Lmax;
    parallel(s, embed_task, s, (T + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
    size_t C = c->hidden, I = c->inter, H = c->heads, D = C / H;
    if (m->proj_w)
        linear(s, T, C, c->embed, embed_out(s), m->proj_w, m->proj_b, LIPI_ACT_NONE, NULL,
               s->x);

    for (size_t l = 0; l < m->n_exec; l++) {
        const lipi_layer_w *w = m->exec[l];
        uint8_t kind = c->layer_kind ? c->layer_kind[l] : 0;
        /* Pre-norm (ModernBERT): attention reads LayerNorm(x) from tmp
         * (layer 0 has no norm there), the residual x stays. */
        const float *ain = s->x;
        if (c->pre_norm && w->ln1_w) {
            layernorm_copy(s, s->tmp, s->x, T, C, w->ln1_w, w->ln1_b, c->ln_eps);
            ain = s->tmp;
        }
        /* Attention, group by group of whole sequences: qkv (rows, 3C) in
         * big, the heads' outputs into att (T, C). */
        for (size_t i = 0; i < n;) {
            size_t j = i + 1, t0 = s->off[i];
            while (j < n && s->off[j + 1] - t0 <= QKV_ROWS)
                j++;
            size_t rows = s->off[j] - t0;
            linear_q(s, rows, 3 * C, C, ain + t0 * C, w->qkv_w, &w->qkv_q, w->qkv_b,
                     LIPI_ACT_NONE, NULL, s->big);
            if (m->rope) {
                const float *rope = m->rope + (kind & LIPI_LAYER_LOCAL_ROPE ? c->max_pos * D : 0);
                rope_job rj = {s, s->big, t0, rows, H, D, rope};
                parallel(s, rope_task, &rj, (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
            }
            size_t win = kind & LIPI_LAYER_LOCAL_WINDOW ? c->window : SIZE_MAX;
            attn_job aj = {s, i, H, D, C, t0, s->big, s->att, 1.0f / sqrtf((float)D), win,
                           j - i};
            parallel(s, attn_task, &aj, attn_units(s, i, j, H, win));
            i = j;
        }
        linear_q(s, T, C, C, s->att, w->ao_w, &w->ao_q, w->ao_b, LIPI_ACT_NONE, s->x, s->tmp);
        if (!c->pre_norm)
            layernorm_rows(s, s->tmp, T, C, w->ln1_w, w->ln1_b, c->ln_eps);
        swap_x_tmp(s);
        /* Pre-norm: the FFN reads LayerNorm(x) from att (free again). */
        const float *fin = s->x;
        if (c->pre_norm) {
            layernorm_copy(s, s->att, s->x, T, C, w->ln2_w, w->ln2_b, c->ln_eps);
            fin = s->att;
        }
        /* FFN, block by block of FFN_ROWS tokens: (rows, I) in big; GLU:
         * (rows, 2I) in big, then act(gate) * up as (rows, I) after it. */
        for (size_t r0 = 0; r0 < T; r0 += FFN_ROWS) {
            size_t rows = T - r0 < FFN_ROWS ? T - r0 : FFN_ROWS;
            float *inner = s->big;
            if (c->glu) {
                linear_q(s, rows, 2 * I, C, fin + r0 * C, w->ff1_w, &w->ff1_q, w->ff1_b,
                         LIPI_ACT_NONE, NULL, s->big);
                inner = s->big + rows * 2 * I;
                glu_job gj = {s->big, rows, I, (int)c->act, inner};
                parallel(s, glu_task, &gj, (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
            } else {
                linear_q(s, rows, I, C, fin + r0 * C, w->ff1_w, &w->ff1_q, w->ff1_b,
                         (int)c->act, NULL, s->big);
            }
            linear_q(s, rows, C, I, inner, w->ff2_w, &w->ff2_q, w->ff2_b, LIPI_ACT_NONE,
                     s->x + r0 * C, s->tmp + r0 * C);
        }
        if (!c->pre_norm)
            layernorm_rows(s, s->tmp, T, C, w->ln2_w, w->ln2_b, c->ln_eps);
        swap_x_tmp(s);
    }
    if (m->final_ln_w)
        layernorm_rows(s, s->x, T, C, m->final_ln_w, m->final_ln_b, c->ln_eps);
done:
    lipi_gemm_thread_restore(omp_prev);
    *T_out = T;
    return st;
}

lipi_status lipi_model_forward(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                               float *hidden, lipi_error *err)
{
    size_t T = 0;
    lipi_status st = run(s, seqs, n, 0, &T, err);
    if (st == LIPI_OK && T)
        memcpy(hidden, s->x, T * s->m->cfg.hidden * sizeof(float));
    return st;
}

static lipi_status embed_run(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                             size_t chunk, const lipi_embed_options *opt, float *out,
                             lipi_error *err)
{
    const lipi_config *c = &s->m->cfg;
    unsigned flags = opt && opt->pooling ? opt->pooling : c->pooling;
    bool norm = opt && opt->normalize >= 0 ? opt->normalize != 0 : c->normalize;
    if (flags & ~15u)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "pooling: unknown flags 0x%x", flags & ~15u);
    size_t k = 0;
    for (unsigned b = flags; b; b &= b - 1)
        k++;
    size_t pooled = k * c->hidden;
    if (c->n_dense && c->dense[0].in != pooled)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "pooling gives %zu values per sentence, the Dense module in %s "
                              "expects %zu",
                              pooled, c->dense[0].path, c->dense[0].in);
    size_t T = 0;
    lipi_status st = run(s, seqs, n, chunk, &T, err);
    if (st != LIPI_OK || n == 0)
        return st;
    if (!c->n_dense) {
        lipi_pool(s->x, s->off, n, c->hidden, flags, out);
    } else {
        /* Ping-pong between two scratch rows buffers, the last layer into out. */
        size_t widest = pooled;
        for (size_t i = 0; i < c->n_dense; i++)
            widest = c->dense[i].out > widest ? c->dense[i].out : widest;
        if (n > SIZE_MAX / sizeof(float) / 2 / widest)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "batch too large");
        float *buf = lipi_malloc(2 * n * widest * sizeof(float));
        if (!buf)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        float *a = buf, *b = buf + n * widest;
        lipi_pool(s->x, s->off, n, c->hidden, flags, a);
        for (size_t i = 0; i < c->n_dense; i++) {
            float *dst = i + 1 == c->n_dense ? out : b;
            lipi_dense_apply(&c->dense[i], a, n, dst);
            float *t = a;
            a = dst;
            b = t;
        }
        lipi_free(buf);
    }
    if (norm)
        lipi_vectors_normalize(out, n, lipi_model_embed_dim(s->m, flags));
    return LIPI_OK;
}

lipi_status lipi_model_embed(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                             const lipi_embed_options *opt, float *out, lipi_error *err)
{
    return embed_run(s, seqs, n, 0, opt, out, err);
}

/* Whether the runs of chunk sequences of seqs[0..n) can share one
 * parallel region: with threads, when each run is grouped. The groups are
 * those of a call per run, so are the outputs. */
static bool chunks_join(lipi_model_session *s, const lipi_sequence *seqs, size_t n, size_t chunk)
{
    return s->nthreads > 1 &&
           ensure((void **)&s->groups, &s->cap_groups, n + 1, sizeof *s->groups) == LIPI_OK &&
           plan_chunks(s, s->groups, seqs, n, chunk) != 0;
}

lipi_status lipi_model_embed_chunks(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                                    size_t chunk, const lipi_embed_options *opt, float *out,
                                    lipi_error *err)
{
    if (!chunk || chunk >= n)
        return embed_run(s, seqs, n, 0, opt, out, err);
    /* run checks the inputs before it uses the plan, naming a bad sequence
     * by its index in seqs. */
    if (chunks_join(s, seqs, n, chunk))
        return embed_run(s, seqs, n, chunk, opt, out, err);
    /* Else a call per run, all inputs checked first for the same naming. */
    size_t T, Lmax;
    lipi_status st = check_inputs(s, seqs, n, &T, &Lmax, err);
    size_t dim = lipi_model_embed_dim(s->m, opt ? opt->pooling : 0);
    for (size_t i0 = 0; i0 < n && st == LIPI_OK; i0 += chunk) {
        size_t m = n - i0 < chunk ? n - i0 : chunk;
        st = embed_run(s, seqs + i0, m, 0, opt, out + i0 * dim, err);
    }
    return st;
}

/* lipi_model_classify with the forward pass planned per run of chunk
 * sequences (0: the whole call), as embed_run. */
static lipi_status classify_run(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                                size_t chunk, float *logits, float *probs, lipi_error *err)
{
    const lipi_model *m = s->m;
    if (m->head == LIPI_HEAD_NONE)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "the model has no classifier head (expected a "
                              "*ForSequenceClassification checkpoint)");
    size_t T = 0, NL = m->cfg.num_labels;
    lipi_status st = run(s, seqs, n, chunk, &T, err);
    if (st != LIPI_OK || n == 0)
        return st;
    /* Scratch: one hidden vector, then the logits when the caller wants
     * only probabilities. */
    size_t C = m->cfg.hidden;
    float *scratch = lipi_malloc((C + (logits ? 0 : n * NL)) * sizeof(float));
    if (!scratch)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    float *lg = logits ? logits : scratch + C;
    lipi_head_logits(m, s->x, s->off, n, scratch, lg);
    for (size_t i = 0; probs && i < n; i++) {
        const float *z = lg + i * NL;
        float *p = probs + i * NL;
        if (m->cfg.multi_label) {
            for (size_t k = 0; k < NL; k++)
                p[k] = (float)(1.0 / (1.0 + exp(-(double)z[k])));
            continue;
        }
        double mx = z[0], sum = 0;
        for (size_t k = 1; k < NL; k++)
            mx = z[k] > mx ? z[k] : mx;
        for (size_t k = 0; k < NL; k++)
            sum += exp(z[k] - mx);
        for (size_t k = 0; k < NL; k++)
            p[k] = (float)(exp(z[k] - mx) / sum);
    }
    lipi_free(scratch);
    return LIPI_OK;
}

lipi_status lipi_model_classify(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                                float *logits, float *probs, lipi_error *err)
{
    return classify_run(s, seqs, n, 0, logits, probs, err);
}

lipi_status lipi_model_classify_chunks(lipi_model_session *s, const lipi_sequence *seqs,
                                       size_t n, size_t chunk, float *logits, float *probs,
                                       lipi_error *err)
{
    if (!chunk || chunk >= n || s->m->head == LIPI_HEAD_NONE)
        return classify_run(s, seqs, n, 0, logits, probs, err);
    if (chunks_join(s, seqs, n, chunk))
        return classify_run(s, seqs, n, chunk, logits, probs, err);
    size_t T, Lmax, NL = s->m->cfg.num_labels;
    lipi_status st = check_inputs(s, seqs, n, &T, &Lmax, err);
    for (size_t i0 = 0; i0 < n && st == LIPI_OK; i0 += chunk) {
        size_t m = n - i0 < chunk ? n - i0 : chunk;
        st = classify_run(s, seqs + i0, m, 0, logits ? logits + i0 * NL : NULL,
                          probs ? probs + i0 * NL : NULL, err);
    }
    return st;
}

static lipi_status need_m3(const float *w, const char *file, lipi_error *err)
{
    if (w)
        return LIPI_OK;
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "the model has no %s (bge-m3's head, beside its weights)", file);
}

lipi_status lipi_model_token_weights(lipi_model_session *s, const lipi_sequence *seqs,
                                     size_t n, float *weights, lipi_error *err)
{
    const lipi_model *m = s->m;
    size_t T = 0;
    lipi_status st = need_m3(m->sparse_w, "sparse_linear.pt", err);
    if (st == LIPI_OK)
        st = run(s, seqs, n, 0, &T, err);
    if (st == LIPI_OK && n)
        lipi_token_weights(s->x, T, m->cfg.hidden, m->sparse_w, m->sparse_b[0], weights);
    return st;
}

lipi_status lipi_model_colbert(lipi_model_session *s, const lipi_sequence *seqs, size_t n,
                               float *vecs, lipi_error *err)
{
    const lipi_model *m = s->m;
    size_t T = 0, C = m->cfg.hidden, D = m->colbert_dim;
    lipi_status st = need_m3(m->colbert_w, "colbert_linear.pt", err);
    if (st == LIPI_OK)
        st = run(s, seqs, n, 0, &T, err);
    if (st != LIPI_OK || !n)
        return st;
    /* Every sequence's tokens but the first: rows off[i] + 1 .. off[i + 1].
     * oneDNN runs single-threaded here, so the result is the same on any
     * number of threads. */
    int prev = lipi_gemm_thread_enter();
    float *out = vecs;
    for (size_t i = 0; i < n; i++) {
        size_t rows = s->off[i + 1] - s->off[i] - 1;
        if (!rows)
            continue;
        lipi_sgemm_nt(s->gemm, rows, D, C, s->x + (s->off[i] + 1) * C, C, m->colbert_w, C, out,
                      D);
        for (size_t r = 0; r < rows; r++)
            for (size_t d = 0; d < D; d++)
                out[r * D + d] += m->colbert_b[d];
        lipi_vectors_normalize(out, rows, D);
        out += rows * D;
    }
    lipi_gemm_thread_restore(prev);
    return LIPI_OK;
}

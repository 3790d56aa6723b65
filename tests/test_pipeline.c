/* The transformer pipeline: safetensors validation, config parsing, kernels
 * against their _ref versions, and whole models against the PyTorch
 * reference outputs in tests/fixtures/models (made by make_models.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model_impl.h"
#include "retrieval/retrieval.h"
#include "tests/alloc_fail.h"

#ifndef FIXTURES
#define FIXTURES "tests/fixtures/models"
#endif
#define TOL 1e-4

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

/* x: (n) pseudo-random values in [-scale, scale] (defined below). */
static void fill(float *x, size_t n, uint32_t seed, float scale);

/* Counts |got - want| > tol and prints the first few mismatches. */
static size_t mismatches(const char *what, const float *got, const float *want, size_t n,
                         double tol)
{
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= tol)) {
            if (bad < 5)
                fprintf(stderr, "  %s[%zu]: got %.7g, expected %.7g (diff %.3g)\n", what, i,
                        got[i], want[i], d);
            bad++;
        }
        if (d > worst)
            worst = d;
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu values off by more than %g (worst %.3g)\n", what, bad,
                n, tol, worst);
    return bad;
}

/* Reads a little-endian float32 .npy (C order); returns the data (free())
 * and the shape. */
static float *read_npy(const char *path, size_t shape[3], size_t *ndim)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char pre[10];
    assert_int_equal(fread(pre, 1, 10, f), 10);
    assert_memory_equal(pre, "\x93NUMPY", 6);
    size_t hl = (size_t)pre[8] | (size_t)pre[9] << 8;
    char *hdr = calloc(1, hl + 1);
    assert_int_equal(fread(hdr, 1, hl, f), hl);
    assert_non_null(strstr(hdr, "'<f4'"));
    assert_non_null(strstr(hdr, "'fortran_order': False"));
    const char *p = strchr(strstr(hdr, "'shape'"), '(') + 1;
    size_t n = 1;
    *ndim = 0;
    while (*p && *p != ')') {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p)
            break;
        shape[(*ndim)++] = (size_t)v;
        n *= (size_t)v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    free(hdr);
    float *data = malloc(n * sizeof(float) + 1);
    assert_int_equal(fread(data, sizeof(float), n, f), n);
    fclose(f);
    return data;
}

/* A fixture's padded inputs as unpadded sequences (right padding). */
typedef struct {
    size_t B, L;
    uint32_t *ids, *types; /* (B, L) */
    size_t *lens;
    lipi_sequence *seqs;
    size_t T;
} inputs;

static void read_inputs(const char *dir, inputs *in)
{
    char path[512];
    snprintf(path, sizeof path, "%s/inputs.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    json_t *ids = json_object_get(root, "input_ids"), *mask = json_object_get(root, "attention_mask");
    json_t *types = json_object_get(root, "token_type_ids");
    in->B = json_array_size(ids);
    in->L = json_array_size(json_array_get(ids, 0));
    in->ids = calloc(in->B * in->L, sizeof(uint32_t));
    in->types = calloc(in->B * in->L, sizeof(uint32_t));
    in->lens = calloc(in->B, sizeof(size_t));
    in->seqs = calloc(in->B, sizeof(lipi_sequence));
    in->T = 0;
    for (size_t b = 0; b < in->B; b++) {
        for (size_t l = 0; l < in->L; l++) {
            in->ids[b * in->L + l] = (uint32_t)json_integer_value(json_array_get(json_array_get(ids, b), l));
            in->types[b * in->L + l] =
                (uint32_t)json_integer_value(json_array_get(json_array_get(types, b), l));
            in->lens[b] += (size_t)json_integer_value(json_array_get(json_array_get(mask, b), l));
        }
        in->seqs[b] = (lipi_sequence){in->ids + b * in->L, in->types + b * in->L, in->lens[b]};
        in->T += in->lens[b];
    }
    json_decref(root);
}

static void free_inputs(inputs *in)
{
    free(in->ids);
    free(in->types);
    free(in->lens);
    free(in->seqs);
}

static lipi_model *load_fixture(const char *name)
{
    char dir[512];
    snprintf(dir, sizeof dir, FIXTURES "/%s", name);
    lipi_model *m = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_model_load(dir, NULL, &m, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  load %s: %s: %s\n", dir, err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    return m;
}

static char tmp_root[256];

static void make_tmp_root(void)
{
    if (tmp_root[0])
        return;
    /* Memory-backed when available: the corruption test writes ~1700 files. */
    struct stat sb;
    const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) &&
                               access("/dev/shm", W_OK) == 0
                           ? "/dev/shm"
                           : "/tmp";
    snprintf(tmp_root, sizeof tmp_root, "%s/lipi_test_pipeline_XXXXXX", base);
    assert_non_null(mkdtemp(tmp_root));
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    write_file(to, buf, (size_t)n);
    free(buf);
}

/* ======================================================================== */
/* Exactness against the PyTorch reference                                  */
/* ======================================================================== */

/* Loads fixture `name`, runs forward with `threads` threads on `gemm`, and
 * compares the hidden states and cls / mean / max poolings. */
static void check_fixture(const char *name, size_t threads, lipi_gemm_kind gemm)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, FIXTURES "/%s", name);
    lipi_model *m = load_fixture(name);
    lipi_model_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_model_session_new(m, threads, &s, &err), LIPI_OK);
    lipi_model_session_set_gemm(s, gemm);
    inputs in;
    read_inputs(dir, &in);
    size_t C = lipi_model_get_info(m)->hidden_size, shape[3], nd;

    float *hidden = malloc(in.T * C * sizeof(float));
    lipi_status st = lipi_model_forward(s, in.seqs, in.B, hidden, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  forward: %s\n", err.msg);
    assert_int_equal(st, LIPI_OK);
    snprintf(path, sizeof path, "%s/expected_hidden.npy", dir);
    float *want = read_npy(path, shape, &nd);
    assert_int_equal(nd, 3);
    assert_int_equal(shape[0], in.B);
    assert_int_equal(shape[2], C);
    size_t bad = 0, row = 0;
    for (size_t b = 0; b < in.B; b++)
        for (size_t l = 0; l < in.lens[b]; l++, row++) {
            char what[96];
            snprintf(what, sizeof what, "%s hidden[%zu][%zu]", name, b, l);
            bad += mismatches(what, hidden + row * C, want + (b * shape[1] + l) * C, C, TOL);
        }
    assert_int_equal(bad, 0);
    free(want);

    static const struct {
        const char *file;
        unsigned flag;
    } pools[] = {{"expected_cls.npy", LIPI_POOL_CLS},
                 {"expected_mean.npy", LIPI_POOL_MEAN},
                 {"expected_max.npy", LIPI_POOL_MAX}};
    float *out = malloc(in.B * C * sizeof(float));
    for (size_t i = 0; i < 3; i++) {
        lipi_embed_options opt = {pools[i].flag, 0};
        assert_int_equal(lipi_model_embed(s, in.seqs, in.B, &opt, out, &err), LIPI_OK);
        snprintf(path, sizeof path, "%s/%s", dir, pools[i].file);
        want = read_npy(path, shape, &nd);
        assert_int_equal(mismatches(pools[i].file, out, want, in.B * C, TOL), 0);
        free(want);
    }
    free(out);
    free(hidden);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);
}

static const char *ALL_FIXTURES[] = {
    "bert",   "bert_noprefix", "bert_legacy", "bert_f16",    "bert_bf16",      "roberta",
    "xlmr",   "albert",        "distilbert",  "st_mean",     "bert_cls",       "roberta_cls",
    "distilbert_cls", "mpnet", "mpnet_cls", "st_mpnet", "bert_sinusoidal",
    "jina_v2", "modernbert", "st_modernbert", "nomic_bert", "gte", "gte_en"};
#define N_FIXTURES (sizeof ALL_FIXTURES / sizeof ALL_FIXTURES[0])

static void test_every_fixture_matches_pytorch_within_1e4(void **state)
{
    for (size_t i = 0; i < N_FIXTURES; i++)
        check_fixture(ALL_FIXTURES[i], 1, LIPI_GEMM_AUTO);
}

/* Runs the fixture in `dir` on session s; the largest |lipi - PyTorch|
 * over the hidden states of real (unpadded) tokens. */
static double hidden_worst(lipi_model_session *s, const char *dir, const inputs *in, size_t C)
{
    char path[600];
    size_t shape[3], nd;
    float *hidden = malloc(in->T * C * sizeof(float));
    assert_int_equal(lipi_model_forward(s, in->seqs, in->B, hidden, NULL), LIPI_OK);
    snprintf(path, sizeof path, "%s/expected_hidden.npy", dir);
    float *want = read_npy(path, shape, &nd);
    double worst = 0;
    for (size_t b = 0, row = 0; b < in->B; b++)
        for (size_t l = 0; l < in->lens[b]; l++, row++)
            for (size_t c = 0; c < C; c++)
                worst = fmax(worst, fabs((double)hidden[row * C + c] -
                                         want[(b * shape[1] + l) * C + c]));
    free(want);
    free(hidden);
    return worst;
}

/* The default output of the sentence-transformers fixture in `dir` (mean
 * pooling + Normalize, as its folder says) against expected_default.npy. */
static void check_st_default(const lipi_model *m, lipi_model_session *s, const char *dir,
                             const inputs *in, size_t C)
{
    const lipi_model_info *info = lipi_model_get_info(m);
    assert_int_equal(info->pooling, LIPI_POOL_MEAN);
    assert_true(info->normalize);
    char path[600];
    size_t shape[3], nd;
    float *out = malloc(in->B * C * sizeof(float));
    assert_int_equal(lipi_model_embed(s, in->seqs, in->B, NULL, out, NULL), LIPI_OK);
    snprintf(path, sizeof path, "%s/expected_default.npy", dir);
    float *want = read_npy(path, shape, &nd);
    assert_int_equal(mismatches(path, out, want, in->B * C, TOL), 0);
    free(want);
    free(out);
}

/* MPNet: the bucket function against torch's for key - query in
 * -1100..1100, the table-driven bias against the one bucketing per score,
 * and the whole model within TOL (the worst difference printed). */
static void test_mpnet_relative_position_bias_matches_pytorch(void **state)
{
    size_t shape[3], nd;
    float *want = read_npy(FIXTURES "/mpnet/expected_buckets.npy", shape, &nd);
    assert_int_equal(nd, 1);
    assert_int_equal(shape[0], 2201);
    size_t bad = 0;
    for (long r = -1100; r <= 1100; r++) {
        size_t got = lipi_mpnet_bucket(r), w = (size_t)want[r + 1100];
        if (got != w && bad++ < 5)
            fprintf(stderr, "  bucket(%ld): got %zu, expected %zu\n", r, got, w);
    }
    assert_int_equal(bad, 0);
    free(want);

    enum { L = 45, H = 3, NB = 32 };
    float x[L * L], r[L * L], table[NB * H], rb[2 * L - 1];
    fill(table, NB * H, 11, 1);
    for (size_t h = 0; h < H; h++) {
        for (long d = -(L - 1); d <= L - 1; d++)
            rb[d + L - 1] = table[lipi_mpnet_bucket(d) * H + h];
        fill(x, L * L, 12 + (uint32_t)h, 10);
        memcpy(r, x, sizeof x);
        lipi_attn_rel_bias(x, L, 0.25f, rb + L - 1);
        lipi_attn_rel_bias_ref(r, L, 0.25f, table, H, h);
        assert_memory_equal(x, r, sizeof x);
    }

    /* The worst difference of the hidden states against PyTorch. */
    const char *names[] = {"mpnet", "st_mpnet"};
    double worst = 0;
    for (size_t f = 0; f < 2; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, FIXTURES "/%s", names[f]);
        lipi_model *m = load_fixture(names[f]);
        const lipi_model_info *info = lipi_model_get_info(m);
        assert_string_equal(info->model_type, "mpnet");
        assert_int_equal(info->max_tokens, 40); /* 42 positions after padding_idx 1 */
        size_t C = info->hidden_size;
        assert_int_equal(C, 36);
        inputs in;
        read_inputs(dir, &in);
        lipi_model_session *s = NULL;
        assert_int_equal(lipi_model_session_new(m, 3, &s, NULL), LIPI_OK);
        worst = fmax(worst, hidden_worst(s, dir, &in, C));
        if (f == 1) /* all-mpnet-base-v2's layout: mean pooling + Normalize */
            check_st_default(m, s, dir, &in, C);
        free_inputs(&in);
        lipi_model_session_free(s);
        lipi_model_free(m);
    }
    printf("  mpnet vs pytorch: max abs difference of the hidden states %.3g\n", worst);
    assert_true(worst <= TOL);
}

/* The sinusoidal table: against the formula of Vaswani et al. written
 * another way (10000^(-2i/d) as exp) for a few (pos, i), against the
 * reference's float32 table (expected_positions.npy), and as loaded into
 * bert_sinusoidal; the whole model is checked with the other fixtures. */
static void test_sinusoidal_positions_match_the_formula_and_pytorch(void **state)
{
    enum { P = 600, E = 27 };
    float *pe = malloc(P * E * sizeof(float));
    lipi_sinusoidal_positions(pe, P, E);
    static const size_t cases[][2] = {{0, 0}, {1, 0}, {1, 13}, {7, 3}, {32, 12},
                                      {511, 0}, {511, 6}, {599, 13}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t pos = cases[k][0], i = cases[k][1];
        double angle = (double)pos * exp(-log(10000.0) * (double)(2 * i) / E);
        assert_true(fabs(pe[pos * E + 2 * i] - sin(angle)) <= 1e-6);
        if (2 * i + 1 < E)
            assert_true(fabs(pe[pos * E + 2 * i + 1] - cos(angle)) <= 1e-6);
    }
    assert_true(pe[0] == 0.0f && pe[1] == 1.0f); /* sin 0, cos 0 */
    free(pe);

    size_t shape[3], nd;
    float *want = read_npy(FIXTURES "/bert_sinusoidal/expected_positions.npy", shape, &nd);
    assert_int_equal(nd, 2);
    lipi_model *m = load_fixture("bert_sinusoidal");
    assert_int_equal(shape[0], m->cfg.max_pos);
    assert_int_equal(shape[1], m->cfg.embed);
    size_t n = shape[0] * shape[1];
    assert_int_equal(mismatches("positions", m->pos_emb, want, n, 1e-6), 0);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)m->pos_emb[i] - want[i]));
    printf("  sinusoidal table vs pytorch: max abs difference %.3g\n", worst);
    assert_int_equal(lipi_model_get_info(m)->max_tokens, 33);
    free(want);

    inputs in;
    read_inputs(FIXTURES "/bert_sinusoidal", &in);
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 3, &s, NULL), LIPI_OK);
    worst = hidden_worst(s, FIXTURES "/bert_sinusoidal", &in, m->cfg.hidden);
    printf("  bert_sinusoidal vs pytorch: max abs difference of the hidden states %.3g\n",
           worst);
    assert_true(worst <= TOL);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);
}

/* ALiBi (Jina v2): the head slopes of jina-bert's _get_alibi_head_slopes
 * (powers of two here, so exact), the bias table of the loaded model, and
 * the whole model within TOL (the worst difference printed). */
static void test_alibi_slopes_and_jina_v2_match_pytorch(void **state)
{
    float sl[12];
    lipi_alibi_slopes(sl, 8); /* 2^-1 .. 2^-8 */
    for (int h = 0; h < 8; h++)
        assert_true(sl[h] == ldexpf(1.0f, -(h + 1)));
    /* 6 heads: 4 of the power of two, then slopes 0 and 2 of 8 heads */
    const float six[6] = {0.25f, 0.0625f, 0x1p-6f, 0x1p-8f, 0.5f, 0.125f};
    lipi_alibi_slopes(sl, 6);
    assert_memory_equal(sl, six, sizeof six);
    /* 12 heads: 8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 of 16 */
    lipi_alibi_slopes(sl, 12);
    for (int h = 8; h < 12; h++)
        assert_true(fabs(sl[h] - pow(2.0, -0.5 - (h - 8))) <= 1e-7);

    lipi_model *m = load_fixture("jina_v2");
    const lipi_config *c = &m->cfg;
    assert_int_equal(c->pos_kind, LIPI_POS_ALIBI);
    assert_true(c->glu);
    assert_null(m->pos_emb);
    size_t P = c->max_pos, W = 2 * P - 1;
    assert_int_equal(lipi_model_get_info(m)->max_tokens, P);
    lipi_alibi_slopes(sl, c->heads);
    for (size_t h = 0; h < c->heads; h++)
        for (size_t d = 0; d < P; d++) {
            assert_true(m->pos_bias[h * W + P - 1 + d] == -sl[h] * (float)d);
            assert_true(m->pos_bias[h * W + P - 1 - d] == -sl[h] * (float)d);
        }
    inputs in;
    read_inputs(FIXTURES "/jina_v2", &in);
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 3, &s, NULL), LIPI_OK);
    double worst = hidden_worst(s, FIXTURES "/jina_v2", &in, c->hidden);
    printf("  jina_v2 vs pytorch: max abs difference of the hidden states %.3g\n", worst);
    assert_true(worst <= TOL);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);
}

/* ModernBERT: the layer kinds read from both config styles, the rotary
 * table against the formula in double, the whole model within TOL on 3
 * threads (worst difference printed), and modernbert-embed's
 * sentence-transformers output (mean pooling + Normalize). */
static void test_modernbert_rope_window_and_embeddings_match_pytorch(void **state)
{
    enum { P = 50, D = 10 };
    float rope[P * D];
    lipi_rope_table(rope, P, D, 160000.0);
    for (size_t p = 0; p < P; p++)
        for (size_t i = 0; i < D / 2; i++) {
            double a = (double)p * pow(160000.0, -(double)(2 * i) / D);
            assert_true(fabs(rope[p * D + i] - cos(a)) <= 2e-5);
            assert_true(fabs(rope[p * D + D / 2 + i] - sin(a)) <= 2e-5);
        }
    float x[2 * D], cs[D / 2] = {0.6f, 1, 0, -1, 0.8f}, sn[D / 2] = {0.8f, 0, 1, 0, -0.6f};
    for (size_t i = 0; i < 2 * D; i++)
        x[i] = (float)i + 1;
    lipi_rope(x, 2, D, cs, sn);
    /* head 1, pair (11, 16) turned by (0.6, 0.8); pair (13, 18) by 90 degrees */
    assert_true(fabsf(x[D] - (11 * 0.6f - 16 * 0.8f)) < 1e-5f);
    assert_true(fabsf(x[D + 5] - (16 * 0.6f + 11 * 0.8f)) < 1e-5f);
    assert_true(x[D + 2] == -18 && x[D + 7] == 13);

    static const uint8_t kinds[2][5] = {{0, 3, 3, 0, 3}, {0, 3, 0, 3, 0}};
    const char *names[] = {"modernbert", "st_modernbert"};
    double worst = 0;
    for (size_t f = 0; f < 2; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, FIXTURES "/%s", names[f]);
        lipi_model *m = load_fixture(names[f]);
        const lipi_config *c = &m->cfg;
        assert_string_equal(lipi_model_get_info(m)->model_type, "modernbert");
        assert_int_equal(c->window, 4);
        assert_memory_equal(c->layer_kind, kinds[f], 5);
        /* rope_parameters wins over global_rope_theta in st_modernbert */
        assert_true(c->rope_theta[0] == (f ? 50.0 : 160000.0));
        assert_true(c->rope_theta[1] == (f ? 10000.0 : 10.0));
        assert_null(m->unique[0].ln1_w);
        assert_non_null(m->unique[1].ln1_w);
        size_t C = c->hidden;
        inputs in;
        read_inputs(dir, &in);
        lipi_model_session *s = NULL;
        assert_int_equal(lipi_model_session_new(m, 3, &s, NULL), LIPI_OK);
        worst = fmax(worst, hidden_worst(s, dir, &in, C));
        if (f == 1)
            check_st_default(m, s, dir, &in, C);
        free_inputs(&in);
        lipi_model_session_free(s);
        lipi_model_free(m);
    }
    printf("  modernbert vs pytorch: max abs difference of the hidden states %.3g\n", worst);
    assert_true(worst <= TOL);
}

/* NomicBERT (nomic-embed-text-v1.5's layout): vocab_size padded to
 * pad_vocab_size_multiple, the gated width rounded up to 256, the whole
 * model within TOL on 3 threads, and the sentence-transformers output
 * (mean pooling + Normalize). */
static void test_nomic_bert_matches_pytorch(void **state)
{
    lipi_model *m = load_fixture("nomic_bert");
    const lipi_config *c = &m->cfg;
    assert_string_equal(lipi_model_get_info(m)->model_type, "nomic_bert");
    assert_int_equal(c->vocab, 128);
    assert_int_equal(c->inter, 256);
    assert_int_equal(c->act, LIPI_ACT_SILU);
    assert_true(c->attn_bias && c->mlp_bias && !c->mlp_out_bias);
    assert_int_equal(lipi_model_get_info(m)->max_tokens, 48);
    inputs in;
    read_inputs(FIXTURES "/nomic_bert", &in);
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 3, &s, NULL), LIPI_OK);
    double worst = hidden_worst(s, FIXTURES "/nomic_bert", &in, c->hidden);
    printf("  nomic_bert vs pytorch: max abs difference of the hidden states %.3g\n", worst);
    assert_true(worst <= TOL);
    check_st_default(m, s, FIXTURES "/nomic_bert", &in, c->hidden);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);
}

/* GTE (model_type "new"): the NTK-scaled rotary table against its formula
 * in double (and factor 1 the plain table bit for bit), both fixtures
 * (gte-multilingual-base's layout in a sentence-transformers folder; the
 * "new."-prefixed, token-type-free SiLU variant) within TOL on 3 threads,
 * the CLS + Normalize output, and INT8 within cosine 0.999 of F32. */
static double cosine(const float *a, const float *b, size_t n);

static void test_gte_ntk_rope_and_embeddings_match_pytorch(void **state)
{
    enum { P = 50, D = 10 };
    float rope[P * D], plain[P * D], one[P * D];
    lipi_rope_table_ntk(rope, P, D, 20000.0, 8.0);
    for (size_t p = 0; p < P; p++)
        for (size_t i = 0; i < D / 2; i++) {
            double a = (double)p * pow(160000.0, -(double)(2 * i) / D) / pow(8.0, 2.0 / D);
            assert_true(fabs(rope[p * D + i] - cos(a)) <= 2e-5);
            assert_true(fabs(rope[p * D + D / 2 + i] - sin(a)) <= 2e-5);
        }
    lipi_rope_table(plain, P, D, 20000.0);
    lipi_rope_table_ntk(one, P, D, 20000.0, 1.0);
    assert_memory_equal(plain, one, sizeof plain);
    assert_true(fabsf(plain[D + 1] - rope[D + 1]) > 1e-3f); /* the scaling is not a no-op */

    const char *names[] = {"gte", "gte_en"};
    lipi_model_load_options q8 = {LIPI_DTYPE_INT8};
    double worst = 0, low = 1;
    for (size_t f = 0; f < 2; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, FIXTURES "/%s", names[f]);
        lipi_model *m = load_fixture(names[f]), *m8 = NULL;
        const lipi_config *c = &m->cfg;
        const lipi_model_info *info = lipi_model_get_info(m);
        assert_string_equal(info->model_type, "new");
        assert_true(c->rope_ntk == (f ? 2.0 : 8.0));
        assert_true(c->rope_theta[0] == (f ? 500000.0 : 20000.0));
        assert_int_equal(c->type_vocab, f ? 0 : 1);
        assert_int_equal(c->act, f ? LIPI_ACT_SILU : LIPI_ACT_GELU);
        assert_int_equal(info->max_tokens, f ? 44 : 48);
        size_t C = c->hidden;
        inputs in;
        read_inputs(dir, &in);
        lipi_model_session *s = NULL;
        assert_int_equal(lipi_model_session_new(m, 3, &s, NULL), LIPI_OK);
        worst = fmax(worst, hidden_worst(s, dir, &in, C));
        float *e32 = malloc(in.B * 2 * C * sizeof(float)), *e8 = malloc(in.B * 2 * C * sizeof(float));
        if (f == 0) { /* gte-multilingual-base: CLS, then Normalize */
            char path[600];
            size_t shape[3], nd;
            assert_int_equal(info->pooling, LIPI_POOL_CLS);
            assert_true(info->normalize);
            assert_int_equal(lipi_model_embed(s, in.seqs, in.B, NULL, e32, NULL), LIPI_OK);
            snprintf(path, sizeof path, "%s/expected_default.npy", dir);
            float *want = read_npy(path, shape, &nd);
            assert_int_equal(mismatches(path, e32, want, in.B * C, TOL), 0);
            free(want);
        }
        assert_int_equal(lipi_model_load(dir, &q8, &m8, NULL), LIPI_OK);
        lipi_model_session *s8 = NULL;
        assert_int_equal(lipi_model_session_new(m8, 2, &s8, NULL), LIPI_OK);
        lipi_embed_options opt = {LIPI_POOL_CLS | LIPI_POOL_MEAN, 0};
        assert_int_equal(lipi_model_embed(s, in.seqs, in.B, &opt, e32, NULL), LIPI_OK);
        assert_int_equal(lipi_model_embed(s8, in.seqs, in.B, &opt, e8, NULL), LIPI_OK);
        for (size_t b = 0; b < 2 * in.B; b++)
            low = fmin(low, cosine(e32 + b * C, e8 + b * C, C));
        free(e32);
        free(e8);
        free_inputs(&in);
        lipi_model_session_free(s);
        lipi_model_session_free(s8);
        lipi_model_free(m);
        lipi_model_free(m8);
    }
    printf("  gte vs pytorch: max abs difference of the hidden states %.3g; int8 vs f32: "
           "lowest cosine %.5f\n",
           worst, low);
    assert_true(worst <= TOL);
    assert_true(low >= 0.999);
}

/* Tiled attention (online softmax over key tiles) against the plain one
 * that holds the whole score matrix: every query block of sequences of 1,
 * 7, 64, 513 and 4096 tokens, all keys, local windows (narrower and wider
 * than a tile) and a relative bias, within 1e-5. */
static void test_tiled_attention_equals_the_plain_one(void **state)
{
    static const size_t lens[] = {1, 7, 64, 513, 4096};
    static const size_t windows[] = {SIZE_MAX, 4, 300};
    enum { D = 24, LD = 3 * D };
    const size_t Lmax = 4096;
    float *qkv = malloc(Lmax * LD * sizeof(float));
    float *S = malloc(Lmax * Lmax * sizeof(float));
    float *want = malloc(Lmax * D * sizeof(float)), *got = malloc(Lmax * D * sizeof(float));
    float *work = malloc(LIPI_ATT_WORK(D) * sizeof(float));
    float *bias = malloc((2 * Lmax - 1) * sizeof(float));
    fill(qkv, Lmax * LD, 21, 1.5f);
    fill(bias, 2 * Lmax - 1, 22, 2.0f);
    double worst = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t wi = 0; wi < 3; wi++)
            for (int withb = 0; withb < 2; withb++) {
                size_t L = lens[li], w = windows[wi];
                if (withb && w != SIZE_MAX)
                    continue; /* no model has both */
                const float *rb = withb ? bias + Lmax - 1 : NULL;
                lipi_attention_plain(LIPI_GEMM_AUTO, L, D, qkv, qkv + D, qkv + 2 * D, LD,
                                     0.2f, rb, w, S, want, D);
                for (size_t i0 = 0; i0 < L; i0 += LIPI_ATT_TQ) {
                    size_t nq = L - i0 < LIPI_ATT_TQ ? L - i0 : LIPI_ATT_TQ;
                    lipi_attention_tiled(LIPI_GEMM_AUTO, L, D, i0, nq, qkv, qkv + D,
                                         qkv + 2 * D, LD, 0.2f, rb, w, work, got, D);
                }
                char what[64];
                snprintf(what, sizeof what, "tiled L=%zu window=%zu bias=%d", L, w, withb);
                assert_int_equal(mismatches(what, got, want, L * D, 1e-5), 0);
                for (size_t i = 0; i < L * D; i++)
                    worst = fmax(worst, fabs((double)got[i] - want[i]));
            }
    printf("  tiled vs plain attention: max abs difference %.3g\n", worst);
    free(qkv);
    free(S);
    free(want);
    free(got);
    free(work);
    free(bias);
}

/* Whole models with every sequence forced through the tiled attention:
 * within 1e-5 of the plain path, and 1 and 3 threads bit-identical. */
static void test_models_give_the_same_states_with_tiled_attention(void **state)
{
    const char *names[] = {"modernbert", "st_modernbert", "nomic_bert", "jina_v2", "mpnet",
                           "bert", "gte"};
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, FIXTURES "/%s", names[f]);
        lipi_model *m = load_fixture(names[f]);
        inputs in;
        read_inputs(dir, &in);
        size_t C = lipi_model_get_info(m)->hidden_size;
        float *h[3];
        size_t threads[3] = {1, 1, 3};
        lipi_attn_kind kinds[3] = {LIPI_ATTN_PLAIN, LIPI_ATTN_TILED, LIPI_ATTN_TILED};
        for (size_t k = 0; k < 3; k++) {
            lipi_model_session *s = NULL;
            assert_int_equal(lipi_model_session_new(m, threads[k], &s, NULL), LIPI_OK);
            lipi_model_session_set_attention(s, kinds[k]);
            h[k] = malloc(in.T * C * sizeof(float));
            assert_int_equal(lipi_model_forward(s, in.seqs, in.B, h[k], NULL), LIPI_OK);
            lipi_model_session_free(s);
        }
        assert_int_equal(mismatches(names[f], h[1], h[0], in.T * C, 1e-5), 0);
        assert_memory_equal(h[1], h[2], in.T * C * sizeof(float));
        for (size_t k = 0; k < 3; k++)
            free(h[k]);
        free_inputs(&in);
        lipi_model_free(m);
    }
}

static void test_portable_gemm_backend_matches_pytorch(void **state)
{
    for (size_t i = 0; i < N_FIXTURES; i++)
        check_fixture(ALL_FIXTURES[i], 2, LIPI_GEMM_PORTABLE);
}

static void test_sentence_transformers_folder_sets_pooling_and_normalize(void **state)
{
    lipi_model *m = load_fixture("st_mean");
    const lipi_model_info *info = lipi_model_get_info(m);
    assert_int_equal(info->pooling, LIPI_POOL_MEAN);
    assert_true(info->normalize);
    assert_int_equal(info->max_seq_length, 16);
    assert_int_equal(lipi_model_embed_dim(m, LIPI_POOL_DEFAULT), 32);
    assert_int_equal(lipi_model_embed_dim(m, LIPI_POOL_CLS | LIPI_POOL_MEAN), 64);

    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 1, &s, NULL), LIPI_OK);
    inputs in;
    read_inputs(FIXTURES "/st_mean", &in);
    float *out = malloc(in.B * 32 * sizeof(float));
    assert_int_equal(lipi_model_embed(s, in.seqs, in.B, NULL, out, NULL), LIPI_OK);
    size_t shape[3], nd;
    float *want = read_npy(FIXTURES "/st_mean/expected_default.npy", shape, &nd);
    assert_int_equal(mismatches("st_mean default", out, want, in.B * 32, TOL), 0);
    double norm = 0;
    for (size_t j = 0; j < 32; j++)
        norm += out[j] * out[j];
    assert_true(fabs(norm - 1.0) < 1e-5);
    free(want);
    free(out);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);

    /* A plain folder defaults to the first token, unnormalized. */
    m = load_fixture("bert");
    assert_int_equal(lipi_model_get_info(m)->pooling, LIPI_POOL_CLS);
    assert_false(lipi_model_get_info(m)->normalize);
    assert_int_equal(lipi_model_get_info(m)->max_tokens, 32);
    lipi_model_free(m);
    m = load_fixture("roberta");
    assert_int_equal(lipi_model_get_info(m)->max_tokens, 32); /* 34 positions - (1 + 1) */
    lipi_model_free(m);
}

static void test_sentence_transformers_dense_module_runs_after_pooling(void **state)
{
    lipi_model *m = load_fixture("st_cls_dense");
    const lipi_model_info *info = lipi_model_get_info(m);
    assert_int_equal(info->pooling, LIPI_POOL_CLS);
    assert_true(info->normalize);
    assert_int_equal(lipi_model_embed_dim(m, LIPI_POOL_DEFAULT), 24);
    lipi_model_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
    inputs in;
    read_inputs(FIXTURES "/st_cls_dense", &in);
    float *out = malloc(in.B * 64 * sizeof(float));
    assert_int_equal(lipi_model_embed(s, in.seqs, in.B, NULL, out, &err), LIPI_OK);
    size_t shape[3], nd;
    float *want = read_npy(FIXTURES "/st_cls_dense/expected_default.npy", shape, &nd);
    assert_int_equal(shape[1], 24);
    assert_int_equal(mismatches("st_cls_dense default", out, want, in.B * 24, TOL), 0);
    free(want);
    /* A pooling whose size the Dense module cannot take is refused. */
    lipi_embed_options two = {LIPI_POOL_CLS | LIPI_POOL_MEAN, -1};
    assert_int_equal(lipi_model_embed(s, in.seqs, in.B, &two, out, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "2_Dense"));
    free(out);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);

    /* in_features that do not match the pooled size */
    char dir[512], path[600];
    make_tmp_root();
    snprintf(dir, sizeof dir, "%s/dense", tmp_root);
    mkdir(dir, 0700);
    const char *files[] = {"config.json", "model.safetensors", "modules.json",
                           "1_Pooling/config.json", "2_Dense/model.safetensors"};
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/2_Dense", dir);
    mkdir(path, 0700);
    for (size_t i = 0; i < 5; i++) {
        char from[300];
        snprintf(from, sizeof from, FIXTURES "/st_cls_dense/%s", files[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        copy_file(from, path);
    }
    snprintf(path, sizeof path, "%s/2_Dense/config.json", dir);
    const char *cfg = "{\"in_features\": 64, \"out_features\": 24, \"bias\": true, "
                      "\"activation_function\": \"torch.nn.modules.activation.Tanh\"}";
    write_file(path, cfg, strlen(cfg));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "in_features 64, expected 32"));
    cfg = "{\"in_features\": 32, \"out_features\": 24, "
          "\"activation_function\": \"torch.nn.modules.activation.GELU\"}";
    write_file(path, cfg, strlen(cfg));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "activation_function"));
    cfg = "{\"in_features\": 32, \"out_features\": 20, "
          "\"activation_function\": \"torch.nn.modules.linear.Identity\"}";
    write_file(path, cfg, strlen(cfg));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "\"linear.weight\" of shape [20, 32]"));
}

/* Older sentence-transformers folders keep the transformer in a subfolder
 * named by modules.json (0_BERT/ ...); module paths stay inside the folder. */
static void test_sentence_transformers_transformer_subfolder(void **state)
{
    char dir[512], path[600], from[300];
    make_tmp_root();
    snprintf(dir, sizeof dir, "%s/st_sub", tmp_root);
    mkdir(dir, 0700);
    const char *sub[] = {"0_BERT", "1_Pooling"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
        mkdir(path, 0700);
    }
    const char *files[][2] = {{"config.json", "0_BERT/config.json"},
                              {"model.safetensors", "0_BERT/model.safetensors"},
                              {"sentence_bert_config.json", "0_BERT/sentence_bert_config.json"},
                              {"1_Pooling/config.json", "1_Pooling/config.json"}};
    for (size_t i = 0; i < 4; i++) {
        snprintf(from, sizeof from, FIXTURES "/st_mean/%s", files[i][0]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i][1]);
        copy_file(from, path);
    }
    snprintf(path, sizeof path, "%s/modules.json", dir);
    const char *mods = "[{\"idx\":0,\"name\":\"0\",\"path\":\"0_BERT\",\"type\":"
                       "\"sentence_transformers.models.Transformer\"},"
                       "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":"
                       "\"sentence_transformers.models.Pooling\"},"
                       "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":"
                       "\"sentence_transformers.models.Normalize\"}]";
    write_file(path, mods, strlen(mods));
    lipi_model *m = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_model_load(dir, NULL, &m, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  %s: %s\n", err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    assert_int_equal(lipi_model_get_info(m)->max_seq_length, 16);
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 1, &s, NULL), LIPI_OK);
    inputs in;
    read_inputs(FIXTURES "/st_mean", &in);
    float *out = malloc(in.B * 32 * sizeof(float));
    assert_int_equal(lipi_model_embed(s, in.seqs, in.B, NULL, out, NULL), LIPI_OK);
    size_t shape[3], nd;
    float *want = read_npy(FIXTURES "/st_mean/expected_default.npy", shape, &nd);
    assert_int_equal(mismatches("0_BERT subfolder", out, want, in.B * 32, TOL), 0);
    free(want);
    free(out);
    free_inputs(&in);
    lipi_model_session_free(s);
    lipi_model_free(m);

    mods = "[{\"idx\":0,\"name\":\"0\",\"path\":\"../st_mean\",\"type\":"
           "\"sentence_transformers.models.Transformer\"}]";
    write_file(path, mods, strlen(mods));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "inside the model folder"));
}

static void test_classifiers_give_pytorch_logits_and_labels(void **state)
{
    const char *names[] = {"bert_cls", "roberta_cls", "distilbert_cls", "mpnet_cls"};
    for (size_t i = 0; i < 4; i++) {
        char dir[256], path[300];
        snprintf(dir, sizeof dir, FIXTURES "/%s", names[i]);
        lipi_model *m = load_fixture(names[i]);
        const lipi_model_info *info = lipi_model_get_info(m);
        size_t NL = info->num_labels;
        assert_int_equal(NL, i == 2 ? 2 : 3);
        assert_string_equal(info->labels[NL - 1], i == 2 ? "POS" : "positive");
        lipi_model_session *s = NULL;
        assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
        inputs in;
        read_inputs(dir, &in);
        float *logits = malloc(in.B * NL * sizeof(float)), *probs = malloc(in.B * NL * sizeof(float));
        assert_int_equal(lipi_model_classify(s, in.seqs, in.B, logits, probs, NULL), LIPI_OK);
        size_t shape[3], nd;
        snprintf(path, sizeof path, "%s/expected_logits.npy", dir);
        float *want = read_npy(path, shape, &nd);
        assert_int_equal(mismatches("logits", logits, want, in.B * NL, TOL), 0);
        free(want);
        snprintf(path, sizeof path, "%s/expected_probs.npy", dir);
        want = read_npy(path, shape, &nd);
        assert_int_equal(mismatches("probs", probs, want, in.B * NL, TOL), 0);
        free(want);
        /* Probabilities alone work too. */
        assert_int_equal(lipi_model_classify(s, in.seqs, in.B, NULL, probs, NULL), LIPI_OK);
        free(logits);
        free(probs);
        free_inputs(&in);
        lipi_model_session_free(s);
        lipi_model_free(m);
    }
    lipi_model *m = load_fixture("bert");
    lipi_model_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_model_session_new(m, 1, &s, NULL), LIPI_OK);
    uint32_t ids[] = {5, 6};
    lipi_sequence q = {ids, NULL, 2};
    float p[4];
    assert_int_equal(lipi_model_classify(s, &q, 1, NULL, p, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "no classifier head"));
    lipi_model_session_free(s);
    lipi_model_free(m);
}

static lipi_model *load_fixture_dtype(const char *name, lipi_dtype dtype)
{
    char dir[256];
    snprintf(dir, sizeof dir, FIXTURES "/%s", name);
    lipi_model_load_options opt = {dtype};
    lipi_model *m = NULL;
    assert_int_equal(lipi_model_load(dir, &opt, &m, NULL), LIPI_OK);
    return m;
}

/* A batch big enough for several GEMM tiles and attention tasks. */
static void random_batch(size_t n, size_t maxlen, uint32_t seed, uint32_t vocab,
                         uint32_t **ids_out, lipi_sequence **seqs_out, size_t *T)
{
    uint32_t *ids = malloc(n * maxlen * sizeof(uint32_t));
    lipi_sequence *seqs = malloc(n * sizeof *seqs);
    uint32_t x = seed;
    *T = 0;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        size_t len = 1 + (x >> 8) % maxlen;
        for (size_t k = 0; k < len; k++) {
            x = x * 1664525u + 1013904223u;
            ids[i * maxlen + k] = 2 + (x >> 8) % (vocab - 2);
        }
        seqs[i] = (lipi_sequence){ids + i * maxlen, NULL, len};
        *T += len;
    }
    *ids_out = ids;
    *seqs_out = seqs;
}

static void test_one_and_two_threads_are_bit_identical(void **state)
{
    for (size_t f = 0; f < N_FIXTURES; f++) {
        lipi_model *m = load_fixture(ALL_FIXTURES[f]);
        const lipi_model_info *info = lipi_model_get_info(m);
        uint32_t *ids;
        lipi_sequence *seqs;
        size_t T, C = info->hidden_size;
        /* More than 2048 tokens: grouped, several groups; whole, several
         * row tiles, FFN blocks and attention groups. */
        random_batch(150, info->max_tokens, 7 + (uint32_t)f, (uint32_t)info->vocab_size, &ids,
                     &seqs, &T);
        assert_true(T > 2048);
        float *h[6];
        size_t threads[6] = {1, 2, 3, 1, 2, 3};
        for (size_t k = 0; k < 6; k++) {
            lipi_model_session *s = NULL;
            assert_int_equal(lipi_model_session_new(m, threads[k], &s, NULL), LIPI_OK);
            lipi_model_session_set_grouping(s, k < 3);
            h[k] = malloc(T * C * sizeof(float));
            assert_int_equal(lipi_model_forward(s, seqs, 150, h[k], NULL), LIPI_OK);
            assert_true((lipi_model_session_last_groups(s) >= 2) == (k < 3));
            lipi_model_session_free(s);
        }
        for (size_t k = 1; k < 6; k++)
            if (k != 3)
                assert_memory_equal(h[k < 3 ? 0 : 3], h[k], T * C * sizeof(float));
        for (size_t k = 0; k < 6; k++)
            free(h[k]);
        free(ids);
        free(seqs);
        lipi_model_free(m);
    }
}

static void test_packed_batch_equals_sequences_run_alone(void **state)
{
    lipi_model *m = load_fixture("roberta");
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
    uint32_t *ids;
    lipi_sequence *seqs;
    size_t T, C = 32;
    random_batch(150, 32, 99, 100, &ids, &seqs, &T);
    assert_true(T > 2048); /* several attention groups and FFN blocks */
    float *all = malloc(T * C * sizeof(float)), *one = malloc(32 * C * sizeof(float));
    assert_int_equal(lipi_model_forward(s, seqs, 150, all, NULL), LIPI_OK);
    size_t row = 0;
    for (size_t i = 0; i < 150; i++) {
        assert_int_equal(lipi_model_forward(s, &seqs[i], 1, one, NULL), LIPI_OK);
        assert_int_equal(mismatches("alone vs packed", one, all + row * C, seqs[i].len * C, 1e-5), 0);
        row += seqs[i].len;
    }
    free(all);
    free(one);
    free(ids);
    free(seqs);
    lipi_model_session_free(s);
    lipi_model_free(m);
}

/* lipi_model_embed_chunks gives, bit for bit, what a lipi_model_embed call
 * per run of `chunk` sequences gives (F32 and INT8, 1 and 2 threads): with
 * threads and every run grouped, in one region holding every run's groups
 * (last_groups: their sum); with a run that is not grouped (the last, one
 * sequence), a call per run. A bad sequence is named by its index in the
 * whole call. */
static void test_embed_chunks_equal_a_call_per_chunk(void **state)
{
    static const char *names[] = {"bert", "modernbert"};
    for (size_t f = 0; f < 2; f++)
        for (int q = 0; q < 2; q++) {
            lipi_model *m = load_fixture_dtype(names[f], q ? LIPI_DTYPE_INT8 : LIPI_DTYPE_F32);
            const lipi_model_info *info = lipi_model_get_info(m);
            size_t T, C = info->hidden_size, chunk = 16;
            uint32_t *ids;
            lipi_sequence *seqs;
            random_batch(97, 30, 71 + (uint32_t)f, (uint32_t)info->vocab_size, &ids, &seqs, &T);
            lipi_embed_options mean = {LIPI_POOL_MEAN, 0};
            float *ref = malloc(97 * C * sizeof(float)), *got = malloc(97 * C * sizeof(float));
            for (size_t n = 96; n <= 97; n++) { /* 97: a last run of one */
                lipi_model_session *s = NULL;
                assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
                size_t groups = 0;
                for (size_t i0 = 0; i0 < n; i0 += chunk) {
                    size_t k = n - i0 < chunk ? n - i0 : chunk;
                    assert_int_equal(lipi_model_embed(s, seqs + i0, k, &mean, ref + i0 * C, NULL),
                                     LIPI_OK);
                    groups += lipi_model_session_last_groups(s);
                }
                for (size_t threads = 1; threads <= 2; threads++) {
                    lipi_model_session *t = NULL;
                    assert_int_equal(lipi_model_session_new(m, threads, &t, NULL), LIPI_OK);
                    memset(got, 0, n * C * sizeof(float));
                    assert_int_equal(lipi_model_embed_chunks(t, seqs, n, chunk, &mean, got, NULL),
                                     LIPI_OK);
                    assert_memory_equal(ref, got, n * C * sizeof(float));
                    if (threads == 2)
                        assert_int_equal(lipi_model_session_last_groups(t), n == 96 ? groups : 0);
                    lipi_model_session_free(t);
                }
                lipi_model_session_free(s);
            }
            /* A bad id in the fifth run: named by its index in the call. */
            lipi_model_session *s = NULL;
            assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
            uint32_t keep = ids[70 * 30];
            ids[70 * 30] = (uint32_t)info->vocab_size;
            lipi_error err = {0};
            assert_int_equal(lipi_model_embed_chunks(s, seqs, 96, chunk, &mean, got, &err),
                             LIPI_EINVAL);
            assert_non_null(strstr(err.msg, "sequence 70, token 0"));
            ids[70 * 30] = keep;
            lipi_model_session_free(s);
            free(ref);
            free(got);
            free(ids);
            free(seqs);
            lipi_model_free(m);
        }
}

/* lipi_model_classify_chunks is lipi_model_classify on each run, bit for
 * bit (logits and probabilities, F32 and INT8, 1 and 2 threads), and with
 * 2 threads runs all the runs' groups in one region; a model without a
 * head says so. */
static void test_classify_chunks_equal_a_call_per_chunk(void **state)
{
    static const char *names[] = {"bert_cls", "distilbert_cls"};
    for (size_t f = 0; f < 2; f++)
        for (int q = 0; q < 2; q++) {
            lipi_model *m = load_fixture_dtype(names[f], q ? LIPI_DTYPE_INT8 : LIPI_DTYPE_F32);
            const lipi_model_info *info = lipi_model_get_info(m);
            size_t T, NL = info->num_labels, n = 97, chunk = 16, cells = n * NL;
            assert_true(NL >= 2);
            uint32_t *ids;
            lipi_sequence *seqs;
            random_batch(n, 30, 83 + (uint32_t)f, (uint32_t)info->vocab_size, &ids, &seqs, &T);
            float *ref = malloc(2 * cells * sizeof(float)), *got = malloc(2 * cells * sizeof(float));
            lipi_model_session *s = NULL;
            assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
            size_t groups = 0;
            for (size_t i0 = 0; i0 + chunk <= 96; i0 += chunk) {
                assert_int_equal(lipi_model_classify(s, seqs + i0, chunk, ref + i0 * NL,
                                                     ref + cells + i0 * NL, NULL),
                                 LIPI_OK);
                groups += lipi_model_session_last_groups(s);
            }
            assert_true(groups > 0); /* the runs are grouped: the join is tested */
            assert_int_equal(lipi_model_classify(s, seqs + 96, 1, ref + 96 * NL,
                                                 ref + cells + 96 * NL, NULL),
                             LIPI_OK);
            for (size_t threads = 1; threads <= 2; threads++) {
                lipi_model_session *t = NULL;
                assert_int_equal(lipi_model_session_new(m, threads, &t, NULL), LIPI_OK);
                memset(got, 0, 2 * cells * sizeof(float));
                /* 96: every run grouped, one region; 97: a last run of one. */
                assert_int_equal(lipi_model_classify_chunks(t, seqs, 96, chunk, got, got + cells,
                                                            NULL),
                                 LIPI_OK);
                if (threads == 2)
                    assert_int_equal(lipi_model_session_last_groups(t), groups);
                assert_int_equal(lipi_model_classify_chunks(t, seqs, n, chunk, NULL, got + cells,
                                                            NULL),
                                 LIPI_OK);
                assert_memory_equal(ref, got, 96 * NL * sizeof(float));
                assert_memory_equal(ref + cells, got + cells, cells * sizeof(float));
                lipi_model_session_free(t);
            }
            lipi_model_session_free(s);
            free(ref);
            free(got);
            free(ids);
            free(seqs);
            lipi_model_free(m);
        }
    lipi_model *m = load_fixture_dtype("bert", LIPI_DTYPE_F32);
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
    uint32_t ids[] = {5, 6};
    lipi_sequence seqs[] = {{ids, NULL, 2}, {ids, NULL, 1}, {ids, NULL, 2}};
    float p[12];
    lipi_error err = {0};
    assert_int_equal(lipi_model_classify_chunks(s, seqs, 3, 1, NULL, p, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "no classifier head"));
    lipi_model_session_free(s);
    lipi_model_free(m);
}

/* Short sentences run in groups of whole sequences, one group per task on
 * a lane: on 1, 2 and 3 threads the grouped batch is bit-identical, and it
 * gives what the whole batch (layer by layer over tiles) gives: INT8
 * exactly (integer GEMMs, per-token scales), F32 within 1e-5; mean
 * pooling reads the right rows. */
static void test_short_sentences_run_in_groups_like_the_whole_batch(void **state)
{
    static const char *names[] = {"bert", "modernbert", "albert"};
    for (size_t f = 0; f < 3; f++)
        for (int q = 0; q < 2; q++) {
            lipi_model *m = load_fixture_dtype(names[f], q ? LIPI_DTYPE_INT8 : LIPI_DTYPE_F32);
            const lipi_model_info *info = lipi_model_get_info(m);
            size_t T, C = info->hidden_size, n = 90;
            uint32_t *ids;
            lipi_sequence *seqs;
            random_batch(n, 30, 41 + (uint32_t)f, (uint32_t)info->vocab_size, &ids, &seqs, &T);
            float *whole = malloc(T * C * sizeof(float)), *g = malloc(T * C * sizeof(float));
            float *g1 = malloc(T * C * sizeof(float));
            float *pw = malloc(n * C * sizeof(float)), *pg = malloc(n * C * sizeof(float));
            lipi_embed_options mean = {LIPI_POOL_MEAN, 0};
            lipi_model_session *s = NULL;
            assert_int_equal(lipi_model_session_new(m, 2, &s, NULL), LIPI_OK);
            lipi_model_session_set_grouping(s, false);
            assert_int_equal(lipi_model_forward(s, seqs, n, whole, NULL), LIPI_OK);
            assert_int_equal(lipi_model_session_last_groups(s), 0);
            assert_int_equal(lipi_model_embed(s, seqs, n, &mean, pw, NULL), LIPI_OK);
            lipi_model_session_free(s);
            size_t threads[3] = {1, 2, 3};
            for (size_t k = 0; k < 3; k++) {
                assert_int_equal(lipi_model_session_new(m, threads[k], &s, NULL), LIPI_OK);
                assert_int_equal(lipi_model_forward(s, seqs, n, k ? g : g1, NULL), LIPI_OK);
                assert_true(lipi_model_session_last_groups(s) >= 2);
                assert_int_equal(lipi_model_embed(s, seqs, n, &mean, pg, NULL), LIPI_OK);
                lipi_model_session_free(s);
                if (k)
                    assert_memory_equal(g1, g, T * C * sizeof(float));
                if (q) {
                    assert_memory_equal(whole, g1, T * C * sizeof(float));
                    assert_memory_equal(pw, pg, n * C * sizeof(float));
                } else {
                    assert_int_equal(mismatches("grouped vs whole", g1, whole, T * C, 1e-5), 0);
                    assert_int_equal(mismatches("grouped vs whole, mean", pg, pw, n * C, 1e-5), 0);
                }
            }
            free(whole);
            free(g);
            free(g1);
            free(pw);
            free(pg);
            free(ids);
            free(seqs);
            lipi_model_free(m);
        }
}

static void test_bad_sequences_are_rejected_with_position(void **state)
{
    lipi_model *m = load_fixture("bert");
    lipi_model_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_model_session_new(m, 1, &s, NULL), LIPI_OK);
    float out[64 * 32];
    uint32_t ids[40] = {1, 2, 3, 100};
    uint32_t types[4] = {0, 0, 2, 0};
    lipi_sequence q = {ids, NULL, 4};
    assert_int_equal(lipi_model_forward(s, &q, 1, out, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "token 3: id 100"));
    ids[3] = 4;
    q.type_ids = types;
    assert_int_equal(lipi_model_forward(s, &q, 1, out, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "token type 2"));
    q = (lipi_sequence){ids, NULL, 0};
    assert_int_equal(lipi_model_forward(s, &q, 1, out, &err), LIPI_EINVAL);
    q.len = 33;
    assert_int_equal(lipi_model_forward(s, &q, 1, out, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "1..32"));
    q.len = 32;
    assert_int_equal(lipi_model_forward(s, &q, 1, out, &err), LIPI_OK);
    assert_int_equal(lipi_model_forward(s, &q, 0, out, &err), LIPI_OK);
    lipi_model_session_free(s);
    lipi_model_free(m);
}


static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

/* INT8 against F32 of the same checkpoint: cosine >= 0.99 for every
 * sentence's cls and mean embedding, on both GEMM backends. */
static void test_int8_embeddings_stay_within_cosine_099_of_f32(void **state)
{
    lipi_model_load_options q8 = {LIPI_DTYPE_INT8};
    lipi_gemm_kind kinds[] = {LIPI_GEMM_AUTO, LIPI_GEMM_PORTABLE};
    double worst = 1;
    for (size_t f = 0; f < N_FIXTURES; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, FIXTURES "/%s", ALL_FIXTURES[f]);
        lipi_model *m32 = load_fixture(ALL_FIXTURES[f]), *m8 = NULL;
        assert_int_equal(lipi_model_load(dir, &q8, &m8, NULL), LIPI_OK);
        inputs in;
        read_inputs(dir, &in);
        size_t C = lipi_model_get_info(m32)->hidden_size;
        float *e32 = malloc(in.B * 2 * C * sizeof(float)), *e8 = malloc(in.B * 2 * C * sizeof(float));
        lipi_embed_options opt = {LIPI_POOL_CLS | LIPI_POOL_MEAN, 0};
        lipi_model_session *s32 = NULL;
        assert_int_equal(lipi_model_session_new(m32, 1, &s32, NULL), LIPI_OK);
        assert_int_equal(lipi_model_embed(s32, in.seqs, in.B, &opt, e32, NULL), LIPI_OK);
        for (size_t k = 0; k < 2; k++) {
            lipi_model_session *s8 = NULL;
            assert_int_equal(lipi_model_session_new(m8, 2, &s8, NULL), LIPI_OK);
            lipi_model_session_set_gemm(s8, kinds[k]);
            assert_int_equal(lipi_model_embed(s8, in.seqs, in.B, &opt, e8, NULL), LIPI_OK);
            for (size_t b = 0; b < 2 * in.B; b++) {
                double cs = cosine(e32 + b * C, e8 + b * C, C);
                if (cs < 0.99)
                    fprintf(stderr, "  %s sentence %zu %s: cosine %.4f\n", ALL_FIXTURES[f],
                            b / 2, b % 2 ? "mean" : "cls", cs);
                assert_true(cs >= 0.99);
                worst = cs < worst ? cs : worst;
            }
            lipi_model_session_free(s8);
        }
        /* The int8 path is deterministic across thread counts too. */
        lipi_model_session *a = NULL, *b = NULL;
        assert_int_equal(lipi_model_session_new(m8, 1, &a, NULL), LIPI_OK);
        assert_int_equal(lipi_model_session_new(m8, 2, &b, NULL), LIPI_OK);
        assert_int_equal(lipi_model_embed(a, in.seqs, in.B, &opt, e32, NULL), LIPI_OK);
        assert_int_equal(lipi_model_embed(b, in.seqs, in.B, &opt, e8, NULL), LIPI_OK);
        assert_memory_equal(e32, e8, in.B * 2 * C * sizeof(float));
        lipi_model_session_free(a);
        lipi_model_session_free(b);
        lipi_model_session_free(s32);
        free(e32);
        free(e8);
        free_inputs(&in);
        lipi_model_free(m32);
        lipi_model_free(m8);
    }
    printf("  int8 vs f32: lowest cosine %.5f (VNNI: %s)\n", worst,
           lipi_igemm_vnni(LIPI_GEMM_AUTO) ? "yes" : "no");
}

static void test_int8_gemm_backends_are_exact(void **state)
{
    static const size_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {37, 45, 67}, {64, 96, 3072}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        uint8_t *a = malloc(M * K);
        int8_t *b = malloc(N * K);
        int32_t *co = malloc(N * sizeof(int32_t)), *c = malloc(M * N * sizeof(int32_t));
        int32_t *r = malloc(M * N * sizeof(int32_t));
        uint32_t x = 5;
        for (size_t k = 0; k < M * K; k++) {
            x = x * 1664525u + 1013904223u;
            a[k] = (uint8_t)(x >> 24); /* the full u8 range: 255 * 127 products */
        }
        for (size_t k = 0; k < N * K; k++) {
            x = x * 1664525u + 1013904223u;
            b[k] = (int8_t)((int)(x >> 24) % 255 - 127);
        }
        for (size_t n = 0; n < N; n++)
            co[n] = (int32_t)n * 1000 - 7;
        lipi_igemm_nt_ref(M, N, K, a, K, b, K, co, r, N);
        lipi_igemm_nt(LIPI_GEMM_AUTO, M, N, K, a, K, b, K, co, c, N);
        assert_memory_equal(c, r, M * N * sizeof(int32_t));
        lipi_igemm_nt(LIPI_GEMM_PORTABLE, M, N, K, a, K, b, K, co, c, N);
        assert_memory_equal(c, r, M * N * sizeof(int32_t));
        free(a);
        free(b);
        free(co);
        free(c);
        free(r);
    }
    float x[37], back[37];
    uint8_t q[37];
    float sc;
    fill(x, 37, 11, 3);
    x[5] = -3.5f;
    lipi_quantize_row(x, 37, q, &sc);
    assert_true(fabsf(sc - 3.5f / 127) < 1e-7f);
    assert_int_equal(q[5], 1); /* -127 + 128 */
    for (size_t k = 0; k < 37; k++) {
        back[k] = ((float)q[k] - 128) * sc;
        assert_true(fabsf(back[k] - x[k]) <= sc / 2 + 1e-6f);
    }
    /* The scale is max |x| / 127 exactly, found on the floats' bits: a NaN
     * is skipped as a float comparison skips it, -0 counts as 0, and a row
     * of zeros has scale 1. */
    x[20] = NAN;
    lipi_quantize_row(x, 37, q, &sc);
    assert_true(sc == 3.5f / 127.0f);
    x[20] = -1e30f;
    lipi_quantize_row(x, 37, q, &sc);
    assert_true(sc == 1e30f / 127.0f);
    assert_int_equal(q[20], 1);
    for (size_t k = 0; k < 37; k++)
        x[k] = k % 2 ? -0.0f : 0.0f;
    lipi_quantize_row(x, 37, q, &sc);
    assert_true(sc == 1.0f);
    assert_int_equal(q[0], 128);
    assert_int_equal(q[1], 128);
}

/* ======================================================================== */
/* Kernels against their references                                          */
/* ======================================================================== */

static void fill(float *x, size_t n, uint32_t seed, float scale)
{
    uint32_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 2 * scale;
    }
}

static void test_gemm_backends_match_reference(void **state)
{
    static const size_t shapes[][3] = {{1, 1, 1},   {3, 5, 7},     {37, 45, 67},
                                       {64, 96, 32}, {130, 70, 257}, {5, 300, 8}};
    lipi_gemm_kind kinds[] = {LIPI_GEMM_AUTO, LIPI_GEMM_PORTABLE};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        size_t lda = K + 3, ldb = K + 1, ldc = N + 2;
        float *a = malloc(M * lda * sizeof(float)), *b = malloc(N * ldb * sizeof(float));
        float *bn = malloc(K * (N + 5) * sizeof(float));
        float *c = malloc(M * ldc * sizeof(float)), *r = malloc(M * ldc * sizeof(float));
        fill(a, M * lda, 1, 1);
        fill(b, N * ldb, 2, 1);
        fill(bn, K * (N + 5), 3, 1);
        for (size_t k = 0; k < 2; k++) {
            lipi_sgemm_nt_ref(M, N, K, a, lda, b, ldb, r, ldc);
            lipi_sgemm_nt(kinds[k], M, N, K, a, lda, b, ldb, c, ldc);
            for (size_t row = 0; row < M; row++)
                assert_int_equal(mismatches("sgemm_nt", c + row * ldc, r + row * ldc, N, 1e-4), 0);
            lipi_sgemm_nn_ref(M, N, K, a, lda, bn, N + 5, r, ldc);
            lipi_sgemm_nn(kinds[k], M, N, K, a, lda, bn, N + 5, c, ldc);
            for (size_t row = 0; row < M; row++)
                assert_int_equal(mismatches("sgemm_nn", c + row * ldc, r + row * ldc, N, 1e-4), 0);
        }
        free(a);
        free(b);
        free(bn);
        free(c);
        free(r);
    }
    const char *name = lipi_gemm_backend();
    assert_true(!strcmp(name, "onednn") || !strcmp(name, "portable"));
}

static void test_kernels_match_reference(void **state)
{
    enum { T = 5, N = 203 };
    float x[T * N], r[T * N], w[N], b[N], res[T * N];
    fill(w, N, 4, 1);
    fill(b, N, 5, 1);
    fill(res, T * N, 6, 1);
    fill(x, T * N, 7, 10);
    memcpy(r, x, sizeof x);
    lipi_layernorm(x, T, N, w, b, 1e-12f);
    lipi_layernorm_ref(r, T, N, w, b, 1e-12f);
    assert_int_equal(mismatches("layernorm", x, r, T * N, 1e-5), 0);

    for (size_t L = 1; L < 40; L += 7) {
        fill(x, L, 8 + (uint32_t)L, 30);
        memcpy(r, x, L * sizeof(float));
        lipi_softmax(x, L, 0.125f);
        lipi_softmax_ref(r, L, 0.125f);
        assert_int_equal(mismatches("softmax", x, r, L, 1e-6), 0);
    }
    int acts[] = {LIPI_ACT_NONE, LIPI_ACT_GELU, LIPI_ACT_GELU_TANH, LIPI_ACT_RELU};
    for (size_t a = 0; a < 4; a++) {
        fill(x, T * N, 9, 12);
        memcpy(r, x, sizeof x);
        lipi_bias_act(x, T, N - 3, N, b, acts[a], a == 0 ? res : NULL, N);
        lipi_bias_act_ref(r, T, N - 3, N, b, acts[a], a == 0 ? res : NULL, N);
        assert_int_equal(mismatches("bias_act", x, r, T * N, 3e-6), 0);
    }
    /* GLU: x (T, 2I) -> (T, I), I = 101 */
    for (size_t a = 1; a < 4; a += 2) {
        fill(x, T * 202, 10, 3); /* products below 9: 3e-6 is a few ulp */
        lipi_glu(x, T, 101, acts[a], r);
        lipi_glu_ref(x, T, 101, acts[a], res);
        assert_int_equal(mismatches("glu", r, res, T * 101, 3e-6), 0);
    }
}

static void test_half_precision_conversions(void **state)
{
    assert_true(lipi_f16_to_f32(0x3c00) == 1.0f);
    assert_true(lipi_f16_to_f32(0xc000) == -2.0f);
    assert_true(lipi_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(lipi_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(isinf(lipi_f16_to_f32(0x7c00)));
    assert_true(isnan(lipi_f16_to_f32(0x7e00)));
    assert_true(lipi_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(lipi_bf16_to_f32(0xc0a0) == -5.0f);
}

/* ======================================================================== */
/* Hostile safetensors                                                       */
/* ======================================================================== */

/* Writes an 8-byte length + header + `data` bytes of payload. */
static void write_st(const char *path, uint64_t hlen_field, const char *header, size_t data)
{
    size_t hl = strlen(header);
    unsigned char *buf = calloc(1, 8 + hl + data + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(buf + 8, header, hl);
    write_file(path, buf, 8 + hl + data);
    free(buf);
}

static void expect_st_error(const char *header, uint64_t hlen, size_t data, const char *want1,
                            const char *want2)
{
    make_tmp_root();
    char path[400];
    snprintf(path, sizeof path, "%s/hostile.safetensors", tmp_root);
    write_st(path, hlen ? hlen : strlen(header), header, data);
    lipi_safetensors *st = NULL;
    lipi_error err = {0};
    lipi_status s = lipi_st_open(path, &st, &err);
    if (s == LIPI_OK || !strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fprintf(stderr, "  header %s: status %d, message \"%s\", wanted \"%s\"\n", header, s,
                err.msg, want1);
    assert_int_equal(s, LIPI_EFORMAT);
    assert_null(st);
    assert_string_equal(err.path, path);
    assert_non_null(strstr(err.msg, want1));
    if (want2)
        assert_non_null(strstr(err.msg, want2));
}

static void test_hostile_safetensors_are_rejected(void **state)
{
    /* offsets outside the file */
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 4,
                    "\"w\"", "outside the data area");
    /* begin after end */
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 0, 8,
                    "\"w\"", "outside");
    /* size disagrees with dtype x shape */
    expect_st_error("{\"w\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8,
                    "expected 6 bytes", "F16");
    /* overlapping tensors */
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                    0, 12, "overlap", "\"b\"");
    /* header over 100 MB */
    expect_st_error("{}", 200ull * 1000 * 1000, 0, "100 MB", NULL);
    /* header longer than the file (truncated) */
    expect_st_error("{}", 4096, 0, "does not fit", NULL);
    /* not JSON, and JSON that is not an object */
    expect_st_error("{\"w\": nope}", 0, 0, "not valid JSON", NULL);
    expect_st_error("[1, 2]", 0, 0, "JSON object", NULL);
    /* unknown dtype */
    expect_st_error("{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 0, 1,
                    "unknown dtype \"Q4\"", "\"w\"");
    /* shape product overflows size_t */
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                    "\"data_offsets\":[0,4]}}",
                    0, 4, "overflow", NULL);
    /* negative and missing fields */
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, 4,
                    "shape[0]", NULL);
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, 4, "data_offsets", NULL);
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                    0, 8, "not valid JSON", NULL);
    /* truncated files: shorter than the length field, and data cut short */
    make_tmp_root();
    char path[400];
    snprintf(path, sizeof path, "%s/short.safetensors", tmp_root);
    write_file(path, "\x10\x00\x00", 3);
    lipi_safetensors *st = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_st_open(path, &st, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "8-byte header length"));
    copy_file(FIXTURES "/bert/model.safetensors", path);
    assert_int_equal(truncate(path, 20000), 0);
    assert_int_equal(lipi_st_open(path, &st, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "outside the data area"));
    /* a missing file is an I/O error */
    snprintf(path, sizeof path, "%s/none.safetensors", tmp_root);
    assert_int_equal(lipi_st_open(path, &st, &err), LIPI_EIO);

    /* A well-formed file: metadata and non-float tensors are accepted. */
    snprintf(path, sizeof path, "%s/ok.safetensors", tmp_root);
    const char *good = "{\"__metadata__\":{\"format\":\"pt\"},"
             "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
             "\"e\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[8,8]},"
             "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}";
    write_st(path, strlen(good), good, 12);
    lipi_status ok = lipi_st_open(path, &st, &err);
    if (ok != LIPI_OK)
        fprintf(stderr, "  %s\n", err.msg);
    assert_int_equal(ok, LIPI_OK);
    assert_int_equal(st->n, 3);
    assert_non_null(lipi_st_find(st, "h"));
    assert_null(lipi_st_find(st, "__metadata__"));
    lipi_st_close(st);
}

/* Every truncation and many single-byte corruptions of a valid file are
 * either accepted or rejected with LIPI_EFORMAT; nothing crashes (the
 * sanitizer build checks the reads). */
static void test_corrupted_safetensors_never_crash(void **state)
{
    make_tmp_root();
    char path[400];
    snprintf(path, sizeof path, "%s/fuzz.safetensors", tmp_root);
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]}}";
    size_t hl = strlen(hdr), total = 8 + hl + 22;
    unsigned char *good = calloc(1, total), *buf = malloc(total);
    for (int i = 0; i < 8; i++)
        good[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(good + 8, hdr, hl);
    size_t accepted = 0, rejected = 0;
    for (size_t cut = 0; cut <= total; cut++) {
        write_file(path, good, cut);
        lipi_safetensors *st = NULL;
        lipi_error err = {0};
        lipi_status r = lipi_st_open(path, &st, &err);
        assert_true(r == LIPI_OK || r == LIPI_EFORMAT);
        assert_true((r == LIPI_OK) == (cut == total));
        lipi_st_close(st);
    }
    static const unsigned char values[] = {0, '"', '}', ']', ',', '-', '9', 0xff, '[', ':'};
    for (size_t pos = 0; pos < 8 + hl; pos++)
        for (size_t v = 0; v < sizeof values; v++) {
            memcpy(buf, good, total);
            buf[pos] = values[v];
            write_file(path, buf, total);
            lipi_safetensors *st = NULL;
            lipi_error err = {0};
            lipi_status r = lipi_st_open(path, &st, &err);
            assert_true(r == LIPI_OK || r == LIPI_EFORMAT);
            if (r == LIPI_OK) {
                /* Whatever was accepted lies inside the file. */
                for (size_t i = 0; i < st->n; i++)
                    assert_true(st->tensors[i].end <= total - 8 - hl ||
                                st->tensors[i].data + (st->tensors[i].end - st->tensors[i].begin) <=
                                    st->map + st->map_len);
                accepted++;
            } else {
                assert_true(err.msg[0] != '\0');
                rejected++;
            }
            lipi_st_close(st);
        }
    assert_true(rejected > accepted);
    free(good);
    free(buf);
}

/* ======================================================================== */
/* Config errors                                                             */
/* ======================================================================== */

static void expect_config_error(const char *json, const char *want1, const char *want2)
{
    lipi_config cfg;
    lipi_error err = {0};
    lipi_status st = lipi_config_parse(json, strlen(json), "config.json", &cfg, &err);
    if (st == LIPI_OK || !strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fprintf(stderr, "  config %s: status %d, \"%s\"\n", json, st, err.msg);
    assert_int_equal(st, LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, want1));
    if (want2)
        assert_non_null(strstr(err.msg, want2));
}

#define BERT_CFG_TAIL                                                                      \
    "\"vocab_size\":100,\"num_hidden_layers\":2,\"num_attention_heads\":4,"                \
    "\"intermediate_size\":64,\"max_position_embeddings\":32"

static void test_config_errors_name_the_field(void **state)
{
    expect_config_error("{\"model_type\":\"bert\"," BERT_CFG_TAIL "}", "missing field",
                        "\"hidden_size\"");
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":\"32\"," BERT_CFG_TAIL "}",
                        "\"hidden_size\"", "found a string");
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":-32," BERT_CFG_TAIL "}",
                        "\"hidden_size\"", "-32");
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":30," BERT_CFG_TAIL "}",
                        "\"hidden_size\"", "multiple of the 4 heads");
    expect_config_error("{\"model_type\":\"gpt2\",\"hidden_size\":32," BERT_CFG_TAIL "}",
                        "unsupported architecture \"gpt2\"", "bert, roberta, xlm-roberta");
    expect_config_error("{\"architectures\":[\"T5Model\"]}", "unsupported architecture \"T5Model\"",
                        "albert, distilbert");
    expect_config_error("{\"model_type\":\"mpnet\",\"hidden_size\":32,"
                        "\"relative_attention_num_buckets\":16," BERT_CFG_TAIL "}",
                        "\"relative_attention_num_buckets\"", "at least 32");
    expect_config_error("{\"vocab_size\":3}", "missing field \"model_type\"", "bert");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":36,"
                        "\"num_attention_heads\":4," BERT_CFG_TAIL "}",
                        "\"num_attention_heads\"", "even head size");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":32,"
                        "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"yarn\"}},"
                        BERT_CFG_TAIL "}",
                        "\"full_attention\"", "rope_type \"default\"");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":32,"
                        "\"layer_types\":[\"full_attention\"]," BERT_CFG_TAIL "}",
                        "\"layer_types\"", "array of 2 strings");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":32,"
                        "\"layer_types\":[\"full_attention\",\"chunked\"]," BERT_CFG_TAIL "}",
                        "\"layer_types\"[1]", "sliding_attention");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":32,"
                        "\"local_rope_theta\":-1," BERT_CFG_TAIL "}",
                        "\"local_rope_theta\"", "above 1");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":32,"
                        "\"norm_bias\":1," BERT_CFG_TAIL "}",
                        "\"norm_bias\"", "true or false");
    expect_config_error("{\"model_type\":\"nomic_bert\",\"vocab_size\":10,\"n_embd\":8,"
                        "\"n_layer\":1,\"n_head\":2,\"activation_function\":\"swiglu\","
                        "\"rotary_emb_fraction\":0.5}",
                        "\"rotary_emb_fraction\"", "expected 1");
    expect_config_error("{\"model_type\":\"nomic_bert\",\"vocab_size\":10,\"n_embd\":8,"
                        "\"n_layer\":1,\"n_head\":2,\"activation_function\":\"swiglu\","
                        "\"rotary_emb_fraction\":1,\"prenorm\":true}",
                        "\"prenorm\"", "not supported");
    expect_config_error("{\"model_type\":\"nomic_bert\",\"vocab_size\":10,\"n_embd\":8,"
                        "\"n_layer\":1,\"n_head\":2,\"activation_function\":\"glu\"}",
                        "\"activation_function\"", "swiglu");
    expect_config_error("{\"model_type\":\"modernbert\",\"hidden_size\":32,"
                        "\"architectures\":[\"ModernBertForSequenceClassification\"],"
                        BERT_CFG_TAIL "}",
                        "classifier heads", "ModernBertModel");
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":32,\"hidden_act\":\"swish\","
                        BERT_CFG_TAIL "}",
                        "\"hidden_act\"", "unsupported activation \"swish\"");
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":32,\"layer_norm_eps\":\"x\","
                        BERT_CFG_TAIL "}",
                        "\"layer_norm_eps\"", NULL);
    expect_config_error("{\"model_type\":\"distilbert\",\"vocab_size\":10,\"dim\":8}",
                        "missing field \"n_layers\"", NULL);
    expect_config_error("{\"model_type\":\"albert\",\"hidden_size\":32,\"num_hidden_groups\":3,"
                        BERT_CFG_TAIL "}",
                        "\"num_hidden_groups\"", NULL);
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":32,\"pad_token_id\":100,"
                        BERT_CFG_TAIL "}",
                        "\"pad_token_id\"", NULL);
    expect_config_error("{\"model_type\":\"bert\",\"architectures\":"
                        "[\"BertForSequenceClassification\"],\"id2label\":{\"0\":1},"
                        "\"hidden_size\":32," BERT_CFG_TAIL "}",
                        "\"id2label\"", NULL);
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":32,"
                        "\"position_embedding_type\":\"relative_key\"," BERT_CFG_TAIL "}",
                        "\"position_embedding_type\"", "\"relative_key\"");
    expect_config_error("{\"model_type\":\"roberta\",\"hidden_size\":32,"
                        "\"position_embedding_type\":\"sinusoidal\"," BERT_CFG_TAIL "}",
                        "\"sinusoidal\" is supported for model_type bert only", "roberta");
    expect_config_error("{\"model_type\":\"bert\",\"hidden_size\":32,"
                        "\"feed_forward_type\":\"swiglu\"," BERT_CFG_TAIL "}",
                        "\"feed_forward_type\"", "\"swiglu\"");
    expect_config_error("{\"model_type\":\"distilbert\",\"dim\":32,\"n_layers\":2,"
                        "\"n_heads\":4,\"hidden_dim\":64,\"feed_forward_type\":\"geglu\","
                        BERT_CFG_TAIL "}",
                        "\"geglu\" is supported for model_type bert only", NULL);
#define GTE_CFG_HEAD "{\"model_type\":\"new\",\"hidden_size\":32,"
    expect_config_error(GTE_CFG_HEAD "\"rope_scaling\":{\"type\":\"linear\",\"factor\":2},"
                        BERT_CFG_TAIL "}",
                        "\"rope_scaling\"", "found type \"linear\"");
    expect_config_error(GTE_CFG_HEAD "\"rope_scaling\":{\"type\":\"ntk\",\"factor\":0.5},"
                        BERT_CFG_TAIL "}",
                        "\"factor\"", "1..1e6");
    expect_config_error(GTE_CFG_HEAD "\"rope_scaling\":{\"type\":\"ntk\",\"factor\":2,"
                        "\"mixed_b\":0.5}," BERT_CFG_TAIL "}",
                        "\"mixed_b\"", "not supported");
    expect_config_error(GTE_CFG_HEAD "\"rope_scaling\":\"ntk\"," BERT_CFG_TAIL "}",
                        "\"rope_scaling\"", "found type");
    expect_config_error(GTE_CFG_HEAD "\"pack_qkv\":false," BERT_CFG_TAIL "}", "\"pack_qkv\"",
                        "expected true");
    expect_config_error(GTE_CFG_HEAD "\"logn_attention_scale\":true," BERT_CFG_TAIL "}",
                        "\"logn_attention_scale\"", "expected false");
    expect_config_error(GTE_CFG_HEAD "\"layer_norm_type\":\"rms_norm\"," BERT_CFG_TAIL "}",
                        "\"layer_norm_type\"", "\"layer_norm\"");
    expect_config_error(GTE_CFG_HEAD "\"position_embedding_type\":\"absolute\","
                        BERT_CFG_TAIL "}",
                        "\"position_embedding_type\"", "\"rope\"");
    expect_config_error(GTE_CFG_HEAD "\"rope_theta\":0.5," BERT_CFG_TAIL "}", "\"rope_theta\"",
                        "above 1");
    expect_config_error(GTE_CFG_HEAD "\"hidden_act\":\"mish\"," BERT_CFG_TAIL "}",
                        "\"hidden_act\"", "\"mish\"");
    expect_config_error(GTE_CFG_HEAD "\"architectures\":[\"NewForSequenceClassification\"],"
                        BERT_CFG_TAIL "}",
                        "classifier heads", "NewModel");
    expect_config_error("{\"model_type\":\"new\",\"hidden_size\":32,\"num_attention_heads\":"
                        "32,\"vocab_size\":100,\"num_hidden_layers\":2,\"intermediate_size\":64}",
                        "\"num_attention_heads\"", "even head size");
#undef GTE_CFG_HEAD
    expect_config_error("not json", "not valid JSON", NULL);
    expect_config_error("[]", "expected a JSON object", NULL);

    /* Defaults follow transformers: architecture from the class name. */
    lipi_config cfg;
    const char *ok = "{\"architectures\":[\"XLMRobertaForSequenceClassification\"],"
                     "\"hidden_size\":32," BERT_CFG_TAIL ",\"num_labels\":4}";
    assert_int_equal(lipi_config_parse(ok, strlen(ok), "c", &cfg, NULL), LIPI_OK);
    assert_int_equal(cfg.arch, LIPI_ARCH_ROBERTA);
    assert_string_equal(cfg.model_type, "xlm-roberta");
    assert_int_equal(cfg.pad_id, 1);
    assert_int_equal(cfg.pos_offset, 2);
    assert_int_equal(cfg.num_labels, 4);
    assert_string_equal(cfg.labels[3], "LABEL_3");
    assert_int_equal(cfg.act, LIPI_ACT_GELU);
    lipi_config_free(&cfg);
}

/* A temporary model folder: `config` text + a copy of a fixture's weights. */
static void make_model_dir(const char *name, const char *config, const char *weights_from,
                           char *dir, size_t cap)
{
    make_tmp_root();
    snprintf(dir, cap, "%s/%s", tmp_root, name);
    mkdir(dir, 0700);
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, config, strlen(config));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    char from[300];
    snprintf(from, sizeof from, FIXTURES "/%s/model.safetensors", weights_from);
    copy_file(from, path);
}

static void test_weights_that_do_not_match_the_config_are_named(void **state)
{
    char dir[512];
    lipi_model *m = NULL;
    lipi_error err = {0};
    make_model_dir("shape", "{\"model_type\":\"bert\",\"hidden_size\":32,\"vocab_size\":100,"
                            "\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                            "\"intermediate_size\":48,\"max_position_embeddings\":32}",
                   "bert", dir, sizeof dir);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "\"bert.encoder.layer.0.intermediate.dense.weight\""));
    assert_non_null(strstr(err.msg, "expected shape [48, 32]"));
    assert_non_null(strstr(err.msg, "found [64, 32]"));

    make_model_dir("layers", "{\"model_type\":\"bert\",\"hidden_size\":32,\"vocab_size\":100,"
                             "\"num_hidden_layers\":3,\"num_attention_heads\":4,"
                             "\"intermediate_size\":64,\"max_position_embeddings\":32}",
                   "bert", dir, sizeof dir);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "missing tensor \"bert.encoder.layer.2."));

    /* the wrong architecture for the weights */
    make_model_dir("arch", "{\"model_type\":\"distilbert\",\"dim\":32,\"vocab_size\":100,"
                           "\"n_layers\":2,\"n_heads\":4,\"hidden_dim\":64,"
                           "\"max_position_embeddings\":32}",
                   "bert", dir, sizeof dir);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "distilbert.embeddings.word_embeddings.weight"));

    /* sinusoidal positions with a learned table, and no table without them */
    make_model_dir("sinus_table", "{\"model_type\":\"bert\",\"hidden_size\":32,"
                                  "\"position_embedding_type\":\"sinusoidal\","
                                  BERT_CFG_TAIL "}",
                   "bert", dir, sizeof dir);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "unexpected tensor "
                                    "\"bert.embeddings.position_embeddings.weight\""));
    assert_non_null(strstr(err.msg, "\"sinusoidal\""));
    make_model_dir("sinus_none", "{\"model_type\":\"bert\",\"hidden_size\":27,"
                                 "\"vocab_size\":100,\"num_hidden_layers\":2,"
                                 "\"num_attention_heads\":3,\"intermediate_size\":41,"
                                 "\"max_position_embeddings\":33}",
                   "bert_sinusoidal", dir, sizeof dir);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "missing tensor "
                                    "\"bert.embeddings.position_embeddings.weight\""));
    assert_non_null(strstr(err.msg, "position_embedding_type \"sinusoidal\""));
    make_model_dir("alibi_table", "{\"model_type\":\"bert\",\"hidden_size\":32,"
                                  "\"position_embedding_type\":\"alibi\"," BERT_CFG_TAIL "}",
                   "bert", dir, sizeof dir);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "unexpected tensor "
                                    "\"bert.embeddings.position_embeddings.weight\""));
    assert_non_null(strstr(err.msg, "\"alibi\""));

    /* a folder without weights */
    make_tmp_root();
    snprintf(dir, sizeof dir, "%s/empty", tmp_root);
    mkdir(dir, 0700);
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EIO);
    assert_non_null(strstr(err.path, "config.json"));

    /* an unsupported sentence-transformers module */
    make_model_dir("stdense", "{\"model_type\":\"bert\",\"hidden_size\":32,\"vocab_size\":100,"
                              "\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                              "\"intermediate_size\":64,\"max_position_embeddings\":32}",
                   "bert", dir, sizeof dir);
    char path[600];
    snprintf(path, sizeof path, "%s/modules.json", dir);
    const char *mods = "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":"
                       "\"sentence_transformers.models.Transformer\"},"
                       "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":"
                       "\"sentence_transformers.models.Pooling\"}]";
    write_file(path, mods, strlen(mods));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EIO);
    assert_non_null(strstr(err.path, "1_Pooling/config.json"));
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    const char *pool = "{\"pooling_mode_lasttoken\": true}";
    write_file(path, pool, strlen(pool));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "pooling_mode_lasttoken"));
    pool = "{\"pooling_mode_max_tokens\": true, \"pooling_mode_cls_token\": true}";
    write_file(path, pool, strlen(pool));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_OK);
    assert_int_equal(lipi_model_get_info(m)->pooling, LIPI_POOL_CLS | LIPI_POOL_MAX);
    lipi_model_free(m);
    snprintf(path, sizeof path, "%s/modules.json", dir);
    mods = "[{\"idx\":0,\"name\":\"0\",\"path\":\"2_LayerNorm\",\"type\":"
           "\"sentence_transformers.models.LayerNorm\"}]";
    write_file(path, mods, strlen(mods));
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "unsupported module"));
}

/* ======================================================================== */
/* Allocation failures                                                       */
/* ======================================================================== */

typedef struct {
    const char *dir;
    const lipi_model_load_options *opt;
    const inputs *in;
    bool classify;
} model_job;

static lipi_status model_run(void *ctx, lipi_error *err)
{
    const model_job *j = ctx;
    float out[4 * 32], probs[4 * 3];
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    lipi_status st = lipi_model_load(j->dir, j->opt, &m, err);
    if (st == LIPI_OK)
        st = lipi_model_session_new(m, 2, &s, err);
    if (st == LIPI_OK)
        st = lipi_model_embed(s, j->in->seqs, j->in->B, NULL, out, err);
    if (st == LIPI_OK && j->classify)
        st = lipi_model_classify(s, j->in->seqs, j->in->B, NULL, probs, err);
    lipi_model_session_free(s);
    lipi_model_free(m);
    return st;
}

/* A batch of short sentences, run group by group on lanes (made on first
 * use) on 2 threads. */
static lipi_status grouped_run(void *ctx, lipi_error *err)
{
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    uint32_t *ids;
    lipi_sequence *seqs;
    size_t T;
    random_batch(20, 30, 5, 90, &ids, &seqs, &T);
    float *out = malloc(20 * 32 * sizeof(float));
    lipi_status st = lipi_model_load(ctx, NULL, &m, err);
    if (st == LIPI_OK)
        st = lipi_model_session_new(m, 2, &s, err);
    if (st == LIPI_OK)
        st = lipi_model_embed(s, seqs, 20, NULL, out, err);
    if (st == LIPI_OK)
        assert_true(lipi_model_session_last_groups(s) >= 2);
    lipi_model_session_free(s);
    lipi_model_free(m);
    free(out);
    free(ids);
    free(seqs);
    return st;
}

/* Fails the Nth allocation of lipi (jansson's included: JSON is parsed by
 * lipi_json_loadb) for N = 0, 1, 2, ... through loading, a session and a
 * forward pass. */
static void test_allocation_failures_are_reported_and_leak_nothing(void **state)
{
    inputs in;
    read_inputs(FIXTURES "/bert_cls", &in);
    lipi_model_load_options int8 = {LIPI_DTYPE_INT8};
    const model_job jobs[] = {{FIXTURES "/bert_cls", NULL, &in, true},
                              {FIXTURES "/st_cls_dense", NULL, &in, false},
                              {FIXTURES "/albert", &int8, &in, false}};
    for (size_t f = 0; f < 3; f++)
        assert_true(alloc_fail_loop(jobs[f].dir, model_run, (void *)&jobs[f]) > 10);
    assert_true(alloc_fail_loop(FIXTURES "/bert_cls", grouped_run, (void *)FIXTURES "/bert_cls") > 10);
    free_inputs(&in);

    /* A parse that runs out of memory is ENOMEM, not a syntax error. */
    json_t *j = NULL;
    lipi_error err = {0};
    const char *text = "{\"hidden_size\": 32}";
    alloc_fail_arm(0);
    lipi_status st = lipi_json_load(text, strlen(text), 0, "config.json", 0, &j, &err);
    alloc_fail_disarm();
    assert_int_equal(st, LIPI_ENOMEM);
    assert_null(j);
    assert_int_equal(lipi_json_load(text, strlen(text), 0, "config.json", 0, &j, &err), LIPI_OK);
    json_decref(j);
}

/* ======================================================================== */
/* .npy output                                                               */
/* ======================================================================== */

static void test_npy_writer_round_trips(void **state)
{
    make_tmp_root();
    char path[400];
    snprintf(path, sizeof path, "%s/out.npy", tmp_root);
    float rows[6] = {1, -2.5f, 3, 4e-8f, 5, 6};
    lipi_npy_writer *w = NULL;
    assert_int_equal(lipi_npy_writer_open(path, 2, &w, NULL), LIPI_OK);
    assert_int_equal(lipi_npy_writer_append(w, rows, 1, NULL), LIPI_OK);
    assert_int_equal(lipi_npy_writer_append(w, rows + 2, 2, NULL), LIPI_OK);
    assert_int_equal(lipi_npy_writer_close(w, NULL), LIPI_OK);
    size_t shape[3], nd;
    float *got = read_npy(path, shape, &nd);
    assert_int_equal(nd, 2);
    assert_int_equal(shape[0], 3);
    assert_int_equal(shape[1], 2);
    assert_memory_equal(got, rows, sizeof rows);
    free(got);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_size, 128 + sizeof rows); /* data starts 64-byte aligned */

    assert_int_equal(lipi_npy_write(path, rows, 0, 6, NULL), LIPI_OK);
    got = read_npy(path, shape, &nd);
    assert_int_equal(shape[0], 0);
    assert_int_equal(shape[1], 6);
    free(got);
    lipi_error err = {0};
    assert_int_equal(lipi_npy_write("/nonexistent/dir/x.npy", rows, 1, 1, &err), LIPI_EIO);
    assert_string_equal(err.path, "/nonexistent/dir/x.npy");
}

static int remove_tmp(void **state)
{
    if (tmp_root[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
        if (system(cmd) != 0)
            return -1;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_fixture_matches_pytorch_within_1e4),
        cmocka_unit_test(test_mpnet_relative_position_bias_matches_pytorch),
        cmocka_unit_test(test_sinusoidal_positions_match_the_formula_and_pytorch),
        cmocka_unit_test(test_alibi_slopes_and_jina_v2_match_pytorch),
        cmocka_unit_test(test_modernbert_rope_window_and_embeddings_match_pytorch),
        cmocka_unit_test(test_nomic_bert_matches_pytorch),
        cmocka_unit_test(test_gte_ntk_rope_and_embeddings_match_pytorch),
        cmocka_unit_test(test_tiled_attention_equals_the_plain_one),
        cmocka_unit_test(test_models_give_the_same_states_with_tiled_attention),
        cmocka_unit_test(test_portable_gemm_backend_matches_pytorch),
        cmocka_unit_test(test_sentence_transformers_folder_sets_pooling_and_normalize),
        cmocka_unit_test(test_sentence_transformers_dense_module_runs_after_pooling),
        cmocka_unit_test(test_sentence_transformers_transformer_subfolder),
        cmocka_unit_test(test_classifiers_give_pytorch_logits_and_labels),
        cmocka_unit_test(test_one_and_two_threads_are_bit_identical),
        cmocka_unit_test(test_embed_chunks_equal_a_call_per_chunk),
        cmocka_unit_test(test_classify_chunks_equal_a_call_per_chunk),
        cmocka_unit_test(test_short_sentences_run_in_groups_like_the_whole_batch),
        cmocka_unit_test(test_packed_batch_equals_sequences_run_alone),
        cmocka_unit_test(test_bad_sequences_are_rejected_with_position),
        cmocka_unit_test(test_gemm_backends_match_reference),
        cmocka_unit_test(test_int8_embeddings_stay_within_cosine_099_of_f32),
        cmocka_unit_test(test_int8_gemm_backends_are_exact),
        cmocka_unit_test(test_kernels_match_reference),
        cmocka_unit_test(test_half_precision_conversions),
        cmocka_unit_test(test_hostile_safetensors_are_rejected),
        cmocka_unit_test(test_corrupted_safetensors_never_crash),
        cmocka_unit_test(test_config_errors_name_the_field),
        cmocka_unit_test(test_weights_that_do_not_match_the_config_are_named),
        cmocka_unit_test(test_allocation_failures_are_reported_and_leak_nothing),
        cmocka_unit_test(test_npy_writer_round_trips),
    };
    return cmocka_run_group_tests_name("pipeline", tests, NULL, remove_tmp);
}

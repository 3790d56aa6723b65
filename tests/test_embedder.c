/* Tests of the public text -> vectors API (pipeline/pipeline.h) on the tiny
 * fixture models (tests/fixtures/models): the API gives exactly what
 * `lipi embed` and `lipi classify` write, on any number of threads and from
 * threads sharing one embedder, and says which texts it truncated. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "pipeline/pipeline.h"
#include "tests/cli_run.h"
#include "tests/model_dir.h"

static int setup(void **state)
{
    return md_setup("embedder");
}

static int teardown(void **state)
{
    md_teardown();
    return 0;
}


/* Opens dir with o and a session on `threads` threads; fails the test on
 * error. */
static void open_api(const char *dir, const lipi_embedder_options *o, size_t threads,
                     lipi_embedder **e, lipi_embedder_session **s)
{
    lipi_error err = {0};
    if (lipi_embedder_open(dir, o, e, &err) != LIPI_OK ||
        lipi_embedder_session_new(*e, threads, s, &err) != LIPI_OK)
        fail_msg("%s: %s", err.path, err.msg);
}

static void close_api(lipi_embedder *e, lipi_embedder_session *s)
{
    lipi_embedder_session_free(s);
    lipi_embedder_free(e);
}

/* NLINES lines of 1..24 word-level tokens "tN" (N in 5..99, ids every
 * fixture has), from a fixed LCG so every run sees the same text. More
 * lines than one batch of 32, and some longer than st_mean's 16 tokens. */
#define NLINES 45
typedef struct {
    char buf[NLINES * 24 * 4 + 1]; /* "t99 " per word, '\n' for the last space */
    const char *ptrs[NLINES];
    size_t lens[NLINES];
} lines;

static void make_lines(lines *l)
{
    uint32_t x = 12345;
    char *p = l->buf;
    for (size_t i = 0; i < NLINES; i++) {
        x = x * 1103515245u + 12345u;
        size_t words = 1 + (x >> 16) % 24;
        l->ptrs[i] = p;
        for (size_t w = 0; w < words; w++) {
            x = x * 1103515245u + 12345u;
            p += sprintf(p, "%st%u", w ? " " : "", 5 + (x >> 16) % 95);
        }
        l->lens[i] = (size_t)(p - l->ptrs[i]);
        *p++ = '\n';
    }
    *p = '\0';
}

/* Vectors of the lines through the API on `threads` threads, with
 * `lipi embed`'s defaults (batch 32, the model's normalization). */
static float *api_embed(const char *dir, const lines *l, size_t threads, size_t *dim,
                        uint8_t *truncated)
{
    lipi_embedder_options o = {.batch = 32, .normalize = -1};
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    /* On 3 threads with NULL options, which must mean the same: all as the
     * model folder says, batches of 32. */
    open_api(dir, threads == 3 ? NULL : &o, threads, &e, &s);
    *dim = lipi_embedder_dim(e);
    float *v = malloc(NLINES * *dim * sizeof *v);
    assert_non_null(v);
    if (lipi_embedder_embed(s, l->ptrs, l->lens, NLINES, v, truncated, &err) != LIPI_OK)
        fail_msg("line %zu: %s", err.line, err.msg);
    close_api(e, s);
    return v;
}

/* The first differing float, printed, fails the test. */
static void assert_same_floats(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
            fail_msg("%s: float %zu differs: %.9g vs %.9g", what, i, (double)a[i], (double)b[i]);
}

/* ======================================================================== */
/* embed                                                                     */
/* ======================================================================== */

static void test_api_embed_equals_lipi_embed_npy_bit_for_bit_on_1_and_3_threads(void **state)
{
    static const char *const fixtures[] = {"st_mean", "st_cls_dense", "bert",      "roberta",
                                           "xlmr",    "albert",       "distilbert"};
    lines l;
    make_lines(&l);
    md_write(md_path("lines.txt"), l.buf, strlen(l.buf));
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        const char *dir = md_model(fixtures[f]);
        char npy[600];
        snprintf(npy, sizeof npy, "%s.npy", dir);
        cli_result r = cli_runf("embed --quiet -m %s -o %s %s", dir, npy, md_path("lines.txt"));
        if (r.code != 0)
            fail_msg("%s: lipi embed exited %d: %s", fixtures[f], r.code, r.err);
        cli_result_free(&r);
        size_t rows, cols, dim;
        float *cli = md_read_npy(npy, &rows, &cols);
        assert_non_null(cli);
        assert_int_equal(rows, NLINES);
        for (size_t threads = 1; threads <= 3; threads += 2) {
            float *api = api_embed(dir, &l, threads, &dim, NULL);
            assert_int_equal(dim, cols);
            char what[128];
            snprintf(what, sizeof what, "%s, %zu thread(s)", fixtures[f], threads);
            assert_same_floats(api, cli, NLINES * dim, what);
            free(api);
        }
        free(cli);
    }
}

/* With threads a session takes several batches at a time
 * (lipi_embedder_session_texts) and runs their short sentences' groups
 * together, as many batches a call as stay within a token budget: the
 * vectors are those of one batch at a time on one thread. 450 texts in
 * batches of 100: 400 taken at once, ~5,500 tokens, so two model calls. */
#define NJOIN 450
static void test_batches_joined_on_threads_give_the_vectors_of_one_batch_at_a_time(void **state)
{
    static const char *const fixtures[] = {"bert", "st_mean"};
    lines l;
    make_lines(&l);
    const char *texts[NJOIN];
    size_t lens[NJOIN];
    for (size_t i = 0; i < NJOIN; i++) {
        texts[i] = l.ptrs[i % NLINES];
        lens[i] = l.lens[i % NLINES];
    }
    lipi_embedder_options o = {.batch = 100, .normalize = -1};
    for (size_t f = 0; f < 2; f++) {
        const char *dir = md_model(fixtures[f]);
        lipi_embedder *e = NULL;
        lipi_embedder_session *one = NULL, *two = NULL;
        lipi_error err = {0};
        open_api(dir, &o, 1, &e, &one);
        assert_int_equal(lipi_embedder_session_new(e, 2, &two, &err), LIPI_OK);
        assert_int_equal(lipi_embedder_session_texts(one), 100);
        assert_int_equal(lipi_embedder_session_texts(two), 400);
        size_t dim = lipi_embedder_dim(e);
        float *ref = malloc(NJOIN * dim * sizeof *ref), *got = malloc(NJOIN * dim * sizeof *got);
        assert_non_null(ref);
        assert_non_null(got);
        for (size_t i0 = 0; i0 < NJOIN; i0 += 100) {
            size_t m = NJOIN - i0 < 100 ? NJOIN - i0 : 100;
            assert_int_equal(
                lipi_embedder_embed(one, texts + i0, lens + i0, m, ref + i0 * dim, NULL, &err),
                LIPI_OK);
        }
        assert_int_equal(lipi_embedder_embed(two, texts, lens, NJOIN, got, NULL, &err), LIPI_OK);
        assert_same_floats(ref, got, NJOIN * dim, fixtures[f]);
        free(ref);
        free(got);
        lipi_embedder_session_free(one);
        close_api(e, two);
    }
}

/* One call of case `what` on texts (or pairs) [i0, i0 + m): 0 classify,
 * 1 classify_pairs, 2 score_pairs' logits, 3 embed (with dimensions). */
static lipi_status joined_case(int what, lipi_embedder_session *s, const char *const *a,
                               const size_t *alens, const char *const *b, const size_t *blens,
                               size_t m, float *out)
{
    switch (what) {
    case 0: return lipi_embedder_classify(s, a, alens, m, out, NULL, NULL);
    case 1: return lipi_embedder_classify_pairs(s, a, alens, b, blens, m, out, NULL, NULL);
    case 2: return lipi_embedder_score_pairs(s, a, alens, b, blens, m, 0, true, out, NULL, NULL);
    default: return lipi_embedder_embed(s, a, alens, m, out, NULL, NULL);
    }
}

/* Classify, pairs and --dimensions take several batches at a time on
 * threads too: what one batch at a time gives, bit for bit. */
static void test_classify_pairs_and_dimensions_joined_on_threads_give_one_batch_at_a_time(
    void **state)
{
    static const struct {
        const char *model;
        int what;
    } cases[] = {{"bert_cls", 0}, {"bert_cls", 1}, {"bert_rerank", 2}, {"st_mean", 3}};
    lines l;
    make_lines(&l);
    const char *a[NJOIN], *b[NJOIN];
    size_t alens[NJOIN], blens[NJOIN];
    for (size_t i = 0; i < NJOIN; i++) {
        a[i] = l.ptrs[i % NLINES];
        alens[i] = l.lens[i % NLINES];
        b[i] = l.ptrs[(i + 7) % NLINES];
        blens[i] = l.lens[(i + 7) % NLINES];
    }
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int what = cases[c].what;
        lipi_embedder_options o = {.batch = 100, .normalize = -1, .dimensions = what == 3 ? 8 : 0};
        lipi_embedder *e = NULL;
        lipi_embedder_session *one = NULL, *two = NULL;
        lipi_error err = {0};
        open_api(md_model(cases[c].model), &o, 1, &e, &one);
        assert_int_equal(lipi_embedder_session_new(e, 2, &two, &err), LIPI_OK);
        assert_int_equal(lipi_embedder_session_texts(two), 400);
        size_t k = what == 3 ? lipi_embedder_dim(e) : what == 2 ? 1 : lipi_embedder_label_count(e);
        assert_true(k >= 1);
        float *ref = malloc(NJOIN * k * sizeof *ref), *got = malloc(NJOIN * k * sizeof *got);
        assert_non_null(ref);
        assert_non_null(got);
        for (size_t i0 = 0; i0 < NJOIN; i0 += 100) {
            size_t m = NJOIN - i0 < 100 ? NJOIN - i0 : 100;
            assert_int_equal(joined_case(what, one, a + i0, alens + i0, b + i0, blens + i0, m,
                                         ref + i0 * k),
                             LIPI_OK);
        }
        assert_int_equal(joined_case(what, two, a, alens, b, blens, NJOIN, got), LIPI_OK);
        assert_same_floats(ref, got, NJOIN * k, cases[c].model);
        free(ref);
        free(got);
        lipi_embedder_session_free(one);
        close_api(e, two);
    }
}

static void test_truncation_flags_mark_exactly_the_texts_over_the_limit(void **state)
{
    /* st_mean takes 16 tokens (sentence_bert_config.json); the word-level
     * tokenizer adds no special tokens, so words = tokens. */
    const char *dir = md_model("st_mean");
    static const size_t words[] = {3, 20, 16, 17, 1};
    char buf[5][256];
    const char *texts[5];
    size_t lens[5];
    for (size_t i = 0; i < 5; i++) {
        buf[i][0] = '\0';
        for (size_t w = 0; w < words[i]; w++)
            sprintf(buf[i] + strlen(buf[i]), "%st%zu", w ? " " : "", 20 + w);
        texts[i] = buf[i];
        lens[i] = strlen(buf[i]);
    }
    lipi_embedder_options o = {.batch = 2, .normalize = -1}; /* flags across chunks */
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    open_api(dir, &o, 1, &e, &s);
    assert_int_equal(lipi_embedder_max_length(e), 16);
    size_t dim = lipi_embedder_dim(e);
    float *v = malloc(5 * dim * sizeof *v);
    assert_non_null(v);
    uint8_t flags[5];
    memset(flags, 7, sizeof flags);
    assert_int_equal(lipi_embedder_embed(s, texts, lens, 5, v, flags, &err), LIPI_OK);
    static const uint8_t want[5] = {0, 1, 0, 1, 0};
    assert_memory_equal(flags, want, 5);
    /* A truncated text is its first 16 words: text 2 (20 words) gives what
     * text 3 (exactly those 16) gives. */
    assert_same_floats(v + 1 * dim, v + 2 * dim, dim, "20 words cut to 16 vs 16 words");
    assert_same_floats(v + 3 * dim, v + 2 * dim, dim, "17 words cut to 16 vs 16 words");
    close_api(e, s);

    /* strict: the first text over the limit is an error naming it. */
    o.strict = true;
    open_api(dir, &o, 1, &e, &s);
    memset(&err, 0, sizeof err);
    assert_int_equal(lipi_embedder_embed(s, texts, lens, 5, v, NULL, &err), LIPI_EINVAL);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.msg, "more tokens than the 16"));
    /* Fine without the long ones. */
    const char *ok[] = {texts[0], texts[2]};
    size_t oklen[] = {lens[0], lens[2]};
    assert_int_equal(lipi_embedder_embed(s, ok, oklen, 2, v, NULL, &err), LIPI_OK);
    close_api(e, s);
    free(v);
}

/* One embedder, two threads, a session each, embedding the same lines
 * several times while the other does. */
typedef struct {
    const lipi_embedder *e;
    const lines *l;
    size_t threads;
    float *out;          /* (NLINES, dim), the last round */
    lipi_status st;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    w->st = lipi_embedder_session_new(w->e, w->threads, &s, &err);
    for (int round = 0; round < 5 && w->st == LIPI_OK; round++)
        w->st = lipi_embedder_embed(s, w->l->ptrs, w->l->lens, NLINES, w->out, NULL, &err);
    lipi_embedder_session_free(s);
    return NULL;
}

static void test_one_embedder_shared_by_two_threads_gives_identical_vectors(void **state)
{
    const char *dir = md_model("st_mean");
    lines l;
    make_lines(&l);
    size_t dim;
    float *want = api_embed(dir, &l, 1, &dim, NULL);
    lipi_embedder_options o = {.batch = 32, .normalize = -1};
    lipi_embedder *e = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_embedder_open(dir, &o, &e, &err), LIPI_OK);
    worker w[2] = {{e, &l, 1, NULL, LIPI_EINVAL}, {e, &l, 2, NULL, LIPI_EINVAL}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i].out = calloc(NLINES * dim, sizeof *w[i].out);
        assert_non_null(w[i].out);
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].st, LIPI_OK);
        assert_same_floats(w[i].out, want, NLINES * dim, i ? "thread 2" : "thread 1");
        free(w[i].out);
    }
    lipi_embedder_free(e);
    free(want);
}

/* ======================================================================== */
/* classify                                                                  */
/* ======================================================================== */

static void test_api_classify_equals_lipi_classify(void **state)
{
    const char *dir = md_model("bert_cls");
    lines l;
    make_lines(&l);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "classify --quiet -m %s", dir);
    cli_result r = cli_run(cmd, l.buf, strlen(l.buf));
    if (r.code != 0)
        fail_msg("lipi classify exited %d: %s", r.code, r.err);

    lipi_embedder_options o = {.batch = 32, .normalize = -1};
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    open_api(dir, &o, 3, &e, &s);
    assert_int_equal(lipi_embedder_label_count(e), 3);
    assert_string_equal(lipi_embedder_label(e, 0), "negative");
    assert_string_equal(lipi_embedder_label(e, 2), "positive");
    assert_null(lipi_embedder_label(e, 3));
    float probs[NLINES * 3];
    assert_int_equal(lipi_embedder_classify(s, l.ptrs, l.lens, NLINES, probs, NULL, &err),
                     LIPI_OK);
    /* The command prints %.6g: the API's probabilities printed the same way
     * are its output, line for line. */
    size_t cap = 256 * NLINES, len = 0;
    char *want = malloc(cap);
    assert_non_null(want);
    for (size_t i = 0; i < NLINES; i++) {
        const float *p = probs + 3 * i;
        size_t best = 0;
        for (size_t j = 1; j < 3; j++)
            if (p[j] > p[best])
                best = j;
        len += (size_t)snprintf(want + len, cap - len,
                                "{\"label\":\"%s\",\"score\":%.6g,\"probs\":{\"negative\":%.6g,"
                                "\"neutral\":%.6g,\"positive\":%.6g}}\n",
                                lipi_embedder_label(e, best), (double)p[best], (double)p[0],
                                (double)p[1], (double)p[2]);
    }
    assert_string_equal(r.out, want);
    free(want);
    cli_result_free(&r);

    /* An embedding model has no head. */
    close_api(e, s);
    open_api(md_model("bert"), &o, 1, &e, &s);
    assert_int_equal(lipi_embedder_label_count(e), 0);
    assert_int_equal(lipi_embedder_classify(s, l.ptrs, l.lens, 1, probs, NULL, &err),
                     LIPI_EINVAL);
    close_api(e, s);
}

/* The word-level fixture tokenizer has no post-processor, so a pair is
 * a's ids then b's, type ids 0 then 1 (as Hugging Face encodes a pair
 * without a template); the model must see both. */
static void test_classify_pairs_gives_the_model_both_texts_and_their_type_ids(void **state)
{
    const char *dir = md_model("bert_cls");
    char a0[256] = "", b0[256] = "";
    for (int w = 0; w < 20; w++) { /* 40 tokens: over bert_cls' 32 */
        sprintf(a0 + strlen(a0), "%st%d", w ? " " : "", 10 + w);
        sprintf(b0 + strlen(b0), "%st%d", w ? " " : "", 50 + w);
    }
    const char *a[] = {"t4 t9 t11", a0}, *b[] = {"t30 t31", b0};
    size_t alen[] = {strlen(a[0]), strlen(a[1])}, blen[] = {strlen(b[0]), strlen(b[1])};

    lipi_embedder_options o = {.batch = 32, .normalize = -1};
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    open_api(dir, &o, 2, &e, &s);
    float got[2 * 3];
    uint8_t flags[2] = {7, 7};
    assert_int_equal(lipi_embedder_classify_pairs(s, a, alen, b, blen, 2, got, flags, &err),
                     LIPI_OK);
    assert_int_equal(flags[0], 0);
    assert_int_equal(flags[1], 1);

    /* Longest-first truncation of 20 + 20 to 32: 16 of each. */
    uint32_t ids0[] = {4, 9, 11, 30, 31}, types0[] = {0, 0, 0, 1, 1};
    uint32_t ids1[32], types1[32];
    for (int k = 0; k < 16; k++) {
        ids1[k] = (uint32_t)(10 + k);
        types1[k] = 0;
        ids1[16 + k] = (uint32_t)(50 + k);
        types1[16 + k] = 1;
    }
    lipi_model *m = NULL;
    lipi_model_session *ms = NULL;
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_OK);
    assert_int_equal(lipi_model_session_new(m, 1, &ms, &err), LIPI_OK);
    lipi_sequence seqs[] = {{ids0, types0, 5}, {ids1, types1, 32}};
    float want[2 * 3];
    assert_int_equal(lipi_model_classify(ms, seqs, 2, NULL, want, &err), LIPI_OK);
    assert_same_floats(got, want, 2 * 3, "pairs vs ids with type ids");

    /* strict: the long pair is an error naming it. */
    close_api(e, s);
    o.strict = true;
    open_api(dir, &o, 1, &e, &s);
    memset(&err, 0, sizeof err);
    assert_int_equal(lipi_embedder_classify_pairs(s, a, alen, b, blen, 2, got, NULL, &err),
                     LIPI_EINVAL);
    assert_int_equal(err.line, 2);
    lipi_model_session_free(ms);
    lipi_model_free(m);
    close_api(e, s);
}

/* ======================================================================== */
/* cross-encoders (rerankers)                                                */
/* ======================================================================== */

#define TORCH_TOL 1e-4

/* Fails on the first of n floats further than tol from want. */
static void assert_near_floats(const float *got, const float *want, size_t n, double tol,
                               const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - (double)want[i]) <= tol))
            fail_msg("%s: float %zu: %.7g, PyTorch %.7g", what, i, (double)got[i],
                     (double)want[i]);
}

/* bert_rerank is a BertForSequenceClassification with one label; its
 * fixture sequences 1, 2 and 4 are pairs (type ids 0 then 1), which the
 * word-level tokenizer gives back from "a<TAB>b" halves. */
static void test_score_pairs_of_a_one_label_cross_encoder_are_pytorch_sigmoids(void **state)
{
    const char *dir = md_model("bert_rerank");
    const char *a[] = {"t20 t50 t7", "t68 t10 t88 t27 t39 t98", "t80 t32 t74 t48"};
    const char *b[] = {"t4 t89 t98 t44", "t20 t83 t23 t25 t63 t78", "t72 t70 t71 t26 t46"};
    size_t alen[3], blen[3];
    for (int i = 0; i < 3; i++) {
        alen[i] = strlen(a[i]);
        blen[i] = strlen(b[i]);
    }
    static const size_t rows_of[] = {0, 1, 3};
    size_t rows, cols;
    float *logits = md_read_npy("tests/fixtures/models/bert_rerank/expected_logits.npy", &rows,
                                &cols);
    float *probs = md_read_npy("tests/fixtures/models/bert_rerank/expected_probs.npy", &rows,
                               &cols);
    assert_non_null(logits);
    assert_non_null(probs);
    assert_int_equal(cols, 1);
    float want_logit[3], want_prob[3];
    for (int i = 0; i < 3; i++) {
        want_logit[i] = logits[rows_of[i]];
        want_prob[i] = probs[rows_of[i]];
    }

    lipi_embedder_options o = {.batch = 2, .normalize = -1}; /* 2: two chunks */
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    open_api(dir, &o, 2, &e, &s);
    assert_int_equal(lipi_embedder_label_count(e), 1);
    float got[3];
    assert_int_equal(lipi_embedder_score_pairs(s, a, alen, b, blen, 3, 0, false, got, NULL, &err),
                     LIPI_OK);
    assert_near_floats(got, want_prob, 3, TORCH_TOL, "sigmoid scores");
    assert_int_equal(lipi_embedder_score_pairs(s, a, alen, b, blen, 3, 0, true, got, NULL, &err),
                     LIPI_OK);
    assert_near_floats(got, want_logit, 3, TORCH_TOL, "raw logits");
    /* classify_pairs gives the same sigmoid, not a softmax over one label (1). */
    assert_int_equal(lipi_embedder_classify_pairs(s, a, alen, b, blen, 3, got, NULL, &err),
                     LIPI_OK);
    assert_near_floats(got, want_prob, 3, TORCH_TOL, "classify_pairs");
    /* A single text too: the fixture's sequence 3 is [43]. */
    const char *one = "t43";
    size_t one_len = 3;
    assert_int_equal(lipi_embedder_classify(s, &one, &one_len, 1, got, NULL, &err), LIPI_OK);
    assert_near_floats(got, probs + 2, 1, TORCH_TOL, "classify");

    /* Only label 0 exists. */
    assert_int_equal(lipi_embedder_score_pairs(s, a, alen, b, blen, 3, 1, false, got, NULL, &err),
                     LIPI_EINVAL);
    close_api(e, s);

    /* Several labels: label 2's softmax probability or logit, as classify_pairs. */
    open_api(md_model("bert_cls"), &o, 1, &e, &s);
    float all[3 * 3], lg[3];
    assert_int_equal(lipi_embedder_classify_pairs(s, a, alen, b, blen, 3, all, NULL, &err),
                     LIPI_OK);
    assert_int_equal(lipi_embedder_score_pairs(s, a, alen, b, blen, 3, 2, false, got, NULL, &err),
                     LIPI_OK);
    for (int i = 0; i < 3; i++)
        assert_true(got[i] == all[3 * i + 2]);
    assert_int_equal(lipi_embedder_score_pairs(s, a, alen, b, blen, 3, 2, true, lg, NULL, &err),
                     LIPI_OK);
    assert_true(lg[0] != got[0]);
    close_api(e, s);

    /* An embedding model has no head. */
    open_api(md_model("bert"), &o, 1, &e, &s);
    assert_int_equal(lipi_embedder_score_pairs(s, a, alen, b, blen, 3, 0, false, got, NULL, &err),
                     LIPI_EINVAL);
    close_api(e, s);
    free(logits);
    free(probs);
}

static void test_scores_order_is_descending_with_ties_in_input_order(void **state)
{
    const float scores[] = {0.5f, 0.9f, NAN, 0.5f, 0.9f, -1.0f, 0.5f};
    size_t order[7];
    assert_int_equal(lipi_scores_order(scores, 7, order, NULL), LIPI_OK);
    char got[64] = "";
    for (int i = 0; i < 7; i++)
        sprintf(got + strlen(got), "%s%zu", i ? " " : "", order[i]);
    assert_string_equal(got, "1 4 0 3 6 5 2");
    assert_int_equal(lipi_scores_order(scores, 0, order, NULL), LIPI_OK);
}

/* ======================================================================== */
/* identity                                                                  */
/* ======================================================================== */

/* The fingerprint is no longer made by open; identity hashes the folder
 * when asked, gives what an index built from the folder records, and fails
 * (instead of recording a stale hash) when the folder has lost a file. */
static void test_identity_fingerprints_the_folder_when_asked(void **state)
{
    const char *dir = md_path("identity_model");
    assert_true(md_model_dir("st_mean", dir));
    lipi_embedder_options o = {.batch = 8};
    lipi_embedder *e;
    lipi_embedder_session *s;
    open_api(dir, &o, 1, &e, &s);

    lipi_index_model id = {.lipi_version = "x"};
    char fp[17], want[17];
    lipi_error err = {0};
    assert_int_equal(lipi_index_model_fingerprint(dir, want, &err), LIPI_OK);
    assert_int_equal(lipi_embedder_identity(e, &id, fp, &err), LIPI_OK);
    assert_ptr_equal(id.fingerprint, fp);
    assert_string_equal(fp, want);
    assert_string_equal(id.name, dir);
    assert_string_equal(id.pooling, "mean");
    assert_string_equal(id.lipi_version, "x");

    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    assert_int_equal(remove(cfg), 0);
    lipi_index_model id2 = {0};
    assert_int_equal(lipi_embedder_identity(e, &id2, fp, &err), LIPI_EIO);
    assert_string_equal(err.path, cfg);
    assert_null(id2.name);
    close_api(e, s);
}

/* ======================================================================== */
/* pooling names                                                             */
/* ======================================================================== */

/* ======================================================================== */
/* Prompts and Matryoshka dimensions                                         */
/* ======================================================================== */

/* A copy of st_mean whose config_sentence_transformers.json has two prompts
 * (word-level tokens, so a prompt is ids too) and `def` as the default. */
static const char *prompt_model(const char *name, const char *def)
{
    const char *dir = md_path(name);
    if (!md_model_dir("st_mean", dir))
        fail_msg("fixture st_mean is missing");
    char json[256], path[600];
    snprintf(json, sizeof json,
             "{\"prompts\": {\"query\": \"t7 t8 \", \"doc\": \"t9 \"}, "
             "\"default_prompt_name\": %s}\n",
             def);
    snprintf(path, sizeof path, "%s/config_sentence_transformers.json", dir);
    md_write(path, json, strlen(json));
    return dir;
}

/* Embeds the lines with o, each after `before` (NULL: as they are). */
static float *embed_with(const char *dir, const lipi_embedder_options *o, const lines *l,
                         const char *before, size_t *dim, uint8_t *truncated)
{
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    open_api(dir, o, 1, &e, &s);
    *dim = lipi_embedder_dim(e);
    char *buf = malloc(NLINES * 128 + sizeof l->buf);
    const char *ptrs[NLINES];
    size_t lens[NLINES], at = 0;
    assert_non_null(buf);
    for (size_t i = 0; i < NLINES; i++) {
        size_t pl = before ? strlen(before) : 0;
        memcpy(buf + at, before ? before : "", pl);
        memcpy(buf + at + pl, l->ptrs[i], l->lens[i]);
        ptrs[i] = buf + at;
        lens[i] = pl + l->lens[i];
        at += lens[i];
    }
    float *v = malloc(NLINES * *dim * sizeof *v);
    assert_non_null(v);
    if (lipi_embedder_embed(s, ptrs, lens, NLINES, v, truncated, &err) != LIPI_OK)
        fail_msg("line %zu: %s", err.line, err.msg);
    close_api(e, s);
    free(buf);
    return v;
}

static void test_a_prompt_name_embeds_exactly_the_prompt_put_before_the_text(void **state)
{
    const char *dir = prompt_model("st_prompts", "\"doc\"");
    lines l;
    make_lines(&l);
    size_t dim;
    uint8_t cut_named[NLINES], cut_joined[NLINES];
    lipi_embedder_options named = {.batch = 32, .normalize = -1, .prompt_name = "query"};
    lipi_embedder_options none = {.batch = 32, .normalize = -1, .prompt = ""};
    float *a = embed_with(dir, &named, &l, NULL, &dim, cut_named);
    float *b = embed_with(dir, &none, &l, "t7 t8 ", &dim, cut_joined);
    assert_same_floats(a, b, NLINES * dim, "--prompt-name query vs 't7 t8 ' + text");
    /* The prompt's tokens count towards the 16 the model takes. */
    assert_memory_equal(cut_named, cut_joined, NLINES);
    free(a);
    free(b);
    /* No option: default_prompt_name ("doc"), as sentence-transformers. */
    lipi_embedder_options dflt = {.batch = 32, .normalize = -1};
    a = embed_with(dir, &dflt, &l, NULL, &dim, NULL);
    b = embed_with(dir, &none, &l, "t9 ", &dim, NULL);
    assert_same_floats(a, b, NLINES * dim, "default_prompt_name doc vs 't9 ' + text");
    free(a);
    free(b);

    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    lipi_embedder_options text = {.normalize = -1, .prompt = "t9 "};
    open_api(dir, &text, 1, &e, &s);
    assert_int_equal(lipi_embedder_prompt_count(e), 2);
    assert_string_equal(lipi_embedder_prompt_name(e, 0), "query");
    assert_string_equal(lipi_embedder_prompt_name(e, 1), "doc");
    assert_null(lipi_embedder_prompt_name(e, 2));
    assert_string_equal(lipi_embedder_prompt_text(e, "query"), "t7 t8 ");
    assert_null(lipi_embedder_prompt_text(e, "passage"));
    const char *name = NULL;
    /* A text that is one of the prompts is known by its name. */
    assert_string_equal(lipi_embedder_prompt(e, &name), "t9 ");
    assert_string_equal(name, "doc");
    close_api(e, s);

    lipi_embedder_options bad = {.normalize = -1, .prompt_name = "passage"};
    assert_int_equal(lipi_embedder_open(dir, &bad, &e, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "(query, doc), found 'passage'"));
    bad.prompt_name_optional = true; /* then the default */
    open_api(dir, &bad, 1, &e, &s);
    assert_string_equal(lipi_embedder_prompt(e, &name), "t9 ");
    close_api(e, s);
    lipi_embedder_options both = {.prompt = "x", .prompt_name = "doc"};
    assert_int_equal(lipi_embedder_open(dir, &both, &e, &err), LIPI_EINVAL);
    /* A default that names no prompt: sentence-transformers refuses it. */
    dir = prompt_model("st_bad_default", "\"passage\"");
    assert_int_equal(lipi_embedder_open(dir, NULL, &e, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.path, "config_sentence_transformers.json"));
}

static void test_dimensions_are_the_full_vectors_sliced_and_normalized_again(void **state)
{
    const char *dir = md_model("st_mean");
    lines l;
    make_lines(&l);
    size_t full, k;
    lipi_embedder_options o = {.batch = 32, .normalize = -1};
    float *v = embed_with(dir, &o, &l, NULL, &full, NULL);
    o.dimensions = 8;
    float *t = embed_with(dir, &o, &l, NULL, &k, NULL);
    assert_int_equal(k, 8);
    assert_true(full > k);
    /* What numpy does with the .npy: v[:, :8], then the same normalization
     * (st_mean normalizes), so bit for bit. */
    float *want = malloc(NLINES * k * sizeof *want);
    assert_non_null(want);
    for (size_t i = 0; i < NLINES; i++)
        memcpy(want + i * k, v + i * full, k * sizeof *want);
    lipi_vectors_normalize(want, NLINES, k);
    assert_same_floats(t, want, NLINES * k, "--dimensions 8 vs slice + normalize");
    free(t);
    /* Without normalization the slice is all. */
    o.normalize = -2;
    o.dimensions = 0;
    free(v);
    v = embed_with(dir, &o, &l, NULL, &full, NULL);
    o.dimensions = 8;
    t = embed_with(dir, &o, &l, NULL, &k, NULL);
    for (size_t i = 0; i < NLINES; i++)
        assert_same_floats(t + i * k, v + i * full, k, "unnormalized slice");
    free(t);
    free(v);
    free(want);

    lipi_embedder *e = NULL;
    lipi_error err = {0};
    o.dimensions = full + 1;
    assert_int_equal(lipi_embedder_open(dir, &o, &e, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "at most the model's"));
}

/* lipi index records the document prompt and --dimensions in meta.json;
 * lipi search embeds its queries the same way and refuses what disagrees. */
static void test_index_records_prompt_and_dimensions_and_search_checks_them(void **state)
{
    const char *dir = prompt_model("st_index", "null");
    const char *docs = md_path("docs.txt"), *idx = md_path("prompt.idx");
    md_write(docs, "t5 t6\nt10 t11 t12\nt20\n", strlen("t5 t6\nt10 t11 t12\nt20\n"));
    cli_result r = cli_runf("index --quiet -m %s --prompt-name doc --dimensions 8 -o %s %s", dir,
                            idx, docs);
    if (r.code != 0)
        fail_msg("lipi index exited %d: %s", r.code, r.err);
    cli_result_free(&r);
    char meta[600];
    snprintf(meta, sizeof meta, "%s/meta.json", idx);
    size_t len;
    char *m = md_slurp(meta, &len);
    assert_non_null(m);
    assert_non_null(strstr(m, "\"prompt\": \"t9 \""));
    assert_non_null(strstr(m, "\"prompt_name\": \"doc\""));
    assert_non_null(strstr(m, "\"truncate_dim\": 8"));
    assert_non_null(strstr(m, "\"dimension\": 8"));

    r = cli_runf("search --index %s --query 't10 t11 t12' -k 1", idx);
    assert_int_equal(r.code, 0);
    /* A random tiny model ranks anything first; one hit is the point. */
    assert_memory_equal(r.out, "1\t1\t", 4);
    cli_result_free(&r);
    r = cli_runf("search --index %s --query t5 --dimensions 16", idx);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "dimension 8 (truncate_dim), the queries would have 16"));
    cli_result_free(&r);
    r = cli_runf("index --quiet -m %s --prompt-name query --dimensions 8 --append -o %s %s", dir,
                 idx, docs);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "with the prompt 't9 ', not 't7 t8 '"));
    cli_result_free(&r);

    /* The model's config now words "doc" differently: an error naming both. */
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/config_sentence_transformers.json", dir);
    size_t cfg_len;
    char *cfg_was = md_slurp(cfg, &cfg_len);
    assert_non_null(cfg_was);
    md_write(cfg, "{\"prompts\": {\"doc\": \"t30 \"}}", strlen("{\"prompts\": {\"doc\": \"t30 \"}}"));
    r = cli_runf("search --index %s --query t5", idx);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "'doc' = 't9 ', but model"));
    assert_non_null(strstr(r.err, "has 'doc' = 't30 '"));
    cli_result_free(&r);

    /* An index from before prompts (no such fields) still opens and is
     * searched with the model's prompts as they are. The config goes back
     * as it was: the fingerprint covers it. */
    md_write(cfg, cfg_was, cfg_len); /* the model the index was built with */
    free(cfg_was);
    char *old = malloc(len + 1);
    assert_non_null(old);
    size_t n = 0;
    for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n"))
        if (!strstr(line, "\"prompt") && !strstr(line, "truncate_dim"))
            /* "faiss" is the last field left: no comma after it. */
            n += (size_t)sprintf(old + n, "%.*s\n",
                                 (int)(strlen(line) - (strstr(line, "\"faiss\"") != NULL)), line);
    md_write(meta, old, n);
    r = cli_runf("search --index %s --query t5 --dimensions 8 -k 1", idx);
    if (r.code != 0)
        fail_msg("old index: lipi search exited %d: %s", r.code, r.err);
    cli_result_free(&r);
    free(old);
    free(m);
}

static void test_pooling_names_round_trip(void **state)
{
    unsigned f = 0;
    assert_true(lipi_pooling_parse("mean+cls", &f));
    assert_int_equal(f, LIPI_POOL_MEAN | LIPI_POOL_CLS);
    char name[64];
    lipi_pooling_name(f, name, sizeof name);
    assert_string_equal(name, "cls+mean"); /* sentence-transformers' order */
    assert_false(lipi_pooling_parse("mean+", &f));
    assert_false(lipi_pooling_parse("avg", &f));
    assert_false(lipi_pooling_parse("", &f));
    lipi_pooling_name(LIPI_POOL_MAX | LIPI_POOL_MEAN_SQRT_LEN, name, 8);
    assert_string_equal(name, "max+mea"); /* cut short, NUL-terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_embed_equals_lipi_embed_npy_bit_for_bit_on_1_and_3_threads),
        cmocka_unit_test(test_batches_joined_on_threads_give_the_vectors_of_one_batch_at_a_time),
        cmocka_unit_test(test_classify_pairs_and_dimensions_joined_on_threads_give_one_batch_at_a_time),
        cmocka_unit_test(test_truncation_flags_mark_exactly_the_texts_over_the_limit),
        cmocka_unit_test(test_one_embedder_shared_by_two_threads_gives_identical_vectors),
        cmocka_unit_test(test_api_classify_equals_lipi_classify),
        cmocka_unit_test(test_classify_pairs_gives_the_model_both_texts_and_their_type_ids),
        cmocka_unit_test(test_score_pairs_of_a_one_label_cross_encoder_are_pytorch_sigmoids),
        cmocka_unit_test(test_scores_order_is_descending_with_ties_in_input_order),
        cmocka_unit_test(test_identity_fingerprints_the_folder_when_asked),
        cmocka_unit_test(test_pooling_names_round_trip),
        cmocka_unit_test(test_a_prompt_name_embeds_exactly_the_prompt_put_before_the_text),
        cmocka_unit_test(test_dimensions_are_the_full_vectors_sliced_and_normalized_again),
        cmocka_unit_test(test_index_records_prompt_and_dimensions_and_search_checks_them),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* Tests of `lipi embed`, `lipi classify` and `lipi probe` on the tiny
 * fixture models (tests/fixtures/models, made by make_models.py), and of
 * the probe library (retrieval/probe.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/model.h"
#include "retrieval/retrieval.h"
#include "tests/cli_run.h"
#include "tests/model_dir.h"

/* Vectors the command writes with %.9g or as raw floats, compared with the
 * library's: the same code path, so only the float->text round trip may
 * differ. */
#define SAME_TOL 1e-6
/* Against PyTorch (make_models.py), as in test_pipeline.c. */
#define TORCH_TOL 1e-4
/* classify prints probabilities with 6 significant digits. */
#define PRINT_TOL 1e-5

static int setup(void **state)
{
    return md_setup("embed_cli");
}

static int teardown(void **state)
{
    md_teardown();
    return 0;
}


static void assert_close(const float *a, const float *b, size_t n, double tol, const char *what)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= tol)) {
            if (bad++ < 5)
                print_error("%s[%zu]: %.9g vs %.9g\n", what, i, (double)a[i], (double)b[i]);
        }
    if (bad)
        fail_msg("%s: %zu of %zu values differ by more than %g", what, bad, n, tol);
}

/* The library's embeddings of the id sequences, model defaults or `opt`. */
static float *library_embed(const char *dir, const uint32_t *const *ids, const size_t *lens,
                            size_t n, const lipi_embed_options *opt, size_t *dim)
{
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_OK);
    assert_int_equal(lipi_model_session_new(m, 1, &s, &err), LIPI_OK);
    *dim = lipi_model_embed_dim(m, opt ? opt->pooling : 0);
    lipi_sequence seqs[8];
    for (size_t i = 0; i < n; i++)
        seqs[i] = (lipi_sequence){ids[i], NULL, lens[i]};
    float *out = malloc(n * *dim * sizeof *out);
    assert_int_equal(lipi_model_embed(s, seqs, n, opt, out, &err), LIPI_OK);
    lipi_model_session_free(s);
    lipi_model_free(m);
    return out;
}

/* ======================================================================== */
/* lipi embed                                                                */
/* ======================================================================== */

static void test_embed_writes_the_pipeline_vectors_as_npy(void **state)
{
    const char *dir = md_model("st_mean");
    const char *text = "t16\nt72 t16 t30\nt5 t6 t7 t8\n";
    md_write(md_path("three.txt"), text, strlen(text));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s -o %s %s", dir, md_path("three.npy"),
             md_path("three.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    cli_result_free(&r);

    /* The header: NumPy 1.0, little-endian float32, C order, (3, 32), the
     * data on a 64-byte boundary. */
    size_t len;
    char *raw = md_slurp(md_path("three.npy"), &len);
    assert_non_null(raw);
    assert_memory_equal(raw, "\x93NUMPY\x01\x00", 8);
    size_t hl = (size_t)(unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8;
    assert_int_equal((10 + hl) % 64, 0);
    assert_int_equal(raw[10 + hl - 1], '\n');
    assert_non_null(strstr(raw + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 32), }"));
    assert_int_equal(len, 10 + hl + 3 * 32 * 4);
    free(raw);

    size_t rows, cols, dim;
    float *got = md_read_npy(md_path("three.npy"), &rows, &cols);
    assert_non_null(got);
    assert_int_equal(rows, 3);
    assert_int_equal(cols, 32);
    static const uint32_t a[] = {16}, b[] = {72, 16, 30}, c[] = {5, 6, 7, 8};
    const uint32_t *ids[] = {a, b, c};
    size_t lens[] = {1, 3, 4};
    float *want = library_embed(dir, ids, lens, 3, NULL, &dim);
    assert_int_equal(dim, 32);
    assert_close(got, want, 3 * 32, SAME_TOL, "embed vs library");

    /* Line 1 is the fixture's sequence 2 ([16], types 0): PyTorch's
     * sentence-transformers output (mean pooling, normalized). */
    float *torch = md_read_npy("tests/fixtures/models/st_mean/expected_default.npy", &rows, &cols);
    assert_non_null(torch);
    assert_close(got, torch + 2 * 32, 32, TORCH_TOL, "embed vs PyTorch");
    double norm = 0;
    for (size_t j = 0; j < 32; j++)
        norm += (double)got[j] * got[j];
    assert_true(fabs(norm - 1) < 1e-5);
    free(torch);
    free(got);
    free(want);
}

static void test_embed_jsonl_gives_the_same_floats_as_npy(void **state)
{
    const char *dir = md_model("bert");
    const char *text = "t4 t9\nt10\n";
    md_write(md_path("two.txt"), text, strlen(text));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s --pooling max -o %s %s", dir,
             md_path("two.npy"), md_path("two.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s --pooling max --format jsonl %s", dir,
             md_path("two.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    size_t rows, cols;
    float *npy = md_read_npy(md_path("two.npy"), &rows, &cols);
    assert_non_null(npy);
    assert_int_equal(rows, 2);
    const char *p = r.out;
    for (size_t i = 0; i < rows; i++) {
        assert_memory_equal(p, "{\"embedding\":[", 14);
        p += 14;
        for (size_t j = 0; j < cols; j++) {
            char *end;
            float v = strtof(p, &end);
            assert_true(end > p);
            /* %.9g reads back as the very same float. */
            assert_memory_equal(&v, &npy[i * cols + j], sizeof v);
            p = end + 1;
        }
        assert_memory_equal(p - 1, "]}\n", 3);
        p += 2;
    }
    assert_int_equal(*p, '\0');
    cli_result_free(&r);

    /* max pooling without normalization: the library's vectors. */
    static const uint32_t a[] = {4, 9}, b[] = {10};
    const uint32_t *ids[] = {a, b};
    size_t lens[] = {2, 1}, dim;
    lipi_embed_options o = {LIPI_POOL_MAX, -1};
    float *want = library_embed(dir, ids, lens, 2, &o, &dim);
    assert_close(npy, want, 2 * dim, SAME_TOL, "max pooling");
    free(want);
    free(npy);
}

static void test_embed_normalize_option_makes_unit_vectors(void **state)
{
    const char *dir = md_model("bert");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s --format jsonl", dir);
    cli_result plain = cli_run(cmd, "t5 t6 t7\n", 9);
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s --format jsonl --normalize", dir);
    cli_result unit = cli_run(cmd, "t5 t6 t7\n", 9);
    assert_int_equal(plain.code, 0);
    assert_int_equal(unit.code, 0);
    double n1 = 0, n2 = 0;
    const char *p = plain.out + 14, *q = unit.out + 14;
    for (int j = 0; j < 32; j++) {
        char *e1, *e2;
        double a = strtod(p, &e1), b = strtod(q, &e2);
        n1 += a * a;
        n2 += b * b;
        p = e1 + 1;
        q = e2 + 1;
    }
    /* The plain BERT folder does not normalize by default. */
    assert_true(fabs(n1 - 1) > 1e-2);
    assert_true(fabs(n2 - 1) < 1e-5);
    cli_result_free(&plain);
    cli_result_free(&unit);
}

static void test_embed_truncates_long_lines_and_counts_them(void **state)
{
    const char *dir = md_model("st_mean");
    /* st_mean's max_seq_length is 16: line 2 has 20 tokens. */
    char text[512] = "t5 t6\n", ids_line[256] = "";
    uint32_t first16[16];
    for (int i = 0; i < 20; i++) {
        char w[16];
        snprintf(w, sizeof w, "%st%d", i ? " " : "", 20 + i);
        strcat(ids_line, w);
        if (i < 16)
            first16[i] = (uint32_t)(20 + i);
    }
    strcat(text, ids_line);
    strcat(text, "\nt7\n");
    md_write(md_path("long.txt"), text, strlen(text));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s -o %s %s", dir, md_path("long.npy"),
             md_path("long.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "1 line was longer than 16 tokens, truncated"));
    cli_result_free(&r);
    size_t rows, cols, dim;
    float *got = md_read_npy(md_path("long.npy"), &rows, &cols);
    assert_non_null(got);
    assert_int_equal(rows, 3);
    const uint32_t *ids[] = {first16};
    size_t lens[] = {16};
    float *want = library_embed(dir, ids, lens, 1, NULL, &dim);
    assert_close(got + cols, want, dim, SAME_TOL, "truncated line");
    free(want);
    free(got);

    /* --strict: an error naming the file and line; no output file. */
    snprintf(cmd, sizeof cmd, "embed --quiet --strict -m %s -o %s %s", dir,
             md_path("strict.npy"), md_path("long.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    char where[600];
    snprintf(where, sizeof where, "%s:2:", md_path("long.txt"));
    assert_non_null(strstr(r.err, where));
    assert_non_null(strstr(r.err, "more tokens than the 16"));
    struct stat sb;
    assert_int_not_equal(stat(md_path("strict.npy"), &sb), 0);
    cli_result_free(&r);

    /* --max-length lowers the limit. */
    snprintf(cmd, sizeof cmd, "embed --quiet --max-length 2 -m %s --format jsonl %s", dir,
             md_path("long.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "1 line was longer than 2 tokens"));
    cli_result_free(&r);
}

static void test_truncation_keeps_the_special_tokens(void **state)
{
    /* st_mean with a BERT vocab.txt: [CLS] ... [SEP] around the words. */
    const char *dir = md_path("st_wordpiece");
    assert_true(md_model_dir("st_mean", dir));
    char p[600];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", f);
    for (int i = 5; i < 100; i++)
        fprintf(f, "w%d\n", i);
    assert_int_equal(fclose(f), 0);
    char line[256] = "";
    for (int i = 0; i < 20; i++) {
        char w[16];
        snprintf(w, sizeof w, "%sw%d", i ? " " : "", 5 + i);
        strcat(line, w);
    }
    strcat(line, "\n");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s -o %s", dir, md_path("wp.npy"));
    cli_result r = cli_run(cmd, line, strlen(line));
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "1 line was longer than 16 tokens"));
    cli_result_free(&r);
    /* max_seq_length 16: [CLS], the first 14 words, [SEP]. */
    uint32_t ids[16];
    ids[0] = 2;
    for (int i = 0; i < 14; i++)
        ids[1 + i] = (uint32_t)(5 + i);
    ids[15] = 3;
    const uint32_t *seqs[] = {ids};
    size_t lens[] = {16}, rows, cols, dim;
    float *want = library_embed(dir, seqs, lens, 1, NULL, &dim);
    float *got = md_read_npy(md_path("wp.npy"), &rows, &cols);
    assert_non_null(got);
    assert_int_equal(rows, 1);
    assert_close(got, want, dim, SAME_TOL, "[CLS] w5..w18 [SEP]");
    free(got);
    free(want);
}

static void test_embed_usage_and_model_errors(void **state)
{
    const char *dir = md_model("bert");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "embed -m %s", dir);
    cli_result r = cli_run(cmd, "t5\n", 3);
    assert_int_equal(r.code, 2); /* .npy needs -o */
    assert_non_null(strstr(r.err, "-o FILE"));
    cli_result_free(&r);
    r = cli_run("embed -m /nonexistent/model --format jsonl", "t5\n", 3);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "expected a model folder"));
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "embed -m %s --format jsonl --dtype f16", dir);
    r = cli_run(cmd, "t5\n", 3);
    assert_int_equal(r.code, 2);
    cli_result_free(&r);
    /* A token id the model does not have: the line is named. */
    snprintf(cmd, sizeof cmd, "embed -m %s --format jsonl --quiet", dir);
    r = cli_run(cmd, "t5\n\n", 4);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, ":2:"));
    cli_result_free(&r);
}

static void test_embed_int8_stays_close_to_f32(void **state)
{
    const char *dir = md_model("st_mean");
    const char *text = "t72 t16 t30 t67\nt5 t6 t7 t8 t9\n";
    md_write(md_path("q.txt"), text, strlen(text));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s -o %s %s", dir, md_path("f32.npy"),
             md_path("q.txt"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "embed --quiet --dtype int8 -m %s -o %s %s", dir,
             md_path("i8.npy"), md_path("q.txt"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    size_t r1, c1, r2, c2;
    float *a = md_read_npy(md_path("f32.npy"), &r1, &c1);
    float *b = md_read_npy(md_path("i8.npy"), &r2, &c2);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(r1, r2);
    for (size_t i = 0; i < r1; i++) {
        double dot = 0;
        for (size_t j = 0; j < c1; j++)
            dot += (double)a[i * c1 + j] * b[i * c1 + j];
        assert_true(dot > 0.99); /* both rows are unit vectors */
    }
    free(a);
    free(b);
}

/* ======================================================================== */
/* lipi classify                                                             */
/* ======================================================================== */

/* Reads "probs":{"L":p,...} of one JSONL record into probs[0..k). */
static void parse_probs(const char *line, const char *const *labels, size_t k, float *probs)
{
    for (size_t j = 0; j < k; j++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", labels[j]);
        const char *p = strstr(strstr(line, "\"probs\":"), key);
        assert_non_null(p);
        probs[j] = strtof(p + strlen(key), NULL);
    }
}

static void test_classify_gives_the_fixture_labels_and_probabilities(void **state)
{
    const char *dir = md_model("bert_cls");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "classify -m %s", dir);
    const char *text = "t4\nt78 t13 t61 t58\n";
    cli_result r = cli_run(cmd, text, strlen(text));
    assert_int_equal(r.code, 0);
    static const char *const labels[] = {"negative", "neutral", "positive"};
    /* Line 1 is the fixture's sequence 2 ([4]): PyTorch's probabilities. */
    size_t rows, cols;
    float *torch = md_read_npy("tests/fixtures/models/bert_cls/expected_probs.npy", &rows, &cols);
    assert_non_null(torch);
    assert_int_equal(cols, 3);
    float got[3];
    parse_probs(r.out, labels, 3, got);
    assert_close(got, torch + 2 * 3, 3, TORCH_TOL + PRINT_TOL, "classify vs PyTorch");
    const char *first = "{\"label\":\"neutral\",\"score\":0.534";
    assert_memory_equal(r.out, first, strlen(first));

    /* Line 2 against the library's classifier on the same ids. */
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    assert_int_equal(lipi_model_load(dir, NULL, &m, NULL), LIPI_OK);
    assert_int_equal(lipi_model_session_new(m, 1, &s, NULL), LIPI_OK);
    static const uint32_t ids[] = {78, 13, 61, 58};
    lipi_sequence seq = {ids, NULL, 4};
    float want[3];
    assert_int_equal(lipi_model_classify(s, &seq, 1, NULL, want, NULL), LIPI_OK);
    const char *line2 = strchr(r.out, '\n') + 1;
    parse_probs(line2, labels, 3, got);
    assert_close(got, want, 3, PRINT_TOL, "classify vs library");
    size_t best = 0;
    for (size_t j = 1; j < 3; j++)
        if (want[j] > want[best])
            best = j;
    char expect[64];
    snprintf(expect, sizeof expect, "{\"label\":\"%s\"", labels[best]);
    assert_memory_equal(line2, expect, strlen(expect));
    lipi_model_session_free(s);
    lipi_model_free(m);
    free(torch);

    /* -o writes the same lines to a file, nothing to standard output. */
    snprintf(cmd, sizeof cmd, "classify -m %s -o %s", dir, md_path("labels.jsonl"));
    cli_result r2 = cli_run(cmd, text, strlen(text));
    assert_int_equal(r2.code, 0);
    assert_int_equal(r2.out_len, 0);
    size_t n;
    char *file = md_slurp(md_path("labels.jsonl"), &n);
    assert_non_null(file);
    assert_string_equal(file, r.out);
    free(file);
    cli_result_free(&r2);
    cli_result_free(&r);
}

/* --pairs: the fixture's sequences 1 and 4 are pairs (type ids 0 then 1)
 * and the word-level tokenizer has no template, so "a<TAB>b" gives the same
 * ids and type ids as PyTorch saw. */
static void test_classify_pairs_reads_tsv_pairs_as_pytorch_saw_them(void **state)
{
    const char *dir = md_model("bert_cls"), *in = md_path("pairs.tsv");
    const char *text = "t78 t13 t61\tt58 t65 t86 t52\nt67 t4 t70 t27\tt87 t56 t37 t3 t97\n";
    md_write(in, text, strlen(text));
    cli_result r = cli_runf("classify --pairs -m %s %s", dir, in);
    if (r.code != 0)
        fail_msg("lipi classify --pairs exited %d: %s", r.code, r.err);
    static const char *const labels[] = {"negative", "neutral", "positive"};
    size_t rows, cols;
    float *torch = md_read_npy("tests/fixtures/models/bert_cls/expected_probs.npy", &rows, &cols);
    assert_non_null(torch);
    float got[3];
    parse_probs(r.out, labels, 3, got);
    assert_close(got, torch + 0 * 3, 3, TORCH_TOL + PRINT_TOL, "pair 1 vs PyTorch");
    parse_probs(strchr(r.out, '\n') + 1, labels, 3, got);
    assert_close(got, torch + 3 * 3, 3, TORCH_TOL + PRINT_TOL, "pair 2 vs PyTorch");
    free(torch);
    cli_result_free(&r);

    /* A line without a tab names its file and line; nothing is printed. */
    const char *bad = md_path("pairs_no_tab.tsv");
    md_write(bad, "t4\tt5\nt6 t7\n", 12);
    r = cli_runf("classify --pairs -m %s %s", dir, bad);
    assert_int_equal(r.code, 1);
    char where[600];
    snprintf(where, sizeof where, "%s:2", bad);
    if (!strstr(r.err, where) || !strstr(r.err, "no tab"))
        fail_msg("expected '%s' and 'no tab' in: %s", where, r.err);
    cli_result_free(&r);
}

/* ------------------------------------------------------------------------ */
/* rerank                                                                    */
/* ------------------------------------------------------------------------ */

/* One row of `lipi rerank` tsv output. */
typedef struct {
    unsigned q, rank, passage;
    float score;
    char text[64];
} rerank_row;

static size_t parse_rerank(const char *out, rerank_row *rows, size_t max)
{
    size_t n = 0;
    for (const char *p = out; *p && n < max; p = strchr(p, '\n') + 1) {
        rerank_row *r = &rows[n++];
        assert_int_equal(sscanf(p, "%u\t%u\t%u\t%f\t%63[^\n]", &r->q, &r->rank, &r->passage,
                                &r->score, r->text),
                         5);
    }
    return n;
}

/* bert_rerank is a one-label BertForSequenceClassification; its fixture
 * sequences 1, 2 and 4 are pairs (type ids 0 then 1), "a<TAB>b" here. */
#define RR_Q0 "t20 t50 t7"
#define RR_P0 "t4 t89 t98 t44"
#define RR_Q1 "t68 t10 t88 t27 t39 t98"
#define RR_P1 "t20 t83 t23 t25 t63 t78"
#define RR_Q3 "t80 t32 t74 t48"
#define RR_P3 "t72 t70 t71 t26 t46"

static void test_rerank_pairs_scores_are_pytorch_sigmoids_grouped_by_query(void **state)
{
    const char *dir = md_model("bert_rerank"), *in = md_path("rerank_pairs.tsv");
    const char *text = RR_Q0 "\t" RR_P0 "\n" RR_Q1 "\t" RR_P1 "\n" RR_Q0 "\t" RR_P0 "\n" RR_Q3
                             "\t" RR_P3 "\n";
    md_write(in, text, strlen(text));
    size_t nr, nc;
    float *probs = md_read_npy("tests/fixtures/models/bert_rerank/expected_probs.npy", &nr, &nc);
    float *logits = md_read_npy("tests/fixtures/models/bert_rerank/expected_logits.npy", &nr, &nc);
    assert_non_null(probs);
    assert_non_null(logits);
    for (int raw = 0; raw < 2; raw++) {
        cli_result r = cli_runf("rerank -m %s --pairs %s%s", dir, in, raw ? " --raw" : "");
        if (r.code != 0)
            fail_msg("lipi rerank exited %d: %s", r.code, r.err);
        rerank_row rows[8];
        assert_int_equal(parse_rerank(r.out, rows, 8), 4);
        const float *want = raw ? logits : probs;
        /* Query 1 (first seen on line 1) has lines 1 and 3, equal scores: input order. */
        static const unsigned q[] = {1, 1, 2, 3}, rank[] = {1, 2, 1, 1}, pno[] = {1, 3, 2, 4};
        static const size_t fixture_row[] = {0, 0, 1, 3};
        for (int i = 0; i < 4; i++) {
            assert_int_equal(rows[i].q, q[i]);
            assert_int_equal(rows[i].rank, rank[i]);
            assert_int_equal(rows[i].passage, pno[i]);
            assert_close(&rows[i].score, want + fixture_row[i], 1, TORCH_TOL + PRINT_TOL,
                         raw ? "rerank --raw vs PyTorch logits" : "rerank vs PyTorch sigmoid");
        }
        assert_string_equal(rows[2].text, RR_P1);
        cli_result_free(&r);
    }
    free(probs);
    free(logits);
}

static void test_rerank_query_sorts_passages_and_top_keeps_the_best(void **state)
{
    const char *dir = md_model("bert_rerank");
    const char *passages = RR_P0 "\n" RR_P1 "\n" RR_P3 "\nt5 t6\n" RR_P1 "\nt9\n";
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rerank -m %s --query '" RR_Q0 "'", dir);
    cli_result r = cli_run(cmd, passages, strlen(passages));
    if (r.code != 0)
        fail_msg("lipi rerank exited %d: %s", r.code, r.err);
    rerank_row rows[8];
    assert_int_equal(parse_rerank(r.out, rows, 8), 6);
    unsigned seen = 0;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(rows[i].q, 1);
        assert_int_equal(rows[i].rank, i + 1);
        seen |= 1u << rows[i].passage;
        if (i) {
            assert_true(rows[i - 1].score >= rows[i].score);
            if (rows[i - 1].score == rows[i].score)
                assert_true(rows[i - 1].passage < rows[i].passage);
        }
    }
    assert_int_equal(seen, 0x7e); /* passages 1..6, each once */
    /* Passages 2 and 5 are the same text: the same score, 2 first. */
    int at2 = -1, at5 = -1;
    for (int i = 0; i < 6; i++) {
        at2 = rows[i].passage == 2 ? i : at2;
        at5 = rows[i].passage == 5 ? i : at5;
    }
    assert_true(at2 < at5);
    assert_true(rows[at2].score == rows[at5].score);

    /* --top 2: the first two rows; jsonl: the same fields. */
    char *full = strdup(r.out);
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "rerank -m %s --query '" RR_Q0 "' --top 2", dir);
    r = cli_run(cmd, passages, strlen(passages));
    assert_int_equal(r.code, 0);
    const char *third = strchr(strchr(full, '\n') + 1, '\n') + 1;
    assert_int_equal(strlen(r.out), (size_t)(third - full));
    assert_memory_equal(r.out, full, strlen(r.out));
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "rerank -m %s --query '" RR_Q0 "' --top 1 --format jsonl", dir);
    r = cli_run(cmd, passages, strlen(passages));
    assert_int_equal(r.code, 0);
    char want[256];
    snprintf(want, sizeof want,
             "{\"query_no\":1,\"rank\":1,\"passage_no\":%u,\"score\":%.6f,\"text\":\"%s\"}\n",
             rows[0].passage, (double)rows[0].score, rows[0].text);
    assert_string_equal(r.out, want);
    cli_result_free(&r);
    free(full);
}

/* `lipi search` rows: the query from --queries by query_no, passage_no =
 * doc_no, the search's own order and score ignored. */
static void test_rerank_from_search_takes_queries_by_number(void **state)
{
    const char *dir = md_model("bert_rerank"), *q = md_path("rerank_queries.txt"),
               *rows_in = md_path("search_rows.tsv");
    const char *queries = RR_Q0 "\n" RR_Q1 "\n";
    const char *search = "1\t1\t7\t0.900000\tt5 t6\n1\t2\t9\t0.800000\t" RR_P0
                         "\n2\t1\t3\t0.500000\t" RR_P1 "\n";
    md_write(q, queries, strlen(queries));
    md_write(rows_in, search, strlen(search));
    size_t nr, nc;
    float *probs = md_read_npy("tests/fixtures/models/bert_rerank/expected_probs.npy", &nr, &nc);
    assert_non_null(probs);
    cli_result r = cli_runf("rerank -m %s --from-search --queries %s %s", dir, q, rows_in);
    if (r.code != 0)
        fail_msg("lipi rerank exited %d: %s", r.code, r.err);
    rerank_row rows[8];
    assert_int_equal(parse_rerank(r.out, rows, 8), 3);
    const rerank_row *p0 = rows[0].passage == 9 ? &rows[0] : &rows[1];
    assert_int_equal(p0->q, 1);
    assert_string_equal(p0->text, RR_P0);
    assert_close(&p0->score, probs + 0, 1, TORCH_TOL + PRINT_TOL, "from-search vs PyTorch");
    assert_int_equal(rows[2].q, 2);
    assert_int_equal(rows[2].passage, 3);
    assert_int_equal(rows[2].rank, 1);
    assert_close(&rows[2].score, probs + 1, 1, TORCH_TOL + PRINT_TOL, "from-search vs PyTorch");
    cli_result_free(&r);
    free(probs);
}

/* `lipi search --rerank`: the two stages in one command print what
 * `lipi search -k N | lipi rerank --from-search --top k` prints, row for
 * row (passage_no = doc_no), and refuse what they cannot do. */
static void test_search_rerank_equals_search_then_rerank(void **state)
{
    const char *cross = md_model("bert_rerank"), *bi = md_model("bert");
    const char *docs = md_path("sr_docs.txt"), *idx = md_path("sr_idx"),
               *q = md_path("sr_queries.txt"), *rows = md_path("sr_rows.tsv");
    const char *text = RR_P0 "\n" RR_P1 "\n" RR_P3 "\nt5 t6\nt9 t20\nt50 t7 t4\nt88 t27\n";
    const char *queries = RR_Q0 "\n" RR_Q1 "\n";
    md_write(docs, text, strlen(text));
    md_write(q, queries, strlen(queries));
    cli_result r = cli_runf("index --quiet -m %s -o %s %s", bi, idx, docs);
    if (r.code != 0)
        fail_msg("lipi index exited %d: %s", r.code, r.err);
    cli_result_free(&r);
    r = cli_runf("search --index %s --queries %s -k 5", idx, q);
    assert_int_equal(r.code, 0);
    md_write(rows, r.out, r.out_len);
    cli_result_free(&r);
    cli_result two = cli_runf("rerank -m %s --from-search --queries %s --top 2 %s", cross, q,
                              rows);
    if (two.code != 0)
        fail_msg("lipi rerank exited %d: %s", two.code, two.err);
    cli_result one =
        cli_runf("search --index %s --queries %s -k 2 --rerank %s --rerank-top 5", idx, q, cross);
    if (one.code != 0)
        fail_msg("lipi search --rerank exited %d: %s", one.code, one.err);
    assert_string_equal(one.out, two.out);
    rerank_row got[8];
    assert_int_equal(parse_rerank(one.out, got, 8), 4);
    cli_result_free(&one);
    cli_result_free(&two);

    r = cli_runf("search --index %s --query x --rerank %s", idx, bi);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "--rerank: expected a cross-encoder"));
    cli_result_free(&r);
    r = cli_runf("search --index %s --query x --rerank-top 5", idx);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--rerank-top goes with --rerank MODEL"));
    cli_result_free(&r);
}

static void test_classify_needs_a_classifier_head(void **state)
{
    const char *dir = md_model("bert");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "classify -m %s", dir);
    cli_result r = cli_run(cmd, "t4\n", 3);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "ForSequenceClassification"));
    cli_result_free(&r);
}

/* ======================================================================== */
/* lipi probe                                                                */
/* ======================================================================== */

/* 40 lines in two topics that share no token: "sport" lines use t10..t19,
 * "music" lines t50..t59 (a fixed pattern, no randomness). */
static void write_topics(const char *path, size_t n, size_t offset)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) {
        bool sport = i % 2 == 0;
        fprintf(f, "%s\t", sport ? "sport" : "music");
        size_t words = 2 + (i * 7 + offset) % 5;
        for (size_t w = 0; w < words; w++)
            fprintf(f, "%st%zu", w ? " " : "", (sport ? 10 : 50) + (i * 3 + w * 7 + offset) % 10);
        fputc('\n', f);
    }
    assert_int_equal(fclose(f), 0);
}

static void test_probe_separates_topics_and_is_deterministic(void **state)
{
    const char *dir = md_model("st_mean");
    write_topics(md_path("train.tsv"), 40, 0);
    write_topics(md_path("dev.tsv"), 10, 3);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "probe train --quiet -m %s --train %s -o %s", dir,
             md_path("train.tsv"), md_path("p1.json"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "held-out accuracy 1.0000 (4 of 40 lines held out, seed 42"));
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "probe train --quiet -m %s --train %s -o %s", dir,
             md_path("train.tsv"), md_path("p2.json"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    size_t n1, n2;
    char *a = md_slurp(md_path("p1.json"), &n1), *b = md_slurp(md_path("p2.json"), &n2);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1); /* the same data, the same probe, bit for bit */
    assert_non_null(strstr(a, "\"labels\": [\n  \"music\",\n  \"sport\"\n ]"));
    assert_non_null(strstr(a, "\"pooling\": \"mean\""));
    assert_non_null(strstr(a, "\"fingerprint\": \""));
    free(a);
    free(b);

    /* With a dev file. */
    snprintf(cmd, sizeof cmd, "probe train --quiet -m %s --train %s --dev %s -o %s",
             dir, md_path("train.tsv"), md_path("dev.tsv"), md_path("p3.json"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "held-out accuracy 1.0000 (10 lines of"));
    cli_result_free(&r);

    /* predict: the dev texts get their labels back. */
    snprintf(cmd, sizeof cmd, "probe predict --quiet --probe %s", md_path("p3.json"));
    char input[2048] = "";
    size_t dn;
    char *dev = md_slurp(md_path("dev.tsv"), &dn);
    char want_labels[10][8];
    size_t k = 0;
    for (char *line = strtok(dev, "\n"); line; line = strtok(NULL, "\n"), k++) {
        char *tab = strchr(line, '\t');
        *tab = '\0';
        snprintf(want_labels[k], sizeof want_labels[k], "%s", line);
        strcat(input, tab + 1);
        strcat(input, "\n");
    }
    free(dev);
    r = cli_run(cmd, input, strlen(input));
    assert_int_equal(r.code, 0);
    const char *p = r.out;
    for (size_t i = 0; i < k; i++) {
        char expect[64];
        snprintf(expect, sizeof expect, "{\"label\":\"%s\"", want_labels[i]);
        assert_memory_equal(p, expect, strlen(expect));
        p = strchr(p, '\n') + 1;
    }
    assert_int_equal(*p, '\0');
    cli_result_free(&r);
}

static void test_probe_predict_with_another_model_is_an_error(void **state)
{
    const char *dir = md_model("st_mean"), *other = md_model("bert");
    write_topics(md_path("t2.tsv"), 20, 1);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "probe train --quiet -m %s --train %s --holdout 0 --l2 0.01 -o %s", dir,
             md_path("t2.tsv"), md_path("p4.json"));
    cli_result r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "training accuracy"));
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "probe predict --probe %s -m %s", md_path("p4.json"), other);
    r = cli_run(cmd, "t10 t11\n", 8);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "the probe was trained on model"));
    assert_int_equal(r.out_len, 0);
    cli_result_free(&r);

    /* Bad training files name the line. */
    md_write(md_path("bad.tsv"), "sport\tt10\nno tab here\n", 22);
    snprintf(cmd, sizeof cmd, "probe train -m %s --train %s -o %s", dir, md_path("bad.tsv"),
             md_path("p5.json"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "bad.tsv:2:"));
    cli_result_free(&r);
    md_write(md_path("one.tsv"), "sport\tt10\nsport\tt11\n", 20);
    snprintf(cmd, sizeof cmd, "probe train -m %s --train %s -o %s", dir, md_path("one.tsv"),
             md_path("p5.json"));
    r = cli_run(cmd, NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "at least 2 different labels"));
    cli_result_free(&r);
}

/* Three classes of hand-made 2-D points around (4,0), (-2,3), (-2,-3). */
static void test_probe_library_learns_separable_points_and_round_trips(void **state)
{
    float x[30 * 2];
    uint32_t y[30];
    for (size_t i = 0; i < 30; i++) {
        static const float cx[3] = {4, -2, -2}, cy[3] = {0, 3, -3};
        y[i] = (uint32_t)(i % 3);
        x[2 * i] = cx[y[i]] + 0.3f * (float)((i * 7) % 5) - 0.6f;
        x[2 * i + 1] = cy[y[i]] + 0.3f * (float)((i * 11) % 5) - 0.6f;
    }
    static const char *const labels[] = {"east", "north", "south"};
    lipi_probe *p = NULL, *q = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_probe_train(x, y, 30, 2, labels, 3, NULL, &p, &err), LIPI_OK);
    float probs[30 * 3], again[30 * 3];
    lipi_probe_predict(p, x, 30, probs);
    for (size_t i = 0; i < 30; i++) {
        float best = probs[3 * i + y[i]];
        for (size_t c = 0; c < 3; c++)
            if (c != y[i])
                assert_true(probs[3 * i + c] < best);
        double sum = probs[3 * i] + probs[3 * i + 1] + probs[3 * i + 2];
        assert_true(fabs(sum - 1) < 1e-5);
    }
    lipi_index_model mi = {.name = "m", .fingerprint = "0123456789abcdef", .pooling = "cls"};
    assert_int_equal(lipi_probe_save(p, &mi, 1.0, md_path("lib.json"), &err), LIPI_OK);
    assert_int_equal(lipi_probe_load(md_path("lib.json"), &q, &err), LIPI_OK);
    lipi_probe_predict(q, x, 30, again);
    assert_memory_equal(probs, again, sizeof probs); /* weights survive exactly */
    assert_string_equal(lipi_probe_label(q, 1), "north");
    assert_string_equal(lipi_probe_model(q)->fingerprint, "0123456789abcdef");
    assert_string_equal(lipi_probe_model(q)->pooling, "cls");
    lipi_probe_free(q);

    /* Bad inputs. */
    uint32_t bad_y[2] = {0, 3};
    assert_int_equal(lipi_probe_train(x, bad_y, 2, 2, labels, 3, NULL, &q, &err), LIPI_EINVAL);
    assert_int_equal(err.line, 2);
    assert_int_equal(lipi_probe_train(x, y, 30, 2, labels, 1, NULL, &q, &err), LIPI_EINVAL);
    float nan_x[2] = {NAN, 0};
    assert_int_equal(lipi_probe_train(nan_x, y, 1, 2, labels, 3, NULL, &q, &err), LIPI_EINVAL);
    md_write(md_path("bad.json"), "{\"format\":\"lipi-probe\",\"version\":1,\"dim\":2,"
                                  "\"labels\":[\"a\",\"b\"],\"weights\":[[1,2]],\"bias\":[0,0]}",
             93);
    assert_int_equal(lipi_probe_load(md_path("bad.json"), &q, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "weights"));
    md_write(md_path("bad2.json"), "[1,2", 4);
    assert_int_equal(lipi_probe_load(md_path("bad2.json"), &q, &err), LIPI_EFORMAT);
    lipi_probe_free(p);
}

static void test_probe_allocation_failures_are_reported_and_leak_nothing(void **state)
{
    float x[8] = {1, 0, 0.9f, 0.1f, 0, 1, 0.1f, 0.9f};
    uint32_t y[4] = {0, 0, 1, 1};
    static const char *const labels[] = {"a", "b"};
    lipi_index_model mi = {.name = "m", .fingerprint = "0123456789abcdef", .pooling = "mean"};
    bool done = false;
    for (md_fail_at = 0; !done && md_fail_at < 1000; md_fail_at++) {
        md_alloc_count = 0;
        lipi_set_alloc_hooks(&md_failing_hooks);
        lipi_error err = {0};
        lipi_probe *p = NULL, *q = NULL;
        lipi_status st = lipi_probe_train(x, y, 4, 2, labels, 2, NULL, &p, &err);
        if (st == LIPI_OK)
            st = lipi_probe_save(p, &mi, 1.0, md_path("alloc.json"), &err);
        if (st == LIPI_OK)
            st = lipi_probe_load(md_path("alloc.json"), &q, &err);
        lipi_probe_free(p);
        lipi_probe_free(q);
        lipi_set_alloc_hooks(NULL);
        if (st == LIPI_OK)
            done = true;
        else
            assert_int_equal(st, LIPI_ENOMEM);
    }
    md_fail_at = -1;
    assert_true(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed_writes_the_pipeline_vectors_as_npy),
        cmocka_unit_test(test_embed_jsonl_gives_the_same_floats_as_npy),
        cmocka_unit_test(test_embed_normalize_option_makes_unit_vectors),
        cmocka_unit_test(test_embed_truncates_long_lines_and_counts_them),
        cmocka_unit_test(test_truncation_keeps_the_special_tokens),
        cmocka_unit_test(test_embed_usage_and_model_errors),
        cmocka_unit_test(test_embed_int8_stays_close_to_f32),
        cmocka_unit_test(test_classify_gives_the_fixture_labels_and_probabilities),
        cmocka_unit_test(test_classify_pairs_reads_tsv_pairs_as_pytorch_saw_them),
        cmocka_unit_test(test_classify_needs_a_classifier_head),
        cmocka_unit_test(test_rerank_pairs_scores_are_pytorch_sigmoids_grouped_by_query),
        cmocka_unit_test(test_rerank_query_sorts_passages_and_top_keeps_the_best),
        cmocka_unit_test(test_rerank_from_search_takes_queries_by_number),
        cmocka_unit_test(test_search_rerank_equals_search_then_rerank),
        cmocka_unit_test(test_probe_separates_topics_and_is_deterministic),
        cmocka_unit_test(test_probe_predict_with_another_model_is_an_error),
        cmocka_unit_test(test_probe_library_learns_separable_points_and_round_trips),
        cmocka_unit_test(test_probe_allocation_failures_are_reported_and_leak_nothing),
    };
    return cmocka_run_group_tests_name("embed_cli", tests, setup, teardown);
}

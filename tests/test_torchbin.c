/* PyTorch checkpoints read without running their pickle (model/torchbin.c,
 * model/weights.c): torch.save files of tests/fixtures/torchbin (made by
 * make_torchbin.py from the safetensors fixtures) give the same tensors bit
 * for bit and the same model outputs; hostile pickles are refused with the
 * opcode or global named and nothing run; lipi convert writes the
 * safetensors form atomically. bge-m3's sparse_linear.pt / colbert_linear.pt
 * heads (read the same way) give FlagEmbedding's lexical weights and
 * multi-vectors (tests/fixtures/bge_m3, made by make_bge_m3.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "model/model_impl.h"
#include "pipeline/pipeline.h"
#include "tests/alloc_fail.h"
#include "tests/cli_run.h"
#include "tests/model_dir.h"

#define TB "tests/fixtures/torchbin"
#define MODELS "tests/fixtures/models"
#define PWNED "/tmp/lipi-torchbin-pwned"

static int setup(void **state)
{
    (void)state;
    return md_setup("torchbin");
}

static int teardown(void **state)
{
    (void)state;
    md_teardown();
    return 0;
}

static lipi_safetensors *open_weights(const char *dir)
{
    lipi_safetensors *set = NULL;
    lipi_error err = {0};
    char used[4096];
    lipi_status st = lipi_weights_open(dir, &set, used, sizeof used, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  %s: %s: %s\n", dir, err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    return set;
}

/* Every tensor of `want` is in `got` with the same dtype, shape and bytes;
 * returns how many tensors were compared. */
static size_t assert_same_tensors(const lipi_safetensors *want, const lipi_safetensors *got)
{
    size_t n = 0;
    for (size_t i = 0; i < want->n; i++) {
        const lipi_st_tensor *a = &want->tensors[i], *b = lipi_st_find(got, a->name);
        if (!b)
            fprintf(stderr, "  missing tensor %s\n", a->name);
        assert_non_null(b);
        assert_string_equal(a->dtype_name, b->dtype_name);
        assert_int_equal(a->ndim, b->ndim);
        for (size_t d = 0; d < a->ndim; d++)
            assert_int_equal(a->shape[d], b->shape[d]);
        assert_int_equal(a->end - a->begin, b->end - b->begin);
        assert_memory_equal(a->data, b->data, a->end - a->begin);
        n++;
    }
    for (size_t i = 0; i < want->n_parts; i++)
        n += assert_same_tensors(want->parts[i], got);
    return n;
}

static size_t count_tensors(const lipi_safetensors *s)
{
    size_t n = s->n;
    for (size_t i = 0; i < s->n_parts; i++)
        n += count_tensors(s->parts[i]);
    return n;
}

static void test_torch_save_checkpoints_give_the_safetensors_tensors_bit_for_bit(void **state)
{
    (void)state;
    /* torchbin folder, its source, extra tensors the .bin has (bert: the
     * tied decoder weight and the position_ids buffer). */
    static const struct {
        const char *bin, *st;
        size_t extra;
    } cases[] = {
        {"bert", "bert", 2},         {"bert_f16", "bert_f16", 0}, {"bert_bf16", "bert_bf16", 0},
        {"bert_deflate", "bert", 2}, {"xlmr_sharded", "xlmr", 0},
        {"xlmr_st_sharded", "xlmr", 0}, /* model.safetensors.index.json */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char a[256], b[256];
        snprintf(a, sizeof a, MODELS "/%s", cases[i].st);
        snprintf(b, sizeof b, TB "/%s", cases[i].bin);
        lipi_safetensors *want = open_weights(a), *got = open_weights(b);
        size_t n = assert_same_tensors(want, got);
        assert_true(n > 30);
        assert_int_equal(count_tensors(got), n + cases[i].extra);
        lipi_st_close(want);
        lipi_st_close(got);
    }
}

static void test_views_ties_and_int64_buffers_keep_their_storage_layout(void **state)
{
    (void)state;
    lipi_safetensors *s = open_weights(TB "/bert");
    const char *p = "bert.encoder.layer.0.attention.self.";
    char q[128], k[128], v[128];
    snprintf(q, sizeof q, "%squery.weight", p);
    snprintf(k, sizeof k, "%skey.weight", p);
    snprintf(v, sizeof v, "%svalue.weight", p);
    const lipi_st_tensor *tq = lipi_st_find(s, q), *tk = lipi_st_find(s, k),
                         *tv = lipi_st_find(s, v);
    assert_non_null(tq);
    assert_non_null(tk);
    assert_non_null(tv);
    /* Slices of one (3C, C) storage: consecutive offsets into the same bytes. */
    assert_ptr_equal(tk->data, tq->data + 32 * 32 * 4);
    assert_ptr_equal(tv->data, tq->data + 2 * 32 * 32 * 4);
    const lipi_st_tensor *emb = lipi_st_find(s, "bert.embeddings.word_embeddings.weight"),
                         *dec = lipi_st_find(s, "cls.predictions.decoder.weight");
    assert_non_null(dec);
    assert_ptr_equal(emb->data, dec->data);
    const lipi_st_tensor *pos = lipi_st_find(s, "bert.embeddings.position_ids");
    assert_non_null(pos);
    assert_string_equal(pos->dtype_name, "I64");
    assert_int_equal(pos->dtype, LIPI_ST_OTHER);
    assert_int_equal(pos->ndim, 2);
    assert_int_equal(pos->shape[1], 32);
    int64_t last;
    memcpy(&last, pos->data + 31 * 8, 8);
    assert_int_equal(last, 31);
    lipi_st_close(s);
}

/* Runs both folders on the same ids: bit-identical hidden states. */
static void assert_same_outputs(const char *a, const char *b, bool embed)
{
    lipi_model *ma = NULL, *mb = NULL;
    lipi_model_session *sa = NULL, *sb = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_model_load(a, NULL, &ma, &err);
    if (st == LIPI_OK)
        st = lipi_model_load(b, NULL, &mb, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  %s: %s\n", err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    assert_int_equal(lipi_model_session_new(ma, 1, &sa, &err), LIPI_OK);
    assert_int_equal(lipi_model_session_new(mb, 1, &sb, &err), LIPI_OK);
    uint32_t ids[] = {0, 5, 17, 42, 99, 3, 2};
    lipi_sequence seq = {.ids = ids, .len = 7};
    size_t n = embed ? lipi_model_embed_dim(ma, 0) : 7 * lipi_model_get_info(ma)->hidden_size;
    assert_int_equal(n, embed ? lipi_model_embed_dim(mb, 0)
                              : 7 * lipi_model_get_info(mb)->hidden_size);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (embed) {
        assert_int_equal(lipi_model_embed(sa, &seq, 1, NULL, x, &err), LIPI_OK);
        assert_int_equal(lipi_model_embed(sb, &seq, 1, NULL, y, &err), LIPI_OK);
    } else {
        assert_int_equal(lipi_model_forward(sa, &seq, 1, x, &err), LIPI_OK);
        assert_int_equal(lipi_model_forward(sb, &seq, 1, y, &err), LIPI_OK);
    }
    assert_memory_equal(x, y, n * sizeof *x);
    free(x);
    free(y);
    lipi_model_session_free(sa);
    lipi_model_session_free(sb);
    lipi_model_free(ma);
    lipi_model_free(mb);
}

static void test_models_from_pytorch_model_bin_equal_their_safetensors_twins(void **state)
{
    (void)state;
    assert_same_outputs(MODELS "/bert", TB "/bert", false);
    assert_same_outputs(MODELS "/bert_f16", TB "/bert_f16", false);
    assert_same_outputs(MODELS "/bert_bf16", TB "/bert_bf16", false);
    assert_same_outputs(MODELS "/bert", TB "/bert_deflate", false);
    assert_same_outputs(MODELS "/xlmr", TB "/xlmr_sharded", false);
    assert_same_outputs(MODELS "/xlmr", TB "/xlmr_st_sharded", false);
}

/* Copies file `from` to dir/name. */
static void copy_into(const char *from, const char *dir, const char *name)
{
    char p[512];
    size_t len = 0;
    char *b = md_slurp(from, &len);
    if (!b)
        fprintf(stderr, "  cannot read %s\n", from);
    assert_non_null(b);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    md_write(p, b, len);
    free(b);
}

static void test_a_dense_module_in_pytorch_model_bin_is_read(void **state)
{
    (void)state;
    const char *dir = md_path("st_dense");
    assert_true(md_model_dir("st_cls_dense", dir));
    char p[512];
    snprintf(p, sizeof p, "%s/2_Dense/model.safetensors", dir);
    assert_int_equal(unlink(p), 0);
    copy_into(TB "/st_dense/2_Dense/pytorch_model.bin", dir, "2_Dense/pytorch_model.bin");
    assert_same_outputs(MODELS "/st_cls_dense", dir, true);
}

/* lipi_torch_open(path) fails with EFORMAT and a message holding `want`. */
static void assert_refused(const char *file, const char *want)
{
    char path[256];
    snprintf(path, sizeof path, TB "/hostile/%s", file);
    lipi_safetensors *s = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_torch_open(path, &s, &err);
    if (st != LIPI_EFORMAT || !strstr(err.msg, want))
        fprintf(stderr, "  %s: %s: %s (expected \"%s\")\n", file, lipi_status_name(st),
                err.msg, want);
    assert_int_equal(st, LIPI_EFORMAT);
    assert_null(s);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.path, file));
}

static void test_hostile_pickles_are_refused_naming_the_opcode_or_global(void **state)
{
    (void)state;
    unlink(PWNED);
    assert_refused("os_system.bin", "global os.system is not allowed");
    assert_refused("global_os_system.bin", "global posix.system is not allowed");
    assert_refused("reduce_storage.bin", "REDUCE of a storage type");
    assert_refused("reduce_str.bin", "REDUCE of a str");
    assert_refused("inst.bin", "opcode 0x69 (INST) is not allowed");
    assert_refused("offset_out_of_range.bin", "elements [5, +6) outside storage \"0\" of 6");
    assert_refused("absurd_size.bin", "sizes overflow");
    assert_refused("non_contiguous.bin", "only contiguous tensors are read");
    assert_refused("storage_too_short.bin", "has 24 bytes, expected 600 elements");
    assert_refused("missing_storage.bin", "storage entry \"archive/data/7\" missing");
    assert_refused("truncated.bin", "truncated");
    assert_refused("legacy.bin", "legacy torch.save format");
    /* Nothing ran: the payloads would have created this file. */
    assert_int_equal(access(PWNED, F_OK), -1);
}

static void test_pickle_errors_give_the_byte_offset_in_data_pkl(void **state)
{
    (void)state;
    lipi_safetensors *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_torch_open(TB "/hostile/os_system.bin", &s, &err), LIPI_EFORMAT);
    /* PROTO 2 takes bytes 0-1; the GLOBAL opcode is byte 2. */
    assert_int_equal(err.offset, 2);
    assert_non_null(strstr(err.path, "data.pkl"));
}

/* Every truncation of a small checkpoint fails cleanly, never crashes. */
static void test_every_prefix_of_a_checkpoint_is_refused_cleanly(void **state)
{
    (void)state;
    size_t len = 0;
    char *whole = md_slurp(TB "/tiny.bin", &len);
    assert_non_null(whole);
    for (size_t n = 0; n < len; n++) {
        unsigned char *p = malloc(n ? n : 1);
        memcpy(p, whole, n);
        lipi_safetensors *s = NULL;
        lipi_error err = {0};
        lipi_status st = lipi_torch_open_mem(p, n, "tiny.bin", &s, &err);
        assert_int_equal(st, LIPI_EFORMAT);
        assert_null(s);
        free(p);
    }
    lipi_safetensors *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_torch_open_mem((const unsigned char *)whole, len, "tiny.bin", &s, &err),
                     LIPI_OK);
    assert_int_equal(s->n, 4);
    const lipi_st_tensor *row = lipi_st_find(s, "row"), *h = lipi_st_find(s, "h");
    float f[3];
    memcpy(f, row->data, sizeof f);
    assert_true(f[0] == 3.0f && f[1] == 4.0f && f[2] == 5.0f);
    assert_string_equal(h->dtype_name, "F16");
    lipi_st_close(s);
    free(whole);
}

static lipi_status open_tiny(void *ctx, lipi_error *err)
{
    lipi_safetensors *s = NULL;
    lipi_status st = lipi_torch_open(ctx, &s, err);
    if (st == LIPI_OK && s->n != 4)
        st = LIPI_EFORMAT;
    lipi_st_close(s);
    return st;
}

static lipi_status open_sharded(void *ctx, lipi_error *err)
{
    lipi_safetensors *s = NULL;
    char used[4096];
    lipi_status st = lipi_weights_open(ctx, &s, used, sizeof used, err);
    lipi_st_close(s);
    return st;
}

static void test_allocation_failures_are_reported_and_leak_nothing(void **state)
{
    (void)state;
    assert_true(alloc_fail_loop("tiny.bin", open_tiny, (void *)TB "/tiny.bin") > 5);
    assert_true(alloc_fail_loop("bert_deflate", open_sharded, (void *)TB "/bert_deflate") > 40);
    assert_true(alloc_fail_loop("xlmr_sharded", open_sharded, (void *)TB "/xlmr_sharded") > 40);
}

static void write_text(const char *path, const char *s)
{
    md_write(path, s, strlen(s));
}

static void test_shard_indexes_are_checked(void **state)
{
    (void)state;
    const char *dir = md_path("shards");
    mkdir(dir, 0777);
    char p[512];
    static const char *const shards[] = {"pytorch_model-00001-of-00002.bin",
                                         "pytorch_model-00002-of-00002.bin"};
    for (size_t i = 0; i < 2; i++) {
        char from[256];
        snprintf(from, sizeof from, TB "/xlmr_sharded/%s", shards[i]);
        copy_into(from, dir, shards[i]);
    }
    snprintf(p, sizeof p, "%s/pytorch_model.bin.index.json", dir);
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"{\"weight_map\": {\"embeddings.word_embeddings.weight\": \"../x.bin\"}}",
         "expected a file name inside the folder"},
        {"{\"weight_map\": {\"encoder.layer.1.output.dense.bias\": "
         "\"pytorch_model-00001-of-00002.bin\"}}",
         "lacks it"},
        {"{\"weight_map\": {}}", "expected \"weight_map\""},
        {"[1]", "expected \"weight_map\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(p, cases[i].json);
        lipi_safetensors *s = NULL;
        lipi_error err = {0};
        char used[4096];
        assert_int_equal(lipi_weights_open(dir, &s, used, sizeof used, &err), LIPI_EFORMAT);
        if (!strstr(err.msg, cases[i].want))
            fprintf(stderr, "  case %zu: %s\n", i, err.msg);
        assert_non_null(strstr(err.msg, cases[i].want));
        assert_null(s);
    }
}

static void test_a_folder_without_weights_names_the_files_looked_for(void **state)
{
    (void)state;
    const char *dir = md_path("empty");
    mkdir(dir, 0777);
    lipi_safetensors *s = NULL;
    lipi_error err = {0};
    char used[4096];
    assert_int_equal(lipi_weights_open(dir, &s, used, sizeof used, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "model.safetensors, pytorch_model.bin"));
}

static void test_convert_writes_the_same_tensors_as_safetensors(void **state)
{
    (void)state;
    /* A sentence-transformers folder: the main weights and 2_Dense as .bin. */
    const char *dir = md_path("convert");
    mkdir(dir, 0777);
    char p[512], sub[512];
    snprintf(sub, sizeof sub, "%s/2_Dense", dir);
    mkdir(sub, 0777);
    static const char *const files[][2] = {
        {TB "/bert/pytorch_model.bin", "pytorch_model.bin"},
        {TB "/bert/config.json", "config.json"},
        {TB "/st_dense/2_Dense/pytorch_model.bin", "2_Dense/pytorch_model.bin"},
    };
    for (size_t i = 0; i < 3; i++)
        copy_into(files[i][0], dir, files[i][1]);
    size_t n = 0;
    lipi_error err = {0};
    lipi_status st = lipi_model_convert(dir, &n, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  %s\n", err.msg);
    assert_int_equal(st, LIPI_OK);
    assert_int_equal(n, 2);
    const char *pairs[][2] = {{TB "/bert/pytorch_model.bin", "model.safetensors"},
                              {TB "/st_dense/2_Dense/pytorch_model.bin",
                               "2_Dense/model.safetensors"}};
    for (size_t i = 0; i < 2; i++) {
        lipi_safetensors *a = NULL, *b = NULL;
        snprintf(p, sizeof p, "%s/%s", dir, pairs[i][1]);
        assert_int_equal(lipi_torch_open(pairs[i][0], &a, &err), LIPI_OK);
        assert_int_equal(lipi_st_open(p, &b, &err), LIPI_OK);
        assert_int_equal(assert_same_tensors(a, b), a->n);
        assert_int_equal(b->n, a->n);
        lipi_st_close(a);
        lipi_st_close(b);
    }
    /* Nothing left to do now; the folder loads from its safetensors. */
    assert_int_equal(lipi_model_convert(dir, &n, &err), LIPI_EINVAL);
    assert_int_equal(n, 0);
    assert_same_outputs(TB "/bert", dir, false);
}

static void test_lipi_convert_refuses_a_hostile_checkpoint_and_writes_nothing(void **state)
{
    (void)state;
    const char *dir = md_path("convert_hostile");
    mkdir(dir, 0777);
    char p[512];
    copy_into(TB "/hostile/os_system.bin", dir, "pytorch_model.bin");
    unlink(PWNED);
    cli_result r = cli_runf("convert '%s'", dir);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "global os.system is not allowed"));
    cli_result_free(&r);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(access(PWNED, F_OK), -1);

    const char *good = md_path("convert_cli");
    assert_true(md_model_dir("bert", good));
    snprintf(p, sizeof p, "%s/model.safetensors", good);
    assert_int_equal(unlink(p), 0);
    copy_into(TB "/bert/pytorch_model.bin", good, "pytorch_model.bin");
    r = cli_runf("convert '%s'", good);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "wrote 1 model.safetensors file"));
    cli_result_free(&r);
    assert_same_outputs(MODELS "/bert", good, false);
}


/* ======================================================================== */
/* bge-m3 heads                                                              */
/* ======================================================================== */

#define M3 "tests/fixtures/bge_m3"
#define M3_TOL 1e-5

/* The xlmr fixture with bge-m3's heads and tokenizer, made once. */
static const char *m3_dir(void)
{
    const char *dir = md_path("bge_m3");
    if (access(dir, F_OK) != 0) {
        assert_true(md_model_dir("xlmr", dir));
        copy_into(M3 "/tokenizer.json", dir, "tokenizer.json");
        copy_into(M3 "/sparse_linear.pt", dir, "sparse_linear.pt");
        copy_into(M3 "/colbert_linear.pt", dir, "colbert_linear.pt");
    }
    return dir;
}

typedef struct {
    char *buf;
    const char *texts[8];
    size_t lens[8], n;
} m3_texts;

static void read_texts(m3_texts *t)
{
    size_t len = 0;
    t->buf = md_slurp(M3 "/texts.txt", &len);
    assert_non_null(t->buf);
    t->n = 0;
    for (char *p = t->buf, *nl; (nl = strchr(p, '\n')) && t->n < 8; p = nl + 1) {
        t->texts[t->n] = p;
        t->lens[t->n++] = (size_t)(nl - p);
    }
    assert_int_equal(t->n, 4);
}

static void check_m3(size_t batch, size_t threads)
{
    lipi_embedder_options o = {.batch = batch, .normalize = -1};
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_embedder_open(m3_dir(), &o, &e, &err);
    if (st != LIPI_OK)
        fprintf(stderr, "  %s: %s\n", err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    bool sparse = false;
    size_t cdim = 0;
    lipi_embedder_outputs(e, &sparse, &cdim);
    assert_true(sparse);
    assert_int_equal(cdim, 32);
    assert_int_equal(lipi_embedder_session_new(e, threads, &s, &err), LIPI_OK);
    m3_texts t;
    read_texts(&t);
    lipi_lexical lex;
    lipi_multivectors mv;
    assert_int_equal(lipi_embedder_lexical(s, t.texts, t.lens, t.n, &lex, NULL, &err), LIPI_OK);
    assert_int_equal(lipi_embedder_colbert(s, t.texts, t.lens, t.n, &mv, NULL, &err), LIPI_OK);

    json_error_t jerr;
    json_t *want = json_load_file(M3 "/expected.json", 0, &jerr);
    assert_non_null(want);
    size_t rows = 0, cols = 0;
    float *vecs = md_read_npy(M3 "/expected_colbert.npy", &rows, &cols);
    assert_non_null(vecs);
    assert_int_equal(cols, 32);
    assert_int_equal(mv.off[t.n], rows);
    double worst = 0;
    for (size_t i = 0; i < t.n; i++) {
        json_t *w = json_array_get(want, i);
        json_t *lw = json_object_get(w, "lexical_weights");
        /* The same ids in the same order (first occurrence), weights close. */
        assert_int_equal(lex.off[i + 1] - lex.off[i], json_array_size(lw));
        for (size_t k = 0; k < json_array_size(lw); k++) {
            json_t *pair = json_array_get(lw, k);
            assert_int_equal(lex.ids[lex.off[i] + k], json_integer_value(json_array_get(pair, 0)));
            double d = fabs(lex.weights[lex.off[i] + k] - json_real_value(json_array_get(pair, 1)));
            worst = d > worst ? d : worst;
        }
        json_t *r = json_object_get(w, "colbert_rows");
        assert_int_equal(mv.off[i], json_integer_value(json_array_get(r, 0)));
        assert_int_equal(mv.off[i + 1], json_integer_value(json_array_get(r, 1)));
    }
    for (size_t k = 0; k < rows * cols; k++) {
        double d = fabs(mv.vecs[k] - vecs[k]);
        worst = d > worst ? d : worst;
    }
    if (worst > M3_TOL)
        fprintf(stderr, "  batch %zu, %zu threads: worst difference %g\n", batch, threads, worst);
    assert_true(worst <= M3_TOL);
    free(vecs);
    json_decref(want);
    lipi_lexical_free(&lex);
    lipi_multivectors_free(&mv);
    free(t.buf);
    lipi_embedder_session_free(s);
    lipi_embedder_free(e);
}

static void test_bge_m3_lexical_weights_and_colbert_vectors_match_flagembedding(void **state)
{
    (void)state;
    check_m3(32, 1);
    check_m3(3, 2); /* two chunks, two threads */
}

static void test_a_model_without_m3_heads_says_which_file_is_missing(void **state)
{
    (void)state;
    lipi_embedder *e = NULL;
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    lipi_embedder_options o = {.normalize = -1};
    assert_int_equal(lipi_embedder_open(md_model("xlmr"), &o, &e, &err), LIPI_OK);
    assert_int_equal(lipi_embedder_session_new(e, 1, &s, &err), LIPI_OK);
    const char *text = "t5 t6";
    size_t len = strlen(text);
    lipi_lexical lex;
    lipi_multivectors mv;
    assert_int_equal(lipi_embedder_lexical(s, &text, &len, 1, &lex, NULL, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "sparse_linear.pt"));
    assert_null(lex.ids);
    assert_int_equal(lipi_embedder_colbert(s, &text, &len, 1, &mv, NULL, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "colbert_linear.pt"));
    lipi_embedder_session_free(s);
    lipi_embedder_free(e);

    /* A head of the wrong shape is refused at load, naming the file. */
    const char *dir = md_path("bad_m3");
    assert_true(md_model_dir("xlmr", dir));
    copy_into(M3 "/colbert_linear.pt", dir, "sparse_linear.pt");
    lipi_model *m = NULL;
    assert_int_equal(lipi_model_load(dir, NULL, &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.path, "sparse_linear.pt"));
    assert_non_null(strstr(err.msg, "\"weight\" (1, 32)"));
}

static void test_lipi_embed_emit_sparse_and_colbert_write_jsonl(void **state)
{
    (void)state;
    const char *dir = m3_dir();
    cli_result r = cli_runf("embed -m '%s' --emit sparse --format jsonl " M3 "/texts.txt", dir);
    assert_int_equal(r.code, 0);
    /* Text 3 is "t65": one weight, as expected.json has it. */
    const char *line3 = r.out;
    for (int k = 0; k < 2; k++)
        line3 = strchr(line3, '\n') + 1;
    const char *want3 = "{\"lexical_weights\":{\"65\":0.3706";
    assert_memory_equal(line3, want3, strlen(want3));
    cli_result_free(&r);
    r = cli_runf("embed -m '%s' --emit colbert --format jsonl " M3 "/texts.txt", dir);
    assert_int_equal(r.code, 0);
    json_error_t jerr;
    json_t *j = json_loadb(r.out, strcspn(r.out, "\n"), 0, &jerr);
    assert_non_null(j);
    /* "t40 t83 t40 t92 t5" is 7 tokens: 6 vectors of 32. */
    json_t *v = json_object_get(j, "colbert_vecs");
    assert_int_equal(json_array_size(v), 6);
    assert_int_equal(json_array_size(json_array_get(v, 0)), 32);
    json_decref(j);
    cli_result_free(&r);
    r = cli_runf("embed -m '%s' --emit sparse -o x.npy " M3 "/texts.txt", dir);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "JSONL only"));
    cli_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_save_checkpoints_give_the_safetensors_tensors_bit_for_bit),
        cmocka_unit_test(test_views_ties_and_int64_buffers_keep_their_storage_layout),
        cmocka_unit_test(test_models_from_pytorch_model_bin_equal_their_safetensors_twins),
        cmocka_unit_test(test_a_dense_module_in_pytorch_model_bin_is_read),
        cmocka_unit_test(test_hostile_pickles_are_refused_naming_the_opcode_or_global),
        cmocka_unit_test(test_pickle_errors_give_the_byte_offset_in_data_pkl),
        cmocka_unit_test(test_every_prefix_of_a_checkpoint_is_refused_cleanly),
        cmocka_unit_test(test_allocation_failures_are_reported_and_leak_nothing),
        cmocka_unit_test(test_shard_indexes_are_checked),
        cmocka_unit_test(test_a_folder_without_weights_names_the_files_looked_for),
        cmocka_unit_test(test_convert_writes_the_same_tensors_as_safetensors),
        cmocka_unit_test(test_lipi_convert_refuses_a_hostile_checkpoint_and_writes_nothing),
        cmocka_unit_test(test_bge_m3_lexical_weights_and_colbert_vectors_match_flagembedding),
        cmocka_unit_test(test_a_model_without_m3_heads_says_which_file_is_missing),
        cmocka_unit_test(test_lipi_embed_emit_sparse_and_colbert_write_jsonl),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* Allocation failures in every loader: each runs on its fuzz seeds
 * (tests/fuzz/corpus/<reader>/) with the Nth allocation failing for N = 0,
 * 1, 2, ... until it succeeds (tests/alloc_fail.h): every failing run gives
 * LIPI_ENOMEM and leaks nothing, jansson's allocations included (JSON is
 * parsed by lipi_json_loadb). What loaded is then used (encode, decode,
 * search, a forward pass) under the same failing allocator. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"
#include "retrieval/retrieval.h"
#include "tests/alloc_fail.h"
#include "tests/fuzz/fuzz.h"
#include "trainer/trainer.h"

#define CORPUS "tests/fuzz/corpus/"

typedef struct {
    char *data;
    size_t len;
} blob;

static blob read_blob(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    blob b = {malloc((size_t)n + 1), (size_t)n};
    assert_non_null(b.data);
    assert_int_equal(fread(b.data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return b;
}

/* The loop costs (allocations of one run)^2: seeds whose run makes more
 * allocations than this are left to the fuzzer (the readers' own tests loop
 * over small inputs of the same shapes). */
#define MAX_ALLOCS 1000

/* Runs `run` under the loop on the seeds of a harness (ctx is the seed)
 * that make at most MAX_ALLOCS allocations; at least one must. */
static void each_seed(const char *harness, lipi_status (*run)(void *ctx, lipi_error *err))
{
    char dir[256], path[512];
    snprintf(dir, sizeof dir, CORPUS "%s", harness);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    size_t seeds = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        blob b = read_blob(path);
        lipi_error err;
        alloc_fail_arm(-1);
        lipi_status st = run(&b, &err);
        long calls = alloc_fail_calls();
        alloc_fail_disarm();
        if (st != LIPI_OK)
            fail_msg("%s: %s %s", path, lipi_status_name(st), err.msg);
        if (calls <= MAX_ALLOCS) {
            assert_int_equal(alloc_fail_loop(path, run, &b), calls);
            seeds++;
        }
        free(b.data);
    }
    closedir(d);
    assert_true(seeds > 0);
}

/* Encodes and decodes a few texts: the loaded tokenizer works. */
static lipi_status use_tokenizer(const lipi_tokenizer *tok, lipi_error *err)
{
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    uint32_t ids[128];
    char out[512];
    size_t out_len;
    lipi_status st = lipi_encoder_new(tok, &enc, err);
    if (st == LIPI_OK && (st = lipi_session_new(enc, &s)) != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    for (size_t i = 0; st == LIPI_OK && i < 3; i++) {
        lipi_encoding e = {.ids = ids, .cap = 128};
        const char *t = fuzz_texts[i];
        st = lipi_encode(s, t, strlen(t), NULL, &e, err);
        /* A vocabulary without an unknown token cannot encode every text. */
        if (st == LIPI_EINVAL)
            st = LIPI_OK;
        else if (st == LIPI_OK)
            st = lipi_decode(s, ids, e.len < e.cap ? e.len : e.cap, false, out, sizeof out,
                             &out_len, err);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    return st;
}

/* Uses and frees *tok (the address, as tok is set by the loader called in
 * the same argument list). */
static lipi_status finish(lipi_status st, lipi_tokenizer **tokp, lipi_error *err)
{
    lipi_tokenizer *tok = *tokp;
    if (st == LIPI_OK)
        st = use_tokenizer(tok, err);
    lipi_tokenizer_free(tok);
    return st;
}

static lipi_status run_tokenizer_json(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    lipi_tokenizer *tok = NULL;
    return finish(lipi_tokenizer_load_json(b->data, b->len, "tokenizer.json", &tok, err), &tok,
                  err);
}

static lipi_status run_spm(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    lipi_tokenizer *tok = NULL;
    return finish(lipi_tokenizer_from_spm(b->data, b->len, "m.model", &tok, err), &tok, err);
}

static lipi_status run_vocab_txt(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    fuzz_part p[2];
    fuzz_split((const unsigned char *)b->data, b->len, p, 2);
    lipi_tokenizer *tok = NULL;
    return finish(lipi_tokenizer_from_vocab_txt(p[0].p, p[0].len, "vocab.txt",
                                                p[1].len ? p[1].p : NULL, p[1].len,
                                                LIPI_FLAG_AUTO, LIPI_FLAG_AUTO, &tok, err),
                  &tok, err);
}

static lipi_status run_gpt2(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    fuzz_part p[3];
    fuzz_split((const unsigned char *)b->data, b->len, p, 3);
    lipi_tokenizer *tok = NULL;
    return finish(lipi_tokenizer_from_gpt2(p[0].p, p[0].len, p[1].p, p[1].len, "gpt2",
                                           p[2].len ? p[2].p : NULL, p[2].len, &tok, err),
                  &tok, err);
}

/* A rank file and its NAME.meta.json through lipi_tokenizer_open. */
static lipi_status run_tiktoken(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    fuzz_part p[2];
    fuzz_split((const unsigned char *)b->data, b->len, p, 2);
    lipi_tokenizer *tok = NULL;
    const char *path = fuzz_file("seed.tiktoken", p[0].p, p[0].len);
    fuzz_file("seed.meta.json", p[1].p, p[1].len ? p[1].len : SIZE_MAX);
    lipi_open_options opt = {.pattern = p[1].len ? NULL : "\\s+|\\S+"};
    return finish(lipi_tokenizer_open(path, &opt, &tok, err), &tok, err);
}

static lipi_status run_gguf(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    lipi_tokenizer *tok = NULL;
    return finish(lipi_tokenizer_from_gguf(b->data, b->len, "m.gguf", NULL, &tok, err), &tok,
                  err);
}

static lipi_status run_counts(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    const char *path = fuzz_file("counts.tsv", b->data, b->len);
    lipi_counts *c = NULL;
    lipi_count_entry *sorted = NULL;
    size_t n;
    lipi_status st = lipi_counts_new(&c);
    if (st != LIPI_OK)
        return lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    st = lipi_counts_load(path, c, err);
    if (st == LIPI_OK && (st = lipi_counts_sorted(c, &sorted, &n)) != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    lipi_free(sorted);
    lipi_counts_free(c);
    return st;
}

static lipi_status run_model(void *ctx, lipi_error *err)
{
    const blob *b = ctx;
    fuzz_part p[2];
    fuzz_split((const unsigned char *)b->data, b->len, p, 2);
    fuzz_file("config.json", p[0].p, p[0].len);
    fuzz_file("model.safetensors", p[1].p, p[1].len);
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    lipi_status st = lipi_model_load(fuzz_dir(), NULL, &m, err);
    if (st == LIPI_OK)
        st = lipi_model_session_new(m, 1, &s, err);
    if (st == LIPI_OK) {
        uint32_t ids[3] = {2, 5, 3};
        lipi_sequence seq = {.ids = ids, .len = 3};
        float out[64];
        assert_true(lipi_model_embed_dim(m, 0) <= 64);
        st = lipi_model_embed(s, &seq, 1, NULL, out, err);
    }
    lipi_model_session_free(s);
    lipi_model_free(m);
    return st;
}

static lipi_status run_index(void *ctx, lipi_error *err)
{
    static const char *const names[4] = {"meta.json", "vectors.npy", "offsets.npy", "texts"};
    const blob *b = ctx;
    fuzz_part p[4];
    fuzz_split((const unsigned char *)b->data, b->len, p, 4);
    for (size_t i = 0; i < 4; i++)
        fuzz_file(names[i], p[i].p, p[i].len);
    lipi_index *idx = NULL;
    lipi_status st = lipi_index_open(fuzz_dir(), NULL, &idx, err);
    if (st == LIPI_OK) {
        float q[4] = {1, 0, 0, 0};
        int64_t docs[2];
        float scores[2];
        assert_int_equal(lipi_index_dim(idx), 4);
        st = lipi_index_search(idx, q, 1, 4, 2, NULL, docs, scores, err);
    }
    lipi_index_close(idx);
    return st;
}

/* Each test runs one loader on all its seeds. */
#define LOADER_TEST(name, harness, run)                                                    \
    static void name(void **state)                                                         \
    {                                                                                      \
        (void)state;                                                                       \
        each_seed(harness, run);                                                           \
    }

LOADER_TEST(test_tokenizer_json_loads_under_allocation_failures, "tokenizer_json",
            run_tokenizer_json)
LOADER_TEST(test_sentencepiece_models_load_under_allocation_failures, "spm", run_spm)
LOADER_TEST(test_vocab_txt_loads_under_allocation_failures, "vocab_txt", run_vocab_txt)
LOADER_TEST(test_gpt2_files_load_under_allocation_failures, "gpt2", run_gpt2)
LOADER_TEST(test_tiktoken_files_load_under_allocation_failures, "tiktoken", run_tiktoken)
LOADER_TEST(test_gguf_tokenizers_load_under_allocation_failures, "gguf", run_gguf)
LOADER_TEST(test_counts_files_load_under_allocation_failures, "counts", run_counts)
LOADER_TEST(test_models_load_and_run_under_allocation_failures, "model", run_model)
LOADER_TEST(test_indexes_open_and_search_under_allocation_failures, "index", run_index)

int main(void)
{
    /* The loop needs the same allocations on every run: a table cache
     * written by the first run would be read by the next. Its own loop is
     * in test_tabcache.c. */
    setenv("LIPI_CACHE", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_json_loads_under_allocation_failures),
        cmocka_unit_test(test_sentencepiece_models_load_under_allocation_failures),
        cmocka_unit_test(test_vocab_txt_loads_under_allocation_failures),
        cmocka_unit_test(test_gpt2_files_load_under_allocation_failures),
        cmocka_unit_test(test_tiktoken_files_load_under_allocation_failures),
        cmocka_unit_test(test_gguf_tokenizers_load_under_allocation_failures),
        cmocka_unit_test(test_counts_files_load_under_allocation_failures),
        cmocka_unit_test(test_models_load_and_run_under_allocation_failures),
        cmocka_unit_test(test_indexes_open_and_search_under_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Inference cost of the inflation report (report/cost.c): every figure on a
 * hand-made set against numbers worked out by hand, GQA against MHA, the
 * KV-cache sizes of a 7B decoder, the Gini coefficient, and the reader of
 * Hugging Face config.json files (tests/fixtures/cost, see its README). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "tests/alloc_fail.h"

#define TOL 1e-9
#define FIXTURES "tests/fixtures/cost"

/* Relative comparison: the figures reach 1e13. */
static void assert_close(double got, double want)
{
    if (!(fabs(got - want) <= TOL * (fabs(want) > 1 ? fabs(want) : 1))) {
        print_error("got %.17g, expected %.17g\n", got, want);
        fail();
    }
}

/* ------------------------------------------------------------------------ */
/* The hand-made set                                                         */
/* ------------------------------------------------------------------------ */

/* One tokenizer, three languages, two aligned lines; n = tokens per line:
 *   eng 2, 3   Σn 5   Σn² 13   tokens/line 2.5
 *   hin 4, 6   Σn 10  Σn² 52   tokens/line 5
 *   tha 1, 1   Σn 2   Σn² 2    tokens/line 1
 * Each token is one byte of a line of 'a's. */
static const char *const LANGS[] = {"eng", "hin", "tha"};
static const size_t N[3][2] = {{2, 3}, {4, 6}, {1, 1}};

static lipi_inflation_report *hand_report(void)
{
    const char *toks[] = {"A"};
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(toks, 1, LANGS, 3, 0, &rep, &err), LIPI_OK);
    lipi_inflation_token t[6];
    for (size_t i = 0; i < 6; i++)
        t[i] = (lipi_inflation_token){i, i + 1, false, false};
    for (size_t l = 0; l < 3; l++)
        for (size_t k = 0; k < 2; k++)
            assert_int_equal(lipi_inflation_add_line(rep, 0, l, "aaaaaa", 6, t, N[l][k], &err),
                             LIPI_OK);
    return rep;
}

/* A tiny model: L 1, d 2, d_ff 3, one head of 2, 4 bytes, plain MLP. Per
 * line: 2·n·2·(2·2 + 2·1·2) + 4·n²·2 + 2·2·n·2·3 = 56n + 8n²; KV 16n. */
static const lipi_cost_model TINY_MHA = {"tiny", 1, 2, 3, 1, 1, 2, 4, false};

static void test_every_cost_field_matches_hand_counts(void **state)
{
    lipi_inflation_report *rep = hand_report();
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_set_cost(rep, &TINY_MHA, 10, 2.0, &err), LIPI_OK);
    /* f(2) 144, f(3) 240; f(4) 352, f(6) 624; f(1) 64 */
    static const struct {
        uint64_t sq;
        double attention, flops, flops_ratio, kv, context, price;
    } want[3] = {
        {13, 1.0, 192, 1.0, 40, 4, 0.005},
        {52, 4.0, 488, 976.0 / 384, 80, 2, 0.01},
        {2, 2.0 / 13, 64, 128.0 / 384, 16, 10, 0.002},
    };
    for (size_t l = 0; l < 3; l++) {
        lipi_inflation_cost c;
        lipi_inflation_get_cost(rep, 0, l, &c);
        assert_int_equal(c.tokens_squared, want[l].sq);
        assert_close(c.attention_ratio, want[l].attention);
        assert_close(c.forward_flops_per_line, want[l].flops);
        assert_close(c.forward_flops_ratio, want[l].flops_ratio);
        assert_close(c.kv_cache_bytes_per_line, want[l].kv);
        assert_close(c.context_lines, want[l].context);
        assert_close(c.price_per_1k_lines, want[l].price);
    }
    /* tokens per line {2.5, 5, 1}: pairwise |differences| 2.5 + 1.5 + 4 = 8,
     * twice over ordered pairs, / (2·3·8.5) */
    lipi_inflation_tokenizer_cost tc;
    lipi_inflation_get_tokenizer_cost(rep, 0, &tc);
    assert_close(tc.gini, 16.0 / 51);
    assert_close(tc.premium, 5.0);
    assert_string_equal(tc.premium_max_language, "hin");
    assert_string_equal(tc.premium_min_language, "tha");
    lipi_inflation_free(rep);
}

static void test_gqa_shrinks_kv_and_projections_but_not_attention(void **state)
{
    /* Same d, two heads of 1 sharing one KV head: 2·n·2·(4 + 2) + 8n² + 24n
     * = 48n + 8n²; KV 2·1·1·1·4·n = 8n. Full MHA with two heads of 1 is
     * the tiny model again: 56n + 8n², 16n. */
    lipi_cost_model gqa = {"gqa", 1, 2, 3, 2, 1, 1, 4, false};
    lipi_cost_model mha = {"mha", 1, 2, 3, 2, 2, 1, 4, false};
    assert_close(lipi_cost_forward_flops(&gqa, 2), 128);
    assert_close(lipi_cost_forward_flops(&mha, 2), 144);
    assert_close(lipi_cost_kv_cache_bytes(&gqa, 3), 24);
    assert_close(lipi_cost_kv_cache_bytes(&mha, 3), 48);

    lipi_inflation_report *rep = hand_report();
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_set_cost(rep, &gqa, 8192, NAN, &err), LIPI_OK);
    lipi_inflation_cost c;
    lipi_inflation_get_cost(rep, 0, 0, &c);
    assert_close(c.forward_flops_per_line, (128 + 216) / 2.0);
    assert_close(c.kv_cache_bytes_per_line, 20);
    assert_close(c.attention_ratio, 1.0);
    assert_true(isnan(c.price_per_1k_lines)); /* no price given */
    lipi_inflation_free(rep);
}

static void test_gated_mlp_counts_three_matrices(void **state)
{
    /* m = 3: 32n + 8n² + 2·3·n·2·3 = 68n + 8n² */
    lipi_cost_model gated = TINY_MHA;
    gated.gated = true;
    assert_close(lipi_cost_forward_flops(&gated, 1), 76);
    assert_close(lipi_cost_forward_flops(&gated, 2), 168);
}

static void test_bert_base_matches_its_closed_form(void **state)
{
    lipi_cost_model m;
    lipi_error err = {0};
    assert_int_equal(lipi_cost_model_builtin("bert-base", &m, &err), LIPI_OK);
    for (double n = 1; n <= 512; n *= 8) {
        double d = 768, dff = 3072;
        assert_close(lipi_cost_forward_flops(&m, n),
                     12 * (8 * n * d * d + 4 * n * n * d + 4 * n * d * dff));
    }
    assert_close(lipi_cost_kv_cache_bytes(&m, 1), 2.0 * 12 * 768 * 4);
}

static void test_decoder_7b_kv_cache_is_half_a_gigabyte_and_four_times_that_without_gqa(void **state)
{
    lipi_cost_model m;
    lipi_error err = {0};
    assert_int_equal(lipi_cost_model_builtin("decoder-7b-gqa", &m, &err), LIPI_OK);
    double gqa = lipi_cost_kv_cache_bytes(&m, 4096);
    assert_close(gqa, 536870912.0);
    assert_close(round(gqa / 1e7) / 100, 0.54);
    m.kv_heads = m.heads;
    double mha = lipi_cost_kv_cache_bytes(&m, 4096);
    assert_close(mha, 2147483648.0);
    assert_close(round(mha / 1e7) / 100, 2.15);
}

static void test_gini_on_hand_checked_inputs(void **state)
{
    const double equal[] = {3, 3, 3, 3}, one[] = {0, 0, 0, 1}, three[] = {1, 2, 3};
    assert_close(lipi_cost_gini(equal, 4), 0);
    assert_close(lipi_cost_gini(one, 4), 0.75);
    assert_close(lipi_cost_gini(three, 3), 2.0 / 9);
    assert_true(isnan(lipi_cost_gini(one, 0)));
    assert_true(isnan(lipi_cost_gini(one, 3))); /* all zero */
}

static void test_ratios_follow_parity_rules_without_reference_or_model(void **state)
{
    const char *toks[] = {"A"};
    lipi_inflation_report *rep = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new(toks, 1, LANGS, 3, LIPI_INFLATION_NO_REFERENCE, &rep, &err),
                     LIPI_OK);
    lipi_inflation_token t = {0, 1, false, false};
    assert_int_equal(lipi_inflation_add_line(rep, 0, 1, "a", 1, &t, 1, &err), LIPI_OK);
    lipi_inflation_cost c;
    lipi_inflation_get_cost(rep, 0, 1, &c);
    assert_int_equal(c.tokens_squared, 1);
    assert_true(isnan(c.attention_ratio));
    assert_true(isnan(c.forward_flops_per_line)); /* no model set */
    assert_null(lipi_inflation_cost_model(rep));
    assert_int_equal(lipi_inflation_set_cost(rep, &TINY_MHA, 4, NAN, &err), LIPI_OK);
    lipi_inflation_get_cost(rep, 0, 1, &c);
    assert_close(c.forward_flops_per_line, 64);
    assert_true(isnan(c.forward_flops_ratio));
    /* rows without lines: no gini or premium from them */
    lipi_inflation_tokenizer_cost tc;
    lipi_inflation_get_tokenizer_cost(rep, 0, &tc);
    assert_close(tc.gini, 0);
    assert_close(tc.premium, 1);
    assert_string_equal(tc.premium_max_language, "hin");
    lipi_inflation_free(rep);
}

static void test_set_cost_rejects_bad_values(void **state)
{
    lipi_inflation_report *rep = hand_report();
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_set_cost(rep, &TINY_MHA, 0, NAN, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "context"));
    assert_int_equal(lipi_inflation_set_cost(rep, &TINY_MHA, 1, -1, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "price"));
    lipi_cost_model zero = TINY_MHA;
    zero.kv_heads = 0;
    assert_int_equal(lipi_inflation_set_cost(rep, &zero, 1, NAN, &err), LIPI_EINVAL);
    assert_null(lipi_inflation_cost_model(rep));
    lipi_inflation_free(rep);
}

static void test_squares_are_exact_across_merged_shards(void **state)
{
    /* The lines of hand_report split over two shards in another order. */
    lipi_inflation_report *whole = hand_report(), *a = NULL, *b = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_new_like(whole, &a, &err), LIPI_OK);
    assert_int_equal(lipi_inflation_new_like(whole, &b, &err), LIPI_OK);
    lipi_inflation_token t[6];
    for (size_t i = 0; i < 6; i++)
        t[i] = (lipi_inflation_token){i, i + 1, false, false};
    for (size_t l = 0; l < 3; l++) {
        assert_int_equal(lipi_inflation_add_line(b, 0, l, "aaaaaa", 6, t, N[l][0], &err), LIPI_OK);
        assert_int_equal(lipi_inflation_add_line(a, 0, l, "aaaaaa", 6, t, N[l][1], &err), LIPI_OK);
    }
    assert_int_equal(lipi_inflation_merge(a, b, &err), LIPI_OK);
    static const uint64_t squares[3] = {13, 52, 2};
    for (size_t l = 0; l < 3; l++) {
        lipi_inflation_cost x, y;
        lipi_inflation_get_cost(whole, 0, l, &x);
        lipi_inflation_get_cost(a, 0, l, &y);
        assert_int_equal(x.tokens_squared, squares[l]);
        assert_int_equal(y.tokens_squared, squares[l]);
        assert_true(x.attention_ratio == y.attention_ratio);
    }
    lipi_inflation_free(whole);
    lipi_inflation_free(a);
    lipi_inflation_free(b);
}

/* ------------------------------------------------------------------------ */
/* Outputs                                                                   */
/* ------------------------------------------------------------------------ */

/* The report written in `fmt` as a new string (free). */
static char *written(const lipi_inflation_report *rep, lipi_inflation_format fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lipi_error err = {0};
    assert_non_null(f);
    assert_int_equal(lipi_inflation_write(rep, fmt, f, &err), LIPI_OK);
    fclose(f);
    return buf;
}

static double json_num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        print_error("%s: expected a number\n", key);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static void test_json_carries_every_cost_field(void **state)
{
    lipi_inflation_report *rep = hand_report();
    lipi_error err = {0};
    assert_int_equal(lipi_inflation_set_cost(rep, &TINY_MHA, 10, 2.0, &err), LIPI_OK);
    char *text = written(rep, LIPI_INFLATION_JSON);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root)
        print_error("%s\n%s\n", je.text, text);
    assert_non_null(root);
    json_t *rows = json_object_get(root, "rows");
    assert_int_equal(json_array_size(rows), 3);
    bool seen_hin = false;
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(rows, i);
        if (strcmp(json_string_value(json_object_get(row, "language")), "hin") != 0)
            continue;
        seen_hin = true;
        assert_close(json_num(row, "tokens_squared"), 52);
        assert_close(json_num(row, "attention_ratio"), 4);
        assert_close(json_num(row, "forward_flops_per_line"), 488);
        assert_close(json_num(row, "forward_flops_ratio"), 2.541667); /* 6 decimals */
        assert_close(json_num(row, "kv_cache_bytes_per_line"), 80);
        assert_close(json_num(row, "context_lines"), 2);
        assert_close(json_num(row, "price_per_1k_lines"), 0.01);
    }
    assert_true(seen_hin);
    json_t *cost = json_object_get(root, "cost");
    json_t *model = json_object_get(cost, "model");
    assert_string_equal(json_string_value(json_object_get(model, "name")), "tiny");
    assert_close(json_num(model, "head_dim"), 2);
    assert_true(json_is_false(json_object_get(model, "gated_mlp")));
    assert_close(json_num(cost, "context"), 10);
    assert_close(json_num(cost, "price_per_million"), 2);
    json_t *tc = json_array_get(json_object_get(cost, "tokenizers"), 0);
    assert_string_equal(json_string_value(json_object_get(tc, "tokenizer")), "A");
    assert_close(json_num(tc, "gini"), 0.313725); /* 16/51, 6 decimals */
    assert_close(json_num(tc, "premium"), 5);
    assert_string_equal(json_string_value(json_object_get(tc, "premium_max_language")), "hin");
    assert_string_equal(json_string_value(json_object_get(tc, "premium_min_language")), "tha");
    json_decref(root);
    free(text);
    lipi_inflation_free(rep);
}

static void test_csv_and_table_show_cost_only_when_asked(void **state)
{
    lipi_inflation_report *rep = hand_report();
    lipi_error err = {0};
    char *csv = written(rep, LIPI_INFLATION_CSV), *table = written(rep, LIPI_INFLATION_TABLE);
    char *json = written(rep, LIPI_INFLATION_JSON);
    assert_null(strstr(csv, "attention_ratio"));
    assert_null(strstr(table, "Cost on"));
    assert_null(strstr(json, "\"cost\""));
    free(csv);
    free(table);
    free(json);

    assert_int_equal(lipi_inflation_set_cost(rep, &TINY_MHA, 10, NAN, &err), LIPI_OK);
    csv = written(rep, LIPI_INFLATION_CSV);
    table = written(rep, LIPI_INFLATION_TABLE);
    assert_non_null(strstr(csv, ",comparable,tokens_squared,attention_ratio,forward_flops_per_line,"
                                "forward_flops_ratio,kv_cache_bytes_per_line,context_lines,"
                                "price_per_1k_lines,gini,premium,premium_max_language,"
                                "premium_min_language\n"));
    /* tha: no price given, so an empty field */
    assert_non_null(strstr(csv, ",2,0.153846,64.000000,0.333333,16.000000,10.000000,,0.313725,"
                                "5.000000,hin,tha\n"));
    assert_non_null(strstr(table, "Cost on tiny: 1 layers, d 2, d_ff 3, 1 heads, 1 KV heads of 2, "
                                  "4 bytes, plain MLP; context 10 tokens\n"));
    assert_non_null(strstr(table, "A: Gini of tokens per line 0.314, premium 5.00 (hin / tha)\n"));
    assert_non_null(strstr(table, "language  parity  attention  KV MB/1k lines  context lines\n"));
    /* hin: 80 bytes a line = 0.08 MB per 1,000 lines */
    assert_non_null(strstr(table, "hin         2.00       4.00            0.08            2.0\n"));
    free(csv);
    free(table);
    lipi_inflation_free(rep);
}

/* ------------------------------------------------------------------------ */
/* config.json                                                               */
/* ------------------------------------------------------------------------ */

/* Loads a fixture and checks every shape field against `want` (name aside). */
static void assert_loads_as(const char *file, const lipi_cost_model *want)
{
    lipi_cost_model m;
    lipi_error err = {0};
    lipi_status st = lipi_cost_model_load(file, &m, &err);
    if (st != LIPI_OK)
        print_error("%s: %s\n", file, err.msg);
    assert_int_equal(st, LIPI_OK);
    assert_string_equal(m.name, file);
    const uint64_t got[] = {m.layers, m.hidden, m.intermediate, m.heads,
                            m.kv_heads, m.head_dim, m.dtype_bytes, m.gated};
    const uint64_t exp[] = {want->layers, want->hidden, want->intermediate, want->heads,
                            want->kv_heads, want->head_dim, want->dtype_bytes, want->gated};
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++) {
        if (got[i] != exp[i])
            print_error("%s: field %zu is %llu, expected %llu\n", file, i,
                        (unsigned long long)got[i], (unsigned long long)exp[i]);
        assert_true(got[i] == exp[i]);
    }
}

static void test_config_bert_is_mha_fp32_plain_like_the_builtin(void **state)
{
    /* no num_key_value_heads, head_dim or torch_dtype; gelu */
    lipi_cost_model b;
    lipi_error err = {0};
    assert_int_equal(lipi_cost_model_builtin("bert-base", &b, &err), LIPI_OK);
    assert_loads_as(FIXTURES "/bert.json",
                    &(lipi_cost_model){"", 12, 768, 3072, 12, 12, 64, 4, false});
    assert_loads_as(FIXTURES "/bert.json", &b);
}

static void test_config_xlmr_large_is_mha_fp32_plain(void **state)
{
    assert_loads_as(FIXTURES "/xlmr.json",
                    &(lipi_cost_model){"", 24, 1024, 4096, 16, 16, 64, 4, false});
}

static void test_config_llama_is_gqa_bf16_gated(void **state)
{
    /* head_dim null: 4096 / 32 */
    lipi_cost_model m = {"", 32, 4096, 14336, 32, 8, 128, 2, true};
    assert_loads_as(FIXTURES "/llama.json", &m);
    /* the same KV cache as decoder-7b-gqa: 0.54 GB for 4,096 tokens */
    assert_close(lipi_cost_kv_cache_bytes(&m, 4096), 536870912.0);
}

static void test_config_errors_name_the_field_and_the_file(void **state)
{
    lipi_cost_model m = {.layers = 0};
    lipi_error err = {0};
    assert_int_equal(lipi_cost_model_load(FIXTURES "/missing_layers.json", &m, &err),
                     LIPI_EFORMAT);
    assert_string_equal(err.path, FIXTURES "/missing_layers.json");
    assert_string_equal(err.msg, "expected num_hidden_layers, a positive integer, found none");
    assert_int_equal(m.layers, 0); /* untouched */

    assert_int_equal(lipi_cost_model_load(FIXTURES "/bad_dtype.json", &m, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "\"int8\""));

    assert_int_equal(lipi_cost_model_load(FIXTURES "/absent.json", &m, &err), LIPI_EIO);
    assert_string_equal(err.path, FIXTURES "/absent.json");

    assert_int_equal(lipi_cost_model_open("bert-bass", &m, &err), LIPI_EIO);
    assert_int_equal(lipi_cost_model_builtin("bert-bass", &m, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "decoder-7b-gqa"));
}

static lipi_status load_llama(void *ctx, lipi_error *err)
{
    lipi_cost_model m;
    return lipi_cost_model_load(ctx, &m, err);
}

static void test_config_reader_survives_every_allocation_failure(void **state)
{
    assert_true(alloc_fail_loop("llama config", load_llama, (void *)(FIXTURES "/llama.json")) > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cost_field_matches_hand_counts),
        cmocka_unit_test(test_gqa_shrinks_kv_and_projections_but_not_attention),
        cmocka_unit_test(test_gated_mlp_counts_three_matrices),
        cmocka_unit_test(test_bert_base_matches_its_closed_form),
        cmocka_unit_test(test_decoder_7b_kv_cache_is_half_a_gigabyte_and_four_times_that_without_gqa),
        cmocka_unit_test(test_gini_on_hand_checked_inputs),
        cmocka_unit_test(test_ratios_follow_parity_rules_without_reference_or_model),
        cmocka_unit_test(test_set_cost_rejects_bad_values),
        cmocka_unit_test(test_squares_are_exact_across_merged_shards),
        cmocka_unit_test(test_json_carries_every_cost_field),
        cmocka_unit_test(test_csv_and_table_show_cost_only_when_asked),
        cmocka_unit_test(test_config_bert_is_mha_fp32_plain_like_the_builtin),
        cmocka_unit_test(test_config_xlmr_large_is_mha_fp32_plain),
        cmocka_unit_test(test_config_llama_is_gqa_bf16_gated),
        cmocka_unit_test(test_config_errors_name_the_field_and_the_file),
        cmocka_unit_test(test_config_reader_survives_every_allocation_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Inference cost of a report's token counts: the model shapes (built in, or
 * read from a Hugging Face config.json), the FLOP and KV-cache formulas of
 * report/report.h, and the per-cell and per-tokenizer figures made from the
 * exact sums Σn and Σn² the report keeps. The formulas are linear in n and
 * n², so a sum over lines is the formula applied to the sums: no per-line
 * floating point, and the same result on any thread split. */
#include "report/inflation_impl.h"
#include "tokenizer/base_json.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

static const lipi_cost_model BUILTIN[] = {
    {"bert-base", 12, 768, 3072, 12, 12, 64, 4, false},
    {"decoder-7b-gqa", 32, 4096, 11008, 32, 8, 128, 2, true},
};
#define N_BUILTIN (sizeof BUILTIN / sizeof BUILTIN[0])

lipi_status lipi_cost_model_builtin(const char *name, lipi_cost_model *m, lipi_error *err)
{
    for (size_t i = 0; name && i < N_BUILTIN; i++)
        if (strcmp(name, BUILTIN[i].name) == 0) {
            *m = BUILTIN[i];
            return LIPI_OK;
        }
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "expected a cost model bert-base, decoder-7b-gqa or a config.json, "
                          "found \"%s\"",
                          name ? name : "");
}

/* Reads the positive integer `key` of root into *out. Absent (or null) is
 * an error when `required`, else leaves *out and sets *found = false. */
static lipi_status get_count(const json_t *root, const char *key, bool required, uint64_t *out,
                             bool *found, const char *path, lipi_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (found)
        *found = false;
    if (!v || json_is_null(v)) {
        if (!required)
            return LIPI_OK;
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "expected %s, a positive integer, found none", key);
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "expected %s, a positive integer, found %s", key,
                              json_is_integer(v) ? "a number below 1" : lipi_json_kind(v));
    *out = (uint64_t)json_integer_value(v);
    if (found)
        *found = true;
    return LIPI_OK;
}

/* The string `key` of root, NULL when absent or null; *bad when present as
 * something else. */
static const char *get_string(const json_t *root, const char *key, bool *bad)
{
    const json_t *v = json_object_get(root, key);
    *bad = v && !json_is_null(v) && !json_is_string(v);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

lipi_status lipi_cost_model_load(const char *path, lipi_cost_model *m, lipi_error *err)
{
    /* Architectures whose MLP has a gate projection beside the up one. */
    static const char *const gated_types[] = {"llama", "mistral", "qwen2", "qwen3",
                                              "gemma", "gemma2", "gemma3_text"};
    lipi_status st = LIPI_OK;
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    json_error_t je;
    lipi_cost_model c = {0};
    bool found = false, bad = false;
    if (!path || !m)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a path and a model");
    TRY(lipi_read_file(path, 1u << 24, &text, &len, err));
    root = lipi_json_loadb(text, len, 0, &je);
    if (!root) {
        st = json_error_code(&je) == json_error_out_of_memory
                 ? lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory")
                 : lipi_error_set(err, LIPI_EFORMAT, path, (size_t)je.line, (size_t)je.position,
                                  "expected JSON, found an error: %s", je.text);
        goto done;
    }
    if (!json_is_object(root)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "expected an object, found %s",
                            lipi_json_kind(root));
        goto done;
    }
    TRY(get_count(root, "num_hidden_layers", true, &c.layers, NULL, path, err));
    TRY(get_count(root, "hidden_size", true, &c.hidden, NULL, path, err));
    TRY(get_count(root, "intermediate_size", true, &c.intermediate, NULL, path, err));
    TRY(get_count(root, "num_attention_heads", true, &c.heads, NULL, path, err));
    c.kv_heads = c.heads;
    TRY(get_count(root, "num_key_value_heads", false, &c.kv_heads, NULL, path, err));
    TRY(get_count(root, "head_dim", false, &c.head_dim, &found, path, err));
    if (!found) {
        if (c.hidden % c.heads) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "expected hidden_size (%llu) divisible by num_attention_heads "
                                "(%llu) or a head_dim, found neither",
                                (unsigned long long)c.hidden, (unsigned long long)c.heads);
            goto done;
        }
        c.head_dim = c.hidden / c.heads;
    }
    /* Each figure must stay far inside a double's exact integers. */
    if (c.layers > 1u << 20 || c.hidden > 1u << 24 || c.intermediate > 1u << 26 ||
        c.heads > 1u << 20 || c.kv_heads > 1u << 20 || c.head_dim > 1u << 20) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected a model below 2^20 layers, heads and head size, 2^24 "
                            "hidden and 2^26 intermediate, found a larger one");
        goto done;
    }
    const char *dtype = get_string(root, "torch_dtype", &bad);
    if (!dtype && !bad)
        dtype = get_string(root, "dtype", &bad);
    c.dtype_bytes = 4;
    if (dtype && (strcmp(dtype, "float16") == 0 || strcmp(dtype, "bfloat16") == 0))
        c.dtype_bytes = 2;
    else if (bad || (dtype && strcmp(dtype, "float32") != 0)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected torch_dtype float32, float16 or bfloat16, found %s%s%s",
                            dtype ? "\"" : "a value that is not a string", dtype ? dtype : "",
                            dtype ? "\"" : "");
        goto done;
    }
    const char *type = get_string(root, "model_type", &bad);
    const char *act = get_string(root, "hidden_act", &bad);
    for (size_t i = 0; type && i < sizeof gated_types / sizeof gated_types[0]; i++)
        c.gated = c.gated || strcmp(type, gated_types[i]) == 0;
    c.gated = c.gated || (act && (strcmp(act, "silu") == 0 || strcmp(act, "swiglu") == 0));
    snprintf(c.name, sizeof c.name, "%s", path);
    *m = c;
done:
    json_decref(root);
    lipi_free(text);
    return st;
}

lipi_status lipi_cost_model_open(const char *name_or_path, lipi_cost_model *m, lipi_error *err)
{
    for (size_t i = 0; name_or_path && i < N_BUILTIN; i++)
        if (strcmp(name_or_path, BUILTIN[i].name) == 0)
            return lipi_cost_model_builtin(name_or_path, m, err);
    return lipi_cost_model_load(name_or_path, m, err);
}

/* ------------------------------------------------------------------------ */
/* Formulas                                                                  */
/* ------------------------------------------------------------------------ */

/* FLOPs of lines whose token counts sum to s1 and whose squares sum to s2:
 * L·((4d² + 4d·n_kv·d_head + 2m·d·d_ff)·Σn + 4d·Σn²). */
static long double flops_of_sums(const lipi_cost_model *m, long double s1, long double s2)
{
    long double L = (long double)m->layers, d = (long double)m->hidden;
    long double kv = (long double)m->kv_heads * (long double)m->head_dim;
    long double mlp = m->gated ? 3.0L : 2.0L;
    return L * ((4 * d * d + 4 * d * kv + 2 * mlp * d * (long double)m->intermediate) * s1 +
                4 * d * s2);
}

static long double kv_of_sum(const lipi_cost_model *m, long double s1)
{
    return 2.0L * (long double)m->layers * (long double)m->kv_heads * (long double)m->head_dim *
           (long double)m->dtype_bytes * s1;
}

double lipi_cost_forward_flops(const lipi_cost_model *m, double n)
{
    return (double)flops_of_sums(m, n, (long double)n * n);
}

double lipi_cost_kv_cache_bytes(const lipi_cost_model *m, double n)
{
    return (double)kv_of_sum(m, n);
}

double lipi_cost_gini(const double *x, size_t n)
{
    long double diffs = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        for (size_t j = 0; j < n; j++)
            diffs += fabsl((long double)x[i] - x[j]);
    }
    if (n == 0 || sum == 0)
        return NAN;
    /* mean = sum / n, so 2·n²·mean = 2·n·sum */
    return (double)(diffs / (2.0L * (long double)n * sum));
}

/* ------------------------------------------------------------------------ */
/* The report's figures                                                      */
/* ------------------------------------------------------------------------ */

lipi_status lipi_inflation_set_cost(lipi_inflation_report *rep, const lipi_cost_model *m,
                                    uint64_t context, double price_per_million, lipi_error *err)
{
    if (!rep || !m)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a report and a model");
    if (!m->layers || !m->hidden || !m->intermediate || !m->heads || !m->kv_heads ||
        !m->head_dim || !m->dtype_bytes)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a model with every size above 0, found a 0");
    if (context == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a context above 0 tokens, found 0");
    if (!isnan(price_per_million) && !(price_per_million >= 0 && isfinite(price_per_million)))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a price per million tokens >= 0, found %g",
                              price_per_million);
    rep->cost_model = *m;
    rep->context = context;
    rep->price_per_million = price_per_million;
    rep->has_cost = true;
    return LIPI_OK;
}

const lipi_cost_model *lipi_inflation_cost_model(const lipi_inflation_report *rep)
{
    return rep->has_cost ? &rep->cost_model : NULL;
}

static double ratio_ld(long double a, long double b)
{
    return b != 0 ? (double)(a / b) : NAN;
}

void lipi_inflation_get_cost(const lipi_inflation_report *rep, size_t tok, size_t lang,
                             lipi_inflation_cost *cost)
{
    LIPI_ASSERT(tok < rep->n_tok && lang < rep->n_lang);
    const lipi_inflation_counts *c = &rep->cells[lang * rep->n_tok + tok];
    const lipi_inflation_counts *r = NULL;
    if (rep->reference < rep->n_lang && rep->cells[rep->reference * rep->n_tok + tok].lines ==
                                            c->lines)
        r = &rep->cells[rep->reference * rep->n_tok + tok];
    const lipi_cost_model *m = &rep->cost_model;
    long double lines = (long double)c->lines;
    *cost = (lipi_inflation_cost){
        .tokens_squared = c->tokens_sq,
        .attention_ratio = r ? ratio_ld(c->tokens_sq, r->tokens_sq) : NAN,
        .forward_flops_per_line = NAN,
        .forward_flops_ratio = NAN,
        .kv_cache_bytes_per_line = NAN,
        .context_lines = NAN,
        .price_per_1k_lines = NAN,
    };
    if (!rep->has_cost)
        return;
    long double flops = flops_of_sums(m, c->tokens, c->tokens_sq);
    if (c->lines) {
        cost->forward_flops_per_line = (double)(flops / lines);
        cost->kv_cache_bytes_per_line = (double)(kv_of_sum(m, c->tokens) / lines);
        if (!isnan(rep->price_per_million))
            cost->price_per_1k_lines =
                (double)(1000.0L * c->tokens / lines * rep->price_per_million / 1e6L);
    }
    /* context / (tokens / lines) */
    cost->context_lines = ratio_ld((long double)rep->context * lines, c->tokens);
    if (r)
        cost->forward_flops_ratio = ratio_ld(flops, flops_of_sums(m, r->tokens, r->tokens_sq));
}

/* Tokens per line of a row, NaN without lines. */
static double per_line(const lipi_inflation_report *rep, size_t tok, size_t lang)
{
    const lipi_inflation_counts *c = &rep->cells[lang * rep->n_tok + tok];
    return c->lines ? (double)c->tokens / (double)c->lines : NAN;
}

/* Whether row a's value va goes before row b's as an extreme (`sign` 1 for
 * the most, -1 for the least): ties go to the first name, whatever the row
 * order. */
static bool beats(const lipi_inflation_report *rep, size_t a, double va, size_t b, double vb,
                  int sign)
{
    if (b == rep->n_lang)
        return true;
    if (va != vb)
        return sign > 0 ? va > vb : va < vb;
    return strcmp(rep->lang_names[a], rep->lang_names[b]) < 0;
}

void lipi_inflation_get_tokenizer_cost(const lipi_inflation_report *rep, size_t tok,
                                       lipi_inflation_tokenizer_cost *cost)
{
    LIPI_ASSERT(tok < rep->n_tok);
    *cost = (lipi_inflation_tokenizer_cost){NAN, NAN, NULL, NULL};
    size_t n = 0, hi = rep->n_lang, lo = rep->n_lang;
    long double diffs = 0, sum = 0;
    for (size_t a = 0; a < rep->n_lang; a++) {
        double va = per_line(rep, tok, a);
        if (isnan(va))
            continue;
        n++;
        sum += va;
        for (size_t b = 0; b < rep->n_lang; b++)
            if (!isnan(per_line(rep, tok, b)))
                diffs += fabsl((long double)va - per_line(rep, tok, b));
        if (beats(rep, a, va, hi, hi < rep->n_lang ? per_line(rep, tok, hi) : 0, 1))
            hi = a;
        if (beats(rep, a, va, lo, lo < rep->n_lang ? per_line(rep, tok, lo) : 0, -1))
            lo = a;
    }
    if (n == 0)
        return;
    /* the same sum as lipi_cost_gini, without a copy of the values */
    cost->gini = sum != 0 ? (double)(diffs / (2.0L * (long double)n * sum)) : NAN;
    double vmin = per_line(rep, tok, lo);
    cost->premium = vmin > 0 ? per_line(rep, tok, hi) / vmin : NAN;
    cost->premium_max_language = rep->lang_names[hi];
    cost->premium_min_language = rep->lang_names[lo];
}

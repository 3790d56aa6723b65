/* config.json of Hugging Face encoders and the sentence-transformers module
 * files. Field names and defaults follow transformers' BertConfig,
 * RobertaConfig, XLMRobertaConfig, AlbertConfig and DistilBertConfig: the
 * sizes that decide the weights' shapes must be present, the rest take the
 * library's defaults. */
#include "model/model_impl.h"
#include "tokenizer/base_json.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* No sane encoder has a dimension this large; the bound keeps every size
 * product below overflow. */
#define MAX_DIM ((size_t)1 << 24)

lipi_status lipi_json_load(const char *text, size_t len, size_t flags, const char *path,
                           size_t base, json_t **out, lipi_error *err)
{
    json_error_t e;
    memset(&e, 0, sizeof e);
    *out = lipi_json_loadb(text, len, flags, &e);
    if (!*out && json_error_code(&e) == json_error_out_of_memory)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    if (*out)
        return LIPI_OK;
    return lipi_error_set(err, LIPI_EFORMAT, path, 0, base + (size_t)e.position,
                          "not valid JSON: %s", e.text);
}

static lipi_status json_parse(const char *text, size_t len, const char *path, json_t **out,
                              lipi_error *err)
{
    lipi_status st = lipi_json_load(text, len, 0, path, 0, out, err);
    if (st != LIPI_OK || json_is_object(*out))
        return st;
    json_decref(*out);
    *out = NULL;
    return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "expected a JSON object");
}

/* A size field: required (no default) or defaulted when absent. */
static lipi_status get_size(json_t *o, const char *key, bool required, size_t dflt, size_t *out,
                            const char *path, lipi_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "missing field \"%s\": expected a positive integer", key);
        *out = dflt;
        return LIPI_OK;
    }
    if (!json_is_integer(v))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": expected a positive integer, found %s", key,
                              lipi_json_kind(v));
    json_int_t i = json_integer_value(v);
    if (i <= 0 || (unsigned long long)i > MAX_DIM)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": expected an integer in 1..%zu, found %lld", key,
                              MAX_DIM, (long long)i);
    *out = (size_t)i;
    return LIPI_OK;
}

/* The sizes every BERT-style config names (BertConfig's keys), all required. */
static lipi_status get_bert_sizes(json_t *o, lipi_config *c, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    TRY(get_size(o, "vocab_size", true, 0, &c->vocab, path, err));
    TRY(get_size(o, "hidden_size", true, 0, &c->hidden, path, err));
    TRY(get_size(o, "num_hidden_layers", true, 0, &c->layers, path, err));
    TRY(get_size(o, "num_attention_heads", true, 0, &c->heads, path, err));
    TRY(get_size(o, "intermediate_size", true, 0, &c->inter, path, err));
done:
    return st;
}

static lipi_status get_float(json_t *o, const char *key, double dflt, float *out,
                             const char *path, lipi_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        *out = (float)dflt;
        return LIPI_OK;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 1)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": expected a number in (0, 1], found %s", key,
                              json_is_number(v) ? "a value outside" : lipi_json_kind(v));
    *out = (float)json_number_value(v);
    return LIPI_OK;
}

static lipi_status get_act(json_t *o, const char *key, const char *dflt, lipi_act *out,
                           const char *path, lipi_error *err)
{
    json_t *v = json_object_get(o, key);
    const char *s = dflt;
    if (v) {
        if (!json_is_string(v))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"%s\": expected a string, found %s", key,
                                  lipi_json_kind(v));
        s = json_string_value(v);
    }
    if (!strcmp(s, "gelu"))
        *out = LIPI_ACT_GELU;
    else if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh") ||
             !strcmp(s, "gelu_fast"))
        *out = LIPI_ACT_GELU_TANH;
    else if (!strcmp(s, "relu"))
        *out = LIPI_ACT_RELU;
    else
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": unsupported activation \"%.40s\", expected gelu, "
                              "gelu_new, gelu_pytorch_tanh, gelu_fast or relu",
                              key, s);
    return LIPI_OK;
}

static lipi_status get_bool(json_t *o, const char *key, bool dflt, bool *out,
                            const char *path, lipi_error *err)
{
    json_t *v = json_object_get(o, key);
    if (v && !json_is_boolean(v))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": expected true or false, found %s", key,
                              lipi_json_kind(v));
    *out = v ? json_is_true(v) : dflt;
    return LIPI_OK;
}

/* A RoPE base: a positive number. */
static lipi_status get_theta(json_t *o, const char *key, double dflt, double *out,
                             const char *path, lipi_error *err)
{
    json_t *v = json_object_get(o, key);
    if (v && !(json_is_number(v) && json_number_value(v) > 1 &&
               json_number_value(v) < 1e30))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": expected a number above 1, found %s", key,
                              json_is_number(v) ? "a value outside" : lipi_json_kind(v));
    *out = v ? json_number_value(v) : dflt;
    return LIPI_OK;
}

/* ModernBertConfig: rope_parameters {full_attention, sliding_attention}
 * with rope_theta (newer configs) wins over global_rope_theta /
 * local_rope_theta (defaults 160000 and 10000); only rope_type "default".
 * ModernBertAttention makes layer i local when i % global_attn_every_n_layers
 * != 0, the rotary table follows layer_types (the same pattern when absent). */
static lipi_status parse_modernbert(json_t *root, lipi_config *c, const char *path,
                                    lipi_error *err)
{
    lipi_status st = LIPI_OK;
    static const char *const KINDS[2] = {"full_attention", "sliding_attention"};
    static const char *const LEGACY[2] = {"global_rope_theta", "local_rope_theta"};
    static const double DFLT[2] = {160000.0, 10000.0};
    json_t *rp = json_object_get(root, "rope_parameters");
    if (rp && !json_is_null(rp) && !json_is_object(rp))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"rope_parameters\": expected an object, found %s",
                              lipi_json_kind(rp));
    for (size_t k = 0; k < 2; k++) {
        TRY(get_theta(root, LEGACY[k], DFLT[k], &c->rope_theta[k], path, err));
        json_t *one = json_is_object(rp) ? json_object_get(rp, KINDS[k]) : NULL;
        if (!one || json_is_null(one))
            continue;
        json_t *type = json_object_get(one, "rope_type");
        if (!json_is_object(one) ||
            (type && !(json_is_string(type) && !strcmp(json_string_value(type), "default"))))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"rope_parameters\".\"%s\": expected an object with "
                                  "rope_type \"default\" (scaled RoPE is not supported)",
                                  KINDS[k]);
        TRY(get_theta(one, "rope_theta", c->rope_theta[k], &c->rope_theta[k], path, err));
    }
    size_t every = 0, local = 0;
    TRY(get_size(root, "global_attn_every_n_layers", false, 3, &every, path, err));
    TRY(get_size(root, "local_attention", false, 128, &local, path, err));
    c->window = local / 2;
    json_t *types = json_object_get(root, "layer_types");
    if (types && !json_is_null(types) &&
        !(json_is_array(types) && json_array_size(types) == c->layers))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"layer_types\": expected an array of %zu strings "
                              "(num_hidden_layers)",
                              c->layers);
    c->layer_kind = lipi_calloc(c->layers, 1);
    if (!c->layer_kind)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    for (size_t i = 0; i < c->layers; i++) {
        bool local_rope = i % every != 0;
        if (json_is_array(types)) {
            json_t *v = json_array_get(types, i);
            const char *s = json_is_string(v) ? json_string_value(v) : "";
            if (strcmp(s, KINDS[0]) && strcmp(s, KINDS[1]))
                return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                      "field \"layer_types\"[%zu]: expected "
                                      "\"full_attention\" or \"sliding_attention\"",
                                      i);
            local_rope = !strcmp(s, KINDS[1]);
        }
        c->layer_kind[i] = (uint8_t)((i % every ? LIPI_LAYER_LOCAL_WINDOW : 0) |
                                     (local_rope ? LIPI_LAYER_LOCAL_ROPE : 0));
    }
    TRY(get_bool(root, "norm_bias", false, &c->norm_bias, path, err));
    TRY(get_bool(root, "attention_bias", false, &c->attn_bias, path, err));
    TRY(get_bool(root, "mlp_bias", false, &c->mlp_bias, path, err));
    c->mlp_out_bias = c->mlp_bias;
done:
    return st;
}

/* Whether `key` is absent, null or false (an option lipi does not run). */
static bool unset(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return !v || json_is_null(v) || json_is_false(v);
}

/* NomicBertConfig (GPT-2 key names) as modeling_hf_nomic_bert.py reads it:
 * rotary positions over whole heads (rotary_emb_fraction 1, not
 * interleaved), post-norm blocks, a gated MLP (swiglu: fc11(x) *
 * silu(fc12(x)); geglu with gelu) whose width is n_inner rounded up to a
 * multiple of 256, vocab_size rounded up to pad_vocab_size_multiple. */
static lipi_status parse_nomic(json_t *root, lipi_config *c, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t mult = 1, inner = 0;
    if (c->classifier)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "nomic_bert classifier heads are not supported (expected "
                              "NomicBertModel)");
    TRY(get_size(root, "vocab_size", true, 0, &c->vocab, path, err));
    TRY(get_size(root, "pad_vocab_size_multiple", false, 1, &mult, path, err));
    c->vocab = (c->vocab + mult - 1) / mult * mult;
    TRY(get_size(root, "n_embd", true, 0, &c->hidden, path, err));
    TRY(get_size(root, "n_layer", true, 0, &c->layers, path, err));
    TRY(get_size(root, "n_head", true, 0, &c->heads, path, err));
    TRY(get_size(root, "n_inner", false, c->hidden * 8 / 3, &inner, path, err));
    c->inter = (inner + 255) / 256 * 256;
    TRY(get_size(root, "n_positions", false, 1024, &c->max_pos, path, err));
    TRY(get_size(root, "type_vocab_size", false, 2, &c->type_vocab, path, err));
    TRY(get_float(root, "layer_norm_epsilon", 1e-5, &c->ln_eps, path, err));
    TRY(get_theta(root, "rotary_emb_base", 10000.0, &c->rope_theta[0], path, err));
    c->rope_theta[1] = c->rope_theta[0];
    TRY(get_bool(root, "qkv_proj_bias", true, &c->attn_bias, path, err));
    TRY(get_bool(root, "mlp_fc1_bias", true, &c->mlp_bias, path, err));
    TRY(get_bool(root, "mlp_fc2_bias", true, &c->mlp_out_bias, path, err));
    json_t *af = json_object_get(root, "activation_function");
    const char *a = json_is_string(af) ? json_string_value(af) : "";
    if (!strcmp(a, "swiglu"))
        c->act = LIPI_ACT_SILU;
    else if (!strcmp(a, "geglu"))
        c->act = LIPI_ACT_GELU;
    else
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"activation_function\": expected \"swiglu\" or "
                              "\"geglu\" (nomic_bert's gated MLP)");
    json_t *frac = json_object_get(root, "rotary_emb_fraction");
    static const char *const UNSUPPORTED[] = {"rotary_emb_interleaved", "rotary_emb_scale_base",
                                              "prenorm", "causal"};
    if (!json_is_number(frac) || json_number_value(frac) != 1.0)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"rotary_emb_fraction\": expected 1 (rotary positions "
                              "over whole heads)");
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++)
        if (!unset(root, UNSUPPORTED[i]))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"%s\": expected false or null (not supported)",
                                  UNSUPPORTED[i]);
    /* NomicBertDynamicNTKRotaryEmbedding changes the base only past
     * max_trained_positions, by the padded batch's length: lipi stops
     * there, where it is the plain table. */
    if (!unset(root, "rotary_scaling_factor")) {
        size_t trained = 0;
        TRY(get_size(root, "max_trained_positions", false, 2048, &trained, path, err));
        c->max_pos = trained < c->max_pos ? trained : c->max_pos;
    }
    c->pos_kind = LIPI_POS_ROPE;
    c->glu = true;
done:
    return st;
}

/* NewConfig (configuration.py of Alibaba-NLP/new-impl, which the config's
 * auto_map names) as that repository's modeling.py (NewModel) uses it:
 * word (+ token type when type_vocab_size > 0) embeddings and LayerNorm,
 * rotary positions (position_embedding_type "rope") with rope_theta and
 * rope_scaling {"type": "ntk", "factor": f} (NTKScalingRotaryEmbedding
 * without mixed_b), one packed qkv_proj, post-norm blocks (attn_ln,
 * mlp_ln) and NewGatedMLP: act(gate) * up. The other options modeling.py
 * has are refused by name. */
static lipi_status parse_gte(json_t *root, lipi_config *c, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    bool pack = true, logn = false;
    if (c->classifier)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "new (GTE) classifier heads are not supported (expected "
                              "NewModel)");
    TRY(get_bert_sizes(root, c, path, err));
    TRY(get_size(root, "max_position_embeddings", false, 2048, &c->max_pos, path, err));
    /* type_vocab_size 0: NewEmbeddings has no token type table. */
    json_t *tv = json_object_get(root, "type_vocab_size");
    if (json_is_integer(tv) && json_integer_value(tv) == 0)
        c->type_vocab = 0;
    else
        TRY(get_size(root, "type_vocab_size", false, 1, &c->type_vocab, path, err));
    TRY(get_float(root, "layer_norm_eps", 1e-12, &c->ln_eps, path, err));
    json_t *act = json_object_get(root, "hidden_act");
    const char *as = json_is_string(act) ? json_string_value(act) : "";
    if (!strcmp(as, "silu") || !strcmp(as, "swish"))
        c->act = LIPI_ACT_SILU;
    else
        TRY(get_act(root, "hidden_act", "gelu", &c->act, path, err));
    TRY(get_theta(root, "rope_theta", 10000.0, &c->rope_theta[0], path, err));
    c->rope_theta[1] = c->rope_theta[0];
    static const char *const FIXED[][2] = {{"position_embedding_type", "rope"},
                                           {"layer_norm_type", "layer_norm"}};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(root, FIXED[i][0]);
        if (v && !json_is_null(v) &&
            !(json_is_string(v) && !strcmp(json_string_value(v), FIXED[i][1])))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"%s\": expected \"%s\" (the only kind lipi runs "
                                  "for model_type new)",
                                  FIXED[i][0], FIXED[i][1]);
    }
    TRY(get_bool(root, "pack_qkv", true, &pack, path, err));
    TRY(get_bool(root, "logn_attention_scale", false, &logn, path, err));
    if (!pack || logn)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": expected %s (not supported)",
                              pack ? "logn_attention_scale" : "pack_qkv",
                              pack ? "false" : "true");
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        json_t *type = json_is_object(rs) ? json_object_get(rs, "type") : NULL;
        json_t *f = json_is_object(rs) ? json_object_get(rs, "factor") : NULL;
        const char *ts = json_is_string(type) ? json_string_value(type) : NULL;
        if (!ts || strcmp(ts, "ntk"))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"rope_scaling\": expected null or {\"type\": \"ntk\", "
                                  "\"factor\": F} (NewModel's NTK scaling), found type %s%.40s%s",
                                  ts ? "\"" : "",
                                  ts ? ts : type ? lipi_json_kind(type) : "none",
                                  ts ? "\"" : "");
        if (!json_is_number(f) || !(json_number_value(f) >= 1) || json_number_value(f) > 1e6)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"rope_scaling\".\"factor\": expected a number in "
                                  "1..1e6, found %s",
                                  json_is_number(f) ? "a value outside"
                                  : f               ? lipi_json_kind(f)
                                                    : "none");
        if (!unset(rs, "mixed_b"))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"rope_scaling\".\"mixed_b\": expected null (mixed NTK "
                                  "scaling is not supported)");
        c->rope_ntk = json_number_value(f);
    }
    c->pos_kind = LIPI_POS_ROPE;
    c->glu = true;
done:
    return st;
}

static const struct {
    const char *type;  /* model_type */
    const char *arch;  /* architectures[] prefix */
    lipi_arch id;
} ARCHS[] = {
    {"bert", "Bert", LIPI_ARCH_BERT},
    {"roberta", "Roberta", LIPI_ARCH_ROBERTA},
    {"xlm-roberta", "XLMRoberta", LIPI_ARCH_ROBERTA},
    {"camembert", "Camembert", LIPI_ARCH_ROBERTA},
    {"albert", "Albert", LIPI_ARCH_ALBERT},
    {"distilbert", "DistilBert", LIPI_ARCH_DISTILBERT},
    {"mpnet", "MPNet", LIPI_ARCH_MPNET},
    {"modernbert", "ModernBert", LIPI_ARCH_MODERNBERT},
    {"nomic_bert", "NomicBert", LIPI_ARCH_NOMIC},
    {"new", "New", LIPI_ARCH_GTE},
};
#define SUPPORTED                                                                          \
    "bert, roberta, xlm-roberta, camembert, albert, distilbert, mpnet, modernbert, nomic_bert, " \
    "new (GTE)"

static lipi_status parse_labels(json_t *root, lipi_config *c, const char *path,
                                lipi_error *err)
{
    json_t *id2label = json_object_get(root, "id2label");
    size_t n = 0;
    if (id2label && !json_is_object(id2label))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"id2label\": expected an object, found %s",
                              lipi_json_kind(id2label));
    if (id2label)
        n = json_object_size(id2label);
    if (!n) {
        lipi_status st = get_size(root, "num_labels", false, 2, &n, path, err);
        if (st != LIPI_OK)
            return st;
    }
    if (n > 100000)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"id2label\": expected at most 100000 labels");
    c->labels = lipi_calloc(n, sizeof *c->labels);
    if (!c->labels)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    c->num_labels = n;
    for (size_t i = 0; i < n; i++) {
        char key[32], dflt[32];
        snprintf(key, sizeof key, "%zu", i);
        snprintf(dflt, sizeof dflt, "LABEL_%zu", i);
        json_t *v = id2label ? json_object_get(id2label, key) : NULL;
        if (id2label && !json_is_string(v))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"id2label\": expected a string for key \"%s\"", key);
        const char *s = v ? json_string_value(v) : dflt;
        c->labels[i] = lipi_strndup(s, strlen(s));
        if (!c->labels[i])
            return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    }
    json_t *pt = json_object_get(root, "problem_type");
    c->multi_label = json_is_string(pt) &&
                     !strcmp(json_string_value(pt), "multi_label_classification");
    return LIPI_OK;
}

static lipi_status parse_root(json_t *root, lipi_config *c, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *mt = json_object_get(root, "model_type");
    json_t *archs = json_object_get(root, "architectures");
    if (mt && !json_is_string(mt))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"model_type\": expected a string, found %s", lipi_json_kind(mt));
    if (archs && !json_is_array(archs))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"architectures\": expected an array, found %s",
                              lipi_json_kind(archs));
    const char *arch0 = NULL;
    if (archs && json_array_size(archs) > 0) {
        if (!json_is_string(json_array_get(archs, 0)))
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"architectures\": expected strings");
        arch0 = json_string_value(json_array_get(archs, 0));
    }
    int found = -1;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0] && found < 0; i++) {
        if (mt && !strcmp(json_string_value(mt), ARCHS[i].type))
            found = (int)i;
    }
    /* Without model_type, the class name decides; the longest prefix wins so
     * "XLMRobertaModel" is not taken for a Roberta. */
    size_t best = 0;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0] && !mt && arch0; i++) {
        size_t k = strlen(ARCHS[i].arch);
        if (!strncmp(arch0, ARCHS[i].arch, k) && k > best) {
            best = k;
            found = (int)i;
        }
    }
    if (found < 0) {
        if (!mt && !arch0)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "missing field \"model_type\" (and no \"architectures\"): "
                                  "expected one of " SUPPORTED);
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "unsupported architecture \"%.60s\": supported are " SUPPORTED,
                              mt ? json_string_value(mt) : arch0);
    }
    c->arch = ARCHS[found].id;
    snprintf(c->model_type, sizeof c->model_type, "%s", ARCHS[found].type);
    c->classifier = arch0 && strstr(arch0, "ForSequenceClassification") != NULL;

    if (c->arch == LIPI_ARCH_DISTILBERT) {
        TRY(get_size(root, "vocab_size", true, 0, &c->vocab, path, err));
        TRY(get_size(root, "dim", true, 0, &c->hidden, path, err));
        TRY(get_size(root, "n_layers", true, 0, &c->layers, path, err));
        TRY(get_size(root, "n_heads", true, 0, &c->heads, path, err));
        TRY(get_size(root, "hidden_dim", true, 0, &c->inter, path, err));
        TRY(get_size(root, "max_position_embeddings", true, 0, &c->max_pos, path, err));
        TRY(get_act(root, "activation", "gelu", &c->act, path, err));
        c->type_vocab = 0;
        c->ln_eps = 1e-12f; /* hard-coded in modeling_distilbert */
    } else if (c->arch == LIPI_ARCH_NOMIC) {
        TRY(parse_nomic(root, c, path, err));
    } else if (c->arch == LIPI_ARCH_GTE) {
        TRY(parse_gte(root, c, path, err));
    } else if (c->arch == LIPI_ARCH_MODERNBERT) {
        /* ModernBertModel: no position or token type table (RoPE), GeGLU,
         * pre-norm; ModernBertConfig's defaults. */
        if (c->classifier)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "architecture \"%.60s\": modernbert classifier heads are not "
                                  "supported (expected ModernBertModel or "
                                  "ModernBertForMaskedLM)",
                                  arch0);
        TRY(get_bert_sizes(root, c, path, err));
        TRY(get_size(root, "max_position_embeddings", false, 8192, &c->max_pos, path, err));
        TRY(get_float(root, "norm_eps", 1e-5, &c->ln_eps, path, err));
        TRY(get_act(root, "hidden_activation", "gelu", &c->act, path, err));
        c->type_vocab = 0;
        c->pos_kind = LIPI_POS_ROPE;
        c->glu = true;
        c->pre_norm = true;
    } else {
        TRY(get_bert_sizes(root, c, path, err));
        TRY(get_size(root, "max_position_embeddings", true, 0, &c->max_pos, path, err));
        /* MPNetEmbeddings has no token type table. */
        if (c->arch == LIPI_ARCH_MPNET)
            c->type_vocab = 0;
        else
            TRY(get_size(root, "type_vocab_size", false, 2, &c->type_vocab, path, err));
        TRY(get_float(root, "layer_norm_eps", c->arch == LIPI_ARCH_MPNET ? 1e-5 : 1e-12,
                      &c->ln_eps, path, err));
        TRY(get_act(root, "hidden_act", c->arch == LIPI_ARCH_ALBERT ? "gelu_new" : "gelu",
                    &c->act, path, err));
    }
    /* "absolute": a learned table in the checkpoint; "sinusoidal": the
     * fixed encoding of Vaswani et al., computed at load; "alibi": no
     * positions, a linear bias in attention (Jina v2). BERT only. */
    json_t *pet = c->arch == LIPI_ARCH_GTE ? NULL /* "rope": parse_gte read it */
                                           : json_object_get(root, "position_embedding_type");
    const char *pos_kind = json_is_string(pet) ? json_string_value(pet) : NULL;
    static const char *const POS_KINDS[] = {"absolute", "sinusoidal", "alibi"};
    size_t pk = 0;
    while (pos_kind && pk < 3 && strcmp(pos_kind, POS_KINDS[pk]))
        pk++;
    if (pet && (!pos_kind || pk == 3))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"position_embedding_type\": expected \"absolute\", "
                              "\"sinusoidal\" or \"alibi\", found %s%.40s%s",
                              pos_kind ? "\"" : "", pos_kind ? pos_kind : lipi_json_kind(pet),
                              pos_kind ? "\"" : "");
    if (c->pos_kind != LIPI_POS_ROPE)
        c->pos_kind = (lipi_pos_kind)pk;
    if (pk && c->arch != LIPI_ARCH_BERT)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"position_embedding_type\": \"%s\" is supported for "
                              "model_type bert only, found %s",
                              POS_KINDS[pk], ARCHS[found].type);
    /* jina-bert's JinaBertGLUMLP: reglu -> ReLU, geglu -> GELU (exact). */
    json_t *fft = json_object_get(root, "feed_forward_type");
    const char *ff = json_is_string(fft) ? json_string_value(fft) : NULL;
    if (fft && !(ff && (!strcmp(ff, "original") || !strcmp(ff, "geglu") ||
                        !strcmp(ff, "reglu"))))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"feed_forward_type\": expected \"original\", \"geglu\" "
                              "or \"reglu\", found %s%.40s%s",
                              ff ? "\"" : "", ff ? ff : lipi_json_kind(fft), ff ? "\"" : "");
    c->glu = c->glu || (ff && strcmp(ff, "original"));
    if (ff && strcmp(ff, "original") && c->arch != LIPI_ARCH_BERT)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"feed_forward_type\": \"%s\" is supported for "
                              "model_type bert only, found %s",
                              ff, ARCHS[found].type);
    if (c->glu && c->arch == LIPI_ARCH_BERT)
        c->act = !strcmp(ff, "geglu") ? LIPI_ACT_GELU : LIPI_ACT_RELU;
    c->embed = c->hidden;
    c->groups = c->layers;
    c->inner_groups = 1;
    if (c->arch == LIPI_ARCH_ALBERT) {
        TRY(get_size(root, "embedding_size", false, 128, &c->embed, path, err));
        TRY(get_size(root, "num_hidden_groups", false, 1, &c->groups, path, err));
        TRY(get_size(root, "inner_group_num", false, 1, &c->inner_groups, path, err));
        if (c->groups > c->layers || c->layers % c->groups)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"num_hidden_groups\": expected a divisor of "
                                  "num_hidden_layers (%zu), found %zu",
                                  c->layers, c->groups);
    }
    json_t *pad = json_object_get(root, "pad_token_id");
    size_t pad_default = c->arch == LIPI_ARCH_ROBERTA || c->arch == LIPI_ARCH_MPNET ? 1 : 0;
    if (c->arch == LIPI_ARCH_MODERNBERT) /* ModernBertConfig's default, if the vocabulary has it */
        pad_default = c->vocab > 50283 ? 50283 : 0;
    if (pad && !json_is_null(pad)) {
        if (!json_is_integer(pad) || json_integer_value(pad) < 0 ||
            (unsigned long long)json_integer_value(pad) >= c->vocab)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"pad_token_id\": expected an id below vocab_size %zu",
                                  c->vocab);
        c->pad_id = (uint32_t)json_integer_value(pad);
    } else {
        c->pad_id = (uint32_t)pad_default;
    }
    if (c->hidden % c->heads)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": %zu is not a multiple of the %zu heads",
                              c->arch == LIPI_ARCH_DISTILBERT ? "dim"
                              : c->arch == LIPI_ARCH_NOMIC    ? "n_embd"
                                                              : "hidden_size",
                              c->hidden, c->heads);
    if (c->arch == LIPI_ARCH_ROBERTA || c->arch == LIPI_ARCH_MPNET) {
        /* create_position_ids_from_input_ids: positions start after
         * padding_idx, which is pad_token_id for RoBERTa and the constant 1
         * in MPNetEmbeddings (whatever pad_token_id says). */
        c->pos_pad = c->arch == LIPI_ARCH_MPNET ? 1 : c->pad_id;
        c->pos_offset = (size_t)c->pos_pad + 1;
        if (c->pos_offset >= c->max_pos)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"max_position_embeddings\": %zu leaves no position "
                                  "after padding_idx %u",
                                  c->max_pos, c->pos_pad);
    }
    if (c->arch == LIPI_ARCH_MPNET) {
        /* MPNetEncoder's table has relative_attention_num_buckets rows, but
         * compute_position_bias always buckets into LIPI_MPNET_BUCKETS. */
        TRY(get_size(root, "relative_attention_num_buckets", false, LIPI_MPNET_BUCKETS,
                     &c->rel_buckets, path, err));
        if (c->rel_buckets < LIPI_MPNET_BUCKETS)
            return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                  "field \"relative_attention_num_buckets\": expected at "
                                  "least %d (MPNet buckets relative positions into %d), "
                                  "found %zu",
                                  LIPI_MPNET_BUCKETS, LIPI_MPNET_BUCKETS, c->rel_buckets);
    }
    if (c->arch == LIPI_ARCH_MODERNBERT)
        TRY(parse_modernbert(root, c, path, err));
    if (c->pos_kind == LIPI_POS_ROPE && (c->hidden / c->heads) % 2)
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "field \"%s\": heads of %zu values, expected an even head size "
                              "for rotary positions",
                              c->arch == LIPI_ARCH_NOMIC ? "n_head" : "num_attention_heads",
                              c->hidden / c->heads);
    if (c->classifier)
        TRY(parse_labels(root, c, path, err));
    c->pooling = LIPI_POOL_CLS;
    c->normalize = false;
done:
    return st;
}

lipi_status lipi_config_parse(const char *json, size_t len, const char *path, lipi_config *cfg,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *root = NULL;
    memset(cfg, 0, sizeof *cfg);
    TRY(json_parse(json, len, path, &root, err));
    TRY(parse_root(root, cfg, path, err));
done:
    json_decref(root);
    if (st != LIPI_OK)
        lipi_config_free(cfg);
    return st;
}

void lipi_config_free(lipi_config *cfg)
{
    lipi_free(cfg->layer_kind);
    cfg->layer_kind = NULL;
    for (size_t i = 0; i < cfg->n_dense; i++) {
        lipi_free(cfg->dense[i].w);
        lipi_free(cfg->dense[i].b);
        cfg->dense[i].w = cfg->dense[i].b = NULL;
    }
    cfg->n_dense = 0;
    for (size_t i = 0; cfg->labels && i < cfg->num_labels; i++)
        lipi_free(cfg->labels[i]);
    lipi_free(cfg->labels);
    cfg->labels = NULL;
    cfg->num_labels = 0;
}

/* ------------------------------------------------------------------------ */
/* sentence-transformers                                                     */
/* ------------------------------------------------------------------------ */

static lipi_status load_json_file(const char *dir, const char *rel, json_t **out,
                                  lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, rel) >= sizeof path) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
        goto done;
    }
    TRY(lipi_read_file(path, LIPI_JSON_MAX, &text, &len, err));
    TRY(json_parse(text, len, path, out, err));
done:
    lipi_free(text);
    return st;
}

static const char *POOL_KEYS[] = {
    "pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens"};

static lipi_status read_pooling(const char *dir, const char *rel, lipi_config *c,
                                lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *root = NULL;
    char sub[4096];
    if ((size_t)snprintf(sub, sizeof sub, "%s/config.json", rel) >= sizeof sub)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
    TRY(load_json_file(dir, sub, &root, err));
    unsigned flags = 0;
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(root, POOL_KEYS[i]);
        if (v && !json_is_boolean(v)) {
            st = lipi_error_set(err, LIPI_EFORMAT, sub, 0, 0,
                                "field \"%s\": expected a boolean, found %s", POOL_KEYS[i],
                                lipi_json_kind(v));
            goto done;
        }
        if (json_is_true(v))
            flags |= 1u << i;
    }
    static const char *unsupported[] = {"pooling_mode_weightedmean_tokens",
                                        "pooling_mode_lasttoken"};
    for (size_t i = 0; i < 2; i++) {
        if (json_is_true(json_object_get(root, unsupported[i]))) {
            st = lipi_error_set(err, LIPI_EFORMAT, sub, 0, 0,
                                "field \"%s\": unsupported pooling, expected cls, max, mean "
                                "or mean_sqrt_len",
                                unsupported[i]);
            goto done;
        }
    }
    if (!flags) {
        st = lipi_error_set(err, LIPI_EFORMAT, sub, 0, 0,
                            "expected one of pooling_mode_cls_token, pooling_mode_mean_tokens, "
                            "pooling_mode_max_tokens to be true");
        goto done;
    }
    c->pooling = flags;
done:
    json_decref(root);
    return st;
}

static lipi_status read_dense(const char *dir, const char *rel, lipi_config *c,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *root = NULL;
    char sub[4096];
    if (c->n_dense == LIPI_MAX_DENSE)
        return lipi_error_set(err, LIPI_EFORMAT, dir, 0, 0,
                              "modules.json: expected at most %d Dense modules", LIPI_MAX_DENSE);
    if (strlen(rel) >= sizeof c->dense[0].path ||
        (size_t)snprintf(sub, sizeof sub, "%s/config.json", rel) >= sizeof sub)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
    lipi_dense *d = &c->dense[c->n_dense];
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", rel);
    TRY(load_json_file(dir, sub, &root, err));
    TRY(get_size(root, "in_features", true, 0, &d->in, sub, err));
    TRY(get_size(root, "out_features", true, 0, &d->out, sub, err));
    json_t *bias = json_object_get(root, "bias");
    if (bias && !json_is_boolean(bias)) {
        st = lipi_error_set(err, LIPI_EFORMAT, sub, 0, 0,
                            "field \"bias\": expected a boolean, found %s", lipi_json_kind(bias));
        goto done;
    }
    d->bias = !bias || json_is_true(bias);
    json_t *act = json_object_get(root, "activation_function");
    const char *a = json_is_string(act) ? json_string_value(act) : "";
    if (!strcmp(a, "torch.nn.modules.activation.Tanh"))
        d->tanh = true;
    else if (strcmp(a, "torch.nn.modules.linear.Identity")) {
        st = lipi_error_set(err, LIPI_EFORMAT, sub, 0, 0,
                            "field \"activation_function\": expected "
                            "torch.nn.modules.activation.Tanh or "
                            "torch.nn.modules.linear.Identity, found \"%.60s\"",
                            a);
        goto done;
    }
    c->n_dense++;
done:
    json_decref(root);
    return st;
}

/* A module path must stay inside the model folder. */
static bool safe_subpath(const char *p)
{
    if (p[0] == '/')
        return false;
    for (const char *q = p; *q;) {
        size_t n = strcspn(q, "/");
        if (n == 2 && q[0] == '.' && q[1] == '.')
            return false;
        q += n;
        q += *q == '/';
    }
    return true;
}

lipi_status lipi_config_load_modules(const char *dir, json_t **modules, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *text = NULL, path[4096];
    size_t len = 0;
    *modules = NULL;
    if ((size_t)snprintf(path, sizeof path, "%s/modules.json", dir) >= sizeof path)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
    FILE *probe = fopen(path, "rb");
    if (!probe)
        return LIPI_OK; /* a plain transformers folder */
    fclose(probe);
    TRY(lipi_read_file(path, LIPI_JSON_MAX, &text, &len, err));
    TRY(lipi_json_load(text, len, 0, path, 0, modules, err));
    if (!json_is_array(*modules)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "expected a JSON array of modules");
        goto done;
    }
    size_t i;
    json_t *mod;
    json_array_foreach(*modules, i, mod)
    {
        json_t *type = json_object_get(mod, "type"), *mpath = json_object_get(mod, "path");
        if (!json_is_string(type) || (mpath && !json_is_string(mpath))) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "[%zu]: expected \"type\" and \"path\" strings", i);
            goto done;
        }
        if (mpath && (!safe_subpath(json_string_value(mpath)) ||
                      json_string_length(mpath) >= LIPI_SUBPATH_MAX)) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "[%zu].path: expected a folder inside the model folder, found "
                                "\"%.60s\"",
                                i, json_string_value(mpath));
            goto done;
        }
    }
done:
    lipi_free(text);
    if (st != LIPI_OK) {
        json_decref(*modules);
        *modules = NULL;
    }
    return st;
}

void lipi_config_modules_free(json_t *modules)
{
    json_decref(modules);
}

static const char *module_class(json_t *mod)
{
    const char *t = json_string_value(json_object_get(mod, "type"));
    const char *dot = strrchr(t, '.');
    return dot ? dot + 1 : t;
}

void lipi_config_st_transformer(const json_t *modules, char sub[LIPI_SUBPATH_MAX])
{
    json_t *mod;
    size_t i;
    sub[0] = '\0';
    json_array_foreach(modules, i, mod)
    {
        json_t *mpath = json_object_get(mod, "path");
        if (!strcmp(module_class(mod), "Transformer") && mpath) {
            snprintf(sub, LIPI_SUBPATH_MAX, "%s", json_string_value(mpath));
            break;
        }
    }
}

lipi_status lipi_config_read_st(const char *dir, const json_t *modules, const char *sub,
                                lipi_config *c, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *sb = NULL;
    char path[4096];
    if (!modules)
        goto done;
    /* Names modules.json in the errors below; lipi_config_load_modules
     * managed the same path. */
    snprintf(path, sizeof path, "%s/modules.json", dir);
    size_t i;
    json_t *mod;
    json_array_foreach(modules, i, mod)
    {
        json_t *mpath = json_object_get(mod, "path");
        const char *t = json_string_value(json_object_get(mod, "type"));
        const char *cls = module_class(mod);
        if (!strcmp(cls, "Transformer")) {
            continue; /* its folder was found by lipi_config_st_transformer */
        } else if (!strcmp(cls, "Pooling")) {
            TRY(read_pooling(dir, mpath ? json_string_value(mpath) : "1_Pooling", c, err));
        } else if (!strcmp(cls, "Dense")) {
            if (c->normalize) {
                st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                    "[%zu]: expected Dense modules before Normalize", i);
                goto done;
            }
            TRY(read_dense(dir, mpath ? json_string_value(mpath) : "2_Dense", c, err));
        } else if (!strcmp(cls, "Normalize")) {
            c->normalize = true;
        } else {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "[%zu]: unsupported module \"%.80s\", expected Transformer, "
                                "Pooling, Dense or Normalize",
                                i, t);
            goto done;
        }
    }
    /* sentence_bert_config.json sits beside the Transformer's files (older
     * folders keep them in a subfolder such as 0_BERT/). */
    char sbdir[4096];
    if ((size_t)snprintf(sbdir, sizeof sbdir, "%s%s%s", dir, *sub ? "/" : "", sub) >=
            sizeof sbdir ||
        (size_t)snprintf(path, sizeof path, "%s/sentence_bert_config.json", sbdir) >=
            sizeof path)
        goto done;
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        TRY(load_json_file(sbdir, "sentence_bert_config.json", &sb, err));
        json_t *msl = json_object_get(sb, "max_seq_length");
        if (msl && !json_is_null(msl))
            TRY(get_size(sb, "max_seq_length", true, 0, &c->max_seq_len, path, err));
    }
done:
    json_decref(sb);
    return st;
}

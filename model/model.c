/* Loading a model folder: config, then every weight the architecture needs,
 * checked against the config's shapes, converted to float32 and copied into
 * one 64-byte aligned block. Query, key and value weights are stacked into
 * one (3C, C) matrix so the attention input is a single GEMM. */
#include "model/model_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A region of the weight block: one or more tensors copied side by side.
 * A quantized region (dtype int8) holds a (rows, cols) matrix as int8 in
 * the int8 block, its scales and offsets as 2 * rows floats in the block. */
typedef struct {
    float **dst;
    size_t floats;
    size_t offset; /* in the block, set when the layout is fixed */
    lipi_qlinear *q;
    size_t rows, cols, qoffset;
    bool bound; /* a tensor is copied in; the others are zeroed, then filled at load */
} region;

/* One tensor to copy into a region at a float offset. */
typedef struct {
    char name[160];
    size_t region, off;
    size_t ndim, shape[2];
    const lipi_st_tensor *t;
} binding;

typedef struct {
    const lipi_safetensors *st;
    const char *prefix;
    region *regions;
    size_t n_regions, cap_regions;
    binding *binds;
    size_t n_binds, cap_binds;
    lipi_error *err;
    bool int8;
} loader;

/* Finds a tensor by name; LayerNorm parameters also under their legacy
 * TensorFlow names gamma/beta. */
static const lipi_st_tensor *find_tensor(const lipi_safetensors *st, const char *name)
{
    const lipi_st_tensor *t = lipi_st_find(st, name);
    if (t || (!strstr(name, "LayerNorm") && !strstr(name, "layer_norm")))
        return t;
    char alt[200];
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ".weight") && n < sizeof alt) {
        snprintf(alt, sizeof alt, "%.*s.gamma", (int)(n - 7), name);
        return lipi_st_find(st, alt);
    }
    if (n > 5 && !strcmp(name + n - 5, ".bias") && n < sizeof alt) {
        snprintf(alt, sizeof alt, "%.*s.beta", (int)(n - 5), name);
        return lipi_st_find(st, alt);
    }
    return NULL;
}

static lipi_status add_region(loader *L, float **dst, size_t floats, size_t *idx)
{
    void *p = L->regions;
    if (lipi_grow(&p, &L->cap_regions, L->n_regions + 1, sizeof *L->regions) != LIPI_OK)
        return LIPI_ENOMEM;
    L->regions = p;
    L->regions[L->n_regions] = (region){dst, floats, 0, NULL, 0, 0, 0, false};
    *idx = L->n_regions++;
    return LIPI_OK;
}

static lipi_status add_qregion(loader *L, lipi_qlinear *q, size_t rows, size_t cols, size_t *idx)
{
    lipi_status st = add_region(L, NULL, 2 * rows, idx);
    if (st == LIPI_OK) {
        L->regions[*idx].q = q;
        L->regions[*idx].rows = rows;
        L->regions[*idx].cols = cols;
    }
    return st;
}

/* Binds `prefix + name` of shape (rows, cols) (cols 0: a vector of rows)
 * at float offset `off` of region `reg`. `base` = false: no model prefix
 * (classifier heads sit beside the base model). */
static lipi_status bind(loader *L, bool base, const char *name, size_t reg, size_t off,
                        size_t rows, size_t cols)
{
    void *p = L->binds;
    if (lipi_grow(&p, &L->cap_binds, L->n_binds + 1, sizeof *L->binds) != LIPI_OK)
        return LIPI_ENOMEM;
    L->binds = p;
    binding *b = &L->binds[L->n_binds++];
    memset(b, 0, sizeof *b);
    L->regions[reg].bound = true;
    snprintf(b->name, sizeof b->name, "%s%s", base ? L->prefix : "", name);
    b->region = reg;
    b->off = off;
    b->ndim = cols ? 2 : 1;
    b->shape[0] = rows;
    b->shape[1] = cols;
    return LIPI_OK;
}

/* A Linear layer (out, in) with its bias into fresh regions; the matrix
 * quantized into *q instead of *w when q is not NULL. has_bias false: the
 * checkpoint has none, and *b is a zero vector (so every GEMM takes the
 * same path). */
static lipi_status linear_b(loader *L, bool base, const char *name, float **w, lipi_qlinear *q,
                            float **b, size_t out, size_t in, bool has_bias)
{
    lipi_status st = LIPI_OK;
    char n[160];
    size_t r;
    if (q)
        TRY(add_qregion(L, q, out, in, &r));
    else
        TRY(add_region(L, w, out * in, &r));
    snprintf(n, sizeof n, "%s.weight", name);
    TRY(bind(L, base, n, r, 0, out, in));
    TRY(add_region(L, b, out, &r));
    snprintf(n, sizeof n, "%s.bias", name);
    if (has_bias)
        TRY(bind(L, base, n, r, 0, out, 0));
done:
    return st;
}

static lipi_status linear(loader *L, bool base, const char *name, float **w, lipi_qlinear *q,
                          float **b, size_t out, size_t in)
{
    return linear_b(L, base, name, w, q, b, out, in, true);
}

/* LayerNorm weight and bias (C); has_bias false: a zero bias. */
static lipi_status layernorm_b(loader *L, const char *name, float **w, float **b, size_t C,
                               bool has_bias)
{
    lipi_status st = LIPI_OK;
    char n[160];
    size_t r;
    TRY(add_region(L, w, C, &r));
    snprintf(n, sizeof n, "%s.weight", name);
    TRY(bind(L, true, n, r, 0, C, 0));
    TRY(add_region(L, b, C, &r));
    snprintf(n, sizeof n, "%s.bias", name);
    if (has_bias)
        TRY(bind(L, true, n, r, 0, C, 0));
done:
    return st;
}

static lipi_status layernorm(loader *L, const char *name, float **w, float **b, size_t C)
{
    return layernorm_b(L, name, w, b, C, true);
}

static lipi_status embedding(loader *L, const char *name, float **w, size_t rows, size_t E)
{
    size_t r;
    if (add_region(L, w, rows * E, &r) != LIPI_OK)
        return LIPI_ENOMEM;
    return bind(L, true, name, r, 0, rows, E);
}

/* Query, key and value (C, C) each, stacked into (3C, C) and (3C). */
static lipi_status qkv(loader *L, const char *pre, const char *const names[3], lipi_layer_w *w,
                       size_t C)
{
    lipi_status st = LIPI_OK;
    size_t rw, rb;
    char n[160];
    if (L->int8)
        TRY(add_qregion(L, &w->qkv_q, 3 * C, C, &rw));
    else
        TRY(add_region(L, &w->qkv_w, 3 * C * C, &rw));
    TRY(add_region(L, &w->qkv_b, 3 * C, &rb));
    for (size_t i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "%s%s.weight", pre, names[i]);
        TRY(bind(L, true, n, rw, i * C * C, C, C));
        snprintf(n, sizeof n, "%s%s.bias", pre, names[i]);
        TRY(bind(L, true, n, rb, i * C, C, 0));
    }
done:
    return st;
}

/* Per-architecture tensor names of one layer. */
typedef struct {
    const char *q, *k, *v, *ao, *ln1, *ff1, *ff2, *ln2;
} layer_names;

static const layer_names BERT_NAMES = {
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
    "output.dense", "output.LayerNorm"};
static const layer_names ALBERT_NAMES = {
    "attention.query", "attention.key", "attention.value", "attention.dense",
    "attention.LayerNorm", "ffn", "ffn_output", "full_layer_layer_norm"};
static const layer_names DISTIL_NAMES = {
    "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
    "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"};
static const layer_names MPNET_NAMES = {
    "attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
    "attention.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"};

/* jina-bert's JinaBertGLUMLP in place of BertIntermediate / BertOutput. */
static const layer_names GLU_NAMES = {
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "attention.output.LayerNorm", "mlp.gated_layers",
    "mlp.wo", "mlp.layernorm"};

static lipi_status layer(loader *L, const char *pre, const layer_names *nm, lipi_layer_w *w,
                         const lipi_config *c)
{
    lipi_status st = LIPI_OK;
    char n[160];
    const char *const q[3] = {nm->q, nm->k, nm->v};
    size_t C = c->hidden, I = c->inter;
    TRY(qkv(L, pre, q, w, C));
    snprintf(n, sizeof n, "%s%s", pre, nm->ao);
    TRY(linear(L, true, n, &w->ao_w, L->int8 ? &w->ao_q : NULL, &w->ao_b, C, C));
    snprintf(n, sizeof n, "%s%s", pre, nm->ln1);
    TRY(layernorm(L, n, &w->ln1_w, &w->ln1_b, C));
    if (c->glu)
        nm = &GLU_NAMES;
    if (c->glu) {
        /* gated_layers (2I, C) has no bias: a zero region (zeroed after
         * loading) lets the GEMM take the same path as every other. */
        size_t r;
        if (L->int8)
            TRY(add_qregion(L, &w->ff1_q, 2 * I, C, &r));
        else
            TRY(add_region(L, &w->ff1_w, 2 * I * C, &r));
        snprintf(n, sizeof n, "%s%s.weight", pre, nm->ff1);
        TRY(bind(L, true, n, r, 0, 2 * I, C));
        TRY(add_region(L, &w->ff1_b, 2 * I, &r));
    } else {
        snprintf(n, sizeof n, "%s%s", pre, nm->ff1);
        TRY(linear(L, true, n, &w->ff1_w, L->int8 ? &w->ff1_q : NULL, &w->ff1_b, I, C));
    }
    snprintf(n, sizeof n, "%s%s", pre, nm->ff2);
    TRY(linear(L, true, n, &w->ff2_w, L->int8 ? &w->ff2_q : NULL, &w->ff2_b, C, I));
    snprintf(n, sizeof n, "%s%s", pre, nm->ln2);
    TRY(layernorm(L, n, &w->ln2_w, &w->ln2_b, C));
done:
    return st;
}

/* One ModernBertEncoderLayer (modeling_modernbert.py): attn_norm (an
 * Identity in layer 0), attn.Wqkv (3C, C) with q, k, v rows stacked as
 * lipi stacks them, attn.Wo, mlp_norm, mlp.Wi (2I, C: input half, then
 * gate half), mlp.Wo; biases as the config says. */
static lipi_status modernbert_layer(loader *L, size_t i, lipi_layer_w *w, const lipi_config *c)
{
    lipi_status st = LIPI_OK;
    char n[160];
    size_t C = c->hidden, I = c->inter;
    bool q8 = L->int8;
    if (i > 0) {
        snprintf(n, sizeof n, "layers.%zu.attn_norm", i);
        TRY(layernorm_b(L, n, &w->ln1_w, &w->ln1_b, C, c->norm_bias));
    }
    snprintf(n, sizeof n, "layers.%zu.attn.Wqkv", i);
    TRY(linear_b(L, true, n, &w->qkv_w, q8 ? &w->qkv_q : NULL, &w->qkv_b, 3 * C, C,
                 c->attn_bias));
    snprintf(n, sizeof n, "layers.%zu.attn.Wo", i);
    TRY(linear_b(L, true, n, &w->ao_w, q8 ? &w->ao_q : NULL, &w->ao_b, C, C, c->attn_bias));
    snprintf(n, sizeof n, "layers.%zu.mlp_norm", i);
    TRY(layernorm_b(L, n, &w->ln2_w, &w->ln2_b, C, c->norm_bias));
    snprintf(n, sizeof n, "layers.%zu.mlp.Wi", i);
    TRY(linear_b(L, true, n, &w->ff1_w, q8 ? &w->ff1_q : NULL, &w->ff1_b, 2 * I, C,
                 c->mlp_bias));
    snprintf(n, sizeof n, "layers.%zu.mlp.Wo", i);
    TRY(linear_b(L, true, n, &w->ff2_w, q8 ? &w->ff2_q : NULL, &w->ff2_b, C, I, c->mlp_bias));
done:
    return st;
}

/* ModernBertModel: tok_embeddings, embeddings.norm, the layers, final_norm,
 * and the rotary tables (regions with no tensor, computed after loading). */
static lipi_status plan_modernbert(loader *L, lipi_model *m)
{
    lipi_status st = LIPI_OK;
    const lipi_config *c = &m->cfg;
    size_t C = c->hidden, r;
    TRY(embedding(L, "embeddings.tok_embeddings.weight", &m->word_emb, c->vocab, C));
    TRY(layernorm_b(L, "embeddings.norm", &m->emb_ln_w, &m->emb_ln_b, C, c->norm_bias));
    /* 2 tables of (P, D): D <= C, so no larger than one (P, C) table. */
    TRY(add_region(L, &m->rope, 2 * c->max_pos * (C / c->heads), &r));
    for (size_t i = 0; i < m->n_unique; i++)
        TRY(modernbert_layer(L, i, &m->unique[i], c));
    TRY(layernorm_b(L, "final_norm", &m->final_ln_w, &m->final_ln_b, C, c->norm_bias));
done:
    return st;
}

/* The embeddings of NomicBERT and GTE: word and (when type_vocab_size > 0)
 * token type tables, no positions (rotary), then LayerNorm `ln`. */
static lipi_status rotary_embeddings(loader *L, lipi_model *m, const char *ln)
{
    lipi_status st = LIPI_OK;
    const lipi_config *c = &m->cfg;
    size_t C = c->hidden;
    TRY(embedding(L, "embeddings.word_embeddings.weight", &m->word_emb, c->vocab, C));
    if (c->type_vocab)
        TRY(embedding(L, "embeddings.token_type_embeddings.weight", &m->type_emb, c->type_vocab,
                      C));
    TRY(layernorm(L, ln, &m->emb_ln_w, &m->emb_ln_b, C));
done:
    return st;
}

/* NomicBertModel (modeling_hf_nomic_bert.py): word and token type
 * embeddings, emb_ln, then post-norm blocks encoder.layers.i with
 * attn.Wqkv (3C, C), attn.out_proj, norm1, mlp.fc11 / fc12 / fc2, norm2.
 * The gated MLP computes fc11(x) * act(fc12(x)): fc12 goes in ff1's first
 * half (the activated one), fc11 in its second. */
static lipi_status plan_nomic(loader *L, lipi_model *m)
{
    lipi_status st = LIPI_OK;
    const lipi_config *c = &m->cfg;
    size_t C = c->hidden, I = c->inter, r;
    char n[160];
    bool q8 = L->int8;
    TRY(rotary_embeddings(L, m, "emb_ln"));
    TRY(add_region(L, &m->rope, 2 * c->max_pos * (C / c->heads), &r));
    for (size_t i = 0; i < m->n_unique; i++) {
        lipi_layer_w *w = &m->unique[i];
        snprintf(n, sizeof n, "encoder.layers.%zu.attn.Wqkv", i);
        TRY(linear_b(L, true, n, &w->qkv_w, q8 ? &w->qkv_q : NULL, &w->qkv_b, 3 * C, C,
                     c->attn_bias));
        snprintf(n, sizeof n, "encoder.layers.%zu.attn.out_proj", i);
        TRY(linear_b(L, true, n, &w->ao_w, q8 ? &w->ao_q : NULL, &w->ao_b, C, C, c->attn_bias));
        snprintf(n, sizeof n, "encoder.layers.%zu.norm1", i);
        TRY(layernorm(L, n, &w->ln1_w, &w->ln1_b, C));
        size_t rw, rb;
        if (q8)
            TRY(add_qregion(L, &w->ff1_q, 2 * I, C, &rw));
        else
            TRY(add_region(L, &w->ff1_w, 2 * I * C, &rw));
        TRY(add_region(L, &w->ff1_b, 2 * I, &rb));
        static const char *const halves[2] = {"fc12", "fc11"};
        for (size_t h = 0; h < 2; h++) {
            snprintf(n, sizeof n, "encoder.layers.%zu.mlp.%s.weight", i, halves[h]);
            TRY(bind(L, true, n, rw, h * I * C, I, C));
            snprintf(n, sizeof n, "encoder.layers.%zu.mlp.%s.bias", i, halves[h]);
            if (c->mlp_bias)
                TRY(bind(L, true, n, rb, h * I, I, 0));
        }
        snprintf(n, sizeof n, "encoder.layers.%zu.mlp.fc2", i);
        TRY(linear_b(L, true, n, &w->ff2_w, q8 ? &w->ff2_q : NULL, &w->ff2_b, C, I,
                     c->mlp_out_bias));
        snprintf(n, sizeof n, "encoder.layers.%zu.norm2", i);
        TRY(layernorm(L, n, &w->ln2_w, &w->ln2_b, C));
    }
done:
    return st;
}

/* NewModel (Alibaba-NLP/new-impl's modeling.py): word (and token type)
 * embeddings, embeddings.LayerNorm, then post-norm layers encoder.layer.i
 * with attention.qkv_proj (3C, C: q, k, v rows stacked as lipi stacks
 * them), attention.o_proj, attn_ln, mlp.up_gate_proj (2I, C, no bias),
 * mlp.down_proj, mlp_ln. up_gate_proj holds the up rows, then the gate
 * rows; lipi's GLU activates the first half, so gte_swap_halves turns the
 * two around after loading. */
static lipi_status plan_gte(loader *L, lipi_model *m)
{
    lipi_status st = LIPI_OK;
    const lipi_config *c = &m->cfg;
    size_t C = c->hidden, I = c->inter, r;
    char n[160];
    bool q8 = L->int8;
    TRY(rotary_embeddings(L, m, "embeddings.LayerNorm"));
    TRY(add_region(L, &m->rope, c->max_pos * (C / c->heads), &r)); /* one table: all global */
    for (size_t i = 0; i < m->n_unique; i++) {
        lipi_layer_w *w = &m->unique[i];
        snprintf(n, sizeof n, "encoder.layer.%zu.attention.qkv_proj", i);
        TRY(linear(L, true, n, &w->qkv_w, q8 ? &w->qkv_q : NULL, &w->qkv_b, 3 * C, C));
        snprintf(n, sizeof n, "encoder.layer.%zu.attention.o_proj", i);
        TRY(linear(L, true, n, &w->ao_w, q8 ? &w->ao_q : NULL, &w->ao_b, C, C));
        snprintf(n, sizeof n, "encoder.layer.%zu.attn_ln", i);
        TRY(layernorm(L, n, &w->ln1_w, &w->ln1_b, C));
        snprintf(n, sizeof n, "encoder.layer.%zu.mlp.up_gate_proj", i);
        TRY(linear_b(L, true, n, &w->ff1_w, q8 ? &w->ff1_q : NULL, &w->ff1_b, 2 * I, C, false));
        snprintf(n, sizeof n, "encoder.layer.%zu.mlp.down_proj", i);
        TRY(linear(L, true, n, &w->ff2_w, q8 ? &w->ff2_q : NULL, &w->ff2_b, C, I));
        snprintf(n, sizeof n, "encoder.layer.%zu.mlp_ln", i);
        TRY(layernorm(L, n, &w->ln2_w, &w->ln2_b, C));
    }
done:
    return st;
}

/* Swaps rows 0..n-1 of x (2n rows of `size` bytes) with rows n..2n-1. */
static void swap_row_halves(void *x, size_t n, size_t size)
{
    unsigned char *a = x, *b = a + n * size;
    for (size_t i = 0; i < n * size; i++) {
        unsigned char t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

/* up_gate_proj (up; gate) -> (gate; up) in every layer: the float rows, or
 * the int8 rows with their scales and offsets (quantized per row, so the
 * swap commutes with quantizing). The bias is zero in both halves. */
static void gte_swap_halves(lipi_model *m)
{
    size_t I = m->cfg.inter, C = m->cfg.hidden;
    for (size_t i = 0; i < m->n_unique; i++) {
        lipi_layer_w *w = &m->unique[i];
        if (w->ff1_q.w) {
            swap_row_halves(w->ff1_q.w, I, C);
            swap_row_halves(w->ff1_q.scale, I, sizeof(float));
            swap_row_halves(w->ff1_q.wsum, I, sizeof(int32_t));
        } else {
            swap_row_halves(w->ff1_w, I, C * sizeof(float));
        }
    }
}

#define POS_TABLE "embeddings.position_embeddings.weight"

static lipi_status plan(loader *L, lipi_model *m)
{
    lipi_status st = LIPI_OK;
    const lipi_config *c = &m->cfg;
    size_t C = c->hidden, E = c->embed;
    char pre[96];

    if (c->arch == LIPI_ARCH_MODERNBERT)
        return plan_modernbert(L, m);
    if (c->arch == LIPI_ARCH_NOMIC)
        return plan_nomic(L, m);
    if (c->arch == LIPI_ARCH_GTE)
        return plan_gte(L, m);
    TRY(embedding(L, "embeddings.word_embeddings.weight", &m->word_emb, c->vocab, E));
    if (c->pos_kind == LIPI_POS_SINUSOIDAL) { /* a region with no tensor: filled after loading */
        size_t r;
        TRY(add_region(L, &m->pos_emb, c->max_pos * E, &r));
    } else if (c->pos_kind == LIPI_POS_ABSOLUTE) {
        TRY(embedding(L, POS_TABLE, &m->pos_emb, c->max_pos, E));
    }
    if (c->type_vocab) /* DistilBERT and MPNet have no token types */
        TRY(embedding(L, "embeddings.token_type_embeddings.weight", &m->type_emb,
                      c->type_vocab, E));
    TRY(layernorm(L, "embeddings.LayerNorm", &m->emb_ln_w, &m->emb_ln_b, E));
    if (c->arch == LIPI_ARCH_ALBERT)
        TRY(linear(L, true, "encoder.embedding_hidden_mapping_in", &m->proj_w, NULL,
                   &m->proj_b, C, E));
    if (c->pos_kind == LIPI_POS_ALIBI) {
        /* -slope[h] * |key - query| for every distance of P positions (H
         * <= C, so no larger than the table it replaces). */
        size_t r;
        TRY(add_region(L, &m->pos_bias, c->heads * (2 * c->max_pos - 1), &r));
    }
    if (c->arch == LIPI_ARCH_MPNET) {
        /* One table shared by every layer, and the per-head rows derived
         * from it after loading (a region with no tensor bound). H <= C
         * and the position table (P, C) must be in the file, so the size
         * cannot overflow once resolve has passed. */
        TRY(embedding(L, "encoder.relative_attention_bias.weight", &m->rel_bias,
                      c->rel_buckets, c->heads));
        size_t r, P = c->max_pos - c->pos_offset;
        TRY(add_region(L, &m->pos_bias, c->heads * (2 * P - 1), &r));
    }

    for (size_t i = 0; i < m->n_unique; i++) {
        switch (c->arch) {
        case LIPI_ARCH_BERT:
        case LIPI_ARCH_ROBERTA:
            snprintf(pre, sizeof pre, "encoder.layer.%zu.", i);
            TRY(layer(L, pre, &BERT_NAMES, &m->unique[i], c));
            break;
        case LIPI_ARCH_MPNET:
            snprintf(pre, sizeof pre, "encoder.layer.%zu.", i);
            TRY(layer(L, pre, &MPNET_NAMES, &m->unique[i], c));
            break;
        case LIPI_ARCH_ALBERT:
            snprintf(pre, sizeof pre, "encoder.albert_layer_groups.%zu.albert_layers.%zu.",
                     i / c->inner_groups, i % c->inner_groups);
            TRY(layer(L, pre, &ALBERT_NAMES, &m->unique[i], c));
            break;
        case LIPI_ARCH_DISTILBERT:
            snprintf(pre, sizeof pre, "transformer.layer.%zu.", i);
            TRY(layer(L, pre, &DISTIL_NAMES, &m->unique[i], c));
            break;
        case LIPI_ARCH_MODERNBERT: /* plan_modernbert */
        case LIPI_ARCH_NOMIC:      /* plan_nomic */
        case LIPI_ARCH_GTE:        /* plan_gte */
            break;
        }
    }

    if (!c->classifier)
        goto done;
    size_t NL = c->num_labels;
    switch (c->arch) {
    case LIPI_ARCH_BERT:
        m->head = LIPI_HEAD_POOLER;
        TRY(linear(L, true, "pooler.dense", &m->head1_w, NULL, &m->head1_b, C, C));
        TRY(linear(L, false, "classifier", &m->head2_w, NULL, &m->head2_b, NL, C));
        break;
    case LIPI_ARCH_ALBERT:
        m->head = LIPI_HEAD_POOLER;
        TRY(linear(L, true, "pooler", &m->head1_w, NULL, &m->head1_b, C, C));
        TRY(linear(L, false, "classifier", &m->head2_w, NULL, &m->head2_b, NL, C));
        break;
    case LIPI_ARCH_ROBERTA:
    case LIPI_ARCH_MPNET: /* MPNetClassificationHead is RoBERTa's */
        m->head = LIPI_HEAD_ROBERTA;
        TRY(linear(L, false, "classifier.dense", &m->head1_w, NULL, &m->head1_b, C, C));
        TRY(linear(L, false, "classifier.out_proj", &m->head2_w, NULL, &m->head2_b, NL, C));
        break;
    case LIPI_ARCH_DISTILBERT:
        m->head = LIPI_HEAD_DISTILBERT;
        TRY(linear(L, false, "pre_classifier", &m->head1_w, NULL, &m->head1_b, C, C));
        TRY(linear(L, false, "classifier", &m->head2_w, NULL, &m->head2_b, NL, C));
        break;
    case LIPI_ARCH_MODERNBERT: /* refused by the config */
    case LIPI_ARCH_NOMIC:
    case LIPI_ARCH_GTE:
        break;
    }
done:
    return st;
}

/* src: (rows, cols) float32 -> dst: (rows, cols) int8 with a scale per row
 * (symmetric, max |w| -> 127) and wsum[r] = -128 * sum of the row's int8
 * values (the offset that makes u8 activations signed again). */
static void quantize_rows(const float *src, size_t rows, size_t cols, int8_t *dst,
                          float *scale, int32_t *wsum)
{
    for (size_t r = 0; r < rows; r++) {
        const float *x = src + r * cols;
        float amax = 0;
        for (size_t k = 0; k < cols; k++)
            amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
        float sc = amax > 0 ? amax / 127.0f : 1.0f;
        int32_t sum = 0;
        for (size_t k = 0; k < cols; k++) {
            long q = lrintf(x[k] / sc);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            dst[r * cols + k] = (int8_t)q;
            sum += (int32_t)q;
        }
        scale[r] = sc;
        wsum[r] = -128 * sum;
    }
}

static void fmt_shape(char *buf, size_t cap, const size_t *shape, size_t ndim)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (size_t i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %zu" : "%zu", shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* Every binding must name a float tensor of exactly the expected shape. */
static lipi_status resolve(loader *L, const char *path)
{
    for (size_t i = 0; i < L->n_binds; i++) {
        binding *b = &L->binds[i];
        b->t = find_tensor(L->st, b->name);
        size_t n = strlen(b->name), k = strlen(POS_TABLE);
        bool pos = n >= k && !strcmp(b->name + n - k, POS_TABLE);
        if (!b->t)
            return lipi_error_set(L->err, LIPI_EFORMAT, path, 0, 0,
                                  "missing tensor \"%s\" (the config asks for it%s)", b->name,
                                  pos ? "; a model without one says "
                                        "position_embedding_type \"sinusoidal\" or \"alibi\""
                                      : "");
        const lipi_st_tensor *t = b->t;
        if (t->dtype == LIPI_ST_OTHER)
            return lipi_error_set(L->err, LIPI_EFORMAT, path, 0, 0,
                                  "tensor \"%s\": dtype %s, expected F32, F16 or BF16",
                                  b->name, t->dtype_name);
        bool same = t->ndim == b->ndim;
        for (size_t d = 0; same && d < b->ndim; d++)
            same = t->shape[d] == b->shape[d];
        if (!same) {
            char want[64], got[128];
            fmt_shape(want, sizeof want, b->shape, b->ndim);
            fmt_shape(got, sizeof got, t->shape, t->ndim);
            return lipi_error_set(L->err, LIPI_EFORMAT, path, 0, 0,
                                  "tensor \"%s\": expected shape %s from config.json, "
                                  "found %s",
                                  b->name, want, got);
        }
    }
    return LIPI_OK;
}

/* The base model's tensors may carry the architecture's prefix ("bert.",
 * as saved by *For* heads) or none (as saved by the bare model). */
static lipi_status choose_prefix(loader *L, const lipi_config *c, const char *path)
{
    static const char *const prefixes[] = {"bert.", "roberta.", "albert.", "distilbert.",
                                           "mpnet.", "model.", "bert.", "new."};
    const char *p = prefixes[c->arch];
    const char *word = c->arch == LIPI_ARCH_MODERNBERT ? "embeddings.tok_embeddings.weight"
                                                       : "embeddings.word_embeddings.weight";
    char name[160];
    snprintf(name, sizeof name, "%s%s", p, word);
    if (lipi_st_find(L->st, name)) {
        L->prefix = p;
        return LIPI_OK;
    }
    if (lipi_st_find(L->st, word)) {
        L->prefix = "";
        return LIPI_OK;
    }
    return lipi_error_set(L->err, LIPI_EFORMAT, path, 0, 0,
                          "missing tensor \"%s\" (also looked for it without the \"%s\" "
                          "prefix)",
                          name, p);
}

/* pos_bias (H, 2P - 1) from rel_bias (NB, H): the attention then adds
 * pos_bias[h][j - i + P - 1] without bucketing per score. */
static void fill_pos_bias(lipi_model *m)
{
    const lipi_config *c = &m->cfg;
    size_t H = c->heads, P = c->max_pos - c->pos_offset, W = 2 * P - 1;
    for (size_t r = 0; r < W; r++) {
        size_t b = lipi_mpnet_bucket((long)r - (long)(P - 1));
        for (size_t h = 0; h < H; h++)
            m->pos_bias[h * W + r] = m->rel_bias[b * H + h];
    }
}

void lipi_sinusoidal_positions(float *pe, size_t P, size_t E)
{
    /* Double, then one rounding to float, as the reference's numpy table:
     * float32 angles would be off by up to pos * 2^-24 radians. */
    for (size_t pos = 0; pos < P; pos++)
        for (size_t j = 0; j < E; j++) {
            double angle = (double)pos / pow(10000.0, (double)(2 * (j / 2)) / (double)E);
            pe[pos * E + j] = (float)(j % 2 ? cos(angle) : sin(angle));
        }
}

/* Slope h of H heads: the 2^floor(log2 H) slopes of that power of two,
 * then the even-indexed ones of twice that power; start * start**i in
 * double, as Python computes it. */
static double alibi_slope(size_t H, size_t h)
{
    size_t p = 1;
    while (p * 2 <= H)
        p *= 2;
    size_t n = h < p ? p : 2 * p, i = h < p ? h : 2 * (h - p);
    double start = pow(2.0, -pow(2.0, -(log2((double)n) - 3.0)));
    return start * pow(start, (double)i);
}

void lipi_alibi_slopes(float *slopes, size_t H)
{
    for (size_t h = 0; h < H; h++)
        slopes[h] = (float)alibi_slope(H, h);
}

void lipi_rope_table(float *rope, size_t P, size_t D, double theta)
{
    lipi_rope_table_ntk(rope, P, D, theta, 1.0);
}

void lipi_rope_table_ntk(float *rope, size_t P, size_t D, double theta, double f)
{
    /* ModernBertRotaryEmbedding: inv_freq = 1.0 / (base ** (arange(0, D, 2)
     * .float() / D)) in float32 (torch's pow of a float base), then
     * freqs = inv_freq * pos rounded to float, and cos / sin of that.
     * NTKScalingRotaryEmbedding: base * f, then inv_freq / f ** (2 / D)
     * (a Python float, divided in float32). f = 1 divides by 1.0f. */
    size_t half = D / 2;
    float div = (float)pow(f, 2.0 / (double)D);
    for (size_t i = 0; i < half; i++) {
        float inv = 1.0f / powf((float)(theta * f), (float)(2 * i) / (float)D) / div;
        for (size_t p = 0; p < P; p++) {
            float a = inv * (float)p;
            rope[p * D + i] = (float)cos((double)a);
            rope[p * D + half + i] = (float)sin((double)a);
        }
    }
}

/* pos_bias (H, 2P - 1) = -slope[h] * |r| at [h][r + P - 1]: float32 slope
 * times the float distance, as jina-bert's rebuild_alibi_tensor in torch. */
static void fill_alibi(lipi_model *m)
{
    const lipi_config *c = &m->cfg;
    size_t H = c->heads, P = c->max_pos, W = 2 * P - 1;
    for (size_t h = 0; h < H; h++) {
        float s = (float)alibi_slope(H, h);
        for (size_t r = 0; r < W; r++) {
            size_t d = r < P - 1 ? P - 1 - r : r - (P - 1);
            m->pos_bias[h * W + r] = -s * (float)d;
        }
    }
}

static void fill_info(lipi_model *m)
{
    const lipi_config *c = &m->cfg;
    lipi_model_info *in = &m->info;
    in->model_type = c->model_type;
    in->vocab_size = c->vocab;
    in->hidden_size = c->hidden;
    in->num_layers = m->n_exec;
    in->num_heads = c->heads;
    in->max_tokens = c->max_pos - c->pos_offset;
    in->max_seq_length = c->max_seq_len && c->max_seq_len < in->max_tokens ? c->max_seq_len
                                                                           : in->max_tokens;
    in->pad_token_id = c->pad_id;
    in->pooling = c->pooling;
    in->normalize = c->normalize;
    in->num_labels = c->classifier ? c->num_labels : 0;
    in->labels = (const char *const *)c->labels;
    in->sparse = m->sparse_w != NULL;
    in->colbert_dim = m->colbert_dim;
}

static lipi_status load_weights(lipi_model *m, const char *dir, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_safetensors *sf = NULL;
    loader L = {0};
    char path[4096];
    const lipi_config *c = &m->cfg;
    float *tmp = NULL; /* int8 mode: one tensor in float32 before quantizing */
    size_t tmp_cap = 0;
    TRY(lipi_weights_open(dir, &sf, path, sizeof path, err));
    L.st = sf;
    L.err = err;
    L.int8 = m->int8;

    m->n_unique = c->arch == LIPI_ARCH_ALBERT ? c->groups * c->inner_groups : c->layers;
    m->n_exec = c->arch == LIPI_ARCH_ALBERT ? c->layers * c->inner_groups : c->layers;
    m->unique = lipi_calloc(m->n_unique, sizeof *m->unique);
    m->exec = lipi_calloc(m->n_exec, sizeof *m->exec);
    if (!m->unique || !m->exec) {
        st = LIPI_ENOMEM;
        goto done;
    }
    /* AlbertTransformer: layer i runs group int(i / (layers / groups)),
     * which applies its inner_group_num layers in turn. */
    for (size_t i = 0, k = 0; i < c->layers; i++) {
        size_t per = c->arch == LIPI_ARCH_ALBERT ? c->layers / c->groups : 1;
        size_t g = i / per;
        for (size_t j = 0; j < c->inner_groups; j++)
            m->exec[k++] = &m->unique[c->arch == LIPI_ARCH_ALBERT ? g * c->inner_groups + j : i];
    }

    TRY(choose_prefix(&L, c, path));
    if (c->pos_kind == LIPI_POS_SINUSOIDAL || c->pos_kind == LIPI_POS_ALIBI) {
        char name[160];
        snprintf(name, sizeof name, "%s" POS_TABLE, L.prefix);
        if (find_tensor(sf, name)) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "unexpected tensor \"%s\": config.json says "
                                "position_embedding_type \"%s\" (no table); a learned table "
                                "is \"absolute\"",
                                name, c->pos_kind == LIPI_POS_ALIBI ? "alibi" : "sinusoidal");
            goto done;
        }
    }
    TRY(plan(&L, m));
    TRY(resolve(&L, path));

    size_t total = 0, qtotal = 0;
    for (size_t i = 0; i < L.n_regions; i++) {
        region *r = &L.regions[i];
        r->offset = total;
        /* 16 floats = 64 bytes: every matrix starts on a cache line. */
        size_t padded = (r->floats + 15) & ~(size_t)15;
        size_t qbytes = (r->rows * r->cols + 63) & ~(size_t)63;
        if (padded < r->floats || total > SIZE_MAX / 4 - padded || qtotal > SIZE_MAX / 2 - qbytes) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "weights too large");
            goto done;
        }
        total += padded;
        r->qoffset = qtotal;
        qtotal += qbytes;
    }
    m->block_raw = lipi_malloc(total * sizeof(float) + 64);
    if (!m->block_raw) {
        st = LIPI_ENOMEM;
        goto done;
    }
    m->block = (float *)(((uintptr_t)m->block_raw + 63) & ~(uintptr_t)63);
    m->block_floats = total;
    if (qtotal) {
        m->qblock_raw = lipi_malloc(qtotal + 64);
        if (!m->qblock_raw) {
            st = LIPI_ENOMEM;
            goto done;
        }
        m->qblock = (int8_t *)(((uintptr_t)m->qblock_raw + 63) & ~(uintptr_t)63);
    }
    for (size_t i = 0; i < L.n_regions; i++) {
        region *r = &L.regions[i];
        if (r->q) {
            r->q->w = m->qblock + r->qoffset;
            r->q->scale = m->block + r->offset;
            r->q->wsum = (int32_t *)(m->block + r->offset + r->rows);
        } else {
            *r->dst = m->block + r->offset;
            if (!r->bound) /* absent biases; tables filled below */
                memset(*r->dst, 0, r->floats * sizeof(float));
        }
    }
    for (size_t i = 0; i < L.n_binds; i++) {
        const binding *b = &L.binds[i];
        const region *r = &L.regions[b->region];
        if (!r->q) {
            lipi_st_to_f32(b->t, *r->dst + b->off);
        } else {
            if (b->t->nelem > tmp_cap) {
                lipi_free(tmp);
                tmp_cap = 0;
                tmp = lipi_malloc(b->t->nelem * sizeof(float));
                if (!tmp) {
                    st = LIPI_ENOMEM;
                    goto done;
                }
                tmp_cap = b->t->nelem;
            }
            lipi_st_to_f32(b->t, tmp);
            size_t row0 = b->off / r->cols;
            quantize_rows(tmp, b->shape[0], r->cols, r->q->w + row0 * r->cols,
                          r->q->scale + row0, r->q->wsum + row0);
        }
        lipi_st_release(sf, b->t);
    }
    if (c->arch == LIPI_ARCH_MPNET)
        fill_pos_bias(m);
    if (c->pos_kind == LIPI_POS_SINUSOIDAL)
        lipi_sinusoidal_positions(m->pos_emb, c->max_pos, c->embed);
    if (c->pos_kind == LIPI_POS_ALIBI)
        fill_alibi(m);
    if (c->pos_kind == LIPI_POS_ROPE) {
        /* GTE: one table (every layer global), NTK-scaled when the config
         * says so. */
        size_t D = c->hidden / c->heads;
        for (size_t k = 0; k < (c->arch == LIPI_ARCH_GTE ? 1u : 2u); k++)
            lipi_rope_table_ntk(m->rope + k * c->max_pos * D, c->max_pos, D, c->rope_theta[k],
                                c->rope_ntk > 1 ? c->rope_ntk : 1.0);
    }
    if (c->arch == LIPI_ARCH_GTE)
        gte_swap_halves(m);
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, path, 0, 0, "out of memory");
    lipi_free(L.regions);
    lipi_free(L.binds);
    lipi_free(tmp);
    lipi_st_close(sf);
    return st;
}

/* Weights of the sentence-transformers Dense modules: <path>/model.safetensors
 * (or pytorch_model.bin, as older releases ship them) with linear.weight
 * (out, in) and linear.bias (out). */
static lipi_status load_dense(lipi_model *m, const char *dir, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_safetensors *sf = NULL;
    lipi_config *c = &m->cfg;
    size_t k = 0;
    for (unsigned b = c->pooling & 15u; b; b &= b - 1)
        k++;
    size_t want = k * c->hidden;
    char path[4096];
    for (size_t i = 0; i < c->n_dense; i++) {
        lipi_dense *d = &c->dense[i];
        if (d->in != want) {
            st = lipi_error_set(err, LIPI_EFORMAT, dir, 0, 0,
                                "%s/config.json: in_features %zu, expected %zu (%s)", d->path,
                                d->in, want, i ? "the previous Dense module's out_features"
                                               : "the pooled embedding size");
            goto done;
        }
        want = d->out;
        char sub[4096];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, d->path) >= sizeof sub) {
            st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
            goto done;
        }
        TRY(lipi_weights_open(sub, &sf, path, sizeof path, err));
        const char *names[2] = {"linear.weight", "linear.bias"};
        float **dst[2] = {&d->w, &d->b};
        size_t rows[2] = {d->out, d->out}, cols[2] = {d->in, 0};
        for (size_t t = 0; t < (d->bias ? 2u : 1u); t++) {
            const lipi_st_tensor *ten = lipi_st_find(sf, names[t]);
            bool ok = ten && ten->dtype != LIPI_ST_OTHER && ten->ndim == (cols[t] ? 2u : 1u) &&
                      ten->shape[0] == rows[t] && (!cols[t] || ten->shape[1] == cols[t]);
            if (!ok) {
                char want[64];
                size_t shape[2] = {rows[t], cols[t]};
                fmt_shape(want, sizeof want, shape, cols[t] ? 2 : 1);
                st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                    "expected tensor \"%s\" of shape %s (F32, F16 or BF16)",
                                    names[t], want);
                goto done;
            }
            *dst[t] = lipi_malloc(ten->nelem * sizeof(float));
            if (!*dst[t]) {
                st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
                goto done;
            }
            lipi_st_to_f32(ten, *dst[t]);
        }
        lipi_st_close(sf);
        sf = NULL;
    }
done:
    lipi_st_close(sf);
    return st;
}

/* One bge-m3 head: dir/file, a torch state dict of weight (rows, C) and
 * bias (rows); rows == 0 takes any number (colbert_linear). */
static lipi_status load_m3_head(const char *dir, const char *file, size_t C, size_t rows,
                                float **w, float **b, size_t *out_rows, lipi_error *err)
{
    char path[4096];
    lipi_safetensors *sf = NULL;
    lipi_status st = LIPI_OK;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
    if (access(path, F_OK) != 0)
        return LIPI_OK;
    TRY(lipi_torch_open(path, &sf, err));
    const lipi_st_tensor *tw = lipi_st_find(sf, "weight"), *tb = lipi_st_find(sf, "bias");
    size_t r = tw && tw->ndim == 2 ? tw->shape[0] : 0;
    if (!tw || !tb || tw->dtype == LIPI_ST_OTHER || tb->dtype == LIPI_ST_OTHER ||
        tw->ndim != 2 || tw->shape[1] != C || !r || (rows && r != rows) || tb->ndim != 1 ||
        tb->shape[0] != r) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "expected a linear layer's state dict: \"weight\" (%s, %zu) and "
                            "\"bias\" (%s), F32, F16 or BF16",
                            rows ? "1" : "D", C, rows ? "1" : "D");
        goto done;
    }
    if (!(*w = lipi_malloc(tw->nelem * sizeof(float))) ||
        !(*b = lipi_malloc(tb->nelem * sizeof(float)))) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    lipi_st_to_f32(tw, *w);
    lipi_st_to_f32(tb, *b);
    *out_rows = r;
done:
    lipi_st_close(sf);
    return st;
}

lipi_status lipi_m3_heads_load(lipi_model *m, const char *dir, lipi_error *err)
{
    size_t one = 0;
    lipi_status st = load_m3_head(dir, "sparse_linear.pt", m->cfg.hidden, 1, &m->sparse_w,
                                  &m->sparse_b, &one, err);
    if (st == LIPI_OK)
        st = load_m3_head(dir, "colbert_linear.pt", m->cfg.hidden, 0, &m->colbert_w,
                          &m->colbert_b, &m->colbert_dim, err);
    return st;
}

lipi_status lipi_model_load(const char *dir, const lipi_model_load_options *opt,
                            lipi_model **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *text = NULL;
    size_t len = 0;
    char path[4096];
    json_t *modules = NULL; /* modules.json, read once for both uses */
    lipi_model *m = lipi_calloc(1, sizeof *m);
    *out = NULL;
    if (!m) {
        st = lipi_error_set(err, LIPI_ENOMEM, dir, 0, 0, "out of memory");
        goto done;
    }
    if (opt && opt->dtype != LIPI_DTYPE_F32 && opt->dtype != LIPI_DTYPE_INT8) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "dtype option: expected LIPI_DTYPE_F32 or LIPI_DTYPE_INT8");
        goto done;
    }
    m->int8 = opt && opt->dtype == LIPI_DTYPE_INT8;
    /* A sentence-transformers folder may keep the transformer in a subfolder. */
    char sub[LIPI_SUBPATH_MAX], tdir[4096];
    TRY(lipi_config_load_modules(dir, &modules, err));
    lipi_config_st_transformer(modules, sub);
    if ((size_t)snprintf(tdir, sizeof tdir, "%s%s%s", dir, *sub ? "/" : "", sub) >=
            sizeof tdir ||
        (size_t)snprintf(path, sizeof path, "%s/config.json", tdir) >= sizeof path) {
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0, "path too long");
        goto done;
    }
    TRY(lipi_read_file(path, LIPI_JSON_MAX, &text, &len, err));
    TRY(lipi_config_parse(text, len, path, &m->cfg, err));
    TRY(lipi_config_read_st(dir, modules, sub, &m->cfg, err));
    TRY(load_weights(m, tdir, err));
    TRY(load_dense(m, dir, err));
    TRY(lipi_m3_heads_load(m, dir, err));
    fill_info(m);
done:
    lipi_config_modules_free(modules);
    lipi_free(text);
    if (st != LIPI_OK) {
        lipi_model_free(m);
        return st;
    }
    *out = m;
    return LIPI_OK;
}

void lipi_model_free(lipi_model *m)
{
    if (!m)
        return;
    lipi_config_free(&m->cfg);
    lipi_free(m->block_raw);
    lipi_free(m->qblock_raw);
    lipi_free(m->unique);
    lipi_free(m->exec);
    lipi_free(m->sparse_w);
    lipi_free(m->sparse_b);
    lipi_free(m->colbert_w);
    lipi_free(m->colbert_b);
    lipi_free(m);
}

const lipi_model_info *lipi_model_get_info(const lipi_model *m)
{
    return &m->info;
}

size_t lipi_model_embed_dim(const lipi_model *m, unsigned pooling)
{
    unsigned f = pooling ? pooling : m->cfg.pooling;
    size_t k = 0;
    for (unsigned b = f & 15u; b; b &= b - 1)
        k++;
    const lipi_config *c = &m->cfg;
    if (c->n_dense && c->dense[0].in == k * c->hidden)
        return c->dense[c->n_dense - 1].out;
    return k * c->hidden;
}

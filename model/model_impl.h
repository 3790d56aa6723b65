/* Internal interfaces between the model's files; never included by a
 * public header. Shape comments use T = tokens of a batch, C = hidden size,
 * E = embedding size (ALBERT), I = FFN size, L = one sequence's length,
 * D = head size. All matrices are row-major float32. */
#ifndef LIPI_MODEL_IMPL_H
#define LIPI_MODEL_IMPL_H

#include "model/model.h"
#include "tokenizer/base.h"

/* The hot kernels of gemm.c and forward.c: one copy per x86-64 level,
 * picked at load time, at -O3 with contracted multiply-adds. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LIPI_CLONES                                                                        \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),           \
                   optimize("O3", "fp-contract=fast")))
#else
#define LIPI_CLONES
#endif

/* ======================================================================== */
/* safetensors.c                                                             */
/* ======================================================================== */

typedef enum { LIPI_ST_F32, LIPI_ST_F16, LIPI_ST_BF16, LIPI_ST_OTHER } lipi_st_dtype;

#define LIPI_ST_MAX_DIMS 8
#define LIPI_ST_MAX_HEADER ((size_t)100 * 1000 * 1000)

typedef struct {
    char *name;
    lipi_st_dtype dtype;
    char dtype_name[12];
    size_t ndim;
    size_t shape[LIPI_ST_MAX_DIMS];
    size_t nelem;
    size_t begin, end;         /* byte range inside the data area */
    const unsigned char *data; /* borrowed from the mapping (or a heap buffer) */
    bool heap;                 /* data is not in a file mapping of the set's own
                                  (an inflated torch storage, a caller's
                                  buffer): its pages must not be dropped */
    UT_hash_handle hh;
} lipi_st_tensor;

/* A set of named tensors: one safetensors file, one pytorch_model.bin
 * (torchbin.c), or the shards of a sharded checkpoint (parts). */
typedef struct lipi_safetensors {
    char *path;
    unsigned char *map;
    size_t map_len;
    lipi_st_tensor *tensors; /* n entries */
    size_t n;
    lipi_st_tensor *index;   /* by name */
    void **heap;             /* n_heap owned buffers (inflated zip entries) */
    size_t n_heap;
    struct lipi_safetensors **parts; /* sharded: n_parts shards, searched in order */
    size_t n_parts;
} lipi_safetensors;

/* Maps regular file `path` read-only and privately: *map (NULL for an
 * empty file) and *len; the caller munmaps it. LIPI_EIO naming the file. */
lipi_status lipi_map_file(const char *path, unsigned char **map, size_t *len, lipi_error *err);
/* Maps `path` and validates the whole header (see safetensors.c) before
 * returning. *out is owned (lipi_st_close). */
lipi_status lipi_st_open(const char *path, lipi_safetensors **out, lipi_error *err);
/* The tensor called `name`, in the set or any of its parts; NULL if absent. */
const lipi_st_tensor *lipi_st_find(const lipi_safetensors *st, const char *name);
/* Converts the tensor's elements (F32, F16 or BF16) to float32: dst has
 * t->nelem entries. */
void lipi_st_to_f32(const lipi_st_tensor *t, float *dst);
/* Tells the kernel the tensor's pages will not be read again. */
void lipi_st_release(const lipi_safetensors *st, const lipi_st_tensor *t);
void lipi_st_close(lipi_safetensors *st);

float lipi_f16_to_f32(uint16_t h);
float lipi_bf16_to_f32(uint16_t h);

/* ======================================================================== */
/* torchbin.c: PyTorch checkpoints without executing them                    */
/* ======================================================================== */

/* Largest data.pkl read (the pickle of a state dict is ~100 bytes a tensor). */
#define LIPI_TORCH_MAX_PICKLE ((size_t)64 << 20)

/* Reads a torch.save zip checkpoint (pytorch_model.bin, *.pt) as a tensor
 * set, without running its pickle: see torchbin.c for the opcodes and
 * globals accepted. Every tensor must be a contiguous view inside its
 * storage. *out is owned (lipi_st_close). LIPI_EIO (cannot open / map),
 * LIPI_EFORMAT naming the file, the zip entry or the pickle byte offset and
 * the opcode or global refused (the legacy pre-1.6 format too), LIPI_ENOMEM. */
lipi_status lipi_torch_open(const char *path, lipi_safetensors **out, lipi_error *err);
/* The same on a checkpoint already in memory (len bytes at p, borrowed: it
 * must outlive *out); `path` only names it in errors. */
lipi_status lipi_torch_open_mem(const unsigned char *p, size_t len, const char *path,
                                lipi_safetensors **out, lipi_error *err);

/* The weights of model folder dir, the first of these that exists:
 * model.safetensors, model.safetensors.index.json (shards),
 * pytorch_model.bin, pytorch_model.bin.index.json (shards). *out is owned
 * (lipi_st_close); `used` (cap bytes) gets the path of the file opened, for
 * error messages. LIPI_EIO when none exists (the message lists them), else
 * the errors of the readers; a shard index naming a file outside the folder
 * or a tensor its shard lacks is LIPI_EFORMAT. */
lipi_status lipi_weights_open(const char *dir, lipi_safetensors **out, char *used, size_t cap,
                              lipi_error *err);

/* Writes the tensors of st to `path` as a safetensors file ({"format":"pt"}
 * metadata, tensors sorted by name, each in its own dtype), atomically
 * (lipi_atomic_open / commit). LIPI_EIO when it cannot be written. */
lipi_status lipi_st_write(const lipi_safetensors *st, const char *path, lipi_error *err);

/* ======================================================================== */
/* config.c                                                                  */
/* ======================================================================== */

typedef enum {
    LIPI_ARCH_BERT,
    LIPI_ARCH_ROBERTA,
    LIPI_ARCH_ALBERT,
    LIPI_ARCH_DISTILBERT,
    LIPI_ARCH_MPNET,
    LIPI_ARCH_MODERNBERT,
    LIPI_ARCH_NOMIC,
    LIPI_ARCH_GTE, /* model_type "new": Alibaba-NLP's NewModel (gte-multilingual-base) */
} lipi_arch;

/* MPNet's relative position buckets: MPNetEncoder.compute_position_bias
 * calls relative_position_bucket with its defaults, num_buckets 32 and
 * max_distance 128, whatever the config says. */
#define LIPI_MPNET_BUCKETS 32
#define LIPI_MPNET_MAX_DISTANCE 128

typedef enum { LIPI_ACT_GELU, LIPI_ACT_GELU_TANH, LIPI_ACT_RELU, LIPI_ACT_SILU } lipi_act;

typedef enum {
    LIPI_POS_ABSOLUTE,   /* a learned (P, E) table in the checkpoint */
    LIPI_POS_SINUSOIDAL, /* the fixed table of Vaswani et al., computed at load */
    LIPI_POS_ALIBI,      /* no table: attention adds -slope[h] * |j - i| (Jina v2) */
    LIPI_POS_ROPE,       /* rotary: q and k of each head turned by position (ModernBERT) */
} lipi_pos_kind;

/* ModernBERT's per-layer kinds (lipi_config.layer_kind): a local layer sees
 * only keys within the window; the rotary table is the local theta's. */
enum { LIPI_LAYER_LOCAL_WINDOW = 1, LIPI_LAYER_LOCAL_ROPE = 2 };

/* Longest module folder name inside a sentence-transformers folder. */
#define LIPI_SUBPATH_MAX 256

/* A sentence-transformers Dense module: y = act(W x + b) after pooling. */
#define LIPI_MAX_DENSE 4
typedef struct {
    char path[LIPI_SUBPATH_MAX]; /* folder, relative to the model folder */
    size_t in, out;
    bool bias, tanh;      /* activation: Tanh or Identity */
    float *w, *b;         /* (out, in), (out); owned */
} lipi_dense;

typedef struct {
    lipi_arch arch;
    char model_type[32];
    size_t vocab, hidden, layers, heads, inter, max_pos, type_vocab;
    size_t embed;                 /* E: ALBERT's embedding_size, else hidden */
    size_t groups, inner_groups;  /* ALBERT layer sharing, else layers and 1 */
    float ln_eps;
    lipi_act act;
    uint32_t pad_id;
    size_t pos_offset;            /* RoBERTa, MPNet: padding_idx + 1, else 0 */
    uint32_t pos_pad;             /* RoBERTa, MPNet: padding_idx of the positions */
    size_t rel_buckets;           /* MPNet: rows of relative_attention_bias, else 0 */
    lipi_pos_kind pos_kind;       /* position_embedding_type (BERT) */
    bool glu;                     /* feed_forward_type geglu / reglu (Jina v2): the FFN is
                                     act(x W1[:I]) * (x W1[I:]) with act; act is gelu / relu */
    /* ModernBERT: LayerNorm before each sublayer (none before layer 0's
     * attention) and a final one; biases only where the config says. */
    bool pre_norm;
    bool norm_bias, attn_bias, mlp_bias, mlp_out_bias; /* mlp_bias: the FFN's first
                                                           matrix, mlp_out_bias: its second */
    double rope_theta[2];         /* RoPE bases: [0] global layers, [1] local */
    double rope_ntk;              /* GTE's fixed NTK scaling factor (rope_scaling
                                     {type ntk}); 0: none */
    size_t window;                /* local layers see keys |j - i| <= window */
    uint8_t *layer_kind;          /* (layers) LIPI_LAYER_* flags, owned; NULL: all global */
    bool classifier;              /* *ForSequenceClassification */
    bool multi_label;
    size_t num_labels;
    char **labels;
    /* sentence-transformers */
    unsigned pooling;
    bool normalize;
    lipi_dense dense[LIPI_MAX_DENSE];
    size_t n_dense;
    size_t max_seq_len;           /* 0: not given */
} lipi_config;

/* Parses config.json text (`path` only names it in errors). */
lipi_status lipi_config_parse(const char *json, size_t len, const char *path,
                              lipi_config *cfg, lipi_error *err);
typedef struct json_t json_t;
/* Parses dir/modules.json into *modules (owned: lipi_config_modules_free;
 * NULL when the folder has none, as a plain transformers folder) and checks
 * every entry's "type" and "path". lipi_model_load reads it once and hands
 * it to the two functions below. Errors of lipi_read_file and the JSON
 * parser, LIPI_EFORMAT for a bad entry (err->path modules.json). */
lipi_status lipi_config_load_modules(const char *dir, json_t **modules, lipi_error *err);
void lipi_config_modules_free(json_t *modules); /* NULL: no-op */
/* The folder of the Transformer module in `modules`, relative to the model
 * folder ("" when it is the folder itself or modules is NULL). */
void lipi_config_st_transformer(const json_t *modules, char sub[LIPI_SUBPATH_MAX]);
/* Reads the pooling / Dense / normalize / sentence_bert settings of the
 * sentence-transformers folder dir, whose parsed modules.json is `modules`,
 * into cfg; no-op when modules is NULL. `sub` is the Transformer's folder. */
lipi_status lipi_config_read_st(const char *dir, const json_t *modules, const char *sub,
                                lipi_config *cfg, lipi_error *err);
void lipi_config_free(lipi_config *cfg);

/* json_loadb that tells allocation failures (LIPI_ENOMEM, also when
 * jansson hid one) from syntax errors (LIPI_EFORMAT with the byte offset
 * base + position). */
lipi_status lipi_json_load(const char *text, size_t len, size_t flags, const char *path,
                           size_t base, json_t **out, lipi_error *err);

/* Largest config.json / modules.json lipi reads (lipi_read_file limit). */
#define LIPI_JSON_MAX ((size_t)64 << 20)

/* ======================================================================== */
/* model.c: weights                                                          */
/* ======================================================================== */

/* pe: (P, E) <- the sinusoidal encoding of Vaswani et al. (2017), as
 * transformers' create_sinusoidal_embeddings (modeling_distilbert.py,
 * modeling_xlm.py) computes it: angle = pos / 10000^(2 * (j / 2) / E) in
 * double, pe[pos][j] = (float)sin(angle) for even j, (float)cos(angle) for
 * odd j (an odd E ends on a sine column). */
void lipi_sinusoidal_positions(float *pe, size_t P, size_t E);
/* slopes: (H) <- ALiBi's head slopes (Press et al.), as jina-bert's
 * _get_alibi_head_slopes computes them in double (then float32, as
 * torch.Tensor): for H a power of two, s_h = 2^(-8 (h + 1) / H); otherwise
 * those of the power of two below H, then every other slope of twice that
 * power. */
void lipi_alibi_slopes(float *slopes, size_t H);
/* rope: (P, D) <- cos (P, D/2) then sin (P, D/2) of pos * inv_freq[i],
 * inv_freq[i] = 1 / theta^(2i / D), in float32 as ModernBertRotaryEmbedding
 * computes them (the angle rounded to float, then cos and sin of it). */
void lipi_rope_table(float *rope, size_t P, size_t D, double theta);
/* The same with GTE's NTKScalingRotaryEmbedding (no mixed_b) of factor
 * f >= 1: inv_freq[i] = 1 / (theta f)^(2i / D) / f^(2 / D), in float32 as
 * modeling.py computes it (the divisor a double, then float). f = 1 gives
 * lipi_rope_table's table bit for bit. */
void lipi_rope_table_ntk(float *rope, size_t P, size_t D, double theta, double f);

/* An int8 linear layer (dtype int8): w (N, K) quantized per output row,
 * w_f32[n][k] ~= scale[n] * w[n][k]. */
typedef struct {
    int8_t *w;      /* (N, K) */
    float *scale;   /* (N) */
    int32_t *wsum;  /* (N): -128 * sum_k w[n][k], the offset of u8 activations */
} lipi_qlinear;

typedef struct {
    lipi_qlinear qkv_q, ao_q, ff1_q, ff2_q; /* int8 mode: the matrices below are NULL */
    float *qkv_w;  /* (3C, C): query, key, value rows stacked */
    float *qkv_b;  /* (3C) */
    float *ao_w;   /* (C, C) attention output */
    float *ao_b;
    float *ln1_w, *ln1_b; /* (C); pre-norm: before attention, NULL in layer 0 */
    float *ff1_w;  /* (I, C) */
    float *ff1_b;
    float *ff2_w;  /* (C, I) */
    float *ff2_b;
    float *ln2_w, *ln2_b; /* pre-norm: before the FFN */
} lipi_layer_w;

typedef enum {
    LIPI_HEAD_NONE,
    LIPI_HEAD_POOLER,     /* BERT, ALBERT: pooler dense+tanh, classifier */
    LIPI_HEAD_ROBERTA,    /* classifier.dense + tanh, classifier.out_proj */
    LIPI_HEAD_DISTILBERT, /* pre_classifier + relu, classifier */
} lipi_head_kind;

struct lipi_model {
    lipi_config cfg;
    lipi_model_info info;
    float *block;         /* every weight, one allocation (64-byte aligned) */
    void *block_raw;
    size_t block_floats;
    int8_t *qblock;       /* int8 mode: the quantized matrices */
    void *qblock_raw;
    bool int8;
    float *word_emb;      /* (V, E) */
    float *pos_emb;       /* (P, E), computed at load when sinusoidal; NULL for ALiBi */
    float *type_emb;      /* (TV, E) or NULL */
    float *emb_ln_w, *emb_ln_b; /* (E) */
    float *proj_w;        /* (C, E) ALBERT only */
    float *proj_b;
    float *rel_bias;      /* (NB, H) MPNet's relative_attention_bias, else NULL */
    float *rope;          /* RoPE: 2 tables (global, local) of (P, D): cos (P, D/2)
                             then sin (P, D/2) of position p, frequency i */
    float *final_ln_w, *final_ln_b; /* (C) ModernBERT's final_norm */
    float *pos_bias;      /* (H, 2P - 1) MPNet: rel_bias of head h for key - query
                             position r at [h][r + P - 1], P = longest sequence;
                             ALiBi: -slope[h] * |r| there */
    lipi_layer_w *unique; /* stored layers */
    size_t n_unique;
    const lipi_layer_w **exec; /* layers in the order they run */
    size_t n_exec;
    lipi_head_kind head;
    float *head1_w, *head1_b; /* (C, C) pooler / dense / pre_classifier */
    float *head2_w, *head2_b; /* (labels, C) classifier / out_proj */
    /* bge-m3 (FlagEmbedding) heads from sparse_linear.pt / colbert_linear.pt
     * beside the weights; NULL when absent. Owned. */
    float *sparse_w, *sparse_b;   /* (C), (1) */
    float *colbert_w, *colbert_b; /* (D, C), (D) */
    size_t colbert_dim;           /* D, 0 without */
};

/* ======================================================================== */
/* gemm.c (the float GEMMs are public: model/model.h)                       */
/* ======================================================================== */

void lipi_sgemm_nt_ref(size_t M, size_t N, size_t K, const float *a, size_t lda,
                       const float *b, size_t ldb, float *c, size_t ldc);
void lipi_sgemm_nn_ref(size_t M, size_t N, size_t K, const float *a, size_t lda,
                       const float *b, size_t ldb, float *c, size_t ldc);

/* c (M, N) = (a (M, K) - 128) . b (N, K)^T exactly in int32, computed as
 * a . b^T + co[n] with co[n] = -128 * sum_k b[n][k] (a is u8: int8
 * activations shifted by 128, b is s8). oneDNN's u8s8s32 GEMM when the CPU
 * has VNNI (VPDPBUSD: no intermediate saturation), else lipi's own kernel
 * (compiled for VNNI too, and picked by cpuid). */
void lipi_igemm_nt(lipi_gemm_kind k, size_t M, size_t N, size_t K, const uint8_t *a,
                   size_t lda, const int8_t *b, size_t ldb, const int32_t *co, int32_t *c,
                   size_t ldc);
void lipi_igemm_nt_ref(size_t M, size_t N, size_t K, const uint8_t *a, size_t lda,
                       const int8_t *b, size_t ldb, const int32_t *co, int32_t *c, size_t ldc);
/* Whether lipi_igemm_nt runs on VNNI for this backend. */
bool lipi_igemm_vnni(lipi_gemm_kind k);


/* ======================================================================== */
/* forward.c: kernels and the session                                        */
/* ======================================================================== */

/* x: (T, C) in place: x = (x - mean) / sqrt(var + eps) * w + b per row */
void lipi_layernorm(float *x, size_t T, size_t C, const float *w, const float *b, float eps);
void lipi_layernorm_ref(float *x, size_t T, size_t C, const float *w, const float *b,
                        float eps);
/* x: (L) in place: softmax(x * scale) */
void lipi_softmax(float *x, size_t L, float scale);
void lipi_softmax_ref(float *x, size_t L, float scale);
/* MPNet's relative_position_bucket (bidirectional, 32 buckets, max
 * distance 128) of rel = key position - query position: 0..7 for the exact
 * distances the query looks back, 8..15 log-spaced beyond, 16..31 the same
 * looking forward. */
size_t lipi_mpnet_bucket(long rel);
/* x: (L, L) scores of one head, in place:
 * x[i][j] = x[i][j] * scale + rb[j - i]; rb[-(L-1)] .. rb[L-1] readable */
void lipi_attn_rel_bias(float *x, size_t L, float scale, const float *rb);
/* The same, bucketing every (i, j) into table: (NB, H), column h */
void lipi_attn_rel_bias_ref(float *x, size_t L, float scale, const float *table, size_t H,
                            size_t h);
/* x: (H, D) one token's q or k heads (row stride ld between heads = D),
 * in place: rotate_half RoPE with cos, sin: (D/2) of its position:
 * x[i] = x[i] c[i] - x[i + D/2] s[i], x[i + D/2] = x[i + D/2] c[i] + x[i] s[i] */
void lipi_rope(float *x, size_t H, size_t D, const float *cos, const float *sin);
/* Attention of one head over one sequence of L tokens: out = softmax(q k^T
 * * scale + rb) v. q, k, v: (L, D) with row stride ld; rb: NULL or a
 * relative bias read at rb[j - i] for j - i in -(L-1) .. L-1 (MPNet, ALiBi);
 * window: key j is seen by query i only when |j - i| <= window (SIZE_MAX:
 * all keys). out: (L, D) with row stride ldo.
 *
 * _plain materializes the scores: S is (L, L) scratch. _tiled computes
 * query rows i0 .. i0 + nq - 1 (nq <= LIPI_ATT_TQ) over key tiles of
 * LIPI_ATT_TK with a running max and sum per row (the online softmax of
 * FlashAttention), skipping tiles outside the window: its scratch `work` is
 * LIPI_ATT_WORK(D) floats whatever L is. The two agree to float rounding
 * (the order of the sums differs). */
#define LIPI_ATT_TQ 64
#define LIPI_ATT_TK 256
#define LIPI_ATT_WORK(D) ((size_t)LIPI_ATT_TQ * LIPI_ATT_TK + 2 * (size_t)LIPI_ATT_TQ * (D) + \
                          3 * (size_t)LIPI_ATT_TQ)
void lipi_attention_plain(lipi_gemm_kind g, size_t L, size_t D, const float *q, const float *k,
                          const float *v, size_t ld, float scale, const float *rb,
                          size_t window, float *S, float *out, size_t ldo);
void lipi_attention_tiled(lipi_gemm_kind g, size_t L, size_t D, size_t i0, size_t nq,
                          const float *q, const float *k, const float *v, size_t ld,
                          float scale, const float *rb, size_t window, float *work, float *out,
                          size_t ldo);
/* Which attention a session runs: AUTO picks per sequence (tiled beyond
 * LIPI_ATT_PLAIN_MAX tokens, or when a local window skips tiles); the
 * others force one (tests compare them). */
typedef enum { LIPI_ATTN_AUTO, LIPI_ATTN_PLAIN, LIPI_ATTN_TILED } lipi_attn_kind;
#define LIPI_ATT_PLAIN_MAX 1024
void lipi_model_session_set_attention(lipi_model_session *s, lipi_attn_kind k);

/* x: (T, 2I) -> out: (T, I) = act(x[:, :I]) * x[:, I:] (GEGLU, ReGLU,
 * SwiGLU: act gelu, gelu_tanh, relu or silu) */
void lipi_glu(const float *x, size_t T, size_t I, int act, float *out);
void lipi_glu_ref(const float *x, size_t T, size_t I, int act, float *out);
/* x: (T, N) in place: act(x + bias) (+ residual (T, N) when not NULL) */
void lipi_bias_act(float *x, size_t T, size_t N, size_t ldx, const float *bias, int act,
                   const float *res, size_t ldr);
void lipi_bias_act_ref(float *x, size_t T, size_t N, size_t ldx, const float *bias, int act,
                       const float *res, size_t ldr);
#define LIPI_ACT_NONE (-1)
/* x: (K) -> q: (K) u8 = round(x / scale) + 128, scale = max |x| / 127 */
void lipi_quantize_row(const float *x, size_t K, uint8_t *q, float *scale);
/* acc: (M, N) int32 -> out: (M, N) with row stride ldo:
 * act(acc * as[m] * ws[n] + bias[n]) (+ res (M, N) with row stride ldr) */
void lipi_dequantize(const int32_t *acc, size_t M, size_t N, const float *as, const float *ws,
                     const float *bias, int act, const float *res, size_t ldr, float *out,
                     size_t ldo);

/* out: (M, N) = act(a (M, K) . w (N, K)^T + bias) (+ res (M, N)), tiled over
 * the session's threads exactly as the forward pass does (benchmarks; the
 * session's model is not used and may be NULL). */
void lipi_session_linear(lipi_model_session *s, size_t M, size_t N, size_t K, const float *a,
                         const float *w, const float *bias, int act, const float *res,
                         float *out);

/* Batches of short sequences (none longer than 384 tokens, two or more of
 * them) run group by group of whole sequences, one task per group on a
 * one-thread lane session, the groups planned from the shape only (about
 * 384 tokens each, an even number of groups). set_grouping(s, false) runs
 * every batch whole, layer by layer over tiles (tests compare the two);
 * last_groups says how many groups the last batch ran in (0: whole). */
void lipi_model_session_set_grouping(lipi_model_session *s, bool on);
size_t lipi_model_session_last_groups(const lipi_model_session *s);

/* Forces a GEMM backend for one session (tests compare backends). */
void lipi_model_session_set_gemm(lipi_model_session *s, lipi_gemm_kind k);

/* ======================================================================== */
/* pool.c                                                                    */
/* ======================================================================== */

/* hidden: (T, C) packed sequences with offsets off[0..n] -> out: (n, C * k)
 * for the k pooling flags set */
void lipi_pool(const float *hidden, const size_t *off, size_t n, size_t C, unsigned flags,
               float *out);
/* x: (n, in) -> y: (n, out) = act(x W^T + b) for one Dense module */
void lipi_dense_apply(const lipi_dense *d, const float *x, size_t n, float *y);
/* hidden: (T, C) -> w: (T) = relu(hidden . sw + sb), bge-m3's token weights */
void lipi_token_weights(const float *hidden, size_t T, size_t C, const float *sw, float sb,
                        float *w);
/* Loads bge-m3's sparse_linear.pt / colbert_linear.pt from dir when present
 * (torch state dicts: weight (1, C) / (D, C), bias (1) / (D)). */
lipi_status lipi_m3_heads_load(lipi_model *m, const char *dir, lipi_error *err);
/* Classifier head on the first token of each sequence: logits (n, labels);
 * z: (C) scratch */
void lipi_head_logits(const lipi_model *m, const float *hidden, const size_t *off, size_t n,
                      float *z, float *logits);

#endif

/* Internal: what the readers of other formats share (read_build.c).
 * Never included by a public header.
 *
 * Every reader works the same way: it parses its format into token strings
 * (plus scores or merges), builds the other parts of the tokenizer as the
 * Hugging Face JSON that Hugging Face's own converters write for that
 * format, and hands both to lipi_rd_assemble. The JSON goes through the
 * tokenizer.json loader, so a read tokenizer is exactly the tokenizer that
 * loading the converted tokenizer.json would give, and saving it writes
 * that file. Only the model (the bulk: up to 200k tokens and merges) is
 * built directly, because going through JSON text would cost most of the
 * load time. */
#ifndef LIPI_READ_IMPL_H
#define LIPI_READ_IMPL_H

#include "tokenizer/base_json.h"
#include "tokenizer/tokenizer_layout.h"

/* Largest file a reader takes whole into memory (vocabularies, .model,
 * .tiktoken). GGUF files are mapped, not read, and have no such limit. */
#define LIPI_READ_MAX ((size_t)1 << 30)

/* ------------------------------------------------------------------------ */
/* The GPT-2 byte alphabet                                                   */
/* ------------------------------------------------------------------------ */

/* GPT-2's bytes_to_unicode: byte b stands for a code point whose UTF-8
 * form is utf8[b][0 .. len[b]). Printable Latin-1 bytes stand for
 * themselves; the other 68 take U+0100.. in byte order ("Ġ" is the space). */
typedef struct {
    char utf8[256][2];
    uint8_t len[256];
} lipi_rd_bytemap;

void lipi_rd_bytemap_init(lipi_rd_bytemap *m);

/* Appends the byte-alphabet form of s[0..n) to out. */
lipi_status lipi_rd_bytes_to_alphabet(const lipi_rd_bytemap *m, const uint8_t *s, size_t n,
                                      lipi_buf *out);


/* ------------------------------------------------------------------------ */
/* Assembling a tokenizer                                                    */
/* ------------------------------------------------------------------------ */

/* A model as arrays the caller owns (nothing is stolen). tok[i] is the token
 * of id i; tok[i].s == NULL leaves id i without a model token. */
typedef struct {
    lipi_model_type type;
    lipi_model_options opt;
    const lipi_strref *tok;
    size_t n;
    const double *scores;           /* Unigram: n scores */
    const uint32_t (*merges)[2];    /* BPE: n_merges pairs of ids, by rank */
    size_t n_merges;
    const char *unk_token;          /* BPE / WordPiece: NULL for none */
    size_t unk_len;
    bool prefix_null, suffix_null;  /* BPE: write the affix as null, not "" */
} lipi_rd_model;

/* Added tokens under construction (contents owned). */
typedef struct {
    lipi_added_token *a;
    size_t n, cap;
} lipi_rd_added;

/* Appends a copy of s[0..len) as an added token; LIPI_ENOMEM. */
lipi_status lipi_rd_added_push(lipi_rd_added *l, uint32_t id, const char *s, size_t len,
                               bool special, bool normalized);
void lipi_rd_added_free(lipi_rd_added *l);

/* Builds the tokenizer from `doc`, a tokenizer.json object holding the
 * "normalizer" and "pre_tokenizer" sections (either may be missing or
 * null), the post-processor and decoder (NULL: none), the model `m` and
 * the added tokens. doc, post, dec and the added tokens are stolen (freed,
 * or emptied, even on error). `name` (the file read) goes into err->path.
 * Errors: a repeated token, a merge whose parts or join are not tokens, or
 * an added token at odds with the model is LIPI_EFORMAT naming them (the
 * readers check their input first, so this means a malformed file); a bad
 * section is what its from_json function says; LIPI_ENOMEM. */
lipi_status lipi_rd_assemble(const char *name, json_t *doc, lipi_post_processor *post,
                             lipi_decoder *dec, const lipi_rd_model *m, lipi_rd_added *added,
                             lipi_tokenizer **out, lipi_error *err);

/* Whether a failed lipi_json_loadb ran out of memory. */
static inline bool lipi_rd_json_oom(const json_error_t *je)
{
    return json_error_code(je) == json_error_out_of_memory;
}

/* JSON pieces, NULL on allocation failure (or for strings that are not
 * UTF-8: callers check their text first). The json_t * arguments are
 * stolen. */
json_t *lipi_rd_type(const char *type);                 /* {"type": type} */
json_t *lipi_rd_sequence(const char *key, json_t *arr); /* {"type":"Sequence", key: arr} */
json_t *lipi_rd_replace(bool regex, const char *pattern, const char *content);
json_t *lipi_rd_split(const char *regex, const char *behavior);
json_t *lipi_rd_bytelevel(bool add_prefix_space, bool trim_offsets, bool use_regex);

/* One element of a TemplateProcessing template: a special token (by its
 * string) or an input sequence (special == NULL; seq 0 = $A, 1 = $B). */
typedef struct {
    const char *special;
    uint32_t special_id;
    int seq;
    uint32_t type_id;
} lipi_rd_piece;

/* Post-processors and decoders as Hugging Face's converters make them
 * (NULL on allocation failure):
 *   ByteLevel(add_prefix_space, no trim_offsets), TemplateProcessing from
 *   the given pieces (every special token names its id; at most two
 *   distinct ones), RobertaProcessing(trim_offsets);
 *   ByteLevel, WordPiece("##", cleanup), Metaspace("▁", scheme, split),
 *   and Sequence[Replace("▁" -> " ")?, ByteFallback, Fuse, Strip(" ", 1)?]. */
lipi_post_processor *lipi_rd_post_bytelevel(void);
lipi_post_processor *lipi_rd_post_template(const lipi_rd_piece *single, size_t n_single,
                                           const lipi_rd_piece *pair, size_t n_pair);
/* "bos:0 $A:0 eos:0", pair "... bos:1 $B:1 eos:1", leaving out a NULL token
 * (LlamaTokenizerFast's template for add_bos / add_eos). */
lipi_status lipi_rd_post_bos_eos(const lipi_strref *bos, uint32_t bos_id,
                                 const lipi_strref *eos, uint32_t eos_id,
                                 lipi_post_processor **out);
lipi_post_processor *lipi_rd_post_roberta(const char *sep, uint32_t sep_id, const char *cls,
                                          uint32_t cls_id, bool add_prefix_space);
lipi_decoder *lipi_rd_dec_bytelevel(void);
lipi_decoder *lipi_rd_dec_wordpiece(void);
lipi_decoder *lipi_rd_dec_metaspace(lipi_prepend_scheme scheme);
lipi_decoder *lipi_rd_dec_spm_bytes(bool meta_to_space, bool strip_first_space);

/* ------------------------------------------------------------------------ */
/* SentencePiece-style vocabularies (.model files and GGUF llama / t5)       */
/* ------------------------------------------------------------------------ */

/* SentencePiece piece types, as numbered in sentencepiece_model.proto (and
 * in GGUF's tokenizer.ggml.token_type). */
enum {
    LIPI_SPM_NORMAL = 1,
    LIPI_SPM_UNKNOWN = 2,
    LIPI_SPM_CONTROL = 3,
    LIPI_SPM_USER_DEFINED = 4,
    LIPI_SPM_UNUSED = 5,
    LIPI_SPM_BYTE = 6,
};

typedef struct {
    lipi_strref piece;
    float score;
    int type;
} lipi_rd_piece_spm;

/* Everything of a SentencePiece model that decides its ids. */
typedef struct {
    const lipi_rd_piece_spm *pieces;
    size_t n;
    bool bpe;                       /* false: Unigram */
    bool byte_fallback;
    int64_t unk_id, bos_id, eos_id; /* -1: none */
    const uint8_t *charsmap;        /* precompiled_charsmap, may be empty */
    size_t charsmap_len;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    bool treat_whitespace_as_suffix;
    bool add_bos, add_eos;          /* post-processor (GGUF metadata) */
    bool legacy_llama;              /* GGUF llama: Hugging Face's LlamaConverter shape */
    bool longest_match;             /* apply the charsmap as SentencePiece does (a lipi
                                       extension of Precompiled), not per grapheme as
                                       Hugging Face does */
} lipi_rd_spm;

/* Builds the tokenizer that gives SentencePiece's ids for `spec` (see
 * read_spm.c for how each setting maps to Hugging Face parts). */
lipi_status lipi_rd_spm_build(const char *name, const lipi_rd_spm *spec, lipi_tokenizer **out,
                              lipi_error *err);

/* ------------------------------------------------------------------------ */
/* tiktoken                                                                  */
/* ------------------------------------------------------------------------ */

/* The published split pattern and special tokens of the encoding called
 * name[0..len) ("cl100k_base", "o200k_base", "p50k_base", "r50k_base");
 * false for other names. */
/* Appends the folders that may hold bundled data to `list`, each followed by
 * a NUL, in search order ($LIPI_DATA, the installed share/lipi, the
 * checkout's data/; see datadir.c). LIPI_ENOMEM only. */
lipi_status lipi_data_dirs(lipi_buf *list);

/* An internal flag of lipi_tokenizer_from_tiktoken, which
 * lipi_tokenizer_open passes when the table cache is on: the merges
 * recovered from the ranks are kept there (tabcache.c). */
#define LIPI_RD_TIKTOKEN_CACHE (1u << 31)

bool lipi_rd_tiktoken_builtin(const char *name, size_t len, const char **pattern,
                              const lipi_special_token **special, size_t *n_special);

/* read_gguf.c: the bytes of a GGUF file's header and metadata (everything
 * lipi_tokenizer_from_gguf reads; the tensors follow), 0 when they do not
 * parse. What a GGUF snapshot is keyed by: a model file runs to gigabytes. */
size_t lipi_rd_gguf_metadata_len(const void *data, size_t len);

/* When name[0..len) is one of those encodings, checks that data[0..data_len)
 * (the rank file read from `path`) is OpenAI's published file by its
 * SHA-256, as tiktoken does: LIPI_EFORMAT naming the file and both
 * checksums when not ("expected sha256 2239...b2a7 (OpenAI's published
 * cl100k_base), found 5e3f...; the file is truncated or modified"). LIPI_OK
 * for any other name. */
lipi_status lipi_rd_tiktoken_verify(const char *name, size_t len, const char *data,
                                    size_t data_len, const char *path, lipi_error *err);

/* ------------------------------------------------------------------------ */
/* WordPiece and byte-level BPE (vocab.txt, vocab.json + merges.txt, GGUF)    */
/* ------------------------------------------------------------------------ */

typedef struct {
    bool lowercase;
    bool strip_accents_set;      /* false: null, i.e. follow lowercase */
    bool strip_accents;
    bool tokenize_chinese_chars;
    /* Special tokens; NULL: the BERT default ("[UNK]", "[CLS]", ...). */
    const char *unk, *sep, *pad, *cls, *mask;
} lipi_rd_bert;

/* BERT WordPiece over tokens tok[0..n) (holes allowed), as Hugging Face's
 * BertConverter builds it. Special tokens missing from the vocabulary get
 * the next free ids, as Hugging Face's added tokens do. */
lipi_status lipi_rd_bert_build(const char *name, const lipi_strref *tok, size_t n,
                               const lipi_rd_bert *spec, lipi_tokenizer **out, lipi_error *err);

/* Parses a Hugging Face BERT tokenizer_config.json (text) into *spec
 * (fields present override; strings point into *keep, a JSON value the
 * caller frees with json_decref). */
lipi_status lipi_rd_bert_config(const char *text, size_t len, const char *name,
                                lipi_rd_bert *spec, json_t **keep, lipi_error *err);

#endif

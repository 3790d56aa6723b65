/* lipi encoder: text -> token ids (and back) with a loaded lipi_tokenizer,
 * giving exactly the ids, tokens and offsets of Hugging Face tokenizers.
 *
 *   lipi_encoder *enc;  lipi_session *s;  uint32_t ids[256];
 *   lipi_encoder_new(tok, &enc, &err);              (once; shared by threads)
 *   lipi_session_new(enc, &s);                      (one per thread)
 *   lipi_encoding out = {.ids = ids, .cap = 256};
 *   lipi_encode(s, text, len, NULL, &out, &err);    (out.len ids in ids[])
 *
 * An encoder is built once from a tokenizer (it precomputes the tables the
 * models need: merge table, tries, byte tables, the added-token matcher) and
 * is immutable afterwards, so any number of threads may use it at once. All
 * scratch memory (normalized text, pieces, heaps, lattices and a bounded
 * word -> ids cache) lives in a lipi_session, which one thread uses at a time.
 * The cache never changes a result: the ids of a text do not depend on what
 * the session encoded before, nor on the number of threads.
 *
 * Offsets are byte spans [start, end) into the text the caller passed (the
 * original, before normalization), the byte form of the character offsets
 * Hugging Face's Python and Node bindings give (tokens of a byte-level model
 * cover whole characters; tokens the post-processor adds get (0, 0)).
 */
#ifndef LIPI_ENCODER_H
#define LIPI_ENCODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef struct lipi_encoder lipi_encoder; /* immutable, thread-shareable */
typedef struct lipi_session lipi_session; /* per-thread scratch */

/* Builds an encoder for `tok`, which is borrowed: it must outlive the
 * encoder and must not change while the encoder exists. Fails with
 * LIPI_EINVAL when the tokenizer has no model, LIPI_ENOMEM, or the status of
 * a normalizer / pre-tokenizer failure while preparing added tokens. */
lipi_status lipi_encoder_new(const lipi_tokenizer *tok, lipi_encoder **out, lipi_error *err);
void lipi_encoder_free(lipi_encoder *e);

/* A session for one thread at a time; it holds a borrowed pointer to `e`.
 * LIPI_ENOMEM on failure (*out = NULL). */
lipi_status lipi_session_new(const lipi_encoder *e, lipi_session **out);
void lipi_session_free(lipi_session *s);

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

/* Which text of a pair loses tokens (Hugging Face TruncationStrategy). */
typedef enum {
    LIPI_TRUNCATE_LONGEST_FIRST = 0, /* the longer one, evening them out */
    LIPI_TRUNCATE_ONLY_FIRST,
    LIPI_TRUNCATE_ONLY_SECOND,
} lipi_truncate_strategy;

/* What added tokens marked special (<|endoftext|>, [CLS], <s>, ...) written
 * in the text become. Added tokens that are not special (extra vocabulary)
 * are matched under every policy. */
typedef enum {
    LIPI_SPECIAL_ALLOW = 0, /* their ids, as Hugging Face does (the default) */
    LIPI_SPECIAL_TEXT,      /* ordinary text, as tiktoken's encode_ordinary:
                               "<|endoftext|>" -> "<", "|", "endo", ... */
    LIPI_SPECIAL_ERROR,     /* refuse the text (LIPI_EINVAL naming the token
                               and its byte), as tiktoken's encode with its
                               default disallowed_special */
} lipi_special_policy;

typedef struct {
    bool add_special_tokens; /* run the post-processor's special tokens
                                ([CLS] ... [SEP], <s> ... </s>) */
    size_t max_length;       /* truncate to at most this many ids, special
                                tokens included; 0: no truncation */
    bool truncate_left;      /* drop tokens from the start instead of the end */
    lipi_truncate_strategy strategy;
    lipi_special_policy special; /* special tokens written in the text */
} lipi_encode_options;

/* Options as Hugging Face applies them by default: add_special_tokens true,
 * special tokens in the text matched (LIPI_SPECIAL_ALLOW),
 * truncation as the tokenizer.json "truncation" section says (none when
 * null). Padding is never applied, and BPE dropout is ignored (Hugging Face
 * makes it random; lipi encodes as with dropout 0). */
void lipi_encode_options_default(const lipi_encoder *e, lipi_encode_options *opt);

/* Where lipi_encode writes. Every array is the caller's and holds `cap`
 * entries; NULL arrays are not filled. */
typedef struct {
    uint32_t *ids;
    lipi_span *offsets;       /* byte spans into the original text */
    uint32_t *type_ids;       /* segment ids from the post-processor */
    uint8_t *special_mask;    /* 1 for tokens the post-processor added */
    uint8_t *sequence_ids;    /* 0 (text), 1 (pair) or 255 (added by the
                                 post-processor): which text offsets refer to */
    const char **tokens;      /* token strings, borrowed until the next call
                                 on the session (not NUL-terminated) */
    size_t *token_lens;       /* with tokens */
    size_t cap;
    size_t len;               /* out: number of tokens; when len > cap only
                                 the first cap were written */
} lipi_encoding;

/* Encodes s[0..len) (UTF-8) with the session's encoder into *out.
 * opt NULL means lipi_encode_options_default. Size query: call with
 * out->cap = 0 (arrays may then be NULL) and read out->len; calling again
 * with a bigger buffer gives the same result.
 * Fails with LIPI_EFORMAT (offset of the first bad byte in err->offset) on
 * invalid UTF-8, LIPI_EINVAL when the model needs an unknown token it does
 * not have (Hugging Face fails the same way), when the text holds a special
 * token under LIPI_SPECIAL_ERROR ("special token \"<|endoftext|>\" at byte
 * 6 ...", err->offset the byte), when max_length is smaller
 * than the special tokens or an ONLY_* strategy cannot shorten its text
 * enough, LIPI_ENOMEM, or a normalizer / pre-tokenizer error. */
lipi_status lipi_encode(lipi_session *s, const char *text, size_t len,
                        const lipi_encode_options *opt, lipi_encoding *out, lipi_error *err);

/* The same for a pair of texts (BERT's sentence A / sentence B). Offsets of
 * the pair's tokens refer to `pair`; out->sequence_ids tells them apart. */
lipi_status lipi_encode_pair(lipi_session *s, const char *text, size_t len, const char *pair,
                             size_t pair_len, const lipi_encode_options *opt,
                             lipi_encoding *out, lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Streaming the ids of a long text                                          */
/* ------------------------------------------------------------------------ */

/* Receives the next n ids of a streamed text (borrowed: valid during the
 * call). Anything but LIPI_OK stops the encoding with that status. */
typedef lipi_status (*lipi_ids_sink)(void *ctx, const uint32_t *ids, size_t n);

/* Whether lipi_encode_stream can give the ids of a text under opt (NULL:
 * the defaults): there is no truncation and the post-processor adds
 * nothing, so no id depends on the text's length. */
bool lipi_encode_can_stream(const lipi_encoder *e, const lipi_encode_options *opt);

/* The ids lipi_encode gives for s[0..len), handed to sink in slices of at
 * most LIPI_STREAM_IDS as they are found, instead of held for the whole
 * text: a text of any length costs the session memory for its longest
 * pre-tokenized piece, not for all its tokens. *n_ids (may be NULL): the
 * ids handed over. Fails as lipi_encode does (ids already handed over
 * stay handed over), with LIPI_EINVAL when !lipi_encode_can_stream, or
 * with the sink's status. */
#define LIPI_STREAM_IDS 65536
lipi_status lipi_encode_stream(lipi_session *s, const char *text, size_t len,
                               const lipi_encode_options *opt, lipi_ids_sink sink, void *ctx,
                               size_t *n_ids, lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Batches over threads                                                      */
/* ------------------------------------------------------------------------ */

/* A text to encode in a batch. */
typedef struct {
    const char *s;
    size_t len;
} lipi_text;

enum {
    LIPI_WANT_OFFSETS = 1,
    LIPI_WANT_TOKENS = 2,
    LIPI_WANT_TYPE_IDS = 4,
    LIPI_WANT_SPECIAL_MASK = 8,
};

/* Results of a batch, in input order. Tokens of text i are the entries
 * [start[i], start[i + 1]) of every array. Arrays not asked for are NULL.
 * Token k's string is token_text[token_start[k] .. token_start[k + 1]). */
typedef struct {
    size_t n;            /* texts */
    size_t *start;       /* n + 1 entries */
    uint32_t *ids;
    lipi_span *offsets;
    uint32_t *type_ids;
    uint8_t *special_mask;
    char *token_text;
    size_t *token_start; /* start[n] + 1 entries */
} lipi_batch;

/* Encodes texts[0..n) on n_sessions threads, one session each (different
 * sessions of the same encoder; their caches stay warm across calls). The
 * output is the same for any number of sessions. *out is cleared first and
 * owned by the caller (lipi_batch_free). On failure the error of the first
 * failing text (in input order) is returned with err->line = its index + 1,
 * and *out is left empty. */
lipi_status lipi_encode_batch(lipi_session *const *sessions, size_t n_sessions,
                              const lipi_text *texts, size_t n, const lipi_encode_options *opt,
                              unsigned want, lipi_batch *out, lipi_error *err);
void lipi_batch_free(lipi_batch *b); /* frees members, not b */

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */
/* ------------------------------------------------------------------------ */

/* Decodes ids[0..n) to text with the tokenizer's decoder (tokens joined by
 * spaces when it has none), as Hugging Face's decode does. With
 * skip_special, added tokens marked special are left out. Writes at most cap
 * bytes to out (NUL-terminated when *out_len < cap) and sets *out_len to the
 * full length: call with cap = 0 to ask for the size. An id that no token
 * has fails with LIPI_EINVAL naming the id and its position in ids.
 * Decoded bytes that are not valid UTF-8 become U+FFFD, as in Hugging Face. */
lipi_status lipi_decode(lipi_session *s, const uint32_t *ids, size_t n, bool skip_special,
                        char *out, size_t cap, size_t *out_len, lipi_error *err);

/* The bytes of token `id` alone, for showing a person how a text was cut:
 * the token's string with the per-token steps of the tokenizer's decoder
 * applied, so the bytes are the token's share of the decoded text.
 *   byte-level BPE (GPT-2, tiktoken's cl100k): "Ġthe" -> " the", and
 *     cl100k's "à¤" -> the bytes E0 A4 (a cut character: not valid UTF-8);
 *   SentencePiece (Metaspace or Replace decoder): "▁नम" -> " नम", and the
 *     byte-fallback piece "<0xE0>" -> the byte E0;
 *   WordPiece: "##ते" stays "##ते" (the prefix is the decoder's joining
 *     rule, not text), as do BPE end-of-word suffixes.
 * Steps that join or trim across tokens (Strip of the first space, Fuse,
 * regex Replace) are not applied. Added tokens go through the same steps,
 * as in lipi_decode ("<|endoftext|>" stays itself). The bytes are NOT
 * repaired: callers decide how to show bytes that are not whole UTF-8.
 * Writes at most cap bytes to out (NUL-terminated when *out_len < cap) and
 * sets *out_len to the full length (cap = 0 asks for the size). Uses the
 * session's decoding scratch. Fails with LIPI_EINVAL for an id that no
 * token has, LIPI_ENOMEM. */
lipi_status lipi_token_bytes(lipi_session *s, uint32_t id, char *out, size_t cap,
                             size_t *out_len, lipi_error *err);

/* ======================================================================== */
/* Unigram lattice and Viterbi (lattice.c)                                   */
/* ======================================================================== */

/* The Unigram lattice, shared by the Unigram encoder and the Unigram
 * trainer (one Viterbi in the project), as SentencePiece's trainer reuses
 * its model's lattice.
 *
 * A lattice is built over one sentence of `len` bytes: each node is a
 * candidate token covering bytes [pos, pos + len) with a score (a log
 * probability). Nodes must be inserted in non-decreasing order of pos; among
 * nodes that start at the same position, insertion order decides ties.
 *
 *   lipi_lattice lat = {0};
 *   lipi_lattice_reset(&lat, sentence_len);
 *   for each start position p (increasing), for each candidate at p:
 *       TRY(lipi_lattice_insert(&lat, p, n, id, score));
 *   TRY(lipi_lattice_viterbi(&lat, &found));   best path: lat.path[0..path_len)
 *   TRY(lipi_lattice_marginals(&lat, marg, &log_z));  for EM
 *   lipi_lattice_free(&lat);
 *
 * When only the best path is wanted (encoding), the nodes need not be
 * stored: lipi_lattice_best_start, then lipi_lattice_offer for each node in
 * the order above, then lipi_lattice_best_end, which leaves the path's nodes
 * (only those) in nodes[] and path[]. Same steps, same result.
 *
 * The Viterbi relaxes nodes in insertion order and replaces a position's best
 * only on a strictly greater score, which is exactly the tie-breaking of
 * SentencePiece's and Hugging Face's optimized Unigram encoders.
 */
typedef struct {
    uint32_t pos, len; /* bytes [pos, pos + len) of the sentence */
    uint32_t id;       /* token id */
    double score;
} lipi_lattice_node;

typedef struct {
    size_t len;                /* sentence length in bytes */
    bool f32;                  /* Viterbi sums scores in float32 (SentencePiece's
                                  arithmetic), else in double (Hugging Face's) */
    float start;               /* f32: the score the path starts from */
    double start_d;            /* the same without f32 (0 after reset) */
    int64_t f32_unk;           /* f32: id of the unknown piece, -1 none */
    double f32_margin;         /* f32, after the Viterbi: the smallest gap
                                  between two candidates compared (INFINITY
                                  when none were) */
    lipi_lattice_node *nodes;  /* n_nodes, in insertion order */
    size_t n_nodes, nodes_cap;
    uint32_t *path;            /* Viterbi result: node indices, start to end */
    size_t path_len, path_cap;
    /* scratch, len + 1 entries each */
    double *pos_score;
    int64_t *pos_node;
    double *pos_beta;
    lipi_lattice_node *pos_win; /* best_start .. best_end: the best node
                                   ending at each position */
    size_t pos_cap;
} lipi_lattice;

/* Empties the lattice for a sentence of len bytes (keeps memory). */
void lipi_lattice_reset(lipi_lattice *l, size_t len);

/* Adds a node. pos must not be below the previous node's pos and
 * pos + n <= l->len, n > 0 (LIPI_EINVAL otherwise); LIPI_ENOMEM. */
lipi_status lipi_lattice_insert(lipi_lattice *l, size_t pos, size_t n, uint32_t id,
                                double score);

/* Best-scoring segmentation of the whole sentence into nodes; *found is false
 * (and path_len 0) when no chain of nodes covers it. An empty sentence has an
 * empty path. LIPI_ENOMEM. */
lipi_status lipi_lattice_viterbi(lipi_lattice *l, bool *found);

/* The Viterbi without a stored lattice (see the top of this file). offer
 * takes pos <= len - n, n > 0, pos not below the previous offer's (not
 * checked: the encoder's walk gives them so). LIPI_ENOMEM. */
lipi_status lipi_lattice_best_start(lipi_lattice *l);
void lipi_lattice_offer(lipi_lattice *l, size_t pos, size_t n, uint32_t id, double score);
lipi_status lipi_lattice_best_end(lipi_lattice *l, bool *found);
/* best_end's path to position `end` instead of len (its best way there):
 * nodes[0..n_nodes) = path, start to end; *found false when unreached. */
lipi_status lipi_lattice_best_to(lipi_lattice *l, size_t end, bool *found);

/* Forward-backward over all segmentations: marginal[i] (n_nodes entries, the
 * caller's) is the probability that node i is on the path, with path
 * probabilities proportional to exp(sum of node scores); *log_z is the log of
 * their total (-INFINITY, and all marginals 0, when no path exists).
 * LIPI_ENOMEM. */
lipi_status lipi_lattice_marginals(lipi_lattice *l, double *marginal, double *log_z);

void lipi_lattice_free(lipi_lattice *l);

#endif

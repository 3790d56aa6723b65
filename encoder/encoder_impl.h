/* Internal: layout of lipi_encoder and lipi_session, shared by the files of
 * encoder/. Never included by a public header.
 *
 * Flow of one text (Hugging Face's order):
 *
 *   text ─▶ added tokens that are not normalized, matched on the raw text
 *        ─▶ each other segment: normalizer ─▶ normalized added tokens
 *        ─▶ each other sub-segment: pre-tokenizer ─▶ pieces
 *        ─▶ each piece: model (through the session's word cache) ─▶ tokens
 *        ─▶ offsets: piece ─▶ sub-segment ─▶ normalized ─▶ original text
 *        ─▶ truncation ─▶ post-processor (special tokens, type ids, trims)
 */
#ifndef LIPI_ENCODER_IMPL_H
#define LIPI_ENCODER_IMPL_H

#include <math.h>
#include <stdatomic.h>

#include "encoder/encoder.h"
#include "encoder/trie_impl.h"
#include "tokenizer/tokenizer_layout.h"

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

/* Length of the UTF-8 sequence that starts with byte c (1 for anything
 * that is not a lead byte, so loops always advance). */
static inline size_t enc_utf8_len(unsigned char c)
{
    if (c < 0xC0)
        return 1;
    if (c < 0xE0)
        return 2;
    if (c < 0xF0)
        return 3;
    return 4;
}

/* Decodes the code point at s (valid UTF-8, at least one byte). */
static inline uint32_t enc_utf8_cp(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    switch (n) {
    case 1: return u[0];
    case 2: return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    case 3: return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    default:
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
               ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
}

/* Grows the array `arr` (any element type) to hold `need` entries;
 * LIPI_ENOMEM on failure (arr and cap unchanged). */
#define ENC_GROW(arr, cap, need) enc_grow_(&(arr), &(cap), (need), sizeof *(arr))

static inline lipi_status enc_grow_(void *pp, size_t *cap, size_t need, size_t size)
{
    void *p;
    if (need <= *cap)
        return LIPI_OK;
    memcpy(&p, pp, sizeof p);
    lipi_status st = lipi_grow(&p, cap, need, size);
    memcpy(pp, &p, sizeof p);
    return st;
}

/* GPT-2's byte <-> code point alphabet (bytes_to_unicode): the printable
 * Latin-1 bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves;
 * the other 68 (0x00..0x20, 0x7F..0xA0, 0xAD) become U+0100, U+0101, ... in
 * byte order. */
static inline uint32_t lipi_bytelevel_char(uint8_t b)
{
    if (b <= 0x20)
        return 256u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 256u + 33 + (b - 0x7Fu);
    if (b == 0xAD)
        return 256u + 67;
    return b;
}

/* The byte of a code point of the alphabet, or -1. */
static inline int lipi_bytelevel_byte(uint32_t cp)
{
    if (cp < 256)
        return (cp > 0x20 && cp < 0x7F) || (cp > 0xA0 && cp != 0xAD) ? (int)cp : -1;
    if (cp < 256 + 33)
        return (int)(cp - 256);
    if (cp < 256 + 67)
        return (int)(0x7F + cp - 256 - 33);
    return cp == 256 + 67 ? 0xAD : -1;
}

/* Code point -> id map for single-character tokens (open addressing). */
typedef struct {
    uint64_t *slot; /* cp << 32 | id; UINT64_MAX empty */
    size_t mask;
} enc_cpmap;

static inline int64_t enc_cpmap_get(const enc_cpmap *m, uint32_t cp)
{
    if (!m->slot)
        return -1;
    size_t i = (size_t)(cp * 0x9E3779B1u) & m->mask;
    for (;;) {
        uint64_t v = m->slot[i];
        if (v == UINT64_MAX)
            return -1;
        if ((uint32_t)(v >> 32) == cp)
            return (int64_t)(uint32_t)v;
        i = (i + 1) & m->mask;
    }
}

/* The merge table maps a pair (left, right) to its rank, keyed by
 * left * V + right (V: vocabulary size). When V * V times the ranks fit in
 * 63 bits, a slot is one word, key << rank_bits | rank (a quarter of the
 * memory of a wide slot, and the table is what a BPE encoder waits for);
 * else it is a wide slot. Empty slots are all ones. */
typedef struct {
    uint64_t key;
    uint64_t rank;
} enc_pair;

/* Bits for values 0 .. n. */
static inline unsigned enc_bits_for(uint64_t n)
{
    unsigned b = 1;
    while (b < 64 && n >> b)
        b++;
    return b;
}

/* Open-addressing tables of 64-bit slots, key << bits | value, all ones
 * empty: the compact merge table and backtracking's pair table. Keys stay
 * below 2^(63 - bits), so no key matches an empty slot. */
static inline size_t enc_slot_home(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 32 ^ h) & mask;
}

static inline bool enc_packed_get(const uint64_t *slot, size_t mask, unsigned bits, uint64_t key,
                                  uint64_t *value)
{
    for (size_t k = enc_slot_home(key, mask);; k = (k + 1) & mask) {
        uint64_t p = slot[k];
        if (p >> bits == key) {
            *value = p & ((UINT64_C(1) << bits) - 1);
            return true;
        }
        if (p == UINT64_MAX)
            return false;
    }
}

/* Puts (key, value); a key already there gets the new value. */
static inline void enc_packed_put(uint64_t *slot, size_t mask, unsigned bits, uint64_t key,
                                  uint64_t value)
{
    size_t k = enc_slot_home(key, mask);
    while (slot[k] != UINT64_MAX && slot[k] >> bits != key)
        k = (k + 1) & mask;
    slot[k] = key << bits | value;
}

/* ======================================================================== */
/* The Unigram Viterbi step (lattice.c's, inlined into the encoder's walk)   */
/* ======================================================================== */

/* The Viterbi step for a node ending at `end` that starts at a reached
 * position whose best score is from_score: true when it is the best way to
 * end so far (pos_score[end] updated, the caller records the node). A
 * later node replaces an earlier one only on a strictly greater score.
 * pos_score and pos_node are a lipi_lattice's; f32, f32_unk and *margin
 * stand for its fields, which the encoder's walk keeps in registers. */
static inline bool lipi_lattice_relax(double *pos_score, const int64_t *pos_node, bool f32,
                                      int64_t f32_unk, double *margin, double from_score,
                                      size_t end, uint32_t id, double score)
{
    double cand = from_score + score;
    if (f32) {
        /* SentencePiece's EncodeOptimized: a piece's candidate is the
         * float best-so-far plus its float score added in double (the
         * score's type is deduced as double there), the unknown's is
         * added in float, and the best is stored as a float. So a later
         * equal-looking candidate can beat a stored one rounded down. */
        float f = (float)from_score;
        cand = (int64_t)id == f32_unk ? (double)(f + (float)score)
                                      : (double)f + (double)(float)score;
    }
    bool reached = pos_node[end] != -1;
    if (f32 && reached && fabs(cand - pos_score[end]) < *margin)
        *margin = fabs(cand - pos_score[end]);
    if (reached && !(cand > pos_score[end]))
        return false;
    pos_score[end] = f32 ? (double)(float)cand : cand;
    return true;
}

/* ======================================================================== */
/* Added-token matcher                                                       */
/* ======================================================================== */

typedef struct {
    uint32_t id;
    bool single_word, lstrip, rstrip;
    bool special;
} enc_added_pat;

/* Leftmost-longest matcher over the contents of some added tokens (Hugging
 * Face builds an Aho-Corasick automaton with MatchKind::LeftmostLongest). */
typedef struct {
    lipi_datrie trie;      /* content -> index into pat */
    enc_added_pat *pat;
    size_t n;
    bool first[256];       /* bytes that can start a match */
    int only_first;        /* the one byte that starts every pattern, or -1 */
} enc_added;

/* One segment of a text: an added token, or text for the next stage. */
typedef struct {
    size_t start, end;
    int64_t id;            /* added token id, -1 for text */
} enc_seg;

/* ======================================================================== */
/* The encoder                                                               */
/* ======================================================================== */

struct lipi_encoder {
    const lipi_tokenizer *tok;
    const lipi_vocab_model *m;
    lipi_model_type type;
    const lipi_normalizer *norm;
    const lipi_pretokenizer *pretok;  /* what runs (tok's or own_pretok) */
    lipi_pretokenizer *own_pretok;    /* byte-level pre-tokenizer rewritten
                                         to split raw bytes */
    const struct lipi_scanner *scan;  /* pretok is this scanner's Split: the
                                         encoder scans the text itself */
    char meta_split[4];               /* pretok cuts before this character's */
    size_t meta_split_len;            /* UTF-8 (Metaspace), 0: no */

    /* How piece text relates to its source (for offsets). */
    bool raw_bytes;          /* byte-level BPE run on raw bytes */
    bool raw_prefix_space;   /* ByteLevel add_prefix_space, done here */
    bool bytelevel_pieces;   /* pieces arrive in the GPT-2 alphabet */
    uint32_t meta_char;      /* Metaspace replacement character, 0: none */
    bool meta_first;         /* Metaspace prepend_scheme "first" */

    /* Unknown token: id, or -1. unk_named: a string was given (even if it
     * is not in the vocabulary, in which case needing it is an error). */
    int64_t unk_id;
    bool unk_named;
    bool fuse_unk;

    /* BPE */
    uint64_t *pairs;                  /* compact slots (pair_bits > 0), or */
    enc_pair *wide_pairs;             /* wide slots */
    size_t pair_mask;
    unsigned pair_bits;               /* rank bits of a compact slot */
    uint64_t pair_v;                  /* V of the key */
    uint64_t *pair_filter;            /* compact tables of few merges: bit
                                         (key * 0x9E3779B97F4A7C15) >>
                                         pair_filter_shift set for each
                                         pair that merges; else NULL */
    unsigned pair_filter_shift;
    uint32_t *merge_result;           /* rank -> the merged token */
    bool merge_concat;                /* every merged token is its pair's
                                         strings joined (bpe_merge_scan) */
    atomic_bool pairs_ready;          /* the tables above are built
                                         (lipi_enc_bpe_pairs) */
    size_t bpe_long_min;              /* a word this long goes to bpe_long.c */
    size_t bpe_long_part;             /* which cuts it into parts this long */
    size_t bpe_compact_min;           /* a part this long: lipi_enc_bpe_compact */
    const char *prefix, *suffix;      /* continuing_subword_prefix, end_of_word_suffix */
    size_t prefix_len, suffix_len;
    int64_t ascii_id[4][128];         /* [variant][char]: 0 alone, 1 with
                                         prefix, 2 with suffix, 3 both */
    enc_cpmap char_id[4];
    uint16_t *char_blk;               /* undecorated: BMP cp >> 6 -> its block
                                         of char_blk_ids, 0 for none */
    int32_t *char_blk_ids;            /* 64 ids a block (cp & 63), -1 none;
                                         block 0 is all -1 */
    int64_t byte_fb[256];             /* id of "<0xNN>", -1 */
    uint32_t byte_id[256];            /* raw_bytes: id of each byte */
    lipi_strref *raw_keys;            /* raw_bytes: token -> bytes, built on
                                         need (lipi_enc_raw_keys) */
    char *raw_arena;
    /* Backtracking BPE (backtrack.c), for tiktoken rank files and byte-level
     * Hugging Face merges. Its tables are indexed by rank: the id on a rank
     * file; else the 256 bytes, then the token of merge r at 256 + r. */
    bool bt;
    uint32_t *bt_id;                  /* rank -> token id; NULL: id = rank */
    bool bt_words;                    /* bt on a rank file: a whole word that
                                         is a token is found by the walk */
    lipi_datrie32 bt_trie;            /* raw_keys -> id */
    uint64_t *bt_tok;                 /* per token, 21 bits each: the pair it
                                         was merged from (itself twice for a
                                         byte), its longest proper prefix
                                         that is a token (all ones: none) */
    uint16_t *bt_len;                 /* token lengths in bytes */
    uint64_t *bt_pairs;               /* (a * bt_v + b) << bt_bits | merged id */
    uint64_t *bt_filter;              /* a bit per pair hash: maybe in bt_pairs */
    void *bt_mapped;                  /* the cache file bt_trie, bt_tok, bt_len,
                                         bt_pairs and bt_filter point into
                                         (read-only), or NULL: they are owned */
    size_t bt_mapped_len;
    size_t bt_mask;
    uint64_t bt_v;
    unsigned bt_bits;
    uint64_t *raw_slot;               /* raw_keys by lipi_enc_hash: hash >> 32
                                         << 32 | id + 1; 0 empty */
    size_t raw_mask;

    /* WordPiece, Unigram */
    lipi_datrie trie;                 /* all tokens (WordPiece: without prefix;
                                         Unigram: only when trie32 is empty) */
    lipi_datrie32 trie32;             /* the same, compact (size 0: too big,
                                         use trie) */
    uint64_t *uni;                    /* f32 Unigram: trie32's units (then freed)
                                         with each piece's float score in the
                                         high half, so the lattice's walk reads
                                         one array (see unigram_units) */
    lipi_datrie32 trie32_cont;        /* WordPiece: trie_cont, compact */
    void *tries_mapped;               /* the cache file that uni, trie32 and
                                         trie32_cont point into, or NULL (they
                                         are owned) */
    size_t tries_mapped_len;
    lipi_datrie trie_cont;            /* WordPiece: prefixed tokens, prefix cut */
    double unk_score;                 /* Unigram: min score - 10 */
    bool f32_viterbi;                 /* Unigram with SentencePiece's float32
                                         path scores (see lipi_session) */

    /* Added tokens */
    enc_added raw_added;              /* normalized == false, on raw text */
    enc_added norm_added;             /* normalized == true, on normalized text */
    /* The same without the special tokens (LIPI_SPECIAL_TEXT), built only
     * when the set above has special tokens (has_special). */
    enc_added raw_plain, norm_plain;
    bool raw_has_special, norm_has_special;
    lipi_strref *added_str;           /* per tok->added[i]: its string as Hugging
                                         Face keeps it (normalized content for
                                         normalized tokens) */

    /* Decoders: compiled Replace regexes, in decoder-tree order */
    void **dec_re;                    /* pcre2_code * */
    size_t n_dec_re, dec_re_cap;
};

/* ======================================================================== */
/* The session                                                               */
/* ======================================================================== */

/* A token of one piece: bytes [start, end) of the piece text. Its string is
 * the vocabulary's, or (ENC_PTOK_TEXT set in end) the piece bytes
 * themselves (Unigram's unknown runs). Also the cache's stored form. */
typedef struct {
    uint32_t id;
    uint32_t start, end;
} enc_ptok;

#define ENC_PTOK_TEXT 0x80000000u

/* A token of a sequence. Its string (kind): the vocabulary's string of id
 * (TOK_VOCAB, looked up only when someone asks), val[0..val_len)
 * (TOK_PTR, memory that outlives the call), or pool[pool_off ..
 * pool_off + val_len) of the session (TOK_POOL). */
enum { TOK_VOCAB = 0, TOK_PTR, TOK_POOL };

typedef struct {
    uint32_t id;
    uint32_t type_id;
    lipi_span off;
    const char *val;
    uint32_t val_len, pool_off;
    uint8_t kind, special, seq;
} enc_tok;

typedef struct {
    enc_tok *t;
    size_t n, cap;
} enc_toks;

/* Word -> tokens cache: bounded, cleared whole when full. A slot is 32
 * bits: the top LIPI_ENC_CACHE_TAG_BITS of the hash, then where the entry
 * starts in one arena (offset / 4 + 1; 0: empty). An entry is a header,
 * its tokens and its key, side by side, so a hit touches two cache lines
 * at most. Slots of 8 bytes (a 32-bit tag) made the table 1 MB: the slot
 * load was 10% of spm_bpe8k's time (perf, bench/encode.c), 6.5% with 4
 * bytes; a tag of 11 bits costs an entry compare once in 2048 probes. */
typedef uint32_t cache_slot;
#define LIPI_ENC_CACHE_OFF_BITS 21 /* arenas under 8 MB (cache.c's: 4 MB) */
#define LIPI_ENC_CACHE_TAG_BITS (32 - LIPI_ENC_CACHE_OFF_BITS)

static inline uint32_t lipi_enc_cache_tag(uint64_t hash)
{
    return (uint32_t)(hash >> (64 - LIPI_ENC_CACHE_TAG_BITS));
}

typedef struct {
    cache_slot *slot;
    size_t mask;         /* slots - 1: twice the entries it may hold */
    size_t n_ent, max_bytes;
    unsigned char *arena;
    size_t len, cap;
} enc_cache;

/* A piece to encode: its text and hash. */
typedef struct {
    const char *text;
    size_t len;
    uint64_t hash;
} enc_piece;

typedef struct {
    uint32_t id;
    uint32_t len;        /* bytes of the piece it covers */
    int32_t prev, next;
} bpe_sym;

/* A heap entry: merge the symbol at pos with its next one (they were left
 * and right when the entry was pushed) by the merge of this rank. */
typedef struct {
    uint32_t rank, pos;
    uint32_t left, right;
} bpe_cand;

struct lipi_session {
    const lipi_encoder *enc;
    lipi_special_policy special; /* of the call being encoded */
    bool utf8_checked;           /* of the call: texts already checked */
    lipi_normalized norm;
    lipi_normalized cut_norm;    /* one character, to find where a long
                                    streamed text may be cut */
    lipi_pieces pieces;
    lipi_buf segbuf;             /* a sub-segment with a space put before it */
    enc_seg *segs, *segs2;       /* added-token splits (raw, normalized) */
    size_t segs_cap, segs2_cap;
    enc_ptok *ptok;              /* tokens of the current piece */
    size_t ptok_n, ptok_cap;
    enc_piece *pw;               /* the pieces of the current sub-segment */
    size_t pw_cap;
    lipi_span *pw_src;           /* their spans, when the encoder scans */
    size_t pw_src_cap;
    lipi_span *palign;           /* alignment of a mapped piece, per text byte */
    size_t palign_cap;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_cand *heap;
    size_t heap_cap;
    uint64_t *bt_dead;           /* backtracking BPE: the positions that
                                    lead nowhere, a bit each */
    size_t bt_dead_cap;
    uint32_t *bt_rank;           /* and the ranks of its tokens so far */
    size_t bt_rank_cap;
    uint64_t *bt_valid;          /* recent valid-pair answers (backtrack.c) */
    /* Recent pair lookups of a compact merge table, direct-mapped, in its
     * slot format (UINT64_MAX: nothing; a pair that does not merge keeps
     * rank bits all ones). The table is megabytes; the pairs of one
     * language's text are a few thousand, which stay in the core's cache
     * here. */
    uint64_t *pair_cache;
    /* bpe_long.c: the (last char, first char) of every merge's two sides,
     * code points + 1 in 32 bits each (0: empty slot); built on a session's
     * first long word. bpe_cross_state 1: built, 2: and merged tokens are
     * named by their strings, -1: a merged token is not its pair's strings
     * joined (long words take the merge loop whole). */
    uint64_t *bpe_cross;
    size_t bpe_cross_mask;
    int bpe_cross_state;
    uint64_t bpe_ascii_cut[256];  /* bit x * 128 + y: a cut between ASCII x
                                     and y is allowed */
    lipi_buf word;               /* prefix/suffix-decorated strings */
    lipi_lattice lattice;
    /* f32 Unigram (SentencePiece .model): the float32 score of the best
     * path up to the current word. SentencePiece runs one lattice over the
     * whole sentence, so float rounding (and with it the choice between
     * near-equal paths) depends on what came before; words are scored from
     * this value, in order, and only words whose choices no rounding can
     * change are cached (the score is replayed from their tokens). */
    float f32_run;
    bool f32_cacheable; /* the last word's tokens do not depend on f32_run */
    enc_cache cache;
    /* lipi_encode_stream: where ids go instead of seq[0], and the slice
     * being filled (LIPI_STREAM_IDS entries) */
    lipi_ids_sink sink;
    void *sink_ctx;
    uint32_t *sink_ids;
    size_t sink_n, sink_total;
    enc_toks seq[2];             /* tokens of text and pair */
    enc_toks out;                /* after post-processing */
    const enc_toks *res;         /* the result: &out, or &seq[0] when nothing
                                    had to change */
    enc_toks *encs, *encs2;      /* encodings between post-processors */
    size_t encs_cap;
    lipi_buf pool;               /* token strings that are not the vocabulary's */
    const char *text[2];         /* the texts of the current call */
    size_t text_len[2];
    /* decoding */
    lipi_buf dec_a, dec_b, dec_tmp;
    lipi_span *dspan_a, *dspan_b;
    size_t dspan_a_cap, dspan_b_cap;
};

/* ======================================================================== */
/* Between the files                                                         */
/* ======================================================================== */

/* encode.c: under lipi_encode_stream, hands the piece's tokens so far
 * (s->ptok, final: a model that will not take them back) to the sink and
 * empties s->ptok; otherwise does nothing. */
lipi_status lipi_enc_stream_ptok(lipi_session *s);

/* models.c: runs the model over one piece and stores the result in the
 * cache (callers look there first): *toks (n of them) is valid until the
 * next call. LIPI_EINVAL when an unknown token is needed and the model has
 * none, or the piece is 2 GiB or longer. */
lipi_status lipi_enc_model(lipi_session *s, const char *text, size_t len, uint64_t hash,
                           const enc_ptok **toks, size_t *n, lipi_error *err);

/* bpe_long.c: when merge_concat holds, BPE takes a word of
 * e->bpe_long_min bytes or more part by part, cut where no merge can join
 * the two sides. *b = the end of the part that starts at a (n: the rest;
 * parts of e->bpe_long_part bytes or more). Under lipi_encode_stream the
 * tokens of the parts before a go to the sink first (lipi_enc_stream_ptok).
 * Fails only for memory. */
#define BPE_LONG_MIN ((size_t)1 << 20)
#define BPE_LONG_PART ((size_t)1 << 16)
lipi_status lipi_enc_bpe_part(lipi_session *s, const char *w, size_t n, size_t a, size_t *b);
/* bpe_long.c: a part of e->bpe_compact_min bytes or more (no cut found)
 * is merged in about 2 bytes a byte instead of 64: w[0..n), the bytes from
 * base of a word of `whole` bytes, its tokens onto s->ptok as the merge
 * loop's (under lipi_encode_stream, to the sink as they come). *done false:
 * it does not apply (ranks over 16 bits, a character the vocabulary lacks,
 * a merged token its string does not name); use the merge loop. Fails only
 * for memory. */
lipi_status lipi_enc_bpe_compact(lipi_session *s, const char *w, size_t n, size_t base,
                                 size_t whole, bool *done);
/* models.c, for bpe_long.c: the merge loop's pair lookup (after
 * lipi_enc_pair_ready, which fails only for memory). */
lipi_status lipi_enc_pair_ready(lipi_session *s);
bool lipi_enc_pair_rank(lipi_session *s, uint32_t a, uint32_t b, uint32_t *rank);

/* Tests only: nonzero makes every BPE merge table wide (a vocabulary of
 * millions of tokens would be needed to get one otherwise). */
extern int lipi_enc_wide_pairs_for_tests;

/* backtrack.c: the tables of backtracking BPE when the model is a tiktoken
 * rank file whose tokens all encode to themselves (else e->bt stays false);
 * fails only for memory. lipi_enc_bt_word encodes w[0..n) into
 * s->ptok[0..*count) (*count 0: no encoding, use the merge loop); under
 * lipi_encode_stream a word over 64 KiB hands all but its last slice of
 * tokens to the sink first (lipi_enc_stream_ptok), so the spans in s->ptok
 * are then of the word, not from 0. */
lipi_status lipi_enc_bt_init(lipi_encoder *e);
/* encode.c: builds e->raw_slot when there are raw_keys under ignore_merges
 * (and it is not built yet); fails only for memory. */
lipi_status lipi_enc_raw_slots(lipi_encoder *e);
/* encode.c: builds e->raw_keys (each token's raw bytes) under raw_bytes,
 * unless built: only what needs the bytes themselves does (the builds of
 * backtracking's tables and of raw_slot, a key without a snapshot), not a
 * warm load of a rank file. Fails only for memory. */
lipi_status lipi_enc_raw_keys(lipi_encoder *e);
void lipi_enc_bt_free(lipi_encoder *e);
/* Whether the pair table pairs: (cap) names merged ids below n only (the
 * low bits bits of each slot but the empty ones, UINT64_MAX) and has an
 * empty slot (so every probe ends). _ref is the portable loop; the other
 * takes AVX2 where there is one, with the same answer. */
bool lipi_enc_bt_pairs_ok(const uint64_t *pairs, size_t cap, unsigned bits, size_t n);
bool lipi_enc_bt_pairs_ok_ref(const uint64_t *pairs, size_t cap, unsigned bits, size_t n);
lipi_status lipi_enc_bt_word(lipi_session *s, const char *w, size_t n, size_t *count);

/* Model tables of the encoder (models.c); freed by lipi_enc_models_free. */
lipi_status lipi_enc_models_init(lipi_encoder *e, lipi_error *err);
/* models.c: builds the BPE merge loop's tables (pairs, merge_result,
 * merge_concat) unless they are built; safe to call from several sessions
 * at once. lipi_encoder_new calls it unless backtracking encodes the model
 * (then bpe_word does, on the first word backtracking cannot encode).
 * Fails only for memory. */
lipi_status lipi_enc_bpe_pairs(const lipi_encoder *e);
/* The merge scan's lowest pair of a word whose ranks fit 16 bits: of
 * r16[0..8 * nv) (16-byte aligned, rank - 32768 each, INT16_MAX for no
 * pair; nv of 1 .. 3), the leftmost lowest entry's index and its rank in
 * *best, or -1 when all are INT16_MAX. _ref is the plain loop (tests). */
int lipi_enc_scan_min16(const int16_t *r16, size_t nv, uint32_t *best);
int lipi_enc_scan_min16_ref(const int16_t *r16, size_t nv, uint32_t *best);
void lipi_enc_models_free(lipi_encoder *e);

/* added.c */
lipi_status lipi_enc_added_build(lipi_encoder *e, lipi_error *err);
void lipi_enc_added_free(enc_added *a);
/* Splits s[0..len) at the matches of a; segments cover all of s, in order.
 * *segs grows as needed. */
lipi_status lipi_enc_added_split(const enc_added *a, const char *s, size_t len, enc_seg **segs,
                                 size_t *cap, size_t *n);

/* Unicode White_Space (Rust's char::is_whitespace and regex \s). */
bool lipi_enc_is_space(uint32_t cp);

/* Whether id is an added token marked special. */
bool lipi_enc_is_special(const lipi_tokenizer *t, uint32_t id);
bool lipi_enc_is_added(const lipi_tokenizer *t, uint32_t id); /* special or not */
/* The string of a token id as Hugging Face's id_to_token gives it, or NULL. */
const char *lipi_enc_id_to_token(const lipi_encoder *e, uint32_t id, size_t *len);
void lipi_enc_added_strings_free(lipi_encoder *e);

/* decode.c: compiles the decoders' regexes / frees them. */
lipi_status lipi_enc_decoders_init(lipi_encoder *e, lipi_error *err);
void lipi_enc_decoders_free(lipi_encoder *e);

/* cache.c keeps at most this many bytes of key. */
#define LIPI_ENC_CACHE_MAX_KEY 255
#define LIPI_ENC_PAIR_CACHE (1u << 13)
/* 2^14 entries (128 KB a session). 2^16 missed 13% fewer pairs on the
 * mixed-script bench text but ran slower: a quarter more last-level cache
 * misses (callgrind's cache simulation, 2 MB), evicting the tables. */
#define LIPI_ENC_BT_VALID_CACHE (1u << 14)
/* f32 Unigram: words are cached and reused only while the running score
 * stays below this magnitude L (see lipi_session.f32_run). The smaller L,
 * the finer float32's rounding there, so the closer the choices a cached
 * word may have (models.c); 2^14 holds all but very long sentences. */
#define ENC_F32_CACHE_LIMIT 16384.0f
/* Stores s->ptok under key (failing to allocate only means not caching). */
void lipi_enc_cache_put(lipi_session *s, const char *key, size_t len, uint64_t hash);
void lipi_enc_cache_free(enc_cache *c);

/* encode.c: encodes one text (or pair) into s->res. */
lipi_status lipi_enc_run(lipi_session *s, const char *a, size_t alen, const char *b,
                         size_t blen, bool pair, const lipi_encode_options *opt,
                         bool want_offsets, lipi_error *err);

/* lipi_encode_stream without its checks: the caller knows that
 * lipi_encode_can_stream holds and s, text and sink are given. */
lipi_status lipi_enc_stream_run(lipi_session *s, const char *text, size_t len,
                                const lipi_encode_options *opt, lipi_ids_sink sink, void *ctx,
                                size_t *n_ids, lipi_error *err);

/* The string of a result token and its length. */
static inline const char *lipi_enc_tok_str(const lipi_session *s, const enc_tok *t, size_t *len)
{
    if (t->kind == TOK_PTR) {
        *len = t->val_len;
        return t->val;
    }
    if (t->kind == TOK_POOL) {
        *len = t->val_len;
        return s->pool.p + t->pool_off;
    }
    const lipi_vocab *v = &s->enc->m->vocab;
    if (t->id < v->n && v->tok[t->id].s) {
        *len = v->tok[t->id].len;
        return v->tok[t->id].s;
    }
    *len = 0;
    return "";
}

/* Fast hash of a short byte string (pieces, for the cache): 8 bytes at a
 * time, the last ones by overlapping loads (never past the string). */
static inline uint64_t lipi_enc_hash(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xff51afd7ed558ccdULL), v;
    const char *p = s;
    for (size_t m = n; m > 8; m -= 8, p += 8) {
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
    }
    if (n >= 8) {
        memcpy(&v, s + n - 8, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        v = (uint64_t)a << 32 | b;
    } else if (n) {
        v = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[n >> 1] << 8 |
            (unsigned char)s[n - 1];
    } else {
        v = 0;
    }
    h = (h ^ v) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

/* a[0..n) == b[0..n), inline for the short keys of the cache. */
static inline bool lipi_enc_eq(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    uint64_t u, w;
    if (n < 8) {
        /* Two overlapping loads cover 4..7 bytes, three single ones 1..3:
         * never a byte loop (most keys are short words). */
        if (n >= 4) {
            uint32_t p, q, r, t;
            memcpy(&p, x, 4);
            memcpy(&q, y, 4);
            memcpy(&r, x + n - 4, 4);
            memcpy(&t, y + n - 4, 4);
            return ((p ^ q) | (r ^ t)) == 0;
        }
        return n == 0 || (x[0] == y[0] && x[n >> 1] == y[n >> 1] && x[n - 1] == y[n - 1]);
    }
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&u, x + i, 8);
        memcpy(&w, y + i, 8);
        if (u != w)
            return false;
    }
    memcpy(&u, x + n - 8, 8); /* the last 8 bytes, overlapping the loop's */
    memcpy(&w, y + n - 8, 8);
    return u == w;
}

/* The token whose raw bytes are s[0..n) (hash: lipi_enc_hash of them), for
 * byte-level BPE that looks whole words up first (ignore_merges). */
static inline bool lipi_enc_raw_find(const lipi_encoder *e, const char *s, size_t n,
                                     uint64_t hash, uint32_t *id)
{
    uint32_t tag = (uint32_t)(hash >> 32);
    for (size_t i = (size_t)hash & e->raw_mask;; i = (i + 1) & e->raw_mask) {
        uint64_t v = e->raw_slot[i];
        if (v == 0)
            return false;
        if ((uint32_t)(v >> 32) != tag)
            continue;
        const lipi_strref *k = &e->raw_keys[(uint32_t)v - 1];
        if (k->len == n && lipi_enc_eq(k->s, s, n)) {
            *id = (uint32_t)v - 1;
            return true;
        }
    }
}

/* The tokens cached for key (*n of them, valid until the next put), or
 * NULL. An entry in the arena (4-byte aligned) is: key length (2 bytes),
 * token count (2 bytes), the tokens, the key. Inline: it runs once per piece. */
#define LIPI_ENC_CACHE_HDR 4

/* The arena offset of the entry of a slot that is not empty. */
static inline size_t lipi_enc_cache_off(cache_slot sl)
{
    return ((size_t)(sl & ((UINT32_C(1) << LIPI_ENC_CACHE_OFF_BITS) - 1)) - 1) * 4;
}

static inline __attribute__((always_inline)) const enc_ptok *
lipi_enc_cache_get(const lipi_session *s, const char *key, size_t len, uint64_t hash, size_t *n)
{
    const enc_cache *c = &s->cache;
    if (!c->slot)
        return NULL;
    uint32_t tag = lipi_enc_cache_tag(hash);
    size_t i = (size_t)hash & c->mask;
    for (;;) {
        cache_slot sl = c->slot[i];
        if (sl == 0)
            return NULL;
        if (sl >> LIPI_ENC_CACHE_OFF_BITS == tag) {
            const unsigned char *en = c->arena + lipi_enc_cache_off(sl);
            uint16_t klen, nt;
            memcpy(&klen, en, 2);
            memcpy(&nt, en + 2, 2);
            const enc_ptok *t = (const enc_ptok *)(const void *)(en + LIPI_ENC_CACHE_HDR);
            const unsigned char *k = en + LIPI_ENC_CACHE_HDR + (size_t)nt * sizeof *t;
            if (klen == len && lipi_enc_eq(k, key, len)) {
                *n = nt;
                return t;
            }
        }
        i = (i + 1) & c->mask;
    }
}

/* Asks the memory system for the slot of hash / the entry it points to. */
static inline void lipi_enc_cache_prefetch(const lipi_session *s, uint64_t hash)
{
    const enc_cache *c = &s->cache;
    if (c->slot)
        __builtin_prefetch(&c->slot[(size_t)hash & c->mask]);
}

static inline void lipi_enc_cache_prefetch_entry(const lipi_session *s, uint64_t hash)
{
    const enc_cache *c = &s->cache;
    if (!c->slot)
        return;
    cache_slot sl = c->slot[(size_t)hash & c->mask];
    if (sl && sl >> LIPI_ENC_CACHE_OFF_BITS == lipi_enc_cache_tag(hash))
        __builtin_prefetch(c->arena + lipi_enc_cache_off(sl));
}

#endif

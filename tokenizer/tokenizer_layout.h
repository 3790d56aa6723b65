/* The layout of lipi_tokenizer, and the normalizer and pre-tokenizer fast
 * paths, for the modules that run a tokenizer at speed. Library-internal
 * and not installed. Owned by tokenizer/ (tokenizer_json.c and the readers
 * build the object); the one other module that includes it is encoder/,
 * which reads the model, the post-processor, the decoder and the added
 * tokens directly on its hot paths (the encoder was built on this layout;
 * accessors in their place would need a paired speed check first, not done
 * yet). trainer/count_corpus.c uses the normalizer and scanner fast paths
 * only. Everything else builds and inspects a tokenizer through
 * tokenizer/tokenizer.h. See docs/ARCHITECTURE.md, "Include rules".
 *
 * Everything here is immutable once the tokenizer is built, so any number of
 * threads may read it without locks. All strings are byte spans (pointer +
 * length); owned ones are also NUL-terminated for convenience, but may hold
 * NUL bytes themselves, so always use the length.
 *
 * Map of the object:
 *
 *   lipi_tokenizer
 *   ├── normalizer, pretokenizer    (opaque; NULL when the file has null)
 *   ├── model: lipi_vocab_model
 *   │     ├── vocab: id -> token bytes (one arena) + token -> id hash map
 *   │     ├── scores[id]            Unigram only
 *   │     └── merges[rank] = {left, right, result}
 *   ├── post: lipi_post_processor * (NULL when none)
 *   ├── decoder: lipi_decoder *     (NULL when none)
 *   ├── added[]: lipi_added_token, sorted by id, + content -> index map
 *   └── truncation, padding: json_t * kept verbatim for saving (NULL = null)
 */
#ifndef LIPI_TOKENIZER_LAYOUT_H
#define LIPI_TOKENIZER_LAYOUT_H

#include <jansson.h>
#include <string.h>

#include "tokenizer/base.h"

/* ======================================================================== */
/* String -> index hash map (open addressing, linear probing)                */
/* ======================================================================== */

/* A borrowed byte span. s == NULL marks "no string here" (a hole). */
typedef struct {
    const char *s;
    size_t len;
} lipi_strref;

#define LIPI_MAP_EMPTY UINT32_MAX

/* Maps a string to its index in a caller-held lipi_strref array `keys`
 * (the map stores indices only, so keys must outlive it). slot has mask + 1
 * entries (a power of two, at most half full); LIPI_MAP_EMPTY is a free slot. */
typedef struct {
    uint32_t *slot;
    size_t mask;
} lipi_strmap;

/* FNV-1a over the bytes, then a final avalanche so that the low bits used
 * for the slot index depend on every input byte. */
static inline uint64_t lipi_hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* Index of (s, len) among keys, or false when absent. */
static inline bool lipi_strmap_find(const lipi_strmap *m, const lipi_strref *keys,
                                    const char *s, size_t len, uint32_t *idx)
{
    if (!m->slot)
        return false;
    size_t i = (size_t)lipi_hash_bytes(s, len) & m->mask;
    for (;;) {
        uint32_t k = m->slot[i];
        if (k == LIPI_MAP_EMPTY)
            return false;
        if (keys[k].len == len && (len == 0 || memcmp(keys[k].s, s, len) == 0)) {
            *idx = k;
            return true;
        }
        i = (i + 1) & m->mask;
    }
}

/* Builds a map over keys[0..n) (entries with s == NULL are skipped). On a
 * repeated string returns LIPI_EINVAL with *dup_first < *dup_second the two
 * indices; LIPI_ENOMEM on allocation failure. m is left empty on failure. */
lipi_status lipi_strmap_build(lipi_strmap *m, const lipi_strref *keys, size_t n,
                              size_t *dup_first, size_t *dup_second);
void lipi_strmap_free(lipi_strmap *m);

/* ======================================================================== */
/* The model                                                                 */
/* ======================================================================== */

/* Model vocabulary. tok[id] is the token of id (tok[id].s == NULL for an id
 * that no model token has: tokenizer.json allows holes, which added tokens
 * usually fill). All token bytes live in one arena. */
typedef struct {
    lipi_strref *tok; /* n entries */
    size_t n;         /* highest model id + 1 */
    size_t count;     /* ids that have a token (n minus holes) */
    char *arena;
    lipi_strmap map;  /* token -> id */
} lipi_vocab;

/* Id of a model token (not an added token), false when absent. */
static inline bool lipi_vocab_find(const lipi_vocab *v, const char *s, size_t len,
                                   uint32_t *id)
{
    return lipi_strmap_find(&v->map, v->tok, s, len, id);
}

/* One BPE merge: the pair (left, right) becomes `result`, the id of the
 * string left + right with the right part's continuing_subword_prefix
 * removed (exactly as Hugging Face computes it, so "a" + "##b" -> "ab"). */
typedef struct {
    uint32_t left, right, result;
} lipi_merge;

typedef struct {
    lipi_model_type type;    /* LIPI_MODEL_NONE: no model set yet */
    lipi_model_options opt;  /* opt.unk_id: id of the unknown token, -1 when
                                none *or* when unk_token names a string that
                                is not in the vocabulary (see unk_token) */
    lipi_vocab vocab;

    double *scores;          /* Unigram: scores[id] (log probabilities); else NULL */
    bool f32_scores;         /* Unigram read from a SentencePiece .model: paths
                                are scored in float32, as SentencePiece sums
                                them (ties then break as they do there) */

    bool rank_ids;           /* BPE from a tiktoken rank file: id = rank, and
                                the merges are tiktoken's (encoder/backtrack.c) */
    lipi_merge *merges;      /* BPE: merges[rank], n_merges of them; else NULL */
    size_t n_merges;         /* (The encoder keeps its own (left, right) ->
                                rank table, encoder/models.c.) */

    /* BPE, WordPiece, WordLevel: the "unk_token" string (NULL for JSON
     * null). Hugging Face accepts an unk_token that is not in the vocab and
     * only fails when encoding needs it; the encoder should do the same when
     * unk_token != NULL but opt.unk_id < 0. */
    char *unk_token;
    size_t unk_len;

    /* BPE settings kept only so that saving writes what was loaded. */
    bool has_dropout;        /* "dropout" was a number, not null */
    double dropout;          /* in [0, 1] */
    bool prefix_null;        /* "continuing_subword_prefix": null (not "") */
    bool suffix_null;        /* "end_of_word_suffix": null (not "") */
    bool merges_legacy;      /* merges were "a b" strings (else ["a", "b"]) */

    /* Read from a snapshot (snapshot.c): vocab.arena, vocab.map.slot,
     * scores and merges point into this read-only mapping of the
     * file, which the model owns (unmapped, not freed, when cleared). */
    void *mapped;
    size_t mapped_len;
} lipi_vocab_model;

/* Rank of the merge of (left, right), false when the pair does not merge.
 * A pair listed twice gives its *last* rank, as Hugging Face's merge map
 * (it keeps the last insert). A scan of the merges: only tests ask, and a
 * map here would be built (and snapshotted) for every BPE model while the
 * encoder keeps its own (encoder/models.c). */
static inline bool lipi_merge_find(const lipi_vocab_model *m, uint32_t left, uint32_t right,
                                   uint32_t *rank)
{
    for (size_t r = m->merges ? m->n_merges : 0; r-- > 0;)
        if (m->merges[r].left == left && m->merges[r].right == right) {
            *rank = (uint32_t)r;
            return true;
        }
    return false;
}

/* ======================================================================== */
/* Post-processors (Hugging Face "post_processor")                           */
/* ======================================================================== */

typedef enum {
    LIPI_POST_BERT = 1,    /* [CLS] A [SEP] (B [SEP]), type ids 0 / 1 */
    LIPI_POST_ROBERTA,     /* <s> A </s> (</s> B </s>), all type ids 0 */
    LIPI_POST_BYTELEVEL,   /* only trims offsets */
    LIPI_POST_TEMPLATE,    /* TemplateProcessing */
    LIPI_POST_SEQUENCE,    /* items applied in order */
} lipi_post_type;

/* A (token, id) pair as in "sep": ["[SEP]", 102]. */
typedef struct {
    char *token;
    size_t len;
    uint32_t id;
} lipi_post_token;

/* One piece of a template: an input sequence ($A / $B) or a special token. */
typedef struct {
    bool is_special;   /* true: special token, false: input sequence */
    uint8_t seq;       /* input sequence: 0 = A, 1 = B */
    size_t special;    /* special token: index into lipi_post_processor.special */
    uint32_t type_id;
} lipi_template_piece;

/* A template special token: its name (the "id" in the template, e.g.
 * "[CLS]") and the ids / token strings it expands to (usually one). */
typedef struct {
    char *name;
    size_t name_len;
    size_t n;          /* number of ids (= number of tokens) */
    uint32_t *ids;
    char **tokens;
    size_t *token_lens;
} lipi_template_special;

typedef struct lipi_post_processor {
    lipi_post_type type;
    /* Bert, Roberta */
    lipi_post_token sep, cls;
    /* Roberta, ByteLevel */
    bool trim_offsets, add_prefix_space;
    bool use_regex;                 /* ByteLevel */
    /* Template */
    lipi_template_piece *single, *pair;
    size_t n_single, n_pair;
    lipi_template_special *special; /* sorted by name (bytewise), as saved */
    size_t n_special;
    /* Sequence */
    struct lipi_post_processor *items;
    size_t n_items;
} lipi_post_processor;

/* ======================================================================== */
/* Decoders (Hugging Face "decoder")                                         */
/* ======================================================================== */

typedef enum {
    LIPI_DEC_BYTELEVEL = 1,  /* GPT-2 byte alphabet back to bytes */
    LIPI_DEC_WORDPIECE,      /* strip prefix, join with spaces, cleanup */
    LIPI_DEC_METASPACE,      /* replacement char back to spaces */
    LIPI_DEC_BYTEFALLBACK,   /* <0xNN> tokens back to bytes */
    LIPI_DEC_FUSE,           /* join all tokens into one */
    LIPI_DEC_STRIP,          /* drop `start` / `stop` copies of a char */
    LIPI_DEC_REPLACE,        /* pattern -> content */
    LIPI_DEC_BPE,            /* BPEDecoder: suffix -> space */
    LIPI_DEC_CTC,            /* dedup, drop pad, delimiter -> space */
    LIPI_DEC_SEQUENCE,       /* items applied in order */
} lipi_decoder_type;

typedef enum {
    LIPI_PREPEND_ALWAYS = 0,
    LIPI_PREPEND_FIRST,
    LIPI_PREPEND_NEVER,
} lipi_prepend_scheme;

/* An owned byte string (NUL-terminated as well). */
typedef struct {
    char *s;
    size_t len;
} lipi_ownstr;

/* Only the members of `type` are meaningful; the rest are zero. */
typedef struct lipi_decoder {
    lipi_decoder_type type;
    struct { bool add_prefix_space, trim_offsets, use_regex; } bytelevel;
    struct { lipi_ownstr prefix; bool cleanup; } wordpiece;
    struct {
        lipi_ownstr replacement;      /* exactly one UTF-8 character */
        lipi_prepend_scheme prepend_scheme;
        bool split;
    } metaspace;
    struct { lipi_ownstr content; size_t start, stop; } strip; /* content: one char */
    struct {
        bool regex;                   /* pattern is {"Regex": ...}, else {"String": ...} */
        lipi_ownstr pattern, content; /* regex is not compiled here */
    } replace;
    struct { lipi_ownstr suffix; } bpe;
    struct { lipi_ownstr pad_token, word_delimiter_token; bool cleanup; } ctc;
    struct { struct lipi_decoder *items; size_t n_items; } sequence;
} lipi_decoder;

/* ======================================================================== */
/* The tokenizer                                                             */
/* ======================================================================== */

struct lipi_tokenizer {
    lipi_normalizer *normalizer;
    lipi_pretokenizer *pretokenizer;
    lipi_vocab_model model;
    lipi_post_processor *post;
    lipi_decoder *decoder;

    lipi_added_token *added;  /* sorted by id, ids unique; content owned */
    size_t n_added;
    lipi_strref *added_keys;  /* added_keys[i] = added[i].content */
    lipi_strmap added_map;    /* content -> index into added */
    bool added_may_shadow;    /* an added id may be a model token's (read
                                 from a tokenizer.json: Hugging Face's
                                 numbering, tokenizer_json.c hf_added_id) */

    json_t *truncation;       /* owned references, NULL for JSON null */
    json_t *padding;
    bool table_cache;         /* the encoder may keep its tables on disk
                                 (lipi_tokenizer_open set it: tabcache.c) */
    char snapshot_key[65];    /* "" or, for a tokenizer lipi_tokenizer_open
                                 read with the cache on, the key of its
                                 snapshot (snapshot.c), which names the
                                 source files and so whatever is built
                                 from them */
};

/* Frees what the pointer owns, then the pointer. NULL is a no-op. */
void lipi_post_processor_free(lipi_post_processor *p);
void lipi_decoder_free(lipi_decoder *d);

/* Members only (the structs are embedded in arrays and in lipi_tokenizer). */
void lipi_post_processor_clear(lipi_post_processor *p);
void lipi_decoder_clear(lipi_decoder *d);
void lipi_vocab_model_clear(lipi_vocab_model *m);

/* Builds m->vocab from tok[0..n) (holes allowed: tok[i].s == NULL). The bytes
 * are copied into one arena. A repeated token: LIPI_EINVAL with the two ids
 * in *dup_first < *dup_second. */
lipi_status lipi_vocab_build(lipi_vocab *v, const lipi_strref *tok, size_t n,
                             size_t *dup_first, size_t *dup_second);

/* Builds m->merges from pairs[r] = {left id, right id} (ids must
 * already be < m->vocab.n with a token; m->vocab and
 * m->opt.continuing_subword_prefix must be set). When the joined string of a
 * merge is not in the vocabulary, returns LIPI_EINVAL with *bad_rank set. */
lipi_status lipi_merges_build(lipi_vocab_model *m, const uint32_t (*pairs)[2], size_t n,
                              size_t *bad_rank);

/* Moves the built model *m into t (replacing t's model) once the added
 * tokens agree with it (an added token that is also a model token must have
 * the model's id, and no added token may take another model token's id).
 * On success *m is emptied; on failure t is unchanged, *m still owns its
 * parts, and err names the first conflicting added token. */
lipi_status lipi_tokenizer_install_model(lipi_tokenizer *t, lipi_vocab_model *m,
                                         lipi_error *err);

/* Hugging Face's join of a merge: left + right without the first
 * prefix_len bytes of right, into out (cleared first). LIPI_EINVAL when
 * right is shorter than the prefix. */
lipi_status lipi_merge_join(lipi_strref left, lipi_strref right, size_t prefix_len,
                            lipi_buf *out);

/* Replaces t's added tokens with toks[0..n): the array and every content
 * are stolen (freed even on error; both allocated with lipi_malloc). The
 * tokens are sorted by id. Empty contents, repeated ids or contents, and
 * disagreements with the model (see lipi_tokenizer_add_token) fail with
 * LIPI_EINVAL naming the tokens; t is then unchanged. */
lipi_status lipi_tokenizer_set_added(lipi_tokenizer *t, lipi_added_token *toks, size_t n,
                                     lipi_error *err);

/* lipi_tokenizer_load_json with the model given: *m (built, stolen and
 * emptied even on error) is installed in place of the file's "model"
 * section, which is not read. The snapshot (snapshot.c) keeps the other
 * sections as JSON this way. */
lipi_status lipi_tokenizer_load_json_model(const char *json, size_t len, const char *name,
                                           lipi_vocab_model *m, lipi_tokenizer **out,
                                           lipi_error *err);

/* ======================================================================== */
/* Fast paths the encoder calls                                              */
/* ======================================================================== */

/* The encoder validates each input's UTF-8 once, then normalizes and
 * pre-tokenizes without checking again; for the commonest pre-tokenizers
 * (one Split on a pattern lipi scans by hand, a Metaspace that only cuts)
 * it scans spans of the text itself instead of building pieces. */

/* lipi_normalize for text the caller has already checked to be valid
 * UTF-8 (the encoder checks each input once). */
lipi_status lipi_normalize_valid(const lipi_normalizer *n, const char *s, size_t len,
                                 lipi_normalized *out, bool want_align, lipi_error *err);


/* lipi_pretokenize for text the caller has already checked to be valid
 * UTF-8 (the encoder checks each input once, before normalizing). */
lipi_status lipi_pretokenize_valid(const lipi_pretokenizer *p, const char *s, size_t len,
                                   lipi_pieces *out, lipi_error *err);


/* When p is one Split (alone or in a Sequence of one) that isolates the
 * matches of a pattern lipi scans by hand (not inverted), that scanner,
 * else NULL: then p's pieces are exactly the scanner's matches and the runs
 * between them, as they are in the text, and a caller may scan the text
 * itself instead of building pieces. */
const struct lipi_scanner *lipi_pretokenizer_scanner(const lipi_pretokenizer *p);


/* When p is one Metaspace (alone or in a Sequence of one) that splits and
 * never prepends, its replacement character, else 0: then on text without
 * a space p's pieces are the text cut before every replacement character. */
uint32_t lipi_pretokenizer_meta_split(const lipi_pretokenizer *p);


/* Cutting a long text (lipi_encode_stream): whether every piece p makes of
 * any text ends at or before the end of character c or starts after it, so
 * that a text cut right after c pre-tokenizes as the two parts do (pieces
 * in order, offsets shifted). True for c whitespace under BertPreTokenizer,
 * Whitespace and WhitespaceSplit, and punctuation under BertPreTokenizer;
 * also when such a node starts a Sequence whose later nodes only cut their
 * pieces without looking where they stand in the text. */
bool lipi_pretokenizer_cuts_after(const lipi_pretokenizer *p, uint32_t c);


/* The counterpart for normalizers: whether n (NULL: none) maps characters
 * one by one, so that a text cut after character c normalizes as the two
 * parts do, when c's own output ends in a starter. True for the BERT
 * normalizer's passes, Lowercase, StripAccents, Nmt and NFD, and sequences
 * of them. *last: the last code point of c's normalized form (false when
 * that form is empty, or could join what follows: NFD where c has no
 * boundary after it). out: scratch for normalizing c. */
bool lipi_normalizer_cut_after(const lipi_normalizer *n, uint32_t c, lipi_normalized *out,
                               uint32_t *last);


/* A hand-written scanner for a known split pattern (scanner.c). */
typedef struct lipi_scanner lipi_scanner;

/* Length in bytes of the match of the scanner's pattern starting exactly at
 * byte i of valid UTF-8 t[0..n) (i < n, on a character boundary), or 0 when
 * the pattern matches no text starting there. None of the known patterns
 * matches the empty string, so 0 is unambiguous. Lookarounds see all of t. */
size_t lipi_scan_match(const lipi_scanner *sc, const char *t, size_t n, size_t i);


/* ======================================================================== */
/* The table cache (tabcache.c)                                              */
/* ======================================================================== */

/* Tables the encoder builds from a vocabulary, kept on disk between
 * processes under a name that is the SHA-256 of what they are built from.
 * Nothing here reports an error: a cache that cannot be read or written
 * only means the tables are built. The payload is a sequence of arrays,
 * each padded to 8 bytes; the reader checks the header, the length and a
 * checksum, and the caller checks what the arrays hold. */

/* The checksum of a payload (a whole number of 8-byte words) that a
 * file's header holds. */
uint64_t lipi_tabcache_sum(const void *payload, size_t n);

/* False when $LIPI_CACHE is 0, off or no. */
bool lipi_tabcache_env_on(void);

/* The key of tables of `kind` built from keys[0..n) (holes allowed) and
 * extra[0..extra_len) (settings they depend on). LIPI_ENOMEM. */
lipi_status lipi_tabcache_key(const char *kind, const lipi_strref *keys, size_t n,
                              const void *extra, size_t extra_len, char out[65]);

/* The running checksum (16 lanes and the word count). */
typedef struct {
    uint64_t lane[16], words;
} lipi_tabcache_sum_state;

/* The checksum in steps, by one code path (PORTABLE anywhere; SSE2 and
 * AVX2 on x86-64), for tests: every path gives the same value. _words
 * takes the whole 8-byte words of data[0..n) (a partial one is ignored)
 * and returns false, doing nothing, when this build or CPU lacks path. */
enum { LIPI_TABCACHE_SUM_PORTABLE, LIPI_TABCACHE_SUM_SSE2, LIPI_TABCACHE_SUM_AVX2 };
void lipi_tabcache_sum_start(lipi_tabcache_sum_state *h);
bool lipi_tabcache_sum_words(lipi_tabcache_sum_state *h, const void *data, size_t n, int path);
uint64_t lipi_tabcache_sum_end(const lipi_tabcache_sum_state *h);

/* lipi_tabcache_key, but for tables built from tokenizer t: when t has a
 * snapshot key, the key is made from it (hashing a few bytes instead of
 * every token: ~80M instructions for o200k's backtracking tables under
 * valgrind's portable SHA-256); keys and extra are then not read. */
lipi_status lipi_tabcache_key_of(const lipi_tokenizer *t, const char *kind,
                                 const lipi_strref *keys, size_t n, const void *extra,
                                 size_t extra_len, char out[65]);

typedef struct {
    int fd;
    uint64_t left, want;
    lipi_tabcache_sum_state sum;
    bool bad;
} lipi_tabcache_reader;

/* Opens the file of (kind, key) when it exists with a valid header; false
 * when not (nothing to close). */
bool lipi_tabcache_open(lipi_tabcache_reader *r, const char *kind, const char key[65]);
/* Whether count entries of size bytes can still be in the file (check
 * before allocating for them). */
bool lipi_tabcache_fits(const lipi_tabcache_reader *r, uint64_t count, size_t size);
/* Reads the next n bytes (and their padding) into dst; false on a short
 * or bad file (every later call fails too). */
bool lipi_tabcache_get(lipi_tabcache_reader *r, void *dst, size_t n);
bool lipi_tabcache_get_u64(lipi_tabcache_reader *r, uint64_t *v);
/* Closes; true when the whole payload was read and its checksum holds. */
bool lipi_tabcache_close(lipi_tabcache_reader *r);

/* A cache file mapped whole (read-only, private), its header, length
 * and checksum checked on opening; arrays are then taken in place. The
 * mapping outlives the map struct: lipi_tabcache_unmap(base, size) ends it
 * (files are replaced by rename, never rewritten in place, so a mapping
 * stays valid while a newer file takes its name). */
typedef struct {
    void *base;
    size_t size;
    const unsigned char *p; /* next array */
    size_t left;
    bool bad;
} lipi_tabcache_map;

/* Maps the file of (kind, key); false when it is missing or bad (nothing
 * to unmap). */
bool lipi_tabcache_map_open(lipi_tabcache_map *m, const char *kind, const char key[65]);
/* The next count entries of size bytes (8-byte aligned, padding skipped),
 * or NULL when the file holds fewer (every later call fails too). */
const void *lipi_tabcache_map_next(lipi_tabcache_map *m, uint64_t count, size_t size);
void lipi_tabcache_unmap(void *base, size_t size);

typedef struct {
    lipi_atomic_file af;
    char kind[16], key[65];
    uint64_t len;
    lipi_tabcache_sum_state sum;
    bool open, bad;
} lipi_tabcache_writer;

/* Starts the file of (kind, key) as a temporary file (creating the
 * folder); false when that cannot be done (nothing to abort). */
bool lipi_tabcache_create(lipi_tabcache_writer *w, const char *kind, const char key[65]);
void lipi_tabcache_put(lipi_tabcache_writer *w, const void *data, size_t n);
void lipi_tabcache_put_u64(lipi_tabcache_writer *w, uint64_t v);
/* Renames the complete file into place (or drops it after a failed write). */
void lipi_tabcache_commit(lipi_tabcache_writer *w);
void lipi_tabcache_abort(lipi_tabcache_writer *w);

/* A file's SHA-256 (64 hex digits) by its stat identity (device, inode,
 * size, mtime and ctime in ns), when recorded; see tabcache.c for when a
 * record can be trusted. `what` names the bytes hashed: "" the whole
 * file, else a part of it ("gguf metadata"), each recorded apart. */
struct stat;
bool lipi_tabcache_digest_get(const struct stat *sb, const char *what, char hex[65]);
/* Records hex for a file stat()ed before (before) and after (after) the
 * read that hex is the SHA-256 of: nothing when the identity changed or the
 * file's times are less than lipi_tabcache_settle_ns old. */
void lipi_tabcache_digest_put(const struct stat *before, const struct stat *after,
                              const char *what, const char hex[65]);
/* 2 s; tests lower it to record files they have just written. */
extern long long lipi_tabcache_settle_ns;

/* ======================================================================== */
/* Snapshots of opened tokenizers (snapshot.c)                               */
/* ======================================================================== */

/* A whole opened tokenizer kept in the table cache folder, so that opening
 * the same source files again reads one file instead of parsing and
 * building. Named by lipi_snapshot_key; like the table cache, nothing here
 * reports an error (a missing, stale or bad snapshot means the tokenizer is
 * built from its sources, and a snapshot that cannot be written is no
 * error). */

/* The key of a tokenizer read by `reader` from parts[0..n) (the bytes of
 * every file the reader reads; s == NULL for an absent optional file) with
 * settings[0..settings_len) (the options that change what it builds).
 * False on allocation failure. */
bool lipi_snapshot_key(const char *reader, const lipi_strref *parts, size_t n,
                       const void *settings, size_t settings_len, char key[65]);

/* The tokenizer snapshot `key` holds, in *out (owned by the caller), or
 * false (and *out NULL) when there is none or it is bad in any way. */
bool lipi_snapshot_read(const char key[65], lipi_tokenizer **out);

/* Writes t as snapshot `key` (temporary file, then rename); best effort. */
void lipi_snapshot_write(const char key[65], const lipi_tokenizer *t);

#endif

/* lipi trainer module: word counting (in parallel, mergeable counts files),
 * balanced language shares, the BPE and Unigram trainers, and lipi_train,
 * the whole of `lipi train` in one call.
 *
 *   lipi_tokenizer *tok = NULL;  lipi_count_options co;  lipi_bpe_options bo;
 *   lipi_count_options_default(&co);  lipi_bpe_options_default(&bo);
 *   bo.common.vocab_size = 32000;
 *   if (lipi_bpe_train_files(files, n, norm, pre, &co, &bo, &tok, &err) == LIPI_OK)
 *       lipi_tokenizer_save(tok, "tokenizer.json", &err);
 *
 * The pieces compose for counting on many machines:
 *   lipi_count_to_file (per shard) -> lipi_counts_merge_files -> lipi_counts_load
 *   -> lipi_bpe_train_counts, which gives the same tokenizer as training on
 *   the concatenated shards.
 *
 * Conventions are those of tokenizer/tokenizer.h: lipi_status results,
 * optional lipi_error, byte spans, _new/_free ownership, _take_ steals.
 * The library never prints: progress goes to a callback.
 */
#ifndef LIPI_TRAINER_H
#define LIPI_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* ======================================================================== */
/* Word counts: word (bytes) -> 64-bit count                                 */
/* ======================================================================== */

typedef struct lipi_counts lipi_counts; /* not thread-safe; one per thread */

/* Both trainers skip words longer than this (in bytes, after normalizing
 * and pre-tokenizing), as SentencePiece skips sentences over its
 * max_sentence_length: a 100 MB line without spaces is one word, whose
 * symbols alone would take gigabytes to train on. Counting keeps them. */
#define LIPI_TRAIN_MAX_WORD_BYTES 65535u

/* One word and its count. `word` is borrowed from the table: valid until
 * the next call that adds to the table (add, add_each, merge, load) or its
 * free. */
typedef struct {
    const char *word;
    size_t len;
    uint64_t count;
} lipi_count_entry;

/* New empty table; free with lipi_counts_free. LIPI_ENOMEM only. */
lipi_status lipi_counts_new(lipi_counts **out);
void lipi_counts_free(lipi_counts *c);
/* Makes room for n distinct words at once (the table otherwise grows by
 * doubling, rehashing each time). The room is allocated and zeroed now.
 * LIPI_ENOMEM only; the table is unchanged then. */
lipi_status lipi_counts_reserve(lipi_counts *c, size_t n);

/* Adds n to the count of word[0..len) (the word is copied). Words are
 * non-empty byte strings shorter than 4 GiB; they may hold any byte,
 * including TAB and LF (the TSV writer escapes them). Empty or oversized
 * words: LIPI_EINVAL. A count that would pass UINT64_MAX: LIPI_EINVAL and
 * the count is left unchanged. */
lipi_status lipi_counts_add(lipi_counts *c, const char *word, size_t len, uint64_t n,
                            lipi_error *err);

/* Adds 1 to the count of each of n words, word i being
 * text[off[i] .. off[i+1]) (the layout of lipi_pieces). The same as n calls
 * of lipi_counts_add, but faster on big tables: the lookups of a group of
 * words overlap. On failure the words before the failing one are counted. */
lipi_status lipi_counts_add_each(lipi_counts *c, const char *text, const size_t *off, size_t n,
                                 lipi_error *err);

/* Adds every count of src into dst (src unchanged). On failure dst holds
 * part of src's counts. */
lipi_status lipi_counts_merge(lipi_counts *dst, const lipi_counts *src, lipi_error *err);

size_t lipi_counts_size(const lipi_counts *c);   /* number of distinct words */
uint64_t lipi_counts_total(const lipi_counts *c); /* sum of counts, saturating */
uint64_t lipi_counts_get(const lipi_counts *c, const char *word, size_t len); /* 0 if absent */

/* Unordered iteration: start with *pos = 0; returns false after the last
 * entry. The order depends on the insertion history, not only on the
 * contents: use lipi_counts_sorted where the order is visible. */
bool lipi_counts_next(const lipi_counts *c, size_t *pos, lipi_count_entry *e);

/* All entries sorted by count (descending), then by bytes (memcmp order,
 * a prefix first). *out is a new array owned by the caller (lipi_free);
 * its words are borrowed from c. */
lipi_status lipi_counts_sorted(const lipi_counts *c, lipi_count_entry **out, size_t *n);

/* ------------------------------------------------------------------------ */
/* Counts files (TSV)                                                        */
/*                                                                           */
/* One line per word, "word<TAB>count\n", sorted as lipi_counts_sorted: the  */
/* format SentencePiece reads with --input_format=tsv. The count is decimal  */
/* digits (1 .. 18446744073709551615). Three bytes cannot appear literally   */
/* in a word and are written as two-character escapes: backslash as "\\",    */
/* TAB as "\t", LF as "\n". Every other byte, CR and spaces included, is     */
/* written as is, so words without a backslash read the same in SentencePiece.*/
/* The reader accepts a leading UTF-8 BOM and CRLF line ends, and takes a    */
/* backslash before any other byte (or at the end of the word) literally.    */
/* ------------------------------------------------------------------------ */

/* Writes c to path sorted as above, atomically: a temporary file in the same
 * folder is renamed over path only when complete. "-" writes to stdout
 * (not atomic). LIPI_EIO with the system's reason on failure. */
lipi_status lipi_counts_save(const lipi_counts *c, const char *path, lipi_error *err);

/* Adds the counts of a counts file ("-" for stdin) into `into`. Every line
 * is checked: missing TAB, empty word, invalid UTF-8 in the word, a count
 * that is not decimal digits, zero, or does not fit in 64 bits, and sums
 * that overflow are LIPI_EFORMAT with err->path, err->line (1-based) and
 * err->offset (byte offset of the problem from the start of the file).
 * Empty lines are errors too. On failure `into` holds the lines before the
 * bad one (it stays valid to use and free). */
lipi_status lipi_counts_load(const char *path, lipi_counts *into, lipi_error *err);

/* Loads every counts file in paths[0..n) and writes their sum to out_path
 * (atomically, as lipi_counts_save). Memory: one table of the distinct
 * words of all inputs. */
lipi_status lipi_counts_merge_files(const char *const *paths, size_t n, const char *out_path,
                                    lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Counts runs (binary)                                                      */
/*                                                                           */
/* The intermediate files of a count spread over many machines (lipi.dask):  */
/* cheaper to write and to read back than the TSV (no sort by count, no      */
/* decimal digits or escapes). A run is the bytes "LIPIRUN\x01"; then per    */
/* word, in ascending order of (64-bit hash of the word, word bytes): its    */
/* length and count as LEB128 varints (both >= 1) with the word's bytes      */
/* between them; then a 0 length, and 16 bytes: the number of words and a    */
/* checksum of the (hash, count) pairs, both little-endian. The order makes  */
/* a run a function of its counts only (and a word appear once). The hash    */
/* is the one lipi's tables use; runs are read back on hosts of the same     */
/* byte order. The final file of a distributed count stays the TSV.          */
/* ------------------------------------------------------------------------ */

/* Writes c to path as a run, atomically (as lipi_counts_save). */
lipi_status lipi_counts_save_run(const lipi_counts *c, const char *path, lipi_error *err);

/* Adds the counts of a run into `into`. Everything is checked: the magic,
 * varints (truncated, overlong), lengths past the end of the file, a word
 * that is not UTF-8, a count of 0, words out of order or repeated, the
 * trailer (number of words, checksum), bytes after it, sums that overflow:
 * LIPI_EFORMAT with err->path and err->offset (the byte where the problem
 * is; err->line is 0). On failure `into` holds part of the run's counts. */
lipi_status lipi_counts_load_run(const char *path, lipi_counts *into, lipi_error *err);

/* Loads every run in paths[0..n) and writes their sum to out_path,
 * atomically: as a run, or with tsv as the counts file lipi_counts_save
 * writes (the bytes `lipi count` writes for the same words). Memory: one
 * table of the distinct words of all inputs. */
lipi_status lipi_counts_merge_runs(const char *const *paths, size_t n, const char *out_path,
                                   bool tsv, lipi_error *err);

/* ======================================================================== */
/* Progress                                                                  */
/* ======================================================================== */

typedef enum {
    LIPI_PHASE_COUNT = 0, /* reading and counting the corpus */
    LIPI_PHASE_MERGE,     /* learning merges */
    LIPI_PHASE_SEED,      /* Unigram: suffix array and seed pieces */
    LIPI_PHASE_EM,        /* Unigram: EM and pruning; merges_done and
                             merges_total count EM steps (an E-step plus
                             M-step, or a pruning) done and expected */
} lipi_train_phase;

typedef struct {
    lipi_train_phase phase;
    uint64_t bytes_read;   /* COUNT: raw input bytes read so far (compressed
                              bytes for .gz/.xz/.zst files): with
                              bytes_total, the share done */
    uint64_t bytes_total;  /* COUNT: sum of the input files' sizes; 0 when
                              unknown (stdin, pipes) */
    uint64_t text_bytes;   /* COUNT: text read so far, decompressed: the
                              amount and the rate to show */
    uint64_t lines;        /* COUNT: lines read so far */
    size_t merges_done;    /* MERGE: merges learned so far */
    size_t merges_total;   /* MERGE: most merges the run can make */
    bool done;             /* the last report of this phase */
} lipi_progress;

/* Called on the thread that called the training or counting function, a few
 * times per second of work at most, and once with done = true at the end of
 * each phase. It must not call back into the object being trained. */
typedef void (*lipi_progress_fn)(const lipi_progress *p, void *user);

/* ======================================================================== */
/* Counting a corpus                                                         */
/* ======================================================================== */

typedef struct {
    size_t threads;             /* counting threads; 0 = online CPUs (default) */
    lipi_invalid_mode invalid;  /* invalid UTF-8 in the input (default ERROR) */
    lipi_progress_fn progress;  /* NULL: no reports (default) */
    void *progress_user;
    lipi_record_options records; /* what a record is (default: a line); its
                                    `invalid` is ignored for the one above,
                                    its text_field borrowed */
} lipi_count_options;

void lipi_count_options_default(lipi_count_options *opt);

/* Reads every file (lipi_record_reader with opt->records: "-" is stdin,
 * .gz/.xz/.zst are decompressed; a record is a line by default, or a JSONL
 * object's text, a whole file, a NUL-separated record), normalizes each
 * record with `norm` (NULL: none) and splits it with `pre` (required), and
 * counts the pieces' texts. The result is the
 * same for every thread count. *out is a new table owned by the caller.
 * Fails on the first bad record (invalid UTF-8 under LIPI_INVALID_ERROR,
 * bad JSON, normalizer or pattern errors) with the file and record number
 * (err->line); nothing is returned then. norm and pre are borrowed and shared by the threads.
 *
 * For byte-level BPE pass the plain split (e.g. the pattern), not a
 * pre-tokenizer that maps to the GPT-2 byte alphabet: counts hold raw text
 * and the trainer does the byte-level mapping. */
lipi_status lipi_count_files(const char *const *paths, size_t n_paths,
                             const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                             const lipi_count_options *opt, lipi_counts **out, lipi_error *err);

/* lipi_count_files, then lipi_counts_save to out_path. */
lipi_status lipi_count_to_file(const char *const *paths, size_t n_paths,
                               const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                               const lipi_count_options *opt, const char *out_path,
                               lipi_error *err);

/* ======================================================================== */
/* Fair vocabularies: per-language counts, smoothing, parity-aware training  */
/* ======================================================================== */

/* Multilingual corpora starve small languages: frequency is all BPE and
 * Unigram see. A lipi_balance holds word counts per language, from one file
 * per language or by the ICU script of each word of mixed files, and gives
 * the trainers counts reweighted per language (smoothed) or the language
 * of every word plus a line-aligned dev set (parity):
 *
 *   lipi_balance *bal;  lipi_counts *train;
 *   lipi_balance_new(&bal);
 *   lipi_balance_add_lang(bal, "hin_Deva", hindi_counts, &err);
 *   lipi_balance_add_mixed(bal, other_counts, &err);
 *   lipi_balance_add_dev(bal, "hin_Deva", hindi_dev_counts, &err);  (parity)
 *   lipi_balance_train_counts(bal, LIPI_BALANCE_PARITY, 0, &train, &err);
 *   bpe_opt.common.balance = bal;
 *   lipi_bpe_train_counts(train, norm, pre, &bpe_opt, &tok, &err);
 *
 * docs/FAIRNESS.md describes the methods and their sources. */

typedef enum {
    LIPI_BALANCE_NONE = 0, /* the union of all counts, as without a balance */
    LIPI_BALANCE_SMOOTHED, /* XLM-R's exponentially smoothed language shares */
    LIPI_BALANCE_PARITY,   /* parity-aware: the worst language on the dev set first */
} lipi_balance_mode;

typedef struct lipi_balance lipi_balance;

/* New empty balance; free with lipi_balance_free. LIPI_ENOMEM only. */
lipi_status lipi_balance_new(lipi_balance **out);
void lipi_balance_free(lipi_balance *b);

/* Adds the counts c (borrowed) to language `lang` (a name such as
 * "hin_Deva", created on first use; at most 65535 languages). LIPI_EINVAL
 * for an empty name, LIPI_ENOMEM. */
lipi_status lipi_balance_add_lang(lipi_balance *b, const char *lang, const lipi_counts *c,
                                  lipi_error *err);

/* Adds the counts c (borrowed) of mixed text: each word goes to the
 * language named by its dominant script (the ICU short name of the script
 * with the most code points in the word, Common and Inherited not counted,
 * ties to the script seen first in the word: "Deva", "Latn", "Taml"); words with no
 * letter of any script go to no language (weight 1, never parity-selected). */
lipi_status lipi_balance_add_mixed(lipi_balance *b, const lipi_counts *c, lipi_error *err);

/* Adds one file of the parity dev set: its word counts c (borrowed; made
 * with the normalizer and pre-tokenizer of training) under the file's label
 * ("hin_Deva" for hin_Deva.txt). The file belongs to the training language
 * of that name, else to the one named by the dominant script of its text;
 * *used (may be NULL) tells whether there is one (a dev file of a language
 * without training data is not used). The dev files of one language are
 * summed and their number kept, so languages are compared per file. A tie
 * of scripts in a dev file goes to the lowest ICU script code. */
lipi_status lipi_balance_add_dev(lipi_balance *b, const char *label, const lipi_counts *c,
                                 bool *used, lipi_error *err);

/* Parity target of language `lang` (a lipi_balance_add_lang name or a
 * script of mixed text such as "Telu"; NULL or "*": every language without
 * a target of its own; default 1): parity compares each dev language's
 * tokens per dev file divided by its target, so a language with target
 * 1.5 is served as if on par once it costs 1.5 times the others (per-
 * language targets as Hugging Face's ParityBpeTrainer `ratio`). Call after
 * the languages are added. LIPI_EINVAL for a ratio outside [0.01, 100] or
 * a name that is no language. */
lipi_status lipi_balance_set_target(lipi_balance *b, const char *lang, double ratio,
                                    lipi_error *err);

/* Number of languages (the no-language class not counted), their names and
 * word masses (sum of the counts of their words); i from 0. Borrowed. */
size_t lipi_balance_lang_count(const lipi_balance *b);
const char *lipi_balance_lang_name(const lipi_balance *b, size_t i);
uint64_t lipi_balance_lang_mass(const lipi_balance *b, size_t i);

/* Smoothed weights, fixed point (2^32 = 1), of languages 0..count-1 into
 * w: with q_i = n_i / N the language's share of the word mass and
 * p_i = q_i^alpha / sum_j q_j^alpha (XLM-R, alpha in [0, 1]), w_i = p_i / q_i
 * rounded to the nearest 2^-32 (at least 2^-32), so language i's counts sum
 * to about p_i * N. A script of mixed text with under 0.1% of all words
 * (stray letters, not a language) keeps weight 1 and stays out of N.
 * LIPI_EINVAL for alpha outside [0, 1]. */
lipi_status lipi_balance_weights(const lipi_balance *b, double alpha, uint64_t *w, lipi_error *err);

/* The counts to train on, a new table (*out, the caller's):
 * NONE and PARITY: the sum of every language's counts (what counting all
 * files together gives); SMOOTHED: each language's count c of a word
 * becomes floor((c * w_i + 2^31) / 2^32) with w_i from lipi_balance_weights
 * (round half up, computed in 128 bits), at least 1 so no seen word
 * vanishes; words of no language keep c; a word counted by several
 * languages gets the sum. Also fixes each word's language for parity
 * training, so b must not change afterwards, and the first call sorts the
 * languages by name (lipi_balance_lang_name's order; every tie between
 * languages goes to the one first by name). LIPI_EINVAL (alpha; no words),
 * LIPI_ENOMEM. */
lipi_status lipi_balance_train_counts(lipi_balance *b, lipi_balance_mode mode, double alpha,
                                      lipi_counts **out, lipi_error *err);

/* ======================================================================== */
/* The trainers' common options                                              */
/* ======================================================================== */

/* What BPE and Unigram both take, as SentencePiece's TrainerInterface holds
 * it for all its models; each algorithm's options embed it as `common`
 * (trainer/front.c holds the parts both trainers run: special tokens, the
 * character coverage rule, tokenizer assembly). */
typedef struct {
    size_t vocab_size;         /* final vocabulary size, specials and byte
                                  pieces included (default 8000) */
    const char *const *special_tokens; /* NUL-terminated strings, borrowed; */
    size_t n_special;          /* ids 0 .. n-1 in this order */
    const char *unk_token;     /* the unknown token (per algorithm) */
    bool byte_fallback;        /* 256 "<0xNN>" tokens right after the special
                                  tokens (default true) */
    double character_coverage; /* keep the most frequent code points that
                                  cover this share of all characters, the
                                  rest go to byte fallback (default 1.0) */
    bool grapheme_guard;       /* no token joins part of a grapheme cluster
                                  with anything outside it (default true) */
    size_t threads;            /* 0 = online CPUs (default); the result never
                                  depends on it */
    lipi_progress_fn progress; /* NULL: no reports (default) */
    void *progress_user;
    const lipi_balance *balance; /* parity-aware training (borrowed; NULL,
                                  the default: plain). The counts must be
                                  lipi_balance_train_counts(balance, PARITY). */
} lipi_train_common;

/* The defaults above. */
void lipi_train_common_default(lipi_train_common *c);

/* ======================================================================== */
/* BPE trainer                                                               */
/* ======================================================================== */

typedef enum {
    LIPI_UNITS_CHAR = 0, /* base symbols are code points, with byte fallback
                            (like SentencePiece BPE) */
    LIPI_UNITS_BYTE,     /* base symbols are the 256 bytes, vocabulary in the
                            GPT-2 byte alphabet (GPT-2 / RoBERTa ByteLevel) */
} lipi_units;

typedef struct {
    lipi_train_common common;  /* defaults of lipi_train_common_default; for
                                  BPE: byte_fallback and character_coverage
                                  apply to char units only, unk_token is
                                  NULL or one of special_tokens, specials
                                  get ids 0 .. n_special-1, and a parity
                                  balance makes each merge the most
                                  frequent pair in the words of the language
                                  whose dev set has the most tokens per
                                  file, while worst / best >
                                  parity_threshold; else the most frequent
                                  pair overall (see docs/FAIRNESS.md) */
    lipi_units units;          /* default LIPI_UNITS_CHAR */
    uint64_t min_frequency;    /* stop when the best pair is rarer (default 2) */
    size_t max_token_length;   /* longest token in characters (code points;
                                  bytes for byte units); 0 = no limit (default) */
    size_t limit_alphabet;     /* char units: keep at most this many code
                                  points, the most frequent; 0 = all (default) */
    double parity_threshold;   /* 0 (default) or 1: always the worst language */
    double parity_exponent;    /* K > 0: instead of the worst language's best
                                  pair, the pair with the highest
                                  count * (cost / best cost)^K among every
                                  language's best pair, cost being dev
                                  tokens per dev file: a path from plain BPE
                                  (K near 0) to the paper's rule (K large).
                                  0, the default: the paper's rule */
    double parity_others;      /* with K > 0: the best pair of each language
                                  without a dev file scores count * W, as
                                  if it cost what the cheapest dev language
                                  costs, times W in (0, 1]; 0, the default:
                                  such languages are never chosen */
} lipi_bpe_options;

void lipi_bpe_options_default(lipi_bpe_options *opt);

/* A trained BPE vocabulary and merge list; immutable. */
typedef struct lipi_bpe_model lipi_bpe_model;

/* Learns BPE merges from word counts.
 *
 * Vocabulary order: special tokens, the 256 byte-fallback tokens (char
 * units with byte_fallback), the alphabet (code points, or the 256 bytes,
 * by frequency descending then bytes), then merge results in merge order.
 * Each step merges the adjacent pair with the highest count; ties go to the
 * pair whose left token's bytes are smaller, then whose right token's bytes
 * are. With the grapheme guard, a pair occurrence counts (and is merged) only
 * if the merged token is part of one extended grapheme cluster of the word,
 * or whole clusters of it: "क्षि" can grow from क + ् + ष + ि, but "ि" never
 * joins the next letter. The guard trains in two phases: first only merges
 * inside clusters, and only of pairs none of whose occurrences crosses a
 * cluster edge, until no such pair reaches min_frequency; so every cluster
 * seen min_frequency times is built by the lowest-ranked merges, and a BPE
 * encoder (Hugging Face's included) never puts a token boundary inside such
 * a cluster. Then all pairs are counted again and merges of whole clusters
 * join in. Training stops at vocab_size tokens, when the best pair is rarer
 * than min_frequency, or when no pair is left. A merge whose result equals an
 * existing token string reuses that token's id; none makes a byte-fallback
 * token ("<0x41>" stays in pieces).
 *
 * Fails with LIPI_EINVAL for bad options and for a vocab_size below the
 * minimum (specials + byte tokens + alphabet; err->msg states it), for
 * counts with no words ("nothing to train on"), and with LIPI_EFORMAT for a
 * word that is not valid UTF-8. counts is borrowed. */
lipi_status lipi_bpe_train(const lipi_counts *counts, const lipi_bpe_options *opt,
                           lipi_bpe_model **out, lipi_error *err);
void lipi_bpe_model_free(lipi_bpe_model *m);

lipi_units lipi_bpe_model_units(const lipi_bpe_model *m);
size_t lipi_bpe_model_vocab_size(const lipi_bpe_model *m);

/* Token `id` as it appears in tokenizer.json (GPT-2 byte alphabet for byte
 * units). Borrowed; NULL if id is out of range. */
const char *lipi_bpe_model_token(const lipi_bpe_model *m, uint32_t id, size_t *len);

/* The text bytes a token stands for: the same as lipi_bpe_model_token except
 * for byte units, where it is the raw bytes before the GPT-2 mapping. Special
 * and byte-fallback tokens give their own text. Borrowed; NULL if out of range. */
const char *lipi_bpe_model_token_bytes(const lipi_bpe_model *m, uint32_t id, size_t *len);

size_t lipi_bpe_model_merge_count(const lipi_bpe_model *m);
/* Merge of rank r: the ids of its parts, the id it makes and the pair count
 * it had when it was chosen. rank must be below the merge count. */
void lipi_bpe_model_get_merge(const lipi_bpe_model *m, size_t rank, uint32_t *left,
                              uint32_t *right, uint32_t *result, uint64_t *count);

/* Builds the tokenizer: model BPE with m's vocabulary and merges, the special
 * tokens as added special tokens, `norm` and `pre` installed (both stolen,
 * freed even on error; either may be NULL). Char units: byte_fallback as
 * trained. Byte units: byte_level model, and the pre-tokenizer becomes
 * Sequence[pre, ByteLevel(use_regex=false)]. *out is owned by the caller. */
lipi_status lipi_bpe_model_to_tokenizer(const lipi_bpe_model *m, lipi_normalizer *norm,
                                        lipi_pretokenizer *pre, lipi_tokenizer **out,
                                        lipi_error *err);

/* lipi train --type bpe FILE...: counts the files (lipi_count_files with
 * norm and pre), trains (lipi_bpe_train), and builds the tokenizer
 * (lipi_bpe_model_to_tokenizer). norm and pre are stolen. */
lipi_status lipi_bpe_train_files(const char *const *paths, size_t n_paths,
                                 lipi_normalizer *norm, lipi_pretokenizer *pre,
                                 const lipi_count_options *count_opt,
                                 const lipi_bpe_options *opt, lipi_tokenizer **out,
                                 lipi_error *err);

/* lipi train --type bpe --from-counts: trains on counts (borrowed) and
 * builds the tokenizer with norm and pre (stolen), which must be the ones
 * the counts were made with. */
lipi_status lipi_bpe_train_counts(const lipi_counts *counts, lipi_normalizer *norm,
                                  lipi_pretokenizer *pre, const lipi_bpe_options *opt,
                                  lipi_tokenizer **out, lipi_error *err);

/* ======================================================================== */
/* Unigram trainer                                                           */
/* ======================================================================== */

/* The unigram language model of Kudo (2018), trained as SentencePiece's
 * unigram_model_trainer does:
 *
 *   lipi_unigram_options uo;  lipi_count_options co;  lipi_pretokenizer *pre;
 *   lipi_unigram_options_default(&uo);  lipi_count_options_default(&co);
 *   uo.common.vocab_size = 32000;
 *   lipi_normalizer_new("indic", NULL, &norm, &err);
 *   lipi_unigram_pretokenizer_new(&pre, &err);
 *   lipi_unigram_train_files(files, n, norm, pre, &co, &uo, &tok, &err);
 *   lipi_tokenizer_save(tok, "tokenizer.json", &err);
 *   lipi_tokenizer_save_spm(tok, "model.model", &err);   (tokenizer.h)
 *
 * 1. Words and counts (lipi_count_files), by default with the indic
 *    normalizer and lipi_unigram_pretokenizer_new: words look like
 *    "▁नमस्ते", as SentencePiece's whitespace-split sentences do.
 * 2. Required characters: the most frequent code points covering
 *    character_coverage of all characters (the rest are left to byte
 *    fallback, or <unk>).
 * 3. Seed pieces: the required characters, plus the seed_size substrings
 *    of 2 .. max_piece_length code points with the highest frequency *
 *    length, found with a suffix array over the distinct words (each
 *    substring counted with the counts of the words it occurs in).
 * 4. EM over the distinct words weighted by their counts: E-step by
 *    forward-backward over each word's lattice (the encoder's lattice), on
 *    all threads; M-step with SentencePiece's Bayesian (digamma) update,
 *    dropping pieces expected less than 0.5 times. sub_iterations EM steps,
 *    then pruning: each piece's loss is the drop in likelihood when its
 *    uses go to its second-best segmentation; the lowest-loss pieces go
 *    until shrinking_factor of them are left, never below 1.1 * vocab_size.
 * 5. Final vocabulary: special tokens, then 256 "<0xNN>" pieces (with
 *    byte_fallback), then the required characters and the best-scoring
 *    pieces up to vocab_size, sorted by score (descending) then bytes. Scores
 *    are log probabilities; specials and byte pieces score 0.
 *
 * Grapheme guard (default on): a piece is only ever used where it is a part
 * of one extended grapheme cluster of the word or whole clusters of it, and
 * a substring that is never used so is not a seed. "क्षि" can be one piece
 * or a piece of one cluster, but "ि" never joins the next letter.
 *
 * The result does not depend on the thread count: E-step sums are
 * accumulated in 64-bit fixed point (2^-24 or finer), every other sum is of
 * integers or done in a fixed order. */

typedef struct {
    lipi_train_common common;   /* defaults of lipi_train_common_default,
                                   but character_coverage 0.9995 and
                                   unk_token "<unk>"; for Unigram: no
                                   special_tokens (NULL/0) means "<unk>",
                                   "<s>", "</s>"; the unknown piece is put
                                   first when it is not a special token;
                                   a parity balance weighs each pruning's
                                   loss per language, the languages whose
                                   dev sets cost the most tokens most (see
                                   docs/FAIRNESS.md) */
    size_t max_piece_length;    /* longest piece in code points (default 16) */
    size_t seed_size;           /* most seed substrings (default 1000000) */
    double shrinking_factor;    /* share of pieces kept by a pruning, in
                                   (0, 1) (default 0.75) */
    size_t sub_iterations;      /* EM steps before each pruning (default 2) */
    uint64_t sample;            /* lipi_unigram_train_files: train on a
                                   reservoir sample of this many lines; 0 =
                                   every line (default) */
    uint64_t sample_seed;       /* the sample's random seed (default 1): the
                                   same seed and input give the same sample */
    double parity_exponent;     /* a dev language's loss weight grows with
                                   (cost / cheapest cost)^K (default 4) */
    double parity_mass;         /* ... and with (T / its tokens)^M, T the
                                   most tokens of a dev language: M = 1
                                   (default) weighs each dev language as
                                   much as the biggest, 0 keeps its mass */
    double parity_others;       /* loss weight of the languages without a
                                   dev file, in (0, 1] (default 1) */
} lipi_unigram_options;

void lipi_unigram_options_default(lipi_unigram_options *opt);

/* SentencePiece's piece types (the ModelProto numbers). */
typedef enum {
    LIPI_PIECE_NORMAL = 1,
    LIPI_PIECE_UNKNOWN = 2,
    LIPI_PIECE_CONTROL = 3,
    LIPI_PIECE_USER_DEFINED = 4,
    LIPI_PIECE_BYTE = 6,
} lipi_piece_type;

/* A trained Unigram vocabulary; immutable. */
typedef struct lipi_unigram_model lipi_unigram_model;

/* Trains on word counts (borrowed). The vocabulary has vocab_size pieces, or
 * fewer when the corpus offers fewer candidates (a tiny corpus); the
 * special tokens keep ids 0 .. n-1. Fails with LIPI_EINVAL for bad options,
 * for counts with no words ("nothing to train on"), for a vocab_size below
 * the minimum (specials + byte pieces + required characters; err->msg
 * states it); LIPI_EFORMAT for a word that is not valid UTF-8; LIPI_EICU,
 * LIPI_ENOMEM. Words longer than 65535 bytes are skipped (SentencePiece
 * skips sentences over 4192). */
lipi_status lipi_unigram_train(const lipi_counts *counts, const lipi_unigram_options *opt,
                               lipi_unigram_model **out, lipi_error *err);
void lipi_unigram_model_free(lipi_unigram_model *m);

size_t lipi_unigram_model_vocab_size(const lipi_unigram_model *m);

/* Piece `id`: its bytes (borrowed, *len bytes), score and type; NULL when
 * id is out of range. score and type may be NULL. */
const char *lipi_unigram_model_piece(const lipi_unigram_model *m, uint32_t id, size_t *len,
                                     double *score, lipi_piece_type *type);

/* Builds the tokenizer: model Unigram with m's pieces and scores, unk_id
 * and byte_fallback as trained, the special tokens as added special tokens,
 * `norm` and `pre` installed (both stolen, freed even on error; either may
 * be NULL), and a decoder: ByteFallback (with byte_fallback), then
 * Metaspace when `pre` holds a Metaspace step (with its replacement and
 * prepend scheme), else Fuse. When `pre` holds a Metaspace step, the
 * tokenizer encodes as SentencePiece does: its pre-tokenizer is that
 * Metaspace alone (splitting, no prefix of its own), so the split pattern
 * only bounded pieces in training, and unless the scheme was "never" its
 * normalizer is Sequence[norm, Prepend("▁")] (the dummy prefix, also before
 * a leading space). Scores are rounded to multiples of 1/256 (exact sums in
 * float and double). *out is owned by the caller. */
lipi_status lipi_unigram_model_to_tokenizer(const lipi_unigram_model *m, lipi_normalizer *norm,
                                            lipi_pretokenizer *pre, lipi_tokenizer **out,
                                            lipi_error *err);

/* The default pre-tokenizer of Unigram training: Sequence[the "indic"
 * split with a leading space allowed before numbers too, Metaspace("▁",
 * prepend_scheme "first", split false)]. Spaces become "▁" and stay at the
 * front of their word, and the first word of a text gets one
 * (SentencePiece's dummy prefix):
 * "नमस्ते दुनिया! 42" -> ["▁नमस्ते", "▁दुनिया", "!", "▁42"]. Hugging Face
 * loads its tokenizer.json form unchanged. *out is owned by the caller. */
lipi_status lipi_unigram_pretokenizer_new(lipi_pretokenizer **out, lipi_error *err);

/* lipi train --type unigram FILE...: counts the files (lipi_count_files
 * with norm and pre and count_opt; with opt->sample, a seeded reservoir
 * sample of opt->sample lines is counted instead), trains, and builds the
 * tokenizer (lipi_unigram_model_to_tokenizer). norm and pre are stolen;
 * pre is required (LIPI_EINVAL). */
lipi_status lipi_unigram_train_files(const char *const *paths, size_t n_paths,
                                     lipi_normalizer *norm, lipi_pretokenizer *pre,
                                     const lipi_count_options *count_opt,
                                     const lipi_unigram_options *opt, lipi_tokenizer **out,
                                     lipi_error *err);

/* lipi train --type unigram --from-counts: trains on counts (borrowed) and
 * builds the tokenizer with norm and pre (stolen), which must be the ones
 * the counts were made with. */
lipi_status lipi_unigram_train_counts(const lipi_counts *counts, lipi_normalizer *norm,
                                      lipi_pretokenizer *pre, const lipi_unigram_options *opt,
                                      lipi_tokenizer **out, lipi_error *err);

/* ======================================================================== */
/* From inputs to a tokenizer in one call (what `lipi train` does)           */
/* ======================================================================== */

/* The whole run of `lipi train`, for any front end:
 *
 *   lipi_train_job job;
 *   lipi_train_job_default(&job);
 *   job.type = LIPI_TRAIN_UNIGRAM;  job.files = files;  job.n_files = n;
 *   job.unigram.common.vocab_size = 32000;
 *   lipi_normalizer_new("indic", NULL, &norm, &err);
 *   lipi_unigram_pretokenizer_new(&pre, &err);
 *   if (lipi_train(&job, norm, pre, &tok, &err) == LIPI_OK)
 *       lipi_tokenizer_save(tok, "tokenizer.json", &err);
 */

typedef enum {
    LIPI_TRAIN_BPE = 0,  /* lipi_bpe_train with job->bpe */
    LIPI_TRAIN_UNIGRAM,  /* lipi_unigram_train with job->unigram */
} lipi_train_type;

/* What a front end may want to tell its user while lipi_train runs (the
 * library never prints). Fields not named by the kind are NULL. */
typedef enum {
    LIPI_TRAIN_DEV_FILE_UNUSED, /* path: a parity dev file whose language
                                   has no training data, so it is not used */
    LIPI_TRAIN_LANGUAGES,       /* balance: the languages of a balanced run
                                   and their word masses, once counted;
                                   weights (smoothed only): each language's
                                   weight, 2^32 = 1 (lipi_balance_weights) */
} lipi_train_note_kind;

typedef struct {
    lipi_train_note_kind kind;
    const char *path;
    const lipi_balance *balance;
    const uint64_t *weights;
} lipi_train_note;

/* Called on the thread that called lipi_train; everything it points to is
 * borrowed for the call only. */
typedef void (*lipi_train_note_fn)(const lipi_train_note *n, void *user);

/* Inputs and options of one training run. All pointers are borrowed. */
typedef struct {
    lipi_train_type type;           /* default LIPI_TRAIN_BPE */
    const char *const *files;       /* text files ("-" is stdin; .gz, .xz, .zst) */
    size_t n_files;
    const char *const *counts_files; /* or counts files of lipi_count_to_file */
    size_t n_counts_files;          /* (not both files and counts files) */
    const char *const *lang_names;  /* files of one language each: name i */
    const char *const *lang_files;  /* ("hin_Deva") and file i; without a */
    size_t n_lang_files;            /* balance, plain inputs after `files` */
    lipi_balance_mode balance;      /* default NONE; see lipi_balance */
    double alpha;                   /* SMOOTHED: the exponent (default 0.3) */
    const char *dev;                /* PARITY (required): line-aligned dev
                                       files or their folder, read as
                                       lipi_parallel_files_open does */
    lipi_count_options count;       /* threads and invalid UTF-8 for counting */
    lipi_bpe_options bpe;           /* type BPE (its balance is set here) */
    lipi_unigram_options unigram;   /* type UNIGRAM (its balance is set here) */
    lipi_progress_fn progress;      /* counting and training reports, in place
                                       of those of the option structs; NULL:
                                       none (default) */
    void *progress_user;
    lipi_train_note_fn note;        /* NULL: no notes (default) */
    void *note_user;
    const char *const *target_langs; /* PARITY: lipi_balance_set_target of */
    const double *targets;          /* target_langs[i] ("*": the default) */
    size_t n_targets;               /* to targets[i], in this order */
} lipi_train_job;

/* Defaults: BPE, no balance, alpha 0.3, and the defaults of each options
 * struct. */
void lipi_train_job_default(lipi_train_job *job);

/* What lipi_train_job_share_options is told a front end set. */
enum {
    LIPI_TRAIN_SET_COVERAGE = 1u << 0,        /* bpe.common.character_coverage */
    LIPI_TRAIN_SET_MAX_LENGTH = 1u << 1,      /* bpe.max_token_length */
    LIPI_TRAIN_SET_PARITY_EXPONENT = 1u << 2, /* bpe.parity_exponent */
};

/* For front ends with one set of options for both trainers (`lipi train`,
 * lipi.train in Python), read into job->bpe: gives job->unigram the common
 * options (job->bpe.common), but keeps Unigram's own defaults for the
 * character coverage (unless `set` has LIPI_TRAIN_SET_COVERAGE), the special
 * tokens (when none were given) and the unknown token (when NULL); and
 * max_token_length and parity_exponent become Unigram's max_piece_length and
 * parity_exponent when `set` says they were given. */
void lipi_train_job_share_options(lipi_train_job *job, unsigned set);

/* The normalizer and pre-tokenizer that counting and training use, by the
 * names `lipi count` and `lipi train` (and lipi.train in Python) take:
 * normalizer `normalizer` with `opt` (NULL: defaults), and the pre-tokenizer
 * named `pattern` ("unigram": lipi_unigram_pretokenizer_new, any other name:
 * lipi_pretokenizer_new), or the PCRE2 `regex` when it is not NULL.
 * "bytelevel" is LIPI_EINVAL: the trainer maps bytes itself (byte units),
 * and mapping twice would train on the GPT-2 alphabet's UTF-8. On failure
 * nothing is left to free; else the caller owns *norm and *pre (lipi_train
 * takes them). */
lipi_status lipi_train_text_new(const char *normalizer, const lipi_normalizer_options *opt,
                                const char *pattern, const char *regex,
                                lipi_normalizer **norm, lipi_pretokenizer **pre, lipi_error *err);

/* Runs the job and builds the tokenizer, with norm and pre (stolen, freed
 * even on error) installed in it:
 *   - no balance: counts the files and the language files (or loads the
 *     counts files) and trains, as lipi_bpe_train_files / _counts and
 *     lipi_unigram_train_files / _counts do (Unigram's sample included);
 *   - SMOOTHED or PARITY: counts each language file, the other inputs by
 *     the script of each word, and for PARITY the dev files, into a
 *     lipi_balance, and trains on lipi_balance_train_counts (PARITY: with
 *     the balance in the trainer's options).
 * The result is the same on any number of threads. Fails as the counting
 * and training functions do, and with LIPI_EINVAL when no dev file belongs
 * to a training language (path: job->dev). *out is owned by the caller. */
lipi_status lipi_train(const lipi_train_job *job, lipi_normalizer *norm, lipi_pretokenizer *pre,
                       lipi_tokenizer **out, lipi_error *err);

#endif

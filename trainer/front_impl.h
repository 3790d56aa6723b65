/* Internal: the trainer front end (trainer/front.c), the parts BPE and
 * Unigram share, as SentencePiece's TrainerInterface holds them for all its
 * models. Included only by trainer/ files. */
#ifndef LIPI_TRAINER_FRONT_IMPL_H
#define LIPI_TRAINER_FRONT_IMPL_H

#include "tokenizer/base.h"
#include "trainer/trainer.h"

/* Checks special tokens s[0..n) (all non-NULL pointers expected): each is a
 * non-empty UTF-8 string, none is listed twice, and with byte_fallback
 * none is spelled like a byte piece that Hugging Face's ByteFallback
 * decoder would read as a byte ("<0x0A>", "<0x0a>"). LIPI_EINVAL naming
 * the token (its index i in s, or its text). */
lipi_status lipi_train_check_specials(const char *const *s, size_t n, bool byte_fallback,
                                      lipi_error *err);

/* A character (code point, or byte for byte-level BPE) and its count in the
 * corpus: words' counts times occurrences. */
typedef struct {
    uint32_t cp;
    uint64_t freq;
} lipi_char_count;

/* qsort order of lipi_char_count: count descending, then code point. */
int lipi_char_count_cmp(const void *a, const void *b);

/* SentencePiece's character coverage rule over c[0..n) sorted by
 * lipi_char_count_cmp: the number of most frequent characters taken while
 * the share of all characters they cover is below `coverage` (so 1.0 takes
 * every character with a count). Exact while the total is below 2^53. */
size_t lipi_train_required_chars(const lipi_char_count *c, size_t n, double coverage);

/* A trained vocabulary, ready to become a tokenizer. */
typedef struct {
    lipi_model_type type;          /* LIPI_MODEL_BPE or LIPI_MODEL_UNIGRAM */
    const lipi_model_options *opt; /* unk_id, byte_fallback, byte_level */
    const char *const *tokens;     /* tokens[0..n), as in tokenizer.json */
    const size_t *lens;
    const double *scores;          /* Unigram: log probabilities; BPE: NULL */
    size_t n;
    const uint32_t (*merges)[2];   /* BPE: merges by rank; Unigram: NULL */
    size_t n_merges;
    size_t n_special;              /* tokens 0 .. n_special-1 are the special
                                      tokens, added as special added tokens */
    const char *decoder_json;      /* the decoder, tokenizer.json text */
} lipi_trained_vocab;

/* Builds the tokenizer both trainers return: v's model, its special tokens
 * as added special tokens, the decoder, and norm and pre installed (both
 * stolen, freed even on error; either may be NULL). *out is the caller's.
 * LIPI_ENOMEM, and the failures of lipi_tokenizer_set_model. */
lipi_status lipi_train_assemble(const lipi_trained_vocab *v, lipi_normalizer *norm,
                                lipi_pretokenizer *pre, lipi_tokenizer **out, lipi_error *err);

#endif

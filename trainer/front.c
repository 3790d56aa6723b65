/* The trainer front end: what BPE and Unigram share, as SentencePiece's
 * TrainerInterface does for its models. The common options
 * (lipi_train_common, embedded in both algorithms' options), the checks of
 * the special tokens, the character coverage rule that picks the required
 * characters, and the assembly of a trained vocabulary into a
 * lipi_tokenizer. The algorithms (merges; seeds, EM and pruning) stay in
 * bpe.c and unigram.c. */
#include "trainer/front_impl.h"

void lipi_train_common_default(lipi_train_common *c)
{
    memset(c, 0, sizeof *c);
    c->vocab_size = 8000;
    c->byte_fallback = true;
    c->character_coverage = 1.0;
    c->grapheme_guard = true;
}

/* ------------------------------------------------------------------------ */
/* Special tokens                                                            */
/* ------------------------------------------------------------------------ */

lipi_status lipi_train_check_specials(const char *const *s, size_t n, bool byte_fallback,
                                      lipi_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!s[i] || !*s[i])
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "special token %zu is empty", i);
        size_t len = strlen(s[i]);
        if (lipi_utf8_valid_prefix(s[i], len) != len)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "special token %zu is not valid UTF-8", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(s[i], s[j]) == 0)
                return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                      "special token \"%s\" is listed twice", s[i]);
        /* Lenient: the decoder would turn "<0x0a>" into a byte as well. */
        if (byte_fallback && lipi_byte_token_parse(s[i], len, true) >= 0)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "special token \"%s\" would clash with a byte-fallback token",
                                  s[i]);
    }
    return LIPI_OK;
}

/* ------------------------------------------------------------------------ */
/* Character coverage                                                        */
/* ------------------------------------------------------------------------ */

int lipi_char_count_cmp(const void *pa, const void *pb)
{
    const lipi_char_count *a = pa, *b = pb;
    if (a->freq != b->freq)
        return a->freq > b->freq ? -1 : 1;
    return (a->cp > b->cp) - (a->cp < b->cp);
}

size_t lipi_train_required_chars(const lipi_char_count *c, size_t n, double coverage)
{
    uint64_t total = 0, acc = 0;
    for (size_t i = 0; i < n; i++)
        total = total > UINT64_MAX - c[i].freq ? UINT64_MAX : total + c[i].freq;
    size_t k = 0;
    /* SentencePiece's rule: add characters while the covered share is
     * still below the target. */
    while (k < n && (double)acc / (double)total < coverage) {
        acc = acc > UINT64_MAX - c[k].freq ? UINT64_MAX : acc + c[k].freq;
        k++;
    }
    return k;
}

/* ------------------------------------------------------------------------ */
/* Tokenizer assembly                                                        */
/* ------------------------------------------------------------------------ */

lipi_status lipi_train_assemble(const lipi_trained_vocab *v, lipi_normalizer *norm,
                                lipi_pretokenizer *pre, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st;
    lipi_tokenizer *t = NULL;
    *out = NULL;
    if (lipi_tokenizer_new(&t) != LIPI_OK) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    if (norm) {
        lipi_normalizer *n = norm;
        norm = NULL;
        TRY(lipi_tokenizer_take_normalizer(t, n));
    }
    if (pre) {
        lipi_pretokenizer *p = pre;
        pre = NULL;
        TRY(lipi_tokenizer_take_pretokenizer(t, p));
    }
    TRY(lipi_tokenizer_set_model(t, v->type, v->opt, v->tokens, v->lens, v->scores, v->n,
                                 v->merges, v->n_merges, err));
    for (size_t i = 0; i < v->n_special; i++) {
        lipi_added_token at = {0};
        at.content = (char *)v->tokens[i];
        at.len = v->lens[i];
        at.id = (uint32_t)i;
        at.special = true;
        TRY(lipi_tokenizer_add_token(t, &at, err));
    }
    TRY(lipi_tokenizer_set_decoder_json(t, v->decoder_json, strlen(v->decoder_json), err));
    *out = t;
    t = NULL;
done:
    if (st == LIPI_ENOMEM && err && !err->msg[0])
        lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    lipi_normalizer_free(norm);
    lipi_pretokenizer_free(pre);
    lipi_tokenizer_free(t);
    return st;
}

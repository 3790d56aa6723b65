/* Writing a Unigram tokenizer as a SentencePiece model (ModelProto).
 *
 * The protobuf wire format is small enough to write by hand: every field is
 * a tag (field number << 3 | wire type) followed by a varint (wire type 0),
 * a little-endian float (5) or a length and bytes (2, for strings and
 * nested messages). Fields written (sentencepiece_model.proto):
 *
 *   ModelProto       1 pieces (repeated), 2 trainer_spec, 3 normalizer_spec
 *   SentencePiece    1 piece, 2 score (float), 3 type
 *   TrainerSpec      3 model_type (1 = UNIGRAM), 4 vocab_size,
 *                    35 byte_fallback, 40 unk_id, 41 bos_id, 42 eos_id,
 *                    43 pad_id, 45 unk_piece, 46 bos_piece, 47 eos_piece,
 *                    48 pad_piece
 *   NormalizerSpec   1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
 *                    4 remove_extra_whitespaces, 5 escape_whitespaces
 *
 * The normalizer is carried as a charsmap (charsmap.c) when it is one of
 * lipi's named normalizers "nfc", "nfkc" or "indic" without options, as
 * "identity" when there is none; any other normalizer (lowercasing, accent
 * stripping, digit folding, a Hugging Face sequence) refuses the export
 * rather than write a model that normalizes differently. Whitespace follows the
 * tokenizer's Metaspace pre-tokenizer: spaces escaped to "▁", a dummy
 * prefix unless its prepend scheme is "never", and extra whitespace kept,
 * since Metaspace keeps it. */
#include <string.h>

#include "tokenizer/base.h"
#include "tokenizer/base_json.h"
#include "tokenizer/tokenizer_layout.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2, WIRE_I32 = 5 };

enum {
    PIECE_NORMAL = 1,
    PIECE_UNKNOWN = 2,
    PIECE_CONTROL = 3,
    PIECE_USER_DEFINED = 4,
    PIECE_BYTE = 6,
};

static lipi_status put_varint(lipi_buf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return lipi_buf_append(b, tmp, n);
}

static lipi_status put_tag(lipi_buf *b, uint32_t field, int wire)
{
    return put_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

/* int32 fields: a negative value is the varint of its 64-bit two's
 * complement (ten bytes), as protobuf writes it. */
static lipi_status put_int(lipi_buf *b, uint32_t field, int64_t v)
{
    lipi_status st = put_tag(b, field, WIRE_VARINT);
    return st != LIPI_OK ? st : put_varint(b, (uint64_t)v);
}

static lipi_status put_bytes(lipi_buf *b, uint32_t field, const void *p, size_t len)
{
    lipi_status st = LIPI_OK;
    TRY(put_tag(b, field, WIRE_LEN));
    TRY(put_varint(b, len));
    TRY(lipi_buf_append(b, p, len));
done:
    return st;
}

static lipi_status put_str(lipi_buf *b, uint32_t field, const char *s)
{
    return put_bytes(b, field, s, strlen(s));
}

static lipi_status put_float(lipi_buf *b, uint32_t field, float f)
{
    uint32_t u;
    unsigned char le[4];
    memcpy(&u, &f, sizeof u);
    for (int i = 0; i < 4; i++)
        le[i] = (unsigned char)(u >> (8 * i));
    lipi_status st = put_tag(b, field, WIRE_I32);
    return st != LIPI_OK ? st : lipi_buf_append(b, le, 4);
}

/* The named normalizer t carries ("identity" for none), or NULL when it is
 * none of those a charsmap can carry; *prepend when it ends in
 * Prepend("▁"), SentencePiece's dummy prefix as the Unigram trainer writes
 * it (spm_text_handling in trainer/unigram.c). */
static lipi_status normalizer_form(const lipi_tokenizer *t, const char **form, bool *prepend,
                                   lipi_error *err)
{
    static const char *const names[] = {"nfc", "nfkc", "indic", "none"};
    lipi_status st = LIPI_OK;
    json_t *have = NULL;
    const json_t *inner;
    *form = NULL;
    *prepend = false;
    if (!t->normalizer) {
        *form = "identity";
        return LIPI_OK;
    }
    if (!(have = lipi_normalizer_to_json(t->normalizer)))
        TRY(LIPI_ENOMEM);
    inner = have;
    const char *type = json_string_value(json_object_get(have, "type"));
    const json_t *steps = json_object_get(have, "normalizers");
    size_t k = json_array_size(steps);
    if (type && strcmp(type, "Sequence") == 0 && (k == 1 || k == 2)) {
        const json_t *last = json_array_get(steps, k - 1);
        const char *lt = json_string_value(json_object_get(last, "type"));
        const char *pp = json_string_value(json_object_get(last, "prepend"));
        if (lt && strcmp(lt, "Prepend") == 0 && pp && strcmp(pp, "\xe2\x96\x81") == 0) {
            *prepend = true;
            inner = k == 2 ? json_array_get(steps, 0) : NULL;
        }
    }
    if (!inner) {
        *form = "identity";
        goto done;
    }
    for (size_t i = 0; i < sizeof names / sizeof *names && !*form; i++) {
        lipi_normalizer *n = NULL;
        TRY(lipi_normalizer_new(names[i], NULL, &n, err));
        json_t *want = lipi_normalizer_to_json(n);
        lipi_normalizer_free(n);
        if (!want)
            TRY(LIPI_ENOMEM);
        if (json_equal(inner, want))
            *form = i == 3 ? "identity" : names[i];
        json_decref(want);
    }
done:
    json_decref(have);
    return st;
}

/* Token of id i and whether it is an added token (and special). */
static const char *token_of(const lipi_tokenizer *t, uint32_t id, size_t *len, int *type)
{
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k].id == id) {
            *len = t->added[k].len;
            *type = t->added[k].special ? PIECE_CONTROL : PIECE_USER_DEFINED;
            if ((int64_t)id == t->model.opt.unk_id)
                *type = PIECE_UNKNOWN;
            return t->added[k].content;
        }
    if (id < t->model.vocab.n && t->model.vocab.tok[id].s) {
        *len = t->model.vocab.tok[id].len;
        *type = PIECE_NORMAL;
        if ((int64_t)id == t->model.opt.unk_id)
            *type = PIECE_UNKNOWN;
        else if (t->model.opt.byte_fallback && lipi_byte_token_parse(t->model.vocab.tok[id].s, *len, false) >= 0)
            *type = PIECE_BYTE;
        return t->model.vocab.tok[id].s;
    }
    return NULL;
}

/* Id of a control piece spelled s, or -1. */
static int64_t control_id(const lipi_tokenizer *t, const char *s)
{
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k].special && t->added[k].len == strlen(s) &&
            memcmp(t->added[k].content, s, t->added[k].len) == 0 &&
            (int64_t)t->added[k].id != t->model.opt.unk_id)
            return t->added[k].id;
    return -1;
}

lipi_status lipi_tokenizer_to_spm(const lipi_tokenizer *t, char **out, size_t *out_len,
                                  lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_buf b = {0}, sub = {0};
    json_t *pj = NULL;
    char *charsmap = NULL;
    size_t charsmap_len = 0;
    const char *form;
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (t->model.type != LIPI_MODEL_UNIGRAM)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "SentencePiece export: expected a Unigram model");
    int64_t unk = t->model.opt.unk_id;
    if (unk < 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "SentencePiece export: expected an unknown token (unk_id), "
                              "SentencePiece needs one");
    bool prefix = false, escape = false;
    TRY(normalizer_form(t, &form, &prefix, err));
    if (!form) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "SentencePiece export: the tokenizer's normalizer cannot be written "
                            "into a .model; expected --normalizer indic, nfc, nfkc or none "
                            "without --lowercase, --strip-accents or --fold-digits");
        goto done;
    }
    if (strcmp(form, "identity") != 0)
        TRY(lipi_charsmap_build(form, &charsmap, &charsmap_len, err));
    size_t n = lipi_tokenizer_vocab_size(t);
    if (n > INT32_MAX)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "SentencePiece export: %zu tokens do not fit an int32", n);
    for (uint32_t id = 0; id < n; id++) {
        size_t len;
        int type;
        const char *s = token_of(t, id, &len, &type);
        if (!s || len == 0) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "SentencePiece export: expected a token for every id, found "
                                "none for id %u",
                                id);
            goto done;
        }
        double score = type == PIECE_NORMAL && t->model.scores && id < t->model.vocab.n
                           ? t->model.scores[id] : 0.0;
        sub.len = 0;
        TRY(put_bytes(&sub, 1, s, len));
        TRY(put_float(&sub, 2, (float)score));
        TRY(put_int(&sub, 3, type));
        TRY(put_bytes(&b, 1, sub.p, sub.len));
    }

    int64_t bos = control_id(t, "<s>"), eos = control_id(t, "</s>"), pad = control_id(t, "<pad>");
    size_t unk_len;
    int unk_type;
    const char *unk_s = token_of(t, (uint32_t)unk, &unk_len, &unk_type);
    sub.len = 0;
    TRY(put_int(&sub, 3, 1));
    TRY(put_int(&sub, 4, (int64_t)n));
    TRY(put_int(&sub, 35, t->model.opt.byte_fallback));
    TRY(put_int(&sub, 40, unk));
    TRY(put_int(&sub, 41, bos));
    TRY(put_int(&sub, 42, eos));
    TRY(put_int(&sub, 43, pad));
    TRY(put_bytes(&sub, 45, unk_s, unk_len));
    TRY(put_str(&sub, 46, "<s>"));
    TRY(put_str(&sub, 47, "</s>"));
    TRY(put_str(&sub, 48, "<pad>"));
    TRY(put_bytes(&b, 2, sub.p, sub.len));

    if (t->pretokenizer) {
        pj = lipi_pretokenizer_to_json(t->pretokenizer);
        if (!pj) {
            st = LIPI_ENOMEM;
            goto done;
        }
        const char *type = json_string_value(json_object_get(pj, "type"));
        if (!type || strcmp(type, "Metaspace") != 0) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "SentencePiece export: expected a pre-tokenizer that only "
                                "cuts at spaces (Metaspace), found %s; a .model cannot carry a "
                                "split pattern (older lipi Unigram tokenizers carry one; lipi's "
                                "trainer now saves Metaspace alone: train again)",
                                type ? type : "an unknown step");
            goto done;
        }
        const char *rep = json_string_value(json_object_get(pj, "replacement"));
        const char *scheme = json_string_value(json_object_get(pj, "prepend_scheme"));
        if (!rep || strcmp(rep, "\xe2\x96\x81") != 0) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "SentencePiece export: expected the Metaspace replacement "
                                "\"\xe2\x96\x81\" (SentencePiece's), found \"%s\"",
                                rep ? rep : "");
            goto done;
        }
        escape = true;
        /* Metaspace's own prefix is skipped before a leading space, where
         * SentencePiece's is not: exact for text without one. */
        prefix = prefix || !scheme || strcmp(scheme, "never") != 0;
    }
    sub.len = 0;
    TRY(put_str(&sub, 1, form));
    if (charsmap)
        TRY(put_bytes(&sub, 2, charsmap, charsmap_len));
    TRY(put_int(&sub, 3, prefix));
    TRY(put_int(&sub, 4, 0));
    TRY(put_int(&sub, 5, escape));
    TRY(put_bytes(&b, 3, sub.p, sub.len));

    *out = b.p;
    if (out_len)
        *out_len = b.len;
    b.p = NULL;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory writing a SentencePiece model");
    lipi_buf_free(&b);
    lipi_buf_free(&sub);
    lipi_free(charsmap);
    json_decref(pj);
    return st;
}

lipi_status lipi_tokenizer_save_spm(const lipi_tokenizer *t, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *data = NULL;
    size_t len = 0;
    lipi_atomic_file af;
    TRY(lipi_tokenizer_to_spm(t, &data, &len, err));
    TRY(lipi_atomic_open(&af, path, err));
    if (len && fwrite(data, 1, len, af.f) != len) {
        lipi_atomic_abort(&af);
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot write the model");
        goto done;
    }
    TRY(lipi_atomic_commit(&af, err));
done:
    lipi_free(data);
    return st;
}

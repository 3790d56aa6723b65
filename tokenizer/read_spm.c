/* SentencePiece .model files: a hand-written reader of the protobuf wire
 * format for ModelProto, and the tokenizer that gives SentencePiece's ids
 * (also used for GGUF llama and t5 vocabularies).
 *
 * The wire format: a message is a run of fields, each a varint tag
 * (field number << 3 | wire type) and a value: varint (0), 8 bytes (1),
 * varint length + bytes (2), 4 bytes (5). Unknown fields are skipped, so
 * models written by newer SentencePiece versions still load. Every length
 * is checked against the bytes left in its enclosing message before it is
 * used, so a hostile file can neither read out of bounds nor make a large
 * allocation: the only arrays grow with the pieces actually present.
 *
 * The fields used (sentencepiece_model.proto):
 *   ModelProto      1 pieces (repeated), 2 trainer_spec, 3 normalizer_spec
 *   SentencePiece   1 piece, 2 score (float), 3 type
 *   TrainerSpec     3 model_type, 24 treat_whitespace_as_suffix,
 *                   35 byte_fallback, 40 unk_id, 41 bos_id, 42 eos_id
 *   NormalizerSpec  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
 *                   4 remove_extra_whitespaces, 5 escape_whitespaces
 */
#include "tokenizer/read_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Protobuf wire format                                                      */
/* ======================================================================== */

typedef struct {
    const uint8_t *d; /* the whole file */
    size_t pos;       /* next byte to read */
    size_t end;       /* end of the message being read */
    size_t size;      /* bytes in the file */
    const char *name;
    lipi_error *err;
} pb;

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static lipi_status pb_fail(pb *b, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static lipi_status pb_fail(pb *b, size_t at, const char *fmt, ...)
{
    char msg[sizeof b->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lipi_error_set(b->err, LIPI_EFORMAT, b->name, 0, at, "%s", msg);
}

/* A varint of at most 10 bytes whose value fits in 64 bits. */
static lipi_status pb_varint(pb *b, uint64_t *v, const char *what)
{
    size_t start = b->pos;
    uint64_t x = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (b->pos >= b->end)
            return pb_fail(b, b->pos, "%s: expected a varint byte, found the end of the %s",
                           what, b->end == b->size ? "file" : "enclosing message");
        uint8_t c = b->d[b->pos++];
        if (shift == 63 && c > 1)
            return pb_fail(b, start, "%s: expected a varint of at most 64 bits, found more", what);
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
    }
    *v = x;
    return LIPI_OK;
}

/* Reads a tag; field numbers are 1 .. 2^29 - 1. */
static lipi_status pb_tag(pb *b, const char *msg, uint32_t *field, int *wire)
{
    lipi_status st = LIPI_OK;
    size_t at = b->pos;
    uint64_t tag;
    TRY(pb_varint(b, &tag, msg));
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
        return pb_fail(b, at, "%s: expected a field number from 1 to 536870911, found %llu", msg,
                       (unsigned long long)(tag >> 3));
    *field = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
done:
    return st;
}

/* The length of a length-delimited value, checked against the message. */
static lipi_status pb_len(pb *b, const char *what, size_t *start, size_t *len)
{
    lipi_status st = LIPI_OK;
    size_t at = b->pos;
    uint64_t n;
    TRY(pb_varint(b, &n, what));
    if (n > b->end - b->pos)
        return pb_fail(b, at, "%s: expected at most %zu bytes, found a length of %llu", what,
                       b->end - b->pos, (unsigned long long)n);
    *start = b->pos;
    *len = (size_t)n;
    b->pos += (size_t)n;
done:
    return st;
}

static lipi_status pb_fixed32(pb *b, const char *what, uint32_t *v)
{
    if (b->end - b->pos < 4)
        return pb_fail(b, b->pos, "%s: expected 4 bytes, found %zu", what, b->end - b->pos);
    const uint8_t *p = b->d + b->pos;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    b->pos += 4;
    return LIPI_OK;
}

static const char *wire_name(int wire)
{
    switch (wire) {
    case WIRE_VARINT:
        return "varint";
    case WIRE_I64:
        return "64-bit";
    case WIRE_LEN:
        return "length-delimited";
    case WIRE_I32:
        return "32-bit";
    default:
        return "unknown";
    }
}

/* Skips a value of an unknown field. Groups (wire types 3 and 4) were
 * never used by ModelProto, so they are an error like any unknown type. */
static lipi_status pb_skip(pb *b, const char *msg, uint32_t field, int wire, size_t tag_at)
{
    lipi_status st = LIPI_OK;
    uint64_t v;
    size_t s, n;
    char what[96];
    snprintf(what, sizeof what, "%s field %u", msg, field);
    switch (wire) {
    case WIRE_VARINT:
        return pb_varint(b, &v, what);
    case WIRE_I64:
        if (b->end - b->pos < 8)
            return pb_fail(b, b->pos, "%s: expected 8 bytes, found %zu", what, b->end - b->pos);
        b->pos += 8;
        return LIPI_OK;
    case WIRE_LEN:
        return pb_len(b, what, &s, &n);
    case WIRE_I32:
        if (b->end - b->pos < 4)
            return pb_fail(b, b->pos, "%s: expected 4 bytes, found %zu", what, b->end - b->pos);
        b->pos += 4;
        return LIPI_OK;
    default:
        st = pb_fail(b, tag_at, "%s: expected wire type 0, 1, 2 or 5, found %d", what, wire);
    }
    return st;
}

/* Fails unless a known field has the wire type its declaration implies. */
static lipi_status pb_want(pb *b, const char *msg, uint32_t field, int wire, int want,
                           size_t tag_at)
{
    if (wire == want)
        return LIPI_OK;
    return pb_fail(b, tag_at, "%s field %u: expected wire type %d (%s), found %d (%s)", msg,
                   field, want, wire_name(want), wire, wire_name(wire));
}

/* An int32 field: negative values come as 10-byte varints. */
static lipi_status pb_int32(pb *b, const char *what, int64_t *out)
{
    lipi_status st = LIPI_OK;
    size_t at = b->pos;
    uint64_t v;
    TRY(pb_varint(b, &v, what));
    int64_t x = (int64_t)v;
    if (x < INT32_MIN || x > INT32_MAX)
        return pb_fail(b, at, "%s: expected a 32-bit integer, found %lld", what, (long long)x);
    *out = x;
done:
    return st;
}

static lipi_status pb_bool(pb *b, const char *what, bool *out)
{
    lipi_status st = LIPI_OK;
    uint64_t v;
    TRY(pb_varint(b, &v, what));
    *out = v != 0;
done:
    return st;
}

/* ======================================================================== */
/* ModelProto                                                                */
/* ======================================================================== */

typedef struct {
    lipi_rd_piece_spm *pieces;
    size_t n, cap;
    int64_t model_type;
    bool byte_fallback, treat_whitespace_as_suffix;
    int64_t unk_id, bos_id, eos_id;
    size_t charsmap_off, charsmap_len;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} spm_model;

static lipi_status parse_piece(pb *b, size_t start, size_t len, spm_model *m)
{
    lipi_status st = LIPI_OK;
    pb sub = *b;
    char msg[48];
    lipi_rd_piece_spm p = {.piece = {NULL, 0}, .score = 0.0f, .type = LIPI_SPM_NORMAL};
    bool have_piece = false;

    /* By hand: snprintf here cost more than the rest of reading a piece. */
    char digits[24];
    size_t nd = 0, k = m->n;
    do {
        digits[nd++] = (char)('0' + k % 10);
        k /= 10;
    } while (k);
    memcpy(msg, "piece ", 6);
    for (size_t i = 0; i < nd; i++)
        msg[6 + i] = digits[nd - 1 - i];
    msg[6 + nd] = '\0';
    sub.pos = start;
    sub.end = start + len;
    while (sub.pos < sub.end) {
        uint32_t field;
        int wire;
        size_t tag_at = sub.pos, s, n;
        TRY(pb_tag(&sub, msg, &field, &wire));
        if (field == 1) {
            TRY(pb_want(&sub, msg, field, wire, WIRE_LEN, tag_at));
            TRY(pb_len(&sub, msg, &s, &n));
            size_t ok = lipi_utf8_valid_prefix((const char *)b->d + s, n);
            if (ok < n)
                return pb_fail(b, s + ok, "%s: expected UTF-8 text, found byte 0x%02x", msg,
                               b->d[s + ok]);
            p.piece = (lipi_strref){(const char *)b->d + s, n};
            have_piece = true;
        } else if (field == 2) {
            uint32_t bits = 0;
            TRY(pb_want(&sub, msg, field, wire, WIRE_I32, tag_at));
            TRY(pb_fixed32(&sub, msg, &bits));
            memcpy(&p.score, &bits, sizeof p.score);
            if (!isfinite(p.score))
                return pb_fail(b, sub.pos - 4, "%s: expected a finite score, found %g", msg,
                               (double)p.score);
        } else if (field == 3) {
            int64_t t = 0;
            size_t at = sub.pos;
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_int32(&sub, msg, &t));
            if (t < LIPI_SPM_NORMAL || t > LIPI_SPM_BYTE)
                return pb_fail(b, at, "%s: expected a type from 1 (NORMAL) to 6 (BYTE), found %lld",
                               msg, (long long)t);
            p.type = (int)t;
        } else {
            TRY(pb_skip(&sub, msg, field, wire, tag_at));
        }
    }
    if (!have_piece || p.piece.len == 0)
        return pb_fail(b, start, "%s: expected a non-empty piece string, found %s", msg,
                       have_piece ? "an empty one" : "none");
    TRY(lipi_grow((void **)&m->pieces, &m->cap, m->n + 1, sizeof *m->pieces));
    m->pieces[m->n++] = p;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(b->err, st, b->name, 0, 0, "out of memory");
    return st;
}

static lipi_status parse_trainer(pb *b, size_t start, size_t len, spm_model *m)
{
    lipi_status st = LIPI_OK;
    pb sub = *b;
    const char *msg = "trainer_spec";
    sub.pos = start;
    sub.end = start + len;
    while (sub.pos < sub.end) {
        uint32_t field;
        int wire;
        size_t tag_at = sub.pos;
        TRY(pb_tag(&sub, msg, &field, &wire));
        switch (field) {
        case 3:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_int32(&sub, "trainer_spec.model_type", &m->model_type));
            break;
        case 24:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_bool(&sub, "trainer_spec.treat_whitespace_as_suffix",
                        &m->treat_whitespace_as_suffix));
            break;
        case 35:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_bool(&sub, "trainer_spec.byte_fallback", &m->byte_fallback));
            break;
        case 40:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_int32(&sub, "trainer_spec.unk_id", &m->unk_id));
            break;
        case 41:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_int32(&sub, "trainer_spec.bos_id", &m->bos_id));
            break;
        case 42:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_int32(&sub, "trainer_spec.eos_id", &m->eos_id));
            break;
        default:
            TRY(pb_skip(&sub, msg, field, wire, tag_at));
        }
    }
done:
    return st;
}

static lipi_status parse_normalizer(pb *b, size_t start, size_t len, spm_model *m)
{
    lipi_status st = LIPI_OK;
    pb sub = *b;
    const char *msg = "normalizer_spec";
    sub.pos = start;
    sub.end = start + len;
    while (sub.pos < sub.end) {
        uint32_t field;
        int wire;
        size_t tag_at = sub.pos;
        TRY(pb_tag(&sub, msg, &field, &wire));
        switch (field) {
        case 2:
            TRY(pb_want(&sub, msg, field, wire, WIRE_LEN, tag_at));
            TRY(pb_len(&sub, "normalizer_spec.precompiled_charsmap", &m->charsmap_off,
                       &m->charsmap_len));
            break;
        case 3:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_bool(&sub, "normalizer_spec.add_dummy_prefix", &m->add_dummy_prefix));
            break;
        case 4:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_bool(&sub, "normalizer_spec.remove_extra_whitespaces",
                        &m->remove_extra_whitespaces));
            break;
        case 5:
            TRY(pb_want(&sub, msg, field, wire, WIRE_VARINT, tag_at));
            TRY(pb_bool(&sub, "normalizer_spec.escape_whitespaces", &m->escape_whitespaces));
            break;
        default:
            TRY(pb_skip(&sub, msg, field, wire, tag_at));
        }
    }
done:
    return st;
}

/* Parses a whole ModelProto. Defaults are those of the .proto file. */
static lipi_status parse_model(pb *b, size_t len, spm_model *m)
{
    lipi_status st = LIPI_OK;
    const char *msg = "ModelProto";
    m->model_type = 1;
    m->unk_id = 0;
    m->bos_id = 1;
    m->eos_id = 2;
    m->add_dummy_prefix = m->remove_extra_whitespaces = m->escape_whitespaces = true;
    b->pos = 0;
    b->end = len;
    while (b->pos < b->end) {
        uint32_t field;
        int wire;
        size_t tag_at = b->pos, s, n;
        TRY(pb_tag(b, msg, &field, &wire));
        if (field >= 1 && field <= 3) {
            static const char *const what[] = {"", "pieces", "trainer_spec", "normalizer_spec"};
            TRY(pb_want(b, msg, field, wire, WIRE_LEN, tag_at));
            TRY(pb_len(b, what[field], &s, &n));
            if (field == 1)
                TRY(parse_piece(b, s, n, m));
            else if (field == 2)
                TRY(parse_trainer(b, s, n, m));
            else
                TRY(parse_normalizer(b, s, n, m));
        } else {
            TRY(pb_skip(b, msg, field, wire, tag_at));
        }
    }
done:
    return st;
}

lipi_status lipi_tokenizer_from_spm(const void *data, size_t len, const char *name,
                                    lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    spm_model m = {0};
    pb b = {.d = data, .size = len, .name = name ? name : "", .err = err};
    lipi_rd_spm spec = {0};

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no output pointer given");
    *out = NULL;
    if (!data && len)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no data given");
    if (len == 0)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "expected a SentencePiece model, found an empty file");
    TRY(parse_model(&b, len, &m));
    if (m.n == 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, b.name, 0, 0,
                            "expected SentencePiece pieces (ModelProto field 1), found none");
        goto done;
    }
    /* SentencePiece refuses a model without its unknown piece. */
    bool has_unk = false;
    for (size_t i = 0; i < m.n && !has_unk; i++)
        has_unk = m.pieces[i].type == LIPI_SPM_UNKNOWN;
    if (!has_unk) {
        st = lipi_error_set(err, LIPI_EFORMAT, b.name, 0, 0,
                            "expected an unknown piece (type UNKNOWN), found none among %zu "
                            "pieces",
                            m.n);
        goto done;
    }
    if (m.model_type != 1 && m.model_type != 2) {
        static const char *const names[] = {"", "UNIGRAM", "BPE", "WORD", "CHAR"};
        st = lipi_error_set(err, LIPI_EFORMAT, b.name, 0, 0,
                            "trainer_spec.model_type: expected 1 (UNIGRAM) or 2 (BPE), found "
                            "%lld%s%s",
                            (long long)m.model_type, m.model_type >= 3 && m.model_type <= 4 ? " " : "",
                            m.model_type >= 3 && m.model_type <= 4 ? names[m.model_type] : "");
        goto done;
    }
    spec.pieces = m.pieces;
    spec.n = m.n;
    spec.bpe = m.model_type == 2;
    spec.byte_fallback = m.byte_fallback;
    spec.unk_id = m.unk_id;
    spec.bos_id = m.bos_id;
    spec.eos_id = m.eos_id;
    spec.charsmap = (const uint8_t *)data + m.charsmap_off;
    spec.charsmap_len = m.charsmap_len;
    spec.add_dummy_prefix = m.add_dummy_prefix;
    spec.remove_extra_whitespaces = m.remove_extra_whitespaces;
    spec.escape_whitespaces = m.escape_whitespaces;
    spec.treat_whitespace_as_suffix = m.treat_whitespace_as_suffix;
    spec.longest_match = true;
    TRY(lipi_rd_spm_build(b.name, &spec, out, err));
    (*out)->model.f32_scores = true;
done:
    lipi_free(m.pieces);
    return st;
}

/* ======================================================================== */
/* The tokenizer of a SentencePiece vocabulary                               */
/* ======================================================================== */
/*
 * SentencePiece normalizes a whole sentence (charsmap, then: leading and
 * trailing spaces dropped and runs of spaces squeezed when
 * remove_extra_whitespaces, "▁" put in front when add_dummy_prefix, spaces
 * written as "▁" when escape_whitespaces) and then segments all of it.
 * Hugging Face's SpmConverter approximates that with a Metaspace
 * pre-tokenizer, which skips the dummy "▁" when the text already starts
 * with one and strips any whitespace, not only spaces. To give
 * SentencePiece's ids, the parts built here follow SentencePiece instead:
 *
 *   normalizer     Precompiled(charsmap)             if there is one
 *                  Replace(/\A +/ -> ""),            remove_extra_whitespaces
 *                  Replace(/[ ▁]+\z/ -> ""),         (SentencePiece drops
 *                  Replace(/ {2,}/ -> " ")            trailing "▁" too)
 *                  Prepend("▁")                      add_dummy_prefix
 *                  Replace(" " -> "▁")               escape_whitespaces
 *   pre-tokenizer  Metaspace(split before "▁") only when no piece has a "▁"
 *                  after its first byte and "▁" is a piece: then splitting
 *                  cannot change the segmentation, and words can be cached.
 *                  Otherwise none: the model sees the whole sentence.
 *
 * User-defined pieces are added tokens matched in the normalized text
 * ("normalized": true): Hugging Face then normalizes the whole text at once
 * and splits it at them afterwards, so spaces around them are squeezed and
 * escaped once per text, as SentencePiece does (with non-normalized added
 * tokens each stretch between them would be stripped on its own). Their
 * content is normalized too, so the dummy prefix cannot be a Prepend there
 * (it would make "<mask>" "▁<mask>"): it comes from Metaspace
 * (prepend_scheme "first"), which gives SentencePiece's ids except for a
 * text that starts with a user-defined piece or with "▁" (SentencePiece
 * adds a lone "▁" before them). GGUF llama vocabularies keep Hugging
 * Face's LlamaTokenizerFast choice instead (legacy_llama).
 *
 * Model: Unigram with the piece scores, or BPE whose merges are every split
 * of a piece into two pieces, ranked by the piece's score (best first) as
 * Hugging Face's SentencePieceExtractor ranks them. Unknown and control
 * pieces become special added tokens, user-defined pieces added tokens, as
 * Hugging Face's converters make them.
 */

#define META "\xe2\x96\x81" /* U+2581 "▁" */

typedef struct {
    double score;
    uint32_t piece, left, right;
} spm_merge;

static int spm_merge_cmp(const void *a, const void *b)
{
    const spm_merge *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->piece != y->piece)
        return x->piece < y->piece ? -1 : 1;
    if (x->left != y->left)
        return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

/* Pieces longer than this get no merges: trying every split costs the
 * square of a piece's length, and a hostile file could hold megabyte-long
 * pieces. Real vocabularies stay far below it (SentencePiece's default
 * max_sentencepiece_length is 16 characters). */
#define SPM_MERGE_MAX_LEN 256

/* Merges of a SentencePiece BPE vocabulary: every split of every piece
 * into two pieces, by descending score. */
static lipi_status spm_merges(const lipi_rd_spm *spec, const lipi_strref *tok,
                              uint32_t (**out)[2], size_t *n_out)
{
    lipi_status st = LIPI_OK;
    lipi_strmap map = {0};
    spm_merge *all = NULL;
    size_t n = 0, cap = 0;
    uint32_t(*merges)[2] = NULL;

    st = lipi_strmap_build(&map, tok, spec->n, NULL, NULL);
    if (st != LIPI_OK)
        goto done;
    for (size_t p = 0; p < spec->n; p++) {
        const char *s = tok[p].s;
        size_t len = tok[p].len;
        if (len > SPM_MERGE_MAX_LEN)
            continue;
        for (size_t i = 1; i < len; i++) {
            uint32_t l, r;
            if (((unsigned char)s[i] & 0xc0) == 0x80)
                continue;
            if (!lipi_strmap_find(&map, tok, s, i, &l) ||
                !lipi_strmap_find(&map, tok, s + i, len - i, &r))
                continue;
            TRY(lipi_grow((void **)&all, &cap, n + 1, sizeof *all));
            all[n++] = (spm_merge){spec->pieces[p].score, (uint32_t)p, l, r};
        }
    }
    if (n)
        qsort(all, n, sizeof *all, spm_merge_cmp);
    merges = lipi_reallocarray(NULL, n ? n : 1, sizeof *merges);
    if (!merges) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        merges[i][0] = all[i].left;
        merges[i][1] = all[i].right;
    }
    *out = merges;
    *n_out = n;
    merges = NULL;
done:
    lipi_free(merges);
    lipi_free(all);
    lipi_strmap_free(&map);
    return st;
}

static bool append(json_t *arr, json_t *item)
{
    return item && json_array_append_new(arr, item) == 0;
}

/* Whether splitting before every "▁" leaves SentencePiece's segmentation
 * unchanged (see above). */
static bool can_split(const lipi_rd_spm *spec)
{
    bool meta_piece = false;
    for (size_t i = 0; i < spec->n; i++) {
        const lipi_strref *p = &spec->pieces[i].piece;
        if (p->len == 3 && memcmp(p->s, META, 3) == 0)
            meta_piece = true;
        if (p->len > 3 && memmem(p->s + 1, p->len - 1, META, 3))
            return false;
    }
    return meta_piece;
}

static json_t *spm_normalizer(const lipi_rd_spm *spec, bool metaspace_first)
{
    json_t *seq = json_array(), *out = NULL;
    lipi_buf b64 = {0};
    bool ok = seq != NULL;
    if (ok && spec->charsmap_len) {
        json_t *pc = NULL;
        if (lipi_base64_encode(spec->charsmap, spec->charsmap_len, &b64) == LIPI_OK)
            pc = json_pack("{s:s, s:s#}", "type", "Precompiled", "precompiled_charsmap", b64.p,
                           b64.len);
        if (pc && spec->longest_match &&
            json_object_set_new(pc, "lipi_longest_match", json_true()) != 0) {
            json_decref(pc);
            pc = NULL;
        }
        ok = append(seq, pc);
    }
    if (ok && spec->remove_extra_whitespaces)
        ok = append(seq, lipi_rd_replace(true, "\\A +", "")) &&
             append(seq, lipi_rd_replace(true, spec->escape_whitespaces ? "[ " META "]+\\z"
                                                                         : " +\\z",
                                         "")) &&
             append(seq, lipi_rd_replace(true, " {2,}", " "));
    if (ok && spec->add_dummy_prefix && !metaspace_first)
        ok = append(seq, json_pack("{s:s, s:s}", "type", "Prepend", "prepend",
                                   spec->escape_whitespaces ? META : " "));
    if (ok && spec->escape_whitespaces)
        ok = append(seq, lipi_rd_replace(false, " ", META));
    if (ok && json_array_size(seq) == 0)
        out = json_null();
    else if (ok)
        out = lipi_rd_sequence("normalizers", json_incref(seq));
    lipi_buf_free(&b64);
    json_decref(seq);
    return out;
}

static json_t *spm_pre(bool metaspace_first, bool split)
{
    if (!metaspace_first && !split)
        return json_null();
    return json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", META,
                     "prepend_scheme", metaspace_first ? "first" : "never", "split", split);
}

static lipi_decoder *spm_decoder(const lipi_rd_spm *spec)
{
    if (spec->escape_whitespaces && !spec->byte_fallback && !spec->legacy_llama)
        return lipi_rd_dec_metaspace(spec->add_dummy_prefix ? LIPI_PREPEND_ALWAYS
                                                            : LIPI_PREPEND_NEVER);
    return lipi_rd_dec_spm_bytes(spec->escape_whitespaces, spec->add_dummy_prefix);
}

/* BOS / EOS template from add_bos / add_eos, as Hugging Face's
 * LlamaTokenizerFast writes it. *out stays NULL when neither is added. */
static lipi_status spm_post(const lipi_rd_spm *spec, const lipi_strref *tok,
                            lipi_post_processor **out)
{
    bool bos = spec->add_bos && spec->bos_id >= 0 && (size_t)spec->bos_id < spec->n;
    bool eos = spec->add_eos && spec->eos_id >= 0 && (size_t)spec->eos_id < spec->n;
    *out = NULL;
    if (!bos && !eos)
        return LIPI_OK;
    return lipi_rd_post_bos_eos(bos ? &tok[spec->bos_id] : NULL, (uint32_t)spec->bos_id,
                                eos ? &tok[spec->eos_id] : NULL, (uint32_t)spec->eos_id, out);
}

lipi_status lipi_rd_spm_build(const char *name, const lipi_rd_spm *spec, lipi_tokenizer **out,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_strref *tok = NULL;
    double *scores = NULL;
    uint32_t(*merges)[2] = NULL;
    size_t n_merges = 0;
    json_t *doc = NULL;
    lipi_post_processor *post = NULL;
    lipi_decoder *dec = NULL;
    lipi_rd_added added = {0};
    bool has_user = false, metaspace_first, split;
    int64_t unk_id = -1;
    lipi_rd_model rm = {0};

    *out = NULL;
    if (spec->treat_whitespace_as_suffix)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "trainer_spec.treat_whitespace_as_suffix: expected false, found "
                              "true (Hugging Face tokenizers cannot express it)");
    for (size_t i = 0; i < spec->n; i++) {
        if (spec->pieces[i].type == LIPI_SPM_USER_DEFINED)
            has_user = true;
        if (spec->pieces[i].type == LIPI_SPM_UNKNOWN && unk_id < 0)
            unk_id = (int64_t)i;
    }
    /* SentencePiece takes the UNKNOWN piece; trainer_spec.unk_id names
     * the same one in every model it writes. */
    if (unk_id < 0 && spec->unk_id >= 0 && (size_t)spec->unk_id < spec->n)
        unk_id = spec->unk_id;
    if (unk_id < 0)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "expected an unknown piece (type UNKNOWN), found none among %zu "
                              "pieces",
                              spec->n);

    tok = lipi_calloc(spec->n, sizeof *tok);
    scores = lipi_calloc(spec->n, sizeof *scores);
    if (!tok || !scores) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < spec->n; i++) {
        tok[i] = spec->pieces[i].piece;
        scores[i] = spec->pieces[i].score;
    }

    metaspace_first = has_user && spec->add_dummy_prefix && spec->escape_whitespaces &&
                      !spec->legacy_llama;
    split = spec->escape_whitespaces && can_split(spec);

    for (size_t i = 0; i < spec->n; i++) {
        int type = spec->pieces[i].type;
        if (type == LIPI_SPM_UNKNOWN || type == LIPI_SPM_CONTROL || type == LIPI_SPM_USER_DEFINED)
            TRY(lipi_rd_added_push(&added, (uint32_t)i, tok[i].s, tok[i].len,
                                   type != LIPI_SPM_USER_DEFINED,
                                   type == LIPI_SPM_USER_DEFINED && !spec->legacy_llama));
    }
    /* Each json_object_set_new consumes its value even when it fails. */
    doc = json_object();
    if (!doc || json_object_set_new(doc, "pre_tokenizer", spm_pre(metaspace_first, split)) != 0 ||
        json_object_set_new(doc, "normalizer", spm_normalizer(spec, metaspace_first)) != 0) {
        st = LIPI_ENOMEM;
        goto done;
    }
    TRY(spm_post(spec, tok, &post));
    dec = spm_decoder(spec);
    if (!dec) {
        st = LIPI_ENOMEM;
        goto done;
    }

    rm.tok = tok;
    rm.n = spec->n;
    if (spec->bpe) {
        TRY(spm_merges(spec, tok, &merges, &n_merges));
        rm.type = LIPI_MODEL_BPE;
        lipi_model_options_default(LIPI_MODEL_BPE, &rm.opt);
        rm.opt.fuse_unk = true;
        rm.opt.byte_fallback = spec->byte_fallback;
        rm.merges = (const uint32_t(*)[2])merges;
        rm.n_merges = n_merges;
        rm.unk_token = tok[unk_id].s;
        rm.unk_len = tok[unk_id].len;
        rm.prefix_null = rm.suffix_null = true;
    } else {
        rm.type = LIPI_MODEL_UNIGRAM;
        lipi_model_options_default(LIPI_MODEL_UNIGRAM, &rm.opt);
        rm.opt.byte_fallback = spec->byte_fallback;
        rm.scores = scores;
    }
    rm.opt.unk_id = unk_id;
    st = lipi_rd_assemble(name, doc, post, dec, &rm, &added, out, err);
    doc = NULL;
    post = NULL;
    dec = NULL;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, name, 0, 0, "out of memory");
    json_decref(doc);
    lipi_post_processor_free(post);
    lipi_decoder_free(dec);
    lipi_rd_added_free(&added);
    lipi_free(tok);
    lipi_free(scores);
    lipi_free(merges);
    return st;
}

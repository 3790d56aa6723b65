/* The tokenizer object and tokenizer.json: loading real and hand-written
 * files, saving them back identically, rejecting bad files with the JSON
 * path, atomic saves, and allocation failures at every step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tokenizer/tokenizer_layout.h"
#include "tests/alloc_fail.h"
#include "tests/refdata.h"

#define FIX "tests/fixtures/tokenizer_json/"
#define GPT2 REF_FIXTURES "/vocab/gpt2/tokenizer.json"

static const char *const fixtures[] = {
    FIX "wordpiece.json", FIX "unigram.json", FIX "wordlevel.json",
    FIX "bpe_byte_fallback.json", FIX "bpe_bytelevel.json",
};
#define N_FIXTURES (sizeof fixtures / sizeof fixtures[0])

/* A minimal valid model, for documents that test another section. */
#define WL_MODEL "\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 0}, \"unk_token\": \"a\"}"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static lipi_tokenizer *load_ok(const char *path)
{
    lipi_error err = {0};
    lipi_tokenizer *t = NULL;
    lipi_status st = lipi_tokenizer_load(path, &t, &err);
    if (st != LIPI_OK)
        fail_msg("%s: %s %s: %s", path, lipi_status_name(st), err.path, err.msg);
    return t;
}

static lipi_tokenizer *load_str_ok(const char *json)
{
    lipi_error err = {0};
    lipi_tokenizer *t = NULL;
    lipi_status st = lipi_tokenizer_load_json(json, strlen(json), "inline.json", &t, &err);
    if (st != LIPI_OK)
        fail_msg("%s: %s", lipi_status_name(st), err.msg);
    return t;
}

/* Loads JSON text that must fail; returns the error. */
static lipi_error load_str_fails(const char *json, lipi_status want)
{
    lipi_error err = {0};
    lipi_tokenizer *t = (lipi_tokenizer *)1;
    lipi_status st = lipi_tokenizer_load_json(json, strlen(json), "bad.json", &t, &err);
    if (st != want)
        fail_msg("expected %s, got %s: %s", lipi_status_name(want), lipi_status_name(st), err.msg);
    assert_null(t);
    assert_int_equal(err.code, want);
    assert_string_equal(err.path, "bad.json");
    return err;
}

#define assert_msg_contains(err, s)                                                          \
    do {                                                                                     \
        if (!strstr((err).msg, (s)))                                                         \
            fail_msg("message \"%s\" lacks \"%s\"", (err).msg, (s));                         \
    } while (0)

static char *to_json_ok(const lipi_tokenizer *t, size_t *len)
{
    lipi_error err = {0};
    char *s = NULL;
    size_t n = 0;
    lipi_status st = lipi_tokenizer_to_json(t, &s, &n, &err);
    if (st != LIPI_OK)
        fail_msg("to_json: %s: %s", lipi_status_name(st), err.msg);
    assert_int_equal(strlen(s), n);
    if (len)
        *len = n;
    return s;
}

static char *read_all(const char *path, size_t *len)
{
    char *s = NULL;
    lipi_error err = {0};
    if (lipi_read_file(path, (size_t)1 << 30, &s, len, &err) != LIPI_OK)
        fail_msg("%s: %s", path, err.msg);
    return s;
}

/* Everything the accessors show is the same in a and b. */
static void assert_same_tokenizer(const lipi_tokenizer *a, const lipi_tokenizer *b)
{
    assert_int_equal(lipi_tokenizer_model_type(a), lipi_tokenizer_model_type(b));
    assert_memory_equal(lipi_tokenizer_get_model_options(a), lipi_tokenizer_get_model_options(b),
                        sizeof(lipi_model_options));
    size_t n = lipi_tokenizer_vocab_size(a);
    assert_int_equal(n, lipi_tokenizer_vocab_size(b));
    for (uint32_t id = 0; id < n; id++) {
        size_t la = 0, lb = 0;
        const char *sa = lipi_tokenizer_id_to_token(a, id, &la);
        const char *sb = lipi_tokenizer_id_to_token(b, id, &lb);
        assert_true((sa == NULL) == (sb == NULL));
        if (!sa)
            continue;
        assert_int_equal(la, lb);
        assert_memory_equal(sa, sb, la);
        assert_true(lipi_tokenizer_get_score(a, id) == lipi_tokenizer_get_score(b, id));
    }
    assert_int_equal(lipi_tokenizer_merge_count(a), lipi_tokenizer_merge_count(b));
    for (size_t r = 0; r < lipi_tokenizer_merge_count(a); r++) {
        uint32_t l1, r1, l2, r2;
        lipi_tokenizer_get_merge(a, r, &l1, &r1);
        lipi_tokenizer_get_merge(b, r, &l2, &r2);
        assert_int_equal(l1, l2);
        assert_int_equal(r1, r2);
    }
    assert_int_equal(lipi_tokenizer_added_count(a), lipi_tokenizer_added_count(b));
    for (size_t i = 0; i < lipi_tokenizer_added_count(a); i++) {
        const lipi_added_token *x = lipi_tokenizer_get_added(a, i), *y = lipi_tokenizer_get_added(b, i);
        assert_int_equal(x->id, y->id);
        assert_int_equal(x->len, y->len);
        assert_memory_equal(x->content, y->content, x->len);
        assert_int_equal(x->single_word, y->single_word);
        assert_int_equal(x->lstrip, y->lstrip);
        assert_int_equal(x->rstrip, y->rstrip);
        assert_int_equal(x->normalized, y->normalized);
        assert_int_equal(x->special, y->special);
    }
}

/* load -> to_json -> load -> to_json: same accessors, byte-identical text. */
static void check_round_trip(const lipi_tokenizer *t)
{
    lipi_error err = {0};
    lipi_tokenizer *t2 = NULL;
    size_t n1, n2;
    char *s1 = to_json_ok(t, &n1);
    assert_int_equal(lipi_tokenizer_load_json(s1, n1, "saved", &t2, &err), LIPI_OK);
    assert_same_tokenizer(t, t2);
    char *s2 = to_json_ok(t2, &n2);
    json_t *j1 = json_loads(s1, 0, NULL), *j2 = json_loads(s2, 0, NULL);
    assert_non_null(j1);
    assert_true(json_equal(j1, j2));
    assert_int_equal(n1, n2);
    assert_memory_equal(s1, s2, n1);
    json_decref(j1);
    json_decref(j2);
    lipi_free(s1);
    lipi_free(s2);
    lipi_tokenizer_free(t2);
}

static uint32_t id_of(const lipi_tokenizer *t, const char *s)
{
    uint32_t id = UINT32_MAX;
    if (!lipi_tokenizer_token_to_id(t, s, strlen(s), &id))
        fail_msg("\"%s\" not found", s);
    return id;
}

/* ------------------------------------------------------------------------ */
/* The real GPT-2 file                                                       */
/* ------------------------------------------------------------------------ */

static void test_gpt2_loads_with_hugging_face_ids(void **state)
{
    lipi_tokenizer *t = load_ok(GPT2);
    uint32_t l, r;
    size_t len;
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_BPE);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 50257);
    assert_int_equal(id_of(t, "Ġthe"), 262);
    assert_int_equal(id_of(t, "<|endoftext|>"), 50256);
    assert_int_equal(lipi_tokenizer_merge_count(t), 50000);
    lipi_tokenizer_get_merge(t, 0, &l, &r);
    assert_string_equal(lipi_tokenizer_id_to_token(t, l, &len), "Ġ");
    assert_string_equal(lipi_tokenizer_id_to_token(t, r, &len), "t");
    assert_true(lipi_tokenizer_get_model_options(t)->byte_level);
    assert_int_equal(lipi_tokenizer_get_model_options(t)->unk_id, -1);
    assert_non_null(lipi_tokenizer_get_pretokenizer(t));
    /* The merge map gives the rank and the joined token. */
    uint32_t rank = UINT32_MAX;
    assert_true(lipi_merge_find(&t->model, id_of(t, "Ġt"), id_of(t, "he"), &rank));
    assert_int_equal(t->model.merges[rank].result, 262);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_gpt2_saves_merges_in_its_own_string_form(void **state)
{
    lipi_tokenizer *t = load_ok(GPT2);
    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"merges\": [\n      \"Ġ t\",\n      \"Ġ a\","));
    assert_non_null(strstr(s, "\"vocab\": {\n      \"!\": 0,\n      \"\\\"\": 1,"));
    lipi_free(s);
    lipi_tokenizer_free(t);
}

static void test_set_decoder_json_replaces_the_decoder_and_keeps_it_on_bad_input(void **state)
{
    lipi_tokenizer *t = load_ok(GPT2);
    lipi_error err = {0};
    const char *fuse = "{\"type\": \"Fuse\"}";
    assert_int_equal(lipi_tokenizer_set_decoder_json(t, fuse, strlen(fuse), &err), LIPI_OK);
    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"decoder\": {\n    \"type\": \"Fuse\"\n  }"));
    lipi_free(s);

    const char *bad = "{\"type\": \"NoSuchDecoder\"}";
    assert_int_not_equal(lipi_tokenizer_set_decoder_json(t, bad, strlen(bad), &err), LIPI_OK);
    assert_non_null(strstr(err.msg, "decoder.type"));
    assert_int_equal(lipi_tokenizer_set_decoder_json(t, "{", 1, &err), LIPI_EFORMAT);
    s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"decoder\": {\n    \"type\": \"Fuse\"\n  }"));
    lipi_free(s);
    lipi_tokenizer_free(t);
}

/* ------------------------------------------------------------------------ */
/* Hand-written fixtures                                                     */
/* ------------------------------------------------------------------------ */

static void test_wordpiece_fixture(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "wordpiece.json");
    const lipi_model_options *o = lipi_tokenizer_get_model_options(t);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_WORDPIECE);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 12);
    assert_string_equal(o->continuing_subword_prefix, "##");
    assert_int_equal(o->max_input_chars_per_word, 100);
    assert_int_equal(o->unk_id, 1);
    assert_int_equal(id_of(t, "##स्ते"), 7);
    assert_int_equal(lipi_tokenizer_added_count(t), 5);
    assert_true(lipi_tokenizer_get_added(t, 4)->lstrip);
    assert_false(lipi_tokenizer_get_added(t, 4)->normalized);
    assert_non_null(t->truncation);

    const lipi_post_processor *pp = t->post;
    assert_int_equal(pp->type, LIPI_POST_TEMPLATE);
    assert_int_equal(pp->n_single, 3);
    assert_int_equal(pp->n_pair, 5);
    /* special_tokens come back sorted by name: [CLS] before [SEP]. */
    assert_int_equal(pp->n_special, 2);
    assert_string_equal(pp->special[0].name, "[CLS]");
    assert_int_equal(pp->special[1].ids[0], 3);
    assert_true(pp->pair[4].is_special);
    assert_int_equal(pp->pair[4].type_id, 1);
    assert_string_equal(pp->special[pp->pair[4].special].name, "[SEP]");
    assert_false(pp->pair[3].is_special);
    assert_int_equal(pp->pair[3].seq, 1);

    assert_int_equal(t->decoder->type, LIPI_DEC_WORDPIECE);
    assert_string_equal(t->decoder->wordpiece.prefix.s, "##");
    assert_true(t->decoder->wordpiece.cleanup);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_unigram_fixture(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "unigram.json");
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_UNIGRAM);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 13);
    assert_int_equal(lipi_tokenizer_get_model_options(t)->unk_id, 0);
    assert_true(lipi_tokenizer_get_model_options(t)->byte_fallback);
    assert_true(lipi_tokenizer_get_score(t, id_of(t, "▁नम")) == -3.25);
    assert_true(lipi_tokenizer_get_score(t, 6) == -5.0);
    assert_int_equal(id_of(t, "<mask>"), 12);
    assert_non_null(t->padding);

    const lipi_post_processor *pp = t->post;
    assert_int_equal(pp->type, LIPI_POST_SEQUENCE);
    assert_int_equal(pp->n_items, 2);
    assert_int_equal(pp->items[0].type, LIPI_POST_BYTELEVEL);
    assert_false(pp->items[0].use_regex);
    assert_int_equal(pp->items[1].type, LIPI_POST_TEMPLATE);

    const lipi_decoder *d = t->decoder;
    assert_int_equal(d->type, LIPI_DEC_SEQUENCE);
    assert_int_equal(d->sequence.n_items, 4);
    assert_int_equal(d->sequence.items[0].type, LIPI_DEC_REPLACE);
    assert_false(d->sequence.items[0].replace.regex);
    assert_string_equal(d->sequence.items[0].replace.pattern.s, "▁");
    assert_int_equal(d->sequence.items[1].type, LIPI_DEC_BYTEFALLBACK);
    assert_int_equal(d->sequence.items[2].type, LIPI_DEC_FUSE);
    assert_int_equal(d->sequence.items[3].type, LIPI_DEC_STRIP);
    assert_int_equal(d->sequence.items[3].strip.start, 1);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_unigram_scores_are_written_shortest_like_hugging_face(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "unigram.json");
    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"<unk>\",\n        0.0\n"));
    assert_non_null(strstr(s, "\"स्ते\",\n        -4.1\n"));
    assert_non_null(strstr(s, "\"न\",\n        -5.0\n"));
    assert_non_null(strstr(s, "\"<0xE0>\",\n        -10.000001\n"));
    assert_non_null(strstr(s, "\"<0xA4>\",\n        -1e-7\n"));
    assert_non_null(strstr(s, "\"<0xA8>\",\n        -123456789012.5\n"));
    lipi_free(s);
    lipi_tokenizer_free(t);
}

/* The file gives [CLS] id 3 (a hole in the model's ids) and [SEP] id 7;
 * Hugging Face numbers them 6 (the model's entry count, shadowing the
 * model's id 6 when ids become strings) and 7: tokenizers 0.23.2's
 * token_to_id / id_to_token, by tests/fixtures/tokenizer_json/
 * make_added_holes.js. */
static void test_wordlevel_fixture_added_tokens_numbered_as_hugging_face(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "wordlevel.json");
    size_t len;
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_WORDLEVEL);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 8);
    assert_int_equal(t->model.vocab.n, 7);
    assert_int_equal(t->model.vocab.count, 6);
    assert_null(lipi_tokenizer_id_to_token(t, 3, &len));
    assert_string_equal(lipi_tokenizer_id_to_token(t, 6, &len), "[CLS]");
    assert_string_equal(lipi_tokenizer_id_to_token(t, 7, &len), "[SEP]");
    assert_int_equal(id_of(t, "\"quoted\"\tword\n"), 6);
    assert_int_equal(lipi_tokenizer_get_model_options(t)->unk_id, 0);
    assert_int_equal(t->post->type, LIPI_POST_BERT);
    assert_string_equal(t->post->sep.token, "[SEP]");
    assert_int_equal(t->post->cls.id, 6);
    assert_int_equal(t->decoder->type, LIPI_DEC_CTC);
    assert_string_equal(t->decoder->ctc.word_delimiter_token.s, "|");
    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"\\\"quoted\\\"\\tword\\n\": 6"));
    lipi_free(s);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_bpe_byte_fallback_fixture(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "bpe_byte_fallback.json");
    const lipi_model_options *o = lipi_tokenizer_get_model_options(t);
    uint32_t l, r, rank;
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_BPE);
    assert_true(o->byte_fallback);
    assert_true(o->fuse_unk);
    assert_true(o->ignore_merges);
    assert_false(o->byte_level);
    assert_int_equal(o->unk_id, 0);
    assert_true(t->model.has_dropout);
    assert_true(t->model.dropout == 0.1);
    assert_true(t->model.merges_legacy);
    assert_int_equal(lipi_tokenizer_merge_count(t), 4);
    lipi_tokenizer_get_merge(t, 2, &l, &r);
    assert_int_equal(l, id_of(t, "▁न"));
    assert_int_equal(r, id_of(t, "म"));
    assert_true(lipi_merge_find(&t->model, l, r, &rank));
    assert_int_equal(rank, 2);
    assert_int_equal(t->model.merges[2].result, id_of(t, "▁नम"));
    assert_false(lipi_merge_find(&t->model, r, l, &rank));
    assert_true(lipi_tokenizer_get_added(t, 3)->single_word);
    assert_true(lipi_tokenizer_get_added(t, 3)->rstrip);

    assert_int_equal(t->post->type, LIPI_POST_ROBERTA);
    assert_false(t->post->trim_offsets);
    assert_true(t->post->add_prefix_space);
    const lipi_decoder *m = &t->decoder->sequence.items[0];
    assert_int_equal(m->type, LIPI_DEC_METASPACE);
    assert_int_equal(m->metaspace.prepend_scheme, LIPI_PREPEND_FIRST);
    assert_false(m->metaspace.split);
    assert_string_equal(m->metaspace.replacement.s, "▁");
    assert_int_equal(t->decoder->sequence.items[1].type, LIPI_DEC_BPE);
    assert_string_equal(t->decoder->sequence.items[1].bpe.suffix.s, "</w>");

    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"dropout\": 0.1,"));
    assert_non_null(strstr(s, "\"continuing_subword_prefix\": null,"));
    assert_non_null(strstr(s, "\"merges\": [\n      \"▁ न\",\n"));
    lipi_free(s);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_bpe_bytelevel_fixture_keeps_array_merges(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "bpe_bytelevel.json");
    assert_false(t->model.merges_legacy);
    assert_int_equal(t->post->type, LIPI_POST_BYTELEVEL);
    assert_false(t->post->trim_offsets);
    assert_int_equal(t->decoder->type, LIPI_DEC_BYTELEVEL);
    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"merges\": [\n      [\n        \"Ġ\",\n        \"t\"\n      ],\n"));
    /* "" stays "" (not null) when the file had "". */
    assert_non_null(strstr(s, "\"continuing_subword_prefix\": \"\","));
    lipi_free(s);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_normalizer_and_pre_tokenizer_sections_are_routed(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "wordlevel.json");
    lipi_normalized out = {0};
    lipi_pieces pieces = {0};
    lipi_error err = {0};
    const char *in = "  Héllo  WORLD ";
    assert_non_null(lipi_tokenizer_get_normalizer(t));
    assert_non_null(lipi_tokenizer_get_pretokenizer(t));
    /* NFD, Lowercase, StripAccents, Strip, as the file says. */
    assert_int_equal(lipi_normalize(lipi_tokenizer_get_normalizer(t), in, strlen(in), &out, false,
                                    &err),
                     LIPI_OK);
    assert_string_equal(out.text, "hello  world");
    /* WhitespaceSplit. */
    assert_int_equal(lipi_pretokenize(lipi_tokenizer_get_pretokenizer(t), out.text, out.len,
                                      &pieces, &err),
                     LIPI_OK);
    assert_int_equal(pieces.count, 2);
    lipi_normalized_free(&out);
    lipi_pieces_free(&pieces);
    lipi_tokenizer_free(t);

    /* A ByteLevel inside a Sequence marks the BPE vocabulary byte-level. */
    t = load_ok(FIX "bpe_bytelevel.json");
    assert_true(lipi_tokenizer_get_model_options(t)->byte_level);
    lipi_tokenizer_free(t);
    t = load_ok(FIX "bpe_byte_fallback.json");
    assert_false(lipi_tokenizer_get_model_options(t)->byte_level);
    assert_non_null(lipi_tokenizer_get_normalizer(t));
    assert_null(lipi_tokenizer_get_pretokenizer(t));
    lipi_tokenizer_free(t);
}

static void test_bad_normalizer_or_pre_tokenizer_names_file_and_path(void **state)
{
    lipi_error err = load_str_fails(
        "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
        "{\"type\": \"Foo\"}]}, " WL_MODEL "}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "normalizer.normalizers[1]");
    assert_msg_contains(err, "Foo");
    err = load_str_fails("{\"pre_tokenizer\": {\"type\": \"Bar\"}, " WL_MODEL "}", LIPI_EFORMAT);
    assert_msg_contains(err, "pre_tokenizer");
    assert_msg_contains(err, "Bar");
}

static void test_save_writes_hugging_face_key_order_and_layout(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "wordlevel.json");
    char *s = to_json_ok(t, NULL);
    static const char *const keys[] = {
        "\n  \"version\": \"1.0\",", "\n  \"truncation\": null,", "\n  \"padding\": null,",
        "\n  \"added_tokens\": [", "\n  \"normalizer\": {", "\n  \"pre_tokenizer\": {",
        "\n  \"post_processor\": {", "\n  \"decoder\": {", "\n  \"model\": {",
    };
    const char *prev = s;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *p = strstr(s, keys[i]);
        if (!p || p < prev)
            fail_msg("key %zu (%s) missing or out of order", i, keys[i]);
        prev = p;
    }
    assert_int_equal(s[0], '{');
    assert_int_equal(s[strlen(s) - 1], '}');
    assert_non_null(strstr(s, "\"model\": {\n    \"type\": \"WordLevel\",\n    \"vocab\": {\n"
                              "      \"<unk>\": 0,\n      \"<pad>\": 1,\n      \"|\": 2,\n"
                              "      \"hello\": 4,"));
    assert_non_null(strstr(s, "\"sep\": [\n      \"[SEP]\",\n      7\n    ],"));
    lipi_free(s);
    lipi_tokenizer_free(t);
}

static void test_save_is_atomic_and_byte_deterministic(void **state)
{
    char dir[] = "/tmp/lipi_json_XXXXXX";
    char p1[64], p2[64];
    lipi_error err = {0};
    size_t n1, n2;
    assert_non_null(mkdtemp(dir));
    snprintf(p1, sizeof p1, "%s/a.json", dir);
    snprintf(p2, sizeof p2, "%s/b.json", dir);
    for (size_t i = 0; i < N_FIXTURES; i++) {
        lipi_tokenizer *t = load_ok(fixtures[i]), *t2;
        assert_int_equal(lipi_tokenizer_save(t, p1, &err), LIPI_OK);
        t2 = load_ok(p1);
        /* Overwriting an existing file goes through the same rename. */
        assert_int_equal(lipi_tokenizer_save(t2, p1, &err), LIPI_OK);
        assert_int_equal(lipi_tokenizer_save(t2, p2, &err), LIPI_OK);
        char *a = read_all(p1, &n1), *b = read_all(p2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        size_t n3;
        char *c = to_json_ok(t, &n3);
        assert_int_equal(n3, n1);
        assert_memory_equal(c, a, n1);
        lipi_free(a);
        lipi_free(b);
        lipi_free(c);
        lipi_tokenizer_free(t);
        lipi_tokenizer_free(t2);
    }
    /* Nothing but the two outputs is left in the folder. */
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            files++;
    closedir(d);
    assert_int_equal(files, 2);
    unlink(p1);
    unlink(p2);
    rmdir(dir);
}

static void test_legacy_model_without_type_is_recognised(void **state)
{
    lipi_tokenizer *t = load_str_ok(
        "{\"model\": {\"dropout\": null, \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, "
        "\"a\": 1, \"b\": 2, \"ab\": 3}, \"merges\": [\"a b\"]}}");
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_BPE);
    assert_int_equal(lipi_tokenizer_merge_count(t), 1);
    lipi_tokenizer_free(t);
    t = load_str_ok("{\"model\": {\"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\","
                    " \"max_input_chars_per_word\": 50, \"vocab\": {\"[UNK]\": 0}}}");
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_WORDPIECE);
    assert_int_equal(lipi_tokenizer_get_model_options(t)->max_input_chars_per_word, 50);
    lipi_tokenizer_free(t);
    t = load_str_ok("{\"model\": {\"vocab\": [[\"<unk>\", 0], [\"a\", -1.5]], \"unk_id\": 0}}");
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_UNIGRAM);
    lipi_tokenizer_free(t);
    t = load_str_ok("{\"model\": {\"vocab\": {\"<unk>\": 0}, \"unk_token\": \"<unk>\"}}");
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_WORDLEVEL);
    lipi_tokenizer_free(t);
}

static void test_legacy_merge_with_spaces_in_tokens_splits_where_tokens_exist(void **state)
{
    /* As current Hugging Face: "a b c d" is ("a", "b c d") because only
     * that cut gives two tokens whose join is a token. */
    lipi_tokenizer *t = load_str_ok(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b c d\": 1, \"ab c d\": 2},"
        " \"merges\": [\"a b c d\"]}}");
    uint32_t l, r;
    lipi_tokenizer_get_merge(t, 0, &l, &r);
    assert_int_equal(l, 0);
    assert_int_equal(r, 1);
    lipi_tokenizer_free(t);
}

static void test_bpe_merge_strips_continuing_prefix_of_right_part(void **state)
{
    lipi_tokenizer *t = load_str_ok(
        "{\"model\": {\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\","
        " \"vocab\": {\"a\": 0, \"##b\": 1, \"ab\": 2}, \"merges\": [[\"a\", \"##b\"]]}}");
    assert_int_equal(t->model.merges[0].result, 2);
    lipi_tokenizer_free(t);
}

static void test_old_metaspace_add_prefix_space_is_understood(void **state)
{
    lipi_tokenizer *t = load_str_ok(
        "{\"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"add_prefix_space\": false},"
        " \"model\": {\"type\": \"WordLevel\", \"vocab\": {}, \"unk_token\": \"<unk>\"}}");
    assert_int_equal(t->decoder->metaspace.prepend_scheme, LIPI_PREPEND_NEVER);
    assert_true(t->decoder->metaspace.split);
    lipi_tokenizer_free(t);
}

/* ------------------------------------------------------------------------ */
/* Bad files                                                                 */
/* ------------------------------------------------------------------------ */

static void test_truncated_json_reports_line_and_column(void **state)
{
    lipi_error err = load_str_fails("{\n  \"version\": \"1.0\",\n  \"model\": {\"type\": \"BPE\"",
                                    LIPI_EFORMAT);
    assert_msg_contains(err, "invalid JSON");
    assert_int_equal(err.line, 3);
    assert_true(err.offset > 1);

    err = load_str_fails("{\"a\": [1, 2,, 3]}", LIPI_EFORMAT);
    assert_int_equal(err.line, 1);
    assert_int_equal(err.offset, 13);
}

static void test_empty_and_non_object_files_are_rejected(void **state)
{
    lipi_error err = {0};
    lipi_tokenizer *t = NULL;
    assert_int_equal(lipi_tokenizer_load_json("", 0, "bad.json", &t, &err), LIPI_EFORMAT);
    assert_msg_contains(err, "empty");
    assert_null(t);
    err = load_str_fails("[1, 2]", LIPI_EFORMAT);
    assert_msg_contains(err, "top level: expected an object, found an array of 2");
    err = load_str_fails("{\"version\": \"1.0\"}", LIPI_EFORMAT);
    assert_msg_contains(err, "model: missing, expected an object");
    err = load_str_fails("{\"version\": \"2.0\", " WL_MODEL "}", LIPI_EFORMAT);
    assert_msg_contains(err, "version: expected \"1.0\", found \"2.0\"");
}

static void test_deeply_nested_json_fails_cleanly(void **state)
{
    size_t depth = 100000;
    char *s = malloc(2 * depth + 32);
    assert_non_null(s);
    size_t n = (size_t)sprintf(s, "{\"model\": ");
    memset(s + n, '[', depth);
    memset(s + n + depth, ']', depth);
    strcpy(s + n + 2 * depth, "}");
    lipi_error err = load_str_fails(s, LIPI_EFORMAT);
    assert_msg_contains(err, "depth");
    free(s);
}

static void test_unknown_model_type_names_its_path(void **state)
{
    lipi_error err = load_str_fails("{\"model\": {\"type\": \"Foo\", \"vocab\": {}}}", LIPI_EFORMAT);
    assert_msg_contains(err, "model.type: unknown type \"Foo\"");
}

static void test_unknown_decoder_type_names_its_path(void **state)
{
    lipi_error err = load_str_fails(
        "{\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": "
        "\"Foo\"}]}, " WL_MODEL "}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "decoder.decoders[1].type: unknown type \"Foo\"");
    err = load_str_fails("{\"post_processor\": {\"type\": \"Bar\"}, " WL_MODEL "}", LIPI_EFORMAT);
    assert_msg_contains(err, "post_processor.type: unknown type \"Bar\"");
    err = load_str_fails("{\"decoder\": {\"prefix\": \"##\"}, " WL_MODEL "}", LIPI_EFORMAT);
    assert_msg_contains(err, "decoder.type: missing, expected a type name");
}

static void test_malformed_merges_name_index_and_expectation(void **state)
{
    lipi_error err = load_str_fails(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
        " \"merges\": [[\"a\", \"b\"], 3]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.merges[1]: expected \"left right\" or [\"left\", \"right\"], found 3");
    err = load_str_fails(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
        " \"merges\": [[\"a\", \"b\"], \"a b\"]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.merges[1]: expected [\"left\", \"right\"] like model.merges[0]");
    err = load_str_fails(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ab\"]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.merges[0]: expected \"left right\"");
}

static void test_merges_naming_unknown_tokens_are_rejected(void **state)
{
    lipi_error err = load_str_fails(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
        " \"merges\": [[\"a\", \"b\"], [\"a\", \"x\"]]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.merges[1]: \"x\" is not in model.vocab");
    /* The joined token must exist too, as Hugging Face requires. */
    err = load_str_fails(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.merges[0]: \"a b\" joined is not in model.vocab");
    err = load_str_fails(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", \"b\"]]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.merges[0]: \"a\" + \"b\" joined is not in model.vocab");
}

static void test_duplicate_and_out_of_range_ids_are_rejected(void **state)
{
    lipi_error err = load_str_fails(
        "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 0, \"b\": 0}, \"unk_token\": \"a\"}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.vocab: tokens \"a\" and \"b\" both have id 0");
    err = load_str_fails(
        "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": -1}, \"unk_token\": \"a\"}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.vocab[\"a\"]: expected a token id");
    err = load_str_fails(
        "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 4000000000}, \"unk_token\": \"a\"}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "too sparse");
    err = load_str_fails(
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0], [\"b\", 0], [\"a\", 1]]}}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "model.vocab[2]: piece \"a\" repeats model.vocab[0]");
    err = load_str_fails("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 2, \"vocab\": [[\"a\", 0]]}}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "model.unk_id: expected an integer from 0 to 0, found 2");
    err = load_str_fails("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "model.vocab[0]: expected [\"piece\", score], found an array of 2");
}

/* The file's ids of added tokens are not used (Hugging Face only warns):
 * a model token keeps the model's id, the others are numbered from the
 * model's entry count, two tokens with one file id are fine. */
static void test_added_token_ids_of_the_file_are_replaced_as_hugging_face(void **state)
{
    lipi_error err = {0};
    lipi_tokenizer *t = NULL;
    const char *j = "{\"added_tokens\": [{\"id\": 5, \"content\": \"a\"}, {\"id\": 0, "
                    "\"content\": \"<x>\"}, {\"id\": 0, \"content\": \"<y>\"}], " WL_MODEL "}";
    assert_int_equal(lipi_tokenizer_load_json(j, strlen(j), "inline", &t, &err), LIPI_OK);
    assert_int_equal(id_of(t, "a"), 0);
    size_t len;
    assert_string_equal(lipi_tokenizer_id_to_token(t, 0, &len), "a");
    assert_int_equal(id_of(t, "<x>"), 1);
    assert_int_equal(id_of(t, "<y>"), 2);
    lipi_tokenizer_free(t);
    err = load_str_fails("{\"added_tokens\": [{\"id\": 1, \"content\": \"<x>\"}, {\"id\": 2, "
                         "\"content\": \"<x>\"}], " WL_MODEL "}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "added_tokens[1].content: \"<x>\" appears twice (also added_tokens[0])");
    err = load_str_fails("{\"added_tokens\": [{\"id\": 1, \"content\": \"<x>\", \"special\": 1}], "
                         WL_MODEL "}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "added_tokens[0].special: expected true or false, found 1");
    err = load_str_fails("{\"added_tokens\": [{\"id\": 5000000000, \"content\": \"<x>\"}], "
                         WL_MODEL "}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "added_tokens[0].id");
}

static void test_malformed_post_processors_and_decoders_are_rejected(void **state)
{
    lipi_error err = load_str_fails(
        "{\"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\"], \"cls\": "
        "[\"[CLS]\", 1]}, " WL_MODEL "}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "post_processor.sep: expected [\"token\", id], found an array of 1");
    err = load_str_fails(
        "{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
        "{\"id\": \"[X]\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {}}, " WL_MODEL "}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "post_processor.single[0].SpecialToken.id: \"[X]\" is not in "
                             "post_processor.special_tokens");
    err = load_str_fails(
        "{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [], \"pair\": [], "
        "\"special_tokens\": {\"[X]\": {\"id\": \"[X]\", \"ids\": [1, 2], \"tokens\": [\"[X]\"]}}},"
        " " WL_MODEL "}",
        LIPI_EFORMAT);
    assert_msg_contains(err, "post_processor.special_tokens[\"[X]\"]: \"ids\" has 2 entries but "
                             "\"tokens\" has 1");
    err = load_str_fails("{\"decoder\": {\"type\": \"Strip\", \"content\": \"ab\", \"start\": 1, "
                         "\"stop\": 0}, " WL_MODEL "}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "decoder.content: expected a string of one character, found \"ab\"");
    err = load_str_fails("{\"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"_\", "
                         "\"prepend_scheme\": \"sometimes\"}, " WL_MODEL "}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "decoder.prepend_scheme: expected \"always\", \"first\" or \"never\"");
    err = load_str_fails("{\"decoder\": {\"type\": \"Replace\", \"pattern\": \"x\", \"content\": "
                         "\"y\"}, " WL_MODEL "}",
                         LIPI_EFORMAT);
    assert_msg_contains(err, "decoder.pattern: expected {\"String\": \"...\"} or {\"Regex\": \"...\"}");
}

static void test_sequences_nested_too_deep_are_rejected(void **state)
{
    lipi_buf b = {0};
    for (int i = 0; i < 40; i++)
        assert_int_equal(lipi_buf_append(&b, "{\"type\": \"Sequence\", \"decoders\": [", 34), LIPI_OK);
    assert_int_equal(lipi_buf_append(&b, "{\"type\": \"Fuse\"}", 16), LIPI_OK);
    for (int i = 0; i < 40; i++)
        assert_int_equal(lipi_buf_append(&b, "]}", 2), LIPI_OK);
    lipi_buf doc = {0};
    assert_int_equal(lipi_buf_append(&doc, "{\"decoder\": ", 12), LIPI_OK);
    assert_int_equal(lipi_buf_append(&doc, b.p, b.len), LIPI_OK);
    assert_int_equal(lipi_buf_append(&doc, ", " WL_MODEL "}", strlen(", " WL_MODEL "}")), LIPI_OK);
    lipi_error err = load_str_fails(doc.p, LIPI_EFORMAT);
    assert_msg_contains(err, "nested more than");
    lipi_buf_free(&b);
    lipi_buf_free(&doc);
}

static void test_missing_file_and_directory_are_io_errors(void **state)
{
    lipi_error err = {0};
    lipi_tokenizer *t = NULL;
    assert_int_equal(lipi_tokenizer_load(FIX "no_such_file.json", &t, &err), LIPI_EIO);
    assert_string_equal(err.path, FIX "no_such_file.json");
    assert_msg_contains(err, "No such file");
    assert_int_equal(lipi_tokenizer_load("tests/fixtures/tokenizer_json", &t, &err), LIPI_EIO);
    assert_string_equal(err.path, "tests/fixtures/tokenizer_json");
    assert_msg_contains(err, "directory");
    assert_null(t);
}

/* Every prefix of every fixture, and every fixture with bytes replaced by
 * JSON punctuation, must load or fail with LIPI_EFORMAT: never crash, never
 * another status. */
static void test_truncated_and_mutated_fixtures_fail_cleanly(void **state)
{
    static const char subst[] = "\"0[}\\";
    for (size_t f = 0; f < N_FIXTURES; f++) {
        size_t len;
        char *text = read_all(fixtures[f], &len);
        char *copy = malloc(len);
        assert_non_null(copy);
        for (size_t cut = 0; cut < len; cut++) {
            lipi_error err = {0};
            lipi_tokenizer *t = NULL;
            lipi_status st = lipi_tokenizer_load_json(text, cut, "cut.json", &t, &err);
            /* Only cutting trailing white space leaves a whole document. */
            bool whole = strspn(text + cut, " \n") == len - cut;
            if (st != (whole ? LIPI_OK : LIPI_EFORMAT))
                fail_msg("%s cut at %zu: %s", fixtures[f], cut, lipi_status_name(st));
            lipi_tokenizer_free(t);
        }
        for (size_t pos = 0; pos < len; pos += 7) {
            for (size_t k = 0; k < sizeof subst - 1; k++) {
                lipi_error err = {0};
                lipi_tokenizer *t = NULL;
                memcpy(copy, text, len);
                copy[pos] = subst[k];
                lipi_status st = lipi_tokenizer_load_json(copy, len, "mut.json", &t, &err);
                /* A broken regex in a normalizer or pre-tokenizer is EREGEX. */
                if (st != LIPI_OK && st != LIPI_EFORMAT && st != LIPI_EREGEX)
                    fail_msg("%s byte %zu -> '%c': %s", fixtures[f], pos, subst[k],
                             lipi_status_name(st));
                if (st == LIPI_OK) {
                    char *s = NULL;
                    lipi_status st2 = lipi_tokenizer_to_json(t, &s, NULL, &err);
                    assert_int_equal(st2, LIPI_OK);
                    lipi_free(s);
                } else {
                    assert_true(err.msg[0] != '\0');
                }
                lipi_tokenizer_free(t);
            }
        }
        free(copy);
        lipi_free(text);
    }
}

static void test_read_file_enforces_its_size_limit(void **state)
{
    char *s = NULL;
    size_t n = 0;
    lipi_error err = {0};
    assert_int_equal(lipi_read_file(FIX "wordlevel.json", 100, &s, &n, &err), LIPI_EFORMAT);
    assert_null(s);
    assert_msg_contains(err, "limit of 100");
    assert_int_equal(lipi_read_file(FIX "wordlevel.json", 1 << 20, &s, &n, &err), LIPI_OK);
    assert_true(n > 100);
    assert_int_equal(s[n], '\0');
    lipi_free(s);
    /* Unsized files (here a pipe) are read to the end as well. */
    int fd[2];
    char path[64];
    assert_int_equal(pipe(fd), 0);
    assert_int_equal(write(fd[1], "{\"a\": 1}", 8), 8);
    close(fd[1]);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd[0]);
    assert_int_equal(lipi_read_file(path, 1 << 20, &s, &n, &err), LIPI_OK);
    assert_int_equal(n, 8);
    assert_string_equal(s, "{\"a\": 1}");
    lipi_free(s);
    close(fd[0]);
}

/* ------------------------------------------------------------------------ */
/* Atomic save failures                                                      */
/* ------------------------------------------------------------------------ */

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

/* Saves into an unwritable folder and reports status, err.path, err.msg
 * through a pipe. Root writes anywhere, so as root the attempt runs in a
 * child that first drops to the "nobody" user. */
static void test_save_into_unwritable_directory_fails_and_leaves_nothing(void **state)
{
    char dir[] = "/tmp/lipi_ro_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    lipi_tokenizer *t = load_ok(FIX "wordlevel.json");
    lipi_error err = {0};
    lipi_status st;

    if (geteuid() != 0) {
        assert_int_equal(chmod(dir, 0555), 0);
        st = lipi_tokenizer_save(t, path, &err);
    } else {
        int fd[2];
        assert_int_equal(pipe(fd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fd[0]);
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(3);
            err.code = lipi_tokenizer_save(t, path, &err);
            _exit(write(fd[1], &err, sizeof err) == (ssize_t)sizeof err ? 0 : 4);
        }
        close(fd[1]);
        ssize_t got = read(fd[0], &err, sizeof err);
        int wst;
        close(fd[0]);
        assert_int_equal(waitpid(pid, &wst, 0), pid);
        if (WIFEXITED(wst) && WEXITSTATUS(wst) == 3) {
            lipi_tokenizer_free(t);
            rmdir(dir);
            SKIP_BECAUSE("cannot drop privileges to uid 65534 here");
        }
        assert_int_equal(got, (ssize_t)sizeof err);
        st = err.code;
    }
    assert_int_equal(st, LIPI_EIO);
    assert_string_equal(err.path, path);
    assert_msg_contains(err, dir);
    assert_int_equal(count_entries(dir), 0);
    chmod(dir, 0700);
    rmdir(dir);
    lipi_tokenizer_free(t);
}

static void test_save_to_missing_directory_or_onto_a_directory_fails(void **state)
{
    lipi_tokenizer *t = load_ok(FIX "wordlevel.json");
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_save(t, "/tmp/lipi_no_such_dir_xyz/t.json", &err), LIPI_EIO);
    assert_string_equal(err.path, "/tmp/lipi_no_such_dir_xyz/t.json");
    assert_int_equal(lipi_tokenizer_save(t, "/tmp", &err), LIPI_EINVAL);
    assert_msg_contains(err, "directory");
    lipi_tokenizer_free(t);
}

static void test_atomic_abort_leaves_the_target_untouched(void **state)
{
    char dir[] = "/tmp/lipi_ab_XXXXXX", path[64];
    lipi_atomic_file af;
    lipi_error err = {0};
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.txt", dir);
    assert_int_equal(lipi_atomic_open(&af, path, &err), LIPI_OK);
    fputs("old", af.f);
    assert_int_equal(lipi_atomic_commit(&af, &err), LIPI_OK);
    assert_int_equal(lipi_atomic_open(&af, path, &err), LIPI_OK);
    fputs("new and longer", af.f);
    assert_int_equal(count_entries(dir), 2);
    lipi_atomic_abort(&af);
    lipi_atomic_abort(&af);
    size_t n;
    char *s = read_all(path, &n);
    assert_string_equal(s, "old");
    lipi_free(s);
    assert_int_equal(count_entries(dir), 1);
    unlink(path);
    rmdir(dir);
}

/* ------------------------------------------------------------------------ */
/* Building tokenizers in code                                               */
/* ------------------------------------------------------------------------ */

static lipi_tokenizer *build_bpe(void)
{
    static const char *const toks[] = {"<unk>", "a", "b", "c", "ab", "abc", "न", "म", "नम"};
    size_t lens[9];
    for (int i = 0; i < 9; i++)
        lens[i] = strlen(toks[i]);
    static const uint32_t merges[][2] = {{1, 2}, {4, 3}, {6, 7}};
    lipi_model_options opt;
    lipi_model_options_default(LIPI_MODEL_BPE, &opt);
    opt.unk_id = 0;
    opt.byte_fallback = true;
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_new(&t), LIPI_OK);
    lipi_status st = lipi_tokenizer_set_model(t, LIPI_MODEL_BPE, &opt, toks, lens, NULL, 9, merges,
                                              3, &err);
    if (st != LIPI_OK)
        fail_msg("%s", err.msg);
    lipi_added_token eos = {.content = "</s>", .len = 4, .id = 9, .special = true};
    assert_int_equal(lipi_tokenizer_add_token(t, &eos, &err), LIPI_OK);
    return t;
}

static void test_built_bpe_tokenizer_saves_and_loads_back(void **state)
{
    lipi_tokenizer *t = build_bpe();
    assert_int_equal(lipi_tokenizer_vocab_size(t), 10);
    assert_int_equal(id_of(t, "</s>"), 9);
    assert_int_equal(t->model.merges[1].result, 5);
    uint32_t rank;
    assert_true(lipi_merge_find(&t->model, 6, 7, &rank));
    assert_int_equal(rank, 2);
    char *s = to_json_ok(t, NULL);
    /* Built BPE models use Hugging Face's defaults: null affixes, array merges. */
    assert_non_null(strstr(s, "\"continuing_subword_prefix\": null,"));
    assert_non_null(strstr(s, "\"unk_token\": \"<unk>\","));
    assert_non_null(strstr(s, "\"merges\": [\n      [\n        \"a\",\n        \"b\"\n      ],"));
    lipi_free(s);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_set_model_rejects_bad_input_and_keeps_the_old_model(void **state)
{
    lipi_tokenizer *t = build_bpe();
    lipi_error err = {0};
    const char *dup[] = {"a", "b", "a"};
    size_t lens[] = {1, 1, 1};
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_WORDLEVEL, NULL, dup, lens, NULL, 3,
                                              NULL, 0, &err),
                     LIPI_EINVAL);
    assert_msg_contains(err, "tokens 0 and 2 are both \"a\"");
    const char *ab[] = {"a", "b"};
    const uint32_t bad[][2] = {{0, 1}};
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_BPE, NULL, ab, lens, NULL, 2, bad, 1,
                                              &err),
                     LIPI_EINVAL);
    assert_msg_contains(err, "merge 0: \"a\" + \"b\" joined is not a token");
    const uint32_t range[][2] = {{0, 7}};
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_BPE, NULL, ab, lens, NULL, 2, range, 1,
                                              &err),
                     LIPI_EINVAL);
    assert_msg_contains(err, "out of range");
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_UNIGRAM, NULL, ab, lens, NULL, 2, NULL,
                                              0, &err),
                     LIPI_EINVAL);
    /* The added token </s> (id 9) would collide with nothing here, but "a"
     * as an added token with another id would. */
    lipi_added_token a = {.content = "a", .len = 1, .id = 20};
    assert_int_equal(lipi_tokenizer_add_token(t, &a, &err), LIPI_EINVAL);
    assert_msg_contains(err, "the model gives it id 1");
    lipi_added_token taken = {.content = "<x>", .len = 3, .id = 2};
    assert_int_equal(lipi_tokenizer_add_token(t, &taken, &err), LIPI_EINVAL);
    /* Nothing changed. */
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_BPE);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 10);
    assert_int_equal(lipi_tokenizer_added_count(t), 1);
    lipi_tokenizer_free(t);
}

static void test_unigram_and_wordpiece_built_in_code(void **state)
{
    const char *toks[] = {"<unk>", "▁", "नम", "स्ते"};
    size_t lens[4];
    double scores[] = {0.0, -1.5, -2.25, -3.0};
    lipi_error err = {0};
    for (int i = 0; i < 4; i++)
        lens[i] = strlen(toks[i]);
    lipi_tokenizer *t = NULL;
    assert_int_equal(lipi_tokenizer_new(&t), LIPI_OK);
    lipi_model_options opt;
    lipi_model_options_default(LIPI_MODEL_UNIGRAM, &opt);
    opt.unk_id = 0;
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_UNIGRAM, &opt, toks, lens, scores, 4,
                                              NULL, 0, &err),
                     LIPI_OK);
    assert_true(lipi_tokenizer_get_score(t, 2) == -2.25);
    check_round_trip(t);
    double nan_scores[] = {0.0, NAN, 0.0, 0.0};
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_UNIGRAM, &opt, toks, lens, nan_scores,
                                              4, NULL, 0, &err),
                     LIPI_EINVAL);

    /* WordPiece without an unk_id falls back to "[UNK]" like Hugging Face. */
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_WORDPIECE, NULL, toks, lens, NULL, 4,
                                              NULL, 0, &err),
                     LIPI_OK);
    assert_string_equal(lipi_tokenizer_get_model_options(t)->continuing_subword_prefix, "##");
    char *s = to_json_ok(t, NULL);
    assert_non_null(strstr(s, "\"unk_token\": \"[UNK]\","));
    lipi_free(s);
    check_round_trip(t);
    lipi_tokenizer_free(t);
}

static void test_token_that_is_not_utf8_cannot_be_saved(void **state)
{
    const char *toks[] = {"a", "\xff\xfe"};
    size_t lens[] = {1, 2};
    lipi_error err = {0};
    lipi_tokenizer *t = NULL;
    char *s = NULL;
    assert_int_equal(lipi_tokenizer_new(&t), LIPI_OK);
    assert_int_equal(lipi_tokenizer_set_model(t, LIPI_MODEL_WORDLEVEL, NULL, toks, lens, NULL, 2,
                                              NULL, 0, &err),
                     LIPI_OK);
    assert_int_equal(lipi_tokenizer_to_json(t, &s, NULL, &err), LIPI_EINVAL);
    assert_null(s);
    assert_msg_contains(err, "not valid UTF-8");
    lipi_tokenizer_free(t);
}

static void test_empty_tokenizer_has_nothing_and_cannot_be_saved(void **state)
{
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    char *s = NULL;
    assert_int_equal(lipi_tokenizer_new(&t), LIPI_OK);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_NONE);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 0);
    assert_null(lipi_tokenizer_id_to_token(t, 0, NULL));
    assert_null(lipi_tokenizer_get_normalizer(t));
    assert_null(lipi_tokenizer_get_added(t, 0));
    assert_int_equal(lipi_tokenizer_to_json(t, &s, NULL, &err), LIPI_EINVAL);
    assert_int_equal(lipi_tokenizer_take_normalizer(t, NULL), LIPI_OK);
    lipi_tokenizer_free(t);
    lipi_tokenizer_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *text;
    size_t len;
} json_text;

static lipi_status load_and_save(void *ctx, lipi_error *err)
{
    const json_text *j = ctx;
    lipi_tokenizer *t = NULL;
    char *s = NULL;
    lipi_status st = lipi_tokenizer_load_json(j->text, j->len, "x.json", &t, err);
    if (st == LIPI_OK)
        st = lipi_tokenizer_to_json(t, &s, NULL, err);
    lipi_free(s);
    lipi_tokenizer_free(t);
    return st;
}

/* Every allocation fails in turn, jansson's included: the text is parsed
 * by lipi_json_loadb, whose failures are clean (jansson's own parser,
 * which mishandles them, is not used). */
static void test_allocation_failures_are_enomem_without_leaks(void **state)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        json_text j;
        char *text = read_all(fixtures[i], &j.len);
        j.text = text;
        assert_true(alloc_fail_loop(fixtures[i], load_and_save, &j) > 10);
        lipi_free(text);
    }
}

static lipi_status build_and_save(void *ctx, lipi_error *err)
{
    static const char *const toks[] = {"<unk>", "a", "b", "ab"};
    static const size_t lens[] = {5, 1, 1, 2};
    static const uint32_t merges[][2] = {{1, 2}};
    lipi_tokenizer *t = NULL;
    char *s = NULL;
    lipi_status st = lipi_tokenizer_new(&t);
    if (st != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK)
        st = lipi_tokenizer_set_model(t, LIPI_MODEL_BPE, NULL, toks, lens, NULL, 4, merges, 1, err);
    if (st == LIPI_OK) {
        lipi_added_token a = {.content = "<s>", .len = 3, .id = 4, .special = true};
        st = lipi_tokenizer_add_token(t, &a, err);
    }
    if (st == LIPI_OK)
        st = lipi_tokenizer_to_json(t, &s, NULL, err);
    lipi_free(s);
    lipi_tokenizer_free(t);
    (void)ctx;
    return st;
}

static void test_builder_allocation_failures_are_enomem_without_leaks(void **state)
{
    assert_true(alloc_fail_loop("builder", build_and_save, NULL) > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_loads_with_hugging_face_ids),
        cmocka_unit_test(test_gpt2_saves_merges_in_its_own_string_form),
        cmocka_unit_test(test_wordpiece_fixture),
        cmocka_unit_test(test_unigram_fixture),
        cmocka_unit_test(test_unigram_scores_are_written_shortest_like_hugging_face),
        cmocka_unit_test(test_wordlevel_fixture_added_tokens_numbered_as_hugging_face),
        cmocka_unit_test(test_bpe_byte_fallback_fixture),
        cmocka_unit_test(test_bpe_bytelevel_fixture_keeps_array_merges),
        cmocka_unit_test(test_normalizer_and_pre_tokenizer_sections_are_routed),
        cmocka_unit_test(test_bad_normalizer_or_pre_tokenizer_names_file_and_path),
        cmocka_unit_test(test_save_writes_hugging_face_key_order_and_layout),
        cmocka_unit_test(test_save_is_atomic_and_byte_deterministic),
        cmocka_unit_test(test_legacy_model_without_type_is_recognised),
        cmocka_unit_test(test_legacy_merge_with_spaces_in_tokens_splits_where_tokens_exist),
        cmocka_unit_test(test_bpe_merge_strips_continuing_prefix_of_right_part),
        cmocka_unit_test(test_old_metaspace_add_prefix_space_is_understood),
        cmocka_unit_test(test_truncated_json_reports_line_and_column),
        cmocka_unit_test(test_empty_and_non_object_files_are_rejected),
        cmocka_unit_test(test_deeply_nested_json_fails_cleanly),
        cmocka_unit_test(test_unknown_model_type_names_its_path),
        cmocka_unit_test(test_unknown_decoder_type_names_its_path),
        cmocka_unit_test(test_malformed_merges_name_index_and_expectation),
        cmocka_unit_test(test_merges_naming_unknown_tokens_are_rejected),
        cmocka_unit_test(test_duplicate_and_out_of_range_ids_are_rejected),
        cmocka_unit_test(test_added_token_ids_of_the_file_are_replaced_as_hugging_face),
        cmocka_unit_test(test_malformed_post_processors_and_decoders_are_rejected),
        cmocka_unit_test(test_sequences_nested_too_deep_are_rejected),
        cmocka_unit_test(test_missing_file_and_directory_are_io_errors),
        cmocka_unit_test(test_truncated_and_mutated_fixtures_fail_cleanly),
        cmocka_unit_test(test_read_file_enforces_its_size_limit),
        cmocka_unit_test(test_save_into_unwritable_directory_fails_and_leaves_nothing),
        cmocka_unit_test(test_save_to_missing_directory_or_onto_a_directory_fails),
        cmocka_unit_test(test_atomic_abort_leaves_the_target_untouched),
        cmocka_unit_test(test_set_decoder_json_replaces_the_decoder_and_keeps_it_on_bad_input),
        cmocka_unit_test(test_built_bpe_tokenizer_saves_and_loads_back),
        cmocka_unit_test(test_set_model_rejects_bad_input_and_keeps_the_old_model),
        cmocka_unit_test(test_unigram_and_wordpiece_built_in_code),
        cmocka_unit_test(test_token_that_is_not_utf8_cannot_be_saved),
        cmocka_unit_test(test_empty_tokenizer_has_nothing_and_cannot_be_saved),
        cmocka_unit_test(test_allocation_failures_are_enomem_without_leaks),
        cmocka_unit_test(test_builder_allocation_failures_are_enomem_without_leaks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Readers of other tokenizer formats: SentencePiece .model, BERT vocab.txt,
 * GPT-2 vocab.json + merges.txt, tiktoken ranks, GGUF metadata, and the
 * format detection of lipi_tokenizer_open. Reference files are the copies
 * committed under tests/fixtures/shared and data/ (tests/refdata.h); only
 * the GGUF checks need ../shared/data and skip without it. Hostile inputs
 * are built here byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer/base.h"
#include "tests/alloc_fail.h"
#include "tests/refdata.h"
#include "tokenizer/tokenizer.h"

#define GPT2_DIR REF_FIXTURES "/vocab/gpt2"
#define SPM_DIR REF_FIXTURES "/vectors/sentencepiece"
#define LASER REF_FIXTURES "/vocab/laser100k-spm/laser_100k.model"
#define TIKTOKEN_DIR "data/vocab/tiktoken"
/* The vocab-only GGUF files (9 MB together) are not committed. */
#define GGUF_DIR REF_SHARED "/vectors/llama.cpp"

static bool have(const char *path)
{
    return access(path, R_OK) == 0;
}

static char *slurp(const char *path, size_t *len)
{
    char *d = NULL;
    lipi_error err;
    if (lipi_read_file(path, (size_t)1 << 30, &d, len, &err) != LIPI_OK)
        fail_msg("cannot read %s: %s", path, err.msg);
    return d;
}

static void spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* The tokenizer's tokenizer.json, parsed. */
static json_t *as_json(const lipi_tokenizer *t)
{
    char *s = NULL;
    size_t n = 0;
    lipi_error err;
    if (lipi_tokenizer_to_json(t, &s, &n, &err) != LIPI_OK)
        fail_msg("to_json: %s", err.msg);
    json_t *j = json_loadb(s, n, 0, NULL);
    lipi_free(s);
    assert_non_null(j);
    return j;
}

static uint32_t id_of(const lipi_tokenizer *t, const char *s)
{
    uint32_t id = UINT32_MAX;
    if (!lipi_tokenizer_token_to_id(t, s, strlen(s), &id))
        fail_msg("token \"%s\" not found", s);
    return id;
}

static void expect_format_error(lipi_status st, const lipi_error *err, const char *needle)
{
    if (st != LIPI_EFORMAT)
        fail_msg("expected EFORMAT, got %s: %s", lipi_status_name(st), err->msg);
    if (needle && !strstr(err->msg, needle))
        fail_msg("message \"%s\" does not mention \"%s\"", err->msg, needle);
}

/* ======================================================================== */
/* Building inputs                                                           */
/* ======================================================================== */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bytes;

static void put(bytes *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_varint(bytes *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

static void pb_bytes(bytes *b, unsigned field, const void *s, size_t n)
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, n);
    put(b, s, n);
}

static void pb_uint(bytes *b, unsigned field, uint64_t v)
{
    put_varint(b, (uint64_t)field << 3);
    put_varint(b, v);
}

static void pb_float(bytes *b, unsigned field, float f)
{
    uint8_t le[4];
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        le[i] = (uint8_t)(u >> (8 * i));
    put_varint(b, (uint64_t)field << 3 | 5);
    put(b, le, 4);
}

typedef struct {
    const char *piece;
    float score;
    int type;
} piece;

/* A ModelProto with the given pieces (model_type 1 Unigram, 2 BPE). */
static bytes spm_model(const piece *p, size_t n, int model_type, bool dummy_prefix)
{
    bytes m = {0};
    for (size_t i = 0; i < n; i++) {
        bytes sp = {0};
        pb_bytes(&sp, 1, p[i].piece, strlen(p[i].piece));
        pb_float(&sp, 2, p[i].score);
        if (p[i].type != 1)
            pb_uint(&sp, 3, (uint64_t)p[i].type);
        pb_bytes(&m, 1, sp.p, sp.len);
        free(sp.p);
    }
    bytes ts = {0}, ns = {0};
    pb_uint(&ts, 3, (uint64_t)model_type);
    pb_uint(&ts, 42, (uint64_t)(int64_t)-1); /* eos_id -1: a 10-byte varint */
    pb_bytes(&m, 2, ts.p, ts.len);
    pb_bytes(&ns, 1, "identity", 8);
    pb_uint(&ns, 3, dummy_prefix);
    pb_uint(&ns, 99, 7); /* an unknown field, skipped */
    pb_bytes(&m, 3, ns.p, ns.len);
    free(ts.p);
    free(ns.p);
    return m;
}

static const piece small_unigram[] = {
    {"<unk>", 0, 2},  {"<s>", 0, 3},    {"</s>", 0, 3},   {"\xe2\x96\x81", -2, 1},
    {"a", -3, 1},     {"b", -3, 1},     {"\xe2\x96\x81" "a", -1, 1},
    {"ab", -1.5f, 1}, {"<sep>", 0, 4},
};

static const piece small_bpe[] = {
    {"<unk>", 0, 2}, {"\xe2\x96\x81", -1, 1}, {"a", -2, 1},     {"b", -3, 1},
    {"ab", -0.5f, 1}, {"\xe2\x96\x81" "a", -0.7f, 1}, {"\xe2\x96\x81" "ab", -0.25f, 1},
};

/* GGUF writer. */
static void put_u32(bytes *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, le, 4);
}

static void put_u64(bytes *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        put(b, &c, 1);
    }
}

static void put_str(bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void gguf_header(bytes *b, uint32_t version, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, 0);
    put_u64(b, n_kv);
}

static void kv_str(bytes *b, const char *key, const char *val)
{
    put_str(b, key);
    put_u32(b, 8);
    put_str(b, val);
}

static void kv_strs(bytes *b, const char *key, const char *const *v, size_t n)
{
    put_str(b, key);
    put_u32(b, 9);
    put_u32(b, 8);
    put_u64(b, n);
    for (size_t i = 0; i < n; i++)
        put_str(b, v[i]);
}

/* A gpt2-model GGUF with tokens a b ab and the merge "a b". */
static bytes small_gguf(const char *pre)
{
    static const char *const toks[] = {"a", "b", "ab", "<|end|>"};
    static const char *const merges[] = {"a b"};
    bytes b = {0};
    gguf_header(&b, 3, pre ? 5 : 4);
    kv_str(&b, "general.architecture", "gpt2");
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    if (pre)
        kv_str(&b, "tokenizer.ggml.pre", pre);
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 4);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    return b;
}

/* ======================================================================== */
/* GPT-2 files                                                               */
/* ======================================================================== */

/* Merges as ["a", "b"] whichever way they were written. */
static void normalize_merges(json_t *model)
{
    json_t *m = json_object_get(model, "merges");
    size_t i;
    json_t *v;
    json_array_foreach(m, i, v) {
        if (json_is_string(v)) {
            const char *s = json_string_value(v), *sp = strchr(s, ' ');
            assert_non_null(sp);
            json_array_set_new(m, i, json_pack("[s#, s]", s, (int)(sp - s), sp + 1));
        }
    }
}

static void test_gpt2_files_build_the_model_of_gpt2_tokenizer_json(void **state)
{
    (void)state;
    size_t vn, mn;
    char *v = slurp(GPT2_DIR "/encoder.json", &vn);
    char *m = slurp(GPT2_DIR "/vocab.bpe", &mn);
    lipi_tokenizer *a = NULL, *b = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_from_gpt2(v, vn, m, mn, "encoder.json", NULL, 0, &a, &err),
                     LIPI_OK);
    assert_int_equal(lipi_tokenizer_load(GPT2_DIR "/tokenizer.json", &b, &err), LIPI_OK);
    json_t *ja = as_json(a), *jb = as_json(b);
    normalize_merges(json_object_get(ja, "model"));
    normalize_merges(json_object_get(jb, "model"));
    static const char *const keys[] = {"model",          "normalizer", "pre_tokenizer",
                                       "post_processor", "decoder",    "added_tokens"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!json_equal(json_object_get(ja, keys[i]), json_object_get(jb, keys[i])))
            fail_msg("\"%s\" differs from GPT-2's tokenizer.json", keys[i]);
    assert_int_equal(lipi_tokenizer_vocab_size(a), 50257);
    assert_int_equal(lipi_tokenizer_merge_count(a), 50000);
    assert_true(lipi_tokenizer_get_model_options(a)->byte_level);
    json_decref(ja);
    json_decref(jb);
    lipi_tokenizer_free(a);
    lipi_tokenizer_free(b);
    lipi_free(v);
    lipi_free(m);
}

static void test_gpt2_merges_must_name_tokens(void **state)
{
    (void)state;
    static const char vocab[] = "{\"a\": 0, \"b\": 1, \"ab\": 2}";
    static const char bad_part[] = "#version: 0.2\na b\na c\n";
    static const char bad_line[] = "a b\nab\n";
    lipi_tokenizer *t = NULL;
    lipi_error err;
    lipi_status st = lipi_tokenizer_from_gpt2(vocab, strlen(vocab), bad_part, strlen(bad_part),
                                              "vocab.json", NULL, 0, &t, &err);
    expect_format_error(st, &err, "\"c\"");
    assert_int_equal(err.line, 3);
    st = lipi_tokenizer_from_gpt2(vocab, strlen(vocab), bad_line, strlen(bad_line), "vocab.json",
                                  NULL, 0, &t, &err);
    expect_format_error(st, &err, "left right");
    assert_int_equal(err.line, 2);
    assert_null(t);
}

/* ======================================================================== */
/* tiktoken                                                                  */
/* ======================================================================== */

static void test_sha256_gives_the_fips_180_digests_in_any_chunks(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t repeat;
        const char *hex;
    } cases[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
        /* Lengths around the padding's block boundary. */
        {"a", 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {"a", 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {"a", 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {"a", 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {"a", 119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {"a", 120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        /* Around where a running hash moves from lipi's code to OpenSSL's
         * (16 KB; Python's hashlib gave these). */
        {"a", 16383, "2e1023f5ad46df0d01aa4b73ce3db452ed0a768387949efa5a858b532b763012"},
        {"a", 16384, "f3336bea752b5a28743033dd2c844a4a63fba08871aaee2586a2bf2d69be83a2"},
        {"a", 16385, "608b801060d579a7b659a01755259a13dec8853b97d3d8062763c97ffac6ddae"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].text) * cases[i].repeat;
        char *buf = malloc(n + 1), hex[65];
        assert_non_null(buf);
        for (size_t k = 0; k < cases[i].repeat; k++)
            memcpy(buf + k * strlen(cases[i].text), cases[i].text, strlen(cases[i].text));
        assert_int_equal(lipi_sha256_hex(buf, n, hex), LIPI_OK);
        assert_string_equal(hex, cases[i].hex);
        /* The same bytes in uneven pieces, crossing block boundaries. */
        lipi_sha256 c;
        lipi_sha256_init(&c);
        for (size_t off = 0, step = 1; off < n; off += step, step = step % 97 + 1)
            lipi_sha256_update(&c, buf + off, step < n - off ? step : n - off);
        assert_int_equal(lipi_sha256_final_hex(&c, hex), LIPI_OK);
        assert_string_equal(hex, cases[i].hex);
        free(buf);
    }
}

static void test_cl100k_and_o200k_load_by_name_with_their_specials(void **state)
{
    (void)state;
    lipi_open_options opt = {.data_dir = TIKTOKEN_DIR};
    lipi_tokenizer *t = NULL;
    lipi_error err;
    if (lipi_tokenizer_open("cl100k_base", &opt, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 100277);
    assert_int_equal(lipi_tokenizer_merge_count(t), 100000);
    assert_int_equal(id_of(t, "hello"), 15339);
    assert_int_equal(id_of(t, "\xc4\xa0world"), 1917); /* " world" */
    assert_int_equal(id_of(t, "\xc4\x8a"), 198);       /* "\n" */
    assert_int_equal(id_of(t, "<|endoftext|>"), 100257);
    assert_int_equal(id_of(t, "<|endofprompt|>"), 100276);
    assert_null(lipi_tokenizer_id_to_token(t, 100256, NULL)); /* no token has this id */
    assert_true(lipi_tokenizer_get_model_options(t)->ignore_merges);
    assert_non_null(lipi_tokenizer_get_pretokenizer(t));
    assert_int_equal(lipi_tokenizer_added_count(t), 5);
    assert_true(lipi_tokenizer_get_added(t, 0)->special);
    lipi_tokenizer_free(t);

    if (lipi_tokenizer_open(TIKTOKEN_DIR "/o200k_base.tiktoken", NULL, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 200019);
    assert_int_equal(id_of(t, "hello"), 24912);
    assert_int_equal(id_of(t, "\xc4\xa0world"), 2375);
    assert_int_equal(id_of(t, "<|endoftext|>"), 199999);
    assert_int_equal(id_of(t, "<|endofprompt|>"), 200018);
    lipi_tokenizer_free(t);
}

static void test_bare_names_and_missing_patterns_are_clear_errors(void **state)
{
    (void)state;
    lipi_tokenizer *t = NULL;
    lipi_error err;
    lipi_open_options opt = {.data_dir = "/nonexistent-lipi-dir"};
    assert_int_equal(lipi_tokenizer_open("cl100k_base", &opt, &t, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "cl100k_base.tiktoken"));
    assert_int_equal(lipi_tokenizer_open("no_such_encoding", NULL, &t, &err), LIPI_EIO);

    char dir[] = "/tmp/lipi-readers-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/mine.tiktoken", dir);
    spit(path, "YQ== 0\nYg== 1\nYWI= 2\n", 21);
    assert_int_equal(lipi_tokenizer_open(path, NULL, &t, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "pattern"));
    opt = (lipi_open_options){.pattern = "\\S+|\\s+"};
    assert_int_equal(lipi_tokenizer_open(path, &opt, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_merge_count(t), 1);
    lipi_tokenizer_free(t);
    /* A meta file beside the ranks names the pattern and special tokens. */
    char meta[256];
    snprintf(meta, sizeof meta, "%s/mine.meta.json", dir);
    static const char m[] = "{\"pat_str\": \"\\\\S+\", \"special_tokens\": {\"<|x|>\": 7}}";
    spit(meta, m, strlen(m));
    assert_int_equal(lipi_tokenizer_open(path, NULL, &t, &err), LIPI_OK);
    assert_int_equal(id_of(t, "<|x|>"), 7);
    lipi_tokenizer_free(t);
    unlink(meta);
    unlink(path);
    rmdir(dir);
}

static void test_tiktoken_merges_come_from_rank_bpe(void **state)
{
    (void)state;
    /* a b c ab bc abc ca xyz(no merge path) x y z */
    static const char ranks[] = "YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYmM= 4\nYWJj 5\nY2E= 6\n"
                                "eA== 7\neQ== 8\neg== 9\neHl6 10\n";
    lipi_tokenizer *t = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_from_tiktoken(ranks, strlen(ranks), "t", "\\S+", NULL, 0,
                                                  0, &t, &err),
                     LIPI_OK);
    /* ab, bc, abc = ab + c (ab outranks bc), ca; xyz has no two-part path. */
    static const uint32_t want[][2] = {{0, 1}, {1, 2}, {3, 2}, {2, 0}};
    assert_int_equal(lipi_tokenizer_merge_count(t), 4);
    for (size_t r = 0; r < 4; r++) {
        uint32_t l, rr;
        lipi_tokenizer_get_merge(t, r, &l, &rr);
        assert_int_equal(l, want[r][0]);
        assert_int_equal(rr, want[r][1]);
    }
    lipi_tokenizer_free(t);

    /* Bytes outside printable ASCII use the GPT-2 alphabet: " " is "Ġ". */
    static const char space[] = "IA== 0\n";
    assert_int_equal(lipi_tokenizer_from_tiktoken(space, strlen(space), "t", "\\S+", NULL, 0, 0,
                                                  &t, &err),
                     LIPI_OK);
    assert_int_equal(id_of(t, "\xc4\xa0"), 0);
    lipi_tokenizer_free(t);
}

/* The rank files bundled in the repository (all four encodings). */
#define BUNDLED_TIKTOKEN "data/vocab/tiktoken"

static void test_p50k_and_r50k_have_tiktoken_vocabulary_sizes(void **state)
{
    (void)state;
    lipi_open_options opt = {.data_dir = BUNDLED_TIKTOKEN};
    lipi_tokenizer *t = NULL;
    lipi_error err;
    /* explicit_n_vocab in tiktoken's openai_public.py: 50281 and 50257. */
    if (lipi_tokenizer_open("p50k_base", &opt, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 50281);
    assert_int_equal(id_of(t, "<|endoftext|>"), 50256);
    assert_int_equal(id_of(t, "hello"), 31373);
    assert_int_equal(lipi_tokenizer_added_count(t), 1);
    lipi_tokenizer_free(t);
    if (lipi_tokenizer_open(BUNDLED_TIKTOKEN "/r50k_base.tiktoken", NULL, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 50257);
    assert_int_equal(id_of(t, "<|endoftext|>"), 50256);
    assert_int_equal(id_of(t, "hello"), 31373);
    lipi_tokenizer_free(t);
}

/* dir/name holding `len` bytes of `data`, with byte `flip` (if below len)
 * xor-ed with 1. */
static void spit_changed(const char *dir, const char *name, const char *data, size_t len,
                         size_t flip, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, data, len);
    if (flip < len)
        copy[flip] ^= 1;
    spit(path, copy, len);
    free(copy);
}

static void test_published_rank_files_that_differ_are_refused_with_both_checksums(void **state)
{
    (void)state;
    static const char cl100k_sha[] =
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7";
    size_t len = 0;
    char *full = slurp(BUNDLED_TIKTOKEN "/cl100k_base.tiktoken", &len);
    char dir[] = "/tmp/lipi-readers-XXXXXX", path[256], found[65];
    assert_non_null(mkdtemp(dir));
    lipi_open_options by_name = {.data_dir = dir};
    lipi_tokenizer *t = NULL;
    lipi_error err;

    /* Cut at a line boundary: every line left is well formed, the ranks run
     * 0..N-1 without a gap, and only the checksum tells. */
    size_t cut_len = len / 2;
    while (full[cut_len - 1] != '\n')
        cut_len++;
    spit_changed(dir, "cl100k_base.tiktoken", full, cut_len, SIZE_MAX, path, sizeof path);
    lipi_sha256_hex(full, cut_len, found);
    expect_format_error(lipi_tokenizer_open(path, NULL, &t, &err), &err, cl100k_sha);
    assert_non_null(strstr(err.msg, found));
    assert_non_null(strstr(err.msg, "truncated or modified"));
    assert_string_equal(err.path, path);
    assert_null(t);
    /* The same file by its bare name. */
    expect_format_error(lipi_tokenizer_open("cl100k_base", &by_name, &t, &err), &err,
                        cl100k_sha);
    assert_string_equal(err.path, path);
    /* Still refused when named without the extension. */
    assert_int_equal(unlink(path), 0);
    spit_changed(dir, "cl100k_base", full, cut_len, SIZE_MAX, path, sizeof path);
    expect_format_error(lipi_tokenizer_open(path, NULL, &t, &err), &err, cl100k_sha);
    assert_int_equal(unlink(path), 0);

    /* One bit of one byte, the same length. */
    spit_changed(dir, "cl100k_base.tiktoken", full, len, 1000000, path, sizeof path);
    size_t tampered_len = 0;
    char *tampered = slurp(path, &tampered_len);
    assert_int_equal(tampered_len, len);
    lipi_sha256_hex(tampered, tampered_len, found);
    lipi_free(tampered);
    expect_format_error(lipi_tokenizer_open("cl100k_base", &by_name, &t, &err), &err, cl100k_sha);
    assert_non_null(strstr(err.msg, found));
    assert_int_equal(unlink(path), 0);

    /* The same bytes under another name are just a rank file. */
    lipi_open_options pat = {.pattern = "\\S+|\\s+"};
    spit_changed(dir, "mine.tiktoken", full, cut_len, SIZE_MAX, path, sizeof path);
    if (lipi_tokenizer_open(path, &pat, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    lipi_tokenizer_free(t);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    lipi_free(full);
}

static void test_rank_gaps_are_refused_unless_a_special_token_or_the_meta_file_fills_them(
    void **state)
{
    (void)state;
    static const char gap[] = "YQ== 0\nYg== 1\nYw== 3\nZA== 4\n";
    static const lipi_special_token sp2[] = {{"<|s|>", 2}};
    lipi_tokenizer *t = NULL;
    lipi_error err;
    expect_format_error(lipi_tokenizer_from_tiktoken(gap, strlen(gap), "g", "\\S+", NULL, 0, 0,
                                                     &t, &err),
                        &err, "expected rank 2, found 3: rank 2 is missing");
    assert_int_equal(err.line, 3);
    assert_string_equal(err.path, "g");
    assert_null(t);
    /* Not from 0. */
    expect_format_error(lipi_tokenizer_from_tiktoken("Yg== 1\n", 7, "g", "\\S+", NULL, 0, 0,
                                                     &t, &err),
                        &err, "rank 0 is missing");
    assert_int_equal(err.line, 1);
    /* A special token's id is no gap (p50k_base's <|endoftext|>). */
    assert_int_equal(lipi_tokenizer_from_tiktoken(gap, strlen(gap), "g", "\\S+", sp2, 1, 0, &t,
                                                  &err),
                     LIPI_OK);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 5);
    lipi_tokenizer_free(t);
    assert_int_equal(lipi_tokenizer_from_tiktoken(gap, strlen(gap), "g", "\\S+", NULL, 0,
                                                  LIPI_TIKTOKEN_ALLOW_RANK_GAPS, &t, &err),
                     LIPI_OK);
    assert_null(lipi_tokenizer_id_to_token(t, 2, NULL));
    lipi_tokenizer_free(t);

    /* Through a file: the meta file beside it may allow gaps. */
    char dir[] = "/tmp/lipi-readers-XXXXXX", path[256], meta[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/gappy.tiktoken", dir);
    snprintf(meta, sizeof meta, "%s/gappy.meta.json", dir);
    spit(path, gap, strlen(gap));
    static const char strict[] = "{\"pat_str\": \"\\\\S+\"}";
    spit(meta, strict, strlen(strict));
    expect_format_error(lipi_tokenizer_open(path, NULL, &t, &err), &err, "allow_rank_gaps");
    assert_int_equal(err.line, 3);
    assert_string_equal(err.path, path);
    static const char lax[] = "{\"pat_str\": \"\\\\S+\", \"allow_rank_gaps\": true}";
    spit(meta, lax, strlen(lax));
    if (lipi_tokenizer_open(path, NULL, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 5);
    lipi_tokenizer_free(t);
    static const char bad[] = "{\"pat_str\": \"\\\\S+\", \"allow_rank_gaps\": 1}";
    spit(meta, bad, strlen(bad));
    expect_format_error(lipi_tokenizer_open(path, NULL, &t, &err), &err,
                        "allow_rank_gaps: expected true or false");
    assert_string_equal(err.path, meta);
    unlink(meta);
    unlink(path);
    rmdir(dir);
}

static void test_tiktoken_rejects_bad_lines_with_their_position(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t line;
        const char *needle;
    } cases[] = {
        {"YQ== 0\nY!== 1\n", 2, "base64"},
        {"YQ== 0\nYQ 1\n", 2, "divisible by 4"},
        {"YR== 0\n", 1, "base64"}, /* bits under the padding */
        {"YQ== 0\nYg== 0\n", 2, "rank 0 again"},
        {"YQ== 0\nYQ== 1\n", 2, "distinct tokens"},
        {"YQ==0\n", 1, "no space"},
        {"YQ== 1x\n", 1, "decimal rank"},
        {"YQ== 99999999999\n", 1, "decimal rank"},
        {"YQ== 4000000\n", 1, "ranks below"},
        {" 0\n", 1, "base64 token"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lipi_tokenizer *t = NULL;
        lipi_error err = {0};
        lipi_status st = lipi_tokenizer_from_tiktoken(cases[i].text, strlen(cases[i].text), "r",
                                                      "\\S+", NULL, 0, 0, &t, &err);
        expect_format_error(st, &err, cases[i].needle);
        assert_int_equal(err.line, cases[i].line);
        assert_string_equal(err.path, "r");
        assert_null(t);
    }
    /* A pattern PCRE2 cannot compile, or that is not UTF-8. */
    {
        lipi_tokenizer *t = NULL;
        lipi_error err;
        assert_int_equal(lipi_tokenizer_from_tiktoken("YQ== 0\n", 7, "r", "(", NULL, 0, 0, &t,
                                                      &err),
                         LIPI_EREGEX);
        assert_string_equal(err.path, "r");
        assert_int_equal(lipi_tokenizer_from_tiktoken("YQ== 0\n", 7, "r", "\xff", NULL, 0, 0,
                                                      &t, &err),
                         LIPI_EINVAL);
    }
    /* A special token may not take a rank's id. */
    static const lipi_special_token sp[] = {{"<|s|>", 1}};
    lipi_tokenizer *t = NULL;
    lipi_error err;
    expect_format_error(lipi_tokenizer_from_tiktoken("YQ== 0\nYg== 1\n", 14, "r", "\\S+", sp, 1,
                                                     0, &t, &err),
                        &err, "<|s|>");
}

/* ======================================================================== */
/* SentencePiece                                                             */
/* ======================================================================== */

static void test_spm_models_load_pieces_specials_and_normalizer(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        size_t n;
        const char *piece;
        uint32_t id;
        bool charsmap;
    } cases[] = {
        {SPM_DIR "/test_model.model", 1000, "\xe2\x96\x81the", 7, true},
        {SPM_DIR "/test_ja_model.model", 8000, "\xe3\x81\xae", 4, true},
        {LASER, 100000,
         "\xe2\x96\x81\xe0\xa4\xad\xe0\xa4\xbe\xe0\xa4\xb0\xe0\xa4\xa4", 3534, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lipi_tokenizer *t = NULL;
        lipi_error err;
        if (lipi_tokenizer_open(cases[i].path, NULL, &t, &err) != LIPI_OK)
            fail_msg("%s: %s", cases[i].path, err.msg);
        assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_UNIGRAM);
        assert_int_equal(lipi_tokenizer_vocab_size(t), cases[i].n);
        assert_int_equal(id_of(t, cases[i].piece), cases[i].id);
        assert_int_equal(id_of(t, "<unk>"), 0);
        assert_int_equal(id_of(t, "<s>"), 1);
        assert_int_equal(id_of(t, "</s>"), 2);
        assert_int_equal(lipi_tokenizer_get_model_options(t)->unk_id, 0);
        assert_int_equal(lipi_tokenizer_added_count(t), 3);
        assert_non_null(lipi_tokenizer_get_normalizer(t));
        json_t *j = as_json(t);
        json_t *norm = json_object_get(j, "normalizer");
        json_t *first = json_array_get(json_object_get(norm, "normalizers"), 0);
        const char *type = json_string_value(json_object_get(first, "type"));
        assert_string_equal(type, cases[i].charsmap ? "Precompiled" : "Replace");
        assert_true(lipi_tokenizer_get_score(t, cases[i].id) < 0);
        json_decref(j);
        lipi_tokenizer_free(t);
    }
}

static void test_spm_unigram_parts_follow_sentencepiece(void **state)
{
    (void)state;
    bytes m = spm_model(small_unigram, sizeof small_unigram / sizeof small_unigram[0], 1, true);
    lipi_tokenizer *t = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_from_spm(m.p, m.len, "u.model", &t, &err), LIPI_OK);
    json_t *j = as_json(t);
    /* A user-defined piece: the dummy "▁" comes from Metaspace "first". */
    json_t *pre = json_object_get(j, "pre_tokenizer");
    assert_string_equal(json_string_value(json_object_get(pre, "type")), "Metaspace");
    assert_string_equal(json_string_value(json_object_get(pre, "prepend_scheme")), "first");
    assert_true(json_is_true(json_object_get(pre, "split")));
    json_t *added = json_object_get(j, "added_tokens");
    assert_int_equal(json_array_size(added), 4);
    json_t *sep = json_array_get(added, 3);
    assert_string_equal(json_string_value(json_object_get(sep, "content")), "<sep>");
    assert_true(json_is_false(json_object_get(sep, "special")));
    assert_true(json_is_true(json_object_get(json_array_get(added, 1), "special")));
    assert_true(lipi_tokenizer_get_score(t, 6) == -1.0);
    json_decref(j);
    lipi_tokenizer_free(t);
    free(m.p);

    /* Without user-defined pieces the prefix is a Prepend normalizer
     * (SentencePiece adds it even before a leading "▁"). */
    m = spm_model(small_unigram, 8, 1, true);
    assert_int_equal(lipi_tokenizer_from_spm(m.p, m.len, "u.model", &t, &err), LIPI_OK);
    j = as_json(t);
    pre = json_object_get(j, "pre_tokenizer");
    assert_string_equal(json_string_value(json_object_get(pre, "prepend_scheme")), "never");
    char *norm = json_dumps(json_object_get(j, "normalizer"), JSON_COMPACT);
    assert_non_null(strstr(norm, "\"Prepend\""));
    assert_non_null(strstr(norm, "\\\\A +"));
    free(norm);
    json_decref(j);
    lipi_tokenizer_free(t);
    free(m.p);
}

static void test_spm_bpe_merges_rank_splits_by_score(void **state)
{
    (void)state;
    bytes m = spm_model(small_bpe, sizeof small_bpe / sizeof small_bpe[0], 2, true);
    lipi_tokenizer *t = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_from_spm(m.p, m.len, "b.model", &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_BPE);
    assert_true(lipi_tokenizer_get_model_options(t)->fuse_unk);
    /* Splits into two pieces: ▁ab = ▁+ab (-0.25) and ▁a+b (-0.25), then
     * ab = a+b (-0.5), then ▁a = ▁+a (-0.7). */
    static const uint32_t want[][2] = {{1, 4}, {5, 3}, {2, 3}, {1, 2}};
    assert_int_equal(lipi_tokenizer_merge_count(t), 4);
    for (size_t r = 0; r < 4; r++) {
        uint32_t l, rr;
        lipi_tokenizer_get_merge(t, r, &l, &rr);
        if (l != want[r][0] || rr != want[r][1])
            fail_msg("merge %zu is (%u, %u), expected (%u, %u)", r, l, rr, want[r][0],
                     want[r][1]);
    }
    lipi_tokenizer_free(t);
    free(m.p);
}

static void test_spm_truncated_files_fail_with_offsets(void **state)
{
    (void)state;
    size_t len;
    char *d = slurp(SPM_DIR "/test_model.model", &len);
    size_t cuts[] = {1, 2, 3, 7, 50, 999, len / 2, len - 300, len - 1};
    size_t failed = 0;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        lipi_tokenizer *t = NULL;
        lipi_error err = {0};
        lipi_status st = lipi_tokenizer_from_spm(d, cuts[i], "cut.model", &t, &err);
        /* A cut that falls between two fields leaves a shorter valid model. */
        if (st == LIPI_OK) {
            lipi_tokenizer_free(t);
            continue;
        }
        expect_format_error(st, &err, NULL);
        assert_true(err.offset <= cuts[i]);
        assert_string_equal(err.path, "cut.model");
        failed++;
    }
    assert_true(failed >= sizeof cuts / sizeof cuts[0] - 2);
    /* The last byte cut always falls inside a field. */
    lipi_tokenizer *t = NULL;
    lipi_error err;
    expect_format_error(lipi_tokenizer_from_spm(d, len - 1, "cut.model", &t, &err), &err,
                        "expected");
    lipi_free(d);
}

static void test_spm_hostile_varints_lengths_and_types(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t len, offset;
        const char *needle;
    } cases[] = {
        {"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11, 1, "at most 64 bits"},
        {"\x0a\x7f" "abc", 5, 1, "found a length of 127"},
        {"\x0a\x03\x0a\x03" "a", 5, 3, "found a length of 3"},
        {"\x08\x01", 2, 0, "expected wire type 2"},
        {"\x0b", 1, 0, "wire type"},
        {"\x0a", 1, 1, "found the end"},
        {"\x0a\x04\x0a\x02\xc3\x28", 6, 4, "UTF-8"},
        {"\x0a\x05\x0a\x01" "a\x18\x09", 7, 6, "type from 1"},
        {"\x0a\x02\x18\x01", 4, 2, "non-empty piece"},
        {"\x12\x00", 2, 0, "found none"},
        {"\x0a\x03\x0a\x01" "a", 5, 0, "unknown piece"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lipi_tokenizer *t = NULL;
        lipi_error err = {0};
        lipi_status st = lipi_tokenizer_from_spm(cases[i].bytes, cases[i].len, "h.model", &t, &err);
        expect_format_error(st, &err, cases[i].needle);
        if (err.offset != cases[i].offset)
            fail_msg("case %zu: offset %zu, expected %zu (%s)", i, err.offset, cases[i].offset,
                     err.msg);
    }
    /* model_type WORD cannot be converted. */
    bytes m = spm_model(small_unigram, 3, 3, true);
    lipi_tokenizer *t = NULL;
    lipi_error err;
    expect_format_error(lipi_tokenizer_from_spm(m.p, m.len, "w.model", &t, &err), &err, "WORD");
    free(m.p);
}

/* ======================================================================== */
/* GGUF                                                                      */
/* ======================================================================== */

/* Whether every GGUF file the GGUF tests read is in ../shared/data. */
static bool have_ggufs(void)
{
    static const char *const names[] = {"bert-bge", "gpt-2",    "llama-spm", "phi-3",
                                        "falcon",   "gpt-neox", "baichuan"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "vectors/llama.cpp/ggml-vocab-%s.gguf", names[i]);
        if (!ref_shared(rel))
            return false;
    }
    return true;
}

#define GGUF_MISSING ref_missing("llama.cpp vocab-only GGUF files, 9 MB, not committed")

static void test_gguf_vocab_files_load_with_their_model_types(void **state)
{
    (void)state;
    if (!have_ggufs())
        SKIP_BECAUSE("%s", GGUF_MISSING);
    static const struct {
        const char *file;
        lipi_model_type type;
        size_t n, merges;
    } cases[] = {
        {"ggml-vocab-bert-bge.gguf", LIPI_MODEL_WORDPIECE, 30522, 0},
        {"ggml-vocab-gpt-2.gguf", LIPI_MODEL_BPE, 50257, 50000},
        {"ggml-vocab-llama-spm.gguf", LIPI_MODEL_BPE, 32000, 61249},
        {"ggml-vocab-phi-3.gguf", LIPI_MODEL_BPE, 32064, 61249},
        {"ggml-vocab-falcon.gguf", LIPI_MODEL_BPE, 65024, 64784},
        {"ggml-vocab-gpt-neox.gguf", LIPI_MODEL_BPE, 50432, 50009},
        {"ggml-vocab-baichuan.gguf", LIPI_MODEL_BPE, 64000, 54804},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, GGUF_DIR "/%s", cases[i].file);
        lipi_tokenizer *t = NULL;
        lipi_error err;
        if (lipi_tokenizer_open(path, NULL, &t, &err) != LIPI_OK)
            fail_msg("%s: %s", path, err.msg);
        assert_int_equal(lipi_tokenizer_model_type(t), cases[i].type);
        assert_int_equal(lipi_tokenizer_vocab_size(t), cases[i].n);
        assert_int_equal(lipi_tokenizer_merge_count(t), cases[i].merges);
        lipi_tokenizer_free(t);
    }
    /* bge: llama.cpp's "▁hello" / "ing" are WordPiece's "hello" / "##ing",
     * the ids of bert-base-uncased's vocab.txt. */
    lipi_tokenizer *t = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_open(GGUF_DIR "/ggml-vocab-bert-bge.gguf", NULL, &t, &err),
                     LIPI_OK);
    assert_int_equal(id_of(t, "hello"), 7592);
    assert_int_equal(id_of(t, "##ing"), 2075);
    assert_int_equal(id_of(t, "[CLS]"), 101);
    assert_string_equal(lipi_tokenizer_get_model_options(t)->continuing_subword_prefix, "##");
    lipi_tokenizer_free(t);
    /* llama: SentencePiece BPE with byte fallback and BOS added. */
    assert_int_equal(lipi_tokenizer_open(GGUF_DIR "/ggml-vocab-llama-spm.gguf", NULL, &t, &err),
                     LIPI_OK);
    assert_true(lipi_tokenizer_get_model_options(t)->byte_fallback);
    assert_int_equal(id_of(t, "<0x0A>"), 13);
    json_t *j = as_json(t);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "post_processor"),
                                                          "type")),
                        "TemplateProcessing");
    json_decref(j);
    lipi_tokenizer_free(t);
}

static void test_gguf_hostile_headers_fail_without_large_allocations(void **state)
{
    (void)state;
    lipi_tokenizer *t = NULL;
    lipi_error err;
    bytes b = {0};

    gguf_header(&b, 3, 0);
    memcpy(b.p, "GGUX", 4);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "magic");
    b.len = 0;
    gguf_header(&b, 1, 0);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "version 1");
    assert_int_equal(err.offset, 4);
    b.len = 0;
    gguf_header(&b, 0x03000000, 0);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "big-endian");
    b.len = 0;
    gguf_header(&b, 3, (uint64_t)1 << 60);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "metadata count");
    assert_int_equal(err.offset, 16);

    /* An array claiming 2^60 strings. */
    b.len = 0;
    gguf_header(&b, 3, 1);
    put_str(&b, "tokenizer.ggml.tokens");
    put_u32(&b, 9);
    put_u32(&b, 8);
    put_u64(&b, (uint64_t)1 << 60);
    put_str(&b, "a");
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "count of 1152921504606846976");

    /* A string claiming 2^62 bytes. */
    b.len = 0;
    gguf_header(&b, 3, 1);
    put_str(&b, "general.name");
    put_u32(&b, 8);
    put_u64(&b, (uint64_t)1 << 62);
    put(&b, "abc", 3);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "length of 4611686018427387904");

    /* Arrays of arrays nested too deep, a bad type, a cut value. */
    b.len = 0;
    gguf_header(&b, 3, 1);
    put_str(&b, "x");
    put_u32(&b, 9);
    for (int i = 0; i < 6; i++) {
        put_u32(&b, 9);
        put_u64(&b, 1);
    }
    put_u32(&b, 0);
    put_u64(&b, 1);
    put(&b, "z", 1);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "nested");
    b.len = 0;
    gguf_header(&b, 3, 1);
    put_str(&b, "x");
    put_u32(&b, 13);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "from 0 to 12");
    b.len = 0;
    gguf_header(&b, 3, 1);
    put_str(&b, "x");
    put_u32(&b, 10);
    put_u32(&b, 1);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "expected 8 bytes");

    /* No tokenizer, and a wrong value type. */
    b.len = 0;
    gguf_header(&b, 3, 1);
    kv_str(&b, "general.name", "x");
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "tokenizer.ggml.model");
    b.len = 0;
    gguf_header(&b, 3, 1);
    put_str(&b, "tokenizer.ggml.model");
    put_u32(&b, 4);
    put_u32(&b, 7);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "expected a string");
    assert_null(t);
    free(b.p);
}

static void test_gguf_t5_vocabulary_is_unigram_with_eos(void **state)
{
    (void)state;
    static const char *const toks[] = {"<pad>", "</s>", "<unk>", "\xe2\x96\x81", "a"};
    static const float scores[] = {0, 0, 0, -1.5f, -2.5f};
    static const int32_t types[] = {3, 3, 2, 1, 1};
    bytes b = {0};
    gguf_header(&b, 3, 4);
    kv_str(&b, "tokenizer.ggml.model", "t5");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 5);
    put_str(&b, "tokenizer.ggml.scores");
    put_u32(&b, 9);
    put_u32(&b, 6);
    put_u64(&b, 5);
    put(&b, scores, sizeof scores); /* little-endian host */
    put_str(&b, "tokenizer.ggml.token_type");
    put_u32(&b, 9);
    put_u32(&b, 5);
    put_u64(&b, 5);
    put(&b, types, sizeof types);
    lipi_tokenizer *t = NULL;
    lipi_error err;
    if (lipi_tokenizer_from_gguf(b.p, b.len, "t5.gguf", NULL, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_UNIGRAM);
    assert_int_equal(lipi_tokenizer_get_model_options(t)->unk_id, 2);
    assert_true(lipi_tokenizer_get_score(t, 4) == -2.5);
    json_t *j = as_json(t);
    char *post = json_dumps(json_object_get(j, "post_processor"), JSON_COMPACT);
    assert_non_null(strstr(post, "\"single\":[{\"Sequence\""));
    assert_non_null(strstr(post, "</s>"));
    free(post);
    json_decref(j);
    lipi_tokenizer_free(t);

    /* Scores must have one entry per token. */
    b.len = 0;
    gguf_header(&b, 3, 3);
    kv_str(&b, "tokenizer.ggml.model", "t5");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 5);
    put_str(&b, "tokenizer.ggml.scores");
    put_u32(&b, 9);
    put_u32(&b, 6);
    put_u64(&b, 4);
    put(&b, scores, 4 * sizeof *scores);
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "t5.gguf", NULL, &t, &err), &err,
                        "one per token");
    free(b.p);
}

static void test_gguf_unknown_pre_needs_a_pattern(void **state)
{
    (void)state;
    lipi_tokenizer *t = NULL;
    lipi_error err;
    bytes b = small_gguf("brand-new-pre");
    expect_format_error(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), &err,
                        "brand-new-pre");
    lipi_open_options opt = {.pattern = "\\S+"};
    assert_int_equal(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", &opt, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_merge_count(t), 1);
    lipi_tokenizer_free(t);
    free(b.p);
    /* Known types map to their tokenizer.json pre-tokenizer. */
    b = small_gguf("qwen2");
    assert_int_equal(lipi_tokenizer_from_gguf(b.p, b.len, "m.gguf", NULL, &t, &err), LIPI_OK);
    json_t *j = as_json(t);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "normalizer"),
                                                          "type")),
                        "NFC");
    json_decref(j);
    lipi_tokenizer_free(t);
    free(b.p);
}

/* ======================================================================== */
/* vocab.txt and detection                                                   */
/* ======================================================================== */

static bool lowercases(const lipi_tokenizer *t)
{
    json_t *j = as_json(t);
    bool v = json_is_true(json_object_get(json_object_get(j, "normalizer"), "lowercase"));
    json_decref(j);
    return v;
}

static void test_vocab_txt_lowercase_follows_config_name_and_option(void **state)
{
    (void)state;
    static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##ing\r\n";
    lipi_tokenizer *t = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_from_vocab_txt(vocab, strlen(vocab), "bert-base-uncased/vocab.txt",
                                                   NULL, 0, LIPI_FLAG_AUTO, LIPI_FLAG_AUTO, &t, &err),
                     LIPI_OK);
    assert_true(lowercases(t));
    assert_int_equal(id_of(t, "##ing"), 6); /* CRLF line: the "\r" is not part of it */
    assert_int_equal(lipi_tokenizer_added_count(t), 5);
    lipi_tokenizer_free(t);
    assert_int_equal(lipi_tokenizer_from_vocab_txt(vocab, strlen(vocab), "cased/vocab.txt", NULL,
                                                   0, LIPI_FLAG_AUTO, LIPI_FLAG_AUTO, &t, &err),
                     LIPI_OK);
    assert_false(lowercases(t));
    lipi_tokenizer_free(t);
    static const char cfg[] = "{\"do_lower_case\": false, \"strip_accents\": true}";
    assert_int_equal(lipi_tokenizer_from_vocab_txt(vocab, strlen(vocab), "uncased/vocab.txt", cfg,
                                                   strlen(cfg), LIPI_FLAG_AUTO, LIPI_FLAG_AUTO, &t,
                                                   &err),
                     LIPI_OK);
    assert_false(lowercases(t));
    lipi_tokenizer_free(t);
    assert_int_equal(lipi_tokenizer_from_vocab_txt(vocab, strlen(vocab), "uncased/vocab.txt", cfg,
                                                   strlen(cfg), LIPI_FLAG_ON, LIPI_FLAG_AUTO, &t,
                                                   &err),
                     LIPI_OK);
    assert_true(lowercases(t));
    lipi_tokenizer_free(t);

    /* Bad UTF-8 names its line; a token listed twice keeps its last id. */
    static const char bad[] = "[UNK]\nok\n\xff\n";
    expect_format_error(lipi_tokenizer_from_vocab_txt(bad, strlen(bad), "v.txt", NULL, 0,
                                                      LIPI_FLAG_AUTO, LIPI_FLAG_AUTO, &t, &err),
                        &err, "UTF-8");
    assert_int_equal(err.line, 3);
    static const char dup[] = "[UNK]\nx\ny\nx\n";
    assert_int_equal(lipi_tokenizer_from_vocab_txt(dup, strlen(dup), "v.txt", NULL, 0,
                                                   LIPI_FLAG_AUTO, LIPI_FLAG_AUTO, &t, &err),
                     LIPI_OK);
    assert_int_equal(id_of(t, "x"), 3);
    assert_null(lipi_tokenizer_id_to_token(t, 1, NULL));
    /* [CLS] and friends missing from the vocabulary get ids after it. */
    assert_true(id_of(t, "[CLS]") >= 4);
    lipi_tokenizer_free(t);
}

static void test_open_detects_folders_and_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/lipi-readers-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    lipi_tokenizer *t = NULL;
    lipi_error err;

    /* An empty folder names what it looked for. */
    assert_int_equal(lipi_tokenizer_open(dir, NULL, &t, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "vocab.txt"));

    /* A folder with only a SentencePiece model. */
    bytes m = spm_model(small_unigram, 8, 1, true);
    snprintf(path, sizeof path, "%s/spiece.model", dir);
    spit(path, m.p, m.len);
    assert_int_equal(lipi_tokenizer_open(dir, NULL, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_UNIGRAM);
    lipi_tokenizer_free(t);
    /* The same bytes under a name that says nothing: content decides. */
    snprintf(path, sizeof path, "%s/model.bin", dir);
    spit(path, m.p, m.len);
    assert_int_equal(lipi_tokenizer_open(path, NULL, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_UNIGRAM);
    lipi_tokenizer_free(t);
    unlink(path);
    free(m.p);

    /* vocab.txt wins over the .model, with its tokenizer_config.json. */
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    spit(path, "[UNK]\n[CLS]\n[SEP]\nhi\n", 20);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    spit(path, "{\"do_lower_case\": true}", 23);
    assert_int_equal(lipi_tokenizer_open(dir, NULL, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_model_type(t), LIPI_MODEL_WORDPIECE);
    assert_true(lowercases(t));
    lipi_tokenizer_free(t);
    unlink(path);

    /* vocab.json alone is not enough: merges.txt must sit beside it. */
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    spit(path, "{\"a\": 0, \"b\": 1, \"ab\": 2}", 25);
    assert_int_equal(lipi_tokenizer_open(path, NULL, &t, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "merges.txt"));
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    spit(path, "#version: 0.2\na b\n", 18);
    assert_int_equal(lipi_tokenizer_open(path, NULL, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_merge_count(t), 1);
    lipi_tokenizer_free(t);

    /* A GGUF file by its magic, whatever its name. */
    bytes g = small_gguf("gpt-2");
    snprintf(path, sizeof path, "%s/weights.bin", dir);
    spit(path, g.p, g.len);
    assert_int_equal(lipi_tokenizer_open(path, NULL, &t, &err), LIPI_OK);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 4);
    lipi_tokenizer_free(t);
    free(g.p);

    static const char *const files[] = {"spiece.model", "vocab.txt", "vocab.json", "merges.txt",
                                        "weights.bin"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(lipi_tokenizer_open("/nonexistent/lipi/tokenizer.json", NULL, &t, &err),
                     LIPI_EIO);
}

static void test_read_tokenizers_save_and_reload_unchanged(void **state)
{
    (void)state;
    bytes m = spm_model(small_bpe, sizeof small_bpe / sizeof small_bpe[0], 2, true);
    lipi_tokenizer *t = NULL, *back = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_from_spm(m.p, m.len, "b.model", &t, &err), LIPI_OK);
    char *s = NULL;
    size_t n = 0;
    assert_int_equal(lipi_tokenizer_to_json(t, &s, &n, &err), LIPI_OK);
    if (lipi_tokenizer_load_json(s, n, "saved", &back, &err) != LIPI_OK)
        fail_msg("reloading the saved tokenizer.json: %s", err.msg);
    json_t *a = as_json(t), *b = as_json(back);
    assert_true(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    lipi_free(s);
    lipi_tokenizer_free(t);
    lipi_tokenizer_free(back);
    free(m.p);
}

/* ======================================================================== */
/* Exactness against the tools themselves (when the encoder is built)        */
/* ======================================================================== */

#if __has_include("encoder/encoder.h")
#include "encoder/encoder.h"
#define HAVE_ENCODER 1

#define VECTOR_SEP "\n__ggml_vocab_test__\n"

/* The texts of an input file: its lines, or for llama.cpp's .inp files the
 * cases between separators. */
typedef struct {
    char *path;
    char *data;
    size_t n;
    char **s;
    size_t *len;
} text_file;

static text_file *texts_load(text_file *files, size_t *n_files, const char *rel)
{
    for (size_t i = 0; i < *n_files; i++)
        if (strcmp(files[i].path, rel) == 0)
            return &files[i];
    text_file *f = &files[(*n_files)++];
    char path[512];
    size_t len;
    /* Paths in the fixtures are relative to ../shared/data (the committed
     * copies), except the fixtures' own inputs under tests/. */
    if (strncmp(rel, "tests/", 6) == 0)
        snprintf(path, sizeof path, "%s", rel);
    else
        snprintf(path, sizeof path, "%s", ref_need(rel));
    f->path = strdup(rel);
    f->data = slurp(path, &len);
    bool inp = strstr(rel, ".inp") != NULL;
    const char *sep = inp ? VECTOR_SEP : "\n";
    size_t sep_len = strlen(sep), cap = 16;
    f->s = malloc(cap * sizeof *f->s);
    f->len = malloc(cap * sizeof *f->len);
    for (char *p = f->data, *end = f->data + len; p <= end;) {
        char *q = memmem(p, (size_t)(end - p), sep, sep_len);
        if (!q && inp)
            break; /* the .inp file ends with the separator */
        if (f->n == cap) {
            cap *= 2;
            f->s = realloc(f->s, cap * sizeof *f->s);
            f->len = realloc(f->len, cap * sizeof *f->len);
        }
        f->s[f->n] = p;
        f->len[f->n++] = (size_t)((q ? q : end) - p);
        if (!q)
            break;
        p = q + sep_len;
    }
    return f;
}

static void texts_free(text_file *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        lipi_free(files[i].data);
        free(files[i].s);
        free(files[i].len);
    }
}

static void print_ids(const char *label, const uint32_t *ids, size_t n)
{
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %u", ids[i]);
    fprintf(stderr, "\n");
}

/* Encodes text (no special tokens added) and compares with want[0..n_want);
 * prints both sequences and fails on the first difference. */
static void expect_ids(lipi_session *s, const char *what, const char *text, size_t len,
                       const uint32_t *want, size_t n_want)
{
    static uint32_t ids[65536];
    lipi_encode_options opt = {.add_special_tokens = false};
    lipi_encoding out = {.ids = ids, .cap = sizeof ids / sizeof ids[0]};
    lipi_error err;
    if (lipi_encode(s, text, len, &opt, &out, &err) != LIPI_OK)
        fail_msg("%s: encode failed: %s", what, err.msg);
    if (out.len == n_want && memcmp(ids, want, n_want * sizeof *want) == 0)
        return;
    fprintf(stderr, "first mismatch: %s: \"%.*s\"\n", what, (int)(len > 300 ? 300 : len), text);
    print_ids("expected", want, n_want);
    print_ids("lipi    ", ids, out.len);
    fail_msg("%s: ids differ from the reference", what);
}

/* Parses "12 34 5" (any spacing) into ids; returns the count. */
static size_t parse_ids(const char *s, size_t len, uint32_t *ids, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (i >= len)
            break;
        uint32_t v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            v = v * 10 + (uint32_t)(s[i++] - '0');
        assert_true(n < cap);
        ids[n++] = v;
    }
    return n;
}

/* Checks every line of a fixture "<file>\t<n>\t<ids>" (header lines start
 * with '#'); `open_name` is the tokenizer to open, or NULL to take it from
 * the "# model" header. Returns false when the fixture cannot be used. */
static bool check_fixture(const char *fixture, const char *open_name, const lipi_open_options *oo)
{
    static uint32_t want[65536];
    lipi_line_reader *r = NULL;
    lipi_error err;
    lipi_tokenizer *t = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    static text_file files[96]; /* FLORES, NTREX and the fixtures' own inputs */
    size_t n_files = 0, checked = 0;
    memset(files, 0, sizeof files);
    const char *line;
    size_t len;

    if (!have(fixture))
        return false;
    assert_int_equal(lipi_line_reader_open(fixture, LIPI_INVALID_ERROR, &r, &err), LIPI_OK);
    while (lipi_line_reader_next(r, &line, &len, &err) == LIPI_OK && line) {
        if (len > 8 && memcmp(line, "# model ", 8) == 0 && !open_name) {
            char header[512];
            snprintf(header, sizeof header, "%.*s", (int)(len - 8), line + 8);
            /* A model under ../shared/data is its committed copy. */
            const char *path = header;
            if (strncmp(header, REF_SHARED "/", strlen(REF_SHARED "/")) == 0)
                path = ref_need(header + strlen(REF_SHARED "/"));
            if (lipi_tokenizer_open(path, oo, &t, &err) != LIPI_OK)
                fail_msg("%s: %s", path, err.msg);
        }
        if (line[0] == '#')
            continue;
        if (!t && lipi_tokenizer_open(open_name, oo, &t, &err) != LIPI_OK)
            fail_msg("%s: %s", open_name, err.msg);
        if (!enc) {
            assert_int_equal(lipi_encoder_new(t, &enc, &err), LIPI_OK);
            assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        }
        const char *tab1 = memchr(line, '\t', len);
        assert_non_null(tab1);
        const char *tab2 = memchr(tab1 + 1, '\t', len - (size_t)(tab1 + 1 - line));
        assert_non_null(tab2);
        char rel[256];
        snprintf(rel, sizeof rel, "%.*s", (int)(tab1 - line), line);
        size_t no = (size_t)strtoul(tab1 + 1, NULL, 10);
        assert_true(n_files < sizeof files / sizeof *files);
        text_file *f = texts_load(files, &n_files, rel);
        assert_true(no >= 1 && no <= f->n);
        size_t n_want = parse_ids(tab2 + 1, len - (size_t)(tab2 + 1 - line), want,
                                  sizeof want / sizeof want[0]);
        char what[320];
        snprintf(what, sizeof what, "%s, %s line %zu", fixture, rel, no);
        expect_ids(s, what, f->s[no - 1], f->len[no - 1], want, n_want);
        checked++;
    }
    assert_true(checked > 0);
    lipi_line_reader_close(r);
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(t);
    texts_free(files, n_files);
    return true;
}

static void test_spm_ids_equal_sentencepiece(void **state)
{
    (void)state;
    static const char *const fixtures[] = {
        "tests/fixtures/readers/spm_test_model.tsv.xz",
        "tests/fixtures/readers/spm_test_ja_model.tsv.xz",
        "tests/fixtures/readers/spm_laser_100k.tsv.xz",
        "tests/fixtures/readers/spm_bpe_bytes.tsv.xz",    /* BPE, byte fallback */
        "tests/fixtures/readers/spm_unigram_user.tsv.xz", /* user-defined pieces */
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        assert_true(check_fixture(fixtures[i], NULL, NULL));
}

static void test_tiktoken_ids_equal_tiktoken(void **state)
{
    (void)state;
    lipi_open_options opt = {.data_dir = TIKTOKEN_DIR};
    assert_true(check_fixture("tests/fixtures/readers/tiktoken_cl100k_base.tsv.xz", "cl100k_base",
                              &opt));
    assert_true(check_fixture("tests/fixtures/readers/tiktoken_o200k_base.tsv.xz", "o200k_base",
                              &opt));
}

/* The bundled fair tokenizer (data/vocab/lipi-indic-64k, docs/FAIRNESS.md):
 * found by name, 64,000 tokens, decode(encode(x)) gives x back in every
 * script it was measured on, and the ids are Hugging Face tokenizers' on
 * 20 FLORES-200 devtest lines of English and of each Indic language. */
static void test_bundled_lipi_indic_64k_round_trips_and_matches_hugging_face(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "Fair tokenizers cost every language about the same.",
        "भारत की राजधानी नई दिल्ली है।",
        "আমি বাংলায় গান গাই।",
        "தமிழ் ஒரு செம்மொழி.",
        "తెలుగు, ગુજરાતી, ಕನ್ನಡ, മലയാളം, ਪੰਜਾਬੀ, ଓଡ଼ିଆ, اردو, ᱥᱟᱱᱛᱟᱲᱤ, සිංහල 2026",
    };
    lipi_open_options opt = {.data_dir = "data"};
    lipi_tokenizer *t = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    if (lipi_tokenizer_open("lipi-indic-64k", &opt, &t, &err) != LIPI_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(lipi_tokenizer_vocab_size(t), 64000);
    assert_int_equal(lipi_encoder_new(t, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        uint32_t ids[512];
        char back[1024];
        size_t len = 0;
        lipi_encode_options eo = {.add_special_tokens = false};
        lipi_encoding out = {.ids = ids, .cap = 512};
        assert_int_equal(lipi_encode(s, texts[i], strlen(texts[i]), &eo, &out, &err), LIPI_OK);
        assert_true(out.len > 0 && out.len < strlen(texts[i]));
        assert_int_equal(lipi_decode(s, ids, out.len, false, back, sizeof back, &len, &err), LIPI_OK);
        assert_string_equal(back, texts[i]);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(t);
    assert_true(check_fixture("tests/fixtures/lipi-indic-64k/hf_ids.tsv.xz", "lipi-indic-64k", &opt));
}

/* p50k_base and r50k_base, bundled in the repository; the texts are the
 * FLORES lines and llama.cpp vectors the cl100k fixture reads (committed). */
static void test_p50k_and_r50k_ids_equal_tiktoken(void **state)
{
    (void)state;
    lipi_open_options opt = {.data_dir = BUNDLED_TIKTOKEN};
    assert_true(check_fixture("tests/fixtures/readers/tiktoken_p50k_base.tsv.xz", "p50k_base",
                              &opt));
    assert_true(check_fixture("tests/fixtures/readers/tiktoken_r50k_base.tsv.xz", "r50k_base",
                              &opt));
}

/* The encoder's Hugging Face corpus fixtures (tokenizers' ids for every
 * 16th FLORES / NTREX line, "<file>:<line>\t<ids>"), read here through the
 * vocab.txt and vocab.json + merges.txt readers instead of tokenizer.json. */
static void test_vocab_files_ids_equal_hugging_face(void **state)
{
    (void)state;
    static const struct {
        const char *fixture, *vocab, *merges;
    } cases[] = {
        {"corpus_bert-base-uncased", "vocab/bert-base-uncased/vocab.txt", NULL},
        {"corpus_bert-base-cased", "vocab/bert-base-cased/vocab.txt", NULL},
        {"corpus_bert-base-multilingual-cased", "vocab/bert-base-multilingual-cased/vocab.txt",
         NULL},
        {"corpus_bert-base-chinese", "vocab/bert-base-chinese/vocab.txt", NULL},
        {"corpus_gpt2", "vocab/gpt2/encoder.json", "vocab/gpt2/vocab.bpe"},
    };
    static uint32_t want[65536];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char fixture[256], vocab[256];
        snprintf(fixture, sizeof fixture, "tests/fixtures/encoder/%s.ids.xz", cases[c].fixture);
        snprintf(vocab, sizeof vocab, "%s", ref_need(cases[c].vocab));
        lipi_tokenizer *t = NULL;
        lipi_encoder *enc = NULL;
        lipi_session *s = NULL;
        lipi_error err;
        if (cases[c].merges) {
            char merges[256];
            size_t vn, mn;
            snprintf(merges, sizeof merges, "%s", ref_need(cases[c].merges));
            char *v = slurp(vocab, &vn), *m = slurp(merges, &mn);
            assert_int_equal(lipi_tokenizer_from_gpt2(v, vn, m, mn, vocab, NULL, 0, &t, &err),
                             LIPI_OK);
            lipi_free(v);
            lipi_free(m);
        } else if (lipi_tokenizer_open(vocab, NULL, &t, &err) != LIPI_OK) {
            fail_msg("%s: %s", vocab, err.msg);
        }
        assert_int_equal(lipi_encoder_new(t, &enc, &err), LIPI_OK);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        text_file files[96] = {{0}};
        size_t n_files = 0, checked = 0;
        lipi_line_reader *r = NULL;
        const char *line;
        size_t len;
        assert_int_equal(lipi_line_reader_open(fixture, LIPI_INVALID_ERROR, &r, &err), LIPI_OK);
        while (lipi_line_reader_next(r, &line, &len, &err) == LIPI_OK && line) {
            const char *tab = memchr(line, '\t', len);
            if (line[0] == '#' || !tab)
                continue;
            const char *colon = tab;
            while (colon > line && *colon != ':')
                colon--;
            char rel[256];
            snprintf(rel, sizeof rel, "%.*s", (int)(colon - line), line);
            size_t no = (size_t)strtoul(colon + 1, NULL, 10);
            assert_true(n_files < sizeof files / sizeof files[0]);
            text_file *f = texts_load(files, &n_files, rel);
            assert_true(no >= 1 && no <= f->n);
            size_t n_want = parse_ids(tab + 1, len - (size_t)(tab + 1 - line), want,
                                      sizeof want / sizeof want[0]);
            /* The fixture's lines lost a "\r" before "\n", as lipi's line reader does. */
            size_t tl = f->len[no - 1];
            if (tl && f->s[no - 1][tl - 1] == '\r')
                tl--;
            char what[600];
            snprintf(what, sizeof what, "%s, %s line %zu", fixture, rel, no);
            expect_ids(s, what, f->s[no - 1], tl, want, n_want);
            checked++;
        }
        assert_true(checked > 0);
        lipi_line_reader_close(r);
        texts_free(files, n_files);
        lipi_session_free(s);
        lipi_encoder_free(enc);
        lipi_tokenizer_free(t);
    }
}

/* llama.cpp's vectors: every .inp case against its .out line (ids that
 * Hugging Face tokenizers gave), through the models' GGUF files. */
static void test_gguf_ids_equal_llama_cpp_vectors(void **state)
{
    (void)state;
    static const char *const models[] = {"bert-bge", "gpt-2", "llama-spm", "phi-3", "falcon"};
    static uint32_t want[4096];
    if (!have_ggufs())
        SKIP_BECAUSE("%s", GGUF_MISSING);
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        char gguf[256], out_rel[128], inp[128];
        snprintf(gguf, sizeof gguf, GGUF_DIR "/ggml-vocab-%s.gguf", models[m]);
        snprintf(out_rel, sizeof out_rel, "vectors/llama.cpp/ggml-vocab-%s.gguf.out", models[m]);
        snprintf(inp, sizeof inp, "vectors/llama.cpp/ggml-vocab-%s.gguf.inp", models[m]);
        lipi_tokenizer *t = NULL;
        lipi_encoder *enc = NULL;
        lipi_session *s = NULL;
        lipi_error err;
        if (lipi_tokenizer_open(gguf, NULL, &t, &err) != LIPI_OK)
            fail_msg("%s: %s", gguf, err.msg);
        assert_int_equal(lipi_encoder_new(t, &enc, &err), LIPI_OK);
        assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
        text_file files[1] = {{0}};
        size_t n_files = 0, len;
        text_file *f = texts_load(files, &n_files, inp);
        char *outs = slurp(ref_need(out_rel), &len);
        char *p = outs;
        for (size_t i = 0; i < f->n; i++) {
            char *nl = memchr(p, '\n', (size_t)(outs + len - p));
            assert_non_null(nl);
            size_t n_want = parse_ids(p, (size_t)(nl - p), want, sizeof want / sizeof want[0]);
            char what[300];
            snprintf(what, sizeof what, "%s case %zu", gguf, i + 1);
            expect_ids(s, what, f->s[i], f->len[i], want, n_want);
            p = nl + 1;
        }
        lipi_free(outs);
        texts_free(files, n_files);
        lipi_session_free(s);
        lipi_encoder_free(enc);
        lipi_tokenizer_free(t);
    }
}
#endif

/* ======================================================================== */
/* Allocation failures                                                       */
/* ======================================================================== */

typedef lipi_status (*read_fn)(const void *data, size_t len, lipi_tokenizer **out,
                               lipi_error *err);

static lipi_status read_spm(const void *d, size_t n, lipi_tokenizer **out, lipi_error *err)
{
    return lipi_tokenizer_from_spm(d, n, "a.model", out, err);
}

static lipi_status read_tiktoken(const void *d, size_t n, lipi_tokenizer **out, lipi_error *err)
{
    static const lipi_special_token sp[] = {{"<|end|>", 20}};
    return lipi_tokenizer_from_tiktoken(d, n, "a.tiktoken", "\\S+|\\s+", sp, 1, 0, out,
                                        err);
}

static lipi_status read_gguf(const void *d, size_t n, lipi_tokenizer **out, lipi_error *err)
{
    return lipi_tokenizer_from_gguf(d, n, "a.gguf", NULL, out, err);
}

static lipi_status read_vocab(const void *d, size_t n, lipi_tokenizer **out, lipi_error *err)
{
    return lipi_tokenizer_from_vocab_txt(d, n, "uncased", "{}", 2, LIPI_FLAG_AUTO,
                                         LIPI_FLAG_AUTO, out, err);
}

typedef struct {
    read_fn fn;
    const void *data;
    size_t len;
} read_job;

static lipi_status read_run(void *ctx, lipi_error *err)
{
    const read_job *j = ctx;
    lipi_tokenizer *t = NULL;
    lipi_status st = j->fn(j->data, j->len, &t, err);
    lipi_tokenizer_free(t);
    return st;
}

/* Reads with the Nth allocation failing, N = 0, 1, ... until nothing
 * fails: every failure must be LIPI_ENOMEM and leak nothing. */
static void alloc_failure_loop(read_fn fn, const void *data, size_t len)
{
    read_job j = {fn, data, len};
    assert_true(alloc_fail_loop("reader", read_run, &j) > 5);
}

static void test_readers_fail_cleanly_when_allocations_fail(void **state)
{
    (void)state;
    bytes m = spm_model(small_unigram, sizeof small_unigram / sizeof small_unigram[0], 1, true);
    alloc_failure_loop(read_spm, m.p, m.len);
    free(m.p);
    m = spm_model(small_bpe, sizeof small_bpe / sizeof small_bpe[0], 2, true);
    alloc_failure_loop(read_spm, m.p, m.len);
    free(m.p);
    static const char ranks[] = "YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYmM= 4\nYWJj 5\nIA== 6\n";
    alloc_failure_loop(read_tiktoken, ranks, strlen(ranks));
    bytes g = small_gguf("llama3");
    alloc_failure_loop(read_gguf, g.p, g.len);
    free(g.p);
    static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##ing\n";
    alloc_failure_loop(read_vocab, vocab, strlen(vocab));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_files_build_the_model_of_gpt2_tokenizer_json),
        cmocka_unit_test(test_gpt2_merges_must_name_tokens),
        cmocka_unit_test(test_sha256_gives_the_fips_180_digests_in_any_chunks),
        cmocka_unit_test(test_cl100k_and_o200k_load_by_name_with_their_specials),
        cmocka_unit_test(test_bare_names_and_missing_patterns_are_clear_errors),
        cmocka_unit_test(test_tiktoken_merges_come_from_rank_bpe),
        cmocka_unit_test(test_p50k_and_r50k_have_tiktoken_vocabulary_sizes),
        cmocka_unit_test(test_published_rank_files_that_differ_are_refused_with_both_checksums),
        cmocka_unit_test(test_rank_gaps_are_refused_unless_a_special_token_or_the_meta_file_fills_them),
        cmocka_unit_test(test_tiktoken_rejects_bad_lines_with_their_position),
        cmocka_unit_test(test_spm_models_load_pieces_specials_and_normalizer),
        cmocka_unit_test(test_spm_unigram_parts_follow_sentencepiece),
        cmocka_unit_test(test_spm_bpe_merges_rank_splits_by_score),
        cmocka_unit_test(test_spm_truncated_files_fail_with_offsets),
        cmocka_unit_test(test_spm_hostile_varints_lengths_and_types),
        cmocka_unit_test(test_gguf_vocab_files_load_with_their_model_types),
        cmocka_unit_test(test_gguf_hostile_headers_fail_without_large_allocations),
        cmocka_unit_test(test_gguf_t5_vocabulary_is_unigram_with_eos),
        cmocka_unit_test(test_gguf_unknown_pre_needs_a_pattern),
        cmocka_unit_test(test_vocab_txt_lowercase_follows_config_name_and_option),
        cmocka_unit_test(test_open_detects_folders_and_files),
        cmocka_unit_test(test_read_tokenizers_save_and_reload_unchanged),
        cmocka_unit_test(test_readers_fail_cleanly_when_allocations_fail),
#ifdef HAVE_ENCODER
        cmocka_unit_test(test_spm_ids_equal_sentencepiece),
        cmocka_unit_test(test_tiktoken_ids_equal_tiktoken),
        cmocka_unit_test(test_p50k_and_r50k_ids_equal_tiktoken),
        cmocka_unit_test(test_bundled_lipi_indic_64k_round_trips_and_matches_hugging_face),
        cmocka_unit_test(test_gguf_ids_equal_llama_cpp_vectors),
        cmocka_unit_test(test_vocab_files_ids_equal_hugging_face),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

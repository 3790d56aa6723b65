/* Encoder: exact ids, tokens and offsets of Hugging Face tokenizers
 * (fixtures made by tests/fixtures/encoder/make_fixtures.js), llama.cpp's
 * reference vectors, round trips, batches on 1 and 2 threads, the trie, the
 * lattice, added-token rules, errors, allocation failures and the CLI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "encoder/encoder.h"
#include "tests/alloc_fail.h"
#include "encoder/encoder_impl.h"
#include "encoder/trie_impl.h"
#include "tests/cli_run.h"
#include "tests/refdata.h"

#define FIXTURES "tests/fixtures/encoder/"
#define MAXTOK 8192

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static lipi_tokenizer *load(const char *path)
{
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    if (lipi_tokenizer_load(path, &t, &err) != LIPI_OK)
        fail_msg("loading %s: %s: %s", path, err.path, err.msg);
    return t;
}

static lipi_tokenizer *load_text(const char *json)
{
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    if (lipi_tokenizer_load_json(json, strlen(json), "test", &t, &err) != LIPI_OK)
        fail_msg("loading test JSON: %s", err.msg);
    return t;
}

typedef struct {
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_session *s;
} kit;

static kit kit_from(lipi_tokenizer *tok)
{
    kit k = {tok, NULL, NULL};
    lipi_error err = {0};
    if (lipi_encoder_new(tok, &k.enc, &err) != LIPI_OK)
        fail_msg("lipi_encoder_new: %s", err.msg);
    assert_int_equal(lipi_session_new(k.enc, &k.s), LIPI_OK);
    return k;
}

static void kit_free(kit *k)
{
    lipi_session_free(k->s);
    lipi_encoder_free(k->enc);
    lipi_tokenizer_free(k->tok);
}

/* Output arrays of one encoding. */
typedef struct {
    uint32_t ids[MAXTOK], type_ids[MAXTOK];
    lipi_span off[MAXTOK];
    uint8_t special[MAXTOK], seq[MAXTOK];
    const char *tokens[MAXTOK];
    size_t lens[MAXTOK];
    lipi_encoding e;
} result;

static result *result_new(void)
{
    result *r = calloc(1, sizeof *r);
    r->e = (lipi_encoding){r->ids, r->off, r->type_ids, r->special, r->seq, r->tokens, r->lens,
                           MAXTOK, 0};
    return r;
}

static lipi_status encode_opt(kit *k, const char *a, size_t alen, const char *b, size_t blen,
                              bool add, size_t max_length, result *r, lipi_error *err)
{
    lipi_encode_options o;
    lipi_encode_options_default(k->enc, &o);
    o.add_special_tokens = add;
    o.max_length = max_length;
    if (b)
        return lipi_encode_pair(k->s, a, alen, b, blen, &o, &r->e, err);
    return lipi_encode(k->s, a, alen, &o, &r->e, err);
}

/* ids of s (no special tokens) as "1 2 3". */
static char *ids_of(kit *k, const char *s)
{
    result *r = result_new();
    lipi_error err = {0};
    if (encode_opt(k, s, strlen(s), NULL, 0, false, 0, r, &err) != LIPI_OK)
        fail_msg("encode \"%s\": %s", s, err.msg);
    char *out = malloc(r->e.len * 11 + 1), *w = out;
    *w = '\0';
    for (size_t i = 0; i < r->e.len; i++)
        w += sprintf(w, "%s%u", i ? " " : "", r->ids[i]);
    free(r);
    return out;
}

/* Tokens of s as "a|b|c". */
static char *tokens_of(kit *k, const char *s, bool add)
{
    result *r = result_new();
    lipi_error err = {0};
    if (encode_opt(k, s, strlen(s), NULL, 0, add, 0, r, &err) != LIPI_OK)
        fail_msg("encode \"%s\": %s", s, err.msg);
    size_t n = 1;
    for (size_t i = 0; i < r->e.len; i++)
        n += r->lens[i] + 1;
    char *out = malloc(n), *w = out;
    for (size_t i = 0; i < r->e.len; i++) {
        if (i)
            *w++ = '|';
        memcpy(w, r->tokens[i], r->lens[i]);
        w += r->lens[i];
    }
    *w = '\0';
    free(r);
    return out;
}

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void print_ids(const char *label, const uint32_t *ids, size_t n)
{
    printf("    %s [", label);
    for (size_t i = 0; i < n; i++)
        printf("%s%u", i ? " " : "", ids[i]);
    printf("]\n");
}

/* Hugging Face's BytesToCharOffsetConverter: byte offsets of text to
 * character offsets (start: the character of the start byte; end: the
 * character of the end byte, or one past the character of the last byte). */
static void char_offsets(const char *text, size_t len, lipi_span in, long *cs, long *ce)
{
    size_t *map = malloc((len + 1) * sizeof *map);
    size_t ci = 0;
    for (size_t i = 0; i < len; i++) {
        if (i > 0 && ((unsigned char)text[i] & 0xC0) != 0x80)
            ci++;
        map[i] = ci;
    }
    if (in.start >= len) {
        *cs = (long)in.start;
        *ce = (long)in.end;
    } else if (in.end < len) {
        *cs = (long)map[in.start];
        *ce = (long)map[in.end];
    } else {
        *cs = (long)map[in.start];
        *ce = in.end >= 1 && in.end - 1 < len ? (long)map[in.end - 1] + 1 : *cs + 1;
    }
    free(map);
}

/* ------------------------------------------------------------------------ */
/* Hugging Face fixtures                                                     */
/* ------------------------------------------------------------------------ */

static bool same_str(const char *a, size_t alen, const json_t *b)
{
    return json_is_string(b) && json_string_length(b) == alen &&
           memcmp(json_string_value(b), a, alen) == 0;
}

/* Compares one case; returns a description of the first difference or NULL. */
static const char *compare_case(kit *k, const json_t *c, result *r, char *decoded, size_t dcap,
                                lipi_error *err, lipi_status *st)
{
    const json_t *jt = json_object_get(c, "text"), *jp = json_object_get(c, "pair");
    const char *text = json_string_value(jt), *pair = json_string_value(jp);
    size_t tlen = json_string_length(jt), plen = pair ? json_string_length(jp) : 0;
    bool add = json_is_true(json_object_get(c, "add_special_tokens"));
    size_t max = (size_t)json_integer_value(json_object_get(c, "max_length"));
    const json_t *ids = json_object_get(c, "ids"), *toks = json_object_get(c, "tokens");
    const json_t *offs = json_object_get(c, "offsets"), *types = json_object_get(c, "type_ids");
    const json_t *mask = json_object_get(c, "special_mask");

    *st = encode_opt(k, text, tlen, pair, plen, add, max, r, err);
    if (*st != LIPI_OK)
        return "lipi failed";
    size_t n = r->e.len;
    if (n != json_array_size(ids))
        return "ids";
    for (size_t i = 0; i < n; i++)
        if (r->ids[i] != (uint32_t)json_integer_value(json_array_get(ids, i)))
            return "ids";
    for (size_t i = 0; i < n; i++)
        if (!same_str(r->tokens[i], r->lens[i], json_array_get(toks, i)))
            return "tokens";
    for (size_t i = 0; i < n; i++) {
        long cs, ce;
        const json_t *o = json_array_get(offs, i);
        if (r->seq[i] == 255) {
            cs = (long)r->off[i].start;
            ce = (long)r->off[i].end;
        } else {
            const char *src = r->seq[i] ? pair : text;
            char_offsets(src, r->seq[i] ? plen : tlen, r->off[i], &cs, &ce);
        }
        if (cs != json_integer_value(json_array_get(o, 0)) ||
            ce != json_integer_value(json_array_get(o, 1)))
            return "offsets";
    }
    for (size_t i = 0; i < n; i++)
        if (r->type_ids[i] != (uint32_t)json_integer_value(json_array_get(types, i)))
            return "type_ids";
    for (size_t i = 0; i < n; i++)
        if (r->special[i] != json_integer_value(json_array_get(mask, i)))
            return "special_mask";
    for (int skip = 0; skip < 2; skip++) {
        size_t dl;
        *st = lipi_decode(k->s, r->ids, n, skip, decoded, dcap, &dl, err);
        if (*st != LIPI_OK)
            return "decode failed";
        if (!same_str(decoded, dl, json_object_get(c, skip ? "decode_skip" : "decode")))
            return skip ? "decode (skip special)" : "decode";
    }
    return NULL;
}

static void report_case(const char *name, size_t idx, const json_t *c, const result *r,
                        const char *what, const lipi_error *err, lipi_status st)
{
    const json_t *jt = json_object_get(c, "text"), *jp = json_object_get(c, "pair");
    printf("  %s case %zu: %s differs; text \"", name, idx, what);
    print_escaped(json_string_value(jt), json_string_length(jt));
    if (json_is_string(jp)) {
        printf("\" pair \"");
        print_escaped(json_string_value(jp), json_string_length(jp));
    }
    printf("\" add_special_tokens=%d max_length=%d\n",
           json_is_true(json_object_get(c, "add_special_tokens")),
           (int)json_integer_value(json_object_get(c, "max_length")));
    if (st != LIPI_OK) {
        printf("    lipi: %s (%s)\n", err->msg, lipi_status_name(st));
        return;
    }
    const json_t *ids = json_object_get(c, "ids");
    uint32_t want[MAXTOK];
    size_t nw = json_array_size(ids) < MAXTOK ? json_array_size(ids) : MAXTOK;
    for (size_t i = 0; i < nw; i++)
        want[i] = (uint32_t)json_integer_value(json_array_get(ids, i));
    print_ids("hf:  ", want, nw);
    print_ids("lipi:", r->ids, r->e.len);
    if (strcmp(what, "ids") != 0) {
        const char *key = strncmp(what, "decode", 6) != 0 ? what
                          : strstr(what, "skip")           ? "decode_skip"
                                                           : "decode";
        char *s = json_dumps(json_object_get(c, key), JSON_ENCODE_ANY);
        printf("    hf %s: %s\n", what, s);
        free(s);
        if (strcmp(what, "tokens") == 0 || strcmp(what, "offsets") == 0) {
            printf("    lipi tokens:");
            for (size_t i = 0; i < r->e.len; i++)
                printf(" \"%.*s\"@%zu-%zu", (int)r->lens[i], r->tokens[i], r->off[i].start,
                       r->off[i].end);
            printf("\n");
        }
    }
}

/* Runs every case of a fixture; prints the first mismatch in full and fails
 * when any case differs. A tokenizer named under ../shared/data is the
 * committed copy (tests/refdata.h). */
static void run_fixture(const char *name)
{
    char path[256];
    json_error_t je;
    snprintf(path, sizeof path, FIXTURES "%s.expected.json", name);
    json_t *fx = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!fx)
        fail_msg("%s: %s", path, je.text);
    const char *tpath = json_string_value(json_object_get(fx, "tokenizer"));
    if (strncmp(tpath, REF_SHARED "/", strlen(REF_SHARED "/")) == 0)
        tpath = ref_need(tpath + strlen(REF_SHARED "/"));
    kit k = kit_from(load(tpath));
    const json_t *cases = json_object_get(fx, "cases");
    result *r = result_new();
    size_t dcap = 1 << 16, bad = 0;
    char *decoded = malloc(dcap);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        lipi_error err = {0};
        lipi_status st = LIPI_OK;
        const char *what = compare_case(&k, c, r, decoded, dcap, &err, &st);
        if (what) {
            if (bad == 0)
                report_case(name, i, c, r, what, &err, st);
            bad++;
        }
    }
    size_t total = json_array_size(cases);
    free(decoded);
    free(r);
    kit_free(&k);
    json_decref(fx);
    if (bad)
        fail_msg("%s: %zu of %zu cases differ from %s", name, bad, total, "Hugging Face");
}

#define HF_FIXTURE(name)                                                             \
    static void test_same_as_hugging_face_##name(void **state)                      \
    {                                                                                \
        (void)state;                                                                 \
        run_fixture(#name);                                                          \
    }

HF_FIXTURE(wordpiece)
HF_FIXTURE(unigram)
HF_FIXTURE(unigram_bf)
HF_FIXTURE(bpe_bf)
HF_FIXTURE(bpe_suffix)
HF_FIXTURE(bpe_prefix)
HF_FIXTURE(bytelevel_roberta)
HF_FIXTURE(bytelevel_seq)
HF_FIXTURE(bytelevel_generic)
HF_FIXTURE(bytelevel_noregex)
HF_FIXTURE(wordlevel)
HF_FIXTURE(gpt2)
HF_FIXTURE(tj_bpe_byte_fallback)
HF_FIXTURE(tj_bpe_bytelevel)
HF_FIXTURE(tj_unigram)
HF_FIXTURE(tj_wordpiece)
HF_FIXTURE(tj_wordlevel)
HF_FIXTURE(tj_added_holes)
/* XLM-R's pair template <s> A </s></s> B </s> (make_xlmr_pairs.js) */
HF_FIXTURE(xlmr_pairs)

/* ------------------------------------------------------------------------ */
/* llama.cpp reference vectors (made with Hugging Face tokenizers)           */
/* ------------------------------------------------------------------------ */

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    p[*len] = '\0';
    fclose(f);
    return p;
}

/* Runs BASE.inp through k and compares with BASE.out (BASE relative to
 * ../shared/data, the files committed or found there); returns
 * mismatches. */
static size_t run_vectors(kit *k, const char *base)
{
    char ip[256], op[256];
    size_t il, ol, bad = 0, cases = 0;
    snprintf(ip, sizeof ip, "%s.inp", base);
    snprintf(op, sizeof op, "%s.out", base);
    const char *ipath = ref_path(ip), *opath = ref_path(op);
    assert_non_null(ipath);
    assert_non_null(opath);
    char *inp = read_all(ipath, &il), *out = read_all(opath, &ol);
    assert_non_null(inp);
    assert_non_null(out);
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *o = out;
    result *r = result_new();
    for (;;) {
        char *end = strstr(p, SEP);
        if (!end)
            break;
        char *oe = strchr(o, '\n');
        assert_non_null(oe);
        *oe = '\0';
        lipi_error err = {0};
        lipi_status st = encode_opt(k, p, (size_t)(end - p), NULL, 0, false, 0, r, &err);
        char got[65536], *w = got;
        *w = '\0';
        for (size_t i = 0; st == LIPI_OK && i < r->e.len && w < got + sizeof got - 16; i++)
            w += sprintf(w, " %u", r->ids[i]);
        if (st != LIPI_OK || strcmp(got, o) != 0) {
            if (bad == 0) {
                printf("  %s case %zu: \"", base, cases);
                print_escaped(p, (size_t)(end - p));
                printf("\"\n    hf:  [%s]\n    lipi:[%s] %s\n", o, got, st ? err.msg : "");
            }
            bad++;
        }
        cases++;
        p = end + sizeof SEP - 1;
        o = oe + 1;
    }
    free(r);
    free(inp);
    free(out);
    assert_true(cases > 10);
    return bad;
}

static void test_llama_cpp_vectors_gpt2(void **state)
{
    (void)state;
    kit k = kit_from(load(ref_need("vocab/gpt2/tokenizer.json")));
    size_t bad = run_vectors(&k, "vectors/llama.cpp/ggml-vocab-gpt-2.gguf");
    kit_free(&k);
    assert_int_equal(bad, 0);
}

/* bert-bge is bge-small-en, whose tokenizer is bert-base-uncased's: the
 * tokenizer.json Hugging Face makes for it, built here from vocab.txt. */
static lipi_tokenizer *bert_from_vocab(const char *vocab_path, bool lowercase)
{
    size_t len;
    char *text = read_all(vocab_path, &len);
    assert_non_null(text);
    json_t *vocab = json_object();
    size_t id = 0;
    for (char *p = text, *nl; *p; p = nl + 1, id++) {
        nl = strchr(p, '\n');
        if (!nl)
            nl = p + strlen(p);
        size_t n = (size_t)(nl - p);
        if (n && p[n - 1] == '\r')
            n--;
        json_object_setn_new(vocab, p, n, json_integer((json_int_t)id));
        if (!*nl)
            break;
    }
    free(text);
    json_t *added = json_array();
    static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (size_t i = 0; i < 5; i++) {
        json_t *v = json_object_get(vocab, specials[i]);
        if (v)
            json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id",
                                                   json_integer_value(v), "content", specials[i],
                                                   "single_word", 0, "lstrip", 0, "rstrip", 0,
                                                   "normalized", 0, "special", 1));
    }
    json_t *j = json_pack(
        "{s:s, s:n, s:n, s:o, s:{s:s, s:b, s:b, s:n, s:b}, s:{s:s}, s:{s:s, s:[s,i], s:[s,i]},"
        " s:{s:s, s:s, s:b}, s:{s:s, s:s, s:s, s:i, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
        "BertNormalizer", "clean_text", 1, "handle_chinese_chars", 1, "strip_accents",
        "lowercase", lowercase, "pre_tokenizer", "type", "BertPreTokenizer", "post_processor",
        "type", "BertProcessing", "sep", "[SEP]",
        (int)json_integer_value(json_object_get(vocab, "[SEP]")), "cls", "[CLS]",
        (int)json_integer_value(json_object_get(vocab, "[CLS]")), "decoder", "type", "WordPiece",
        "prefix", "##", "cleanup", 1, "model", "type", "WordPiece", "unk_token", "[UNK]",
        "continuing_subword_prefix", "##", "max_input_chars_per_word", 100, "vocab", vocab);
    assert_non_null(j);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    lipi_tokenizer *t = load_text(s);
    free(s);
    return t;
}

/* SentencePiece BPE with byte fallback (llama's GGUF): its chars are
 * looked up by bpe_symbols' blocks of the BMP, bytes of unknown ones after. */
static void test_llama_cpp_vectors_llama_spm(void **state)
{
    (void)state;
    const char *g = ref_shared("vectors/llama.cpp/ggml-vocab-llama-spm.gguf");
    if (!g || !ref_shared("vectors/llama.cpp/ggml-vocab-llama-spm.gguf.inp"))
        SKIP_BECAUSE("%s", ref_missing("llama.cpp's llama-spm vocabulary and vectors"));
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_open(g, NULL, &t, &err), LIPI_OK);
    kit k = kit_from(t);
    size_t bad = run_vectors(&k, "vectors/llama.cpp/ggml-vocab-llama-spm.gguf");
    kit_free(&k);
    assert_int_equal(bad, 0);
}

static void test_llama_cpp_vectors_bert_bge(void **state)
{
    (void)state;
    kit k = kit_from(bert_from_vocab(ref_need("vocab/bert-base-uncased/vocab.txt"), true));
    size_t bad = run_vectors(&k, "vectors/llama.cpp/ggml-vocab-bert-bge.gguf");
    kit_free(&k);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------------------ */
/* Real text through real tokenizers (sampled lines of FLORES and NTREX)     */
/* ------------------------------------------------------------------------ */

/* A corpus file split into lines the way lipi's line reader splits them. */
typedef struct {
    char *path;
    char *text;
    size_t *start, *len;
    size_t n;
} corpus_file;

static corpus_file *corpus_get(corpus_file *files, size_t *nfiles, const char *path)
{
    for (size_t i = 0; i < *nfiles; i++)
        if (strcmp(files[i].path, path) == 0)
            return &files[i];
    corpus_file *f = &files[(*nfiles)++];
    size_t len;
    f->path = strdup(path);
    f->text = read_all(ref_need(path), &len);
    assert_non_null(f->text);
    size_t cap = 1024, p = 0;
    f->start = malloc(cap * sizeof *f->start);
    f->len = malloc(cap * sizeof *f->len);
    f->n = 0;
    if (len >= 3 && memcmp(f->text, "\xef\xbb\xbf", 3) == 0)
        p = 3;
    while (p < len) {
        char *nl = memchr(f->text + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - f->text) : len, l = e - p;
        if (nl && l && f->text[e - 1] == '\r')
            l--;
        if (f->n == cap) {
            cap *= 2;
            f->start = realloc(f->start, cap * sizeof *f->start);
            f->len = realloc(f->len, cap * sizeof *f->len);
        }
        f->start[f->n] = p;
        f->len[f->n++] = l;
        p = e + 1;
    }
    return f;
}

static void run_corpus(const char *name, lipi_tokenizer *tok)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "corpus_%s.ids.xz", name);
    kit k = kit_from(tok);
    lipi_line_reader *r = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_line_reader_open(path, LIPI_INVALID_ERROR, &r, &err), LIPI_OK);
    corpus_file files[128];
    size_t nfiles = 0, cases = 0, bad = 0;
    result *res = result_new();
    const char *line;
    size_t len;
    while (lipi_line_reader_next(r, &line, &len, &err) == LIPI_OK && line) {
        if (len && line[0] == '#')
            continue;
        const char *tab = memchr(line, '\t', len), *colon = NULL;
        assert_non_null(tab);
        for (const char *q = line; q < tab; q++)
            if (*q == ':')
                colon = q;
        assert_non_null(colon);
        char fpath[256];
        snprintf(fpath, sizeof fpath, "%.*s", (int)(colon - line), line);
        size_t ln = strtoul(colon + 1, NULL, 10);
        corpus_file *f = corpus_get(files, &nfiles, fpath);
        assert_true(ln >= 1 && ln <= f->n);
        const char *text = f->text + f->start[ln - 1];
        size_t tl = f->len[ln - 1];
        lipi_status st = encode_opt(&k, text, tl, NULL, 0, false, 0, res, &err);
        uint32_t want[MAXTOK];
        size_t nw = 0;
        for (const char *q = tab + 1; q < line + len && nw < MAXTOK;) {
            char *e;
            want[nw++] = (uint32_t)strtoul(q, &e, 10);
            q = e;
            while (q < line + len && *q == ' ')
                q++;
        }
        if (st != LIPI_OK || res->e.len != nw ||
            memcmp(res->ids, want, nw * sizeof *want) != 0) {
            if (bad == 0) {
                printf("  %s: %s:%zu differs: \"", name, fpath, ln);
                print_escaped(text, tl);
                printf("\"\n");
                print_ids("hf:  ", want, nw);
                print_ids("lipi:", res->ids, st == LIPI_OK ? res->e.len : 0);
            }
            bad++;
        }
        cases++;
    }
    lipi_line_reader_close(r);
    for (size_t i = 0; i < nfiles; i++) {
        free(files[i].path);
        free(files[i].text);
        free(files[i].start);
        free(files[i].len);
    }
    free(res);
    kit_free(&k);
    assert_true(cases > 1000);
    if (bad)
        fail_msg("%s: %zu of %zu corpus lines differ from Hugging Face", name, bad, cases);
}

/* The wide merge table (vocabularies of millions of tokens) gives the same
 * ids as the compact one every other test uses. */
static void test_wide_merge_table_gives_the_same_ids(void **state)
{
    (void)state;
    lipi_enc_wide_pairs_for_tests = 1;
    run_fixture("bpe_bf");
    run_fixture("bpe_suffix");
    run_fixture("bytelevel_roberta");
    kit k = kit_from(load(FIXTURES "bytelevel_roberta.json"));
    /* Backtracking encodes this model: the merge loop's table waits for
     * a word it cannot encode. */
    assert_true(k.enc->bt);
    assert_null(k.enc->wide_pairs);
    assert_false(atomic_load(&k.enc->pairs_ready));
    assert_int_equal(lipi_enc_bpe_pairs(k.enc), LIPI_OK);
    assert_int_equal(k.enc->pair_bits, 0);
    assert_non_null(k.enc->wide_pairs);
    kit_free(&k);
    lipi_enc_wide_pairs_for_tests = 0;
    k = kit_from(load(FIXTURES "bytelevel_roberta.json"));
    assert_int_equal(lipi_enc_bpe_pairs(k.enc), LIPI_OK);
    assert_true(k.enc->pair_bits > 0);
    kit_free(&k);
}

static void test_corpus_lines_same_as_hugging_face_gpt2(void **state)
{
    (void)state;
    run_corpus("gpt2", load(ref_need("vocab/gpt2/tokenizer.json")));
}

#define BERT_CORPUS(fn, name, lower)                                                \
    static void fn(void **state)                                                     \
    {                                                                                \
        (void)state;                                                                 \
        run_corpus(name, bert_from_vocab(ref_need("vocab/" name "/vocab.txt"), lower)); \
    }

BERT_CORPUS(test_corpus_lines_same_as_hugging_face_mbert_cased, "bert-base-multilingual-cased",
            false)
BERT_CORPUS(test_corpus_lines_same_as_hugging_face_bert_uncased, "bert-base-uncased", true)
BERT_CORPUS(test_corpus_lines_same_as_hugging_face_bert_cased, "bert-base-cased", false)
BERT_CORPUS(test_corpus_lines_same_as_hugging_face_bert_chinese, "bert-base-chinese", false)

/* ------------------------------------------------------------------------ */
/* Properties                                                                */
/* ------------------------------------------------------------------------ */

/* The fixture lines, for property tests. */
static json_t *fixture_lines(size_t *n)
{
    json_error_t je;
    json_t *fx = json_load_file(FIXTURES "wordpiece.expected.json", JSON_ALLOW_NUL, &je);
    if (!fx)
        fail_msg("%s", je.text);
    json_t *lines = json_array();
    const json_t *cases = json_object_get(fx, "cases");
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        if (json_is_null(json_object_get(c, "pair")) &&
            !json_is_true(json_object_get(c, "add_special_tokens")) &&
            json_integer_value(json_object_get(c, "max_length")) == 0)
            json_array_append(lines, json_object_get(c, "text"));
    }
    json_decref(fx);
    *n = json_array_size(lines);
    return lines;
}

/* Random UTF-8 over ASCII, Latin-1, Devanagari, Tamil, CJK, emoji, spaces. */
static size_t random_text(unsigned *seed, char *out, size_t cap)
{
    static const uint32_t ranges[][2] = {{0x20, 0x7e}, {0xa0, 0xff}, {0x900, 0x97f}, {0xb80, 0xbff},
                                         {0x4e00, 0x4e80}, {0x1f600, 0x1f64f}, {0x20, 0x20},
                                         {0x61, 0x7a}};
    size_t n = 0;
    size_t chars = (size_t)(rand_r(seed) % 40);
    for (size_t i = 0; i < chars && n + 4 < cap; i++) {
        const uint32_t *r = ranges[rand_r(seed) % 8];
        uint32_t cp = r[0] + (uint32_t)rand_r(seed) % (r[1] - r[0] + 1);
        n += lipi_utf8_encode(cp, out + n);
    }
    out[n] = '\0';
    return n;
}

/* decode(encode(x)) == x for a byte-level tokenizer without prefix space and
 * for the llama-style byte-fallback BPE (on lines without special tokens:
 * those split the text, and each split gets its own prefix space). */
static void roundtrip(const char *path)
{
    kit k = kit_from(load(path));
    size_t nl;
    json_t *lines = fixture_lines(&nl);
    result *r = result_new();
    char out[1 << 16], text[256];
    unsigned seed = 7;
    for (size_t i = 0; i < nl + 300; i++) {
        const char *s;
        size_t len;
        if (i < nl) {
            s = json_string_value(json_array_get(lines, i));
            len = json_string_length(json_array_get(lines, i));
            if (strchr(s, '<') || strchr(s, '[') || strstr(s, "\xe2\x96\x81"))
                continue;
        } else {
            len = random_text(&seed, text, sizeof text);
            s = text;
        }
        lipi_error err = {0};
        size_t dl;
        assert_int_equal(encode_opt(&k, s, len, NULL, 0, false, 0, r, &err), LIPI_OK);
        assert_int_equal(lipi_decode(k.s, r->ids, r->e.len, false, out, sizeof out, &dl, &err),
                         LIPI_OK);
        if (dl != len || memcmp(out, s, len) != 0) {
            printf("  \"");
            print_escaped(s, len);
            printf("\" came back as \"");
            print_escaped(out, dl);
            printf("\"\n");
            fail_msg("%s: decode(encode(x)) != x", path);
        }
    }
    free(r);
    json_decref(lines);
    kit_free(&k);
}

static void test_decode_of_encode_gives_the_text_back(void **state)
{
    (void)state;
    roundtrip(FIXTURES "bytelevel_seq.json");
    roundtrip(FIXTURES "bpe_bf.json");
    roundtrip(ref_need("vocab/gpt2/tokenizer.json"));
}

/* Batches on 1 and 2 threads give the same as one text at a time. */
static void batch_check(const char *path)
{
    kit k = kit_from(load(path));
    lipi_session *s2 = NULL;
    assert_int_equal(lipi_session_new(k.enc, &s2), LIPI_OK);
    size_t nl;
    json_t *lines = fixture_lines(&nl);
    size_t n = 700;
    lipi_text *texts = calloc(n, sizeof *texts);
    char **own = calloc(n, sizeof *own);
    unsigned seed = 11;
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 0) {
            own[i] = malloc(256);
            texts[i].len = random_text(&seed, own[i], 256);
            texts[i].s = own[i];
        } else {
            const json_t *l = json_array_get(lines, i % nl);
            texts[i] = (lipi_text){json_string_value(l), json_string_length(l)};
        }
    }
    unsigned want = LIPI_WANT_OFFSETS | LIPI_WANT_TOKENS | LIPI_WANT_TYPE_IDS |
                    LIPI_WANT_SPECIAL_MASK;
    lipi_encode_options o;
    lipi_encode_options_default(k.enc, &o);
    lipi_batch b0, b1, b2;
    lipi_error err = {0};
    lipi_session *one[] = {k.s}, *two[] = {k.s, s2};
    /* Sessions keep their batch arrays: an ids-only batch first, so that the
     * next one needs arrays the sessions never grew. Its ids are streamed
     * when the post-processor adds nothing: the same ids as with tokens. */
    assert_int_equal(lipi_encode_batch(two, 2, texts, n, &o, 0, &b0, &err), LIPI_OK);
    assert_null(b0.offsets);
    assert_int_equal(lipi_encode_batch(one, 1, texts, n, &o, want, &b1, &err), LIPI_OK);
    assert_memory_equal(b0.start, b1.start, (n + 1) * sizeof *b0.start);
    assert_memory_equal(b0.ids, b1.ids, b1.start[n] * sizeof *b0.ids);
    lipi_batch_free(&b0);
    assert_int_equal(lipi_encode_batch(two, 2, texts, n, &o, want, &b2, &err), LIPI_OK);
    assert_int_equal(b1.n, n);
    size_t total = b1.start[n];
    assert_int_equal(b2.start[n], total);
    assert_memory_equal(b1.start, b2.start, (n + 1) * sizeof *b1.start);
    assert_memory_equal(b1.ids, b2.ids, total * sizeof *b1.ids);
    assert_memory_equal(b1.offsets, b2.offsets, total * sizeof *b1.offsets);
    assert_memory_equal(b1.type_ids, b2.type_ids, total * sizeof *b1.type_ids);
    assert_memory_equal(b1.special_mask, b2.special_mask, total);
    assert_memory_equal(b1.token_start, b2.token_start, (total + 1) * sizeof *b1.token_start);
    assert_memory_equal(b1.token_text, b2.token_text, b1.token_start[total]);
    /* And the same as encoding each text alone. */
    result *r = result_new();
    for (size_t i = 0; i < n; i++) {
        lipi_encode_options oo = o;
        assert_int_equal(lipi_encode(k.s, texts[i].s, texts[i].len, &oo, &r->e, &err), LIPI_OK);
        assert_int_equal(r->e.len, b1.start[i + 1] - b1.start[i]);
        assert_memory_equal(r->ids, b1.ids + b1.start[i], r->e.len * sizeof *r->ids);
        assert_memory_equal(r->off, b1.offsets + b1.start[i], r->e.len * sizeof *r->off);
    }
    free(r);
    lipi_batch_free(&b1);
    lipi_batch_free(&b2);
    for (size_t i = 0; i < n; i++)
        free(own[i]);
    free(own);
    free(texts);
    json_decref(lines);
    lipi_session_free(s2);
    kit_free(&k);
}

/* Encodes text with both encoders (ids and offsets) and compares. */
static void same_encoding(kit *a, kit *b, const char *text, size_t len, result *ra, result *rb)
{
    lipi_error err = {0};
    lipi_encode_options o;
    lipi_encode_options_default(a->enc, &o);
    assert_int_equal(lipi_encode(a->s, text, len, &o, &ra->e, &err), LIPI_OK);
    assert_int_equal(lipi_encode(b->s, text, len, &o, &rb->e, &err), LIPI_OK);
    assert_int_equal(ra->e.len, rb->e.len);
    assert_memory_equal(ra->ids, rb->ids, ra->e.len * sizeof *ra->ids);
    assert_memory_equal(ra->off, rb->off, ra->e.len * sizeof *ra->off);
}

/* A Split on a pattern lipi scans by hand, or a Metaspace that only cuts,
 * is run by the encoder itself (pieces as spans of the text); the result is
 * the pre-tokenizer's. */
static lipi_tokenizer *open_any(const char *path)
{
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    if (lipi_tokenizer_open(path, NULL, &t, &err) != LIPI_OK)
        fail_msg("opening %s: %s", path, err.msg);
    return t;
}

/* Both kits encode the bundled FLORES lines and n_random random texts to
 * the same ids and offsets. */
static void same_on_texts(kit *a, kit *b, unsigned seed, int n_random)
{
    result *ra = result_new(), *rb = result_new();
    static const char *const files[] = {"data/flores200/eng_Latn.txt",
                                        "data/flores200/hin_Deva.txt",
                                        "data/flores200/ben_Beng.txt",
                                        "data/flores200/tam_Taml.txt"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t len;
        char *all = cli_slurp(files[f], &len);
        for (char *line = all, *nl; line < all + len; line = nl + 1) {
            nl = memchr(line, '\n', (size_t)(all + len - line));
            if (!nl)
                nl = all + len;
            same_encoding(a, b, line, (size_t)(nl - line), ra, rb);
        }
        free(all);
    }
    char buf[512];
    for (int i = 0; i < n_random; i++) {
        size_t n = random_text(&seed, buf, sizeof buf);
        same_encoding(a, b, buf, n, ra, rb);
    }
    free(ra);
    free(rb);
}

static void scanning_check(const char *path)
{
    kit fast = kit_from(open_any(path)), slow = kit_from(open_any(path));
    assert_true(fast.enc->scan || fast.enc->meta_split_len);
    slow.enc->scan = NULL;
    slow.enc->meta_split_len = 0;
    same_on_texts(&fast, &slow, 5, 300);
    kit_free(&fast);
    kit_free(&slow);
}

static void test_scanning_in_the_encoder_is_the_pre_tokenizer(void **state)
{
    (void)state;
    scanning_check("data/vocab/tiktoken/cl100k_base.tiktoken");
    scanning_check("data/vocab/tiktoken/o200k_base.tiktoken");
    scanning_check(FIXTURES "bytelevel_roberta.json");
    /* SentencePiece models: Metaspace cuts the normalized text. */
    scanning_check("tests/fixtures/readers/bpe_bytes.model");
    scanning_check(ref_need("vocab/laser100k-spm/laser_100k.model"));
}

/* tiktoken rank files encode words by backtracking (encoder/backtrack.c):
 * the same ids as the merge loop, on text and on random bytes. */
static void backtracking_check(const char *path)
{
    kit bt = kit_from(open_any(path)), merge = kit_from(open_any(path));
    assert_true(bt.enc->bt);
    merge.enc->bt = merge.enc->bt_words = false;
    /* An encoder whose walk finds whole words skips the whole-word table;
     * the merge loop's path looks words up there first. */
    assert_null(merge.enc->raw_slot);
    assert_int_equal(lipi_enc_raw_slots(merge.enc), LIPI_OK);
    same_on_texts(&bt, &merge, 9, 2000);
    unsigned seed = 9;
    /* Words the pre-tokenizer never makes: any bytes, straight to the model. */
    for (int i = 0; i < 20000; i++) {
        char w[24];
        size_t n = 1 + (size_t)(seed % 23), c1 = 0, c2 = 0;
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            w[k] = (char)(seed >> 16);
        }
        const enc_ptok *t1, *t2;
        lipi_error err = {0};
        assert_int_equal(lipi_enc_model(bt.s, w, n, lipi_enc_hash(w, n), &t1, &c1, &err), LIPI_OK);
        uint32_t ids[24];
        for (size_t k = 0; k < c1; k++)
            ids[k] = t1[k].id;
        assert_int_equal(lipi_enc_model(merge.s, w, n, lipi_enc_hash(w, n), &t2, &c2, &err),
                         LIPI_OK);
        assert_int_equal(c1, c2);
        for (size_t k = 0; k < c1; k++)
            assert_int_equal(ids[k], t2[k].id);
    }
    kit_free(&bt);
    kit_free(&merge);
}

/* A rank file of the 256 bytes, then extra tokens (rank 256, 257, ...). */
static lipi_tokenizer *rank_file(const char *const *extra, size_t n_extra)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char text[8192];
    size_t len = 0;
    for (size_t r = 0; r < 256 + n_extra; r++) {
        unsigned char one = (unsigned char)r;
        const unsigned char *t = r < 256 ? &one : (const unsigned char *)extra[r - 256];
        size_t n = r < 256 ? 1 : strlen(extra[r - 256]);
        for (size_t i = 0; i < n; i += 3) {
            uint32_t v = (uint32_t)t[i] << 16 | (i + 1 < n ? (uint32_t)t[i + 1] << 8 : 0) |
                         (i + 2 < n ? t[i + 2] : 0);
            text[len++] = b64[v >> 18 & 63];
            text[len++] = b64[v >> 12 & 63];
            text[len++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
            text[len++] = i + 2 < n ? b64[v & 63] : '=';
        }
        len += (size_t)snprintf(text + len, sizeof text - len, " %zu\n", r);
    }
    lipi_tokenizer *t = NULL;
    lipi_error err = {0};
    if (lipi_tokenizer_from_tiktoken(text, len, "test", "\\S+", NULL, 0, 0, &t, &err) != LIPI_OK)
        fail_msg("rank file: %s", err.msg);
    return t;
}

/* Backtracking takes any token the text starts with; a token that the
 * merges never reach ("xyz": no pair of tokens makes it) must keep the
 * rank file on the merge loop, which spells "xyza" byte by byte. */
static void test_unreachable_tokens_keep_the_merge_loop(void **state)
{
    (void)state;
    static const char *const reach[] = {"ab", "abc"}, *const unreach[] = {"ab", "xyz"};
    kit k = kit_from(rank_file(reach, 2));
    assert_true(k.enc->bt);
    result *r = result_new();
    lipi_error err = {0};
    lipi_encode_options o;
    lipi_encode_options_default(k.enc, &o);
    assert_int_equal(lipi_encode(k.s, "abc", 3, &o, &r->e, &err), LIPI_OK);
    assert_int_equal(r->e.len, 1);
    assert_int_equal(r->ids[0], 257);
    kit_free(&k);
    k = kit_from(rank_file(unreach, 2));
    assert_false(k.enc->bt);
    /* A whole piece that is a token is looked up first (ignore_merges). */
    assert_int_equal(lipi_encode(k.s, "xyz", 3, &o, &r->e, &err), LIPI_OK);
    assert_int_equal(r->e.len, 1);
    assert_int_equal(lipi_encode(k.s, "xyza", 4, &o, &r->e, &err), LIPI_OK);
    assert_int_equal(r->e.len, 4);
    assert_int_equal(r->ids[0], 'x');
    assert_int_equal(r->ids[3], 'a');
    free(r);
    kit_free(&k);
}

static void test_backtracking_bpe_is_the_merge_loop(void **state)
{
    (void)state;
    backtracking_check("data/vocab/tiktoken/cl100k_base.tiktoken");
    backtracking_check("data/vocab/tiktoken/o200k_base.tiktoken");
}

/* Backtracking's walk checks each length it takes against the word (at
 * load, bt_tables_ok does not tie a cached bt_len to the trie): with
 * every length times 100, as a doctored cache file could have them (splits
 * and prefixes still add up), no token ends past its word, and a word of
 * over 64 KiB, whose tokens' lengths are added up at the end, is refused
 * (count 0: the merge loop takes it). */
static void test_backtracking_walk_checks_its_lengths(void **state)
{
    (void)state;
    lipi_open_options o = {.table_cache = LIPI_FLAG_OFF};
    lipi_tokenizer *t = NULL;
    assert_int_equal(lipi_tokenizer_open("data/vocab/tiktoken/r50k_base.tiktoken", &o, &t, NULL),
                     LIPI_OK);
    kit k = kit_from(t);
    assert_true(k.enc->bt);
    assert_null(k.enc->bt_mapped); /* built, so writable */
    for (size_t i = 0; i < k.enc->bt_v; i++)
        k.enc->bt_len[i] = (uint16_t)(100 * k.enc->bt_len[i]);
    size_t long_n = 70000, count;
    char *w = malloc(long_n);
    assert_non_null(w);
    unsigned seed = 5;
    /* Each word in a block of its own size: a read past it is one that
     * `make check` (ASan) reports. */
    for (int i = 0; i < 20000; i++) {
        size_t n = 1 + (size_t)(seed % 40);
        char *x = malloc(n);
        assert_non_null(x);
        for (size_t j = 0; j < n; j++) {
            seed = seed * 1103515245u + 12345u;
            x[j] = "abcde fghij"[(seed >> 16) % 11];
        }
        assert_int_equal(lipi_enc_bt_word(k.s, x, n, &count), LIPI_OK);
        for (size_t j = 0; j < count; j++)
            assert_true(k.s->ptok[j].start < k.s->ptok[j].end && k.s->ptok[j].end <= n);
        free(x);
    }
    /* Tokens of four a's, each valid after the last: no length is taken
     * from bt_len during the walk, only at the end. */
    memset(w, 'a', long_n);
    assert_int_equal(lipi_enc_bt_word(k.s, w, long_n, &count), LIPI_OK);
    assert_int_equal(count, 0);
    free(w);
    kit_free(&k);
}

/* Both kits' models give w[0..n) the same ids. */
static void same_word(kit *a, kit *b, const char *w, size_t n)
{
    const enc_ptok *t1, *t2;
    size_t c1 = 0, c2 = 0;
    lipi_error err = {0};
    assert_int_equal(lipi_enc_model(a->s, w, n, lipi_enc_hash(w, n), &t1, &c1, &err), LIPI_OK);
    uint32_t *ids = malloc((c1 ? c1 : 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t k = 0; k < c1; k++)
        ids[k] = t1[k].id;
    assert_int_equal(lipi_enc_model(b->s, w, n, lipi_enc_hash(w, n), &t2, &c2, &err), LIPI_OK);
    assert_int_equal(c1, c2);
    for (size_t k = 0; k < c1; k++)
        assert_int_equal(ids[k], t2[k].id);
    free(ids);
}

/* Byte-level Hugging Face BPE encodes words by backtracking over its
 * merges' ranks: the same ids as the merge loop on texts, random bytes and
 * long runs of one to three characters (words the pre-tokenizer would cut,
 * handed to the model whole). */
static void backtracking_merges_check(lipi_tokenizer *t, lipi_tokenizer *t2)
{
    static const char *const units[] = {"a", " ", "\xe0\xa4\x95", "ab", "aab", "\xf0\x9f\x98\x80",
                                        "e\xcc\x81", "\xe0\xa4\x95\xe0\xa5\x8d", "..",
                                        "\xd0\xbf\xd1\x80", "\xe4\xb8\xad\xe6\x96\x87",
                                        "0", "12", "\n"};
    kit bt = kit_from(t), merge = kit_from(t2);
    assert_true(bt.enc->bt);
    merge.enc->bt = false;
    same_on_texts(&bt, &merge, 11, 500);
    char *w = malloc(6000);
    assert_non_null(w);
    unsigned seed = 11;
    for (int i = 0; i < 5000; i++) {
        size_t n = 1 + (size_t)(seed % 40);
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            w[k] = (char)(seed >> 16);
        }
        same_word(&bt, &merge, w, n);
    }
    /* Repeats of one unit, and of two units mixed (scripts side by side). */
    for (size_t u = 0; u < sizeof units / sizeof *units; u++)
        for (size_t v = 0; v < sizeof units / sizeof *units; v++) {
            size_t n = 0, reps = 1 + (u * 7 + v * 13) % 700;
            for (size_t r = 0; r < reps; r++) {
                const char *x = r % 3 == 2 ? units[v] : units[u];
                size_t l = strlen(x);
                if (n + l > 6000)
                    break;
                memcpy(w + n, x, l);
                n += l;
                if (r < 24 || r % 61 == 0 || r + 1 == reps)
                    same_word(&bt, &merge, w, n);
            }
        }
    free(w);
    kit_free(&bt);
    kit_free(&merge);
}

/* A byte-level BPE tokenizer.json: the 256 bytes (ids 0-255, in the GPT-2
 * alphabet), then the tokens of merges ("a b" each, strings of printable
 * ASCII) in order, then extra tokens no merge makes; no regex, so a text is
 * one word. */
static lipi_tokenizer *bytelevel_merges(const char *const *merges, size_t n_merges,
                                        const char *const *extra, size_t n_extra,
                                        bool ignore_merges)
{
    char *j = malloc(65536);
    size_t len = 0, id = 0;
    assert_non_null(j);
    len += (size_t)sprintf(j + len, "{\"model\": {\"type\": \"BPE\", \"ignore_merges\": %s, "
                                    "\"vocab\": {",
                           ignore_merges ? "true" : "false");
    for (int b = 0; b < 256; b++) {
        char u[8];
        size_t ul = lipi_utf8_encode(lipi_bytelevel_char((uint8_t)b), u);
        len += (size_t)sprintf(j + len, "%s\"%s%.*s\": %zu", b ? ", " : "",
                               b == '"' || b == '\\' ? "\\" : "", (int)ul, u, id++);
    }
    for (size_t m = 0; m < n_merges; m++) {
        const char *sp = strchr(merges[m], ' ');
        len += (size_t)sprintf(j + len, ", \"%.*s%s\": %zu", (int)(sp - merges[m]), merges[m],
                               sp + 1, id++);
    }
    for (size_t x = 0; x < n_extra; x++)
        len += (size_t)sprintf(j + len, ", \"%s\": %zu", extra[x], id++);
    len += (size_t)sprintf(j + len, "}, \"merges\": [");
    for (size_t m = 0; m < n_merges; m++)
        len += (size_t)sprintf(j + len, "%s\"%s\"", m ? ", " : "", merges[m]);
    sprintf(j + len, "]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                     "false, \"trim_offsets\": false, \"use_regex\": false}}");
    lipi_tokenizer *t = load_text(j);
    free(j);
    return t;
}

/* The id of w when it encodes to one token, else -1. */
static int64_t one_id(kit *k, const char *w)
{
    result *r = result_new();
    lipi_error err = {0};
    lipi_encode_options o;
    lipi_encode_options_default(k->enc, &o);
    assert_int_equal(lipi_encode(k->s, w, strlen(w), &o, &r->e, &err), LIPI_OK);
    int64_t id = r->e.len == 1 ? (int64_t)r->ids[0] : -1;
    free(r);
    return id;
}

/* Backtracking needs the merges to number the tokens by rank: each makes a
 * new token from two older ones. Otherwise the merge loop stays. */
static void test_merges_out_of_rank_order_keep_the_merge_loop(void **state)
{
    (void)state;
    static const char *const good[] = {"a b", "ab c"}, *const late[] = {"a bc", "b c"},
                             *const twice[] = {"a b", "ab c", "b c", "a bc"},
                             *const extra[] = {"xyz"};
    kit k = kit_from(bytelevel_merges(good, 2, extra, 1, false));
    assert_true(k.enc->bt);
    assert_int_equal(one_id(&k, "abc"), 257);
    assert_int_equal(one_id(&k, "xyz"), -1); /* no merge makes it */
    kit_free(&k);
    /* ignore_merges takes a whole word that is a token, made or not. */
    k = kit_from(bytelevel_merges(good, 2, extra, 1, true));
    assert_true(k.enc->bt);
    assert_int_equal(one_id(&k, "xyz"), 258);
    assert_int_equal(one_id(&k, "abc"), 257);
    kit_free(&k);
    /* "a bc" (rank 0) waits for "bc" (rank 1), then merges at once. */
    k = kit_from(bytelevel_merges(late, 2, NULL, 0, false));
    assert_false(k.enc->bt);
    assert_int_equal(one_id(&k, "abc"), 256);
    kit_free(&k);
    k = kit_from(bytelevel_merges(twice, 4, NULL, 0, false));
    assert_false(k.enc->bt);
    kit_free(&k);
}

static void test_backtracking_on_merges_is_the_merge_loop(void **state)
{
    (void)state;
    backtracking_merges_check(open_any(FIXTURES "bytelevel_roberta.json"),
                              open_any(FIXTURES "bytelevel_roberta.json"));
    const char *gpt2 = ref_shared("vocab/gpt2/tokenizer.json");
    if (!gpt2)
        skip();
    backtracking_merges_check(open_any(gpt2), open_any(gpt2));
}

/* Short words of a model whose merged tokens are their pairs' strings
 * joined are merged by a scan (bpe_merge_scan): the same ids and offsets
 * as through the heap. */
static void merge_scan_check(kit *scan, kit *heap)
{
    /* Built now, as a word backtracking cannot encode would build them. */
    assert_int_equal(lipi_enc_bpe_pairs(scan->enc), LIPI_OK);
    assert_int_equal(lipi_enc_bpe_pairs(heap->enc), LIPI_OK);
    assert_true(scan->enc->merge_concat);
    heap->enc->merge_concat = false;
    same_on_texts(scan, heap, 13, 2000);
}

static void test_short_words_merge_as_through_the_heap(void **state)
{
    (void)state;
    const char *paths[] = {FIXTURES "bytelevel_roberta.json", FIXTURES "bpe_bf.json",
                           "tests/fixtures/readers/bpe_bytes.model",
                           "data/vocab/tiktoken/cl100k_base.tiktoken",
                           ref_need("vocab/gpt2/tokenizer.json")};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        kit scan = kit_from(open_any(paths[i])), heap = kit_from(open_any(paths[i]));
        scan.enc->bt = heap.enc->bt = false; /* a rank file too */
        merge_scan_check(&scan, &heap);
        kit_free(&scan);
        kit_free(&heap);
    }
    /* Two pairs make "abc", at different ranks: a word can hold both. */
    const char *json = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, "
                       "\"c\": 2, \"ab\": 3, \"bc\": 4, \"abc\": 5, \"ca\": 6, \"cab\": 7}, "
                       "\"merges\": [\"b c\", \"c a\", \"a b\", \"ab c\", \"ca b\", \"a bc\"]}}";
    kit scan = kit_from(load_text(json)), heap = kit_from(load_text(json));
    assert_true(scan.enc->merge_concat);
    heap.enc->merge_concat = false;
    result *ra = result_new(), *rb = result_new();
    unsigned seed = 5;
    for (int i = 0; i < 3000; i++) {
        char w[24];
        size_t n = 1 + (size_t)rand_r(&seed) % 23;
        for (size_t k = 0; k < n; k++)
            w[k] = "abc"[rand_r(&seed) % 3];
        same_encoding(&scan, &heap, w, n, ra, rb);
    }
    free(ra);
    free(rb);
    kit_free(&scan);
    kit_free(&heap);
    /* A continuing-subword prefix: merged tokens are not joined strings. */
    kit p = kit_from(load(FIXTURES "bpe_prefix.json"));
    assert_false(p.enc->merge_concat);
    kit_free(&p);
}

/* The pair filter of a model with few merges (a bit per hashed pair that
 * merges, asked before the pair cache) never hides a merge: every pair of
 * the merge list, and random pairs of tokens, get the rank a search of the
 * list gives (the last rank of a pair listed twice, as the table keeps). */
static void test_pair_filter_never_hides_a_merge(void **state)
{
    (void)state;
    const char *paths[] = {FIXTURES "bpe_bf.json", "tests/fixtures/readers/bpe_bytes.model",
                           FIXTURES "bpe_suffix.json"};
    for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
        kit k = kit_from(open_any(paths[p]));
        assert_int_equal(lipi_enc_bpe_pairs(k.enc), LIPI_OK);
        assert_int_equal(lipi_enc_pair_ready(k.s), LIPI_OK);
        const lipi_vocab_model *m = k.enc->m;
        assert_true(m->n_merges > 10);
        assert_non_null(k.enc->pair_filter);
        uint32_t rank;
        for (size_t r = 0; r < m->n_merges; r++) {
            const lipi_merge *g = &m->merges[r];
            assert_true(lipi_enc_pair_rank(k.s, g->left, g->right, &rank));
            assert_int_equal(m->merges[rank].left, g->left);
            assert_int_equal(m->merges[rank].right, g->right);
            assert_true(rank >= r);
        }
        unsigned seed = 3;
        size_t merging = 0;
        for (int t = 0; t < 20000; t++) {
            /* Half the pairs from merges' sides, so that some merge. */
            const lipi_merge *g = &m->merges[(size_t)rand_r(&seed) % m->n_merges];
            const lipi_merge *h = &m->merges[(size_t)rand_r(&seed) % m->n_merges];
            uint32_t a = t % 2 ? g->left : (uint32_t)((size_t)rand_r(&seed) % m->vocab.n);
            uint32_t b = t % 2 ? h->right : (uint32_t)((size_t)rand_r(&seed) % m->vocab.n);
            int64_t want = -1;
            for (size_t r = 0; r < m->n_merges; r++)
                if (m->merges[r].left == a && m->merges[r].right == b)
                    want = (int64_t)r;
            bool got = lipi_enc_pair_rank(k.s, a, b, &rank);
            assert_int_equal(got, want >= 0);
            if (got)
                assert_int_equal(rank, want);
            merging += got;
        }
        assert_true(merging > 0);
        kit_free(&k);
    }
}

/* The merge scan's vector search for the lowest rank (16-bit ranks, eight
 * to a vector) against the plain loop: ties (the leftmost wins), no pair
 * at all, the lowest at every position including the vector edges, the
 * extreme ranks, and entries past nv * 8 that must not count. */
static void test_merge_scan_lowest_rank_is_the_plain_loop(void **state)
{
    (void)state;
    _Alignas(16) int16_t r[24];
    uint32_t best = 0, best_ref = 0;
    /* By hand: ranks 5, 3, 3 (stored as rank - 32768): the first 3. */
    for (size_t i = 0; i < 24; i++)
        r[i] = INT16_MAX;
    r[0] = 5 - 32768;
    r[1] = r[2] = 3 - 32768;
    assert_int_equal(lipi_enc_scan_min16(r, 1, &best), 1);
    assert_int_equal(best, 3);
    r[1] = r[2] = INT16_MAX;
    r[9] = -32768; /* rank 0, past the one vector asked for */
    assert_int_equal(lipi_enc_scan_min16(r, 1, &best), 0);
    assert_int_equal(best, 5);
    assert_int_equal(lipi_enc_scan_min16(r, 2, &best), 9);
    assert_int_equal(best, 0);
    for (size_t i = 0; i < 24; i++)
        r[i] = INT16_MAX;
    for (size_t nv = 1; nv <= 3; nv++)
        assert_int_equal(lipi_enc_scan_min16(r, nv, &best), -1);
    /* One low entry at every position, over a field of none and of rank
     * 65534 (the highest a 16-bit rank can be). */
    for (size_t nv = 1; nv <= 3; nv++)
        for (size_t at = 0; at < 8 * nv; at++)
            for (int field = 0; field < 2; field++) {
                for (size_t i = 0; i < 24; i++)
                    r[i] = field ? 32766 : INT16_MAX;
                r[at] = (int16_t)(at * 7 % 13 - 32768);
                assert_int_equal(lipi_enc_scan_min16(r, nv, &best), (int)at);
                assert_int_equal(lipi_enc_scan_min16_ref(r, nv, &best_ref), (int)at);
                assert_int_equal(best, best_ref);
                assert_int_equal(best, at * 7 % 13);
            }
    /* Random ranks from a few values (many ties) with none among them. */
    unsigned seed = 11;
    static const int16_t vals[] = {-32768, -32767, -1, 0, 1, 32766, INT16_MAX, INT16_MAX};
    for (int t = 0; t < 20000; t++) {
        size_t nv = 1 + (size_t)rand_r(&seed) % 3;
        for (size_t i = 0; i < 24; i++)
            r[i] = vals[rand_r(&seed) % 8];
        int got = lipi_enc_scan_min16(r, nv, &best);
        int want = lipi_enc_scan_min16_ref(r, nv, &best_ref);
        assert_int_equal(got, want);
        if (want >= 0)
            assert_int_equal(best, best_ref);
    }
}

/* Long words in parts (encoder/bpe_long.c), cut only where no merge joins
 * the two sides, each part by the merge loop or in compact memory: the ids
 * and offsets of the merge loop over the whole word. `lng` takes every word
 * through the parts, `plain` none. */
static void parts_check(kit *lng, kit *plain, unsigned seed, int n_random, size_t max_part)
{
    assert_true(lng->enc->merge_concat);
    lng->enc->bpe_long_min = 0;
    plain->enc->bpe_long_min = SIZE_MAX;
    result *ra = result_new(), *rb = result_new();
    /* a, b, क and z: z is not in the vocabulary (unknown or byte fallback). */
    static const char *const chars[] = {"a", "b", "\xe0\xa4\x95", "z"};
    char w[256];
    for (int i = 0; i < n_random; i++) {
        size_t n = 0, chars_n = 1 + (size_t)rand_r(&seed) % 60;
        for (size_t k = 0; k < chars_n; k++) {
            const char *c = chars[rand_r(&seed) % (i % 2 ? 4 : 3)];
            memcpy(w + n, c, strlen(c));
            n += strlen(c);
        }
        /* Parts of 1 to max_part bytes or the whole word, by the merge
         * loop or in compact memory. */
        int how = rand_r(&seed) % 4;
        lng->enc->bpe_long_part = how == 3 ? SIZE_MAX : 1 + (size_t)rand_r(&seed) % max_part;
        lng->enc->bpe_compact_min = how >= 2 ? 0 : SIZE_MAX;
        same_encoding(lng, plain, w, n, ra, rb);
    }
    free(ra);
    free(rb);
}

static const char *const parts_json[] = {
    /* Chains (aab, abab) and merges across most pairs of characters; cuts
     * between b and b, a and क, क and b, क and क. */
    "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": %s, "
    "\"byte_fallback\": %s, \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, "
    "\"\xe0\xa4\x95\": 3, \"aa\": 4, \"ab\": 5, \"aab\": 6, \"abab\": 7, "
    "\"\xe0\xa4\x95" "a\": 8, \"ba\": 9, \"b\xe0\xa4\x95\": 10, \"aaa\": 11, \"<0x7A>\": 12}, "
    "\"merges\": [\"a a\", \"a b\", \"aa b\", \"b a\", \"ab ab\", \"\xe0\xa4\x95 a\", \"aa a\", "
    "\"b \xe0\xa4\x95\"]}}",
    /* Only "a a" and "aa aa": 'a' repeated cuts nowhere, the rest anywhere. */
    "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": %s, "
    "\"byte_fallback\": %s, \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, "
    "\"\xe0\xa4\x95\": 3, \"aa\": 4, \"aaaa\": 5, \"<0x7A>\": 6}, "
    "\"merges\": [\"a a\", \"aa aa\"]}}",
    /* Merges of tokens later merges make ("aa aa" before "a a"): a merge
     * can make pairs of lower rank on both sides. */
    "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": %s, "
    "\"byte_fallback\": %s, \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, "
    "\"\xe0\xa4\x95\": 3, \"aa\": 4, \"aaaa\": 5, \"ab\": 6, \"aba\": 7, \"ba\": 8, "
    "\"baa\": 9, \"<0x7A>\": 10}, "
    "\"merges\": [\"aa aa\", \"ab a\", \"b aa\", \"a a\", \"a b\", \"b a\"]}}"};

static void test_long_words_in_parts_are_the_merge_loop(void **state)
{
    (void)state;
    char json[1024];
    for (size_t j = 0; j < sizeof parts_json / sizeof *parts_json; j++)
        for (int v = 0; v < 3; v++) {
            snprintf(json, sizeof json, parts_json[j], v == 1 ? "true" : "false",
                     v == 2 ? "true" : "false");
            kit lng = kit_from(load_text(json)), plain = kit_from(load_text(json));
            parts_check(&lng, &plain, 17 + (unsigned)v, 4000, 8);
            kit_free(&lng);
            kit_free(&plain);
        }
    const char *paths[] = {"tests/fixtures/readers/bpe_bytes.model", FIXTURES "bpe_bf.json",
                           FIXTURES "bytelevel_roberta.json"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        kit lng = kit_from(open_any(paths[i])), plain = kit_from(open_any(paths[i]));
        lng.enc->bt = plain.enc->bt = false;
        if (!lng.enc->raw_bytes) {
            parts_check(&lng, &plain, 23, 1000, 8);
            lng.enc->bpe_long_part = 3;
            same_on_texts(&lng, &plain, 29, 300);
            lng.enc->bpe_long_part = SIZE_MAX;
            lng.enc->bpe_compact_min = 0;
            same_on_texts(&lng, &plain, 31, 300);
        }
        kit_free(&lng);
        kit_free(&plain);
    }
    /* A few hundred KB at the default part size: one character repeated
     * (parts: the merge loop's symbols stay a part's), and pairs of
     * characters that merge both ways ("an": no cut at all, so in compact
     * memory); and all in compact memory. */
    kit lng = kit_from(open_any("tests/fixtures/readers/bpe_bytes.model")),
        plain = kit_from(open_any("tests/fixtures/readers/bpe_bytes.model")),
        cmp = kit_from(open_any("tests/fixtures/readers/bpe_bytes.model"));
    lng.enc->bpe_long_min = cmp.enc->bpe_long_min = 0;
    lng.enc->bpe_compact_min = 100000;
    cmp.enc->bpe_long_part = SIZE_MAX;
    cmp.enc->bpe_compact_min = 0;
    plain.enc->bpe_long_min = SIZE_MAX;
    static const char *const units[] = {"a", "an", "ab", "the", "\xe0\xa4\x95", "aaaab"};
    size_t big = 300000;
    char *w = malloc(big);
    assert_non_null(w);
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        size_t l = strlen(units[u]), n = big / l * l;
        for (size_t k = 0; k < n; k += l)
            memcpy(w + k, units[u], l);
        same_word(&lng, &plain, w, n);
        same_word(&cmp, &plain, w, n);
        if (u <= 1) {
            assert_true(lng.s->sym_cap < big / 2);
            assert_true(cmp.s->sym_cap < big / 2);
            assert_true(plain.s->sym_cap >= big / 2);
        }
    }
    free(w);
    kit_free(&lng);
    kit_free(&plain);
    kit_free(&cmp);
}

static void test_batch_is_the_same_on_one_and_two_threads(void **state)
{
    (void)state;
    batch_check(FIXTURES "wordpiece.json");
    batch_check(FIXTURES "unigram.json");
    batch_check(FIXTURES "bytelevel_roberta.json");
    batch_check(FIXTURES "bpe_bf.json");
}

static void test_batch_reports_the_first_failing_line(void **state)
{
    (void)state;
    kit k = kit_from(load(FIXTURES "bytelevel_seq.json"));
    lipi_text texts[200];
    for (size_t i = 0; i < 200; i++)
        texts[i] = (lipi_text){"fine", 4};
    texts[150] = (lipi_text){"bad \xff byte", 10};
    texts[170] = (lipi_text){"\xc3", 1};
    lipi_session *two[2] = {k.s, NULL};
    assert_int_equal(lipi_session_new(k.enc, &two[1]), LIPI_OK);
    lipi_batch b;
    lipi_error err = {0};
    assert_int_equal(lipi_encode_batch(two, 2, texts, 200, NULL, 0, &b, &err), LIPI_EFORMAT);
    assert_int_equal(err.line, 151);
    assert_int_equal(err.offset, 4);
    assert_null(b.ids);
    /* The same session twice, or none, is refused before any work. */
    lipi_session *twice[2] = {k.s, k.s}, *none[1] = {NULL};
    assert_int_equal(lipi_encode_batch(twice, 2, texts, 10, NULL, 0, &b, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "session 1 is session 0"));
    assert_null(b.ids);
    assert_int_equal(lipi_encode_batch(none, 1, texts, 10, NULL, 0, &b, &err), LIPI_EINVAL);
    /* An empty batch is fine. */
    assert_int_equal(lipi_encode_batch(two, 2, texts, 0, NULL, 0, &b, &err), LIPI_OK);
    assert_int_equal(b.n, 0);
    assert_int_equal(b.start[0], 0);
    lipi_batch_free(&b);
    lipi_session_free(two[1]);
    kit_free(&k);
}

/* ------------------------------------------------------------------------ */
/* Building blocks                                                           */
/* ------------------------------------------------------------------------ */

static void test_trie_finds_the_longest_key(void **state)
{
    (void)state;
    const char *words[] = {"a", "ab", "abc", "b", "bcd", "\xe6\x97\xa5\xe6\x9c\xac", "x"};
    lipi_strref keys[7];
    uint32_t vals[7];
    for (size_t i = 0; i < 7; i++) {
        keys[i] = (lipi_strref){words[i], strlen(words[i])};
        vals[i] = (uint32_t)(100 + i);
    }
    lipi_datrie t;
    assert_int_equal(lipi_datrie_build(&t, keys, vals, 7), LIPI_OK);
    int32_t v = -1;
    assert_int_equal(lipi_datrie_longest(&t, "abcd", 4, &v), 3);
    assert_int_equal(v, 102);
    assert_int_equal(lipi_datrie_longest(&t, "abd", 3, &v), 2);
    assert_int_equal(v, 101);
    assert_int_equal(lipi_datrie_longest(&t, "zz", 2, &v), 0);
    assert_int_equal(lipi_datrie_longest(&t, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 9, &v), 6);
    assert_int_equal(v, 105);
    lipi_datrie_free(&t);

    /* Random keys against a linear scan, in both layouts (the compact one
     * tells children by label: NUL and 0xFF bytes, keys sharing bytes). */
    enum { N = 3000 };
    static const char alpha[] = "abcde\xc3\xa9\xff\0\x01";
    char (*buf)[12] = calloc(N, sizeof *buf);
    lipi_strref *rk = calloc(N, sizeof *rk);
    uint32_t *rv = calloc(N, sizeof *rv);
    unsigned seed = 3;
    for (size_t i = 0; i < N; i++) {
        size_t n = 1 + (size_t)rand_r(&seed) % 8;
        for (size_t k = 0; k < n; k++)
            buf[i][k] = alpha[rand_r(&seed) % 10];
        rk[i] = (lipi_strref){buf[i], n};
        rv[i] = (uint32_t)i;
    }
    assert_int_equal(lipi_datrie_build(&t, rk, rv, N), LIPI_OK);
    lipi_datrie32 c;
    assert_int_equal(lipi_datrie32_from(&c, &t), LIPI_OK);
    for (size_t q = 0; q < 4000; q++) {
        char s[10];
        size_t n = 1 + (size_t)rand_r(&seed) % 9;
        for (size_t k = 0; k < n; k++)
            s[k] = alpha[rand_r(&seed) % 10];
        size_t best = 0;
        int32_t bv = -1;
        for (size_t i = 0; i < N; i++)
            if (rk[i].len <= n && rk[i].len > best && memcmp(rk[i].s, s, rk[i].len) == 0) {
                best = rk[i].len;
                bv = (int32_t)i;
            }
        /* A repeated key keeps its smallest index; the scan finds it first. */
        int32_t got = -1, got32 = -1;
        assert_int_equal(lipi_datrie_longest(&t, s, n, &got), best);
        assert_int_equal(lipi_datrie32_longest(&c, s, n, &got32), best);
        if (best) {
            assert_int_equal(got, bv);
            assert_int_equal(got32, bv);
        }
    }
    lipi_datrie32_free(&c);
    lipi_datrie_free(&t);
    free(buf);
    free(rk);
    free(rv);
}

/* The GPT-2 alphabet against its definition (bytes_to_unicode). */
static void test_byte_level_alphabet_is_gpt2s(void **state)
{
    (void)state;
    uint32_t next = 256;
    bool seen[400] = {false};
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t want = printable ? (uint32_t)b : next++;
        assert_int_equal(lipi_bytelevel_char((uint8_t)b), want);
        assert_int_equal(lipi_bytelevel_byte(want), b);
        seen[want] = true;
    }
    assert_int_equal(next, 256 + 68);
    for (uint32_t cp = 0; cp < 400; cp++)
        if (!seen[cp])
            assert_int_equal(lipi_bytelevel_byte(cp), -1);
}

static void test_lattice_viterbi_and_marginals(void **state)
{
    (void)state;
    /* "abc": a b c ab bc abc with log scores. */
    lipi_lattice lat = {0};
    lipi_lattice_reset(&lat, 3);
    assert_int_equal(lipi_lattice_insert(&lat, 0, 1, 0, -1.0), LIPI_OK); /* a */
    assert_int_equal(lipi_lattice_insert(&lat, 0, 2, 3, -1.5), LIPI_OK); /* ab */
    assert_int_equal(lipi_lattice_insert(&lat, 0, 3, 5, -4.0), LIPI_OK); /* abc */
    assert_int_equal(lipi_lattice_insert(&lat, 1, 1, 1, -1.0), LIPI_OK); /* b */
    assert_int_equal(lipi_lattice_insert(&lat, 1, 2, 4, -0.5), LIPI_OK); /* bc */
    assert_int_equal(lipi_lattice_insert(&lat, 2, 1, 2, -1.0), LIPI_OK); /* c */
    assert_int_equal(lipi_lattice_insert(&lat, 1, 1, 9, 0.0), LIPI_EINVAL); /* out of order */
    bool found;
    assert_int_equal(lipi_lattice_viterbi(&lat, &found), LIPI_OK);
    assert_true(found);
    /* a+bc = -1.5 ties ab+c = -2.5? no: ab+c = -2.5, a+b+c = -3, abc = -4: a+bc wins. */
    assert_int_equal(lat.path_len, 2);
    assert_int_equal(lat.nodes[lat.path[0]].id, 0);
    assert_int_equal(lat.nodes[lat.path[1]].id, 4);
    /* Paths: a.b.c (-3), a.bc (-1.5), ab.c (-2.5), abc (-4). */
    double z = log(exp(-3.0) + exp(-1.5) + exp(-2.5) + exp(-4.0)), lz;
    double m[6];
    assert_int_equal(lipi_lattice_marginals(&lat, m, &lz), LIPI_OK);
    assert_true(fabs(lz - z) < 1e-12);
    double pa = (exp(-3.0) + exp(-1.5)) / exp(z);
    assert_true(fabs(m[0] - pa) < 1e-12);
    assert_true(fabs(m[2] - exp(-4.0 - z)) < 1e-12);
    /* Every byte is covered by exactly one node of each path. */
    for (size_t pos = 0; pos < 3; pos++) {
        double sum = 0;
        for (size_t i = 0; i < lat.n_nodes; i++)
            if (lat.nodes[i].pos <= pos && pos < lat.nodes[i].pos + lat.nodes[i].len)
                sum += m[i];
        assert_true(fabs(sum - 1.0) < 1e-12);
    }
    /* Ties keep the first path found (strictly greater replaces). */
    lipi_lattice_reset(&lat, 2);
    assert_int_equal(lipi_lattice_insert(&lat, 0, 1, 1, -1.0), LIPI_OK);
    assert_int_equal(lipi_lattice_insert(&lat, 0, 2, 7, -2.0), LIPI_OK);
    assert_int_equal(lipi_lattice_insert(&lat, 1, 1, 2, -1.0), LIPI_OK);
    assert_int_equal(lipi_lattice_viterbi(&lat, &found), LIPI_OK);
    assert_int_equal(lat.path_len, 1);
    assert_int_equal(lat.nodes[lat.path[0]].id, 7);
    /* No covering path. */
    lipi_lattice_reset(&lat, 2);
    assert_int_equal(lipi_lattice_insert(&lat, 0, 1, 1, -1.0), LIPI_OK);
    assert_int_equal(lipi_lattice_viterbi(&lat, &found), LIPI_OK);
    assert_false(found);
    lipi_lattice_free(&lat);
}

static void test_unigram_picks_the_best_segmentation(void **state)
{
    (void)state;
    /* Hugging Face's own doc example. */
    kit k = kit_from(load_text(
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0], "
        "[\"a\", 0.0], [\"b\", 0.0], [\"c\", 0.0], [\"d\", 0.0], [\"cd\", 1.0], [\"ab\", 2.0], "
        "[\"abc\", 5.0], [\"abcd\", 10.0]]}}"));
    char *t = tokens_of(&k, "abcdacdxx", false);
    assert_string_equal(t, "abcd|a|cd|xx");
    free(t);
    char *ids = ids_of(&k, "abcdacdxx");
    assert_string_equal(ids, "8 1 5 0");
    free(ids);
    kit_free(&k);
}

static void test_bpe_merges_lowest_rank_first(void **state)
{
    (void)state;
    kit k = kit_from(load_text(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"bc\": 3, "
        "\"ab\": 4, \"abc\": 5, \"aa\": 6}, \"merges\": [\"b c\", \"a b\", \"a bc\", \"a a\"]}}"));
    char *t = tokens_of(&k, "abc", false);
    assert_string_equal(t, "abc");
    free(t);
    t = tokens_of(&k, "abab", false);
    assert_string_equal(t, "ab|ab");
    free(t);
    t = tokens_of(&k, "aaa", false); /* leftmost of equal ranks first */
    assert_string_equal(t, "aa|a");
    free(t);
    t = tokens_of(&k, "abcz", false); /* no unk token: z is dropped, as in Hugging Face */
    assert_string_equal(t, "abc");
    free(t);
    kit_free(&k);
}

/* Hugging Face's own added-vocabulary cases (added_vocabulary.rs tests:
 * options_use_cases, test_single_word_is_correct, test_lstrip_unicode_space),
 * with a WordLevel model over WhitespaceSplit behind them. */
static void test_added_tokens_single_word_lstrip_rstrip(void **state)
{
    (void)state;
    kit k = kit_from(load_text(
        "{\"normalizer\": {\"type\": \"Lowercase\"}, \"pre_tokenizer\": {\"type\": "
        "\"WhitespaceSplit\"}, \"added_tokens\": ["
        "{\"id\": 0, \"content\": \"my\", \"lstrip\": true, \"rstrip\": true, \"normalized\": "
        "true},"
        "{\"id\": 1, \"content\": \"name\", \"normalized\": true},"
        "{\"id\": 2, \"content\": \"ony\", \"single_word\": true, \"normalized\": true},"
        "{\"id\": 3, \"content\": \"[CLS]\", \"special\": true},"
        "{\"id\": 4, \"content\": \"[SEP]\", \"special\": true}],"
        "\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"?\", \"vocab\": {\"?\": 5, "
        "\"is\": 6, \"anthony\": 7}}}"));
    char *t = tokens_of(&k, "[CLS] My name is Anthony [SEP]", false);
    assert_string_equal(t, "[CLS]| my |name|is|anthony|[SEP]");
    free(t);
    kit_free(&k);

    k = kit_from(load_text(
        "{\"normalizer\": {\"type\": \"Lowercase\"}, \"pre_tokenizer\": {\"type\": "
        "\"WhitespaceSplit\"}, \"added_tokens\": ["
        "{\"id\": 0, \"content\": \"<mask>\", \"single_word\": true, \"normalized\": true}],"
        "\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"?\", \"vocab\": {\"?\": 1, "
        "\"my\": 2, \"name\": 3, \"a<mask>\": 4, \"<mask>ony\": 5}}}"));
    t = tokens_of(&k, "<mask> My name <mask> A<mask> <mask>ony <mask>", false);
    assert_string_equal(t, "<mask>|my|name|<mask>|a<mask>|<mask>ony|<mask>");
    free(t);
    kit_free(&k);

    k = kit_from(load_text(
        "{\"normalizer\": {\"type\": \"Lowercase\"}, \"pre_tokenizer\": {\"type\": "
        "\"WhitespaceSplit\"}, \"added_tokens\": ["
        "{\"id\": 0, \"content\": \"<mask>\", \"single_word\": true, \"lstrip\": true, "
        "\"rstrip\": true, \"normalized\": true}],"
        "\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"?\", \"vocab\": {\"?\": 1, "
        "\"hi\": 2, \"there\": 3}}}"));
    t = tokens_of(&k, "Hi <mask> there\t<mask>\t<mask>\xe2\x80\x80", false);
    assert_string_equal(t, "hi| <mask> |there|\t<mask>\t|<mask>\xe2\x80\x80");
    free(t);
    kit_free(&k);
}

/* Regex Replace decoders replace empty matches as Rust's regex crate does
 * (reference: tokenizers 0.23.2 on the same tokenizer and ids). */
static void test_regex_replace_decoder_matches_hugging_face(void **state)
{
    (void)state;
    kit k = kit_from(load_text(
        "{\"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}, \"decoder\": {\"type\": "
        "\"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"a+\"}, "
        "\"content\": \"<A>\"}, {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"x*\"}, "
        "\"content\": \"-\"}]}, \"model\": {\"type\": \"WordLevel\", \"unk_token\": \"[UNK]\", "
        "\"vocab\": {\"[UNK]\": 0, \"baab\": 1, \"c\": 2, \"xx\": 3}}}"));
    uint32_t ids[] = {1, 2, 3, 1};
    char out[128];
    size_t len;
    lipi_error err = {0};
    assert_int_equal(lipi_decode(k.s, ids, 4, false, out, sizeof out, &len, &err), LIPI_OK);
    assert_string_equal(out, "-b-<-A->-b--c---b-<-A->-b-");
    kit_free(&k);
}

/* ------------------------------------------------------------------------ */
/* Errors and buffers                                                        */
/* ------------------------------------------------------------------------ */

static void test_invalid_utf8_is_an_error_with_its_offset(void **state)
{
    (void)state;
    const char *paths[] = {FIXTURES "bytelevel_roberta.json", FIXTURES "wordpiece.json"};
    for (size_t i = 0; i < 2; i++) {
        kit k = kit_from(load(paths[i]));
        result *r = result_new();
        lipi_error err = {0};
        assert_int_equal(encode_opt(&k, "ab\xff" "cd", 5, NULL, 0, false, 0, r, &err),
                         LIPI_EFORMAT);
        assert_int_equal(err.offset, 2);
        /* The session still works afterwards. */
        assert_int_equal(encode_opt(&k, "ab", 2, NULL, 0, false, 0, r, &err), LIPI_OK);
        free(r);
        kit_free(&k);
    }
}

static void test_decode_rejects_an_unknown_id(void **state)
{
    (void)state;
    kit k = kit_from(load(FIXTURES "wordpiece.json"));
    uint32_t ids[] = {5, 6, 999999};
    char out[64];
    size_t len;
    lipi_error err = {0};
    assert_int_equal(lipi_decode(k.s, ids, 3, false, out, sizeof out, &len, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "999999"));
    assert_non_null(strstr(err.msg, "number 3"));
    kit_free(&k);
}

static void test_size_query_then_fill(void **state)
{
    (void)state;
    kit k = kit_from(load(FIXTURES "unigram.json"));
    const char *text = "Hello world, नमस्ते दुनिया";
    lipi_encoding q = {0};
    lipi_error err = {0};
    assert_int_equal(lipi_encode(k.s, text, strlen(text), NULL, &q, &err), LIPI_OK);
    assert_true(q.len > 3);
    uint32_t *ids = calloc(q.len, sizeof *ids);
    lipi_span *off = calloc(q.len, sizeof *off);
    lipi_encoding full = {.ids = ids, .offsets = off, .cap = q.len};
    assert_int_equal(lipi_encode(k.s, text, strlen(text), NULL, &full, &err), LIPI_OK);
    assert_int_equal(full.len, q.len);
    /* A short buffer gets the first ids and the full count. */
    uint32_t few[2];
    lipi_encoding part = {.ids = few, .cap = 2};
    assert_int_equal(lipi_encode(k.s, text, strlen(text), NULL, &part, &err), LIPI_OK);
    assert_int_equal(part.len, q.len);
    assert_int_equal(few[0], ids[0]);
    assert_int_equal(few[1], ids[1]);
    /* Offsets lie inside the text, in order. */
    for (size_t i = 0; i < full.len; i++) {
        assert_true(off[i].start <= off[i].end);
        assert_true(off[i].end <= strlen(text));
    }
    /* Decode's size query. */
    size_t need, got;
    assert_int_equal(lipi_decode(k.s, ids, full.len, false, NULL, 0, &need, &err), LIPI_OK);
    char *buf = malloc(need + 1);
    assert_int_equal(lipi_decode(k.s, ids, full.len, false, buf, need + 1, &got, &err), LIPI_OK);
    assert_int_equal(got, need);
    assert_int_equal(strlen(buf), need);
    free(buf);
    free(ids);
    free(off);
    kit_free(&k);
}

static void test_max_length_keeps_the_special_tokens(void **state)
{
    (void)state;
    kit k = kit_from(load(FIXTURES "wordpiece.json"));
    result *r = result_new();
    lipi_error err = {0};
    const char *s = "the quick brown fox jumps over the lazy dog";
    assert_int_equal(encode_opt(&k, s, strlen(s), NULL, 0, true, 5, r, &err), LIPI_OK);
    assert_int_equal(r->e.len, 5);
    assert_int_equal(r->ids[0], 2); /* [CLS] */
    assert_int_equal(r->ids[4], 3); /* [SEP] */
    assert_int_equal(encode_opt(&k, s, strlen(s), NULL, 0, true, 1, r, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "max_length"));
    free(r);
    kit_free(&k);
}

static void test_a_missing_unknown_token_is_an_error(void **state)
{
    (void)state;
    kit k = kit_from(load_text(
        "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0, "
        "\"##b\": 1}}}"));
    result *r = result_new();
    lipi_error err = {0};
    assert_int_equal(encode_opt(&k, "ab", 2, NULL, 0, false, 0, r, &err), LIPI_OK);
    assert_int_equal(r->e.len, 2);
    assert_int_equal(encode_opt(&k, "ax", 2, NULL, 0, false, 0, r, &err), LIPI_EINVAL);
    assert_non_null(strstr(err.msg, "[UNK]"));
    free(r);
    kit_free(&k);
}

static void test_encoder_needs_a_model(void **state)
{
    (void)state;
    lipi_tokenizer *t = NULL;
    assert_int_equal(lipi_tokenizer_new(&t), LIPI_OK);
    lipi_encoder *e = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_encoder_new(t, &e, &err), LIPI_EINVAL);
    assert_null(e);
    assert_non_null(strstr(err.msg, "model"));
    lipi_tokenizer_free(t);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

static lipi_status encode_run(void *ctx, lipi_error *err)
{
    const lipi_tokenizer *tok = ctx;
    const char *text = "[MASK] Hello <mask> नमस्ते 😀 world";
    lipi_encoder *e = NULL;
    lipi_session *s = NULL;
    uint32_t ids[64];
    lipi_span off[64];
    lipi_encoding out = {.ids = ids, .offsets = off, .cap = 64};
    char dec[256];
    size_t dl;
    lipi_status st = lipi_encoder_new(tok, &e, err);
    if (st == LIPI_OK && (st = lipi_session_new(e, &s)) != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    if (st == LIPI_OK)
        st = lipi_encode(s, text, strlen(text), NULL, &out, err);
    if (st == LIPI_OK)
        st = lipi_decode(s, ids, out.len, false, dec, sizeof dec, &dl, err);
    lipi_session_free(s);
    lipi_encoder_free(e);
    return st;
}

/* Every allocation of building an encoder, encoding (with added tokens,
 * normalizer, offsets, post-processor) and decoding fails in turn: each
 * returns LIPI_ENOMEM and leaks nothing, until all succeed. */
static void test_allocation_failures_are_reported(void **state)
{
    (void)state;
    const char *paths[] = {FIXTURES "wordpiece.json", FIXTURES "bytelevel_roberta.json",
                           FIXTURES "unigram_bf.json"};
    for (size_t f = 0; f < 3; f++) {
        lipi_tokenizer *tok = load(paths[f]);
        assert_true(alloc_fail_loop(paths[f], encode_run, tok) > 10);
        lipi_tokenizer_free(tok);
    }
}

/* ------------------------------------------------------------------------ */
/* The CLI                                                                   */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Added tokens numbered as Hugging Face (issue #19, item 4)                  */
/* ------------------------------------------------------------------------ */

/* token_to_id, id_to_token, ids, tokens and decoding of tokenizer.json files
 * whose added tokens are not model tokens, against tokenizers 0.23.2
 * (tests/fixtures/tokenizer_json/make_added_holes.js). */
static void check_added_numbering(const char *name)
{
    char path[256];
    json_error_t je;
    snprintf(path, sizeof path, "tests/fixtures/tokenizer_json/%s.expected.json", name);
    json_t *fx = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!fx)
        fail_msg("%s: %s", path, je.text);
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err = {0};
    assert_int_equal(lipi_tokenizer_open(json_string_value(json_object_get(fx, "tokenizer")),
                                         NULL, &tok, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(fx, "token_to_id"), key, v) {
        uint32_t id = UINT32_MAX;
        assert_true(lipi_tokenizer_token_to_id(tok, key, strlen(key), &id));
        if (id != (uint32_t)json_integer_value(v))
            fail_msg("%s: token_to_id(\"%s\") = %u, Hugging Face %d", name, key, id,
                     (int)json_integer_value(v));
    }
    size_t i;
    json_array_foreach(json_object_get(fx, "id_to_token"), i, v) {
        size_t len = 0;
        const char *t = lipi_tokenizer_id_to_token(tok, (uint32_t)i, &len);
        if (json_is_null(v))
            assert_null(t);
        else if (!t || len != json_string_length(v) || memcmp(t, json_string_value(v), len))
            fail_msg("%s: id_to_token(%zu) = \"%.*s\", Hugging Face \"%s\"", name, i,
                     t ? (int)len : 6, t ? t : "(none)", json_string_value(v));
    }
    json_array_foreach(json_object_get(fx, "encodings"), i, v) {
        const char *text = json_string_value(json_object_get(v, "text"));
        uint32_t ids[64];
        const char *toks[64];
        size_t lens[64];
        lipi_encode_options opt;
        lipi_encode_options_default(enc, &opt);
        opt.add_special_tokens = false;
        lipi_encoding out = {.ids = ids, .tokens = toks, .token_lens = lens, .cap = 64};
        assert_int_equal(lipi_encode(s, text, strlen(text), &opt, &out, &err), LIPI_OK);
        json_t *want = json_object_get(v, "ids"), *wt = json_object_get(v, "tokens");
        assert_int_equal(out.len, json_array_size(want));
        for (size_t k = 0; k < out.len; k++) {
            assert_int_equal(ids[k], json_integer_value(json_array_get(want, k)));
            const char *w = json_string_value(json_array_get(wt, k));
            if (lens[k] != strlen(w) || memcmp(toks[k], w, lens[k]))
                fail_msg("%s: \"%s\" token %zu is \"%.*s\", Hugging Face \"%s\"", name, text, k,
                         (int)lens[k], toks[k], w);
        }
        char buf[256];
        size_t n = 0;
        for (int skip = 0; skip < 2; skip++) {
            assert_int_equal(lipi_decode(s, ids, out.len, skip, buf, sizeof buf, &n, &err),
                             LIPI_OK);
            assert_string_equal(buf, json_string_value(json_object_get(
                                         v, skip ? "decode_skip" : "decode")));
        }
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    json_decref(fx);
}

static void test_added_tokens_outside_the_vocabulary_numbered_as_hugging_face(void **state)
{
    check_added_numbering("added_holes");
    check_added_numbering("wordlevel");
}

#define RUN(args, input) cli_run(args, input, sizeof(input) - 1)

static void test_cli_encode_formats(void **state)
{
    (void)state;
    cli_result r = RUN("encode -t " FIXTURES "wordpiece.json", "Hello world\n\nनमस्ते\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "65 400 80 95 80 86 74 58\n\n153 160 172 150\n");
    cli_result_free(&r);
    r = RUN("encode -t " FIXTURES "wordpiece.json --format tokens --offsets --add-special-tokens",
            "Hello world\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "[CLS] h ##ell ##o w ##o ##r ##l ##d [SEP]\t0-0 0-1 1-4 4-5 6-7 "
                               "7-8 8-9 9-10 10-11 0-0\n");
    cli_result_free(&r);
    r = RUN("encode -t " FIXTURES "bytelevel_roberta.json --format jsonl", "a b\n");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"tokens\": [\"\xc4\xa0" "a\", \"\xc4\xa0" "b\"]"));
    /* RobertaProcessing trims the space off the second token's offsets. */
    assert_non_null(strstr(r.out, "\"offsets\": [[0, 1], [2, 3]]"));
    cli_result_free(&r);
    r = RUN("encode -t " FIXTURES "wordpiece.json --max-length 4 --add-special-tokens",
            "the quick brown fox\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "2 361 83 3\n"); /* [CLS] the q [SEP] */
    cli_result_free(&r);
}

static void test_cli_encode_same_output_for_any_threads(void **state)
{
    (void)state;
    size_t nl;
    json_t *lines = fixture_lines(&nl);
    size_t cap = 1 << 20, len = 0;
    char *input = malloc(cap);
    for (size_t rep = 0; rep < 40; rep++)
        for (size_t i = 0; i < nl; i++) {
            const json_t *l = json_array_get(lines, i);
            const char *s = json_string_value(l);
            for (size_t k = 0; k < json_string_length(l); k++)
                if (s[k] != '\n' && s[k] != '\r' && len + 2 < cap)
                    input[len++] = s[k];
            input[len++] = '\n';
        }
    json_decref(lines);
    cli_result a = cli_run("encode -t " FIXTURES "unigram_bf.json --format jsonl", input, len);
    cli_result b = cli_run("encode -t " FIXTURES "unigram_bf.json --format jsonl --threads 2",
                           input, len);
    assert_int_equal(a.code, 0);
    assert_int_equal(b.code, 0);
    assert_string_equal(a.out, b.out);
    size_t lines_out = 0;
    for (const char *p = a.out; *p; p++)
        lines_out += *p == '\n';
    assert_int_equal(lines_out, 40 * nl);
    cli_result_free(&a);
    cli_result_free(&b);
    free(input);
}

static void test_cli_encode_errors_name_file_and_line(void **state)
{
    (void)state;
    cli_result r = RUN("encode -t " FIXTURES "wordpiece.json", "ok\nbad \xff\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, ":2:"));
    cli_result_free(&r);
    /* The bad byte becomes U+FFFD, which BERT's normalizer drops. */
    r = RUN("encode -t " FIXTURES "wordpiece.json --invalid replace --format tokens",
            "ok\nbad \xff\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "o ##k\nb ##ad\n");
    cli_result_free(&r);
    r = RUN("encode", "x\n");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "-t TOKENIZER"));
    cli_result_free(&r);
    r = RUN("encode -t /nonexistent/tokenizer.json", "x\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "/nonexistent/tokenizer.json"));
    cli_result_free(&r);
    r = RUN("encode -t " FIXTURES "wordpiece.json --format xml", "x\n");
    assert_int_equal(r.code, 2);
    cli_result_free(&r);
}

/* -t takes any format lipi reads (here BERT's vocab.txt, and a folder). */
static void test_cli_encode_opens_other_formats(void **state)
{
    (void)state;
    cli_result r = RUN("encode -t " REF_FIXTURES "/vocab/bert-base-uncased/vocab.txt", "Hello world\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "7592 2088\n");
    cli_result_free(&r);
    r = RUN("encode -t " REF_FIXTURES "/vocab/bert-base-uncased/vocab.txt --no-lowercase --format tokens",
            "Hello world\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "[UNK] world\n");
    cli_result_free(&r);
    r = RUN("decode -t " REF_FIXTURES "/vocab/gpt2", "15496 995\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Hello world\n");
    cli_result_free(&r);
}

static void test_cli_decode(void **state)
{
    (void)state;
    cli_result r = RUN("decode -t " FIXTURES "wordpiece.json", "65 400 80 95 80 86 74 58\n\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello world\n\n");
    cli_result_free(&r);
    r = RUN("decode -t " FIXTURES "wordpiece.json --skip-special-tokens", "2 65 400 80 3\n");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello\n");
    cli_result_free(&r);
    r = RUN("decode -t " FIXTURES "wordpiece.json", "65\n65 12345678\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, ":2:"));
    assert_non_null(strstr(r.err, "12345678"));
    cli_result_free(&r);
    r = RUN("decode -t " FIXTURES "wordpiece.json", "65 x7\n");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "'x7' is not a token id"));
    cli_result_free(&r);
}

static uint64_t rnd_state = 0x2545F4914F6CDD1DULL;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13, rnd_state ^= rnd_state >> 7, rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* The checks of a mapped trie's cells and a mapped pair table take AVX2
 * where there is one: same answers as the portable loops, for good tables
 * and for tables with one bad entry anywhere (the vector part or the
 * tail), of sizes that are and are not whole vectors. */
static void test_mapped_table_checks_agree_with_their_portable_loops(void **state)
{
    (void)state;
    enum { MAX = 1200 };
    uint32_t *unit = malloc(MAX * sizeof *unit);
    int32_t *value = malloc(MAX * sizeof *value);
    uint64_t *pairs = malloc(MAX * sizeof *pairs);
    assert_non_null(unit);
    assert_non_null(value);
    assert_non_null(pairs);
    size_t sizes[] = {258, 259, 263, 264, 265, 300, 511, 512, 1024, 1031, MAX};
    size_t runs = 0, bad_seen = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t size = sizes[si], n = 1 + rnd() % 500;
        for (int trial = 0; trial < 40; trial++) {
            for (size_t i = 0; i < size; i++) {
                bool fin = rnd() & 1;
                unit[i] = (uint32_t)(rnd() % (size - 257)) << 10 | (fin ? 0x200u : 0) |
                          (uint32_t)(rnd() & 0x1ff & ~0x200u);
                value[i] = fin ? (int32_t)(rnd() % n) : -1;
            }
            if (trial) { /* one fault of each kind, at a random cell */
                size_t at = trial < 20 ? rnd() % size : size - 1 - rnd() % 8;
                switch (trial % 5) {
                case 0: unit[at] = (uint32_t)(size - 257) << 10 | (unit[at] & 0x3ff); break;
                case 1: unit[at] |= 0x200, value[at] = (int32_t)n; break;
                case 2: unit[at] |= 0x200, value[at] = -1 - (int32_t)(rnd() % 3); break;
                case 3: unit[at] &= ~0x200u, value[at] = (int32_t)(rnd() % n); break;
                default: unit[at] = 0xffffffffu; break;
                }
            }
            bool want = lipi_datrie32_cells_ok_ref(unit, value, size, n);
            assert_int_equal(lipi_datrie32_cells_ok(unit, value, size, n), want);
            assert_true(want == (trial == 0));
            runs++;
        }
        /* Pairs: merged ids in the low 18 bits, some slots empty. */
        for (int trial = 0; trial < 40; trial++) {
            unsigned bits = 18;
            for (size_t i = 0; i < size; i++)
                pairs[i] = rnd() % 4 == 0 ? UINT64_MAX : (rnd() << bits) | (rnd() % n);
            if (trial % 4 == 1)
                pairs[rnd() % size] = (rnd() << bits) | n;
            else if (trial % 4 == 2)
                pairs[size - 1 - rnd() % 3] = (rnd() << bits) | ((1u << bits) - 1);
            else if (trial % 4 == 3)
                for (size_t i = 0; i < size; i++)
                    pairs[i] = (uint64_t)(i % n); /* no empty slot */
            bool want = lipi_enc_bt_pairs_ok_ref(pairs, size, bits, n);
            assert_int_equal(lipi_enc_bt_pairs_ok(pairs, size, bits, n), want);
            assert_true(want == (trial % 4 == 0));
            bad_seen += !want;
        }
    }
    assert_true(runs > 0 && bad_seen > 0);
    free(unit);
    free(value);
    free(pairs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mapped_table_checks_agree_with_their_portable_loops),
        cmocka_unit_test(test_same_as_hugging_face_wordpiece),
        cmocka_unit_test(test_same_as_hugging_face_unigram),
        cmocka_unit_test(test_same_as_hugging_face_unigram_bf),
        cmocka_unit_test(test_same_as_hugging_face_bpe_bf),
        cmocka_unit_test(test_same_as_hugging_face_bpe_suffix),
        cmocka_unit_test(test_same_as_hugging_face_bpe_prefix),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_roberta),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_seq),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_generic),
        cmocka_unit_test(test_same_as_hugging_face_bytelevel_noregex),
        cmocka_unit_test(test_same_as_hugging_face_wordlevel),
        cmocka_unit_test(test_same_as_hugging_face_gpt2),
        cmocka_unit_test(test_same_as_hugging_face_tj_bpe_byte_fallback),
        cmocka_unit_test(test_same_as_hugging_face_tj_bpe_bytelevel),
        cmocka_unit_test(test_same_as_hugging_face_tj_unigram),
        cmocka_unit_test(test_same_as_hugging_face_tj_wordpiece),
        cmocka_unit_test(test_same_as_hugging_face_tj_wordlevel),
        cmocka_unit_test(test_same_as_hugging_face_tj_added_holes),
        cmocka_unit_test(test_same_as_hugging_face_xlmr_pairs),
        cmocka_unit_test(test_llama_cpp_vectors_gpt2),
        cmocka_unit_test(test_llama_cpp_vectors_bert_bge),
        cmocka_unit_test(test_llama_cpp_vectors_llama_spm),
        cmocka_unit_test(test_wide_merge_table_gives_the_same_ids),
        cmocka_unit_test(test_corpus_lines_same_as_hugging_face_gpt2),
        cmocka_unit_test(test_corpus_lines_same_as_hugging_face_mbert_cased),
        cmocka_unit_test(test_corpus_lines_same_as_hugging_face_bert_uncased),
        cmocka_unit_test(test_corpus_lines_same_as_hugging_face_bert_cased),
        cmocka_unit_test(test_corpus_lines_same_as_hugging_face_bert_chinese),
        cmocka_unit_test(test_decode_of_encode_gives_the_text_back),
        cmocka_unit_test(test_scanning_in_the_encoder_is_the_pre_tokenizer),
        cmocka_unit_test(test_backtracking_bpe_is_the_merge_loop),
        cmocka_unit_test(test_backtracking_walk_checks_its_lengths),
        cmocka_unit_test(test_backtracking_on_merges_is_the_merge_loop),
        cmocka_unit_test(test_merges_out_of_rank_order_keep_the_merge_loop),
        cmocka_unit_test(test_short_words_merge_as_through_the_heap),
        cmocka_unit_test(test_merge_scan_lowest_rank_is_the_plain_loop),
        cmocka_unit_test(test_pair_filter_never_hides_a_merge),
        cmocka_unit_test(test_long_words_in_parts_are_the_merge_loop),
        cmocka_unit_test(test_unreachable_tokens_keep_the_merge_loop),
        cmocka_unit_test(test_batch_is_the_same_on_one_and_two_threads),
        cmocka_unit_test(test_batch_reports_the_first_failing_line),
        cmocka_unit_test(test_trie_finds_the_longest_key),
        cmocka_unit_test(test_byte_level_alphabet_is_gpt2s),
        cmocka_unit_test(test_lattice_viterbi_and_marginals),
        cmocka_unit_test(test_unigram_picks_the_best_segmentation),
        cmocka_unit_test(test_bpe_merges_lowest_rank_first),
        cmocka_unit_test(test_added_tokens_single_word_lstrip_rstrip),
        cmocka_unit_test(test_added_tokens_outside_the_vocabulary_numbered_as_hugging_face),
        cmocka_unit_test(test_regex_replace_decoder_matches_hugging_face),
        cmocka_unit_test(test_invalid_utf8_is_an_error_with_its_offset),
        cmocka_unit_test(test_decode_rejects_an_unknown_id),
        cmocka_unit_test(test_size_query_then_fill),
        cmocka_unit_test(test_max_length_keeps_the_special_tokens),
        cmocka_unit_test(test_a_missing_unknown_token_is_an_error),
        cmocka_unit_test(test_encoder_needs_a_model),
        cmocka_unit_test(test_allocation_failures_are_reported),
        cmocka_unit_test(test_cli_encode_formats),
        cmocka_unit_test(test_cli_encode_same_output_for_any_threads),
        cmocka_unit_test(test_cli_encode_errors_name_file_and_line),
        cmocka_unit_test(test_cli_encode_opens_other_formats),
        cmocka_unit_test(test_cli_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

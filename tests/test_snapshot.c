/* Snapshots of opened tokenizers (tokenizer/snapshot.c): a tokenizer read
 * back from its snapshot is the tokenizer a fresh open builds (the same
 * tokenizer.json text, the same ids) for every reader that writes one; a
 * truncated, flipped, foreign or stale snapshot is never used: the
 * tokenizer is built from its files and the snapshot written again. Each
 * test works in its own temporary LIPI_CACHE_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "encoder/encoder.h"
#include "tests/alloc_fail.h"
#include "tests/cli_run.h"
#include "tests/model_dir.h"
#include "tests/refdata.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_layout.h"

static const char *const texts[] = {
    "hello, नमस्ते world! The quick brown fox jumps over the lazy dog's back, 1234567 times",
    "हिन्दी में लिखा गया वाक्य और தமிழ் உரை, বাংলা লেখা [MASK] <|endoftext|>",
    "    indented\tcode(x) => x ** 2; // 🙂🙂 ünïcödé ab abab",
};

static char cache_dir[64], work_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(cache_dir, sizeof cache_dir, "/tmp/lipi-snapshot-XXXXXX");
    snprintf(work_dir, sizeof work_dir, "/tmp/lipi-snapshot-src-XXXXXX");
    if (!mkdtemp(cache_dir) || !mkdtemp(work_dir))
        return -1;
    setenv("LIPI_CACHE_DIR", cache_dir, 1);
    unsetenv("LIPI_CACHE");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    md_empty_dir(cache_dir);
    md_empty_dir(work_dir);
    rmdir(cache_dir);
    rmdir(work_dir);
    unsetenv("LIPI_CACHE_DIR");
    return 0;
}

static lipi_tokenizer *open_tok(const char *path, lipi_flag cache)
{
    lipi_open_options o = {.table_cache = cache};
    lipi_tokenizer *t = NULL;
    lipi_error err;
    if (lipi_tokenizer_open(path, &o, &t, &err) != LIPI_OK)
        fail_msg("open %s: %s", path, err.msg);
    return t;
}

/* What a tokenizer is, as one string (caller frees): its tokenizer.json
 * text (or the status of the failure to write one) and the ids of every
 * text. */
static char *fingerprint(const lipi_tokenizer *tok, const char *path)
{
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    char *json = NULL;
    size_t json_len = 0;
    uint32_t ids[512];
    lipi_status st = lipi_tokenizer_to_json(tok, &json, &json_len, NULL);
    size_t cap = json_len + (1 << 16), len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    if (st == LIPI_OK) {
        memcpy(out, json, json_len);
        len = json_len;
    } else {
        len = (size_t)snprintf(out, cap, "to_json status %d", (int)st);
    }
    lipi_free(json);
    if (lipi_encoder_new(tok, &enc, &err) != LIPI_OK)
        fail_msg("encoder %s: %s", path, err.msg);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        lipi_encoding e = {.ids = ids, .cap = 512};
        if (lipi_encode(s, texts[t], strlen(texts[t]), NULL, &e, &err) != LIPI_OK)
            fail_msg("encode %s: %s", path, err.msg);
        len += (size_t)snprintf(out + len, cap - len, "\n");
        for (size_t i = 0; i < e.len; i++)
            len += (size_t)snprintf(out + len, cap - len, "%u ", ids[i]);
        assert_true(len < cap);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    return out;
}

static char *fingerprint_of(const char *path, lipi_flag cache)
{
    lipi_tokenizer *t = open_tok(path, cache);
    char *f = fingerprint(t, path);
    lipi_tokenizer_free(t);
    return f;
}

/* The snapshot files in the cache folder: their count, and the name of
 * the first in *name (when not NULL). */
static size_t snapshots(char name[320])
{
    size_t n = 0;
    DIR *d = opendir(cache_dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "snapshot-", 9) == 0) {
            if (n++ == 0 && name)
                snprintf(name, 320, "%s/%s", cache_dir, e->d_name);
        }
    closedir(d);
    return n;
}

static ino_t inode_of(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return sb.st_ino;
}

/* A GPT-2 vocab.json + merges.txt pair in work_dir; the vocab.json path. */
static const char *gpt2_files(void)
{
    static char vj[128];
    char mt[128];
    static const char vocab[] = "{\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3, \"\\u0120a\": 4, "
                                "\"\\u0120ab\": 5, \"<|endoftext|>\": 6}";
    static const char merges[] = "#version: 0.2\na b\n\xc4\xa0 a\n\xc4\xa0" "a b\n";
    snprintf(vj, sizeof vj, "%s/vocab.json", work_dir);
    snprintf(mt, sizeof mt, "%s/merges.txt", work_dir);
    md_write(vj, vocab, sizeof vocab - 1);
    md_write(mt, merges, sizeof merges - 1);
    return vj;
}

/* Fresh, written and read back: one fingerprint, and the second open
 * reads the snapshot (the file is not written again). */
static void check_round_trip(const char *path)
{
    char name[320];
    md_empty_dir(cache_dir);
    char *plain = fingerprint_of(path, LIPI_FLAG_OFF);
    assert_int_equal(snapshots(NULL), 0);
    char *first = fingerprint_of(path, LIPI_FLAG_ON);
    if (snapshots(name) != 1)
        fail_msg("%s: %zu snapshots written, expected 1", path, snapshots(NULL));
    ino_t ino = inode_of(name);
    lipi_tokenizer *t = open_tok(path, LIPI_FLAG_ON);
    assert_true(t->snapshot_key[0] != '\0');
    assert_non_null(t->model.mapped); /* read from the snapshot */
    char *again = fingerprint(t, path);
    lipi_tokenizer_free(t);
    if (strcmp(plain, first) != 0)
        fail_msg("%s: the first open with the cache differs from a plain open", path);
    if (strcmp(plain, again) != 0)
        fail_msg("%s: the tokenizer read from its snapshot differs from a plain open", path);
    assert_int_equal(inode_of(name), ino);
    free(plain);
    free(first);
    free(again);
}

static void test_a_snapshot_is_the_tokenizer_a_fresh_open_builds(void **state)
{
    (void)state;
    static const char *const committed[] = {
        "tests/fixtures/tokenizer_json/wordpiece.json",
        "tests/fixtures/tokenizer_json/added_holes.json",
        "tests/fixtures/tokenizer_json/bpe_byte_fallback.json",
        "tests/fixtures/tokenizer_json/bpe_bytelevel.json",
        "tests/fixtures/tokenizer_json/unigram.json",
        "tests/fixtures/tokenizer_json/wordlevel.json",
        "tests/fixtures/readers/unigram_user.model",
        "tests/fixtures/readers/bpe_bytes.model",
        "tests/fixtures/shared/vectors/sentencepiece/test_model.model",
        "tests/fixtures/shared/vocab/bert-base-cased/vocab.txt",
        "data/vocab/tiktoken/r50k_base.tiktoken",
        "data/vocab/tiktoken/cl100k_base.tiktoken",
        "data/vocab/bert-base-multilingual-cased",
        "data/vocab/lipi-indic-64k",
    };
    for (size_t i = 0; i < sizeof committed / sizeof *committed; i++) {
        struct stat sb;
        if (stat(committed[i], &sb) != 0)
            fail_msg("missing committed tokenizer %s", committed[i]);
        check_round_trip(committed[i]);
    }
    check_round_trip(gpt2_files());
    /* A named encoding found in the data folders. */
    check_round_trip("p50k_base");
}

static void test_shared_tokenizers_round_trip_too(void **state)
{
    (void)state;
    static const char *const shared[] = {
        "vocab/gpt2/tokenizer.json",
        "vocab/laser100k-spm/laser_100k.model",
        "vocab/bert-base-uncased/vocab.txt",
        "vocab/tiktoken/o200k_base.tiktoken",
        "vectors/llama.cpp/ggml-vocab-llama-spm.gguf",
        "vectors/llama.cpp/ggml-vocab-gpt-2.gguf",
        "vectors/llama.cpp/ggml-vocab-bert-bge.gguf",
    };
    size_t done = 0;
    for (size_t i = 0; i < sizeof shared / sizeof *shared; i++) {
        const char *p = ref_shared(shared[i]);
        if (!p)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s", p);
        check_round_trip(path);
        done++;
    }
    if (!done)
        SKIP_BECAUSE("%s", ref_missing("GPT-2 tokenizer.json, laser_100k, bert-base-uncased"));
}

/* A GGUF snapshot is keyed by the file's metadata, not its tensors (model
 * files run to gigabytes): bytes appended after the metadata reuse the
 * snapshot; a changed score in it is another snapshot. */
static void test_a_gguf_snapshot_is_keyed_by_its_metadata(void **state)
{
    (void)state;
    const char *src = ref_shared("vectors/llama.cpp/ggml-vocab-llama-spm.gguf");
    if (!src)
        SKIP_BECAUSE("%s", ref_missing("ggml-vocab-llama-spm.gguf"));
    size_t len;
    char *data = cli_slurp(src, &len), path[128], name[320];
    assert_non_null(data);
    snprintf(path, sizeof path, "%s/model.gguf", work_dir);
    md_write(path, data, len);
    md_empty_dir(cache_dir);
    char *first = fingerprint_of(path, LIPI_FLAG_ON);
    assert_int_equal(snapshots(name), 1);
    ino_t ino = inode_of(name);

    char *grown = malloc(len + 4096);
    assert_non_null(grown);
    memcpy(grown, data, len);
    memset(grown + len, 0x5a, 4096); /* "tensor data" */
    md_write(path, grown, len + 4096);
    lipi_tokenizer *t = open_tok(path, LIPI_FLAG_ON);
    assert_non_null(t->model.mapped); /* read from the snapshot */
    char *again = fingerprint(t, path);
    lipi_tokenizer_free(t);
    assert_string_equal(first, again);
    assert_int_equal(snapshots(NULL), 1);
    assert_int_equal(inode_of(name), ino);

    /* The first score: after the key, its type (u32), the element type
     * (u32) and the count (u64). */
    const char *key = "tokenizer.ggml.scores";
    char *at = memmem(grown, len, key, strlen(key));
    assert_non_null(at);
    at[strlen(key) + 16] ^= 0x01;
    md_write(path, grown, len + 4096);
    lipi_tokenizer_free(open_tok(path, LIPI_FLAG_ON));
    assert_int_equal(snapshots(NULL), 2);
    free(first);
    free(again);
    free(grown);
    free(data);
}

/* In an empty cache: the tokenizer.json text of a plain open of path
 * (*fresh), then the snapshot an open with the cache writes: its file name
 * and its bytes (returned, *len of them). */
static char *fresh_and_snapshot(const char *path, char **fresh, char name[320], size_t *len)
{
    md_empty_dir(cache_dir);
    lipi_tokenizer *t = open_tok(path, LIPI_FLAG_OFF);
    *fresh = NULL;
    assert_int_equal(lipi_tokenizer_to_json(t, fresh, NULL, NULL), LIPI_OK);
    lipi_tokenizer_free(t);
    lipi_tokenizer_free(open_tok(path, LIPI_FLAG_ON));
    assert_int_equal(snapshots(name), 1);
    char *good = cli_slurp(name, len);
    assert_non_null(good);
    return good;
}

/* Writes bad[0..len) over the snapshot `name`, opens `path` with the
 * cache, and checks that the tokenizer is the fresh one and that a good
 * snapshot was renamed into place. */
static void check_rejected(const char *path, const char *name, const char *bad, size_t len,
                           const char *fresh, const char *good, size_t good_len,
                           const char *what, size_t at)
{
    md_write(name, bad, len);
    ino_t ino = inode_of(name);
    lipi_tokenizer *t = open_tok(path, LIPI_FLAG_ON);
    char *json = NULL;
    size_t json_len = 0;
    assert_int_equal(lipi_tokenizer_to_json(t, &json, &json_len, NULL), LIPI_OK);
    if (json_len != strlen(fresh) || memcmp(json, fresh, json_len) != 0)
        fail_msg("%s, snapshot %s at %zu: not the fresh tokenizer", path, what, at);
    lipi_free(json);
    lipi_tokenizer_free(t);
    size_t now_len;
    char *now = cli_slurp(name, &now_len);
    assert_non_null(now);
    if (inode_of(name) == ino || now_len != good_len || memcmp(now, good, good_len) != 0)
        fail_msg("%s, snapshot %s at %zu: not rebuilt", path, what, at);
    free(now);
}

static void test_damaged_snapshots_are_rejected_and_rebuilt(void **state)
{
    (void)state;
    /* Every length and byte of the two small snapshots (2.1-2.5 KB); of
     * the 33 KB Unigram one, the first 512 and every 61st after. */
    static const char *const paths[] = {
        "tests/fixtures/tokenizer_json/wordpiece.json", /* post-processor, added tokens */
        "tests/fixtures/tokenizer_json/bpe_byte_fallback.json", /* merges, pairs */
        "tests/fixtures/readers/unigram_user.model",     /* scores */
    };
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        const char *path = paths[k];
        size_t stride = k == 2 ? 61 : 1;
        char name[320], *fresh;
        size_t len;
        char *good = fresh_and_snapshot(path, &fresh, name, &len);
        assert_true(len > 112 + 16 * 8);
        char *bad = malloc(len);
        assert_non_null(bad);
        /* Every truncation. */
        for (size_t n = 0; n < len; n += n < 512 ? 1 : stride)
            check_rejected(path, name, good, n, fresh, good, len, "truncated", n);
        /* One longer: a stray byte after the payload. */
        memcpy(bad, good, len);
        char *longer = malloc(len + 8);
        assert_non_null(longer);
        memcpy(longer, good, len);
        memset(longer + len, 0, 8);
        check_rejected(path, name, longer, len + 8, fresh, good, len, "lengthened", len);
        free(longer);
        /* Every byte flipped (header and payload: the checksum or the
         * header check catches each). */
        for (size_t i = 0; i < len; i += i < 512 ? 1 : stride) {
            memcpy(bad, good, len);
            bad[i] ^= 0x41;
            check_rejected(path, name, bad, len, fresh, good, len, "flipped", i);
        }
        free(bad);
        free(good);
        lipi_free(fresh);
    }
}

/* A payload changed and its checksum fixed (as a doctored file would be):
 * whatever the bytes say, opening never crashes; a word set to 0xfe bytes
 * (an offset, count or index past any array) is rejected outright. */
static void test_doctored_snapshots_never_crash(void **state)
{
    (void)state;
    const char *path = "tests/fixtures/tokenizer_json/bpe_byte_fallback.json";
    char name[320], *fresh;
    size_t len;
    char *good = fresh_and_snapshot(path, &fresh, name, &len);
    lipi_tokenizer *t;
    char *bad = malloc(len);
    assert_non_null(bad);
    for (size_t w = 112; w + 8 <= len; w += 8) {
        memcpy(bad, good, len);
        memset(bad + w, 0xfe, 8);
        uint64_t sum = lipi_tabcache_sum(bad + 112, len - 112);
        for (int b = 0; b < 8; b++)
            bad[104 + b] = (char)(sum >> (8 * b));
        md_write(name, bad, len);
        t = open_tok(path, LIPI_FLAG_ON);
        char *fp = fingerprint(t, path);
        free(fp);
        lipi_tokenizer_free(t);
        /* The counts (15 words since format 2): each but the two free
         * numbers (max_input_chars_per_word and the dropout's bits) is then
         * out of range. */
        size_t word = (w - 112) / 8;
        if (word < 15 && word != 4 && word != 5) {
            size_t now_len;
            char *now = cli_slurp(name, &now_len);
            assert_non_null(now);
            if (now_len != len || memcmp(now, good, len) != 0)
                fail_msg("count word %zu set to 0xfe...: snapshot used", word);
            free(now);
        }
        md_write(name, good, len);
    }
    free(bad);
    free(good);
    lipi_free(fresh);
}

/* Another tokenizer's snapshot under this one's name (its header names
 * the other key), and a source file changed after its snapshot was
 * written (another key, so another snapshot). */
static void test_foreign_and_stale_snapshots_are_not_used(void **state)
{
    (void)state;
    char src[128], name[320], other[320];
    size_t len, olen;
    char *text = cli_slurp("tests/fixtures/tokenizer_json/wordpiece.json", &len);
    assert_non_null(text);
    snprintf(src, sizeof src, "%s/tokenizer.json", work_dir);
    md_write(src, text, len);
    lipi_tokenizer_free(open_tok(src, LIPI_FLAG_ON));
    assert_int_equal(snapshots(name), 1);

    /* Stale: "hello" becomes "hallo"; the old snapshot stays unused. */
    char *hello = strstr(text, "\"hello\"");
    assert_non_null(hello);
    hello[2] = 'a';
    md_write(src, text, len);
    char *plain = fingerprint_of(src, LIPI_FLAG_OFF);
    char *cached = fingerprint_of(src, LIPI_FLAG_ON);
    assert_string_equal(plain, cached);
    assert_int_equal(snapshots(NULL), 2);
    free(cached);
    cached = fingerprint_of(src, LIPI_FLAG_ON); /* now from its own snapshot */
    assert_string_equal(plain, cached);
    free(cached);

    /* Foreign: the first snapshot copied over the second's name. */
    md_empty_dir(cache_dir);
    lipi_tokenizer_free(open_tok("tests/fixtures/tokenizer_json/unigram.json", LIPI_FLAG_ON));
    assert_int_equal(snapshots(other), 1);
    char *foreign = cli_slurp(other, &olen);
    assert_non_null(foreign);
    lipi_tokenizer_free(open_tok(src, LIPI_FLAG_ON));
    assert_int_equal(snapshots(NULL), 2);
    DIR *d = opendir(cache_dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
        if (strncmp(e->d_name, "snapshot-", 9) == 0 && strcmp(p, other) != 0)
            md_write(p, foreign, olen);
    }
    closedir(d);
    cached = fingerprint_of(src, LIPI_FLAG_ON);
    assert_string_equal(plain, cached);
    free(cached);
    free(plain);
    free(foreign);
    free(text);
}

/* The files in the cache folder whose names start with prefix: their
 * count, and the path of the first in *name (when not NULL). */
static size_t cache_files_of(const char *prefix, char name[320])
{
    size_t n = 0, k = strlen(prefix);
    DIR *d = opendir(cache_dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, k) == 0 && n++ == 0 && name)
            snprintf(name, 320, "%s/%s", cache_dir, e->d_name);
    closedir(d);
    return n;
}

/* The ids of "!\"" (one line) from the rank file at path. */
static char *bang_quote_ids(const char *path, lipi_flag cache)
{
    lipi_tokenizer *t = open_tok(path, cache);
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    uint32_t ids[8];
    lipi_encoding e = {.ids = ids, .cap = 8};
    char *out = malloc(64);
    assert_non_null(out);
    assert_int_equal(lipi_encoder_new(t, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    assert_int_equal(lipi_encode(s, "!\"", 2, NULL, &e, &err), LIPI_OK);
    assert_int_equal(e.len, 2);
    snprintf(out, 64, "%u %u", ids[0], ids[1]);
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(t);
    return out;
}

/* A rank file's snapshot is found by the file's stat identity, through a
 * record of its SHA-256 (tabcache.c), without reading the file: recorded
 * once the file's times are settled, never while they are fresh; a file
 * changed in place (same size, its mtime set back) is another identity,
 * and a damaged record is ignored and written again. */
static void test_a_rank_file_is_known_by_its_stat_identity(void **state)
{
    (void)state;
    char ranks[128], meta[128], rec[320];
    size_t len;
    char *text = cli_slurp("data/vocab/tiktoken/r50k_base.tiktoken", &len);
    assert_non_null(text);
    assert_memory_equal(text, "IQ== 0\nIg== 1\n", 14); /* '!' then '"' */
    snprintf(ranks, sizeof ranks, "%s/mini.tiktoken", work_dir);
    snprintf(meta, sizeof meta, "%s/mini.meta.json", work_dir);
    static const char pat[] = "{\"pat_str\": \".\"}"; /* a piece a character */
    md_write(meta, pat, sizeof pat - 1);
    md_write(ranks, text, len);

    /* Fresh times (the default 2 s): no record, the file is hashed. */
    char *plain = bang_quote_ids(ranks, LIPI_FLAG_OFF);
    assert_string_equal(plain, "0 1");
    char *cached = bang_quote_ids(ranks, LIPI_FLAG_ON);
    assert_string_equal(cached, plain);
    free(cached);
    assert_int_equal(cache_files_of("digest-", NULL), 0);
    assert_int_equal(snapshots(NULL), 1);

    /* Settled (the test's 50 ms, slept): recorded on the next open, then
     * used, the snapshot the same. */
    long long settle = lipi_tabcache_settle_ns;
    lipi_tabcache_settle_ns = 50000000LL;
    struct timespec nap = {0, 120000000L};
    nanosleep(&nap, NULL);
    lipi_tokenizer *t = open_tok(ranks, LIPI_FLAG_ON);
    char key[65];
    memcpy(key, t->snapshot_key, 65);
    lipi_tokenizer_free(t);
    assert_int_equal(cache_files_of("digest-", rec), 1);
    size_t rec_len;
    char *good_rec = cli_slurp(rec, &rec_len);
    assert_non_null(good_rec);
    ino_t rec_ino = inode_of(rec);
    t = open_tok(ranks, LIPI_FLAG_ON);
    assert_string_equal(t->snapshot_key, key);
    assert_non_null(t->model.mapped);
    lipi_tokenizer_free(t);
    assert_int_equal(inode_of(rec), rec_ino); /* read, not written again */
    assert_int_equal(snapshots(NULL), 1);

    /* A damaged record: ignored, the file hashed, the record rewritten. */
    char *bad = malloc(rec_len);
    assert_non_null(bad);
    memcpy(bad, good_rec, rec_len);
    bad[112 + 5] ^= 0x11;
    md_write(rec, bad, rec_len);
    cached = bang_quote_ids(ranks, LIPI_FLAG_ON);
    assert_string_equal(cached, plain);
    free(cached);
    size_t now_len;
    char *now = cli_slurp(rec, &now_len);
    assert_non_null(now);
    assert_int_equal(now_len, rec_len);
    assert_memory_equal(now, good_rec, rec_len);
    free(now);
    free(bad);

    /* Changed in place after the nap: '!' and '"' swap ranks, the size
     * stays and the mtime is set back; the change time moved on. */
    struct stat before;
    assert_int_equal(stat(ranks, &before), 0);
    nanosleep(&nap, NULL);
    memcpy(text, "Ig== 0\nIQ== 1\n", 14);
    int fd = open(ranks, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, text, 14, 0), 14);
    close(fd);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, ranks, times, 0), 0);
    char *swapped = bang_quote_ids(ranks, LIPI_FLAG_OFF);
    assert_string_equal(swapped, "1 0");
    cached = bang_quote_ids(ranks, LIPI_FLAG_ON);
    assert_string_equal(cached, swapped);
    free(cached);
    assert_int_equal(snapshots(NULL), 2);
    t = open_tok(ranks, LIPI_FLAG_ON);
    assert_true(strcmp(t->snapshot_key, key) != 0);
    lipi_tokenizer_free(t);

    lipi_tabcache_settle_ns = settle;
    free(swapped);
    free(good_rec);
    free(plain);
    free(text);
}

/* Opens ctx with the cache on (its snapshot there). */
static lipi_status open_only(void *ctx, lipi_error *err)
{
    lipi_open_options o = {.table_cache = LIPI_FLAG_ON};
    lipi_tokenizer *tok = NULL;
    lipi_status st = lipi_tokenizer_open(ctx, &o, &tok, err);
    lipi_tokenizer_free(tok);
    return st;
}

/* Reading a snapshot fails only with LIPI_ENOMEM (or falls back to
 * building) and leaks nothing, whichever allocation fails. */
static void test_reading_a_snapshot_survives_allocation_failures(void **state)
{
    (void)state;
    const char *path = "tests/fixtures/tokenizer_json/wordpiece.json";
    lipi_tokenizer_free(open_tok(path, LIPI_FLAG_ON));
    assert_int_equal(snapshots(NULL), 1);
    assert_true(alloc_fail_loop(path, open_only, (void *)path) > 10);
}

/* The check of mapped ids (map slots, merges) takes AVX2 where there is
 * one: the same answers and skip counts as the portable loop, for ids
 * near n, at or above 2^31 (which a signed compare would pass), the skip
 * value anywhere, bad ids in the vector part or the tail. */
static void test_id_checks_agree_with_their_portable_loop(void **state)
{
    (void)state;
    enum { MAX = 700 };
    uint32_t a[MAX];
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    static const uint64_t ns[] = {0, 1, 7, 1000, 199998, 0x7fffffffu, 0x80000001u, 0xffffffffu,
                                  0x100000000ULL};
    static const uint32_t skips[] = {UINT32_MAX, 0, 5};
    size_t bad_seen = 0;
    for (size_t count = 0; count <= MAX; count += count < 80 ? 1 : 37)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t si = 0; si < 3; si++)
                for (int trial = 0; trial < 4; trial++) {
                    uint64_t n = ns[ni];
                    for (size_t i = 0; i < count; i++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        a[i] = x % 5 == 0 ? skips[si] : n ? (uint32_t)(x % n) : 0;
                    }
                    if (count && trial) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        size_t at = trial == 1 ? x % count : count - 1 - x % (count < 8 ? count : 8);
                        a[at] = trial == 3 ? 0x80000000u | (uint32_t)x : (uint32_t)(n <= UINT32_MAX ? n : 0);
                    }
                    size_t got_skips, want_skips;
                    bool want = lipi_u32_all_below_ref(a, count, n, skips[si], &want_skips);
                    bool got = lipi_u32_all_below(a, count, n, skips[si], &got_skips);
                    if (got != want || got_skips != want_skips)
                        fail_msg("%zu ids below %llu, skip %u: %d (%zu skips), want %d (%zu)",
                                 count, (unsigned long long)n, skips[si], got, got_skips, want,
                                 want_skips);
                    bad_seen += !want;
                }
    assert_true(bad_seen > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_checks_agree_with_their_portable_loop),
        cmocka_unit_test_setup_teardown(test_a_snapshot_is_the_tokenizer_a_fresh_open_builds,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_tokenizers_round_trip_too, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_gguf_snapshot_is_keyed_by_its_metadata, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_damaged_snapshots_are_rejected_and_rebuilt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_doctored_snapshots_never_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_rank_file_is_known_by_its_stat_identity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_foreign_and_stale_snapshots_are_not_used, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reading_a_snapshot_survives_allocation_failures,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

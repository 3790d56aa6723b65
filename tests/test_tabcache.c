/* The table cache (tokenizer/tabcache.c; the snapshots it also holds have
 * their own tests, test_snapshot.c): tokenizers opened with it give
 * the ids they give without it, whether the cache is empty, holds their
 * tables, or holds a truncated, corrupt or doctored file (which is ignored
 * and replaced); a folder that cannot be written is no error; LIPI_CACHE=0
 * and the open option turn it off. Each test works in its own temporary
 * LIPI_CACHE_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "encoder/encoder.h"
#include "tests/alloc_fail.h"
#include "tests/cli_run.h"
#include "tests/model_dir.h"
#include "tests/refdata.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_layout.h"

/* One tokenizer of each kind whose tables the cache keeps. */
static const char *const tokenizers[] = {
    "data/vocab/tiktoken/r50k_base.tiktoken",            /* backtrack, tiktoken-merges */
    "data/vocab/bert-base-multilingual-cased/vocab.txt", /* wordpiece */
    "tests/fixtures/readers/unigram_user.model",         /* unigram */
    REF_FIXTURES "/vocab/laser100k-spm/laser_100k.model", /* unigram, 100k pieces */
    "data/vocab/tiktoken/cl100k_base.tiktoken",
    "tests/fixtures/encoder/bytelevel_roberta.json",     /* backtrack-hf */
};

static const char *const texts[] = {
    "The quick brown fox jumps over the lazy dog's back, 1234567 times!",
    "हिन्दी में लिखा गया वाक्य और தமிழ் உரை, বাংলা লেখা",
    "    indented\tcode(x) => x ** 2; // 🙂🙂 ünïcödé",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

static char cache_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(cache_dir, sizeof cache_dir, "%s/lipi-tabcache-XXXXXX", "/tmp");
    if (!mkdtemp(cache_dir))
        return -1;
    setenv("LIPI_CACHE_DIR", cache_dir, 1);
    unsetenv("LIPI_CACHE");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    md_empty_dir(cache_dir);
    rmdir(cache_dir);
    unsetenv("LIPI_CACHE_DIR");
    return 0;
}

/* The ids of every text, one line each, as one string (caller frees). */
static char *ids_of(const char *path, lipi_flag cache)
{
    lipi_open_options o = {.table_cache = cache};
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    uint32_t ids[512];
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    if (lipi_tokenizer_open(path, &o, &tok, &err) != LIPI_OK)
        fail_msg("open %s: %s", path, err.msg);
    if (lipi_encoder_new(tok, &enc, &err) != LIPI_OK)
        fail_msg("encoder %s: %s", path, err.msg);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        lipi_encoding e = {.ids = ids, .cap = 512};
        if (lipi_encode(s, texts[t], strlen(texts[t]), NULL, &e, &err) != LIPI_OK)
            fail_msg("encode %s: %s", path, err.msg);
        assert_true(e.len <= e.cap);
        for (size_t i = 0; i < e.len; i++)
            len += (size_t)snprintf(out + len, cap - len, "%u ", ids[i]);
        len += (size_t)snprintf(out + len, cap - len, "\n");
        assert_true(len < cap);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return out;
}

/* The cache files (names, sorted by nothing), up to MAX_FILES. */
#define MAX_FILES 32
static size_t cache_files(char names[MAX_FILES][320])
{
    size_t n = 0;
    DIR *d = opendir(cache_dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_FILES;)
        if (e->d_name[0] != '.')
            snprintf(names[n++], 320, "%s/%s", cache_dir, e->d_name);
    closedir(d);
    return n;
}

/* Removes the snapshots (tokenizer/snapshot.c) from the cache folder. */
static void drop_snapshots(void)
{
    char names[MAX_FILES][320];
    size_t n = cache_files(names);
    for (size_t i = 0; i < n; i++)
        if (strstr(names[i], "/snapshot-"))
            unlink(names[i]);
}

static ino_t inode_of(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return sb.st_ino;
}

static void test_ids_are_the_same_with_and_without_the_cache(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof tokenizers / sizeof *tokenizers; k++) {
        const char *path = tokenizers[k];
        if (access(path, R_OK) != 0)
            fail_msg("missing committed tokenizer %s", path);
        char names[MAX_FILES][320];
        size_t before = cache_files(names);
        char *plain = ids_of(path, LIPI_FLAG_OFF);
        assert_int_equal(cache_files(names), before); /* OFF writes nothing */
        char *first = ids_of(path, LIPI_FLAG_AUTO);  /* builds and stores */
        size_t after = cache_files(names);
        assert_true(after > before);
        ino_t ino[MAX_FILES];
        for (size_t f = 0; f < after; f++)
            ino[f] = inode_of(names[f]);
        char *again = ids_of(path, LIPI_FLAG_ON); /* reads */
        assert_string_equal(plain, first);
        assert_string_equal(plain, again);
        /* Read, not rebuilt: a rejected file would have been replaced. */
        assert_int_equal(cache_files(names), after);
        for (size_t f = 0; f < after; f++)
            assert_int_equal(inode_of(names[f]), ino[f]);
        free(plain);
        free(first);
        free(again);
    }
}

enum { TRUNCATE, FLIP, HEADER, EMPTY, DOCTOR, N_DAMAGE };

static void test_damaged_cache_files_are_ignored_and_replaced(void **state)
{
    (void)state;
    static const char *const what[] = {"truncated", "flipped byte", "bad header", "empty",
                                       "doctored with a valid checksum"};
    static const size_t damaged[] = {0, 1, 2, 5};
    for (size_t i = 0; i < sizeof damaged / sizeof *damaged; i++) {
        const char *path = tokenizers[damaged[i]];
        md_empty_dir(cache_dir); /* only this tokenizer's files below */
        char *plain = ids_of(path, LIPI_FLAG_OFF);
        char *first = ids_of(path, LIPI_FLAG_ON);
        assert_string_equal(plain, first);
        char names[MAX_FILES][320];
        size_t n = cache_files(names);
        assert_true(n > 0);
        for (size_t f = 0; f < n; f++) {
            size_t len;
            char *good = cli_slurp(names[f], &len);
            assert_non_null(good);
            assert_true(len > 112 + 16);
            for (int d = 0; d < N_DAMAGE; d++) {
                char *bad = malloc(len);
                size_t bad_len = len;
                memcpy(bad, good, len);
                if (d == TRUNCATE)
                    bad_len = 112 + (len - 112) / 2;
                else if (d == FLIP)
                    bad[112 + (len - 112) / 3] ^= 0x5a;
                else if (d == HEADER)
                    bad[3] ^= 1;
                else if (d == EMPTY)
                    bad_len = 0;
                else {
                    /* The payload's first half but its first word set to
                     * 0xfe bytes (an index, a size or a base past any
                     * table), the checksum fixed. */
                    memset(bad + 112 + 8, 0xfe, (len - 112) / 2 - 8);
                    uint64_t sum = lipi_tabcache_sum(bad + 112, len - 112);
                    for (int b = 0; b < 8; b++)
                        bad[104 + b] = (char)(sum >> (8 * b));
                }
                md_write(names[f], bad, bad_len);
                /* With its snapshot there, the tokenizer's own files (the
                 * tiktoken merges) are not read: drop it. */
                if (!strstr(names[f], "/snapshot-"))
                    drop_snapshots();
                ino_t ino = inode_of(names[f]);
                char *ids = ids_of(path, LIPI_FLAG_ON);
                if (strcmp(ids, plain) != 0)
                    fail_msg("%s, %s file %s: ids differ", path, what[d], names[f]);
                /* Replaced by a good copy (a new file renamed over it). */
                size_t now_len;
                char *now = cli_slurp(names[f], &now_len);
                assert_non_null(now);
                if (inode_of(names[f]) == ino || now_len != len || memcmp(now, good, len) != 0)
                    fail_msg("%s, %s file %s: not replaced by the tables", path, what[d],
                             names[f]);
                free(now);
                free(ids);
                free(bad);
            }
            free(good);
        }
        free(plain);
        free(first);
    }
}

static void test_unwritable_cache_folder_is_no_error(void **state)
{
    (void)state;
    char *plain = ids_of(tokenizers[1], LIPI_FLAG_OFF);
    /* A folder under a regular file can be neither made nor written (even
     * by root). */
    setenv("LIPI_CACHE_DIR", "/dev/null/lipi-cache", 1);
    char *ids = ids_of(tokenizers[1], LIPI_FLAG_ON);
    assert_string_equal(plain, ids);
    free(ids);
    /* No folder variable at all: no cache, no error. */
    unsetenv("LIPI_CACHE_DIR");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    ids = ids_of(tokenizers[1], LIPI_FLAG_ON);
    assert_string_equal(plain, ids);
    free(ids);
    if (home)
        setenv("HOME", home, 1);
    if (xdg)
        setenv("XDG_CACHE_HOME", xdg, 1);
    free(home);
    free(xdg);
    setenv("LIPI_CACHE_DIR", cache_dir, 1);
    free(plain);
}

static void test_lipi_cache_0_and_the_option_turn_it_off(void **state)
{
    (void)state;
    char names[MAX_FILES][320];
    setenv("LIPI_CACHE", "0", 1);
    free(ids_of(tokenizers[2], LIPI_FLAG_AUTO));
    assert_int_equal(cache_files(names), 0);
    /* The option overrides the variable: the tokenizer's snapshot, its
     * Unigram trie and the model file's digest record. */
    free(ids_of(tokenizers[2], LIPI_FLAG_ON));
    assert_int_equal(cache_files(names), 3);
    unsetenv("LIPI_CACHE");
    lipi_open_options o = {.table_cache = (lipi_flag)7};
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    assert_int_equal(lipi_tokenizer_open(tokenizers[2], &o, &tok, &err), LIPI_EINVAL);
    assert_null(tok);
}

/* XDG_CACHE_HOME/lipi is made when missing. */
static void test_the_folder_is_made_under_xdg_cache_home(void **state)
{
    (void)state;
    char xdg[160], names[MAX_FILES][320];
    snprintf(xdg, sizeof xdg, "%s/xdg", cache_dir);
    unsetenv("LIPI_CACHE_DIR");
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", xdg, 1);
    free(ids_of(tokenizers[2], LIPI_FLAG_ON));
    char lipi_dir[200];
    snprintf(lipi_dir, sizeof lipi_dir, "%s/lipi", xdg);
    DIR *d = opendir(lipi_dir);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            char p[700];
            snprintf(p, sizeof p, "%s/%s", lipi_dir, e->d_name);
            assert_int_equal(unlink(p), 0);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 3); /* the snapshot, the trie and the digest record */
    assert_int_equal(rmdir(lipi_dir), 0);
    assert_int_equal(rmdir(xdg), 0);
    if (old)
        setenv("XDG_CACHE_HOME", old, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(old);
    setenv("LIPI_CACHE_DIR", cache_dir, 1);
    assert_int_equal(cache_files(names), 0);
}

static lipi_status open_and_encode(void *ctx, lipi_error *err)
{
    lipi_open_options o = {.table_cache = LIPI_FLAG_ON};
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    uint32_t ids[512];
    lipi_status st = lipi_tokenizer_open(ctx, &o, &tok, err);
    if (st == LIPI_OK)
        st = lipi_encoder_new(tok, &enc, err);
    if (st == LIPI_OK && (st = lipi_session_new(enc, &s)) != LIPI_OK)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    for (size_t t = 0; st == LIPI_OK && t < sizeof texts / sizeof *texts; t++) {
        lipi_encoding e = {.ids = ids, .cap = 512};
        st = lipi_encode(s, texts[t], strlen(texts[t]), NULL, &e, err);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return st;
}

/* Reading the cache fails only with LIPI_ENOMEM (or falls back to building
 * and succeeds) and leaks nothing, whichever allocation fails. */
static void test_reading_the_cache_survives_allocation_failures(void **state)
{
    (void)state;
    /* The small Unigram model: each run of the loop reads its file. */
    for (size_t k = 2; k < 3; k++) {
        char *plain = ids_of(tokenizers[k], LIPI_FLAG_ON); /* fills the cache */
        free(plain);
        assert_true(alloc_fail_loop(tokenizers[k], open_and_encode, (void *)tokenizers[k]) > 10);
    }
}

/* Encodes text with the tokenizer at path (cache as given): LIPI_OK, every
 * span inside the text; the ids, one string (caller frees). */
static char *checked_ids(const char *path, lipi_flag cache, const char *text, size_t len)
{
    lipi_open_options o = {.table_cache = cache};
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    size_t cap = len + 1;
    uint32_t *ids = malloc(cap * sizeof *ids);
    lipi_span *spans = malloc(cap * sizeof *spans);
    char *out = malloc(cap * 12 + 1);
    assert_true(ids && spans && out);
    assert_int_equal(lipi_tokenizer_open(path, &o, &tok, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tok, &enc, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(enc, &s), LIPI_OK);
    lipi_encoding e = {.ids = ids, .offsets = spans, .cap = cap};
    assert_int_equal(lipi_encode(s, text, len, NULL, &e, &err), LIPI_OK);
    assert_true(e.len <= cap);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < e.len; i++) {
        assert_true(spans[i].start <= spans[i].end && spans[i].end <= len);
        at += (size_t)snprintf(out + at, 13, "%u ", ids[i]);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    free(ids);
    free(spans);
    return out;
}

/* Backtracking's cached lengths are checked against one another, not
 * against the vocabulary (backtrack.c: bt_tables_ok), so a doctored file
 * whose lengths are all doubled (a valid checksum; splits and prefixes
 * still add up) is used: the walk checks every length it takes against the
 * word, so spans stay inside the text, and a word of over 64 KiB (tokens
 * kept as ranks, their lengths added up at the end) goes to the merge loop
 * and gets its own ids. */
static void test_backtracking_lengths_are_checked_at_use(void **state)
{
    (void)state;
    const char *path = tokenizers[0]; /* r50k_base */
    size_t long_len = 70000;
    char *word = malloc(long_len);
    assert_non_null(word);
    memset(word, 'a', long_len); /* tokens of four a's, nothing shortened */
    char *plain_long = checked_ids(path, LIPI_FLAG_OFF, word, long_len);
    char *cached = checked_ids(path, LIPI_FLAG_ON, word, long_len); /* fills the cache */
    assert_string_equal(cached, plain_long);
    free(cached);
    char names[MAX_FILES][320], *bt = NULL;
    size_t nf = cache_files(names);
    for (size_t f = 0; f < nf; f++)
        if (strstr(names[f], "/backtrack-"))
            bt = names[f];
    assert_non_null(bt);
    size_t len;
    char *file = cli_slurp(bt, &len);
    assert_non_null(file);
    /* From the end: the filter (2^16 words), the pair table (the power of
     * two above twice n + 1 words), then n lengths (u16, padded). */
    lipi_tokenizer *tok = NULL;
    lipi_open_options o = {.table_cache = LIPI_FLAG_OFF};
    assert_int_equal(lipi_tokenizer_open(path, &o, &tok, NULL), LIPI_OK);
    size_t n = tok->model.vocab.n, cap = 16;
    lipi_tokenizer_free(tok);
    while (cap / 2 < n + 1)
        cap *= 2;
    size_t lens = len - ((size_t)1 << 16) * 8 - cap * 8 - ((n * 2 + 7) & ~(size_t)7);
    assert_true(lens > 112 && lens < len);
    for (size_t i = 0; i < n; i++) {
        uint16_t l;
        memcpy(&l, file + lens + 2 * i, 2);
        assert_true(l < 1000 && (i >= 256 || l == 1)); /* found the lengths */
        l = (uint16_t)(2 * l);
        memcpy(file + lens + 2 * i, &l, 2);
    }
    uint64_t sum = lipi_tabcache_sum(file + 112, len - 112);
    for (int b = 0; b < 8; b++)
        file[104 + b] = (char)(sum >> (8 * b));
    md_write(bt, file, len);
    ino_t ino = inode_of(bt);
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++)
        free(checked_ids(path, LIPI_FLAG_ON, texts[t], strlen(texts[t])));
    cached = checked_ids(path, LIPI_FLAG_ON, word, long_len);
    assert_string_equal(cached, plain_long);
    assert_int_equal(inode_of(bt), ino); /* the doctored file was used */
    free(cached);
    free(file);
    free(plain_long);
    free(word);
}

/* The checksum the way its format defines it, one word at a time. */
static uint64_t sum_by_definition(const unsigned char *p, size_t n)
{
    uint64_t lane[16], r;
    for (int k = 0; k < 16; k++)
        lane[k] = 0x243F6A8885A308D3ULL + (uint64_t)k;
    for (size_t i = 0; i < n / 8; i++) {
        uint64_t w, k;
        memcpy(&w, p + 8 * i, 8);
        k = lane[i % 16] ^ w ^ 0x9E3779B97F4A7C15ULL;
        lane[i % 16] = (k & 0xffffffffu) * (k >> 32) + (k << 32 | k >> 32);
    }
    r = n / 8;
    for (int k = 0; k < 16; k++) {
        r = (r ^ lane[k]) * 0x9E3779B97F4A7C15ULL;
        r ^= r >> 29;
    }
    return r;
}

/* data[0..n) through path in chunks of chunk bytes (the last one shorter). */
static bool sum_in_chunks(int path, const unsigned char *data, size_t n, size_t chunk,
                          uint64_t *out)
{
    lipi_tabcache_sum_state h;
    lipi_tabcache_sum_start(&h);
    for (size_t at = 0; at < n; at += chunk)
        if (!lipi_tabcache_sum_words(&h, data + at, n - at < chunk ? n - at : chunk, path))
            return false;
    *out = lipi_tabcache_sum_end(&h);
    return true;
}

/* Every code path of the checksum gives the format's value (a cache file
 * written on one CPU is read on another), at any length and alignment,
 * whole or in chunks of whole words; a length that is no whole number of
 * words counts its whole words only. */
static void test_checksum_paths_give_the_same_value(void **state)
{
    (void)state;
    enum { MAX = 4096 + 64 };
    unsigned char *buf = malloc(MAX + 8);
    assert_non_null(buf);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < MAX + 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    /* Pinned: the format's values must not drift (a changed definition
     * needs a new TC_VERSION in tokenizer/tabcache.c). */
    unsigned char pin[1024];
    for (size_t i = 0; i < sizeof pin; i++)
        pin[i] = (unsigned char)(i * 7 + 3);
    assert_true(sum_by_definition(pin, 1024) == 0xf1fbf9a69c700230ULL);
    assert_true(lipi_tabcache_sum(pin, 1024) == 0xf1fbf9a69c700230ULL);
    assert_true(lipi_tabcache_sum(pin, 0) == 0xa769efad5b1607a7ULL);
    static const size_t chunks[] = {8, 16, 24, 120, 128, 136, 256, 1000, 4096};
    int paths_run = 0;
    for (int path = LIPI_TABCACHE_SUM_PORTABLE; path <= LIPI_TABCACHE_SUM_AVX2; path++) {
        uint64_t got;
        if (!sum_in_chunks(path, buf, 8, 8, &got))
            continue; /* this CPU lacks it */
        paths_run++;
        for (size_t n = 0; n <= MAX; n += n < 600 ? 1 : 61)
            for (size_t off = 0; off < 8; off += n < 600 ? 3 : 1) {
                uint64_t want = sum_by_definition(buf + off, n);
                assert_true(sum_in_chunks(path, buf + off, n, n ? n : 1, &got));
                if (got != want)
                    fail_msg("path %d, %zu bytes at offset %zu: %016llx, want %016llx", path, n,
                             off, (unsigned long long)got, (unsigned long long)want);
                if (n % 97 != 0)
                    continue;
                for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
                    assert_true(sum_in_chunks(path, buf + off, n & ~(size_t)7, chunks[c], &got));
                    if (got != want)
                        fail_msg("path %d, %zu bytes in chunks of %zu: differs", path, n,
                                 chunks[c]);
                }
            }
    }
    assert_true(paths_run >= 1);
#if defined(__x86_64__)
    assert_true(paths_run >= 2); /* SSE2 is part of x86-64 */
#endif
    free(buf);
}

/* One flipped bit anywhere, and two words swapped (next to each other or
 * in the same lane), change the checksum; so do more zero words. */
static void test_checksum_sees_flips_and_swaps(void **state)
{
    (void)state;
    enum { WORDS = 300 };
    unsigned char buf[WORDS * 8];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + (i >> 8));
    uint64_t good = lipi_tabcache_sum(buf, sizeof buf);
    for (size_t bit = 0; bit < sizeof buf * 8; bit += 5) {
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        assert_true(lipi_tabcache_sum(buf, sizeof buf) != good);
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    for (size_t i = 0; i + 16 < WORDS; i += 7)
        for (size_t d = 1; d <= 16; d += 15) {
            unsigned char t[8];
            memcpy(t, buf + 8 * i, 8);
            memcpy(buf + 8 * i, buf + 8 * (i + d), 8);
            memcpy(buf + 8 * (i + d), t, 8);
            assert_true(lipi_tabcache_sum(buf, sizeof buf) != good);
            memcpy(buf + 8 * (i + d), buf + 8 * i, 8);
            memcpy(buf + 8 * i, t, 8);
        }
    assert_true(lipi_tabcache_sum(buf, sizeof buf) == good);
    static unsigned char zeros[4096];
    uint64_t seen[4096 / 8 + 1];
    for (size_t w = 0; w <= 4096 / 8; w++) {
        seen[w] = lipi_tabcache_sum(zeros, 8 * w);
        for (size_t v = 0; v < w; v++)
            assert_true(seen[v] != seen[w]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checksum_paths_give_the_same_value),
        cmocka_unit_test(test_checksum_sees_flips_and_swaps),
        cmocka_unit_test_setup_teardown(test_ids_are_the_same_with_and_without_the_cache, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_damaged_cache_files_are_ignored_and_replaced, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_backtracking_lengths_are_checked_at_use, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_cache_folder_is_no_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lipi_cache_0_and_the_option_turn_it_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_folder_is_made_under_xdg_cache_home, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reading_the_cache_survives_allocation_failures,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

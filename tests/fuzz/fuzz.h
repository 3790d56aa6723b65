/* Shared helpers of the fuzz harnesses (tests/fuzz/fuzz_<reader>.c).
 *
 * Each harness defines LLVMFuzzerTestOneInput. Built with clang and
 * -fsanitize=fuzzer,address,undefined by `make fuzz`; built with the normal
 * compiler and tests/fuzz/replay.c as build/fuzz_replay_<reader>, which runs
 * the same entry point on files (a crash file reproduces without libFuzzer,
 * and `make test` replays tests/fuzz/regressions/ and tests/fuzz/corpus/).
 *
 * Inputs that stand for several files (vocab.json + merges.txt, a model
 * folder, an index folder) hold the files one after the other, separated by
 * FUZZ_SEP; missing parts are empty files.
 *
 * A harness aborts (a finding) only on what a careful caller could not
 * survive: a crash, a sanitizer report, a leak, or lipi breaking its own
 * contract (a status outside the enum, a tokenizer that cannot encode what
 * it was built from is NOT a finding: bad input may give errors anywhere). */
#ifndef LIPI_FUZZ_H
#define LIPI_FUZZ_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encoder/encoder.h"
#include "tokenizer/tokenizer.h"

#define FUZZ_SEP "\n\xff\xfe--next-file--\xfe\xff\n"
#define FUZZ_SEP_LEN (sizeof FUZZ_SEP - 1)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

typedef struct {
    const char *p;
    size_t len;
} fuzz_part;

/* Splits data at FUZZ_SEP into exactly n parts (the last one keeps any
 * further separators; missing parts are empty). */
static inline void fuzz_split(const unsigned char *data, size_t size, fuzz_part *parts, size_t n)
{
    const char *p = (const char *)data, *end = p + size;
    for (size_t i = 0; i < n; i++) {
        const char *cut = NULL;
        if (i + 1 < n)
            cut = memmem(p, (size_t)(end - p), FUZZ_SEP, FUZZ_SEP_LEN);
        parts[i].p = p;
        parts[i].len = cut ? (size_t)(cut - p) : (size_t)(end - p);
        p = cut ? cut + FUZZ_SEP_LEN : end;
    }
}

/* A private folder for harnesses whose reader only takes paths; removed
 * at exit. */
static char fuzz_dir_path[64];

static inline void fuzz_dir_remove(void)
{
    DIR *d = opendir(fuzz_dir_path);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(fuzz_dir_path);
}

static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/lipi-fuzz-XXXXXX",
                 t && strlen(t) < 40 ? t : "/tmp");
        if (!mkdtemp(fuzz_dir_path))
            abort();
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Writes part into the fuzz folder as `name`; returns its path (static).
 * With len == SIZE_MAX the file is removed instead (absent file). */
static inline const char *fuzz_file(const char *name, const char *p, size_t len)
{
    static char path[8][256];
    static unsigned slot;
    char *out = path[slot++ % 8];
    snprintf(out, 256, "%s/%s", fuzz_dir(), name);
    unlink(out);
    if (len == SIZE_MAX)
        return out;
    FILE *f = fopen(out, "wb");
    if (!f || (len && fwrite(p, 1, len, f) != len) || fclose(f) != 0)
        abort();
    return out;
}

static inline void fuzz_check_status(lipi_status st)
{
    if ((unsigned)st > LIPI_EREGEX)
        abort();
}

/* Checks a loader's status; with LIPI_FUZZ_VERBOSE set (seed checks),
 * prints why an input did not load. True when it loaded. */
static inline bool fuzz_loaded(lipi_status st, const lipi_error *err)
{
    fuzz_check_status(st);
    if (st != LIPI_OK && getenv("LIPI_FUZZ_VERBOSE"))
        fprintf(stderr, "not loaded: %s: %s: %s\n", lipi_status_name(st), err->path, err->msg);
    else if (getenv("LIPI_FUZZ_VERBOSE"))
        fprintf(stderr, "loaded\n");
    return st == LIPI_OK;
}

/* Texts every loaded tokenizer encodes: scripts, spaces, specials-looking
 * strings, bytes no vocabulary holds. */
static const char *const fuzz_texts[] = {
    "Hello, world! It's 2024.",
    ("\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
     "\xe0\xa4\xa6\xe0\xa5\x81\xe0\xa4\xa8\xe0\xa4\xbf\xe0\xa4\xaf\xe0\xa4\xbe"),
    "  a\tb\n\nc  ",
    "<s>[CLS]<|endoftext|> x</s>",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 caf\xc3\xa9",
    "",
};

/* Uses a loaded tokenizer the way callers do: encode (single and pair,
 * with truncation), decode with and without specials, look ids up, and
 * serialize. Errors are fine; crashes and leaks are not. */
static inline void fuzz_use_tokenizer(const lipi_tokenizer *tok)
{
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    uint32_t ids[256];
    lipi_span offs[256];
    char out[1024];
    size_t out_len;
    size_t n = lipi_tokenizer_vocab_size(tok);
    for (uint32_t id = 0; id < 8 && id < n; id++) {
        size_t len;
        const char *t = lipi_tokenizer_id_to_token(tok, id, &len);
        uint32_t back;
        if (t)
            (void)lipi_tokenizer_token_to_id(tok, t, len, &back);
    }
    char *json = NULL;
    size_t json_len = 0;
    fuzz_check_status(lipi_tokenizer_to_json(tok, &json, &json_len, &err));
    lipi_free(json);

    lipi_status st = lipi_encoder_new(tok, &enc, &err);
    fuzz_check_status(st);
    if (st != LIPI_OK)
        return;
    if (lipi_session_new(enc, &s) != LIPI_OK)
        goto done;
    for (size_t i = 0; i < sizeof fuzz_texts / sizeof *fuzz_texts; i++) {
        const char *t = fuzz_texts[i];
        lipi_encoding e = {.ids = ids, .offsets = offs, .cap = 256};
        lipi_encode_options opt;
        lipi_encode_options_default(enc, &opt);
        opt.max_length = i == 2 ? 5 : 0;
        st = i == 3 ? lipi_encode_pair(s, t, strlen(t), fuzz_texts[0], strlen(fuzz_texts[0]),
                                       &opt, &e, &err)
                    : lipi_encode(s, t, strlen(t), &opt, &e, &err);
        fuzz_check_status(st);
        if (st != LIPI_OK)
            continue;
        size_t k = e.len < e.cap ? e.len : e.cap;
        for (size_t j = 0; j < k; j++)
            if (offs[j].start > offs[j].end)
                abort();
        fuzz_check_status(lipi_decode(s, ids, k, i & 1, out, sizeof out, &out_len, &err));
    }
    uint32_t odd[3] = {0, (uint32_t)(n ? n - 1 : 0), (uint32_t)n};
    fuzz_check_status(lipi_decode(s, odd, 3, false, out, sizeof out, &out_len, &err));
done:
    lipi_session_free(s);
    lipi_encoder_free(enc);
}

#endif

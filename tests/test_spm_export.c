/* The SentencePiece export is exact: a Unigram tokenizer trained by the CLI
 * on the bundled sample, exported with --export-spm, gives in Debian's
 * python3-sentencepiece the ids lipi gives with its tokenizer.json, on every
 * line of FLORES-200 devtest (43 languages) and NTREX-128 (18).
 * tests/fixtures/spm_export/make_spm_ids.py recorded SentencePiece's ids (a
 * hash per line, and the ids for the lines the committed sparse copies
 * hold); this test retrains, checks that the .model is the one recorded, and
 * compares lipi's ids from tokenizer.json and from the .model read back.
 * Without ../shared it checks the committed lines only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encoder/encoder.h"
#include "tests/cli_run.h"
#include "tests/refdata.h"
#include "tokenizer/tokenizer.h"

#define FIX "tests/fixtures/spm_export/"

static char workdir[] = "/tmp/lipi_spm_export.XXXXXX";

static uint64_t fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

/* The ids of text as `lipi encode` prints them, into buf. */
static void ids_text(lipi_session *s, const char *text, size_t len, char *buf, size_t cap)
{
    static uint32_t ids[1 << 16];
    lipi_error err;
    lipi_encoding out = {.ids = ids, .cap = sizeof ids / sizeof *ids};
    lipi_encode_options o = {0};
    if (lipi_encode(s, text, len, &o, &out, &err) != LIPI_OK)
        fail_msg("encode: %s", err.msg);
    assert_true(out.len <= out.cap);
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < out.len; i++) {
        int w = snprintf(buf + k, cap - k, i ? " %u" : "%u", ids[i]);
        assert_true(w > 0 && (size_t)w < cap - k);
        k += (size_t)w;
    }
}

typedef struct {
    lipi_session *json, *model;
    size_t lines, mismatches, leading_joiner;
} checker;

/* Compares lipi's ids for every line of text_path that it can check with
 * the reference file ref_path (sparse: the text file is a committed copy
 * whose empty lines stand for lines left out). */
static void check_file(checker *c, const char *text_path, const char *ref_path, bool sparse)
{
    lipi_error err;
    lipi_line_reader *text, *ref;
    assert_int_equal(lipi_line_reader_open(text_path, LIPI_INVALID_ERROR, &text, &err), LIPI_OK);
    assert_int_equal(lipi_line_reader_open(ref_path, LIPI_INVALID_ERROR, &ref, &err), LIPI_OK);
    static char got[1 << 20];
    size_t shown = 0;
    for (size_t no = 1;; no++) {
        const char *t, *r;
        size_t tl, rl;
        assert_int_equal(lipi_line_reader_next(text, &t, &tl, &err), LIPI_OK);
        assert_int_equal(lipi_line_reader_next(ref, &r, &rl, &err), LIPI_OK);
        if (!t || !r) {
            if (t || r)
                fail_msg("%s and %s differ in length at line %zu", text_path, ref_path, no);
            break;
        }
        if (sparse && tl == 0)
            continue;
        assert_true(rl >= 16);
        char hex[17];
        memcpy(hex, r, 16);
        hex[16] = '\0';
        uint64_t want = strtoull(hex, NULL, 16);
        for (int which = 0; which < 2; which++) {
            ids_text(which ? c->model : c->json, t, tl, got, sizeof got);
            c->lines++;
            if (fnv1a64(got, strlen(got)) == want)
                continue;
            /* Lines that open with a joiner are counted too: the indic
             * rule keeps such a joiner, as a charsmap (which cannot see
             * where the text starts) does. */
            if (tl >= 3 && memcmp(t, "\xe2\x80", 2) == 0 &&
                ((unsigned char)t[2] == 0x8C || (unsigned char)t[2] == 0x8D))
                c->leading_joiner++;
            c->mismatches++;
            if (shown++ < 3)
                print_message("%s line %zu (%s): lipi %.300s\n  sentencepiece %.*s\n", text_path,
                              no, which ? ".model" : "tokenizer.json", got,
                              rl > 17 ? (int)(rl - 17 < 300 ? rl - 17 : 300) : 11,
                              rl > 17 ? r + 17 : "(hash only)");
        }
    }
    lipi_line_reader_close(text);
    lipi_line_reader_close(ref);
}

static void check_corpus(checker *c, const char *corpus, size_t *n_files, size_t *n_shared)
{
    char dir[512];
    snprintf(dir, sizeof dir, FIX "ids/%s", corpus);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 8 || strcmp(e->d_name + n - 7, ".ids.xz") != 0)
            continue;
        char rel[512], ref[1024];
        snprintf(rel, sizeof rel, "parallel/%s/%.*s.txt", corpus, (int)(n - 7), e->d_name);
        snprintf(ref, sizeof ref, "%s/%s", dir, e->d_name);
        const char *whole = ref_shared(rel);
        if (whole) {
            check_file(c, whole, ref, false);
            (*n_shared)++;
        } else {
            check_file(c, ref_need(rel), ref, true);
        }
        (*n_files)++;
    }
    closedir(d);
}

static void test_spm_export_gives_lipis_ids_on_flores_and_ntrex(void **state)
{
    (void)state;
    cli_result r = cli_runf("train --type unigram --vocab-size 4000 --threads 2 --quiet "
                            "-o %s/u.json --export-spm %s/u.model data/flores200/*.txt",
                            workdir, workdir);
    if (r.code != 0)
        fail_msg("train: %s", r.err);
    cli_result_free(&r);

    /* The recorded ids belong to this very .model. */
    char path[PATH_MAX], hex[65];
    size_t len, mlen;
    snprintf(path, sizeof path, "%s/u.model", workdir);
    char *model = cli_slurp(path, &len);
    assert_non_null(model);
    lipi_sha256 h;
    lipi_sha256_init(&h);
    lipi_sha256_update(&h, model, len);
    assert_int_equal(lipi_sha256_final_hex(&h, hex), LIPI_OK);
    free(model);
    char *manifest = cli_slurp(FIX "MANIFEST", &mlen);
    assert_non_null(manifest);
    if (strncmp(manifest, "model_sha256 ", 13) != 0 || strncmp(manifest + 13, hex, 64) != 0)
        fail_msg("the exported .model (sha256 %s) is not the one the ids were recorded with "
                 "(%.77s): the trainer or the export changed; rerun "
                 "tests/fixtures/spm_export/make_spm_ids.py",
                 hex, manifest);
    free(manifest);

    lipi_error err;
    lipi_tokenizer *tj, *tm;
    lipi_encoder *ej, *em;
    checker c = {0};
    snprintf(path, sizeof path, "%s/u.json", workdir);
    assert_int_equal(lipi_tokenizer_load(path, &tj, &err), LIPI_OK);
    snprintf(path, sizeof path, "%s/u.model", workdir);
    assert_int_equal(lipi_tokenizer_open(path, NULL, &tm, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tj, &ej, &err), LIPI_OK);
    assert_int_equal(lipi_encoder_new(tm, &em, &err), LIPI_OK);
    assert_int_equal(lipi_session_new(ej, &c.json), LIPI_OK);
    assert_int_equal(lipi_session_new(em, &c.model), LIPI_OK);

    size_t files = 0, shared = 0;
    check_corpus(&c, "flores200/devtest", &files, &shared);
    check_corpus(&c, "ntrex128", &files, &shared);
    print_message("spm export: %zu files (%zu whole from ../shared), %zu line encodings, "
                  "%zu differ (%zu of them open with a joiner)\n",
                  files, shared, c.lines, c.mismatches, c.leading_joiner);
    assert_int_equal(files, 43 + 18);
    assert_true(c.lines >= 2 * 5000); /* the committed lines at least */
    assert_int_equal(c.mismatches, 0);

    lipi_session_free(c.json);
    lipi_session_free(c.model);
    lipi_encoder_free(ej);
    lipi_encoder_free(em);
    lipi_tokenizer_free(tj);
    lipi_tokenizer_free(tm);
}

/* What a .model cannot carry is refused, naming the option. */
static void test_spm_export_refuses_what_a_model_cannot_carry(void **state)
{
    (void)state;
    cli_result r = cli_runf("train --type unigram --vocab-size 400 --threads 1 --quiet "
                            "--lowercase -o %s/l.json --export-spm %s/l.model "
                            "data/flores200/eng_Latn.txt",
                            workdir, workdir);
    assert_int_not_equal(r.code, 0);
    assert_non_null(strstr(r.err, "--lowercase"));
    cli_result_free(&r);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/l.model", workdir);
    assert_int_not_equal(access(path, F_OK), 0); /* nothing half-written */
}

/* A Unigram tokenizer.json whose pre-tokenizer splits by pattern (as lipi's
 * trainer saved them before) cannot become a .model: refused, saying why. */
static void test_spm_export_refuses_a_split_pattern(void **state)
{
    (void)state;
    static const char json[] =
        "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
        "{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true}],"
        "\"normalizer\":{\"type\":\"NFC\"},"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"Metaspace\",\"replacement\":\"\u2581\",\"prepend_scheme\":\"first\","
        "\"split\":false}]},"
        "\"post_processor\":null,\"decoder\":null,"
        "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0.0],"
        "[\"\u2581\",-1.0],[\"1\",-2.0],[\"a\",-2.0]],\"byte_fallback\":false}}";
    lipi_tokenizer *t;
    lipi_error err;
    char *model = NULL;
    size_t len;
    if (lipi_tokenizer_load_json(json, sizeof json - 1, "split.json", &t, &err) != LIPI_OK)
        fail_msg("load: %s", err.msg);
    assert_int_equal(lipi_tokenizer_to_spm(t, &model, &len, &err), LIPI_EINVAL);
    assert_null(model);
    assert_non_null(strstr(err.msg, "split pattern"));
    lipi_tokenizer_free(t);
}

static int setup(void **state)
{
    (void)state;
    static char bin[PATH_MAX];
    const char *b = getenv("LIPI_BIN") ? getenv("LIPI_BIN") : "build/lipi";
    if (!realpath(b, bin) || !mkdtemp(workdir))
        return -1;
    setenv("LIPI_BIN", bin, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_export_gives_lipis_ids_on_flores_and_ntrex),
        cmocka_unit_test(test_spm_export_refuses_what_a_model_cannot_carry),
        cmocka_unit_test(test_spm_export_refuses_a_split_pattern),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

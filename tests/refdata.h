/* Test helper: reference data and visible skips.
 *
 * Reference files come from ../shared/data, which a clone does not have.
 * The small ones that reference checks need are committed under
 * tests/fixtures/shared/ with the same relative paths (its SOURCES.md says
 * where each came from and under which licence), or are in the bundled
 * data/ (vocab/tiktoken, vocab/bert-base-multilingual-cased); the rest, and whole
 * corpora, only exist next to the repository. A test that cannot run says
 * why instead of passing:
 *
 *   const char *tok = ref_path("vocab/gpt2/tokenizer.json");
 *   if (!tok)
 *       SKIP_BECAUSE("%s", ref_missing("GPT-2 tokenizer"));
 *
 * SKIP_BECAUSE prints "SKIP <test>: <reason>" on standard output, which
 * tests/run_tests.sh counts by reason, then calls cmocka's skip(). */
#ifndef LIPI_TEST_REFDATA_H
#define LIPI_TEST_REFDATA_H

#define REF_SHARED "../shared/data"
#define REF_FIXTURES "tests/fixtures/shared"
#define REF_BUNDLED "data"
/* What the checks on whole corpora need, for ref_missing. */
#define REF_FLORES_WHOLE "whole FLORES-200 devtest files, 12 MB, not committed"

/* The committed copy tests/fixtures/shared/REL or data/REL if there, else
 * ../shared/data/REL if readable, else NULL. In one of 8 rotating buffers.
 * The corpus texts under parallel/ are committed sparse (lines no check
 * reads are empty): for whole files use ref_shared. */
const char *ref_path(const char *rel);

/* ref_path for a file that is committed (tests/fixtures/shared or data/):
 * fails the test when it is not found. */
const char *ref_need(const char *rel);

/* ../shared/data/REL if readable, else NULL (rotating buffers too). */
const char *ref_shared(const char *rel);

/* The skip reason for missing reference data WHAT:
 * "../shared/data not found (WHAT)", or "not in ../shared/data (WHAT)" when
 * the folder is there. Static buffer, valid until the next call. */
const char *ref_missing(const char *what);

/* Prints "SKIP <test>: <printf reason>" and flushes standard output. */
void ref_skip_note(const char *test, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define SKIP_BECAUSE(...)                                                      \
    do {                                                                       \
        ref_skip_note(__func__, __VA_ARGS__);                                  \
        skip();                                                                \
    } while (0)

#endif

/* Test helper: a scratch folder per test binary, small file helpers, and
 * model folders built from the fixtures in tests/fixtures/models with a
 * word-level tokenizer whose token "tN" is id N, so a line of text gives
 * exactly the ids a test wants ("t4 t17" -> [4, 17], no special tokens). */
#ifndef LIPI_TEST_MODEL_DIR_H
#define LIPI_TEST_MODEL_DIR_H

#include <stdbool.h>
#include <stddef.h>

/* Creates /tmp/lipi_test_PREFIX_XXXXXX (cmocka group setup returns this). */
int md_setup(const char *prefix);
/* Removes it with everything inside. */
void md_teardown(void);
/* Removes the files of folder dir (not its subfolders, not dir). */
void md_empty_dir(const char *dir);
/* root/name in one of 8 rotating buffers. */
const char *md_path(const char *name);

/* The whole file (malloc'd, NUL after the end), or NULL. */
char *md_slurp(const char *path, size_t *len);
/* Writes (or replaces) a file; fails the test on error. */
void md_write(const char *path, const void *p, size_t n);

/* Makes folder dir from tests/fixtures/models/FIXTURE (every file and
 * subfolder) plus the word-level tokenizer.json. false when the fixture is
 * missing. */
bool md_model_dir(const char *fixture, const char *dir);

/* root/FIXTURE, made by md_model_dir the first time a test asks for it;
 * fails the test when the fixture is missing. One of 4 rotating buffers. */
const char *md_model(const char *fixture);

/* Reads a float32 .npy written by lipi (or the fixture script): malloc'd
 * rows * cols floats, NULL on a bad file. */
float *md_read_npy(const char *path, size_t *rows, size_t *cols);

/* Allocation hooks whose allocation number md_fail_at (counting from 0
 * since md_alloc_count was reset) fails; -1: none fails. */
#include "tokenizer/tokenizer.h"
extern long md_fail_at, md_alloc_count;
extern const lipi_alloc_hooks md_failing_hooks;

#endif

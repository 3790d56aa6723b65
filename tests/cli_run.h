/* Test helper: runs the lipi binary built with the tests and captures its
 * exit code, standard output and standard error. */
#ifndef LIPI_TEST_CLI_RUN_H
#define LIPI_TEST_CLI_RUN_H

#include <stddef.h>

typedef struct {
    int code;      /* exit status, or -1 if it did not exit normally */
    char *out;     /* standard output, NUL-terminated, malloc'd */
    size_t out_len;
    char *err;     /* standard error */
    size_t err_len;
} cli_result;

/* Runs `$LIPI_BIN ARGS` (ARGS is passed to /bin/sh, so quote it) with
 * `input` (input_len bytes, may contain NULs) on standard input. */
cli_result cli_run(const char *args, const char *input, size_t input_len);
void cli_result_free(cli_result *r);

/* cli_run with printf-style arguments (at most 2 KB) and no input. */
cli_result cli_runf(const char *fmt, ...);

/* The whole file, NUL-terminated and malloc'd, its length in *len; NULL
 * when it cannot be opened. */
char *cli_slurp(const char *path, size_t *len);

/* cmocka assertion: both files exist and hold the same bytes. */
void cli_assert_same_file(const char *a, const char *b);

/* Writes data to a new temporary file and returns its path (static buffer
 * rotated among 8 slots). */
const char *cli_temp_file(const char *data, size_t len);

#endif

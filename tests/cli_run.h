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

/* Writes data to a new temporary file and returns its path (static buffer
 * rotated among 8 slots). */
const char *cli_temp_file(const char *data, size_t len);

#endif

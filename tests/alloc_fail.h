/* Test helper: the allocation-failure loop. Installs lipi allocation hooks
 * (which jansson and uthash go through too) that fail the Nth allocation,
 * count allocations and track the blocks still live, so a test can run a
 * piece of work with N = 0, 1, 2, ... failing until it succeeds, and check
 * that every failing run returns LIPI_ENOMEM and leaks nothing.
 *
 *   static lipi_status load(void *ctx, lipi_error *err)
 *   {
 *       lipi_tokenizer *t = NULL;
 *       lipi_status st = lipi_tokenizer_load(ctx, &t, err);
 *       lipi_tokenizer_free(t);
 *       return st;
 *   }
 *   ...
 *   assert_true(alloc_fail_loop("tokenizer.json", load, (void *)path) > 10);
 *
 * Blocks allocated before alloc_fail_arm must be freed after
 * alloc_fail_disarm (the live count only knows the armed ones). */
#ifndef LIPI_TEST_ALLOC_FAIL_H
#define LIPI_TEST_ALLOC_FAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "tokenizer/tokenizer.h"

/* Installs the hooks: allocation number `fail_at` (0-based, counting from
 * this call) fails, every later one succeeds; -1 never fails. Resets the
 * counters. */
void alloc_fail_arm(long fail_at);

/* Restores libc's allocator (lipi_set_alloc_hooks(NULL)). */
void alloc_fail_disarm(void);

/* Allocations (malloc and realloc) since alloc_fail_arm. */
long alloc_fail_calls(void);

/* Blocks allocated since alloc_fail_arm and not yet freed. */
long alloc_fail_live(void);

/* Whether the failing allocation was reached. */
bool alloc_fail_hit(void);

/* The loop: calls run(ctx, &err) with allocation N failing, for N = 0, 1,
 * 2, ..., until a run reaches no failure; fails the test (cmocka) when a
 * run returns anything but LIPI_OK or LIPI_ENOMEM (with err.code
 * LIPI_ENOMEM) after the failure, or leaks; a run that never reaches the
 * failure must return LIPI_OK (run may check its results itself). `what` names the work in messages.
 * Returns the number of allocations of the successful run. */
long alloc_fail_loop(const char *what, lipi_status (*run)(void *ctx, lipi_error *err), void *ctx);

#endif

/* What SIGINT, SIGTERM and SIGHUP leave behind: nothing. A command writes
 * its output under a temporary name and renames it at the end (the library's
 * atomic writes); when one of these signals ends the run, the temporaries
 * registered here are removed, a live progress line on a terminal is ended
 * with a newline, and the process then dies by the signal itself, so the
 * shell sees 128 + its number (130 for Ctrl-C). The library installs no
 * handler: it only tells where its temporaries are.
 *
 *   int slot = -1;
 *   cli_signals_hold();                  // a signal now waits for release
 *   if (lipi_output_open(path, &o, &f, &err) == LIPI_OK)
 *       slot = cli_cleanup_add(lipi_output_get_temp_path(o), false);
 *   cli_signals_release();
 *   ... write ...
 *   st = lipi_output_commit(o, &err);
 *   cli_cleanup_done(slot);
 */
#ifndef LIPI_CLI_SIGNALS_H
#define LIPI_CLI_SIGNALS_H

#include <stdbool.h>
#include <stddef.h>

#include "pipeline/pipeline.h"

/* Called by main() before anything can start a thread. Signals ignored on
 * entry (nohup, a background job of a shell) stay ignored. */
void cli_signals_init(void);

/* Registers the temporary `path` (copied) to be removed on a signal: a file,
 * or with index_dir an index's new folder (lipi_index_remove_temp_dir).
 * Returns a slot for cli_cleanup_done, or -1 when NULL was given (standard
 * output) or nothing could be registered (then a signal leaves the
 * temporary, as SIGKILL does, and the next write removes it). */
int cli_cleanup_add(const char *path, bool index_dir);

/* Forgets a slot once its output is committed or aborted. -1 is a no-op. */
void cli_cleanup_done(int slot);

/* Around work whose temporaries cannot be registered (the library's own
 * save functions, which take a few milliseconds) or that registers them
 * (opening an output): a signal that comes in between is acted on at
 * release, once the write has put its file in place or removed it. Not
 * nested. */
void cli_signals_hold(void);
void cli_signals_release(void);

/* lipi_output_open and lipi_npy_writer_open, with the temporary registered
 * in *slot (-1 on failure or for standard output). */
lipi_status cli_output_open(const char *path, lipi_output **o, FILE **f, int *slot,
                            lipi_error *err);
lipi_status cli_npy_writer_open(const char *path, size_t cols, lipi_npy_writer **w, int *slot,
                                lipi_error *err);

/* For a command that stops gracefully (serve). After cli_signals_graceful
 * the next of these signals does not end the process (temporaries stay
 * registered): cli_signals_wait returns its number, waiting for it if it
 * has not come yet. A signal after that one ends the process as above.
 * sigwait() cannot do this: a thread that OpenBLAS starts before main()
 * has the signals unblocked and may take them first. */
void cli_signals_graceful(void);
int cli_signals_wait(void);

/* Progress lines tell whether a line without its newline is on stderr. */
void cli_signals_line_open(bool open);

#endif

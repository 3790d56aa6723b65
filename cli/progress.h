/* Progress reports for long work: a live bar on stderr when it is a
 * terminal, one summary line per phase otherwise, nothing with --quiet. */
#ifndef LIPI_CLI_PROGRESS_H
#define LIPI_CLI_PROGRESS_H

#include <stdbool.h>

#include "trainer/trainer.h"

typedef struct {
    bool quiet;
    bool tty;
    double start;        /* when the current phase began (seconds) */
    double last_draw;    /* when the bar was last drawn */
    int phase;           /* phase being shown, -1 before the first report */
} cli_progress;

void cli_progress_init(cli_progress *p, bool quiet);

/* A lipi_progress_fn; `user` is a cli_progress *. */
void cli_progress_report(const lipi_progress *r, void *user);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif

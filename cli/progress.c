/* See progress.h. */
#include "cli/progress.h"
#include "cli/signals.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, bool quiet)
{
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->start = cli_now();
    p->last_draw = 0;
    p->phase = -1;
}

static void clock_str(char *buf, size_t n, double s)
{
    if (s < 0 || s > 1e7) {
        snprintf(buf, n, "--:--");
        return;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%lu:%02lu", t / 60, t % 60);
}

void cli_progress_report(const lipi_progress *r, void *user)
{
    cli_progress *p = user;
    if (p->quiet)
        return;
    double now = cli_now();
    if ((int)r->phase != p->phase) {
        p->phase = (int)r->phase;
        p->start = now;
    }
    double el = now - p->start;
    if (!r->done && (!p->tty || now - p->last_draw < 0.1))
        return;
    p->last_draw = now;
    char elapsed[32], eta[32] = "--:--";
    clock_str(elapsed, sizeof elapsed, el);
    const double mb = 1e6;
    if (r->phase == LIPI_PHASE_COUNT) {
        /* Amounts and rates are of text (decompressed); the share done is
         * of the files on disk, the only total known in advance. */
        double text = (double)r->text_bytes / mb;
        double rate = el > 1e-3 ? text / el : 0;
        if (r->bytes_total && r->bytes_read && el > 0)
            clock_str(eta, sizeof eta,
                      el * ((double)r->bytes_total / (double)r->bytes_read - 1.0));
        if (r->done) {
            fprintf(stderr, "%scounting: %.1f MB, %llu %s in %.1f s", p->tty ? "\r\033[K" : "",
                    text, (unsigned long long)r->lines, lipi_plural(r->lines, "line", "lines"),
                    el);
            if (el >= 0.05) /* a rate over a blink of time says nothing */
                fprintf(stderr, " (%.1f MB/s)", rate);
            fputc('\n', stderr);
        } else if (r->bytes_total) {
            fprintf(stderr, "\r\033[Kcounting  %.1f MB  %3.0f%%  %.1f MB/s  elapsed %s  ETA %s",
                    text, 100.0 * (double)r->bytes_read / (double)r->bytes_total, rate, elapsed,
                    eta);
        } else {
            fprintf(stderr, "\r\033[Kcounting  %.1f MB  %.1f MB/s  elapsed %s", text, rate,
                    elapsed);
        }
    } else {
        if (r->merges_done && r->merges_total > r->merges_done && el > 0)
            clock_str(eta, sizeof eta,
                      el * ((double)r->merges_total / (double)r->merges_done - 1.0));
        const char *what = r->phase == LIPI_PHASE_MERGE  ? "merges"
                           : r->phase == LIPI_PHASE_SEED ? "seed pieces"
                                                         : "EM steps";
        if (r->phase == LIPI_PHASE_SEED && r->done)
            fprintf(stderr, "%sseed pieces: done in %.1f s\n", p->tty ? "\r\033[K" : "", el);
        else if (r->done)
            fprintf(stderr, "%s%s: %zu done in %.1f s\n", p->tty ? "\r\033[K" : "", what,
                    r->merges_done, el);
        else
            fprintf(stderr, "\r\033[K%s  %zu / %zu  elapsed %s  ETA %s", what, r->merges_done,
                    r->merges_total, elapsed, eta);
    }
    cli_signals_line_open(!r->done);
    fflush(stderr);
}

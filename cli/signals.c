/* See signals.h.
 *
 * Why the work is done by a thread and not in the handler: the cleanup
 * removes an index folder (several files, with a rename first, see
 * lipi_index_remove_temp_dir) and must not run while the main thread is
 * inside a short save it cannot see into, which wants a lock; neither
 * belongs in an asynchronous signal handler. So the handler only writes the
 * signal's number to a pipe (write() is async-signal-safe), and a thread
 * that reads the pipe does the work in ordinary context, then unblocks the
 * signal in itself only, restores the default action and raises it: the
 * process dies of the signal, whatever the other threads were doing.
 *
 * The main thread blocks the signals, and with it every thread the library
 * starts later (they inherit the mask), so no library call fails with EINTR
 * in the moment before the process dies; the pipe's thread unblocks them in
 * itself. Threads that libraries start before main() (OpenBLAS's pool) do
 * not block them either: that is why a handler is needed at all rather than
 * sigwait() alone, and why `lipi serve` waits with cli_signals_wait. */
#include "cli/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SLOTS 8

static struct {
    char *path;
    bool index_dir;
} slots[MAX_SLOTS];

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held by the main thread between cli_signals_hold and _release. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool line_open;
static int pipe_fd[2] = {-1, -1};
/* cli_signals_wait: the next signal is handed to it instead of ending the
 * process. */
static atomic_bool waiting;
static pthread_mutex_t caught_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t caught_cv = PTHREAD_COND_INITIALIZER;
static int caught;
static sigset_t handled;

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(pipe_fd[1], &b, 1);
    errno = saved;
}

static void *wait_for_signals(void *unused)
{
    /* This thread takes the signals itself: without it, a process whose
     * libraries started no thread before main() would leave them pending. */
    pthread_sigmask(SIG_UNBLOCK, &handled, NULL);
    unsigned char b;
    for (;;) {
        while (read(pipe_fd[0], &b, 1) != 1)
            ;
        if (!atomic_exchange(&waiting, false))
            break;
        pthread_mutex_lock(&caught_lock);
        caught = b;
        pthread_cond_signal(&caught_cv);
        pthread_mutex_unlock(&caught_lock);
    }
    int sig = b;
    pthread_mutex_lock(&hold_lock);
    pthread_mutex_lock(&slots_lock);
    for (size_t i = 0; i < MAX_SLOTS; i++) {
        if (!slots[i].path)
            continue;
        if (slots[i].index_dir)
            lipi_index_remove_temp_dir(slots[i].path);
        else
            unlink(slots[i].path); /* atomic against a commit's rename */
    }
    if (atomic_load(&line_open) && isatty(STDERR_FILENO))
        (void)!write(STDERR_FILENO, "\n", 1);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    _exit(128 + sig); /* not reached */
}

void cli_signals_init(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    sigset_t old_mask;
    sigemptyset(&handled);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaddset(&handled, sigs[i]);
    }
    if (pipe2(pipe_fd, O_CLOEXEC) != 0)
        return; /* the signals kill as before and leave the temporaries */
    pthread_sigmask(SIG_BLOCK, &handled, &old_mask);
    pthread_attr_t attr;
    pthread_t t;
    bool started = pthread_attr_init(&attr) == 0;
    if (started) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &attr, wait_for_signals, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        pipe_fd[0] = pipe_fd[1] = -1;
        return;
    }
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigismember(&handled, sigs[i]))
            sigaction(sigs[i], &sa, NULL);
}

int cli_cleanup_add(const char *path, bool index_dir)
{
    if (!path)
        return -1;
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int slot = -1;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < MAX_SLOTS && slot < 0; i++)
        if (!slots[i].path) {
            slots[i].path = copy;
            slots[i].index_dir = index_dir;
            slot = i;
        }
    pthread_mutex_unlock(&slots_lock);
    if (slot < 0)
        free(copy);
    return slot;
}

void cli_cleanup_done(int slot)
{
    if (slot < 0 || slot >= MAX_SLOTS)
        return;
    pthread_mutex_lock(&slots_lock);
    free(slots[slot].path);
    slots[slot].path = NULL;
    pthread_mutex_unlock(&slots_lock);
}

static sigset_t stop_signals(void)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    return sigs;
}

void cli_signals_graceful(void)
{
    if (pipe_fd[0] >= 0) {
        atomic_store(&waiting, true);
        return;
    }
    /* cli_signals_init could not start its thread: plain sigwait. */
    sigset_t sigs = stop_signals();
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
}

int cli_signals_wait(void)
{
    if (pipe_fd[0] < 0) {
        sigset_t sigs = stop_signals();
        int sig = 0;
        sigwait(&sigs, &sig);
        return sig;
    }
    pthread_mutex_lock(&caught_lock);
    while (!caught)
        pthread_cond_wait(&caught_cv, &caught_lock);
    int sig = caught;
    pthread_mutex_unlock(&caught_lock);
    return sig;
}

void cli_signals_hold(void)
{
    pthread_mutex_lock(&hold_lock);
}

void cli_signals_release(void)
{
    pthread_mutex_unlock(&hold_lock);
}

lipi_status cli_output_open(const char *path, lipi_output **o, FILE **f, int *slot,
                            lipi_error *err)
{
    cli_signals_hold();
    lipi_status st = lipi_output_open(path, o, f, err);
    *slot = st == LIPI_OK ? cli_cleanup_add(lipi_output_get_temp_path(*o), false) : -1;
    cli_signals_release();
    return st;
}

lipi_status cli_npy_writer_open(const char *path, size_t cols, lipi_npy_writer **w, int *slot,
                                lipi_error *err)
{
    cli_signals_hold();
    lipi_status st = lipi_npy_writer_open(path, cols, w, err);
    *slot = st == LIPI_OK ? cli_cleanup_add(lipi_npy_writer_get_temp_path(*w), false) : -1;
    cli_signals_release();
    return st;
}

void cli_signals_line_open(bool open)
{
    atomic_store(&line_open, open);
}

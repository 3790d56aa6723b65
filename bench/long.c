/* lipi side of bench/long.sh: one sequence of L tokens (ids 5 + (i * 7919)
 * % (vocab - 5), as bench/long_anchor.py makes them) through a model folder
 * with THREADS threads; the hidden states go to OUT (float32). Prints
 *     tool model L threads wall_s cpu_s rss_kb rss_loaded_kb
 * (rss_kb: the process's peak; rss_loaded_kb: its RSS once the weights are
 * loaded, so the difference is what the forward pass adds).
 *
 *   ./build/bench_long DIR L THREADS OUT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "model/model.h"

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Current resident set in kB (VmRSS of /proc/self/status), 0 if unknown. */
static long rss_now_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_long DIR L THREADS OUT\n");
        return 2;
    }
    size_t L = strtoul(argv[2], NULL, 10), threads = strtoul(argv[3], NULL, 10);
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    lipi_error err = {0};
    if (lipi_model_load(argv[1], NULL, &m, &err) != LIPI_OK ||
        lipi_model_session_new(m, threads, &s, &err) != LIPI_OK) {
        fprintf(stderr, "bench_long: %s: %s\n", err.path, err.msg);
        return 1;
    }
    const lipi_model_info *info = lipi_model_get_info(m);
    uint32_t *ids = malloc(L * sizeof *ids);
    float *hidden = malloc(L * info->hidden_size * sizeof(float));
    for (size_t i = 0; i < L; i++)
        ids[i] = (uint32_t)(5 + (i * 7919) % (info->vocab_size - 5));
    lipi_sequence q = {ids, NULL, L};
    long loaded = rss_now_kb();
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (lipi_model_forward(s, &q, 1, hidden, &err) != LIPI_OK) {
        fprintf(stderr, "bench_long: %s\n", err.msg);
        return 1;
    }
    double wall = clock_s(CLOCK_MONOTONIC) - w0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(hidden, sizeof(float), L * info->hidden_size, f) != L * info->hidden_size) {
        fprintf(stderr, "bench_long: cannot write %s\n", argv[4]);
        return 1;
    }
    fclose(f);
    printf("lipi %s %zu %zu %.2f %.2f %ld %ld\n", info->model_type, L, threads, wall, cpu,
           ru.ru_maxrss, loaded);
    free(ids);
    free(hidden);
    lipi_model_session_free(s);
    lipi_model_free(m);
    return 0;
}

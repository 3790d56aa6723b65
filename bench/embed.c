/* lipi side of bench/embed.sh: the forward pass + mean pooling of a model
 * folder on two id sets, in the format of bench/embed_anchor.py:
 *     tool model dtype set threads sentences tokens padded wall_s cpu_s rss_kb
 * (wall_s, cpu_s: medians over $RUNS timed passes after a warm-up on the
 * first batch; padded
 * = tokens, since lipi packs each batch without padding). Batches are the
 * anchors' batches, 32 consecutive lines of the id file; the REAL set's
 * embeddings go to OUT (float32, file order).
 *
 *   ./build/bench_embed DIR THREADS f32|int8 FIXED REAL OUT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "model/model.h"

#define BATCH 32

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct {
    uint32_t *ids;
    lipi_sequence *seqs;
    size_t n, tokens;
} id_set;

/* One sequence per non-empty line, ids separated by spaces. */
static int read_ids(const char *path, id_set *s)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t cap = 1 << 16, scap = 256, *lens = malloc(scap * sizeof *lens);
    s->ids = malloc(cap * sizeof *s->ids);
    s->n = s->tokens = 0;
    char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        size_t len = 0;
        char *p = line, *end;
        for (;; p = end) {
            unsigned long v = strtoul(p, &end, 10);
            if (end == p)
                break;
            if (s->tokens == cap)
                s->ids = realloc(s->ids, (cap *= 2) * sizeof *s->ids);
            s->ids[s->tokens++] = (uint32_t)v;
            len++;
        }
        if (!len)
            continue;
        if (s->n == scap)
            lens = realloc(lens, (scap *= 2) * sizeof *lens);
        lens[s->n++] = len;
    }
    fclose(f);
    s->seqs = malloc(s->n * sizeof *s->seqs);
    for (size_t i = 0, t = 0; i < s->n; t += lens[i], i++)
        s->seqs[i] = (lipi_sequence){s->ids + t, NULL, lens[i]};
    free(lens);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s DIR THREADS f32|int8 FIXED REAL OUT\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *dtype = argv[3];
    size_t threads = (size_t)atoi(argv[2]);
    int runs = getenv("RUNS") ? atoi(getenv("RUNS")) : 3;
    runs = runs < 1 ? 1 : runs > 99 ? 99 : runs;
    const char *kind = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    lipi_model *m = NULL;
    lipi_model_session *ses = NULL;
    lipi_error err;
    lipi_model_load_options opt = {strcmp(dtype, "int8") ? LIPI_DTYPE_F32 : LIPI_DTYPE_INT8};
    if (lipi_model_load(dir, &opt, &m, &err) != LIPI_OK ||
        lipi_model_session_new(m, threads, &ses, &err) != LIPI_OK) {
        fprintf(stderr, "%s: %s\n", err.path, err.msg);
        return 1;
    }
    size_t C = lipi_model_get_info(m)->hidden_size;
    lipi_embed_options eo = {LIPI_POOL_MEAN, 0};
    const char *names[2] = {"32x128", "real"};
    for (int si = 0; si < 2; si++) {
        id_set set;
        if (read_ids(argv[4 + si], &set) != 0) {
            fprintf(stderr, "cannot read %s\n", argv[4 + si]);
            return 1;
        }
        float *out = malloc(set.n * C * sizeof(float));
        double wall[100], cpu[100];
        for (int r = 0; r <= runs; r++) {
            double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            for (size_t i = 0; i < (r ? set.n : BATCH); i += BATCH) {
                size_t nb = set.n - i < BATCH ? set.n - i : BATCH;
                if (lipi_model_embed(ses, set.seqs + i, nb, &eo, out + i * C, &err) != LIPI_OK) {
                    fprintf(stderr, "embed: %s\n", err.msg);
                    return 1;
                }
            }
            if (r) {
                wall[r - 1] = clock_s(CLOCK_MONOTONIC) - w0;
                cpu[r - 1] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            }
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("lipi %s %s %s %zu %zu %zu %zu %.4f %.4f %ld\n", kind, dtype, names[si], threads,
               set.n, set.tokens, set.tokens, median(wall, runs), median(cpu, runs),
               ru.ru_maxrss);
        fflush(stdout);
        if (si == 1) {
            FILE *f = fopen(argv[6], "wb");
            if (!f || fwrite(out, sizeof(float), set.n * C, f) != set.n * C) {
                fprintf(stderr, "cannot write %s\n", argv[6]);
                return 1;
            }
            fclose(f);
        }
        free(out);
        free(set.ids);
        free(set.seqs);
    }
    lipi_model_session_free(ses);
    lipi_model_free(m);
    return 0;
}

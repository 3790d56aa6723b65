/* Encoder throughput: tokens/s and GFLOP/s of lipi's forward pass on
 * random-weight BERT-base (12 x 768, 12 heads, FFN 3072) and
 * MiniLM-L6-H384 (6 x 384, 12 heads, FFN 1536) checkpoints, batches of
 * 32 x 128 tokens and 1 x 128, at 1 and 2 threads; median of 5 runs after a
 * warm-up. The models are written as Hugging Face folders under
 * $TMPDIR (or /tmp) and loaded through lipi_model_load like any checkpoint.
 *
 *   sh bench/embed.sh [BUILD]      (builds it and runs f32 and int8), or
 *   ./build/bench_embed [f32|int8 [MODEL [THREADS]]]     (MODEL: bert or minilm)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/pipeline.h"

typedef struct {
    const char *name;
    size_t layers, hidden, heads, inter, vocab;
} shape;

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint32_t rng = 12345;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return ((float)(rng >> 8) / 16777216.0f - 0.5f) * 0.1f;
}

/* Writes config.json + model.safetensors of a random BERT. */
static int write_model(const char *dir, const shape *s)
{
    char path[512];
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "{\"model_type\":\"bert\",\"vocab_size\":%zu,\"hidden_size\":%zu,"
            "\"num_hidden_layers\":%zu,\"num_attention_heads\":%zu,\"intermediate_size\":%zu,"
            "\"max_position_embeddings\":512,\"type_vocab_size\":2,\"hidden_act\":\"gelu\"}",
            s->vocab, s->hidden, s->layers, s->heads, s->inter);
    fclose(f);

    /* name, rows, cols (0: vector) */
    char names[512][96];
    size_t rows[512], cols[512], n = 0;
#define T(nm, r, c)                                                                          \
    do {                                                                                     \
        snprintf(names[n], sizeof names[n], "%s", nm);                                       \
        rows[n] = r;                                                                         \
        cols[n] = c;                                                                         \
        n++;                                                                                 \
    } while (0)
    size_t C = s->hidden, I = s->inter;
    T("embeddings.word_embeddings.weight", s->vocab, C);
    T("embeddings.position_embeddings.weight", 512, C);
    T("embeddings.token_type_embeddings.weight", 2, C);
    T("embeddings.LayerNorm.weight", C, 0);
    T("embeddings.LayerNorm.bias", C, 0);
    static const char *lin[] = {"attention.self.query", "attention.self.key",
                                "attention.self.value", "attention.output.dense",
                                "intermediate.dense", "output.dense"};
    for (size_t l = 0; l < s->layers; l++) {
        char nm[96];
        for (int k = 0; k < 6; k++) {
            size_t out = k == 4 ? I : C, in = k == 5 ? I : C;
            snprintf(nm, sizeof nm, "encoder.layer.%zu.%s.weight", l, lin[k]);
            T(nm, out, in);
            snprintf(nm, sizeof nm, "encoder.layer.%zu.%s.bias", l, lin[k]);
            T(nm, out, 0);
        }
        static const char *lns[] = {"attention.output.LayerNorm", "output.LayerNorm"};
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "encoder.layer.%zu.%s.weight", l, lns[k]);
            T(nm, C, 0);
            snprintf(nm, sizeof nm, "encoder.layer.%zu.%s.bias", l, lns[k]);
            T(nm, C, 0);
        }
    }
#undef T
    char *hdr = malloc(1 << 20);
    size_t hl = 0, off = 0;
    hl += (size_t)sprintf(hdr + hl, "{");
    for (size_t i = 0; i < n; i++) {
        size_t bytes = rows[i] * (cols[i] ? cols[i] : 1) * 4;
        if (cols[i])
            hl += (size_t)sprintf(hdr + hl,
                                  "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],"
                                  "\"data_offsets\":[%zu,%zu]}",
                                  i ? "," : "", names[i], rows[i], cols[i], off, off + bytes);
        else
            hl += (size_t)sprintf(hdr + hl,
                                  "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                                  "\"data_offsets\":[%zu,%zu]}",
                                  i ? "," : "", names[i], rows[i], off, off + bytes);
        off += bytes;
    }
    hl += (size_t)sprintf(hdr + hl, "}");
    while (hl % 8)
        hdr[hl++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    if (!f)
        return -1;
    uint64_t h64 = hl;
    fwrite(&h64, 8, 1, f);
    fwrite(hdr, 1, hl, f);
    for (size_t i = 0; i < n; i++) {
        size_t cnt = rows[i] * (cols[i] ? cols[i] : 1);
        bool ln = strstr(names[i], "LayerNorm.weight") != NULL;
        for (size_t k = 0; k < cnt; k++) {
            float v = ln ? 1.0f + frand() : frand();
            fwrite(&v, 4, 1, f);
        }
    }
    fclose(f);
    free(hdr);
    return 0;
}

/* Multiply-adds of one forward pass (projections, FFN and attention). */
static double flops(const shape *s, size_t B, size_t L)
{
    double T = (double)B * (double)L, C = (double)s->hidden, I = (double)s->inter;
    double proj = 2.0 * T * (4.0 * C * C + 2.0 * C * I);
    double attn = 2.0 * 2.0 * (double)B * (double)L * (double)L * C;
    return (double)s->layers * (proj + attn);
}

int main(int argc, char **argv)
{
    bool int8 = argc > 1 && !strcmp(argv[1], "int8");
    const char *only = argc > 2 ? argv[2] : NULL;
    size_t only_threads = argc > 3 ? (size_t)atoi(argv[3]) : 0;
    static const shape shapes[] = {{"BERT-base", 12, 768, 12, 3072, 30522},
                                   {"MiniLM-L6-H384", 6, 384, 12, 1536, 30522}};
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    printf("# lipi embed benchmark: random weights, dtype %s, GEMM backend %s, median of 5\n",
           int8 ? "int8" : "f32", lipi_gemm_backend());
    /* tokens per CPU second (all threads) shows the work done even when
     * the machine is shared and wall-clock rates are not reliable */
    printf("%-16s %-14s %7s %12s %10s %12s\n", "model", "batch", "threads", "tokens/s",
           "GFLOP/s", "tok/cpu-s");
    for (size_t si = 0; si < 2; si++) {
        const shape *s = &shapes[si];
        if (only && strncasecmp(s->name, only, strlen(only)))
            continue;
        char dir[512];
        snprintf(dir, sizeof dir, "%s/lipi_bench_%s", tmp, s->name);
        if (write_model(dir, s) != 0) {
            fprintf(stderr, "cannot write %s\n", dir);
            return 1;
        }
        lipi_model *m = NULL;
        lipi_error err;
        lipi_model_load_options opt = {int8 ? LIPI_DTYPE_INT8 : LIPI_DTYPE_F32};
        if (lipi_model_load(dir, &opt, &m, &err) != LIPI_OK) {
            fprintf(stderr, "%s: %s\n", err.path, err.msg);
            return 1;
        }
        /* {sequences, longest, mixed}: mixed batches have lengths spread
         * evenly over 8..L, packed without padding. */
        size_t batches[3][3] = {{32, 128, 0}, {1, 128, 0}, {32, 128, 1}};
        for (size_t bi = 0; bi < 3; bi++) {
            size_t B = batches[bi][0], L = batches[bi][1], tokens = 0;
            uint32_t *ids = malloc(B * L * sizeof(uint32_t));
            lipi_sequence *seqs = malloc(B * sizeof *seqs);
            for (size_t i = 0; i < B * L; i++)
                ids[i] = 1000 + (uint32_t)(i * 7919 % 20000);
            for (size_t b = 0; b < B; b++) {
                size_t len = batches[bi][2] ? 8 + (b * 37 % B) * (L - 8) / (B - 1) : L;
                seqs[b] = (lipi_sequence){ids + b * L, NULL, len};
                tokens += len;
            }
            float *out = malloc(B * s->hidden * sizeof(float));
            for (size_t threads = 1; threads <= 2; threads++) {
                if (only_threads && threads != only_threads)
                    continue;
                lipi_model_session *ses = NULL;
                if (lipi_model_session_new(m, threads, &ses, &err) != LIPI_OK)
                    return 1;
                double t[5], cpu[5];
                lipi_model_embed(ses, seqs, B, NULL, out, NULL);
                for (int r = 0; r < 5; r++) {
                    double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
                    lipi_model_embed(ses, seqs, B, NULL, out, NULL);
                    t[r] = now() - t0;
                    cpu[r] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
                }
                qsort(t, 5, sizeof t[0], cmp_double);
                qsort(cpu, 5, sizeof cpu[0], cmp_double);
                double fl = 0;
                for (size_t b = 0; b < B; b++)
                    fl += flops(s, 1, seqs[b].len);
                printf("%-16s %3zux%-4zu%-6s %7zu %12.0f %10.1f %12.0f\n", s->name, B, L,
                       batches[bi][2] ? " mixed" : "", threads, (double)tokens / t[2],
                       fl / t[2] * 1e-9, (double)tokens / cpu[2]);
                fflush(stdout);
                lipi_model_session_free(ses);
            }
            free(ids);
            free(seqs);
            free(out);
        }
        lipi_model_free(m);
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        remove(path);
        snprintf(path, sizeof path, "%s/config.json", dir);
        remove(path);
        rmdir(dir);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("# peak RSS %.0f MB\n", (double)ru.ru_maxrss / 1024.0);
    return 0;
}

/* bench/encode: encoding throughput of lipi_encode_batch.
 *
 *   encode -t TOKENIZER [--threads N] [--runs R] [--batch L] [--check IDS]
 *          [--want tokens,offsets] FILE...
 *   encode --make-bert VOCAB.txt [--cased]      (prints a tokenizer.json)
 *
 * Reads every line of the FILEs into memory, encodes them once to warm up
 * (and, with --check, compares the ids with a file of reference ids, one line
 * of space-separated ids per input line, e.g. made by Hugging Face), then
 * times R runs and prints one result line. A run encodes the lines in
 * batches of L (default 1000, as the Hugging Face anchor calls encodeBatch)
 * with new sessions, so nothing the warm-up put in their caches helps.
 * --want asks the timed runs for token strings and / or offsets as well
 * (LIPI_WANT_TOKENS, LIPI_WANT_OFFSETS: what `lipi encode --format jsonl`
 * asks for), and adds want=... at the end of the line:
 *
 *   tokenizer=... threads=N bytes=B lines=L tokens=T MB/s=median [min-max]
 *   Mtok/s=median MB/s_per_cpu_second=median peak_rss_MB=M mismatching_lines=K
 *
 * MB/s counts input bytes (10^6 bytes per MB), excluding newlines, over
 * wall-clock time; MB/s_per_cpu_second over the CPU time the process used
 * (steadier on a busy machine, and per thread). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "encoder/encoder.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (all threads), seconds. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const lipi_error *err)
{
    fprintf(stderr, "encode: %s: %s%s%s\n", what, err->path, err->path[0] ? ": " : "", err->msg);
    exit(1);
}

/* Compares ids with the reference file, line by line: the number of lines
 * that differ (the first one is named on stderr), or -1 when the file
 * cannot be read or has another number of lines. */
static long check(const lipi_batch *b, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t i = 0, bad = 0;
    while ((n = getline(&line, &cap, f)) >= 0 && i < b->n) {
        size_t k = b->start[i], end = b->start[i + 1];
        char *p = line;
        bool ok = true;
        for (;;) {
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '\n' || *p == '\0')
                break;
            char *q;
            unsigned long v = strtoul(p, &q, 10);
            if (q == p || k >= end || b->ids[k] != v) {
                ok = false;
                break;
            }
            k++;
            p = q;
        }
        if (!ok || k != end) {
            if (bad == 0)
                fprintf(stderr, "encode: line %zu differs from %s\n", i + 1, path);
            bad++;
        }
        i++;
    }
    free(line);
    fclose(f);
    if (i != b->n) {
        fprintf(stderr, "encode: %s has %zu lines, the input %zu\n", path, i, b->n);
        return -1;
    }
    return (long)bad;
}

/* A BERT tokenizer.json from vocab.txt (id = line number - 1), as
 * tests/test_encoder.c and make_corpus_fixtures.js build it. */
static int make_bert(const char *path, bool lowercase)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 1;
    }
    json_t *vocab = json_object(), *added = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    json_int_t id = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        json_object_setn_new(vocab, line, (size_t)n, json_integer(id++));
    }
    free(line);
    fclose(f);
    static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (size_t i = 0; i < 5; i++) {
        json_t *v = json_object_get(vocab, specials[i]);
        if (v)
            json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id",
                                                   json_integer_value(v), "content", specials[i],
                                                   "single_word", 0, "lstrip", 0, "rstrip", 0,
                                                   "normalized", 0, "special", 1));
    }
    json_t *j = json_pack(
        "{s:s, s:n, s:n, s:o, s:{s:s, s:b, s:b, s:n, s:b}, s:{s:s}, s:{s:s, s:[s,I], s:[s,I]},"
        " s:{s:s, s:s, s:b}, s:{s:s, s:s, s:s, s:i, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
        "BertNormalizer", "clean_text", 1, "handle_chinese_chars", 1, "strip_accents",
        "lowercase", lowercase, "pre_tokenizer", "type", "BertPreTokenizer", "post_processor",
        "type", "BertProcessing", "sep", "[SEP]",
        json_integer_value(json_object_get(vocab, "[SEP]")), "cls", "[CLS]",
        json_integer_value(json_object_get(vocab, "[CLS]")), "decoder", "type",
        "WordPiece", "prefix", "##", "cleanup", 1, "model", "type", "WordPiece", "unk_token",
        "[UNK]", "continuing_subword_prefix", "##", "max_input_chars_per_word", 100, "vocab",
        vocab);
    if (!j || json_dumpf(j, stdout, JSON_COMPACT) != 0)
        return 1;
    json_decref(j);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--make-bert") == 0)
        return make_bert(argv[2], !(argc >= 4 && strcmp(argv[3], "--cased") == 0));
    const char *tok_path = NULL, *check_path = NULL;
    size_t threads = 1, runs = 5, batch = 1000;
    unsigned want = 0;
    const char *want_s = NULL;
    char **files = NULL;
    int nfiles = 0;
    files = calloc((size_t)argc, sizeof *files);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            tok_path = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (size_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (size_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = (size_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--check") == 0 && i + 1 < argc)
            check_path = argv[++i];
        else if (strcmp(argv[i], "--want") == 0 && i + 1 < argc) {
            want_s = argv[++i];
            want = (strstr(want_s, "tokens") ? LIPI_WANT_TOKENS : 0u) |
                   (strstr(want_s, "offsets") ? LIPI_WANT_OFFSETS : 0u);
        } else
            files[nfiles++] = argv[i];
    }
    if (!tok_path || nfiles == 0 || threads == 0 || runs == 0 || batch == 0) {
        fprintf(stderr, "usage: encode -t TOKENIZER [--threads N] [--runs R] [--batch L] "
                        "[--check IDS] [--want tokens,offsets] FILE...\n");
        return 2;
    }

    /* All lines in memory. */
    char *text = NULL;
    size_t len = 0, cap = 0, n = 0, lcap = 0;
    size_t *starts = NULL;
    lipi_error err = {0};
    for (int f = 0; f < nfiles; f++) {
        lipi_line_reader *r;
        if (lipi_line_reader_open(files[f], LIPI_INVALID_REPLACE, &r, &err) != LIPI_OK)
            die("reading", &err);
        const char *line;
        size_t ll;
        while (lipi_line_reader_next(r, &line, &ll, &err) == LIPI_OK && line) {
            if (len + ll > cap) {
                cap = (len + ll) * 2 + 4096;
                text = realloc(text, cap);
            }
            if (n + 2 > lcap) {
                lcap = lcap ? lcap * 2 : 4096;
                starts = realloc(starts, lcap * sizeof *starts);
            }
            memcpy(text + len, line, ll);
            starts[n++] = len;
            len += ll;
        }
        if (err.msg[0])
            die("reading", &err);
        lipi_line_reader_close(r);
    }
    starts[n] = len;
    lipi_text *lines = malloc((n ? n : 1) * sizeof *lines);
    for (size_t i = 0; i < n; i++)
        lines[i] = (lipi_text){text + starts[i], starts[i + 1] - starts[i]};

    lipi_tokenizer *tok;
    lipi_encoder *enc;
    if (lipi_tokenizer_open(tok_path, NULL, &tok, &err) != LIPI_OK)
        die("loading", &err);
    if (lipi_encoder_new(tok, &enc, &err) != LIPI_OK)
        die("building the encoder", &err);
    lipi_session **sessions = calloc(threads, sizeof *sessions);
    for (size_t i = 0; i < threads; i++)
        if (lipi_session_new(enc, &sessions[i]) != LIPI_OK)
            return 1;
    lipi_encode_options opt;
    lipi_encode_options_default(enc, &opt);
    opt.add_special_tokens = false;
    opt.max_length = 0;

    lipi_batch b = {0};
    if (lipi_encode_batch(sessions, threads, lines, n, &opt, 0, &b, &err) != LIPI_OK)
        die("encoding", &err);
    size_t tokens = b.start[n];
    long mismatches = check_path ? check(&b, check_path) : 0;
    if (mismatches < 0)
        return 1;
    lipi_batch_free(&b);

    double *mbs = calloc(runs, sizeof *mbs), *tps = calloc(runs, sizeof *tps);
    double *cpu = calloc(runs, sizeof *cpu);
    for (size_t r = 0; r < runs; r++) {
        for (size_t i = 0; i < threads; i++) {
            lipi_session_free(sessions[i]);
            if (lipi_session_new(enc, &sessions[i]) != LIPI_OK)
                return 1;
        }
        double t0 = now(), c0 = cpu_now();
        for (size_t at = 0; at < n; at += batch) {
            size_t m = n - at < batch ? n - at : batch;
            if (lipi_encode_batch(sessions, threads, lines + at, m, &opt, want, &b, &err) !=
                LIPI_OK)
                die("encoding", &err);
            lipi_batch_free(&b);
        }
        double dt = now() - t0, dc = cpu_now() - c0;
        mbs[r] = (double)len / dt / 1e6;
        tps[r] = (double)tokens / dt / 1e6;
        cpu[r] = (double)len / dc / 1e6 * (double)threads;
    }
    qsort(mbs, runs, sizeof *mbs, cmp_double);
    qsort(tps, runs, sizeof *tps, cmp_double);
    qsort(cpu, runs, sizeof *cpu, cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char mism_s[32] = "-"; /* not checked */
    if (check_path)
        snprintf(mism_s, sizeof mism_s, "%ld", mismatches);
    printf("tokenizer=%s threads=%zu bytes=%zu lines=%zu tokens=%zu MB/s=%.1f [%.1f-%.1f] "
           "Mtok/s=%.2f MB/s_per_cpu_second=%.1f peak_rss_MB=%.0f mismatching_lines=%s%s%s\n",
           tok_path, threads, len, n, tokens, mbs[runs / 2], mbs[0], mbs[runs - 1], tps[runs / 2],
           cpu[runs / 2] / (double)threads, (double)ru.ru_maxrss / 1024.0, mism_s,
           want_s ? " want=" : "", want_s ? want_s : "");

    for (size_t i = 0; i < threads; i++)
        lipi_session_free(sessions[i]);
    free(sessions);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    free(mbs);
    free(tps);
    free(cpu);
    free(lines);
    free(starts);
    free(text);
    free(files);
    return 0;
}

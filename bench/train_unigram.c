/* bench/train_unigram: trains a Unigram tokenizer through the library API
 * (what `lipi train --type unigram` does) and measures compression.
 *
 *   train_unigram [-o tokenizer.json] [--export-spm model.model]
 *                 [--vocab-size N] [--threads N] [--sample N] FILE...
 *   train_unigram --eval tokenizer.json FILE...
 *
 * Training prints one line: "trained vocab=N seconds=S". --eval encodes
 * every line of each FILE (no special tokens) and prints, per file,
 * "FILE tokens=T chars=C tokens_per_char=R" with C the code points of the
 * lines (newlines excluded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "encoder/encoder.h"
#include "trainer/trainer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const lipi_error *err)
{
    fprintf(stderr, "train_unigram: %s: %s%s%s (line %zu, offset %zu)\n", what, err->path,
            err->path[0] ? ": " : "", err->msg, err->line, err->offset);
    exit(1);
}

static void progress(const lipi_progress *p, void *user)
{
    static const char *names[] = {"count", "merge", "seed", "em"};
    if (p->done || p->phase == LIPI_PHASE_EM)
        fprintf(stderr, "  [%.1fs] %s %zu/%zu%s\n", now() - *(double *)user, names[p->phase],
                p->merges_done, p->merges_total, p->done ? " done" : "");
}

static int eval(const char *tok_path, char **files, int n)
{
    lipi_error err;
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    lipi_session *s;
    if (lipi_tokenizer_load(tok_path, &tok, &err) != LIPI_OK)
        die(tok_path, &err);
    if (lipi_encoder_new(tok, &enc, &err) != LIPI_OK)
        die("encoder", &err);
    if (lipi_session_new(enc, &s) != LIPI_OK)
        die("session", &err);
    lipi_encode_options eo;
    lipi_encode_options_default(enc, &eo);
    eo.add_special_tokens = false;
    for (int f = 0; f < n; f++) {
        lipi_line_reader *rd;
        if (lipi_line_reader_open(files[f], LIPI_INVALID_REPLACE, &rd, &err) != LIPI_OK)
            die(files[f], &err);
        unsigned long long tokens = 0, chars = 0;
        for (;;) {
            const char *line;
            size_t len;
            if (lipi_line_reader_next(rd, &line, &len, &err) != LIPI_OK)
                die(files[f], &err);
            if (!line)
                break;
            lipi_encoding out = {0};
            if (lipi_encode(s, line, len, &eo, &out, &err) != LIPI_OK)
                die(files[f], &err);
            tokens += out.len;
            for (size_t i = 0; i < len; i++)
                chars += ((unsigned char)line[i] & 0xC0) != 0x80;
        }
        lipi_line_reader_close(rd);
        printf("%s tokens=%llu chars=%llu tokens_per_char=%.5f\n", files[f], tokens, chars,
               chars ? (double)tokens / (double)chars : 0.0);
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return 0;
}

int main(int argc, char **argv)
{
    const char *out = "tokenizer.json", *spm = NULL;
    lipi_unigram_options uo;
    lipi_count_options co;
    lipi_error err;
    int i = 1;
    lipi_unigram_options_default(&uo);
    lipi_count_options_default(&co);
    uo.common.vocab_size = 32000;
    if (argc > 2 && strcmp(argv[1], "--eval") == 0)
        return eval(argv[2], argv + 3, argc - 3);
    for (; i < argc && strncmp(argv[i], "-", 1) == 0 && argv[i][1]; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "train_unigram: %s needs a value\n", argv[i]);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(argv[i - 1], "-o") == 0)
            out = v;
        else if (strcmp(argv[i - 1], "--export-spm") == 0)
            spm = v;
        else if (strcmp(argv[i - 1], "--vocab-size") == 0)
            uo.common.vocab_size = strtoull(v, NULL, 10);
        else if (strcmp(argv[i - 1], "--threads") == 0)
            uo.common.threads = co.threads = strtoull(v, NULL, 10);
        else if (strcmp(argv[i - 1], "--grapheme-guard") == 0)
            uo.common.grapheme_guard = strcmp(v, "0") != 0;
        else if (strcmp(argv[i - 1], "--byte-fallback") == 0)
            uo.common.byte_fallback = strcmp(v, "0") != 0;
        else if (strcmp(argv[i - 1], "--sample") == 0)
            uo.sample = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "train_unigram: unknown option %s\n", argv[i - 1]);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "usage: train_unigram [-o OUT] [--export-spm M] [--vocab-size N] "
                        "[--threads N] [--sample N] FILE...\n");
        return 2;
    }
    double t0 = now();
    uo.common.progress = co.progress = progress;
    uo.common.progress_user = co.progress_user = &t0;
    lipi_normalizer *norm;
    lipi_pretokenizer *pre;
    lipi_tokenizer *tok;
    if (lipi_normalizer_new("indic", NULL, &norm, &err) != LIPI_OK)
        die("normalizer", &err);
    if (lipi_unigram_pretokenizer_new(&pre, &err) != LIPI_OK)
        die("pre-tokenizer", &err);
    if (lipi_unigram_train_files((const char *const *)argv + i, (size_t)(argc - i), norm, pre,
                                 &co, &uo, &tok, &err) != LIPI_OK)
        die("training", &err);
    if (lipi_tokenizer_save(tok, out, &err) != LIPI_OK)
        die(out, &err);
    if (spm && lipi_tokenizer_save_spm(tok, spm, &err) != LIPI_OK)
        die(spm, &err);
    printf("trained vocab=%zu seconds=%.2f\n", lipi_tokenizer_vocab_size(tok), now() - t0);
    lipi_tokenizer_free(tok);
    return 0;
}

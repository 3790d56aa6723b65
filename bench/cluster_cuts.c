/* How often a tokenizer's output cuts a grapheme cluster, counting all
 * clusters and only those seen at least 5 times in a training text (the
 * measure of the grapheme-safe Unigram work):
 *
 *   cluster_cuts TOKENIZER TRAIN_TEXT TEST_FILE...
 *
 * For each test file (one text per line): token boundaries inside the line
 * (distinct token ends, special tokens none since none are added), how many
 * of them fall inside an extended grapheme cluster (lipi_graphemes: UAX #29
 * with ICU's Indic conjunct rule), and how many inside a cluster of several
 * code points that TRAIN_TEXT holds at least 5 times. Built by
 * bench/cluster_cuts.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder.h"
#include "tokenizer/tokenizer.h"
#include "trainer/trainer.h"

enum { SEEN = 5 };

static void die(const char *what, const lipi_error *err)
{
    fprintf(stderr, "cluster_cuts: %s: %s\n", what, err->msg);
    exit(1);
}

/* Calls fn(line, len, ctx) for each line of path. */
static void each_line(const char *path, void (*fn)(const char *, size_t, void *), void *ctx)
{
    lipi_line_reader *r = NULL;
    lipi_error err = {0};
    if (lipi_line_reader_open(path, LIPI_INVALID_ERROR, &r, &err) != LIPI_OK)
        die(path, &err);
    for (;;) {
        const char *line;
        size_t len;
        if (lipi_line_reader_next(r, &line, &len, &err) != LIPI_OK)
            die(path, &err);
        if (!line)
            break;
        fn(line, len, ctx);
    }
    lipi_line_reader_close(r);
}

typedef struct {
    lipi_counts *seen;
    size_t *bounds, cap;
} train_ctx;

static void count_clusters(const char *line, size_t len, void *vctx)
{
    train_ctx *c = vctx;
    size_t n;
    lipi_error err = {0};
    if (lipi_graphemes(line, len, &c->bounds, &c->cap, &n, &err) != LIPI_OK)
        die("graphemes", &err);
    for (size_t k = 0; k < n; k++) {
        size_t a = c->bounds[k], b = c->bounds[k + 1];
        size_t first = 1;
        while (a + first < b && ((unsigned char)line[a + first] & 0xC0) == 0x80)
            first++;
        if (a + first < b && lipi_counts_add(c->seen, line + a, b - a, 1, &err) != LIPI_OK)
            die("counts", &err);
    }
}

typedef struct {
    const lipi_counts *seen;
    const lipi_encoder *enc;
    lipi_session *s;
    lipi_encoding out;
    size_t *bounds, cap;
    unsigned long long boundaries, cuts, cuts_seen;
} test_ctx;

static void measure(const char *line, size_t len, void *vctx)
{
    test_ctx *c = vctx;
    lipi_error err = {0};
    lipi_encode_options opt;
    lipi_encode_options_default(c->enc, &opt);
    opt.add_special_tokens = false;
    c->out.cap = 0;
    if (lipi_encode(c->s, line, len, &opt, &c->out, &err) != LIPI_OK)
        die("encode", &err);
    size_t n_tok = c->out.len;
    c->out.offsets = realloc(c->out.offsets, (n_tok + 1) * sizeof *c->out.offsets);
    c->out.ids = realloc(c->out.ids, (n_tok + 1) * sizeof *c->out.ids);
    c->out.cap = n_tok + 1;
    if (lipi_encode(c->s, line, len, &opt, &c->out, &err) != LIPI_OK)
        die("encode", &err);
    size_t n;
    if (lipi_graphemes(line, len, &c->bounds, &c->cap, &n, &err) != LIPI_OK)
        die("graphemes", &err);
    /* Token ends rise (a byte-fallback run shares one span); walk both. */
    size_t k = 0, last = 0;
    for (size_t t = 0; t < n_tok; t++) {
        size_t end = c->out.offsets[t].end;
        if (end == last || end == 0 || end >= len)
            continue;
        last = end;
        c->boundaries++;
        while (k < n && c->bounds[k + 1] <= end)
            k++;
        if (c->bounds[k] == end)
            continue;
        c->cuts++; /* end is inside cluster [bounds[k], bounds[k + 1]) */
        size_t a = c->bounds[k], b = c->bounds[k + 1];
        if (lipi_counts_get(c->seen, line + a, b - a) >= SEEN)
            c->cuts_seen++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: cluster_cuts TOKENIZER TRAIN_TEXT TEST_FILE...\n");
        return 2;
    }
    lipi_error err = {0};
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    if (lipi_tokenizer_open(argv[1], NULL, &tok, &err) != LIPI_OK ||
        lipi_encoder_new(tok, &enc, &err) != LIPI_OK)
        die(argv[1], &err);
    train_ctx tc = {0};
    if (lipi_counts_new(&tc.seen) != LIPI_OK)
        return 1;
    each_line(argv[2], count_clusters, &tc);
    printf("file\tboundaries\tcuts\tcut_share\tcuts_seen%d\tcut_seen_share\n", SEEN);
    for (int f = 3; f < argc; f++) {
        test_ctx c = {.seen = tc.seen, .enc = enc};
        if (lipi_session_new(enc, &c.s) != LIPI_OK)
            return 1;
        each_line(argv[f], measure, &c);
        printf("%s\t%llu\t%llu\t%.4f%%\t%llu\t%.4f%%\n", argv[f], c.boundaries, c.cuts,
               c.boundaries ? 100.0 * (double)c.cuts / (double)c.boundaries : 0.0, c.cuts_seen,
               c.boundaries ? 100.0 * (double)c.cuts_seen / (double)c.boundaries : 0.0);
        lipi_session_free(c.s);
        free(c.out.offsets);
        free(c.out.ids);
        free(c.bounds);
    }
    free(tc.bounds);
    lipi_counts_free(tc.seen);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return 0;
}

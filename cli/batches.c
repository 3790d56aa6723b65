/* Input lines in batches, and the options shared by the model commands
 * (cli/embedder.h). */
#include "cli/embedder.h"

#include <string.h>

#include "cli/cli.h"
#include "cli/retrieval.h"
#include "cli/signals.h"

typedef struct {
    cli_text_batch texts;
    size_t *line_no;   /* of each text in its file */
    int *file;         /* index into files */
    size_t cap;
} positioned;

static lipi_status note_position(positioned *p, int file, size_t line, lipi_error *err)
{
    size_t i = p->texts.n - 1;
    if (i >= p->cap) {
        size_t c = p->cap ? 2 * p->cap : 64;
        size_t *l = lipi_reallocarray(p->line_no, c, sizeof *l);
        if (l)
            p->line_no = l;
        int *f = l ? lipi_reallocarray(p->file, c, sizeof *f) : NULL;
        if (!f)
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        p->file = f;
        p->cap = c;
    }
    p->line_no[i] = line;
    p->file[i] = file;
    return LIPI_OK;
}

/* Runs fn on what p holds; gives an error about text k its file and line. */
static lipi_status flush(positioned *p, char **files, cli_batch_fn fn, void *ctx,
                         cli_lines_progress *prog, lipi_error *err)
{
    size_t n = p->texts.n;
    if (!n)
        return LIPI_OK;
    lipi_status st = fn(p->texts.ptrs, p->texts.lens, n, ctx, err);
    if (st != LIPI_OK) {
        if (err->line >= 1 && err->line <= n && !err->path[0]) {
            size_t k = err->line - 1;
            snprintf(err->path, sizeof err->path, "%s", files[p->file[k]]);
            err->line = p->line_no[k];
        }
        return st;
    }
    cli_lines_progress_add(prog, n);
    cli_text_batch_clear(&p->texts);
    return LIPI_OK;
}

int cli_for_each_batch(const char *sub, char **files, int nfiles, lipi_invalid_mode mode,
                       size_t batch, bool progress, cli_batch_fn fn, void *ctx)
{
    static char *stdin_only[] = {"-"};
    if (nfiles == 0) {
        files = stdin_only;
        nfiles = 1;
    }
    positioned p = {0};
    cli_lines_progress prog;
    cli_lines_progress_start(&prog, sub, progress, files, nfiles);
    lipi_error err = {0};
    lipi_status st = LIPI_OK;
    for (int f = 0; f < nfiles && st == LIPI_OK; f++) {
        lipi_line_reader *r = NULL;
        st = lipi_line_reader_open(files[f], mode, &r, &err);
        while (st == LIPI_OK) {
            const char *line;
            size_t len;
            st = lipi_line_reader_next(r, &line, &len, &err);
            if (st != LIPI_OK || !line)
                break;
            st = cli_text_batch_add(&p.texts, line, len, &err);
            if (st == LIPI_OK)
                st = note_position(&p, f, lipi_line_reader_line_no(r), &err);
            if (st == LIPI_OK && p.texts.n == batch)
                st = flush(&p, files, fn, ctx, &prog, &err);
        }
        lipi_line_reader_close(r);
    }
    if (st == LIPI_OK)
        st = flush(&p, files, fn, ctx, &prog, &err);
    cli_lines_progress_done(&prog);
    cli_text_batch_free(&p.texts);
    lipi_free(p.line_no);
    lipi_free(p.file);
    if (st != LIPI_OK) {
        cli_report(sub, &err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

int cli_write_batches(const char *sub, char **files, int nfiles, const cli_args *a, size_t lines,
                      const char *out, cli_batch_fn fn, void *ctx, FILE **f)
{
    lipi_output *o = NULL;
    lipi_error err = {0};
    int slot;
    if (cli_output_open(out, &o, f, &slot, &err) != LIPI_OK) {
        cli_report(sub, &err);
        return EXIT_FAIL;
    }
    int rc = cli_for_each_batch(sub, files, nfiles, a->mode, lines, !a->quiet && out, fn, ctx);
    if (rc != EXIT_OK) {
        lipi_output_abort(o);
        cli_cleanup_done(slot);
        return rc;
    }
    lipi_status st = lipi_output_commit(o, &err);
    cli_cleanup_done(slot);
    if (st != LIPI_OK) {
        cli_report(sub, &err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

void cli_count_truncated(const uint8_t *flags, size_t n, size_t *count)
{
    for (size_t i = 0; i < n; i++)
        *count += flags[i];
}

void cli_report_truncated(const char *sub, size_t n, size_t max_length)
{
    if (n)
        fprintf(stderr,
                "lipi %s: %zu %s longer than %zu tokens, truncated (--strict makes this an "
                "error)\n",
                sub, n, lipi_plural(n, "line was", "lines were"), max_length);
}

const char cli_model_options_help[] =
    "  -m, --model MODEL    a Hugging Face model folder (config.json, safetensors\n"
    "                       weights, its tokenizer) or a hub name (ORG/NAME) in the\n"
    "                       Hugging Face cache (see 'lipi download')\n"
    "  --revision REV       with a hub name: branch, tag or commit (default main)\n"
    "  --pooling MODE       cls, mean, max or mean_sqrt_len (default: the model's)\n"
    "  --normalize          L2-normalize the embeddings (default: the model's)\n"
    "  --batch N            sentences per batch (default 32); vectors depend on it,\n"
    "                       not on --threads\n"
    "  --max-length N       truncate longer inputs to N tokens (default: the model's)\n"
    "  --strict             a line longer than that is an error, not truncated\n"
    "  --threads N          threads (default: all cores)\n"
    "  --dtype f32|int8     int8: quantized projections, faster, cosine >= 0.99\n"
    "  --invalid MODE       invalid UTF-8: error (default) or replace\n"
    "  --quiet              no progress line\n";

const char cli_prompt_options_help[] =
    "  --prompt TEXT        put TEXT before every line (e5: 'passage: ')\n"
    "  --prompt-name NAME   the prompt NAME of the model's\n"
    "                       config_sentence_transformers.json (default: its\n"
    "                       default_prompt_name, else no prompt)\n"
    "  --dimensions K       Matryoshka: keep the first K floats of each vector,\n"
    "                       normalized again when the model normalizes\n";

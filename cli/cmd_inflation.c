/* `lipi inflation`: how many more tokens the same content costs per
 * language (parallel files) or per script (one mixed text), for one or more
 * tokenizers. Loading, measuring and the figures come from report/report.h;
 * this file parses the options and prints. */
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/signals.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report.h"

#define SUB "inflation"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi inflation -t TOK [-t TOK ...] --parallel DIR_OR_FILE... [OPTIONS]\n"
            "       lipi inflation -t TOK [-t TOK ...] --text FILE [OPTIONS]\n"
            "\n"
            "Measures how many tokens the same content costs in each language, per\n"
            "tokenizer: parity against a reference language (tokens of the language /\n"
            "tokens of the reference over the same lines), fertility (tokens per ICU\n"
            "word), characters and bytes per token, words split into two or more tokens,\n"
            "unknown and byte-fallback tokens, and token boundaries that cut a grapheme\n"
            "cluster. Special tokens are not added. Rows with over 10%% of their\n"
            "characters in unknown tokens are marked not comparable (*).\n"
            "\n"
            "Options:\n"
            "  -t, --tokenizer TOK  a tokenizer: tokenizer.json, vocab.txt, a SentencePiece\n"
            "                       .model, a tiktoken file or name (cl100k_base, o200k_base),\n"
            "                       or a folder holding one; repeat for more. Shown by the\n"
            "                       file's name, or its folder's for tokenizer.json/vocab.txt\n"
            "  --parallel PATH      line-aligned files, one per language (the label is the\n"
            "                       file name without extension), or a folder of them\n"
            "                       (*.txt, *.dev, *.devtest, *.test, *.valid); repeatable,\n"
            "                       and further FILE arguments are added. Lines empty in any\n"
            "                       file are skipped in all\n"
            "  --reference NAME     reference language (default: eng_Latn, eng or en)\n"
            "  --text FILE          one mixed-script text instead: figures per script, no\n"
            "                       parity\n"
            "  --input KIND         what an aligned record is: lines (default); jsonl (a\n"
            "                       JSON object per line, the text in --text-field); whole\n"
            "                       (each file is one text, newlines and all); nul (records\n"
            "                       end at NUL bytes). Record i of every file is aligned\n"
            "  --text-field NAME    jsonl: the member holding the text (default: text)\n"
            "  --format FMT         table (default), csv, json or html; taken from the -o\n"
            "                       file's extension when not given\n"
            "  -o, --output FILE    write there (atomically) instead of standard output\n"
            "  --threads N          worker threads (default: the number of CPUs)\n"
            "  --invalid MODE       invalid UTF-8: error (default) or replace (with U+FFFD)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Inference cost (--cost; --cost-model, --context and --price-per-million imply it):\n"
            "  --cost               add what the tokens cost a transformer, per tokenizer and\n"
            "                       language, from each aligned line's token count n\n"
            "  --cost-model M       bert-base (default: 12 layers, d 768, d_ff 3072, 12 heads,\n"
            "                       fp32), decoder-7b-gqa (32 layers, d 4096, d_ff 11008, 32\n"
            "                       heads, 8 KV heads of 128, gated MLP, fp16), or a Hugging\n"
            "                       Face config.json\n"
            "  --context N          context length in tokens for context_lines (default 8192)\n"
            "  --price-per-million X  price of a million tokens, for price_per_1k_lines\n"
            "Fields (L layers, d hidden, d_ff intermediate, n_kv KV heads of d_head, m = 3\n"
            "for a gated MLP else 2, a multiply-add = 2 FLOPs):\n"
            "  attention_ratio          sum of n^2 / that of the reference, same lines\n"
            "  forward_flops_per_line   mean of L*(2nd(2d + 2 n_kv d_head) + 4n^2 d + 2m n d d_ff)\n"
            "                           (BERT-base: L*(8nd^2 + 4n^2 d + 4nd d_ff))\n"
            "  forward_flops_ratio      sum of those FLOPs / that of the reference\n"
            "  kv_cache_bytes_per_line  mean of 2 L n_kv d_head bytes n\n"
            "  context_lines            context / tokens per line\n"
            "  price_per_1k_lines       tokens of 1,000 lines * price / 1,000,000\n"
            "  gini, premium            per tokenizer: Gini coefficient of tokens per line\n"
            "                           over the languages, and most / fewest tokens per\n"
            "                           line (Petrov et al. 2023) with the languages\n"
            "The table shows parity, attention ratio, KV-cache MB per 1,000 lines and\n"
            "context lines; CSV and JSON carry every field.\n"
            "\n"
            "Example:\n"
            "  lipi inflation -t cl100k_base -t bert/vocab.txt --parallel flores200/devtest\n"
            "  lipi inflation -t cl100k_base --parallel flores200/devtest -o report.html\n"
            "  lipi inflation -t cl100k_base --parallel flores200/devtest --cost-model \\\n"
            "      decoder-7b-gqa --price-per-million 0.5 --format json\n");
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

static bool guess_format(const char *path, lipi_inflation_format *fmt)
{
    static const struct {
        const char *ext;
        lipi_inflation_format fmt;
    } exts[] = {{".html", LIPI_INFLATION_HTML}, {".htm", LIPI_INFLATION_HTML},
                {".json", LIPI_INFLATION_JSON}, {".csv", LIPI_INFLATION_CSV}};
    size_t len = strlen(path);
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t n = strlen(exts[i].ext);
        if (len > n && strcmp(path + len - n, exts[i].ext) == 0) {
            *fmt = exts[i].fmt;
            return true;
        }
    }
    return false;
}

typedef struct {
    const char **tok_paths, **parallel;
    size_t n_tok, n_parallel;
    const char *reference, *text, *output;
    lipi_inflation_format fmt;
    size_t threads;
    lipi_record_options ro; /* --input, --text-field, --invalid */
    bool cost;
    const char *cost_model; /* NULL: bert-base */
    uint64_t context;
    double price_per_million; /* NaN: none */
} options;

/* Runs the report; returns an exit code. */
static int inflation(const options *o)
{
    int rc = EXIT_FAIL;
    lipi_error err = {0};
    lipi_inflation_tokenizers *toks = NULL;
    lipi_parallel_files *files = NULL;
    lipi_inflation_report *rep = NULL;
    bool failed = false;
    if (lipi_inflation_tokenizers_open(o->tok_paths, o->n_tok, o->threads, &toks, &err) !=
        LIPI_OK)
        goto report;
    const char *const *labels = lipi_inflation_tokenizers_labels(toks);

    /* --text reads its file as a parallel set of one, so empty lines are
     * skipped and reading is batched the same way. */
    if (o->text) {
        const char *one[] = {o->text};
        if (lipi_parallel_files_open_records(one, 1, NULL, &o->ro, &files, &err) != LIPI_OK ||
            lipi_inflation_new_text(labels, o->n_tok, &rep, &err) != LIPI_OK)
            goto report;
    } else {
        if (lipi_parallel_files_open_records(o->parallel, o->n_parallel, o->reference, &o->ro,
                                             &files, &err) != LIPI_OK ||
            lipi_inflation_new_parallel(toks, files, &rep, &err) != LIPI_OK)
            goto report;
    }
    if (lipi_inflation_measure(rep, toks, files, o->threads, &err) != LIPI_OK)
        goto report;
    if (o->cost) {
        lipi_cost_model m;
        if (lipi_cost_model_open(o->cost_model ? o->cost_model : "bert-base", &m, &err) !=
                LIPI_OK ||
            lipi_inflation_set_cost(rep, &m, o->context, o->price_per_million, &err) != LIPI_OK)
            goto report;
    }

    if (o->output) {
        cli_signals_hold(); /* see cli/signals.h */
        lipi_status st = lipi_inflation_save(rep, o->fmt, o->output, &err);
        cli_signals_release();
        if (st != LIPI_OK)
            goto report;
        rc = EXIT_OK;
    } else if (lipi_inflation_write(rep, o->fmt, stdout, &err) != LIPI_OK) {
        goto report;
    } else {
        rc = cli_finish_output(SUB);
    }
    goto done;
report:
    failed = true;
done:
    if (failed)
        cli_report(SUB, &err);
    lipi_parallel_files_close(files);
    lipi_inflation_free(rep);
    lipi_inflation_tokenizers_free(toks);
    return rc;
}

typedef struct {
    options *o;
    const char *format;
} inflation_args;

static int inflation_option(int id, const char *arg, void *via)
{
    inflation_args *ia = via;
    switch (id) {
    case 't': ia->o->tok_paths[ia->o->n_tok++] = arg; break;
    case CLI_OPT_PARALLEL: ia->o->parallel[ia->o->n_parallel++] = arg; break;
    case CLI_OPT_REFERENCE: ia->o->reference = arg; break;
    case CLI_OPT_TEXT: ia->o->text = arg; break;
    case CLI_OPT_FORMAT: ia->format = arg; break;
    case CLI_OPT_COST: ia->o->cost = true; break;
    case CLI_OPT_COST_MODEL:
        ia->o->cost = true;
        ia->o->cost_model = arg;
        break;
    case CLI_OPT_CONTEXT:
        ia->o->cost = true;
        if (!cli_parse_u64(arg, &ia->o->context) || ia->o->context == 0)
            return cli_bad_value(SUB, "--context", "a number of tokens above 0", arg);
        break;
    case CLI_OPT_PRICE_PER_MILLION:
        ia->o->cost = true;
        if (!cli_parse_double(arg, 0, 1e12, &ia->o->price_per_million))
            return cli_bad_value(SUB, "--price-per-million", "a number from 0 to 1e12", arg);
        break;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"parallel", required_argument, NULL, CLI_OPT_PARALLEL},
        {"reference", required_argument, NULL, CLI_OPT_REFERENCE},
        {"text", required_argument, NULL, CLI_OPT_TEXT},
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {"cost", no_argument, NULL, CLI_OPT_COST},
        {"cost-model", required_argument, NULL, CLI_OPT_COST_MODEL},
        {"context", required_argument, NULL, CLI_OPT_CONTEXT},
        {"price-per-million", required_argument, NULL, CLI_OPT_PRICE_PER_MILLION},
        {NULL, 0, NULL, 0},
    };
    options o = {.context = 8192, .price_per_million = NAN};
    inflation_args ia = {&o, NULL};
    cli_args a = {.mode = LIPI_INVALID_ERROR, .max_threads = 256};
    const cli_spec spec = {SUB, help, "t:", opts,
                           CLI_ARG_OUTPUT | CLI_ARG_THREADS | CLI_ARG_INVALID | CLI_ARG_INPUT,
                           inflation_option,
                           &ia, 0};
    int rc = EXIT_USAGE;
    /* argv outlives the run, so the lists hold pointers into it */
    o.tok_paths = calloc((size_t)argc, sizeof *o.tok_paths);
    o.parallel = calloc((size_t)argc, sizeof *o.parallel);
    if (!o.tok_paths || !o.parallel) {
        fprintf(stderr, "lipi " SUB ": out of memory\n");
        rc = EXIT_FAIL;
        goto done;
    }
    if ((rc = cli_parse(&spec, argc, argv, &a)) != CLI_GO_ON)
        goto done;
    rc = EXIT_USAGE;
    const char *format = ia.format;
    o.output = a.output;
    o.ro = a.ro;
    o.ro.invalid = a.mode;
    for (int i = optind; i < argc; i++)
        o.parallel[o.n_parallel++] = argv[i];
    if (o.n_tok == 0) {
        rc = cli_usage_error(SUB, "give at least one tokenizer with -t");
        goto done;
    }
    if (!o.text == !o.n_parallel) {
        rc = cli_usage_error(SUB, o.text ? "give --parallel files or --text, not both"
                                         : "give --parallel files or a --text file");
        goto done;
    }
    if (o.text && o.reference) {
        rc = cli_usage_error(SUB, "--reference is for --parallel files; --text has no parity");
        goto done;
    }
    o.fmt = LIPI_INFLATION_TABLE;
    if (format) {
        lipi_error err = {0};
        if (lipi_inflation_format_parse(format, &o.fmt, &err) != LIPI_OK) {
            rc = cli_usage_error(SUB, "--format: %s", err.msg);
            goto done;
        }
    } else if (o.output) {
        guess_format(o.output, &o.fmt);
    }
    o.threads = lipi_thread_count(a.threads, 64);
    rc = inflation(&o);
done:
    free(o.tok_paths);
    free(o.parallel);
    return rc;
}

const cli_command cmd_inflation = {"inflation", "token inflation report: parity, fertility and more per language",
                                   run};

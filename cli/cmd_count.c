/* `lipi count`: word counts of a corpus, and merging of counts files, so
 * counting can run on many machines and training on one. */
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/signals.h"
#include "cli/text_options.h"

#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi count [OPTIONS] -o COUNTS.tsv FILE...\n"
            "       lipi count --merge -o ALL.tsv COUNTS.tsv...\n"
            "\n"
            "Counts the pre-tokenized words of the FILEs' records (lines by default; '-'\n"
            "is standard input; .gz, .xz and .zst are decompressed) and writes\n"
            "'word<TAB>count' lines sorted by count (the format SentencePiece reads with\n"
            "--input_format=tsv). With --merge, adds up counts files instead. 'lipi train\n"
            "--from-counts ALL.tsv' then trains the same tokenizer as training on all the\n"
            "files: use the same --input, --normalizer and --pattern options for counting\n"
            "and training.\n"
            "\n"
            "Options:\n"
            "  -o, --output FILE     where to write the counts (required; '-' for stdout)\n"
            "  --merge               add up counts files\n"
            CLI_INPUT_OPTIONS_HELP
            CLI_TEXT_OPTIONS_HELP
            "  --threads N           counting threads (default: all cores)\n"
            "  --invalid MODE        invalid UTF-8: error (default) or replace\n"
            "  --quiet               no progress on stderr\n"
            "  -h, --help            show this help\n");
}

/* --merge, the one option of count's own. */
static int count_option(int id, const char *arg, void *vmerge)
{
    (void)id;
    (void)arg;
    *(bool *)vmerge = true;
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"merge", no_argument, NULL, CLI_OPT_MERGE},
        {NULL, 0, NULL, 0},
    };
    lipi_count_options copt;
    lipi_count_options_default(&copt);
    cli_args a = {.mode = copt.invalid, .threads = copt.threads, .max_threads = 1024};
    cli_text_options_default(&a.text);
    bool merge = false;
    const cli_spec spec = {"count", help, NULL, opts,
                           CLI_ARG_OUTPUT | CLI_ARG_THREADS | CLI_ARG_INVALID | CLI_ARG_QUIET |
                               CLI_ARGS_TEXT | CLI_ARG_INPUT,
                           count_option, &merge, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    copt.invalid = a.mode;
    copt.threads = a.threads;
    copt.records = a.ro;
    const char *out = a.output;
    bool quiet = a.quiet;
    if (!out)
        return cli_usage_error("count", "missing -o FILE (where to write the counts)");
    if (optind >= argc)
        return cli_usage_error("count", "no input files (use '-' for standard input)");

    const char *const *files = (const char *const *)argv + optind;
    size_t nfiles = (size_t)(argc - optind);
    lipi_error err = {0};
    lipi_status st;
    lipi_counts *counts = NULL;
    if (merge) {
        st = lipi_counts_new(&counts);
        if (st != LIPI_OK)
            lipi_error_set(&err, st, NULL, 0, 0, "out of memory");
        for (size_t i = 0; st == LIPI_OK && i < nfiles; i++)
            st = lipi_counts_load(files[i], counts, &err);
    } else {
        lipi_normalizer *norm = NULL;
        lipi_pretokenizer *pre = NULL;
        if (cli_text_build(&a.text, &norm, &pre, &err) != LIPI_OK) {
            cli_report("count", &err);
            return EXIT_USAGE;
        }
        cli_progress prog;
        cli_progress_init(&prog, quiet);
        copt.progress = cli_progress_report;
        copt.progress_user = &prog;
        st = lipi_count_files(files, nfiles, norm, pre, &copt, &counts, &err);
        lipi_pretokenizer_free(pre);
        lipi_normalizer_free(norm);
    }
    if (st == LIPI_OK) {
        /* The save's temporary is the library's own: a signal meanwhile
         * waits until it is renamed or removed (cli/signals.h). */
        cli_signals_hold();
        st = lipi_counts_save(counts, out, &err);
        cli_signals_release();
    }
    lipi_counts_free(counts);
    if (st != LIPI_OK) {
        cli_report("count", &err);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

const cli_command cmd_count = {"count", "count words of a corpus, or merge counts files", run};

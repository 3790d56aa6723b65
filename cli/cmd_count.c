/* `lipi count`: word counts of a corpus, and merging of counts files, so
 * counting can run on many machines and training on one. */
#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/signals.h"
#include "cli/text_options.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi count [OPTIONS] -o COUNTS.tsv FILE...\n"
            "       lipi count --merge -o ALL.tsv COUNTS.tsv...\n"
            "\n"
            "Counts the pre-tokenized words of the FILEs ('-' is standard input; .gz, .xz\n"
            "and .zst are decompressed) and writes 'word<TAB>count' lines sorted by count\n"
            "(the format SentencePiece reads with --input_format=tsv). With --merge, adds\n"
            "up counts files instead. 'lipi train --from-counts ALL.tsv' then trains the\n"
            "same tokenizer as training on all the files: use the same --normalizer and\n"
            "--pattern options for counting and training.\n"
            "\n"
            "Options:\n"
            "  -o, --output FILE     where to write the counts (required; '-' for stdout)\n"
            "  --merge               add up counts files\n"
            CLI_TEXT_OPTIONS_HELP
            "  --threads N           counting threads (default: all cores)\n"
            "  --invalid MODE        invalid UTF-8: error (default) or replace\n"
            "  --quiet               no progress on stderr\n"
            "  -h, --help            show this help\n");
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"merge", no_argument, NULL, 'm'},
        {"threads", required_argument, NULL, 't'},
        {"invalid", required_argument, NULL, 'i'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        CLI_TEXT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    cli_text_options text;
    cli_text_options_default(&text);
    lipi_count_options copt;
    lipi_count_options_default(&copt);
    const char *out = NULL;
    bool merge = false, quiet = false;
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        if (cli_text_option(c, optarg, &text))
            continue;
        switch (c) {
        case 'o': out = optarg; break;
        case 'm': merge = true; break;
        case 't':
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 1024)
                return cli_usage_error("count", "--threads takes a number from 1 to 1024, not '%s'", optarg);
            copt.threads = (size_t)v;
            break;
        case 'i':
            if (!cli_parse_invalid(optarg, &copt.invalid))
                return cli_usage_error("count", "--invalid takes 'error' or 'replace', not '%s'", optarg);
            break;
        case 'q': quiet = true; break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error("count", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("count", "unknown option '%s'", argv[optind - 1]);
        }
    }
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
        if (cli_text_build(&text, &norm, &pre, &err) != LIPI_OK) {
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

/* `lipi train`: learns a tokenizer from a corpus (or from counts files) and
 * writes it as a Hugging Face tokenizer.json. Parses the options into a
 * lipi_train_job, calls lipi_train (trainer/train.c: counting, balancing,
 * BPE or Unigram), writes the outputs and prints progress. */
#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/signals.h"
#include "cli/options.h"
#include "cli/text_options.h"

#include <getopt.h>
#include <string.h>

#define MAX_SPECIAL 1024

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi train [--type bpe|unigram] --vocab-size N -o tokenizer.json [OPTIONS] FILE...\n"
            "       lipi train [--type bpe|unigram] --vocab-size N -o tokenizer.json --from-counts COUNTS.tsv\n"
            "\n"
            "Learns a subword vocabulary from the FILEs ('-' is standard input; .gz, .xz and\n"
            ".zst are decompressed) and writes a tokenizer.json that Hugging Face tokenizers\n"
            "loads unchanged. By default no token ever holds part of a grapheme cluster\n"
            "together with anything outside it, so Indic syllables such as क्षि, ने or ழ்\n"
            "are never cut across. Words longer than 65,535 bytes (a line without spaces\n"
            "can be one word) are skipped, as SentencePiece skips long sentences.\n"
            "\n"
            "Options:\n"
            "  --type TYPE           bpe (default) or unigram (Kudo 2018, as SentencePiece;\n"
            "                        words get SentencePiece's '▁' prefix)\n"
            "  --vocab-size N        vocabulary size, special tokens included (default 32000)\n"
            "  -o, --output FILE     the tokenizer.json to write (required; written atomically)\n"
            CLI_INPUT_OPTIONS_HELP
            "                        (both apply to the FILEs, --lang-file and --dev files)\n"
            "  --units char|byte     char (default): code points, unseen bytes as <0xNN>\n"
            "                        tokens (like SentencePiece BPE); byte: GPT-2 byte-level\n"
            "  --byte-fallback       with char units: add the 256 <0xNN> tokens (default)\n"
            "  --no-byte-fallback    ... or not (unseen characters become [UNK] if given)\n"
            CLI_TEXT_OPTIONS_HELP
            "  --min-frequency N     stop when the best pair occurs fewer times (default 2)\n"
            "  --special-tokens LIST comma-separated, ids 0.. in order, e.g. \"<unk>,<s>,</s>\"\n"
            "  --unk-token TOKEN     the unknown token (must be one of the special tokens)\n"
            "  --max-token-length N  longest token in characters (default: no limit for\n"
            "                        bpe, 16 for unigram)\n"
            "  --character-coverage F  keep the most frequent characters covering F of the\n"
            "                        text (default 1.0 for bpe, 0.9995 for unigram); the\n"
            "                        rest fall back to bytes\n"
            "  --limit-alphabet N    with char units: at most N base characters\n"
            "  --no-grapheme-guard   allow merges across grapheme-cluster boundaries\n"
            "  --from-counts FILE    train on a counts file from 'lipi count' (repeatable)\n"
            "  --export-merges DIR   bpe: also write DIR/vocab.json and DIR/merges.txt\n"
            "  --export-spm FILE     unigram: also write a SentencePiece .model\n"
            "  --sample N            unigram: train on a seeded random sample of N records\n"
            "  --seed N              the sample's seed (default 1)\n"
            "  --balance MODE        none (default), smoothed or parity: fair shares for\n"
            "                        every language (docs/FAIRNESS.md)\n"
            "  --lang-file LANG=FILE a file of one language (repeatable); words of the\n"
            "                        other FILEs belong to their script (Latn, Deva, ...)\n"
            "  --alpha A             smoothed: language i gets p_i ~ (n_i/N)^A of the\n"
            "                        counts (default 0.3, as XLM-R; 1 = unchanged, 0 = equal)\n"
            "  --dev DIR             parity: line-aligned dev files, one per language, as\n"
            "                        'lipi inflation --parallel' takes (never the test set)\n"
            "  --parity-threshold R  parity, bpe: plain merges while the worst language's\n"
            "                        dev tokens are within R times the best's (default 1)\n"
            "  --parity-exponent K   parity, bpe: take the pair with the highest count x\n"
            "                        (language cost / best cost)^K over all languages,\n"
            "                        not only the worst language's (default: off);\n"
            "                        unigram: a language's pruning loss weighs\n"
            "                        (cost / best cost)^K more (default 4)\n"
            "  --parity-mass M       parity, unigram: and (most tokens of a dev language /\n"
            "                        its tokens)^M more (default 1: all weigh the same)\n"
            "  --parity-others W     parity, unigram: the pruning loss of languages without\n"
            "                        a dev file weighs W (default 1); bpe (with K): their\n"
            "                        best pair scores count x W (default: never chosen)\n"
            "  --parity-target LANG=R  parity: LANG counts as on par at R times the\n"
            "                        cheapest dev cost (LANG: a --lang-file name or a\n"
            "                        script such as Telu; '*': every other; default 1)\n"
            "  --threads N           threads (default: all cores); the result never depends\n"
            "                        on it\n"
            "  --invalid MODE        invalid UTF-8: error (default) or replace\n"
            "  --quiet               no progress on stderr\n"
            "  -h, --help            show this help\n"
            "\n"
            "Example:\n"
            "  lipi train --type bpe --vocab-size 8000 -o tok.json data/flores200/*.txt\n");
}

#define MAX_LANG_FILES 256
#define MAX_COUNTS_FILES 256
#define MAX_TARGETS 256

/* Everything the options say; big arrays, so one static instance. */
typedef struct {
    lipi_train_job job; /* job.bpe.common holds the common options until train_job */
    cli_args args;      /* -o, --threads, --invalid, --quiet and the text options */
    const char *export_dir, *export_spm, *type;
    bool set_coverage, set_maxlen, set_units, set_alpha, set_pexp, set_pmass, set_pothers;
    double parity_exponent, parity_mass, parity_others;
    char *specials[MAX_SPECIAL];
    const char *lang[MAX_LANG_FILES], *file[MAX_LANG_FILES];
    const char *counts_files[MAX_COUNTS_FILES];
    const char *target_lang[MAX_TARGETS];
    double target[MAX_TARGETS];
} train_args;

/* The options of balanced training; -1 when c is another option, else an
 * exit code (EXIT_OK to go on). */
static int parse_balance_option(int c, char *arg, train_args *a)
{
    lipi_train_job *job = &a->job;
    switch (c) {
    case CLI_OPT_BALANCE:
        if (strcmp(arg, "none") == 0)
            job->balance = LIPI_BALANCE_NONE;
        else if (strcmp(arg, "smoothed") == 0)
            job->balance = LIPI_BALANCE_SMOOTHED;
        else if (strcmp(arg, "parity") == 0)
            job->balance = LIPI_BALANCE_PARITY;
        else
            return cli_usage_error("train", "--balance takes 'none', 'smoothed' or 'parity', not '%s'", arg);
        return EXIT_OK;
    case CLI_OPT_LANG_FILE: {
        char *eq = strchr(arg, '=');
        if (!eq || eq == arg || !eq[1])
            return cli_usage_error("train", "--lang-file takes LANG=FILE (e.g. hin_Deva=hi.txt), not '%s'", arg);
        if (job->n_lang_files == MAX_LANG_FILES)
            return cli_usage_error("train", "too many --lang-file options (%d at most)", MAX_LANG_FILES);
        *eq = '\0';
        a->lang[job->n_lang_files] = arg;
        a->file[job->n_lang_files++] = eq + 1;
        return EXIT_OK;
    }
    case CLI_OPT_PARITY_TARGET: {
        char *eq = strchr(arg, '=');
        if (job->n_targets == MAX_TARGETS)
            return cli_usage_error("train", "too many --parity-target options (%d at most)", MAX_TARGETS);
        if (!eq || eq == arg || !cli_parse_double(eq + 1, 0.01, 100.0, &a->target[job->n_targets]))
            return cli_usage_error("train", "--parity-target takes LANG=R with R in [0.01, 100] (e.g. Telu=1.5), not '%s'", arg);
        *eq = '\0';
        a->target_lang[job->n_targets++] = arg;
        return EXIT_OK;
    }
    case CLI_OPT_ALPHA:
        if (!cli_parse_double(arg, 0.0, 1.0, &job->alpha))
            return cli_usage_error("train", "--alpha takes a number in [0, 1], not '%s'", arg);
        a->set_alpha = true;
        return EXIT_OK;
    case CLI_OPT_DEV: job->dev = arg; return EXIT_OK;
    case CLI_OPT_PARITY_THRESHOLD:
        if (!cli_parse_double(arg, 1.0, 1e9, &job->bpe.parity_threshold))
            return cli_usage_error("train", "--parity-threshold takes a number >= 1, not '%s'", arg);
        return EXIT_OK;
    case CLI_OPT_PARITY_EXPONENT:
        if (!cli_parse_double(arg, 0.0, 1e3, &a->parity_exponent))
            return cli_usage_error("train", "--parity-exponent takes a number in [0, 1000], not '%s'", arg);
        a->set_pexp = true;
        return EXIT_OK;
    case CLI_OPT_PARITY_MASS:
        if (!cli_parse_double(arg, 0.0, 1.0, &a->parity_mass))
            return cli_usage_error("train", "--parity-mass takes a number in [0, 1], not '%s'", arg);
        a->set_pmass = true;
        return EXIT_OK;
    case CLI_OPT_PARITY_OTHERS:
        if (!cli_parse_double(arg, 1.0 / 65536.0, 1.0, &a->parity_others))
            return cli_usage_error("train", "--parity-others takes a number in [1/65536, 1], not '%s'", arg);
        a->set_pothers = true;
        return EXIT_OK;
    default: return -1;
    }
}

/* The vocabulary options, read into the BPE options (train_job gives
 * Unigram its share); -1 when c is another option, else an exit code. */
static int parse_vocab_option(int c, char *arg, train_args *a)
{
    lipi_bpe_options *bopt = &a->job.bpe;
    uint64_t v;
    switch (c) {
    case CLI_OPT_VOCAB_SIZE:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > (1u << 31))
            return cli_usage_error("train", "--vocab-size takes a number from 1 to 2147483648, not '%s'", arg);
        bopt->common.vocab_size = (size_t)v;
        return EXIT_OK;
    case CLI_OPT_UNITS:
        if (strcmp(arg, "char") == 0)
            bopt->units = LIPI_UNITS_CHAR;
        else if (strcmp(arg, "byte") == 0)
            bopt->units = LIPI_UNITS_BYTE;
        else
            return cli_usage_error("train", "--units takes 'char' or 'byte', not '%s'", arg);
        a->set_units = true;
        return EXIT_OK;
    case CLI_OPT_BYTE_FALLBACK: bopt->common.byte_fallback = true; return EXIT_OK;
    case CLI_OPT_NO_BYTE_FALLBACK: bopt->common.byte_fallback = false; return EXIT_OK;
    case CLI_OPT_MIN_FREQUENCY:
        if (!cli_parse_u64(arg, &v) || v == 0)
            return cli_usage_error("train", "--min-frequency takes a whole number >= 1, not '%s'", arg);
        bopt->min_frequency = v;
        return EXIT_OK;
    case CLI_OPT_SPECIAL_TOKENS:
        bopt->common.n_special = cli_split_list(arg, ',', a->specials, MAX_SPECIAL);
        bopt->common.special_tokens = (const char *const *)a->specials;
        return EXIT_OK;
    case CLI_OPT_UNK_TOKEN: bopt->common.unk_token = arg; return EXIT_OK;
    case CLI_OPT_MAX_TOKEN_LENGTH:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 1u << 20)
            return cli_usage_error("train", "--max-token-length takes a number from 1 to 1048576, not '%s'", arg);
        bopt->max_token_length = (size_t)v;
        a->set_maxlen = true;
        return EXIT_OK;
    case CLI_OPT_CHARACTER_COVERAGE:
        if (!cli_parse_double(arg, 1e-9, 1.0, &bopt->common.character_coverage))
            return cli_usage_error("train", "--character-coverage takes a number in (0, 1], not '%s'", arg);
        a->set_coverage = true;
        return EXIT_OK;
    case CLI_OPT_LIMIT_ALPHABET:
        if (!cli_parse_u64(arg, &v) || v == 0 || v > 1u << 21)
            return cli_usage_error("train", "--limit-alphabet takes a number from 1 to 2097152, not '%s'", arg);
        bopt->limit_alphabet = (size_t)v;
        return EXIT_OK;
    case CLI_OPT_NO_GRAPHEME_GUARD: bopt->common.grapheme_guard = false; return EXIT_OK;
    default: return -1;
    }
}

/* Inputs, outputs and running; -1 when c is another option, else an exit
 * code. */
static int parse_run_option(int c, char *arg, train_args *a)
{
    lipi_train_job *job = &a->job;
    switch (c) {
    case CLI_OPT_TYPE: a->type = arg; return EXIT_OK;
    case CLI_OPT_FROM_COUNTS:
        if (job->n_counts_files == MAX_COUNTS_FILES)
            return cli_usage_error("train", "too many --from-counts files (256 at most; merge them with 'lipi count --merge')");
        a->counts_files[job->n_counts_files++] = arg;
        return EXIT_OK;
    case CLI_OPT_EXPORT_MERGES: a->export_dir = arg; return EXIT_OK;
    case CLI_OPT_EXPORT_SPM: a->export_spm = arg; return EXIT_OK;
    case CLI_OPT_SAMPLE:
        if (!cli_parse_u64(arg, &job->unigram.sample) || job->unigram.sample == 0)
            return cli_usage_error("train", "--sample takes a number of lines >= 1, not '%s'", arg);
        return EXIT_OK;
    case CLI_OPT_SEED:
        if (!cli_parse_u64(arg, &job->unigram.sample_seed))
            return cli_usage_error("train", "--seed takes a whole number, not '%s'", arg);
        return EXIT_OK;
    default: return -1;
    }
}

/* The checks between options, once all are read; an exit code. */
static int check_args(const train_args *a, bool unigram, size_t n_pos)
{
    const lipi_train_job *job = &a->job;
    bool parity = job->balance == LIPI_BALANCE_PARITY;
    if (!unigram && strcmp(a->type, "bpe") != 0)
        return cli_usage_error("train", "--type takes 'bpe' or 'unigram', not '%s'", a->type);
    if (unigram && (a->set_units || a->export_dir))
        return cli_usage_error("train", "--units and --export-merges are for --type bpe");
    if (!unigram && (a->export_spm || job->unigram.sample))
        return cli_usage_error("train", "--export-spm and --sample are for --type unigram");
    if (!a->args.output)
        return cli_usage_error("train", "missing -o FILE (the tokenizer.json to write)");
    if (a->set_alpha && job->balance != LIPI_BALANCE_SMOOTHED)
        return cli_usage_error("train", "--alpha is for --balance smoothed");
    if (parity && !job->dev)
        return cli_usage_error("train", "--balance parity needs --dev DIR (line-aligned dev files, one per language)");
    if (job->dev && !parity)
        return cli_usage_error("train", "--dev is for --balance parity");
    if ((job->bpe.parity_threshold || a->set_pexp || a->set_pmass || a->set_pothers || job->n_targets) && !parity)
        return cli_usage_error("train", "--parity-threshold, --parity-exponent, --parity-mass, --parity-others and --parity-target are for --balance parity");
    if (job->bpe.parity_threshold && unigram)
        return cli_usage_error("train", "--parity-threshold is for --type bpe");
    if (a->set_pmass && !unigram)
        return cli_usage_error("train", "--parity-mass is for --type unigram");
    if (a->set_pothers && !unigram && !a->set_pexp)
        return cli_usage_error("train", "--parity-others needs --parity-exponent for --type bpe");
    if (a->set_pexp && !unigram && a->parity_exponent == 0.0)
        return cli_usage_error("train", "--parity-exponent takes a number in (0, 1000] for --type bpe, not 0");
    if (job->n_lang_files && job->n_counts_files)
        return cli_usage_error("train", "--lang-file counts text files; it does not go with --from-counts");
    if (job->balance != LIPI_BALANCE_NONE && job->unigram.sample)
        return cli_usage_error("train", "--sample does not go with --balance %s", parity ? "parity" : "smoothed");
    if (job->n_counts_files == 0 && n_pos == 0 && !job->n_lang_files)
        return cli_usage_error("train", "no input files (use '-' for standard input, or --from-counts)");
    if (job->n_counts_files && n_pos)
        return cli_usage_error("train", "give either input files or --from-counts, not both");
    return EXIT_OK;
}

/* Completes the job: the common options are parsed into the BPE options and
 * copied to the Unigram ones, which keep their own defaults (coverage,
 * special tokens, unknown token) where none was given. */
static void train_job(train_args *a, bool unigram, char **files, size_t n_files)
{
    lipi_train_job *job = &a->job;
    lipi_unigram_options *uopt = &job->unigram;
    job->type = unigram ? LIPI_TRAIN_UNIGRAM : LIPI_TRAIN_BPE;
    job->files = (const char *const *)files;
    job->n_files = n_files;
    job->counts_files = a->counts_files;
    job->lang_names = a->lang;
    job->lang_files = a->file;
    job->target_langs = a->target_lang;
    job->targets = a->target;
    job->bpe.parity_exponent = a->parity_exponent;
    lipi_train_job_share_options(job, (a->set_coverage ? LIPI_TRAIN_SET_COVERAGE : 0) |
                                          (a->set_maxlen ? LIPI_TRAIN_SET_MAX_LENGTH : 0) |
                                          (a->set_pexp ? LIPI_TRAIN_SET_PARITY_EXPONENT : 0));
    uopt->parity_mass = a->parity_mass;
    uopt->parity_others = a->parity_others;
    if (a->set_pothers)
        job->bpe.parity_others = a->parity_others;
}

/* Prints what lipi_train tells (a lipi_train_note_fn; not called with --quiet). */
static void print_note(const lipi_train_note *n, void *user)
{
    (void)user;
    if (n->kind == LIPI_TRAIN_DEV_FILE_UNUSED) {
        fprintf(stderr, "lipi train: dev file %s: no training data in its language, not used\n", n->path);
        return;
    }
    size_t count = lipi_balance_lang_count(n->balance);
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += lipi_balance_lang_mass(n->balance, i);
    fprintf(stderr, "lipi train: %zu %s (share of words%s):", count,
            lipi_plural(count, "language", "languages"), n->weights ? ", weight" : "");
    for (size_t i = 0; i < count; i++) {
        fprintf(stderr, " %s %.2f%%", lipi_balance_lang_name(n->balance, i),
                100.0 * (double)lipi_balance_lang_mass(n->balance, i) / (double)(total ? total : 1));
        if (n->weights)
            fprintf(stderr, " %.3f", (double)n->weights[i] / 4294967296.0);
    }
    fprintf(stderr, "\n");
}

/* Trains and writes the tokenizer and its exports; an exit code. */
static int train_and_write(train_args *a, bool unigram)
{
    lipi_error err = {0};
    lipi_normalizer *norm = NULL;
    lipi_pretokenizer *pre = NULL;
    lipi_tokenizer *tok = NULL;
    int rc = EXIT_FAIL;
    /* Fail before hours of training, not after, when the output cannot be
     * written. The checks and the saves below write temporaries this
     * command cannot see: a signal meanwhile waits until they are done. */
    cli_signals_hold();
    lipi_status st = lipi_check_writable(a->args.output, &err);
    if (st == LIPI_OK && a->export_spm)
        st = lipi_check_writable(a->export_spm, &err);
    cli_signals_release();
    if (st != LIPI_OK)
        goto fail;
    /* A .model carries the named normal forms only: refuse before training. */
    const lipi_normalizer_options *no = &a->args.text.norm_opt;
    if (a->export_spm && (no->lowercase || no->strip_accents || no->fold_digits)) {
        lipi_error_set(&err, LIPI_EINVAL, NULL, 0, 0,
                       "--export-spm: a SentencePiece .model cannot carry %s (its normalizer "
                       "is a character map of NFC/NFKC); train without it",
                       no->lowercase ? "--lowercase" : no->strip_accents ? "--strip-accents"
                                                                         : "--fold-digits");
        goto fail;
    }
    if (!a->args.text.pattern) /* unigram words carry SentencePiece's "▁" prefix */
        a->args.text.pattern = unigram ? "unigram" : "indic";
    if (cli_text_build(&a->args.text, &norm, &pre, &err) != LIPI_OK) {
        rc = EXIT_USAGE;
        goto fail;
    }
    cli_progress prog;
    cli_progress_init(&prog, a->args.quiet);
    a->job.progress = cli_progress_report;
    a->job.progress_user = &prog;
    a->job.note = a->args.quiet ? NULL : print_note;
    if (lipi_train(&a->job, norm, pre, &tok, &err) != LIPI_OK)
        goto fail;
    cli_signals_hold();
    st = lipi_tokenizer_save(tok, a->args.output, &err);
    if (st == LIPI_OK && a->export_dir)
        st = lipi_tokenizer_export_merges(tok, a->export_dir, &err);
    if (st == LIPI_OK && a->export_spm)
        st = lipi_tokenizer_save_spm(tok, a->export_spm, &err);
    cli_signals_release();
    if (st != LIPI_OK)
        goto fail;
    if (!a->args.quiet)
        fprintf(stderr, "wrote %s (%zu %s)\n", a->args.output, lipi_tokenizer_vocab_size(tok),
                lipi_plural(lipi_tokenizer_vocab_size(tok), "token", "tokens"));
    rc = EXIT_OK;
    goto done;
fail:
    cli_report("train", &err);
done:
    lipi_tokenizer_free(tok);
    return rc;
}

/* The command's own options, for cli_parse: -1 from each parser means
 * "not mine", so they are tried in turn. */
static int own_option(int id, const char *arg, void *ctx)
{
    train_args *a = ctx;
    int rc = parse_run_option(id, (char *)arg, a);
    if (rc == -1)
        rc = parse_vocab_option(id, (char *)arg, a);
    if (rc == -1)
        rc = parse_balance_option(id, (char *)arg, a);
    return rc == -1 ? cli_usage_error("train", "unknown option") : rc;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"type", required_argument, NULL, CLI_OPT_TYPE},
        {"vocab-size", required_argument, NULL, CLI_OPT_VOCAB_SIZE},
        {"units", required_argument, NULL, CLI_OPT_UNITS},
        {"byte-fallback", no_argument, NULL, CLI_OPT_BYTE_FALLBACK},
        {"no-byte-fallback", no_argument, NULL, CLI_OPT_NO_BYTE_FALLBACK},
        {"min-frequency", required_argument, NULL, CLI_OPT_MIN_FREQUENCY},
        {"special-tokens", required_argument, NULL, CLI_OPT_SPECIAL_TOKENS},
        {"unk-token", required_argument, NULL, CLI_OPT_UNK_TOKEN},
        {"max-token-length", required_argument, NULL, CLI_OPT_MAX_TOKEN_LENGTH},
        {"character-coverage", required_argument, NULL, CLI_OPT_CHARACTER_COVERAGE},
        {"limit-alphabet", required_argument, NULL, CLI_OPT_LIMIT_ALPHABET},
        {"no-grapheme-guard", no_argument, NULL, CLI_OPT_NO_GRAPHEME_GUARD},
        {"from-counts", required_argument, NULL, CLI_OPT_FROM_COUNTS},
        {"export-merges", required_argument, NULL, CLI_OPT_EXPORT_MERGES},
        {"export-spm", required_argument, NULL, CLI_OPT_EXPORT_SPM},
        {"sample", required_argument, NULL, CLI_OPT_SAMPLE},
        {"seed", required_argument, NULL, CLI_OPT_SEED},
        {"balance", required_argument, NULL, CLI_OPT_BALANCE},
        {"lang-file", required_argument, NULL, CLI_OPT_LANG_FILE},
        {"alpha", required_argument, NULL, CLI_OPT_ALPHA},
        {"dev", required_argument, NULL, CLI_OPT_DEV},
        {"parity-threshold", required_argument, NULL, CLI_OPT_PARITY_THRESHOLD},
        {"parity-exponent", required_argument, NULL, CLI_OPT_PARITY_EXPONENT},
        {"parity-mass", required_argument, NULL, CLI_OPT_PARITY_MASS},
        {"parity-others", required_argument, NULL, CLI_OPT_PARITY_OTHERS},
        {"parity-target", required_argument, NULL, CLI_OPT_PARITY_TARGET},
        {NULL, 0, NULL, 0},
    };
    static train_args a;
    memset(&a, 0, sizeof a);
    lipi_train_job_default(&a.job);
    a.job.bpe.common.vocab_size = 32000;
    cli_text_options_default(&a.args.text);
    a.args.text.pattern = NULL; /* indic, or unigram for --type unigram */
    a.args.max_threads = 1024;
    a.type = "bpe";
    a.parity_mass = 1.0;
    a.parity_others = 1.0;
    cli_spec spec = {"train", help, NULL, opts,
                     CLI_ARGS_TEXT | CLI_ARG_THREADS | CLI_ARG_INVALID | CLI_ARG_QUIET |
                         CLI_ARG_OUTPUT | CLI_ARG_INPUT,
                     own_option, &a, 0};
    int rc = cli_parse(&spec, argc, argv, &a.args);
    if (rc != CLI_GO_ON)
        return rc;
    a.job.count.threads = a.job.bpe.common.threads = a.args.threads;
    a.job.count.invalid = a.args.mode;
    a.job.count.records = a.args.ro;
    bool unigram = strcmp(a.type, "unigram") == 0;
    size_t n_pos = (size_t)(argc - optind);
    if ((rc = check_args(&a, unigram, n_pos)) != EXIT_OK)
        return rc;
    train_job(&a, unigram, argv + optind, n_pos);
    return train_and_write(&a, unigram);
}

const cli_command cmd_train = {"train", "train a BPE or Unigram tokenizer (tokenizer.json)", run};

/* `lipi train`: learns a tokenizer from a corpus (or from counts files) and
 * writes it as a Hugging Face tokenizer.json. */
#include "cli/cli.h"
#include "cli/progress.h"
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
            "are never cut across.\n"
            "\n"
            "Options:\n"
            "  --type TYPE           bpe (default) or unigram (Kudo 2018, as SentencePiece;\n"
            "                        words get SentencePiece's '▁' prefix)\n"
            "  --vocab-size N        vocabulary size, special tokens included (default 32000)\n"
            "  -o, --output FILE     the tokenizer.json to write (required; written atomically)\n"
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
            "  --sample N            unigram: train on a seeded random sample of N lines\n"
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
            "                        a dev file weighs W (default 1)\n"
            "  --threads N           threads (default: all cores); the result never depends\n"
            "                        on it\n"
            "  --invalid MODE        invalid UTF-8: error (default) or replace\n"
            "  --quiet               no progress on stderr\n"
            "  -h, --help            show this help\n"
            "\n"
            "Example:\n"
            "  lipi train --type bpe --vocab-size 8000 -o tok.json data/flores200/*.txt\n");
}

enum {
    OPT_TYPE = 2000, OPT_VOCAB, OPT_UNITS, OPT_BF, OPT_NO_BF, OPT_MINF, OPT_SPECIAL, OPT_UNK,
    OPT_MAXLEN, OPT_COVERAGE, OPT_ALPHA, OPT_NO_GUARD, OPT_COUNTS, OPT_EXPORT, OPT_THREADS,
    OPT_INVALID, OPT_QUIET, OPT_SPM, OPT_SAMPLE, OPT_SEED, OPT_BALANCE, OPT_LANG_FILE,
    OPT_SMOOTH, OPT_DEV, OPT_PTHRESH, OPT_PEXP, OPT_PMASS, OPT_POTHERS,
};

#define MAX_LANG_FILES 256

typedef struct {
    lipi_balance_mode mode;
    double alpha;
    bool set_alpha;
    const char *dev;
    char *lang[MAX_LANG_FILES], *file[MAX_LANG_FILES];
    size_t n_lang;
} balance_args;

/* Counts FILEs as lipi_count_files does, or loads counts files. */
static lipi_status count_some(const char *const *files, size_t n, bool are_counts,
                              const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                              const lipi_count_options *copt, lipi_counts **out, lipi_error *err)
{
    if (!are_counts)
        return lipi_count_files(files, n, norm, pre, copt, out, err);
    lipi_status st = lipi_counts_new(out);
    for (size_t i = 0; st == LIPI_OK && i < n; i++)
        st = lipi_counts_load(files[i], *out, err);
    return st;
}

/* Counts the language files, the mixed files (or counts files) and the dev
 * set into a new balance, and makes the counts to train on. */
static lipi_status balance_build(const balance_args *ba, const char *const *files, size_t n_files,
                                 bool are_counts, const lipi_normalizer *norm,
                                 const lipi_pretokenizer *pre, const lipi_count_options *copt,
                                 bool quiet, lipi_balance **bal, lipi_counts **train,
                                 lipi_error *err)
{
    lipi_status st;
    lipi_counts *c = NULL;
    lipi_parallel_files *dev = NULL;
    uint64_t *w = NULL;
/* One cleanup label, as in the library. */
#define TRY(expr)              \
    do {                       \
        if ((st = (expr)) != LIPI_OK) \
            goto done;         \
    } while (0)
    TRY(lipi_balance_new(bal));
    for (size_t i = 0; i < ba->n_lang; i++) {
        const char *f = ba->file[i];
        TRY(lipi_count_files(&f, 1, norm, pre, copt, &c, err));
        TRY(lipi_balance_add_lang(*bal, ba->lang[i], c, err));
        lipi_counts_free(c);
        c = NULL;
    }
    if (n_files) {
        TRY(count_some(files, n_files, are_counts, norm, pre, copt, &c, err));
        TRY(lipi_balance_add_mixed(*bal, c, err));
        lipi_counts_free(c);
        c = NULL;
    }
    if (ba->mode == LIPI_BALANCE_PARITY) {
        lipi_count_options dev_opt = *copt; /* small files: no progress lines */
        dev_opt.progress = NULL;
        TRY(lipi_parallel_files_open(&ba->dev, 1, NULL, copt->invalid, &dev, err));
        size_t used_files = 0;
        for (size_t i = 0; i < lipi_parallel_files_count(dev); i++) {
            const char *f = lipi_parallel_files_path(dev, i);
            bool used;
            TRY(lipi_count_files(&f, 1, norm, pre, &dev_opt, &c, err));
            TRY(lipi_balance_add_dev(*bal, lipi_parallel_files_label(dev, i), c, &used, err));
            lipi_counts_free(c);
            c = NULL;
            used_files += used;
            if (!used && !quiet)
                fprintf(stderr, "lipi train: dev file %s: no training data in its language, not used\n", f);
        }
        if (!used_files) {
            st = lipi_error_set(err, LIPI_EINVAL, ba->dev, 0, 0,
                                "expected dev files of the training languages, found none");
            goto done;
        }
    }
    TRY(lipi_balance_train_counts(*bal, ba->mode, ba->alpha, train, err));
    size_t n = lipi_balance_lang_count(*bal);
    w = lipi_calloc(n ? n : 1, sizeof *w);
    if (!w) {
        st = LIPI_ENOMEM;
        goto done;
    }
    if (!quiet && lipi_balance_weights(*bal, ba->mode == LIPI_BALANCE_SMOOTHED ? ba->alpha : 1.0, w, err) == LIPI_OK) {
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += lipi_balance_lang_mass(*bal, i);
        bool smoothed = ba->mode == LIPI_BALANCE_SMOOTHED;
        fprintf(stderr, "lipi train: %zu languages (share of words%s):", n,
                smoothed ? ", weight" : "");
        for (size_t i = 0; i < n; i++) {
            fprintf(stderr, " %s %.2f%%", lipi_balance_lang_name(*bal, i),
                    100.0 * (double)lipi_balance_lang_mass(*bal, i) / (double)(total ? total : 1));
            if (smoothed)
                fprintf(stderr, " %.3f", (double)w[i] / 4294967296.0);
        }
        fprintf(stderr, "\n");
    }
done:
    lipi_free(w);
    lipi_parallel_files_close(dev);
    lipi_counts_free(c);
    return st;
#undef TRY
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"type", required_argument, NULL, OPT_TYPE},
        {"vocab-size", required_argument, NULL, OPT_VOCAB},
        {"output", required_argument, NULL, 'o'},
        {"units", required_argument, NULL, OPT_UNITS},
        {"byte-fallback", no_argument, NULL, OPT_BF},
        {"no-byte-fallback", no_argument, NULL, OPT_NO_BF},
        {"min-frequency", required_argument, NULL, OPT_MINF},
        {"special-tokens", required_argument, NULL, OPT_SPECIAL},
        {"unk-token", required_argument, NULL, OPT_UNK},
        {"max-token-length", required_argument, NULL, OPT_MAXLEN},
        {"character-coverage", required_argument, NULL, OPT_COVERAGE},
        {"limit-alphabet", required_argument, NULL, OPT_ALPHA},
        {"no-grapheme-guard", no_argument, NULL, OPT_NO_GUARD},
        {"from-counts", required_argument, NULL, OPT_COUNTS},
        {"export-merges", required_argument, NULL, OPT_EXPORT},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"invalid", required_argument, NULL, OPT_INVALID},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"export-spm", required_argument, NULL, OPT_SPM},
        {"sample", required_argument, NULL, OPT_SAMPLE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"balance", required_argument, NULL, OPT_BALANCE},
        {"lang-file", required_argument, NULL, OPT_LANG_FILE},
        {"alpha", required_argument, NULL, OPT_SMOOTH},
        {"dev", required_argument, NULL, OPT_DEV},
        {"parity-threshold", required_argument, NULL, OPT_PTHRESH},
        {"parity-exponent", required_argument, NULL, OPT_PEXP},
        {"parity-mass", required_argument, NULL, OPT_PMASS},
        {"parity-others", required_argument, NULL, OPT_POTHERS},
        {"help", no_argument, NULL, 'h'},
        CLI_TEXT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    static char *specials[MAX_SPECIAL];
    cli_text_options text;
    cli_text_options_default(&text);
    lipi_count_options copt;
    lipi_count_options_default(&copt);
    lipi_bpe_options bopt;
    lipi_bpe_options_default(&bopt);
    bopt.vocab_size = 32000;
    const char *out = NULL, *export_dir = NULL, *export_spm = NULL, *type = "bpe";
    bool set_coverage = false, set_maxlen = false, set_units = false, set_pattern = false;
    uint64_t sample = 0, seed = 1;
    static balance_args ba;
    memset(&ba, 0, sizeof ba);
    ba.alpha = 0.3;
    double parity_threshold = 0.0, parity_exponent = 0.0, parity_mass = 1.0, parity_others = 1.0;
    bool set_pexp = false, set_uweights = false;
    const char *counts_files[256];
    size_t n_counts = 0;
    bool quiet = false;
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        if (cli_text_option(c, optarg, &text)) {
            set_pattern |= c == 1005 || c == 1006;
            continue;
        }
        switch (c) {
        case OPT_TYPE: type = optarg; break;
        case 'o': out = optarg; break;
        case OPT_VOCAB:
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > (1u << 31))
                return cli_usage_error("train", "--vocab-size takes a number from 1 to 2147483648, not '%s'", optarg);
            bopt.vocab_size = (size_t)v;
            break;
        case OPT_UNITS:
            if (strcmp(optarg, "char") == 0)
                bopt.units = LIPI_UNITS_CHAR;
            else if (strcmp(optarg, "byte") == 0)
                bopt.units = LIPI_UNITS_BYTE;
            else
                return cli_usage_error("train", "--units takes 'char' or 'byte', not '%s'", optarg);
            set_units = true;
            break;
        case OPT_BF: bopt.byte_fallback = true; break;
        case OPT_NO_BF: bopt.byte_fallback = false; break;
        case OPT_MINF:
            if (!cli_parse_u64(optarg, &v) || v == 0)
                return cli_usage_error("train", "--min-frequency takes a whole number >= 1, not '%s'", optarg);
            bopt.min_frequency = v;
            break;
        case OPT_SPECIAL:
            bopt.n_special = cli_split_list(optarg, ',', specials, MAX_SPECIAL);
            bopt.special_tokens = (const char *const *)specials;
            break;
        case OPT_UNK: bopt.unk_token = optarg; break;
        case OPT_MAXLEN:
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 1u << 20)
                return cli_usage_error("train", "--max-token-length takes a number from 1 to 1048576, not '%s'", optarg);
            bopt.max_token_length = (size_t)v;
            set_maxlen = true;
            break;
        case OPT_COVERAGE:
            if (!cli_parse_double(optarg, 1e-9, 1.0, &bopt.character_coverage))
                return cli_usage_error("train", "--character-coverage takes a number in (0, 1], not '%s'", optarg);
            set_coverage = true;
            break;
        case OPT_ALPHA:
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 1u << 21)
                return cli_usage_error("train", "--limit-alphabet takes a number from 1 to 2097152, not '%s'", optarg);
            bopt.limit_alphabet = (size_t)v;
            break;
        case OPT_NO_GUARD: bopt.grapheme_guard = false; break;
        case OPT_COUNTS:
            if (n_counts == sizeof counts_files / sizeof counts_files[0])
                return cli_usage_error("train", "too many --from-counts files (256 at most; merge them with 'lipi count --merge')");
            counts_files[n_counts++] = optarg;
            break;
        case OPT_EXPORT: export_dir = optarg; break;
        case OPT_THREADS:
            if (!cli_parse_u64(optarg, &v) || v == 0 || v > 1024)
                return cli_usage_error("train", "--threads takes a number from 1 to 1024, not '%s'", optarg);
            copt.threads = bopt.threads = (size_t)v;
            break;
        case OPT_INVALID:
            if (!cli_parse_invalid(optarg, &copt.invalid))
                return cli_usage_error("train", "--invalid takes 'error' or 'replace', not '%s'", optarg);
            break;
        case OPT_QUIET: quiet = true; break;
        case OPT_SPM: export_spm = optarg; break;
        case OPT_SAMPLE:
            if (!cli_parse_u64(optarg, &sample) || sample == 0)
                return cli_usage_error("train", "--sample takes a number of lines >= 1, not '%s'", optarg);
            break;
        case OPT_SEED:
            if (!cli_parse_u64(optarg, &seed))
                return cli_usage_error("train", "--seed takes a whole number, not '%s'", optarg);
            break;
        case OPT_BALANCE:
            if (strcmp(optarg, "none") == 0)
                ba.mode = LIPI_BALANCE_NONE;
            else if (strcmp(optarg, "smoothed") == 0)
                ba.mode = LIPI_BALANCE_SMOOTHED;
            else if (strcmp(optarg, "parity") == 0)
                ba.mode = LIPI_BALANCE_PARITY;
            else
                return cli_usage_error("train", "--balance takes 'none', 'smoothed' or 'parity', not '%s'", optarg);
            break;
        case OPT_LANG_FILE: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || !eq[1])
                return cli_usage_error("train", "--lang-file takes LANG=FILE (e.g. hin_Deva=hi.txt), not '%s'", optarg);
            if (ba.n_lang == MAX_LANG_FILES)
                return cli_usage_error("train", "too many --lang-file options (%d at most)", MAX_LANG_FILES);
            *eq = '\0';
            ba.lang[ba.n_lang] = optarg;
            ba.file[ba.n_lang++] = eq + 1;
            break;
        }
        case OPT_SMOOTH:
            if (!cli_parse_double(optarg, 0.0, 1.0, &ba.alpha))
                return cli_usage_error("train", "--alpha takes a number in [0, 1], not '%s'", optarg);
            ba.set_alpha = true;
            break;
        case OPT_DEV: ba.dev = optarg; break;
        case OPT_PTHRESH:
            if (!cli_parse_double(optarg, 1.0, 1e9, &parity_threshold))
                return cli_usage_error("train", "--parity-threshold takes a number >= 1, not '%s'", optarg);
            break;
        case OPT_PEXP:
            if (!cli_parse_double(optarg, 0.0, 1e3, &parity_exponent))
                return cli_usage_error("train", "--parity-exponent takes a number in [0, 1000], not '%s'", optarg);
            set_pexp = true;
            break;
        case OPT_PMASS:
            if (!cli_parse_double(optarg, 0.0, 1.0, &parity_mass))
                return cli_usage_error("train", "--parity-mass takes a number in [0, 1], not '%s'", optarg);
            set_uweights = true;
            break;
        case OPT_POTHERS:
            if (!cli_parse_double(optarg, 1.0 / 65536.0, 1.0, &parity_others))
                return cli_usage_error("train", "--parity-others takes a number in [1/65536, 1], not '%s'", optarg);
            set_uweights = true;
            break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error("train", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("train", "unknown option '%s'", argv[optind - 1]);
        }
    }
    bool unigram = strcmp(type, "unigram") == 0;
    if (!unigram && strcmp(type, "bpe") != 0)
        return cli_usage_error("train", "--type takes 'bpe' or 'unigram', not '%s'", type);
    if (unigram && (set_units || export_dir))
        return cli_usage_error("train", "--units and --export-merges are for --type bpe");
    if (!unigram && (export_spm || sample))
        return cli_usage_error("train", "--export-spm and --sample are for --type unigram");
    if (!out)
        return cli_usage_error("train", "missing -o FILE (the tokenizer.json to write)");
    if (ba.set_alpha && ba.mode != LIPI_BALANCE_SMOOTHED)
        return cli_usage_error("train", "--alpha is for --balance smoothed");
    if (ba.mode == LIPI_BALANCE_PARITY && !ba.dev)
        return cli_usage_error("train", "--balance parity needs --dev DIR (line-aligned dev files, one per language)");
    if (ba.dev && ba.mode != LIPI_BALANCE_PARITY)
        return cli_usage_error("train", "--dev is for --balance parity");
    if ((parity_threshold || set_pexp || set_uweights) && ba.mode != LIPI_BALANCE_PARITY)
        return cli_usage_error("train", "--parity-threshold, --parity-exponent, --parity-mass and --parity-others are for --balance parity");
    if (parity_threshold && unigram)
        return cli_usage_error("train", "--parity-threshold is for --type bpe");
    if (set_uweights && !unigram)
        return cli_usage_error("train", "--parity-mass and --parity-others are for --type unigram");
    if (set_pexp && !unigram && parity_exponent == 0.0)
        return cli_usage_error("train", "--parity-exponent takes a number in (0, 1000] for --type bpe, not 0");
    if (ba.n_lang && n_counts)
        return cli_usage_error("train", "--lang-file counts text files; it does not go with --from-counts");
    if (ba.mode != LIPI_BALANCE_NONE && sample)
        return cli_usage_error("train", "--sample does not go with --balance %s", ba.mode == LIPI_BALANCE_PARITY ? "parity" : "smoothed");
    bool balanced = ba.mode != LIPI_BALANCE_NONE;
    char **all_files = NULL;
    if (!balanced && ba.n_lang) {
        /* Without balancing, language files are plain input files. */
        size_t n_pos = (size_t)(argc - optind);
        all_files = lipi_calloc(n_pos + ba.n_lang + 1, sizeof *all_files);
        if (!all_files)
            return cli_usage_error("train", "out of memory");
        for (size_t i = 0; i < n_pos; i++)
            all_files[i] = argv[optind + (int)i];
        for (size_t i = 0; i < ba.n_lang; i++)
            all_files[n_pos + i] = ba.file[i];
        argv = all_files;
        argc = (int)(n_pos + ba.n_lang);
        optind = 0;
    }
    if (n_counts == 0 && optind >= argc && !ba.n_lang)
        return cli_usage_error("train", "no input files (use '-' for standard input, or --from-counts)");
    if (n_counts && optind < argc)
        return cli_usage_error("train", "give either input files or --from-counts, not both");

    lipi_error err = {0};
    lipi_normalizer *norm = NULL;
    lipi_pretokenizer *pre = NULL;
    lipi_tokenizer *tok = NULL;
    lipi_counts *counts = NULL;
    lipi_balance *bal = NULL;
    int rc = EXIT_FAIL;
    /* Fail before hours of training, not after, when the output cannot be written. */
    if (lipi_check_writable(out, &err) != LIPI_OK)
        goto fail;
    if (unigram && !set_pattern)
        text.pattern = "unigram"; /* words carry SentencePiece's "▁" prefix */
    if (export_spm && lipi_check_writable(export_spm, &err) != LIPI_OK)
        goto fail;
    if (cli_text_build(&text, &norm, &pre, &err) != LIPI_OK) {
        rc = EXIT_USAGE;
        goto fail;
    }
    lipi_unigram_options uopt;
    lipi_unigram_options_default(&uopt);
    uopt.vocab_size = bopt.vocab_size;
    uopt.byte_fallback = bopt.byte_fallback;
    if (set_coverage)
        uopt.character_coverage = bopt.character_coverage;
    if (set_maxlen)
        uopt.max_piece_length = bopt.max_token_length;
    if (bopt.n_special) {
        uopt.special_tokens = bopt.special_tokens;
        uopt.n_special = bopt.n_special;
    }
    if (bopt.unk_token)
        uopt.unk_token = bopt.unk_token;
    uopt.grapheme_guard = bopt.grapheme_guard;
    uopt.threads = bopt.threads;
    uopt.sample = sample;
    uopt.sample_seed = seed;
    cli_progress prog;
    cli_progress_init(&prog, quiet);
    copt.progress = bopt.progress = uopt.progress = cli_progress_report;
    copt.progress_user = bopt.progress_user = uopt.progress_user = &prog;
    lipi_status st;
    bopt.parity_threshold = parity_threshold;
    bopt.parity_exponent = parity_exponent;
    if (set_pexp)
        uopt.parity_exponent = parity_exponent;
    uopt.parity_mass = parity_mass;
    uopt.parity_others = parity_others;
    if (balanced) {
        const char *const *files = n_counts ? counts_files : (const char *const *)argv + optind;
        size_t nf = n_counts ? n_counts : (size_t)(argc - optind);
        st = balance_build(&ba, files, nf, n_counts > 0, norm, pre, &copt, quiet, &bal, &counts,
                           &err);
        if (st == LIPI_OK) {
            if (ba.mode == LIPI_BALANCE_PARITY)
                bopt.balance = uopt.balance = bal;
            st = unigram ? lipi_unigram_train_counts(counts, norm, pre, &uopt, &tok, &err)
                         : lipi_bpe_train_counts(counts, norm, pre, &bopt, &tok, &err);
            norm = NULL;
            pre = NULL;
        }
    } else if (n_counts) {
        st = lipi_counts_new(&counts);
        for (size_t i = 0; st == LIPI_OK && i < n_counts; i++)
            st = lipi_counts_load(counts_files[i], counts, &err);
        if (st == LIPI_OK) {
            st = unigram ? lipi_unigram_train_counts(counts, norm, pre, &uopt, &tok, &err)
                         : lipi_bpe_train_counts(counts, norm, pre, &bopt, &tok, &err);
            norm = NULL; /* stolen by the trainer */
            pre = NULL;
        }
    } else {
        const char *const *files = (const char *const *)argv + optind;
        size_t nfiles = (size_t)(argc - optind);
        st = unigram ? lipi_unigram_train_files(files, nfiles, norm, pre, &copt, &uopt, &tok, &err)
                     : lipi_bpe_train_files(files, nfiles, norm, pre, &copt, &bopt, &tok, &err);
        norm = NULL;
        pre = NULL;
    }
    if (st != LIPI_OK)
        goto fail;
    if (lipi_tokenizer_save(tok, out, &err) != LIPI_OK)
        goto fail;
    if (export_dir && lipi_tokenizer_export_merges(tok, export_dir, &err) != LIPI_OK)
        goto fail;
    if (export_spm && lipi_tokenizer_save_spm(tok, export_spm, &err) != LIPI_OK)
        goto fail;
    if (!quiet)
        fprintf(stderr, "wrote %s (%zu tokens)\n", out, lipi_tokenizer_vocab_size(tok));
    rc = EXIT_OK;
    goto done;
fail:
    cli_report("train", &err);
done:
    lipi_free(all_files);
    lipi_balance_free(bal);
    lipi_counts_free(counts);
    lipi_tokenizer_free(tok);
    lipi_pretokenizer_free(pre);
    lipi_normalizer_free(norm);
    return rc;
}

const cli_command cmd_train = {"train", "train a BPE or Unigram tokenizer (tokenizer.json)", run};

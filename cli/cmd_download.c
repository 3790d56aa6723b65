/* `lipi download`: fetches a model from the Hugging Face hub into the
 * Hugging Face cache. */
#include "cli/cli.h"
#include "cli/options.h"

#include <dirent.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "cli/progress.h"
#include "cli/signals.h"
#include "model/model.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi download NAME [--revision REV] [--all] [--quiet]\n"
            "\n"
            "Fetches model NAME (ORG/NAME) from the Hugging Face hub into the Hugging\n"
            "Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else\n"
            "~/.cache/huggingface/hub) in the layout huggingface_hub uses, so Python\n"
            "and lipi share the files; then 'lipi embed -m NAME' finds it there.\n"
            "Only the files lipi needs are fetched (config.json, safetensors weights,\n"
            "or pytorch_model.bin where a folder has no safetensors, bge-m3's\n"
            "sparse_linear.pt / colbert_linear.pt, tokenizer and sentence-transformers\n"
            "files) unless --all is given. An\n"
            "interrupted download resumes where it stopped when run again; files\n"
            "stored with Git LFS are checked against their SHA-256. Prints the\n"
            "snapshot folder on standard output.\n"
            "\n"
            "Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN\n"
            "(for gated or private models), HTTPS_PROXY and the other libcurl proxy\n"
            "variables.\n"
            "\n"
            "Options:\n"
            "  --revision REV       branch, tag or commit (default main)\n"
            "  --all                every file of the repository\n"
            "  --quiet              no progress on stderr\n"
            "  -h, --help           show this help\n"
            "\n"
            "Example:\n"
            "  lipi download sentence-transformers/LaBSE\n"
            "  lipi embed -m sentence-transformers/LaBSE -o hi.npy hi.txt\n");
}

typedef struct {
    bool tty;
    double last;
} progress_state;

static void on_progress(const lipi_hub_progress *p, void *user)
{
    progress_state *s = user;
    double now = cli_now();
    if (!p->finished && (!s->tty || now - s->last < 0.1))
        return;
    s->last = now;
    const double mb = 1e6;
    if (p->finished)
        fprintf(stderr, "%s[%zu/%zu] %s  %.1f MB\n", s->tty ? "\r\033[K" : "", p->file_no,
                p->files, p->file, (double)p->done / mb);
    else if (p->total)
        fprintf(stderr, "\r\033[K[%zu/%zu] %s  %.1f / %.1f MB  %3.0f%%", p->file_no, p->files,
                p->file, (double)p->done / mb, (double)p->total / mb,
                100.0 * (double)p->done / (double)p->total);
    else
        fprintf(stderr, "\r\033[K[%zu/%zu] %s  %.1f MB", p->file_no, p->files, p->file,
                (double)p->done / mb);
    cli_signals_line_open(!p->finished);
    fflush(stderr);
}

/* Whether folder dir holds a *.safetensors file. */
static bool has_safetensors(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        found = l > 12 && strcmp(e->d_name + l - 12, ".safetensors") == 0;
    }
    closedir(d);
    return found;
}

/* --all, the one option of download's own. */
static int download_option(int id, const char *arg, void *vall)
{
    (void)id;
    (void)arg;
    *(bool *)vall = true;
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"all", no_argument, NULL, CLI_OPT_ALL},
        {NULL, 0, NULL, 0},
    };
    lipi_hub_download_options o = {0};
    cli_args a = {0};
    const cli_spec spec = {"download", help, NULL, opts, CLI_ARG_REVISION | CLI_ARG_QUIET,
                           download_option, &o.all, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    o.revision = a.eo.revision;
    bool quiet = a.quiet;
    if (optind + 1 != argc)
        return cli_usage_error("download", "expected one model NAME (ORG/NAME)");
    progress_state ps = {isatty(2), 0};
    if (!quiet) {
        o.progress = on_progress;
        o.user = &ps;
    }
    char dir[PATH_MAX];
    lipi_error err = {0};
    if (lipi_hub_download(argv[optind], &o, dir, sizeof dir, &err) != LIPI_OK) {
        if (ps.tty && !quiet)
            fputc('\n', stderr);
        cli_report("download", &err);
        return EXIT_FAIL;
    }
    if (!has_safetensors(dir))
        fprintf(stderr,
                "lipi download: note: %s has no safetensors weights: lipi reads its "
                "pytorch_model.bin without running its pickle\n",
                argv[optind]);
    printf("%s\n", dir);
    return cli_finish_output("download");
}

const cli_command cmd_download = {"download", "fetch a model from the Hugging Face hub", run};

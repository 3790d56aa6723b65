/* `lipi`: dispatches to the subcommands in cli/cmd_*.c. */
#include "cli/cli.h"
#include "cli/signals.h"

#include <string.h>

/* Only subcommands that work are registered here. */
static const cli_command *const commands[] = {
    &cmd_normalize,
    &cmd_pretokenize,
    &cmd_encode,
    &cmd_decode,
    &cmd_inflation,
    &cmd_count,
    &cmd_train,
    &cmd_index,
    &cmd_search,
    &cmd_eval_retrieval,
    &cmd_embed,
    &cmd_classify,
    &cmd_rerank,
    &cmd_probe,
    &cmd_download,
    &cmd_convert,
    &cmd_serve,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f,
            "lipi %s — subword tokenization for multilingual text, Indic scripts first\n"
            "\n"
            "Usage: lipi COMMAND [OPTIONS] [FILE...]\n"
            "\n"
            "Commands:\n",
            lipi_version());
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-15s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f,
            "\n"
            "Run 'lipi COMMAND --help' for the options of a command.\n"
            "Input is read line by line from the FILEs, or from standard input when\n"
            "there are none or a FILE is '-'. Text must be UTF-8.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("lipi %s\n", lipi_version());
        return EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, commands[i]->name) == 0) {
            cli_signals_init();
            return commands[i]->run(argc - 1, argv + 1);
        }
    fprintf(stderr, "lipi: unknown command '%s'\n", name);
    fprintf(stderr, "Run 'lipi --help' for the list of commands.\n");
    return EXIT_USAGE;
}

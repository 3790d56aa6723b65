/* `lipi convert`: model.safetensors from a folder's pytorch_model.bin. */
#include "cli/cli.h"
#include "cli/options.h"

#include "model/model.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi convert MODEL_DIR [--quiet]\n"
            "\n"
            "Writes MODEL_DIR/model.safetensors from MODEL_DIR/pytorch_model.bin (or its\n"
            "shards, pytorch_model.bin.index.json), and the same in each subfolder that\n"
            "has one (sentence-transformers modules such as 2_Dense/), as Hugging Face's\n"
            "conversion bot does. Folders that already have model.safetensors are left\n"
            "alone. The checkpoint's pickle is never run: only tensors and state dicts\n"
            "are accepted, and anything else (a GLOBAL such as os.system, a REDUCE of\n"
            "another callable, a tensor outside its storage) is refused with the file,\n"
            "byte offset and opcode or name. Each file is written under a temporary\n"
            "name and renamed when complete.\n"
            "\n"
            "lipi embed, classify and index read pytorch_model.bin directly too;\n"
            "converting once makes later loads faster and lets other tools use the\n"
            "folder without trusting a pickle.\n"
            "\n"
            "Options:\n"
            "  --quiet              no summary on stderr\n"
            "  -h, --help           show this help\n"
            "\n"
            "Example:\n"
            "  lipi convert models/muril-base-cased\n");
}

static int run(int argc, char **argv)
{
    cli_args a = {0};
    const cli_spec spec = {"convert", help, NULL, NULL, CLI_ARG_QUIET, NULL, NULL, 0};
    int c = cli_parse(&spec, argc, argv, &a);
    if (c != CLI_GO_ON)
        return c;
    if (optind + 1 != argc)
        return cli_usage_error("convert", "expected one MODEL_DIR");
    size_t n = 0;
    lipi_error err = {0};
    if (lipi_model_convert(argv[optind], &n, &err) != LIPI_OK) {
        cli_report("convert", &err);
        return EXIT_FAIL;
    }
    if (!a.quiet)
        fprintf(stderr, "lipi convert: wrote %zu model.safetensors file%s in %s\n", n,
                n == 1 ? "" : "s", argv[optind]);
    return cli_finish_output("convert");
}

const cli_command cmd_convert = {"convert", "write model.safetensors from pytorch_model.bin",
                                 run};

/* Fuzz: GPT-2 vocab.json + merges.txt (+ tokenizer_config.json). Input:
 * vocab.json FUZZ_SEP merges.txt FUZZ_SEP config (absent when empty). */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fuzz_part p[3];
    fuzz_split(data, size, p, 3);
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    lipi_status st = lipi_tokenizer_from_gpt2(p[0].p, p[0].len, p[1].p, p[1].len, "gpt2",
                                              p[2].len ? p[2].p : NULL, p[2].len, &tok, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    fuzz_use_tokenizer(tok);
    lipi_tokenizer_free(tok);
    return 0;
}

/* Fuzz: a GGUF file's tokenizer metadata, then use the tokenizer. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    lipi_status st = lipi_tokenizer_from_gguf(data, size, "fuzz.gguf", NULL, &tok, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    fuzz_use_tokenizer(tok);
    lipi_tokenizer_free(tok);
    return 0;
}

/* Fuzz: BERT vocab.txt with an optional tokenizer_config.json. Input:
 * vocab.txt FUZZ_SEP tokenizer_config.json (absent when empty). */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fuzz_part p[2];
    fuzz_split(data, size, p, 2);
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    lipi_flag lower = size % 3, strip = (size / 3) % 3;
    lipi_status st = lipi_tokenizer_from_vocab_txt(p[0].p, p[0].len, "bert-base-uncased/vocab.txt",
                                                   p[1].len ? p[1].p : NULL, p[1].len, lower,
                                                   strip, &tok, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    fuzz_use_tokenizer(tok);
    lipi_tokenizer_free(tok);
    return 0;
}

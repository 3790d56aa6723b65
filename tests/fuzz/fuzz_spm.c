/* Fuzz: SentencePiece .model (protobuf ModelProto), then use the tokenizer. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    lipi_status st = lipi_tokenizer_from_spm(data, size, "fuzz.model", &tok, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    fuzz_use_tokenizer(tok);
    if (lipi_tokenizer_model_type(tok) == LIPI_MODEL_UNIGRAM) {
        char *spm = NULL;
        size_t len = 0;
        fuzz_check_status(lipi_tokenizer_to_spm(tok, &spm, &len, &err));
        lipi_free(spm);
    }
    lipi_tokenizer_free(tok);
    return 0;
}

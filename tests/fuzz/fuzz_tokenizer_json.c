/* Fuzz: tokenizer.json (lipi_tokenizer_load_json), then encode, decode and
 * save what loaded. What lipi saves, lipi must load again. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    lipi_status st = lipi_tokenizer_load_json((const char *)data, size, "tokenizer.json", &tok, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    fuzz_use_tokenizer(tok);
    char *json = NULL;
    size_t len = 0;
    if (lipi_tokenizer_to_json(tok, &json, &len, &err) == LIPI_OK) {
        lipi_tokenizer *again = NULL;
        if (lipi_tokenizer_load_json(json, len, "saved", &again, &err) != LIPI_OK) {
            fprintf(stderr, "saved tokenizer.json does not load: %s\n", err.msg);
            abort();
        }
        lipi_tokenizer_free(again);
    }
    lipi_free(json);
    lipi_tokenizer_free(tok);
    return 0;
}

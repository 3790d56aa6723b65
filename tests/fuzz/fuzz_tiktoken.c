/* Fuzz: tiktoken rank files. Input: rank file FUZZ_SEP NAME.meta.json.
 * Without a meta part the rank file is read in memory with the gpt2 split
 * pattern and one special token; with one, both go to files and
 * lipi_tokenizer_open reads the pattern and specials from the meta file. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fuzz_part p[2];
    fuzz_split(data, size, p, 2);
    lipi_tokenizer *tok = NULL;
    lipi_error err;
    lipi_status st;
    if (p[1].len == 0) {
        lipi_special_token special[1] = {{"<|endoftext|>", 50256}};
        /* Gaps allowed, so that odd ranks reach the merge recovery. */
        st = lipi_tokenizer_from_tiktoken(p[0].p, p[0].len, "fuzz.tiktoken",
                                          lipi_split_pattern("gpt2"), special, 1,
                                          LIPI_TIKTOKEN_ALLOW_RANK_GAPS, &tok, &err);
    } else {
        const char *path = fuzz_file("fuzz.tiktoken", p[0].p, p[0].len);
        fuzz_file("fuzz.meta.json", p[1].p, p[1].len);
        st = lipi_tokenizer_open(path, NULL, &tok, &err);
    }
    if (!fuzz_loaded(st, &err))
        return 0;
    fuzz_use_tokenizer(tok);
    lipi_tokenizer_free(tok);
    return 0;
}

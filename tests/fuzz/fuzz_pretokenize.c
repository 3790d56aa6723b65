/* Fuzz: every built-in pre-tokenizer. Input: byte 0 picks the
 * pre-tokenizer, the rest is the text. Checks the pieces' contract: never
 * empty, source spans inside the text and in order. */
#include "tests/fuzz/fuzz.h"

static const char *const names[] = {"indic",      "cl100k", "o200k",     "gpt2",  "bytelevel",
                                    "bert",       "whitespace", "metaspace", "digits"};
#define N_NAMES (sizeof names / sizeof *names)

static lipi_pretokenizer *pretok[N_NAMES];
static lipi_pieces pieces; /* reused across inputs, as callers do */

static void cleanup(void)
{
    for (size_t i = 0; i < N_NAMES; i++)
        lipi_pretokenizer_free(pretok[i]);
    lipi_pieces_free(&pieces);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static int init;
    if (!init) {
        init = 1;
        atexit(cleanup);
    }
    if (size < 1)
        return 0;
    size_t which = data[0] % N_NAMES;
    if (!pretok[which] && lipi_pretokenizer_new(names[which], &pretok[which], NULL) != LIPI_OK)
        abort();
    const char *s = (const char *)data + 1;
    size_t len = size - 1;
    lipi_error err;
    lipi_status st = lipi_pretokenize(pretok[which], s, len, &pieces, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    if (pieces.text_off[0] != 0 || pieces.text_off[pieces.count] != pieces.text_len)
        abort();
    for (size_t i = 0; i < pieces.count; i++) {
        if (pieces.text_off[i] >= pieces.text_off[i + 1])
            abort();
        if (pieces.src[i].start > pieces.src[i].end || pieces.src[i].end > len)
            abort();
    }
    return 0;
}

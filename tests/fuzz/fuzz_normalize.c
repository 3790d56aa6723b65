/* Fuzz: UTF-8 decoding, repair and grapheme breaks, then every built-in
 * normalizer with every option combination, with and without alignments.
 * Input: byte 0 picks the normalizer, byte 1 the options, the rest is text
 * (also used raw by the UTF-8 functions). */
#include "tests/fuzz/fuzz.h"

static const char *const names[] = {"none", "nfc", "nfd", "nfkc", "nfkd", "indic", "bert"};
#define N_NAMES (sizeof names / sizeof *names)

static lipi_normalizer *normalizers[N_NAMES][8];

static void free_normalizers(void)
{
    for (size_t i = 0; i < N_NAMES; i++)
        for (size_t j = 0; j < 8; j++)
            lipi_normalizer_free(normalizers[i][j]);
}

static const lipi_normalizer *get(unsigned which, unsigned opts)
{
    static int init;
    if (!init) {
        init = 1;
        atexit(free_normalizers);
    }
    which %= N_NAMES;
    opts %= 8;
    if (!normalizers[which][opts]) {
        lipi_normalizer_options o = {.lowercase = opts & 1, .strip_accents = opts & 2,
                                     .fold_digits = opts & 4};
        if (lipi_normalizer_new(names[which], &o, &normalizers[which][opts], NULL) != LIPI_OK)
            abort();
    }
    return normalizers[which][opts];
}

static void fuzz_utf8(const char *s, size_t len)
{
    size_t valid = lipi_utf8_valid_prefix(s, len);
    if (valid > len)
        abort();
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = lipi_utf8_decode(s + i, len - i, &cp);
        if (k == 0) {
            if (i < valid)
                abort(); /* the valid prefix said these bytes were fine */
            i++;
            continue;
        }
        if (k > 4 || k > len - i || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            abort();
        char enc[4];
        if (lipi_utf8_encode(cp, enc) != k || memcmp(enc, s + i, k) != 0)
            abort();
        (void)lipi_script_of(cp);
        i += k;
    }
    char *fixed = NULL;
    size_t fixed_len = 0;
    lipi_status st = lipi_utf8_repair(s, len, &fixed, &fixed_len);
    fuzz_check_status(st);
    if (st == LIPI_OK) {
        if (lipi_utf8_valid_prefix(fixed, fixed_len) != fixed_len)
            abort();
        size_t *b = NULL, cap = 0, count = 0;
        st = lipi_graphemes(fixed, fixed_len, &b, &cap, &count, NULL);
        fuzz_check_status(st);
        if (st == LIPI_OK) {
            if (b[0] != 0 || b[count] != fixed_len)
                abort();
            for (size_t j = 0; j < count; j++)
                if (b[j] >= b[j + 1])
                    abort();
        }
        lipi_free(b);
    }
    lipi_free(fixed);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *s = (const char *)data + 2;
    size_t len = size - 2;
    fuzz_utf8(s, len);
    const lipi_normalizer *n = get(data[0], data[1]);
    bool align = data[1] & 8;
    lipi_normalized out = {0};
    lipi_error err;
    lipi_status st = lipi_normalize(n, s, len, &out, align, &err);
    fuzz_check_status(st);
    if (st == LIPI_OK) {
        if (lipi_utf8_valid_prefix(out.text, out.len) != out.len || out.text[out.len] != '\0')
            abort();
        for (size_t i = 0; align && i < out.len; i++)
            if (out.align[i].start > out.align[i].end || out.align[i].end > len)
                abort();
        /* A second pass over the output reuses a second buffer's memory. */
        lipi_normalized again = {0};
        fuzz_check_status(lipi_normalize(n, out.text, out.len, &again, align, &err));
        fuzz_check_status(lipi_normalize(n, s, len, &again, !align, &err));
        lipi_normalized_free(&again);
    }
    lipi_normalized_free(&out);
    return 0;
}

/* Fuzz: a retrieval index folder (meta.json, vectors.npy, offsets.npy,
 * texts: lipi_index_open), then search it and read its texts. Input: the
 * four files in that order, separated by FUZZ_SEP. */
#include <math.h>

#include "retrieval/retrieval.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static const char *const names[4] = {"meta.json", "vectors.npy", "offsets.npy", "texts"};
    fuzz_part p[4];
    fuzz_split(data, size, p, 4);
    for (size_t i = 0; i < 4; i++)
        fuzz_file(names[i], p[i].p, p[i].len);
    lipi_index *idx = NULL;
    lipi_index_open_options opt = {.skip_faiss = true};
    lipi_error err;
    lipi_status st = lipi_index_open(fuzz_dir(), &opt, &idx, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    size_t n = lipi_index_count(idx), dim = lipi_index_dim(idx);
    const lipi_index_model *model = lipi_index_get_model(idx);
    fuzz_check_status(lipi_index_check_model(idx, model, &err));
    float *q = dim <= 4096 ? malloc(dim * sizeof *q) : NULL;
    if (q) {
        for (size_t i = 0; i < dim; i++)
            q[i] = 1.0f / (float)(i + 1);
        int64_t docs[3];
        float scores[3];
        st = lipi_index_search(idx, q, 1, dim, 3, NULL, docs, scores, &err);
        fuzz_check_status(st);
        for (size_t i = 0; st == LIPI_OK && i < 3; i++)
            if (docs[i] < -1 || (docs[i] >= 0 && (size_t)docs[i] >= n))
                abort();
        free(q);
    }
    for (size_t d = 0; d < n && d < 4; d++) {
        const char *text;
        size_t len;
        fuzz_check_status(lipi_index_get_text(idx, d, &text, &len, &err));
    }
    if (n) {
        const char *text;
        size_t len;
        fuzz_check_status(lipi_index_get_text(idx, n - 1, &text, &len, &err));
    }
    lipi_index_close(idx);
    return 0;
}

/* Fuzz: a model folder, config.json + model.safetensors (lipi_model_load),
 * then run the loaded model on a short sequence. Input: config.json
 * FUZZ_SEP model.safetensors. */
#include "model/model.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fuzz_part p[2];
    fuzz_split(data, size, p, 2);
    fuzz_file("config.json", p[0].p, p[0].len);
    fuzz_file("model.safetensors", p[1].p, p[1].len);
    lipi_model *m = NULL;
    lipi_model_session *s = NULL;
    lipi_error err;
    lipi_status st = lipi_model_load(fuzz_dir(), NULL, &m, &err);
    if (!fuzz_loaded(st, &err))
        return 0;
    const lipi_model_info *info = lipi_model_get_info(m);
    if (lipi_model_session_new(m, 1, &s, &err) != LIPI_OK)
        goto done;
    uint32_t ids[4] = {0, 1, 2, 3};
    lipi_sequence seq = {.ids = ids, .len = 4};
    size_t dim = lipi_model_embed_dim(m, 0);
    if (info->max_tokens < seq.len)
        seq.len = info->max_tokens ? info->max_tokens : 1;
    /* The ids must be in the vocabulary; a vocabulary that small must fail. */
    float *out = dim < ((size_t)1 << 20) ? malloc(dim * sizeof(float) + 1) : NULL;
    if (out)
        fuzz_check_status(lipi_model_embed(s, &seq, 1, NULL, out, &err));
    free(out);
    if (info->num_labels && info->num_labels < 4096) {
        float *logits = malloc(info->num_labels * sizeof(float));
        if (logits)
            fuzz_check_status(lipi_model_classify(s, &seq, 1, logits, NULL, &err));
        free(logits);
    }
done:
    lipi_model_session_free(s);
    lipi_model_free(m);
    return 0;
}

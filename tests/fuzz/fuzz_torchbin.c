/* Fuzz: a PyTorch checkpoint (torch.save zip + restricted pickle,
 * lipi_torch_open_mem), then every tensor read whole, as the model loader
 * and lipi convert read them. Input: the file's bytes. */
#include "model/model_impl.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    lipi_safetensors *st = NULL;
    lipi_error err;
    lipi_status s = lipi_torch_open_mem(data, size, "pytorch_model.bin", &st, &err);
    if (!fuzz_loaded(s, &err))
        return 0;
    volatile unsigned sum = 0;
    for (size_t i = 0; i < st->n; i++) {
        const lipi_st_tensor *t = &st->tensors[i];
        if (lipi_st_find(st, t->name) == NULL)
            abort(); /* every tensor is findable by its name */
        /* The reader promised nelem elements of the dtype inside the input. */
        for (size_t b = t->begin; b < t->end; b++)
            sum += t->data[b - t->begin];
        if (t->dtype != LIPI_ST_OTHER && t->nelem < ((size_t)1 << 20)) {
            float *f = malloc(t->nelem * sizeof(float) + 1);
            if (f)
                lipi_st_to_f32(t, f);
            free(f);
        }
    }
    (void)sum;
    lipi_st_close(st);
    return 0;
}

/* The files that make up a model folder: one list, used to choose what to
 * download from the hub (hub.c) and what an index's model fingerprint
 * covers (retrieval/index.c). The tokenizer's part comes from
 * lipi_tokenizer_file, which lipi_tokenizer_open reads by. */
#include "model/model.h"

#include <ctype.h>
#include <string.h>

/* Fixed names besides the tokenizer's; config.json and model.safetensors
 * first, as the two a model cannot do without. */
static const lipi_model_file model_files[] = {
    {"config.json", LIPI_MODEL_FILE_CONFIG, true},
    {"model.safetensors", LIPI_MODEL_FILE_WEIGHTS, true},
    {"model.safetensors.index.json", LIPI_MODEL_FILE_WEIGHTS, false},
    {"modules.json", LIPI_MODEL_FILE_MODULE, false},
    {"sentence_bert_config.json", LIPI_MODEL_FILE_MODULE, false},
    {"config_sentence_transformers.json", LIPI_MODEL_FILE_MODULE, false},
    {"1_Pooling/config.json", LIPI_MODEL_FILE_MODULE, false},
    {"2_Dense/config.json", LIPI_MODEL_FILE_MODULE, false},
    {"2_Dense/model.safetensors", LIPI_MODEL_FILE_MODULE, false},
};

#define N_MODEL_FILES (sizeof model_files / sizeof model_files[0])

bool lipi_model_file_at(size_t i, lipi_model_file *out)
{
    if (i < N_MODEL_FILES) {
        *out = model_files[i];
        return true;
    }
    lipi_tokenizer_file_kind kind;
    const char *name = lipi_tokenizer_file(i - N_MODEL_FILES, &kind);
    if (!name)
        return false;
    *out = (lipi_model_file){name, LIPI_MODEL_FILE_TOKENIZER, false};
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

lipi_model_file_role lipi_model_file_role_of(const char *path)
{
    const char *slash = strchr(path, '/');
    if (!slash) {
        lipi_model_file f;
        for (size_t i = 0; lipi_model_file_at(i, &f); i++)
            if (strcmp(path, f.name) == 0)
                return f.role;
        return ends_with(path, ".safetensors") ? LIPI_MODEL_FILE_WEIGHTS : LIPI_MODEL_FILE_NONE;
    }
    /* sentence-transformers module folders: "1_Pooling/", "2_Dense/", ... */
    const char *p = path;
    while (isdigit((unsigned char)*p))
        p++;
    if (p == path || *p != '_' || strchr(slash + 1, '/'))
        return LIPI_MODEL_FILE_NONE;
    return strcmp(slash + 1, "config.json") == 0 || ends_with(slash + 1, ".safetensors")
               ? LIPI_MODEL_FILE_MODULE
               : LIPI_MODEL_FILE_NONE;
}

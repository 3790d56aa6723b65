/* The table of split patterns lipi knows by name: the only place a name
 * meets its pattern text (spelled once, in patterns_impl.h). */
#include "tokenizer/patterns_impl.h"
#include "tokenizer/tokenizer.h"

#include <string.h>

static const struct {
    const char *name, *pattern;
} split_patterns[] = {
    {"gpt2", PAT_GPT2},
    {"gpt2-no-trailing-space", PAT_GPT2_NO_TRAILING_SPACE},
    {"cl100k", PAT_CL100K},
    {"cl100k-tiktoken", PAT_CL100K_TIKTOKEN},
    {"qwen2", PAT_QWEN2},
    {"o200k", PAT_O200K},
    {"o200k-tiktoken", PAT_O200K_TIKTOKEN},
    {"tekken", PAT_TEKKEN},
    {"indic", PAT_INDIC},
    {"indic-unigram", PAT_INDIC_UNIGRAM},
};

const char *lipi_split_pattern_at(size_t i, const char **name)
{
    if (i >= sizeof split_patterns / sizeof split_patterns[0])
        return NULL;
    if (name)
        *name = split_patterns[i].name;
    return split_patterns[i].pattern;
}

const char *lipi_split_pattern(const char *name)
{
    const char *n, *p;
    for (size_t i = 0; (p = lipi_split_pattern_at(i, &n)); i++)
        if (strcmp(n, name) == 0)
            return p;
    return NULL;
}

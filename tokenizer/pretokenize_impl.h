/* Internal to tokenizer/: pre-tokenizer switches for tests. The fast paths
 * the encoder calls are declared in tokenizer_layout.h, the inline UTF-8
 * helpers in base.h. */
#ifndef LIPI_PRETOKENIZE_IMPL_H
#define LIPI_PRETOKENIZE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokenizer/tokenizer_layout.h"

/* Whether the Split/ByteLevel nodes of p (and its children) whose pattern
 * is a known one run the hand-written scanner (the default) or PCRE2. For
 * tests that compare the two; not for a pre-tokenizer other threads use. */
void lipi_pretokenizer_use_scanners(lipi_pretokenizer *p, bool on);

/* True when some node of p runs a scanner instead of its regex. */
bool lipi_pretokenizer_has_scanner(const lipi_pretokenizer *p);

#endif

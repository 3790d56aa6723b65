/* Internal: tokenizer.json sections for each component. Each component
 * parses and writes its own section, so tokenizer_json.c only routes.
 * Never included by a public header. */
#ifndef LIPI_JSON_IMPL_H
#define LIPI_JSON_IMPL_H

#include <jansson.h>

#include "tokenizer/tokenizer.h"

/* Builds a normalizer from a tokenizer.json "normalizer" value. `jpath` is
 * the value's JSON path for messages ("normalizer",
 * "normalizer.normalizers[2]"): errors read like
 * `normalizer.normalizers[2].type: unknown type "Foo"`. JSON null gives
 * *out = NULL and LIPI_OK. */
lipi_status lipi_normalizer_from_json(const json_t *j, const char *jpath,
                                      lipi_normalizer **out, lipi_error *err);

/* The tokenizer.json form of n (json null for NULL): a new reference, NULL
 * on allocation failure. Loading it back gives an equal normalizer, and
 * to_json(from_json(x)) equals x. The one lipi-only field is
 * "lipi_longest_match" on Precompiled (SentencePiece's own matching rule),
 * which Hugging Face ignores. */
json_t *lipi_normalizer_to_json(const lipi_normalizer *n);

/* The same pair for the "pre_tokenizer" section. */
lipi_status lipi_pretokenizer_from_json(const json_t *j, const char *jpath,
                                        lipi_pretokenizer **out, lipi_error *err);
json_t *lipi_pretokenizer_to_json(const lipi_pretokenizer *p);

/* "an object", "an array", "a string", "an integer", "a number", "true",
 * "false" or "null": what a JSON value is, for "expected X, found Y". */
const char *lipi_json_kind(const json_t *j);

#endif

/* The library's internal base for JSON (jansson values): the one JSON
 * parser (lipi_json_loadb) and the tokenizer.json sections of normalizers
 * and pre-tokenizers (each component parses and writes its own section, so
 * tokenizer_json.c only routes). Any module may include it; it is not
 * installed (the public headers do not expose jansson). */
#ifndef LIPI_BASE_JSON_H
#define LIPI_BASE_JSON_H

#include <jansson.h>

#include "tokenizer/tokenizer.h"

/* Deepest nesting of arrays and objects lipi_json_loadb accepts. Real
 * files nest a few levels; the bound keeps the parser's recursion (and
 * that of every reader walking the values) far from the stack's end. */
#define LIPI_JSON_MAX_DEPTH 512

/* json_loadb(text, len, flags, err) with the same language, values and
 * flags (JSON_REJECT_DUPLICATES, JSON_ALLOW_NUL; the top level must be an
 * object or array), parsed by lipi (tokenizer/json.c) so that a failed
 * allocation anywhere gives NULL with json_error_code(err) ==
 * json_error_out_of_memory and leaks nothing. Syntax errors fill err as
 * jansson does: text, 1-based line and byte column, and position = byte
 * offset just past the byte that failed. Nesting deeper than
 * LIPI_JSON_MAX_DEPTH is json_error_stack_overflow. `err` may be NULL. */
json_t *lipi_json_loadb(const char *text, size_t len, size_t flags, json_error_t *err);

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

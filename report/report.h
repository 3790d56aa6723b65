/* lipi report module: the token inflation report across languages and
 * tokenizers (parity, fertility, characters per token, continued words, and
 * optionally the inference cost of the tokens: attention, FLOPs, KV cache),
 * as a table, CSV, JSON or an HTML chart. The line-aligned parallel files
 * it measures are read by lipi_parallel_files_* (tokenizer/tokenizer.h). */
#ifndef LIPI_REPORT_H
#define LIPI_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tokenizer/tokenizer.h"
/* ======================================================================== */
/* Inflation report                                                          */
/* ======================================================================== */

/* Inflation report: how many more tokens the same content costs in one
 * language than in another, per tokenizer (Petrov et al. 2023 "parity",
 * Rust et al. 2021 "fertility" and "continued words").
 *
 *   const char *toks[] = {"cl100k_base", "mbert"}, *langs[] = {"eng_Latn", "hin_Deva"};
 *   lipi_inflation_report *rep = NULL;
 *   lipi_inflation_new(toks, 2, langs, 2, 0, &rep, &err);      reference: eng_Latn
 *   per tokenizer t, language l, aligned line:  lipi_inflation_add_line(rep, t, l,
 *       line, len, spans, n_tokens, &err);
 *   lipi_inflation_write(rep, LIPI_INFLATION_TABLE, stdout, &err);
 *   lipi_inflation_free(rep);
 *
 * The report never tokenizes: the caller encodes (without special tokens)
 * and hands over each token's byte span in the line plus two flags; the
 * report finds words (ICU word break iterator), grapheme clusters and code
 * points itself. Counts are 64-bit integers, so the figures do not depend on
 * the order lines arrive in or on how work was split between threads.
 */

/* ======================================================================== */
/* The report                                                                */
/* ======================================================================== */

/* One token as the encoder produced it: the bytes [start, end) of the line it
 * came from (end <= the line's length; start == end for a token with no
 * source text). Tokens are given in encoding order; byte-fallback pieces of
 * one character usually all carry that character's span. */
typedef struct {
    size_t start, end;
    bool is_unknown;       /* the model's unknown token (<unk>, [UNK], ...) */
    bool is_byte_fallback; /* a byte piece such as <0xE0> */
} lipi_inflation_token;

typedef struct lipi_inflation_report lipi_inflation_report;

/* Pass as `reference` to lipi_inflation_new for a report without parity. */
#define LIPI_INFLATION_NO_REFERENCE SIZE_MAX

/* New empty report over parallel text: n_tokenizers column groups and
 * n_languages rows (names copied; at least one of each, names unique in
 * each list). `reference` indexes `languages` (parity is relative to it) or
 * is LIPI_INFLATION_NO_REFERENCE. Fails with LIPI_EINVAL on an empty or
 * duplicate name or a reference out of range, LIPI_ENOMEM. *out is owned by
 * the caller (lipi_inflation_free). */
lipi_status lipi_inflation_new(const char *const *tokenizers, size_t n_tokenizers,
                               const char *const *languages, size_t n_languages,
                               size_t reference, lipi_inflation_report **out,
                               lipi_error *err);

/* New empty report for one mixed-script text (--text mode): rows are
 * scripts, created as words of each script appear (ICU script of the word's
 * first letter that is not Common or Inherited; words of digits or symbols
 * only form the row "Common"). No parity. Same failures as lipi_inflation_new. */
lipi_status lipi_inflation_new_text(const char *const *tokenizers, size_t n_tokenizers,
                                    lipi_inflation_report **out, lipi_error *err);

/* New empty report with the same mode, tokenizers, languages and reference
 * as `shape`: one per worker thread, folded together with
 * lipi_inflation_merge. LIPI_ENOMEM. */
lipi_status lipi_inflation_new_like(const lipi_inflation_report *shape,
                                    lipi_inflation_report **out, lipi_error *err);

void lipi_inflation_free(lipi_inflation_report *rep); /* NULL is a no-op */

/* Counts one line of language `lang` encoded by tokenizer `tok` (parallel
 * mode). line[0..len) must be valid UTF-8. The words, grapheme clusters and
 * code points of the line are found once and reused while the same text is
 * added for the next tokenizers, so feed one line to every tokenizer in a
 * row. Fails, counting nothing, with LIPI_EINVAL (index out of range, text
 * mode report, a token span with start > end or end > len: msg names the
 * token), LIPI_EFORMAT (invalid UTF-8, offset set), LIPI_EICU, LIPI_ENOMEM.
 * Not thread-safe on one report: use one report per thread. */
lipi_status lipi_inflation_add_line(lipi_inflation_report *rep, size_t tok, size_t lang,
                                    const char *line, size_t len,
                                    const lipi_inflation_token *toks, size_t n,
                                    lipi_error *err);

/* The same for a text-mode report: the line's words, characters and tokens
 * are counted in the rows of their scripts. Characters outside words
 * (spaces, punctuation) belong to the script of the word before them (of the
 * first word when none is before). A token belongs to the script of the
 * first word it overlaps, or else to that of its first character; a token
 * boundary to the script of the token after it. A line counts as a line of
 * every script that has characters in it. Failures as lipi_inflation_add_line. */
lipi_status lipi_inflation_add_text_line(lipi_inflation_report *rep, size_t tok,
                                         const char *line, size_t len,
                                         const lipi_inflation_token *toks, size_t n,
                                         lipi_error *err);

/* Adds the counts of `src` into `dst`; both made from the same shape
 * (lipi_inflation_new_like), else LIPI_EINVAL. Text-mode rows are matched by
 * script. LIPI_ENOMEM leaves dst unchanged. */
lipi_status lipi_inflation_merge(lipi_inflation_report *dst, const lipi_inflation_report *src,
                                 lipi_error *err);

/* Records how many aligned lines the caller skipped (empty in some file);
 * shown in the outputs. */
void lipi_inflation_set_skipped_lines(lipi_inflation_report *rep, uint64_t n);

bool lipi_inflation_is_text_mode(const lipi_inflation_report *rep);
size_t lipi_inflation_tokenizer_count(const lipi_inflation_report *rep);
const char *lipi_inflation_tokenizer_name(const lipi_inflation_report *rep, size_t i);
/* Rows: languages, or the scripts seen so far in text mode. */
size_t lipi_inflation_language_count(const lipi_inflation_report *rep);
const char *lipi_inflation_language_name(const lipi_inflation_report *rep, size_t i);
/* Name of the reference language, NULL when there is none. Borrowed. */
const char *lipi_inflation_reference(const lipi_inflation_report *rep);

/* The figures of one (tokenizer, language) cell. Shares are in [0, 1].
 * A ratio whose denominator is zero is NaN, and so is parity without a
 * reference, or when the reference has no tokens or a different number of
 * lines (parity compares the same lines only). */
typedef struct {
    const char *tokenizer, *language; /* borrowed from the report */
    uint64_t lines;
    uint64_t tokens;
    uint64_t words;             /* ICU word segments that are not spaces or punctuation */
    uint64_t chars;             /* code points */
    uint64_t bytes;             /* UTF-8 bytes */
    uint64_t continued_words;   /* words overlapped by two or more tokens */
    uint64_t unknown_tokens, byte_fallback_tokens;
    uint64_t unknown_chars;     /* code points overlapped by an unknown token */
    uint64_t boundaries;        /* token boundaries: tokens - 1 per line with tokens */
    uint64_t split_boundaries;  /* of those, inside a grapheme cluster */
    double tokens_per_line;
    double parity;              /* tokens / tokens of the reference, same lines */
    double fertility;           /* tokens / words */
    double chars_per_token, bytes_per_token;
    double continued_share;     /* continued_words / words */
    double unknown_share;       /* unknown_tokens / tokens */
    double byte_fallback_share; /* byte_fallback_tokens / tokens */
    double unknown_char_share;  /* unknown_chars / chars */
    double grapheme_split_share; /* split_boundaries / boundaries */
    bool comparable;            /* unknown_chars <= 10% of chars (Petrov's rule) */
} lipi_inflation_row;

/* Fills *row for tokenizer `tok` and row `lang` (indices must be in range). */
void lipi_inflation_get_row(const lipi_inflation_report *rep, size_t tok, size_t lang,
                            lipi_inflation_row *row);

/* Writes the row indices in display order into order[0 .. language_count):
 * parallel mode by the first tokenizer's parity, lowest first, rows without
 * parity last; text mode by characters, most first; ties by name. */
void lipi_inflation_language_order(const lipi_inflation_report *rep, size_t *order);

/* ======================================================================== */
/* Inference cost                                                            */
/* ======================================================================== */

/* What the extra tokens of a language cost a transformer reading them, from
 * the token count n of each aligned line and a model's shape:
 *
 *   lipi_cost_model m;
 *   lipi_cost_model_open("decoder-7b-gqa", &m, &err);      or a config.json
 *   lipi_inflation_set_cost(rep, &m, 8192, NAN, &err);      after measuring
 *   lipi_inflation_get_cost(rep, tok, lang, &cost);
 *
 * Per line of n tokens, with d = hidden, d_ff = intermediate, L = layers,
 * m = 3 for a gated MLP (SwiGLU, GeGLU) else 2, a multiply-add = 2 FLOPs:
 *   forward FLOPs  L·(2·n·d·(2·d + 2·n_kv·d_head) + 4·n²·d + 2·m·n·d·d_ff)
 *                  (Q and output projections, K and V projections, QKᵀ and
 *                  attention·V, the MLP; BERT-base: L·(8nd² + 4n²d + 4nd·d_ff))
 *   KV cache bytes 2·L·n_kv·d_head·bytes·n
 * Both are linear in n and n², so the report keeps Σn and Σn² per cell as
 * exact integers and the figures do not depend on the thread split. */
typedef struct {
    char name[256];        /* "bert-base", or the config file's path */
    uint64_t layers;       /* L: num_hidden_layers */
    uint64_t hidden;       /* d: hidden_size */
    uint64_t intermediate; /* d_ff: intermediate_size */
    uint64_t heads;        /* num_attention_heads */
    uint64_t kv_heads;     /* n_kv: num_key_value_heads (heads when absent) */
    uint64_t head_dim;     /* d_head: head_dim, or hidden / heads */
    uint64_t dtype_bytes;  /* 4 float32, 2 float16 / bfloat16 */
    bool gated;            /* gated MLP: m = 3 */
} lipi_cost_model;

/* The built-in models: "bert-base" (12 layers, 768, 3072, 12 heads, fp32)
 * and "decoder-7b-gqa" (32 layers, 4096, 11008, 32 heads, 8 KV heads,
 * d_head 128, gated, fp16). LIPI_EINVAL naming the choices. */
lipi_status lipi_cost_model_builtin(const char *name, lipi_cost_model *m, lipi_error *err);

/* Reads a Hugging Face config.json: num_hidden_layers, hidden_size,
 * intermediate_size, num_attention_heads (positive integers, required);
 * num_key_value_heads and head_dim when present (null is absent; head_dim
 * defaults to hidden_size / num_attention_heads, which must divide);
 * torch_dtype (or dtype) float32 -> 4 bytes, float16 / bfloat16 -> 2,
 * absent -> 4; gated when model_type is llama, mistral, qwen2, qwen3,
 * gemma, gemma2 or gemma3_text, or hidden_act is silu or swiglu. Errors
 * carry the path: LIPI_EIO (unreadable), LIPI_EFORMAT (not JSON: line and
 * offset set; a field missing or of the wrong kind: "expected
 * num_hidden_layers, a positive integer, found none"), LIPI_ENOMEM. */
lipi_status lipi_cost_model_load(const char *path, lipi_cost_model *m, lipi_error *err);

/* A built-in name, else the path of a config.json (lipi_cost_model_load). */
lipi_status lipi_cost_model_open(const char *name_or_path, lipi_cost_model *m, lipi_error *err);

/* Forward-pass FLOPs and KV-cache bytes of one sequence of n tokens (the
 * formulas above). decoder-7b-gqa, n = 4096: 536,870,912 KV bytes. */
double lipi_cost_forward_flops(const lipi_cost_model *m, double n);
double lipi_cost_kv_cache_bytes(const lipi_cost_model *m, double n);

/* Gini coefficient of x[0..n): Σᵢ Σⱼ |xᵢ - xⱼ| / (2·n²·mean), 0 for equal
 * values, (n - 1) / n when one holds everything; NaN for n == 0 or a zero
 * sum. {1, 2, 3} -> 2/9. */
double lipi_cost_gini(const double *x, size_t n);

/* Attaches a cost model (copied), a context length in tokens (> 0) and a
 * price per million tokens (NaN for none, else >= 0) to the report: the
 * outputs then carry the cost fields. LIPI_EINVAL for a bad value. */
lipi_status lipi_inflation_set_cost(lipi_inflation_report *rep, const lipi_cost_model *m,
                                    uint64_t context, double price_per_million,
                                    lipi_error *err);
/* The model set by lipi_inflation_set_cost, NULL when none; borrowed. */
const lipi_cost_model *lipi_inflation_cost_model(const lipi_inflation_report *rep);

/* Cost figures of one (tokenizer, language) cell. Ratios against the
 * reference follow parity's rule (NaN without a reference or over other
 * lines); model figures are NaN before lipi_inflation_set_cost. */
typedef struct {
    uint64_t tokens_squared;        /* Σ n² over the lines */
    double attention_ratio;         /* Σ n² / Σ n² of the reference */
    double forward_flops_per_line;  /* mean forward FLOPs of a line */
    double forward_flops_ratio;     /* Σ FLOPs / Σ FLOPs of the reference */
    double kv_cache_bytes_per_line; /* mean KV-cache bytes of a line */
    double context_lines;           /* context / tokens_per_line */
    double price_per_1k_lines;      /* tokens of 1,000 lines × price / 1e6 */
} lipi_inflation_cost;

void lipi_inflation_get_cost(const lipi_inflation_report *rep, size_t tok, size_t lang,
                             lipi_inflation_cost *cost);

/* Once per tokenizer, over the rows with lines: the Gini coefficient of
 * tokens per line, and the premium max / min tokens per line (Petrov et al.
 * 2023) with the rows that set them (ties: the first name). NaN and NULL
 * names without rows with tokens. */
typedef struct {
    double gini;
    double premium;
    const char *premium_max_language, *premium_min_language; /* borrowed */
} lipi_inflation_tokenizer_cost;

void lipi_inflation_get_tokenizer_cost(const lipi_inflation_report *rep, size_t tok,
                                       lipi_inflation_tokenizer_cost *cost);

/* ======================================================================== */
/* Output                                                                    */
/* ======================================================================== */

typedef enum {
    LIPI_INFLATION_TABLE = 0, /* aligned text: languages as rows, tokenizers as
                                 column groups (parity, fertility, chars/token,
                                 continued words) */
    LIPI_INFLATION_CSV,       /* one row per (tokenizer, language), header line */
    LIPI_INFLATION_JSON,      /* {"reference", "tokenizers", "languages", "rows"} */
    LIPI_INFLATION_HTML,      /* self-contained page: table and parity bar chart */
} lipi_inflation_format;

/* "table", "csv", "json" or "html"; LIPI_EINVAL naming the choices. */
lipi_status lipi_inflation_format_parse(const char *name, lipi_inflation_format *fmt,
                                        lipi_error *err);

/* Writes the report to f. Numbers are printed with a fixed number of
 * decimals (six in CSV and JSON), in the C locale's format; NaN is an empty
 * CSV field, JSON null and "-" in the table and page. LIPI_EIO when f
 * reports a write error, LIPI_ENOMEM. */
lipi_status lipi_inflation_write(const lipi_inflation_report *rep, lipi_inflation_format fmt,
                                 FILE *f, lipi_error *err);

/* Writes the report to `path` atomically (a temporary file in the same
 * folder, renamed over the target only when complete). LIPI_EIO naming the
 * path, LIPI_ENOMEM. */
lipi_status lipi_inflation_save(const lipi_inflation_report *rep, lipi_inflation_format fmt,
                                const char *path, lipi_error *err);

/* ======================================================================== */
/* Measuring                                                                 */
/* ======================================================================== */

/* The tokenizers a report compares, loaded and labelled, and the measuring
 * loop: every aligned line encoded (without special tokens) by each of them
 * and added to the report, on threads.
 *
 *   lipi_inflation_tokenizers *ts = NULL;
 *   lipi_inflation_tokenizers_open(paths, n, threads, &ts, &err);
 *   lipi_inflation_new(lipi_inflation_tokenizers_labels(ts), n, langs, ..., &rep, &err);
 *   lipi_inflation_measure(rep, ts, files, threads, &err);
 *   lipi_inflation_tokenizers_free(ts);
 */
typedef struct lipi_inflation_tokenizers lipi_inflation_tokenizers;

/* Opens paths[0..n) with lipi_tokenizer_open (files, folders or names such
 * as cl100k_base), on up to `threads` threads. Labels: "cl100k_base" for a
 * bare name or cl100k_base.tiktoken, the folder's name for
 * .../bert-base-multilingual-cased/vocab.txt (or tokenizer.json), else the
 * file name without its extension; a label met again becomes "name#2", ...
 * On failure *err is that of the first failing path in the given order
 * (path set), *out NULL. LIPI_EINVAL for n == 0, LIPI_ENOMEM. The caller
 * owns *out (lipi_inflation_tokenizers_free); paths are borrowed for its
 * life. */
lipi_status lipi_inflation_tokenizers_open(const char *const *paths, size_t n, size_t threads,
                                           lipi_inflation_tokenizers **out, lipi_error *err);
void lipi_inflation_tokenizers_free(lipi_inflation_tokenizers *ts); /* NULL ok */
size_t lipi_inflation_tokenizers_count(const lipi_inflation_tokenizers *ts);
/* The n labels, in the given order; borrowed. */
const char *const *lipi_inflation_tokenizers_labels(const lipi_inflation_tokenizers *ts);

/* A new empty report (lipi_inflation_new) for the tokenizers of ts over
 * the languages of `files`: their labels, in order, and their reference.
 * Failures of lipi_inflation_new. */
lipi_status lipi_inflation_new_parallel(const lipi_inflation_tokenizers *ts,
                                        const lipi_parallel_files *files,
                                        lipi_inflation_report **out, lipi_error *err);

/* Reads `files` to the end and adds every aligned line, for every
 * tokenizer of ts (the report's, in order), to rep: per language (parallel
 * mode) or per script (text mode report), on `threads` threads (0 is 1).
 * Sets the skipped lines of a parallel-mode report. The figures are the same
 * for any thread count. On failure (rep then holds part of the counts:
 * free it) *err is that of the earliest (file line, language) that failed, path and line set to the
 * file's; reading errors as lipi_parallel_files_read; LIPI_EINVAL when
 * rep has another number of tokenizers; LIPI_ENOMEM. */
lipi_status lipi_inflation_measure(lipi_inflation_report *rep,
                                   const lipi_inflation_tokenizers *ts,
                                   lipi_parallel_files *files, size_t threads,
                                   lipi_error *err);

#endif

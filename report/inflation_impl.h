/* Internal layout of the inflation report, shared by inflation.c and the
 * output writers. Never included by a public header. */
#ifndef LIPI_INFLATION_IMPL_H
#define LIPI_INFLATION_IMPL_H

#include <unicode/ubrk.h>
#include <unicode/utext.h>

#include "report/report.h"
#include "tokenizer/base.h"

/* Counts of one (tokenizer, row) cell; everything else is derived. */
typedef struct {
    uint64_t lines, tokens, words, chars, bytes;
    uint64_t continued, unknown_tokens, fallback_tokens, unknown_chars;
    uint64_t boundaries, split_boundaries;
    uint64_t tokens_sq; /* Σ n² over the lines (n: tokens of a line) */
} lipi_inflation_counts;

typedef struct {
    size_t start, end; /* bytes of the line */
    uint32_t group;    /* index into lipi_inflation_scratch.groups */
} lipi_inflation_word;

/* Per-line totals of one script (text mode) or of the whole line. */
typedef struct {
    int script;
    uint64_t chars, bytes, words;
} lipi_inflation_group;

/* Analysis of the last line seen, reused while the same text is added for
 * the next tokenizer, plus per-call buffers. */
typedef struct {
    bool valid;
    lipi_buf text; /* copy of the analysed line */
    UBreakIterator *words_bi;
    UText ut;
    bool ut_open;
    lipi_inflation_word *words;
    size_t n_words, words_cap;
    size_t *gbounds; /* grapheme cluster boundaries (lipi_graphemes) */
    size_t gbounds_cap;
    uint8_t *is_bound; /* is_bound[i]: byte offset i is a cluster boundary */
    size_t is_bound_cap;
    uint32_t *byte_group; /* text mode: group of each byte */
    size_t byte_group_cap;
    lipi_inflation_group *groups;
    size_t n_groups, groups_cap;
    uint8_t *hits; /* tokens overlapping each word, saturated at 2 */
    size_t hits_cap;
    int32_t *cover; /* unknown-token coverage as a difference array */
    size_t cover_cap;
    lipi_inflation_counts *line_counts; /* per group, for the current call */
    size_t line_counts_cap;
    int *scripts; /* scripts needing a row, for the current call */
    size_t scripts_cap;
} lipi_inflation_scratch;

struct lipi_inflation_report {
    bool text_mode;
    size_t n_tok;
    char **tok_names;
    size_t n_lang, lang_cap;
    char **lang_names;
    int *lang_script;              /* text mode: UScriptCode of each row */
    size_t reference;              /* row index or LIPI_INFLATION_NO_REFERENCE */
    lipi_inflation_counts *cells;  /* cells[lang * n_tok + tok] */
    uint64_t skipped;
    bool has_cost;                 /* lipi_inflation_set_cost was called */
    lipi_cost_model cost_model;
    uint64_t context;
    double price_per_million;      /* NaN: none */
    lipi_inflation_scratch scratch;
};

/* Output helpers (inflation_output.c). */

/* Formats v with `decimals` digits, or writes `nan` when v is NaN. */
void lipi_inflation_fmt(char *buf, size_t size, double v, int decimals, const char *nan);
/* Code points of a NUL-terminated UTF-8 string (the width of a table cell). */
size_t lipi_inflation_display_width(const char *s);
/* Writes s as a JSON string literal / as HTML text; ill-formed UTF-8 bytes
 * become U+FFFD. */
void lipi_inflation_json_string(FILE *f, const char *s);
void lipi_inflation_html_string(FILE *f, const char *s);
/* New array of the rows in display order (lipi_free). LIPI_ENOMEM. */
lipi_status lipi_inflation_order_alloc(const lipi_inflation_report *rep, size_t **order,
                                       lipi_error *err);
/* Lines behind the report: those of the reference, or the most of any row. */
uint64_t lipi_inflation_line_total(const lipi_inflation_report *rep);

/* The self-contained HTML page (inflation_html.c); rows in `order`. */
void lipi_inflation_write_html(const lipi_inflation_report *rep, const size_t *order, FILE *f);

#endif

/* Inflation report output: terminal table, CSV, JSON, and the dispatch to
 * the HTML page (inflation_html.c). Everything goes through a FILE *; a
 * write error is noticed once at the end through ferror(). */
#include "report/inflation_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

lipi_status lipi_inflation_format_parse(const char *name, lipi_inflation_format *fmt,
                                        lipi_error *err)
{
    static const char *const names[] = {"table", "csv", "json", "html"};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0) {
            *fmt = (lipi_inflation_format)i;
            return LIPI_OK;
        }
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "expected a format table, csv, json or html, found \"%s\"",
                          name ? name : "");
}

/* ------------------------------------------------------------------------ */
/* Shared helpers (declared in inflation_impl.h)                             */
/* ------------------------------------------------------------------------ */

void lipi_inflation_fmt(char *buf, size_t size, double v, int decimals, const char *nan)
{
    if (isnan(v))
        snprintf(buf, size, "%s", nan);
    else
        snprintf(buf, size, "%.*f", decimals, v);
}

size_t lipi_inflation_display_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

/* Calls put(piece, ctx) for the valid UTF-8 runs of s and with U+FFFD for
 * each ill-formed byte, so names from file systems cannot break a format. */
static void write_utf8(FILE *f, const char *s, size_t len,
                       void (*escape)(FILE *f, const char *run, size_t n))
{
    size_t i = 0;
    while (i < len) {
        size_t good = lipi_utf8_valid_prefix(s + i, len - i);
        escape(f, s + i, good);
        i += good;
        if (i < len) {
            fputs("\xEF\xBF\xBD", f);
            i++;
        }
    }
}

static void escape_json_run(FILE *f, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
        else
            putc(c, f);
    }
}

void lipi_inflation_json_string(FILE *f, const char *s)
{
    putc('"', f);
    write_utf8(f, s, strlen(s), escape_json_run);
    putc('"', f);
}

static void escape_html_run(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: putc(s[i], f);
        }
    }
}

void lipi_inflation_html_string(FILE *f, const char *s)
{
    write_utf8(f, s, strlen(s), escape_html_run);
}

static void escape_csv_run(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            putc('"', f);
        putc(s[i], f);
    }
}

/* RFC 4180: quoted only when it holds a comma, quote or line break. */
static void csv_string(FILE *f, const char *s)
{
    bool quote = strpbrk(s, ",\"\r\n") != NULL;
    if (quote)
        putc('"', f);
    write_utf8(f, s, strlen(s), escape_csv_run);
    if (quote)
        putc('"', f);
}

lipi_status lipi_inflation_order_alloc(const lipi_inflation_report *rep, size_t **order,
                                       lipi_error *err)
{
    *order = lipi_calloc(rep->n_lang ? rep->n_lang : 1, sizeof **order);
    if (!*order)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    lipi_inflation_language_order(rep, *order);
    return LIPI_OK;
}

uint64_t lipi_inflation_line_total(const lipi_inflation_report *rep)
{
    if (rep->n_tok == 0 || rep->n_lang == 0)
        return 0;
    if (rep->reference < rep->n_lang)
        return rep->cells[rep->reference * rep->n_tok].lines;
    uint64_t most = 0;
    for (size_t l = 0; l < rep->n_lang; l++)
        if (rep->cells[l * rep->n_tok].lines > most)
            most = rep->cells[l * rep->n_tok].lines;
    return most;
}

/* ------------------------------------------------------------------------ */
/* Terminal table                                                            */
/* ------------------------------------------------------------------------ */

enum { N_COLS = 4 };

static void pad(FILE *f, size_t n)
{
    while (n--)
        putc(' ', f);
}

/* Prints s right-aligned in width w (left-aligned when `left`). */
static void cell(FILE *f, const char *s, size_t w, bool left)
{
    size_t sw = lipi_inflation_display_width(s);
    if (!left && sw < w)
        pad(f, w - sw);
    fputs(s, f);
    if (left && sw < w)
        pad(f, w - sw);
}

static void write_table(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    static const char *const par_heads[N_COLS] = {"parity", "fertility", "chars/tok", "cont.words"};
    static const char *const txt_heads[N_COLS] = {"tokens", "fertility", "chars/tok", "cont.words"};
    const char *const *heads = rep->text_mode ? txt_heads : par_heads;
    const char *label = rep->text_mode ? "script" : "language";
    bool any_flag = false;

    uint64_t total = lipi_inflation_line_total(rep);
    const char *lines = total == 1 ? "line" : "lines";
    if (rep->text_mode)
        fprintf(f, "Token inflation per script: %" PRIu64 " %s\n", total, lines);
    else if (rep->reference < rep->n_lang)
        fprintf(f, "Token inflation against %s: %" PRIu64 " aligned %s",
                rep->lang_names[rep->reference], total, lines);
    else
        fprintf(f, "Token inflation: %" PRIu64 " aligned %s", total, lines);
    if (!rep->text_mode) {
        if (rep->skipped)
            fprintf(f, " (%" PRIu64 " more skipped: empty in some file)", rep->skipped);
        putc('\n', f);
    }
    putc('\n', f);

    size_t lw = lipi_inflation_display_width(label);
    for (size_t l = 0; l < rep->n_lang; l++) {
        size_t w = lipi_inflation_display_width(rep->lang_names[l]);
        lw = w > lw ? w : lw;
    }
    /* Each column is as wide as its heading; the first one also holds the
     * not-comparable marker, and widens when a tokenizer name is longer
     * than its whole group. */
    size_t base[N_COLS], group_w = 0;
    for (int c = 0; c < N_COLS; c++) {
        base[c] = strlen(heads[c]) + (c == 0);
        group_w += base[c] + (c > 0);
    }

    pad(f, lw);
    for (size_t t = 0; t < rep->n_tok; t++) {
        size_t nw = lipi_inflation_display_width(rep->tok_names[t]);
        fputs("   ", f);
        cell(f, rep->tok_names[t], t + 1 < rep->n_tok ? (nw > group_w ? nw : group_w) : 0, true);
    }
    putc('\n', f);
    cell(f, label, lw, true);
    for (size_t t = 0; t < rep->n_tok; t++) {
        size_t nw = lipi_inflation_display_width(rep->tok_names[t]);
        size_t extra = nw > group_w ? nw - group_w : 0;
        fputs("   ", f);
        /* The first heading stands over the numbers, not over the marker. */
        cell(f, heads[0], base[0] - 1 + extra, false);
        putc(' ', f);
        for (int c = 1; c < N_COLS; c++) {
            putc(' ', f);
            cell(f, heads[c], base[c], false);
        }
    }
    putc('\n', f);

    for (size_t i = 0; i < rep->n_lang; i++) {
        size_t l = order[i];
        cell(f, rep->lang_names[l], lw, true);
        for (size_t t = 0; t < rep->n_tok; t++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, l, &row);
            size_t nw = lipi_inflation_display_width(rep->tok_names[t]);
            size_t extra = nw > group_w ? nw - group_w : 0;
            char v[N_COLS][48];
            if (rep->text_mode)
                snprintf(v[0], sizeof v[0], "%" PRIu64, row.tokens);
            else
                lipi_inflation_fmt(v[0], sizeof v[0], row.parity, 2, "-");
            lipi_inflation_fmt(v[1], sizeof v[1], row.fertility, 2, "-");
            lipi_inflation_fmt(v[2], sizeof v[2], row.chars_per_token, 2, "-");
            lipi_inflation_fmt(v[3], sizeof v[3], row.continued_share * 100.0, 1, "-");
            if (!isnan(row.continued_share))
                strcat(v[3], "%");
            fputs("   ", f);
            cell(f, v[0], base[0] - 1 + extra, false);
            putc(row.comparable ? ' ' : '*', f);
            any_flag = any_flag || !row.comparable;
            for (int c = 1; c < N_COLS; c++) {
                putc(' ', f);
                cell(f, v[c], base[c], false);
            }
        }
        putc('\n', f);
    }
    if (any_flag)
        fputs("\n* not comparable: over 10% of the characters are in unknown tokens\n", f);
}

/* The compact cost block under the table: the model on one line, then per
 * tokenizer its Gini and premium and one row per language (parity,
 * attention ratio, KV-cache MB per 1,000 lines, lines in the context, and
 * the price of 1,000 lines when one was given). CSV and JSON have the rest. */
static void write_table_cost(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    const lipi_cost_model *m = &rep->cost_model;
    bool price = !isnan(rep->price_per_million);
    static const char *const heads[] = {"parity", "attention", "KV MB/1k lines",
                                        "context lines", "price/1k lines"};
    size_t n_cols = price ? 5 : 4;
    fprintf(f,
            "\nCost on %s: %" PRIu64 " layers, d %" PRIu64 ", d_ff %" PRIu64 ", %" PRIu64
            " heads, %" PRIu64 " KV heads of %" PRIu64 ", %" PRIu64 " bytes, %s MLP; context %" PRIu64
            " tokens",
            m->name, m->layers, m->hidden, m->intermediate, m->heads, m->kv_heads, m->head_dim,
            m->dtype_bytes, m->gated ? "gated" : "plain", rep->context);
    if (price)
        fprintf(f, "; %g per million tokens", rep->price_per_million);
    putc('\n', f);
    const char *label = rep->text_mode ? "script" : "language";
    size_t lw = lipi_inflation_display_width(label);
    for (size_t l = 0; l < rep->n_lang; l++) {
        size_t w = lipi_inflation_display_width(rep->lang_names[l]);
        lw = w > lw ? w : lw;
    }
    for (size_t t = 0; t < rep->n_tok; t++) {
        lipi_inflation_tokenizer_cost tc;
        lipi_inflation_get_tokenizer_cost(rep, t, &tc);
        char gini[48], prem[48];
        lipi_inflation_fmt(gini, sizeof gini, tc.gini, 3, "-");
        lipi_inflation_fmt(prem, sizeof prem, tc.premium, 2, "-");
        fprintf(f, "\n%s: Gini of tokens per line %s, premium %s", rep->tok_names[t], gini, prem);
        if (tc.premium_max_language)
            fprintf(f, " (%s / %s)", tc.premium_max_language, tc.premium_min_language);
        putc('\n', f);
        cell(f, label, lw, true);
        for (size_t c = 0; c < n_cols; c++) {
            fputs("  ", f);
            cell(f, heads[c], strlen(heads[c]), false);
        }
        putc('\n', f);
        for (size_t i = 0; i < rep->n_lang; i++) {
            size_t l = order[i];
            lipi_inflation_row row;
            lipi_inflation_cost c;
            lipi_inflation_get_row(rep, t, l, &row);
            lipi_inflation_get_cost(rep, t, l, &c);
            char v[5][48];
            lipi_inflation_fmt(v[0], sizeof v[0], row.parity, 2, "-");
            lipi_inflation_fmt(v[1], sizeof v[1], c.attention_ratio, 2, "-");
            lipi_inflation_fmt(v[2], sizeof v[2], c.kv_cache_bytes_per_line * 1000 / 1e6, 2, "-");
            lipi_inflation_fmt(v[3], sizeof v[3], c.context_lines, 1, "-");
            lipi_inflation_fmt(v[4], sizeof v[4], c.price_per_1k_lines, 4, "-");
            cell(f, rep->lang_names[l], lw, true);
            for (size_t k = 0; k < n_cols; k++) {
                fputs("  ", f);
                cell(f, v[k], strlen(heads[k]), false);
            }
            putc('\n', f);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* CSV and JSON                                                              */
/* ------------------------------------------------------------------------ */

/* The fields of a row in CSV column and JSON key order. */
typedef struct {
    const char *name;
    int kind; /* 0 count, 1 ratio, 2 bool, 3 string */
    size_t offset;
} field;

#define FIELD(n, k, m) {n, k, offsetof(lipi_inflation_row, m)}
static const field fields[] = {
    FIELD("tokenizer", 3, tokenizer),
    FIELD("language", 3, language),
    FIELD("lines", 0, lines),
    FIELD("tokens", 0, tokens),
    FIELD("words", 0, words),
    FIELD("chars", 0, chars),
    FIELD("bytes", 0, bytes),
    FIELD("tokens_per_line", 1, tokens_per_line),
    FIELD("parity", 1, parity),
    FIELD("fertility", 1, fertility),
    FIELD("chars_per_token", 1, chars_per_token),
    FIELD("bytes_per_token", 1, bytes_per_token),
    FIELD("continued_words", 1, continued_share),
    FIELD("unknown_share", 1, unknown_share),
    FIELD("byte_fallback_share", 1, byte_fallback_share),
    FIELD("unknown_char_share", 1, unknown_char_share),
    FIELD("grapheme_split_share", 1, grapheme_split_share),
    FIELD("comparable", 2, comparable),
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

/* The cost fields, written after those when the report has a cost model:
 * the cell's figures, then its tokenizer's (repeated on each of its rows in
 * CSV; once per tokenizer in JSON's "cost" object). */
typedef struct {
    lipi_inflation_cost cell;
    lipi_inflation_tokenizer_cost tok;
} cost_view;

#define CELL(n, k, m) {n, k, offsetof(cost_view, cell.m)}
#define TOKC(n, k, m) {n, k, offsetof(cost_view, tok.m)}
static const field cost_fields[] = {
    CELL("tokens_squared", 0, tokens_squared),
    CELL("attention_ratio", 1, attention_ratio),
    CELL("forward_flops_per_line", 1, forward_flops_per_line),
    CELL("forward_flops_ratio", 1, forward_flops_ratio),
    CELL("kv_cache_bytes_per_line", 1, kv_cache_bytes_per_line),
    CELL("context_lines", 1, context_lines),
    CELL("price_per_1k_lines", 1, price_per_1k_lines),
    TOKC("gini", 1, gini),
    TOKC("premium", 1, premium),
    TOKC("premium_max_language", 3, premium_max_language),
    TOKC("premium_min_language", 3, premium_min_language),
};
#define N_COST_FIELDS (sizeof cost_fields / sizeof cost_fields[0])
#define N_CELL_FIELDS 7 /* the first ones, per cell */

static void get_cost_view(const lipi_inflation_report *rep, size_t t, size_t l, cost_view *v)
{
    lipi_inflation_get_cost(rep, t, l, &v->cell);
    lipi_inflation_get_tokenizer_cost(rep, t, &v->tok);
}

/* Writes the field fd of the struct at `base`; a NULL string is an empty
 * CSV field or JSON null. */
static void write_value(FILE *f, const void *base, const field *fd, bool json)
{
    const char *p = (const char *)base + fd->offset;
    char buf[64];
    switch (fd->kind) {
    case 0: fprintf(f, "%" PRIu64, *(const uint64_t *)p); break;
    case 1:
        lipi_inflation_fmt(buf, sizeof buf, *(const double *)p, 6, json ? "null" : "");
        fputs(buf, f);
        break;
    case 2: fputs(*(const bool *)p ? "true" : "false", f); break;
    default:
        if (!*(const char *const *)p)
            fputs(json ? "null" : "", f);
        else if (json)
            lipi_inflation_json_string(f, *(const char *const *)p);
        else
            csv_string(f, *(const char *const *)p);
    }
}

static void write_csv(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    size_t n_cost = rep->has_cost ? N_COST_FIELDS : 0;
    for (size_t k = 0; k < N_FIELDS; k++)
        fprintf(f, "%s%s", k ? "," : "", fields[k].name);
    for (size_t k = 0; k < n_cost; k++)
        fprintf(f, ",%s", cost_fields[k].name);
    fputs("\n", f);
    for (size_t t = 0; t < rep->n_tok; t++)
        for (size_t i = 0; i < rep->n_lang; i++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, order[i], &row);
            for (size_t k = 0; k < N_FIELDS; k++) {
                if (k)
                    putc(',', f);
                write_value(f, &row, &fields[k], false);
            }
            cost_view cv;
            if (n_cost)
                get_cost_view(rep, t, order[i], &cv);
            for (size_t k = 0; k < n_cost; k++) {
                putc(',', f);
                write_value(f, &cv, &cost_fields[k], false);
            }
            putc('\n', f);
        }
}

/* ,\n  "cost": {"model": {...}, "context", "price_per_million", "tokenizers": [...]} */
static void write_json_cost(const lipi_inflation_report *rep, FILE *f)
{
    const lipi_cost_model *m = &rep->cost_model;
    fputs(",\n  \"cost\": {\n    \"model\": {\"name\": ", f);
    lipi_inflation_json_string(f, m->name);
    fprintf(f,
            ", \"layers\": %" PRIu64 ", \"hidden_size\": %" PRIu64
            ", \"intermediate_size\": %" PRIu64 ", \"attention_heads\": %" PRIu64
            ", \"key_value_heads\": %" PRIu64 ", \"head_dim\": %" PRIu64
            ", \"dtype_bytes\": %" PRIu64 ", \"gated_mlp\": %s},\n    \"context\": %" PRIu64
            ",\n    \"price_per_million\": ",
            m->layers, m->hidden, m->intermediate, m->heads, m->kv_heads, m->head_dim,
            m->dtype_bytes, m->gated ? "true" : "false", rep->context);
    char buf[64];
    lipi_inflation_fmt(buf, sizeof buf, rep->price_per_million, 6, "null");
    fputs(buf, f);
    fputs(",\n    \"tokenizers\": [", f);
    for (size_t t = 0; t < rep->n_tok; t++) {
        cost_view cv;
        lipi_inflation_get_tokenizer_cost(rep, t, &cv.tok);
        fputs(t ? ",\n      {\"tokenizer\": " : "\n      {\"tokenizer\": ", f);
        lipi_inflation_json_string(f, rep->tok_names[t]);
        for (size_t k = N_CELL_FIELDS; k < N_COST_FIELDS; k++) {
            fprintf(f, ", \"%s\": ", cost_fields[k].name);
            write_value(f, &cv, &cost_fields[k], true);
        }
        putc('}', f);
    }
    fputs(rep->n_tok ? "\n    ]\n  }" : "]\n  }", f);
}

static void write_json(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    fprintf(f, "{\n  \"mode\": \"%s\",\n  \"reference\": ", rep->text_mode ? "text" : "parallel");
    const char *ref = lipi_inflation_reference(rep);
    if (ref)
        lipi_inflation_json_string(f, ref);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"lines\": %" PRIu64 ",\n  \"skipped_lines\": %" PRIu64 ",\n  \"tokenizers\": [",
            lipi_inflation_line_total(rep), rep->skipped);
    for (size_t t = 0; t < rep->n_tok; t++) {
        fputs(t ? ", " : "", f);
        lipi_inflation_json_string(f, rep->tok_names[t]);
    }
    fputs("],\n  \"languages\": [", f);
    for (size_t i = 0; i < rep->n_lang; i++) {
        fputs(i ? ", " : "", f);
        lipi_inflation_json_string(f, rep->lang_names[order[i]]);
    }
    fputs("],\n  \"rows\": [", f);
    bool first = true;
    for (size_t t = 0; t < rep->n_tok; t++)
        for (size_t i = 0; i < rep->n_lang; i++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, order[i], &row);
            fputs(first ? "\n    {" : ",\n    {", f);
            first = false;
            for (size_t k = 0; k < N_FIELDS; k++) {
                fprintf(f, "%s\"%s\": ", k ? ", " : "", fields[k].name);
                write_value(f, &row, &fields[k], true);
            }
            if (rep->has_cost) {
                cost_view cv;
                get_cost_view(rep, t, order[i], &cv);
                for (size_t k = 0; k < N_CELL_FIELDS; k++) {
                    fprintf(f, ", \"%s\": ", cost_fields[k].name);
                    write_value(f, &cv, &cost_fields[k], true);
                }
            }
            putc('}', f);
        }
    fputs(first ? "]" : "\n  ]", f);
    if (rep->has_cost)
        write_json_cost(rep, f);
    fputs("\n}\n", f);
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

lipi_status lipi_inflation_write(const lipi_inflation_report *rep, lipi_inflation_format fmt,
                                 FILE *f, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t *order = NULL;
    if (!rep || !f)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a report and a file");
    TRY(lipi_inflation_order_alloc(rep, &order, err));
    switch (fmt) {
    case LIPI_INFLATION_TABLE:
        write_table(rep, order, f);
        if (rep->has_cost)
            write_table_cost(rep, order, f);
        break;
    case LIPI_INFLATION_CSV: write_csv(rep, order, f); break;
    case LIPI_INFLATION_JSON: write_json(rep, order, f); break;
    case LIPI_INFLATION_HTML: lipi_inflation_write_html(rep, order, f); break;
    default:
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a format, found %d", (int)fmt);
        goto done;
    }
    if (fflush(f) != 0 || ferror(f))
        st = lipi_error_set(err, LIPI_EIO, NULL, 0, 0, "writing the report failed: %s",
                            strerror(errno ? errno : EIO));
done:
    lipi_free(order);
    return st;
}

lipi_status lipi_inflation_save(const lipi_inflation_report *rep, lipi_inflation_format fmt,
                                const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_atomic_file af;
    if (!rep || !path || !path[0])
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a report and a path");
    TRY(lipi_atomic_open(&af, path, err));
    st = lipi_inflation_write(rep, fmt, af.f, err);
    if (st != LIPI_OK) {
        lipi_atomic_abort(&af);
        if (err && !err->path[0])
            snprintf(err->path, sizeof err->path, "%s", path);
        goto done;
    }
    st = lipi_atomic_commit(&af, err);
done:
    return st;
}

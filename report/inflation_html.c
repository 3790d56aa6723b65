/* Inflation report as one self-contained HTML page: inline CSS, an inline
 * SVG bar chart (parity per language, one bar per tokenizer, a line at 1.0),
 * with a cost model a second one (per tokenizer the linear cost ratio beside
 * the quadratic attention ratio, log scale), the summary table and every
 * figure. No external scripts, fonts or images,
 * so the file can be mailed or opened offline. */
#include "report/inflation_impl.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char *const palette[] = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};
#define N_COLORS (sizeof palette / sizeof palette[0])

/* Chart geometry in SVG user units. */
enum { BAR_H = 12, GROUP_GAP = 10, PLOT_W = 640, LEGEND_ROW = 22, AXIS_H = 24, RIGHT = 60 };

/* A tick step of 1, 2, 2.5 or 5 times a power of ten giving at most eight
 * ticks up to `max`. */
static double tick_step(double max)
{
    static const double mult[] = {1.0, 2.0, 2.5, 5.0};
    double p = 0.01;
    for (int guard = 0; guard < 40; guard++, p *= 10.0)
        for (size_t i = 0; i < sizeof mult / sizeof mult[0]; i++)
            if (max / (mult[i] * p) <= 8.0)
                return mult[i] * p;
    return p;
}

static void write_style(FILE *f)
{
    fputs("<style>\n"
          "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem;color:#222;"
          "max-width:72rem}\n"
          "h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}\n"
          "p.note{color:#555;max-width:48rem}\n"
          "table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:.9rem;"
          "margin:.5rem 0}\n"
          "th,td{padding:.2rem .6rem;text-align:right;border-bottom:1px solid #e3e3e3}\n"
          "th{background:#f6f6f6}th.group{text-align:center;border-left:2px solid #ccc}\n"
          "td.first,th.first{border-left:2px solid #ccc}\n"
          ".name{text-align:left}tr.flagged td{color:#b00}\n"
          "svg text{font:12px system-ui,sans-serif;fill:#222}\n"
          "svg .grid{stroke:#e3e3e3}svg .axis{fill:#555}\n"
          "svg .reference{stroke:#222;stroke-width:1.5;stroke-dasharray:5 3}\n"
          "svg .legend-item{cursor:pointer}svg .legend-item.off{opacity:.35}\n"
          "svg text.value{font-size:9px;fill:#555}\n"
          "svg rect.bar[data-comparable=false]{opacity:.4}\n"
          "svg .hidden{display:none}\n"
          ".scroll{overflow-x:auto}\n"
          "</style>\n",
          f);
}

/* One bar chart: per language a group of bars, bar k of a group drawn for
 * tokenizer k / n_metric and metric k % n_metric, a dashed line at 1. Both
 * charts of the page come from here, so they share geometry, legend and
 * the script's hooks (data-series = tokenizer, whatever the metric). */
typedef struct {
    const char *id;   /* the svg element's id */
    const char *aria; /* its aria-label */
    const char *axis; /* the label under the axis */
    size_t n_metric;  /* bars per tokenizer in a group */
    /* per metric: the <title>'s name of the value and extra attributes of
     * its bars (" data-metric=..." ...; "" for none) */
    const char *const *metric_name, *const *metric_attr;
    /* the value of metric m for tokenizer t and language l, NaN for none */
    double (*value)(const lipi_inflation_report *rep, size_t t, size_t l, size_t m);
    bool log; /* log scale from a 1-2-5 tick below the least value */
} chart_spec;

/* x offset of v on a linear axis of `scale` units per 1, or a log one from
 * lo to hi over PLOT_W. */
static double chart_x(const chart_spec *c, double v, double scale, double lo, double hi)
{
    if (!c->log)
        return v * scale;
    return PLOT_W * (log(v) - log(lo)) / (log(hi) - log(lo));
}

/* The 1-2-5 sequence: the largest such value <= v (up = false) or the
 * least >= v (up = true), v > 0. */
static double step125(double v, bool up)
{
    double p = pow(10.0, floor(log10(v)));
    static const double m[] = {1.0, 2.0, 5.0, 10.0};
    if (up) {
        for (size_t i = 0; i < 4; i++)
            if (m[i] * p >= v * (1.0 - 1e-9))
                return m[i] * p;
        return 10.0 * p;
    }
    for (size_t i = 4; i-- > 0;)
        if (m[i] * p <= v * (1.0 + 1e-9))
            return m[i] * p;
    return p;
}

static void write_chart(const lipi_inflation_report *rep, const size_t *order, const chart_spec *c,
                        FILE *f)
{
    size_t label_chars = 8;
    for (size_t l = 0; l < rep->n_lang; l++) {
        size_t w = lipi_inflation_display_width(rep->lang_names[l]);
        label_chars = w > label_chars ? w : label_chars;
    }
    double left = 16.0 + 7.5 * (double)label_chars;
    double width = left + PLOT_W + RIGHT;
    size_t n_bars = rep->n_tok * c->n_metric; /* per group */

    /* Legend rows: entries laid out left to right, wrapping at the width. */
    size_t legend_rows = 1;
    double lx = left;
    for (size_t t = 0; t < rep->n_tok; t++) {
        double w = 30.0 + 7.0 * (double)lipi_inflation_display_width(rep->tok_names[t]);
        if (lx + w > width && lx > left) {
            legend_rows++;
            lx = left;
        }
        lx += w;
    }
    double top = 10.0 + LEGEND_ROW * (double)legend_rows + AXIS_H;
    double group_h = (double)(n_bars * BAR_H + GROUP_GAP);
    double plot_h = group_h * (double)rep->n_lang;
    double height = top + plot_h + 40.0;

    double max = 1.0, min = 1.0;
    for (size_t l = 0; l < rep->n_lang; l++)
        for (size_t k = 0; k < n_bars; k++) {
            double v = c->value(rep, k / c->n_metric, l, k % c->n_metric);
            if (!isnan(v) && isfinite(v) && v > max)
                max = v;
            if (!isnan(v) && isfinite(v) && v > 0.0 && v < min)
                min = v;
        }
    double step = 0.0, xmax, scale = 0.0, lo = 0.0;
    int decimals = 0; /* as many as the step needs: 2.5 -> "2.5", "5.0" */
    if (c->log) {
        /* strictly below the least value, so no bar is of zero length */
        lo = step125(min, false);
        if (lo >= min * (1.0 - 1e-9))
            lo = step125(lo * 0.99, false);
        xmax = step125(max, true);
        if (xmax <= lo) /* every value 1: one decade around it */
            xmax = 10.0 * lo;
    } else {
        step = tick_step(max);
        xmax = ceil(max / step - 1e-9) * step;
        scale = PLOT_W / xmax;
        while (decimals < 3 &&
               fabs(step * pow(10, decimals) - round(step * pow(10, decimals))) > 1e-6)
            decimals++;
    }

    fprintf(f,
            "<svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
            "aria-label=\"%s\">\n",
            c->id, width, height, width, height, c->aria);

    fputs("<g class=\"legend\">\n", f);
    lx = left;
    double ly = 10.0;
    for (size_t t = 0; t < rep->n_tok; t++) {
        double w = 30.0 + 7.0 * (double)lipi_inflation_display_width(rep->tok_names[t]);
        if (lx + w > width && lx > left) {
            ly += LEGEND_ROW;
            lx = left;
        }
        fprintf(f, "<g class=\"legend-item\" data-series=\"%zu\"><rect class=\"swatch\" x=\"%.1f\" "
                   "y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">",
                t, lx, ly, palette[t % N_COLORS], lx + 19.0, ly + 11.5);
        lipi_inflation_html_string(f, rep->tok_names[t]);
        fputs("</text></g>\n", f);
        lx += w;
    }
    fputs("</g>\n<g class=\"ticks\">\n", f);
    for (int k = 0;; k++) {
        double v;
        int dec = decimals;
        if (c->log) {
            /* 1-2-5 ticks from lo: 0.5, 1, 2, 5, 10, 20 ... */
            v = lo;
            for (int i = 0; i < k; i++)
                v = step125(v * 1.5, true);
            if (v > xmax * (1.0 + 1e-9))
                break;
            dec = v >= 1.0 ? 0 : (int)ceil(-log10(v) - 1e-9);
        } else {
            v = k * step;
            if (v > xmax + 1e-9)
                break;
        }
        double x = left + chart_x(c, v, scale, lo, xmax);
        char label[32];
        lipi_inflation_fmt(label, sizeof label, v, dec, "");
        fprintf(f,
                "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                "<text class=\"axis\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                x, x, top - 4.0, top + plot_h, x, top - 8.0, label);
    }
    fprintf(f, "<text class=\"axis\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
            left + PLOT_W / 2.0, top + plot_h + 30.0, c->axis);
    /* The reference line goes under the bars, so it never hides a value. */
    double rx = left + chart_x(c, 1.0, scale, lo, xmax);
    fprintf(f,
            "</g>\n<line class=\"reference\" data-value=\"1.0\" x1=\"%.1f\" x2=\"%.1f\" "
            "y1=\"%.1f\" y2=\"%.1f\"/>\n<text class=\"reference-label\" x=\"%.1f\" y=\"%.1f\">",
            rx, rx, top - 2.0, top + plot_h, rx + 4.0, top + plot_h + 14.0);
    if (rep->text_mode)
        fputs("1.0 = one token per word", f);
    else if (rep->reference < rep->n_lang) {
        fputs("1.0 = ", f);
        lipi_inflation_html_string(f, rep->lang_names[rep->reference]);
    } else
        fputs("1.0", f);
    fputs("</text>\n<g class=\"bars\">\n", f);
    for (size_t i = 0; i < rep->n_lang; i++) {
        size_t l = order[i];
        double gy = top + group_h * (double)i + GROUP_GAP / 2.0;
        fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", left - 8.0,
                gy + (double)(n_bars * BAR_H) / 2.0 + 4.0);
        lipi_inflation_html_string(f, rep->lang_names[l]);
        fputs("</text>\n", f);
        for (size_t k = 0; k < n_bars; k++) {
            size_t t = k / c->n_metric, m = k % c->n_metric;
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, l, &row);
            double v = c->value(rep, t, l, m);
            bool ok = !isnan(v) && isfinite(v) && (!c->log || v > 0.0);
            char value[32];
            lipi_inflation_fmt(value, sizeof value, ok ? v : NAN, 3, "none");
            /* Rows with too many unknown tokens are drawn faded, not hidden:
             * their bar is real but not a fair comparison. */
            fprintf(f,
                    "<rect class=\"bar\" data-series=\"%zu\"%s data-value=\"%s\"%s x=\"%.1f\" "
                    "y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
                    t, c->metric_attr[m], value, row.comparable ? "" : " data-comparable=\"false\"",
                    left, gy + (double)(k * BAR_H), ok ? chart_x(c, v, scale, lo, xmax) : 0.0,
                    BAR_H - 2, palette[t % N_COLORS]);
            lipi_inflation_html_string(f, rep->lang_names[l]);
            fputs(" \xC2\xB7 ", f);
            lipi_inflation_html_string(f, rep->tok_names[t]);
            fprintf(f, ": %s %s%s</title></rect>\n", c->metric_name[m], ok ? value : "-",
                    row.comparable ? "" : " (not comparable: over 10% unknown characters)");
            if (ok) {
                char shown[32];
                lipi_inflation_fmt(shown, sizeof shown, v, 2, "");
                fprintf(f,
                        "<text class=\"value\" data-series=\"%zu\" x=\"%.1f\" y=\"%.1f\">%s%s"
                        "</text>\n",
                        t, left + chart_x(c, v, scale, lo, xmax) + 3.0,
                        gy + (double)(k * BAR_H) + BAR_H - 3.0, shown, row.comparable ? "" : "*");
            }
        }
    }
    fputs("</g>\n</svg>\n", f);
}

/* The first chart's value: parity, or fertility in text mode. */
static double inflation_value(const lipi_inflation_report *rep, size_t t, size_t l, size_t m)
{
    (void)m;
    lipi_inflation_row row;
    lipi_inflation_get_row(rep, t, l, &row);
    return rep->text_mode ? row.fertility : row.parity;
}

static void write_inflation_chart(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    const char *what = rep->text_mode ? "fertility (tokens per word)" : "parity";
    char aria[128];
    snprintf(aria, sizeof aria, "Bar chart of %s per %s, one bar per tokenizer", what,
             rep->text_mode ? "script" : "language");
    static const char *const attr[] = {""};
    const char *name[] = {rep->text_mode ? "fertility" : "parity"};
    chart_spec c = {"chart", aria, what, 1, name, attr, inflation_value, false};
    write_chart(rep, order, &c, f);
}

/* The cost chart's values against the reference: m = 0 the ratio of
 * tokens, which is also that of KV cache and price (both linear in n, so
 * parity itself); m = 1 attention, Σn² over Σn² of the reference. */
static double cost_value(const lipi_inflation_report *rep, size_t t, size_t l, size_t m)
{
    if (m == 0) {
        lipi_inflation_row row;
        lipi_inflation_get_row(rep, t, l, &row);
        return row.parity;
    }
    lipi_inflation_cost cost;
    lipi_inflation_get_cost(rep, t, l, &cost);
    return cost.attention_ratio;
}

/* Whether the page has the cost chart: a cost model and a reference. */
static bool has_cost_chart(const lipi_inflation_report *rep)
{
    return rep->has_cost && !rep->text_mode && rep->reference < rep->n_lang;
}

/* The heading, note and chart of the cost section; nothing without a cost
 * model or a reference language (text mode has none). The ratios span from
 * below 1 to tens (attention grows with the square of a line's tokens), and
 * a ratio and its inverse should look equally far from 1: a log scale. */
static void write_cost_section(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    if (!has_cost_chart(rep))
        return;
    bool price = !isnan(rep->price_per_million);
    const char *linear = price ? "tokens / KV cache / price" : "tokens / KV cache";
    fputs("<h2>Cost against ", f);
    lipi_inflation_html_string(f, rep->lang_names[rep->reference]);
    fputs("</h2>\n<p class=\"note\">Per language, two bars per tokenizer: the solid one is the "
          "ratio of tokens to the reference's for the same lines, which is also the ratio of "
          "KV cache",
          f);
    fputs(price ? " and of price" : "", f);
    fputs(" (all linear in a line's tokens n); the faded one is the ratio of attention, "
          "\xCE\xA3n\xC2\xB2 over the lines (quadratic: twice the tokens per line cost four "
          "times the attention). Log scale.</p>\n<figure>\n",
          f);
    static const char *const attr[] = {" data-metric=\"linear\"",
                                       " data-metric=\"attention\" fill-opacity=\"0.45\""};
    const char *name[] = {linear, "attention"};
    char aria[160];
    snprintf(aria, sizeof aria,
             "Bar chart of cost relative to the reference language, log scale, per language, "
             "two bars per tokenizer: %s, and attention",
             linear);
    chart_spec c = {"cost-chart", aria, "cost relative to the reference (log scale)", 2, name,
                    attr, cost_value, true};
    write_chart(rep, order, &c, f);
    fputs("</figure>\n", f);
}

static void write_num(FILE *f, double v, int decimals, const char *cls)
{
    char buf[48];
    lipi_inflation_fmt(buf, sizeof buf, v, decimals, "-");
    fprintf(f, "<td%s>%s</td>", cls, buf);
}

static void write_summary_table(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    fputs("<table id=\"summary\">\n<thead><tr><th class=\"name\"></th>", f);
    for (size_t t = 0; t < rep->n_tok; t++) {
        fputs("<th class=\"group\" colspan=\"4\">", f);
        lipi_inflation_html_string(f, rep->tok_names[t]);
        fputs("</th>", f);
    }
    fprintf(f, "</tr>\n<tr><th class=\"name\">%s</th>", rep->text_mode ? "script" : "language");
    for (size_t t = 0; t < rep->n_tok; t++)
        fprintf(f, "<th class=\"first\">%s</th><th>fertility</th><th>chars/token</th>"
                   "<th>continued words</th>",
                rep->text_mode ? "tokens" : "parity");
    fputs("</tr></thead>\n<tbody>\n", f);
    for (size_t i = 0; i < rep->n_lang; i++) {
        size_t l = order[i];
        bool flagged = false;
        for (size_t t = 0; t < rep->n_tok; t++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, l, &row);
            flagged = flagged || !row.comparable;
        }
        fprintf(f, "<tr%s><td class=\"name\">", flagged ? " class=\"flagged\"" : "");
        lipi_inflation_html_string(f, rep->lang_names[l]);
        fputs("</td>", f);
        for (size_t t = 0; t < rep->n_tok; t++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, l, &row);
            if (rep->text_mode)
                fprintf(f, "<td class=\"first\">%" PRIu64 "</td>", row.tokens);
            else {
                char buf[48];
                lipi_inflation_fmt(buf, sizeof buf, row.parity, 2, "-");
                fprintf(f, "<td class=\"first\">%s%s</td>", buf, row.comparable ? "" : "*");
            }
            write_num(f, row.fertility, 2, "");
            write_num(f, row.chars_per_token, 2, "");
            char buf[48];
            lipi_inflation_fmt(buf, sizeof buf, row.continued_share * 100.0, 1, "-");
            fprintf(f, "<td>%s%s</td>", buf, isnan(row.continued_share) ? "" : "%");
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody>\n</table>\n", f);
}

static void write_detail_table(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    fputs("<table id=\"details\">\n<thead><tr><th class=\"name\">tokenizer</th>", f);
    fprintf(f, "<th class=\"name\">%s</th>", rep->text_mode ? "script" : "language");
    fputs("<th>lines</th><th>tokens</th><th>words</th><th>tokens/line</th><th>parity</th>"
          "<th>fertility</th><th>chars/token</th><th>bytes/token</th><th>continued words</th>"
          "<th>unknown tokens</th><th>byte fallback</th><th>unknown chars</th>"
          "<th>grapheme splits</th><th>comparable</th></tr></thead>\n<tbody>\n",
          f);
    for (size_t t = 0; t < rep->n_tok; t++)
        for (size_t i = 0; i < rep->n_lang; i++) {
            lipi_inflation_row row;
            lipi_inflation_get_row(rep, t, order[i], &row);
            fprintf(f, "<tr%s><td class=\"name\">", row.comparable ? "" : " class=\"flagged\"");
            lipi_inflation_html_string(f, row.tokenizer);
            fputs("</td><td class=\"name\">", f);
            lipi_inflation_html_string(f, row.language);
            fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td>",
                    row.lines, row.tokens, row.words);
            write_num(f, row.tokens_per_line, 2, "");
            write_num(f, row.parity, 3, "");
            write_num(f, row.fertility, 3, "");
            write_num(f, row.chars_per_token, 3, "");
            write_num(f, row.bytes_per_token, 3, "");
            const double shares[] = {row.continued_share, row.unknown_share,
                                     row.byte_fallback_share, row.unknown_char_share,
                                     row.grapheme_split_share};
            for (size_t k = 0; k < sizeof shares / sizeof shares[0]; k++) {
                char buf[48];
                lipi_inflation_fmt(buf, sizeof buf, shares[k] * 100.0, 2, "-");
                fprintf(f, "<td>%s%s</td>", buf, isnan(shares[k]) ? "" : "%");
            }
            fprintf(f, "<td>%s</td></tr>\n", row.comparable ? "yes" : "no");
        }
    fputs("</tbody>\n</table>\n", f);
}

/* Marks the page as drawn (data-drawn = bars with a rendered box), for the
 * headless-browser test and for anyone checking a page by script, and lets a
 * click on a legend entry hide or show that tokenizer's bars. */
static const char script_open[] =
    "(function(){\n"
    "var svg=document.getElementById('";
static const char script_rest[] =
    "');if(!svg)return;\n"
    "var bars=svg.querySelectorAll('rect.bar'),n=0;\n"
    "for(var i=0;i<bars.length;i++){var b=bars[i].getBoundingClientRect();"
    "if(b.width>0&&b.height>0)n++;}\n"
    "svg.setAttribute('data-drawn',String(n));\n"
    "var items=svg.querySelectorAll('.legend-item');\n"
    "for(var j=0;j<items.length;j++)items[j].addEventListener('click',function(){\n"
    "var s=this.getAttribute('data-series');this.classList.toggle('off');\n"
    "var marks=svg.querySelectorAll('.bars [data-series]');\n"
    "for(var k=0;k<marks.length;k++)if(marks[k].getAttribute('data-series')===s)"
    "marks[k].classList.toggle('hidden');});\n"
    "})();\n";

/* The script, once per chart id. */
static void write_script(const lipi_inflation_report *rep, FILE *f)
{
    static const char *const ids[] = {"chart", "cost-chart"};
    size_t n = has_cost_chart(rep) ? 2 : 1;
    fputs("<script>\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs(script_open, f);
        fputs(ids[i], f);
        fputs(script_rest, f);
    }
    fputs("</script>\n", f);
}

void lipi_inflation_write_html(const lipi_inflation_report *rep, const size_t *order, FILE *f)
{
    const char *ref = lipi_inflation_reference(rep);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<title>Token inflation",
          f);
    if (ref) {
        fputs(" against ", f);
        lipi_inflation_html_string(f, ref);
    }
    fputs("</title>\n", f);
    write_style(f);
    fputs("</head>\n<body>\n<h1>Token inflation", f);
    if (ref) {
        fputs(" against ", f);
        lipi_inflation_html_string(f, ref);
    }
    fputs("</h1>\n<p class=\"note\">", f);
    if (rep->text_mode)
        fprintf(f, "One mixed text of %" PRIu64 " line(s), counted per script (ICU script of each "
                   "word). Fertility is tokens per word (ICU word segmentation); the chart shows "
                   "it per script, one bar per tokenizer.",
                lipi_inflation_line_total(rep));
    else {
        uint64_t total = lipi_inflation_line_total(rep);
        fprintf(f, "%" PRIu64 " aligned line%s", total, total == 1 ? "" : "s");
        if (rep->skipped)
            fprintf(f, " (%" PRIu64 " more skipped: empty in some file)", rep->skipped);
        fputs(". Parity is the number of tokens a language needs divided by the number the "
              "reference needs for the same lines (Petrov et al. 2023); fertility is tokens "
              "per word (ICU word segmentation); continued words are words split into two or "
              "more tokens (Rust et al. 2021).",
              f);
    }
    fputs(" Tokens are counted without special tokens. * marks a row that is not comparable: "
          "over 10% of its characters are in unknown tokens.</p>\n<figure>\n",
          f);
    write_inflation_chart(rep, order, f);
    fputs("</figure>\n", f);
    write_cost_section(rep, order, f);
    fputs("<h2>Summary</h2>\n<div class=\"scroll\">\n", f);
    write_summary_table(rep, order, f);
    fputs("</div>\n", f);
    fputs("<h2>All figures</h2>\n<div class=\"scroll\">\n", f);
    write_detail_table(rep, order, f);
    fputs("</div>\n", f);
    write_script(rep, f);
    fputs("</body>\n</html>\n", f);
}

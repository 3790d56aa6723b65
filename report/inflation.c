/* Inflation report: per (tokenizer, language) counts and the figures made
 * from them. Output formats live in inflation_output.c and inflation_html.c;
 * the parallel files are read by tokenizer/parallel_files.c. */
#include "report/inflation_impl.h"

#include <math.h>
#include <string.h>
#include <unicode/ubrk.h>
#include <unicode/uscript.h>
#include <unicode/utext.h>

/* ------------------------------------------------------------------------ */
/* Construction                                                              */
/* ------------------------------------------------------------------------ */

static lipi_status oom(lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
}

static void free_names(char **names, size_t n)
{
    if (!names)
        return;
    for (size_t i = 0; i < n; i++)
        lipi_free(names[i]);
    lipi_free(names);
}

/* Copies n names into a new array; `what` names the list in errors. */
static lipi_status copy_names(const char *const *names, size_t n, const char *what,
                              char ***out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char **copy = NULL;
    size_t done_n = 0;
    if (n == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected at least one %s, found none",
                              what);
    copy = lipi_calloc(n, sizeof *copy);
    if (!copy) {
        st = oom(err);
        goto done;
    }
    for (; done_n < n; done_n++) {
        if (!names[done_n] || !names[done_n][0]) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "%s %zu: expected a name, found %s",
                                what, done_n + 1, names[done_n] ? "an empty string" : "NULL");
            goto done;
        }
        for (size_t j = 0; j < done_n; j++)
            if (strcmp(names[j], names[done_n]) == 0) {
                st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                    "expected unique %s names, found \"%s\" twice", what,
                                    names[j]);
                goto done;
            }
        copy[done_n] = lipi_strndup(names[done_n], strlen(names[done_n]));
        if (!copy[done_n]) {
            st = oom(err);
            goto done;
        }
    }
    *out = copy;
    copy = NULL;
done:
    free_names(copy, done_n);
    return st;
}

/* Common part of the constructors: tokenizers copied, no rows. */
static lipi_status report_alloc(const char *const *tokenizers, size_t n_tokenizers,
                                lipi_inflation_report **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_inflation_report *rep = lipi_calloc(1, sizeof *rep);
    if (!rep)
        return oom(err);
    rep->reference = LIPI_INFLATION_NO_REFERENCE;
    rep->scratch.ut = (UText)UTEXT_INITIALIZER;
    TRY(copy_names(tokenizers, n_tokenizers, "tokenizer", &rep->tok_names, err));
    rep->n_tok = n_tokenizers;
    *out = rep;
    rep = NULL;
done:
    lipi_inflation_free(rep);
    return st;
}

lipi_status lipi_inflation_new(const char *const *tokenizers, size_t n_tokenizers,
                               const char *const *languages, size_t n_languages,
                               size_t reference, lipi_inflation_report **out,
                               lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_inflation_report *rep = NULL;
    if (!out || (n_tokenizers && !tokenizers) || (n_languages && !languages))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected names and an output");
    if (reference != LIPI_INFLATION_NO_REFERENCE && reference >= n_languages)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a reference below %zu languages, found %zu", n_languages,
                              reference);
    TRY(report_alloc(tokenizers, n_tokenizers, &rep, err));
    TRY(copy_names(languages, n_languages, "language", &rep->lang_names, err));
    rep->n_lang = rep->lang_cap = n_languages;
    if (n_tokenizers <= SIZE_MAX / sizeof *rep->cells)
        rep->cells = lipi_calloc(n_languages, n_tokenizers * sizeof *rep->cells);
    if (!rep->cells) {
        st = oom(err);
        goto done;
    }
    rep->reference = reference;
    *out = rep;
    rep = NULL;
done:
    lipi_inflation_free(rep);
    return st;
}

lipi_status lipi_inflation_new_text(const char *const *tokenizers, size_t n_tokenizers,
                                    lipi_inflation_report **out, lipi_error *err)
{
    if (!out || (n_tokenizers && !tokenizers))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected names and an output");
    lipi_status st = report_alloc(tokenizers, n_tokenizers, out, err);
    if (st == LIPI_OK)
        (*out)->text_mode = true;
    return st;
}

lipi_status lipi_inflation_new_like(const lipi_inflation_report *shape,
                                    lipi_inflation_report **out, lipi_error *err)
{
    if (!shape || !out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a report and an output");
    if (shape->text_mode)
        return lipi_inflation_new_text((const char *const *)shape->tok_names, shape->n_tok, out,
                                       err);
    return lipi_inflation_new((const char *const *)shape->tok_names, shape->n_tok,
                              (const char *const *)shape->lang_names, shape->n_lang,
                              shape->reference, out, err);
}

void lipi_inflation_free(lipi_inflation_report *rep)
{
    if (!rep)
        return;
    free_names(rep->tok_names, rep->n_tok);
    free_names(rep->lang_names, rep->n_lang);
    lipi_free(rep->lang_script);
    lipi_free(rep->cells);
    lipi_inflation_scratch *s = &rep->scratch;
    ubrk_close(s->words_bi);
    if (s->ut_open)
        utext_close(&s->ut);
    lipi_buf_free(&s->text);
    lipi_free(s->words);
    lipi_free(s->gbounds);
    lipi_free(s->is_bound);
    lipi_free(s->byte_group);
    lipi_free(s->groups);
    lipi_free(s->hits);
    lipi_free(s->cover);
    lipi_free(s->line_counts);
    lipi_free(s->scripts);
    lipi_free(rep);
}

void lipi_inflation_set_skipped_lines(lipi_inflation_report *rep, uint64_t n)
{
    rep->skipped = n;
}

bool lipi_inflation_is_text_mode(const lipi_inflation_report *rep)
{
    return rep->text_mode;
}

size_t lipi_inflation_tokenizer_count(const lipi_inflation_report *rep)
{
    return rep->n_tok;
}

const char *lipi_inflation_tokenizer_name(const lipi_inflation_report *rep, size_t i)
{
    return i < rep->n_tok ? rep->tok_names[i] : NULL;
}

size_t lipi_inflation_language_count(const lipi_inflation_report *rep)
{
    return rep->n_lang;
}

const char *lipi_inflation_language_name(const lipi_inflation_report *rep, size_t i)
{
    return i < rep->n_lang ? rep->lang_names[i] : NULL;
}

const char *lipi_inflation_reference(const lipi_inflation_report *rep)
{
    return rep->reference < rep->n_lang ? rep->lang_names[rep->reference] : NULL;
}

/* ------------------------------------------------------------------------ */
/* Line analysis: words, grapheme boundaries, script groups                  */
/* ------------------------------------------------------------------------ */

static lipi_status icu_error(lipi_error *err, UErrorCode ue, const char *what)
{
    return lipi_error_set(err, ue == U_MEMORY_ALLOCATION_ERROR ? LIPI_ENOMEM : LIPI_EICU, NULL, 0,
                          0, "%s: %s", what, u_errorName(ue));
}

/* Script of a word: that of its first letter which is neither Common nor
 * Inherited, so "2023" is Common but "क़िला" and "x²" are not. */
static int word_script(const char *s, size_t start, size_t end)
{
    size_t i = start;
    while (i < end) {
        uint32_t cp;
        size_t k = lipi_utf8_decode(s + i, end - i, &cp);
        if (k == 0)
            break;
        int sc = lipi_script_of(cp);
        if (sc != USCRIPT_COMMON && sc != USCRIPT_INHERITED && sc != USCRIPT_UNKNOWN &&
            sc != USCRIPT_INVALID_CODE)
            return sc;
        i += k;
    }
    return USCRIPT_COMMON;
}

/* Group index (into s->groups) of `script`, adding the group if new. */
static lipi_status group_of(lipi_inflation_scratch *s, int script, uint32_t *g)
{
    for (size_t i = 0; i < s->n_groups; i++)
        if (s->groups[i].script == script) {
            *g = (uint32_t)i;
            return LIPI_OK;
        }
    void *p = s->groups;
    lipi_status st = lipi_grow(&p, &s->groups_cap, s->n_groups + 1, sizeof *s->groups);
    s->groups = p;
    if (st != LIPI_OK)
        return st;
    s->groups[s->n_groups] = (lipi_inflation_group){.script = script};
    *g = (uint32_t)s->n_groups++;
    return LIPI_OK;
}

/* Finds the words of line[0..len) with ICU's word break iterator: the
 * segments whose rule status is not UBRK_WORD_NONE (letters, numbers, kana,
 * ideographs; dictionary segmentation for Thai, Lao, Khmer, Burmese). */
static lipi_status find_words(lipi_inflation_scratch *s, const char *line, size_t len,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    UErrorCode ue = U_ZERO_ERROR;
    s->n_words = 0;
    if (len == 0)
        return LIPI_OK;
    if (len > INT32_MAX) /* ICU break iterators index with int32_t */
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a line below 2 GiB, found %zu bytes", len);
    if (!s->words_bi) {
        s->words_bi = ubrk_open(UBRK_WORD, "", NULL, 0, &ue);
        if (U_FAILURE(ue)) {
            s->words_bi = NULL;
            return icu_error(err, ue, "word break iterator");
        }
    }
    utext_openUTF8(&s->ut, line, (int64_t)len, &ue);
    if (U_FAILURE(ue))
        return icu_error(err, ue, "word break text");
    s->ut_open = true;
    ubrk_setUText(s->words_bi, &s->ut, &ue);
    if (U_FAILURE(ue))
        return icu_error(err, ue, "word break text");
    int32_t prev = ubrk_first(s->words_bi);
    for (int32_t b = ubrk_next(s->words_bi); b != UBRK_DONE; prev = b, b = ubrk_next(s->words_bi)) {
        if (ubrk_getRuleStatus(s->words_bi) == UBRK_WORD_NONE)
            continue;
        void *p = s->words;
        TRY(lipi_grow(&p, &s->words_cap, s->n_words + 1, sizeof *s->words));
        s->words = p;
        s->words[s->n_words++] = (lipi_inflation_word){(size_t)prev, (size_t)b, 0};
    }
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    return st;
}

/* Analyses the text of a line unless it is the one analysed last. */
static lipi_status analyse_line(lipi_inflation_report *rep, const char *line, size_t len,
                                lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_inflation_scratch *s = &rep->scratch;
    if (s->valid && s->text.len == len && (len == 0 || memcmp(s->text.p, line, len) == 0))
        return LIPI_OK;
    s->valid = false;
    size_t bad = lipi_utf8_valid_prefix(line, len);
    if (bad < len)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, bad,
                              "expected UTF-8, found byte 0x%02X", (unsigned char)line[bad]);
    TRY(find_words(s, line, len, err));

    size_t n_bounds = 0;
    TRY(lipi_graphemes(line, len, &s->gbounds, &s->gbounds_cap, &n_bounds, err));
    void *p = s->is_bound;
    if (lipi_grow(&p, &s->is_bound_cap, len + 1, 1) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    s->is_bound = p;
    memset(s->is_bound, 0, len + 1);
    for (size_t i = 0; i <= n_bounds; i++)
        s->is_bound[s->gbounds[i]] = 1;

    /* Groups: one in parallel mode; one per script in text mode, with every
     * byte assigned to the group of its word, or of the word before it. */
    s->n_groups = 0;
    uint32_t g = 0;
    if (!rep->text_mode || s->n_words == 0) {
        if (group_of(s, USCRIPT_COMMON, &g) != LIPI_OK) {
            st = oom(err);
            goto done;
        }
    }
    if (rep->text_mode) {
        p = s->byte_group;
        if (lipi_grow(&p, &s->byte_group_cap, len ? len : 1, sizeof *s->byte_group) != LIPI_OK) {
            st = oom(err);
            goto done;
        }
        s->byte_group = p;
        for (size_t w = 0; w < s->n_words; w++) {
            lipi_inflation_word *wd = &s->words[w];
            if (group_of(s, word_script(line, wd->start, wd->end), &wd->group) != LIPI_OK) {
                st = oom(err);
                goto done;
            }
        }
        size_t w = 0;
        for (size_t i = 0; i < len; i++) {
            while (w + 1 < s->n_words && s->words[w + 1].start <= i)
                w++;
            s->byte_group[i] = s->n_words ? s->words[w].group : 0;
        }
    }
    for (size_t i = 0; i < len; i++) {
        uint32_t gi = rep->text_mode ? s->byte_group[i] : 0;
        s->groups[gi].bytes++;
        if (((unsigned char)line[i] & 0xC0) != 0x80)
            s->groups[gi].chars++;
    }
    for (size_t w = 0; w < s->n_words; w++)
        s->groups[s->words[w].group].words++;

    s->text.len = 0;
    if (lipi_buf_append(&s->text, line, len) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    s->valid = true;
done:
    return st;
}

/* ------------------------------------------------------------------------ */
/* Counting one encoded line                                                 */
/* ------------------------------------------------------------------------ */

/* Index of the first word that ends after byte `at` (n_words if none). */
static size_t first_word_ending_after(const lipi_inflation_scratch *s, size_t at)
{
    size_t lo = 0, hi = s->n_words;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->words[mid].end <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void add_counts(lipi_inflation_counts *dst, const lipi_inflation_counts *src)
{
    dst->lines += src->lines;
    dst->tokens += src->tokens;
    dst->words += src->words;
    dst->chars += src->chars;
    dst->bytes += src->bytes;
    dst->continued += src->continued;
    dst->unknown_tokens += src->unknown_tokens;
    dst->fallback_tokens += src->fallback_tokens;
    dst->unknown_chars += src->unknown_chars;
    dst->boundaries += src->boundaries;
    dst->split_boundaries += src->split_boundaries;
    dst->tokens_sq += src->tokens_sq;
}

/* Row of text-mode script `script`, or the number of rows if it has none. */
static size_t row_of_script(const lipi_inflation_report *rep, int script)
{
    for (size_t r = 0; r < rep->n_lang; r++)
        if (rep->lang_script[r] == script)
            return r;
    return rep->n_lang;
}

/* Makes room for `extra` more rows (text mode) without adding them, so that
 * adding them afterwards cannot fail half-way. The three row arrays share
 * lang_cap, which only grows once all three have. */
static lipi_status reserve_rows(lipi_inflation_report *rep, size_t extra)
{
    if (extra > SIZE_MAX / 2 - rep->n_lang)
        return LIPI_ENOMEM;
    size_t need = rep->n_lang + extra;
    if (need <= rep->lang_cap)
        return LIPI_OK;
    size_t cap = rep->lang_cap * 2 > need ? rep->lang_cap * 2 : need;
    void *p = lipi_reallocarray(rep->cells, cap, rep->n_tok * sizeof *rep->cells);
    if (!p)
        return LIPI_ENOMEM;
    rep->cells = p;
    p = lipi_reallocarray(rep->lang_names, cap, sizeof *rep->lang_names);
    if (!p)
        return LIPI_ENOMEM;
    rep->lang_names = p;
    p = lipi_reallocarray(rep->lang_script, cap, sizeof *rep->lang_script);
    if (!p)
        return LIPI_ENOMEM;
    rep->lang_script = p;
    rep->lang_cap = cap;
    return LIPI_OK;
}

/* Adds rows for the scripts in scripts[0..n) that have none (text mode),
 * named by ICU ("Devanagari"). All or nothing: on LIPI_ENOMEM no row was
 * added. */
static lipi_status add_script_rows(lipi_inflation_report *rep, const int *scripts, size_t n)
{
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++)
        if (row_of_script(rep, scripts[i]) == rep->n_lang)
            fresh++;
    if (fresh == 0)
        return LIPI_OK;
    if (reserve_rows(rep, fresh) != LIPI_OK)
        return LIPI_ENOMEM;
    size_t first = rep->n_lang, added = 0;
    for (size_t i = 0; i < n; i++) {
        bool known = row_of_script(rep, scripts[i]) < rep->n_lang;
        for (size_t k = first; k < first + added; k++)
            known = known || rep->lang_script[k] == scripts[i];
        if (known)
            continue;
        const char *name = uscript_getName((UScriptCode)scripts[i]);
        if (!name)
            name = "Unknown";
        char *copy = lipi_strndup(name, strlen(name));
        if (!copy) {
            for (size_t k = first; k < first + added; k++)
                lipi_free(rep->lang_names[k]);
            return LIPI_ENOMEM;
        }
        rep->lang_names[first + added] = copy;
        rep->lang_script[first + added] = scripts[i];
        memset(rep->cells + (first + added) * rep->n_tok, 0, rep->n_tok * sizeof *rep->cells);
        added++;
    }
    rep->n_lang += added;
    return LIPI_OK;
}

static lipi_status add_tokens(lipi_inflation_report *rep, size_t tok, size_t lang,
                              const char *line, size_t len, const lipi_inflation_token *toks,
                              size_t n, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_inflation_scratch *s = &rep->scratch;
    if (n && !toks)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected tokens, found NULL");
    if (len && !line)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a line, found NULL");
    for (size_t i = 0; i < n; i++)
        if (toks[i].start > toks[i].end || toks[i].end > len)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                  "token %zu: expected a span inside the line's %zu bytes, "
                                  "found [%zu, %zu)",
                                  i, len, toks[i].start, toks[i].end);
    TRY(analyse_line(rep, line, len, err));

    void *p = s->line_counts;
    size_t cap = s->line_counts_cap;
    if (lipi_grow(&p, &cap, s->n_groups, sizeof *s->line_counts) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    s->line_counts = p;
    s->line_counts_cap = cap;
    p = s->hits;
    if (lipi_grow(&p, &s->hits_cap, s->n_words ? s->n_words : 1, 1) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    s->hits = p;
    lipi_inflation_counts *c = s->line_counts;
    memset(c, 0, s->n_groups * sizeof *c);
    if (s->n_words)
        memset(s->hits, 0, s->n_words);

    bool any_unknown = false;
    for (size_t i = 0; i < n; i++) {
        const lipi_inflation_token *t = &toks[i];
        /* A token counts for every word it overlaps; in text mode it belongs
         * to the first of them, or else to the script of its first byte. */
        uint32_t g = 0;
        bool placed = false;
        if (t->start < t->end) {
            for (size_t w = first_word_ending_after(s, t->start);
                 w < s->n_words && s->words[w].start < t->end; w++) {
                if (s->hits[w] < 2)
                    s->hits[w]++;
                if (!placed) {
                    g = s->words[w].group;
                    placed = true;
                }
            }
        }
        if (rep->text_mode && !placed && len)
            g = s->byte_group[t->start < len ? t->start : len - 1];
        c[g].tokens++;
        c[g].unknown_tokens += t->is_unknown;
        c[g].fallback_tokens += t->is_byte_fallback;
        any_unknown = any_unknown || t->is_unknown;
        if (i > 0) {
            /* Overlapping spans share a character (byte pieces of one code
             * point, byte-level pieces of one character): the cut is inside
             * it. Otherwise both ends of the cut must be cluster boundaries. */
            const lipi_inflation_token *a = &toks[i - 1];
            bool split = t->start < a->end || !s->is_bound[a->end] || !s->is_bound[t->start];
            c[g].boundaries++;
            c[g].split_boundaries += split;
        }
    }
    for (size_t w = 0; w < s->n_words; w++)
        c[s->words[w].group].continued += s->hits[w] >= 2;

    if (any_unknown) {
        /* Characters overlapped by unknown tokens, each counted once:
         * cover[i] > 0 when byte i lies in some unknown token. */
        p = s->cover;
        if (lipi_grow(&p, &s->cover_cap, len + 1, sizeof *s->cover) != LIPI_OK) {
            st = oom(err);
            goto done;
        }
        s->cover = p;
        memset(s->cover, 0, (len + 1) * sizeof *s->cover);
        for (size_t i = 0; i < n; i++)
            if (toks[i].is_unknown && toks[i].start < toks[i].end) {
                s->cover[toks[i].start]++;
                s->cover[toks[i].end]--;
            }
        int64_t depth = 0;
        bool covered = false;
        for (size_t i = 0; i < len; i++) {
            bool lead = ((unsigned char)line[i] & 0xC0) != 0x80;
            if (lead && i > 0 && covered)
                c[rep->text_mode ? s->byte_group[i - 1] : 0].unknown_chars++;
            if (lead)
                covered = false;
            depth += s->cover[i];
            covered = covered || depth > 0;
        }
        if (len && covered)
            c[rep->text_mode ? s->byte_group[len - 1] : 0].unknown_chars++;
    }

    for (size_t gi = 0; gi < s->n_groups; gi++) {
        c[gi].chars = s->groups[gi].chars;
        c[gi].bytes = s->groups[gi].bytes;
        c[gi].words = s->groups[gi].words;
        c[gi].lines = rep->text_mode ? (c[gi].chars > 0 || c[gi].tokens > 0) : 1;
        c[gi].tokens_sq = c[gi].tokens * c[gi].tokens;
    }

    if (!rep->text_mode) {
        add_counts(&rep->cells[lang * rep->n_tok + tok], &c[0]);
        goto done;
    }
    p = s->scripts;
    if (lipi_grow(&p, &s->scripts_cap, s->n_groups, sizeof *s->scripts) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    s->scripts = p;
    size_t n_scripts = 0;
    for (size_t gi = 0; gi < s->n_groups; gi++)
        if (c[gi].lines)
            s->scripts[n_scripts++] = s->groups[gi].script;
    if (add_script_rows(rep, s->scripts, n_scripts) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    for (size_t gi = 0; gi < s->n_groups; gi++)
        if (c[gi].lines)
            add_counts(&rep->cells[row_of_script(rep, s->groups[gi].script) * rep->n_tok + tok],
                       &c[gi]);
done:
    return st;
}

lipi_status lipi_inflation_add_line(lipi_inflation_report *rep, size_t tok, size_t lang,
                                    const char *line, size_t len,
                                    const lipi_inflation_token *toks, size_t n,
                                    lipi_error *err)
{
    if (!rep || rep->text_mode)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a parallel report, found %s",
                              rep ? "a text-mode report" : "NULL");
    if (tok >= rep->n_tok || lang >= rep->n_lang)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected tokenizer < %zu and language < %zu, found %zu and %zu",
                              rep->n_tok, rep->n_lang, tok, lang);
    return add_tokens(rep, tok, lang, line, len, toks, n, err);
}

lipi_status lipi_inflation_add_text_line(lipi_inflation_report *rep, size_t tok,
                                         const char *line, size_t len,
                                         const lipi_inflation_token *toks, size_t n,
                                         lipi_error *err)
{
    if (!rep || !rep->text_mode)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a text-mode report, found %s",
                              rep ? "a parallel report" : "NULL");
    if (tok >= rep->n_tok)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected tokenizer < %zu, found %zu", rep->n_tok, tok);
    return add_tokens(rep, tok, 0, line, len, toks, n, err);
}

/* ------------------------------------------------------------------------ */
/* Merging and reading                                                       */
/* ------------------------------------------------------------------------ */

lipi_status lipi_inflation_merge(lipi_inflation_report *dst, const lipi_inflation_report *src,
                                 lipi_error *err)
{
    bool same = dst && src && dst->text_mode == src->text_mode && dst->n_tok == src->n_tok &&
                dst->reference == src->reference;
    for (size_t t = 0; same && t < dst->n_tok; t++)
        same = strcmp(dst->tok_names[t], src->tok_names[t]) == 0;
    if (same && !dst->text_mode) {
        same = dst->n_lang == src->n_lang;
        for (size_t l = 0; same && l < dst->n_lang; l++)
            same = strcmp(dst->lang_names[l], src->lang_names[l]) == 0;
    }
    if (!same)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected reports of the same tokenizers and languages");
    if (dst->text_mode && add_script_rows(dst, src->lang_script, src->n_lang) != LIPI_OK)
        return oom(err);
    for (size_t l = 0; l < src->n_lang; l++) {
        size_t dl = dst->text_mode ? row_of_script(dst, src->lang_script[l]) : l;
        for (size_t t = 0; t < src->n_tok; t++)
            add_counts(&dst->cells[dl * dst->n_tok + t], &src->cells[l * src->n_tok + t]);
    }
    dst->skipped += src->skipped;
    return LIPI_OK;
}

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : NAN;
}

void lipi_inflation_get_row(const lipi_inflation_report *rep, size_t tok, size_t lang,
                            lipi_inflation_row *row)
{
    LIPI_ASSERT(tok < rep->n_tok && lang < rep->n_lang);
    const lipi_inflation_counts *c = &rep->cells[lang * rep->n_tok + tok];
    *row = (lipi_inflation_row){
        .tokenizer = rep->tok_names[tok],
        .language = rep->lang_names[lang],
        .lines = c->lines,
        .tokens = c->tokens,
        .words = c->words,
        .chars = c->chars,
        .bytes = c->bytes,
        .continued_words = c->continued,
        .unknown_tokens = c->unknown_tokens,
        .byte_fallback_tokens = c->fallback_tokens,
        .unknown_chars = c->unknown_chars,
        .boundaries = c->boundaries,
        .split_boundaries = c->split_boundaries,
        .tokens_per_line = ratio(c->tokens, c->lines),
        .parity = NAN,
        .fertility = ratio(c->tokens, c->words),
        .chars_per_token = ratio(c->chars, c->tokens),
        .bytes_per_token = ratio(c->bytes, c->tokens),
        .continued_share = ratio(c->continued, c->words),
        .unknown_share = ratio(c->unknown_tokens, c->tokens),
        .byte_fallback_share = ratio(c->fallback_tokens, c->tokens),
        .unknown_char_share = ratio(c->unknown_chars, c->chars),
        .grapheme_split_share = ratio(c->split_boundaries, c->boundaries),
        /* Petrov et al.: more than 10% unknown characters makes the counts
         * meaningless; compared in integers so 10.0% exactly passes. */
        .comparable = c->unknown_chars <= c->chars / 10,
    };
    if (rep->reference < rep->n_lang) {
        const lipi_inflation_counts *r = &rep->cells[rep->reference * rep->n_tok + tok];
        if (r->lines == c->lines)
            row->parity = ratio(c->tokens, r->tokens);
    }
}

/* Display order: true when row a goes before row b. */
static bool goes_before(const lipi_inflation_report *rep, size_t a, size_t b)
{
    if (rep->n_tok && !rep->text_mode) {
        lipi_inflation_row ra, rb;
        lipi_inflation_get_row(rep, 0, a, &ra);
        lipi_inflation_get_row(rep, 0, b, &rb);
        if (isnan(ra.parity) != isnan(rb.parity))
            return !isnan(ra.parity);
        if (!isnan(ra.parity) && ra.parity != rb.parity)
            return ra.parity < rb.parity;
    } else if (rep->n_tok) {
        uint64_t ca = rep->cells[a * rep->n_tok].chars, cb = rep->cells[b * rep->n_tok].chars;
        if (ca != cb)
            return ca > cb;
    }
    return strcmp(rep->lang_names[a], rep->lang_names[b]) < 0;
}

void lipi_inflation_language_order(const lipi_inflation_report *rep, size_t *order)
{
    /* Insertion sort: a few hundred rows at most, and stable. */
    for (size_t i = 0; i < rep->n_lang; i++) {
        size_t j = i;
        while (j > 0 && goes_before(rep, i, order[j - 1])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* Pre-tokenizers: a tree whose node kinds and behaviour mirror the
 * pre-tokenizers of Hugging Face tokenizers (tokenizer.json "pre_tokenizer"),
 * with regexes run by PCRE2 (UTF + UCP, JIT) in Oniguruma's meaning.
 *
 * How a call works: the input starts as one piece. Each leaf node turns every
 * piece into sub-pieces (a Sequence runs its children in turn over the whole
 * list), exactly as Hugging Face's PreTokenizedString::split does. A piece
 * whose text is still a byte-for-byte slice of the input is "plain": it needs
 * no storage but its source span. ByteLevel and Metaspace rewrite text; such a
 * piece is "mapped": its text lives in a per-call arena with one source span
 * per text byte (Hugging Face's alignments), so later splits can still report
 * offsets into the input. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/uscript.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/base.h"
#include "tokenizer/base_json.h"
#include "tokenizer/pretokenize_impl.h"
#include "tokenizer/scanner_impl.h"

/* ======================================================================== */
/* The tree                                                                  */
/* ======================================================================== */

typedef enum {
    PT_SEQUENCE,
    PT_SPLIT,
    PT_BYTELEVEL,
    PT_WHITESPACE,
    PT_WHITESPACE_SPLIT,
    PT_BERT,
    PT_METASPACE,
    PT_PUNCTUATION,
    PT_DIGITS,
    PT_UNICODE_SCRIPTS,
    PT_CHAR_DELIMITER,
    PT_FIXED_LENGTH,
} pt_kind;

/* Hugging Face SplitDelimiterBehavior, in its order. */
typedef enum {
    BEH_REMOVED,
    BEH_ISOLATED,
    BEH_MERGED_PREVIOUS,
    BEH_MERGED_NEXT,
    BEH_CONTIGUOUS,
} pt_behavior;

static const char *const behavior_names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                             "MergedWithNext", "Contiguous"};

typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } pt_prepend;
static const char *const prepend_names[] = {"always", "first", "never"};

struct lipi_pretokenizer {
    pt_kind kind;
    pcre2_code *re;          /* Split, ByteLevel with use_regex */
    /* The hand-written equivalent of re, when its pattern is a known one;
     * re stays compiled (tests compare both, and no_scan selects re). */
    const lipi_scanner *scan;
    bool no_scan;
    /* Split */
    char *pattern;           /* as written in tokenizer.json, NUL-terminated */
    size_t pattern_len;
    bool pattern_is_regex;   /* {"Regex": ...} rather than {"String": ...} */
    bool invert;
    pt_behavior behavior;    /* Split, Punctuation */
    /* ByteLevel */
    bool add_prefix_space, trim_offsets, use_regex;
    /* Metaspace */
    uint32_t replacement;
    pt_prepend prepend;
    bool split;
    /* Digits */
    bool individual_digits;
    /* CharDelimiterSplit */
    uint32_t delimiter;
    /* FixedLength */
    size_t length;
    /* Sequence */
    lipi_pretokenizer **children;
    size_t n_children;
};

/* ======================================================================== */
/* PCRE2 through the lipi allocator                                          */
/* ======================================================================== */

static void *pcre_malloc(PCRE2_SIZE size, void *data)
{
    (void)data;
    return lipi_malloc(size);
}

static void pcre_free(void *p, void *data)
{
    (void)data;
    lipi_free(p);
}

/* Contexts copy the memory functions by value, so a general context is only
 * needed while another PCRE2 object is being created. */
static pcre2_general_context *pcre_gctx(void)
{
    return pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
}

/* Oniguruma's \w: Unicode Word (Alphabetic, marks, Nd, Pc). Outside a
 * character class it also takes the Latin-1 numbers ² ³ ¹ ¼ ½ ¾ (its
 * single-byte table), inside one it does not. */
#define ONIG_WORD_IN "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}"
#define ONIG_WORD_OUT ONIG_WORD_IN "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"
#define W_ "[" ONIG_WORD_OUT "]"
#define NW_ "[^" ONIG_WORD_OUT "]"

/* Public functions end with this: internal helpers return LIPI_ENOMEM
 * without a message, so the message is set once on the way out. */
static lipi_status with_nomem_msg(lipi_status st, lipi_error *err)
{
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    return st;
}

/* Rewrites what reads differently in Oniguruma (Hugging Face runs
 * tokenizer.json patterns with it, Ruby syntax) and PCRE2 into PCRE2 syntax
 * with Oniguruma's meaning:
 *   \s \S   White_Space (PCRE2's \s adds U+180E);
 *   \w \W   see ONIG_WORD_* (PCRE2's lacks marks and Alphabetic symbols);
 *   \b \B   boundaries of that \w;
 *   \h \H   hex digits (horizontal space in PCRE2);
 *   (?m)    dot matches newline, PCRE2's (?s); ^ and $ are always line
 *           anchors (PCRE2_MULTILINE at compile time).
 * \W and \S inside a class keep PCRE2's meaning: a class cannot hold the
 * complement of a union. */
static lipi_status translate_pattern(const char *p, size_t n, lipi_buf *out)
{
    lipi_status st = LIPI_OK;
    bool in_class = false;
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            if (d == 'Q') { /* \Q...\E is literal text */
                size_t end = n;
                for (size_t k = i + 2; k + 1 < n; k++)
                    if (p[k] == '\\' && p[k + 1] == 'E') {
                        end = k + 2;
                        break;
                    }
                TRY(lipi_buf_append(out, p + i, end - i));
                i = end;
                continue;
            }
            const char *rep = NULL;
            switch (d) {
            case 's': rep = "\\p{White_Space}"; break;
            case 'S': rep = "\\P{White_Space}"; break;
            case 'w': rep = in_class ? ONIG_WORD_IN : W_; break;
            case 'W': rep = in_class ? NULL : NW_; break;
            case 'b':
                rep = in_class ? NULL : "(?:(?<=" W_ ")(?!" W_ ")|(?<!" W_ ")(?=" W_ "))";
                break;
            case 'B':
                rep = in_class ? NULL : "(?:(?<=" W_ ")(?=" W_ ")|(?<!" W_ ")(?!" W_ "))";
                break;
            case 'h': rep = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;
            case 'H': rep = in_class ? NULL : "[^0-9a-fA-F]"; break;
            default: break;
            }
            /* \cX takes the next character whatever it is, even '[' */
            size_t k = d == 'c' && i + 2 < n ? 3 : 2;
            if (rep)
                TRY(lipi_buf_append(out, rep, strlen(rep)));
            else
                TRY(lipi_buf_append(out, p + i, k));
            i += k;
            continue;
        }
        if (!in_class && c == '(' && i + 1 < n && p[i + 1] == '?') {
            /* (?imx-imx) and (?imx-imx:...): Oniguruma's m is PCRE2's s */
            size_t k = i + 2;
            while (k < n && strchr("imx-", p[k]) && p[k])
                k++;
            if (k > i + 2 && k < n && (p[k] == ')' || p[k] == ':')) {
                for (size_t x = i; x < k; x++) {
                    char ch = x >= i + 2 && p[x] == 'm' ? 's' : p[x];
                    TRY(lipi_buf_append(out, &ch, 1));
                }
                i = k;
                continue;
            }
        }
        if (!in_class && c == '[') {
            /* "[]" and "[^]" start with a literal ']' */
            size_t k = i + 1;
            if (k < n && p[k] == '^')
                k++;
            if (k < n && p[k] == ']')
                k++;
            TRY(lipi_buf_append(out, p + i, k - i));
            in_class = true;
            i = k;
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
            size_t k = i + 2;
            while (k + 1 < n && !(p[k] == ':' && p[k + 1] == ']'))
                k++;
            k = k + 1 < n ? k + 2 : n;
            TRY(lipi_buf_append(out, p + i, k - i));
            i = k;
            continue;
        }
        if (in_class && c == ']')
            in_class = false;
        TRY(lipi_buf_append(out, &c, 1));
        i++;
    }
    if (!out->p) /* empty pattern: still hand PCRE2 a valid pointer */
        TRY(lipi_buf_reserve(out, 0));
done:
    return st;
}

static lipi_status regex_error(lipi_error *err, const char *where, int code, size_t offset)
{
    PCRE2_UCHAR msg[160];
    if (pcre2_get_error_message(code, msg, sizeof msg) < 0)
        snprintf((char *)msg, sizeof msg, "PCRE2 error %d", code);
    return lipi_error_set(err, LIPI_EREGEX, NULL, 0, offset, "%s%s%s at pattern offset %zu",
                          where ? where : "", where ? ": " : "", (const char *)msg, offset);
}

/* Compiles pattern[0..n) (Oniguruma meaning, see translate_pattern) with
 * UTF + UCP and JIT-compiles it when the platform has a JIT. */
static lipi_status compile_regex(const char *pattern, size_t n, const char *where,
                                 pcre2_code **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_buf tr = {0};
    pcre2_general_context *g = NULL;
    pcre2_compile_context *cc = NULL;
    pcre2_code *code = NULL;
    const uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C | PCRE2_MULTILINE;
    *out = NULL;
    TRY(translate_pattern(pattern, n, &tr));
    g = pcre_gctx();
    cc = g ? pcre2_compile_context_create(g) : NULL;
    if (cc)
        pcre2_set_newline(cc, PCRE2_NEWLINE_LF); /* Oniguruma's only line end */
    if (!cc) {
        st = LIPI_ENOMEM;
        goto done;
    }
    int ec;
    PCRE2_SIZE eo;
    code = pcre2_compile((PCRE2_SPTR)tr.p, tr.len, opts, &ec, &eo, cc);
    if (!code) {
        if (ec == PCRE2_ERROR_HEAP_FAILED) {
            st = LIPI_ENOMEM;
            goto done;
        }
        /* Report the offset in the pattern as written, not as rewritten. */
        int ec0;
        PCRE2_SIZE eo0;
        pcre2_code *c0 = pcre2_compile((PCRE2_SPTR)(n ? pattern : ""), n, opts, &ec0, &eo0, cc);
        if (c0)
            pcre2_code_free(c0);
        else if (ec0 != PCRE2_ERROR_HEAP_FAILED) {
            ec = ec0;
            eo = eo0;
        }
        st = regex_error(err, where, ec, eo);
        goto done;
    }
    int jr = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    if (jr == PCRE2_ERROR_NOMEMORY) {
        st = LIPI_ENOMEM;
        goto done;
    }
    /* Any other JIT failure (no JIT on this CPU) leaves the interpreter. */
    *out = code;
    code = NULL;
done:
    pcre2_code_free(code);
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(g);
    lipi_buf_free(&tr);
    return st;
}

/* ======================================================================== */
/* Construction                                                              */
/* ======================================================================== */

void lipi_pretokenizer_free(lipi_pretokenizer *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_children; i++)
        lipi_pretokenizer_free(p->children[i]);
    lipi_free(p->children);
    pcre2_code_free(p->re);
    lipi_free(p->pattern);
    lipi_free(p);
}

static lipi_status node_new(pt_kind kind, lipi_pretokenizer **out, lipi_error *err)
{
    *out = lipi_calloc(1, sizeof **out);
    if (!*out)
        return LIPI_ENOMEM;
    (*out)->kind = kind;
    (*out)->behavior = BEH_ISOLATED;
    (*out)->replacement = 0x2581;
    (*out)->split = true;
    (*out)->add_prefix_space = (*out)->trim_offsets = (*out)->use_regex = true;
    (*out)->length = 5;
    return LIPI_OK;
}

/* A Split node. A String pattern matches literally: it is compiled as a
 * regex with every ASCII punctuation byte escaped, the way Hugging Face runs
 * regex::escape(s) through Oniguruma (so even "" behaves the same). */
static lipi_status split_new(const char *pattern, size_t n, bool is_regex, pt_behavior beh,
                             bool invert, const char *where, lipi_pretokenizer **out,
                             lipi_error *err)
{
    lipi_status st;
    lipi_pretokenizer *p = NULL;
    lipi_buf esc = {0};
    *out = NULL;
    TRY(node_new(PT_SPLIT, &p, err));
    p->behavior = beh;
    p->invert = invert;
    p->pattern_is_regex = is_regex;
    p->pattern = lipi_strndup(pattern, n);
    if (!p->pattern) {
        st = LIPI_ENOMEM;
        goto done;
    }
    p->pattern_len = n;
    if (is_regex) {
        TRY(compile_regex(pattern, n, where, &p->re, err));
        p->scan = lipi_scanner_find(pattern, n);
    } else {
        if (n > SIZE_MAX / 2) {
            st = LIPI_ENOMEM;
            goto done;
        }
        TRY(lipi_buf_reserve(&esc, 2 * n));
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)pattern[i];
            bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (c < 0x80 && !alnum)
                esc.p[esc.len++] = '\\';
            esc.p[esc.len++] = (char)c;
        }
        TRY(compile_regex(esc.p, esc.len, where, &p->re, err));
    }
    *out = p;
    p = NULL;
done:
    lipi_buf_free(&esc);
    lipi_pretokenizer_free(p);
    return st;
}

static lipi_status bytelevel_new(bool add_prefix_space, bool trim_offsets, bool use_regex,
                                 lipi_pretokenizer **out, lipi_error *err)
{
    lipi_status st;
    lipi_pretokenizer *p = NULL;
    *out = NULL;
    TRY(node_new(PT_BYTELEVEL, &p, err));
    p->add_prefix_space = add_prefix_space;
    p->trim_offsets = trim_offsets;
    p->use_regex = use_regex;
    if (use_regex) {
        const char *gpt2 = lipi_split_pattern("gpt2");
        TRY(compile_regex(gpt2, strlen(gpt2), "ByteLevel", &p->re, err));
        p->scan = lipi_scanner_find(gpt2, strlen(gpt2));
    }
    *out = p;
    p = NULL;
done:
    lipi_pretokenizer_free(p);
    return st;
}

/* The lipi_split_pattern names lipi_pretokenizer_new takes. */
static const char *const named_patterns[] = {"indic", "cl100k", "o200k", "gpt2"};

#define KNOWN_NAMES "indic, cl100k, o200k, gpt2, bytelevel, bert, whitespace, metaspace, digits"

static lipi_status pretokenizer_new(const char *name, lipi_pretokenizer **out, lipi_error *err)
{
    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected an output pointer");
    *out = NULL;
    if (!name)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a pre-tokenizer name (" KNOWN_NAMES ")");
    for (size_t i = 0; i < sizeof named_patterns / sizeof *named_patterns; i++)
        if (strcmp(name, named_patterns[i]) == 0) {
            const char *pattern = lipi_split_pattern(name);
            return split_new(pattern, strlen(pattern), true, BEH_ISOLATED, false, name, out,
                             err);
        }
    if (strcmp(name, "bytelevel") == 0)
        return bytelevel_new(false, true, true, out, err);
    if (strcmp(name, "metaspace") == 0)
        return node_new(PT_METASPACE, out, err);
    if (strcmp(name, "bert") == 0)
        return node_new(PT_BERT, out, err);
    if (strcmp(name, "whitespace") == 0)
        return node_new(PT_WHITESPACE, out, err);
    if (strcmp(name, "digits") == 0) {
        lipi_status st = node_new(PT_DIGITS, out, err);
        if (st == LIPI_OK)
            (*out)->individual_digits = true;
        return st;
    }
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "unknown pre-tokenizer \"%s\", expected one of " KNOWN_NAMES, name);
}

lipi_status lipi_pretokenizer_new(const char *name, lipi_pretokenizer **out, lipi_error *err)
{
    return with_nomem_msg(pretokenizer_new(name, out, err), err);
}

void lipi_pretokenizer_use_scanners(lipi_pretokenizer *p, bool on)
{
    if (!p)
        return;
    p->no_scan = !on;
    for (size_t i = 0; i < p->n_children; i++)
        lipi_pretokenizer_use_scanners(p->children[i], on);
}

/* p, or the one node a chain of one-child Sequences holds. */
static const lipi_pretokenizer *single_node(const lipi_pretokenizer *p)
{
    while (p && p->kind == PT_SEQUENCE && p->n_children == 1)
        p = p->children[0];
    return p;
}

uint32_t lipi_pretokenizer_meta_split(const lipi_pretokenizer *p)
{
    p = single_node(p);
    if (!p || p->kind != PT_METASPACE || !p->split || p->prepend != PREPEND_NEVER)
        return 0;
    return p->replacement;
}

const struct lipi_scanner *lipi_pretokenizer_scanner(const lipi_pretokenizer *p)
{
    p = single_node(p);
    if (!p || p->kind != PT_SPLIT || !p->scan || p->no_scan || p->invert ||
        p->behavior != BEH_ISOLATED)
        return NULL;
    return p->scan;
}

bool lipi_pretokenizer_has_scanner(const lipi_pretokenizer *p)
{
    if (!p)
        return false;
    for (size_t i = 0; i < p->n_children; i++)
        if (lipi_pretokenizer_has_scanner(p->children[i]))
            return true;
    return p->scan != NULL;
}

lipi_status lipi_pretokenizer_new_pattern(const char *pattern, lipi_pretokenizer **out,
                                          lipi_error *err)
{
    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected an output pointer");
    *out = NULL;
    if (!pattern)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected a pattern, found NULL");
    return with_nomem_msg(
        split_new(pattern, strlen(pattern), true, BEH_ISOLATED, false, NULL, out, err), err);
}

/* ======================================================================== */
/* Character classes (Rust std and unicode_categories, as Hugging Face uses) */
/* ======================================================================== */

static inline bool is_whitespace(uint32_t c) /* char::is_whitespace: White_Space */
{
    if (c < 0x80)
        return c == ' ' || (c >= 9 && c <= 13);
    return lipi_char_class(c) & LIPI_CC_SPACE;
}

static bool is_numeric(uint32_t c) /* char::is_numeric: Nd, Nl, No */
{
    if (c < 0x80)
        return c >= '0' && c <= '9';
    return lipi_char_class(c) & LIPI_CC_NUMBER;
}

/* is_ascii_punctuation (which includes ASCII symbols such as $+<=>^`|~) or
 * a Unicode punctuation category P*. */
static inline bool is_punctuation(uint32_t c)
{
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    return lipi_char_class(c) & LIPI_CC_PUNCT;
}

/* Rust regex \w: Alphabetic, marks, Nd, Pc, Join_Control. */
static bool is_rust_word(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    return lipi_char_class(c) & LIPI_CC_WORD;
}

/* Whether leaf node p always ends a piece after character c. */
static bool leaf_cuts_after(const lipi_pretokenizer *p, uint32_t c)
{
    switch (p->kind) {
    case PT_BERT: return is_whitespace(c) || is_punctuation(c);
    case PT_WHITESPACE:
    case PT_WHITESPACE_SPLIT: return is_whitespace(c);
    default: return false;
    }
}

/* Whether leaf node p treats each piece it is given on its own, wherever
 * the piece stands in the text (Metaspace "first" looks at that). */
static bool leaf_piecewise(const lipi_pretokenizer *p)
{
    switch (p->kind) {
    case PT_BERT:
    case PT_WHITESPACE:
    case PT_WHITESPACE_SPLIT:
    case PT_PUNCTUATION:
    case PT_DIGITS:
    case PT_CHAR_DELIMITER: return true;
    default: return false;
    }
}

bool lipi_pretokenizer_cuts_after(const lipi_pretokenizer *p, uint32_t c)
{
    if (!p)
        return false;
    if (p->kind != PT_SEQUENCE)
        return leaf_cuts_after(p, c);
    /* The first node cuts after c in the whole text as in the parts; the
     * later ones see the same pieces either way. */
    if (p->n_children == 0 || p->children[0]->kind == PT_SEQUENCE ||
        !leaf_cuts_after(p->children[0], c))
        return false;
    for (size_t i = 1; i < p->n_children; i++)
        if (p->children[i]->kind == PT_SEQUENCE || !leaf_piecewise(p->children[i]))
            return false;
    return true;
}

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 to U+0100.. in byte order (' ' -> U+0120 'Ġ', '\n' -> U+010A). */
static uint32_t byte_char(uint8_t b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    if (b <= 0x20)
        return 0x100 + b;
    if (b <= 0xA0)
        return 0x100 + 0x21 + (b - 0x7F);
    return 0x143; /* 0xAD */
}


/* ======================================================================== */
/* Per-thread scratch                                                        */
/* ======================================================================== */

typedef struct {
    size_t s0, s1;       /* source span */
    size_t t_off, t_len; /* mapped: text in the arena */
    size_t a_off;        /* mapped: t_len spans in the alignment arena */
    bool mapped;
} pt_piece;

typedef struct {
    pt_piece *v;
    size_t n, cap;
} pt_list;

/* A part of a piece's text, a match of the pattern or not (Hugging Face's
 * find_matches output: consecutive, covering the text). */
typedef struct {
    size_t start, end;
    bool match;
} pt_seg;

typedef struct {
    pcre2_match_context *mctx;
    pcre2_match_data *md;
    pcre2_jit_stack *jstack; /* made on the first JIT stack overflow */
    pt_list lists[2];
    pt_seg *segs;
    size_t n_segs, seg_cap;
    lipi_buf arena;          /* text of mapped pieces */
    lipi_span *align;
    size_t align_len, align_cap;
    const char *src;         /* the input of the current call */
} pt_scratch;

static void scratch_free(pt_scratch *sc)
{
    if (!sc)
        return;
    pcre2_match_context_free(sc->mctx);
    pcre2_match_data_free(sc->md);
    pcre2_jit_stack_free(sc->jstack);
    lipi_free(sc->lists[0].v);
    lipi_free(sc->lists[1].v);
    lipi_free(sc->segs);
    lipi_buf_free(&sc->arena);
    lipi_free(sc->align);
    lipi_free(sc);
}

static lipi_status scratch_get(lipi_pieces *out, pt_scratch **res)
{
    if (out->scratch) {
        *res = out->scratch;
        return LIPI_OK;
    }
    pt_scratch *sc = lipi_calloc(1, sizeof *sc);
    if (!sc)
        return LIPI_ENOMEM;
    pcre2_general_context *g = pcre_gctx();
    if (g) {
        sc->mctx = pcre2_match_context_create(g);
        /* One pair: only the whole match is read, and a short ovector is
         * fine for every pattern (pcre2_match then returns 0). */
        sc->md = pcre2_match_data_create(1, g);
        pcre2_general_context_free(g);
    }
    if (!sc->mctx || !sc->md) {
        scratch_free(sc);
        return LIPI_ENOMEM;
    }
    out->scratch = sc;
    *res = sc;
    return LIPI_OK;
}

static inline const char *piece_text(const pt_scratch *sc, const pt_piece *p)
{
    return p->mapped ? sc->arena.p + p->t_off : sc->src + p->s0;
}

static inline size_t piece_len(const pt_piece *p)
{
    return p->mapped ? p->t_len : p->s1 - p->s0;
}

/* Source span of byte `i` of a piece's text (all bytes of one character
 * share the character's span). */
static inline lipi_span piece_align(const pt_scratch *sc, const pt_piece *p, size_t i, size_t clen)
{
    if (p->mapped)
        return sc->align[p->a_off + i];
    return (lipi_span){p->s0 + i, p->s0 + i + clen};
}

static lipi_status list_push(pt_list *l, const pt_piece *p)
{
    if (l->n == l->cap) {
        void *v = l->v;
        lipi_status st = lipi_grow(&v, &l->cap, l->n + 1, sizeof *l->v);
        l->v = v;
        if (st != LIPI_OK)
            return st;
    }
    l->v[l->n++] = *p;
    return LIPI_OK;
}

/* Pushes the part [a, b) of piece p (Hugging Face NormalizedString::slice on
 * normalized offsets). */
static lipi_status push_sub(const pt_scratch *sc, const pt_piece *p, size_t a, size_t b,
                            pt_list *out)
{
    pt_piece q;
    if (!p->mapped) {
        q = (pt_piece){.s0 = p->s0 + a, .s1 = p->s0 + b};
    } else {
        q = (pt_piece){.t_off = p->t_off + a, .t_len = b - a, .a_off = p->a_off + a, .mapped = true};
        q.s0 = sc->align[q.a_off].start;
        q.s1 = sc->align[q.a_off + q.t_len - 1].end;
    }
    return list_push(out, &q);
}

static lipi_status seg_push(pt_scratch *sc, size_t start, size_t end, bool match)
{
    if (sc->n_segs == sc->seg_cap) {
        void *v = sc->segs;
        lipi_status st = lipi_grow(&v, &sc->seg_cap, sc->n_segs + 1, sizeof *sc->segs);
        sc->segs = v;
        if (st != LIPI_OK)
            return st;
    }
    sc->segs[sc->n_segs++] = (pt_seg){start, end, match};
    return LIPI_OK;
}

/* Reserves room for a mapped piece of up to `bytes` bytes of text. */
static lipi_status arena_reserve(pt_scratch *sc, size_t bytes)
{
    lipi_status st = lipi_buf_reserve(&sc->arena, bytes);
    if (st != LIPI_OK)
        return st;
    if (bytes > SIZE_MAX - sc->align_len)
        return LIPI_ENOMEM;
    void *v = sc->align;
    st = lipi_grow(&v, &sc->align_cap, sc->align_len + bytes, sizeof *sc->align);
    sc->align = v;
    return st;
}

/* ======================================================================== */
/* Finding matches (Hugging Face Pattern::find_matches)                      */
/* ======================================================================== */

static lipi_status regex_exec(pt_scratch *sc, const pcre2_code *re, const char *t, size_t n,
                              size_t start, size_t *ms, size_t *me, bool *found, lipi_error *err)
{
    int rc = pcre2_match(re, (PCRE2_SPTR)t, n, start, PCRE2_NO_UTF_CHECK, sc->md, sc->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        /* A long word overflowed the default 32 KiB JIT stack: retry with a
         * bigger one, then with the interpreter (heap frames, no limit). */
        if (!sc->jstack) {
            pcre2_general_context *g = pcre_gctx();
            if (!g)
                return LIPI_ENOMEM;
            sc->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, g);
            pcre2_general_context_free(g);
            if (!sc->jstack)
                return LIPI_ENOMEM;
            pcre2_jit_stack_assign(sc->mctx, NULL, sc->jstack);
        }
        rc = pcre2_match(re, (PCRE2_SPTR)t, n, start, PCRE2_NO_UTF_CHECK, sc->md, sc->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)t, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                             sc->md, sc->mctx);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
        *found = false;
        return LIPI_OK;
    }
    if (rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT)
        return LIPI_ENOMEM;
    if (rc < 0)
        return regex_error(err, "matching", rc, 0);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
    if (ov[0] < start || ov[1] < ov[0] || ov[1] > n) /* \K tricks */
        return lipi_error_set(err, LIPI_EREGEX, NULL, 0, start,
                              "the pattern reported a match that ends before it starts");
    *ms = ov[0];
    *me = ov[1];
    *found = true;
    return LIPI_OK;
}

/* Segments of t[0..n) for a regex, iterating matches as the onig crate's
 * find_iter does: an empty match right where the previous match ended is
 * skipped by moving the search one character on. */
static lipi_status find_regex(pt_scratch *sc, const pcre2_code *re, const char *t, size_t n,
                              bool invert, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t last_end = 0, last_match_end = 0, prev = 0;
    bool have_last = false;
    sc->n_segs = 0;
    while (last_end <= n) {
        size_t s = 0, e = 0;
        bool found = false;
        TRY(regex_exec(sc, re, t, n, last_end, &s, &e, &found, err));
        if (!found)
            break;
        if (s == e && have_last && last_match_end == e) {
            if (last_end >= n)
                break;
            uint32_t cp;
            last_end += pt_utf8_next(t + last_end, &cp);
            continue;
        }
        last_end = last_match_end = e;
        have_last = true;
        if (prev != s)
            TRY(seg_push(sc, prev, s, invert));
        TRY(seg_push(sc, s, e, !invert));
        prev = e;
    }
    if (prev != n)
        TRY(seg_push(sc, prev, n, invert));
done:
    return st;
}

/* Segments of t[0..n) for a known pattern, by its scanner: the same
 * segments as find_regex, as no known pattern matches the empty string. */
static lipi_status find_scan(pt_scratch *sc, const lipi_scanner *scan, const char *t, size_t n,
                             bool invert)
{
    lipi_status st = LIPI_OK;
    size_t i = 0, prev = 0;
    sc->n_segs = 0;
    while (i < n) {
        size_t m = lipi_scan_match(scan, t, n, i);
        if (!m) {
            uint32_t cp;
            i += pt_utf8_next(t + i, &cp);
            continue;
        }
        if (prev != i)
            TRY(seg_push(sc, prev, i, invert));
        TRY(seg_push(sc, i, i + m, !invert));
        i = prev = i + m;
    }
    if (prev != n)
        TRY(seg_push(sc, prev, n, invert));
done:
    return st;
}

/* The segments of a Split or ByteLevel node's pattern. */
static lipi_status find_pattern(pt_scratch *sc, const lipi_pretokenizer *pt, const char *t, size_t n,
                                bool invert, lipi_error *err)
{
    if (pt->scan && !pt->no_scan)
        return find_scan(sc, pt->scan, t, n, invert);
    return find_regex(sc, pt->re, t, n, invert, err);
}

/* Segments for a character predicate: every matching character alone, the
 * runs between them as non-matches. */
static lipi_status find_chars(pt_scratch *sc, const char *t, size_t n, bool (*pred)(uint32_t, uint32_t),
                              uint32_t arg)
{
    lipi_status st = LIPI_OK;
    size_t last = 0, i = 0;
    sc->n_segs = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = pt_utf8_next(t + i, &cp);
        if (pred(cp, arg)) {
            if (last < i)
                TRY(seg_push(sc, last, i, false));
            TRY(seg_push(sc, i, i + k, true));
            last = i + k;
        }
        i += k;
    }
    if (last < n)
        TRY(seg_push(sc, last, n, false));
done:
    return st;
}

static bool pred_ws(uint32_t c, uint32_t arg) { (void)arg; return is_whitespace(c); }
static bool pred_punct(uint32_t c, uint32_t arg) { (void)arg; return is_punctuation(c); }
static bool pred_numeric(uint32_t c, uint32_t arg) { (void)arg; return is_numeric(c); }
static bool pred_eq(uint32_t c, uint32_t arg) { return c == arg; }

/* Applies a SplitDelimiterBehavior to sc->segs (in place) and pushes the
 * non-empty parts of piece p. */
static lipi_status split_by_segs(pt_scratch *sc, const pt_piece *p, pt_behavior beh, pt_list *out)
{
    pt_seg *sg = sc->segs;
    size_t n = sc->n_segs, k = 0;
    bool prev_match = false;
    switch (beh) {
    case BEH_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!sg[i].match)
                sg[k++] = sg[i];
        break;
    case BEH_ISOLATED: k = n; break;
    case BEH_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            if (sg[i].match == prev_match && k > 0)
                sg[k - 1].end = sg[i].end;
            else
                sg[k++] = sg[i];
            prev_match = sg[i].match;
        }
        break;
    case BEH_MERGED_PREVIOUS:
        for (size_t i = 0; i < n; i++) {
            if (sg[i].match && !prev_match && k > 0)
                sg[k - 1].end = sg[i].end;
            else
                sg[k++] = sg[i];
            prev_match = sg[i].match;
        }
        break;
    case BEH_MERGED_NEXT:
        /* Hugging Face folds from the end: a match joins the part after it
         * when that part is not a match. */
        for (size_t i = 0; i < n;) {
            if (sg[i].match && i + 1 < n && !sg[i + 1].match) {
                sg[k++] = (pt_seg){sg[i].start, sg[i + 1].end, false};
                i += 2;
            } else {
                sg[k++] = sg[i++];
            }
        }
        break;
    }
    for (size_t i = 0; i < k; i++) {
        if (sg[i].end <= sg[i].start)
            continue;
        lipi_status st = push_sub(sc, p, sg[i].start, sg[i].end, out);
        if (st != LIPI_OK)
            return st;
    }
    return LIPI_OK;
}

/* ======================================================================== */
/* Text rewriting                                                            */
/* ======================================================================== */

/* The GPT-2 byte alphabet for piece *p (replaced by the mapped result),
 * after an optional leading space (ByteLevel add_prefix_space). Every
 * output character keeps the span of the input character it came from, and
 * the added space the span of the first character. */
static lipi_status bytelevel_map(pt_scratch *sc, pt_piece *p, bool prefix_space)
{
    size_t n = piece_len(p);
    if (n > (SIZE_MAX - 2) / 2)
        return LIPI_ENOMEM;
    lipi_status st = arena_reserve(sc, 2 * n + 2);
    if (st != LIPI_OK)
        return st;
    const char *t = piece_text(sc, p);
    pt_piece q = {.s0 = p->s0, .s1 = p->s1, .t_off = sc->arena.len, .a_off = sc->align_len, .mapped = true};
    char *o = sc->arena.p + sc->arena.len;
    lipi_span *a = sc->align + sc->align_len;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = pt_utf8_next(t + i, &cp);
        lipi_span sp = piece_align(sc, p, i, k);
        if (i == 0 && prefix_space) {
            size_t m = pt_utf8_put(byte_char(' '), o + w);
            for (size_t j = 0; j < m; j++)
                a[w + j] = sp;
            w += m;
        }
        for (size_t j = 0; j < k; j++) {
            size_t m = pt_utf8_put(byte_char((uint8_t)t[i + j]), o + w);
            for (size_t x = 0; x < m; x++)
                a[w + x] = sp;
            w += m;
        }
        i += k;
    }
    q.t_len = w;
    sc->arena.len += w;
    sc->align_len += w;
    *p = q;
    return LIPI_OK;
}

/* ByteLevel's add_prefix_space alone (before its regex split): " " + text. */
static lipi_status prepend_space(pt_scratch *sc, pt_piece *p)
{
    size_t n = piece_len(p);
    if (n == SIZE_MAX)
        return LIPI_ENOMEM;
    lipi_status st = arena_reserve(sc, n + 1);
    if (st != LIPI_OK)
        return st;
    const char *t = piece_text(sc, p);
    pt_piece q = {.s0 = p->s0, .s1 = p->s1, .t_off = sc->arena.len, .t_len = n + 1,
                  .a_off = sc->align_len, .mapped = true};
    char *o = sc->arena.p + sc->arena.len;
    lipi_span *a = sc->align + sc->align_len;
    uint32_t cp;
    size_t k0 = pt_utf8_next(t, &cp);
    o[0] = ' ';
    a[0] = piece_align(sc, p, 0, k0);
    memcpy(o + 1, t, n);
    for (size_t i = 0; i < n;) {
        size_t k = pt_utf8_next(t + i, &cp);
        lipi_span sp = piece_align(sc, p, i, k);
        for (size_t j = 0; j < k; j++)
            a[1 + i + j] = sp;
        i += k;
    }
    sc->arena.len += n + 1;
    sc->align_len += n + 1;
    *p = q;
    return LIPI_OK;
}

/* Metaspace: every ' ' becomes the replacement, then the replacement is
 * prepended when the scheme asks and the text does not start with it. */
static lipi_status metaspace_map(pt_scratch *sc, pt_piece *p, uint32_t rep, bool want_prefix)
{
    size_t n = piece_len(p);
    const char *t = piece_text(sc, p);
    char rb[4];
    size_t rl = pt_utf8_put(rep, rb);
    bool has_space = memchr(t, ' ', n) != NULL;
    uint32_t first;
    pt_utf8_next(t, &first);
    bool prefix = want_prefix && first != rep && first != ' ';
    if (!has_space && !prefix)
        return LIPI_OK;
    if (n > (SIZE_MAX - 4) / 4)
        return LIPI_ENOMEM;
    lipi_status st = arena_reserve(sc, 4 * n + 4);
    if (st != LIPI_OK)
        return st;
    t = piece_text(sc, p);
    pt_piece q = {.s0 = p->s0, .s1 = p->s1, .t_off = sc->arena.len, .a_off = sc->align_len, .mapped = true};
    char *o = sc->arena.p + sc->arena.len;
    lipi_span *a = sc->align + sc->align_len;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = pt_utf8_next(t + i, &cp);
        lipi_span sp = piece_align(sc, p, i, k);
        if (i == 0 && prefix) {
            memcpy(o + w, rb, rl);
            for (size_t j = 0; j < rl; j++)
                a[w + j] = sp;
            w += rl;
        }
        const char *c = t + i;
        size_t m = k;
        if (cp == ' ') {
            c = rb;
            m = rl;
        }
        memcpy(o + w, c, m);
        for (size_t j = 0; j < m; j++)
            a[w + j] = sp;
        w += m;
        i += k;
    }
    q.t_len = w;
    sc->arena.len += w;
    sc->align_len += w;
    *p = q;
    return LIPI_OK;
}

/* ======================================================================== */
/* Leaf pre-tokenizers                                                       */
/* ======================================================================== */

/* Whitespace: pieces are the matches of Rust's `\w+|[^\w\s]+`. */
static lipi_status do_whitespace(pt_scratch *sc, const pt_piece *p, pt_list *out)
{
    const char *t = piece_text(sc, p);
    size_t n = piece_len(p), i = 0, start = 0;
    int cls = 0; /* of the current run: 0 none, 1 word, 2 other */
    while (i < n) {
        uint32_t cp;
        size_t k = pt_utf8_next(t + i, &cp);
        int c = is_whitespace(cp) ? 0 : is_rust_word(cp) ? 1 : 2;
        if (c != cls) {
            if (cls) {
                lipi_status st = push_sub(sc, p, start, i, out);
                if (st != LIPI_OK)
                    return st;
            }
            cls = c;
            start = i;
        }
        i += k;
    }
    return cls ? push_sub(sc, p, start, n, out) : LIPI_OK;
}

/* BertPreTokenizer: split on whitespace (removed), then every punctuation
 * character alone. CJK spacing is the "bert" normalizer's job. */
static lipi_status do_bert(pt_scratch *sc, const pt_piece *p, pt_list *out)
{
    const char *t = piece_text(sc, p);
    size_t n = piece_len(p), i = 0, start = 0;
    bool in_run = false;
    lipi_status st = LIPI_OK;
    while (i < n) {
        uint32_t cp;
        size_t k = pt_utf8_next(t + i, &cp);
        bool ws = is_whitespace(cp), pu = !ws && is_punctuation(cp);
        if ((ws || pu) && in_run) {
            TRY(push_sub(sc, p, start, i, out));
            in_run = false;
        }
        if (pu)
            TRY(push_sub(sc, p, i, i + k, out));
        else if (!ws && !in_run) {
            in_run = true;
            start = i;
        }
        i += k;
    }
    if (in_run)
        TRY(push_sub(sc, p, start, n, out));
done:
    return st;
}

#define SCRIPT_ANY (-2)

/* Hugging Face's fixed_script: Hiragana, Katakana and U+30FC count as Han,
 * a space belongs to any script. */
static int fixed_script(uint32_t cp)
{
    if (cp == ' ')
        return SCRIPT_ANY;
    if (cp == 0x30FC)
        return USCRIPT_HAN;
    UErrorCode e = U_ZERO_ERROR;
    int s = uscript_getScript((UChar32)cp, &e);
    if (s == USCRIPT_HIRAGANA || s == USCRIPT_KATAKANA)
        return USCRIPT_HAN;
    return s;
}

/* UnicodeScripts: a cut before every character whose script differs from
 * the last non-space one. As in Hugging Face, the first cut is at the first
 * non-space character, so leading spaces are dropped. */
static lipi_status do_unicode_scripts(pt_scratch *sc, const pt_piece *p, pt_list *out)
{
    const char *t = piece_text(sc, p);
    size_t n = piece_len(p), i = 0, cut = SIZE_MAX;
    int last = SCRIPT_ANY - 1; /* none yet */
    while (i < n) {
        uint32_t cp;
        size_t k = pt_utf8_next(t + i, &cp);
        int s = fixed_script(cp);
        if (s != SCRIPT_ANY && s != last) {
            if (cut != SIZE_MAX) {
                lipi_status st = push_sub(sc, p, cut, i, out);
                if (st != LIPI_OK)
                    return st;
            }
            cut = i;
        }
        if (s != SCRIPT_ANY)
            last = s;
        i += k;
    }
    return cut != SIZE_MAX ? push_sub(sc, p, cut, n, out) : LIPI_OK;
}

static lipi_status do_fixed_length(pt_scratch *sc, const pt_piece *p, size_t len, pt_list *out)
{
    const char *t = piece_text(sc, p);
    size_t n = piece_len(p), i = 0, start = 0, chars = 0;
    while (i < n) {
        uint32_t cp;
        i += pt_utf8_next(t + i, &cp);
        if (++chars == len || i == n) {
            lipi_status st = push_sub(sc, p, start, i, out);
            if (st != LIPI_OK)
                return st;
            start = i;
            chars = 0;
        }
    }
    return LIPI_OK;
}

static lipi_status apply_leaf(const lipi_pretokenizer *pt, pt_scratch *sc, pt_piece p, pt_list *out,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    switch (pt->kind) {
    case PT_SPLIT:
        TRY(find_pattern(sc, pt, piece_text(sc, &p), piece_len(&p), pt->invert, err));
        TRY(split_by_segs(sc, &p, pt->behavior, out));
        break;
    case PT_BYTELEVEL: {
        if (pt->add_prefix_space && piece_text(sc, &p)[0] != ' ')
            TRY(prepend_space(sc, &p));
        size_t first = out->n;
        if (pt->use_regex) {
            TRY(find_pattern(sc, pt, piece_text(sc, &p), piece_len(&p), false, err));
            TRY(split_by_segs(sc, &p, BEH_ISOLATED, out));
        } else {
            TRY(list_push(out, &p));
        }
        for (size_t i = first; i < out->n; i++)
            TRY(bytelevel_map(sc, &out->v[i], false));
        break;
    }
    case PT_WHITESPACE: TRY(do_whitespace(sc, &p, out)); break;
    case PT_WHITESPACE_SPLIT:
        TRY(find_chars(sc, piece_text(sc, &p), piece_len(&p), pred_ws, 0));
        TRY(split_by_segs(sc, &p, BEH_REMOVED, out));
        break;
    case PT_BERT: TRY(do_bert(sc, &p, out)); break;
    case PT_METASPACE: {
        bool prefix = pt->prepend == PREPEND_ALWAYS || (pt->prepend == PREPEND_FIRST && p.s0 == 0);
        TRY(metaspace_map(sc, &p, pt->replacement, prefix));
        if (pt->split) {
            TRY(find_chars(sc, piece_text(sc, &p), piece_len(&p), pred_eq, pt->replacement));
            TRY(split_by_segs(sc, &p, BEH_MERGED_NEXT, out));
        } else {
            TRY(list_push(out, &p));
        }
        break;
    }
    case PT_PUNCTUATION:
        TRY(find_chars(sc, piece_text(sc, &p), piece_len(&p), pred_punct, 0));
        TRY(split_by_segs(sc, &p, pt->behavior, out));
        break;
    case PT_DIGITS:
        TRY(find_chars(sc, piece_text(sc, &p), piece_len(&p), pred_numeric, 0));
        TRY(split_by_segs(sc, &p, pt->individual_digits ? BEH_ISOLATED : BEH_CONTIGUOUS, out));
        break;
    case PT_UNICODE_SCRIPTS: TRY(do_unicode_scripts(sc, &p, out)); break;
    case PT_CHAR_DELIMITER:
        TRY(find_chars(sc, piece_text(sc, &p), piece_len(&p), pred_eq, pt->delimiter));
        TRY(split_by_segs(sc, &p, BEH_REMOVED, out));
        break;
    case PT_FIXED_LENGTH: TRY(do_fixed_length(sc, &p, pt->length, out)); break;
    case PT_SEQUENCE: LIPI_ASSERT(!"a sequence is not a leaf"); break;
    }
done:
    return st;
}

/* Runs node pt over the list sc->lists[*cur]; the result ends up in
 * sc->lists[*cur] again (the index flips after each leaf). */
static lipi_status run_node(const lipi_pretokenizer *pt, pt_scratch *sc, int *cur, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (pt->kind == PT_SEQUENCE) {
        for (size_t i = 0; i < pt->n_children; i++)
            TRY(run_node(pt->children[i], sc, cur, err));
        goto done;
    }
    pt_list *in = &sc->lists[*cur], *out = &sc->lists[!*cur];
    out->n = 0;
    for (size_t i = 0; i < in->n; i++)
        TRY(apply_leaf(pt, sc, in->v[i], out, err));
    *cur = !*cur;
done:
    return st;
}

/* ======================================================================== */
/* Public entry points                                                       */
/* ======================================================================== */

static lipi_status pieces_reserve(lipi_pieces *out, size_t count, size_t text)
{
    if (count >= out->cap) { /* text_off needs count + 1 entries */
        size_t cap = out->cap;
        void *v = out->src;
        lipi_status st = lipi_grow(&v, &cap, count + 1, sizeof *out->src);
        out->src = v;
        if (st != LIPI_OK)
            return st;
        void *o = lipi_reallocarray(out->text_off, cap + 1, sizeof *out->text_off);
        if (!o)
            return LIPI_ENOMEM;
        out->text_off = o;
        out->cap = cap;
    }
    void *t = out->text; /* + 1 for the NUL */
    lipi_status st = lipi_grow(&t, &out->text_cap, text + 1, 1);
    out->text = t;
    return st;
}

lipi_status lipi_pretokenize(const lipi_pretokenizer *p, const char *s, size_t len,
                             lipi_pieces *out, lipi_error *err)
{
    if (!out || (!s && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected text and an output");
    size_t bad = pt_utf8_valid_prefix(s, len);
    if (bad < len) {
        out->count = 0;
        out->text_len = 0;
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, bad,
                              "expected UTF-8, found byte 0x%02X at offset %zu",
                              (unsigned char)s[bad], bad);
    }
    return lipi_pretokenize_valid(p, s, len, out, err);
}

lipi_status lipi_pretokenize_valid(const lipi_pretokenizer *p, const char *s, size_t len,
                                   lipi_pieces *out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (!out || (!s && len))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected text and an output");
    out->count = 0;
    out->text_len = 0;
    pt_scratch *sc;
    TRY(scratch_get(out, &sc));
    sc->src = s;
    sc->arena.len = 0;
    sc->align_len = 0;
    sc->lists[0].n = sc->lists[1].n = 0;
    int cur = 0;
    if (len) {
        pt_piece whole = {.s0 = 0, .s1 = len};
        TRY(list_push(&sc->lists[0], &whole));
        if (p)
            TRY(run_node(p, sc, &cur, err));
    }
    const pt_list *l = &sc->lists[cur];
    size_t total = 0;
    for (size_t i = 0; i < l->n; i++)
        total += piece_len(&l->v[i]);
    TRY(pieces_reserve(out, l->n, total));
    size_t w = 0;
    out->text_off[0] = 0;
    for (size_t i = 0; i < l->n; i++) {
        const pt_piece *q = &l->v[i];
        size_t n = piece_len(q);
        memcpy(out->text + w, piece_text(sc, q), n);
        w += n;
        out->src[i] = (lipi_span){q->s0, q->s1};
        out->text_off[i + 1] = w;
    }
    out->text[w] = '\0';
    out->text_len = w;
    out->count = l->n;
done:
    return with_nomem_msg(st, err);
}

void lipi_pieces_free(lipi_pieces *out)
{
    if (!out)
        return;
    scratch_free(out->scratch);
    lipi_free(out->src);
    lipi_free(out->text_off);
    lipi_free(out->text);
    memset(out, 0, sizeof *out);
}

/* ======================================================================== */
/* tokenizer.json                                                            */
/* ======================================================================== */

/* `<jpath>.<field>: <message>` as an EFORMAT error. */
static lipi_status jerr(lipi_error *err, const char *jpath, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lipi_status jerr(lipi_error *err, const char *jpath, const char *field, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0, "%s%s%s: %s", jpath, field ? "." : "",
                          field ? field : "", msg);
}

static lipi_status get_bool(const json_t *o, const char *jpath, const char *key, bool def,
                            bool *out, lipi_error *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v) {
        *out = def;
        return LIPI_OK;
    }
    if (!json_is_boolean(v))
        return jerr(err, jpath, key, "expected true or false, found %s", lipi_json_kind(v));
    *out = json_is_true(v);
    return LIPI_OK;
}

/* A one-character string (Rust `char` fields); *found false when absent. */
static lipi_status get_char(const json_t *o, const char *jpath, const char *key, uint32_t *out,
                            bool *found, lipi_error *err)
{
    const json_t *v = json_object_get(o, key);
    *found = v != NULL;
    if (!v)
        return LIPI_OK;
    if (!json_is_string(v))
        return jerr(err, jpath, key, "expected a one-character string, found %s",
                    lipi_json_kind(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0 || pt_utf8_valid_prefix(s, n) != n || pt_utf8_next(s, out) != n)
        return jerr(err, jpath, key, "expected a one-character string, found \"%s\"", s);
    return LIPI_OK;
}

static lipi_status get_enum(const json_t *o, const char *jpath, const char *key,
                            const char *const *names, int n_names, int def, bool required,
                            int *out, lipi_error *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v) {
        if (required)
            return jerr(err, jpath, key, "missing");
        *out = def;
        return LIPI_OK;
    }
    if (json_is_string(v))
        for (int i = 0; i < n_names; i++)
            if (strcmp(json_string_value(v), names[i]) == 0) {
                *out = i;
                return LIPI_OK;
            }
    char list[160] = "";
    for (int i = 0; i < n_names; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s\"%s\"", i ? ", " : "", names[i]);
    }
    if (json_is_string(v))
        return jerr(err, jpath, key, "expected one of %s, found \"%s\"", list, json_string_value(v));
    return jerr(err, jpath, key, "expected one of %s, found %s", list, lipi_json_kind(v));
}

static lipi_status from_json_rec(const json_t *j, const char *jpath, int depth,
                                 lipi_pretokenizer **out, lipi_error *err);

static lipi_status sequence_from_json(const json_t *j, const char *jpath, int depth,
                                      lipi_pretokenizer **out, lipi_error *err)
{
    lipi_status st;
    lipi_pretokenizer *p = NULL;
    char *sub = NULL;
    const json_t *arr = json_object_get(j, "pretokenizers");
    if (!arr) {
        st = jerr(err, jpath, "pretokenizers", "missing");
        goto done;
    }
    if (!json_is_array(arr)) {
        st = jerr(err, jpath, "pretokenizers", "expected an array, found %s", lipi_json_kind(arr));
        goto done;
    }
    TRY(node_new(PT_SEQUENCE, &p, err));
    size_t n = json_array_size(arr);
    if (n) {
        p->children = lipi_calloc(n, sizeof *p->children);
        if (!p->children) {
            st = LIPI_ENOMEM;
            goto done;
        }
    }
    size_t cap = strlen(jpath) + 40;
    sub = lipi_malloc(cap);
    if (!sub) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(sub, cap, "%s.pretokenizers[%zu]", jpath, i);
        const json_t *c = json_array_get(arr, i);
        if (json_is_null(c)) {
            st = jerr(err, sub, NULL, "expected an object, found null");
            goto done;
        }
        TRY(from_json_rec(c, sub, depth + 1, &p->children[i], err));
        p->n_children++;
    }
    *out = p;
    p = NULL;
done:
    lipi_free(sub);
    lipi_pretokenizer_free(p);
    return st;
}

static lipi_status split_from_json(const json_t *j, const char *jpath, lipi_pretokenizer **out,
                                   lipi_error *err)
{
    lipi_status st;
    const json_t *pat = json_object_get(j, "pattern");
    if (!pat)
        return jerr(err, jpath, "pattern", "missing");
    const json_t *rx = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
    const json_t *str = json_is_object(pat) ? json_object_get(pat, "String") : NULL;
    if (!json_is_object(pat) || json_object_size(pat) != 1 || (!rx && !str))
        return jerr(err, jpath, "pattern", "expected {\"Regex\": ...} or {\"String\": ...}, found %s",
                    json_is_object(pat) ? "another object" : lipi_json_kind(pat));
    const json_t *v = rx ? rx : str;
    if (!json_is_string(v))
        return jerr(err, jpath, rx ? "pattern.Regex" : "pattern.String",
                    "expected a string, found %s", lipi_json_kind(v));
    int beh;
    bool invert;
    TRY(get_enum(j, jpath, "behavior", behavior_names, 5, BEH_ISOLATED, true, &beh, err));
    TRY(get_bool(j, jpath, "invert", false, &invert, err));
    st = split_new(json_string_value(v), json_string_length(v), rx != NULL, (pt_behavior)beh,
                   invert, NULL, out, err);
    if (st == LIPI_EREGEX)
        lipi_error_prefix(err, "%s.pattern.%s", jpath, rx ? "Regex" : "String");
done:
    return st;
}

static lipi_status metaspace_from_json(const json_t *j, const char *jpath, lipi_pretokenizer **out,
                                       lipi_error *err)
{
    lipi_status st;
    lipi_pretokenizer *p = NULL;
    uint32_t rep = 0x2581;
    bool found, split, legacy = true;
    int scheme;
    TRY(get_char(j, jpath, "replacement", &rep, &found, err));
    TRY(get_bool(j, jpath, "split", true, &split, err));
    TRY(get_enum(j, jpath, "prepend_scheme", prepend_names, 3, PREPEND_ALWAYS, false, &scheme, err));
    /* Files written before prepend_scheme existed say add_prefix_space. */
    TRY(get_bool(j, jpath, "add_prefix_space", true, &legacy, err));
    if (!legacy) {
        if (json_object_get(j, "prepend_scheme") && scheme != PREPEND_NEVER) {
            st = jerr(err, jpath, "add_prefix_space",
                      "false does not match prepend_scheme \"%s\"", prepend_names[scheme]);
            goto done;
        }
        scheme = PREPEND_NEVER;
    }
    TRY(node_new(PT_METASPACE, &p, err));
    p->replacement = rep;
    p->split = split;
    p->prepend = (pt_prepend)scheme;
    *out = p;
    p = NULL;
done:
    lipi_pretokenizer_free(p);
    return st;
}

static lipi_status from_json_rec(const json_t *j, const char *jpath, int depth,
                                 lipi_pretokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_pretokenizer *p = NULL;
    *out = NULL;
    if (depth > 64)
        return jerr(err, jpath, NULL, "sequences nested more than 64 deep");
    if (!json_is_object(j))
        return jerr(err, jpath, NULL, "expected an object, found %s", lipi_json_kind(j));
    const json_t *tv = json_object_get(j, "type");
    if (!tv)
        return jerr(err, jpath, "type", "missing");
    if (!json_is_string(tv))
        return jerr(err, jpath, "type", "expected a string, found %s", lipi_json_kind(tv));
    const char *type = json_string_value(tv);
    static const struct {
        const char *name;
        pt_kind kind;
    } simple[] = {
        {"BertPreTokenizer", PT_BERT},
        {"Whitespace", PT_WHITESPACE},
        {"WhitespaceSplit", PT_WHITESPACE_SPLIT},
        {"UnicodeScripts", PT_UNICODE_SCRIPTS},
    };
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
        if (strcmp(type, simple[i].name) == 0)
            return node_new(simple[i].kind, out, err);
    if (strcmp(type, "Sequence") == 0)
        return sequence_from_json(j, jpath, depth, out, err);
    if (strcmp(type, "Split") == 0)
        return split_from_json(j, jpath, out, err);
    if (strcmp(type, "Metaspace") == 0)
        return metaspace_from_json(j, jpath, out, err);
    if (strcmp(type, "ByteLevel") == 0) {
        bool aps, trim, use;
        TRY(get_bool(j, jpath, "add_prefix_space", true, &aps, err));
        TRY(get_bool(j, jpath, "trim_offsets", true, &trim, err));
        TRY(get_bool(j, jpath, "use_regex", true, &use, err));
        return bytelevel_new(aps, trim, use, out, err);
    }
    if (strcmp(type, "Punctuation") == 0) {
        int beh;
        TRY(get_enum(j, jpath, "behavior", behavior_names, 5, BEH_ISOLATED, false, &beh, err));
        TRY(node_new(PT_PUNCTUATION, &p, err));
        p->behavior = (pt_behavior)beh;
    } else if (strcmp(type, "Digits") == 0) {
        bool ind;
        TRY(get_bool(j, jpath, "individual_digits", false, &ind, err));
        TRY(node_new(PT_DIGITS, &p, err));
        p->individual_digits = ind;
    } else if (strcmp(type, "CharDelimiterSplit") == 0) {
        uint32_t d;
        bool found;
        TRY(get_char(j, jpath, "delimiter", &d, &found, err));
        if (!found)
            return jerr(err, jpath, "delimiter", "missing");
        TRY(node_new(PT_CHAR_DELIMITER, &p, err));
        p->delimiter = d;
    } else if (strcmp(type, "FixedLength") == 0) {
        const json_t *v = json_object_get(j, "length");
        json_int_t len = 5;
        if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
            return jerr(err, jpath, "length", "expected a positive integer, found %s",
                        json_is_integer(v) ? "a value <= 0" : lipi_json_kind(v));
        if (v)
            len = json_integer_value(v);
        TRY(node_new(PT_FIXED_LENGTH, &p, err));
        p->length = (size_t)len;
    } else {
        return jerr(err, jpath, "type", "unknown type \"%s\"", type);
    }
    *out = p;
    p = NULL;
done:
    lipi_pretokenizer_free(p);
    return st;
}

lipi_status lipi_pretokenizer_from_json(const json_t *j, const char *jpath,
                                        lipi_pretokenizer **out, lipi_error *err)
{
    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected an output pointer");
    *out = NULL;
    if (!j || json_is_null(j))
        return LIPI_OK;
    return with_nomem_msg(from_json_rec(j, jpath ? jpath : "pre_tokenizer", 0, out, err), err);
}

/* Adds key -> v to o, stealing v; false (and v freed) on failure. */
static bool put(json_t *o, const char *key, json_t *v)
{
    return v && json_object_set_new(o, key, v) == 0;
}

static json_t *char_json(uint32_t cp)
{
    char b[4];
    return json_stringn(b, pt_utf8_put(cp, b));
}

json_t *lipi_pretokenizer_to_json(const lipi_pretokenizer *p)
{
    if (!p)
        return json_null();
    static const char *const type_names[] = {
        [PT_SEQUENCE] = "Sequence",
        [PT_SPLIT] = "Split",
        [PT_BYTELEVEL] = "ByteLevel",
        [PT_WHITESPACE] = "Whitespace",
        [PT_WHITESPACE_SPLIT] = "WhitespaceSplit",
        [PT_BERT] = "BertPreTokenizer",
        [PT_METASPACE] = "Metaspace",
        [PT_PUNCTUATION] = "Punctuation",
        [PT_DIGITS] = "Digits",
        [PT_UNICODE_SCRIPTS] = "UnicodeScripts",
        [PT_CHAR_DELIMITER] = "CharDelimiterSplit",
        [PT_FIXED_LENGTH] = "FixedLength",
    };
    bool ok = false;
    json_t *o = json_object();
    if (!o || !put(o, "type", json_string(type_names[p->kind])))
        goto done;
    switch (p->kind) {
    case PT_SEQUENCE: {
        json_t *a = json_array();
        if (!put(o, "pretokenizers", a))
            goto done;
        for (size_t i = 0; i < p->n_children; i++) {
            json_t *c = lipi_pretokenizer_to_json(p->children[i]);
            if (!c || json_array_append_new(a, c) != 0)
                goto done;
        }
        break;
    }
    case PT_SPLIT: {
        json_t *pat = json_object();
        if (!put(o, "pattern", pat) ||
            !put(pat, p->pattern_is_regex ? "Regex" : "String", json_stringn(p->pattern, p->pattern_len)) ||
            !put(o, "behavior", json_string(behavior_names[p->behavior])) ||
            !put(o, "invert", json_boolean(p->invert)))
            goto done;
        break;
    }
    case PT_BYTELEVEL:
        if (!put(o, "add_prefix_space", json_boolean(p->add_prefix_space)) ||
            !put(o, "trim_offsets", json_boolean(p->trim_offsets)) ||
            !put(o, "use_regex", json_boolean(p->use_regex)))
            goto done;
        break;
    case PT_METASPACE:
        if (!put(o, "replacement", char_json(p->replacement)) ||
            !put(o, "prepend_scheme", json_string(prepend_names[p->prepend])) ||
            !put(o, "split", json_boolean(p->split)))
            goto done;
        break;
    case PT_PUNCTUATION:
        if (!put(o, "behavior", json_string(behavior_names[p->behavior])))
            goto done;
        break;
    case PT_DIGITS:
        if (!put(o, "individual_digits", json_boolean(p->individual_digits)))
            goto done;
        break;
    case PT_CHAR_DELIMITER:
        if (!put(o, "delimiter", char_json(p->delimiter)))
            goto done;
        break;
    case PT_FIXED_LENGTH:
        if (!put(o, "length", json_integer((json_int_t)p->length)))
            goto done;
        break;
    case PT_WHITESPACE:
    case PT_WHITESPACE_SPLIT:
    case PT_BERT:
    case PT_UNICODE_SCRIPTS: break;
    }
    ok = true;
done:
    if (!ok) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

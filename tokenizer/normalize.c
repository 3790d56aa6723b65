/* Normalizers: a tree of Hugging Face normalizer steps (normalize_impl.h),
 * compiled to a flat list of operations that rewrite text and its alignment
 * exactly as Hugging Face tokenizers' NormalizedString does.
 *
 * The alignment model (tokenizers/src/tokenizer/normalizer.rs): align[i] is
 * the source span of output byte i. A step emits a sequence of (char,
 * change) pairs while a cursor walks the step's input:
 *   change <= 0  the char replaces the input char at the cursor and takes its
 *                span; the cursor then passes that char and -change more;
 *   change > 0   the char is inserted and takes the span of the input byte
 *                just before the cursor ((0, 0) at the very start).
 * Everything here is expressed with that one rule (see `emit`), so a
 * composed "é" from "e" + U+0301 maps to the span of "e" (and the accent
 * vanishes), a decomposed "é" gives two chars that both map to "é", a
 * Replace's content maps to the last char of the match, and Precompiled's
 * odd bookkeeping is reproduced as is.
 *
 * Unicode normalization emulates the iterators of Hugging Face's
 * unicode-normalization-alignments crate (canonical ordering by a stable
 * sort per starter, then pairwise recomposition) on top of ICU's data:
 * unorm2_getDecomposition, u_getCombiningClass and unorm2_composePair.
 * Text is cut at normalization boundaries (unorm2_hasBoundaryBefore); inert
 * chars (unorm2_isInert) and one-char segments whose quick-check value is
 * YES pass untouched, so already-normalized text costs a property lookup or
 * two per non-ASCII char.
 *
 * An op that changes nothing writes nothing: the emitter stays "lazy" while
 * it only passes over unchanged text, and lipi_normalize then keeps the
 * op's input as the next op's input. */
#include "tokenizer/normalize_impl.h"

#include <string.h>
#include <unicode/uchar.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

/* ======================================================================== */
/* The compiled form                                                         */
/* ======================================================================== */

enum nf_form { NF_C, NF_D, NF_KC, NF_KD };

typedef enum {
    OP_NF,          /* form */
    OP_LOWERCASE,
    OP_FILTER_MARKS,  /* StripAccents: drop General_Category M */
    OP_FILTER_MN,     /* BertNormalizer strip_accents (after NFD): drop Mn */
    OP_BERT_CLEAN,
    OP_BERT_CJK,
    OP_REPLACE,     /* step->re, step->content */
    OP_CHARMAP,     /* a run of single-char String Replaces, fused */
    OP_PREPEND,
    OP_STRIP,
    OP_PRECOMPILED,
    OP_SPM_CHARSMAP, /* Precompiled with SentencePiece's longest match */
    OP_NMT,
    OP_BYTELEVEL,
} op_kind;

typedef struct {
    uint32_t cp;
    uint32_t off, len; /* replacement in the op's pool */
} cmap_entry;

/* A validated Precompiled charsmap, viewed in place in the step's blob. */
typedef struct {
    const uint8_t *units; /* little-endian uint32 trie units, maybe unaligned */
    size_t n_units;
    const char *pool;     /* NUL-separated replacements */
    size_t pool_len;
    uint64_t *bmp_starts; /* a bit per BMP char: a key starts with it */
    /* In bmp_starts' block, after its PC_BMP_WORDS words: a bit per BMP
     * char that starts a key, is none by itself and goes on to no ASCII
     * char in any (so it is passed over before an ASCII char); a bit per
     * BMP char that is a key by itself; then PC_PAIR_BITS bits hashed from
     * (c, c2) for every key that starts with char c and then char c2 (c and
     * c2 in the BMP): the filters pc_skip runs on a char that starts a key. */
    bool astral_second;   /* some key goes on from a BMP char to one outside */
    bool ascii_runs;      /* every printable ASCII char starts no key or is
                             passed over before an ASCII char: pc_skip may
                             pass such runs 16 bytes at a time */
} pc_map;

#define PC_BMP_WORDS (0x10000 / 64)
#define PC_PAIR_LOG 16
#define PC_PAIR_BITS (1u << PC_PAIR_LOG)

typedef struct {
    op_kind kind;
    int form;                /* OP_NF */
    const lipi_ns_step *step;
    cmap_entry *map;         /* OP_CHARMAP: sorted by cp */
    size_t n_map;
    char *pool;
    pc_map pc;               /* OP_PRECOMPILED */
} norm_op;

struct lipi_normalizer {
    lipi_ns_step root;
    norm_op *ops;
    size_t n_ops;
    /* ops[spm_ws .. spm_ws + 5) are SentencePiece's whitespace handling as
     * the .model reader writes it (strip, squeeze, prepend and escape
     * spaces), done in one pass when no alignment is wanted; SIZE_MAX: no. */
    size_t spm_ws;
    const UNormalizer2 *nf[4];
};

const lipi_ns_step *lipi_ns_root(const lipi_normalizer *n)
{
    return &n->root;
}

/* ======================================================================== */
/* Small UTF-8 helpers for text known to be valid                            */
/* ======================================================================== */

static inline size_t u8len(unsigned char b)
{
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

static inline uint32_t u8get(const char *s, size_t *n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t k = u8len(u[0]);
    *n = k;
    switch (k) {
    case 1: return u[0];
    case 2: return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    case 3:
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    default:
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
               ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
}

static size_t count_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* ======================================================================== */
/* Text with alignment, and the emitter                                      */
/* ======================================================================== */

typedef struct {
    char *s;
    size_t len, cap;
    lipi_span *al;
    size_t al_cap;
} ntext;

/* Per-thread scratch kept in lipi_normalized.scratch. */
typedef struct {
    uint32_t cp;
    int32_t change;
    uint8_t ccc;
} dch;

typedef struct {
    ntext spare;
    dch *dec, *comp, *buf;
    size_t dec_cap, comp_cap, buf_cap;
    pcre2_match_data *md;
} nscratch;

typedef struct {
    const char *s;       /* the step's input */
    size_t len;
    const lipi_span *al; /* NULL: the input is the original text */
    size_t off;          /* cursor */
    ntext *dst;
    bool track;
    bool lazy;           /* only unchanged text so far: nothing written yet */
} emitter;

static lipi_status text_reserve(ntext *t, size_t extra, bool track)
{
    if (extra > SIZE_MAX - t->len - 1)
        return LIPI_ENOMEM;
    size_t need = t->len + extra + 1;
    void *p = t->s;
    lipi_status st = lipi_grow(&p, &t->cap, need, 1);
    t->s = p;
    if (st != LIPI_OK || !track)
        return st;
    p = t->al;
    st = lipi_grow(&p, &t->al_cap, need, sizeof(lipi_span));
    t->al = p;
    return st;
}

/* Span of input byte i. The original text's bytes map to their own char. */
static lipi_span src_span(const emitter *em, size_t i)
{
    if (em->al)
        return em->al[i];
    size_t a = i;
    while (a > 0 && ((unsigned char)em->s[a] & 0xC0) == 0x80)
        a--;
    return (lipi_span){a, a + u8len((unsigned char)em->s[a])};
}

static inline void put_span(emitter *em, lipi_span sp, size_t n)
{
    lipi_span *d = em->dst->al + em->dst->len;
    for (size_t k = 0; k < n; k++)
        d[k] = sp;
}

static lipi_status copy_run(emitter *em, size_t n);

/* Writes out the unchanged prefix an op has passed over so far: text an op
 * leaves alone is never copied (lipi_normalize keeps the input instead). */
static lipi_status materialize(emitter *em)
{
    if (!em->lazy)
        return LIPI_OK;
    em->lazy = false;
    size_t k = em->off;
    em->off = 0;
    return copy_run(em, k);
}

/* The one alignment rule (see the file comment). */
static lipi_status emit(emitter *em, const char *bytes, size_t n, long change)
{
    lipi_status st = materialize(em);
    if (st != LIPI_OK)
        return st;
    st = text_reserve(em->dst, n, em->track);
    if (st != LIPI_OK)
        return st;
    if (em->track) {
        lipi_span sp;
        if (change > 0)
            sp = em->off == 0 ? (lipi_span){0, 0} : src_span(em, em->off - 1);
        else if (em->off < em->len)
            sp = src_span(em, em->off);
        else /* Hugging Face would index out of bounds here; keep the last span */
            sp = em->off == 0 ? (lipi_span){0, 0} : src_span(em, em->off - 1);
        put_span(em, sp, n);
    }
    if (change <= 0)
        for (long k = 0; k <= -change && em->off < em->len; k++)
            em->off += u8len((unsigned char)em->s[em->off]);
    memcpy(em->dst->s + em->dst->len, bytes, n);
    em->dst->len += n;
    return LIPI_OK;
}

static lipi_status emit_cp(emitter *em, uint32_t cp, long change)
{
    char b[4];
    return emit(em, b, lipi_utf8_encode(cp, b), change);
}

/* Copies the next n input bytes unchanged (each char: change 0 in place). */
static lipi_status copy_run(emitter *em, size_t n)
{
    if (em->lazy)
        em->off += n;
    if (n == 0 || em->lazy)
        return LIPI_OK;
    lipi_status st = text_reserve(em->dst, n, em->track);
    if (st != LIPI_OK)
        return st;
    if (em->track) {
        lipi_span *d = em->dst->al + em->dst->len;
        if (em->al) {
            memcpy(d, em->al + em->off, n * sizeof *d);
        } else {
            for (size_t i = 0; i < n;) {
                size_t k = u8len((unsigned char)em->s[em->off + i]);
                lipi_span sp = {em->off + i, em->off + i + k};
                for (size_t j = 0; j < k && i + j < n; j++)
                    d[i + j] = sp;
                i += k;
            }
        }
    }
    memcpy(em->dst->s + em->dst->len, em->s + em->off, n);
    em->dst->len += n;
    em->off += n;
    return LIPI_OK;
}

/* Passes n input bytes without output (removed chars). */
static lipi_status skip_run(emitter *em, size_t n)
{
    lipi_status st = materialize(em);
    em->off += n;
    return st;
}

/* ======================================================================== */
/* Unicode normalization (emulating unicode-normalization-alignments)        */
/* ======================================================================== */

static lipi_status grow_dch(dch **p, size_t *cap, size_t need)
{
    void *v = *p;
    lipi_status st = lipi_grow(&v, cap, need, sizeof(dch));
    *p = v;
    return st;
}

static lipi_status push_dch(dch **p, size_t *n, size_t *cap, dch d)
{
    lipi_status st = grow_dch(p, cap, *n + 1);
    if (st == LIPI_OK)
        (*p)[(*n)++] = d;
    return st;
}

/* Stable sort of d[from..n) by combining class (blocks are short). */
static void sort_pending(dch *d, size_t from, size_t n)
{
    for (size_t i = from + 1; i < n; i++) {
        dch x = d[i];
        size_t j = i;
        while (j > from && d[j - 1].ccc > x.ccc) {
            d[j] = d[j - 1];
            j--;
        }
        d[j] = x;
    }
}

/* Full decomposition of c (at most 18 code points, U+FDFA under NFKD). */
static void decomposition(const UNormalizer2 *inst, uint32_t c, uint32_t *out, size_t *n_out)
{
    if (c < 0xA0) {
        out[0] = c;
        *n_out = 1;
        return;
    }
    UErrorCode ec = U_ZERO_ERROR;
    UChar buf[32];
    int32_t k = unorm2_getDecomposition(inst, (UChar32)c, buf, 32, &ec);
    if (U_FAILURE(ec) || k < 0) {
        /* No mapping (or, for safety, one longer than any in Unicode). */
        out[0] = c;
        *n_out = 1;
        return;
    }
    size_t m = 0;
    for (int32_t i = 0; i < k && m < 18;) {
        UChar32 cp;
        U16_NEXT(buf, i, k, cp);
        out[m++] = (uint32_t)cp;
    }
    *n_out = m;
}

/* Hugging Face's Recompositions over dec[0..n) into sc->comp. */
static lipi_status recompose(const lipi_normalizer *n, nscratch *sc, size_t nd, size_t *nc)
{
    lipi_status st = LIPI_OK;
    const UNormalizer2 *nfc = n->nf[NF_C];
    size_t out = 0, nbuf = 0;
    bool have_k = false, have_last = false;
    dch k = {0};
    uint8_t last = 0;
    for (size_t i = 0; i < nd; i++) {
        dch ch = sc->dec[i];
        if (!have_k) {
            if (ch.ccc != 0) {
                TRY(push_dch(&sc->comp, &out, &sc->comp_cap, ch));
                continue;
            }
            k = ch;
            have_k = true;
            continue;
        }
        if (!have_last) {
            UChar32 r = unorm2_composePair(nfc, (UChar32)k.cp, (UChar32)ch.cp);
            if (r >= 0) {
                k = (dch){(uint32_t)r, k.change + ch.change - 1, 0};
                continue;
            }
            if (ch.ccc == 0) {
                TRY(push_dch(&sc->comp, &out, &sc->comp_cap, k));
                k = ch;
                continue;
            }
            TRY(push_dch(&sc->buf, &nbuf, &sc->buf_cap, ch));
            last = ch.ccc;
            have_last = true;
            continue;
        }
        if (last >= ch.ccc) {
            if (ch.ccc == 0) {
                /* Blocked by a new starter: flush composee, then the buffer. */
                TRY(push_dch(&sc->comp, &out, &sc->comp_cap, k));
                for (size_t j = 0; j < nbuf; j++)
                    TRY(push_dch(&sc->comp, &out, &sc->comp_cap, sc->buf[j]));
                nbuf = 0;
                k = ch;
                have_last = false;
                continue;
            }
            TRY(push_dch(&sc->buf, &nbuf, &sc->buf_cap, ch));
            last = ch.ccc;
            continue;
        }
        UChar32 r = unorm2_composePair(nfc, (UChar32)k.cp, (UChar32)ch.cp);
        if (r >= 0) {
            k = (dch){(uint32_t)r, k.change + ch.change - 1, 0};
            continue;
        }
        TRY(push_dch(&sc->buf, &nbuf, &sc->buf_cap, ch));
        last = ch.ccc;
    }
    if (have_k)
        TRY(push_dch(&sc->comp, &out, &sc->comp_cap, k));
    for (size_t j = 0; j < nbuf; j++)
        TRY(push_dch(&sc->comp, &out, &sc->comp_cap, sc->buf[j]));
    *nc = out;
done:
    return st;
}

/* Normalizes the segment s[a..b) (it starts at a boundary and the next char
 * starts another) and emits it with its changes. */
static lipi_status nf_segment(const lipi_normalizer *n, int form, nscratch *sc, emitter *em,
                              size_t a, size_t b)
{
    lipi_status st = LIPI_OK;
    const UNormalizer2 *dinst = (form == NF_C || form == NF_D) ? n->nf[NF_D] : n->nf[NF_KD];
    size_t nd = 0, ready = 0;
    for (size_t i = a; i < b;) {
        size_t l;
        uint32_t c = u8get(em->s + i, &l);
        i += l;
        uint32_t parts[18];
        size_t np = 0;
        decomposition(dinst, c, parts, &np);
        for (size_t j = 0; j < np; j++) {
            uint8_t ccc = u_getCombiningClass((UChar32)parts[j]);
            if (ccc == 0) {
                sort_pending(sc->dec, ready, nd);
                ready = nd;
            }
            TRY(push_dch(&sc->dec, &nd, &sc->dec_cap, (dch){parts[j], j == 0 ? 0 : 1, ccc}));
        }
    }
    sort_pending(sc->dec, ready, nd);
    const dch *res = sc->dec;
    size_t nr = nd;
    if (form == NF_C || form == NF_KC) {
        TRY(recompose(n, sc, nd, &nr));
        res = sc->comp;
    }
    for (size_t i = 0; i < nr; i++)
        TRY(emit_cp(em, res[i].cp, res[i].change));
done:
    return st;
}

static const UProperty qc_prop[4] = {UCHAR_NFC_QUICK_CHECK, UCHAR_NFD_QUICK_CHECK,
                                     UCHAR_NFKC_QUICK_CHECK, UCHAR_NFKD_QUICK_CHECK};

static lipi_status op_nf(const lipi_normalizer *n, int form, nscratch *sc, emitter *em)
{
    lipi_status st = LIPI_OK;
    const UNormalizer2 *inst = n->nf[form];
    const char *s = em->s;
    size_t len = em->len, i = 0;
    /* Unchanged text accumulates in [em->off, i) and is copied in one go. */
    while (i < len) {
        /* ASCII chars are single-char segments, except that the last one
         * before a non-ASCII char may combine with it. */
        size_t j = i;
        while (j < len && (unsigned char)s[j] < 0x80)
            j++;
        if (j == len) {
            i = len;
            break;
        }
        if (j > i)
            i = j - 1;
        size_t a = i, l;
        uint32_t c = u8get(s + i, &l);
        i += l;
        /* Inert: unchanged, and a boundary on both sides. */
        if (c >= 0x80 && unorm2_isInert(inst, (UChar32)c))
            continue;
        size_t nchars = 1;
        while (i < len) {
            uint32_t c2 = u8get(s + i, &l);
            if (c2 < 0x80 || unorm2_hasBoundaryBefore(inst, (UChar32)c2))
                break;
            i += l;
            nchars++;
        }
        if (nchars == 1 &&
            (c < 0x80 || u_getIntPropertyValue((UChar32)c, qc_prop[form]) == UNORM_YES))
            continue;
        TRY(copy_run(em, a - em->off));
        TRY(nf_segment(n, form, sc, em, a, i));
    }
    TRY(copy_run(em, i - em->off));
done:
    return st;
}

/* ======================================================================== */
/* Per-char operations                                                       */
/* ======================================================================== */

/* Rust char::to_lowercase: the full per-char lowercase mapping, no context
 * (so Σ always becomes σ); U+0130 is the only char whose full mapping
 * differs from the simple one. */
static lipi_status op_lowercase(emitter *em)
{
    lipi_status st = LIPI_OK;
    const char *s = em->s;
    size_t len = em->len, i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && (unsigned char)s[j] < 0x80 && !(s[j] >= 'A' && s[j] <= 'Z'))
            j++;
        TRY(copy_run(em, j - i));
        i = j;
        if (i == len)
            break;
        size_t l;
        uint32_t c = u8get(s + i, &l);
        if (c < 0x80) {
            char lc = (char)(c - 'A' + 'a');
            TRY(emit(em, &lc, 1, 0));
        } else if (u_tolower((UChar32)c) == (UChar32)c && c != 0x130) {
            TRY(copy_run(em, l));
        } else {
            UChar src[2], dst[8];
            int32_t ns = 0;
            U16_APPEND_UNSAFE(src, ns, c);
            UErrorCode ec = U_ZERO_ERROR;
            int32_t nd = u_strToLower(dst, 8, src, ns, "", &ec);
            if (U_FAILURE(ec) || nd > 8)
                return LIPI_EICU;
            long change = 0;
            for (int32_t k = 0; k < nd;) {
                UChar32 d;
                U16_NEXT(dst, k, nd, d);
                TRY(emit_cp(em, (uint32_t)d, change));
                change = 1;
            }
        }
        i += l;
    }
done:
    return st;
}

static bool is_mark(uint32_t c)
{
    return lipi_char_class(c) & LIPI_CC_MARK;
}

/* Rust's char::is_whitespace is the White_Space property. */
static bool bert_whitespace(uint32_t c)
{
    return c == '\t' || c == '\n' || c == '\r' || (lipi_char_class(c) & LIPI_CC_SPACE);
}

/* unicode_categories' is_other: Cc, Cf and Co (not Cn). */
static bool bert_control(uint32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return false;
    return lipi_char_class(c) & LIPI_CC_CONTROL;
}

static bool is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool nmt_drop(uint32_t c)
{
    return (c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
           c == 0x8F || c == 0x9F;
}

static bool nmt_space(uint32_t c)
{
    return c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
           (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 || c == 0x2581 ||
           c == 0xFEFF || c == 0xFFFD;
}

/* What a per-char op does with one char. */
enum { PC_KEEP, PC_DROP, PC_SPACE, PC_CJK };

static int per_char_action(op_kind kind, uint32_t c)
{
    switch (kind) {
    case OP_FILTER_MARKS: return c >= 0x300 && is_mark(c) ? PC_DROP : PC_KEEP;
    case OP_FILTER_MN:
        return c >= 0x300 && u_charType((UChar32)c) == U_NON_SPACING_MARK ? PC_DROP : PC_KEEP;
    case OP_BERT_CLEAN:
        if (c == 0 || c == 0xFFFD || bert_control(c))
            return PC_DROP;
        return c != ' ' && bert_whitespace(c) ? PC_SPACE : PC_KEEP;
    case OP_BERT_CJK: return is_cjk(c) ? PC_CJK : PC_KEEP;
    case OP_NMT:
        if (nmt_drop(c))
            return PC_DROP;
        return nmt_space(c) ? PC_SPACE : PC_KEEP;
    default: return PC_KEEP;
    }
}

/* Filters and maps (StripAccents, the BertNormalizer passes, Nmt): kept
 * chars keep their span, dropped chars vanish, mapped chars replace in
 * place, and a CJK ideograph becomes " c " with all three on its span. */
static lipi_status op_per_char(op_kind kind, emitter *em)
{
    lipi_status st = LIPI_OK;
    const char *s = em->s;
    size_t len = em->len, i = 0, run = 0;
    while (i < len) {
        size_t l;
        uint32_t c = u8get(s + i, &l);
        /* Printable ASCII is kept by every per-char op. */
        int act = c >= 0x20 && c < 0x7F ? PC_KEEP : per_char_action(kind, c);
        if (act == PC_KEEP) {
            run += l;
            i += l;
            continue;
        }
        TRY(copy_run(em, run));
        run = 0;
        if (act == PC_DROP) {
            TRY(skip_run(em, l));
        } else if (act == PC_SPACE) {
            TRY(emit(em, " ", 1, 0));
        } else {
            TRY(emit(em, " ", 1, 0));
            TRY(emit(em, s + i, l, 1));
            TRY(emit(em, " ", 1, 1));
        }
        i += l;
    }
    TRY(copy_run(em, run));
done:
    return st;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stay, the others are
 * numbered from U+0100 in byte order. */
static uint32_t byte_char(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))
        return b;
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE)))
            k++;
    return 0x100 + k;
}

static lipi_status op_bytelevel(emitter *em)
{
    lipi_status st = LIPI_OK;
    for (size_t i = 0; i < em->len;) {
        size_t l = u8len((unsigned char)em->s[i]);
        for (size_t k = 0; k < l; k++)
            TRY(emit_cp(em, byte_char((unsigned char)em->s[i + k]), k > 0));
        i += l;
    }
done:
    return st;
}

static lipi_status op_strip(const lipi_ns_step *step, emitter *em)
{
    lipi_status st = LIPI_OK;
    const char *s = em->s;
    size_t a = 0, b = em->len;
    if (step->strip_left)
        while (a < b) {
            size_t l;
            uint32_t c = u8get(s + a, &l);
            if (!u_isUWhiteSpace((UChar32)c))
                break;
            a += l;
        }
    if (step->strip_right)
        while (b > a) {
            size_t p = b - 1, l;
            while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80)
                p--;
            if (!u_isUWhiteSpace((UChar32)u8get(s + p, &l)))
                break;
            b = p;
        }
    if (a > 0)
        TRY(skip_run(em, a));
    TRY(copy_run(em, b - a));
done:
    return st;
}

static lipi_status op_prepend(const lipi_ns_step *step, emitter *em)
{
    lipi_status st = LIPI_OK;
    if (em->len == 0)
        return LIPI_OK;
    size_t first = u8len((unsigned char)em->s[0]);
    const char *p = step->prepend;
    long change = 0;
    for (size_t i = 0; i < step->prepend_len;) {
        size_t l = u8len((unsigned char)p[i]);
        TRY(emit(em, p + i, l, change));
        change = 1;
        i += l;
    }
    TRY(emit(em, em->s, first, 1));
    /* The transform covered only the first char: the rest stays. */
    em->off = first;
    TRY(copy_run(em, em->len - first));
done:
    return st;
}

/* ======================================================================== */
/* Replace                                                                   */
/* ======================================================================== */

static lipi_status emit_inserted(emitter *em, const char *t, size_t n)
{
    lipi_status st = LIPI_OK;
    for (size_t i = 0; i < n;) {
        size_t l = u8len((unsigned char)t[i]);
        TRY(emit(em, t + i, l, 1));
        i += l;
    }
done:
    return st;
}

/* Every match, left to right, no empty match right where the previous one
 * ended (the Rust regex / onig iteration rule). */
static lipi_status op_replace(const lipi_ns_step *step, nscratch *sc, emitter *em,
                              lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const char *s = em->s;
    size_t len = em->len, pos = 0;
    uint32_t opts = PCRE2_NO_UTF_CHECK;
    while (pos <= len) {
        int rc = pcre2_match(step->re, (PCRE2_SPTR)s, len, pos, opts, sc->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return lipi_error_set(err, LIPI_EREGEX, NULL, 0, pos,
                                  "Replace pattern: matching failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms || ms < em->off) /* \K tricks: ignore such a match */
            break;
        TRY(copy_run(em, ms - em->off));
        TRY(skip_run(em, me - ms));
        TRY(emit_inserted(em, step->content, step->content_len));
        if (me == ms) {
            if (ms >= len)
                break;
            pos = ms + u8len((unsigned char)s[ms]);
            opts = PCRE2_NO_UTF_CHECK;
        } else {
            pos = me;
            opts = PCRE2_NO_UTF_CHECK | PCRE2_NOTEMPTY_ATSTART;
        }
    }
    TRY(copy_run(em, len - em->off));
done:
    return st;
}

static const cmap_entry *cmap_find(const norm_op *op, uint32_t c)
{
    size_t lo = 0, hi = op->n_map;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (op->map[mid].cp == c)
            return &op->map[mid];
        if (op->map[mid].cp < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A run of Replace steps whose patterns are single chars behaves as one
 * per-char mapping: each output char takes the span of the char it came
 * from, as the chain of Replaces would give it. */
static lipi_status op_charmap(const norm_op *op, emitter *em)
{
    lipi_status st = LIPI_OK;
    const char *s = em->s;
    size_t len = em->len, i = 0, run = 0;
    while (i < len) {
        size_t l;
        uint32_t c = u8get(s + i, &l);
        const cmap_entry *e = cmap_find(op, c);
        if (!e) {
            run += l;
            i += l;
            continue;
        }
        TRY(copy_run(em, run));
        run = 0;
        TRY(skip_run(em, l));
        TRY(emit_inserted(em, op->pool + e->off, e->len));
        i += l;
    }
    TRY(copy_run(em, run));
done:
    return st;
}

/* ======================================================================== */
/* Precompiled (SentencePiece charsmap, as Hugging Face applies it)          */
/* ======================================================================== */

static inline uint32_t pc_unit(const pc_map *m, size_t i)
{
    const uint8_t *b = m->units + 4 * i;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline size_t pc_offset(uint32_t u)
{
    return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6);
}

/* One step down the trie from *pos on byte c: the unit reached, or 0 when
 * there is none (a child's unit has its nonzero label in its low byte). */
static inline uint32_t pc_step(const pc_map *m, size_t *pos, unsigned char c)
{
    size_t p = *pos ^ c;
    if (c == 0 || p >= m->n_units)
        return 0;
    uint32_t u = pc_unit(m, p);
    if ((u & ((1u << 31) | 0xFFu)) != c)
        return 0;
    *pos = p ^ pc_offset(u);
    return u;
}

/* The first (shortest) prefix of key[0..n) in the trie, as spm_precompiled's
 * transform: the replacement for the whole chunk. Every index is checked,
 * and a value must start a char inside the pool. */
static bool pc_lookup(const pc_map *m, const char *key, size_t n, const char **val,
                      size_t *vlen)
{
    if (m->n_units == 0)
        return false;
    size_t pos = pc_offset(pc_unit(m, 0));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = pc_step(m, &pos, (unsigned char)key[i]);
        if (!u)
            return false;
        if ((u >> 8) & 1) {
            if (pos >= m->n_units)
                return false;
            size_t v = pc_unit(m, pos) & 0x7FFFFFFFu;
            if (v >= m->pool_len || ((unsigned char)m->pool[v] & 0xC0) == 0x80)
                return false;
            const char *end = memchr(m->pool + v, '\0', m->pool_len - v);
            *val = m->pool + v;
            *vlen = end ? (size_t)(end - (m->pool + v)) : m->pool_len - v;
            return true;
        }
    }
    return false;
}

/* Hugging Face builds the whole list of (char, change) first and, when a
 * replacement is shorter than what it replaces, adds the difference to the
 * change of the last entry so far, which may belong to an earlier chunk.
 * Holding back one entry reproduces that while streaming. */
typedef struct {
    char b[4];
    size_t n;
    long change;
    bool has;
} pc_pending;

static lipi_status pc_push(emitter *em, pc_pending *p, const char *c, size_t n, long change)
{
    lipi_status st = LIPI_OK;
    if (p->has)
        st = emit(em, p->b, p->n, p->change);
    memcpy(p->b, c, n);
    p->n = n;
    p->change = change;
    p->has = true;
    return st;
}

/* Replaces old_count chars by v: new chars in place, the surplus inserted
 * at the end, or the deficit taken from the last entry. */
static lipi_status pc_replace(emitter *em, pc_pending *p, const char *v, size_t vlen,
                              size_t old_count)
{
    lipi_status st = LIPI_OK;
    long new_count = (long)count_chars(v, vlen), diff = new_count - (long)old_count, i = 0;
    for (size_t q = 0; q < vlen; i++) {
        size_t l = u8len((unsigned char)v[q]);
        TRY(pc_push(em, p, v + q, l, diff > 0 && i >= new_count - diff ? 1 : 0));
        q += l;
    }
    if (diff < 0 && p->has)
        p->change += diff;
done:
    return st;
}

/* Extended grapheme clusters, UAX #29 rules GB3..GB13 with GB9c (Indic
 * conjuncts), as Hugging Face's unicode-segmentation and ICU draw them.
 * Property lookups are much cheaper than ICU's break iterator per cluster. */
static int gcb_of(uint32_t c)
{
    if (c < 0x80) {
        if (c == '\r')
            return U_GCB_CR;
        if (c == '\n')
            return U_GCB_LF;
        return c < 0x20 || c == 0x7F ? U_GCB_CONTROL : U_GCB_OTHER;
    }
    return u_getIntPropertyValue((UChar32)c, UCHAR_GRAPHEME_CLUSTER_BREAK);
}

/* Indic_Conjunct_Break: 1 Consonant, 2 Linker, 3 Extend, 0 None. Linkers
 * and consonants are the viramas and consonants of the six scripts that
 * form conjuncts this way; Extend is ZWJ and the extending marks with a
 * nonzero combining class (so a matra or ZWNJ ends a conjunct). */
static int incb_extend(uint32_t c, int gcb)
{
    return gcb == U_GCB_ZWJ || (gcb == U_GCB_EXTEND && u_getCombiningClass((UChar32)c) != 0)
               ? 3
               : 0;
}

static int incb_of(uint32_t c, int gcb)
{
    if (c < 0x900 || c > 0xD7F)
        return incb_extend(c, gcb);
    bool script = (c >= 0x900 && c <= 0x9FF) || (c >= 0xA80 && c <= 0xB7F) ||
                  (c >= 0xC00 && c <= 0xC7F) || (c >= 0xD00 && c <= 0xD7F);
    if (script && (c & 0x7F) == 0x4D)
        return 2;
    if (script && u_getIntPropertyValue((UChar32)c, UCHAR_INDIC_SYLLABIC_CATEGORY) ==
                      U_INSC_CONSONANT)
        return 1;
    return incb_extend(c, gcb);
}

/* GB9c's conjunct state after a code point of Indic_Conjunct_Break incb:
 * 0 outside a conjunct, 1 after a consonant (and extends), 2 once a linker
 * followed it. */
static int conj_next(int conj, int incb)
{
    if (incb == 1)
        return 1;
    if (incb == 2 && conj)
        return 2;
    return incb == 3 ? conj : 0;
}

void lipi_cluster_edges(const char *s, size_t len, bool *starts_inside, bool *ends_open)
{
    *starts_inside = *ends_open = false;
    if (len == 0)
        return;
    size_t l;
    uint32_t c = u8get(s, &l);
    int g = gcb_of(c);
    *starts_inside = g == U_GCB_EXTEND || g == U_GCB_SPACING_MARK || g == U_GCB_ZWJ;
    /* The conjunct state of GB9c over the token, as grapheme_end keeps it. */
    int conj = 0, last = U_GCB_OTHER;
    for (size_t i = 0; i < len; i += l) {
        c = u8get(s + i, &l);
        last = gcb_of(c);
        conj = conj_next(conj, incb_of(c, last));
    }
    *ends_open = last == U_GCB_ZWJ || last == U_GCB_PREPEND || conj == 2;
}

/* End of the cluster that starts at s[a] (a is a boundary). */
static size_t grapheme_end(const char *s, size_t len, size_t a)
{
    size_t l;
    uint32_t c = u8get(s + a, &l);
    int prev = gcb_of(c);
    /* GB9c: 0 outside a conjunct, 1 after a consonant (and extends),
     * 2 once a linker followed it. */
    int conj = incb_of(c, prev) == 1 ? 1 : 0;
    bool pict = c >= 0x80 && u_hasBinaryProperty((UChar32)c, UCHAR_EXTENDED_PICTOGRAPHIC);
    bool pict_zwj = false; /* ExtPict Extend* ZWJ just seen (GB11) */
    size_t ri = prev == U_GCB_REGIONAL_INDICATOR;
    size_t i = a + l;
    while (i < len) {
        uint32_t d = u8get(s + i, &l);
        int cur = gcb_of(d);
        bool join;
        if (prev == U_GCB_CR && cur == U_GCB_LF)
            join = true; /* GB3 */
        else if (prev == U_GCB_CONTROL || prev == U_GCB_CR || prev == U_GCB_LF ||
                 cur == U_GCB_CONTROL || cur == U_GCB_CR || cur == U_GCB_LF)
            join = false; /* GB4, GB5 */
        else if (prev == U_GCB_L &&
                 (cur == U_GCB_L || cur == U_GCB_V || cur == U_GCB_LV || cur == U_GCB_LVT))
            join = true; /* GB6 */
        else if ((prev == U_GCB_LV || prev == U_GCB_V) && (cur == U_GCB_V || cur == U_GCB_T))
            join = true; /* GB7 */
        else if ((prev == U_GCB_LVT || prev == U_GCB_T) && cur == U_GCB_T)
            join = true; /* GB8 */
        else if (cur == U_GCB_EXTEND || cur == U_GCB_ZWJ || cur == U_GCB_SPACING_MARK ||
                 prev == U_GCB_PREPEND)
            join = true; /* GB9, GB9a, GB9b */
        else if (conj == 2 && incb_of(d, cur) == 1)
            join = true; /* GB9c */
        else if (pict_zwj && d >= 0x80 &&
                 u_hasBinaryProperty((UChar32)d, UCHAR_EXTENDED_PICTOGRAPHIC))
            join = true; /* GB11 */
        else if (prev == U_GCB_REGIONAL_INDICATOR && cur == U_GCB_REGIONAL_INDICATOR)
            join = ri % 2 == 1; /* GB12, GB13 */
        else
            join = false;
        if (!join)
            break;
        bool d_pict = d >= 0x80 && u_hasBinaryProperty((UChar32)d, UCHAR_EXTENDED_PICTOGRAPHIC);
        pict_zwj = cur == U_GCB_ZWJ && pict;
        if (d_pict)
            pict = true;
        else if (cur != U_GCB_EXTEND)
            pict = false;
        ri = cur == U_GCB_REGIONAL_INDICATOR ? ri + 1 : 0;
        conj = conj_next(conj, incb_of(d, cur));
        prev = cur;
        i += l;
    }
    return i;
}

static lipi_status op_precompiled(const pc_map *m, emitter *em)
{
    lipi_status st = LIPI_OK;
    pc_pending pend = {.has = false};
    const char *s = em->s;
    size_t len = em->len;
    for (size_t a = 0; a < len;) {
        /* An ASCII char followed by ASCII is a cluster by itself, except
         * CR LF. */
        size_t b = a + 1;
        if ((unsigned char)s[a] >= 0x80 || (b < len && (unsigned char)s[b] >= 0x80) ||
            (s[a] == '\r' && b < len && s[b] == '\n'))
            b = grapheme_end(s, len, a);
        const char *g = s + a;
        size_t glen = b - a, vlen;
        const char *v;
        a = b;
        if (glen < 6 && pc_lookup(m, g, glen, &v, &vlen)) {
            TRY(pc_replace(em, &pend, v, vlen, count_chars(g, glen)));
            continue;
        }
        for (size_t i = 0; i < glen;) {
            size_t l = u8len((unsigned char)g[i]);
            if (pc_lookup(m, g + i, l, &v, &vlen))
                TRY(pc_replace(em, &pend, v, vlen, 1));
            else
                TRY(pc_push(em, &pend, g + i, l, 0));
            i += l;
        }
    }
    if (pend.has)
        TRY(emit(em, pend.b, pend.n, pend.change));
done:
    return st;
}

/* SentencePiece's Normalizer::NormalizePrefix: at each position the longest
 * prefix in the trie (among the first 32 prefixes, as darts-clone's
 * commonPrefixSearch is called there) is replaced; otherwise one char is
 * copied. Replacement chars map to the whole span they replace. */
static bool pc_longest(const pc_map *m, const char *key, size_t n, size_t *mlen,
                       const char **val, size_t *vlen)
{
    if (m->n_units == 0)
        return false;
    size_t pos = pc_offset(pc_unit(m, 0)), found = 0, results = 0;
    for (size_t i = 0; i < n && results < 32; i++) {
        uint32_t u = pc_step(m, &pos, (unsigned char)key[i]);
        if (!u)
            break;
        if ((u >> 8) & 1) {
            if (pos >= m->n_units)
                break;
            results++;
            size_t v = pc_unit(m, pos) & 0x7FFFFFFFu;
            if (v >= m->pool_len || ((unsigned char)m->pool[v] & 0xC0) == 0x80)
                continue;
            /* A match must end on a char boundary to be replaced whole. */
            if (i + 1 < n && ((unsigned char)key[i + 1] & 0xC0) == 0x80)
                continue;
            const char *end = memchr(m->pool + v, '\0', m->pool_len - v);
            found = i + 1;
            *val = m->pool + v;
            *vlen = end ? (size_t)(end - (m->pool + v)) : m->pool_len - v;
        }
    }
    *mlen = found;
    return found > 0;
}

static inline uint32_t pc_pair_bit(uint32_t c, uint32_t c2)
{
    return (uint32_t)(((uint64_t)c << 16 | c2) * UINT64_C(0x9E3779B97F4A7C15) >> (64 - PC_PAIR_LOG));
}

/* Whether no key matches at s[i], where BMP char c (cl bytes) starts one:
 * c is no key by itself and no key goes on from c to the char after it (a
 * hashed bit, so "maybe" sometimes when it does not). A base letter starts
 * a key when a combining mark could follow it, and mostly none does. */
static bool pc_no_match(const pc_map *m, const unsigned char *s, size_t len, size_t i,
                        uint32_t c, size_t cl)
{
    const uint64_t *alone = m->bmp_starts + 2 * PC_BMP_WORDS, *pairs = alone + PC_BMP_WORDS;
    if (alone[c >> 6] >> (c & 63) & 1)
        return false;
    size_t j = i + cl;
    if (j == len)
        return true;
    if (s[j] >= 0xF0)
        return !m->astral_second;
    if (s[j] < 0xC2 && s[j] >= 0x80) /* not a lead byte: no pair was marked */
        return false;
    size_t l2 = u8len(s[j]);
    if (l2 > len - j)
        return false;
    uint32_t k = pc_pair_bit(c, u8get((const char *)s + j, &l2));
    return !(pairs[k >> 6] >> (k & 63) & 1);
}

/* Whether no key matches at s[i], where BMP char c (cl bytes) starts one.
 * Mostly c is a letter that takes combining marks, before a space or
 * another letter: an ASCII char after c, or the text's end (read as NUL,
 * which goes on from no char), answers from one bit. */
static inline bool pc_pass(const pc_map *m, const unsigned char *s, size_t len, size_t i,
                           uint32_t c, size_t cl)
{
    const uint64_t *pass = m->bmp_starts + PC_BMP_WORDS;
    unsigned next = i + cl < len ? s[i + cl] : 0;
    if (next < 0x80 && pass[c >> 6] >> (c & 63) & 1)
        return true;
    return pc_no_match(m, s, len, i, c, cl);
}

int lipi_ns_plain_charsmap_for_tests;

/* The end of the run of chars from i at which no key of m matches (a match
 * must cover its first char whole, so the bitmap of BMP chars says it for
 * most without a walk, and pc_pass for most of the rest): most text is
 * such runs, so this loop is the op's cost. Stops at a char outside the
 * BMP or cut by the end. The bitmap's word of a char is cp >> 6 and its
 * bit cp & 63: for a char of 2 or 3 bytes, the bits of its lead bytes and
 * those of its last byte, so c itself is only put together for pc_pass. */
static size_t pc_skip(const pc_map *m, const char *text, size_t len, size_t i)
{
    const unsigned char *s = (const unsigned char *)text;
    const uint64_t *bm = m->bmp_starts;
    if (!bm || lipi_ns_plain_charsmap_for_tests)
        return i;
    /* With 3 bytes left, any char but one outside the BMP has all its
     * bytes: no length check per char. */
    while (len - i >= 3) {
        unsigned b = s[i];
        if (b < 0x80) {
#ifdef __SSE2__
            /* Printable ASCII up to the first other byte (a control char,
             * DEL or a non-ASCII byte), less the last one, whose next byte
             * is not known to be ASCII: pc_pass's answer for each. */
            if (m->ascii_runs && len - i >= 16) {
                __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
                unsigned stop = (unsigned)_mm_movemask_epi8(_mm_or_si128(
                    _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)), _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7F))));
                unsigned j = (unsigned)__builtin_ctz(stop | 0x10000u);
                if (j >= 2) {
                    i += j - 1;
                    continue;
                }
            }
#endif
            if (bm[b >> 6] >> (b & 63) & 1 && !pc_pass(m, s, len, i, b, 1))
                return i;
            i++;
        } else if (b < 0xE0) {
            unsigned w = b & 0x1Fu, lo = s[i + 1] & 0x3Fu;
            if (bm[w] >> lo & 1 && !pc_pass(m, s, len, i, w << 6 | lo, 2))
                return i;
            i += 2;
        } else {
            if (b >= 0xF0)
                return i;
            unsigned w = (b & 0x0Fu) << 6 | (s[i + 1] & 0x3Fu), lo = s[i + 2] & 0x3Fu;
            if (bm[w] >> lo & 1 && !pc_pass(m, s, len, i, w << 6 | lo, 3))
                return i;
            i += 3;
        }
    }
    /* The last two bytes at most: an ASCII char or one of two bytes. */
    while (i < len) {
        unsigned b = s[i], c = b, cl = 1;
        if (b >= 0x80) {
            if (b >= 0xE0 || len - i < 2)
                break;
            c = (b & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu);
            cl = 2;
        }
        if (bm[c >> 6] >> (c & 63) & 1 && !pc_pass(m, s, len, i, c, cl))
            break;
        i += cl;
    }
    return i;
}

static lipi_status op_spm_charsmap(const pc_map *m, emitter *em)
{
    lipi_status st = LIPI_OK;
    const char *s = em->s;
    size_t len = em->len, i = 0, run = 0;
    while (i < len) {
        size_t skip = pc_skip(m, s, len, i);
        run += skip - i;
        i = skip;
        if (i == len)
            break;
        size_t mlen, vlen, l = u8len((unsigned char)s[i]);
        const char *v;
        if (!pc_longest(m, s + i, len - i, &mlen, &v, &vlen)) {
            run += l;
            i += l;
            continue;
        }
        TRY(copy_run(em, run));
        run = 0;
        TRY(materialize(em));
        if (vlen > 0 && em->track) {
            lipi_span a = src_span(em, i), b = src_span(em, i + mlen - 1);
            lipi_span sp = {a.start < b.start ? a.start : b.start, a.end > b.end ? a.end : b.end};
            TRY(text_reserve(em->dst, vlen, true));
            put_span(em, sp, vlen);
        } else {
            TRY(text_reserve(em->dst, vlen, em->track));
        }
        memcpy(em->dst->s + em->dst->len, v, vlen);
        em->dst->len += vlen;
        TRY(skip_run(em, mlen));
        i += mlen;
    }
    TRY(copy_run(em, run));
done:
    return st;
}

/* ======================================================================== */
/* Running a normalizer                                                      */
/* ======================================================================== */

static bool all_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

static lipi_status scratch_get(lipi_normalized *out, nscratch **sc)
{
    if (!out->scratch) {
        nscratch *n = lipi_calloc(1, sizeof *n);
        if (!n)
            return LIPI_ENOMEM;
        out->scratch = n;
    }
    *sc = out->scratch;
    return LIPI_OK;
}

static void *pcre2_lipi_malloc(PCRE2_SIZE n, void *data)
{
    (void)data;
    return lipi_malloc(n);
}

static void pcre2_lipi_free(void *p, void *data)
{
    (void)data;
    lipi_free(p);
}

static lipi_status run_op(const lipi_normalizer *n, size_t i, nscratch *sc, emitter *em,
                          lipi_error *err)
{
    const norm_op *op = &n->ops[i];
    switch (op->kind) {
    case OP_NF: return op_nf(n, op->form, sc, em);
    case OP_LOWERCASE: return op_lowercase(em);
    case OP_FILTER_MARKS:
    case OP_FILTER_MN:
    case OP_BERT_CLEAN:
    case OP_BERT_CJK:
    case OP_NMT: return op_per_char(op->kind, em);
    case OP_REPLACE:
        if (!sc->md) {
            pcre2_general_context *g =
                pcre2_general_context_create(pcre2_lipi_malloc, pcre2_lipi_free, NULL);
            if (!g)
                return LIPI_ENOMEM;
            sc->md = pcre2_match_data_create(1, g);
            pcre2_general_context_free(g);
            if (!sc->md)
                return LIPI_ENOMEM;
        }
        return op_replace(op->step, sc, em, err);
    case OP_CHARMAP: return op_charmap(op, em);
    case OP_PREPEND: return op_prepend(op->step, em);
    case OP_STRIP: return op_strip(op->step, em);
    case OP_PRECOMPILED: return op_precompiled(&op->pc, em);
    case OP_SPM_CHARSMAP: return op_spm_charsmap(&op->pc, em);
    case OP_BYTELEVEL: return op_bytelevel(em);
    }
    return LIPI_EINVAL;
}

#define SPM_META "\xe2\x96\x81" /* U+2581 */
/* spm_ws finds a space in eight bytes by the lowest flagged byte, which is
 * the first only on little-endian machines (big-endian copies bytewise). */
#define SPM_WS_SWAR (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)

/* The five ops find_spm_ws found, on s[0..len) into t (text only): leading
 * spaces and trailing spaces and U+2581 dropped; then, unless nothing is
 * left, U+2581 first and every run of spaces one U+2581. */
static lipi_status spm_ws(const char *s, size_t len, ntext *t)
{
    size_t a = 0, b = len;
    while (a < b && s[a] == ' ')
        a++;
    for (;;) {
        if (b > a && s[b - 1] == ' ')
            b--;
        else if (b - a >= 3 && memcmp(s + b - 3, SPM_META, 3) == 0)
            b -= 3;
        else
            break;
    }
    t->len = 0;
    if (a == b)
        return text_reserve(t, 0, false);
    /* At most 3 bytes per input byte. */
    if (b - a > (SIZE_MAX - 8) / 3)
        return LIPI_ENOMEM;
    lipi_status st = text_reserve(t, 3 * (b - a) + 3, false);
    if (st != LIPI_OK)
        return st;
    char *o = t->s;
    memcpy(o, SPM_META, 3);
    o += 3;
    const uint64_t ones = 0x0101010101010101u, spaces = 0x20 * ones;
    for (size_t i = a; i < b;) {
        /* Eight bytes at a time while they hold no space (words are short:
         * a memchr and a memcpy per word cost more): copied whole, the
         * output advances to the first space. The output has room, as it
         * is at most 3 bytes per input byte before i, plus 3. */
        size_t k = i;
        while (SPM_WS_SWAR && k + 8 <= b) {
            uint64_t v, x;
            memcpy(&v, s + k, 8);
            memcpy(o + (k - i), &v, 8);
            x = v ^ spaces;
            x = (x - ones) & ~x & 0x80 * ones; /* a high bit where a byte is ' ' */
            if (x) {
                k += (size_t)__builtin_ctzll(x) / 8; /* little-endian: the first */
                goto cut;
            }
            k += 8;
        }
        while (k < b && s[k] != ' ') {
            o[k - i] = s[k];
            k++;
        }
    cut:
        o += k - i;
        if (k == b)
            break;
        memcpy(o, SPM_META, 3);
        o += 3;
        for (i = k; i < b && s[i] == ' ';)
            i++;
    }
    t->len = (size_t)(o - t->s);
    return LIPI_OK;
}

/* An op that leaves this text unchanged can be skipped (alignments stay). */
static bool op_is_noop(const norm_op *op, const char *s, size_t len, bool ascii)
{
    if (len == 0)
        return true;
    if (!ascii)
        return false;
    switch (op->kind) {
    case OP_NF:
    case OP_FILTER_MARKS:
    case OP_FILTER_MN:
    case OP_BERT_CJK: return true;
    case OP_LOWERCASE:
        for (size_t i = 0; i < len; i++)
            if (s[i] >= 'A' && s[i] <= 'Z')
                return false;
        return true;
    default: return false;
    }
}

bool lipi_normalizer_cut_after(const lipi_normalizer *n, uint32_t c, lipi_normalized *out,
                               uint32_t *last)
{
    if (!n) {
        *last = c;
        return true;
    }
    /* NFD reorders the combining marks after a starter, across any cut:
     * its input must end in a starter at the cut. The BERT passes that may
     * come before it give c itself, a space, " c " or nothing. */
    bool before_nfd = true;
    for (size_t i = 0; i < n->n_ops; i++) {
        switch (n->ops[i].kind) {
        case OP_BERT_CLEAN:
        case OP_BERT_CJK: break;
        case OP_LOWERCASE:
        case OP_FILTER_MARKS:
        case OP_FILTER_MN:
        case OP_NMT: before_nfd = false; break;
        case OP_NF:
            if (n->ops[i].form != NF_D || !before_nfd ||
                !unorm2_hasBoundaryAfter(n->nf[NF_D], (UChar32)c))
                return false;
            break;
        default: return false;
        }
    }
    char b[4];
    size_t l = lipi_utf8_encode(c, b), k;
    if (lipi_normalize_valid(n, b, l, out, false, NULL) != LIPI_OK || out->len == 0)
        return false;
    for (k = out->len - 1; k > 0 && ((unsigned char)out->text[k] & 0xC0) == 0x80; k--)
        ;
    *last = u8get(out->text + k, &l);
    return true;
}

lipi_status lipi_normalize(const lipi_normalizer *n, const char *s, size_t len,
                           lipi_normalized *out, bool want_align, lipi_error *err)
{
    out->len = 0;
    if (!s && len)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected text, found NULL");
    size_t good = lipi_utf8_valid_prefix(s, len);
    if (good < len)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, good,
                              "invalid UTF-8 byte 0x%02x at byte %zu (expected valid UTF-8)",
                              (unsigned char)s[good], good);
    return lipi_normalize_valid(n, s, len, out, want_align, err);
}

lipi_status lipi_normalize_valid(const lipi_normalizer *n, const char *s, size_t len,
                                 lipi_normalized *out, bool want_align, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    nscratch *sc = NULL;
    out->len = 0;
    if (!s && len)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected text, found NULL");
    st = scratch_get(out, &sc);
    if (st != LIPI_OK)
        return lipi_error_set(err, st, NULL, 0, 0, "out of memory while normalizing");
    ntext slot[2] = {{out->text, 0, out->cap, out->align, out->align_cap}, sc->spare};
    /* The source of the next op: the input itself at first. */
    const char *cs = s;
    size_t clen = len;
    const lipi_span *cal = NULL;
    int cur = -1; /* slot holding the current text, -1: the input */
    bool ascii = all_ascii(s, len);
    for (size_t i = 0; n && i < n->n_ops; i++) {
        if (i == n->spm_ws && !want_align) {
            int d = cur == 0 ? 1 : 0;
            st = spm_ws(cs, clen, &slot[d]);
            if (st != LIPI_OK)
                break;
            cur = d;
            cs = slot[d].s;
            clen = slot[d].len;
            ascii = all_ascii(cs, clen);
            i += 4;
            continue;
        }
        if (op_is_noop(&n->ops[i], cs, clen, ascii))
            continue;
        int d = cur == 0 ? 1 : 0;
        slot[d].len = 0;
        emitter em = {cs, clen, cal, 0, &slot[d], want_align, true};
        st = run_op(n, i, sc, &em, err);
        if (st != LIPI_OK)
            break;
        /* Still lazy: the op copied a prefix only (Strip) or, when that
         * prefix is everything, changed nothing. */
        if (em.lazy && em.off == clen)
            continue;
        st = materialize(&em);
        if (st != LIPI_OK)
            break;
        cur = d;
        cs = slot[d].s;
        clen = slot[d].len;
        cal = slot[d].al;
        ascii = all_ascii(cs, clen);
    }
    if (st == LIPI_OK && cur == 1) {
        ntext t = slot[0];
        slot[0] = slot[1];
        slot[1] = t;
    } else if (st == LIPI_OK && cur == -1) {
        /* Nothing changed the input: copy it, with identity spans. */
        slot[0].len = 0;
        emitter em = {cs, clen, cal, 0, &slot[0], want_align, false};
        st = copy_run(&em, clen);
    }
    if (st == LIPI_OK)
        st = text_reserve(&slot[0], 0, want_align);
    out->text = slot[0].s;
    out->cap = slot[0].cap;
    out->align = slot[0].al;
    out->align_cap = slot[0].al_cap;
    sc->spare = slot[1];
    if (st != LIPI_OK) {
        out->len = 0;
        if (out->text)
            out->text[0] = '\0';
        if (st == LIPI_ENOMEM)
            lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory while normalizing");
        else if (st == LIPI_EICU)
            lipi_error_set(err, LIPI_EICU, NULL, 0, 0, "ICU failed while normalizing");
        return st;
    }
    out->len = slot[0].len;
    out->text[out->len] = '\0';
    return st;
}

void lipi_normalized_free(lipi_normalized *out)
{
    if (!out)
        return;
    nscratch *sc = out->scratch;
    if (sc) {
        lipi_free(sc->spare.s);
        lipi_free(sc->spare.al);
        lipi_free(sc->dec);
        lipi_free(sc->comp);
        lipi_free(sc->buf);
        pcre2_match_data_free(sc->md);
        lipi_free(sc);
    }
    lipi_free(out->text);
    lipi_free(out->align);
    memset(out, 0, sizeof *out);
}

/* ======================================================================== */
/* Building                                                                  */
/* ======================================================================== */

void lipi_ns_step_clear(lipi_ns_step *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_children; i++)
        lipi_ns_step_clear(&s->children[i]);
    lipi_free(s->children);
    lipi_free(s->pattern);
    lipi_free(s->content);
    pcre2_code_free(s->re);
    lipi_free(s->prepend);
    lipi_free(s->charsmap_b64);
    lipi_free(s->charsmap);
    memset(s, 0, sizeof *s);
}

/* Hugging Face compiles Regex patterns with Oniguruma's Ruby syntax. The
 * differences from PCRE2 that matter are rewritten here:
 *   \uHHHH                 -> \x{HHHH}
 *   \w \W, \b \B           -> Oniguruma's word chars: Alphabetic, M, Nd, Pc
 *                             and Latin-1's ² ³ ¹ ¼ ½ ¾ (PCRE2 10.42 UCP
 *                             leaves out marks, so a matra would end a word)
 *   \h \H                  -> hex digit classes (PCRE2: horizontal space)
 *   [:alpha:]              -> \p{Alphabetic} (PCRE2: letters only)
 *   (?m)                   -> (?s): Ruby's m is dotall; ^ and $ always work
 *                             per line, which PCRE2_MULTILINE gives
 *   {,n}                   -> {0,n}
 * Nested sets and && intersections inside classes are Oniguruma-only and
 * stay as they are (PCRE2 then rejects or reads them literally). */
#define ONIG_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static lipi_status translate_pattern(const char *p, size_t n, lipi_buf *b)
{
    lipi_status st = LIPI_OK;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            const char *rep = NULL;
            if (d == 'u' && i + 6 <= n && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
                is_hex(p[i + 4]) && is_hex(p[i + 5])) {
                TRY(lipi_buf_append(b, "\\x{", 3));
                TRY(lipi_buf_append(b, p + i + 2, 4));
                TRY(lipi_buf_append(b, "}", 1));
                i += 5;
                continue;
            }
            if (in_class) {
                if (d == 'w')
                    rep = ONIG_WORD;
                else if (d == 'h')
                    rep = "0-9a-fA-F";
            } else {
                switch (d) {
                case 'w': rep = "[" ONIG_WORD "]"; break;
                case 'W': rep = "[^" ONIG_WORD "]"; break;
                case 'b':
                    rep = "(?:(?<=[" ONIG_WORD "])(?![" ONIG_WORD "])|(?<![" ONIG_WORD
                          "])(?=[" ONIG_WORD "]))";
                    break;
                case 'B':
                    rep = "(?:(?<=[" ONIG_WORD "])(?=[" ONIG_WORD "])|(?<![" ONIG_WORD
                          "])(?![" ONIG_WORD "]))";
                    break;
                case 'h': rep = "[0-9a-fA-F]"; break;
                case 'H': rep = "[^0-9a-fA-F]"; break;
                default: break;
                }
            }
            if (rep)
                TRY(lipi_buf_append(b, rep, strlen(rep)));
            else
                TRY(lipi_buf_append(b, p + i, 2));
            i++;
            continue;
        }
        if (in_class) {
            if (c == '[' && i + 1 < n && p[i + 1] == ':') {
                const char *end = memchr(p + i + 2, ']', n - i - 2);
                size_t k = end ? (size_t)(end - p) + 1 : n;
                if (k - i == 9 && memcmp(p + i, "[:alpha:]", 9) == 0)
                    TRY(lipi_buf_append(b, "\\p{Alphabetic}", 14));
                else
                    TRY(lipi_buf_append(b, p + i, k - i));
                i = k - 1;
                continue;
            }
            if (c == ']')
                in_class = false;
            TRY(lipi_buf_append(b, &c, 1));
            continue;
        }
        if (c == '[') {
            /* A ']' right after '[' or '[^' is a literal. */
            size_t k = i + 1;
            if (k < n && p[k] == '^')
                k++;
            if (k < n && p[k] == ']')
                k++;
            TRY(lipi_buf_append(b, p + i, k - i));
            i = k - 1;
            in_class = true;
            continue;
        }
        if (c == '(' && i + 2 < n && p[i + 1] == '?') {
            size_t k = i + 2;
            while (k < n && (p[k] == 'i' || p[k] == 'm' || p[k] == 'x' || p[k] == '-'))
                k++;
            if (k > i + 2 && k < n && (p[k] == ')' || p[k] == ':')) {
                TRY(lipi_buf_append(b, "(?", 2));
                for (size_t q = i + 2; q < k; q++)
                    TRY(lipi_buf_append(b, p[q] == 'm' ? "s" : p + q, 1));
                i = k - 1;
                continue;
            }
        }
        if (c == '{' && i + 1 < n && p[i + 1] == ',') {
            TRY(lipi_buf_append(b, "{0", 2));
            continue;
        }
        TRY(lipi_buf_append(b, &c, 1));
    }
    TRY(lipi_buf_reserve(b, 0));
done:
    return st;
}

lipi_status lipi_ns_compile_replace(lipi_ns_step *s, const char *jpath, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_buf pat = {0};
    pcre2_general_context *g = NULL;
    pcre2_compile_context *cc = NULL;
    g = pcre2_general_context_create(pcre2_lipi_malloc, pcre2_lipi_free, NULL);
    cc = g ? pcre2_compile_context_create(g) : NULL;
    if (!cc)
        TRY(LIPI_ENOMEM);
    uint32_t opts = PCRE2_UTF;
    const char *p = s->pattern;
    size_t plen = s->pattern_len;
    if (s->is_regex) {
        TRY(translate_pattern(s->pattern, s->pattern_len, &pat));
        p = pat.p;
        plen = pat.len;
        /* \C could match half a char and break the UTF-8 of the output. */
        opts |= PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C;
    } else {
        opts |= PCRE2_LITERAL;
    }
    int ecode;
    PCRE2_SIZE eoff;
    s->re = pcre2_compile((PCRE2_SPTR)(p ? p : ""), plen, opts, &ecode, &eoff, cc);
    if (!s->re) {
        /* 121 is PCRE2's "failed to allocate heap memory" (compile errors
         * have numbers but no names in pcre2.h). */
        if (ecode == 121)
            TRY(LIPI_ENOMEM);
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        TRY(lipi_error_set(err, LIPI_EREGEX, NULL, 0, (size_t)eoff,
                           "%s: cannot compile pattern at offset %zu: %s", jpath, (size_t)eoff,
                           (const char *)msg));
    }
    /* Without JIT (no memory, unsupported CPU) the interpreter still works. */
    pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE);
done:
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(g);
    lipi_buf_free(&pat);
    return st;
}

lipi_status lipi_ns_check_charsmap(const uint8_t *blob, size_t len, const char *jpath,
                                   lipi_error *err)
{
    if (len < 4)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                              "%s.precompiled_charsmap: expected at least 4 bytes (trie size), "
                              "found %zu",
                              jpath, len);
    uint32_t trie = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                    (uint32_t)blob[3] << 24;
    if (trie % 4 != 0 || trie > len - 4)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                              "%s.precompiled_charsmap: expected a trie size that is a multiple "
                              "of 4 and at most %zu, found %u",
                              jpath, len - 4, (unsigned)trie);
    size_t pool = len - 4 - trie;
    size_t bad = lipi_utf8_valid_prefix((const char *)blob + 4 + trie, pool);
    if (bad < pool)
        return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 4 + trie + bad,
                              "%s.precompiled_charsmap: expected UTF-8 replacements, found byte "
                              "0x%02x at %zu",
                              jpath, blob[4 + trie + bad], 4 + trie + bad);
    return LIPI_OK;
}

/* Appends the ops of a step (flattening Sequences). */
static lipi_status add_op(lipi_normalizer *n, size_t *cap, norm_op op)
{
    void *p = n->ops;
    lipi_status st = lipi_grow(&p, cap, n->n_ops + 1, sizeof op);
    n->ops = p;
    if (st == LIPI_OK)
        n->ops[n->n_ops++] = op;
    return st;
}

static lipi_status add_ops(lipi_normalizer *n, size_t *cap, const lipi_ns_step *s)
{
    lipi_status st = LIPI_OK;
    norm_op op = {.step = s};
    switch (s->kind) {
    case LIPI_NS_SEQUENCE:
        for (size_t i = 0; i < s->n_children; i++)
            TRY(add_ops(n, cap, &s->children[i]));
        return LIPI_OK;
    case LIPI_NS_NFC: op.kind = OP_NF, op.form = NF_C; break;
    case LIPI_NS_NFD: op.kind = OP_NF, op.form = NF_D; break;
    case LIPI_NS_NFKC: op.kind = OP_NF, op.form = NF_KC; break;
    case LIPI_NS_NFKD: op.kind = OP_NF, op.form = NF_KD; break;
    case LIPI_NS_LOWERCASE: op.kind = OP_LOWERCASE; break;
    case LIPI_NS_STRIP_ACCENTS: op.kind = OP_FILTER_MARKS; break;
    case LIPI_NS_NMT: op.kind = OP_NMT; break;
    case LIPI_NS_BYTELEVEL: op.kind = OP_BYTELEVEL; break;
    case LIPI_NS_REPLACE: op.kind = OP_REPLACE; break;
    case LIPI_NS_PREPEND: op.kind = OP_PREPEND; break;
    case LIPI_NS_STRIP: op.kind = OP_STRIP; break;
    case LIPI_NS_PRECOMPILED:
        op.kind = s->longest_match ? OP_SPM_CHARSMAP : OP_PRECOMPILED;
        break;
    case LIPI_NS_BERT: {
        bool strip = s->strip_accents == 1 || (s->strip_accents < 0 && s->lowercase);
        if (s->clean_text)
            TRY(add_op(n, cap, (norm_op){.kind = OP_BERT_CLEAN, .step = s}));
        if (s->handle_chinese_chars)
            TRY(add_op(n, cap, (norm_op){.kind = OP_BERT_CJK, .step = s}));
        if (strip) {
            TRY(add_op(n, cap, (norm_op){.kind = OP_NF, .form = NF_D, .step = s}));
            TRY(add_op(n, cap, (norm_op){.kind = OP_FILTER_MN, .step = s}));
        }
        if (s->lowercase)
            TRY(add_op(n, cap, (norm_op){.kind = OP_LOWERCASE, .step = s}));
        return LIPI_OK;
    }
    }
    TRY(add_op(n, cap, op));
done:
    return st;
}

static bool single_char_replace(const norm_op *op)
{
    const lipi_ns_step *s = op->step;
    if (op->kind != OP_REPLACE || s->is_regex || s->pattern_len == 0)
        return false;
    return u8len((unsigned char)s->pattern[0]) == s->pattern_len;
}

/* Composes ops[a..b) (single-char String Replaces) into one char map. */
static lipi_status fuse_charmap(norm_op *ops, size_t a, size_t b, norm_op *out)
{
    lipi_status st = LIPI_OK;
    typedef struct {
        uint32_t cp;
        lipi_buf rep;
    } ent;
    ent *e = NULL;
    size_t ne = 0, cap = 0;
    lipi_buf tmp = {0}, pool = {0};
    for (size_t i = a; i < b; i++) {
        const lipi_ns_step *s = ops[i].step;
        size_t l;
        uint32_t from = u8get(s->pattern, &l);
        bool seen = false;
        for (size_t k = 0; k < ne; k++) {
            tmp.len = 0;
            TRY(lipi_buf_reserve(&tmp, 0));
            for (size_t p = 0; p < e[k].rep.len;) {
                size_t cl;
                uint32_t c = u8get(e[k].rep.p + p, &cl);
                if (c == from)
                    TRY(lipi_buf_append(&tmp, s->content, s->content_len));
                else
                    TRY(lipi_buf_append(&tmp, e[k].rep.p + p, cl));
                p += cl;
            }
            e[k].rep.len = 0;
            TRY(lipi_buf_append(&e[k].rep, tmp.p, tmp.len));
            seen = seen || e[k].cp == from;
        }
        if (!seen) {
            void *p = e;
            TRY(lipi_grow(&p, &cap, ne + 1, sizeof *e));
            e = p;
            e[ne] = (ent){from, {0}};
            ne++;
            TRY(lipi_buf_append(&e[ne - 1].rep, s->content, s->content_len));
        }
    }
    out->map = lipi_calloc(ne ? ne : 1, sizeof *out->map);
    if (!out->map)
        TRY(LIPI_ENOMEM);
    for (size_t k = 0; k < ne; k++) {
        if (pool.len > UINT32_MAX - e[k].rep.len)
            TRY(LIPI_ENOMEM);
        out->map[k] = (cmap_entry){e[k].cp, (uint32_t)pool.len, (uint32_t)e[k].rep.len};
        TRY(lipi_buf_append(&pool, e[k].rep.p ? e[k].rep.p : "", e[k].rep.len));
    }
    TRY(lipi_buf_reserve(&pool, 0));
    /* Sort by code point (few entries). */
    for (size_t i = 1; i < ne; i++) {
        cmap_entry x = out->map[i];
        size_t j = i;
        while (j > 0 && out->map[j - 1].cp > x.cp) {
            out->map[j] = out->map[j - 1];
            j--;
        }
        out->map[j] = x;
    }
    out->n_map = ne;
    out->pool = pool.p;
    pool.p = NULL;
    out->kind = OP_CHARMAP;
done:
    if (st != LIPI_OK) {
        lipi_free(out->map); /* the caller drops *out on failure */
        out->map = NULL;
    }
    for (size_t k = 0; k < ne; k++)
        lipi_buf_free(&e[k].rep);
    lipi_free(e);
    lipi_buf_free(&tmp);
    lipi_buf_free(&pool);
    return st;
}

static lipi_status fuse_ops(lipi_normalizer *n)
{
    lipi_status st = LIPI_OK;
    size_t w = 0;
    for (size_t i = 0; i < n->n_ops;) {
        size_t j = i;
        while (j < n->n_ops && single_char_replace(&n->ops[j]))
            j++;
        if (j - i >= 2) {
            norm_op f = {.step = n->ops[i].step};
            TRY(fuse_charmap(n->ops, i, j, &f));
            n->ops[w++] = f;
            i = j;
        } else {
            n->ops[w++] = n->ops[i++];
        }
    }
    n->n_ops = w;
done:
    return st;
}

static bool is_replace(const norm_op *op, bool regex, const char *pattern, const char *content)
{
    const lipi_ns_step *s = op->step;
    return op->kind == OP_REPLACE && s->is_regex == regex &&
           s->pattern_len == strlen(pattern) && memcmp(s->pattern, pattern, s->pattern_len) == 0 &&
           s->content_len == strlen(content) && memcmp(s->content, content, s->content_len) == 0;
}

/* Finds the ops of SentencePiece's whitespace handling (lipi_rd_spm_build:
 * Replace \A +, Replace [ \u2581]+\z, Replace " {2,}" -> " ", Prepend
 * \u2581, Replace " " -> \u2581). */
static void find_spm_ws(lipi_normalizer *n)
{
    n->spm_ws = SIZE_MAX;
    for (size_t i = 0; i + 5 <= n->n_ops; i++) {
        const norm_op *o = &n->ops[i];
        if (is_replace(&o[0], true, "\\A +", "") &&
            is_replace(&o[1], true, "[ " SPM_META "]+\\z", "") &&
            is_replace(&o[2], true, " {2,}", " ") && o[3].kind == OP_PREPEND &&
            o[3].step->prepend_len == 3 && memcmp(o[3].step->prepend, SPM_META, 3) == 0 &&
            is_replace(&o[4], false, " ", SPM_META)) {
            n->spm_ws = i;
            return;
        }
    }
}

bool lipi_normalizer_has_spm_ws(const lipi_normalizer *n)
{
    return n && n->spm_ws != SIZE_MAX;
}

/* Whether the trie has a path for all of c's UTF-8 bytes from *pos; then
 * *pos is the node reached and *last the unit of its last step. */
static bool pc_walk_char(const pc_map *m, uint32_t c, size_t *pos, uint32_t *last)
{
    char b[4];
    size_t l = lipi_utf8_encode(c, b);
    for (size_t i = 0; i < l; i++)
        if (!(*last = pc_step(m, pos, (unsigned char)b[i])))
            return false;
    return true;
}

/* Marks every BMP char c2 whose bytes the trie has from node pos (the node
 * after c): UTF-8 lead bytes, then their continuation bytes. A byte that
 * leads no char (pc_no_match never trusts the pairs there) is not looked
 * at, and any lead byte of 4 sets astral_second. Returns whether some c2
 * is ASCII. */
static bool pc_mark_seconds(pc_map *m, uint64_t *pairs, uint32_t c, size_t pos)
{
    bool ascii = false;
    for (uint32_t b1 = 1; b1 < 0x100; b1++) {
        size_t p1 = pos;
        if ((b1 >= 0x80 && b1 < 0xC2) || !pc_step(m, &p1, (unsigned char)b1))
            continue;
        if (b1 < 0x80) {
            uint32_t k = pc_pair_bit(c, b1);
            pairs[k >> 6] |= UINT64_C(1) << (k & 63);
            ascii = true;
            continue;
        }
        if (b1 >= 0xF0) {
            m->astral_second = true;
            continue;
        }
        for (uint32_t b2 = 0x80; b2 < 0xC0; b2++) {
            size_t p2 = p1;
            if (!pc_step(m, &p2, (unsigned char)b2))
                continue;
            if (b1 < 0xE0) {
                uint32_t c2 = (b1 & 0x1F) << 6 | (b2 & 0x3F), k = pc_pair_bit(c, c2);
                pairs[k >> 6] |= UINT64_C(1) << (k & 63);
                continue;
            }
            for (uint32_t b3 = 0x80; b3 < 0xC0; b3++) {
                size_t p3 = p2;
                if (!pc_step(m, &p3, (unsigned char)b3))
                    continue;
                uint32_t c2 = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F);
                uint32_t k = pc_pair_bit(c, c2);
                pairs[k >> 6] |= UINT64_C(1) << (k & 63);
            }
        }
    }
    return ascii;
}

/* Points each Precompiled op at its (already validated) charsmap. */
static lipi_status view_charsmaps(lipi_normalizer *n)
{
    for (size_t i = 0; i < n->n_ops; i++) {
        const lipi_ns_step *s = n->ops[i].step;
        if (n->ops[i].kind != OP_PRECOMPILED && n->ops[i].kind != OP_SPM_CHARSMAP)
            continue;
        pc_map *m = &n->ops[i].pc;
        const uint8_t *b = s->charsmap;
        uint32_t trie = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                        (uint32_t)b[3] << 24;
        m->units = b + 4;
        m->n_units = trie / 4;
        m->pool = (const char *)b + 4 + trie;
        m->pool_len = s->charsmap_len - 4 - trie;
        if (n->ops[i].kind != OP_SPM_CHARSMAP || m->n_units == 0)
            continue;
        m->bmp_starts = lipi_calloc(3 * PC_BMP_WORDS + PC_PAIR_BITS / 64, sizeof *m->bmp_starts);
        if (!m->bmp_starts)
            return LIPI_ENOMEM;
        uint64_t *pass = m->bmp_starts + PC_BMP_WORDS, *alone = pass + PC_BMP_WORDS;
        uint64_t *pairs = alone + PC_BMP_WORDS;
        size_t root = pc_offset(pc_unit(m, 0));
        for (uint32_t c = 1; c < 0x10000; c++) {
            size_t pos = root;
            uint32_t last = 0;
            if ((c >= 0xD800 && c <= 0xDFFF) || !pc_walk_char(m, c, &pos, &last))
                continue;
            m->bmp_starts[c >> 6] |= UINT64_C(1) << (c & 63);
            /* The pairs of a char that is a key by itself are never asked. */
            if ((last >> 8) & 1)
                alone[c >> 6] |= UINT64_C(1) << (c & 63);
            else if (!pc_mark_seconds(m, pairs, c, pos))
                pass[c >> 6] |= UINT64_C(1) << (c & 63);
        }
        m->ascii_runs = true;
        for (unsigned c = 0x20; c < 0x7F; c++)
            if ((m->bmp_starts[c >> 6] & ~pass[c >> 6]) >> (c & 63) & 1)
                m->ascii_runs = false;
    }
    return LIPI_OK;
}

lipi_status lipi_ns_build(lipi_ns_step *root, lipi_normalizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t cap = 0;
    *out = NULL;
    lipi_normalizer *n = lipi_calloc(1, sizeof *n);
    if (!n) {
        lipi_ns_step_clear(root);
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    n->root = *root;
    memset(root, 0, sizeof *root);
    UErrorCode ec = U_ZERO_ERROR;
    n->nf[NF_C] = unorm2_getNFCInstance(&ec);
    n->nf[NF_D] = unorm2_getNFDInstance(&ec);
    n->nf[NF_KC] = unorm2_getNFKCInstance(&ec);
    n->nf[NF_KD] = unorm2_getNFKDInstance(&ec);
    if (U_FAILURE(ec))
        TRY(lipi_error_set(err, LIPI_EICU, NULL, 0, 0, "cannot load ICU normalization data: %s",
                           u_errorName(ec)));
    TRY(add_ops(n, &cap, &n->root));
    TRY(fuse_ops(n));
    TRY(view_charsmaps(n));
    find_spm_ws(n);
    *out = n;
    n = NULL;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    lipi_normalizer_free(n);
    return st;
}

void lipi_normalizer_free(lipi_normalizer *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_ops; i++) {
        lipi_free(n->ops[i].map);
        lipi_free(n->ops[i].pool);
        lipi_free(n->ops[i].pc.bmp_starts);
    }
    lipi_free(n->ops);
    lipi_ns_step_clear(&n->root);
    lipi_free(n);
}

/* ======================================================================== */
/* Named normalizers                                                         */
/* ======================================================================== */

/* Drops ZWNJ/ZWJ between a letter or mark and something else: kept after a
 * mark (virama + ZWJ/ZWNJ: half forms, chillu, explicit virama), between
 * two letters/marks, and at the very start or end of the text (where a
 * SentencePiece charsmap, which sees no text edges, cannot drop it: lipi's
 * --export-spm then stays exact); both lookbehinds are one char wide so
 * Oniguruma accepts the pattern as PCRE2 does. */
static const char indic_joiners[] =
    "(?<=[^\\p{L}\\p{M}])[\\x{200C}\\x{200D}]|(?<=\\p{L})[\\x{200C}\\x{200D}](?=[^\\p{L}\\p{M}])";

/* Marks on Latin, Greek and Cyrillic letters only (after NFD). */
static const char latin_marks[] = "(?<=[\\p{Latin}\\p{Greek}\\p{Cyrillic}])\\p{Mn}+";

/* Zero of each script's decimal digits folded by fold_digits. */
static const uint32_t indic_zeros[] = {0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66,
                                       0x0BE6, 0x0C66, 0x0CE6, 0x0D66};

typedef struct {
    lipi_ns_step *v;
    size_t n, cap;
} step_list;

static lipi_status push_step(step_list *l, lipi_ns_step s)
{
    void *p = l->v;
    lipi_status st = lipi_grow(&p, &l->cap, l->n + 1, sizeof s);
    l->v = p;
    if (st == LIPI_OK)
        l->v[l->n++] = s;
    else
        lipi_ns_step_clear(&s);
    return st;
}

static lipi_status push_replace(step_list *l, bool regex, const char *pat, size_t plen,
                                const char *content, size_t clen, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_ns_step s = {.kind = LIPI_NS_REPLACE, .is_regex = regex};
    s.pattern = lipi_strndup(pat, plen);
    s.content = lipi_strndup(content, clen);
    s.pattern_len = plen;
    s.content_len = clen;
    if (!s.pattern || !s.content)
        TRY(LIPI_ENOMEM);
    TRY(lipi_ns_compile_replace(&s, "normalizer", err));
    st = push_step(l, s);
    memset(&s, 0, sizeof s);
done:
    lipi_ns_step_clear(&s);
    return st;
}

lipi_status lipi_normalizer_new(const char *name, const lipi_normalizer_options *opt,
                                lipi_normalizer **out, lipi_error *err)
{
    static const char *const names[] = {"none", "nfc", "nfd", "nfkc", "nfkd", "indic", "bert"};
    static const lipi_ns_kind forms[] = {LIPI_NS_SEQUENCE, LIPI_NS_NFC, LIPI_NS_NFD,
                                         LIPI_NS_NFKC, LIPI_NS_NFKD, LIPI_NS_NFC};
    lipi_status st = LIPI_OK;
    lipi_normalizer_options o = opt ? *opt : (lipi_normalizer_options){0};
    step_list l = {0};
    *out = NULL;
    size_t which = 0;
    while (which < sizeof names / sizeof *names && (!name || strcmp(name, names[which]) != 0))
        which++;
    if (which == sizeof names / sizeof *names)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "unknown normalizer \"%s\" (expected one of: none, nfc, nfd, nfkc, "
                              "nfkd, indic, bert)",
                              name ? name : "(null)");
    bool decomposed = false;
    if (which == 6) {
        TRY(push_step(&l, (lipi_ns_step){.kind = LIPI_NS_BERT, .clean_text = true,
                                         .handle_chinese_chars = true, .strip_accents = 0,
                                         .lowercase = o.lowercase}));
    } else if (which > 0) {
        TRY(push_step(&l, (lipi_ns_step){.kind = forms[which]}));
        decomposed = forms[which] == LIPI_NS_NFD || forms[which] == LIPI_NS_NFKD;
    }
    if (which == 5)
        TRY(push_replace(&l, true, indic_joiners, sizeof indic_joiners - 1, "", 0, err));
    if (o.fold_digits)
        for (size_t z = 0; z < sizeof indic_zeros / sizeof *indic_zeros; z++)
            for (uint32_t d = 0; d < 10; d++) {
                char from[4], to = (char)('0' + d);
                size_t k = lipi_utf8_encode(indic_zeros[z] + d, from);
                TRY(push_replace(&l, false, from, k, &to, 1, err));
            }
    if (o.strip_accents) {
        if (!decomposed)
            TRY(push_step(&l, (lipi_ns_step){.kind = LIPI_NS_NFD}));
        TRY(push_replace(&l, true, latin_marks, sizeof latin_marks - 1, "", 0, err));
        if (!decomposed)
            TRY(push_step(&l, (lipi_ns_step){.kind = LIPI_NS_NFC}));
    }
    if (o.lowercase && which != 6)
        TRY(push_step(&l, (lipi_ns_step){.kind = LIPI_NS_LOWERCASE}));
    lipi_ns_step root;
    if (l.n == 1) {
        root = l.v[0];
        lipi_free(l.v);
    } else {
        root = (lipi_ns_step){.kind = LIPI_NS_SEQUENCE, .children = l.v, .n_children = l.n};
    }
    l = (step_list){0};
    st = lipi_ns_build(&root, out, err);
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < l.n; i++)
        lipi_ns_step_clear(&l.v[i]);
    lipi_free(l.v);
    return st;
}

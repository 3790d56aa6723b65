/* The Unigram trainer (Kudo 2018), following SentencePiece's
 * unigram_model_trainer: seed pieces from a suffix array, EM with
 * forward-backward over the encoder's lattice, pruning by loss, final
 * vocabulary by score. See trainer/trainer.h for the algorithm's outline.
 *
 * Layout of the work:
 *   words    the distinct words (sorted by count, then bytes) with their
 *            counts and, under the grapheme guard, one flag per byte that
 *            says whether a cluster starts there;
 *   pieces   the seed pieces, each keeping its index for the whole run
 *            (EM and pruning only mark pieces dead), bytes in one arena;
 *   nodes    every allowed occurrence of every seed piece in every word,
 *            read once off the suffix array's intervals: a word's lattice
 *            is its live nodes, so no trie is ever rebuilt;
 *   E-step   words split in fixed blocks taken by the threads; each thread
 *            adds count * marginal in 64-bit fixed point into its own
 *            array, and integer sums do not depend on the order, so the
 *            result does not depend on the thread count. */
#include "trainer/trainer.h"
#include "encoder/encoder.h"
#include "trainer/unigram_impl.h"
#include "trainer/balance_impl.h"
#include "trainer/front_impl.h"

#include "tokenizer/base.h"
#include "tokenizer/base_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    MAX_THREADS = 64,
    WORD_BLOCK = 512,         /* words per E-step job */
    PIECE_BLOCK = 1024,       /* pieces per pruning job */
};

#define UNK_NODE UINT32_MAX
#define NO_FLAGS SIZE_MAX
#define WS_CP 0x2581u         /* "▁", SentencePiece's whitespace */
#define UNK_PENALTY 10.0      /* unknown characters score min_score - 10 */
#define MIN_EXPECTED 0.5      /* M-step drops pieces expected less often */
#define PENALTY_DELTA 0.0001  /* spacing of the scores given to required
                                 characters EM dropped */

void lipi_unigram_options_default(lipi_unigram_options *opt)
{
    memset(opt, 0, sizeof *opt);
    lipi_train_common_default(&opt->common);
    opt->common.character_coverage = 0.9995;
    opt->common.unk_token = "<unk>";
    opt->max_piece_length = 16;
    opt->seed_size = 1000000;
    opt->shrinking_factor = 0.75;
    opt->sub_iterations = 2;
    opt->sample_seed = 1;
    opt->parity_exponent = 4.0;
    opt->parity_mass = 1.0;
    opt->parity_others = 1.0;
}

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

static size_t thread_count(size_t want)
{
    return lipi_thread_count(want, MAX_THREADS);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Length of the UTF-8 sequence led by byte c (1 for a stray byte). */
static inline size_t u8len(unsigned char c)
{
    return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

static lipi_status oom(lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory training Unigram");
}

/* ------------------------------------------------------------------------ */
/* Jobs on threads                                                           */
/* ------------------------------------------------------------------------ */

/* Jobs run on lipi_parallel_for: job j (a block of words, pieces or
 * lines) writes only its own slice of the output, and `tid` (the worker)
 * picks the scratch. When job j fails every smaller job has run, so the
 * error returned is that of the smallest failing job, whatever the thread
 * count. */

/* ======================================================================== */
/* Words                                                                     */
/* ======================================================================== */

typedef struct {
    const char *s;
    uint32_t len;
    uint32_t nchars;
    uint64_t count;
    size_t goff; /* cluster-start flags at gb + goff (len + 1 of them), or
                    NO_FLAGS when every code point is its own cluster */
} word;

typedef struct {
    word *w;
    size_t n;
    uint8_t *gb;
    uint64_t total;      /* sum of counts (saturating) */
    double weight_chars; /* sum of count * nchars */
} word_set;

static void word_set_free(word_set *ws)
{
    lipi_free(ws->w);
    lipi_free(ws->gb);
    memset(ws, 0, sizeof *ws);
}

/* Cluster-start flags of s[0..len): f[i] = 1 where a cluster starts, and
 * f[len] = 1. Returns whether some cluster holds several code points. */
static lipi_status cluster_flags(const char *s, size_t len, uint8_t *f, size_t **bounds,
                                 size_t *cap, bool *multi, lipi_error *err)
{
    size_t n = 0, chars = 0;
    lipi_status st = lipi_graphemes(s, len, bounds, cap, &n, err);
    if (st != LIPI_OK)
        return st;
    memset(f, 0, len + 1);
    for (size_t k = 0; k <= n; k++)
        f[(*bounds)[k]] = 1;
    for (size_t i = 0; i < len; i += u8len((unsigned char)s[i]))
        chars++;
    *multi = n != chars;
    return LIPI_OK;
}

typedef struct {
    word_set *ws;
    size_t **bounds; /* per thread */
    size_t *caps;
} flags_job;

static lipi_status flags_run(void *ctx, size_t job, size_t tid, lipi_error *err)
{
    flags_job *fj = ctx;
    word_set *ws = fj->ws;
    size_t lo = job * WORD_BLOCK, hi = lo + WORD_BLOCK < ws->n ? lo + WORD_BLOCK : ws->n;
    for (size_t i = lo; i < hi; i++) {
        word *w = &ws->w[i];
        bool multi;
        lipi_status st = cluster_flags(w->s, w->len, ws->gb + w->goff, &fj->bounds[tid],
                                       &fj->caps[tid], &multi, err);
        if (st != LIPI_OK)
            return st;
        if (!multi)
            w->goff = NO_FLAGS;
    }
    return LIPI_OK;
}

/* Words from count entries: UTF-8 checked, over-long ones skipped, cluster
 * flags computed when guard is on. */
static lipi_status words_build(word_set *ws, const lipi_count_entry *e, size_t n, bool guard,
                               size_t threads, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    flags_job fj = {0};
    size_t gtotal = 0;
    memset(ws, 0, sizeof *ws);
    ws->w = lipi_calloc(n ? n : 1, sizeof *ws->w);
    if (!ws->w)
        return oom(err);
    for (size_t i = 0; i < n; i++) {
        if (e[i].len == 0 || e[i].len > LIPI_TRAIN_MAX_WORD_BYTES)
            continue;
        size_t bad = lipi_utf8_valid_prefix(e[i].word, e[i].len);
        if (bad != e[i].len)
            return lipi_error_set(err, LIPI_EFORMAT, NULL, 0, bad,
                                  "word %zu of the counts: expected UTF-8, found byte 0x%02x",
                                  i + 1, (unsigned char)e[i].word[bad]);
        word *w = &ws->w[ws->n++];
        w->s = e[i].word;
        w->len = (uint32_t)e[i].len;
        w->count = e[i].count;
        for (size_t k = 0; k < w->len; k += u8len((unsigned char)w->s[k]))
            w->nchars++;
        w->goff = guard ? gtotal : NO_FLAGS;
        gtotal += w->len + 1;
        ws->total = ws->total + w->count < ws->total ? UINT64_MAX : ws->total + w->count;
        ws->weight_chars += (double)w->count * w->nchars;
    }
    if (!guard || ws->n == 0)
        return LIPI_OK;
    ws->gb = lipi_malloc(gtotal);
    fj.bounds = lipi_calloc(threads, sizeof *fj.bounds);
    fj.caps = lipi_calloc(threads, sizeof *fj.caps);
    if (!ws->gb || !fj.bounds || !fj.caps) {
        st = oom(err);
        goto done;
    }
    fj.ws = ws;
    st = lipi_parallel_for((ws->n + WORD_BLOCK - 1) / WORD_BLOCK, threads, flags_run, &fj, err);
done:
    for (size_t t = 0; fj.bounds && t < threads; t++)
        lipi_free(fj.bounds[t]);
    lipi_free(fj.bounds);
    lipi_free(fj.caps);
    return st;
}

static inline const uint8_t *word_flags(const word_set *ws, const word *w)
{
    return w->goff == NO_FLAGS ? NULL : ws->gb + w->goff;
}

/* ======================================================================== */
/* Pieces                                                                    */
/* ======================================================================== */

/* Pieces keep their seed index for the whole run: EM and pruning only
 * clear `alive`, so per-piece arrays never need remapping. */
typedef struct {
    uint32_t off, len;  /* bytes in the arena */
    uint32_t ref_word;  /* a word with an occurrence the guard allows, and */
    uint32_t ref_pos;   /* its byte offset there (UINT32_MAX: one character) */
    double score;
    bool alive;
} piece;

typedef struct {
    piece *p;
    size_t n, cap;
    lipi_buf arena;
    double min_score, unk_score; /* over the live pieces; see pieces_rescore */
} piece_set;

static void pieces_free(piece_set *ps)
{
    lipi_free(ps->p);
    lipi_buf_free(&ps->arena);
    memset(ps, 0, sizeof *ps);
}

static lipi_status pieces_add(piece_set *ps, const char *s, size_t len, double score)
{
    if (ps->n == ps->cap) {
        void *p = ps->p;
        lipi_status st = lipi_grow(&p, &ps->cap, ps->n + 1, sizeof *ps->p);
        ps->p = p;
        if (st != LIPI_OK)
            return st;
    }
    if (ps->arena.len + len > UINT32_MAX)
        return LIPI_ENOMEM;
    lipi_status st = lipi_buf_append(&ps->arena, s, len);
    if (st != LIPI_OK)
        return st;
    ps->p[ps->n++] = (piece){(uint32_t)(ps->arena.len - len), (uint32_t)len, UINT32_MAX,
                             UINT32_MAX, score, true};
    return LIPI_OK;
}

static inline const char *piece_bytes(const piece_set *ps, size_t i)
{
    return ps->arena.p + ps->p[i].off;
}

/* The lowest live score, and the score of an unknown character below it. */
static void pieces_rescore(piece_set *ps)
{
    bool any = false;
    ps->min_score = 0.0;
    for (size_t i = 0; i < ps->n; i++)
        if (ps->p[i].alive && (!any || ps->p[i].score < ps->min_score)) {
            ps->min_score = ps->p[i].score;
            any = true;
        }
    ps->unk_score = ps->min_score - UNK_PENALTY;
}

static size_t pieces_alive(const piece_set *ps)
{
    size_t k = 0;
    for (size_t i = 0; i < ps->n; i++)
        k += ps->p[i].alive;
    return k;
}

/* ======================================================================== */
/* Lattices                                                                  */
/* ======================================================================== */

/* Every occurrence of a seed piece in every word that the grapheme guard
 * allows, found once (from the suffix array) and then only filtered: the
 * nodes of word i are v[off[i] .. off[i + 1]), sorted by position, then
 * length, the order a trie walk would insert them in. */
typedef struct {
    uint32_t piece;
    uint16_t pos, len; /* bytes */
} cnode;

typedef struct {
    cnode *v;
    size_t *off; /* words + 1 */
    size_t n, n_words;
} node_cache;

static void cache_free(node_cache *nc)
{
    lipi_free(nc->v);
    lipi_free(nc->off);
    memset(nc, 0, sizeof *nc);
}

/* Drops the nodes of dead pieces. */
static void cache_compact(node_cache *nc, const piece_set *ps, size_t n_words)
{
    size_t k = 0;
    for (size_t i = 0; i < n_words; i++) {
        size_t lo = nc->off[i], hi = nc->off[i + 1];
        nc->off[i] = k;
        for (size_t j = lo; j < hi; j++)
            if (ps->p[nc->v[j].piece].alive)
                nc->v[k++] = nc->v[j];
    }
    nc->off[n_words] = k;
    nc->n = k;
}

static int cnode_cmp(const void *a, const void *b)
{
    const cnode *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return (x->len > y->len) - (x->len < y->len);
}

/* Fills `lat` with bytes [start, end) of word i: the live pieces there,
 * scored by their score, and an unknown node (id UNK_NODE) on every code
 * point that no live one-character piece covers, as the encoder does. The
 * node of piece `skip` spanning all of [start, end) is left out (for
 * second-best segmentations) but still counts as a one-character piece. */
static lipi_status lattice_fill(const piece_set *ps, const node_cache *nc, const word *w, size_t i,
                                lipi_lattice *lat, size_t start, size_t end, uint32_t skip)
{
    lipi_status st = LIPI_OK;
    size_t k = nc->off[i], kend = nc->off[i + 1];
    lipi_lattice_reset(lat, end - start);
    while (k < kend && nc->v[k].pos < start)
        k++;
    for (size_t pos = start; pos < end;) {
        size_t cl = u8len((unsigned char)w->s[pos]);
        bool single = false;
        if (cl > end - pos)
            cl = end - pos;
        for (; k < kend && nc->v[k].pos == pos; k++) {
            const cnode *nd = &nc->v[k];
            const piece *q = &ps->p[nd->piece];
            if (!q->alive || pos + nd->len > end)
                continue;
            if (nd->len == cl)
                single = true;
            if (nd->piece == skip && pos == start && pos + nd->len == end)
                continue;
            TRY(lipi_lattice_insert(lat, pos - start, nd->len, nd->piece, q->score));
        }
        if (!single)
            TRY(lipi_lattice_insert(lat, pos - start, cl, UNK_NODE, ps->unk_score));
        pos += cl;
    }
done:
    return st;
}

/* Per-thread scratch for lattice jobs. */
typedef struct {
    lipi_lattice lat;
    double *marg;
    size_t marg_cap;
    int64_t *acc;     /* E-step: fixed-point expected counts per piece */
    uint64_t *freq;   /* pruning: Viterbi counts per piece */
    uint64_t *ltok;   /* parity pruning: Viterbi tokens per language */
    uint64_t *wfreq;  /* parity pruning: language-weighted Viterbi counts */
} scratch;

static void scratch_free(scratch *s, size_t n)
{
    for (size_t t = 0; s && t < n; t++) {
        lipi_lattice_free(&s[t].lat);
        lipi_free(s[t].marg);
        lipi_free(s[t].acc);
        lipi_free(s[t].freq);
        lipi_free(s[t].ltok);
        lipi_free(s[t].wfreq);
    }
    lipi_free(s);
}

/* ------------------------------------------------------------------------ */
/* E-step                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    const word_set *ws;
    const piece_set *ps;
    const node_cache *nc;
    scratch *sc;
    double scale;  /* fixed-point unit: expected counts are acc / scale */
    double *objs;  /* per job: sum of count * log Z */
} estep_job;

static lipi_status estep_run(void *ctx, size_t job, size_t tid, lipi_error *err)
{
    estep_job *ej = ctx;
    const word_set *ws = ej->ws;
    scratch *sc = &ej->sc[tid];
    size_t lo = job * WORD_BLOCK, hi = lo + WORD_BLOCK < ws->n ? lo + WORD_BLOCK : ws->n;
    double obj = 0.0;
    lipi_status st = LIPI_OK;
    for (size_t i = lo; i < hi; i++) {
        const word *w = &ws->w[i];
        double log_z;
        TRY(lattice_fill(ej->ps, ej->nc, w, i, &sc->lat, 0, w->len, UNK_NODE));
        if (sc->lat.n_nodes > sc->marg_cap) {
            void *p = sc->marg;
            TRY(lipi_grow(&p, &sc->marg_cap, sc->lat.n_nodes, sizeof *sc->marg));
            sc->marg = p;
        }
        TRY(lipi_lattice_marginals(&sc->lat, sc->marg, &log_z));
        double c = (double)w->count, cs = c * ej->scale;
        obj += c * log_z;
        for (size_t k = 0; k < sc->lat.n_nodes; k++) {
            uint32_t id = sc->lat.nodes[k].id;
            if (id != UNK_NODE)
                sc->acc[id] += (int64_t)(cs * sc->marg[k] + 0.5);
        }
    }
    ej->objs[job] = obj;
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    return st;
}

/* The fixed-point unit: a power of two, as fine as 2^-40 but such that no
 * sum of expectations (each at most sum(count * nchars)) can overflow. */
static double fixed_scale(const word_set *ws)
{
    double bound = ws->weight_chars + 1.0;
    int e = (int)floor(log2(ldexp(1.0, 62) / bound));
    if (e > 40)
        e = 40;
    return ldexp(1.0, e);
}

/* expected[i] for every piece (0 for dead ones); *objective as SentencePiece
 * logs it: minus the mean log likelihood per word occurrence. */
static lipi_status estep(const word_set *ws, const piece_set *ps, const node_cache *nc,
                         size_t threads, double *expected, double *objective, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t n_jobs = (ws->n + WORD_BLOCK - 1) / WORD_BLOCK;
    estep_job ej = {.ws = ws, .ps = ps, .nc = nc, .scale = fixed_scale(ws)};
    ej.sc = lipi_calloc(threads, sizeof *ej.sc);
    ej.objs = lipi_calloc(n_jobs ? n_jobs : 1, sizeof *ej.objs);
    if (!ej.sc || !ej.objs) {
        st = oom(err);
        goto done;
    }
    for (size_t t = 0; t < threads; t++) {
        ej.sc[t].acc = lipi_calloc(ps->n ? ps->n : 1, sizeof *ej.sc[t].acc);
        if (!ej.sc[t].acc) {
            st = oom(err);
            goto done;
        }
    }
    TRY(lipi_parallel_for(n_jobs, threads, estep_run, &ej, err));
    for (size_t i = 0; i < ps->n; i++) {
        int64_t sum = 0;
        for (size_t t = 0; t < threads; t++)
            sum += ej.sc[t].acc[i];
        expected[i] = (double)sum / ej.scale;
    }
    double obj = 0.0;
    for (size_t j = 0; j < n_jobs; j++)
        obj += ej.objs[j];
    *objective = ws->total ? -obj / (double)ws->total : 0.0;
done:
    scratch_free(ej.sc, threads);
    lipi_free(ej.objs);
    return st;
}

/* ------------------------------------------------------------------------ */
/* M-step                                                                    */
/* ------------------------------------------------------------------------ */

double lipi_unigram_digamma(double x)
{
    double r = 0.0;
    for (; x < 7; ++x)
        r -= 1 / x;
    x -= 1.0 / 2.0;
    const double xx = 1.0 / x, xx2 = xx * xx, xx4 = xx2 * xx2;
    r += log(x) + (1.0 / 24.0) * xx2 - (7.0 / 960.0) * xx4 + (31.0 / 8064.0) * xx4 * xx2 -
         (127.0 / 30720.0) * xx4 * xx4;
    return r;
}

size_t lipi_unigram_m_step(const double *expected, size_t n, double *score, bool *kept)
{
    double sum = 0.0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        kept[i] = expected[i] >= MIN_EXPECTED;
        if (kept[i]) {
            sum += expected[i];
            k++;
        }
    }
    /* Bayesian EM with a sparse (Dirichlet process) prior, as SentencePiece:
     * digamma instead of log. */
    double logsum = lipi_unigram_digamma(sum);
    for (size_t i = 0; i < n; i++)
        score[i] = kept[i] ? lipi_unigram_digamma(expected[i]) - logsum : 0.0;
    return k;
}

/* The M-step on the live pieces. */
static void mstep(piece_set *ps, const double *expected, double *score, bool *kept)
{
    lipi_unigram_m_step(expected, ps->n, score, kept);
    for (size_t i = 0; i < ps->n; i++) {
        ps->p[i].alive = ps->p[i].alive && kept[i];
        if (ps->p[i].alive)
            ps->p[i].score = score[i];
    }
    pieces_rescore(ps);
}

/* ======================================================================== */
/* Pruning                                                                   */
/* ======================================================================== */

/* Parity-aware pruning (docs/FAIRNESS.md): each word's language, the code
 * points per language, and the loss weights of the current pruning. */
typedef struct {
    const lipi_balance *bal;
    lipi_prune_params par;
    size_t n_langs;
    uint16_t *wlang;
    uint64_t *chars, *tok, *wt;
} fair_prune;

typedef struct {
    const word_set *ws;
    const piece_set *ps;
    const node_cache *nc;
    scratch *sc;
    /* per piece: 0 drop (its best segmentation is split, or it is dead),
     * 1 keep (no alternative), 2 candidate with alternatives
     * alt[slot[i] * alt_stride .. + alen[i]] */
    uint8_t *kind;
    uint32_t *slot;    /* rank of piece i among the live ones */
    uint32_t *alt;
    uint8_t *alen;
    size_t alt_stride; /* the most code points of a piece */
    const fair_prune *fp; /* NULL: plain pruning */
    bool weighted;        /* this pass sums wfreq only */
} prune_job;

static lipi_status prune_alt_run(void *ctx, size_t job, size_t tid, lipi_error *err)
{
    prune_job *pj = ctx;
    const piece_set *ps = pj->ps;
    lipi_lattice *lat = &pj->sc[tid].lat;
    size_t lo = job * PIECE_BLOCK, hi = lo + PIECE_BLOCK < ps->n ? lo + PIECE_BLOCK : ps->n;
    lipi_status st = LIPI_OK;
    for (size_t i = lo; i < hi; i++) {
        const piece *q = &ps->p[i];
        bool found;
        pj->alen[i] = 0;
        pj->kind[i] = 0;
        if (!q->alive)
            continue;
        if (q->ref_word == UINT32_MAX) {
            /* One character: nothing else spells it. */
            pj->kind[i] = 1;
            continue;
        }
        /* The piece's own text, as it occurs in a word (with that word's
         * clusters), segmented with and without the piece. */
        const word *w = &pj->ws->w[q->ref_word];
        size_t a = q->ref_pos, b = a + q->len;
        TRY(lattice_fill(ps, pj->nc, w, q->ref_word, lat, a, b, UNK_NODE));
        TRY(lipi_lattice_viterbi(lat, &found));
        if (!found || lat->path_len >= 2)
            continue; /* never chosen as itself: removing it loses nothing */
        TRY(lattice_fill(ps, pj->nc, w, q->ref_word, lat, a, b, (uint32_t)i));
        TRY(lipi_lattice_viterbi(lat, &found));
        if (!found || lat->path_len == 0) {
            pj->kind[i] = 1;
            continue;
        }
        pj->kind[i] = 2;
        pj->alen[i] = (uint8_t)lat->path_len;
        for (size_t k = 0; k < lat->path_len; k++)
            pj->alt[pj->slot[i] * pj->alt_stride + k] = lat->nodes[lat->path[k]].id;
    }
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    return st;
}

static lipi_status viterbi_run(void *ctx, size_t job, size_t tid, lipi_error *err)
{
    prune_job *pj = ctx;
    const word_set *ws = pj->ws;
    scratch *sc = &pj->sc[tid];
    size_t lo = job * WORD_BLOCK, hi = lo + WORD_BLOCK < ws->n ? lo + WORD_BLOCK : ws->n;
    lipi_status st = LIPI_OK;
    for (size_t i = lo; i < hi; i++) {
        const word *w = &ws->w[i];
        bool found;
        TRY(lattice_fill(pj->ps, pj->nc, w, i, &sc->lat, 0, w->len, UNK_NODE));
        TRY(lipi_lattice_viterbi(&sc->lat, &found));
        if (pj->weighted) {
            uint64_t c = w->count * pj->fp->wt[pj->fp->wlang[i]];
            for (size_t k = 0; k < sc->lat.path_len; k++) {
                uint32_t id = sc->lat.nodes[sc->lat.path[k]].id;
                if (id != UNK_NODE)
                    sc->wfreq[id] += c;
            }
            continue;
        }
        if (pj->fp)
            sc->ltok[pj->fp->wlang[i]] += w->count * sc->lat.path_len;
        for (size_t k = 0; k < sc->lat.path_len; k++) {
            uint32_t id = sc->lat.nodes[sc->lat.path[k]].id;
            if (id != UNK_NODE)
                sc->freq[id] += w->count;
        }
    }
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    return st;
}

static void fair_free(fair_prune *fp)
{
    lipi_free(fp->wlang);
    lipi_free(fp->chars);
    lipi_free(fp->tok);
    lipi_free(fp->wt);
}

/* Each word's language and the code points of each language. */
static lipi_status fair_start(fair_prune *fp, const lipi_unigram_options *opt,
                              const word_set *ws, lipi_error *err)
{
    const lipi_balance *bal = opt->common.balance;
    fp->bal = bal;
    fp->par = (lipi_prune_params){opt->parity_exponent, opt->parity_mass, opt->parity_others};
    fp->n_langs = lipi_balance_n_langs(bal);
    fp->wlang = lipi_calloc(ws->n ? ws->n : 1, sizeof *fp->wlang);
    fp->chars = lipi_calloc(fp->n_langs, sizeof *fp->chars);
    fp->tok = lipi_calloc(fp->n_langs, sizeof *fp->tok);
    fp->wt = lipi_calloc(fp->n_langs, sizeof *fp->wt);
    if (!fp->wlang || !fp->chars || !fp->tok || !fp->wt)
        return oom(err);
    for (size_t i = 0; i < ws->n; i++) {
        const word *w = &ws->w[i];
        fp->wlang[i] = (uint16_t)lipi_balance_lang_of(bal, w->s, w->len);
        fp->chars[fp->wlang[i]] += w->count * w->nchars;
    }
    return LIPI_OK;
}

/* After the plain Viterbi pass: the languages' tokens give the loss
 * weights, and a second pass sums the weighted piece counts. */
static lipi_status fair_weigh(prune_job *pj, size_t threads, lipi_error *err)
{
    fair_prune *fp = (fair_prune *)pj->fp;
    for (size_t l = 0; l < fp->n_langs; l++) {
        fp->tok[l] = 0;
        for (size_t t = 0; t < threads; t++)
            fp->tok[l] += pj->sc[t].ltok[l];
    }
    lipi_balance_prune_weights(fp->bal, fp->tok, fp->chars, &fp->par, fp->wt);
    pj->weighted = true;
    lipi_status st = lipi_parallel_for((pj->ws->n + WORD_BLOCK - 1) / WORD_BLOCK, threads,
                                       viterbi_run, pj, err);
    pj->weighted = false;
    return st;
}

static uint64_t fair_wfreq(const prune_job *pj, size_t threads, size_t i)
{
    uint64_t f = 0;
    for (size_t t = 0; t < threads; t++)
        f += pj->sc[t].wfreq[i];
    return f;
}

typedef struct {
    size_t i;
    double loss;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->loss != y->loss)
        return x->loss > y->loss ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* SentencePiece's PruneSentencePieces: keeps the pieces whose removal
 * would cost the most likelihood, down to `target` live pieces. A piece's
 * loss assumes all its uses (in the Viterbi segmentations of the words) go
 * to its second-best segmentation. */
static lipi_status prune(const word_set *ws, piece_set *ps, const node_cache *nc, size_t target,
                         size_t max_chars, size_t threads, const fair_prune *fp, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t n = ps->n, n_alive = 0;
    prune_job pj = {.ws = ws, .ps = ps, .nc = nc, .alt_stride = max_chars, .fp = fp};
    uint64_t *freq = NULL;
    cand *cands = NULL;
    size_t n_cand = 0, n_kept = 0;

    pj.slot = lipi_calloc(n ? n : 1, sizeof *pj.slot);
    if (!pj.slot) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (ps->p[i].alive)
            pj.slot[i] = (uint32_t)n_alive++;
    pj.sc = lipi_calloc(threads, sizeof *pj.sc);
    pj.kind = lipi_calloc(n ? n : 1, 1);
    pj.alen = lipi_calloc(n ? n : 1, 1);
    pj.alt = lipi_calloc(n_alive ? n_alive : 1, pj.alt_stride * sizeof *pj.alt);
    freq = lipi_calloc(n ? n : 1, sizeof *freq);
    cands = lipi_calloc(n_alive ? n_alive : 1, sizeof *cands);
    if (!pj.sc || !pj.kind || !pj.alen || !pj.alt || !freq || !cands) {
        st = oom(err);
        goto done;
    }
    for (size_t t = 0; t < threads; t++) {
        pj.sc[t].freq = lipi_calloc(n ? n : 1, sizeof *pj.sc[t].freq);
        if (!pj.sc[t].freq) {
            st = oom(err);
            goto done;
        }
        if (fp) {
            pj.sc[t].ltok = lipi_calloc(fp->n_langs, sizeof *pj.sc[t].ltok);
            pj.sc[t].wfreq = lipi_calloc(n ? n : 1, sizeof *pj.sc[t].wfreq);
            if (!pj.sc[t].ltok || !pj.sc[t].wfreq) {
                st = oom(err);
                goto done;
            }
        }
    }
    TRY(lipi_parallel_for((n + PIECE_BLOCK - 1) / PIECE_BLOCK, threads, prune_alt_run, &pj, err));
    TRY(lipi_parallel_for((ws->n + WORD_BLOCK - 1) / WORD_BLOCK, threads, viterbi_run, &pj, err));
    if (fp)
        TRY(fair_weigh(&pj, threads, err));

    double vsum = 0.0, sum = 0.0;
    for (size_t i = 0; i < ws->n; i++)
        vsum += (double)ws->w[i].count * (fp ? (double)fp->wt[fp->wlang[i]] : 1.0);
    for (size_t i = 0; i < n; i++) {
        for (size_t t = 0; t < threads; t++)
            freq[i] += pj.sc[t].freq[i];
        sum += (double)freq[i];
    }
    double logsum = log(sum);
    for (size_t i = 0; i < n; i++) {
        piece *q = &ps->p[i];
        if (!q->alive)
            continue;
        if (freq[i] == 0 || pj.kind[i] == 0) {
            q->alive = false;
            continue;
        }
        if (pj.kind[i] == 1) {
            n_kept++;
            continue;
        }
        double fi = (double)freq[i];
        size_t na = pj.alen[i];
        const uint32_t *alt = pj.alt + pj.slot[i] * pj.alt_stride;
        /* The piece's uses all go to its alternatives: their counts grow by
         * freq[i] and the total by freq[i] * (na - 1). */
        double f = fp ? (double)fair_wfreq(&pj, threads, i) / vsum : fi / vsum;
        double logprob_sp = log(fi) - logsum;
        double logsum_alt = log(sum + fi * (double)(na - 1));
        double logprob_alt = 0.0;
        for (size_t k = 0; k < na; k++) {
            double fa = alt[k] == UNK_NODE ? 0.0 : (double)freq[alt[k]];
            logprob_alt += log(fa + fi) - logsum_alt;
        }
        cands[n_cand++] = (cand){i, f * (logprob_sp - logprob_alt)};
        q->alive = false;
    }
    qsort(cands, n_cand, sizeof *cands, cand_cmp);
    for (size_t k = 0; k < n_cand && n_kept < target; k++, n_kept++)
        ps->p[cands[k].i].alive = true;
    pieces_rescore(ps);
done:
    scratch_free(pj.sc, threads);
    lipi_free(pj.slot);
    lipi_free(pj.kind);
    lipi_free(pj.alen);
    lipi_free(pj.alt);
    lipi_free(freq);
    lipi_free(cands);
    return st;
}

/* ======================================================================== */
/* Characters and seeds                                                      */
/* ======================================================================== */

typedef lipi_char_count char_freq;

/* A table over code points, 0 where nothing was stored: 256-entry blocks
 * allocated on the first store, so small inputs stay small. */
typedef struct {
    uint64_t *blk[0x1100];
} cp_table;

static inline uint64_t cpt_get(const cp_table *t, uint32_t cp)
{
    const uint64_t *b = t->blk[cp >> 8];
    return b ? b[cp & 255] : 0;
}

static lipi_status cpt_slot(cp_table *t, uint32_t cp, uint64_t **slot)
{
    uint64_t **b = &t->blk[cp >> 8];
    if (!*b && !(*b = lipi_calloc(256, sizeof **b)))
        return LIPI_ENOMEM;
    *slot = &(*b)[cp & 255];
    return LIPI_OK;
}

static void cpt_free(cp_table *t)
{
    for (size_t i = 0; t && i < 0x1100; i++)
        lipi_free(t->blk[i]);
    lipi_free(t);
}

/* Every code point with its weighted count, sorted by count (descending)
 * then code point; *n_req of them (a prefix) are the required characters:
 * the fewest that reach `coverage` of all characters. */
static lipi_status char_stats(const word_set *ws, double coverage, char_freq **out, size_t *n_out,
                              size_t *n_req, lipi_error *err)
{
    cp_table *cnt = lipi_calloc(1, sizeof *cnt);
    char_freq *cf = NULL;
    size_t n = 0;
    if (!cnt)
        return oom(err);
    for (size_t i = 0; i < ws->n; i++) {
        const word *w = &ws->w[i];
        for (size_t k = 0; k < w->len;) {
            uint32_t cp;
            uint64_t *c;
            size_t l = lipi_utf8_decode(w->s + k, w->len - k, &cp);
            if (cpt_slot(cnt, cp, &c) != LIPI_OK) {
                cpt_free(cnt);
                return oom(err);
            }
            n += *c == 0;
            *c = *c + w->count < *c ? UINT64_MAX : *c + w->count;
            k += l;
        }
    }
    cf = lipi_calloc(n ? n : 1, sizeof *cf);
    if (!cf) {
        cpt_free(cnt);
        return oom(err);
    }
    n = 0;
    for (uint32_t b = 0; b < 0x1100; b++)
        for (uint32_t j = 0; cnt->blk[b] && j < 256; j++)
            if (cnt->blk[b][j])
                cf[n++] = (char_freq){b << 8 | j, cnt->blk[b][j]};
    cpt_free(cnt);
    qsort(cf, n, sizeof *cf, lipi_char_count_cmp);
    *out = cf;
    *n_out = n;
    *n_req = lipi_train_required_chars(cf, n, coverage);
    return LIPI_OK;
}

/* Whether the grapheme guard allows h code points at text position p
 * (cf: cluster-start flags per position, the one after the last included):
 * whole clusters, or a part of one cluster. */
static inline bool occ_ok(const uint8_t *cf, size_t p, size_t h)
{
    if (cf[p] && cf[p + h])
        return true;
    for (size_t d = 1; d < h; d++)
        if (cf[p + d])
            return false;
    return true;
}

typedef struct {
    uint64_t score;
    uint32_t lb, rb; /* suffix-array rows of its occurrences */
    uint32_t len;    /* code points */
} seed_cand;

/* Score descending, then the substring's bytes (the suffix-array row order
 * with a prefix first is exactly that: see make_seeds). */
static int seed_cmp(const void *a, const void *b)
{
    const seed_cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->lb != y->lb)
        return x->lb < y->lb ? -1 : 1;
    return (x->len > y->len) - (x->len < y->len);
}

typedef struct {
    seed_cand *c;
    size_t n, cap, keep;
    uint64_t floor; /* candidates below it can no longer make the cut */
} seed_heap;

/* Adds a candidate, cutting back to the best `keep` when the buffer fills. */
static lipi_status seeds_push(seed_heap *h, seed_cand c)
{
    if (c.score < h->floor || h->keep == 0)
        return LIPI_OK;
    if (h->n == h->cap) {
        if (h->n)
            qsort(h->c, h->n, sizeof *h->c, seed_cmp);
        if (h->n > h->keep) {
            h->n = h->keep;
            h->floor = h->c[h->n - 1].score;
            if (c.score < h->floor)
                return LIPI_OK;
        }
        if (h->n == h->cap) {
            void *p = h->c;
            lipi_status st = lipi_grow(&p, &h->cap, h->n + 1, sizeof *h->c);
            h->c = p;
            if (st != LIPI_OK)
                return st;
        }
    }
    h->c[h->n++] = c;
    return LIPI_OK;
}

/* The suffix-array text of the words and what each position came from. */
typedef struct {
    size_t n, n_seg, n_words;
    int32_t *text, *sa, *lcp;
    uint32_t *pos_word;  /* word of each position */
    uint16_t *byte_off;  /* byte offset in that word (of the character, or
                            for a separator, of where it stands) */
    uint8_t *cflag;      /* a cluster starts at that character */
    uint8_t *seg_start;  /* a segment starts there */
} sa_text;

static void sa_text_free(sa_text *t)
{
    lipi_free(t->text);
    lipi_free(t->sa);
    lipi_free(t->lcp);
    lipi_free(t->pos_word);
    lipi_free(t->byte_off);
    lipi_free(t->cflag);
    lipi_free(t->seg_start);
    memset(t, 0, sizeof *t);
}

/* Builds the text: a word is cut into segments at characters that are not
 * required, and each segment ends with a separator of its own, smaller
 * than every character, so no common prefix runs across segments. Ranks
 * of characters follow code point order. Words are taken by count until
 * the text would reach 2^31 positions. */
static lipi_status sa_text_build(sa_text *t, const word_set *ws, const cp_table *rank_of,
                                 size_t n_req)
{
    size_t n = 0, n_seg = 0, n_words = 0;
    for (size_t i = 0; i < ws->n; i++) {
        const word *w = &ws->w[i];
        size_t add = 0, segs = 0;
        bool in_seg = false;
        for (size_t k = 0; k < w->len;) {
            uint32_t cp;
            k += lipi_utf8_decode(w->s + k, w->len - k, &cp);
            if (cpt_get(rank_of, cp)) {
                add++;
                in_seg = true;
            } else if (in_seg) {
                segs++;
                in_seg = false;
            }
        }
        segs += in_seg;
        if (n + add + segs >= (size_t)INT32_MAX - 1 || n_seg + segs + n_req >= (size_t)INT32_MAX)
            break;
        n += add + segs;
        n_seg += segs;
        n_words++;
    }
    t->n = n;
    t->n_seg = n_seg;
    t->n_words = n_words;
    t->text = lipi_calloc(n + 1, sizeof *t->text);
    t->sa = lipi_calloc(n + 1, sizeof *t->sa);
    t->lcp = lipi_calloc(n + 1, sizeof *t->lcp);
    t->pos_word = lipi_calloc(n + 1, sizeof *t->pos_word);
    t->byte_off = lipi_calloc(n + 1, sizeof *t->byte_off);
    t->cflag = lipi_calloc(n + 1, 1);
    t->seg_start = lipi_calloc(n + 1, 1);
    if (!t->text || !t->sa || !t->lcp || !t->pos_word || !t->byte_off || !t->cflag ||
        !t->seg_start)
        return LIPI_ENOMEM;
    size_t p = 0, seg = 0;
    for (size_t i = 0; i < n_words; i++) {
        const word *w = &ws->w[i];
        const uint8_t *f = word_flags(ws, w);
        bool in_seg = false;
        for (size_t k = 0; k < w->len;) {
            uint32_t cp;
            size_t l = lipi_utf8_decode(w->s + k, w->len - k, &cp);
            uint64_t r = cpt_get(rank_of, cp); /* rank + 1, 0: not required */
            if (r || in_seg) {
                bool sep = r == 0;
                t->seg_start[p] = !in_seg;
                t->text[p] = sep ? (int32_t)seg++ : (int32_t)(n_seg + (size_t)r - 1);
                t->cflag[p] = f ? f[k] : 1;
                t->pos_word[p] = (uint32_t)i;
                t->byte_off[p] = (uint16_t)k;
                p++;
                in_seg = !sep;
            }
            k += l;
        }
        if (in_seg) {
            t->text[p] = (int32_t)seg++;
            t->cflag[p] = 1;
            t->pos_word[p] = (uint32_t)i;
            t->byte_off[p] = (uint16_t)w->len;
            p++;
        }
    }
    return LIPI_OK;
}

/* The best substrings by frequency * length, best first (at most
 * opt->seed_size). The internal nodes of the suffix tree (LCP intervals)
 * are the substrings that occur at least twice with different
 * continuations; a segment that occurs nowhere else is a candidate too,
 * since one distinct word may stand for many occurrences. A substring's
 * frequency is the sum of the counts of the words it occurs in, over the
 * occurrences the grapheme guard allows. Since ranks follow code point
 * order, the suffix-array order of the substrings is their UTF-8 byte
 * order, which breaks ties of score. */
static lipi_status seed_candidates(const sa_text *t, const word_set *ws, int32_t ws_rank,
                                   const lipi_unigram_options *opt, seed_heap *heap)
{
    lipi_status st = LIPI_OK;
    size_t n = t->n, maxlen = opt->max_piece_length;
    const int32_t *text = t->text, *sa = t->sa, *lcp = t->lcp;
    size_t *stack_lb = lipi_calloc(n + 1, sizeof *stack_lb);
    int32_t *stack_h = lipi_calloc(n + 1, sizeof *stack_h);
    if (!stack_lb || !stack_h) {
        st = LIPI_ENOMEM;
        goto done;
    }
    /* Bottom-up traversal of the LCP intervals (Abouelhoda et al. 2004):
     * interval [l, rb] of depth h is a substring of h code points occurring
     * at sa[l .. rb]. */
    size_t top = 0;
    for (size_t i = 1; i <= n; i++) {
        int32_t cur = i < n ? lcp[i] : 0;
        size_t lb = i - 1;
        while (cur < stack_h[top]) {
            size_t h = (size_t)stack_h[top], l = stack_lb[top], rb = i - 1;
            top--;
            lb = l;
            if (h < 2 || h > maxlen)
                continue;
            size_t p0 = (size_t)sa[l];
            bool ok = true;
            /* "▁" may only lead a piece (SentencePiece's split_by_whitespace). */
            for (size_t d = 1; d < h && ok; d++)
                ok = text[p0 + d] != ws_rank;
            if (!ok)
                continue;
            uint64_t freq = 0;
            for (size_t k = l; k <= rb; k++) {
                size_t p = (size_t)sa[k];
                if (occ_ok(t->cflag, p, h))
                    freq += ws->w[t->pos_word[p]].count;
            }
            if (freq)
                TRY(seeds_push(heap, (seed_cand){freq * h, (uint32_t)l, (uint32_t)rb, (uint32_t)h}));
        }
        if (cur > stack_h[top]) {
            top++;
            stack_h[top] = cur;
            stack_lb[top] = lb;
        }
    }
    /* Segments that occur once: leaves of the suffix tree. */
    for (size_t i = 0; i < n; i++) {
        size_t p = (size_t)sa[i], h = 0;
        if (!t->seg_start[p])
            continue;
        while (p + h < n && text[p + h] >= (int32_t)t->n_seg && h <= maxlen)
            h++;
        if (h < 2 || h > maxlen || (size_t)lcp[i] >= h || (i + 1 < n && (size_t)lcp[i + 1] >= h))
            continue;
        bool ok = true;
        for (size_t d = 1; d < h && ok; d++)
            ok = text[p + d] != ws_rank;
        if (!ok || !occ_ok(t->cflag, p, h))
            continue;
        uint64_t c = ws->w[t->pos_word[p]].count;
        if (c < 2)
            continue;
        TRY(seeds_push(heap, (seed_cand){c * h, (uint32_t)i, (uint32_t)i, (uint32_t)h}));
    }
    if (heap->n)
        qsort(heap->c, heap->n, sizeof *heap->c, seed_cmp);
    if (heap->n > heap->keep)
        heap->n = heap->keep;
done:
    lipi_free(stack_lb);
    lipi_free(stack_h);
    return st;
}

static lipi_status sort_run(void *ctx, size_t job, size_t tid, lipi_error *err)
{
    node_cache *nc = ctx;
    size_t lo = job * WORD_BLOCK, hi = lo + WORD_BLOCK < nc->n_words ? lo + WORD_BLOCK : nc->n_words;
    for (size_t i = lo; i < hi; i++)
        qsort(nc->v + nc->off[i], nc->off[i + 1] - nc->off[i], sizeof *nc->v, cnode_cmp);
    return LIPI_OK;
}

/* The nodes of every word: each character's one-character piece, and each
 * seed substring at every occurrence the guard allows; also sets each
 * substring piece's reference occurrence (its first allowed one). */
static lipi_status build_cache(const sa_text *t, const seed_cand *c, size_t n_c, size_t n_req,
                               const int32_t *req_of_rank, size_t threads, piece_set *ps,
                               node_cache *nc)
{
    size_t nw = t->n_words;
    nc->n_words = nw;
    size_t *fill = NULL;
    nc->off = lipi_calloc(nw + 1, sizeof *nc->off);
    fill = lipi_calloc(nw + 1, sizeof *fill);
    if (!nc->off || !fill) {
        lipi_free(fill);
        return LIPI_ENOMEM;
    }
    /* Two passes: count per word, then place. */
    for (int pass = 0; pass < 2; pass++) {
#define EMIT(p, h, id)                                                             \
    do {                                                                           \
        size_t w_ = t->pos_word[p];                                                \
        if (pass == 0)                                                             \
            nc->off[w_ + 1]++;                                                     \
        else                                                                       \
            nc->v[fill[w_]++] = (cnode){(id), t->byte_off[p],                      \
                                        (uint16_t)(t->byte_off[(p) + (h)] - t->byte_off[p])}; \
    } while (0)
        for (size_t p = 0; p < t->n; p++)
            if (t->text[p] >= (int32_t)t->n_seg)
                EMIT(p, 1, (uint32_t)req_of_rank[(size_t)t->text[p] - t->n_seg]);
        for (size_t j = 0; j < n_c; j++) {
            uint32_t id = (uint32_t)(n_req + j);
            for (size_t k = c[j].lb; k <= c[j].rb; k++) {
                size_t p = (size_t)t->sa[k];
                if (!occ_ok(t->cflag, p, c[j].len))
                    continue;
                if (pass == 0 && ps->p[id].ref_word == UINT32_MAX) {
                    ps->p[id].ref_word = t->pos_word[p];
                    ps->p[id].ref_pos = t->byte_off[p];
                }
                EMIT(p, c[j].len, id);
            }
        }
#undef EMIT
        if (pass == 0) {
            for (size_t i = 0; i < nw; i++)
                nc->off[i + 1] += nc->off[i];
            nc->n = nc->off[nw];
            nc->v = lipi_calloc(nc->n ? nc->n : 1, sizeof *nc->v);
            if (!nc->v) {
                lipi_free(fill);
                return LIPI_ENOMEM;
            }
            memcpy(fill, nc->off, (nw + 1) * sizeof *fill);
        }
    }
    lipi_free(fill);
    return lipi_parallel_for((nw + WORD_BLOCK - 1) / WORD_BLOCK, threads, sort_run, nc, NULL);
}

/* The seed pieces, as SentencePiece's MakeSeedSentencePieces: the required
 * characters (weighted by their count), then the seed substrings (weighted
 * by frequency * length), the weights turned into log probabilities; and
 * the lattice nodes of every word. Words past the suffix array's capacity
 * (the rarest; only beyond 2^31 characters of distinct words) are dropped
 * from ws. */
static lipi_status make_seeds(word_set *ws, const char_freq *cf, size_t n_req,
                              const lipi_unigram_options *opt, size_t threads, piece_set *ps,
                              node_cache *nc, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    cp_table *rank_of = NULL;
    int32_t *req_of_rank = NULL;
    uint32_t *cp_of = NULL;
    sa_text t = {0};
    seed_heap heap = {.keep = opt->seed_size};
    lipi_buf utf = {0};

    /* Ranks of the required characters in code point order (stored + 1). */
    rank_of = lipi_calloc(1, sizeof *rank_of);
    cp_of = lipi_calloc(n_req ? n_req : 1, sizeof *cp_of);
    req_of_rank = lipi_calloc(n_req ? n_req : 1, sizeof *req_of_rank);
    if (!rank_of || !cp_of || !req_of_rank) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n_req; i++) {
        uint64_t *slot;
        TRY(cpt_slot(rank_of, cf[i].cp, &slot));
        *slot = i + 1;
    }
    for (uint32_t b = 0, r = 0; b < 0x1100; b++)
        for (uint32_t j = 0; rank_of->blk[b] && j < 256; j++) {
            uint64_t *slot = &rank_of->blk[b][j];
            if (*slot) {
                cp_of[r] = b << 8 | j;
                req_of_rank[r] = (int32_t)(*slot - 1);
                *slot = ++r;
            }
        }
    TRY(sa_text_build(&t, ws, rank_of, n_req));
    ws->n = t.n_words;
    TRY(lipi_suffix_array(t.text, t.n, (int32_t)(t.n_seg + n_req), t.sa));
    TRY(lipi_lcp_array(t.text, t.n, t.sa, t.lcp));
    t.lcp[t.n] = 0;
    uint64_t wr = cpt_get(rank_of, WS_CP);
    int32_t ws_rank = wr ? (int32_t)(t.n_seg + wr - 1) : -1;
    TRY(seed_candidates(&t, ws, ws_rank, opt, &heap));

    double sum = 0.0;
    for (size_t i = 0; i < n_req; i++)
        sum += (double)cf[i].freq;
    for (size_t i = 0; i < heap.n; i++)
        sum += (double)heap.c[i].score;
    double logsum = log(sum);
    for (size_t i = 0; i < n_req; i++) {
        char b[4];
        size_t l = lipi_utf8_encode(cf[i].cp, b);
        TRY(pieces_add(ps, b, l, log((double)cf[i].freq) - logsum));
    }
    for (size_t i = 0; i < heap.n; i++) {
        const int32_t *s = t.text + t.sa[heap.c[i].lb];
        utf.len = 0;
        for (size_t k = 0; k < heap.c[i].len; k++) {
            char b[4];
            size_t l = lipi_utf8_encode(cp_of[(size_t)s[k] - t.n_seg], b);
            TRY(lipi_buf_append(&utf, b, l));
        }
        TRY(pieces_add(ps, utf.p, utf.len, log((double)heap.c[i].score) - logsum));
    }
    TRY(build_cache(&t, heap.c, heap.n, n_req, req_of_rank, threads, ps, nc));
    pieces_rescore(ps);
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    cpt_free(rank_of);
    lipi_free(cp_of);
    lipi_free(req_of_rank);
    sa_text_free(&t);
    lipi_free(heap.c);
    lipi_buf_free(&utf);
    return st;
}

/* ======================================================================== */
/* The model                                                                 */
/* ======================================================================== */

struct lipi_unigram_model {
    size_t n;
    char *arena;
    size_t *off, *len;
    double *score;
    lipi_piece_type *type;
    uint32_t unk_id;
    bool byte_fallback;
};

void lipi_unigram_model_free(lipi_unigram_model *m)
{
    if (!m)
        return;
    lipi_free(m->arena);
    lipi_free(m->off);
    lipi_free(m->len);
    lipi_free(m->score);
    lipi_free(m->type);
    lipi_free(m);
}

size_t lipi_unigram_model_vocab_size(const lipi_unigram_model *m)
{
    return m ? m->n : 0;
}

const char *lipi_unigram_model_piece(const lipi_unigram_model *m, uint32_t id, size_t *len,
                                     double *score, lipi_piece_type *type)
{
    if (!m || id >= m->n)
        return NULL;
    if (len)
        *len = m->len[id];
    if (score)
        *score = m->score[id];
    if (type)
        *type = m->type[id];
    return m->arena + m->off[id];
}

/* The special tokens in id order: the options' list (or the default), with
 * the unknown token put first when the list lacks it. */
typedef struct {
    const char *s[256];
    size_t n;
    size_t unk;
} specials;

static const char *const default_specials[] = {"<unk>", "<s>", "</s>"};

static lipi_status specials_of(const lipi_unigram_options *opt, specials *sp, lipi_error *err)
{
    const char *const *list = opt->common.special_tokens ? opt->common.special_tokens : default_specials;
    size_t n = opt->common.special_tokens ? opt->common.n_special : 3;
    const char *unk = opt->common.unk_token ? opt->common.unk_token : "<unk>";
    memset(sp, 0, sizeof *sp);
    if (n > 255)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected at most 255 special tokens, found %zu", n);
    bool has_unk = false;
    for (size_t i = 0; i < n; i++)
        has_unk |= list[i] && strcmp(list[i], unk) == 0;
    if (!has_unk)
        sp->s[sp->n++] = unk;
    for (size_t i = 0; i < n; i++)
        sp->s[sp->n++] = list[i];
    lipi_status st = lipi_train_check_specials(sp->s, sp->n, opt->common.byte_fallback, err);
    for (size_t i = 0; st == LIPI_OK && i < sp->n; i++)
        if (strcmp(sp->s[i], unk) == 0)
            sp->unk = i;
    return st;
}

typedef struct {
    const char *s;
    size_t len;
    double score;
} final_piece;

static int final_cmp(const void *a, const void *b)
{
    const final_piece *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int r = memcmp(x->s, y->s, n);
    if (r)
        return r;
    return (x->len > y->len) - (x->len < y->len);
}

/* SentencePiece's FinalizeSentencePieces, then the model: specials, byte
 * pieces, and the required characters plus the best pieces by score. */
/* ------------------------------------------------------------------------ */
/* Keeping seen grapheme clusters whole                                      */
/* ------------------------------------------------------------------------ */

/* Under the grapheme guard no piece holds part of a cluster together with
 * anything outside it, but Viterbi can still cut a cluster by putting a
 * piece that ends inside it ("▁च") before a piece that can only follow a
 * cut ("ू"). Two things, both carried by the saved files (scores and
 * pieces), so Hugging Face tokenizers and SentencePiece cut the same way:
 *   - every multi-code-point cluster seen SEEN_CLUSTER times or more in the
 *     training words is a piece (added, most frequent first, in place of
 *     the lowest-scored pieces if EM dropped it; at most a tenth of the
 *     vocabulary), so a path that keeps it whole exists;
 *   - a piece that can only stand after a cut (it starts with a mark or
 *     ZWJ), or that leaves its last cluster open (ZWJ, or consonant +
 *     virama before a GB9c conjunct), scores CUT_PENALTY lower, more than
 *     a few of the lowest-scored pieces together: a path that cuts a
 *     cluster loses to one that keeps it whole wherever one exists. Where
 *     none exists (a word ending in a virama, a cluster never seen) every
 *     path pays alike and the scores decide as before. */
enum {
    SEEN_CLUSTER = 5,
    MAX_CLUSTER_SHARE = 10, /* added clusters take at most 1/10 of the vocabulary
                               (a small one would otherwise be mostly clusters) */
};
#define CUT_PENALTY_FLOOR 10.0

/* Counts of the multi-code-point clusters of the training words. */
static lipi_status cluster_counts(const word_set *ws, lipi_counts **out, lipi_error *err)
{
    lipi_status st = lipi_counts_new(out);
    for (size_t i = 0; st == LIPI_OK && i < ws->n; i++) {
        const word *w = &ws->w[i];
        const uint8_t *f = word_flags(ws, w);
        if (!f)
            continue;
        for (size_t a = 0; st == LIPI_OK && a < w->len;) {
            size_t b = a + u8len((unsigned char)w->s[a]);
            bool multi = false;
            for (; !f[b]; b += u8len((unsigned char)w->s[b]))
                multi = true;
            if (multi)
                st = lipi_counts_add(*out, w->s + a, b - a, w->count, err);
            a = b;
        }
    }
    if (st == LIPI_ENOMEM)
        oom(err);
    return st;
}

/* The seen clusters (count >= SEEN_CLUSTER) that are not among fp[0..n),
 * most frequent first, into *out (strings borrowed from cc). */
static lipi_status clusters_missing(const lipi_counts *cc, const final_piece *fp, size_t n,
                                    final_piece **out, size_t *n_out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_counts *have = NULL;
    lipi_count_entry *e = NULL;
    size_t n_e = 0;
    *out = NULL;
    *n_out = 0;
    if (lipi_counts_new(&have) != LIPI_OK)
        return oom(err);
    for (size_t i = 0; i < n; i++)
        TRY(lipi_counts_add(have, fp[i].s, fp[i].len, 1, err));
    if (lipi_counts_sorted(cc, &e, &n_e) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    *out = lipi_calloc(n_e ? n_e : 1, sizeof **out);
    if (!*out) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < n_e && e[i].count >= SEEN_CLUSTER; i++)
        if (!lipi_counts_get(have, e[i].word, e[i].len))
            (*out)[(*n_out)++] = (final_piece){e[i].word, e[i].len, 0.0};
done:
    lipi_counts_free(have);
    lipi_free(e);
    return st;
}

/* Lowers the score of every piece of fp[0..n) that cuts a cluster (see
 * above); the penalty exceeds the spread of the scores several times. */
static void penalize_cuts(final_piece *fp, size_t n)
{
    double lo = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fp[i].score < lo)
            lo = fp[i].score;
    double penalty = 4.0 * -lo + CUT_PENALTY_FLOOR;
    for (size_t i = 0; i < n; i++) {
        bool inside, open;
        lipi_cluster_edges(fp[i].s, fp[i].len, &inside, &open);
        if (inside || open)
            fp[i].score -= penalty;
    }
}

static lipi_status finalize(const piece_set *ps, const word_set *ws, const char_freq *cf,
                            size_t n_req, const specials *sp, const lipi_unigram_options *opt,
                            lipi_unigram_model **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t n_meta = sp->n + (opt->common.byte_fallback ? 256 : 0);
    size_t room = opt->common.vocab_size - n_meta;
    final_piece *fp = NULL, *sorted = NULL;
    uint8_t *taken = NULL;
    lipi_unigram_model *m = NULL;
    char *chars = NULL;
    size_t n_fp = 0;
    lipi_counts *clusters = NULL;
    final_piece *missing = NULL;
    size_t n_missing = 0;
    if (opt->common.grapheme_guard)
        TRY(cluster_counts(ws, &clusters, err));

    /* At most every piece makes it: a huge vocab_size must not size this. */
    size_t all = n_req + ps->n + (clusters ? lipi_counts_size(clusters) : 0);
    size_t cap = room < all ? room : all;
    fp = lipi_calloc(cap ? cap : 1, sizeof *fp);
    sorted = lipi_calloc(ps->n ? ps->n : 1, sizeof *sorted);
    taken = lipi_calloc(ps->n ? ps->n : 1, 1);
    chars = lipi_calloc(n_req ? n_req : 1, 4);
    if (!fp || !sorted || !taken || !chars) {
        st = oom(err);
        goto done;
    }
    /* Required characters, with EM's score or just below the lowest. */
    double penalty = 0.0;
    for (size_t i = 0; i < n_req; i++) {
        /* Piece i is the character cf[i] (see make_seeds). */
        char *b = chars + 4 * i;
        size_t l = lipi_utf8_encode(cf[i].cp, b);
        double score;
        taken[i] = 1;
        if (ps->p[i].alive) {
            score = ps->p[i].score;
        } else {
            score = ps->min_score + penalty;
            penalty += PENALTY_DELTA;
        }
        fp[n_fp++] = (final_piece){b, l, score};
    }
    size_t n_sorted = 0;
    for (size_t i = 0; i < ps->n; i++)
        if (!taken[i] && ps->p[i].alive)
            sorted[n_sorted++] = (final_piece){piece_bytes(ps, i), ps->p[i].len, ps->p[i].score};
    qsort(sorted, n_sorted, sizeof *sorted, final_cmp);
    for (size_t i = 0; i < n_sorted && n_fp < room; i++) {
        /* A piece spelled like a special or byte token could not be told
         * from it in tokenizer.json. */
        bool clash = false;
        for (size_t k = 0; k < sp->n && !clash; k++)
            clash = strlen(sp->s[k]) == sorted[i].len &&
                    memcmp(sp->s[k], sorted[i].s, sorted[i].len) == 0;
        if (opt->common.byte_fallback && lipi_byte_token_parse(sorted[i].s, sorted[i].len, true) >= 0)
            clash = true;
        if (!clash)
            fp[n_fp++] = sorted[i];
    }
    if (clusters) {
        /* fp[n_req..n_fp) are by falling score: the seen clusters EM left
         * out take the places of the last pieces that are not seen
         * clusters themselves. */
        TRY(clusters_missing(clusters, fp, n_fp, &missing, &n_missing, err));
        size_t add = n_missing < (room - n_req) / MAX_CLUSTER_SHARE
                         ? n_missing
                         : (room - n_req) / MAX_CLUSTER_SHARE;
        size_t end = n_fp;
        while (n_fp + add > room && end > n_req) {
            end--;
            if (lipi_counts_get(clusters, fp[end].s, fp[end].len) >= SEEN_CLUSTER)
                continue;
            memmove(fp + end, fp + end + 1, (n_fp - end - 1) * sizeof *fp);
            n_fp--;
        }
        for (size_t i = 0; i < add && n_fp < room; i++)
            fp[n_fp++] = (final_piece){missing[i].s, missing[i].len, ps->min_score};
        penalize_cuts(fp, n_fp);
    }
    qsort(fp, n_fp, sizeof *fp, final_cmp);

    m = lipi_calloc(1, sizeof *m);
    if (!m) {
        st = oom(err);
        goto done;
    }
    size_t total = n_meta + n_fp, bytes = 0;
    for (size_t i = 0; i < sp->n; i++)
        bytes += strlen(sp->s[i]) + 1;
    bytes += (opt->common.byte_fallback ? 256 * 7 : 0);
    for (size_t i = 0; i < n_fp; i++)
        bytes += fp[i].len + 1;
    m->arena = lipi_malloc(bytes ? bytes : 1);
    m->off = lipi_calloc(total, sizeof *m->off);
    m->len = lipi_calloc(total, sizeof *m->len);
    m->score = lipi_calloc(total, sizeof *m->score);
    m->type = lipi_calloc(total, sizeof *m->type);
    if (!m->arena || !m->off || !m->len || !m->score || !m->type) {
        st = oom(err);
        goto done;
    }
    size_t at = 0;
#define PUT(str, l, sc, ty)                                                      \
    do {                                                                        \
        m->off[m->n] = at;                                                      \
        m->len[m->n] = (l);                                                     \
        m->score[m->n] = (sc);                                                  \
        m->type[m->n] = (ty);                                                   \
        memcpy(m->arena + at, (str), (l));                                      \
        m->arena[at + (l)] = '\0';                                              \
        at += (l) + 1;                                                          \
        m->n++;                                                                 \
    } while (0)
    for (size_t i = 0; i < sp->n; i++)
        PUT(sp->s[i], strlen(sp->s[i]), 0.0,
            i == sp->unk ? LIPI_PIECE_UNKNOWN : LIPI_PIECE_CONTROL);
    if (opt->common.byte_fallback)
        for (unsigned b = 0; b < 256; b++) {
            char name[7];
            lipi_byte_token_format((uint8_t)b, name);
            PUT(name, 6, 0.0, LIPI_PIECE_BYTE);
        }
    for (size_t i = 0; i < n_fp; i++)
        PUT(fp[i].s, fp[i].len, fp[i].score, LIPI_PIECE_NORMAL);
#undef PUT
    m->unk_id = (uint32_t)sp->unk;
    m->byte_fallback = opt->common.byte_fallback;
    *out = m;
    m = NULL;
done:
    lipi_free(fp);
    lipi_free(sorted);
    lipi_free(taken);
    lipi_free(chars);
    lipi_free(missing);
    lipi_counts_free(clusters);
    lipi_unigram_model_free(m);
    return st;
}

/* ======================================================================== */
/* Training                                                                  */
/* ======================================================================== */

static void report(const lipi_unigram_options *opt, lipi_train_phase phase, size_t done_steps,
                   size_t total_steps, bool done)
{
    if (!opt->common.progress)
        return;
    lipi_progress p = {0};
    p.phase = phase;
    p.merges_done = done_steps;
    p.merges_total = total_steps;
    p.done = done;
    opt->common.progress(&p, opt->common.progress_user);
}

/* EM steps still to come from n pieces: sub-iterations until n shrinks to
 * `desired`, plus one pruning per round. */
static size_t steps_left(size_t n, size_t desired, const lipi_unigram_options *opt)
{
    size_t rounds = 1;
    double x = (double)n;
    while (x > (double)desired && rounds < 1000) {
        x *= opt->shrinking_factor;
        rounds++;
    }
    return rounds * opt->sub_iterations + (rounds - 1);
}

static lipi_status check_range(double v, double lo, double hi, const char *what, lipi_error *err)
{
    if (v >= lo && v <= hi)
        return LIPI_OK;
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "%s: expected a number in [%g, %g], found %g",
                          what, lo, hi, v);
}

static lipi_status check_options(const lipi_unigram_options *opt, lipi_error *err)
{
    if (!(opt->common.character_coverage > 0.0 && opt->common.character_coverage <= 1.0))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "character coverage: expected a number in (0, 1], found %g",
                              opt->common.character_coverage);
    if (!(opt->shrinking_factor > 0.0 && opt->shrinking_factor < 1.0))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "shrinking factor: expected a number in (0, 1), found %g",
                              opt->shrinking_factor);
    if (opt->max_piece_length < 1 || opt->max_piece_length > 255)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "max piece length: expected 1 .. 255 code points, found %zu",
                              opt->max_piece_length);
    if (opt->sub_iterations < 1)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "sub-iterations: expected at least 1, found 0");
    lipi_status st = check_range(opt->parity_exponent, 0.0, 1000.0, "parity exponent", err);
    if (st == LIPI_OK)
        st = check_range(opt->parity_mass, 0.0, 1.0, "parity mass", err);
    if (st == LIPI_OK)
        st = check_range(opt->parity_others, 1.0 / 65536.0, 1.0, "parity others", err);
    return st;
}

lipi_status lipi_unigram_train(const lipi_counts *counts, const lipi_unigram_options *opt,
                               lipi_unigram_model **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_unigram_options def;
    lipi_count_entry *ents = NULL;
    size_t n_ents = 0, n_cf = 0, n_req = 0;
    word_set ws = {0};
    piece_set ps = {0};
    node_cache nc = {0};
    char_freq *cf = NULL;
    double *expected = NULL, *score = NULL;
    bool *keep = NULL;
    specials sp;
    fair_prune fp = {0};
    *out = NULL;
    if (!opt) {
        lipi_unigram_options_default(&def);
        opt = &def;
    }
    size_t threads = thread_count(opt->common.threads);
    TRY(check_options(opt, err));
    TRY(specials_of(opt, &sp, err));
    if (lipi_counts_sorted(counts, &ents, &n_ents) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    TRY(words_build(&ws, ents, n_ents, opt->common.grapheme_guard, threads, err));
    if (ws.n == 0) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "nothing to train on: expected at least one word, found none");
        goto done;
    }
    TRY(char_stats(&ws, opt->common.character_coverage, &cf, &n_cf, &n_req, err));
    if (opt->common.balance)
        TRY(fair_start(&fp, opt, &ws, err));
    size_t n_meta = sp.n + (opt->common.byte_fallback ? 256 : 0);
    if (opt->common.vocab_size < n_meta + n_req) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "vocab size %zu is below the minimum %zu (%zu special tokens + %d "
                            "byte pieces + %zu required characters)",
                            opt->common.vocab_size, n_meta + n_req, sp.n,
                            opt->common.byte_fallback ? 256 : 0, n_req);
        goto done;
    }

    report(opt, LIPI_PHASE_SEED, 0, 1, false);
    TRY(make_seeds(&ws, cf, n_req, opt, threads, &ps, &nc, err));
    report(opt, LIPI_PHASE_SEED, 1, 1, true);

    /* SentencePiece stops pruning at 1.1 * vocab_size, leaving the final
     * cut to the scores. */
    size_t desired = (size_t)((double)opt->common.vocab_size * 1.1);
    expected = lipi_calloc(ps.n ? ps.n : 1, sizeof *expected);
    score = lipi_calloc(ps.n ? ps.n : 1, sizeof *score);
    keep = lipi_calloc(ps.n ? ps.n : 1, sizeof *keep);
    if (!expected || !score || !keep) {
        st = oom(err);
        goto done;
    }
    size_t step = 0, total = steps_left(ps.n, desired, opt);
    report(opt, LIPI_PHASE_EM, 0, total, false);
    for (;;) {
        for (size_t it = 0; it < opt->sub_iterations; it++) {
            double obj;
            size_t before = pieces_alive(&ps);
            TRY(estep(&ws, &ps, &nc, threads, expected, &obj, err));
            mstep(&ps, expected, score, keep);
            /* Dead pieces' nodes are skipped anyway; drop them once there
             * are enough to pay for the pass. */
            if ((before - pieces_alive(&ps)) * 100 > before)
                cache_compact(&nc, &ps, ws.n);
            step++;
            report(opt, LIPI_PHASE_EM, step,
                   step + steps_left(pieces_alive(&ps), desired, opt) - 1, false);
        }
        size_t alive = pieces_alive(&ps);
        if (alive <= desired)
            break;
        size_t target = (size_t)(opt->shrinking_factor * (double)alive);
        if (target < desired)
            target = desired;
        TRY(prune(&ws, &ps, &nc, target, opt->max_piece_length, threads,
                  opt->common.balance ? &fp : NULL, err));
        cache_compact(&nc, &ps, ws.n);
        step++;
        report(opt, LIPI_PHASE_EM, step, step + steps_left(pieces_alive(&ps), desired, opt),
               false);
    }
    TRY(finalize(&ps, &ws, cf, n_req, &sp, opt, out, err));
    report(opt, LIPI_PHASE_EM, step, step, true);
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    lipi_free(ents);
    word_set_free(&ws);
    pieces_free(&ps);
    cache_free(&nc);
    lipi_free(cf);
    lipi_free(expected);
    lipi_free(score);
    lipi_free(keep);
    fair_free(&fp);
    return st;
}

/* ------------------------------------------------------------------------ */
/* One E-step for tests                                                      */
/* ------------------------------------------------------------------------ */

lipi_status lipi_unigram_em_step(const lipi_unigram_piece *pieces, size_t n_pieces,
                                 const lipi_count_entry *words, size_t n_words, bool guard,
                                 size_t threads, double *expected, double *objective,
                                 lipi_error *err)
{
    lipi_status st = LIPI_OK;
    word_set ws = {0};
    piece_set ps = {0};
    node_cache nc = {0};
    threads = thread_count(threads);
    TRY(words_build(&ws, words, n_words, guard, threads, err));
    for (size_t i = 0; i < n_pieces; i++)
        TRY(pieces_add(&ps, pieces[i].s, pieces[i].len, pieces[i].score));
    pieces_rescore(&ps);
    /* Every match of every piece, the guard applied, by brute force. */
    nc.off = lipi_calloc(ws.n + 1, sizeof *nc.off);
    if (!nc.off) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0;
        for (size_t i = 0; i < ws.n; i++) {
            const word *w = &ws.w[i];
            const uint8_t *f = word_flags(&ws, w);
            nc.off[i] = k;
            for (size_t pos = 0; pos < w->len; pos += u8len((unsigned char)w->s[pos]))
                for (size_t j = 0; j < n_pieces; j++) {
                    size_t e = pos + pieces[j].len;
                    if (!pieces[j].len || e > w->len || memcmp(w->s + pos, pieces[j].s, pieces[j].len))
                        continue;
                    bool inner = false;
                    for (size_t d = pos + 1; f && d < e; d++)
                        inner |= f[d] != 0;
                    if (f && inner && !(f[pos] && f[e]))
                        continue;
                    if (pass == 1)
                        nc.v[k] = (cnode){(uint32_t)j, (uint16_t)pos, (uint16_t)pieces[j].len};
                    k++;
                }
            if (pass == 1)
                qsort(nc.v + nc.off[i], k - nc.off[i], sizeof *nc.v, cnode_cmp);
        }
        nc.off[ws.n] = nc.n = k;
        if (pass == 0 && !(nc.v = lipi_calloc(k ? k : 1, sizeof *nc.v))) {
            st = LIPI_ENOMEM;
            goto done;
        }
    }
    TRY(estep(&ws, &ps, &nc, threads, expected, objective, err));
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    word_set_free(&ws);
    pieces_free(&ps);
    cache_free(&nc);
    return st;
}

/* ======================================================================== */
/* The tokenizer                                                             */
/* ======================================================================== */

/* The first Metaspace step of a pre-tokenizer's JSON form, or NULL. */
static const json_t *find_metaspace(const json_t *j)
{
    if (!json_is_object(j))
        return NULL;
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type && strcmp(type, "Metaspace") == 0)
        return j;
    const json_t *list = json_object_get(j, "pretokenizers");
    size_t i;
    const json_t *v;
    json_array_foreach(list, i, v)
    {
        const json_t *m = find_metaspace(v);
        if (m)
            return m;
    }
    return NULL;
}

/* ByteFallback (with byte pieces), then Metaspace when the pre-tokenizer
 * has one, else Fuse; a single step stands alone. *out is the decoder's
 * tokenizer.json text (lipi_malloc'd, for lipi_tokenizer_set_decoder_json).
 * LIPI_ENOMEM. */
static lipi_status make_decoder(const lipi_pretokenizer *pre, bool byte_fallback, char **out)
{
    lipi_status st = LIPI_ENOMEM;
    json_t *pj = pre ? lipi_pretokenizer_to_json(pre) : NULL;
    json_t *steps = json_array(), *d = NULL;
    *out = NULL;
    if ((pre && !pj) || !steps)
        goto done;
    if (byte_fallback && json_array_append_new(steps, json_pack("{ss}", "type", "ByteFallback")))
        goto done;
    const json_t *ms = find_metaspace(pj);
    if (ms) {
        const char *rep = json_string_value(json_object_get(ms, "replacement"));
        const char *scheme = json_string_value(json_object_get(ms, "prepend_scheme"));
        if (!scheme || (strcmp(scheme, "first") != 0 && strcmp(scheme, "never") != 0))
            scheme = "always";
        if (json_array_append_new(steps, json_pack("{ss ss ss sb}", "type", "Metaspace",
                                                   "replacement", rep ? rep : "\xe2\x96\x81",
                                                   "prepend_scheme", scheme, "split",
                                                   json_is_true(json_object_get(ms, "split")))))
            goto done;
    } else if (json_array_append_new(steps, json_pack("{ss}", "type", "Fuse"))) {
        goto done;
    }
    d = json_array_size(steps) == 1
            ? json_incref(json_array_get(steps, 0))
            : json_pack("{ss sO}", "type", "Sequence", "decoders", steps);
    if (d && (*out = json_dumps(d, JSON_COMPACT)))
        st = LIPI_OK;
done:
    json_decref(d);
    json_decref(steps);
    json_decref(pj);
    return st;
}

/* The text handling a trained Unigram tokenizer is saved with, as
 * SentencePiece encodes: the split pattern only bounds pieces during
 * training (as its split_by_unicode_script / number / whitespace do); text
 * is cut only at spaces and each word is one Viterbi, so "1500" is
 * "▁15 00" however the pattern groups digits. *norm and *pre are replaced
 * when *pre has a Metaspace step: the pre-tokenizer becomes that Metaspace
 * alone, splitting, without a prefix of its own, and the normalizer gains
 * Prepend("▁"), because SentencePiece's dummy prefix is added even before a
 * leading space (" x" is "▁▁x") where Metaspace's is not. LIPI_ENOMEM, or
 * the readers' errors. */
enum { SCORE_GRID = 256 };

static lipi_status spm_text_handling(lipi_normalizer **norm, lipi_pretokenizer **pre,
                                     lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *pj = lipi_pretokenizer_to_json(*pre), *nj = NULL, *mj = NULL, *seq = NULL;
    lipi_normalizer *n = NULL;
    lipi_pretokenizer *p = NULL;
    const json_t *ms = find_metaspace(pj);
    if (!pj)
        TRY(LIPI_ENOMEM);
    if (!ms)
        goto done;
    const char *rep = json_string_value(json_object_get(ms, "replacement"));
    const char *scheme = json_string_value(json_object_get(ms, "prepend_scheme"));
    if (!rep)
        rep = "\xe2\x96\x81";
    if (!(mj = json_pack("{ss ss ss sb}", "type", "Metaspace", "replacement", rep,
                         "prepend_scheme", "never", "split", 1)))
        TRY(LIPI_ENOMEM);
    TRY(lipi_pretokenizer_from_json(mj, "pre_tokenizer", &p, err));
    if (!scheme || strcmp(scheme, "never") != 0) {
        seq = json_pack("{ss s[]}", "type", "Sequence", "normalizers");
        json_t *steps = json_object_get(seq, "normalizers");
        nj = *norm ? lipi_normalizer_to_json(*norm) : NULL;
        if (!seq || (*norm && !nj) || (nj && json_array_append(steps, nj)) ||
            json_array_append_new(steps, json_pack("{ss ss}", "type", "Prepend", "prepend", rep)))
            TRY(LIPI_ENOMEM);
        TRY(lipi_normalizer_from_json(seq, "normalizer", &n, err));
        lipi_normalizer_free(*norm);
        *norm = n;
        n = NULL;
    }
    lipi_pretokenizer_free(*pre);
    *pre = p;
    p = NULL;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, st, NULL, 0, 0, "out of memory");
    lipi_normalizer_free(n);
    lipi_pretokenizer_free(p);
    json_decref(pj);
    json_decref(nj);
    json_decref(mj);
    json_decref(seq);
    return st;
}

lipi_status lipi_unigram_model_to_tokenizer(const lipi_unigram_model *m, lipi_normalizer *norm,
                                            lipi_pretokenizer *pre, lipi_tokenizer **out,
                                            lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const char **toks = NULL;
    char *dec = NULL;
    double *scores = NULL;
    *out = NULL;
    if (make_decoder(pre, m->byte_fallback, &dec) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    if (pre)
        TRY(spm_text_handling(&norm, &pre, err));
    toks = lipi_calloc(m->n ? m->n : 1, sizeof *toks);
    if (!toks) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < m->n; i++)
        toks[i] = m->arena + m->off[i];
    /* Scores on a grid of 1/256: every path score below 2^16 in magnitude
     * is then exact in SentencePiece's float sums and in the double sums
     * of Hugging Face and lipi, so two segmentations that tie in one tie in
     * all, and all three pick the same one (the lowest start for the last
     * piece) instead of whichever rounding favoured ("০|০০" vs "০০|০"). */
    scores = lipi_calloc(m->n ? m->n : 1, sizeof *scores);
    if (!scores) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < m->n; i++)
        scores[i] = nearbyint(m->score[i] * SCORE_GRID) / SCORE_GRID;
    /* The special tokens come first (finalize). */
    size_t n_special = 0;
    while (n_special < m->n && (m->type[n_special] == LIPI_PIECE_CONTROL ||
                                m->type[n_special] == LIPI_PIECE_UNKNOWN))
        n_special++;
    lipi_model_options mo;
    lipi_model_options_default(LIPI_MODEL_UNIGRAM, &mo);
    mo.unk_id = m->unk_id;
    mo.byte_fallback = m->byte_fallback;
    lipi_trained_vocab v = {.type = LIPI_MODEL_UNIGRAM, .opt = &mo, .tokens = toks,
                            .lens = m->len, .scores = scores, .n = m->n,
                            .n_special = n_special, .decoder_json = dec};
    st = lipi_train_assemble(&v, norm, pre, out, err);
    norm = NULL; /* stolen */
    pre = NULL;
done:
    lipi_normalizer_free(norm);
    lipi_pretokenizer_free(pre);
    lipi_free(toks);
    lipi_free(scores);
    lipi_free(dec); /* json_dumps allocates through the lipi hook */
    return st;
}

/* The indic pattern with one change for Metaspace words: numbers keep a
 * leading space like every other word, so " 42" is one word "▁42", as
 * SentencePiece sees it (the plain pattern gives " " and "42"). The change
 * is made on the pattern's text; if the pattern no longer has the number
 * alternative this expects, the plain pattern is used. */
static const char NUMBER_ALT[] = "|(?:\\p{N}\\p{M}*){1,3}";

static json_t *unigram_split(const lipi_pretokenizer *indic)
{
    json_t *j = lipi_pretokenizer_to_json(indic);
    json_t *re = json_object_get(json_object_get(j, "pattern"), "Regex");
    const char *pat = json_string_value(re);
    const char *at = pat ? strstr(pat, NUMBER_ALT) : NULL;
    if (!at)
        return j;
    size_t n = strlen(pat), pre = (size_t)(at - pat);
    char *mod = lipi_malloc(n + 3);
    if (!mod) {
        json_decref(j);
        return NULL;
    }
    memcpy(mod, pat, pre + 1);
    memcpy(mod + pre + 1, " ?", 2);
    memcpy(mod + pre + 3, at + 1, n - pre);
    int bad = json_string_set(re, mod);
    lipi_free(mod);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

lipi_status lipi_unigram_pretokenizer_new(lipi_pretokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_pretokenizer *indic = NULL;
    json_t *inner = NULL, *seq = NULL;
    *out = NULL;
    TRY(lipi_pretokenizer_new("indic", &indic, err));
    inner = unigram_split(indic);
    if (!inner ||
        !(seq = json_pack("{s:s, s:[O, {s:s, s:s, s:s, s:b}]}", "type", "Sequence",
                          "pretokenizers", inner, "type", "Metaspace", "replacement",
                          "\xe2\x96\x81", "prepend_scheme", "first", "split", 0))) {
        st = oom(err);
        goto done;
    }
    st = lipi_pretokenizer_from_json(seq, "pre_tokenizer", out, err);
done:
    lipi_pretokenizer_free(indic);
    json_decref(inner);
    json_decref(seq);
    return st;
}

/* ======================================================================== */
/* Training from files                                                       */
/* ======================================================================== */

/* A sampled line. */
typedef struct {
    char *s;
    size_t len;
    size_t file;
    size_t line;
} sline;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Algorithm R over every record (line, by default) of every file: record i
 * (from 0) replaces a random slot with probability k / (i + 1). */
static lipi_status reservoir(const char *const *paths, size_t n_paths,
                             const lipi_count_options *co,
                             uint64_t k, uint64_t seed, const lipi_unigram_options *opt,
                             sline **out, size_t *n_out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_record_reader *rd = NULL;
    lipi_record_options ro = co->records;
    ro.invalid = co->invalid;
    sline *res = NULL;
    size_t n = 0, cap = 0;
    uint64_t i = 0, rng = seed, bytes_done = 0, text_done = 0;
    double last = now_s();
    *out = NULL;
    *n_out = 0;
    for (size_t f = 0; f < n_paths; f++) {
        TRY(lipi_record_reader_open(paths[f], &ro, &rd, err));
        for (;;) {
            lipi_record rec;
            TRY(lipi_record_reader_next(rd, &rec, err));
            if (!rec.text)
                break;
            const char *line = rec.text;
            size_t len = rec.len;
            uint64_t slot = i;
            if (i >= k) {
                uint64_t r = splitmix64(&rng);
                slot = (uint64_t)(((unsigned __int128)r * (i + 1)) >> 64);
            }
            i++;
            if (slot >= k)
                continue;
            char *copy = lipi_strndup(line, len);
            if (!copy) {
                st = LIPI_ENOMEM;
                goto done;
            }
            if (slot == n) {
                if (n == cap) {
                    void *p = res;
                    lipi_status gs = lipi_grow(&p, &cap, n + 1, sizeof *res);
                    res = p;
                    if (gs != LIPI_OK) {
                        lipi_free(copy);
                        st = gs;
                        goto done;
                    }
                }
                n++;
            } else {
                lipi_free(res[slot].s);
            }
            res[slot] = (sline){copy, len, f, rec.number};
            if (opt->common.progress && (i & 4095) == 0 && now_s() - last > 0.25) {
                lipi_progress p = {0};
                p.phase = LIPI_PHASE_COUNT;
                p.bytes_read = bytes_done + lipi_record_reader_bytes_read(rd);
                p.text_bytes = text_done + lipi_record_reader_text_bytes(rd);
                p.lines = i;
                opt->common.progress(&p, opt->common.progress_user);
                last = now_s();
            }
        }
        bytes_done += lipi_record_reader_bytes_read(rd);
        text_done += lipi_record_reader_text_bytes(rd);
        lipi_record_reader_close(rd);
        rd = NULL;
    }
    *out = res;
    *n_out = n;
    res = NULL;
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    lipi_record_reader_close(rd);
    for (size_t j = 0; res && j < n; j++)
        lipi_free(res[j].s);
    lipi_free(res);
    return st;
}

typedef struct {
    const sline *lines;
    size_t n;
    const char *const *paths;
    const lipi_normalizer *norm;
    const lipi_pretokenizer *pre;
    lipi_counts **tables;    /* per thread */
    lipi_normalized *normed; /* per thread */
    lipi_pieces *pieces;     /* per thread */
} count_job;

enum { LINE_BLOCK = 1024 };

static lipi_status count_line(count_job *cj, size_t tid, const sline *l, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const char *s = l->s;
    size_t len = l->len;
    if (cj->norm) {
        TRY(lipi_normalize(cj->norm, s, len, &cj->normed[tid], false, err));
        s = cj->normed[tid].text;
        len = cj->normed[tid].len;
    }
    TRY(lipi_pretokenize(cj->pre, s, len, &cj->pieces[tid], err));
    const lipi_pieces *p = &cj->pieces[tid];
    TRY(lipi_counts_add_each(cj->tables[tid], p->text, p->text_off, p->count, err));
done:
    return st;
}

static lipi_status count_run(void *ctx, size_t job, size_t tid, lipi_error *err)
{
    count_job *cj = ctx;
    size_t lo = job * LINE_BLOCK, hi = lo + LINE_BLOCK < cj->n ? lo + LINE_BLOCK : cj->n;
    for (size_t i = lo; i < hi; i++) {
        const sline *l = &cj->lines[i];
        lipi_status st = count_line(cj, tid, l, err);
        if (st != LIPI_OK) {
            /* Offsets are the line's; name the line it came from. */
            if (err && st != LIPI_ENOMEM) {
                snprintf(err->path, sizeof err->path, "%s", cj->paths[l->file]);
                err->line = l->line;
            }
            return st;
        }
    }
    return LIPI_OK;
}

/* Counts a reservoir sample of the files' lines. */
static lipi_status count_sample(const char *const *paths, size_t n_paths,
                                const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                                const lipi_count_options *co, const lipi_unigram_options *opt,
                                lipi_counts **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    sline *lines = NULL;
    size_t n = 0;
    size_t threads = thread_count(co->threads ? co->threads : opt->common.threads);
    count_job cj = {0};
    *out = NULL;
    TRY(reservoir(paths, n_paths, co, opt->sample, opt->sample_seed, opt, &lines, &n,
                  err));
    cj = (count_job){.lines = lines, .n = n, .paths = paths, .norm = norm, .pre = pre};
    cj.tables = lipi_calloc(threads, sizeof *cj.tables);
    cj.normed = lipi_calloc(threads, sizeof *cj.normed);
    cj.pieces = lipi_calloc(threads, sizeof *cj.pieces);
    if (!cj.tables || !cj.normed || !cj.pieces) {
        st = oom(err);
        goto done;
    }
    for (size_t t = 0; t < threads; t++)
        if (lipi_counts_new(&cj.tables[t]) != LIPI_OK) {
            st = oom(err);
            goto done;
        }
    TRY(lipi_parallel_for((n + LINE_BLOCK - 1) / LINE_BLOCK, threads, count_run, &cj, err));
    for (size_t t = 1; t < threads; t++)
        TRY(lipi_counts_merge(cj.tables[0], cj.tables[t], err));
    *out = cj.tables[0];
    cj.tables[0] = NULL;
    if (opt->common.progress) {
        lipi_progress p = {0};
        p.phase = LIPI_PHASE_COUNT;
        p.lines = n;
        p.done = true;
        opt->common.progress(&p, opt->common.progress_user);
    }
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    for (size_t t = 0; t < threads; t++) {
        if (cj.tables)
            lipi_counts_free(cj.tables[t]);
        if (cj.normed)
            lipi_normalized_free(&cj.normed[t]);
        if (cj.pieces)
            lipi_pieces_free(&cj.pieces[t]);
    }
    lipi_free(cj.tables);
    lipi_free(cj.normed);
    lipi_free(cj.pieces);
    for (size_t j = 0; j < n; j++)
        lipi_free(lines[j].s);
    lipi_free(lines);
    return st;
}

lipi_status lipi_unigram_train_counts(const lipi_counts *counts, lipi_normalizer *norm,
                                      lipi_pretokenizer *pre, const lipi_unigram_options *opt,
                                      lipi_tokenizer **out, lipi_error *err)
{
    lipi_unigram_model *m = NULL;
    *out = NULL;
    lipi_status st = lipi_unigram_train(counts, opt, &m, err);
    if (st == LIPI_OK) {
        st = lipi_unigram_model_to_tokenizer(m, norm, pre, out, err);
    } else {
        lipi_normalizer_free(norm);
        lipi_pretokenizer_free(pre);
    }
    lipi_unigram_model_free(m);
    return st;
}

lipi_status lipi_unigram_train_files(const char *const *paths, size_t n_paths,
                                     lipi_normalizer *norm, lipi_pretokenizer *pre,
                                     const lipi_count_options *count_opt,
                                     const lipi_unigram_options *opt, lipi_tokenizer **out,
                                     lipi_error *err)
{
    lipi_counts *counts = NULL;
    lipi_count_options co;
    lipi_unigram_options uo;
    lipi_status st;
    *out = NULL;
    if (!count_opt) {
        lipi_count_options_default(&co);
        count_opt = &co;
    }
    if (!opt) {
        lipi_unigram_options_default(&uo);
        opt = &uo;
    }
    if (!pre) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                            "expected a pre-tokenizer (lipi_unigram_pretokenizer_new)");
        lipi_normalizer_free(norm);
        return st;
    }
    if (opt->sample)
        st = count_sample(paths, n_paths, norm, pre, count_opt, opt, &counts, err);
    else
        st = lipi_count_files(paths, n_paths, norm, pre, count_opt, &counts, err);
    if (st == LIPI_OK) {
        st = lipi_unigram_train_counts(counts, norm, pre, opt, out, err);
    } else {
        lipi_normalizer_free(norm);
        lipi_pretokenizer_free(pre);
    }
    lipi_counts_free(counts);
    return st;
}

/* Fair vocabularies: word counts per language, XLM-R smoothing, and the
 * dev-set tracker of parity-aware BPE (docs/FAIRNESS.md).
 *
 * Languages are indexed from 1; index 0 (LIPI_LANG_NONE) collects the words
 * of mixed text that have no letter of any script. Public language i is
 * internal index i + 1. */
#include "trainer/balance_impl.h"

#include "tokenizer/base.h"

#include <math.h>
#include <string.h>
#include <unicode/uscript.h>

#define NONE32 UINT32_MAX
/* ICU has about 200 script codes; a larger code is treated as no script. */
enum { MAX_LANGS = 65535, N_SCRIPTS = 512 };
#define MINOR_SHARE 0.001
/* Parity targets in fixed point; the range keeps cost * files * target
 * within 128 bits (lipi_balance_rank). */
#define TARGET_ONE 65536u
#define TARGET_MIN 0.01
#define TARGET_MAX 100.0

typedef struct {
    char *name;
    lipi_counts *train; /* this language's words */
    uint64_t mass;      /* sum of counts, saturating */
    lipi_counts *dev;   /* dev words, NULL without a dev file */
    size_t dev_files;
    uint32_t target;    /* parity target ratio, 2^16 = 1; 0: the default */
    bool by_script;     /* made by lipi_balance_add_mixed */
} lang;

struct lipi_balance {
    lang *l;
    size_t n, cap;     /* n includes index 0 */
    lipi_counts *owner; /* word -> count << 16 | (0xFFFF - language) of its
                           main language; built by lipi_balance_train_counts */
    uint32_t target;    /* the target of languages without their own */
};

static lipi_status oom(lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory balancing languages");
}

lipi_status lipi_balance_new(lipi_balance **out)
{
    *out = NULL;
    lipi_balance *b = lipi_calloc(1, sizeof *b);
    if (!b)
        return LIPI_ENOMEM;
    b->l = lipi_calloc(4, sizeof *b->l);
    if (!b->l) {
        lipi_free(b);
        return LIPI_ENOMEM;
    }
    b->cap = 4;
    b->n = 1;
    b->target = TARGET_ONE;
    *out = b;
    return LIPI_OK;
}

void lipi_balance_free(lipi_balance *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        lipi_free(b->l[i].name);
        lipi_counts_free(b->l[i].train);
        lipi_counts_free(b->l[i].dev);
    }
    lipi_free(b->l);
    lipi_counts_free(b->owner);
    lipi_free(b);
}

size_t lipi_balance_n_langs(const lipi_balance *b)
{
    return b->n;
}

size_t lipi_balance_lang_count(const lipi_balance *b)
{
    return b->n - 1;
}

const char *lipi_balance_lang_name(const lipi_balance *b, size_t i)
{
    return i + 1 < b->n ? b->l[i + 1].name : NULL;
}

uint64_t lipi_balance_lang_mass(const lipi_balance *b, size_t i)
{
    return i + 1 < b->n ? b->l[i + 1].mass : 0;
}

static size_t find_lang(const lipi_balance *b, const char *name, size_t len)
{
    for (size_t i = 1; i < b->n; i++)
        if (strlen(b->l[i].name) == len && memcmp(b->l[i].name, name, len) == 0)
            return i;
    return 0;
}

/* Language i's parity target, 2^16 = 1. */
static uint64_t target_of(const lipi_balance *b, size_t i)
{
    return b->l[i].target ? b->l[i].target : b->target;
}

/* Index of language `name`, created (empty) if new. */
static lipi_status lang_get(lipi_balance *b, const char *name, size_t len, size_t *out,
                            lipi_error *err)
{
    if (len == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a language name, found an empty one");
    size_t i = find_lang(b, name, len);
    if (i) {
        *out = i;
        return LIPI_OK;
    }
    if (b->n > MAX_LANGS)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "more than %d languages", MAX_LANGS);
    void *p = b->l;
    if (lipi_grow(&p, &b->cap, b->n + 1, sizeof *b->l) != LIPI_OK)
        return oom(err);
    b->l = p;
    lang *l = &b->l[b->n];
    memset(l, 0, sizeof *l);
    l->name = lipi_malloc(len + 1);
    if (!l->name || lipi_counts_new(&l->train) != LIPI_OK) {
        lipi_free(l->name);
        l->name = NULL;
        return oom(err);
    }
    memcpy(l->name, name, len);
    l->name[len] = '\0';
    *out = b->n++;
    return LIPI_OK;
}

/* The "no language" class gets its table on first use. */
static lipi_status none_table(lipi_balance *b, lipi_error *err)
{
    if (b->l[0].train)
        return LIPI_OK;
    if (lipi_counts_new(&b->l[0].train) != LIPI_OK)
        return oom(err);
    return LIPI_OK;
}

static lipi_status add_to(lipi_balance *b, size_t li, const char *w, size_t len, uint64_t n,
                          lipi_error *err)
{
    lang *l = &b->l[li];
    lipi_status st = lipi_counts_add(l->train, w, len, n, err);
    if (st != LIPI_OK)
        return st;
    l->mass = l->mass > UINT64_MAX - n ? UINT64_MAX : l->mass + n;
    return LIPI_OK;
}

lipi_status lipi_balance_add_lang(lipi_balance *b, const char *name, const lipi_counts *c,
                                  lipi_error *err)
{
    size_t li;
    lipi_status st = lang_get(b, name, strlen(name), &li, err);
    size_t pos = 0;
    lipi_count_entry e;
    while (st == LIPI_OK && lipi_counts_next(c, &pos, &e))
        st = add_to(b, li, e.word, e.len, e.count, err);
    return st;
}

/* Dominant script of s (weighted by n) among the scripts other than Common,
 * Inherited and Unknown; a tie goes to the script seen first (first_seen)
 * or to the lowest script code. tally[] (indexed by script code) and
 * order[] (the scripts in first-seen order, *n_order of them) accumulate
 * over calls; the caller zeroes them. Returns USCRIPT_INVALID_CODE for
 * none. */
static int dominant_script(const char *s, size_t len, uint64_t n, uint64_t *tally, int *order,
                           size_t *n_order, bool first_seen)
{
    int best = USCRIPT_INVALID_CODE;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += lipi_utf8_decode(s + i, len - i, &cp);
        int sc = lipi_script_of(cp);
        if (sc <= USCRIPT_INHERITED || sc == USCRIPT_UNKNOWN || sc >= N_SCRIPTS)
            continue;
        if (tally[sc] == 0)
            order[(*n_order)++] = sc;
        tally[sc] += n;
    }
    for (size_t k = 0; k < *n_order; k++)
        if (best == USCRIPT_INVALID_CODE || tally[order[k]] > tally[best] ||
            (tally[order[k]] == tally[best] && !first_seen && order[k] < best))
            best = order[k];
    return best;
}

static const char *script_name(int sc)
{
    const char *name = uscript_getShortName((UScriptCode)sc);
    return name ? name : "Zzzz";
}

lipi_status lipi_balance_add_mixed(lipi_balance *b, const lipi_counts *c, lipi_error *err)
{
    uint64_t tally[N_SCRIPTS] = {0};
    int order[N_SCRIPTS];
    /* Script -> language index, 0 until the script is seen. */
    size_t lang_of_script[N_SCRIPTS] = {0};
    size_t pos = 0;
    lipi_count_entry e;
    lipi_status st = LIPI_OK;
    while (st == LIPI_OK && lipi_counts_next(c, &pos, &e)) {
        size_t n_order = 0;
        int sc = dominant_script(e.word, e.len, 1, tally, order, &n_order, true);
        for (size_t k = 0; k < n_order; k++)
            tally[order[k]] = 0;
        size_t li = 0;
        if (sc == USCRIPT_INVALID_CODE) {
            st = none_table(b, err);
        } else if (!lang_of_script[sc]) {
            const char *name = script_name(sc);
            st = lang_get(b, name, strlen(name), &li, err);
            lang_of_script[sc] = li;
            if (st == LIPI_OK && b->l[li].mass == 0)
                b->l[li].by_script = true;
        } else {
            li = lang_of_script[sc];
        }
        if (st == LIPI_OK)
            st = add_to(b, li, e.word, e.len, e.count, err);
    }
    return st;
}

lipi_status lipi_balance_add_dev(lipi_balance *b, const char *label, const lipi_counts *c,
                                 bool *used, lipi_error *err)
{
    if (used)
        *used = false;
    size_t li = find_lang(b, label, strlen(label));
    if (!li) {
        uint64_t tally[N_SCRIPTS] = {0};
        int order[N_SCRIPTS], sc = USCRIPT_INVALID_CODE;
        size_t n_order = 0, pos = 0;
        lipi_count_entry e;
        while (lipi_counts_next(c, &pos, &e))
            sc = dominant_script(e.word, e.len, e.count, tally, order, &n_order, false);
        if (sc == USCRIPT_INVALID_CODE)
            return LIPI_OK;
        const char *name = script_name(sc);
        li = find_lang(b, name, strlen(name));
        if (!li)
            return LIPI_OK;
    }
    lang *l = &b->l[li];
    if (!l->dev && lipi_counts_new(&l->dev) != LIPI_OK)
        return oom(err);
    lipi_status st = lipi_counts_merge(l->dev, c, err);
    if (st != LIPI_OK)
        return st;
    l->dev_files++;
    if (used)
        *used = true;
    return LIPI_OK;
}

/* A script of mixed text under 0.1% of the words is stray letters (a Greek
 * symbol in English text), not a language to raise. */
static bool minor(const lipi_balance *b, size_t i, double all)
{
    return b->l[i].by_script && (double)b->l[i].mass < all * MINOR_SHARE;
}

lipi_status lipi_balance_weights(const lipi_balance *b, double alpha, uint64_t *w, lipi_error *err)
{
    if (!(alpha >= 0.0 && alpha <= 1.0))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a smoothing alpha in [0, 1], found %g", alpha);
    double total = 0.0, z = 0.0, all = 0.0;
    for (size_t i = 1; i < b->n; i++)
        all += (double)b->l[i].mass;
    for (size_t i = 1; i < b->n; i++)
        if (!minor(b, i, all))
            total += (double)b->l[i].mass;
    for (size_t i = 1; i < b->n; i++)
        if (b->l[i].mass && !minor(b, i, all))
            z += pow((double)b->l[i].mass / total, alpha);
    for (size_t i = 1; i < b->n; i++) {
        uint64_t v = (uint64_t)1 << 32;
        if (b->l[i].mass && !minor(b, i, all)) {
            double q = (double)b->l[i].mass / total;
            double r = pow(q, alpha) / z / q * 4294967296.0;
            v = r >= 18446744073709549568.0 ? UINT64_MAX : r < 1.0 ? 1 : (uint64_t)(r + 0.5);
        }
        w[i - 1] = v;
    }
    return LIPI_OK;
}

/* floor((c * w + 2^31) / 2^32), at least 1, saturating. */
static uint64_t scale(uint64_t c, uint64_t w)
{
    unsigned __int128 v = ((unsigned __int128)c * w + ((unsigned __int128)1 << 31)) >> 32;
    if (v == 0)
        return 1;
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* Notes language li as a candidate owner of each of its words: the value
 * count << 16 | (0xFFFF - li) only grows, so the largest count wins and,
 * among equal counts, the lowest index. */
static lipi_status own(lipi_balance *b, size_t li, lipi_error *err)
{
    size_t pos = 0;
    lipi_count_entry e;
    while (lipi_counts_next(b->l[li].train, &pos, &e)) {
        uint64_t c = e.count >= (1ull << 48) ? (1ull << 48) - 1 : e.count;
        uint64_t v = c << 16 | (uint64_t)(0xFFFF - li);
        uint64_t old = lipi_counts_get(b->owner, e.word, e.len);
        if (v > old) {
            lipi_status st = lipi_counts_add(b->owner, e.word, e.len, v - old, err);
            if (st != LIPI_OK)
                return st;
        }
    }
    return LIPI_OK;
}

static int cmp_lang(const void *pa, const void *pb)
{
    return strcmp(((const lang *)pa)->name, ((const lang *)pb)->name);
}

lipi_status lipi_balance_train_counts(lipi_balance *b, lipi_balance_mode mode, double alpha,
                                      lipi_counts **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_counts *c = NULL;
    uint64_t *w = NULL;
    *out = NULL;
    /* Scripts of mixed text become languages in the order their words come
     * out of a hash table, which depends on how the counts were made (files
     * or counts files, threads): sort by name so that every tie between
     * languages is broken the same way. */
    if (!b->owner)
        qsort(b->l + 1, b->n - 1, sizeof *b->l, cmp_lang);
    if (mode == LIPI_BALANCE_SMOOTHED) {
        w = lipi_calloc(b->n, sizeof *w);
        if (!w)
            return oom(err);
        TRY(lipi_balance_weights(b, alpha, w, err));
    }
    if (lipi_counts_new(&c) != LIPI_OK) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (!b->l[i].train)
            continue;
        if (!w || i == 0) {
            TRY(lipi_counts_merge(c, b->l[i].train, err));
            continue;
        }
        size_t pos = 0;
        lipi_count_entry e;
        while (lipi_counts_next(b->l[i].train, &pos, &e))
            TRY(lipi_counts_add(c, e.word, e.len, scale(e.count, w[i - 1]), err));
    }
    if (lipi_counts_size(c) == 0) {
        st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "nothing to train on: no words");
        goto done;
    }
    if (!b->owner) {
        if (lipi_counts_new(&b->owner) != LIPI_OK) {
            st = oom(err);
            goto done;
        }
        for (size_t i = 1; i < b->n; i++)
            TRY(own(b, i, err));
    }
    *out = c;
    c = NULL;
done:
    if (st == LIPI_ENOMEM)
        oom(err);
    lipi_counts_free(c);
    lipi_free(w);
    return st;
}

uint32_t lipi_balance_lang_of(const lipi_balance *b, const char *word, size_t len)
{
    uint64_t v = b->owner ? lipi_counts_get(b->owner, word, len) : 0;
    return v ? 0xFFFFu - (uint32_t)(v & 0xFFFF) : LIPI_LANG_NONE;
}

const lipi_counts *lipi_balance_dev(const lipi_balance *b, uint32_t li, size_t *n_files)
{
    *n_files = li < b->n ? b->l[li].dev_files : 0;
    return li < b->n ? b->l[li].dev : NULL;
}

void lipi_balance_rank(const lipi_balance *b, const uint64_t *cost, uint32_t *order, size_t *n)
{
    size_t k = 0;
    for (uint32_t i = 1; i < b->n; i++) {
        if (!b->l[i].dev_files)
            continue;
        /* Insertion sort: a few dozen languages. cost/(files*target)
         * compared as cost_a * files_b * target_b against cost_b *
         * files_a * target_a, exactly. */
        size_t j = k++;
        while (j > 0) {
            uint32_t o = order[j - 1];
            unsigned __int128 mine =
                (unsigned __int128)cost[i] * b->l[o].dev_files * target_of(b, o);
            unsigned __int128 theirs =
                (unsigned __int128)cost[o] * b->l[i].dev_files * target_of(b, i);
            if (mine <= theirs)
                break;
            order[j] = o;
            j--;
        }
        order[j] = i;
    }
    *n = k;
}

/* Code points of dev words, weighted by their counts. */
static uint64_t dev_chars(const lipi_counts *c)
{
    uint64_t n = 0;
    size_t pos = 0;
    lipi_count_entry e;
    while (lipi_counts_next(c, &pos, &e)) {
        uint64_t k = 0;
        for (size_t i = 0; i < e.len; i++)
            k += ((unsigned char)e.word[i] & 0xC0) != 0x80;
        n += k * e.count;
    }
    return n;
}

/* Language l's estimated dev cost over its target: its training words'
 * tokens per character times its dev characters per dev file. */
static double est_cost(const lipi_balance *b, size_t l, uint64_t tok, uint64_t chars)
{
    return (double)tok / (double)chars * (double)dev_chars(b->l[l].dev) /
           (double)b->l[l].dev_files * TARGET_ONE / (double)target_of(b, l);
}

void lipi_balance_prune_weights(const lipi_balance *b, const uint64_t *tok,
                                const uint64_t *chars, const lipi_prune_params *p,
                                uint64_t *wt)
{
    double best = 0.0;
    uint64_t others = (uint64_t)(p->others * 65536.0 + 0.5);
    for (size_t l = 0; l < b->n; l++) {
        wt[l] = l == LIPI_LANG_NONE || b->l[l].dev ? 1u << 16 : others ? others : 1;
        if (l == LIPI_LANG_NONE || !b->l[l].dev || !chars[l] || !tok[l])
            continue;
        double cost = est_cost(b, l, tok[l], chars[l]);
        if (best == 0.0 || cost < best)
            best = cost;
    }
    uint64_t most = 0;
    for (size_t l = 0; l < b->n; l++)
        if (l != LIPI_LANG_NONE && b->l[l].dev && tok[l] > most)
            most = tok[l];
    for (size_t l = 0; l < b->n; l++) {
        if (l == LIPI_LANG_NONE || !b->l[l].dev || !chars[l] || !tok[l])
            continue;
        double cost = est_cost(b, l, tok[l], chars[l]);
        /* Every dev language weighs as much as the biggest one (mass 1),
         * then the costlier ones more. */
        double v = pow(cost / best, p->exponent) * pow((double)most / (double)tok[l], p->mass) *
                   65536.0;
        /* At most 2^16 times weight 1: count * weight stays far from 2^64. */
        wt[l] = v > 4294967296.0 ? (uint64_t)1 << 32 : v < 1.0 ? 1 : (uint64_t)(v + 0.5);
    }
}

lipi_status lipi_balance_set_target(lipi_balance *b, const char *name, double ratio,
                                    lipi_error *err)
{
    if (!(ratio >= TARGET_MIN && ratio <= TARGET_MAX))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected a parity target in [%g, %g], found %g", TARGET_MIN,
                              TARGET_MAX, ratio);
    uint32_t t = (uint32_t)(ratio * TARGET_ONE + 0.5);
    if (!name || strcmp(name, "*") == 0) {
        b->target = t;
        return LIPI_OK;
    }
    size_t i = find_lang(b, name, strlen(name));
    if (!i)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "a parity target for '%s', which is no language of the "
                              "training data (a language file's name or a script of mixed "
                              "text such as Telu)",
                              name);
    b->l[i].target = t;
    return LIPI_OK;
}

double lipi_balance_dev_cost(const lipi_balance *b, uint32_t li, uint64_t tokens)
{
    if (li >= b->n || !b->l[li].dev_files)
        return 0.0;
    return (double)tokens / (double)b->l[li].dev_files * TARGET_ONE / (double)target_of(b, li);
}

/* ======================================================================== */
/* Dev-set tracker                                                           */
/* ======================================================================== */

typedef struct {
    uint64_t count;
    uint32_t off, len, lang, stamp;
} dev_word;

typedef struct {
    uint64_t key; /* UINT64_MAX: empty */
    uint32_t head;
} dev_slot;

typedef struct {
    uint32_t word, next;
} dev_node;

struct lipi_dev_track {
    size_t n_langs;
    uint64_t *tokens;
    dev_word *w;
    size_t n_words, words_cap;
    uint32_t *sym;
    size_t n_sym, sym_cap;
    dev_slot *slots;
    size_t cap, used;
    dev_node *nodes;
    size_t n_nodes, nodes_cap;
    uint32_t stamp;
};

static inline uint64_t dkey(uint32_t l, uint32_t r)
{
    return (uint64_t)l << 32 | r;
}

/* splitmix64's finalizer: every key bit reaches the low bits. */
static inline uint64_t mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static size_t dslot(const lipi_dev_track *t, uint64_t key)
{
    size_t mask = t->cap - 1;
    size_t i = (size_t)mix(key) & mask;
    while (t->slots[i].key != UINT64_MAX && t->slots[i].key != key)
        i = (i + 1) & mask;
    return i;
}

static lipi_status dslots_grow(lipi_dev_track *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 1 << 12;
    dev_slot *old = t->slots;
    size_t ocap = t->cap;
    t->slots = lipi_malloc(ncap * sizeof *t->slots);
    if (!t->slots) {
        t->slots = old;
        return LIPI_ENOMEM;
    }
    for (size_t i = 0; i < ncap; i++)
        t->slots[i].key = UINT64_MAX;
    t->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key != UINT64_MAX)
            t->slots[dslot(t, old[i].key)] = old[i];
    lipi_free(old);
    return LIPI_OK;
}

/* Notes that pair (l, r) occurs in word w. */
static lipi_status dev_note(lipi_dev_track *t, uint32_t l, uint32_t r, uint32_t w)
{
    if (l == NONE32 || r == NONE32)
        return LIPI_OK;
    if ((t->used + 1) * 2 > t->cap && dslots_grow(t) != LIPI_OK)
        return LIPI_ENOMEM;
    uint64_t key = dkey(l, r);
    size_t i = dslot(t, key);
    if (t->slots[i].key == UINT64_MAX) {
        t->slots[i].key = key;
        t->slots[i].head = NONE32;
        t->used++;
    }
    if (t->slots[i].head != NONE32 && t->nodes[t->slots[i].head].word == w)
        return LIPI_OK; /* the word's pair noted just now */
    if (t->n_nodes == t->nodes_cap) {
        void *p = t->nodes;
        if (t->n_nodes >= NONE32 - 1 ||
            lipi_grow(&p, &t->nodes_cap, t->n_nodes + 1, sizeof *t->nodes) != LIPI_OK)
            return LIPI_ENOMEM;
        t->nodes = p;
    }
    t->nodes[t->n_nodes] = (dev_node){w, t->slots[i].head};
    t->slots[i].head = (uint32_t)t->n_nodes++;
    return LIPI_OK;
}

void lipi_dev_track_free(lipi_dev_track *t)
{
    if (!t)
        return;
    lipi_free(t->tokens);
    lipi_free(t->w);
    lipi_free(t->sym);
    lipi_free(t->slots);
    lipi_free(t->nodes);
    lipi_free(t);
}

/* Appends the dev words of language li. */
static lipi_status track_lang(lipi_dev_track *t, const lipi_counts *dev, uint32_t li,
                              bool byte_units, lipi_unit_id_fn unit_id, void *ctx)
{
    size_t pos = 0;
    lipi_count_entry e;
    while (lipi_counts_next(dev, &pos, &e)) {
        if (t->n_words == t->words_cap) {
            void *p = t->w;
            if (lipi_grow(&p, &t->words_cap, t->n_words + 1, sizeof *t->w) != LIPI_OK)
                return LIPI_ENOMEM;
            t->w = p;
        }
        if (t->n_sym + e.len > t->sym_cap) {
            void *p = t->sym;
            if (lipi_grow(&p, &t->sym_cap, t->n_sym + e.len, sizeof *t->sym) != LIPI_OK)
                return LIPI_ENOMEM;
            t->sym = p;
        }
        if (t->n_sym + e.len >= NONE32 || t->n_words >= NONE32)
            return LIPI_ENOMEM;
        dev_word *dw = &t->w[t->n_words];
        *dw = (dev_word){e.count, (uint32_t)t->n_sym, 0, li, 0};
        uint32_t *s = t->sym + t->n_sym;
        for (size_t i = 0; i < e.len;) {
            uint32_t cp;
            size_t n = byte_units ? 1 : lipi_utf8_decode(e.word + i, e.len - i, &cp);
            if (n == 0)
                n = 1;
            uint32_t id = unit_id(ctx, e.word + i, n);
            if (id == NONE32)
                for (size_t k = 0; k < n; k++)
                    s[dw->len++] = NONE32; /* byte fallback: a token per byte */
            else
                s[dw->len++] = id;
            i += n;
        }
        t->n_sym += dw->len;
        unsigned __int128 add = (unsigned __int128)e.count * dw->len;
        t->tokens[li] = add + t->tokens[li] > UINT64_MAX ? UINT64_MAX : t->tokens[li] + (uint64_t)add;
        for (uint32_t k = 0; k + 1 < dw->len; k++)
            if (dev_note(t, s[k], s[k + 1], (uint32_t)t->n_words) != LIPI_OK)
                return LIPI_ENOMEM;
        t->n_words++;
    }
    return LIPI_OK;
}

lipi_status lipi_dev_track_new(const lipi_balance *b, bool byte_units, lipi_unit_id_fn unit_id,
                               void *ctx, lipi_dev_track **out)
{
    lipi_status st = LIPI_OK;
    *out = NULL;
    lipi_dev_track *t = lipi_calloc(1, sizeof *t);
    if (!t)
        return LIPI_ENOMEM;
    t->n_langs = b->n;
    t->tokens = lipi_calloc(b->n, sizeof *t->tokens);
    if (!t->tokens || dslots_grow(t) != LIPI_OK) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (uint32_t li = 1; li < b->n; li++)
        if (b->l[li].dev)
            TRY(track_lang(t, b->l[li].dev, li, byte_units, unit_id, ctx));
    *out = t;
    t = NULL;
done:
    lipi_dev_track_free(t);
    return st;
}

lipi_status lipi_dev_track_merge(lipi_dev_track *t, uint32_t x, uint32_t y, uint32_t z)
{
    size_t i = dslot(t, dkey(x, y));
    if (t->slots[i].key == UINT64_MAX)
        return LIPI_OK;
    uint32_t node = t->slots[i].head;
    t->slots[i].head = NONE32; /* the pair is gone from every word */
    if (++t->stamp == 0)
        t->stamp = 1;
    for (; node != NONE32; node = t->nodes[node].next) {
        uint32_t w = t->nodes[node].word;
        dev_word *dw = &t->w[w];
        if (dw->stamp == t->stamp)
            continue;
        dw->stamp = t->stamp;
        uint32_t *s = t->sym + dw->off;
        uint32_t j = 0, merged = 0;
        for (uint32_t k = 0; k < dw->len;) {
            if (s[k] == x && k + 1 < dw->len && s[k + 1] == y) {
                s[j++] = z;
                k += 2;
                merged++;
            } else {
                s[j++] = s[k++];
            }
        }
        if (!merged)
            continue; /* a stale entry */
        dw->len = j;
        t->tokens[dw->lang] -= dw->count * merged;
        for (uint32_t k = 0; k < j; k++)
            if (s[k] == z) {
                if (k > 0 && dev_note(t, s[k - 1], z, w) != LIPI_OK)
                    return LIPI_ENOMEM;
                if (k + 1 < j && dev_note(t, z, s[k + 1], w) != LIPI_OK)
                    return LIPI_ENOMEM;
            }
    }
    return LIPI_OK;
}

const uint64_t *lipi_dev_track_tokens(const lipi_dev_track *t)
{
    return t->tokens;
}

/* Snapshots: a whole opened tokenizer kept on disk, so that the next
 * process that opens the same files reads one file instead of parsing them
 * and building the vocabulary and merge maps again (issue 20: ready to
 * encode in tens of milliseconds).
 *
 * lipi_tokenizer_open keys a snapshot by the SHA-256 of every file the
 * reader reads, the reader, the options that change what it builds, the
 * snapshot format and the lipi build that wrote it (lipi_snapshot_key), so
 * a changed file or a rebuilt lipi is another name and a snapshot is never
 * stale. It lives beside the encoder's table cache
 * (tabcache.c: the same folder, header, checksum, temporary file and
 * rename, and the same switch, LIPI_CACHE=0 or table_cache OFF).
 *
 * What is in it: the model (vocabulary spans and arena, the token -> id
 * map, scores and merges, the model's settings) and
 * the added tokens as arrays, read back into place with one read each;
 * every other part (normalizer, pre-tokenizer, post-processor, decoder,
 * truncation, padding) as the tokenizer.json text of those sections, which
 * is small and goes through the tokenizer.json loader, as the readers of
 * other formats build them (read_impl.h). The file is untrusted: past the
 * header and checksum, every span, map slot and merge is checked to
 * point inside its arrays before anything uses it, and the added tokens go
 * through lipi_tokenizer_set_added's checks.
 *
 * Payload: 15 u64 (H_*), the 32 bytes of the two affixes, then the arrays
 * in the order lipi_snapshot_write puts them. */
#include "tokenizer/tokenizer_layout.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SNAP_KIND "snapshot"
/* Bump when the layout below changes. (A reader that builds another
 * tokenizer from the same files is another build: build_identity.)
 * 2: no pair -> rank map (nothing in the library read it; 8 MB of
 * o200k's 17 MB). */
#define SNAP_FORMAT 2
#ifdef LIPI_VERSION
#define SNAP_LIPI_VERSION LIPI_VERSION
#else
#define SNAP_LIPI_VERSION "unknown"
#endif

enum {
    H_JSON,      /* bytes of the JSON sections */
    H_TYPE,      /* lipi_model_type */
    H_FLAGS,     /* F_* */
    H_UNK_ID,    /* opt.unk_id, two's complement */
    H_MAX_CHARS, /* opt.max_input_chars_per_word */
    H_DROPOUT,   /* the double's bits */
    H_UNK_LEN,   /* bytes of unk_token; UINT64_MAX: NULL */
    H_N,         /* vocab.n */
    H_COUNT,     /* vocab.count */
    H_ARENA,     /* bytes of the vocabulary arena */
    H_SLOTS,     /* token map slots (0: no map) */
    H_MERGES,    /* n_merges */
    H_ADDED,     /* added tokens */
    H_ADDED_LEN, /* bytes of their contents */
    H_SCORES,    /* 1: scores[n] follow */
    H_WORDS
};

enum {
    F_BYTE_FALLBACK = 1 << 0,
    F_FUSE_UNK = 1 << 1,
    F_IGNORE_MERGES = 1 << 2,
    F_BYTE_LEVEL = 1 << 3,
    F_F32_SCORES = 1 << 4,
    F_RANK_IDS = 1 << 5,
    F_HAS_DROPOUT = 1 << 6,
    F_PREFIX_NULL = 1 << 7,
    F_SUFFIX_NULL = 1 << 8,
    F_MERGES_LEGACY = 1 << 9,
    F_ADDED_SHADOW = 1 << 10,
    F_ALL = (1 << 11) - 1
};

/* One added token on disk; its content follows in the contents block. */
typedef struct {
    uint32_t id, len, flags, pad;
} snap_added;

enum { A_SINGLE = 1, A_LSTRIP = 2, A_RSTRIP = 4, A_NORMALIZED = 8, A_SPECIAL = 16 };

/* A vocabulary span: offset in the arena (UINT32_MAX: a hole) and length. */
typedef struct {
    uint32_t off, len;
} snap_span;

/* The binary this code runs in (the program, liblipi.so or the Python
 * extension): its size, modification time and inode, so that a rebuilt
 * lipi, whose readers may build another tokenizer from the same files,
 * never reads the snapshots of the old one (a developer's cache outlives
 * builds; SNAP_FORMAT and the version only change with releases). ""
 * when it cannot be found. One dladdr and one stat. */
static size_t build_identity(char *out, size_t cap)
{
    Dl_info info;
    struct stat sb;
    out[0] = '\0';
    if (!dladdr((void *)build_identity, &info) || !info.dli_fname ||
        stat(info.dli_fname, &sb) != 0)
        return 0;
    int n = snprintf(out, cap, "%llu %lld.%09ld %llu", (unsigned long long)sb.st_size,
                     (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec,
                     (unsigned long long)sb.st_ino);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

bool lipi_snapshot_key(const char *reader, const lipi_strref *parts, size_t n,
                       const void *settings, size_t settings_len, char key[65])
{
    /* The format is in the kind and lipi's version in the settings:
     * another format or release, another name (see SNAP_FORMAT). */
    char kind[16], build[128];
    lipi_buf b = {0};
    snprintf(kind, sizeof kind, "snap%d-%s", SNAP_FORMAT, reader);
    size_t build_len = build_identity(build, sizeof build);
    bool ok = lipi_buf_append(&b, SNAP_LIPI_VERSION, sizeof SNAP_LIPI_VERSION) == LIPI_OK &&
              lipi_buf_append(&b, build, build_len + 1) == LIPI_OK &&
              lipi_buf_append(&b, settings, settings_len) == LIPI_OK &&
              lipi_tabcache_key(kind, parts, n, b.p, b.len, key) == LIPI_OK;
    lipi_buf_free(&b);
    return ok;
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

/* The JSON of every section but the model's vocabulary and merges and the
 * added tokens (those are written as arrays). */
static bool sections_json(const lipi_tokenizer *t, char **json, size_t *len)
{
    lipi_tokenizer shell = *t;
    memset(&shell.model, 0, sizeof shell.model);
    shell.model.type = t->model.type;
    shell.model.opt = t->model.opt;
    shell.added = NULL;
    shell.n_added = 0;
    return lipi_tokenizer_to_json(&shell, json, len, NULL) == LIPI_OK;
}

void lipi_snapshot_write(const char key[65], const lipi_tokenizer *t)
{
    const lipi_vocab_model *m = &t->model;
    const lipi_vocab *v = &m->vocab;
    char *json = NULL;
    size_t json_len = 0, arena = 0, added_len = 0;
    snap_span *spans = NULL;
    snap_added *added = NULL;
    lipi_tabcache_writer w;
    uint64_t h[H_WORDS] = {0};
    lipi_buf contents = {0};

    if (m->type == LIPI_MODEL_NONE || v->n >= UINT32_MAX || !sections_json(t, &json, &json_len))
        goto done;
    spans = lipi_calloc(v->n ? v->n : 1, sizeof *spans);
    added = lipi_calloc(t->n_added ? t->n_added : 1, sizeof *added);
    if (!spans || !added)
        goto done;
    for (size_t i = 0; i < v->n; i++) {
        const lipi_strref *k = &v->tok[i];
        spans[i].off = UINT32_MAX;
        if (!k->s)
            continue;
        /* Every token lives in the arena, NUL after it (lipi_vocab_build). */
        if (k->s < v->arena || (size_t)(k->s - v->arena) >= UINT32_MAX - k->len - 1 ||
            k->len >= UINT32_MAX)
            goto done;
        spans[i].off = (uint32_t)(k->s - v->arena);
        spans[i].len = (uint32_t)k->len;
        if (spans[i].off + k->len + 1 > arena)
            arena = spans[i].off + k->len + 1;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const lipi_added_token *a = &t->added[i];
        if (a->len >= UINT32_MAX || added_len > SIZE_MAX - a->len)
            goto done;
        added[i] = (snap_added){
            .id = a->id,
            .len = (uint32_t)a->len,
            .flags = (a->single_word ? A_SINGLE : 0) | (a->lstrip ? A_LSTRIP : 0) |
                     (a->rstrip ? A_RSTRIP : 0) | (a->normalized ? A_NORMALIZED : 0) |
                     (a->special ? A_SPECIAL : 0),
        };
        added_len += a->len;
        if (lipi_buf_append(&contents, a->content, a->len) != LIPI_OK)
            goto done;
    }
    h[H_JSON] = json_len;
    h[H_TYPE] = (uint64_t)m->type;
    h[H_FLAGS] = (m->opt.byte_fallback ? F_BYTE_FALLBACK : 0) | (m->opt.fuse_unk ? F_FUSE_UNK : 0) |
                 (m->opt.ignore_merges ? F_IGNORE_MERGES : 0) |
                 (m->opt.byte_level ? F_BYTE_LEVEL : 0) | (m->f32_scores ? F_F32_SCORES : 0) |
                 (m->rank_ids ? F_RANK_IDS : 0) | (m->has_dropout ? F_HAS_DROPOUT : 0) |
                 (m->prefix_null ? F_PREFIX_NULL : 0) | (m->suffix_null ? F_SUFFIX_NULL : 0) |
                 (m->merges_legacy ? F_MERGES_LEGACY : 0) |
                 (t->added_may_shadow ? F_ADDED_SHADOW : 0);
    h[H_UNK_ID] = (uint64_t)m->opt.unk_id;
    h[H_MAX_CHARS] = m->opt.max_input_chars_per_word;
    memcpy(&h[H_DROPOUT], &m->dropout, 8);
    h[H_UNK_LEN] = m->unk_token ? m->unk_len : UINT64_MAX;
    h[H_N] = v->n;
    h[H_COUNT] = v->count;
    h[H_ARENA] = arena;
    h[H_SLOTS] = v->map.slot ? v->map.mask + 1 : 0;
    h[H_MERGES] = m->merges ? m->n_merges : 0;
    h[H_ADDED] = t->n_added;
    h[H_ADDED_LEN] = added_len;
    h[H_SCORES] = m->scores != NULL;

    if (!lipi_tabcache_create(&w, SNAP_KIND, key))
        goto done;
    for (int i = 0; i < H_WORDS; i++)
        lipi_tabcache_put_u64(&w, h[i]);
    lipi_tabcache_put(&w, m->opt.continuing_subword_prefix, 16);
    lipi_tabcache_put(&w, m->opt.end_of_word_suffix, 16);
    lipi_tabcache_put(&w, json, json_len);
    if (m->unk_token)
        lipi_tabcache_put(&w, m->unk_token, m->unk_len);
    lipi_tabcache_put(&w, spans, v->n * sizeof *spans);
    lipi_tabcache_put(&w, v->arena, arena);
    lipi_tabcache_put(&w, v->map.slot, h[H_SLOTS] * sizeof *v->map.slot);
    if (m->scores)
        lipi_tabcache_put(&w, m->scores, v->n * sizeof *m->scores);
    lipi_tabcache_put(&w, m->merges, h[H_MERGES] * sizeof *m->merges);
    lipi_tabcache_put(&w, added, t->n_added * sizeof *added);
    lipi_tabcache_put(&w, contents.p, contents.len);
    lipi_tabcache_commit(&w);
done:
    lipi_free(json);
    lipi_free(spans);
    lipi_free(added);
    lipi_buf_free(&contents);
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

static bool pow2(uint64_t x)
{
    return x && (x & (x - 1)) == 0;
}

/* Whether the model's arrays hold only what the encoder may index with:
 * spans inside the arena and NUL-terminated there, map slots naming tokens
 * (and at least one free slot, so every probe ends), merges of ids below n.
 * Fills tok[0..n) from the spans on the way (one pass over them). */
static bool model_ok(const uint64_t *h, const snap_span *spans, const char *arena,
                     const uint32_t *slots, const lipi_merge *merges, lipi_strref *tok)
{
    uint64_t n = h[H_N], count = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (spans[i].off == UINT32_MAX) {
            if (spans[i].len)
                return false;
            continue;
        }
        if ((uint64_t)spans[i].off + spans[i].len >= h[H_ARENA] ||
            arena[spans[i].off + spans[i].len] != '\0')
            return false;
        tok[i] = (lipi_strref){arena + spans[i].off, spans[i].len};
        count++;
    }
    if (count != h[H_COUNT])
        return false;
    /* Ids first, 8 at a time (the scalar loops were 7M of o200k's warm
     * load under callgrind); whether a slot names a hole only when there
     * are holes. */
    size_t empty, none;
    if (!lipi_u32_all_below(slots, (size_t)h[H_SLOTS], n, LIPI_MAP_EMPTY, &empty))
        return false;
    for (uint64_t i = 0; count != n && i < h[H_SLOTS]; i++)
        if (slots[i] != LIPI_MAP_EMPTY && spans[slots[i]].off == UINT32_MAX)
            return false;
    if (h[H_SLOTS] && h[H_SLOTS] - empty != count)
        return false;
    /* A merge is three ids: the array is 3 * H_MERGES of them. */
    _Static_assert(sizeof(lipi_merge) == 3 * sizeof(uint32_t), "merges are id triples");
    return !h[H_MERGES] || (lipi_u32_all_below((const uint32_t *)merges, 3 * (size_t)h[H_MERGES],
                                               n, UINT32_MAX, &none) &&
                            none == 0);
}

/* The added tokens of the file, contents copied (owned), or NULL. */
static lipi_added_token *get_added(lipi_tabcache_map *f, const uint64_t *h)
{
    uint64_t n = h[H_ADDED], total = 0;
    const snap_added *rec = n ? lipi_tabcache_map_next(f, n, sizeof *rec) : NULL;
    const char *text = h[H_ADDED_LEN] ? lipi_tabcache_map_next(f, h[H_ADDED_LEN], 1) : NULL;
    lipi_added_token *a = NULL;

    if ((n && !rec) || (h[H_ADDED_LEN] && !text) || !(a = lipi_calloc(n ? (size_t)n : 1, sizeof *a)))
        return NULL;
    for (uint64_t i = 0; i < n; i++) {
        if (rec[i].len > h[H_ADDED_LEN] - total || rec[i].flags & ~31u ||
            !(a[i].content = lipi_strndup(text + total, rec[i].len)))
            goto bad;
        a[i].len = rec[i].len;
        a[i].id = rec[i].id;
        a[i].single_word = rec[i].flags & A_SINGLE;
        a[i].lstrip = rec[i].flags & A_LSTRIP;
        a[i].rstrip = rec[i].flags & A_RSTRIP;
        a[i].normalized = rec[i].flags & A_NORMALIZED;
        a[i].special = rec[i].flags & A_SPECIAL;
        total += rec[i].len;
    }
    if (total == h[H_ADDED_LEN])
        return a;
bad:
    for (uint64_t i = 0; i < n; i++)
        lipi_free(a[i].content);
    lipi_free(a);
    return NULL;
}

/* The next array of count entries, or NULL for none; *ok false when the
 * file holds fewer. */
static const void *next(lipi_tabcache_map *f, uint64_t count, size_t size, bool *ok)
{
    if (!count)
        return NULL;
    const void *p = lipi_tabcache_map_next(f, count, size);
    *ok = *ok && p;
    return p;
}

bool lipi_snapshot_read(const char key[65], lipi_tokenizer **out)
{
    lipi_tabcache_map f;
    uint64_t h[H_WORDS];
    lipi_added_token *added = NULL;
    lipi_vocab_model m = {0};
    lipi_tokenizer *t = NULL;
    bool ok = true;

    *out = NULL;
    m.opt.unk_id = -1;
    if (!lipi_tabcache_map_open(&f, SNAP_KIND, key))
        return false;
    /* The model owns the mapping from here on: clearing it unmaps. */
    m.mapped = f.base;
    m.mapped_len = f.size;
    const uint64_t *hp = next(&f, H_WORDS, 8, &ok);
    const char *affix = next(&f, 32, 1, &ok);
    if (!ok)
        goto fail;
    memcpy(h, hp, sizeof h);
    /* The counts, before anything is taken for them. */
    if (affix[15] || affix[31] || h[H_TYPE] < LIPI_MODEL_BPE || h[H_TYPE] > LIPI_MODEL_WORDLEVEL ||
        h[H_FLAGS] & ~(uint64_t)F_ALL || h[H_N] >= UINT32_MAX || h[H_COUNT] > h[H_N] ||
        h[H_ARENA] >= UINT32_MAX || (h[H_SLOTS] && (!pow2(h[H_SLOTS]) || h[H_SLOTS] <= h[H_COUNT])) ||
        h[H_SCORES] > 1 ||
        (h[H_SCORES] != (h[H_TYPE] == LIPI_MODEL_UNIGRAM)) ||
        ((int64_t)h[H_UNK_ID] < -1 || (int64_t)h[H_UNK_ID] >= (int64_t)h[H_N]) ||
        h[H_MERGES] >= UINT32_MAX || h[H_JSON] == 0)
        goto fail;
    const char *json = next(&f, h[H_JSON], 1, &ok);
    if (ok && h[H_UNK_LEN] != UINT64_MAX) {
        const char *unk = h[H_UNK_LEN] ? next(&f, h[H_UNK_LEN], 1, &ok) : "";
        if (!ok || !(m.unk_token = lipi_strndup(unk, h[H_UNK_LEN])))
            goto fail;
        m.unk_len = h[H_UNK_LEN];
    }
    const snap_span *spans = next(&f, h[H_N], sizeof *spans, &ok);
    m.vocab.arena = (char *)next(&f, h[H_ARENA], 1, &ok);
    m.vocab.map.slot = (uint32_t *)next(&f, h[H_SLOTS], sizeof *m.vocab.map.slot, &ok);
    if (h[H_SCORES])
        m.scores = (double *)next(&f, h[H_N], sizeof *m.scores, &ok);
    m.merges = (lipi_merge *)next(&f, h[H_MERGES], sizeof *m.merges, &ok);
    if (!ok || !(added = get_added(&f, h)) || f.left != 0)
        goto fail;
    m.vocab.tok = lipi_calloc(h[H_N] ? h[H_N] : 1, sizeof *m.vocab.tok);
    if (!m.vocab.tok || !model_ok(h, spans, m.vocab.arena, m.vocab.map.slot, m.merges, m.vocab.tok))
        goto fail;

    m.type = (lipi_model_type)h[H_TYPE];
    m.opt.unk_id = (int64_t)h[H_UNK_ID];
    m.opt.max_input_chars_per_word = h[H_MAX_CHARS];
    m.opt.byte_fallback = h[H_FLAGS] & F_BYTE_FALLBACK;
    m.opt.fuse_unk = h[H_FLAGS] & F_FUSE_UNK;
    m.opt.ignore_merges = h[H_FLAGS] & F_IGNORE_MERGES;
    m.opt.byte_level = h[H_FLAGS] & F_BYTE_LEVEL;
    memcpy(m.opt.continuing_subword_prefix, affix, 16);
    memcpy(m.opt.end_of_word_suffix, affix + 16, 16);
    m.f32_scores = h[H_FLAGS] & F_F32_SCORES;
    m.rank_ids = h[H_FLAGS] & F_RANK_IDS;
    m.has_dropout = h[H_FLAGS] & F_HAS_DROPOUT;
    memcpy(&m.dropout, &h[H_DROPOUT], 8);
    m.prefix_null = h[H_FLAGS] & F_PREFIX_NULL;
    m.suffix_null = h[H_FLAGS] & F_SUFFIX_NULL;
    m.merges_legacy = h[H_FLAGS] & F_MERGES_LEGACY;
    m.n_merges = h[H_MERGES];
    m.vocab.n = h[H_N];
    m.vocab.count = h[H_COUNT];
    m.vocab.map.mask = h[H_SLOTS] ? h[H_SLOTS] - 1 : 0;

    /* The model (and with it the mapping) is stolen whatever happens. */
    if (lipi_tokenizer_load_json_model(json, h[H_JSON], "snapshot", &m, &t, NULL) != LIPI_OK)
        goto fail;
    t->added_may_shadow = h[H_FLAGS] & F_ADDED_SHADOW;
    /* set_added steals the array and contents whatever it returns. */
    lipi_status st = lipi_tokenizer_set_added(t, added, h[H_ADDED], NULL);
    added = NULL;
    if (st != LIPI_OK)
        goto fail;
    *out = t;
    t = NULL;
fail:
    if (added)
        for (uint64_t i = 0; i < h[H_ADDED]; i++)
            lipi_free(added[i].content);
    lipi_free(added);
    lipi_tokenizer_free(t);
    lipi_vocab_model_clear(&m);
    return *out != NULL;
}

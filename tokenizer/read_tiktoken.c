/* tiktoken rank files: lines "<base64 token bytes> <rank>".
 *
 * tiktoken encodes a piece by merging, again and again, the adjacent pair
 * whose concatenation has the lowest rank. Hugging Face's tiktoken
 * converter turns that into an ordinary byte-level BPE: the vocabulary is
 * the tokens in the GPT-2 byte alphabet with their ranks as ids, and each
 * multi-byte token gets one merge, found by running that rank-BPE on the
 * token's own bytes with only lower ranks allowed; the two parts it ends
 * with are the merge. Merges come in the order of their tokens' ranks, so
 * merge priority is token rank, as in tiktoken. "ignore_merges" makes a
 * piece that is a token whole map to it directly, as tiktoken's first
 * lookup does.
 */
#include "tokenizer/read_impl.h"

#include <string.h>

/* ======================================================================== */
/* The published encodings                                                   */
/* ======================================================================== */

static const lipi_special_token r50k_special[] = {{"<|endoftext|>", 50256}};
static const lipi_special_token cl100k_special[] = {
    {"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259},
    {"<|fim_suffix|>", 100260}, {"<|endofprompt|>", 100276},
};
static const lipi_special_token o200k_special[] = {
    {"<|endoftext|>", 199999},
    {"<|endofprompt|>", 200018},
};

/* The published encodings, as tiktoken's tiktoken_ext/openai_public.py
 * defines them, with the SHA-256 of OpenAI's rank file (its expected_hash):
 * a file of one of these names that differs from it is refused. p50k_base
 * ranks 0..50280 but for 50256, the id of <|endoftext|> (50281 ids, its
 * explicit_n_vocab); r50k_base ranks 0..50255 (50257 ids). */
static const struct {
    const char *name;
    const char *pattern; /* lipi_split_pattern name: as npm tiktoken (OpenAI's Rust
                          * core) ships it, which made tests/fixtures/readers */
    const lipi_special_token *special;
    size_t n_special;
    const char *sha256;
} builtin[] = {
    {"r50k_base", "gpt2", r50k_special, 1,
     "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"},
    {"p50k_base", "gpt2", r50k_special, 1,
     "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"},
    {"cl100k_base", "cl100k-tiktoken", cl100k_special, 5,
     "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"},
    {"o200k_base", "o200k-tiktoken", o200k_special, 2,
     "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"},
};

/* The entry of name[0..len), SIZE_MAX for none. */
static size_t builtin_index(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (strlen(builtin[i].name) == len && memcmp(builtin[i].name, name, len) == 0)
            return i;
    return SIZE_MAX;
}

bool lipi_rd_tiktoken_builtin(const char *name, size_t len, const char **pattern,
                              const lipi_special_token **special, size_t *n_special)
{
    size_t i = builtin_index(name, len);
    if (i == SIZE_MAX)
        return false;
    *pattern = lipi_split_pattern(builtin[i].pattern);
    *special = builtin[i].special;
    *n_special = builtin[i].n_special;
    return true;
}

lipi_status lipi_rd_tiktoken_verify(const char *name, size_t len, const char *data,
                                    size_t data_len, const char *path, lipi_error *err)
{
    size_t i = builtin_index(name, len);
    char got[65];
    if (i == SIZE_MAX)
        return LIPI_OK;
    if (lipi_sha256_hex(data, data_len, got) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory (SHA-256)");
    if (strcmp(got, builtin[i].sha256) == 0)
        return LIPI_OK;
    return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                          "expected sha256 %s (OpenAI's published %s), found %s; the file is "
                          "truncated or modified",
                          builtin[i].sha256, builtin[i].name, got);
}

/* ======================================================================== */
/* Reading the ranks                                                         */
/* ======================================================================== */

typedef struct {
    size_t off, len; /* decoded bytes in the arena */
    uint32_t rank;
    size_t line;
} tt_entry;

static lipi_status line_error(const char *name, size_t line, size_t col, lipi_error *err,
                              const char *what, const char *found)
{
    return lipi_error_set(err, LIPI_EFORMAT, name, line, col, "expected %s, found %s", what,
                          found);
}

/* Parses every line into entries (tokens decoded into arena). */
static lipi_status parse_lines(const char *data, size_t len, const char *name, tt_entry **out,
                               size_t *n_out, uint8_t **arena_out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t lines = 1, n = 0, used = 0;
    tt_entry *e = NULL;
    uint8_t *arena = NULL;

    for (const char *p = data; (p = memchr(p, '\n', (size_t)(data + len - p))); p++)
        lines++;
    e = lipi_calloc(lines, sizeof *e);
    arena = lipi_malloc(len / 4 * 3 + 1);
    if (!e || !arena) {
        st = lipi_error_set(err, LIPI_ENOMEM, name, 0, 0, "out of memory");
        goto done;
    }

    const char *p = data, *end = data + len;
    for (size_t line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le > p && le[-1] == '\r')
            le--;
        if (le == p) {
            p = nl ? nl + 1 : end;
            continue;
        }
        const char *sp = memchr(p, ' ', (size_t)(le - p));
        if (!sp) {
            st = line_error(name, line, (size_t)(le - p) + 1, err,
                            "\"<base64 token> <rank>\"", "no space");
            goto done;
        }
        size_t dlen = 0, bad = 0;
        if (sp == p) {
            st = line_error(name, line, 1, err, "a base64 token", "an empty one");
            goto done;
        }
        if (!lipi_base64_decode(p, (size_t)(sp - p), false, arena + used, &dlen, &bad)) {
            char found[32];
            if (bad == (size_t)(sp - p))
                snprintf(found, sizeof found, "%zu characters", bad);
            else
                snprintf(found, sizeof found, "'%c' (byte 0x%02x)",
                         (unsigned char)p[bad] >= 0x20 && (unsigned char)p[bad] < 0x7f ? p[bad] : '?',
                         (unsigned char)p[bad]);
            st = line_error(name, line, bad + 1, err,
                            bad == (size_t)(sp - p) ? "base64 of a length divisible by 4"
                                                    : "a base64 character",
                            found);
            goto done;
        }
        uint64_t rank = 0;
        const char *r = sp + 1;
        if (r == le) {
            st = line_error(name, line, (size_t)(r - p) + 1, err, "a rank", "the end of the line");
            goto done;
        }
        for (; r < le; r++) {
            if (*r < '0' || *r > '9' || rank > UINT32_MAX / 10) {
                char found[32];
                if (*r < '0' || *r > '9')
                    snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)*r);
                else
                    snprintf(found, sizeof found, "a larger number");
                st = line_error(name, line, (size_t)(r - p) + 1, err,
                                "a decimal rank below 4294967295", found);
                goto done;
            }
            rank = rank * 10 + (uint64_t)(*r - '0');
        }
        if (rank >= UINT32_MAX) {
            st = line_error(name, line, (size_t)(sp - p) + 2, err,
                            "a decimal rank below 4294967295", "a larger number");
            goto done;
        }
        e[n++] = (tt_entry){used, dlen, (uint32_t)rank, line};
        used += dlen;
        p = nl ? nl + 1 : end;
    }
    *out = e;
    *n_out = n;
    *arena_out = arena;
    e = NULL;
    arena = NULL;
done:
    lipi_free(e);
    lipi_free(arena);
    return st;
}

/* ======================================================================== */
/* Merges                                                                    */
/* ======================================================================== */

/* Token bytes -> rank. Recovering the merges looks up a few million byte
 * strings, nearly all short, and the time goes into cache misses. So a
 * slot holds everything a lookup needs: keys of up to 8 bytes are stored
 * in it whole (and so compare exactly without touching the token bytes),
 * longer ones by a 64-bit hash that is confirmed against the bytes. */
typedef struct {
    uint64_t key;   /* the bytes (len <= 8) or their hash */
    uint32_t rank;
    uint32_t len;   /* UINT32_MAX: empty slot */
} tt_slot;

typedef struct {
    tt_slot *slot;
    size_t mask;
    const uint8_t *arena;
    const tt_entry *by_rank_e; /* entries sorted by rank, n of them */
    size_t n;
    uint32_t *pair; /* 65536 ranks of the 2-byte tokens, for the commonest lookup */
} tt_map;

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 31;
    h *= 0x7fb5d329728ea185ULL;
    h ^= h >> 27;
    h *= 0x81dadef4bc2dd44dULL;
    return h ^ (h >> 33);
}

/* The slot key of s[0..n). */
static uint64_t tt_key(const uint8_t *s, size_t n)
{
    uint64_t w = 0;
    if (n <= 8) {
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)s[i] << (8 * i);
        return w;
    }
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = mix64(h ^ w);
        s += 8;
        n -= 8;
    }
    w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)s[i] << (8 * i);
    return mix64(h ^ w ^ 0x5555555555555555ULL);
}

static size_t tt_home(const tt_map *m, uint64_t key, size_t n)
{
    return (size_t)mix64(key + n) & m->mask;
}

/* Bytes of the token of rank r (the entries are sorted by rank). */
static const uint8_t *tt_bytes(const tt_map *m, uint32_t rank)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->by_rank_e[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return m->arena + m->by_rank_e[lo].off;
}

/* Rank of the bytes s[0..n), or UINT32_MAX when they are not a token. */
static uint32_t rank_of(const tt_map *m, const uint8_t *s, size_t n)
{
    if (n == 2)
        return m->pair[s[0] << 8 | s[1]];
    uint64_t key = tt_key(s, n);
    for (size_t i = tt_home(m, key, n);; i = (i + 1) & m->mask) {
        const tt_slot *sl = &m->slot[i];
        if (sl->len == UINT32_MAX)
            return UINT32_MAX;
        if (sl->key == key && sl->len == n &&
            (n <= 8 || memcmp(tt_bytes(m, sl->rank), s, n) == 0))
            return sl->rank;
    }
}

/* Builds the map over entries e[0..n) (sorted by rank); on a repeated
 * token sets *d1 < *d2 to the two entries and returns LIPI_EINVAL. */
static lipi_status tt_map_build(tt_map *m, const uint8_t *arena, const tt_entry *e, size_t n,
                                size_t *d1, size_t *d2)
{
    size_t cap = 16;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4 / sizeof(tt_slot))
            return LIPI_ENOMEM;
        cap *= 2;
    }
    m->slot = lipi_reallocarray(NULL, cap, sizeof *m->slot);
    m->pair = lipi_reallocarray(NULL, 65536, sizeof *m->pair);
    if (!m->slot || !m->pair)
        return LIPI_ENOMEM;
    memset(m->pair, 0xff, 65536 * sizeof *m->pair);
    m->mask = cap - 1;
    m->arena = arena;
    m->by_rank_e = e;
    m->n = n;
    for (size_t i = 0; i < cap; i++)
        m->slot[i].len = UINT32_MAX;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *s = arena + e[k].off;
        uint64_t key = tt_key(s, e[k].len);
        size_t i = tt_home(m, key, e[k].len);
        while (m->slot[i].len != UINT32_MAX) {
            const tt_slot *sl = &m->slot[i];
            if (sl->key == key && sl->len == e[k].len &&
                (sl->len <= 8 || memcmp(tt_bytes(m, sl->rank), s, sl->len) == 0)) {
                size_t lo = 0;
                while (e[lo].rank != sl->rank)
                    lo++;
                *d1 = lo;
                *d2 = k;
                return LIPI_EINVAL;
            }
            i = (i + 1) & m->mask;
        }
        m->slot[i] = (tt_slot){key, e[k].rank, (uint32_t)e[k].len};
        if (e[k].len == 2)
            m->pair[s[0] << 8 | s[1]] = e[k].rank;
    }
    return LIPI_OK;
}

/* Runs rank-BPE on the bytes of a token of rank `max`, allowing only
 * merges of lower rank; when it ends with two parts, writes their ranks to
 * *left, *right and returns true. start[] and pr[] are scratch of at
 * least n + 1 entries. */
static bool recover_merge(const tt_map *lk, const uint8_t *s, size_t n, uint32_t max,
                          size_t *start, uint32_t *pr, uint32_t *left, uint32_t *right)
{
    size_t parts = n;
    for (size_t i = 0; i <= n; i++)
        start[i] = i;
    /* pr[i]: rank of parts i and i + 1 joined (UINT32_MAX: none). */
    for (size_t i = 0; i + 1 < parts; i++)
        pr[i] = rank_of(lk, s + start[i], start[i + 2] - start[i]);
    while (parts > 2) {
        size_t best = SIZE_MAX;
        uint32_t r = UINT32_MAX;
        for (size_t i = 0; i + 1 < parts; i++) {
            if (pr[i] < r) {
                r = pr[i];
                best = i;
            }
        }
        if (best == SIZE_MAX || r >= max)
            return false;
        memmove(start + best + 1, start + best + 2, (parts - best - 1) * sizeof *start);
        memmove(pr + best, pr + best + 1, (parts - best - 2) * sizeof *pr);
        parts--;
        if (best > 0)
            pr[best - 1] = rank_of(lk, s + start[best - 1], start[best + 1] - start[best - 1]);
        if (best + 1 < parts)
            pr[best] = rank_of(lk, s + start[best], start[best + 2] - start[best]);
    }
    if (parts != 2)
        return false;
    *left = rank_of(lk, s, start[1]);
    *right = rank_of(lk, s + start[1], n - start[1]);
    return *left != UINT32_MAX && *right != UINT32_MAX;
}

/* Tokens longer than this get no merge (ignore_merges still maps a piece
 * that is such a token to it): recovering a merge costs the square of the
 * token's length, and a hostile file could hold megabyte-long tokens. The
 * published encodings stay at 128 bytes. */
#define TT_MERGE_MAX_LEN 256

/* ======================================================================== */
/* Merges in the table cache                                                 */
/* ======================================================================== */

/* The recovered merges depend only on the tokens and their ranks, so the
 * cache keys them by both. Payload: per entry (in rank order) the ranks of
 * its merge's two parts, or UINT32_MAX twice for none. */
static lipi_status merges_key(const uint8_t *arena, const tt_entry *e, size_t n, char key[65])
{
    lipi_status st = LIPI_OK;
    lipi_strref *keys = lipi_reallocarray(NULL, n ? n : 1, sizeof *keys);
    uint32_t *ranks = lipi_reallocarray(NULL, n ? n : 1, sizeof *ranks);
    if (!keys || !ranks) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        keys[i] = (lipi_strref){(const char *)arena + e[i].off, e[i].len};
        ranks[i] = e[i].rank;
    }
    st = lipi_tabcache_key("tiktoken-merges", keys, n, ranks, n * sizeof *ranks, key);
done:
    lipi_free(keys);
    lipi_free(ranks);
    return st;
}

/* Reads the cached merges into parts[n][2] and checks them: each is two
 * tokens of lower rank whose bytes joined are the entry's (so a merge
 * lipi_merges_build accepts), only for entries that recover_merge tries. */
static bool merges_load(const char key[65], const uint8_t *arena, const tt_entry *e, size_t n,
                        size_t n_ids, uint32_t (*parts)[2])
{
    lipi_tabcache_reader r;
    bool ok = false;
    uint32_t *at = NULL; /* entry of each rank, UINT32_MAX: none */
    if (!lipi_tabcache_open(&r, "tiktoken-merges", key))
        return false;
    at = lipi_reallocarray(NULL, n_ids, sizeof *at);
    if (!at || !lipi_tabcache_get(&r, parts, n * sizeof *parts))
        goto done;
    memset(at, 0xff, n_ids * sizeof *at);
    for (size_t i = 0; i < n; i++)
        at[e[i].rank] = (uint32_t)i;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = parts[i][0], r2 = parts[i][1];
        if (l == UINT32_MAX && r2 == UINT32_MAX)
            continue;
        if (e[i].len < 2 || e[i].len > TT_MERGE_MAX_LEN || l >= e[i].rank || r2 >= e[i].rank ||
            at[l] == UINT32_MAX || at[r2] == UINT32_MAX)
            goto done;
        const tt_entry *a = &e[at[l]], *b = &e[at[r2]];
        if (a->len + b->len != e[i].len ||
            memcmp(arena + a->off, arena + e[i].off, a->len) != 0 ||
            memcmp(arena + b->off, arena + e[i].off + a->len, b->len) != 0)
            goto done;
    }
    ok = true;
done:
    lipi_free(at);
    return lipi_tabcache_close(&r) && ok;
}

static void merges_store(const char key[65], const uint32_t (*parts)[2], size_t n)
{
    lipi_tabcache_writer w;
    if (!lipi_tabcache_create(&w, "tiktoken-merges", key))
        return;
    lipi_tabcache_put(&w, parts, n * sizeof *parts);
    lipi_tabcache_commit(&w);
}

static int entry_rank_cmp(const void *a, const void *b)
{
    uint32_t x = ((const tt_entry *)a)->rank, y = ((const tt_entry *)b)->rank;
    return (x > y) - (x < y);
}

/* ======================================================================== */
/* The tokenizer                                                             */
/* ======================================================================== */

static json_t *tiktoken_doc(const char *pattern)
{
    json_t *doc = json_object(), *seq = json_array();
    bool ok = doc && seq && json_array_append_new(seq, lipi_rd_split(pattern, "Isolated")) == 0 &&
              json_array_append_new(seq, lipi_rd_bytelevel(false, true, false)) == 0 &&
              json_object_set_new(doc, "pre_tokenizer",
                                  lipi_rd_sequence("pretokenizers", json_incref(seq))) == 0;
    json_decref(seq);
    if (!ok) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* The 1-based column of the rank on line `line` of data[0..len) (a line
 * parse_lines accepted), for errors about ranks. */
static size_t rank_col(const char *data, size_t len, size_t line)
{
    const char *p = data, *end = data + len;
    for (size_t l = 1; l < line; l++)
        p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
    return (size_t)((const char *)memchr(p, ' ', (size_t)(end - p)) - p) + 2;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Checks that the ranks of e[0..n) (sorted, distinct) are 0..N-1, where
 * the ids of special[0..n_special) count as present. */
static lipi_status check_no_gaps(const tt_entry *e, size_t n, const lipi_special_token *special,
                                 size_t n_special, const char *data, size_t len,
                                 const char *name, lipi_error *err)
{
    /* Special ids sorted, so a walk finds the first missing rank in linear
     * time however many special tokens a meta file lists. */
    uint32_t *sp = lipi_reallocarray(NULL, n_special ? n_special : 1, sizeof *sp);
    lipi_status st = LIPI_OK;
    if (!sp)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < n_special; i++)
        sp[i] = special[i].id;
    qsort(sp, n_special, sizeof *sp, u32_cmp);
    uint32_t want = 0;
    for (size_t i = 0, k = 0; i < n; i++, want++) {
        for (; want < e[i].rank; want++) {
            while (k < n_special && sp[k] < want)
                k++;
            if (k == n_special || sp[k] != want)
                break;
        }
        if (e[i].rank != want) {
            st = lipi_error_set(err, LIPI_EFORMAT, name, e[i].line,
                                rank_col(data, len, e[i].line),
                                "expected rank %u, found %u: rank %u is missing (ranks run from 0 "
                                "without gaps unless \"allow_rank_gaps\" is true in the meta "
                                "file)",
                                want, e[i].rank, want);
            break;
        }
    }
    lipi_free(sp);
    return st;
}

lipi_status lipi_tokenizer_from_tiktoken(const char *data, size_t len, const char *name,
                                         const char *pattern,
                                         const lipi_special_token *special, size_t n_special,
                                         unsigned flags, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    tt_entry *e = NULL;
    size_t n = 0, n_ids = 0, n_merges = 0, max_len = 0, d1 = 0, d2 = 0;
    uint8_t *arena = NULL;
    lipi_strref *tok = NULL;
    tt_map map = {0};
    lipi_buf alpha = {0};
    size_t *alpha_off = NULL, *scratch_start = NULL;
    uint32_t *scratch_pr = NULL, (*merges)[2] = NULL, (*parts)[2] = NULL;
    char key[65];
    lipi_rd_bytemap bm;
    lipi_rd_model rm = {0};
    lipi_rd_added added = {0};

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no output pointer given");
    *out = NULL;
    if ((!data && len) || !pattern || (n_special && !special))
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0,
                              "no data, pattern or special tokens given");
    name = name ? name : "";
    if (lipi_utf8_valid_prefix(pattern, strlen(pattern)) < strlen(pattern))
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "the split pattern is not UTF-8");
    for (size_t i = 0; i < n_special; i++) {
        size_t sl = special[i].content ? strlen(special[i].content) : 0;
        if (sl == 0 || lipi_utf8_valid_prefix(special[i].content, sl) < sl ||
            special[i].id == UINT32_MAX)
            return lipi_error_set(err, LIPI_EINVAL, name, 0, 0,
                                  "special token %zu: expected UTF-8 text and an id below %u", i,
                                  UINT32_MAX);
    }
    TRY(parse_lines(data, len, name, &e, &n, &arena, err));
    if (n == 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                            "expected lines \"<base64 token> <rank>\", found none");
        goto done;
    }

    /* Ranks unique (checked in rank order) and not far beyond the number
     * of tokens, so the id arrays stay the size of the file. */
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = e[i - 1].rank <= e[i].rank;
    if (!sorted)
        qsort(e, n, sizeof *e, entry_rank_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && e[i].rank == e[i - 1].rank) {
            size_t a = e[i - 1].line < e[i].line ? e[i - 1].line : e[i].line;
            size_t b = e[i - 1].line < e[i].line ? e[i].line : e[i - 1].line;
            st = lipi_error_set(err, LIPI_EFORMAT, name, b, rank_col(data, len, b),
                                "expected distinct ranks, found rank %u again (first on line %zu)",
                                e[i].rank, a);
            goto done;
        }
        if (e[i].len == 0) {
            st = line_error(name, e[i].line, 1, err, "a token of at least one byte",
                            "an empty one");
            goto done;
        }
        if (e[i].len > max_len)
            max_len = e[i].len;
    }
    if (e[n - 1].rank >= 2 * n + 256) {
        st = lipi_error_set(err, LIPI_EFORMAT, name, e[n - 1].line,
                            rank_col(data, len, e[n - 1].line), "expected ranks below %zu for %zu tokens, found %u", 2 * n + 256, n,
                            e[n - 1].rank);
        goto done;
    }
    /* Ranks 0..N-1 without gaps, as every published encoding has them (an
     * id a special token takes is no gap: p50k_base's 50256 is
     * <|endoftext|>). A gap means lines went missing: refused unless the
     * caller says the file has them on purpose. */
    if (!(flags & LIPI_TIKTOKEN_ALLOW_RANK_GAPS))
        TRY(check_no_gaps(e, n, special, n_special, data, len, name, err));
    n_ids = (size_t)e[n - 1].rank + 1;

    st = tt_map_build(&map, arena, e, n, &d1, &d2);
    if (st == LIPI_EINVAL) {
        size_t a = e[d1].line < e[d2].line ? e[d1].line : e[d2].line;
        size_t b = e[d1].line < e[d2].line ? e[d2].line : e[d1].line;
        st = lipi_error_set(err, LIPI_EFORMAT, name, b, 0,
                            "expected distinct tokens, found the token of line %zu again", a);
        goto done;
    }
    if (st != LIPI_OK) {
        st = LIPI_ENOMEM;
        goto done;
    }

    for (size_t i = 0; i < n_special; i++) {
        uint32_t id = special[i].id;
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (e[mid].rank < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && e[lo].rank == id) {
            st = lipi_error_set(err, LIPI_EFORMAT, name, e[lo].line, 0,
                                "special token \"%s\" has id %u, which is the rank of this line",
                                special[i].content, id);
            goto done;
        }
    }

    /* Vocabulary in the byte alphabet, by rank. */
    lipi_rd_bytemap_init(&bm);
    alpha_off = lipi_calloc(n, sizeof *alpha_off);
    tok = lipi_calloc(n_ids, sizeof *tok);
    if (!alpha_off || !tok || lipi_buf_reserve(&alpha, len * 2) != LIPI_OK) {
        st = LIPI_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        alpha_off[i] = alpha.len;
        TRY(lipi_rd_bytes_to_alphabet(&bm, arena + e[i].off, e[i].len, &alpha));
    }
    for (size_t i = 0; i < n; i++) {
        size_t end = i + 1 < n ? alpha_off[i + 1] : alpha.len;
        tok[e[i].rank] = (lipi_strref){alpha.p + alpha_off[i], end - alpha_off[i]};
    }

    /* One merge per reachable multi-byte token, in rank order: parts[i]
     * for entry i (UINT32_MAX twice: none), from the table cache when it
     * has them. */
    merges = lipi_reallocarray(NULL, n, sizeof *merges);
    parts = lipi_reallocarray(NULL, n, sizeof *parts);
    if (max_len > TT_MERGE_MAX_LEN)
        max_len = TT_MERGE_MAX_LEN;
    scratch_start = lipi_reallocarray(NULL, max_len + 1, sizeof *scratch_start);
    scratch_pr = lipi_reallocarray(NULL, max_len + 1, sizeof *scratch_pr);
    if (!merges || !parts || !scratch_start || !scratch_pr) {
        st = LIPI_ENOMEM;
        goto done;
    }
    bool cache = (flags & LIPI_RD_TIKTOKEN_CACHE) && merges_key(arena, e, n, key) == LIPI_OK;
    if (!cache || !merges_load(key, arena, e, n, n_ids, parts)) {
        for (size_t i = 0; i < n; i++) {
            parts[i][0] = parts[i][1] = UINT32_MAX;
            if (e[i].len >= 2 && e[i].len <= TT_MERGE_MAX_LEN &&
                !recover_merge(&map, arena + e[i].off, e[i].len, e[i].rank, scratch_start,
                               scratch_pr, &parts[i][0], &parts[i][1]))
                parts[i][0] = parts[i][1] = UINT32_MAX;
        }
        if (cache)
            merges_store(key, (const uint32_t(*)[2])parts, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (parts[i][0] == UINT32_MAX)
            continue;
        merges[n_merges][0] = parts[i][0];
        merges[n_merges][1] = parts[i][1];
        n_merges++;
    }

    rm.type = LIPI_MODEL_BPE;
    lipi_model_options_default(LIPI_MODEL_BPE, &rm.opt);
    rm.opt.byte_level = true;
    rm.opt.ignore_merges = true;
    rm.tok = tok;
    rm.n = n_ids;
    rm.merges = (const uint32_t(*)[2])merges;
    rm.n_merges = n_merges;
    rm.prefix_null = rm.suffix_null = true;
    for (size_t i = 0; i < n_special; i++)
        TRY(lipi_rd_added_push(&added, special[i].id, special[i].content,
                               strlen(special[i].content), true, false));
    json_t *doc = tiktoken_doc(pattern);
    lipi_post_processor *post = lipi_rd_post_bytelevel();
    lipi_decoder *dec = lipi_rd_dec_bytelevel();
    if (!doc || !post || !dec) {
        json_decref(doc);
        lipi_post_processor_free(post);
        lipi_decoder_free(dec);
        st = LIPI_ENOMEM;
        goto done;
    }
    TRY(lipi_rd_assemble(name, doc, post, dec, &rm, &added, out, err));
    (*out)->model.rank_ids = true;
done:
    if (st == LIPI_ENOMEM)
        lipi_error_set(err, LIPI_ENOMEM, name, 0, 0, "out of memory");
    lipi_free(e);
    lipi_free(arena);
    lipi_free(tok);
    lipi_free(map.slot);
    lipi_free(map.pair);
    lipi_buf_free(&alpha);
    lipi_free(alpha_off);
    lipi_free(scratch_start);
    lipi_free(scratch_pr);
    lipi_free(merges);
    lipi_free(parts);
    lipi_rd_added_free(&added);
    return st;
}

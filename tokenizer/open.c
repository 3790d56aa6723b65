/* lipi_tokenizer_open: which reader a path needs, by its name and its
 * first bytes, and the files that sit beside it (tokenizer_config.json,
 * merges.txt, NAME.meta.json). */
#include "tokenizer/read_impl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ======================================================================== */
/* Paths                                                                     */
/* ======================================================================== */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* dir + "/" + file (dir may be "" for the current folder); NULL on OOM. */
static char *join(const char *dir, size_t dir_len, const char *file)
{
    lipi_buf b = {0};
    if ((dir_len && (lipi_buf_append(&b, dir, dir_len) != LIPI_OK ||
                     lipi_buf_append(&b, "/", 1) != LIPI_OK)) ||
        lipi_buf_append(&b, file, strlen(file)) != LIPI_OK) {
        lipi_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* The file `file` in the folder of `path`. */
static char *beside(const char *path, const char *file)
{
    const char *slash = strrchr(path, '/');
    return join(path, slash ? (size_t)(slash - path) : 0, file);
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static lipi_status oom(const char *path, lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
}

/* Reads `path` whole when it exists; *data = NULL (and LIPI_OK) when not. */
static lipi_status read_optional(const char *path, char **data, size_t *len, lipi_error *err)
{
    *data = NULL;
    *len = 0;
    if (!path || !is_file(path))
        return LIPI_OK;
    return lipi_read_file(path, LIPI_READ_MAX, data, len, err);
}

/* ======================================================================== */
/* Snapshots                                                                 */
/* ======================================================================== */

/* The snapshot key (snapshot.c) of what `reader` builds from parts[0..n)
 * (the bytes of every file it reads; s == NULL: absent) under opt and
 * `extra` (a setting of the caller's, "" for none); false when snapshots
 * are off (table_cache, settled by lipi_tokenizer_open) or out of memory. */
static bool snap_key(const lipi_open_options *opt, const char *reader, const lipi_strref *parts,
                     size_t n, const char *extra, size_t extra_len, char key[65])
{
    lipi_buf b = {0};
    char flags[2] = {(char)('0' + opt->lowercase), (char)('0' + opt->strip_accents)};
    bool ok = opt->table_cache == LIPI_FLAG_ON &&
              lipi_buf_append(&b, flags, sizeof flags) == LIPI_OK &&
              lipi_buf_append(&b, extra, extra_len) == LIPI_OK &&
              lipi_snapshot_key(reader, parts, n, b.p, b.len, key);
    lipi_buf_free(&b);
    return ok;
}

/* Before a reader builds: true, with *out read from the snapshot, when
 * there is one; else key[0] is '\0' when snapshots are off. */
static bool snap_get(const lipi_open_options *opt, const char *reader, const lipi_strref *parts,
                     size_t n, const char *extra, size_t extra_len, char key[65],
                     lipi_tokenizer **out)
{
    if (!snap_key(opt, reader, parts, n, extra, extra_len, key)) {
        key[0] = '\0';
        return false;
    }
    if (!lipi_snapshot_read(key, out))
        return false;
    memcpy((*out)->snapshot_key, key, 65);
    return true;
}

/* After it built *out (status st): writes the snapshot of key (when on)
 * and names the tokenizer by it. Returns st. (out, not *out: the build is
 * an argument of the same call, and sets *out.) */
static lipi_status snap_put(lipi_status st, const char key[65], lipi_tokenizer **out)
{
    if (st == LIPI_OK && key[0]) {
        lipi_snapshot_write(key, *out);
        memcpy((*out)->snapshot_key, key, 65);
    }
    return st;
}

/* A tokenizer file's part of a snapshot key is its SHA-256, not its bytes:
 * a warm open finds the digest by the file's stat identity (tabcache.c)
 * and reads the snapshot without reading or hashing the file (reading and
 * hashing mBERT's 1 MB vocab.txt, OpenSSL's start included, was ~4 ms of a
 * 33 ms load). The reader's setting starts with SHA_SETTING, so keys of
 * bytes and of digests never meet. */
#define SHA_SETTING "sha256:"

/* The snapshot of what `reader` builds from the file at path (key part
 * parts[0], its digest) and parts[1..n) (bytes) under `setting`: *found
 * with *out read from it; else *data (len bytes, the caller frees) holds
 * the file for the reader to build from, and key is what snap_put stores
 * it under ("" when snapshots are off). */
static lipi_status file_snapshot(const char *path, const lipi_open_options *opt,
                                 const char *reader, lipi_strref *parts, size_t n,
                                 const char *setting, size_t setting_len, char key[65],
                                 lipi_tokenizer **out, bool *found, char **data, size_t *len,
                                 lipi_error *err)
{
    struct stat before, after;
    char known[65], digest[65];
    bool on = opt->table_cache == LIPI_FLAG_ON, cache = on && stat(path, &before) == 0;
    bool have = cache && lipi_tabcache_digest_get(&before, "", known);
    key[0] = '\0';
    *data = NULL;
    parts[0] = (lipi_strref){known, 64};
    *found = have && snap_get(opt, reader, parts, n, setting, setting_len, key, out);
    parts[0] = (lipi_strref){NULL, 0};
    if (*found)
        return LIPI_OK;
    lipi_status st = lipi_read_file(path, LIPI_READ_MAX, data, len, err);
    if (st != LIPI_OK || !on)
        return st;
    lipi_sha256 c;
    lipi_sha256_init(&c);
    lipi_sha256_update(&c, *data, *len);
    if (lipi_sha256_final_hex(&c, digest) != LIPI_OK)
        return oom(path, err);
    /* The bytes read are those of the identity seen before when it still
     * holds after (a change between would have set the change time). */
    bool same = have && memcmp(known, digest, 64) == 0;
    if (cache && !same && stat(path, &after) == 0)
        lipi_tabcache_digest_put(&before, &after, "", digest);
    parts[0] = (lipi_strref){digest, 64};
    /* The same digest: that snapshot was just looked for. */
    *found = !same && snap_get(opt, reader, parts, n, setting, setting_len, key, out);
    parts[0] = (lipi_strref){NULL, 0}; /* the digest was a local */
    return LIPI_OK;
}

/* ======================================================================== */
/* Readers on files                                                          */
/* ======================================================================== */

/* tokenizer.json: the snapshot when there is one, else the file. */
static lipi_status open_json(const char *path, const lipi_open_options *opt,
                             lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *text = NULL, key[65];
    size_t len = 0;
    lipi_strref part;
    bool found;
    TRY(file_snapshot(path, opt, "json", &part, 1, SHA_SETTING, 7, key, out, &found, &text, &len,
                      err));
    if (!found)
        st = snap_put(lipi_tokenizer_load_json(text, len, path, out, err), key, out);
done:
    lipi_free(text);
    return st;
}

static lipi_status open_spm(const char *path, const lipi_open_options *opt,
                            lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *data = NULL, key[65];
    size_t len = 0;
    lipi_strref part;
    bool found;
    TRY(file_snapshot(path, opt, "spm", &part, 1, SHA_SETTING, 7, key, out, &found, &data, &len,
                      err));
    if (!found)
        st = snap_put(lipi_tokenizer_from_spm(data, len, path, out, err), key, out);
done:
    lipi_free(data);
    return st;
}

static lipi_status open_vocab_txt(const char *path, const lipi_open_options *opt,
                                  lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *data = NULL, *cfg = NULL, *cfg_path = beside(path, "tokenizer_config.json");
    size_t len = 0, cfg_len = 0;
    lipi_buf setting = {0};
    if (!cfg_path)
        return oom(path, err);
    /* The config (small, optional) by its bytes, the vocabulary by its
     * digest; the path is a setting: without a config, "uncased" in it
     * lowercases. */
    TRY(read_optional(cfg_path, &cfg, &cfg_len, err));
    char key[65];
    bool found;
    if (lipi_buf_append(&setting, SHA_SETTING, 7) != LIPI_OK ||
        lipi_buf_append(&setting, path, strlen(path)) != LIPI_OK) {
        st = oom(path, err);
        goto done;
    }
    lipi_strref parts[2] = {{NULL, 0}, {cfg, cfg_len}};
    TRY(file_snapshot(path, opt, "vocab_txt", parts, 2, setting.p, setting.len, key, out, &found,
                      &data, &len, err));
    if (!found)
        st = snap_put(lipi_tokenizer_from_vocab_txt(data, len, path, cfg, cfg_len, opt->lowercase,
                                                    opt->strip_accents, out, err),
                      key, out);
done:
    lipi_buf_free(&setting);
    lipi_free(data);
    lipi_free(cfg);
    lipi_free(cfg_path);
    return st;
}

/* vocab.json and merges.txt, given either of them (or the folder). */
static lipi_status open_gpt2(const char *vocab_path, const char *merges_path,
                             const lipi_open_options *opt, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *v = NULL, *m = NULL, *cfg = NULL, *cfg_path = beside(vocab_path, "tokenizer_config.json");
    size_t vn = 0, mn = 0, cn = 0;
    if (!cfg_path)
        return oom(vocab_path, err);
    TRY(lipi_read_file(vocab_path, LIPI_READ_MAX, &v, &vn, err));
    TRY(lipi_read_file(merges_path, LIPI_READ_MAX, &m, &mn, err));
    TRY(read_optional(cfg_path, &cfg, &cn, err));
    lipi_strref parts[3] = {{v, vn}, {m, mn}, {cfg, cn}};
    char key[65];
    if (!snap_get(opt, "gpt2", parts, 3, "", 0, key, out))
        st = snap_put(lipi_tokenizer_from_gpt2(v, vn, m, mn, vocab_path, cfg, cn, out, err), key,
                      out);
done:
    lipi_free(v);
    lipi_free(m);
    lipi_free(cfg);
    lipi_free(cfg_path);
    return st;
}

/* NAME.meta.json beside a rank file: {"pat_str": ..., "special_tokens":
 * {"<|x|>": id, ...}, "allow_rank_gaps": true}, every field optional;
 * allow_rank_gaps adds LIPI_TIKTOKEN_ALLOW_RANK_GAPS to *flags. *meta keeps
 * the strings alive. */
static lipi_status read_meta(const char *path, const char *text, size_t len, json_t **meta,
                             const char **pattern, lipi_special_token **special, size_t *n,
                             unsigned *flags, lipi_error *err)
{
    json_error_t je;
    const json_t *pat, *sp, *gaps;
    *meta = lipi_json_loadb(text, len, 0, &je);
    if (!*meta)
        return lipi_rd_json_oom(&je)
                   ? oom(path, err)
                   : lipi_error_set(err, LIPI_EFORMAT, path, je.line > 0 ? (size_t)je.line : 0,
                                    je.column > 0 ? (size_t)je.column : 0, "invalid JSON: %s",
                                    je.text);
    pat = json_object_get(*meta, "pat_str");
    sp = json_object_get(*meta, "special_tokens");
    if (pat && !json_is_string(pat))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "pat_str: expected a string");
    if (sp && !json_is_object(sp))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "special_tokens: expected an object of ids");
    gaps = json_object_get(*meta, "allow_rank_gaps");
    if (gaps && !json_is_boolean(gaps))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "allow_rank_gaps: expected true or false");
    if (json_is_true(gaps))
        *flags |= LIPI_TIKTOKEN_ALLOW_RANK_GAPS;
    if (pat)
        *pattern = json_string_value(pat);
    if (sp) {
        const char *key;
        const json_t *v;
        size_t i = 0;
        *special = lipi_calloc(json_object_size(sp) ? json_object_size(sp) : 1, sizeof **special);
        if (!*special)
            return oom(path, err);
        json_object_foreach((json_t *)sp, key, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= (json_int_t)UINT32_MAX || !*key)
                return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                      "special_tokens.%s: expected a token id", key);
            (*special)[i++] = (lipi_special_token){key, (uint32_t)json_integer_value(v)};
        }
        *n = i;
    }
    return LIPI_OK;
}

static lipi_status open_tiktoken(const char *path, const lipi_open_options *opt,
                                 lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const char *base = base_name(path);
    size_t base_len = strlen(base);
    char *data = NULL, *meta_text = NULL, *meta_path = NULL;
    size_t len = 0, meta_len = 0, n_special = 0;
    unsigned flags = 0;
    json_t *meta = NULL;
    const char *pattern = NULL;
    const lipi_special_token *special = NULL;
    lipi_special_token *meta_special = NULL;
    lipi_buf mb = {0};

    if (ends_with(base, ".tiktoken"))
        base_len -= strlen(".tiktoken");
    /* The published encodings are known by name; NAME.meta.json beside
     * the ranks describes any other. */
    if (!lipi_rd_tiktoken_builtin(base, base_len, &pattern, &special, &n_special)) {
        if (lipi_buf_append(&mb, base, base_len) != LIPI_OK ||
            lipi_buf_append(&mb, ".meta.json", 10) != LIPI_OK ||
            !(meta_path = beside(path, mb.p))) {
            st = oom(path, err);
            goto done;
        }
        TRY(read_optional(meta_path, &meta_text, &meta_len, err));
        if (meta_text) {
            size_t n_meta = 0;
            TRY(read_meta(meta_path, meta_text, meta_len, &meta, &pattern, &meta_special,
                          &n_meta, &flags, err));
            if (meta_special) {
                special = meta_special;
                n_special = n_meta;
            }
        }
    }
    if (opt->pattern)
        pattern = opt->pattern;
    if (opt->table_cache == LIPI_FLAG_ON)
        flags |= LIPI_RD_TIKTOKEN_CACHE;
    if (!pattern) {
        st = lipi_error_set(err, LIPI_EINVAL, path, 0, 0,
                            "no split pattern is known for \"%.*s\": give one with the pattern "
                            "option (--pattern)",
                            (int)(base_len > 64 ? 64 : base_len), base);
        goto done;
    }
    /* The name chooses the special tokens (and the check below); a
     * snapshot is only written after the check passed on these bytes. */
    char key[65];
    bool found;
    mb.len = 0;
    if (lipi_buf_append(&mb, SHA_SETTING, 7) != LIPI_OK ||
        lipi_buf_append(&mb, pattern, strlen(pattern) + 1) != LIPI_OK ||
        lipi_buf_append(&mb, base, base_len) != LIPI_OK) {
        st = oom(path, err);
        goto done;
    }
    lipi_strref parts[2] = {{NULL, 0}, {meta_text, meta_len}};
    TRY(file_snapshot(path, opt, "tiktoken", parts, 2, mb.p, mb.len, key, out, &found, &data, &len,
                      err));
    if (found)
        goto done;
    /* Here, where the file is read, so that a bare name and a path get the
     * same check. */
    TRY(lipi_rd_tiktoken_verify(base, base_len, data, len, path, err));
    st = snap_put(lipi_tokenizer_from_tiktoken(data, len, path, pattern, special, n_special, flags,
                                               out, err),
                  key, out);
done:
    lipi_free(data);
    lipi_free(meta_text);
    lipi_free(meta_path);
    lipi_free(meta_special);
    lipi_buf_free(&mb);
    json_decref(meta);
    return st;
}

/* A GGUF file is mapped, not read: model files run to many gigabytes and
 * only the metadata at the start is needed (and hashed for the snapshot). */
static lipi_status open_gguf(const char *path, const lipi_open_options *opt,
                             lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    struct stat sb;
    void *map = MAP_FAILED;
    lipi_buf setting = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    if (fstat(fd, &sb) != 0) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot stat: %s", strerror(errno));
        goto done;
    }
    if (sb.st_size == 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "expected a GGUF file, found an empty one");
        goto done;
    }
    map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot map: %s", strerror(errno));
        goto done;
    }
    /* The snapshot is keyed by the metadata's SHA-256 (and the options the
     * reader takes: the split pattern, lowercase and accents), found by
     * the file's stat identity on a warm open, as file_snapshot does for
     * whole files: the metadata is then neither parsed nor hashed. */
    const char *pattern = opt->pattern ? opt->pattern : "";
    bool on = opt->table_cache == LIPI_FLAG_ON, same = false;
    char key[65] = "", known[65], digest[65];
    bool have = on && lipi_tabcache_digest_get(&sb, "gguf metadata", known);
    lipi_strref part = {known, 64};
    if (lipi_buf_append(&setting, SHA_SETTING, 7) != LIPI_OK ||
        lipi_buf_append(&setting, pattern, strlen(pattern) + 1) != LIPI_OK) {
        st = oom(path, err);
        goto done;
    }
    if (have && snap_get(opt, "gguf", &part, 1, setting.p, setting.len, key, out))
        goto done;
    size_t meta = lipi_rd_gguf_metadata_len(map, (size_t)sb.st_size);
    if (meta && on) {
        struct stat after;
        lipi_sha256 c;
        lipi_sha256_init(&c);
        lipi_sha256_update(&c, map, meta);
        if (lipi_sha256_final_hex(&c, digest) != LIPI_OK) {
            st = oom(path, err);
            goto done;
        }
        same = have && memcmp(known, digest, 64) == 0;
        if (!same && fstat(fd, &after) == 0)
            lipi_tabcache_digest_put(&sb, &after, "gguf metadata", digest);
        part = (lipi_strref){digest, 64};
        if (!same && snap_get(opt, "gguf", &part, 1, setting.p, setting.len, key, out))
            goto done;
    }
    if (!meta)
        key[0] = '\0';
    st = snap_put(lipi_tokenizer_from_gguf(map, (size_t)sb.st_size, path, opt, out, err), key, out);
done:
    lipi_buf_free(&setting);
    if (map != MAP_FAILED)
        munmap(map, (size_t)sb.st_size);
    close(fd);
    return st;
}

/* ======================================================================== */
/* Choosing the reader                                                       */
/* ======================================================================== */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const struct {
    const char *name;
    lipi_tokenizer_file_kind kind;
} tokenizer_files[] = {
    {"tokenizer.json", LIPI_TOKENIZER_FILE_JSON},
    {"tokenizer_config.json", LIPI_TOKENIZER_FILE_CONFIG},
    {"special_tokens_map.json", LIPI_TOKENIZER_FILE_CONFIG},
    {"added_tokens.json", LIPI_TOKENIZER_FILE_CONFIG},
    {"vocab.txt", LIPI_TOKENIZER_FILE_WORDPIECE},
    {"vocab.json", LIPI_TOKENIZER_FILE_GPT2},
    {"merges.txt", LIPI_TOKENIZER_FILE_GPT2},
    {"spiece.model", LIPI_TOKENIZER_FILE_SENTENCEPIECE},
    {"sentencepiece.bpe.model", LIPI_TOKENIZER_FILE_SENTENCEPIECE},
    {"tokenizer.model", LIPI_TOKENIZER_FILE_SENTENCEPIECE},
};

const char *lipi_tokenizer_file(size_t i, lipi_tokenizer_file_kind *kind)
{
    if (i >= sizeof tokenizer_files / sizeof tokenizer_files[0])
        return NULL;
    if (kind)
        *kind = tokenizer_files[i].kind;
    return tokenizer_files[i].name;
}

/* The first *.model file of a folder by name, after the usual names. */
static lipi_status find_model(const char *dir, char **out, lipi_error *err)
{
    char **found = NULL;
    size_t n = 0, cap = 0;
    lipi_status st = LIPI_OK;
    DIR *d = NULL;
    *out = NULL;
    for (size_t i = 0; i < sizeof tokenizer_files / sizeof tokenizer_files[0]; i++) {
        if (tokenizer_files[i].kind != LIPI_TOKENIZER_FILE_SENTENCEPIECE)
            continue;
        char *p = join(dir, strlen(dir), tokenizer_files[i].name);
        if (!p)
            return oom(dir, err);
        if (is_file(p)) {
            *out = p;
            return LIPI_OK;
        }
        lipi_free(p);
    }
    d = opendir(dir);
    if (!d)
        return lipi_error_set(err, LIPI_EIO, dir, 0, 0, "cannot list: %s", strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        if (!ends_with(e->d_name, ".model"))
            continue;
        char *p = join(dir, strlen(dir), e->d_name);
        if (!p || lipi_grow((void **)&found, &cap, n + 1, sizeof *found) != LIPI_OK) {
            lipi_free(p);
            st = oom(dir, err);
            goto done;
        }
        if (is_file(p))
            found[n++] = p;
        else
            lipi_free(p);
    }
    if (n) {
        qsort(found, n, sizeof *found, cmp_str);
        *out = found[0];
        found[0] = NULL;
    }
done:
    for (size_t i = 0; i < n; i++)
        lipi_free(found[i]);
    lipi_free(found);
    closedir(d);
    return st;
}

static lipi_status open_folder(const char *dir, const lipi_open_options *opt,
                               lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t dl = strlen(dir);
    char *tj = join(dir, dl, "tokenizer.json"), *vt = join(dir, dl, "vocab.txt");
    char *vj = join(dir, dl, "vocab.json"), *mt = join(dir, dl, "merges.txt"), *model = NULL;
    if (!tj || !vt || !vj || !mt) {
        st = oom(dir, err);
        goto done;
    }
    if (is_file(tj)) {
        st = open_json(tj, opt, out, err);
    } else if (is_file(vt)) {
        st = open_vocab_txt(vt, opt, out, err);
    } else if (is_file(vj) && is_file(mt)) {
        st = open_gpt2(vj, mt, opt, out, err);
    } else {
        TRY(find_model(dir, &model, err));
        if (model)
            st = open_spm(model, opt, out, err);
        else
            st = lipi_error_set(err, LIPI_EIO, dir, 0, 0,
                                "expected a tokenizer in this folder (tokenizer.json, vocab.txt, "
                                "vocab.json + merges.txt or a SentencePiece .model), found none");
    }
done:
    lipi_free(tj);
    lipi_free(vt);
    lipi_free(vj);
    lipi_free(mt);
    lipi_free(model);
    return st;
}

/* Whether the text looks like tiktoken ranks: "<base64> <digits>\n". */
static bool looks_tiktoken(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (isalnum(s[i]) || s[i] == '+' || s[i] == '/' || s[i] == '='))
        i++;
    if (i == 0 || i >= n || s[i] != ' ')
        return false;
    size_t d = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    return i > d && (i == n || s[i] == '\n' || s[i] == '\r');
}

/* A bare name that is no file here: a bundled tokenizer in the data folders
 * (lipi_data_dirs), either an encoding known to tiktoken (NAME.tiktoken,
 * in ROOT, ROOT/tiktoken or ROOT/vocab/tiktoken) or a tokenizer folder
 * ROOT/vocab/NAME (bert-base-multilingual-cased). */
static lipi_status open_named(const char *name, const lipi_open_options *opt,
                              lipi_tokenizer **out, lipi_error *err)
{
    static const char *const tiktoken_in[] = {"", "/tiktoken", "/vocab/tiktoken"};
    lipi_status st = LIPI_OK;
    lipi_buf roots = {0}, looked = {0}, cand = {0};
    const char *pattern;
    const lipi_special_token *sp;
    size_t n_sp;
    size_t len = strlen(name);

    if (ends_with(name, ".tiktoken"))
        len -= strlen(".tiktoken");
    bool tiktoken = lipi_rd_tiktoken_builtin(name, len, &pattern, &sp, &n_sp);
    if (opt->data_dir)
        st = lipi_buf_append(&roots, opt->data_dir, strlen(opt->data_dir) + 1);
    else
        st = lipi_data_dirs(&roots);
    if (st != LIPI_OK)
        goto oom;
    for (size_t at = 0; at < roots.len; at += strlen(roots.p + at) + 1) {
        const char *root = roots.p + at;
        for (size_t i = 0; i < (tiktoken ? sizeof tiktoken_in / sizeof tiktoken_in[0] : 1); i++) {
            const char *sub = tiktoken ? tiktoken_in[i] : "/vocab";
            cand.len = 0;
            if (lipi_buf_append(&cand, root, strlen(root)) != LIPI_OK ||
                lipi_buf_append(&cand, sub, strlen(sub)) != LIPI_OK ||
                lipi_buf_append(&cand, "/", 1) != LIPI_OK ||
                lipi_buf_append(&cand, name, len) != LIPI_OK ||
                lipi_buf_append(&cand, tiktoken ? ".tiktoken" : "", tiktoken ? 10 : 1) != LIPI_OK)
                goto oom;
            struct stat sb;
            if (stat(cand.p, &sb) == 0 && (tiktoken ? S_ISREG(sb.st_mode) : S_ISDIR(sb.st_mode))) {
                st = tiktoken ? open_tiktoken(cand.p, opt, out, err) : open_folder(cand.p, opt, out, err);
                goto done;
            }
        }
        if ((looked.len && lipi_buf_append(&looked, ", ", 2) != LIPI_OK) ||
            lipi_buf_append(&looked, root, strlen(root)) != LIPI_OK)
            goto oom;
    }
    if (lipi_buf_append(&looked, "", 1) != LIPI_OK)
        goto oom;
    const char *lipi_data = opt->data_dir ? "" : getenv("LIPI_DATA") ? "" : " ($LIPI_DATA is not set)";
    if (tiktoken)
        st = lipi_error_set(err, LIPI_EIO, name, 0, 0,
                            "cannot find %.*s.tiktoken in %s (each also under tiktoken/ and "
                            "vocab/tiktoken/)%s; set LIPI_DATA to the folder that holds it",
                            (int)len, name, looked.p, lipi_data);
    else
        st = lipi_error_set(err, LIPI_EIO, name, 0, 0,
                            "cannot open: no such file or folder, nor a bundled tokenizer "
                            "vocab/%s in %s%s", name, looked.p, lipi_data);
    goto done;
oom:
    st = oom(name, err);
done:
    lipi_buf_free(&roots);
    lipi_buf_free(&looked);
    lipi_buf_free(&cand);
    return st;
}

static lipi_status open_any(const char *path, const lipi_open_options *opt_in,
                            lipi_tokenizer **out, lipi_error *err);

lipi_status lipi_tokenizer_open(const char *path, const lipi_open_options *opt,
                                lipi_tokenizer **out, lipi_error *err)
{
    lipi_open_options o = {0};
    if (opt)
        o = *opt;
    /* Settled once here, so that every reader and the encoder agree. */
    if (o.table_cache == LIPI_FLAG_AUTO)
        o.table_cache = lipi_tabcache_env_on() ? LIPI_FLAG_ON : LIPI_FLAG_OFF;
    lipi_status st = open_any(path, &o, out, err);
    if (st == LIPI_OK)
        (*out)->table_cache = o.table_cache == LIPI_FLAG_ON;
    return st;
}

static lipi_status open_any(const char *path, const lipi_open_options *opt_in,
                            lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_open_options opt = {0};
    struct stat sb;
    unsigned char head[64];
    size_t head_len = 0;
    char *other = NULL;

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "no output pointer given");
    *out = NULL;
    if (!path || !*path)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "no path given");
    if (opt_in)
        opt = *opt_in;
    if (opt.lowercase > LIPI_FLAG_ON || opt.strip_accents > LIPI_FLAG_ON ||
        opt.table_cache > LIPI_FLAG_ON)
        return lipi_error_set(err, LIPI_EINVAL, path, 0, 0,
                              "lowercase, strip_accents and table_cache take LIPI_FLAG_AUTO, "
                              "_OFF or _ON");

    if (stat(path, &sb) != 0) {
        if (errno == ENOENT && !strchr(path, '/'))
            return open_named(path, &opt, out, err);
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return open_folder(path, &opt, out, err);

    FILE *f = fopen(path, "rb");
    if (!f)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    head_len = fread(head, 1, sizeof head, f);
    fclose(f);

    const char *base = base_name(path);
    if (head_len >= 4 && memcmp(head, "GGUF", 4) == 0)
        return open_gguf(path, &opt, out, err);
    if (ends_with(base, ".gguf"))
        return open_gguf(path, &opt, out, err);
    if (strcmp(base, "vocab.json") == 0 || strcmp(base, "merges.txt") == 0) {
        other = beside(path, base[0] == 'v' ? "merges.txt" : "vocab.json");
        if (!other)
            return oom(path, err);
        if (!is_file(other))
            st = lipi_error_set(err, LIPI_EIO, path, 0, 0,
                                "expected %s beside it (GPT-2 BPE needs both files), found none",
                                base_name(other));
        else if (base[0] == 'v')
            st = open_gpt2(path, other, &opt, out, err);
        else
            st = open_gpt2(other, path, &opt, out, err);
        lipi_free(other);
        return st;
    }
    if (ends_with(base, ".json"))
        return open_json(path, &opt, out, err);
    if (ends_with(base, ".tiktoken"))
        return open_tiktoken(path, &opt, out, err);
    if (ends_with(base, ".model"))
        return open_spm(path, &opt, out, err);
    if (ends_with(base, ".txt"))
        return open_vocab_txt(path, &opt, out, err);

    /* No telling name: look at the bytes. */
    size_t i = 0;
    while (i < head_len && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
        i++;
    if (i < head_len && head[i] == '{')
        return open_json(path, &opt, out, err);
    if (looks_tiktoken(head, head_len))
        return open_tiktoken(path, &opt, out, err);
    /* A ModelProto starts with its first piece: field 1, length-delimited. */
    if (head_len > 0 && head[0] == 0x0a)
        return open_spm(path, &opt, out, err);
    return open_vocab_txt(path, &opt, out, err);
}

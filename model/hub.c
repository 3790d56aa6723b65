/* Hugging Face hub cache: resolving model names to snapshot folders and
 * downloading models into the cache with libcurl (opened on first use, see
 * lc_open), in huggingface_hub's
 * layout (pipeline.h). libcurl because a hub download is HTTPS with
 * redirects to a CDN, Range requests for resuming and proxies from the
 * environment: what it does well. */
#include "model/model_impl.h"

#include <ctype.h>
/* Plain prototypes: the calls go through the pointers below. */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HUB_PATH_MAX 4096
#define API_MAX_BYTES ((size_t)64 << 20)

/* ======================================================================== */
/* Names and the cache                                                       */
/* ======================================================================== */

lipi_status lipi_hub_cache_dir(char *out, size_t cap, lipi_error *err)
{
    const char *v;
    int n;
    if ((v = getenv("HF_HUB_CACHE")) && *v)
        n = snprintf(out, cap, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v)
        n = snprintf(out, cap, "%s/hub", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v)
        n = snprintf(out, cap, "%s/huggingface/hub", v);
    else if ((v = getenv("HOME")) && *v)
        n = snprintf(out, cap, "%s/.cache/huggingface/hub", v);
    else
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "no Hugging Face cache: set HF_HUB_CACHE, HF_HOME or HOME");
    if (n < 0 || (size_t)n >= cap)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "the cache path is too long");
    return LIPI_OK;
}

/* Where the cache path came from, for messages. */
static const char *cache_origin(void)
{
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v)
        return "$HF_HUB_CACHE";
    if ((v = getenv("HF_HOME")) && *v)
        return "$HF_HOME/hub";
    if ((v = getenv("XDG_CACHE_HOME")) && *v)
        return "$XDG_CACHE_HOME/huggingface/hub";
    return "~/.cache/huggingface/hub";
}

static bool name_part_ok(const char *s, size_t len)
{
    if (len == 0 || len > 96 || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return !(len >= 2 && memmem(s, len, "..", 2));
}

bool lipi_hub_is_name(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash)
        return name_part_ok(s, strlen(s));
    return name_part_ok(s, (size_t)(slash - s)) && name_part_ok(slash + 1, strlen(slash + 1));
}

/* CACHE/models--ORG--NAME */
static lipi_status repo_dir(const char *cache, const char *name, char *out, size_t cap,
                            lipi_error *err)
{
    int n = snprintf(out, cap, "%s/models--", cache);
    for (const char *p = name; n >= 0 && (size_t)n < cap && *p; p++)
        n += snprintf(out + n, cap - (size_t)n, "%s", *p == '/' ? "--" : (char[2]){*p, 0});
    if (n < 0 || (size_t)n >= cap)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "the cache path is too long");
    return LIPI_OK;
}

static bool is_hex(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return s[len] == '\0';
}

/* A revision names a file under refs/ (branches may hold '/'), never a way
 * out of it. */
static bool revision_ok(const char *r)
{
    size_t n = strlen(r);
    return n > 0 && n < 256 && r[0] != '/' && r[0] != '.' && !strstr(r, "..") &&
           !strchr(r, '\\');
}

lipi_status lipi_hub_resolve(const char *name, const char *revision, const char *cache_dir,
                             char *out, size_t cap, lipi_error *err)
{
    char cache[HUB_PATH_MAX], repo[HUB_PATH_MAX], ref[HUB_PATH_MAX + 300], commit[128];
    lipi_status st;
    if (!lipi_hub_is_name(name))
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0,
                              "expected a hub name such as ORG/NAME");
    const char *rev = revision ? revision : "main";
    if (!revision_ok(rev))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "bad revision '%s'", rev);
    if (cache_dir)
        snprintf(cache, sizeof cache, "%s", cache_dir);
    else if ((st = lipi_hub_cache_dir(cache, sizeof cache, err)) != LIPI_OK)
        return st;
    if ((st = repo_dir(cache, name, repo, sizeof repo, err)) != LIPI_OK)
        return st;
    const char *origin = cache_dir ? "the given cache" : cache_origin();
    struct stat sb;
    if (stat(repo, &sb) != 0)
        return lipi_error_set(err, LIPI_EIO, repo, 0, 0,
                              "model %s is not a folder and not in the Hugging Face cache "
                              "(%s, from %s); fetch it with 'lipi download %s'",
                              name, cache, origin, name);
    if (strlen(rev) == 40 && is_hex(rev, 40)) {
        snprintf(commit, sizeof commit, "%s", rev);
    } else {
        snprintf(ref, sizeof ref, "%s/refs/%s", repo, rev);
        FILE *f = fopen(ref, "r");
        size_t n = f ? fread(commit, 1, sizeof commit - 1, f) : 0;
        if (f)
            fclose(f);
        while (n && isspace((unsigned char)commit[n - 1]))
            n--;
        commit[n] = '\0';
        if (!f)
            return lipi_error_set(err, LIPI_EIO, ref, 0, 0,
                                  "model %s is in the cache (%s, from %s) but revision '%s' "
                                  "is not; fetch it with 'lipi download %s --revision %s'",
                                  name, cache, origin, rev, name, rev);
        if (n != 40 || !is_hex(commit, 40))
            return lipi_error_set(err, LIPI_EFORMAT, ref, 1, 0,
                                  "expected a 40-digit commit hash");
    }
    int n = snprintf(out, cap, "%s/snapshots/%s", repo, commit);
    if (n < 0 || (size_t)n >= cap)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "the cache path is too long");
    if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return lipi_error_set(err, LIPI_EIO, out, 0, 0,
                              "revision '%s' of %s points to a snapshot that is missing; "
                              "fetch it again with 'lipi download %s'",
                              rev, name, name);
    return LIPI_OK;
}

/* ======================================================================== */
/* Which files lipi needs                                                    */
/* ======================================================================== */

bool lipi_hub_wanted_file(const char *path)
{
    return lipi_model_file_role_of(path) != LIPI_MODEL_FILE_NONE;
}

/* Whether `path`, one of the repository's files, is fetched: a file of a
 * model folder (lipi_hub_wanted_file); bge-m3's sparse_linear.pt and
 * colbert_linear.pt; and the PyTorch weights (pytorch_model*.bin,
 * pytorch_model.bin.index.json) of a folder - the repository's own or a
 * module folder such as 2_Dense/ - that has no *.safetensors, as MuRIL and
 * other older checkpoints ship only those. */
static bool want_in_repo(const json_t *siblings, const char *path)
{
    if (lipi_hub_wanted_file(path) || !strcmp(path, "sparse_linear.pt") ||
        !strcmp(path, "colbert_linear.pt"))
        return true;
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t dir_len = (size_t)(base - path), bl = strlen(base);
    bool torch = !strncmp(base, "pytorch_model", 13) &&
                 ((bl > 4 && !strcmp(base + bl - 4, ".bin")) ||
                  !strcmp(base, "pytorch_model.bin.index.json"));
    if (!torch)
        return false;
    if (dir_len) {
        /* Only in a module folder: one whose config.json lipi wants. */
        char cfg[300];
        if (dir_len > 200)
            return false;
        snprintf(cfg, sizeof cfg, "%.*sconfig.json", (int)dir_len, path);
        if (lipi_model_file_role_of(cfg) != LIPI_MODEL_FILE_MODULE)
            return false;
    }
    for (size_t i = 0; i < json_array_size(siblings); i++) {
        const char *f =
            json_string_value(json_object_get(json_array_get(siblings, i), "rfilename"));
        size_t fl = f ? strlen(f) : 0;
        if (fl > dir_len + 12 && !strncmp(f, path, dir_len) && !strchr(f + dir_len, '/') &&
            !strcmp(f + fl - 12, ".safetensors"))
            return false;
    }
    return true;
}

/* ======================================================================== */
/* Checksums                                                                 */
/* ======================================================================== */

/* The SHA-256 of a file, to check an LFS download against its ETag. */
static lipi_status sha256_file(const char *path, char out[65], lipi_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    lipi_sha256 c;
    lipi_sha256_init(&c);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        lipi_sha256_update(&c, buf, n);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        lipi_sha256_abort(&c);
        return lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot read");
    }
    if (lipi_sha256_final_hex(&c, out) != LIPI_OK)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory (SHA-256)");
    return LIPI_OK;
}

/* ======================================================================== */
/* HTTP                                                                      */
/* ======================================================================== */

/* libcurl is opened on the first download (dlopen), not linked: linked, it
 * and the ~25 libraries it pulls in (TLS, Kerberos, LDAP, SSH, ...) were
 * loaded and relocated at the start of every lipi process, ~12 M of the
 * ~27 M instructions of dynamic linking, for a command that only reads a
 * tokenizer (issue 20: ready to encode in tens of milliseconds). The same
 * functions, the same library (Debian's libcurl4), found at run time. */
static struct {
    pthread_once_t once;
    const char *error; /* why it could not be opened, or NULL */
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} lc = {.once = PTHREAD_ONCE_INIT};

static void lc_open(void)
{
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        lc.error = "cannot load libcurl.so.4 (Debian package libcurl4)";
        return;
    }
#define LC_SYM(f, name) *(void **)&lc.f = dlsym(h, name)
    LC_SYM(easy_init, "curl_easy_init");
    LC_SYM(easy_setopt, "curl_easy_setopt");
    LC_SYM(easy_perform, "curl_easy_perform");
    LC_SYM(easy_getinfo, "curl_easy_getinfo");
    LC_SYM(easy_cleanup, "curl_easy_cleanup");
    LC_SYM(easy_strerror, "curl_easy_strerror");
    LC_SYM(slist_append, "curl_slist_append");
    LC_SYM(slist_free_all, "curl_slist_free_all");
#undef LC_SYM
    if (!lc.easy_init || !lc.easy_setopt || !lc.easy_perform || !lc.easy_getinfo ||
        !lc.easy_cleanup || !lc.easy_strerror || !lc.slist_append || !lc.slist_free_all)
        lc.error = "libcurl.so.4 lacks a function lipi calls";
}

/* curl.h defines these two as macros that check the argument count. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_easy_init lc.easy_init
#define curl_easy_setopt lc.easy_setopt
#define curl_easy_perform lc.easy_perform
#define curl_easy_getinfo lc.easy_getinfo
#define curl_easy_cleanup lc.easy_cleanup
#define curl_easy_strerror lc.easy_strerror
#define curl_slist_append lc.slist_append
#define curl_slist_free_all lc.slist_free_all

typedef struct {
    CURL *curl;
    struct curl_slist *headers;
    const char *endpoint;
    char errbuf[CURL_ERROR_SIZE];
    /* response headers */
    char etag[256], linked_etag[256];
    uint64_t linked_size;
    /* body to memory (API) */
    char *mem;
    size_t mem_len, mem_cap;
    bool mem_overflow;
    /* body to a file (downloads) */
    FILE *file;
    uint64_t offset;       /* bytes already in the file before this request */
    uint64_t written;
    bool checked_status;
    bool discard;          /* the response is not the file's content */
    bool write_failed;
    /* progress */
    const lipi_hub_download_options *opt;
    lipi_hub_progress prog;
} http;

static void trim_value(const char *v, size_t n, char *out, size_t cap)
{
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n && isspace((unsigned char)v[n - 1]))
        n--;
    if (n >= 2 && v[0] == 'W' && v[1] == '/') {
        v += 2;
        n -= 2;
    }
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n >= cap)
        n = cap - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *user)
{
    http *h = user;
    size_t n = size * nitems;
    const char *colon = memchr(buf, ':', n);
    if (!colon)
        return n;
    size_t klen = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vlen = n - klen - 1;
    char tmp[64];
    if (klen == 13 && strncasecmp(buf, "x-linked-etag", 13) == 0)
        trim_value(v, vlen, h->linked_etag, sizeof h->linked_etag);
    else if (klen == 4 && strncasecmp(buf, "etag", 4) == 0 && !h->etag[0])
        trim_value(v, vlen, h->etag, sizeof h->etag); /* the first response's: hub, not CDN */
    else if (klen == 13 && strncasecmp(buf, "x-linked-size", 13) == 0) {
        trim_value(v, vlen, tmp, sizeof tmp);
        h->linked_size = strtoull(tmp, NULL, 10);
    }
    return n;
}

static size_t to_memory(char *p, size_t size, size_t nmemb, void *user)
{
    http *h = user;
    size_t n = size * nmemb;
    if (h->mem_len + n + 1 > API_MAX_BYTES) {
        h->mem_overflow = true;
        return 0;
    }
    if (h->mem_len + n + 1 > h->mem_cap) {
        size_t c = h->mem_cap ? h->mem_cap : 4096;
        while (c < h->mem_len + n + 1)
            c *= 2;
        char *q = lipi_realloc(h->mem, c);
        if (!q)
            return 0;
        h->mem = q;
        h->mem_cap = c;
    }
    memcpy(h->mem + h->mem_len, p, n);
    h->mem_len += n;
    h->mem[h->mem_len] = '\0';
    return n;
}

static size_t to_file(char *p, size_t size, size_t nmemb, void *user)
{
    http *h = user;
    size_t n = size * nmemb;
    if (!h->checked_status) {
        /* A server that ignores the Range request sends the whole file. */
        long code = 0;
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
        h->checked_status = true;
        h->discard = code != 200 && code != 206; /* an error page is not the file */
        if (code == 200 && h->offset) {
            if (fflush(h->file) != 0 || ftruncate(fileno(h->file), 0) != 0 ||
                fseeko(h->file, 0, SEEK_SET) != 0) {
                h->write_failed = true;
                return 0;
            }
            h->offset = 0;
        }
    }
    if (h->discard)
        return n;
    if (fwrite(p, 1, n, h->file) != n) {
        h->write_failed = true;
        return 0;
    }
    h->written += n;
    return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    http *h = user;
    if (h->opt && h->opt->progress && h->prog.file) {
        h->prog.done = h->offset + (uint64_t)dlnow;
        if (dltotal > 0)
            h->prog.total = h->offset + (uint64_t)dltotal;
        h->opt->progress(&h->prog, h->opt->user);
    }
    return 0;
}

static lipi_status http_new(http *h, const lipi_hub_download_options *opt, lipi_error *err)
{
    memset(h, 0, sizeof *h);
    h->opt = opt;
    const char *token = opt->token ? opt->token : getenv("HF_TOKEN");
    pthread_once(&lc.once, lc_open);
    if (lc.error)
        return lipi_error_set(err, LIPI_EIO, NULL, 0, 0, "%s", lc.error);
    if (!(h->curl = curl_easy_init()))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "cannot start libcurl");
    char auth[1024];
    if (token && *token) {
        int n = snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        if (n < 0 || (size_t)n >= sizeof auth)
            return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "HF_TOKEN is too long");
        if (!(h->headers = curl_slist_append(NULL, auth)))
            return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    CURL *c = h->curl;
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "lipi/0.1");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    /* A stalled transfer fails (and can be resumed) instead of hanging. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    return LIPI_OK;
}

static void http_free(http *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    if (h->headers)
        curl_slist_free_all(h->headers);
    lipi_free(h->mem);
}

/* Resets what one request collects. */
static void http_reset(http *h)
{
    h->etag[0] = h->linked_etag[0] = '\0';
    h->linked_size = 0;
    h->mem_len = 0;
    h->mem_overflow = false;
    h->written = 0;
    h->checked_status = false;
    h->discard = false;
    h->write_failed = false;
    h->errbuf[0] = '\0';
}

/* Performs the request set up on h->curl: LIPI_OK with the status in *code
 * when a response came, LIPI_EIO naming the URL when none did. */
static lipi_status http_perform(http *h, const char *url, long *code, lipi_error *err)
{
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    CURLcode rc = curl_easy_perform(h->curl);
    *code = 0;
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, code);
    if (rc == CURLE_OK)
        return LIPI_OK;
    if (h->write_failed)
        return lipi_error_set(err, LIPI_EIO, NULL, 0, 0, "cannot write the downloaded file: %s",
                              strerror(errno));
    if (h->mem_overflow)
        return lipi_error_set(err, LIPI_EIO, url, 0, 0, "the answer is over %zu bytes",
                              API_MAX_BYTES);
    return lipi_error_set(err, LIPI_EIO, url, 0, 0, "%s%s%s", curl_easy_strerror(rc),
                          h->errbuf[0] ? ": " : "", h->errbuf);
}

static lipi_status http_status_error(const char *url, long code, const char *name,
                                     const char *what, lipi_error *err)
{
    if (code == 404)
        return lipi_error_set(err, LIPI_EIO, url, 0, 0,
                              "HTTP 404: %s %s does not exist on the hub (check the name and "
                              "--revision)",
                              what, name);
    if (code == 401 || code == 403)
        return lipi_error_set(err, LIPI_EIO, url, 0, 0,
                              "HTTP %ld: %s needs access: accept its terms on the hub and set "
                              "HF_TOKEN",
                              code, name);
    return lipi_error_set(err, LIPI_EIO, url, 0, 0, "HTTP %ld for %s", code, what);
}

/* Appends s to url with every byte but unreserved ones (and '/' when
 * keep_slash) percent-encoded. */
static bool url_append(char *url, size_t cap, const char *s, bool keep_slash)
{
    size_t n = strlen(url);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
                     (keep_slash && c == '/');
        int w = plain ? snprintf(url + n, cap - n, "%c", c)
                      : snprintf(url + n, cap - n, "%%%02X", c);
        if (w < 0 || (size_t)w >= cap - n)
            return false;
        n += (size_t)w;
    }
    return true;
}

/* ======================================================================== */
/* Download                                                                  */
/* ======================================================================== */

/* A repository path that stays inside the snapshot folder: relative, no
 * empty, "." or ".." parts, no backslashes or control bytes. */
static bool repo_path_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > 1024 || p[0] == '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == '\\')
            return false;
    for (const char *s = p; *s;) {
        size_t l = strcspn(s, "/");
        if (l == 0 || (l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s += l;
        if (*s == '/')
            s++;
        else
            break;
    }
    return p[n - 1] != '/';
}

static bool etag_ok(const char *e)
{
    size_t n = strlen(e);
    if (n == 0 || n > 128 || e[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)e[i]) && e[i] != '-' && e[i] != '_' && e[i] != '.')
            return false;
    return true;
}

/* mkdir -p for the folders of path (up to its last '/'), or of all of it. */
static lipi_status make_dirs(const char *path, bool whole, lipi_error *err)
{
    char buf[HUB_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    if (!whole) {
        char *slash = strrchr(buf, '/');
        if (!slash)
            return LIPI_OK;
        *slash = '\0';
        n = strlen(buf);
    }
    for (size_t i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == '\0') {
            char keep = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return lipi_error_set(err, LIPI_EIO, buf, 0, 0, "cannot create the folder: %s",
                                      strerror(errno));
            buf[i] = keep;
        }
    return LIPI_OK;
}

/* Writes `text` to path through a temporary file and a rename. */
static lipi_status write_small(const char *path, const char *text, lipi_error *err)
{
    lipi_atomic_file af;
    lipi_status st = lipi_atomic_open(&af, path, err);
    if (st != LIPI_OK)
        return st;
    fputs(text, af.f);
    return lipi_atomic_commit(&af, err);
}

/* Fetches the commit and the file list of name@rev. */
static lipi_status fetch_file_list(http *h, const char *name, const char *rev, char sha[41],
                                   json_t **siblings, lipi_error *err)
{
    char url[HUB_PATH_MAX];
    snprintf(url, sizeof url, "%s/api/models/%s/revision/", h->endpoint, name);
    if (!url_append(url, sizeof url, rev, false))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "the URL is too long");
    http_reset(h);
    curl_easy_setopt(h->curl, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, to_memory);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
    long code;
    lipi_status st = http_perform(h, url, &code, err);
    if (st != LIPI_OK)
        return st;
    if (code != 200)
        return http_status_error(url, code, name, "model", err);
    json_error_t je;
    unsigned long fails = lipi_alloc_failures;
    json_t *root = json_loadb(h->mem ? h->mem : "", h->mem_len, 0, &je);
    if (lipi_alloc_failures != fails) {
        json_decref(root);
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    if (!root)
        return lipi_error_set(err, LIPI_EFORMAT, url, (size_t)je.line, (size_t)je.column,
                              "expected the hub's JSON answer: %s", je.text);
    json_t *s = json_object_get(root, "sha");
    json_t *sib = json_object_get(root, "siblings");
    if (!json_is_string(s) || strlen(json_string_value(s)) != 40 ||
        !is_hex(json_string_value(s), 40)) {
        json_decref(root);
        return lipi_error_set(err, LIPI_EFORMAT, url, 0, 0,
                              "sha: expected a 40-digit commit hash");
    }
    if (!json_is_array(sib)) {
        json_decref(root);
        return lipi_error_set(err, LIPI_EFORMAT, url, 0, 0, "siblings: expected an array");
    }
    memcpy(sha, json_string_value(s), 41);
    *siblings = json_incref(sib);
    json_decref(root);
    return LIPI_OK;
}

/* Fetches one file into blobs/ and links it from the snapshot. */
static lipi_status fetch_file(http *h, const char *name, const char *repo, const char *sha,
                              const char *file, lipi_error *err)
{
    char url[HUB_PATH_MAX], blob[HUB_PATH_MAX + 300], part[HUB_PATH_MAX + 320],
        link[HUB_PATH_MAX], target[HUB_PATH_MAX];
    lipi_status st;
    long code;
    snprintf(url, sizeof url, "%s/%s/resolve/%s/", h->endpoint, name, sha);
    if (!url_append(url, sizeof url, file, true))
        return lipi_error_set(err, LIPI_EINVAL, file, 0, 0, "the URL is too long");

    /* HEAD first: the blob's name (its ETag) must be known before the body
     * arrives, to find a partial file to resume. */
    http_reset(h);
    curl_easy_setopt(h->curl, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h->curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)0);
    if ((st = http_perform(h, url, &code, err)) != LIPI_OK)
        return st;
    if (code != 200)
        return http_status_error(url, code, file, "file", err);
    const char *etag = h->linked_etag[0] ? h->linked_etag : h->etag;
    if (!etag_ok(etag))
        return lipi_error_set(err, LIPI_EFORMAT, url, 0, 0,
                              "expected an ETag (letters, digits, '-', '_', '.'), found '%s'",
                              etag);
    char tag[256];
    snprintf(tag, sizeof tag, "%s", etag);
    bool sha256 = strlen(tag) == 64 && is_hex(tag, 64);
    uint64_t size = h->linked_size;
    if (!size) {
        curl_off_t cl = -1;
        curl_easy_getinfo(h->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
        size = cl > 0 ? (uint64_t)cl : 0;
    }
    snprintf(blob, sizeof blob, "%s/blobs/%s", repo, tag);
    snprintf(part, sizeof part, "%s.incomplete", blob);
    h->prog.total = size;
    h->prog.done = 0;

    struct stat sb;
    if (stat(blob, &sb) != 0) {
        FILE *f = fopen(part, "ab");
        if (!f)
            return lipi_error_set(err, LIPI_EIO, part, 0, 0, "cannot open: %s", strerror(errno));
        off_t have = ftello(f);
        http_reset(h);
        h->file = f;
        h->offset = have > 0 ? (uint64_t)have : 0;
        curl_easy_setopt(h->curl, CURLOPT_NOBODY, 0L);
        curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, to_file);
        curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
        curl_easy_setopt(h->curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)h->offset);
        st = http_perform(h, url, &code, err);
        h->file = NULL;
        bool close_failed = fclose(f) != 0;
        curl_easy_setopt(h->curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)0);
        if (st == LIPI_OK && code == 416) {
            /* The partial file is already whole (or longer than the blob):
             * the checksum below decides. */
            code = 206;
        }
        if (st != LIPI_OK) {
            if (err && err->code == LIPI_EIO && !h->write_failed)
                snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                         "; %s kept for resuming: run the command again",
                         h->offset + h->written ? "the partial file is" : "nothing was");
            return st;
        }
        if (close_failed)
            return lipi_error_set(err, LIPI_EIO, part, 0, 0, "cannot write: %s",
                                  strerror(errno));
        if (code != 200 && code != 206)
            return http_status_error(url, code, file, "file", err);
        if (sha256) {
            char got[65];
            if ((st = sha256_file(part, got, err)) != LIPI_OK)
                return st;
            if (strcmp(got, tag) != 0) {
                unlink(part);
                return lipi_error_set(err, LIPI_EFORMAT, url, 0, 0,
                                      "checksum mismatch: expected sha256 %s (ETag), found %s; "
                                      "the download was deleted",
                                      tag, got);
            }
        }
        if (rename(part, blob) != 0)
            return lipi_error_set(err, LIPI_EIO, blob, 0, 0, "cannot rename %s to it: %s", part,
                                  strerror(errno));
    }

    int n = snprintf(link, sizeof link, "%s/snapshots/%s/%s", repo, sha, file);
    if (n < 0 || (size_t)n >= sizeof link)
        return lipi_error_set(err, LIPI_EINVAL, file, 0, 0, "the cache path is too long");
    /* snapshots/SHA/a/b -> ../../../blobs/TAG: one ".." per folder level. */
    target[0] = '\0';
    size_t depth = 2;
    for (const char *p = file; *p; p++)
        depth += *p == '/';
    for (size_t i = 0; i < depth; i++)
        strcat(target, "../");
    strcat(target, "blobs/");
    strcat(target, tag);
    if ((st = make_dirs(link, false, err)) != LIPI_OK)
        return st;
    unlink(link);
    if (symlink(target, link) != 0)
        return lipi_error_set(err, LIPI_EIO, link, 0, 0, "cannot create the link: %s",
                              strerror(errno));
    h->prog.done = h->prog.total = (uint64_t)(stat(blob, &sb) == 0 ? sb.st_size : 0);
    return LIPI_OK;
}

lipi_status lipi_hub_download(const char *name, const lipi_hub_download_options *opt,
                              char *out, size_t cap, lipi_error *err)
{
    static const lipi_hub_download_options defaults = {0};
    if (!opt)
        opt = &defaults;
    if (!lipi_hub_is_name(name))
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0,
                              "expected a hub name such as ORG/NAME");
    const char *rev = opt->revision ? opt->revision : "main";
    if (!revision_ok(rev))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "bad revision '%s'", rev);
    char cache[HUB_PATH_MAX], repo[HUB_PATH_MAX], path[HUB_PATH_MAX + 300], endpoint[1024];
    lipi_status st;
    json_t *siblings = NULL;
    http h;
    memset(&h, 0, sizeof h);
    if (opt->cache_dir)
        snprintf(cache, sizeof cache, "%s", opt->cache_dir);
    else if ((st = lipi_hub_cache_dir(cache, sizeof cache, err)) != LIPI_OK)
        return st;
    if ((st = repo_dir(cache, name, repo, sizeof repo, err)) != LIPI_OK)
        return st;
    const char *ep = opt->endpoint ? opt->endpoint : getenv("HF_ENDPOINT");
    snprintf(endpoint, sizeof endpoint, "%s", ep && *ep ? ep : "https://huggingface.co");
    for (size_t l = strlen(endpoint); l && endpoint[l - 1] == '/'; l--)
        endpoint[l - 1] = '\0';

    st = http_new(&h, opt, err);
    h.endpoint = endpoint;
    char sha[41];
    if (st == LIPI_OK)
        st = fetch_file_list(&h, name, rev, sha, &siblings, err);
    if (st != LIPI_OK)
        goto done;

    /* Check every name before anything is written. */
    size_t nfiles = 0;
    for (size_t i = 0; i < json_array_size(siblings); i++) {
        json_t *f = json_object_get(json_array_get(siblings, i), "rfilename");
        if (!json_is_string(f) || !repo_path_ok(json_string_value(f))) {
            st = lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                                "siblings[%zu].rfilename: expected a relative path inside the "
                                "repository, found %s",
                                i, json_is_string(f) ? json_string_value(f) : "no string");
            goto done;
        }
        nfiles += opt->all || want_in_repo(siblings, json_string_value(f));
    }
    snprintf(path, sizeof path, "%s/blobs", repo);
    if ((st = make_dirs(path, true, err)) != LIPI_OK)
        goto done;
    snprintf(path, sizeof path, "%s/snapshots/%s", repo, sha);
    if ((st = make_dirs(path, true, err)) != LIPI_OK)
        goto done;
    h.prog.files = nfiles;
    for (size_t i = 0; i < json_array_size(siblings); i++) {
        const char *f =
            json_string_value(json_object_get(json_array_get(siblings, i), "rfilename"));
        if (!opt->all && !want_in_repo(siblings, f))
            continue;
        h.prog.file = f;
        h.prog.file_no++;
        h.prog.finished = false;
        if ((st = fetch_file(&h, name, repo, sha, f, err)) != LIPI_OK)
            goto done;
        h.prog.finished = true;
        if (opt->progress)
            opt->progress(&h.prog, opt->user);
    }
    if (strcmp(rev, sha) != 0) {
        snprintf(path, sizeof path, "%s/refs/%s", repo, rev);
        char line[42];
        snprintf(line, sizeof line, "%s", sha);
        if ((st = make_dirs(path, false, err)) != LIPI_OK ||
            (st = write_small(path, line, err)) != LIPI_OK)
            goto done;
    }
    int n = snprintf(out, cap, "%s/snapshots/%s", repo, sha);
    if (n < 0 || (size_t)n >= cap)
        st = lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "the cache path is too long");
done:
    json_decref(siblings);
    http_free(&h);
    return st;
}

/* Tests of the Hugging Face cache (pipeline/hub.c): name resolution in a
 * fake cache, and `lipi download` against a small HTTP server this test
 * runs itself on 127.0.0.1 (fork + socket), serving a fixture model the way
 * the hub does: the API answer, resolve URLs with ETags, LFS files
 * redirected to a "CDN" path with X-Linked-Etag = their SHA-256, Range
 * requests. Nothing reaches the network. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "model/model.h"
#include "tests/cli_run.h"
#include "tests/model_dir.h"

#define SHA "0123456789abcdef0123456789abcdef01234567"

static int setup(void **state)
{
    /* Proxies from the environment would send 127.0.0.1 elsewhere. */
    static const char *const proxies[] = {"http_proxy", "HTTP_PROXY", "https_proxy",
                                          "HTTPS_PROXY", "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++)
        unsetenv(proxies[i]);
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    unsetenv("HF_TOKEN");
    return md_setup("hub");
}

static int teardown(void **state)
{
    md_teardown();
    return 0;
}

/* ======================================================================== */
/* The server                                                                */
/* ======================================================================== */

typedef struct {
    char path[64];
    char *data;
    size_t len;
    char etag[80];
    bool lfs;
} served_file;

static struct {
    served_file files[16];
    size_t nfiles;
    const char *extra_sibling; /* a hostile name added to the list */
    bool truncate_first;       /* the first whole GET of an LFS file stops halfway */
    bool bad_checksum;         /* X-Linked-Etag names other content */
    char log[512];             /* every request: "METHOD PATH [bytes=N-]" */
} srv;

static pid_t server_pid;
static int server_port;

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, const char *status, const char *headers, const char *body,
                    size_t len, size_t announce, bool head)
{
    char h[1024];
    int n = snprintf(h, sizeof h,
                     "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status,
                     announce, headers);
    send_all(fd, h, (size_t)n);
    if (!head)
        send_all(fd, body, len);
}

static const char *linked_etag(const served_file *f)
{
    return srv.bad_checksum ? "0000000000000000000000000000000000000000000000000000000000000000"
                            : f->etag;
}

static void handle(int fd, bool *cut_done)
{
    char req[8192];
    size_t n = 0;
    while (n < sizeof req - 1) {
        ssize_t r = read(fd, req + n, sizeof req - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[n] = '\0';
    char method[16] = "", path[1024] = "";
    if (sscanf(req, "%15s %1023s", method, path) != 2)
        return;
    bool head = strcmp(method, "HEAD") == 0;
    size_t from = 0;
    bool ranged = false;
    for (char *line = strstr(req, "\r\n"); line; line = strstr(line + 2, "\r\n"))
        if (strncasecmp(line + 2, "Range: bytes=", 13) == 0) {
            from = strtoul(line + 15, NULL, 10);
            ranged = true;
        }
    char auth[64] = "";
    for (char *line = strstr(req, "\r\n"); line; line = strstr(line + 2, "\r\n"))
        if (strncasecmp(line + 2, "Authorization: Bearer ", 22) == 0)
            sscanf(line + 24, "%63s", auth);
    FILE *log = fopen(srv.log, "a");
    if (log) {
        fprintf(log, "%s %s", method, path);
        if (ranged)
            fprintf(log, " bytes=%zu-", from);
        if (auth[0])
            fprintf(log, " auth=%s", auth);
        fputc('\n', log);
        fclose(log);
    }

    char buf[4096], hdr[512];
    if (strcmp(path, "/api/models/org/tiny/revision/main") == 0) {
        int k = snprintf(buf, sizeof buf, "{\"id\":\"org/tiny\",\"sha\":\"" SHA "\",\"siblings\":[");
        for (size_t i = 0; i < srv.nfiles; i++)
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s{\"rfilename\":\"%s\"}",
                          i ? "," : "", srv.files[i].path);
        if (srv.extra_sibling)
            k += snprintf(buf + k, sizeof buf - (size_t)k, ",{\"rfilename\":\"%s\"}",
                          srv.extra_sibling);
        k += snprintf(buf + k, sizeof buf - (size_t)k, "]}");
        respond(fd, "200 OK", "Content-Type: application/json\r\n", buf, (size_t)k, (size_t)k,
                head);
        return;
    }
    const char *resolve = "/org/tiny/resolve/" SHA "/";
    for (size_t i = 0; i < srv.nfiles; i++) {
        served_file *f = &srv.files[i];
        char cdn[128];
        snprintf(cdn, sizeof cdn, "/cdn/%s", f->path);
        if (strncmp(path, resolve, strlen(resolve)) == 0 &&
            strcmp(path + strlen(resolve), f->path) == 0) {
            if (f->lfs) {
                /* The hub's answer for LFS files: a redirect to the CDN,
                 * the content's SHA-256 in X-Linked-Etag. */
                snprintf(hdr, sizeof hdr,
                         "Location: %s\r\nETag: W/\"pointer-%zu\"\r\nX-Linked-Etag: \"%s\"\r\n"
                         "X-Linked-Size: %zu\r\n",
                         cdn, i, linked_etag(f), f->len);
                respond(fd, "302 Found", hdr, "", 0, 0, head);
            } else {
                snprintf(hdr, sizeof hdr, "ETag: \"%s\"\r\n", f->etag);
                respond(fd, "200 OK", hdr, f->data, f->len, f->len, head);
            }
            return;
        }
        if (strcmp(path, cdn) == 0) {
            if (ranged && from < f->len) {
                snprintf(hdr, sizeof hdr, "ETag: \"cdn\"\r\nContent-Range: bytes %zu-%zu/%zu\r\n",
                         from, f->len - 1, f->len);
                respond(fd, "206 Partial Content", hdr, f->data + from, f->len - from,
                        f->len - from, head);
            } else if (!head && !ranged && srv.truncate_first && !*cut_done) {
                /* Announce the whole file, send half, hang up. */
                *cut_done = true;
                respond(fd, "200 OK", "ETag: \"cdn\"\r\n", f->data, f->len / 2, f->len, false);
            } else {
                respond(fd, "200 OK", "ETag: \"cdn\"\r\n", f->data, f->len, f->len, head);
            }
            return;
        }
    }
    const char *nf = "{\"error\":\"Repository not found\"}";
    respond(fd, "404 Not Found", "", nf, strlen(nf), strlen(nf), head);
}

static void start_server(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    server_port = ntohs(a.sin_port);
    fflush(NULL);
    server_pid = fork();
    assert_true(server_pid >= 0);
    if (server_pid == 0) {
        bool cut_done = false;
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0) {
                if (errno == EINTR)
                    continue;
                _exit(0);
            }
            handle(c, &cut_done);
            close(c);
        }
    }
    close(fd);
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", server_port);
    setenv("HF_ENDPOINT", ep, 1);
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

static void sha256_of(const char *path, char out[65])
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%64s", out), 1);
    pclose(p);
}

/* Serves the st_mean fixture with a word-level tokenizer, plus two files
 * lipi does not need. `tag` makes the log file name unique. */
static void serve_fixture(const char *tag)
{
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "modules.json", "sentence_bert_config.json",
                                        "1_Pooling/config.json"};
    const char *dir = md_path("served_model");
    struct stat sb;
    if (stat(dir, &sb) != 0)
        assert_true(md_model_dir("st_mean", dir));
    for (size_t i = 0; i < srv.nfiles; i++)
        free(srv.files[i].data);
    memset(&srv, 0, sizeof srv);
    for (size_t i = 0; i < sizeof files / sizeof files[0] + 2; i++) {
        served_file *f = &srv.files[srv.nfiles++];
        if (i < sizeof files / sizeof files[0]) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", dir, files[i]);
            snprintf(f->path, sizeof f->path, "%s", files[i]);
            f->data = md_slurp(p, &f->len);
            assert_non_null(f->data);
            f->lfs = strcmp(files[i], "model.safetensors") == 0;
            if (f->lfs)
                sha256_of(p, f->etag);
            else
                snprintf(f->etag, sizeof f->etag, "%040zx", 0xabc0 + i);
        } else {
            snprintf(f->path, sizeof f->path, "%s",
                     i == sizeof files / sizeof files[0] ? "README.md" : "onnx/model.onnx");
            f->data = strdup("not for lipi\n");
            f->len = strlen(f->data);
            snprintf(f->etag, sizeof f->etag, "%040zx", 0xdef0 + i);
        }
    }
    snprintf(srv.log, sizeof srv.log, "%s", md_path(tag));
}

static served_file *served(const char *path)
{
    for (size_t i = 0; i < srv.nfiles; i++)
        if (strcmp(srv.files[i].path, path) == 0)
            return &srv.files[i];
    return NULL;
}

/* ======================================================================== */
/* Names and resolution                                                      */
/* ======================================================================== */

static void test_hub_names_and_the_cache_folder(void **state)
{
    assert_true(lipi_hub_is_name("sentence-transformers/LaBSE"));
    assert_true(lipi_hub_is_name("bert-base-multilingual-cased"));
    assert_true(lipi_hub_is_name("intfloat/multilingual-e5-small"));
    assert_false(lipi_hub_is_name("./model"));
    assert_false(lipi_hub_is_name("/abs/path"));
    assert_false(lipi_hub_is_name("a/b/c"));
    assert_false(lipi_hub_is_name("org/.."));
    assert_false(lipi_hub_is_name("org/a..b"));
    assert_false(lipi_hub_is_name(""));
    assert_false(lipi_hub_is_name("org/"));

    char dir[4096];
    setenv("HF_HUB_CACHE", "/x/hub-cache", 1);
    setenv("HF_HOME", "/y/hf", 1);
    assert_int_equal(lipi_hub_cache_dir(dir, sizeof dir, NULL), LIPI_OK);
    assert_string_equal(dir, "/x/hub-cache");
    unsetenv("HF_HUB_CACHE");
    assert_int_equal(lipi_hub_cache_dir(dir, sizeof dir, NULL), LIPI_OK);
    assert_string_equal(dir, "/y/hf/hub");
    unsetenv("HF_HOME");
    unsetenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char *saved = home ? strdup(home) : NULL;
    setenv("HOME", "/home/me", 1);
    assert_int_equal(lipi_hub_cache_dir(dir, sizeof dir, NULL), LIPI_OK);
    assert_string_equal(dir, "/home/me/.cache/huggingface/hub");
    if (saved)
        setenv("HOME", saved, 1);
    free(saved);

    /* What lipi fetches by default. */
    assert_true(lipi_hub_wanted_file("config.json"));
    assert_true(lipi_hub_wanted_file("model.safetensors"));
    assert_true(lipi_hub_wanted_file("model-00001-of-00002.safetensors"));
    assert_true(lipi_hub_wanted_file("sentencepiece.bpe.model"));
    assert_true(lipi_hub_wanted_file("1_Pooling/config.json"));
    assert_true(lipi_hub_wanted_file("2_Dense/model.safetensors"));
    assert_false(lipi_hub_wanted_file("pytorch_model.bin"));
    assert_false(lipi_hub_wanted_file("onnx/model.onnx"));
    assert_false(lipi_hub_wanted_file("README.md"));
    assert_false(lipi_hub_wanted_file("2_Dense/pytorch_model.bin"));

    /* The same manifest says what each file is, and every file with a fixed
     * name is one lipi fetches. */
    assert_int_equal(lipi_model_file_role_of("config.json"), LIPI_MODEL_FILE_CONFIG);
    assert_int_equal(lipi_model_file_role_of("model-00001-of-00002.safetensors"),
                     LIPI_MODEL_FILE_WEIGHTS);
    assert_int_equal(lipi_model_file_role_of("merges.txt"), LIPI_MODEL_FILE_TOKENIZER);
    assert_int_equal(lipi_model_file_role_of("tokenizer.model"), LIPI_MODEL_FILE_TOKENIZER);
    assert_int_equal(lipi_model_file_role_of("modules.json"), LIPI_MODEL_FILE_MODULE);
    assert_int_equal(lipi_model_file_role_of("3_Normalize/config.json"), LIPI_MODEL_FILE_MODULE);
    assert_int_equal(lipi_model_file_role_of("README.md"), LIPI_MODEL_FILE_NONE);
    lipi_model_file f;
    size_t n = 0;
    for (; lipi_model_file_at(n, &f); n++) {
        assert_true(lipi_hub_wanted_file(f.name));
        assert_int_equal(lipi_model_file_role_of(f.name), f.role);
    }
    assert_int_equal(n, 19);
}

/* cache/models--org--tiny with refs/main -> SHA and the snapshot. */
static const char *fake_cache(void)
{
    static char cache[600];
    snprintf(cache, sizeof cache, "%s", md_path("fake_cache"));
    char p[1200];
    mkdir(cache, 0755);
    snprintf(p, sizeof p, "%s/models--org--tiny", cache);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/models--org--tiny/refs", cache);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/models--org--tiny/refs/main", cache);
    md_write(p, SHA "\n", 41);
    snprintf(p, sizeof p, "%s/models--org--tiny/snapshots", cache);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/models--org--tiny/snapshots/" SHA, cache);
    struct stat sb;
    if (stat(p, &sb) != 0)
        assert_true(md_model_dir("st_mean", p));
    return cache;
}

static void test_resolve_follows_refs_to_the_snapshot(void **state)
{
    const char *cache = fake_cache();
    char dir[4096], want[1200];
    lipi_error err = {0};
    snprintf(want, sizeof want, "%s/models--org--tiny/snapshots/" SHA, cache);
    assert_int_equal(lipi_hub_resolve("org/tiny", NULL, cache, dir, sizeof dir, &err), LIPI_OK);
    assert_string_equal(dir, want);
    assert_int_equal(lipi_hub_resolve("org/tiny", SHA, cache, dir, sizeof dir, &err), LIPI_OK);
    assert_string_equal(dir, want);

    /* Missing model, missing revision: say where and what to run. */
    assert_int_equal(lipi_hub_resolve("org/none", NULL, cache, dir, sizeof dir, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "lipi download org/none"));
    assert_non_null(strstr(err.path, "models--org--none"));
    assert_int_equal(lipi_hub_resolve("org/tiny", "v2", cache, dir, sizeof dir, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "revision 'v2'"));
    assert_non_null(strstr(err.path, "refs/v2"));
    assert_int_equal(lipi_hub_resolve("org/tiny", "../../etc", cache, dir, sizeof dir, &err),
                     LIPI_EINVAL);
    char p[1200];
    snprintf(p, sizeof p, "%s/models--org--tiny/refs/broken", cache);
    md_write(p, "not a commit\n", 13);
    assert_int_equal(lipi_hub_resolve("org/tiny", "broken", cache, dir, sizeof dir, &err),
                     LIPI_EFORMAT);

    /* The commands take the hub name: the same vectors as the folder. */
    setenv("HF_HUB_CACHE", cache, 1);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "embed --quiet -m %s --format jsonl", want);
    cli_result a = cli_run(cmd, "t5 t6\nt7\n", 9);
    cli_result b = cli_run("embed --quiet -m org/tiny --format jsonl", "t5 t6\nt7\n", 9);
    assert_int_equal(a.code, 0);
    assert_int_equal(b.code, 0);
    assert_string_equal(a.out, b.out);
    cli_result_free(&a);
    cli_result_free(&b);
    b = cli_run("embed --quiet -m org/none --format jsonl", "t5\n", 3);
    assert_int_equal(b.code, 1);
    assert_non_null(strstr(b.err, "not in the Hugging Face cache"));
    assert_non_null(strstr(b.err, cache));
    assert_non_null(strstr(b.err, "$HF_HUB_CACHE"));
    cli_result_free(&b);
    unsetenv("HF_HUB_CACHE");
}

/* ======================================================================== */
/* Downloads                                                                 */
/* ======================================================================== */

static size_t finished_files;

static void count_finished(const lipi_hub_progress *p, void *user)
{
    finished_files += p->finished;
    assert_true(p->file_no >= 1 && p->file_no <= p->files);
}

static void assert_link(const char *snap, const char *file, const char *target)
{
    char p[1400], got[1400];
    snprintf(p, sizeof p, "%s/%s", snap, file);
    ssize_t n = readlink(p, got, sizeof got - 1);
    assert_true(n > 0);
    got[n] = '\0';
    assert_string_equal(got, target);
    /* And the content is the served file's. */
    size_t len;
    char *data = md_slurp(p, &len);
    assert_non_null(data);
    served_file *f = served(file);
    assert_int_equal(len, f->len);
    assert_memory_equal(data, f->data, len);
    free(data);
}

static void test_download_fills_the_cache_like_huggingface_hub(void **state)
{
    serve_fixture("log_plain");
    start_server();
    const char *cache = md_path("dl_plain");
    char dir[4096], want[1200], target[200];
    lipi_error err = {0};
    lipi_hub_download_options o = {.cache_dir = cache, .progress = count_finished};
    finished_files = 0;
    lipi_status st = lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err);
    if (st != LIPI_OK)
        print_error("%s: %s\n", err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    assert_int_equal(finished_files, 6);
    snprintf(want, sizeof want, "%s/models--org--tiny/snapshots/" SHA, cache);
    assert_string_equal(dir, want);
    snprintf(target, sizeof target, "../../blobs/%s", served("config.json")->etag);
    assert_link(dir, "config.json", target);
    /* LFS: the blob is named by the SHA-256 from X-Linked-Etag. */
    snprintf(target, sizeof target, "../../blobs/%s", served("model.safetensors")->etag);
    assert_link(dir, "model.safetensors", target);
    snprintf(target, sizeof target, "../../../blobs/%s", served("1_Pooling/config.json")->etag);
    assert_link(dir, "1_Pooling/config.json", target);
    char p[4200];
    size_t n;
    snprintf(p, sizeof p, "%s/models--org--tiny/refs/main", cache);
    char *ref = md_slurp(p, &n);
    assert_non_null(ref);
    assert_string_equal(ref, SHA);
    free(ref);
    struct stat sb;
    snprintf(p, sizeof p, "%s/README.md", dir);
    assert_int_not_equal(lstat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/onnx", dir);
    assert_int_not_equal(lstat(p, &sb), 0);

    /* A second run fetches nothing again (HEAD requests only). */
    size_t log_before;
    free(md_slurp(srv.log, &log_before));
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_OK);
    char *log = md_slurp(srv.log, &n);
    assert_null(strstr(log + log_before, "GET /cdn/"));
    assert_null(strstr(log + log_before, "GET /org/"));
    free(log);

    /* The command, then a model command on the name. */
    setenv("HF_HUB_CACHE", md_path("dl_cli"), 1);
    cli_result r = cli_run("download org/tiny --all", NULL, 0);
    assert_int_equal(r.code, 0);
    snprintf(want, sizeof want, "%s/models--org--tiny/snapshots/" SHA "\n", md_path("dl_cli"));
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.err, "[8/8]"));
    cli_result_free(&r);
    snprintf(p, sizeof p, "%s/models--org--tiny/snapshots/" SHA "/README.md", md_path("dl_cli"));
    assert_int_equal(lstat(p, &sb), 0); /* --all */
    r = cli_run("embed --quiet -m org/tiny --format jsonl", "t5 t6\n", 6);
    assert_int_equal(r.code, 0);
    assert_memory_equal(r.out, "{\"embedding\":[", 14);
    cli_result_free(&r);
    unsetenv("HF_HUB_CACHE");
    stop_server();
}

/* A file served under `path` with small content. */
static void serve_extra(const char *path)
{
    served_file *f = &srv.files[srv.nfiles++];
    snprintf(f->path, sizeof f->path, "%s", path);
    f->data = strdup("extra\n");
    f->len = strlen(f->data);
    snprintf(f->etag, sizeof f->etag, "%040zx", 0xfe00 + srv.nfiles);
}

static bool in_snapshot(const char *cache, const char *file)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/models--org--tiny/snapshots/" SHA "/%s", cache, file);
    return lstat(p, &sb) == 0;
}

static void test_download_fetches_pytorch_model_bin_only_without_safetensors(void **state)
{
    (void)state;
    char dir[4096];
    lipi_error err = {0};
    /* Only PyTorch weights (as MuRIL ships), plus bge-m3's heads. */
    serve_fixture("log_torch_only");
    snprintf(served("model.safetensors")->path, sizeof srv.files[0].path, "pytorch_model.bin");
    serve_extra("sparse_linear.pt");
    serve_extra("2_Dense/config.json");
    serve_extra("2_Dense/pytorch_model.bin");
    serve_extra("onnx/pytorch_model.bin"); /* not a module folder */
    start_server();
    const char *cache = md_path("dl_torch_only");
    lipi_hub_download_options o = {.cache_dir = cache};
    lipi_status st = lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err);
    if (st != LIPI_OK)
        print_error("%s: %s\n", err.path, err.msg);
    assert_int_equal(st, LIPI_OK);
    assert_true(in_snapshot(cache, "pytorch_model.bin"));
    assert_true(in_snapshot(cache, "sparse_linear.pt"));
    assert_true(in_snapshot(cache, "2_Dense/pytorch_model.bin"));
    assert_false(in_snapshot(cache, "onnx/pytorch_model.bin"));
    assert_false(in_snapshot(cache, "README.md"));
    stop_server();

    /* Both forms: the safetensors only. */
    serve_fixture("log_torch_both");
    serve_extra("pytorch_model.bin");
    start_server();
    cache = md_path("dl_torch_both");
    o.cache_dir = cache;
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_OK);
    assert_true(in_snapshot(cache, "model.safetensors"));
    assert_false(in_snapshot(cache, "pytorch_model.bin"));
    stop_server();
}

static void test_download_resumes_a_truncated_transfer(void **state)
{
    serve_fixture("log_resume");
    srv.truncate_first = true;
    start_server();
    const char *cache = md_path("dl_resume");
    char dir[4096], p[1400];
    lipi_error err = {0};
    lipi_hub_download_options o = {.cache_dir = cache};
    served_file *model = served("model.safetensors");
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "run the command again"));
    /* Half the file waits in blobs/ETAG.incomplete; nothing is linked. */
    struct stat sb;
    snprintf(p, sizeof p, "%s/models--org--tiny/blobs/%s.incomplete", cache, model->etag);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal((size_t)sb.st_size, model->len / 2);
    snprintf(p, sizeof p, "%s/models--org--tiny/snapshots/" SHA "/model.safetensors", cache);
    assert_int_not_equal(lstat(p, &sb), 0);

    /* Resumed with a Range request, and the token from HF_TOKEN is sent. */
    setenv("HF_TOKEN", "hf_secret", 1);
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_OK);
    unsetenv("HF_TOKEN");
    size_t n;
    char *log = md_slurp(srv.log, &n), want[80];
    snprintf(want, sizeof want, "GET /cdn/model.safetensors bytes=%zu- auth=hf_secret\n",
             model->len / 2);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "GET /api/models/org/tiny/revision/main auth=hf_secret\n"));
    assert_non_null(strstr(log, "GET /api/models/org/tiny/revision/main\n")); /* first run */
    free(log);
    char *data = md_slurp(p, &n);
    assert_non_null(data);
    assert_int_equal(n, model->len);
    assert_memory_equal(data, model->data, n);
    free(data);
    snprintf(p, sizeof p, "%s/models--org--tiny/blobs/%s.incomplete", cache, model->etag);
    assert_int_not_equal(stat(p, &sb), 0);
    stop_server();
}

static void test_download_rejects_a_checksum_mismatch(void **state)
{
    serve_fixture("log_bad");
    srv.bad_checksum = true;
    start_server();
    const char *cache = md_path("dl_bad");
    char dir[4096], p[1400];
    lipi_error err = {0};
    lipi_hub_download_options o = {.cache_dir = cache};
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "checksum mismatch"));
    struct stat sb;
    snprintf(p, sizeof p, "%s/models--org--tiny/snapshots/" SHA "/model.safetensors", cache);
    assert_int_not_equal(lstat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/models--org--tiny/blobs/%064d", cache, 0);
    assert_int_not_equal(stat(p, &sb), 0);
    strcat(p, ".incomplete");
    assert_int_not_equal(stat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/models--org--tiny/refs/main", cache);
    assert_int_not_equal(stat(p, &sb), 0);
    stop_server();
}

static void test_download_errors_are_clear(void **state)
{
    serve_fixture("log_errors");
    start_server();
    const char *cache = md_path("errors/dl");
    mkdir(md_path("errors"), 0755);
    char dir[4096];
    lipi_error err = {0};
    lipi_hub_download_options o = {.cache_dir = cache};
    assert_int_equal(lipi_hub_download("org/missing", &o, dir, sizeof dir, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "HTTP 404"));
    assert_non_null(strstr(err.msg, "does not exist"));
    assert_non_null(strstr(err.path, "/api/models/org/missing/revision/main"));
    setenv("HF_HUB_CACHE", cache, 1);
    cli_result r = cli_run("download org/missing", NULL, 0);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "HTTP 404: model org/missing does not exist"));
    cli_result_free(&r);
    r = cli_run("download", NULL, 0);
    assert_int_equal(r.code, 2);
    cli_result_free(&r);
    /* A repository without safetensors weights downloads, with a note. */
    served_file *w = served("model.safetensors");
    free(w->data);
    *w = srv.files[--srv.nfiles];
    stop_server();
    start_server();
    setenv("HF_HUB_CACHE", md_path("errors/no_weights"), 1);
    r = cli_run("download org/tiny", NULL, 0);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "has no safetensors weights"));
    cli_result_free(&r);
    unsetenv("HF_HUB_CACHE");
    assert_int_equal(lipi_hub_download("../x", &o, dir, sizeof dir, &err), LIPI_EINVAL);

    /* A listed file the server does not have. */
    srv.extra_sibling = "vocab.txt";
    stop_server();
    start_server();
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_EIO);
    assert_non_null(strstr(err.msg, "HTTP 404: file vocab.txt does not exist"));

    /* A file name that would leave the snapshot is refused before
     * anything is written. */
    srv.extra_sibling = "../../evil.json";
    stop_server();
    start_server();
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_EFORMAT);
    assert_non_null(strstr(err.msg, "../../evil.json"));
    struct stat sb;
    char p[1400];
    snprintf(p, sizeof p, "%s/evil.json", md_path(""));
    assert_int_not_equal(stat(p, &sb), 0);
    stop_server();

    /* Nobody listening. */
    setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);
    assert_int_equal(lipi_hub_download("org/tiny", &o, dir, sizeof dir, &err), LIPI_EIO);
    assert_non_null(strstr(err.path, "127.0.0.1:1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hub_names_and_the_cache_folder),
        cmocka_unit_test(test_resolve_follows_refs_to_the_snapshot),
        cmocka_unit_test(test_download_fills_the_cache_like_huggingface_hub),
        cmocka_unit_test(test_download_fetches_pytorch_model_bin_only_without_safetensors),
        cmocka_unit_test(test_download_resumes_a_truncated_transfer),
        cmocka_unit_test(test_download_rejects_a_checksum_mismatch),
        cmocka_unit_test(test_download_errors_are_clear),
    };
    int rc = cmocka_run_group_tests_name("hub", tests, setup, teardown);
    stop_server();
    for (size_t i = 0; i < srv.nfiles; i++)
        free(srv.files[i].data);
    return rc;
}

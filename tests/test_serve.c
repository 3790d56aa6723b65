/* Tests of `lipi serve` over loopback: the server started on a free port
 * with the fixture models, every route's answer against the CLI's (vectors
 * bit for bit against `lipi embed`, ids against `lipi encode`), the OpenAI
 * response field by field, and every limit and failure: oversize bodies,
 * too many inputs, bad JSON and types, invalid UTF-8, API keys, a full
 * queue, timeouts, slow and vanishing clients, SIGTERM with requests in
 * flight. LIPI_SERVE_TEST_DELAY_MS holds jobs in the server's queue, so the
 * load cases do not depend on timing luck. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#include "tests/cli_run.h"
#include "tests/model_dir.h"

/* classify and rerank print 6 significant digits. */
#define PRINT_TOL 1e-5

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return md_setup("serve");
}

static int teardown(void **state)
{
    curl_global_cleanup();
    md_teardown();
    return 0;
}

/* ------------------------------------------------------------------------ */
/* A server and a client                                                     */
/* ------------------------------------------------------------------------ */

typedef struct {
    pid_t pid;
    int port;
    char log[512];
} server;

/* The server a failed test left running, killed by kill_left. */
static pid_t live_pid;

static int kill_left(void **state)
{
    if (live_pid > 0) {
        kill(live_pid, SIGKILL);
        waitpid(live_pid, NULL, 0);
    }
    live_pid = 0;
    return 0;
}

/* Starts `lipi serve --port 0 ARGS` (delay_ms: LIPI_SERVE_TEST_DELAY_MS,
 * 0 for none) and waits for its "listening" line. */
static server start(unsigned delay_ms, const char *fmt, ...)
{
    static int count;
    server s = {0};
    char args[1024], cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(s.log, sizeof s.log, "%s", md_path("serve.log"));
    snprintf(s.log + strlen(s.log), sizeof s.log - strlen(s.log), ".%d", count++);
    const char *bin = getenv("LIPI_BIN") ? getenv("LIPI_BIN") : "build/lipi";
    snprintf(cmd, sizeof cmd, "LIPI_SERVE_TEST_DELAY_MS=%u exec %s serve --port 0 %s 2>%s",
             delay_ms, bin, args, s.log);
    s.pid = fork();
    assert_true(s.pid >= 0);
    if (s.pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* Sanitizer builds start slowly: up to 60 s. */
    for (int i = 0; i < 6000; i++) {
        size_t len;
        char *t = cli_slurp(s.log, &len);
        const char *p = t ? strstr(t, "listening on http://127.0.0.1:") : NULL;
        if (p)
            s.port = atoi(p + strlen("listening on http://127.0.0.1:"));
        free(t);
        if (s.port) {
            live_pid = s.pid;
            return s;
        }
        int st;
        if (waitpid(s.pid, &st, WNOHANG) == s.pid)
            fail_msg("lipi serve %s exited before listening", args);
        usleep(10000);
    }
    kill(s.pid, SIGKILL);
    fail_msg("lipi serve %s did not start", args);
    return s;
}

/* SIGTERM; returns the exit status (-1 when killed by a signal). */
static int stop(server *s)
{
    int st;
    kill(s->pid, SIGTERM);
    assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
    live_pid = 0;
    if (!WIFEXITED(st)) {
        size_t n;
        char *log = cli_slurp(s->log, &n);
        print_message("lipi serve died of signal %d; its log:\n%s\n",
                      WIFSIGNALED(st) ? WTERMSIG(st) : 0, log ? log : "(none)");
        free(log);
        return -1;
    }
    return WEXITSTATUS(st);
}

typedef struct {
    long status;
    char *body;
    size_t len;
    bool retry_after;
    CURLcode rc;
} reply;

static size_t on_body(char *p, size_t sz, size_t n, void *vr)
{
    reply *r = vr;
    r->body = realloc(r->body, r->len + sz * n + 1);
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *vr)
{
    reply *r = vr;
    if (n * sz >= 12 && strncasecmp(p, "Retry-After:", 12) == 0)
        r->retry_after = true;
    return sz * n;
}

/* One request: POST when body is not NULL (len bytes; -1: strlen). */
static reply request_ex(int port, const char *path, const char *body, long len,
                        const char *header, long timeout_ms)
{
    reply r = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    if (header)
        h = curl_slist_append(h, header);
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, len < 0 ? (long)strlen(body) : len);
    }
    r.rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

static reply post(int port, const char *path, const char *body)
{
    return request_ex(port, path, body, -1, NULL, 60000);
}

static reply get(int port, const char *path)
{
    return request_ex(port, path, NULL, 0, NULL, 60000);
}

static json_t *parse(const reply *r)
{
    json_error_t e;
    json_t *j = json_loadb(r->body, r->len, 0, &e);
    if (!j)
        fail_msg("not JSON (%s): %s", e.text, r->body);
    return j;
}

/* The reply's status, or fail showing its body. */
static void expect(const reply *r, long status)
{
    if (r->status != status)
        fail_msg("expected HTTP %ld, got %ld (curl %d): %s", status, r->status, (int)r->rc,
                 r->body);
}

/* A file NAME in the test's folder holding text; its path (md_path's). */
static const char *tmp_file(const char *name, const char *text)
{
    const char *path = md_path(name);
    md_write(path, text, strlen(text));
    return path;
}

/* The float32 of a JSON number written with %.9g. */
static float as_float(const json_t *v)
{
    assert_true(json_is_number(v));
    return (float)json_number_value(v);
}

static void assert_same_floats(const float *a, const float *b, size_t n, const char *what)
{
    if (memcmp(a, b, n * sizeof *a) != 0) {
        for (size_t i = 0; i < n; i++)
            if (memcmp(a + i, b + i, sizeof *a) != 0) {
                print_error("%s[%zu]: %.9g vs %.9g\n", what, i, (double)a[i], (double)b[i]);
                break;
            }
        fail_msg("%s: not bit-identical", what);
    }
}

/* The texts of the tests: word-level fixture tokens ("tN" is id N), of
 * different lengths so a packed pass has rows of several sizes. */
static const size_t ntexts = 3, ntokens = 7 + 2 + 12;
#define TEXTS_JSON "[\"t4 t17 t5 t8 t9 t10 t11\",\"t9 t3\",\"t1 t2 t3 t4 t5 t6 t7 t8 t9 t10 t11 t12\"]"

/* `lipi embed` of the texts (with extra options): (ntexts, *dim). */
static float *cli_embed(const char *model, const char *opts, size_t *dim)
{
    const char *text = "t4 t17 t5 t8 t9 t10 t11\nt9 t3\nt1 t2 t3 t4 t5 t6 t7 t8 t9 t10 t11 t12\n";
    const char *lines = md_path("lines.txt");
    md_write(lines, text, strlen(text));
    const char *npy = md_path("cli.npy");
    cli_result r = cli_runf("embed -m %s %s -o %s %s", model, opts, npy, lines);
    assert_int_equal(r.code, 0);
    cli_result_free(&r);
    size_t rows;
    float *v = md_read_npy(npy, &rows, dim);
    assert_non_null(v);
    assert_int_equal(rows, ntexts);
    return v;
}

/* ------------------------------------------------------------------------ */
/* Routes against the CLI                                                    */
/* ------------------------------------------------------------------------ */

static void test_openai_embeddings_are_lipi_embeds_bit_for_bit_in_openai_shape(void **state)
{
    const char *model = md_model("st_mean");
    size_t dim;
    float *want = cli_embed(model, "", &dim);
    server s = start(0, "-m %s", model);
    reply r = post(s.port, "/v1/embeddings",
                   "{\"input\":" TEXTS_JSON ",\"model\":\"m\",\"encoding_format\":\"float\"}");
    expect(&r, 200);
    json_t *j = parse(&r);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "list");
    assert_string_equal(json_string_value(json_object_get(j, "model")), model);
    json_t *data = json_object_get(j, "data");
    assert_int_equal(json_array_size(data), ntexts);
    for (size_t i = 0; i < ntexts; i++) {
        json_t *d = json_array_get(data, i);
        assert_string_equal(json_string_value(json_object_get(d, "object")), "embedding");
        assert_int_equal(json_integer_value(json_object_get(d, "index")), i);
        json_t *e = json_object_get(d, "embedding");
        assert_int_equal(json_array_size(e), dim);
        float got[512];
        for (size_t k = 0; k < dim; k++)
            got[k] = as_float(json_array_get(e, k));
        assert_same_floats(got, want + i * dim, dim, "embedding");
    }
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), ntokens);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), ntokens);
    json_decref(j);
    free(r.body);

    /* A single string is a list of one. */
    r = post(s.port, "/v1/embeddings", "{\"input\":\"t9 t3\"}");
    expect(&r, 200);
    j = parse(&r);
    assert_int_equal(json_array_size(json_object_get(j, "data")), 1);
    json_decref(j);
    free(r.body);
    assert_int_equal(stop(&s), 0);
    free(want);
}

static void test_base64_decodes_to_the_float_array(void **state)
{
    const char *model = md_model("st_mean");
    size_t dim;
    float *want = cli_embed(model, "", &dim);
    server s = start(0, "-m %s", model);
    reply r = post(s.port, "/v1/embeddings",
                   "{\"input\":" TEXTS_JSON ",\"encoding_format\":\"base64\"}");
    expect(&r, 200);
    json_t *j = parse(&r);
    for (size_t i = 0; i < ntexts; i++) {
        const char *b64 = json_string_value(
            json_object_get(json_array_get(json_object_get(j, "data"), i), "embedding"));
        assert_non_null(b64);
        unsigned char bytes[2048];
        size_t n = 0;
        unsigned v = 0;
        int bits = 0;
        for (const char *p = b64; *p && *p != '='; p++) {
            const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            const char *at = strchr(tab, *p);
            assert_non_null(at);
            v = v << 6 | (unsigned)(at - tab);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                bytes[n++] = (unsigned char)(v >> bits);
            }
        }
        assert_int_equal(n, dim * 4);
        float got[512];
        for (size_t k = 0; k < dim; k++) {
            uint32_t u = bytes[4 * k] | (uint32_t)bytes[4 * k + 1] << 8 |
                         (uint32_t)bytes[4 * k + 2] << 16 | (uint32_t)bytes[4 * k + 3] << 24;
            memcpy(&got[k], &u, 4);
        }
        assert_same_floats(got, want + i * dim, dim, "base64 embedding");
    }
    json_decref(j);
    free(r.body);
    assert_int_equal(stop(&s), 0);
    free(want);
}

static void test_dimensions_and_tei_embed_match_the_cli(void **state)
{
    const char *model = md_model("st_mean");
    size_t dim, full;
    float *want = cli_embed(model, "--dimensions 8", &dim);
    float *whole = cli_embed(model, "", &full);
    assert_int_equal(dim, 8);
    server s = start(0, "-m %s", model);
    reply r = post(s.port, "/v1/embeddings", "{\"input\":" TEXTS_JSON ",\"dimensions\":8}");
    expect(&r, 200);
    json_t *j = parse(&r);
    for (size_t i = 0; i < ntexts; i++) {
        json_t *e = json_object_get(json_array_get(json_object_get(j, "data"), i), "embedding");
        assert_int_equal(json_array_size(e), 8);
        float got[8];
        for (size_t k = 0; k < 8; k++)
            got[k] = as_float(json_array_get(e, k));
        assert_same_floats(got, want + i * 8, 8, "dimensions 8");
    }
    json_decref(j);
    free(r.body);

    r = post(s.port, "/embed", "{\"inputs\":" TEXTS_JSON "}");
    expect(&r, 200);
    j = parse(&r);
    assert_int_equal(json_array_size(j), ntexts);
    for (size_t i = 0; i < ntexts; i++) {
        json_t *e = json_array_get(j, i);
        assert_int_equal(json_array_size(e), full);
        float got[512];
        for (size_t k = 0; k < full; k++)
            got[k] = as_float(json_array_get(e, k));
        assert_same_floats(got, whole + i * full, full, "/embed");
    }
    json_decref(j);
    free(r.body);

    /* Token ids: the word-level fixture has no special tokens, so [9, 3]
     * is "t9 t3" (embedded alone on both sides: the same pass). */
    float *one = NULL;
    size_t d1;
    {
        const char *line = tmp_file("one.txt", "t9 t3\n");
        const char *npy = md_path("one.npy");
        cli_result c = cli_runf("embed -m %s -o %s %s", model, npy, line);
        assert_int_equal(c.code, 0);
        cli_result_free(&c);
        size_t rows;
        one = md_read_npy(npy, &rows, &d1);
        assert_non_null(one);
    }
    r = post(s.port, "/v1/embeddings", "{\"input\":[[9,3]]}");
    expect(&r, 200);
    j = parse(&r);
    json_t *e = json_object_get(json_array_get(json_object_get(j, "data"), 0), "embedding");
    float got[512];
    for (size_t k = 0; k < d1; k++)
        got[k] = as_float(json_array_get(e, k));
    assert_same_floats(got, one, d1, "token-id input");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
                                                         "prompt_tokens")),
                     2);
    json_decref(j);
    free(r.body);
    assert_int_equal(stop(&s), 0);
    free(want);
    free(whole);
    free(one);
}

static void test_tokenize_and_decode_match_encode_with_a_tokenizer_alone(void **state)
{
    const char *model = md_model("st_mean");
    char tok[600];
    snprintf(tok, sizeof tok, "%s/tokenizer.json", model);
    cli_result c;
    char args[800];
    snprintf(args, sizeof args, "encode -t %s", tok);
    const char *in = "t4 t17 t5\n";
    c = cli_run(args, in, strlen(in));
    assert_int_equal(c.code, 0);
    assert_string_equal(c.out, "4 17 5\n");
    cli_result_free(&c);

    server s = start(0, "-t %s", tok);
    reply r = post(s.port, "/tokenize", "{\"inputs\":\"t4 t17 t5\"}");
    expect(&r, 200);
    json_t *j = parse(&r);
    json_t *toks = json_array_get(j, 0);
    assert_int_equal(json_array_size(toks), 3);
    const unsigned ids[] = {4, 17, 5};
    const char *const strs[] = {"t4", "t17", "t5"};
    const int starts[] = {0, 3, 7}, stops[] = {2, 6, 9};
    for (size_t i = 0; i < 3; i++) {
        json_t *t = json_array_get(toks, i);
        assert_int_equal(json_integer_value(json_object_get(t, "id")), ids[i]);
        assert_string_equal(json_string_value(json_object_get(t, "text")), strs[i]);
        assert_true(json_is_false(json_object_get(t, "special")));
        assert_int_equal(json_integer_value(json_object_get(t, "start")), starts[i]);
        assert_int_equal(json_integer_value(json_object_get(t, "stop")), stops[i]);
    }
    json_decref(j);
    free(r.body);

    r = post(s.port, "/decode", "{\"ids\":[[4,17,5],[9]]}");
    expect(&r, 200);
    assert_string_equal(r.body, "[\"t4 t17 t5\",\"t9\"]");
    free(r.body);

    /* Without a model the model routes say so. */
    r = post(s.port, "/embed", "{\"inputs\":\"t4\"}");
    expect(&r, 400);
    assert_non_null(strstr(r.body, "no model"));
    free(r.body);
    r = get(s.port, "/health");
    expect(&r, 200);
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_tokenize_counts_characters_not_bytes(void **state)
{
    server s = start(0, "-t cl100k_base");
    /* "नमस्ते" is 6 code points, 18 bytes. */
    reply r = post(s.port, "/tokenize", "{\"inputs\":[\"नमस्ते\"],\"add_special_tokens\":false}");
    expect(&r, 200);
    json_t *j = parse(&r);
    json_t *toks = json_array_get(j, 0);
    assert_true(json_array_size(toks) > 1);
    json_t *last = json_array_get(toks, json_array_size(toks) - 1);
    assert_int_equal(json_integer_value(json_object_get(last, "stop")), 6);
    json_decref(j);
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_classify_and_rerank_give_the_cli_scores(void **state)
{
    const char *model = md_model("bert_rerank");
    const char *lines = tmp_file("cls.txt", "t4 t17 t5\nt9 t3\n");
    cli_result c = cli_runf("classify -m %s %s", model, lines);
    assert_int_equal(c.code, 0);
    /* {"label":...,"score":P,...} per line */
    double want[2];
    const char *p = c.out;
    for (int i = 0; i < 2; i++) {
        p = strstr(p, "\"score\":");
        assert_non_null(p);
        want[i] = strtod(p + 8, NULL);
        p += 8;
    }
    cli_result_free(&c);
    server s = start(0, "-m %s", model);
    reply r = post(s.port, "/classify", "{\"inputs\":[\"t4 t17 t5\",\"t9 t3\"]}");
    expect(&r, 200);
    json_t *j = parse(&r);
    assert_int_equal(json_array_size(j), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *best = json_array_get(json_array_get(j, i), 0);
        assert_non_null(json_object_get(best, "label"));
        double got = json_number_value(json_object_get(best, "score"));
        if (!(fabs(got - want[i]) <= PRINT_TOL))
            fail_msg("classify[%zu]: %.9g vs %.9g", i, got, want[i]);
    }
    json_decref(j);
    free(r.body);

    /* rerank: passages best first, as `lipi rerank --query` prints them. */
    const char *passages = tmp_file("passages.txt", "t4 t17 t5\nt9 t3\nt8\n");
    c = cli_runf("rerank -m %s --query 't6 t7' %s", model, passages);
    assert_int_equal(c.code, 0);
    int want_idx[3];
    double want_score[3];
    char *line = c.out;
    for (int i = 0; i < 3; i++) {
        int q, rank, idx;
        double sc;
        assert_int_equal(sscanf(line, "%d\t%d\t%d\t%lf", &q, &rank, &idx, &sc), 4);
        want_idx[i] = idx;
        want_score[i] = sc;
        line = strchr(line, '\n') + 1;
    }
    cli_result_free(&c);
    r = post(s.port, "/rerank",
             "{\"query\":\"t6 t7\",\"texts\":[\"t4 t17 t5\",\"t9 t3\",\"t8\"],\"return_text\":true}");
    expect(&r, 200);
    j = parse(&r);
    assert_int_equal(json_array_size(j), 3);
    /* lipi rerank numbers passages from 1. */
    int base = want_idx[0] > 0 && want_idx[1] > 0 && want_idx[2] > 0 ? 1 : 0;
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(j, i);
        assert_int_equal(json_integer_value(json_object_get(x, "index")) + base, want_idx[i]);
        double got = json_number_value(json_object_get(x, "score"));
        if (!(fabs(got - want_score[i]) <= PRINT_TOL))
            fail_msg("rerank[%zu]: %.9g vs %.9g", i, got, want_score[i]);
        assert_non_null(json_string_value(json_object_get(x, "text")));
    }
    json_decref(j);
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_info_health_and_metrics(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(0, "-m %s", model);
    reply r = get(s.port, "/info");
    expect(&r, 200);
    json_t *j = parse(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "dimension")), 32);
    assert_string_equal(json_string_value(json_object_get(j, "model_dtype")), "float32");
    assert_non_null(json_string_value(json_object_get(j, "version")));
    assert_true(json_integer_value(json_object_get(j, "max_input_length")) > 0);
    json_decref(j);
    free(r.body);
    r = post(s.port, "/embed", "{\"inputs\":[\"t4\",\"t5 t6\"]}");
    expect(&r, 200);
    free(r.body);
    r = get(s.port, "/metrics");
    expect(&r, 200);
    assert_non_null(strstr(r.body, "lipi_requests_total{route=\"/embed\",status=\"200\"} 1\n"));
    assert_non_null(strstr(r.body, "lipi_request_duration_seconds_count{route=\"/embed\"} 1\n"));
    assert_non_null(strstr(r.body, "lipi_batch_tokens_total 3\n"));
    assert_non_null(strstr(r.body, "lipi_queue_depth 0\n"));
    free(r.body);
    assert_int_equal(stop(&s), 0);
    /* One log line per request, with its fields. */
    size_t len;
    char *log = cli_slurp(s.log, &len);
    assert_non_null(strstr(log, "{\"method\":\"POST\",\"path\":\"/embed\",\"status\":200,"
                                "\"inputs\":2,\"tokens\":3,\"ms\":"));
    free(log);
}

/* ------------------------------------------------------------------------ */
/* Limits and failures                                                       */
/* ------------------------------------------------------------------------ */

/* An OpenAI error object: status, type and the field at fault. */
static void expect_openai_error(const reply *r, long status, const char *param)
{
    expect(r, status);
    json_t *j = parse(r);
    json_t *e = json_object_get(j, "error");
    assert_non_null(json_string_value(json_object_get(e, "message")));
    assert_non_null(json_string_value(json_object_get(e, "type")));
    assert_true(json_is_null(json_object_get(e, "code")));
    json_t *p = json_object_get(e, "param");
    if (param)
        assert_string_equal(json_string_value(p), param);
    else
        assert_true(json_is_null(p));
    json_decref(j);
}

static void test_bad_requests_get_400_naming_the_field(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(0, "-m %s --max-inputs 4 --max-request-bytes 2000", model);
    struct {
        const char *body;
        long status;
        const char *param;
    } cases[] = {
        {"{\"input\":", 400, NULL},                          /* not JSON */
        {"[1,2]", 400, NULL},                                /* not an object */
        {"{}", 400, "input"},                                /* missing */
        {"{\"input\":5}", 400, "input"},                     /* wrong type */
        {"{\"input\":[\"a\",5]}", 400, "input"},            /* wrong element */
        {"{\"input\":[]}", 400, "input"},                    /* empty */
        {"{\"input\":[[1,-2]]}", 400, "input"},              /* not an id */
        {"{\"input\":\"t4\",\"encoding_format\":\"hex\"}", 400, "encoding_format"},
        {"{\"input\":\"t4\",\"dimensions\":0}", 400, "dimensions"},
        {"{\"input\":\"t4\",\"dimensions\":33}", 400, "dimensions"},
        {"{\"input\":\"t4\",\"model\":7}", 400, "model"},
        {"{\"input\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 413, "input"}, /* --max-inputs */
        {"{\"input\":[[9999]]}", 400, "input"},              /* no such id */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reply r = post(s.port, "/v1/embeddings", cases[i].body);
        expect_openai_error(&r, cases[i].status, cases[i].param);
        free(r.body);
    }
    /* Invalid UTF-8 in a string. */
    reply r = request_ex(s.port, "/v1/embeddings", "{\"input\":\"t4\xff\"}", -1, NULL, 60000);
    expect_openai_error(&r, 400, NULL);
    assert_non_null(strstr(r.body, "UTF-8"));
    free(r.body);
    /* Oversize body. */
    char big[4096];
    memset(big, ' ', sizeof big);
    memcpy(big, "{\"input\":\"t4\"}", 14);
    r = request_ex(s.port, "/v1/embeddings", big, sizeof big, NULL, 60000);
    expect_openai_error(&r, 413, NULL);
    free(r.body);
    /* TEI's error shape on its routes. */
    r = post(s.port, "/embed", "{\"inputs\":true}");
    expect(&r, 400);
    json_t *j = parse(&r);
    assert_string_equal(json_string_value(json_object_get(j, "error_type")), "Validation");
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "inputs"));
    json_decref(j);
    free(r.body);
    r = post(s.port, "/nowhere", "{}");
    expect(&r, 404);
    free(r.body);
    r = get(s.port, "/embed");
    expect(&r, 405);
    free(r.body);
    /* The server is still up and right after all that. */
    r = post(s.port, "/embed", "{\"inputs\":\"t4\"}");
    expect(&r, 200);
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_long_inputs_truncate_or_413_by_the_flag(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(0, "-m %s --max-length 4", model);
    const char *longer = "\"t1 t2 t3 t4 t5 t6\"";
    char body[256];
    snprintf(body, sizeof body, "{\"inputs\":%s,\"truncate\":false}", longer);
    reply r = post(s.port, "/embed", body);
    expect(&r, 413);
    free(r.body);
    snprintf(body, sizeof body, "{\"inputs\":%s,\"truncate\":true}", longer);
    r = post(s.port, "/embed", body);
    expect(&r, 200);
    free(r.body);
    /* OpenAI's route truncates by default, and counts what it used. */
    snprintf(body, sizeof body, "{\"input\":%s}", longer);
    r = post(s.port, "/v1/embeddings", body);
    expect(&r, 200);
    json_t *j = parse(&r);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
                                                         "prompt_tokens")),
                     4);
    json_decref(j);
    free(r.body);
    snprintf(body, sizeof body, "{\"input\":%s,\"truncate\":false}", longer);
    r = post(s.port, "/v1/embeddings", body);
    expect_openai_error(&r, 413, "input");
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_api_key_is_required_and_checked(void **state)
{
    const char *model = md_model("st_mean");
    const char *key = tmp_file("key.txt", "sekrit-42\n");
    server s = start(0, "-m %s --api-key-file %s", model, key);
    const char *body = "{\"input\":\"t4\"}";
    reply r = request_ex(s.port, "/v1/embeddings", body, -1, NULL, 60000);
    expect_openai_error(&r, 401, NULL);
    free(r.body);
    r = request_ex(s.port, "/v1/embeddings", body, -1, "Authorization: Bearer sekrit-43", 60000);
    expect_openai_error(&r, 401, NULL);
    free(r.body);
    r = request_ex(s.port, "/v1/embeddings", body, -1, "Authorization: Bearer sekrit-4", 60000);
    expect_openai_error(&r, 401, NULL);
    free(r.body);
    r = request_ex(s.port, "/v1/embeddings", body, -1, "Authorization: Bearer sekrit-42", 60000);
    expect(&r, 200);
    free(r.body);
    r = get(s.port, "/health"); /* load balancers probe without a key */
    expect(&r, 200);
    free(r.body);
    r = get(s.port, "/metrics");
    expect(&r, 401);
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

typedef struct {
    int port;
    const char *path, *body;
    long timeout_ms;
    reply r;
} call;

static void *do_call(void *vc)
{
    call *c = vc;
    c->r = request_ex(c->port, c->path, c->body, -1, NULL, c->timeout_ms);
    return NULL;
}

static void test_a_full_queue_answers_429_with_retry_after(void **state)
{
    const char *model = md_model("st_mean");
    /* Each batch waits 600 ms first: the first request holds the only slot. */
    server s = start(600, "-m %s --max-concurrent 1", model);
    call first = {s.port, "/embed", "{\"inputs\":\"t4 t5\"}", 60000, {0}};
    pthread_t t;
    pthread_create(&t, NULL, do_call, &first);
    usleep(200000);
    reply r = post(s.port, "/v1/embeddings", "{\"input\":\"t4\"}");
    expect_openai_error(&r, 429, NULL);
    assert_true(r.retry_after);
    free(r.body);
    pthread_join(t, NULL);
    expect(&first.r, 200);
    free(first.r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_a_request_waiting_past_the_timeout_gets_503(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(2500, "-m %s --timeout 1", model);
    reply r = post(s.port, "/v1/embeddings", "{\"input\":\"t4\"}");
    expect_openai_error(&r, 503, NULL);
    assert_true(r.retry_after);
    assert_non_null(strstr(r.body, "--timeout"));
    free(r.body);
    assert_int_equal(stop(&s), 0);
}

static void test_a_client_that_leaves_has_its_work_dropped(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(800, "-m %s", model);
    /* curl gives up after 200 ms, while the job still waits. */
    reply r = request_ex(s.port, "/embed", "{\"inputs\":\"t4 t5 t6\"}", -1, NULL, 200);
    assert_int_equal(r.rc, CURLE_OPERATION_TIMEDOUT);
    free(r.body);
    usleep(1500000);
    r = get(s.port, "/metrics");
    expect(&r, 200);
    /* It ran no forward pass (no tokens) and was logged as 499. */
    assert_non_null(strstr(r.body, "lipi_batch_tokens_total 0\n"));
    assert_non_null(strstr(r.body, "lipi_requests_total{route=\"/embed\",status=\"499\"} 1\n"));
    free(r.body);
    r = post(s.port, "/embed", "{\"inputs\":\"t4\"}");
    expect(&r, 200);
    free(r.body);
    assert_int_equal(stop(&s), 0);
    size_t len;
    char *log = cli_slurp(s.log, &len);
    assert_non_null(strstr(log, "\"path\":\"/embed\",\"status\":499"));
    free(log);
}

static void test_a_trickling_client_holds_no_worker_and_is_cut_off(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(0, "-m %s --timeout 1", model);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    const char *head = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{";
    assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    /* Meanwhile others are served at once. */
    for (int i = 0; i < 3; i++) {
        reply r = post(s.port, "/embed", "{\"inputs\":\"t4\"}");
        expect(&r, 200);
        free(r.body);
    }
    /* One byte every 300 ms: cut off after about --timeout. */
    char buf[512] = {0};
    ssize_t got = 0;
    for (int i = 0; i < 20 && got <= 0; i++) {
        usleep(300000);
        if (send(fd, " ", 1, MSG_NOSIGNAL) != 1)
            break;
        got = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    }
    if (got <= 0) {
        struct timeval tv = {3, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        got = recv(fd, buf, sizeof buf - 1, 0);
    }
    /* Either a 408 or the connection closed, and well before 20 bytes. */
    if (got > 0)
        assert_non_null(strstr(buf, " 408 "));
    close(fd);
    assert_int_equal(stop(&s), 0);
}

static void test_sigterm_answers_the_requests_in_flight_and_exits_0(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(700, "-m %s", model);
    call calls[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        calls[i] = (call){s.port, i % 2 ? "/embed" : "/v1/embeddings",
                          i % 2 ? "{\"inputs\":[\"t4\",\"t5 t6\"]}" : "{\"input\":\"t7\"}",
                          60000, {0}};
        pthread_create(&t[i], NULL, do_call, &calls[i]);
    }
    usleep(300000);
    assert_int_equal(stop(&s), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        expect(&calls[i].r, 200);
        free(calls[i].r.body);
    }
    /* And it no longer listens. */
    reply r = request_ex(s.port, "/health", NULL, 0, NULL, 2000);
    assert_int_not_equal(r.rc, CURLE_OK);
    free(r.body);
}

static void test_concurrent_requests_share_passes_and_get_their_own_rows(void **state)
{
    const char *model = md_model("st_mean");
    server s = start(300, "-m %s", model);
    enum { N = 6 };
    call calls[N];
    pthread_t t[N];
    char bodies[N][64];
    for (int i = 0; i < N; i++) {
        snprintf(bodies[i], sizeof bodies[i], "{\"inputs\":[\"t%d\",\"t%d t%d\"]}", i + 4, i + 4,
                 i + 5);
        calls[i] = (call){s.port, "/embed", bodies[i], 60000, {0}};
        pthread_create(&t[i], NULL, do_call, &calls[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    reply m = get(s.port, "/metrics");
    /* Fewer passes than requests: they were packed together. */
    const char *p = strstr(m.body, "lipi_batch_size_count ");
    assert_non_null(p);
    long passes = atol(p + strlen("lipi_batch_size_count "));
    assert_true(passes >= 1 && passes < N);
    free(m.body);
    assert_int_equal(stop(&s), 0);
    /* Each request's rows are its own texts' vectors (to the last bits
     * that the pass's other rows may change: the CLI's --batch caveat). */
    for (int i = 0; i < N; i++) {
        expect(&calls[i].r, 200);
        json_t *j = parse(&calls[i].r);
        char lines[64];
        snprintf(lines, sizeof lines, "t%d\nt%d t%d\n", i + 4, i + 4, i + 5);
        const char *in = tmp_file("each.txt", lines);
        const char *npy = md_path("each.npy");
        cli_result c = cli_runf("embed -m %s -o %s %s", model, npy, in);
        assert_int_equal(c.code, 0);
        cli_result_free(&c);
        size_t rows, dim;
        float *want = md_read_npy(npy, &rows, &dim);
        for (size_t k = 0; k < 2; k++)
            for (size_t d = 0; d < dim; d++) {
                float got = as_float(json_array_get(json_array_get(j, k), d));
                if (!(fabsf(got - want[k * dim + d]) <= 1e-6f))
                    fail_msg("request %d row %zu [%zu]: %.9g vs %.9g", i, k, d, (double)got,
                             (double)want[k * dim + d]);
            }
        free(want);
        json_decref(j);
        free(calls[i].r.body);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_openai_embeddings_are_lipi_embeds_bit_for_bit_in_openai_shape, kill_left),
        cmocka_unit_test_teardown(test_base64_decodes_to_the_float_array, kill_left),
        cmocka_unit_test_teardown(test_dimensions_and_tei_embed_match_the_cli, kill_left),
        cmocka_unit_test_teardown(test_tokenize_and_decode_match_encode_with_a_tokenizer_alone, kill_left),
        cmocka_unit_test_teardown(test_tokenize_counts_characters_not_bytes, kill_left),
        cmocka_unit_test_teardown(test_classify_and_rerank_give_the_cli_scores, kill_left),
        cmocka_unit_test_teardown(test_info_health_and_metrics, kill_left),
        cmocka_unit_test_teardown(test_bad_requests_get_400_naming_the_field, kill_left),
        cmocka_unit_test_teardown(test_long_inputs_truncate_or_413_by_the_flag, kill_left),
        cmocka_unit_test_teardown(test_api_key_is_required_and_checked, kill_left),
        cmocka_unit_test_teardown(test_a_full_queue_answers_429_with_retry_after, kill_left),
        cmocka_unit_test_teardown(test_a_request_waiting_past_the_timeout_gets_503, kill_left),
        cmocka_unit_test_teardown(test_a_client_that_leaves_has_its_work_dropped, kill_left),
        cmocka_unit_test_teardown(test_a_trickling_client_holds_no_worker_and_is_cut_off, kill_left),
        cmocka_unit_test_teardown(test_sigterm_answers_the_requests_in_flight_and_exits_0, kill_left),
        cmocka_unit_test_teardown(test_concurrent_requests_share_passes_and_get_their_own_rows, kill_left),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

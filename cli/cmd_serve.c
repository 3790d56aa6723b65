/* `lipi serve`: an embedding and tokenization server. HTTP is GNU
 * libmicrohttpd's (parsing, keep-alive, connection timeouts, an epoll
 * thread pool); the requests, responses, batching and metrics are the serve
 * module's (serve/serve.h); the model is the pipeline's lipi_embedder.
 *
 * A request's life: the body is read (at most --max-request-bytes), parsed
 * and checked on an HTTP thread, its tokens counted there; model work goes
 * to the batching queue and the connection is suspended (it holds no
 * thread) until the queue's thread has its results, then resumed and
 * answered. SIGTERM or SIGINT: the listening socket closes, requests in
 * flight are answered, the process exits 0. */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/embedder.h"
#include "cli/signals.h"
#include "tokenizer/base.h"
#include "serve/serve.h"

#include <dlfcn.h>

/* libmicrohttpd is opened when serve starts (dlopen), not linked: linked,
 * it and GnuTLS with the ten libraries GnuTLS needs were loaded and
 * relocated at the start of every lipi process, 2.2 ms of each on the
 * bench machine (an empty main() linked with -lmicrohttpd: 1.3 -> 3.5 ms),
 * for commands that never serve. The same functions, the same library
 * (Debian's libmicrohttpd12), found at run time. */
#define MHD_FUNCS(X)                                                                    \
    X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_quiesce_daemon) X(MHD_get_daemon_info) \
    X(MHD_get_connection_info) X(MHD_lookup_connection_value) X(MHD_queue_response)     \
    X(MHD_create_response_from_buffer) X(MHD_add_response_header)                       \
    X(MHD_destroy_response) X(MHD_suspend_connection) X(MHD_resume_connection)
static struct {
#define MHD_FIELD(f) __typeof__(f) *f;
    MHD_FUNCS(MHD_FIELD)
#undef MHD_FIELD
} mhd;

/* Opens libmicrohttpd; NULL, or why it cannot be used. */
static const char *mhd_open(void)
{
    void *h = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return "cannot load libmicrohttpd.so.12 (Debian package libmicrohttpd12)";
#define MHD_SYM(f)                                                                      \
    if (!(*(void **)&mhd.f = dlsym(h, #f)))                                             \
        return "libmicrohttpd.so.12 lacks " #f;
    MHD_FUNCS(MHD_SYM)
#undef MHD_SYM
    return NULL;
}

#define MHD_start_daemon mhd.MHD_start_daemon
#define MHD_stop_daemon mhd.MHD_stop_daemon
#define MHD_quiesce_daemon mhd.MHD_quiesce_daemon
#define MHD_get_daemon_info mhd.MHD_get_daemon_info
#define MHD_get_connection_info mhd.MHD_get_connection_info
#define MHD_lookup_connection_value mhd.MHD_lookup_connection_value
#define MHD_queue_response mhd.MHD_queue_response
#define MHD_create_response_from_buffer mhd.MHD_create_response_from_buffer
#define MHD_add_response_header mhd.MHD_add_response_header
#define MHD_destroy_response mhd.MHD_destroy_response
#define MHD_suspend_connection mhd.MHD_suspend_connection
#define MHD_resume_connection mhd.MHD_resume_connection

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi serve -m MODEL [OPTIONS]\n"
            "       lipi serve -t TOKENIZER [OPTIONS]\n"
            "\n"
            "An HTTP server for embeddings and tokens that OpenAI's and Hugging Face\n"
            "text-embeddings-inference's clients can use unchanged:\n"
            "  POST /v1/embeddings  OpenAI: {\"input\": text, [texts] or token ids,\n"
            "                       \"encoding_format\": float|base64, \"dimensions\": K}\n"
            "  POST /embed          TEI: {\"inputs\": text or [texts], \"normalize\", \"truncate\"}\n"
            "  POST /classify       {\"inputs\": ...}: a *ForSequenceClassification model's labels\n"
            "  POST /rerank         {\"query\", \"texts\": [...]}: a cross-encoder's scores\n"
            "  POST /tokenize       {\"inputs\", \"add_special_tokens\"}: ids, tokens, offsets\n"
            "  POST /decode         {\"ids\": [...], \"skip_special_tokens\"}\n"
            "  GET  /health, /info, /metrics (Prometheus)\n"
            "Requests that arrive together share one forward pass (up to\n"
            "--max-batch-tokens tokens, no padding). With -t and no model only /tokenize,\n"
            "/decode and the GET routes answer. One JSON log line per request on stderr;\n"
            "the first line says where it listens. SIGTERM: stop accepting, answer the\n"
            "requests in flight, exit 0.\n"
            "\n"
            "Options:\n"
            "  -t TOKENIZER           tokenizer for /tokenize and /decode (default: the model's)\n"
            "  --host ADDR            IPv4 address to bind (default 127.0.0.1)\n"
            "  --port N               port (default 8080; 0: any free one)\n"
            "  --max-batch-tokens N   tokens per forward pass (default 8192)\n"
            "  --max-concurrent N     requests waiting or running; more get 429 (default 512)\n"
            "  --max-request-bytes N  body size; larger gets 413 (default 4 MiB)\n"
            "  --max-inputs N         inputs per request; more get 413 (default 2048)\n"
            "  --timeout S            seconds a request may take to arrive or wait\n"
            "                         (default 30): 408 / 503\n"
            "  --api-key-file F       require 'Authorization: Bearer KEY' (KEY: F's first\n"
            "                         line) on every route but /health; else 401\n"
            "  --prompt TEXT, --prompt-name NAME\n"
            "                         put before every text, as lipi embed does\n"
            "  (--quiet: no log line per request)\n"
            "%s"
            "  -h, --help             show this help\n"
            "\n"
            "Example:\n"
            "  lipi serve -m sentence-transformers/all-MiniLM-L6-v2 --port 8080 &\n"
            "  curl -s localhost:8080/v1/embeddings -d '{\"input\": \"नमस्ते दुनिया\"}'\n",
            cli_model_options_help);
}

/* ------------------------------------------------------------------------ */
/* The server's state (one per process)                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *model_name;
    const char *tokenizer_path, *host, *key_file;
    uint64_t port, max_batch_tokens, max_concurrent, max_request_bytes, max_inputs, timeout;
} serve_opts;

static struct {
    serve_opts o;
    lipi_embedder *e;
    lipi_serve_queue *q;
    lipi_serve_metrics *m;
    cli_tokenizer tok;            /* -t */
    const lipi_encoder *enc;      /* for /tokenize, /decode and counting */
    lipi_encoder *count_enc;      /* the model's, when -t is another */
    /* Encoder sessions for the HTTP threads: a free list. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lipi_session **free_sess, **count_sess;
    size_t nfree, ncount;
    size_t active;                /* requests begun and not yet completed */
    char *key;
    size_t key_len;
    size_t dim, max_len, labels;
    bool normalizes;              /* the model's default */
    bool quiet;                   /* no request log lines */
    const char *dtype;
    lipi_dtype dt;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

enum { HTTP_THREADS = 2 };

/* Takes a session of `pool` (waits while all are in use: there are as
 * many as HTTP threads, so it never does). */
static lipi_session *take_session(lipi_session **pool, size_t *n)
{
    pthread_mutex_lock(&S.mu);
    while (!*n)
        pthread_cond_wait(&S.cv, &S.mu);
    lipi_session *s = pool[--*n];
    pthread_mutex_unlock(&S.mu);
    return s;
}

static void give_session(lipi_session **pool, size_t *n, lipi_session *s)
{
    pthread_mutex_lock(&S.mu);
    pool[(*n)++] = s;
    pthread_cond_signal(&S.cv);
    pthread_mutex_unlock(&S.mu);
}

/* ------------------------------------------------------------------------ */
/* One request                                                               */
/* ------------------------------------------------------------------------ */

typedef enum { READING, QUEUED, ANSWERED } req_state;

typedef struct {
    struct MHD_Connection *conn;
    lipi_serve_route route;
    const char *method;
    char path[64];
    struct timespec start;
    char *body;
    size_t len;
    bool too_big, too_slow;
    req_state state;
    lipi_serve_request req;
    lipi_serve_job job;
    size_t *tokens;
    float *out;
    size_t out_dim;
    uint8_t *cut;
    int status;
    char *resp;                   /* malloc'd body of the answer */
    const char *ctype;
    bool retry_after;
    bool counted;                 /* in the metrics */
    size_t inputs, ntok;
} req_ctx;

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* The answer: an error object in the route's shape. */
static void answer_error(req_ctx *c, const lipi_serve_error *e)
{
    free(c->resp);
    c->status = e->status;
    c->resp = lipi_serve_error_json(c->route, e);
    c->ctype = "application/json";
    c->retry_after = e->status == 429 || e->status == 503;
}

__attribute__((format(printf, 4, 5))) static int fail(req_ctx *c, int status, const char *param,
                                                      const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lipi_serve_error e;
    lipi_serve_fail(&e, status, param, "%s", msg);
    answer_error(c, &e);
    return status;
}

static void answer_json(req_ctx *c, char *json)
{
    if (!json) {
        fail(c, 500, NULL, "out of memory");
        return;
    }
    free(c->resp);
    c->status = 200;
    c->resp = json;
    c->ctype = "application/json";
}

/* A library error about input i (err->line = i + 1) as a 400 naming the
 * field. */
static void answer_lipi_error(req_ctx *c, const char *field, const lipi_error *err)
{
    lipi_serve_error e;
    int status = err->code == LIPI_ENOMEM ? 500 : 400;
    if (err->line)
        lipi_serve_fail(&e, status, field, "%s[%zu]: %s", field, err->line - 1, err->msg);
    else
        lipi_serve_fail(&e, status, field, "%s", err->msg);
    answer_error(c, &e);
}

static const char *input_field(lipi_serve_route r)
{
    return r == LIPI_ROUTE_OPENAI ? "input" : r == LIPI_ROUTE_RERANK ? "texts"
                                          : r == LIPI_ROUTE_DECODE ? "ids"
                                                                   : "inputs";
}

/* Embedding results, post-processed per request: the embedder never
 * normalizes (so /embed's normalize=false can be had), so here each vector
 * is normalized when asked - the same lipi_vectors_normalize call the model
 * makes last, so the floats are the ones `lipi embed` writes - then cut to
 * `dimensions` and normalized again, as lipi_embedder's truncate_dim. */
static void finish_vectors(req_ctx *c)
{
    const lipi_serve_request *r = &c->req;
    bool norm = r->normalize >= 0 ? r->normalize != 0 : S.normalizes;
    size_t n = r->n, k = r->dimensions ? r->dimensions : S.dim;
    if (norm)
        lipi_vectors_normalize(c->out, n, S.dim);
    if (k < S.dim) {
        for (size_t i = 0; i < n; i++)
            memmove(c->out + i * k, c->out + i * S.dim, k * sizeof *c->out);
        if (norm)
            lipi_vectors_normalize(c->out, n, k);
    }
    if (r->route == LIPI_ROUTE_OPENAI)
        answer_json(c, lipi_serve_openai_json(c->out, n, k, r->base64,
                                              S.o.model_name, c->ntok));
    else
        answer_json(c, lipi_serve_vectors_json(c->out, n, k));
}

/* The queue's thread: the job is over; answer and wake the connection. */
static void job_done(lipi_serve_job *job, void *vc)
{
    req_ctx *c = vc;
    switch (job->state) {
    case LIPI_JOB_DONE:
        if (c->route == LIPI_ROUTE_CLASSIFY) {
            const char **labels = malloc(S.labels * sizeof *labels);
            for (size_t i = 0; labels && i < S.labels; i++)
                labels[i] = lipi_embedder_label(S.e, i);
            answer_json(c, labels ? lipi_serve_classify_json(c->out, c->req.n, S.labels, labels)
                                  : NULL);
            free(labels);
        } else if (c->route == LIPI_ROUTE_RERANK) {
            answer_json(c, lipi_serve_rerank_json(c->out, c->req.n, c->req.texts, c->req.lens,
                                                  c->req.return_text));
        } else {
            finish_vectors(c);
        }
        break;
    case LIPI_JOB_FAILED: answer_lipi_error(c, input_field(c->route), &job->err); break;
    case LIPI_JOB_TIMED_OUT:
        fail(c, 503, NULL, "the request waited longer than --timeout (%llu s)",
             (unsigned long long)S.o.timeout);
        break;
    case LIPI_JOB_DROPPED: /* nginx's "client closed request": nobody reads it */
        fail(c, 499, NULL, "the client closed the connection");
        break;
    case LIPI_JOB_STOPPED: fail(c, 503, NULL, "the server is stopping"); break;
    }
    c->state = ANSWERED;
    MHD_resume_connection(c->conn);
}

/* Whether the client still waits for a suspended request: a closed
 * socket reads as end of file. */
static bool client_alive(void *vc)
{
    req_ctx *c = vc;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return true;
    char b;
    ssize_t k = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR));
}

/* Counts every text's tokens (and the 413 of a long one when the request
 * does not truncate). Returns 0 or the status answered. */
static int count_tokens(req_ctx *c)
{
    lipi_serve_request *r = &c->req;
    const char *field = input_field(r->route);
    if (!(c->tokens = calloc(r->n, sizeof *c->tokens)))
        return fail(c, 500, NULL, "out of memory");
    size_t qtok = 0;
    lipi_error err = {0};
    lipi_session *s = take_session(S.count_sess, &S.ncount);
    lipi_status st = LIPI_OK;
    if (r->route == LIPI_ROUTE_RERANK &&
        (st = lipi_embedder_count_tokens(S.e, s, r->query, r->query_len, &qtok, &err)) != LIPI_OK)
        field = "query";
    for (size_t i = 0; st == LIPI_OK && i < r->n; i++) {
        if (r->texts)
            st = lipi_embedder_count_tokens(S.e, s, r->texts[i], r->lens[i], &c->tokens[i], &err);
        else
            c->tokens[i] = r->id_lens[i];
        if (st != LIPI_OK)
            err.line = i + 1;
        else if (r->route == LIPI_ROUTE_RERANK)
            c->tokens[i] += qtok; /* a pair: about the sum (the template's tokens aside) */
        else if (c->tokens[i] > S.max_len && !r->truncate) {
            give_session(S.count_sess, &S.ncount, s);
            return fail(c, 413, field,
                        "%s[%zu] has more tokens than the model takes; send \"truncate\": true "
                        "to cut it",
                        field, i);
        }
        if (c->tokens[i] > S.max_len)
            c->tokens[i] = S.max_len;
        c->ntok += c->tokens[i];
    }
    give_session(S.count_sess, &S.ncount, s);
    if (st != LIPI_OK) {
        answer_lipi_error(c, field, &err);
        return c->status;
    }
    return 0;
}

/* Model routes: check, count, queue. Returns true when queued (the
 * connection is then suspended). */
static bool submit(req_ctx *c)
{
    lipi_serve_request *r = &c->req;
    if (!S.e) {
        fail(c, 400, NULL, "this server has no model (started with -t only)");
        return false;
    }
    if ((r->route == LIPI_ROUTE_CLASSIFY || r->route == LIPI_ROUTE_RERANK) && !S.labels) {
        fail(c, 400, NULL, "the model has no classifier head");
        return false;
    }
    if (count_tokens(c))
        return false;
    c->out_dim = r->route == LIPI_ROUTE_CLASSIFY ? S.labels
                 : r->route == LIPI_ROUTE_RERANK ? 1
                                                 : S.dim;
    if (!(c->out = calloc(r->n, c->out_dim * sizeof *c->out)) || !(c->cut = calloc(r->n, 1))) {
        fail(c, 500, NULL, "out of memory");
        return false;
    }
    lipi_serve_job *j = &c->job;
    *j = (lipi_serve_job){
        .kind = r->route == LIPI_ROUTE_CLASSIFY ? LIPI_JOB_CLASSIFY
                : r->route == LIPI_ROUTE_RERANK ? LIPI_JOB_RERANK
                : r->ids                        ? LIPI_JOB_EMBED_IDS
                                                : LIPI_JOB_EMBED,
        .n = r->n,
        .texts = r->texts,
        .lens = r->lens,
        .ids = (const uint32_t *const *)r->ids,
        .id_lens = r->id_lens,
        .query = r->query,
        .query_len = r->query_len,
        /* As lipi rerank: a one-label head's only label, else the last. */
        .label = S.labels ? S.labels - 1 : 0,
        .raw = r->raw_scores,
        .tokens = c->tokens,
        .out = c->out,
        .out_dim = c->out_dim,
        .truncated = c->cut,
        .on_done = job_done,
        .alive = client_alive,
        .ctx = c,
    };
    if (S.o.timeout) {
        j->deadline = c->start;
        j->deadline.tv_sec += (time_t)S.o.timeout;
    }
    /* Suspended first: the queue may finish the job (and resume) at once. */
    c->state = QUEUED;
    MHD_suspend_connection(c->conn);
    if (!lipi_serve_queue_submit(S.q, j)) {
        fail(c, 429, NULL, "the server has --max-concurrent (%llu) requests in flight; retry",
             (unsigned long long)S.o.max_concurrent);
        c->state = ANSWERED;
        MHD_resume_connection(c->conn);
    }
    return true;
}

static void answer_info(req_ctx *c)
{
    char buf[2048];
    if (!S.e) {
        snprintf(buf, sizeof buf,
                 "{\"model_id\":null,\"tokenizer\":\"%s\",\"version\":\"%s\"}",
                 S.o.tokenizer_path, lipi_version());
    } else {
        snprintf(buf, sizeof buf,
                 "{\"model_id\":\"%s\",\"model_type\":\"%s\",\"dimension\":%zu,"
                 "\"max_input_length\":%zu,\"model_dtype\":\"%s\",\"normalize\":%s,"
                 "\"labels\":%zu,\"max_batch_tokens\":%llu,\"max_concurrent_requests\":%llu,"
                 "\"max_client_batch_size\":%llu,\"version\":\"%s\"}",
                 S.o.model_name, S.labels ? "classifier" : "embedding", S.dim, S.max_len, S.dtype,
                 S.normalizes ? "true" : "false", S.labels,
                 (unsigned long long)S.o.max_batch_tokens,
                 (unsigned long long)S.o.max_concurrent, (unsigned long long)S.o.max_inputs,
                 lipi_version());
    }
    answer_json(c, strdup(buf));
}

/* Routes answered on the HTTP thread. */
static void answer_now(req_ctx *c)
{
    lipi_serve_request *r = &c->req;
    lipi_error err = {0};
    char *json = NULL;
    lipi_status st = LIPI_OK;
    lipi_session *s = take_session(S.free_sess, &S.nfree);
    if (r->route == LIPI_ROUTE_TOKENIZE) {
        lipi_encode_options eo;
        lipi_encode_options_default(S.enc, &eo);
        eo.add_special_tokens = r->add_special;
        st = lipi_serve_tokenize_json(s, &eo, r->texts, r->lens, r->n, &json, &c->ntok, &err);
    } else {
        st = lipi_serve_decode_json(s, r->ids, r->id_lens, r->n, r->skip_special, &json, &err);
        for (size_t i = 0; i < r->n; i++)
            c->ntok += r->id_lens[i];
    }
    give_session(S.free_sess, &S.nfree, s);
    if (st != LIPI_OK)
        answer_lipi_error(c, input_field(r->route), &err);
    else
        answer_json(c, json);
}

static bool authorized(struct MHD_Connection *conn)
{
    if (!S.key)
        return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    return lipi_serve_equal_ct(S.key, S.key_len, h, strlen(h));
}

/* Everything the body's last byte starts. */
static void process(req_ctx *c)
{
    bool post = strcmp(c->method, "POST") == 0;
    bool get_route = c->route == LIPI_ROUTE_HEALTH || c->route == LIPI_ROUTE_INFO ||
                     c->route == LIPI_ROUTE_METRICS;
    if (c->route == LIPI_ROUTE_OTHER) {
        fail(c, 404, NULL, "no route %s", c->path);
        return;
    }
    if (get_route == post) {
        fail(c, 405, NULL, "%s takes %s", lipi_serve_route_path(c->route),
             get_route ? "GET" : "POST");
        return;
    }
    if (c->route == LIPI_ROUTE_HEALTH) {
        answer_json(c, strdup("{\"status\":\"ok\"}"));
        return;
    }
    if (c->route == LIPI_ROUTE_INFO) {
        answer_info(c);
        return;
    }
    if (c->route == LIPI_ROUTE_METRICS) {
        char *t = lipi_serve_metrics_text(S.m, S.q);
        answer_json(c, t);
        c->ctype = "text/plain; version=0.0.4";
        return;
    }
    if (c->too_big) {
        fail(c, 413, NULL, "the body is larger than --max-request-bytes (%llu)",
             (unsigned long long)S.o.max_request_bytes);
        return;
    }
    lipi_serve_limits lim = {.max_inputs = S.o.max_inputs, .dim = S.dim};
    lipi_serve_error e;
    if (lipi_serve_parse(c->route, c->body ? c->body : "", c->len, &lim, &c->req, &e) != 0) {
        answer_error(c, &e);
        return;
    }
    c->inputs = c->req.n;
    if (c->route == LIPI_ROUTE_TOKENIZE || c->route == LIPI_ROUTE_DECODE)
        answer_now(c);
    else
        submit(c);
}

/* Counts the request in the metrics, once: when its answer is queued (so
 * a client that asks /metrics next sees it), or when it ends unanswered. */
static void count_request(req_ctx *c, int status)
{
    if (c->counted)
        return;
    c->counted = true;
    lipi_serve_metrics_add(S.m, c->route, status, since(&c->start), c->inputs, c->ntok);
}

static enum MHD_Result queue_answer(req_ctx *c)
{
    count_request(c, c->status);
    const char *body = c->resp ? c->resp : "";
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                                MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", c->ctype ? c->ctype : "application/json");
    if (c->retry_after)
        MHD_add_response_header(resp, "Retry-After", "1");
    if (c->status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)c->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    req_ctx *c = *con_cls;
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return MHD_NO;
        c->conn = conn;
        c->method = strcmp(method, "POST") == 0 ? "POST" : strcmp(method, "GET") == 0 ? "GET"
                                                                                      : "other";
        snprintf(c->path, sizeof c->path, "%s", url);
        c->route = lipi_serve_route_of(url);
        clock_gettime(CLOCK_MONOTONIC, &c->start);
        pthread_mutex_lock(&S.mu);
        S.active++;
        pthread_mutex_unlock(&S.mu);
        *con_cls = c;
        /* A client without the key, or with a Content-Length over the
         * limit, is refused before its body comes. */
        if (c->route != LIPI_ROUTE_HEALTH && !authorized(conn)) {
            fail(c, 401, NULL, "missing or wrong API key (Authorization: Bearer KEY)");
            c->state = ANSWERED;
            return queue_answer(c);
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S.o.max_request_bytes) {
            c->too_big = true;
            fail(c, 413, NULL, "the body is larger than --max-request-bytes (%llu)",
                 (unsigned long long)S.o.max_request_bytes);
            c->state = ANSWERED;
            return queue_answer(c);
        }
        return MHD_YES;
    }
    if (c->state == READING && *upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (S.o.timeout && since(&c->start) > (double)S.o.timeout) {
            /* A trickling client: refused once the request is older than
             * --timeout (MHD's idle timeout only sees silence). */
            c->too_slow = true;
            fail(c, 408, NULL, "the body took longer than --timeout (%llu s)",
                 (unsigned long long)S.o.timeout);
            c->state = ANSWERED;
            return queue_answer(c);
        }
        if (c->too_big || c->len + n > S.o.max_request_bytes) {
            c->too_big = true;
            return MHD_YES;
        }
        char *p = realloc(c->body, c->len + n + 1);
        if (!p)
            return MHD_NO;
        memcpy(p + c->len, upload_data, n);
        c->body = p;
        c->len += n;
        return MHD_YES;
    }
    if (c->state == READING) {
        process(c);
        if (c->state == QUEUED)
            return MHD_YES; /* suspended; the queue resumes it */
        c->state = ANSWERED;
        return queue_answer(c);
    }
    if (c->state == ANSWERED && c->status)
        return queue_answer(c);
    return MHD_YES;
}

/* The request is over (answered, or the client went away): one log line,
 * the metrics, and its memory. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    req_ctx *c = *con_cls;
    if (!c)
        return;
    double s = since(&c->start);
    int status = c->status ? c->status : 499; /* nginx's "client closed request" */
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status == 200)
        status = 499;
    count_request(c, status);
    char line[256];
    snprintf(line, sizeof line,
             "{\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,\"inputs\":%zu,\"tokens\":%zu,"
             "\"ms\":%.3f}\n",
             c->method, lipi_serve_route_path(c->route), status, c->inputs, c->ntok, s * 1e3);
    if (!S.quiet)
        fputs(line, stderr);
    lipi_serve_request_free(&c->req);
    free(c->body);
    free(c->tokens);
    free(c->out);
    free(c->cut);
    free(c->resp);
    free(c);
    *con_cls = NULL;
    pthread_mutex_lock(&S.mu);
    S.active--;
    pthread_cond_broadcast(&S.cv);
    pthread_mutex_unlock(&S.mu);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    /* libmicrohttpd's own messages (a refused connection, a bad request
     * line) go to stderr with a prefix; they are not request lines. */
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '\n')
        buf[--n] = '\0';
    fprintf(stderr, "lipi serve: http: %s\n", buf);
}

/* ------------------------------------------------------------------------ */
/* Options and main loop                                                     */
/* ------------------------------------------------------------------------ */

static int serve_option(int id, const char *arg, void *vo)
{
    serve_opts *o = vo;
    uint64_t v;
    switch (id) {
    case 't': o->tokenizer_path = arg; return 0;
    case CLI_OPT_HOST: o->host = arg; return 0;
    case CLI_OPT_API_KEY_FILE: o->key_file = arg; return 0;
    case CLI_OPT_PORT:
        if (!cli_parse_u64(arg, &v) || v > 65535)
            return cli_bad_value("serve", "--port", "a number from 0 to 65535", arg);
        o->port = v;
        return 0;
    default: break;
    }
    if (!cli_parse_u64(arg, &v) || v == 0 || v > ((uint64_t)1 << 40))
        return cli_bad_value("serve",
                             id == CLI_OPT_MAX_BATCH_TOKENS ? "--max-batch-tokens"
                             : id == CLI_OPT_MAX_CONCURRENT ? "--max-concurrent"
                             : id == CLI_OPT_MAX_REQUEST_BYTES ? "--max-request-bytes"
                             : id == CLI_OPT_MAX_INPUTS ? "--max-inputs"
                                                        : "--timeout",
                             "a positive number", arg);
    switch (id) {
    case CLI_OPT_MAX_BATCH_TOKENS: o->max_batch_tokens = v; break;
    case CLI_OPT_MAX_CONCURRENT: o->max_concurrent = v; break;
    case CLI_OPT_MAX_REQUEST_BYTES: o->max_request_bytes = v; break;
    case CLI_OPT_MAX_INPUTS: o->max_inputs = v; break;
    default: o->timeout = v; break;
    }
    return 0;
}

static int read_key(const char *path)
{
    size_t len = 0;
    char *k = NULL;
    lipi_error err = {0};
    if (lipi_read_file(path, 4096, &k, &len, &err) != LIPI_OK) {
        cli_report("serve", &err);
        return EXIT_FAIL;
    }
    size_t n = strcspn(k, "\r\n");
    k[n] = '\0';
    if (!n) {
        lipi_free(k);
        return cli_usage_error("serve", "--api-key-file: '%s' has an empty first line", path);
    }
    S.key = k;
    S.key_len = n;
    return 0;
}

/* Sessions for the HTTP threads: HTTP_THREADS for /tokenize and /decode
 * on S.enc, and as many on the model's encoder for counting. */
static int make_sessions(void)
{
    if (!(S.free_sess = calloc(HTTP_THREADS, sizeof *S.free_sess)) ||
        !(S.count_sess = calloc(HTTP_THREADS, sizeof *S.count_sess)))
        return -1;
    for (; S.nfree < HTTP_THREADS; S.nfree++)
        if (lipi_session_new(S.enc, &S.free_sess[S.nfree]) != LIPI_OK)
            return -1;
    for (; S.e && S.ncount < HTTP_THREADS; S.ncount++)
        if (lipi_session_new(lipi_embedder_encoder(S.e), &S.count_sess[S.ncount]) != LIPI_OK)
            return -1;
    return 0;
}

static void free_sessions(void)
{
    for (size_t i = 0; i < S.nfree; i++)
        lipi_session_free(S.free_sess[i]);
    for (size_t i = 0; i < S.ncount; i++)
        lipi_session_free(S.count_sess[i]);
    free(S.free_sess);
    free(S.count_sess);
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"host", required_argument, NULL, CLI_OPT_HOST},
        {"port", required_argument, NULL, CLI_OPT_PORT},
        {"max-batch-tokens", required_argument, NULL, CLI_OPT_MAX_BATCH_TOKENS},
        {"max-concurrent", required_argument, NULL, CLI_OPT_MAX_CONCURRENT},
        {"max-request-bytes", required_argument, NULL, CLI_OPT_MAX_REQUEST_BYTES},
        {"max-inputs", required_argument, NULL, CLI_OPT_MAX_INPUTS},
        {"timeout", required_argument, NULL, CLI_OPT_TIMEOUT},
        {"api-key-file", required_argument, NULL, CLI_OPT_API_KEY_FILE},
        {NULL, 0, NULL, 0},
    };
    S.o = (serve_opts){.host = "127.0.0.1", .port = 8080, .max_batch_tokens = 8192,
                       .max_concurrent = 512, .max_request_bytes = 4u << 20,
                       .max_inputs = 2048, .timeout = 30};
    cli_args a = {.eo = {.batch = 32, .normalize = -1}, .max_threads = 256};
    const cli_spec spec = {"serve", help, "t:", opts, CLI_ARGS_MODEL | CLI_ARG_PROMPT,
                           serve_option, &S.o, 0};
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (optind < argc)
        return cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
    S.quiet = a.quiet;
    if (!a.model && !S.o.tokenizer_path)
        return cli_usage_error("serve", "-m MODEL or -t TOKENIZER is required");
    struct in_addr addr;
    if (inet_pton(AF_INET, S.o.host, &addr) != 1)
        return cli_bad_value("serve", "--host", "an IPv4 address such as 127.0.0.1", S.o.host);
    if (S.o.key_file && (rc = read_key(S.o.key_file)))
        return rc;

    lipi_error err = {0};
    struct MHD_Daemon *d = NULL;
    const char *why = mhd_open();
    if (why) {
        fprintf(stderr, "lipi serve: %s\n", why);
        return EXIT_FAIL;
    }
    rc = EXIT_FAIL;
    S.m = lipi_serve_metrics_new();
    S.o.model_name = a.model ? a.model : "";
    /* The user's --normalize is each request's default; the embedder
     * itself never normalizes (finish_vectors does). */
    int user_norm = a.eo.normalize;
    a.eo.normalize = -2;
    if (a.model) {
        if (lipi_embedder_open(a.model, &a.eo, &S.e, &err) != LIPI_OK)
            goto report;
        lipi_index_model id;
        char fp[17];
        if (lipi_embedder_identity(S.e, &id, fp, &err) != LIPI_OK)
            goto report;
        S.normalizes = user_norm == -1 ? id.normalize : user_norm != -2;
        S.dim = lipi_embedder_dim(S.e);
        S.max_len = lipi_embedder_max_length(S.e);
        S.labels = lipi_embedder_label_count(S.e);
        S.dtype = a.eo.dtype == LIPI_DTYPE_INT8 ? "int8" : "float32";
        lipi_serve_queue_options qo = {.threads = a.threads,
                                       .max_batch_tokens = S.o.max_batch_tokens,
                                       .max_batch = a.eo.batch,
                                       .max_jobs = S.o.max_concurrent};
        /* Tests only (tests/test_serve.c): hold jobs in the queue. */
        const char *delay = getenv("LIPI_SERVE_TEST_DELAY_MS");
        if (delay)
            qo.delay_ms = (unsigned)strtoul(delay, NULL, 10);
        if (lipi_serve_queue_new(S.e, &qo, &S.q, &err) != LIPI_OK)
            goto report;
        S.enc = lipi_embedder_encoder(S.e);
    }
    if (S.o.tokenizer_path) {
        if (cli_tokenizer_open("serve", S.o.tokenizer_path, &a.oo, 1, &S.tok) != EXIT_OK)
            goto done;
        S.enc = S.tok.enc;
    }
    if (!S.m || make_sessions() != 0) {
        lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto report;
    }

    /* From here SIGTERM, SIGINT and SIGHUP stop the server gracefully
     * (cli_signals_wait below). */
    cli_signals_graceful();
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)S.o.port),
                             .sin_addr = addr};
    /* poll(), not epoll (MHD_USE_AUTO's choice on Linux): libmicrohttpd
     * 0.9.75 aborts ("Failed to remove listen FD from epoll set") when
     * MHD_quiesce_daemon races a pool thread that removes the listening
     * socket from its epoll set itself; with poll() quiescing only wakes
     * the threads. Seen in about one test_serve run in ten. */
    d = MHD_start_daemon(MHD_USE_POLL | MHD_USE_INTERNAL_POLLING_THREAD |
                             MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                         0, NULL, NULL, on_request, NULL,
                         MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                         MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S.o.timeout,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                         MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
                         MHD_OPTION_END);
    if (!d) {
        lipi_error_set(&err, LIPI_EIO, NULL, 0, 0, "cannot listen on %s:%llu: %s", S.o.host,
                       (unsigned long long)S.o.port, strerror(errno));
        goto report;
    }
    const union MHD_DaemonInfo *li = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_in bound;
    socklen_t bl = sizeof bound;
    unsigned port = (unsigned)S.o.port;
    if (li && getsockname(li->listen_fd, (struct sockaddr *)&bound, &bl) == 0)
        port = ntohs(bound.sin_port);
    fprintf(stderr, "lipi serve: listening on http://%s:%u/ (%s%s)\n", S.o.host, port,
            a.model ? "model " : "tokenizer ", a.model ? a.model : S.o.tokenizer_path);

    int sig = cli_signals_wait();
    /* Stop accepting; answer what is in flight (bounded by --timeout and
     * the connection timeout: a stuck client cannot hold the exit). */
    MHD_socket ls = MHD_quiesce_daemon(d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(2 * S.o.timeout + 1);
    pthread_mutex_lock(&S.mu);
    while (S.active && pthread_cond_timedwait(&S.cv, &S.mu, &until) != ETIMEDOUT)
        ;
    size_t left = S.active;
    pthread_mutex_unlock(&S.mu);
    fprintf(stderr, "lipi serve: %s, %zu request%s unanswered; exiting\n", strsignal(sig), left,
            left == 1 ? "" : "s");
    rc = left ? EXIT_FAIL : EXIT_OK;
    if (left) {
        /* Suspended connections would make MHD_stop_daemon abort. */
        _exit(EXIT_FAIL);
    }
    goto done;
report:
    cli_report("serve", &err);
done:
    if (d)
        MHD_stop_daemon(d);
    lipi_serve_queue_free(S.q);
    free_sessions();
    cli_tokenizer_close(&S.tok);
    lipi_embedder_free(S.e);
    lipi_serve_metrics_free(S.m);
    lipi_free(S.key);
    return rc;
}

const cli_command cmd_serve = {"serve", "an OpenAI/TEI-compatible embedding and token server",
                               run};

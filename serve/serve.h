/* lipi serve module: the HTTP-independent half of `lipi serve` - request
 * bodies parsed and checked, response bodies built, the batching queue
 * that packs concurrent requests into one forward pass, and the metrics.
 * cli/cmd_serve.c puts it behind GNU libmicrohttpd.
 *
 *   lipi_serve_request r; lipi_serve_error e;
 *   if (lipi_serve_parse(LIPI_ROUTE_OPENAI, body, len, &lim, &r, &e) != 0)
 *       reply(e.status, lipi_serve_error_json(LIPI_ROUTE_OPENAI, &e));
 *   ... lipi_serve_queue_submit(q, &job) ... wait for job.on_done ...
 *   char *json = lipi_serve_openai_json(vecs, r.n, dim, r.base64, "m", tokens);
 *   lipi_serve_request_free(&r);
 *
 * Internal to the lipi command (not installed): the library's public
 * headers stay free of jansson and of HTTP.
 */
#ifndef LIPI_SERVE_H
#define LIPI_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "encoder/encoder.h"
#include "pipeline/pipeline.h"

/* ======================================================================== */
/* Requests                                                                  */
/* ======================================================================== */

typedef enum {
    LIPI_ROUTE_OPENAI = 0, /* POST /v1/embeddings */
    LIPI_ROUTE_EMBED,      /* POST /embed (TEI) */
    LIPI_ROUTE_TOKENIZE,   /* POST /tokenize */
    LIPI_ROUTE_DECODE,     /* POST /decode */
    LIPI_ROUTE_CLASSIFY,   /* POST /classify */
    LIPI_ROUTE_RERANK,     /* POST /rerank */
    LIPI_ROUTE_HEALTH,     /* GET /health */
    LIPI_ROUTE_INFO,       /* GET /info */
    LIPI_ROUTE_METRICS,    /* GET /metrics */
    LIPI_ROUTE_OTHER,      /* anything else: 404 / 405 */
    LIPI_ROUTE_COUNT
} lipi_serve_route;

/* The route's name in metrics and logs ("/v1/embeddings"). */
const char *lipi_serve_route_path(lipi_serve_route r);
/* The route of a path ("/embed"); LIPI_ROUTE_OTHER when none. */
lipi_serve_route lipi_serve_route_of(const char *path);

/* Why a request is refused: its HTTP status, the OpenAI error type, the
 * field at fault ("" for the body as a whole) and a message. */
typedef struct {
    int status;
    const char *type; /* "invalid_request_error", "authentication_error", ... */
    char param[64];
    char msg[256];
} lipi_serve_error;

/* Fills e and returns status (for `return lipi_serve_fail(...)`). */
int lipi_serve_fail(lipi_serve_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct {
    size_t max_inputs;  /* texts (or id sequences) per request; 0: no limit */
    size_t dim;         /* the model's dimension: `dimensions` may not exceed it */
} lipi_serve_limits;

/* A parsed request body. The strings point into `root`, which it owns. */
typedef struct {
    lipi_serve_route route;
    void *root;                /* json_t * */
    size_t n;                  /* inputs: texts, id sequences, or rerank passages */
    const char **texts;        /* (n), NULL when the inputs are ids */
    size_t *lens;
    uint32_t **ids;            /* (n) id sequences (OpenAI token input, /decode) */
    size_t *id_lens;
    uint32_t *id_store;        /* all ids, one block */
    const char *query;         /* /rerank */
    size_t query_len;
    bool base64;               /* OpenAI encoding_format */
    size_t dimensions;         /* OpenAI; 0: the model's */
    int normalize;             /* /embed; -1: the model's default */
    bool truncate;             /* truncate long inputs instead of 413 */
    bool add_special;          /* /tokenize */
    bool skip_special;         /* /decode */
    bool raw_scores;           /* /classify, /rerank */
    bool return_text;          /* /rerank */
} lipi_serve_request;

/* Parses body[0..len) for `route` (one of the POST routes) into *out.
 * Returns 0, or an HTTP status with e filled (e.param names the field):
 * 400 for a body that is not JSON or not valid UTF-8 (e.msg has the byte
 * offset), a missing field, a field of the wrong type, an empty input list
 * or bad ids; 413 for more inputs than max_inputs; 500 when memory runs
 * out. *out is only to be freed after success. */
int lipi_serve_parse(lipi_serve_route route, const char *body, size_t len,
                     const lipi_serve_limits *lim, lipi_serve_request *out, lipi_serve_error *e);
void lipi_serve_request_free(lipi_serve_request *r); /* zeroed r: no-op */

/* ======================================================================== */
/* Responses: malloc'd NUL-terminated JSON (NULL when memory runs out)       */
/* ======================================================================== */

/* {"error":{"message","type","param","code"}} for the OpenAI route,
 * {"error","error_type"} (TEI's shape) for the others. */
char *lipi_serve_error_json(lipi_serve_route route, const lipi_serve_error *e);

/* OpenAI's embeddings list: vecs (n, dim), each "embedding" a float array
 * (%.9g: the same float32 read back) or base64 of the little-endian
 * float32 bytes; usage.prompt_tokens = total_tokens = tokens. */
char *lipi_serve_openai_json(const float *vecs, size_t n, size_t dim, bool base64,
                             const char *model, size_t tokens);

/* TEI's /embed: [[...], ...]. */
char *lipi_serve_vectors_json(const float *vecs, size_t n, size_t dim);

/* TEI's /tokenize for the n texts: [[{"id","text","special","start","stop"}]]
 * with start and stop character (code point) offsets into the text, null
 * for tokens the post-processor added; encoded with session s and `opt`.
 * Errors of lipi_encode (err->line = the text's index + 1). */
lipi_status lipi_serve_tokenize_json(lipi_session *s, const lipi_encode_options *opt,
                                     const char *const *texts, const size_t *lens, size_t n,
                                     char **out, size_t *tokens, lipi_error *err);

/* /decode: ["text", ...]. Errors of lipi_decode (err->line as above). */
lipi_status lipi_serve_decode_json(lipi_session *s, uint32_t *const *ids, const size_t *lens,
                                   size_t n, bool skip_special, char **out, lipi_error *err);

/* /classify: [[{"label","score"}, ...]] per text, best first (ties: label
 * order); probs (n, k). */
char *lipi_serve_classify_json(const float *probs, size_t n, size_t k,
                               const char *const *labels);

/* /rerank: [{"index","score"[,"text"]}] best first (lipi_scores_order);
 * texts only when return_text. */
char *lipi_serve_rerank_json(const float *scores, size_t n, const char *const *texts,
                             const size_t *lens, bool return_text);

/* ======================================================================== */
/* The batching queue                                                        */
/* ======================================================================== */

typedef enum {
    LIPI_JOB_EMBED = 0,  /* texts -> vectors */
    LIPI_JOB_EMBED_IDS,  /* id sequences -> vectors */
    LIPI_JOB_CLASSIFY,   /* texts -> probabilities */
    LIPI_JOB_RERANK,     /* (query, texts[i]) -> scores */
} lipi_job_kind;

typedef enum {
    LIPI_JOB_DONE = 0,
    LIPI_JOB_FAILED,     /* err says why */
    LIPI_JOB_TIMED_OUT,  /* its deadline passed before it was run */
    LIPI_JOB_DROPPED,    /* alive() said the client is gone */
    LIPI_JOB_STOPPED,    /* the queue stopped first */
} lipi_job_state;

/* One request's work. The caller fills the first block, keeps the job
 * (and what it points to) alive until on_done has been called, and does
 * not touch it in between. */
typedef struct lipi_serve_job {
    lipi_job_kind kind;
    size_t n;
    const char *const *texts;     /* EMBED, CLASSIFY, RERANK */
    const size_t *lens;
    const uint32_t *const *ids;   /* EMBED_IDS */
    const size_t *id_lens;
    const char *query;            /* RERANK */
    size_t query_len;
    size_t label;                 /* RERANK: the label that means relevant */
    bool raw;                     /* RERANK: logits */
    const size_t *tokens;         /* (n) tokens per input, for packing */
    float *out;                   /* (n, out_dim) */
    size_t out_dim;
    uint8_t *truncated;           /* (n) or NULL */
    struct timespec deadline;     /* CLOCK_MONOTONIC; zero: none */
    /* Called once from the queue's thread, without the queue's lock. */
    void (*on_done)(struct lipi_serve_job *job, void *ctx);
    /* Whether the client still waits; NULL: always. Asked before the job's
     * first item is run. */
    bool (*alive)(void *ctx);
    void *ctx;
    /* Set by the queue */
    lipi_job_state state;
    lipi_error err;               /* LIPI_JOB_FAILED: err.line = input index + 1 */
    struct timespec queued;
    size_t taken, done;           /* items handed to a batch, and finished */
    struct lipi_serve_job *next;
} lipi_serve_job;

typedef struct lipi_serve_queue lipi_serve_queue;

typedef struct {
    size_t threads;          /* the forward pass's threads */
    size_t max_batch_tokens; /* tokens per forward pass (one input may exceed it) */
    size_t max_batch;        /* inputs per forward pass */
    size_t max_jobs;         /* jobs waiting or running; more: refused */
    unsigned delay_ms;       /* a pause before taking each batch: tests use it
                                to hold jobs in the queue (429, timeouts,
                                disconnects, SIGTERM in flight); 0 in use */
} lipi_serve_queue_options;

/* A queue running e on its own thread with a lipi_embedder_session of
 * opt->threads threads. e is borrowed. LIPI_ENOMEM (memory or a thread). */
lipi_status lipi_serve_queue_new(const lipi_embedder *e, const lipi_serve_queue_options *opt,
                                 lipi_serve_queue **out, lipi_error *err);

/* Adds job; false (nothing done, on_done never called) when max_jobs jobs
 * are already waiting or running, or the queue is stopping. */
bool lipi_serve_queue_submit(lipi_serve_queue *q, lipi_serve_job *job);

/* Jobs waiting or running now. */
size_t lipi_serve_queue_depth(lipi_serve_queue *q);

/* Counts for /metrics: forward passes, inputs and tokens they ran, and a
 * histogram of inputs per pass (buckets 1, 2, 4, ... 256, +Inf). */
typedef struct {
    uint64_t batches, inputs, tokens;
    uint64_t batch_hist[10];
} lipi_serve_queue_stats;
void lipi_serve_queue_get_stats(lipi_serve_queue *q, lipi_serve_queue_stats *out);

/* Runs every job already submitted, refuses new ones, stops the thread and
 * frees q. NULL: no-op. */
void lipi_serve_queue_free(lipi_serve_queue *q);

/* ======================================================================== */
/* Metrics                                                                   */
/* ======================================================================== */

typedef struct lipi_serve_metrics lipi_serve_metrics;

lipi_serve_metrics *lipi_serve_metrics_new(void); /* NULL: out of memory */
void lipi_serve_metrics_free(lipi_serve_metrics *m);

/* Counts one answered request: its route, status, latency, inputs and tokens. */
void lipi_serve_metrics_add(lipi_serve_metrics *m, lipi_serve_route route, int status,
                            double seconds, size_t inputs, size_t tokens);

/* The Prometheus text exposition of m, the queue's stats and its depth
 * (q may be NULL), malloc'd. */
char *lipi_serve_metrics_text(lipi_serve_metrics *m, lipi_serve_queue *q);

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

/* Whether a and b (alen, blen bytes) are equal, in time that depends on
 * their lengths only, never on where they differ (API keys). */
bool lipi_serve_equal_ct(const char *a, size_t alen, const char *b, size_t blen);

#endif

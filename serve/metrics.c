/* /metrics of `lipi serve`: counters kept under one lock, written in the
 * Prometheus text exposition format (version 0.0.4). */
#include "serve/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Latency buckets in seconds (the +Inf bucket is the count). */
static const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,   0.25,   0.5,   1,    2.5,   10};
#define NB (sizeof bounds / sizeof bounds[0])
/* Statuses counted one by one; others go to "other". */
static const int statuses[] = {200, 400, 401, 404, 405, 408, 413, 422, 429, 499, 500, 503};
#define NS (sizeof statuses / sizeof statuses[0])

struct lipi_serve_metrics {
    pthread_mutex_t mu;
    uint64_t requests[LIPI_ROUTE_COUNT][NS + 1];
    uint64_t hist[LIPI_ROUTE_COUNT][NB];
    uint64_t count[LIPI_ROUTE_COUNT];
    double sum[LIPI_ROUTE_COUNT];
    uint64_t inputs, tokens;
};

lipi_serve_metrics *lipi_serve_metrics_new(void)
{
    lipi_serve_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void lipi_serve_metrics_free(lipi_serve_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void lipi_serve_metrics_add(lipi_serve_metrics *m, lipi_serve_route route, int status,
                            double seconds, size_t inputs, size_t tokens)
{
    size_t s = 0;
    while (s < NS && statuses[s] != status)
        s++;
    if (route >= LIPI_ROUTE_COUNT)
        route = LIPI_ROUTE_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[route][s]++;
    for (size_t b = 0; b < NB; b++)
        if (seconds <= bounds[b])
            m->hist[route][b]++;
    m->count[route]++;
    m->sum[route] += seconds;
    m->inputs += inputs;
    m->tokens += tokens;
    pthread_mutex_unlock(&m->mu);
}

char *lipi_serve_metrics_text(lipi_serve_metrics *m, lipi_serve_queue *q)
{
    size_t cap = 64 * 1024, len = 0;
    char *p = malloc(cap);
    if (!p)
        return NULL;
#define OUT(...)                                                               \
    do {                                                                       \
        int k_ = snprintf(p + len, cap - len, __VA_ARGS__);                    \
        if (k_ > 0 && (size_t)k_ < cap - len)                                  \
            len += (size_t)k_;                                                 \
    } while (0)
    pthread_mutex_lock(&m->mu);
    OUT("# HELP lipi_requests_total Requests answered, by route and HTTP status.\n"
        "# TYPE lipi_requests_total counter\n");
    for (int r = 0; r < LIPI_ROUTE_COUNT; r++)
        for (size_t s = 0; s <= NS; s++)
            if (m->requests[r][s]) {
                char st[8];
                if (s < NS)
                    snprintf(st, sizeof st, "%d", statuses[s]);
                else
                    snprintf(st, sizeof st, "other");
                OUT("lipi_requests_total{route=\"%s\",status=\"%s\"} %llu\n",
                    lipi_serve_route_path((lipi_serve_route)r), st,
                    (unsigned long long)m->requests[r][s]);
            }
    OUT("# HELP lipi_request_duration_seconds Time from the request's headers to its answer.\n"
        "# TYPE lipi_request_duration_seconds histogram\n");
    for (int r = 0; r < LIPI_ROUTE_COUNT; r++) {
        if (!m->count[r])
            continue;
        const char *path = lipi_serve_route_path((lipi_serve_route)r);
        for (size_t b = 0; b < NB; b++)
            OUT("lipi_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", path,
                bounds[b], (unsigned long long)m->hist[r][b]);
        OUT("lipi_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", path,
            (unsigned long long)m->count[r]);
        OUT("lipi_request_duration_seconds_sum{route=\"%s\"} %.6f\n", path, m->sum[r]);
        OUT("lipi_request_duration_seconds_count{route=\"%s\"} %llu\n", path,
            (unsigned long long)m->count[r]);
    }
    OUT("# HELP lipi_request_inputs_total Texts or id sequences in answered requests.\n"
        "# TYPE lipi_request_inputs_total counter\nlipi_request_inputs_total %llu\n"
        "# HELP lipi_request_tokens_total Tokens of answered requests.\n"
        "# TYPE lipi_request_tokens_total counter\nlipi_request_tokens_total %llu\n",
        (unsigned long long)m->inputs, (unsigned long long)m->tokens);
    pthread_mutex_unlock(&m->mu);
    if (q) {
        lipi_serve_queue_stats st;
        lipi_serve_queue_get_stats(q, &st);
        OUT("# HELP lipi_queue_depth Requests waiting for or in a forward pass.\n"
            "# TYPE lipi_queue_depth gauge\nlipi_queue_depth %zu\n",
            lipi_serve_queue_depth(q));
        OUT("# HELP lipi_batch_tokens_total Tokens run by forward passes.\n"
            "# TYPE lipi_batch_tokens_total counter\nlipi_batch_tokens_total %llu\n",
            (unsigned long long)st.tokens);
        OUT("# HELP lipi_batch_size Inputs per forward pass.\n"
            "# TYPE lipi_batch_size histogram\n");
        uint64_t cum = 0;
        for (int b = 0; b < 9; b++) {
            cum += st.batch_hist[b];
            OUT("lipi_batch_size_bucket{le=\"%d\"} %llu\n", 1 << b, (unsigned long long)cum);
        }
        OUT("lipi_batch_size_bucket{le=\"+Inf\"} %llu\nlipi_batch_size_sum %llu\n"
            "lipi_batch_size_count %llu\n",
            (unsigned long long)st.batches, (unsigned long long)st.inputs,
            (unsigned long long)st.batches);
    }
#undef OUT
    return p;
}

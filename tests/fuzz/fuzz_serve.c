/* Fuzz: the request bodies of `lipi serve` (serve/request.c). Byte 0 picks
 * the route (/v1/embeddings, /embed, /tokenize, /decode, /classify,
 * /rerank); the rest is the body. A body is either refused with a 4xx/5xx
 * status and an error whose JSON (both shapes) parses, or accepted with
 * inputs that hold what the route promises; the response bodies built from
 * it (embeddings as floats and base64, TEI vectors, rerank) must parse as
 * JSON of the right length. */
#include <jansson.h>

#include "serve/serve.h"
#include "tests/fuzz/fuzz.h"

static void check_json(char *s, size_t want_len)
{
    if (!s)
        return; /* out of memory is allowed */
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (!j) {
        fprintf(stderr, "not JSON (%s): %.200s\n", e.text, s);
        abort();
    }
    if (want_len != (size_t)-1 && json_is_array(j) && json_array_size(j) != want_len)
        abort();
    json_decref(j);
    free(s);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1)
        return 0;
    lipi_serve_route route = (lipi_serve_route)(data[0] % 6);
    lipi_serve_limits lim = {.max_inputs = 64, .dim = 8};
    lipi_serve_request r;
    lipi_serve_error e;
    int st = lipi_serve_parse(route, (const char *)data + 1, size - 1, &lim, &r, &e);
    if (st) {
        if (st < 400 || st > 599 || st != e.status || !e.type || !e.msg[0])
            abort();
        check_json(lipi_serve_error_json(LIPI_ROUTE_OPENAI, &e), (size_t)-1);
        check_json(lipi_serve_error_json(LIPI_ROUTE_EMBED, &e), (size_t)-1);
        return 0;
    }
    if (r.n == 0 || r.n > lim.max_inputs || (!r.texts && !r.ids) || r.dimensions > lim.dim)
        abort();
    for (size_t i = 0; i < r.n; i++) {
        if (r.texts && lipi_utf8_valid_prefix(r.texts[i], r.lens[i]) != r.lens[i])
            abort();
        if (r.ids && r.id_lens[i] == 0)
            abort();
    }
    if (route == LIPI_ROUTE_RERANK && !r.query)
        abort();
    float v[64 * 8];
    for (size_t i = 0; i < r.n * 8; i++)
        v[i] = (float)i * 0.5f - 3.0f;
    check_json(lipi_serve_openai_json(v, r.n, 8, r.base64, "m", r.n), (size_t)-1);
    check_json(lipi_serve_vectors_json(v, r.n, 8), r.n);
    if (r.texts)
        check_json(lipi_serve_rerank_json(v, r.n, r.texts, r.lens, true), r.n);
    lipi_serve_request_free(&r);
    return 0;
}

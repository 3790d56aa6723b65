/* Probes: multinomial logistic regression on frozen sentence embeddings,
 * trained with L-BFGS over the whole set (pipeline.h). Everything runs on
 * one thread in a fixed order, in double precision, so the same examples
 * give the same weights bit for bit. */
#include "retrieval/retrieval.h"
#include "tokenizer/base.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_FORMAT "lipi-probe"
#define PROBE_VERSION 1
#define LBFGS_M 10

struct lipi_probe {
    size_t dim, k;
    char **labels;
    float *w;      /* (k, dim) */
    float *b;      /* (k) */
    lipi_index_model model;
    char *name, *fingerprint, *pooling;
};

/* ======================================================================== */
/* Objective                                                                 */
/* ======================================================================== */

typedef struct {
    const float *x;   /* (n, dim) */
    const uint32_t *y;
    size_t n, dim, k;
    double l2;
    double *z;        /* (k) scratch */
} problem;

/* theta = [W (k, dim) | b (k)]. Returns mean cross-entropy + l2/2 |W|^2 and
 * its gradient in g. */
static double objective(const problem *p, const double *theta, double *g)
{
    size_t kd = p->k * p->dim;
    const double *w = theta, *b = theta + kd;
    memset(g, 0, (kd + p->k) * sizeof *g);
    double loss = 0;
    for (size_t i = 0; i < p->n; i++) {
        const float *x = p->x + i * p->dim;
        double zmax = -INFINITY;
        for (size_t c = 0; c < p->k; c++) {
            double z = b[c];
            const double *wc = w + c * p->dim;
            for (size_t j = 0; j < p->dim; j++)
                z += wc[j] * x[j];
            p->z[c] = z;
            if (z > zmax)
                zmax = z;
        }
        double sum = 0;
        for (size_t c = 0; c < p->k; c++)
            sum += exp(p->z[c] - zmax);
        loss += log(sum) + zmax - p->z[p->y[i]];
        for (size_t c = 0; c < p->k; c++) {
            double d = exp(p->z[c] - zmax) / sum - (c == p->y[i]);
            double *gc = g + c * p->dim;
            for (size_t j = 0; j < p->dim; j++)
                gc[j] += d * x[j];
            g[kd + c] += d;
        }
    }
    double inv = 1.0 / (double)p->n, reg = 0;
    for (size_t j = 0; j < kd + p->k; j++)
        g[j] *= inv;
    for (size_t j = 0; j < kd; j++) {
        reg += w[j] * w[j];
        g[j] += p->l2 * w[j];
    }
    return loss * inv + 0.5 * p->l2 * reg;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* L-BFGS (Nocedal & Wright, algorithm 7.4) with a backtracking Armijo line
 * search; starts from theta = 0. Stops after max_iter iterations, when the
 * largest gradient entry is below 1e-6, or when the loss no longer moves. */
static lipi_status lbfgs(const problem *p, size_t max_iter, double *theta, lipi_error *err)
{
    size_t dim = p->k * p->dim + p->k;
    lipi_status st = LIPI_OK;
    double *buf = lipi_calloc(dim, (5 + 2 * LBFGS_M) * sizeof(double));
    if (!buf)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    double *g = buf, *d = g + dim, *tnew = d + dim, *gnew = tnew + dim, *q = gnew + dim;
    double *s = q + dim, *yv = s + LBFGS_M * dim;
    double rho[LBFGS_M], alpha[LBFGS_M];
    size_t hist = 0, head = 0;
    memset(theta, 0, dim * sizeof *theta);
    double f = objective(p, theta, g);
    for (size_t it = 0; it < max_iter; it++) {
        double gmax = 0;
        for (size_t j = 0; j < dim; j++)
            gmax = fmax(gmax, fabs(g[j]));
        if (gmax < 1e-6)
            break;
        /* Two-loop recursion: d = -H g. */
        memcpy(q, g, dim * sizeof *q);
        for (size_t h = 0; h < hist; h++) {
            size_t i = (head + LBFGS_M - 1 - h) % LBFGS_M;
            alpha[i] = rho[i] * dot(s + i * dim, q, dim);
            for (size_t j = 0; j < dim; j++)
                q[j] -= alpha[i] * yv[i * dim + j];
        }
        double gamma = 1.0;
        if (hist) {
            size_t last = (head + LBFGS_M - 1) % LBFGS_M;
            gamma = dot(s + last * dim, yv + last * dim, dim) /
                    dot(yv + last * dim, yv + last * dim, dim);
        } else {
            gamma = 1.0 / sqrt(dot(g, g, dim));
        }
        for (size_t j = 0; j < dim; j++)
            q[j] *= gamma;
        for (size_t h = hist; h-- > 0;) {
            size_t i = (head + LBFGS_M - 1 - h) % LBFGS_M;
            double beta = rho[i] * dot(yv + i * dim, q, dim);
            for (size_t j = 0; j < dim; j++)
                q[j] += s[i * dim + j] * (alpha[i] - beta);
        }
        for (size_t j = 0; j < dim; j++)
            d[j] = -q[j];
        double slope = dot(g, d, dim);
        if (slope >= 0) { /* not a descent direction: restart from the gradient */
            hist = 0;
            for (size_t j = 0; j < dim; j++)
                d[j] = -g[j] / sqrt(dot(g, g, dim));
            slope = dot(g, d, dim);
        }
        double step = 1.0, fnew = f;
        bool moved = false;
        for (int tries = 0; tries < 40; tries++, step *= 0.5) {
            for (size_t j = 0; j < dim; j++)
                tnew[j] = theta[j] + step * d[j];
            fnew = objective(p, tnew, gnew);
            if (fnew <= f + 1e-4 * step * slope) {
                moved = true;
                break;
            }
        }
        if (!moved)
            break;
        double *si = s + head * dim, *yi = yv + head * dim;
        for (size_t j = 0; j < dim; j++) {
            si[j] = tnew[j] - theta[j];
            yi[j] = gnew[j] - g[j];
        }
        double sy = dot(si, yi, dim);
        if (sy > 1e-12) {
            rho[head] = 1.0 / sy;
            head = (head + 1) % LBFGS_M;
            if (hist < LBFGS_M)
                hist++;
        }
        memcpy(theta, tnew, dim * sizeof *theta);
        memcpy(g, gnew, dim * sizeof *g);
        bool flat = fabs(f - fnew) <= 1e-12 * fmax(1.0, fabs(f));
        f = fnew;
        if (flat)
            break;
    }
    lipi_free(buf);
    return st;
}

/* ======================================================================== */
/* The probe                                                                 */
/* ======================================================================== */

void lipi_probe_free(lipi_probe *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->labels && i < p->k; i++)
        lipi_free(p->labels[i]);
    lipi_free(p->labels);
    lipi_free(p->w);
    lipi_free(p->b);
    lipi_free(p->name);
    lipi_free(p->fingerprint);
    lipi_free(p->pooling);
    lipi_free(p);
}

/* An empty probe for k labels of dim values, labels copied (or left NULL). */
static lipi_status probe_new(size_t dim, size_t k, const char *const *labels, lipi_probe **out,
                             lipi_error *err)
{
    lipi_probe *p = lipi_calloc(1, sizeof *p);
    if (!p)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    p->dim = dim;
    p->k = k;
    p->labels = lipi_calloc(k, sizeof *p->labels);
    p->w = lipi_calloc(k, dim * sizeof *p->w);
    p->b = lipi_calloc(k, sizeof *p->b);
    bool ok = p->labels && p->w && p->b;
    for (size_t i = 0; ok && labels && i < k; i++)
        ok = (p->labels[i] = lipi_strndup(labels[i], strlen(labels[i]))) != NULL;
    if (!ok) {
        lipi_probe_free(p);
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    }
    *out = p;
    return LIPI_OK;
}

lipi_status lipi_probe_train(const float *x, const uint32_t *y, size_t n, size_t dim,
                             const char *const *labels, size_t k,
                             const lipi_probe_options *opt, lipi_probe **out, lipi_error *err)
{
    *out = NULL;
    if (n == 0 || dim == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected labelled examples, found none");
    if (k < 2)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected at least 2 labels, found %zu", k);
    for (size_t i = 0; i < n; i++) {
        if (y[i] >= k)
            return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                  "expected a label below %zu, found %u", k, (unsigned)y[i]);
        for (size_t j = 0; j < dim; j++)
            if (!isfinite(x[i * dim + j]))
                return lipi_error_set(err, LIPI_EINVAL, NULL, i + 1, 0,
                                      "expected finite values, found one in column %zu", j);
    }
    double l2 = 1e-4;
    size_t iters = 500;
    if (opt) {
        l2 = opt->l2 > 0 ? opt->l2 : opt->l2 < 0 ? 0 : l2;
        iters = opt->max_iterations ? opt->max_iterations : iters;
    }
    lipi_probe *p = NULL;
    lipi_status st = probe_new(dim, k, labels, &p, err);
    if (st != LIPI_OK)
        return st;
    size_t kd = k * dim;
    double *theta = lipi_calloc(kd + k, sizeof *theta);
    double *z = lipi_calloc(k, sizeof *z);
    if (!theta || !z) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    problem prob = {x, y, n, dim, k, l2, z};
    st = lbfgs(&prob, iters, theta, err);
    if (st != LIPI_OK)
        goto done;
    for (size_t j = 0; j < kd; j++)
        p->w[j] = (float)theta[j];
    for (size_t c = 0; c < k; c++)
        p->b[c] = (float)theta[kd + c];
done:
    lipi_free(theta);
    lipi_free(z);
    if (st != LIPI_OK) {
        lipi_probe_free(p);
        return st;
    }
    *out = p;
    return LIPI_OK;
}

/* splitmix64: a fixed, portable stream for the held-out draw. */
static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

lipi_status lipi_probe_holdout(size_t n, size_t n_held, uint64_t seed, bool *held,
                               lipi_error *err)
{
    size_t *order = lipi_calloc(n ? n : 1, sizeof *order);
    if (!order)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        held[i] = false;
    }
    for (size_t i = n ? n - 1 : 0; i > 0; i--) {
        size_t j = (size_t)(next_random(&seed) % (i + 1));
        size_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n_held && i < n; i++)
        held[order[i]] = true;
    lipi_free(order);
    return LIPI_OK;
}

double lipi_probe_accuracy(const lipi_probe *p, const float *x, const uint32_t *y, size_t n,
                           float *probs)
{
    size_t k = lipi_probe_label_count(p), dim = lipi_probe_dim(p), right = 0;
    for (size_t i = 0; i < n; i++) {
        lipi_probe_predict(p, x + i * dim, 1, probs);
        size_t best = 0;
        for (size_t c = 1; c < k; c++)
            if (probs[c] > probs[best])
                best = c;
        right += best == y[i];
    }
    return n ? (double)right / (double)n : 0.0;
}

/* ======================================================================== */
/* Fitting: labels -> indices, the held-out split, training, the score       */
/* ======================================================================== */

/* What lipi_probe_fit decides from the labels alone. */
typedef struct {
    const char **names;  /* (k) sorted distinct train labels, borrowed */
    size_t k;
    uint32_t *y;         /* (train->n) label indices */
    uint32_t *yd;        /* (dev->n) label indices, NULL without dev */
    bool *held;          /* (train->n) held-out rows, NULL when none */
    size_t n_held;       /* held-out training rows */
} fit_plan;

static void fit_plan_free(fit_plan *pl)
{
    lipi_free(pl->names);
    lipi_free(pl->y);
    lipi_free(pl->yd);
    lipi_free(pl->held);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The index of label s among the sorted names; false when it is not there. */
static bool label_index(const char **names, size_t k, const char *s, uint32_t *out)
{
    const char **hit = bsearch(&s, names, k, sizeof *names, cmp_str);
    if (!hit)
        return false;
    *out = (uint32_t)(hit - names);
    return true;
}

/* The 1-based line of row i of d, for errors. */
static size_t row_line(const lipi_labelled_vectors *d, size_t i)
{
    return d->line_no ? d->line_no[i] : i + 1;
}

static lipi_status fit_plan_make(const lipi_labelled_vectors *tr, const lipi_labelled_vectors *dv,
                                 const lipi_probe_fit_options *opt, fit_plan *pl, lipi_error *err)
{
    memset(pl, 0, sizeof *pl);
    size_t n = tr->n;
    if (n == 0)
        return lipi_error_set(err, LIPI_EINVAL, tr->path, 0, 0,
                              "expected labelled examples, found none");
    if (!(pl->names = lipi_calloc(n, sizeof *pl->names)) || !(pl->y = lipi_calloc(n, sizeof *pl->y)) ||
        (dv && !(pl->yd = lipi_calloc(dv->n ? dv->n : 1, sizeof *pl->yd))))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < n; i++)
        pl->names[i] = tr->labels[i];
    qsort(pl->names, n, sizeof *pl->names, cmp_str);
    for (size_t i = 0; i < n; i++)
        if (pl->k == 0 || strcmp(pl->names[pl->k - 1], pl->names[i]) != 0)
            pl->names[pl->k++] = pl->names[i];
    if (pl->k < 2)
        return lipi_error_set(err, LIPI_EINVAL, tr->path, 0, 0,
                              "expected at least 2 different labels, found %zu", pl->k);
    for (size_t i = 0; i < n; i++)
        label_index(pl->names, pl->k, tr->labels[i], &pl->y[i]);
    for (size_t i = 0; dv && i < dv->n; i++)
        if (!label_index(pl->names, pl->k, dv->labels[i], &pl->yd[i]))
            return lipi_error_set(err, LIPI_EINVAL, dv->path, row_line(dv, i), 0,
                                  "label '%s' does not occur in %s", dv->labels[i],
                                  tr->path ? tr->path : "the training labels");
    double share = opt ? opt->holdout : 0;
    if (dv || !(share > 0))
        return LIPI_OK;
    size_t nd = (size_t)((double)n * share + 0.5);
    if (nd == 0)
        nd = 1;
    /* Named as the command line names it: the share comes from there. */
    if (nd >= n)
        return lipi_error_set(err, LIPI_EINVAL, tr->path, 0, 0,
                              "--holdout %g leaves no training lines of %zu", share, n);
    if (!(pl->held = lipi_calloc(n, sizeof *pl->held)))
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    pl->n_held = nd;
    return lipi_probe_holdout(n, nd, opt->seed, pl->held, err);
}

lipi_status lipi_probe_fit_check(const lipi_labelled_vectors *train,
                                 const lipi_labelled_vectors *dev,
                                 const lipi_probe_fit_options *opt, lipi_error *err)
{
    fit_plan pl;
    lipi_status st = fit_plan_make(train, dev, opt, &pl, err);
    fit_plan_free(&pl);
    return st;
}

lipi_status lipi_probe_fit(const lipi_labelled_vectors *train, const lipi_labelled_vectors *dev,
                           size_t dim, const lipi_probe_fit_options *opt, lipi_probe **out,
                           lipi_probe_fit_report *rep, lipi_error *err)
{
    *out = NULL;
    fit_plan pl;
    float *xt = NULL, *xh = NULL, *probs = NULL;
    uint32_t *yt = NULL, *yh = NULL;
    size_t *rows = NULL; /* (nt) the train row of each training row */
    lipi_probe *p = NULL;
    lipi_status st = fit_plan_make(train, dev, opt, &pl, err);
    if (st != LIPI_OK)
        goto done;
    size_t n = train->n, nh = pl.n_held, nt = n - nh;
    if (!(xt = lipi_calloc(nt, dim * sizeof *xt)) || !(yt = lipi_calloc(nt, sizeof *yt)) ||
        !(rows = lipi_calloc(nt, sizeof *rows)) || !(probs = lipi_calloc(pl.k, sizeof *probs)) ||
        (nh && (!(xh = lipi_calloc(nh, dim * sizeof *xh)) || !(yh = lipi_calloc(nh, sizeof *yh))))) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (size_t i = 0, a = 0, b = 0; i < n; i++) {
        if (pl.held && pl.held[i]) {
            memcpy(xh + b * dim, train->x + i * dim, dim * sizeof *xh);
            yh[b++] = pl.y[i];
        } else {
            memcpy(xt + a * dim, train->x + i * dim, dim * sizeof *xt);
            rows[a] = i;
            yt[a++] = pl.y[i];
        }
    }
    lipi_probe_options po = opt ? opt->train : (lipi_probe_options){0};
    st = lipi_probe_train(xt, yt, nt, dim, pl.names, pl.k, &po, &p, err);
    if (st != LIPI_OK) {
        /* err->line is a row of xt: point at the input instead. */
        if (err && err->line >= 1 && err->line <= nt) {
            snprintf(err->path, sizeof err->path, "%s", train->path ? train->path : "");
            err->line = row_line(train, rows[err->line - 1]);
        }
        goto done;
    }
    lipi_probe_fit_report r = {.n_train = nt, .k = pl.k};
    if (dev) {
        r.scored_on = LIPI_PROBE_SCORED_ON_DEV;
        r.n_held = dev->n;
        r.accuracy = lipi_probe_accuracy(p, dev->x, pl.yd, dev->n, probs);
    } else if (nh) {
        r.scored_on = LIPI_PROBE_SCORED_ON_HELD_OUT;
        r.n_held = nh;
        r.accuracy = lipi_probe_accuracy(p, xh, yh, nh, probs);
    } else {
        r.scored_on = LIPI_PROBE_SCORED_ON_TRAINING;
        r.accuracy = lipi_probe_accuracy(p, xt, yt, nt, probs);
    }
    if (rep)
        *rep = r;
    *out = p;
    p = NULL;
done:
    fit_plan_free(&pl);
    lipi_free(xt);
    lipi_free(xh);
    lipi_free(yt);
    lipi_free(yh);
    lipi_free(rows);
    lipi_free(probs);
    lipi_probe_free(p);
    return st;
}

void lipi_probe_predict(const lipi_probe *p, const float *q, size_t n, float *probs)
{
    for (size_t i = 0; i < n; i++) {
        const float *x = q + i * p->dim;
        float *out = probs + i * p->k;
        double zmax = -INFINITY, sum = 0;
        for (size_t c = 0; c < p->k; c++) {
            double z = p->b[c];
            const float *wc = p->w + c * p->dim;
            for (size_t j = 0; j < p->dim; j++)
                z += (double)wc[j] * x[j];
            out[c] = (float)z;
            zmax = fmax(zmax, z);
        }
        for (size_t c = 0; c < p->k; c++)
            sum += exp((double)out[c] - zmax);
        for (size_t c = 0; c < p->k; c++)
            out[c] = (float)(exp((double)out[c] - zmax) / sum);
    }
}

size_t lipi_probe_dim(const lipi_probe *p)
{
    return p->dim;
}

size_t lipi_probe_label_count(const lipi_probe *p)
{
    return p->k;
}

const char *lipi_probe_label(const lipi_probe *p, size_t i)
{
    return i < p->k ? p->labels[i] : NULL;
}

const lipi_index_model *lipi_probe_model(const lipi_probe *p)
{
    return &p->model;
}

/* ======================================================================== */
/* probe.json                                                                */
/* ======================================================================== */

static json_t *float_array(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real((double)v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

lipi_status lipi_probe_save(const lipi_probe *p, const lipi_index_model *model,
                            double accuracy, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *text = NULL;
    unsigned long fails = lipi_alloc_failures;
    json_t *root = json_object(), *m = json_object(), *labels = json_array(),
           *weights = json_array();
    bool ok = root && m && labels && weights;
    for (size_t c = 0; ok && c < p->k; c++)
        ok = json_array_append_new(labels, json_string(p->labels[c])) == 0 &&
             json_array_append_new(weights, float_array(p->w + c * p->dim, p->dim)) == 0;
    if (ok && model)
        ok = json_object_set_new(m, "name", string_or_null(model->name)) == 0 &&
             json_object_set_new(m, "fingerprint", string_or_null(model->fingerprint)) == 0 &&
             json_object_set_new(m, "pooling", string_or_null(model->pooling)) == 0 &&
             json_object_set_new(m, "normalize", json_boolean(model->normalize)) == 0;
    ok = ok && json_object_set_new(root, "format", json_string(PROBE_FORMAT)) == 0 &&
         json_object_set_new(root, "version", json_integer(PROBE_VERSION)) == 0 &&
         json_object_set(root, "model", m) == 0 &&
         json_object_set(root, "labels", labels) == 0 &&
         json_object_set_new(root, "dim", json_integer((json_int_t)p->dim)) == 0 &&
         (accuracy < 0 || json_object_set_new(root, "accuracy", json_real(accuracy)) == 0) &&
         json_object_set_new(root, "bias", float_array(p->b, p->k)) == 0 &&
         json_object_set(root, "weights", weights) == 0;
    /* Nine digits give every float32 back exactly. */
    if (ok)
        text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    if (!text || lipi_alloc_failures != fails) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    lipi_atomic_file af;
    TRY(lipi_atomic_open(&af, path, err));
    fputs(text, af.f);
    fputc('\n', af.f);
    st = lipi_atomic_commit(&af, err);
done:
    lipi_free(text);
    json_decref(root);
    json_decref(m);
    json_decref(labels);
    json_decref(weights);
    return st;
}

/* Reads n floats from a JSON array into out; false when it is not one. */
static bool read_floats(json_t *a, float *out, size_t n)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v))
            return false;
        double d = json_number_value(v);
        if (!isfinite(d) || fabs(d) > 3.4e38)
            return false;
        out[i] = (float)d;
    }
    return true;
}

static lipi_status dup_field(json_t *m, const char *key, char **out, const char *path,
                             lipi_error *err)
{
    json_t *v = json_object_get(m, key);
    if (!v || json_is_null(v))
        return LIPI_OK;
    if (!json_is_string(v))
        return lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                              "model.%s: expected a string or null", key);
    if (!(*out = lipi_strndup(json_string_value(v), json_string_length(v))))
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    return LIPI_OK;
}

lipi_status lipi_probe_load(const char *path, lipi_probe **out, lipi_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    lipi_probe *p = NULL;
    json_t *root = NULL;
    lipi_status st;
    TRY(lipi_read_file(path, (size_t)1 << 30, &text, &len, err));
    json_error_t je;
    unsigned long fails = lipi_alloc_failures;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    /* jansson reports a failed allocation as a syntax error (or drops
     * characters and succeeds), so any failure during the parse counts. */
    if (lipi_alloc_failures != fails) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    if (!root) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, (size_t)je.line, (size_t)je.column,
                            "expected JSON: %s", je.text);
        goto done;
    }
    json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    json_t *dimv = json_object_get(root, "dim"), *labels = json_object_get(root, "labels");
    json_t *weights = json_object_get(root, "weights"), *m = json_object_get(root, "model");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), PROBE_FORMAT) != 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "format: expected \"" PROBE_FORMAT "\" (a file from lipi probe train)");
        goto done;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != PROBE_VERSION) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "version: expected %d",
                            PROBE_VERSION);
        goto done;
    }
    if (!json_is_integer(dimv) || json_integer_value(dimv) < 1 ||
        json_integer_value(dimv) > 1000000) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "dim: expected 1..1000000");
        goto done;
    }
    size_t dim = (size_t)json_integer_value(dimv), k = json_array_size(labels);
    if (!json_is_array(labels) || k < 2 || k > 1000000) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "labels: expected an array of at least 2 strings");
        goto done;
    }
    TRY(probe_new(dim, k, NULL, &p, err));
    for (size_t c = 0; c < k; c++) {
        json_t *l = json_array_get(labels, c);
        if (!json_is_string(l)) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "labels[%zu]: expected a string",
                                c);
            goto done;
        }
        if (!(p->labels[c] = lipi_strndup(json_string_value(l), json_string_length(l)))) {
            st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
            goto done;
        }
    }
    if (!json_is_array(weights) || json_array_size(weights) != k) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                            "weights: expected %zu rows (one per label)", k);
        goto done;
    }
    for (size_t c = 0; c < k; c++)
        if (!read_floats(json_array_get(weights, c), p->w + c * dim, dim)) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "weights[%zu]: expected %zu finite numbers", c, dim);
            goto done;
        }
    if (!read_floats(json_object_get(root, "bias"), p->b, k)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "bias: expected %zu finite numbers",
                            k);
        goto done;
    }
    if (m && !json_is_object(m)) {
        st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0, "model: expected an object");
        goto done;
    }
    if (m) {
        TRY(dup_field(m, "name", &p->name, path, err));
        TRY(dup_field(m, "fingerprint", &p->fingerprint, path, err));
        TRY(dup_field(m, "pooling", &p->pooling, path, err));
        p->model.normalize = json_is_true(json_object_get(m, "normalize"));
    }
    p->model.name = p->name;
    p->model.fingerprint = p->fingerprint;
    p->model.pooling = p->pooling;
done:
    lipi_free(text);
    json_decref(root);
    if (st != LIPI_OK) {
        lipi_probe_free(p);
        return st;
    }
    *out = p;
    return LIPI_OK;
}

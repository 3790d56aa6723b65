/* lipi's Python binding: the CPython C API over the public C headers.
 *
 * Why the C API and not cffi or pybind11: it needs nothing beyond Debian's
 * python3-dev (no build-time Python package, nothing to fetch), and it gives
 * the two things the binding is for: releasing the GIL around lipi's own
 * threads (encode_batch, embed, train) and handing results to NumPy as
 * buffers lipi allocated, without a Python object per token. NumPy is only
 * imported by the Python layer (lipi/__init__.py), which wraps the buffers
 * this module returns with numpy.frombuffer; this file needs no NumPy
 * headers.
 *
 * Objects:
 *   Tokenizer  a lipi_tokenizer, its lipi_encoder and a pool of sessions
 *              (one per thread at a time; taken and given back under a
 *              mutex, so any number of Python threads may share it);
 *   Encoding   one text's tokens: a row of a batch kept by a _Rows object
 *              (the lipi_batch arrays themselves), padded on reading;
 *   Buffer     memory lipi allocated, exposed through the buffer protocol;
 *   Embedder   a lipi_embedder and a pool of its sessions;
 *   Index      a lipi_index.
 *
 * Long calls run in chunks with the GIL released and check for signals
 * between chunks, so Ctrl-C stops them with KeyboardInterrupt and no half
 * result. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder.h"
#include "pipeline/pipeline.h"
#include "report/report.h"
#include "retrieval/retrieval.h"
#include "tokenizer/tokenizer.h"
#include "trainer/trainer.h"

static PyObject *LipiError;

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

/* Raises lipi's error as the CLI prints it ("path:line: byte N: msg"),
 * with code, path, line, offset and msg as attributes; MemoryError for
 * ENOMEM. Returns NULL for `return raise_lipi(...)`. */
static PyObject *raise_lipi(lipi_status st, const lipi_error *err)
{
    if (st == LIPI_ENOMEM) {
        PyErr_NoMemory();
        return NULL;
    }
    char where[600] = "";
    size_t n = 0;
    if (err->path[0])
        n += (size_t)snprintf(where + n, sizeof where - n, "%s:", err->path);
    if (err->line && n < sizeof where)
        n += (size_t)snprintf(where + n, sizeof where - n, "%zu:", err->line);
    if ((err->path[0] || err->line) && n < sizeof where)
        n += (size_t)snprintf(where + n, sizeof where - n, " ");
    if ((err->offset || err->line) && n < sizeof where)
        snprintf(where + n, sizeof where - n, "byte %zu: ", err->offset);
    PyObject *msg = PyUnicode_FromFormat("%s%s", where,
                                         err->msg[0] ? err->msg : lipi_status_name(st));
    PyObject *e = msg ? PyObject_CallOneArg(LipiError, msg) : NULL;
    Py_XDECREF(msg);
    if (!e)
        return NULL;
    PyObject *code = PyUnicode_FromString(lipi_status_name(st));
    PyObject *path = PyUnicode_DecodeFSDefault(err->path);
    PyObject *line = PyLong_FromSize_t(err->line), *off = PyLong_FromSize_t(err->offset);
    PyObject *m = PyUnicode_DecodeUTF8(err->msg, (Py_ssize_t)strlen(err->msg), "replace");
    if (code && path && line && off && m && PyObject_SetAttrString(e, "code", code) == 0 &&
        PyObject_SetAttrString(e, "path", path) == 0 &&
        PyObject_SetAttrString(e, "line", line) == 0 &&
        PyObject_SetAttrString(e, "offset", off) == 0 && PyObject_SetAttrString(e, "msg", m) == 0)
        PyErr_SetObject(LipiError, e);
    Py_XDECREF(code);
    Py_XDECREF(path);
    Py_XDECREF(line);
    Py_XDECREF(off);
    Py_XDECREF(m);
    Py_DECREF(e);
    return NULL;
}

/* Threads for a `threads` argument: None is one per CPU. -1 with an error
 * set for a bad value. */
static long threads_arg(PyObject *o, size_t max)
{
    if (!o || o == Py_None)
        return (long)lipi_thread_count(0, max);
    if (!PyLong_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "threads must be an int or None");
        return -1;
    }
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 1) {
        PyErr_SetString(PyExc_ValueError, "threads must be at least 1");
        return -1;
    }
    return (long)lipi_thread_count((size_t)v, max);
}

/* A path argument (str or os.PathLike) as a bytes object (new reference). */
static PyObject *path_bytes(PyObject *o)
{
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(o, &b))
        return NULL;
    return b;
}

/* A list of str / PathLike as a bytes tuple plus a borrowed char* array
 * (freed with PyMem_Free). */
typedef struct {
    PyObject *keep;
    const char **p;
    size_t n;
} path_list;

static int path_list_get(PyObject *seq, const char *what, path_list *out)
{
    memset(out, 0, sizeof *out);
    if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of paths, not a single string", what);
        return -1;
    }
    PyObject *fast = PySequence_Fast(seq, "expected a list of paths");
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    out->keep = PyTuple_New(n);
    out->p = PyMem_Calloc((size_t)n + 1, sizeof *out->p);
    if (!out->keep || !out->p)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = path_bytes(PySequence_Fast_GET_ITEM(fast, i));
        if (!b)
            goto fail;
        PyTuple_SET_ITEM(out->keep, i, b);
        out->p[i] = PyBytes_AS_STRING(b);
    }
    out->n = (size_t)n;
    Py_DECREF(fast);
    return 0;
fail:
    Py_DECREF(fast);
    Py_CLEAR(out->keep);
    PyMem_Free(out->p);
    out->p = NULL;
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return -1;
}

static void path_list_free(path_list *l)
{
    Py_CLEAR(l->keep);
    PyMem_Free(l->p);
    l->p = NULL;
}

/* Texts of a Python sequence of str as UTF-8 spans, borrowed from the str
 * objects (CPython caches their UTF-8), which `keep` holds. */
typedef struct {
    PyObject *keep; /* PySequence_Fast of the argument */
    lipi_text *t;
    size_t n, bytes;
} text_list;

static int text_list_get(PyObject *seq, text_list *out)
{
    memset(out, 0, sizeof *out);
    if (PyUnicode_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "expected a list of str, not a str");
        return -1;
    }
    out->keep = PySequence_Fast(seq, "expected a list of str");
    if (!out->keep)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(out->keep);
    out->t = PyMem_Malloc(((size_t)n + 1) * sizeof *out->t);
    if (!out->t) {
        Py_CLEAR(out->keep);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(out->keep, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "text %zd is %s, expected str", i, Py_TYPE(s)->tp_name);
            goto fail;
        }
        Py_ssize_t len;
        const char *p = PyUnicode_AsUTF8AndSize(s, &len);
        if (!p)
            goto fail; /* lone surrogates: UnicodeEncodeError */
        out->t[i].s = p;
        out->t[i].len = (size_t)len;
        out->bytes += (size_t)len;
    }
    out->n = (size_t)n;
    return 0;
fail:
    PyMem_Free(out->t);
    out->t = NULL;
    Py_CLEAR(out->keep);
    return -1;
}

static void text_list_free(text_list *l)
{
    PyMem_Free(l->t);
    l->t = NULL;
    Py_CLEAR(l->keep);
}

/* Splits n texts into the chunks long calls run between signal checks:
 * at most `max_n` texts or the first text past `max_bytes` bytes. */
static size_t chunk_end(const lipi_text *t, size_t from, size_t n, size_t max_n, size_t max_bytes)
{
    size_t bytes = 0, i = from;
    while (i < n && i - from < max_n && bytes < max_bytes)
        bytes += t[i++].len;
    return i;
}

/* ======================================================================== */
/* Buffer: memory from lipi_malloc, seen by NumPy through the buffer protocol */
/* ======================================================================== */

typedef struct {
    PyObject_HEAD
    void *p;
    Py_ssize_t len; /* bytes */
    Py_ssize_t itemsize;
    char format[4];
    Py_ssize_t shape; /* len / itemsize */
} BufferObject;

static void Buffer_dealloc(BufferObject *b)
{
    lipi_free(b->p);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int Buffer_getbuffer(BufferObject *b, Py_buffer *view, int flags)
{
    view->obj = (PyObject *)b;
    Py_INCREF(b);
    view->buf = b->p;
    view->len = b->len;
    view->readonly = 0;
    view->itemsize = b->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? b->format : NULL;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) ? &b->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? &b->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs Buffer_as_buffer = {(getbufferproc)Buffer_getbuffer, NULL};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lipi._lipi.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_as_buffer = &Buffer_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory lipi allocated, for numpy.frombuffer.",
};

/* Takes p (lipi_malloc'd; freed here on failure): n items of `format`. */
static PyObject *buffer_take(void *p, size_t n, size_t itemsize, const char *format)
{
    BufferObject *b = PyObject_New(BufferObject, &BufferType);
    if (!b) {
        lipi_free(p);
        return NULL;
    }
    b->p = p;
    b->len = (Py_ssize_t)(n * itemsize);
    b->itemsize = (Py_ssize_t)itemsize;
    b->shape = (Py_ssize_t)n;
    snprintf(b->format, sizeof b->format, "%s", format);
    return (PyObject *)b;
}

/* A zeroed buffer of n items (n may be 0). */
static PyObject *buffer_new(size_t n, size_t itemsize, const char *format, void **p)
{
    *p = lipi_calloc(n ? n : 1, itemsize);
    if (!*p)
        return PyErr_NoMemory();
    return buffer_take(*p, n, itemsize, format);
}

/* ======================================================================== */
/* Rows: the lipi_batch chunks Encodings are rows of                         */
/* ======================================================================== */

typedef struct {
    PyObject_HEAD
    lipi_batch *chunks;
    size_t n_chunks;
    uint8_t *seq; /* a pair's encoding (one row): which text each token's
                     offsets refer to (0, 1, 255 added), else NULL */
} RowsObject;

static void Rows_dealloc(RowsObject *r)
{
    for (size_t i = 0; i < r->n_chunks; i++)
        lipi_batch_free(&r->chunks[i]);
    PyMem_Free(r->chunks);
    lipi_free(r->seq);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyTypeObject RowsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lipi._lipi._Rows",
    .tp_basicsize = sizeof(RowsObject),
    .tp_dealloc = (destructor)Rows_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static RowsObject *rows_new(size_t n_chunks)
{
    RowsObject *r = PyObject_New(RowsObject, &RowsType);
    if (!r)
        return NULL;
    r->n_chunks = 0;
    r->seq = NULL;
    r->chunks = PyMem_Calloc(n_chunks ? n_chunks : 1, sizeof *r->chunks);
    if (!r->chunks) {
        Py_DECREF(r);
        return (RowsObject *)PyErr_NoMemory();
    }
    r->n_chunks = n_chunks;
    return r;
}

/* ======================================================================== */
/* Encoding                                                                  */
/* ======================================================================== */

typedef struct {
    size_t length;      /* pad every encoding to this many tokens; 0: the
                           longest of the batch */
    size_t multiple;    /* then up to a multiple of this; 0: none */
    bool left;
    uint32_t id, type_id;
    PyObject *token;    /* str */
} pad_options;

typedef struct {
    PyObject_HEAD
    RowsObject *rows;
    const lipi_batch *b;
    size_t row;
    PyObject *text, *pair;
    size_t pad_to;      /* tokens with padding; <= count: none */
    bool pad_left;
    uint32_t pad_id, pad_type_id;
    PyObject *pad_token;
} EncodingObject;

static void Encoding_dealloc(EncodingObject *e)
{
    Py_XDECREF(e->rows);
    Py_XDECREF(e->text);
    Py_XDECREF(e->pair);
    Py_XDECREF(e->pad_token);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static size_t enc_count(const EncodingObject *e)
{
    return e->b->start[e->row + 1] - e->b->start[e->row];
}

static size_t enc_len(const EncodingObject *e)
{
    size_t n = enc_count(e);
    return e->pad_to > n ? e->pad_to : n;
}

static Py_ssize_t Encoding_length(EncodingObject *e)
{
    return (Py_ssize_t)enc_len(e);
}

/* Builds a list of enc_len items: token k (< count) from real(e, k), a pad
 * from pad(e) (a new reference each call), on the side padding goes. */
typedef PyObject *(*item_fn)(EncodingObject *e, size_t k);

static PyObject *enc_list(EncodingObject *e, item_fn real, item_fn pad)
{
    size_t n = enc_count(e), total = enc_len(e), lead = e->pad_left ? total - n : 0;
    PyObject *l = PyList_New((Py_ssize_t)total);
    if (!l)
        return NULL;
    for (size_t i = 0; i < total; i++) {
        bool is_pad = i < lead || i - lead >= n;
        PyObject *o = is_pad ? pad(e, 0) : real(e, e->b->start[e->row] + i - lead);
        if (!o) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, o);
    }
    return l;
}

static PyObject *item_id(EncodingObject *e, size_t k) { return PyLong_FromUnsignedLong(e->b->ids[k]); }
static PyObject *item_pad_id(EncodingObject *e, size_t k) { return PyLong_FromUnsignedLong(e->pad_id); }
static PyObject *item_type(EncodingObject *e, size_t k) { return PyLong_FromUnsignedLong(e->b->type_ids[k]); }
static PyObject *item_pad_type(EncodingObject *e, size_t k) { return PyLong_FromUnsignedLong(e->pad_type_id); }
static PyObject *item_one(EncodingObject *e, size_t k) { return PyLong_FromLong(1); }
static PyObject *item_zero(EncodingObject *e, size_t k) { return PyLong_FromLong(0); }
static PyObject *item_special(EncodingObject *e, size_t k) { return PyLong_FromLong(e->b->special_mask[k]); }
static PyObject *item_pad_token(EncodingObject *e, size_t k)
{
    Py_INCREF(e->pad_token);
    return e->pad_token;
}
static PyObject *item_token(EncodingObject *e, size_t k)
{
    const lipi_batch *b = e->b;
    return PyUnicode_DecodeUTF8(b->token_text + b->token_start[k],
                                (Py_ssize_t)(b->token_start[k + 1] - b->token_start[k]), "replace");
}
static PyObject *item_zero_span(EncodingObject *e, size_t k) { return Py_BuildValue("(ii)", 0, 0); }

static PyObject *Encoding_ids(EncodingObject *e, void *c) { return enc_list(e, item_id, item_pad_id); }
static PyObject *Encoding_type_ids(EncodingObject *e, void *c) { return enc_list(e, item_type, item_pad_type); }
static PyObject *Encoding_attention_mask(EncodingObject *e, void *c) { return enc_list(e, item_one, item_zero); }
static PyObject *Encoding_special_tokens_mask(EncodingObject *e, void *c) { return enc_list(e, item_special, item_one); }
static PyObject *Encoding_tokens(EncodingObject *e, void *c) { return enc_list(e, item_token, item_pad_token); }

/* Byte offsets to character offsets, as Hugging Face's
 * BytesToCharOffsetConverter: start is the character of the start byte; end
 * the character of the end byte, or one past that of the last byte. */
static PyObject *char_span(const char *s, size_t len, const size_t *map, lipi_span sp)
{
    size_t cs, ce;
    if (!map || sp.start >= len) {
        cs = sp.start;
        ce = sp.end;
    } else if (sp.end < len) {
        cs = map[sp.start];
        ce = map[sp.end];
    } else {
        cs = map[sp.start];
        ce = sp.end >= 1 ? map[sp.end - 1] + 1 : cs + 1;
    }
    return Py_BuildValue("(nn)", (Py_ssize_t)cs, (Py_ssize_t)ce);
}

/* map[i] = the character byte i belongs to; NULL (no error) for ASCII. */
static size_t *char_map(PyObject *str, const char **s, size_t *len, int *fail)
{
    Py_ssize_t n;
    *fail = 0;
    *s = PyUnicode_AsUTF8AndSize(str, &n);
    *len = (size_t)n;
    if (!*s) {
        *fail = 1;
        return NULL;
    }
    if (PyUnicode_IS_ASCII(str))
        return NULL;
    size_t *map = PyMem_Malloc(((size_t)n + 1) * sizeof *map);
    if (!map) {
        PyErr_NoMemory();
        *fail = 1;
        return NULL;
    }
    size_t ci = 0;
    for (size_t i = 0; i < (size_t)n; i++) {
        if (i > 0 && ((unsigned char)(*s)[i] & 0xC0) != 0x80)
            ci++;
        map[i] = ci;
    }
    return map;
}

static PyObject *Encoding_offsets(EncodingObject *e, void *c)
{
    const char *ts = NULL, *ps = NULL;
    size_t tl = 0, pl = 0;
    int fail = 0;
    size_t *tmap = char_map(e->text, &ts, &tl, &fail), *pmap = NULL;
    if (fail)
        return NULL;
    if (e->pair && e->pair != Py_None && !(pmap = char_map(e->pair, &ps, &pl, &fail)) && fail) {
        PyMem_Free(tmap);
        return NULL;
    }
    size_t n = enc_count(e), total = enc_len(e), lead = e->pad_left ? total - n : 0;
    PyObject *l = PyList_New((Py_ssize_t)total);
    for (size_t i = 0; l && i < total; i++) {
        PyObject *o;
        if (i < lead || i - lead >= n) {
            o = item_zero_span(e, 0);
        } else {
            size_t k = e->b->start[e->row] + i - lead;
            uint8_t seq = e->rows->seq ? e->rows->seq[k] : 0;
            lipi_span sp = e->b->offsets[k];
            if (seq == 255)
                o = Py_BuildValue("(nn)", (Py_ssize_t)sp.start, (Py_ssize_t)sp.end);
            else if (seq == 1)
                o = char_span(ps, pl, pmap, sp);
            else
                o = char_span(ts, tl, tmap, sp);
        }
        if (!o) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, o);
    }
    PyMem_Free(tmap);
    PyMem_Free(pmap);
    return l;
}

static PyObject *Encoding_repr(EncodingObject *e)
{
    return PyUnicode_FromFormat("Encoding(num_tokens=%zu, attributes=[ids, type_ids, tokens, "
                                "offsets, attention_mask, special_tokens_mask])",
                                enc_len(e));
}

static PyGetSetDef Encoding_getset[] = {
    {"ids", (getter)Encoding_ids, NULL, "Token ids (list of int).", NULL},
    {"tokens", (getter)Encoding_tokens, NULL, "Token strings, as the vocabulary spells them.", NULL},
    {"offsets", (getter)Encoding_offsets, NULL,
     "(start, end) character offsets into the text (or the pair) for each token; "
     "(0, 0) for added special tokens and padding.", NULL},
    {"type_ids", (getter)Encoding_type_ids, NULL, "Segment ids from the post-processor.", NULL},
    {"attention_mask", (getter)Encoding_attention_mask, NULL, "1 for tokens, 0 for padding.", NULL},
    {"special_tokens_mask", (getter)Encoding_special_tokens_mask, NULL,
     "1 for tokens the post-processor added and for padding.", NULL},
    {NULL},
};

static PySequenceMethods Encoding_as_sequence = {.sq_length = (lenfunc)Encoding_length};

static PyTypeObject EncodingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lipi.Encoding",
    .tp_basicsize = sizeof(EncodingObject),
    .tp_dealloc = (destructor)Encoding_dealloc,
    .tp_repr = (reprfunc)Encoding_repr,
    .tp_as_sequence = &Encoding_as_sequence,
    .tp_getset = Encoding_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The tokens of one text, with Hugging Face tokenizers' attribute names:\n"
              "ids, tokens, offsets, type_ids, attention_mask, special_tokens_mask.",
};

static size_t pad_target(const pad_options *p, size_t longest)
{
    size_t to = p->length ? p->length : longest;
    if (p->multiple > 1 && to % p->multiple)
        to += p->multiple - to % p->multiple;
    return to;
}

static EncodingObject *encoding_new(RowsObject *rows, size_t chunk, size_t row, PyObject *text,
                                    PyObject *pair, const pad_options *pad, size_t pad_to)
{
    EncodingObject *e = PyObject_New(EncodingObject, &EncodingType);
    if (!e)
        return NULL;
    Py_INCREF(rows);
    e->rows = rows;
    e->b = &rows->chunks[chunk];
    e->row = row;
    Py_INCREF(text);
    e->text = text;
    Py_XINCREF(pair);
    e->pair = pair;
    e->pad_to = pad ? pad_to : 0;
    e->pad_left = pad && pad->left;
    e->pad_id = pad ? pad->id : 0;
    e->pad_type_id = pad ? pad->type_id : 0;
    e->pad_token = pad ? pad->token : Py_None;
    Py_INCREF(e->pad_token);
    return e;
}

/* ======================================================================== */
/* Tokenizer                                                                 */
/* ======================================================================== */

typedef struct {
    PyObject_HEAD
    lipi_tokenizer *tok;
    lipi_encoder *enc;
    pthread_mutex_t lock; /* guards the session pool */
    lipi_session **pool;
    size_t n_pool, cap_pool;
    lipi_encode_options opt; /* truncation and the special-token policy */
    bool pad_on;
    pad_options pad;
} TokenizerObject;

/* Takes k sessions from the pool, making new ones when it is short. Safe
 * without the GIL. LIPI_ENOMEM. */
static lipi_status pool_take(TokenizerObject *t, size_t k, lipi_session **out)
{
    size_t got = 0;
    pthread_mutex_lock(&t->lock);
    while (got < k && t->n_pool)
        out[got++] = t->pool[--t->n_pool];
    pthread_mutex_unlock(&t->lock);
    for (; got < k; got++)
        if (lipi_session_new(t->enc, &out[got]) != LIPI_OK) {
            while (got)
                lipi_session_free(out[--got]);
            return LIPI_ENOMEM;
        }
    return LIPI_OK;
}

/* Gives sessions back (those that do not fit in the pool are freed). */
static void pool_give(TokenizerObject *t, lipi_session **s, size_t k)
{
    pthread_mutex_lock(&t->lock);
    if (t->n_pool + k > t->cap_pool) {
        size_t cap = (t->n_pool + k) * 2;
        lipi_session **p = realloc(t->pool, cap * sizeof *p);
        if (p) {
            t->pool = p;
            t->cap_pool = cap;
        }
    }
    while (k && t->n_pool < t->cap_pool)
        t->pool[t->n_pool++] = s[--k];
    pthread_mutex_unlock(&t->lock);
    while (k)
        lipi_session_free(s[--k]);
}

static void Tokenizer_dealloc(TokenizerObject *t)
{
    for (size_t i = 0; i < t->n_pool; i++)
        lipi_session_free(t->pool[i]);
    free(t->pool);
    lipi_encoder_free(t->enc);
    lipi_tokenizer_free(t->tok);
    Py_XDECREF(t->pad.token);
    pthread_mutex_destroy(&t->lock);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

/* Wraps tok (taken: freed on failure) in a new object of `type`. */
static PyObject *tokenizer_wrap(PyTypeObject *type, lipi_tokenizer *tok)
{
    lipi_error err = {0};
    TokenizerObject *t = (TokenizerObject *)type->tp_alloc(type, 0);
    if (!t) {
        lipi_tokenizer_free(tok);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->tok = tok;
    t->pad.token = PyUnicode_FromString("[PAD]");
    if (!t->pad.token) {
        Py_DECREF(t);
        return NULL;
    }
    lipi_status st = lipi_encoder_new(tok, &t->enc, &err);
    if (st != LIPI_OK) {
        Py_DECREF(t);
        return raise_lipi(st, &err);
    }
    lipi_encode_options_default(t->enc, &t->opt);
    t->opt.add_special_tokens = false;
    return (PyObject *)t;
}

static PyObject *Tokenizer_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyErr_SetString(PyExc_TypeError,
                    "use Tokenizer.from_file(path_or_name) or Tokenizer.from_str(json)");
    return NULL;
}

static PyObject *Tokenizer_open(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"path", "data_dir", "pattern", "lowercase", "strip_accents", NULL};
    PyObject *path = NULL, *data_dir = Py_None, *lower = Py_None, *strip = Py_None;
    const char *pattern = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OzOO:_open", kws, &path, &data_dir, &pattern,
                                     &lower, &strip))
        return NULL;
    PyObject *pb = path_bytes(path), *db = NULL;
    if (!pb)
        return NULL;
    if (data_dir != Py_None && !(db = path_bytes(data_dir))) {
        Py_DECREF(pb);
        return NULL;
    }
    lipi_open_options o = {0};
    o.pattern = pattern;
    o.data_dir = db ? PyBytes_AS_STRING(db) : NULL;
    o.lowercase = lower == Py_None ? LIPI_FLAG_AUTO : PyObject_IsTrue(lower) ? LIPI_FLAG_ON : LIPI_FLAG_OFF;
    o.strip_accents = strip == Py_None ? LIPI_FLAG_AUTO : PyObject_IsTrue(strip) ? LIPI_FLAG_ON : LIPI_FLAG_OFF;
    lipi_tokenizer *tok = NULL;
    lipi_error err = {0};
    lipi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lipi_tokenizer_open(PyBytes_AS_STRING(pb), &o, &tok, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    Py_XDECREF(db);
    if (st != LIPI_OK)
        return raise_lipi(st, &err);
    return tokenizer_wrap(type, tok);
}

static PyObject *Tokenizer_from_str(PyTypeObject *type, PyObject *arg)
{
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!s)
        return NULL;
    lipi_tokenizer *tok = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_tokenizer_load_json(s, (size_t)len, NULL, &tok, &err);
    if (st != LIPI_OK)
        return raise_lipi(st, &err);
    return tokenizer_wrap(type, tok);
}

/* The encode options of one call: the tokenizer's, with this call's
 * add_special_tokens (-1: keep) and special policy (NULL: keep). */
static int call_options(TokenizerObject *t, int add, PyObject *special, lipi_encode_options *o)
{
    *o = t->opt;
    if (add >= 0)
        o->add_special_tokens = add;
    if (special && special != Py_None) {
        const char *s = PyUnicode_Check(special) ? PyUnicode_AsUTF8(special) : NULL;
        if (!s) {
            PyErr_SetString(PyExc_TypeError, "special must be 'allow', 'text' or 'error'");
            return -1;
        }
        if (strcmp(s, "allow") == 0)
            o->special = LIPI_SPECIAL_ALLOW;
        else if (strcmp(s, "text") == 0)
            o->special = LIPI_SPECIAL_TEXT;
        else if (strcmp(s, "error") == 0)
            o->special = LIPI_SPECIAL_ERROR;
        else {
            PyErr_Format(PyExc_ValueError, "special must be 'allow', 'text' or 'error', not '%s'", s);
            return -1;
        }
    }
    return 0;
}

/* Encodes one text (and pair) with session s into b (one row, every array
 * filled, tokens copied), and seq when pair is given. */
static lipi_status encode_one(lipi_session *s, const char *text, size_t len, const char *pair,
                              size_t plen, const lipi_encode_options *opt, lipi_batch *b,
                              uint8_t **seq, lipi_error *err)
{
    lipi_encoding e = {0};
    lipi_status st;
    size_t cap = len / 2 + 16;
    memset(b, 0, sizeof *b);
    for (;;) {
        lipi_free(e.ids);
        lipi_free(e.offsets);
        lipi_free(e.type_ids);
        lipi_free(e.special_mask);
        lipi_free(e.sequence_ids);
        lipi_free(e.tokens);
        lipi_free(e.token_lens);
        memset(&e, 0, sizeof e);
        e.cap = cap;
        e.ids = lipi_malloc(cap * sizeof *e.ids);
        e.offsets = lipi_malloc(cap * sizeof *e.offsets);
        e.type_ids = lipi_malloc(cap * sizeof *e.type_ids);
        e.special_mask = lipi_malloc(cap);
        e.sequence_ids = pair ? lipi_malloc(cap) : NULL;
        e.tokens = lipi_malloc(cap * sizeof *e.tokens);
        e.token_lens = lipi_malloc(cap * sizeof *e.token_lens);
        if (!e.ids || !e.offsets || !e.type_ids || !e.special_mask || (pair && !e.sequence_ids) ||
            !e.tokens || !e.token_lens) {
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            goto done;
        }
        st = pair ? lipi_encode_pair(s, text, len, pair, plen, opt, &e, err)
                  : lipi_encode(s, text, len, opt, &e, err);
        if (st != LIPI_OK)
            goto done;
        if (e.len <= cap)
            break;
        cap = e.len;
    }
    size_t n = e.len, text_bytes = 0;
    for (size_t i = 0; i < n; i++)
        text_bytes += e.token_lens[i];
    b->n = 1;
    b->start = lipi_malloc(2 * sizeof *b->start);
    b->token_start = lipi_malloc((n + 1) * sizeof *b->token_start);
    b->token_text = lipi_malloc(text_bytes + 1);
    if (!b->start || !b->token_start || !b->token_text) {
        st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    b->start[0] = 0;
    b->start[1] = n;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        b->token_start[i] = at;
        memcpy(b->token_text + at, e.tokens[i], e.token_lens[i]);
        at += e.token_lens[i];
    }
    b->token_start[n] = at;
    b->ids = e.ids;
    b->offsets = e.offsets;
    b->type_ids = e.type_ids;
    b->special_mask = e.special_mask;
    e.ids = NULL;
    e.offsets = NULL;
    e.type_ids = NULL;
    e.special_mask = NULL;
    if (pair) {
        *seq = e.sequence_ids;
        e.sequence_ids = NULL;
    }
done:
    lipi_free(e.ids);
    lipi_free(e.offsets);
    lipi_free(e.type_ids);
    lipi_free(e.special_mask);
    lipi_free(e.sequence_ids);
    lipi_free(e.tokens);
    lipi_free(e.token_lens);
    if (st != LIPI_OK)
        lipi_batch_free(b);
    return st;
}

/* Texts above this many bytes are encoded with the GIL released. */
#define RELEASE_GIL_BYTES 2048

static PyObject *Tokenizer_encode(TokenizerObject *t, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"sequence", "pair", "add_special_tokens", "special", NULL};
    PyObject *text, *pair = Py_None, *special = Py_None;
    int add = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|OpO:encode", kws, &text, &pair, &add, &special))
        return NULL;
    if (pair != Py_None && !PyUnicode_Check(pair)) {
        PyErr_SetString(PyExc_TypeError, "pair must be a str or None");
        return NULL;
    }
    lipi_encode_options o;
    if (call_options(t, add, special, &o) < 0)
        return NULL;
    Py_ssize_t len, plen = 0;
    const char *s = PyUnicode_AsUTF8AndSize(text, &len), *p = NULL;
    if (!s || (pair != Py_None && !(p = PyUnicode_AsUTF8AndSize(pair, &plen))))
        return NULL;
    RowsObject *rows = rows_new(1);
    if (!rows)
        return NULL;
    lipi_session *sess;
    lipi_error err = {0};
    lipi_status st;
    if ((size_t)(len + plen) > RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        st = pool_take(t, 1, &sess);
        if (st == LIPI_OK) {
            st = encode_one(sess, s, (size_t)len, p, (size_t)plen, &o, &rows->chunks[0], &rows->seq, &err);
            pool_give(t, &sess, 1);
        }
        Py_END_ALLOW_THREADS
    } else {
        st = pool_take(t, 1, &sess);
        if (st == LIPI_OK) {
            st = encode_one(sess, s, (size_t)len, p, (size_t)plen, &o, &rows->chunks[0], &rows->seq, &err);
            pool_give(t, &sess, 1);
        }
    }
    if (st != LIPI_OK) {
        Py_DECREF(rows);
        return raise_lipi(st, &err);
    }
    size_t n = rows->chunks[0].start[1];
    PyObject *e = (PyObject *)encoding_new(rows, 0, 0, text, pair == Py_None ? NULL : pair,
                                           t->pad_on ? &t->pad : NULL, pad_target(&t->pad, n));
    Py_DECREF(rows);
    return e;
}

/* Encodes the texts in chunks on `threads` sessions with the GIL released,
 * checking for signals between chunks. Returns a Rows object of the chunks
 * (a chunk per call of lipi_encode_batch), or NULL with an exception. */
static RowsObject *encode_chunks(TokenizerObject *t, const text_list *tl, size_t threads,
                                 const lipi_encode_options *o, unsigned want)
{
    size_t max_n = 16384 * threads, max_bytes = (size_t)4 << 20 << (threads > 1);
    size_t n_chunks = 0;
    for (size_t i = 0; i < tl->n || n_chunks == 0; n_chunks++) {
        i = chunk_end(tl->t, i, tl->n, max_n, max_bytes);
        if (tl->n == 0)
            i = 1;
    }
    RowsObject *rows = rows_new(n_chunks);
    if (!rows)
        return NULL;
    lipi_session **sess = PyMem_Calloc(threads, sizeof *sess);
    if (!sess) {
        Py_DECREF(rows);
        return (RowsObject *)PyErr_NoMemory();
    }
    lipi_error err = {0};
    lipi_status st = LIPI_OK;
    size_t from = 0;
    Py_BEGIN_ALLOW_THREADS
    st = pool_take(t, threads, sess);
    Py_END_ALLOW_THREADS
    for (size_t c = 0; st == LIPI_OK && c < n_chunks; c++) {
        size_t to = chunk_end(tl->t, from, tl->n, max_n, max_bytes);
        size_t use = to - from < 64 ? 1 : threads; /* small batches: no thread start */
        Py_BEGIN_ALLOW_THREADS
        st = lipi_encode_batch(sess, use, tl->t + from, to - from, o, want, &rows->chunks[c], &err);
        Py_END_ALLOW_THREADS
        if (st != LIPI_OK) {
            err.line += from; /* the index in the whole list, 1-based */
            break;
        }
        from = to;
        if (PyErr_CheckSignals() < 0) {
            pool_give(t, sess, threads);
            PyMem_Free(sess);
            Py_DECREF(rows);
            return NULL;
        }
    }
    if (sess[0])
        pool_give(t, sess, threads);
    PyMem_Free(sess);
    if (st != LIPI_OK) {
        Py_DECREF(rows);
        lipi_error_prefix(&err, "text %zu", err.line);
        err.line = 0;
        return (RowsObject *)raise_lipi(st, &err);
    }
    return rows;
}

static PyObject *Tokenizer_encode_batch(TokenizerObject *t, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"input", "add_special_tokens", "threads", "special", NULL};
    PyObject *input, *threads_o = Py_None, *special = Py_None;
    int add = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pOO:encode_batch", kws, &input, &add,
                                     &threads_o, &special))
        return NULL;
    lipi_encode_options o;
    long threads = threads_arg(threads_o, 256);
    if (threads < 0 || call_options(t, add, special, &o) < 0)
        return NULL;
    text_list tl;
    if (text_list_get(input, &tl) < 0)
        return NULL;
    RowsObject *rows = encode_chunks(t, &tl, (size_t)threads, &o,
                                     LIPI_WANT_OFFSETS | LIPI_WANT_TOKENS | LIPI_WANT_TYPE_IDS |
                                         LIPI_WANT_SPECIAL_MASK);
    PyObject *list = NULL;
    if (!rows)
        goto done;
    size_t longest = 0;
    for (size_t c = 0; c < rows->n_chunks; c++)
        for (size_t r = 0; r < rows->chunks[c].n; r++) {
            size_t k = rows->chunks[c].start[r + 1] - rows->chunks[c].start[r];
            longest = k > longest ? k : longest;
        }
    size_t pad_to = pad_target(&t->pad, longest);
    list = PyList_New((Py_ssize_t)tl.n);
    size_t i = 0;
    for (size_t c = 0; list && c < rows->n_chunks; c++)
        for (size_t r = 0; r < rows->chunks[c].n; r++, i++) {
            PyObject *e = (PyObject *)encoding_new(rows, c, r, PySequence_Fast_GET_ITEM(tl.keep, i),
                                                   NULL, t->pad_on ? &t->pad : NULL, pad_to);
            if (!e) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)i, e);
        }
done:
    Py_XDECREF(rows);
    text_list_free(&tl);
    return list;
}

/* The NumPy fast path: (ids, mask, rows, cols) as Buffers (padded: int64
 * (rows, cols) each, ids padded with the pad id) or (ids, starts) (flat:
 * uint32 ids of all texts and int64 row starts, n + 1 of them). */
static PyObject *Tokenizer_encode_arrays(TokenizerObject *t, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"input", "add_special_tokens", "threads", "padded", "special", NULL};
    PyObject *input, *threads_o = Py_None, *special = Py_None;
    int add = 0, padded = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pOpO:_encode_arrays", kws, &input, &add,
                                     &threads_o, &padded, &special))
        return NULL;
    lipi_encode_options o;
    long threads = threads_arg(threads_o, 256);
    if (threads < 0 || call_options(t, add, special, &o) < 0)
        return NULL;
    text_list tl;
    if (text_list_get(input, &tl) < 0)
        return NULL;
    RowsObject *rows = encode_chunks(t, &tl, (size_t)threads, &o, 0);
    text_list_free(&tl);
    if (!rows)
        return NULL;
    size_t n = 0, total = 0, longest = 0;
    for (size_t c = 0; c < rows->n_chunks; c++) {
        const lipi_batch *b = &rows->chunks[c];
        n += b->n;
        total += b->start[b->n];
        for (size_t r = 0; r < b->n; r++) {
            size_t k = b->start[r + 1] - b->start[r];
            longest = k > longest ? k : longest;
        }
    }
    PyObject *out = NULL;
    if (!padded) {
        void *ip, *sp;
        PyObject *ids = buffer_new(total, 4, "I", &ip), *starts = buffer_new(n + 1, 8, "q", &sp);
        if (ids && starts) {
            uint32_t *id = ip;
            int64_t *st = sp;
            size_t at = 0, row = 0;
            for (size_t c = 0; c < rows->n_chunks; c++) {
                const lipi_batch *b = &rows->chunks[c];
                memcpy(id + at, b->ids, b->start[b->n] * sizeof *id);
                for (size_t r = 0; r < b->n; r++)
                    st[row++] = (int64_t)(at + b->start[r]);
                at += b->start[b->n];
            }
            st[row] = (int64_t)at;
            out = Py_BuildValue("(OO)", ids, starts);
        }
        Py_XDECREF(ids);
        Py_XDECREF(starts);
    } else {
        size_t cols = t->pad_on ? pad_target(&t->pad, longest) : longest;
        if (cols < longest)
            cols = longest; /* a fixed length below a text's tokens: no cut here */
        bool left = t->pad_on && t->pad.left;
        int64_t pad_id = t->pad_on ? t->pad.id : 0;
        void *ip, *mp;
        PyObject *ids = buffer_new(n * cols, 8, "q", &ip), *mask = buffer_new(n * cols, 8, "q", &mp);
        if (ids && mask) {
            int64_t *id = ip, *m = mp;
            size_t row = 0;
            for (size_t c = 0; c < rows->n_chunks; c++) {
                const lipi_batch *b = &rows->chunks[c];
                for (size_t r = 0; r < b->n; r++, row++) {
                    size_t k = b->start[r + 1] - b->start[r], lead = left ? cols - k : 0;
                    int64_t *ir = id + row * cols, *mr = m + row * cols;
                    for (size_t j = 0; j < cols; j++)
                        ir[j] = pad_id;
                    for (size_t j = 0; j < k; j++) {
                        ir[lead + j] = b->ids[b->start[r] + j];
                        mr[lead + j] = 1;
                    }
                }
            }
            out = Py_BuildValue("(OOnn)", ids, mask, (Py_ssize_t)n, (Py_ssize_t)cols);
        }
        Py_XDECREF(ids);
        Py_XDECREF(mask);
    }
    Py_DECREF(rows);
    return out;
}

/* ids from a sequence of ints (PyMem_Malloc'd). */
static uint32_t *ids_arg(PyObject *seq, size_t *n)
{
    PyObject *fast = PySequence_Fast(seq, "ids must be a sequence of int");
    if (!fast)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    uint32_t *ids = PyMem_Malloc(((size_t)len + 1) * sizeof *ids);
    if (!ids) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *idx = PyNumber_Index(o);
        unsigned long long v = idx ? PyLong_AsUnsignedLongLong(idx) : 0;
        Py_XDECREF(idx);
        if (!idx || PyErr_Occurred() || v > UINT32_MAX) {
            if (!idx || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "ids[%zd] is %s, expected an int", i, Py_TYPE(o)->tp_name);
            } else {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "ids[%zd] is not a token id (0 .. 2^32-1)", i);
            }
            PyMem_Free(ids);
            Py_DECREF(fast);
            return NULL;
        }
        ids[i] = (uint32_t)v;
    }
    Py_DECREF(fast);
    *n = (size_t)len;
    return ids;
}

static PyObject *decode_with(TokenizerObject *t, lipi_session *s, const uint32_t *ids, size_t n,
                             bool skip, lipi_error *err, lipi_status *st)
{
    char small[1024];
    size_t len = 0;
    *st = lipi_decode(s, ids, n, skip, small, sizeof small, &len, err);
    if (*st != LIPI_OK)
        return NULL;
    if (len < sizeof small)
        return PyUnicode_DecodeUTF8(small, (Py_ssize_t)len, "replace");
    char *big = PyMem_Malloc(len + 1);
    if (!big)
        return PyErr_NoMemory();
    *st = lipi_decode(s, ids, n, skip, big, len + 1, &len, err);
    PyObject *r = *st == LIPI_OK ? PyUnicode_DecodeUTF8(big, (Py_ssize_t)len, "replace") : NULL;
    PyMem_Free(big);
    return r;
}

static PyObject *Tokenizer_decode(TokenizerObject *t, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"ids", "skip_special_tokens", NULL};
    PyObject *seq;
    int skip = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:decode", kws, &seq, &skip))
        return NULL;
    size_t n;
    uint32_t *ids = ids_arg(seq, &n);
    if (!ids)
        return NULL;
    lipi_session *s;
    lipi_error err = {0};
    lipi_status st = pool_take(t, 1, &s);
    PyObject *r = NULL;
    if (st == LIPI_OK) {
        r = decode_with(t, s, ids, n, skip, &err, &st);
        pool_give(t, &s, 1);
    }
    PyMem_Free(ids);
    if (st != LIPI_OK)
        return raise_lipi(st, &err);
    return r;
}

static PyObject *Tokenizer_decode_batch(TokenizerObject *t, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"sequences", "skip_special_tokens", NULL};
    PyObject *seqs;
    int skip = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:decode_batch", kws, &seqs, &skip))
        return NULL;
    PyObject *fast = PySequence_Fast(seqs, "sequences must be a list of lists of ids");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *out = PyList_New(n);
    lipi_session *s;
    lipi_error err = {0};
    lipi_status st = LIPI_OK;
    if (!out || (st = pool_take(t, 1, &s)) != LIPI_OK) {
        Py_DECREF(fast);
        Py_XDECREF(out);
        return out ? raise_lipi(st, &err) : NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t k;
        uint32_t *ids = ids_arg(PySequence_Fast_GET_ITEM(fast, i), &k);
        PyObject *r = ids ? decode_with(t, s, ids, k, skip, &err, &st) : NULL;
        PyMem_Free(ids);
        if (!r) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, r);
    }
    pool_give(t, &s, 1);
    Py_DECREF(fast);
    if (!out && st != LIPI_OK && !PyErr_Occurred())
        return raise_lipi(st, &err);
    return out;
}

static PyObject *Tokenizer_token_to_id(TokenizerObject *t, PyObject *arg)
{
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!s)
        return NULL;
    uint32_t id;
    if (!lipi_tokenizer_token_to_id(t->tok, s, (size_t)len, &id))
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(id);
}

static PyObject *Tokenizer_id_to_token(TokenizerObject *t, PyObject *arg)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return NULL;
    }
    size_t len;
    const char *s = v <= UINT32_MAX ? lipi_tokenizer_id_to_token(t->tok, (uint32_t)v, &len) : NULL;
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "replace");
}

static PyObject *Tokenizer_get_vocab_size(TokenizerObject *t, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"with_added_tokens", NULL};
    int with_added = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:get_vocab_size", kws, &with_added))
        return NULL;
    if (!with_added) {
        PyErr_SetString(PyExc_ValueError, "lipi counts every id: with_added_tokens=False is not supported");
        return NULL;
    }
    size_t n = lipi_tokenizer_vocab_size(t->tok);
    return PyLong_FromSize_t(n);
}

typedef lipi_status (*save_fn)(const lipi_tokenizer *t, const char *path, lipi_error *err);

/* Saves with fn (atomic in the library) to the path arg, GIL released. */
static PyObject *tokenizer_save_with(TokenizerObject *t, PyObject *arg, save_fn fn)
{
    PyObject *pb = path_bytes(arg);
    if (!pb)
        return NULL;
    lipi_error err = {0};
    lipi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fn(t->tok, PyBytes_AS_STRING(pb), &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    if (st != LIPI_OK)
        return raise_lipi(st, &err);
    Py_RETURN_NONE;
}

static PyObject *Tokenizer_save(TokenizerObject *t, PyObject *arg)
{
    return tokenizer_save_with(t, arg, lipi_tokenizer_save);
}

static PyObject *Tokenizer_save_spm(TokenizerObject *t, PyObject *arg)
{
    return tokenizer_save_with(t, arg, lipi_tokenizer_save_spm);
}

static PyObject *Tokenizer_to_str(TokenizerObject *t, PyObject *unused)
{
    char *json = NULL;
    size_t len = 0;
    lipi_error err = {0};
    lipi_status st = lipi_tokenizer_to_json(t->tok, &json, &len, &err);
    if (st != LIPI_OK)
        return raise_lipi(st, &err);
    PyObject *r = PyUnicode_DecodeUTF8(json, (Py_ssize_t)len, "strict");
    lipi_free(json);
    return r;
}

/* _set_truncation(max_length, direction, strategy): max_length 0 = off. */
static PyObject *Tokenizer_set_truncation(TokenizerObject *t, PyObject *args)
{
    Py_ssize_t max;
    const char *dir, *strat;
    if (!PyArg_ParseTuple(args, "nss", &max, &dir, &strat))
        return NULL;
    if (max < 0) {
        PyErr_SetString(PyExc_ValueError, "max_length must be positive");
        return NULL;
    }
    lipi_truncate_strategy s;
    if (strcmp(strat, "longest_first") == 0)
        s = LIPI_TRUNCATE_LONGEST_FIRST;
    else if (strcmp(strat, "only_first") == 0)
        s = LIPI_TRUNCATE_ONLY_FIRST;
    else if (strcmp(strat, "only_second") == 0)
        s = LIPI_TRUNCATE_ONLY_SECOND;
    else {
        PyErr_Format(PyExc_ValueError,
                     "strategy must be 'longest_first', 'only_first' or 'only_second', not '%s'", strat);
        return NULL;
    }
    if (strcmp(dir, "right") != 0 && strcmp(dir, "left") != 0) {
        PyErr_Format(PyExc_ValueError, "direction must be 'right' or 'left', not '%s'", dir);
        return NULL;
    }
    t->opt.max_length = (size_t)max;
    t->opt.truncate_left = strcmp(dir, "left") == 0;
    t->opt.strategy = s;
    Py_RETURN_NONE;
}

/* _set_padding(on, length, multiple, direction, pad_id, pad_type_id, pad_token). */
static PyObject *Tokenizer_set_padding(TokenizerObject *t, PyObject *args)
{
    int on;
    Py_ssize_t length, multiple;
    const char *dir;
    unsigned long id, type_id;
    PyObject *token;
    if (!PyArg_ParseTuple(args, "pnnskkU", &on, &length, &multiple, &dir, &id, &type_id, &token))
        return NULL;
    if (length < 0 || multiple < 0 || id > UINT32_MAX || type_id > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "padding values must be positive");
        return NULL;
    }
    if (strcmp(dir, "right") != 0 && strcmp(dir, "left") != 0) {
        PyErr_Format(PyExc_ValueError, "direction must be 'right' or 'left', not '%s'", dir);
        return NULL;
    }
    t->pad_on = on;
    t->pad.length = (size_t)length;
    t->pad.multiple = (size_t)multiple;
    t->pad.left = strcmp(dir, "left") == 0;
    t->pad.id = (uint32_t)id;
    t->pad.type_id = (uint32_t)type_id;
    Py_INCREF(token);
    Py_SETREF(t->pad.token, token);
    Py_RETURN_NONE;
}

static PyObject *Tokenizer_set_special(TokenizerObject *t, PyObject *arg)
{
    lipi_encode_options o;
    if (call_options(t, -1, arg, &o) < 0)
        return NULL;
    t->opt.special = o.special;
    Py_RETURN_NONE;
}

static PyMethodDef Tokenizer_methods[] = {
    {"_open", (PyCFunction)(void (*)(void))Tokenizer_open, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "_open(path, data_dir=None, pattern=None, lowercase=None, strip_accents=None)"},
    {"from_str", (PyCFunction)Tokenizer_from_str, METH_O | METH_CLASS,
     "from_str(json) -> Tokenizer: a tokenizer from the text of a tokenizer.json."},
    {"encode", (PyCFunction)(void (*)(void))Tokenizer_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(sequence, pair=None, add_special_tokens=False, special=None) -> Encoding\n\n"
     "Encodes one text (and optionally a second text of a pair). special: what\n"
     "special tokens written in the text become: 'allow' (their ids, the default),\n"
     "'text' (ordinary text) or 'error' (LipiError). Truncation and padding as\n"
     "set by enable_truncation / enable_padding."},
    {"encode_batch", (PyCFunction)(void (*)(void))Tokenizer_encode_batch, METH_VARARGS | METH_KEYWORDS,
     "encode_batch(input, add_special_tokens=False, threads=None, special=None) -> list[Encoding]\n\n"
     "Encodes a list of texts on `threads` C threads (None: one per CPU) with the\n"
     "GIL released; results in input order, the same for any thread count."},
    {"_encode_arrays", (PyCFunction)(void (*)(void))Tokenizer_encode_arrays, METH_VARARGS | METH_KEYWORDS,
     "The buffers behind encode_batch_numpy."},
    {"decode", (PyCFunction)(void (*)(void))Tokenizer_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(ids, skip_special_tokens=True) -> str"},
    {"decode_batch", (PyCFunction)(void (*)(void))Tokenizer_decode_batch, METH_VARARGS | METH_KEYWORDS,
     "decode_batch(sequences, skip_special_tokens=True) -> list[str]"},
    {"token_to_id", (PyCFunction)Tokenizer_token_to_id, METH_O,
     "token_to_id(token) -> int | None"},
    {"id_to_token", (PyCFunction)Tokenizer_id_to_token, METH_O,
     "id_to_token(id) -> str | None"},
    {"get_vocab_size", (PyCFunction)(void (*)(void))Tokenizer_get_vocab_size, METH_VARARGS | METH_KEYWORDS,
     "get_vocab_size(with_added_tokens=True) -> int: the number of ids."},
    {"save", (PyCFunction)Tokenizer_save, METH_O,
     "save(path): writes tokenizer.json atomically (Hugging Face loads it)."},
    {"save_spm", (PyCFunction)Tokenizer_save_spm, METH_O,
     "save_spm(path): writes a SentencePiece .model (Unigram and SentencePiece-style BPE)."},
    {"to_str", (PyCFunction)Tokenizer_to_str, METH_NOARGS, "to_str() -> str: the tokenizer.json text."},
    {"_set_truncation", (PyCFunction)Tokenizer_set_truncation, METH_VARARGS, NULL},
    {"_set_padding", (PyCFunction)Tokenizer_set_padding, METH_VARARGS, NULL},
    {"_set_special", (PyCFunction)Tokenizer_set_special, METH_O, NULL},
    {NULL},
};

static PyTypeObject TokenizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lipi._lipi.Tokenizer",
    .tp_basicsize = sizeof(TokenizerObject),
    .tp_dealloc = (destructor)Tokenizer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A tokenizer of any format lipi reads (the C object behind lipi.Tokenizer).",
    .tp_methods = Tokenizer_methods,
    .tp_new = Tokenizer_tp_new,
};

/* ======================================================================== */
/* Training                                                                  */
/* ======================================================================== */

/* Option `key` of dict d: NULL (no error) when absent or None. */
static PyObject *opt_get(PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    return v == Py_None ? NULL : v;
}

static int opt_size(PyObject *d, const char *key, size_t *out)
{
    PyObject *v = opt_get(d, key);
    if (!v)
        return 0;
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", key);
        return -1;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x < 0) {
        PyErr_Format(PyExc_ValueError, "%s must not be negative", key);
        return -1;
    }
    *out = (size_t)x;
    return 1;
}

static int opt_double(PyObject *d, const char *key, double *out)
{
    PyObject *v = opt_get(d, key);
    if (!v)
        return 0;
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    *out = x;
    return 1;
}

static int opt_bool(PyObject *d, const char *key, bool *out)
{
    PyObject *v = opt_get(d, key);
    if (!v)
        return 0;
    int b = PyObject_IsTrue(v);
    if (b < 0)
        return -1;
    *out = b;
    return 1;
}

/* A str option (borrowed UTF-8 of the dict's value). */
static int opt_str(PyObject *d, const char *key, const char **out)
{
    PyObject *v = opt_get(d, key);
    if (!v)
        return 0;
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str", key);
        return -1;
    }
    *out = PyUnicode_AsUTF8(v);
    return *out ? 1 : -1;
}

static int invalid_mode(PyObject *d, lipi_invalid_mode *mode)
{
    const char *s = "error";
    if (opt_str(d, "invalid", &s) < 0)
        return -1;
    if (strcmp(s, "error") == 0)
        *mode = LIPI_INVALID_ERROR;
    else if (strcmp(s, "replace") == 0)
        *mode = LIPI_INVALID_REPLACE;
    else {
        PyErr_Format(PyExc_ValueError, "invalid must be 'error' or 'replace', not '%s'", s);
        return -1;
    }
    return 0;
}

/* The normalizer and pre-tokenizer of a training run, from the options
 * `lipi train` has: normalizer (default "indic"), lowercase,
 * strip_accents, fold_digits, pattern (default "indic", "unigram" for
 * Unigram) or regex. LIPI_EINVAL with a Python error set for a bad type. */
static lipi_status train_text(PyObject *d, bool unigram, lipi_normalizer **norm,
                              lipi_pretokenizer **pre, lipi_error *err)
{
    const char *nname = "indic", *pattern = unigram ? "unigram" : "indic", *regex = NULL;
    lipi_normalizer_options no = {0};
    if (opt_str(d, "normalizer", &nname) < 0 || opt_str(d, "pattern", &pattern) < 0 ||
        opt_str(d, "regex", &regex) < 0 || opt_bool(d, "lowercase", &no.lowercase) < 0 ||
        opt_bool(d, "strip_accents", &no.strip_accents) < 0 ||
        opt_bool(d, "fold_digits", &no.fold_digits) < 0)
        return LIPI_EINVAL;
    return lipi_train_text_new(nname, &no, pattern, regex, norm, pre, err);
}

/* _train(cls, type, files, counts_files, options: dict) -> cls (a Tokenizer
 * subclass: lipi.Tokenizer), with
 * `lipi train`'s options under their Python names (the CLI's with
 * underscores). The job is filled as cli/cmd_train.c fills it (one set of
 * options, shared by lipi_train_job_share_options), so the same options
 * give the same tokenizer.json. */
static PyObject *mod_train(PyObject *self, PyObject *args)
{
    const char *type;
    PyTypeObject *cls;
    PyObject *files_o, *counts_o, *d;
    if (!PyArg_ParseTuple(args, "O!sOOO!:_train", &PyType_Type, &cls, &type, &files_o, &counts_o,
                          &PyDict_Type, &d))
        return NULL;
    if (!PyType_IsSubtype(cls, &TokenizerType)) {
        PyErr_SetString(PyExc_TypeError, "_train makes Tokenizers");
        return NULL;
    }
    bool unigram = strcmp(type, "unigram") == 0;
    if (!unigram && strcmp(type, "bpe") != 0) {
        PyErr_Format(PyExc_ValueError, "type must be 'bpe' or 'unigram', not '%s'", type);
        return NULL;
    }
    path_list files = {0}, counts = {0}, langs = {0}, lang_files = {0};
    const char **specials = NULL;
    PyObject *special_keep = NULL, *result = NULL;
    lipi_train_job job;
    lipi_train_job_default(&job);
    lipi_bpe_options *b = &job.bpe;
    lipi_unigram_options *u = &job.unigram;
    b->common.vocab_size = 32000;
    if (path_list_get(files_o, "files", &files) < 0 || path_list_get(counts_o, "from_counts", &counts) < 0)
        goto done;
    if (files.n && counts.n) {
        PyErr_SetString(PyExc_ValueError, "give either files or from_counts, not both");
        goto done;
    }
    if (!files.n && !counts.n && !opt_get(d, "lang_files")) {
        PyErr_SetString(PyExc_ValueError, "nothing to train on: give files, an iterator or from_counts");
        goto done;
    }
    /* The common options go into the BPE options and are then given to
     * Unigram, which keeps its own defaults where none was given. */
    bool set_cov = false, set_maxlen = false, set_units = false, set_pexp = false;
    size_t threads = 0, v;
    double pexp = 0;
    const char *units = NULL, *balance = NULL;
    int r;
    if (opt_size(d, "vocab_size", &b->common.vocab_size) < 0 ||
        opt_bool(d, "byte_fallback", &b->common.byte_fallback) < 0 ||
        opt_bool(d, "grapheme_guard", &b->common.grapheme_guard) < 0 ||
        opt_size(d, "limit_alphabet", &b->limit_alphabet) < 0 ||
        opt_str(d, "unk_token", &b->common.unk_token) < 0 ||
        opt_str(d, "units", &units) < 0 || opt_str(d, "balance", &balance) < 0 ||
        opt_double(d, "alpha", &job.alpha) < 0 ||
        opt_double(d, "parity_threshold", &b->parity_threshold) < 0 ||
        invalid_mode(d, &job.count.invalid) < 0)
        goto done;
    if ((r = opt_size(d, "min_frequency", &v)) < 0)
        goto done;
    if (r && v == 0) {
        PyErr_SetString(PyExc_ValueError, "min_frequency must be at least 1");
        goto done;
    }
    if (r)
        b->min_frequency = v;
    if ((r = opt_size(d, "max_token_length", &b->max_token_length)) < 0)
        goto done;
    set_maxlen = r;
    if ((r = opt_double(d, "character_coverage", &b->common.character_coverage)) < 0)
        goto done;
    set_cov = r;
    if ((r = opt_double(d, "parity_exponent", &pexp)) < 0)
        goto done;
    set_pexp = r;
    {
        size_t sample = 0, seed = 1;
        if (opt_size(d, "sample", &sample) < 0 || opt_size(d, "seed", &seed) < 0)
            goto done;
        u->sample = sample;
        u->sample_seed = seed;
    }
    PyObject *th = opt_get(d, "threads");
    long tv = threads_arg(th, 1024);
    if (tv < 0)
        goto done;
    threads = (size_t)tv;
    if (units) {
        set_units = true;
        if (strcmp(units, "char") == 0)
            b->units = LIPI_UNITS_CHAR;
        else if (strcmp(units, "byte") == 0)
            b->units = LIPI_UNITS_BYTE;
        else {
            PyErr_Format(PyExc_ValueError, "units must be 'char' or 'byte', not '%s'", units);
            goto done;
        }
    }
    if (unigram && set_units) {
        PyErr_SetString(PyExc_ValueError, "units is for type='bpe'");
        goto done;
    }
    if (!unigram && u->sample) {
        PyErr_SetString(PyExc_ValueError, "sample is for type='unigram'");
        goto done;
    }
    if (balance) {
        if (strcmp(balance, "none") == 0)
            job.balance = LIPI_BALANCE_NONE;
        else if (strcmp(balance, "smoothed") == 0)
            job.balance = LIPI_BALANCE_SMOOTHED;
        else if (strcmp(balance, "parity") == 0)
            job.balance = LIPI_BALANCE_PARITY;
        else {
            PyErr_Format(PyExc_ValueError, "balance must be 'none', 'smoothed' or 'parity', not '%s'", balance);
            goto done;
        }
    }
    if (opt_str(d, "dev", &job.dev) < 0)
        goto done;
    if (job.balance == LIPI_BALANCE_PARITY && !job.dev) {
        PyErr_SetString(PyExc_ValueError, "balance='parity' needs dev= (line-aligned dev files)");
        goto done;
    }
    PyObject *lf = opt_get(d, "lang_files");
    if (lf) {
        if (!PyDict_Check(lf)) {
            PyErr_SetString(PyExc_TypeError, "lang_files must be a dict {language: path}");
            goto done;
        }
        PyObject *keys = PyDict_Keys(lf), *vals = PyDict_Values(lf);
        int ok = keys && vals && path_list_get(keys, "lang_files", &langs) == 0 &&
                 path_list_get(vals, "lang_files", &lang_files) == 0;
        Py_XDECREF(keys);
        Py_XDECREF(vals);
        if (!ok)
            goto done;
        job.lang_names = langs.p;
        job.lang_files = lang_files.p;
        job.n_lang_files = langs.n;
    }
    PyObject *sp = opt_get(d, "special_tokens");
    if (sp) {
        special_keep = PySequence_Fast(sp, "special_tokens must be a list of str");
        if (!special_keep)
            goto done;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(special_keep);
        specials = PyMem_Calloc((size_t)n + 1, sizeof *specials);
        if (!specials) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *s = PySequence_Fast_GET_ITEM(special_keep, i);
            if (!PyUnicode_Check(s) || !(specials[i] = PyUnicode_AsUTF8(s))) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "special_tokens must be a list of str");
                goto done;
            }
        }
        b->common.special_tokens = specials;
        b->common.n_special = (size_t)n;
    }
    job.type = unigram ? LIPI_TRAIN_UNIGRAM : LIPI_TRAIN_BPE;
    job.files = files.p;
    job.n_files = files.n;
    job.counts_files = counts.p;
    job.n_counts_files = counts.n;
    job.count.threads = b->common.threads = threads;
    b->parity_exponent = pexp;
    lipi_train_job_share_options(&job, (set_cov ? LIPI_TRAIN_SET_COVERAGE : 0) |
                                           (set_maxlen ? LIPI_TRAIN_SET_MAX_LENGTH : 0) |
                                           (set_pexp ? LIPI_TRAIN_SET_PARITY_EXPONENT : 0));
    if (opt_double(d, "parity_mass", &u->parity_mass) < 0 ||
        opt_double(d, "parity_others", &u->parity_others) < 0)
        goto done;
    lipi_normalizer *norm;
    lipi_pretokenizer *pre;
    lipi_tokenizer *tok = NULL;
    lipi_error err = {0};
    lipi_status st = train_text(d, unigram, &norm, &pre, &err);
    if (st != LIPI_OK) {
        if (!PyErr_Occurred())
            raise_lipi(st, &err);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    st = lipi_train(&job, norm, pre, &tok, &err);
    Py_END_ALLOW_THREADS
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto done;
    }
    result = tokenizer_wrap(cls, tok);
done:
    path_list_free(&files);
    path_list_free(&counts);
    path_list_free(&langs);
    path_list_free(&lang_files);
    PyMem_Free(specials);
    Py_XDECREF(special_keep);
    return result;
}

/* ======================================================================== */
/* Inflation report                                                          */
/* ======================================================================== */

/* _inflation(tokenizers, parallel, reference, text, fmt, threads, invalid)
 * -> str: the report in "json" or "html", as `lipi inflation` writes it. */
static PyObject *mod_inflation(PyObject *self, PyObject *args)
{
    PyObject *toks_o, *par_o, *text_o, *threads_o;
    const char *reference, *fmt_name, *inval;
    if (!PyArg_ParseTuple(args, "OOzOsOs:_inflation", &toks_o, &par_o, &reference, &text_o,
                          &fmt_name, &threads_o, &inval))
        return NULL;
    long threads = threads_arg(threads_o, 64);
    if (threads < 0)
        return NULL;
    lipi_invalid_mode mode = strcmp(inval, "replace") == 0 ? LIPI_INVALID_REPLACE : LIPI_INVALID_ERROR;
    path_list toks = {0}, par = {0};
    PyObject *text_b = NULL, *result = NULL;
    lipi_error err = {0};
    lipi_status st = LIPI_OK;
    lipi_inflation_format fmt;
    lipi_inflation_tokenizers *ts = NULL;
    lipi_parallel_files *files = NULL;
    lipi_inflation_report *rep = NULL;
    char *buf = NULL;
    size_t len = 0;
    if (path_list_get(toks_o, "tokenizers", &toks) < 0)
        goto done;
    if (text_o != Py_None ? !(text_b = path_bytes(text_o)) : path_list_get(par_o, "parallel", &par) < 0)
        goto done;
    if (!toks.n) {
        PyErr_SetString(PyExc_ValueError, "give at least one tokenizer");
        goto done;
    }
    if ((st = lipi_inflation_format_parse(fmt_name, &fmt, &err)) != LIPI_OK)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    st = lipi_inflation_tokenizers_open(toks.p, toks.n, (size_t)threads, &ts, &err);
    if (st == LIPI_OK) {
        const char *const *labels = lipi_inflation_tokenizers_labels(ts);
        if (text_b) {
            const char *one[1] = {PyBytes_AS_STRING(text_b)};
            if ((st = lipi_parallel_files_open(one, 1, NULL, mode, &files, &err)) == LIPI_OK)
                st = lipi_inflation_new_text(labels, toks.n, &rep, &err);
        } else if ((st = lipi_parallel_files_open(par.p, par.n, reference, mode, &files, &err)) ==
                   LIPI_OK) {
            st = lipi_inflation_new_parallel(ts, files, &rep, &err);
        }
        if (st == LIPI_OK)
            st = lipi_inflation_measure(rep, ts, files, (size_t)threads, &err);
        if (st == LIPI_OK) {
            FILE *f = open_memstream(&buf, &len);
            if (!f)
                st = lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            else {
                st = lipi_inflation_write(rep, fmt, f, &err);
                if (fclose(f) != 0 && st == LIPI_OK)
                    st = lipi_error_set(&err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
            }
        }
    }
    Py_END_ALLOW_THREADS
fail:
    if (st != LIPI_OK)
        raise_lipi(st, &err);
    else
        result = PyUnicode_DecodeUTF8(buf ? buf : "", (Py_ssize_t)len, "strict");
done:
    free(buf);
    lipi_inflation_free(rep);
    lipi_parallel_files_close(files);
    lipi_inflation_tokenizers_free(ts);
    path_list_free(&toks);
    path_list_free(&par);
    Py_XDECREF(text_b);
    return result;
}

/* ======================================================================== */
/* Embedder                                                                  */
/* ======================================================================== */

typedef struct {
    PyObject_HEAD
    lipi_embedder *e;
    size_t threads, batch;
    pthread_mutex_t lock; /* guards the session pool */
    lipi_embedder_session **pool;
    size_t n_pool, cap_pool;
} EmbedderObject;

static void Embedder_dealloc(EmbedderObject *m)
{
    for (size_t i = 0; i < m->n_pool; i++)
        lipi_embedder_session_free(m->pool[i]);
    free(m->pool);
    lipi_embedder_free(m->e);
    pthread_mutex_destroy(&m->lock);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static lipi_status emb_take(EmbedderObject *m, lipi_embedder_session **s, lipi_error *err)
{
    *s = NULL;
    pthread_mutex_lock(&m->lock);
    if (m->n_pool)
        *s = m->pool[--m->n_pool];
    pthread_mutex_unlock(&m->lock);
    return *s ? LIPI_OK : lipi_embedder_session_new(m->e, m->threads, s, err);
}

static void emb_give(EmbedderObject *m, lipi_embedder_session *s)
{
    pthread_mutex_lock(&m->lock);
    if (m->n_pool == m->cap_pool) {
        size_t cap = m->cap_pool ? 2 * m->cap_pool : 4;
        lipi_embedder_session **p = realloc(m->pool, cap * sizeof *p);
        if (p) {
            m->pool = p;
            m->cap_pool = cap;
        }
    }
    if (m->n_pool < m->cap_pool) {
        m->pool[m->n_pool++] = s;
        s = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    lipi_embedder_session_free(s);
}

static PyObject *Embedder_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"model", "dtype", "threads", "batch", "normalize", "max_length",
                          "prompt", "prompt_name", "dimensions", "pooling", "revision", NULL};
    PyObject *model, *threads_o = Py_None;
    const char *dtype = "f32", *prompt = NULL, *prompt_name = NULL, *pooling = NULL, *revision = NULL;
    Py_ssize_t batch = 32, max_length = 0, dims = 0;
    int normalize = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sOninzznzz:Embedder", kws, &model, &dtype,
                                     &threads_o, &batch, &normalize, &max_length, &prompt,
                                     &prompt_name, &dims, &pooling, &revision))
        return NULL;
    long threads = threads_arg(threads_o, 256);
    if (threads < 0)
        return NULL;
    if (batch < 1 || max_length < 0 || dims < 0) {
        PyErr_SetString(PyExc_ValueError, "batch must be >= 1, max_length and dimensions >= 0");
        return NULL;
    }
    lipi_embedder_options o = {.batch = (size_t)batch, .normalize = normalize,
                               .max_length = (size_t)max_length, .prompt = prompt,
                               .prompt_name = prompt_name, .dimensions = (size_t)dims,
                               .revision = revision};
    if (strcmp(dtype, "f32") == 0 || strcmp(dtype, "float32") == 0)
        o.dtype = LIPI_DTYPE_F32;
    else if (strcmp(dtype, "int8") == 0)
        o.dtype = LIPI_DTYPE_INT8;
    else {
        PyErr_Format(PyExc_ValueError, "dtype must be 'f32' or 'int8', not '%s'", dtype);
        return NULL;
    }
    if (pooling && !lipi_pooling_parse(pooling, &o.pooling)) {
        PyErr_Format(PyExc_ValueError, "pooling must be cls, mean, max or mean_sqrt_len, not '%s'", pooling);
        return NULL;
    }
    PyObject *mb = path_bytes(model);
    if (!mb)
        return NULL;
    EmbedderObject *m = (EmbedderObject *)type->tp_alloc(type, 0);
    if (!m) {
        Py_DECREF(mb);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    m->threads = (size_t)threads;
    m->batch = (size_t)batch;
    lipi_error err = {0};
    lipi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lipi_embedder_open(PyBytes_AS_STRING(mb), &o, &m->e, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(mb);
    if (st != LIPI_OK) {
        Py_DECREF(m);
        return raise_lipi(st, &err);
    }
    return (PyObject *)m;
}

/* Runs embed (classify = false) or classify over texts, `batch` texts per
 * call as `lipi embed` reads them, so the vectors are its vectors. Returns
 * (Buffer float32 (n * cols), cols). */
static PyObject *emb_run(EmbedderObject *m, PyObject *input, bool classify)
{
    text_list tl;
    if (text_list_get(input, &tl) < 0)
        return NULL;
    size_t cols = classify ? lipi_embedder_label_count(m->e) : lipi_embedder_dim(m->e);
    void *p;
    PyObject *buf = buffer_new(tl.n * cols, 4, "f", &p), *out = NULL;
    const char **texts = PyMem_Malloc((tl.n + 1) * sizeof *texts);
    size_t *lens = PyMem_Malloc((tl.n + 1) * sizeof *lens);
    lipi_embedder_session *s = NULL;
    lipi_error err = {0};
    lipi_status st = LIPI_OK;
    if (!buf || !texts || !lens) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    if (classify && cols == 0) {
        PyErr_SetString(PyExc_ValueError, "this model has no classifier head");
        goto done;
    }
    for (size_t i = 0; i < tl.n; i++) {
        texts[i] = tl.t[i].s;
        lens[i] = tl.t[i].len;
    }
    Py_BEGIN_ALLOW_THREADS
    st = emb_take(m, &s, &err);
    Py_END_ALLOW_THREADS
    for (size_t i = 0; st == LIPI_OK && i < tl.n; i += m->batch) {
        size_t k = tl.n - i < m->batch ? tl.n - i : m->batch;
        float *o = (float *)p + i * cols;
        Py_BEGIN_ALLOW_THREADS
        st = classify ? lipi_embedder_classify(s, texts + i, lens + i, k, o, NULL, &err)
                      : lipi_embedder_embed(s, texts + i, lens + i, k, o, NULL, &err);
        Py_END_ALLOW_THREADS
        if (st != LIPI_OK) {
            if (err.line) {
                lipi_error_prefix(&err, "text %zu", err.line + i);
                err.line = 0;
            }
            break;
        }
        if (PyErr_CheckSignals() < 0)
            goto done;
    }
    if (st != LIPI_OK)
        raise_lipi(st, &err);
    else
        out = Py_BuildValue("(On)", buf, (Py_ssize_t)cols);
done:
    if (s)
        emb_give(m, s);
    Py_XDECREF(buf);
    PyMem_Free(texts);
    PyMem_Free(lens);
    text_list_free(&tl);
    return out;
}

static PyObject *Embedder_embed(EmbedderObject *m, PyObject *input) { return emb_run(m, input, false); }
static PyObject *Embedder_classify(EmbedderObject *m, PyObject *input) { return emb_run(m, input, true); }

static PyObject *Embedder_info(EmbedderObject *m, PyObject *unused)
{
    PyObject *labels = PyList_New((Py_ssize_t)lipi_embedder_label_count(m->e));
    for (size_t i = 0; labels && i < lipi_embedder_label_count(m->e); i++) {
        PyObject *s = PyUnicode_FromString(lipi_embedder_label(m->e, i));
        if (!s) {
            Py_CLEAR(labels);
            break;
        }
        PyList_SET_ITEM(labels, (Py_ssize_t)i, s);
    }
    if (!labels)
        return NULL;
    return Py_BuildValue("{s:n,s:n,s:N,s:O}", "dim", (Py_ssize_t)lipi_embedder_dim(m->e),
                         "max_length", (Py_ssize_t)lipi_embedder_max_length(m->e), "labels", labels,
                         "normalizes", lipi_embedder_normalizes(m->e) ? Py_True : Py_False);
}

static PyMethodDef Embedder_methods[] = {
    {"embed", (PyCFunction)Embedder_embed, METH_O, "embed(texts) -> (Buffer, dim)"},
    {"classify", (PyCFunction)Embedder_classify, METH_O, "classify(texts) -> (Buffer, labels)"},
    {"info", (PyCFunction)Embedder_info, METH_NOARGS, "info() -> dict"},
    {NULL},
};

static PyTypeObject EmbedderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lipi._lipi.Embedder",
    .tp_basicsize = sizeof(EmbedderObject),
    .tp_dealloc = (destructor)Embedder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A lipi_embedder (the C object behind lipi.Embedder).",
    .tp_methods = Embedder_methods,
    .tp_new = Embedder_tp_new,
};

/* ======================================================================== */
/* Index                                                                     */
/* ======================================================================== */

typedef struct {
    PyObject_HEAD
    lipi_index *idx;
} IndexObject;

static void Index_dealloc(IndexObject *x)
{
    lipi_index_close(x->idx);
    Py_TYPE(x)->tp_free((PyObject *)x);
}

static PyObject *Index_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"path", "faiss_params", "skip_faiss", NULL};
    PyObject *path;
    const char *params = NULL;
    int skip = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|zp:Index", kws, &path, &params, &skip))
        return NULL;
    PyObject *pb = path_bytes(path);
    if (!pb)
        return NULL;
    IndexObject *x = (IndexObject *)type->tp_alloc(type, 0);
    if (!x) {
        Py_DECREF(pb);
        return NULL;
    }
    lipi_index_open_options o = {.skip_faiss = skip, .faiss_params = params};
    lipi_error err = {0};
    lipi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lipi_index_open(PyBytes_AS_STRING(pb), &o, &x->idx, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    if (st != LIPI_OK) {
        Py_DECREF(x);
        return raise_lipi(st, &err);
    }
    return (PyObject *)x;
}

/* search(queries: writable float32 buffer (nq, dim) C-contiguous, k, exact,
 * threads, normalize, rescore_multiplier, no_rescore, int8_query,
 * binary_query) -> (docs Buffer int64 (nq * k), scores Buffer float32
 * (nq * k)). With normalize the queries are L2-normalized in place first,
 * as `lipi search` does (lipi_vectors_normalize). The last four are `lipi
 * search`'s --rescore-multiplier (0: the default), --no-rescore,
 * --int8-query and --binary-query (None: the default), and as there an
 * error on an index they do not apply to. */
static PyObject *Index_search(IndexObject *x, PyObject *args, PyObject *kw)
{
    static char *kws[] = {"queries", "k", "exact", "threads", "normalize",
                          "rescore_multiplier", "no_rescore", "int8_query", "binary_query", NULL};
    Py_buffer q;
    Py_ssize_t k = 10, mult = 0;
    int exact = 0, normalize = 1, no_rescore = 0;
    const char *int8_query = NULL, *binary_query = NULL;
    PyObject *threads_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "w*|npOpnpzz:search", kws, &q, &k, &exact,
                                     &threads_o, &normalize, &mult, &no_rescore, &int8_query,
                                     &binary_query))
        return NULL;
    lipi_quantization qz = lipi_index_quantization(x->idx);
    size_t dim = lipi_index_dim(x->idx);
    long threads = threads_arg(threads_o, 256);
    PyObject *out = NULL, *docs = NULL, *scores = NULL;
    if (threads < 0)
        goto done;
    if (k < 1) {
        PyErr_SetString(PyExc_ValueError, "k must be at least 1");
        goto done;
    }
    if (mult < 0 || mult > 10000) {
        PyErr_SetString(PyExc_ValueError, "rescore_multiplier must be from 1 to 10000");
        goto done;
    }
    if (int8_query && strcmp(int8_query, "weights") != 0 && strcmp(int8_query, "codes") != 0) {
        PyErr_Format(PyExc_ValueError, "int8_query must be 'weights' or 'codes', not '%s'",
                     int8_query);
        goto done;
    }
    if (binary_query && strcmp(binary_query, "weights") != 0 &&
        strcmp(binary_query, "bits") != 0) {
        PyErr_Format(PyExc_ValueError, "binary_query must be 'weights' or 'bits', not '%s'",
                     binary_query);
        goto done;
    }
    if ((mult || no_rescore || int8_query || binary_query) && exact) {
        PyErr_SetString(PyExc_ValueError, "exact=True searches the float32 vectors: it takes no "
                                          "rescore_multiplier, no_rescore, int8_query or "
                                          "binary_query");
        goto done;
    }
    if (mult && no_rescore) {
        PyErr_SetString(PyExc_ValueError, "give either no_rescore or rescore_multiplier");
        goto done;
    }
    if ((mult || no_rescore) && (qz == LIPI_QUANT_NONE || lipi_index_has_faiss(x->idx))) {
        PyErr_SetString(PyExc_ValueError, "rescore_multiplier and no_rescore need a quantized "
                                          "index (Index.build(..., quantize=...))");
        goto done;
    }
    if (int8_query && qz != LIPI_QUANT_INT8) {
        PyErr_SetString(PyExc_ValueError, "int8_query needs an int8 index (quantize='int8')");
        goto done;
    }
    if (binary_query && qz != LIPI_QUANT_BINARY) {
        PyErr_SetString(PyExc_ValueError, "binary_query needs a binary index (quantize='binary')");
        goto done;
    }
    if (q.len % (Py_ssize_t)(dim * sizeof(float))) {
        PyErr_Format(PyExc_ValueError, "queries must be float32 rows of the index's dimension %zu", dim);
        goto done;
    }
    size_t nq = (size_t)q.len / (dim * sizeof(float));
    void *dp, *sp;
    docs = buffer_new(nq * (size_t)k, 8, "q", &dp);
    scores = buffer_new(nq * (size_t)k, 4, "f", &sp);
    if (!docs || !scores)
        goto done;
    lipi_search_options so = {.threads = (size_t)threads, .exact = exact,
                              .rescore_multiplier = (size_t)mult, .no_rescore = no_rescore,
                              .int8_query_codes = int8_query && strcmp(int8_query, "codes") == 0,
                              .binary_query_bits = binary_query && strcmp(binary_query, "bits") == 0};
    lipi_error err = {0};
    lipi_status st;
    Py_BEGIN_ALLOW_THREADS
    if (normalize) /* in place: the caller passes its own copy */
        lipi_vectors_normalize(q.buf, nq, dim);
    st = lipi_index_search(x->idx, q.buf, nq, dim, (size_t)k, &so, dp, sp, &err);
    Py_END_ALLOW_THREADS
    if (st != LIPI_OK)
        raise_lipi(st, &err);
    else
        out = Py_BuildValue("(OO)", docs, scores);
done:
    Py_XDECREF(docs);
    Py_XDECREF(scores);
    PyBuffer_Release(&q);
    return out;
}

static PyObject *Index_text(IndexObject *x, PyObject *arg)
{
    Py_ssize_t doc = PyNumber_AsSsize_t(arg, PyExc_IndexError);
    if (doc == -1 && PyErr_Occurred())
        return NULL;
    const char *s;
    size_t len;
    lipi_error err = {0};
    lipi_status st = doc < 0 ? lipi_error_set(&err, LIPI_EINVAL, NULL, 0, 0, "no document %zd", doc)
                             : lipi_index_get_text(x->idx, (size_t)doc, &s, &len, &err);
    if (st != LIPI_OK)
        return raise_lipi(st, &err);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "replace");
}

static PyObject *Index_info(IndexObject *x, PyObject *unused)
{
    const lipi_index_model *m = lipi_index_get_model(x->idx);
    lipi_quantization qz = lipi_index_quantization(x->idx);
    return Py_BuildValue("{s:n,s:n,s:z,s:z,s:O,s:z,s:z}", "count",
                         (Py_ssize_t)lipi_index_count(x->idx), "dim",
                         (Py_ssize_t)lipi_index_dim(x->idx), "model", m->name, "faiss",
                         lipi_index_faiss_spec(x->idx), "has_faiss",
                         lipi_index_has_faiss(x->idx) ? Py_True : Py_False, "quantization",
                         qz ? lipi_quantization_name(qz) : NULL, "binary_threshold",
                         lipi_binary_threshold_name(lipi_index_binary_threshold(x->idx)));
}

static PyMethodDef Index_methods[] = {
    {"search", (PyCFunction)(void (*)(void))Index_search, METH_VARARGS | METH_KEYWORDS, NULL},
    {"text", (PyCFunction)Index_text, METH_O, "text(doc) -> str: document doc's text."},
    {"info", (PyCFunction)Index_info, METH_NOARGS, NULL},
    {NULL},
};

static PyTypeObject IndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lipi._lipi.Index",
    .tp_basicsize = sizeof(IndexObject),
    .tp_dealloc = (destructor)Index_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An open lipi index (the C object behind lipi.Index).",
    .tp_methods = Index_methods,
    .tp_new = Index_tp_new,
};

/* _index_build(dir, vectors: float32 buffer (n, dim), dim, texts, embedder,
 * faiss, quantize, threads): writes an index as `lipi index` does (atomic:
 * a new folder swapped in by one rename). With an embedder, the index
 * records its model, as `lipi index -m` does. */
/* What lipi_index_create and lipi_index_builder_new take from the Python
 * arguments: the write options (FAISS spec, quantization, threads) and the
 * model identity of `embedder` (a lipi.Embedder or None), its status in
 * *st / *err. -1 with a Python exception for a bad quantization or
 * embedder. */
static int index_setup(const char *faiss, const char *quant, const char *bthr, long threads,
                       PyObject *emb_o, lipi_index_write_options *wo, lipi_index_model *id,
                       char fingerprint[17], lipi_status *st, lipi_error *err)
{
    *wo = (lipi_index_write_options){.faiss_spec = faiss, .threads = (size_t)threads};
    *id = (lipi_index_model){.lipi_version = lipi_version()};
    *st = LIPI_OK;
    if (quant && !lipi_quantization_parse(quant, &wo->quantize)) {
        PyErr_Format(PyExc_ValueError, "quantize must be 'int8' or 'binary', not '%s'", quant);
        return -1;
    }
    if (bthr && !lipi_binary_threshold_parse(bthr, &wo->binary_threshold)) {
        PyErr_Format(PyExc_ValueError, "binary_threshold must be 'mean' or 'zero', not '%s'",
                     bthr);
        return -1;
    }
    if (bthr && wo->quantize != LIPI_QUANT_BINARY) {
        PyErr_SetString(PyExc_ValueError, "binary_threshold goes with quantize='binary'");
        return -1;
    }
    if (emb_o == Py_None)
        return 0;
    if (!PyObject_TypeCheck(emb_o, &EmbedderType)) {
        PyErr_SetString(PyExc_TypeError, "embedder must be a lipi.Embedder or None");
        return -1;
    }
    *st = lipi_embedder_identity(((EmbedderObject *)emb_o)->e, id, fingerprint, err);
    return 0;
}

static PyObject *mod_index_build(PyObject *self, PyObject *args)
{
    PyObject *dir_o, *texts_o, *emb_o, *threads_o;
    Py_buffer v;
    Py_ssize_t dim;
    const char *faiss = NULL, *quant = NULL, *bthr = NULL;
    if (!PyArg_ParseTuple(args, "Oy*nOOzzO|z:_index_build", &dir_o, &v, &dim, &texts_o, &emb_o,
                          &faiss, &quant, &threads_o, &bthr))
        return NULL;
    PyObject *db = NULL, *result = NULL;
    text_list tl = {0};
    const char **texts = NULL;
    size_t *lens = NULL;
    long threads = threads_arg(threads_o, 256);
    if (threads < 0 || !(db = path_bytes(dir_o)))
        goto done;
    if (dim < 1 || v.len % (Py_ssize_t)((size_t)dim * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "vectors must be float32 rows of `dim` values");
        goto done;
    }
    size_t n = (size_t)v.len / ((size_t)dim * sizeof(float));
    if (texts_o != Py_None) {
        if (text_list_get(texts_o, &tl) < 0)
            goto done;
        if (tl.n != n) {
            PyErr_Format(PyExc_ValueError, "%zu texts for %zu vectors", tl.n, n);
            goto done;
        }
        texts = PyMem_Malloc((n + 1) * sizeof *texts);
        lens = PyMem_Malloc((n + 1) * sizeof *lens);
        if (!texts || !lens) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            texts[i] = tl.t[i].s;
            lens[i] = tl.t[i].len;
        }
    }
    lipi_index_write_options wo;
    lipi_index_model id;
    char fingerprint[17];
    lipi_error err = {0};
    lipi_status st;
    if (index_setup(faiss, quant, bthr, threads, emb_o, &wo, &id, fingerprint, &st, &err) < 0)
        goto done;
    if (st == LIPI_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = lipi_index_create(PyBytes_AS_STRING(db), &id, v.buf, n, (size_t)dim, texts, lens, &wo, &err);
        Py_END_ALLOW_THREADS
    }
    if (st != LIPI_OK)
        raise_lipi(st, &err);
    else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    PyMem_Free(texts);
    PyMem_Free(lens);
    text_list_free(&tl);
    Py_XDECREF(db);
    PyBuffer_Release(&v);
    return result;
}

/* ======================================================================== */
/* Module                                                                    */
/* ======================================================================== */

static PyObject *mod_rss(PyObject *self, PyObject *unused)
{
    /* Resident set size in bytes (/proc/self/statm), for the leak test. */
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f || fscanf(f, "%ld %ld", &pages, &rss) != 2) {
        if (f)
            fclose(f);
        PyErr_SetString(PyExc_OSError, "cannot read /proc/self/statm");
        return NULL;
    }
    fclose(f);
    return PyLong_FromLongLong((long long)rss * sysconf(_SC_PAGESIZE));
}

/* lipi.dask's pieces (defined at the end of this file). */
static PyObject *mod_count_to_file(PyObject *self, PyObject *args);
static PyObject *mod_counts_merge_files(PyObject *self, PyObject *args);
static PyObject *mod_read_lines(PyObject *self, PyObject *args);
static PyObject *mod_index_build_from(PyObject *self, PyObject *args);
static PyObject *mod_parallel_files(PyObject *self, PyObject *args);
static PyObject *mod_inflation_counts(PyObject *self, PyObject *args);
static PyObject *mod_count_to_run(PyObject *self, PyObject *args);
static PyObject *mod_counts_merge_runs(PyObject *self, PyObject *args);

static PyMethodDef module_methods[] = {
    {"_train", mod_train, METH_VARARGS, NULL},
    {"_inflation", mod_inflation, METH_VARARGS, NULL},
    {"_index_build", mod_index_build, METH_VARARGS, NULL},
    {"_rss", mod_rss, METH_NOARGS, NULL},
    {"_count_to_file", mod_count_to_file, METH_VARARGS, NULL},
    {"_counts_merge_files", mod_counts_merge_files, METH_VARARGS, NULL},
    {"_read_lines", mod_read_lines, METH_VARARGS, NULL},
    {"_index_build_from", mod_index_build_from, METH_VARARGS, NULL},
    {"_parallel_files", mod_parallel_files, METH_VARARGS, NULL},
    {"_inflation_counts", mod_inflation_counts, METH_VARARGS, NULL},
    {"_count_to_run", mod_count_to_run, METH_VARARGS, NULL},
    {"_counts_merge_runs", mod_counts_merge_runs, METH_VARARGS, NULL},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "lipi._lipi",
    .m_doc = "lipi's C library, bound with the CPython C API (see lipi/__init__.py for the API).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__lipi(void)
{
    PyTypeObject *types[] = {&BufferType, &RowsType, &EncodingType, &TokenizerType, &EmbedderType,
                             &IndexType};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    LipiError = PyErr_NewExceptionWithDoc(
        "lipi.LipiError",
        "An error lipi reported, worded as the command line words it; attributes code\n"
        "('EFORMAT', 'EIO', ...), path, line, offset (bytes) and msg.",
        NULL, NULL);
    if (!LipiError || PyModule_AddObjectRef(m, "LipiError", LipiError) < 0 ||
        PyModule_AddObjectRef(m, "Tokenizer", (PyObject *)&TokenizerType) < 0 ||
        PyModule_AddObjectRef(m, "Encoding", (PyObject *)&EncodingType) < 0 ||
        PyModule_AddObjectRef(m, "Embedder", (PyObject *)&EmbedderType) < 0 ||
        PyModule_AddObjectRef(m, "Index", (PyObject *)&IndexType) < 0 ||
        PyModule_AddStringConstant(m, "version", lipi_version()) < 0 ||
        PyModule_AddIntConstant(m, "has_faiss",
#ifdef LIPI_HAVE_FAISS
                                1
#else
                                0
#endif
                                ) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* ======================================================================== */
/* Counting for lipi.dask: one shard's counts file, and a merge of them      */
/* ======================================================================== */

/* _count_to_file(files, out_path, type, options: dict) -> None: the counts
 * file `lipi count` writes for the files, with the text options lipi.train
 * takes (normalizer, pattern, regex, lowercase, strip_accents, fold_digits;
 * the pattern's default follows `type` as training's does), invalid and
 * threads. The file appears whole or not at all (lipi_counts_save). */
static PyObject *count_to(PyObject *args, bool run)
{
    PyObject *files_o, *out_o, *d, *result = NULL, *ob = NULL;
    const char *type;
    if (!PyArg_ParseTuple(args, run ? "OOsO!:_count_to_run" : "OOsO!:_count_to_file", &files_o,
                          &out_o, &type, &PyDict_Type, &d))
        return NULL;
    path_list files = {0};
    lipi_count_options co;
    lipi_count_options_default(&co);
    long threads = threads_arg(opt_get(d, "threads"), 1024);
    if (threads < 0 || invalid_mode(d, &co.invalid) < 0 || !(ob = path_bytes(out_o)) ||
        path_list_get(files_o, "files", &files) < 0)
        goto done;
    co.threads = (size_t)threads;
    lipi_normalizer *norm = NULL;
    lipi_pretokenizer *pre = NULL;
    lipi_error err = {0};
    lipi_status st = train_text(d, strcmp(type, "unigram") == 0, &norm, &pre, &err);
    if (st == LIPI_OK) {
        Py_BEGIN_ALLOW_THREADS
        if (run) {
            lipi_counts *c = NULL;
            st = lipi_count_files(files.p, files.n, norm, pre, &co, &c, &err);
            if (st == LIPI_OK)
                st = lipi_counts_save_run(c, PyBytes_AS_STRING(ob), &err);
            lipi_counts_free(c);
        } else {
            st = lipi_count_to_file(files.p, files.n, norm, pre, &co, PyBytes_AS_STRING(ob), &err);
        }
        Py_END_ALLOW_THREADS
        lipi_pretokenizer_free(pre);
        lipi_normalizer_free(norm);
    }
    if (st != LIPI_OK) {
        if (!PyErr_Occurred())
            raise_lipi(st, &err);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    path_list_free(&files);
    Py_XDECREF(ob);
    return result;
}

static PyObject *mod_count_to_file(PyObject *self, PyObject *args)
{
    return count_to(args, false);
}

/* _counts_merge_files(paths, out_path) -> None: `lipi count --merge`.
 * _counts_merge_runs(paths, out_path, tsv: bool) -> None: the sum of counts
 * runs, written as a run or (tsv) as the counts file `lipi count` writes. */
static PyObject *merge_to(PyObject *args, bool runs)
{
    PyObject *paths_o, *out_o, *ob = NULL, *result = NULL;
    int tsv = 1;
    if (runs ? !PyArg_ParseTuple(args, "OOp:_counts_merge_runs", &paths_o, &out_o, &tsv)
             : !PyArg_ParseTuple(args, "OO:_counts_merge_files", &paths_o, &out_o))
        return NULL;
    path_list paths = {0};
    if (!(ob = path_bytes(out_o)) || path_list_get(paths_o, "paths", &paths) < 0)
        goto done;
    lipi_error err = {0};
    lipi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = runs ? lipi_counts_merge_runs(paths.p, paths.n, PyBytes_AS_STRING(ob), tsv, &err)
              : lipi_counts_merge_files(paths.p, paths.n, PyBytes_AS_STRING(ob), &err);
    Py_END_ALLOW_THREADS
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    path_list_free(&paths);
    Py_XDECREF(ob);
    return result;
}

static PyObject *mod_counts_merge_files(PyObject *self, PyObject *args)
{
    return merge_to(args, false);
}

/* lipi.dask's counting with runs (trainer.h) as its intermediate files:
 * _count_to_run(files, out_path, type, options) is _count_to_file writing
 * a run; _counts_merge_runs is above. */
static PyObject *mod_count_to_run(PyObject *self, PyObject *args)
{
    return count_to(args, true);
}

static PyObject *mod_counts_merge_runs(PyObject *self, PyObject *args)
{
    return merge_to(args, true);
}

/* _read_lines(path, invalid) -> list of str: the file's lines as `lipi
 * embed` reads them (lipi_line_reader: BOM skipped, CRLF ends, UTF-8
 * checked or repaired; .gz/.xz/.zst decompressed). */
static PyObject *mod_read_lines(PyObject *self, PyObject *args)
{
    PyObject *path_o, *pb = NULL, *list = NULL;
    const char *invalid;
    if (!PyArg_ParseTuple(args, "Os:_read_lines", &path_o, &invalid))
        return NULL;
    lipi_invalid_mode mode = LIPI_INVALID_ERROR;
    if (strcmp(invalid, "replace") == 0)
        mode = LIPI_INVALID_REPLACE;
    else if (strcmp(invalid, "error") != 0) {
        PyErr_Format(PyExc_ValueError, "invalid must be 'error' or 'replace', not '%s'", invalid);
        return NULL;
    }
    if (!(pb = path_bytes(path_o)) || !(list = PyList_New(0)))
        goto fail;
    lipi_line_reader *r = NULL;
    lipi_error err = {0};
    lipi_status st = lipi_line_reader_open(PyBytes_AS_STRING(pb), mode, &r, &err);
    while (st == LIPI_OK) {
        const char *line;
        size_t len;
        Py_BEGIN_ALLOW_THREADS
        st = lipi_line_reader_next(r, &line, &len, &err);
        Py_END_ALLOW_THREADS
        if (st != LIPI_OK || !line)
            break;
        PyObject *u = PyUnicode_DecodeUTF8(line, (Py_ssize_t)len, "strict");
        if (!u || PyList_Append(list, u) < 0) {
            Py_XDECREF(u);
            lipi_line_reader_close(r);
            goto fail;
        }
        Py_DECREF(u);
    }
    lipi_line_reader_close(r);
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto fail;
    }
    Py_DECREF(pb);
    return list;
fail:
    Py_XDECREF(pb);
    Py_XDECREF(list);
    return NULL;
}

/* _index_build_from(dir, dim, chunks, embedder, faiss, quantize, threads)
 * -> int (documents): an index written as `lipi index` writes it, from an
 * iterable of (vectors: float32 buffer (n, dim), texts: list of n str)
 * taken one at a time (a builder appending each), so only one chunk is in
 * memory. Nothing at dir changes unless every chunk was added (commit);
 * an error, of lipi's or raised by the iterable, aborts. */
static PyObject *mod_index_build_from(PyObject *self, PyObject *args)
{
    PyObject *dir_o, *chunks_o, *emb_o, *threads_o, *db = NULL, *it = NULL, *item = NULL;
    Py_ssize_t dim;
    const char *faiss = NULL, *quant = NULL;
    if (!PyArg_ParseTuple(args, "OnOOzzO:_index_build_from", &dir_o, &dim, &chunks_o, &emb_o,
                          &faiss, &quant, &threads_o))
        return NULL;
    long threads = threads_arg(threads_o, 256);
    if (threads < 0 || !(db = path_bytes(dir_o)))
        goto fail;
    if (dim < 1) {
        PyErr_SetString(PyExc_ValueError, "dim must be positive");
        goto fail;
    }
    lipi_index_write_options wo;
    lipi_index_model id;
    char fingerprint[17];
    lipi_error err = {0};
    lipi_status st;
    if (index_setup(faiss, quant, NULL, threads, emb_o, &wo, &id, fingerprint, &st, &err) < 0)
        goto fail;
    if (!(it = PyObject_GetIter(chunks_o)))
        goto fail;
    lipi_index_builder *b = NULL;
    if (st == LIPI_OK)
        st = lipi_index_builder_new(PyBytes_AS_STRING(db), &id, (size_t)dim, &wo, &b, &err);
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto fail;
    }
    while ((item = PyIter_Next(it))) {
        Py_buffer v;
        PyObject *texts_o;
        if (!PyArg_ParseTuple(item, "y*O:chunk", &v, &texts_o))
            goto abort;
        text_list tl = {0};
        size_t n = (size_t)v.len / ((size_t)dim * sizeof(float));
        const char **texts = NULL;
        size_t *lens = NULL;
        int ok = 0;
        if (v.len % (Py_ssize_t)((size_t)dim * sizeof(float)))
            PyErr_SetString(PyExc_ValueError, "vectors must be float32 rows of `dim` values");
        else if (text_list_get(texts_o, &tl) == 0) {
            if (tl.n != n)
                PyErr_Format(PyExc_ValueError, "%zu texts for %zu vectors", tl.n, n);
            else if (!(texts = PyMem_Malloc((n + 1) * sizeof *texts)) ||
                     !(lens = PyMem_Malloc((n + 1) * sizeof *lens)))
                PyErr_NoMemory();
            else {
                for (size_t i = 0; i < n; i++) {
                    texts[i] = tl.t[i].s;
                    lens[i] = tl.t[i].len;
                }
                Py_BEGIN_ALLOW_THREADS
                st = lipi_index_builder_add(b, v.buf, n, texts, lens, &err);
                Py_END_ALLOW_THREADS
                if (st != LIPI_OK)
                    raise_lipi(st, &err);
                else
                    ok = 1;
            }
        }
        PyMem_Free(texts);
        PyMem_Free(lens);
        text_list_free(&tl);
        PyBuffer_Release(&v);
        Py_CLEAR(item);
        if (!ok)
            goto abort;
    }
    if (PyErr_Occurred())
        goto abort;
    size_t count = lipi_index_builder_count(b);
    Py_BEGIN_ALLOW_THREADS
    st = lipi_index_builder_commit(b, &err);
    Py_END_ALLOW_THREADS
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto fail;
    }
    Py_DECREF(it);
    Py_DECREF(db);
    return PyLong_FromSize_t(count);
abort:
    lipi_index_builder_abort(b);
fail:
    Py_XDECREF(item);
    Py_XDECREF(it);
    Py_XDECREF(db);
    return NULL;
}

/* _parallel_files(paths, reference, invalid) -> (files, reference, lines):
 * the parallel set as lipi_parallel_files_open takes it (folders listed,
 * line counts checked): files a list of (label, path) in label order,
 * reference the index of the reference file, lines the lines per file. */
static PyObject *mod_parallel_files(PyObject *self, PyObject *args)
{
    PyObject *paths_o, *result = NULL, *list = NULL;
    const char *reference, *inval;
    if (!PyArg_ParseTuple(args, "Ozs:_parallel_files", &paths_o, &reference, &inval))
        return NULL;
    lipi_invalid_mode mode = strcmp(inval, "replace") == 0 ? LIPI_INVALID_REPLACE : LIPI_INVALID_ERROR;
    path_list par = {0};
    lipi_parallel_files *files = NULL;
    lipi_error err = {0};
    lipi_status st;
    if (path_list_get(paths_o, "parallel", &par) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = lipi_parallel_files_open(par.p, par.n, reference, mode, &files, &err);
    Py_END_ALLOW_THREADS
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto done;
    }
    size_t n = lipi_parallel_files_count(files);
    if (!(list = PyList_New((Py_ssize_t)n)))
        goto done;
    for (size_t i = 0; i < n; i++) {
        PyObject *item = Py_BuildValue("(sN)", lipi_parallel_files_label(files, i),
                                       PyUnicode_DecodeFSDefault(lipi_parallel_files_path(files, i)));
        if (!item)
            goto done;
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    result = Py_BuildValue("(OnK)", list, (Py_ssize_t)lipi_parallel_files_reference(files),
                           (unsigned long long)lipi_parallel_files_lines(files));
done:
    Py_XDECREF(list);
    lipi_parallel_files_close(files);
    path_list_free(&par);
    return result;
}

/* _inflation_counts(tokenizers, parallel, reference, threads, invalid) ->
 * dict: the inflation report's counts before any ratio, which add up
 * across shards of the lines: {"tokenizers": [labels], "languages":
 * [labels], "reference": index, "skipped": n, "cells": [[(lines, tokens,
 * words, chars, bytes, continued_words, unknown_tokens,
 * byte_fallback_tokens, unknown_chars, boundaries, split_boundaries) per
 * language] per tokenizer]}. */
static PyObject *mod_inflation_counts(PyObject *self, PyObject *args)
{
    PyObject *toks_o, *par_o, *threads_o, *result = NULL;
    const char *reference, *inval;
    if (!PyArg_ParseTuple(args, "OOzOs:_inflation_counts", &toks_o, &par_o, &reference,
                          &threads_o, &inval))
        return NULL;
    long threads = threads_arg(threads_o, 64);
    if (threads < 0)
        return NULL;
    lipi_invalid_mode mode = strcmp(inval, "replace") == 0 ? LIPI_INVALID_REPLACE : LIPI_INVALID_ERROR;
    path_list toks = {0}, par = {0};
    lipi_error err = {0};
    lipi_status st = LIPI_OK;
    lipi_inflation_tokenizers *ts = NULL;
    lipi_parallel_files *files = NULL;
    lipi_inflation_report *rep = NULL;
    if (path_list_get(toks_o, "tokenizers", &toks) < 0 || path_list_get(par_o, "parallel", &par) < 0)
        goto done;
    if (!toks.n) {
        PyErr_SetString(PyExc_ValueError, "give at least one tokenizer");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    st = lipi_inflation_tokenizers_open(toks.p, toks.n, (size_t)threads, &ts, &err);
    if (st == LIPI_OK)
        st = lipi_parallel_files_open(par.p, par.n, reference, mode, &files, &err);
    if (st == LIPI_OK)
        st = lipi_inflation_new_parallel(ts, files, &rep, &err);
    if (st == LIPI_OK)
        st = lipi_inflation_measure(rep, ts, files, (size_t)threads, &err);
    Py_END_ALLOW_THREADS
    if (st != LIPI_OK) {
        raise_lipi(st, &err);
        goto done;
    }
    size_t n_lang = lipi_parallel_files_count(files);
    PyObject *tl = PyList_New(0), *ll = PyList_New(0), *cells = PyList_New(0);
    int ok = tl && ll && cells;
    for (size_t t = 0; ok && t < toks.n; t++) {
        PyObject *row = PyList_New(0), *name = PyUnicode_FromString(lipi_inflation_tokenizer_name(rep, t));
        ok = row && name && PyList_Append(tl, name) == 0 && PyList_Append(cells, row) == 0;
        for (size_t l = 0; ok && l < n_lang; l++) {
            lipi_inflation_row r;
            lipi_inflation_get_row(rep, t, l, &r);
            PyObject *c = Py_BuildValue("(KKKKKKKKKKK)", (unsigned long long)r.lines,
                                        (unsigned long long)r.tokens, (unsigned long long)r.words,
                                        (unsigned long long)r.chars, (unsigned long long)r.bytes,
                                        (unsigned long long)r.continued_words,
                                        (unsigned long long)r.unknown_tokens,
                                        (unsigned long long)r.byte_fallback_tokens,
                                        (unsigned long long)r.unknown_chars,
                                        (unsigned long long)r.boundaries,
                                        (unsigned long long)r.split_boundaries);
            ok = c && PyList_Append(row, c) == 0;
            Py_XDECREF(c);
        }
        Py_XDECREF(row);
        Py_XDECREF(name);
    }
    for (size_t l = 0; ok && l < n_lang; l++) {
        PyObject *name = PyUnicode_FromString(lipi_parallel_files_label(files, l));
        ok = name && PyList_Append(ll, name) == 0;
        Py_XDECREF(name);
    }
    if (ok)
        result = Py_BuildValue("{sOsOsnsKsO}", "tokenizers", tl, "languages", ll, "reference",
                               (Py_ssize_t)lipi_parallel_files_reference(files), "skipped",
                               (unsigned long long)lipi_parallel_files_skipped(files), "cells", cells);
    Py_XDECREF(tl);
    Py_XDECREF(ll);
    Py_XDECREF(cells);
done:
    lipi_inflation_free(rep);
    lipi_parallel_files_close(files);
    lipi_inflation_tokenizers_free(ts);
    path_list_free(&toks);
    path_list_free(&par);
    return result;
}

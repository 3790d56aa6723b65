/* Line-aligned parallel files (contract in tokenizer.h): listing, labels,
 * the reference, record-count checks and reading aligned records in
 * batches. A corpus reader beside the record reader it is made of, so the
 * inflation report and the trainer's parity dev set share it. Records are
 * lines unless the caller asks for JSONL, whole files or NUL-separated
 * texts; "line" below means one aligned record. */
#include "tokenizer/base.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

struct lipi_parallel_files {
    size_t n;
    char **paths, **labels; /* sorted by label */
    lipi_record_reader **readers;
    size_t reference;
    lipi_record_options ro; /* text_field borrowed from the caller */
    uint64_t lines;   /* lines per file */
    uint64_t line_no; /* lines read so far from each file */
    uint64_t skipped;
};

/* One aligned line of one language inside a batch buffer. */
typedef struct {
    size_t start, len;
} batch_span;

typedef struct {
    size_t n_lang;
    lipi_buf *text;    /* one buffer per language */
    batch_span *spans; /* spans[i * n_lang + lang] */
    size_t cap;        /* lines the spans and line_no arrays hold */
} batch_priv;

static lipi_status oom(lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
}

/* What the files hold, for messages: lines, or records of another kind. */
static const char *unit(const lipi_parallel_files *p, uint64_t n)
{
    return p->ro.format == LIPI_RECORDS_LINES ? lipi_plural(n, "line", "lines")
                                              : lipi_plural(n, "record", "records");
}

/* ------------------------------------------------------------------------ */
/* Listing                                                                   */
/* ------------------------------------------------------------------------ */

static bool has_suffix(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* Length of the compression suffix the line reader understands, or 0. */
static size_t compression_suffix(const char *name, size_t len)
{
    static const char *const sfx[] = {".gz", ".xz", ".zst"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
        if (has_suffix(name, len, sfx[i]) && len > strlen(sfx[i]))
            return strlen(sfx[i]);
    return 0;
}

/* Label of a path: file name without folders, compression suffix and
 * extension. A name that is only an extension (".txt") keeps it. */
static char *label_of(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    len -= compression_suffix(base, len);
    for (size_t i = len; i > 1; i--)
        if (base[i - 1] == '.') {
            len = i - 1;
            break;
        }
    return lipi_strndup(base, len);
}

/* Files a folder contributes: *.txt, *.dev, *.devtest, *.test, *.valid
 * (and *.jsonl when reading JSONL), optionally compressed. */
static bool wanted_in_folder(const char *name, lipi_record_format format)
{
    static const char *const ext[] = {".txt", ".dev", ".devtest", ".test", ".valid", ".jsonl"};
    size_t n_ext = sizeof ext / sizeof ext[0] - (format != LIPI_RECORDS_JSONL);
    if (name[0] == '.')
        return false;
    size_t len = strlen(name);
    len -= compression_suffix(name, len);
    for (size_t i = 0; i < n_ext; i++)
        if (has_suffix(name, len, ext[i]) && len > strlen(ext[i]))
            return true;
    return false;
}

static lipi_status push_path(lipi_parallel_files *p, size_t *cap, const char *dir,
                             const char *name, lipi_error *err)
{
    void *v = p->paths;
    size_t cap2 = *cap;
    if (lipi_grow(&v, &cap2, p->n + 1, sizeof *p->paths) != LIPI_OK)
        return oom(err);
    p->paths = v;
    v = p->labels;
    if (lipi_grow(&v, cap, p->n + 1, sizeof *p->labels) != LIPI_OK)
        return oom(err);
    p->labels = v;
    size_t dl = dir ? strlen(dir) : 0, nl = strlen(name);
    bool slash = dl && dir[dl - 1] != '/';
    char *path = lipi_malloc(dl + slash + nl + 1);
    if (!path)
        return oom(err);
    if (dl)
        memcpy(path, dir, dl);
    if (slash)
        path[dl] = '/';
    memcpy(path + dl + slash, name, nl + 1);
    char *label = label_of(path);
    if (!label) {
        lipi_free(path);
        return oom(err);
    }
    p->paths[p->n] = path;
    p->labels[p->n] = label;
    p->n++;
    return LIPI_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static lipi_status list_folder(lipi_parallel_files *p, size_t *cap, const char *dir,
                               lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char **names = NULL;
    size_t n = 0, ncap = 0;
    DIR *d = opendir(dir);
    if (!d)
        return lipi_error_set(err, LIPI_EIO, dir, 0, 0, "cannot open the folder: %s",
                              strerror(errno));
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (!wanted_in_folder(e->d_name, p->ro.format))
            continue;
        void *v = names;
        if (lipi_grow(&v, &ncap, n + 1, sizeof *names) != LIPI_OK) {
            st = oom(err);
            goto done;
        }
        names = v;
        names[n] = lipi_strndup(e->d_name, strlen(e->d_name));
        if (!names[n]) {
            st = oom(err);
            goto done;
        }
        n++;
    }
    /* readdir order depends on the file system: sort for a stable report. */
    if (n)
        qsort(names, n, sizeof *names, compare_names);
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        size_t before = p->n;
        TRY(push_path(p, cap, dir, names[i], err));
        struct stat sb;
        if (stat(p->paths[before], &sb) != 0 || !S_ISREG(sb.st_mode)) {
            lipi_free(p->paths[before]);
            lipi_free(p->labels[before]);
            p->n--;
            continue;
        }
        added++;
    }
    if (added == 0)
        st = lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                            "expected *.txt, *.dev, *.devtest, *.test or *.valid files in the "
                            "folder, found none");
done:
    for (size_t i = 0; i < n; i++)
        lipi_free(names[i]);
    lipi_free(names);
    closedir(d);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

static lipi_status count_lines(const char *path, const lipi_record_options *ro,
                               uint64_t *lines, lipi_error *err)
{
    lipi_record_reader *r = NULL;
    lipi_status st = lipi_record_reader_open(path, ro, &r, err);
    uint64_t n = 0;
    while (st == LIPI_OK) {
        lipi_record rec;
        st = lipi_record_reader_next(r, &rec, err);
        if (st != LIPI_OK || !rec.text)
            break;
        n++;
    }
    lipi_record_reader_close(r);
    *lines = n;
    return st;
}

/* Sorts files by label (then path) so the order does not depend on how the
 * files were named on the command line. */
static void sort_by_label(lipi_parallel_files *p)
{
    for (size_t i = 1; i < p->n; i++) {
        char *path = p->paths[i], *label = p->labels[i];
        size_t j = i;
        while (j > 0) {
            int c = strcmp(label, p->labels[j - 1]);
            if (c > 0 || (c == 0 && strcmp(path, p->paths[j - 1]) >= 0))
                break;
            p->paths[j] = p->paths[j - 1];
            p->labels[j] = p->labels[j - 1];
            j--;
        }
        p->paths[j] = path;
        p->labels[j] = label;
    }
}

static lipi_status pick_reference(lipi_parallel_files *p, const char *reference,
                                  lipi_error *err)
{
    static const char *const defaults[] = {"eng_Latn", "eng", "en"};
    if (!reference && p->n == 1) {
        p->reference = 0;
        return LIPI_OK;
    }
    for (size_t d = 0; d < (reference ? 1 : sizeof defaults / sizeof defaults[0]); d++) {
        const char *want = reference ? reference : defaults[d];
        for (size_t i = 0; i < p->n; i++)
            if (strcmp(p->labels[i], want) == 0) {
                p->reference = i;
                return LIPI_OK;
            }
    }
    char list[160] = "";
    size_t used = 0;
    for (size_t i = 0; i < p->n && used + 4 < sizeof list; i++) {
        int k = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", p->labels[i]);
        used += k > 0 ? (size_t)k : 0;
    }
    if (used >= sizeof list - 1)
        memcpy(list + sizeof list - 4, "...", 4);
    if (reference)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "reference: expected one of %s, found \"%s\"", list, reference);
    return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                          "reference: expected a file named eng_Latn, eng or en (or a reference "
                          "name), found %s",
                          list);
}

lipi_status lipi_parallel_files_open(const char *const *paths, size_t n_paths,
                                         const char *reference, lipi_invalid_mode mode,
                                         lipi_parallel_files **out, lipi_error *err)
{
    const lipi_record_options lines = {.format = LIPI_RECORDS_LINES, .invalid = mode};
    return lipi_parallel_files_open_records(paths, n_paths, reference, &lines, out, err);
}

lipi_status lipi_parallel_files_open_records(const char *const *paths, size_t n_paths,
                                             const char *reference,
                                             const lipi_record_options *ro,
                                             lipi_parallel_files **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    uint64_t *counts = NULL;
    if (!out || (n_paths && !paths))
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected paths and an output");
    if (n_paths == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "expected parallel files or a folder, found none");
    lipi_parallel_files *p = lipi_calloc(1, sizeof *p);
    if (!p)
        return oom(err);
    if (ro)
        p->ro = *ro;
    size_t cap = 0;
    for (size_t i = 0; i < n_paths; i++) {
        struct stat sb;
        if (!paths[i] || strcmp(paths[i], "-") == 0) {
            st = lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                                "expected parallel files, found standard input (it can be read "
                                "only once)");
            goto done;
        }
        if (stat(paths[i], &sb) != 0) {
            st = lipi_error_set(err, LIPI_EIO, paths[i], 0, 0, "cannot open: %s",
                                strerror(errno));
            goto done;
        }
        if (S_ISDIR(sb.st_mode))
            TRY(list_folder(p, &cap, paths[i], err));
        else
            TRY(push_path(p, &cap, NULL, paths[i], err));
    }
    sort_by_label(p);
    for (size_t i = 1; i < p->n; i++)
        if (strcmp(p->labels[i], p->labels[i - 1]) == 0) {
            st = lipi_error_set(err, LIPI_EINVAL, p->paths[i], 0, 0,
                                "expected one file per language, found \"%s\" also in %s",
                                p->labels[i], p->paths[i - 1]);
            goto done;
        }
    TRY(pick_reference(p, reference, err));

    counts = lipi_calloc(p->n, sizeof *counts);
    p->readers = lipi_calloc(p->n, sizeof *p->readers);
    if (!counts || !p->readers) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; i < p->n; i++)
        TRY(count_lines(p->paths[i], &p->ro, &counts[i], err));
    p->lines = counts[p->reference];
    for (size_t i = 0; i < p->n; i++)
        if (counts[i] != p->lines) {
            st = lipi_error_set(err, LIPI_EFORMAT, p->paths[i], 0, 0,
                                "%s has %" PRIu64 " %s but %s has %" PRIu64
                                ": expected %s files",
                                p->paths[i], counts[i], unit(p, counts[i]),
                                p->paths[p->reference], p->lines,
                                p->ro.format == LIPI_RECORDS_LINES ? "line-aligned"
                                                                   : "record-aligned");
            goto done;
        }
    for (size_t i = 0; i < p->n; i++)
        TRY(lipi_record_reader_open(p->paths[i], &p->ro, &p->readers[i], err));
    *out = p;
    p = NULL;
done:
    lipi_free(counts);
    lipi_parallel_files_close(p);
    return st;
}

void lipi_parallel_files_close(lipi_parallel_files *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        lipi_free(p->paths[i]);
        lipi_free(p->labels[i]);
        if (p->readers)
            lipi_record_reader_close(p->readers[i]);
    }
    lipi_free(p->paths);
    lipi_free(p->labels);
    lipi_free(p->readers);
    lipi_free(p);
}

size_t lipi_parallel_files_count(const lipi_parallel_files *p)
{
    return p->n;
}

const char *lipi_parallel_files_label(const lipi_parallel_files *p, size_t i)
{
    return i < p->n ? p->labels[i] : NULL;
}

const char *lipi_parallel_files_path(const lipi_parallel_files *p, size_t i)
{
    return i < p->n ? p->paths[i] : NULL;
}

size_t lipi_parallel_files_reference(const lipi_parallel_files *p)
{
    return p->reference;
}

uint64_t lipi_parallel_files_lines(const lipi_parallel_files *p)
{
    return p->lines;
}

uint64_t lipi_parallel_files_skipped(const lipi_parallel_files *p)
{
    return p->skipped;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

static bool blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r\v\f", s[i]) || s[i] == '\0')
            return false;
    return true;
}

static lipi_status batch_prepare(lipi_parallel_batch *b, size_t n_lang, lipi_error *err)
{
    batch_priv *bp = b->priv;
    if (bp && bp->n_lang != n_lang) {
        lipi_parallel_batch_free(b);
        bp = NULL;
    }
    if (!bp) {
        bp = lipi_calloc(1, sizeof *bp);
        if (!bp)
            return oom(err);
        bp->text = lipi_calloc(n_lang, sizeof *bp->text);
        if (!bp->text) {
            lipi_free(bp);
            return oom(err);
        }
        bp->n_lang = n_lang;
        b->priv = bp;
    }
    for (size_t l = 0; l < n_lang; l++)
        bp->text[l].len = 0;
    b->lines = 0;
    b->languages = n_lang;
    return LIPI_OK;
}

/* Makes room for one more line in the batch. */
static lipi_status batch_grow(lipi_parallel_batch *b, lipi_error *err)
{
    batch_priv *bp = b->priv;
    if (b->lines < bp->cap)
        return LIPI_OK;
    size_t cap = bp->cap ? 2 * bp->cap : 64;
    if (cap > SIZE_MAX / bp->n_lang)
        return oom(err);
    void *v = lipi_reallocarray(bp->spans, cap * bp->n_lang, sizeof *bp->spans);
    if (!v)
        return oom(err);
    bp->spans = v;
    v = lipi_reallocarray(b->line_no, cap, sizeof *b->line_no);
    if (!v)
        return oom(err);
    b->line_no = v;
    bp->cap = cap;
    return LIPI_OK;
}

lipi_status lipi_parallel_files_read(lipi_parallel_files *p, size_t max_lines,
                                         lipi_parallel_batch *b, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (!p || !b || max_lines == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0, "expected files, a batch and a size");
    TRY(batch_prepare(b, p->n, err));
    batch_priv *bp = b->priv;
    while (b->lines < max_lines) {
        TRY(batch_grow(b, err));
        size_t ended = 0;
        bool skip = false;
        for (size_t l = 0; l < p->n; l++) {
            lipi_record rec;
            TRY(lipi_record_reader_next(p->readers[l], &rec, err));
            const char *line = rec.text;
            size_t len = rec.len;
            if (!line) {
                ended++;
                continue;
            }
            skip = skip || blank(line, len);
            bp->spans[b->lines * p->n + l] = (batch_span){bp->text[l].len, len};
            if (lipi_buf_append(&bp->text[l], line, len) != LIPI_OK) {
                st = oom(err);
                goto done;
            }
        }
        if (ended == p->n)
            break;
        if (ended) {
            /* The files were counted equal when opened. */
            st = lipi_error_set(err, LIPI_EFORMAT, NULL, 0, 0,
                                "expected %" PRIu64 " %s in every file, found one changed "
                                "while being read",
                                p->lines, unit(p, p->lines));
            goto done;
        }
        p->line_no++;
        if (skip) {
            p->skipped++;
            for (size_t l = 0; l < p->n; l++)
                bp->text[l].len = bp->spans[b->lines * p->n + l].start;
            continue;
        }
        b->line_no[b->lines++] = p->line_no;
    }
done:
    if (st != LIPI_OK)
        b->lines = 0;
    return st;
}

const char *lipi_parallel_batch_line(const lipi_parallel_batch *b, size_t lang, size_t i,
                                      size_t *len)
{
    const batch_priv *bp = b->priv;
    LIPI_ASSERT(bp && lang < bp->n_lang && i < b->lines);
    const batch_span *sp = &bp->spans[i * bp->n_lang + lang];
    *len = sp->len;
    return bp->text[lang].p ? bp->text[lang].p + sp->start : "";
}

void lipi_parallel_batch_free(lipi_parallel_batch *b)
{
    if (!b)
        return;
    batch_priv *bp = b->priv;
    if (bp) {
        for (size_t l = 0; l < bp->n_lang; l++)
            lipi_buf_free(&bp->text[l]);
        lipi_free(bp->text);
        lipi_free(bp->spans);
        lipi_free(bp);
    }
    lipi_free(b->line_no);
    b->priv = NULL;
    b->line_no = NULL;
    b->lines = 0;
}

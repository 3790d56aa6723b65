/* Exports a BPE tokenizer as GPT-2 style vocab.json + merges.txt, the pair
 * of files that Hugging Face's BPE.from_file and most BPE tools read. */
#include "tokenizer/tokenizer_layout.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* Writes s as a JSON string literal (UTF-8 kept, control bytes escaped). */
static void put_json_string(FILE *f, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    putc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
        } else if (c < 0x20) {
            fputs("\\u00", f);
            putc(hex[c >> 4], f);
            putc(hex[c & 15], f);
        } else {
            putc(c, f);
        }
    }
    putc('"', f);
}

/* merges.txt separates the two parts of a merge by one space and ends each
 * merge with a newline, so no token in a merge may hold either. */
static bool merge_safe(lipi_strref t)
{
    return !memchr(t.s, ' ', t.len) && !memchr(t.s, '\n', t.len) && !memchr(t.s, '\r', t.len);
}

lipi_status lipi_tokenizer_export_merges(const lipi_tokenizer *t, const char *dir,
                                         lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_atomic_file vocab = {0}, merges = {0};
    lipi_buf path = {0};
    const lipi_vocab_model *m = &t->model;
    if (m->type != LIPI_MODEL_BPE)
        return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                              "vocab.json + merges.txt need a BPE model");
    for (size_t r = 0; r < m->n_merges; r++) {
        lipi_strref l = m->vocab.tok[m->merges[r].left], rt = m->vocab.tok[m->merges[r].right];
        if (!merge_safe(l) || !merge_safe(rt))
            return lipi_error_set(err, LIPI_EINVAL, dir, 0, 0,
                                  "merge %zu has a token with a space or line break, which "
                                  "merges.txt cannot hold (byte-level vocabularies can: "
                                  "use --units byte, or keep tokenizer.json)", r);
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return lipi_error_set(err, LIPI_EIO, dir, 0, 0, "cannot create the folder: %s",
                              strerror(errno));

    TRY(lipi_buf_append(&path, dir, strlen(dir)));
    TRY(lipi_buf_append(&path, "/vocab.json", 11));
    TRY(lipi_atomic_open(&vocab, path.p, err));
    fputc('{', vocab.f);
    bool first = true;
    for (size_t id = 0; id < m->vocab.n; id++) {
        lipi_strref tok = m->vocab.tok[id];
        if (!tok.s)
            continue;
        if (!first)
            fputc(',', vocab.f);
        first = false;
        put_json_string(vocab.f, tok.s, tok.len);
        fprintf(vocab.f, ":%zu", id);
    }
    fputs("}\n", vocab.f);

    path.len = strlen(dir);
    TRY(lipi_buf_append(&path, "/merges.txt", 11));
    TRY(lipi_atomic_open(&merges, path.p, err));
    fputs("#version: 0.2\n", merges.f);
    for (size_t r = 0; r < m->n_merges; r++) {
        lipi_strref l = m->vocab.tok[m->merges[r].left], rt = m->vocab.tok[m->merges[r].right];
        fwrite(l.s, 1, l.len, merges.f);
        fputc(' ', merges.f);
        fwrite(rt.s, 1, rt.len, merges.f);
        fputc('\n', merges.f);
    }
    TRY(lipi_atomic_commit(&vocab, err));
    TRY(lipi_atomic_commit(&merges, err));
done:
    lipi_atomic_abort(&vocab);
    lipi_atomic_abort(&merges);
    lipi_buf_free(&path);
    if (st == LIPI_ENOMEM && err && err->code != LIPI_ENOMEM)
        lipi_error_set(err, st, dir, 0, 0, "out of memory");
    return st;
}

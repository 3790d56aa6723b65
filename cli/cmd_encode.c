/* `lipi encode`: texts -> token ids, one output line per input record
 * (lines, JSONL objects, whole files or NUL-separated records, read by the
 * library's record reader). Records are read in blocks; a block is cut
 * into tasks of TASK_LINES lines, each encoding its lines
 * (lipi_encode_batch on the thread's session) and formatting them into a
 * buffer of its own; the buffers are then written in order. The output is
 * the same for any number of threads.
 *
 * What runs where: one pool of --threads threads (the calling thread is
 * one of them) runs, for block N, the tasks that encode and format it
 * together with a task writing block N-1's buffers and one reading block
 * N+1 (the record reader checks its UTF-8, so the encoder is told not to
 * check again): no thread waits while another reads or writes, and
 * --threads N uses at most N cores. --threads 1 runs the encoding tasks one
 * after the other on the calling thread, and the reading and writing
 * (there, formatting the ids too) on a second thread (reader_thread). */
#include "cli/cli.h"
#include "cli/options.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "encoder/encoder.h"

static void help(FILE *f)
{
    fprintf(f,
            "Usage: lipi encode -t TOKENIZER [OPTIONS] [FILE...]\n"
            "\n"
            "Encodes each input record (a line by default) into token ids, exactly as\n"
            "Hugging Face tokenizers does with the same tokenizer (one output line per\n"
            "record).\n"
            "\n"
            "Options:\n"
            "  -t, --tokenizer PATH  a tokenizer.json, a model folder, a SentencePiece .model,\n"
            "                        a BERT vocab.txt, a GPT-2 vocab.json / merges.txt, a\n"
            "                        tiktoken file or name (cl100k_base, o200k_base, ...)\n"
            "                        or a GGUF file\n"
            "  --lowercase, --no-lowercase, --strip-accents, --no-strip-accents\n"
            "                        vocab.txt: override what tokenizer_config.json beside\n"
            "                        it (or the file name) says\n"
            "  --pattern REGEX       tiktoken / GGUF: the split pattern, for encodings lipi\n"
            "                        does not know by name\n"
            "  --format FORMAT       ids (default): ids separated by spaces;\n"
            "                        tokens: token strings separated by spaces (a space,\n"
            "                        backslash or control character inside a token is\n"
            "                        written \\x20, \\\\, \\t, \\n, \\r or \\xNN);\n"
            "                        pieces: the text of each token, separated by spaces:\n"
            "                        byte-level tokens as their bytes (\"Ġthe\" -> ␣the),\n"
            "                        SentencePiece's ▁ as a space, WordPiece's ## kept;\n"
            "                        inside a token a space is written ␣, a tab, newline\n"
            "                        or CR \\t, \\n, \\r, a backslash \\\\, a ␣ \\␣, a <\n"
            "                        before 0x \\<, and each byte that is not part of a\n"
            "                        whole UTF-8 character (or is a control byte) <0xNN>;\n"
            "                        jsonl: {\"ids\": [...], \"tokens\": [...],\n"
            "                        \"offsets\": [[start, end], ...]} per line;\n"
            "                        count: the number of ids (--offsets is ignored)\n"
            "  --input KIND          what a record is: lines (default: each line, without\n"
            "                        its \\n or \\r\\n); jsonl (a JSON object per line, the\n"
            "                        text in --text-field; --format jsonl passes its other\n"
            "                        members through); whole (each file is one text,\n"
            "                        newlines and all); nul (records end at NUL bytes)\n"
            "  --text-field NAME     jsonl: the member holding the text (default: text)\n"
            "  --offsets             ids / tokens / pieces: add a tab and the byte offsets\n"
            "                        of each token in the line, START-END separated by spaces\n"
            "  --total               at the end, print to stderr the records, tokens, bytes\n"
            "                        of text (without separators) and tokens per 1,000 bytes\n"
            "  --special POLICY      special tokens written in the text (<|endoftext|>,\n"
            "                        [CLS], ...): allow (default: their ids, as Hugging\n"
            "                        Face does, so lipi's ids equal its ids), text (encode\n"
            "                        them as ordinary text, as tiktoken's encode_ordinary)\n"
            "                        or error (refuse the record, naming it and the token,\n"
            "                        as tiktoken's encode does by default)\n"
            "  --add-special-tokens  add the post-processor's tokens ([CLS] ... [SEP], ...)\n"
            "  --max-length N        truncate to N ids, special tokens included (default:\n"
            "                        the tokenizer file's truncation setting, if any)\n"
            "  --threads N           encode on N threads (default 1)\n"
            "  --invalid MODE        invalid UTF-8: error (default, names file, line and\n"
            "                        byte) or replace (with U+FFFD)\n"
            "  -h, --help            show this help\n"
            "\n"
            "Environment: the tables built from a tokenizer (tries, backtracking tables)\n"
            "are kept in LIPI_CACHE_DIR, else $XDG_CACHE_HOME/lipi, else ~/.cache/lipi,\n"
            "and read from there the next time; LIPI_CACHE=0 turns that off.\n"
            "\n"
            "Example:\n"
            "  echo 'नमस्ते दुनिया' | lipi encode -t tokenizer.json --format tokens\n"
            "  echo 'नमस्ते दुनिया' | lipi encode -t cl100k_base --format pieces\n");
}

/* A block of input records (copied, since the reader reuses its buffer).
 * A JSONL record's other members (lipi_record.extra) follow its text. */
typedef struct {
    char *text;
    size_t len, cap;
    lipi_text *lines;   /* s points into text only after the block is full */
    size_t *off;        /* start of each record in text */
    size_t *line_no;    /* its record number */
    size_t *xlen;       /* length of its extra members after the text */
    size_t n, lcap;
    int file;           /* the lines' file (index into the command's files) */
} block;

static lipi_status block_add(block *b, const char *s, size_t len, const char *x, size_t xlen,
                             size_t line_no)
{
    if (b->n == b->lcap) {
        size_t cap = b->lcap ? b->lcap * 2 : 1024;
        lipi_text *l = lipi_realloc(b->lines, cap * sizeof *l);
        if (!l)
            return LIPI_ENOMEM;
        b->lines = l;
        size_t *o = lipi_realloc(b->off, cap * sizeof *o);
        if (!o)
            return LIPI_ENOMEM;
        b->off = o;
        size_t *ln = lipi_realloc(b->line_no, cap * sizeof *ln);
        if (!ln)
            return LIPI_ENOMEM;
        b->line_no = ln;
        size_t *xl = lipi_realloc(b->xlen, cap * sizeof *xl);
        if (!xl)
            return LIPI_ENOMEM;
        b->xlen = xl;
        b->lcap = cap;
    }
    if (len + xlen < len)
        return LIPI_ENOMEM;
    if (len + xlen > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 1 << 20; /* a block's text, most often */
        while (cap - b->len < len + xlen) {
            if (cap > SIZE_MAX / 2)
                return LIPI_ENOMEM;
            cap *= 2;
        }
        char *t = lipi_realloc(b->text, cap);
        if (!t)
            return LIPI_ENOMEM;
        b->text = t;
        b->cap = cap;
    }
    if (len)
        memcpy(b->text + b->len, s, len);
    b->off[b->n] = b->len;
    b->lines[b->n].len = len;
    b->line_no[b->n] = line_no;
    b->len += len;
    b->xlen[b->n] = xlen;
    if (xlen) {
        memcpy(b->text + b->len, x, xlen);
        b->len += xlen;
    }
    b->n++;
    return LIPI_OK;
}

typedef enum { FMT_IDS, FMT_TOKENS, FMT_JSONL, FMT_COUNT, FMT_PIECES } out_format;

/* ------------------------------------------------------------------------ */
/* Output: each task's lines are formatted into a buffer of its own, written  */
/* with one fwrite per task. stdio locks stdout on every call and printf      */
/* parses its format for every number: per-number calls made --format jsonl  */
/* 1.4x slower (bench/RESULTS.md, `lipi encode`).                             */
/* ------------------------------------------------------------------------ */

#define OUT_MIN (1u << 17) /* at least every single out_room request */
#define OUT_INIT (1u << 20) /* a task's output to begin with: most fit, so the
                               buffers are not copied as they grow (glibc
                               reallocs them on the heap once its mmap
                               threshold has risen) */
#define OUT_PIECE (1u << 14) /* escaped strings go in pieces of this many bytes */
#define OUT_SLACK 64         /* room always asked for: a number and punctuation */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom; /* a growth failed: the contents are lost, report ENOMEM */
} outbuf;

static lipi_status out_init(outbuf *o)
{
    *o = (outbuf){.p = lipi_malloc(OUT_INIT), .cap = OUT_INIT};
    return o->p ? LIPI_OK : LIPI_ENOMEM;
}

/* The slow half of out_room: grows the buffer. When memory runs out the
 * buffer starts again from empty with oom set, so writers never check. */
static char *out_grow(outbuf *o, size_t need)
{
    size_t cap = o->cap * 2 > o->n + need ? o->cap * 2 : o->n + need;
    char *p = cap > o->cap ? lipi_realloc(o->p, cap) : NULL;
    if (p) {
        o->p = p;
        o->cap = cap;
    } else {
        o->oom = true;
        o->n = 0;
    }
    return o->p + o->n;
}

/* Makes room for `need` (at most OUT_MIN) more bytes; returns where they
 * go. Inline: it is asked several times per token. */
static inline char *out_room(outbuf *o, size_t need)
{
    return o->cap - o->n >= need ? o->p + o->n : out_grow(o, need);
}

static void out_lit(outbuf *o, const char *s, size_t len)
{
    memcpy(out_room(o, len), s, len);
    o->n += len;
}
#define OUT_LIT(o, s) out_lit(o, s, sizeof s - 1)

/* Bytes of any length, in pieces. */
static void out_bytes(outbuf *o, const char *s, size_t len)
{
    for (size_t at = 0; at < len; at += OUT_PIECE)
        out_lit(o, s + at, len - at < OUT_PIECE ? len - at : OUT_PIECE);
}

static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324"
                                  "25262728293031323334353637383940414243444546474849"
                                  "50515253545556575859606162636465666768697071727374"
                                  "75767778798081828384858687888990919293949596979899";

/* Writes the last `len` digits of v backwards from end, two per division. */
static inline void fmt_digits(char *end, uint64_t v, size_t len)
{
    while (len >= 2) {
        end -= 2;
        memcpy(end, digit_pairs + 2 * (v % 100), 2);
        v /= 100;
        len -= 2;
    }
    if (len)
        end[-1] = (char)('0' + v % 10);
}

/* Writes v in decimal at p, returns the end. Ids and offsets are most of
 * the output: the length is found first (by comparison, for 32-bit values)
 * so the digits go straight to their place, with 32-bit divisions, and no
 * copy of variable length (a memcpy call per number showed in the
 * profile). */
static inline char *fmt_num(char *p, size_t v)
{
    if (v <= UINT32_MAX) {
        uint32_t u = (uint32_t)v;
        size_t len = u < 10 ? 1 : u < 100 ? 2 : u < 1000 ? 3 : u < 10000 ? 4 : u < 100000 ? 5
                   : u < 1000000 ? 6 : u < 10000000 ? 7 : u < 100000000 ? 8
                   : u < 1000000000 ? 9 : 10;
        char *end = p + len;
        while (u >= 100) {
            end -= 2;
            memcpy(end, digit_pairs + 2 * (u % 100), 2);
            u /= 100;
        }
        if (u >= 10)
            memcpy(end - 2, digit_pairs + 2 * u, 2);
        else
            end[-1] = (char)('0' + u);
        return p + len;
    }
    size_t len = 10;
    for (uint64_t t = 10000000000u; len < 20 && v >= t; t *= 10)
        len++;
    fmt_digits(p + len, v, len);
    return p + len;
}

/* Ids as text, made once per id and kept: an id's decimal digits (at most
 * 7) in the first bytes of a word and their number in its last byte, 0 for
 * an id not made yet. Writing an id is then one 8-byte copy, where
 * fmt_num spent a third of the ids-only formatting. Threads fill entries
 * as they meet them; relaxed atomics make the race benign (both threads
 * store the same word). */
#define ID_TEXT_MAX 10000000u /* ids below have at most 7 digits */
#define ID_TEXT_MIN (1u << 18)  /* --format jsonl writes offsets below this with it too */

typedef struct {
    _Atomic uint64_t *w; /* [n] */
    size_t n;
    char sep;            /* written after each number (0: none); then n <= ID_SEP_MAX */
} id_text;

#define ID_SEP_MAX 1000000u /* 6 digits and the separator fit the word's 7 bytes */

/* The slow half of put_id: makes id's entry when id < t.n, else writes
 * it at p (and the separator), returning the length. */
static __attribute__((noinline)) uint64_t id_text_make(id_text t, char *p, uint32_t id)
{
    char b[16] = {0};
    size_t len = (size_t)(fmt_num(b, id) - b);
    if (t.sep)
        b[len++] = t.sep;
    if (id >= t.n) {
        memcpy(p, b, 16);
        return len;
    }
    uint64_t w;
    b[7] = (char)len;
    memcpy(&w, b, 8);
    atomic_store_explicit(&t.w[id], w, memory_order_relaxed);
    memcpy(p, &w, 8);
    return len;
}

/* Writes id (any 32-bit number) and t.sep at p (16 bytes of room),
 * returns the end. Inlined into every loop: it runs for every id. t is
 * passed by value so that the loop keeps its fields in registers (stores
 * through p may alias anything a pointer reaches). */
static inline __attribute__((always_inline)) char *put_id(id_text t, char *p, uint32_t id)
{
    uint64_t w;
    if (__builtin_expect(id < t.n && (w = atomic_load_explicit(&t.w[id], memory_order_relaxed)),
                         1)) {
        memcpy(p, &w, 8);
        return p + (w >> 56); /* the length byte, overwritten by what follows */
    }
    return p + id_text_make(t, p, id);
}

/* The last number written by put_memo, kept as its digits: an offset that
 * starts where the previous token ended (nearly all) is copied, not made. */
typedef struct {
    size_t v, len; /* len 0: nothing kept */
    uint64_t w;
} num_memo;

/* Writes v at p (8 bytes of room beyond a number's digits), returns the end. */
static inline char *put_memo(char *p, size_t v, num_memo *m)
{
    if (v == m->v && m->len) {
        memcpy(p, &m->w, 8);
        return p + m->len;
    }
    char *e = fmt_num(p, v);
    m->v = v;
    m->len = (size_t)(e - p) <= 8 ? (size_t)(e - p) : 0;
    memcpy(&m->w, p, 8);
    return e;
}

/* A token string in --format tokens: a space, backslash or control
 * character is written \x20, \\, \t, \n, \r or \xNN. Long tokens go in
 * pieces, so no request for room exceeds OUT_MIN. */
static void out_token(outbuf *o, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t at = 0; at < len; at += OUT_PIECE) {
        size_t m = len - at < OUT_PIECE ? len - at : OUT_PIECE;
        char *d = out_room(o, 4 * m), *d0 = d;
        for (size_t i = at; i < at + m; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c > 0x20 && c != '\\' && c != 0x7f) {
                *d++ = (char)c;
                continue;
            }
            *d++ = '\\';
            switch (c) {
            case '\\': *d++ = '\\'; break;
            case '\t': *d++ = 't'; break;
            case '\n': *d++ = 'n'; break;
            case '\r': *d++ = 'r'; break;
            default:
                *d++ = 'x';
                *d++ = hex[c >> 4];
                *d++ = hex[c & 15];
            }
        }
        o->n += (size_t)(d - d0);
    }
}

/* A token's bytes in --format pieces (see the help): readable text, with
 * every byte that is not part of a whole character written <0xNN>, and the
 * few escapes that keep the line unambiguous. Long tokens go in pieces. */
static void out_piece(outbuf *o, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0;
    while (i < len) {
        size_t end = len - i < OUT_PIECE ? len : i + OUT_PIECE;
        char *d = out_room(o, 6 * (end - i) + 8), *d0 = d;
        while (i < end) {
            unsigned char c = (unsigned char)s[i];
            uint32_t cp;
            size_t cl = lipi_utf8_decode(s + i, len - i, &cp);
            if (cl == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
                memcpy(d, "<0x", 3);
                d[3] = hex[c >> 4];
                d[4] = hex[c & 15];
                d[5] = '>';
                d += 6;
                i++;
                continue;
            }
            switch (c) {
            case ' ': memcpy(d, "\xe2\x90\xa3", 3); d += 3; break; /* ␣ */
            case '\\': *d++ = '\\', *d++ = '\\'; break;
            case '\t': *d++ = '\\', *d++ = 't'; break;
            case '\n': *d++ = '\\', *d++ = 'n'; break;
            case '\r': *d++ = '\\', *d++ = 'r'; break;
            case '<':
                if (len - i >= 3 && s[i + 1] == '0' && s[i + 2] == 'x')
                    *d++ = '\\';
                *d++ = '<';
                break;
            default:
                if (cp == 0x2423)
                    *d++ = '\\';
                memcpy(d, s + i, cl);
                d += cl;
            }
            i += cl;
        }
        o->n += (size_t)(d - d0);
    }
}

/* Token `id`'s bytes (lipi_token_bytes) written by out_piece. Its only
 * failure for an id the encoder gave is running out of memory, which the
 * buffer's oom flag reports. */
static void out_piece_id(outbuf *o, lipi_session *s, uint32_t id)
{
    char small[256], *big = NULL;
    size_t n = 0;
    if (lipi_token_bytes(s, id, small, sizeof small, &n, NULL) != LIPI_OK) {
        o->oom = true;
        return;
    }
    if (n >= sizeof small) {
        big = lipi_malloc(n + 1);
        if (!big || lipi_token_bytes(s, id, big, n + 1, &n, NULL) != LIPI_OK) {
            lipi_free(big);
            o->oom = true;
            return;
        }
    }
    out_piece(o, big ? big : small, n);
    lipi_free(big);
}

/* A JSON string's contents at d (6 * len bytes of room), returns its
 * length: copied as it is when nothing needs escaping (nearly every
 * token), so the common case is one pass without branches per byte. */
static const unsigned char json_esc[256] = { /* 1: a control byte, " or \\ */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static inline size_t json_chars(char *d, const char *s, size_t len)
{
    unsigned bad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        d[i] = (char)ch;
        bad |= json_esc[ch];
    }
    return bad ? cli_json_escape(d, s, len) : len;
}

static void out_json_string(outbuf *o, const char *s, size_t len)
{
    OUT_LIT(o, "\"");
    for (size_t at = 0; at < len; at += OUT_PIECE) {
        size_t m = len - at < OUT_PIECE ? len - at : OUT_PIECE;
        o->n += cli_json_escape(out_room(o, 6 * m), s + at, m);
    }
    OUT_LIT(o, "\"");
}

/* The number of ids of each text. */
/* A record's line of --format count. */
static void put_count(outbuf *o, size_t n)
{
    char *p = fmt_num(out_room(o, OUT_SLACK), n);
    *p++ = '\n';
    o->n = (size_t)(p - o->p);
}

static void print_counts(outbuf *o, const lipi_batch *r)
{
    for (size_t i = 0; i < r->n; i++)
        put_count(o, r->start[i + 1] - r->start[i]);
}

/* Writers that keep their place in a local pointer p and check it against
 * lim (o->p + o->cap - the most one step writes), growing the buffer only
 * when a step might not fit: one compare per token. */
#define OUT_STEP(o, p, lim, most)                                                   \
    do {                                                                           \
        if ((p) > (lim)) {                                                         \
            (o)->n = (size_t)((p) - (o)->p);                                       \
            (p) = out_grow((o), (most));                                           \
            (lim) = (o)->p + (o)->cap - (most);                                    \
        }                                                                          \
    } while (0)

/* Ids only, the common case: ids[0..n) each with its separator (t.sep, in
 * its entry), in one tight loop; room for all of them is asked for once
 * when it can be. */
static void put_ids(outbuf *o, id_text t, const uint32_t *ids, size_t n)
{
    enum { MOST = 16 }; /* an id and its separator (16 bytes written) */
    char *p = out_room(o, MOST), *lim = o->p + o->cap - MOST;
    if ((size_t)(lim - p) / MOST > n)
        for (size_t k = 0; k < n; k++)
            p = put_id(t, p, ids[k]);
    else
        for (size_t k = 0; k < n; k++) {
            OUT_STEP(o, p, lim, MOST);
            p = put_id(t, p, ids[k]);
        }
    o->n = (size_t)(p - o->p);
}

/* Ends a record's line after put_ids wrote n ids: its last separator
 * becomes the newline. */
static void end_ids_line(outbuf *o, size_t n)
{
    if (n && !o->oom)
        o->p[o->n - 1] = '\n';
    else
        OUT_LIT(o, "\n");
}

static void print_ids(outbuf *o, const id_text *idt, const lipi_batch *r)
{
    for (size_t i = 0; i < r->n; i++) {
        size_t n = r->start[i + 1] - r->start[i];
        put_ids(o, *idt, r->ids + r->start[i], n);
        end_ids_line(o, n);
    }
}

/* --format jsonl's token strings by id, made the first time an id is met,
 * one table per thread: entry e[id] = offset << 16 | length of `, "STRING"`
 * (JSON-escaped) in text, the first token of a record written without
 * its ", "; 0: not made yet; TT_VARIES: the id's string can come from the
 * text (lipi_token_fixed_string gives NULL), so a record holding it takes
 * its strings from the batch. With the table the batch is asked for ids
 * and offsets only: copying every token's string into the batch cost ~75
 * instructions a token. */
#define TOK_TEXT_MAX 4096 /* longer entries (none in real vocabularies) vary */
#define TT_VARIES UINT64_MAX

typedef struct {
    const lipi_encoder *enc;
    uint64_t *e;  /* [n] */
    size_t n;
    char *text;   /* entries, then 16 bytes of slack for over-long copies */
    size_t len, cap;
} tok_text;

/* The slow half of tt_entry. Running out of memory makes the id vary:
 * its records are then written from the batch's strings, as without the
 * table. */
static __attribute__((noinline)) uint64_t tok_text_make(tok_text *t, uint32_t id)
{
    size_t sl;
    const char *str = lipi_token_fixed_string(t->enc, id, &sl);
    if (!str || sl > TOK_TEXT_MAX / 6)
        return t->e[id] = TT_VARIES;
    size_t need = 6 * sl + 4 + 16;
    if (t->cap - t->len < need) {
        size_t cap = t->cap ? 2 * t->cap : 1 << 16;
        char *p = cap < ((size_t)1 << 40) ? lipi_realloc(t->text, cap) : NULL;
        if (!p)
            return TT_VARIES; /* not kept: tried again next time */
        t->text = p;
        t->cap = cap;
    }
    char *d = t->text + t->len;
    memcpy(d, ", \"", 3);
    size_t m = 4 + cli_json_escape(d + 3, str, sl);
    d[m - 1] = '"';
    uint64_t w = (uint64_t)t->len << 16 | m;
    t->len += m;
    return t->e[id] = w;
}

static inline uint64_t tt_entry(tok_text *t, uint32_t id)
{
    if (id >= t->n)
        return TT_VARIES;
    uint64_t w = t->e[id];
    return w ? w : tok_text_make(t, id);
}

/* Copies n bytes from s to d, where 16 bytes may be written past d + n
 * and read past s + n: one or two fixed-size copies for nearly every
 * token, instead of a memcpy call. */
static inline void copy_over(char *d, const char *s, size_t n)
{
    memcpy(d, s, 16);
    if (n > 16)
        memcpy(d + 16, s + 16, n - 16);
}

/* Room for a jsonl record's numbers: an id (8 bytes written) and ", ",
 * or an offset pair "[start, end], " with 8 bytes of slack. */
#define JSONL_ID_MOST 16
#define JSONL_OFF_MOST (2 + 20 + 2 + 20 + 2 + 8)

/* --format jsonl for record i of a batch without token strings. Returns
 * false, with the output as it was, when an id of the record has no entry
 * in t (the caller then writes it from a batch with strings). */
static bool print_jsonl_table(outbuf *o, const id_text *idt, tok_text *t, const lipi_batch *r,
                              size_t i)
{
    size_t a = r->start[i], b = r->start[i + 1], n0 = o->n;
    char *p = out_room(o, 64), *lim = o->p + o->cap - JSONL_ID_MOST;
    const id_text it = *idt;
    const uint32_t *ids = r->ids;
    const lipi_span *offs = r->offsets;
    memcpy(p, "\"ids\": [", 8);
    p += 8;
    for (size_t k = a; k < b; k++) {
        OUT_STEP(o, p, lim, JSONL_ID_MOST);
        p = put_id(it, p, ids[k]);
        *p++ = ',', *p++ = ' ';
    }
    if (b > a)
        p -= 2;
    o->n = (size_t)(p - o->p);
    p = out_room(o, 64);
    memcpy(p, "], \"tokens\": [", 14);
    p += 14;
    lim = o->p + o->cap - 16;
    for (size_t k = a; k < b; k++) {
        uint64_t w = tt_entry(t, ids[k]);
        if (w == TT_VARIES) {
            o->n = n0;
            return false;
        }
        size_t at = (size_t)(w >> 16), len = (size_t)(w & 0xffff);
        if (k == a)
            at += 2, len -= 2;
        if ((size_t)(lim - p) < len) { /* p <= lim always holds here */
            o->n = (size_t)(p - o->p);
            p = out_grow(o, len + 16);
            lim = o->p + o->cap - 16;
        }
        copy_over(p, t->text + at, len);
        p += len;
    }
    o->n = (size_t)(p - o->p);
    p = out_room(o, 64);
    lim = o->p + o->cap - JSONL_OFF_MOST;
    memcpy(p, "], \"offsets\": [", 15);
    p += 15;
    for (size_t k = a; k < b; k++) {
        OUT_STEP(o, p, lim, JSONL_OFF_MOST);
        size_t s0 = offs[k].start, e0 = offs[k].end;
        *p++ = '[';
        p = s0 <= UINT32_MAX ? put_id(it, p, (uint32_t)s0) : fmt_num(p, s0);
        *p++ = ',', *p++ = ' ';
        p = e0 <= UINT32_MAX ? put_id(it, p, (uint32_t)e0) : fmt_num(p, e0);
        *p++ = ']', *p++ = ',', *p++ = ' ';
    }
    if (b > a)
        p -= 2;
    o->n = (size_t)(p - o->p);
    OUT_LIT(o, "]}\n");
    return true;
}

/* Room for a --format jsonl record's ids, tokens and offsets, after its
 * other members: a number is at most 20 bytes, a string byte at most 6. */
#define JSONL_PER_TOKEN (2 + 20 + 4 + 8 + 20 + 2 + 20 + 1)
#define JSONL_FIXED 64

/* --format jsonl for record i when its bound fits one request for room
 * (nearly all lines): no check for room per token. Returns false, having
 * written nothing, for a record too long for that. */
static bool print_jsonl_fast(outbuf *o, const id_text *idt, const lipi_batch *r, size_t i)
{
    size_t a = r->start[i], b = r->start[i + 1];
    size_t sbytes = r->token_start[b] - r->token_start[a];
    if (b - a > OUT_MIN / JSONL_PER_TOKEN || sbytes > OUT_MIN / 12)
        return false;
    size_t need = (b - a) * JSONL_PER_TOKEN + 6 * sbytes + JSONL_FIXED;
    if (need > OUT_MIN)
        return false;
    char *p = out_room(o, need), *p0 = p;
    memcpy(p, "\"ids\": [", 8);
    p += 8;
    for (size_t k = a; k < b; k++) {
        if (k > a)
            *p++ = ',', *p++ = ' ';
        p = put_id(*idt, p, r->ids[k]);
    }
    memcpy(p, "], \"tokens\": [", 14);
    p += 14;
    for (size_t k = a; k < b; k++) {
        if (k > a)
            *p++ = ',', *p++ = ' ';
        *p++ = '"';
        p += json_chars(p, r->token_text + r->token_start[k],
                        r->token_start[k + 1] - r->token_start[k]);
        *p++ = '"';
    }
    memcpy(p, "], \"offsets\": [", 15);
    p += 15;
    num_memo m = {0};
    for (size_t k = a; k < b; k++) {
        if (k > a)
            *p++ = ',', *p++ = ' ';
        *p++ = '[';
        p = put_memo(p, r->offsets[k].start, &m);
        *p++ = ',', *p++ = ' ';
        p = put_memo(p, r->offsets[k].end, &m);
        *p++ = ']';
    }
    memcpy(p, "]}\n", 3);
    p += 3;
    o->n += (size_t)(p - p0);
    return true;
}

static void out_num(outbuf *o, size_t v)
{
    char *p = out_room(o, OUT_SLACK);
    o->n = (size_t)(fmt_num(p, v) - o->p);
}

/* Record i of the batch; x[0..xlen): the input's other JSONL members;
 * s: the session that encoded it (--format pieces decodes with it);
 * tt: --format jsonl's token strings when the batch has none. */
static bool print_result(outbuf *o, lipi_session *s, const id_text *idt, tok_text *tt,
                         const lipi_batch *r, size_t i, out_format fmt, bool offsets,
                         const char *x, size_t xlen)
{
    size_t a = r->start[i], b = r->start[i + 1], n_start = o->n;
    if (fmt == FMT_JSONL) {
        OUT_LIT(o, "{");
        if (xlen) {
            out_bytes(o, x, xlen);
            OUT_LIT(o, ", ");
        }
        if (tt) {
            if (print_jsonl_table(o, idt, tt, r, i))
                return true;
            if (!o->oom)
                o->n = n_start;
            return false;
        }
        if (print_jsonl_fast(o, idt, r, i))
            return true;
        OUT_LIT(o, "\"ids\": [");
        for (size_t k = a; k < b; k++) {
            char *p = out_room(o, OUT_SLACK), *p0 = p;
            if (k > a)
                *p++ = ',', *p++ = ' ';
            o->n += (size_t)(fmt_num(p, r->ids[k]) - p0);
        }
        OUT_LIT(o, "], \"tokens\": [");
        for (size_t k = a; k < b; k++) {
            const char *t = r->token_text + r->token_start[k];
            size_t len = r->token_start[k + 1] - r->token_start[k];
            if (len > OUT_PIECE) { /* a long added token, in pieces */
                if (k > a)
                    OUT_LIT(o, ", ");
                out_json_string(o, t, len);
                continue;
            }
            /* One request for room per token: most are a few bytes. */
            char *p = out_room(o, 6 * len + 4), *p0 = p;
            if (k > a)
                *p++ = ',', *p++ = ' ';
            *p++ = '"';
            p += cli_json_escape(p, t, len);
            *p++ = '"';
            o->n += (size_t)(p - p0);
        }
        OUT_LIT(o, "], \"offsets\": [");
        for (size_t k = a; k < b; k++) {
            char *p = out_room(o, 2 * OUT_SLACK), *p0 = p;
            if (k > a)
                *p++ = ',', *p++ = ' ';
            *p++ = '[';
            p = fmt_num(p, r->offsets[k].start);
            *p++ = ',', *p++ = ' ';
            p = fmt_num(p, r->offsets[k].end);
            *p++ = ']';
            o->n += (size_t)(p - p0);
        }
        OUT_LIT(o, "]}\n");
        return true;
    }
    for (size_t k = a; k < b; k++) {
        if (k > a)
            OUT_LIT(o, " ");
        if (fmt == FMT_IDS)
            out_num(o, r->ids[k]);
        else if (fmt == FMT_PIECES)
            out_piece_id(o, s, r->ids[k]);
        else
            out_token(o, r->token_text + r->token_start[k],
                      r->token_start[k + 1] - r->token_start[k]);
    }
    if (offsets) {
        OUT_LIT(o, "\t");
        for (size_t k = a; k < b; k++) {
            char *p = out_room(o, 2 * OUT_SLACK), *p0 = p;
            if (k > a)
                *p++ = ' ';
            p = fmt_num(p, r->offsets[k].start);
            *p++ = '-';
            p = fmt_num(p, r->offsets[k].end);
            o->n += (size_t)(p - p0);
        }
    }
    OUT_LIT(o, "\n");
    return true;
}

/* Lines per task: a task encodes them on its thread's session and formats
 * them, so formatting runs on every thread, overlapped with the other
 * threads' encoding, instead of after the block on one. As few as the
 * batch's chunks: a block's run ends when its last task does, and the
 * other threads wait for it, on average half a task (with 256 lines, by
 * estimate ~4% of the wall time at 2 threads); more calls of
 * lipi_encode_batch cost 0.2% of the instructions, and a --format jsonl
 * task's output fits OUT_INIT without growing. */
#define TASK_LINES 64

typedef struct feed feed;

typedef struct {
    lipi_session **sessions;
    size_t n_sessions;
    lipi_thread_pool *pool; /* n_sessions threads (NULL: all on the caller) */
    lipi_encode_options opt;
    unsigned want;
    out_format fmt;
    bool offsets;
    lipi_record_options ro; /* --input, --text-field */
    const block *b;  /* the block being encoded */
    outbuf *outs;    /* [n_outs]: task k's output */
    size_t *tokens;  /* [n_outs]: task k's number of ids */
    size_t n_outs;
    size_t w_n;      /* outs[0 .. w_n) hold the last block's output, not yet
                        written */
    atomic_size_t w_done; /* during a run: outs[0 .. w_done) written */
    feed *fd;        /* the input */
    block *next;     /* the block to read during this run (NULL: none) */
    struct reader_thread *rt; /* one encoding thread: reads c->next and
                                 writes the outputs (else tasks 1 and 0 of
                                 the pool's run do) */
    bool raw;        /* with rt, --format ids: outs[k] hold each line's
                        number of ids and the ids (uint32), which rt formats
                        into wtext as it writes them */
    outbuf wtext;
    bool w_oom;      /* wtext could not grow: nothing more is written */
    id_text idt;     /* ids as text, filled as met */
    tok_text *tts;   /* --format jsonl: token strings by id, one table a
                        session (NULL: strings from the batch) */
    unsigned want_tt; /* what the batch is asked for when tt is used */
    bool total;      /* --total: sum records, ids and bytes */
    bool stream;     /* long records go through encode_long */
    uint64_t n_records, n_tokens, n_bytes;
} encode_ctx;

/* --format jsonl from a batch of ids and offsets (r: the task's m records
 * from block line lo) and the thread's token table. A record holding an id
 * without an entry (added tokens written in the text, unknown runs: rare)
 * is encoded again with token strings; both give the same ids. */
static lipi_status print_with_table(encode_ctx *c, const lipi_batch *r, size_t lo, size_t m,
                                    size_t wi, outbuf *o, lipi_error *err)
{
    const block *b = c->b;
    for (size_t i = 0; i < m; i++) {
        const char *x = b->text + b->off[lo + i] + b->lines[lo + i].len;
        if (print_result(o, c->sessions[wi], &c->idt, &c->tts[wi], r, i, c->fmt, c->offsets, x,
                         b->xlen[lo + i]))
            continue;
        lipi_batch r2 = {0};
        lipi_status st = lipi_encode_batch(&c->sessions[wi], 1, &b->lines[lo + i], 1, &c->opt,
                                           c->want, &r2, err);
        if (st != LIPI_OK)
            return st; /* only ENOMEM: the text was encoded once already */
        print_result(o, c->sessions[wi], &c->idt, NULL, &r2, 0, c->fmt, c->offsets, x,
                     b->xlen[lo + i]);
        lipi_batch_free(&r2);
    }
    return LIPI_OK;
}

/* Waits until outs[k] no longer holds the previous block's output, which
 * task 0 (pipe_task) is writing since the start of the run. Writing is
 * fast next to encoding, so this seldom waits, and then briefly; while a
 * slow reader of the output (a full pipe) holds the writer up, it sleeps,
 * longer each time up to 2 ms, rather than spin. */
static void wait_written(encode_ctx *c, size_t k)
{
    long ns = 50000;
    for (unsigned i = 0; atomic_load_explicit(&c->w_done, memory_order_acquire) <= k; i++) {
        if (i < 64) {
            sched_yield();
        } else {
            nanosleep(&(struct timespec){0, ns}, NULL);
            ns = ns < 1000000 ? 2 * ns : 2000000;
        }
    }
}

/* lipi_encode_stream's sink for ids_task: each id and its separator. */
typedef struct {
    outbuf *o;
    id_text t;
} ids_out;

static lipi_status ids_sink(void *ctx, const uint32_t *ids, size_t n)
{
    ids_out *x = ctx;
    put_ids(x->o, x->t, ids, n);
    return LIPI_OK;
}

static lipi_status count_sink(void *ctx, const uint32_t *ids, size_t n)
{
    return LIPI_OK;
}

/* lipi_encode_stream's sink when c->raw: the ids as they are. */
static lipi_status raw_sink(void *ctx, const uint32_t *ids, size_t n)
{
    outbuf *o = ctx;
    for (size_t at = 0; at < n; at += OUT_PIECE / 4) {
        size_t m = n - at < OUT_PIECE / 4 ? n - at : OUT_PIECE / 4;
        memcpy(out_room(o, 4 * m), ids + at, 4 * m);
        o->n += 4 * m;
    }
    return LIPI_OK;
}

/* encode_task for --format ids or count when ids stream (c->stream): each
 * line's ids go from the encoder straight into outs[k], without a batch's
 * arrays (copied per token, then read again to print): 7-8% of the
 * command's instructions on cl100k. The same ids, by lipi_encode_stream's
 * promise. */
static lipi_status ids_task(encode_ctx *c, size_t lo, size_t m, outbuf *o, size_t wi,
                            size_t *total, lipi_error *err)
{
    ids_out x = {o, c->idt};
    bool count = c->fmt == FMT_COUNT;
    *total = 0;
    for (size_t i = 0; i < m; i++) {
        const lipi_text *t = &c->b->lines[lo + i];
        size_t n = 0, head = o->n;
        if (c->raw) {
            (void)out_room(o, 4); /* the line's number of ids, once known */
            o->n += 4;
        }
        lipi_status st = lipi_encode_stream(c->sessions[wi], t->s, t->len, &c->opt,
                                            count  ? count_sink
                                            : c->raw ? raw_sink
                                                     : ids_sink,
                                            c->raw ? (void *)o : (void *)&x, &n, err);
        if (st != LIPI_OK) {
            err->line = lo + i + 1;
            return st;
        }
        *total += n;
        if (c->raw) {
            uint32_t n32 = (uint32_t)n; /* a line below LONG_RECORD bytes */
            if (!o->oom)
                memcpy(o->p + head, &n32, 4);
        } else if (count)
            put_count(o, n);
        else
            end_ids_line(o, n);
    }
    return LIPI_OK;
}

/* Task k: lines [k * TASK_LINES, ...) of the block, encoded and formatted
 * into outs[k]. A failure names the block's line (1-based) in err->line. */
static lipi_status encode_task(void *ctx, size_t k, size_t wi, lipi_error *err)
{
    encode_ctx *c = ctx;
    const block *b = c->b;
    size_t lo = k * TASK_LINES, m = b->n - lo < TASK_LINES ? b->n - lo : TASK_LINES;
    if (c->stream) {
        /* The output is written as the lines are encoded. */
        wait_written(c, k);
        outbuf *o = &c->outs[k];
        o->n = 0;
        lipi_status st = ids_task(c, lo, m, o, wi, &c->tokens[k], err);
        if (st == LIPI_OK && o->oom) {
            o->oom = false;
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, lo + 1, 0, "out of memory");
        }
        return st;
    }
    lipi_batch r = {0};
    lipi_status st = lipi_encode_batch(&c->sessions[wi], 1, b->lines + lo, m, &c->opt,
                                       c->tts ? c->want_tt : c->want, &r, err);
    if (st != LIPI_OK) {
        if (err->line)
            err->line += lo;
        return st;
    }
    wait_written(c, k);
    outbuf *o = &c->outs[k];
    o->n = 0;
    c->tokens[k] = r.start[m];
    if (c->fmt == FMT_COUNT)
        print_counts(o, &r);
    else if (c->fmt == FMT_IDS && !c->offsets)
        print_ids(o, &c->idt, &r);
    else if (c->tts)
        st = print_with_table(c, &r, lo, m, wi, o, err);
    else
        for (size_t i = 0; i < m; i++)
            print_result(o, c->sessions[wi], &c->idt, NULL, &r, i, c->fmt, c->offsets,
                         b->text + b->off[lo + i] + b->lines[lo + i].len, b->xlen[lo + i]);
    lipi_batch_free(&r);
    if (st != LIPI_OK)
        return st;
    if (o->oom) {
        o->oom = false;
        return lipi_error_set(err, LIPI_ENOMEM, NULL, lo + 1, 0, "out of memory");
    }
    return LIPI_OK;
}

/* Lines per block and thread: enough to keep every thread busy (32 of the
 * batch's 64-line chunks each), little enough that the block's text, ids
 * and token strings stay in cache and the allocator reuses their memory.
 * 16384 lines a block (~3 MB of text, 4 MB of ids, fresh pages from the
 * kernel each block) spent 5-12% of the command in page faults. */
#define BLOCK_LINES 2048
#define BLOCK_BYTES (1u << 20)

/* Records from this long on, when the output is ids or counts, go through
 * lipi_encode_stream instead of a batch: their ids are written as they are
 * found, so the memory of a huge line is its text and its longest piece,
 * not ~50 bytes per token (a 100 MB line without spaces held 3.5 GB). */
#define LONG_RECORD (1u << 20)

typedef struct {
    char buf[1 << 16];
    size_t n;
    bool count;
    id_text t; /* each id is followed by its separator, ' ' */
} long_out;

/* The buffer is written out before an id that might not fit, so the last
 * id's separator is still in it at the end (encode_long makes it the
 * newline). */
static lipi_status long_sink(void *ctx, const uint32_t *ids, size_t n)
{
    long_out *o = ctx;
    if (o->count)
        return LIPI_OK;
    const id_text t = o->t;
    char *p = o->buf + o->n, *lim = o->buf + sizeof o->buf - 16;
    for (size_t k = 0; k < n; k++) {
        if (p > lim) {
            size_t len = (size_t)(p - o->buf);
            if (fwrite(o->buf, 1, len, stdout) != len)
                return LIPI_EIO;
            p = o->buf;
        }
        p = put_id(t, p, ids[k]);
    }
    o->n = (size_t)(p - o->buf);
    return LIPI_OK;
}

/* Encodes one long record (see LONG_RECORD) and prints its line. */
static int encode_long(encode_ctx *c, const lipi_record *rec, const char *file)
{
    long_out *o = lipi_malloc(sizeof *o);
    lipi_error err = {0};
    size_t n_ids = 0;
    if (!o) {
        fprintf(stderr, "lipi encode: out of memory\n");
        return EXIT_FAIL;
    }
    o->n = 0;
    o->count = c->fmt == FMT_COUNT;
    o->t = c->idt;
    lipi_status st = lipi_encode_stream(c->sessions[0], rec->text, rec->len, &c->opt, long_sink, o,
                                        &n_ids, &err);
    if (st == LIPI_OK && o->count)
        o->n = (size_t)(fmt_num(o->buf, n_ids) - o->buf);
    if (st == LIPI_OK) {
        if (!o->count && n_ids) /* the last separator */
            o->n--;
        o->buf[o->n++] = '\n';
        if (fwrite(o->buf, 1, o->n, stdout) != o->n)
            st = LIPI_EIO;
    }
    lipi_free(o);
    if (st == LIPI_EIO && !err.msg[0])
        lipi_error_set(&err, st, NULL, 0, 0, "cannot write the output");
    if (st != LIPI_OK) {
        snprintf(err.path, sizeof err.path, "%s", strcmp(file, "-") == 0 ? "<stdin>" : file);
        err.line = rec->number;
        if (c->ro.format != LIPI_RECORDS_LINES)
            lipi_error_prefix(&err, "record %zu", err.line);
        cli_report("encode", &err);
        return EXIT_FAIL;
    }
    c->n_records++;
    c->n_tokens += n_ids;
    c->n_bytes += rec->len;
    return EXIT_OK;
}

/* The input files, read block by block (read_block). */
struct feed {
    char **files;
    int nfiles, f;         /* f: the file being read */
    lipi_record_reader *r; /* files[f]'s reader; NULL between files */
    lipi_record long_rec;  /* text non-NULL: a long record met, encoded once
                              the blocks before it are written (it points
                              into r's buffer, valid until the next read) */
    lipi_status st;        /* a reading error, reported once the blocks
                              before it are written */
    lipi_error err;
    bool done;             /* every file read */
};

/* Reads records of one file into the empty block b until it is full, the
 * file ends, a long record comes (see LONG_RECORD) or reading fails; the
 * lines of a block that reading failed in are dropped (and not written). */
static void read_block(encode_ctx *c, feed *fd, block *b)
{
    while (!fd->done && fd->st == LIPI_OK && !fd->long_rec.text) {
        if (!fd->r) {
            if (fd->f == fd->nfiles) {
                fd->done = true;
                break;
            }
            fd->st = lipi_record_reader_open(fd->files[fd->f], &c->ro, &fd->r, &fd->err);
            continue;
        }
        lipi_record rec;
        fd->st = lipi_record_reader_next(fd->r, &rec, &fd->err);
        if (fd->st != LIPI_OK)
            break;
        if (!rec.text) {
            lipi_record_reader_close(fd->r);
            fd->r = NULL;
            fd->f++;
            if (b->n) /* a block holds lines of one file */
                break;
            continue;
        }
        if (rec.len >= LONG_RECORD && c->stream) {
            fd->long_rec = rec;
            break;
        }
        lipi_status st = block_add(b, rec.text, rec.len, rec.extra, rec.extra_len, rec.number);
        if (st != LIPI_OK) {
            fd->st = lipi_error_set(&fd->err, st, fd->files[fd->f], rec.number, 0,
                                    "out of memory");
            break;
        }
        b->file = fd->f;
        if (b->n >= BLOCK_LINES * c->n_sessions || b->len >= BLOCK_BYTES * c->n_sessions)
            break;
    }
    if (fd->st != LIPI_OK) {
        b->n = 0;
        b->len = 0;
    }
}

/* Writes the last encoded block's outputs, if not yet, telling the tasks
 * of the run which outs they may reuse (w_done). */
static void write_outputs(encode_ctx *c)
{
    outbuf *wt = &c->wtext;
    for (size_t k = 0; k < c->w_n; k++) {
        if (!c->raw) {
            fwrite(c->outs[k].p, 1, c->outs[k].n, stdout);
        } else if (!c->w_oom) {
            /* The buffer is malloc's and each field 4 bytes: aligned. */
            const char *p = c->outs[k].p, *end = p + c->outs[k].n;
            while (p < end) {
                uint32_t n;
                memcpy(&n, p, 4);
                p += 4;
                put_ids(wt, c->idt, (const uint32_t *)(const void *)p, n);
                end_ids_line(wt, n);
                p += 4 * (size_t)n;
                if (wt->n >= OUT_INIT / 2) {
                    fwrite(wt->p, 1, wt->n, stdout);
                    wt->n = 0;
                }
            }
            c->w_oom = wt->oom;
        }
        atomic_store_explicit(&c->w_done, k + 1, memory_order_release);
    }
    if (c->raw && wt->n && !c->w_oom)
        fwrite(wt->p, 1, wt->n, stdout);
    wt->n = 0;
    c->w_n = 0;
    atomic_store_explicit(&c->w_done, SIZE_MAX, memory_order_release);
}

/* A pool run's tasks: 0 writes the previous block's outputs, 1 reads the
 * next block (when c->next), the others encode c->b (encode_task). The
 * read, the longest of the three kinds, is claimed second, while the
 * encoding tasks are still there for the other threads. Reading and
 * writing report their errors through c->fd and ferror(stdout), never to
 * the pool, which would skip the encoding tasks after them. */
#define PIPE_TASKS 2

static lipi_status pipe_task(void *ctx, size_t k, size_t wi, lipi_error *err)
{
    encode_ctx *c = ctx;
    if (k == 0) {
        if (!c->rt)
            write_outputs(c);
    } else if (k == 1) {
        if (c->next && !c->rt)
            read_block(c, c->fd, c->next);
    } else
        return encode_task(c, k - PIPE_TASKS, wi, err);
    return LIPI_OK;
}

/* With one encoding thread (no pool: pipe_task's tasks run one after the
 * other), the previous block is written and the next one read on a thread
 * of its own while the block is encoded, as the pool's tasks 0 and 1 do
 * with more threads: reading the input and checking its UTF-8 was ~4% of
 * `--threads 1`'s time, formatting and writing the ids ~6% (c->raw).
 * Encoding stays on one thread. */
typedef struct reader_thread {
    pthread_t t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    encode_ctx *c;
    block *b;  /* the block to read while busy, after the writing (NULL: none) */
    bool busy, quit;
} reader_thread;

static void *reader_main(void *arg)
{
    reader_thread *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->busy && !r->quit)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->quit)
            break;
        pthread_mutex_unlock(&r->mu);
        write_outputs(r->c);
        if (r->b)
            read_block(r->c, r->c->fd, r->b);
        pthread_mutex_lock(&r->mu);
        r->busy = false;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Starts the thread; false (reading stays in pipe_task) when it cannot. */
static bool reader_start(reader_thread *r, encode_ctx *c)
{
    *r = (reader_thread){.c = c};
    if (pthread_mutex_init(&r->mu, NULL) != 0)
        return false;
    if (pthread_cond_init(&r->cv, NULL) != 0) {
        pthread_mutex_destroy(&r->mu);
        return false;
    }
    if (pthread_create(&r->t, NULL, reader_main, r) != 0) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        return false;
    }
    return true;
}

static void reader_stop(reader_thread *r)
{
    pthread_mutex_lock(&r->mu);
    r->quit = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->t, NULL);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

static void reader_ask(reader_thread *r, block *b)
{
    pthread_mutex_lock(&r->mu);
    r->b = b;
    r->busy = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void reader_wait(reader_thread *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->busy)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

/* Encodes block b (lines of files[b->file]) on the pool, while the pool
 * also writes the previous block's outputs and reads the next block into
 * c->next: see pipe_task (with one encoding thread, c->rt reads it). Errors
 * name the file and line; they are reported once the read is done. */
static int encode_block(encode_ctx *c, block *b)
{
    lipi_error err = {0};
    for (size_t i = 0; i < b->n; i++)
        b->lines[i].s = b->text + b->off[i];
    /* read_block stops at BLOCK_LINES lines a session: n_tasks <= n_outs */
    size_t n_tasks = (b->n + TASK_LINES - 1) / TASK_LINES;
    c->b = b;
    atomic_store(&c->w_done, 0);
    if (c->rt)
        reader_ask(c->rt, c->next);
    lipi_status st = lipi_thread_pool_run(c->pool, PIPE_TASKS + n_tasks, pipe_task, c, &err);
    if (c->rt)
        reader_wait(c->rt);
    if (st != LIPI_OK) {
        const char *file = c->fd->files[b->file];
        size_t idx = err.line ? err.line - 1 : 0;
        snprintf(err.path, sizeof err.path, "%s", strcmp(file, "-") == 0 ? "<stdin>" : file);
        err.line = idx < b->n ? b->line_no[idx] : 0;
        if (c->ro.format != LIPI_RECORDS_LINES && err.line)
            lipi_error_prefix(&err, "record %zu", err.line);
        cli_report("encode", &err);
        return EXIT_FAIL;
    }
    for (size_t k = 0; k < n_tasks; k++)
        c->n_tokens += c->tokens[k];
    if (c->total) {
        c->n_records += b->n;
        for (size_t i = 0; i < b->n; i++)
            c->n_bytes += b->lines[i].len;
    }
    c->w_n = n_tasks;
    b->n = 0;
    b->len = 0;
    return EXIT_OK;
}

static void block_free(block *b)
{
    lipi_free(b->text);
    lipi_free(b->lines);
    lipi_free(b->off);
    lipi_free(b->line_no);
    lipi_free(b->xlen);
}

/* Reads, encodes and writes blocks in a pipeline: while block N is encoded,
 * block N-1 is written and block N+1 read, all as tasks of one pool run
 * (pipe_task), so no thread waits for the reading or writing of another.
 * The output, and what is written before an error, are those of reading,
 * encoding and writing one block after the other: a block is written only
 * after every block before it, an encoding error is reported after the
 * blocks before it are written, and a reading error after the blocks
 * before the one it interrupts (whose lines are not written). */
static int encode_files(encode_ctx *c, char **files, int nfiles)
{
    static char *stdin_only[] = {"-"};
    if (nfiles == 0) {
        files = stdin_only;
        nfiles = 1;
    }
    feed fd = {.files = files, .nfiles = nfiles};
    block bl[2] = {{0}};
    size_t cur = 0;
    int rc = EXIT_OK;
    reader_thread rt;
    c->fd = &fd;
    c->w_n = 0;
    c->rt = !c->pool && reader_start(&rt, c) ? &rt : NULL;
    c->raw = c->rt && c->wtext.p; /* run() makes wtext for the streamed ids only */
    for (;;) {
        block *b = &bl[cur];
        bool more = !fd.done && fd.st == LIPI_OK && !fd.long_rec.text;
        if (b->n == 0) {
            /* Nothing to encode: at the start, after a long record, or at
             * the end (all read, a long record met, or a reading error). */
            write_outputs(c);
            if (more) {
                read_block(c, &fd, b);
                continue;
            }
            if (fd.st != LIPI_OK) {
                cli_report("encode", &fd.err);
                rc = EXIT_FAIL;
                break;
            }
            if (!fd.long_rec.text)
                break;
            rc = encode_long(c, &fd.long_rec, files[fd.f]);
            fd.long_rec.text = NULL;
            if (rc != EXIT_OK)
                break;
            continue;
        }
        c->next = more ? &bl[!cur] : NULL;
        rc = encode_block(c, b);
        if (rc != EXIT_OK)
            break;
        cur = !cur;
    }
    if (c->rt)
        reader_stop(c->rt);
    c->rt = NULL;
    c->raw = false;
    if (c->w_oom && rc == EXIT_OK) {
        fprintf(stderr, "lipi encode: out of memory\n");
        rc = EXIT_FAIL;
    }
    lipi_record_reader_close(fd.r);
    block_free(&bl[0]);
    block_free(&bl[1]);
    return rc;
}

typedef struct {
    const char *path;     /* -t */
    encode_ctx *c;
    lipi_special_policy special;
    bool add, have_max;
    uint64_t max_length;
} encode_args;

static int encode_option(int id, const char *arg, void *vea)
{
    encode_args *ea = vea;
    switch (id) {
    case 't': ea->path = arg; break;
    case CLI_OPT_FORMAT:
        if (strcmp(arg, "ids") == 0)
            ea->c->fmt = FMT_IDS;
        else if (strcmp(arg, "tokens") == 0)
            ea->c->fmt = FMT_TOKENS;
        else if (strcmp(arg, "jsonl") == 0)
            ea->c->fmt = FMT_JSONL;
        else if (strcmp(arg, "count") == 0)
            ea->c->fmt = FMT_COUNT;
        else if (strcmp(arg, "pieces") == 0)
            ea->c->fmt = FMT_PIECES;
        else
            return cli_bad_value("encode", "--format", "ids, tokens, pieces, jsonl or count",
                                 arg);
        break;
    case CLI_OPT_OFFSETS: ea->c->offsets = true; break;
    case CLI_OPT_TOTAL: ea->c->total = true; break;
    case CLI_OPT_SPECIAL:
        if (strcmp(arg, "allow") == 0)
            ea->special = LIPI_SPECIAL_ALLOW;
        else if (strcmp(arg, "text") == 0)
            ea->special = LIPI_SPECIAL_TEXT;
        else if (strcmp(arg, "error") == 0)
            ea->special = LIPI_SPECIAL_ERROR;
        else
            return cli_bad_value("encode", "--special", "allow, text or error", arg);
        break;
    case CLI_OPT_ADD_SPECIAL_TOKENS: ea->add = true; break;
    case CLI_OPT_MAX_LENGTH:
        if (!cli_parse_u64(arg, &ea->max_length) || ea->max_length == 0 ||
            ea->max_length > (uint64_t)(SIZE_MAX >> 1))
            return cli_bad_value("encode", "--max-length", "a positive number", arg);
        ea->have_max = true;
        break;
    }
    return 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'},
        {"format", required_argument, NULL, CLI_OPT_FORMAT},
        {"offsets", no_argument, NULL, CLI_OPT_OFFSETS},
        {"total", no_argument, NULL, CLI_OPT_TOTAL},
        {"special", required_argument, NULL, CLI_OPT_SPECIAL},
        {"add-special-tokens", no_argument, NULL, CLI_OPT_ADD_SPECIAL_TOKENS},
        {"max-length", required_argument, NULL, CLI_OPT_MAX_LENGTH},
        {NULL, 0, NULL, 0},
    };
    encode_ctx c = {0};
    encode_args ea = {.c = &c};
    cli_args a = {.mode = LIPI_INVALID_ERROR, .threads = 1, .max_threads = 1024};
    const cli_spec spec = {"encode", help, "t:", opts,
                           CLI_ARG_TOKENIZER | CLI_ARG_THREADS | CLI_ARG_INVALID | CLI_ARG_INPUT,
                           encode_option,
                           &ea, 0};
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (!ea.path)
        return cli_usage_error("encode", "no tokenizer given (-t TOKENIZER)");

    cli_tokenizer t;
    if (cli_tokenizer_open("encode", ea.path, &a.oo, a.threads, &t) != EXIT_OK)
        return EXIT_FAIL;
    /* lipi's own members replace the input's of the same name. */
    static const char *const ours[] = {"ids", "tokens", "offsets"};
    c.ro = a.ro;
    c.ro.invalid = a.mode;
    if (c.fmt == FMT_JSONL) {
        c.ro.drop = ours;
        c.ro.n_drop = sizeof ours / sizeof *ours;
    }
    c.sessions = t.sessions;
    c.n_sessions = t.n_sessions;
    lipi_encode_options_default(t.enc, &c.opt);
    c.opt.add_special_tokens = ea.add;
    c.opt.special = ea.special;
    c.opt.utf8_checked = true; /* the record reader checked (or repaired) every text */
    if (ea.have_max)
        c.opt.max_length = (size_t)ea.max_length;
    if (c.fmt == FMT_TOKENS || c.fmt == FMT_JSONL)
        c.want |= LIPI_WANT_TOKENS;
    if ((c.offsets && c.fmt != FMT_COUNT) || c.fmt == FMT_JSONL)
        c.want |= LIPI_WANT_OFFSETS;
    c.stream = ((c.fmt == FMT_IDS && !c.offsets) || c.fmt == FMT_COUNT) &&
               lipi_encode_can_stream(t.enc, &c.opt);
    c.n_outs = (BLOCK_LINES * c.n_sessions + TASK_LINES - 1) / TASK_LINES;
    c.outs = lipi_calloc(c.n_outs, sizeof *c.outs);
    c.tokens = lipi_calloc(c.n_outs, sizeof *c.tokens);
    /* A pool that cannot start leaves every task to this thread: the same
     * output, one core. */
    if (c.n_sessions > 1)
        (void)lipi_thread_pool_new(c.n_sessions, &c.pool, NULL);
    if (c.fmt == FMT_IDS || c.fmt == FMT_JSONL) {
        size_t n = lipi_tokenizer_vocab_size(t.tok);
        if (c.fmt == FMT_JSONL && n < ID_TEXT_MIN)
            n = ID_TEXT_MIN;
        c.idt.n = n < ID_TEXT_MAX ? n : ID_TEXT_MAX;
        if (c.fmt == FMT_IDS && !c.offsets) {
            c.idt.sep = ' ';
            c.idt.n = n < ID_SEP_MAX ? n : ID_SEP_MAX;
        }
        c.idt.w = lipi_calloc(c.idt.n ? c.idt.n : 1, sizeof *c.idt.w);
    }
    /* With --add-special-tokens every record holds the post-processor's
     * tokens, which have no entry: the batch's strings then. */
    bool table = c.fmt == FMT_JSONL && !c.opt.add_special_tokens;
    if (table) {
        c.tts = lipi_calloc(c.n_sessions, sizeof *c.tts);
        for (size_t k = 0; c.tts && k < c.n_sessions; k++) {
            c.tts[k] = (tok_text){.enc = t.enc, .n = lipi_tokenizer_vocab_size(t.tok)};
            c.tts[k].e = lipi_calloc(c.tts[k].n ? c.tts[k].n : 1, sizeof *c.tts[k].e);
            table = table && c.tts[k].e;
        }
        c.want_tt = c.want & ~(unsigned)LIPI_WANT_TOKENS;
    }
    rc = c.outs && c.tokens && (c.idt.w || !c.idt.n) && (table || !c.tts) ? EXIT_OK : EXIT_FAIL;
    for (size_t k = 0; c.outs && k < c.n_outs && rc == EXIT_OK; k++)
        if (out_init(&c.outs[k]) != LIPI_OK)
            rc = EXIT_FAIL;
    if (rc == EXIT_OK && c.n_sessions == 1 && c.stream && c.fmt == FMT_IDS)
        (void)out_init(&c.wtext); /* without it, ids are formatted as encoded */
    if (rc != EXIT_OK)
        fprintf(stderr, "lipi encode: out of memory\n");
    else
        rc = encode_files(&c, argv + optind, argc - optind);
    if (rc == EXIT_OK)
        rc = cli_finish_output("encode");
    if (rc == EXIT_OK && c.total)
        fprintf(stderr,
                "lipi encode: %" PRIu64 " records, %" PRIu64 " tokens, %" PRIu64
                " bytes, %.1f tokens per 1,000 bytes\n",
                c.n_records, c.n_tokens, c.n_bytes,
                c.n_bytes ? 1000.0 * (double)c.n_tokens / (double)c.n_bytes : 0.0);
    lipi_thread_pool_free(c.pool);
    for (size_t k = 0; c.outs && k < c.n_outs; k++)
        lipi_free(c.outs[k].p);
    lipi_free(c.wtext.p);
    lipi_free(c.outs);
    lipi_free(c.tokens);
    lipi_free(c.idt.w);
    for (size_t k = 0; c.tts && k < c.n_sessions; k++) {
        lipi_free(c.tts[k].e);
        lipi_free(c.tts[k].text);
    }
    lipi_free(c.tts);
    cli_tokenizer_close(&t);
    return rc;
}

const cli_command cmd_encode = {"encode", "texts (lines, JSONL, files) -> token ids (Hugging Face-exact)", run};

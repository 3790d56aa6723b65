/* lipi tokenizer module: errors and allocation, SHA-256, UTF-8 input, normalizers,
 * pre-tokenizers, grapheme clusters and the tokenizer object.
 *
 *   lipi_error err;
 *   lipi_tokenizer *tok = NULL;
 *   if (lipi_tokenizer_load("tokenizer.json", &tok, &err) != LIPI_OK)
 *       fprintf(stderr, "%s:%zu: %s\n", err.path, err.offset, err.msg);
 *   lipi_tokenizer_free(tok);
 *
 * Conventions (see docs/ARCHITECTURE.md):
 *  - every fallible function returns lipi_status and, when `err` is not NULL,
 *    fills it; the library never prints and never exits;
 *  - text is a byte span (const char *s, size_t len), never NUL-terminated;
 *  - lipi_x_new / _load return owned objects freed with lipi_x_free (NULL ok);
 *    lipi_x_get_* return borrowed pointers; lipi_x_take_* steal their argument
 *    (freed even on error);
 *  - immutable objects (normalizer, pre-tokenizer, tokenizer) are shared by
 *    threads; per-thread scratch lives in the output structs passed in.
 */
#ifndef LIPI_TOKENIZER_H
#define LIPI_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

typedef enum {
    LIPI_OK = 0,
    LIPI_ENOMEM,  /* an allocation failed */
    LIPI_EINVAL,  /* bad argument or option value */
    LIPI_EIO,     /* a file could not be opened, read or written */
    LIPI_EFORMAT, /* input is not what was expected (bad UTF-8, bad JSON, ...) */
    LIPI_ETRUNC,  /* input ended too early */
    LIPI_EICU,    /* an ICU call failed */
    LIPI_EREGEX,  /* a PCRE2 pattern failed to compile or match */
} lipi_status;

typedef struct {
    lipi_status code;
    char path[256];  /* file (or JSON path) involved, "" if none */
    size_t line;     /* 1-based line, 0 if unknown */
    size_t offset;   /* byte offset from the start of the file (or of the
                        text or JSON value named in `path`), 0 if unknown */
    char msg[1024];  /* "expected ..., found ..." */
} lipi_error;

/* The library's version, "MAJOR.MINOR.PATCH" (static string). */
const char *lipi_version(void);

/* Short stable name of a status, e.g. "ENOMEM". */
const char *lipi_status_name(lipi_status code);

/* Fills `err` (if not NULL) and returns `code`, so callers can write
 * `return lipi_error_set(err, LIPI_EFORMAT, path, line, off, "expected %s", x);`.
 * `path` may be NULL. Messages longer than the buffer are truncated. */
lipi_status lipi_error_set(lipi_error *err, lipi_status code, const char *path,
                           size_t line, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Prepends "prefix: " to err->msg (keeps code and position). No-op on NULL. */
void lipi_error_prefix(lipi_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ======================================================================== */
/* Allocation: every allocation in lipi (and uthash and jansson inside it)   */
/* goes through these, so tests can fail the Nth one.                        */
/* ======================================================================== */

typedef struct {
    void *(*malloc_fn)(size_t size);
    void *(*realloc_fn)(void *p, size_t size);
    void (*free_fn)(void *p);
} lipi_alloc_hooks;

/* Installs process-wide allocation functions (NULL restores libc). Call it
 * before creating any lipi object; objects must be freed with the hooks that
 * allocated them. */
void lipi_set_alloc_hooks(const lipi_alloc_hooks *hooks);

void *lipi_malloc(size_t size);
void *lipi_calloc(size_t n, size_t size);          /* NULL on overflow */
void *lipi_realloc(void *p, size_t size);
void *lipi_reallocarray(void *p, size_t n, size_t size); /* NULL on overflow */
void lipi_free(void *p);
char *lipi_strndup(const char *s, size_t len);     /* NUL-terminated copy */

/* Threads for a caller that asked for `want`: 0 means one per online CPU
 * (the default of every --threads option); the result is in [1, max]. */
size_t lipi_thread_count(size_t want, size_t max);

/* `one` when n is 1, else `many`: "%zu %s", n, lipi_plural(n, "line", "lines")
 * for messages that people read ("1 line", "0 lines", "2 lines"). */
const char *lipi_plural(uint64_t n, const char *one, const char *many);

/* ======================================================================== */
/* SHA-256 (FIPS 180-4), to check files against published checksums          */
/* ======================================================================== */

/* A running hash (OpenSSL's libcrypto underneath; the field is private,
 * here so the struct can live on the stack):
 *
 *   lipi_sha256 c;
 *   char hex[65];
 *   lipi_sha256_init(&c);
 *   lipi_sha256_update(&c, "ab", 2);
 *   lipi_sha256_update(&c, "c", 1);
 *   if (lipi_sha256_final_hex(&c, hex) == LIPI_OK) ...  // "ba7816bf...f20015ad", as for "abc"
 *
 * init allocates; a failure there or in update shows as LIPI_ENOMEM from
 * final_hex, so callers check one status. final_hex frees the state; a
 * caller that stops before it calls lipi_sha256_abort. */
typedef struct {
    void *ctx;
    bool failed;
} lipi_sha256;

void lipi_sha256_init(lipi_sha256 *c);
void lipi_sha256_update(lipi_sha256 *c, const void *data, size_t n);
/* Writes the digest as 64 lowercase hex digits and a NUL, and frees the
 * state; LIPI_ENOMEM (out = "") when the hash could not be computed. */
lipi_status lipi_sha256_final_hex(lipi_sha256 *c, char out[65]);
/* Frees the state of a hash that is not finished (no-op after final_hex). */
void lipi_sha256_abort(lipi_sha256 *c);
/* The digest of data[0..n) in one call; LIPI_ENOMEM as final_hex. */
lipi_status lipi_sha256_hex(const void *data, size_t n, char out[65]);

/* ======================================================================== */
/* UTF-8                                                                     */
/* ======================================================================== */

/* Decodes one code point at s[0..len). Returns the bytes consumed (1..4), or 0
 * if the bytes there are not well-formed UTF-8 (overlongs, surrogates, values
 * above U+10FFFF and truncated sequences are all rejected). */
size_t lipi_utf8_decode(const char *s, size_t len, uint32_t *cp);

/* Encodes `cp` (must be a scalar value) into out; returns 1..4. */
size_t lipi_utf8_encode(uint32_t cp, char out[4]);

/* Offset of the first byte that does not start a well-formed sequence, or
 * `len` when all of s is valid. Fast path for ASCII. */
size_t lipi_utf8_valid_prefix(const char *s, size_t len);

/* Copies s into a new buffer with every ill-formed subsequence replaced by
 * U+FFFD (one per maximal subpart, as WHATWG and ICU do). *out is owned by
 * the caller (lipi_free) and NUL-terminated for convenience. */
lipi_status lipi_utf8_repair(const char *s, size_t len, char **out, size_t *out_len);

/* Byte-fallback tokens: byte 0x0A is the token "<0x0A>", as SentencePiece
 * names them. lipi_byte_token_format writes the 6 characters and a NUL. */
void lipi_byte_token_format(uint8_t b, char out[7]);
/* The byte token s[0..n) names, or -1. Strict: only what
 * lipi_byte_token_format writes (upper-case hex). Lenient: what Hugging
 * Face's ByteFallback decoder reads (Rust's u8::from_str_radix): either
 * case, and '+' for the first digit ("<0x0a>", "<0x+A>" -> 10). */
int lipi_byte_token_parse(const char *s, size_t n, bool lenient);

/* What to do with invalid UTF-8 in input text. */
typedef enum {
    LIPI_INVALID_ERROR = 0, /* stop with LIPI_EFORMAT naming file, line, byte */
    LIPI_INVALID_REPLACE,   /* replace bad bytes with U+FFFD and go on */
} lipi_invalid_mode;

/* ------------------------------------------------------------------------ */
/* Line reader: streams a text file (or stdin for "-") line by line.         */
/* Lines end at "\n"; a "\r\n" ending loses its "\r", a lone "\r" is text.   */
/* A UTF-8 BOM at the start of the file is skipped. NUL bytes are text.      */
/* Lines of any length work (the buffer grows). Files ending in .gz, .xz or  */
/* .zst are decompressed on the fly.                                         */
/* ------------------------------------------------------------------------ */

typedef struct lipi_line_reader lipi_line_reader;

/* Opens path ("-" reads stdin, named "<stdin>" in errors). A missing or
 * unreadable file or a directory: LIPI_EIO naming the path and strerror. */
lipi_status lipi_line_reader_open(const char *path, lipi_invalid_mode mode,
                                  lipi_line_reader **out, lipi_error *err);

/* Next line, without its terminator. *line is borrowed until the next call
 * and is valid UTF-8 (repaired or rejected per the mode). At end of input
 * returns LIPI_OK with *line = NULL. Errors carry path, 1-based line and the
 * byte offset of the bad byte from the start of the file (of the
 * decompressed stream for .gz/.xz/.zst), e.g. "invalid UTF-8 byte 0xff
 * (expected a UTF-8 sequence; use --invalid=replace to substitute U+FFFD)".
 * Corrupt compressed data: LIPI_EFORMAT; a compressed stream cut short:
 * LIPI_ETRUNC. */
lipi_status lipi_line_reader_next(lipi_line_reader *r, const char **line,
                                  size_t *len, lipi_error *err);

/* The same with another end of record: sep is '\n' (exactly
 * lipi_line_reader_next), '\0' (records end at NUL bytes; a "\r" stays), or
 * -1 (no separator: the rest of the input is one record). The count that
 * lipi_line_reader_line_no returns is then a count of records. */
lipi_status lipi_line_reader_next_sep(lipi_line_reader *r, int sep, const char **line,
                                      size_t *len, lipi_error *err);

size_t lipi_line_reader_line_no(const lipi_line_reader *r);     /* last line read */
uint64_t lipi_line_reader_bytes_read(const lipi_line_reader *r); /* raw (compressed) bytes */
/* Bytes of text (decompressed) taken by the lines returned so far, with
 * their line ends: what a rate of reading should count. */
uint64_t lipi_line_reader_text_bytes(const lipi_line_reader *r);
void lipi_line_reader_close(lipi_line_reader *r);

/* ------------------------------------------------------------------------ */
/* Record reader: the texts a command works on, read from a file by the     */
/* line reader (so .gz/.xz/.zst, stdin, BOM and UTF-8 checks as above):     */
/*                                                                           */
/*   lipi_record_options ro = {.format = LIPI_RECORDS_JSONL};                 */
/*   lipi_record_reader_open("docs.jsonl.gz", &ro, &r, &err);                */
/*   while ((st = lipi_record_reader_next(r, &rec, &err)) == LIPI_OK && rec.text) */
/*       use(rec.text, rec.len);            (borrowed until the next call)   */
/*   lipi_record_reader_close(r);                                            */
/* ------------------------------------------------------------------------ */

typedef enum {
    LIPI_RECORDS_LINES = 0, /* a record per line (lipi_line_reader_next) */
    LIPI_RECORDS_JSONL,     /* a JSON object per line; the text is one of its
                               string members */
    LIPI_RECORDS_WHOLE,     /* the whole file is one record, newlines and all
                               (an empty file is one empty record) */
    LIPI_RECORDS_NUL,       /* records end at NUL bytes (find -print0) */
} lipi_record_format;

typedef struct {
    lipi_record_format format;
    const char *text_field;    /* JSONL: the member holding the text; NULL: "text" */
    lipi_invalid_mode invalid; /* invalid UTF-8 in the text */
    const char *const *drop;   /* JSONL: members left out of lipi_record.extra */
    size_t n_drop;
    bool field_ids;            /* JSONL: the member is an array of token ids (as
                                  `lipi encode --format jsonl` writes "ids"), and
                                  rec.text is them in decimal, separated by spaces */
} lipi_record_options;

typedef struct {
    const char *text;  /* the record's text, valid UTF-8; NULL at the end */
    size_t len;
    const char *extra; /* JSONL: the object's other members as they were
                          written, joined by ", " without braces
                          ("\"id\": 7, \"lang\": \"hi\""), "" when none; "" for
                          the other formats. Borrowed like text. */
    size_t extra_len;
    size_t number;     /* 1-based record number in the file (for LINES and
                          JSONL also the line number) */
} lipi_record;

typedef struct lipi_record_reader lipi_record_reader;

/* Opens path as lipi_line_reader_open does (same errors); opt NULL means
 * lines. opt is copied (text_field and drop are borrowed: they must outlive
 * the reader). */
lipi_status lipi_record_reader_open(const char *path, const lipi_record_options *opt,
                                    lipi_record_reader **out, lipi_error *err);

/* Next record into *rec; at the end of input LIPI_OK with rec->text NULL.
 * Errors carry the path, err->line = the record number and err->offset =
 * the byte in the file, and the message names the record:
 *   invalid UTF-8 (as the line reader), and for JSONL, LIPI_EFORMAT for
 *   "record 3: invalid JSON at column 17: ..." (jansson's words), a line
 *   that is not an object, "record 3: no member \"text\" (expected a string
 *   member \"text\", at column 25: the end of the object)" and
 *   "record 3: member \"text\" at column 9 is a number, expected a string".
 * A JSONL text keeps \u0000 escapes as NUL bytes. */
lipi_status lipi_record_reader_next(lipi_record_reader *r, lipi_record *rec, lipi_error *err);

/* Bytes of (decompressed) input taken by the records returned so far. */
uint64_t lipi_record_reader_text_bytes(const lipi_record_reader *r);
/* Raw (compressed) bytes read so far, as lipi_line_reader_bytes_read. */
uint64_t lipi_record_reader_bytes_read(const lipi_record_reader *r);
void lipi_record_reader_close(lipi_record_reader *r); /* NULL is a no-op */

/* ======================================================================== */
/* Parallel files                                                            */
/* ======================================================================== */

/* Line-aligned files, one per language: line i of every file is a
 * translation of line i of the others (the inflation report's input, the
 * trainer's dev set for --balance parity).
 *
 *   lipi_parallel_files *p = NULL;
 *   lipi_parallel_files_open(paths, n, NULL, LIPI_INVALID_ERROR, &p, &err);
 *   lipi_parallel_batch b = {0};
 *   while (lipi_parallel_files_read(p, 1024, &b, &err) == LIPI_OK && b.lines)
 *       ... lipi_parallel_batch_line(&b, lang, i, &len) ...
 *   lipi_parallel_batch_free(&b);
 *   lipi_parallel_files_close(p);
 */
typedef struct lipi_parallel_files lipi_parallel_files;

/* Opens the parallel set given as paths: each is a file, or a folder whose
 * files named *.txt, *.dev, *.devtest, *.test or *.valid (optionally
 * followed by .gz, .xz or .zst) are taken, hidden files skipped. A file's
 * language label is its name without folders, compression suffix and
 * extension ("data/hin_Deva.txt.xz" -> "hin_Deva"); files are kept sorted
 * by label, whatever order they were given in.
 * `reference` names the reference label; NULL picks eng_Latn, eng or en
 * (or the only file, so one text can be read the same way).
 * Every file is read once here to count its lines, so a mismatch fails
 * before any work: LIPI_EFORMAT naming both files and both counts ("a.txt
 * has 4 lines but eng.txt has 5"). Also LIPI_EINVAL (no files, two files
 * with one label, stdin "-", unknown or missing reference), LIPI_EIO,
 * LIPI_EFORMAT for invalid UTF-8 under LIPI_INVALID_ERROR (path, line,
 * offset), LIPI_ENOMEM. */
lipi_status lipi_parallel_files_open(const char *const *paths, size_t n_paths,
                                         const char *reference, lipi_invalid_mode mode,
                                         lipi_parallel_files **out, lipi_error *err);
/* The same with records other than lines (ro: JSONL objects, whole files,
 * NUL-separated texts; NULL is lines): record i of every file is aligned,
 * counts are of records, errors as lipi_record_reader_next's; a folder
 * also gives its *.jsonl files when ro asks for JSONL. ro is copied;
 * ro->text_field is borrowed for the life of *out. */
lipi_status lipi_parallel_files_open_records(const char *const *paths, size_t n_paths,
                                             const char *reference,
                                             const lipi_record_options *ro,
                                             lipi_parallel_files **out, lipi_error *err);
void lipi_parallel_files_close(lipi_parallel_files *p); /* NULL ok */

size_t lipi_parallel_files_count(const lipi_parallel_files *p);
/* Borrowed label and path of file i (in sorted order). */
const char *lipi_parallel_files_label(const lipi_parallel_files *p, size_t i);
const char *lipi_parallel_files_path(const lipi_parallel_files *p, size_t i);
size_t lipi_parallel_files_reference(const lipi_parallel_files *p);
/* Lines per file (all equal), and how many of them read so far were skipped
 * because they were empty (or only spaces and tabs) in at least one file. */
uint64_t lipi_parallel_files_lines(const lipi_parallel_files *p);
uint64_t lipi_parallel_files_skipped(const lipi_parallel_files *p);

/* Aligned lines read together; reuse it across reads. */
typedef struct {
    size_t lines;      /* aligned lines held (0 at the end of the files) */
    size_t languages;  /* = lipi_parallel_files_count */
    uint64_t *line_no; /* 1-based file line of each held line */
    void *priv;        /* the text */
} lipi_parallel_batch;

/* Reads up to max_lines (> 0) aligned lines that are non-empty in every
 * file into *b (cleared first). b->lines == 0 means every line was read.
 * Errors as the line reader's (path, line, offset), LIPI_ENOMEM. */
lipi_status lipi_parallel_files_read(lipi_parallel_files *p, size_t max_lines,
                                         lipi_parallel_batch *b, lipi_error *err);

/* Line i (< b->lines) of language lang: borrowed until the next read. */
const char *lipi_parallel_batch_line(const lipi_parallel_batch *b, size_t lang, size_t i,
                                      size_t *len);
void lipi_parallel_batch_free(lipi_parallel_batch *b); /* members, not b */

/* ======================================================================== */
/* Normalizers                                                               */
/* ======================================================================== */

/* Byte span [start, end) of some text. */
typedef struct {
    size_t start, end;
} lipi_span;

typedef struct lipi_normalizer lipi_normalizer; /* immutable, thread-shareable */

typedef struct {
    bool lowercase;      /* full lowercase of each code point (ICU u_strToLower per
                            char, root locale; no final-sigma context: "ΣΑΣ" ->
                            "σασ"), as Hugging Face's Lowercase */
    bool strip_accents;  /* drop combining marks (Mn) that follow Latin, Greek or
                            Cyrillic letters: "Café" -> "Cafe", while Indic matras,
                            viramas, anusvara and nukta stay ("कु", "किं") */
    bool fold_digits;    /* fold the decimal digits of Devanagari, Bengali,
                            Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada and
                            Malayalam to ASCII: "१२३" -> "123" */
} lipi_normalizer_options;

/* Builds a normalizer from a name (opt may be NULL):
 *   "none"   nothing but the options;
 *   "nfc", "nfd", "nfkc", "nfkd"  Unicode normalization (ICU data); NFC makes
 *            the nukta letters U+0958..U+095F consonant + U+093C (they are
 *            composition exclusions);
 *   "indic"  NFC, then ZWJ/ZWNJ dropped unless they follow a mark (virama +
 *            ZWJ/ZWNJ: half forms, chillu, "ശ്‍", "ශ්‍රී") or stand between two
 *            letters/marks; stray ones at word edges or next to spaces and
 *            punctuation go;
 *   "bert"   BERT cleanup (controls, U+FFFD and NUL dropped, whitespace -> ' ')
 *            and spaces around CJK ideographs; lowercase goes into it.
 * Options add digit folding, accent stripping and lowercasing after the form.
 * Every normalizer is a sequence of Hugging Face normalizer steps, so its
 * tokenizer.json form loads in Hugging Face unchanged and gives the same
 * text. Unknown names: LIPI_EINVAL with the list of known names in err->msg. */
lipi_status lipi_normalizer_new(const char *name, const lipi_normalizer_options *opt,
                                lipi_normalizer **out, lipi_error *err);
void lipi_normalizer_free(lipi_normalizer *n);

/* Output of normalization; reuse it across calls to avoid allocation. */
typedef struct {
    char *text;        /* normalized UTF-8, owned, NUL-terminated */
    size_t len, cap;
    lipi_span *align;  /* if requested: align[i] = source bytes that produced
                          output byte i; a token [a, b) of the output comes
                          from [align[a].start, align[b-1].end) of the input.
                          The spans are Hugging Face's NormalizedString
                          alignments: a decomposed char gives several chars on
                          its span, a composed char takes the span of its
                          first part, inserted chars take the span of the
                          char before them, removed chars vanish. */
    size_t align_cap;
    void *scratch;     /* private per-thread buffers */
} lipi_normalized;

/* Normalizes valid UTF-8 s[0..len) into *out (cleared first). With
 * want_align, fills out->align. LIPI_EFORMAT (err->offset = the bad byte) if
 * s is not valid UTF-8, LIPI_EICU if ICU fails, LIPI_EREGEX if a Replace
 * pattern hits a PCRE2 matching limit, LIPI_ENOMEM. A NULL normalizer
 * copies. One lipi_normalized per thread; the normalizer is shared. */
lipi_status lipi_normalize(const lipi_normalizer *n, const char *s, size_t len,
                           lipi_normalized *out, bool want_align, lipi_error *err);
void lipi_normalized_free(lipi_normalized *out); /* frees members, not out */

/* ======================================================================== */
/* Pre-tokenizers                                                            */
/* ======================================================================== */

typedef struct lipi_pretokenizer lipi_pretokenizer; /* immutable, thread-shareable */

/* A pre-tokenizer is a tree of the Hugging Face tokenizer.json kinds (Split,
 * ByteLevel, Whitespace, WhitespaceSplit, BertPreTokenizer, Metaspace,
 * Punctuation, Digits, UnicodeScripts, CharDelimiterSplit, FixedLength,
 * Sequence) and splits exactly as Hugging Face tokenizers does, offsets
 * included (checked against its outputs in tests/fixtures/pretokenize).
 *
 * Built-in pre-tokenizers by name:
 *   "indic"      lipi's default, one regex (Split Isolated, so Hugging Face
 *                loads it unchanged): a word is letters of ONE script with
 *                their combining marks (\p{M}) and ZWNJ/ZWJ, so it splits
 *                where the script changes; one leading space stays with the
 *                word; numbers in runs of <= 3 (with any marks); symbol runs
 *                keep emoji ZWJ sequences whole; whitespace as in o200k.
 *                "हिन्दीEnglish नमस्ते" -> ["हिन्दी", "English", " नमस्ते"];
 *   "cl100k", "o200k", "gpt2"  the published OpenAI split patterns
 *                (cl100k splits "हिन्दी" into "ह", "िन", "्द", "ी");
 *   "bytelevel"  ByteLevel{add_prefix_space false}: the gpt2 pattern, then
 *                each piece in the GPT-2 byte alphabet (" é" -> "ĠÃ©");
 *   "bert"       BertPreTokenizer: whitespace split, then every punctuation
 *                character alone (CJK spacing is the "bert" normalizer's);
 *   "whitespace" runs of \w+ and of [^\w\s]+ (Hugging Face "Whitespace");
 *   "metaspace"  spaces become U+2581 "▁", one is prepended, split before each;
 *   "digits"     every digit alone.
 * Unknown names: LIPI_EINVAL listing the known ones. */
lipi_status lipi_pretokenizer_new(const char *name, lipi_pretokenizer **out,
                                  lipi_error *err);

/* The split patterns lipi knows, by name: the text of pattern `name`
 * (static), or NULL for an unknown name. "gpt2" (GPT-2, Hugging Face
 * ByteLevel), "gpt2-no-trailing-space" (llama.cpp's gpt2), "cl100k" and
 * "o200k" (tiktoken's pat_str, contractions spelled out), "cl100k-tiktoken"
 * and "o200k-tiktoken" (as tiktoken's Rust core ships them: (?i:'s|...)),
 * "qwen2", "tekken", "indic", "indic-unigram" (numbers keep a leading
 * space). */
const char *lipi_split_pattern(const char *name);
/* The i-th known pattern and its name, or NULL past the last. */
const char *lipi_split_pattern_at(size_t i, const char **name);

/* A split on a user pattern (UTF + UCP, JIT-compiled); matches become
 * pieces, the text between matches too (Hugging Face Split "Isolated").
 * Patterns mean what they mean in a tokenizer.json read by Hugging Face
 * (Oniguruma): \s is White_Space, \w is Unicode Word (marks included), \b
 * its boundary, \h a hex digit, ^ and $ are line anchors and (?m) lets "."
 * match a newline; everything else is PCRE2 syntax. Compile errors:
 * LIPI_EREGEX with PCRE2's message and err->offset the pattern offset. */
lipi_status lipi_pretokenizer_new_pattern(const char *pattern, lipi_pretokenizer **out,
                                          lipi_error *err);
void lipi_pretokenizer_free(lipi_pretokenizer *p);

/* Pieces of one input. Piece i has text text[text_off[i] .. text_off[i+1])
 * (may differ from the source, e.g. "▁" for a space or the byte-level
 * alphabet) and came from source bytes src[i]. Zero-initialize before the
 * first use and reuse across calls: it also holds per-thread matcher
 * scratch, so one lipi_pieces per thread. */
typedef struct {
    size_t count, cap;
    lipi_span *src;
    size_t *text_off;  /* count + 1 entries */
    char *text;        /* NUL-terminated after text_len bytes */
    size_t text_len, text_cap;
    void *scratch;
} lipi_pieces;

/* Splits valid UTF-8 s[0..len) into *out (cleared first). Pieces are in
 * order and never empty; their source spans are byte offsets into s, as
 * Hugging Face reports them, in order and not overlapping. One exception,
 * also Hugging Face's: text a pre-tokenizer inserts (ByteLevel's or
 * Metaspace's prefix) carries the span of the character it was put before,
 * and byte-level characters the span of their whole character, so pieces
 * cut out of such text can share source bytes. A NULL pre-tokenizer gives
 * the whole input as one piece. Invalid UTF-8: LIPI_EFORMAT with err->offset
 * at the bad byte. */
lipi_status lipi_pretokenize(const lipi_pretokenizer *p, const char *s, size_t len,
                             lipi_pieces *out, lipi_error *err);
void lipi_pieces_free(lipi_pieces *out); /* frees members, not out */

/* ======================================================================== */
/* Unicode helpers                                                           */
/* ======================================================================== */

/* Extended grapheme cluster boundaries of valid UTF-8 s[0..len) (ICU
 * character break iterator): writes the byte offsets 0 = b[0] < b[1] < ... <
 * b[n] = len into *bounds (grown with lipi_realloc, freed by the caller with
 * lipi_free; *cap tracks its size) and the number of clusters n into *count.
 * Empty input gives n = 0, b[0] = 0. ASCII text between non-ASCII is cut
 * without ICU (CR LF stays one cluster). "क्षि", "👨‍👩‍👧", "e\u0301", "\r\n"
 * are one cluster each. ICU failures: LIPI_EICU with ICU's error name. */
lipi_status lipi_graphemes(const char *s, size_t len, size_t **bounds, size_t *cap,
                           size_t *count, lipi_error *err);

/* ICU script code (UScriptCode) of a code point; Common and Inherited are
 * reported as they are (callers decide how to attach them). Not a code
 * point (> U+10FFFF): USCRIPT_INVALID_CODE (-1). */
int lipi_script_of(uint32_t cp);

/* ======================================================================== */
/* The tokenizer object                                                      */
/* ======================================================================== */

typedef struct lipi_tokenizer lipi_tokenizer; /* immutable once built */

/* Loads a Hugging Face tokenizer.json. Unknown or malformed sections fail
 * with LIPI_EFORMAT and the JSON path in err->msg, e.g.
 * `normalizer.normalizers[2].type: unknown type "Foo"`, and the file name
 * (`name` for _load_json, may be NULL) in err->path; invalid JSON also sets
 * err->line and err->offset (1-based byte column). Merges must name tokens
 * of the vocabulary and join to one, added tokens must agree with the model,
 * ids must be unique. A normalizer or pre-tokenizer pattern that does not
 * compile is LIPI_EREGEX. A missing or unreadable file (or a directory) is
 * LIPI_EIO; files over 1 GiB are refused. */
lipi_status lipi_tokenizer_load(const char *path, lipi_tokenizer **out, lipi_error *err);
lipi_status lipi_tokenizer_load_json(const char *json, size_t len, const char *name,
                                     lipi_tokenizer **out, lipi_error *err);

/* Writes tokenizer.json atomically (temporary file in the same folder, then
 * rename): an interrupted save never leaves a partial file. The text is
 * that of lipi_tokenizer_to_json. An unwritable or missing folder is
 * LIPI_EIO naming `path`, checked before anything is written. */
lipi_status lipi_tokenizer_save(const lipi_tokenizer *t, const char *path, lipi_error *err);

/* Checks, without leaving anything behind, that `path` can be written the
 * way lipi writes outputs (a temporary file in its folder, then a rename):
 * for commands that should fail before long work rather than after it.
 * LIPI_EIO naming the path and the reason; LIPI_EINVAL for a folder. */
lipi_status lipi_check_writable(const char *path, lipi_error *err);

/* Writes a BPE tokenizer's model as GPT-2 style DIR/vocab.json (token -> id,
 * in id order) and DIR/merges.txt ("#version: 0.2", then "left right" per
 * merge), each atomically; DIR is created if missing. LIPI_EINVAL for a
 * model that is not BPE or whose merges hold a token with a space or line
 * break (merges.txt cannot represent them); LIPI_EIO naming the path. */
lipi_status lipi_tokenizer_export_merges(const lipi_tokenizer *t, const char *dir,
                                         lipi_error *err);

/* Writes a Unigram tokenizer as a SentencePiece model (ModelProto, the
 * .model file), atomically, for the sentencepiece library to load: every id
 * in order with its score and type (the unknown token UNKNOWN, special
 * added tokens CONTROL, other added tokens USER_DEFINED, "<0xNN>" pieces
 * BYTE when byte_fallback is on, the rest NORMAL); trainer_spec with
 * model_type UNIGRAM, byte_fallback and the unk / bos ("<s>") / eos
 * ("</s>") / pad ("<pad>") ids (-1 when absent); normalizer_spec carrying
 * the tokenizer's normalizer as a precompiled charsmap ("indic", "nfc" or
 * "nfkc" as lipi_normalizer_new builds them without options; "identity"
 * for none), spaces escaped to "▁" and a dummy prefix when the normalizer
 * ends in Prepend("▁") (as lipi's Unigram trainer saves it) or Metaspace's
 * prepend_scheme is not "never", extra whitespace kept. For a tokenizer
 * lipi trained, SentencePiece then gives lipi's ids on raw text: on FLORES-200
 * devtest and NTREX-128 all lines but those that open with a ZWJ/ZWNJ
 * (tests/test_spm_export.c). Special-token strings in the text are matched
 * by lipi and Hugging Face only (SentencePiece never matches control
 * pieces).
 * LIPI_EINVAL for a model that is not Unigram, without an unknown token, with
 * an id no token has, a normalizer a charsmap cannot carry (lowercasing,
 * accent stripping, digit folding, any other sequence), a pre-tokenizer
 * other than a lone Metaspace (a split pattern), or a Metaspace replacement
 * other than "▁"; LIPI_EIO naming the path. */
lipi_status lipi_tokenizer_save_spm(const lipi_tokenizer *t, const char *path, lipi_error *err);

/* The bytes lipi_tokenizer_save_spm writes: *out is owned by the caller
 * (lipi_free), *len its length. */
lipi_status lipi_tokenizer_to_spm(const lipi_tokenizer *t, char **out, size_t *len,
                                  lipi_error *err);

/* Serializes to a new NUL-terminated JSON string owned by the caller
 * (lipi_free); *len (may be NULL) is its length. The output is
 * deterministic and laid out as Hugging Face writes it (keys in its order,
 * vocabulary by id, 2-space indent, UTF-8 unescaped), so a loaded file saves
 * back the same. LIPI_EINVAL without a model or for a token that is not
 * UTF-8 (tokenizer.json cannot hold one). */
lipi_status lipi_tokenizer_to_json(const lipi_tokenizer *t, char **out, size_t *len,
                                   lipi_error *err);
void lipi_tokenizer_free(lipi_tokenizer *t);

/* Borrowed parts (NULL when the tokenizer has none). */
const lipi_normalizer *lipi_tokenizer_get_normalizer(const lipi_tokenizer *t);
const lipi_pretokenizer *lipi_tokenizer_get_pretokenizer(const lipi_tokenizer *t);

/* ------------------------------------------------------------------------ */
/* Building a tokenizer (trainers, readers of other formats)                */
/* ------------------------------------------------------------------------ */

typedef enum {
    LIPI_MODEL_NONE = 0,
    LIPI_MODEL_BPE,
    LIPI_MODEL_WORDPIECE,
    LIPI_MODEL_UNIGRAM,
    LIPI_MODEL_WORDLEVEL,
} lipi_model_type;

/* Model settings, named as in tokenizer.json. */
typedef struct {
    int64_t unk_id;               /* -1: none */
    bool byte_fallback;           /* BPE, Unigram: <0xNN> pieces for unknown bytes */
    bool fuse_unk;                /* BPE: consecutive unknowns become one */
    bool ignore_merges;           /* BPE: a word already in the vocab is one token */
    bool byte_level;              /* BPE: vocab strings are in the GPT-2 byte alphabet */
    char continuing_subword_prefix[16]; /* BPE/WordPiece, e.g. "##"; "" none */
    char end_of_word_suffix[16];  /* BPE, e.g. "</w>"; "" none */
    size_t max_input_chars_per_word; /* WordPiece, default 100 */
} lipi_model_options;

/* Sets lipi_model_options to the tokenizer.json defaults for `type`. */
void lipi_model_options_default(lipi_model_type type, lipi_model_options *opt);

/* A token added on top of the model (special tokens and the like). */
typedef struct {
    char *content;
    size_t len;
    uint32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
} lipi_added_token;

/* New empty tokenizer (no normalizer, no pre-tokenizer, no model). */
lipi_status lipi_tokenizer_new(lipi_tokenizer **out);

/* Install parts; the part is stolen (freed even on error). */
lipi_status lipi_tokenizer_take_normalizer(lipi_tokenizer *t, lipi_normalizer *n);
lipi_status lipi_tokenizer_take_pretokenizer(lipi_tokenizer *t, lipi_pretokenizer *p);

/* Replaces t's decoder with the one described by json[0..len), a
 * tokenizer.json "decoder" object. Used by the trainers:
 *
 *     lipi_tokenizer_set_decoder_json(t, "{\"type\": \"Fuse\"}", 16, err);
 *
 * Text that is not JSON: LIPI_EFORMAT with the parser's message and
 * 1-based line and byte offset; a value that is not a decoder: LIPI_EINVAL
 * or LIPI_EFORMAT naming its JSON path ("decoder.decoders[1].type: ...");
 * LIPI_ENOMEM. On failure t keeps its old decoder. */
lipi_status lipi_tokenizer_set_decoder_json(lipi_tokenizer *t, const char *json, size_t len,
                                            lipi_error *err);

/* Sets the model. tokens[i] (lens[i] bytes) gets id i; scores are used by
 * Unigram (may be NULL otherwise); merges[r] = {left id, right id} of the
 * merge of rank r (BPE only, may be NULL otherwise). Everything is copied.
 * opt NULL means lipi_model_options_default(type). Duplicate tokens, merge
 * ids out of range, or a merge whose joined string (left + right without
 * right's continuing_subword_prefix) is not a token: LIPI_EINVAL, and t
 * keeps its old model. WordPiece and WordLevel without an unk_id name their
 * unknown token "[UNK]" / "<unk>" as Hugging Face does. */
lipi_status lipi_tokenizer_set_model(lipi_tokenizer *t, lipi_model_type type,
                                     const lipi_model_options *opt,
                                     const char *const *tokens, const size_t *lens,
                                     const double *scores, size_t n_tokens,
                                     const uint32_t (*merges)[2], size_t n_merges,
                                     lipi_error *err);

/* Adds an added token (content copied); its id must be free or equal to the
 * model's id for the same string (a tokenizer read from a tokenizer.json
 * also takes another string's model id, which the token then shadows: see
 * lipi_tokenizer_id_to_token). */
lipi_status lipi_tokenizer_add_token(lipi_tokenizer *t, const lipi_added_token *tok,
                                     lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Reading a tokenizer's model                                               */
/* ------------------------------------------------------------------------ */

lipi_model_type lipi_tokenizer_model_type(const lipi_tokenizer *t);
const lipi_model_options *lipi_tokenizer_get_model_options(const lipi_tokenizer *t);

/* Number of ids: model vocabulary and added tokens (the highest id + 1). */
size_t lipi_tokenizer_vocab_size(const lipi_tokenizer *t);

/* Borrowed token string of `id` (model or added), *len its length; NULL if
 * no token has that id. An added token comes first: Hugging Face's numbering
 * of a tokenizer.json's added tokens can give one a model token's id, and
 * then the id decodes as the added token (tokenizer_json.c). */
const char *lipi_tokenizer_id_to_token(const lipi_tokenizer *t, uint32_t id, size_t *len);

/* Looks a token string up in the model vocabulary and the added tokens. */
bool lipi_tokenizer_token_to_id(const lipi_tokenizer *t, const char *s, size_t len,
                                uint32_t *id);

double lipi_tokenizer_get_score(const lipi_tokenizer *t, uint32_t id); /* Unigram, else 0 */
size_t lipi_tokenizer_merge_count(const lipi_tokenizer *t);
/* Merge of rank `rank` as the ids of its two parts. */
void lipi_tokenizer_get_merge(const lipi_tokenizer *t, size_t rank, uint32_t *left,
                              uint32_t *right);

size_t lipi_tokenizer_added_count(const lipi_tokenizer *t);
const lipi_added_token *lipi_tokenizer_get_added(const lipi_tokenizer *t, size_t i);

/* ======================================================================== */
/* Reading other formats                                                     */
/* ======================================================================== */
/*
 * Tokenizers saved by other tools become lipi tokenizers that give the same
 * ids as those tools, built from the parts Hugging Face's converters build
 * (so lipi_tokenizer_save writes the tokenizer.json Hugging Face would):
 *
 *   lipi_tokenizer *tok = NULL;
 *   lipi_error err;
 *   if (lipi_tokenizer_open("spiece.model", NULL, &tok, &err) != LIPI_OK)
 *       fprintf(stderr, "%s:%zu: %s\n", err.path, err.offset, err.msg);
 *
 * Readers never trust a size in a file: every length and count is checked
 * against the bytes that are there, so a truncated or hostile file gives
 * LIPI_EFORMAT with the byte offset (or line) and what was expected.
 */

/* A yes / no setting that can also be left to the file. Zero is AUTO, so
 * a zeroed lipi_open_options asks for every default. */
typedef enum {
    LIPI_FLAG_AUTO = 0,
    LIPI_FLAG_OFF,
    LIPI_FLAG_ON,
} lipi_flag;

typedef struct {
    /* vocab.txt (and GGUF bert): AUTO follows tokenizer_config.json beside
     * the file (do_lower_case), else lowercases iff the folder or file name
     * contains "uncased". GGUF bert: AUTO lowercases (as bge does). */
    lipi_flag lowercase;
    /* vocab.txt: AUTO follows tokenizer_config.json (strip_accents), else
     * strips accents iff lowercasing, as BERT does. */
    lipi_flag strip_accents;
    /* tiktoken and GGUF gpt2: the split regex (PCRE2 / Oniguruma syntax),
     * replacing the built-in one; required for rank files and GGUF "pre"
     * types lipi does not know. NULL: built-in. */
    const char *pattern;
    /* The one folder searched for a bundled tokenizer when `path` is a bare
     * name that is no file ("cl100k_base": DIR/NAME.tiktoken,
     * DIR/tiktoken/..., DIR/vocab/tiktoken/...; "bert-base-multilingual-cased":
     * DIR/vocab/NAME/). NULL: $LIPI_DATA, then the installed share/lipi
     * (PREFIX/share/lipi, or share/lipi beside the library or program),
     * then the checkout's data/ beside the program's build folder; never
     * the current folder by itself. */
    const char *data_dir;
    /* Whether the encoder may keep the tables it builds from this
     * tokenizer (tries, backtracking tables) in a cache folder and read
     * them there the next time: $LIPI_CACHE_DIR, else $XDG_CACHE_HOME/lipi,
     * else $HOME/.cache/lipi; files are named by the SHA-256 of what they
     * are built from, checked on reading, rebuilt silently when missing or
     * bad, and never needed (a folder that cannot be written is no error).
     * The same switch keeps a snapshot of the opened tokenizer there
     * (named by the SHA-256 of the files read and these options), read
     * instead of the files next time (not for GGUF files).
     * AUTO: yes, unless $LIPI_CACHE is 0. */
    lipi_flag table_cache;
} lipi_open_options;

/* Opens a tokenizer of any format lipi reads, choosing the reader by the
 * file's content and name:
 *   - tokenizer.json (lipi_tokenizer_load);
 *   - a folder: its tokenizer.json, else vocab.txt (+ tokenizer_config.json),
 *     else vocab.json + merges.txt, else one SentencePiece model (*.model:
 *     spiece.model, sentencepiece.bpe.model, tokenizer.model, ...);
 *   - a SentencePiece .model (protobuf ModelProto);
 *   - a BERT vocab.txt (WordPiece);
 *   - a GPT-2 vocab.json or merges.txt (the other file must sit beside it);
 *   - a tiktoken rank file (*.tiktoken, or lines "<base64> <rank>"), or the
 *     bare names cl100k_base, o200k_base, p50k_base, r50k_base (looked up
 *     as NAME.tiktoken in the data folders, see data_dir; a bare name that
 *     is a folder there, such as bert-base-multilingual-cased, opens as a
 *     folder), with their published split patterns
 *     and special tokens; a NAME.meta.json beside a rank file ({"pat_str",
 *     "special_tokens", "allow_rank_gaps"}) gives them for any other name
 *     ("allow_rank_gaps": true takes ranks that are not 0..N-1 without
 *     gaps, see lipi_tokenizer_from_tiktoken). A file whose name is one of
 *     the four encodings (NAME or NAME.tiktoken) must be OpenAI's published
 *     file: its SHA-256 is checked, as tiktoken does, and a truncated or
 *     modified file is LIPI_EFORMAT giving the expected and found sums;
 *   - a GGUF file (its tokenizer.ggml.* metadata; tensors are never read).
 * `opt` may be NULL. *out is owned by the caller. Errors: LIPI_EIO when the
 * file cannot be read (or a bare name is not found: the message lists the
 * folders searched), LIPI_EFORMAT naming the file and position of what is
 * wrong, LIPI_EINVAL for a bad option or a rank file whose split pattern is
 * not known (give opt->pattern), LIPI_EREGEX for a bad pattern,
 * LIPI_ENOMEM. */
lipi_status lipi_tokenizer_open(const char *path, const lipi_open_options *opt,
                                lipi_tokenizer **out, lipi_error *err);

/* The tokenizer files a folder may hold by name: what lipi_tokenizer_open
 * reads and what belongs to a model folder (model/model.h's manifest
 * includes them). */
typedef enum {
    LIPI_TOKENIZER_FILE_JSON,          /* tokenizer.json */
    LIPI_TOKENIZER_FILE_CONFIG,        /* tokenizer_config.json and the like */
    LIPI_TOKENIZER_FILE_WORDPIECE,     /* vocab.txt */
    LIPI_TOKENIZER_FILE_GPT2,          /* vocab.json, merges.txt */
    LIPI_TOKENIZER_FILE_SENTENCEPIECE, /* a *.model, in the order a folder is searched */
} lipi_tokenizer_file_kind;

/* The name of the i-th tokenizer file (a static string) and its kind, or
 * NULL past the last:
 *
 *   for (size_t i = 0; (name = lipi_tokenizer_file(i, &kind)); i++) ... */
const char *lipi_tokenizer_file(size_t i, lipi_tokenizer_file_kind *kind);

/* The readers behind lipi_tokenizer_open, on bytes in memory (not
 * NUL-terminated; `name`, which may be NULL, goes into err->path). */

/* A SentencePiece ModelProto: Unigram or BPE pieces with scores and types,
 * the normalizer spec (precompiled charsmap, add_dummy_prefix,
 * remove_extra_whitespaces, escape_whitespaces) and byte fallback. Gives
 * SentencePiece's own ids (EncodeAsIds), with control and unknown pieces
 * as special added tokens and user-defined pieces as added tokens, as
 * Hugging Face's converters make them; so, unlike SentencePiece, "<s>" in
 * the text is the control token, and with user-defined pieces a text that
 * starts with one (or with "▁") gets no lone "▁" before it. Models of type
 * WORD or CHAR, and treat_whitespace_as_suffix, are LIPI_EFORMAT. */
lipi_status lipi_tokenizer_from_spm(const void *data, size_t len, const char *name,
                                    lipi_tokenizer **out, lipi_error *err);

/* A special token of a tiktoken encoding. */
typedef struct {
    const char *content; /* NUL-terminated */
    uint32_t id;
} lipi_special_token;

/* Flags of lipi_tokenizer_from_tiktoken. */
enum {
    /* Take ranks with gaps (some id below the largest rank that is neither
     * a rank nor a special token's id); the ids in the gaps have no token. */
    LIPI_TIKTOKEN_ALLOW_RANK_GAPS = 1u << 0,
};

/* A tiktoken rank file (lines "<base64 bytes> <rank>"): byte-level BPE
 * with merges recovered from the ranks, split by `pattern` (required) and
 * special[0..n_special) as special added tokens. The ranks must be 0..N-1,
 * each once; ids that special tokens take may be missing from them (as
 * p50k_base leaves out 50256, its <|endoftext|>). `flags`: 0 or
 * LIPI_TIKTOKEN_ALLOW_RANK_GAPS. Bad base64, repeated ranks or tokens, a
 * missing rank (the first one is named, with the line after it) and
 * special ids that are ranks: LIPI_EFORMAT with the line. */
lipi_status lipi_tokenizer_from_tiktoken(const char *data, size_t len, const char *name,
                                         const char *pattern,
                                         const lipi_special_token *special, size_t n_special,
                                         unsigned flags, lipi_tokenizer **out, lipi_error *err);

/* A BERT vocab.txt (one token per line, id = line - 1): WordPiece with
 * BertNormalizer, BertPreTokenizer, [CLS] A [SEP] template and the
 * [PAD] [UNK] [CLS] [SEP] [MASK] special tokens, as BertTokenizerFast.
 * `config` is the text of tokenizer_config.json (NULL: none). lowercase /
 * strip_accents: ON / OFF override, AUTO follows the config, else
 * lowercases iff `name` contains "uncased". */
lipi_status lipi_tokenizer_from_vocab_txt(const char *data, size_t len, const char *name,
                                          const char *config, size_t config_len,
                                          lipi_flag lowercase, lipi_flag strip_accents,
                                          lipi_tokenizer **out, lipi_error *err);

/* GPT-2 vocab.json + merges.txt: byte-level BPE exactly as GPT-2's
 * tokenizer.json (<|endoftext|> special when present). `config` is the
 * text of a tokenizer_config.json beside them, or NULL. */
lipi_status lipi_tokenizer_from_gpt2(const char *vocab_json, size_t vocab_len,
                                     const char *merges, size_t merges_len, const char *name,
                                     const char *config, size_t config_len,
                                     lipi_tokenizer **out, lipi_error *err);

/* The tokenizer in a GGUF file's metadata (versions 2 and 3): models gpt2
 * (byte-level BPE split as tokenizer.ggml.pre says), llama (SentencePiece
 * BPE by scores with byte fallback), bert (WordPiece) and t5 (Unigram).
 * `data` may be just the start of the file as long as it holds the whole
 * metadata section. A "pre" lipi does not know: LIPI_EFORMAT naming it,
 * unless opt->pattern is given. */
lipi_status lipi_tokenizer_from_gguf(const void *data, size_t len, const char *name,
                                     const lipi_open_options *opt, lipi_tokenizer **out,
                                     lipi_error *err);

/* ------------------------------------------------------------------------ */
/* Atomic outputs                                                            */
/* ------------------------------------------------------------------------ */

/* A text output of a command: `path`, written to a temporary file beside
 * it and renamed over it by lipi_output_commit, or standard output for
 * NULL or "-". *f is where to write (borrowed until commit or abort).
 * LIPI_EIO when the folder is not writable (found before any work),
 * LIPI_ENOMEM. */
typedef struct lipi_output lipi_output;
lipi_status lipi_output_open(const char *path, lipi_output **out, FILE **f, lipi_error *err);
/* Flushes and moves the file into place; any write error since open is
 * LIPI_EIO and leaves `path` untouched. Frees o either way. */
lipi_status lipi_output_commit(lipi_output *o, lipi_error *err);
/* Drops the temporary file (`path` untouched). NULL is a no-op. */
void lipi_output_abort(lipi_output *o);
/* The temporary file ("<path>.tmp-XXXXXXXX"), borrowed until commit or
 * abort; NULL when o writes to standard output. For a program that removes
 * it when a signal ends the process (lipi's command line): unlinking it
 * only makes a later commit fail with LIPI_EIO, `path` untouched; a commit
 * that already renamed it is not affected. */
const char *lipi_output_get_temp_path(const lipi_output *o);

/* ======================================================================== */
/* Parallel for: the one thread pool                                         */
/* ======================================================================== */

/* Fork-join over tasks 0 .. n_tasks-1, the only place lipi starts threads.
 *
 *   static lipi_status square(void *ctx, size_t task, size_t worker, lipi_error *err)
 *   {
 *       double *v = ctx;
 *       v[task] *= v[task];          // written by task index, never by worker
 *       return LIPI_OK;
 *   }
 *   lipi_parallel_for(n, threads, square, v, &err);
 *
 * Contract, for determinism: every task runs exactly once (unless an
 * earlier-numbered task failed, see below), on some thread, in no promised
 * order, so a task's result must depend on its index only. `worker`
 * (< the thread count) says which thread runs it, for per-thread scratch
 * (sessions, accumulators) and nothing the output may depend on. Tasks are
 * handed out in increasing order from a shared counter, so a slow thread
 * never holds back the rest.
 *
 * A task that fails returns its status and fills its err (a cleared struct
 * of the worker's own); the call then returns the status and error of the
 * lowest-numbered failing task, whatever the timing: tasks numbered above a
 * failure may be skipped, those below it always run. Tasks that succeed
 * return LIPI_OK and their err is ignored. */
typedef lipi_status (*lipi_task_fn)(void *ctx, size_t task, size_t worker, lipi_error *err);

/* Runs fn on min(threads, n_tasks) threads, the caller being worker 0, and
 * returns when every task has finished. threads <= 1 (or n_tasks <= 1) runs
 * the tasks in order on the caller without creating a thread or allocating.
 * When the threads cannot be had (no memory, pthread_create refused) the
 * tasks run on the caller instead: the results are the same by the
 * contract above, only slower, so this never fails by itself. Returns
 * LIPI_OK or the failing task's status (see lipi_task_fn); LIPI_EINVAL for
 * n_tasks > UINT32_MAX. */
lipi_status lipi_parallel_for(size_t n_tasks, size_t threads, lipi_task_fn fn, void *ctx,
                              lipi_error *err);

/* A pool whose threads stay alive between runs, for callers that run many
 * small parallel regions (a forward pass runs one per GEMM, a BPE trainer
 * one per merge), where starting threads each time would cost more than the
 * work. lipi_parallel_for is lipi_thread_pool_new, _run and _free.
 *
 *   lipi_thread_pool *pool = NULL;
 *   if (lipi_thread_pool_new(4, &pool, &err) != LIPI_OK) ...   // or run inline: pool = NULL
 *   for (layer ...) lipi_thread_pool_run(pool, n_tiles, gemm_tile, &job, &err);
 *   lipi_thread_pool_free(pool);
 *
 * threads counts the caller: threads - 1 threads are started (none for 0 or
 * 1). LIPI_ENOMEM when memory or a thread cannot be had (msg says which),
 * *out then NULL. The caller owns *out (lipi_thread_pool_free). */
typedef struct lipi_thread_pool lipi_thread_pool;
lipi_status lipi_thread_pool_new(size_t threads, lipi_thread_pool **out, lipi_error *err);

/* Threads of the pool, the caller included; 1 for NULL. Worker indices
 * passed to tasks are below it. */
size_t lipi_thread_pool_threads(const lipi_thread_pool *pool);

/* Runs tasks 0 .. n_tasks-1 on the pool as lipi_parallel_for does; a NULL
 * pool runs them on the caller. One run at a time per pool, and never from
 * inside one of its own tasks. Tasks may wait for one another (a reader
 * task feeding counting tasks) only when n_tasks <= lipi_thread_pool_threads
 * of a pool that lipi_thread_pool_new made: a waiting task holds one thread,
 * so a free thread is always left for the task it waits for. */
lipi_status lipi_thread_pool_run(lipi_thread_pool *pool, size_t n_tasks, lipi_task_fn fn,
                                 void *ctx, lipi_error *err);

/* Stops and joins the threads; NULL is a no-op. */
void lipi_thread_pool_free(lipi_thread_pool *pool);

#endif

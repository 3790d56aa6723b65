/* Fuzz: table cache files (tokenizer/tabcache.c) as the encoder reads them,
 * and the snapshots of opened tokenizers (tokenizer/snapshot.c) as
 * lipi_tokenizer_open reads them. Three small tokenizers (a tiktoken rank
 * file, a WordPiece vocab.txt, a Unigram tokenizer.json) are opened once
 * with the cache on, which writes their files (backtrack, tiktoken-merges,
 * wordpiece, unigram, and a snapshot of each). Input: one byte choosing a
 * file (by sorted name), then its payload: the harness writes it with a
 * valid header and checksum, so every input reaches the checks on the
 * tables themselves, then opens the tokenizers again (a snapshot) or builds
 * the encoder that reads it, and encodes a few texts. A file the checks take may give other ids (the
 * cache is as trusted as the tokenizer file); none may crash or hang.
 * With LIPI_FUZZ_WRITE_SEEDS=DIR the files' own payloads are written there
 * as seeds (tests/fuzz/corpus/tabcache). */
#include "tests/fuzz/fuzz.h"

#include "tokenizer/base.h"
#include "tokenizer/tokenizer_layout.h"

#define N_TOK 3
#define MAX_FILES 8
#define N_FILES 7 /* backtrack, 3 snapshots, tiktoken-merges, unigram, wordpiece */

static lipi_tokenizer *toks[N_TOK];
static char tiktoken_path[256], vocab_path[256], unigram_path[256];
static struct {
    char name[128]; /* kind-key.tab */
    char kind[32];
    char key[65];
} files[MAX_FILES];
static size_t n_files;

static int cmp_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static lipi_tokenizer *open_cached(const char *path)
{
    lipi_open_options o = {.table_cache = LIPI_FLAG_ON, .pattern = lipi_split_pattern("gpt2")};
    lipi_tokenizer *t = NULL;
    lipi_error err;
    if (lipi_tokenizer_open(path, &o, &t, &err) != LIPI_OK) {
        fprintf(stderr, "fuzz_tabcache: cannot open %s: %s\n", path, err.msg);
        abort();
    }
    return t;
}

/* Builds an encoder for t (reading or writing its cache files) and, when
 * it builds, encodes a few texts. */
static void use(const lipi_tokenizer *t)
{
    static const char *const texts[] = {"the abc ab  cab the\tthe", "théâtre abcabc 12", "x"};
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err;
    uint32_t ids[256];
    if (lipi_encoder_new(t, &enc, &err) != LIPI_OK || lipi_session_new(enc, &s) != LIPI_OK) {
        lipi_encoder_free(enc);
        return;
    }
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        lipi_encoding e = {.ids = ids, .cap = 256};
        fuzz_check_status(lipi_encode(s, texts[i], strlen(texts[i]), NULL, &e, &err));
    }
    lipi_session_free(s);
    lipi_encoder_free(enc);
}

static void init(void)
{
    char dir[256], p[320];
    lipi_buf ranks = {0};
    /* The fuzz folder itself, which is emptied and removed at exit. */
    snprintf(dir, sizeof dir, "%s", fuzz_dir());
    setenv("LIPI_CACHE_DIR", dir, 1);
    /* Bytes, then tokens every one of which has a merge. */
    static const char *const multi[] = {"ab", "abc", "th", "the", " the", "ca", "cab"};
    for (int r = 0; r < 256 + (int)(sizeof multi / sizeof *multi); r++) {
        uint8_t b = (uint8_t)r;
        const uint8_t *tok = r < 256 ? &b : (const uint8_t *)multi[r - 256];
        size_t len = r < 256 ? 1 : strlen(multi[r - 256]);
        char num[16];
        if (lipi_base64_encode(tok, len, &ranks) != LIPI_OK)
            abort();
        snprintf(num, sizeof num, " %d\n", r);
        if (lipi_buf_append(&ranks, num, strlen(num)) != LIPI_OK)
            abort();
    }
    snprintf(tiktoken_path, sizeof tiktoken_path, "%s", fuzz_file("fuzz.tiktoken", ranks.p, ranks.len));
    lipi_buf_free(&ranks);
    static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nab\n##c\n##ab\nc\na\nb\n##b\nt\n##he\n";
    static const char unigram[] =
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], "
        "[\"a\", -2], [\"b\", -2], [\"c\", -2], [\"ab\", -1.5], [\"abc\", -1], [\"the\", -1], "
        "[\"t\", -3], [\"h\", -3], [\"e\", -3], [\"\\u00e9\", -4]]}}";
    snprintf(vocab_path, sizeof vocab_path, "%s", fuzz_file("vocab.txt", vocab, sizeof vocab - 1));
    snprintf(unigram_path, sizeof unigram_path, "%s",
             fuzz_file("unigram.json", unigram, sizeof unigram - 1));
    toks[0] = open_cached(tiktoken_path);
    toks[1] = open_cached(vocab_path);
    toks[2] = open_cached(unigram_path);
    for (int i = 0; i < N_TOK; i++)
        use(toks[i]);
    DIR *d = opendir(dir);
    if (!d)
        abort();
    for (struct dirent *e; (e = readdir(d)) && n_files < MAX_FILES;) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 70 || n >= sizeof files[0].name ||
            strcmp(e->d_name + n - 4, ".tab") != 0)
            continue;
        strcpy(files[n_files].name, e->d_name);
        n_files++;
    }
    closedir(d);
    qsort(files, n_files, sizeof *files, cmp_name);
    for (size_t i = 0; i < n_files; i++) {
        size_t n = strlen(files[i].name), k = n - 4 - 64;
        memcpy(files[i].key, files[i].name + k, 64);
        files[i].key[64] = '\0';
        snprintf(files[i].kind, sizeof files[i].kind, "%.*s", (int)(k - 1), files[i].name);
    }
    if (n_files != N_FILES)
        abort();
    const char *seeds = getenv("LIPI_FUZZ_WRITE_SEEDS");
    for (size_t i = 0; seeds && i < n_files; i++) {
        char *data = NULL;
        size_t len = 0;
        snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
        if (lipi_read_file(p, (size_t)1 << 30, &data, &len, NULL) != LIPI_OK || len < 112)
            abort();
        data[111] = (char)i; /* the selector byte, just before the payload */
        /* The three snapshots share a kind: number them by the selector. */
        if (strcmp(files[i].kind, "snapshot") == 0)
            snprintf(p, sizeof p, "%s/%s-%zu", seeds, files[i].kind, i);
        else
            snprintf(p, sizeof p, "%s/%s", seeds, files[i].kind);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(data + 111, 1, len - 111, f) != len - 111 || fclose(f) != 0)
            abort();
        lipi_free(data);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (!n_files)
        init();
    if (size == 0)
        return 0;
    size_t f = data[0] % n_files;
    lipi_tabcache_writer w;
    if (!lipi_tabcache_create(&w, files[f].kind, files[f].key))
        abort();
    lipi_tabcache_put(&w, data + 1, size - 1);
    lipi_tabcache_commit(&w);
    if (strcmp(files[f].kind, "snapshot") == 0) {
        /* Whichever tokenizer it names: a snapshot the checks take may be
         * another tokenizer (as a doctored tokenizer file would), never a
         * crash. */
        const char *const paths[N_TOK] = {tiktoken_path, vocab_path, unigram_path};
        for (int i = 0; i < N_TOK; i++) {
            lipi_tokenizer *t = open_cached(paths[i]);
            use(t);
            lipi_tokenizer_free(t);
        }
    } else if (strcmp(files[f].kind, "tiktoken-merges") == 0) {
        /* Read only when the tokenizer is built: not from its snapshot. */
        char snap[400];
        for (size_t i = 0; i < n_files; i++)
            if (strcmp(files[i].kind, "snapshot") == 0) {
                snprintf(snap, sizeof snap, "%s/%s", fuzz_dir(), files[i].name);
                unlink(snap);
            }
        lipi_tokenizer *t = open_cached(tiktoken_path);
        use(t);
        lipi_tokenizer_free(t);
    } else {
        use(toks[strcmp(files[f].kind, "backtrack") == 0 ? 0
                     : strcmp(files[f].kind, "wordpiece") == 0 ? 1
                                                               : 2]);
    }
    return 0;
}

/* Plain vocabulary files: BERT vocab.txt (WordPiece) and GPT-2 vocab.json +
 * merges.txt (byte-level BPE), built the way Hugging Face's BertConverter
 * and GPT2Converter / RobertaConverter build them. */
#include "tokenizer/read_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int clip(size_t len)
{
    return (int)(len > 64 ? 64 : len);
}

static lipi_status oom(const char *name, lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, name, 0, 0, "out of memory");
}

/* A special-token setting of tokenizer_config.json: a string or an
 * AddedToken object {"content": ...}. NULL when absent or null. */
static const char *config_token(const json_t *cfg, const char *key)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_is_string(v) && json_string_length(v) > 0 ? json_string_value(v) : NULL;
}

static lipi_status config_load(const char *text, size_t len, const char *name, json_t **out,
                               lipi_error *err)
{
    json_error_t je;
    *out = NULL;
    if (!text)
        return LIPI_OK;
    json_t *root = lipi_json_loadb(text, len, 0, &je);
    if (!root) {
        if (lipi_rd_json_oom(&je))
            return oom(name, err);
        return lipi_error_set(err, LIPI_EFORMAT, name, je.line > 0 ? (size_t)je.line : 0,
                              je.column > 0 ? (size_t)je.column : 0,
                              "tokenizer_config.json: invalid JSON: %s", je.text);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "tokenizer_config.json: expected an object");
    }
    *out = root;
    return LIPI_OK;
}

/* ======================================================================== */
/* BERT WordPiece                                                            */
/* ======================================================================== */

lipi_status lipi_rd_bert_config(const char *text, size_t len, const char *name,
                                lipi_rd_bert *spec, json_t **keep, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *cfg = NULL;
    const json_t *v;

    *keep = NULL;
    TRY(config_load(text, len, name, &cfg, err));
    if (!cfg)
        goto done;
    if (json_is_boolean(v = json_object_get(cfg, "do_lower_case")))
        spec->lowercase = json_is_true(v);
    v = json_object_get(cfg, "strip_accents");
    if (json_is_boolean(v)) {
        spec->strip_accents_set = true;
        spec->strip_accents = json_is_true(v);
    }
    if (json_is_boolean(v = json_object_get(cfg, "tokenize_chinese_chars")))
        spec->tokenize_chinese_chars = json_is_true(v);
    if (config_token(cfg, "unk_token"))
        spec->unk = config_token(cfg, "unk_token");
    if (config_token(cfg, "sep_token"))
        spec->sep = config_token(cfg, "sep_token");
    if (config_token(cfg, "pad_token"))
        spec->pad = config_token(cfg, "pad_token");
    if (config_token(cfg, "cls_token"))
        spec->cls = config_token(cfg, "cls_token");
    if (config_token(cfg, "mask_token"))
        spec->mask = config_token(cfg, "mask_token");
    *keep = cfg;
    cfg = NULL;
done:
    json_decref(cfg);
    return st;
}

/* Id of special token s: its vocabulary id, or the next id after the
 * vocabulary and the special tokens already placed there (Hugging Face adds
 * special tokens missing from the vocabulary at the end, in this order). */
static uint32_t special_id(const lipi_strmap *map, const lipi_strref *tok, size_t n,
                           const lipi_rd_added *added, const char *s)
{
    uint32_t id;
    if (lipi_strmap_find(map, tok, s, strlen(s), &id))
        return id;
    for (size_t i = 0; i < added->n; i++)
        if (strcmp(added->a[i].content, s) == 0)
            return added->a[i].id;
    id = (uint32_t)n;
    for (size_t i = 0; i < added->n; i++)
        if (added->a[i].id >= id)
            id = added->a[i].id + 1;
    return id;
}

lipi_status lipi_rd_bert_build(const char *name, const lipi_strref *tok, size_t n,
                               const lipi_rd_bert *spec, lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_strmap map = {0};
    lipi_rd_added added = {0};
    json_t *doc = NULL;
    lipi_post_processor *post = NULL;
    lipi_decoder *dec = NULL;
    lipi_rd_model rm = {0};
    const char *unk = spec->unk ? spec->unk : "[UNK]";
    const char *sep = spec->sep ? spec->sep : "[SEP]";
    const char *pad = spec->pad ? spec->pad : "[PAD]";
    const char *cls = spec->cls ? spec->cls : "[CLS]";
    const char *mask = spec->mask ? spec->mask : "[MASK]";
    const char *order[] = {unk, sep, pad, cls, mask};

    *out = NULL;
    st = lipi_strmap_build(&map, tok, n, NULL, NULL);
    if (st != LIPI_OK)
        goto done;
    for (size_t i = 0; i < 5; i++) {
        if (lipi_utf8_valid_prefix(order[i], strlen(order[i])) < strlen(order[i])) {
            st = lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                "tokenizer_config.json: special token is not UTF-8");
            goto done;
        }
        uint32_t id = special_id(&map, tok, n, &added, order[i]);
        bool seen = false;
        for (size_t k = 0; k < added.n; k++)
            seen |= added.a[k].id == id;
        if (!seen)
            TRY(lipi_rd_added_push(&added, id, order[i], strlen(order[i]), true, false));
    }
    uint32_t cls_id = special_id(&map, tok, n, &added, cls);
    uint32_t sep_id = special_id(&map, tok, n, &added, sep);
    const lipi_rd_piece single[] = {{cls, cls_id, 0, 0}, {NULL, 0, 0, 0}, {sep, sep_id, 0, 0}};
    const lipi_rd_piece pair[] = {{cls, cls_id, 0, 0}, {NULL, 0, 0, 0}, {sep, sep_id, 0, 0},
                                  {NULL, 0, 1, 1},     {sep, sep_id, 0, 1}};

    doc = json_object();
    json_t *norm = json_pack("{s:s, s:b, s:b, s:o, s:b}", "type", "BertNormalizer", "clean_text",
                             1, "handle_chinese_chars", spec->tokenize_chinese_chars,
                             "strip_accents",
                             spec->strip_accents_set ? json_boolean(spec->strip_accents)
                                                     : json_null(),
                             "lowercase", spec->lowercase);
    if (!doc) {
        json_decref(norm);
        st = LIPI_ENOMEM;
        goto done;
    }
    if (json_object_set_new(doc, "normalizer", norm) != 0 ||
        json_object_set_new(doc, "pre_tokenizer", lipi_rd_type("BertPreTokenizer")) != 0 ||
        !(post = lipi_rd_post_template(single, 3, pair, 5)) || !(dec = lipi_rd_dec_wordpiece())) {
        st = LIPI_ENOMEM;
        goto done;
    }
    rm.type = LIPI_MODEL_WORDPIECE;
    lipi_model_options_default(LIPI_MODEL_WORDPIECE, &rm.opt);
    rm.tok = tok;
    rm.n = n;
    rm.unk_token = unk;
    rm.unk_len = strlen(unk);
    st = lipi_rd_assemble(name, doc, post, dec, &rm, &added, out, err);
    doc = NULL;
    post = NULL;
    dec = NULL;
done:
    if (st == LIPI_ENOMEM)
        oom(name, err);
    json_decref(doc);
    lipi_post_processor_free(post);
    lipi_decoder_free(dec);
    lipi_rd_added_free(&added);
    lipi_strmap_free(&map);
    return st;
}

/* A token listed twice keeps its last id, as in Hugging Face's vocab dict;
 * its earlier lines become ids without a token. One pass from the last line
 * over a hash set of the tokens kept: linear however many repeats a file
 * has (sorting the tokens took most of reading a vocab.txt). */
static lipi_status drop_repeats(lipi_strref *tok, size_t n)
{
    size_t cap = 16;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4 / sizeof(size_t))
            return LIPI_ENOMEM;
        cap *= 2;
    }
    size_t *slot = lipi_reallocarray(NULL, cap, sizeof *slot);
    if (!slot)
        return LIPI_ENOMEM;
    memset(slot, 0xff, cap * sizeof *slot);
    for (size_t i = n; i-- > 0;) {
        const lipi_strref *t = &tok[i];
        size_t h = (size_t)lipi_hash_bytes(t->s, t->len) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            size_t k = slot[h];
            if (k == SIZE_MAX) {
                slot[h] = i;
                break;
            }
            if (tok[k].len == t->len && (t->len == 0 || memcmp(tok[k].s, t->s, t->len) == 0)) {
                tok[i].s = NULL;
                break;
            }
        }
    }
    lipi_free(slot);
    return LIPI_OK;
}

/* Whether s contains "uncased" in any letter case. */
static bool says_uncased(const char *s)
{
    for (; s && *s; s++)
        if (strncasecmp(s, "uncased", 7) == 0)
            return true;
    return false;
}

lipi_status lipi_tokenizer_from_vocab_txt(const char *data, size_t len, const char *name,
                                          const char *config, size_t config_len,
                                          lipi_flag lowercase, lipi_flag strip_accents,
                                          lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_strref *tok = NULL;
    size_t n = 0, lines = 1;
    json_t *keep = NULL;
    lipi_rd_bert spec = {.tokenize_chinese_chars = true};

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no output pointer given");
    *out = NULL;
    if (!data && len)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no data given");
    name = name ? name : "";
    spec.lowercase = says_uncased(name);
    TRY(lipi_rd_bert_config(config, config_len, name, &spec, &keep, err));
    if (lowercase != LIPI_FLAG_AUTO)
        spec.lowercase = lowercase == LIPI_FLAG_ON;
    if (strip_accents != LIPI_FLAG_AUTO) {
        spec.strip_accents_set = true;
        spec.strip_accents = strip_accents == LIPI_FLAG_ON;
    }

    /* A UTF-8 byte order mark is not part of the first token. */
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0) {
        data += 3;
        len -= 3;
    }
    for (const char *p = data; (p = memchr(p, '\n', (size_t)(data + len - p))); p++)
        lines++;
    tok = lipi_calloc(lines, sizeof *tok);
    if (!tok) {
        st = oom(name, err);
        goto done;
    }
    for (const char *p = data, *end = data + len; p < end; n++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        /* A CRLF file's "\r" would make every token unmatchable. */
        if (le > p && le[-1] == '\r')
            le--;
        size_t ok = lipi_utf8_valid_prefix(p, (size_t)(le - p));
        if (ok < (size_t)(le - p)) {
            st = lipi_error_set(err, LIPI_EFORMAT, name, n + 1, ok + 1,
                                "expected UTF-8 text, found byte 0x%02x", (unsigned char)p[ok]);
            goto done;
        }
        tok[n] = (lipi_strref){p, (size_t)(le - p)};
        p = nl ? nl + 1 : end;
    }
    if (n == 0) {
        st = lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                            "expected one token per line, found an empty file");
        goto done;
    }
    st = drop_repeats(tok, n);
    if (st != LIPI_OK) {
        st = oom(name, err);
        goto done;
    }
    TRY(lipi_rd_bert_build(name, tok, n, &spec, out, err));
done:
    lipi_free(tok);
    json_decref(keep);
    return st;
}

/* ======================================================================== */
/* GPT-2 vocab.json + merges.txt                                             */
/* ======================================================================== */

typedef struct {
    lipi_strref *tok;
    size_t n;
    uint32_t (*merges)[2];
    size_t n_merges;
    lipi_strmap map;
} bpe_files;

static void bpe_files_free(bpe_files *f)
{
    lipi_free(f->tok);
    lipi_free(f->merges);
    lipi_strmap_free(&f->map);
}

/* vocab.json: {"token": id, ...}. Token strings point into `root`. */
static lipi_status parse_vocab_json(const json_t *root, const char *name, bpe_files *f,
                                    lipi_error *err)
{
    lipi_status st = LIPI_OK;
    const char *key;
    const json_t *v;
    size_t count = json_object_size(root), d1 = 0, d2 = 0;
    json_int_t max = -1;

    if (!json_is_object(root))
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "vocab.json: expected an object of token ids");
    json_object_foreach((json_t *)root, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) >= 2 * (uint64_t)count + 256)
            return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                  "vocab.json: \"%.*s\": expected an id from 0 to %zu", clip(strlen(key)),
                                  key, 2 * count + 255);
        if (json_integer_value(v) > max)
            max = json_integer_value(v);
    }
    f->n = (size_t)(max + 1);
    f->tok = lipi_calloc(f->n ? f->n : 1, sizeof *f->tok);
    if (!f->tok)
        return oom(name, err);
    json_object_foreach((json_t *)root, key, v) {
        size_t id = (size_t)json_integer_value(v);
        if (f->tok[id].s)
            return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                  "vocab.json: expected distinct ids, found %zu for both \"%.*s\" "
                                  "and \"%.*s\"",
                                  id, clip(f->tok[id].len), f->tok[id].s, clip(strlen(key)), key);
        f->tok[id] = (lipi_strref){key, strlen(key)};
    }
    st = lipi_strmap_build(&f->map, f->tok, f->n, &d1, &d2);
    if (st != LIPI_OK)
        return oom(name, err);
    return LIPI_OK;
}

/* merges.txt: an optional "#version" line, then "left right" per line. */
static lipi_status parse_merges_txt(const char *data, size_t len, const char *name,
                                    bpe_files *f, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t lines = 1, cap;
    for (const char *p = data; (p = memchr(p, '\n', (size_t)(data + len - p))); p++)
        lines++;
    cap = lines;
    f->merges = lipi_reallocarray(NULL, cap, sizeof *f->merges);
    if (!f->merges)
        return oom(name, err);
    const char *p = data, *end = data + len;
    for (size_t line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le > p && le[-1] == '\r')
            le--;
        size_t n = (size_t)(le - p);
        const char *next = nl ? nl + 1 : end;
        if (n == 0 || (n >= 8 && memcmp(p, "#version", 8) == 0)) {
            p = next;
            continue;
        }
        const char *sp = memchr(p, ' ', n);
        if (!sp || sp == p || sp + 1 == le || memchr(sp + 1, ' ', (size_t)(le - sp - 1))) {
            st = lipi_error_set(err, LIPI_EFORMAT, name, line, 0,
                                "merges.txt: expected \"left right\" (two tokens and one space), "
                                "found \"%.*s\"",
                                clip(n), p);
            goto done;
        }
        uint32_t a, b;
        if (!lipi_strmap_find(&f->map, f->tok, p, (size_t)(sp - p), &a) ||
            !lipi_strmap_find(&f->map, f->tok, sp + 1, (size_t)(le - sp - 1), &b)) {
            bool left = !lipi_strmap_find(&f->map, f->tok, p, (size_t)(sp - p), &a);
            st = lipi_error_set(err, LIPI_EFORMAT, name, line, left ? 1 : (size_t)(sp - p) + 2,
                                "merges.txt: expected tokens of vocab.json, found \"%.*s\"",
                                left ? clip((size_t)(sp - p)) : clip((size_t)(le - sp - 1)),
                                left ? p : sp + 1);
            goto done;
        }
        f->merges[f->n_merges][0] = a;
        f->merges[f->n_merges][1] = b;
        f->n_merges++;
        p = next;
    }
done:
    return st;
}

lipi_status lipi_tokenizer_from_gpt2(const char *vocab_json, size_t vocab_len,
                                     const char *merges, size_t merges_len, const char *name,
                                     const char *config, size_t config_len,
                                     lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    json_t *root = NULL, *cfg = NULL, *doc = NULL;
    lipi_post_processor *post = NULL;
    lipi_decoder *dec = NULL;
    json_error_t je;
    bpe_files f = {0};
    lipi_rd_added added = {0};
    lipi_rd_model rm = {0};

    if (!out)
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no output pointer given");
    *out = NULL;
    if ((!vocab_json && vocab_len) || (!merges && merges_len))
        return lipi_error_set(err, LIPI_EINVAL, name, 0, 0, "no data given");
    name = name ? name : "";
    root = lipi_json_loadb(vocab_json, vocab_len, 0, &je);
    if (!root) {
        st = lipi_rd_json_oom(&je)
                 ? oom(name, err)
                 : lipi_error_set(err, LIPI_EFORMAT, name, je.line > 0 ? (size_t)je.line : 0,
                                  je.column > 0 ? (size_t)je.column : 0,
                                  "vocab.json: invalid JSON: %s", je.text);
        goto done;
    }
    TRY(config_load(config, config_len, name, &cfg, err));
    TRY(parse_vocab_json(root, name, &f, err));
    TRY(parse_merges_txt(merges, merges_len, name, &f, err));

    /* RoBERTa-style folders say so in their config; anything else is
     * GPT-2 style. */
    const char *cls_name = json_string_value(json_object_get(cfg, "tokenizer_class"));
    bool roberta = cls_name && strstr(cls_name, "Roberta");
    bool prefix_space = json_is_true(json_object_get(cfg, "add_prefix_space"));
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *s = config_token(cfg, keys[k]);
        uint32_t id;
        if (s && lipi_strmap_find(&f.map, f.tok, s, strlen(s), &id)) {
            bool seen = false;
            for (size_t i = 0; i < added.n; i++)
                seen |= added.a[i].id == id;
            if (!seen)
                TRY(lipi_rd_added_push(&added, id, s, strlen(s), true, !roberta));
        }
    }
    uint32_t eot;
    if (!cfg && lipi_strmap_find(&f.map, f.tok, "<|endoftext|>", 13, &eot))
        TRY(lipi_rd_added_push(&added, eot, "<|endoftext|>", 13, true, true));

    if (roberta) {
        const char *sep = config_token(cfg, "sep_token"), *cls = config_token(cfg, "cls_token");
        uint32_t sep_id = 0, cls_id = 0;
        sep = sep ? sep : "</s>";
        cls = cls ? cls : "<s>";
        if (!lipi_strmap_find(&f.map, f.tok, sep, strlen(sep), &sep_id) ||
            !lipi_strmap_find(&f.map, f.tok, cls, strlen(cls), &cls_id)) {
            st = lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                "tokenizer_config.json: expected the tokens \"%.32s\" and "
                                "\"%.32s\" in vocab.json, found them missing",
                                sep, cls);
            goto done;
        }
        post = lipi_rd_post_roberta(sep, sep_id, cls, cls_id, prefix_space);
    } else {
        post = lipi_rd_post_bytelevel();
    }
    doc = json_object();
    dec = lipi_rd_dec_bytelevel();
    if (!doc || !post || !dec ||
        json_object_set_new(doc, "pre_tokenizer", lipi_rd_bytelevel(prefix_space, true, true)) != 0) {
        st = oom(name, err);
        goto done;
    }
    rm.type = LIPI_MODEL_BPE;
    lipi_model_options_default(LIPI_MODEL_BPE, &rm.opt);
    rm.opt.byte_level = true;
    rm.tok = f.tok;
    rm.n = f.n;
    rm.merges = (const uint32_t(*)[2])f.merges;
    rm.n_merges = f.n_merges;
    st = lipi_rd_assemble(name, doc, post, dec, &rm, &added, out, err);
    doc = NULL;
    post = NULL;
    dec = NULL;
done:
    if (st == LIPI_ENOMEM)
        oom(name, err);
    json_decref(doc);
    lipi_post_processor_free(post);
    lipi_decoder_free(dec);
    json_decref(root);
    json_decref(cfg);
    bpe_files_free(&f);
    lipi_rd_added_free(&added);
    return st;
}

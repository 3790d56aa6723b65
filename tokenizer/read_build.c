/* What the readers of other formats share: the GPT-2 byte alphabet, small
 * Hugging Face JSON builders, and the assembly of a tokenizer from a JSON
 * document plus a model built from arrays (see read_impl.h). */
#include "tokenizer/read_impl.h"

#include "tokenizer/base_json.h"

#include <math.h>
#include <string.h>

/* ======================================================================== */
/* The GPT-2 byte alphabet                                                   */
/* ======================================================================== */

static bool byte_is_printable(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

void lipi_rd_bytemap_init(lipi_rd_bytemap *m)
{
    unsigned next = 256;
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = byte_is_printable(b) ? b : next++;
        char buf[4];
        size_t n = lipi_utf8_encode(cp, buf);
        m->len[b] = (uint8_t)n;
        memcpy(m->utf8[b], buf, n);
    }
}

lipi_status lipi_rd_bytes_to_alphabet(const lipi_rd_bytemap *m, const uint8_t *s, size_t n,
                                      lipi_buf *out)
{
    lipi_status st = LIPI_OK;
    if (n > SIZE_MAX / 2)
        return LIPI_ENOMEM;
    TRY(lipi_buf_reserve(out, 2 * n));
    for (size_t i = 0; i < n; i++) {
        memcpy(out->p + out->len, m->utf8[s[i]], m->len[s[i]]);
        out->len += m->len[s[i]];
    }
    out->p[out->len] = '\0';
done:
    return st;
}

/* ======================================================================== */
/* JSON pieces                                                               */
/* ======================================================================== */

json_t *lipi_rd_type(const char *type)
{
    return json_pack("{s:s}", "type", type);
}

json_t *lipi_rd_sequence(const char *key, json_t *arr)
{
    return json_pack("{s:s, s:o}", "type", "Sequence", key, arr);
}

json_t *lipi_rd_replace(bool regex, const char *pattern, const char *content)
{
    return json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern",
                     regex ? "Regex" : "String", pattern, "content", content);
}

json_t *lipi_rd_split(const char *regex, const char *behavior)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", regex,
                     "behavior", behavior, "invert", 0);
}

json_t *lipi_rd_bytelevel(bool add_prefix_space, bool trim_offsets, bool use_regex)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                     add_prefix_space, "trim_offsets", trim_offsets, "use_regex", use_regex);
}

lipi_status lipi_rd_added_push(lipi_rd_added *l, uint32_t id, const char *s, size_t len,
                               bool special, bool normalized)
{
    lipi_status st = LIPI_OK;
    char *c = lipi_strndup(s, len);
    if (!c)
        return LIPI_ENOMEM;
    st = lipi_grow((void **)&l->a, &l->cap, l->n + 1, sizeof *l->a);
    if (st != LIPI_OK) {
        lipi_free(c);
        return st;
    }
    l->a[l->n++] = (lipi_added_token){.content = c, .len = len, .id = id, .special = special,
                                      .normalized = normalized};
    return LIPI_OK;
}

void lipi_rd_added_free(lipi_rd_added *l)
{
    for (size_t i = 0; i < l->n; i++)
        lipi_free(l->a[i].content);
    lipi_free(l->a);
    memset(l, 0, sizeof *l);
}

/* ======================================================================== */
/* Post-processors and decoders                                              */
/* ======================================================================== */
/* Built as structs, not parsed from JSON: jansson's parser mishandles its
 * own allocation failures, and readers must fail cleanly on every one. */

static bool own(lipi_ownstr *o, const char *s)
{
    o->len = strlen(s);
    o->s = lipi_strndup(s, o->len);
    return o->s != NULL;
}

lipi_post_processor *lipi_rd_post_bytelevel(void)
{
    lipi_post_processor *p = lipi_calloc(1, sizeof *p);
    if (p) {
        p->type = LIPI_POST_BYTELEVEL;
        p->add_prefix_space = true;
        p->trim_offsets = false;
        p->use_regex = true;
    }
    return p;
}

lipi_post_processor *lipi_rd_post_roberta(const char *sep, uint32_t sep_id, const char *cls,
                                          uint32_t cls_id, bool add_prefix_space)
{
    lipi_post_processor *p = lipi_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->type = LIPI_POST_ROBERTA;
    p->trim_offsets = true;
    p->add_prefix_space = add_prefix_space;
    p->sep = (lipi_post_token){lipi_strndup(sep, strlen(sep)), strlen(sep), sep_id};
    p->cls = (lipi_post_token){lipi_strndup(cls, strlen(cls)), strlen(cls), cls_id};
    if (!p->sep.token || !p->cls.token) {
        lipi_post_processor_free(p);
        return NULL;
    }
    return p;
}

static int special_name_cmp(const void *a, const void *b)
{
    const lipi_template_special *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = memcmp(x->name, y->name, n);
    return r ? r : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Index of special token `name` in p->special, adding it when new. */
static bool template_special(lipi_post_processor *p, const lipi_rd_piece *pc, size_t *idx)
{
    size_t len = strlen(pc->special);
    for (size_t i = 0; i < p->n_special; i++) {
        if (p->special[i].name_len == len && memcmp(p->special[i].name, pc->special, len) == 0) {
            *idx = i;
            return true;
        }
    }
    lipi_template_special *sp = &p->special[p->n_special];
    sp->name = lipi_strndup(pc->special, len);
    sp->ids = lipi_calloc(1, sizeof *sp->ids);
    sp->tokens = lipi_calloc(1, sizeof *sp->tokens);
    sp->token_lens = lipi_calloc(1, sizeof *sp->token_lens);
    *idx = p->n_special++;
    if (!sp->name || !sp->ids || !sp->tokens || !sp->token_lens)
        return false;
    sp->name_len = len;
    sp->tokens[0] = lipi_strndup(pc->special, len);
    if (!sp->tokens[0])
        return false;
    sp->n = 1;
    sp->ids[0] = pc->special_id;
    sp->token_lens[0] = len;
    return true;
}

static bool template_fill(lipi_post_processor *p, const lipi_rd_piece *pc, size_t n,
                          lipi_template_piece **out, size_t *n_out)
{
    *out = lipi_calloc(n ? n : 1, sizeof **out);
    if (!*out)
        return false;
    *n_out = n;
    for (size_t i = 0; i < n; i++) {
        lipi_template_piece *t = &(*out)[i];
        t->type_id = pc[i].type_id;
        if (pc[i].special) {
            t->is_special = true;
            if (!template_special(p, &pc[i], &t->special))
                return false;
        } else {
            t->seq = (uint8_t)(pc[i].seq != 0);
        }
    }
    return true;
}

lipi_post_processor *lipi_rd_post_template(const lipi_rd_piece *single, size_t n_single,
                                           const lipi_rd_piece *pair, size_t n_pair)
{
    lipi_post_processor *p = lipi_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->type = LIPI_POST_TEMPLATE;
    p->special = lipi_calloc(n_single + n_pair + 1, sizeof *p->special);
    if (!p->special || !template_fill(p, single, n_single, &p->single, &p->n_single) ||
        !template_fill(p, pair, n_pair, &p->pair, &p->n_pair)) {
        lipi_post_processor_free(p);
        return NULL;
    }
    /* The special tokens are kept sorted by name, as the loader keeps
     * them; the pieces refer to them by index, so remap after sorting.
     * Readers use at most a BOS / CLS and an EOS / SEP token. */
    size_t order[8];
    size_t n = p->n_special;
    LIPI_ASSERT(n <= 8);
    lipi_template_special sorted[8];
    memcpy(sorted, p->special, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, special_name_cmp);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n; k++)
            if (sorted[k].name == p->special[i].name)
                order[i] = k;
    for (size_t i = 0; i < p->n_single; i++)
        if (p->single[i].is_special)
            p->single[i].special = order[p->single[i].special];
    for (size_t i = 0; i < p->n_pair; i++)
        if (p->pair[i].is_special)
            p->pair[i].special = order[p->pair[i].special];
    memcpy(p->special, sorted, n * sizeof *sorted);
    return p;
}

lipi_status lipi_rd_post_bos_eos(const lipi_strref *bos, uint32_t bos_id,
                                 const lipi_strref *eos, uint32_t eos_id,
                                 lipi_post_processor **out)
{
    char *bs = bos ? lipi_strndup(bos->s, bos->len) : NULL;
    char *es = eos ? lipi_strndup(eos->s, eos->len) : NULL;
    lipi_rd_piece single[3], pair[6];
    size_t ns = 0, np = 0;
    *out = NULL;
    if ((bos && !bs) || (eos && !es))
        goto done;
    if (bos)
        single[ns++] = (lipi_rd_piece){bs, bos_id, 0, 0};
    single[ns++] = (lipi_rd_piece){NULL, 0, 0, 0};
    if (eos)
        single[ns++] = (lipi_rd_piece){es, eos_id, 0, 0};
    memcpy(pair, single, ns * sizeof *single);
    np = ns;
    if (bos)
        pair[np++] = (lipi_rd_piece){bs, bos_id, 0, 1};
    pair[np++] = (lipi_rd_piece){NULL, 0, 1, 1};
    if (eos)
        pair[np++] = (lipi_rd_piece){es, eos_id, 0, 1};
    *out = lipi_rd_post_template(single, ns, pair, np);
done:
    lipi_free(bs);
    lipi_free(es);
    return *out ? LIPI_OK : LIPI_ENOMEM;
}

lipi_decoder *lipi_rd_dec_bytelevel(void)
{
    lipi_decoder *d = lipi_calloc(1, sizeof *d);
    if (d) {
        d->type = LIPI_DEC_BYTELEVEL;
        d->bytelevel.add_prefix_space = d->bytelevel.trim_offsets = d->bytelevel.use_regex = true;
    }
    return d;
}

lipi_decoder *lipi_rd_dec_wordpiece(void)
{
    lipi_decoder *d = lipi_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->type = LIPI_DEC_WORDPIECE;
    d->wordpiece.cleanup = true;
    if (!own(&d->wordpiece.prefix, "##")) {
        lipi_decoder_free(d);
        return NULL;
    }
    return d;
}

lipi_decoder *lipi_rd_dec_metaspace(lipi_prepend_scheme scheme)
{
    lipi_decoder *d = lipi_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->type = LIPI_DEC_METASPACE;
    d->metaspace.prepend_scheme = scheme;
    d->metaspace.split = true;
    if (!own(&d->metaspace.replacement, "\xe2\x96\x81")) {
        lipi_decoder_free(d);
        return NULL;
    }
    return d;
}

lipi_decoder *lipi_rd_dec_spm_bytes(bool meta_to_space, bool strip_first_space)
{
    bool ok = false;
    lipi_decoder *d = lipi_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->type = LIPI_DEC_SEQUENCE;
    d->sequence.items = lipi_calloc(4, sizeof *d->sequence.items);
    if (!d->sequence.items)
        goto done;
    lipi_decoder *it = d->sequence.items;
    size_t n = 0;
    if (meta_to_space) {
        it[n].type = LIPI_DEC_REPLACE;
        d->sequence.n_items = ++n;
        if (!own(&it[n - 1].replace.pattern, "\xe2\x96\x81") ||
            !own(&it[n - 1].replace.content, " "))
            goto done;
    }
    it[n++].type = LIPI_DEC_BYTEFALLBACK;
    it[n++].type = LIPI_DEC_FUSE;
    d->sequence.n_items = n;
    if (strip_first_space) {
        it[n].type = LIPI_DEC_STRIP;
        it[n].strip.start = 1;
        d->sequence.n_items = ++n;
        if (!own(&it[n - 1].strip.content, " "))
            goto done;
    }
    ok = true;
done:
    if (!ok) {
        lipi_decoder_free(d);
        d = NULL;
    }
    return d;
}

/* ======================================================================== */
/* Assembly                                                                  */
/* ======================================================================== */

static lipi_status oom(const char *name, lipi_error *err)
{
    return lipi_error_set(err, LIPI_ENOMEM, name, 0, 0, "out of memory");
}

static int clip(size_t len)
{
    return (int)(len > 64 ? 64 : len);
}

/* Builds the lipi_vocab_model from the caller's arrays. */
static lipi_status build_model(const char *name, const lipi_rd_model *rm, lipi_vocab_model *m,
                               lipi_error *err)
{
    lipi_status st = LIPI_OK;
    size_t d1 = 0, d2 = 0;

    m->type = rm->type;
    m->opt = rm->opt;
    if (m->opt.unk_id >= 0 && (uint64_t)m->opt.unk_id >= rm->n)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "unknown-token id %lld is not one of the %zu token ids",
                              (long long)m->opt.unk_id, rm->n);
    st = lipi_vocab_build(&m->vocab, rm->tok, rm->n, &d1, &d2);
    if (st == LIPI_EINVAL)
        return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                              "expected distinct tokens, found ids %zu and %zu both \"%.*s\"", d1,
                              d2, clip(rm->tok[d1].len), rm->tok[d1].s);
    if (st != LIPI_OK)
        return oom(name, err);

    if (rm->type == LIPI_MODEL_UNIGRAM) {
        m->scores = lipi_reallocarray(NULL, rm->n ? rm->n : 1, sizeof *m->scores);
        if (!m->scores)
            return oom(name, err);
        for (size_t i = 0; i < rm->n; i++) {
            if (!isfinite(rm->scores[i]))
                return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                      "expected a finite score for token %zu, found %g", i,
                                      rm->scores[i]);
            m->scores[i] = rm->scores[i];
        }
    }

    if (rm->type == LIPI_MODEL_BPE) {
        size_t bad = 0;
        m->prefix_null = rm->prefix_null;
        m->suffix_null = rm->suffix_null;
        st = lipi_merges_build(m, rm->merges, rm->n_merges, &bad);
        if (st == LIPI_EINVAL) {
            uint32_t a = rm->merges[bad][0], b = rm->merges[bad][1];
            if (a >= rm->n || b >= rm->n || !rm->tok[a].s || !rm->tok[b].s)
                return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                      "merge %zu: expected two token ids, found %u and %u", bad,
                                      a, b);
            return lipi_error_set(err, LIPI_EFORMAT, name, 0, 0,
                                  "merge %zu: expected \"%.*s\" + \"%.*s\" to be a token, "
                                  "found no such token",
                                  bad, clip(rm->tok[a].len), rm->tok[a].s, clip(rm->tok[b].len),
                                  rm->tok[b].s);
        }
        if (st != LIPI_OK)
            return oom(name, err);
    }

    if (rm->unk_token) {
        uint32_t id;
        m->unk_token = lipi_strndup(rm->unk_token, rm->unk_len);
        if (!m->unk_token)
            return oom(name, err);
        m->unk_len = rm->unk_len;
        if (m->opt.unk_id < 0 && lipi_vocab_find(&m->vocab, rm->unk_token, rm->unk_len, &id))
            m->opt.unk_id = id;
    }
    return LIPI_OK;
}

lipi_status lipi_rd_assemble(const char *name, json_t *doc, lipi_post_processor *post,
                             lipi_decoder *dec, const lipi_rd_model *rm, lipi_rd_added *added,
                             lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_tokenizer *t = NULL;
    lipi_vocab_model m = {0};

    m.opt.unk_id = -1;
    *out = NULL;
    if (!doc || lipi_tokenizer_new(&t) != LIPI_OK) {
        st = oom(name, err);
        goto done;
    }
    const json_t *v = json_object_get(doc, "normalizer");
    if (v && !json_is_null(v)) {
        lipi_normalizer *n = NULL;
        TRY(lipi_normalizer_from_json(v, "normalizer", &n, err));
        TRY(lipi_tokenizer_take_normalizer(t, n));
    }
    v = json_object_get(doc, "pre_tokenizer");
    if (v && !json_is_null(v)) {
        lipi_pretokenizer *p = NULL;
        TRY(lipi_pretokenizer_from_json(v, "pre_tokenizer", &p, err));
        TRY(lipi_tokenizer_take_pretokenizer(t, p));
    }
    t->post = post;
    t->decoder = dec;
    post = NULL;
    dec = NULL;
    TRY(build_model(name, rm, &m, err));
    st = lipi_tokenizer_install_model(t, &m, err);
    if (st == LIPI_OK && added) {
        /* set_added steals the array whatever it returns. */
        st = lipi_tokenizer_set_added(t, added->a, added->n, err);
        memset(added, 0, sizeof *added);
    }
    if (st != LIPI_OK) {
        if (st == LIPI_EINVAL)
            st = LIPI_EFORMAT;
        if (err) {
            err->code = st;
            snprintf(err->path, sizeof err->path, "%s", name ? name : "");
        }
        goto done;
    }
    *out = t;
    t = NULL;
done:
    if (added)
        lipi_rd_added_free(added);
    lipi_vocab_model_clear(&m);
    lipi_tokenizer_free(t);
    lipi_post_processor_free(post);
    lipi_decoder_free(dec);
    json_decref(doc);
    if (st != LIPI_OK && err && !err->path[0])
        snprintf(err->path, sizeof err->path, "%s", name ? name : "");
    return st;
}


/* The session's word -> tokens cache. Bounded in entries and bytes; when a
 * bound is reached the whole cache is cleared, which costs one refill and
 * keeps results independent of what was cached (a hit returns exactly what
 * the model computed for the same piece). */
#include "encoder/encoder_impl.h"

#include <string.h>

#define CACHE_MAX_ENTRIES (1u << 15)
#define CACHE_SLOTS (2u * CACHE_MAX_ENTRIES)
#define CACHE_MAX_BYTES (4u << 20)

static void cache_clear(enc_cache *c)
{
    if (c->slot)
        memset(c->slot, 0, CACHE_SLOTS * sizeof *c->slot);
    c->n_ent = 0;
    c->keys_len = 0;
    c->toks_len = 0;
}

bool lipi_enc_cache_get(lipi_session *s, const char *key, size_t len, uint64_t hash)
{
    enc_cache *c = &s->cache;
    if (!c->slot)
        return false;
    size_t i = (size_t)hash & c->mask;
    for (;;) {
        uint32_t k = c->slot[i];
        if (k == 0)
            return false;
        const struct cache_entry *en = &c->ent[k - 1];
        if (en->hash == hash && en->key_len == len && memcmp(c->keys + en->key_off, key, len) == 0) {
            if (ENC_GROW(s->ptok, s->ptok_cap, en->tok_n) != LIPI_OK)
                return false; /* computing the tokens again is still correct */
            memcpy(s->ptok, c->toks + en->tok_off, en->tok_n * sizeof *s->ptok);
            s->ptok_n = en->tok_n;
            return true;
        }
        i = (i + 1) & c->mask;
    }
}

/* Stores s->ptok under key. Failing to allocate only means not caching. */
void lipi_enc_cache_put(lipi_session *s, const char *key, size_t len, uint64_t hash)
{
    enc_cache *c = &s->cache;
    size_t nt = s->ptok_n;
    if (!c->slot) {
        c->slot = lipi_calloc(CACHE_SLOTS, sizeof *c->slot);
        if (!c->slot)
            return;
        c->mask = CACHE_SLOTS - 1;
    }
    if (c->n_ent >= CACHE_MAX_ENTRIES || c->keys_len + len > CACHE_MAX_BYTES ||
        (c->toks_len + nt) * sizeof *c->toks > CACHE_MAX_BYTES)
        cache_clear(c);
    if (ENC_GROW(c->ent, c->ent_cap, c->n_ent + 1) != LIPI_OK ||
        ENC_GROW(c->keys, c->keys_cap, c->keys_len + len) != LIPI_OK ||
        ENC_GROW(c->toks, c->toks_cap, c->toks_len + nt) != LIPI_OK)
        return;
    memcpy(c->keys + c->keys_len, key, len);
    memcpy(c->toks + c->toks_len, s->ptok, nt * sizeof *s->ptok);
    c->ent[c->n_ent] = (struct cache_entry){hash, c->keys_len, len, c->toks_len, nt};
    c->keys_len += len;
    c->toks_len += nt;
    size_t i = (size_t)hash & c->mask;
    while (c->slot[i])
        i = (i + 1) & c->mask;
    c->slot[i] = (uint32_t)++c->n_ent;
}

void lipi_enc_cache_free(enc_cache *c)
{
    lipi_free(c->slot);
    lipi_free(c->ent);
    lipi_free(c->keys);
    lipi_free(c->toks);
    memset(c, 0, sizeof *c);
}

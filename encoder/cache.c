/* The session's word -> tokens cache. Bounded in entries and bytes; when a
 * bound is reached the whole cache is cleared, which costs one refill and
 * keeps results independent of what was cached (a hit returns exactly what
 * the model computed for the same piece). */
#include "encoder/encoder_impl.h"

#include <string.h>

#define CACHE_MAX_ENTRIES (1u << 16)
#define CACHE_MAX_BYTES (4u << 20)
/* Backtracking BPE makes a word's tokens in about the time a cache miss
 * to memory takes: a cache half as big stays nearer the core and wins
 * (o200k 1.03-1.07x on one thread, bench/RESULTS.md); other models'
 * words cost more to redo (spm_bpe8k 0.81x with the small cache). */
#define CACHE_BT_SHIFT 1

/* Entry layout: see lipi_enc_cache_get in encoder_impl.h. */
#define HDR LIPI_ENC_CACHE_HDR
/* A slot holds an entry's offset / 4 + 1 in LIPI_ENC_CACHE_OFF_BITS. */
_Static_assert(CACHE_MAX_BYTES / 4 < (1u << LIPI_ENC_CACHE_OFF_BITS), "cache slot offsets");

static void cache_clear(enc_cache *c)
{
    if (c->slot)
        memset(c->slot, 0, (c->mask + 1) * sizeof *c->slot);
    c->n_ent = 0;
    c->len = 0;
}

void lipi_enc_cache_put(lipi_session *s, const char *key, size_t len, uint64_t hash)
{
    enc_cache *c = &s->cache;
    size_t nt = s->ptok_n;
    if (len > LIPI_ENC_CACHE_MAX_KEY || nt > UINT16_MAX)
        return;
    size_t need = (HDR + nt * sizeof(enc_ptok) + len + 3) & ~(size_t)3;
    if (!c->slot) {
        unsigned shift = s->enc->bt ? CACHE_BT_SHIFT : 0;
        size_t slots = 2 * (size_t)CACHE_MAX_ENTRIES >> shift;
        c->slot = lipi_calloc(slots, sizeof *c->slot);
        if (!c->slot)
            return;
        c->mask = slots - 1;
        c->max_bytes = CACHE_MAX_BYTES >> shift;
    }
    if (2 * c->n_ent >= c->mask + 1 || c->len + need > c->max_bytes)
        cache_clear(c);
    if (ENC_GROW(c->arena, c->cap, c->len + need) != LIPI_OK)
        return;
    unsigned char *en = c->arena + c->len;
    uint16_t klen = (uint16_t)len, n16 = (uint16_t)nt;
    memcpy(en, &klen, 2);
    memcpy(en + 2, &n16, 2);
    if (nt)
        memcpy(en + HDR, s->ptok, nt * sizeof *s->ptok);
    memcpy(en + HDR + nt * sizeof *s->ptok, key, len);
    size_t i = (size_t)hash & c->mask;
    while (c->slot[i])
        i = (i + 1) & c->mask;
    c->slot[i] = lipi_enc_cache_tag(hash) << LIPI_ENC_CACHE_OFF_BITS | (uint32_t)(c->len / 4 + 1);
    c->len += need;
    c->n_ent++;
}

void lipi_enc_cache_free(enc_cache *c)
{
    lipi_free(c->slot);
    lipi_free(c->arena);
    memset(c, 0, sizeof *c);
}

/* The session's word -> tokens cache. Bounded in entries and bytes; when a
 * bound is reached the whole cache is cleared, which costs one refill and
 * keeps results independent of what was cached (a hit returns exactly what
 * the model computed for the same piece). */
#include "encoder/encoder_impl.h"

#include <string.h>

#define CACHE_MAX_ENTRIES (1u << 16)
#define CACHE_SLOTS (2u * CACHE_MAX_ENTRIES)
#define CACHE_MAX_BYTES (4u << 20)

/* Entry layout in the arena (4-byte aligned): key length (2 bytes), token
 * count (2 bytes), the tokens, the key. */
#define HDR 4

static void cache_clear(enc_cache *c)
{
    if (c->slot)
        memset(c->slot, 0, CACHE_SLOTS * sizeof *c->slot);
    c->n_ent = 0;
    c->len = 0;
}

bool lipi_enc_cache_get(lipi_session *s, const char *key, size_t len, uint64_t hash)
{
    const enc_cache *c = &s->cache;
    if (!c->slot)
        return false;
    uint32_t tag = (uint32_t)(hash >> 32);
    size_t i = (size_t)hash & c->mask;
    for (;;) {
        cache_slot sl = c->slot[i];
        if (sl.off == 0)
            return false;
        if (sl.tag == tag) {
            const unsigned char *en = c->arena + sl.off - 1;
            uint16_t klen, nt;
            memcpy(&klen, en, 2);
            memcpy(&nt, en + 2, 2);
            const cache_tok *ct = (const cache_tok *)(const void *)(en + HDR);
            if (klen == len && memcmp(en + HDR + (size_t)nt * sizeof *ct, key, len) == 0) {
                if (ENC_GROW(s->ptok, s->ptok_cap, nt) != LIPI_OK)
                    return false; /* computing the tokens again is still correct */
                for (size_t k = 0; k < nt; k++)
                    s->ptok[k] = (enc_ptok){ct[k].id, ct[k].start, ct[k].end & 0x7fffu,
                                            (ct[k].end & 0x8000u) != 0};
                s->ptok_n = nt;
                return true;
            }
        }
        i = (i + 1) & c->mask;
    }
}

void lipi_enc_cache_prefetch(const lipi_session *s, uint64_t hash)
{
    const enc_cache *c = &s->cache;
    if (c->slot)
        __builtin_prefetch(&c->slot[(size_t)hash & c->mask]);
}

void lipi_enc_cache_prefetch_entry(const lipi_session *s, uint64_t hash)
{
    const enc_cache *c = &s->cache;
    if (!c->slot)
        return;
    cache_slot sl = c->slot[(size_t)hash & c->mask];
    if (sl.off && sl.tag == (uint32_t)(hash >> 32))
        __builtin_prefetch(c->arena + sl.off - 1);
}

void lipi_enc_cache_put(lipi_session *s, const char *key, size_t len, uint64_t hash)
{
    enc_cache *c = &s->cache;
    size_t nt = s->ptok_n;
    if (len > LIPI_ENC_CACHE_MAX_KEY || nt > UINT16_MAX)
        return;
    size_t need = (HDR + nt * sizeof(cache_tok) + len + 3) & ~(size_t)3;
    if (!c->slot) {
        c->slot = lipi_calloc(CACHE_SLOTS, sizeof *c->slot);
        if (!c->slot)
            return;
        c->mask = CACHE_SLOTS - 1;
    }
    if (c->n_ent >= CACHE_MAX_ENTRIES || c->len + need > CACHE_MAX_BYTES)
        cache_clear(c);
    if (ENC_GROW(c->arena, c->cap, c->len + need) != LIPI_OK)
        return;
    unsigned char *en = c->arena + c->len;
    uint16_t klen = (uint16_t)len, n16 = (uint16_t)nt;
    memcpy(en, &klen, 2);
    memcpy(en + 2, &n16, 2);
    cache_tok *ct = (cache_tok *)(void *)(en + HDR);
    for (size_t k = 0; k < nt; k++) {
        const enc_ptok *p = &s->ptok[k];
        ct[k] = (cache_tok){p->id, (uint16_t)p->start,
                            (uint16_t)(p->end | (p->text ? 0x8000u : 0))};
    }
    memcpy(en + HDR + nt * sizeof *ct, key, len);
    size_t i = (size_t)hash & c->mask;
    while (c->slot[i].off)
        i = (i + 1) & c->mask;
    c->slot[i] = (cache_slot){(uint32_t)(hash >> 32), (uint32_t)(c->len + 1)};
    c->len += need;
    c->n_ent++;
}

void lipi_enc_cache_free(enc_cache *c)
{
    lipi_free(c->slot);
    lipi_free(c->arena);
    memset(c, 0, sizeof *c);
}

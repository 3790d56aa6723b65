/* SHA-256 (FIPS 180-4): the one checksum in lipi. The tiktoken reader
 * checks the published encodings against OpenAI's checksums with it, and
 * hub downloads check LFS files against their ETag. OpenSSL's libcrypto
 * does the hashing: it uses the CPU's SHA instructions, so o200k_base's
 * 3.6 MB hash in 2.2-2.5 ms, where the portable C version lipi had before
 * took 11.5-15 ms on a quiet machine (228 million instructions) of every
 * `-t o200k_base` load (bench/RESULTS.md, session 6).
 * Its allocations do not go through lipi_malloc (OpenSSL's allocator hooks
 * are process-wide, not a library's to set); a failed one is LIPI_ENOMEM.
 * Messages of at most SMALL bytes (cache keys, stat identities) are hashed
 * here in portable C instead: OpenSSL's first digest of a process fetches
 * its provider (~5 million instructions, 1-2 ms), which was most of what a
 * warm `-t o200k_base` load hashed. */
#include "tokenizer/tokenizer.h"

#include <dlfcn.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void to_hex(const unsigned char md[32], char out[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Portable SHA-256 for small messages (FIPS 180-4, section 6.2)            */
/* ------------------------------------------------------------------------ */

#define SMALL 16384

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static inline uint32_t ror(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static void block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

static void small_digest(const unsigned char *data, size_t n, unsigned char md[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char last[128] = {0};
    size_t full = n / 64 * 64, rest = n - full;
    for (size_t i = 0; i < full; i += 64)
        block(h, data + i);
    /* The rest, the 0x80 byte, zeros and the length in bits: one or two
     * blocks. */
    memcpy(last, data + full, rest);
    last[rest] = 0x80;
    size_t end = rest + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        last[end - 1 - i] = (unsigned char)(bits >> (8 * i));
    block(h, last);
    if (end == 128)
        block(h, last + 64);
    for (int i = 0; i < 8; i++) {
        md[4 * i] = (unsigned char)(h[i] >> 24);
        md[4 * i + 1] = (unsigned char)(h[i] >> 16);
        md[4 * i + 2] = (unsigned char)(h[i] >> 8);
        md[4 * i + 3] = (unsigned char)h[i];
    }
}

/* ------------------------------------------------------------------------ */
/* The running hash: bytes held here up to SMALL, then OpenSSL's             */
/* ------------------------------------------------------------------------ */

/* libcrypto is opened on the first long message (dlopen), not linked:
 * linked, it was loaded and relocated at the start of every lipi process
 * (an empty main() linked with -lcrypto: 1.3 -> 2.8 ms on the bench
 * machine), and a warm load hashes nothing long (digest records, tabcache.c).
 * The same functions, the same library (Debian's libssl3), found at run
 * time; without it long messages fail as allocations do. */
#define EVP_FUNCS(X)                                                                       \
    X(EVP_MD_CTX_new) X(EVP_MD_CTX_free) X(EVP_DigestInit_ex) X(EVP_DigestUpdate)           \
    X(EVP_DigestFinal_ex) X(EVP_Digest) X(EVP_sha256)
static struct {
    pthread_once_t once;
    bool ok;
#define EVP_FIELD(f) __typeof__(f) *f;
    EVP_FUNCS(EVP_FIELD)
#undef EVP_FIELD
} crypto = {.once = PTHREAD_ONCE_INIT};

static void crypto_load(void)
{
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    crypto.ok = h != NULL;
#define EVP_SYM(f) crypto.ok = crypto.ok && (*(void **)&crypto.f = dlsym(h, #f)) != NULL;
    EVP_FUNCS(EVP_SYM)
#undef EVP_SYM
}

static bool crypto_open(void)
{
    pthread_once(&crypto.once, crypto_load);
    return crypto.ok;
}

#define EVP_MD_CTX_new crypto.EVP_MD_CTX_new
#define EVP_MD_CTX_free crypto.EVP_MD_CTX_free
#define EVP_DigestInit_ex crypto.EVP_DigestInit_ex
#define EVP_DigestUpdate crypto.EVP_DigestUpdate
#define EVP_DigestFinal_ex crypto.EVP_DigestFinal_ex
#define EVP_Digest crypto.EVP_Digest
#define EVP_sha256 crypto.EVP_sha256

typedef struct {
    EVP_MD_CTX *evp; /* NULL while the message fits in held */
    size_t n;
    unsigned char held[SMALL];
} run;

static bool to_openssl(run *r)
{
    if (!crypto_open())
        return false;
    r->evp = EVP_MD_CTX_new();
    if (!r->evp)
        return false;
    return EVP_DigestInit_ex(r->evp, EVP_sha256(), NULL) == 1 &&
           (r->n == 0 || EVP_DigestUpdate(r->evp, r->held, r->n) == 1);
}

void lipi_sha256_init(lipi_sha256 *c)
{
    run *r = malloc(sizeof *r);
    if (r) {
        r->evp = NULL;
        r->n = 0;
    }
    c->ctx = r;
    c->failed = r == NULL;
}

void lipi_sha256_update(lipi_sha256 *c, const void *data, size_t n)
{
    run *r = c->ctx;
    if (!r || c->failed || n == 0)
        return;
    if (!r->evp && n <= SMALL - r->n) {
        memcpy(r->held + r->n, data, n);
        r->n += n;
        return;
    }
    if ((!r->evp && !to_openssl(r)) || EVP_DigestUpdate(r->evp, data, n) != 1)
        c->failed = true;
}

lipi_status lipi_sha256_final_hex(lipi_sha256 *c, char out[65])
{
    run *r = c->ctx;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 32;
    bool ok = r && !c->failed;
    if (ok && r->evp)
        ok = EVP_DigestFinal_ex(r->evp, md, &len) == 1 && len == 32;
    else if (ok)
        small_digest(r->held, r->n, md);
    lipi_sha256_abort(c);
    if (!ok) {
        out[0] = '\0';
        return LIPI_ENOMEM;
    }
    to_hex(md, out);
    return LIPI_OK;
}

void lipi_sha256_abort(lipi_sha256 *c)
{
    run *r = c->ctx;
    if (r && r->evp)
        EVP_MD_CTX_free(r->evp);
    free(r);
    c->ctx = NULL;
}

lipi_status lipi_sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (n <= SMALL) {
        small_digest(data, n, md);
    } else if (!crypto_open() || EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) != 1 ||
               len != 32) {
        out[0] = '\0';
        return LIPI_ENOMEM;
    }
    to_hex(md, out);
    return LIPI_OK;
}

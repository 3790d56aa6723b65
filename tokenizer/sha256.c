/* SHA-256 (FIPS 180-4): the one checksum in lipi. The tiktoken reader
 * checks the published encodings against OpenAI's checksums with it, and
 * hub downloads check LFS files against their ETag. OpenSSL's libcrypto
 * does the hashing: it uses the CPU's SHA instructions, so o200k_base's
 * 3.6 MB hash in 2.2-2.5 ms, where the portable C version lipi had before
 * took 11.5-15 ms on a quiet machine (228 million instructions) of every
 * `-t o200k_base` load (bench/RESULTS.md, session 6).
 * Its allocations do not go through lipi_malloc (OpenSSL's allocator hooks
 * are process-wide, not a library's to set); a failed one is LIPI_ENOMEM. */
#include "tokenizer/tokenizer.h"

#include <openssl/evp.h>
#include <stdio.h>

static void to_hex(const unsigned char md[32], char out[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

void lipi_sha256_init(lipi_sha256 *c)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        ctx = NULL;
    }
    c->ctx = ctx;
    c->failed = ctx == NULL;
}

void lipi_sha256_update(lipi_sha256 *c, const void *data, size_t n)
{
    if (c->ctx && n && EVP_DigestUpdate(c->ctx, data, n) != 1)
        c->failed = true;
}

lipi_status lipi_sha256_final_hex(lipi_sha256 *c, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    bool ok = c->ctx && !c->failed && EVP_DigestFinal_ex(c->ctx, md, &len) == 1 && len == 32;
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
    EVP_MD_CTX_free(c->ctx);
    c->ctx = NULL;
}

lipi_status lipi_sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) != 1 || len != 32) {
        out[0] = '\0';
        return LIPI_ENOMEM;
    }
    to_hex(md, out);
    return LIPI_OK;
}

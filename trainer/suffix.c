/* Suffix arrays (SA-IS, Nong, Zhang and Chan 2009) and LCP arrays (Kasai
 * et al. 2001) over integer alphabets, for the Unigram trainer's seed
 * pieces.
 *
 * The text has a virtual sentinel after its last symbol, smaller than every
 * symbol, so callers pass the symbols only. Every level of the recursion
 * works inside the caller's suffix array plus one bucket array and one type
 * array per level: about n * 5 bytes beyond the text and the result. */
#include "trainer/unigram_impl.h"

#include <string.h>

#include "tokenizer/base.h"

/* Bucket heads (end = false) or one past the bucket ends (end = true). */
static void buckets(const int32_t *s, size_t n, int32_t k, int32_t *bkt, bool end)
{
    memset(bkt, 0, (size_t)k * sizeof *bkt);
    for (size_t i = 0; i < n; i++)
        bkt[s[i]]++;
    int32_t sum = 0;
    for (int32_t c = 0; c < k; c++) {
        sum += bkt[c];
        bkt[c] = end ? sum : sum - bkt[c];
    }
}

/* t[i]: 1 for an S-type suffix (smaller than the next one), 0 for L-type. */
static inline bool is_lms(const uint8_t *t, size_t i)
{
    return i > 0 && t[i] && !t[i - 1];
}

/* Induces the order of L-type suffixes left to right, then of S-type ones
 * right to left, from the LMS suffixes already in place. */
static void induce(const int32_t *s, int32_t *sa, const uint8_t *t, size_t n, int32_t k,
                   int32_t *bkt)
{
    buckets(s, n, k, bkt, false);
    /* The sentinel's suffix comes first; the one before it is L-type. */
    sa[bkt[s[n - 1]]++] = (int32_t)(n - 1);
    for (size_t i = 0; i < n; i++) {
        int32_t j = sa[i] - 1;
        if (sa[i] > 0 && !t[j])
            sa[bkt[s[j]]++] = j;
    }
    buckets(s, n, k, bkt, true);
    for (size_t i = n; i-- > 0;) {
        int32_t j = sa[i] - 1;
        if (sa[i] > 0 && t[j])
            sa[--bkt[s[j]]] = j;
    }
}

static lipi_status sais(const int32_t *s, int32_t *sa, size_t n, int32_t k)
{
    lipi_status st = LIPI_OK;
    uint8_t *t = NULL;
    int32_t *bkt = NULL;
    if (n == 0)
        return LIPI_OK;
    if (n == 1) {
        sa[0] = 0;
        return LIPI_OK;
    }
    t = lipi_malloc(n);
    bkt = lipi_reallocarray(NULL, (size_t)k, sizeof *bkt);
    if (!t || !bkt) {
        st = LIPI_ENOMEM;
        goto done;
    }
    t[n - 1] = 0;
    for (size_t i = n - 1; i-- > 0;)
        t[i] = s[i] < s[i + 1] || (s[i] == s[i + 1] && t[i + 1]);

    /* Sort the LMS substrings: LMS positions at their bucket ends, induce. */
    buckets(s, n, k, bkt, true);
    for (size_t i = 0; i < n; i++)
        sa[i] = -1;
    for (size_t i = 1; i < n; i++)
        if (is_lms(t, i))
            sa[--bkt[s[i]]] = (int32_t)i;
    induce(s, sa, t, n, k, bkt);

    /* Compact the sorted LMS positions to the front and name the
     * substrings (equal substrings get equal names). */
    size_t n1 = 0;
    for (size_t i = 0; i < n; i++)
        if (is_lms(t, (size_t)sa[i]))
            sa[n1++] = sa[i];
    for (size_t i = n1; i < n; i++)
        sa[i] = -1;
    int32_t name = 0;
    int64_t prev = -1;
    for (size_t i = 0; i < n1; i++) {
        size_t pos = (size_t)sa[i];
        bool diff = false;
        for (size_t d = 0;; d++) {
            if (prev < 0 || pos + d == n || (size_t)prev + d == n ||
                s[pos + d] != s[prev + d] || t[pos + d] != t[prev + d]) {
                diff = true;
                break;
            }
            if (d > 0 && (is_lms(t, pos + d) || is_lms(t, (size_t)prev + d)))
                break;
        }
        if (diff) {
            name++;
            prev = (int64_t)pos;
        }
        /* LMS positions are at least two apart, so pos / 2 is unique. */
        sa[n1 + pos / 2] = name - 1;
    }
    for (size_t i = n, j = n; i-- > n1;)
        if (sa[i] >= 0)
            sa[--j] = sa[i];

    /* Order of the LMS suffixes: recurse while names repeat. */
    int32_t *s1 = sa + n - n1, *sa1 = sa;
    if ((size_t)name < n1) {
        TRY(sais(s1, sa1, n1, name));
    } else {
        for (size_t i = 0; i < n1; i++)
            sa1[s1[i]] = (int32_t)i;
    }

    /* Place the LMS suffixes in their order at their bucket ends, induce. */
    for (size_t i = 1, j = 0; i < n; i++)
        if (is_lms(t, i))
            s1[j++] = (int32_t)i;
    for (size_t i = 0; i < n1; i++)
        sa1[i] = s1[sa1[i]];
    for (size_t i = n1; i < n; i++)
        sa[i] = -1;
    buckets(s, n, k, bkt, true);
    for (size_t i = n1; i-- > 0;) {
        int32_t j = sa[i];
        sa[i] = -1;
        sa[--bkt[s[j]]] = j;
    }
    induce(s, sa, t, n, k, bkt);
done:
    lipi_free(t);
    lipi_free(bkt);
    return st;
}

lipi_status lipi_suffix_array(const int32_t *s, size_t n, int32_t k, int32_t *sa)
{
    if (n >= (size_t)INT32_MAX || k <= 0)
        return LIPI_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0 || s[i] >= k)
            return LIPI_EINVAL;
    return sais(s, sa, n, k);
}

lipi_status lipi_lcp_array(const int32_t *s, size_t n, const int32_t *sa, int32_t *lcp)
{
    int32_t *rank = lipi_reallocarray(NULL, n ? n : 1, sizeof *rank);
    if (!rank)
        return LIPI_ENOMEM;
    for (size_t i = 0; i < n; i++)
        rank[sa[i]] = (int32_t)i;
    size_t h = 0;
    for (size_t i = 0; i < n; i++) {
        if (rank[i] == 0) {
            lcp[0] = 0;
            h = 0;
            continue;
        }
        size_t j = (size_t)sa[rank[i] - 1];
        while (i + h < n && j + h < n && s[i + h] == s[j + h])
            h++;
        lcp[rank[i]] = (int32_t)h;
        if (h > 0)
            h--;
    }
    lipi_free(rank);
    return LIPI_OK;
}

/* Fuzz: lipi's JSON reader against jansson's json_loadb (differential).
 * Byte 0 picks the flags; the rest is the text. Both must accept the same
 * texts and give equal values (lipi_json_loadb's promise), except that
 * lipi stops at LIPI_JSON_MAX_DEPTH levels where jansson goes to 2048,
 * and rejects the NUL byte that jansson skips after a number or literal. */
#include "tests/fuzz/fuzz.h"
#include "tokenizer/base_json.h"

static size_t depth(const json_t *j)
{
    size_t d = 0, i;
    const char *k;
    json_t *v;
    if (json_is_array(j))
        json_array_foreach(j, i, v) {
            size_t x = depth(v);
            d = x > d ? x : d;
        }
    else if (json_is_object(j))
        json_object_foreach((json_t *)j, k, v) {
            size_t x = depth(v);
            d = x > d ? x : d;
        }
    else
        return 0;
    return d + 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t flags = (data[0] & 1 ? JSON_REJECT_DUPLICATES : 0) | (data[0] & 2 ? JSON_ALLOW_NUL : 0);
    const char *s = (const char *)data + 1;
    json_error_t e1, e2;
    json_t *mine = lipi_json_loadb(s, size - 1, flags, &e1);
    json_t *theirs = json_loadb(s, size - 1, flags, &e2);
    bool same = mine && theirs ? json_equal(mine, theirs) : !mine && !theirs;
    bool deeper = theirs && !mine && json_error_code(&e1) == json_error_stack_overflow &&
                  depth(theirs) > LIPI_JSON_MAX_DEPTH;
    bool nul = theirs && !mine && memchr(s, '\0', size - 1);
    if (!same && !deeper && !nul) {
        fprintf(stderr, "lipi: %s (%s), jansson: %s (%s)\n", mine ? "ok" : "error",
                mine ? "" : e1.text, theirs ? "ok" : "error", theirs ? "" : e2.text);
        abort();
    }
    if (!mine && (e1.text[0] == '\0' || e1.position < 0 || (size_t)e1.position > size - 1))
        abort();
    json_decref(mine);
    json_decref(theirs);
    return 0;
}

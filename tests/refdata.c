/* Reference data paths and visible skips (see refdata.h). */
#include "tests/refdata.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *rotate(const char *dir, const char *rel)
{
    static char buf[8][512];
    static unsigned next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, rel);
    return b;
}

const char *ref_shared(const char *rel)
{
    const char *p = rotate(REF_SHARED, rel);
    return access(p, R_OK) == 0 ? p : NULL;
}

const char *ref_path(const char *rel)
{
    const char *p = rotate(REF_FIXTURES, rel);
    if (access(p, R_OK) == 0)
        return p;
    p = rotate(REF_BUNDLED, rel);
    return access(p, R_OK) == 0 ? p : ref_shared(rel);
}

const char *ref_need(const char *rel)
{
    const char *p = ref_path(rel);
    if (!p)
        fail_msg("%s: missing from " REF_FIXTURES " and " REF_BUNDLED, rel);
    return p;
}

const char *ref_missing(const char *what)
{
    static char buf[512];
    struct stat st;
    bool there = stat(REF_SHARED, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(buf, sizeof buf, "%s (%s)",
             there ? "not in " REF_SHARED : REF_SHARED " not found", what);
    return buf;
}

void ref_skip_note(const char *test, const char *fmt, ...)
{
    va_list ap;
    printf("SKIP %s: ", test);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

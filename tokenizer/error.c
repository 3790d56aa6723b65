/* Error values and messages: the only place that formats a lipi_error. */
#include "tokenizer/tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *lipi_status_name(lipi_status code)
{
    switch (code) {
    case LIPI_OK: return "OK";
    case LIPI_ENOMEM: return "ENOMEM";
    case LIPI_EINVAL: return "EINVAL";
    case LIPI_EIO: return "EIO";
    case LIPI_EFORMAT: return "EFORMAT";
    case LIPI_ETRUNC: return "ETRUNC";
    case LIPI_EICU: return "EICU";
    case LIPI_EREGEX: return "EREGEX";
    }
    return "EUNKNOWN";
}

lipi_status lipi_error_set(lipi_error *err, lipi_status code, const char *path,
                           size_t line, size_t offset, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->line = line;
    err->offset = offset;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void lipi_error_prefix(lipi_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* Concatenate by hand: truncation is intended and snprintf would warn. */
    size_t n = strnlen(prefix, sizeof err->msg - 1);
    memcpy(err->msg, prefix, n);
    const char *rest[2] = {": ", old};
    for (int i = 0; i < 2; i++) {
        size_t k = strnlen(rest[i], sizeof err->msg - 1 - n);
        memcpy(err->msg + n, rest[i], k);
        n += k;
    }
    err->msg[n] = '\0';
}

const char *lipi_version(void)
{
#ifdef LIPI_VERSION
    return LIPI_VERSION;
#else
    return "unknown";
#endif
}

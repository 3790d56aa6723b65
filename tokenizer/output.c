/* Command outputs written atomically (pipeline.h): a thin public face of
 * the library's temporary-file-and-rename helper, so that a command's
 * interrupted run never leaves a partial output file. */
#include "tokenizer/base.h"

#include <string.h>

struct lipi_output {
    lipi_atomic_file af;
    bool is_stdout;
};

lipi_status lipi_output_open(const char *path, lipi_output **out, FILE **f, lipi_error *err)
{
    *out = NULL;
    *f = NULL;
    lipi_output *o = lipi_calloc(1, sizeof *o);
    if (!o)
        return lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
    if (!path || strcmp(path, "-") == 0) {
        o->is_stdout = true;
        *f = stdout;
    } else {
        lipi_status st = lipi_atomic_open(&o->af, path, err);
        if (st != LIPI_OK) {
            lipi_free(o);
            return st;
        }
        *f = o->af.f;
    }
    *out = o;
    return LIPI_OK;
}

lipi_status lipi_output_commit(lipi_output *o, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (o->is_stdout) {
        if (fflush(stdout) != 0 || ferror(stdout))
            st = lipi_error_set(err, LIPI_EIO, "standard output", 0, 0, "write failed");
    } else {
        st = lipi_atomic_commit(&o->af, err);
    }
    lipi_free(o);
    return st;
}

void lipi_output_abort(lipi_output *o)
{
    if (!o)
        return;
    if (!o->is_stdout)
        lipi_atomic_abort(&o->af);
    lipi_free(o);
}

const char *lipi_output_get_temp_path(const lipi_output *o)
{
    return o->is_stdout ? NULL : o->af.tmp;
}

/* Fuzz: a counts run, lipi.dask's binary counts (lipi_counts_load_run).
 * What loads is written back as a run and must read again with the same
 * words; the input and that copy merged to the TSV must load as counts. */
#include "tests/fuzz/fuzz.h"
#include "trainer/trainer.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *in = fuzz_file("in.run", (const char *)data, size);
    const char *again = fuzz_file("again.run", NULL, SIZE_MAX);
    const char *sum = fuzz_file("sum.tsv", NULL, SIZE_MAX);
    lipi_counts *c = NULL, *back = NULL, *merged = NULL;
    lipi_error err;
    if (lipi_counts_new(&c) != LIPI_OK || lipi_counts_new(&back) != LIPI_OK ||
        lipi_counts_new(&merged) != LIPI_OK)
        abort();
    lipi_status st = lipi_counts_load_run(in, c, &err);
    fuzz_check_status(st);
    if (st == LIPI_OK) {
        if (lipi_counts_save_run(c, again, &err) != LIPI_OK ||
            lipi_counts_load_run(again, back, &err) != LIPI_OK ||
            lipi_counts_size(back) != lipi_counts_size(c) ||
            lipi_counts_total(back) != lipi_counts_total(c))
            abort();
        const char *both[] = {in, again};
        st = lipi_counts_merge_runs(both, 2, sum, true, &err);
        fuzz_check_status(st); /* a sum past 2^64 is an error */
        if (st == LIPI_OK && lipi_counts_load(sum, merged, &err) != LIPI_OK)
            abort();
    }
    lipi_counts_free(c);
    lipi_counts_free(back);
    lipi_counts_free(merged);
    return 0;
}

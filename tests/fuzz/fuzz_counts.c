/* Fuzz: the word counts file (lipi_counts_load), then sort and merge what
 * loaded. The reader takes a path, so the input goes to a file. */
#include "tests/fuzz/fuzz.h"
#include "trainer/trainer.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *path = fuzz_file("counts.tsv", (const char *)data, size);
    lipi_counts *c = NULL, *sum = NULL;
    lipi_count_entry *sorted = NULL;
    size_t n = 0;
    lipi_error err;
    if (lipi_counts_new(&c) != LIPI_OK || lipi_counts_new(&sum) != LIPI_OK)
        abort();
    fuzz_check_status(lipi_counts_load(path, c, &err));
    /* Partial results are promised to stay usable. */
    fuzz_check_status(lipi_counts_sorted(c, &sorted, &n));
    for (size_t i = 1; sorted && i < n; i++)
        if (sorted[i].count > sorted[i - 1].count)
            abort();
    fuzz_check_status(lipi_counts_merge(sum, c, &err));
    fuzz_check_status(lipi_counts_merge(sum, c, &err));
    lipi_free(sorted);
    lipi_counts_free(c);
    lipi_counts_free(sum);
    return 0;
}

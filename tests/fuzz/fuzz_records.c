/* Fuzz: the record reader (lipi_record_reader_*) in each of its formats over
 * the same bytes. Every record it returns must be valid UTF-8, and a JSONL
 * record's extra members must be valid JSON once put in braces (they are
 * copied from the line as written). JSONL is read once more with its "ids"
 * member as token ids (decode's reading), which must come out as decimal
 * numbers separated by single spaces. The reader takes a path, so the input
 * goes to a file. */
#include "tests/fuzz/fuzz.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *path = fuzz_file("records.jsonl", (const char *)data, size);
    static const char *const drop[] = {"ids"};
    for (int f = LIPI_RECORDS_LINES; f <= LIPI_RECORDS_NUL + 1; f++) {
        bool ids = f > LIPI_RECORDS_NUL;
        lipi_record_options ro = {.format = ids ? LIPI_RECORDS_JSONL : (lipi_record_format)f,
                                  .drop = drop, .n_drop = 1,
                                  .invalid = size % 2 ? LIPI_INVALID_REPLACE : LIPI_INVALID_ERROR,
                                  .text_field = ids ? "ids" : NULL, .field_ids = ids};
        lipi_record_reader *r = NULL;
        lipi_error err;
        lipi_status st = lipi_record_reader_open(path, &ro, &r, &err);
        fuzz_check_status(st);
        lipi_record rec;
        while (st == LIPI_OK && (st = lipi_record_reader_next(r, &rec, &err)) == LIPI_OK &&
               rec.text) {
            if (lipi_utf8_valid_prefix(rec.text, rec.len) != rec.len)
                abort();
            for (size_t i = 0; ids && i < rec.len; i++)
                if (!(rec.text[i] >= '0' && rec.text[i] <= '9') &&
                    !(rec.text[i] == ' ' && i > 0 && i + 1 < rec.len && rec.text[i - 1] != ' '))
                    abort();
            if (rec.extra_len) {
                char *obj = malloc(rec.extra_len + 2);
                obj[0] = '{';
                memcpy(obj + 1, rec.extra, rec.extra_len);
                obj[rec.extra_len + 1] = '}';
                json_error_t jerr;
                json_t *v = json_loadb(obj, rec.extra_len + 2, JSON_ALLOW_NUL, &jerr);
                if (!v)
                    abort();
                json_decref(v);
                free(obj);
            }
        }
        fuzz_check_status(st);
        lipi_record_reader_close(r);
    }
    return 0;
}

/* lipi_train: everything between parsed options and a trained tokenizer
 * (contract in trainer.h): which inputs are counted how, the balance of
 * languages (smoothed, or parity with a line-aligned dev set), and the
 * choice of BPE or Unigram. `lipi train` parses its options into a
 * lipi_train_job and writes what this returns; the Python package and the
 * server make the same call. */
#include "tokenizer/base.h"
#include "trainer/trainer.h"

void lipi_train_job_default(lipi_train_job *job)
{
    memset(job, 0, sizeof *job);
    job->type = LIPI_TRAIN_BPE;
    job->balance = LIPI_BALANCE_NONE;
    job->alpha = 0.3;
    lipi_count_options_default(&job->count);
    lipi_bpe_options_default(&job->bpe);
    lipi_unigram_options_default(&job->unigram);
}

void lipi_train_job_share_options(lipi_train_job *job, unsigned set)
{
    const lipi_bpe_options *b = &job->bpe;
    lipi_unigram_options *u = &job->unigram;
    lipi_train_common given = b->common;
    if (!(set & LIPI_TRAIN_SET_COVERAGE))
        given.character_coverage = u->common.character_coverage;
    if (!b->common.n_special) {
        given.special_tokens = u->common.special_tokens;
        given.n_special = u->common.n_special;
    }
    if (!b->common.unk_token)
        given.unk_token = u->common.unk_token;
    u->common = given;
    if (set & LIPI_TRAIN_SET_MAX_LENGTH)
        u->max_piece_length = b->max_token_length;
    if (set & LIPI_TRAIN_SET_PARITY_EXPONENT)
        u->parity_exponent = b->parity_exponent;
}

/* ------------------------------------------------------------------------ */
/* Balanced corpora                                                          */
/* ------------------------------------------------------------------------ */

/* Counts text files as lipi_count_files does, or loads counts files. */
static lipi_status count_some(const char *const *files, size_t n, bool are_counts,
                              const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                              const lipi_count_options *copt, lipi_counts **out, lipi_error *err)
{
    if (!are_counts)
        return lipi_count_files(files, n, norm, pre, copt, out, err);
    lipi_status st = lipi_counts_new(out);
    for (size_t i = 0; st == LIPI_OK && i < n; i++)
        st = lipi_counts_load(files[i], *out, err);
    return st;
}

/* Adds the parity dev set (job->dev: files or a folder, as the inflation
 * report reads them) to bal, telling job->note about the files of languages
 * without training data. */
static lipi_status add_dev_set(const lipi_train_job *job, lipi_balance *bal,
                               const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                               lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_parallel_files *dev = NULL;
    lipi_counts *c = NULL;
    lipi_count_options dev_opt = job->count; /* small files: no progress reports */
    dev_opt.progress = NULL;
    TRY(lipi_parallel_files_open(&job->dev, 1, NULL, job->count.invalid, &dev, err));
    size_t used_files = 0;
    for (size_t i = 0; i < lipi_parallel_files_count(dev); i++) {
        const char *f = lipi_parallel_files_path(dev, i);
        bool used;
        TRY(lipi_count_files(&f, 1, norm, pre, &dev_opt, &c, err));
        TRY(lipi_balance_add_dev(bal, lipi_parallel_files_label(dev, i), c, &used, err));
        lipi_counts_free(c);
        c = NULL;
        used_files += used;
        if (!used && job->note) {
            lipi_train_note n = {.kind = LIPI_TRAIN_DEV_FILE_UNUSED, .path = f};
            job->note(&n, job->note_user);
        }
    }
    if (!used_files)
        st = lipi_error_set(err, LIPI_EINVAL, job->dev, 0, 0,
                            "expected dev files of the training languages, found none");
done:
    lipi_counts_free(c);
    lipi_parallel_files_close(dev);
    return st;
}

/* Tells job->note the languages of bal and their smoothed weights. */
static lipi_status note_languages(const lipi_train_job *job, const lipi_balance *bal,
                                  lipi_error *err)
{
    if (!job->note)
        return LIPI_OK;
    bool smoothed = job->balance == LIPI_BALANCE_SMOOTHED;
    size_t n = lipi_balance_lang_count(bal);
    uint64_t *w = lipi_calloc(n ? n : 1, sizeof *w);
    if (!w)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    if (lipi_balance_weights(bal, smoothed ? job->alpha : 1.0, w, NULL) == LIPI_OK) {
        lipi_train_note note = {.kind = LIPI_TRAIN_LANGUAGES, .balance = bal,
                                .weights = smoothed ? w : NULL};
        job->note(&note, job->note_user);
    }
    lipi_free(w);
    return LIPI_OK;
}

/* Counts the language files, the other inputs and the dev set into a new
 * balance, and makes the counts to train on. */
static lipi_status balance_build(const lipi_train_job *job, const lipi_count_options *copt,
                                 const lipi_normalizer *norm, const lipi_pretokenizer *pre,
                                 lipi_balance **bal, lipi_counts **train, lipi_error *err)
{
    lipi_status st;
    lipi_counts *c = NULL;
    TRY(lipi_balance_new(bal));
    for (size_t i = 0; i < job->n_lang_files; i++) {
        TRY(lipi_count_files(&job->lang_files[i], 1, norm, pre, copt, &c, err));
        TRY(lipi_balance_add_lang(*bal, job->lang_names[i], c, err));
        lipi_counts_free(c);
        c = NULL;
    }
    bool are_counts = job->n_counts_files > 0;
    const char *const *files = are_counts ? job->counts_files : job->files;
    size_t n_files = are_counts ? job->n_counts_files : job->n_files;
    if (n_files) {
        TRY(count_some(files, n_files, are_counts, norm, pre, copt, &c, err));
        TRY(lipi_balance_add_mixed(*bal, c, err));
        lipi_counts_free(c);
        c = NULL;
    }
    if (job->balance == LIPI_BALANCE_PARITY)
        TRY(add_dev_set(job, *bal, norm, pre, err));
    for (size_t i = 0; i < job->n_targets; i++)
        TRY(lipi_balance_set_target(*bal, job->target_langs[i], job->targets[i], err));
    TRY(lipi_balance_train_counts(*bal, job->balance, job->alpha, train, err));
    TRY(note_languages(job, *bal, err));
done:
    lipi_counts_free(c);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The job                                                                   */
/* ------------------------------------------------------------------------ */

/* Without balancing, language files are plain input files after the others:
 * *all is a new list (or NULL with *n = 0 when there are no inputs). */
static lipi_status plain_inputs(const lipi_train_job *job, const char ***all, size_t *n,
                                lipi_error *err)
{
    *n = job->n_files + job->n_lang_files;
    *all = NULL;
    if (!*n)
        return LIPI_OK;
    *all = lipi_calloc(*n, sizeof **all);
    if (!*all)
        return lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
    for (size_t i = 0; i < job->n_files; i++)
        (*all)[i] = job->files[i];
    for (size_t i = 0; i < job->n_lang_files; i++)
        (*all)[job->n_files + i] = job->lang_files[i];
    return LIPI_OK;
}

lipi_status lipi_train(const lipi_train_job *job, lipi_normalizer *norm, lipi_pretokenizer *pre,
                       lipi_tokenizer **out, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_counts *counts = NULL;
    lipi_balance *bal = NULL;
    const char **inputs = NULL;
    *out = NULL;
    bool unigram = job->type == LIPI_TRAIN_UNIGRAM;
    lipi_count_options copt = job->count;
    lipi_bpe_options bopt = job->bpe;
    lipi_unigram_options uopt = job->unigram;
    copt.progress = bopt.common.progress = uopt.common.progress = job->progress;
    copt.progress_user = bopt.common.progress_user = uopt.common.progress_user = job->progress_user;
    if (job->balance != LIPI_BALANCE_NONE) {
        TRY(balance_build(job, &copt, norm, pre, &bal, &counts, err));
        if (job->balance == LIPI_BALANCE_PARITY)
            bopt.common.balance = uopt.common.balance = bal;
    } else if (job->n_counts_files) {
        TRY(count_some(job->counts_files, job->n_counts_files, true, NULL, NULL, NULL, &counts,
                       err));
    } else {
        size_t n;
        TRY(plain_inputs(job, &inputs, &n, err));
        /* Counted by the trainer: Unigram may count a sample of the lines. */
        st = unigram ? lipi_unigram_train_files(inputs, n, norm, pre, &copt, &uopt, out, err)
                     : lipi_bpe_train_files(inputs, n, norm, pre, &copt, &bopt, out, err);
        norm = NULL; /* stolen by the trainer */
        pre = NULL;
        goto done;
    }
    st = unigram ? lipi_unigram_train_counts(counts, norm, pre, &uopt, out, err)
                 : lipi_bpe_train_counts(counts, norm, pre, &bopt, out, err);
    norm = NULL;
    pre = NULL;
done:
    lipi_free(inputs);
    lipi_balance_free(bal);
    lipi_counts_free(counts);
    lipi_pretokenizer_free(pre);
    lipi_normalizer_free(norm);
    return st;
}

lipi_status lipi_train_text_new(const char *normalizer, const lipi_normalizer_options *opt,
                                const char *pattern, const char *regex,
                                lipi_normalizer **norm, lipi_pretokenizer **pre, lipi_error *err)
{
    *norm = NULL;
    *pre = NULL;
    if (!regex && strcmp(pattern, "bytelevel") == 0)
        return lipi_error_set(err, LIPI_EINVAL, NULL, 0, 0,
                              "pattern 'bytelevel' is for encoding; to train a byte-level "
                              "vocabulary use byte units with a split pattern");
    lipi_status st = lipi_normalizer_new(normalizer, opt, norm, err);
    if (st != LIPI_OK)
        return st;
    if (regex)
        st = lipi_pretokenizer_new_pattern(regex, pre, err);
    else if (strcmp(pattern, "unigram") == 0)
        st = lipi_unigram_pretokenizer_new(pre, err);
    else
        st = lipi_pretokenizer_new(pattern, pre, err);
    if (st != LIPI_OK) {
        lipi_normalizer_free(*norm);
        *norm = NULL;
    }
    return st;
}

/* Whole-file reads with a size limit, and atomic file writes (temporary file
 * + fsync + rename). POSIX only. */
#include "tokenizer/base.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* strerror without the thread-safety trap of a shared buffer. */
static const char *errtext(int e, char *buf, size_t cap)
{
    return strerror_r(e, buf, cap);
}

static lipi_status io_error(lipi_error *err, const char *path, const char *what, int e)
{
    char buf[128];
    return lipi_error_set(err, LIPI_EIO, path, 0, 0, "%s: %s", what, errtext(e, buf, sizeof buf));
}

lipi_status lipi_read_file(const char *path, size_t max_size, char **out, size_t *len,
                           lipi_error *err)
{
    lipi_status st = LIPI_OK;
    lipi_buf b = {0};
    struct stat sb;
    int fd = -1;

    *out = NULL;
    *len = 0;
    if (!path || !*path)
        return lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "no file name given");
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return io_error(err, path, "cannot open", errno);
    if (fstat(fd, &sb) != 0) {
        st = io_error(err, path, "cannot stat", errno);
        goto done;
    }
    if (S_ISDIR(sb.st_mode)) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "is a directory, expected a file");
        goto done;
    }
    if (S_ISREG(sb.st_mode)) {
        if ((uintmax_t)sb.st_size > max_size) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "file is %jd bytes, more than the limit of %zu",
                                (intmax_t)sb.st_size, max_size);
            goto done;
        }
        /* Exactly the size plus the NUL, so a large file is not doubled. */
        b.p = lipi_malloc((size_t)sb.st_size + 1);
        if (!b.p) {
            st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
            goto done;
        }
        b.cap = (size_t)sb.st_size + 1;
    }
    for (;;) {
        /* The size seen by fstat is only a hint (the file may grow, or be a
         * pipe), so read until end of file and enforce the limit here. When
         * the buffer is full, a one-byte probe tells end of file from more. */
        char probe;
        size_t room = b.cap > b.len ? b.cap - b.len - 1 : 0;
        char *dst = room ? b.p + b.len : &probe;
        ssize_t r = read(fd, dst, room ? room : 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            st = io_error(err, path, "cannot read", errno);
            goto done;
        }
        if (r == 0)
            break;
        if (!room && lipi_buf_append(&b, &probe, 1) != LIPI_OK) {
            st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
            goto done;
        }
        if (room)
            b.len += (size_t)r;
        if (b.len > max_size) {
            st = lipi_error_set(err, LIPI_EFORMAT, path, 0, 0,
                                "file is more than the limit of %zu bytes", max_size);
            goto done;
        }
    }
    if (!b.p && lipi_buf_reserve(&b, 0) != LIPI_OK) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    b.p[b.len] = '\0';
    *out = b.p;
    *len = b.len;
    b.p = NULL;
done:
    lipi_buf_free(&b);
    close(fd);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Atomic writes                                                             */
/* ------------------------------------------------------------------------ */

/* Directory part of path ("." when there is none), newly allocated. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return lipi_strndup(".", 1);
    if (slash == path)
        return lipi_strndup("/", 1);
    return lipi_strndup(path, (size_t)(slash - path));
}

/* ------------------------------------------------------------------------ */
/* Temporary files of killed writers                                         */
/* ------------------------------------------------------------------------ */

bool lipi_temp_claim(int fd)
{
    struct stat sb;
    while (flock(fd, LOCK_EX) != 0) {
        /* Without locks no cleaner can take the lock either, so it never
         * removes this file: writing unlocked is safe. */
        if (errno != EINTR)
            break;
    }
    return fstat(fd, &sb) == 0 && sb.st_nlink > 0;
}

void lipi_remove_stale_temps(const char *target, size_t suffix_len,
                             void (*remove_dir)(const char *path))
{
    char *dir = dir_of(target);
    DIR *d = dir ? opendir(dir) : NULL;
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    size_t blen = strlen(base), dlen = dir ? strlen(dir) : 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *name = e->d_name, *rest = name + blen + 5;
        if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp-", 5) != 0 ||
            strlen(rest) != suffix_len)
            continue;
        bool alnum = true;
        for (size_t i = 0; i < suffix_len; i++)
            alnum &= isalnum((unsigned char)rest[i]) != 0;
        size_t nlen = strlen(name);
        char *path = alnum ? lipi_malloc(dlen + nlen + 2) : NULL;
        if (!path)
            continue;
        memcpy(path, dir, dlen);
        path[dlen] = '/';
        memcpy(path + dlen + 1, name, nlen + 1);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 &&
            (remove_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)) &&
            flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (remove_dir)
                remove_dir(path);
            else
                unlink(path);
        }
        if (fd >= 0)
            close(fd);
        lipi_free(path);
    }
    if (d)
        closedir(d);
    lipi_free(dir);
}

/* ------------------------------------------------------------------------ */
/* Atomic writes                                                             */
/* ------------------------------------------------------------------------ */

/* Eight hex digits that differ between calls and processes. */
static void random_suffix(char out[9], unsigned attempt)
{
    uint32_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 16) ^ attempt * 2654435761u;
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        out[i] = hex[(r >> (4 * i)) & 15];
    out[8] = '\0';
}

lipi_status lipi_atomic_open(lipi_atomic_file *af, const char *path, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    char *dir = NULL;
    struct stat sb;
    int fd = -1;

    memset(af, 0, sizeof *af);
    if (!path || !*path)
        return lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "no file name given");
    size_t plen = strlen(path);
    if (path[plen - 1] == '/')
        return lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "is a directory, expected a file name");
    dir = dir_of(path);
    af->path = lipi_strndup(path, plen);
    af->tmp = plen <= SIZE_MAX - 16 ? lipi_malloc(plen + 16) : NULL;
    if (!dir || !af->path || !af->tmp) {
        st = lipi_error_set(err, LIPI_ENOMEM, path, 0, 0, "out of memory");
        goto done;
    }
    /* Check the directory before producing anything, so a long computation
     * followed by a save fails early in callers that open first. */
    if (stat(dir, &sb) != 0) {
        char buf[128];
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "directory %s: %s", dir,
                            errtext(errno, buf, sizeof buf));
        goto done;
    }
    if (!S_ISDIR(sb.st_mode)) {
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "%s is not a directory", dir);
        goto done;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
        char buf[128];
        st = lipi_error_set(err, LIPI_EIO, path, 0, 0, "cannot write to directory %s: %s", dir,
                            errtext(errno, buf, sizeof buf));
        goto done;
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = lipi_error_set(err, LIPI_EINVAL, path, 0, 0, "is a directory, expected a file name");
        goto done;
    }
    lipi_remove_stale_temps(path, 8, NULL);
    for (unsigned attempt = 0; fd < 0; attempt++) {
        char suffix[9];
        random_suffix(suffix, attempt);
        memcpy(af->tmp, path, plen);
        memcpy(af->tmp + plen, ".tmp-", 5);
        memcpy(af->tmp + plen + 5, suffix, 9);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && (errno != EEXIST || attempt >= 100)) {
            st = io_error(err, path, "cannot create a temporary file", errno);
            goto done;
        }
        /* A cleaner that got here between open and lock removed it. */
        if (fd >= 0 && !lipi_temp_claim(fd)) {
            close(fd);
            fd = -1;
        }
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        st = io_error(err, path, "cannot open the temporary file", errno);
        close(fd);
        unlink(af->tmp);
        goto done;
    }
done:
    lipi_free(dir);
    if (st != LIPI_OK) {
        lipi_free(af->path);
        lipi_free(af->tmp);
        memset(af, 0, sizeof *af);
    }
    return st;
}

static void atomic_release(lipi_atomic_file *af)
{
    lipi_free(af->path);
    lipi_free(af->tmp);
    memset(af, 0, sizeof *af);
}

lipi_status lipi_atomic_commit(lipi_atomic_file *af, lipi_error *err)
{
    lipi_status st = LIPI_OK;
    if (!af->f)
        return lipi_error_set(err, LIPI_EINVAL, af->path, 0, 0, "file is not open");
    FILE *f = af->f;
    af->f = NULL;
    int failed = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (!failed && !af->no_sync && fsync(fileno(f)) != 0) {
        failed = 1;
        e = errno;
    }
    /* Rename while the lock is held (it ends with fclose), so no cleaner
     * can take the temporary file for a killed writer's. */
    if (!failed && rename(af->tmp, af->path) != 0) {
        st = io_error(err, af->path, "cannot rename the temporary file over it", errno);
        unlink(af->tmp);
        fclose(f);
        goto done;
    }
    if (failed) {
        st = io_error(err, af->path, "cannot write", e ? e : EIO);
        unlink(af->tmp);
        fclose(f);
        goto done;
    }
    fclose(f); /* the data is flushed and synced: nothing left to fail */
    /* Make the rename itself durable. Some file systems refuse fsync on a
     * directory; the data is written by then, so that is not an error. */
    char *dir = af->no_sync ? NULL : dir_of(af->path);
    if (dir) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        lipi_free(dir);
    }
done:
    atomic_release(af);
    return st;
}

void lipi_atomic_abort(lipi_atomic_file *af)
{
    if (af->f) {
        fclose(af->f);
        unlink(af->tmp);
    }
    atomic_release(af);
}

lipi_status lipi_check_writable(const char *path, lipi_error *err)
{
    lipi_atomic_file af;
    lipi_status st = lipi_atomic_open(&af, path, err);
    if (st == LIPI_OK)
        lipi_atomic_abort(&af);
    return st;
}

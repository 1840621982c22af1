/* Reading a small file whole (see file.h). */
#include "file.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* size bytes of fd into a new block of size + 1; NULL when out of memory,
 * and *done short of size when the file ended early or a read failed. */
static char *read_bytes(int fd, size_t size, size_t *done)
{
    char *data = malloc(size + 1);
    *done = 0;
    while (data != NULL && *done < size) {
        ssize_t n = read(fd, data + *done, size - *done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        *done += (size_t)n;
    }
    assert(*done <= size);
    return data;
}

int file_read_all(const char *path, size_t bytes_max, char **text, size_t *length, char *error,
                  size_t error_size)
{
    assert(path != NULL && text != NULL && length != NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int missing = fd < 0 && errno == ENOENT;
        snprintf(error, error_size, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return missing ? 1 : -1;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > bytes_max) {
        snprintf(error, error_size, "%s: larger than %zu bytes", path, bytes_max);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, done;
    char *data = read_bytes(fd, size, &done);
    close(fd);
    if (data == NULL || done != size) {
        snprintf(error, error_size, "%s: %s", path, data == NULL ? "out of memory" : "short read");
        free(data);
        return -1;
    }
    data[size] = '\0';
    *text = data;
    *length = size;
    return 0;
}

/* Writes all of data to fd; 0 or -1 (errno set). */
static int write_all(int fd, const char *data, size_t length)
{
    assert(fd >= 0);
    assert(data != NULL || length == 0);
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        assert((size_t)n <= length);
        data += n;
        length -= (size_t)n;
    }
    return 0;
}

/* Writes and fsyncs a file; NULL, or the step that failed with *saved_errno. */
static const char *write_synced(const char *path, const char *data, size_t length, int *saved_errno)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *saved_errno = errno;
        return "open";
    }
    const char *step = NULL;
    if (write_all(fd, data, length) != 0)
        step = "write";
    else if (fsync(fd) != 0)
        step = "fsync";
    if (step != NULL)
        *saved_errno = errno;
    if (close(fd) != 0 && step == NULL) {
        *saved_errno = errno;
        step = "close";
    }
    return step;
}

static const char *fsync_directory(const char *dir, int *saved_errno)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *saved_errno = errno;
        return "open directory";
    }
    const char *step = NULL;
    if (fsync(fd) != 0) {
        *saved_errno = errno;
        step = "fsync directory";
    }
    close(fd);
    return step;
}

const char *file_replace(const char *path, const char *tmp_path, const char *dir, const char *data,
                         size_t length, int *saved_errno)
{
    const char *step = write_synced(tmp_path, data, length, saved_errno);
    if (step == NULL && rename(tmp_path, path) != 0) {
        *saved_errno = errno;
        step = "rename";
    }
    if (step == NULL)
        step = fsync_directory(dir, saved_errno);
    return step;
}

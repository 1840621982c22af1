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

/* The data directory: creation, and the one-owner rule. The lock is an
 * flock on DATA_DIR/llmlimitd.lock rather than the file's existence, so a
 * crashed owner never leaves the directory locked. */
#include "data_dir.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int data_dir_ensure(const char *dir, char *error, size_t error_size)
{
    assert(dir != NULL);
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        snprintf(error, error_size, "%s: not a directory", dir);
        return -1;
    }
    if (errno == ENOENT && mkdir(dir, 0755) == 0)
        return 0;
    snprintf(error, error_size, "%s: %s", dir, strerror(errno));
    return -1;
}

/* The pid the owner wrote, for the error message; "unknown" if none. */
static void read_owner(int fd, char *pid, size_t size)
{
    assert(size >= 8);
    snprintf(pid, size, "unknown");
    char text[32];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return;
    text[n] = '\0';
    text[strcspn(text, "\n")] = '\0';
    if (text[0] != '\0')
        snprintf(pid, size, "%s", text);
}

int data_dir_lock(const char *dir, int *fd_out, char *error, size_t error_size)
{
    assert(dir != NULL);
    assert(fd_out != NULL);
    *fd_out = -1;
    char path[PATH_MAX];
    int length = snprintf(path, sizeof path, "%s/%s", dir, DATA_DIR_LOCK_FILE_NAME);
    if (length < 0 || (size_t)length >= sizeof path) {
        snprintf(error, error_size, "%s: path too long", dir);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(error, error_size, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32];
        read_owner(fd, pid, sizeof pid);
        snprintf(error, error_size, "data directory %s is in use by another llmlimitd (pid %s)",
                 dir, pid);
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    assert(n > 0 && (size_t)n < sizeof pid);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        snprintf(error, error_size, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    *fd_out = fd;
    return 0;
}

/* LD_PRELOAD shim for test_gw_keys_sync_fails.py: while the file named by
 * LLMLIMIT_TEST_FAIL_SYNC exists, fdatasync and fsync of a descriptor open
 * on keys.log or keys.json.tmp fail with EIO (as a disk that refuses a write
 * would); every other one, and every one while the file is absent, is the
 * real one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int refused(int fd)
{
    const char *flag = getenv("LLMLIMIT_TEST_FAIL_SYNC");
    if (flag == NULL || access(flag, F_OK) != 0)
        return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    size_t length = (size_t)n;
    static const char *const names[] = {"/keys.log", "/keys.json.tmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t suffix = strlen(names[i]);
        if (length >= suffix && strcmp(path + length - suffix, names[i]) == 0)
            return 1;
    }
    return 0;
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "fdatasync");
    if (refused(fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "fsync");
    if (refused(fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

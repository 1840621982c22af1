/* LD_PRELOAD shim for test_shutdown.py: every epoll_ctl(EPOLL_CTL_DEL) made
 * by the process's main thread waits 50 ms first. A shutdown whose main
 * thread removes a descriptor from a set that a worker thread also removes
 * it from then loses that race every time (the HTTP library llmlimitd used
 * before its own server aborted there). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int epoll_ctl(int epoll_fd, int operation, int fd, struct epoll_event *event)
{
    static int (*real)(int, int, int, struct epoll_event *);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "epoll_ctl");
    if (operation == EPOLL_CTL_DEL && syscall(SYS_gettid) == getpid()) {
        struct timespec wait = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
        nanosleep(&wait, NULL);
    }
    return real(epoll_fd, operation, fd, event);
}

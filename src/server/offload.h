/* The offload thread: runs the parts of handlers that block on I/O (a
 * limit's change: the backend's admin call, then the write and fsync of
 * limits.json) off the HTTP workers (docs/architecture.md "Threads"). One
 * thread, jobs in the order given, at most OFFLOAD_JOBS_MAX waiting. */
#ifndef LLMLIMIT_SERVER_OFFLOAD_H
#define LLMLIMIT_SERVER_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>

struct offload;

typedef void (*offload_fn)(void *context);

/* Starts the thread with room for jobs_max waiting jobs (1..). 0 with *out,
 * or -1 with errno set (out of memory, no thread). */
int offload_start(uint32_t jobs_max, struct offload **out);
/* Any thread: queues run(context). false, and run is never called, when
 * jobs_max jobs wait already or the thread is stopping. */
bool offload_submit(struct offload *offload, offload_fn run, void *context);
/* Runs the jobs still waiting, then stops the thread and frees it. NULL is
 * ignored. */
void offload_stop(struct offload *offload);

#endif

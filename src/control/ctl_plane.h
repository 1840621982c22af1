/* The control plane's follower: keeps a local side (the server's limit
 * registry) in step with every key under a prefix of etcd. It reads the
 * prefix whole (range), then watches from that revision, handing each
 * change to the local side in revision order per key; when the store
 * cannot be reached it says so, keeps the last view, and reads the prefix
 * again once it can. It also writes a local change to the store first and
 * applies it only once written. Knows nothing of limits: values are bytes. */
#ifndef LLMLIMIT_CONTROL_CTL_PLANE_H
#define LLMLIMIT_CONTROL_CTL_PLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The local side. name is a key without the prefix (NUL-terminated, no NUL
 * inside). Each is called with the plane's lock held, from the watcher
 * thread or a writer's thread, one at a time, and logs its own failures.
 * put and remove return 0 when done or never to be done (a value the local
 * side refuses), -1 when it failed for now (its disk, its backend): the
 * plane then reads the store again, with a pause, until it applies. */
struct ctl_plane_ops {
    /* revision: the store's mod_revision of this value (only grows per name). */
    int (*put)(void *context, const char *name, const char *value, size_t value_length,
               int64_t revision);
    int (*remove)(void *context, const char *name);
    /* The names the local side holds now: a malloc'd array of malloc'd
     * strings (the plane frees both); -1 when they cannot be listed. */
    int (*names)(void *context, char ***names, size_t *count);
    /* Called after each batch of changes (a whole read, a watch response),
     * so that the local side may apply puts of a batch together. -1 when
     * some failed for now: every name is then applied again from the next
     * read of the store (those in force already are the local side's to
     * skip). NULL: nothing to flush. */
    int (*flush)(void *context);
    /* Called on the watcher's thread each time its watch is set up (after
     * the start's read, and after each read once the store was lost),
     * without the lock: the local side may write to the store what it made
     * while it could not (ctl_plane_create). NULL: nothing to write. */
    void (*watching)(void *context);
};

struct ctl_plane;

/* url as ctl_etcd_open takes it; prefix (ends with '/'). 0 with a new
 * plane, not yet started, or -1 with error (a bad url). */
int ctl_plane_open(const char *url, const char *prefix, const struct ctl_plane_ops *ops,
                   void *context, struct ctl_plane **out, char *error, size_t error_size);
/* A whole read of a prefix begun on a thread of its own, so that a front
 * end reads its local files, and its other prefix, while the store answers;
 * ctl_plane_start takes it. */
struct ctl_prefetch;

/* url as ctl_etcd_open takes it, prefix as the plane's. 0 with the read
 * under way, or -1 with error (a bad url, no thread). */
int ctl_prefetch_begin(const char *url, const char *prefix, struct ctl_prefetch **out, char *error,
                       size_t error_size);
/* Waits for the read and frees it; NULL is fine. */
void ctl_prefetch_free(struct ctl_prefetch *prefetch);

/* One read of the prefix (so a front end starts with the store's view
 * when it can reach it; it starts with its own otherwise, logged), then the
 * watcher thread. prefetch (of the plane's prefix; freed here) is that read
 * begun earlier; NULL: the prefix is read now. 0, or -1 when the thread
 * cannot start. */
int ctl_plane_start(struct ctl_plane *plane, struct ctl_prefetch *prefetch);
/* Stops the watcher (within about a second) and frees the plane. */
void ctl_plane_close(struct ctl_plane *plane);

/* Writes name = value (value NULL: deletes name) to the store; once it is
 * there, applies it locally through apply(context), unless a later change
 * of name is applied already (*applied false). The plane's lock is held
 * throughout, so the watch applies nothing meanwhile. apply returns as
 * ops.put does (-1: the plane applies the change again from the store). 0, or
 * -1 with error when the store did not take it (nothing was applied). */
int ctl_plane_write(struct ctl_plane *plane, const char *name, const char *value,
                    size_t value_length, int (*apply)(void *context), void *context, bool *applied,
                    char *error, size_t error_size);

/* Writes name = value to the store only if name is not there (a create
 * once), for a change the local side made already (nothing is applied
 * here): *created says whether this write made it; when another's was
 * there first, the watch brings that one. 0, or -1 with error when the
 * store could not be asked. */
int ctl_plane_create(struct ctl_plane *plane, const char *name, const char *value,
                     size_t value_length, bool *created, char *error, size_t error_size);

/* Whether the watcher's last attempt reached the store (its watch runs). */
bool ctl_plane_connected(const struct ctl_plane *plane);
/* The store's revision this front end's view is at (0 before the first read). */
int64_t ctl_plane_revision(const struct ctl_plane *plane);

#endif

/* The data directory (docs/configuration.md "--data-dir"): created if
 * missing, and owned by one llmlimitd at a time whatever the backend, since
 * limits.json in it is the server's. */
#ifndef LLMLIMIT_SERVER_DATA_DIR_H
#define LLMLIMIT_SERVER_DATA_DIR_H

#include <stddef.h>

#define DATA_DIR_LOCK_FILE_NAME "llmlimitd.lock"

/* Creates dir (one level) unless it exists. 0, or -1 with the reason in
 * error (not a directory, cannot create). */
int data_dir_ensure(const char *dir, char *error, size_t error_size);

/* Takes the exclusive lock on dir/llmlimitd.lock and writes this process's
 * pid into it. The lock is held until *fd_out is closed (at exit at the
 * latest: the kernel drops it even after kill -9, so a stale file never
 * blocks a restart). Returns 0 with *fd_out set, or -1 with the reason in
 * error: "data directory D is in use by another llmlimitd (pid P)" when
 * another process holds it, or the file that cannot be opened or written. */
int data_dir_lock(const char *dir, int *fd_out, char *error, size_t error_size);

#endif

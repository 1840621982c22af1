/* Reading a small file whole (a configuration, a price list, the saved
 * registry): one bounded read with one set of error messages, so every file
 * llmlimitd loads is refused the same way when missing, too large or short. */
#ifndef LLMLIMIT_UTIL_FILE_H
#define LLMLIMIT_UTIL_FILE_H

#include <stddef.h>

/* Reads the file at path into a new NUL-terminated block: *text (caller
 * frees with free()) and *length (bytes before the NUL). 0 on success;
 * 1 when there is no such file; -1 when it cannot be opened or read, is
 * larger than bytes_max, or memory runs out. On 1 and -1 error holds
 * "<path>: <reason>" and *text is untouched. */
int file_read_all(const char *path, size_t bytes_max, char **text, size_t *length, char *error,
                  size_t error_size);

/* Replaces the file at path atomically (limits.json, alerts.json): writes
 * tmp_path, fsyncs it, renames it over path and fsyncs dir (path's
 * directory), so the file is always whole, old or new. NULL on success,
 * else the step that failed ("open", "write", "fsync", "close", "rename",
 * "open directory", "fsync directory") with *saved_errno. */
const char *file_replace(const char *path, const char *tmp_path, const char *dir, const char *data,
                         size_t length, int *saved_errno);

#endif

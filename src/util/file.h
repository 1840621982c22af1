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

#endif

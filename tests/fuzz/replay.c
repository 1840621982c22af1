/* Runs a libFuzzer harness over files and directories without libFuzzer: the
 * committed seed corpus and every input that once crashed (regressions/)
 * become an ordinary test in the regular and sanitizer builds. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_INPUT_BYTES_MAX (1024 * 1024)
#define REPLAY_PATH_BYTES_MAX 4096

static int replay_file(const char *path, uint8_t *buffer)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t size = fread(buffer, 1, REPLAY_INPUT_BYTES_MAX, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buffer, size); /* asserts inside fail the test */
    return 0;
}

/* Returns the number of inputs replayed, or -1. */
static long replay_path(const char *path, uint8_t *buffer)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path, buffer) == 0 ? 1 : -1;
    DIR *dir = opendir(path);
    if (dir == NULL) {
        perror(path);
        return -1;
    }
    long count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char child[REPLAY_PATH_BYTES_MAX];
        snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
        if (replay_file(child, buffer) != 0) {
            count = -1;
            break;
        }
        count++;
    }
    closedir(dir);
    return count;
}

int main(int argc, char **argv)
{
    uint8_t *buffer = malloc(REPLAY_INPUT_BYTES_MAX);
    if (buffer == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long n = replay_path(argv[i], buffer);
        if (n < 0) {
            free(buffer);
            return 1;
        }
        total += n;
    }
    free(buffer);
    printf("%ld inputs replayed\n", total);
    return total > 0 ? 0 : 1;
}

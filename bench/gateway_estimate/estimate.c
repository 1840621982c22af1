/* Prints the gateway's token estimate of each sample file given, one line
 * "<name>\t<estimate>" each; a file whose name holds ".lines." is a set of
 * samples, one per line ("<name>:<line>"). measure.mjs compares these with
 * a real tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_estimate.h"

#define SAMPLE_BYTES_MAX (4 * 1024 * 1024)

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

static void print_lines(const char *name, const char *text, size_t length)
{
    size_t start = 0, line = 1;
    for (size_t i = 0; i <= length; i++) {
        if (i < length && text[i] != '\n')
            continue;
        if (i > start)
            printf("%s:%zu\t%llu\n", name, line,
                   (unsigned long long)gw_estimate_text(text + start, i - start));
        start = i + 1;
        line++;
    }
}

int main(int argc, char **argv)
{
    static char text[SAMPLE_BYTES_MAX];
    for (int i = 1; i < argc; i++) {
        FILE *file = fopen(argv[i], "rb");
        if (file == NULL) {
            perror(argv[i]);
            return 1;
        }
        size_t length = fread(text, 1, sizeof text, file);
        int too_big = !feof(file);
        fclose(file);
        if (too_big) {
            fprintf(stderr, "%s: larger than %d bytes\n", argv[i], SAMPLE_BYTES_MAX);
            return 1;
        }
        const char *name = base_name(argv[i]);
        if (strstr(name, ".lines.") != NULL)
            print_lines(name, text, length);
        else
            printf("%s\t%llu\n", name, (unsigned long long)gw_estimate_text(text, length));
    }
    return 0;
}

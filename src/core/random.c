#include "random.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>

int random_fill(void *out, size_t length)
{
    uint8_t *bytes = out;
    size_t done = 0;
    while (done < length) {
        ssize_t n = getrandom(bytes + done, length - done, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

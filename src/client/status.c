/* A call's status (its HTTP status, attempts and the server's error text)
 * and the HTTP status's error code: the bottom of libllmlimit, which the
 * transport, the codec and the client object all write through. */
#include <assert.h>
#include <string.h>

#include "internal.h"

void status_reset(struct llmlimit_status *status)
{
    assert(status != NULL);
    status->http_status = 0;
    status->attempts = 0;
    status->error[0] = '\0';
}

struct llmlimit_status *status_begin(struct llmlimit_status *status, struct llmlimit_status *local)
{
    assert(local != NULL);
    if (status == NULL)
        status = local;
    status_reset(status);
    return status;
}

void status_set_error(struct llmlimit_status *status, const char *message)
{
    if (status != NULL)
        copy_string(status->error, sizeof(status->error), message);
}

void copy_string(char *dst, size_t dst_size, const char *src)
{
    assert(dst != NULL);
    assert(dst_size > 0);
    assert(src != NULL);
    size_t length = strlen(src);
    if (length >= dst_size)
        length = dst_size - 1;
    memcpy(dst, src, length);
    dst[length] = '\0';
}

int client_status_error(int http_status)
{
    if (http_status >= 200 && http_status < 300)
        return 0;
    switch (http_status) {
    case 400:
        return LLMLIMIT_ERR_BAD_REQUEST;
    case 401:
        return LLMLIMIT_ERR_UNAUTHORIZED;
    case 404:
        return LLMLIMIT_ERR_NOT_FOUND;
    case 409:
        return LLMLIMIT_ERR_CONFLICT;
    case 413:
        return LLMLIMIT_ERR_TOO_LARGE;
    default:
        return http_status >= 500 ? LLMLIMIT_ERR_UNAVAILABLE : LLMLIMIT_ERR_PROTOCOL;
    }
}

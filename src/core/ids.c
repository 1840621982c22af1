/* Identifier syntax (ids.h): one definition for the server, the backends
 * and the C client. */
#include "ids.h"

#include <assert.h>
#include <string.h>

#include "bounds.h"

bool ids_visible_ascii(const char *text, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c <= 0x20 || c >= 0x7f)
            return false;
    }
    return true;
}

bool limit_key_valid(const char *key, size_t length)
{
    assert(key != NULL || length == 0);
    return length > 0 && length <= LIMIT_KEY_LENGTH_MAX && ids_visible_ascii(key, length);
}

bool lease_id_valid(const char *lease_id, size_t length)
{
    assert(lease_id != NULL || length == 0);
    if (length == 0 || length > LEASE_ID_LENGTH_MAX)
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = lease_id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

bool lease_id_is_gateway(const char *lease_id, size_t length)
{
    assert(lease_id != NULL || length == 0);
    size_t prefix = sizeof LEASE_ID_GATEWAY_PREFIX - 1;
    return length >= prefix && memcmp(lease_id, LEASE_ID_GATEWAY_PREFIX, prefix) == 0;
}

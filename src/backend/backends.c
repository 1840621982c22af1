/* The backends compiled in, found by name (--backend). The only file that
 * knows every backend. */
#include "backend.h"

#include <assert.h>
#include <string.h>

#include "memory/memory.h"
#include "sqlite/sqlite.h"
#include "tigerbeetle/tigerbeetle.h"

/* Each backend adds itself here once it builds. */
static const struct backend_ops *const backends[] = {
    &mem_backend_ops,
    &sq_backend_ops,
    &tb_backend_ops,
};

#define BACKEND_COUNT (sizeof backends / sizeof backends[0])
_Static_assert(BACKEND_COUNT <= BACKENDS_MAX, "room for every backend's options");

uint32_t backend_count(void)
{
    return (uint32_t)BACKEND_COUNT;
}

const struct backend_ops *backend_at(uint32_t index)
{
    assert(index < BACKEND_COUNT);
    assert(backends[index]->options_size <= BACKEND_OPTIONS_BYTES_MAX);
    return backends[index];
}

const struct backend_ops *backend_find(const char *name)
{
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    }
    return NULL;
}

const char *backend_default_name(void)
{
    return backend_find("sqlite") != NULL ? "sqlite" : "memory";
}

const char *backend_names(void)
{
    static char names[128];
    if (names[0] != '\0')
        return names;
    char buffer[sizeof names] = "";
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (i > 0)
            strncat(buffer, ",", sizeof buffer - strlen(buffer) - 1);
        strncat(buffer, backends[i]->name, sizeof buffer - strlen(buffer) - 1);
    }
    memcpy(names, buffer, sizeof names); /* same bytes from any thread */
    return names;
}

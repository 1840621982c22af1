/* The limit registry file, DATA_DIR/limits.json (docs/configuration.md
 * "The registry file"): an array of LimitStates loaded into the backend at
 * startup and rewritten atomically after every change. The backend owns the live states;
 * this module owns the file and serialises its writes. */
#ifndef LLMLIMIT_SERVER_REGISTRY_H
#define LLMLIMIT_SERVER_REGISTRY_H

#include <stddef.h>

#include "backend/backend.h"

struct registry;

enum registry_outcome {
    REGISTRY_OK = 0,
    REGISTRY_REJECTED = -1,     /* the change is invalid (error says why): nothing changed */
    REGISTRY_UNKNOWN = -2,      /* no such key */
    REGISTRY_WRITE_FAILED = -3, /* changed in the backend, but limits.json was not written */
};

/* Loads data_dir/limits.json (a missing file is an empty registry) and
 * restores every state into the backend. Returns 0 with a new registry, or -1
 * with "<file>: line L: <reason>" in error (unreadable file, invalid JSON,
 * invalid or duplicate state, backend refusal). */
int registry_open(const char *data_dir, struct backend *backend, struct registry **out, char *error,
                  size_t error_size);
void registry_close(struct registry *registry);

/* Creates or changes a limit and rewrites the file. */
enum registry_outcome registry_put(struct registry *registry,
                                   const struct limit_definition *definition,
                                   struct limit_state *state_out, char *error, size_t error_size);
enum registry_outcome registry_delete(struct registry *registry, const char *key);
/* Rewrites the file from the backend's states (after a tick changed some).
 * REGISTRY_OK or REGISTRY_WRITE_FAILED. */
enum registry_outcome registry_save(struct registry *registry);

const char *registry_path(const struct registry *registry);

#endif

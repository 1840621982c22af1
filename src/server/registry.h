/* The limit registry file, DATA_DIR/limits.json (docs/configuration.md
 * "The registry file"): an array of LimitStates loaded into the backend at
 * startup and rewritten atomically after every change. The backend owns the live states;
 * this module owns the file, serialises its writes, and keeps the two in
 * agreement when a write fails or the process dies mid-change. */
#ifndef LLMLIMIT_SERVER_REGISTRY_H
#define LLMLIMIT_SERVER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

struct registry;

enum registry_outcome {
    REGISTRY_OK = 0,
    REGISTRY_REJECTED = -1, /* the change is invalid (error says why): nothing changed */
    REGISTRY_UNKNOWN = -2,  /* no such key */
    /* limits.json could not be written: the change was undone in the
     * backend (or never made), so nothing changed. */
    REGISTRY_WRITE_FAILED = -3,
    /* The backend did not take the change (its storage failed): nothing
     * changed, or the outcome is unknown as for a data call's 503. */
    REGISTRY_BACKEND_FAILED = -4,
    /* limits.json could not be written and the backend could not undo the
     * change either: it is in force, and registry_tick rewrites the file
     * until it succeeds. A start before that goes back to the file. */
    REGISTRY_UNSAVED = -5,
    /* registry_create_absent: the key has a limit already, left as it is. */
    REGISTRY_EXISTS = -6,
};

/* Removes a stale limits.json.tmp (a rewrite cut short by a crash), loads
 * data_dir/limits.json and restores every state into the backend. The file
 * is the truth: a limit the backend kept that the file does not name (a
 * change that crashed before the file was written) is deleted. Without the
 * file, the backend's limits (none for a fresh data directory) are written
 * into a new one, so the file exists from the first start on. Returns 0
 * with a new registry, or -1 with "<file>: line L: <reason>" in error
 * (unreadable file, invalid JSON, invalid or duplicate state, backend
 * refusal, a file that cannot be written). */
int registry_open(const char *data_dir, struct backend *backend, struct registry **out, char *error,
                  size_t error_size);
void registry_close(struct registry *registry);

/* Creates or changes a limit: the backend first, then the file. When the
 * file cannot be written the backend is put back as it was
 * (REGISTRY_WRITE_FAILED), or, if that fails too, REGISTRY_UNSAVED. Also
 * REGISTRY_REJECTED (error set) and REGISTRY_BACKEND_FAILED. */
enum registry_outcome registry_put(struct registry *registry,
                                   const struct limit_definition *definition,
                                   struct limit_state *state_out, char *error, size_t error_size);
/* One limit to create unless its key has one (registry_create_absent). */
struct registry_creation {
    struct limit_definition definition; /* in: valid, as backend_put_limit takes it */
    enum registry_outcome outcome;      /* out */
    char error[160];                    /* out: why, when REGISTRY_REJECTED */
};

/* Creates each definition whose key has no limit, and never touches one
 * that has (REGISTRY_EXISTS): under the registry's lock, so concurrent
 * creations of one key (and a PUT or DELETE of it) make it once. All those
 * created are written to the file in one rewrite. Each item's outcome:
 * REGISTRY_OK (created), REGISTRY_EXISTS, REGISTRY_REJECTED (error set:
 * LIMITS_COUNT_MAX limits, say), REGISTRY_BACKEND_FAILED, or, when the file
 * could not be written, REGISTRY_WRITE_FAILED (undone) or REGISTRY_UNSAVED
 * (in force, the ticker writes it). */
void registry_create_absent(struct registry *registry, struct registry_creation *items,
                            size_t count);
/* As registry_create_absent, but the file is not written: the caller
 * calls registry_save_created once after its last batch (a follower of the
 * control plane applying a whole read, so 100,000 limits new to a front end
 * cost one rewrite, not one per batch). Until then a start goes back to the
 * file. Outcomes as above, but never REGISTRY_WRITE_FAILED or
 * REGISTRY_UNSAVED. */
void registry_create_absent_unsaved(struct registry *registry, struct registry_creation *items,
                                    size_t count);
/* Writes the file after registry_create_absent_unsaved; when it cannot,
 * the limits those calls created (keys) are deleted again, as
 * registry_create_absent undoes its own. REGISTRY_OK,
 * REGISTRY_WRITE_FAILED (undone) or REGISTRY_UNSAVED (some could not be
 * undone: in force, and the ticker writes the file). */
enum registry_outcome registry_save_created(struct registry *registry, char *const *keys,
                                            size_t count);
/* Deletes a limit: the file first (without the key), then the backend, so
 * a crash between the two finishes the delete at the next start.
 * REGISTRY_OK, REGISTRY_UNKNOWN, REGISTRY_WRITE_FAILED (nothing changed) or
 * REGISTRY_BACKEND_FAILED. */
enum registry_outcome registry_delete(struct registry *registry, const char *key);
/* Called by the ticker: rewrites the file from the backend's states when
 * they changed (a tick applied a decrease) or an earlier write failed.
 * REGISTRY_OK or REGISTRY_WRITE_FAILED (logged once per streak of
 * failures; the next call tries again). */
enum registry_outcome registry_tick(struct registry *registry, bool changed);
/* Rewrites the file from the backend's states now. REGISTRY_OK or
 * REGISTRY_WRITE_FAILED (then registry_tick tries again). */
enum registry_outcome registry_save(struct registry *registry);

const char *registry_path(const struct registry *registry);

/* A number that grows with every rewrite of the file (so every change of
 * the limits): whoever keeps a copy of some definitions (the alerts'
 * scanner) reads them again when it moved. Any thread. */
uint64_t registry_generation(struct registry *registry);

#endif

/* --control: the limit definitions kept in etcd for every front end
 * (docs/architecture.md "The control plane"). A change made through the
 * admin API is written to the store first and applied here only once it is
 * there; changes made through other front ends arrive by the watch and are
 * applied through the registry like a local one. Without --control none of
 * this runs and limits.json alone holds the definitions. */
#ifndef LLMLIMIT_SERVER_CONTROL_H
#define LLMLIMIT_SERVER_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"
#include "util/buffer.h"

struct control;
struct ctl_prefetch;
struct wait;

/* Where the definitions live in the store: one key per limit. */
#define CONTROL_LIMITS_PREFIX "/llmlimit/limits/"

/* url is --control's. Reads the store's definitions once (applied over
 * limits.json's when it answers; limits.json's stay in force when it does
 * not, logged), then follows it on a thread of its own. read: that read of
 * CONTROL_LIMITS_PREFIX begun earlier (ctl_prefetch_begin; taken, freed
 * here), or NULL to read now. wait may be NULL (then no waiter is told of a
 * change). 0, or -1 with error (a bad url, no thread). */
int control_open(const char *url, struct ctl_prefetch *read, struct registry *registry,
                 struct backend *backend, struct wait *wait, struct control **out, char *error,
                 size_t error_size);
/* Stops following; NULL is fine. */
void control_close(struct control *control);

/* The admin API's changes. Each is in the store before it is in force
 * here. CONTROL_UNAVAILABLE: the store did not take it, nothing changed;
 * REGISTRY_UNSAVED: the store took it but this front end's disk or backend
 * failed to apply it (in force elsewhere; the follower applies it here
 * once it can); otherwise the registry's outcome (REGISTRY_REJECTED with
 * error set when the change could never apply, checked before the store
 * is written). */
#define CONTROL_UNAVAILABLE (-100)
int control_put(struct control *control, const struct limit_definition *definition,
                struct limit_state *state_out, char *error, size_t error_size);
/* REGISTRY_UNKNOWN when this front end has no such limit (nothing written). */
int control_delete(struct control *control, const char *key, char *error, size_t error_size);

/* Limits this front end made by itself (a gateway template's default, from
 * the registry's creations whose outcome is REGISTRY_OK) written to the
 * store once, so every front end has them with this definition; one the
 * store holds already is left as it is (the watch brings it). While the
 * store cannot be reached (logged) such a limit is this front end's alone,
 * and it is written, as it is in force then, once the watch is set up
 * again (unless the store has that key by then, or it was deleted here). */
void control_publish(struct control *control, const struct registry_creation *items, size_t count);

/* Whether the follower's watch runs, and the store's revision the view is at. */
void control_status(const struct control *control, bool *connected, int64_t *revision);
/* llmlimit_control_connected and llmlimit_control_revision, for /metrics. */
void control_metrics_render(const struct control *control, struct buffer *out);

#endif

/* --control for the Keys API's keys: every key made or changed through any
 * front end is kept in etcd under KEYS_CONTROL_PREFIX (one key per id, its
 * record with the secret's SHA-256 only, never a secret), written there
 * before it is in force, and followed by every front end's watch
 * (docs/architecture.md "The control plane"). Without --control none of
 * this runs and keys.json and keys.log alone hold the keys. */
#ifndef LLMLIMIT_SERVER_KEYS_CONTROL_H
#define LLMLIMIT_SERVER_KEYS_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "keys.h"
#include "util/buffer.h"

#define KEYS_CONTROL_PREFIX "/llmlimit/keys/"

struct keys_control;
struct ctl_prefetch;

/* url is --control's. Reads the store's keys once (put in force over
 * keys.json's when it answers, and keys.json's it never held written to it
 * once, keys_publish; keys.json's stay when it does not answer, logged),
 * then follows it on a thread of its own; from here on each change of keys
 * is written to the store first (keys_set_store). read: that read of
 * KEYS_CONTROL_PREFIX begun earlier (ctl_prefetch_begin; taken, freed
 * here), or NULL to read now. 0, or -1 with error. */
int keys_control_open(const char *url, struct ctl_prefetch *read, struct keys *keys,
                      struct keys_control **out, char *error, size_t error_size);
/* Stops following and writing to the store; NULL is fine. */
void keys_control_close(struct keys_control *control);

/* Whether the keys' watch runs, and the revision their view is at. */
void keys_control_status(const struct keys_control *control, bool *connected, int64_t *revision);
/* llmlimit_control_keys_connected and llmlimit_control_keys_revision. */
void keys_control_metrics_render(const struct keys_control *control, struct buffer *out);

#endif

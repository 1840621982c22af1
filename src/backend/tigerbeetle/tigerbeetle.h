/* The tigerbeetle backend: limits as TigerBeetle accounts, reservations as
 * pending transfers, many llmlimitd in front of one cluster
 * (docs/tigerbeetle.md). Its own settings are struct tb_options. */
#ifndef LLMLIMIT_BACKEND_TIGERBEETLE_H
#define LLMLIMIT_BACKEND_TIGERBEETLE_H

#include <stdint.h>

#include "backend/backend.h"

extern const struct backend_ops tb_backend_ops;

/* The tigerbeetle backend's own settings (the options argument of its open). */
struct tb_options {
    const char *cluster;   /* decimal u128 */
    const char *addresses; /* HOST:PORT[,...], every replica of the cluster */
    uint32_t sessions;     /* client sessions, 1..TBC_SESSIONS_MAX */
    /* how long an operation waits for the cluster before it answers 503,
     * TBC_ITEM_DEADLINE_MS_MIN..TBC_ITEM_DEADLINE_MS_MAX */
    uint32_t deadline_ms;
};

/* The defaults: cluster 0 on 127.0.0.1:3000, 4 sessions, 2 s deadline. */
void tb_options_defaults(struct tb_options *options);

#endif

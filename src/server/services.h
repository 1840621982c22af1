/* The server's shared services, as every file of src/server reaches them
 * through an exchange (ex->server): the backend and the wait layer in
 * front of it, the gateway, the registry, the Keys API's keys, the
 * offload thread, metrics, the console's records, alerts, the clock. */
#ifndef LLMLIMIT_SERVER_SERVICES_H
#define LLMLIMIT_SERVER_SERVICES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "activity.h"
#include "alerts.h"
#include "auth.h"
#include "backend/backend.h"
#include "config.h"
#include "core/clock.h"
#include "core/periodic.h"
#include "http/http.h"
#include "metrics.h"
#include "offload.h"
#include "registry.h"
#include "router.h"
#include "spend.h"
#include "wait/wait.h"

struct exchange;

struct server {
    struct server_config config;
    struct clock *clock; /* the system clock, or test_clock with --test-clock */
    struct clock_offset test_clock;
    struct backend *backend;
    struct wait *wait;       /* the waiting queue in front of the backend */
    struct gateway *gateway; /* NULL: gateway mode is off */
    struct registry *registry;
    struct keys *keys;                 /* the Keys API's keys (keys.json, keys.log) */
    struct control *control;           /* --control: definitions in etcd; NULL without it */
    struct keys_control *keys_control; /* --control: the Keys API's keys in etcd; NULL without */
    struct ctl_prefetch *limits_read;  /* --control: the start's reads of the store, until */
    struct ctl_prefetch *keys_read;    /* control_open and keys_control_open take them */
    struct offload *offload;           /* runs limit changes off the HTTP workers */
    int data_dir_lock_fd;              /* holds the data directory's lock (data_dir.h); -1 before */
    struct metrics *metrics;
    struct activity *activity; /* recent reserves and denials (the console) */
    struct spend *spend;       /* budget spend history (the console) */
    struct alerts *alerts;     /* limits' alerts and their delivery */
    int64_t started_at_unix_ms;
    struct auth auth;
    struct http_server *http;    /* the HTTP server (src/http), NULL before it starts */
    const struct router *router; /* the routes it answers (routes.c) */
    struct periodic ticker;      /* the backend's and the registry's tick */
    bool ready;                  /* registry loaded into the backend */
    int closing;                 /* atomic: no new backend calls (503) */
    int64_t backend_calls;       /* atomic: data-path calls whose done has not run */
    pthread_mutex_t pool_mutex;  /* idle exchanges kept for reuse */
    struct exchange *pool;
    uint32_t pool_count;
};

#endif

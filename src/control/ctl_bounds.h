/* Bounds of the control plane (docs/architecture.md "The control plane"):
 * every size read from the store or sent to it, and the client's timings.
 * Each has a test one past it (tests/control). */
#ifndef LLMLIMIT_CONTROL_CTL_BOUNDS_H
#define LLMLIMIT_CONTROL_CTL_BOUNDS_H

/* etcd members named by one --control URL. */
#define CTL_ENDPOINTS_MAX 16
/* One "host:port" of the URL, in bytes. */
#define CTL_ENDPOINT_LENGTH_MAX 255
/* A key in the store, in bytes (a prefix and a limit key of at most 256). */
#define CTL_KEY_BYTES_MAX 512
/* A value in the store, in bytes: a limit definition's JSON is far below;
 * a key's record with every field at its bound (KEYS_MODELS_MAX names,
 * KEYS_METADATA_MAX entries each escaped in full) is about 40 KiB. */
#define CTL_VALUE_BYTES_MAX 65536
/* Keys asked for per page of a range: the first page CTL_RANGE_FIRST_PAGE_KEYS,
 * each next one as many as make about CTL_RANGE_PAGE_BYTES of answer at the
 * bytes per key seen so far, at most CTL_RANGE_PAGE_KEYS. 100,000 keys'
 * records (700 bytes each in the answer) read 1,024 a page took about twice
 * as long as 8,192 a page, which is about the time of one answer holding
 * them all; pages of tens of MiB risk the call's timeout on a busy machine. */
#define CTL_RANGE_FIRST_PAGE_KEYS 1024
#define CTL_RANGE_PAGE_KEYS 8192
#define CTL_RANGE_PAGE_BYTES (8u * 1024u * 1024u)
/* Keys one prefix may hold: a range past it is an error (LIMITS_COUNT_MAX). */
#define CTL_RANGE_KEYS_MAX 100000
/* One unary answer's body, in bytes. A range page past it (its values far
 * larger than the pages before) is asked again with half the keys, down to
 * one: 1,024 of the largest values anything writes (keys' records of about
 * 40 KiB, 54 KiB in base64) fit. */
#define CTL_RESPONSE_BYTES_MAX (64u * 1024u * 1024u)
/* One line of the watch stream (one watch response), in bytes: one past
 * it ends the watch, and the front end reads the prefix again instead. */
#define CTL_WATCH_LINE_BYTES_MAX (32u * 1024u * 1024u)
/* Events taken from one watch response. */
#define CTL_WATCH_EVENTS_MAX 4096
/* A connection to a member is given up after this (then the next is tried). */
#define CTL_CONNECT_TIMEOUT_MS 1000
/* A unary call (put, range page, delete, txn) is given up after this. */
#define CTL_REQUEST_TIMEOUT_MS 3000
/* Every this often the member a watch runs on is asked a read; one that
 * does not answer within CTL_PROBE_TIMEOUT_MS ends the watch, which is set
 * up again on the next member. */
#define CTL_PROBE_INTERVAL_MS 2000
#define CTL_PROBE_TIMEOUT_MS 2000
/* The watcher's wait between attempts while the store is unreachable:
 * doubles from the first to the last. */
#define CTL_RETRY_MS_FIRST 100
#define CTL_RETRY_MS_LAST 2000

#endif

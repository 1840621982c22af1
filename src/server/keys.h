/* Gateway keys made through the Keys API (docs/api.md "Keys"), beside the
 * keys of gateway.json: kept in DATA_DIR/keys.log (each change appended and
 * fdatasynced before it is answered) and keys.json (the log folded in,
 * rewritten atomically), and looked up by the SHA-256 of a presented secret
 * in a hash table. */
#ifndef LLMLIMIT_SERVER_KEYS_H
#define LLMLIMIT_SERVER_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bounds.h"
#include "gateway/gw_config.h"
#include "gateway/gw_secret.h"
#include "server_bounds.h"
#include "util/buffer.h"
#include "util/jdoc.h"

#define KEYS_ID_PREFIX "key_"
#define KEYS_FILE_ID_PREFIX "file_" /* a gateway.json key's id: these and 16 hex of its sha256 */
#define KEYS_ID_SIZE 22             /* "file_" + 16 hex + NUL, the longer of the two */

enum keys_status {
    KEYS_ACTIVE = 0,
    KEYS_BLOCKED,
    KEYS_EXPIRED,
    KEYS_REVOKED,
};

/* "active", "blocked", "expired", "revoked"; -1 from keys_status_of for
 * another text. */
const char *keys_status_name(enum keys_status status);
int keys_status_of(const char *text, enum keys_status *out);

/* One version of a key: never changed once made (a change makes a new
 * one), reference-counted so that a call in flight keeps the version it
 * was admitted with. Strings live in the same block. */
struct keys_record {
    uint32_t references; /* atomic */
    char id[KEYS_ID_SIZE];
    uint8_t sha256[GW_SHA256_BYTES]; /* of the secret in force */
    /* A rotation's old secret, accepted until previous_until_unix_ms. */
    bool has_previous;
    uint8_t previous_sha256[GW_SHA256_BYTES];
    int64_t previous_until_unix_ms;
    const char *caller;
    const char *team;
    const char *const *models; /* names; model_count 0: every model */
    uint32_t model_count;
    const char *const *metadata_names;
    const char *const *metadata_values;
    uint32_t metadata_count;
    /* The MCP servers it may use (docs/mcp.md): mcp_servers_listed false
     * means every server, an empty list none. */
    const char *const *mcp_servers;
    uint32_t mcp_server_count;
    bool mcp_servers_listed;
    int64_t created_at_unix_ms;
    int64_t expires_at_unix_ms; /* 0: never */
    int64_t revoked_at_unix_ms; /* 0: not revoked */
    bool blocked;
    uint32_t max_wait_seconds; /* 0..GW_KEY_WAIT_SECONDS_MAX */
    uint32_t priority_floor;   /* 0..GW_PRIORITY_MAX */
    /* What the gateway's calls use: caller, team and models point at the
     * fields above; its sha256 is the key's first one (who owns its
     * Responses ids), kept across rotations. */
    struct gw_key key;
};

/* The fields of a key before it is packed into a record: what an API body
 * or keys.json gives, or a record copied to be changed. */
struct keys_draft {
    char id[KEYS_ID_SIZE];
    uint8_t sha256[GW_SHA256_BYTES];
    uint8_t first_sha256[GW_SHA256_BYTES];
    bool has_previous;
    uint8_t previous_sha256[GW_SHA256_BYTES];
    int64_t previous_until_unix_ms;
    char caller[CALLER_LENGTH_MAX + 1];
    char team[GW_TEAM_LENGTH_MAX + 1];
    char models[KEYS_MODELS_MAX][GW_NAME_LENGTH_MAX + 1];
    uint32_t model_count;
    char metadata_names[KEYS_METADATA_MAX][KEYS_METADATA_NAME_LENGTH_MAX + 1];
    char metadata_values[KEYS_METADATA_MAX][KEYS_METADATA_VALUE_LENGTH_MAX + 1];
    uint32_t metadata_count;
    char mcp_servers[KEYS_MCP_SERVERS_MAX][GW_NAME_LENGTH_MAX + 1];
    uint32_t mcp_server_count;
    bool mcp_servers_listed;
    int64_t created_at_unix_ms;
    int64_t expires_at_unix_ms;
    int64_t revoked_at_unix_ms;
    int64_t last_used_unix_ms; /* the files' only */
    bool blocked;
    uint32_t max_wait_seconds;
    uint32_t priority_floor;
};

/* Which fields keys_draft_apply takes: a create's (caller, team, models,
 * mcp_servers, expires_at_unix_ms, max_wait_seconds, priority_floor,
 * metadata; limits is the handler's), an update's (models, mcp_servers,
 * expires_at_unix_ms, blocked, max_wait_seconds, priority_floor,
 * metadata), or every field of a
 * keys.json entry. */
enum keys_fields {
    KEYS_FIELDS_CREATE = 0,
    KEYS_FIELDS_UPDATE,
    KEYS_FIELDS_FILE,
};

/* Applies the members of object to draft, each checked against its bound.
 * 0, or -1 with "<field>: <reason>" in error (draft partly changed).
 * A create's and a file entry's required fields are checked too. */
int keys_draft_apply(struct keys_draft *draft, const struct jdoc_value *object,
                     enum keys_fields which, char *error, size_t error_size);
/* A draft holding record's fields (to be changed and packed again). */
void keys_draft_from(struct keys_draft *draft, const struct keys_record *record);
/* A new record (one reference, the caller's) packed from draft, or NULL
 * when memory runs out. */
struct keys_record *keys_record_new(const struct keys_draft *draft);

void keys_record_retain(struct keys_record *record);
void keys_record_release(struct keys_record *record);
enum keys_status keys_record_status(const struct keys_record *record, int64_t now_unix_ms);

/* The record as the API shows it: id, sha256_prefix, caller, team, models,
 * mcp_servers, status, source "api", blocked, created_at_unix_ms, expires_at_unix_ms,
 * revoked_at_unix_ms, last_used_unix_ms (null: never), max_wait_seconds,
 * priority_floor, metadata. Never a secret or a whole digest. */
void keys_record_encode(struct buffer *b, const struct keys_record *record, int64_t now_unix_ms,
                        int64_t last_used_unix_ms);
/* The key's mcp_servers as JSON: null (every server) or an array of names. */
void keys_append_mcp_servers(struct buffer *b, const struct keys_record *record);
/* A gateway.json key the same way (source "file", always active). */
void keys_file_key_encode(struct buffer *b, const struct gw_config *config,
                          const struct gw_key *key);
/* A gateway.json key's id ("file_" and 16 hex of its sha256). */
void keys_file_key_id(const struct gw_key *key, char id[KEYS_ID_SIZE]);

struct keys;

/* Removes a stale keys.json.tmp, loads data_dir/keys.json (none: no key)
 * and then the changes of keys.log after it, and opens the log. 0 with
 * *out, or -1 with "<file>: line L: <reason>" in error: a file cut short,
 * not JSON, or with an invalid or duplicate entry is refused, never half
 * loaded (nothing is kept on failure). */
int keys_open(const char *data_dir, struct keys **out, char *error, size_t error_size);
void keys_close(struct keys *keys);
const char *keys_path(const struct keys *keys);

/* What a presented secret's digest is. */
enum keys_verdict {
    KEYS_FOUND = 0, /* *out: the key, retained (release it) */
    KEYS_NOT_FOUND,
    KEYS_IS_REVOKED,
    KEYS_IS_BLOCKED,
    KEYS_IS_EXPIRED,
};

/* The key whose secret (or, within a rotation's grace, old secret) hashes
 * to digest: O(1), under a read lock. A key found active is marked used
 * at now_unix_ms. */
enum keys_verdict keys_lookup(struct keys *keys, const uint8_t digest[GW_SHA256_BYTES],
                              int64_t now_unix_ms, struct keys_record **out);

/* The key with this id, retained, and when it was last used (0: never);
 * NULL when none has it. */
struct keys_record *keys_get(struct keys *keys, const char *id, int64_t *last_used_unix_ms);

/* Calls each(record, last_used_unix_ms, context) for the keys from the
 * position `from` on (in creation order) until each returns false;
 * returns the position after the last one visited (== the count when the
 * list was walked to its end). */
size_t keys_each(struct keys *keys, size_t from,
                 bool (*each)(const struct keys_record *record, int64_t last_used_unix_ms,
                              void *context),
                 void *context);

enum keys_outcome {
    KEYS_OK = 0,
    KEYS_UNKNOWN = -1,       /* no key has this id */
    KEYS_FULL = -2,          /* KEYS_COUNT_MAX keys already */
    KEYS_WRITE_FAILED = -3,  /* keys.log or keys.json could not be written: nothing changed */
    KEYS_NO_RANDOMNESS = -4, /* no secret or id could be made */
    KEYS_NO_MEMORY = -5,
    KEYS_IS_GONE = -6, /* the key is revoked: it cannot be changed or rotated */
    KEYS_PENDING = 1,  /* written, not yet durable: the ticket is told (keys_sync) */
    /* --control (keys_control.h) only: */
    KEYS_STORE_UNAVAILABLE = -7, /* the shared store did not take the change: nothing changed */
    KEYS_CHANGED_ELSEWHERE = -8, /* another front end changed the key first: nothing changed */
};

/* A change waiting for the fdatasync of its batch (group commit): done is
 * called once, by keys_sync (or by a later change that has to sync the
 * batch first), with outcome and, for KEYS_OK, record (retained: release
 * it). done runs under the store's writer mutex: it must not change keys. */
struct keys_ticket {
    void (*done)(struct keys_ticket *ticket);
    enum keys_outcome outcome;
    struct keys_record *record;
};

/* Each writes the change to keys.log (or keys.json) before it is in force (so an
 * answered change survives a crash) and returns *out, the key as it is now
 * (retained: release it). With ticket NULL the change is synced before the
 * call returns. With a ticket, a change appended to keys.log answers
 * KEYS_PENDING: it joins the open batch and the ticket is told once one
 * fdatasync has made the batch durable; whoever gets true from
 * keys_sync_claim then owes one keys_sync call (soon: the batch's changes
 * wait for it). Any other outcome is final, and the ticket is not told. */

/* A new key from draft's fields (its id, secret, digest and creation time
 * made here): secret_out gets the secret, shown once. */
enum keys_outcome keys_create(struct keys *keys, const struct keys_draft *draft,
                              int64_t now_unix_ms, char secret_out[GW_SECRET_SIZE],
                              struct keys_record **out, struct keys_ticket *ticket);
/* The update fields of body (checked already by keys_draft_apply) applied
 * to the key. error: why, when KEYS_IS_GONE is not the reason. */
enum keys_outcome keys_update(struct keys *keys, const char *id, const struct jdoc_value *body,
                              struct keys_record **out, struct keys_ticket *ticket);
/* Revokes the key (a revoked one stays as it was). */
enum keys_outcome keys_revoke(struct keys *keys, const char *id, int64_t now_unix_ms,
                              struct keys_record **out, struct keys_ticket *ticket);
/* A new secret for the key; its old one (or the one before, if that is
 * the one in force) is accepted for grace_seconds more. */
enum keys_outcome keys_rotate(struct keys *keys, const char *id, uint32_t grace_seconds,
                              int64_t now_unix_ms, char secret_out[GW_SECRET_SIZE],
                              struct keys_record **out, struct keys_ticket *ticket);

/* True once per open batch, to the first who asks: that caller owes the
 * batch one keys_sync. */
bool keys_sync_claim(struct keys *keys);
/* The open batch synced with one fdatasync, put in force, its tickets
 * told (nothing when no batch is open). */
void keys_sync(struct keys *keys);

/* ---- a shared store (--control, keys_control.h) ----------------------------------- */

/* Writes record (the key as a change makes it) to the shared store, only
 * if the store's copy of the key is still at base_revision (0: the key is
 * not there yet); KEYS_OK with the store's *revision of it, or
 * KEYS_STORE_UNAVAILABLE / KEYS_CHANGED_ELSEWHERE. Called with the writer
 * mutex held, before the change is written to keys.log or in force here. */
typedef enum keys_outcome (*keys_store_fn)(void *context, const struct keys_record *record,
                                           int64_t base_revision, int64_t *revision);

/* From here on every change is written to the store first (set once, before
 * any change is made; NULL: none, keys.log alone as without --control). A
 * change the store took is in force here even if keys.log then fails (logged;
 * the store is what the front ends follow). */
void keys_set_store(struct keys *keys, keys_store_fn store, void *context);

/* --control, after the store was read whole and did not hold key id: when
 * no revision of it was ever seen here (a key made before --control was
 * turned on, or while it was off), it is written to the store as a
 * creation (only if the store still has no such key: one made there
 * meanwhile, a revoked one included, wins and the watch brings it). One
 * seen before was deleted from the store by hand: kept here as it was
 * (logged). 0 done, -1 the store did not take it (to be tried again).
 * Writer mutex taken. */
int keys_publish(struct keys *keys, const char *id);
/* Every key's id, a malloc'd array of malloc'd strings (*ids NULL: out of
 * memory, or none); their count. */
size_t keys_ids(struct keys *keys, char ***ids);

/* The record as the store holds it: keys.json's entry without last use. */
void keys_store_encode(struct buffer *b, const struct keys_record *record);

/* A key some front end wrote, at the store's revision: put in force here
 * unless this front end has it at that revision or later (or as it is
 * already), and queued for keys.log (written by keys_follow_flush). 0 done,
 * 1 refused (error says why: another key's secret, KEYS_COUNT_MAX keys),
 * -1 out of memory. */
int keys_follow(struct keys *keys, const struct keys_draft *draft, int64_t revision, char *error,
                size_t error_size);
/* Writes the keys followed since the last flush to keys.log with one
 * fdatasync (or keys.json whole); a failure is logged and the next change
 * rewrites keys.json. */
void keys_follow_flush(struct keys *keys);
#endif

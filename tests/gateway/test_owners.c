/* Unit tests of the Responses id owners (src/gateway/gw_owners.c): the
 * creating key is the owner, another key is told apart from an unknown id,
 * the first owner stays, ids past the length bound are not remembered, and
 * one past the capacity forgets the oldest first; threads at once. Also the
 * MCP sessions' memory at its real bound, GW_MCP_SESSIONS_MAX. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gateway/gw_owners.h"
#include "gateway/gw_secret.h"
#include "test.h"
#include "util/sha256.h"

static void digest_of(uint8_t digest[GW_SHA256_BYTES], unsigned key)
{
    memset(digest, 0, GW_SHA256_BYTES);
    digest[0] = (uint8_t)key, digest[1] = (uint8_t)(key >> 8);
    digest[31] = 0xab;
}

static enum gw_owner lookup(struct gw_owners *o, const char *id, unsigned key)
{
    uint8_t digest[GW_SHA256_BYTES];
    digest_of(digest, key);
    return gw_owners_lookup(o, id, strlen(id), digest);
}

static int remember(struct gw_owners *o, const char *id, unsigned key)
{
    uint8_t digest[GW_SHA256_BYTES];
    digest_of(digest, key);
    return gw_owners_remember(o, id, strlen(id), digest);
}

static void the_creator_owns_its_response(void)
{
    struct gw_owners *o = gw_owners_new(16);
    REQUIRE(o != NULL);
    CHECK_EQ_I64(remember(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", 1), 0);
    CHECK_EQ_I64(lookup(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", 1),
                 GW_OWNER_THIS_KEY);
    CHECK_EQ_I64(lookup(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", 2),
                 GW_OWNER_OTHER_KEY);
    CHECK_EQ_I64(lookup(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795c", 1),
                 GW_OWNER_UNKNOWN);
    CHECK_EQ_I64(lookup(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795", 1),
                 GW_OWNER_UNKNOWN); /* a prefix is another id */
    /* Remembered again by another key: the first owner stays. */
    CHECK_EQ_I64(remember(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", 2), 0);
    CHECK_EQ_I64(lookup(o, "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", 1),
                 GW_OWNER_THIS_KEY);
    CHECK_EQ_U64(gw_owners_count(o), 1);
    gw_owners_free(o);
}

static void id_length_at_the_bound_and_one_past(void)
{
    struct gw_owners *o = gw_owners_new(4);
    REQUIRE(o != NULL);
    char id[GW_RESPONSE_ID_LENGTH_MAX + 2];
    memset(id, 'r', sizeof id);
    id[GW_RESPONSE_ID_LENGTH_MAX] = '\0';
    CHECK_EQ_I64(remember(o, id, 1), 0);
    CHECK_EQ_I64(lookup(o, id, 1), GW_OWNER_THIS_KEY);
    id[GW_RESPONSE_ID_LENGTH_MAX] = 'r';
    id[GW_RESPONSE_ID_LENGTH_MAX + 1] = '\0';
    CHECK_EQ_I64(remember(o, id, 1), -1);
    CHECK_EQ_I64(lookup(o, id, 1), GW_OWNER_UNKNOWN);
    CHECK_EQ_I64(remember(o, "", 1), -1);
    CHECK_EQ_I64(lookup(o, "", 1), GW_OWNER_UNKNOWN);
    CHECK_EQ_U64(gw_owners_count(o), 1);
    gw_owners_free(o);
}

static void one_past_the_capacity_forgets_the_oldest(void)
{
    enum { CAPACITY = 100 };
    struct gw_owners *o = gw_owners_new(CAPACITY);
    REQUIRE(o != NULL);
    char id[32];
    for (unsigned i = 0; i < CAPACITY; i++) {
        snprintf(id, sizeof id, "resp_%u", i);
        REQUIRE(remember(o, id, i) == 0);
    }
    CHECK_EQ_U64(gw_owners_count(o), CAPACITY);
    REQUIRE(remember(o, "resp_new", 7) == 0); /* one past */
    CHECK_EQ_U64(gw_owners_count(o), CAPACITY);
    CHECK_EQ_I64(lookup(o, "resp_0", 0), GW_OWNER_UNKNOWN); /* the oldest, forgotten */
    CHECK_EQ_I64(lookup(o, "resp_1", 1), GW_OWNER_THIS_KEY);
    CHECK_EQ_I64(lookup(o, "resp_new", 7), GW_OWNER_THIS_KEY);
    /* Ten times the capacity more: exactly the last CAPACITY are known. */
    for (unsigned i = 0; i < 10 * CAPACITY; i++) {
        snprintf(id, sizeof id, "more_%u", i);
        REQUIRE(remember(o, id, i) == 0);
    }
    int known = 0, wrong = 0;
    for (unsigned i = 0; i < 10 * CAPACITY; i++) {
        snprintf(id, sizeof id, "more_%u", i);
        enum gw_owner owner = lookup(o, id, i);
        known += owner == GW_OWNER_THIS_KEY;
        wrong += (i >= 9 * CAPACITY) != (owner == GW_OWNER_THIS_KEY);
    }
    CHECK_EQ_I64(known, CAPACITY);
    CHECK_EQ_I64(wrong, 0);
    CHECK_EQ_I64(lookup(o, "resp_new", 7), GW_OWNER_UNKNOWN);
    gw_owners_free(o);
}

/* The id the MCP route remembers a session under: the hex SHA-256 of
 * "<server>\n<Mcp-Session-Id>" (gateway_mcp_session_key,
 * src/server/gateway_mcp_answer.c). */
static void session_key(unsigned session, char out[GW_SHA256_HEX_SIZE])
{
    char text[64];
    int n = snprintf(text, sizeof text, "search\n%08x-session", session);
    uint8_t digest[GW_SHA256_BYTES];
    REQUIRE(n > 0 && sha256_digest(text, (size_t)n, digest) == 0);
    gw_hex_encode(digest, GW_SHA256_BYTES, out);
}

static enum gw_owner session_owner(struct gw_owners *o, unsigned session, unsigned key)
{
    char id[GW_SHA256_HEX_SIZE];
    session_key(session, id);
    return lookup(o, id, key);
}

/* docs/mcp.md "The route": the gateway remembers the key of the last
 * GW_MCP_SESSIONS_MAX sessions; one more forgets the oldest opened (even
 * one still in use: a session's later answers do not renew it), whose id
 * then answers as unknown (the route's 404: the client initializes anew);
 * every other session keeps its key. */
static void mcp_sessions_one_past_their_bound(void)
{
    struct gw_owners *o = gw_owners_new(GW_MCP_SESSIONS_MAX);
    REQUIRE(o != NULL);
    char id[GW_SHA256_HEX_SIZE];
    uint8_t digest[GW_SHA256_BYTES];
    for (unsigned s = 0; s < GW_MCP_SESSIONS_MAX; s++) {
        session_key(s, id);
        digest_of(digest, s % 1000); /* 1000 keys */
        REQUIRE(gw_owners_remember(o, id, GW_SHA256_HEX_SIZE - 1, digest) == 0);
    }
    CHECK_EQ_U64(gw_owners_count(o), GW_MCP_SESSIONS_MAX);
    CHECK_EQ_I64(session_owner(o, 0, 0), GW_OWNER_THIS_KEY);
    /* The oldest's server answers again with its id: remembered already,
     * its place in the order unchanged. */
    session_key(0, id);
    digest_of(digest, 0);
    REQUIRE(gw_owners_remember(o, id, GW_SHA256_HEX_SIZE - 1, digest) == 0);
    CHECK_EQ_U64(gw_owners_count(o), GW_MCP_SESSIONS_MAX);
    /* One past the bound. */
    session_key(GW_MCP_SESSIONS_MAX, id);
    digest_of(digest, 7);
    REQUIRE(gw_owners_remember(o, id, GW_SHA256_HEX_SIZE - 1, digest) == 0);
    CHECK_EQ_U64(gw_owners_count(o), GW_MCP_SESSIONS_MAX);
    CHECK_EQ_I64(session_owner(o, 0, 0), GW_OWNER_UNKNOWN); /* forgotten: 404 */
    CHECK_EQ_I64(session_owner(o, GW_MCP_SESSIONS_MAX, 7), GW_OWNER_THIS_KEY);
    CHECK_EQ_I64(session_owner(o, GW_MCP_SESSIONS_MAX, 8), GW_OWNER_OTHER_KEY);
    int wrong = 0;
    for (unsigned s = 1; s < GW_MCP_SESSIONS_MAX; s++)
        wrong += session_owner(o, s, s % 1000) != GW_OWNER_THIS_KEY ||
                 session_owner(o, s, s % 1000 + 1) != GW_OWNER_OTHER_KEY;
    CHECK_EQ_I64(wrong, 0);
    gw_owners_free(o);
}

struct worker {
    struct gw_owners *owners;
    unsigned id;
    int wrong;
};

static void *work(void *argument)
{
    struct worker *w = argument;
    char id[32];
    for (unsigned i = 0; i < 20000; i++) {
        snprintf(id, sizeof id, "resp_%u_%u", w->id, i);
        if (remember(w->owners, id, w->id) != 0)
            w->wrong++;
        /* Ids are each thread's own: never another key's (it may already
         * be forgotten when the memory is small). */
        w->wrong += lookup(w->owners, id, w->id) == GW_OWNER_OTHER_KEY;
    }
    return NULL;
}

/* 4 threads of 20000 ids each into a memory of capacity; the wrong answers. */
static int run_threads(struct gw_owners *o)
{
    struct worker workers[4];
    pthread_t threads[4];
    int wrong = 0;
    for (unsigned i = 0; i < 4; i++) {
        workers[i] = (struct worker){.owners = o, .id = i};
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0)
            return -1;
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        wrong += workers[i].wrong;
    }
    return wrong;
}

static void threads_at_once(void)
{
    /* Room for every id: each is known afterwards, with its owner. */
    struct gw_owners *o = gw_owners_new(80000);
    REQUIRE(o != NULL);
    CHECK_EQ_I64(run_threads(o), 0);
    CHECK_EQ_U64(gw_owners_count(o), 80000);
    char id[32];
    int wrong = 0;
    for (unsigned t = 0; t < 4; t++) {
        for (unsigned i = 0; i < 20000; i += 7) {
            snprintf(id, sizeof id, "resp_%u_%u", t, i);
            wrong += lookup(o, id, t) != GW_OWNER_THIS_KEY;
        }
    }
    CHECK_EQ_I64(wrong, 0);
    gw_owners_free(o);
    /* A small memory, forgetting all the time: still never a wrong owner. */
    o = gw_owners_new(64);
    REQUIRE(o != NULL);
    CHECK_EQ_I64(run_threads(o), 0);
    CHECK_EQ_U64(gw_owners_count(o), 64);
    gw_owners_free(o);
}

int main(void)
{
    RUN(the_creator_owns_its_response,
        "the creating key owns an id; another key and an unknown id are told apart");
    RUN(id_length_at_the_bound_and_one_past, "an id at the length bound is kept, one past is not");
    RUN(one_past_the_capacity_forgets_the_oldest,
        "one id past the capacity forgets the oldest; the last ones stay");
    RUN(threads_at_once, "threads remembering and looking up at once");
    RUN(mcp_sessions_one_past_their_bound,
        "MCP sessions: 65,536 keep their keys; one more forgets the oldest opened, not the rest");
    return test_summary();
}

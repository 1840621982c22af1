/* The forwarding engine (gw_forward.h): one thread, one libcurl multi
 * handle driven by its socket interface (curl_multi_socket_action) over an
 * epoll set of the engine's own, so that each turn touches only the
 * transfers whose sockets are ready or whose timers are due: the polling
 * interface (curl_multi_poll, curl_multi_perform) visits every transfer on
 * every turn, which at 50 calls at once cost the engine more than the
 * calls' own work. Other threads talk to it through a command queue under
 * one mutex and an eventfd, written only when the queue was empty;
 * transfers are handed back to the caller only through their callbacks. A
 * transfer that has ended is freed only after the next drain of the queue,
 * so a command posted just before its on_done returned finds it still
 * there, marked done, and is ignored. */
#include "gw_forward.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/clock.h"
#include "gw_bounds.h"
#include "util/queue.h"

enum command_kind {
    COMMAND_START,
    COMMAND_CANCEL,
    COMMAND_UNPAUSE,
};

struct command {
    enum command_kind kind;
    struct gw_transfer *transfer;
    struct command *next;
};

struct gw_transfer {
    CURL *easy;
    struct curl_slist *headers;
    char *url;
    char *authorization; /* the provider key's header line, or NULL */
    const struct gw_transfer_ops *ops;
    void *context;
    bool head_seen;
    bool added;     /* in the multi handle */
    bool done;      /* on_done has run */
    bool cancelled; /* on_done gives GW_FORWARD_CANCELLED */
    bool aborted;   /* a callback asked to stop */
    bool reusable;  /* its handle ran to a clean end: it may serve another transfer */
    bool invalid;   /* the answer was refused: on_done gives GW_FORWARD_INVALID */
    char refusal[GW_FORWARD_ERROR_SIZE]; /* ... and why (curl_error is curl's own) */
    char content_type[GW_CONTENT_TYPE_LENGTH_MAX + 1];
    char retry_after[GW_RETRY_AFTER_LENGTH_MAX + 1];
    char retry_after_ms[GW_RETRY_AFTER_LENGTH_MAX + 1];
    char mcp_session_id[GW_MCP_SESSION_ID_LENGTH_MAX + 1];
    char curl_error[CURL_ERROR_SIZE];
    struct gw_transfer *next_zombie;
    struct gw_transfer *previous_active; /* in gw_forward.active_list while added */
    struct gw_transfer *next_active;
};

/* Socket events taken from epoll in one turn. */
#define ENGINE_EVENTS_MAX 64

struct gw_forward {
    CURLM *multi;
    int epoll_fd; /* the transfers' sockets and wake_fd */
    int wake_fd;  /* eventfd: a command was queued, or stopping */
    pthread_t thread;
    pthread_mutex_t mutex; /* the queue, stopping, stats */
    struct command *queue_head;
    struct command *queue_tail;
    bool stopping;
    struct gw_transfer *zombies;     /* done, freed after the next drain (engine thread only) */
    struct gw_transfer *active_list; /* added to the multi handle (engine thread only) */
    uint64_t active;                 /* their count (engine thread only) */
    void (*tick)(void *context);     /* set before the thread starts */
    void *tick_context;
    uint32_t tick_interval_ms;
    int64_t next_tick_ms; /* engine thread only */
    struct gw_forward_stats stats;
    /* Handles of ended transfers, for the next ones (under mutex): a new
     * easy handle costs an allocation of several KiB, zeroed, and its
     * defaults; a reused one keeps them, and every option a transfer needs
     * is set again for it. */
    CURL *easy_kept[GW_EASY_HANDLES_KEPT];
    uint32_t easy_kept_count;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- the queue (any thread) ---------------------------------------------- */

static void wake_engine(struct gw_forward *engine)
{
    uint64_t one = 1;
    while (write(engine->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

/* false when out of memory. */
static bool post(struct gw_forward *engine, enum command_kind kind, struct gw_transfer *transfer)
{
    struct command *command = malloc(sizeof *command);
    if (command == NULL)
        return false;
    *command = (struct command){.kind = kind, .transfer = transfer};
    pthread_mutex_lock(&engine->mutex);
    /* The engine reads the eventfd before each drain, which takes the whole
     * queue: a queue found not empty has its write owed already. */
    bool signal = engine->queue_head == NULL;
    FIFO_PUSH(engine->queue_head, engine->queue_tail, command, next);
    pthread_mutex_unlock(&engine->mutex);
    if (signal)
        wake_engine(engine);
    return true;
}

/* ---- transfers (engine thread) ------------------------------------------- */

static CURL *easy_take(struct gw_forward *engine)
{
    CURL *easy = NULL;
    pthread_mutex_lock(&engine->mutex);
    if (engine->easy_kept_count > 0)
        easy = engine->easy_kept[--engine->easy_kept_count];
    pthread_mutex_unlock(&engine->mutex);
    return easy != NULL ? easy : curl_easy_init();
}

static void easy_give_back(struct gw_forward *engine, CURL *easy)
{
    pthread_mutex_lock(&engine->mutex);
    if (engine->easy_kept_count < GW_EASY_HANDLES_KEPT) {
        engine->easy_kept[engine->easy_kept_count++] = easy;
        easy = NULL;
    }
    pthread_mutex_unlock(&engine->mutex);
    if (easy != NULL)
        curl_easy_cleanup(easy);
}

static void transfer_free(struct gw_forward *engine, struct gw_transfer *t)
{
    assert(!t->added);
    if (t->easy != NULL && t->reusable)
        easy_give_back(engine, t->easy);
    else if (t->easy != NULL)
        curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    free(t->url);
    free(t->authorization);
    free(t);
}

/* Refuses the upstream's answer: on_done will say GW_FORWARD_INVALID with
 * this reason. Returns 0, what a curl callback returns to stop. */
static size_t refuse(struct gw_transfer *t, const char *reason)
{
    t->invalid = true;
    snprintf(t->refusal, sizeof t->refusal, "%s", reason);
    return 0;
}

static enum gw_forward_result result_of(struct gw_transfer *t, CURLcode code)
{
    if (t->cancelled)
        return GW_FORWARD_CANCELLED;
    if (t->invalid)
        return GW_FORWARD_INVALID;
    if (t->aborted)
        return GW_FORWARD_ABORTED;
    switch (code) {
    case CURLE_OK:
        if (t->head_seen)
            return GW_FORWARD_OK;
        refuse(t, "the upstream's answer ended without a final status");
        return GW_FORWARD_INVALID;
    case CURLE_BAD_CONTENT_ENCODING:
        refuse(t, "the upstream's answer has a Content-Encoding the gateway cannot decode");
        return GW_FORWARD_INVALID;
    case CURLE_OPERATION_TIMEDOUT:
        return GW_FORWARD_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return GW_FORWARD_CONNECT;
    default:
        return GW_FORWARD_FAILED;
    }
}

/* Takes it out of the multi handle, tells the caller, queues the free. */
static void transfer_end(struct gw_forward *engine, struct gw_transfer *t, CURLcode code)
{
    assert(!t->done);
    if (t->added) {
        curl_multi_remove_handle(engine->multi, t->easy);
        t->added = false;
        assert(engine->active > 0);
        engine->active--;
        DLIST_REMOVE_NO_TAIL(engine->active_list, t, previous_active, next_active);
    }
    long connects = 0;
    curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &connects);
    pthread_mutex_lock(&engine->mutex);
    engine->stats.connections_new += (uint64_t)(connects > 0 ? connects : 0);
    engine->stats.active = engine->active;
    pthread_mutex_unlock(&engine->mutex);
    enum gw_forward_result result = result_of(t, code);
    const char *error = result == GW_FORWARD_OK        ? ""
                        : t->cancelled                 ? "cancelled"
                        : result == GW_FORWARD_INVALID ? t->refusal
                        : t->curl_error[0] != '\0'     ? t->curl_error
                                                       : curl_easy_strerror(code);
    t->done = true;
    /* Only a handle whose transfer ended on its own is reused: one paused,
     * aborted or cancelled midway keeps that state. */
    t->reusable = result == GW_FORWARD_OK && t->head_seen;
    t->ops->on_done(t->context, result, error);
    t->next_zombie = engine->zombies;
    engine->zombies = t;
}

/* Keeps the value of the header line when it is the named one (name with
 * its colon), cut to out_size - 1 bytes. */
static bool header_keep(const char *line, size_t length, const char *name, char *out,
                        size_t out_size)
{
    size_t name_length = strlen(name);
    if (length < name_length || strncasecmp(line, name, name_length) != 0)
        return false;
    const char *value = line + name_length;
    size_t n = length - name_length;
    while (n > 0 && (*value == ' ' || *value == '\t')) {
        value++;
        n--;
    }
    while (n > 0 && (value[n - 1] == '\r' || value[n - 1] == '\n' || value[n - 1] == ' '))
        n--;
    if (n > out_size - 1)
        n = out_size - 1;
    memcpy(out, value, n);
    out[n] = '\0';
    return true;
}

/* The blank line that ends a head. An interim 1xx head is not the
 * answer's: what it said is forgotten, and curl reads the next head. A
 * final one must be 200..599: curl takes any three digits as a status, and
 * a 101 as the final one (the body that follows is the new protocol's).
 * false: refused (the transfer stops). */
static bool head_end(struct gw_transfer *t)
{
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 100 && status < 200 && status != 101) {
        t->content_type[0] = '\0';
        t->retry_after[0] = '\0';
        t->retry_after_ms[0] = '\0';
        t->mcp_session_id[0] = '\0';
        return true;
    }
    if (status < 200 || status > 599) {
        char reason[GW_FORWARD_ERROR_SIZE];
        snprintf(reason, sizeof reason, "the upstream answered status %03ld, not one of 200..599",
                 status < 0 || status > 999 ? 0 : status);
        refuse(t, reason);
        return false;
    }
    t->head_seen = true;
    curl_off_t length = -1;
    if (curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK)
        length = -1;
    struct gw_head head = {status,
                           t->content_type,
                           t->retry_after,
                           t->retry_after_ms,
                           length >= 0 ? (int64_t)length : -1,
                           t->mcp_session_id};
    t->ops->on_head(t->context, &head);
    return true;
}

/* An MCP server's Mcp-Session-Id: 1..GW_MCP_SESSION_ID_LENGTH_MAX visible
 * ASCII bytes (MCP's rule), kept whole or the answer refused, never cut. */
static size_t keep_session_id(struct gw_transfer *t, const char *line, size_t length)
{
    char value[GW_MCP_SESSION_ID_LENGTH_MAX + 2];
    header_keep(line, length, "mcp-session-id:", value, sizeof value);
    size_t n = strlen(value);
    bool visible = n > 0;
    for (size_t i = 0; i < n && visible; i++)
        visible = value[i] >= 0x21 && value[i] <= 0x7e;
    if (n > GW_MCP_SESSION_ID_LENGTH_MAX || !visible) {
        char reason[GW_FORWARD_ERROR_SIZE];
        snprintf(reason, sizeof reason,
                 "the MCP server's Mcp-Session-Id is not 1-%d bytes of visible ASCII",
                 GW_MCP_SESSION_ID_LENGTH_MAX);
        return refuse(t, reason);
    }
    memcpy(t->mcp_session_id, value, n + 1);
    return length;
}

static size_t on_header(char *line, size_t size, size_t count, void *userdata)
{
    struct gw_transfer *t = userdata;
    size_t length = size * count;
    if (length >= 15 && strncasecmp(line, "mcp-session-id:", 15) == 0)
        return keep_session_id(t, line, length);
    if (header_keep(line, length, "content-type:", t->content_type, sizeof t->content_type) ||
        header_keep(line, length, "retry-after:", t->retry_after, sizeof t->retry_after) ||
        header_keep(line, length, "retry-after-ms:", t->retry_after_ms, sizeof t->retry_after_ms))
        return length;
    if (length <= 2 && (line[0] == '\r' || line[0] == '\n') && !t->head_seen)
        return head_end(t) ? length : 0;
    return length; /* a line of a head, or of the trailers after the body */
}

static size_t on_body(char *bytes, size_t size, size_t count, void *userdata)
{
    struct gw_transfer *t = userdata;
    size_t length = size * count;
    if (length == 0)
        return 0;
    if (!t->head_seen) /* after an interim head only: curl hands it over as body */
        return refuse(t, "the upstream sent a body before the status of an answer");
    switch (t->ops->on_data(t->context, bytes, length)) {
    case GW_DATA_MORE:
        return length;
    case GW_DATA_PAUSE:
        return CURL_WRITEFUNC_PAUSE;
    case GW_DATA_ABORT:
        break;
    }
    t->aborted = true;
    return 0; /* curl ends the transfer with a write error */
}

/* The request's header lines, each copied into the list. 0, or -1 when
 * out of memory. */
static int headers_build(struct gw_transfer *t, const struct gw_transfer_spec *spec)
{
    const char *lines[4 + GW_FORWARD_HEADERS_MAX];
    size_t count = 0;
    if (spec->method == GW_METHOD_POST)
        lines[count++] = "Content-Type: application/json";
    bool accept_given = false; /* an MCP client's Accept goes as it is */
    for (uint32_t i = 0; i < spec->header_count; i++)
        accept_given |= strncasecmp(spec->headers[i], "Accept:", 7) == 0;
    if (!accept_given)
        lines[count++] = "Accept: */*";
    lines[count++] = "Expect:"; /* no 100-continue round trip */
    if (t->authorization != NULL)
        lines[count++] = t->authorization;
    assert(spec->header_count <= GW_FORWARD_HEADERS_MAX);
    for (uint32_t i = 0; i < spec->header_count; i++)
        lines[count++] = spec->headers[i];
    struct curl_slist *h = NULL;
    for (size_t i = 0; i < count; i++) {
        struct curl_slist *grown = curl_slist_append(h, lines[i]);
        if (grown == NULL) {
            curl_slist_free_all(h);
            return -1;
        }
        h = grown;
    }
    t->headers = h;
    return 0;
}

/* The method and body. A reused handle keeps the options of its last
 * transfer: each is set again. */
static CURLcode method_setup(CURL *e, const struct gw_transfer_spec *spec)
{
    CURLcode rc = CURLE_OK;
    if (spec->method == GW_METHOD_POST) {
        rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, (char *)NULL);
        rc |= curl_easy_setopt(e, CURLOPT_POST, 1L);
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, spec->body != NULL ? spec->body : "");
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                               (curl_off_t)(spec->body != NULL ? spec->body_length : 0));
        return rc;
    }
    rc |= curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST,
                           spec->method == GW_METHOD_DELETE ? "DELETE" : (char *)NULL);
    return rc;
}

/* 0, or -1 when curl refuses an option (out of memory). */
static int transfer_setup(struct gw_forward *engine, struct gw_transfer *t,
                          const struct gw_transfer_spec *spec)
{
    t->easy = easy_take(engine);
    if (t->easy == NULL || headers_build(t, spec) != 0)
        return -1;
    CURL *e = t->easy;
    CURLcode rc = CURLE_OK;
    rc |= curl_easy_setopt(e, CURLOPT_URL, t->url);
    rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    rc |= method_setup(e, spec);
    rc |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)spec->timeout_ms);
    rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)spec->connect_timeout_ms);
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->curl_error);
    rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    /* No redirects followed. No content coding asked for: the client's
     * Accept-Encoding stays at the gateway, which must read the answer;
     * naming one (identity) also has curl decode what an upstream
     * compresses anyway, so every reader sees the plain bytes. */
    rc |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    rc |= curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "identity");
    /* The smallest upload buffer curl takes (its default is 64 KiB per
     * transfer): request bodies are small, and a thousand streams held at
     * once should not cost 64 MiB for it (docs/gateway.md, "Forwarding"). */
    rc |= curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, (long)GW_UPLOAD_BUFFER_BYTES);
    rc |= curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)GW_DOWNLOAD_BUFFER_BYTES);
    return rc == CURLE_OK ? 0 : -1;
}

/* ---- commands (engine thread) -------------------------------------------- */

static void command_start(struct gw_forward *engine, struct gw_transfer *t)
{
    if (t->cancelled) { /* cancelled before it started */
        transfer_end(engine, t, CURLE_OK);
        return;
    }
    if (engine->active >= GW_TRANSFERS_MAX ||
        curl_multi_add_handle(engine->multi, t->easy) != CURLM_OK) {
        snprintf(t->curl_error, sizeof t->curl_error, "too many upstream transfers");
        transfer_end(engine, t, CURLE_FAILED_INIT);
        return;
    }
    t->added = true;
    engine->active++;
    DLIST_PUSH_FRONT(engine->active_list, t, previous_active, next_active);
}

static void command_run(struct gw_forward *engine, struct command *command)
{
    struct gw_transfer *t = command->transfer;
    switch (command->kind) {
    case COMMAND_START:
        command_start(engine, t);
        break;
    case COMMAND_CANCEL:
        if (t->done)
            break; /* it ended on its own first */
        t->cancelled = true;
        if (t->added)
            transfer_end(engine, t, CURLE_OK);
        break; /* not started yet: command_start sees the flag */
    case COMMAND_UNPAUSE:
        if (!t->done && t->added)
            curl_easy_pause(t->easy, CURLPAUSE_CONT);
        break;
    }
}

/* Runs every queued command, then frees the transfers that ended before
 * this drain (no command can name them any more). */
static void drain(struct gw_forward *engine)
{
    struct gw_transfer *zombies = engine->zombies;
    engine->zombies = NULL;
    pthread_mutex_lock(&engine->mutex);
    struct command *command = engine->queue_head;
    engine->queue_head = engine->queue_tail = NULL;
    pthread_mutex_unlock(&engine->mutex);
    while (command != NULL) {
        struct command *next = command->next;
        command_run(engine, command);
        free(command);
        command = next;
    }
    while (zombies != NULL) {
        struct gw_transfer *next = zombies->next_zombie;
        transfer_free(engine, zombies);
        zombies = next;
    }
}

static void reap(struct gw_forward *engine)
{
    int left = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(engine->multi, &left)) != NULL) {
        if (message->msg != CURLMSG_DONE)
            continue;
        struct gw_transfer *t = NULL;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        assert(t != NULL);
        assert(t->easy == message->easy_handle);
        transfer_end(engine, t, message->data.result);
    }
}

static void tick_if_due(struct gw_forward *engine, int64_t now_ms)
{
    if (engine->tick == NULL || now_ms < engine->next_tick_ms)
        return;
    engine->next_tick_ms = now_ms + engine->tick_interval_ms;
    engine->tick(engine->tick_context);
}

static bool stopping(struct gw_forward *engine)
{
    pthread_mutex_lock(&engine->mutex);
    bool result = engine->stopping;
    pthread_mutex_unlock(&engine->mutex);
    return result;
}

/* Cancels whatever is still running or queued, until nothing is left. */
static void shut_down(struct gw_forward *engine)
{
    for (;;) {
        drain(engine);
        bool any = false;
        while (engine->active_list != NULL) {
            struct gw_transfer *t = engine->active_list;
            t->cancelled = true;
            transfer_end(engine, t, CURLE_OK); /* unlinks it */
            any = true;
        }
        pthread_mutex_lock(&engine->mutex);
        any = any || engine->queue_head != NULL;
        pthread_mutex_unlock(&engine->mutex);
        if (!any)
            break;
    }
    drain(engine); /* frees the last zombies */
}

/* CURLMOPT_SOCKETFUNCTION: what curl wants to hear of a socket, set in the
 * epoll set. socketp is non-NULL once the socket is in it. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    struct gw_forward *engine = userp;
    if (what == CURL_POLL_REMOVE) {
        /* curl says so before it closes the socket; one closed first has
         * left the set already */
        if (socketp != NULL)
            (void)epoll_ctl(engine->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    struct epoll_event event = {
        .events = ((what & CURL_POLL_IN) != 0 ? (uint32_t)EPOLLIN : 0) |
                  ((what & CURL_POLL_OUT) != 0 ? (uint32_t)EPOLLOUT : 0),
        .data.fd = fd,
    };
    int op = socketp != NULL ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    int rc = epoll_ctl(engine->epoll_fd, op, fd, &event);
    if (rc != 0 && op == EPOLL_CTL_ADD && errno == EEXIST)
        rc = epoll_ctl(engine->epoll_fd, EPOLL_CTL_MOD, fd, &event);
    else if (rc != 0 && op == EPOLL_CTL_MOD && errno == ENOENT)
        rc = epoll_ctl(engine->epoll_fd, EPOLL_CTL_ADD, fd, &event);
    /* Failed (out of kernel memory): the transfers on this socket wait for
     * their timeouts. Answering -1 would stop the whole multi handle. */
    if (rc == 0 && socketp == NULL)
        curl_multi_assign(engine->multi, fd, engine);
    return 0;
}

/* Runs curl's timeout while it is due (transfers just added, timeouts,
 * retries), then says in how many ms it is due next (-1: no timer). Asked
 * of curl each turn rather than told through CURLMOPT_TIMERFUNCTION, which
 * curl calls only when its earliest timer changes: one run a little early
 * would leave a timer never run. */
static long run_timer(struct gw_forward *engine)
{
    long timeout_ms = -1;
    for (int turns = 0; turns < 4; turns++) {
        if (curl_multi_timeout(engine->multi, &timeout_ms) != CURLM_OK)
            return 1000;
        if (timeout_ms != 0)
            break;
        int running = 0;
        curl_multi_socket_action(engine->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        reap(engine);
    }
    return timeout_ms; /* still 0 after 4 runs: the next turn runs it again */
}

/* How long the next wait may last: until curl's timer or the next tick,
 * at most a second. */
static int wait_ms(const struct gw_forward *engine, long timer_ms, int64_t now_ms)
{
    int64_t wait = 1000;
    if (engine->tick != NULL && engine->next_tick_ms - now_ms < wait)
        wait = engine->next_tick_ms - now_ms;
    if (timer_ms >= 0 && timer_ms < wait)
        wait = timer_ms;
    return wait > 0 ? (int)wait : 0;
}

static void *engine_main(void *argument)
{
    struct gw_forward *engine = argument;
    struct epoll_event events[ENGINE_EVENTS_MAX];
    while (!stopping(engine)) {
        drain(engine);
        long timer_ms = run_timer(engine);
        int64_t now_ms = clock_monotonic_ms();
        tick_if_due(engine, now_ms);
        int count = epoll_wait(engine->epoll_fd, events, ENGINE_EVENTS_MAX,
                               wait_ms(engine, timer_ms, now_ms));
        for (int i = 0; i < count; i++) {
            int fd = events[i].data.fd;
            if (fd == engine->wake_fd) {
                uint64_t value;
                while (read(engine->wake_fd, &value, sizeof value) < 0 && errno == EINTR)
                    ;
                continue;
            }
            uint32_t e = events[i].events;
            int flags = ((e & EPOLLIN) != 0 ? CURL_CSELECT_IN : 0) |
                        ((e & EPOLLOUT) != 0 ? CURL_CSELECT_OUT : 0) |
                        ((e & (EPOLLERR | EPOLLHUP)) != 0 ? CURL_CSELECT_ERR : 0);
            int running = 0;
            curl_multi_socket_action(engine->multi, fd, flags, &running);
        }
        reap(engine);
    }
    shut_down(engine);
    return NULL;
}

/* ---- the interface ------------------------------------------------------- */

/* What gw_forward_start made, freed (the thread stopped, or never started). */
static void engine_free(struct gw_forward *engine)
{
    for (uint32_t i = 0; i < engine->easy_kept_count; i++)
        curl_easy_cleanup(engine->easy_kept[i]);
    if (engine->multi != NULL)
        curl_multi_cleanup(engine->multi);
    if (engine->wake_fd >= 0)
        close(engine->wake_fd);
    if (engine->epoll_fd >= 0)
        close(engine->epoll_fd);
    pthread_mutex_destroy(&engine->mutex);
    free(engine);
}

int gw_forward_start(struct gw_forward **out, void (*tick)(void *context), void *tick_context,
                     uint32_t tick_interval_ms, char *error, size_t error_size)
{
    assert(tick == NULL || tick_interval_ms >= 1);
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_result != CURLE_OK) {
        snprintf(error, error_size, "libcurl: %s", curl_easy_strerror(curl_init_result));
        return -1;
    }
    struct gw_forward *engine = calloc(1, sizeof *engine);
    if (engine == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    engine->epoll_fd = engine->wake_fd = -1;
    pthread_mutex_init(&engine->mutex, NULL);
    engine->multi = curl_multi_init();
    if (engine->multi == NULL) {
        engine_free(engine);
        snprintf(error, error_size, "libcurl: cannot make a multi handle");
        return -1;
    }
    engine->tick = tick;
    engine->tick_context = tick_context;
    engine->tick_interval_ms = tick_interval_ms;
    engine->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    engine->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wake = {.events = EPOLLIN, .data.fd = engine->wake_fd};
    if (engine->epoll_fd < 0 || engine->wake_fd < 0 ||
        epoll_ctl(engine->epoll_fd, EPOLL_CTL_ADD, engine->wake_fd, &wake) != 0) {
        snprintf(error, error_size, "the gateway's forwarding thread: %s", strerror(errno));
        engine_free(engine);
        return -1;
    }
    /* Keep-alive: a connection per concurrent call stays open for the next. */
    curl_multi_setopt(engine->multi, CURLMOPT_MAXCONNECTS, (long)GW_UPSTREAM_CONNECTIONS_MAX);
    curl_multi_setopt(engine->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(engine->multi, CURLMOPT_SOCKETDATA, engine);
    if (pthread_create(&engine->thread, NULL, engine_main, engine) != 0) {
        engine_free(engine);
        snprintf(error, error_size, "cannot start the gateway's forwarding thread");
        return -1;
    }
    *out = engine;
    return 0;
}

void gw_forward_stop(struct gw_forward *engine)
{
    pthread_mutex_lock(&engine->mutex);
    engine->stopping = true;
    pthread_mutex_unlock(&engine->mutex);
    wake_engine(engine);
    pthread_join(engine->thread, NULL);
    assert(engine->active == 0);
    engine_free(engine);
}

struct gw_transfer *gw_forward_submit(struct gw_forward *engine,
                                      const struct gw_transfer_spec *spec,
                                      const struct gw_transfer_ops *ops, void *context)
{
    assert(spec->url != NULL);
    assert(ops->on_head != NULL && ops->on_data != NULL && ops->on_done != NULL);
    struct gw_transfer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ops = ops;
    t->context = context;
    t->url = strdup(spec->url);
    if (spec->api_key != NULL) {
        const char *name = spec->key_header == GW_KEY_X_API_KEY        ? "x-api-key: "
                           : spec->key_header == GW_KEY_X_GOOG_API_KEY ? "x-goog-api-key: "
                                                                       : "Authorization: Bearer ";
        size_t n = strlen(name) + strlen(spec->api_key) + 1;
        t->authorization = malloc(n);
        if (t->authorization != NULL)
            snprintf(t->authorization, n, "%s%s", name, spec->api_key);
    }
    if (t->url == NULL || (spec->api_key != NULL && t->authorization == NULL) ||
        transfer_setup(engine, t, spec) != 0 || !post(engine, COMMAND_START, t)) {
        transfer_free(engine, t);
        return NULL;
    }
    pthread_mutex_lock(&engine->mutex);
    engine->stats.transfers++;
    pthread_mutex_unlock(&engine->mutex);
    return t;
}

void gw_forward_cancel(struct gw_forward *engine, struct gw_transfer *transfer)
{
    /* Out of memory here leaves the transfer to its own timeout. */
    (void)post(engine, COMMAND_CANCEL, transfer);
}

void gw_forward_unpause(struct gw_forward *engine, struct gw_transfer *transfer)
{
    (void)post(engine, COMMAND_UNPAUSE, transfer);
}

void gw_forward_stats(struct gw_forward *engine, struct gw_forward_stats *out)
{
    pthread_mutex_lock(&engine->mutex);
    *out = engine->stats;
    pthread_mutex_unlock(&engine->mutex);
}

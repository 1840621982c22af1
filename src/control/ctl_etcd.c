/* The etcd client (ctl_etcd.h): one libcurl easy handle per call, POSTing
 * the codec's bodies to /v3/kv/... on the member that answered last, and
 * to the next ones in turn when it cannot be reached or answers 5xx. The
 * watch is one long POST whose answer is newline-delimited JSON, split
 * into lines as it arrives. */
#include "ctl_etcd.h"

#include <assert.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_bounds.h"

struct ctl_etcd {
    char endpoints[CTL_ENDPOINTS_MAX][CTL_ENDPOINT_LENGTH_MAX + 1];
    uint32_t count;
    uint32_t current;  /* atomic: the member that answered last */
    uint32_t watching; /* atomic: the member a watch runs on, + 1; 0: none */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* One "host:port" of the URL; 0 or -1 with error. */
static int add_endpoint(struct ctl_etcd *etcd, const char *text, size_t length, char *error,
                        size_t error_size)
{
    if (etcd->count == CTL_ENDPOINTS_MAX) {
        snprintf(error, error_size, "--control: more than %d members", CTL_ENDPOINTS_MAX);
        return -1;
    }
    const char *colon = memrchr(text, ':', length);
    bool port_ok = colon != NULL && colon > text && (size_t)(colon - text) + 1 < length;
    for (const char *p = colon != NULL ? colon + 1 : text; port_ok && p < text + length; p++)
        port_ok = *p >= '0' && *p <= '9';
    if (length == 0 || length > CTL_ENDPOINT_LENGTH_MAX || !port_ok) {
        snprintf(error, error_size,
                 "--control: each member must be host:port of at most %d bytes: %.*s",
                 CTL_ENDPOINT_LENGTH_MAX, (int)(length > 300 ? 300 : length), text);
        return -1;
    }
    for (size_t i = 0; i < length; i++) {
        if (text[i] <= ' ' || text[i] == '/' || text[i] == '@' || (unsigned char)text[i] >= 0x7f) {
            snprintf(error, error_size, "--control: bad character in member %.*s",
                     (int)(length > 300 ? 300 : length), text);
            return -1;
        }
    }
    memcpy(etcd->endpoints[etcd->count], text, length);
    etcd->endpoints[etcd->count][length] = '\0';
    etcd->count++;
    return 0;
}

int ctl_etcd_open(const char *url, struct ctl_etcd **out, char *error, size_t error_size)
{
    static const char scheme[] = "etcd://";
    *out = NULL;
    if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
        snprintf(error, error_size, "--control: must start with %s", scheme);
        return -1;
    }
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_result != CURLE_OK) {
        snprintf(error, error_size, "cannot initialise libcurl");
        return -1;
    }
    struct ctl_etcd *etcd = calloc(1, sizeof *etcd);
    if (etcd == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    const char *p = url + sizeof scheme - 1;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t length = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (add_endpoint(etcd, p, length, error, error_size) != 0) {
            free(etcd);
            return -1;
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *out = etcd;
    return 0;
}

void ctl_etcd_close(struct ctl_etcd *etcd)
{
    free(etcd);
}

/* An answer's bytes into a bounded buffer: past its cap the transfer stops. */
static size_t collect(char *data, size_t size, size_t count, void *context)
{
    struct buffer *b = context;
    size_t n = size * count;
    buffer_append(b, data, n);
    return b->failed ? 0 : n;
}

static CURL *easy_for(const struct ctl_etcd *etcd, uint32_t member, const char *path,
                      const struct buffer *body)
{
    CURL *easy = curl_easy_init();
    if (easy == NULL)
        return NULL;
    char url[CTL_ENDPOINT_LENGTH_MAX + 64];
    snprintf(url, sizeof url, "http://%s%s", etcd->endpoints[member], path);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body->data);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->length);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)CTL_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_PROXY, "");
    return easy;
}

/* One POST to one member. 1 when it answered below 500 (the answer in
 * *answer, NUL-terminated), 0 when it could not be reached or answered 5xx
 * (the next may do), -1 when no other member can do better (out of
 * memory), ANSWER_TOO_LONG for an answer past its bound; error set unless 1. */
#define ANSWER_TOO_LONG (-2)
static int post_member(struct ctl_etcd *etcd, uint32_t member, const char *path,
                       const struct buffer *body, long timeout_ms, struct buffer *answer,
                       char *error, size_t error_size)
{
    CURL *easy = easy_for(etcd, member, path, body);
    if (easy == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    answer->length = 0;
    answer->failed = false;
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, answer);
    CURLcode code = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(easy);
    if (answer->failed) {
        snprintf(error, error_size, "etcd %s: answer past %u bytes", etcd->endpoints[member],
                 CTL_RESPONSE_BYTES_MAX);
        return ANSWER_TOO_LONG;
    }
    if (code != CURLE_OK || status >= 500) {
        snprintf(error, error_size, "etcd %s: %s", etcd->endpoints[member],
                 code != CURLE_OK ? curl_easy_strerror(code) : "answered 5xx");
        return 0;
    }
    buffer_append_char(answer, '\0');
    if (answer->failed) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    answer->length--;
    return 1;
}

/* POSTs body to path, member after member from the current one, until
 * one answers below 500. 0 with the answer in *answer (NUL-terminated),
 * or -1 (ANSWER_TOO_LONG for an answer past its bound) with error. */
static int post(struct ctl_etcd *etcd, const char *path, const struct buffer *body,
                struct buffer *answer, char *error, size_t error_size)
{
    if (body->failed) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    uint32_t first = __atomic_load_n(&etcd->current, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < etcd->count; i++) {
        uint32_t member = (first + i) % etcd->count;
        int posted = post_member(etcd, member, path, body, CTL_REQUEST_TIMEOUT_MS, answer, error,
                                 error_size);
        if (posted < 0)
            return posted;
        if (posted == 1) {
            __atomic_store_n(&etcd->current, member, __ATOMIC_RELAXED);
            return 0;
        }
    }
    return -1;
}

/* Sends a body built by the caller to path; its answer in *answer (free
 * with buffer_free). As post returns. */
static int call(struct ctl_etcd *etcd, const char *path, struct buffer *body, struct buffer *answer,
                char *error, size_t error_size)
{
    buffer_init(answer, NULL, 0);
    answer->capacity_max = CTL_RESPONSE_BYTES_MAX;
    int result = post(etcd, path, body, answer, error, error_size);
    buffer_free(body);
    return result;
}

static int check_sizes(size_t key_length, size_t value_length, char *error, size_t error_size)
{
    if (key_length == 0 || key_length > CTL_KEY_BYTES_MAX) {
        snprintf(error, error_size, "etcd: a key must be 1..%d bytes", CTL_KEY_BYTES_MAX);
        return -1;
    }
    if (value_length > CTL_VALUE_BYTES_MAX) {
        snprintf(error, error_size, "etcd: a value must be at most %d bytes", CTL_VALUE_BYTES_MAX);
        return -1;
    }
    return 0;
}

int ctl_etcd_put(struct ctl_etcd *etcd, const char *key, size_t key_length, const char *value,
                 size_t value_length, int64_t *revision, char *error, size_t error_size)
{
    if (check_sizes(key_length, value_length, error, error_size) != 0)
        return -1;
    struct buffer body, answer;
    buffer_init(&body, NULL, 0);
    ctl_encode_put(&body, key, key_length, value, value_length);
    int result = call(etcd, "/v3/kv/put", &body, &answer, error, error_size) == 0 ? 0 : -1;
    if (result == 0)
        result = ctl_decode_put(answer.data, answer.length, revision, error, error_size);
    buffer_free(&answer);
    return result;
}

int ctl_etcd_delete(struct ctl_etcd *etcd, const char *key, size_t key_length, int64_t *revision,
                    int64_t *deleted, char *error, size_t error_size)
{
    if (check_sizes(key_length, 0, error, error_size) != 0)
        return -1;
    struct buffer body, answer;
    buffer_init(&body, NULL, 0);
    ctl_encode_delete(&body, key, key_length);
    int result = call(etcd, "/v3/kv/deleterange", &body, &answer, error, error_size) == 0 ? 0 : -1;
    if (result == 0)
        result =
            ctl_decode_delete(answer.data, answer.length, revision, deleted, error, error_size);
    buffer_free(&answer);
    return result;
}

int ctl_etcd_put_if(struct ctl_etcd *etcd, const char *key, size_t key_length, const char *value,
                    size_t value_length, int64_t mod_revision, bool *succeeded, int64_t *revision,
                    char *error, size_t error_size)
{
    if (check_sizes(key_length, value_length, error, error_size) != 0)
        return -1;
    struct buffer body, answer;
    buffer_init(&body, NULL, 0);
    ctl_encode_put_if(&body, key, key_length, value, value_length, mod_revision);
    int result = call(etcd, "/v3/kv/txn", &body, &answer, error, error_size) == 0 ? 0 : -1;
    if (result == 0)
        result = ctl_decode_txn(answer.data, answer.length, revision, succeeded, error, error_size);
    buffer_free(&answer);
    return result;
}

void ctl_range_free(struct ctl_range *range)
{
    for (size_t i = 0; i < range->count; i++)
        ctl_kv_free(&range->kvs[i]);
    free(range->kvs);
    range->kvs = NULL;
    range->count = 0;
}

/* Moves a page's kvs to the end of range->kvs; 0 or -1 with error. */
static int take_page(struct ctl_range *range, struct ctl_range_page *page, char *error,
                     size_t error_size)
{
    if (page->count > CTL_RANGE_KEYS_MAX - range->count) {
        snprintf(error, error_size, "etcd: more than %d keys under the prefix", CTL_RANGE_KEYS_MAX);
        return -1;
    }
    struct ctl_kv *grown =
        realloc(range->kvs, (range->count + page->count + 1) * sizeof *range->kvs);
    if (grown == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    range->kvs = grown;
    if (page->count > 0) {
        memcpy(range->kvs + range->count, page->kvs, page->count * sizeof *page->kvs);
    }
    range->count += page->count;
    free(page->kvs); /* the strings moved to range */
    page->kvs = NULL;
    page->count = 0;
    return 0;
}

/* One page from start (inclusive) to end, as of revision (0: newest), of
 * at most *page_keys keys. The next page is sized from this one's bytes
 * per key to about CTL_RANGE_PAGE_BYTES (at most CTL_RANGE_PAGE_KEYS
 * keys). An answer past CTL_RESPONSE_BYTES_MAX all the same is asked again
 * with half as many keys, down to one. */
static int range_page(struct ctl_etcd *etcd, const char *start, size_t start_length,
                      const char *end, size_t end_length, int64_t revision, uint32_t *page_keys,
                      struct ctl_range_page *page, char *error, size_t error_size)
{
    for (;;) {
        struct buffer body, answer;
        buffer_init(&body, NULL, 0);
        ctl_encode_range(&body, start, start_length, end, end_length, *page_keys, revision);
        int result = call(etcd, "/v3/kv/range", &body, &answer, error, error_size);
        size_t bytes = answer.length;
        if (result == 0)
            result = ctl_decode_range(answer.data, answer.length, page, error, error_size);
        buffer_free(&answer);
        if (result == 0 && page->count > 0) {
            size_t per_key = bytes / page->count + 1;
            size_t next = CTL_RANGE_PAGE_BYTES / per_key;
            *page_keys = next < 1                     ? 1
                         : next > CTL_RANGE_PAGE_KEYS ? CTL_RANGE_PAGE_KEYS
                                                      : (uint32_t)next;
        }
        if (result != ANSWER_TOO_LONG || *page_keys == 1)
            return result < 0 ? -1 : result;
        *page_keys /= 2;
    }
}

/* Each page after the first starts just past the last key seen (key +
 * NUL, the next key in byte order) as of the first page's revision. */
int ctl_etcd_range_prefix(struct ctl_etcd *etcd, const char *prefix, struct ctl_range *range,
                          char *error, size_t error_size)
{
    memset(range, 0, sizeof *range);
    char end[CTL_KEY_BYTES_MAX], start[CTL_KEY_BYTES_MAX + 1];
    size_t end_length = 0, start_length = strlen(prefix);
    if (start_length > CTL_KEY_BYTES_MAX ||
        ctl_prefix_end(prefix, start_length, end, sizeof end, &end_length) != 0) {
        snprintf(error, error_size, "etcd: bad prefix");
        return -1;
    }
    memcpy(start, prefix, start_length);
    uint32_t page_keys = CTL_RANGE_FIRST_PAGE_KEYS;
    for (;;) {
        struct ctl_range_page page;
        if (range_page(etcd, start, start_length, end, end_length, range->revision, &page_keys,
                       &page, error, error_size) != 0) {
            ctl_range_free(range);
            return -1;
        }
        if (range->revision == 0)
            range->revision = page.revision;
        bool more = page.more && page.count > 0;
        if (more) {
            const struct ctl_kv *last = &page.kvs[page.count - 1];
            assert(last->key_length <= CTL_KEY_BYTES_MAX);
            memcpy(start, last->key, last->key_length);
            start[last->key_length] = '\0';
            start_length = last->key_length + 1;
        }
        int taken = take_page(range, &page, error, error_size);
        ctl_range_page_free(&page);
        if (taken != 0) {
            ctl_range_free(range);
            return -1;
        }
        if (!more)
            return 0;
    }
}

/* ---- the watch ---------------------------------------------------------- */

struct watch_stream {
    struct buffer line; /* the line being received, capped at CTL_WATCH_LINE_BYTES_MAX */
    ctl_watch_fn on_response;
    void *context;
    const int *stop;
    bool stopped;   /* by *stop or on_response: the ending is not a failure */
    bool failed;    /* a line the codec refused, or too long: error says why */
    bool canceled;  /* the store ended the watch */
    bool compacted; /* ... because its start revision was compacted */
    char *error;
    size_t error_size;
};

/* One whole line: decoded and handed on. false stops the stream. */
static bool watch_line(struct watch_stream *w, char *text, size_t length)
{
    if (length == 0)
        return true;
    struct ctl_watch_response response;
    if (ctl_decode_watch(text, length, &response, w->error, w->error_size) != 0) {
        w->failed = true;
        return false;
    }
    bool go_on = true;
    if (response.canceled) {
        w->canceled = true;
        w->compacted = response.compact_revision > 0;
        snprintf(w->error, w->error_size, "etcd: watch canceled%s",
                 w->compacted ? " (its start revision was compacted)" : "");
        go_on = false;
    } else if (w->on_response(w->context, &response) != 0) {
        w->stopped = true;
        go_on = false;
    }
    ctl_watch_response_free(&response);
    return go_on;
}

static size_t watch_receive(char *data, size_t size, size_t count, void *context)
{
    struct watch_stream *w = context;
    size_t n = size * count;
    for (size_t i = 0; i < n; i++) {
        if (data[i] != '\n') {
            const char *newline = memchr(data + i, '\n', n - i);
            size_t run = newline != NULL ? (size_t)(newline - (data + i)) : n - i;
            buffer_append(&w->line, data + i, run);
            if (w->line.failed) {
                snprintf(w->error, w->error_size, "etcd: a watch line past %u bytes",
                         CTL_WATCH_LINE_BYTES_MAX);
                w->failed = true;
                return 0;
            }
            i += run - 1;
            continue;
        }
        if (!watch_line(w, w->line.data, w->line.length))
            return 0;
        w->line.length = 0;
    }
    return n;
}

static int watch_progress(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                          curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct watch_stream *w = context;
    if (__atomic_load_n(w->stop, __ATOMIC_RELAXED) == 0)
        return 0;
    w->stopped = true;
    return 1;
}

/* One watch on one member until it ends; the curl result. */
static CURLcode watch_member(struct ctl_etcd *etcd, uint32_t member, const struct buffer *body,
                             struct watch_stream *w)
{
    CURL *easy = easy_for(etcd, member, "/v3/watch", body);
    if (easy == NULL)
        return CURLE_OUT_OF_MEMORY;
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, watch_receive);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, watch_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, w);
    CURLcode code = curl_easy_perform(easy);
    curl_easy_cleanup(easy);
    return code;
}

int ctl_etcd_watch(struct ctl_etcd *etcd, const char *prefix, int64_t start_revision,
                   ctl_watch_fn on_response, void *context, const int *stop, bool *compacted,
                   char *error, size_t error_size)
{
    *compacted = false;
    char end[CTL_KEY_BYTES_MAX];
    size_t end_length = 0, prefix_length = strlen(prefix);
    if (prefix_length > CTL_KEY_BYTES_MAX ||
        ctl_prefix_end(prefix, prefix_length, end, sizeof end, &end_length) != 0) {
        snprintf(error, error_size, "etcd: bad prefix");
        return -1;
    }
    struct buffer body;
    buffer_init(&body, NULL, 0);
    ctl_encode_watch(&body, prefix, prefix_length, end, end_length, start_revision);
    struct watch_stream w = {.on_response = on_response,
                             .context = context,
                             .stop = stop,
                             .error = error,
                             .error_size = error_size};
    buffer_init(&w.line, NULL, 0);
    w.line.capacity_max = CTL_WATCH_LINE_BYTES_MAX;
    uint32_t first = __atomic_load_n(&etcd->current, __ATOMIC_RELAXED);
    CURLcode code = CURLE_COULDNT_CONNECT;
    for (uint32_t i = 0; i < etcd->count && code == CURLE_COULDNT_CONNECT && !body.failed; i++) {
        uint32_t member = (first + i) % etcd->count;
        __atomic_store_n(&etcd->watching, member + 1, __ATOMIC_RELAXED);
        code = watch_member(etcd, member, &body, &w);
        __atomic_store_n(&etcd->watching, 0, __ATOMIC_RELAXED);
        if (code != CURLE_COULDNT_CONNECT)
            __atomic_store_n(&etcd->current, member, __ATOMIC_RELAXED);
        else
            snprintf(error, error_size, "etcd %s: %s", etcd->endpoints[member],
                     curl_easy_strerror(code));
    }
    buffer_free(&w.line);
    buffer_free(&body);
    *compacted = w.compacted;
    if (w.stopped && !w.failed)
        return 0;
    if (!w.failed && !w.canceled && code != CURLE_COULDNT_CONNECT)
        snprintf(error, error_size, "etcd: watch stream ended: %s",
                 code == CURLE_OK ? "closed by the member" : curl_easy_strerror(code));
    return -1;
}

int ctl_etcd_probe(struct ctl_etcd *etcd, const char *prefix, char *error, size_t error_size)
{
    uint32_t watching = __atomic_load_n(&etcd->watching, __ATOMIC_RELAXED);
    if (watching == 0)
        return 0;
    char end[CTL_KEY_BYTES_MAX];
    size_t end_length = 0, prefix_length = strlen(prefix);
    if (prefix_length > CTL_KEY_BYTES_MAX ||
        ctl_prefix_end(prefix, prefix_length, end, sizeof end, &end_length) != 0) {
        snprintf(error, error_size, "etcd: bad prefix");
        return -1;
    }
    struct buffer body, answer;
    buffer_init(&body, NULL, 0);
    ctl_encode_range(&body, prefix, prefix_length, end, end_length, 1, 0);
    buffer_init(&answer, NULL, 0);
    answer.capacity_max = CTL_RESPONSE_BYTES_MAX;
    int result = -1;
    if (body.failed)
        snprintf(error, error_size, "out of memory");
    else if (post_member(etcd, watching - 1, "/v3/kv/range", &body, CTL_PROBE_TIMEOUT_MS, &answer,
                         error, error_size) == 1) {
        struct ctl_range_page page;
        result = ctl_decode_range(answer.data, answer.length, &page, error, error_size);
        if (result == 0)
            ctl_range_page_free(&page);
    }
    buffer_free(&body);
    buffer_free(&answer);
    if (result != 0) /* the next call starts with the next member */
        __atomic_store_n(&etcd->current, watching % etcd->count, __ATOMIC_RELAXED);
    return result;
}

/* The --wrap allocation hooks and SQLite's allocator hooks of
 * fault_alloc.h: a global countdown under one mutex, and an open-addressing
 * set of the live blocks. */
#include "fault_alloc.h"

#include <assert.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *block, size_t size);
void __real_free(void *block);
char *__real_strndup(const char *text, size_t length);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *block, size_t size);
void __wrap_free(void *block);
char *__wrap_strndup(const char *text, size_t length);

#define LIVE_SLOTS (UINT64_C(1) << 22) /* blocks tracked at once: far above any test's */
#define TOMBSTONE ((void *)1)

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fail_at; /* the allocation number that fails; 0: none */
static uint64_t count;   /* allocations since armed */
static bool fired;
static void *live[LIVE_SLOTS]; /* NULL: empty; TOMBSTONE: deleted */
static uint64_t live_count;

void fault_alloc_fail_at(uint64_t n)
{
    pthread_mutex_lock(&mutex);
    fail_at = n;
    count = 0;
    fired = false;
    pthread_mutex_unlock(&mutex);
}

bool fault_alloc_fired(void)
{
    pthread_mutex_lock(&mutex);
    bool result = fired;
    pthread_mutex_unlock(&mutex);
    return result;
}

uint64_t fault_alloc_count(void)
{
    pthread_mutex_lock(&mutex);
    uint64_t result = count;
    pthread_mutex_unlock(&mutex);
    return result;
}

uint64_t fault_alloc_live(void)
{
    pthread_mutex_lock(&mutex);
    uint64_t result = live_count;
    pthread_mutex_unlock(&mutex);
    return result;
}

/* One allocation is about to be made: should it fail? (mutex held) */
static bool should_fail(void)
{
    count++;
    if (fail_at == 0 || count != fail_at)
        return false;
    fired = true;
    return true;
}

static uint64_t slot_of(const void *block)
{
    uint64_t x = (uint64_t)(uintptr_t)block;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x & (LIVE_SLOTS - 1);
}

static void live_add(void *block)
{
    assert(live_count < LIVE_SLOTS / 2);
    uint64_t i = slot_of(block);
    while (live[i] != NULL && live[i] != TOMBSTONE)
        i = (i + 1) & (LIVE_SLOTS - 1);
    live[i] = block;
    live_count++;
}

/* false when the block was not handed out here (libc's own, say). */
static bool live_remove(void *block)
{
    uint64_t i = slot_of(block);
    while (live[i] != NULL) {
        if (live[i] == block) {
            live[i] = TOMBSTONE;
            live_count--;
            return true;
        }
        i = (i + 1) & (LIVE_SLOTS - 1);
    }
    return false;
}

void *__wrap_malloc(size_t size)
{
    pthread_mutex_lock(&mutex);
    void *block = should_fail() ? NULL : __real_malloc(size);
    if (block != NULL)
        live_add(block);
    pthread_mutex_unlock(&mutex);
    return block;
}

void *__wrap_calloc(size_t n, size_t size)
{
    pthread_mutex_lock(&mutex);
    void *block = should_fail() ? NULL : __real_calloc(n, size);
    if (block != NULL)
        live_add(block);
    pthread_mutex_unlock(&mutex);
    return block;
}

void *__wrap_realloc(void *block, size_t size)
{
    pthread_mutex_lock(&mutex);
    if (should_fail()) {
        pthread_mutex_unlock(&mutex);
        return NULL; /* the old block stays as it was */
    }
    bool tracked = block != NULL && live_remove(block);
    void *grown = __real_realloc(block, size);
    if (grown != NULL && (tracked || block == NULL))
        live_add(grown);
    else if (grown == NULL && tracked)
        live_add(block);
    pthread_mutex_unlock(&mutex);
    return grown;
}

void __wrap_free(void *block)
{
    if (block == NULL)
        return;
    pthread_mutex_lock(&mutex);
    live_remove(block);
    pthread_mutex_unlock(&mutex);
    __real_free(block);
}

char *__wrap_strndup(const char *text, size_t length)
{
    size_t n = strnlen(text, length);
    char *copy = __wrap_malloc(n + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, text, n);
    copy[n] = '\0';
    return copy;
}

/* ---- SQLite's allocator through the countdown. */

static sqlite3_mem_methods sqlite_default;

static bool sqlite_should_fail(void)
{
    pthread_mutex_lock(&mutex);
    bool fail = should_fail();
    pthread_mutex_unlock(&mutex);
    return fail;
}

static void *sqlite_malloc(int size)
{
    return sqlite_should_fail() ? NULL : sqlite_default.xMalloc(size);
}

static void *sqlite_realloc(void *block, int size)
{
    return sqlite_should_fail() ? NULL : sqlite_default.xRealloc(block, size);
}

int fault_alloc_sqlite_install(void)
{
    if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sqlite_default) != SQLITE_OK)
        return -1;
    sqlite3_mem_methods methods = sqlite_default;
    methods.xMalloc = sqlite_malloc;
    methods.xRealloc = sqlite_realloc;
    return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) == SQLITE_OK ? 0 : -1;
}

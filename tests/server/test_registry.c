/* The registry (src/server/registry.c) when limits.json cannot be written
 * or a change was cut short: the file and the backend never silently
 * disagree. Writes are blocked by a directory where limits.json.tmp goes (it
 * stops root too); backend failures come from a wrapper around the memory
 * backend's ops that fails chosen admin calls with BACKEND_ADMIN_UNAVAILABLE
 * (a storage failure). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/memory/memory.h"
#include "core/clock.h"
#include "server/registry.h"
#include "test.h"

/* The memory backend behind a backend of its own whose admin calls can be
 * made to fail: the ops the registry and these tests use are forwarded. */
struct faulty {
    struct backend base;
    struct backend *inner;
};

static int puts_to_fail;    /* the next this many put_limit calls fail (unavailable) */
static int deletes_to_fail; /* ... delete_limit */

static struct backend *inner_of(struct backend *backend)
{
    return ((struct faulty *)backend)->inner;
}

static enum backend_admin_result faulty_put(struct backend *backend,
                                            const struct limit_definition *definition,
                                            struct limit_state *state_out)
{
    if (puts_to_fail > 0) {
        puts_to_fail--;
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    struct backend *inner = inner_of(backend);
    return inner->ops->put_limit(inner, definition, state_out);
}

static enum backend_admin_result faulty_delete(struct backend *backend, const char *key)
{
    if (deletes_to_fail > 0) {
        deletes_to_fail--;
        return BACKEND_ADMIN_UNAVAILABLE;
    }
    return backend_delete_limit(inner_of(backend), key);
}

static enum backend_admin_result faulty_restore(struct backend *backend,
                                                const struct limit_state *state)
{
    struct backend *inner = inner_of(backend);
    return inner->ops->restore_limit(inner, state);
}

static enum backend_admin_result faulty_get(struct backend *backend, const char *key,
                                            struct limit_state *out)
{
    return backend_get_limit(inner_of(backend), key, out);
}

static enum backend_admin_result faulty_list(struct backend *backend, struct limit_state **out,
                                             size_t *count)
{
    return backend_list_limits(inner_of(backend), out, count);
}

static void faulty_reserve(struct backend *backend, const struct reserve_request *requests,
                           struct reserve_result *results, uint32_t count, backend_done_fn done,
                           void *context)
{
    backend_reserve(inner_of(backend), requests, results, count, done, context);
}

static void faulty_close(struct backend *backend)
{
    backend_close(inner_of(backend));
    free(backend);
}

static const struct backend_ops faulty_ops = {
    .name = "faulty-memory",
    .close = faulty_close,
    .put_limit = faulty_put,
    .restore_limit = faulty_restore,
    .delete_limit = faulty_delete,
    .get_limit = faulty_get,
    .list_limits = faulty_list,
    .reserve = faulty_reserve,
};

struct fixture {
    char dir[64];
    char path[96];
    char tmp_path[96];
    struct clock_manual clock;
    struct backend *backend;
    struct registry *registry;
};

static bool backend_start(struct fixture *f)
{
    struct backend_config config;
    backend_config_defaults(&config);
    clock_manual_init(&f->clock, INT64_C(1768478400000));
    config.clock = &f->clock.clock;
    config.data_dir = f->dir;
    char error[256];
    struct faulty *faulty = calloc(1, sizeof *faulty);
    if (faulty == NULL)
        return false;
    if (backend_open(&mem_backend_ops, &config, NULL, &faulty->inner, error, sizeof error) != 0) {
        free(faulty);
        return false;
    }
    faulty->base.ops = &faulty_ops;
    f->backend = &faulty->base;
    puts_to_fail = 0;
    deletes_to_fail = 0;
    return true;
}

static bool registry_start(struct fixture *f)
{
    char error[1024];
    if (registry_open(f->dir, f->backend, &f->registry, error, sizeof error) != 0) {
        fprintf(stderr, "  registry_open: %s\n", error);
        return false;
    }
    return true;
}

/* A fresh directory, a backend, and the registry on it. */
static bool setup(struct fixture *f)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/llmlimit-registry-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return false;
    snprintf(f->path, sizeof f->path, "%s/limits.json", f->dir);
    snprintf(f->tmp_path, sizeof f->tmp_path, "%s/limits.json.tmp", f->dir);
    f->registry = NULL;
    return backend_start(f) && registry_start(f);
}

static void stop(struct fixture *f)
{
    registry_close(f->registry);
    f->registry = NULL;
    backend_close(f->backend);
    f->backend = NULL;
}

static void teardown(struct fixture *f)
{
    if (f->backend != NULL)
        stop(f);
    rmdir(f->tmp_path);
    unlink(f->tmp_path);
    unlink(f->path);
    rmdir(f->dir);
}

static void block_writes(struct fixture *f)
{
    CHECK(mkdir(f->tmp_path, 0755) == 0);
}

static void unblock_writes(struct fixture *f)
{
    CHECK(rmdir(f->tmp_path) == 0);
}

static struct limit_definition rolling(const char *key, uint64_t capacity)
{
    struct limit_definition d = {.kind = LIMIT_ROLLING, .capacity = capacity, .window_seconds = 60};
    snprintf(d.key, sizeof d.key, "%s", key);
    return d;
}

static enum registry_outcome put(struct fixture *f, const char *key, uint64_t capacity)
{
    struct limit_definition d = rolling(key, capacity);
    struct limit_state state;
    char error[256] = "";
    return registry_put(f->registry, &d, &state, error, sizeof error);
}

/* The capacity in force, 0 when the backend does not know the key. */
static uint64_t capacity_of(struct fixture *f, const char *key)
{
    struct limit_state state;
    if (backend_get_limit(f->backend, key, &state) != 0)
        return 0;
    return state.definition.capacity;
}

/* The whole file, "" when it does not exist. Caller frees. */
static char *file_text(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return strdup("");
    char *text = calloc(1, 1 << 16);
    size_t n = text != NULL ? fread(text, 1, (1 << 16) - 1, file) : 0;
    text[n] = '\0';
    fclose(file);
    return text;
}

static bool file_names(struct fixture *f, const char *key)
{
    char needle[300];
    snprintf(needle, sizeof needle, "\"key\":\"%s\"", key);
    char *text = file_text(f->path);
    bool found = strstr(text, needle) != NULL;
    free(text);
    return found;
}

static void put_write_failure_undoes_a_new_limit(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    char *before = file_text(f.path);
    block_writes(&f);
    CHECK_EQ_I64(put(&f, "b", 10), REGISTRY_WRITE_FAILED);
    CHECK_EQ_U64(capacity_of(&f, "b"), 0);
    CHECK_EQ_I64(registry_tick(f.registry, false), REGISTRY_WRITE_FAILED);
    unblock_writes(&f);
    CHECK_EQ_I64(registry_tick(f.registry, false), REGISTRY_OK);
    char *after = file_text(f.path);
    CHECK_STR(after, before);
    free(before);
    free(after);
    teardown(&f);
}

static void put_write_failure_restores_the_old_state(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    struct requirement need = {.key = "a", .key_length = 1, .amount = 8};
    struct reserve_request request = {
        .lease_id = "l", .lease_id_length = 1, .requirements = &need, .requirement_count = 1};
    struct reserve_result result;
    backend_reserve_wait(f.backend, &request, &result, 1);
    REQUIRE(result.allowed);
    CHECK_EQ_I64(put(&f, "a", 5), REGISTRY_OK); /* 8 held: waits as a decrease */
    struct limit_state waiting;
    REQUIRE(backend_get_limit(f.backend, "a", &waiting) == 0);
    REQUIRE(waiting.status == LIMIT_DECREASING);
    block_writes(&f);
    CHECK_EQ_I64(put(&f, "a", 20), REGISTRY_WRITE_FAILED);
    struct limit_state state;
    REQUIRE(backend_get_limit(f.backend, "a", &state) == 0);
    CHECK_EQ_U64(state.definition.capacity, 10);
    CHECK_EQ_I64(state.status, LIMIT_DECREASING);
    CHECK_EQ_U64(state.pending_decrease_to, 5);
    unblock_writes(&f);
    teardown(&f);
}

static void undo_that_fails_is_unsaved_until_the_tick_writes_it(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    block_writes(&f);
    deletes_to_fail = 1; /* the undo of the new limit */
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_UNSAVED);
    CHECK_EQ_U64(capacity_of(&f, "a"), 10);
    CHECK(!file_names(&f, "a"));
    CHECK_EQ_I64(registry_tick(f.registry, false), REGISTRY_WRITE_FAILED);
    unblock_writes(&f);
    CHECK_EQ_I64(registry_tick(f.registry, false), REGISTRY_OK);
    CHECK(file_names(&f, "a"));
    teardown(&f);
}

static void backend_failure_of_a_put_changes_nothing(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    puts_to_fail = 1;
    CHECK_EQ_I64(put(&f, "a", 20), REGISTRY_BACKEND_FAILED);
    CHECK_EQ_U64(capacity_of(&f, "a"), 10);
    CHECK(file_names(&f, "a"));
    teardown(&f);
}

static void delete_write_failure_changes_nothing(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    block_writes(&f);
    CHECK_EQ_I64(registry_delete(f.registry, "a"), REGISTRY_WRITE_FAILED);
    CHECK_EQ_U64(capacity_of(&f, "a"), 10);
    CHECK(file_names(&f, "a"));
    unblock_writes(&f);
    CHECK_EQ_I64(registry_delete(f.registry, "a"), REGISTRY_OK);
    CHECK_EQ_U64(capacity_of(&f, "a"), 0);
    CHECK(!file_names(&f, "a"));
    CHECK_EQ_I64(registry_delete(f.registry, "a"), REGISTRY_UNKNOWN);
    teardown(&f);
}

static void delete_backend_failure_puts_the_file_back(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    deletes_to_fail = 1;
    CHECK_EQ_I64(registry_delete(f.registry, "a"), REGISTRY_BACKEND_FAILED);
    CHECK_EQ_U64(capacity_of(&f, "a"), 10);
    CHECK(file_names(&f, "a"));
    teardown(&f);
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    REQUIRE(file != NULL);
    fputs(text, file);
    fclose(file);
}

static void open_removes_a_stale_tmp_and_reads_the_file(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    stop(&f);
    write_file(f.tmp_path, "[{\"definition\":{\"key\":\"half"); /* a rewrite cut short */
    REQUIRE(backend_start(&f));
    REQUIRE(registry_start(&f));
    CHECK(access(f.tmp_path, F_OK) != 0);
    CHECK_EQ_U64(capacity_of(&f, "a"), 10);
    CHECK_EQ_U64(capacity_of(&f, "half"), 0);
    teardown(&f);
}

/* A durable backend keeps limits across a restart; here the backend gets
 * them before the registry opens, as sqlite's would from its database. */
static void open_deletes_what_the_file_does_not_name(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "a", 10), REGISTRY_OK);
    stop(&f);
    REQUIRE(backend_start(&f));
    struct limit_definition d = rolling("crashed", 3);
    struct limit_state state;
    char error[256];
    REQUIRE(backend_put_limit(f.backend, &d, &state, error, sizeof error) == 0);
    REQUIRE(registry_start(&f));
    CHECK_EQ_U64(capacity_of(&f, "a"), 10);
    CHECK_EQ_U64(capacity_of(&f, "crashed"), 0);
    teardown(&f);
}

static void open_without_a_file_writes_one_from_the_backend(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    char *fresh = file_text(f.path);
    CHECK_STR(fresh, "[\n]\n"); /* written at the first start */
    free(fresh);
    stop(&f);
    unlink(f.path);
    REQUIRE(backend_start(&f));
    struct limit_definition d = rolling("kept", 4);
    struct limit_state state;
    char error[256];
    REQUIRE(backend_put_limit(f.backend, &d, &state, error, sizeof error) == 0);
    REQUIRE(registry_start(&f));
    CHECK_EQ_U64(capacity_of(&f, "kept"), 4);
    CHECK(file_names(&f, "kept"));
    teardown(&f);
}

/* How many times the file was rewritten: its inode changes at each rename. */
static ino_t file_inode(struct fixture *f)
{
    struct stat st;
    return stat(f->path, &st) == 0 ? st.st_ino : 0;
}

static void create_absent_creates_once_and_never_changes_one_that_exists(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "there", 3), REGISTRY_OK);
    struct registry_creation items[3] = {{.definition = rolling("there", 5)},
                                         {.definition = rolling("new-a", 7)},
                                         {.definition = rolling("new-b", 8)}};
    ino_t before = file_inode(&f);
    registry_create_absent(f.registry, items, 3);
    CHECK_EQ_I64(items[0].outcome, REGISTRY_EXISTS);
    CHECK_EQ_I64(items[1].outcome, REGISTRY_OK);
    CHECK_EQ_I64(items[2].outcome, REGISTRY_OK);
    CHECK_EQ_U64(capacity_of(&f, "there"), 3);
    CHECK_EQ_U64(capacity_of(&f, "new-a"), 7);
    CHECK_EQ_U64(capacity_of(&f, "new-b"), 8);
    CHECK(file_names(&f, "new-a") && file_names(&f, "new-b"));
    CHECK(file_inode(&f) != before); /* one rewrite for both */
    /* Again: everything exists, nothing is written. */
    before = file_inode(&f);
    items[1].definition.capacity = 70;
    registry_create_absent(f.registry, items, 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_I64(items[i].outcome, REGISTRY_EXISTS);
    CHECK_EQ_U64(capacity_of(&f, "new-a"), 7);
    CHECK(file_inode(&f) == before);
    teardown(&f);
}

static void create_absent_write_failure_undoes_every_creation(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    CHECK_EQ_I64(put(&f, "there", 3), REGISTRY_OK);
    char *before = file_text(f.path);
    block_writes(&f);
    deletes_to_fail = 1; /* the undo of the first creation fails: it stays, unsaved */
    struct registry_creation items[3] = {{.definition = rolling("a", 5)},
                                         {.definition = rolling("there", 9)},
                                         {.definition = rolling("b", 8)}};
    registry_create_absent(f.registry, items, 3);
    CHECK_EQ_I64(items[0].outcome, REGISTRY_UNSAVED);
    CHECK_EQ_I64(items[1].outcome, REGISTRY_EXISTS);
    CHECK_EQ_I64(items[2].outcome, REGISTRY_WRITE_FAILED);
    CHECK_EQ_U64(capacity_of(&f, "a"), 5);
    CHECK_EQ_U64(capacity_of(&f, "b"), 0);
    CHECK_EQ_U64(capacity_of(&f, "there"), 3);
    char *after = file_text(f.path);
    CHECK_STR(after, before);
    unblock_writes(&f);
    CHECK_EQ_I64(registry_tick(f.registry, false), REGISTRY_OK);
    CHECK(file_names(&f, "a"));
    CHECK(!file_names(&f, "b"));
    free(before);
    free(after);
    teardown(&f);
}

static void create_absent_backend_failure_is_that_items_alone(void)
{
    struct fixture f;
    REQUIRE(setup(&f));
    puts_to_fail = 1;
    struct registry_creation items[2] = {{.definition = rolling("a", 5)},
                                         {.definition = rolling("b", 6)}};
    registry_create_absent(f.registry, items, 2);
    CHECK_EQ_I64(items[0].outcome, REGISTRY_BACKEND_FAILED);
    CHECK_EQ_I64(items[1].outcome, REGISTRY_OK);
    CHECK_EQ_U64(capacity_of(&f, "a"), 0);
    CHECK(!file_names(&f, "a"));
    CHECK(file_names(&f, "b"));
    teardown(&f);
}

int main(void)
{
    RUN(put_write_failure_undoes_a_new_limit,
        "a new limit whose file cannot be written is deleted again; the file is as before");
    RUN(put_write_failure_restores_the_old_state,
        "a change whose file cannot be written is undone, a waiting decrease included");
    RUN(undo_that_fails_is_unsaved_until_the_tick_writes_it,
        "when the undo fails too the change is in force (unsaved) and the tick writes it later");
    RUN(backend_failure_of_a_put_changes_nothing,
        "a put the backend's storage refuses changes neither the backend nor the file");
    RUN(delete_write_failure_changes_nothing,
        "a delete whose file cannot be written leaves the limit; once writable it goes");
    RUN(delete_backend_failure_puts_the_file_back,
        "a delete the backend refuses leaves the limit in the backend and in the file");
    RUN(open_removes_a_stale_tmp_and_reads_the_file,
        "a stale limits.json.tmp from a cut-short rewrite is removed and never read");
    RUN(open_deletes_what_the_file_does_not_name,
        "at start a limit the backend kept but the file does not name is deleted");
    RUN(open_without_a_file_writes_one_from_the_backend,
        "without limits.json the first start writes one (empty, or the backend's limits)");
    RUN(create_absent_creates_once_and_never_changes_one_that_exists,
        "create-if-absent creates what is missing in one rewrite, leaves what exists as it is");
    RUN(create_absent_write_failure_undoes_every_creation,
        "create-if-absent whose file cannot be written undoes each creation (or leaves it "
        "unsaved)");
    RUN(create_absent_backend_failure_is_that_items_alone,
        "a creation the backend refuses fails alone; the others are created");
    return test_summary();
}

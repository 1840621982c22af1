/* The fault-injecting VFS: every file method passes through to the default
 * VFS except xWrite and xSync, which consult the fault set by the test. */
#include "fault_vfs.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The WAL file format (sqlite.org/fileformat2.html, "WAL File Format"): a
 * 32-byte file header, then frames of a 24-byte header and a page. Bytes
 * 4..7 of a frame header, big-endian, are the database size after a commit,
 * and zero for a frame that does not commit. SQLite writes a frame's header
 * and its page in two writes. */
#define WAL_FILE_HEADER_BYTES 32
#define WAL_FRAME_HEADER_BYTES 24

enum file_kind { KIND_OTHER = 0, KIND_MAIN_DB, KIND_WAL };

struct fault_file {
    sqlite3_file base;  /* our methods */
    sqlite3_file *real; /* the default VFS's file, right after this struct */
    enum file_kind kind;
    sqlite3_int64 commit_page_offset; /* WAL: where the page of a commit frame goes; -1 */
};

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static sqlite3_io_methods fault_methods;
static atomic_int current_fault;
static atomic_int current_tear;
static atomic_uint sync_delay_ms;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_released = PTHREAD_COND_INITIALIZER;
static bool wal_writes_held;     /* under hold_lock */
static uint32_t held_wal_writes; /* under hold_lock */
static atomic_uint_fast64_t failures;
static atomic_uint_fast64_t syncs;

static sqlite3_file *real_of(sqlite3_file *file)
{
    return ((struct fault_file *)file)->real;
}

static int fault_close(sqlite3_file *file)
{
    return real_of(file)->pMethods->xClose(real_of(file));
}

static int fault_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset)
{
    return real_of(file)->pMethods->xRead(real_of(file), buffer, amount, offset);
}

static void sleep_ms(unsigned delay)
{
    struct timespec ts = {.tv_sec = delay / 1000, .tv_nsec = (long)(delay % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* The first half of the write lands, the second half holds other bytes
 * (what was there before; here the intended bytes inverted, so the page is
 * whole in length but torn in content), then the process dies as in a
 * crash. */
static int tear_and_die(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset)
{
    static unsigned char torn[65536];
    if (amount < 2 || (size_t)amount > sizeof torn)
        _exit(98); /* no page is this size: the test fails on the exit code */
    const unsigned char *bytes = buffer;
    int half = amount / 2;
    memcpy(torn, bytes, (size_t)half);
    for (int i = half; i < amount; i++)
        torn[i] = (unsigned char)~bytes[i];
    real_of(file)->pMethods->xWrite(real_of(file), torn, amount, offset);
    raise(SIGKILL);
    _exit(99); /* not reached */
}

static uint32_t big_endian_u32(const unsigned char *bytes)
{
    return (uint32_t)bytes[0] << 24 | (uint32_t)bytes[1] << 16 | (uint32_t)bytes[2] << 8 |
           (uint32_t)bytes[3];
}

/* Tears the write the test chose, if this is it; returns otherwise. */
static void maybe_tear(struct fault_file *f, const void *buffer, int amount, sqlite3_int64 offset)
{
    int tear = atomic_load(&current_tear);
    if (tear == TEAR_DATABASE && f->kind == KIND_MAIN_DB)
        tear_and_die(&f->base, buffer, amount, offset);
    if (tear != TEAR_WAL_COMMIT || f->kind != KIND_WAL)
        return;
    if (amount == WAL_FRAME_HEADER_BYTES && offset >= WAL_FILE_HEADER_BYTES) {
        bool commits = big_endian_u32((const unsigned char *)buffer + 4) != 0;
        f->commit_page_offset = commits ? offset + WAL_FRAME_HEADER_BYTES : -1;
    } else if (offset == f->commit_page_offset) {
        tear_and_die(&f->base, buffer, amount, offset);
    }
}

/* Waits while the test holds WAL writes. */
static void wait_if_held(const struct fault_file *f)
{
    if (f->kind != KIND_WAL)
        return;
    pthread_mutex_lock(&hold_lock);
    held_wal_writes++;
    while (wal_writes_held)
        pthread_cond_wait(&hold_released, &hold_lock);
    held_wal_writes--;
    pthread_mutex_unlock(&hold_lock);
}

static int fault_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset)
{
    maybe_tear((struct fault_file *)file, buffer, amount, offset);
    wait_if_held((struct fault_file *)file);
    int fault = atomic_load(&current_fault);
    if (fault == FAULT_WRITE_FULL || fault == FAULT_WRITE_IO) {
        atomic_fetch_add(&failures, 1);
        return fault == FAULT_WRITE_FULL ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    }
    return real_of(file)->pMethods->xWrite(real_of(file), buffer, amount, offset);
}

static int fault_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    return real_of(file)->pMethods->xTruncate(real_of(file), size);
}

static int fault_sync(sqlite3_file *file, int flags)
{
    atomic_fetch_add(&syncs, 1);
    unsigned delay = atomic_load(&sync_delay_ms);
    if (delay > 0)
        sleep_ms(delay);
    int rc = real_of(file)->pMethods->xSync(real_of(file), flags);
    if (rc == SQLITE_OK && atomic_load(&current_fault) == FAULT_SYNC_IO) {
        atomic_fetch_add(&failures, 1);
        return SQLITE_IOERR_FSYNC;
    }
    return rc;
}

static int fault_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    return real_of(file)->pMethods->xFileSize(real_of(file), size);
}

static int fault_lock(sqlite3_file *file, int level)
{
    return real_of(file)->pMethods->xLock(real_of(file), level);
}

static int fault_unlock(sqlite3_file *file, int level)
{
    return real_of(file)->pMethods->xUnlock(real_of(file), level);
}

static int fault_check_reserved_lock(sqlite3_file *file, int *out)
{
    return real_of(file)->pMethods->xCheckReservedLock(real_of(file), out);
}

static int fault_file_control(sqlite3_file *file, int op, void *argument)
{
    return real_of(file)->pMethods->xFileControl(real_of(file), op, argument);
}

static int fault_sector_size(sqlite3_file *file)
{
    return real_of(file)->pMethods->xSectorSize(real_of(file));
}

static int fault_device_characteristics(sqlite3_file *file)
{
    return real_of(file)->pMethods->xDeviceCharacteristics(real_of(file));
}

static int fault_shm_map(sqlite3_file *file, int page, int size, int extend, void volatile **out)
{
    return real_of(file)->pMethods->xShmMap(real_of(file), page, size, extend, out);
}

static int fault_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
    return real_of(file)->pMethods->xShmLock(real_of(file), offset, n, flags);
}

static void fault_shm_barrier(sqlite3_file *file)
{
    real_of(file)->pMethods->xShmBarrier(real_of(file));
}

static int fault_shm_unmap(sqlite3_file *file, int delete_flag)
{
    return real_of(file)->pMethods->xShmUnmap(real_of(file), delete_flag);
}

static int fault_fetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out)
{
    return real_of(file)->pMethods->xFetch(real_of(file), offset, amount, out);
}

static int fault_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *page)
{
    return real_of(file)->pMethods->xUnfetch(real_of(file), offset, page);
}

static int fault_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
                      int *out_flags)
{
    (void)vfs;
    struct fault_file *f = (struct fault_file *)file;
    f->real = (sqlite3_file *)(f + 1);
    f->kind = (flags & SQLITE_OPEN_MAIN_DB) ? KIND_MAIN_DB
              : (flags & SQLITE_OPEN_WAL)   ? KIND_WAL
                                            : KIND_OTHER;
    f->commit_page_offset = -1;
    int rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out_flags);
    /* Our methods only once the real file is open: SQLite closes a file
     * only when pMethods is set. */
    f->base.pMethods = (rc == SQLITE_OK && f->real->pMethods != NULL) ? &fault_methods : NULL;
    return rc;
}

static int fault_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int fault_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int fault_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out)
{
    (void)vfs;
    return real_vfs->xFullPathname(real_vfs, name, size, out);
}

static int fault_randomness(sqlite3_vfs *vfs, int size, char *out)
{
    (void)vfs;
    return real_vfs->xRandomness(real_vfs, size, out);
}

static int fault_sleep(sqlite3_vfs *vfs, int microseconds)
{
    (void)vfs;
    return real_vfs->xSleep(real_vfs, microseconds);
}

static int fault_current_time(sqlite3_vfs *vfs, double *out)
{
    (void)vfs;
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int fault_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    (void)vfs;
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static int fault_get_last_error(sqlite3_vfs *vfs, int size, char *out)
{
    (void)vfs;
    return real_vfs->xGetLastError(real_vfs, size, out);
}

int fault_vfs_install(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    if (real_vfs == NULL || real_vfs->iVersion < 2)
        return -1;
    fault_methods = (sqlite3_io_methods){
        .iVersion = 3,
        .xClose = fault_close,
        .xRead = fault_read,
        .xWrite = fault_write,
        .xTruncate = fault_truncate,
        .xSync = fault_sync,
        .xFileSize = fault_file_size,
        .xLock = fault_lock,
        .xUnlock = fault_unlock,
        .xCheckReservedLock = fault_check_reserved_lock,
        .xFileControl = fault_file_control,
        .xSectorSize = fault_sector_size,
        .xDeviceCharacteristics = fault_device_characteristics,
        .xShmMap = fault_shm_map,
        .xShmLock = fault_shm_lock,
        .xShmBarrier = fault_shm_barrier,
        .xShmUnmap = fault_shm_unmap,
        .xFetch = fault_fetch,
        .xUnfetch = fault_unfetch,
    };
    fault_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(struct fault_file) + real_vfs->szOsFile,
        .mxPathname = real_vfs->mxPathname,
        .zName = "llmlimit-fault",
        .xOpen = fault_open,
        .xDelete = fault_delete,
        .xAccess = fault_access,
        .xFullPathname = fault_full_pathname,
        .xRandomness = fault_randomness,
        .xSleep = fault_sleep,
        .xCurrentTime = fault_current_time,
        .xGetLastError = fault_get_last_error,
        .xCurrentTimeInt64 = fault_current_time_int64,
    };
    return sqlite3_vfs_register(&fault_vfs, 1) == SQLITE_OK ? 0 : -1;
}

void fault_vfs_set(enum fault fault)
{
    atomic_store(&current_fault, (int)fault);
}

void fault_vfs_tear(enum tear tear)
{
    atomic_store(&current_tear, (int)tear);
}

void fault_vfs_set_sync_delay_ms(uint32_t delay_ms)
{
    atomic_store(&sync_delay_ms, delay_ms);
}

void fault_vfs_hold_wal_writes(bool hold)
{
    pthread_mutex_lock(&hold_lock);
    wal_writes_held = hold;
    pthread_cond_broadcast(&hold_released);
    pthread_mutex_unlock(&hold_lock);
}

uint32_t fault_vfs_held_wal_writes(void)
{
    pthread_mutex_lock(&hold_lock);
    uint32_t held = held_wal_writes;
    pthread_mutex_unlock(&hold_lock);
    return held;
}

uint64_t fault_vfs_failures(void)
{
    return atomic_load(&failures);
}

uint64_t fault_vfs_syncs(void)
{
    return atomic_load(&syncs);
}

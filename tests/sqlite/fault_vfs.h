/* A test VFS that wraps SQLite's default one and fails writes or syncs on
 * demand (SQLite's own test_vfs idea): disk full, I/O error, failed fsync, a
 * slow fsync, or a torn write followed by a crash. Registered as the default
 * VFS, for tests only. */
#ifndef LLMLIMIT_FAULT_VFS_H
#define LLMLIMIT_FAULT_VFS_H

#include <stdbool.h>
#include <stdint.h>

enum fault {
    FAULT_NONE = 0,
    FAULT_WRITE_FULL = 1, /* xWrite returns SQLITE_FULL: the disk is full */
    FAULT_WRITE_IO = 2,   /* xWrite returns SQLITE_IOERR_WRITE */
    FAULT_SYNC_IO = 3,    /* xSync returns SQLITE_IOERR_FSYNC (the data was written) */
};

/* A write that lands only partly before the process dies: what a crash
 * (or a power cut) in the middle of a write leaves on disk. The write is
 * whole in length; its second half holds other bytes than intended. */
enum tear {
    TEAR_NONE = 0,
    /* The page of the next WAL frame that commits a transaction: its frame
     * header is whole, half of its page is written, then the crash. WAL
     * recovery must reject the frame by its checksum, and with it the whole
     * transaction. */
    TEAR_WAL_COMMIT = 1,
    /* The next write to the main database file (a checkpoint copying pages
     * from the WAL): half a page, then the crash. The WAL is still whole,
     * so recovery must read the page from it. */
    TEAR_DATABASE = 2,
};

/* Registers the VFS as SQLite's default. 0 or -1. Call once, before opening. */
int fault_vfs_install(void);
/* Every write/sync from now on fails this way (FAULT_NONE: none does). */
void fault_vfs_set(enum fault fault);
/* Each xSync sleeps this long first (0: none), to keep the syncer busy. */
void fault_vfs_set_sync_delay_ms(uint32_t delay_ms);
/* While held, every write to a WAL file waits until released: the
 * backend's writer (the only thread that writes the WAL) is then parked in a
 * commit for as long as the test needs, however fast or slow the machine. */
void fault_vfs_hold_wal_writes(bool hold);
/* Writes waiting at that hold now. */
uint32_t fault_vfs_held_wal_writes(void);
/* From now on the chosen write lands torn, and then the process kills
 * itself (SIGKILL): for a child process the test forked. */
void fault_vfs_tear(enum tear tear);
/* Writes and syncs that failed since install. */
uint64_t fault_vfs_failures(void);
/* xSync calls since install. */
uint64_t fault_vfs_syncs(void);

#endif

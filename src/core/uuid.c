/* UUIDv7 text (uuid.h). */
#include "uuid.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

#include "hex.h"
#include "random.h"

/* Random bytes for this thread's ids, taken from getrandom(2) a block at a
 * time: one system call per 25 ids rather than one per id (the gateway
 * makes an id for every call). A child process forgets what its parent's
 * thread had left, so that the two never give the same bytes. */
#define RANDOM_BLOCK_BYTES 256

static _Thread_local uint8_t random_block[RANDOM_BLOCK_BYTES];
static _Thread_local size_t random_left;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void)
{
    random_left = 0; /* the forking thread's, the child's only thread */
}

static void fork_handler_register(void)
{
    (void)pthread_atfork(NULL, NULL, forget_in_child);
}

/* Copies length (at most RANDOM_BLOCK_BYTES) random bytes; 0, or -1 when
 * getrandom fails. */
static int random_take(uint8_t *out, size_t length)
{
    assert(length <= RANDOM_BLOCK_BYTES);
    pthread_once(&fork_handler_once, fork_handler_register);
    if (random_left < length) {
        if (random_fill(random_block, RANDOM_BLOCK_BYTES) != 0)
            return -1;
        random_left = RANDOM_BLOCK_BYTES;
    }
    uint8_t *from = random_block + RANDOM_BLOCK_BYTES - random_left;
    memcpy(out, from, length);
    memset(from, 0, length); /* each byte given once */
    random_left -= length;
    return 0;
}

int uuid_v7(int64_t unix_ms, char out[UUID_TEXT_SIZE])
{
    assert(unix_ms >= 0);
    uint8_t bytes[16];
    if (random_take(bytes + 6, 10) != 0)
        return -1;
    for (int i = 0; i < 6; i++)
        bytes[i] = (uint8_t)((uint64_t)unix_ms >> (8 * (5 - i)));
    bytes[6] = (uint8_t)(0x70 | (bytes[6] & 0x0f)); /* version 7 */
    bytes[8] = (uint8_t)(0x80 | (bytes[8] & 0x3f)); /* variant 10 */
    static const char hex[] = "0123456789abcdef";
    size_t length = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[length++] = '-';
        out[length++] = hex[bytes[i] >> 4];
        out[length++] = hex[bytes[i] & 15];
    }
    assert(length == UUID_TEXT_SIZE - 1);
    out[length] = '\0';
    return 0;
}

bool uuid_v7_unix_ms(const char *text, size_t length, int64_t *unix_ms)
{
    if (length != UUID_TEXT_SIZE - 1)
        return false;
    uint8_t bytes[16];
    size_t at = 0;
    for (int i = 0; i < 16; i++) {
        if ((i == 4 || i == 6 || i == 8 || i == 10) && text[at++] != '-')
            return false;
        int high = hex_digit_value(text[at]), low = hex_digit_value(text[at + 1]);
        if (high < 0 || low < 0)
            return false;
        bytes[i] = (uint8_t)(high << 4 | low);
        at += 2;
    }
    if ((bytes[6] & 0xf0) != 0x70 || (bytes[8] & 0xc0) != 0x80)
        return false;
    uint64_t ms = 0;
    for (int i = 0; i < 6; i++)
        ms = ms << 8 | bytes[i];
    *unix_ms = (int64_t)ms;
    return true;
}

/* TigerBeetle's checksum: an AEGIS-128L MAC with a zero key and nonce and a
 * 128-bit tag, the data absorbed as associated data
 * (docs/tigerbeetle-protocol.md "Checksum"). Every header and body on the
 * wire carries one; a wrong one makes the server close the connection
 * without a word. */
#ifndef LLMLIMIT_TB_CHECKSUM_H
#define LLMLIMIT_TB_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tbc_types.h"

/* The 16 tag bytes, as stored in a header (a little-endian u128). Uses
 * AES-NI when the CPU has it, else a portable AES round. */
tbc_u128 tbc_checksum(const void *data, size_t size);

/* The two implementations, exposed so tests can hold them to each other.
 * tbc_checksum_hardware asserts the CPU has AES-NI. */
tbc_u128 tbc_checksum_portable(const void *data, size_t size);
tbc_u128 tbc_checksum_hardware(const void *data, size_t size);
bool tbc_checksum_hardware_available(void);

#endif

/* AEGIS-128L as a MAC (key = nonce = 0, 128-bit tag), twice: with AES-NI
 * (_mm_aesenc_si128 is exactly the AESRound AEGIS needs) and with a
 * portable AES round for CPUs without it. Both follow the CFRG draft:
 * init, absorb 32-byte blocks as associated data, finalize with the
 * length, tag = S0 ^ S1 ^ ... ^ S6. */
#include "tbc_checksum.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TBC_HAVE_AESNI 1
#endif

/* The AEGIS constants C0 (Fibonacci bytes) and C1. */
static const uint8_t aegis_c0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                                     0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
static const uint8_t aegis_c1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                                     0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

#define AEGIS_BLOCK 32
#define AEGIS_INIT_ROUNDS 10
#define AEGIS_FINAL_ROUNDS 7

/* ---- portable: one AES round on 16-byte blocks ---- */

static uint8_t aes_sbox[256];
static pthread_once_t aes_sbox_once = PTHREAD_ONCE_INIT;

static uint8_t gf_multiply(uint8_t a, uint8_t b)
{
    uint8_t product = 0;
    for (int bit = 0; bit < 8; bit++) {
        if (b & 1)
            product ^= a;
        uint8_t high = a & 0x80;
        a = (uint8_t)(a << 1);
        if (high)
            a ^= 0x1b;
        b >>= 1;
    }
    return product;
}

static uint8_t rotate_left8(uint8_t x, int n)
{
    return (uint8_t)((x << n) | (x >> (8 - n)));
}

/* The S-box from its definition (inverse in GF(2^8), then the affine map),
 * so there is no 256-entry table to mistype. */
static void aes_sbox_init(void)
{
    for (int x = 0; x < 256; x++) {
        uint8_t inverse = 0;
        if (x != 0) {
            /* x^254 = x^-1 */
            uint8_t power = (uint8_t)x, result = 1;
            for (int e = 254; e > 0; e >>= 1) {
                if (e & 1)
                    result = gf_multiply(result, power);
                power = gf_multiply(power, power);
            }
            inverse = result;
        }
        aes_sbox[x] = (uint8_t)(inverse ^ rotate_left8(inverse, 1) ^ rotate_left8(inverse, 2) ^
                                rotate_left8(inverse, 3) ^ rotate_left8(inverse, 4) ^ 0x63);
    }
}

static uint8_t xtime(uint8_t a)
{
    return (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
}

/* out = MixColumns(ShiftRows(SubBytes(in))) ^ key; in and out may alias. */
static void aes_round(uint8_t out[16], const uint8_t in[16], const uint8_t key[16])
{
    uint8_t shifted[16];
    for (int column = 0; column < 4; column++) {
        for (int row = 0; row < 4; row++)
            shifted[row + 4 * column] = aes_sbox[in[row + 4 * ((column + row) % 4)]];
    }
    for (int column = 0; column < 4; column++) {
        const uint8_t *a = &shifted[4 * column];
        uint8_t all = (uint8_t)(a[0] ^ a[1] ^ a[2] ^ a[3]);
        for (int row = 0; row < 4; row++) {
            /* 2*a[r] ^ 3*a[r+1] ^ a[r+2] ^ a[r+3] */
            uint8_t mixed = (uint8_t)(a[row] ^ all ^ xtime((uint8_t)(a[row] ^ a[(row + 1) % 4])));
            out[row + 4 * column] = (uint8_t)(mixed ^ key[row + 4 * column]);
        }
    }
}

static void xor16(uint8_t out[16], const uint8_t a[16], const uint8_t b[16])
{
    for (int i = 0; i < 16; i++)
        out[i] = (uint8_t)(a[i] ^ b[i]);
}

struct aegis_portable {
    uint8_t s[8][16];
};

static void portable_update(struct aegis_portable *st, const uint8_t m0[16], const uint8_t m1[16])
{
    uint8_t next[8][16];
    aes_round(next[0], st->s[7], st->s[0]);
    for (int i = 1; i < 8; i++)
        aes_round(next[i], st->s[i - 1], st->s[i]);
    xor16(next[0], next[0], m0);
    xor16(next[4], next[4], m1);
    memcpy(st->s, next, sizeof next);
}

static void length_block(uint8_t block[16], size_t size)
{
    uint64_t bits = (uint64_t)size * 8;
    memset(block, 0, 16);
    for (int i = 0; i < 8; i++)
        block[i] = (uint8_t)(bits >> (8 * i));
}

tbc_u128 tbc_checksum_portable(const void *data, size_t size)
{
    pthread_once(&aes_sbox_once, aes_sbox_init);
    static const uint8_t zero[16];
    struct aegis_portable st;
    memcpy(st.s[0], zero, 16);
    memcpy(st.s[1], aegis_c1, 16);
    memcpy(st.s[2], aegis_c0, 16);
    memcpy(st.s[3], aegis_c1, 16);
    memcpy(st.s[4], zero, 16);
    memcpy(st.s[5], aegis_c0, 16);
    memcpy(st.s[6], aegis_c1, 16);
    memcpy(st.s[7], aegis_c0, 16);
    for (int i = 0; i < AEGIS_INIT_ROUNDS; i++)
        portable_update(&st, zero, zero);

    const uint8_t *bytes = data;
    size_t offset = 0;
    for (; offset + AEGIS_BLOCK <= size; offset += AEGIS_BLOCK)
        portable_update(&st, bytes + offset, bytes + offset + 16);
    if (offset < size) {
        uint8_t last[AEGIS_BLOCK] = {0};
        memcpy(last, bytes + offset, size - offset);
        portable_update(&st, last, last + 16);
    }

    uint8_t t[16];
    length_block(t, size);
    xor16(t, t, st.s[2]);
    for (int i = 0; i < AEGIS_FINAL_ROUNDS; i++)
        portable_update(&st, t, t);

    uint8_t tag[16];
    memcpy(tag, st.s[0], 16);
    for (int i = 1; i < 7; i++)
        xor16(tag, tag, st.s[i]);
    tbc_u128 result;
    memcpy(&result, tag, 16);
    return result;
}

/* ---- AES-NI ---- */

#ifdef TBC_HAVE_AESNI

#define AESNI __attribute__((target("aes,sse2")))

struct aegis_hardware {
    __m128i s[8];
};

AESNI static inline void hardware_update(struct aegis_hardware *st, __m128i m0, __m128i m1)
{
    __m128i s7 = st->s[7];
    st->s[7] = _mm_aesenc_si128(st->s[6], s7);
    st->s[6] = _mm_aesenc_si128(st->s[5], st->s[6]);
    st->s[5] = _mm_aesenc_si128(st->s[4], st->s[5]);
    st->s[4] = _mm_xor_si128(_mm_aesenc_si128(st->s[3], st->s[4]), m1);
    st->s[3] = _mm_aesenc_si128(st->s[2], st->s[3]);
    st->s[2] = _mm_aesenc_si128(st->s[1], st->s[2]);
    st->s[1] = _mm_aesenc_si128(st->s[0], st->s[1]);
    st->s[0] = _mm_xor_si128(_mm_aesenc_si128(s7, st->s[0]), m0);
}

AESNI static tbc_u128 checksum_aesni(const void *data, size_t size)
{
    const __m128i c0 = _mm_loadu_si128((const __m128i *)aegis_c0);
    const __m128i c1 = _mm_loadu_si128((const __m128i *)aegis_c1);
    const __m128i zero = _mm_setzero_si128();
    struct aegis_hardware st = {{zero, c1, c0, c1, zero, c0, c1, c0}};
    for (int i = 0; i < AEGIS_INIT_ROUNDS; i++)
        hardware_update(&st, zero, zero);

    const uint8_t *bytes = data;
    size_t offset = 0;
    for (; offset + AEGIS_BLOCK <= size; offset += AEGIS_BLOCK) {
        hardware_update(&st, _mm_loadu_si128((const __m128i *)(bytes + offset)),
                        _mm_loadu_si128((const __m128i *)(bytes + offset + 16)));
    }
    if (offset < size) {
        uint8_t last[AEGIS_BLOCK] = {0};
        memcpy(last, bytes + offset, size - offset);
        hardware_update(&st, _mm_loadu_si128((const __m128i *)last),
                        _mm_loadu_si128((const __m128i *)(last + 16)));
    }

    uint8_t length[16];
    length_block(length, size);
    __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *)length), st.s[2]);
    for (int i = 0; i < AEGIS_FINAL_ROUNDS; i++)
        hardware_update(&st, t, t);

    __m128i tag = st.s[0];
    for (int i = 1; i < 7; i++)
        tag = _mm_xor_si128(tag, st.s[i]);
    tbc_u128 result;
    _mm_storeu_si128((__m128i *)&result, tag);
    return result;
}

bool tbc_checksum_hardware_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes") != 0;
}

#else

static tbc_u128 checksum_aesni(const void *data, size_t size)
{
    (void)data;
    (void)size;
    assert(!"AES-NI is x86 only");
    return tbc_u128_make(0, 0);
}

bool tbc_checksum_hardware_available(void)
{
    return false;
}

#endif

tbc_u128 tbc_checksum_hardware(const void *data, size_t size)
{
    assert(tbc_checksum_hardware_available());
    return checksum_aesni(data, size);
}

static bool use_hardware;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose_implementation(void)
{
    use_hardware = tbc_checksum_hardware_available();
}

tbc_u128 tbc_checksum(const void *data, size_t size)
{
    pthread_once(&choose_once, choose_implementation);
    return use_hardware ? checksum_aesni(data, size) : tbc_checksum_portable(data, size);
}

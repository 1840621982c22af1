/* HMAC-SHA256 (util/sha256.h) against the test vectors of RFC 4231: a
 * short key, a key shorter than the hash, data longer than a block, and a
 * key longer than a block (hashed first). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "util/sha256.h"

static void hex_of(const uint8_t *bytes, size_t length, char *out)
{
    for (size_t i = 0; i < length; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

static void check_mac(const uint8_t *key, size_t key_length, const char *data, size_t length,
                      const char *expected)
{
    uint8_t mac[SHA256_DIGEST_BYTES];
    char hex[2 * SHA256_DIGEST_BYTES + 1];
    REQUIRE(hmac_sha256(key, key_length, data, length, mac) == 0);
    hex_of(mac, sizeof mac, hex);
    CHECK_STR(hex, expected);
}

static void rfc_4231_vectors(void)
{
    uint8_t key[131];
    memset(key, 0x0b, 20); /* test case 1 */
    check_mac(key, 20, "Hi There", 8,
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_mac((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28, /* case 2 */
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, 20); /* test case 3: 50 bytes of 0xdd */
    char data[50];
    memset(data, 0xdd, sizeof data);
    check_mac(key, 20, data, sizeof data,
              "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    memset(key, 0xaa, sizeof key); /* test case 6: a key longer than the block */
    static const char large[] = "Test Using Larger Than Block-Size Key - Hash Key First";
    check_mac(key, sizeof key, large, strlen(large),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void an_empty_key_and_body_are_an_hmac_too(void)
{
    /* HMAC-SHA256("", "") as Python's hmac module gives it. */
    check_mac(NULL, 0, NULL, 0, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

int main(void)
{
    RUN(rfc_4231_vectors, "HMAC-SHA256 gives RFC 4231's test cases 1, 2, 3 and 6");
    RUN(an_empty_key_and_body_are_an_hmac_too, "an empty key and body give the known HMAC");
    return test_summary();
}

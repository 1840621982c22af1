/* Unit tests of virtual key secrets (src/gateway/gw_secret.c): SHA-256 and
 * base64url against published test vectors, strict hex decoding, the
 * shape of new secrets, and a provider key starred out of relayed bytes. */
#include <string.h>

#include "gateway/gw_secret.h"
#include "test.h"

static void sha256_matches_the_standard_vectors(void)
{
    uint8_t digest[GW_SHA256_BYTES];
    char hex[GW_SHA256_HEX_SIZE];
    REQUIRE(sha256_digest("abc", 3, digest) == 0);
    gw_hex_encode(digest, sizeof digest, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    REQUIRE(sha256_digest("", 0, digest) == 0);
    gw_hex_encode(digest, sizeof digest, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void hex_decoding_is_strict(void)
{
    uint8_t out[2] = {0, 0};
    CHECK_EQ_I64(gw_hex_decode("0aff", 4, out, 2), 0);
    CHECK_EQ_U64(out[0], 0x0a);
    CHECK_EQ_U64(out[1], 0xff);
    CHECK_EQ_I64(gw_hex_decode("0aFF", 4, out, 2), -1); /* lower case only */
    CHECK_EQ_I64(gw_hex_decode("0af", 3, out, 2), -1);
    CHECK_EQ_I64(gw_hex_decode("0aff00", 6, out, 2), -1);
    CHECK_EQ_I64(gw_hex_decode("0agf", 4, out, 2), -1);
    CHECK_EQ_I64(gw_hex_decode("0a f", 4, out, 2), -1);
    char hex[5];
    gw_hex_encode(out, 2, hex);
    CHECK_STR(hex, "0aff");
}

static void base64url_matches_the_standard_vectors(void)
{
    static const struct {
        const char *in, *out;
    } vectors[] = {{"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
                   {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
    char out[16];
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        size_t n = gw_base64url_encode((const uint8_t *)vectors[i].in, strlen(vectors[i].in), out);
        CHECK_STR(out, vectors[i].out);
        CHECK_EQ_U64(n, strlen(vectors[i].out));
    }
    const uint8_t url_only[] = {0xfb, 0xff}; /* "+/8=" in the standard alphabet */
    gw_base64url_encode(url_only, sizeof url_only, out);
    CHECK_STR(out, "-_8");
}

static void new_secrets_have_their_shape(void)
{
    char a[GW_SECRET_SIZE], b[GW_SECRET_SIZE];
    char a_hex[GW_SHA256_HEX_SIZE], b_hex[GW_SHA256_HEX_SIZE];
    REQUIRE(gw_secret_new(a, a_hex) == 0);
    REQUIRE(gw_secret_new(b, b_hex) == 0);
    CHECK_EQ_U64(strlen(a), 47);
    CHECK(strncmp(a, "llk-", 4) == 0);
    CHECK(strspn(a + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == 43);
    CHECK(strcmp(a, b) != 0);
    CHECK(strcmp(a_hex, b_hex) != 0);
    uint8_t digest[GW_SHA256_BYTES];
    char hex[GW_SHA256_HEX_SIZE];
    REQUIRE(sha256_digest(a, strlen(a), digest) == 0);
    gw_hex_encode(digest, sizeof digest, hex);
    CHECK_STR(a_hex, hex);
}

static void a_secret_is_starred_out_wherever_it_is(void)
{
    const char *key = "sk-proj-0123456789";
    char text[] = "sk-proj-0123456789 and sk-proj-0123456789sk-proj-0123456789, sk-proj-012345678";
    CHECK_EQ_U64(gw_secret_redact(text, strlen(text), key), 3);
    CHECK_STR(text,
              "****************** and ************************************, sk-proj-012345678");
    /* Only bytes[0..length) are looked at: a key cut by the end stays. */
    char cut[] = "x sk-proj-0123456789";
    CHECK_EQ_U64(gw_secret_redact(cut, strlen(cut) - 1, key), 0);
    CHECK_STR(cut, "x sk-proj-0123456789");
    /* No key, or one too short to tell from ordinary text: nothing. */
    char plain[] = "a short k in it";
    CHECK_EQ_U64(gw_secret_redact(plain, strlen(plain), NULL), 0);
    CHECK_EQ_U64(gw_secret_redact(plain, strlen(plain), "k"), 0);
    CHECK_EQ_U64(gw_secret_redact(plain, strlen(plain), "1234567"), 0);
    CHECK_STR(plain, "a short k in it");
    CHECK_EQ_U64(gw_secret_redact(plain, 0, key), 0);
}

int main(void)
{
    RUN(sha256_matches_the_standard_vectors, "SHA-256 gives the standard digests");
    RUN(hex_decoding_is_strict, "hex decodes 2n lower-case digits only");
    RUN(base64url_matches_the_standard_vectors, "base64url gives RFC 4648 results, no padding");
    RUN(new_secrets_have_their_shape, "new secrets: llk- and 43 base64url, distinct, hashed");
    RUN(a_secret_is_starred_out_wherever_it_is,
        "every whole occurrence of a provider key is starred out; none shorter than 8");
    return test_summary();
}

/* See sha256.h. */
#include "sha256.h"

#include <assert.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>

static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;
static pthread_key_t sha256_key; /* the thread's EVP_MD_CTX, freed as it ends */

static void sha256_context_free(void *context)
{
    EVP_MD_CTX_free(context);
}

static void sha256_fetch(void)
{
    if (pthread_key_create(&sha256_key, sha256_context_free) == 0)
        sha256_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
}

int sha256_digest(const void *data, size_t length, uint8_t digest[SHA256_DIGEST_BYTES])
{
    assert(data != NULL || length == 0);
    assert(digest != NULL);
    pthread_once(&sha256_once, sha256_fetch);
    if (sha256_md == NULL)
        return -1;
    EVP_MD_CTX *context = pthread_getspecific(sha256_key);
    if (context == NULL) {
        context = EVP_MD_CTX_new();
        if (context == NULL)
            return -1;
        if (pthread_setspecific(sha256_key, context) != 0) {
            EVP_MD_CTX_free(context);
            return -1;
        }
    }
    unsigned int digest_length = 0;
    if (EVP_DigestInit_ex2(context, sha256_md, NULL) != 1 ||
        EVP_DigestUpdate(context, data, length) != 1 ||
        EVP_DigestFinal_ex(context, digest, &digest_length) != 1)
        return -1;
    assert(digest_length == SHA256_DIGEST_BYTES);
    return 0;
}

/* hmac_sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for
 * the data plane's connection proof (data_auth.h). Self-contained (no
 * crypto library is linked); checked against the FIPS and RFC 4231 test
 * vectors by tests/unit/test_data_auth.c. Owns nothing. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32
#define SHA256_BLOCK 64

struct sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[SHA256_BLOCK];
    size_t used;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_BYTES]);

/* HMAC-SHA-256 of the concatenation of n parts (parts[i], lens[i]). */
void hmac_sha256(const uint8_t *key, size_t key_len, const void *const *parts, const size_t *lens,
                 size_t n, uint8_t out[SHA256_BYTES]);

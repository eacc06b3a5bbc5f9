/* data_auth.c — the data connection's proof of membership (see data_auth.h). */
#include "peer/data_auth.h"

#include "peer/hmac_sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

void data_auth_init(struct data_auth *a, bool required)
{
    memset(a, 0, sizeof *a);
    a->state = required ? DATA_AUTH_PENDING : DATA_AUTH_OFF;
}

/* Constant time: the time taken says nothing about where bytes differ. */
static bool same_bytes(const uint8_t *x, const uint8_t *y, size_t n)
{
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

int data_auth_set_secret(struct data_auth *a, const void *secret, size_t len, char *err,
                         size_t errlen)
{
    if (len != DATA_AUTH_SECRET_BYTES) {
        snprintf(err, errlen, "the data secret must have %d bytes, not %zu", DATA_AUTH_SECRET_BYTES,
                 len);
        return -1;
    }
    if (a->state == DATA_AUTH_READY && !same_bytes(a->secret, secret, len)) {
        snprintf(err, errlen, "the data secret cannot change");
        return -1;
    }
    memcpy(a->secret, secret, len);
    a->state = DATA_AUTH_READY;
    return 0;
}

bool data_auth_required(const struct data_auth *a)
{
    return a->state != DATA_AUTH_OFF;
}

static void data_auth_mac(const struct data_auth *a, const uint8_t *nonce, const char *destination,
                          uint8_t mac[SHA256_BYTES])
{
    const void *parts[] = {DATA_AUTH_MAGIC, nonce, destination};
    size_t lens[] = {DATA_AUTH_MAGIC_BYTES, DATA_AUTH_NONCE_BYTES, strlen(destination)};
    hmac_sha256(a->secret, sizeof a->secret, parts, lens, 3, mac);
}

int data_auth_hello(const struct data_auth *a, const char *destination,
                    uint8_t out[DATA_AUTH_HELLO_BYTES], char *err, size_t errlen)
{
    if (a->state == DATA_AUTH_OFF) return 0;
    if (a->state == DATA_AUTH_PENDING) {
        snprintf(err, errlen, "no data secret yet (the controller has not sent the address book)");
        return -1;
    }
    uint8_t *nonce = out + DATA_AUTH_MAGIC_BYTES;
    if (getrandom(nonce, DATA_AUTH_NONCE_BYTES, 0) != DATA_AUTH_NONCE_BYTES) {
        snprintf(err, errlen, "getrandom: %s", strerror(errno));
        return -1;
    }
    memcpy(out, DATA_AUTH_MAGIC, DATA_AUTH_MAGIC_BYTES);
    data_auth_mac(a, nonce, destination, out + DATA_AUTH_MAGIC_BYTES + DATA_AUTH_NONCE_BYTES);
    return DATA_AUTH_HELLO_BYTES;
}

int data_auth_check(const struct data_auth *a, const char *destination,
                    const uint8_t hello[DATA_AUTH_HELLO_BYTES], char *err, size_t errlen)
{
    uint8_t mac[SHA256_BYTES];
    if (a->state != DATA_AUTH_READY) {
        snprintf(err, errlen, "no data secret to check against");
        return -1;
    }
    if (memcmp(hello, DATA_AUTH_MAGIC, DATA_AUTH_MAGIC_BYTES) != 0) {
        snprintf(err, errlen, "the connection did not open with a hiernet hello");
        return -1;
    }
    data_auth_mac(a, hello + DATA_AUTH_MAGIC_BYTES, destination, mac);
    if (!same_bytes(mac, hello + DATA_AUTH_MAGIC_BYTES + DATA_AUTH_NONCE_BYTES, sizeof mac)) {
        snprintf(err, errlen, "its hello does not prove this network's secret");
        return -1;
    }
    return 0;
}

/* fuzz_auth.c — libFuzzer target for the data plane's hello check
 * (peer/data_auth.c), the first bytes a peer reads from any connection to
 * its data port, before a single frame: the input's first
 * DATA_AUTH_HELLO_BYTES are the hello, the rest the destination the
 * connection reached. A hello made with the secret for that destination
 * must pass; the input's own hello must fail unless it is that very hello
 * (a forged MAC found by chance would be an authentication bypass); a
 * hello for another destination must fail. */
#include "peer/data_auth.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t fuzz_secret[DATA_AUTH_SECRET_BYTES] = "hiernet-fuzz-secret-32-bytes-abc";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t hello[DATA_AUTH_HELLO_BYTES], made[DATA_AUTH_HELLO_BYTES];
    char destination[128], err[256];
    if (size < sizeof hello || size - sizeof hello >= sizeof destination) return 0;
    memcpy(hello, data, sizeof hello);
    memcpy(destination, data + sizeof hello, size - sizeof hello);
    destination[size - sizeof hello] = '\0';

    struct data_auth auth;
    data_auth_init(&auth, true);
    if (data_auth_set_secret(&auth, fuzz_secret, sizeof fuzz_secret, err, sizeof err) < 0) abort();
    if (data_auth_hello(&auth, destination, made, err, sizeof err) != (int)sizeof made) abort();
    if (data_auth_check(&auth, destination, made, err, sizeof err) != 0) abort();
    /* The nonce is random: the fuzzer's hello can only pass by forging the MAC. */
    if (data_auth_check(&auth, destination, hello, err, sizeof err) == 0 &&
        memcmp(hello, made, sizeof hello) != 0)
        abort();
    char other[sizeof destination + 1];
    memcpy(other, destination, strlen(destination) + 1);
    strcat(other, "x");
    if (data_auth_check(&auth, other, made, err, sizeof err) == 0) abort();
    return 0;
}

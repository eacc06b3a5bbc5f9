/* data_auth.h — a data connection proves it belongs to the network before
 * any frame of it is read.
 *
 * On the none backend every peer listens on a host loopback address, where
 * any local user can connect; on the emulated backends a process that
 * enters a node's namespace can. A connection that cannot prove itself must
 * not be able to store a tensor in a peer. So each network has a secret
 * (32 random bytes from the controller, handed to every peer over its
 * control channel with the address book: never on a command line or in the
 * environment, where other users can read it), and every outgoing data
 * connection opens with a hello:
 *
 *   "HNAUTH01" | nonce (16 random bytes) | HMAC-SHA-256(secret,
 *       "HNAUTH01" | nonce | the destination "addr:port")
 *
 * The receiver recomputes the MAC for the address the connection reached
 * (its own end of it) and compares in constant time; a mismatch closes the
 * connection, logged, before a single frame byte is parsed. The secret
 * itself never crosses the data plane, so a local user who manages to
 * listen on a dead peer's address learns nothing that would let it store a
 * tensor anywhere, and a hello it receives is valid for its own address
 * only. No extra round trip: the hello goes out with the first frame.
 *
 * States: OFF (no secret will come: unit tests, a peer started by hand; no
 * hello is sent or expected), PENDING (required, the secret has not
 * arrived yet: incoming connections wait, sends fail) and READY.
 * Owns only its copy of the secret. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DATA_AUTH_SECRET_BYTES 32
#define DATA_AUTH_MAGIC "HNAUTH01"
#define DATA_AUTH_MAGIC_BYTES 8
#define DATA_AUTH_NONCE_BYTES 16
#define DATA_AUTH_HELLO_BYTES (DATA_AUTH_MAGIC_BYTES + DATA_AUTH_NONCE_BYTES + 32)
/* An incoming connection has this long to prove itself. */
#define DATA_AUTH_TIMEOUT_S 10.0

enum data_auth_state { DATA_AUTH_OFF, DATA_AUTH_PENDING, DATA_AUTH_READY };

struct data_auth {
    enum data_auth_state state;
    uint8_t secret[DATA_AUTH_SECRET_BYTES];
};

/* OFF, or PENDING when required. */
void data_auth_init(struct data_auth *a, bool required);
/* Takes the network's secret (exactly DATA_AUTH_SECRET_BYTES); READY. A
 * second, different secret is refused: one network, one secret. */
int data_auth_set_secret(struct data_auth *a, const void *secret, size_t len, char *err,
                         size_t errlen);
/* Incoming connections must open with a hello (PENDING or READY). */
bool data_auth_required(const struct data_auth *a);
/* The hello for a connection to `destination` ("addr:port"): its length
 * (0 when OFF), or -1 with err when no secret has arrived yet. */
int data_auth_hello(const struct data_auth *a, const char *destination,
                    uint8_t out[DATA_AUTH_HELLO_BYTES], char *err, size_t errlen);
/* Checks a received hello against `destination`, our end of the
 * connection. 0 when it proves the network, -1 with err. READY only. */
int data_auth_check(const struct data_auth *a, const char *destination,
                    const uint8_t hello[DATA_AUTH_HELLO_BYTES], char *err, size_t errlen);

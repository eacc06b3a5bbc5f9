/* protocol.h — MessagePack-RPC codec of the control channel.
 *
 * Shared by the controller, the peer and linkd. Messages are
 *   request      [0, msgid, method, params]
 *   response     [1, msgid, error, result]
 *   notification [2, method, params]
 * with params/result msgpack maps and error nil, a string, or a map (a
 * structured error: an agent's build failure, proto/agent_wire.h; its
 * "message" entry is the line for a person, proto_error_text).
 *
 * The reader owns its unpacker; a decoded proto_msg points into it and is
 * valid until the next proto_reader_next() call. Encoding writes into a
 * caller-owned msgpack_packer. Nothing here allocates per message beyond what
 * msgpack-c's zone does. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Control messages are small (read{} returns at most 65536 floats); anything
 * larger is a broken or hostile stream. */
#define PROTO_MAX_MESSAGE (4u << 20)

enum proto_kind { PROTO_REQUEST = 0, PROTO_RESPONSE = 1, PROTO_NOTIFY = 2 };

struct proto_msg {
    enum proto_kind kind;
    uint32_t msgid;     /* request, response */
    const char *method; /* request, notification; not NUL-terminated, NULL if empty */
    uint32_t method_len;
    const msgpack_object *params; /* request, notification: a map */
    const msgpack_object *error;  /* response: nil or str */
    const msgpack_object *result; /* response: map (or nil when error is set) */
};

enum proto_next {
    PROTO_NEXT_MORE = 0,    /* need more bytes */
    PROTO_NEXT_MESSAGE = 1, /* *msg holds a well-formed message */
    PROTO_NEXT_INVALID = 2, /* a complete but malformed message; has_msgid tells whether
                               an error response can be sent to msg->msgid */
    PROTO_NEXT_FATAL = 3,   /* the stream is unusable (oversized, unparsable): close it */
};

struct proto_reader {
    msgpack_unpacker unpacker;
    msgpack_unpacked unpacked;
    size_t max_message;
    /* Framing scan of the message being received (see protocol.c): bytes of it
     * walked so far and items still expected. */
    size_t scan_len;
    uint64_t scan_pending;
};

int proto_reader_init(struct proto_reader *r, size_t max_message);
void proto_reader_destroy(struct proto_reader *r);
/* Space to read() into: at least `want` bytes are reserved. NULL when out of memory. */
char *proto_reader_buffer(struct proto_reader *r, size_t want, size_t *avail);
void proto_reader_consumed(struct proto_reader *r, size_t n);
/* Decodes the next message. On INVALID and FATAL, err explains; on INVALID,
 * *has_msgid says whether msg->msgid identifies a request to answer. */
enum proto_next proto_reader_next(struct proto_reader *r, struct proto_msg *msg, bool *has_msgid,
                                  char *err, size_t errlen);

/* Whether bytes start with one whole MessagePack object whose headers claim
 * no more than the bytes there (the reader's framing scan, for a decoder
 * handed bytes rather than a stream: msgpack-c allocates what a header
 * claims before it checks it): 1 and *object_len, 0 when it is cut short
 * or claims more, -1 for a byte that starts no object. */
int proto_object_scan(const void *bytes, size_t len, size_t *object_len);

/* Encoding: each *_begin writes the envelope and opens the params/result map
 * of n_entries key/value pairs, which the caller then packs. Build maps
 * with proto/msgmap.h, whose msgmap_request/notify/response take the count
 * from the entries packed, instead of counting by hand. */
void proto_pack_request_begin(msgpack_packer *pk, uint32_t msgid, const char *method,
                              uint32_t n_entries);
void proto_pack_notify_begin(msgpack_packer *pk, const char *method, uint32_t n_entries);
/* Writes [2, "fatal", {error = message}] to fd, blocking: how a peer that is
 * about to exit before serving tells the controller why (its start error then
 * names the cause, not just the exit status). A failed write is ignored:
 * the exit status and stderr still tell. */
void proto_write_fatal(int fd, const char *message);
void proto_pack_response_begin(msgpack_packer *pk, uint32_t msgid, uint32_t n_entries);
/* A complete error response: [1, msgid, "message", nil]. */
void proto_pack_error(msgpack_packer *pk, uint32_t msgid, const char *message);

/* A response whose error is a map: writes [1, msgid, and the caller packs
 * the map, then the nil result (msgmap_error_response does all three). */
void proto_pack_error_map_begin(msgpack_packer *pk, uint32_t msgid);
/* The line of a response's error (nil, string or map) into buf: the
 * string, or the map's "message" entry. */
void proto_error_text(const msgpack_object *error, char *buf, size_t cap);

/* A string (never NULL), as msgpack str. */
void proto_pack_str(msgpack_packer *pk, const char *s);

/* Whether a request's method (len bytes, not NUL-terminated; msgpack-c
 * gives an empty one a NULL pointer) is `name`: the match of every typed
 * dispatch table (the peer's commands, linkd's methods). */
bool proto_method_is(const char *name, const char *method, uint32_t len);

/* Reading typed arguments out of a params map. Each getter returns 1 when the
 * key is present and well typed, 0 when absent, -1 on a wrong type (with
 * a->err set to e.g. "param 'alpha': expected number, got str"). */
struct proto_args {
    const msgpack_object *map;
    char err[256];
};
void proto_args_init(struct proto_args *a, const msgpack_object *map);
const msgpack_object *proto_args_get(const struct proto_args *a, const char *key);
/* *s is not NUL-terminated and may be NULL when *len is 0. */
int proto_arg_str(struct proto_args *a, const char *key, const char **s, uint32_t *len);
/* Copies a string argument into dst (NUL-terminated); too long is an error. */
int proto_arg_strcpy(struct proto_args *a, const char *key, char *dst, size_t cap);
int proto_arg_i64(struct proto_args *a, const char *key, int64_t *out);
int proto_arg_f64(struct proto_args *a, const char *key, double *out); /* int or float */
/* A non-negative integer (also an integral float, as Lua sends 3.0). */
int proto_arg_u64(struct proto_args *a, const char *key, uint64_t *out);
/* A msgpack bin; *bytes points into the message (NULL ok when *len is 0). */
int proto_arg_bin(struct proto_args *a, const char *key, const void **bytes, uint32_t *len);
int proto_arg_bool(struct proto_args *a, const char *key, bool *out);
/* range = {offset, count}: two non-negative integers. */
int proto_arg_range(struct proto_args *a, const char *key, uint64_t *offset, uint64_t *count);
/* Sets a->err to "param 'key': missing" and returns false: for required args. */
bool proto_args_missing(struct proto_args *a, const char *key);
/* Name of a msgpack type for messages ("str", "map", ...). */
const char *proto_type_name(msgpack_object_type t);

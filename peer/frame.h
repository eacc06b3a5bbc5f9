/* frame.h — the data-plane wire format between peers (docs/design-notes.md "Data connections prove
 * they belong to the network").
 *
 * Every message on a data connection is a frame:
 *
 *   offset size
 *   0      4    magic "HNd2" (format 2: version and flags; "HNd1" had neither)
 *   4      4    u32 big-endian length H of the header (1..FRAME_HEADER_MAX)
 *   8      H    msgpack map with string keys (below)
 *   8+H    B    payload: B = header "bytes", raw little-endian float32
 *
 * Header keys:
 *   type   "tensor" (dialer -> acceptor) or "ack" (acceptor -> dialer)
 *   id     u64 transfer id chosen by the sender; an ack repeats it
 *   tensor frames:
 *     from   str, the sending node's name
 *     to     str, optional: the node the sender means to reach; a peer with
 *            another name refuses the frame (a stale address cannot deliver a
 *            tensor to the wrong node)
 *     as     str, the tensor name on the receiver
 *     dtype  "f32"
 *     count  u64 elements in the payload
 *     bytes  u64 payload bytes, = 4 * count
 *     range  optional [offset, count]: the payload overwrites elements
 *            [offset, offset + count) of an existing tensor `as`
 *     version u64, the version of the sender's tensor in the snapshot
 *     pattern optional u64, 0 when absent: the sender's tensor is virtual
 *            (store.h) and the payload's last `pattern` elements are not its
 *            data but the pattern (zero bytes); the receiver gives what it
 *            stores the same shape (a whole tensor: a virtual one with
 *            count - pattern resident elements) and discards them unread
 *     flags  optional u64 bit set, 0 when absent: FRAME_FLAG_ADD adds the
 *            payload into the existing tensor `as` (its range, or the whole
 *            tensor, which must then have `count` elements) instead of
 *            replacing it; other bits are malformed
 *     incarnation optional u64, 0 when absent: how many times the sending
 *            node's peer was restarted before this one (the controller's
 *            count), so that an abort asked for an earlier incarnation
 *            spares a restarted node's new connections (dataplane_abort)
 *   ack frames: bytes = 0 and optional error (str): why the receiver did not
 *   store the tensor; absent when it did.
 *
 * A frame whose magic, header or sizes are wrong is malformed: the receiver
 * logs it and closes the connection. Decoding never allocates and walks only
 * the bytes it is given (the decoder sees untrusted input). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peer/store.h"
#include "proto/names.h"

#define FRAME_MAGIC "HNd2"
#define FRAME_PREFIX_BYTES 8
#define FRAME_HEADER_MAX 1024
#define FRAME_NODE_NAME_SIZE (HN_NODE_NAME_MAX + 1) /* proto/names.h */
#define FRAME_ERROR_SIZE 256

enum frame_type { FRAME_TENSOR = 1, FRAME_ACK = 2 };

#define FRAME_FLAG_ADD 1u
#define FRAME_FLAGS_KNOWN FRAME_FLAG_ADD

struct frame_header {
    enum frame_type type;
    uint64_t id;
    uint64_t count, bytes; /* elements and payload bytes; 0 for acks */
    bool has_range;
    uint64_t offset;      /* with has_range; the range's count is `count` */
    uint64_t version;     /* tensor frames */
    uint64_t flags;       /* tensor frames: FRAME_FLAG_* */
    uint64_t pattern;     /* tensor frames: trailing payload elements that are the pattern */
    uint64_t incarnation; /* tensor frames: the sender's (0 when absent) */
    char from[FRAME_NODE_NAME_SIZE];
    char to[FRAME_NODE_NAME_SIZE]; /* "" when absent */
    char as[STORE_NAME_MAX + 1];
    char error[FRAME_ERROR_SIZE]; /* acks: "" = stored */
};

/* Prefix and header of h into buf; returns the bytes written (prefix
 * included) or 0 when they do not fit cap (FRAME_PREFIX_BYTES +
 * FRAME_HEADER_MAX always suffices). */
size_t frame_encode(const struct frame_header *h, uint8_t *buf, size_t cap);

/* The header length announced by an 8-byte prefix, or 0 with err set when
 * the prefix is malformed. */
uint32_t frame_prefix_decode(const uint8_t *prefix, char *err, size_t errlen);

/* Decodes and checks a header of len bytes. 0, or -1 with err set. */
int frame_header_decode(const uint8_t *buf, size_t len, struct frame_header *h, char *err,
                        size_t errlen);

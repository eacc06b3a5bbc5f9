/* dataplane.h — the peer's TCP data plane (docs/design-notes.md "Data connections prove they belong
 * to the network").
 *
 * Provides: a listener on the node address (--addr, --data-port), one
 * outgoing connection per destination address, opened lazily on the first
 * send and kept, and the incoming connections other peers open. Frames are
 * those of frame.h. On an outgoing connection sends queue in FIFO order and
 * stream without blocking the loop (the payload is written straight from the
 * snapshot tensor); the receiver stores each tensor, tells the controller
 * (the on_recv hook, which the server turns into a `recv` notification) and
 * acks it on the same connection, and a send completes when its ack
 * arrives. Incoming connections are receive-only, so a pair of peers that
 * send both ways uses two connections, one per direction.
 *
 * Receiving (store.h rules): a whole tensor is read straight into a new
 * tensor that replaces any tensor of that name when complete (recently
 * replaced tensors of the same size are recycled, so repeated transfers do
 * not fault in fresh pages); its version becomes the sender's (unless the
 * name's own is higher). A range, and an add (FRAME_FLAG_ADD: the payload is
 * summed into the existing tensor, whole or a range of it), go through a
 * per-connection staging buffer into the existing tensor as a patch (in
 * place when nobody else holds the tensor, else copied on write in the same
 * pass) under the store's write lock, one version up. Every receive records
 * its arrival in the store in the same step. The loop thread does all I/O,
 * so the peer keeps receiving while its worker computes.
 *
 * Failure: a malformed frame, or one whose payload overruns what it
 * announced (the next header is then garbage), closes that connection with
 * a logged error; the peer lives on. A connection that fails fails its
 * pending sends with a message naming the destination. Deadlines: connect
 * DATAPLANE_CONNECT_TIMEOUT_S, and no progress for DATAPLANE_STALL_TIMEOUT_S
 * while a frame is in flight.
 *
 * Authentication (data_auth.h): with require_auth, every incoming
 * connection must open with a hello proving the network's secret
 * (dataplane_set_secret, from the `peers` command) before any of its
 * frames is read; until the secret arrives incoming connections wait and
 * sends fail. Outgoing connections open with their hello.
 *
 * Ownership: the data plane owns its sockets, connections, buffers and the
 * peer table; a struct dataplane_send belongs to the caller, which must keep
 * it alive until its done callback; the snapshot reference in it moves to
 * the data plane, which releases it before calling done. Loop thread only. */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/fifo.h"
#include "peer/frame.h"

struct store;
struct store_tensor;
struct dataplane;

#define DATAPLANE_CONNECT_TIMEOUT_S 30.0
#define DATAPLANE_STALL_TIMEOUT_S 300.0
/* Socket buffers: a 64 MB transfer must not be window-limited on a
 * 1 Gbit/s, 100 ms path (12.5 MB in flight). Set with SO_*BUFFORCE when
 * privileged, which also turns off autotuning. */
#define DATAPLANE_SOCKET_BUFFER (16 << 20)
#define DATAPLANE_DEFAULT_PORT 7000

struct dataplane_config {
    const char *node; /* this node's name: "from" of our frames */
    const char *addr; /* listen address; NULL: send only */
    int port;         /* listen port; 0: any free port (see dataplane_port) */
    struct store *store;
    bool require_auth; /* connections prove the network's secret (a peer of a run) */
};

struct dataplane_recv_info {
    const char *tensor, *from;
    uint64_t id, bytes;
    bool has_range, add;
    uint64_t offset, count;
    uint64_t version; /* of the tensor after the receive */
    double ms;        /* from the frame's first byte to the tensor stored */
};

struct dataplane_hooks {
    void (*on_recv)(void *ctx, const struct dataplane_recv_info *info);
    void (*log)(void *ctx, const char *line);
    void *ctx;
};

/* One send, owned by the caller. */
struct dataplane_send {
    /* Set by the caller. */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char to[FRAME_NODE_NAME_SIZE]; /* node name, or "" when sent by address */
    char as[STORE_NAME_MAX + 1];
    struct store_tensor *snapshot; /* a reference that moves to the data plane */
    const float *data;             /* count - pattern elements inside snapshot */
    uint64_t count;
    uint64_t pattern; /* trailing elements of a virtual tensor: zeros on the wire (store.h) */
    bool has_range;
    uint64_t offset;  /* where data lands in the receiver's tensor */
    bool add;         /* the receiver adds data into its tensor */
    uint64_t version; /* of the sender's tensor, for the receiver */
    /* error: NULL when the receiver stored the tensor. cancelled: the data
     * plane is going away and nobody wants an answer. */
    void (*done)(struct dataplane_send *send, const char *error, bool cancelled);
    /* Filled in by the data plane. */
    uint64_t id;    /* transfer id, as in the receiver's recv notification */
    uint64_t bytes; /* payload bytes */
    double ms;      /* from dataplane_send to the ack */
    /* Private to dataplane.c. */
    struct fifo_link link; /* in a connection's queue */
    double start_ms;
    size_t header_len, header_sent;
    uint64_t payload_sent;
    uint8_t header[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX];
};

struct dataplane_totals {
    uint64_t bytes_sent, bytes_received; /* on data connections, frames and acks */
    uint64_t transfers_sent, transfers_received;
    uint64_t connections; /* open now, both directions */
};

/* NULL (after logging why) when out of memory. A listener that cannot be set
 * up is logged and leaves the peer able to send only (dataplane_port 0): on
 * the none backend two runs may want one address. */
struct dataplane *dataplane_create(struct ev_loop *loop, const struct dataplane_config *cfg,
                                   const struct dataplane_hooks *hooks);
/* Closes every connection and cancels pending sends (done with cancelled). */
void dataplane_destroy(struct dataplane *dp);

/* The port the listener is bound to; 0 when not listening. */
int dataplane_port(const struct dataplane *dp);
void dataplane_get_totals(const struct dataplane *dp, struct dataplane_totals *totals);

/* Parses "A", "A:PORT", "[A6]:PORT" or a bare IPv6 address; a missing port
 * is default_port. 0, or -1 with err set. */
int dataplane_parse_addr(const char *text, int default_port, struct sockaddr_storage *addr,
                         socklen_t *len, char *err, size_t errlen);
/* "A:PORT" or "[A6]:PORT". */
void dataplane_format_addr(const struct sockaddr_storage *addr, char *buf, size_t len);

/* The network's secret (data_auth.h); connections waiting for it go on. */
int dataplane_set_secret(struct dataplane *dp, const void *secret, size_t len, char *err,
                         size_t errlen);

/* The peer table: node name -> data-plane address (the `peers` command). */
int dataplane_set_peer(struct dataplane *dp, const char *name, const struct sockaddr_storage *addr,
                       socklen_t len);
void dataplane_clear_peers(struct dataplane *dp);
size_t dataplane_peer_count(const struct dataplane *dp);
/* false when name is not in the table. */
bool dataplane_lookup(const struct dataplane *dp, const char *name, struct sockaddr_storage *addr,
                      socklen_t *len);

/* This peer's incarnation: how many times its node's peer was restarted
 * before it (the `peers` command), sent in its tensor frames (frame.h). */
void dataplane_set_incarnation(struct dataplane *dp, uint64_t incarnation);

/* dataplane_abort's `upto` when the abort concerns every incarnation. */
#define DATAPLANE_ALL_INCARNATIONS UINT64_MAX

/* A fault took node name away: resets the outgoing connection to it,
 * failing its pending sends with cause (what was on the way will never be
 * acknowledged; the next send reconnects), and closes the connections it
 * sends on here (a frame of theirs still on its way never lands). Only
 * those of its incarnations up to `upto`, the one the controller knew when
 * it asked: a restarted node that reconnects before the abort is processed
 * keeps its new connections. One known only by address so far (no frame
 * yet) closes at once with DATAPLANE_ALL_INCARNATIONS, else when its first
 * frame shows such an incarnation. The outgoing connection is reset
 * whatever the receiver's incarnation (nothing here tells it). Returns the
 * connections closed now. cause must be a static string (a connection
 * closed later keeps the pointer, not a copy). */
unsigned dataplane_abort(struct dataplane *dp, const char *name, uint64_t upto, const char *cause);

/* Queues a send; done runs later, or at once when it cannot start. */
void dataplane_send(struct dataplane *dp, struct dataplane_send *send);

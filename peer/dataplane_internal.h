/* dataplane_internal.h — what the data plane's files share (dataplane.c,
 * dataplane_fuse.c): its connection and data-plane structs and the helpers
 * that recycle received tensors. Not for users of the data plane, who see
 * dataplane.h only. */
#pragma once

#include <ev.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "peer/data_auth.h"
#include "peer/dataplane.h"
#include "peer/store.h"

/* Read buffer of a connection: headers, acks and small payloads. */
#define DP_RX_BUFFER (16u << 10)
/* Replaced tensors kept for reuse by the next receive of the same size. */
#define DP_SPARES 2
#define DP_PEER_BUCKETS 256

/* One address-book entry, sized to its name: every peer of a 1000-node
 * network holds 1000 of them, and at 400 bytes each (fixed name and
 * sockaddr_storage) their first-touch page faults were most of the peers'
 * CPU time at start. */
struct dp_peer {
    struct dp_peer *next;
    union {
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr;
    socklen_t len;
    char name[]; /* NUL-terminated */
};

enum dp_rx_state { RX_PREFIX, RX_HEADER, RX_PAYLOAD, RX_INSTALL, RX_AUTH };

struct dp_conn {
    struct dataplane *dp;
    struct dp_conn *prev, *next;  /* dp->conns */
    struct dp_conn *install_next; /* dp->installs, while RX_INSTALL */
    int fd;
    bool outgoing, connecting;
    struct sockaddr_storage addr; /* the other end */
    socklen_t addr_len;
    char where[160];                   /* "to t2 (10.0.0.2:7000)" / "from 10.0.0.1:4711" */
    char sender[FRAME_NODE_NAME_SIZE]; /* incoming: the `from` of its first frame; "" before */
    uint64_t sender_incarnation;       /* incoming: the incarnation of its first frame */
    /* Incoming, not named yet: an abort of node abort_name's incarnations up
     * to abort_upto came while it was known by address only; its first
     * frame says whether it is theirs (dataplane_abort), and if so it
     * closes with that abort's cause. */
    bool abort_marked;
    uint64_t abort_upto;
    char abort_name[FRAME_NODE_NAME_SIZE];
    /* the cause of the abort that closes it later: a static string
     * (dataplane_abort's callers pass constants), so no copy */
    const char *abort_cause;
    uint8_t hello[DATA_AUTH_HELLO_BYTES]; /* outgoing: proof of membership, sent first */
    size_t hello_len, hello_sent;
    ev_io read_watcher, write_watcher;
    ev_timer timer;       /* connect and stall deadlines */
    struct fifo queue;    /* outgoing: not completely written */
    struct fifo awaiting; /* outgoing: written, waiting for the ack */
    uint8_t *tx;          /* incoming: acks not yet written */
    size_t tx_len, tx_sent, tx_cap;
    enum dp_rx_state state;
    uint32_t header_len;
    struct frame_header hdr;  /* the frame being received */
    struct store_tensor *dst; /* whole-tensor destination */
    float *staging;           /* range and add destination, reused */
    uint64_t staging_cap;     /* elements */
    /* A whole add summed while it arrives (dp_fuse_begin): fuse_dst =
     * fuse_src + the payload's first `fused` elements. */
    struct store_tensor *fuse_src, *fuse_dst;
    uint64_t fused;
    uint8_t *payload;      /* where the payload goes; NULL: discarded */
    uint64_t payload_keep; /* bytes of it stored there; the rest (a virtual
                              tensor's pattern, a refused frame) is discarded */
    uint64_t payload_got;
    char refusal[FRAME_ERROR_SIZE]; /* why the frame is discarded, for its ack */
    uint64_t version_after;         /* of the tensor the frame was stored into */
    double frame_start_ms;
    size_t rx_start, rx_end;
    uint8_t rx[DP_RX_BUFFER];
};

struct dataplane {
    struct ev_loop *loop;
    struct store *store;
    struct dataplane_hooks hooks;
    char node[FRAME_NODE_NAME_SIZE];
    int listen_fd, port;
    ev_io accept_watcher;
    ev_timer accept_retry;
    ev_async install_ready; /* the write lock was released: retry `installs` */
    struct dp_conn *conns;
    struct dp_conn *installs; /* waiting for the write lock, oldest first */
    struct dp_peer *peers[DP_PEER_BUCKETS];
    size_t n_peers;
    struct store_tensor *spares[DP_SPARES];
    uint64_t next_id;
    uint64_t incarnation; /* this peer's, in its tensor frames (frame.h) */
    struct dataplane_totals totals;
    struct data_auth auth;
};

/* A tensor of count elements for a receive into `as`: a recycled one when
 * there is one of that size, else a new one. NULL when out of memory. */
struct store_tensor *dp_take_tensor(struct dataplane *dp, const char *as, uint64_t count,
                                    uint64_t resident);
/* Keeps a replaced tensor that nobody else holds, evicting the oldest. */
void dp_keep_spare(struct dataplane *dp, struct store_tensor *t);

/* Whole adds summed as they arrive (dataplane_fuse.c). */
/* A whole add is starting: sums it as it arrives when that is possible. */
void dp_fuse_begin(struct dp_conn *c);
/* Sums the elements of the payload that arrived since the last call. */
void dp_fuse_progress(struct dp_conn *c);
/* With the write lock held: the summed result replaces the target. 1 done,
 * 0 when the target changed meanwhile (fall back to the patch), -1 failed. */
int dp_fuse_commit(struct dp_conn *c);

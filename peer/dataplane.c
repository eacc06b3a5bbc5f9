/* dataplane.c — the peer's TCP data plane (see dataplane.h): listener, lazy
 * outgoing connections with FIFO send queues, the frame reader of both
 * directions, stores of received tensors, acks, deadlines. Whole adds summed
 * as they arrive are dataplane_fuse.c's. */
#include "peer/dataplane.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/container.h"
#include "peer/data_auth.h"
#include "peer/dataplane_internal.h"
#include "peer/store.h"

/* Bytes one read or write callback moves at most before it lets the loop
 * serve others (the control channel, other connections). */
#define DP_IO_BUDGET (8u << 20)
/* Payload bytes one sendmsg writes at most. The kernel copies them into
 * segments that the receiver copies out again soon after: in chunks this
 * small the segments are still in cache for that second copy (and the socket
 * lock is dropped often, so acks are processed meanwhile). A 256 MB send over
 * veth took half as long as with 8 MB calls; 64-128 KB and 1 MB and up were
 * slower again. Reads need no such cap: they copy what has arrived. */
#define DP_IO_CHUNK (256u << 10)
/* Where payload bytes nobody stores are read to, and the zero bytes a
 * virtual tensor's pattern is sent from (store.h): shared, never resident
 * beyond this size. Loop thread only; nobody reads what lands here. */
static uint8_t dp_discard[DP_IO_CHUNK];
static const uint8_t dp_zeros[DP_IO_CHUNK];
/* The same zeros as a file, so that a pattern goes out by sendfile: the
 * socket takes references to its pages instead of copying them, which
 * halves the host's work for a virtual tensor (32 workers of VGG16 move
 * 35 GB a step). -1: not made yet; -2: could not be made (sendmsg from
 * dp_zeros then). Loop thread only; lives as long as the process. */
static int dp_zero_fd = -1;
/* How long accepting pauses when the process is out of descriptors. */
#define DP_ACCEPT_RETRY_S 1.0

static void dp_log(const struct dataplane *dp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dp_log(const struct dataplane *dp, const char *fmt, ...)
{
    char line[768];
    int n = snprintf(line, sizeof line, "data plane: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (dp->hooks.log)
        dp->hooks.log(dp->hooks.ctx, line);
    else
        fprintf(stderr, "%s\n", line);
}

/* ---- addresses and the peer table ---- */

static int dp_parse_host(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
    memset(addr, 0, sizeof *addr);
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *len = sizeof *in4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof *in6;
        return 0;
    }
    return -1;
}

/* Splits text into host and port: "[v6]:p", "v4:p", or a bare address. */
static int dp_split_addr(const char *text, char *host, size_t cap, const char **port)
{
    const char *end, *colon = strrchr(text, ':');
    *port = NULL;
    if (text[0] == '[') {
        end = strchr(text, ']');
        if (!end || (end[1] && end[1] != ':')) return -1;
        text++;
        if (end[1]) *port = end + 2;
    } else if (colon && strchr(text, ':') == colon) { /* one colon: v4:port */
        end = colon;
        *port = colon + 1;
    } else {
        end = text + strlen(text);
    }
    if ((size_t)(end - text) >= cap) return -1;
    memcpy(host, text, (size_t)(end - text));
    host[end - text] = '\0';
    return 0;
}

int dataplane_parse_addr(const char *text, int default_port, struct sockaddr_storage *addr,
                         socklen_t *len, char *err, size_t errlen)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_text;
    long port = default_port;
    if (dp_split_addr(text, host, sizeof host, &port_text) == 0 && port_text) {
        char *end;
        errno = 0;
        port = strtol(port_text, &end, 10);
        if (errno || end == port_text || *end || port < 1 || port > 65535) port = -1;
    }
    if (port < 1 || port > 65535 || dp_parse_host(host, (int)port, addr, len) != 0) {
        snprintf(err, errlen, "'%s' is not an address (A, A:PORT or [A6]:PORT)", text);
        return -1;
    }
    return 0;
}

void dataplane_format_addr(const struct sockaddr_storage *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, ntohs(in4->sin_port));
    }
}

static struct dp_peer **dp_peer_slot(struct dataplane *dp, const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    struct dp_peer **slot = &dp->peers[h % DP_PEER_BUCKETS];
    while (*slot && strcmp((*slot)->name, name) != 0)
        slot = &(*slot)->next;
    return slot;
}

int dataplane_set_peer(struct dataplane *dp, const char *name, const struct sockaddr_storage *addr,
                       socklen_t len)
{
    size_t name_size = strlen(name) + 1;
    if (name_size > FRAME_NODE_NAME_SIZE || len > sizeof(struct sockaddr_in6)) return -1;
    struct dp_peer **slot = dp_peer_slot(dp, name);
    if (!*slot) {
        *slot = malloc(sizeof **slot + name_size);
        if (!*slot) return -1;
        (*slot)->next = NULL;
        memcpy((*slot)->name, name, name_size);
        dp->n_peers++;
    }
    memcpy(&(*slot)->addr, addr, len);
    (*slot)->len = len;
    return 0;
}

void dataplane_clear_peers(struct dataplane *dp)
{
    for (size_t i = 0; i < DP_PEER_BUCKETS; i++) {
        while (dp->peers[i]) {
            struct dp_peer *next = dp->peers[i]->next;
            free(dp->peers[i]);
            dp->peers[i] = next;
        }
    }
    dp->n_peers = 0;
}

size_t dataplane_peer_count(const struct dataplane *dp)
{
    return dp->n_peers;
}

bool dataplane_lookup(const struct dataplane *dp, const char *name, struct sockaddr_storage *addr,
                      socklen_t *len)
{
    struct dp_peer *p = *dp_peer_slot((struct dataplane *)dp, name);
    if (!p) return false;
    memset(addr, 0, sizeof *addr);
    memcpy(addr, &p->addr, p->len);
    *len = p->len;
    return true;
}

/* ---- queues, spares ---- */

static void dp_queue_push(struct fifo *q, struct dataplane_send *s)
{
    fifo_push(q, &s->link);
}

/* The oldest send, left queued; NULL when none. */
static struct dataplane_send *dp_queue_first(const struct fifo *q)
{
    struct fifo_link *link = fifo_first(q);
    return link ? container_of(link, struct dataplane_send, link) : NULL;
}

static struct dataplane_send *dp_queue_pop(struct fifo *q)
{
    struct dataplane_send *s = dp_queue_first(q);
    if (s) fifo_pop(q);
    return s;
}

/* A tensor of count elements for a receive into `as`: a recycled one when
 * there is one of that size, else a new one. NULL when out of memory. */
struct store_tensor *dp_take_tensor(struct dataplane *dp, const char *as, uint64_t count,
                                    uint64_t resident)
{
    for (int i = 0; i < DP_SPARES; i++) {
        struct store_tensor *t = dp->spares[i];
        if (t && t->size == count && t->resident == resident) {
            dp->spares[i] = NULL;
            store_tensor_rename(t, as);
            return t;
        }
    }
    return store_tensor_new_virtual(as, count, resident, false);
}

/* Keeps a replaced tensor that nobody else holds, evicting the oldest. */
void dp_keep_spare(struct dataplane *dp, struct store_tensor *t)
{
    if (!t || !store_tensor_sole(t) || t->size == 0) {
        store_tensor_release(t);
        return;
    }
    store_tensor_release(dp->spares[0]);
    memmove(dp->spares, dp->spares + 1, (DP_SPARES - 1) * sizeof *dp->spares);
    dp->spares[DP_SPARES - 1] = t;
}

/* ---- connections: life cycle ---- */

static void on_conn_readable(EV_P_ ev_io *w, int revents);
static void on_conn_writable(EV_P_ ev_io *w, int revents);
static void on_conn_timeout(EV_P_ ev_timer *w, int revents);

/* True when an unprivileged SO_SNDBUF/SO_RCVBUF can have `size` (the host's
 * net.core.{w,r}mem_max allow it), read once. Below it, a fixed buffer
 * would be smaller than what TCP's autotuning reaches alone. */
static bool dp_buffer_allowed(const char *sysctl_path, int size)
{
    FILE *f = fopen(sysctl_path, "re");
    long max = 0;
    if (f) {
        if (fscanf(f, "%ld", &max) != 1) max = 0;
        fclose(f);
    }
    return max >= size;
}

/* Sets the socket options every data connection gets. Buffer sizes must be
 * set before connect/listen: the window scale is fixed in the SYN. A peer
 * that gave up root (common/privdrop.h) cannot force them: it sets them when
 * the host allows that size and otherwise leaves them to autotuning.
 * Accepted connections inherit the listener's, set while still root. */
static void dp_socket_options(int fd)
{
    static int snd_ok = -1, rcv_ok = -1;
    int size = DATAPLANE_SOCKET_BUFFER, one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0) {
        if (snd_ok < 0) snd_ok = dp_buffer_allowed("/proc/sys/net/core/wmem_max", size);
        if (snd_ok) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0) {
        if (rcv_ok < 0) rcv_ok = dp_buffer_allowed("/proc/sys/net/core/rmem_max", size);
        if (rcv_ok) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    /* Acks are small and a send waits for them. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static struct dp_conn *dp_conn_new(struct dataplane *dp, int fd, bool outgoing,
                                   const struct sockaddr_storage *addr, socklen_t len)
{
    struct dp_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->dp = dp;
    c->fd = fd;
    c->outgoing = outgoing;
    c->addr = *addr;
    c->addr_len = len;
    ev_io_init(&c->read_watcher, on_conn_readable, fd, EV_READ);
    ev_io_init(&c->write_watcher, on_conn_writable, fd, EV_WRITE);
    ev_init(&c->timer, on_conn_timeout);
    c->next = dp->conns;
    if (dp->conns) dp->conns->prev = c;
    dp->conns = c;
    dp->totals.connections++;
    return c;
}

static void dp_install_remove(struct dataplane *dp, struct dp_conn *c)
{
    for (struct dp_conn **p = &dp->installs; *p; p = &(*p)->install_next) {
        if (*p == c) {
            *p = c->install_next;
            break;
        }
    }
    if (!dp->installs) ev_async_stop(dp->loop, &dp->install_ready);
}

/* Ends a send: the snapshot goes, then the owner hears of it. */
static void dp_send_finish(struct dataplane_send *s, const char *error, bool cancelled)
{
    store_tensor_release(s->snapshot);
    s->snapshot = NULL;
    s->ms = mono_ms() - s->start_ms;
    s->done(s, error, cancelled);
}

/* Fails (or cancels) every send of c. */
static void dp_conn_fail_sends(struct dp_conn *c, const char *cause, bool cancelled)
{
    struct fifo *queues[] = {&c->awaiting, &c->queue};
    char error[512];
    snprintf(error, sizeof error, "%s: %s", c->where, cause);
    for (int i = 0; i < 2; i++) {
        struct dataplane_send *s;
        while ((s = dp_queue_pop(queues[i])))
            dp_send_finish(s, error, cancelled);
    }
}

/* Stops the watchers, closes and frees c; its sends fail with cause. */
static void dp_conn_close(struct dp_conn *c, const char *cause, bool cancelled)
{
    struct dataplane *dp = c->dp;
    ev_io_stop(dp->loop, &c->read_watcher);
    ev_io_stop(dp->loop, &c->write_watcher);
    ev_timer_stop(dp->loop, &c->timer);
    if (c->state == RX_INSTALL) dp_install_remove(dp, c);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        dp->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    dp->totals.connections--;
    dp_conn_fail_sends(c, cause, cancelled);
    store_tensor_release(c->dst);
    store_tensor_release(c->fuse_src);
    store_tensor_release(c->fuse_dst);
    free(c->staging);
    free(c->tx);
    free(c);
}

/* Arms the deadline that fits c's state, from now: connecting, or a frame
 * in flight in either direction. Called on every bit of progress. */
static void dp_conn_arm_timer(struct dp_conn *c)
{
    /* The proof of membership has one deadline from the accept: trickled
     * bytes do not extend it. */
    if (c->state == RX_AUTH && !c->outgoing && ev_is_active(&c->timer)) return;
    bool busy = c->outgoing ? !fifo_empty(&c->queue) || !fifo_empty(&c->awaiting)
                            : c->state != RX_PREFIX || c->rx_end > c->rx_start;
    c->timer.repeat = c->connecting                         ? DATAPLANE_CONNECT_TIMEOUT_S
                      : c->state == RX_AUTH && !c->outgoing ? DATA_AUTH_TIMEOUT_S
                      : busy                                ? DATAPLANE_STALL_TIMEOUT_S
                                                            : 0.0;
    ev_timer_again(c->dp->loop, &c->timer); /* repeat 0 stops it */
}

static void on_conn_timeout(EV_P_ ev_timer *w, int revents)
{
    struct dp_conn *c = container_of(w, struct dp_conn, timer);
    char cause[96];
    if (c->connecting)
        snprintf(cause, sizeof cause, "connect timed out after %.0f s",
                 DATAPLANE_CONNECT_TIMEOUT_S);
    else if (c->state == RX_AUTH && !c->outgoing)
        snprintf(cause, sizeof cause, "no proof of membership within %.0f s", DATA_AUTH_TIMEOUT_S);
    else
        snprintf(cause, sizeof cause, "no progress for %.0f s", DATAPLANE_STALL_TIMEOUT_S);
    dp_log(c->dp, "connection %s: %s; closed", c->where, cause);
    dp_conn_close(c, cause, false);
}

/* ---- outgoing: connecting and writing ---- */

static struct dp_conn *dp_conn_find(struct dataplane *dp, const struct sockaddr_storage *addr,
                                    socklen_t len)
{
    for (struct dp_conn *c = dp->conns; c; c = c->next)
        if (c->outgoing && c->addr_len == len && memcmp(&c->addr, addr, len) == 0) return c;
    return NULL;
}

/* Same host address, whatever the ports. */
static bool dp_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* Is c a connection node `name` (at addr, when known) may send on? By the
 * sender its frames named; before its first header, by its address. The
 * latter finds only a connection that came from the node's own address:
 * not on a host with several interfaces, nor on backend none, whose
 * outgoing sockets are unbound and so come from 127.0.0.1 (the kernel's
 * source for any loopback address); those close once a frame names them. */
static bool dp_conn_from(const struct dp_conn *c, const char *name,
                         const struct sockaddr_storage *addr)
{
    if (c->outgoing) return false;
    if (c->sender[0]) return strcmp(c->sender, name) == 0;
    return addr && dp_same_host(&c->addr, addr);
}

/* Closes c with a reset (SO_LINGER 0): what its socket still holds is
 * dropped, not retransmitted once a partition heals. */
static void dp_conn_reset(struct dp_conn *c, const char *cause)
{
    struct linger now = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
    dp_conn_close(c, cause, false); /* the controller logged the fault that asked for it */
}

/* Both ways, for a transfer cut by a fault must never land after the abort
 * (an algorithm clears the arrivals, then goes on): the bytes a partition
 * held up arrive when it heals, seconds later, after the TCP backoff. The
 * outgoing connection is reset, so the kernel does not send what it holds;
 * the incoming ones close, so what is still on its way there finds no
 * socket. */
/* An incoming connection known by address only, of node `name`: whether
 * the abort closes it now; if not, its first frame decides (dp_abort_due)
 * and it then closes with this abort's cause. One already marked for
 * another node closes now, as with no incarnation. */
static bool dp_conn_mark_abort(struct dp_conn *c, const char *name, uint64_t upto,
                               const char *cause)
{
    if (upto == DATAPLANE_ALL_INCARNATIONS) return true;
    if (c->abort_marked && strcmp(c->abort_name, name) != 0) return true;
    /* the cause goes with the incarnations it covers: a later abort of
     * fewer leaves the one that will close it */
    if (!c->abort_marked || upto > c->abort_upto) {
        c->abort_upto = upto;
        c->abort_cause = cause;
    }
    c->abort_marked = true;
    snprintf(c->abort_name, sizeof c->abort_name, "%s", name);
    return false;
}

/* A marked connection's first frame came: is it of an aborted incarnation? */
static bool dp_abort_due(const struct dp_conn *c)
{
    return c->abort_marked && strcmp(c->sender, c->abort_name) == 0 &&
           c->sender_incarnation <= c->abort_upto;
}

unsigned dataplane_abort(struct dataplane *dp, const char *name, uint64_t upto, const char *cause)
{
    struct sockaddr_storage addr;
    socklen_t len;
    bool known = dataplane_lookup(dp, name, &addr, &len);
    unsigned closed = 0;
    struct dp_conn *out = known ? dp_conn_find(dp, &addr, len) : NULL;
    if (out) {
        dp_conn_reset(out, cause);
        closed++;
    }
    for (struct dp_conn *c = dp->conns, *next; c; c = next) {
        next = c->next;
        if (!dp_conn_from(c, name, known ? &addr : NULL)) continue;
        bool now =
            c->sender[0] ? c->sender_incarnation <= upto : dp_conn_mark_abort(c, name, upto, cause);
        if (!now) continue;
        dp_conn_reset(c, cause);
        closed++;
    }
    return closed;
}

void dataplane_set_incarnation(struct dataplane *dp, uint64_t incarnation)
{
    dp->incarnation = incarnation;
}

/* Opens a connection to the send's address. NULL with error set. */
static struct dp_conn *dp_conn_open(struct dataplane *dp, const struct dataplane_send *s,
                                    char *error, size_t errlen)
{
    /* Without the secret there is no hello to prove this peer: fail before
     * any connection is made, not after the receiver has accepted it. */
    if (dp->auth.state == DATA_AUTH_PENDING)
        return snprintf(error, errlen,
                        "no data secret yet (the controller has not sent the address book)"),
               NULL;
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return snprintf(error, errlen, "socket: %s", strerror(errno)), NULL;
    dp_socket_options(fd);
    bool pending = false;
    if (connect(fd, (const struct sockaddr *)&s->addr, s->addr_len) != 0) {
        pending = errno == EINPROGRESS;
        if (!pending) {
            snprintf(error, errlen, "connect: %s", strerror(errno));
            close(fd);
            return NULL;
        }
    }
    struct dp_conn *c = dp_conn_new(dp, fd, true, &s->addr, s->addr_len);
    if (!c) {
        close(fd);
        return snprintf(error, errlen, "out of memory"), NULL;
    }
    char text[64];
    dataplane_format_addr(&s->addr, text, sizeof text);
    if (s->to[0])
        snprintf(c->where, sizeof c->where, "to %.40s (%s)", s->to, text);
    else
        snprintf(c->where, sizeof c->where, "to %s", text);
    int hello = data_auth_hello(&dp->auth, text, c->hello, error, errlen);
    if (hello < 0) {
        dp_conn_close(c, error, false);
        return NULL;
    }
    c->hello_len = (size_t)hello;
    c->connecting = pending;
    ev_io_start(dp->loop, pending ? &c->write_watcher : &c->read_watcher);
    return c;
}

/* Connection established (or failed) on a non-blocking connect. */
static bool dp_conn_connected(struct dp_conn *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err) {
        char cause[160];
        snprintf(cause, sizeof cause, "connect: %s", strerror(err));
        dp_conn_close(c, cause, false);
        return false;
    }
    c->connecting = false;
    ev_io_start(c->dp->loop, &c->read_watcher);
    return true;
}

/* Where the next payload bytes of s come from, and at most how many (*left,
 * from the bytes left): its data, then zeros for a virtual tensor's
 * pattern (store.h), which exist nowhere in its size. */
static const uint8_t *dp_send_cursor(const struct dataplane_send *s, uint64_t *left)
{
    uint64_t data_bytes = (s->count - s->pattern) * sizeof(float);
    if (s->payload_sent < data_bytes) {
        uint64_t room = data_bytes - s->payload_sent;
        if (*left > room) *left = room;
        return (const uint8_t *)s->data + s->payload_sent;
    }
    if (*left > sizeof dp_zeros) *left = sizeof dp_zeros;
    return dp_zeros;
}

/* The zero file (dp_zero_fd), made on first use; -1 when it cannot be. */
static int dp_zero_file(void)
{
    if (dp_zero_fd == -1) {
        int fd = memfd_create("hiernet-zeros", MFD_CLOEXEC);
        if (fd >= 0 && write(fd, dp_zeros, sizeof dp_zeros) != (ssize_t)sizeof dp_zeros) {
            close(fd);
            fd = -1;
        }
        dp_zero_fd = fd >= 0 ? fd : -2;
    }
    return dp_zero_fd >= 0 ? dp_zero_fd : -1;
}

/* Sends pattern zeros by sendfile from the zero file (pages referenced,
 * not copied); -2 when there is no zero file (the caller copies). */
static ssize_t dp_send_zeros(struct dp_conn *c, size_t len)
{
    int zfd = dp_zero_file();
    if (zfd < 0) return -2;
    off_t off = 0;
    ssize_t w;
    do
        w = sendfile(c->fd, zfd, &off, len);
    while (w < 0 && errno == EINTR);
    return w;
}

/* Writes some of the head send; returns bytes written, 0 on EAGAIN, -1 on error. */
static ssize_t dp_write_send(struct dp_conn *c, struct dataplane_send *s, size_t budget)
{
    struct iovec iov[2];
    int n = 0;
    if (s->header_sent < s->header_len)
        iov[n++] = (struct iovec){s->header + s->header_sent, s->header_len - s->header_sent};
    uint64_t left = s->bytes - s->payload_sent;
    if (budget > DP_IO_CHUNK) budget = DP_IO_CHUNK;
    const uint8_t *from = dp_send_cursor(s, &left);
    size_t len = left < budget ? (size_t)left : budget;
    ssize_t w = -2;
    if (n == 0 && from == dp_zeros && len > 0) w = dp_send_zeros(c, len);
    if (w == -2) {
        if (left > 0) iov[n++] = (struct iovec){(uint8_t *)from, len};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        do
            w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
    }
    if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    size_t header_part = s->header_len - s->header_sent;
    if ((size_t)w <= header_part) {
        s->header_sent += (size_t)w;
    } else {
        s->header_sent = s->header_len;
        s->payload_sent += (size_t)w - header_part;
    }
    return w;
}

/* The hello goes out before the first frame; false until it is all out
 * (or when c was closed). */
static bool dp_conn_write_hello(struct dp_conn *c)
{
    while (c->hello_sent < c->hello_len) {
        ssize_t w =
            send(c->fd, c->hello + c->hello_sent, c->hello_len - c->hello_sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
        if (w < 0) {
            char cause[160];
            snprintf(cause, sizeof cause, "write: %s", strerror(errno));
            dp_conn_close(c, cause, false);
            return false;
        }
        c->hello_sent += (size_t)w;
    }
    return true;
}

/* Streams queued sends until the socket is full or the budget is spent. */
static void dp_conn_write_sends(struct dp_conn *c)
{
    size_t written = 0;
    if (!dp_conn_write_hello(c)) return;
    while (!fifo_empty(&c->queue) && written < DP_IO_BUDGET) {
        struct dataplane_send *s = dp_queue_first(&c->queue);
        ssize_t w = dp_write_send(c, s, DP_IO_BUDGET - written);
        if (w < 0) {
            char cause[160];
            snprintf(cause, sizeof cause, "write: %s", strerror(errno));
            dp_conn_close(c, cause, false);
            return;
        }
        if (w == 0) break;
        written += (size_t)w;
        c->dp->totals.bytes_sent += (uint64_t)w;
        if (s->header_sent == s->header_len && s->payload_sent == s->bytes)
            dp_queue_push(&c->awaiting, dp_queue_pop(&c->queue));
    }
    if (written) dp_conn_arm_timer(c);
    if (fifo_empty(&c->queue)) ev_io_stop(c->dp->loop, &c->write_watcher);
}

/* ---- incoming: acks ---- */

static bool dp_tx_reserve(struct dp_conn *c, size_t more)
{
    if (c->tx_sent == c->tx_len) c->tx_len = c->tx_sent = 0;
    if (c->tx_cap - c->tx_len >= more) return true;
    if (c->tx_sent) { /* slide the unsent part to the front first */
        memmove(c->tx, c->tx + c->tx_sent, c->tx_len - c->tx_sent);
        c->tx_len -= c->tx_sent;
        c->tx_sent = 0;
        if (c->tx_cap - c->tx_len >= more) return true;
    }
    size_t cap = c->tx_cap ? c->tx_cap * 2 : 4096;
    while (cap - c->tx_len < more)
        cap *= 2;
    uint8_t *tx = realloc(c->tx, cap);
    if (!tx) return false;
    c->tx = tx;
    c->tx_cap = cap;
    return true;
}

/* Writes pending acks; false when c was closed. */
static bool dp_conn_flush_acks(struct dp_conn *c)
{
    while (c->tx_sent < c->tx_len) {
        ssize_t w = send(c->fd, c->tx + c->tx_sent, c->tx_len - c->tx_sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ev_io_start(c->dp->loop, &c->write_watcher);
            return true;
        }
        if (w < 0) {
            dp_log(c->dp, "connection %s: write: %s; closed", c->where, strerror(errno));
            dp_conn_close(c, "write failed", false);
            return false;
        }
        c->tx_sent += (size_t)w;
        c->dp->totals.bytes_sent += (uint64_t)w;
    }
    ev_io_stop(c->dp->loop, &c->write_watcher);
    return true;
}

/* Acks the frame being received (error NULL: stored). False when c closed. */
static bool dp_conn_ack(struct dp_conn *c, const char *error)
{
    struct frame_header ack = {.type = FRAME_ACK, .id = c->hdr.id};
    if (error) snprintf(ack.error, sizeof ack.error, "%s", error);
    if (!dp_tx_reserve(c, FRAME_PREFIX_BYTES + FRAME_HEADER_MAX)) {
        dp_log(c->dp, "connection %s: out of memory for an ack; closed", c->where);
        dp_conn_close(c, "out of memory", false);
        return false;
    }
    c->tx_len += frame_encode(&ack, c->tx + c->tx_len, c->tx_cap - c->tx_len);
    return dp_conn_flush_acks(c);
}

static void on_conn_writable(EV_P_ ev_io *w, int revents)
{
    struct dp_conn *c = container_of(w, struct dp_conn, write_watcher);
    if (!c->outgoing) {
        dp_conn_flush_acks(c);
        return;
    }
    if (c->connecting && !dp_conn_connected(c)) return;
    dp_conn_write_sends(c);
}

/* ---- receiving frames ---- */

/* Logs a malformed frame and closes c. Always false (c is gone). */
static bool dp_conn_malformed(struct dp_conn *c, const char *why)
{
    char cause[300];
    snprintf(cause, sizeof cause, "malformed frame (%s)", why);
    dp_log(c->dp, "connection %s: %s; closed", c->where, cause);
    dp_conn_close(c, cause, false);
    return false;
}

/* Where the payload of a tensor frame goes; on a refusal it is read and
 * dropped, and the ack says why. */
static void dp_frame_destination(struct dp_conn *c)
{
    struct frame_header *h = &c->hdr;
    struct dataplane *dp = c->dp;
    uint64_t held = h->count - h->pattern; /* elements that are data */
    c->payload = NULL;
    c->payload_keep = 0;
    if (h->to[0] && strcmp(h->to, dp->node) != 0) {
        snprintf(c->refusal, sizeof c->refusal, "this address is node '%.100s', not '%.100s'",
                 dp->node, h->to);
        return;
    }
    if (!h->has_range && !(h->flags & FRAME_FLAG_ADD)) {
        c->dst = dp_take_tensor(dp, h->as, h->count, held);
        if (c->dst) c->payload = (uint8_t *)c->dst->data;
    } else if (held <= c->staging_cap) {
        c->payload = (uint8_t *)c->staging;
    } else {
        float *staging = realloc(c->staging, held * sizeof(float));
        if (staging) {
            c->staging = staging;
            c->staging_cap = held;
            c->payload = (uint8_t *)staging;
        }
    }
    if (c->payload) c->payload_keep = held * sizeof(float);
    if (!c->payload && held > 0) /* an empty range needs no buffer */
        snprintf(c->refusal, sizeof c->refusal, "out of memory for %" PRIu64 " elements", held);
    else if ((h->flags & FRAME_FLAG_ADD) && !h->has_range && h->count > 0)
        dp_fuse_begin(c);
}

static bool dp_frame_complete(struct dp_conn *c);
static bool dp_ack_received(struct dp_conn *c);

/* A header has arrived; false when c was closed. */
static bool dp_frame_begin(struct dp_conn *c, const uint8_t *buf)
{
    char err[256];
    if (frame_header_decode(buf, c->header_len, &c->hdr, err, sizeof err) != 0)
        return dp_conn_malformed(c, err);
    if (c->hdr.type != (c->outgoing ? FRAME_ACK : FRAME_TENSOR))
        return dp_conn_malformed(c, c->outgoing ? "a tensor on a sending connection"
                                                : "an ack on a receiving connection");
    if (c->outgoing) return dp_ack_received(c);
    if (!c->sender[0]) {
        snprintf(c->sender, sizeof c->sender, "%s", c->hdr.from);
        c->sender_incarnation = c->hdr.incarnation;
        if (dp_abort_due(c)) { /* an abort came before it named itself */
            /* Logged, unlike an abort's other closes: the controller's line
             * on the fault came before this connection said whose it was. */
            dp_log(c->dp, "connection %s: %s; closed (node %s, incarnation %" PRIu64 ")", c->where,
                   c->abort_cause, c->sender, c->sender_incarnation);
            dp_conn_reset(c, c->abort_cause);
            return false;
        }
    }
    c->refusal[0] = '\0';
    c->payload_got = 0;
    dp_frame_destination(c);
    c->state = RX_PAYLOAD;
    return c->hdr.bytes > 0 || dp_frame_complete(c);
}

/* Takes buffered payload bytes; false when c was closed or paused. */
static bool dp_payload_from_buffer(struct dp_conn *c)
{
    uint64_t left = c->hdr.bytes - c->payload_got;
    size_t avail = c->rx_end - c->rx_start;
    size_t n = left < avail ? (size_t)left : avail;
    if (c->payload_got < c->payload_keep) {
        uint64_t room = c->payload_keep - c->payload_got;
        memcpy(c->payload + c->payload_got, c->rx + c->rx_start, n < room ? n : (size_t)room);
    }
    c->rx_start += n;
    c->payload_got += n;
    dp_fuse_progress(c);
    return c->payload_got < c->hdr.bytes || dp_frame_complete(c);
}

/* The hello of an incoming connection: 1 proven, 0 too short yet, 2 no
 * secret yet (reading paused until dataplane_set_secret: the frames that
 * follow stay in the socket), -1 refused (c closed). */
static int dp_conn_authenticate(struct dp_conn *c)
{
    struct dataplane *dp = c->dp;
    if (c->rx_end - c->rx_start < DATA_AUTH_HELLO_BYTES) return 0;
    if (dp->auth.state != DATA_AUTH_READY) {
        ev_io_stop(dp->loop, &c->read_watcher);
        return 2;
    }
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    char here[64] = "", why[160], cause[200];
    if (getsockname(c->fd, (struct sockaddr *)&local, &len) == 0)
        dataplane_format_addr(&local, here, sizeof here);
    if (data_auth_check(&dp->auth, here, c->rx + c->rx_start, why, sizeof why) < 0) {
        snprintf(cause, sizeof cause, "refused: %s", why);
        dp_log(dp, "connection %s: %s; closed", c->where, cause);
        dp_conn_close(c, cause, false);
        return -1;
    }
    c->rx_start += DATA_AUTH_HELLO_BYTES;
    c->state = RX_PREFIX;
    return 1;
}

/* Handles the buffered bytes; false when c was closed or is paused. */
static bool dp_conn_process(struct dp_conn *c)
{
    while (c->rx_end > c->rx_start) {
        size_t avail = c->rx_end - c->rx_start;
        const uint8_t *p = c->rx + c->rx_start;
        char err[128];
        if (c->state == RX_AUTH) {
            int proven = dp_conn_authenticate(c);
            if (proven < 0 || proven == 2) return false;
            if (proven == 0) break;
        } else if (c->state == RX_PREFIX) {
            if (avail < FRAME_PREFIX_BYTES) break;
            c->header_len = frame_prefix_decode(p, err, sizeof err);
            if (!c->header_len) return dp_conn_malformed(c, err);
            c->rx_start += FRAME_PREFIX_BYTES;
            c->frame_start_ms = mono_ms();
            c->state = RX_HEADER;
        } else if (c->state == RX_HEADER) {
            if (avail < c->header_len) break;
            c->rx_start += c->header_len;
            if (!dp_frame_begin(c, p)) return false;
        } else if (c->state == RX_PAYLOAD) {
            if (!dp_payload_from_buffer(c)) return false;
        } else {
            return false; /* RX_INSTALL: paused */
        }
    }
    if (c->rx_start == c->rx_end) c->rx_start = c->rx_end = 0;
    return true;
}

/* ---- storing received tensors ---- */

static void dp_notify(struct dp_conn *c)
{
    struct dataplane *dp = c->dp;
    const struct frame_header *h = &c->hdr;
    dp->totals.transfers_received++;
    if (!dp->hooks.on_recv) return;
    struct dataplane_recv_info info = {.tensor = h->as,
                                       .from = h->from,
                                       .id = h->id,
                                       .bytes = h->bytes,
                                       .has_range = h->has_range,
                                       .add = (h->flags & FRAME_FLAG_ADD) != 0,
                                       .offset = h->offset,
                                       .count = h->count,
                                       .version = c->version_after,
                                       .ms = mono_ms() - c->frame_start_ms};
    dp->hooks.on_recv(dp->hooks.ctx, &info);
}

/* The frame is done (stored or refused): ack, notify, next frame. */
static bool dp_frame_finish(struct dp_conn *c, const char *error)
{
    if (!error) dp_notify(c);
    c->state = RX_PREFIX;
    if (!dp_conn_ack(c, error)) return false;
    dp_conn_arm_timer(c);
    return true;
}

/* Why a patch receive failed, for the ack (the sender's error). */
static void dp_install_error(const struct frame_header *h, int err, uint64_t size, char *error,
                             size_t errlen)
{
    bool add = (h->flags & FRAME_FLAG_ADD) != 0;
    if (err == ENOENT)
        snprintf(error, errlen, "%s target '%s' does not exist", h->has_range ? "range" : "add",
                 h->as);
    else if (err == ERANGE)
        snprintf(error, errlen,
                 "range {%" PRIu64 ", %" PRIu64 "} is outside '%s' (%" PRIu64 " elements)",
                 h->offset, h->count, h->as, size);
    else if (err == EINVAL)
        snprintf(error, errlen,
                 "add of %" PRIu64 " elements into '%s', which has %" PRIu64
                 " (a whole add needs the same size; give a range or at)",
                 h->count, h->as, size);
    else
        snprintf(error, errlen, "out of memory for %s '%s'", add ? "adding into" : "a copy of",
                 h->as);
}

/* Range and add receives: a patch of store.h from the staging buffer.
 * Returns 1 done, 0 when the write lock is busy (retry later), with *error
 * set on failure. */
static int dp_install_range(struct dp_conn *c, char *error, size_t errlen)
{
    struct store *store = c->dp->store;
    const struct frame_header *h = &c->hdr;
    /* Busy (a compute job patches): the holder's unlock wakes install_ready,
     * which is listening before the attempt, so no wake-up is lost. */
    if (!ev_is_active(&c->dp->install_ready)) ev_async_start(c->dp->loop, &c->dp->install_ready);
    if (!store_write_trylock_or_notify(store)) return 0;
    if (!c->dp->installs) ev_async_stop(c->dp->loop, &c->dp->install_ready);
    int fused = c->fuse_dst ? dp_fuse_commit(c) : 0;
    if (fused != 0) {
        store_write_unlock(store);
        if (fused < 0) dp_install_error(h, ENOMEM, 0, error, errlen);
        return 1;
    }
    struct store_write w = {.name = h->as,
                            .from = h->from,
                            .src = c->staging,
                            .offset = h->has_range ? h->offset : 0,
                            .count = h->count,
                            .add = (h->flags & FRAME_FLAG_ADD) != 0,
                            .whole = !h->has_range,
                            .src_missing = h->pattern};
    uint64_t size = 0;
    int rc = store_receive_patch(store, &w, &size, &c->version_after);
    int err = errno;
    store_write_unlock(store);
    if (rc != 0) dp_install_error(h, err, size, error, errlen);
    return 1;
}

static void dp_install_wait(struct dp_conn *c)
{
    struct dataplane *dp = c->dp;
    c->state = RX_INSTALL;
    ev_io_stop(dp->loop, &c->read_watcher);
    c->install_next = NULL;
    struct dp_conn **p = &dp->installs;
    while (*p)
        p = &(*p)->install_next;
    *p = c;
}

/* The whole payload is in; false when c was closed or is paused. */
static bool dp_frame_complete(struct dp_conn *c)
{
    if (c->refusal[0]) return dp_frame_finish(c, c->refusal);
    if (c->dst) {
        struct store_tensor *replaced;
        int rc = store_receive_whole(c->dp->store, c->dst, c->hdr.from, c->hdr.version, &replaced);
        if (rc == 0) c->version_after = store_tensor_version(c->dst);
        dp_keep_spare(c->dp, replaced);
        store_tensor_release(c->dst);
        c->dst = NULL;
        return dp_frame_finish(c, rc == 0 ? NULL : "out of memory recording the arrival");
    }
    char error[FRAME_ERROR_SIZE] = "";
    if (!dp_install_range(c, error, sizeof error)) {
        dp_install_wait(c);
        return false;
    }
    return dp_frame_finish(c, error[0] ? error : NULL);
}

/* Retries waiting range receives in arrival order, once the write lock's
 * holder has let go (store_write_trylock_or_notify). */
static void on_install_ready(EV_P_ ev_async *w, int revents)
{
    struct dataplane *dp = container_of(w, struct dataplane, install_ready);
    while (dp->installs) {
        struct dp_conn *c = dp->installs;
        char error[FRAME_ERROR_SIZE] = "";
        if (!dp_install_range(c, error, sizeof error)) return;
        dp->installs = c->install_next;
        ev_io_start(dp->loop, &c->read_watcher);
        if (dp_frame_finish(c, error[0] ? error : NULL)) dp_conn_process(c);
    }
    ev_async_stop(dp->loop, &dp->install_ready);
}

/* An ack on an outgoing connection: completes the oldest written send. */
static bool dp_ack_received(struct dp_conn *c)
{
    struct dataplane_send *s = dp_queue_first(&c->awaiting);
    if (!s || s->id != c->hdr.id) return dp_conn_malformed(c, "an ack for no pending transfer");
    dp_queue_pop(&c->awaiting);
    c->state = RX_PREFIX;
    c->dp->totals.transfers_sent++;
    dp_conn_arm_timer(c);
    if (!c->hdr.error[0]) {
        dp_send_finish(s, NULL, false);
        return true;
    }
    char error[FRAME_ERROR_SIZE + 200];
    snprintf(error, sizeof error, "%s: refused: %s", c->where, c->hdr.error);
    dp_send_finish(s, error, false);
    return true;
}

/* ---- reading ---- */

/* Where the next payload bytes go, and at most how many (*left, from the
 * bytes left of the payload): the payload's buffer up to what it keeps, the
 * discard buffer for the rest. */
static uint8_t *dp_payload_cursor(const struct dp_conn *c, uint64_t *left)
{
    if (c->payload_got < c->payload_keep) {
        uint64_t room = c->payload_keep - c->payload_got;
        if (*left > room) *left = room;
        return c->payload + c->payload_got;
    }
    if (*left > sizeof dp_discard) *left = sizeof dp_discard;
    return dp_discard;
}

/* One read: straight into the payload when the buffer is empty and a
 * payload is due, else into the buffer. Returns the bytes, 0 on EOF, -1. */
static ssize_t dp_conn_read(struct dp_conn *c, size_t budget)
{
    ssize_t n;
    if (c->state == RX_PAYLOAD && c->rx_end == c->rx_start) {
        uint64_t left = c->hdr.bytes - c->payload_got;
        uint8_t *into = dp_payload_cursor(c, &left);
        /* Discarded bytes: MSG_TRUNC makes TCP drop them without copying
         * them out (other sockets copy them into dp_discard, as large). */
        int flags = into == dp_discard ? MSG_TRUNC : 0;
        do
            n = recv(c->fd, into, left < budget ? (size_t)left : budget, flags);
        while (n < 0 && errno == EINTR);
        if (n > 0) c->payload_got += (uint64_t)n;
        if (n > 0) dp_fuse_progress(c);
        return n;
    }
    if (c->rx_start > 0 && c->rx_start == c->rx_end) c->rx_start = c->rx_end = 0;
    if (c->rx_start > 0 && c->rx_end == DP_RX_BUFFER) {
        memmove(c->rx, c->rx + c->rx_start, c->rx_end - c->rx_start);
        c->rx_end -= c->rx_start;
        c->rx_start = 0;
    }
    if (c->rx_end == DP_RX_BUFFER) { /* cannot happen: frames consume a full buffer */
        errno = ENOBUFS;
        return -1;
    }
    do
        n = read(c->fd, c->rx + c->rx_end, DP_RX_BUFFER - c->rx_end);
    while (n < 0 && errno == EINTR);
    if (n > 0) c->rx_end += (size_t)n;
    return n;
}

/* EOF or a read error; always false (c is gone). */
static bool dp_conn_ended(struct dp_conn *c, ssize_t n)
{
    bool mid_frame = c->state != RX_PREFIX || c->rx_end > c->rx_start;
    char cause[160];
    if (n == 0)
        snprintf(cause, sizeof cause, "connection closed by the other end");
    else
        snprintf(cause, sizeof cause, "read: %s", strerror(errno));
    bool pending = !fifo_empty(&c->queue) || !fifo_empty(&c->awaiting);
    if (mid_frame || (n < 0 && !pending))
        dp_log(c->dp, "connection %s: %s%s", c->where, cause, mid_frame ? " inside a frame" : "");
    dp_conn_close(c, cause, false);
    return false;
}

static void on_conn_readable(EV_P_ ev_io *w, int revents)
{
    struct dp_conn *c = container_of(w, struct dp_conn, read_watcher);
    size_t total = 0;
    while (total < DP_IO_BUDGET) {
        ssize_t n = dp_conn_read(c, DP_IO_BUDGET - total);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
            dp_conn_ended(c, n);
            return;
        }
        total += (size_t)n;
        c->dp->totals.bytes_received += (uint64_t)n;
        bool direct = c->state == RX_PAYLOAD && c->rx_end == c->rx_start;
        if (direct && c->payload_got == c->hdr.bytes && !dp_frame_complete(c)) return;
        if (!direct && !dp_conn_process(c)) return;
        if (c->state == RX_INSTALL) return;
    }
    dp_conn_arm_timer(c);
}

/* ---- sending ---- */

static void dp_send_header(struct dataplane *dp, struct dataplane_send *s)
{
    struct frame_header h = {.type = FRAME_TENSOR,
                             .id = s->id,
                             .count = s->count,
                             .bytes = s->bytes,
                             .has_range = s->has_range,
                             .offset = s->offset,
                             .version = s->version,
                             .flags = s->add ? FRAME_FLAG_ADD : 0,
                             .pattern = s->pattern,
                             .incarnation = dp->incarnation};
    snprintf(h.from, sizeof h.from, "%s", dp->node);
    snprintf(h.to, sizeof h.to, "%s", s->to);
    snprintf(h.as, sizeof h.as, "%s", s->as);
    s->header_len = frame_encode(&h, s->header, sizeof s->header);
    s->header_sent = 0;
    s->payload_sent = 0;
}

void dataplane_send(struct dataplane *dp, struct dataplane_send *s)
{
    s->id = ++dp->next_id;
    s->bytes = s->count * sizeof(float);
    s->start_ms = mono_ms();
    dp_send_header(dp, s);
    struct dp_conn *c = dp_conn_find(dp, &s->addr, s->addr_len);
    char error[256];
    if (!c) c = dp_conn_open(dp, s, error, sizeof error);
    if (!c) {
        char text[64], message[800];
        dataplane_format_addr(&s->addr, text, sizeof text);
        snprintf(message, sizeof message, "to %s%s%s%s: %s", s->to[0] ? s->to : text,
                 s->to[0] ? " (" : "", s->to[0] ? text : "", s->to[0] ? ")" : "", error);
        dp_send_finish(s, message, false);
        return;
    }
    dp_queue_push(&c->queue, s);
    if (!c->connecting) ev_io_start(dp->loop, &c->write_watcher);
    dp_conn_arm_timer(c);
}

/* ---- listening ---- */

/* From the thread that released the store's write lock: only a signal. */
static void on_store_unlocked(void *ctx)
{
    struct dataplane *dp = ctx;
    ev_async_send(dp->loop, &dp->install_ready);
}

static void on_accept_retry(EV_P_ ev_timer *w, int revents)
{
    struct dataplane *dp = container_of(w, struct dataplane, accept_retry);
    ev_io_start(dp->loop, &dp->accept_watcher);
}

static void dp_accept_one(struct dataplane *dp, int fd, const struct sockaddr_storage *addr,
                          socklen_t len)
{
    struct dp_conn *c = dp_conn_new(dp, fd, false, addr, len);
    if (!c) {
        dp_log(dp, "out of memory for an incoming connection; refused");
        close(fd);
        return;
    }
    char text[64];
    dataplane_format_addr(addr, text, sizeof text);
    snprintf(c->where, sizeof c->where, "from %s", text);
    /* The listener's options are inherited; TCP_NODELAY is set again to be sure. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->state = data_auth_required(&dp->auth) ? RX_AUTH : RX_PREFIX;
    if (c->state == RX_AUTH) dp_conn_arm_timer(c);
    ev_io_start(dp->loop, &c->read_watcher);
}

static void on_accept(EV_P_ ev_io *w, int revents)
{
    struct dataplane *dp = container_of(w, struct dataplane, accept_watcher);
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd =
            accept4(dp->listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            dp_accept_one(dp, fd, &addr, len);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        /* Out of descriptors: a level-triggered watcher would spin. */
        dp_log(dp, "accept: %s; pausing for %.0f s", strerror(errno), DP_ACCEPT_RETRY_S);
        ev_io_stop(dp->loop, &dp->accept_watcher);
        ev_timer_set(&dp->accept_retry, DP_ACCEPT_RETRY_S, 0.0);
        ev_timer_start(dp->loop, &dp->accept_retry);
        return;
    }
}

/* Binds and listens on cfg's address; false (logged) when that fails. */
static bool dp_listen(struct dataplane *dp, const struct dataplane_config *cfg)
{
    struct sockaddr_storage addr;
    socklen_t len;
    char err[128];
    if (dataplane_parse_addr(cfg->addr, cfg->port ? cfg->port : 1, &addr, &len, err, sizeof err))
        return dp_log(dp, "listen: %s", err), false;
    if (!cfg->port) ((struct sockaddr_in *)&addr)->sin_port = 0; /* same offset in v6 */
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        /* The controller starts peers while it is still giving their node
         * their addresses: bind before the address exists. */
        if (addr.ss_family == AF_INET) setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
        dp_socket_options(fd);
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        dp_log(dp, "cannot listen on %s port %d: %s; this peer can send but not receive", cfg->addr,
               cfg->port, strerror(errno));
        if (fd >= 0) close(fd);
        return false;
    }
    dp->listen_fd = fd;
    dp->port = ntohs(((struct sockaddr_in *)&addr)->sin_port);
    ev_io_init(&dp->accept_watcher, on_accept, fd, EV_READ);
    ev_io_start(dp->loop, &dp->accept_watcher);
    return true;
}

/* ---- life cycle ---- */

struct dataplane *dataplane_create(struct ev_loop *loop, const struct dataplane_config *cfg,
                                   const struct dataplane_hooks *hooks)
{
    struct dataplane *dp = calloc(1, sizeof *dp);
    if (!dp) {
        fprintf(stderr, "data plane: out of memory\n");
        return NULL;
    }
    dp->loop = loop;
    dp->store = cfg->store;
    dp->hooks = *hooks;
    dp->listen_fd = -1;
    snprintf(dp->node, sizeof dp->node, "%s", cfg->node);
    ev_init(&dp->accept_retry, on_accept_retry);
    ev_async_init(&dp->install_ready, on_install_ready);
    store_set_unlock_hook(dp->store, on_store_unlocked, dp);
    data_auth_init(&dp->auth, cfg->require_auth);
    if (cfg->addr) dp_listen(dp, cfg);
    return dp;
}

void dataplane_destroy(struct dataplane *dp)
{
    if (!dp) return;
    if (dp->listen_fd >= 0) {
        ev_io_stop(dp->loop, &dp->accept_watcher);
        close(dp->listen_fd);
    }
    ev_timer_stop(dp->loop, &dp->accept_retry);
    store_set_unlock_hook(dp->store, NULL, NULL);
    ev_async_stop(dp->loop, &dp->install_ready);
    while (dp->conns)
        dp_conn_close(dp->conns, "the peer is shutting down", true);
    for (int i = 0; i < DP_SPARES; i++)
        store_tensor_release(dp->spares[i]);
    dataplane_clear_peers(dp);
    free(dp);
}

int dataplane_set_secret(struct dataplane *dp, const void *secret, size_t len, char *err,
                         size_t errlen)
{
    if (data_auth_set_secret(&dp->auth, secret, len, err, errlen) < 0) return -1;
    /* Connections that arrived first have waited with their hello unread. */
    for (struct dp_conn *c = dp->conns, *next; c; c = next) {
        next = c->next;
        if (c->outgoing || c->state != RX_AUTH) continue;
        ev_io_start(dp->loop, &c->read_watcher);
        if (dp_conn_process(c)) dp_conn_arm_timer(c);
    }
    return 0;
}

int dataplane_port(const struct dataplane *dp)
{
    return dp->port;
}

void dataplane_get_totals(const struct dataplane *dp, struct dataplane_totals *totals)
{
    *totals = dp->totals;
}

/* nl.c — rtnetlink sockets, requests and their acks, batches (see nl.h).
 *
 * libnl builds the messages; sending and ack collection are done here on the
 * socket's fd because libnl 3.7 neither reports the kernel's extended-ack
 * text nor sends several requests in one sendmsg(). Every request carries
 * NLM_F_ACK; an ack counts only if its port and sequence number are ours
 * (iproute2 __rtnl_talk_iov does the same checks). rtnetlink handles requests
 * inside sendmsg(), so the acks of a window are queued by the time it returns;
 * the receive timeout only guards against a kernel that never answers. */
#include "emu/nl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <linux/netlink.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#define NL_BUFFER_BYTES (1024 * 1024) /* a window of acks, with room to spare */
#define NL_RECV_BYTES 32768           /* the kernel sizes dump replies to our reads */
#define NL_TIMEOUT_SECONDS 10

static void nl_set_buffer(int fd, int force_option, int option)
{
    int bytes = NL_BUFFER_BYTES;
    /* FORCE goes past net.core.[rw]mem_max and needs CAP_NET_ADMIN; without
     * it we get what the sysctl allows, which still holds a window. */
    if (setsockopt(fd, SOL_SOCKET, force_option, &bytes, sizeof bytes) < 0)
        (void)setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof bytes);
}

struct nl_sock *emu_nl_open(char *err, size_t errlen)
{
    struct timeval timeout = {.tv_sec = NL_TIMEOUT_SECONDS};
    struct nl_sock *sock = nl_socket_alloc();
    int one = 1, fd, rc;

    if (!sock) {
        snprintf(err, errlen, "rtnetlink socket: out of memory");
        return NULL;
    }
    rc = nl_connect(sock, NETLINK_ROUTE);
    if (rc < 0) {
        snprintf(err, errlen, "rtnetlink socket: %s", nl_geterror(rc));
        nl_socket_free(sock);
        return NULL;
    }
    /* Our requests take sequence numbers libnl does not know about; its
     * strict-order check would then fail any libnl call made on this socket. */
    nl_socket_disable_seq_check(sock);
    fd = nl_socket_get_fd(sock);
    nl_set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF);
    nl_set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF);
    /* Both are optional niceties (texts, shorter acks): older kernels lack them. */
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) < 0) {
        snprintf(err, errlen, "rtnetlink socket: SO_RCVTIMEO: %s", strerror(errno));
        nl_socket_free(sock);
        return NULL;
    }
    return sock;
}

void emu_nl_close(struct nl_sock *sock)
{
    if (sock) nl_socket_free(sock); /* closes the fd */
}

int emu_nl_fail(char *err, size_t errlen, int error, const char *extack, const char *what_fmt, ...)
{
    char what[256], buf[64];
    const char *text = strerror_r(error < 0 ? -error : error, buf, sizeof buf);
    va_list ap;

    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    if (extack && *extack)
        snprintf(err, errlen, "%s: %s (%s)", what, text, extack);
    else
        snprintf(err, errlen, "%s: %s", what, text);
    return -1;
}

/* The error of an NLMSG_ERROR message and its NLMSGERR_ATTR_MSG text. */
static int nl_parse_ack(const struct nlmsghdr *nlh, char *extack, size_t extack_len)
{
    const struct nlmsgerr *ack = NLMSG_DATA(nlh);
    size_t offset = sizeof *ack;
    int remaining;
    const struct nlattr *attr;

    if (extack_len) extack[0] = '\0';
    if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof *ack)) return -EPROTO;
    if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS) || !extack_len) return ack->error;
    if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) /* the request's payload is echoed first */
        offset += ack->msg.nlmsg_len - NLMSG_HDRLEN;
    offset = NLMSG_ALIGN(offset);
    remaining = (int)(nlh->nlmsg_len - NLMSG_HDRLEN) - (int)offset;
    attr = (const struct nlattr *)((const char *)ack + offset);
    for (; remaining > 0 && nla_ok(attr, remaining); attr = nla_next(attr, &remaining))
        if (nla_type(attr) == NLMSGERR_ATTR_MSG && nla_len(attr) > 0)
            snprintf(extack, extack_len, "%.*s", nla_len(attr) - 1, (const char *)nla_data(attr));
    return ack->error;
}

/* Requests in flight: position i of the window has seq first_seq + i. */
struct nl_window {
    struct nl_msg *msgs[EMU_NL_WINDOW];
    int *errors[EMU_NL_WINDOW];
    char *extacks[EMU_NL_WINDOW];
    size_t extack_len;
    int acked[EMU_NL_WINDOW];
    size_t count;
    uint32_t first_seq;
    emu_nl_reply_fn on_reply;
    void *ctx;
};

/* Gives every message of the window our port, its seq and REQUEST|ACK. */
static void nl_window_prepare(struct nl_sock *sock, struct nl_window *w)
{
    for (size_t i = 0; i < w->count; i++) {
        struct nlmsghdr *nlh = nlmsg_hdr(w->msgs[i]);
        nlh->nlmsg_pid = nl_socket_get_local_port(sock);
        nlh->nlmsg_seq = nl_socket_use_seq(sock);
        nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        if (i == 0) w->first_seq = nlh->nlmsg_seq;
        w->acked[i] = 0;
    }
}

static int nl_window_send(int fd, struct nl_window *w)
{
    struct iovec iov[EMU_NL_WINDOW];
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    struct msghdr mh = {
        .msg_name = &kernel, .msg_namelen = sizeof kernel, .msg_iov = iov, .msg_iovlen = w->count};
    ssize_t sent;

    for (size_t i = 0; i < w->count; i++) {
        iov[i].iov_base = nlmsg_hdr(w->msgs[i]);
        /* libnl pads every attribute, so lengths are already aligned and
         * the messages may simply follow each other. */
        iov[i].iov_len = NLMSG_ALIGN(nlmsg_hdr(w->msgs[i])->nlmsg_len);
    }
    do
        sent = sendmsg(fd, &mh, 0);
    while (sent < 0 && errno == EINTR);
    return sent < 0 ? -errno : 0;
}

/* Handles one message received; returns 1 when it acked a pending request. */
static int nl_window_take(struct nl_window *w, const struct nlmsghdr *nlh, uint32_t port)
{
    uint32_t index = nlh->nlmsg_seq - w->first_seq;

    if (nlh->nlmsg_pid != port || index >= w->count || w->acked[index])
        return 0; /* a stale or foreign message: not for this window */
    if (nlh->nlmsg_type == NLMSG_ERROR) {
        *w->errors[index] = nl_parse_ack(nlh, w->extacks[index], w->extack_len);
    } else if (nlh->nlmsg_type == NLMSG_DONE) {
        /* A dump ends with DONE (carrying its error) instead of an ack. */
        int error = 0;
        if (nlh->nlmsg_len >= NLMSG_LENGTH(sizeof error))
            memcpy(&error, NLMSG_DATA(nlh), sizeof error);
        *w->errors[index] = error;
    } else {
        if (w->on_reply && nlh->nlmsg_type != NLMSG_NOOP) w->on_reply(nlh, w->ctx);
        return 0;
    }
    w->acked[index] = 1;
    return 1;
}

static int nl_window_collect(struct nl_sock *sock, struct nl_window *w)
{
    char buf[NL_RECV_BYTES] __attribute__((aligned(NLMSG_ALIGNTO)));
    uint32_t port = nl_socket_get_local_port(sock);
    int fd = nl_socket_get_fd(sock);
    size_t pending = w->count;

    while (pending > 0) {
        ssize_t len = recv(fd, buf, sizeof buf, MSG_TRUNC);
        if (len < 0 && errno == EINTR) continue;
        if (len < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        if ((size_t)len > sizeof buf) return -EMSGSIZE;
        int left = (int)len;
        for (struct nlmsghdr *nlh = (struct nlmsghdr *)buf; NLMSG_OK(nlh, left);
             nlh = NLMSG_NEXT(nlh, left))
            pending -= (size_t)nl_window_take(w, nlh, port);
    }
    return 0;
}

/* Sends a prepared window and waits for all its acks; a transport failure
 * becomes every request's error. */
static int nl_window_run(struct nl_sock *sock, struct nl_window *w)
{
    int rc;

    if (w->count == 0) return 0;
    nl_window_prepare(sock, w);
    rc = nl_window_send(nl_socket_get_fd(sock), w);
    if (rc == 0) rc = nl_window_collect(sock, w);
    if (rc < 0)
        for (size_t i = 0; i < w->count; i++)
            if (!w->acked[i]) *w->errors[i] = rc;
    return rc;
}

int emu_nl_request(struct nl_sock *sock, struct nl_msg *msg, emu_nl_reply_fn on_reply, void *ctx,
                   char *extack, size_t extack_len)
{
    char scratch[1];
    int error = 0;
    struct nl_window w = {.count = 1, .on_reply = on_reply, .ctx = ctx};

    w.msgs[0] = msg;
    w.errors[0] = &error;
    w.extacks[0] = extack_len ? extack : scratch;
    w.extack_len = extack_len ? extack_len : sizeof scratch;
    w.extacks[0][0] = '\0';
    nl_window_run(sock, &w);
    return error;
}

int emu_nl_talk(struct nl_sock *sock, struct nl_msg *msg, char *extack, size_t extack_len)
{
    return emu_nl_request(sock, msg, NULL, NULL, extack, extack_len);
}

int emu_nl_run(struct nl_sock *sock, struct nl_msg *msg, char *err, size_t errlen,
               const char *what_fmt, ...)
{
    char what[256], extack[EMU_NL_EXTACK_MAX];
    int error = msg ? emu_nl_talk(sock, msg, extack, sizeof extack) : -ENOMEM;
    va_list ap;

    if (msg) nlmsg_free(msg);
    if (error == 0) return 0;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    return emu_nl_fail(err, errlen, error, msg ? extack : NULL, "%s", what);
}

void emu_nl_batch_init(struct emu_nl_batch *batch, struct nl_sock *sock)
{
    memset(batch, 0, sizeof *batch);
    batch->sock = sock;
}

static int nl_batch_grow(struct emu_nl_batch *batch)
{
    size_t capacity = batch->capacity ? batch->capacity * 2 : 16;
    struct emu_nl_batch_entry *entries = realloc(batch->entries, capacity * sizeof *entries);
    if (!entries) return -1;
    batch->entries = entries;
    batch->capacity = capacity;
    return 0;
}

void emu_nl_batch_add(struct emu_nl_batch *batch, struct nl_msg *msg, const char *what_fmt, ...)
{
    struct emu_nl_batch_entry *entry;
    va_list ap;

    if (batch->count == batch->capacity && nl_batch_grow(batch) < 0) {
        if (msg) nlmsg_free(msg);
        batch->oom = 1;
        return;
    }
    entry = &batch->entries[batch->count++];
    entry->msg = msg;
    entry->error = msg ? 0 : -ENOMEM;
    entry->extack[0] = '\0';
    va_start(ap, what_fmt);
    vsnprintf(entry->what, sizeof entry->what, what_fmt, ap);
    va_end(ap);
}

/* Fills a window from entries[*next], skipping entries without a message. */
static void nl_batch_fill(struct emu_nl_batch *batch, size_t *next, struct nl_window *w)
{
    w->count = 0;
    w->extack_len = EMU_NL_EXTACK_MAX;
    for (; *next < batch->count && w->count < EMU_NL_WINDOW; (*next)++) {
        struct emu_nl_batch_entry *entry = &batch->entries[*next];
        if (!entry->msg) continue;
        w->msgs[w->count] = entry->msg;
        w->errors[w->count] = &entry->error;
        w->extacks[w->count] = entry->extack;
        w->count++;
    }
}

static int nl_batch_report(struct emu_nl_batch *batch, char *err, size_t errlen)
{
    struct emu_nl_batch_entry *first = NULL;
    size_t failures = 0, used;

    if (batch->oom) {
        snprintf(err, errlen, "netlink batch: out of memory");
        return -1;
    }
    for (size_t i = 0; i < batch->count; i++)
        if (batch->entries[i].error < 0 && failures++ == 0) first = &batch->entries[i];
    if (!first) return 0;
    emu_nl_fail(err, errlen, first->error, first->extack, "%s", first->what);
    used = strlen(err);
    if (failures > 1 && used < errlen)
        snprintf(err + used, errlen - used, " [and %zu more failed]", failures - 1);
    return -1;
}

int emu_nl_batch_run(struct emu_nl_batch *batch, char *err, size_t errlen)
{
    struct nl_window w = {0};
    size_t next = 0;

    while (next < batch->count) {
        nl_batch_fill(batch, &next, &w);
        nl_window_run(batch->sock, &w);
    }
    return nl_batch_report(batch, err, errlen);
}

void emu_nl_batch_free(struct emu_nl_batch *batch)
{
    for (size_t i = 0; i < batch->count; i++)
        if (batch->entries[i].msg) nlmsg_free(batch->entries[i].msg);
    free(batch->entries);
    memset(batch, 0, sizeof *batch);
}

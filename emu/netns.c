/* netns.c — anonymous network namespaces held by file descriptors (see netns.h).
 *
 * A namespace is made with unshare(CLONE_NEWNET) on a thread that then opens
 * /proc/thread-self/ns/net: no fork, no bind mount. Everything that has to
 * happen inside the namespace (its rtnetlink socket, lo up, sysctls) is done
 * right then, while the thread is there anyway. unshare() and setns() only
 * change the calling thread's namespace, so helper threads can build many
 * namespaces at once while the caller's thread never leaves its own. */
#include "emu/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/nl.h"

#define NETNS_SELF "/proc/thread-self/ns/net"
#define NETNS_MAX_THREADS 8

static const char *netns_strerror(int error, char *buf, size_t buflen)
{
    return strerror_r(error, buf, buflen); /* GNU variant: thread-safe */
}

static int netns_fail_errno(char *err, size_t errlen, const char *what, int error)
{
    char buf[64];
    snprintf(err, errlen, "%s: %s", what, netns_strerror(error, buf, sizeof buf));
    return -1;
}

unsigned long emu_netns_inode(int ns_fd)
{
    struct stat st;
    return ns_fd >= 0 && fstat(ns_fd, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

static int netns_open_self(char *err, size_t errlen)
{
    int fd = open(NETNS_SELF, O_RDONLY | O_CLOEXEC);
    if (fd < 0) netns_fail_errno(err, errlen, "open " NETNS_SELF, errno);
    return fd;
}

int emu_netns_enter(int ns_fd, int *saved_fd, char *err, size_t errlen)
{
    int saved = netns_open_self(err, errlen);
    char what[96];

    if (saved < 0) return -1;
    if (setns(ns_fd, CLONE_NEWNET) < 0) {
        int error = errno;
        close(saved);
        snprintf(what, sizeof what, "enter namespace net:[%lu]: setns", emu_netns_inode(ns_fd));
        return netns_fail_errno(err, errlen, what, error);
    }
    *saved_fd = saved;
    return 0;
}

int emu_netns_leave(int *saved_fd, char *err, size_t errlen)
{
    char what[96];

    if (*saved_fd < 0) return 0;
    if (setns(*saved_fd, CLONE_NEWNET) < 0) {
        snprintf(what, sizeof what, "return to namespace net:[%lu]: setns",
                 emu_netns_inode(*saved_fd));
        return netns_fail_errno(err, errlen, what, errno);
    }
    close(*saved_fd);
    *saved_fd = -1;
    return 0;
}

int emu_netns_sysctl_write(const char *key, const char *value, char *err, size_t errlen)
{
    char path[256], what[320];
    size_t len = strlen(value);
    ssize_t written;
    int fd;

    snprintf(path, sizeof path, "/proc/sys/%s", key);
    snprintf(what, sizeof what, "sysctl %s = %s", key, value);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return netns_fail_errno(err, errlen, what, errno);
    written = write(fd, value, len);
    if (written != (ssize_t)len) {
        int error = written < 0 ? errno : EIO;
        close(fd);
        return netns_fail_errno(err, errlen, what, error);
    }
    close(fd);
    return 0;
}

struct nl_sock *emu_netns_nl_open(int ns_fd, char *err, size_t errlen)
{
    struct nl_sock *sock;
    int saved;

    if (emu_netns_enter(ns_fd, &saved, err, errlen) < 0) return NULL;
    sock = emu_nl_open(err, errlen);
    if (emu_netns_leave(&saved, err, errlen) < 0) {
        emu_nl_close(sock);
        return NULL;
    }
    return sock;
}

void emu_netns_close(struct emu_netns *ns)
{
    if (ns->sock) emu_nl_close(ns->sock);
    ns->sock = NULL;
    if (ns->fd >= 0) close(ns->fd);
    ns->fd = -1;
}

/* Whether this kernel has IPv6: probed once, from the caller's namespace. */
static pthread_once_t host_probe_once = PTHREAD_ONCE_INIT;
static bool host_has_ipv6;

static void netns_probe_host(void)
{
    host_has_ipv6 = access("/proc/sys/net/ipv6", F_OK) == 0;
}

/* Whether a new namespace starts with conf/all/rp_filter on. Every new
 * namespace starts with the same conf/all: the host's copied, or the
 * kernel's defaults (net.core.devconf_inherit_init_net decides), so the
 * first one tells. Unreadable counts as on, the cautious side. */
static pthread_once_t rp_filter_probe_once = PTHREAD_ONCE_INIT;
static bool new_ns_rp_filter_on;

static void netns_probe_rp_filter(void) /* inside the first new namespace */
{
    char v[8] = "";
    int fd = open("/proc/sys/net/ipv4/conf/all/rp_filter", O_RDONLY | O_CLOEXEC);
    new_ns_rp_filter_on = !(fd >= 0 && read(fd, v, sizeof v - 1) > 0 && v[0] == '0');
    if (fd >= 0) close(fd);
}

/* Router settings live on the interfaces (emu_nl_link_node_conf_build),
 * set through netlink, because every /proc/sys path lookup costs
 * O(namespaces) in the kernel (the dcache keeps one entry per namespace
 * under each name): a 1000-node start spent a fifth of its CPU on such
 * writes. conf/all/rp_filter is written only where a new namespace starts
 * with it on (a host that sets it and lets namespaces inherit it): the
 * kernel combines it with the interface's by maximum. conf/all/
 * send_redirects stays on: a forwarding node may send a redirect within a
 * switch segment, which every node ignores (accept_redirects is off on all
 * of its interfaces). */
static int netns_setup_forwarding(char *err, size_t errlen)
{
    pthread_once(&rp_filter_probe_once, netns_probe_rp_filter);
    if (!new_ns_rp_filter_on) return 0;
    return emu_netns_sysctl_write("net/ipv4/conf/all/rp_filter", "0", err, errlen);
}

/* Links made later copy conf/default; lo keeps ::1. A kernel without IPv6
 * has no such file, which is what we want anyway. */
static int netns_setup_no_ipv6(char *err, size_t errlen)
{
    if (!host_has_ipv6) return 0;
    return emu_netns_sysctl_write("net/ipv6/conf/default/disable_ipv6", "1", err, errlen);
}

static void netns_track_ifindex(const char *name, int ifindex, unsigned flags, void *ctx)
{
    struct emu_netns *ns = ctx;
    (void)name;
    (void)flags;
    if (ifindex >= ns->next_ifindex) ns->next_ifindex = ifindex + 1;
}

int emu_netns_ifindex_alloc(struct emu_netns *ns)
{
    return ns->next_ifindex > 0 ? ns->next_ifindex++ : 0;
}

/* Runs inside the new namespace. */
static int netns_setup(struct emu_netns *ns, unsigned flags, char *err, size_t errlen)
{
    if ((flags & EMU_NETNS_FORWARDING) && netns_setup_forwarding(err, errlen) < 0) return -1;
    if ((flags & EMU_NETNS_NO_IPV6) && netns_setup_no_ipv6(err, errlen) < 0) return -1;
    if (flags & (EMU_NETNS_SOCKET | EMU_NETNS_LO_UP)) {
        ns->sock = emu_nl_open(err, errlen);
        if (!ns->sock || emu_nl_link_list(ns->sock, netns_track_ifindex, ns, err, errlen) < 0)
            return -1;
    }
    if ((flags & EMU_NETNS_LO_UP) &&
        emu_nl_link_set_up(ns->sock, EMU_NL_LOOPBACK_IFINDEX, 1, "lo", err, errlen) < 0)
        return -1;
    return 0;
}

/* Makes a namespace and leaves the calling thread inside it. */
static int netns_create_here(struct emu_netns *ns, unsigned flags, char *err, size_t errlen)
{
    *ns = (struct emu_netns){.fd = -1};
    if (unshare(CLONE_NEWNET) < 0)
        return netns_fail_errno(err, errlen, "create network namespace: unshare(CLONE_NEWNET)",
                                errno);
    ns->fd = netns_open_self(err, errlen);
    if (ns->fd < 0) return -1;
    if (netns_setup(ns, flags, err, errlen) < 0) {
        emu_netns_close(ns);
        return -1;
    }
    return 0;
}

int emu_netns_create(struct emu_netns *ns, unsigned flags, char *err, size_t errlen)
{
    pthread_once(&host_probe_once, netns_probe_host);
    int home = netns_open_self(err, errlen);
    char leave_err[256];

    if (home < 0) return -1;
    if (netns_create_here(ns, flags, err, errlen) < 0) {
        /* unshare() may have succeeded before the failure: go home anyway.
         * The first failure is the one to report: without privileges the
         * return fails too, though the thread never moved. */
        emu_netns_leave(&home, leave_err, sizeof leave_err);
        return -1;
    }
    if (emu_netns_leave(&home, err, errlen) < 0) {
        emu_netns_close(ns);
        return -1;
    }
    return 0;
}

struct netns_worker {
    pthread_t thread;
    struct emu_netns *ns;
    size_t first, count, stride;
    unsigned flags;
    int failed;
    char err[512];
};

/* Each worker takes every stride-th namespace, so a failure anywhere
 * stops only its own worker; the others finish and everything is closed. */
static void *netns_worker_main(void *arg)
{
    struct netns_worker *w = arg;
    char what[256];

    for (size_t i = w->first; i < w->count; i += w->stride)
        if (netns_create_here(&w->ns[i], w->flags, what, sizeof what) < 0) {
            snprintf(w->err, sizeof w->err, "namespace %zu of %zu: %s", i + 1, w->count, what);
            w->failed = 1;
            break;
        }
    return NULL; /* the thread ends inside its last namespace: harmless */
}

static unsigned netns_thread_count(unsigned threads, size_t count)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads == 0) threads = cpus > 0 ? (unsigned)cpus : 1;
    if (threads > NETNS_MAX_THREADS) threads = NETNS_MAX_THREADS;
    if (threads > count) threads = (unsigned)count;
    return threads ? threads : 1;
}

int emu_netns_create_many(struct emu_netns *ns, size_t count, unsigned flags, unsigned threads,
                          char *err, size_t errlen)
{
    struct netns_worker workers[NETNS_MAX_THREADS];
    unsigned started = 0, n = netns_thread_count(threads, count);
    int failed = 0;

    pthread_once(&host_probe_once, netns_probe_host);
    for (size_t i = 0; i < count; i++)
        ns[i] = (struct emu_netns){.fd = -1};
    for (unsigned t = 0; t < n; t++) {
        workers[t] = (struct netns_worker){
            .ns = ns, .first = t, .count = count, .stride = n, .flags = flags};
        int rc = pthread_create(&workers[t].thread, NULL, netns_worker_main, &workers[t]);
        if (rc != 0) {
            failed = netns_fail_errno(err, errlen, "create namespaces: pthread_create", rc);
            break;
        }
        started++;
    }
    for (unsigned t = 0; t < started; t++) {
        pthread_join(workers[t].thread, NULL);
        if (workers[t].failed && !failed) {
            snprintf(err, errlen, "%s", workers[t].err);
            failed = -1;
        }
    }
    if (failed || started < n) {
        for (size_t i = 0; i < count; i++)
            emu_netns_close(&ns[i]);
        return -1;
    }
    return 0;
}

/* startup_floor.c — the kernel's floor for a topology's start and stop, for
 * tools/bench/startup: the same network namespaces and veth pairs a hiernet
 * network of that shape has, made by the fastest means known and nothing
 * else (no addresses, routes, qdiscs, bridges or processes), then released.
 *
 *   bench_startup_floor TOPO N [THREADS]   TOPO: star | direct | tree
 *     star    N hosts and one switch: N + 1 namespaces, N veths to the switch
 *     direct  one host linked to N others: N + 1 namespaces, N veths
 *     tree    N hosts in a complete 4-ary tree: N namespaces, N - 1 veths
 *   prints "floor TOPO N up_s namespaces_s veths_s close_s" (close: the fds;
 *   the kernel frees the namespaces afterwards, see settle)
 *   bench_startup_floor settle [TIMEOUT_S]
 *   prints the seconds until the kernel has finished a teardown in progress:
 *   until probes 5 ms apart have made a namespace for 0.15 s in a row about
 *   as fast as on an idle kernel (the base, given as BASE_US in the
 *   environment, or measured now when absent: "settle-base" prints it). A
 *   teardown holds the locks a new namespace needs.
 *
 * Namespaces: unshare(CLONE_NEWNET) on THREADS threads (default: one per
 * core, at least 2), each keeping an fd of /proc/thread-self/ns/net: no
 * fork, no mount. Veths: RTM_NEWLINK requests with both ends placed straight
 * into their namespaces by fd (IFLA_NET_NS_FD on the device and on its peer),
 * each end with one queue each way asked for (IFLA_NUM_TX/RX_QUEUES: left
 * out, the kernel makes one per CPU and then cuts them to one, waiting for
 * an expedited RCU grace period per cut), 128 per sendmsg() on one raw
 * rtnetlink socket, every ack checked. Release:
 * close every fd; the kernel's cleanup_net then frees all namespaces dying
 * at that moment in one batch.
 * Needs root. Exit 77 without it (the bench says why), 1 on a failure. */
#define _GNU_SOURCE

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 128
#define MSG_BYTES 256

static void die(const char *what)
{
    fprintf(stderr, "bench_startup_floor: %s: %s\n", what, strerror(errno));
    exit(errno == EPERM ? 77 : 1);
}

/* ---- namespaces ---- */

struct ns_job {
    int *fds;
    size_t first, count, stride;
    int error;
};

static void *make_namespaces(void *p)
{
    struct ns_job *j = p;
    for (size_t i = j->first; i < j->count; i += j->stride) {
        if (unshare(CLONE_NEWNET) < 0 ||
            (j->fds[i] = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
            j->error = errno;
            break;
        }
    }
    return NULL;
}

static void namespaces(int *fds, size_t n, unsigned threads)
{
    pthread_t t[16];
    struct ns_job jobs[16];
    if (threads > 16) threads = 16;
    for (unsigned i = 0; i < threads; i++) {
        jobs[i] = (struct ns_job){fds, i, n, threads, 0};
        if (pthread_create(&t[i], NULL, make_namespaces, &jobs[i]) != 0) die("pthread_create");
    }
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        if (jobs[i].error) {
            errno = jobs[i].error;
            die("unshare(CLONE_NEWNET)");
        }
    }
}

/* ---- veths over raw rtnetlink ---- */

static struct rtattr *attr_put(struct nlmsghdr *h, int type, const void *data, size_t len)
{
    struct rtattr *a = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = (unsigned short)type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    if (len) memcpy(RTA_DATA(a), data, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
    return a;
}

static void attr_end(struct nlmsghdr *h, struct rtattr *nest)
{
    nest->rta_len = (unsigned short)((char *)h + h->nlmsg_len - (char *)nest);
}

/* One RTM_NEWLINK: end a named name_a in ns_a, its peer name_b in ns_b. */
static void veth_msg(struct nlmsghdr *h, uint32_t seq, const char *name_a, int ns_a,
                     const char *name_b, int ns_b)
{
    memset(h, 0, MSG_BYTES);
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    h->nlmsg_type = RTM_NEWLINK;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    h->nlmsg_seq = seq;
    uint32_t fa = (uint32_t)ns_a, fb = (uint32_t)ns_b, one = 1;
    attr_put(h, IFLA_IFNAME, name_a, strlen(name_a) + 1);
    attr_put(h, IFLA_NET_NS_FD, &fa, sizeof fa);
    attr_put(h, IFLA_NUM_TX_QUEUES, &one, sizeof one);
    attr_put(h, IFLA_NUM_RX_QUEUES, &one, sizeof one);
    struct rtattr *info = attr_put(h, IFLA_LINKINFO, NULL, 0);
    attr_put(h, IFLA_INFO_KIND, "veth", 5);
    struct rtattr *data = attr_put(h, IFLA_INFO_DATA, NULL, 0);
    struct rtattr *peer = attr_put(h, VETH_INFO_PEER, NULL, 0);
    struct ifinfomsg ifi = {0};
    memcpy((char *)h + h->nlmsg_len, &ifi, sizeof ifi); /* the peer's ifinfomsg */
    h->nlmsg_len += NLMSG_ALIGN(sizeof ifi);
    attr_put(h, IFLA_IFNAME, name_b, strlen(name_b) + 1);
    attr_put(h, IFLA_NET_NS_FD, &fb, sizeof fb);
    attr_put(h, IFLA_NUM_TX_QUEUES, &one, sizeof one);
    attr_put(h, IFLA_NUM_RX_QUEUES, &one, sizeof one);
    attr_end(h, peer);
    attr_end(h, data);
    attr_end(h, info);
}

static void collect_acks(int sock, size_t want)
{
    static char buf[1 << 16];
    size_t got = 0;
    while (got < want) {
        ssize_t len = recv(sock, buf, sizeof buf, 0);
        if (len < 0) die("recv ack");
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
             h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type != NLMSG_ERROR) continue;
            int error = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
            if (error) {
                errno = -error;
                die("RTM_NEWLINK veth");
            }
            got++;
        }
    }
}

/* Link l joins node a[l] (its end "p<l>") and node b[l] (its end "e<l>"). */
static void veths(const int *fds, const size_t *a, const size_t *b, size_t links)
{
    int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (sock < 0) die("socket(NETLINK_ROUTE)");
    int bytes = 4 << 20, one = 1;
    setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes);
    setsockopt(sock, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes);
    setsockopt(sock, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    static char msgs[BATCH][MSG_BYTES];
    struct iovec iov[BATCH];
    for (size_t l = 0; l < links;) {
        size_t k = 0;
        for (; k < BATCH && l < links; k++, l++) {
            char na[16], nb[16];
            snprintf(na, sizeof na, "p%zu", l);
            snprintf(nb, sizeof nb, "e%zu", l);
            struct nlmsghdr *h = (struct nlmsghdr *)msgs[k];
            veth_msg(h, (uint32_t)l + 1, na, fds[a[l]], nb, fds[b[l]]);
            iov[k] = (struct iovec){h, h->nlmsg_len};
        }
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        struct msghdr m = {
            .msg_name = &kernel, .msg_namelen = sizeof kernel, .msg_iov = iov, .msg_iovlen = k};
        if (sendmsg(sock, &m, 0) < 0) die("sendmsg RTM_NEWLINK");
        collect_acks(sock, k);
    }
    close(sock);
}

/* ---- topologies ---- */

/* Fills a/b with each link's two nodes; returns the namespace count. */
static size_t topology(const char *topo, size_t n, size_t *a, size_t *b, size_t *links)
{
    if (strcmp(topo, "star") == 0 || strcmp(topo, "direct") == 0) {
        for (size_t i = 0; i < n; i++)
            a[i] = 0, b[i] = i + 1; /* node 0: switch or server */
        *links = n;
        return n + 1;
    }
    if (strcmp(topo, "tree") == 0) {
        for (size_t i = 1; i < n; i++)
            a[i - 1] = (i - 1) / 4, b[i - 1] = i;
        *links = n - 1;
        return n;
    }
    fprintf(stderr, "bench_startup_floor: topology must be star, direct or tree, got '%s'\n", topo);
    exit(2);
}

static void raise_fd_limit(size_t need)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < need + 64) {
        r.rlim_cur = r.rlim_max > need + 64 ? need + 64 : r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static int floor_main(const char *topo, size_t n, unsigned threads)
{
    size_t *a = calloc(n + 1, sizeof *a), *b = calloc(n + 1, sizeof *b), links = 0;
    if (!a || !b) die("calloc");
    size_t count = topology(topo, n, a, b, &links);
    int *fds = calloc(count, sizeof *fds);
    if (!fds) die("calloc");
    raise_fd_limit(count);
    double t0 = mono_s();
    namespaces(fds, count, threads);
    double t1 = mono_s();
    veths(fds, a, b, links);
    double t2 = mono_s();
    for (size_t i = 0; i < count; i++)
        close(fds[i]);
    double t3 = mono_s();
    printf("floor %s %zu %.4f %.4f %.4f %.4f\n", topo, n, t2 - t0, t1 - t0, t2 - t1, t3 - t2);
    free(a);
    free(b);
    free(fds);
    return 0;
}

/* ---- settle ---- */

static void *probe_thread(void *p)
{
    *(int *)p = unshare(CLONE_NEWNET) < 0 ? errno : 0;
    return NULL; /* the namespace goes with the thread */
}

static double probe_us(void)
{
    pthread_t t;
    int error = 0;
    double t0 = mono_s();
    if (pthread_create(&t, NULL, probe_thread, &error) != 0) die("pthread_create");
    pthread_join(t, NULL);
    if (error) {
        errno = error;
        die("unshare(CLONE_NEWNET)");
    }
    return (mono_s() - t0) * 1e6;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double base_us(void)
{
    const char *env = getenv("BASE_US");
    if (env && atof(env) > 0) return atof(env);
    double v[7];
    for (int i = 0; i < 7; i++) {
        v[i] = probe_us();
        usleep(5000);
    }
    qsort(v, 7, sizeof *v, cmp_double);
    return v[3];
}

/* Settled once probes have been fast for SETTLE_SPAN_S in a row: the
 * kernel's cleanup work starts a few milliseconds after the last fd closes,
 * so a few fast probes right away prove nothing. */
#define SETTLE_SPAN_S 0.15

static int settle_main(double timeout_s)
{
    double base = base_us(), t0 = mono_s(), first_fast = -1;
    while (mono_s() - t0 < timeout_s) {
        double t = mono_s();
        if (probe_us() < 2 * base + 500) {
            if (first_fast < 0) first_fast = t;
            if (mono_s() - first_fast >= SETTLE_SPAN_S) break;
        } else {
            first_fast = -1;
        }
        usleep(5000);
    }
    printf("%.4f\n", (first_fast >= 0 ? first_fast : mono_s()) - t0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "settle-base") == 0) {
        unsetenv("BASE_US");
        printf("%.0f\n", base_us());
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "settle") == 0)
        return settle_main(argc > 2 ? atof(argv[2]) : 30.0);
    if (argc < 3) {
        fprintf(stderr, "usage: bench_startup_floor star|direct|tree N [THREADS]\n"
                        "       bench_startup_floor settle [TIMEOUT_S] | settle-base\n");
        return 2;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = argc > 3 ? (unsigned)atoi(argv[3]) : (cores > 2 ? (unsigned)cores : 2);
    return floor_main(argv[1], strtoul(argv[2], NULL, 10), threads ? threads : 1);
}

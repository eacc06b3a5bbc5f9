/* netns.h — anonymous network namespaces held by file descriptors.
 *
 * Provides creation of network namespaces without bind mounts (so they die
 * with the last fd or process that holds them: docs/guide.md "Crashes and cleanup"), one at
 * a time or many in parallel; entering and leaving a namespace on the calling
 * thread; an rtnetlink socket bound inside a namespace; and sysctl writes in
 * the namespace the calling thread is in.
 *
 * A struct emu_netns owns its namespace fd and its socket; emu_netns_close()
 * releases both. Every function returns 0 (or a valid pointer) on success and
 * -1 (NULL) with a one-line message in err on failure. */
#pragma once

#include <stddef.h>

struct nl_sock;

/* Set up while the namespace is being created (the thread is inside it
 * anyway, so this costs no extra setns). */
enum emu_netns_flags {
    EMU_NETNS_SOCKET = 1 << 0, /* open ns->sock inside the namespace */
    EMU_NETNS_LO_UP = 1 << 1,  /* bring lo up (implies SOCKET) */
    /* A router's namespace: no reverse-path filter in conf/all where the
     * host's settings are inherited. Each interface needs
     * emu_nl_link_node_conf_build (forwarding on, no redirects). */
    EMU_NETNS_FORWARDING = 1 << 2,
    EMU_NETNS_NO_IPV6 = 1 << 3, /* no IPv6 on new links: no DAD/RS/MLD noise on shaped links */
};

struct emu_netns {
    int fd;               /* O_CLOEXEC fd of the namespace; -1 when closed */
    struct nl_sock *sock; /* rtnetlink socket inside it, or NULL */
    int next_ifindex;     /* first ifindex no link has (with a socket), else 0 */
};

/* Creates one namespace. Runs unshare(CLONE_NEWNET) on the calling thread
 * and returns it to its namespace before returning. */
int emu_netns_create(struct emu_netns *ns, unsigned flags, char *err, size_t errlen);

/* Creates count namespaces on up to `threads` helper threads (0 = one per
 * online CPU, at most 8): namespace creation is CPU-bound kernel work that
 * scales with cores. On failure every namespace already made is closed. */
int emu_netns_create_many(struct emu_netns *ns, size_t count, unsigned flags, unsigned threads,
                          char *err, size_t errlen);

/* An ifindex for a new link in ns (emu_nl_veth_end.ifindex), so its index
 * is known without a lookup; 0 (= the kernel picks) when ns was made without
 * a socket. Fresh namespaces usually hold only lo, but some kernels add
 * fallback tunnel devices (sit0, tunl0, ...): creation lists the links once. */
int emu_netns_ifindex_alloc(struct emu_netns *ns);

/* Releases the socket and the fd. Idempotent; leaves ns->fd == -1. */
void emu_netns_close(struct emu_netns *ns);

/* Moves the calling thread into the namespace of ns_fd; *saved_fd receives an
 * fd of the namespace it was in, for emu_netns_leave(). Sockets created in
 * between belong to the entered namespace and stay there. */
int emu_netns_enter(int ns_fd, int *saved_fd, char *err, size_t errlen);

/* Returns the calling thread to *saved_fd's namespace and closes it. A failure
 * leaves the thread in the wrong namespace: callers should treat it as fatal. */
int emu_netns_leave(int *saved_fd, char *err, size_t errlen);

/* An rtnetlink socket bound inside the namespace of ns_fd (enter, open,
 * leave). The caller owns it: emu_nl_close(). */
struct nl_sock *emu_netns_nl_open(int ns_fd, char *err, size_t errlen);

/* Writes value to /proc/sys/<key> ("net/ipv4/ip_forward") of the namespace
 * the calling thread is in: /proc/sys/net resolves to the opener's network
 * namespace when the file is opened, so enter first. */
int emu_netns_sysctl_write(const char *key, const char *value, char *err, size_t errlen);

/* The namespace's inode number (as in "net:[4026532281]"), for messages and
 * for telling namespaces apart; 0 when ns_fd is not valid. */
unsigned long emu_netns_inode(int ns_fd);

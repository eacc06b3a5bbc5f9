/* nl_addr.c — IPv4 addresses on interfaces and the loopback node address
 * (see nl.h).
 *
 * A node's stable address lives on lo as a /32 with global scope, so it is
 * the same whichever link a packet uses, and routes can prefer it as source. */
#include "emu/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>

#include <netlink/addr.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>

struct nl_msg *emu_nl_addr_build(int ifindex, uint32_t addr, unsigned prefix_len)
{
    uint32_t wire = htonl(addr);
    struct rtnl_addr *object = rtnl_addr_alloc();
    struct nl_addr *local = nl_addr_build(AF_INET, &wire, sizeof wire);
    struct nl_msg *msg = NULL;

    if (object && local && prefix_len <= 32) {
        nl_addr_set_prefixlen(local, (int)prefix_len);
        rtnl_addr_set_ifindex(object, ifindex);
        rtnl_addr_set_family(object, AF_INET);
        if (rtnl_addr_set_local(object, local) < 0 ||
            rtnl_addr_build_add_request(object, NLM_F_CREATE | NLM_F_EXCL, &msg) < 0)
            msg = NULL;
    }
    if (local) nl_addr_put(local);
    if (object) rtnl_addr_put(object);
    return msg;
}

int emu_nl_addr_add(struct nl_sock *sock, int ifindex, uint32_t addr, unsigned prefix_len,
                    const char *name, char *err, size_t errlen)
{
    char text[INET_ADDRSTRLEN];
    uint32_t wire = htonl(addr);

    inet_ntop(AF_INET, &wire, text, sizeof text);
    if (prefix_len > 32) {
        snprintf(err, errlen, "bad prefix length %u for %s", prefix_len, text);
        return -1;
    }
    if (name && *name)
        return emu_nl_run(sock, emu_nl_addr_build(ifindex, addr, prefix_len), err, errlen,
                          "add address %s/%u to %s", text, prefix_len, name);
    return emu_nl_run(sock, emu_nl_addr_build(ifindex, addr, prefix_len), err, errlen,
                      "add address %s/%u to ifindex %d", text, prefix_len, ifindex);
}

int emu_nl_interface_up(struct nl_sock *sock, int ifindex, const char *name, uint32_t addr,
                        unsigned prefix_len, char *err, size_t errlen)
{
    char text[INET_ADDRSTRLEN], label[32];
    uint32_t wire = htonl(addr);
    struct emu_nl_batch batch;
    int rc;

    if (!name || !*name) {
        snprintf(label, sizeof label, "ifindex %d", ifindex);
        name = label;
    }
    /* Both requests in one sendmsg(): this runs for every interface. */
    emu_nl_batch_init(&batch, sock);
    emu_nl_batch_add(&batch, emu_nl_link_updown_build(ifindex, 1), "set %s up", name);
    if (addr) {
        inet_ntop(AF_INET, &wire, text, sizeof text);
        emu_nl_batch_add(&batch, emu_nl_addr_build(ifindex, addr, prefix_len),
                         "add address %s/%u to %s", text, prefix_len, name);
    }
    rc = emu_nl_batch_run(&batch, err, errlen);
    emu_nl_batch_free(&batch);
    return rc;
}

int emu_nl_loopback_setup(struct nl_sock *sock, uint32_t node_addr, char *err, size_t errlen)
{
    return emu_nl_interface_up(sock, EMU_NL_LOOPBACK_IFINDEX, "lo", node_addr, 32, err, errlen);
}

/* nl_qdisc.c — the qdisc trees of topo/shape.h on an interface's egress (see nl.h).
 *
 * The tc messages are built here with libnl-3's message API rather than
 * libnl-route's qdisc modules: libnl 3.7 gives netem 32-bit microsecond
 * delays and no 64-bit latency attributes, gives TBF no 64-bit rate, and
 * computes HTB rate tables the kernel no longer needs (it computes rates
 * itself when the ratespec says TC_LINKLAYER_ETHERNET). Layouts follow
 * iproute2's tc: netem's TCA_OPTIONS is a struct tc_netem_qopt followed by
 * attributes, and its length covers both; bfifo's is a bare tc_fifo_qopt. */
#include "emu/nl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

#define QDISC_R2Q 10 /* HTB's rate-to-quantum default; quantum is set explicitly anyway */

/* A tc request; kind NULL leaves TCA_KIND out (deletes). */
static struct nl_msg *qdisc_msg(int type, int flags, int ifindex, uint32_t parent, uint32_t handle,
                                const char *kind)
{
    struct tcmsg tcm = {.tcm_family = AF_UNSPEC,
                        .tcm_ifindex = ifindex,
                        .tcm_parent = parent,
                        .tcm_handle = handle};
    struct nl_msg *msg = nlmsg_alloc_simple(type, flags);

    if (!msg) return NULL;
    if (nlmsg_append(msg, &tcm, sizeof tcm, NLMSG_ALIGNTO) < 0 ||
        (kind && nla_put_string(msg, TCA_KIND, kind) < 0)) {
        nlmsg_free(msg);
        return NULL;
    }
    return msg;
}

/* Rates of 2^32 bytes/s (34 Gbit/s) and more go in a 64-bit attribute, with
 * the 32-bit field saturated, as tc does. */
static void qdisc_ratespec(struct tc_ratespec *spec, uint64_t bytes_per_second)
{
    memset(spec, 0, sizeof *spec);
    spec->linklayer = TC_LINKLAYER_ETHERNET;
    spec->cell_align = -1;
    spec->rate = bytes_per_second > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes_per_second;
}

/* Closes the TCA_OPTIONS nest, or frees msg when anything failed. */
static struct nl_msg *qdisc_finish(struct nl_msg *msg, struct nlattr *options, int failed)
{
    if (failed || !options) {
        nlmsg_free(msg);
        return NULL;
    }
    nla_nest_end(msg, options);
    return msg;
}

static struct nl_msg *qdisc_htb_build(int ifindex, int flags)
{
    struct tc_htb_glob glob = {.version = TC_HTB_PROTOVER,
                               .rate2quantum = QDISC_R2Q,
                               .defcls = TC_H_MIN(TOPO_SHAPE_CLASS_HANDLE)};
    struct nl_msg *msg =
        qdisc_msg(RTM_NEWQDISC, flags, ifindex, TC_H_ROOT, TOPO_SHAPE_ROOT_HANDLE, "htb");
    struct nlattr *options;

    if (!msg) return NULL;
    options = nla_nest_start(msg, TCA_OPTIONS);
    return qdisc_finish(msg, options, !options || nla_put(msg, TCA_HTB_INIT, sizeof glob, &glob));
}

static struct nl_msg *qdisc_htb_class_build(int ifindex, int flags, const struct topo_shape_rate *r)
{
    struct tc_htb_opt opt = {
        .buffer = r->buffer_ticks, .cbuffer = r->buffer_ticks, .quantum = r->quantum};
    struct nl_msg *msg = qdisc_msg(RTM_NEWTCLASS, flags, ifindex, TOPO_SHAPE_ROOT_HANDLE,
                                   TOPO_SHAPE_CLASS_HANDLE, "htb");
    struct nlattr *options;
    int failed;

    if (!msg) return NULL;
    qdisc_ratespec(&opt.rate, r->bytes_per_second);
    opt.ceil = opt.rate; /* ceil = rate: the class never borrows */
    options = nla_nest_start(msg, TCA_OPTIONS);
    failed = !options || nla_put(msg, TCA_HTB_PARMS, sizeof opt, &opt) < 0;
    if (!failed && r->bytes_per_second > UINT32_MAX)
        failed = nla_put_u64(msg, TCA_HTB_RATE64, r->bytes_per_second) < 0 ||
                 nla_put_u64(msg, TCA_HTB_CEIL64, r->bytes_per_second) < 0;
    return qdisc_finish(msg, options, failed);
}

static struct nl_msg *qdisc_tbf_build(int ifindex, int flags, const struct topo_shape_plan *plan)
{
    struct tc_tbf_qopt opt = {.limit = plan->queue_bytes, .buffer = plan->rate.buffer_ticks};
    struct nl_msg *msg =
        qdisc_msg(RTM_NEWQDISC, flags, ifindex, TC_H_ROOT, TOPO_SHAPE_ROOT_HANDLE, "tbf");
    struct nlattr *options;
    int failed;

    if (!msg) return NULL;
    qdisc_ratespec(&opt.rate, plan->rate.bytes_per_second);
    options = nla_nest_start(msg, TCA_OPTIONS);
    failed = !options || nla_put(msg, TCA_TBF_PARMS, sizeof opt, &opt) < 0 ||
             nla_put_u32(msg, TCA_TBF_BURST, plan->rate.burst_bytes) < 0;
    if (!failed && plan->rate.bytes_per_second > UINT32_MAX)
        failed = nla_put_u64(msg, TCA_TBF_RATE64, plan->rate.bytes_per_second) < 0;
    return qdisc_finish(msg, options, failed);
}

static struct nl_msg *qdisc_netem_build(int ifindex, int flags, uint32_t parent,
                                        const struct topo_shape_netem *netem)
{
    struct tc_netem_qopt opt = {.latency = topo_shape_ticks(netem->latency_ns),
                                .limit = netem->limit,
                                .loss = netem->loss,
                                .jitter = topo_shape_ticks(netem->jitter_ns)};
    int64_t latency = (int64_t)netem->latency_ns, jitter = (int64_t)netem->jitter_ns;
    struct nl_msg *msg =
        qdisc_msg(RTM_NEWQDISC, flags, ifindex, parent, TOPO_SHAPE_LEAF_HANDLE, "netem");
    struct nlattr *options;
    int failed;

    if (!msg) return NULL;
    /* The 64-bit nanosecond attributes follow the struct inside TCA_OPTIONS;
     * ending the nest after them makes TCA_OPTIONS' length cover them. */
    options = nla_nest_start(msg, TCA_OPTIONS);
    failed = !options || nlmsg_append(msg, &opt, sizeof opt, NLMSG_ALIGNTO) < 0 ||
             nla_put(msg, TCA_NETEM_LATENCY64, sizeof latency, &latency) < 0 ||
             nla_put(msg, TCA_NETEM_JITTER64, sizeof jitter, &jitter) < 0;
    return qdisc_finish(msg, options, failed);
}

static struct nl_msg *qdisc_bfifo_build(int ifindex, int flags, uint32_t parent, uint32_t limit)
{
    struct tc_fifo_qopt opt = {.limit = limit};
    struct nl_msg *msg =
        qdisc_msg(RTM_NEWQDISC, flags, ifindex, parent, TOPO_SHAPE_LEAF_HANDLE, "bfifo");

    if (msg && nla_put(msg, TCA_OPTIONS, sizeof opt, &opt) < 0) {
        nlmsg_free(msg);
        return NULL;
    }
    return msg;
}

/* TBF keeps its own byte-limited fifo, so it needs no bfifo leaf. */
static int qdisc_needs_bfifo(const struct topo_shape_plan *plan)
{
    return plan->leaf == TOPO_SHAPE_LEAF_BFIFO &&
           !(plan->has_rate && plan->root == TOPO_SHAPE_ROOT_TBF);
}

int emu_nl_shape_build(const struct topo_shape_plan *plan, int ifindex, int change,
                       struct nl_msg *msgs[3])
{
    int flags = change ? 0 : NLM_F_CREATE | NLM_F_EXCL;
    uint32_t leaf_parent = plan->has_rate ? TOPO_SHAPE_CLASS_HANDLE : TC_H_ROOT;
    int n = 0;

    if (plan->has_rate && plan->root == TOPO_SHAPE_ROOT_HTB) {
        if (!change) /* the HTB qdisc itself has nothing to change */
            msgs[n++] = qdisc_htb_build(ifindex, flags);
        msgs[n++] = qdisc_htb_class_build(ifindex, flags, &plan->rate);
    } else if (plan->has_rate) {
        msgs[n++] = qdisc_tbf_build(ifindex, flags, plan);
    }
    if (plan->leaf == TOPO_SHAPE_LEAF_NETEM)
        msgs[n++] = qdisc_netem_build(ifindex, flags, leaf_parent, &plan->netem);
    else if (qdisc_needs_bfifo(plan))
        msgs[n++] = qdisc_bfifo_build(ifindex, flags, leaf_parent, plan->queue_bytes);
    for (int i = 0; i < n; i++)
        if (!msgs[i]) {
            for (int j = 0; j < n; j++)
                if (msgs[j]) nlmsg_free(msgs[j]);
            return -1;
        }
    return n;
}

static const char *qdisc_label(const char *name, int ifindex, char *buf, size_t buflen)
{
    if (name && *name) return name;
    snprintf(buf, buflen, "ifindex %d", ifindex);
    return buf;
}

/* "qdisc htb (handle 1:)" or "class htb (handle 1:1)", numbered as tc does. */
static void qdisc_describe(struct nl_msg *msg, char *buf, size_t buflen)
{
    struct nlmsghdr *nlh = nlmsg_hdr(msg);
    const struct tcmsg *tcm = NLMSG_DATA(nlh);
    struct nlattr *kind = nlmsg_find_attr(nlh, sizeof *tcm, TCA_KIND);
    uint32_t minor = TC_H_MIN(tcm->tcm_handle);
    char minor_text[16] = "";

    if (minor) snprintf(minor_text, sizeof minor_text, "%x", minor);
    snprintf(
        buf, buflen, "%s %s (handle %x:%s)", nlh->nlmsg_type == RTM_NEWTCLASS ? "class" : "qdisc",
        kind ? (const char *)nla_data(kind) : "?", TC_H_MAJ(tcm->tcm_handle) >> 16, minor_text);
}

/* Sends the plan's messages as one batch; *made_root tells whether its first
 * request (the root qdisc, when creating) succeeded. */
static int qdisc_send(struct nl_sock *sock, int ifindex, const char *label,
                      const struct topo_shape_plan *plan, int change, int *made_root, char *err,
                      size_t errlen)
{
    static const char *const verbs[] = {"shape", "change shaping of"};
    struct nl_msg *msgs[3];
    struct emu_nl_batch batch;
    char what[64];
    int n = emu_nl_shape_build(plan, ifindex, change, msgs), rc;

    if (n < 0) return emu_nl_fail(err, errlen, -ENOMEM, NULL, "%s %s", verbs[change], label);
    emu_nl_batch_init(&batch, sock);
    for (int i = 0; i < n; i++) {
        qdisc_describe(msgs[i], what, sizeof what);
        emu_nl_batch_add(&batch, msgs[i], "%s %s: %s", verbs[change], label, what);
    }
    rc = emu_nl_batch_run(&batch, err, errlen);
    *made_root = batch.count > 0 && batch.entries[0].error == 0;
    emu_nl_batch_free(&batch);
    return rc;
}

int emu_nl_shape_clear(struct nl_sock *sock, int ifindex, const char *name, char *err,
                       size_t errlen)
{
    char label[32], extack[EMU_NL_EXTACK_MAX] = "";
    /* No kind and no handle: whatever root qdisc there is. */
    struct nl_msg *msg = qdisc_msg(RTM_DELQDISC, 0, ifindex, TC_H_ROOT, 0, NULL);
    int error;

    error = msg ? emu_nl_talk(sock, msg, extack, sizeof extack) : -ENOMEM;
    if (msg) nlmsg_free(msg);
    if (error == 0 || error == -ENOENT) /* no tree (noqueue) is what we want */
        return 0;
    return emu_nl_fail(err, errlen, error, extack, "remove shaping of %s",
                       qdisc_label(name, ifindex, label, sizeof label));
}

int emu_nl_shape_apply(struct nl_sock *sock, int ifindex, const char *name,
                       const struct topo_shape_plan *plan, char *err, size_t errlen)
{
    char label[32], ignored[8];
    int made_root = 0;

    if (plan->leaf == TOPO_SHAPE_LEAF_NONE) return 0;
    if (qdisc_send(sock, ifindex, qdisc_label(name, ifindex, label, sizeof label), plan, 0,
                   &made_root, err, errlen) < 0) {
        /* The kernel carries on after a failed request: remove what we made
         * (only what we made: a tree that was there before stays). */
        if (made_root) emu_nl_shape_clear(sock, ifindex, name, ignored, sizeof ignored);
        return -1;
    }
    return 0;
}

static int qdisc_same_tree(const struct topo_shape_plan *a, const struct topo_shape_plan *b)
{
    return a->has_rate == b->has_rate && (!a->has_rate || a->root == b->root) && a->leaf == b->leaf;
}

int emu_nl_shape_change(struct nl_sock *sock, int ifindex, const char *name,
                        const struct topo_shape_plan *from, const struct topo_shape_plan *to,
                        char *err, size_t errlen)
{
    char label[32];
    int made_root;

    if (to->leaf == TOPO_SHAPE_LEAF_NONE)
        return emu_nl_shape_clear(sock, ifindex, name, err, errlen);
    if (from->leaf != TOPO_SHAPE_LEAF_NONE && qdisc_same_tree(from, to))
        return qdisc_send(sock, ifindex, qdisc_label(name, ifindex, label, sizeof label), to, 1,
                          &made_root, err, errlen);
    /* A different tree: packets queued in the old one are dropped. */
    if (emu_nl_shape_clear(sock, ifindex, name, err, errlen) < 0) return -1;
    return emu_nl_shape_apply(sock, ifindex, name, to, err, errlen);
}

int emu_nl_qdisc_kind_known(struct nl_sock *sock, int ifindex, const char *kind, char *err,
                            size_t errlen)
{
    struct nl_msg *msg = qdisc_msg(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, ifindex, TC_H_ROOT,
                                   TOPO_SHAPE_ROOT_HANDLE, kind);
    struct nlattr *options = msg ? nla_nest_start(msg, TCA_OPTIONS) : NULL;
    char extack[EMU_NL_EXTACK_MAX];

    msg = qdisc_finish(msg, options, 0);
    if (!msg) return snprintf(err, errlen, "out of memory"), -1;
    int rc = emu_nl_talk(sock, msg, extack, sizeof extack);
    nlmsg_free(msg);
    if (rc == 0) {
        char ignored[8];
        emu_nl_shape_clear(sock, ifindex, kind, ignored, sizeof ignored);
        return 0;
    }
    if (rc == -EINVAL) return 0; /* it parsed our request: the kind exists */
    return emu_nl_fail(err, errlen, rc, extack, "create a %s qdisc", kind);
}

/* backend_pick.c — the "auto" backend decision (see backend_pick.h).
 *
 * Kernel first: qdiscs shape at line rate without a user-space hop. The
 * user backend (hiernet-linkd) needs only TAP devices and emulates every
 * parameter, so it is the fallback whenever a needed qdisc is missing. Both
 * build switches as Linux bridges. */
#include "controller/backend_pick.h"

#include <stdio.h>

/* The first feature the kernel backend lacks for needs, or -1. */
static int backend_kernel_missing(const struct emu_nl_features *f, unsigned needs)
{
    if (!f->available[EMU_NL_FEATURE_VETH]) return EMU_NL_FEATURE_VETH;
    if ((needs & BACKEND_NEED_BRIDGE) && !f->available[EMU_NL_FEATURE_BRIDGE])
        return EMU_NL_FEATURE_BRIDGE;
    if ((needs & BACKEND_NEED_RATE) && !f->available[EMU_NL_FEATURE_HTB] &&
        !f->available[EMU_NL_FEATURE_TBF])
        return EMU_NL_FEATURE_HTB;
    if ((needs & BACKEND_NEED_NETEM) && !f->available[EMU_NL_FEATURE_NETEM])
        return EMU_NL_FEATURE_NETEM;
    return -1;
}

static int backend_user_missing(const struct emu_nl_features *f, unsigned needs)
{
    if (!f->available[EMU_NL_FEATURE_TUN]) return EMU_NL_FEATURE_TUN;
    if ((needs & BACKEND_NEED_BRIDGE) && !f->available[EMU_NL_FEATURE_BRIDGE])
        return EMU_NL_FEATURE_BRIDGE;
    return -1;
}

/* What each feature is for, as said in the reason. */
static const char *backend_feature_use(int feature)
{
    switch (feature) {
    case EMU_NL_FEATURE_VETH:
        return "kernel links";
    case EMU_NL_FEATURE_BRIDGE:
        return "switch nodes";
    case EMU_NL_FEATURE_TUN:
        return "the user backend's TAP links";
    case EMU_NL_FEATURE_HTB:
        return "bandwidth limits (neither htb nor tbf works)";
    case EMU_NL_FEATURE_NETEM:
        return "delay, jitter and loss";
    case EMU_NL_FEATURE_RED:
        return "ECN marking (ecn_threshold)";
    default:
        return "links";
    }
}

int backend_pick(const struct emu_nl_features *f, unsigned needs, char *why, size_t whylen)
{
    int kernel_missing, user_missing;

    if (!f) {
        snprintf(why, whylen,
                 "no network namespace can be created here (root or CAP_SYS_ADMIN "
                 "and CAP_NET_ADMIN needed): only backend none, without link "
                 "emulation, can run");
        return TOPO_BACKEND_NONE;
    }
    kernel_missing = backend_kernel_missing(f, needs);
    if (kernel_missing < 0) {
        snprintf(why, whylen,
                 "the kernel has every qdisc the links need (%s%s): links are "
                 "shaped in the kernel",
                 f->available[EMU_NL_FEATURE_HTB] ? "htb" : "tbf",
                 (needs & BACKEND_NEED_NETEM) ? ", netem" : "");
        return TOPO_BACKEND_KERNEL;
    }
    user_missing = backend_user_missing(f, needs);
    if (user_missing < 0) {
        snprintf(why, whylen,
                 "the kernel lacks %s, needed for %s (%s): hiernet-linkd emulates "
                 "links on TAP devices",
                 emu_nl_feature_name(kernel_missing), backend_feature_use(kernel_missing),
                 f->reason[kernel_missing]);
        return TOPO_BACKEND_USER;
    }
    snprintf(why, whylen, "neither link backend can run: kernel lacks %s (%s); user lacks %s (%s)",
             emu_nl_feature_name(kernel_missing), f->reason[kernel_missing],
             emu_nl_feature_name(user_missing), f->reason[user_missing]);
    return TOPO_BACKEND_NONE;
}

int doctor_pick_backend(const struct emu_nl_features *f, char *why, size_t whylen)
{
    return backend_pick(f, BACKEND_NEED_ALL, why, whylen);
}

/* backend_pick.h — which link backend "auto" uses on this host, and why.
 *
 * Provides the one decision shared by `hiernet doctor` and the network start
 * code: given what emu_nl_probe() found, kernel (veth + HTB/TBF + netem
 * qdiscs), user (hiernet-linkd on TAP devices) or none (nothing can emulate
 * links here). Pure functions of their arguments; owns nothing. */
#pragma once

#include <stddef.h>

#include "topo/network.h"
#include "emu/nl.h"

/* What the links of a network ask for. */
enum backend_need {
    BACKEND_NEED_RATE = 1 << 0,   /* bw= on some link: HTB or TBF */
    BACKEND_NEED_NETEM = 1 << 1,  /* delay=, jitter= or loss= on some link: netem */
    BACKEND_NEED_BRIDGE = 1 << 2, /* a switch node: a Linux bridge */
};
#define BACKEND_NEED_ALL (BACKEND_NEED_RATE | BACKEND_NEED_NETEM | BACKEND_NEED_BRIDGE)

/* The backend for links needing `needs` (enum backend_need bits), as an enum
 * topo_backend: TOPO_BACKEND_KERNEL when the kernel has every qdisc they
 * need, else TOPO_BACKEND_USER when TAP devices work, else TOPO_BACKEND_NONE.
 * features == NULL means the probe could not run (no privilege to create a
 * namespace): TOPO_BACKEND_NONE. why gets one line saying why (without
 * "because"), naming what is missing and the probe's reason. */
int backend_pick(const struct emu_nl_features *features, unsigned needs, char *why, size_t whylen);

/* The doctor's answer: backend_pick() for a network that uses everything
 * (rates, delay/jitter/loss, switches), since most scenarios do. */
int doctor_pick_backend(const struct emu_nl_features *features, char *why, size_t whylen);

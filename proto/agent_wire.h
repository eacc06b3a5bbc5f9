/* agent_wire.h — the messages between the controller and a `hiernet agent`
 * (issue 20; docs/design-notes.md, "Several machines, the design").
 *
 * The agent speaks MessagePack-RPC on its stdin and stdout, framed and
 * enveloped by proto/protocol.h exactly as a peer's control channel is;
 * this module names the messages (all of them, in one table, including
 * those the part build will carry and that nobody serves yet) and encodes
 * and decodes the params and results of the ones served today: hello,
 * ping and teardown. Decoders check every field and say which is wrong;
 * they copy what they keep, so a decoded struct outlives the message.
 * Encoders write a params or result map into a caller's msgmap. */
#pragma once

#include "proto/msgmap.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum agent_method {
    AGENT_UNKNOWN = 0,
    AGENT_HELLO,    /* request: versions, machine, clocks */
    AGENT_PING,     /* request: the controller's send time */
    AGENT_TEARDOWN, /* request: release everything, then exit */
    /* Reserved for the part build (not served yet: answered "not available"). */
    AGENT_BUILD,
    AGENT_CALL,
    AGENT_LINK,
    AGENT_KILL,
    AGENT_RESTART,
    AGENT_PARTITION,
    AGENT_HEAL,
    AGENT_STATS, /* notification, agent to controller */
    AGENT_EXIT,  /* notification, agent to controller */
    AGENT_METHOD_COUNT
};

/* The wire name of a method ("hello"), "" for AGENT_UNKNOWN. */
const char *agent_method_name(enum agent_method m);
/* The method named by len bytes (not NUL-terminated), or AGENT_UNKNOWN. */
enum agent_method agent_method_find(const char *name, uint32_t len);
/* Whether the agent of this version serves the method. */
bool agent_method_served(enum agent_method m);

#define AGENT_VERSION_MAX 96
#define AGENT_NAME_MAX 64 /* a machine's name (TOPO_MACHINE_NAME_MAX) */
#define AGENT_RUN_ID_MAX 64
#define AGENT_ADDR_MAX 64 /* an IPv4 or IPv6 address as text */
#define AGENT_DEV_MAX 16  /* IFNAMSIZ */
#define AGENT_FEATURES_MAX 256

struct agent_hello {
    char version[AGENT_VERSION_MAX]; /* the controller's; the agent refuses another */
    char run_id[AGENT_RUN_ID_MAX];
    char machine[AGENT_NAME_MAX];
    int64_t clock_ns; /* the controller's CLOCK_MONOTONIC when sent */
};

struct agent_hello_reply {
    char version[AGENT_VERSION_MAX];
    char hostname[AGENT_NAME_MAX];
    /* Names of the kernel features the emu probe found, space-separated
     * ("veth bridge htb tbf"); "" when the probe could not run. */
    char features[AGENT_FEATURES_MAX];
    char underlay_address[AGENT_ADDR_MAX]; /* "" when unknown */
    char underlay_device[AGENT_DEV_MAX];
    int64_t underlay_mtu; /* 0 when unknown */
    int64_t uid;          /* the agent's effective uid */
    bool cap_net_admin;   /* in its effective set */
    int64_t clock_ns;     /* the agent's CLOCK_MONOTONIC when answering */
};

struct agent_ping {
    int64_t t0_ns; /* the controller's clock when sent */
};

struct agent_pong {
    int64_t t1_ns; /* the agent's clock when the ping was read */
    int64_t t2_ns; /* the agent's clock when the answer was written */
};

/* Encoders: the entries of the params (or result) map into m. */
void agent_wire_hello(struct msgmap *m, const struct agent_hello *h);
void agent_wire_hello_reply(struct msgmap *m, const struct agent_hello_reply *r);
void agent_wire_ping(struct msgmap *m, const struct agent_ping *p);
void agent_wire_pong(struct msgmap *m, const struct agent_pong *p);

/* Decoders of a params or result map: 0, or -1 with err naming the field
 * ("hello: field 'version': expected string, got integer"). Every field
 * is required; strings too long for their buffer are refused. */
int agent_wire_read_hello(const msgpack_object *map, struct agent_hello *out, char *err,
                          size_t errlen);
int agent_wire_read_hello_reply(const msgpack_object *map, struct agent_hello_reply *out, char *err,
                                size_t errlen);
int agent_wire_read_ping(const msgpack_object *map, struct agent_ping *out, char *err,
                         size_t errlen);
int agent_wire_read_pong(const msgpack_object *map, struct agent_pong *out, char *err,
                         size_t errlen);

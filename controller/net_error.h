/* net_error.h — the engine's one error convention: how a failure of a
 * network's build, start or run-time change is reported, by netrun (the
 * build) and netlife (the life cycle) alike. The failing step gives the
 * node and link at fault (-1: none) and says the whole line for a person
 * in message, naming them too; that line is what the Lua binding raises,
 * once (docs/design-notes.md, "One error convention"). */
#pragma once

enum net_error_code {
    NET_OK,
    NET_ERR_SCENARIO,    /* the network asked for cannot be built (exit 1) */
    NET_ERR_ENVIRONMENT, /* privilege, kernel feature, device (exit 3) */
    NET_ERR_PEER,        /* a peer refused or died during the handshake */
    NET_ERR_TIMEOUT,     /* peers did not answer within the start deadline */
    NET_ERR_STOPPED,     /* the network was stopped while it started */
};

struct net_error {
    enum net_error_code code;
    int node; /* the node at fault, or -1 */
    int link; /* the link at fault, or -1 */
    char message[1024];
};

/* No error: NET_OK, no node, no link, an empty message. */
void net_error_clear(struct net_error *e);
void net_error_set(struct net_error *e, enum net_error_code code, int node, int link,
                   const char *message);
/* A build step's failure: the environment's (env) or the scenario's. */
static inline enum net_error_code net_error_build_code(int env)
{
    return env ? NET_ERR_ENVIRONMENT : NET_ERR_SCENARIO;
}

/* privilege.h — who the run's helper processes become once set up.
 *
 * A controller running as root starts its peers and hiernet-linkd as root
 * (namespaces, TAP devices and bound sockets need it) and has them give up
 * root afterwards (common/privdrop.h) for an unprivileged user:
 * $HIERNET_PEER_USER (a user name or a numeric uid) if set, else "nobody".
 * Never root. An unprivileged controller has nothing to hand down: its
 * helpers keep its own uid (and still run without new privileges).
 *
 * Programs a scenario starts in nodes (node:run, node:spawn) are not
 * helpers: they run as the user who ran hiernet. Owns nothing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PRIVILEGE_ENV_USER "HIERNET_PEER_USER"
#define PRIVILEGE_DEFAULT_USER "nobody"

struct privilege_identity {
    bool drop; /* false: the controller is not root, nothing to drop */
    uid_t uid;
    gid_t gid;
    char arg[48];  /* "UID:GID" for --user, "" when !drop */
    char name[64]; /* the user, for messages */
};

/* Resolves the identity once per call. -1 with err (an unknown user, uid 0)
 * when the controller is root and no usable identity exists. */
int privilege_helper_identity(struct privilege_identity *id, char *err, size_t errlen);

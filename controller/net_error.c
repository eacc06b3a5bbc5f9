/* net_error.c — the engine's one error convention (see net_error.h). */
#include "controller/net_error.h"

#include <stdio.h>

void net_error_clear(struct net_error *e)
{
    *e = (struct net_error){NET_OK, -1, -1, ""};
}

void net_error_set(struct net_error *e, enum net_error_code code, int node, int link,
                   const char *message)
{
    *e = (struct net_error){code, node, link, ""};
    snprintf(e->message, sizeof e->message, "%s", message);
}

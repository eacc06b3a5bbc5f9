/* commands.h — the peer's control commands (DESIGN.md "Peer commands").
 *
 * commands_dispatch answers one request. ping, unknown methods and requests
 * with bad params are answered at once on the loop thread; every command
 * that touches the tensor store becomes a job on the worker and is answered
 * when the job is done. Jobs run in arrival order, so their responses keep
 * request order among themselves; answers given at once may overtake them.
 * The module owns the jobs it creates and frees them when they complete or
 * are cancelled. */
#pragma once

struct peer_server;
struct proto_msg;

/* msg must be a request (msg->kind == PROTO_REQUEST). */
void commands_dispatch(struct peer_server *s, const struct proto_msg *msg);

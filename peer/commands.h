/* commands.h — the peer's control commands (docs/lua-api.md "Peer commands";
 * docs/lua-api.md).
 *
 * commands_dispatch answers one request. ping, stats, peers, unknown methods
 * and requests with bad params are answered at once on the loop thread;
 * every other command becomes a job in the worker's FIFO (command_job.h) and
 * is answered when it is done. Jobs run in arrival order, so their responses
 * keep request order among themselves, except those that complete after the
 * worker moved on (send, background eval); answers given at once may
 * overtake them. The module owns the jobs it creates and frees them when
 * they complete or are cancelled. */
#pragma once

struct peer_server;
struct proto_msg;

/* msg must be a request (msg->kind == PROTO_REQUEST). */
void commands_dispatch(struct peer_server *s, const struct proto_msg *msg);

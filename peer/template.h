/* template.h — hiernet-peer --template: a started peer process that forks
 * peers on request instead of the controller exec'ing each one.
 *
 * Why: on a VM an exec of hiernet-peer costs 0.6-0.8 ms (mapping, dynamic
 * linking, glibc's CPUID probes, which trap to the hypervisor), so a
 * 1000-node start spent about 0.9 s in execs, one after another on the
 * controller's thread. A fork of this small, already initialised process
 * costs about a tenth of that and runs on another core while the controller
 * builds links.
 *
 * The template reads requests (proto/template_wire.h) until EOF. For each it
 * forks with CLONE_PARENT, so the peer is the controller's own child exactly
 * as an exec'd one would be (the controller reaps it, gets its exit status
 * and its SIGCHLD); the child enters the node's namespace, moves its control
 * socket to PEER_CONTROL_FD and runs peer_main(argc, argv) as if exec'd with
 * that argv. The template must stay single-threaded: a fork copies only the
 * calling thread. */
#pragma once

#include <stddef.h>

typedef int (*peer_main_fn)(int argc, char **argv);

/* Serves requests on sock until EOF (returns 0) or a socket error (1).
 * title: title_size bytes (the template's own argv strings) that each
 * child overwrites with its command line, so ps names the peer's node. */
int peer_template_serve(int sock, peer_main_fn peer_main, char *title, size_t title_size);

/* loopback_claim.h — a run's own 127.N.0.0/16 on backend none.
 *
 * Backend none puts every peer on a host loopback address with a fixed data
 * port, so two runs at the same time must not share a /16. A run claims N
 * (1..254) by binding the abstract unix socket "hiernet-loopback-N": the
 * kernel keeps the name unique host-wide (per network namespace), across
 * users and registries, and frees it when the holder exits, even by
 * SIGKILL, so a crashed run leaves nothing to clean. N = first is tried
 * first, then the next ones in turn. */
#pragma once

/* The claim's fd (close it to release N), N in *n; -1 with errno when
 * every N is taken (EADDRINUSE) or no socket could be made. */
int loopback_claim(unsigned first, unsigned *n);

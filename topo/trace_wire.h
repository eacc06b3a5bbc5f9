/* trace_wire.h — a link trace (topo/trace.h) as a MessagePack map, so
 * that a machine's agent can play a trace of its part's links (issue 20):
 * {samples = [[t_s, rate_bps, delay_ns, loss], ...], has_delay, has_loss,
 *  period_s, opportunities = bin (Mahimahi only, absent otherwise: each
 *  opportunity's ms as 4 bytes little-endian)}. The reader checks what
 * topo_trace_parse_* guarantee (times from >= 0 and non-decreasing, loss
 * in [0, 1], the limits of trace.h) and says which field is wrong. */
#pragma once

#include "topo/trace.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

/* The map into pk: false when out of memory. */
bool topo_trace_pack(msgpack_packer *pk, const struct topo_trace *t);
/* The map into *out (its arrays allocated: topo_trace_free); 0, or -1
 * with err ("trace: field 'samples': ...") and nothing kept. */
int topo_trace_read(const msgpack_object *map, struct topo_trace *out, char *err, size_t errlen);

/* link_keys.h — a link's emulation parameters, their keys and their units,
 * in one place. Macros only: any module may include it.
 *
 * Scripts give them as text with units or as numbers in base units
 * (l:set{bw = "100Mbit", delay = "10ms"}: lua/l_link.c); topo parses the
 * text into struct topo_link_params (topo_link_param_set, topo/network.c);
 * for the user backend the controller sends them to hiernet-linkd
 * (controller/linkd_client.c), which checks their ranges and keeps them in
 * struct linkd_params (topo/linkd/control.c). topo_link_params and
 * linkd_params name the fields alike, so the tables below serve both ends.
 *
 * TOPO_LINK_TEXT_KEYS(X): X(key, field, parse) for the keys a script gives
 * as text with units; parse is the topo/units.h parser of the field.
 *
 * LINK_WIRE_KEYS(X) / LINK_WIRE_GILBERT_KEYS(X): X(key, field, unit, min,
 * max) for the numeric keys of link_add / link_set on the wire: the first
 * always sent, the second only for Gilbert-Elliott loss. unit is one of
 *   BPS       bit/s, an unsigned integer on the wire and in both structs
 *   TIME      µs on the wire (a float), ns in both structs
 *   FRACTION  a probability 0..1
 * min and max are the range linkd accepts, in wire units. */
#pragma once

#define TOPO_LINK_TEXT_KEYS(X)                                                                     \
    X(bw, rate_bps, topo_units_parse_rate)                                                         \
    X(delay, delay_ns, topo_units_parse_time)                                                      \
    X(jitter, jitter_ns, topo_units_parse_time)                                                    \
    X(loss, loss, topo_units_parse_loss)                                                           \
    X(queue, queue, topo_units_parse_queue)

/* Times travel in µs: ns in the structs. */
#define LINK_WIRE_NS_PER_UNIT 1000.0

#define LINK_WIRE_KEYS(X)                                                                          \
    X(bw, rate_bps, BPS, 0, 1e13)                                                                  \
    X(delay, delay_ns, TIME, 0, 1e9)                                                               \
    X(jitter, jitter_ns, TIME, 0, 1e9)                                                             \
    X(loss, loss, FRACTION, 0, 1)

#define LINK_WIRE_GILBERT_KEYS(X)                                                                  \
    X(ge_p, ge_p, FRACTION, 0, 1)                                                                  \
    X(ge_r, ge_r, FRACTION, 0, 1)                                                                  \
    X(ge_h, ge_h, FRACTION, 0, 1)                                                                  \
    X(ge_k, ge_k, FRACTION, 0, 1)

/* A wire value (a double as parsed) into a struct field, by unit. */
#define LINK_WIRE_IN_BPS(v) ((uint64_t)llround(v))
#define LINK_WIRE_IN_TIME(v) llround((v)*LINK_WIRE_NS_PER_UNIT)
#define LINK_WIRE_IN_FRACTION(v) (v)

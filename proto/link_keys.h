/* link_keys.h — a link's emulation parameters, their keys and their units,
 * in one place. Macros and one enum only: any module may include it.
 *
 * Scripts give them as text with units or as numbers in base units
 * (l:set{bw = "100Mbit", delay = "10ms"}: lua/l_link.c); topo parses the
 * text into struct topo_link_params (topo_link_param_set, topo/network.c);
 * for the user backend the controller sends them to hiernet-linkd
 * (controller/linkd_client.c), which checks their ranges and keeps them in
 * struct linkd_params (emu/linkd/control.c); link:params() reports them
 * back in base units (lua/l_link.c). topo_link_params and linkd_params name
 * the fields alike, so the tables below serve both ends.
 *
 * TOPO_LINK_TEXT_KEYS(X): X(key, field, parse, unit) for the keys a script
 * gives as text with units; parse is the topo/units.h parser of the field,
 * unit how link:params() reports it (BPS, TIME in seconds, FRACTION,
 * QUEUE: packets under this key, bytes under queue_bytes, or THRESHOLD:
 * packets under this key, bytes under ecn_threshold_bytes).
 *
 * LINK_WIRE_KEYS(X) / LINK_WIRE_GILBERT_KEYS(X): X(key, field, unit, min,
 * max) for the numeric keys of link_add / link_set on the wire: the first
 * always sent, the second only for Gilbert-Elliott loss. unit is one of
 *   BPS       bit/s, an unsigned integer on the wire and in both structs
 *   TIME      µs on the wire (a float), ns in both structs
 *   FRACTION  a probability 0..1
 *   COUNT     a whole number, the same on the wire and in linkd_params
 * min and max are the range linkd accepts, in wire units.
 *
 * LINK_WIRE_COUNT_KEYS(X): the same for linkd's whole numbers: its queue
 * bound in packets or in bytes (a link's struct topo_units_queue goes as
 * one of the two), its ECN marking threshold the same way, and the bytes
 * its rate adds to each frame's size (overhead, linkd's alone).
 *
 * LINK_WIRE_OTHER_KEYS(X): X(key) for the keys that are not numbers:
 * reorder (a boolean) and jitter_dist ("uniform" | "normal", linkd's alone).
 *
 * LINK_KEY(key) is a key of these tables as a string; a key that is in
 * none of them does not compile. */
#pragma once

#define TOPO_LINK_TEXT_KEYS(X)                                                                     \
    X(bw, rate_bps, topo_units_parse_rate, BPS)                                                    \
    X(delay, delay_ns, topo_units_parse_time, TIME)                                                \
    X(jitter, jitter_ns, topo_units_parse_time, TIME)                                              \
    X(loss, loss, topo_units_parse_loss, FRACTION)                                                 \
    X(queue, queue, topo_units_parse_queue, QUEUE)                                                 \
    X(ecn_threshold, ecn_threshold, topo_units_parse_threshold, THRESHOLD)

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

#define LINK_WIRE_COUNT_KEYS(X)                                                                    \
    X(queue, queue, COUNT, 0, 1e7)                                                                 \
    X(queue_bytes, queue_bytes, COUNT, 0, 1e12)                                                    \
    X(ecn_threshold, ecn_threshold, COUNT, 0, 1e7)                                                 \
    X(ecn_threshold_bytes, ecn_threshold_bytes, COUNT, 0, 1e12)                                    \
    X(overhead, overhead, COUNT, -14, 1024)

#define LINK_WIRE_OTHER_KEYS(X) X(reorder) X(jitter_dist)

/* One enumerator per wire key, so that LINK_KEY can refuse a stray one. */
#define LINK_KEY_ID_(key, ...) LINK_KEY_ID_##key,
#define LINK_KEY_ID_OTHER_(key) LINK_KEY_ID_##key,
enum link_key_id {
    LINK_WIRE_KEYS(LINK_KEY_ID_) LINK_WIRE_GILBERT_KEYS(LINK_KEY_ID_)
        LINK_WIRE_COUNT_KEYS(LINK_KEY_ID_) LINK_WIRE_OTHER_KEYS(LINK_KEY_ID_OTHER_)
};
#undef LINK_KEY_ID_
#undef LINK_KEY_ID_OTHER_
/* &"key"[0]: a constant, usable in static tables too. */
#define LINK_KEY(key) (&#key[0 * LINK_KEY_ID_##key])

/* A wire value (a double as parsed) into a struct field, by unit. */
#define LINK_WIRE_IN_BPS(v) ((uint64_t)llround(v))
#define LINK_WIRE_IN_TIME(v) llround((v)*LINK_WIRE_NS_PER_UNIT)
#define LINK_WIRE_IN_FRACTION(v) (v)
#define LINK_WIRE_IN_COUNT(v) ((int64_t)(v))

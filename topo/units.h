/* units.h — parsing of the unit strings of link parameters.
 *
 * Provides the parsers behind every bw/delay/jitter/loss/queue value a scenario
 * gives (docs/lua-api.md "Networks and nodes"): rates "10Mbit" (bit, Kbit, Mbit, Gbit, Tbit; SI
 * multipliers, case-insensitive; a plain number is bit/s), times "5ms"
 * (ns, us, ms, s; a plain number is seconds), loss "0.5%" or a fraction in
 * [0, 1], queues and ECN thresholds "100" (packets) or "64KB" (B, KB, MB;
 * KiB, MiB).
 * A number may have a fraction and an exponent and one space before its unit.
 * Anything else fails with a one-line message that quotes the value.
 * Owns nothing: pure functions, no allocation. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Upper bounds: far above anything a veth can carry, low enough that every
 * later conversion (bytes/s, nanoseconds, kernel ticks) stays in range. */
#define TOPO_UNITS_RATE_MAX_BPS 10000000000000ULL /* 10 Tbit/s */
#define TOPO_UNITS_TIME_MAX_NS 3600000000000ULL   /* one hour */
#define TOPO_UNITS_QUEUE_MAX 1000000000ULL        /* packets or bytes */

/* A queue limit in exactly one of two units, or a multiple of the link's
 * bandwidth-delay product ("bdp", "2bdp"), which the binding resolves into
 * bytes from the link's rate and delay (topo_shape_bdp_bytes) whenever
 * the link's parameters are set: then bdp and bytes are both set. */
struct topo_units_queue {
    uint64_t packets; /* non-zero when given as a plain count */
    uint64_t bytes;   /* non-zero when given with a byte unit, or resolved from bdp */
    double bdp;       /* > 0: the multiple of the bandwidth-delay product asked for */
};

/* "10Mbit" -> 10000000 (bit/s). A rate must be positive. */
int topo_units_parse_rate(const char *text, uint64_t *bits_per_second, char *err, size_t errlen);

/* "5ms" -> 5000000 (ns). Zero is allowed, negative is not. */
int topo_units_parse_time(const char *text, uint64_t *nanoseconds, char *err, size_t errlen);

/* "0.5%" or "0.005" -> 0.005. */
int topo_units_parse_loss(const char *text, double *fraction, char *err, size_t errlen);

/* "100" -> 100 packets; "64KB" -> 64000 bytes; "bdp" / "2bdp" / "0.5 bdp"
 * -> that multiple of the bandwidth-delay product (bytes 0 until
 * resolved). Must be positive. */
int topo_units_parse_queue(const char *text, struct topo_units_queue *queue, char *err,
                           size_t errlen);

/* An ECN marking threshold: "64" -> 64 packets; "96KB" -> 96000 bytes
 * (no bandwidth-delay multiples: a threshold is a queue depth). */
int topo_units_parse_threshold(const char *text, struct topo_units_queue *threshold, char *err,
                               size_t errlen);

/* Formats a rate for messages and plots: 10000000 -> "10Mbit". Exact when
 * the rate is a whole number of the chosen unit, else with decimals. */
void topo_units_format_rate(uint64_t bits_per_second, char *buf, size_t buflen);

/* Formats a time: 5000000 -> "5ms". */
void topo_units_format_time(uint64_t nanoseconds, char *buf, size_t buflen);

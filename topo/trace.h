/* trace.h — link traces: a time series of link parameters read from a file
 * (CSV `t,bw[,delay][,loss]`) or a Mahimahi packet-delivery trace, and the
 * value a trace gives at any time (steps or linear interpolation, looped or
 * not). Pure data: playing a trace on a link is the controller's
 * (controller/trace_player.h).
 *
 * Times are emulated seconds from the trace's start. Owns its arrays
 * (topo_trace_free). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum topo_trace_interp { TOPO_TRACE_STEP, TOPO_TRACE_LINEAR };

/* Mahimahi's delivery opportunity: one 1500-byte IP packet. On the rate
 * series it becomes one full Ethernet frame (what `bw` counts). */
#define TOPO_TRACE_MAHIMAHI_BYTES 1500u
#define TOPO_TRACE_MAHIMAHI_FRAME_BYTES 1514u
/* Limits that keep a trace's memory and linkd's message bounded. */
#define TOPO_TRACE_MAX_SAMPLES 1000000u
#define TOPO_TRACE_MAX_OPPORTUNITIES 4000000u

struct topo_trace_sample {
    double t_s;
    uint64_t rate_bps;
    uint64_t delay_ns; /* when the trace has delays */
    double loss;       /* when the trace has losses */
};

struct topo_trace {
    struct topo_trace_sample *samples; /* by time, t of the first >= 0 */
    size_t n_samples;
    bool has_delay, has_loss;
    /* A looped trace repeats every period_s: the last time plus the last
     * step's length (samples at 0, 1, 2 repeat every 3 s); Mahimahi: the
     * last opportunity's time, as Mahimahi loops. */
    double period_s;
    /* Mahimahi only: the delivery opportunities in ms (non-decreasing; a
     * time given n times is n opportunities), else NULL. */
    uint32_t *opportunities_ms;
    size_t n_opportunities;
};

/* Parses a CSV trace from text: one sample a line, `t,bw[,delay][,loss]`
 * (t in seconds from the trace's start, bw and delay with units as a link
 * takes them or plain numbers: bit/s, seconds; loss "1%" or a fraction);
 * '#' comments and blank lines are skipped, and a first line whose first
 * field is not a number is a header. Every row gives the same columns.
 * `name` names the source in messages: "name:LINE: what" (the time going
 * backwards, a negative rate, a field that does not parse, an empty
 * trace). 0, or -1 with err. */
int topo_trace_parse_csv(const char *text, const char *name, struct topo_trace *out, char *err,
                         size_t errlen);
/* Parses a Mahimahi trace (one integer ms a line, non-decreasing, the
 * last > 0) into its opportunities and a rate series of bins of bin_s
 * seconds (opportunities in a bin x 1514 bytes x 8 / bin_s). */
int topo_trace_parse_mahimahi(const char *text, const char *name, double bin_s,
                              struct topo_trace *out, char *err, size_t errlen);
/* Reads the file and parses it by format ("csv" or "mahimahi"). */
int topo_trace_load(const char *path, const char *format, double bin_s, struct topo_trace *out,
                    char *err, size_t errlen);
void topo_trace_free(struct topo_trace *t);

/* The trace's values at time t_s (>= 0) from its start. Before the first
 * sample the first holds; after the last (not looped) the last holds. */
void topo_trace_at(const struct topo_trace *t, enum topo_trace_interp interp, bool loop, double t_s,
                   struct topo_trace_sample *out);
/* The next time after t_s at which the values may change: the next
 * sample's time (step), or t_s + step_s while a linear segment is under
 * way. INFINITY when nothing changes any more (not looped, past the end). */
double topo_trace_next_change(const struct topo_trace *t, enum topo_trace_interp interp, bool loop,
                              double t_s, double step_s);

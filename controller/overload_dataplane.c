/* overload_dataplane.c — the data plane's part of the overload verdict and
 * of the automatic dilation (see overload.h, "The data plane"): pure
 * functions over a window's figures, so the unit tests can feed them. */
#include "common/json.h"
#include "controller/overload.h"
#include "controller/run.h"

#include <math.h>
#include <stdio.h>

/* The dilation that gives the host's forwarding room: a share carried at
 * d was its limit, and at D' it is asked for d / D' of it. */
static double dp_room(double util, double d)
{
    /* A link that carried (almost) nothing still gets a finite answer. */
    double carried = util > 0.01 ? util : 0.01;
    double want = ceil(d * OVERLOAD_DP_MARGIN / carried);
    return want < HN_DILATION_MAX ? want : HN_DILATION_MAX;
}

/* Whether sub-sample s is busy against the round's busiest share peak. */
static bool sub_busy(const struct overload_sub *s, double peak)
{
    return s->capacity > 0 && s->bits > 0 && s->bits >= OVERLOAD_DP_SUB_FLOOR * peak * s->capacity;
}

double overload_busy_share(const struct overload_sub *s, size_t n, double *busy_s)
{
    double peak = 0, total_capacity = 0, bits = 0, capacity = 0;
    for (size_t i = 0; i < n; i++) {
        total_capacity += s[i].capacity;
        if (s[i].capacity > 0 && s[i].bits / s[i].capacity > peak) peak = s[i].bits / s[i].capacity;
    }
    *busy_s = 0;
    if (!(total_capacity > 0)) return -1;
    if (!(peak > 0)) return 0;
    /* Past the rate is the replies' timing, not the link: the bar stays
     * where a phase at the rate puts it. */
    if (peak > 1) peak = 1;
    for (size_t i = 0; i < n;) {
        if (!sub_busy(&s[i], peak)) {
            i++;
            continue;
        }
        size_t end = i;
        while (end < n && sub_busy(&s[end], peak))
            end++;
        /* A long phase's edges are partly idle (a short one has only
         * edges); the round's own first and last are no phase's edge. */
        size_t from = i, to = end;
        if (end - i >= OVERLOAD_DP_SUB_EDGES) {
            from += i > 0;
            to -= end < n;
        }
        for (size_t k = from; k < to; k++) {
            bits += s[k].bits;
            capacity += s[k].capacity;
            *busy_s += s[k].wall_s;
        }
        i = end;
    }
    return bits / capacity;
}

/* At dilation 1 only: once dilated a linkd polls for its next release,
 * runnable without being behind (OVERLOAD_DP_WAIT). */
bool overload_dp_starved(double linkd_wait, double queue_peak, double d)
{
    return d <= 1 && linkd_wait >= OVERLOAD_DP_WAIT && queue_peak >= OVERLOAD_DP_BACKLOG;
}

void overload_judge_dataplane(struct overload_dataplane *dp, double d)
{
    bool saturated =
        dp->host_busy >= OVERLOAD_DP_BUSY || dp->linkd_busy >= OVERLOAD_DP_BUSY ||
        (dp->host_cores > 0 && dp->own_cores >= OVERLOAD_DP_OWN_SHARE * dp->host_cores);
    dp->starved = overload_dp_starved(dp->linkd_wait, dp->queue_peak, d);
    bool short_of_rate =
        dp->samples > 0 && dp->link_utilization >= 0 && dp->link_utilization < OVERLOAD_DP_KEPT;
    dp->limited =
        short_of_rate && ((saturated && dp->own_cores >= OVERLOAD_DP_OWN_CORES) || dp->starved);
    dp->suggested_dilation = dp->limited ? dp_room(dp->link_utilization, d) : d;
}

bool overload_dp_rose(double base_util, double util)
{
    if (!(util >= 0)) return false;
    return util >= OVERLOAD_DP_KEPT ||
           (util >= OVERLOAD_DP_RISE * base_util && util >= base_util + OVERLOAD_DP_RISE_MIN);
}

/* Why a window that is not limited keeps its dilation. */
static const char *kept_because(const struct overload_dataplane *w)
{
    if (w->link_utilization < 0) return "no link has a rate to keep";
    if (w->link_utilization >= OVERLOAD_DP_KEPT) return "the links keep their rate";
    if (w->own_cores < OVERLOAD_DP_OWN_CORES && w->host_busy >= OVERLOAD_DP_BUSY)
        return "the run's data plane is a small load: the host is busy with other programs";
    return "the host's CPU has room, so the links' shortfall is the emulation's own "
           "(windows, queues, loss)";
}

/* A first window that the verdict would keep although its links fell short
 * of their rate: CPU shares do not settle whose the shortfall was, a rerun
 * does (OVERLOAD_DP_RISE). */
static bool worth_testing(const struct overload_dataplane *dp, double d)
{
    return d <= 1 && !dp->limited && dp->samples > 0 && dp->link_utilization >= 0 &&
           dp->link_utilization < OVERLOAD_DP_TEST_BELOW &&
           dp->host_busy >= OVERLOAD_DP_TEST_HOST_BUSY &&
           dp->own_cores >= OVERLOAD_DP_TEST_OWN_CORES;
}

/* ", a linkd waited W% of the time for a core[, queues up to Q frames]"
 * (empty when the wait is unknown; no queues when theirs is). */
static const char *wait_text(const struct overload_dataplane *w, char *buf, size_t len)
{
    buf[0] = '\0';
    if (w->linkd_wait < 0) return buf;
    int n =
        snprintf(buf, len, ", a linkd waited %.0f%% of the time for a core", 100 * w->linkd_wait);
    if (w->queue_peak >= 0 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", queues up to %.0f frames", w->queue_peak);
    return buf;
}

/* Starts a choice of window w judged at d: its figures, and the reason's
 * opening ("data plane[ at dilation D], N samples ..."); returns the
 * reason's length so far. */
static size_t choice_open(const struct overload_dataplane *w, double d,
                          struct overload_auto *choice)
{
    *choice = (struct overload_auto){0};
    choice->dataplane = true;
    choice->dp = *w;
    overload_judge_dataplane(&choice->dp, d);
    choice->dilation = choice->dp.suggested_dilation;
    choice->window_s = w->active_s;
    char at[40] = "", wait[96];
    if (d > 1) snprintf(at, sizeof at, " at dilation %g", d);
    int n = snprintf(choice->reason, sizeof choice->reason,
                     "data plane%s, %llu samples in %.1f s: the busiest link carried %.0f%% of "
                     "its rate%s while busy (%.0f%% over whole samples), host %.0f%% busy, the "
                     "run's data plane %.2f cores (busiest linkd %.0f%%%s)",
                     at, (unsigned long long)w->samples, w->active_s,
                     w->link_utilization >= 0 ? 100 * w->link_utilization : 0, d > 1 ? " / D" : "",
                     w->link_utilization_rounds >= 0 ? 100 * w->link_utilization_rounds : 0,
                     w->host_busy >= 0 ? 100 * w->host_busy : 0, w->own_cores, 100 * w->linkd_busy,
                     wait_text(w, wait, sizeof wait));
    return n > 0 && (size_t)n < sizeof choice->reason ? (size_t)n : 0;
}

void overload_choose_dataplane(const struct overload_dataplane *w, double d,
                               struct overload_auto *choice)
{
    d = d > 1 ? d : 1;
    size_t used = choice_open(w, d, choice);
    char *rest = choice->reason + used;
    size_t left = sizeof choice->reason - used;
    if (choice->dp.limited) {
        snprintf(rest, left, ": the host cannot forward it%s; dilation %g gives it room",
                 choice->dp.starved ? " (its linkd starved of CPU, whoever holds the cores)" : "",
                 choice->dilation);
    } else if (worth_testing(&choice->dp, d)) {
        choice->test = true;
        choice->base_dilation = d;
        choice->base_utilization = w->link_utilization;
        choice->dilation = dp_room(w->link_utilization, d);
        snprintf(rest, left,
                 ": the CPU shares would keep D (%s); dilation %g tests whether the host was "
                 "the limit",
                 kept_because(w), choice->dilation);
    } else {
        snprintf(rest, left, ": %s", kept_because(w));
    }
}

void overload_choose_tested(const struct overload_dataplane *w, double d, double base_d,
                            double base_util, struct overload_auto *choice)
{
    d = d > 1 ? d : 1;
    size_t used = choice_open(w, d, choice);
    char *rest = choice->reason + used;
    size_t left = sizeof choice->reason - used;
    choice->base_dilation = base_d;
    choice->base_utilization = base_util;
    if (!overload_dp_rose(base_util, w->link_utilization)) {
        choice->dilation = base_d;
        snprintf(rest, left,
                 ": no material rise from %.0f%% at dilation %g, so the shortfall is "
                 "the emulation's own: dilation %g",
                 100 * base_util, base_d, base_d);
        return;
    }
    if (choice->dilation < d) choice->dilation = d;
    snprintf(rest, left, ": up from %.0f%% at dilation %g, so the host was the limit; %s %g",
             100 * base_util, base_d, choice->dp.limited ? "still short: dilation" : "dilation",
             choice->dilation);
}

void overload_write_dataplane_json(FILE *f, const struct overload_dataplane *dp)
{
    fprintf(f, "{\"samples\": %llu, \"active_s\": ", (unsigned long long)dp->samples);
    json_write_number(f, dp->active_s);
    fputs(", \"link_utilization\": ", f);
    json_write_number(f, dp->link_utilization >= 0 ? dp->link_utilization : NAN);
    fputs(", \"link_utilization_rounds\": ", f);
    json_write_number(f, dp->link_utilization_rounds >= 0 ? dp->link_utilization_rounds : NAN);
    fputs(", \"host_busy\": ", f);
    json_write_number(f, dp->host_busy >= 0 ? dp->host_busy : NAN);
    fputs(", \"own_cores\": ", f);
    json_write_number(f, dp->own_cores);
    fputs(", \"linkd_busy\": ", f);
    json_write_number(f, dp->linkd_busy);
    fputs(", \"linkd_wait\": ", f);
    json_write_number(f, dp->linkd_wait >= 0 ? dp->linkd_wait : NAN);
    fputs(", \"queue_peak\": ", f);
    json_write_number(f, dp->queue_peak >= 0 ? dp->queue_peak : NAN);
    fprintf(f, ", \"limited\": %s, \"starved\": %s, \"suggested_dilation\": ",
            dp->limited ? "true" : "false", dp->starved ? "true" : "false");
    json_write_number(f, dp->suggested_dilation);
    fputc('}', f);
}

/* overload_dataplane.c — the data plane's part of the overload verdict and
 * of the automatic dilation (see overload.h, "The data plane"): pure
 * functions over a window's figures, so the unit tests can feed them. */
#include "common/json.h"
#include "controller/overload.h"
#include "controller/run.h"

#include <math.h>
#include <stdio.h>

void overload_judge_dataplane(struct overload_dataplane *dp, double d)
{
    bool saturated =
        dp->host_busy >= OVERLOAD_DP_BUSY || dp->linkd_busy >= OVERLOAD_DP_BUSY ||
        (dp->host_cores > 0 && dp->own_cores >= OVERLOAD_DP_OWN_SHARE * dp->host_cores);
    dp->limited = dp->samples > 0 && dp->link_utilization >= 0 &&
                  dp->link_utilization < OVERLOAD_DP_KEPT && saturated &&
                  dp->own_cores >= OVERLOAD_DP_OWN_CORES;
    dp->suggested_dilation = d;
    if (!dp->limited) return;
    /* A link that carried (almost) nothing still gets a finite answer. */
    double carried = dp->link_utilization > 0.01 ? dp->link_utilization : 0.01;
    double want = ceil(d * OVERLOAD_DP_MARGIN / carried);
    dp->suggested_dilation = want < HN_DILATION_MAX ? want : HN_DILATION_MAX;
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

/* "at dilation D" in a rerun's reason ("" at 1: the first run's). */
static void dilation_phrase(double d, char *buf, size_t len)
{
    if (d > 1)
        snprintf(buf, len, " at dilation %g", d);
    else
        buf[0] = '\0';
}

void overload_choose_dataplane(const struct overload_dataplane *w, double d,
                               struct overload_auto *choice)
{
    d = d > 1 ? d : 1;
    *choice = (struct overload_auto){0};
    choice->dataplane = true;
    choice->dp = *w;
    overload_judge_dataplane(&choice->dp, d);
    choice->dilation = choice->dp.suggested_dilation;
    choice->window_s = w->active_s;
    char at[40];
    dilation_phrase(d, at, sizeof at);
    int n = snprintf(choice->reason, sizeof choice->reason,
                     "data plane%s, %llu samples in %.1f s: the busiest link carried %.0f%% of "
                     "its rate%s, host %.0f%% busy, the run's data plane %.2f cores (busiest "
                     "linkd %.0f%%)",
                     at, (unsigned long long)w->samples, w->active_s,
                     w->link_utilization >= 0 ? 100 * w->link_utilization : 0, d > 1 ? " / D" : "",
                     w->host_busy >= 0 ? 100 * w->host_busy : 0, w->own_cores, 100 * w->linkd_busy);
    size_t used = n > 0 && (size_t)n < sizeof choice->reason ? (size_t)n : 0;
    if (!choice->dp.limited)
        snprintf(choice->reason + used, sizeof choice->reason - used, ": %s", kept_because(w));
    else
        snprintf(choice->reason + used, sizeof choice->reason - used,
                 ": the host cannot forward it; dilation %g gives it room", choice->dilation);
}

void overload_write_dataplane_json(FILE *f, const struct overload_dataplane *dp)
{
    fprintf(f, "{\"samples\": %llu, \"active_s\": ", (unsigned long long)dp->samples);
    json_write_number(f, dp->active_s);
    fputs(", \"link_utilization\": ", f);
    json_write_number(f, dp->link_utilization >= 0 ? dp->link_utilization : NAN);
    fputs(", \"host_busy\": ", f);
    json_write_number(f, dp->host_busy >= 0 ? dp->host_busy : NAN);
    fputs(", \"own_cores\": ", f);
    json_write_number(f, dp->own_cores);
    fputs(", \"linkd_busy\": ", f);
    json_write_number(f, dp->linkd_busy);
    fprintf(f, ", \"limited\": %s, \"suggested_dilation\": ", dp->limited ? "true" : "false");
    json_write_number(f, dp->suggested_dilation);
    fputc('}', f);
}

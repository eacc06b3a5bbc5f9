/* netrun_profile.c — the start's phases and how long each took, for the
 * log (netrun_describe_start). */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "emu/tc_backend.h"

#include <stdio.h>

/* ---- the start's profile ---- */

static void phase_add(struct netrun *nr, const char *name, double seconds)
{
    if (nr->n_phases == NETRUN_PHASES_MAX) return;
    nr->phases[nr->n_phases].name = name;
    nr->phases[nr->n_phases].s = seconds;
    nr->n_phases++;
}

/* Ends the phase in progress under `name`. */
void netrun_phase_end(struct netrun *nr, const char *name)
{
    double now = mono_s();
    phase_add(nr, name, now - nr->phase_mark);
    nr->phase_mark = now;
}

/* The kernel layer's own passes, which ran inside the last phase ("links"). */
void netrun_phase_split_kernel(struct netrun *nr)
{
    if (!nr->kernel || nr->n_phases == 0) return;
    const struct emu_tc_timing *t = emu_tc_timing(nr->kernel);
    nr->phases[nr->n_phases - 1].s -= t->interfaces + t->routes + t->running;
    phase_add(nr, "interfaces", t->interfaces);
    phase_add(nr, "routes+qdiscs", t->routes);
    phase_add(nr, "running", t->running);
}

/* The same when the peers were asked for while the veths were made: from
 * the namespaces' end, the kernel's passes as they took, and under "peers
 * asked" only what asking for the peers added beyond them. */
void netrun_phase_split_beside(struct netrun *nr)
{
    double now = mono_s(), since = now - nr->phase_mark;
    const struct emu_tc_timing *t = emu_tc_timing(nr->kernel);
    double job = t->links + t->interfaces + t->routes + t->running;
    phase_add(nr, "peers asked", since > job ? since - job : 0);
    phase_add(nr, "links", t->links);
    phase_add(nr, "interfaces", t->interfaces);
    phase_add(nr, "routes+qdiscs", t->routes);
    phase_add(nr, "running", t->running);
    nr->phase_mark = now;
}

void netrun_describe_start(const struct netrun *nr, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%.3f s:", nr->phase_mark - nr->start_s);
    for (size_t i = 0; i < nr->n_phases && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s %s %.3f", i ? "," : "",
                                 nr->phases[i].name, nr->phases[i].s);
}

/* tcp.c — a node's TCP settings (see tcp.h). */
#include "topo/tcp.h"

#include "topo/units.h"

#include <math.h>
#include <string.h>

#define AVAILABLE_CC "/proc/sys/net/ipv4/tcp_available_congestion_control"

bool topo_tcp_any(const struct topo_tcp *t)
{
    return t->cc[0] || t->rto_min_ns || t->ecn != TOPO_TCP_ECN_DEFAULT || t->init_cwnd;
}

/* Whether name is a word of the space-separated list. */
static bool list_has(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += len)
        if ((p == list || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\n' || !p[len]))
            return true;
    return false;
}

int topo_tcp_set_cc(struct topo_tcp *t, const char *cc, char *err, size_t errlen)
{
    char list[512] = "";
    FILE *f = fopen(AVAILABLE_CC, "re");
    if (!f) return snprintf(err, errlen, "tcp cc '%s': cannot read %s", cc, AVAILABLE_CC), -1;
    if (!fgets(list, sizeof list, f)) list[0] = '\0';
    fclose(f);
    list[strcspn(list, "\n")] = '\0';
    if (!cc[0] || strlen(cc) >= TOPO_TCP_CC_MAX || !list_has(list, cc))
        return snprintf(err, errlen, "tcp cc '%s' is not available in this kernel (it has: %s)", cc,
                        list),
               -1;
    snprintf(t->cc, sizeof t->cc, "%s", cc);
    return 0;
}

int topo_tcp_set_rto_min(struct topo_tcp *t, const char *text, char *err, size_t errlen)
{
    uint64_t ns;
    char why[256];
    if (topo_units_parse_time(text, &ns, why, sizeof why) < 0)
        return snprintf(err, errlen, "tcp rto_min: %s", why), -1;
    /* The route metric counts whole ms; the kernel clamps nothing below. */
    if (ns < 1000000 || ns % 1000000 || ns > 60000000000ULL)
        return snprintf(err, errlen,
                        "tcp rto_min '%s': must be a whole number of ms from 1ms to 60s (the "
                        "kernel's per-route rto_min counts ms)",
                        text),
               -1;
    t->rto_min_ns = ns;
    return 0;
}

int topo_tcp_set_init_cwnd(struct topo_tcp *t, double cwnd, char *err, size_t errlen)
{
    if (!(cwnd >= 1 && cwnd <= TOPO_TCP_INIT_CWND_MAX) || cwnd != floor(cwnd))
        return snprintf(err, errlen, "tcp init_cwnd %g: must be an integer from 1 to %d", cwnd,
                        TOPO_TCP_INIT_CWND_MAX),
               -1;
    t->init_cwnd = (unsigned)cwnd;
    return 0;
}

unsigned topo_tcp_rto_min_metric_ms(const struct topo_tcp *t, double d)
{
    if (!t->rto_min_ns) return 0;
    return (unsigned)llround((double)t->rto_min_ns / 1e6 * (d >= 1 ? d : 1));
}

unsigned topo_tcp_tso_rtt_log(double d)
{
    long extra = d > 1 ? lround(log2(d)) : 0;
    return extra > 0 ? TOPO_TCP_TSO_RTT_LOG_KERNEL + (unsigned)extra : 0;
}

void topo_tcp_write_json(const struct topo_tcp *t, FILE *f)
{
    const char *sep = "";
    fputc('{', f);
    if (t->cc[0]) fprintf(f, "\"cc\": \"%s\"", t->cc), sep = ", ";
    if (t->rto_min_ns) {
        char text[32];
        topo_units_format_time(t->rto_min_ns, text, sizeof text);
        fprintf(f, "%s\"rto_min\": \"%s\"", sep, text);
        sep = ", ";
    }
    if (t->ecn != TOPO_TCP_ECN_DEFAULT)
        fprintf(f, "%s\"ecn\": %s", sep, t->ecn == TOPO_TCP_ECN_ON ? "true" : "false"), sep = ", ";
    if (t->init_cwnd) fprintf(f, "%s\"init_cwnd\": %u", sep, t->init_cwnd);
    fputc('}', f);
}

/* parts_underlay.c — the underlay's delay between machines (see
 * parts_underlay.h). */
#include "controller/parts_underlay.h"

#include "controller/log.h"
#include "emu/underlay_rtt.h"
#include "proto/agent_wire.h"
#include "topo/part.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One pair asked of machine a's agent: the request's context. */
struct underlay_ask {
    struct parts_underlay *u;
    size_t a, b;               /* a: the machine measuring (this one, or its agent) */
    struct underlay_rtt *echo; /* measured here: the probe running, else NULL */
};

enum pair_state { PAIR_NONE, PAIR_WANTED, PAIR_ASKED, PAIR_SETTLED };

struct parts_underlay {
    size_t n;             /* machines */
    int64_t *rtt_ns;      /* n * n, both orders */
    uint32_t *delay_us;   /* n * n, both orders */
    unsigned char *state; /* n * n, a < b only: enum pair_state */
    struct underlay_ask *asks;
    char **names; /* per machine: its name (copied), for messages */
    size_t pending;
    bool cancelled;
    char error[512];             /* the first failure */
    parts_underlay_fn done;      /* parts_underlay_start's, or NULL */
    parts_underlay_pair_fn pair; /* parts_underlay_new's, or NULL */
    void *ctx;
};

static void pair_set(struct parts_underlay *u, size_t a, size_t b, int64_t rtt_ns)
{
    size_t lo = a < b ? a : b, hi = a < b ? b : a; /* the log names a pair one way */
    u->rtt_ns[a * u->n + b] = u->rtt_ns[b * u->n + a] = rtt_ns;
    u->delay_us[a * u->n + b] = u->delay_us[b * u->n + a] = topo_part_underlay_delay_us(rtt_ns);
    ctl_log("underlay %s - %s: round trip %.3f ms (least of %d ICMP echoes), one-way %.3f ms "
            "taken off their cut links' delay",
            u->names[lo], u->names[hi], (double)rtt_ns / 1e6, UNDERLAY_RTT_SAMPLES,
            u->delay_us[a * u->n + b] / 1e3);
}

/* One pair measured (error NULL) or not: an agent's answer and this
 * machine's own probe both end here. */
static void ask_done(struct underlay_ask *ask, int64_t rtt_ns, const char *error)
{
    struct parts_underlay *u = ask->u;
    char why[512];
    if (u->cancelled) return;
    size_t lo = ask->a < ask->b ? ask->a : ask->b, hi = ask->a < ask->b ? ask->b : ask->a;
    u->state[lo * u->n + hi] = PAIR_SETTLED;
    if (!error)
        pair_set(u, ask->a, ask->b, rtt_ns);
    else
        snprintf(why, sizeof why,
                 "machine %s: the underlay's round trip to machine %s could not be measured: %s",
                 u->names[ask->a], u->names[ask->b], error);
    if (error && !u->error[0]) snprintf(u->error, sizeof u->error, "%s", why);
    u->pending--;
    if (u->pair) u->pair(u->ctx, u, lo, hi, error ? why : NULL);
    if (u->done && u->pending == 0) u->done(u->ctx, u, u->error[0] ? u->error : NULL);
}

static void on_answer(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_underlay_reply r = {0};
    char why[256];
    if (!error && agent_wire_read_underlay_reply(result, &r, why, sizeof why) < 0) error = why;
    ask_done(ctx, r.rtt_ns, error);
}

static void on_echoes(void *ctx, int64_t rtt_ns, const char *error)
{
    struct underlay_ask *ask = ctx;
    ask->echo = NULL; /* the probe frees itself */
    ask_done(ask, rtt_ns, error);
}

/* The pairs a cut link joins, each once (a < b), wanted. */
static void pairs_wanted(struct parts_underlay *u, const struct parts_underlay_setup *s)
{
    size_t n = u->n;
    for (size_t l = 0; l < s->net->n_links; l++) {
        size_t a = (size_t)s->placement->machine[s->net->links[l].a];
        size_t b = (size_t)s->placement->machine[s->net->links[l].b];
        if (a != b) u->state[a < b ? a * n + b : b * n + a] = PAIR_WANTED;
    }
}

/* The pair measured from here (at = this machine) or by at's agent. */
static int pair_ask(struct parts_underlay *u, const struct parts_underlay_setup *s, size_t at,
                    size_t far, char *err, size_t errlen)
{
    char why[256], text[INET_ADDRSTRLEN];
    size_t lo = at < far ? at : far, hi = at < far ? far : at;
    struct underlay_ask *ask = &u->asks[lo * u->n + hi];
    *ask = (struct underlay_ask){u, at, far, NULL};
    if (at == s->local) {
        ask->echo = underlay_rtt_start(s->loop, s->underlay[far], UNDERLAY_RTT_SAMPLES, on_echoes,
                                       ask, why, sizeof why);
        if (!ask->echo)
            return snprintf(err, errlen,
                            "machine %s: the underlay's round trip to machine %s could not be "
                            "measured: %s",
                            u->names[at], u->names[far], why),
                   -1;
    } else {
        struct in_addr addr = {.s_addr = htonl(s->underlay[far])};
        inet_ntop(AF_INET, &addr, text, sizeof text);
        if (agent_client_underlay(s->agent[at], text, on_answer, ask, why, sizeof why) < 0)
            return snprintf(err, errlen, "machine %s: %s", u->names[at], why), -1;
    }
    u->state[lo * u->n + hi] = PAIR_ASKED;
    u->pending++;
    return 0;
}

/* Pair (a, b), a < b: measured here when one is this machine, else by
 * the first end whose agent answered hello (a's when both have, as
 * `hiernet doctor --hosts` tries it): waiting for a's would hold b's part
 * for the gap between the two hellos; 0 also when it must wait. */
static int pair_begin(struct parts_underlay *u, const struct parts_underlay_setup *s, size_t a,
                      size_t b, const bool *hello, char *err, size_t errlen)
{
    if (a == s->local || b == s->local)
        return pair_ask(u, s, a == s->local ? a : b, a == s->local ? b : a, err, errlen);
    if (hello[a] || hello[b])
        return pair_ask(u, s, hello[a] ? a : b, hello[a] ? b : a, err, errlen);
    return 0;
}

static struct parts_underlay *underlay_new(const struct topo_machines *machines)
{
    size_t n = machines->n;
    struct parts_underlay *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    u->n = n;
    u->rtt_ns = calloc(n * n, sizeof *u->rtt_ns);
    u->delay_us = calloc(n * n, sizeof *u->delay_us);
    u->state = calloc(n * n, sizeof *u->state);
    u->asks = calloc(n * n, sizeof *u->asks);
    u->names = calloc(n, sizeof *u->names);
    bool ok = u->rtt_ns && u->delay_us && u->state && u->asks && u->names;
    for (size_t m = 0; ok && m < n; m++)
        ok = (u->names[m] = strdup(machines->v[m].name)) != NULL;
    if (!ok) parts_underlay_free(u);
    return ok ? u : NULL;
}

struct parts_underlay *parts_underlay_new(const struct parts_underlay_setup *setup,
                                          parts_underlay_pair_fn pair, void *ctx)
{
    struct parts_underlay *u = underlay_new(setup->machines);
    if (!u) return NULL;
    u->pair = pair;
    u->ctx = ctx;
    pairs_wanted(u, setup);
    return u;
}

int parts_underlay_begin(struct parts_underlay *u, const struct parts_underlay_setup *setup,
                         const bool *known, const bool *hello, char *err, size_t errlen)
{
    size_t n = u->n;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++)
            if (u->state[a * n + b] == PAIR_WANTED && known[a] && known[b] &&
                pair_begin(u, setup, a, b, hello, err, errlen) < 0)
                return -1;
    return 0;
}

int parts_underlay_start(const struct parts_underlay_setup *setup, parts_underlay_fn done,
                         void *ctx, struct parts_underlay **out, char *err, size_t errlen)
{
    size_t n = setup->machines->n;
    struct parts_underlay *u = *out = parts_underlay_new(setup, NULL, NULL);
    bool *all = calloc(n ? n : 1, sizeof *all);
    int rc = u && all ? 0 : (snprintf(err, errlen, "out of memory"), -1);
    for (size_t m = 0; m < n && all; m++)
        all[m] = true; /* every address known, every agent asked answered */
    if (rc == 0) {
        u->done = done;
        u->ctx = ctx;
        rc = parts_underlay_begin(u, setup, all, all, err, errlen);
    }
    free(all);
    if (rc < 0 && u) parts_underlay_cancel(u); /* those sent: their answers dropped */
    return rc < 0 ? -1 : u->pending ? 1 : 0;
}

/* Whether every pair of machine m is measured: all of them, or (begun
 * only) those whose probe has been sent, a pair still waiting for an
 * address or an agent not counting. */
static bool machine_measured(const struct parts_underlay *u, size_t m, bool begun_only)
{
    for (size_t k = 0; k < u->n; k++) {
        unsigned char st = u->state[(m < k ? m : k) * u->n + (m < k ? k : m)];
        bool measured = st == PAIR_SETTLED && u->rtt_ns[m * u->n + k];
        bool counts = begun_only ? st == PAIR_ASKED || st == PAIR_SETTLED : st != PAIR_NONE;
        if (k != m && counts && !measured) return false;
    }
    return true;
}

bool parts_underlay_machine_done(const struct parts_underlay *u, size_t m)
{
    return machine_measured(u, m, false);
}

bool parts_underlay_machine_begun_done(const struct parts_underlay *u, size_t m)
{
    return machine_measured(u, m, true);
}

size_t parts_underlay_unmeasured(const struct parts_underlay *u, size_t machine, char *names,
                                 size_t cap)
{
    size_t count = 0, at = 0;
    if (cap) names[0] = '\0';
    for (size_t a = 0; a < u->n; a++)
        for (size_t b = a + 1; b < u->n; b++) {
            if (u->state[a * u->n + b] == PAIR_NONE || u->rtt_ns[a * u->n + b]) continue;
            if (machine < u->n && a != machine && b != machine) continue;
            int len = snprintf(names + at, cap - at, "%s%s - %s", count ? ", " : "", u->names[a],
                               u->names[b]);
            if (len > 0 && (size_t)len < cap - at) at += (size_t)len;
            count++;
        }
    return count;
}

const uint32_t *parts_underlay_delays(const struct parts_underlay *u)
{
    return u->delay_us;
}

int64_t parts_underlay_rtt_ns(const struct parts_underlay *u, size_t a, size_t b)
{
    return a < u->n && b < u->n ? u->rtt_ns[a * u->n + b] : 0;
}

/* Stops this machine's probes still running (they hold the loop's watchers). */
void parts_underlay_cancel(struct parts_underlay *u)
{
    if (!u) return;
    u->cancelled = true;
    for (size_t i = 0; u->asks && i < u->n * u->n; i++) {
        underlay_rtt_cancel(u->asks[i].echo);
        u->asks[i].echo = NULL;
    }
}

void parts_underlay_free(struct parts_underlay *u)
{
    if (!u) return;
    parts_underlay_cancel(u);
    for (size_t m = 0; u->names && m < u->n; m++)
        free(u->names[m]);
    free(u->names);
    free(u->rtt_ns);
    free(u->delay_us);
    free(u->state);
    free(u->asks);
    free(u);
}

/* link_sampler.c — the kernel backend's link counters (see link_sampler.h). */
#include "controller/link_sampler.h"

#include "common/clock.h"
#include "emu/netns.h"
#include "emu/nl.h"

#include <linux/if.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One link end to read in a namespace. */
struct sampled_end {
    int ifindex;
    int link;
};

/* One namespace the thread asks, and the ends it answers for (by ifindex). */
struct sampled_ns {
    int node;
    struct nl_sock *sock; /* opened by the thread */
    struct sampled_end *ends;
    size_t n_ends;
};

struct link_sampler {
    struct ev_loop *loop;
    const struct topo_network *net;
    const struct emu_tc *kernel;
    link_sampler_fn fn;
    void *ctx;
    struct sampled_ns *ns;
    size_t n_ns;
    /* The sample: written by the thread between a request and `sampled`,
     * read by the loop after it; `busy` (from the request until the loop
     * has read it) keeps them apart. */
    struct link_sample *samples;
    char error[256];
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    bool requested, sampled, busy, stopping; /* under mutex */
    ev_async done;
};

/* ---- the plan: which end of each link is read where ---- */

static int end_compare(const void *x, const void *y)
{
    const struct sampled_end *a = x, *b = y;
    return (a->ifindex > b->ifindex) - (a->ifindex < b->ifindex);
}

/* Per link the end whose node has more links (a on a tie): the inner nodes
 * of a tree and every switch answer for their links, the leaves are never
 * asked. */
static int plan_ends(struct link_sampler *s)
{
    const struct topo_network *net = s->net;
    size_t nn = net->n_nodes ? net->n_nodes : 1;
    size_t *degree = calloc(nn, sizeof *degree);
    int *ns_of = malloc(nn * sizeof *ns_of);
    s->ns = calloc(nn, sizeof *s->ns);
    if (!degree || !ns_of || !s->ns) {
        free(degree);
        free(ns_of);
        return -1;
    }
    for (size_t i = 0; i < net->n_links; i++) {
        degree[net->links[i].a]++;
        degree[net->links[i].b]++;
    }
    for (size_t i = 0; i < nn; i++)
        ns_of[i] = -1;
    int rc = 0;
    for (size_t i = 0; i < net->n_links && rc == 0; i++) {
        const struct topo_link *l = &net->links[i];
        /* A part's cross-machine link (topo/part.h) is read at its end
         * here: its VXLAN device counts both directions as a veth end. */
        bool from_a =
            net->nodes[l->b].remote || (!net->nodes[l->a].remote && degree[l->a] >= degree[l->b]);
        int node = from_a ? l->a : l->b, ifindex_a, ifindex_b;
        emu_tc_link_ifindex(s->kernel, (int)i, &ifindex_a, &ifindex_b);
        s->samples[i].from_a = from_a;
        if (ns_of[node] < 0) {
            ns_of[node] = (int)s->n_ns;
            s->ns[s->n_ns++] = (struct sampled_ns){.node = node};
        }
        struct sampled_ns *ns = &s->ns[ns_of[node]];
        struct sampled_end *grown = realloc(ns->ends, (ns->n_ends + 1) * sizeof *grown);
        if (!grown) {
            rc = -1;
            break;
        }
        ns->ends = grown;
        ns->ends[ns->n_ends++] = (struct sampled_end){from_a ? ifindex_a : ifindex_b, (int)i};
    }
    for (size_t i = 0; i < s->n_ns; i++)
        qsort(s->ns[i].ends, s->ns[i].n_ends, sizeof *s->ns[i].ends, end_compare);
    free(degree);
    free(ns_of);
    return rc;
}

/* ---- the thread ---- */

struct dump_ctx {
    struct link_sampler *s;
    const struct sampled_ns *ns;
};

static void on_link_stats(const struct emu_nl_link_stats *st, void *ctx)
{
    struct dump_ctx *d = ctx;
    struct sampled_end key = {.ifindex = st->ifindex};
    const struct sampled_end *end =
        bsearch(&key, d->ns->ends, d->ns->n_ends, sizeof key, end_compare);
    if (!end) return; /* lo, a bridge, another link's end */
    struct link_sample *out = &d->s->samples[end->link];
    out->seen = true;
    out->up =
        (st->flags & IFF_UP) && (st->flags & IFF_LOWER_UP); /* a veth's carrier: its peer is up */
    out->tx_packets = st->tx_packets;
    out->tx_bytes = st->tx_bytes;
    out->tx_dropped = st->tx_dropped;
    out->rx_packets = st->rx_packets;
    out->rx_bytes = st->rx_bytes;
    out->rx_dropped = st->rx_dropped;
}

static void note_error(struct link_sampler *s, const char *what)
{
    if (!s->error[0]) snprintf(s->error, sizeof s->error, "%s", what);
}

/* Sockets in each namespace, made here: entering a namespace moves the
 * calling thread, which must not be the loop's. */
static void open_sockets(struct link_sampler *s)
{
    for (size_t i = 0; i < s->n_ns; i++) {
        char err[256];
        int fd = emu_tc_node_ns(s->kernel, s->ns[i].node);
        s->ns[i].sock = fd >= 0 ? emu_netns_nl_open(fd, err, sizeof err) : NULL;
        if (!s->ns[i].sock) note_error(s, fd >= 0 ? err : "a node has no namespace");
    }
}

static void take_sample(struct link_sampler *s)
{
    for (size_t i = 0; i < s->net->n_links; i++)
        s->samples[i].seen = false;
    for (size_t i = 0; i < s->n_ns; i++) {
        struct dump_ctx d = {s, &s->ns[i]};
        char err[256];
        if (!s->ns[i].sock) continue;
        if (emu_nl_link_stats(s->ns[i].sock, on_link_stats, &d, err, sizeof err) < 0)
            note_error(s, err);
        /* The kernel reads the counters while it answers, after any wait
         * for its locks (another run building namespaces): the time the
         * dump returned is the closer one. */
        double now = mono_s();
        for (size_t e = 0; e < s->ns[i].n_ends; e++)
            s->samples[s->ns[i].ends[e].link].mono = now;
    }
}

static void *sampler_main(void *arg)
{
    struct link_sampler *s = arg;
    open_sockets(s);
    pthread_mutex_lock(&s->mutex);
    for (;;) {
        while (!s->requested && !s->stopping)
            pthread_cond_wait(&s->wake, &s->mutex);
        if (s->stopping) break;
        s->requested = false;
        pthread_mutex_unlock(&s->mutex);
        take_sample(s);
        pthread_mutex_lock(&s->mutex);
        s->sampled = true;
        ev_async_send(s->loop, &s->done);
    }
    pthread_mutex_unlock(&s->mutex);
    for (size_t i = 0; i < s->n_ns; i++) {
        emu_nl_close(s->ns[i].sock);
        s->ns[i].sock = NULL;
    }
    return NULL;
}

/* ---- the loop's side ---- */

static void on_sample_done(EV_P_ ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    struct link_sampler *s =
        (struct link_sampler *)((char *)w - offsetof(struct link_sampler, done));
    pthread_mutex_lock(&s->mutex);
    bool ready = s->sampled;
    s->sampled = false;
    pthread_mutex_unlock(&s->mutex);
    if (!ready) return;
    char error[sizeof s->error];
    snprintf(error, sizeof error, "%s", s->error);
    s->error[0] = '\0';
    /* The thread touches the sample only after the next request. */
    s->fn(s->ctx, s->samples, s->net->n_links, error[0] ? error : NULL);
    pthread_mutex_lock(&s->mutex);
    s->busy = false;
    pthread_mutex_unlock(&s->mutex);
}

bool link_sampler_request(struct link_sampler *s)
{
    pthread_mutex_lock(&s->mutex);
    bool asked = !s->busy && !s->stopping;
    if (asked) {
        s->busy = s->requested = true;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->mutex);
    return asked;
}

static void sampler_free(struct link_sampler *s)
{
    for (size_t i = 0; s->ns && i < s->n_ns; i++)
        free(s->ns[i].ends);
    free(s->ns);
    free(s->samples);
    pthread_mutex_destroy(&s->mutex);
    pthread_cond_destroy(&s->wake);
    free(s);
}

struct link_sampler *link_sampler_start(struct ev_loop *loop, const struct topo_network *net,
                                        const struct emu_tc *kernel, link_sampler_fn fn, void *ctx,
                                        char *err, size_t errlen)
{
    struct link_sampler *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "out of memory"), NULL;
    *s = (struct link_sampler){.loop = loop, .net = net, .kernel = kernel, .fn = fn, .ctx = ctx};
    pthread_mutex_init(&s->mutex, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->samples = calloc(net->n_links ? net->n_links : 1, sizeof *s->samples);
    if (!s->samples || plan_ends(s) < 0) {
        sampler_free(s);
        return snprintf(err, errlen, "out of memory"), NULL;
    }
    ev_async_init(&s->done, on_sample_done);
    ev_async_start(loop, &s->done);
    int rc = pthread_create(&s->thread, NULL, sampler_main, s);
    if (rc != 0) {
        ev_async_stop(loop, &s->done);
        sampler_free(s);
        return snprintf(err, errlen, "cannot start the link sampler: %s", strerror(rc)), NULL;
    }
    s->thread_started = true;
    return s;
}

void link_sampler_stop(struct link_sampler *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mutex);
    s->stopping = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mutex);
    if (s->thread_started) pthread_join(s->thread, NULL);
    ev_async_stop(s->loop, &s->done);
    sampler_free(s);
}

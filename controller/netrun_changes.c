/* netrun_changes.c — run-time changes to a built network: link set,
 * up/down, counters and moves, partitions and heals; the kernel backend's
 * run in order on the worker thread (netrun_steps.c). */
#include "controller/netrun_internal.h"

#include "controller/linkd_client.h"
#include "topo/address.h"
#include "topo/route_change.h"
#include "emu/tc_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- run-time kernel changes, off the loop ----
 *
 * A partition is a netlink request per host of it, each with a route per
 * host of the other group (a heal deletes them and replays the routes): at
 * a few hundred hosts, tens of ms to seconds. So partitions, heals and the
 * kernel backend's link changes run as steps on the build's thread (the
 * build is over by then), one at a time in the order asked; the caller
 * hears of each through its callback, from the loop. That thread alone
 * uses the kernel layer's netlink sockets and its record of the partitions
 * after the build, so two changes never meet there; the loop keeps a view
 * of its own of the partitions asked for (cuts, for netrun_separated). */

static void work_kernel_op(struct netrun *nr)
{
    struct kernel_op *op = nr->ops;
    struct emu_tc *k = nr->kernel;
    char *err = op->err;
    size_t len = sizeof op->err;
    if (op->kind == OP_PARTITION)
        op->rc = emu_tc_partition(k, op->side, err, len);
    else if (op->kind == OP_HEAL)
        op->rc = emu_tc_heal(k, op->side, NULL, err, len);
    else if (op->kind == OP_LINK_SET)
        op->rc = emu_tc_link_set_dir(k, op->link, op->dir, &op->params, err, len);
    else
        op->rc = emu_tc_link_updown(k, op->link, op->up, err, len);
}

/* Tells the caller (result: an empty map) and frees op. */
static void kernel_op_finish(struct kernel_op *op, const char *error)
{
    msgpack_object done = {.type = MSGPACK_OBJECT_MAP};
    op->cb(op->ctx, error, error ? NULL : &done);
    free(op->side);
    free(op);
}

/* The model follows a link's up or down once the kernel took it: in a
 * local run netlife sets the same flag, but a part's own model (the
 * controller's part of a spread network) has no other writer, and a
 * move's routes skip the links it says are down (emu_tc_routes_put). */
static void kernel_op_record(struct netrun *nr, const struct kernel_op *op)
{
    if (op->kind == OP_LINK_UPDOWN && op->rc == 0) nr->net->links[op->link].up = op->up;
}

static void kernel_op_done(struct netrun *nr)
{
    struct kernel_op *op = nr->ops;
    kernel_op_record(nr, op);
    nr->ops = op->next;
    if (!nr->ops)
        nr->ops_tail = NULL;
    else
        netrun_job_begin(nr, work_kernel_op, kernel_op_done); /* the next one meanwhile */
    kernel_op_finish(op, op->rc < 0 ? op->err : NULL);
}

/* Queues a copy of *op (its side is taken over); 1: cb follows, or -1. */
int netrun_kernel_op_queue(struct netrun *nr, const struct kernel_op *op, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen)
{
    struct kernel_op *q = malloc(sizeof *q);
    if (!q) {
        free(op->side);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    *q = *op;
    q->cb = cb;
    q->ctx = ctx;
    q->next = NULL;
    bool idle = !nr->ops;
    if (nr->ops_tail)
        nr->ops_tail->next = q;
    else
        nr->ops = q;
    nr->ops_tail = q;
    if (idle) netrun_job_begin(nr, work_kernel_op, kernel_op_done);
    return 1;
}

/* A move (netrun_link_move) changes the routing and the kernel on the
 * loop: the changes asked for before it end first, here. The one loop
 * wait left in a run's kernel changes, and only when a move meets changes
 * still under way (a churn's move while a partition or l:set runs). */
static void kernel_ops_settle(struct netrun *nr)
{
    if (!nr->ops) return;
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    nr->job.then = NULL; /* its ev_async finds nothing to do */
    for (bool ran = true; nr->ops; ran = false) {
        struct kernel_op *op = nr->ops;
        if (!ran) work_kernel_op(nr); /* the first one ran on the thread */
        kernel_op_record(nr, op);
        nr->ops = op->next;
        kernel_op_finish(op, op->rc < 0 ? op->err : NULL);
    }
    nr->ops_tail = NULL;
}

/* The release: the change running has ended (joined); the rest never run. */
void netrun_kernel_ops_drop(struct netrun *nr)
{
    while (nr->ops) {
        struct kernel_op *op = nr->ops;
        nr->ops = op->next;
        kernel_op_finish(op, "the network was released");
    }
    nr->ops_tail = NULL;
    netrun_cuts_free(nr);
}

int netrun_link_not_emulated(struct netrun *nr, char *err, size_t errlen)
{
    snprintf(err, errlen, "backend '%s' does not emulate links", netrun_backend(nr));
    return -1;
}

int netrun_link_set(struct netrun *nr, int link, const struct topo_link_params *params,
                    peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    if (nr->parts) {
        int l = netrun_parts_local_link(nr, link);
        if (l < 0)
            return netrun_parts_link_remote(nr, link, AGENT_LINK_SET, params, cb, ctx, err, errlen);
        return netrun_link_set(netrun_parts_inner(nr), l, params, cb, ctx, err, errlen);
    }
    struct topo_link_params installed; /* the kernel backend dilates its own plans */
    topo_link_params_install(nr->net, &nr->net->links[link], params, &installed);
    if (nr->linkd)
        return linkd_client_link_set(netrun_linkd_of(nr, link), link, &installed, cb, ctx, err,
                                     errlen) < 0
                   ? -1
                   : 1;
    if (!nr->kernel) return netrun_link_not_emulated(nr, err, errlen);
    struct kernel_op op = {
        .kind = OP_LINK_SET, .link = link, .dir = EMU_TC_BOTH, .params = *params};
    return netrun_kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

int netrun_link_updown(struct netrun *nr, int link, bool up, peer_reply_fn cb, void *ctx, char *err,
                       size_t errlen)
{
    if (nr->parts) {
        int l = netrun_parts_local_link(nr, link);
        if (l < 0)
            return netrun_parts_link_remote(nr, link, up ? AGENT_LINK_UP : AGENT_LINK_DOWN, NULL,
                                            cb, ctx, err, errlen);
        return netrun_link_updown(netrun_parts_inner(nr), l, up, cb, ctx, err, errlen);
    }
    if (nr->linkd)
        return linkd_client_link_updown(netrun_linkd_of(nr, link), link, up, cb, ctx, err, errlen) <
                       0
                   ? -1
                   : 1;
    if (!nr->kernel) return netrun_link_not_emulated(nr, err, errlen);
    struct kernel_op op = {.kind = OP_LINK_UPDOWN, .link = link, .up = up};
    return netrun_kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

int netrun_link_stats(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen)
{
    if (nr->parts) return netrun_parts_counters(nr, link, cb, ctx, err, errlen);
    if (nr->linkd)
        return linkd_client_link_stats(netrun_linkd_of(nr, link), link, cb, ctx, err, errlen) < 0
                   ? -1
                   : 1;
    snprintf(err, errlen,
             "counters come from the user backend (hiernet-linkd); backend '%s' keeps none",
             netrun_backend(nr));
    return -1;
}

void netrun_cuts_free(struct netrun *nr)
{
    for (size_t i = 0; i < nr->n_cuts; i++)
        free(nr->cuts[i]);
    free(nr->cuts);
    nr->cuts = NULL;
    nr->n_cuts = 0;
}

/* A cut's number, stored after its sides: a heal answered later takes only
 * the cuts made before it was asked (not a partition asked meanwhile). */
static uint64_t cut_number(const struct netrun *nr, const unsigned char *cut)
{
    uint64_t k;
    memcpy(&k, cut + nr->net->n_nodes, sizeof k);
    return k;
}

/* The loop's view of a partition asked for: side copied into op and cuts. */
static int cut_add(struct netrun *nr, const unsigned char *side, struct kernel_op *op)
{
    size_t n = nr->net->n_nodes;
    unsigned char *copy = malloc(n + sizeof nr->cuts_added),
                  **grown = realloc(nr->cuts, (nr->n_cuts + 1) * sizeof *grown);
    op->side = malloc(n);
    if (grown) nr->cuts = grown;
    if (!copy || !grown || !op->side) {
        free(copy);
        free(op->side);
        return -1;
    }
    memcpy(copy, side, n);
    memcpy(copy + n, &nr->cuts_added, sizeof nr->cuts_added);
    nr->cuts_added++;
    memcpy(op->side, side, n);
    nr->cuts[nr->n_cuts++] = copy;
    return 0;
}

/* Over machines: every part cuts its own routes; the outer netrun keeps
 * the loop's view (netrun_separated, the heal's count). */
static int parts_partition(struct netrun *nr, const unsigned char *side, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen)
{
    struct kernel_op op = {.kind = OP_PARTITION};
    if (cut_add(nr, side, &op) < 0) return snprintf(err, errlen, "out of memory"), -1;
    free(op.side); /* the parts copy side themselves */
    int rc = netrun_parts_sides(nr, false, side, cb, ctx, err, errlen);
    if (rc < 0) free(nr->cuts[--nr->n_cuts]); /* nothing was cut */
    return rc;
}

int netrun_partition(struct netrun *nr, const unsigned char *side, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen)
{
    if (nr->parts) return parts_partition(nr, side, cb, ctx, err, errlen);
    if (!nr->kernel) {
        snprintf(err, errlen, "backend '%s' emulates no network to cut (use kernel, user or auto)",
                 netrun_backend(nr));
        return -1;
    }
    struct kernel_op op = {.kind = OP_PARTITION};
    if (cut_add(nr, side, &op) < 0) return snprintf(err, errlen, "out of memory"), -1;
    return netrun_kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* Whether a heal of side (NULL: all) asked before cut number `before` heals cut. */
static bool cut_healed_by(const struct netrun *nr, const unsigned char *cut,
                          const unsigned char *side, uint64_t before)
{
    return cut_number(nr, cut) < before && (!side || emu_tc_same_cut(cut, side, nr->net->n_nodes));
}

/* How many cuts a heal of side asked now would take. */
static size_t cuts_count(const struct netrun *nr, const unsigned char *side)
{
    size_t n = 0;
    for (size_t p = 0; p < nr->n_cuts; p++)
        n += cut_healed_by(nr, nr->cuts[p], side, nr->cuts_added);
    return n;
}

/* The loop's view: the cuts a heal asked before cut number `before` takes go. */
static void cuts_take(struct netrun *nr, const unsigned char *side, uint64_t before)
{
    size_t kept = 0;
    for (size_t p = 0; p < nr->n_cuts; p++)
        if (cut_healed_by(nr, nr->cuts[p], side, before))
            free(nr->cuts[p]);
        else
            nr->cuts[kept++] = nr->cuts[p];
    nr->n_cuts = kept;
}

/* A heal under way: the loop's view keeps its cuts until it is answered
 * OK (every part's, or the kernel's), so that a failed heal leaves them on
 * record and can be asked again. */
struct heal_wait {
    struct netrun *nr;
    unsigned char *side; /* NULL: every cut */
    uint64_t before;
    peer_reply_fn cb;
    void *ctx;
};

static void on_healed(void *ctx, const char *error, const msgpack_object *result)
{
    struct heal_wait *w = ctx;
    if (!error) cuts_take(w->nr, w->side, w->before);
    w->cb(w->ctx, error, result);
    free(w->side);
    free(w);
}

static struct heal_wait *heal_wait_new(struct netrun *nr, const unsigned char *side,
                                       peer_reply_fn cb, void *ctx)
{
    struct heal_wait *w = malloc(sizeof *w);
    unsigned char *copy = side ? malloc(nr->net->n_nodes) : NULL;
    if (!w || (side && !copy)) return free(w), free(copy), NULL;
    if (side) memcpy(copy, side, nr->net->n_nodes);
    *w = (struct heal_wait){nr, copy, nr->cuts_added, cb, ctx};
    return w;
}

int netrun_heal(struct netrun *nr, const unsigned char *side, size_t *healed, peer_reply_fn cb,
                void *ctx, char *err, size_t errlen)
{
    /* the outer netrun of parts keeps the loop's view of the cuts too */
    size_t n = nr->kernel || nr->parts ? cuts_count(nr, side) : 0;
    if (healed) *healed = n;
    if (n == 0) return 0; /* none: nothing was ever cut */
    struct heal_wait *w = heal_wait_new(nr, side, cb, ctx);
    if (!w) return snprintf(err, errlen, "out of memory"), -1;
    int rc;
    if (nr->parts) {
        rc = netrun_parts_sides(nr, true, side, on_healed, w, err, errlen);
    } else {
        struct kernel_op op = {.kind = OP_HEAL};
        if (side && !(op.side = malloc(nr->net->n_nodes))) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            if (side) memcpy(op.side, side, nr->net->n_nodes);
            rc = netrun_kernel_op_queue(nr, &op, on_healed, w, err, errlen);
        }
    }
    if (rc == 0) cuts_take(nr, side, w->before); /* no part had any: healed at once */
    if (rc <= 0) free(w->side), free(w);
    return rc;
}

/* Puts link l's far end (not `stays`'s) at node `to` in the model, with a
 * fresh interface name there; *end_a says which end moved, *from where it was. */
void netrun_move_link_end(struct topo_network *net, int l, int stays, int to, bool *end_a,
                          int *from)
{
    struct topo_link *link = &net->links[l];
    *end_a = link->b == stays;
    *from = *end_a ? link->a : link->b;
    if (*end_a)
        link->a = to;
    else
        link->b = to;
    topo_name_link_end(net, (size_t)l, to, *end_a ? link->ifname_a : link->ifname_b);
}

static int move_refused_backend(struct netrun *nr, char *err, size_t errlen)
{
    snprintf(err, errlen, "backend '%s' emulates no links to move (use kernel, user or auto)",
             netrun_backend(nr));
    return -1;
}

int netrun_link_move_check(const struct netrun *nr, int l, int stays, int to, char *err,
                           size_t errlen)
{
    return nr->parts ? netrun_parts_move_check(nr, l, stays, to, err, errlen) : 0;
}

int netrun_link_move(struct netrun *nr, int l, int stays, int to, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen)
{
    if (nr->parts) return netrun_parts_move(nr, l, stays, to, cb, ctx, err, errlen);
    if (!nr->kernel) return move_refused_backend(nr, err, errlen);
    kernel_ops_settle(nr); /* the kernel layer and the routing are the loop's now */
    struct topo_network *net = nr->net;
    struct topo_link saved = net->links[l];
    int from;
    bool end_a;
    netrun_move_link_end(net, l, stays, to, &end_a, &from);
    struct topo_routing fresh;
    if (topo_routing_compute(net, &fresh, err, errlen) < 0) {
        net->links[l] = saved; /* nothing was touched yet */
        return -1;
    }
    topo_routing_free(&nr->routing);
    nr->routing = fresh; /* the kernel layer reads it through its pointer */
    int rc = emu_tc_link_move(nr->kernel, l, end_a, from, err, errlen);
    return rc < 0 ? rc : emu_tc_reroute(nr->kernel, l, stays, err, errlen);
}

/* A part's link l moved in its model and its kernel (1; 0: it ends there
 * already); when the kernel
 * refused before the interface left its namespace (a name taken there),
 * the model is put back too, so that the part answers the move's failure
 * with nothing changed (netrun_parts.c undoes the other machines, and
 * asks this one to move the link back: a no-op then). */
static int move_part_link(struct netrun *nr, int l, int stays, int to, char *err, size_t errlen)
{
    struct topo_link saved = nr->net->links[l];
    if ((saved.a == stays && saved.b == to) || (saved.b == stays && saved.a == to))
        return 0; /* there already: the undo of a move this part refused */
    int was_a, was_b, now_a, now_b, from;
    bool end_a;
    emu_tc_link_ifindex(nr->kernel, l, &was_a, &was_b);
    netrun_move_link_end(nr->net, l, stays, to, &end_a, &from);
    if (emu_tc_link_move(nr->kernel, l, end_a, from, err, errlen) == 0) return 1;
    emu_tc_link_ifindex(nr->kernel, l, &now_a, &now_b);
    if (now_a == was_a && now_b == was_b) nr->net->links[l] = saved;
    return -1;
}

int netrun_link_move_routes(struct netrun *nr, int l, int stays, int to,
                            const struct topo_route_change *changes, size_t n, char *err,
                            size_t errlen)
{
    if (!nr->kernel) return move_refused_backend(nr, err, errlen);
    kernel_ops_settle(nr);
    /* the link first: a move it refuses leaves the routes as they were */
    int moved = l >= 0 ? move_part_link(nr, l, stays, to, err, errlen) : 0;
    if (moved < 0) return -1;
    for (size_t i = 0; i < n; i++) /* the model first: a link up replays it */
        if (topo_routes_put(&nr->routing.nodes[changes[i].node], &changes[i].route) < 0)
            return snprintf(err, errlen, "out of memory"), -1;
    nr->routing.total_routes = 0;
    for (size_t i = 0; i < nr->routing.n_nodes; i++)
        nr->routing.total_routes += nr->routing.nodes[i].n_routes;
    /* a link that did not move stays as it is (down for the gap: its
     * routes wait for its up, as any down link's) */
    return emu_tc_routes_put(nr->kernel, changes, n, moved ? l : -1, err, errlen);
}

size_t netrun_partitions(const struct netrun *nr)
{
    return nr->n_cuts;
}

bool netrun_separated(const struct netrun *nr, int a, int b)
{
    for (size_t p = 0; p < nr->n_cuts; p++) {
        const unsigned char *side = nr->cuts[p];
        if (side[a] && side[b] && side[a] != side[b]) return true;
    }
    return false;
}

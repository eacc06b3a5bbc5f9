/* part_build.c — one machine's part built and released by the engine
 * (see part_build.h). */
#include "controller/part_build.h"

#include "controller/log.h"
#include "controller/registry.h"
#include "topo/part_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct part_run {
    struct topo_part part;
    struct registry *registry;
    struct netrun *nr;
    struct part_build_opts opts;
    part_released_fn released;
    void *released_ctx;
};

struct netrun *part_netrun(const struct part_run *run)
{
    return run->nr;
}

const struct topo_part *part_model(const struct part_run *run)
{
    return &run->part;
}

struct registry *part_registry(const struct part_run *run)
{
    return run->registry;
}

const char *part_registry_id(const struct part_run *run)
{
    return registry_run_id(run->registry);
}

/* Everything but the netrun (released or never built). */
static void part_run_free(struct part_run *run)
{
    char err[512];
    if (run->registry && registry_close_and_remove(run->registry, err, sizeof err) < 0)
        ctl_log("warning: part of machine %s: %s", run->part.machine, err);
    topo_part_free(&run->part);
    free(run);
}

static void on_built(void *ctx, struct netrun *nr, const struct net_error *error)
{
    struct part_run *run = ctx;
    struct part_build_opts opts = run->opts;
    if (error) {
        /* the failed build left nothing but the model, which the callback
         * may read (part_model) to name the error's node and link */
        opts.built(opts.ctx, NULL, error);
        part_run_free(run);
        return;
    }
    run->nr = nr;
    opts.built(opts.ctx, run, NULL);
}

static void on_peer_exit(void *ctx, int node, int wait_status)
{
    struct part_run *run = ctx;
    if (run->opts.exited) run->opts.exited(run->opts.ctx, node, wait_status);
}

/* The part decoded, for this machine, and its registry entry; a failure
 * sets error->code: the part's fault, or the machine's (no registry). */
static int part_open(struct part_run *run, const void *bytes, size_t len, struct net_error *error)
{
    char *msg = error->message;
    size_t cap = sizeof error->message;
    error->code = NET_ERR_SCENARIO;
    if (topo_part_decode(bytes, len, &run->part, msg, cap) < 0 ||
        topo_part_check_underlay(&run->part, msg, cap) < 0)
        return -1;
    if (strcmp(run->part.machine, run->opts.machine) != 0)
        return snprintf(msg, cap, "part of network '%s' for machine '%s' reached machine '%s'",
                        run->part.net->name, run->part.machine, run->opts.machine),
               -1;
    char hint[TOPO_PART_RUN_ID_MAX + TOPO_MACHINE_NAME_MAX + 1];
    snprintf(hint, sizeof hint, "%s@%s", run->part.run_id, run->part.machine);
    run->registry = registry_open(hint, NULL, msg, cap);
    if (!run->registry) return error->code = NET_ERR_ENVIRONMENT, -1;
    error->code = NET_OK;
    return 0;
}

int part_build(struct ev_loop *loop, const void *bytes, size_t len,
               const struct part_build_opts *opts, struct part_run **out, struct net_error *error)
{
    net_error_clear(error);
    struct part_run *run = calloc(1, sizeof *run);
    if (!run) {
        error->code = NET_ERR_SCENARIO; /* as netrun_build's out of memory */
        return snprintf(error->message, sizeof error->message, "out of memory"), -1;
    }
    run->opts = *opts;
    if (part_open(run, bytes, len, error) < 0) {
        part_run_free(run);
        return -1;
    }
    struct netrun_config cfg = {.run_id = registry_run_id(run->registry),
                                .registry = run->registry,
                                .peer_path = opts->peer_path,
                                .routing = &run->part.routing,
                                .data_secret = run->part.secret};
    struct netrun *nr;
    if (netrun_build(loop, run->part.net, &cfg, on_peer_exit, run, on_built, run, &nr, error) < 0) {
        part_run_free(run);
        return -1;
    }
    *out = run;
    return 0;
}

static void on_released(void *ctx)
{
    struct part_run *run = ctx;
    part_released_fn released = run->released;
    void *released_ctx = run->released_ctx;
    part_run_free(run);
    if (released) released(released_ctx);
}

void part_release(struct part_run *run, part_released_fn released, void *ctx)
{
    run->released = released;
    run->released_ctx = ctx;
    netrun_close_peers(run->nr); /* the peers exit on EOF; release kills a survivor */
    netrun_release(run->nr, on_released, run);
    run->nr = NULL;
}

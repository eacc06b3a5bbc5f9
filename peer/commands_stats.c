/* commands_stats.c — the two commands answered at once on the loop thread:
 * ping (the round trip) and stats (the peer's counters). */
#include "peer/commands_stats.h"

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "kernels/device.h"
#include "peer/command_job.h"
#include "peer/dataplane.h"
#include "peer/devmirror.h"

static bool ping_run(struct command_job *j)
{
    return true;
}

/* ---- stats ---- */

/* Resident set size from /proc/self/statm (in pages); 0 if unreadable. */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f) return 0;
    unsigned long long size_pages, resident_pages;
    int got = fscanf(f, "%llu %llu", &size_pages, &resident_pages);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? resident_pages * (uint64_t)page : 0;
}

/* Peak resident set size (VmHWM of /proc/self/status); 0 if unreadable. */
static uint64_t peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[128];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

/* On the loop thread, at once: every counter it reads is safe from there, so
 * stats answers while the worker computes or a wait holds the queue. */
static bool stats_run(struct command_job *j)
{
    struct peer_server *s = j->server;
    struct dataplane_totals data;
    dataplane_get_totals(s->dataplane, &data);
    uint64_t tensors, tensor_bytes;
    store_totals(j->store, &tensors, &tensor_bytes);
    struct worker_totals totals;
    worker_get_totals(j->worker, &totals);
    cmd_result_str(j, "node", j->server->cfg.node);
    cmd_result_u64(j, "tensors", tensors);
    cmd_result_u64(j, "tensor_bytes", tensor_bytes);
    uint64_t arrivals, arrivals_dropped;
    store_arrivals_totals(j->store, &arrivals, &arrivals_dropped);
    cmd_result_u64(j, "arrivals", arrivals);
    cmd_result_u64(j, "arrivals_dropped", arrivals_dropped);
    /* Elements of virtual tensors that computations left out (store.h). */
    cmd_result_u64(j, "virtual_skipped_elements", store_skipped(j->store));
    cmd_result_u64(j, "mem_rss_bytes", rss_bytes());
    cmd_result_u64(j, "mem_peak_bytes", peak_rss_bytes());
    cmd_result_u64(j, "bytes_sent", data.bytes_sent);
    cmd_result_u64(j, "bytes_received", data.bytes_received);
    cmd_result_u64(j, "transfers_sent", data.transfers_sent);
    cmd_result_u64(j, "transfers_received", data.transfers_received);
    cmd_result_u64(j, "data_connections", data.connections);
    cmd_result_u64(j, "data_port", (uint64_t)dataplane_port(s->dataplane));
    cmd_result_u64(j, "peers", dataplane_peer_count(s->dataplane));
    cmd_result_f64(j, "compute_ms", peer_emulated_ms(j->server, totals.compute_ms));
    cmd_result_u64(j, "jobs", totals.jobs);
    cmd_result_u64(j, "overruns", totals.overruns);
    cmd_result_u64(j, "commands", s->commands);
    cmd_result_u64(j, "pid", (uint64_t)getpid()); /* for tests and `hiernet exec` users */
    struct devmirror_totals dev;
    devmirror_get_totals(j->dev, &dev);
    cmd_result_str(j, "device", kern_ctx_describe(devmirror_ctx(j->dev)));
    cmd_result_u64(j, "device_uploads", dev.uploads);
    cmd_result_u64(j, "device_upload_bytes", dev.upload_bytes);
    cmd_result_u64(j, "device_downloads", dev.downloads);
    cmd_result_u64(j, "device_download_bytes", dev.download_bytes);
    cmd_result_u64(j, "device_mirrors", dev.mirrors);
    cmd_result_u64(j, "device_bytes", dev.mirror_bytes);
    return true;
}

/* ---- table entries ---- */

static const char *const keys_none[] = {NULL};

const struct command stats_cmd_ping = {
    .keys = keys_none, .kind = COMMAND_NOW, .run = ping_run, .bare = true};
const struct command stats_cmd_stats = {.keys = keys_none, .kind = COMMAND_NOW, .run = stats_run};

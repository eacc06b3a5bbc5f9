/* netrun_cgroups.c — the run's cgroup (nodes with cpu= limits): listed in
 * the registry, made, a group per limited node, removed at the release. */
#include "controller/netrun_internal.h"

#include "controller/log.h"
#include "controller/registry.h"

#include <stdio.h>

/* ---- cgroups ---- */

static bool wants_cpu_limit(const struct topo_network *net)
{
    for (size_t i = 0; i < net->n_nodes; i++)
        if (topo_node_local_host(&net->nodes[i]) && net->nodes[i].cpu > 0) return true;
    return false;
}

/* The run's group is listed in the registry before it exists, so a crash
 * in between cannot leak it (registry.h). */
int netrun_prepare_cgroups(struct netrun *nr, bool *env_error, char *err, size_t errlen)
{
    if (!wants_cpu_limit(nr->net)) return 0;
    char why[256];
    if (emu_cgroup_detect(&nr->cgroup, why, sizeof why) < 0 ||
        nr->cgroup.version == EMU_CGROUP_NONE) {
        *env_error = true;
        snprintf(err, errlen, "network '%s': cpu= limits need a cgroup cpu controller: %s",
                 nr->net->name, why);
        return -1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s", nr->cgroup.root, EMU_CGROUP_PREFIX, nr->run_id);
    if (nr->registry && (registry_add_cgroup(nr->registry, path, err, errlen) < 0 ||
                         registry_commit(nr->registry, err, errlen) < 0))
        return -1;
    if (emu_cgroup_run_create(&nr->cgroup, nr->run_id, err, errlen) < 0) {
        *env_error = true;
        return -1;
    }
    nr->cgroups_made = true;
    return 0;
}

int netrun_limit_cpu(struct netrun *nr, int node, pid_t pid, char *err, size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    if (!(n->cpu > 0)) return 0;
    char path[512];
    if (emu_cgroup_node_create(&nr->cgroup, nr->run_id, n->name, n->cpu, path, sizeof path, err,
                               errlen) < 0)
        return -1;
    return emu_cgroup_attach(path, pid, err, errlen);
}

/* The run's group is gone (or given up on: said in the log): so is its entry. */
void netrun_cgroups_released(struct netrun *nr, int rc, const char *err)
{
    if (rc != 0) ctl_log("%s", err);
    nr->cgroups_made = false;
    if (!nr->registry) return;
    char path[512], why[256];
    snprintf(path, sizeof path, "%s/%s%s", nr->cgroup.root, EMU_CGROUP_PREFIX, nr->run_id);
    registry_remove_cgroup(nr->registry, path);
    if (registry_commit(nr->registry, why, sizeof why) < 0) ctl_log("%s", why);
}

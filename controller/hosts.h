/* hosts.h — the machines a run may spread over (issue 20): read from a
 * machines file (parsed by topo/machines.c) or, for "slurm", from the
 * current allocation (SLURM_JOB_NODELIST expanded by `scontrol show
 * hostnames`, cores from SLURM_JOB_CPUS_PER_NODE), with the controller's own
 * machine marked local.
 *
 * Blocking (a file read, one short scontrol): called when a network is
 * defined, before anything of the run is started. */
#pragma once

#include "topo/machines.h"

#include <stddef.h>

/* spec: a file's path, or "slurm". out starts empty and is the caller's to
 * free (topo_machines_free) even on failure; err is one line naming the
 * file and line, or what Slurm lacks. */
int hosts_load(const char *spec, struct topo_machines *out, char *err, size_t errlen);
/* Marks the machines that are this one: named "local", or whose address is
 * localhost, this host's name or one of its interfaces' addresses (literal
 * comparison: no name is resolved). */
void hosts_mark_local(struct topo_machines *m);

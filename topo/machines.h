/* machines.h — the machines one run may spread over (issue 20): the model
 * of a machines file (`name address [cores=N] [mem=GiB] [user=...]`, one a
 * line, '#' comments, blank lines) and its parser.
 *
 * Pure: the parser reads the text it is handed (no file, no resolver), so
 * a fuzz target can feed it any bytes; controller/hosts.c reads the file
 * or Slurm's allocation and marks the controller's own machine. Owns the
 * machine array. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define TOPO_MACHINE_NAME_MAX 64  /* bytes, NUL included (a host name's label) */
#define TOPO_MACHINE_ADDR_MAX 256 /* a DNS name, an IPv4 or IPv6 address */
#define TOPO_MACHINE_USER_MAX 33  /* a POSIX login name */
#define TOPO_MACHINES_MAX 4096    /* more machines than any lab's allocation */

struct topo_machine {
    char name[TOPO_MACHINE_NAME_MAX];
    char address[TOPO_MACHINE_ADDR_MAX];
    int cores;                        /* cores= (0: not given, counts as 1 in the placement) */
    double mem_gib;                   /* mem= (0: not given); checked, not used yet */
    char user[TOPO_MACHINE_USER_MAX]; /* user= ("": SSH's default) */
    int line;                         /* of the file (0: not from a file) */
    bool local;                       /* the controller's own machine (controller/hosts.c) */
};

struct topo_machines {
    char source[256]; /* the file as named, or "slurm": for messages */
    struct topo_machine *v;
    size_t n, cap;
};

/* Parses a machines file's text (len bytes, NUL bytes refused) into out,
 * which starts empty and is the caller's to free even on failure. On bad
 * input returns -1 with err "SOURCE:LINE: ..." quoting the value: a bad
 * name, address or key, a bad number, a duplicate name or address. An
 * empty list is an error too (a run needs one machine). */
int topo_machines_parse(const char *text, size_t len, const char *source, struct topo_machines *out,
                        char *err, size_t errlen);
/* Adds one machine (line 0) after the same checks as a file's line. */
int topo_machines_add(struct topo_machines *m, const char *name, const char *address, int cores,
                      char *err, size_t errlen);
void topo_machines_free(struct topo_machines *m);
/* Index of the machine named name, or -1. */
int topo_machines_find(const struct topo_machines *m, const char *name);
/* The machine's share weight in the placement: its cores, 1 when not given. */
double topo_machine_capacity(const struct topo_machine *m);
/* Slurm's SLURM_JOB_CPUS_PER_NODE ("4(x2),2": 4, 4, 2) into cpus[0..n):
 * 0 on success, -1 when the text is malformed or names fewer than n. */
int topo_machines_slurm_cpus(const char *spec, int *cpus, size_t n);

/* fuzz_machines.c — libFuzzer target for the machines file's parser
 * (topo/machines.c), which reads a file the user names with --hosts: any
 * bytes either fail with one line or give machines whose names and
 * addresses are unique and each found at its own index. */
#include "topo/machines.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    struct topo_machines m;
    memset(&m, 0, sizeof m);
    int rc = topo_machines_parse((const char *)data, size, "fuzz", &m, err, sizeof err);
    if (rc < 0 && (!err[0] || strchr(err, '\n'))) abort();
    for (size_t i = 0; rc == 0 && i < m.n; i++) {
        if (topo_machines_find(&m, m.v[i].name) != (int)i) abort();
        for (size_t j = 0; j < i; j++)
            if (!strcmp(m.v[i].address, m.v[j].address)) abort();
        if (topo_machine_capacity(&m.v[i]) < 1) abort();
    }
    topo_machines_free(&m);
    return 0;
}

/* names.h — the length limits of names, in one place: of the names a
 * topology gives its nodes, and of a run's id. topo checks the first
 * (topo_add_node), the Lua binding and the controller size their buffers by
 * it (TOPO_NAME_MAX, HN_NODE_NAME_SIZE), the run registry bounds its entries
 * by it (REGISTRY_NAME_MAX), the peer checks its --node against it and the
 * data plane's frames carry names of at most this many bytes
 * (FRAME_NODE_NAME_SIZE). A name made of several (a run's cgroup
 * "<run id>-<network>", an overload entry "network/node") is sized from its
 * parts where it is made. Macros only: any module may include it. */
#pragma once

/* Bytes of a node's name without the NUL (also of network and tier names). */
#define HN_NODE_NAME_MAX 31
/* A buffer for one such name, NUL included. */
#define HN_NODE_NAME_SIZE (HN_NODE_NAME_MAX + 1)

/* Bytes of a run's id without the NUL (controller/registry.h: made from
 * the results directory's name; it also names the run's cgroups). */
#define HN_RUN_ID_MAX 63

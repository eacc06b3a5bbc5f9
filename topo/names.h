/* names.h — the length limit of the names a topology gives its nodes, in
 * one place: topo checks it (topo_add_node), the Lua binding and the
 * controller size their buffers by it (TOPO_NAME_MAX), the peer checks its
 * --node against it and the data plane's frames carry names of at most
 * this many bytes (FRAME_NODE_NAME_SIZE). Macros only: any module may
 * include it. */
#pragma once

/* Bytes of a node's name without the NUL (also of network and tier names). */
#define HN_NODE_NAME_MAX 31

/* pack_kv.h — map entries for the messages the unit tests build by hand
 * (the programs pack theirs with typed writers: proto/msgmap.h). Static
 * inline: a test's own helpers, never part of proto/. */
#pragma once

#include "proto/protocol.h"

#include <msgpack.h>
#include <stdint.h>

static inline void pack_kv_str(msgpack_packer *pk, const char *key, const char *value)
{
    proto_pack_str(pk, key);
    proto_pack_str(pk, value);
}

static inline void pack_kv_i64(msgpack_packer *pk, const char *key, int64_t value)
{
    proto_pack_str(pk, key);
    msgpack_pack_int64(pk, value);
}

static inline void pack_kv_f64(msgpack_packer *pk, const char *key, double value)
{
    proto_pack_str(pk, key);
    msgpack_pack_double(pk, value);
}

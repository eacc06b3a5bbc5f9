/* msgmap.h — a MessagePack map builder that counts its own entries.
 *
 * A msgpack map starts with its number of entries, so code that packs a map
 * straight into a stream must know that number before the first key: a
 * hand-counted `msgpack_pack_map(pk, 4 + extra)` that falls out of step
 * with the entries packed after it corrupts the stream at run time, far
 * from the mistake. A msgmap instead packs its entries into its own buffer
 * (inline for small maps, the heap beyond) and counts them; msgmap_end()
 * then writes the header with the count and the entries into the
 * destination. The bytes are exactly those of a hand-counted map (the
 * smallest header that fits: fixmap, map16 or map32).
 *
 *     struct msgmap m;
 *     msgmap_init(&m);
 *     msgmap_str(&m, "name", name);
 *     if (rate) msgmap_f64(&m, "rate", rate);
 *     msgmap_key(&m, "peers");          // then pack the value into m.pk
 *     msgpack_pack_array(&m.pk, 0);
 *     msgmap_end(&m, pk);               // or msgmap_response(&m, pk, msgid)
 *
 * Every key is one entry: msgmap_key() counts, the caller packs exactly one
 * value after it into m.pk (which may itself be a map built by a nested
 * msgmap ended into m.pk). The envelope helpers write a whole RPC message
 * (proto/protocol.h) around the map. A builder that ran out of memory ends
 * with false and writes nothing; msgmap_end and the envelopes free it on
 * every path, msgmap_free frees one that is dropped. A msgmap points into
 * itself: initialise it where it stays, never copy it. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/growbuf.h"

/* Bytes kept inside the builder before it allocates: the control channel's
 * common maps (a ping's result, a frame header) fit. */
#define MSGMAP_INLINE 192

struct msgmap {
    msgpack_packer pk;  /* pack a key's value here, after msgmap_key */
    uint32_t n;         /* entries so far */
    struct growbuf buf; /* the entries; buf.failed: out of memory, the map is lost */
    char inline_buf[MSGMAP_INLINE];
};

void msgmap_init(struct msgmap *m);
void msgmap_free(struct msgmap *m);

/* One entry's key; the caller packs its value into m->pk next. */
void msgmap_key(struct msgmap *m, const char *key);
void msgmap_str(struct msgmap *m, const char *key, const char *value);
/* A string value of len bytes (not NUL-terminated). */
void msgmap_strn(struct msgmap *m, const char *key, const char *value, size_t len);
void msgmap_i64(struct msgmap *m, const char *key, int64_t value);
void msgmap_u64(struct msgmap *m, const char *key, uint64_t value);
void msgmap_f64(struct msgmap *m, const char *key, double value);
void msgmap_bool(struct msgmap *m, const char *key, bool value);
void msgmap_nil(struct msgmap *m, const char *key);
/* A binary value (msgpack bin). */
void msgmap_bin(struct msgmap *m, const char *key, const void *value, size_t len);
/* Appends a copy of src's entries to m (src stays as it is). */
void msgmap_append(struct msgmap *m, const struct msgmap *src);
/* Bytes already in MessagePack form, written as they are: part of the value
 * of the last key (e.g. the elements of an array packed elsewhere). */
void msgmap_raw(struct msgmap *m, const void *bytes, size_t len);

/* The map (header with the count, then the entries) into out; frees m.
 * false, writing nothing, when m ran out of memory. */
bool msgmap_end(struct msgmap *m, msgpack_packer *out);
/* Whole RPC messages with m as their params or result; free m. */
bool msgmap_request(struct msgmap *m, msgpack_packer *out, uint32_t msgid, const char *method);
bool msgmap_notify(struct msgmap *m, msgpack_packer *out, const char *method);
bool msgmap_response(struct msgmap *m, msgpack_packer *out, uint32_t msgid);
/* A response whose error is m (a structured error) and result nil. */
bool msgmap_error_response(struct msgmap *m, msgpack_packer *out, uint32_t msgid);

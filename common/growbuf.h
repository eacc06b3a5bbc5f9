/* common/growbuf.h: the one growable byte buffer (the peer's pending
 * responses and a batch's packed results, proto's msgmap). It doubles as it
 * grows and can start in storage of the caller's (msgmap's inline bytes), so
 * small contents cost no allocation. A failed allocation sets `failed` and
 * drops every later append, so the contents are never silently truncated.
 * Owns `data` unless it is the caller's storage. A zeroed struct is an empty
 * buffer with nothing allocated. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct growbuf {
    char *data;
    size_t len, cap;
    char *fixed; /* the caller's storage it started in (never freed); NULL: none */
    size_t fixed_size;
    bool failed;
};

/* Empty, in `fixed` (size bytes, which must outlive the buffer) or, with
 * NULL, with nothing allocated. */
void growbuf_init(struct growbuf *b, char *fixed, size_t size);
/* Appends len bytes (bytes may be NULL when len is 0); false once an
 * allocation failed, now or before. */
bool growbuf_append(struct growbuf *b, const void *bytes, size_t len);
/* growbuf_append as a msgpack_packer's write callback
 * (msgpack_packer_init(&pk, &buffer, growbuf_write)): 0, or -1 on failure. */
int growbuf_write(void *buffer, const char *bytes, size_t len);
/* Frees what it allocated; the buffer is then empty, in its fixed storage
 * again, and no longer failed. */
void growbuf_free(struct growbuf *b);

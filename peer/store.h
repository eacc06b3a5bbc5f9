/* store.h — the peer's tensor store: named float32 tensors.
 *
 * The store owns the name -> tensor map and every tensor's memory. Tensors
 * are reference counted: store_tensor_new, store_find and store_tensor_hold
 * hand out a reference that the holder returns with store_tensor_release.
 * A tensor dropped or replaced while someone holds it stays valid (outside
 * the map) until its last reference goes, so a command or a transfer working
 * on it never sees its memory vanish.
 *
 * Threads: the map and the counters are guarded by a mutex and reference
 * counts are atomic, so the worker thread and the loop thread (data plane)
 * may both use the store. The store does not serialise access to a tensor's
 * elements: the peer runs its compute commands one at a time on the worker,
 * and a reader on another thread must take its own snapshot. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define STORE_NAME_MAX 127 /* bytes of a tensor name, without the NUL */
/* Largest tensor (8 GiB of float32): a guard against typos, not a real limit. */
#define STORE_MAX_ELEMENTS ((uint64_t)1 << 31)

struct store_tensor {
    char name[STORE_NAME_MAX + 1];
    uint64_t size; /* elements */
    float *data;   /* never NULL, even for size 0 */
    /* Private to store.c: */
    struct store_tensor *next; /* hash chain, guarded by the store's mutex */
    atomic_uint refs;
};

struct store;

/* NULL when out of memory. */
struct store *store_create(void);
/* Drops every tensor from the map; tensors still referenced live on until
 * released. */
void store_destroy(struct store *s);

/* A new tensor outside any map, with one reference for the caller. Zeroed or
 * uninitialised. NULL with errno ENAMETOOLONG (name longer than
 * STORE_NAME_MAX), EINVAL (size above STORE_MAX_ELEMENTS) or ENOMEM. */
struct store_tensor *store_tensor_new(const char *name, uint64_t size, bool zeroed);
void store_tensor_hold(struct store_tensor *t);
/* Returns one reference; frees the tensor with the last one. NULL is a no-op. */
void store_tensor_release(struct store_tensor *t);

/* Puts a tensor from store_tensor_new into the map under its name, replacing
 * (and releasing) any tensor of that name. The map takes its own reference;
 * the caller keeps its one. A tensor can be published once. */
void store_publish(struct store *s, struct store_tensor *t);
/* The tensor called name with a new reference for the caller, or NULL. */
struct store_tensor *store_find(struct store *s, const char *name);
/* Removes name from the map; false when there was no such tensor. */
bool store_drop(struct store *s, const char *name);
/* Tensors in the map and the bytes of their elements. */
void store_totals(struct store *s, uint64_t *count, uint64_t *bytes);

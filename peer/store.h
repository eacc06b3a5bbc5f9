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
 * may both use the store.
 *
 * Consistency of a tensor's elements (DESIGN.md "send semantics"): whoever
 * holds a reference to a tensor may read it at any time (a transfer in
 * flight, a compute command), so a published tensor is never written while
 * somebody else holds it. Writers follow one of two rules:
 *   - replacers (whole-tensor results, received tensors) build a new tensor
 *     and publish it under the name; holders of the old one keep theirs;
 *   - patchers (axpy, scale, optimizer steps, range receives) hold the
 *     store's write lock and go through store_patch_begin/_end or
 *     store_patch_range, which write in place only when the map is the sole
 *     other holder and otherwise copy on write. A copy is published only if
 *     the name still maps to the tensor it was copied from; if a replacer got
 *     there first the patch is dropped, as if it had happened just before
 *     the replacement.
 * The write lock serialises patchers (the worker and the data plane's range
 * receives), so two patches never race on one tensor.
 *
 * Generations: every tensor carries `gen`, a number unique in the process
 * that changes whenever its elements may have changed where a reader could
 * see it: it is fresh when the tensor is created, when it is published
 * (a recycled tensor gets a new one) and when a patch writes it in place.
 * Two looks at a tensor with equal gen saw the same elements, which is what
 * a GPU peer's device copies are checked against (peer/devmirror.h). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define STORE_NAME_MAX 127 /* bytes of a tensor name, without the NUL */
/* Largest tensor (8 GiB of float32): a guard against typos, not a real
 * limit. 2^31 - 1: an element count always fits a signed 32-bit integer. */
#define STORE_MAX_ELEMENTS (((uint64_t)1 << 31) - 1)

struct store_tensor {
    char name[STORE_NAME_MAX + 1];
    uint64_t size; /* elements */
    float *data;   /* never NULL, even for size 0 */
    /* Private to store.c: */
    struct store_tensor *next; /* hash chain, guarded by the store's mutex */
    atomic_uint refs;
    atomic_uint_fast64_t gen; /* read it with store_tensor_gen */
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
/* True when the caller's reference is the only one: nobody else can see the
 * tensor, so its memory may be reused. */
bool store_tensor_sole(const struct store_tensor *t);
/* The tensor's generation (see the top of this file); never 0. */
uint64_t store_tensor_gen(const struct store_tensor *t);
/* Returns one reference; frees the tensor with the last one. NULL is a no-op. */
void store_tensor_release(struct store_tensor *t);

/* Gives an unpublished tensor (one the caller holds alone) another name;
 * false (errno ENAMETOOLONG) when the name is too long. */
bool store_tensor_rename(struct store_tensor *t, const char *name);

/* Puts a tensor that is in no map into the map under its name, replacing
 * (and releasing) any tensor of that name. The map takes its own reference;
 * the caller keeps its one. */
void store_publish(struct store *s, struct store_tensor *t);
/* store_publish that hands the map's reference to the replaced tensor (NULL
 * if none) to the caller instead of releasing it: a caller that then finds
 * itself the only holder may reuse the tensor's memory. */
struct store_tensor *store_swap(struct store *s, struct store_tensor *t);
/* The tensor called name with a new reference for the caller, or NULL. */
struct store_tensor *store_find(struct store *s, const char *name);
/* Removes name from the map; false when there was no such tensor. */
bool store_drop(struct store *s, const char *name);
/* ---- patchers (see the top of this file) ---- */

void store_write_lock(struct store *s);
bool store_write_trylock(struct store *s);
void store_write_unlock(struct store *s);

struct store_patch {
    struct store_tensor *t;    /* write here; the caller holds a reference */
    struct store_tensor *orig; /* the published tensor when t is a private copy */
    uint64_t gen_before;       /* generation of the elements the patch starts from */
};
/* With the write lock held: the tensor called name, ready to be written.
 * 0, or -1 with errno ENOENT (no such tensor) or ENOMEM (copy failed).
 * Call it before taking other references to the same tensor, which would
 * make it look shared and force a copy. */
int store_patch_begin(struct store *s, const char *name, struct store_patch *p);
/* Publishes a copy (commit true, and only if the name still maps to the
 * original) and returns the references. Then the write lock may go. */
void store_patch_end(struct store *s, struct store_patch *p, bool commit);
/* With the write lock held: copies count floats from src to elements
 * [offset, offset + count) of the tensor called name. In place, under the
 * map's mutex so that no reader can take the tensor meanwhile, when the map
 * is its only holder; otherwise copy on write. 0, or -1 with errno ENOENT,
 * ERANGE (outside the tensor) or ENOMEM; *size gets the tensor's size when
 * it exists. */
int store_patch_range(struct store *s, const char *name, uint64_t offset, const float *src,
                      uint64_t count, uint64_t *size);

/* Tensors in the map and the bytes of their elements. */
void store_totals(struct store *s, uint64_t *count, uint64_t *bytes);

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
 * Consistency of a tensor's elements (docs/lua-api.md "send: broadcast, at, add"): whoever
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
 * a GPU peer's device copies are checked against (peer/devmirror.h).
 *
 * Versions (docs/lua-api.md "Ordering and versions"): every name has a
 * version, a counter users see. Publishing a tensor under a name sets it to
 * the name's previous version + 1 (1 for a name never seen), a committed
 * patch adds 1, a whole-tensor receive takes the sender's version unless the
 * name's own is higher. A dropped name keeps its last version (a tombstone),
 * so a re-created name continues the count: versions never go backwards.
 * A tensor's version is set under the map's mutex when it is published or
 * patched and does not change while anyone but the map holds it.
 *
 * Arrivals: every receive (whole, range, add) records an arrival (name,
 * sending node, version after the receive, bytes) in the same step, under
 * the map's mutex, as the tensor changes. Arrivals stay pending, in order,
 * until claimed (the wait command) or until their name is dropped, which
 * discards them in the same step as the tensor: no arrival outlives the
 * tensor it announced, none is lost between a receive and a drop. At most
 * STORE_ARRIVALS_MAX stay pending: beyond that the oldest is discarded and
 * counted, so that a script that never waits does not grow the peer.
 *
 * Virtual tensors (docs/lua-api.md "Virtual tensors"): a tensor whose
 * resident < size has memory for its first `resident` elements only; the
 * others read as STORE_VIRTUAL_PATTERN (zero) and are never written. Such a
 * tensor has its full size on the wire (the data plane sends the pattern for
 * the rest and discards it on receipt), so a profiled model of 138 M
 * parameters costs its transfer time and none of its memory. Whatever
 * computes on a tensor works on the resident prefix and counts the elements
 * it left out (store_count_skipped), which the peer's stats report as
 * virtual_skipped_elements. A copy, a received tensor and a patch keep the
 * virtual shape of what they copy. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_NAME_MAX 127 /* bytes of a tensor name, without the NUL */
/* Largest tensor (8 GiB of float32): a guard against typos, not a real
 * limit. 2^31 - 1: an element count always fits a signed 32-bit integer. */
#define STORE_MAX_ELEMENTS (((uint64_t)1 << 31) - 1)
/* Pending arrivals kept at most (about 100 bytes each). */
#define STORE_ARRIVALS_MAX (1u << 16)

struct store_tensor {
    char name[STORE_NAME_MAX + 1];
    uint64_t size; /* elements */
    /* Elements backed by data: size, or fewer for a virtual tensor (below). */
    uint64_t resident;
    float *data; /* resident elements; never NULL, even for size 0 */
    /* Private to store.c: */
    struct store_tensor *next; /* hash chain, guarded by the store's mutex */
    atomic_uint refs;
    atomic_uint_fast64_t gen;     /* read it with store_tensor_gen */
    atomic_uint_fast64_t version; /* read it with store_tensor_version */
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
/* The same for a virtual tensor: memory for `resident` (<= size, else
 * EINVAL) elements only. */
struct store_tensor *store_tensor_new_virtual(const char *name, uint64_t size, uint64_t resident,
                                              bool zeroed);
/* True when some elements are not resident. */
bool store_tensor_virtual(const struct store_tensor *t);
/* The resident part of elements [offset, offset + count): how many of them,
 * from offset on, are backed by memory. */
uint64_t store_resident_span(const struct store_tensor *t, uint64_t offset, uint64_t count);
void store_tensor_hold(struct store_tensor *t);
/* True when the caller's reference is the only one: nobody else can see the
 * tensor, so its memory may be reused. */
bool store_tensor_sole(const struct store_tensor *t);
/* The tensor's generation (see the top of this file); never 0. */
uint64_t store_tensor_gen(const struct store_tensor *t);
/* The version the tensor was published or last patched with; 0 for a tensor
 * that was never in a map. */
uint64_t store_tensor_version(const struct store_tensor *t);
/* Returns one reference; frees the tensor with the last one. NULL is a no-op. */
void store_tensor_release(struct store_tensor *t);

/* Gives an unpublished tensor (one the caller holds alone) another name;
 * false (errno ENAMETOOLONG) when the name is too long. */
bool store_tensor_rename(struct store_tensor *t, const char *name);

/* Puts a tensor that is in no map into the map under its name, replacing
 * (and releasing) any tensor of that name. The map takes its own reference;
 * the caller keeps its one. Returns the tensor's new version. */
uint64_t store_publish(struct store *s, struct store_tensor *t);
/* store_publish that hands the map's reference to the replaced tensor (NULL
 * if none) to the caller instead of releasing it: a caller that then finds
 * itself the only holder may reuse the tensor's memory. */
struct store_tensor *store_swap(struct store *s, struct store_tensor *t);
/* The tensor called name with a new reference for the caller, or NULL. */
struct store_tensor *store_find(struct store *s, const char *name);
/* The version of name: its tensor's, or the last one it had before it was
 * dropped; 0 for a name never published. */
uint64_t store_version(struct store *s, const char *name);
/* Removes name from the map and discards its pending arrivals: 1, 0 when
 * there was no such tensor (arrivals are discarded all the same), -1
 * (errno ENOMEM, nothing changed) when its tombstone cannot be allocated. */
int store_drop(struct store *s, const char *name);
/* ---- patchers (see the top of this file) ---- */

void store_write_lock(struct store *s);
bool store_write_trylock(struct store *s);
void store_write_unlock(struct store *s);
/* For a caller on an event loop that must not wait for the write lock: a
 * try that, when it fails, asks for the unlock hook to be called (once) at
 * the holder's next store_write_unlock, from the holder's thread (so the
 * hook only signals, e.g. ev_async_send). Set the hook before any patcher
 * runs. */
typedef void (*store_unlock_fn)(void *ctx);
void store_set_unlock_hook(struct store *s, store_unlock_fn fn, void *ctx);
bool store_write_trylock_or_notify(struct store *s);

struct store_patch {
    struct store_tensor *t;    /* write here; the caller holds a reference */
    struct store_tensor *orig; /* the published tensor when t is a private copy */
    uint64_t gen_before;       /* generation of the elements the patch starts from */
    uint64_t version;          /* set by store_patch_end: the version committed, 0 if none */
};
/* With the write lock held: the tensor called name, ready to be written.
 * 0, or -1 with errno ENOENT (no such tensor) or ENOMEM (copy failed).
 * Call it before taking other references to the same tensor, which would
 * make it look shared and force a copy. */
int store_patch_begin(struct store *s, const char *name, struct store_patch *p);
/* Publishes a copy (commit true, and only if the name still maps to the
 * original), adds 1 to the version of a committed patch and returns the
 * references; p->version then holds the version committed (0: the patch was
 * dropped or not committed). Then the write lock may go. */
void store_patch_end(struct store *s, struct store_patch *p, bool commit);
/* With the write lock held: copies count floats from src to elements
 * [offset, offset + count) of the tensor called name. In place, under the
 * map's mutex so that no reader can take the tensor meanwhile, when the map
 * is its only holder; otherwise copy on write. 0, or -1 with errno ENOENT,
 * ERANGE (outside the tensor) or ENOMEM; *size gets the tensor's size when
 * it exists. */
int store_patch_range(struct store *s, const char *name, uint64_t offset, const float *src,
                      uint64_t count, uint64_t *size);

/* ---- receives (the data plane; see "Arrivals" above) ---- */

/* A whole-tensor receive: publishes t (unpublished, held by the caller)
 * under its name with version max(sender_version, the name's version) and
 * records the arrival. *replaced gets the map's reference to the tensor it
 * replaced (NULL if none), as store_swap. 0, or -1 (ENOMEM: nothing done). */
int store_receive_whole(struct store *s, struct store_tensor *t, const char *from,
                        uint64_t sender_version, struct store_tensor **replaced);

/* A whole add summed as it arrived: the data plane computed r = t +
 * payload while receiving, t being the tensor the name mapped to then (held
 * by the caller). With the write lock held: publishes r (unpublished, held
 * by the caller) in place of t if the name still maps to t, with t's
 * version + 1, and records the arrival (bytes: 4 * r's size). 1 done
 * (*replaced: the map's reference to t), 0 when the name maps to another
 * tensor by now (nothing done: add the payload with store_receive_patch),
 * -1 (ENOMEM). */
int store_receive_replace(struct store *s, struct store_tensor *r, struct store_tensor *t,
                          const char *from, struct store_tensor **replaced, uint64_t *version);

/* A range or add receive into an existing tensor. */
struct store_write {
    const char *name, *from;
    const float *src;
    uint64_t offset, count; /* elements [offset, offset + count) of name */
    bool add;               /* add src into them instead of replacing them */
    bool whole;             /* add only: the whole tensor, whose size must be count */
    /* Trailing elements of the range that src does not hold (a virtual
     * sender's pattern): they read as STORE_VIRTUAL_PATTERN. */
    uint64_t src_missing;
};
/* With the write lock held: writes (or adds) w->src into name as a patch:
 * in place, under the map's mutex so that no reader can take the tensor
 * meanwhile, when the map is its only holder; otherwise a copy on write, in
 * one pass (the copy is made with the sum). The version goes up by 1 and the
 * arrival is recorded (bytes: 4 * count). 0, or -1 with errno ENOENT, ERANGE
 * (outside the tensor), EINVAL (a whole add of another size) or ENOMEM;
 * *size gets the tensor's size when it exists, *version the new version. */
int store_receive_patch(struct store *s, const struct store_write *w, uint64_t *size,
                        uint64_t *version);

/* ---- arrivals ---- */

struct store_arrival {
    struct store_arrival *next;
    uint64_t version, bytes;
    const char *name, *from; /* the tensor and the sending node, in strings */
    char strings[];
};
/* Does a pending arrival count for the caller (by its name, sender, ...)? */
typedef bool (*store_match_fn)(const struct store_arrival *a, const void *ctx);
/* When at least k pending arrivals match, removes the first k of them (in
 * arrival order) and returns them as a list in *claimed (free it with
 * store_arrivals_free). Returns how many were pending (nothing is claimed
 * when that is fewer than k). */
size_t store_arrivals_claim(struct store *s, store_match_fn match, const void *ctx, size_t k,
                            struct store_arrival **claimed);
/* The names of the matching pending arrivals, ", "-separated in buf
 * (truncated with "..." to fit cap); returns their count. */
size_t store_arrivals_describe(struct store *s, store_match_fn match, const void *ctx, char *buf,
                               size_t cap);
void store_arrivals_free(struct store_arrival *list);
/* Arrivals pending now, and those discarded beyond STORE_ARRIVALS_MAX. */
void store_arrivals_totals(struct store *s, uint64_t *pending, uint64_t *dropped);

/* Tensors in the map and the bytes of their elements (logical size). */
void store_totals(struct store *s, uint64_t *count, uint64_t *bytes);

/* The pattern the elements of a virtual tensor past its resident prefix
 * read as. */
#define STORE_VIRTUAL_PATTERN 0.0f
/* Elements of virtual tensors a computation left out (any thread), and the
 * total so far. */
void store_count_skipped(struct store *s, uint64_t elements);
uint64_t store_skipped(struct store *s);

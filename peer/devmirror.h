/* devmirror.h — the peer's compute device (kernels/device.h) and the device
 * copies of the tensors its compute commands touch.
 *
 * The tensor store stays in host memory: the data plane sends and receives
 * host buffers, read{} answers from them, and the CPU commands (tensor,
 * copy, compress, ...) work on them. On a cuda peer each tensor a GPU
 * command reads or writes gets a mirror: a device buffer plus the
 * generation (store.h) of the host tensor whose elements it holds. A mirror
 * is used as long as its tensor's generation is unchanged and uploaded again
 * when it has changed (a receive, a CPU command, a range patch), so a model
 * trained by grad + optim stays on the GPU while a parameter update received
 * from a server is picked up on the next grad.
 *
 * Results go back to host memory at once ("write-through"): a command that
 * writes a tensor on the device downloads what it wrote before it publishes
 * or commits the host tensor. Host tensors are therefore always current and
 * nothing else in the peer needs to know about devices (see
 * docs/design-notes.md for why not lazily).
 *
 * On the cpu the device is host memory: every call hands out the host
 * tensor's own elements and copies nothing, so the CPU path costs what it
 * did without this layer.
 *
 * Worker thread only (like the kern_ctx, which it borrows), except
 * devmirror_get_totals, which any thread may call. Functions that can fail
 * return NULL / false with a message in err. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/device.h"
#include "peer/store.h"

struct devmirror;

struct devmirror_totals {
    uint64_t uploads, upload_bytes;     /* host -> device copies of tensors */
    uint64_t downloads, download_bytes; /* device -> host copies of results */
    uint64_t mirrors, mirror_bytes;     /* device buffers held now */
};

/* NULL when out of memory. ctx stays the caller's and must outlive it. */
struct devmirror *devmirror_create(struct kern_ctx *ctx);
void devmirror_destroy(struct devmirror *m);
struct kern_ctx *devmirror_ctx(const struct devmirror *m);
void devmirror_get_totals(const struct devmirror *m, struct devmirror_totals *out);

/* The device elements of t (which the caller holds), uploaded first when
 * its mirror is not current. Valid until the next call for t's name. */
const float *devmirror_read(struct devmirror *m, const struct store_tensor *t, char *err,
                            size_t errlen);

/* ---- results: a new tensor computed on the device ---- */

/* Where the kernels write the elements of t, a new tensor the caller holds
 * alone (store_tensor_new): not t's current mirror, so a result may replace
 * one of its own inputs. */
float *devmirror_result(struct devmirror *m, struct store_tensor *t, char *err, size_t errlen);
/* Downloads the result into t, publishes t in s and makes the result t's
 * mirror. false (nothing published) when the download fails. */
bool devmirror_publish(struct devmirror *m, struct store *s, struct store_tensor *t, char *err,
                       size_t errlen);

/* ---- patches: a tensor written in place (store_patch_begin) ---- */

/* The device elements of the patched tensor p->t, current with the elements
 * the patch starts from; the kernels write them in place. */
float *devmirror_patch(struct devmirror *m, const struct store_patch *p, char *err, size_t errlen);
/* Ends the patch (store_patch_end): when ok, first downloads the elements
 * [offset, offset + count) the kernels wrote into p->t. Returns whether the
 * patch was committed; a mirror left unlike its host tensor is forgotten. */
bool devmirror_patch_end(struct devmirror *m, struct store *s, struct store_patch *p, bool ok,
                         uint64_t offset, uint64_t count, char *err, size_t errlen);

/* Frees the mirror of name (its tensor was dropped). */
void devmirror_forget(struct devmirror *m, const char *name);

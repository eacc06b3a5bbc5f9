/* dataplane_fuse.c — the data plane's whole adds, summed as they arrive
 * (see the comment below and dataplane_internal.h). */
#include <string.h>

#include "kernels/vec.h"
#include "peer/dataplane_internal.h"

/* ---- whole adds, summed as they arrive ----
 *
 * A whole add must change its target atomically (readers see it before or
 * after, never half-added), so it cannot be summed into the target in place
 * while the payload trickles in. Adding it from the staging buffer once it
 * is complete costs a pass over the tensor after the transfer (~12% of a
 * 16 MB loopback send). Instead, each part of the payload is summed into a
 * private result (a recycled tensor) right after it arrives, while it is
 * still in cache and while the loop would otherwise wait for the network:
 * result = target + payload. At the end the result replaces the target if
 * nothing changed the target meanwhile; otherwise (another receive or a
 * compute command wrote it) the payload, complete in the staging buffer, is
 * added as a patch after all. One add per target is summed this way at a
 * time; concurrent adds into the same target (k workers into one
 * accumulator) take the patch path. */

static bool dp_fusing(const struct dataplane *dp, const char *name)
{
    for (const struct dp_conn *c = dp->conns; c; c = c->next)
        if (c->fuse_dst && strcmp(c->fuse_dst->name, name) == 0) return true;
    return false;
}

static void dp_fuse_end(struct dp_conn *c)
{
    store_tensor_release(c->fuse_src);
    store_tensor_release(c->fuse_dst);
    c->fuse_src = c->fuse_dst = NULL;
    c->fused = 0;
}

/* A whole add is starting: sums it as it arrives when that is possible.
 * The target is taken with the write lock held, so no patch is writing it
 * in place right then; afterwards our reference makes patches copy it. */
void dp_fuse_begin(struct dp_conn *c)
{
    struct dataplane *dp = c->dp;
    const struct frame_header *h = &c->hdr;
    if (dp_fusing(dp, h->as) || !store_write_trylock(dp->store)) return;
    struct store_tensor *t = store_find(dp->store, h->as);
    store_write_unlock(dp->store);
    /* A virtual target or payload takes the patch path, which knows patterns
     * (and has little to add). */
    if (!t || t->size != h->count || store_tensor_virtual(t) || h->pattern) {
        store_tensor_release(t); /* a size mismatch: the patch path reports it */
        return;
    }
    c->fuse_dst = dp_take_tensor(dp, h->as, h->count, h->count);
    c->fuse_src = c->fuse_dst ? t : NULL;
    if (!c->fuse_dst) store_tensor_release(t);
    c->fused = 0;
}

/* Sums the elements of the payload that arrived since the last call. */
void dp_fuse_progress(struct dp_conn *c)
{
    if (!c->fuse_dst) return;
    uint64_t upto = c->payload_got / sizeof(float);
    vec_add(upto - c->fused, c->fuse_src->data + c->fused, c->staging + c->fused,
            c->fuse_dst->data + c->fused);
    c->fused = upto;
}

/* With the write lock held: the summed result replaces the target. 1 done,
 * 0 when the target changed meanwhile (fall back to the patch), -1 failed. */
int dp_fuse_commit(struct dp_conn *c)
{
    dp_fuse_progress(c);
    struct store_tensor *replaced;
    int rc = store_receive_replace(c->dp->store, c->fuse_dst, c->fuse_src, c->hdr.from, &replaced,
                                   &c->version_after);
    store_tensor_release(c->fuse_src);
    c->fuse_src = NULL;
    dp_keep_spare(c->dp, replaced);
    dp_fuse_end(c);
    return rc;
}

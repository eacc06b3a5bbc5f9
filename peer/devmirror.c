/* devmirror.c — device copies of a peer's tensors (see devmirror.h): one
 * entry per tensor name with the mirror buffer, the generation it holds,
 * and a spare buffer that results are computed into. Owns every entry and
 * its device buffers; borrows the kern_ctx. */
#include "peer/devmirror.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_error.h"

struct mirror {
    char name[STORE_NAME_MAX + 1];
    uint64_t gen; /* the host generation buf holds; 0: none */
    float *buf;   /* size elements */
    size_t size;
    float *spare; /* a result being computed; spare_size elements */
    size_t spare_size;
    struct mirror *next;
};

struct devmirror {
    struct kern_ctx *ctx;
    bool host; /* the cpu: tensors are their own device copies */
    struct mirror *mirrors;
    /* The counters, kept up to date as mirrors change, so that stats can
     * read them from the loop thread. */
    pthread_mutex_t totals_lock;
    struct devmirror_totals totals;
};

/* Adds to the counters (the loop thread may be reading them). */
static void totals_add(struct devmirror *m, int64_t mirrors, int64_t mirror_bytes, bool upload,
                       bool download, uint64_t bytes)
{
    pthread_mutex_lock(&m->totals_lock);
    m->totals.mirrors += (uint64_t)mirrors;
    m->totals.mirror_bytes += (uint64_t)mirror_bytes;
    m->totals.uploads += upload;
    m->totals.upload_bytes += upload ? bytes : 0;
    m->totals.downloads += download;
    m->totals.download_bytes += download ? bytes : 0;
    pthread_mutex_unlock(&m->totals_lock);
}

struct devmirror *devmirror_create(struct kern_ctx *ctx)
{
    struct devmirror *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->ctx = ctx;
    m->host = kern_ctx_device(ctx) == KERN_DEVICE_CPU;
    if (pthread_mutex_init(&m->totals_lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

static void mirror_free(struct devmirror *m, struct mirror *e)
{
    totals_add(m, -1, -(int64_t)((e->size + e->spare_size) * sizeof(float)), false, false, 0);
    kern_free(m->ctx, e->buf);
    kern_free(m->ctx, e->spare);
    free(e);
}

void devmirror_destroy(struct devmirror *m)
{
    if (!m) return;
    while (m->mirrors) {
        struct mirror *next = m->mirrors->next;
        mirror_free(m, m->mirrors);
        m->mirrors = next;
    }
    pthread_mutex_destroy(&m->totals_lock);
    free(m);
}

struct kern_ctx *devmirror_ctx(const struct devmirror *m)
{
    return m->ctx;
}

void devmirror_get_totals(const struct devmirror *m, struct devmirror_totals *out)
{
    struct devmirror *mm = (struct devmirror *)m; /* the lock, not the counters */
    pthread_mutex_lock(&mm->totals_lock);
    *out = m->totals;
    pthread_mutex_unlock(&mm->totals_lock);
}

/* ---- entries ---- */

static struct mirror **mirror_slot(struct devmirror *m, const char *name)
{
    struct mirror **p = &m->mirrors;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

/* The entry of name, created empty when missing; NULL when out of memory. */
static struct mirror *mirror_get(struct devmirror *m, const char *name, char *err, size_t errlen)
{
    struct mirror **slot = mirror_slot(m, name);
    if (*slot) return *slot;
    struct mirror *e = calloc(1, sizeof *e);
    if (!e) return kern_fail(err, errlen, "out of memory for the device copy of '%s'", name), NULL;
    strcpy(e->name, name); /* store names fit (STORE_NAME_MAX) */
    *slot = e;
    totals_add(m, 1, 0, false, false, 0);
    return e;
}

/* *buf holds n elements afterwards (its old contents are gone if it had
 * another size). */
static int buffer_fit(struct devmirror *m, float **buf, size_t *size, size_t n, char *err,
                      size_t errlen)
{
    if (*buf && *size == n) return 0;
    kern_free(m->ctx, *buf);
    totals_add(m, 0, -(int64_t)(*size * sizeof(float)), false, false, 0);
    *buf = NULL;
    *size = 0;
    if (kern_alloc(m->ctx, n, buf, err, errlen) < 0) return -1;
    *size = n;
    totals_add(m, 0, (int64_t)(n * sizeof(float)), false, false, 0);
    return 0;
}

/* Uploads t into e->buf, which then holds generation gen. */
static int mirror_upload(struct devmirror *m, struct mirror *e, const struct store_tensor *t,
                         uint64_t gen, char *err, size_t errlen)
{
    e->gen = 0;
    if (buffer_fit(m, &e->buf, &e->size, t->resident, err, errlen) < 0 ||
        kern_upload(m->ctx, e->buf, t->data, t->resident, err, errlen) < 0)
        return -1;
    e->gen = gen;
    totals_add(m, 0, 0, true, false, t->resident * sizeof(float));
    return 0;
}

static int mirror_download(struct devmirror *m, const float *src, float *dst, uint64_t count,
                           char *err, size_t errlen)
{
    if (kern_download(m->ctx, dst, src, count, err, errlen) < 0) return -1;
    totals_add(m, 0, 0, false, true, count * sizeof(float));
    return 0;
}

/* ---- reads ---- */

const float *devmirror_read(struct devmirror *m, const struct store_tensor *t, char *err,
                            size_t errlen)
{
    if (m->host) return t->data;
    struct mirror *e = mirror_get(m, t->name, err, errlen);
    if (!e) return NULL;
    uint64_t gen = store_tensor_gen(t);
    if (e->gen == gen && e->size == t->resident) return e->buf;
    return mirror_upload(m, e, t, gen, err, errlen) < 0 ? NULL : e->buf;
}

/* ---- results ---- */

float *devmirror_result(struct devmirror *m, struct store_tensor *t, char *err, size_t errlen)
{
    if (m->host) return t->data;
    struct mirror *e = mirror_get(m, t->name, err, errlen);
    if (!e || buffer_fit(m, &e->spare, &e->spare_size, t->resident, err, errlen) < 0) return NULL;
    return e->spare;
}

bool devmirror_publish(struct devmirror *m, struct store *s, struct store_tensor *t, char *err,
                       size_t errlen)
{
    if (m->host) {
        store_publish(s, t);
        return true;
    }
    struct mirror *e = *mirror_slot(m, t->name);
    if (!e || !e->spare || e->spare_size != t->resident) {
        kern_fail(err, errlen, "internal: no device result for '%s'", t->name);
        return false;
    }
    if (mirror_download(m, e->spare, t->data, t->resident, err, errlen) < 0) return false;
    store_publish(s, t); /* gives t its generation for readers */
    float *old = e->buf;
    size_t old_size = e->size;
    e->buf = e->spare;
    e->size = e->spare_size;
    e->spare = old; /* the next result of this name goes there */
    e->spare_size = old_size;
    e->gen = store_tensor_gen(t);
    return true;
}

/* ---- patches ---- */

float *devmirror_patch(struct devmirror *m, const struct store_patch *p, char *err, size_t errlen)
{
    if (m->host) return p->t->data;
    struct mirror *e = mirror_get(m, p->t->name, err, errlen);
    if (!e) return NULL;
    if ((e->gen != p->gen_before || e->size != p->t->resident) &&
        mirror_upload(m, e, p->t, 0, err, errlen) < 0)
        return NULL;
    /* Until the kernels write it, the mirror equals p->t's host elements. */
    e->gen = store_tensor_gen(p->t);
    return e->buf;
}

bool devmirror_patch_end(struct devmirror *m, struct store *s, struct store_patch *p, bool ok,
                         uint64_t offset, uint64_t count, char *err, size_t errlen)
{
    if (m->host) {
        store_patch_end(s, p, ok);
        return ok;
    }
    struct mirror *e = *mirror_slot(m, p->t->name);
    if (ok && e && e->buf)
        ok = mirror_download(m, e->buf + offset, p->t->data + offset, count, err, errlen) == 0;
    struct store_tensor *t = p->t;
    store_tensor_hold(t); /* to read its generation once committed */
    store_patch_end(s, p, ok);
    if (e) e->gen = ok ? store_tensor_gen(t) : 0;
    store_tensor_release(t);
    return ok;
}

void devmirror_forget(struct devmirror *m, const char *name)
{
    struct mirror **slot = mirror_slot(m, name);
    struct mirror *e = *slot;
    if (!e) return;
    *slot = e->next;
    mirror_free(m, e);
}

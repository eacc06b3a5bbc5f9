/* store.c — the peer's tensor store (see store.h): a chained hash map from
 * names to reference-counted tensors, behind one mutex, and the write lock
 * and copy-on-write rules of patchers. */
#include "peer/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define STORE_INITIAL_BUCKETS 64

struct store {
    pthread_mutex_t lock;
    pthread_mutex_t write_lock; /* serialises patchers (store.h) */
    struct store_tensor **buckets;
    size_t n_buckets; /* a power of two */
    uint64_t count, bytes;
};

/* Source of tensor generations (store.h); 0 is never handed out. */
static atomic_uint_fast64_t store_next_gen = 1;

static void store_tensor_renew(struct store_tensor *t)
{
    atomic_store_explicit(&t->gen, atomic_fetch_add(&store_next_gen, 1), memory_order_relaxed);
}

uint64_t store_tensor_gen(const struct store_tensor *t)
{
    return atomic_load_explicit(&((struct store_tensor *)t)->gen, memory_order_relaxed);
}

/* FNV-1a: short names, few of them; no need for anything stronger. */
static uint64_t store_hash(const char *name)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

struct store *store_create(void)
{
    struct store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_buckets = STORE_INITIAL_BUCKETS;
    s->buckets = calloc(s->n_buckets, sizeof *s->buckets);
    if (!s->buckets || pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s->buckets);
        free(s);
        return NULL;
    }
    if (pthread_mutex_init(&s->write_lock, NULL) != 0) {
        pthread_mutex_destroy(&s->lock);
        free(s->buckets);
        free(s);
        return NULL;
    }
    return s;
}

void store_destroy(struct store *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_buckets; i++) {
        struct store_tensor *t = s->buckets[i];
        while (t) {
            struct store_tensor *next = t->next;
            t->next = NULL;
            store_tensor_release(t);
            t = next;
        }
    }
    free(s->buckets);
    pthread_mutex_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

struct store_tensor *store_tensor_new(const char *name, uint64_t size, bool zeroed)
{
    size_t len = strlen(name);
    if (len > STORE_NAME_MAX || size > STORE_MAX_ELEMENTS) {
        errno = len > STORE_NAME_MAX ? ENAMETOOLONG : EINVAL;
        return NULL;
    }
    struct store_tensor *t = malloc(sizeof *t);
    if (!t) return NULL;
    /* One element at least, so data is a real pointer even for size 0. */
    size_t bytes = (size ? size : 1) * sizeof(float);
    t->data = zeroed ? calloc(1, bytes) : malloc(bytes);
    if (!t->data) {
        free(t);
        errno = ENOMEM;
        return NULL;
    }
    memcpy(t->name, name, len + 1);
    t->size = size;
    t->next = NULL;
    atomic_init(&t->refs, 1);
    atomic_init(&t->gen, 0);
    store_tensor_renew(t);
    return t;
}

void store_tensor_hold(struct store_tensor *t)
{
    atomic_fetch_add(&t->refs, 1);
}

bool store_tensor_sole(const struct store_tensor *t)
{
    return atomic_load(&((struct store_tensor *)t)->refs) == 1;
}

void store_tensor_release(struct store_tensor *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
        free(t->data);
        free(t);
    }
}

/* The chain link that points at name's tensor, or at the chain's NULL end.
 * Called with the lock held. */
static struct store_tensor **store_slot(struct store *s, const char *name)
{
    struct store_tensor **p = &s->buckets[store_hash(name) & (s->n_buckets - 1)];
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

/* Doubles the bucket array; on allocation failure the map keeps working with
 * longer chains. Called with the lock held. */
static void store_grow(struct store *s)
{
    size_t n = s->n_buckets * 2;
    struct store_tensor **buckets = calloc(n, sizeof *buckets);
    if (!buckets) return;
    for (size_t i = 0; i < s->n_buckets; i++) {
        struct store_tensor *t = s->buckets[i];
        while (t) {
            struct store_tensor *next = t->next;
            struct store_tensor **head = &buckets[store_hash(t->name) & (n - 1)];
            t->next = *head;
            *head = t;
            t = next;
        }
    }
    free(s->buckets);
    s->buckets = buckets;
    s->n_buckets = n;
}

bool store_tensor_rename(struct store_tensor *t, const char *name)
{
    size_t len = strlen(name);
    if (len > STORE_NAME_MAX) {
        errno = ENAMETOOLONG;
        return false;
    }
    memcpy(t->name, name, len + 1);
    return true;
}

/* Puts t into the map in place of *slot (which may be NULL). Called with the
 * lock held; returns the replaced tensor, whose map reference the caller
 * now holds. */
static struct store_tensor *store_replace(struct store *s, struct store_tensor **slot,
                                          struct store_tensor *t)
{
    struct store_tensor *old = *slot;
    t->next = old ? old->next : NULL;
    *slot = t;
    store_tensor_renew(t); /* its elements may be new to readers (a recycled tensor) */
    if (old) {
        old->next = NULL;
        s->count--;
        s->bytes -= old->size * sizeof(float);
    }
    s->count++;
    s->bytes += t->size * sizeof(float);
    return old;
}

struct store_tensor *store_swap(struct store *s, struct store_tensor *t)
{
    store_tensor_hold(t); /* the map's reference */
    pthread_mutex_lock(&s->lock);
    if (s->count >= s->n_buckets) store_grow(s);
    struct store_tensor *old = store_replace(s, store_slot(s, t->name), t);
    pthread_mutex_unlock(&s->lock);
    return old;
}

void store_publish(struct store *s, struct store_tensor *t)
{
    /* Released outside the lock: freeing gigabytes (munmap) should not stall
     * others. */
    store_tensor_release(store_swap(s, t));
}

struct store_tensor *store_find(struct store *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor *t = *store_slot(s, name);
    if (t) store_tensor_hold(t);
    pthread_mutex_unlock(&s->lock);
    return t;
}

bool store_drop(struct store *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor **slot = store_slot(s, name);
    struct store_tensor *t = *slot;
    if (t) {
        *slot = t->next;
        t->next = NULL;
        s->count--;
        s->bytes -= t->size * sizeof(float);
    }
    pthread_mutex_unlock(&s->lock);
    store_tensor_release(t);
    return t != NULL;
}

void store_totals(struct store *s, uint64_t *count, uint64_t *bytes)
{
    pthread_mutex_lock(&s->lock);
    *count = s->count;
    *bytes = s->bytes;
    pthread_mutex_unlock(&s->lock);
}

/* ---- patchers ---- */

void store_write_lock(struct store *s)
{
    pthread_mutex_lock(&s->write_lock);
}

bool store_write_trylock(struct store *s)
{
    return pthread_mutex_trylock(&s->write_lock) == 0;
}

void store_write_unlock(struct store *s)
{
    pthread_mutex_unlock(&s->write_lock);
}

/* A private copy of t (same name and elements), or NULL with errno ENOMEM. */
static struct store_tensor *store_copy(const struct store_tensor *t)
{
    struct store_tensor *copy = store_tensor_new(t->name, t->size, false);
    if (copy) memcpy(copy->data, t->data, t->size * sizeof(float));
    return copy;
}

int store_patch_begin(struct store *s, const char *name, struct store_patch *p)
{
    *p = (struct store_patch){0};
    pthread_mutex_lock(&s->lock);
    struct store_tensor *t = *store_slot(s, name);
    /* refs == 1: only the map holds it, and nobody can take it while we hold
     * the lock; patchers are excluded by the write lock, so it stays ours. */
    bool exclusive = t && atomic_load(&t->refs) == 1;
    if (t) store_tensor_hold(t);
    pthread_mutex_unlock(&s->lock);
    if (!t) {
        errno = ENOENT;
        return -1;
    }
    p->gen_before = store_tensor_gen(t);
    if (exclusive) {
        store_tensor_renew(t); /* about to be written in place */
        p->t = t;
        return 0;
    }
    p->t = store_copy(t);
    if (!p->t) {
        store_tensor_release(t);
        errno = ENOMEM;
        return -1;
    }
    p->orig = t;
    return 0;
}

/* Publishes copy in place of orig if the name still maps to orig; returns
 * the reference of whichever tensor did not end up in the map. */
static struct store_tensor *store_publish_if(struct store *s, struct store_tensor *copy,
                                             struct store_tensor *orig)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor **slot = store_slot(s, copy->name);
    struct store_tensor *loser = copy;
    if (*slot == orig) loser = store_replace(s, slot, copy);
    pthread_mutex_unlock(&s->lock);
    return loser;
}

void store_patch_end(struct store *s, struct store_patch *p, bool commit)
{
    if (p->orig && commit) {
        /* The map's reference moves from the loser to the winner: copy gets
         * one; orig's (or copy's, when dropped) goes. */
        store_tensor_hold(p->t);
        store_tensor_release(store_publish_if(s, p->t, p->orig));
    }
    store_tensor_release(p->t);
    store_tensor_release(p->orig);
    *p = (struct store_patch){0};
}

int store_patch_range(struct store *s, const char *name, uint64_t offset, const float *src,
                      uint64_t count, uint64_t *size)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor *t = *store_slot(s, name);
    int err = !t ? ENOENT : offset > t->size || count > t->size - offset ? ERANGE : 0;
    if (t) *size = t->size;
    if (!err && atomic_load(&t->refs) == 1) {
        /* Under the lock: a reader would take a reference first, and cannot. */
        memcpy(t->data + offset, src, count * sizeof(float));
        store_tensor_renew(t);
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    if (!err) store_tensor_hold(t);
    pthread_mutex_unlock(&s->lock);
    if (err) {
        errno = err;
        return -1;
    }
    struct store_patch p = {.t = store_copy(t), .orig = t};
    if (!p.t) {
        store_tensor_release(t);
        errno = ENOMEM;
        return -1;
    }
    memcpy(p.t->data + offset, src, count * sizeof(float));
    store_patch_end(s, &p, true);
    return 0;
}

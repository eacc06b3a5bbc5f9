/* store.c — the peer's tensor store (see store.h): a chained hash map from
 * names to reference-counted tensors, behind one mutex. */
#include "peer/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define STORE_INITIAL_BUCKETS 64

struct store {
    pthread_mutex_t lock;
    struct store_tensor **buckets;
    size_t n_buckets; /* a power of two */
    uint64_t count, bytes;
};

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
    return t;
}

void store_tensor_hold(struct store_tensor *t)
{
    atomic_fetch_add(&t->refs, 1);
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

void store_publish(struct store *s, struct store_tensor *t)
{
    store_tensor_hold(t); /* the map's reference */
    pthread_mutex_lock(&s->lock);
    if (s->count >= s->n_buckets) store_grow(s);
    struct store_tensor **slot = store_slot(s, t->name);
    struct store_tensor *old = *slot;
    t->next = old ? old->next : NULL;
    *slot = t;
    if (old) {
        s->count--;
        s->bytes -= old->size * sizeof(float);
    }
    s->count++;
    s->bytes += t->size * sizeof(float);
    pthread_mutex_unlock(&s->lock);
    /* Outside the lock: freeing gigabytes (munmap) should not stall others. */
    if (old) {
        old->next = NULL;
        store_tensor_release(old);
    }
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

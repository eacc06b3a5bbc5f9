/* store.c — the peer's tensor store (see store.h): a chained hash map from
 * names to reference-counted tensors, behind one mutex, the write lock and
 * copy-on-write rules of patchers, the versions of names (tombstones keep
 * those of dropped ones) and the queue of pending arrivals. */
#include "peer/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/vec.h"

#define STORE_INITIAL_BUCKETS 64

/* The last version of a dropped name, so that re-creating it continues the
 * count. Removed when the name is published again. */
struct store_tombstone {
    struct store_tombstone *next;
    uint64_t version;
    char name[];
};

struct store {
    pthread_mutex_t lock;
    pthread_mutex_t write_lock; /* serialises patchers (store.h) */
    /* store_write_trylock_or_notify: someone waits for the write lock */
    atomic_bool unlock_wanted;
    store_unlock_fn on_unlock;
    void *on_unlock_ctx;
    struct store_tensor **buckets;
    size_t n_buckets; /* a power of two */
    uint64_t count, bytes;
    struct store_tombstone **tombstones;
    size_t n_tombstone_buckets, n_tombstones;        /* a power of two; entries */
    struct store_arrival *arrivals, **arrivals_tail; /* pending, oldest first */
    uint64_t n_arrivals, arrivals_dropped;
    atomic_uint_fast64_t virtual_skipped; /* store_count_skipped */
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

uint64_t store_tensor_version(const struct store_tensor *t)
{
    return atomic_load_explicit(&((struct store_tensor *)t)->version, memory_order_relaxed);
}

static void store_tensor_set_version(struct store_tensor *t, uint64_t version)
{
    atomic_store_explicit(&t->version, version, memory_order_relaxed);
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
    s->arrivals_tail = &s->arrivals;
    s->n_tombstone_buckets = STORE_INITIAL_BUCKETS;
    s->tombstones = calloc(s->n_tombstone_buckets, sizeof *s->tombstones);
    if (!s->tombstones) {
        store_destroy(s);
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
    for (size_t i = 0; s->tombstones && i < s->n_tombstone_buckets; i++) {
        while (s->tombstones[i]) {
            struct store_tombstone *next = s->tombstones[i]->next;
            free(s->tombstones[i]);
            s->tombstones[i] = next;
        }
    }
    free(s->tombstones);
    store_arrivals_free(s->arrivals);
    pthread_mutex_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

struct store_tensor *store_tensor_new(const char *name, uint64_t size, bool zeroed)
{
    return store_tensor_new_virtual(name, size, size, zeroed);
}

bool store_tensor_virtual(const struct store_tensor *t)
{
    return t->resident < t->size;
}

uint64_t store_resident_span(const struct store_tensor *t, uint64_t offset, uint64_t count)
{
    if (offset >= t->resident) return 0;
    uint64_t left = t->resident - offset;
    return count < left ? count : left;
}

void store_count_skipped(struct store *s, uint64_t elements)
{
    if (elements) atomic_fetch_add_explicit(&s->virtual_skipped, elements, memory_order_relaxed);
}

uint64_t store_skipped(struct store *s)
{
    return atomic_load_explicit(&s->virtual_skipped, memory_order_relaxed);
}

struct store_tensor *store_tensor_new_virtual(const char *name, uint64_t size, uint64_t resident,
                                              bool zeroed)
{
    size_t len = strlen(name);
    if (len > STORE_NAME_MAX || size > STORE_MAX_ELEMENTS || resident > size) {
        errno = len > STORE_NAME_MAX ? ENAMETOOLONG : EINVAL;
        return NULL;
    }
    struct store_tensor *t = malloc(sizeof *t);
    if (!t) return NULL;
    /* One element at least, so data is a real pointer even for size 0. */
    size_t bytes = (resident ? resident : 1) * sizeof(float);
    t->data = zeroed ? calloc(1, bytes) : malloc(bytes);
    if (!t->data) {
        free(t);
        errno = ENOMEM;
        return NULL;
    }
    memcpy(t->name, name, len + 1);
    t->size = size;
    t->resident = resident;
    t->next = NULL;
    atomic_init(&t->refs, 1);
    atomic_init(&t->gen, 0);
    atomic_init(&t->version, 0);
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

/* ---- versions ---- */

static struct store_tombstone **store_tombstone_slot(struct store *s, const char *name)
{
    struct store_tombstone **p = &s->tombstones[store_hash(name) & (s->n_tombstone_buckets - 1)];
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

/* Doubles the tombstone buckets (a script that drops a fresh name every
 * round leaves many); on allocation failure chains just get longer. Called
 * with the lock held. */
static void store_tombstones_grow(struct store *s)
{
    size_t n = s->n_tombstone_buckets * 2;
    struct store_tombstone **buckets = calloc(n, sizeof *buckets);
    if (!buckets) return;
    for (size_t i = 0; i < s->n_tombstone_buckets; i++) {
        while (s->tombstones[i]) {
            struct store_tombstone *t = s->tombstones[i];
            s->tombstones[i] = t->next;
            struct store_tombstone **head = &buckets[store_hash(t->name) & (n - 1)];
            t->next = *head;
            *head = t;
        }
    }
    free(s->tombstones);
    s->tombstones = buckets;
    s->n_tombstone_buckets = n;
}

/* The version of name, whose map slot holds `current` (NULL: not in the
 * map). Called with the lock held. */
static uint64_t store_name_version(struct store *s, const struct store_tensor *current,
                                   const char *name)
{
    if (current) return store_tensor_version(current);
    struct store_tombstone *grave = *store_tombstone_slot(s, name);
    return grave ? grave->version : 0;
}

/* The name is in the map again: its tombstone goes. Called with the lock held. */
static void store_tombstone_remove(struct store *s, const char *name)
{
    struct store_tombstone **slot = store_tombstone_slot(s, name);
    struct store_tombstone *grave = *slot;
    if (!grave) return;
    *slot = grave->next;
    s->n_tombstones--;
    free(grave);
}

/* Puts t into the map in place of *slot (which may be NULL) with the given
 * version. Called with the lock held; returns the replaced tensor, whose map
 * reference the caller now holds. */
static struct store_tensor *store_replace(struct store *s, struct store_tensor **slot,
                                          struct store_tensor *t, uint64_t version)
{
    struct store_tensor *old = *slot;
    t->next = old ? old->next : NULL;
    *slot = t;
    store_tensor_renew(t); /* its elements may be new to readers (a recycled tensor) */
    store_tensor_set_version(t, version);
    if (old) {
        old->next = NULL;
        s->count--;
        s->bytes -= old->size * sizeof(float);
    } else {
        store_tombstone_remove(s, t->name);
    }
    s->count++;
    s->bytes += t->size * sizeof(float);
    return old;
}

/* store_swap with the version the caller chooses from the name's previous
 * one: previous + 1, or for a receive max(sender's, previous). */
static void store_arrival_post(struct store *s, struct store_arrival *a, uint64_t version);

static struct store_tensor *store_swap_versioned(struct store *s, struct store_tensor *t,
                                                 bool received, uint64_t sender_version,
                                                 struct store_arrival *arrival)
{
    store_tensor_hold(t); /* the map's reference */
    pthread_mutex_lock(&s->lock);
    if (s->count >= s->n_buckets) store_grow(s);
    struct store_tensor **slot = store_slot(s, t->name);
    uint64_t previous = store_name_version(s, *slot, t->name);
    uint64_t version = !received                   ? previous + 1
                       : sender_version > previous ? sender_version
                                                   : previous;
    struct store_tensor *old = store_replace(s, slot, t, version);
    store_arrival_post(s, arrival, version);
    pthread_mutex_unlock(&s->lock);
    return old;
}

struct store_tensor *store_swap(struct store *s, struct store_tensor *t)
{
    return store_swap_versioned(s, t, false, 0, NULL);
}

uint64_t store_publish(struct store *s, struct store_tensor *t)
{
    /* Released outside the lock: freeing gigabytes (munmap) should not stall
     * others. */
    store_tensor_release(store_swap(s, t));
    return store_tensor_version(t);
}

uint64_t store_version(struct store *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    uint64_t version = store_name_version(s, *store_slot(s, name), name);
    pthread_mutex_unlock(&s->lock);
    return version;
}

struct store_tensor *store_find(struct store *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor *t = *store_slot(s, name);
    if (t) store_tensor_hold(t);
    pthread_mutex_unlock(&s->lock);
    return t;
}

static void store_arrivals_discard(struct store *s, const char *name);

int store_drop(struct store *s, const char *name)
{
    size_t len = strlen(name) + 1;
    struct store_tombstone *grave = malloc(sizeof *grave + len);
    if (!grave) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(grave->name, name, len);
    pthread_mutex_lock(&s->lock);
    store_arrivals_discard(s, name);
    struct store_tensor **slot = store_slot(s, name);
    struct store_tensor *t = *slot;
    if (t) {
        *slot = t->next;
        t->next = NULL;
        s->count--;
        s->bytes -= t->size * sizeof(float);
        if (s->n_tombstones >= s->n_tombstone_buckets) store_tombstones_grow(s);
        struct store_tombstone **gslot = store_tombstone_slot(s, name);
        grave->version = store_tensor_version(t);
        grave->next = NULL;
        *gslot = grave; /* the name was in the map: it had no tombstone */
        s->n_tombstones++;
        grave = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    free(grave);
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
    if (s->on_unlock && atomic_exchange(&s->unlock_wanted, false)) s->on_unlock(s->on_unlock_ctx);
}

void store_set_unlock_hook(struct store *s, store_unlock_fn fn, void *ctx)
{
    s->on_unlock = fn;
    s->on_unlock_ctx = ctx;
}

/* The flag goes up before the attempt: a holder that unlocks after a
 * failed attempt always sees it (at worst a spare notification). */
bool store_write_trylock_or_notify(struct store *s)
{
    atomic_store(&s->unlock_wanted, true);
    if (pthread_mutex_trylock(&s->write_lock) != 0) return false;
    atomic_store(&s->unlock_wanted, false);
    return true;
}

/* A private copy of t (same name and elements), or NULL with errno ENOMEM. */
static struct store_tensor *store_copy(const struct store_tensor *t)
{
    struct store_tensor *copy = store_tensor_new_virtual(t->name, t->size, t->resident, false);
    if (copy) memcpy(copy->data, t->data, t->resident * sizeof(float));
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

/* Publishes copy in place of orig, with orig's version + 1, if the name
 * still maps to orig; returns the reference of whichever tensor did not end
 * up in the map and in *version the version published (0: none). */
static struct store_tensor *store_publish_if_locked(struct store *s, struct store_tensor *copy,
                                                    struct store_tensor *orig, uint64_t *version)
{
    struct store_tensor **slot = store_slot(s, copy->name);
    *version = 0;
    if (*slot != orig) return copy;
    *version = store_tensor_version(orig) + 1;
    return store_replace(s, slot, copy, *version);
}

static struct store_tensor *store_publish_if(struct store *s, struct store_tensor *copy,
                                             struct store_tensor *orig, uint64_t *version)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor *loser = store_publish_if_locked(s, copy, orig, version);
    pthread_mutex_unlock(&s->lock);
    return loser;
}

/* A patch written in place is one version more. */
static uint64_t store_bump_version(struct store *s, struct store_tensor *t)
{
    pthread_mutex_lock(&s->lock);
    uint64_t version = store_tensor_version(t) + 1;
    store_tensor_set_version(t, version);
    pthread_mutex_unlock(&s->lock);
    return version;
}

void store_patch_end(struct store *s, struct store_patch *p, bool commit)
{
    uint64_t version = 0;
    if (p->orig && commit) {
        /* The map's reference moves from the loser to the winner: copy gets
         * one; orig's (or copy's, when dropped) goes. */
        store_tensor_hold(p->t);
        store_tensor_release(store_publish_if(s, p->t, p->orig, &version));
    } else if (commit) {
        version = store_bump_version(s, p->t);
    }
    store_tensor_release(p->t);
    store_tensor_release(p->orig);
    *p = (struct store_patch){.version = version};
}

/* ---- writes into existing tensors (range and add receives) ---- */

static int store_write_check(const struct store_write *w, const struct store_tensor *t)
{
    if (!t) return ENOENT;
    if (w->add && w->whole && t->size != w->count) return EINVAL;
    if (w->offset > t->size || w->count > t->size - w->offset) return ERANGE;
    return 0;
}

/* dst = orig with w applied: in place when dst is orig, else the copy is
 * built in the same pass (the elements outside w copied, those inside
 * replaced or summed). Only resident elements are written: w->src holds
 * the resident part of the range (store_resident_span). */
static void store_write_apply(struct store *s, const struct store_write *w,
                              const struct store_tensor *orig, struct store_tensor *dst)
{
    uint64_t n = store_resident_span(orig, w->offset, w->count);
    uint64_t start = n ? w->offset : orig->resident; /* a range past the prefix writes nothing */
    const float *in = orig->data + start;
    float *out = dst->data + start;
    if (dst != orig) {
        vec_copy(start, orig->data, dst->data);
        vec_copy(orig->resident - start - n, orig->data + start + n, dst->data + start + n);
    }
    uint64_t held = w->count - w->src_missing; /* src's own elements */
    uint64_t m = n < held ? n : held;
    if (w->add) {
        vec_add(m, in, w->src, out); /* adding the zero pattern changes nothing */
    } else {
        vec_copy(m, w->src, out);
        vec_fill(n - m, STORE_VIRTUAL_PATTERN, out + m);
    }
    store_count_skipped(s, w->count - m);
}

/* Appends an arrival; beyond STORE_ARRIVALS_MAX pending the oldest goes
 * (counted), so a script that never waits does not grow the peer. Called
 * with the lock held. */
static void store_arrival_post(struct store *s, struct store_arrival *a, uint64_t version)
{
    if (!a) return;
    a->version = version;
    *s->arrivals_tail = a;
    s->arrivals_tail = &a->next;
    if (++s->n_arrivals <= STORE_ARRIVALS_MAX) return;
    struct store_arrival *oldest = s->arrivals;
    s->arrivals = oldest->next;
    free(oldest);
    s->n_arrivals--;
    s->arrivals_dropped++;
}

/* One attempt at w: 1 done, 0 when the copy lost to a replacer that came
 * in between (try again on what it published), -1 with errno. The arrival
 * (if any) is posted in the step that makes the change visible. */
static int store_write_once(struct store *s, const struct store_write *w, struct store_arrival *a,
                            uint64_t *size, uint64_t *version)
{
    pthread_mutex_lock(&s->lock);
    struct store_tensor *t = *store_slot(s, w->name);
    int err = store_write_check(w, t);
    if (t) *size = t->size;
    if (!err && atomic_load(&t->refs) == 1) {
        /* Under the lock: a reader would take a reference first, and cannot. */
        store_write_apply(s, w, t, t);
        store_tensor_renew(t);
        *version = store_tensor_version(t) + 1;
        store_tensor_set_version(t, *version);
        store_arrival_post(s, a, *version);
        pthread_mutex_unlock(&s->lock);
        return 1;
    }
    if (!err) store_tensor_hold(t);
    pthread_mutex_unlock(&s->lock);
    if (err) {
        errno = err;
        return -1;
    }
    struct store_tensor *copy = store_tensor_new_virtual(t->name, t->size, t->resident, false);
    if (!copy) {
        store_tensor_release(t);
        errno = ENOMEM;
        return -1;
    }
    store_write_apply(s, w, t, copy);
    store_tensor_hold(copy); /* the map's, if it wins */
    pthread_mutex_lock(&s->lock);
    struct store_tensor *loser = store_publish_if_locked(s, copy, t, version);
    if (*version) store_arrival_post(s, a, *version);
    pthread_mutex_unlock(&s->lock);
    store_tensor_release(loser);
    store_tensor_release(copy);
    store_tensor_release(t);
    return *version ? 1 : 0;
}

static int store_write(struct store *s, const struct store_write *w, struct store_arrival *a,
                       uint64_t *size, uint64_t *version)
{
    int rc;
    while ((rc = store_write_once(s, w, a, size, version)) == 0) {
    }
    return rc < 0 ? -1 : 0;
}

int store_patch_range(struct store *s, const char *name, uint64_t offset, const float *src,
                      uint64_t count, uint64_t *size)
{
    struct store_write w = {.name = name, .src = src, .offset = offset, .count = count};
    uint64_t version;
    return store_write(s, &w, NULL, size, &version);
}

/* ---- receives and arrivals ---- */

/* One allocation sized to its two names. */
static struct store_arrival *store_arrival_new(const char *name, const char *from, uint64_t bytes)
{
    size_t name_size = strlen(name) + 1, from_size = strlen(from) + 1;
    struct store_arrival *a = malloc(sizeof *a + name_size + from_size);
    if (!a) {
        errno = ENOMEM;
        return NULL;
    }
    a->next = NULL;
    a->version = 0;
    a->bytes = bytes;
    memcpy(a->strings, name, name_size);
    memcpy(a->strings + name_size, from, from_size);
    a->name = a->strings;
    a->from = a->strings + name_size;
    return a;
}

int store_receive_whole(struct store *s, struct store_tensor *t, const char *from,
                        uint64_t sender_version, struct store_tensor **replaced)
{
    struct store_arrival *a = store_arrival_new(t->name, from, t->size * sizeof(float));
    *replaced = NULL;
    if (!a) return -1;
    *replaced = store_swap_versioned(s, t, true, sender_version, a);
    return 0;
}

int store_receive_replace(struct store *s, struct store_tensor *r, struct store_tensor *t,
                          const char *from, struct store_tensor **replaced, uint64_t *version)
{
    struct store_arrival *a = store_arrival_new(r->name, from, r->size * sizeof(float));
    *replaced = NULL;
    if (!a) return -1;
    store_tensor_hold(r); /* the map's, if it wins */
    pthread_mutex_lock(&s->lock);
    struct store_tensor *loser = store_publish_if_locked(s, r, t, version);
    if (*version) store_arrival_post(s, a, *version);
    pthread_mutex_unlock(&s->lock);
    if (*version) {
        *replaced = loser;
        return 1;
    }
    free(a);
    store_tensor_release(loser); /* r's map reference, unused */
    return 0;
}

int store_receive_patch(struct store *s, const struct store_write *w, uint64_t *size,
                        uint64_t *version)
{
    struct store_arrival *a =
        store_arrival_new(w->name, w->from ? w->from : "", w->count * sizeof(float));
    if (!a) return -1;
    if (store_write(s, w, a, size, version) == 0) return 0;
    int err = errno;
    free(a);
    errno = err;
    return -1;
}

/* Drops the pending arrivals of name. Called with the lock held. */
static void store_arrivals_discard(struct store *s, const char *name)
{
    struct store_arrival **p = &s->arrivals;
    while (*p) {
        struct store_arrival *a = *p;
        if (strcmp(a->name, name) == 0) {
            *p = a->next;
            s->n_arrivals--;
            free(a);
        } else {
            p = &a->next;
        }
    }
    s->arrivals_tail = p;
}

size_t store_arrivals_claim(struct store *s, store_match_fn match, const void *ctx, size_t k,
                            struct store_arrival **claimed)
{
    *claimed = NULL;
    pthread_mutex_lock(&s->lock);
    size_t pending = 0;
    for (struct store_arrival *a = s->arrivals; a; a = a->next)
        pending += match(a, ctx);
    struct store_arrival **out = claimed, **p = &s->arrivals;
    for (size_t taken = 0; pending >= k && taken < k;) {
        struct store_arrival *a = *p;
        if (!match(a, ctx)) {
            p = &a->next;
            continue;
        }
        *p = a->next; /* unlinked, in order, onto the claimed list */
        a->next = NULL;
        *out = a;
        out = &a->next;
        taken++;
        s->n_arrivals--;
    }
    while (*p)
        p = &(*p)->next;
    s->arrivals_tail = p;
    pthread_mutex_unlock(&s->lock);
    return pending;
}

size_t store_arrivals_describe(struct store *s, store_match_fn match, const void *ctx, char *buf,
                               size_t cap)
{
    size_t n = 0, len = 0;
    if (cap) buf[0] = '\0';
    pthread_mutex_lock(&s->lock);
    for (struct store_arrival *a = s->arrivals; a; a = a->next) {
        if (!match(a, ctx)) continue;
        int w = len < cap ? snprintf(buf + len, cap - len, "%s%s", n ? ", " : "", a->name) : 0;
        len += w > 0 ? (size_t)w : 0;
        n++;
    }
    pthread_mutex_unlock(&s->lock);
    if (len >= cap && cap > 4) strcpy(buf + cap - 4, "...");
    return n;
}

void store_arrivals_totals(struct store *s, uint64_t *pending, uint64_t *dropped)
{
    pthread_mutex_lock(&s->lock);
    *pending = s->n_arrivals;
    *dropped = s->arrivals_dropped;
    pthread_mutex_unlock(&s->lock);
}

void store_arrivals_free(struct store_arrival *list)
{
    while (list) {
        struct store_arrival *next = list->next;
        free(list);
        list = next;
    }
}

/* test_store.c — the peer's tensor store (peer/store.{h,c}): creation limits,
 * publish/find/drop, replacement, reference lifetimes, growth, totals, two
 * threads using it at once, generations, versions (and their tombstones),
 * add receives as patches, a summed add refused when its target changed,
 * and arrivals (order, claims, drop, the cap). */
#include "peer/store.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

static struct store_tensor *publish_new(struct store *s, const char *name, uint64_t size)
{
    struct store_tensor *t = store_tensor_new(name, size, true);
    CHECK(t != NULL);
    if (t) store_publish(s, t);
    return t; /* still holding the creator's reference */
}

static void test_new_limits(void)
{
    char name[STORE_NAME_MAX + 2];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0'; /* 128 bytes: one too many */
    errno = 0;
    CHECK(store_tensor_new(name, 4, true) == NULL && errno == ENAMETOOLONG);
    name[STORE_NAME_MAX] = '\0'; /* 127 bytes: fine */
    struct store_tensor *t = store_tensor_new(name, 4, true);
    CHECK(t != NULL && strlen(t->name) == STORE_NAME_MAX);
    store_tensor_release(t);
    errno = 0;
    CHECK(store_tensor_new("w", STORE_MAX_ELEMENTS + 1, true) == NULL && errno == EINVAL);
    t = store_tensor_new("empty", 0, false);
    CHECK(t != NULL && t->data != NULL && t->size == 0);
    store_tensor_release(t);
    t = store_tensor_new("z", 1000, true);
    int nonzero = 0;
    for (int i = 0; t && i < 1000; i++)
        nonzero += t->data[i] != 0.0f;
    CHECK(t && nonzero == 0);
    store_tensor_release(t);
    store_tensor_release(NULL); /* a no-op */
}

static void test_publish_find_drop(void)
{
    struct store *s = store_create();
    CHECK(s != NULL);
    struct store_tensor *w = publish_new(s, "w", 10);
    struct store_tensor *found = store_find(s, "w");
    CHECK(found == w);
    store_tensor_release(found);
    CHECK(store_find(s, "x") == NULL);
    CHECK(store_find(s, "") == NULL);
    uint64_t count = 0, bytes = 0;
    store_totals(s, &count, &bytes);
    CHECK(count == 1 && bytes == 40);
    CHECK(store_drop(s, "w"));
    CHECK(!store_drop(s, "w"));
    CHECK(store_find(s, "w") == NULL);
    store_totals(s, &count, &bytes);
    CHECK(count == 0 && bytes == 0);
    /* Dropped, but this reference keeps it alive (ASan would see a use after free). */
    w->data[9] = 1.0f;
    CHECK(w->data[9] == 1.0f);
    store_tensor_release(w);
    store_destroy(s);
}

static void test_replace(void)
{
    struct store *s = store_create();
    struct store_tensor *old = publish_new(s, "m", 8);
    struct store_tensor *new = publish_new(s, "m", 3);
    struct store_tensor *found = store_find(s, "m");
    CHECK(found == new && found->size == 3);
    store_tensor_release(found);
    uint64_t count = 0, bytes = 0;
    store_totals(s, &count, &bytes);
    CHECK(count == 1 && bytes == 12);
    old->data[7] = 2.0f; /* the replaced tensor lives while held */
    CHECK(old->data[7] == 2.0f);
    store_tensor_release(old);
    store_tensor_release(new);
    store_destroy(s); /* frees "m" with the map's reference */
}

static void test_many(void)
{
    struct store *s = store_create();
    enum { N = 5000 };
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        store_tensor_release(publish_new(s, name, (uint64_t)i % 7));
    }
    uint64_t count = 0, bytes = 0, want_bytes = 0;
    for (int i = 0; i < N; i++)
        want_bytes += 4 * ((uint64_t)i % 7);
    store_totals(s, &count, &bytes);
    CHECK(count == N && bytes == want_bytes);
    int found = 0, dropped = 0;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        struct store_tensor *t = store_find(s, name);
        found += t && t->size == (uint64_t)i % 7 && strcmp(t->name, name) == 0;
        store_tensor_release(t);
        if (i % 2) dropped += store_drop(s, name);
    }
    CHECK(found == N && dropped == N / 2);
    store_totals(s, &count, &bytes);
    CHECK(count == N - N / 2);
    store_destroy(s); /* with tensors still in it */
}

struct hammer {
    struct store *s;
    int id;
    int finds;
};

/* Publishes a name, finds it, and drops another one, over names shared with
 * the other thread; a find fails only when the other thread dropped the name
 * in between. */
static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    char name[16];
    for (int i = 0; i < 30000; i++) {
        int k = i / 3 % 50;
        snprintf(name, sizeof name, "n%d", i % 3 == 2 ? (k + 25) % 50 : k);
        if (i % 3 == 0) {
            struct store_tensor *t = store_tensor_new(name, 16, true);
            if (t) store_publish(h->s, t);
            store_tensor_release(t);
        } else if (i % 3 == 1) {
            struct store_tensor *t = store_find(h->s, name);
            if (t) {
                t->data[h->id] += 1.0f; /* each thread writes its own element */
                h->finds++;
            }
            store_tensor_release(t);
        } else {
            store_drop(h->s, name);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    struct store *s = store_create();
    struct hammer h[2] = {{s, 0, 0}, {s, 1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, hammer_main, &h[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    uint64_t count = 0, bytes = 0;
    store_totals(s, &count, &bytes);
    CHECK(count <= 50 && bytes == count * 64);
    CHECK(h[0].finds + h[1].finds > 0);
    store_destroy(s);
}

/* A generation changes with every write a reader could see: publish (also
 * of a recycled tensor), in-place patches and range patches; a copy on
 * write is a tensor of its own. */
static void test_generations(void)
{
    struct store *s = store_create();
    struct store_tensor *a = store_tensor_new("a", 4, true), *b = store_tensor_new("b", 4, true);
    uint64_t g0 = store_tensor_gen(a);
    CHECK(g0 != 0 && store_tensor_gen(b) != g0);
    store_publish(s, a);
    uint64_t g1 = store_tensor_gen(a);
    CHECK(g1 != g0 && store_tensor_gen(a) == g1); /* stable while untouched */
    store_tensor_release(a);

    struct store_patch p;
    store_write_lock(s);
    CHECK(store_patch_begin(s, "a", &p) == 0 && p.t == a && !p.orig); /* in place */
    uint64_t g2 = store_tensor_gen(a);
    CHECK(g2 != g1);
    store_patch_end(s, &p, true);
    float one = 1;
    uint64_t size;
    CHECK(store_patch_range(s, "a", 1, &one, 1, &size) == 0); /* in place */
    struct store_tensor *held = store_find(s, "a");
    CHECK(held == a && store_tensor_gen(a) != g2);
    uint64_t g3 = store_tensor_gen(a);
    CHECK(store_patch_range(s, "a", 2, &one, 1, &size) == 0); /* copy on write */
    CHECK(store_tensor_gen(held) == g3);
    struct store_tensor *now = store_find(s, "a");
    CHECK(now != held && store_tensor_gen(now) != g3 && now->data[2] == 1 && held->data[2] == 0);
    store_write_unlock(s);

    /* Republishing a tensor (the data plane recycles received ones) renews it. */
    store_drop(s, "a");
    uint64_t g4 = store_tensor_gen(now);
    store_publish(s, now);
    CHECK(store_tensor_gen(now) != g4);
    store_tensor_release(now);
    store_tensor_release(held);
    store_tensor_release(b);
    store_destroy(s);
}

/* Versions: publish +1, patches +1 (in place and copied), a drop keeps
 * the count, a whole receive takes the sender's unless lower. */
static void test_versions(void)
{
    struct store *s = store_create();
    struct store_tensor *t = publish_new(s, "v", 4);
    CHECK(store_tensor_version(t) == 1 && store_version(s, "v") == 1);
    store_tensor_release(t);
    t = publish_new(s, "v", 4);
    CHECK(store_tensor_version(t) == 2);
    store_tensor_release(t);
    struct store_patch p;
    store_write_lock(s);
    CHECK(store_patch_begin(s, "v", &p) == 0 && !p.orig);
    store_patch_end(s, &p, true);
    CHECK(p.version == 3 && store_version(s, "v") == 3);
    struct store_tensor *held = store_find(s, "v");
    CHECK(store_patch_begin(s, "v", &p) == 0 && p.orig); /* copied: held */
    store_patch_end(s, &p, true);
    CHECK(p.version == 4 && store_tensor_version(held) == 3 && store_version(s, "v") == 4);
    CHECK(store_patch_begin(s, "v", &p) == 0);
    store_patch_end(s, &p, false);
    CHECK(p.version == 0 && store_version(s, "v") == 4);
    store_write_unlock(s);
    store_tensor_release(held);
    CHECK(store_drop(s, "v") == 1 && store_version(s, "v") == 4);
    t = publish_new(s, "v", 4);
    CHECK(store_tensor_version(t) == 5); /* the count goes on */
    store_tensor_release(t);
    CHECK(store_version(s, "never") == 0 && store_drop(s, "never") == 0);
    /* Whole receives: the sender's version, unless the name's is higher. */
    struct store_tensor *r = store_tensor_new("v", 4, true), *replaced;
    CHECK(store_receive_whole(s, r, "a", 9, &replaced) == 0 && store_tensor_version(r) == 9);
    store_tensor_release(replaced);
    store_tensor_release(r);
    r = store_tensor_new("v", 4, true);
    CHECK(store_receive_whole(s, r, "a", 2, &replaced) == 0 && store_tensor_version(r) == 9);
    store_tensor_release(replaced);
    store_tensor_release(r);
    /* Many dropped names: each keeps its count (the tombstones grow). */
    char name[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "t%d", i);
        store_tensor_release(publish_new(s, name, 1));
        store_drop(s, name);
    }
    int continued = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "t%d", i);
        t = publish_new(s, name, 1);
        continued += store_tensor_version(t) == 2;
        store_tensor_release(t);
    }
    CHECK(continued == 1000);
    store_destroy(s);
}

static bool match_any(const struct store_arrival *a, const void *ctx)
{
    return strcmp(a->name, ctx) == 0 || strcmp(ctx, "*") == 0;
}

/* Adds as patches (in place, and copied while a reader holds the tensor),
 * arrivals: order, claims, discard on drop, the cap; a summed add whose
 * target changed meanwhile is refused. */
static void test_receives(void)
{
    struct store *s = store_create();
    struct store_tensor *acc = publish_new(s, "acc", 4);
    store_tensor_release(acc);
    const float two[4] = {2, 2, 2, 2};
    struct store_write w = {
        .name = "acc", .from = "a", .src = two, .count = 4, .add = true, .whole = true};
    uint64_t size, version;
    store_write_lock(s);
    CHECK(store_receive_patch(s, &w, &size, &version) == 0 && version == 2);
    struct store_tensor *held = store_find(s, "acc");
    w.from = "b";
    w.offset = 1;
    w.count = 2;
    w.whole = false;
    CHECK(store_receive_patch(s, &w, &size, &version) == 0 && version == 3);
    struct store_tensor *now = store_find(s, "acc");
    CHECK(now != held && held->data[1] == 2 && now->data[0] == 2 && now->data[1] == 4 &&
          now->data[2] == 4 && now->data[3] == 2);
    w.offset = 3;
    CHECK(store_receive_patch(s, &w, &size, &version) == -1 && errno == ERANGE && size == 4);
    w.whole = true;
    w.offset = 0;
    CHECK(store_receive_patch(s, &w, &size, &version) == -1 && errno == EINVAL);
    w.name = "none";
    CHECK(store_receive_patch(s, &w, &size, &version) == -1 && errno == ENOENT);
    /* A sum computed from `held` may not replace `now`. */
    struct store_tensor *sum = store_tensor_new("acc", 4, true), *replaced;
    CHECK(store_receive_replace(s, sum, held, "c", &replaced, &version) == 0 && !replaced);
    CHECK(store_receive_replace(s, sum, now, "c", &replaced, &version) == 1 && replaced == now &&
          version == 4);
    store_tensor_release(replaced);
    store_write_unlock(s);
    store_tensor_release(sum);
    store_tensor_release(held);
    store_tensor_release(now);
    struct store_arrival *list;
    CHECK(store_arrivals_claim(s, match_any, "acc", 4, &list) == 3 && !list);
    CHECK(store_arrivals_claim(s, match_any, "acc", 2, &list) == 3 && list && list->next &&
          !list->next->next);
    if (list && list->next) {
        CHECK(strcmp(list->from, "a") == 0 && list->version == 2 && list->bytes == 16);
        CHECK(strcmp(list->next->from, "b") == 0 && list->next->version == 3);
    }
    store_arrivals_free(list);
    CHECK(store_drop(s, "acc") == 1);
    CHECK(store_arrivals_claim(s, match_any, "*", 1, &list) == 0); /* c's went with the drop */
    /* The cap: the oldest go. */
    store_tensor_release(publish_new(s, "x", 1));
    const float one = 1;
    struct store_write wx = {.name = "x", .from = "a", .src = &one, .count = 1};
    store_write_lock(s);
    for (uint32_t i = 0; i < STORE_ARRIVALS_MAX + 5; i++)
        store_receive_patch(s, &wx, &size, &version);
    store_write_unlock(s);
    uint64_t pending, dropped;
    store_arrivals_totals(s, &pending, &dropped);
    CHECK(pending == STORE_ARRIVALS_MAX && dropped == 5);
    CHECK(store_arrivals_claim(s, match_any, "x", 1, &list) == STORE_ARRIVALS_MAX);
    CHECK(list && list->version == 2 + 5); /* the oldest kept: the 6th write */
    store_arrivals_free(list);
    store_destroy(s);
}

static void count_unlock(void *ctx)
{
    atomic_fetch_add((atomic_int *)ctx, 1);
}

struct holder {
    struct store *s;
    pthread_barrier_t held, release;
};

/* Holds the write lock from `held` until `release`, like a compute job. */
static void *hold_write_lock(void *arg)
{
    struct holder *h = arg;
    store_write_lock(h->s);
    pthread_barrier_wait(&h->held);
    pthread_barrier_wait(&h->release);
    store_write_unlock(h->s);
    return NULL;
}

/* A loop's caller that finds the write lock busy is told when it is free:
 * the hook runs once at the holder's unlock, and not when nobody waited. */
static void test_unlock_hook(void)
{
    struct store *s = store_create();
    atomic_int calls = 0;
    store_set_unlock_hook(s, count_unlock, &calls);
    CHECK(store_write_trylock_or_notify(s)); /* free: taken, nobody waits */
    store_write_unlock(s);
    CHECK(atomic_load(&calls) == 0);
    struct holder h = {.s = s};
    pthread_barrier_init(&h.held, NULL, 2);
    pthread_barrier_init(&h.release, NULL, 2);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, hold_write_lock, &h) == 0);
    pthread_barrier_wait(&h.held);
    CHECK(!store_write_trylock_or_notify(s));
    CHECK(!store_write_trylock_or_notify(s)); /* asking twice: still one call */
    CHECK(atomic_load(&calls) == 0);
    pthread_barrier_wait(&h.release);
    pthread_join(thread, NULL); /* it has unlocked */
    CHECK(atomic_load(&calls) == 1);
    pthread_barrier_destroy(&h.held);
    pthread_barrier_destroy(&h.release);
    store_write_lock(s);
    store_write_unlock(s);
    CHECK(atomic_load(&calls) == 1);
    store_set_unlock_hook(s, NULL, NULL);
    store_destroy(s);
}

int main(void)
{
    test_versions();
    test_receives();
    test_generations();
    test_new_limits();
    test_publish_find_drop();
    test_replace();
    test_many();
    test_threads();
    test_unlock_hook();
    return check_report();
}

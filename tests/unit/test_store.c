/* test_store.c — the peer's tensor store (peer/store.{h,c}): creation limits,
 * publish/find/drop, replacement, reference lifetimes, growth, totals, and
 * two threads using it at once. */
#include "peer/store.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <pthread.h>

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

int main(void)
{
    test_generations();
    test_new_limits();
    test_publish_find_drop();
    test_replace();
    test_many();
    test_threads();
    return check_report();
}

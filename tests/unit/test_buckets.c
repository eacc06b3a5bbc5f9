/* test_buckets.c — kernels/buckets.c and zoo_trace (kernels/zoo.c): the
 * steps zoo_trace reports cover every trainable parameter once, in order,
 * and sum to zoo_lookup's costs (every zoo architecture and the real
 * ones); the bucket plan of an mlp worked out by hand (DDP's rule), its
 * ready shares from the layers' FLOPs, a residual CNN's contiguous cover
 * with its running statistics in bucket 1, and the errors. */
#include "kernels/buckets.h"
#include "kernels/zoo.h"
#include "tests/unit/check.h"

static char err[512];

struct walk {
    uint64_t next; /* the next parameter expected */
    bool in_order;
    struct zoo_cost sum;
};

static void walk_step(void *ctx, const struct zoo_layer *l)
{
    struct walk *w = ctx;
    if (l->param_first != w->next || l->param_end < l->param_first) w->in_order = false;
    w->next = l->param_end;
    for (int op = 0; op < ZOO_OP_COUNT; op++) {
        w->sum.forward[op] += l->cost.forward[op];
        w->sum.backward[op] += l->cost.backward[op];
    }
}

static void check_trace(const char *name)
{
    struct zoo_info z;
    struct walk w = {0, true, {{0}, {0}}};
    CHECK_MSG(zoo_lookup(name, &z, err, sizeof err) == 0, "%s: %s", name, err);
    CHECK_MSG(zoo_trace(name, walk_step, &w, err, sizeof err) == 0, "%s: %s", name, err);
    CHECK_MSG(w.in_order, "%s: steps out of order or overlapping", name);
    CHECK_MSG(w.next == z.params, "%s: steps cover %llu of %llu parameters", name,
              (unsigned long long)w.next, (unsigned long long)z.params);
    for (int op = 0; op < ZOO_OP_COUNT; op++) {
        CHECK_NEAR(w.sum.forward[op], z.cost.forward[op], 1e-6 * (1 + z.cost.forward[op]));
        CHECK_NEAR(w.sum.backward[op], z.cost.backward[op], 1e-6 * (1 + z.cost.backward[op]));
    }
}

static void test_trace(void)
{
    for (int i = 0; i < zoo_count(); i++) {
        struct zoo_info z;
        CHECK(zoo_at(i, &z) == 0);
        check_trace(z.name);
    }
    check_trace("mlp:784-128-10");
    check_trace("cnn:lenet");
    check_trace("cnn:resnet20");
    CHECK(zoo_trace("no-such-model", walk_step, &(struct walk){0}, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "no-such-model");
}

/* mlp:784-32-16-10: [0, 25120) layer 1, [25120, 25648) layer 2,
 * [25648, 25818) layer 3. Forward FLOPs per sample 2 x (25088 + 512 +
 * 160) MACs + the biases and ReLUs (32 + 32, 16 + 16, 10); backward the
 * same layers' 2 x 2 x MACs (the first layer's input gradient left out:
 * 2 x 25088) and one per bias / ReLU element. */
static void test_mlp_plan(void)
{
    struct grad_bucket b[GRAD_BUCKETS_MAX];
    int n = grad_buckets_plan("mlp:784-32-16-10", 25818, 100, NULL, b, err, sizeof err);
    CHECK(n == 3);
    CHECK(b[0].offset == 25648 && b[0].count == 170);
    CHECK(b[1].offset == 25120 && b[1].count == 528);
    CHECK(b[2].offset == 0 && b[2].count == 25120);
    double forward = 2.0 * (25088 + 512 + 160) + 64 + 32 + 10;
    double backward = 2.0 * 25088 + 4.0 * (512 + 160) + 64 + 32 + 10;
    double total = forward + backward;
    CHECK_NEAR(b[0].ready_share, (forward + 4.0 * 160 + 10) / total, 1e-12);
    CHECK_NEAR(b[1].ready_share, (forward + 4.0 * (160 + 512) + 10 + 32) / total, 1e-12);
    CHECK(b[2].ready_share == 1.0);
    /* equal weights change nothing; a cap above the model makes one bucket */
    double ones[ZOO_OP_COUNT] = {1, 1, 1, 1, 1, 1, 1};
    struct grad_bucket w[GRAD_BUCKETS_MAX];
    CHECK(grad_buckets_plan("mlp:784-32-16-10", 25818, 100, ones, w, err, sizeof err) == 3);
    CHECK(w[0].ready_share == b[0].ready_share);
    CHECK(grad_buckets_plan("mlp:784-32-16-10", 25818, 1 << 20, NULL, b, err, sizeof err) == 1);
    CHECK(b[0].offset == 0 && b[0].count == 25818);
}

static void test_resnet_cover(void)
{
    struct zoo_info z;
    CHECK(zoo_lookup("cnn:resnet20", &z, err, sizeof err) == 0);
    uint64_t size = z.params + z.buffers;
    struct grad_bucket b[GRAD_BUCKETS_MAX];
    int n = grad_buckets_plan("cnn:resnet20", size, 20000, NULL, b, err, sizeof err);
    CHECK(n >= 3);
    CHECK(b[0].offset + b[0].count == size); /* the running statistics ride in bucket 1 */
    for (int k = 1; k < n; k++) {
        CHECK(b[k].offset + b[k].count == b[k - 1].offset);
        CHECK(b[k].ready_share >= b[k - 1].ready_share);
        if (k < n - 1) CHECK(b[k].count >= 20000);
    }
    CHECK(b[n - 1].offset == 0 && b[n - 1].ready_share == 1.0);
}

static void test_errors(void)
{
    struct grad_bucket b[GRAD_BUCKETS_MAX];
    CHECK(grad_buckets_plan("resnet50", 25557032, 1, NULL, b, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "more than 64 buckets (raise bucket_mb)");
    CHECK(grad_buckets_plan("mlp:x", 10, 1, NULL, b, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "mlp:x");
    CHECK(grad_bucket_elements(25) == 6553600);
    CHECK(grad_bucket_elements(1e-12) == 1);
}

int main(void)
{
    test_trace();
    test_mlp_plan();
    test_resnet_cover();
    test_errors();
    return check_report();
}

/* test_ml_commands.c — the learning commands of a real hiernet-peer: a peer
 * trains mlp:784-128-10 on (a shard of) Fashion-MNIST through dataset,
 * model, grad, optim and eval past 0.84 test accuracy; optimizer state and
 * method changes; compress/decompress with error feedback, also across two
 * peers and of a range alone; the synthetic generator; speed emulation of compute results; a
 * fresh peer's grads that fault no new pages from the third on; and
 * the errors: corrupt, truncated and missing dataset files name the file,
 * missing splits/models, bad params.
 * The training part skips (77) without Debian's dataset-fashion-mnist. */
#include <dirent.h>
#include <sys/stat.h>

#include "kernels/dataset.h"
#include "tests/unit/peer_harness.h"

static char tmp_dir[256];

struct plan {
    int shards, epochs;
    long long eval_limit;
    double target;
};

/* Steps grad + optim in windows of pipelined requests (the peer runs them
 * in order), returning the mean loss of the last window. */
static double train_steps(struct harness_peer *p, int steps, const char *method, double lr)
{
    enum { WINDOW = 16 };
    struct harness_reply r;
    double loss = 0;
    for (int done = 0; done < steps; done += WINDOW) {
        uint32_t ids[2 * WINDOW];
        int n = steps - done < WINDOW ? steps - done : WINDOW;
        for (int i = 0; i < n; i++) {
            ids[2 * i] = harness_request(p, "grad", "model:s batch:i", "m", 64LL);
            ids[2 * i + 1] = harness_request(p, "optim", "model:s method:s lr:f", "m", method, lr);
        }
        loss = 0;
        for (int i = 0; i < 2 * n; i++) {
            bool ok = harness_wait(p, ids[i], &r) && r.ok;
            CHECK_MSG(ok, "step %d: %s", done + i / 2, r.error);
            if (!ok) return -1;
            if (i % 2 == 0) loss += harness_num(&r, "loss") / n;
        }
    }
    return loss;
}

static void test_fashion_mnist(const struct plan *plan)
{
    struct harness_peer p;
    struct harness_reply r;
    CHECK(harness_start(&p, "trainer", "127.0.8.1", NULL));
    double t0 = mono_ms();
    HCALL_OK(&p, &r, "dataset", "name:s split:s shard:i shards:i partition:s seed:i",
             "fashion-mnist", "train", 1LL, (long long)plan->shards, "shuffle", 3LL);
    CHECK(harness_num(&r, "samples") == 60000 / plan->shards && harness_num(&r, "total") == 60000);
    CHECK(harness_num(&r, "dim") == 784 && harness_num(&r, "classes") == 10);
    HCALL_OK(&p, &r, "dataset", "name:s split:s", "fashion-mnist", "test");
    CHECK(harness_num(&r, "samples") == 10000);
    HCALL_OK(&p, &r, "model", "name:s arch:s seed:i", "m", "mlp:784-128-10", 1LL);
    CHECK(harness_num(&r, "size") == 784 * 128 + 128 + 128 * 10 + 10);
    HCALL_OK(&p, &r, "eval", "model:s limit:i", "m", 1000LL);
    double before = harness_num(&r, "accuracy");
    int steps = 60000 / plan->shards * plan->epochs / 64;
    double loss = train_steps(&p, steps, "momentum", 0.02);
    HCALL_OK(&p, &r, "eval", "model:s split:s limit:i", "m", "test", plan->eval_limit);
    double accuracy = harness_num(&r, "accuracy");
    CHECK(harness_num(&r, "samples") == plan->eval_limit);
    CHECK(harness_num(&r, "ms") > 0 && harness_num(&r, "cpu_ms") > 0);
    printf("fashion-mnist via peer commands: %d steps on %d samples, last loss %.3f, test "
           "accuracy %.4f -> %.4f (%lld samples), %.1f s\n",
           steps, 60000 / plan->shards, loss, before, accuracy, plan->eval_limit,
           (mono_ms() - t0) / 1e3);
    CHECK_MSG(accuracy > plan->target, "accuracy %.4f <= %.2f", accuracy, plan->target);
    HCALL_OK(&p, &r, "optim", "model:s lr:f", "m", 0.02); /* keeps momentum */
    CHECK(harness_num(&r, "steps") == steps + 1);
    /* A new method resets the state. */
    HCALL_OK(&p, &r, "optim", "model:s method:s", "m", "adam");
    CHECK(harness_num(&r, "steps") == 1);
    CHECK_NEAR(harness_num(&r, "lr"), 0.001, 1e-9);
    harness_stop(&p);
}

/* ---- compression ---- */

static double norm_of(struct harness_peer *p, const char *name)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "norm", "x:s", name);
    return harness_num(&r, "value");
}

/* decoded + residual == the input (error feedback from a zero residual). */
static void check_round_trip(struct harness_peer *p, const char *method, double ratio)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "drop", "name:s", "res");
    HCALL_OK(p, &r, "compress", "tensor:s method:s ratio:f out:s residual:s", "g", method, ratio,
             "gc", "res");
    double bytes = harness_num(&r, "bytes");
    CHECK(harness_num(&r, "size") == ceil(bytes / 4) && bytes < harness_num(&r, "dense_bytes"));
    HCALL_OK(p, &r, "decompress", "tensor:s out:s", "gc", "gd");
    CHECK(harness_num(&r, "bytes") == bytes && harness_num(&r, "size") == 1000);
    HCALL_OK(p, &r, "copy", "src:s dst:s", "res", "sum");
    HCALL_OK(p, &r, "axpy", "y:s x:s", "sum", "gd");
    HCALL_OK(p, &r, "axpy", "y:s x:s alpha:f", "sum", "g", -1.0);
    CHECK_MSG(norm_of(p, "sum") < 1e-5 * norm_of(p, "g"), "%s: |decoded + residual - g| = %g",
              method, norm_of(p, "sum"));
    /* add = true sums into an existing tensor. */
    HCALL_OK(p, &r, "copy", "src:s dst:s", "gd", "acc");
    HCALL_OK(p, &r, "decompress", "tensor:s out:s add:b", "gc", "acc", 1);
    CHECK_NEAR(norm_of(p, "acc"), 2 * norm_of(p, "gd"), 1e-5 * norm_of(p, "gd"));
    printf("compress %s ratio %.2f: %.0f bytes for 4000\n", method, ratio, bytes);
}

static void test_compress(void)
{
    struct harness_peer a, b;
    struct harness_reply r;
    CHECK(harness_start(&a, "ca", "127.0.8.2", NULL));
    CHECK(harness_start(&b, "cb", "127.0.8.3", NULL));
    HCALL_OK(&a, &r, "model", "name:s arch:s seed:i", "g", "logreg:99-10", 4LL);
    check_round_trip(&a, "topk", 0.1);
    check_round_trip(&a, "int8", 1.0);
    check_round_trip(&a, "sign", 1.0);
    /* A compressed tensor travels like any other and decodes elsewhere. */
    HCALL_OK(&a, &r, "compress", "tensor:s method:s ratio:f out:s", "g", "topk", 0.05, "gc");
    HCALL_OK(&a, &r, "send", "tensor:s to_addr:s", "gc", harness_data_addr(&b));
    HCALL_OK(&b, &r, "decompress", "tensor:s out:s", "gc", "gd");
    HCALL_OK(&a, &r, "decompress", "tensor:s out:s", "gc", "gd");
    CHECK(norm_of(&a, "gd") == norm_of(&b, "gd") && norm_of(&a, "gd") > 0);
    /* A range alone (a sharded server's slice): it decodes to the range's
     * elements, and its residual has that many. */
    HCALL_OK(&a, &r, "compress", "tensor:s method:s ratio:f out:s residual:s range:r", "g", "int8",
             1.0, "gc", "rres", 10LL, 50LL);
    CHECK(harness_num(&r, "dense_bytes") == 200);
    HCALL_OK(&a, &r, "decompress", "tensor:s out:s", "gc", "gs");
    CHECK(harness_num(&r, "size") == 50);
    HCALL_OK(&a, &r, "norm", "x:s", "rres");
    CHECK(harness_num(&r, "size") == 50);
    HCALL_OK(&a, &r, "axpy", "y:s x:s", "gs", "rres");
    HCALL_OK(&a, &r, "norm", "x:s range:r", "g", 10LL, 50LL);
    CHECK_NEAR(norm_of(&a, "gs"), harness_num(&r, "value"), 1e-5 * harness_num(&r, "value"));
    HCALL_ERR(&a, &r, "out of bounds", "compress", "tensor:s out:s range:r", "g", "gz", 980LL,
              30LL);
    HCALL_ERR(&a, &r, "does not hold compressed data", "decompress", "tensor:s out:s", "g", "x");
    HCALL_OK(&a, &r, "tensor", "name:s size:i", "gsmall", 10LL);
    HCALL_ERR(&a, &r, "out 'gsmall' has 10 elements", "decompress", "tensor:s out:s add:b", "gc",
              "gsmall", 1);
    HCALL_ERR(&a, &r, "unknown", "compress", "tensor:s method:s out:s", "g", "zip", "gz");
    HCALL_ERR(&a, &r, "residual 'gsmall' has 10 elements", "compress", "tensor:s out:s residual:s",
              "g", "gz", "gsmall");
    harness_stop(&a);
    harness_stop(&b);
}

/* ---- synthetic data, speed, errors ---- */

static void test_synthetic_and_speed(void)
{
    struct harness_peer p;
    struct harness_reply r;
    CHECK(harness_start(&p, "syn", "127.0.8.4", (const char *[]){"--speed", "0.25", NULL}));
    HCALL_OK(&p, &r, "dataset", "name:s n:i dim:i classes:i seed:i", "synthetic", 4000LL, 16LL, 4LL,
             9LL);
    CHECK(harness_num(&r, "samples") == 4000 && harness_num(&r, "dim") == 16);
    HCALL_OK(&p, &r, "dataset", "name:s split:s n:i dim:i classes:i seed:i", "synthetic", "test",
             1000LL, 16LL, 4LL, 9LL);
    HCALL_OK(&p, &r, "model", "name:s arch:s", "m", "logreg:16-4");
    train_steps(&p, 200, "sgd", 0.5);
    HCALL_OK(&p, &r, "eval", "model:s", "m");
    printf("synthetic logreg:16-4: test accuracy %.3f\n", harness_num(&r, "accuracy"));
    CHECK(harness_num(&r, "accuracy") > 0.6);
    /* speed 0.25: a command lasts at least 4x its CPU time. */
    HCALL_OK(&p, &r, "grad", "model:s batch:i", "m", 4096LL);
    double ms = harness_num(&r, "ms"), cpu = harness_num(&r, "cpu_ms");
    CHECK_MSG(ms >= 3.9 * cpu && cpu > 0, "ms %.3f cpu_ms %.3f", ms, cpu);
    HCALL_ERR(&p, &r, "nonsense:1", "model", "name:s arch:s", "bad", "nonsense:1");
    harness_stop(&p);
}

/* p's minor page faults so far (/proc/PID/stat), -1 when unreadable. */
static long peer_minor_faults(const struct harness_peer *p)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p->pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    const char *at = strrchr(buf, ')');
    long minflt;
    return at && sscanf(at + 2, "%*c %*d %*d %*d %*d %*d %*u %ld", &minflt) == 1 ? minflt : -1;
}

/* A grad writes a new tensor of the model's size (here 400 KB, over
 * glibc's first 128 KB mmap threshold): from the third grad of a fresh
 * peer on, its memory comes back from the ones before, no page faulted
 * anew (peer/main.c peer_malloc_steady; faulted in, 100 pages a grad, as
 * CPU time a slow node's speed multiplies). The bound leaves room for the
 * loop thread's own few. ASan's allocator takes no mallopt: not checked. */
static void test_steady_allocations(void)
{
#if defined(__SANITIZE_ADDRESS__)
    printf("steady allocations: not checked under ASan\n");
#else
    struct harness_peer p;
    struct harness_reply r;
    CHECK(harness_start(&p, "alloc", "127.0.8.5", NULL));
    HCALL_OK(&p, &r, "dataset", "name:s n:i dim:i classes:i", "synthetic", 1000LL, 784LL, 10LL);
    HCALL_OK(&p, &r, "model", "name:s arch:s", "m", "mlp:784-128-10");
    for (int i = 0; i < 2; i++)
        HCALL_OK(&p, &r, "grad", "model:s out:s", "m", "g");
    for (int i = 0; i < 3; i++) {
        long before = peer_minor_faults(&p);
        HCALL_OK(&p, &r, "grad", "model:s out:s", "m", "g");
        long faults = peer_minor_faults(&p) - before;
        CHECK_MSG(before >= 0 && faults < 25, "grad %d of a fresh peer: %ld page faults", i + 3,
                  faults);
    }
    harness_stop(&p);
#endif
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}

static void test_errors(void)
{
    struct harness_peer p;
    struct harness_reply r;
    CHECK(harness_start(&p, "err", "127.0.8.5", NULL));
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/idx", tmp_dir);
    mkdir(dir, 0700);
    /* images: wrong magic; labels: fine (2 labels). */
    static const uint8_t bad_images[] = {0, 0, 9, 9, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2};
    static const uint8_t labels[] = {0, 0, 8, 1, 0, 0, 0, 2, 0, 1};
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    write_file(path, bad_images, sizeof bad_images);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
    write_file(path, labels, sizeof labels);
    HCALL_ERR(&p, &r, "train-images-idx3-ubyte", "dataset", "name:s", dir);
    printf("corrupt file: %s\n", r.error);
    /* A truncated gzip file. */
    static const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x63, 0x60};
    snprintf(path, sizeof path, "%s/trunc-images-idx3-ubyte.gz", tmp_dir);
    write_file(path, gz, sizeof gz);
    HCALL_ERR(&p, &r, "trunc-images-idx3-ubyte.gz", "dataset", "name:s path:s", "mine", path);
    printf("truncated file: %s\n", r.error);
    HCALL_ERR(&p, &r, "/nonexistent/x-images-idx3-ubyte", "dataset", "name:s",
              "/nonexistent/x-images-idx3-ubyte");
    HCALL_ERR(&p, &r, "model 'm' not found", "eval", "model:s", "m");
    HCALL_ERR(&p, &r, "shard 3 of 2: there are only 2 shards", "dataset", "name:s shard:i shards:i",
              "synthetic", 3LL, 2LL);
    HCALL_ERR(&p, &r, "shard 0 of 4: shards are numbered from 1 (give 1 to 4)", "dataset",
              "name:s shard:i shards:i", "synthetic", 0LL, 4LL);
    HCALL_ERR(&p, &r, "shard 2 without shards", "dataset", "name:s shard:i", "synthetic", 2LL);
    HCALL_ERR(&p, &r, "unknown param 'lr'", "grad", "model:s lr:f", "m", 0.1);
    HCALL_OK(&p, &r, "model", "name:s arch:s", "m", "logreg:32-10");
    HCALL_ERR(&p, &r, "no 'train' split loaded", "grad", "model:s", "m");
    HCALL_ERR(&p, &r, "tensor 'grad' not found", "optim", "model:s", "m");
    HCALL_ERR(&p, &r, "\"rmsprop\" is unknown", "optim", "model:s method:s", "m", "rmsprop");
    HCALL_ERR(&p, &r, "no 'test' split loaded", "eval", "model:s", "m");
    HCALL_ERR(&p, &r, "param 'batch'", "grad", "model:s batch:i", "m", 0LL);
    HCALL_OK(&p, &r, "dataset", "name:s dim:i", "synthetic", 8LL);
    HCALL_ERR(&p, &r, "model logreg:32-10 takes 32 inputs, the 'train' split has 8", "grad",
              "model:s", "m");
    harness_stop(&p);
}

static void remove_tree(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
    harness_init();
    snprintf(tmp_dir, sizeof tmp_dir, "%s/hiernet-test-ml-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir)) CHECK_SKIP("cannot create a temporary directory");
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", tmp_dir);
    setenv("HIERNET_CACHE", cache, 1); /* the peers inherit it */

    test_errors();
    test_compress();
    test_synthetic_and_speed();
    test_steady_allocations();
    char probe[256];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", DATASET_FASHION_MNIST_DIR);
    if (access(probe, R_OK) != 0) {
        remove_tree(tmp_dir);
        int status = check_report();
        if (status) return status;
        CHECK_SKIP("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    }
    /* Half the training set, 6 epochs: about 2 s (4 s under ASan). */
    struct plan half = {.shards = 2, .epochs = 6, .eval_limit = 10000, .target = 0.84};
    test_fashion_mnist(&half);
    remove_tree(tmp_dir);
    return check_report();
}

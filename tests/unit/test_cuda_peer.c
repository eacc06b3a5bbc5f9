/* test_cuda_peer.c — a hiernet-peer started with --device cuda computes its
 * compute commands on the device and keeps device copies of its tensors
 * (peer/devmirror.h). Driven side by side with a cpu peer on the same data:
 *   - model, grad, optim (momentum, adam), eval and the vector commands give
 *     the cpu peer's results, and a training loop uploads nothing (the
 *     model stays on the device); a background eval computes on the host;
 *   - a tensor changed behind the device's back is uploaded again before the
 *     next use: parameters received over the data plane (whole and as a
 *     range), a tensor replaced by a CPU command (copy), and one patched in
 *     place on the host (compress's error-feedback residual);
 *   - cnn:lenet trains as on the cpu peer (losses, gradients, parameters,
 *     accuracy); so does cnn:resnet20 (its batch statistics folded into
 *     the running ones on the device by optim, evaluation by them);
 *   - forward{} and backward{} (layer ranges) of cnn:lenet, cnn:resnet20
 *     and an mlp, in
 *     2 parts, with and without add=: the cuda peer runs them on the
 *     device's range passes (the fake module logs each call, through
 *     HIERNET_FAKE_CUDA_LOG) and gets the cpu peer's activations, losses
 *     and gradients exactly (the fake computes with the CPU's code), with
 *     the parameters kept on the device;
 *   - a device that is missing or cannot be opened ends the peer at start
 *     with status 1, and its reason reaches the controller in a "fatal"
 *     notification; --device gpu is a usage error.
 * Without a GPU the peers use the fake CUDA module of the unit tests
 * (fake_cuda_module.c: CPU arithmetic on checked "device memory", so a
 * missing upload or a host pointer given as device memory shows). Skips
 * (77) in builds without CUDA, where there is no module to load. */
#include "kernels/device.h"
#include "tests/unit/peer_harness.h"

static const char *const cuda_args[] = {"--device", "cuda", NULL};

/* Reads |a - b| <= tol (relative to the larger of 1 and |b|) for every value. */
static void check_same_values(const float *a, const float *b, size_t n, double tol,
                              const char *what)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(b[i]) > 1 ? fabs(b[i]) : 1;
        double d = fabs((double)a[i] - b[i]) / scale;
        worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
    }
    CHECK_MSG(worst <= tol, "%s: values differ by %g (tolerance %g)", what, worst, tol);
}

/* The tensor `name` on both peers holds the same values. */
static void check_same_tensor(struct harness_peer *g, struct harness_peer *c, const char *name,
                              double tol)
{
    struct harness_reply rg, rc;
    HCALL_OK(g, &rg, "read", "tensor:s", name);
    HCALL_OK(c, &rc, "read", "tensor:s", name);
    CHECK_MSG(rg.n_values == rc.n_values && rg.n_values > 0, "%s: %zu vs %zu values", name,
              rg.n_values, rc.n_values);
    if (rg.n_values == rc.n_values) check_same_values(rg.values, rc.values, rg.n_values, tol, name);
    harness_reply_free(&rg);
    harness_reply_free(&rc);
}

/* check_same_tensor for a tensor of `size` elements, more than one read
 * returns (a model's parameters or gradient), read in ranges. */
static void check_same_large_tensor(struct harness_peer *g, struct harness_peer *c,
                                    const char *name, size_t size, double tol)
{
    const size_t piece = 65536;
    for (size_t off = 0; off < size; off += piece) {
        struct harness_reply rg, rc;
        long long n = (long long)(size - off < piece ? size - off : piece);
        HCALL_OK(g, &rg, "read", "tensor:s range:r", name, (long long)off, n);
        HCALL_OK(c, &rc, "read", "tensor:s range:r", name, (long long)off, n);
        CHECK_MSG(rg.n_values == (size_t)n && rc.n_values == (size_t)n,
                  "%s at %zu: %zu vs %zu values", name, off, rg.n_values, rc.n_values);
        if (rg.n_values == rc.n_values)
            check_same_values(rg.values, rc.values, rg.n_values, tol, name);
        harness_reply_free(&rg);
        harness_reply_free(&rc);
    }
}

/* Runs one command on both peers; returns the named number of each. */
static void both(struct harness_peer *g, struct harness_peer *c, const char *key, double *vg,
                 double *vc, const char *method, const char *fmt, ...)
{
    struct harness_reply rg, rc;
    va_list ap;
    va_start(ap, fmt);
    uint32_t id = harness_request_v(g, method, fmt, ap);
    va_end(ap);
    bool ok = harness_wait(g, id, &rg) && rg.ok;
    CHECK_MSG(ok, "%s on the cuda peer: %s", method, rg.error);
    va_start(ap, fmt);
    id = harness_request_v(c, method, fmt, ap);
    va_end(ap);
    ok = harness_wait(c, id, &rc) && rc.ok;
    CHECK_MSG(ok, "%s on the cpu peer: %s", method, rc.error);
    if (key) {
        *vg = harness_num(&rg, key);
        *vc = harness_num(&rc, key);
    }
}

/* grad on both peers: the same loss (the same batch, the same parameters). */
static void grad_both(struct harness_peer *g, struct harness_peer *c, const char *what)
{
    double lg, lc;
    both(g, c, "loss", &lg, &lc, "grad", "model:s batch:i", "m", 32LL);
    CHECK_MSG(fabs(lg - lc) <= 1e-6 * fabs(lc), "%s: loss %.9g on cuda, %.9g on cpu", what, lg, lc);
    check_same_tensor(g, c, "grad", 1e-5);
}

static double stat_of(struct harness_peer *p, const char *key)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "stats", "");
    return harness_num(&r, key);
}

static void setup_pair(struct harness_peer *g, struct harness_peer *c)
{
    double a, b;
    CHECK(harness_start(g, "gpu", "127.0.9.1", cuda_args));
    CHECK(harness_start(c, "cpu", "127.0.9.2", NULL));
    struct harness_reply r;
    HCALL_OK(g, &r, "stats", "");
    CHECK_MSG(strncmp(harness_str(&r, "device") ? harness_str(&r, "device") : "", "cuda:0", 6) == 0,
              "device: %s", harness_str(&r, "device") ? harness_str(&r, "device") : "(none)");
    HCALL_OK(c, &r, "stats", "");
    CHECK_STREQ(harness_str(&r, "device") ? harness_str(&r, "device") : "", "cpu");
    both(g, c, NULL, &a, &b, "dataset", "name:s n:i dim:i classes:i seed:i", "synthetic", 3000LL,
         20LL, 5LL, 4LL);
    both(g, c, NULL, &a, &b, "dataset", "name:s split:s n:i dim:i classes:i seed:i", "synthetic",
         "test", 700LL, 20LL, 5LL, 4LL);
    both(g, c, "size", &a, &b, "model", "name:s arch:s seed:i", "m", "mlp:20-16-12-5", 7LL);
    CHECK(a == b && a == 20 * 16 + 16 + 16 * 12 + 12 + 12 * 5 + 5);
    check_same_tensor(g, c, "m", 0);
}

/* ---- the same results as the cpu ---- */

static void test_training(struct harness_peer *g, struct harness_peer *c)
{
    double a, b;
    double uploads = stat_of(g, "device_uploads");
    for (int step = 0; step < 6; step++) {
        grad_both(g, c, "training");
        both(g, c, "steps", &a, &b, "optim", "model:s method:s lr:f", "m",
             step < 3 ? "momentum" : "adam", 0.05);
        CHECK(a == b);
        check_same_tensor(g, c, "m", 1e-5);
    }
    /* Parameters, gradients and optimizer state stayed on the device. */
    CHECK_MSG(stat_of(g, "device_uploads") == uploads, "%g uploads while training",
              stat_of(g, "device_uploads") - uploads);
    CHECK(stat_of(g, "device_downloads") >= 12 && stat_of(g, "device_bytes") > 0);
    both(g, c, "accuracy", &a, &b, "eval", "model:s", "m");
    CHECK_NEAR(a, b, 1.5 / 700);
    both(g, c, "loss", &a, &b, "eval", "model:s limit:i", "m", 300LL);
    CHECK_NEAR(a, b, 1e-5 * b);
    /* A background eval on the cuda peer computes on the host CPU, from the
     * host parameters: the cpu peer's numbers; nothing is uploaded. */
    uploads = stat_of(g, "device_uploads");
    both(g, c, "loss", &a, &b, "eval", "model:s limit:i background:b", "m", 300LL, 1);
    CHECK_NEAR(a, b, 1e-5 * b);
    CHECK(stat_of(g, "device_uploads") == uploads);
}

static void test_vectors(struct harness_peer *g, struct harness_peer *c)
{
    double a, b;
    const char *three[] = {"a", "b", "b"}, *two[] = {"a", "b"};
    both(g, c, NULL, &a, &b, "tensor", "name:s size:i fill:f", "a", 605LL, 1.5);
    both(g, c, NULL, &a, &b, "copy", "src:s dst:s", "grad", "b");
    both(g, c, NULL, &a, &b, "tensor", "name:s size:i", "b2", 605LL);
    both(g, c, NULL, &a, &b, "axpy", "y:s x:s alpha:f range:r", "b2", "a", 0.3, 10LL, 100LL);
    both(g, c, NULL, &a, &b, "scale", "x:s alpha:f range:r", "b2", -2.0, 50LL, 300LL);
    both(g, c, NULL, &a, &b, "axpy", "y:s x:s alpha:f", "b2", "b2", 0.5); /* x == y */
    check_same_tensor(g, c, "b2", 1e-6);
    both(g, c, NULL, &a, &b, "sum", "out:s inputs:l", "s", 3, three);
    both(g, c, NULL, &a, &b, "sum", "out:s inputs:l", "a", 2, two); /* out is an input */
    check_same_tensor(g, c, "s", 1e-6);
    check_same_tensor(g, c, "a", 1e-6);
    both(g, c, "value", &a, &b, "norm", "x:s", "s");
    CHECK_NEAR(a, b, 1e-9 * b);
    both(g, c, "value", &a, &b, "dot", "x:s y:s range:r", "s", "b2", 5LL, 500LL);
    CHECK_NEAR(a, b, 1e-9 * fabs(b) + 1e-12);
    struct harness_reply r;
    HCALL_OK(g, &r, "tensor", "name:s size:i", "odd", 7LL);
    HCALL_ERR(g, &r, "size mismatch", "axpy", "y:s x:s", "a", "odd");
    HCALL_ERR(g, &r, "out of bounds", "scale", "x:s alpha:f range:r", "a", 2.0, 600LL, 100LL);
    check_same_tensor(g, c, "a", 1e-6); /* failed commands changed nothing */
    both(g, c, "dropped", &a, &b, "drop", "names:l", 2, three);
    CHECK(a == 2 && b == 2);
}

/* ---- changes behind the device's back ---- */

/* The cpu peer's parameters, sent whole over the data plane, replace the
 * cuda peer's (which differ after a step on the cuda peer alone). */
static void test_received_whole(struct harness_peer *g, struct harness_peer *c)
{
    struct harness_reply r;
    HCALL_OK(g, &r, "optim", "model:s method:s lr:f", "m", "sgd", 0.5);
    double uploads = stat_of(g, "device_uploads");
    HCALL_OK(c, &r, "send", "tensor:s to_addr:s as:s", "m", harness_data_addr(g), "m");
    check_same_tensor(g, c, "m", 0);
    grad_both(g, c, "after a receive");
    CHECK(stat_of(g, "device_uploads") == uploads + 1);
}

/* A range received into the parameters patches them in place; the cpu peer
 * makes the same change with a ranged axpy. */
static void test_received_range(struct harness_peer *g, struct harness_peer *c)
{
    struct harness_reply r;
    double a, b;
    both(g, c, NULL, &a, &b, "copy", "src:s dst:s", "m", "half");
    both(g, c, NULL, &a, &b, "scale", "x:s alpha:f", "half", 0.5);
    HCALL_OK(c, &r, "send", "tensor:s to_addr:s as:s range:r", "half", harness_data_addr(g), "m",
             40LL, 120LL);
    /* m - half = m / 2 exactly, as the received range holds */
    HCALL_OK(c, &r, "axpy", "y:s x:s alpha:f range:r", "m", "half", -1.0, 40LL, 120LL);
    check_same_tensor(g, c, "m", 0);
    grad_both(g, c, "after a range receive");
}

/* copy replaces a tensor by a host one; compress patches its residual in
 * place on the host. Either way the device copy is stale afterwards. */
static void test_host_writes(struct harness_peer *g, struct harness_peer *c)
{
    double a, b;
    both(g, c, NULL, &a, &b, "copy", "src:s dst:s", "half", "m");
    grad_both(g, c, "after copy{} replaced the parameters");
    for (int round = 0; round < 3; round++) {
        both(g, c, NULL, &a, &b, "compress", "tensor:s method:s ratio:f out:s residual:s", "grad",
             "topk", 0.2, "gc", "res");
        both(g, c, NULL, &a, &b, "axpy", "y:s x:s alpha:f", "res", "grad", 0.25);
        check_same_tensor(g, c, "res", 1e-6);
    }
}

/* cnn:lenet on 28x28 inputs: the same losses, gradients, parameters and
 * accuracy as the cpu peer over a few sgd and momentum steps. */
static void test_lenet(struct harness_peer *g, struct harness_peer *c)
{
    double a, b;
    both(g, c, NULL, &a, &b, "dataset", "name:s n:i dim:i classes:i seed:i", "synthetic", 400LL,
         784LL, 10LL, 6LL);
    both(g, c, NULL, &a, &b, "dataset", "name:s split:s n:i dim:i classes:i seed:i", "synthetic",
         "test", 200LL, 784LL, 10LL, 6LL);
    both(g, c, "size", &a, &b, "model", "name:s arch:s seed:i", "cnn", "cnn:lenet", 3LL);
    CHECK(a == b && a == 61706);
    check_same_tensor(g, c, "cnn", 0);
    for (int step = 0; step < 4; step++) {
        double lg, lc;
        both(g, c, "loss", &lg, &lc, "grad", "model:s batch:i out:s", "cnn", 16LL, "cgrad");
        CHECK_MSG(fabs(lg - lc) <= 1e-5 * fabs(lc), "lenet step %d: loss %.9g on cuda, %.9g on cpu",
                  step, lg, lc);
        check_same_tensor(g, c, "cgrad", 1e-5);
        both(g, c, NULL, &a, &b, "optim", "model:s grad:s method:s lr:f", "cnn", "cgrad",
             step < 2 ? "sgd" : "momentum", 0.05);
        check_same_tensor(g, c, "cnn", 1e-5);
    }
    both(g, c, "accuracy", &a, &b, "eval", "model:s", "cnn");
    CHECK_NEAR(a, b, 1.5 / 200);
    both(g, c, "loss", &a, &b, "eval", "model:s", "cnn");
    CHECK_NEAR(a, b, 1e-5 * b);
}

/* cnn:resnet20 (after test_lenet, on its 784-pixel dataset): the same
 * losses, gradients (batch statistics in the tail), parameters (running
 * statistics folded in) and evaluation as the cpu peer. */
static void test_resnet(struct harness_peer *g, struct harness_peer *c)
{
    double a, b;
    both(g, c, "size", &a, &b, "model", "name:s arch:s seed:i", "r20", "cnn:resnet20", 4LL);
    CHECK(a == b && a == 270810);
    for (int step = 0; step < 2; step++) {
        double lg, lc;
        both(g, c, "loss", &lg, &lc, "grad", "model:s batch:i out:s", "r20", 8LL, "rgrad");
        CHECK_MSG(fabs(lg - lc) <= 1e-5 * fabs(lc),
                  "resnet20 step %d: loss %.9g on cuda, %.9g on cpu", step, lg, lc);
        check_same_large_tensor(g, c, "rgrad", 270810, 1e-5);
        both(g, c, NULL, &a, &b, "optim", "model:s grad:s method:s lr:f", "r20", "rgrad",
             "momentum", 0.05);
        check_same_large_tensor(g, c, "r20", 270810, 1e-5);
    }
    both(g, c, "loss", &a, &b, "eval", "model:s", "r20");
    CHECK_NEAR(a, b, 1e-5 * b);
}

/* ---- layer ranges ---- */

/* forward{} then backward{} of `model` (`params` elements) cut before
 * layer `cut` (1-based), the two parts on the same peer, on both peers:
 * equal results. */
static void split_both(struct harness_peer *g, struct harness_peer *c, const char *model, int cut,
                       int layers, size_t params)
{
    double a, b;
    both(g, c, "batch", &a, &b, "forward", "model:s layers:r batch:i out:s labels_out:s", model,
         1LL, (long long)cut - 1, 6LL, "a1", "lbl");
    CHECK(a == 6 && b == 6);
    check_same_tensor(g, c, "a1", 0);
    both(g, c, "loss", &a, &b, "forward", "model:s layers:r input:s labels:s out:s", model,
         (long long)cut, (long long)layers, "a1", "lbl", "logits");
    CHECK_MSG(a == b, "%s: loss %.9g on cuda, %.9g on cpu", model, a, b);
    check_same_tensor(g, c, "logits", 0);
    both(g, c, NULL, &a, &b, "backward", "model:s layers:r grad_out:s out:s", model, (long long)cut,
         (long long)layers, "dx", "g2");
    check_same_tensor(g, c, "dx", 0);
    check_same_large_tensor(g, c, "g2", params, 0);
    /* add=: the first part's slices added into the second part's gradient. */
    both(g, c, NULL, &a, &b, "backward", "model:s layers:r grad_in:s out:s add:b", model, 1LL,
         (long long)cut - 1, "dx", "g2", 1);
    check_same_large_tensor(g, c, "g2", params, 0);
}

/* The lines of the fake module's log that start with `pass` and name spec. */
static int log_count(const char *path, const char *pass, const char *spec)
{
    FILE *f = fopen(path, "r");
    char line[256], want[160];
    int n = 0;
    snprintf(want, sizeof want, "%s %s ", pass, spec);
    while (f && fgets(line, sizeof line, f))
        n += strncmp(line, want, strlen(want)) == 0;
    if (f) fclose(f);
    return n;
}

/* Runs after test_lenet (its 784-pixel dataset is loaded on both peers). */
static void test_split(struct harness_peer *g, struct harness_peer *c, const char *log)
{
    double a, b;
    /* Fresh models: the same parameters on both peers to the bit. */
    both(g, c, "size", &a, &b, "model", "name:s arch:s seed:i", "cnn2", "cnn:lenet", 8LL);
    split_both(g, c, "cnn2", 4, 8, 61706); /* pool | conv ... dense */
    double uploads = stat_of(g, "device_uploads");
    split_both(g, c, "cnn2", 6, 8, 61706); /* flatten | dense */
    /* The parameters stayed on the device: nothing uploaded for a step. */
    CHECK_MSG(stat_of(g, "device_uploads") == uploads, "%g uploads in a split step",
              stat_of(g, "device_uploads") - uploads);
    both(g, c, "size", &a, &b, "model", "name:s arch:s seed:i", "m2", "mlp:784-16-12-10", 9LL);
    split_both(g, c, "m2", 2, 3, 784 * 16 + 16 + 16 * 12 + 12 + 12 * 10 + 10);
    /* before stage 3's downsampling block (its input, 6 x 32 x 14 x 14
     * values, fits one read) */
    split_both(g, c, "r20", 33, 49, 270810);
    CHECK(log_count(log, "forward_range", "cnn:resnet20") == 2 &&
          log_count(log, "backward_range", "cnn:resnet20") == 2);
    CHECK_MSG(log_count(log, "forward_range", "cnn:lenet") == 4 &&
                  log_count(log, "backward_range", "cnn:lenet") == 4,
              "the cuda peer ran %d forward and %d backward lenet ranges on the device, not 4",
              log_count(log, "forward_range", "cnn:lenet"),
              log_count(log, "backward_range", "cnn:lenet"));
    CHECK(log_count(log, "forward_range", "mlp:784-16-12-10") == 2 &&
          log_count(log, "backward_range", "mlp:784-16-12-10") == 2);
}

/* A forward whose part's model cannot be made on the device (out of GPU
 * memory) fails; the same forward once memory is back succeeds (its stash,
 * kept without a model, is made again rather than read). */
static void test_split_create_failure(struct harness_peer *g, const char *flag)
{
    struct harness_reply r;
    FILE *f = fopen(flag, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    uint32_t id = harness_request(g, "forward", "model:s layers:r batch:i out:s", "cnn2", 1LL, 2LL,
                                  6LL, "oom_a");
    bool answered = harness_wait(g, id, &r);
    CHECK_MSG(answered && !r.ok && strstr(r.error, "out of memory creating cnn:lenet"),
              "forward without device memory: %s", answered ? r.error : "no reply");
    harness_reply_free(&r);
    unlink(flag);
    id = harness_request(g, "forward", "model:s layers:r batch:i out:s", "cnn2", 1LL, 2LL, 6LL,
                         "oom_a");
    answered = harness_wait(g, id, &r);
    CHECK_MSG(answered && r.ok, "the same forward with memory back: %s",
              answered ? r.error : "no reply (the peer died)");
    harness_reply_free(&r);
}

/* ---- start failures ---- */

/* Reads the peer's messages until EOF; the error of its "fatal"
 * notification into why (empty if none came). */
static void read_fatal(struct harness_peer *p, char *why, size_t cap)
{
    why[0] = '\0';
    for (;;) {
        struct proto_msg msg;
        bool has_msgid;
        char err[256];
        enum proto_next k = proto_reader_next(&p->reader, &msg, &has_msgid, err, sizeof err);
        if (k == PROTO_NEXT_MESSAGE && msg.kind == PROTO_NOTIFY && msg.method_len == 5 &&
            memcmp(msg.method, "fatal", 5) == 0) {
            struct proto_args a;
            proto_args_init(&a, msg.params);
            proto_arg_strcpy(&a, "error", why, cap);
            continue;
        }
        if (k == PROTO_NEXT_MESSAGE) continue;
        if (k != PROTO_NEXT_MORE) return;
        size_t avail;
        char *buf = proto_reader_buffer(&p->reader, 4096, &avail);
        ssize_t n = buf ? read(p->fd, buf, avail) : -1;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        proto_reader_consumed(&p->reader, (size_t)n);
    }
}

static void expect_start_failure(const char *env, const char *value, const char *want)
{
    struct harness_peer p;
    char why[1024];
    setenv(env, value, 1);
    CHECK(harness_spawn(&p, "nogpu", "127.0.9.3", cuda_args));
    read_fatal(&p, why, sizeof why);
    unsetenv(env);
    CHECK_CONTAINS(why, "cannot compute on cuda: device cuda is not available: ");
    CHECK_CONTAINS(why, want);
    const char *log = harness_finish(&p, 1, 10000);
    CHECK_CONTAINS(log, "hiernet-peer[nogpu]: cannot compute on cuda");
}

static void test_start_failures(void)
{
    expect_start_failure("HIERNET_FAKE_CUDA_DEVICES", "0", "no CUDA device: ");
    struct harness_peer p;
    char why[1024];
    setenv("HIERNET_FAKE_CUDA_CTX_ERROR", "all CUDA-capable devices are busy", 1);
    CHECK(harness_spawn(&p, "busy", "127.0.9.4", cuda_args));
    read_fatal(&p, why, sizeof why);
    unsetenv("HIERNET_FAKE_CUDA_CTX_ERROR");
    CHECK_CONTAINS(why,
                   "cannot compute on cuda: cuda set device: all CUDA-capable devices are busy");
    harness_finish(&p, 1, 10000);

    static const char *const gpu[] = {"--device", "gpu", NULL};
    CHECK(harness_spawn(&p, "typo", "127.0.9.5", gpu));
    const char *log = harness_finish(&p, 2, 10000);
    CHECK_CONTAINS(log, "--device: device \"gpu\" is unknown (cpu, cuda)");
}

int main(void)
{
    harness_init();
    const char *fake = getenv("HIERNET_FAKE_CUDA_MODULE");
    if (!kern_device_built(KERN_DEVICE_CUDA)) CHECK_SKIP("this build has no CUDA support");
    if (!fake || access(fake, R_OK) != 0) CHECK_SKIP("the fake CUDA module is not built");
    setenv("HIERNET_CUDA_MODULE", fake, 1); /* the peers' device */
    char log[] = "/tmp/hiernet-fake-cuda-log-XXXXXX";
    int log_fd = mkstemp(log);
    CHECK(log_fd >= 0);
    close(log_fd);
    setenv("HIERNET_FAKE_CUDA_LOG", log, 1); /* the cuda peer's range passes */
    char flag[sizeof log + 8];
    snprintf(flag, sizeof flag, "%s.oom", log); /* exists: the device cannot make a model */
    setenv("HIERNET_FAKE_CUDA_CREATE_FAIL", flag, 1);
    /* test_split compares to the bit: one BLAS thread in every library
     * instance (with the machine's default, the two peers' conv gradients
     * differed in the last bits, 1e-7, although both run --threads 1). */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);

    struct harness_peer g, c;
    setup_pair(&g, &c);
    test_training(&g, &c);
    test_vectors(&g, &c);
    test_received_whole(&g, &c);
    test_received_range(&g, &c);
    test_host_writes(&g, &c);
    test_lenet(&g, &c);
    test_resnet(&g, &c);
    test_split(&g, &c, log);
    test_split_create_failure(&g, flag);
    unlink(log);
    printf("cuda peer (%g uploads, %g downloads) agrees with the cpu peer\n",
           stat_of(&g, "device_uploads"), stat_of(&g, "device_downloads"));
    harness_stop(&g);
    harness_stop(&c);
    test_start_failures();
    return check_report();
}

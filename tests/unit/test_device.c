/* test_device.c — kernels/device: device names, availability and its
 * reasons (on a machine without a GPU, cuda must be unavailable with a
 * clear reason: the start-up check of a device = "cuda" node relies on it),
 * which models each device runs, the CUDA module loader's errors, and the
 * cpu context's dispatch to kernels/cpu/. Runs everywhere. */
#include <cblas.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/device.h"
#include "kernels/vec.h"
#include "tests/unit/check.h"

static char err[768];

/* Independent of CUDA: does this machine show an NVIDIA GPU at all? */
static int machine_has_nvidia_gpu(void)
{
    return access("/dev/nvidia0", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0 ||
           access("/dev/dxg", F_OK) == 0; /* WSL */
}

static void test_names(void)
{
    enum kern_device d = KERN_DEVICE_CUDA;
    CHECK(kern_device_parse("cpu", &d, err, sizeof err) == 0 && d == KERN_DEVICE_CPU);
    CHECK(kern_device_parse("cuda", &d, err, sizeof err) == 0 && d == KERN_DEVICE_CUDA);
    CHECK(kern_device_parse("gpu", &d, err, sizeof err) == -1);
    CHECK_STREQ(err, "device \"gpu\" is unknown (cpu, cuda)");
    CHECK(kern_device_parse(NULL, &d, err, sizeof err) == -1);
    CHECK(kern_device_parse("CUDA", &d, err, sizeof err) == -1);
    CHECK_STREQ(kern_device_name(KERN_DEVICE_CPU), "cpu");
    CHECK_STREQ(kern_device_name(KERN_DEVICE_CUDA), "cuda");
    CHECK(kern_device_built(KERN_DEVICE_CPU));
}

static void test_availability(void)
{
    char why[768] = "junk";
    CHECK(kern_device_available(KERN_DEVICE_CPU, why, sizeof why) == 1 && why[0] == '\0');
    CHECK(kern_device_available((enum kern_device)7, why, sizeof why) == 0);
    CHECK_CONTAINS(why, "unknown");

    int available = kern_device_available(KERN_DEVICE_CUDA, why, sizeof why);
    printf("cuda: %s%s\n", available ? "available" : "unavailable: ", why);
    if (!kern_device_built(KERN_DEVICE_CUDA)) {
        CHECK(available == 0);
        CHECK_STREQ(why, "this build has no CUDA support");
    } else if (!machine_has_nvidia_gpu()) {
        /* This machine (no GPU, maybe no driver): the runtime's own error,
         * or the loader's where the CUDA libraries are missing too. */
        CHECK(available == 0);
        CHECK_MSG((strncmp(why, "no CUDA device: ", 16) == 0 ||
                   strncmp(why, "cannot load the CUDA kernels", 28) == 0) &&
                      strlen(why) > 32,
                  "why: %s", why);
    }
    if (available) return;

    /* Opening the device fails with the same reason, naming the device. */
    struct kern_ctx *ctx = (struct kern_ctx *)&ctx;
    CHECK(kern_ctx_create(KERN_DEVICE_CUDA, &ctx, err, sizeof err) == -1 && ctx == NULL);
    CHECK_CONTAINS(err, "device cuda is not available: ");
    CHECK_CONTAINS(err, why);
}

/* The loader names a module it cannot use; in children, since the module is
 * loaded once per process (so this runs before anything here loads it). */
static void test_module_errors(void)
{
    if (!kern_device_built(KERN_DEVICE_CUDA)) return;
    static const char *const modules[] = {"/nonexistent/libhiernet_cuda.so", "libm.so.6"};
    static const char *const expect[] = {"/nonexistent/libhiernet_cuda.so",
                                         "libm.so.6 is not this build's CUDA module"};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char why[768];
            setenv("HIERNET_CUDA_MODULE", modules[i], 1);
            int ok = kern_device_available(KERN_DEVICE_CUDA, why, sizeof why) == 0 &&
                     strstr(why, "cannot load the CUDA kernels") && strstr(why, expect[i]);
            if (!ok) fprintf(stderr, "HIERNET_CUDA_MODULE=%s: %s\n", modules[i], why);
            _exit(ok ? 0 : 1);
        }
        int status = -1;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "module %s", modules[i]);
    }
}

/* The fake module of the unit tests (tests/unit/fake_cuda_module.c) stands
 * in for a GPU only if it catches what a GPU would: host pointers given as
 * device memory, device pointers given as host memory, overruns, and reads
 * of memory never uploaded (NaN). Checked in a child with the module loaded. */
static int fake_module_child(void)
{
    char why[768];
    struct kern_ctx *ctx;
    float host[4] = {1, 2, 3, 4}, *d, back[5];
    double v;
    int bad = 0;
    bad |= kern_ctx_create(KERN_DEVICE_CUDA, &ctx, why, sizeof why) != 0;
    if (bad) return fprintf(stderr, "open: %s\n", why), 1;
    bad |= !strstr(kern_ctx_describe(ctx), "fake") << 1;
    bad |= (kern_alloc(ctx, 4, &d, why, sizeof why) != 0) << 2;
    bad |= (kern_axpy(ctx, 4, 1.0f, host, d, why, sizeof why) != -1 ||
            !strstr(why, "fake cuda axpy: x") || !strstr(why, "is not device memory"))
           << 3;
    bad |= (kern_download(ctx, back, d, 5, why, sizeof why) != -1) << 4; /* overrun */
    bad |= (kern_upload(ctx, d, d, 4, why, sizeof why) != -1 || !strstr(why, "not host")) << 5;
    bad |= (kern_download(ctx, back, d, 4, why, sizeof why) != 0 || !isnan(back[3])) << 6;
    bad |= (kern_upload(ctx, d, host, 4, why, sizeof why) != 0 ||
            kern_norm(ctx, 4, d, &v, why, sizeof why) != 0 || v != sqrt(30.0))
           << 7;
    kern_free(ctx, d);
    kern_ctx_destroy(ctx);
    if (bad) fprintf(stderr, "fake module: failed checks 0x%x (last: %s)\n", bad, why);
    return bad != 0;
}

/* A machine without a GPU, as the fake module shows it. */
static int fake_no_device_child(void)
{
    char why[768];
    setenv("HIERNET_FAKE_CUDA_DEVICES", "0", 1);
    int ok = kern_device_available(KERN_DEVICE_CUDA, why, sizeof why) == 0 &&
             strncmp(why, "no CUDA device: ", 16) == 0;
    if (!ok) fprintf(stderr, "no device: %s\n", why);
    return !ok;
}

static void test_fake_module(void)
{
    const char *fake = getenv("HIERNET_FAKE_CUDA_MODULE");
    if (!kern_device_built(KERN_DEVICE_CUDA) || !fake) return;
    int (*children[])(void) = {fake_module_child, fake_no_device_child};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("HIERNET_CUDA_MODULE", fake, 1);
            _exit(children[i]());
        }
        int status = -1;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fake module check %d", i);
    }
}

static void test_model_support(void)
{
    char why[512];
    CHECK(kern_device_supports_model(KERN_DEVICE_CPU, "cnn:lenet", why, sizeof why) == 1);
    CHECK(kern_device_supports_model(KERN_DEVICE_CPU, "mlp:784-128-10", why, sizeof why) == 1);
    CHECK(kern_device_supports_model(KERN_DEVICE_CUDA, "mlp:784-128-10", why, sizeof why) == 1);
    CHECK(kern_device_supports_model(KERN_DEVICE_CUDA, "logreg:784-10", why, sizeof why) == 1);
    CHECK(kern_device_supports_model(KERN_DEVICE_CUDA, "cnn:lenet", why, sizeof why) == 1);
    CHECK(kern_device_supports_model(KERN_DEVICE_CUDA, "cnn:vgg", why, sizeof why) == 0);
    CHECK_CONTAINS(why, "unknown cnn");
    CHECK(kern_device_supports_model(KERN_DEVICE_CUDA, "mlp:784", why, sizeof why) == 0);
    CHECK_CONTAINS(why, "mlp:784");
}

/* ---- the cpu context: every call reaches kernels/cpu/ ---- */

static void test_cpu_vectors(struct kern_ctx *ctx)
{
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {5, 4, 3, 2, 1}, host[5];
    float *dx, *dy;
    CHECK(kern_alloc(ctx, 5, &dx, err, sizeof err) == 0 &&
          kern_alloc(ctx, 5, &dy, err, sizeof err) == 0);
    CHECK(kern_upload(ctx, dx, x, 5, err, sizeof err) == 0);
    CHECK(kern_upload(ctx, dy, y, 5, err, sizeof err) == 0);
    CHECK(kern_axpy(ctx, 5, 2.0f, dx, dy, err, sizeof err) == 0);  /* 7 8 9 10 11 */
    CHECK(kern_scale(ctx, 2, 0.5f, dy + 3, err, sizeof err) == 0); /* 7 8 9 5 5.5 */
    CHECK(kern_download(ctx, host, dy, 5, err, sizeof err) == 0);
    CHECK(host[0] == 7 && host[2] == 9 && host[3] == 5 && host[4] == 5.5f);
    double v;
    CHECK(kern_dot(ctx, 5, dx, dy, &v, err, sizeof err) == 0 && v == 7 + 16 + 27 + 20 + 27.5);
    CHECK(kern_norm(ctx, 2, dx + 2, &v, err, sizeof err) == 0 && v == 5);
    const float *inputs[2] = {dx, dy};
    CHECK(kern_sum(ctx, 5, dx, inputs, 2, err, sizeof err) == 0 && dx[1] == 10);
    CHECK(kern_fill(ctx, 5, 3, dy, err, sizeof err) == 0 && dy[4] == 3);
    CHECK(kern_copy(ctx, dx, dy, 5, err, sizeof err) == 0 && dx[0] == 3);
    /* row-major [1 2; 3 4] x [1 0; 0 1]^T */
    float a[4] = {1, 2, 3, 4}, id[4] = {1, 0, 0, 1}, c[4] = {0};
    CHECK(kern_sgemm(ctx, 1, 1, 2, 2, 2, 1, a, 2, id, 2, 0, c, 2, err, sizeof err) == 0);
    CHECK(c[0] == 1 && c[1] == 3 && c[2] == 2 && c[3] == 4);
    CHECK(kern_sgemm(ctx, 0, 0, 2, 2, 2, 1, a, 1, id, 2, 0, c, 2, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "lda=1");
    kern_free(ctx, dx);
    kern_free(ctx, dy);
    kern_free(ctx, NULL);
}

static void test_cpu_model(struct kern_ctx *ctx)
{
    struct kern_model *km;
    CHECK(kern_model_create(ctx, "cnn:lenet", 2, &km, err, sizeof err) == 0);
    CHECK(kern_model_param_count(km) == 61706 && kern_model_classes(km) == 10);
    kern_model_destroy(km);
    CHECK(kern_model_create(ctx, "mlp:4-3-2", 2, &km, err, sizeof err) == 0);
    size_t np = kern_model_param_count(km);
    CHECK(np == 4 * 3 + 3 + 3 * 2 + 2);
    float *p, *g, ref_g[23], x[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    int32_t labels[2] = {1, 0};
    CHECK(kern_alloc(ctx, np, &p, err, sizeof err) == 0 &&
          kern_alloc(ctx, np, &g, err, sizeof err) == 0);
    CHECK(kern_model_init(km, p, NULL, 3, err, sizeof err) == 0);
    float loss, ref_loss;
    CHECK(kern_model_grad(km, p, x, labels, 2, g, &loss, err, sizeof err) == 0);
    struct model *ref;
    CHECK(model_create("mlp:4-3-2", 2, &ref, err, sizeof err) == 0);
    CHECK(model_grad(ref, p, x, labels, 2, ref_g, &ref_loss, err, sizeof err) == 0);
    CHECK(loss == ref_loss && memcmp(g, ref_g, sizeof ref_g) == 0);
    struct model_score s = {0};
    CHECK(kern_model_eval(km, p, x, labels, 2, &s, err, sizeof err) == 0 && s.samples == 2);
    model_destroy(ref);
    kern_model_destroy(km);
    kern_free(ctx, p);
    kern_free(ctx, g);
}

static void test_cpu_optim(struct kern_ctx *ctx)
{
    struct optim_config cfg;
    optim_config_default(&cfg, OPTIM_SGD);
    cfg.lr = 0.5f;
    struct kern_optim *o;
    CHECK(kern_optim_create(ctx, &cfg, 2, &o, err, sizeof err) == 0);
    float p[2] = {1, 2}, g[2] = {2, -2};
    CHECK(kern_optim_step(o, p, g, 2, err, sizeof err) == 0 && p[0] == 0 && p[1] == 3);
    CHECK(kern_optim_steps(o) == 1 && kern_optim_config(o)->lr == 0.5f);
    CHECK(kern_optim_step(o, p, g, 3, err, sizeof err) == -1);
    CHECK(kern_optim_reset(o, err, sizeof err) == 0 && kern_optim_steps(o) == 0);
    kern_optim_destroy(o);
    cfg.momentum = 1.5f;
    cfg.method = OPTIM_MOMENTUM;
    CHECK(kern_optim_create(ctx, &cfg, 2, &o, err, sizeof err) == -1 && o == NULL);
    CHECK_CONTAINS(err, "momentum 1.5");
}

int main(void)
{
    test_names();
    test_module_errors(); /* first: its children must not inherit a loaded module */
    test_fake_module();
    test_availability();
    test_model_support();
    struct kern_ctx *ctx;
    CHECK(kern_ctx_create(KERN_DEVICE_CPU, &ctx, err, sizeof err) == 0);
    CHECK(kern_ctx_device(ctx) == KERN_DEVICE_CPU);
    CHECK_STREQ(kern_ctx_describe(ctx), "cpu");
    test_cpu_vectors(ctx);
    test_cpu_model(ctx);
    test_cpu_optim(ctx);
    kern_ctx_destroy(ctx);
    return check_report();
}

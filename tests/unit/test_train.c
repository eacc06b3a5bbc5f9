/* test_train.c — one process trains mlp:784-128-10 on Fashion-MNIST with the
 * kernels alone (dataset shard -> model_grad -> optim_step -> model_eval) and
 * must pass 0.84 test accuracy. Skips when the Debian dataset is absent.
 * Under sanitizers (HIERNET_SANITIZE_BUILD set, or built with ASan) it runs a
 * short version with a lower bar, still exercising every path. */
#include <cblas.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "kernels/dataset.h"
#include "kernels/model.h"
#include "kernels/optim.h"
#include "tests/unit/check.h"

#if defined(__SANITIZE_ADDRESS__)
#define BUILT_WITH_ASAN 1
#else
#define BUILT_WITH_ASAN 0
#endif

enum { BATCH = 64, EVAL_CHUNK = 500 };

struct plan {
    enum optim_method method;
    float lr;
    int shards; /* train on shard 1 of this many (the subset) */
    int epochs;
    size_t eval;   /* test samples evaluated */
    double target; /* accuracy to pass */
};

static int open_split(const char *split, int shards, const char *cache, struct dataset **ds)
{
    char err[512];
    struct dataset_spec spec = {.name = "fashion-mnist",
                                .split = split,
                                .shard = shards ? 1 : 0,
                                .shards = shards,
                                .partition = "shuffle",
                                .seed = 1,
                                .cache_dir = cache};
    if (dataset_open(&spec, ds, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* Streams the first plan->eval test samples through model_eval. */
static double evaluate(struct model *m, const float *params, struct dataset *test, size_t limit,
                       double *loss)
{
    static float x[EVAL_CHUNK * 784];
    static int32_t y[EVAL_CHUNK];
    char err[512];
    struct model_score score = {0};
    for (size_t first = 0; first < limit; first += EVAL_CHUNK) {
        size_t n = limit - first < EVAL_CHUNK ? limit - first : EVAL_CHUNK;
        if (dataset_read(test, first, n, x, y, err, sizeof err) < 0 ||
            model_eval(m, params, x, y, n, &score, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
    }
    *loss = model_score_loss(&score);
    return model_score_accuracy(&score);
}

static void train(const struct plan *plan, const char *cache)
{
    char err[512];
    struct dataset *train_ds, *test_ds;
    struct model *m;
    struct optim *opt;
    struct optim_config cfg;
    optim_config_default(&cfg, plan->method);
    cfg.lr = plan->lr;
    CHECK(open_split("train", plan->shards, cache, &train_ds) == 0);
    CHECK(open_split("test", 0, cache, &test_ds) == 0);
    CHECK(model_create("mlp:784-128-10", BATCH, &m, err, sizeof err) == 0);
    CHECK(optim_create(&cfg, model_param_count(m), &opt, err, sizeof err) == 0);
    size_t n = model_param_count(m);
    float *params = malloc(n * sizeof(float)), *grad = malloc(n * sizeof(float));
    static float x[BATCH * 784];
    static int32_t y[BATCH];
    CHECK(model_init(m, params, NULL, 1, err, sizeof err) == 0);

    double start = mono_s(), loss_sum = 0, test_loss = 0;
    size_t steps = dataset_size(train_ds) * plan->epochs / BATCH;
    for (size_t step = 1; step <= steps; step++) {
        float loss;
        if (dataset_next_batch(train_ds, BATCH, x, y, err, sizeof err) < 0 ||
            model_grad(m, params, x, y, BATCH, grad, &loss, err, sizeof err) < 0 ||
            optim_step(opt, params, grad, n, err, sizeof err) < 0) {
            CHECK_MSG(0, "step %zu: %s", step, err);
            break;
        }
        loss_sum += loss;
        if (step % (steps / 4) == 0) {
            printf("step %zu: mean train loss %.4f\n", step, loss_sum / (double)(steps / 4));
            loss_sum = 0;
        }
    }
    double train_s = mono_s() - start;
    double accuracy = evaluate(m, params, test_ds, plan->eval, &test_loss);
    printf("mlp:784-128-10 %s lr %g, %zu train samples x %d epochs, %zu steps of %d: test "
           "accuracy %.4f (loss %.4f) on %zu samples; train %.1f s, total %.1f s\n",
           optim_method_name(plan->method), plan->lr, dataset_size(train_ds), plan->epochs, steps,
           BATCH, accuracy, test_loss, plan->eval, train_s, mono_s() - start);
    CHECK_MSG(accuracy > plan->target, "accuracy %.4f <= %.2f", accuracy, plan->target);
    free(params);
    free(grad);
    optim_destroy(opt);
    model_destroy(m);
    dataset_close(train_ds);
    dataset_close(test_ds);
}

int main(void)
{
    char probe[256];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", DATASET_FASHION_MNIST_DIR);
    if (access(probe, R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    openblas_set_num_threads(1);

    char cache[256];
    snprintf(cache, sizeof cache, "%s/hiernet-test-train-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cache)) CHECK_SKIP("cannot create a temporary cache directory");
    int sanitized = BUILT_WITH_ASAN || getenv("HIERNET_SANITIZE_BUILD");
    /* Full: the whole training set (shard 1 of 1) for 5 epochs, the whole
     * test set; about 2.5 s per method on one core. */
    struct plan full[] = {
        {.method = OPTIM_MOMENTUM,
         .lr = 0.02f,
         .shards = 1,
         .epochs = 5,
         .eval = 10000,
         .target = 0.84},
        {.method = OPTIM_SGD, .lr = 0.1f, .shards = 1, .epochs = 5, .eval = 10000, .target = 0.84},
    };
    struct plan small = {.method = OPTIM_MOMENTUM,
                         .lr = 0.02f,
                         .shards = 10,
                         .epochs = 1,
                         .eval = 2000,
                         .target = 0.70};
    if (sanitized) {
        train(&small, cache);
    } else {
        train(&full[0], cache);
        train(&full[1], cache);
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache);
    return check_report();
}

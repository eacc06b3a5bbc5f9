/* test_ml_prims.c — the learning primitives of a real hiernet-peer that the
 * algorithm library builds on (127.0.12.x): tensor{fill="uniform"|"normal"}
 * (seeded and reproducible, moments of 1e6 samples, the param rules),
 * optim{tensor=} on a plain tensor (the update rules, state per name, reset
 * on a new size), grad{same_batch} (the same loss and gradient twice, the
 * cursor not advanced: compared with a twin peer of the same seed; eval in
 * between does not clobber the batch) and eval{background} (the snapshot is
 * the model as of the command; training queued after it answers first, by
 * the order of responses; its CPU time stays out of the worker's totals; its
 * thread runs at idle priority; several run in order). */
#include <dirent.h>
#include <math.h>

#include "tests/unit/peer_harness.h"

/* ---- random fill ---- */

/* Mean and variance of tensor name (n elements) from its dot with ones and
 * its norm. */
static void moments(struct harness_peer *p, const char *name, long long n, double *mean,
                    double *var)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:f", "ones", n, 1.0);
    HCALL_OK(p, &r, "dot", "x:s y:s", name, "ones");
    *mean = harness_num(&r, "value") / (double)n;
    HCALL_OK(p, &r, "norm", "x:s", name);
    double norm = harness_num(&r, "value");
    *var = norm * norm / (double)n - *mean * *mean;
}

static void test_random_fill(struct harness_peer *p)
{
    struct harness_reply r, r2;
    const long long n = 1000000;
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:s mean:f std:f seed:i", "z", n, "normal", 1.5,
             2.0, 7LL);
    CHECK(harness_num(&r, "size") == n && harness_num(&r, "version") == 1);
    double mean, var;
    moments(p, "z", n, &mean, &var);
    printf("normal(1.5, 2): mean %.5f, std %.5f over %lld samples\n", mean, sqrt(var), n);
    /* Standard errors: 2 / 1000 for the mean, 4 * sqrt(2 / n) for the
     * variance; 5 of them. */
    CHECK_NEAR(mean, 1.5, 0.01);
    CHECK_NEAR(var, 4.0, 0.03);
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:s low:f high:f seed:i", "u", n, "uniform", -3.0,
             5.0, 7LL);
    moments(p, "u", n, &mean, &var);
    printf("uniform(-3, 5): mean %.5f, var %.5f\n", mean, var);
    CHECK_NEAR(mean, 1.0, 5 * 8 / sqrt(12.0 * (double)n));
    CHECK_NEAR(var, 64.0 / 12, 5 * 64 / 12.0 * sqrt(0.8 / (double)n));
    HCALL_OK(p, &r, "read", "tensor:s range:r", "u", 0LL, 65536LL);
    bool inside = r.n_values == 65536;
    for (size_t i = 0; inside && i < r.n_values; i++)
        inside = r.values[i] >= -3.0f && r.values[i] < 5.0f;
    CHECK(inside);
    harness_reply_free(&r);
    /* The same seed gives the same numbers; another seed others; the
     * default seed is 1. */
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:s", "n1", 1000LL, "normal");
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:s seed:i", "n1b", 1000LL, "normal", 1LL);
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:s seed:i", "n2", 1000LL, "normal", 2LL);
    HCALL_OK(p, &r, "read", "tensor:s", "n1");
    HCALL_OK(p, &r2, "read", "tensor:s", "n1b");
    CHECK(r.n_values == 1000 && r2.n_values == 1000 &&
          memcmp(r.values, r2.values, 1000 * sizeof(float)) == 0);
    harness_reply_free(&r2);
    HCALL_OK(p, &r2, "read", "tensor:s", "n2");
    CHECK(r2.n_values == 1000 && memcmp(r.values, r2.values, 1000 * sizeof(float)) != 0);
    harness_reply_free(&r);
    harness_reply_free(&r2);
    HCALL_ERR(p, &r, "tensor: param 'low' goes with fill = \"uniform\" only", "tensor",
              "name:s size:i fill:s low:f", "e", 4LL, "normal", 0.0);
    HCALL_ERR(p, &r, "tensor: param 'std' goes with fill = \"normal\" only", "tensor",
              "name:s size:i fill:s std:f", "e", 4LL, "uniform", 1.0);
    HCALL_ERR(p, &r, "tensor: param 'mean' goes with fill = \"normal\" only", "tensor",
              "name:s size:i fill:f mean:f", "e", 4LL, 1.0, 1.0);
    HCALL_ERR(p, &r, "tensor: param 'seed' goes with fill = \"uniform\" or \"normal\" only",
              "tensor", "name:s size:i seed:i", "e", 4LL, 3LL);
    HCALL_ERR(p, &r, "tensor: params 'low' 2 and 'high' 1: need low <= high", "tensor",
              "name:s size:i fill:s low:f high:f", "e", 4LL, "uniform", 2.0, 1.0);
    HCALL_ERR(p, &r, "tensor: param 'std': -1 is not a finite number >= 0", "tensor",
              "name:s size:i fill:s std:f", "e", 4LL, "normal", -1.0);
    HCALL_ERR(p, &r, "tensor: param 'fill': expected number, got string 'gauss'", "tensor",
              "name:s size:i fill:s", "e", 4LL, "gauss");
    HCALL_OK(p, &r, "drop", "names:l", 3, (const char *[]){"z", "u", "ones"});
}

/* ---- optim on plain tensors ---- */

static void test_optim_tensor(struct harness_peer *p)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:f", "shard", 3LL, 1.0);
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:f", "gshard", 3LL, 0.5);
    HCALL_OK(p, &r, "optim", "tensor:s grad:s method:s lr:f", "shard", "gshard", "sgd", 0.1);
    CHECK(harness_num(&r, "steps") == 1 && harness_num(&r, "version") == 2);
    CHECK(harness_values_are(p, "shard", 3, (float[]){0.95f, 0.95f, 0.95f}));
    /* momentum: v = g, then v = 0.9 v + g: the second step moves 1.9 lr g. */
    HCALL_OK(p, &r, "optim", "tensor:s grad:s method:s lr:f", "shard", "gshard", "momentum", 0.1);
    CHECK(harness_num(&r, "steps") == 1); /* a new method resets the state */
    HCALL_OK(p, &r, "optim", "tensor:s grad:s lr:f", "shard", "gshard", 0.1);
    CHECK(harness_num(&r, "steps") == 2 && harness_num(&r, "version") == 4);
    float want = 0.95f - 0.1f * 0.5f - 0.1f * (0.9f * 0.5f + 0.5f);
    HCALL_OK(p, &r, "read", "tensor:s", "shard");
    CHECK(r.n_values == 3);
    if (r.n_values == 3) CHECK_NEAR(r.values[0], want, 1e-6);
    harness_reply_free(&r);
    /* State per name: another tensor starts at step 1. */
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:f", "other", 3LL, 0.0);
    HCALL_OK(p, &r, "optim", "tensor:s grad:s method:s", "other", "gshard", "adam");
    CHECK(harness_num(&r, "steps") == 1);
    CHECK_NEAR(harness_num(&r, "lr"), 0.001, 1e-9);
    HCALL_OK(p, &r, "optim", "tensor:s grad:s", "shard", "gshard");
    CHECK(harness_num(&r, "steps") == 3); /* shard's momentum state is its own */
    /* A new size restarts the state. */
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:f", "shard", 2LL, 1.0);
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:f", "g2", 2LL, 1.0);
    HCALL_OK(p, &r, "optim", "tensor:s grad:s", "shard", "g2");
    CHECK(harness_num(&r, "steps") == 1);
    HCALL_ERR(p, &r, "optim: tensor 'shard' has 2 parameters; 'shard' has 2, 'gshard' 3", "optim",
              "tensor:s grad:s", "shard", "gshard");
    HCALL_ERR(p, &r, "optim: give one of 'model' (a model's parameters) and 'tensor'", "optim",
              "grad:s", "g2");
    HCALL_ERR(p, &r, "optim: give one of", "optim", "model:s tensor:s", "m", "shard");
    HCALL_ERR(p, &r, "optim: tensor 'nope' not found", "optim", "tensor:s grad:s", "nope", "g2");
}

/* ---- grad same_batch ---- */

static void start_trainer(struct harness_peer *p, const char *node, const char *addr)
{
    struct harness_reply r;
    CHECK(harness_start(p, node, addr, NULL));
    HCALL_OK(p, &r, "dataset", "name:s n:i dim:i classes:i seed:i", "synthetic", 4096LL, 16LL, 4LL,
             3LL);
    HCALL_OK(p, &r, "dataset", "name:s split:s n:i dim:i classes:i seed:i", "synthetic", "test",
             512LL, 16LL, 4LL, 3LL);
    HCALL_OK(p, &r, "model", "name:s arch:s seed:i", "m", "mlp:16-32-4", 5LL);
}

static void test_same_batch(void)
{
    struct harness_peer p, twin;
    struct harness_reply r;
    start_trainer(&p, "sb", "127.0.12.2");
    start_trainer(&twin, "twin", "127.0.12.3");
    HCALL_ERR(&p, &r, "grad: same_batch: this peer has no previous grad", "grad",
              "model:s same_batch:b", "m", 1);
    HCALL_OK(&p, &r, "grad", "model:s batch:i out:s", "m", 32LL, "g1");
    double loss1 = harness_num(&r, "loss");
    HCALL_OK(&p, &r, "eval", "model:s", "m"); /* reads samples through its own scratch */
    HCALL_OK(&p, &r, "grad", "model:s same_batch:b out:s", "m", 1, "g2");
    CHECK_MSG(harness_num(&r, "loss") == loss1, "same batch, loss %.9g then %.9g", loss1,
              harness_num(&r, "loss"));
    CHECK(harness_num(&r, "batch") == 32);
    HCALL_OK(&p, &r, "dot", "x:s y:s", "g1", "g1");
    double g11 = harness_num(&r, "value");
    HCALL_OK(&p, &r, "dot", "x:s y:s", "g1", "g2");
    CHECK(g11 > 0 && harness_num(&r, "value") == g11);
    /* At trial parameters (Armijo): the same batch, another loss. */
    HCALL_OK(&p, &r, "copy", "src:s dst:s", "m", "m_saved");
    HCALL_OK(&p, &r, "axpy", "y:s x:s alpha:f", "m", "g1", -0.5);
    HCALL_OK(&p, &r, "grad", "model:s same_batch:b batch:i out:s", "m", 1, 32LL, "g3");
    CHECK(harness_num(&r, "loss") < loss1);
    HCALL_ERR(&p, &r, "grad: same_batch: batch 16 differs from the previous grad's 32", "grad",
              "model:s same_batch:b batch:i", "m", 1, 16LL);
    HCALL_OK(&p, &r, "copy", "src:s dst:s", "m_saved", "m");
    /* The cursor did not move: p's next batch is the twin's second. */
    HCALL_OK(&twin, &r, "grad", "model:s batch:i", "m", 32LL);
    CHECK(harness_num(&r, "loss") == loss1);
    HCALL_OK(&twin, &r, "grad", "model:s batch:i", "m", 32LL);
    double twin_loss2 = harness_num(&r, "loss");
    HCALL_OK(&p, &r, "grad", "model:s batch:i", "m", 32LL);
    CHECK_MSG(harness_num(&r, "loss") == twin_loss2, "next batch: %.9g, twin's %.9g",
              harness_num(&r, "loss"), twin_loss2);
    CHECK(twin_loss2 != loss1);
    harness_stop(&p);
    harness_stop(&twin);
}

/* ---- background eval ---- */

/* The scheduling policy of the peer's threads: true when one of them runs
 * SCHED_IDLE (policy 5) or at nice 19 (/proc/PID/task/TID/stat fields 41
 * and 19). */
static bool has_idle_thread(pid_t pid)
{
    char dir_path[64];
    snprintf(dir_path, sizeof dir_path, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(dir_path);
    bool found = false;
    for (struct dirent *e; dir && !found && (e = readdir(dir));) {
        if (e->d_name[0] == '.') continue;
        char path[64 + 256 + 8], buf[1024];
        snprintf(path, sizeof path, "%s/%s/stat", dir_path, e->d_name);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')'); /* the comm field may hold spaces */
        long field[48] = {0};
        for (int i = 3; p && i < 48; i++) {
            p = strchr(p + 1, ' ');
            if (p) field[i] = strtol(p + 1, NULL, 10);
        }
        found = field[41] == 5 || field[19] == 19;
    }
    if (dir) closedir(dir);
    return found;
}

static void test_background_eval(void)
{
    struct harness_peer p;
    struct harness_reply r;
    CHECK(harness_start(&p, "bg", "127.0.12.4", NULL));
    HCALL_OK(&p, &r, "dataset", "name:s n:i dim:i classes:i", "synthetic", 1024LL, 128LL, 10LL);
    HCALL_OK(&p, &r, "dataset", "name:s split:s n:i dim:i classes:i", "synthetic", "test", 30000LL,
             128LL, 10LL);
    HCALL_OK(&p, &r, "model", "name:s arch:s", "m", "mlp:128-512-10");
    HCALL_OK(&p, &r, "eval", "model:s limit:i", "m", 2000LL);
    double fg_loss = harness_num(&r, "loss"), fg_acc = harness_num(&r, "accuracy");
    /* The same numbers in the background, of the snapshot: the optim queued
     * right after it changes the model, not what is evaluated. */
    double t0 = harness_now_ms();
    uint32_t bg = harness_request(&p, "eval", "model:s limit:i background:b", "m", 2000LL, 1);
    HCALL_OK(&p, &r, "grad", "model:s batch:i", "m", 64LL);
    HCALL_OK(&p, &r, "optim", "model:s lr:f", "m", 0.5);
    CHECK(harness_wait(&p, bg, &r) && r.ok);
    double seen_ms = harness_now_ms() - t0;
    CHECK(harness_num(&r, "loss") == fg_loss && harness_num(&r, "accuracy") == fg_acc);
    CHECK(harness_num(&r, "samples") == 2000 && harness_num(&r, "version") == 1);
    /* Its queue (the snapshot, then the wait for a thread) and its run both
     * fall between the request and the reply the test saw. */
    double queued = harness_num(&r, "queue_ms"), ran = harness_num(&r, "ms");
    CHECK(harness_num(&r, "cpu_ms") > 0 && queued >= 0 && ran > 0);
    CHECK_MSG(queued + ran <= seen_ms, "queue_ms %g + ms %g in a %g ms round trip", queued, ran,
              seen_ms);
    CHECK(has_idle_thread(p.pid));
    /* A long one (30000 samples) and grads after it: every grad answers
     * before the eval does, and the worker's compute totals do not grow by
     * the eval's CPU time. */
    HCALL_OK(&p, &r, "stats", "");
    double compute_before = harness_num(&r, "compute_ms");
    bg = harness_request(&p, "eval", "model:s background:b", "m", 1);
    enum { GRADS = 5 };
    uint32_t grads[GRADS];
    for (int i = 0; i < GRADS; i++)
        grads[i] = harness_request(&p, "grad", "model:s batch:i", "m", 8LL);
    int grads_first = 0;
    double grads_ms = 0;
    for (int i = 0; i < GRADS; i++) {
        bool in_order = harness_read_reply(&p, &r) && r.msgid == grads[i] && r.ok;
        grads_first += in_order;
        if (in_order) grads_ms += harness_num(&r, "ms");
    }
    CHECK_MSG(grads_first == GRADS, "%d of %d grads answered before the background eval",
              grads_first, GRADS);
    CHECK(harness_read_reply(&p, &r) && r.msgid == bg && r.ok);
    double eval_cpu = harness_num(&r, "cpu_ms"), eval_ms = harness_num(&r, "ms");
    /* The snapshot is a job of the worker's too, inside the eval's queue. */
    double eval_queue = harness_num(&r, "queue_ms");
    CHECK(harness_num(&r, "samples") == 30000 && harness_num(&r, "version") == 2);
    HCALL_OK(&p, &r, "stats", "");
    double compute_growth = harness_num(&r, "compute_ms") - compute_before;
    printf("background eval of 30000 samples: %.0f ms CPU; worker compute meanwhile %.1f ms\n",
           eval_cpu, compute_growth);
    /* The grads' own time and the snapshot's (whatever the load made of
     * them; the snapshot's is within the eval's queue_ms): none of the
     * eval's run, which ran beside them. */
    CHECK_MSG(compute_growth >= grads_ms - 0.5 && compute_growth <= grads_ms + eval_queue + 0.5,
              "worker compute grew %.1f ms, its grads took %.1f ms, the eval queued %.1f ms",
              compute_growth, grads_ms, eval_queue);
    CHECK_MSG(eval_queue < eval_ms,
              "the eval queued %.1f ms and ran %.1f ms: its run is not "
              "told apart from the snapshot",
              eval_queue, eval_ms);
    /* Several run one at a time, in order. */
    uint32_t ids[3];
    for (int i = 0; i < 3; i++)
        ids[i] = harness_request(&p, "eval", "model:s limit:i background:b", "m",
                                 (long long)(100 * (3 - i)), 1);
    for (int i = 0; i < 3; i++) {
        CHECK(harness_read_reply(&p, &r) && r.msgid == ids[i] && r.ok);
        CHECK(harness_num(&r, "samples") == 100 * (3 - i));
    }
    HCALL_ERR(&p, &r, "eval: model 'nope' not found", "eval", "model:s background:b", "nope", 1);
    HCALL_ERR(&p, &r, "eval: no 'valid' split loaded", "eval", "model:s split:s background:b", "m",
              "valid", 1);
    /* Reloading the split while a background eval reads it is safe. */
    bg = harness_request(&p, "eval", "model:s background:b", "m", 1);
    HCALL_OK(&p, &r, "dataset", "name:s split:s n:i dim:i classes:i", "synthetic", "test", 100LL,
             128LL, 10LL);
    CHECK(harness_wait(&p, bg, &r) && r.ok && harness_num(&r, "samples") == 30000);
    /* Shutting down with one queued and one running exits cleanly. */
    harness_request(&p, "eval", "model:s background:b", "m", 1);
    harness_request(&p, "eval", "model:s background:b", "m", 1);
    harness_stop(&p);
}

int main(void)
{
    harness_init();
    struct harness_peer p;
    CHECK(harness_start(&p, "prims", "127.0.12.1", NULL));
    test_random_fill(&p);
    test_optim_tensor(&p);
    harness_stop(&p);
    test_same_batch();
    test_background_eval();
    return check_report();
}

/* test_profile.c — kernels/profile.c: every built-in device profile loads,
 * a profile given as a file parses, bad names and bad files fail with one
 * line naming the profile (and the line), and the step time is the measured
 * one where the profile has it, the FLOP sum otherwise; a layer range's
 * FLOPs (zoo_range_cost) and its pass time (profile_pass_seconds) are the
 * figures written out by hand, and the parts of a split sum to the whole. */
#include "kernels/profile.h"
#include "kernels/zoo.h"
#include "tests/unit/check.h"

static char err[1024];

static struct device_profile *load(const char *name)
{
    struct device_profile *p = NULL;
    CHECK_MSG(profile_lookup(name, &p, err, sizeof err) == 0, "%s: %s", name, err);
    return p;
}

static void test_builtins(void)
{
    static const char *const required[] = {"i5-7500", "rtx2080ti",   "v100", "a100",
                                           "h100",    "jetson-nano", "rpi4"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        int found = 0;
        for (int j = 0; j < profile_count(); j++)
            found |= !strcmp(profile_at(j), required[i]);
        CHECK_MSG(found, "no built-in profile %s", required[i]);
    }
    CHECK(profile_at(profile_count()) == NULL && profile_at(-1) == NULL);
    for (int i = 0; i < profile_count(); i++) {
        struct device_profile *p = load(profile_at(i));
        if (!p) continue;
        CHECK_STREQ(profile_name(p), profile_at(i));
        CHECK(profile_about(p)[0] != '\0');
        for (int op = 0; op < ZOO_OP_COUNT; op++)
            CHECK(profile_rate(p, op) > 0);
        CHECK(profile_bandwidth(p) > 0);
        if (i > 0) CHECK(strcmp(profile_at(i - 1), profile_at(i)) < 0);
        profile_free(p);
    }
}

/* The sum the flops basis must give, written out here independently. */
static double flops_seconds(const struct device_profile *p, const struct zoo_info *z, int batch)
{
    double s = 0;
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        s += (z->cost.forward[op] + z->cost.backward[op]) * batch / profile_rate(p, op);
    return s;
}

static void test_grad_seconds(void)
{
    struct zoo_info resnet50, resnet34;
    CHECK(zoo_lookup("resnet50", &resnet50, err, sizeof err) == 0);
    CHECK(zoo_lookup("resnet34", &resnet34, err, sizeof err) == 0);
    struct device_profile *gpu = load("rtx2080ti"), *cpu = load("i5-7500");
    if (!gpu || !cpu) return;
    const char *basis = NULL;
    /* The adaptive-k paper's Table 4 Cp column. */
    CHECK(profile_grad_seconds(gpu, &resnet50, 32, &basis) == 0.86);
    CHECK_STREQ(basis, "measured");
    CHECK(profile_grad_seconds(cpu, &resnet34, 32, &basis) == 23);
    CHECK_STREQ(basis, "measured");
    /* Another batch, another model: the FLOPs. */
    double s = profile_grad_seconds(gpu, &resnet50, 16, &basis);
    CHECK_STREQ(basis, "flops");
    CHECK_NEAR(s, flops_seconds(gpu, &resnet50, 16), 1e-12);
    CHECK(profile_grad_seconds(gpu, &resnet34, 32, NULL) == flops_seconds(gpu, &resnet34, 32));
    /* Linear in the batch. */
    CHECK_NEAR(profile_grad_seconds(gpu, &resnet34, 64, NULL),
               2 * profile_grad_seconds(gpu, &resnet34, 32, NULL), 1e-12);
    /* Aggregation: 12 bytes per float32 element at the bandwidth. */
    CHECK(profile_add_seconds(cpu, 1000000) == 12e6 / profile_bandwidth(cpu));
    CHECK(profile_add_seconds(cpu, 0) == 0);
    const char *model;
    int batch, n = profile_measured_count(gpu);
    double seconds;
    CHECK(n == 3);
    CHECK(profile_measured_at(gpu, 0, &model, &batch, &seconds) == 0);
    CHECK(!strcmp(model, "resnet50") && batch == 32 && seconds == 0.86);
    CHECK(profile_measured_at(gpu, n, &model, &batch, &seconds) == -1);
    profile_free(gpu);
    profile_free(cpu);
}

static const char good_profile[] = "about A test device   # comment\n"
                                   "rate conv 1e12\nrate depthwise 1e11\nrate dense 2e12\n"
                                   "rate attention 2e12\nrate norm 1e10\n"
                                   "rate elementwise 5e9\nrate embedding 5e9\n"
                                   "bandwidth 4e10\n\n"
                                   "measured cnn:lenet 64 0.002\n";

/* Writes text to a new file under /tmp named NAME.profile; path in buf. */
static int write_profile(const char *text, char *buf, size_t cap)
{
    char dir[] = "/tmp/hn-test-profile-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    snprintf(buf, cap, "%s/mydev.profile", dir);
    FILE *f = fopen(buf, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static void remove_profile(const char *path)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(path, '/') - path), path);
    CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

/* A broken copy of good_profile: `line` (1-based) replaced by `with`; the
 * error names the file, the line `at` (0: the file as a whole), message. */
static void expect_bad(int line, const char *with, int at, const char *message)
{
    char text[1024] = "", path[256], want[300];
    const char *p = good_profile;
    for (int n = 1; *p; n++) {
        size_t len = strcspn(p, "\n");
        if (n == line)
            strcat(text, with);
        else
            strncat(text, p, len);
        strcat(text, "\n");
        p += len + (p[len] == '\n');
    }
    CHECK(write_profile(text, path, sizeof path) == 0);
    struct device_profile *prof = NULL;
    CHECK(profile_lookup(path, &prof, err, sizeof err) == -1 && prof == NULL);
    if (at)
        snprintf(want, sizeof want, "%s:%d: ", path, at);
    else
        snprintf(want, sizeof want, "%s: ", path);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, message);
    CHECK(strchr(err, '\n') == NULL);
    remove_profile(path);
}

static void test_files(void)
{
    char path[256];
    CHECK(write_profile(good_profile, path, sizeof path) == 0);
    struct device_profile *p = load(path);
    if (p) {
        CHECK_STREQ(profile_name(p), "mydev");
        CHECK_STREQ(profile_about(p), "A test device");
        CHECK(profile_rate(p, ZOO_OP_DENSE) == 2e12 && profile_bandwidth(p) == 4e10);
        struct zoo_info lenet;
        const char *basis;
        CHECK(zoo_lookup("cnn:lenet", &lenet, err, sizeof err) == 0);
        CHECK(profile_grad_seconds(p, &lenet, 64, &basis) == 0.002);
        CHECK_STREQ(basis, "measured");
        profile_free(p);
    }
    remove_profile(path);
    expect_bad(3, "rate conv fast", 3, "rate conv: expected one FLOP/s figure > 0");
    expect_bad(3, "rate gemm 1e12", 3, "unknown op kind 'gemm'");
    expect_bad(3, "speed 3", 3, "unknown key 'speed'");
    expect_bad(4, "", 0, "no rate for 'dense'");
    expect_bad(9, "bandwidth -1", 9, "bandwidth: expected bytes/s > 0");
    expect_bad(11, "measured resnet51 32 1", 11, "unknown model 'resnet51'");
    expect_bad(11, "measured resnet50 0 1", 11, "batch '0'");
    expect_bad(11, "measured resnet50 32", 11, "expected MODEL BATCH SECONDS");
    expect_bad(10, "measured cnn:lenet 64 1", 11, "measured cnn:lenet 64: given twice");
}

/* zoo_range_cost: layers of mlp:16-1024-1024-10 written out by hand (2
 * FLOPs a multiply-accumulate; backward twice the forward but for the
 * first layer, which computes no input gradient; bias and ReLU 1 FLOP an
 * output element each way), and every split of real models sums to the
 * whole. */
static void test_range_cost(void)
{
    struct zoo_cost c;
    CHECK(zoo_range_cost("mlp:16-1024-1024-10", 0, 0, &c, err, sizeof err) == 0);
    CHECK(c.forward[ZOO_OP_DENSE] == 2.0 * 16 * 1024 &&
          c.backward[ZOO_OP_DENSE] == 2.0 * 16 * 1024);
    CHECK(c.forward[ZOO_OP_ELEMENTWISE] == 2048 && c.backward[ZOO_OP_ELEMENTWISE] == 2048);
    CHECK(zoo_range_cost("mlp:16-1024-1024-10", 1, 2, &c, err, sizeof err) == 0);
    CHECK(c.forward[ZOO_OP_DENSE] == 2.0 * 1024 * 1024 + 2.0 * 1024 * 10);
    CHECK(c.backward[ZOO_OP_DENSE] == 4.0 * 1024 * 1024 + 4.0 * 1024 * 10);
    CHECK(c.forward[ZOO_OP_ELEMENTWISE] == 2048 + 10 && c.forward[ZOO_OP_CONV] == 0);
    static const struct {
        const char *spec;
        int cuts[4]; /* first layers of the parts, then the layer count */
    } splits[] = {{"mlp:16-1024-1024-10", {0, 1, 2, 3}},
                  {"cnn:lenet", {0, 2, 5, 8}},
                  {"cnn:resnet20", {0, 2, 27, 49}}};
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        struct zoo_info whole;
        struct zoo_cost sum = {{0}, {0}}, part;
        CHECK(zoo_lookup(splits[i].spec, &whole, err, sizeof err) == 0);
        for (int k = 0; k < 3; k++) {
            CHECK_MSG(zoo_range_cost(splits[i].spec, splits[i].cuts[k], splits[i].cuts[k + 1] - 1,
                                     &part, err, sizeof err) == 0,
                      "%s: %s", splits[i].spec, err);
            for (int op = 0; op < ZOO_OP_COUNT; op++) {
                sum.forward[op] += part.forward[op];
                sum.backward[op] += part.backward[op];
            }
        }
        for (int op = 0; op < ZOO_OP_COUNT; op++)
            CHECK_MSG(sum.forward[op] == whole.cost.forward[op] &&
                          sum.backward[op] == whole.cost.backward[op],
                      "%s: op %s: the parts sum to %g / %g, the whole is %g / %g", splits[i].spec,
                      zoo_op_name(op), sum.forward[op], sum.backward[op], whole.cost.forward[op],
                      whole.cost.backward[op]);
    }
    CHECK(zoo_range_cost("mlp:16-1024-10", 0, 2, &c, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "layers 1 to 2");
    CHECK(zoo_range_cost("cnn:resnet20", 3, 11, &c, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "residual block");
    CHECK(zoo_range_cost("resnet50", 0, 1, &c, err, sizeof err) == -1);
}

/* profile_pass_seconds: a range's FLOPs at the profile's rates, exactly
 * the figures written out here; scaled to a measured step, the parts'
 * passes sum to it. */
static void test_pass_seconds(void)
{
    char path[256];
    CHECK(write_profile(good_profile, path, sizeof path) == 0);
    struct device_profile *p = load(path);
    remove_profile(path);
    if (!p) return;
    struct zoo_info mlp, lenet;
    struct zoo_cost c;
    const char *basis = NULL;
    CHECK(zoo_lookup("mlp:16-1024-1024-10", &mlp, err, sizeof err) == 0);
    CHECK(zoo_range_cost("mlp:16-1024-1024-10", 1, 1, &c, err, sizeof err) == 0);
    /* dense at 2e12 FLOP/s, bias and ReLU (elementwise) at 5e9, 96 samples */
    CHECK(profile_pass_seconds(p, &mlp, &c, false, 96, &basis) ==
          2.0 * 1024 * 1024 * 96 / 2e12 + 2048.0 * 96 / 5e9);
    CHECK_STREQ(basis, "flops");
    CHECK(profile_pass_seconds(p, &mlp, &c, true, 96, NULL) ==
          4.0 * 1024 * 1024 * 96 / 2e12 + 2048.0 * 96 / 5e9);
    /* The profile measured cnn:lenet at batch 64 (0.002 s): the parts'
     * forwards and backwards share it by their FLOPs' times. */
    CHECK(zoo_lookup("cnn:lenet", &lenet, err, sizeof err) == 0);
    static const int cuts[] = {0, 2, 5, 8};
    double sum = 0;
    for (int k = 0; k < 3; k++) {
        CHECK(zoo_range_cost("cnn:lenet", cuts[k], cuts[k + 1] - 1, &c, err, sizeof err) == 0);
        sum += profile_pass_seconds(p, &lenet, &c, false, 64, &basis) +
               profile_pass_seconds(p, &lenet, &c, true, 64, NULL);
        CHECK_STREQ(basis, "measured");
    }
    CHECK_NEAR(sum, 0.002, 1e-15);
    profile_free(p);
}

static void test_bad_names(void)
{
    struct device_profile *p = (struct device_profile *)1;
    CHECK(profile_lookup("rtx3090", &p, err, sizeof err) == -1 && p == NULL);
    CHECK_CONTAINS(err, "\"rtx3090\"");
    CHECK_CONTAINS(err, "rtx2080ti");
    CHECK(strchr(err, '\n') == NULL);
    CHECK(profile_lookup("/nonexistent/dev.profile", &p, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "/nonexistent/dev.profile");
    CHECK(profile_lookup("", &p, err, sizeof err) == -1);
}

int main(void)
{
    test_builtins();
    test_grad_seconds();
    test_files();
    test_range_cost();
    test_pass_seconds();
    test_bad_names();
    return check_report();
}

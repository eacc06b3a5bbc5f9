/* test_optim.c — kernels/optim: three steps of every method against values
 * worked out by hand, weight decay, configuration errors, reconfiguration. */
#include "kernels/optim.h"
#include "tests/unit/check.h"

/* Every test starts from p = (1, -2) and applies these three gradients with
 * lr = 0.1 and momentum 0.9. */
static const float grads[3][2] = {{0.5f, -1.0f}, {0.25f, 0.5f}, {-0.5f, 1.0f}};

static void run(enum optim_method method, float weight_decay, const double expect[3][2])
{
    char err[256];
    struct optim_config cfg;
    optim_config_default(&cfg, method);
    cfg.lr = 0.1f;
    cfg.weight_decay = weight_decay;
    struct optim *o;
    CHECK(optim_create(&cfg, 2, &o, err, sizeof err) == 0);
    float p[2] = {1.0f, -2.0f};
    for (int t = 0; t < 3; t++) {
        CHECK(optim_step(o, p, grads[t], 2, err, sizeof err) == 0);
        CHECK_MSG(fabs(p[0] - expect[t][0]) < 2e-6 && fabs(p[1] - expect[t][1]) < 2e-6,
                  "%s step %d: (%.7f, %.7f) expected (%.7f, %.7f)", optim_method_name(method),
                  t + 1, p[0], p[1], expect[t][0], expect[t][1]);
    }
    CHECK(optim_steps(o) == 3);
    optim_destroy(o);
}

static void test_methods(void)
{
    /* sgd: p -= 0.1 g */
    static const double sgd[3][2] = {{0.95, -1.9}, {0.925, -1.95}, {0.975, -2.05}};
    run(OPTIM_SGD, 0, sgd);

    /* momentum: v1 = g1 = (.5, -1); v2 = .9 v1 + g2 = (.7, -.4);
     * v3 = .9 v2 + g3 = (.13, .64); p -= .1 v each step. */
    static const double mom[3][2] = {{0.95, -1.9}, {0.88, -1.86}, {0.867, -1.924}};
    run(OPTIM_MOMENTUM, 0, mom);

    /* nesterov: same v; p -= .1 (g + .9 v): updates (.95, -1.9),
     * (.25 + .63, .5 - .36) = (.88, .14), (-.5 + .117, 1 + .576). */
    static const double nes[3][2] = {{0.905, -1.81}, {0.817, -1.824}, {0.8553, -1.9816}};
    run(OPTIM_NESTEROV, 0, nes);

    /* adam: step 1 moves each coordinate by lr * sign(g) (m^ = g, s^ = g^2).
     * Step 2: m = (.07, -.04), s = (.00031225, .001249); m^ = m / .19,
     * s^ = s / .001999; p -= .1 m^ / sqrt(s^) = (.0932180, -.0266337).
     * Step 3: m = (.013, .064), s = (.00056193775, .002247751), bias
     * corrections 1 / .271 and 1 / .002997001. */
    static const double adam[3][2] = {
        {0.9, -1.9}, {0.8067820, -1.8733663}, {0.7957037, -1.9006360}};
    run(OPTIM_ADAM, 0, adam);

    /* weight decay 0.1 couples into g: g1' = (.5 + .1, -1 - .2) = (.6, -1.2);
     * g2' = (.25 + .094, .5 - .188) = (.344, .312);
     * g3' = (-.5 + .09056, 1 - .19112) = (-.40944, .80888). */
    static const double wd[3][2] = {{0.94, -1.88}, {0.9056, -1.9112}, {0.946544, -1.992088}};
    run(OPTIM_SGD, 0.1f, wd);
}

static void test_errors(void)
{
    char err[256];
    enum optim_method m;
    CHECK(optim_method_parse("adam", &m, err, sizeof err) == 0 && m == OPTIM_ADAM);
    CHECK(optim_method_parse("adagrad", &m, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"adagrad\"");

    struct optim_config cfg;
    struct optim *o;
    optim_config_default(&cfg, OPTIM_MOMENTUM);
    cfg.momentum = 1.5f;
    CHECK(optim_create(&cfg, 4, &o, err, sizeof err) == -1 && o == NULL);
    CHECK_CONTAINS(err, "momentum 1.5");
    optim_config_default(&cfg, OPTIM_SGD);
    cfg.lr = NAN;
    CHECK(optim_create(&cfg, 4, &o, err, sizeof err) == -1);
    optim_config_default(&cfg, OPTIM_ADAM);
    cfg.eps = 0;
    CHECK(optim_create(&cfg, 4, &o, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "eps");

    optim_config_default(&cfg, OPTIM_SGD);
    CHECK(optim_create(&cfg, 4, &o, err, sizeof err) == 0);
    float p[5] = {0}, g[5] = {1, 1, 1, 1, 1};
    CHECK(optim_step(o, p, g, 5, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "5 parameters");
    optim_destroy(o);
}

/* Switching sgd -> momentum starts from a zero velocity; a new lr applies at
 * once; reset forgets the velocity. */
static void test_configure(void)
{
    char err[256];
    struct optim_config cfg;
    struct optim *o;
    optim_config_default(&cfg, OPTIM_SGD);
    cfg.lr = 0.1f;
    CHECK(optim_create(&cfg, 1, &o, err, sizeof err) == 0);
    float p = 1.0f, g = 1.0f;
    CHECK(optim_step(o, &p, &g, 1, err, sizeof err) == 0);
    CHECK_NEAR(p, 0.9, 1e-7);
    cfg.method = OPTIM_MOMENTUM;
    cfg.lr = 0.5f;
    CHECK(optim_configure(o, &cfg, err, sizeof err) == 0);
    CHECK(optim_step(o, &p, &g, 1, err, sizeof err) == 0); /* v = 1 */
    CHECK_NEAR(p, 0.4, 1e-7);
    CHECK(optim_step(o, &p, &g, 1, err, sizeof err) == 0); /* v = 1.9 */
    CHECK_NEAR(p, 0.4 - 0.95, 1e-6);
    optim_reset(o);
    CHECK(optim_step(o, &p, &g, 1, err, sizeof err) == 0); /* v = 1 again */
    CHECK_NEAR(p, 0.4 - 0.95 - 0.5, 1e-6);
    CHECK(optim_config(o)->lr == 0.5f);
    optim_destroy(o);
    optim_destroy(NULL);
}

int main(void)
{
    test_methods();
    test_errors();
    test_configure();
    return check_report();
}

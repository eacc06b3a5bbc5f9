/* test_run.c — the run's bookkeeping (controller/run.h): one clock per run,
 * named by --dilation or by the first network that names one
 * (run_name_dilation), and --set parameters. */
#include "controller/run.h"
#include "tests/unit/check.h"

#include <string.h>

static void test_dilation_first_network_sets(void)
{
    struct run r;
    char msg[512];
    run_init(&r);
    CHECK(r.dilation == 1.0);
    /* The default named again changes nothing, but fixes the clock. */
    CHECK(run_name_dilation(&r, 1, false, "a", msg, sizeof msg) == RUN_DILATION_SET);
    CHECK(run_name_dilation(&r, 4, false, "b", msg, sizeof msg) == RUN_DILATION_CONFLICT);
    CHECK_CONTAINS(msg, "network 'b': dilation 4 differs from the run's 1");
    run_destroy(&r);

    run_init(&r);
    CHECK(run_name_dilation(&r, 4, false, "a", msg, sizeof msg) == RUN_DILATION_SET);
    CHECK(r.dilation == 4);
    CHECK(run_name_dilation(&r, 4, true, "b", msg, sizeof msg) == RUN_DILATION_SET);
    CHECK(run_name_dilation(&r, 2, false, "c", msg, sizeof msg) == RUN_DILATION_CONFLICT);
    CHECK(r.dilation == 4);
    run_destroy(&r);
}

static void test_dilation_fixed_once_started(void)
{
    struct run r;
    char msg[512];
    run_init(&r);
    /* Nobody named one, but a network started at 1: too late to change. */
    CHECK(run_name_dilation(&r, 8, true, "late", msg, sizeof msg) == RUN_DILATION_CONFLICT);
    CHECK_CONTAINS(msg, "network 'late': dilation 8 differs from the run's 1");
    CHECK(r.dilation == 1.0);
    run_destroy(&r);
}

static void test_dilation_cli_wins(void)
{
    struct run r;
    char msg[512];
    run_init(&r);
    r.dilation = 8, r.dilation_from_cli = true;
    CHECK(run_name_dilation(&r, 2, false, "a", msg, sizeof msg) == RUN_DILATION_CLI_WINS);
    CHECK_STREQ(msg, "network 'a': dilation 8 from --dilation replaces the scenario's 2");
    CHECK(run_name_dilation(&r, 8, true, "b", msg, sizeof msg) == RUN_DILATION_SET);
    CHECK(r.dilation == 8);
    run_destroy(&r);
}

static void test_params(void)
{
    struct run r;
    char err[256];
    run_init(&r);
    CHECK(run_set_param(&r, "workers=4", err, sizeof err) == 0);
    CHECK(run_set_param(&r, "workers=8", err, sizeof err) == 0); /* the last wins */
    struct run_param *p = run_find_param(&r, "workers");
    CHECK(p && strcmp(p->value, "8") == 0 && p->from_cli);
    CHECK(run_find_param(&r, "steps") == NULL);
    CHECK(run_set_param(&r, "noequals", err, sizeof err) < 0);
    run_destroy(&r);
}

int main(void)
{
    test_dilation_first_network_sets();
    test_dilation_fixed_once_started();
    test_dilation_cli_wins();
    test_params();
    return check_report();
}

/* test_run.c — the run's bookkeeping (controller/run.h): one clock per run,
 * named by --dilation or by the first network that names one
 * (run_name_dilation), and --set parameters: the names never read and
 * the line that says so (run_unread_params). */
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

/* --set names the scenario never read: one line naming them and what it
 * did read, in the order of the list (--set names first, then reads). */
static void test_unread_params(void)
{
    struct run r;
    char err[256], msg[512];
    run_init(&r);
    CHECK(run_set_param(&r, "stpes=100", err, sizeof err) == 0);
    CHECK(run_set_param(&r, "seconds=2", err, sizeof err) == 0);
    CHECK(run_unread_params(&r, msg, sizeof msg) == 2); /* nothing read yet */
    CHECK_STREQ(msg, "--set stpes=100, seconds=2: the scenario never read 'stpes', 'seconds' "
                     "(it reads no parameter through hn.param)");
    run_note_param(&r, "steps", "10", RUN_PARAM_NUMBER);
    run_note_param(&r, "seconds", "2", RUN_PARAM_NUMBER);
    CHECK(run_note_param_unset(&r, "path") != NULL); /* a nil default, not set */
    CHECK(run_unread_params(&r, msg, sizeof msg) == 1);
    CHECK_STREQ(msg, "--set stpes=100: the scenario never read 'stpes' (it read: seconds, steps, "
                     "path)");
    /* A read of path with a default later gives it a value and a kind. */
    struct run_param *path = run_note_param(&r, "path", "/data", RUN_PARAM_STRING);
    CHECK(path && !path->no_value && strcmp(path->value, "/data") == 0);
    char tiny[24]; /* a line that does not fit is cut, still terminated */
    CHECK(run_unread_params(&r, tiny, sizeof tiny) == 1);
    CHECK(strlen(tiny) == sizeof tiny - 1);
    CHECK(run_set_param(&r, "stpes=1", err, sizeof err) == 0);
    run_note_param(&r, "stpes", "1", RUN_PARAM_NUMBER);
    CHECK(run_unread_params(&r, msg, sizeof msg) == 0 && msg[0] == '\0');
    run_destroy(&r);
}

int main(void)
{
    test_dilation_first_network_sets();
    test_dilation_fixed_once_started();
    test_dilation_cli_wins();
    test_params();
    test_unread_params();
    return check_report();
}

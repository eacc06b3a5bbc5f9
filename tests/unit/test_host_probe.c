/* test_host_probe.c — the kernel's probe run here and now
 * (host_probe_kernel_now, the agent's hello): done once, its result kept
 * for the part's build (host_probe_begin then starts nothing), and the
 * loop attached as host_probe_begin would have, so host_probe_wait may
 * follow. The probe itself needs root (a scratch namespace); without it
 * the result is NULL with the reason, kept the same way. */
#include "controller/host_probe.h"
#include "check.h"

static int waited;

static void on_probed(void *ctx)
{
    (void)ctx;
    waited++;
}

int main(void)
{
    struct ev_loop *loop = ev_default_loop(0);
    char why[256] = "", why2[256] = "";
    CHECK(loop != NULL);
    CHECK(!host_probe_done(HOST_PROBE_KERNEL));
    const struct emu_nl_features *f = host_probe_kernel_now(loop, why, sizeof why);
    CHECK(host_probe_done(HOST_PROBE_KERNEL));
    if (geteuid() == 0) {
        CHECK_MSG(f != NULL, "probe failed as root: %s", why);
        if (f) CHECK(f->available[EMU_NL_FEATURE_VETH]); /* every namespace test needs it */
    } else {
        CHECK_MSG(f == NULL && why[0], "no root, yet a probe result ('%s')", why);
    }
    /* Once: the same result, and a later begin (the build's) starts nothing. */
    CHECK(host_probe_kernel_now(loop, why2, sizeof why2) == f);
    host_probe_begin(loop, HOST_PROBE_KERNEL);
    CHECK(host_probe_kernel(why2, sizeof why2) == f);
    if (!f) CHECK_STREQ(why2, why);
    /* A waiter can be added and dropped: the loop is attached. */
    CHECK(host_probe_wait(loop, HOST_PROBE_KERNEL, on_probed, &waited) == 0);
    host_probe_forget(&waited);
    ev_run(loop, EVRUN_NOWAIT);
    CHECK(waited == 0);
    return check_report();
}

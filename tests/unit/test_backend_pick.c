/* test_backend_pick.c — the "auto" backend decision (controller/backend_pick.h):
 * kernel only with every needed qdisc, user when only TAP devices work, none
 * without a probe or without either; the reason names what is missing. */
#include "controller/backend_pick.h"
#include "tests/unit/check.h"

static struct emu_nl_features all_features(void)
{
    struct emu_nl_features f = {0};
    for (int i = 0; i < EMU_NL_FEATURE_COUNT; i++)
        f.available[i] = 1;
    return f;
}

static void missing(struct emu_nl_features *f, enum emu_nl_feature feature, const char *why)
{
    f->available[feature] = 0;
    snprintf(f->reason[feature], sizeof f->reason[feature], "%s", why);
}

int main(void)
{
    char why[1024];
    struct emu_nl_features f = all_features();

    CHECK(doctor_pick_backend(&f, why, sizeof why) == TOPO_BACKEND_KERNEL);
    CHECK_CONTAINS(why, "netem");

    missing(&f, EMU_NL_FEATURE_HTB, "no sch_htb");
    CHECK(doctor_pick_backend(&f, why, sizeof why) == TOPO_BACKEND_KERNEL); /* tbf will do */
    missing(&f, EMU_NL_FEATURE_TBF, "no sch_tbf");
    CHECK(doctor_pick_backend(&f, why, sizeof why) == TOPO_BACKEND_USER);
    CHECK_CONTAINS(why, "no sch_htb");
    CHECK(backend_pick(&f, BACKEND_NEED_NETEM, why, sizeof why) == TOPO_BACKEND_KERNEL);

    f = all_features();
    missing(&f, EMU_NL_FEATURE_NETEM, "Specified qdisc kind is unknown");
    CHECK(doctor_pick_backend(&f, why, sizeof why) == TOPO_BACKEND_USER);
    CHECK_CONTAINS(why, "lacks netem");
    CHECK_CONTAINS(why, "Specified qdisc kind is unknown");
    /* Links with only bw= can still be shaped in the kernel. */
    CHECK(backend_pick(&f, BACKEND_NEED_RATE | BACKEND_NEED_BRIDGE, why, sizeof why) ==
          TOPO_BACKEND_KERNEL);

    missing(&f, EMU_NL_FEATURE_TUN, "no /dev/net/tun");
    CHECK(doctor_pick_backend(&f, why, sizeof why) == TOPO_BACKEND_NONE);
    CHECK_CONTAINS(why, "no /dev/net/tun");

    f = all_features();
    missing(&f, EMU_NL_FEATURE_BRIDGE, "no bridge module");
    CHECK(doctor_pick_backend(&f, why, sizeof why) == TOPO_BACKEND_NONE);
    CHECK(backend_pick(&f, BACKEND_NEED_RATE | BACKEND_NEED_NETEM, why, sizeof why) ==
          TOPO_BACKEND_KERNEL);

    CHECK(doctor_pick_backend(NULL, why, sizeof why) == TOPO_BACKEND_NONE);
    CHECK_CONTAINS(why, "namespace");
    return check_report();
}

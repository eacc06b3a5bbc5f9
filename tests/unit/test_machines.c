/* test_machines.c — the machines file's parser (topo/machines.c): fields,
 * comments and blank lines, and each bad input's one line naming the file,
 * the line and the value; Slurm's per-node CPU counts. */
#include "check.h"
#include "topo/machines.h"

static char err[512];

static int parse(const char *text, struct topo_machines *m)
{
    memset(m, 0, sizeof *m);
    err[0] = '\0';
    return topo_machines_parse(text, strlen(text), "hosts.txt", m, err, sizeof err);
}

static void good_file(void)
{
    struct topo_machines m;
    const char *text = "# lab machines\n"
                       "\n"
                       "m1 10.0.0.1 cores=24 mem=64 user=alice   # the controller\n"
                       "  m2\t10.0.0.2 cores=8\r\n"
                       "gpu-3.lab fe80::1%eth0 mem=0.5\n"
                       "local 127.0.0.1";
    CHECK_MSG(parse(text, &m) == 0, "%s", err);
    CHECK(m.n == 4);
    if (m.n == 4) {
        CHECK_STREQ(m.v[0].name, "m1");
        CHECK_STREQ(m.v[0].address, "10.0.0.1");
        CHECK(m.v[0].cores == 24);
        CHECK(m.v[0].mem_gib == 64);
        CHECK_STREQ(m.v[0].user, "alice");
        CHECK(m.v[0].line == 3);
        CHECK_STREQ(m.v[1].name, "m2");
        CHECK(m.v[1].cores == 8);
        CHECK(m.v[1].line == 4);
        CHECK_STREQ(m.v[2].address, "fe80::1%eth0");
        CHECK(m.v[2].cores == 0);
        CHECK(m.v[2].mem_gib == 0.5);
        CHECK(topo_machine_capacity(&m.v[2]) == 1);
        CHECK(topo_machine_capacity(&m.v[0]) == 24);
        CHECK(m.v[3].line == 6);
        CHECK(topo_machines_find(&m, "gpu-3.lab") == 2);
        CHECK(topo_machines_find(&m, "m9") == -1);
    }
    topo_machines_free(&m);
}

static void bad(const char *text, const char *expected)
{
    struct topo_machines m;
    CHECK_MSG(parse(text, &m) < 0, "accepted: %s", text);
    CHECK_STREQ(err, expected);
    CHECK(strchr(err, '\n') == NULL);
    topo_machines_free(&m);
}

static void bad_files(void)
{
    bad("m1 10.0.0.1\nm1 10.0.0.2\n", "hosts.txt:2: duplicate machine name (first on line 1) 'm1'");
    bad("m1 10.0.0.1\n\nm2 10.0.0.1\n",
        "hosts.txt:3: duplicate machine address (first on line 1) '10.0.0.1'");
    bad("m1 10.0.0.1 gpus=2\n",
        "hosts.txt:1: unknown key (cores=N, mem=GiB, user=NAME) in 'gpus=2'");
    bad("m1 10.0.0.1 fast\n", "hosts.txt:1: unknown key (cores=N, mem=GiB, user=NAME) in 'fast'");
    bad("m1 10.0.0.1 cores=0\n", "hosts.txt:1: cores must be an integer from 1, got '0'");
    bad("m1 10.0.0.1 cores=4x\n", "hosts.txt:1: cores must be an integer from 1, got '4x'");
    bad("m1 10.0.0.1 mem=-1\n", "hosts.txt:1: mem must be a positive number of GiB, got '-1'");
    bad("m1 10.0.0.1 mem=nan\n", "hosts.txt:1: mem must be a positive number of GiB, got 'nan'");
    bad("m1 10.0.0.1 cores=2 cores=3\n", "hosts.txt:1: repeated key 'cores'");
    bad("# only\n\nm1\n", "hosts.txt:3: no address for machine 'm1'");
    bad("-m 10.0.0.1\n",
        "hosts.txt:1: bad machine name (letters, digits, '_', '-', '.'; at most 63) '-m'");
    bad("m1 10.0.0.1/24\n", "hosts.txt:1: bad address (a host name or IP) '10.0.0.1/24'");
    bad("m1 10.0.0.1 user=a;b\n", "hosts.txt:1: bad user name 'a;b'");
    bad("# nothing\n\n", "hosts.txt: lists no machine");
    bad("m1 10.0.0.1 a=1 b=2 c=3 d=4 e=5 f=6 g=7\n",
        "hosts.txt:1: more than 8 fields: the 9th is 'g=7'");
    struct topo_machines m;
    memset(&m, 0, sizeof m);
    CHECK(topo_machines_parse("m1 1.2.3.4\0x\n", 13, "f", &m, err, sizeof err) < 0);
    CHECK_STREQ(err, "f:1: a NUL byte in the line");
    topo_machines_free(&m);
}

static void added(void)
{
    struct topo_machines m = {.source = "slurm"};
    CHECK(topo_machines_add(&m, "node01", "node01", 4, err, sizeof err) == 0);
    CHECK(topo_machines_add(&m, "node01", "node02", 4, err, sizeof err) < 0);
    CHECK_STREQ(err, "slurm: duplicate machine name 'node01'");
    CHECK(m.n == 1 && m.v[0].cores == 4);
    topo_machines_free(&m);
}

static void slurm_cpus(void)
{
    int c[4] = {0};
    CHECK(topo_machines_slurm_cpus("4(x2),2", c, 3) == 0);
    CHECK(c[0] == 4 && c[1] == 4 && c[2] == 2);
    CHECK(topo_machines_slurm_cpus("8", c, 1) == 0 && c[0] == 8);
    CHECK(topo_machines_slurm_cpus("4(x2)", c, 3) < 0); /* names too few */
    CHECK(topo_machines_slurm_cpus("4(x2", c, 2) < 0);
    CHECK(topo_machines_slurm_cpus("a", c, 1) < 0);
    CHECK(topo_machines_slurm_cpus("2,,2", c, 2) < 0);
}

int main(void)
{
    good_file();
    bad_files();
    added();
    slurm_cpus();
    return check_report();
}

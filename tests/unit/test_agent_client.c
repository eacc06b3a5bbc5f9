/* test_agent_client.c — the command lines controller/agent_client.c starts
 * an agent with (ssh and srun), exactly, and the remote command's shell
 * quoting (a path with a space and a quote survives `sh -c`). */
#include "controller/agent_client.h"
#include "check.h"

#include <stdlib.h>

static void join(char **argv, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    for (char **a = argv; *a && at < cap; a++)
        at += (size_t)snprintf(out + at, cap - at, "%s%s", at ? "|" : "", *a);
}

static void ssh_line(void)
{
    struct topo_machine m = {.name = "m2", .address = "10.250.0.2", .user = "lab"};
    struct agent_client_options o;
    const char *words[] = {"agent", "--machine", "m2", NULL};
    char *argv[32], store[4096], line[4096];
    agent_client_options_default(&o);
    unsetenv("HIERNET_LINKD_PRIORITY"); /* a run's own setting would show in the line */
    o.control_dir = "/run/hiernet/.ssh-1-2-abcdef";
    setenv(AGENT_ENV_REMOTE_BIN, "/opt/hier net/it's/hiernet", 1);
    setenv(AGENT_ENV_SSH_CONFIG, "/etc/cluster_config", 1);
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, sizeof store) == 0);
    join(argv, line, sizeof line);
    CHECK_STREQ(
        line,
        "ssh|-T|-o|BatchMode=yes|-o|ConnectTimeout=15|-F|/etc/"
        "cluster_config|-o|ControlMaster=auto|-o|"
        "ControlPath=/run/hiernet/.ssh-1-2-abcdef/0|-o|ControlPersist=no|-l|lab|--|10.250.0.2|"
        "exec '/opt/hier net/it'\\''s/hiernet' 'agent' '--machine' 'm2'");

    /* without a config, a user or multiplexing */
    unsetenv(AGENT_ENV_SSH_CONFIG);
    m.user[0] = '\0';
    o.control_dir = NULL;
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, sizeof store) == 0);
    join(argv, line, sizeof line);
    CHECK_STREQ(line, "ssh|-T|-o|BatchMode=yes|-o|ConnectTimeout=15|--|10.250.0.2|"
                      "exec '/opt/hier net/it'\\''s/hiernet' 'agent' '--machine' 'm2'");
    /* HIERNET_LINKD_PRIORITY reaches the agent's linkd through env */
    setenv("HIERNET_LINKD_PRIORITY", "7", 1);
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, sizeof store) == 0);
    join(argv, line, sizeof line);
    CHECK_STREQ(line, "ssh|-T|-o|BatchMode=yes|-o|ConnectTimeout=15|--|10.250.0.2|"
                      "exec 'env' 'HIERNET_LINKD_PRIORITY=7' '/opt/hier net/it'\\''s/hiernet' "
                      "'agent' '--machine' 'm2'");
    setenv("HIERNET_LINKD_PRIORITY", "7x", 1); /* refused, not passed on */
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, sizeof store) == -1);
    unsetenv("HIERNET_LINKD_PRIORITY");
    /* too small a store or argv: refused, not cut */
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, 40) == -1);
    CHECK(agent_client_argv(&m, &o, words, argv, 4, store, sizeof store) == -1);
}

static void srun_line(void)
{
    struct topo_machine m = {.name = "node07", .address = "node07"};
    struct agent_client_options o;
    const char *words[] = {"clean", NULL};
    char *argv[32], store[4096], line[4096];
    agent_client_options_default(&o);
    o.slurm = true;
    o.control_dir = "/tmp/unused";
    setenv(AGENT_ENV_REMOTE_BIN, "/usr/bin/hiernet", 1);
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, sizeof store) == 0);
    join(argv, line, sizeof line);
    CHECK_STREQ(line, "srun|-u|--overlap|-N1|-n1|-w|node07|/usr/bin/hiernet|clean");
}

/* The quoted command, run by sh, gives back the words exactly. */
static void quoting_survives_sh(void)
{
    struct topo_machine m = {.name = "m2", .address = "a"};
    struct agent_client_options o;
    const char *words[] = {"it's", "a b", "$HOME", NULL};
    char *argv[32], store[4096], cmd[8192];
    agent_client_options_default(&o);
    setenv(AGENT_ENV_REMOTE_BIN, "/bin/echo", 1);
    CHECK(agent_client_argv(&m, &o, words, argv, 32, store, sizeof store) == 0);
    size_t n = 0;
    while (argv[n])
        n++;
    const char *remote = argv[n - 1]; /* the last word of ssh's: the remote command */
    CHECK(!strncmp(remote, "exec '/bin/echo' ", 17));
    /* sshd hands the command to the login shell: sh reads it from a file */
    char out[256] = "";
    char file[] = "/tmp/hn-agent-client-XXXXXX";
    int fd = mkstemp(file);
    CHECK(fd >= 0 && write(fd, remote, strlen(remote)) == (ssize_t)strlen(remote));
    close(fd);
    snprintf(cmd, sizeof cmd, "sh %s", file);
    FILE *p = popen(cmd, "r");
    CHECK(p && fgets(out, sizeof out, p));
    if (p) pclose(p);
    unlink(file);
    CHECK_STREQ(out, "it's a b $HOME\n");
}

int main(void)
{
    ssh_line();
    srun_line();
    quoting_survives_sh();
    return check_report();
}

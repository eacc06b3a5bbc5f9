/* hosts.c — the machines file or the Slurm allocation, read (see hosts.h). */
#include "controller/hosts.h"

#include "common/growbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* TOPO_MACHINES_MAX machines of 256 bytes a line fit (a line may hold up
 * to 1024: a file of long lines reaches the limit with fewer machines). */
#define HOSTS_FILE_MAX (1u << 20)

static int read_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) return snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno)), -1;
    *text = malloc(HOSTS_FILE_MAX + 1);
    *len = *text ? fread(*text, 1, HOSTS_FILE_MAX + 1, f) : 0;
    int read_errno = ferror(f) ? errno : 0; /* a directory opens but reads EISDIR */
    fclose(f);
    if (!*text) return snprintf(err, errlen, "%s: out of memory", path), -1;
    if (read_errno)
        return snprintf(err, errlen, "%s: cannot read: %s", path, strerror(read_errno)), -1;
    if (*len > HOSTS_FILE_MAX)
        return snprintf(err, errlen, "%s: larger than the limit of 1 MiB", path), -1;
    return 0;
}

static int load_file(const char *path, struct topo_machines *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len, err, errlen);
    if (rc == 0) rc = topo_machines_parse(text, len, path, out, err, errlen);
    free(text);
    return rc;
}

/* The child of scontrol_run: stdout to the pipe; an exec failure's errno
 * goes back through the close-on-exec pipe. */
static void scontrol_child(const char *nodelist, int out, int report)
{
    char *argv[] = {"scontrol", "show", "hostnames", (char *)nodelist, NULL};
    if (dup2(out, STDOUT_FILENO) >= 0) execvp(argv[0], argv);
    int e = errno;
    if (write(report, &e, sizeof e) < 0) _exit(127);
    _exit(127);
}

/* Reads all of fd (NUL-terminated; the caller frees it); NULL when out of
 * memory or past HOSTS_FILE_MAX bytes. */
static char *read_all(int fd)
{
    struct growbuf b;
    char chunk[4096];
    ssize_t n;
    growbuf_init(&b, NULL, 0);
    while ((n = read(fd, chunk, sizeof chunk)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (b.len + (size_t)n > HOSTS_FILE_MAX || !growbuf_append(&b, chunk, (size_t)n)) {
            growbuf_free(&b);
            return NULL;
        }
    }
    if (!growbuf_append(&b, "", 1)) {
        growbuf_free(&b);
        return NULL;
    }
    return b.data;
}

/* Why scontrol gave no host list, or NULL when it did. */
static const char *scontrol_failure(pid_t pid, int exec_errno, const char *text, int status)
{
    if (pid < 0) return "cannot fork";
    if (exec_errno == ENOENT)
        return "scontrol not found in PATH (Slurm's client commands, Debian slurm-client)";
    if (exec_errno) return strerror(exec_errno);
    if (!text) return "out of memory, or more than 1 MiB of host names";
    if (!WIFEXITED(status) || WEXITSTATUS(status)) return "scontrol show hostnames failed";
    return NULL;
}

/* `scontrol show hostnames NODELIST`: its stdout, or NULL with err. */
static char *scontrol_hostnames(const char *nodelist, char *err, size_t errlen)
{
    int out[2], report[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return snprintf(err, errlen, "slurm: pipe: %s", strerror(errno)), NULL;
    if (pipe2(report, O_CLOEXEC) < 0) {
        close(out[0]), close(out[1]);
        return snprintf(err, errlen, "slurm: pipe: %s", strerror(errno)), NULL;
    }
    pid_t pid = fork();
    if (pid == 0) scontrol_child(nodelist, out[1], report[1]);
    close(out[1]);
    close(report[1]);
    char *text = pid > 0 ? read_all(out[0]) : NULL;
    int exec_errno = 0, status = 0;
    if (pid > 0 && read(report[0], &exec_errno, sizeof exec_errno) != sizeof exec_errno)
        exec_errno = 0;
    close(out[0]);
    close(report[0]);
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const char *why = scontrol_failure(pid, exec_errno, text, status);
    if (!why) return text;
    snprintf(err, errlen, "slurm: %s (SLURM_JOB_NODELIST '%s')", why, nodelist);
    free(text);
    return NULL;
}

/* One machine per host name scontrol printed, cores from Slurm when it says. */
static int add_hostnames(struct topo_machines *out, char *text, char *err, size_t errlen)
{
    for (char *save = NULL, *h = strtok_r(text, " \t\r\n", &save); h;
         h = strtok_r(NULL, " \t\r\n", &save))
        if (topo_machines_add(out, h, h, 0, err, errlen) < 0) return -1;
    if (out->n == 0) return snprintf(err, errlen, "slurm: scontrol named no host"), -1;
    const char *spec = getenv("SLURM_JOB_CPUS_PER_NODE");
    if (!spec || !spec[0]) return 0; /* cores unknown: placement weighs machines equally */
    int *cpus = calloc(out->n, sizeof *cpus);
    if (!cpus) return snprintf(err, errlen, "slurm: out of memory"), -1;
    /* A value we cannot read would silently weigh every machine the same:
     * refuse it, naming it, as a bad hosts file line is refused. */
    int rc = topo_machines_slurm_cpus(spec, cpus, out->n);
    if (rc < 0)
        snprintf(err, errlen,
                 "slurm: SLURM_JOB_CPUS_PER_NODE '%s' does not give the cores of the "
                 "allocation's %zu machines (expected e.g. '8(x2),4')",
                 spec, out->n);
    for (size_t i = 0; rc == 0 && i < out->n; i++)
        out->v[i].cores = cpus[i];
    free(cpus);
    return rc;
}

static int load_slurm(struct topo_machines *out, char *err, size_t errlen)
{
    snprintf(out->source, sizeof out->source, "slurm");
    const char *nodelist = getenv("SLURM_JOB_NODELIST");
    if (!nodelist || !nodelist[0])
        return snprintf(err, errlen,
                        "slurm: SLURM_JOB_NODELIST is not set: not inside a Slurm "
                        "allocation (salloc, sbatch)"),
               -1;
    char *text = scontrol_hostnames(nodelist, err, errlen);
    if (!text) return -1;
    int rc = add_hostnames(out, text, err, errlen);
    free(text);
    return rc;
}

/* Whether address is one of this host's interface addresses. */
static bool interface_address(const char *address)
{
    char literal[TOPO_MACHINE_ADDR_MAX];
    snprintf(literal, sizeof literal, "%.*s", (int)strcspn(address, "%"), address);
    struct ifaddrs *list;
    if (getifaddrs(&list) < 0) return false;
    bool found = false;
    for (struct ifaddrs *a = list; a && !found; a = a->ifa_next) {
        char text[INET6_ADDRSTRLEN] = "";
        if (!a->ifa_addr) continue;
        if (a->ifa_addr->sa_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)a->ifa_addr)->sin_addr, text, sizeof text);
        else if (a->ifa_addr->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr, text,
                      sizeof text);
        found = text[0] && strcmp(text, literal) == 0;
    }
    freeifaddrs(list);
    return found;
}

/* name equals this host's name, or its first label (Slurm's short names). */
static bool this_host_name(const char *name, const char *host)
{
    size_t short_len = strcspn(host, ".");
    return strcmp(name, host) == 0 ||
           (strlen(name) == short_len && !strncmp(name, host, short_len));
}

void hosts_mark_local(struct topo_machines *m)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) < 0) host[0] = '\0';
    for (size_t i = 0; i < m->n; i++) {
        struct topo_machine *x = &m->v[i];
        x->local =
            !strcmp(x->name, "local") || !strcmp(x->address, "localhost") ||
            (host[0] && (this_host_name(x->address, host) || this_host_name(x->name, host))) ||
            interface_address(x->address);
    }
}

int hosts_load(const char *spec, struct topo_machines *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!spec[0])
        return snprintf(err, errlen, "an empty name: give a machines file or \"slurm\""), -1;
    int rc = strcmp(spec, "slurm") == 0 ? load_slurm(out, err, errlen)
                                        : load_file(spec, out, err, errlen);
    if (rc == 0) hosts_mark_local(out);
    return rc;
}

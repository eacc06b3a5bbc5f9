/* tcp_counters.c — a node's TCP counters (see tcp_counters.h). */
#include "controller/tcp_counters.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for either file: /proc/net/netstat, the larger, is 4155 bytes under
 * Linux 6.18 (wc -c on the host this was written on); a file that fills
 * the buffer is refused rather than parsed cut short. */
#define PROC_TEXT_MAX 32768

void tcp_counters_values(const struct tcp_counters *c, uint64_t out[TCP_COUNTERS])
{
    out[0] = c->retrans;
    out[1] = c->rtos;
    out[2] = c->fast_retrans;
    out[3] = c->lost_retrans;
    out[4] = c->recoveries;
}

/* The value of column `name` in the table whose two lines (names, then
 * values) start with `prefix` ("Tcp:"); -1 when absent. */
static int table_value(const char *text, const char *prefix, const char *name, uint64_t *out)
{
    size_t plen = strlen(prefix);
    const char *head = text;
    while (head && strncmp(head, prefix, plen) != 0) {
        head = strchr(head, '\n');
        if (head) head++;
    }
    const char *values = head ? strchr(head, '\n') : NULL;
    if (!values || strncmp(++values, prefix, plen) != 0) return -1;
    const char *h = head + plen, *v = values + plen;
    size_t nlen = strlen(name);
    while (*h && *h != '\n') {
        h += strspn(h, " ");
        v += strspn(v, " ");
        size_t hlen = strcspn(h, " \n");
        if (hlen == nlen && strncmp(h, name, nlen) == 0) {
            char *end;
            *out = strtoull(v, &end, 10);
            return end > v ? 0 : -1;
        }
        h += hlen;
        v += strcspn(v, " \n");
    }
    return -1;
}

int tcp_counters_parse(const char *snmp, const char *netstat, struct tcp_counters *out, char *err,
                       size_t errlen)
{
    static const struct {
        int snmp; /* 1: Tcp in snmp; 0: TcpExt in netstat */
        const char *name;
        size_t offset;
    } fields[] = {
        {1, "RetransSegs", offsetof(struct tcp_counters, retrans)},
        {0, "TCPTimeouts", offsetof(struct tcp_counters, rtos)},
        {0, "TCPFastRetrans", offsetof(struct tcp_counters, fast_retrans)},
        {0, "TCPLostRetransmit", offsetof(struct tcp_counters, lost_retrans)},
    };
    *out = (struct tcp_counters){0};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        uint64_t *slot = (uint64_t *)((char *)out + fields[i].offset);
        const char *text = fields[i].snmp ? snmp : netstat;
        if (table_value(text, fields[i].snmp ? "Tcp:" : "TcpExt:", fields[i].name, slot) < 0)
            return snprintf(err, errlen, "no %s %s counter", fields[i].snmp ? "Tcp" : "TcpExt",
                            fields[i].name),
                   -1;
    }
    uint64_t sack = 0, reno = 0; /* absent: none of that kind */
    table_value(netstat, "TcpExt:", "TCPSackRecovery", &sack);
    table_value(netstat, "TcpExt:", "TCPRenoRecovery", &reno);
    out->recoveries = sack + reno;
    return 0;
}

/* The whole of a small /proc file, NUL-terminated, into buf. */
static int read_text(const char *path, char *buf, size_t cap, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
        return e == ENOENT || e == ESRCH ? -2 : -1; /* the process is gone */
    }
    size_t n = fread(buf, 1, cap - 1, f);
    int failed = ferror(f) ? errno : 0;
    bool cut = n == cap - 1 && fgetc(f) != EOF;
    fclose(f);
    if (failed) return snprintf(err, errlen, "cannot read %s: %s", path, strerror(failed)), -1;
    if (cut) return snprintf(err, errlen, "%s is larger than %zu bytes", path, cap - 1), -1;
    buf[n] = '\0';
    return 0;
}

int tcp_counters_read(pid_t pid, struct tcp_counters *out, char *err, size_t errlen)
{
    char *snmp = malloc(PROC_TEXT_MAX), *netstat = malloc(PROC_TEXT_MAX);
    char path[64];
    int rc = -1;
    if (!snmp || !netstat) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "/proc/%d/net/snmp", (int)pid);
    if ((rc = read_text(path, snmp, PROC_TEXT_MAX, err, errlen)) < 0) goto done;
    snprintf(path, sizeof path, "/proc/%d/net/netstat", (int)pid);
    if ((rc = read_text(path, netstat, PROC_TEXT_MAX, err, errlen)) < 0) goto done;
    rc = tcp_counters_parse(snmp, netstat, out, err, errlen);
done:
    free(snmp);
    free(netstat);
    return rc;
}

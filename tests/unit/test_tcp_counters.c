/* test_tcp_counters.c — the TCP counters' parser (controller/tcp_counters.h)
 * on fixed /proc/net/snmp and /proc/net/netstat texts in the kernel's
 * layout (header line, value line, same prefix), and the reader on this
 * process's own namespace. */
#include "check.h"
#include "controller/tcp_counters.h"

#include <string.h>
#include <unistd.h>

static const char snmp[] =
    "Ip: Forwarding DefaultTTL InReceives\n"
    "Ip: 1 64 1234\n"
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails "
    "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
    "Tcp: 1 200 120000 -1 64 64 0 0 128 999 888 9312 0 3 0\n"
    "Udp: InDatagrams NoPorts\n"
    "Udp: 5 0\n";

static const char netstat[] =
    "TcpExt: SyncookiesSent TCPTimeouts TCPLostRetransmit TCPRenoRecovery TCPSackRecovery "
    "TCPFastRetrans TCPSpuriousRTOs\n"
    "TcpExt: 0 417 12 2 40 8800 5\n"
    "IpExt: InNoRoutes InTruncatedPkts\n"
    "IpExt: 0 0\n";

static void test_parse(void)
{
    struct tcp_counters c;
    char err[128] = "";
    CHECK(tcp_counters_parse(snmp, netstat, &c, err, sizeof err) == 0);
    CHECK(c.retrans == 9312 && c.rtos == 417 && c.fast_retrans == 8800);
    CHECK(c.lost_retrans == 12 && c.recoveries == 42);
    uint64_t v[TCP_COUNTERS];
    tcp_counters_values(&c, v);
    CHECK(v[0] == 9312 && v[1] == 417 && v[2] == 8800 && v[3] == 12 && v[4] == 42);
    /* A table without its value line, or a counter the kernel lacks, is named. */
    CHECK(tcp_counters_parse("Tcp: RetransSegs\n", netstat, &c, err, sizeof err) < 0);
    CHECK_STREQ(err, "no Tcp RetransSegs counter");
    CHECK(tcp_counters_parse(snmp, "TcpExt: TCPTimeouts\nTcpExt: 3\n", &c, err, sizeof err) < 0);
    CHECK_STREQ(err, "no TcpExt TCPFastRetrans counter");
    /* "TcpExt:" is not "Tcp:". */
    CHECK(tcp_counters_parse(netstat, netstat, &c, err, sizeof err) < 0);
    CHECK_STREQ(err, "no Tcp RetransSegs counter");
}

/* Returns 0 when it could not run (main reports the skip). */
static int test_read_self(void)
{
    struct tcp_counters c;
    char err[128] = "";
    if (access("/proc/self/net/netstat", R_OK) != 0) return 0;
    CHECK_MSG(tcp_counters_read(getpid(), &c, err, sizeof err) == 0, "%s", err);
    CHECK(tcp_counters_read(-5, &c, err, sizeof err) == -2); /* no such process: gone */
    CHECK_CONTAINS(err, "cannot open /proc/-5/net/snmp");
    return 1;
}

int main(void)
{
    test_parse();
    int read_ran = test_read_self();
    /* A part left out is a skip, not a pass; the parser's checks still fail it. */
    int status = check_report();
    if (status || read_ran) return status;
    CHECK_SKIP("the reader not run: no /proc/self/net/netstat");
}

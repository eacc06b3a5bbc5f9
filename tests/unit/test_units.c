/* test_units.c — the unit parser of link parameters (topo/units.c): good
 * values with their exact results, bad values with their exact messages. */
#include "check.h"
#include "topo/units.h"

static char err[256];

static uint64_t rate(const char *text)
{
    uint64_t value = 0;
    err[0] = '\0';
    CHECK_MSG(topo_units_parse_rate(text, &value, err, sizeof err) == 0, "%s: %s", text, err);
    return value;
}

static uint64_t time_ns(const char *text)
{
    uint64_t value = 0;
    err[0] = '\0';
    CHECK_MSG(topo_units_parse_time(text, &value, err, sizeof err) == 0, "%s: %s", text, err);
    return value;
}

static double loss(const char *text)
{
    double value = -1;
    err[0] = '\0';
    CHECK_MSG(topo_units_parse_loss(text, &value, err, sizeof err) == 0, "%s: %s", text, err);
    return value;
}

static struct topo_units_queue queue(const char *text)
{
    struct topo_units_queue value = {0};
    err[0] = '\0';
    CHECK_MSG(topo_units_parse_queue(text, &value, err, sizeof err) == 0, "%s: %s", text, err);
    return value;
}

/* Each bad value must fail with exactly this message. */
#define CHECK_BAD(parse, text, out, message)                                                       \
    do {                                                                                           \
        err[0] = '\0';                                                                             \
        CHECK_MSG(parse(text, out, err, sizeof err) == -1, "%s accepted", (const char *)text);     \
        CHECK_STREQ(err, message);                                                                 \
    } while (0)

static void test_rates(void)
{
    CHECK(rate("10Mbit") == 10000000ULL);
    CHECK(rate("1Gbit") == 1000000000ULL);
    CHECK(rate("1.5Gbit") == 1500000000ULL);
    CHECK(rate("100Kbit") == 100000ULL);
    CHECK(rate("100kbit") == 100000ULL);
    CHECK(rate("20mbit") == 20000000ULL);
    CHECK(rate("500bit") == 500ULL);
    CHECK(rate("2Tbit") == 2000000000000ULL);
    CHECK(rate("1000000") == 1000000ULL);
    CHECK(rate("1e6") == 1000000ULL);
    CHECK(rate("10 Mbit") == 10000000ULL);
    CHECK(rate("0.001Mbit") == 1000ULL);
    CHECK(rate("10Tbit") == 10000000000000ULL);
}

static void test_bad_rates(void)
{
    uint64_t v;
    const char *expect =
        "expected a number with unit bit, Kbit, Mbit, Gbit or Tbit (e.g. \"10Mbit\")";
    char message[256];

    snprintf(message, sizeof message, "bad rate \"10Mbps\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "10Mbps", &v, message);
    snprintf(message, sizeof message, "bad rate \"fast\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "fast", &v, message);
    snprintf(message, sizeof message, "bad rate \"\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "", &v, message);
    snprintf(message, sizeof message, "bad rate \" 10Mbit\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, " 10Mbit", &v, message);
    snprintf(message, sizeof message, "bad rate \"10Mbit \": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "10Mbit ", &v, message);
    snprintf(message, sizeof message, "bad rate \"0x10Mbit\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "0x10Mbit", &v, message);
    snprintf(message, sizeof message, "bad rate \"inf\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "inf", &v, message);
    snprintf(message, sizeof message, "bad rate \"1e\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "1e", &v, message);
    snprintf(message, sizeof message, "bad rate \"10 \": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "10 ", &v, message);
    CHECK_BAD(topo_units_parse_rate, "-5Mbit", &v, "bad rate \"-5Mbit\": must be positive");
    CHECK_BAD(topo_units_parse_rate, "0Mbit", &v, "bad rate \"0Mbit\": must be positive");
    CHECK_BAD(topo_units_parse_rate, "0.1bit", &v, "bad rate \"0.1bit\": must be positive");
    CHECK_BAD(topo_units_parse_rate, "11Tbit", &v,
              "bad rate \"11Tbit\": above the maximum of 10Tbit");
    CHECK_BAD(topo_units_parse_rate, "1e400", &v,
              "bad rate \"1e400\": above the maximum of 10Tbit");
    snprintf(message, sizeof message, "bad rate \"%s\": %s", "99999999999999999999", expect);
    CHECK_BAD(topo_units_parse_rate, "99999999999999999999", &v, message);
    /* Control characters never reach the one-line message. */
    snprintf(message, sizeof message, "bad rate \"1\?\?Mbit\": %s", expect);
    CHECK_BAD(topo_units_parse_rate, "1\n\tMbit", &v, message);
    /* Long values are cut. */
    snprintf(message, sizeof message, "bad rate \"%s...\": %s",
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", expect);
    CHECK_BAD(topo_units_parse_rate,
              "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", &v,
              message);
}

static void test_times(void)
{
    CHECK(time_ns("5ms") == 5000000ULL);
    CHECK(time_ns("100us") == 100000ULL);
    CHECK(time_ns("1s") == 1000000000ULL);
    CHECK(time_ns("2") == 2000000000ULL);
    CHECK(time_ns("0.5") == 500000000ULL);
    CHECK(time_ns("250ns") == 250ULL);
    CHECK(time_ns("0.1ms") == 100000ULL);
    CHECK(time_ns("1.5us") == 1500ULL);
    CHECK(time_ns("0") == 0ULL);
    CHECK(time_ns("0ms") == 0ULL);
    CHECK(time_ns("10 ms") == 10000000ULL);
    CHECK(time_ns("5MS") == 5000000ULL);
    CHECK(time_ns("3600s") == 3600000000000ULL);
    CHECK(time_ns("1.0004ns") == 1ULL); /* rounds to the nearest nanosecond */
}

static void test_bad_times(void)
{
    uint64_t v;
    const char *expect = "expected a number with unit ns, us, ms or s (e.g. \"5ms\")";
    char message[256];

    CHECK_BAD(topo_units_parse_time, "-5ms", &v, "bad time \"-5ms\": must not be negative");
    snprintf(message, sizeof message, "bad time \"5 sec\": %s", expect);
    CHECK_BAD(topo_units_parse_time, "5 sec", &v, message);
    snprintf(message, sizeof message, "bad time \"5m\": %s", expect);
    CHECK_BAD(topo_units_parse_time, "5m", &v, message);
    snprintf(message, sizeof message, "bad time \"ms\": %s", expect);
    CHECK_BAD(topo_units_parse_time, "ms", &v, message);
    snprintf(message, sizeof message, "bad time \"5ms5\": %s", expect);
    CHECK_BAD(topo_units_parse_time, "5ms5", &v, message);
    snprintf(message, sizeof message, "bad time \".\": %s", expect);
    CHECK_BAD(topo_units_parse_time, ".", &v, message);
    CHECK_BAD(topo_units_parse_time, "3601s", &v, "bad time \"3601s\": above the maximum of 3600s");
    err[0] = '\0';
    CHECK(topo_units_parse_time(NULL, &v, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "bad time \"\"");
}

static void test_loss(void)
{
    CHECK_NEAR(loss("0.5%"), 0.005, 1e-15);
    CHECK_NEAR(loss("1%"), 0.01, 1e-15);
    CHECK_NEAR(loss("100%"), 1.0, 0);
    CHECK_NEAR(loss("0%"), 0.0, 0);
    CHECK_NEAR(loss("0.005"), 0.005, 1e-15);
    CHECK_NEAR(loss("1"), 1.0, 0);
    CHECK_NEAR(loss("0"), 0.0, 0);
    CHECK_NEAR(loss("1e-3"), 0.001, 1e-15);
}

static void test_bad_loss(void)
{
    double v;
    const char *expect = "expected a percentage like \"0.5%\" or a fraction in [0, 1]";
    char message[256];

    CHECK_BAD(topo_units_parse_loss, "2", &v, "bad loss \"2\": a fraction must be between 0 and 1");
    CHECK_BAD(topo_units_parse_loss, "150%", &v, "bad loss \"150%\": must be between 0% and 100%");
    CHECK_BAD(topo_units_parse_loss, "-1%", &v, "bad loss \"-1%\": must be between 0% and 100%");
    snprintf(message, sizeof message, "bad loss \"5 %%\": %s", expect);
    CHECK_BAD(topo_units_parse_loss, "5 %", &v, message);
    snprintf(message, sizeof message, "bad loss \"%%\": %s", expect);
    CHECK_BAD(topo_units_parse_loss, "%", &v, message);
    snprintf(message, sizeof message, "bad loss \"1%%%%\": %s", expect);
    CHECK_BAD(topo_units_parse_loss, "1%%", &v, message);
}

static void test_queues(void)
{
    struct topo_units_queue q = queue("100");
    CHECK(q.packets == 100 && q.bytes == 0);
    q = queue("64KB");
    CHECK(q.packets == 0 && q.bytes == 64000);
    q = queue("64KiB");
    CHECK(q.packets == 0 && q.bytes == 65536);
    q = queue("1.5MB");
    CHECK(q.bytes == 1500000);
    q = queue("1MiB");
    CHECK(q.bytes == 1048576);
    q = queue("1500B");
    CHECK(q.bytes == 1500);
    q = queue("1500 b");
    CHECK(q.bytes == 1500);
    q = queue("1.5KiB");
    CHECK(q.bytes == 1536);
    q = queue("1e3");
    CHECK(q.packets == 1000);
}

/* Multiples of the bandwidth-delay product: the multiple only, no size
 * yet (the binding resolves it from the link's rate and delay). */
static void test_bdp_queues(void)
{
    struct topo_units_queue q = {.packets = 7, .bytes = 9};
    char err[256];
    CHECK(topo_units_parse_queue("bdp", &q, err, sizeof err) == 0);
    CHECK(q.bdp == 1 && q.packets == 0 && q.bytes == 0);
    CHECK(topo_units_parse_queue("2BDP", &q, err, sizeof err) == 0 && q.bdp == 2);
    CHECK(topo_units_parse_queue("0.5 bdp", &q, err, sizeof err) == 0 && q.bdp == 0.5);
    CHECK(topo_units_parse_queue("100", &q, err, sizeof err) == 0);
    CHECK(q.bdp == 0 && q.packets == 100); /* a plain queue forgets the multiple */
}

static void test_bad_queues(void)
{
    struct topo_units_queue v;
    const char *expect =
        "expected a packet count like \"100\", a size with unit B, KB, MB, KiB or MiB, or a "
        "bandwidth-delay multiple like \"bdp\" or \"2bdp\"";
    char message[256];

    snprintf(message, sizeof message, "bad queue \"64Kbit\": %s", expect);
    CHECK_BAD(topo_units_parse_queue, "64Kbit", &v, message);
    snprintf(message, sizeof message, "bad queue \"lots\": %s", expect);
    CHECK_BAD(topo_units_parse_queue, "lots", &v, message);
    CHECK_BAD(topo_units_parse_queue, "0", &v, "bad queue \"0\": must be positive");
    CHECK_BAD(topo_units_parse_queue, "-5", &v, "bad queue \"-5\": must be positive");
    CHECK_BAD(topo_units_parse_queue, "10.5", &v,
              "bad queue \"10.5\": a packet count must be a whole number");
    CHECK_BAD(topo_units_parse_queue, "2e9", &v,
              "bad queue \"2e9\": above the maximum of 1000000000");
    snprintf(message, sizeof message, "bad queue \"2MiB0\": %s", expect);
    CHECK_BAD(topo_units_parse_queue, "2MiB0", &v, message);
    const char *bdp =
        "a bandwidth-delay multiple must be a number above 0, at most 1000, like \"2bdp\"";
    snprintf(message, sizeof message, "bad queue \"0bdp\": %s", bdp);
    CHECK_BAD(topo_units_parse_queue, "0bdp", &v, message);
    snprintf(message, sizeof message, "bad queue \"-1bdp\": %s", bdp);
    CHECK_BAD(topo_units_parse_queue, "-1bdp", &v, message);
    snprintf(message, sizeof message, "bad queue \"xbdp\": %s", bdp);
    CHECK_BAD(topo_units_parse_queue, "xbdp", &v, message);
    snprintf(message, sizeof message, "bad queue \"2000bdp\": %s", bdp);
    CHECK_BAD(topo_units_parse_queue, "2000bdp", &v, message);
}

static void test_format(void)
{
    char buf[32];
    topo_units_format_rate(10000000, buf, sizeof buf);
    CHECK_STREQ(buf, "10Mbit");
    topo_units_format_rate(1500000000, buf, sizeof buf);
    CHECK_STREQ(buf, "1.5Gbit");
    topo_units_format_rate(999, buf, sizeof buf);
    CHECK_STREQ(buf, "999bit");
    topo_units_format_time(5000000, buf, sizeof buf);
    CHECK_STREQ(buf, "5ms");
    topo_units_format_time(1500, buf, sizeof buf);
    CHECK_STREQ(buf, "1.5us");
    topo_units_format_time(0, buf, sizeof buf);
    CHECK_STREQ(buf, "0ns");
    topo_units_format_time(2000000000, buf, sizeof buf);
    CHECK_STREQ(buf, "2s");
}

int main(void)
{
    test_rates();
    test_bad_rates();
    test_times();
    test_bad_times();
    test_loss();
    test_bad_loss();
    test_queues();
    test_bad_queues();
    test_bdp_queues();
    test_format();
    return check_report();
}

/* test_trace.c — link traces: the CSV and Mahimahi parsers (topo/trace.c)
 * with their exact messages for bad input, the values at a time (steps,
 * linear interpolation, loops) against values computed here, the times of
 * the next change, and the player (controller/trace_player.c) on a real
 * event loop: the changes it applies, twice alike; and the wire form
 * (topo/trace_wire.c) there and back, and its refusals. */
#include "check.h"
#include "controller/trace_player.h"
#include "topo/trace.h"
#include "topo/trace_wire.h"

#include <ev.h>
#include <math.h>

static char err[512];

static struct topo_trace csv(const char *text)
{
    struct topo_trace t;
    err[0] = '\0';
    CHECK_MSG(topo_trace_parse_csv(text, "up.csv", &t, err, sizeof err) == 0, "%s: %s", text, err);
    return t;
}

static void csv_bad(const char *text, const char *message)
{
    struct topo_trace t;
    err[0] = '\0';
    CHECK_MSG(topo_trace_parse_csv(text, "up.csv", &t, err, sizeof err) < 0, "accepted: %s", text);
    CHECK_MSG(strcmp(err, message) == 0, "%s: got '%s', want '%s'", text, err, message);
}

static void mahimahi_bad(const char *text, const char *message)
{
    struct topo_trace t;
    err[0] = '\0';
    CHECK_MSG(topo_trace_parse_mahimahi(text, "cell.up", 0.1, &t, err, sizeof err) < 0,
              "accepted: %s", text);
    CHECK_MSG(strcmp(err, message) == 0, "%s: got '%s', want '%s'", text, err, message);
}

static uint64_t rate_at(const struct topo_trace *t, enum topo_trace_interp i, bool loop, double s)
{
    struct topo_trace_sample v;
    topo_trace_at(t, i, loop, s, &v);
    return v.rate_bps;
}

static void test_csv_parse(void)
{
    struct topo_trace t =
        csv("# a comment\nt,bw,delay,loss\n0, 12Mbit, 10ms, 1%\n\n1.5,3000000,0.02,0.5\n");
    CHECK(t.n_samples == 2 && t.has_delay && t.has_loss);
    CHECK(t.samples[0].rate_bps == 12000000 && t.samples[0].delay_ns == 10000000);
    CHECK(fabs(t.samples[0].loss - 0.01) < 1e-12);
    CHECK(t.samples[1].t_s == 1.5 && t.samples[1].rate_bps == 3000000);
    CHECK(t.samples[1].delay_ns == 20000000 && t.samples[1].loss == 0.5);
    CHECK(t.period_s == 3.0); /* 1.5 + the last step's 1.5 */
    topo_trace_free(&t);
    t = csv("0,1Mbit\n");
    CHECK(t.n_samples == 1 && !t.has_delay && !t.has_loss && t.period_s == 0);
    topo_trace_free(&t);
}

static void test_csv_bad(void)
{
    csv_bad("0,10Mbit\n2,5Mbit\n1,3Mbit\n", "up.csv:3: time goes backwards (1 after 2)");
    csv_bad("0,10Mbit\n0,5Mbit\n", "up.csv:2: time repeats (0 after 0)");
    csv_bad("t,bw\n0,-5Mbit\n", "up.csv:2: negative rate '-5Mbit'");
    csv_bad(
        "0,10Mbit\n1,fast\n",
        "up.csv:2: bad rate \"fast\": expected a number with unit bit, Kbit, Mbit, Gbit or Tbit "
        "(e.g. \"10Mbit\")");
    csv_bad("0,10Mbit\n1x,5Mbit\n", "up.csv:2: time '1x' is not a number of seconds >= 0");
    csv_bad("0,10Mbit,5ms\n1,5Mbit\n", "up.csv:2: 2 fields, the first row has 3");
    csv_bad("0\n", "up.csv:1: one field: expected t,bw[,delay][,loss]");
    csv_bad("0,1Mbit,1ms,1%,x\n", "up.csv:1: too many fields: expected t,bw[,delay][,loss]");
    csv_bad("", "up.csv: empty trace: no sample");
    csv_bad("t,bw\n# nothing\n", "up.csv: empty trace: no sample");
}

/* Steps, linear interpolation and loops, against values computed here. */
static void test_values(void)
{
    struct topo_trace t = csv("0,10Mbit\n1,20Mbit\n3,4Mbit\n");
    CHECK(t.period_s == 5.0);
    CHECK(rate_at(&t, TOPO_TRACE_STEP, false, 0.999) == 10000000);
    CHECK(rate_at(&t, TOPO_TRACE_STEP, false, 1.0) == 20000000);
    CHECK(rate_at(&t, TOPO_TRACE_STEP, false, 99) == 4000000);
    CHECK(rate_at(&t, TOPO_TRACE_STEP, true, 5.5) == 10000000);
    CHECK(rate_at(&t, TOPO_TRACE_STEP, true, 8.2) == 4000000);
    CHECK(rate_at(&t, TOPO_TRACE_LINEAR, false, 0.25) == 12500000);
    CHECK(rate_at(&t, TOPO_TRACE_LINEAR, false, 2.0) == 12000000);
    CHECK(rate_at(&t, TOPO_TRACE_LINEAR, false, 4.0) == 4000000);
    /* looped: from 4 Mbit at 3 s to 10 Mbit at 5 s (the next round's 0) */
    CHECK(rate_at(&t, TOPO_TRACE_LINEAR, true, 4.0) == 7000000);
    CHECK(rate_at(&t, TOPO_TRACE_LINEAR, true, 6.5) == 16000000);
    /* next changes */
    CHECK(topo_trace_next_change(&t, TOPO_TRACE_STEP, false, 0, 0.1) == 1.0);
    CHECK(topo_trace_next_change(&t, TOPO_TRACE_STEP, false, 1.0, 0.1) == 3.0);
    CHECK(isinf(topo_trace_next_change(&t, TOPO_TRACE_STEP, false, 3.0, 0.1)));
    CHECK(topo_trace_next_change(&t, TOPO_TRACE_STEP, true, 3.0, 0.1) == 5.0);
    CHECK(topo_trace_next_change(&t, TOPO_TRACE_STEP, true, 5.0, 0.1) == 6.0);
    CHECK(fabs(topo_trace_next_change(&t, TOPO_TRACE_LINEAR, false, 1.0, 0.25) - 1.25) < 1e-12);
    CHECK(topo_trace_next_change(&t, TOPO_TRACE_LINEAR, false, 2.9, 0.25) == 3.0);
    topo_trace_free(&t);
    /* a flat segment is one change, not one per step */
    t = csv("0,10Mbit\n2,10Mbit\n3,20Mbit\n");
    CHECK(topo_trace_next_change(&t, TOPO_TRACE_LINEAR, false, 0, 0.25) == 2.0);
    topo_trace_free(&t);
}

static void test_mahimahi(void)
{
    struct topo_trace t;
    /* 200 ms: 10 opportunities in the first 100 ms, 5 in the second */
    const char *text = "1\n1\n10\n20\n30\n40\n50\n60\n70\n99\n110\n120\n150\n180\n200\n";
    CHECK_MSG(topo_trace_parse_mahimahi(text, "cell.up", 0.1, &t, err, sizeof err) == 0, "%s", err);
    CHECK(t.n_opportunities == 15 && t.period_s == 0.2 && t.n_samples == 2);
    /* the opportunity at 200 ms is the next round's at 0: 11 in bin 0 */
    CHECK(t.samples[0].rate_bps == 11 * 1514 * 8 * 10);
    CHECK(t.samples[1].rate_bps == 4 * 1514 * 8 * 10);
    CHECK(t.samples[1].t_s == 0.1);
    topo_trace_free(&t);
    /* a bin without opportunities is 1 Kbit/s, never "unlimited"; the
     * last bin is 50 ms wide */
    CHECK(topo_trace_parse_mahimahi("250\n", "cell.up", 0.1, &t, err, sizeof err) == 0);
    CHECK(t.n_samples == 3 && t.samples[0].rate_bps == 1514 * 8 * 10);
    CHECK(t.samples[1].rate_bps == 1000 && t.samples[2].rate_bps == 1000);
    topo_trace_free(&t);
    CHECK(topo_trace_parse_mahimahi("50\n240\n250\n", "cell.up", 0.1, &t, err, sizeof err) == 0);
    CHECK(t.n_samples == 3 && t.samples[2].rate_bps == 1514 * 8 * 20); /* 1 in 50 ms */
    topo_trace_free(&t);
    mahimahi_bad("1\n5\n3\n", "cell.up:3: time goes backwards (3 after 5)");
    mahimahi_bad("1\n-5\n", "cell.up:2: '-5' is not a whole number of milliseconds");
    mahimahi_bad("1\n2.5\n", "cell.up:2: '2.5' is not a whole number of milliseconds");
    mahimahi_bad("\n\n", "cell.up: empty trace: no line");
    mahimahi_bad("0\n0\n", "cell.up: the last opportunity is at 0 ms: no period");
}

static void test_load(void)
{
    struct topo_trace t;
    CHECK(topo_trace_load("/nonexistent/up.csv", "csv", 0.1, &t, err, sizeof err) < 0);
    CHECK_MSG(strcmp(err, "/nonexistent/up.csv: No such file or directory") == 0, "%s", err);
    CHECK(topo_trace_load("up.csv", "pcap", 0.1, &t, err, sizeof err) < 0);
    CHECK_MSG(strcmp(err, "format 'pcap' is neither csv nor mahimahi") == 0, "%s", err);
}

/* ---- the player on a loop ---- */

struct applied {
    struct topo_trace_sample s[64];
    size_t n;
    struct ev_loop *loop;
};

static void record_apply(void *ctx, const struct topo_trace *t, const struct topo_trace_sample *now)
{
    (void)t;
    struct applied *a = ctx;
    if (a->n < 64) a->s[a->n++] = *now;
}

static void on_done(EV_P_ ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(EV_A_ EVBREAK_ALL);
}

/* Plays "0,10 / 0.05,20 / 0.1,5" linear with 25 ms steps for 0.3 s. */
static void play_once(struct applied *a, double dilation)
{
    struct topo_trace t = csv("0,10Mbit\n0.05,20Mbit\n0.1,5Mbit\n");
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct trace_player_opts o = {TOPO_TRACE_LINEAR, false, 0.025, dilation};
    *a = (struct applied){.loop = loop};
    struct trace_player *p = trace_player_start(loop, &t, &o, record_apply, a);
    CHECK(p && t.samples == NULL); /* the player took the trace */
    ev_timer done;
    ev_timer_init(&done, on_done, 0.3 * dilation, 0);
    ev_timer_start(loop, &done);
    ev_run(loop, 0);
    const struct topo_trace_sample *kept;
    CHECK(trace_player_changes(p, &kept) == a->n && a->n > 0 && kept[0].t_s == 0);
    CHECK(trace_player_current(p)->rate_bps == 5000000);
    trace_player_free(p);
    ev_loop_destroy(loop);
}

static void test_player(void)
{
    static const double want_t[] = {0, 0.025, 0.05, 0.075, 0.1};
    static const uint64_t want_bw[] = {10000000, 15000000, 20000000, 12500000, 5000000};
    struct applied a, b;
    play_once(&a, 1);
    CHECK_MSG(a.n == 5, "%zu changes", a.n);
    for (size_t i = 0; i < a.n && i < 5; i++)
        CHECK_MSG(fabs(a.s[i].t_s - want_t[i]) < 1e-9 && a.s[i].rate_bps == want_bw[i],
                  "change %zu: t %g bw %llu", i, a.s[i].t_s, (unsigned long long)a.s[i].rate_bps);
    /* dilated, the same changes (their times are the trace's) */
    play_once(&b, 2);
    CHECK(b.n == a.n);
    for (size_t i = 0; i < a.n && i < b.n; i++)
        CHECK(a.s[i].t_s == b.s[i].t_s && a.s[i].rate_bps == b.s[i].rate_bps);
}

/* ---- the wire form ---- */

/* t packed, unpacked and read back into *back: 0, or -1 with err. */
static int wire_back(const struct topo_trace *t, struct topo_trace *back)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked u;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_unpacked_init(&u);
    CHECK(topo_trace_pack(&pk, t));
    CHECK(msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    int rc = topo_trace_read(&u.data, back, err, sizeof err);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static void same_trace(const struct topo_trace *a, const struct topo_trace *b)
{
    CHECK(a->n_samples == b->n_samples && a->has_delay == b->has_delay &&
          a->has_loss == b->has_loss && a->period_s == b->period_s &&
          a->n_opportunities == b->n_opportunities);
    for (size_t i = 0; i < a->n_samples && i < b->n_samples; i++)
        CHECK_MSG(a->samples[i].t_s == b->samples[i].t_s &&
                      a->samples[i].rate_bps == b->samples[i].rate_bps &&
                      a->samples[i].delay_ns == b->samples[i].delay_ns &&
                      a->samples[i].loss == b->samples[i].loss,
                  "sample %zu", i);
    CHECK(a->n_opportunities == 0 || !memcmp(a->opportunities_ms, b->opportunities_ms,
                                             a->n_opportunities * sizeof *a->opportunities_ms));
}

static void test_wire(void)
{
    struct topo_trace
        t = csv("t,bw,delay,loss\n0,10Mbit,5ms,1%\n0.5,2Mbit,20ms,0\n2.25,1Kbit,1s,0.5\n"),
        back;
    CHECK_MSG(wire_back(&t, &back) == 0, "%s", err);
    same_trace(&t, &back);
    topo_trace_free(&back);
    topo_trace_free(&t);
    /* Mahimahi: opportunities of ms past 2^16 and 2^24 keep every byte */
    CHECK(topo_trace_parse_mahimahi("1\n70000\n16777300\n", "cell.up", 0.1, &t, err, sizeof err) ==
          0);
    CHECK_MSG(wire_back(&t, &back) == 0, "%s", err);
    same_trace(&t, &back);
    CHECK(back.opportunities_ms && back.opportunities_ms[2] == 16777300u);
    topo_trace_free(&back);
    /* refusals: a time going back, a loss above 1, opportunities going back */
    t.samples[1].t_s = -1;
    CHECK(wire_back(&t, &back) == -1 && !back.samples && !back.opportunities_ms);
    CHECK_STREQ(err, "trace: sample 1: time is not a number >= 0");
    t.samples[1].t_s = 0.05;
    t.samples[0].loss = 1.5;
    CHECK(wire_back(&t, &back) == -1);
    CHECK_STREQ(err, "trace: sample 0: loss is not a fraction in [0, 1]");
    t.samples[0].loss = 0;
    t.opportunities_ms[2] = 0;
    CHECK(wire_back(&t, &back) == -1);
    CHECK_STREQ(err, "trace: field 'opportunities': time 2 goes backwards");
    topo_trace_free(&t);
    CHECK(topo_trace_read(NULL, &back, err, sizeof err) == -1);
    CHECK_STREQ(err, "trace: not a map");
}

int main(void)
{
    test_csv_parse();
    test_csv_bad();
    test_values();
    test_mahimahi();
    test_load();
    test_player();
    test_wire();
    return check_report();
}

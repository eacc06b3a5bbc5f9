/* test_sync.c — arrivals, wait, batch and versions on real hiernet-peer
 * processes on loopback (127.0.11.x).
 *
 * wait: k arrivals out of a set of names, in arrival order; one name
 * arriving several times; arrivals from before the wait count; a timeout
 * claims nothing; drop discards pending arrivals; from filters by sender,
 * clear discards at once; commands queued after a
 * wait start only once it is satisfied (wait then sum as two requests),
 * while ping and stats keep answering. batch: order, results, the index and
 * name of a failing command, params checked before anything runs, limits,
 * a send completing before the next command, a wait inside, nowait sends
 * reaching their peer in the batch's order. versions: every
 * rule of docs/lua-api.md "Ordering and versions". Orderings are asserted
 * by which response comes first, never by durations. */
#include "tests/unit/peer_harness.h"

#include <poll.h>
#include <signal.h>

static struct harness_peer a, b, c;

static void start_peers(void)
{
    CHECK(harness_start(&a, "a", "127.0.11.1", NULL));
    CHECK(harness_start(&b, "b", "127.0.11.2", NULL));
    CHECK(harness_start(&c, "c", "127.0.11.3", NULL));
    const char *names[] = {"a", "b", "c"};
    const char *addrs[] = {harness_data_addr(&a), harness_data_addr(&b), harness_data_addr(&c)};
    struct harness_reply r;
    HCALL_OK(&a, &r, "peers", "table:m", 3, names, addrs);
    HCALL_OK(&b, &r, "peers", "table:m", 3, names, addrs);
    HCALL_OK(&c, &r, "peers", "table:m", 3, names, addrs);
}

static void send_ok(struct harness_peer *from, const char *tensor, const char *to, const char *as)
{
    struct harness_reply r;
    HCALL_OK(from, &r, "send", "tensor:s to:s as:s", tensor, to, as);
}

/* The arrays of a wait's result equal these. */
static void expect_arrivals(struct harness_reply *r, int k, const char *const *arrived,
                            const char *const *from)
{
    const struct harness_list *l = harness_list(r, "arrived"), *f = harness_list(r, "from");
    const struct harness_list *v = harness_list(r, "versions");
    CHECK_MSG(l && f && v && l->n == k && f->n == k && v->n == k, "%d arrivals, not %d",
              l ? l->n : -1, k);
    for (int i = 0; l && f && i < k && i < l->n && i < f->n; i++) {
        CHECK_STREQ(l->strs[i], arrived[i]);
        CHECK_STREQ(f->strs[i], from[i]);
    }
}

/* ---- wait ---- */

static void test_wait_set(void)
{
    struct harness_reply r;
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "x", 4LL, 1.0);
    /* Arrivals from before the wait count; k of a set, in arrival order. */
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "x", 4LL, 2.0);
    send_ok(&a, "x", "b", "g3");
    send_ok(&c, "x", "b", "other"); /* not listed: stays pending */
    send_ok(&c, "x", "b", "g1");
    double t0 = harness_now_ms();
    HCALL_OK(&b, &r, "wait", "tensors:l k:i", 3, (const char *[]){"g1", "g2", "g3"}, 2LL);
    double seen_ms = harness_now_ms() - t0;
    expect_arrivals(&r, 2, (const char *[]){"g3", "g1"}, (const char *[]){"a", "c"});
    const struct harness_list *v = harness_list(&r, "versions");
    CHECK(v && v->n == 2 && v->nums[0] == 1 && v->nums[1] == 1);
    /* The wait's queue (a gate: until the worker reached it) and its run
     * both fall within the round trip the test saw. */
    double queued = harness_num(&r, "queue_ms"), ran = harness_num(&r, "ms");
    CHECK_MSG(queued >= 0 && ran >= 0 && queued + ran <= seen_ms,
              "queue_ms %g + ms %g in a %g ms round trip", queued, ran, seen_ms);
    harness_reply_free(&r);
    /* Claimed: a wait for one more times out; the timeout claims nothing. */
    HCALL_ERR(&b, &r, "wait: timeout after 0.2 s: 0 of 1 arrivals", "wait",
              "tensors:l k:i timeout:f", 2, (const char *[]){"g1", "g3"}, 1LL, 0.2);
    HCALL_OK(&b, &r, "wait", "tensor:s", "other");
    expect_arrivals(&r, 1, (const char *[]){"other"}, (const char *[]){"c"});
    harness_reply_free(&r);
    /* The default k is the number of names listed. */
    send_ok(&a, "x", "b", "g1");
    send_ok(&a, "x", "b", "g2");
    HCALL_ERR(&b, &r, "wait: timeout after 0.3 s: 2 of 3 arrivals (g1, g2)", "wait",
              "tensors:l timeout:f", 3, (const char *[]){"g1", "g2", "g3"}, 0.3);
    send_ok(&c, "x", "b", "g3");
    HCALL_OK(&b, &r, "wait", "tensors:l", 3, (const char *[]){"g3", "g2", "g1"});
    expect_arrivals(&r, 3, (const char *[]){"g1", "g2", "g3"}, (const char *[]){"a", "a", "c"});
    harness_reply_free(&r);
}

/* k = 4 on one accumulator that two peers add into twice each. */
static void test_wait_duplicates(void)
{
    struct harness_reply r;
    HCALL_OK(&b, &r, "tensor", "name:s size:i fill:f", "acc", 4LL, 0.0);
    for (int i = 0; i < 2; i++) {
        HCALL_OK(&a, &r, "send", "tensor:s to:s as:s add:b", "x", "b", "acc", 1);
        HCALL_OK(&c, &r, "send", "tensor:s to:s as:s add:b", "x", "b", "acc", 1);
    }
    HCALL_OK(&b, &r, "wait", "tensor:s k:i", "acc", 4LL);
    expect_arrivals(&r, 4, (const char *[]){"acc", "acc", "acc", "acc"},
                    (const char *[]){"a", "c", "a", "c"});
    const struct harness_list *v = harness_list(&r, "versions");
    CHECK(v && v->n == 4 && v->nums[0] == 2 && v->nums[3] == 5); /* 1 + one per add */
    harness_reply_free(&r);
    CHECK(harness_values_are(&b, "acc", 4, (float[]){6, 6, 6, 6}));
}

static void test_wait_drop(void)
{
    struct harness_reply r;
    send_ok(&a, "x", "b", "gone");
    send_ok(&a, "x", "b", "kept");
    HCALL_OK(&b, &r, "drop", "name:s", "gone");
    HCALL_ERR(&b, &r, "wait: timeout after 0.1 s: 0 of 1 arrivals", "wait", "tensor:s timeout:f",
              "gone", 0.1);
    HCALL_OK(&b, &r, "wait", "tensor:s", "kept");
    harness_reply_free(&r);
    HCALL_ERR(&b, &r, "wait: give one of 'tensor' (a name) and 'tensors' (a list)", "wait",
              "tensor:s tensors:l", "x", 1, (const char *[]){"y"});
    HCALL_ERR(&b, &r, "wait: give one of", "wait", "");
    HCALL_ERR(&b, &r, "wait: param 'k': 0 is not between 1 and", "wait", "tensor:s k:i", "x", 0LL);
    HCALL_ERR(&b, &r, "wait: param 'timeout': -1 is not a number of seconds", "wait",
              "tensor:s timeout:f", "x", -1.0);
    HCALL_ERR(&b, &r, "wait: param 'tensors': empty", "wait", "tensors:l", 0, NULL);
    HCALL_ERR(&b, &r, "wait: unknown param 'names'", "wait", "names:l", 1, (const char *[]){"x"});
}

/* from: only the named senders' arrivals count, the others stay pending;
 * clear: discards the matching pending arrivals at once, never waits. */
static void test_wait_from_clear(void)
{
    struct harness_reply r;
    HCALL_OK(&b, &r, "tensor", "name:s size:i fill:f", "mix", 4LL, 0.0);
    HCALL_OK(&a, &r, "send", "tensor:s to:s as:s add:b", "x", "b", "mix", 1);
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s add:b", "x", "b", "mix", 1);
    HCALL_OK(&a, &r, "send", "tensor:s to:s as:s add:b", "x", "b", "mix", 1);
    HCALL_OK(&b, &r, "wait", "tensor:s k:i from:l", "mix", 1LL, 1, (const char *[]){"c"});
    expect_arrivals(&r, 1, (const char *[]){"mix"}, (const char *[]){"c"});
    harness_reply_free(&r);
    HCALL_ERR(&b, &r, "wait: timeout after 0.1 s: 2 of 3 arrivals", "wait",
              "tensor:s k:i from:s timeout:f", "mix", 3LL, "a", 0.1);
    HCALL_OK(&b, &r, "wait", "tensor:s k:i from:s", "mix", 2LL, "a");
    expect_arrivals(&r, 2, (const char *[]){"mix", "mix"}, (const char *[]){"a", "a"});
    harness_reply_free(&r);
    /* clear: what is pending goes (only the matching names and senders). */
    send_ok(&a, "x", "b", "old");
    send_ok(&c, "x", "b", "old");
    send_ok(&a, "x", "b", "keep");
    HCALL_OK(&b, &r, "wait", "tensor:s from:s clear:b", "old", "a", 1);
    expect_arrivals(&r, 1, (const char *[]){"old"}, (const char *[]){"a"});
    harness_reply_free(&r);
    HCALL_OK(&b, &r, "wait", "tensors:l clear:b", 2, (const char *[]){"old", "nothing"}, 1);
    expect_arrivals(&r, 1, (const char *[]){"old"}, (const char *[]){"c"});
    harness_reply_free(&r);
    HCALL_OK(&b, &r, "wait", "tensor:s clear:b", "old", 1); /* none pending: at once */
    expect_arrivals(&r, 0, NULL, NULL);
    harness_reply_free(&r);
    HCALL_OK(&b, &r, "wait", "tensor:s", "keep");
    harness_reply_free(&r);
    HCALL_ERR(&b, &r, "wait: param 'k': not with clear", "wait", "tensor:s k:i clear:b", "x", 1LL,
              1);
    HCALL_ERR(&b, &r, "wait: param 'from': empty", "wait", "tensor:s from:l", "x", 0, NULL);
}

/* wait then sum as two requests: the sum starts only once the wait is
 * satisfied (before, its inputs do not even exist); meanwhile the peer
 * answers ping and stats and receives. */
static void test_wait_orders(void)
{
    struct harness_reply r;
    uint32_t wait = harness_request(&b, "wait", "tensors:l", 2, (const char *[]){"s1", "s2"});
    uint32_t sum =
        harness_request(&b, "sum", "out:s inputs:l", "s", 2, (const char *[]){"s1", "s2"});
    uint32_t ping = harness_request(&b, "ping", "");
    uint32_t stats = harness_request(&b, "stats", "");
    CHECK(harness_read_reply(&b, &r) && r.msgid == ping && r.ok);
    CHECK(harness_read_reply(&b, &r) && r.msgid == stats && r.ok);
    double received = harness_num(&r, "transfers_received");
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "v", 3LL, 5.0);
    send_ok(&a, "v", "b", "s1");
    HCALL_OK(&b, &r, "stats", ""); /* answers while the wait holds the queue */
    CHECK(harness_num(&r, "transfers_received") == received + 1);
    CHECK(harness_num(&r, "arrivals") == 1 && harness_num(&r, "arrivals_dropped") == 0);
    send_ok(&c, "x", "b", "s2_unused");
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "v", 3LL, 7.0);
    send_ok(&c, "v", "b", "s2");
    CHECK(harness_read_reply(&b, &r) && r.msgid == wait && r.ok);
    harness_reply_free(&r);
    CHECK(harness_read_reply(&b, &r) && r.msgid == sum && r.ok);
    CHECK(harness_values_are(&b, "s", 3, (float[]){12, 12, 12}));
    HCALL_OK(&b, &r, "wait", "tensor:s", "s2_unused"); /* still pending: consume it */
    harness_reply_free(&r);
}

/* ---- batch ---- */

static void test_batch_order(void)
{
    struct harness_reply r;
    struct harness_batch bb;
    harness_batch_begin(&bb, 6);
    harness_batch_add(&bb, "tensor", "name:s size:i fill:f", "t", 4LL, 1.0);
    harness_batch_add(&bb, "scale", "x:s alpha:f", "t", 3.0);
    harness_batch_add(&bb, "ping", "");
    harness_batch_add(&bb, "axpy", "y:s x:s alpha:f range:r", "t", "t", 1.0, 0LL, 2LL);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s", "t", "b", "from_batch");
    harness_batch_add(&bb, "norm", "x:s", "t");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && r.ok);
    CHECK_MSG(r.n_results == 6, "%zu results", r.n_results);
    if (r.n_results == 6) {
        CHECK(harness_num(&r.results[0], "size") == 4 &&
              harness_num(&r.results[0], "version") == 1);
        CHECK(harness_num(&r.results[1], "version") == 2);
        CHECK(harness_num(&r.results[2], "ms") >= 0 && harness_find(&r.results[2], "cpu_ms") < 0);
        CHECK(harness_num(&r.results[3], "version") == 3);
        CHECK(harness_num(&r.results[4], "bytes") == 16 &&
              harness_num(&r.results[4], "version") == 3);
        CHECK_NEAR(harness_num(&r.results[5], "value"), sqrt(36 + 36 + 9 + 9), 1e-5);
    }
    CHECK(harness_num(&r, "ms") >= 0 && harness_num(&r, "cpu_ms") >= 0);
    harness_reply_free(&r);
    /* The send had completed when the norm ran: b holds the tensor. */
    CHECK(harness_values_are(&b, "from_batch", 4, (float[]){6, 6, 3, 3}));
    /* An empty batch. */
    harness_batch_begin(&bb, 0);
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && r.ok && r.n_results == 0);
    harness_reply_free(&r);
}

/* A nowait send does not hold up the commands after it (a ring step sends
 * its chunk and waits for its neighbour's at once), its snapshot is still
 * taken in order, the batch ends only once it is acknowledged, and the
 * results stay in command order. */
static void test_batch_nowait(void)
{
    struct harness_reply r;
    struct harness_batch bb;
    harness_batch_begin(&bb, 4);
    harness_batch_add(&bb, "tensor", "name:s size:i fill:f", "n", 4LL, 2.0);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s nowait:b", "n", "b", "nw", 1);
    harness_batch_add(&bb, "scale", "x:s alpha:f", "n", 10.0); /* after the snapshot */
    harness_batch_add(&bb, "norm", "x:s", "n");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && r.ok);
    CHECK_MSG(r.n_results == 4, "%zu results", r.n_results);
    if (r.n_results == 4) {
        CHECK(harness_num(&r.results[1], "bytes") == 16 &&
              harness_num(&r.results[1], "version") == 1);
        CHECK(harness_num(&r.results[2], "version") == 2);
        CHECK_NEAR(harness_num(&r.results[3], "value"), 40, 1e-4);
    }
    harness_reply_free(&r);
    /* The batch answered only once the send was acknowledged: b has the snapshot. */
    CHECK(harness_values_are(&b, "nw", 4, (float[]){2, 2, 2, 2}));
    HCALL_ERR(&a, &r, "send: param 'nowait': only for a send inside a batch", "send",
              "tensor:s to:s nowait:b", "n", "b", 1);
    /* A nowait send that fails fails the batch, naming it. */
    harness_batch_begin(&bb, 2);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s range:r at:i nowait:b", "n", "b", "nosuch",
                      0LL, 2LL, 1LL, 1);
    harness_batch_add(&bb, "ping", "");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_CONTAINS(r.error, "batch: command 1 (send)");
    harness_reply_free(&r);
}

/* A nowait send does not wait for its acknowledgement before the next
 * command: with c stopped (SIGSTOP), a's batch [send to c nowait, send to b]
 * delivers to b while c cannot acknowledge, and the batch answers only once
 * c runs again. Were nowait ignored, b would receive nothing until then. */
static void test_batch_nowait_overtakes(void)
{
    struct harness_reply r;
    struct harness_batch bb;
    const float three[] = {3, 3, 3, 3};
    double received = harness_stat(&b, "transfers_received");
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "o", 4LL, 3.0);
    harness_reply_free(&r);
    CHECK(kill(c.pid, SIGSTOP) == 0);
    harness_batch_begin(&bb, 2);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s nowait:b", "o", "c", "held", 1);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s", "o", "b", "overtook");
    uint32_t id = harness_batch_request(&a, &bb);
    CHECK_MSG(harness_wait_stat_above(&b, "transfers_received", received, 5000),
              "the send after a nowait send waited for the unacknowledged one");
    CHECK(harness_values_are(&b, "overtook", 4, three));
    struct pollfd answer = {.fd = a.fd, .events = POLLIN};
    CHECK_MSG(poll(&answer, 1, 100) == 0, "the batch answered before c acknowledged");
    CHECK(kill(c.pid, SIGCONT) == 0);
    CHECK(harness_wait(&a, id, &r) && r.ok);
    harness_reply_free(&r);
    CHECK(harness_values_are(&c, "held", 4, three));
}

/* The batch of test_batch_nowait_in_order: a scale that keeps a's worker
 * busy, a nowait send queued behind it, a wait satisfied at once (the
 * token is in), a second nowait send; ranged: both send elements [1, 3)
 * of "o" into b's tensors of the same names (which exist). */
static void send_pair_batch(bool ranged)
{
    struct harness_batch bb;
    struct harness_reply r;
    harness_batch_begin(&bb, 4);
    harness_batch_add(&bb, "scale", "x:s alpha:f", "big", 1.0);
    const char *names[] = {"first", "second"};
    for (int i = 0; i < 2; i++) {
        if (ranged)
            harness_batch_add(&bb, "send", "tensor:s to:s as:s range:r nowait:b", "o", "b",
                              names[i], 1LL, 2LL, 1);
        else
            harness_batch_add(&bb, "send", "tensor:s to:s as:s nowait:b", "o", "b", names[i], 1);
        if (i == 0) harness_batch_add(&bb, "wait", "tensor:s", "tok");
    }
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && r.ok);
    harness_reply_free(&r);
}

/* Two nowait sends of a batch to one peer reach it in the batch's order,
 * even when the first is queued on the worker and the second is brief
 * enough to run on the loop (send_pair_batch): the second starts at the
 * scale's done, which came in the same wake-up as the first send's. The
 * loop ran the second there and handed its transfer to the data plane
 * before the first's was delivered, so b received them crossed (a ring's
 * waits then took one bucket's data for another's: lua.overlap_exact).
 * Whole sends, then ranges (ranges have run on the loop too since). */
static void test_batch_nowait_in_order(void)
{
    struct harness_reply r;
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "big", 1LL << 20, 1.0);
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "o", 4LL, 3.0);
    HCALL_OK(&b, &r, "tensor", "name:s size:i fill:f", "tok", 1LL, 1.0);
    for (int round = 0; round < 10; round++) {
        send_ok(&b, "tok", "a", "tok");
        send_pair_batch(round >= 5);
        HCALL_OK(&b, &r, "wait", "tensors:l k:i", 2, (const char *[]){"first", "second"}, 2LL);
        expect_arrivals(&r, 2, (const char *[]){"first", "second"}, (const char *[]){"a", "a"});
        harness_reply_free(&r);
    }
    HCALL_OK(&a, &r, "drop", "name:s", "big");
}

static void test_batch_errors(void)
{
    struct harness_reply r;
    struct harness_batch bb;
    /* Runtime error: stops at command 2; command 3 never runs. */
    harness_batch_begin(&bb, 3);
    harness_batch_add(&bb, "ping", "");
    harness_batch_add(&bb, "norm", "x:s", "nope");
    harness_batch_add(&bb, "tensor", "name:s size:i", "after_error", 1LL);
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: command 2 (norm): tensor 'nope' not found");
    HCALL_ERR(&a, &r, "tensor 'after_error' not found", "norm", "x:s", "after_error");
    /* Params are checked before anything runs. */
    harness_batch_begin(&bb, 2);
    harness_batch_add(&bb, "tensor", "name:s size:i", "before_error", 1LL);
    harness_batch_add(&bb, "scale", "x:s alpha:s", "before_error", "two");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: command 2 (scale): param 'alpha': expected number, got string");
    HCALL_ERR(&a, &r, "tensor 'before_error' not found", "norm", "x:s", "before_error");
    harness_batch_begin(&bb, 2);
    harness_batch_add(&bb, "ping", "");
    harness_batch_add(&bb, "axpy", "y:s x:s alhpa:f", "t", "t", 1.0);
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: command 2 (axpy): unknown param 'alhpa'");
    harness_batch_begin(&bb, 1);
    harness_batch_add(&bb, "frobnicate", "");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: command 1: unknown command 'frobnicate'");
    harness_batch_begin(&bb, 1);
    harness_batch_add(&bb, "batch", "");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: command 1 (batch): batches do not nest");
    harness_batch_begin(&bb, 257);
    for (int i = 0; i < 257; i++)
        harness_batch_add(&bb, "ping", "");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: param 'commands': 257 commands, at most 256");
    harness_batch_begin(&bb, 256);
    for (int i = 0; i < 256; i++)
        harness_batch_add(&bb, "ping", "");
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && r.ok && r.n_results == 256);
    harness_reply_free(&r);
    HCALL_ERR(&a, &r, "batch: param 'commands': missing", "batch", "");
    HCALL_ERR(&a, &r, "batch: param 'commands': expected a list", "batch", "commands:s", "ping");
    HCALL_ERR(&a, &r, "batch: command 1: expected {name, params}", "batch", "commands:l", 1,
              (const char *[]){"ping"});
    /* A failing send names the index, the command and the destination. */
    harness_batch_begin(&bb, 1);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s range:r", "t", "b", "no_target", 0LL, 1LL);
    CHECK(harness_wait(&a, harness_batch_request(&a, &bb), &r) && !r.ok);
    CHECK_CONTAINS(r.error, "batch: command 1 (send): to b (127.0.11.2:");
    CHECK_CONTAINS(r.error, "range target 'no_target' does not exist");
}

/* A batch holds the FIFO: a wait inside it satisfied by a later arrival,
 * and a command queued after the batch runs after all of it. */
static void test_batch_wait(void)
{
    struct harness_reply r;
    struct harness_batch bb;
    HCALL_OK(&b, &r, "tensor", "name:s size:i fill:f", "acc2", 2LL, 0.0);
    harness_batch_begin(&bb, 3);
    harness_batch_add(&bb, "wait", "tensor:s k:i", "acc2", 2LL);
    harness_batch_add(&bb, "scale", "x:s alpha:f", "acc2", 10.0);
    harness_batch_add(&bb, "send", "tensor:s to:s as:s", "acc2", "a", "reduced");
    uint32_t batch = harness_batch_request(&b, &bb);
    uint32_t after = harness_request(&b, "scale", "x:s alpha:f", "acc2", 0.5);
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "one", 2LL, 1.0);
    HCALL_OK(&a, &r, "send", "tensor:s to:s as:s add:b", "one", "b", "acc2", 1);
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "two", 2LL, 2.0);
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s add:b", "two", "b", "acc2", 1);
    CHECK(harness_read_reply(&b, &r) && r.msgid == batch && r.ok && r.n_results == 3);
    if (r.n_results == 3) {
        const struct harness_list *l = harness_list(&r.results[0], "arrived");
        CHECK(l && l->n == 2);
        CHECK(harness_num(&r.results[2], "bytes") == 8);
    }
    harness_reply_free(&r);
    CHECK(harness_read_reply(&b, &r) && r.msgid == after && r.ok);
    CHECK(harness_values_are(&a, "reduced", 2, (float[]){30, 30}));
    CHECK(harness_values_are(&b, "acc2", 2, (float[]){15, 15}));
    /* A wait inside a batch that times out fails the batch there. */
    harness_batch_begin(&bb, 2);
    harness_batch_add(&bb, "wait", "tensor:s timeout:f", "never", 0.1);
    harness_batch_add(&bb, "tensor", "name:s size:i", "not_reached", 1LL);
    CHECK(harness_wait(&b, harness_batch_request(&b, &bb), &r) && !r.ok);
    CHECK_STREQ(r.error, "batch: command 1 (wait): timeout after 0.1 s: 0 of 1 arrivals");
}

/* abort{nodes}: needs its nodes; fails a pending wait that could hear from
 * them (any sender, or one of them in `from`), not a wait on others unless
 * any_wait. */
static void test_abort(void)
{
    struct harness_reply r;
    HCALL_ERR(&b, &r, "abort: param 'nodes': missing", "abort", "");
    uint32_t w = harness_request(&b, "wait", "tensor:s from:l timeout:f", "never", 1,
                                 (const char *[]){"c"}, 0.0);
    HCALL_OK(&b, &r, "abort", "nodes:l", 1, (const char *[]){"a"});
    CHECK(harness_num(&r, "waits_aborted") == 0); /* the wait is for c's data */
    HCALL_OK(&b, &r, "abort", "nodes:l", 1, (const char *[]){"c"});
    CHECK(harness_num(&r, "waits_aborted") == 1);
    CHECK(harness_wait(&b, w, &r) && !r.ok);
    CHECK_CONTAINS(r.error, "aborted by the controller");
    harness_reply_free(&r);
    w = harness_request(&b, "wait", "tensor:s timeout:f", "never", 0.0);
    HCALL_OK(&b, &r, "abort", "nodes:l", 1, (const char *[]){"a"});
    CHECK(harness_num(&r, "waits_aborted") == 1); /* any sender: a could have been one */
    CHECK(harness_wait(&b, w, &r) && !r.ok);
    harness_reply_free(&r);
    /* any_wait: a wait on c's data fails too when a is aborted (a ring step). */
    w = harness_request(&b, "wait", "tensor:s from:l timeout:f", "never", 1, (const char *[]){"c"},
                        0.0);
    HCALL_OK(&b, &r, "abort", "nodes:l any_wait:b", 1, (const char *[]){"a"}, 1);
    CHECK(harness_num(&r, "waits_aborted") == 1);
    CHECK(harness_wait(&b, w, &r) && !r.ok);
    CHECK_CONTAINS(r.error, "aborted by the controller");
    harness_reply_free(&r);
    HCALL_ERR(&b, &r, "param 'any_wait'", "abort", "nodes:l any_wait:s", 1, (const char *[]){"a"},
              "yes");
}

/* An abort reaches the commands received before it that start after it: a
 * wait on data from the aborted node and a send to it, queued behind a wait
 * that holds the queue, fail at once when they start; commands received
 * after the abort are not touched. */
static void test_abort_queued(void)
{
    struct harness_reply r;
    HCALL_OK(&b, &r, "tensor", "name:s size:i fill:f", "q", 2LL, 1.0);
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "q", 2LL, 1.0);
    uint32_t gate = harness_request(&b, "wait", "tensor:s from:l timeout:f", "gate", 1,
                                    (const char *[]){"a"}, 5.0);
    uint32_t from_c = harness_request(&b, "wait", "tensor:s from:l timeout:f", "never", 1,
                                      (const char *[]){"c"}, 5.0);
    uint32_t from_a = harness_request(&b, "wait", "tensor:s from:l timeout:f", "later", 1,
                                      (const char *[]){"a"}, 5.0);
    uint32_t to_c = harness_request(&b, "send", "tensor:s to:s as:s", "q", "c", "q_from_b");
    HCALL_OK(&b, &r, "abort", "nodes:l", 1, (const char *[]){"c"});
    CHECK(harness_num(&r, "waits_aborted") == 0); /* the gate waits for a */
    harness_reply_free(&r);
    uint32_t after = harness_request(&b, "wait", "tensor:s from:l timeout:f", "never", 1,
                                     (const char *[]){"c"}, 0.2);
    send_ok(&a, "q", "b", "gate");
    CHECK(harness_wait(&b, gate, &r) && r.ok);
    harness_reply_free(&r);
    CHECK(harness_wait(&b, from_c, &r) && !r.ok);
    CHECK_CONTAINS(r.error, "aborted by the controller");
    harness_reply_free(&r);
    send_ok(&a, "q", "b", "later"); /* a was not aborted: its wait proceeds */
    CHECK(harness_wait(&b, from_a, &r) && r.ok);
    harness_reply_free(&r);
    CHECK(harness_wait(&b, to_c, &r) && !r.ok);
    CHECK_CONTAINS(r.error, "aborted: the node was cut off or died");
    harness_reply_free(&r);
    /* Received after the abort: waits out its own timeout, unaborted. */
    CHECK(harness_wait(&b, after, &r) && !r.ok);
    CHECK_CONTAINS(r.error, "timeout after 0.2 s");
    harness_reply_free(&r);
    send_ok(&b, "q", "c", "q_from_b"); /* and a send after it goes through */
    HCALL_OK(&c, &r, "wait", "tensor:s clear:b", "q_from_b", 1);
    harness_reply_free(&r);
}

/* A peer that shuts down while a wait holds its queue (alone, or inside a
 * batch), with a batch queued behind it, exits at once and cleanly (the
 * harness checks the log for sanitizer reports). */
static void test_shutdown_while_waiting(void)
{
    struct harness_peer d;
    struct harness_batch bb;
    for (int inside = 0; inside < 2; inside++) {
        CHECK(harness_start(&d, "d", "127.0.11.4", NULL));
        harness_batch_begin(&bb, 2);
        harness_batch_add(&bb, "ping", "");
        harness_batch_add(&bb, "wait", "tensor:s timeout:f", "never", 0.0);
        if (inside)
            harness_batch_request(&d, &bb);
        else
            harness_request(&d, "wait", "tensor:s", "never");
        harness_request(&d, "tensor", "name:s size:i", "queued", 1LL);
        if (!inside) harness_batch_request(&d, &bb);
        struct harness_reply r;
        HCALL_OK(&d, &r, "ping", "");
        double t0 = mono_ms();
        harness_stop(&d);
        CHECK_MSG(mono_ms() - t0 < 2000, "exit took %.0f ms", mono_ms() - t0);
    }
}

/* ---- versions ---- */

static double version_of(struct harness_peer *p, const char *name)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "norm", "x:s", name);
    return harness_num(&r, "version");
}

static void test_versions_compute(void)
{
    struct harness_reply r;
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "v1", 4LL, 1.0);
    CHECK(harness_num(&r, "version") == 1);
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "v1", 4LL, 2.0);
    CHECK(harness_num(&r, "version") == 2);
    HCALL_OK(&c, &r, "drop", "name:s", "v1");
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "v1", 4LL, 1.0); /* continues */
    CHECK(harness_num(&r, "version") == 3);
    HCALL_OK(&c, &r, "axpy", "y:s x:s", "v1", "v1");
    CHECK(harness_num(&r, "version") == 4);
    HCALL_OK(&c, &r, "scale", "x:s alpha:f range:r", "v1", 0.5, 0LL, 1LL);
    CHECK(harness_num(&r, "version") == 5);
    HCALL_OK(&c, &r, "copy", "src:s dst:s", "v1", "v2");
    CHECK(harness_num(&r, "version") == 1);
    HCALL_OK(&c, &r, "sum", "out:s inputs:l", "v2", 2, (const char *[]){"v1", "v2"});
    CHECK(harness_num(&r, "version") == 2);
    /* Readers return what they read. */
    HCALL_OK(&c, &r, "norm", "x:s", "v1");
    CHECK(harness_num(&r, "version") == 5);
    HCALL_OK(&c, &r, "dot", "x:s y:s", "v2", "v1");
    CHECK(harness_num(&r, "version") == 2);
    HCALL_OK(&c, &r, "read", "tensor:s", "v1");
    CHECK(harness_num(&r, "version") == 5);
    harness_reply_free(&r);
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s", "v1", "a", "v1_copy");
    CHECK(harness_num(&r, "version") == 5);
    CHECK(version_of(&a, "v1_copy") == 5); /* a whole receive takes the sender's */
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s range:r", "v1", "a", "v1_copy", 0LL, 2LL);
    CHECK(version_of(&a, "v1_copy") == 6); /* range: one more */
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s add:b", "v1", "a", "v1_copy", 1);
    CHECK(version_of(&a, "v1_copy") == 7); /* add: one more */
    HCALL_OK(&c, &r, "tensor", "name:s size:i", "v1_copy", 4LL);
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s", "v1_copy", "a", "v1_copy");
    CHECK(version_of(&a, "v1_copy") == 7); /* a lower sender's version: kept at 7 */
    /* compress out, decompress out (replaced, then added into). */
    HCALL_OK(&c, &r, "compress", "tensor:s out:s method:s", "v1", "packed", "int8");
    CHECK(harness_num(&r, "version") == 1);
    HCALL_OK(&c, &r, "decompress", "tensor:s out:s", "packed", "unpacked");
    CHECK(harness_num(&r, "version") == 1);
    HCALL_OK(&c, &r, "decompress", "tensor:s out:s add:b", "packed", "unpacked", 1);
    CHECK(harness_num(&r, "version") == 2);
}

static void test_versions_learning(void)
{
    struct harness_reply r;
    HCALL_OK(&c, &r, "dataset", "name:s n:i dim:i classes:i", "synthetic", 256LL, 8LL, 3LL);
    HCALL_OK(&c, &r, "model", "name:s arch:s", "m", "logreg:8-3");
    CHECK(harness_num(&r, "version") == 1);
    HCALL_OK(&c, &r, "grad", "model:s batch:i out:s", "m", 16LL, "g");
    CHECK(harness_num(&r, "version") == 1); /* the model read */
    CHECK(version_of(&c, "g") == 1);
    HCALL_OK(&c, &r, "optim", "model:s grad:s lr:f", "m", "g", 0.1);
    CHECK(harness_num(&r, "version") == 2);
    HCALL_OK(&c, &r, "grad", "model:s batch:i out:s", "m", 16LL, "g");
    CHECK(harness_num(&r, "version") == 2);
    CHECK(version_of(&c, "g") == 2);
    /* A model received from another peer keeps its version: the version a
     * grad reports is the sender's, for exact staleness. */
    HCALL_OK(&c, &r, "optim", "model:s grad:s lr:f", "m", "g", 0.1); /* 3 */
    HCALL_OK(&c, &r, "optim", "model:s grad:s lr:f", "m", "g", 0.1); /* 4 */
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s", "m", "a", "m");
    HCALL_OK(&a, &r, "dataset", "name:s n:i dim:i classes:i", "synthetic", 256LL, 8LL, 3LL);
    HCALL_OK(&a, &r, "model", "name:s arch:s", "m", "logreg:8-3"); /* version 5: m existed */
    CHECK(harness_num(&r, "version") == 5);
    HCALL_OK(&c, &r, "optim", "model:s grad:s lr:f", "m", "g", 0.1); /* 5 */
    HCALL_OK(&c, &r, "optim", "model:s grad:s lr:f", "m", "g", 0.1); /* 6 */
    HCALL_OK(&c, &r, "send", "tensor:s to:s as:s", "m", "a", "m");
    HCALL_OK(&a, &r, "grad", "model:s batch:i", "m", 16LL);
    CHECK_MSG(harness_num(&r, "version") == 6, "grad on a received model: version %g",
              harness_num(&r, "version"));
    HCALL_OK(&c, &r, "eval", "model:s split:s", "m", "train");
    CHECK(harness_num(&r, "version") == 6);
}

int main(void)
{
    harness_init();
    start_peers();
    test_wait_set();
    test_wait_duplicates();
    test_wait_drop();
    test_wait_from_clear();
    test_wait_orders();
    test_batch_order();
    test_batch_nowait();
    test_batch_nowait_overtakes();
    test_batch_nowait_in_order();
    test_batch_errors();
    test_batch_wait();
    test_abort();
    test_abort_queued();
    test_shutdown_while_waiting();
    test_versions_compute();
    test_versions_learning();
    harness_stop(&a);
    harness_stop(&b);
    harness_stop(&c);
    return check_report();
}

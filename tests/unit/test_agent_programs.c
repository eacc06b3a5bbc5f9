/* test_agent_programs.c — an agent's answer to `signal` (app/agent_programs.c,
 * compiled in here with the part's answering functions of app/agent_part.c
 * stood in for), without a built part: its programs' list is filled as
 * agent_part_run fills it, each program spawned in this process's
 * namespace. Signal 0, the liveness probe, answers {alive = true} for a
 * program that runs (and signals nothing: it still runs); {alive = false}
 * for one that ended, whose `program` notification (its id and status)
 * went out before the answer, and for an id the agent never knew. A
 * signal that is not 0 is answered done. */
#include "app/agent_programs.c"

#include "common/clock.h"
#include "controller/reaper.h"
#include "proto/protocol.h"
#include "tests/unit/check.h"

#include <signal.h>
#include <string.h>

/* ---- app/agent_part.c's answering functions, as this test needs them ---- */

void part_log(struct agent_part *p, const char *fmt, ...)
{
    (void)p, (void)fmt;
}

void part_answer_error(struct agent_part *p, uint32_t msgid, int code, const char *node,
                       const char *link, const char *message)
{
    (void)node, (void)link;
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, "code", code);
    msgmap_str(&m, "message", message);
    msgmap_error_response(&m, p->io.pk, msgid);
}

void part_answer_done(struct agent_part *p, uint32_t msgid)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_response(&m, p->io.pk, msgid);
}

static void flush_nothing(void *ctx)
{
    (void)ctx; /* the output stays in the buffer, read by the test */
}

/* ---- the agent's output ---- */

/* What the part wrote since the last look: each message's kind, its msgid
 * or method, and the map's values this test asks about. */
struct said {
    int kind; /* PROTO_RESPONSE or PROTO_NOTIFY */
    uint32_t msgid;
    char method[16];
    bool has_alive, alive, has_error;
    uint64_t id;
    int64_t status;
};

static const msgpack_object *map_get(const msgpack_object *map, const char *key)
{
    if (map->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
            memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0)
            return &kv->val;
    }
    return NULL;
}

static void said_of(const msgpack_object *o, struct said *s)
{
    *s = (struct said){.kind = -1};
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 3) return;
    const msgpack_object *v = o->via.array.ptr;
    s->kind = (int)v[0].via.u64;
    if (s->kind == PROTO_NOTIFY) {
        snprintf(s->method, sizeof s->method, "%.*s", (int)v[1].via.str.size, v[1].via.str.ptr);
        const msgpack_object *id = map_get(&v[2], "id"), *status = map_get(&v[2], "status");
        if (id) s->id = id->via.u64;
        if (status) s->status = status->via.i64;
        return;
    }
    s->msgid = (uint32_t)v[1].via.u64;
    s->has_error = v[2].type != MSGPACK_OBJECT_NIL;
    const msgpack_object *alive = o->via.array.size > 3 ? map_get(&v[3], "alive") : NULL;
    s->has_alive = alive && alive->type == MSGPACK_OBJECT_BOOLEAN;
    s->alive = s->has_alive && alive->via.boolean;
}

/* Reads out's messages into s (at most max): how many; out is emptied. */
static size_t read_said(msgpack_sbuffer *out, struct said *s, size_t max)
{
    size_t n = 0, off = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    while (n < max && msgpack_unpack_next(&u, out->data, out->size, &off) == MSGPACK_UNPACK_SUCCESS)
        said_of(&u.data, &s[n++]);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(out);
    return n;
}

/* ---- the requests ---- */

/* agent_part_signal(id, sig) as the agent's dispatch calls it. */
static void ask_signal(struct agent_part *p, uint32_t msgid, uint64_t id, int64_t sig)
{
    struct msgmap m;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgmap_init(&m);
    agent_wire_signal(&m, &(struct agent_signal){id, sig});
    CHECK(msgmap_end(&m, &pk));
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, sb.data, sb.size, &off) == MSGPACK_UNPACK_SUCCESS)
        agent_part_signal(p, msgid, &u.data);
    else
        CHECK_MSG(false, "the signal's params did not decode");
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

/* A program on p's list, named id, as agent_part_run puts it there. */
static struct agent_program_entry *start(struct agent_part *p, uint64_t id, char *const argv[])
{
    char err[512];
    struct agent_program_entry *e = calloc(1, sizeof *e);
    struct netprog_place place = {NULL, "net", 0, -1};
    if (!e) return NULL;
    *e = (struct agent_program_entry){p, id, NULL, p->programs};
    e->prog =
        netprog_spawn(&p->program_list, p->loop, &place, argv, on_program_done, e, err, sizeof err);
    CHECK_MSG(e->prog != NULL, "spawn: %s", err);
    if (!e->prog) return free(e), NULL;
    p->programs = e;
    return e;
}

/* Whether the program named id is still on p's list. */
static bool listed(const struct agent_part *p, uint64_t id)
{
    for (const struct agent_program_entry *e = p->programs; e; e = e->next)
        if (e->id == id) return true;
    return false;
}

/* Runs the loop until id is off the list (its end sent): at most 10 s. */
static bool run_until_ended(struct agent_part *p, uint64_t id)
{
    double t0 = mono_s();
    while (listed(p, id) && mono_s() - t0 < 10)
        ev_run(p->loop, EVRUN_ONCE);
    return !listed(p, id);
}

/* ---- the cases ---- */

static void test_probe(struct agent_part *p, msgpack_sbuffer *out)
{
    char *const sleeper[] = {"sleep", "600", NULL};
    struct said s[4];
    if (!start(p, 7, sleeper)) return;
    pid_t pid = netprog_pid(p->programs->prog);

    ask_signal(p, 1, 7, 0);
    CHECK(read_said(out, s, 4) == 1);
    CHECK_MSG(s[0].kind == PROTO_RESPONSE && s[0].msgid == 1 && !s[0].has_error && s[0].has_alive &&
                  s[0].alive,
              "running: kind %d msgid %u alive %d/%d", s[0].kind, s[0].msgid, s[0].has_alive,
              s[0].alive);
    CHECK(kill(pid, 0) == 0 && listed(p, 7)); /* signal 0 ends nothing */

    ask_signal(p, 2, 7, SIGTERM);
    CHECK(read_said(out, s, 4) == 1);
    CHECK(s[0].kind == PROTO_RESPONSE && s[0].msgid == 2 && !s[0].has_error && !s[0].has_alive);
    CHECK_MSG(run_until_ended(p, 7), "the program SIGTERMed is still listed after 10 s");

    ask_signal(p, 3, 7, 0); /* ended: no longer listed */
    size_t n = read_said(out, s, 4);
    CHECK_MSG(n == 2, "after its end: %zu messages, want its end and the answer", n);
    CHECK_MSG(n == 2 && s[0].kind == PROTO_NOTIFY && strcmp(s[0].method, "program") == 0 &&
                  s[0].id == 7 && s[0].status == 128 + SIGTERM,
              "first: kind %d method '%s' id %llu status %lld", s[0].kind, s[0].method,
              (unsigned long long)s[0].id, (long long)s[0].status);
    CHECK_MSG(n == 2 && s[1].kind == PROTO_RESPONSE && s[1].msgid == 3 && !s[1].has_error &&
                  s[1].has_alive && !s[1].alive,
              "ended: kind %d msgid %u alive %d/%d", s[1].kind, s[1].msgid, s[1].has_alive,
              s[1].alive);

    ask_signal(p, 4, 99, 0); /* never known */
    CHECK(read_said(out, s, 4) == 1);
    CHECK_MSG(s[0].kind == PROTO_RESPONSE && s[0].msgid == 4 && !s[0].has_error && s[0].has_alive &&
                  !s[0].alive,
              "unknown: kind %d msgid %u alive %d/%d", s[0].kind, s[0].msgid, s[0].has_alive,
              s[0].alive);
}

int main(void)
{
    msgpack_sbuffer out;
    msgpack_packer pk;
    msgpack_sbuffer_init(&out);
    msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
    struct agent_part p = {.loop = EV_DEFAULT, .machine = "m2"};
    p.io = (struct agent_part_io){.pk = &pk, .flush = flush_nothing};
    test_probe(&p, &out);
    agent_programs_stop(&p); /* kills what is left, frees every entry */
    CHECK(p.programs == NULL);
    reaper_wait(NULL); /* the killed sleep reaped */
    msgpack_sbuffer_destroy(&out);
    return check_report();
}

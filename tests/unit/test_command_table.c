/* test_command_table.c — the peer's dispatch table generated from
 * proto/command_names.h: every listed name finds its own definition, and
 * only whole names match. */
#include "peer/command_job.h"
#include "proto/command_names.h"
#include "peer/commands_data.h"
#include "peer/commands_stats.h"
#include "peer/commands_sync.h"
#include "peer/commands_traffic.h"
#include "peer/commands_vec.h"
#include "peer/commands_ml.h"
#include "tests/unit/check.h"

static void check_row(const char *name, const struct command *definition, int face)
{
    const struct command_entry *e = command_find(name, (uint32_t)strlen(name));
    CHECK_MSG(e != NULL, "'%s' not found", name);
    if (!e) return;
    CHECK_STREQ(e->name, name);
    CHECK_MSG(e->cmd == definition, "'%s' finds another definition", name);
    CHECK(face == PEER_FACE_METHOD || face == PEER_FACE_OWN || face == PEER_FACE_CONTROLLER);
    CHECK(definition->keys != NULL);
    /* Each kind has what it runs with. */
    CHECK(definition->kind == COMMAND_GATE ? definition->start != NULL : definition->run != NULL);
}

int main(void)
{
    int rows = 0;
#define CHECK_ROW(name, definition, face) check_row(#name, &definition, face), rows++;
    PEER_COMMANDS(CHECK_ROW)
#undef CHECK_ROW
    CHECK(rows == 30);
    CHECK(command_find("ping", 4) == command_find("pingx", 4)); /* a prefix of a longer buffer */
    CHECK(command_find("pin", 3) == NULL);
    CHECK(command_find("pingx", 5) == NULL);
    CHECK(command_find("", 0) == NULL);
    CHECK(command_find(NULL, 0) == NULL);
    CHECK(command_find("frobnicate", 10) == NULL);
    return check_report();
}

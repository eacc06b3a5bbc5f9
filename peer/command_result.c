/* command_result.c — what a command's run() uses to fail, to find and make
 * tensors and to pack its result entries (command_job.h, "results and
 * errors"). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "peer/command_job.h"

#include "kernels/profile.h"
#include "peer/server.h"

bool cmd_fail(struct command_job *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    va_end(ap);
    return false;
}

void cmd_result_u64(struct command_job *j, const char *key, uint64_t value)
{
    msgmap_i64(&j->result, key, (int64_t)value);
}

void cmd_result_f64(struct command_job *j, const char *key, double value)
{
    msgmap_f64(&j->result, key, value);
}

void cmd_result_str(struct command_job *j, const char *key, const char *value)
{
    msgmap_str(&j->result, key, value);
}

void cmd_result_key(struct command_job *j, const char *key)
{
    msgmap_key(&j->result, key);
}

struct store_tensor *cmd_find(struct command_job *j, const char *name)
{
    struct store_tensor *t = store_find(j->store, name);
    if (!t) cmd_fail(j, "tensor '%s' not found", name);
    return t;
}

struct store_tensor *cmd_new_virtual_tensor(struct command_job *j, const char *name, uint64_t size,
                                            uint64_t resident, bool zeroed)
{
    struct store_tensor *t = store_tensor_new_virtual(name, size, resident, zeroed);
    if (!t)
        cmd_fail(j, "out of memory for %" PRIu64 " elements of '%s' (%" PRIu64 " bytes)", resident,
                 name, resident * (uint64_t)sizeof(float));
    return t;
}

struct store_tensor *cmd_new_tensor(struct command_job *j, const char *name, uint64_t size,
                                    bool zeroed)
{
    return cmd_new_virtual_tensor(j, name, size, size, zeroed);
}

bool cmd_range_of(struct command_job *j, const struct cmd_range *r, const struct store_tensor *t,
                  uint64_t *offset, uint64_t *n)
{
    if (!r->set) {
        *offset = 0;
        *n = t->size;
        return true;
    }
    if (r->offset > t->size || r->count > t->size - r->offset)
        return cmd_fail(
            j, "range {%" PRIu64 ", %" PRIu64 "} out of bounds for '%s' (%" PRIu64 " elements)",
            r->offset, r->count, t->name, t->size);
    *offset = r->offset;
    *n = r->count;
    return true;
}

void cmd_charge_virtual(struct command_job *j, const struct store_tensor *t, uint64_t elements)
{
    const struct device_profile *profile = j->server->cfg.profile;
    if (profile && store_tensor_virtual(t))
        j->work.device_ms += 1e3 * profile_add_seconds(profile, elements);
}

bool cmd_brief_elements(uint64_t elements, unsigned passes)
{
    return elements <= COMMAND_BRIEF_ELEMENTS / (passes ? passes : 1);
}

bool cmd_brief_pass(struct command_job *j, const char *name, const struct cmd_range *r,
                    unsigned passes)
{
    if (r && r->set) return cmd_brief_elements(r->count, passes);
    struct store_tensor *t = store_find(j->store, name);
    if (!t) return true;
    uint64_t size = t->size;
    store_tensor_release(t);
    return cmd_brief_elements(size, passes);
}

bool cmd_span(struct command_job *j, const struct cmd_range *r, const struct store_tensor *t,
              float **start, uint64_t *n)
{
    uint64_t offset = 0, count = 0;
    if (!cmd_range_of(j, r, t, &offset, &count)) return false;
    *n = store_resident_span(t, offset, count);
    *start = t->data + (offset < t->resident ? offset : t->resident);
    store_count_skipped(j->store, count - *n);
    return true;
}

bool cmd_patch_begin(struct command_job *j, const char *name, struct store_patch *p)
{
    if (store_patch_begin(j->store, name, p) == 0) return true;
    if (errno == ENOENT) return cmd_fail(j, "tensor '%s' not found", name);
    return cmd_fail(j, "out of memory for a copy of '%s' (it is being sent or read)", name);
}

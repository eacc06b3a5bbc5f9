/* commands_sync.h — the peer commands that order others (docs/lua-api.md
 * "Ordering and versions"): wait and batch, both gates of the worker's FIFO
 * (command_job.h): commands queued after them start only once they are done.
 *
 *   wait{tensors={names} | tensor=name, k=#names, timeout=60}
 *     -> {arrived={name...}, from={node...}, versions={...}, ms}
 *     Once k pending arrivals (store.h) on the listed names exist, claims the
 *     first k of them in arrival order. timeout in seconds, 0 = none; on
 *     timeout it fails and claims nothing. Blocks no thread: the waiting job
 *     holds the FIFO while the loop receives; every arrival re-checks it.
 *   batch{commands={{name, params}, ...}} -> {results={{...}, ...}, ms}
 *     Runs the commands in order, each once the previous one completed (a
 *     send: acked by every receiver; a wait: satisfied), holding the FIFO
 *     throughout. Worker commands that complete with their run go to the
 *     worker together (it runs them in order and skips those after one
 *     that failed), so a run of them costs no round trips to the loop. Every command is parsed
 * before any runs; the first error stops the batch ("command 2 (send): ..."). At most BATCH_MAX; no
 *     nested batch. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct command;
struct command_job;
struct peer_server;

#define BATCH_MAX 256

extern const struct command sync_cmd_wait;
extern const struct command sync_cmd_batch;
extern const struct command sync_cmd_abort;

/* Worker thread: whether a command of this batch failed there, so that the
 * ones queued behind it are skipped; and marking that one did. */
bool sync_batch_stopped(struct command_job *batch);
void sync_batch_stop(struct command_job *batch);

/* Aborts reach commands queued before them too: a wait or send received
 * before an abort{} that starts after it, on data from an aborted node or to
 * one, fails at once instead of waiting out its timeout (the controller
 * sent the abort because that node died or was cut off). Does an abort
 * received after the request numbered `received` name `node`? */
bool sync_aborted_since(const struct peer_server *s, uint64_t received, const char *node);
/* What a transfer from or to an aborted node fails with (the data plane's
 * connections to and from it close with it, peer/dataplane.h), and what a
 * wait on data from one fails with. */
extern const char sync_abort_cause[];
extern const char sync_abort_wait_cause[];
/* A FIFO command received at `received` starts: commands start in arrival
 * order, so aborts that came before it concern nothing queued any more. */
void sync_forget_aborts(struct peer_server *s, uint64_t received);

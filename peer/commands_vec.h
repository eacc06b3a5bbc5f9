/* commands_vec.h — the vector commands of the peer (docs/lua-api.md "Peer
 * commands"): their entries in the command table of
 * commands.c; see command_job.h for how a command runs.
 *
 *   tensor{name, size, fill=0 | "uniform" | "normal", low, high, mean, std,
 *          seed=1}            -> {size, version}
 *   copy{src, dst}            -> {size, version}           (of dst)
 *   drop{name | names}        -> {dropped}                 also their pending arrivals
 *   axpy{y, x, alpha, range}  -> {version}                 (of y)
 *   scale{x, alpha, range}    -> {version}
 *   sum{out, inputs}          -> {size, version}           (of out)
 *   norm{x, range}            -> {value, version}          (the version read)
 *   dot{x, y, range}          -> {value, version}          (x's)
 *   read{tensor, range}       -> {values, version} */
#pragma once

struct command;

extern const struct command vec_cmd_tensor;
extern const struct command vec_cmd_copy;
extern const struct command vec_cmd_drop;
extern const struct command vec_cmd_axpy;
extern const struct command vec_cmd_scale;
extern const struct command vec_cmd_sum;
extern const struct command vec_cmd_norm;
extern const struct command vec_cmd_dot;
extern const struct command vec_cmd_read;

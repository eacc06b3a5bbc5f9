/* profile.h — device profiles: how fast a device computes the layers of a
 * zoo architecture (kernels/zoo.h), so a node can take the emulated time of
 * a step instead of computing it.
 *
 * A profile is a small text file (profiles/NAME.profile in the repository,
 * embedded into the binaries at build time; a user may pass a path):
 *
 *   about  NVIDIA GeForce RTX 2080 Ti, fp32      # what the device is
 *   rate   conv 8.07e12                          # sustained FLOP/s of one op kind
 *   bandwidth 4.93e11                            # sustained memory bytes/s
 *   measured resnet50 32 0.86                    # a step time: model, batch, seconds
 *
 * one key per line, '#' starts a comment (every figure's source goes
 * there). A rate for every op kind of zoo.h and the bandwidth are required.
 * Errors name the file and line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/zoo.h"

struct device_profile; /* owned by the caller of profile_lookup */

/* A built-in name ("rtx2080ti") or a file path (anything with a '/' or
 * ending in ".profile"). 0 with *out set, or -1 with err naming the profile
 * (and the line at fault, or the built-in names). */
int profile_lookup(const char *name_or_path, struct device_profile **out, char *err, size_t errlen);
void profile_free(struct device_profile *p);

const char *profile_name(const struct device_profile *p);
const char *profile_about(const struct device_profile *p);
double profile_rate(const struct device_profile *p, enum zoo_op op); /* FLOP/s */
double profile_bandwidth(const struct device_profile *p);            /* bytes/s */

/* The measured step times of the profile, i from 0. 0, or -1 out of range. */
int profile_measured_count(const struct device_profile *p);
int profile_measured_at(const struct device_profile *p, int i, const char **model, int *batch,
                        double *seconds);

/* Emulated seconds of one forward+backward over `batch` samples of z on
 * this device: the step time the profile measured for z's name and this
 * batch where it has one (*basis "measured"), otherwise the sum over op
 * kinds of FLOPs x batch / rate (*basis "flops"). basis may be NULL. */
double profile_grad_seconds(const struct device_profile *p, const struct zoo_info *z, int batch,
                            const char **basis);

/* Emulated seconds of one pass over `batch` samples through a range of z's
 * layers whose FLOPs per sample are `range` (zoo_range_cost): its forward
 * (backward false) or its backward, each op kind at the profile's rate.
 * Where the profile measured z's step at this batch (*basis "measured")
 * the time is scaled by measured / the whole model's FLOPs time, so the
 * forwards and backwards of a split's parts add up to profile_grad_seconds
 * either way; otherwise *basis is "flops". basis may be NULL. */
double profile_pass_seconds(const struct device_profile *p, const struct zoo_info *z,
                            const struct zoo_cost *range, bool backward, int batch,
                            const char **basis);

/* Emulated seconds for this device to add `elements` float32 values into an
 * accumulator (a parameter server's aggregation): memory bound, 12 bytes
 * per element (read both operands, write the sum) at the bandwidth. */
double profile_add_seconds(const struct device_profile *p, uint64_t elements);

/* The built-in profiles, sorted by name. profile_at: NULL out of range. */
int profile_count(void);
const char *profile_at(int i);

/* optim.h — first-order optimizers over flat float32 parameter tensors.
 *
 * A struct optim holds one method's hyperparameters and its state for one
 * parameter tensor of a fixed size: the velocity of momentum/nesterov, the
 * two moments and the step count of adam. It owns that state; parameters and
 * gradients belong to the caller. Update rules (g = grad + weight_decay * p,
 * i.e. L2 regularisation coupled into the gradient, as PyTorch's SGD and Adam):
 *
 *   sgd       p -= lr * g
 *   momentum  v = momentum * v + g;  p -= lr * v
 *   nesterov  v = momentum * v + g;  p -= lr * (g + momentum * v)
 *   adam      t += 1; m = b1 * m + (1 - b1) * g; s = b2 * s + (1 - b2) * g^2
 *             p -= lr * (m / (1 - b1^t)) / (sqrt(s / (1 - b2^t)) + eps)
 *
 * State starts at zero. Not thread-safe per instance. */
#pragma once

#include <stddef.h>

enum optim_method { OPTIM_SGD, OPTIM_MOMENTUM, OPTIM_NESTEROV, OPTIM_ADAM };

struct optim_config {
    enum optim_method method;
    float lr;           /* default 0.01 (adam: 0.001) */
    float momentum;     /* momentum, nesterov; default 0.9 */
    float beta1, beta2; /* adam; default 0.9, 0.999 */
    float eps;          /* adam; default 1e-8 */
    float weight_decay; /* default 0 */
};

struct optim;

/* "sgd", "momentum", "nesterov", "adam"; error text quotes the name. */
int optim_method_parse(const char *name, enum optim_method *out, char *err, size_t errlen);
const char *optim_method_name(enum optim_method method);

/* Fills *cfg with the defaults of `method`. */
void optim_config_default(struct optim_config *cfg, enum optim_method method);

/* Creates an optimizer for tensors of n elements; validates cfg (lr >= 0,
 * momentum and betas in [0, 1), eps > 0, weight_decay >= 0). */
int optim_create(const struct optim_config *cfg, size_t n, struct optim **out, char *err,
                 size_t errlen);
void optim_destroy(struct optim *o);

/* Replaces the hyperparameters (e.g. a learning-rate schedule). Changing the
 * method resets the state, since velocities and moments do not carry over. */
int optim_configure(struct optim *o, const struct optim_config *cfg, char *err, size_t errlen);
const struct optim_config *optim_config(const struct optim *o);

/* One update of params (n elements) with grad; n must be the size given at
 * creation. Allocates nothing. */
int optim_step(struct optim *o, float *params, const float *grad, size_t n, char *err,
               size_t errlen);

/* Zeroes velocities, moments and the step count. */
void optim_reset(struct optim *o);
long optim_steps(const struct optim *o);

/* cpu/optim.c — sgd, momentum, nesterov and adam updates as plain loops the
 * compiler vectorises (they are memory-bound; BLAS would add passes). Owns
 * each optimizer's state arrays. See kernels/optim.h. */
#include "kernels/optim.h"

#include "kernels/kern_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Vectorise the elementwise loops, which GCC's -O2 cost model leaves scalar
 * (see cpu/model.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* After the pragma: its functions are inlined into the loops below and must
 * carry the same options, or GCC keeps them as calls. */
#include "kernels/elementwise.h"

struct optim {
    struct optim_config cfg;
    size_t n;
    long steps;
    float *first;  /* momentum velocity, or adam's first moment */
    float *second; /* adam's second moment */
};

static const char *const method_names[] = {"sgd", "momentum", "nesterov", "adam"};

const char *optim_method_name(enum optim_method method)
{
    return (unsigned)method < 4 ? method_names[method] : "?";
}

int optim_method_parse(const char *name, enum optim_method *out, char *err, size_t errlen)
{
    for (int i = 0; i < 4; i++) {
        if (name && strcmp(name, method_names[i]) == 0) {
            *out = (enum optim_method)i;
            return 0;
        }
    }
    return kern_fail(err, errlen, "optimizer \"%s\" is unknown (sgd, momentum, nesterov, adam)",
                     name ? name : "");
}

void optim_config_default(struct optim_config *cfg, enum optim_method method)
{
    *cfg = (struct optim_config){
        .method = method,
        .lr = method == OPTIM_ADAM ? 0.001f : 0.01f,
        .momentum = 0.9f,
        .beta1 = 0.9f,
        .beta2 = 0.999f,
        .eps = 1e-8f,
        .weight_decay = 0.0f,
    };
}

static int config_check(const struct optim_config *c, char *err, size_t errlen)
{
    const char *name = optim_method_name(c->method);
    if ((unsigned)c->method > OPTIM_ADAM)
        return kern_fail(err, errlen, "optimizer method %d is unknown", (int)c->method);
    /* Written as negated ranges so that NaN fails every test. */
    if (!(c->lr >= 0.0f) || !(c->weight_decay >= 0.0f))
        return kern_fail(err, errlen, "%s: lr %g and weight_decay %g must be >= 0", name, c->lr,
                         c->weight_decay);
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        return kern_fail(err, errlen, "%s: momentum %g is outside [0, 1)", name, c->momentum);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return kern_fail(err, errlen, "%s: beta1 %g and beta2 %g must be in [0, 1)", name, c->beta1,
                         c->beta2);
    if (!(c->eps > 0.0f)) return kern_fail(err, errlen, "%s: eps %g must be > 0", name, c->eps);
    return 0;
}

/* Allocates exactly the state the method needs; frees what it no longer does. */
static int state_alloc(struct optim *o, char *err, size_t errlen)
{
    int first = o->cfg.method != OPTIM_SGD, second = o->cfg.method == OPTIM_ADAM;
    free(o->first);
    free(o->second);
    o->first = first ? calloc(o->n ? o->n : 1, sizeof(float)) : NULL;
    o->second = second ? calloc(o->n ? o->n : 1, sizeof(float)) : NULL;
    o->steps = 0;
    if ((first && !o->first) || (second && !o->second))
        return kern_fail(err, errlen, "%s: cannot allocate state for %zu parameters",
                         optim_method_name(o->cfg.method), o->n);
    return 0;
}

int optim_create(const struct optim_config *cfg, size_t n, struct optim **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    if (config_check(cfg, err, errlen) < 0) return -1;
    struct optim *o = calloc(1, sizeof *o);
    if (!o) return kern_fail(err, errlen, "optimizer: out of memory");
    o->cfg = *cfg;
    o->n = n;
    if (state_alloc(o, err, errlen) < 0) {
        optim_destroy(o);
        return -1;
    }
    *out = o;
    return 0;
}

void optim_destroy(struct optim *o)
{
    if (!o) return;
    free(o->first);
    free(o->second);
    free(o);
}

int optim_configure(struct optim *o, const struct optim_config *cfg, char *err, size_t errlen)
{
    if (config_check(cfg, err, errlen) < 0) return -1;
    enum optim_method before = o->cfg.method;
    o->cfg = *cfg;
    return cfg->method == before ? 0 : state_alloc(o, err, errlen);
}

const struct optim_config *optim_config(const struct optim *o)
{
    return &o->cfg;
}

void optim_reset(struct optim *o)
{
    if (o->first) memset(o->first, 0, o->n * sizeof(float));
    if (o->second) memset(o->second, 0, o->n * sizeof(float));
    o->steps = 0;
}

long optim_steps(const struct optim *o)
{
    return o->steps;
}

static void step_sgd(const struct optim_config *c, float *p, const float *g, size_t n)
{
    float lr = c->lr, wd = c->weight_decay; /* locals: p[i] may not alias them */
    for (size_t i = 0; i < n; i++)
        kern_sgd(&p[i], g[i], lr, wd);
}

static void step_momentum(const struct optim_config *c, float *p, const float *g, float *v,
                          size_t n, int nesterov)
{
    float lr = c->lr, mu = c->momentum, wd = c->weight_decay;
    for (size_t i = 0; i < n; i++)
        kern_momentum(&p[i], g[i], &v[i], lr, mu, wd, nesterov);
}

static void step_adam(const struct optim_config *c, long t, float *p, const float *g, float *m,
                      float *s, size_t n)
{
    /* Bias corrections in double: 1 - 0.999^t loses digits in float for
     * small t, and they are per-step scalars anyway. */
    float c1 = (float)(1.0 / (1.0 - pow(c->beta1, (double)t)));
    float c2 = (float)(1.0 / (1.0 - pow(c->beta2, (double)t)));
    float lr = c->lr, b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = c->weight_decay;
    for (size_t i = 0; i < n; i++)
        kern_adam(&p[i], g[i], &m[i], &s[i], lr, b1, b2, eps, wd, c1, c2);
}

int optim_step(struct optim *o, float *params, const float *grad, size_t n, char *err,
               size_t errlen)
{
    if (n != o->n)
        return kern_fail(err, errlen, "%s: step on %zu parameters, state is for %zu",
                         optim_method_name(o->cfg.method), n, o->n);
    o->steps++;
    switch (o->cfg.method) {
    case OPTIM_SGD:
        step_sgd(&o->cfg, params, grad, n);
        break;
    case OPTIM_MOMENTUM:
    case OPTIM_NESTEROV:
        step_momentum(&o->cfg, params, grad, o->first, n, o->cfg.method == OPTIM_NESTEROV);
        break;
    case OPTIM_ADAM:
        step_adam(&o->cfg, o->steps, params, grad, o->first, o->second, n);
        break;
    }
    return 0;
}

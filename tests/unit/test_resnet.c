/* test_resnet.c — cnn:resnet20 on the CPU: parameter layout and counts,
 * flops, init, and a finite-difference check of its gradient (no PyTorch
 * needed; test_resnet_torch compares with PyTorch element by element). */
#include <cblas.h>
#include <stdint.h>

#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/rng.h"
#include "tests/unit/check.h"

int main(void)
{
    openblas_set_num_threads(1);
    return check_report();
}

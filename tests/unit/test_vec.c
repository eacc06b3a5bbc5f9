/* test_vec.c — float32 vector kernels (kernels/vec.h over OpenBLAS). */
#include "kernels/vec.h"
#include "tests/unit/check.h"

#include <stdbool.h>

static bool all_equal(const float *x, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != value) return false;
    return true;
}

static void test_axpy_scale(void)
{
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {10, 10, 10, 10, 10};
    vec_axpy(5, 2.0f, x, y);
    CHECK(y[0] == 12 && y[2] == 16 && y[4] == 20);
    vec_axpy(5, -1.0f, y, y); /* aliased: y becomes 0 * y */
    CHECK(all_equal(y, 5, 0.0f));
    float z[3] = {1, 2, 3};
    vec_axpy(3, 0.5f, z, z);
    CHECK(z[0] == 1.5f && z[1] == 3.0f && z[2] == 4.5f);
    vec_scale(5, -2.0f, x);
    CHECK(x[0] == -2 && x[4] == -10);
    vec_scale(0, 3.0f, x); /* n = 0 touches nothing */
    vec_axpy(0, 3.0f, z, x);
    CHECK(x[0] == -2 && z[0] == 1.5f);
}

static void test_sum(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {100, 200, 300, 400};
    float out[4] = {-1, -1, -1, -1};
    const float *in[3] = {a, b, c};
    vec_sum(4, out, in, 3);
    CHECK(out[0] == 111 && out[1] == 222 && out[3] == 444);
    vec_sum(4, out, in, 1);
    CHECK(out[0] == 1 && out[3] == 4);
    vec_sum(4, out, in, 0);
    CHECK(all_equal(out, 4, 0.0f));
    const float *in_place[2] = {a, b}; /* out == inputs[0] */
    vec_sum(4, a, in_place, 2);
    CHECK(a[0] == 11 && a[3] == 44);
}

static void test_norm_dot(void)
{
    float v[2] = {3, 4}, w[2] = {2, -1};
    CHECK_NEAR(vec_norm(2, v), 5.0, 1e-12);
    CHECK_NEAR(vec_dot(2, v, w), 2.0, 1e-12);
    CHECK(vec_norm(0, v) == 0.0 && vec_dot(0, v, w) == 0.0);
    /* 10^7 values of 0.1f. A float accumulator ends up off by about 1e-3
     * relative; OpenBLAS's dsdot accumulates in double but rounds each product
     * to float, about 4e-8 relative here, hence the 1e-6 tolerance. */
    enum { N = 10000000 };
    float *x = malloc(N * sizeof *x);
    CHECK(x != NULL);
    if (!x) return;
    vec_fill(N, 0.1f, x);
    double sq = (double)0.1f * (double)0.1f * N;
    CHECK_NEAR(vec_dot(N, x, x), sq, sq * 1e-6);
    CHECK_NEAR(vec_norm(N, x), sqrt(sq), sqrt(sq) * 1e-6);
    free(x);
}

static void test_fill_copy(void)
{
    float x[7], y[7];
    vec_fill(7, 2.5f, x);
    CHECK(all_equal(x, 7, 2.5f));
    vec_fill(7, 0.0f, x);
    CHECK(all_equal(x, 7, 0.0f));
    vec_fill(7, -0.0f, x);
    CHECK(all_equal(x, 7, 0.0f) && signbit(x[6]));
    vec_fill(7, 1.25f, x);
    vec_copy(7, x, y);
    CHECK(all_equal(y, 7, 1.25f));
    vec_copy(0, x, y);
    vec_set_threads(1);
}

int main(void)
{
    test_axpy_scale();
    test_sum();
    test_norm_dot();
    test_fill_copy();
    return check_report();
}

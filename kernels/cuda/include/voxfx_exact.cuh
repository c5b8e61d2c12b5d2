// Exact signs of the two predicates of the triangle/box test (voxelize.cu), for the rare
// cases whose floating-point filters are unsure (kernels/voxelize/exact.py, tier 3).
//
// Expansion arithmetic after Shewchuk, "Adaptive precision floating-point arithmetic and
// fast robust geometric predicates" (1997): two_product (exact by fma) and two_sum turn
// each monomial into a few doubles whose sum is the monomial exactly; grow_sign adds them
// one by one into a nonoverlapping expansion (Grow-Expansion, Theorem 10) whose largest
// nonzero component carries the sign of the exact sum. Underflow is not modelled.
// __host__ __device__ so the host test (tests/unit/test_cuda_exact.py) runs this code.
#pragma once

#ifndef __CUDACC_RTC__
#include <math.h>
#endif

__host__ __device__ __forceinline__ void two_sum(double a, double b, double& s, double& e)
{
    s = a + b;
    double bb = s - a;
    e = (a - (s - bb)) + (b - bb);
}

__host__ __device__ __forceinline__ void two_product(double a, double b, double& p, double& e)
{
    p = a * b;
    e = fma(a, b, -p);  // exact: the rounding error of a product is a double
}

// Sign of the exact sum of terms[0..n): every term is grown into the expansion h.
template <int N>
__host__ __device__ int grow_sign(const double (&terms)[N])
{
    double h[N];
    int m = 0;
    for (int k = 0; k < N; ++k) {
        double q = terms[k];
        for (int i = 0; i < m; ++i) {
            double s, e;
            two_sum(q, h[i], s, e);
            h[i] = e;
            q = s;
        }
        h[m++] = q;
    }
    for (int i = N - 1; i >= 0; --i)
        if (h[i] != 0.0) return h[i] > 0.0 ? 1 : -1;
    return 0;
}

// Sign of (w_a − u_a)(x_b − u_b) − (w_b − u_b)(x_a − u_a), exact. Expanded, u_a·u_b cancels:
// w_a x_b − w_a u_b − u_a x_b − w_b x_a + w_b u_a + u_b x_a.
__host__ __device__ inline int orient2d_exact(double ua, double ub, double wa, double wb, double xa, double xb)
{
    double t[12];
    two_product(wa, xb, t[0], t[1]);
    two_product(-wa, ub, t[2], t[3]);
    two_product(-ua, xb, t[4], t[5]);
    two_product(-wb, xa, t[6], t[7]);
    two_product(wb, ua, t[8], t[9]);
    two_product(ub, xa, t[10], t[11]);
    return grow_sign(t);
}

// p·q·r as four doubles, exactly.
__host__ __device__ __forceinline__ void triple_product(double p, double q, double r, double* out)
{
    double h, l;
    two_product(p, q, h, l);
    two_product(h, r, out[0], out[1]);
    two_product(l, r, out[2], out[3]);
}

// det(a, b, c) (rows) · sign as 24 doubles.
__host__ __device__ inline void det3_terms(const double* a, const double* b, const double* c, double sign, double* out)
{
    triple_product(sign * a[0], b[1], c[2], out + 0);
    triple_product(-sign * a[0], b[2], c[1], out + 4);
    triple_product(sign * a[1], b[2], c[0], out + 8);
    triple_product(-sign * a[1], b[0], c[2], out + 12);
    triple_product(sign * a[2], b[0], c[1], out + 16);
    triple_product(-sign * a[2], b[1], c[0], out + 20);
}

// Sign of ((v1 − v0) × (v2 − v1)) · (x − v0) = det(v1 − v0, v2 − v0, x − v0)
// = det(v1, v2, x) − det(v0, v2, x) + det(v0, v1, x) − det(v0, v1, v2), exact.
__host__ __device__ inline int plane_exact(const double* v0, const double* v1, const double* v2, const double* x)
{
    double t[96];
    det3_terms(v1, v2, x, 1.0, t);
    det3_terms(v0, v2, x, -1.0, t + 24);
    det3_terms(v0, v1, x, 1.0, t + 48);
    det3_terms(v0, v1, v2, -1.0, t + 72);
    return grow_sign(t);
}

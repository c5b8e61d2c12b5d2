// The sparse multigrid's coarsest level solved by its dense inverse (sparse_multigrid.MG_DENSE,
// issue 24, i24p4): G built by one block (mg_dense_inverse, once a solve) and applied by one
// (the tails, mg_restrict_coarse_dense, mg_coarse_dense), each value rounded as
// sparse_multigrid.dense_inverse and dense_solve round it (the including module is compiled
// without FMA contraction).
#pragma once

// A pivot at most this times its unknown's diagonal is a sealed (all-Neumann) component's last:
// that unknown is pinned (sparse_multigrid.DENSE_PIVOT).
#ifndef DENSE_PIVOT
#define DENSE_PIVOT 1e-9
#endif

// G ≈ A⁻¹ of a level's m unknowns (its nbr, diag; rows of `stride`) by the block: Gauss-Jordan
// in place in double in `a` (m² + 2m doubles: the matrix, then the pivot's row and column), as
// sparse_multigrid.dense_inverse computes it entry by entry — A from nbr and diag; per pivot k
// in order the pivot's row (divided by p) and column read, then every entry a_ij − a_ik·(a_kj/p),
// row k a_kj/p, column k −(a_ik/p), a_kk 1/p; a pivot ≤ DENSE_PIVOT·diag_k skipped, a_kk 0
// (pinned) — then G_ij = ½(a_ij + a_ji) rounded to float, 0 in a pinned unknown's row and
// column, row j at dense + j·stride.
__device__ __forceinline__ void block_dense_inverse(const int* __restrict__ nbr, const float* __restrict__ diag,
                                                    int stride, int m, double* a, float* __restrict__ dense)
{
    const int mm = m * m;
    double *row = a + mm, *col = row + m;
    for (int e = threadIdx.x; e < mm; e += blockDim.x) a[e] = 0.0;
    __syncthreads();
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        a[i * m + i] = (double)diag[i];
        for (int d = 0; d < 6; ++d) {
            const int n = nbr[d * stride + i];
            if (n < m) a[i * m + n] = -1.0;
        }
    }
    __syncthreads();
    for (int k = 0; k < m; ++k) {
        const double p = a[k * m + k];
        if (!(p > DENSE_PIVOT * (double)diag[k])) {  // every thread read the same p
            __syncthreads();
            if (threadIdx.x == 0) a[k * m + k] = 0.0;
            __syncthreads();
            continue;
        }
        for (int j = threadIdx.x; j < m; j += blockDim.x) {  // row: a_kj/p (divided once, not per entry)
            row[j] = a[k * m + j] / p;
            col[j] = a[j * m + k];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < mm; e += blockDim.x) {
            const int i = e / m, j = e - i * m;
            if (i == k) a[e] = j == k ? 1.0 / p : row[j];
            else if (j == k) a[e] = -(col[i] / p);
            else a[e] = a[e] - col[i] * row[j];
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < mm; e += blockDim.x) {
        const int i = e / m, j = e - i * m;
        const bool pinned = a[i * m + i] == 0.0 || a[j * m + j] == 0.0;
        dense[j * stride + i] = pinned ? 0.0f : (float)(0.5 * (a[i * m + j] + a[j * m + i]));
    }
}

// The coarsest level solved by its dense inverse (sparse_multigrid.MG_DENSE, i24p4): x_i =
// Σ_j G_ij·b_j over its m unknowns, added j = 0, 1, … (sparse_multigrid.dense_solve's order), a
// thread a row; G symmetric, row j at G + j·stride, so a warp reads a row's consecutive floats.
// One pass where block_coarse_sweeps takes 4·MG_COARSE_SWEEPS; the sentinel x[m] is not written.
__device__ __forceinline__ void block_dense_solve(float* __restrict__ x, const float* __restrict__ b,
                                                  const float* __restrict__ dense, int stride, int m)
{
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float s = dense[i] * b[0];
        for (int j = 1; j < m; ++j) s = s + dense[j * stride + i] * b[j];
        x[i] = s;
    }
}

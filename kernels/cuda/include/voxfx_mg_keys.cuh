// The sparse multigrid's cell keys (kernels/flip/sparse_multigrid.py): (k − bz)·2^2B +
// (j − by)·2^B + i − bx, B = KEY_BITS (a -D constant of the including module), every axis
// inside its field; sets of them sorted. Shared by flip_sparse_pressure.cu and
// flip_sparse_pressure_setup.cu.
#pragma once

__device__ __forceinline__ long long cell_key(int i, int j, int k, int bx, int by, int bz)
{
    return ((long long)(k - bz) << (2 * KEY_BITS)) | ((long long)(j - by) << KEY_BITS) | (long long)(i - bx);
}

__device__ __forceinline__ void key_cell(long long key, int bx, int by, int bz, int& i, int& j, int& k)
{
    const long long mask = (1LL << KEY_BITS) - 1;
    i = (int)(key & mask) + bx;
    j = (int)((key >> KEY_BITS) & mask) + by;
    k = (int)(key >> (2 * KEY_BITS)) + bz;
}

// Index of key q in the sorted keys[0, n), −1 where absent (binary search).
__device__ __forceinline__ int find_key(const long long* __restrict__ keys, int n, long long q)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (keys[mid] < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < n && keys[lo] == q) ? lo : -1;
}

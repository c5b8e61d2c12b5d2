// Point access into the sparse brick core (kernels/grid/sparse_ops.py: values_at, set_voxels).
#include "voxfx_sparse.cuh"

// out[m] = pool[slot(ijk[m]) * 512 + local(ijk[m])], or background where the brick is inactive.
extern "C" __global__ void sparse_gather_f32(const long long* __restrict__ ijk, long long m,
                                             const long long* __restrict__ keys, const int* __restrict__ slots,
                                             long long n, const float* __restrict__ pool, float background,
                                             float* __restrict__ out)
{
    long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= m) return;
    long long i = ijk[3 * q], j = ijk[3 * q + 1], k = ijk[3 * q + 2];
    int slot = sparse_slot(keys, slots, n, sparse_key_of_voxel(i, j, k));
    out[q] = slot < 0 ? background : pool[(long long)slot * 512 + sparse_local(i, j, k)];
}

// pool[slot(ijk[m]), local] = value for every voxel whose brick is active; counts the
// voxels that had no active brick in *missed* (one atomic per such voxel).
extern "C" __global__ void sparse_set_u8(const long long* __restrict__ ijk, long long m,
                                         const long long* __restrict__ keys, const int* __restrict__ slots,
                                         long long n, unsigned char* __restrict__ pool, unsigned char value,
                                         unsigned long long* __restrict__ missed)
{
    long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= m) return;
    long long i = ijk[3 * q], j = ijk[3 * q + 1], k = ijk[3 * q + 2];
    int slot = sparse_slot(keys, slots, n, sparse_key_of_voxel(i, j, k));
    if (slot < 0) {
        atomicAdd(missed, 1ULL);
        return;
    }
    pool[(long long)slot * 512 + sparse_local(i, j, k)] = value;
}

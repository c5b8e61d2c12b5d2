// Point access into the sparse brick core (kernels/grid/sparse_ops.py: values_at, set_voxels)
// and brick neighbourhood tables (kernels/grid/sparse_mac.py).
#include "voxfx_sparse.cuh"
#include "voxfx_join.cuh"  // fill_slots_joined, copy_channels_joined: several channels a launch

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

// ------------------------------------------------------------------------------ brick neighbourhoods
// (kernels/grid/sparse_mac.py: SparseMacGrid's tables on the device)

// One thread per (active brick q, offset o): coords of its slot (o = 13, the brick itself)
// and nbr27 of its slot. Fill nbr27 with −1 first (free slots keep it).
extern "C" __global__ void brick_tables(const long long* __restrict__ keys, const int* __restrict__ slots, long long n,
                                        int* __restrict__ coords, int* __restrict__ nbr27)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 27 * n) return;
    int s, o;
    long long nx, ny, nz;
    sparse_table_thread(t, keys, slots, coords, s, o, nx, ny, nz);
    nbr27[27LL * s + o] = sparse_slot(keys, slots, n, sparse_key_of_voxel(8 * nx, 8 * ny, 8 * nz));
}

// grid.nbr (6 × cells, int32) from the brick table: the face neighbour of every pool cell.
extern "C" __global__ void cell_neighbours(const int* __restrict__ nbr27, long long cells, int* __restrict__ nbr)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    for (int d = 0; d < 6; ++d) nbr[d * cells + t] = sparse_cell_step(nbr27, (int)t, d);
}

// Cells of fresh and freed slots back to the channel's background (SparseMacGrid.retopologize): the
// m1 slots of `first`, then the m2 of `second` (one launch for both lists; m2 = 0 for one).
__device__ __forceinline__ long long fill_slot_cell(const int* __restrict__ first, long long m1,
                                                    const int* __restrict__ second, long long t)
{
    const long long k = t >> 9;
    return (long long)(k < m1 ? first[k] : second[k - m1]) * SPARSE_CELLS + (t & (SPARSE_CELLS - 1));
}

extern "C" __global__ void fill_slots_f32(float* __restrict__ a, const int* __restrict__ first, long long m1,
                                          const int* __restrict__ second, long long m2, float value)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (m1 + m2) * SPARSE_CELLS) a[fill_slot_cell(first, m1, second, t)] = value;
}

extern "C" __global__ void fill_slots_u8(unsigned char* __restrict__ a, const int* __restrict__ first, long long m1,
                                         const int* __restrict__ second, long long m2, unsigned char value)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (m1 + m2) * SPARSE_CELLS) a[fill_slot_cell(first, m1, second, t)] = value;
}


// The kept channels of one retopologize in one launch each (SparseMacGrid.retopologize with two or more
// kept channels, sparse_join.join_kept: one launch where there was one a channel, ~11 µs of H100 host
// each; the channels as include/voxfx_join.cuh takes them).

// fill_slots_f32 / _u8 of every channel: the cells of the m1 slots of `first` and the m2 of `second`
// ← channel i's background bits v_i.
extern "C" __global__ void fill_slots_joined(const int* __restrict__ first, long long m1,
                                             const int* __restrict__ second, long long m2, int n, int bytes,
                                             JOIN_POINTERS(c, void*), JOIN_POINTERS(v, unsigned int))
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (m1 + m2) * SPARSE_CELLS) return;
    void* const c[JOIN_CHANNELS] = JOIN_LIST(c);
    const unsigned int v[JOIN_CHANNELS] = JOIN_LIST(v);
    join_store(c, v, n, bytes, fill_slot_cell(first, m1, second, t));
}

// A growing pool's kept channels: the first `cells` items of s_i into d_i (the grown array), as
// 4-byte words (cells a multiple of 512: a 1-byte channel's cells/4 words), one thread a word.
extern "C" __global__ void copy_channels_joined(long long cells, int n, int bytes, JOIN_POINTERS(s, const void*),
                                                JOIN_POINTERS(d, void*))
{
    const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= cells) return;
    const void* const s[JOIN_CHANNELS] = JOIN_LIST(s);
    void* const d[JOIN_CHANNELS] = JOIN_LIST(d);
    for (int i = 0; i < n && i < JOIN_CHANNELS; ++i)
        if (w < (((bytes >> i) & 1) ? cells >> 2 : cells))
            ((unsigned int*)d[i])[w] = ((const unsigned int*)s[i])[w];
}

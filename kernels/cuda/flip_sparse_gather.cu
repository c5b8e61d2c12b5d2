// The sparse FLIP solver's P2G gathers by brick and by cell (seed 003 §6–7;
// kernels/flip/sparse_gpu.py launches them after its counting sort by pool cell,
// kernels/flip/sparse_transfer.py's particles_to_grid is the NumPy reference; compiled with
// --fmad=false so each float operation rounds as NumPy's does). Three kernels, one sum per
// face in one order, so the same bits: p2g_gather_sparse (one thread per pool cell, spans
// from global memory) and p2g_gather_brick (one block per brick, the halo's spans in shared
// memory) here, p2g_gather_staged (one block per brick, the particles themselves staged in
// shared memory a slab of cell layers at a time) in flip_sparse_gather_staged.cu; the sum
// itself is include/voxfx_gather.cuh's gather_cell.

#include "voxfx_gather.cuh"  // GatherFrame, gather_cell, GATHER_HALO, halo_index
#include "voxfx_sparse.cuh"  // SPARSE_CELLS, sparse_cell_near

// The neighbourhood's cells from global memory: one table read and two loads per cell.
struct GlobalSpan {
    const int* __restrict__ start;
    const int* __restrict__ count;
    const int* __restrict__ nbr27;
    int slot;
    __device__ __forceinline__ void operator()(int x, int y, int z, int& first, int& last) const
    {
        const int cell = sparse_cell_near(nbr27, slot, x, y, z);
        first = cell < 0 ? 0 : start[cell];
        last = cell < 0 ? 0 : first + count[cell];
    }
};

// The brick's halo cells from its table in shared memory (p2g_gather_brick).
struct SharedSpan {
    const int* first;
    const int* last;
    __device__ __forceinline__ void operator()(int x, int y, int z, int& f, int& l) const
    {
        const int q = halo_index(x, y, z);
        f = first[q];
        l = last[q];
    }
};

// One thread per pool cell (VOXFX_SPARSE_GATHER=cell).
extern "C" __global__ void p2g_gather_sparse(const float* __restrict__ spos, const float* __restrict__ svel,
                                             const float* __restrict__ sc, int apic, const int* __restrict__ start,
                                             const int* __restrict__ count, const unsigned char* __restrict__ used,
                                             const int* __restrict__ coords, const int* __restrict__ nbr27,
                                             long long cells, int closed, int nx, int ny, int nz, float ox, float oy,
                                             float oz, float h, float inv_h, float* __restrict__ u,
                                             float* __restrict__ v, float* __restrict__ w,
                                             unsigned char* __restrict__ valid_u, unsigned char* __restrict__ valid_v,
                                             unsigned char* __restrict__ valid_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    const int slot = (int)(t >> 9);
    const GatherFrame F = {apic, closed, {nx, ny, nz}, {ox, oy, oz}, h, inv_h};
    const GlobalSpan span = {start, count, nbr27, slot};
    gather_cell(spos, svel, sc, F, coords, slot, used[slot] != 0, t, span, u, v, w, valid_u, valid_v, valid_w);
}

// One thread block per pool slot (VOXFX_SPARSE_GATHER=brick; grid = slots, any block size:
// a thread takes cells l, l + blockDim, …): the block first copies the particle spans of
// the brick's 10³ halo (the 27 bricks' cells it reads, 8 KB) into shared memory, so the
// 27 look-ups per cell are shared-memory reads instead of a table read and two global
// loads each; the sums are gather_cell's, bit for bit p2g_gather_sparse's.
extern "C" __global__ void p2g_gather_brick(const float* __restrict__ spos, const float* __restrict__ svel,
                                            const float* __restrict__ sc, int apic, const int* __restrict__ start,
                                            const int* __restrict__ count, const unsigned char* __restrict__ used,
                                            const int* __restrict__ coords, const int* __restrict__ nbr27,
                                            long long cells, int closed, int nx, int ny, int nz, float ox, float oy,
                                            float oz, float h, float inv_h, float* __restrict__ u,
                                            float* __restrict__ v, float* __restrict__ w,
                                            unsigned char* __restrict__ valid_u, unsigned char* __restrict__ valid_v,
                                            unsigned char* __restrict__ valid_w)
{
    __shared__ int first[GATHER_HALO], last[GATHER_HALO];
    const int slot = (int)blockIdx.x;
    if ((long long)slot * SPARSE_CELLS >= cells) return;
    const bool active = used[slot] != 0;  // the same for the whole block
    if (active) {
        for (int q = threadIdx.x; q < GATHER_HALO; q += blockDim.x) {
            const int cell = sparse_cell_near(nbr27, slot, q % 10 - 1, (q / 10) % 10 - 1, q / 100 - 1);
            const int f = cell < 0 ? 0 : start[cell];
            first[q] = f;
            last[q] = cell < 0 ? 0 : f + count[cell];
        }
    }
    __syncthreads();
    const GatherFrame F = {apic, closed, {nx, ny, nz}, {ox, oy, oz}, h, inv_h};
    const SharedSpan span = {first, last};
    for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x)
        gather_cell(spos, svel, sc, F, coords, slot, active, (long long)slot * SPARSE_CELLS + l, span, u, v, w,
                    valid_u, valid_v, valid_w);
}

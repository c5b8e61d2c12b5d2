// Level 0's unknowns of the sparse pressure solve on the device (split from
// flip_sparse_pressure_setup.cu, issue 24: the same kernels, the same PTX): launched by
// kernels/flip/sparse_pressure_setup.py (unknowns) and sparse_pressure_workspace.py /
// sparse_pressure_workspace_views.py (the workspace's level 0). sparse_pressure.Unknowns is
// the NumPy reference they follow (tests/unit/test_cuda_sparse_pressure_setup_host.py).
//
// Constants from Python, as -D options (the set-up's): CELL_AIR, CELL_FLUID and CELL_SOLID
// (the cell types; KEY_BITS is passed too and unused here).

#include "voxfx_reduce.cuh"

#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// ------------------------------------------------------------------------ level 0's unknowns
// sparse_pressure.Unknowns on the grid's flat cells (size of them, nbr (6 × size) the flat
// neighbour index, −1 where missing): CELL_FLUID / CELL_SOLID are the cell types (-D). A
// cell's (i + j + k) parity is that of its brick-local (lx, ly, lz): bricks are 8 cells
// wide and 8-aligned, flat = slot·512 + (lz·8 + ly)·8 + lx.

// Per flat cell: the diagonal (FLUID: the non-SOLID neighbours, a missing one being AIR;
// else 0) and the scan flags flags[c] = red unknown, flags[size + c] = black unknown,
// flags[2·size + c] = in the multigrid's level-0 set (an active brick's cell not AIR), whose
// lattice box (i, j, k of every set cell: box[0..2] = min, box[3..5] = max) it widens;
// slot_coords[3·slot + a]: the brick coordinates of each pool slot (grid.slot_coords).
// unk_classify_cell does cell c and says whether it is in the set, v its (i, j, k, i, j, k).
__device__ __forceinline__ bool unk_classify_cell(int c, const unsigned char* __restrict__ kind,
                                                  const int* __restrict__ nbr, int size,
                                                  const bool* __restrict__ brick_active,
                                                  const int* __restrict__ slot_coords,
                                                  unsigned char* __restrict__ diag, int* __restrict__ flags, int v[6])
{
    int count = 0;
    if (kind[c] == CELL_FLUID) {
        for (int d = 0; d < 6; ++d) {
            const int nb = nbr[(long long)d * size + c];
            count += nb < 0 || kind[nb] != CELL_SOLID;
        }
    }
    const int local = c & 511;
    const bool red = (((local & 7) + ((local >> 3) & 7) + (local >> 6)) & 1) == 0;
    const bool in_set = brick_active[c >> 9] && kind[c] != CELL_AIR;
    diag[c] = (unsigned char)count;
    flags[c] = count > 0 && red;
    flags[size + c] = count > 0 && !red;
    flags[2 * (long long)size + c] = in_set;
    if (in_set) {
        const int* b0 = slot_coords + 3 * (c >> 9);  // the cell's lattice (i, j, k): brick · 8 + local
        v[0] = v[3] = 8 * b0[0] + (local & 7);
        v[1] = v[4] = 8 * b0[1] + ((local >> 3) & 7);
        v[2] = v[5] = 8 * b0[2] + (local >> 6);
    }
    return in_set;
}

// Launched on at most 264 blocks (sparse_pressure_setup._widening): each thread's box, then
// 6 atomics a thread.
extern "C" __global__ void unk_classify(const unsigned char* __restrict__ kind, const int* __restrict__ nbr, int size,
                                        const bool* __restrict__ brick_active, const int* __restrict__ slot_coords,
                                        unsigned char* __restrict__ diag, int* __restrict__ flags, int* box)
{
    int b[6];
    bool any = false;
    RANGE(c, 0, size)
    {
        int v[6];
        if (unk_classify_cell(c, kind, nbr, size, brick_active, slot_coords, diag, flags, v)) {
            for (int a = 0; a < 6; ++a)
                b[a] = !any ? v[a] : a < 3 ? (b[a] < v[a] ? b[a] : v[a]) : (b[a] > v[a] ? b[a] : v[a]);
            any = true;
        }
    }
    if (any) {  // the thread's box into the shared one: 6 atomics a thread, not a cell
        for (int a = 0; a < 3; ++a) atomicMin(box + a, b[a]);
        for (int a = 3; a < 6; ++a) atomicMax(box + a, b[a]);
    }
}

// unk_classify on a full grid (sparse_pressure_setup.WIDEN "block", issue 24 i24u): the box
// reduced in the block (a warp's min / max: voxfx_reduce.cuh, then shared atomics), 6 global
// atomics a block. A thread's box starts at the identities (INT_MAX for the minima, INT_MIN
// for the maxima: box's own start, unk_classify's), so a block without set cells changes
// nothing; min and max in any order: the same box. Needs blocks of whole warps.
#define UNK_INT_MAX 2147483647
#define UNK_INT_MIN (-2147483647 - 1)
extern "C" __global__ void unk_classify_block(const unsigned char* __restrict__ kind, const int* __restrict__ nbr,
                                              int size, const bool* __restrict__ brick_active,
                                              const int* __restrict__ slot_coords, unsigned char* __restrict__ diag,
                                              int* __restrict__ flags, int* box)
{
    __shared__ int block_box[6];
    for (int a = threadIdx.x; a < 6; a += blockDim.x) block_box[a] = a < 3 ? UNK_INT_MAX : UNK_INT_MIN;
    __syncthreads();
    int b[6] = {UNK_INT_MAX, UNK_INT_MAX, UNK_INT_MAX, UNK_INT_MIN, UNK_INT_MIN, UNK_INT_MIN};
    RANGE(c, 0, size)
    {
        int v[6];
        if (unk_classify_cell(c, kind, nbr, size, brick_active, slot_coords, diag, flags, v))
            for (int a = 0; a < 6; ++a) b[a] = a < 3 ? (b[a] < v[a] ? b[a] : v[a]) : (b[a] > v[a] ? b[a] : v[a]);
    }
    for (int a = 0; a < 6; ++a) {
        const int w = a < 3 ? warp_min_int(b[a]) : warp_max_int(b[a]);
        if ((threadIdx.x & 31) == 0 && w != (a < 3 ? UNK_INT_MAX : UNK_INT_MIN)) {
            if (a < 3) atomicMin(block_box + a, w);
            else atomicMax(block_box + a, w);
        }
    }
    __syncthreads();
    for (int a = threadIdx.x; a < 6; a += blockDim.x) {
        const int w = block_box[a];
        if (a < 3 && w != UNK_INT_MAX) atomicMin(box + a, w);
        if (a >= 3 && w != UNK_INT_MIN) atomicMax(box + a, w);
    }
}

// position[c] (flat → unknown, m where none), cells[u] (unknown → flat), red then black, and
// set[s] (the level-0 set's flat cells in flat order), from the row-wise inclusive scans of
// flags; sizes[0] = m_red, sizes[1] = m, sizes[2] = the set's size. Launched over
// max(size, 1) items.
extern "C" __global__ void unk_order(const int* __restrict__ flags, const int* __restrict__ scans, int size,
                                     int* __restrict__ sizes, int* __restrict__ position,
                                     long long* __restrict__ cells, long long* __restrict__ set)
{
    const long long n = size;
    const int m_red = size > 0 ? scans[n - 1] : 0;
    const int m = m_red + (size > 0 ? scans[2 * n - 1] : 0);
    RANGE(c, 0, size > 0 ? size : 1)
    {
        if (c == 0) {
            sizes[0] = m_red;
            sizes[1] = m;
            sizes[2] = size > 0 ? scans[3 * n - 1] : 0;
        }
        if (c < size) {
            int u = m;
            if (flags[c]) u = scans[c] - 1;
            if (flags[n + c]) u = m_red + scans[n + c] - 1;
            position[c] = u;
            if (u < m) cells[u] = c;
            if (flags[2 * n + c]) set[scans[2 * n + c] - 1] = c;
        }
    }
}

// The unknowns' nbr (6 rows of stride) and diag (m + 1), sentinel column m (diag 1).
__device__ __forceinline__ void unk_tables_body(const long long* __restrict__ cells, int m, int stride,
                                                const int* __restrict__ nbr, int size,
                                                const int* __restrict__ position,
                                                const unsigned char* __restrict__ diag8, int* __restrict__ unbr,
                                                float* __restrict__ udiag)
{
    RANGE(u, 0, m + 1)
    {
        if (u == m) {
            for (int d = 0; d < 6; ++d) unbr[d * stride + m] = m;
            udiag[m] = 1.0f;
            continue;
        }
        const long long c = cells[u];
        for (int d = 0; d < 6; ++d) {
            const int nb = nbr[(long long)d * size + c];
            unbr[d * stride + u] = nb >= 0 ? position[nb] : m;
        }
        udiag[u] = (float)diag8[c];
    }
}

// unk_tables_body with rows m + 1 long (m = sizes[1]).
extern "C" __global__ void unk_tables(const long long* __restrict__ cells, const int* __restrict__ sizes,
                                      const int* __restrict__ nbr, int size, const int* __restrict__ position,
                                      const unsigned char* __restrict__ diag8, int* __restrict__ unbr,
                                      float* __restrict__ udiag)
{
    unk_tables_body(cells, sizes[1], sizes[1] + 1, nbr, size, position, diag8, unbr, udiag);
}

// unk_tables_body with rows `stride` long (≥ m + 1): straight into a solver's level-0 buffers
// (sparse_pressure_workspace.py).
extern "C" __global__ void unk_tables_strided(const long long* __restrict__ cells, const int* __restrict__ sizes,
                                              int stride, const int* __restrict__ nbr, int size,
                                              const int* __restrict__ position,
                                              const unsigned char* __restrict__ diag8, int* __restrict__ unbr,
                                              float* __restrict__ udiag)
{
    unk_tables_body(cells, sizes[1], stride, nbr, size, position, diag8, unbr, udiag);
}

// unk_tables_strided's diag alone (m + 1 entries, the sentinel 1 at m; nothing past it): level 0
// of a solver whose passes find their neighbours from the bricks (sparse_pressure_vcycle.NBR
// "bricks" with NBR_TABLE "skip", issue 24, i24n2) holds no nbr rows, so none are written.
extern "C" __global__ void unk_diag_strided(const long long* __restrict__ cells, const int* __restrict__ sizes,
                                            const unsigned char* __restrict__ diag8, float* __restrict__ udiag)
{
    const int m = sizes[1];
    RANGE(u, 0, m + 1) udiag[u] = u == m ? 1.0f : (float)diag8[cells[u]];
}

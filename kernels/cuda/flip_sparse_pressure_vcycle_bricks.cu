// The V-cycle's transfers between level 0 and level 1 without their tables (issue 24, i24r;
// sparse_pressure_gpu.BRICK_TRANSFERS, VOXFX_SPARSE_MG_BRICK_TRANSFERS): mg_restrict and
// mg_prolong_add of flip_sparse_pressure_vcycle.cu read down[0] (64 rows of level 1's stride:
// ~53 MB at 8M) and up[0] (8 rows over level 0's unknowns: ~32 MB) every iteration; here each index is
// found from the grid's bricks as the set-up finds it (flip_sparse_pressure_bricks.cu's
// mgb_restrict and mgb_prolong: nbr27, level 0's position and cells, level 1's map1 and
// position), so an iteration reads a few arrays that stay in L2 instead of the two tables
// (measured: kernels/flip/sparse_pressure_vcycle.py's notes).
// The same indices give the same terms added in the same order (restrict_value's and
// prolong_value's rows, their weights): bc and xf bit for bit
// (tests/unit/test_cuda_sparse_vcycle_bricks_host.py).
//
// The arrays change with every set-up while the solver's captured graph keeps its kernel
// arguments, so they come through a device table the solver rewrites when it takes new
// tables: ptrs[BT_*] (voxfx_mg_bricks.cuh). Layout as flip_sparse_pressure_bricks.cu's notes: flat cells
// c = slot·512 + (lz·8 + ly)·8 + lx; level-1 candidate t = slot·64 + (qz·4 + qy)·4 + qx, the
// level-1 cell (4·bx + qx, …) whose 8 children are brick slot's cells (2qx + 0/1, …).
// Compiled with flip_sparse_pressure_vcycle.cu's options (no FMA contraction).

#include "voxfx_mg_cell.cuh"  // axis_weight
#include "voxfx_sparse.cuh"   // sparse_offset_index, SPARSE_CELLS
#include "voxfx_mg_bricks.cuh"  // BT_*: the table of level 0's and 1's arrays

#ifndef RANGE
#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))
#endif

// The level-1 unknown of candidate t (< the candidates' count), or −1 where it is none.
__device__ __forceinline__ int brick_coarse_unknown(const int* __restrict__ map1, const int* __restrict__ position1,
                                                    int mc, int t)
{
    const int at = map1[t];
    if (at < 0) return -1;
    const int u = position1[at];
    return u < mc ? u : -1;
}

// restrict_value for the level-1 cell of candidate (slot, q): its fine cells 2I + (−1, 0, 1, 2)
// per axis, row (iz·4 + iy)·4 + ix, found as mgb_restrict finds them (the brick of each axis'
// offset read once: at most 2 per axis, 8 slots) — level-0 unknown position0[c], the sentinel
// mf where the cell's brick is inactive — and added in restrict_value's order.
__device__ __forceinline__ float restrict_value_bricks(const float* __restrict__ rf, const int* __restrict__ position0,
                                                       const int* __restrict__ nbr27, int mf, int slot, int q)
{
    const int x0 = 2 * (q & 3) - 1, y0 = 2 * ((q >> 2) & 3) - 1, z0 = 2 * (q >> 4) - 1;
    const int bx0 = x0 >> 3, by0 = y0 >> 3, bz0 = z0 >> 3;  // −1 or 0: the low end's brick per axis
    int slots[8];  // (sz·2 + sy)·2 + sx: the brick at (bx0 + sx, by0 + sy, bz0 + sz)
#pragma unroll
    for (int k = 0; k < 8; ++k)
        slots[k] = nbr27[27 * slot + sparse_offset_index(bx0 + (k & 1), by0 + ((k >> 1) & 1), bz0 + (k >> 2))];
    float s = 0.0f;
#pragma unroll
    for (int row = 0; row < 64; ++row) {
        const int x = x0 + (row & 3), y = y0 + ((row >> 2) & 3), z = z0 + (row >> 4);
        const int b = slots[(((z >> 3) - bz0) * 2 + ((y >> 3) - by0)) * 2 + ((x >> 3) - bx0)];
        const int f = b < 0 ? mf : position0[b * SPARSE_CELLS + (((z & 7) << 6) | ((y & 7) << 3) | (x & 7))];
        const float w = axis_weight(row & 3) * axis_weight((row >> 2) & 3) * axis_weight(row >> 4);
        s = row == 0 ? w * rf[f] : s + w * rf[f];
    }
    return 0.5f * s;
}

// mg_restrict into level 1 (b_c = ½·Σ_row w_row·r_f[…], restrict_value's terms) a thread a
// level-1 candidate: each level-1 unknown is one candidate's, written by its thread alone; the
// sentinel b[m1] is not written (as mg_restrict). Grid-stride over the candidates' count.
extern "C" __global__ void mg_restrict_bricks(const float* __restrict__ rf, const unsigned long long* __restrict__ ptrs,
                                              const int* __restrict__ sizes, float* __restrict__ bc,
                                              const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int* map1 = (const int*)ptrs[BT_MAP1];
    const int* position1 = (const int*)ptrs[BT_POSITION1];
    const int n = (int)ptrs[BT_CANDIDATES], mf = sizes[1], mc = sizes[3];
    RANGE(t, 0, n)
    {
        const int u = brick_coarse_unknown(map1, position1, mc, t);
        if (u >= 0) bc[u] = restrict_value_bricks(rf, position0, nbr27, mf, t >> 6, t & 63);
    }
}

// prolong_value for level-0 unknown f at flat cell c: its parent and the parent's neighbours on
// the child's side, row (oz·2 + oy)·2 + ox, found as mgb_prolong finds them (the level-1
// sentinel mc where none), added in prolong_value's order.
__device__ __forceinline__ float prolong_value_bricks(const float* __restrict__ xc, const int* __restrict__ nbr27,
                                                      const int* __restrict__ map1,
                                                      const int* __restrict__ position1, int mc, int c)
{
    const int slot = c >> 9, l = c & (SPARSE_CELLS - 1);
    const int lx = l & 7, ly = (l >> 3) & 7, lz = l >> 6;
    const int sx = (lx & 1) ? 1 : -1, sy = (ly & 1) ? 1 : -1, sz = (lz & 1) ? 1 : -1;
    float s = 0.0f;
#pragma unroll
    for (int row = 0; row < 8; ++row) {
        const int qx = (lx >> 1) + (row & 1) * sx, qy = (ly >> 1) + ((row >> 1) & 1) * sy,
                  qz = (lz >> 1) + (row >> 2) * sz;  // in [−1, 4]: this brick's 4³ block or a neighbour's
        const int b = row == 0 ? slot : nbr27[27 * slot + sparse_offset_index(qx >> 2, qy >> 2, qz >> 2)];
        const int at = b < 0 ? -1 : map1[b * 64 + ((qz & 3) * 4 + (qy & 3)) * 4 + (qx & 3)];
        const int u = at >= 0 ? position1[at] : mc;
        const float w = ((row & 1) ? 0.25f : 0.75f) * ((row & 2) ? 0.25f : 0.75f) * ((row & 4) ? 0.25f : 0.75f);
        s = row == 0 ? w * xc[u] : s + w * xc[u];
    }
    return s;
}

// mg_prolong_add onto level 0 (x_f += prolong_value's sum; all_unknowns = 0: the red ones).
extern "C" __global__ void mg_prolong_add_bricks(const float* __restrict__ xc,
                                                 const unsigned long long* __restrict__ ptrs,
                                                 const int* __restrict__ sizes, int all_unknowns,
                                                 float* __restrict__ xf, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const long long* cells0 = (const long long*)ptrs[BT_CELLS0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int* map1 = (const int*)ptrs[BT_MAP1];
    const int* position1 = (const int*)ptrs[BT_POSITION1];
    const int m = sizes[all_unknowns], mc = sizes[3];
    RANGE(f, 0, m) xf[f] = xf[f] + prolong_value_bricks(xc, nbr27, map1, position1, mc, (int)cells0[f]);
}

// ---- A block a brick (BRICK_TRANSFERS "shared"): the brick's neighbourhood of the finer
// values gathered once into shared memory, each value then read by every stencil that needs it
// (a fine r by up to 8 restrictions, a coarse x by up to 27 prolongations) instead of through
// the look-ups each time. The same indices give the same values; each output is one thread's
// sum in the same order. Grid-stride over the pool's slots (the candidates' count / 64); a free
// slot (its own entry of nbr27 −1) has no candidate and no level-0 unknown.
#define BT_NEAR_F 10  // fine cells −1 … 8 per axis around a brick: its level-1 cells' restriction stencils
#define BT_NEAR_C 6   // level-1 cells −1 … 4 per axis around a brick's 4³: its cells' prolongation stencils

extern "C" __global__ void mg_restrict_bricks_shared(const float* __restrict__ rf,
                                                     const unsigned long long* __restrict__ ptrs,
                                                     const int* __restrict__ sizes, float* __restrict__ bc,
                                                     const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ float r_near[BT_NEAR_F * BT_NEAR_F * BT_NEAR_F];
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int* map1 = (const int*)ptrs[BT_MAP1];
    const int* position1 = (const int*)ptrs[BT_POSITION1];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), mf = sizes[1], mc = sizes[3];
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (nbr27[27 * slot + 13] < 0) continue;  // the same for the whole block
        for (int i = threadIdx.x; i < BT_NEAR_F * BT_NEAR_F * BT_NEAR_F; i += blockDim.x) {
            const int x = i % BT_NEAR_F - 1, y = (i / BT_NEAR_F) % BT_NEAR_F - 1, z = i / (BT_NEAR_F * BT_NEAR_F) - 1;
            const int b = nbr27[27 * slot + sparse_offset_index(x >> 3, y >> 3, z >> 3)];
            r_near[i] = rf[b < 0 ? mf : position0[b * SPARSE_CELLS + (((z & 7) << 6) | ((y & 7) << 3) | (x & 7))]];
        }
        __syncthreads();
        for (int q = threadIdx.x; q < 64; q += blockDim.x) {
            const int u = brick_coarse_unknown(map1, position1, mc, slot * 64 + q);
            if (u < 0) continue;
            // fine cell 2q − 1 + (ix, iy, iz) at r_near[(z + 1)·100 + (y + 1)·10 + x + 1]
            const int at = (2 * (q >> 4) * BT_NEAR_F + 2 * ((q >> 2) & 3)) * BT_NEAR_F + 2 * (q & 3);
            float s = 0.0f;
#pragma unroll
            for (int row = 0; row < 64; ++row) {
                const float w = axis_weight(row & 3) * axis_weight((row >> 2) & 3) * axis_weight(row >> 4);
                const float r = r_near[at + ((row >> 4) * BT_NEAR_F + ((row >> 2) & 3)) * BT_NEAR_F + (row & 3)];
                s = row == 0 ? w * r : s + w * r;
            }
            bc[u] = 0.5f * s;
        }
        __syncthreads();
    }
}

extern "C" __global__ void mg_prolong_add_bricks_shared(const float* __restrict__ xc,
                                                        const unsigned long long* __restrict__ ptrs,
                                                        const int* __restrict__ sizes, int all_unknowns,
                                                        float* __restrict__ xf, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ float x_near[BT_NEAR_C * BT_NEAR_C * BT_NEAR_C];
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int* map1 = (const int*)ptrs[BT_MAP1];
    const int* position1 = (const int*)ptrs[BT_POSITION1];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m = sizes[all_unknowns], mc = sizes[3];
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (nbr27[27 * slot + 13] < 0) continue;
        for (int i = threadIdx.x; i < BT_NEAR_C * BT_NEAR_C * BT_NEAR_C; i += blockDim.x) {
            const int qx = i % BT_NEAR_C - 1, qy = (i / BT_NEAR_C) % BT_NEAR_C - 1, qz = i / (BT_NEAR_C * BT_NEAR_C) - 1;
            const int b = nbr27[27 * slot + sparse_offset_index(qx >> 2, qy >> 2, qz >> 2)];
            const int at = b < 0 ? -1 : map1[b * 64 + ((qz & 3) * 4 + (qy & 3)) * 4 + (qx & 3)];
            x_near[i] = xc[at >= 0 ? position1[at] : mc];
        }
        __syncthreads();
        for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
            const int f = position0[slot * SPARSE_CELLS + l];
            if (f >= m) continue;  // not an unknown (m0), or black where the red alone are prolonged
            const int lx = l & 7, ly = (l >> 3) & 7, lz = l >> 6;
            const int sx = (lx & 1) ? 1 : -1, sy = (ly & 1) ? BT_NEAR_C : -BT_NEAR_C,
                      sz = (lz & 1) ? BT_NEAR_C * BT_NEAR_C : -BT_NEAR_C * BT_NEAR_C;
            const int at = (((lz >> 1) + 1) * BT_NEAR_C + (ly >> 1) + 1) * BT_NEAR_C + (lx >> 1) + 1;
            float s = 0.0f;
#pragma unroll
            for (int row = 0; row < 8; ++row) {
                const float w = ((row & 1) ? 0.25f : 0.75f) * ((row & 2) ? 0.25f : 0.75f) * ((row & 4) ? 0.25f : 0.75f);
                const float x = x_near[at + (row & 1) * sx + ((row >> 1) & 1) * sy + (row >> 2) * sz];
                s = row == 0 ? w * x : s + w * x;
            }
            xf[f] = xf[f] + s;
        }
        __syncthreads();
    }
}

// Level 0's brick smoother, the block-a-brick kernels' device functions (flip_sparse_pressure_brick_smooth.cu's
// notes; a part of that file kept apart for its length, issue 24: modules under ~500 lines, helper s23k): the
// shared brick (BrickSmoothShared), a cell's parity and shared place, a halo place (bs_face), the brick's loads
// (bs_load), a colour's sweep (bs_sweep), the pre- and post-smoothing (bs_pre, bs_post) and the post-smoothing's
// r·z (bs_finish_rz). Included by flip_sparse_pressure_brick_smooth.cu after voxfx_mg_bricks.cuh,
// voxfx_mg_cell.cuh, voxfx_reduce.cuh and voxfx_sparse.cuh, before its entries and the span kernels, which use
// these names. Compiled with the V-cycle's options (--fmad=false) as the kernel file.
//
// Each phase is a loop over the block's threads with a barrier after it (the host harness runs a
// block as one thread). A thread issues the loads of a batch of its cells and halo places before
// it uses any (the chains position → b, diag, x and nbr27 → position → halo x overlap); a colour
// pass gives each thread cells of that colour only.
#pragma once

#define BS_PAD 10      // cells a side of a brick with its halo
#define BS_FACES 384   // the halo places the sweeps read: 6 faces of 64 (no edge, no corner)
#define BS_BATCH 4     // a thread's cells (and halo places) whose loads it issues together
#define BS_THREADS 512 // the most threads a block; fewer loop over the cells
#ifndef BRICK_SWEEPS   // sweeps inside a brick each way (sparse_multigrid_bricks.SWEEPS)
#define BRICK_SWEEPS MG_SWEEPS
#endif

struct BrickSmoothShared {
    float x[BS_PAD * BS_PAD * BS_PAD];  // the brick's x and its six faces' halo (edges and corners unused)
    float b[SPARSE_CELLS], diag[SPARSE_CELLS];
    int unknown[SPARSE_CELLS];  // the cell's unknown, m where none
    int red_parity;             // (x + y + z) & 1 of the brick's red cells (from any unknown of it)
};

// (x + y + z) & 1 of brick cell l.
__device__ __forceinline__ int bs_parity(int l)
{
    return (l ^ (l >> 3) ^ (l >> 6)) & 1;
}

// The shared place of brick cell l (x + 8y + 64z).
__device__ __forceinline__ int bs_place(int l)
{
    return (((l >> 6) + 1) * BS_PAD + ((l >> 3) & 7) + 1) * BS_PAD + (l & 7) + 1;
}

// Halo place i (0 ≤ i < 384): face f = i / 64 (−x, +x, −y, +y, −z, +z), its 64 cells; *place* its
// shared place, *dir* the nbr27 entry of the brick across the face, *cell* the cell of that brick
// it mirrors (the coordinate across the face 0 ↔ 7).
__device__ __forceinline__ void bs_face(int i, int& place, int& dir, int& cell)
{
    const int f = i >> 6, axis = f >> 1, up = f & 1, p = i & 63, a = p & 7, c = p >> 3;
    const int o = axis == 0 ? 1 : (axis == 1 ? 3 : 9);
    dir = 13 + (up ? o : -o);
    const int at = up ? 0 : 7;
    const int lx = axis == 0 ? at : a, ly = axis == 1 ? at : (axis == 0 ? a : c), lz = axis == 2 ? at : c;
    cell = (lz << 6) | (ly << 3) | lx;
    const int hx = axis == 0 ? (up ? 8 : -1) : lx, hy = axis == 1 ? (up ? 8 : -1) : ly,
              hz = axis == 2 ? (up ? 8 : -1) : lz;
    place = ((hz + 1) * BS_PAD + hy + 1) * BS_PAD + hx + 1;
}

// The brick at *slot* into shared memory: its cells' unknowns, b, diag and x (x_in's where given,
// else 0), the six faces' halo (x_in's across each face where *halo*, else 0); every load of a
// batch of a thread's cells issued before its values are used (the chains position → b, diag,
// x and nbr27 → position → x overlap). A free slot (nbr27's centre −1: its positions are not
// read as unknowns) holds none. Ends with a barrier; whether the brick holds an unknown.
__device__ __forceinline__ bool bs_load(BrickSmoothShared& sh, int slot, const int* __restrict__ position0,
                                        const int* __restrict__ nbr27, const float* __restrict__ b,
                                        const float* __restrict__ diag, const float* __restrict__ x_in, bool halo,
                                        int m_red, int m)
{
    const int T = blockDim.x, t = threadIdx.x;
    const bool live = nbr27[27 * slot + 13] >= 0;
    const int* pos = position0 + (size_t)slot * SPARSE_CELLS;
    int any = 0;
    for (int j0 = 0; j0 * T < SPARSE_CELLS; j0 += BS_BATCH) {
        int u[BS_BATCH], s[BS_BATCH];
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int l = t + (j0 + k) * T, i = l;
            u[k] = l < SPARSE_CELLS ? pos[l] : m;
            s[k] = -1;
            if (halo && i < BS_FACES) {
                int place, dir, cell;
                bs_face(i, place, dir, cell);
                s[k] = nbr27[27 * slot + dir];
            }
        }
        float bv[BS_BATCH], dv[BS_BATCH], xv[BS_BATCH];
        int h[BS_BATCH];
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int i = t + (j0 + k) * T;
            if (!live) u[k] = m;
            const bool on = u[k] < m;
            bv[k] = on ? b[u[k]] : 0.0f;
            dv[k] = on ? diag[u[k]] : 1.0f;
            xv[k] = on && x_in ? x_in[u[k]] : 0.0f;
            h[k] = m;
            if (live && s[k] >= 0 && i < BS_FACES) {
                int place, dir, cell;
                bs_face(i, place, dir, cell);
                h[k] = position0[(size_t)s[k] * SPARSE_CELLS + cell];
            }
        }
        float hv[BS_BATCH];
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) hv[k] = h[k] < m ? x_in[h[k]] : 0.0f;
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int l = t + (j0 + k) * T;
            if (l < SPARSE_CELLS) {
                sh.unknown[l] = u[k];
                sh.b[l] = bv[k];
                sh.diag[l] = dv[k];
                sh.x[bs_place(l)] = xv[k];
                if (u[k] < m) {  // every unknown of the brick writes the same value
                    any = 1;
                    sh.red_parity = bs_parity(l) ^ (u[k] >= m_red);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int i = t + (j0 + k) * T;
            if (i < BS_FACES) {
                int place, dir, cell;
                bs_face(i, place, dir, cell);
                sh.x[place] = hv[k];
            }
        }
    }
    return __syncthreads_or(any);
}

// One colour inside the brick, then a barrier: its 256 cells (red: (x + y + z) & 1 = red_parity,
// the unknowns < m_red) a thread each in turn, k → z = k / 32, y = k / 4 % 8, x = 2 (k % 4) + the
// parity's bit, so every lane of a warp has a cell of the colour (the cells of one colour are
// independent: their order does not change a bit).
__device__ __forceinline__ void bs_sweep(BrickSmoothShared& sh, int colour, int m)
{
    const int parity = colour ^ sh.red_parity;
    for (int k = threadIdx.x; k < SPARSE_CELLS / 2; k += blockDim.x) {
        const int z = k >> 5, y = (k >> 2) & 7, l = (z << 6) | (y << 3) | ((k & 3) << 1) | ((y + z + parity) & 1);
        if (sh.unknown[l] >= m) continue;
        const int p = bs_place(l);
        float s = sh.x[p - 1];
        s = s + sh.x[p + 1];
        s = s + sh.x[p - BS_PAD];
        s = s + sh.x[p + BS_PAD];
        s = s + sh.x[p - BS_PAD * BS_PAD];
        s = s + sh.x[p + BS_PAD * BS_PAD];
        const float g = (sh.b[l] + s) / sh.diag[l];
        sh.x[p] = MG_OMEGA == 1.0f ? g : relaxed(sh.x[p], g);
    }
    __syncthreads();
}

// Pre-smoothing from x = 0: BRICK_SWEEPS × (red, black) inside each brick, the halo 0; x written
// on level 0's unknowns (its other entries untouched). Any grid (grid-stride over the slots).
__device__ __forceinline__ void bs_pre(const float* __restrict__ b, const unsigned long long* __restrict__ ptrs,
                                       const float* __restrict__ diag, const int* __restrict__ sizes,
                                       float* __restrict__ x, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ BrickSmoothShared sh;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (!bs_load(sh, slot, position0, nbr27, b, diag, nullptr, false, m_red, m)) continue;
        for (int sweep = 0; sweep < BRICK_SWEEPS; ++sweep) {
            bs_sweep(sh, 0, m);
            bs_sweep(sh, 1, m);
        }
        for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
            const int u = sh.unknown[l];
            if (u < m) x[u] = sh.x[bs_place(l)];
        }
        __syncthreads();
    }
}

// The post-smoothing's r·z: each block's partial *rz* (its threads') into block_rz[block]; the last block
// to finish (ticket, 0 between launches) sums them in block order into partials_rz[0], the rest of
// partials_rz[0, reduce_blocks) 0 — the same total for the same grid and block every run.
__device__ __forceinline__ void bs_finish_rz(double rz, double* __restrict__ block_rz, int* __restrict__ ticket,
                                             double* __restrict__ partials_rz, int reduce_blocks)
{
    __shared__ int last;
    block_sum2(rz, 0.0, block_rz, nullptr);  // thread 0 writes block_rz[blockIdx.x]
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(ticket, 1) == (int)gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    const volatile double* all = block_rz;
    const int n = gridDim.x;
    double v = 0.0;
    for (int i0 = threadIdx.x; i0 < n; i0 += BS_BATCH * 2 * blockDim.x) {  // 8 loads in flight, added in order
        double a[BS_BATCH * 2];
#pragma unroll
        for (int k = 0; k < BS_BATCH * 2; ++k) {
            const int i = i0 + k * blockDim.x;
            a[k] = i < n ? all[i] : 0.0;
        }
#pragma unroll
        for (int k = 0; k < BS_BATCH * 2; ++k)
            if (i0 + k * (int)blockDim.x < n) v += a[k];
    }
    __shared__ double warps_rz[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) warps_rz[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? warps_rz[lane] : 0.0;
        v = warp_sum(v);  // the total in thread 0, which writes partials_rz[0]
    }
    for (int i = threadIdx.x; i < reduce_blocks; i += blockDim.x) partials_rz[i] = i ? 0.0 : v;
    if (threadIdx.x == 0) *ticket = 0;
}

// Post-smoothing: x_out = BRICK_SWEEPS × (black, red) inside each brick from x_in, the halo x_in;
// r·z = Σ b·x_out (b the CG residual) into partials_rz[0], partials_rz[1..reduce_blocks) 0 (the
// layout finish_beta sums). Any grid: each block's partial into block_rz[block]; the last block
// to finish (ticket, 0 between launches) sums them in block order — the same total for the same
// grid and block every run.
__device__ __forceinline__ void bs_post(const float* __restrict__ x_in, const float* __restrict__ b,
                                        const unsigned long long* __restrict__ ptrs, const float* __restrict__ diag,
                                        const int* __restrict__ sizes, float* __restrict__ x_out,
                                        double* __restrict__ block_rz, int* __restrict__ ticket,
                                        double* __restrict__ partials_rz, int reduce_blocks,
                                        const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ BrickSmoothShared sh;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    double rz = 0.0;
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (!bs_load(sh, slot, position0, nbr27, b, diag, x_in, true, m_red, m)) continue;
        for (int sweep = 0; sweep < BRICK_SWEEPS; ++sweep) {
            bs_sweep(sh, 1, m);
            bs_sweep(sh, 0, m);
        }
        for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
            const int u = sh.unknown[l];
            if (u < m) {
                const float xc = sh.x[bs_place(l)];
                x_out[u] = xc;
                rz += (double)sh.b[l] * xc;
            }
        }
        __syncthreads();
    }
    bs_finish_rz(rz, block_rz, ticket, partials_rz, reduce_blocks);
}

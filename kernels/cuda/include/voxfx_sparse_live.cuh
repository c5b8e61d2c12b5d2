// The idle-brick kernels of flip_sparse_transfer.cu (sparse_transfer.P2G_TAILS "live", helper h18f),
// kept apart so that the module stays under ~500 lines: included once, at the end of
// flip_sparse_transfer.cu, whose sparse_cell_step and sparse_extrapolate_face_in<true> they call
// (one translation unit: the same PTX as when they were written there).
#pragma once

// ------------------------------------------------------------------------------ idle bricks (helper h18f)
// sparse_transfer.P2G_TAILS "live": P2G's division, the first ring and the tail skip the work of the
// pool's idle bricks, those with no particle in themselves or their 26 neighbours. A face is valid
// after P2G only within one cell of a particle's cell (its trilinear stencil), after k rings within
// 1 + k cells; an idle brick's cells lie ≥ 9 cells from every particle (its neighbours are 8 wide), so
// through 7 rings they stay invalid with P2G's 0 (no valid neighbour: the ring copies the value).
// The skipping kernels write what the full ones would there without reading it: the division 0 and
// invalid, the tail's old faces 0, masks 0 and the boundaries of a 0 face; the first ring nothing (the
// tail and later rings never read an idle brick's ring values: sparse_extrapolate_face_in<true>).

// Step 1, one thread per pool cell: occupied[slot] = 1 where a cell of the slot holds a particle
// (the binning's count; the bin of particles without an active cell, count[cells], is not read).
// occupied zeroed first; the stores race with one value.
extern "C" __global__ void brick_occupied_sparse(const int* __restrict__ count, long long cells,
                                                 unsigned char* __restrict__ occupied)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    if (count[t] > 0) occupied[t >> 9] = 1;
}

// Step 2, one thread per pool slot: live[slot] = 1 where the slot's brick or one of its 26
// neighbours (nbr27, −1 inactive; a free slot has none) is occupied.
extern "C" __global__ void brick_live_sparse(const unsigned char* __restrict__ occupied,
                                             const int* __restrict__ nbr27, long long slots,
                                             unsigned char* __restrict__ live)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= slots) return;
    unsigned char any = 0;
#ifdef IDLE_MUTANT  // tests: the brick's own cells only (a live neighbour of an occupied brick left idle)
    any = occupied[s];
#else
    for (int k = 0; k < 27; ++k) {
        const int b = nbr27[27 * s + k];
        if (b >= 0) any |= occupied[b];
    }
#endif
    live[s] = any;
}

// extrapolate_sparse over the live bricks only: an idle brick's cells are left unwritten.
extern "C" __global__ void extrapolate_live_sparse(const float* __restrict__ su, const float* __restrict__ sv,
                                                   const float* __restrict__ sw, const unsigned char* __restrict__ mu,
                                                   const unsigned char* __restrict__ mv,
                                                   const unsigned char* __restrict__ mw,
                                                   const unsigned char* __restrict__ exists_u,
                                                   const unsigned char* __restrict__ exists_v,
                                                   const unsigned char* __restrict__ exists_w,
                                                   const int* __restrict__ nbr27, long long cells,
                                                   float* __restrict__ du, float* __restrict__ dv,
                                                   float* __restrict__ dw, unsigned char* __restrict__ nu,
                                                   unsigned char* __restrict__ nv, unsigned char* __restrict__ nw,
                                                   const unsigned char* __restrict__ live)
{
    extrapolate_ring_cell<1>(su, sv, sw, mu, mv, mw, exists_u, exists_v, exists_w, nbr27, cells, du, dv, dw, nu, nv, nw,
                             live);
}

// extrapolate_boundaries_sparse with the idle bricks' values written unread: the ring's value
// there is P2G's 0 (the old faces 0, the masks 0), and the boundaries take it as the full
// kernel does (a solid or missing face the solid's velocity, else 0 + the force).
extern "C" __global__ void extrapolate_boundaries_live_sparse(
    const float* __restrict__ su, const float* __restrict__ sv, const float* __restrict__ sw,
    const unsigned char* __restrict__ mu, const unsigned char* __restrict__ mv, const unsigned char* __restrict__ mw,
    const unsigned char* __restrict__ exists_u, const unsigned char* __restrict__ exists_v,
    const unsigned char* __restrict__ exists_w, const int* __restrict__ nbr27, long long cells,
    const float* __restrict__ solid_u, const float* __restrict__ solid_v, const float* __restrict__ solid_w,
    const unsigned char* __restrict__ solid, int add, float add_u, float add_v, float add_w,
    float* __restrict__ old_u, float* __restrict__ old_v, float* __restrict__ old_w, float* __restrict__ du,
    float* __restrict__ dv, float* __restrict__ dw, unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
    unsigned char* __restrict__ nw, const unsigned char* __restrict__ live)
{
    extrapolate_boundaries_cell<true>(su, sv, sw, mu, mv, mw, exists_u, exists_v, exists_w, nbr27, cells, solid_u,
                                      solid_v, solid_w, solid, add, add_u, add_v, add_w, old_u, old_v, old_w, du, dv,
                                      dw, nu, nv, nw, live);
}

// extrapolate_sparse after the projection (the fluid-face masks: a FLUID cell's faces, FLUID ⊆ the
// occupied bricks' cells) with the idle bricks copied: there no face is valid through 7 rings, so
// the ring's value is src's and its mask 0, written without the masks, exists or neighbours read.
extern "C" __global__ void extrapolate_copy_live_sparse(
    const float* __restrict__ su, const float* __restrict__ sv, const float* __restrict__ sw,
    const unsigned char* __restrict__ mu, const unsigned char* __restrict__ mv, const unsigned char* __restrict__ mw,
    const unsigned char* __restrict__ exists_u, const unsigned char* __restrict__ exists_v,
    const unsigned char* __restrict__ exists_w, const int* __restrict__ nbr27, long long cells, float* __restrict__ du,
    float* __restrict__ dv, float* __restrict__ dw, unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
    unsigned char* __restrict__ nw, const unsigned char* __restrict__ live)
{
    extrapolate_ring_cell<2>(su, sv, sw, mu, mv, mw, exists_u, exists_v, exists_w, nbr27, cells, du, dv, dw, nu, nv, nw,
                             live);
}

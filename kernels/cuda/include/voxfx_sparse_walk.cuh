// SparseMacGrid.sample's corner walk on the device (kernels/grid/sparse_mac.py, the NumPy
// reference): the look-up of flip_sparse_g2p.cu's g2p_advect_sparse (corner_cells) and of the
// narrow band's trace (flip_sparse_band.cu band_sample_face). Callers compile with --fmad=false.
#pragma once
#include "voxfx_sparse.cuh"

// One axis of the look-up at c on the lattice of size s (closed; else unbounded): closed, c
// clamped to [0, s − 1], i0 = max(min(⌊c⌋, s − 2), 0) and same = (min(i0 + 1, s − 1) = i0);
// open, c (NaN → 0), i0 = ⌊c⌋ and same = false. t = c − i0.
__device__ __forceinline__ void walk_axis(float c, int closed, int s, long long& i0, bool& same, float& t)
{
    if (closed) {
        c = fminf(fmaxf(c, 0.0f), (float)(s - 1));
        i0 = max(min((long long)c, (long long)s - 2), 0LL);
        same = min(i0 + 1, (long long)s - 1) == i0;
    } else {
        c = isfinite(c) ? c : 0.0f;
        i0 = (long long)floorf(c);
        same = false;
    }
    t = c - (float)i0;
}

// The 8 corner cells (x fastest; −1: reads 0) walked from idx[0] by +x, +y, +z steps: a
// missing cell on the way stays missing, as grid.nbr's walk; an axis with one sample (same)
// repeats its corner.
__device__ __forceinline__ void walk_corners(const int* __restrict__ nbr27, const bool same[3], int idx[8])
{
    idx[1] = same[0] ? idx[0] : sparse_cell_step(nbr27, idx[0], 1);
    idx[2] = same[1] ? idx[0] : sparse_cell_step(nbr27, idx[0], 3);
    idx[3] = same[1] ? idx[1] : sparse_cell_step(nbr27, idx[1], 3);
    for (int q = 0; q < 4; ++q) idx[4 + q] = same[2] ? idx[q] : sparse_cell_step(nbr27, idx[q], 5);
}

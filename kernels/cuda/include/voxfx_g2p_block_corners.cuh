// The block G2P kernel's corner pieces (flip_sparse_g2p_block.cu's notes; a part of that file kept apart for
// its length, issue 24: modules under ~500 lines, helper s23g): a lattice axis's corners (axis_corners), the face
// sets a sample reads, the warp's pairs test, the slow path's corners (block_corners_slow) and the fast paths'
// blend (blend_fields). Included by flip_sparse_g2p_block.cu after voxfx_g2p.cuh, voxfx_g2p_bricks.cuh,
// voxfx_g2p_home.cuh and voxfx_sparse_index.cuh (Home, corner_cells_fast, trilinear_blend, LATTICE_LIMIT), before
// its BLOCK_TABLE headers, which use these names. Compiled with --fmad=false as the kernel file.
#pragma once

// corner_axis of one lattice (box size s) at c, without the chain of the key-range test
// over the axes: i0, up, t, and whether ⌊c⌋ lies within the key range (open). Where every
// axis of a component lies within it, corner_axis gives these i0 and t.
struct AxisCorners {
    int i0, up;
    float t;
    bool in;
};

#ifndef BLOCK_UP_UNIFORM  // axis_corners' closed up as s != 1 (1; helper s22c, with BLOCK_TABLE 2), else per lane:
#define BLOCK_UP_UNIFORM (BLOCK_TABLE == 2)  // for s ≥ 2 i0 ≤ s − 2, so i0 + 1 ≤ s − 1; s = 1: i0 = 0 = s − 1; s ≤ 0:
#endif  // i0 = 0 > s − 1 (tests/unit/test_cuda_g2p_wtable_host.py checks s in [−3, 40) at edge points)

__device__ __forceinline__ AxisCorners axis_corners(float c, int closed, int s)
{
    AxisCorners A;
    if (closed) {
        c = fminf(fmaxf(c, 0.0f), (float)(s - 1));
        A.i0 = max(min((int)c, s - 2), 0);
#if BLOCK_UP_UNIFORM
        A.up = s != 1;  // = min(i0 + 1, s − 1) != i0 for every s (BLOCK_UP_UNIFORM): a launch's test, not a lane's
#else
        A.up = min(A.i0 + 1, s - 1) != A.i0;
#endif
        A.in = true;
    } else {
        c = isfinite(c) ? c : 0.0f;
        const float f = floorf(c);
        A.in = f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
        A.i0 = A.in ? (int)f : 0;
        A.up = 1;
    }
    A.t = c - (float)A.i0;
    return A;
}

// The face arrays a sample reads at the same corners: f[field][component].
struct FaceSets {
    const float* __restrict__ f[3][3];
};

#ifndef BLOCK_PAIRS  // block_sample's corner pairs and block_home_slot (1), or neither (0; VOXFX_SPARSE_G2P_CORNERS)
#define BLOCK_PAIRS 1
#endif

// p on every active lane of the warp (block_sample's pairs, within its divergent fast path: not
// voxfx_reduce.cuh's warp_all, whose mask is all 32 lanes); on the host harness the one lane's p.
__device__ __forceinline__ bool active_lanes_all(bool p)
{
#ifdef __CUDA_ARCH__
    return __all_sync(__activemask(), p);
#else
    return p;
#endif
}

// A sample's 8 corner cells and 3 fractions (a slow path's result by value).
struct Corners {
    int idx[8];
    float t[3];
};

// corner_cells_fast (voxfx_g2p_home.cuh) on the lattice of box (s0, s1, s2) at (a0, a1, a2):
// out of line (the rare cases).
__device__ __noinline__ Corners block_corners_slow(Home H, int closed, int s0, int s1, int s2, float a0, float a1,
                                                   float a2)
{
    const int s[3] = {s0, s1, s2};
    const float at[3] = {a0, a1, a2};
    Corners C;
    corner_cells_fast(H, closed, s, at, C.idx, C.t);
    return C;
}

// Component a of FIELDS sets of faces from its 8 corner cells idx (every one in an active brick: no test) and
// fractions t into out[field][a], with field 0's gradient row a unless grad is null: the fast paths' blend
// (block_sample's, tablew's; the word table's own loop stays, its PTX changed with it). The slow path's loop stands
// in each too: as one helper its registers were renumbered (helper s22r).
template <int FIELDS>
__device__ __forceinline__ void blend_fields(const FaceSets& F, int a, const int idx[8], const float t[3],
                                             float out[3][3], float* grad)
{
#pragma unroll
    for (int k = 0; k < FIELDS; ++k) {
        const float* __restrict__ f = F.f[k][a];
        float p[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) p[q] = f[idx[q]];
        out[k][a] = trilinear_blend(p, t[0], t[1], t[2], k == 0 && grad ? grad + 3 * a : nullptr);
    }
}

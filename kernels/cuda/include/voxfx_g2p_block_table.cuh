// The block G2P kernel's brick table (BLOCK_TABLE = 1, helper h21g; flip_sparse_g2p_block.cu's notes):
// included by flip_sparse_g2p_block.cu after voxfx_g2p_block_corners.cuh's AxisCorners, FaceSets, Corners,
// block_corners_slow and its own BLOCK_THREADS, whose names it uses. Its blend and slow path stand as written:
// blend_fields here swapped one XOR's operands in the PTX, a block_sample_slow helper renumbered registers (helper
// s22r). Compiled with --fmad=false as the kernel file.
#pragma once

// The particle's brick table (helper h21g): the 2 × 2 × 2 bricks from hb + s, s_a = −1 where the home cell ⌊g_a⌋ lies
// in the lower half of its brick (local coordinate < 4), else 0, so that every cell within 4 of ⌊g⌋ along each axis
// lies in it: both samples' corners, where the midpoint moved less than 2.5 cells (up to 3.5; the same table for
// both). Entry r (x | y << 1 | z << 2, nbr27's row at constant offsets) holds (slot_r − r) · SPARSE_CELLS, so a
// corner's pool index is its entry + v, v = r · 512 + its cell in the brick (table_read); kept in shared memory, a
// word a thread a brick, entry r of thread t at byte r · 512 + (t mod 128) · 4 + ⌊t / 128⌋ · 4096 (the lanes of a
// warp in 32 banks whatever their r): a corner's brick base is one load at v's bits 9–11 instead of 7 selects of 8
// registers (pick8), and the 8 registers go.
#include "voxfx_g2p_block_table_common.cuh"  // g2p_table, Table, table_load

// Entry (v's brick) + v: corner v's pool index.
__device__ __forceinline__ int table_read(const Table& T, unsigned v)
{
    return *(const int*)((const char*)g2p_table + (T.tt | (v & 0xE00u))) + (int)v;
}

// Axis d's part of v for a table coordinate k in [0, 16): its brick bit k >> 3 at 9 + d and its local coordinate
// k & 7 at 3d, ((k & 8) << (6 + d)) | ((k & 7) << 3d), written as k << 3d (the brick bit lands at 3d + 3) plus
// (k & 8) · (2^(6 + d) − 2^(3d)) (which moves it on to 9 + d): a shift, an AND and an IMAD with a constant instead
// of two ANDs, two shifts and an OR (helper h21i; equal for every k in [0, 16) and d in 0..2:
// tests/unit/test_cuda_g2p_table_host.py checks all 48; SASS, nvcc 13.0 sm_90, 4 × 256 and 8 × 128
// alike, whole entries: end 3,621 → 3,555 instructions, centred 4,173 → 4,110, APIC 3,763 → 3,699, centred APIC
// 4,311 → 4,243; the same registers and spills). A sample's k lie in [0, 16) where its fast path takes them
// (block_sample_table's test). OR_CODE (BLOCK_TABLE_OR's bit for the entry, helper h21n): h21g's earlier form,
// ((k & 8) << (6 + d)) | ((k & 7) << 3d), the same value (the same 48-case host test): h21i measured its own code
// −1.5% at the end of the substep but +0.6% time-centred (H100, the kernel alone; bench/RESULTS.md "h21i").
template <bool OR_CODE>
__device__ __forceinline__ unsigned table_axis_code(int k, int d)
{
    if (OR_CODE) return ((unsigned)(k & 8) << (6 + d)) | ((unsigned)(k & 7) << (3 * d));
    return ((unsigned)k << (3 * d)) + (unsigned)(k & 8) * ((64u << d) - (1u << (3 * d)));
}

// block_sample with the corners' bricks from table T: where the sample's corners lie in T's bricks and the
// block of them (block_sample's, its bounding bricks) is active, each corner's pool index is table_read of
// v = Σ_d e_d (per axis its brick bit at 9 + d and its local coordinate at 3d: additions without carries);
// else block_sample's slow path (g2p_advect_bricks' corners). The same cells as block_sample, hence the same
// bits. OR_CODE: the per-axis code's form (table_axis_code).
template <int FIELDS, bool OR_CODE>
__device__ __forceinline__ void block_sample_table(const Home& H, const Table& T, int closed, const int n[3],
                                                   const float g[3], const FaceSets& F, float out[3][3], float* grad)
{
    AxisCorners face[3], centre[3];
    bool ok = (T.act & 0xFFu) != 0u;
    unsigned lob = 0u, topb = 0u, e[3][4];  // e[d]: face lower, face upper, centre lower, centre upper
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        face[d] = axis_corners(g[d], closed, n[d] + 1);
        centre[d] = axis_corners(g[d] - 0.5f, closed, n[d]);
        const int cell = 8 * (H.hb[d] - (int)((T.act >> (8 + d)) & 1u));  // the table's first cell
        const int fl = face[d].i0 - cell, cl = centre[d].i0 - cell;
        const int k[4] = {fl, fl + face[d].up, cl, cl + centre[d].up};
        const int lo = min(fl, cl), top = max(k[1], k[3]);
        ok = ok && face[d].in && centre[d].in && (unsigned)(lo | top) < 16u;  // within the table's [0, 16)
        lob |= (unsigned)(lo >> 3) << d;
        topb |= (unsigned)(top >> 3) << d;
#pragma unroll
        for (int j = 0; j < 4; ++j) e[d][j] = table_axis_code<OR_CODE>(k[j], d);
    }
    // the bricks r with lob ⊆ r ⊆ topb (block_sample's block): the subsets of lob ^ topb (byte i of the
    // constant: the subsets of i), moved by lob; every one active
    const unsigned block = (unsigned)(0xFF5533110F050301ull >> (8u * ((lob ^ topb) & 7u))) << (lob & 7u);
    if (ok && (block & ~T.act & 0xFFu) == 0u) {
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            float t[3];
            int idx[8];
#pragma unroll
            for (int d = 0; d < 3; ++d) t[d] = a == d ? face[d].t : centre[d].t;
#pragma unroll
            for (int q = 0; q < 8; ++q)
                idx[q] = table_read(T, e[0][(a == 0 ? 0 : 2) + (q & 1)] + e[1][(a == 1 ? 0 : 2) + ((q >> 1) & 1)] +
                                           e[2][(a == 2 ? 0 : 2) + (q >> 2)]);
#pragma unroll
            for (int k = 0; k < FIELDS; ++k) {
                const float* __restrict__ f = F.f[k][a];
                float p[8];
#pragma unroll
                for (int q = 0; q < 8; ++q) p[q] = f[idx[q]];
                out[k][a] = trilinear_blend(p, t[0], t[1], t[2], k == 0 && grad ? grad + 3 * a : nullptr);
            }
        }
        return;
    }
#pragma unroll
    for (int a = 0; a < 3; ++a) {  // g2p_advect_bricks' corners
        const Corners C = block_corners_slow(H, closed, n[0] + (a == 0), n[1] + (a == 1), n[2] + (a == 2),
                                             a == 0 ? g[0] : g[0] - 0.5f, a == 1 ? g[1] : g[1] - 0.5f,
                                             a == 2 ? g[2] : g[2] - 0.5f);
#pragma unroll
        for (int k = 0; k < FIELDS; ++k)
            out[k][a] = blend_corners(F.f[k][a], C.idx, C.t, k == 0 && grad ? grad + 3 * a : nullptr);
    }
}

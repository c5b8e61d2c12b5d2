// The block G2P kernel's brick table with split corner codes (BLOCK_TABLE = 2, helper s22c;
// VOXFX_SPARSE_G2P_CORNERS=tablew): voxfx_g2p_block_table.cuh's table (the 2 × 2 × 2 bricks around the home cell,
// read once a particle from nbr27's row, a word a thread a brick in shared memory, the same layout and size), its
// entries the bricks' bases slot · SPARSE_CELLS, and a corner's code kept as two parts: the brick part (the entry's
// byte offset, brick bit d at 9 + d, the thread's offset OR-ed into x's) and the local part (its cell in the brick,
// k & 7 at 3d). A corner's entry address is one three-input OR of its axes' brick parts, its pool index one
// three-input add (entry + x's local part + the (y, z) local parts, paired once a component): an OR, a shared load
// and an add a corner, 4 adds a component, in place of the word table's 12 adds of v = e_x + e_y + e_z, an AND-OR,
// the load and an add. Included by flip_sparse_g2p_block.cu in place of voxfx_g2p_block_table.cuh, after
// voxfx_g2p_block_corners.cuh's AxisCorners, FaceSets, block_corners_slow, blend_fields and its BLOCK_THREADS; the
// same names (Table, table_load: voxfx_g2p_block_table_common.cuh; block_sample_table), the same cells, hence the
// same bits. The axis loop and the block's test stand as in voxfx_g2p_block_table.cuh: one helper for both (the
// coordinates k out, the codes after the test) changed the PTX of either (helper s22r). Compiled with --fmad=false
// as the kernel file.
#pragma once

#include "voxfx_g2p_block_table_common.cuh"  // g2p_table, Table, table_load

// block_sample with the corners' bricks from table T, the codes split (file notes): where the sample's corners lie
// in T's bricks and the block of them is active (voxfx_g2p_block_table.cuh's test, the same samples), each corner's
// pool index is its brick's base + its local parts; else block_sample's slow path (g2p_advect_bricks' corners). The
// same cells as block_sample, hence the same bits. OR_CODE: unused.
template <int FIELDS, bool OR_CODE>
__device__ __forceinline__ void block_sample_table(const Home& H, const Table& T, int closed, const int n[3],
                                                   const float g[3], const FaceSets& F, float out[3][3], float* grad)
{
    AxisCorners face[3], centre[3];
    bool ok = (T.act & 0xFFu) != 0u;
    unsigned lob = 0u, topb = 0u, bp[3][4], lp[3][4];  // per axis (face lo, hi, centre lo, hi): brick, local part
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
        for (int j = 0; j < 4; ++j) {
            bp[d][j] = ((unsigned)k[j] & 8u) << (6 + d);  // brick bit d at 9 + d (k in [0, 16) on the fast path)
            lp[d][j] = ((unsigned)k[j] & 7u) << (3 * d);
        }
    }
    const unsigned block = (unsigned)(0xFF5533110F050301ull >> (8u * ((lob ^ topb) & 7u))) << (lob & 7u);
    if (ok && (block & ~T.act & 0xFFu) == 0u) {
        const char* const base = (const char*)g2p_table;
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            const int jx = a == 0 ? 0 : 2, jy = a == 1 ? 0 : 2, jz = a == 2 ? 0 : 2;
            float t[3];
#pragma unroll
            for (int d = 0; d < 3; ++d) t[d] = a == d ? face[d].t : centre[d].t;
            int idx[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // (y, z) corner j: corners q = 2j (x lower) and 2j + 1 (x upper)
                const unsigned by = bp[1][jy + (j & 1)], bz = bp[2][jz + (j >> 1)];
                const unsigned yz = lp[1][jy + (j & 1)] + lp[2][jz + (j >> 1)];
#pragma unroll
                for (int qx = 0; qx < 2; ++qx) {
                    const int e = *(const int*)(base + ((T.tt | bp[0][jx + qx]) | by | bz));
#ifndef WTABLE_MUTANT  // the host test's mutant (tests/unit/test_cuda_g2p_wtable_host.py): the (y, z) local
                    idx[2 * j + qx] = e + (int)(lp[0][jx + qx] + yz);
#else  // part left out (the corners' cells along y and z the brick's first)
                    idx[2 * j + qx] = e + (int)lp[0][jx + qx];
#endif
                }
            }
            blend_fields<FIELDS>(F, a, idx, t, out, grad);
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

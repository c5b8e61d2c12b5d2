// The block G2P kernel's brick table with split corner codes (BLOCK_TABLE = 2, helper s22c;
// VOXFX_SPARSE_G2P_CORNERS=tablew): voxfx_g2p_block_table.cuh's table (the 2 × 2 × 2 bricks around the home cell,
// read once a particle from nbr27's row, a word a thread a brick in shared memory, the same layout and size), its
// entries the bricks' bases slot · SPARSE_CELLS, and a corner's code kept as two parts: the brick part (the entry's
// byte offset, brick bit d at 9 + d, the thread's offset OR-ed into x's) and the local part (its cell in the brick,
// k & 7 at 3d). A corner's entry address is one three-input OR of its axes' brick parts, its pool index one
// three-input add (entry + x's local part + the (y, z) local parts, paired once a component): an OR, a shared load
// and an add a corner, 4 adds a component, in place of the word table's 12 adds of v = e_x + e_y + e_z, an AND-OR,
// the load and an add. Included by flip_sparse_g2p_block.cu in place of voxfx_g2p_block_table.cuh, after its
// AxisCorners, FaceSets, Corners, block_corners_slow and BLOCK_THREADS; the same names (Table, table_load,
// block_sample_table), the same cells, hence the same bits. Compiled with --fmad=false as the kernel file.
#pragma once

#define G2P_TABLE_WORDS (((BLOCK_THREADS + 127) / 128) * 1024)
__shared__ int g2p_table[G2P_TABLE_WORDS];

struct Table {
    unsigned act;  // bit r: brick r active (0: no table); bit 8 + a: s_a = −1 (voxfx_g2p_block_table.cuh's)
    unsigned tt;  // this thread's byte offset in g2p_table (voxfx_g2p_block_table.cuh's layout)
};

// Home H's table (H.slot ≥ 0; fl: ⌊g⌋) into g2p_table: 8 entries of nbr27's row, brick r's base slot_r · 512 at
// byte r · 512 + tt.
__device__ __forceinline__ Table table_load(const Home& H, const int fl[3])
{
    Table T;
    const unsigned t = threadIdx.x;
    T.tt = ((t >> 7) << 12) | ((t & 127u) << 2);
    int s[3];
    T.act = 0u;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        s[a] = (fl[a] & 7) < 4 ? -1 : 0;
        T.act |= (unsigned)(s[a] & 1) << (8 + a);
    }
    const int* __restrict__ row = H.nbr27 + 27 * H.slot + sparse_offset_index(s[0], s[1], s[2]);
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int slot = row[(r & 1) + 3 * ((r >> 1) & 1) + 9 * (r >> 2)];
        T.act |= (unsigned)(slot >= 0) << r;
        *(int*)((char*)g2p_table + T.tt + 512 * r) = slot * SPARSE_CELLS;  // an immediate offset
    }
    return T;
}

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

// The block G2P kernel's brick table in x-pairs (BLOCK_TABLE = 2, helper s22c; VOXFX_SPARSE_G2P_CORNERS=tablex):
// voxfx_g2p_block_table.cuh's table (the 2 × 2 × 2 bricks around the home cell, read once a particle from nbr27's
// row) kept as pairs of bricks along x, so that one 64-bit shared load gives the brick bases of a component's two
// corners along x. Included by flip_sparse_g2p_block.cu in place of voxfx_g2p_block_table.cuh, after its
// AxisCorners, FaceSets, Corners, block_corners_slow and BLOCK_THREADS; the same names (Table, table_load,
// block_sample_table), the same cells, hence the same bits. Compiled with --fmad=false as the kernel file.
//
// Why (SASS of g2p_advect_block_end, nvcc 13.0, sm_90, 8 × 128, read here): with the word table a corner costs its
// share of v = e_x + e_y + e_z (12 adds a component), an AND-OR for the shared address, a shared load and an add
// (36 instructions a component besides its loads and their addresses), 72 a sample of them. Here, for the
// brick bits (b_lo, b_hi) of the component's x lattice — (0, 0), (0, 1) or (1, 1), xsel = b_lo + b_hi — the pair
// (base of brick (b_lo, y, z), base of brick (b_hi, y, z)) is stored for each of the four (y, z) bricks and each
// xsel: 12 pairs (96 B) a thread. A component's 8 corners: 4 shared 64-bit loads at tt + xsel·P + y·3P + z·6P
// (P = the pairs' stride, BLOCK_THREADS · 8 B; a three-input add each), the (y, z) local parts paired (4 adds),
// and a corner's pool index = its base + its x local part + its (y, z) part (one three-input add): ~21 instead of
// 36. The bases are slot · SPARSE_CELLS (the word table's (slot − r) · SPARSE_CELLS + r · SPARSE_CELLS).
//
// Layout: pair p of thread t at byte p · BLOCK_THREADS · 8 + t · 8 (the lanes of a warp in consecutive 8-byte
// words whatever their p: a 64-bit load of a warp in its two wavefronts, no bank conflict; 96 B a thread, 96 KiB an
// SM at 1,024 threads).
#pragma once

#define G2P_XTABLE_PAIRS 12
__shared__ int2 g2p_xtable[G2P_XTABLE_PAIRS * BLOCK_THREADS];

struct Table {
    unsigned act;  // bit r: brick r active (0: no table); bit 8 + a: s_a = −1 (voxfx_g2p_block_table.cuh's)
    unsigned tt;  // this thread's byte offset in g2p_xtable
};

// Home H's table (H.slot ≥ 0; fl: ⌊g⌋) into g2p_xtable: 8 entries of nbr27's row (voxfx_g2p_block_table.cuh's
// bricks), as 12 x-pairs: for (y, z) brick j = y + 2z and xsel 0, 1, 2 the pair (brick (0 | 1 | 1) of j's row ...)
// at p = 3j + xsel: (base_0, base_0), (base_0, base_1), (base_1, base_1).
__device__ __forceinline__ Table table_load(const Home& H, const int fl[3])
{
    Table T;
    T.tt = threadIdx.x * 8u;
    int s[3];
    T.act = 0u;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        s[a] = (fl[a] & 7) < 4 ? -1 : 0;
        T.act |= (unsigned)(s[a] & 1) << (8 + a);
    }
    const int* __restrict__ row = H.nbr27 + 27 * H.slot + sparse_offset_index(s[0], s[1], s[2]);
    char* const base = (char*)g2p_xtable + T.tt;
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // (y, z) brick j: bricks r = 2j (x lower) and 2j + 1 (x upper)
        const int s0 = row[3 * (j & 1) + 9 * (j >> 1)], s1 = row[1 + 3 * (j & 1) + 9 * (j >> 1)];
        T.act |= (unsigned)(s0 >= 0) << (2 * j) | (unsigned)(s1 >= 0) << (2 * j + 1);
        const int b0 = s0 * SPARSE_CELLS, b1 = s1 * SPARSE_CELLS;
        constexpr unsigned P = BLOCK_THREADS * 8u;
        *(int2*)(base + (3 * j) * P) = make_int2(b0, b0);  // immediate offsets
        *(int2*)(base + (3 * j + 1) * P) = make_int2(b0, b1);
        *(int2*)(base + (3 * j + 2) * P) = make_int2(b1, b1);
    }
    return T;
}

// block_sample with the corners' bricks from table T in x-pairs: where the sample's corners lie in T's bricks and
// the block of them is active (voxfx_g2p_block_table.cuh's test, the same samples), each component's corners from
// 4 pair loads (file notes); else block_sample's slow path (g2p_advect_bricks' corners). The same cells as
// block_sample, hence the same bits. OR_CODE: unused (the word table's per-axis code form).
template <int FIELDS, bool OR_CODE>
__device__ __forceinline__ void block_sample_table(const Home& H, const Table& T, int closed, const int n[3],
                                                   const float g[3], const FaceSets& F, float out[3][3], float* grad)
{
    constexpr unsigned P = BLOCK_THREADS * 8u;  // the pairs' stride, bytes
    AxisCorners face[3], centre[3];
    bool ok = (T.act & 0xFFu) != 0u;
    unsigned lob = 0u, topb = 0u;
    int b[3][4], l[3][4];  // per axis: face lower, face upper, centre lower, centre upper — brick bit, local part
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
            b[d][j] = (unsigned)k[j] >> 3;  // 0 or 1 where the fast path takes it (k in [0, 16))
            l[d][j] = (k[j] & 7) << (3 * d);
        }
    }
    const unsigned block = (unsigned)(0xFF5533110F050301ull >> (8u * ((lob ^ topb) & 7u))) << (lob & 7u);
    if (ok && (block & ~T.act & 0xFFu) == 0u) {
        const char* const base = (const char*)g2p_xtable;
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            const int jx = a == 0 ? 0 : 2, jy = a == 1 ? 0 : 2, jz = a == 2 ? 0 : 2;
#ifndef XTABLE_MUTANT  // the host test's mutant (tests/unit/test_cuda_g2p_xtable_host.py): the x-pair of the
            const unsigned xo = T.tt + (unsigned)(b[0][jx] + b[0][jx + 1]) * P;
#else  // lower corner's brick for both corners along x (wrong where they cross a brick)
            const unsigned xo = T.tt + (unsigned)(2 * b[0][jx]) * P;
#endif
            float t[3];
#pragma unroll
            for (int d = 0; d < 3; ++d) t[d] = a == d ? face[d].t : centre[d].t;
            int idx[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // (y, z) corner j: corners q = 2j (x lower) and 2j + 1 (x upper)
                const int qy = j & 1, qz = j >> 1;
                const int2 e = *(const int2*)(base + xo + (unsigned)b[1][jy + qy] * (3 * P) +
                                              (unsigned)b[2][jz + qz] * (6 * P));
                const int yz = l[1][jy + qy] + l[2][jz + qz];
                idx[2 * j] = e.x + l[0][jx] + yz;
                idx[2 * j + 1] = e.y + l[0][jx + 1] + yz;
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

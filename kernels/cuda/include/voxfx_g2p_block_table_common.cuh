// The block G2P kernel's brick table as its two corner codes share it (BLOCK_TABLE = 1, voxfx_g2p_block_table.cuh,
// helper h21g; BLOCK_TABLE = 2, voxfx_g2p_block_wtable.cuh, helper s22c): the table in shared memory and its load
// (the layout: voxfx_g2p_block_table.cuh's notes). Included by either header, after flip_sparse_g2p_block.cu's
// Home and BLOCK_THREADS. Compiled with --fmad=false as the kernel file.
#pragma once

#define G2P_TABLE_WORDS (((BLOCK_THREADS + 127) / 128) * 1024)
__shared__ int g2p_table[G2P_TABLE_WORDS];

struct Table {
    unsigned act;  // bit r: brick r active (0: no table, the home brick inactive or beyond the key range); bit
                   // 8 + a: s_a = −1 (the table's first brick hb + s; fewer live registers than its cell)
    unsigned tt;  // this thread's byte offset in g2p_table
};

// Home H's table (H.slot ≥ 0; fl: ⌊g⌋) into g2p_table: 8 entries of nbr27's row, brick r's at byte r · 512 + tt:
// (slot_r − r) · SPARSE_CELLS for the word codes (BLOCK_TABLE 1: table_read adds r · 512 with v), slot_r ·
// SPARSE_CELLS for the split codes (2).
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
        const int entry = BLOCK_TABLE == 2 ? slot : slot - r;
        *(int*)((char*)g2p_table + T.tt + 512 * r) = entry * SPARSE_CELLS;  // an immediate offset
    }
    return T;
}

// The sparse multigrid's first coarse level and its tables to and from level 0 by brick
// look-ups (issue 24): every query O(1), no sort of level 0's cells, no binary search into
// them. Launched by kernels/flip/sparse_pressure_setup.py (BRICKS); the same integers as
// the sorted-key kernels of flip_sparse_pressure_setup.cu (mgs_coarsen … mgs_restrict_table)
// and the NumPy TableBuilder, the reference.
//
// Why it works: the grid's bricks are 8 cells wide and 8-aligned, so the level-1 cells
// (I, J, K) = (i, j, k) >> 1 of level-0 brick `slot` are a 4 × 4 × 4 block of their own:
// candidate t = slot·64 + (qz·4 + qy)·4 + qx, I = 4·bx + qx. A level-1 cell's 8 children lie
// in its brick; its neighbours, its prolongation partners and its restriction stencil
// (2I − 1 … 2I + 2) lie in the brick or one of its 26 neighbours, read through the grid's
// brick table nbr27 (include/voxfx_sparse.cuh). Level 1's set comes in key order from ranks
// by brick-row segments (mgb_segment_counts, a scan, mgb_ranked; RANKS), or is emitted in
// candidate order and sorted by key on the host side (mgb_parents, cupy.argsort, mgb_sorted),
// and map1[t] (−1: none) gives each candidate's index in the sorted set.
//
// Layout: flat cells c = slot·512 + (lz·8 + ly)·8 + lx; slot_coords[3·slot + a] the brick's
// coordinates; cnt[4·l + 0..2] = (n, m_red, m) of level l as flip_sparse_pressure_setup.cu.
// Constants from Python (-D): KEY_BITS, BRICK_BITS (a brick key's bits a coordinate), CELL_AIR,
// CELL_FLUID.

#include "voxfx_mg_keys.cuh"  // cell_key, key_cell
#include "voxfx_sparse.cuh"   // sparse_cell_near, sparse_offset_index

#ifndef RANGE
#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))
#endif

// Per level-1 candidate t < n (n = capacity·64): flag 0 (not in level 1), 1 (SOLID: its 8
// children are in level 0's set, none FLUID) or 2 (FLUID: one is); take = flag ≠ 0; map1 = −1
// (mgb_sorted fills in the set's). A level-0 cell is in the set when its brick is active and
// it is not AIR (sparse_multigrid's level 0).
__device__ __forceinline__ void mgb_coarsen_body(const unsigned char* __restrict__ kind,
                                                 const bool* __restrict__ brick_active, int n,
                                                 unsigned char* __restrict__ flag, int* __restrict__ take,
                                                 int* __restrict__ map1)
{
    RANGE(t, 0, n)
    {
        const int slot = t >> 6, q = t & 63;
        unsigned char f = 0;
        if (brick_active[slot]) {
            const int x = 2 * (q & 3), y = 2 * ((q >> 2) & 3), z = 2 * (q >> 4);
            bool all = true, any_fluid = false;
            for (int child = 0; child < 8; ++child) {
                const int c = slot * SPARSE_CELLS + (((z + (child >> 2)) * 8 + y + ((child >> 1) & 1)) * 8) + x +
                              (child & 1);
                all = all && kind[c] != CELL_AIR;
                any_fluid = any_fluid || kind[c] == CELL_FLUID;
            }
            f = all ? (any_fluid ? 2 : 1) : 0;
        }
        flag[t] = f;
        take[t] = f != 0;
        map1[t] = -1;
    }
}

extern "C" __global__ void mgb_coarsen(const unsigned char* __restrict__ kind, const bool* __restrict__ brick_active,
                                       int n, unsigned char* __restrict__ flag, int* __restrict__ take,
                                       int* __restrict__ map1)
{
    mgb_coarsen_body(kind, brick_active, n, flag, take, map1);
}

// Level 1's cells in candidate order at their scan positions (scan: inclusive scan of take):
// key (relative to base cb), FLUID flag, candidate; ccnt[0] = their count; keys[count, bound)
// = the largest key (they sort last). Launched over max(n, bound, 1) items.
extern "C" __global__ void mgb_parents(const unsigned char* __restrict__ flag, const int* __restrict__ scan, int n,
                                       const int* __restrict__ slot_coords, int cbx, int cby, int cbz, int bound,
                                       long long* __restrict__ keys, unsigned char* __restrict__ fluid,
                                       int* __restrict__ cand, int* __restrict__ ccnt)
{
    const int count = n > 0 ? scan[n - 1] : 0;
    RANGE(t, 0, max(max(n, bound), 1))
    {
        if (t == 0) ccnt[0] = count;
        if (t >= count && t < bound) keys[t] = 0x7fffffffffffffffLL;
        if (t < n && flag[t]) {
            const int at = scan[t] - 1, slot = t >> 6, q = t & 63;
            keys[at] = cell_key(4 * slot_coords[3 * slot] + (q & 3), 4 * slot_coords[3 * slot + 1] + ((q >> 2) & 3),
                                4 * slot_coords[3 * slot + 2] + (q >> 4), cbx, cby, cbz);
            fluid[at] = flag[t] == 2;
            cand[at] = t;
        }
    }
}

// The sorted set (order: the argsort of keys, ccnt[0] of them first): its keys, FLUID flags
// and candidates, and map1[candidate] = sorted index (map1 −1 on entry).
extern "C" __global__ void mgb_sorted(const long long* __restrict__ order, const long long* __restrict__ keys,
                                      const unsigned char* __restrict__ fluid, const int* __restrict__ cand,
                                      const int* __restrict__ ccnt, int bound, long long* __restrict__ skeys,
                                      unsigned char* __restrict__ sfluid, int* __restrict__ scand,
                                      int* __restrict__ map1)
{
    const int n = ccnt[0];
    RANGE(s, 0, bound < n ? bound : n)
    {
        const long long o = order[s];
        skeys[s] = keys[o];
        sfluid[s] = fluid[o];
        scand[s] = cand[o];
        map1[cand[o]] = s;
    }
}

// ---- Level 1 in key order without a sort (RANKS): the key order of level-1 cells (K, J, I)
// = (4·bz + qz, 4·by + qy, 4·bx + qx) is the order (bz, qz, by, qy, bx, qx), so a segment —
// the 4 candidates qx = 0…3 of one brick's (qz, qy) — holds consecutive ranks, and the
// segments' order follows from the bricks' sorted keys (the topology's: (bz, by, bx) order,
// BRICK_BITS bits a coordinate): in the plane of bricks [P0, P0 + nP) of brick p's bz, qz
// major, then its row of bricks [R0, R0 + nR) (same by), qy, then p's place in its row.
// A scan of the segments' counts in that order gives each segment's first rank.

__device__ __forceinline__ int mgb_lower_key(const long long* __restrict__ keys, int n, long long q)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (keys[mid] < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// The place of segment (p, qz, qy) in key order; bkeys: the nb active bricks' sorted keys.
__device__ __forceinline__ int mgb_segment_order(const long long* __restrict__ bkeys, int nb, int p, int qz, int qy)
{
    const long long plane_step = 1LL << (2 * BRICK_BITS), row_step = 1LL << BRICK_BITS;
    const long long plane = bkeys[p] & ~(plane_step - 1), row = bkeys[p] & ~(row_step - 1);
    const int p0 = mgb_lower_key(bkeys, nb, plane), in_plane = mgb_lower_key(bkeys, nb, plane + plane_step) - p0;
    const int r0 = mgb_lower_key(bkeys, nb, row), in_row = mgb_lower_key(bkeys, nb, row + row_step) - r0;
    return 16 * p0 + qz * 4 * in_plane + 4 * (r0 - p0) + qy * in_row + (p - r0);
}

// seg[order of segment (p, qz, qy)] = its level-1 cells (flag ≠ 0), s = p·16 + qz·4 + qy < 16·nb;
// bslots[p]: brick p's pool slot.
extern "C" __global__ void mgb_segment_counts(const long long* __restrict__ bkeys, const int* __restrict__ bslots,
                                              int nb, const unsigned char* __restrict__ flag, int* __restrict__ seg)
{
    RANGE(s, 0, 16 * nb)
    {
        const int p = s >> 4, qz = (s >> 2) & 3, qy = s & 3;
        const int t = bslots[p] * 64 + (qz * 4 + qy) * 4;
        seg[mgb_segment_order(bkeys, nb, p, qz, qy)] = (flag[t] != 0) + (flag[t + 1] != 0) + (flag[t + 2] != 0) +
                                                       (flag[t + 3] != 0);
    }
}

// Level 1's set in key order (mgb_parents + a sort + mgb_sorted in one pass; scan: the
// inclusive scan of seg): keys (relative to base cb), FLUID flags, candidates, map1[candidate]
// = its index, the first `bound` of them (the arrays' rows); ccnt[0] = the count, clamped to
// bound (as mgs_parents). Launched over max(16·nb, 1) items.
extern "C" __global__ void mgb_ranked(const long long* __restrict__ bkeys, const int* __restrict__ bslots, int nb,
                                      const unsigned char* __restrict__ flag, const int* __restrict__ seg,
                                      const int* __restrict__ scan, const int* __restrict__ slot_coords, int cbx,
                                      int cby, int cbz, int bound, long long* __restrict__ keys,
                                      unsigned char* __restrict__ fluid, int* __restrict__ cand,
                                      int* __restrict__ map1, int* __restrict__ ccnt)
{
    RANGE(s, 0, max(16 * nb, 1))
    {
        if (s == 0) ccnt[0] = min(nb > 0 ? scan[16 * nb - 1] : 0, bound);
        if (s >= 16 * nb) continue;
        const int p = s >> 4, qz = (s >> 2) & 3, qy = s & 3, slot = bslots[p];
        const int o = mgb_segment_order(bkeys, nb, p, qz, qy);
        int at = scan[o] - seg[o];
        for (int qx = 0; qx < 4; ++qx) {
            const int t = slot * 64 + (qz * 4 + qy) * 4 + qx;
            if (!flag[t]) continue;
            if (at >= bound) break;
            keys[at] = cell_key(4 * slot_coords[3 * slot] + qx, 4 * slot_coords[3 * slot + 1] + qy,
                                4 * slot_coords[3 * slot + 2] + qz, cbx, cby, cbz);
            fluid[at] = flag[t] == 2;
            cand[at] = t;
            map1[t] = at;
            ++at;
        }
    }
}

// span[0..2] = max, span[3..5] = −min of the lattice coordinates of level 0's fcnt[2]
// unknowns (cells: their flat cells): mgs_key_span's extent without their keys.
extern "C" __global__ void mgb_unknown_span(const long long* __restrict__ cells, const int* __restrict__ fcnt,
                                            const int* __restrict__ slot_coords, int* span)
{
    int s[6];
    bool any = false;
    RANGE(u, 0, fcnt[2])
    {
        const int c = (int)cells[u], slot = c >> 9, l = c & (SPARSE_CELLS - 1);
        const int i = 8 * slot_coords[3 * slot] + (l & 7), j = 8 * slot_coords[3 * slot + 1] + ((l >> 3) & 7),
                  k = 8 * slot_coords[3 * slot + 2] + (l >> 6);
        const int v[6] = {i, j, k, -i, -j, -k};
        for (int a = 0; a < 6; ++a) s[a] = any && s[a] > v[a] ? s[a] : v[a];
        any = true;
    }
    if (any)
        for (int a = 0; a < 6; ++a) atomicMax(span + a, s[a]);
}

// Column f ≤ mf of up[0] (8 rows of stride): level-0 unknown f's (flat cell cells[f]) parent
// and its neighbours on the child's side, row (oz·2 + oy)·2 + ox (prolong_column's rows), as
// level-1 unknowns (cposition: sorted index → unknown); the level-1 sentinel where none.
extern "C" __global__ void mgb_prolong(const long long* __restrict__ cells, const int* __restrict__ fcnt, int stride,
                                       const int* __restrict__ nbr27, const int* __restrict__ map1,
                                       const int* __restrict__ cposition, const int* __restrict__ ccnt,
                                       int* __restrict__ up)
{
    const int mf = fcnt[2], mc = ccnt[2];
    RANGE(f, 0, mf + 1)
    {
        if (f == mf) {
            for (int row = 0; row < 8; ++row) up[row * stride + f] = mc;
            continue;
        }
        const int c = (int)cells[f], slot = c >> 9, l = c & (SPARSE_CELLS - 1);
        const int lx = l & 7, ly = (l >> 3) & 7, lz = l >> 6;
        const int sx = (lx & 1) ? 1 : -1, sy = (ly & 1) ? 1 : -1, sz = (lz & 1) ? 1 : -1;
        for (int row = 0; row < 8; ++row) {
            const int qx = (lx >> 1) + (row & 1) * sx, qy = (ly >> 1) + ((row >> 1) & 1) * sy,
                      qz = (lz >> 1) + (row >> 2) * sz;  // in [−1, 4]: this brick's 4³ block or a neighbour's
            const int s = nbr27[27 * slot + sparse_offset_index(qx >> 2, qy >> 2, qz >> 2)];
            const int at = s < 0 ? -1 : map1[s * 64 + ((qz & 3) * 4 + (qy & 3)) * 4 + (qx & 3)];
            up[row * stride + f] = at >= 0 ? cposition[at] : mc;
        }
    }
}

// Column u ≤ mc of down[0] (64 rows of stride): level-1 unknown u's (sorted index uorder[u],
// candidate scand[·]) level-0 cells 2I + (−1, 0, 1, 2) per axis, row (iz·4 + iy)·4 + ix
// (restrict_column's rows), as level-0 unknowns (position: flat → unknown, mf where none);
// mf where the cell's brick is inactive.
__device__ __forceinline__ void mgb_restrict_body(const int* __restrict__ scand, const int* __restrict__ uorder,
                                                  const int* __restrict__ ccnt, int stride,
                                                  const int* __restrict__ nbr27, const int* __restrict__ position,
                                                  const int* __restrict__ fcnt, int* __restrict__ down)
{
    const int mc = ccnt[2], mf = fcnt[2];
    RANGE(u, 0, mc + 1)
    {
        if (u == mc) {
            for (int row = 0; row < 64; ++row) down[row * stride + u] = mf;
            continue;
        }
        const int t = scand[uorder[u]], slot = t >> 6, q = t & 63;
        const int x0 = 2 * (q & 3) - 1, y0 = 2 * ((q >> 2) & 3) - 1, z0 = 2 * (q >> 4) - 1;
        for (int row = 0; row < 64; ++row) {
            const int c = sparse_cell_near(nbr27, slot, x0 + (row & 3), y0 + ((row >> 2) & 3), z0 + (row >> 4));
            down[row * stride + u] = c < 0 ? mf : position[c];
        }
    }
}

extern "C" __global__ void mgb_restrict(const int* __restrict__ scand, const int* __restrict__ uorder,
                                        const int* __restrict__ ccnt, int stride, const int* __restrict__ nbr27,
                                        const int* __restrict__ position, const int* __restrict__ fcnt,
                                        int* __restrict__ down)
{
    mgb_restrict_body(scand, uorder, ccnt, stride, nbr27, position, fcnt, down);
}

// ---- Launches joined (sparse_pressure_workspace_levels.FUSE "1", off by default): no
// grid-wide dependency between the parts, so one launch does both, the same integers (the
// spans' atomic maxima in any order); a span on the first `wide` blocks only, striding as
// its own launch on `wide` blocks would.

// mgb_unknown_span's body on blocks 0 … wide − 1.
__device__ __forceinline__ void unknown_span_blocks(const long long* __restrict__ cells, int m,
                                                    const int* __restrict__ slot_coords, int* span, int wide)
{
    if ((int)blockIdx.x >= wide) return;
    int s[6];
    bool any = false;
    for (int u = (int)(blockIdx.x * blockDim.x + threadIdx.x); u < m; u += wide * (int)blockDim.x) {
        const int c = (int)cells[u], slot = c >> 9, l = c & (SPARSE_CELLS - 1);
        const int i = 8 * slot_coords[3 * slot] + (l & 7), j = 8 * slot_coords[3 * slot + 1] + ((l >> 3) & 7),
                  k = 8 * slot_coords[3 * slot + 2] + (l >> 6);
        const int v[6] = {i, j, k, -i, -j, -k};
        for (int a = 0; a < 6; ++a) s[a] = any && s[a] > v[a] ? s[a] : v[a];
        any = true;
    }
    if (any)
        for (int a = 0; a < 6; ++a) atomicMax(span + a, s[a]);
}

// mgb_coarsen (level 1's candidates: kind, brick_active → flag, take, map1) with level 0's
// mgb_unknown_span (cells, fcnt, slot_coords → span): disjoint inputs and outputs.
extern "C" __global__ void mgb_coarsen_span(const unsigned char* __restrict__ kind,
                                            const bool* __restrict__ brick_active, int n,
                                            unsigned char* __restrict__ flag, int* __restrict__ take,
                                            int* __restrict__ map1, const long long* __restrict__ cells,
                                            const int* __restrict__ fcnt, const int* __restrict__ slot_coords,
                                            int* span, int wide)
{
    mgb_coarsen_body(kind, brick_active, n, flag, take, map1);
    unknown_span_blocks(cells, fcnt[2], slot_coords, span, wide);
}

// mgb_restrict (level 1's down) with level 1's mgs_key_span (its unknown keys ukeys, cnt
// ccnt → span): down is read by no part; the keys are mgs_level_tables', launched before.
extern "C" __global__ void mgb_restrict_span(const int* __restrict__ scand, const int* __restrict__ uorder,
                                             const int* __restrict__ ccnt, int stride, const int* __restrict__ nbr27,
                                             const int* __restrict__ position, const int* __restrict__ fcnt,
                                             int* __restrict__ down, const long long* __restrict__ ukeys, int* span,
                                             int wide)
{
    mgb_restrict_body(scand, uorder, ccnt, stride, nbr27, position, fcnt, down);
    widen_span_blocks(ukeys, ccnt[2], wide, span);
}

// The sparse multigrid's cell keys (kernels/flip/sparse_multigrid.py): (k − bz)·2^2B +
// (j − by)·2^B + i − bx, B = KEY_BITS (a -D constant of the including module), every axis
// inside its field; sets of them sorted. Shared by flip_sparse_pressure.cu and
// flip_sparse_pressure_setup.cu, with the per-cell rules of their table kernels; last, the
// restriction as the prolongation's transpose (restrict_fill, restrict_scatter: the set-up's).
#pragma once

__device__ __forceinline__ long long cell_key(int i, int j, int k, int bx, int by, int bz)
{
    return ((long long)(k - bz) << (2 * KEY_BITS)) | ((long long)(j - by) << KEY_BITS) | (long long)(i - bx);
}

__device__ __forceinline__ void key_cell(long long key, int bx, int by, int bz, int& i, int& j, int& k)
{
    const long long mask = (1LL << KEY_BITS) - 1;
    i = (int)(key & mask) + bx;
    j = (int)((key >> KEY_BITS) & mask) + by;
    k = (int)(key >> (2 * KEY_BITS)) + bz;
}

// Index of key q in the sorted keys[0, n), −1 where absent (binary search).
__device__ __forceinline__ int find_key(const long long* __restrict__ keys, int n, long long q)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (keys[mid] < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < n && keys[lo] == q) ? lo : -1;
}

// ------------------------------------------------ one cell's entries of a level's tables
// The rules of the table kernels, written once: flip_sparse_pressure.cu's (sizes from the
// host) and flip_sparse_pressure_setup.cu's (sizes in device memory) call them per item.

// mg_coarsen's flag of cell c of the set keys[0, n): 0, or — for the cell with even
// (i, j, k) of a 2×2×2 block whose 8 cells are all in the set — 1 (a SOLID coarse cell)
// or 2 (FLUID: a child is FLUID).
__device__ __forceinline__ unsigned char coarse_flag(const long long* __restrict__ keys,
                                                     const unsigned char* __restrict__ fluid, int n, int c, int bx,
                                                     int by, int bz)
{
    int i, j, k;
    key_cell(keys[c], bx, by, bz, i, j, k);
    if (((i | j | k) & 1) != 0) return 0;
    bool all = true, any_fluid = false;
    for (int child = 0; child < 8 && all; ++child) {
        const int at = find_key(keys, n, cell_key(i + (child & 1), j + ((child >> 1) & 1), k + (child >> 2), bx, by,
                                                  bz));
        all = at >= 0;
        any_fluid |= all && fluid[at];
    }
    return all ? (any_fluid ? 2 : 1) : 0;
}

// A FLUID cell c of the set keys[0, n): the set index of each of its 6 neighbours
// (around[d·stride + c]; −1: AIR) and the diagonal (6 − SOLID neighbours); returns its class
// 0 (not an unknown), 1 (red unknown), 2 (black unknown).
__device__ __forceinline__ unsigned char fluid_cell(const long long* __restrict__ keys,
                                                    const unsigned char* __restrict__ fluid, int n, int c, int bx,
                                                    int by, int bz, int* __restrict__ around, int stride,
                                                    unsigned char* __restrict__ diag)
{
    int i, j, k;
    key_cell(keys[c], bx, by, bz, i, j, k);
    int count = 6;
    for (int d = 0; d < 6; ++d) {
        const int step = (d & 1) ? 1 : -1, axis = d >> 1;
        const int at = find_key(keys, n, cell_key(i + (axis == 0) * step, j + (axis == 1) * step,
                                                  k + (axis == 2) * step, bx, by, bz));
        around[d * stride + c] = at;
        count -= at >= 0 && !fluid[at];
    }
    diag[c] = (unsigned char)count;
    return count == 0 ? 0 : ((((i + j + k) & 1) == 0) ? 1 : 2);
}

// Column u of a level's nbr (6 rows of nstride) and diag, u ≤ m: unknown u's set index s
// (its row of around, rows astride long) or, at u = m, the sentinel column.
__device__ __forceinline__ void level_table_column(int u, int m, int s, const int* __restrict__ around, int astride,
                                                   const int* __restrict__ position,
                                                   const unsigned char* __restrict__ diag8, int* __restrict__ nbr,
                                                   int nstride, float* __restrict__ diag)
{
    if (u == m) {
        for (int d = 0; d < 6; ++d) nbr[d * nstride + m] = m;
        diag[m] = 1.0f;
        return;
    }
    for (int d = 0; d < 6; ++d) {
        const int t = around[d * astride + s];
        nbr[d * nstride + u] = t >= 0 ? position[t] : m;
    }
    diag[u] = (float)diag8[s];
}

// Column f ≤ mf of up (8 rows of stride): fine unknown f's (key fkeys[f]) coarse parent and
// its neighbours on the child's side, row (oz·2 + oy)·2 + ox, from the coarse set ckeys[0,
// nc) (cposition: set index → unknown); the coarse sentinel mc where not an unknown.
__device__ __forceinline__ void prolong_column(int f, int mf, const long long* __restrict__ fkeys, int bx, int by,
                                               int bz, const long long* __restrict__ ckeys, int nc,
                                               const int* __restrict__ cposition, int cbx, int cby, int cbz, int mc,
                                               int* __restrict__ up, int stride)
{
    if (f == mf) {
        for (int row = 0; row < 8; ++row) up[row * stride + f] = mc;
        return;
    }
    int i, j, k;
    key_cell(fkeys[f], bx, by, bz, i, j, k);
    const int si = (i & 1) ? 1 : -1, sj = (j & 1) ? 1 : -1, sk = (k & 1) ? 1 : -1;
    for (int row = 0; row < 8; ++row) {
        const int at = find_key(ckeys, nc, cell_key((i >> 1) + (row & 1) * si, (j >> 1) + ((row >> 1) & 1) * sj,
                                                    (k >> 1) + (row >> 2) * sk, cbx, cby, cbz));
        up[row * stride + f] = at >= 0 ? cposition[at] : mc;
    }
}

// Column c ≤ mc of down (64 rows of stride): coarse unknown c's (key ckeys[c]) fine cells
// 2I + (−1, 0, 1, 2) per axis, row (iz·4 + iy)·4 + ix, from the fine set fkeys[0, nf)
// (fposition); the fine sentinel mf where not an unknown.
__device__ __forceinline__ void restrict_column(int c, int mc, const long long* __restrict__ ckeys, int cbx, int cby,
                                                int cbz, const long long* __restrict__ fkeys, int nf,
                                                const int* __restrict__ fposition, int bx, int by, int bz, int mf,
                                                int* __restrict__ down, int stride)
{
    if (c == mc) {
        for (int row = 0; row < 64; ++row) down[row * stride + c] = mf;
        return;
    }
    int I, J, K;
    key_cell(ckeys[c], cbx, cby, cbz, I, J, K);
    // The 64 queries ascend (z, then y, then x; every axis inside its field): one binary
    // search per x-row of 4 from where the last one ended, then the row's 4 consecutive keys
    // by stepping (each query's lower bound, so the same indices as 64 find_key calls).
    int p = 0;
    for (int zy = 0; zy < 16; ++zy) {
        const long long q0 = cell_key(2 * I - 1, 2 * J + (zy & 3) - 1, 2 * K + (zy >> 2) - 1, bx, by, bz);
        int hi = nf;
        while (p < hi) {
            const int mid = (p + hi) >> 1;
            if (fkeys[mid] < q0)
                p = mid + 1;
            else
                hi = mid;
        }
        for (int ix = 0; ix < 4; ++ix) {
            while (p < nf && fkeys[p] < q0 + ix) ++p;
            const int row = zy * 4 + ix;
            down[row * stride + c] = (p < nf && fkeys[p] == q0 + ix) ? fposition[p] : mf;
        }
    }
}

// span[0..2] = max, span[3..5] = −min of the key fields of keys[c] for c = first, first + step, …
// below hi: each thread widens its own span, then the shared one (6 atomics a thread, not a key).
__device__ __forceinline__ void widen_span_strided(const long long* __restrict__ keys, int first, int hi, int step,
                                                   int* span)
{
    int s[6];
    bool any = false;
    for (int c = first; c < hi; c += step) {
        int i, j, k;
        key_cell(keys[c], 0, 0, 0, i, j, k);
        const int v[6] = {i, j, k, -i, -j, -k};
        for (int a = 0; a < 6; ++a) s[a] = any && s[a] > v[a] ? s[a] : v[a];
        any = true;
    }
    if (any)
        for (int a = 0; a < 6; ++a) atomicMax(span + a, s[a]);
}

// span of keys[lo, hi) by a grid-stride loop over the whole grid.
__device__ __forceinline__ void widen_span_range(const long long* __restrict__ keys, int lo, int hi, int* span)
{
    widen_span_strided(keys, lo + (int)(blockIdx.x * blockDim.x + threadIdx.x), hi,
                       (int)(gridDim.x * blockDim.x), span);
}

// span of keys[0, n) on blocks 0 … wide − 1 only, striding as widen_span_range does on a grid of
// `wide` blocks (a fused launch's larger grid).
__device__ __forceinline__ void widen_span_blocks(const long long* __restrict__ keys, int n, int wide, int* span)
{
    if ((int)blockIdx.x >= wide) return;
    widen_span_strided(keys, (int)(blockIdx.x * blockDim.x + threadIdx.x), n, wide * (int)blockDim.x, span);
}

// span[0..2] = max, span[3..5] = −min of the key fields: widened by one key.
__device__ __forceinline__ void widen_span(long long key, int* span)
{
    int i, j, k;
    key_cell(key, 0, 0, 0, i, j, k);
    atomicMax(span + 0, i);
    atomicMax(span + 1, j);
    atomicMax(span + 2, k);
    atomicMax(span + 3, -i);
    atomicMax(span + 4, -j);
    atomicMax(span + 5, -k);
}

// ---- The restriction as the prolongation's transpose (sparse_pressure_setup.RESTRICT
// "scatter"): coarse unknown c's column of down lists the fine cells 2I + (−1, 0, 1, 2) per
// axis, and fine unknown f's column of up lists its parent and the parent's neighbours on
// its side — the coarse cells I with 2I − 1 ≤ i ≤ 2I + 2 — so f is in down's column c at
// row (iz·4 + iy)·4 + ix, i − 2I + 1 = ix per axis, exactly where c is in up's column f.
// Every other entry of down (a fine cell not in the set, or not an unknown: its position is
// the sentinel mf) is mf. So down is filled with mf (with the level's tables: the columns
// 0 … mc) and each fine unknown writes its own index where up names an unknown c < mc:
// the same integers as restrict_column's 64 searches a column, by 8 writes a fine unknown.

// Columns 0 … m (m = cnt[2]) of down (64 rows of stride): the fine sentinel fcnt[2].
__device__ __forceinline__ void restrict_fill(int u, int mf, int stride, int* __restrict__ down)
{
#pragma unroll 8
    for (int row = 0; row < 64; ++row) down[row * stride + u] = mf;
}

// Fine unknown f (< mf, key fkey) into down (cstride) from its column of up (fstride).
__device__ __forceinline__ void restrict_scatter(int f, long long fkey, int bx, int by, int bz,
                                                 const int* __restrict__ up, int fstride, int mc,
                                                 int* __restrict__ down, int cstride)
{
    int i, j, k;
    key_cell(fkey, bx, by, bz, i, j, k);
    const int si = (i & 1) ? 1 : -1, sj = (j & 1) ? 1 : -1, sk = (k & 1) ? 1 : -1;
    for (int row = 0; row < 8; ++row) {
        const int c = up[row * fstride + f];
        if (c >= mc) continue;
        const int ix = i - 2 * ((i >> 1) + (row & 1) * si) + 1;
        const int iy = j - 2 * ((j >> 1) + ((row >> 1) & 1) * sj) + 1;
        const int iz = k - 2 * ((k >> 1) + (row >> 2) * sk) + 1;
        down[((iz * 4 + iy) * 4 + ix) * cstride + c] = f;
    }
}

// The sparse multigrid's tables (kernels/flip/sparse_multigrid.py, TableBuilder) built level
// after level with every size in device memory: no host sync between levels. Launched by
// kernels/flip/sparse_pressure_setup.py; the table kernels of flip_sparse_pressure.cu
// (mg_coarsen … mg_key_span) are the same integers with host sizes, and the NumPy
// TableBuilder is the reference both follow.
//
// Sizes. Per level l, cnt[4·l + 0] = n (cells in the level's set, sorted keys), cnt[4·l + 1]
// = m_red, cnt[4·l + 2] = m (its unknowns); a kernel gets the pointer to its level's four.
// Arrays are allocated for a host bound of n (`bound`: the finer level's bound / 8, since a
// coarse cell needs all 8 children in the finer set), and tables are row-major [rows][stride]
// with stride = bound + 1 (level 0: m0 + 1), the sentinel column at m. Compactions are an
// inclusive scan (flip_sparse_pressure_scan.cu, or
// cupy.cumsum) of per-cell 0/1 flags, entries at and beyond n being 0.
//
// Constants from Python, as -D options: KEY_BITS (bits per axis of a cell key), CELL_AIR,
// CELL_FLUID and CELL_SOLID (the cell types). Level 0's unknowns (unk_*) are
// flip_sparse_pressure_unknowns.cu's.

#include "voxfx_mg_keys.cuh"  // cell_key, key_cell, find_key
#include "voxfx_setup_groups.cuh"  // SetupBlock, SetupCluster: the tail's groups of threads

#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// Per fine cell c < n: mg_coarsen's flag (0; 1 SOLID, 2 FLUID coarse cell at its even
// corner) and take = flag ≠ 0; both 0 on [n, bound).
__device__ __forceinline__ void mgs_coarsen_body(const long long* __restrict__ keys,
                                                 const unsigned char* __restrict__ fluid, const int* __restrict__ fcnt,
                                                 int bound, int bx, int by, int bz, unsigned char* __restrict__ flag,
                                                 int* __restrict__ take)
{
    const int n = fcnt[0];
    RANGE(c, 0, bound)
    {
        const unsigned char f = c < n ? coarse_flag(keys, fluid, n, c, bx, by, bz) : 0;
        flag[c] = f;
        take[c] = f != 0;
    }
}

extern "C" __global__ void mgs_coarsen(const long long* __restrict__ keys, const unsigned char* __restrict__ fluid,
                                       const int* __restrict__ fcnt, int bound, int bx, int by, int bz,
                                       unsigned char* __restrict__ flag, int* __restrict__ take)
{
    mgs_coarsen_body(keys, fluid, fcnt, bound, bx, by, bz, flag, take);
}

// The coarse set: the flagged fine cells' parent keys and FLUID flags at their scan
// positions (scan: inclusive scan of take), key order kept; ccnt[0] = its size, clamped to
// cbound (the coarse arrays' rows: only tables built ahead of their sizes' read can be too
// small, sparse_pressure_workspace.AHEAD, and those are rebuilt). Launched over max(bound,
// 1) items: thread 0 writes the size even for an empty fine set.
__device__ __forceinline__ void mgs_parents_body(const long long* __restrict__ keys,
                                                 const unsigned char* __restrict__ flag, const int* __restrict__ scan,
                                                 const int* __restrict__ fcnt, int bound, int bx, int by, int bz,
                                                 int cbx, int cby, int cbz, int cbound, long long* __restrict__ ckeys,
                                                 unsigned char* __restrict__ cfluid, int* __restrict__ ccnt)
{
    const int n = fcnt[0];
    RANGE(c, 0, bound > 0 ? bound : 1)
    {
        if (c == 0) ccnt[0] = min(n > 0 ? scan[n - 1] : 0, cbound);
        if (c < n && flag[c] && scan[c] <= cbound) {
            const int at = scan[c] - 1;
            int i, j, k;
            key_cell(keys[c], bx, by, bz, i, j, k);
            ckeys[at] = cell_key(i >> 1, j >> 1, k >> 1, cbx, cby, cbz);
            cfluid[at] = flag[c] == 2;
        }
    }
}

extern "C" __global__ void mgs_parents(const long long* __restrict__ keys, const unsigned char* __restrict__ flag,
                                       const int* __restrict__ scan, const int* __restrict__ fcnt, int bound, int bx,
                                       int by, int bz, int cbx, int cby, int cbz, int cbound,
                                       long long* __restrict__ ckeys, unsigned char* __restrict__ cfluid,
                                       int* __restrict__ ccnt)
{
    mgs_parents_body(keys, flag, scan, fcnt, bound, bx, by, bz, cbx, cby, cbz, cbound, ckeys, cfluid, ccnt);
}

// mg_level_cells on a set of cnt[0] cells (around rows `bound` long), and the scan flags:
// flags[c] = red unknown, flags[bound + c] = black unknown (0 on [n, bound)).
__device__ __forceinline__ void mgs_level_cells_body(const long long* __restrict__ keys,
                                                     const unsigned char* __restrict__ fluid,
                                                     const int* __restrict__ cnt, int bound, int bx, int by, int bz,
                                                     int* __restrict__ around, unsigned char* __restrict__ diag,
                                                     unsigned char* __restrict__ cls, int* __restrict__ flags)
{
    const int n = cnt[0];
    RANGE(c, 0, bound)
    {
        const unsigned char kind = c < n && fluid[c] ? fluid_cell(keys, fluid, n, c, bx, by, bz, around, bound, diag) : 0;
        cls[c] = kind;
        flags[c] = kind == 1;
        flags[bound + c] = kind == 2;
    }
}

extern "C" __global__ void mgs_level_cells(const long long* __restrict__ keys, const unsigned char* __restrict__ fluid,
                                           const int* __restrict__ cnt, int bound, int bx, int by, int bz,
                                           int* __restrict__ around, unsigned char* __restrict__ diag,
                                           unsigned char* __restrict__ cls, int* __restrict__ flags)
{
    mgs_level_cells_body(keys, fluid, cnt, bound, bx, by, bz, around, diag, cls, flags);
}

// mgs_level_cells of a level and the next level's mgs_coarsen over the same keys (the level's
// bound both; nbound 0: no coarsen) in one launch (VOXFX_SPARSE_SCAN_JOIN "1",
// sparse_pressure_workspace_levels): both read only the level's keys, fluid flags and cnt
// (mgs_parents' or mgb_ranked's, launched before) and write disjoint arrays, so the next
// level's take is ready with the level's flags and one scan_lookback_pair scans both.
extern "C" __global__ void mgs_level_cells_coarsen(const long long* __restrict__ keys,
                                                   const unsigned char* __restrict__ fluid,
                                                   const int* __restrict__ cnt, int bound, int bx, int by, int bz,
                                                   int* __restrict__ around, unsigned char* __restrict__ diag,
                                                   unsigned char* __restrict__ cls, int* __restrict__ flags,
                                                   int nbound, unsigned char* __restrict__ nflag,
                                                   int* __restrict__ ntake)
{
    mgs_level_cells_body(keys, fluid, cnt, bound, bx, by, bz, around, diag, cls, flags);
    mgs_coarsen_body(keys, fluid, cnt, nbound, bx, by, bz, nflag, ntake);
}

// The unknowns' order, red then black (scans: the row-wise inclusive scans of flags):
// position[c] (m where not an unknown), order[u] = its cell; cnt[1] = m_red, cnt[2] = m.
// Launched over max(bound, 1) items.
__device__ __forceinline__ void mgs_order_body(const unsigned char* __restrict__ cls, const int* __restrict__ scans,
                                               int* __restrict__ cnt, int bound, int* __restrict__ position,
                                               int* __restrict__ order)
{
    const int n = cnt[0];
    const int m_red = n > 0 ? scans[n - 1] : 0;
    const int m = m_red + (n > 0 ? scans[bound + n - 1] : 0);
    RANGE(c, 0, bound > 0 ? bound : 1)
    {
        if (c == 0) {
            cnt[1] = m_red;
            cnt[2] = m;
        }
        if (c < n) {
            int u = m;
            if (cls[c] == 1) u = scans[c] - 1;
            if (cls[c] == 2) u = m_red + scans[bound + c] - 1;
            position[c] = u;
            if (u < m) order[u] = c;
        }
    }
}

extern "C" __global__ void mgs_order(const unsigned char* __restrict__ cls, const int* __restrict__ scans,
                                     int* __restrict__ cnt, int bound, int* __restrict__ position,
                                     int* __restrict__ order)
{
    mgs_order_body(cls, scans, cnt, bound, position, order);
}

// mg_level_tables with m = cnt[2] and rows bound + 1 long; ukeys[u] = the key of unknown u.
__device__ __forceinline__ void mgs_level_tables_body(const int* __restrict__ order, const int* __restrict__ cnt,
                                                      int bound, const int* __restrict__ around,
                                                      const int* __restrict__ position,
                                                      const unsigned char* __restrict__ diag8,
                                                      const long long* __restrict__ keys, int* __restrict__ nbr,
                                                      float* __restrict__ diag, long long* __restrict__ ukeys)
{
    const int m = cnt[2], stride = bound + 1;
    RANGE(u, 0, m + 1)
    {
        const int s = u < m ? order[u] : 0;
        level_table_column(u, m, s, around, bound, position, diag8, nbr, stride, diag);
        if (u < m) ukeys[u] = keys[s];
    }
}

extern "C" __global__ void mgs_level_tables(const int* __restrict__ order, const int* __restrict__ cnt, int bound,
                                            const int* __restrict__ around, const int* __restrict__ position,
                                            const unsigned char* __restrict__ diag8, const long long* __restrict__ keys,
                                            int* __restrict__ nbr, float* __restrict__ diag,
                                            long long* __restrict__ ukeys)
{
    mgs_level_tables_body(order, cnt, bound, around, position, diag8, keys, nbr, diag, ukeys);
}

// mg_prolong_table: up (8 rows of fstride) for the fcnt[2] fine unknowns (keys fkeys) from
// the coarse set (ckeys, ccnt[0] cells, cposition; ccnt[2] unknowns).
__device__ __forceinline__ void mgs_prolong_table_body(const long long* __restrict__ fkeys,
                                                       const int* __restrict__ fcnt, int fstride, int bx, int by,
                                                       int bz, const long long* __restrict__ ckeys,
                                                       const int* __restrict__ ccnt, const int* __restrict__ cposition,
                                                       int cbx, int cby, int cbz, int* __restrict__ up)
{
    const int mf = fcnt[2], nc = ccnt[0], mc = ccnt[2];
    RANGE(f, 0, mf + 1) prolong_column(f, mf, fkeys, bx, by, bz, ckeys, nc, cposition, cbx, cby, cbz, mc, up, fstride);
}

extern "C" __global__ void mgs_prolong_table(const long long* __restrict__ fkeys, const int* __restrict__ fcnt,
                                             int fstride, int bx, int by, int bz, const long long* __restrict__ ckeys,
                                             const int* __restrict__ ccnt, const int* __restrict__ cposition, int cbx,
                                             int cby, int cbz, int* __restrict__ up)
{
    mgs_prolong_table_body(fkeys, fcnt, fstride, bx, by, bz, ckeys, ccnt, cposition, cbx, cby, cbz, up);
}

// mg_restrict_table: down (64 rows of cstride) for the ccnt[2] coarse unknowns (keys
// ckeys) from the fine set (fkeys, fcnt[0] cells, fposition; fcnt[2] unknowns).
__device__ __forceinline__ void mgs_restrict_table_body(const long long* __restrict__ ckeys,
                                                        const int* __restrict__ ccnt, int cstride, int cbx, int cby,
                                                        int cbz, const long long* __restrict__ fkeys,
                                                        const int* __restrict__ fcnt, const int* __restrict__ fposition,
                                                        int bx, int by, int bz, int* __restrict__ down)
{
    const int mc = ccnt[2], nf = fcnt[0], mf = fcnt[2];
    RANGE(c, 0, mc + 1) restrict_column(c, mc, ckeys, cbx, cby, cbz, fkeys, nf, fposition, bx, by, bz, mf, down, cstride);
}

extern "C" __global__ void mgs_restrict_table(const long long* __restrict__ ckeys, const int* __restrict__ ccnt,
                                              int cstride, int cbx, int cby, int cbz,
                                              const long long* __restrict__ fkeys, const int* __restrict__ fcnt,
                                              const int* __restrict__ fposition, int bx, int by, int bz,
                                              int* __restrict__ down)
{
    mgs_restrict_table_body(ckeys, ccnt, cstride, cbx, cby, cbz, fkeys, fcnt, fposition, bx, by, bz, down);
}

// ---- The restriction as the prolongation's transpose (sparse_pressure_setup.RESTRICT
// "scatter"): restrict_fill and restrict_scatter, voxfx_mg_keys.cuh (beside prolong_column).

// mgs_level_tables and down's columns 0 … cnt[2] filled with the fine sentinel fcnt[2]
// (rows bound + 1 long, as nbr's).
extern "C" __global__ void mgs_level_tables_down(const int* __restrict__ order, const int* __restrict__ cnt, int bound,
                                                 const int* __restrict__ around, const int* __restrict__ position,
                                                 const unsigned char* __restrict__ diag8,
                                                 const long long* __restrict__ keys, int* __restrict__ nbr,
                                                 float* __restrict__ diag, long long* __restrict__ ukeys,
                                                 const int* __restrict__ fcnt, int* __restrict__ down)
{
    mgs_level_tables_body(order, cnt, bound, around, position, diag8, keys, nbr, diag, ukeys);
    const int m = cnt[2], mf = fcnt[2];
    RANGE(u, 0, m + 1) restrict_fill(u, mf, bound + 1, down);
}

// A kept coarse level's down (sparse_multigrid_kept, VOXFX_SPARSE_MG_KEEP: levels >= 2 held across
// set-ups) filled again with the finer level's sentinel fcnt[2] on columns 0 ... cnt[2] (the kept
// level's count), mgs_level_tables_down's fill without its tables: the finer level was rebuilt, so
// its sentinel and unknowns changed; mgs_prolong_restrict then scatters the new ones in.
extern "C" __global__ void mgs_down_fill(const int* __restrict__ cnt, const int* __restrict__ fcnt, int stride,
                                         int* __restrict__ down)
{
    const int m = cnt[2], mf = fcnt[2];
    RANGE(u, 0, m + 1) restrict_fill(u, mf, stride, down);
}

// mgs_prolong_table, each fine unknown then writing itself into down (cstride; filled by
// mgs_level_tables_down before).
__device__ __forceinline__ void mgs_prolong_restrict_body(const long long* __restrict__ fkeys,
                                                          const int* __restrict__ fcnt, int fstride, int bx, int by,
                                                          int bz, const long long* __restrict__ ckeys,
                                                          const int* __restrict__ ccnt,
                                                          const int* __restrict__ cposition, int cbx, int cby, int cbz,
                                                          int* __restrict__ up, int cstride, int* __restrict__ down)
{
    const int mf = fcnt[2], nc = ccnt[0], mc = ccnt[2];
    RANGE(f, 0, mf + 1)
    {
        prolong_column(f, mf, fkeys, bx, by, bz, ckeys, nc, cposition, cbx, cby, cbz, mc, up, fstride);
        if (f < mf) restrict_scatter(f, fkeys[f], bx, by, bz, up, fstride, mc, down, cstride);
    }
}

extern "C" __global__ void mgs_prolong_restrict(const long long* __restrict__ fkeys, const int* __restrict__ fcnt,
                                                int fstride, int bx, int by, int bz,
                                                const long long* __restrict__ ckeys, const int* __restrict__ ccnt,
                                                const int* __restrict__ cposition, int cbx, int cby, int cbz,
                                                int* __restrict__ up, int cstride, int* __restrict__ down)
{
    mgs_prolong_restrict_body(fkeys, fcnt, fstride, bx, by, bz, ckeys, ccnt, cposition, cbx, cby, cbz, up, cstride,
                              down);
}

// mg_key_span over the cnt[2] unknown keys: span[0..2] = max, span[3..5] = −min per axis
// (span on entry −2^31 + 1).
extern "C" __global__ void mgs_key_span(const long long* __restrict__ keys, const int* __restrict__ cnt,
                                        int* __restrict__ span)
{
    widen_span_range(keys, 0, cnt[2], span);
}

// ---- The coarse levels first … count − 1 in one block (sparse_pressure_setup.TAIL_BOUND):
// per level the launches above in their order (mgs_coarsen, scan, mgs_parents,
// mgs_level_cells, scans, mgs_order, mgs_level_tables with mgs_prolong_table, then
// mgs_restrict_table with mgs_key_span), a block barrier where the host launched the next
// kernel, the scans by the block (the group g: voxfx_setup_groups.cuh's one block, or one cluster
// below). Small levels spend a launch's host overhead each on a few thousand cells; here they
// cost one launch together. rec: per level TAIL_REC int64s, the
// pointers keys, fluid, position, unknown keys, flag, take, scan, around, diag8, cls, flags,
// scans, order, nbr, diag, up, down, then its bound, base x, y, z and table stride (level
// first − 1: its keys, fluid, position, unknown keys, bound, base and stride alone).
#define TAIL_REC 22
#define TAIL_PTR(l, k, T) ((T*)(size_t)rec[(size_t)(l) * TAIL_REC + (k)])
#define TAIL_INT(l, k) ((int)rec[(size_t)(l) * TAIL_REC + 17 + (k)])

template <bool SCATTER, class Group>  // the restriction by restrict_scatter (RESTRICT "scatter") or restrict_column
__device__ __forceinline__ void mgs_tail_levels_body(const long long* __restrict__ rec, int first, int count,
                                                     int* __restrict__ cnt, int* __restrict__ span, Group& g)
{
    for (int l = first; l < count; ++l) {
        const int f = l - 1, fb = TAIL_INT(f, 0), nb = TAIL_INT(l, 0), fstride = TAIL_INT(f, 4);
        const int bx = TAIL_INT(f, 1), by = TAIL_INT(f, 2), bz = TAIL_INT(f, 3);
        const int cbx = TAIL_INT(l, 1), cby = TAIL_INT(l, 2), cbz = TAIL_INT(l, 3);
        const long long* fkeys = TAIL_PTR(f, 0, const long long);
        const unsigned char* ffluid = TAIL_PTR(f, 1, const unsigned char);
        const int* fposition = TAIL_PTR(f, 2, const int);
        const long long* fukeys = TAIL_PTR(f, 3, const long long);
        long long* ckeys = TAIL_PTR(l, 0, long long);
        unsigned char* cfluid = TAIL_PTR(l, 1, unsigned char);
        int* cposition = TAIL_PTR(l, 2, int);
        long long* cukeys = TAIL_PTR(l, 3, long long);
        unsigned char* flag = TAIL_PTR(l, 4, unsigned char);
        int* take = TAIL_PTR(l, 5, int);
        int* scan = TAIL_PTR(l, 6, int);
        int* around = TAIL_PTR(l, 7, int);
        unsigned char* diag8 = TAIL_PTR(l, 8, unsigned char);
        unsigned char* cls = TAIL_PTR(l, 9, unsigned char);
        int* flags = TAIL_PTR(l, 10, int);
        int* scans = TAIL_PTR(l, 11, int);
        int* order = TAIL_PTR(l, 12, int);
        int* nbr = TAIL_PTR(l, 13, int);
        float* diag = TAIL_PTR(l, 14, float);
        int* up = TAIL_PTR(l, 15, int);
        int* down = TAIL_PTR(l, 16, int);
        int* fc = cnt + 4 * f;
        int* cc = cnt + 4 * l;
        mgs_coarsen_body(fkeys, ffluid, fc, fb, bx, by, bz, flag, take);
        g.own();
        g.scan(take, fb, scan);
        g.sync();
        mgs_parents_body(fkeys, flag, scan, fc, fb, bx, by, bz, cbx, cby, cbz, nb, ckeys, cfluid, cc);
        g.sync();
        mgs_level_cells_body(ckeys, cfluid, cc, nb, cbx, cby, cbz, around, diag8, cls, flags);
        g.own();
        g.scan_rows(flags, nb, scans);
        g.sync();
        mgs_order_body(cls, scans, cc, nb, cposition, order);
        g.sync();
        mgs_level_tables_body(order, cc, nb, around, cposition, diag8, ckeys, nbr, diag, cukeys);
        if (SCATTER) {  // down filled here, each fine unknown's entries after the barrier
            RANGE(u, 0, cc[2] + 1) restrict_fill(u, fc[2], nb + 1, down);
        } else {
            mgs_prolong_table_body(fukeys, fc, fstride, bx, by, bz, ckeys, cc, cposition, cbx, cby, cbz, up);
        }
        g.sync();
        if (SCATTER) {
            mgs_prolong_restrict_body(fukeys, fc, fstride, bx, by, bz, ckeys, cc, cposition, cbx, cby, cbz, up, nb + 1,
                                      down);
        } else {
            mgs_restrict_table_body(cukeys, cc, nb + 1, cbx, cby, cbz, fkeys, fc, fposition, bx, by, bz, down);
        }
        widen_span_range(cukeys, 0, cc[2], span + 6 * l);
        g.level_end();
    }
}

extern "C" __global__ void __launch_bounds__(1024) mgs_tail_levels(const long long* __restrict__ rec, int first,
                                                                   int count, int* __restrict__ cnt,
                                                                   int* __restrict__ span)
{
    SetupBlock g;
    mgs_tail_levels_body<false>(rec, first, count, cnt, span, g);
}

extern "C" __global__ void __launch_bounds__(1024) mgs_tail_levels_scatter(const long long* __restrict__ rec,
                                                                           int first, int count,
                                                                           int* __restrict__ cnt,
                                                                           int* __restrict__ span)
{
    SetupBlock g;
    mgs_tail_levels_body<true>(rec, first, count, cnt, span, g);
}

// The same levels by one block with SetupFastBlock's barriers and scans (TAIL_GROUPS "fast", the default, and
// "hybrid"'s levels after its cluster's; in every module of this file).
extern "C" __global__ void __launch_bounds__(1024) mgs_tail_levels_fast(const long long* __restrict__ rec, int first,
                                                                        int count, int* __restrict__ cnt,
                                                                        int* __restrict__ span)
{
    SetupFastBlock g;
    mgs_tail_levels_body<false>(rec, first, count, cnt, span, g);
}

extern "C" __global__ void __launch_bounds__(1024) mgs_tail_levels_fast_scatter(const long long* __restrict__ rec,
                                                                                int first, int count,
                                                                                int* __restrict__ cnt,
                                                                                int* __restrict__ span)
{
    SetupFastBlock g;
    mgs_tail_levels_body<true>(rec, first, count, cnt, span, g);
}

// The same levels by one cluster of TAIL_CLUSTER blocks (sparse_pressure_workspace_levels.TAIL_GROUPS
// "cluster", a grid of one cluster, sm_90 on; the module compiled with -DTAIL_CLUSTER): every
// pass's items spread over the cluster's threads, its barriers the cluster's and its scans
// SetupCluster's, the same integers (host harness on threads, GPU test).
#ifdef TAIL_CLUSTER
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SETUP_CLUSTER_DIMS __cluster_dims__(TAIL_CLUSTER, 1, 1)
#else
#define SETUP_CLUSTER_DIMS
#endif
extern "C" __global__ void SETUP_CLUSTER_DIMS __launch_bounds__(1024)
    mgs_tail_levels_cluster(const long long* __restrict__ rec, int first, int count, int* __restrict__ cnt,
                            int* __restrict__ span)
{
    SetupCluster g;
    mgs_tail_levels_body<false>(rec, first, count, cnt, span, g);
}

extern "C" __global__ void SETUP_CLUSTER_DIMS __launch_bounds__(1024)
    mgs_tail_levels_cluster_scatter(const long long* __restrict__ rec, int first, int count, int* __restrict__ cnt,
                                    int* __restrict__ span)
{
    SetupCluster g;
    mgs_tail_levels_body<true>(rec, first, count, cnt, span, g);
}
#endif  // TAIL_CLUSTER

// ---- A coarse level's last launches as one (sparse_pressure_workspace_levels.FUSE "1", off
// by default): mgs_prolong_restrict, mgs_key_span and the next level's mgs_coarsen have no
// grid-wide dependency between them — prolong_restrict writes up and down, the span reads
// the level's unknown keys (mgs_level_tables_down's, launched before), the next coarsen reads
// the level's keys, fluid flags and cnt (mgs_parents', before) and writes the next level's
// flag and take (its own scratch) — so one launch does all three: the same integers (the
// span's atomic maxima in any order). The span runs on the first `wide` blocks striding as
// mgs_key_span's own grid of `wide` blocks would; the next coarsen over nbound items on the
// level's own key base (nbound 0: no next level here — the tail's, or none).

extern "C" __global__ void mgs_level_end(const long long* __restrict__ fkeys, const int* __restrict__ fcnt,
                                         int fstride, int bx, int by, int bz, const long long* __restrict__ ckeys,
                                         const int* __restrict__ ccnt, const int* __restrict__ cposition, int cbx,
                                         int cby, int cbz, int* __restrict__ up, int cstride, int* __restrict__ down,
                                         const long long* __restrict__ cukeys, int* __restrict__ span, int wide,
                                         const unsigned char* __restrict__ cfluid, int nbound,
                                         unsigned char* __restrict__ nflag, int* __restrict__ ntake)
{
    mgs_prolong_restrict_body(fkeys, fcnt, fstride, bx, by, bz, ckeys, ccnt, cposition, cbx, cby, cbz, up, cstride,
                              down);
    mgs_coarsen_body(ckeys, cfluid, ccnt, nbound, cbx, cby, cbz, nflag, ntake);
    widen_span_blocks(cukeys, ccnt[2], wide, span);
}

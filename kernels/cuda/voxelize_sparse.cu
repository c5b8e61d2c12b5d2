// The sparse voxelizer on the device (issue 11; seed 003 §5.1, seed 004 §5): every voxel is
// decided by the exact device functions of the dense kernels (voxelize.cu), from their header
// include/voxfx_voxelize.cuh (make_setup, projection_test, plane_test, thin_test,
// make_yz_setup), over the whole grid's columns as the dense kernels test them; only where a
// set bit is stored differs: an 8³ brick of a sorted list of bricks instead of a dense bit
// grid. Compiled with --fmad=false, as voxelize.cu.
//
// Bricks are numbered lin = (bz·nby + by)·nbx + bx over the grid's nbx × nby × nbz bricks
// (sorted lin = sorted SparseGrid keys). A brick's bits are 64 bytes: byte (z·8 + y), bit x;
// as uint32 words, word (z·8 + y) / 4, bit 8·((z·8 + y) mod 4) + x (little-endian).
//
// Triangles go in chunks (gpu_sparse.py): the setups of a chunk are built once into device
// memory and every kernel of the surface reads them (a Setup is large: built per thread it
// lives in local memory, a 2 KB stack frame at 255 registers).
//
// The stages' kernels, a file each, compiled with gpu_sparse.py's options: this file the
// triangle setups, the surface topology (candidate bricks) and the surface voxels one thread
// per column; voxelize_sparse_tiles.cu the surface voxels one warp per 8 × 8 column tile;
// voxelize_sparse_solid.cu the solid. The brick pool's look-up: include/voxfx_brick_pool.cuh.

#include "voxfx_voxelize.cuh"  // the dense kernels' device functions (Setup, make_setup, the exact tests)
#include "voxfx_brick_pool.cuh"  // BrickIndex, set_voxel: a set voxel into its candidate brick

// ------------------------------------------------------------------ triangle setups

// make_setup cut to the grid (as the dense launch of the whole grid cuts it) for triangles
// first .. first + n - 1, into setups[0 .. n); a triangle with a bad index gets an empty box.
extern "C" __global__ void sparse_surface_setups(const double* __restrict__ pv, const int* __restrict__ tris,
                                                 long long first, long long n, long long n_vertices, int nx, int ny,
                                                 int nz, int thin, Setup* __restrict__ setups,
                                                 unsigned long long* __restrict__ flags)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (!valid_triangle(tris, first + i, n_vertices, flags)) {  // no work: only its box is read
        for (int a = 0; a < 3; ++a) { setups[i].lo[a] = 0; setups[i].hi[a] = -1; }
        setups[i].dom = 0;
        return;
    }
    Setup s;
    make_setup(pv, tris, first + i, nx, ny, nz, thin, s);
    clip_to_box(s, make_box(0, 0, 0, nx, ny, nz));
    setups[i] = s;
}

extern "C" __global__ void sparse_setup_size(long long* __restrict__ out)
{
    out[0] = (long long)sizeof(Setup);
}

// Per triangle of a chunk, the work of its touched box: the bricks of its brick range (the
// candidates' items), the 8 × 8 column tiles across its dominant axis (sparse_surface_tiles'
// items) and its columns (sparse_surface_columns' items, as surface_column_counts).
extern "C" __global__ void sparse_surface_counts(const Setup* __restrict__ setups, long long n,
                                                 long long* __restrict__ bricks, long long* __restrict__ tiles,
                                                 long long* __restrict__ columns)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Setup& s = setups[i];
    long long w[3], b[3];
    bool empty = false;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        w[a] = s.hi[a] - s.lo[a] + 1;
        b[a] = (s.hi[a] >> 3) - (s.lo[a] >> 3) + 1;
        empty |= w[a] <= 0;
    }
    if (empty) {  // outside the grid, or a bad index
        bricks[i] = tiles[i] = columns[i] = 0;
        return;
    }
    const int d = s.dom;  // across it: U = (d + 1) mod 3, V = (d + 2) mod 3
    bricks[i] = b[0] * b[1] * b[2];
    tiles[i] = d == 0 ? b[1] * b[2] : (d == 1 ? b[2] * b[0] : b[0] * b[1]);
    columns[i] = d == 0 ? w[1] * w[2] : (d == 1 ? w[2] * w[0] : w[0] * w[1]);
}

// ------------------------------------------------------------------ surface topology

// Margin of the conservative brick test over the tier-1 bounds of voxelize.cu (pbound,
// ebound): those bound the rounding of Eq. 1 and Eq. 2 anywhere in the touched box, so a
// brick whose best voxel is SLACK bounds on the wrong side holds no voxel the exact tests
// could set (a voxel there fails tier 1 already).
#define VOXFX_CULL_SLACK 1024.0

// Whether any voxel q of the range qlo .. qhi (inclusive, inside the touched box) may pass
// the exact test: Eq. 1 over the union of their closed boxes [qlo, qhi + 1], and Eq. 3's
// edges in the three planes at the range's best corner. False only where none can.
__device__ __forceinline__ bool range_may_hold(const Setup& s, const long long* qlo, const long long* qhi)
{
    if (s.orient[0] || s.orient[1] || s.orient[2]) {  // no normal: plane_test passes everywhere
        double fmax = 0.0, fmin = 0.0;
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            double hi = (double)(qhi[k] + 1) - s.v[0][k], lo = (double)qlo[k] - s.v[0][k];
            fmax += s.n[k] * (s.n[k] > 0 ? hi : lo);
            fmin += s.n[k] * (s.n[k] > 0 ? lo : hi);
        }
        const double m = VOXFX_CULL_SLACK * s.pbound;
        if (fmax < -m || fmin > m) return false;
    }
#pragma unroll
    for (int p = 0; p < 3; ++p) {
        const int a = PA(p), b = PB(p);
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            const double na = s.ne[p][i][0], nb = s.ne[p][i][1];
            double E = (na * (double)(na > 0 ? qhi[a] : qlo[a]) + nb * (double)(nb > 0 ? qhi[b] : qlo[b])) + s.de[p][i];
            if (E < -VOXFX_CULL_SLACK * s.ebound[p][i]) return false;
        }
    }
    return true;
}

// (brick, triangle) items of a chunk (ends/counts: the brick counts' scan), items first ..
// first + n_items - 1: each brick of the triangle's brick range that may hold one of its
// voxels adds its brick number to out (write = 1) or only counts (write = 0; n_out). Brick
// numbers of type K: 32-bit where the grid has under 2^32 bricks (half the bytes to sort).
template <typename K>
__device__ __forceinline__ void surface_bricks(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                               const long long* __restrict__ counts, long long n_tris,
                                               long long first, long long n_items, long long nbx, long long nby,
                                               int write, K* __restrict__ out, unsigned long long* __restrict__ n_out)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    item += first;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    const Setup& s = setups[t];
    long long b0 = s.lo[0] >> 3, b1 = s.lo[1] >> 3, b2 = s.lo[2] >> 3;
    long long ex = (s.hi[0] >> 3) - b0 + 1, ey = (s.hi[1] >> 3) - b1 + 1;
    long long b[3] = {b0 + local % ex, b1 + (local / ex) % ey, b2 + local / (ex * ey)};
    long long qlo[3], qhi[3];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        qlo[a] = 8 * b[a] > s.lo[a] ? 8 * b[a] : s.lo[a];
        qhi[a] = 8 * b[a] + 7 < s.hi[a] ? 8 * b[a] + 7 : s.hi[a];
    }
    if (!range_may_hold(s, qlo, qhi)) return;
    unsigned long long at = atomicAdd(n_out, 1ull);
    if (write) out[at] = (K)((b[2] * nby + b[1]) * nbx + b[0]);
}

extern "C" __global__ void sparse_surface_bricks(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                                 const long long* __restrict__ counts, long long n_tris,
                                                 long long first, long long n_items, long long nbx, long long nby,
                                                 int write, long long* __restrict__ out,
                                                 unsigned long long* __restrict__ n_out)
{
    surface_bricks<long long>(setups, ends, counts, n_tris, first, n_items, nbx, nby, write, out, n_out);
}

extern "C" __global__ void sparse_surface_bricks32(const Setup* __restrict__ setups,
                                                   const long long* __restrict__ ends,
                                                   const long long* __restrict__ counts, long long n_tris,
                                                   long long first, long long n_items, long long nbx, long long nby,
                                                   int write, unsigned int* __restrict__ out,
                                                   unsigned long long* __restrict__ n_out)
{
    surface_bricks<unsigned int>(setups, ends, counts, n_tris, first, n_items, nbx, nby, write, out, n_out);
}

// ------------------------------------------------------------------ surface voxels, one thread per column

// voxelize.cu's column<D, false> over the whole grid, storing into bricks: the same
// candidates and the same tests, in the same order.
template <int D>
__device__ __forceinline__ void sparse_column(const Setup& s, long long local, BrickIndex& ix)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    constexpr int pc = plane_of_axis(D);
    long long wu = s.hi[U] - s.lo[U] + 1;
    long long cu = s.lo[U] + local % wu;
    long long cv = s.lo[V] + local / wu;
    double q[3];
    q[D] = 0.0;
    q[U] = (double)cu;
    q[V] = (double)cv;
    if (!projection_test<pc>(s, q)) return;
    long long dlo, dhi;
    column_depths<D>(s, cu, cv, dlo, dhi);
    for (long long d = dlo; d <= dhi; ++d) {
        q[D] = (double)d;
        if (voxel_set<D>(s, q)) set_voxel(ix, (long long)q[0], (long long)q[1], (long long)q[2]);
    }
}

// One thread per column of a chunk (ends/counts: the column counts' scan).
extern "C" __global__ void sparse_surface_columns(const Setup* __restrict__ setups,
                                                  const long long* __restrict__ ends,
                                                  const long long* __restrict__ counts, long long n_tris,
                                                  long long n_items, const long long* __restrict__ lin,
                                                  const long long* __restrict__ row_start, long long nbx,
                                                  long long nby, unsigned int* __restrict__ pool,
                                                  unsigned long long* __restrict__ missing)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    const Setup& s = setups[t];
    long long local = item - (ends[t] - counts[t]);
    BrickIndex ix = {lin, row_start, nbx, nby, pool, missing, -1, 0};
    switch (s.dom) {
        case 0: sparse_column<0>(s, local, ix); break;
        case 1: sparse_column<1>(s, local, ix); break;
        default: sparse_column<2>(s, local, ix); break;
    }
}

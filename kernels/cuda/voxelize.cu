// Triangle voxelization (seed 004 §3–4) on packed bit grids [z][y][x/32].
//
// Mirrors kernels/voxelize/triangles.py, exact.py, surface.py and solid.py term by term, in
// float64 voxel units. Compiled with --fmad=false: every operation rounds exactly as
// NumPy's, so the GPU sets the same voxels as the CPU reference. The conservative test is
// moreover exact (the closed-box SAT, issue 22 §1): float filters with rounding bounds,
// then exact expansion arithmetic (voxfx_exact.cuh) where a filter is unsure, so CPU and
// GPU agree even where they compute a sign differently (rationals on the CPU).
//
// Work is load-balanced over *columns*: column_counts writes per triangle the number of
// voxel columns it covers; an inclusive scan of those (`ends`) maps a global work item to
// its triangle by binary search; each item tests the few candidate voxels of its column.

#include "voxfx_voxelize.cuh"  // Setup, make_setup, the exact tests, column_depths, make_yz_setup

// ---------------------------------------------------------------- input preparation

// pv = (v − origin) / voxel_size in float64 (NumPy: (v.astype(float64) − origin) / vs),
// counting vertices with a non-finite coordinate in flags[0]. One thread per vertex.
template <typename T>
__device__ __forceinline__ void prepare(const T* __restrict__ v, long long n, double ox, double oy, double oz,
                                        double vs, double* __restrict__ pv, unsigned long long* __restrict__ flags)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = (double)v[3 * i], y = (double)v[3 * i + 1], z = (double)v[3 * i + 2];
    if (!isfinite(x) || !isfinite(y) || !isfinite(z)) atomicAdd(flags, 1ull);
    pv[3 * i] = (x - ox) / vs;
    pv[3 * i + 1] = (y - oy) / vs;
    pv[3 * i + 2] = (z - oz) / vs;
}

extern "C" __global__ void prepare_vertices_f32(const float* v, long long n, double ox, double oy, double oz,
                                                double vs, double* pv, unsigned long long* flags)
{
    prepare<float>(v, n, ox, oy, oz, vs, pv, flags);
}

extern "C" __global__ void prepare_vertices_f64(const double* v, long long n, double ox, double oy, double oz,
                                                double vs, double* pv, unsigned long long* flags)
{
    prepare<double>(v, n, ox, oy, oz, vs, pv, flags);
}

// ---------------------------------------------------------------- surface (§3)

extern "C" __global__ void surface_column_counts(const double* __restrict__ pv, const int* __restrict__ tris,
                                                 long long n_tris, long long n_vertices, int nx, int ny, int nz,
                                                 int lx, int ly, int lz, int hx, int hy, int hz,
                                                 long long* __restrict__ counts, unsigned long long* __restrict__ flags)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tris) return;
    if (!valid_triangle(tris, t, n_vertices, flags)) { counts[t] = 0; return; }
    Setup s;
    make_setup(pv, tris, t, nx, ny, nz, 0, s);
    clip_to_box(s, make_box(lx, ly, lz, hx, hy, hz));
    long long w[3];
#pragma unroll
    for (int a = 0; a < 3; ++a) w[a] = s.hi[a] - s.lo[a] + 1;
    // Columns run along the dominant axis: their number is the box's extent across it.
    long long across = s.dom == 0 ? w[1] * w[2] : (s.dom == 1 ? w[2] * w[0] : w[0] * w[1]);
    counts[t] = (w[0] > 0 && w[1] > 0 && w[2] > 0) ? across : 0;
}

// One column along the dominant axis D: its own projection test, then the few candidates.
// OWNER = false: set the voxel's bit. OWNER = true: record the smallest triangle index
// touching each voxel of a sorted list of set voxels (for attributes; no bit writes).
struct OwnerList {
    const long long* linear;  // sorted linear indices (k*ny + j)*nx + i of set voxels (in the box)
    long long count;
    int* owner;               // per listed voxel: min triangle index (init INT_MAX)
};

template <int D, bool OWNER>
__device__ __forceinline__ void column(const Setup& s, long long t, long long local, const Box& box,
                                       unsigned int* __restrict__ words, OwnerList list)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    constexpr int pc = plane_of_axis(D), p1 = (pc + 1) % 3, p2 = (pc + 2) % 3;
    long long wu = s.hi[U] - s.lo[U] + 1;
    long long cu = s.lo[U] + local % wu;
    long long cv = s.lo[V] + local / wu;
    double q[3];
    q[D] = 0.0;
    q[U] = (double)cu;
    q[V] = (double)cv;
    if (!projection_test<pc>(s, q)) return;  // the column's own projection (depth-independent)

    long long dlo, dhi;
    column_depths<D>(s, cu, cv, dlo, dhi);
    const long long nx = box.hi[0] - box.lo[0], ny = box.hi[1] - box.lo[1];
    const long long wx = (nx + 31) >> 5;
    for (long long d = dlo; d <= dhi; ++d) {
        q[D] = (double)d;
        if (!projection_test<p1>(s, q) || !projection_test<p2>(s, q)) continue;
        if (s.thin && !thin_test(s, q)) continue;
        if (!plane_test(s, q)) continue;
        long long i = (long long)q[0] - box.lo[0], j = (long long)q[1] - box.lo[1], k = (long long)q[2] - box.lo[2];
        if (OWNER) {
            long long key = (k * ny + j) * nx + i, lo = lower_bound(list.linear, list.count, key);
            if (lo < list.count && list.linear[lo] == key) atomicMin(list.owner + lo, (int)t);
        } else {
            unsigned int bit = 1u << (unsigned int)(i & 31);
            unsigned int* w = words + (k * ny + j) * wx + (i >> 5);
            if (!(*w & bit)) atomicOr(w, bit);  // skip the atomic when a neighbour already set it
        }
    }
}

extern "C" __global__ void surface_columns(const double* __restrict__ pv, const int* __restrict__ tris,
                                           const long long* __restrict__ ends, const long long* __restrict__ counts,
                                           long long n_tris, long long n_items, int nx, int ny, int nz,
                                           int lx, int ly, int lz, int hx, int hy, int hz, int thin,
                                           unsigned int* __restrict__ words)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    Setup s;
    make_setup(pv, tris, t, nx, ny, nz, thin, s);
    const Box box = make_box(lx, ly, lz, hx, hy, hz);
    clip_to_box(s, box);
    OwnerList none = {nullptr, 0, nullptr};
    switch (s.dom) {
        case 0: column<0, false>(s, t, local, box, words, none); break;
        case 1: column<1, false>(s, t, local, box, words, none); break;
        default: column<2, false>(s, t, local, box, words, none); break;
    }
}

// Same work items as surface_columns (conservative test): owner triangle per listed voxel.
extern "C" __global__ void surface_owners(const double* __restrict__ pv, const int* __restrict__ tris,
                                          const long long* __restrict__ ends, const long long* __restrict__ counts,
                                          long long n_tris, long long n_items, int nx, int ny, int nz,
                                          int lx, int ly, int lz, int hx, int hy, int hz,
                                          const long long* __restrict__ linear, long long n_listed,
                                          int* __restrict__ owner)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    Setup s;
    make_setup(pv, tris, t, nx, ny, nz, 0, s);
    const Box box = make_box(lx, ly, lz, hx, hy, hz);
    clip_to_box(s, box);
    OwnerList list = {linear, n_listed, owner};
    switch (s.dom) {
        case 0: column<0, true>(s, t, local, box, nullptr, list); break;
        case 1: column<1, true>(s, t, local, box, nullptr, list); break;
        default: column<2, true>(s, t, local, box, nullptr, list); break;
    }
}

// ---------------------------------------------------------------- solid (§4.1)

extern "C" __global__ void solid_column_counts(const double* __restrict__ pv, const int* __restrict__ tris,
                                               long long n_tris, long long n_vertices, int ly, int lz, int hy, int hz,
                                               long long* __restrict__ counts, unsigned long long* __restrict__ flags)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tris) return;
    if (!valid_triangle(tris, t, n_vertices, flags)) { counts[t] = 0; return; }
    YZSetup s;
    make_yz_setup(pv, tris, t, ly, lz, hy, hz, s);
    long long wj = s.jhi - s.jlo + 1, wk = s.khi - s.klo + 1;
    counts[t] = (s.nx != 0 && wj > 0 && wk > 0) ? wj * wk : 0;
}

extern "C" __global__ void solid_flip_starts(const double* __restrict__ pv, const int* __restrict__ tris,
                                             const long long* __restrict__ ends, const long long* __restrict__ counts,
                                             long long n_tris, long long n_items, int lx, int ly, int lz,
                                             int hx, int hy, int hz, int drop_before, unsigned int* __restrict__ words)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    YZSetup s;
    make_yz_setup(pv, tris, t, ly, lz, hy, hz, s);
    long long wj = s.jhi - s.jlo + 1;
    long long j = s.jlo + local % wj, k = s.klo + local / wj;
    double yc = (double)j + 0.5, zc = (double)k + 0.5;
    if (!centre_inside(s, yc, zc)) return;  // top-left fill rule: a centre on an edge counts once
    double qbar = flip_start(s, yc, zc);
    if (qbar >= (double)hx) return;  // flips nothing in the box
    // A crossing before the box starts at its first voxel, unless the caller carries it in.
    if (drop_before && qbar < (double)lx) return;
    long long start = (qbar < (double)lx ? (long long)lx : (long long)qbar) - lx;
    long long wx = ((long long)(hx - lx) + 31) >> 5;
    long long row = (k - lz) * (long long)(hy - ly) + (j - ly);
    atomicXor(words + row * wx + (start >> 5), 1u << (unsigned int)(start & 31));
}

// Prefix xor along each row: flip starts -> spans. One thread per row.
extern "C" __global__ void prefix_xor_rows(unsigned int* __restrict__ words, long long rows, int wx, int nx)
{
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    unsigned int* w = words + r * wx;
    unsigned int carry = 0u;
    for (int i = 0; i < wx; ++i) {
        unsigned int x = w[i];
        x ^= x << 1; x ^= x << 2; x ^= x << 4; x ^= x << 8; x ^= x << 16;
        x ^= carry;
        carry = (x >> 31) ? 0xffffffffu : 0u;
        w[i] = x;
    }
    int tail = nx & 31;
    if (tail) w[wx - 1] &= (1u << tail) - 1u;
}

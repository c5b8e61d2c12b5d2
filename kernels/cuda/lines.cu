// Segment voxelization: the conservative 3D DDA of seed 001 §3.1, on packed bit grids
// [z][y][x/32].
//
// Mirrors kernels/voxelize/lines.py term by term, in float64 voxel units. Compiled with
// --fmad=false: every operation rounds exactly as NumPy's, so the GPU sets the same voxels
// as the CPU reference.
//
// A DDA step is one voxel slab [X, X+1] along the segment's dominant axis D, computed from
// the segment's start (x = x0 + inc*i, seed 001 Fig. 5), so steps are independent: one
// thread per step. segment_step_counts writes the steps per segment; an inclusive scan of
// those (`ends`) maps a global step to its segment by binary search, as the triangle
// voxelizer does. Each step tests its small block of candidate voxels exactly.

// CANDIDATE_MARGIN: the candidate margin per unit of coordinate size, lines.py _MARGIN
// (2^-40), a double, passed as a -D option by kernels/voxelize/lines.py (DEFINES).
#ifndef CANDIDATE_MARGIN
#error "CANDIDATE_MARGIN comes from Python: compile with kernels/voxelize/lines.DEFINES (launch.define_options)"
#endif

struct Segment {
    double p0[3], d[3], lo[3], hi[3];
    int D;         // dominant axis (first on ties)
    double first;  // first slab along D
    double steps;  // number of slabs (0: misses the grid)
};

__device__ void make_segment(const double* __restrict__ p0s, const double* __restrict__ p1s, long long s,
                             const int n[3], Segment& g)
{
    for (int a = 0; a < 3; ++a) {
        double p0 = p0s[3 * s + a], p1 = p1s[3 * s + a];
        g.p0[a] = p0;
        g.d[a] = p1 - p0;
        g.lo[a] = fmin(p0, p1);
        g.hi[a] = fmax(p0, p1);
    }
    // seed 001 §3.1: Length = the largest |Δ|
    int D = 0;
    double best = fabs(g.d[0]);
    if (fabs(g.d[1]) > best) { D = 1; best = fabs(g.d[1]); }
    if (fabs(g.d[2]) > best) { D = 2; }
    g.D = D;
    g.first = fmax(ceil(g.lo[D]) - 1.0, 0.0);
    double last = fmin(floor(g.hi[D]), (double)n[D] - 1.0);
    bool outside = false;
    for (int a = 0; a < 3; ++a)
        outside = outside || (ceil(g.lo[a]) - 1.0 > (double)n[a] - 1.0) || (floor(g.hi[a]) < 0.0);
    g.steps = outside ? 0.0 : fmax((last - g.first) + 1.0, 0.0);
}

// Voxel range [c_lo, c_hi] along the non-dominant axis A for one step.
__device__ __forceinline__ void candidate_range(const Segment& g, int A, double t_lo, double t_hi, int n_A,
                                                double& c_lo, double& c_hi)
{
    double ua = g.p0[A] + g.d[A] * t_lo;
    double ub = g.p0[A] + g.d[A] * t_hi;
    double margin = ((1.0 + fabs(g.p0[A])) + fabs(g.d[A])) * CANDIDATE_MARGIN;
    double lo = ceil(fmin(ua, ub) - margin) - 1.0;
    double hi = floor(fmax(ua, ub) + margin);
    c_lo = fmax(fmax(lo, ceil(g.lo[A]) - 1.0), 0.0);
    c_hi = fmin(fmin(hi, floor(g.hi[A])), (double)n_A - 1.0);
}

// Closed segment meets the closed unit box at min corner q (separating axes, no division).
__device__ __forceinline__ bool touches(const Segment& g, const double q[3])
{
    for (int a = 0; a < 3; ++a)
        if (!(g.lo[a] <= q[a] + 1.0 && g.hi[a] >= q[a])) return false;
    for (int a = 0; a < 3; ++a) {  // planes (0,1), (1,2), (2,0)
        int b = (a + 1) % 3;
        double f = g.d[a] * (q[b] - g.p0[b]) - g.d[b] * (q[a] - g.p0[a]);
        double f_max = (f + fmax(g.d[a], 0.0)) + fmax(-g.d[b], 0.0);
        double f_min = (f + fmin(g.d[a], 0.0)) + fmin(-g.d[b], 0.0);
        if (!(f_min <= 0.0 && f_max >= 0.0)) return false;
    }
    return true;
}

#include "voxfx_search.cuh"  // owner_of: the balanced-work owner search

extern "C" __global__ void segment_step_counts(const double* __restrict__ p0s, const double* __restrict__ p1s,
                                               long long n_segments, int nx, int ny, int nz,
                                               long long* __restrict__ steps)
{
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_segments) return;
    const int n[3] = {nx, ny, nz};
    Segment g;
    make_segment(p0s, p1s, s, n, g);
    steps[s] = (long long)g.steps;
}

extern "C" __global__ void segment_steps(const double* __restrict__ p0s, const double* __restrict__ p1s,
                                         const long long* __restrict__ ends, const long long* __restrict__ steps,
                                         long long n_segments, long long n_items, int nx, int ny, int nz,
                                         unsigned int* __restrict__ words)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long s = owner_of(ends, n_segments, item);
    long long local = item - (ends[s] - steps[s]);
    const int n[3] = {nx, ny, nz};
    Segment g;
    make_segment(p0s, p1s, s, n, g);
    int D = g.D, U = (D + 1) % 3, V = (D + 2) % 3;
    double X = g.first + (double)local;

    // The segment's parameter range inside the slab [X, X+1] along D.
    double t_lo = 0.0, t_hi = 1.0;  // a point (d = 0) lies in its one or two slabs whole
    if (g.d[D] != 0.0) {
        double ta = (X - g.p0[D]) / g.d[D];
        double tb = ((X + 1.0) - g.p0[D]) / g.d[D];
        t_lo = fmax(fmin(ta, tb), 0.0);
        t_hi = fmin(fmax(ta, tb), 1.0);
    }
    double u_lo, u_hi, v_lo, v_hi;
    candidate_range(g, U, t_lo, t_hi, n[U], u_lo, u_hi);
    candidate_range(g, V, t_lo, t_hi, n[V], v_lo, v_hi);

    int wx = (nx + 31) >> 5;
    double q[3];
    q[D] = X;
    for (double v = v_lo; v <= v_hi; v += 1.0) {
        q[V] = v;
        for (double u = u_lo; u <= u_hi; u += 1.0) {
            q[U] = u;
            if (!touches(g, q)) continue;
            long long i = (long long)q[0], j = (long long)q[1], k = (long long)q[2];
            unsigned int bit = 1u << (unsigned int)(i & 31);
            unsigned int* w = words + (k * ny + j) * wx + (i >> 5);
            if (!(*w & bit)) atomicOr(w, bit);  // skip the atomic when a neighbour already set it
        }
    }
}

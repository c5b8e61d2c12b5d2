// The triangle voxelizer's shared device functions (seed 004 §3–4): the setup of a triangle
// and its exact conservative test of a voxel (Eqs. 1–3, thin §3.4), the candidate depths of a
// column, the solid's setup in the yz plane (§4.1). Mirrors kernels/voxelize/triangles.py,
// exact.py, surface.py and solid.py term by term, in float64 voxel units; compiled with
// --fmad=false (every operation rounds as NumPy's). Included by the dense kernels
// (voxelize.cu, whose head says the method) and the sparse ones (voxelize_sparse.cu, _tiles.cu,
// _solid.cu), which so compile only what they call.
#pragma once

// Every array index below is a compile-time constant (unrolled loops, templates on the
// dominant axis), so the setup lives in registers rather than in local memory.

// Plane p uses axes (PA(p), PB(p)) and normal axis PC(p): xy (c = z), yz (c = x), zx (c = y).
__host__ __device__ constexpr int PA(int p) { return p; }
__host__ __device__ constexpr int PB(int p) { return (p + 1) % 3; }
__host__ __device__ constexpr int PC(int p) { return (p + 2) % 3; }
__host__ __device__ constexpr int plane_of_axis(int d) { return d == 2 ? 0 : (d == 0 ? 1 : 2); }

// A triangle whose corner indices are out of range is flagged (flags[1]) and given no
// work, so nothing dereferences a bad index before the host sees the flag.
__device__ __forceinline__ bool valid_triangle(const int* __restrict__ tris, long long t, long long n_vertices,
                                               unsigned long long* __restrict__ flags)
{
    int a = tris[3 * t], b = tris[3 * t + 1], c = tris[3 * t + 2];
    if (a < 0 || b < 0 || c < 0 || a >= n_vertices || b >= n_vertices || c >= n_vertices) {
        atomicOr(flags + 1, 1ull);
        return false;
    }
    return true;
}

#include "voxfx_exact.cuh"  // tier 3: exact signs by expansion arithmetic

// Rounding-bound factor of the float filters: exact.py FILTER (2^-47), a double, passed as
// -DVOXFX_FILTER by kernels/voxelize/gpu.py (DEFINES).
#ifndef VOXFX_FILTER
#error "VOXFX_FILTER comes from Python: compile with kernels/voxelize/gpu.DEFINES (launch.define_options)"
#endif

struct Setup {
    double v[3][3];      // corners
    double e[3][3];      // e_i = v_{i+1} - v_i
    double n[3];         // e0 x e1
    double nerr[3];      // scale of n's rounding error (exact.normal_error)
    int orient[3];       // exact signs of n
    double d1, d2;       // plane offsets (Eq. 1) at the corners where n.x is largest / smallest
    double pbound;       // tier-1 bound of Eq. 1 over the box
    double ne[3][3][2];  // [plane][edge] edge normal (a, b)
    double de[3][3];     // [plane][edge] edge offset (Eq. 2)
    double ebound[3][3]; // [plane][edge] tier-1 bound of Eq. 2 over the box
    double side[3];      // [plane] orientation +-1
    double td1, td2;     // thin only (§3.4)
    double tde[3][3];
    long long lo[3], hi[3];
    int dom;
    bool wide;           // n too uncertain for the depth range: test the whole box column
    int thin;
};

__device__ __forceinline__ void load_corners(const double* __restrict__ pv, const int* __restrict__ tris,
                                             long long t, double v[3][3])
{
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        long long vi = tris[3 * t + c];
        v[c][0] = pv[3 * vi + 0];
        v[c][1] = pv[3 * vi + 1];
        v[c][2] = pv[3 * vi + 2];
    }
}

// Mirrors triangles.setup (and exact.orientation_signs / normal_error).
__device__ __forceinline__ void make_setup(const double* __restrict__ pv, const int* __restrict__ tris, long long t,
                                           int nx, int ny, int nz, int thin, Setup& s)
{
    load_corners(pv, tris, t, s.v);
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int a = 0; a < 3; ++a)
            s.e[i][a] = s.v[(i + 1) % 3][a] - s.v[i][a];
    const double* e0 = s.e[0];
    const double* e1 = s.e[1];
    s.n[0] = e0[1] * e1[2] - e0[2] * e1[1];
    s.n[1] = e0[2] * e1[0] - e0[0] * e1[2];
    s.n[2] = e0[0] * e1[1] - e0[1] * e1[0];
    s.nerr[0] = fabs(e0[1] * e1[2]) + fabs(e0[2] * e1[1]);
    s.nerr[1] = fabs(e0[2] * e1[0]) + fabs(e0[0] * e1[2]);
    s.nerr[2] = fabs(e0[0] * e1[1]) + fabs(e0[1] * e1[0]);
    const double* v0 = s.v[0];
    const double* n = s.n;
#pragma unroll
    for (int c = 0; c < 3; ++c) {  // exact signs: a sliver's float normal is noise
        const int a = (c + 1) % 3, b = (c + 2) % 3;
        if (fabs(n[c]) <= VOXFX_FILTER * s.nerr[c] && s.nerr[c] > 0)
            s.orient[c] = orient2d_exact(s.v[0][a], s.v[0][b], s.v[1][a], s.v[1][b], s.v[2][a], s.v[2][b]);
        else
            s.orient[c] = n[c] > 0 ? 1 : (n[c] < 0 ? -1 : 0);
    }
    const int dims[3] = {nx, ny, nz};
    double reach[3];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        double bmin = fmin(fmin(s.v[0][a], s.v[1][a]), s.v[2][a]);
        double bmax = fmax(fmax(s.v[0][a], s.v[1][a]), s.v[2][a]);
        long long lo = (long long)ceil(bmin) - 1;
        long long hi = (long long)floor(bmax);
        s.lo[a] = lo > 0 ? lo : 0;
        s.hi[a] = hi < dims[a] - 1 ? hi : dims[a] - 1;
        reach[a] = fmax(fabs((double)s.lo[a]), fabs((double)(s.hi[a] + 1)));
    }
    double c0 = s.orient[0] > 0 ? 1.0 : 0.0, c1 = s.orient[1] > 0 ? 1.0 : 0.0, c2 = s.orient[2] > 0 ? 1.0 : 0.0;
    s.d1 = (n[0] * (c0 - v0[0]) + n[1] * (c1 - v0[1])) + n[2] * (c2 - v0[2]);
    s.d2 = (n[0] * ((1.0 - c0) - v0[0]) + n[1] * ((1.0 - c1) - v0[1])) + n[2] * ((1.0 - c2) - v0[2]);
    s.pbound = VOXFX_FILTER * ((((fabs(n[0]) + s.nerr[0]) * ((reach[0] + fabs(v0[0])) + 1.0))
                                + ((fabs(n[1]) + s.nerr[1]) * ((reach[1] + fabs(v0[1])) + 1.0)))
                               + ((fabs(n[2]) + s.nerr[2]) * ((reach[2] + fabs(v0[2])) + 1.0)));
    s.thin = thin;
    if (thin) {
        double m = (n[0] * (0.5 - v0[0]) + n[1] * (0.5 - v0[1])) + n[2] * (0.5 - v0[2]);
        double h = 0.5 * fmax(fmax(fabs(n[0]), fabs(n[1])), fabs(n[2]));
        s.td1 = m + h;
        s.td2 = m - h;
    }
#pragma unroll
    for (int p = 0; p < 3; ++p) {
        const int a = PA(p), b = PB(p), c = PC(p);
        double sg = s.orient[c] >= 0 ? 1.0 : -1.0;
        s.side[p] = sg;
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            double na = (-s.e[i][b]) * sg;
            double nb = s.e[i][a] * sg;
            double t2 = na * s.v[i][a] + nb * s.v[i][b];
            s.de[p][i] = ((-t2) + fmax(0.0, na)) + fmax(0.0, nb);
            s.ebound[p][i] = VOXFX_FILTER * (fabs(na) * ((reach[a] + fabs(s.v[i][a])) + 1.0)
                                             + fabs(nb) * ((reach[b] + fabs(s.v[i][b])) + 1.0));
            if (thin) {
                double t3 = na * (0.5 - s.v[i][a]) + nb * (0.5 - s.v[i][b]);
                s.tde[p][i] = t3 + 0.5 * fmax(fabs(na), fabs(nb));
            }
            s.ne[p][i][0] = na;
            s.ne[p][i][1] = nb;
        }
    }
    double a0 = fabs(n[0]), a1 = fabs(n[1]), a2 = fabs(n[2]);
    int dom = 0;
    double best = a0;
    if (a1 > best) { dom = 1; best = a1; }
    if (a2 > best) { dom = 2; }
    s.dom = dom;
    s.wide = !(8.0 * s.pbound < fabs(n[dom]));
}

// A box [lo, hi) of the grid (slabs.py): the voxels a launch evaluates and the bit grid it
// writes (indexed from lo). Cutting the touched box to it after make_setup keeps the setup
// and its bounds those of the whole grid, so every voxel is decided as without a box.
struct Box {
    long long lo[3], hi[3];
};

__device__ __forceinline__ Box make_box(int lx, int ly, int lz, int hx, int hy, int hz)
{
    Box b;
    b.lo[0] = lx; b.lo[1] = ly; b.lo[2] = lz;
    b.hi[0] = hx; b.hi[1] = hy; b.hi[2] = hz;
    return b;
}

__device__ __forceinline__ void clip_to_box(Setup& s, const Box& b)
{
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        if (s.lo[a] < b.lo[a]) s.lo[a] = b.lo[a];
        if (s.hi[a] > b.hi[a] - 1) s.hi[a] = b.hi[a] - 1;
    }
}

// Tiers 2-3 of edge i's function >= 0 at corner q + (critical offsets) (exact.edge_at_least_zero).
template <int P>
__device__ __noinline__ bool edge_exact(const Setup& s, int i, const double* q)
{
    constexpr int a = PA(P), b = PB(P);
    const double na = s.ne[P][i][0], nb = s.ne[P][i][1];
    const double xa = q[a] + (na > 0 ? 1.0 : 0.0), xb = q[b] + (nb > 0 ? 1.0 : 0.0);
    for (int k = 0; k < 2; ++k) {  // N.(X - u) = N.(X - w): try both ends
        const double* r = s.v[(i + k) % 3];
        double da = xa - r[a], db = xb - r[b];
        double E = na * da + nb * db;
        double B = VOXFX_FILTER * (fabs(na) * fabs(da) + fabs(nb) * fabs(db));
        if (E >= B) return true;
        if (E < -B) return false;
    }
    const double* u = s.v[i];
    const double* w = s.v[(i + 1) % 3];
    return s.side[P] * (double)orient2d_exact(u[a], u[b], w[a], w[b], xa, xb) >= 0;
}

// Eq. 3 in plane P, exact: tier 1 here, the unsure edges through edge_exact.
template <int P>
__device__ __forceinline__ bool projection_test(const Setup& s, const double* q)
{
    constexpr int a = PA(P), b = PB(P);
    int unsure = 0;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        double E = (s.ne[P][i][0] * q[a] + s.ne[P][i][1] * q[b]) + s.de[P][i];
        if (E >= s.ebound[P][i]) continue;
        if (E < -s.ebound[P][i]) return false;
        unsure |= 1 << i;
    }
    for (int i = 0; i < 3; ++i)
        if ((unsure >> i & 1) && !edge_exact<P>(s, i, q)) return false;
    return true;
}

// Tiers 2-3 of sign(n.(X - v0)) (exact.plane_signs).
__device__ __noinline__ int plane_sign(const Setup& s, const double* X)
{
    const double* n = s.n;
    for (int c = 0; c < 3; ++c) {  // n.(X - v_c) is the same for every corner
        const double* r = s.v[c];
        double d0 = X[0] - r[0], d1 = X[1] - r[1], d2 = X[2] - r[2];
        double value = (n[0] * d0 + n[1] * d1) + n[2] * d2;
        double B = VOXFX_FILTER * ((((fabs(n[0]) + s.nerr[0]) * fabs(d0)) + ((fabs(n[1]) + s.nerr[1]) * fabs(d1)))
                                   + ((fabs(n[2]) + s.nerr[2]) * fabs(d2)));
        if (value > B) return 1;
        if (value < -B) return -1;
        if (!(B > 0)) return 0;
    }
    return plane_exact(s.v[0], s.v[1], s.v[2], X);
}

// Eq. 1, exact: the plane meets the closed box iff n.(X - v0) >= 0 at the corner where it
// is largest and <= 0 where it is smallest; no normal (collinear corners): the edges decide.
__device__ __forceinline__ bool plane_test(const Setup& s, const double* q)
{
    if (!s.orient[0] && !s.orient[1] && !s.orient[2]) return true;
    double npv = (s.n[0] * q[0] + s.n[1] * q[1]) + s.n[2] * q[2];
    double a = npv + s.d1, b = npv + s.d2;
    if (a >= s.pbound && b <= -s.pbound) return true;
    if (a < -s.pbound || b > s.pbound) return false;
    double hi[3], lo[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        double c = s.orient[k] > 0 ? 1.0 : 0.0;
        hi[k] = q[k] + c;
        lo[k] = q[k] + (1.0 - c);
    }
    return (a >= s.pbound || plane_sign(s, hi) >= 0) && (b <= -s.pbound || plane_sign(s, lo) <= 0);
}

// §3.4 in floating point (triangles.thin_test), only ever with the exact conservative test.
__device__ __forceinline__ bool thin_test(const Setup& s, const double* q)
{
    double npv = (s.n[0] * q[0] + s.n[1] * q[1]) + s.n[2] * q[2];
    double x = npv + s.td1, y = npv + s.td2;
    if (!((x <= 0 && y >= 0) || (x >= 0 && y <= 0))) return false;
#pragma unroll
    for (int p = 0; p < 3; ++p)
#pragma unroll
        for (int i = 0; i < 3; ++i)
            if (!((s.ne[p][i][0] * q[PA(p)] + s.ne[p][i][1] * q[PB(p)]) + s.tde[p][i] >= 0)) return false;
    return true;
}

#include "voxfx_search.cuh"  // owner_of: the balanced-work owner search

// The candidate depths along D of column (cu, cv): where the triangle's plane crosses the
// column's square, one voxel of margin each way, inside the triangle's box (the whole box
// column for slivers, n_D = 0). Shared by the dense and the sparse surface kernels.
template <int D>
__device__ __forceinline__ void column_depths(const Setup& s, long long cu, long long cv, long long& dlo,
                                              long long& dhi)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    const double* n = s.n;
    const double* v0 = s.v[0];
    double nD = n[D], nU = n[U], nV = n[V];
    dlo = s.lo[D];
    dhi = s.hi[D];
    if (!s.wide) {  // else (slivers, n_D = 0): every voxel of the box's column
        double nv0 = (n[0] * v0[0] + n[1] * v0[1]) + n[2] * v0[2];
        double e00 = ((nv0 - nU * ((double)cu + 0.0)) - nV * ((double)cv + 0.0)) / nD;
        double e01 = ((nv0 - nU * ((double)cu + 0.0)) - nV * ((double)cv + 1.0)) / nD;
        double e10 = ((nv0 - nU * ((double)cu + 1.0)) - nV * ((double)cv + 0.0)) / nD;
        double e11 = ((nv0 - nU * ((double)cu + 1.0)) - nV * ((double)cv + 1.0)) / nD;
        double dmin = fmin(fmin(e00, e01), fmin(e10, e11));
        double dmax = fmax(fmax(e00, e01), fmax(e10, e11));
        long long a = (long long)floor(dmin) - 1, b = (long long)floor(dmax) + 1;
        dlo = a > dlo ? a : dlo;
        dhi = b < dhi ? b : dhi;
    }
}

// The tests of candidate voxel q of a column along D whose own projection passed, as
// voxelize.cu's column<D, false> makes them (the same tests in the same order): the sparse
// surface kernels' (voxelize_sparse.cu, voxelize_sparse_tiles.cu). column keeps its own
// lines: calling this there (as `if (!voxel_set<D>(s, q)) continue;`, `if (voxel_set<D>(s, q))
// {...}` or through a bool) gives the same floating-point operations but other PTX: 42 more
// mov.u16 in surface_columns, 36 in surface_owners (nvcc 13.0, sm_90).
template <int D>
__device__ __forceinline__ bool voxel_set(const Setup& s, const double* q)
{
    constexpr int pc = plane_of_axis(D), p1 = (pc + 1) % 3, p2 = (pc + 2) % 3;
    if (!projection_test<p1>(s, q) || !projection_test<p2>(s, q)) return false;
    if (s.thin && !thin_test(s, q)) return false;
    return plane_test(s, q);
}

// ---------------------------------------------------------------- solid (§4.1)

struct YZSetup {
    double nx, ny, nz, nv0;
    double p[3][2], q[3][2], sign[3];  // per edge: endpoints (y, z) in canonical order (solid.py)
    bool tl[3];
    long long jlo, jhi, klo, khi;
};

// Column centres are cut to the box's rows [ly, hy) x [lz, hz) (the grid's, without a box).
__device__ void make_yz_setup(const double* __restrict__ pv, const int* __restrict__ tris, long long t,
                              int ly, int lz, int hy, int hz, YZSetup& s)
{
    double v[3][3], e[3][3];
    load_corners(pv, tris, t, v);
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int a = 0; a < 3; ++a)
            e[i][a] = v[(i + 1) % 3][a] - v[i][a];
    s.nx = e[0][1] * e[1][2] - e[0][2] * e[1][1];
    s.ny = e[0][2] * e[1][0] - e[0][0] * e[1][2];
    s.nz = e[0][0] * e[1][1] - e[0][1] * e[1][0];
    s.nv0 = (s.nx * v[0][0] + s.ny * v[0][1]) + s.nz * v[0][2];
    double sg = s.nx >= 0 ? 1.0 : -1.0;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        double na = (-e[i][2]) * sg, nb = e[i][1] * sg;
        s.tl[i] = (na > 0) || (na == 0 && nb < 0);
        const double* a = v[i];
        const double* b = v[(i + 1) % 3];
        bool swap = (b[1] < a[1]) || (b[1] == a[1] && b[2] < a[2]);
        const double* lo = swap ? b : a;
        const double* hi = swap ? a : b;
        s.p[i][0] = lo[1]; s.p[i][1] = lo[2];
        s.q[i][0] = hi[1]; s.q[i][1] = hi[2];
        s.sign[i] = sg * (swap ? -1.0 : 1.0);
    }
    double ymin = fmin(fmin(v[0][1], v[1][1]), v[2][1]), ymax = fmax(fmax(v[0][1], v[1][1]), v[2][1]);
    double zmin = fmin(fmin(v[0][2], v[1][2]), v[2][2]), zmax = fmax(fmax(v[0][2], v[1][2]), v[2][2]);
    long long a;
    a = (long long)ceil(ymin - 0.5);  s.jlo = a > ly ? a : ly;
    a = (long long)floor(ymax - 0.5); s.jhi = a < hy - 1 ? a : hy - 1;
    a = (long long)ceil(zmin - 0.5);  s.klo = a > lz ? a : lz;
    a = (long long)floor(zmax - 0.5); s.khi = a < hz - 1 ? a : hz - 1;
}

// Column centre (yc, zc) inside the triangle's yz projection (solid.py, flip_starts_cpu): each
// edge function E > 0, or E = 0 on a top-left edge, so a centre on an edge counts once.
// Shared edges give both triangles exactly ±E (solid.py, edge_function).
__device__ __forceinline__ bool centre_inside(const YZSetup& s, double yc, double zc)
{
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        double E = s.sign[i] * ((s.q[i][0] - s.p[i][0]) * (zc - s.p[i][1]) - (s.q[i][1] - s.p[i][1]) * (yc - s.p[i][0]));
        if (!(E > 0 || (E == 0 && s.tl[i]))) return false;
    }
    return true;
}

// The flip start of a column whose centre is inside: the centre projected along x onto the
// triangle's plane at q, every voxel i >= q̄ = ⌊q + ½⌋ flips (§4.1; solid.py).
__device__ __forceinline__ double flip_start(const YZSetup& s, double yc, double zc)
{
    double q = ((s.nv0 - s.ny * yc) - s.nz * zc) / s.nx;
    return floor(q + 0.5);
}

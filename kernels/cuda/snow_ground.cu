// Ground side of the snow simulation (seed 002 §2.4.3, §3.3.1–3.3.2) on the vertex lattice
// (gy, gx) of kernels/snow/domain.py: receiver height field, deposit, redistribution,
// and the wind grid's obstacle cells below the snow surface (drift: snow_drift.cu).
//
// Mirrors kernels/snow/ground.py term by term. Compiled with --fmad=false: every float
// and double operation rounds exactly as NumPy's, so terrain and solid are bit-identical
// to the CPU reference and the float32 passes agree with it to the last bit as well.

// NO_GROUND (kernels/snow/domain.py) comes as a -D option from its Python module.
#ifndef NO_GROUND
#error "compile with -DNO_GROUND (kernels/snow/domain.py's value)"
#endif

// ---------------------------------------------------------------- terrain (§2.4.3)
//
// Vertices come in lattice units X = (x − ox)/cell, Y = (y − oy)/cell (float64, made by
// CuPy's elementwise ops, which round as NumPy's). Work items are (triangle, lattice
// vertex in its bounding box), load-balanced by an inclusive scan of per-triangle counts
// as in voxelize.cu; each item writes the height of the triangle above its vertex with a
// float atomicMax on order-preserving integer keys.

struct TriXY {
    double X[3], Y[3], Z[3];
    double absA;           // |twice the signed xy area|
    double sg;             // sign of the area: +1 counter-clockwise seen from above
    long long ilo, ihi, jlo, jhi;  // lattice vertices of the bounding box, clipped
};

__device__ __forceinline__ double clip(double v, double lo, double hi)  // bound before an integer cast
{
    return fmin(fmax(v, lo), hi);
}

__device__ __forceinline__ void make_trixy(const double* __restrict__ X, const double* __restrict__ Y,
                                           const double* __restrict__ Z, const int* __restrict__ tris,
                                           long long t, int gx, int gy, TriXY& s)
{
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        long long v = tris[3 * t + c];
        s.X[c] = X[v];
        s.Y[c] = Y[v];
        s.Z[c] = Z[v];
    }
    double A = (s.X[1] - s.X[0]) * (s.Y[2] - s.Y[0]) - (s.Y[1] - s.Y[0]) * (s.X[2] - s.X[0]);
    s.absA = fabs(A);
    s.sg = A > 0 ? 1.0 : -1.0;
    double xmin = fmin(fmin(s.X[0], s.X[1]), s.X[2]), xmax = fmax(fmax(s.X[0], s.X[1]), s.X[2]);
    double ymin = fmin(fmin(s.Y[0], s.Y[1]), s.Y[2]), ymax = fmax(fmax(s.Y[0], s.Y[1]), s.Y[2]);
    s.ilo = (long long)clip(ceil(xmin), 0.0, (double)gx);  // an empty range when off the lattice
    s.ihi = (long long)clip(floor(xmax), -1.0, (double)(gx - 1));
    s.jlo = (long long)clip(ceil(ymin), 0.0, (double)gy);
    s.jhi = (long long)clip(floor(ymax), -1.0, (double)(gy - 1));
}

// Edge function of edge k (corner k → k+1), positive inside. The two corners are taken in
// lexicographic order so that two triangles sharing an edge evaluate the very same
// product and see complementary signs: a vertex on a shared edge is inside at least one.
__device__ __forceinline__ double edge_function(const TriXY& s, int k, double qx, double qy)
{
    int a = k, b = (k + 1) % 3;
    double flip = 1.0;
    if (s.X[b] < s.X[a] || (s.X[b] == s.X[a] && s.Y[b] < s.Y[a])) { int c = a; a = b; b = c; flip = -1.0; }
    double f = (s.X[b] - s.X[a]) * (qy - s.Y[a]) - (s.Y[b] - s.Y[a]) * (qx - s.X[a]);
    return (f * flip) * s.sg;
}

__device__ __forceinline__ unsigned int height_key(float z)  // monotone float → uint (no NaN)
{
    unsigned int b = __float_as_uint(z);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float key_height(unsigned int k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

extern "C" __global__ void terrain_counts(const double* __restrict__ X, const double* __restrict__ Y,
                                          const double* __restrict__ Z, const int* __restrict__ tris,
                                          long long n_tris, long long n_vertices, int gx, int gy,
                                          long long* __restrict__ counts, unsigned long long* __restrict__ flags)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tris) return;
    int a = tris[3 * t], b = tris[3 * t + 1], c = tris[3 * t + 2];
    if (a < 0 || b < 0 || c < 0 || a >= n_vertices || b >= n_vertices || c >= n_vertices) {
        atomicOr(flags, 1ull);  // never read through a bad index: the host raises
        counts[t] = 0;
        return;
    }
    TriXY s;
    make_trixy(X, Y, Z, tris, t, gx, gy, s);
    long long wi = s.ihi - s.ilo + 1, wj = s.jhi - s.jlo + 1;
    // A triangle seen edge-on from above (a wall) covers no area: its neighbours do.
    counts[t] = (s.absA > 0 && wi > 0 && wj > 0) ? wi * wj : 0;
}

#include "voxfx_search.cuh"  // owner_of: the balanced-work owner search

extern "C" __global__ void terrain_items(const double* __restrict__ X, const double* __restrict__ Y,
                                         const double* __restrict__ Z, const int* __restrict__ tris,
                                         const long long* __restrict__ ends, const long long* __restrict__ counts,
                                         long long n_tris, long long n_items, int gx, int gy,
                                         unsigned int* __restrict__ keys)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    TriXY s;
    make_trixy(X, Y, Z, tris, t, gx, gy, s);
    long long wi = s.ihi - s.ilo + 1;
    long long i = s.ilo + local % wi, j = s.jlo + local / wi;
    double qx = (double)i, qy = (double)j;
    double E0 = edge_function(s, 0, qx, qy);
    double E1 = edge_function(s, 1, qx, qy);
    double E2 = edge_function(s, 2, qx, qy);
    if (!(E0 >= 0 && E1 >= 0 && E2 >= 0)) return;  // closed: edges and corners count
    // Barycentric height: corner 1 is weighted by edge 2 (opposite it), corner 2 by edge 0.
    // Written as z0 + Δ so a flat roof gets exactly its own height.
    double z = s.Z[0] + (E2 * (s.Z[1] - s.Z[0]) + E0 * (s.Z[2] - s.Z[0])) / s.absA;
    double zmin = fmin(fmin(s.Z[0], s.Z[1]), s.Z[2]), zmax = fmax(fmax(s.Z[0], s.Z[1]), s.Z[2]);
    z = fmin(fmax(z, zmin), zmax);  // slivers: rounding must not lift a vertex off the triangle
    float h = (float)z + 0.0f;      // +0: no −0 (its key would sort below +0)
    unsigned int key = height_key(h);
    unsigned int* dst = keys + j * (long long)gx + i;
    if (*dst < key) atomicMax(dst, key);
}

extern "C" __global__ void keys_to_heights(unsigned int* __restrict__ keys, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = __float_as_uint(key_height(keys[i]));
}

// ---------------------------------------------------------------- deposit (§3.3.2)
//
// snow += deposit · (volume / units) / area(vertex), the step's snowfall volume shared over
// the units landed (domain.py); area(vertex) = cell² × ½ on each lattice side it lies on
// (ground.vertex_areas, the trapezoid rule). units is read on the device: no host sync.

extern "C" __global__ void apply_deposit(float* __restrict__ snow, unsigned int* __restrict__ deposit,
                                         const unsigned long long* __restrict__ units, double volume,
                                         double cell2, long long gx, long long gy)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= gx * gy) return;
    unsigned int d = deposit[i];
    if (d == 0) return;
    deposit[i] = 0u;
    unsigned long long u = *units;
    if (u == 0) return;  // nothing landed: nothing to share
    long long x = i % gx, y = i / gx;
    double wx = (x == 0 || x == gx - 1) ? 0.5 : 1.0;
    double wy = (y == 0 || y == gy - 1) ? 0.5 : 1.0;
    double per_unit = volume / (double)u;
    snow[i] = snow[i] + (float)((double)d * per_unit / (cell2 * (wy * wx)));
}

// ---------------------------------------------------------------- redistribution (§3.3.2)
//
// 8-neighbourhood; offsets in this order (axis first, then diagonals). The threshold t is
// tan(repose)·distance: t_axis for the first four, t_diag (√2 farther) for the others.

__constant__ int DX8[8] = {1, -1, 0, 0, 1, -1, 1, -1};
__constant__ int DY8[8] = {0, 0, 1, -1, 1, 1, -1, -1};

// q of the module notes (ground.py) for snow leaving vertex a towards its neighbour b along
// d: a share of the excess over the threshold, q = min(snow_a, (Δh − t)/2), the amount that
// leaves the pair exactly at the angle of repose (thermal erosion, Musgrave et al. 1989).
// A ledge (terrain dropping more than t towards b, not rising more than t behind a) is
// measured against its lip: the receiver's level is at least a's terrain. behind is the
// terrain at a − d, NO_GROUND when off the lattice.
__device__ __forceinline__ float transfer_demand(const float* __restrict__ terrain, const float* __restrict__ snow,
                                                 long long a, long long b, float behind, float t, float m)
{
    float ta = terrain[a], sa = snow[a], tb = terrain[b];
    bool ledge = (ta - tb) > t && !((behind - ta) > t);
    float level = tb + snow[b];
    if (ledge) level = fmaxf(level, ta);
    float excess = ((ta + sa) - level) - t;
    if (!(sa > m) || !(excess > 0.0f)) return 0.0f;
    return fminf(sa, excess * 0.5f);
}

// Transfers are whole multiples of U = 2·ulp(max(giver, receiver)), rounded down, so every
// sum below and the new depths are exact: mass is conserved to the bit (ground.py: _quantise).
__device__ __forceinline__ float quantise(float transfer, float giver, float receiver)
{
    int e;
    frexpf(fmaxf(giver, receiver), &e);
    float unit = ldexpf(1.0f, max(e, -100) - 23);
    return floorf(transfer / unit) * unit;
}

__device__ __forceinline__ float terrain_at(const float* __restrict__ terrain, int i, int j, int gx, int gy)
{
    return (i < 0 || j < 0 || i >= gx || j >= gy) ? NO_GROUND : terrain[(long long)j * gx + i];
}

// q of vertex (i, j) towards d, 0 when the neighbour is off the lattice or NO_GROUND.
__device__ __forceinline__ float demand_along(const float* __restrict__ terrain, const float* __restrict__ snow,
                                             int i, int j, int d, int gx, int gy, float t, float m)
{
    int ni = i + DX8[d], nj = j + DY8[d];
    if (ni < 0 || nj < 0 || ni >= gx || nj >= gy) return 0.0f;
    long long v = (long long)j * gx + i, n = (long long)nj * gx + ni;
    if (terrain[v] == NO_GROUND || terrain[n] == NO_GROUND) return 0.0f;
    return transfer_demand(terrain, snow, v, n, terrain_at(terrain, i - DX8[d], j - DY8[d], gx, gy), t, m);
}

// Pass 1: per giver, scale = k·max(q) / Σ q, so its transfers k·max(q)·q_e/Σq never exceed
// k·q_e (the half excess towards each receiver) and in total never k·snow.
extern "C" __global__ void redistribute_scale(const float* __restrict__ terrain, const float* __restrict__ snow,
                                              float* __restrict__ scale, int gx, int gy, float t_axis,
                                              float t_diag, float m, float k)
{
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= (long long)gx * gy) return;
    int i = (int)(v % gx), j = (int)(v / gx);
    float total = 0.0f, qmax = 0.0f;
    for (int d = 0; d < 8; ++d) {
        float q = demand_along(terrain, snow, i, j, d, gx, gy, d < 4 ? t_axis : t_diag, m);
        total = total + q;
        qmax = fmaxf(qmax, q);
    }
    scale[v] = total > 0.0f ? (k * qmax) / total : 0.0f;
}

// Pass 2 (gather, no atomics): every transfer is recomputed identically by its giver
// (subtracted) and its receiver (added); quantised, so the total is conserved exactly.
extern "C" __global__ void redistribute_gather(const float* __restrict__ terrain, const float* __restrict__ snow,
                                               const float* __restrict__ scale, float* __restrict__ out, int gx,
                                               int gy, float t_axis, float t_diag, float m)
{
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= (long long)gx * gy) return;
    int i = (int)(v % gx), j = (int)(v / gx);
    float sv = snow[v];
    if (terrain[v] == NO_GROUND) { out[v] = sv; return; }
    float given = 0.0f, taken = 0.0f;
    float own = scale[v];
    for (int d = 0; d < 8; ++d) {
        float t = d < 4 ? t_axis : t_diag;
        int ni = i + DX8[d], nj = j + DY8[d];  // receiver of our transfer along d
        if (ni >= 0 && nj >= 0 && ni < gx && nj < gy) {
            long long n = (long long)nj * gx + ni;
            given = given + quantise(demand_along(terrain, snow, i, j, d, gx, gy, t, m) * own, sv, snow[n]);
        }
        ni = i - DX8[d]; nj = j - DY8[d];      // giver whose transfer along d lands here
        if (ni >= 0 && nj >= 0 && ni < gx && nj < gy) {
            long long n = (long long)nj * gx + ni;
            taken = taken + quantise(demand_along(terrain, snow, ni, nj, d, gx, gy, t, m) * scale[n], snow[n], sv);
        }
    }
    out[v] = fmaxf(sv + (taken - given), 0.0f);
}

// ---------------------------------------------------------------- obstacles (§3.3.1)
//
// A wind cell is solid when its centre lies below terrain + snow at the lattice vertex
// nearest to the centre's xy (the flakes' collision rule). One thread per cell.

extern "C" __global__ void solid_from_ground(const float* __restrict__ terrain, const float* __restrict__ snow,
                                             unsigned char* __restrict__ solid, int nx, int ny, int nz,
                                             double ox, double oy, double oz, double h, double gox, double goy,
                                             double gcell, int gx, int gy, int accumulate)
{
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)nx * ny * nz) return;
    long long i = c % nx, j = (c / nx) % ny, k = c / ((long long)nx * ny);
    double cx = ox + ((double)i + 0.5) * h;
    double cy = oy + ((double)j + 0.5) * h;
    double cz = oz + ((double)k + 0.5) * h;
    double fi = floor((cx - gox) / gcell + 0.5), fj = floor((cy - goy) / gcell + 0.5);
    long long vi = (long long)fmin(fmax(fi, 0.0), (double)(gx - 1));
    long long vj = (long long)fmin(fmax(fj, 0.0), (double)(gy - 1));
    long long v = vj * gx + vi;
    float tv = terrain[v];
    bool below = tv != NO_GROUND && cz < (double)(tv + snow[v]);
    unsigned char s = below ? 1 : 0;
    solid[c] = accumulate ? (unsigned char)(solid[c] | s) : s;
}

// FLIP particles and particle <-> grid transfers (seed 003 §4 Alg. 1, §6–7) on the dense MAC
// grid of kernels/flip/grid.py: u (nz, ny, nx+1), v (nz, ny+1, nx), w (nz+1, ny, nx) float32,
// solid (nz, ny, nx) uint8, particles pos/vel (N, 3) and APIC C (N, 3, 3) float32.
// Mirrors kernels/flip/particles.py and transfer.py term by term; compiled with --fmad=false
// so each float operation rounds as NumPy's does. One extern "C" kernel per stage; none
// syncs with the host.
//
// Grid coordinates g = (x − origin)·(1/h); u's nodes sit at (g_x, g_y − ½, g_z − ½), v's at
// (g_x − ½, g_y, g_z − ½), w's at (g_x − ½, g_y − ½, g_z).

// Constants from Python, as -D options (kernels/flip/particles.py builds them): the cell
// types AIR, FLUID, SOLID (kernels/grid/mac.py); the seeding RNG streams STREAM_X/Y/Z/MASK,
// SEED_MARGIN (of a sub-cell) and SEED_SPAN (1 − 2·margin, exact in float32);
// SUBCELL_ORDER_PACKED, the sub-cell order packed 3 bits each (a register, not a divergent
// table look-up); PUSH_EPSILON, cells inside a free cell after a push-out.

#include "voxfx_g2p.cuh"  // g2p_velocity: the FLIP/PIC blend and APIC's C
#include "voxfx_lattice.cuh"  // sample_faces: the trilinear look-up of grid/sample.py
#include "voxfx_mac.cuh"  // cell/face indices, face_cells
#include "voxfx_push.cuh"  // push_out_point, nearest_free_point: the push-out
#include "voxfx_reduce.cuh"  // warp_max
#include "voxfx_rng.cuh"  // RNG of kernels/rng.py

// ------------------------------------------------------------------------------ seeding

// particles.seed_particles: particle p = m·per_cell + s is slot s of source cell m, in
// sub-cell SUBCELL_ORDER[s mod 8] ^ mask (mask: 3 random bits per cell), at a uniform
// offset in it.
extern "C" __global__ void seed_particles(const int* __restrict__ cells, long long n, int per_cell, int nx, int ny,
                                          unsigned int seed_key, float ox, float oy, float oz, float h, float vx,
                                          float vy, float vz, float* __restrict__ pos, float* __restrict__ vel)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long m = p / per_cell;
    unsigned int s = (unsigned int)(p - m * per_cell);
    int c[3] = {cells[3 * m], cells[3 * m + 1], cells[3 * m + 2]};
    unsigned int lin =
        ((unsigned int)c[2] * (unsigned int)ny + (unsigned int)c[1]) * (unsigned int)nx + (unsigned int)c[0];
    unsigned int key = rng_key(seed_key, lin, s);
    unsigned int mask = (unsigned int)(rng_uniform(rng_key(seed_key, lin, 0u), STREAM_MASK) * 8.0f);
    unsigned int sub = ((SUBCELL_ORDER_PACKED >> (3u * (s & 7u))) & 7u) ^ mask;
    const float o[3] = {ox, oy, oz};
    const unsigned int streams[3] = {STREAM_X, STREAM_Y, STREAM_Z};
    for (int a = 0; a < 3; ++a) {
        float half = (float)((sub >> a) & 1u);
        float t = (half + (SEED_MARGIN + rng_uniform(key, streams[a]) * SEED_SPAN)) * 0.5f;
        pos[3 * p + a] = o[a] + ((float)c[a] + t) * h;
    }
    vel[3 * p] = vx;
    vel[3 * p + 1] = vy;
    vel[3 * p + 2] = vz;
}

// ------------------------------------------------------------------------------ classify

extern "C" __global__ void cells_from_solid(const unsigned char* __restrict__ solid, unsigned char* __restrict__ cell,
                                            long long n)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) cell[t] = solid[t] ? SOLID : AIR;
}

// After cells_from_solid: every particle inside the grid marks its non-solid cell FLUID (all
// writers store the same value: no race on the result).
// Particle p's cell c (the floor of its grid coordinates) where it lies inside the grid; false
// outside or not finite (classify's rule: mark_fluid_cells, count_cells_inside).
__device__ __forceinline__ bool cell_inside(const float* __restrict__ pos, long long p, int nx, int ny, int nz,
                                            float ox, float oy, float oz, float inv_h, long long& c)
{
    float fx = floorf((pos[3 * p] - ox) * inv_h);
    float fy = floorf((pos[3 * p + 1] - oy) * inv_h);
    float fz = floorf((pos[3 * p + 2] - oz) * inv_h);
    if (!(fx >= 0.0f && fx < (float)nx && fy >= 0.0f && fy < (float)ny && fz >= 0.0f && fz < (float)nz)) return false;
    c = ((long long)fz * ny + (long long)fy) * nx + (long long)fx;
    return true;
}

extern "C" __global__ void mark_fluid_cells(const float* __restrict__ pos, long long n, int nx, int ny, int nz,
                                            float ox, float oy, float oz, float h, float inv_h,
                                            const unsigned char* __restrict__ solid, unsigned char* __restrict__ cell)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long c;
    if (p >= n || !cell_inside(pos, p, nx, ny, nz, ox, oy, oz, inv_h, c)) return;
    if (!solid[c]) cell[c] = FLUID;
}

// The density correction's counts (kernels/flip/density.py dense_counts): every particle inside
// the grid adds one to its cell, mark_fluid_cells' rule (the cells it marks FLUID).
extern "C" __global__ void count_cells_inside(const float* __restrict__ pos, long long n, int nx, int ny, int nz,
                                              float ox, float oy, float oz, float h, float inv_h,
                                              int* __restrict__ count)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long c;
    if (p >= n || !cell_inside(pos, p, nx, ny, nz, ox, oy, oz, inv_h, c)) return;
    atomicAdd(&count[c], 1);
}

// ------------------------------------------------------------------------------ binning (seed 003 §6)

__device__ __forceinline__ int cell_along(float g, int n)  // cell index clamped into [0, n − 1]; NaN → 0
{
    return (int)fminf(fmaxf(floorf(g), 0.0f), (float)(n - 1));
}

// Counting sort by cell, step 1: each particle's (clamped) cell and its rank among the
// particles of that cell in arrival order (an atomic counter: the order is not reproducible
// yet; sort_cell_segments makes it so). Zero count first.
extern "C" __global__ void count_particles_per_cell(const float* __restrict__ pos, long long n, int nx, int ny, int nz,
                                                   float ox, float oy, float oz, float h, float inv_h,
                                                   int* __restrict__ count, int* __restrict__ cell_of,
                                                   int* __restrict__ rank)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    int i = cell_along((pos[3 * p] - ox) * inv_h, nx);
    int j = cell_along((pos[3 * p + 1] - oy) * inv_h, ny);
    int k = cell_along((pos[3 * p + 2] - oz) * inv_h, nz);
    int c = (k * ny + j) * nx + i;
    cell_of[p] = c;
    rank[p] = atomicAdd(count + c, 1);
}

// Step 2, after an exclusive scan of count into start: particle p goes to slot start + rank.
extern "C" __global__ void place_particles(const int* __restrict__ cell_of, const int* __restrict__ rank,
                                           const int* __restrict__ start, long long n, int* __restrict__ order)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    order[start[cell_of[p]] + rank[p]] = (int)p;
}

// Step 3: one thread per cell sorts its few particle indices (insertion sort), so the order,
// and with it every sum of the gather, is the same on every run.
extern "C" __global__ void sort_cell_segments(int* __restrict__ order, const int* __restrict__ start,
                                              const int* __restrict__ count, long long cells)
{
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cells) return;
    int* seg = order + start[c];
    const int m = count[c];
    for (int a = 1; a < m; ++a) {
        int x = seg[a], b = a - 1;
        while (b >= 0 && seg[b] > x) {
            seg[b + 1] = seg[b];
            --b;
        }
        seg[b + 1] = x;
    }
}

// Step 4: particle data copied into sorted order (coherent reads in the gather: the
// per-subcell copies of §6, with a subcell of one cell).
extern "C" __global__ void copy_sorted_particles(const int* __restrict__ order, long long n,
                                                 const float* __restrict__ pos, const float* __restrict__ vel,
                                                 const float* __restrict__ c, int apic, float* __restrict__ spos,
                                                 float* __restrict__ svel, float* __restrict__ sc)
{
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    long long p = order[s];
    for (int a = 0; a < 3; ++a) {
        spos[3 * s + a] = pos[3 * p + a];
        svel[3 * s + a] = vel[3 * p + a];
    }
    if (apic)
        for (int a = 0; a < 9; ++a) sc[9 * s + a] = c[9 * p + a];
}

// ------------------------------------------------------------------------------ particles -> grid

// Trilinear hat weight of the node with index `node` for a particle at node coordinate g
// (transfer.py _p2g_component: base = floor(g), f = g − base, weights (1 − f, f)). g is
// clamped to [−2, n + 2] first (no-op wherever a face can be touched) so the int is safe.
__device__ __forceinline__ float hat(float g, int n, int node)
{
    g = fminf(fmaxf(g, -2.0f), (float)(n + 2));
    float b = floorf(g);
    float f = g - b;
    int a = node - (int)b;
    return a == 0 ? 1.0f - f : (a == 1 ? f : 0.0f);
}

// What particle p gives to component `comp` at its node (i, j, k): w·q and w, q = v_a, or
// with APIC v_a + C_a·(x_f − x_p) (seed 003 Alg. 1 P2G; Jiang et al.'s affine term).
__device__ __forceinline__ void face_term(const float* __restrict__ vel, const float* __restrict__ c, int apic,
                                          long long p, int comp, float w, int i, int j, int k, float gx, float gy,
                                          float gz, float h, float& wq)
{
    float q = vel[3 * p + comp];
    if (apic) {
        const float* r = c + 9 * p + 3 * comp;
        float dx = ((float)i - gx) * h, dy = ((float)j - gy) * h, dz = ((float)k - gz) * h;
        q = q + (r[0] * dx + r[1] * dy + r[2] * dz);
    }
    wq = w * q;
}

// Gather (seed 003 §7): one thread per index (i, j, k) of the (nx+1)(ny+1)(nz+1) box computes
// its u, v and w faces (those that exist) from the particles of the 3×3×3 cells around cell
// (i, j, k), the only cells whose particles reach them. No atomics; the order of the sums is
// fixed (cells z-y-x, particles by index), so the result is reproducible bit for bit.
extern "C" __global__ void particles_to_grid_gather(const float* __restrict__ pos, const float* __restrict__ vel,
                                                    const float* __restrict__ c, int apic,
                                                    const int* __restrict__ start, const int* __restrict__ count, int nx,
                                                    int ny, int nz, float ox, float oy, float oz, float h, float inv_h,
                                                    float* __restrict__ u, float* __restrict__ v, float* __restrict__ w,
                                                    unsigned char* __restrict__ valid_u,
                                                    unsigned char* __restrict__ valid_v,
                                                    unsigned char* __restrict__ valid_w)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long bx = nx + 1, by = ny + 1, bz = nz + 1;
    if (t >= bx * by * bz) return;
    const int i = (int)(t % bx), j = (int)((t / bx) % by), k = (int)(t / (bx * by));
    const bool has_u = j < ny && k < nz, has_v = i < nx && k < nz, has_w = i < nx && j < ny;
    float nu = 0.0f, du = 0.0f, nv = 0.0f, dv = 0.0f, nw = 0.0f, dw = 0.0f;
    for (int cz = max(k - 1, 0); cz <= min(k + 1, nz - 1); ++cz)
        for (int cy = max(j - 1, 0); cy <= min(j + 1, ny - 1); ++cy)
            for (int cx = max(i - 1, 0); cx <= min(i + 1, nx - 1); ++cx) {
                const long long cell = ((long long)cz * ny + cy) * nx + cx;
                const int first = start[cell], last = first + count[cell];
                for (int s = first; s < last; ++s) {
                    float px = pos[3 * s], py = pos[3 * s + 1], pz = pos[3 * s + 2];
                    if (!(isfinite(px) && isfinite(py) && isfinite(pz))) continue;
                    float gx = (px - ox) * inv_h, gy = (py - oy) * inv_h, gz = (pz - oz) * inv_h;
                    float hx = gx - 0.5f, hy = gy - 0.5f, hz = gz - 0.5f;  // cell-centred coordinates
                    float wq, wt;
                    if (has_u) {
                        wt = hat(gx, nx, i) * hat(hy, ny, j) * hat(hz, nz, k);
                        if (wt != 0.0f) {
                            face_term(vel, c, apic, s, 0, wt, i, j, k, gx, hy, hz, h, wq);
                            nu += wq;
                            du += wt;
                        }
                    }
                    if (has_v) {
                        wt = hat(hx, nx, i) * hat(gy, ny, j) * hat(hz, nz, k);
                        if (wt != 0.0f) {
                            face_term(vel, c, apic, s, 1, wt, i, j, k, hx, gy, hz, h, wq);
                            nv += wq;
                            dv += wt;
                        }
                    }
                    if (has_w) {
                        wt = hat(hx, nx, i) * hat(hy, ny, j) * hat(gz, nz, k);
                        if (wt != 0.0f) {
                            face_term(vel, c, apic, s, 2, wt, i, j, k, hx, hy, gz, h, wq);
                            nw += wq;
                            dw += wt;
                        }
                    }
                }
            }
    if (has_u) {
        long long f = ((long long)k * ny + j) * bx + i;
        u[f] = du > 0.0f ? nu / du : 0.0f;
        valid_u[f] = du > 0.0f;
    }
    if (has_v) {
        long long f = ((long long)k * by + j) * nx + i;
        v[f] = dv > 0.0f ? nv / dv : 0.0f;
        valid_v[f] = dv > 0.0f;
    }
    if (has_w) {
        long long f = ((long long)k * ny + j) * nx + i;
        w[f] = dw > 0.0f ? nw / dw : 0.0f;
        valid_w[f] = dw > 0.0f;
    }
}

// Scatter with float atomics (kept to measure against the gather): one thread per (sorted)
// particle adds w·q into `num` and w into `den` for its 8 faces of each component; the sum
// order, hence the last bits, varies from run to run. Zero num and den first.
extern "C" __global__ void particles_to_grid_scatter(const float* __restrict__ pos, const float* __restrict__ vel,
                                                     const float* __restrict__ c, int apic, long long n, int nx,
                                                     int ny, int nz, float ox, float oy, float oz, float h,
                                                     float inv_h, float* __restrict__ num_u,
                                                     float* __restrict__ num_v, float* __restrict__ num_w,
                                                     float* __restrict__ den_u, float* __restrict__ den_v,
                                                     float* __restrict__ den_w)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    float px = pos[3 * p], py = pos[3 * p + 1], pz = pos[3 * p + 2];
    if (!(isfinite(px) && isfinite(py) && isfinite(pz))) return;
    const float g[3] = {(px - ox) * inv_h, (py - oy) * inv_h, (pz - oz) * inv_h};
    const int cells[3] = {nx, ny, nz};
    float* const num[3] = {num_u, num_v, num_w};
    float* const den[3] = {den_u, den_v, den_w};
    for (int comp = 0; comp < 3; ++comp) {
        float q[3];
        int base[3], size[3];
        for (int a = 0; a < 3; ++a) {
            q[a] = a == comp ? g[a] : g[a] - 0.5f;
            size[a] = cells[a] + (a == comp);
            base[a] = (int)floorf(fminf(fmaxf(q[a], -2.0f), (float)(cells[a] + 2)));
        }
        for (int dz = 0; dz < 2; ++dz)
            for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx) {
                    int i = base[0] + dx, j = base[1] + dy, k = base[2] + dz;
                    if (i < 0 || i >= size[0] || j < 0 || j >= size[1] || k < 0 || k >= size[2]) continue;
                    float wt = hat(q[0], cells[0], i) * hat(q[1], cells[1], j) * hat(q[2], cells[2], k);
                    float wq;
                    face_term(vel, c, apic, p, comp, wt, i, j, k, q[0], q[1], q[2], h, wq);
                    long long f = ((long long)k * size[1] + j) * size[0] + i;
                    atomicAdd(num[comp] + f, wq);
                    atomicAdd(den[comp] + f, wt);
                }
    }
}

extern "C" __global__ void divide_by_weight(float* __restrict__ face, const float* __restrict__ den,
                                            unsigned char* __restrict__ valid, long long n)
{
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= n) return;
    float d = den[f];
    face[f] = d > 0.0f ? face[f] / d : 0.0f;
    valid[f] = d > 0.0f;
}

// ------------------------------------------------------------------------------ boundaries

// Faces of component `axis` (0 = x) between a SOLID cell and any cell take the solid's
// velocity; faces on the domain walls take 0.
extern "C" __global__ void enforce_boundaries(float* __restrict__ face, const float* __restrict__ solid_face,
                                              const unsigned char* __restrict__ solid, int nx, int ny, int nz, int axis)
{
    const int sx = nx + (axis == 0), sy = ny + (axis == 1), sz = nz + (axis == 2);
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= (long long)sx * sy * sz) return;
    bool lo_in, hi_in;
    long long lo, hi;
    face_cells(axis, (int)(f % sx), (int)((f / sx) % sy), (int)(f / ((long long)sx * sy)), nx, ny, nz, lo_in, hi_in,
               lo, hi);
    if (!lo_in || !hi_in) {
        face[f] = 0.0f;
        return;
    }
    if (solid[lo] || solid[hi]) face[f] = solid_face[f];
}

// One ring of extrapolation on a (sz, sy, sx) face array: an invalid face with valid
// 6-neighbours takes their mean (summed −x, +x, −y, +y, −z, +z) and becomes valid.
extern "C" __global__ void extrapolate_faces(const float* __restrict__ src, const unsigned char* __restrict__ vsrc,
                                             float* __restrict__ dst, unsigned char* __restrict__ vdst, int sx, int sy,
                                             int sz)
{
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long row = sx, slab = (long long)sx * sy;
    if (f >= slab * sz) return;
    if (vsrc[f]) {
        dst[f] = src[f];
        vdst[f] = 1;
        return;
    }
    const int i = (int)(f % sx), j = (int)((f / sx) % sy), k = (int)(f / slab);
    float sum = 0.0f;
    int count = 0;
    if (i > 0 && vsrc[f - 1]) { sum += src[f - 1]; ++count; }
    if (i < sx - 1 && vsrc[f + 1]) { sum += src[f + 1]; ++count; }
    if (j > 0 && vsrc[f - row]) { sum += src[f - row]; ++count; }
    if (j < sy - 1 && vsrc[f + row]) { sum += src[f + row]; ++count; }
    if (k > 0 && vsrc[f - slab]) { sum += src[f - slab]; ++count; }
    if (k < sz - 1 && vsrc[f + slab]) { sum += src[f + slab]; ++count; }
    dst[f] = count ? sum / (float)count : src[f];
    vdst[f] = count > 0;
}

// ------------------------------------------------------------------------------ grid -> particles, advection

// transfer.py push_out: clamp into the domain shrunk by PUSH_EPSILON cells; from a SOLID cell
// move to the nearest point, PUSH_EPSILON inside, of a free 26-neighbour (ties: first in z-y-x
// order); no free neighbour or a non-finite position: back to `fallback` (voxfx_push.cuh
// push_out_point, with the dense grid's look-ups).
__device__ void push_out(float x[3], const float fallback[3], const unsigned char* __restrict__ solid, int nx, int ny,
                         int nz, const float o[3], float h, float inv_h)
{
    const int n[3] = {nx, ny, nz};
    push_out_point<int>(x, fallback, true, n, o, h, inv_h, [&](const int* c) {
        return solid[((long long)c[2] * ny + c[1]) * nx + c[0]] != 0;
    }, [&](const float* gc, const int* cell, float* target) {
        return nearest_free_point(gc, cell, [&](const int* nb) {
            return nb[0] >= 0 && nb[0] < nx && nb[1] >= 0 && nb[1] < ny && nb[2] >= 0 && nb[2] < nz &&
                   !solid[((long long)nb[2] * ny + nb[1]) * nx + nb[0]];
        }, target);
    });
}

// G2P and advection fused, one thread per particle (either part can be switched off):
//   G2P (seed 003 Alg. 1): v ← flip·(v + (u − u_old)(x)) + pic·u(x); APIC: C_a ← ∇u_a(x).
//   Advection: RK2 midpoint x_mid = x + ½Δt·u(x), x' = x + Δt·u(x_mid), then push_out.
extern "C" __global__ void g2p_advect(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ c,
                                      long long n, int do_g2p, int apic, int do_advect, const float* __restrict__ u,
                                      const float* __restrict__ v, const float* __restrict__ w,
                                      const float* __restrict__ old_u, const float* __restrict__ old_v,
                                      const float* __restrict__ old_w, const unsigned char* __restrict__ solid, int nx,
                                      int ny, int nz, float ox, float oy, float oz, float h, float inv_h, float flip,
                                      float pic, float dt, float half_dt, int centred, const float* __restrict__ b_u,
                                      const float* __restrict__ b_v, const float* __restrict__ b_w)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const float o[3] = {ox, oy, oz};
    const float x0[3] = {pos[3 * p], pos[3 * p + 1], pos[3 * p + 2]};
    const float g[3] = {(x0[0] - ox) * inv_h, (x0[1] - oy) * inv_h, (x0[2] - oz) * inv_h};
    if (do_g2p) {
        float un[3], uo[3], grad[9];
        sample_faces(u, v, w, nx, ny, nz, g[0], g[1], g[2], un, apic ? grad : nullptr);
        sample_faces(old_u, old_v, old_w, nx, ny, nz, g[0], g[1], g[2], uo);
        g2p_velocity(vel, c, p, apic, un, uo, grad, flip, pic, inv_h);  // seed 003 Alg. 1
    }
    if (do_advect) {
        // centred (transfer.grid_to_particles_and_advect's *before* b = u_n): RK2 in time
        // too, x_m = x + ½Δt·u_n(x), x' = x + Δt·½(u_n + u_{n+1})(x_m)
        float v1[3], v2[3], xm[3], gm[3], x1[3];
        if (centred)
            sample_faces(b_u, b_v, b_w, nx, ny, nz, g[0], g[1], g[2], v1);
        else
            sample_faces(u, v, w, nx, ny, nz, g[0], g[1], g[2], v1);
        for (int a = 0; a < 3; ++a) {
            xm[a] = x0[a] + half_dt * v1[a];
            gm[a] = (xm[a] - o[a]) * inv_h;
        }
        sample_faces(u, v, w, nx, ny, nz, gm[0], gm[1], gm[2], v2);
        if (centred) {
            float b2[3];
            sample_faces(b_u, b_v, b_w, nx, ny, nz, gm[0], gm[1], gm[2], b2);
            for (int a = 0; a < 3; ++a) v2[a] = 0.5f * (v2[a] + b2[a]);
        }
        for (int a = 0; a < 3; ++a) x1[a] = x0[a] + dt * v2[a];
        push_out(x1, x0, solid, nx, ny, nz, o, h, inv_h);
        for (int a = 0; a < 3; ++a) pos[3 * p + a] = x1[a];
    }
}

// ------------------------------------------------------------------------------ CFL

// max |v|² over the particles into *bits (a float's bits; non-negative floats order like
// their bits, so an integer atomicMax is exact and order independent). Zero *bits first.
// Launch with blockDim a multiple of 32.
extern "C" __global__ void max_speed_squared(const float* __restrict__ vel, long long n, unsigned int* __restrict__ bits)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    if (p < n) {
        float x = vel[3 * p], y = vel[3 * p + 1], z = vel[3 * p + 2];
        s = x * x + y * y + z * z;
    }
    const unsigned int b = warp_max(__float_as_uint(s));
    if ((threadIdx.x & 31) == 0 && b) atomicMax(bits, b);
}

// max_speed_squared (the same |v|² and the same maximum, bit for bit) with each block striding
// over the particles (launch SPEED_ITEMS·blockDim particles a block) and taking its maximum
// first: one atomicMax a block, none where *bits already holds as much, instead of one a warp
// (8M particles: 250,000 atomics on one address; kernels/flip/transfer.py max_speed,
// VOXFX_MAX_SPEED; NVIDIA H100 80GB HBM3, 8M: 62.6 against 230.8 µs). Launch with blockDim a
// multiple of 32, at most 1024. Zero *bits first.
extern "C" __global__ void max_speed_squared_blocks(const float* __restrict__ vel, long long n,
                                                    unsigned int* __restrict__ bits)
{
    __shared__ unsigned int warp_best[32];
    unsigned int best = 0u;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += stride) {
        const float x = vel[3 * p], y = vel[3 * p + 1], z = vel[3 * p + 2];
        best = max(best, __float_as_uint(x * x + y * y + z * z));
    }
    best = warp_max(best);
    if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
    __syncthreads();
    if (threadIdx.x < 32) {
        best = threadIdx.x < (blockDim.x >> 5) ? warp_best[threadIdx.x] : 0u;
        best = warp_max(best);
        if (threadIdx.x == 0 && best > *(volatile unsigned int*)bits) atomicMax(bits, best);
    }
}

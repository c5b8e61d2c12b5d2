// The narrow band's per-substep work in kernels (kernels/flip/sparse_band_gpu.py launches
// them; kernels/flip/sparse_band.py's array code is the reference, mirrored term by term and
// compiled with --fmad=false, so each float operation rounds as NumPy's does): Ferstl et al.
// 2016 §4 (the deep faces' carried velocity) and §4.2 (the level set's semi-Lagrangian trace,
// the depths).
//
// Look-ups are O(1): the FLIP grid's faces through its brick index (closed domains; else a
// binary search over the brick keys) and neighbour table, the band's level set and liquid
// cells through a dense map over the update's frame box (sparse_band_frame._Frame: its key is the
// map's flat index, x fastest), instead of sorts and searchsorted over cell keys.
//
// No obstacles here: a cell is solid where it lies outside a closed box (the walls); with
// obstacle cells or bodies the caller takes the array path (sparse_band_gpu.py).

#include "voxfx_lattice.cuh"  // trilinear_blend: sample.blend's operation order
#include "voxfx_sparse.cuh"  // keys, slots, local cells, neighbour steps
#include "voxfx_sparse_index.cuh"  // the closed domain's brick index
#include "voxfx_sparse_walk.cuh"  // walk_axis, walk_corners: SparseMacGrid.sample's walk

#define BAND_FAR 2.0f  // sparse_band.FAR: φ of a cell the level set does not store

// The FLIP grid for point look-ups: bricks, brick index, neighbour table, the closed box.
#define BAND_GRID_ARGS                                                                                    \
    const long long *__restrict__ keys, const int *__restrict__ slots, long long n_keys,                 \
        const int *__restrict__ nbr27, BRICK_INDEX_ARGS, int closed, int nx, int ny, int nz

#define BAND_GRID_PASS keys, slots, n_keys, nbr27, index, index_lx, index_ly, index_lz, index_dx, index_dy, \
    index_dz, closed, nx, ny, nz

// grid.locate: flat pool index of lattice cell (i, j, k), −1 where its brick is inactive.
__device__ __forceinline__ int band_locate(BAND_GRID_ARGS, long long i, long long j, long long k)
{
    const int s = INDEXED_SLOT(i >> 3, j >> 3, k >> 3);
    return s < 0 ? -1 : s * SPARSE_CELLS + sparse_local(i, j, k);
}

// SparseMacGrid.sample of face channel f (component a) at cell-unit point g: the lattice of
// the closed box's face lattice (clamped) or the unbounded one, corners walked from the
// lower one by +x, +y, +z steps (a missing cell on the way stays missing), blended.
__device__ float band_sample_face(BAND_GRID_ARGS, const float* __restrict__ f, int a, const float g[3])
{
    const int s[3] = {nx + (a == 0), ny + (a == 1), nz + (a == 2)};
    long long i0[3];
    bool same[3];
    float t[3];
    for (int b = 0; b < 3; ++b) walk_axis(b == a ? g[b] : g[b] - 0.5f, closed, s[b], i0[b], same[b], t[b]);
    int idx[8];
    idx[0] = band_locate(BAND_GRID_PASS, i0[0], i0[1], i0[2]);
    walk_corners(nbr27, same, idx);
    float p[8];
    for (int q = 0; q < 8; ++q) p[q] = idx[q] >= 0 ? f[idx[q]] : 0.0f;
    return trilinear_blend(p, t[0], t[1], t[2]);
}

// The update's frame box (sparse_band_frame._Frame): low corner and span; key = flat map index.
#define BAND_BOX_ARGS long long lo_x, long long lo_y, long long lo_z, long long span_x, long long span_y, \
    long long span_z

// A lattice cell is solid (walls only: module notes): outside a closed box.
__device__ __forceinline__ bool band_solid(int closed, int nx, int ny, int nz, long long i, long long j, long long k)
{
    return closed && !(i >= 0 && i < nx && j >= 0 && j < ny && k >= 0 && k < nz);
}

// NarrowBand.sample at the cell-unit point x: trilinear over the map of stored φ (FAR where
// none, and outside the box), solid corners left out and the weights renormalised.
__device__ float band_sample_phi(const float* __restrict__ phi_map, BAND_BOX_ARGS, int closed, int nx, int ny,
                                 int nz, const float x[3])
{
    float frac[3];
    long long base[3];
    for (int a = 0; a < 3; ++a) {
        const float t = x[a] - 0.5f;
        const float b = floorf(t);
        frac[a] = t - b;
        base[a] = (long long)b;
    }
    float total = 0.0f, weights = 0.0f;
    for (int o = 0; o < 8; ++o) {  // sparse_band.CORNERS: x fastest
        const long long c[3] = {base[0] + (o & 1), base[1] + ((o >> 1) & 1), base[2] + ((o >> 2) & 1)};
        const long long r[3] = {c[0] - lo_x, c[1] - lo_y, c[2] - lo_z};
        const bool inside = r[0] >= 0 && r[0] < span_x && r[1] >= 0 && r[1] < span_y && r[2] >= 0 && r[2] < span_z;
        const float value = inside ? phi_map[(r[2] * span_y + r[1]) * span_x + r[0]] : BAND_FAR;
        float w = 1.0f;
        for (int a = 0; a < 3; ++a) w = w * (((o >> a) & 1) ? frac[a] : 1.0f - frac[a]);
        if (band_solid(closed, nx, ny, nz, c[0], c[1], c[2])) w = 0.0f;
        total += w * value;
        weights += w;
    }
    return weights > 0.0f ? total / fmaxf(weights, 1e-12f) : BAND_FAR;
}

// Fill the map: φ of each stored cell (int64 (m, 3) lattice) at its key; the rest is FAR
// (the caller's fill).
extern "C" __global__ void band_scatter_phi(const long long* __restrict__ cells, const float* __restrict__ phi,
                                            long long m, BAND_BOX_ARGS, float* __restrict__ phi_map)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= m) return;
    const long long r[3] = {cells[3 * t] - lo_x, cells[3 * t + 1] - lo_y, cells[3 * t + 2] - lo_z};
    if (r[0] < 0 || r[0] >= span_x || r[1] < 0 || r[1] >= span_y || r[2] < 0 || r[2] >= span_z) return;
    phi_map[(r[2] * span_y + r[1]) * span_x + r[0]] = phi[t];
}

// §4.2's trace of each candidate cell (int64 (m, 3)): x = its centre, u(x) the grid velocity,
// advected[t] = φ(x − Δt·u(x)) over the map of last substep's φ.
extern "C" __global__ void band_trace(const long long* __restrict__ cells, long long m,
                                      const float* __restrict__ u, const float* __restrict__ v,
                                      const float* __restrict__ w, BAND_GRID_ARGS, float dt_h,
                                      const float* __restrict__ phi_map, BAND_BOX_ARGS,
                                      float* __restrict__ advected)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= m) return;
    float x[3];
    for (int a = 0; a < 3; ++a) x[a] = (float)cells[3 * t + a] + 0.5f;
    const float* const f[3] = {u, v, w};
    float back[3];
    for (int a = 0; a < 3; ++a) back[a] = x[a] - band_sample_face(BAND_GRID_PASS, f[a], a, x) * dt_h;
    advected[t] = band_sample_phi(phi_map, lo_x, lo_y, lo_z, span_x, span_y, span_z, closed, nx, ny, nz, back);
}

// NarrowBand.sample at points (float32 (m, 3), cell units) over the map.
extern "C" __global__ void band_sample_points(const float* __restrict__ x, long long m,
                                              const float* __restrict__ phi_map, BAND_BOX_ARGS, int closed, int nx,
                                              int ny, int nz, float* __restrict__ out)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= m) return;
    const float p[3] = {x[3 * t], x[3 * t + 1], x[3 * t + 2]};
    out[t] = band_sample_phi(phi_map, lo_x, lo_y, lo_z, span_x, span_y, span_z, closed, nx, ny, nz, p);
}

// One erosion of NarrowBand._depths, k = 1 … N: a liquid cell (key keys[t] in the map) of
// depth k − 1 whose 6 neighbours are all liquid of depth ≥ k − 1 (or solid) gets depth k.
// depth_map: −1 where not liquid. Cells only rise from k − 1 to k in a pass, so a concurrent
// rise leaves every neighbour test as it was.
extern "C" __global__ void band_erode(const long long* __restrict__ keys, long long m, int k,
                                      signed char* __restrict__ depth_map, BAND_BOX_ARGS, int closed, int nx,
                                      int ny, int nz, long long* __restrict__ depth)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= m) return;
    const long long key = keys[t];
    if (depth_map[key] != k - 1) return;
    const long long sx = span_x, sxy = span_x * span_y;
    const long long r[3] = {key % sx, (key / sx) % span_y, key / sxy};
    const long long step[3] = {1, sx, sxy};
    for (int d = 0; d < 6; ++d) {  // sparse_mac.DIRECTIONS: −x, +x, −y, +y, −z, +z
        const int a = d >> 1, s = (d & 1) ? 1 : -1;
        const bool in_box = r[a] + s >= 0 && r[a] + s < (a == 0 ? span_x : a == 1 ? span_y : span_z);
        if (in_box && depth_map[key + s * step[a]] >= k - 1) continue;  // the frame's pad keeps it inside
        if (!band_solid(closed, nx, ny, nz, lo_x + r[0] + (a == 0 ? s : 0), lo_y + r[1] + (a == 1 ? s : 0),
                        lo_z + r[2] + (a == 2 ? s : 0)))
            return;
    }
    depth_map[key] = (signed char)k;
    depth[t] = k;
}

// NarrowBand.carry, one thread per (deep cell, side, component): the low (side 0) or high
// (side 1) face of each deep cell that exists in the grid and that no particle reached
// (valid = 0) takes the carried velocity advected along itself, u(x − Δt·u(x)) (§4), and is
// marked valid in valid_out (a copy of valid, so every thread reads the masks of P2G).
extern "C" __global__ void band_carry(const long long* __restrict__ deep, long long d_count,
                                      const float* __restrict__ cu, const float* __restrict__ cv,
                                      const float* __restrict__ cw, BAND_GRID_ARGS, float dt_h,
                                      const unsigned char* __restrict__ valid_u,
                                      const unsigned char* __restrict__ valid_v,
                                      const unsigned char* __restrict__ valid_w, float* __restrict__ u,
                                      float* __restrict__ v, float* __restrict__ w,
                                      unsigned char* __restrict__ out_u, unsigned char* __restrict__ out_v,
                                      unsigned char* __restrict__ out_w)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= 6 * d_count) return;
    const int comp = (int)(t / (2 * d_count));
    const long long r = t - comp * 2 * d_count;
    const int side = r >= d_count;
    const long long c = side ? r - d_count : r;
    long long ijk[3] = {deep[3 * c], deep[3 * c + 1], deep[3 * c + 2]};
    ijk[comp] += side;
    const int at = band_locate(BAND_GRID_PASS, ijk[0], ijk[1], ijk[2]);
    const unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    if (at < 0 || valid[comp][at] != 0) return;
    float x[3];
    for (int a = 0; a < 3; ++a) x[a] = (float)ijk[a] + (a == comp ? 0.0f : 0.5f);
    const float* const f[3] = {cu, cv, cw};
    float back[3];
    for (int a = 0; a < 3; ++a) back[a] = x[a] - band_sample_face(BAND_GRID_PASS, f[a], a, x) * dt_h;
    const float value = band_sample_face(BAND_GRID_PASS, f[comp], comp, back);
    float* const faces[3] = {u, v, w};
    unsigned char* const out[3] = {out_u, out_v, out_w};
    faces[comp][at] = value;
    out[comp][at] = 1;
}

// The deep cells classify as FLUID (not over a SOLID cell), after band_carry.
extern "C" __global__ void band_deep_fluid(const long long* __restrict__ deep, long long d_count, BAND_GRID_ARGS,
                                           unsigned char solid_type, unsigned char fluid_type,
                                           unsigned char* __restrict__ cell)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= d_count) return;
    const int at = band_locate(BAND_GRID_PASS, deep[3 * t], deep[3 * t + 1], deep[3 * t + 2]);
    if (at >= 0 && cell[at] != solid_type) cell[at] = fluid_type;
}

// The grid velocity at points (float32 (m, 3), cell units): SparseMacGrid.sample_faces.
extern "C" __global__ void band_sample_faces(const float* __restrict__ x, long long m, const float* __restrict__ u,
                                             const float* __restrict__ v, const float* __restrict__ w,
                                             BAND_GRID_ARGS, float* __restrict__ out)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= m) return;
    const float p[3] = {x[3 * t], x[3 * t + 1], x[3 * t + 2]};
    const float* const f[3] = {u, v, w};
    for (int a = 0; a < 3; ++a) out[3 * t + a] = band_sample_face(BAND_GRID_PASS, f[a], a, p);
}

// ---------------------------------------------------------------- the update on the frame box's maps
// flags: one byte a frame cell, these bits.
#define BAND_CAND 1  // a candidate: stored last substep, a particle's cell, or within the dilation
#define BAND_TAKEN 2  // a particle's cell
#define BAND_WAS_DEEP 4  // deep before this update

__device__ __forceinline__ bool band_in_box(const long long r[3], BAND_BOX_ARGS)
{
    return r[0] >= 0 && r[0] < span_x && r[1] >= 0 && r[1] < span_y && r[2] >= 0 && r[2] < span_z;
}

// flags |= bit at each of the cells (int64 (m, 3) lattice rows) inside the box.
extern "C" __global__ void band_mark_rows(const long long* __restrict__ cells, long long m, BAND_BOX_ARGS,
                                          unsigned char bit, unsigned char* __restrict__ flags)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= m) return;
    const long long r[3] = {cells[3 * t] - lo_x, cells[3 * t + 1] - lo_y, cells[3 * t + 2] - lo_z};
    if (!band_in_box(r, lo_x, lo_y, lo_z, span_x, span_y, span_z)) return;
    const long long key = (r[2] * span_y + r[1]) * span_x + r[0];
    flags[key] |= bit;  // threads of one launch write one bit: the same byte value
}

// Each particle's frame key (sparse_band_frame._particle_keys: ⌊(p − origin)/h⌋ in float32, then the
// box's key), its cell a candidate and taken; −1 (and no mark) outside the box.
extern "C" __global__ void band_mark_particles(const float* __restrict__ pos, long long n, float ox, float oy,
                                               float oz, float h, BAND_BOX_ARGS, unsigned char* __restrict__ flags,
                                               long long* __restrict__ pkeys)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= n) return;
    const float o[3] = {ox, oy, oz};
    const long long lo[3] = {lo_x, lo_y, lo_z};
    long long r[3];
    for (int a = 0; a < 3; ++a) r[a] = (long long)floorf((pos[3 * t + a] - o[a]) / h) - lo[a];
    if (!band_in_box(r, lo_x, lo_y, lo_z, span_x, span_y, span_z)) {
        pkeys[t] = -1;
        return;
    }
    const long long key = (r[2] * span_y + r[1]) * span_x + r[0];
    pkeys[t] = key;
    flags[key] |= BAND_CAND | BAND_TAKEN;
}

// One axis of the candidates' dilation (NarrowBand.update's 27-neighbourhood, `radius` times):
// out = in, plus CAND where a cell within `radius` along `axis` is a candidate in `in`.
extern "C" __global__ void band_dilate(const unsigned char* __restrict__ in, long long size, int axis, int radius,
                                       BAND_BOX_ARGS, unsigned char* __restrict__ out)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= size) return;
    const long long span[3] = {span_x, span_y, span_z};
    const long long stride = axis == 0 ? 1 : axis == 1 ? span_x : span_x * span_y;
    const long long c = (t / stride) % span[axis];
    unsigned char f = in[t];
    for (int s = -radius; s <= radius && !(f & BAND_CAND); ++s)
        if (c + s >= 0 && c + s < span[axis] && (in[t + s * stride] & BAND_CAND)) f |= BAND_CAND;
    out[t] = f;
}

// NarrowBand._store's air rings, one pass a ring over the box: a cell neither liquid
// (depth_map ≥ 0) nor solid nor of an earlier ring, with a 6-neighbour that is liquid or of
// the ring before (ring_map == ring − 1; liquid for ring 1), joins ring `ring`.
extern "C" __global__ void band_rings(const signed char* __restrict__ depth_map, long long size, int ring,
                                      BAND_BOX_ARGS, int closed, int nx, int ny, int nz,
                                      unsigned char* __restrict__ ring_map)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= size || depth_map[t] >= 0 || ring_map[t] != 0) return;
    const long long sxy = span_x * span_y;
    const long long r[3] = {t % span_x, (t / span_x) % span_y, t / sxy};
    if (band_solid(closed, nx, ny, nz, lo_x + r[0], lo_y + r[1], lo_z + r[2])) return;
    const long long span[3] = {span_x, span_y, span_z}, step[3] = {1, span_x, sxy};
    for (int d = 0; d < 6; ++d) {
        const int a = d >> 1, s = (d & 1) ? 1 : -1;
        if (r[a] + s < 0 || r[a] + s >= span[a]) continue;
        const long long nb = t + s * step[a];
        if (ring == 1 ? depth_map[nb] >= 0 : (depth_map[nb] >= 0 || ring_map[nb] == ring - 1)) {
            ring_map[t] = (unsigned char)ring;
            return;
        }
    }
}

// After the depths: a particle in a deep cell (depth ≥ cells) is not kept; a kept one in a band
// cell under the surface layer (1 ≤ depth < cells) counts towards its cell's particles.
extern "C" __global__ void band_particles(const long long* __restrict__ pkeys, long long n,
                                          const signed char* __restrict__ depth_map, int cells,
                                          unsigned char* __restrict__ keep, int* __restrict__ count)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= n) return;
    const long long key = pkeys[t];
    const int depth = key >= 0 ? depth_map[key] : -1;
    keep[t] = depth < cells;
    if (depth >= 1 && depth < cells) atomicAdd(count + key, 1);
}

// ---------------------------------------------------------------- bounds and the deep cells' bricks
// (VOXFX_SPARSE_BAND_REDUCE=kernels: sparse_band_gpu.py's module notes)
#define BAND_BOUNDS_THREADS 256
#define BAND_LL_MAX 0x7fffffffffffffffLL  // (no <climits> under NVRTC)
#define BAND_LL_MIN (-BAND_LL_MAX - 1)

// The low and high corner (out[0..2] min, out[3..5] max, atomics; the caller fills them with
// the int64 extremes) of int64 (m, 3) rows, or, with pos (rows null), of the particles'
// cells ⌊(p − origin)/h⌋ (use_rows 0; float32, as sparse_band_frame._particle_cell_bounds: the cell map is
// monotonic, so the min of the cells is the cell of the min). Grid-stride, a block's
// extremes reduced in shared memory before its atomics. 256 threads a block.
extern "C" __global__ void band_bounds(const long long* __restrict__ rows, const float* __restrict__ pos, long long m,
                                       int use_rows, float ox, float oy, float oz, float h,
                                       long long* __restrict__ out)
{
    __shared__ long long lo_s[3][BAND_BOUNDS_THREADS], hi_s[3][BAND_BOUNDS_THREADS];
    const float o[3] = {ox, oy, oz};
    long long lo[3] = {BAND_LL_MAX, BAND_LL_MAX, BAND_LL_MAX}, hi[3] = {BAND_LL_MIN, BAND_LL_MIN, BAND_LL_MIN};
    for (long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x; t < m;
         t += blockDim.x * (long long)gridDim.x)
        for (int a = 0; a < 3; ++a) {
            const long long c = use_rows ? rows[3 * t + a] : (long long)floorf((pos[3 * t + a] - o[a]) / h);
            lo[a] = min(lo[a], c);
            hi[a] = max(hi[a], c);
        }
    for (int a = 0; a < 3; ++a) {
        lo_s[a][threadIdx.x] = lo[a];
        hi_s[a][threadIdx.x] = hi[a];
    }
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            for (int a = 0; a < 3; ++a) {
                lo_s[a][threadIdx.x] = min(lo_s[a][threadIdx.x], lo_s[a][threadIdx.x + s]);
                hi_s[a][threadIdx.x] = max(hi_s[a][threadIdx.x], hi_s[a][threadIdx.x + s]);
            }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int a = 0; a < 3; ++a) {
            atomicMin(out + a, lo_s[a][0]);
            atomicMax(out + 3 + a, hi_s[a][0]);
        }
}

// The bricks the deep cells' boxes reach (SparseFlipGrid.topology_keys' extra cells: closed,
// the cell clamped into the box, its box cell ± margin clipped to the box and its wall ring),
// marked on a dense map over a box of bricks (low brick blo, span bspan; x fastest, so its
// order is the brick keys'). Boxes of at most 17 bricks an axis (margin ≤ 64).
extern "C" __global__ void band_deep_bricks(const long long* __restrict__ deep, long long d_count, int margin,
                                            int closed, int nx, int ny, int nz, long long blo_x, long long blo_y,
                                            long long blo_z, long long bspan_x, long long bspan_y,
                                            long long bspan_z, unsigned char* __restrict__ map)
{
    const long long t = blockDim.x * (long long)blockIdx.x + threadIdx.x;
    if (t >= d_count) return;
    const long long n[3] = {nx, ny, nz}, blo[3] = {blo_x, blo_y, blo_z}, bspan[3] = {bspan_x, bspan_y, bspan_z};
    long long b0[3], b1[3];
    for (int a = 0; a < 3; ++a) {
        long long c = deep[3 * t + a];
        if (closed) c = min(max(c, 0LL), n[a] - 1);
        long long lo = c - margin, hi = c + margin;
        if (closed) {
            lo = max(lo, -1LL);
            hi = min(hi, n[a]);
        }
        b0[a] = (lo >> 3) - blo[a];
        b1[a] = (hi >> 3) - blo[a];
        if (b0[a] < 0 || b1[a] >= bspan[a]) return;  // outside the map: the caller's box holds every box
    }
    for (long long z = b0[2]; z <= b1[2]; ++z)
        for (long long y = b0[1]; y <= b1[1]; ++y)
            for (long long x = b0[0]; x <= b1[0]; ++x) map[(z * bspan_y + y) * bspan_x + x] = 1;
}

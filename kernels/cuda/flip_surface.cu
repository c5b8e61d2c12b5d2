// The liquid surface from FLIP particles (kernels/flip/surface.py): the Zhu–Bridson particle
// level set on the voxel centres of a GridSpec, and its light smoothing.
//
// Particles are binned into cells of edge max(R/2, voxel), packed in cell order as float4
// (x, y, z, r), and every node gathers over the cells its R-sphere touches: one thread per
// node, no atomics. Three ways to get there (surface_gpu.LEVEL_SET_MODES):
//   "lean" (default; flip_surface_lean.cu): "bricks" below with the particle's own point
//     counted and placed by warp groups (surface_count_lean / surface_place_lean), 32-bit
//     tags, and the gather branch-free with a three-operation quotient
//     (particle_level_set_lean, node_phi_lean);
//   "bricks": the walls' mirror images made on the fly (surface_count /
//     surface_place), a counting sort by cell whose cells are then put in the order of a
//     stable sort (surface_order_cells), the nodes gathered tile by tile (TILE_X × TILE_Y ×
//     TILE_Z nodes a block) and only in the tiles some particle's R-sphere may reach
//     (mark_level_set_bricks; the rest is +band, "outside, far", by construction), the
//     smoothing only over those tiles and their neighbours, the box cut fused into its
//     last step (smooth_level_set_bricks);
//   "legacy": bin_particles → argsort → searchsorted → pack_particles, the gather over every
//     node (particle_level_set), images and cut as CuPy array code.
// All put the same particles in the same order in every cell and sum a node alike (node_phi,
// node_phi_lean): their phi is the same to the bit.
// Compiled with --fmad=false: node positions and particle offsets round as NumPy's, so a
// node sums exactly the particles the CPU reference sums.

#include "voxfx_surface.cuh"  // cell_of, cell_key, gap_to_cell, the walls' images, order_point, tile_node

// ---------------------------------------------------------------- binning

// key = linear cell index (x fastest), or n_cells for a particle outside every cell: it can
// reach no node and sorts to the end.
extern "C" __global__ void bin_particles(const float* __restrict__ pos, long long n, float cox, float coy,
                                         float coz, float inv_edge, int cx, int cy, int cz,
                                         int* __restrict__ keys)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    int i = cell_of(pos[3 * p + 0], cox, inv_edge, cx);
    int j = cell_of(pos[3 * p + 1], coy, inv_edge, cy);
    int k = cell_of(pos[3 * p + 2], coz, inv_edge, cz);
    keys[p] = (i < 0 || j < 0 || k < 0) ? cx * cy * cz : (k * cy + j) * cx + i;
}

// packed[s] = (x, y, z, r) of particle order[s]; radius_stride 0 = one radius for all.
extern "C" __global__ void pack_particles(const float* __restrict__ pos, const float* __restrict__ radii,
                                          int radius_stride, const long long* __restrict__ order, long long n,
                                          float4* __restrict__ packed)
{
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    long long p = order[s];
    packed[s] = make_float4(pos[3 * p + 0], pos[3 * p + 1], pos[3 * p + 2], radii[p * radius_stride]);
}

// ---------------------------------------------------------------- level set

// phi = |x − x̄| − r̄ with x̄, r̄ the k(s) = (1 − s²)³ weighted means of the particles within R
// (Zhu & Bridson 2005, §4); summed as offsets x_p − x so far-from-origin worlds keep their
// precision. No particle within R: +band. Clamped to ±band.
__device__ __forceinline__ float node_phi(const float4* __restrict__ packed, const int* __restrict__ starts,
                                          float x, float y, float z, float cox, float coy, float coz,
                                          float inv_edge, int cx, int cy, int cz, float R, float band)
{
    float R2 = R * R;
    NodeSums m = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for_reached_rows(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, [&](int row, int ilo, int ihi) {
        if (ilo > ihi) return;
        // Cells ilo..ihi of one row are contiguous in the sorted order.
        int first = starts[row + ilo], last = starts[row + ihi + 1];
        for (int s = first; s < last; ++s) {
            float4 q = packed[s];
            float dx = q.x - x, dy = q.y - y, dz = q.z - z;
            float d2 = (dx * dx + dy * dy) + dz * dz;
            if (d2 < R2) {
                float t = 1.0f - d2 / R2;
                add_terms(m, (t * t) * t, dx, dy, dz, q.w);  // fused or not: voxfx_surface.cuh
            }
        }
    });
    return phi_of_sums(m.W, m.sx, m.sy, m.sz, m.sr, band);
}

// Legacy: one thread per node of the whole grid.
extern "C" __global__ void particle_level_set(const float4* __restrict__ packed, const int* __restrict__ starts,
                                              const unsigned char* __restrict__ interior, int skip,
                                              int nx, int ny, int nz, float ox, float oy, float oz, float h,
                                              float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                              int cz, float R, float band, float* __restrict__ phi)
{
    long long node = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= (long long)nx * ny * nz) return;
    int i = (int)(node % nx);
    int j = (int)((node / nx) % ny);
    int k = (int)(node / ((long long)nx * ny));
    float x = ((float)i + 0.5f) * h + ox;  // as surface._node_coordinate
    float y = ((float)j + 0.5f) * h + oy;
    float z = ((float)k + 0.5f) * h + oz;
    if (interior_at(interior, skip, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz)) {
        phi[node] = -band;  // deep inside: no gather (the interior skip)
        return;
    }
    phi[node] = node_phi(packed, starts, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, band);
}

// ---------------------------------------------------------------- smoothing

// One explicit step of mean-curvature flow, phi + step·κ|∇phi| with
// κ|∇phi| = Δphi − ∇phiᵀ(∇²phi)∇phi / |∇phi|², central differences in voxel units, the edge
// value repeated outside the grid; nodes with |∇phi|² ≤ flat are left as they are. The
// same operations in the same order as surface._smooth_cpu.
__device__ __forceinline__ float smoothed(const float* __restrict__ phi, int i, int j, int k, int nx, int ny,
                                          int nz, float step, float flat, float band)
{
    int im = max(i - 1, 0), ip = min(i + 1, nx - 1);
    int jm = max(j - 1, 0), jp = min(j + 1, ny - 1);
    int km = max(k - 1, 0), kp = min(k + 1, nz - 1);
#define AT(kk, jj, ii) phi[((long long)(kk) * ny + (jj)) * nx + (ii)]
    float c = AT(k, j, i);
    float xm = AT(k, j, im), xp = AT(k, j, ip);
    float ym = AT(k, jm, i), yp = AT(k, jp, i);
    float zm = AT(km, j, i), zp = AT(kp, j, i);
    float fx = (xp - xm) * 0.5f, fy = (yp - ym) * 0.5f, fz = (zp - zm) * 0.5f;
    float fxx = (xp + xm) - (c + c), fyy = (yp + ym) - (c + c), fzz = (zp + zm) - (c + c);
    float fxy = ((AT(k, jp, ip) - AT(k, jm, ip)) - (AT(k, jp, im) - AT(k, jm, im))) * 0.25f;
    float fxz = ((AT(kp, j, ip) - AT(km, j, ip)) - (AT(kp, j, im) - AT(km, j, im))) * 0.25f;
    float fyz = ((AT(kp, jp, i) - AT(km, jp, i)) - (AT(kp, jm, i) - AT(km, jm, i))) * 0.25f;
#undef AT
    float g2 = (fx * fx + fy * fy) + fz * fz;
    float num = (((fyy + fzz) * (fx * fx) + (fxx + fzz) * (fy * fy)) + (fxx + fyy) * (fz * fz))
              - 2.0f * (((fx * fy) * fxy + (fx * fz) * fxz) + (fy * fz) * fyz);
    float move = g2 > flat ? num / g2 : 0.0f;
    return fminf(fmaxf(c + step * move, -band), band);
}

extern "C" __global__ void smooth_level_set(const float* __restrict__ phi, int nx, int ny, int nz, float step,
                                            float flat, float band, float* __restrict__ out)
{
    long long node = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= (long long)nx * ny * nz) return;
    int i = (int)(node % nx);
    int j = (int)((node / nx) % ny);
    int k = (int)(node / ((long long)nx * ny));
    out[node] = smoothed(phi, i, j, k, nx, ny, nz, step, flat, band);
}

// ---------------------------------------------------------------- the "bricks" level set

// counts[cell] += the particle and its images in that cell (outside every cell: dropped, no
// node is within R of it); bad[0] += 1 for a particle with a non-finite coordinate (then
// none of it is counted: surface.py refuses the input).
extern "C" __global__ void surface_count(const float* __restrict__ pos, long long n, int walls, float lox,
                                         float loy, float loz, float hix, float hiy, float hiz, float reach,
                                         float cox, float coy, float coz, float inv_edge, int cx, int cy, int cz,
                                         int* __restrict__ counts, int* __restrict__ bad)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    float x = pos[3 * p + 0], y = pos[3 * p + 1], z = pos[3 * p + 2];
    if (!(isfinite(x) && isfinite(y) && isfinite(z))) {
        atomicAdd(bad, 1);
        return;
    }
    int mx = wall_choices(x, lox, hix, reach, walls);
    int my = wall_choices(y, loy, hiy, reach, walls);
    int mz = wall_choices(z, loz, hiz, reach, walls);
    for_each_image(0, (mx | my | mz) ? COMBOS : 1, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, cox, coy, coz,
                   inv_edge, cx, cy, cz, [&](int, int key, float, float, float) { atomicAdd(&counts[key], 1); });
}

// The particle and its images into their cells' slots, starts[cell] + a running count
// (fill, zeroed), as float4 (x, y, z, r) with tag combo·n + p: the position the point has in
// the list [particles, images in mirror_at_walls' order].
extern "C" __global__ void surface_place(const float* __restrict__ pos, const float* __restrict__ radii,
                                         int radius_stride, long long n, int walls, float lox, float loy, float loz,
                                         float hix, float hiy, float hiz, float reach, float cox, float coy,
                                         float coz, float inv_edge, int cx, int cy, int cz,
                                         const int* __restrict__ starts, int* __restrict__ fill,
                                         float4* __restrict__ packed, long long* __restrict__ tags)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    float x = pos[3 * p + 0], y = pos[3 * p + 1], z = pos[3 * p + 2];
    if (!(isfinite(x) && isfinite(y) && isfinite(z))) return;
    float r = radii[p * radius_stride];
    int mx = wall_choices(x, lox, hix, reach, walls);
    int my = wall_choices(y, loy, hiy, reach, walls);
    int mz = wall_choices(z, loz, hiz, reach, walls);
    for_each_image(0, (mx | my | mz) ? COMBOS : 1, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, cox, coy, coz,
                   inv_edge, cx, cy, cz, [&](int combo, int key, float px, float py, float pz) {
                       place_point(key, px, py, pz, r, (long long)combo * n + p, starts, fill, packed, tags);
                   });
}

extern "C" __global__ void surface_order_cells(const float4* __restrict__ packed, const long long* __restrict__ tags,
                                               const int* __restrict__ starts, long long points, float cox,
                                               float coy, float coz, float inv_edge, int cx, int cy, int cz,
                                               int limit, float4* __restrict__ out)
{
    order_point(packed, tags, starts, points, cox, coy, coz, inv_edge, cx, cy, cz, limit, out);
}

// Node tiles ("bricks") of TILE_X × TILE_Y × TILE_Z nodes (-D from surface.TILE), tiles and
// their nodes x fastest; a warp is one row of 32 nodes along x, as in particle_level_set,
// so its threads walk the same rows of cells with the same trip counts. active[b] = 1
// where some cell that a node of tile b could read (node_phi's cell ranges, one more cell
// each side) holds a point.

__device__ __forceinline__ void cell_span(int n0, int n1, float o, float h, float co, float inv_edge, float Rc,
                                          int cn, int* lo, int* hi)
{
    float u0 = ((((float)n0 + 0.5f) * h + o) - co) * inv_edge;
    float u1 = ((((float)n1 + 0.5f) * h + o) - co) * inv_edge;
    *lo = max((int)floorf(u0 - Rc - SLACK) - 1, 0);
    *hi = min((int)floorf(u1 + Rc + SLACK) + 1, cn - 1);
}

extern "C" __global__ void mark_level_set_bricks(const int* __restrict__ starts, int nbx, int nby, int nbz, int nx,
                                                 int ny, int nz, float ox, float oy, float oz, float h, float cox,
                                                 float coy, float coz, float inv_edge, int cx, int cy, int cz,
                                                 float R, unsigned char* __restrict__ active)
{
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= (long long)nbx * nby * nbz) return;
    int bi = (int)(b % nbx), bj = (int)((b / nbx) % nby), bk = (int)(b / ((long long)nbx * nby));
    float Rc = R * inv_edge + SLACK;
    int ilo, ihi, jlo, jhi, klo, khi;
    cell_span(bi * TILE_X, min(bi * TILE_X + TILE_X - 1, nx - 1), ox, h, cox, inv_edge, Rc, cx, &ilo, &ihi);
    cell_span(bj * TILE_Y, min(bj * TILE_Y + TILE_Y - 1, ny - 1), oy, h, coy, inv_edge, Rc, cy, &jlo, &jhi);
    cell_span(bk * TILE_Z, min(bk * TILE_Z + TILE_Z - 1, nz - 1), oz, h, coz, inv_edge, Rc, cz, &klo, &khi);
    unsigned char any = 0;
    if (ilo <= ihi) {
        for (int ck = klo; ck <= khi && !any; ++ck) {
            for (int cj = jlo; cj <= jhi; ++cj) {
                int row = (ck * cy + cj) * cx;
                if (starts[row + ilo] < starts[row + ihi + 1]) {
                    any = 1;
                    break;
                }
            }
        }
    }
    active[b] = any;
}

// One block of TILE_X·TILE_Y·TILE_Z threads per node tile (blockIdx.x = tile): an active
// tile's nodes gather as particle_level_set's, the others are +band.
extern "C" __global__ void particle_level_set_bricks(const float4* __restrict__ packed,
                                                     const int* __restrict__ starts,
                                                     const unsigned char* __restrict__ active,
                                                     const unsigned char* __restrict__ interior, int skip, int nbx,
                                                     int nby, int nx, int ny, int nz, float ox, float oy, float oz,
                                                     float h,
                                                     float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                                     int cz, float R, float band, float* __restrict__ phi)
{
    long long node;
    float x, y, z;
    if (!tile_gather_node(active, nbx, nby, nx, ny, nz, ox, oy, oz, h, band, phi, node, x, y, z)) return;
    if (interior_at(interior, skip, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz)) {
        phi[node] = -band;  // deep inside: no gather (the interior skip)
        return;
    }
    phi[node] = node_phi(packed, starts, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, band);
}

// phi ← max(phi, d_box): the cut by the walls (surface.closed_level_set step 3), d_box the
// signed distance from the node to the box lo..hi clamped to ±band, in surface.box_distance's
// float32 operations and order.
__device__ __forceinline__ float box_distance_at(int i, int j, int k, float ox, float oy, float oz, float h,
                                                 float lox, float loy, float loz, float hix, float hiy, float hiz,
                                                 float band)
{
    float x = ((float)i + 0.5f) * h + ox, y = ((float)j + 0.5f) * h + oy, z = ((float)k + 0.5f) * h + oz;
    float dx = fmaxf(lox - x, x - hix), dy = fmaxf(loy - y, y - hiy), dz = fmaxf(loz - z, z - hiz);
    float mx = fmaxf(dx, 0.0f), my = fmaxf(dy, 0.0f), mz = fmaxf(dz, 0.0f);
    float outside2 = ((0.0f + mx * mx) + my * my) + mz * mz;
    float inside = fmaxf(fmaxf(dx, dy), dz);
    float d = outside2 > 0.0f ? sqrtf(outside2) : fminf(inside, 0.0f);
    return fminf(fmaxf(d, -band), band);
}

extern "C" __global__ void cut_by_box(float* __restrict__ phi, int nx, int ny, int nz, float ox, float oy, float oz,
                                      float h, float lox, float loy, float loz, float hix, float hiy, float hiz,
                                      float band)
{
    long long node = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= (long long)nx * ny * nz) return;
    int i = (int)(node % nx);
    int j = (int)((node / nx) % ny);
    int k = (int)(node / ((long long)nx * ny));
    phi[node] = fmaxf(phi[node], box_distance_at(i, j, k, ox, oy, oz, h, lox, loy, loz, hix, hiy, hiz, band));
}

// near[b] = some tile of the 3 × 3 × 3 around b is active: a smoothing step changes no node
// farther than one node from where phi is not +band, so up to min(TILE_X, TILE_Y, TILE_Z)
// steps leave every other tile at +band.
extern "C" __global__ void dilate_bricks(const unsigned char* __restrict__ active, int nbx, int nby, int nbz,
                                         unsigned char* __restrict__ near)
{
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= (long long)nbx * nby * nbz) return;
    int bi = (int)(b % nbx), bj = (int)((b / nbx) % nby), bk = (int)(b / ((long long)nbx * nby));
    unsigned char any = 0;
    for (int dk = max(bk - 1, 0); dk <= min(bk + 1, nbz - 1); ++dk)
        for (int dj = max(bj - 1, 0); dj <= min(bj + 1, nby - 1); ++dj)
            for (int di = max(bi - 1, 0); di <= min(bi + 1, nbx - 1); ++di)
                any |= active[((long long)dk * nby + dj) * nbx + di];
    near[b] = any;
}

// smooth_level_set over the tiles near the liquid (the others +band, as that step leaves
// them), one block a tile; cut = 1: then the walls' cut as cut_by_box.
extern "C" __global__ void smooth_level_set_bricks(const float* __restrict__ phi,
                                                   const unsigned char* __restrict__ near, int nbx, int nby, int nx,
                                                   int ny, int nz, float step, float flat, float band, int cut,
                                                   float ox, float oy, float oz, float h, float lox, float loy,
                                                   float loz, float hix, float hiy, float hiz,
                                                   float* __restrict__ out)
{
    long long b = blockIdx.x, node;
    int i, j, k;
    if (!tile_node(b, threadIdx.x, nbx, nby, nx, ny, nz, &i, &j, &k, &node)) return;
    if (!near[b]) {
        out[node] = band;  // a cut leaves it: the box distance is at most +band
        return;
    }
    float value = smoothed(phi, i, j, k, nx, ny, nz, step, flat, band);
    if (cut) value = fmaxf(value, box_distance_at(i, j, k, ox, oy, oz, h, lox, loy, loz, hix, hiy, hiz, band));
    out[node] = value;
}

// smooth_level_set_bricks over the tiles first … first + gridDim.x − 1 (surface_overlap: φ smoothed a
// chunk of z layers of tiles at a time, each chunk copied to the host while the next gathers).
extern "C" __global__ void smooth_level_set_bricks_from(const float* __restrict__ phi,
                                                        const unsigned char* __restrict__ near, int nbx, int nby,
                                                        int nx, int ny, int nz, float step, float flat, float band,
                                                        int cut, float ox, float oy, float oz, float h, float lox,
                                                        float loy, float loz, float hix, float hiy, float hiz,
                                                        float* __restrict__ out, long long first)
{
    long long b = first + blockIdx.x, node;
    int i, j, k;
    if (!tile_node(b, threadIdx.x, nbx, nby, nx, ny, nz, &i, &j, &k, &node)) return;
    if (!near[b]) {
        out[node] = band;
        return;
    }
    float value = smoothed(phi, i, j, k, nx, ny, nz, step, flat, band);
    if (cut) value = fmaxf(value, box_distance_at(i, j, k, ox, oy, oz, h, lox, loy, loz, hix, hiy, hiz, band));
    out[node] = value;
}

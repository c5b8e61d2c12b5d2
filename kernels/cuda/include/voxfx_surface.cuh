// The particle level set's device pieces shared by its ways (surface_gpu.LEVEL_SET_MODES):
// flip_surface.cu ("bricks", "legacy") and flip_surface_lean.cu ("lean") — the binning
// cells, the cull's slack, the walls' mirror images, a cell's points in tag order and a node
// tile's nodes. TILE_X, TILE_Y, TILE_Z are the including module's -D constants
// (surface_gpu.TILE).
#pragma once

__device__ __forceinline__ int cell_of(float x, float origin, float inv_edge, int n)
{
    float f = floorf((x - origin) * inv_edge);
    return (f >= 0.0f && f < (float)n) ? (int)f : -1;
}

// Cells are searched in cell units u = (x − origin)/edge, the units bin_particles assigned
// them in, so a particle of cell c has c ≤ u < c + 1 exactly as computed; the sphere of
// radius R (Rc cells) is culled row by row: a (y, z) row of cells is skipped when its
// nearest point is beyond Rc, and only the x-cells under the sphere's slice are read.
// SLACK (cells) keeps float rounding from culling a particle the node test would take.
#define SLACK 1e-3f

__device__ __forceinline__ float gap_to_cell(float u, int c)  // distance from u to [c, c + 1], less SLACK
{
    float g = fmaxf(fmaxf((float)c - u, u - (float)(c + 1)), 0.0f);
    return fmaxf(g - SLACK, 0.0f);
}

// The rows of binning cells the sphere of radius R around the node (x, y, z) reaches, z then y, as
// node_phi, node_phi_lean and gather_work walk them (in cell units u = (x − co)·inv_edge, the radius
// Rc = R·inv_edge + SLACK): for each (y, z) row whose nearest point is within Rc, row(r, ilo, ihi) with r
// the row's first cell and ilo..ihi the x-cells under the sphere's slice (ilo > ihi: none; the caller skips
// or counts them).
template <class Row>
__device__ __forceinline__ void for_reached_rows(float x, float y, float z, float cox, float coy, float coz,
                                                 float inv_edge, int cx, int cy, int cz, float R, Row&& row)
{
    float ux = (x - cox) * inv_edge, uy = (y - coy) * inv_edge, uz = (z - coz) * inv_edge;
    float Rc = R * inv_edge + SLACK;
    int klo = max((int)floorf(uz - Rc), 0), khi = min((int)floorf(uz + Rc), cz - 1);
    int jlo = max((int)floorf(uy - Rc), 0), jhi = min((int)floorf(uy + Rc), cy - 1);
    for (int ck = klo; ck <= khi; ++ck) {
        float gz = gap_to_cell(uz, ck);
        float left_z = Rc * Rc - gz * gz;
        if (left_z <= 0.0f) continue;
        for (int cj = jlo; cj <= jhi; ++cj) {
            float gy = gap_to_cell(uy, cj);
            float left = left_z - gy * gy;
            if (left <= 0.0f) continue;
            float half = sqrtf(left);  // half-width of the sphere's slice over this row, in cells
            int ilo = max((int)floorf(ux - half - SLACK), 0), ihi = min((int)floorf(ux + half + SLACK), cx - 1);
            row((ck * cy + cj) * cx, ilo, ihi);
        }
    }
}

// A particle's terms added to a node's five sums (node_phi, node_phi_lean): W += w, s += w·dx,
// w·dy, w·dz, w·r. LEVEL_SET_SUMS_FUSED (-D, surface_gpu.level_set_sums, VOXFX_LEVEL_SET_SUMS):
// 1 — each product and its add as one fmaf (one rounding, not two; --fmad=false stops only the
// compiler's own contraction, not fmaf), 4 instructions fewer a (node, particle) pair; 0 (plain)
// — the product rounded, then added. Neither touches the offsets, d2 or the test d2 < R2: a
// node sums the same particles in the same order either way, and φ of the two modes differs
// by float32 rounding of the sums (the CPU adds them in float64 in another order anyway).
#ifndef LEVEL_SET_SUMS_FUSED
#define LEVEL_SET_SUMS_FUSED 0
#endif

struct NodeSums { float W, sx, sy, sz, sr; };

__device__ __forceinline__ void add_terms(NodeSums& m, float w, float dx, float dy, float dz, float r)
{
    m.W += w;
#if LEVEL_SET_SUMS_FUSED
    m.sx = fmaf(w, dx, m.sx);
    m.sy = fmaf(w, dy, m.sy);
    m.sz = fmaf(w, dz, m.sz);
    m.sr = fmaf(w, r, m.sr);
#else
    m.sx += w * dx;
    m.sy += w * dy;
    m.sz += w * dz;
    m.sr += w * r;
#endif
}

// φ = |x − x̄| − r̄ from the node's weighted sums (W, Σw·(x_p − x), Σw·r_p), clamped to ±band;
// no particle within R (W = 0): +band. The means before their squares: a node whose
// particles all lie near R has sums of weights ~1e-22 whose squares would underflow float32
// (|x − x̄| read as 0, φ as −r̄).
__device__ __forceinline__ float phi_of_sums(float W, float sx, float sy, float sz, float sr, float band)
{
    float value = band;
    if (W > 0.0f) {
        float mx = sx / W, my = sy / W, mz = sz / W;
        value = sqrtf((mx * mx + my * my) + mz * mz) - sr / W;
    }
    return fminf(fmaxf(value, -band), band);
}

// The walls' mirror images of a particle (surface.mirror_at_walls, made on the fly): on each
// axis a choice c ∈ {0: as is, 1: mirrored across the low wall, 2: across the high wall}, a
// mirror allowed where the particle lies within reach of that wall (x < lo + reach,
// x > hi − reach, float32 as NumPy's); image = one combination of choices other than all 0,
// numbered combo = (cz·3 + cy)·3 + cx. mirror_at_walls lists the images axis by axis, wall by
// wall, each pass over the particles and the images so far: that list is in the order of
// (combo, particle), which surface_place's tags keep. x' = 2·wall − x as there.
__device__ __forceinline__ int wall_choices(float x, float lo, float hi, float reach, int walls)
{
    if (!walls) return 0;
    return (x < lo + reach ? 1 : 0) | (x > hi - reach ? 2 : 0);
}

__device__ __forceinline__ bool allowed(int c, int choices) { return c == 0 || ((choices >> (c - 1)) & 1); }

__device__ __forceinline__ float mirrored(float x, int c, float lo, float hi)
{
    return c == 0 ? x : (c == 1 ? 2.0f * lo - x : 2.0f * hi - x);
}

__device__ __forceinline__ int cell_key(float x, float y, float z, float cox, float coy, float coz, float inv_edge,
                                        int cx, int cy, int cz)
{
    int i = cell_of(x, cox, inv_edge, cx);
    int j = cell_of(y, coy, inv_edge, cy);
    int k = cell_of(z, coz, inv_edge, cz);
    return (i < 0 || j < 0 || k < 0) ? -1 : (k * cy + j) * cx + i;
}

#define COMBOS 27

// The interior skip (surface_interior.py, flip_surface_interior.cu): whether the node at
// (x, y, z) lies in a cell marked interior (skip = 1 and interior[its cell_key]); then its
// φ is −band, no gather.
__device__ __forceinline__ bool interior_at(const unsigned char* __restrict__ interior, int skip, float x, float y,
                                            float z, float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                            int cz)
{
    if (!skip) return false;
    int key = cell_key(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz);
    return key >= 0 && interior[key];
}

// Image combo of the particle (x, y, z) with choices (mx, my, mz) into (px, py, pz); false
// where a choice of combo is not allowed (combo 0: the particle itself).
__device__ __forceinline__ bool wall_image(int combo, float x, float y, float z, int mx, int my, int mz, float lox,
                                           float loy, float loz, float hix, float hiy, float hiz, float& px,
                                           float& py, float& pz)
{
    int c0 = combo % 3, c1 = (combo / 3) % 3, c2 = combo / 9;
    if (!(allowed(c0, mx) && allowed(c1, my) && allowed(c2, mz))) return false;
    px = mirrored(x, c0, lox, hix), py = mirrored(y, c1, loy, hiy), pz = mirrored(z, c2, loz, hiz);
    return true;
}

// f(combo, key, px, py, pz) for each image combo in [first, last) that wall_image allows and
// whose point (px, py, pz) lies in a binning cell (key ≥ 0): the binning kernels' image loop.
template <typename F>
__device__ __forceinline__ void for_each_image(int first, int last, float x, float y, float z, int mx, int my, int mz,
                                               float lox, float loy, float loz, float hix, float hiy, float hiz,
                                               float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                               int cz, F f)
{
    for (int combo = first; combo < last; ++combo) {
        float px, py, pz;
        if (!wall_image(combo, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, px, py, pz)) continue;
        const int key = cell_key(px, py, pz, cox, coy, coz, inv_edge, cx, cy, cz);
        if (key >= 0) f(combo, key, px, py, pz);
    }
}

// A point (x, y, z, r) with its tag into cell key's next slot, starts[key] + a running count.
template <typename Tag>
__device__ __forceinline__ void place_point(int key, float x, float y, float z, float r, Tag tag,
                                            const int* __restrict__ starts, int* __restrict__ fill,
                                            float4* __restrict__ packed, Tag* __restrict__ tags)
{
    int slot = starts[key] + atomicAdd(&fill[key], 1);
    packed[slot] = make_float4(x, y, z, r);
    tags[slot] = tag;
}

// Each cell's points in tag order (surface_place's atomics placed them in any order): the order a
// stable sort of the list by cell gives, so the sums are the same every run. One thread a
// point: its rank among its cell's tags (the cell from its own position, as surface_place
// found it) is its place in *out*. A cell of more than *limit* points is left alone (the
// rank would take its size squared): surface_gpu.py sorts those cells' points by themselves.
template <typename Tag>
__device__ __forceinline__ void order_point(const float4* __restrict__ packed, const Tag* __restrict__ tags,
                                            const int* __restrict__ starts, long long points, float cox, float coy,
                                            float coz, float inv_edge, int cx, int cy, int cz, int limit,
                                            float4* __restrict__ out)
{
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= points) return;
    float4 q = packed[s];
    int key = cell_key(q.x, q.y, q.z, cox, coy, coz, inv_edge, cx, cy, cz);
    int first = starts[key], last = starts[key + 1];
    if (last - first > limit) return;
    Tag t = tags[s];
    int rank = 0;
    for (int u = first; u < last; ++u) rank += tags[u] < t ? 1 : 0;
    out[first + rank] = q;
}

// The node (i, j, k) that thread t of tile b stands for (a block a tile, its threads x
// fastest) and its linear index *node*; false past the grid's far edges (a tile that
// overhangs them).
__device__ __forceinline__ bool tile_node(long long b, int t, int nbx, int nby, int nx, int ny, int nz, int* i,
                                          int* j, int* k, long long* node)
{
    *i = (int)(b % nbx) * TILE_X + (t % TILE_X);
    *j = (int)((b / nbx) % nby) * TILE_Y + ((t / TILE_X) % TILE_Y);
    *k = (int)(b / ((long long)nbx * nby)) * TILE_Z + t / (TILE_X * TILE_Y);
    if (*i >= nx || *j >= ny || *k >= nz) return false;
    *node = ((long long)*k * ny + *j) * nx + *i;
    return true;
}

// The node of this thread in tile blockIdx.x (a block a node tile) and its centre (x, y, z)
// ((i + ½)·h + o, as surface._node_coordinate); false where the thread has no node to gather:
// past the grid's far edges, or in a tile that is not active (its node set to +band,
// "outside, far").
// tile_gather_node_at: for thread t of tile b, where a tile's nodes are spread over several
// blocks (flip_surface_lean.cu's particle_level_set_lean_split); tile_gather_node: the block's
// own tile (b = blockIdx.x, t = threadIdx.x).
__device__ __forceinline__ bool tile_gather_node_at(long long b, int t, const unsigned char* __restrict__ active,
                                                    int nbx, int nby, int nx, int ny, int nz, float ox, float oy,
                                                    float oz, float h, float band, float* __restrict__ phi,
                                                    long long& node, float& x, float& y, float& z)
{
    int i, j, k;
    if (!tile_node(b, t, nbx, nby, nx, ny, nz, &i, &j, &k, &node)) return false;
    if (!active[b]) {
        phi[node] = band;
        return false;
    }
    x = ((float)i + 0.5f) * h + ox;
    y = ((float)j + 0.5f) * h + oy;
    z = ((float)k + 0.5f) * h + oz;
    return true;
}

__device__ __forceinline__ bool tile_gather_node(const unsigned char* __restrict__ active, int nbx, int nby, int nx,
                                                 int ny, int nz, float ox, float oy, float oz, float h, float band,
                                                 float* __restrict__ phi, long long& node, float& x, float& y,
                                                 float& z)
{
    return tile_gather_node_at(blockIdx.x, threadIdx.x, active, nbx, nby, nx, ny, nz, ox, oy, oz, h, band, phi, node, x,
                               y, z);
}

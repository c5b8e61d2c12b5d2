// The "lean" particle level set (surface_gpu.LEVEL_SET_MODES' default; flip_surface.cu holds
// "bricks" and "legacy" and states the method): "bricks" with the particle's own point counted
// and placed by warp groups (surface_count_lean / surface_place_lean), 32-bit tags, and the
// gather branch-free with a three-operation quotient (particle_level_set_lean, node_phi_lean);
// and the particles' bounds for the level set's region (particle_bounds). Its cell starts and
// φ are "bricks"' to the bit.
// Compiled with --fmad=false as flip_surface.cu: node positions and particle offsets round as
// NumPy's, so a node sums exactly the particles the CPU reference sums.

#include "voxfx_reduce.cuh"  // warp_grouped_rank ("lean" binning), warp_all_min_max (particle_bounds), gather_work's sums
#include "voxfx_surface.cuh"  // cell_key, gap_to_cell, the walls' images, order_point, tile_node

// ---------------------------------------------------------------- the particles' bounds

// The particles' bounding box for the level set's region (sparse_output.liquid_region, "lean"):
// per axis the least and the greatest finite-or-infinite coordinate, NaN skipped (as nanmin /
// nanmax), as order keys (ordered_key: unsigned, ordered as the floats), in one pass and one
// host read; out = (min x, y, z, max x, y, z), min slots 0xffffffff and max slots 0 before.
__device__ __forceinline__ unsigned int ordered_key(float f)
{
    unsigned int u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

extern "C" __global__ void particle_bounds(const float* __restrict__ pos, long long n, unsigned int* __restrict__ out)
{
    const float nan = __int_as_float(0x7fc00000);  // NVRTC has no NAN macro
    float lo[3] = {nan, nan, nan}, hi[3] = {nan, nan, nan};
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x)
        for (int a = 0; a < 3; ++a) {
            float x = pos[3 * p + a];
            lo[a] = fminf(lo[a], x);  // fminf / fmaxf drop a NaN operand
            hi[a] = fmaxf(hi[a], x);
        }
    for (int a = 0; a < 3; ++a) {
        unsigned int low = isnan(lo[a]) ? 0xffffffffu : ordered_key(lo[a]);
        unsigned int high = isnan(hi[a]) ? 0u : ordered_key(hi[a]);
        warp_all_min_max(low, high);
        if ((threadIdx.x & 31) == 0) {
            atomicMin(out + a, low);
            atomicMax(out + 3 + a, high);
        }
    }
}

// ---------------------------------------------------------------- the "lean" gather

// t = 1 − d2/R2 with d2/R2 rounded as "/" rounds it (IEEE), in three operations and no
// branch: the quotient step of the compiler's own division (sm_90 SASS of node_phi:
// MUFU.RCP and two FFMA for y ≈ 1/R2, then q0 = y·d2, r = d2 − q0·R2 exact by FMA,
// q = q0 + r·y), whose q it returns as the quotient whenever its range check (FCHK)
// passes, which it does for d2 ≥ R2·2⁻⁴⁰ with R2 in [2⁻⁶⁰, 2⁶⁰] (surface_gpu checks R2;
// outside, the "bricks" gather): there d2, q and r stay far inside the normal range. Below
// that, the true quotient and this q are both under 2⁻²⁵ (and not NaN), so 1 − q rounds to
// 1 either way: t is node_phi's for every d2. y is made once a thread, not once a division.
// quotient_mismatches checks the identity on the device over whole binades (GPU test); on
// the host harness y comes from 1/R2 rounded (no rcp.approx there), the same q by
// Markstein's theorem.
__device__ __forceinline__ float reciprocal_step(float b)
{
#ifdef __CUDA_ARCH__
    float r0;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(b));
#else
    float r0 = 1.0f / b;
#endif
    return fmaf(r0, fmaf(r0, -b, 1.0f), r0);
}

__device__ __forceinline__ float quotient_step(float a, float b, float y)
{
    float q0 = y * a;
    return fmaf(y, fmaf(q0, -b, a), q0);
}

// mismatches[0] += the a = mantissa·2^e (a's mantissas m0 … m0 + n − 1, exponent of 2^e)
// whose quotient_step(a, b) differs from a / b in any bit (GPU test of the identity above).
extern "C" __global__ void quotient_mismatches(float b, int e, int m0, long long n,
                                               unsigned long long* __restrict__ mismatches)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float a = ldexpf(__int_as_float(0x3f800000 | ((m0 + (int)t) & 0x7fffff)), e);
    if (__float_as_uint(quotient_step(a, b, reciprocal_step(b))) != __float_as_uint(a / b))
        atomicAdd(mismatches, 1ull);
}

// One particle's terms, branch-free: a miss adds w = 0, which leaves every sum as it was
// (x + 0 = x; x + (−0) = x but for the sign of a zero sum, which |x̄| and r̄ do not see; a
// fused term adds w·dx = ±0 exactly as well), so the sums are node_phi's bit for bit in
// either LEVEL_SET_SUMS_FUSED mode (add_terms). A warp's 32 nodes each test their own particles
// and nearly every test has some lane inside R: node_phi's branch ran the weight path for
// the whole warp every test anyway, plus its divergence and the division's range check.
// Fused mode takes w = max(t³, 0) for the select, one instruction fewer, the same w bits:
// a miss (d2 ≥ R2) has q ≥ 1 (the quotient rounds as d2/R2), so t = 1 − q is +0 or at most
// −2⁻²³ and t³ is +0 or at most −2⁻⁶⁹ (−∞ for a far point), never −0; a NaN d2 gives a NaN
// t³, which fmaxf drops; a hit's t³ ≥ 0 is kept (+0 where q rounds to 1, as the select keeps
// it). d2 itself stays unfused: the same points weigh more than 0.
__device__ __forceinline__ void add_particle(NodeSums& m, float4 q, float x, float y, float z, float R2,
                                             float inv)
{
    float dx = q.x - x, dy = q.y - y, dz = q.z - z;
    float d2 = (dx * dx + dy * dy) + dz * dz;
    float t = 1.0f - quotient_step(d2, R2, inv);
#if LEVEL_SET_SUMS_FUSED
    float w = fmaxf((t * t) * t, 0.0f);
#else
    float w = (t * t) * t;
    w = d2 < R2 ? w : 0.0f;
#endif
    add_terms(m, w, dx, dy, dz, q.w);
}

// node_phi over the same cells, the same particles in the same order, the same φ bit for
// bit; four particles' loads issued before their terms.
__device__ __forceinline__ float node_phi_lean(const float4* __restrict__ packed, const int* __restrict__ starts,
                                               float x, float y, float z, float cox, float coy, float coz,
                                               float inv_edge, int cx, int cy, int cz, float R, float band)
{
    float R2 = R * R;
    float inv = reciprocal_step(R2);
    NodeSums m = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for_reached_rows(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, [&](int row, int ilo, int ihi) {
        if (ilo > ihi) return;
        int s = starts[row + ilo], last = starts[row + ihi + 1];
        for (; s + 4 <= last; s += 4) {
            float4 a = packed[s], b = packed[s + 1], c = packed[s + 2], d = packed[s + 3];
            add_particle(m, a, x, y, z, R2, inv);
            add_particle(m, b, x, y, z, R2, inv);
            add_particle(m, c, x, y, z, R2, inv);
            add_particle(m, d, x, y, z, R2, inv);
        }
        for (; s < last; ++s) add_particle(m, packed[s], x, y, z, R2, inv);
    });
    return phi_of_sums(m.W, m.sx, m.sy, m.sz, m.sr, band);
}

// ---------------------------------------------------------------- the "lean" binning

// surface_order_cells over 32-bit tags ("lean": surface_place_lean's).
extern "C" __global__ void surface_order_cells_lean(const float4* __restrict__ packed,
                                                    const unsigned int* __restrict__ tags,
                                                    const int* __restrict__ starts, long long points, float cox,
                                                    float coy, float coz, float inv_edge, int cx, int cy, int cz,
                                                    int limit, float4* __restrict__ out)
{
    order_point(packed, tags, starts, points, cox, coy, coz, inv_edge, cx, cy, cz, limit, out);
}

// "lean" binning: surface_count and surface_place with each particle's own point (combo 0)
// counted and placed by warp groups (voxfx_reduce.cuh's warp_grouped_rank: the particles
// keep their seeding order and move little, so a warp's 32 lie in a few cells — one atomic a
// cell a warp, not one a particle), its images as there, and 32-bit tags (combo·n + p: the
// caller keeps 27·n ≤ 2³²). The same counts; the same points in each cell, in another order
// before surface_order_cells_lean puts them in tag order: the same list as surface_place's
// after surface_order_cells. Every lane of a warp reaches warp_grouped_rank (no return before).
extern "C" __global__ void surface_count_lean(const float* __restrict__ pos, long long n, int walls, float lox,
                                              float loy, float loz, float hix, float hiy, float hiz, float reach,
                                              float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                              int cz, int* __restrict__ counts, int* __restrict__ bad)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float x = 0.0f, y = 0.0f, z = 0.0f;
    int key = -1, mx = 0, my = 0, mz = 0;
    if (p < n) {
        x = pos[3 * p + 0], y = pos[3 * p + 1], z = pos[3 * p + 2];
        if (!(isfinite(x) && isfinite(y) && isfinite(z))) {
            atomicAdd(bad, 1);
        } else {
            mx = wall_choices(x, lox, hix, reach, walls);
            my = wall_choices(y, loy, hiy, reach, walls);
            mz = wall_choices(z, loz, hiz, reach, walls);
            key = cell_key(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz);
        }
    }
    warp_grouped_rank(counts, key);
    if (!(mx | my | mz)) return;
    for_each_image(1, COMBOS, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, cox, coy, coz, inv_edge, cx, cy, cz,
                   [&](int, int image, float, float, float) { atomicAdd(&counts[image], 1); });
}

extern "C" __global__ void surface_place_lean(const float* __restrict__ pos, const float* __restrict__ radii,
                                              int radius_stride, long long n, int walls, float lox, float loy,
                                              float loz, float hix, float hiy, float hiz, float reach, float cox,
                                              float coy, float coz, float inv_edge, int cx, int cy, int cz,
                                              const int* __restrict__ starts, int* __restrict__ fill,
                                              float4* __restrict__ packed, unsigned int* __restrict__ tags)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float x = 0.0f, y = 0.0f, z = 0.0f, r = 0.0f;
    int key = -1, mx = 0, my = 0, mz = 0;
    if (p < n) {
        x = pos[3 * p + 0], y = pos[3 * p + 1], z = pos[3 * p + 2];
        if (isfinite(x) && isfinite(y) && isfinite(z)) {
            r = radii[p * radius_stride];
            mx = wall_choices(x, lox, hix, reach, walls);
            my = wall_choices(y, loy, hiy, reach, walls);
            mz = wall_choices(z, loz, hiz, reach, walls);
            key = cell_key(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz);
        }
    }
    int rank = warp_grouped_rank(fill, key);
    if (key >= 0) {
        int slot = starts[key] + rank;
        packed[slot] = make_float4(x, y, z, r);
        tags[slot] = (unsigned int)p;
    }
    if (!(mx | my | mz)) return;
    for (int combo = 1; combo < COMBOS; ++combo) {  // not for_each_image: its lambda moved this kernel's PTX
        float px, py, pz;
        if (!wall_image(combo, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, px, py, pz)) continue;
        int image = cell_key(px, py, pz, cox, coy, coz, inv_edge, cx, cy, cz);
        if (image >= 0)
            place_point(image, px, py, pz, r, (unsigned int)((long long)combo * n + p), starts, fill, packed, tags);
    }
}

// ---------------------------------------------------------------- the "lean" gather's kernels

// particle_level_set_bricks with node_phi_lean (surface_gpu "lean"): the same φ bit for bit.
// _3: built for three blocks of a tile an SM (≤ 42 registers; surface_gpu.LEAN_BLOCKS, an
// A/B build: no faster on an H100, bench/RESULTS.md).
__device__ __forceinline__ void gather_tile_lean(const float4* __restrict__ packed, const int* __restrict__ starts,
                                                 const unsigned char* __restrict__ active,
                                                 const unsigned char* __restrict__ interior, int skip, int nbx,
                                                 int nby, int nx, int ny, int nz, float ox, float oy, float oz,
                                                 float h, float cox, float coy, float coz, float inv_edge, int cx,
                                                 int cy, int cz, float R, float band, float* __restrict__ phi)
{
    long long node;
    float x, y, z;
    if (!tile_gather_node(active, nbx, nby, nx, ny, nz, ox, oy, oz, h, band, phi, node, x, y, z)) return;
    if (interior_at(interior, skip, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz)) {
        phi[node] = -band;  // deep inside: no gather (the interior skip)
        return;
    }
    phi[node] = node_phi_lean(packed, starts, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, band);
}

#define GATHER_LEAN_ARGS const float4* __restrict__ packed, const int* __restrict__ starts, \
    const unsigned char* __restrict__ active, const unsigned char* __restrict__ interior, int skip, int nbx, int nby, \
    int nx, int ny, int nz, float ox, float oy, float oz, \
    float h, float cox, float coy, float coz, float inv_edge, int cx, int cy, int cz, float R, float band, \
    float* __restrict__ phi

extern "C" __global__ void particle_level_set_lean(GATHER_LEAN_ARGS)
{
    gather_tile_lean(packed, starts, active, interior, skip, nbx, nby, nx, ny, nz, ox, oy, oz, h, cox, coy, coz,
                     inv_edge, cx, cy, cz, R, band, phi);
}

extern "C" __global__ void __launch_bounds__(TILE_X * TILE_Y * TILE_Z, 3) particle_level_set_lean_3(GATHER_LEAN_ARGS)
{
    gather_tile_lean(packed, starts, active, interior, skip, nbx, nby, nx, ny, nz, ox, oy, oz, h, cox, coy, coz,
                     inv_edge, cx, cy, cz, R, band, phi);
}

// ---------------------------------------------------------------- the gather split over blocks

// particle_level_set_lean with each node tile's TILE_X·TILE_Y·TILE_Z nodes over *parts* blocks of
// blockDim.x = that / parts threads (block β: tile β / parts, its threads the tile's nodes from
// (β % parts)·blockDim.x on): every node gathers as there, the same φ bit for bit
// (surface_gpu.gather_split, VOXFX_LEVEL_SET_GATHER_SPLIT). A block ends when its slowest warp
// ends and only then frees its slots on the SM: a tile whose few warps sum crowded cells holds
// 16 warps' slots with one block a tile, 16 / parts with more.
__device__ __forceinline__ void gather_tile_lean_at(long long b, int t, const float4* __restrict__ packed,
                                                    const int* __restrict__ starts,
                                                    const unsigned char* __restrict__ active,
                                                    const unsigned char* __restrict__ interior, int skip, int nbx,
                                                    int nby, int nx, int ny, int nz, float ox, float oy, float oz,
                                                    float h, float cox, float coy, float coz, float inv_edge, int cx,
                                                    int cy, int cz, float R, float band, float* __restrict__ phi)
{
    long long node;
    float x, y, z;
    if (!tile_gather_node_at(b, t, active, nbx, nby, nx, ny, nz, ox, oy, oz, h, band, phi, node, x, y, z)) return;
    if (interior_at(interior, skip, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz)) {
        phi[node] = -band;  // deep inside: no gather (the interior skip)
        return;
    }
    phi[node] = node_phi_lean(packed, starts, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, band);
}

// first: the tile of block 0 (surface_overlap: the tiles in chunks of z layers, each chunk a launch).
extern "C" __global__ void particle_level_set_lean_split(GATHER_LEAN_ARGS, int parts, long long first)
{
    gather_tile_lean_at(first + blockIdx.x / parts, (int)(blockIdx.x % parts) * blockDim.x + threadIdx.x, packed, starts,
                        active, interior, skip, nbx, nby, nx, ny, nz, ox, oy, oz, h, cox, coy, coz, inv_edge, cx, cy,
                        cz, R, band, phi);
}

// ---------------------------------------------------------------- the gather's work (benches)

// What the lean gather of one launch does (surface_gpu.GATHER_WORK, bench/flip_sparse.py
// --level-set-modes): node_phi_lean's rows and cell ranges walked without the points, one block a
// tile as the gather. out (unsigned long long, zeroed): [0] Σ points tested over the gathered
// nodes; [1] Σ over warps and rows of 32 × the row's most points a lane tests (the lanes' slots
// the warp spends); [2] nodes gathered; [3] interior nodes; [4] Σ over tiles of 16 × its slowest
// warp's Σ of row maxima × 32 (a block a tile: the SM's slots the block holds); [5] the same with
// a tile over 4 blocks of 4 warps; [6] the most points a node tests; [7] unused (session 23's model of a
// balanced gather, whose kernel was slower and was removed in session 25); [8 + b] nodes testing points
// in [2^b − 1, 2^(b+1) − 1), b < 24. Device only (warp sums, shared rows): the host harnesses' stubs
// (tests/cuda_host.py) define blockIdx as a macro, and leave it out.
#ifndef blockIdx
extern "C" __global__ void gather_work(const int* __restrict__ starts, const unsigned char* __restrict__ active,
                                       const unsigned char* __restrict__ interior, int skip, int nbx, int nby,
                                       int nx, int ny, int nz, float ox, float oy, float oz, float h, float cox,
                                       float coy, float coz, float inv_edge, int cx, int cy, int cz, float R,
                                       unsigned long long* __restrict__ out)
{
    __shared__ unsigned long long warp_time[TILE_X * TILE_Y * TILE_Z / 32];
    __shared__ unsigned int hist[24];
    const long long b = blockIdx.x;
    if (!active[b]) return;  // the whole block
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (t < 24) hist[t] = 0;
    __syncthreads();
    int i, j, k;
    long long node;
    const bool in = tile_node(b, t, nbx, nby, nx, ny, nz, &i, &j, &k, &node);
    const bool row_in = j < ny && k < nz;  // the same for the warp's lanes (a row of TILE_X = 32 nodes)
    const float x = ((float)i + 0.5f) * h + ox, y = ((float)j + 0.5f) * h + oy, z = ((float)k + 0.5f) * h + oz;
    const bool inner = in && interior_at(interior, skip, x, y, z, cox, coy, coz, inv_edge, cx, cy, cz);
    const bool gathers = in && !inner;
    unsigned long long mine = 0, slots = 0;
    if (row_in) {  // the warp's lanes (a row of nodes: one y, z) walk the same rows, each max over one row
        for_reached_rows(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz, R, [&](int row, int ilo, int ihi) {
            unsigned int trip = gathers && ilo <= ihi ? (unsigned int)(starts[row + ihi + 1] - starts[row + ilo]) : 0u;
            mine += trip;
            slots += 32ull * warp_all_max_redux(trip);
        });
    }
    if (lane == 0) warp_time[warp] = slots;
    if (gathers) {
        int bucket = 0;
        while (bucket < 23 && mine + 1 >= (2ull << bucket)) ++bucket;
        atomicAdd(&hist[bucket], 1u);
        atomicMax(out + 6, mine);
    }
    const unsigned int tests = (unsigned int)warp_all_sum((int)mine);  // a warp's: < 2³¹ (32 × 52,215 at 65M)
    const unsigned int gathered = __popc(warp_ballot(gathers));
    const unsigned int inners = __popc(warp_ballot(inner));
    if (lane == 0) {
        atomicAdd(out + 0, (unsigned long long)tests);
        atomicAdd(out + 1, slots);
        atomicAdd(out + 2, (unsigned long long)gathered);
        atomicAdd(out + 3, (unsigned long long)inners);
    }
    __syncthreads();
    if (t == 0) {
        const int warps = TILE_X * TILE_Y * TILE_Z / 32;
        unsigned long long most = 0, quarter = 0;
        for (int w = 0; w < warps; w += 4) {
            unsigned long long m4 = 0;
            for (int v = w; v < w + 4 && v < warps; ++v) m4 = m4 > warp_time[v] ? m4 : warp_time[v];
            most = most > m4 ? most : m4;
            quarter += 4ull * m4;
        }
        atomicAdd(out + 4, (unsigned long long)warps * most);
        atomicAdd(out + 5, quarter);
    }
    if (t < 24 && hist[t]) atomicAdd(out + 8 + t, (unsigned long long)hist[t]);
}
#endif  // blockIdx

// The "lean" level set's binning that places the tags alone (kernels/flip/surface_place.py,
// VOXFX_LEVEL_SET_PLACE; flip_surface.cu states the method, flip_surface_lean.cu holds the default
// count and place). surface_place_lean writes each point as a float4 and its tag at the point's
// slot, 20 bytes a point scattered over the cells; here the place writes the 4-byte tag alone and
// the ordering (surface_order_tags) makes each point from its tag — the particle's position
// mirrored by the tag's combo, the same float operations: the same bits — and writes it at its rank
// in its cell.
//   "tags": the images by warp groups too (surface_count_grouped, surface_place_tags: a warp runs
//     the image loop once for each combo some lane has, the OR of the lanes' combo words, and
//     every combo's images by voxfx_reduce.cuh's warp_grouped_rank, one atomic a cell a warp);
//   "tags-plain": the images one atomic each, as lean (surface_count_lean, surface_place_tags_plain).
// The same counts and cell starts as lean; the same points in each cell in any order before the
// ordering, which puts them in tag order: the same list, the same φ.
// Compiled with --fmad=false as flip_surface.cu.

#include "voxfx_reduce.cuh"  // warp_grouped_rank, warp_all_or
#include "voxfx_surface.cuh"  // cell_key, the walls' images, mirrored

// The image combos (1 … 26) that wall_image allows a particle of wall choices (mx, my, mz),
// as the bits of a word: per axis the allowed choices a = 1 | m << 1 (bit c: choice c), and
// combo (cz·3 + cy)·3 + cx's bit is ax's bit cx shifted by 3·cy + 9·cz — the products of ax
// with ay's and az's bits spread to 0, 3, 6 and 0, 9, 18 add shifted copies that never overlap
// (no carries). Bit 0, the particle itself, cleared.
__device__ __forceinline__ unsigned int image_combos(int mx, int my, int mz)
{
    const unsigned int ax = 1u | ((unsigned int)mx << 1), ay = 1u | ((unsigned int)my << 1);
    const unsigned int az = 1u | ((unsigned int)mz << 1);
    const unsigned int ys = (ay & 1u) | ((ay & 2u) << 2) | ((ay & 4u) << 4);
    const unsigned int zs = (az & 1u) | ((az & 2u) << 8) | ((az & 4u) << 16);
    return (ax * ys * zs) & ~1u;
}

// f(combo, image cell, rank, px, py, pz) for each image of this lane's particle that lies in a
// binning cell, rank its place among the warp's points of that combo in that cell
// (counter[cell] advanced once for them all). The loop runs over the warp's combos (the same
// trip count in every lane: every lane of the warp must call it, none returned before).
template <typename F>
__device__ __forceinline__ void grouped_images(int* __restrict__ counter, float x, float y, float z, int mx, int my,
                                               int mz, float lox, float loy, float loz, float hix, float hiy,
                                               float hiz, float cox, float coy, float coz, float inv_edge, int cx,
                                               int cy, int cz, F f)
{
    const unsigned int mine = (mx | my | mz) ? image_combos(mx, my, mz) : 0u;
    unsigned int todo = warp_all_or(mine);
    while (todo) {
        const int combo = __ffs((int)todo) - 1;
        todo &= todo - 1u;
        float px = 0.0f, py = 0.0f, pz = 0.0f;
        int image = -1;
        if ((mine >> combo) & 1u) {
            wall_image(combo, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, px, py, pz);
            image = cell_key(px, py, pz, cox, coy, coz, inv_edge, cx, cy, cz);
        }
        const int rank = warp_grouped_rank(counter, image);
        if (image >= 0) f(combo, image, rank, px, py, pz);
    }
}

// The particle p of this thread (none past n): its position, its wall choices and its own
// cell (−1: none, or non-finite — bad[0] += 1 then, when *bad* is given).
__device__ __forceinline__ int binned_particle(const float* __restrict__ pos, long long p, long long n, int walls,
                                               float lox, float loy, float loz, float hix, float hiy, float hiz,
                                               float reach, float cox, float coy, float coz, float inv_edge, int cx,
                                               int cy, int cz, int* __restrict__ bad, float& x, float& y, float& z,
                                               int& mx, int& my, int& mz)
{
    x = 0.0f, y = 0.0f, z = 0.0f;
    mx = 0, my = 0, mz = 0;
    if (p >= n) return -1;
    x = pos[3 * p + 0], y = pos[3 * p + 1], z = pos[3 * p + 2];
    if (!(isfinite(x) && isfinite(y) && isfinite(z))) {
        if (bad) atomicAdd(bad, 1);
        return -1;
    }
    mx = wall_choices(x, lox, hix, reach, walls);
    my = wall_choices(y, loy, hiy, reach, walls);
    mz = wall_choices(z, loz, hiz, reach, walls);
    return cell_key(x, y, z, cox, coy, coz, inv_edge, cx, cy, cz);
}

// counts[cell] += the particle and its images in that cell; bad[0] += the non-finite
// particles (surface_count_lean's counts, by warp groups for the images too).
extern "C" __global__ void surface_count_grouped(const float* __restrict__ pos, long long n, int walls, float lox,
                                                 float loy, float loz, float hix, float hiy, float hiz, float reach,
                                                 float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                                 int cz, int* __restrict__ counts, int* __restrict__ bad)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float x, y, z;
    int mx, my, mz;
    const int key = binned_particle(pos, p, n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox, coy, coz, inv_edge,
                                    cx, cy, cz, bad, x, y, z, mx, my, mz);
    warp_grouped_rank(counts, key);
    grouped_images(counts, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, cox, coy, coz, inv_edge, cx, cy, cz,
                   [](int, int, int, float, float, float) {});
}

// "tags": the particle's tag p and its images' tags combo·n + p (32-bit: 27·n ≤ 2³², surface_place_lean's
// tags) into their cells' slots, starts[cell] + fill[cell]'s running count (zeroed before), the points
// themselves not written (surface_order_tags makes them); the images by warp groups.
extern "C" __global__ void surface_place_tags(const float* __restrict__ pos, long long n, int walls, float lox,
                                              float loy, float loz, float hix, float hiy, float hiz, float reach,
                                              float cox, float coy, float coz, float inv_edge, int cx, int cy, int cz,
                                              const int* __restrict__ starts, int* __restrict__ fill,
                                              unsigned int* __restrict__ tags)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float x, y, z;
    int mx, my, mz;
    const int key = binned_particle(pos, p, n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox, coy, coz, inv_edge,
                                    cx, cy, cz, nullptr, x, y, z, mx, my, mz);
    const int rank = warp_grouped_rank(fill, key);
    if (key >= 0) tags[starts[key] + rank] = (unsigned int)p;
    grouped_images(fill, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, cox, coy, coz, inv_edge, cx, cy, cz,
                   [&](int combo, int image, int at, float, float, float) {
                       tags[starts[image] + at] = (unsigned int)((long long)combo * n + p);
                   });
}

// "tags-plain": surface_place_tags with each image one atomic, as surface_place_lean places them (the
// counts are surface_count_lean's).
extern "C" __global__ void surface_place_tags_plain(const float* __restrict__ pos, long long n, int walls, float lox,
                                                    float loy, float loz, float hix, float hiy, float hiz,
                                                    float reach, float cox, float coy, float coz, float inv_edge,
                                                    int cx, int cy, int cz, const int* __restrict__ starts,
                                                    int* __restrict__ fill, unsigned int* __restrict__ tags)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float x, y, z;
    int mx, my, mz;
    const int key = binned_particle(pos, p, n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox, coy, coz, inv_edge,
                                    cx, cy, cz, nullptr, x, y, z, mx, my, mz);
    const int rank = warp_grouped_rank(fill, key);
    if (key >= 0) tags[starts[key] + rank] = (unsigned int)p;
    if (!(mx | my | mz)) return;
    for (int combo = 1; combo < COMBOS; ++combo) {
        float px, py, pz;
        if (!wall_image(combo, x, y, z, mx, my, mz, lox, loy, loz, hix, hiy, hiz, px, py, pz)) continue;
        const int image = cell_key(px, py, pz, cox, coy, coz, inv_edge, cx, cy, cz);
        if (image >= 0) tags[starts[image] + atomicAdd(&fill[image], 1)] = (unsigned int)((long long)combo * n + p);
    }
}

// The tag ways' ordering, one thread a slot s: the point of tag t = combo·n + p — particle p's
// position mirrored by combo's choices (wall_image's mirrored, the same float operations:
// the bits surface_place_lean stores) and its radius — at its rank among its cell's tags
// in *out* (order_point's rank); a cell of more than *limit* points: the point at s itself,
// for surface_gpu's sort of the crowded cells in place.
extern "C" __global__ void surface_order_tags(const float* __restrict__ pos, const float* __restrict__ radii,
                                              int radius_stride, long long n, float lox, float loy, float loz,
                                              float hix, float hiy, float hiz, const unsigned int* __restrict__ tags,
                                              const int* __restrict__ starts, long long points, float cox, float coy,
                                              float coz, float inv_edge, int cx, int cy, int cz, int limit,
                                              float4* __restrict__ out)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= points) return;
    const unsigned int t = tags[s];
    const unsigned int combo = t / (unsigned int)n;  // 27·n ≤ 2³²: n and t fit 32 bits
    const long long p = t - combo * (unsigned int)n;
    const float px = mirrored(pos[3 * p + 0], (int)(combo % 3u), lox, hix);
    const float py = mirrored(pos[3 * p + 1], (int)((combo / 3u) % 3u), loy, hiy);
    const float pz = mirrored(pos[3 * p + 2], (int)(combo / 9u), loz, hiz);
    const float4 q = make_float4(px, py, pz, radii[p * radius_stride]);
    const int key = cell_key(px, py, pz, cox, coy, coz, inv_edge, cx, cy, cz);
    const int first = starts[key], last = starts[key + 1];
    if (last - first > limit) {
        out[s] = q;
        return;
    }
    int rank = 0;
    for (int u = first; u < last; ++u) rank += tags[u] < t ? 1 : 0;
    out[first + rank] = q;
}

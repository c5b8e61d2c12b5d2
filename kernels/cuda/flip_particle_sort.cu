// The sparse FLIP particle sort's keys and its disorder count (kernels/flip/particle_sort.py: brick_keys and
// disorder are the NumPy reference, the same operations in float32 and the same integer keys; helper i24o).
//
//   particle_brick_keys   one thread a particle: its lattice cell floor((p − origin) / h) (float32, --fmad=false),
//                         minus the key frame's first cell, clamped into [0, 8·bricks − 1] (in float32, before the
//                         integer conversion), then the key (bz·by + by')·bx + bx' of its brick and, with `local`,
//                         ·512 + (lz·8 + ly)·8 + lx of its cell; a particle with a non-finite coordinate gets
//                         `last` (past every finite key). int32 keys only (the caller checks the range).
//   key_jumps             the particles whose cell (decoded from a key with its cell part) is not the cell
//                         of the particle before them nor one of its 26 neighbours (one atomicAdd a warp's
//                         count): how often a walk along the arrays jumps.
//   gather_particles      one thread a particle of the new order: pos (3 floats), vel (3) and, with `apic`, C (9)
//                         of particle order[s] & (2³² − 1) copied to slot s of the outputs (one launch for every
//                         array; argsort's int64 order, fewer than 2³² particles: its low 32 bits are the index
//                         itself). A copy: bit for bit the NumPy reference's x[order] of each array.
#include "voxfx_reduce.cuh"  // warp_count_into

extern "C" __global__ void particle_brick_keys(const float* pos, long long n, float ox, float oy, float oz, float h,
                                               float lox, float loy, float loz, int bx, int by, int bz, int local,
                                               int last, int* key)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = pos[3 * i], y = pos[3 * i + 1], z = pos[3 * i + 2];
    if (!(isfinite(x) && isfinite(y) && isfinite(z))) {
        key[i] = last;
        return;
    }
    // NumPy: clip(floor((p − origin) / h) − lo, 0, 8·bricks − 1), float32 throughout
    float cx = fminf(fmaxf(floorf((x - ox) / h) - lox, 0.0f), (float)(8 * bx - 1));
    float cy = fminf(fmaxf(floorf((y - oy) / h) - loy, 0.0f), (float)(8 * by - 1));
    float cz = fminf(fmaxf(floorf((z - oz) / h) - loz, 0.0f), (float)(8 * bz - 1));
    int ix = (int)cx, iy = (int)cy, iz = (int)cz;
    int k = ((iz >> 3) * by + (iy >> 3)) * bx + (ix >> 3);
    if (local) k = k * 512 + ((iz & 7) * 8 + (iy & 7)) * 8 + (ix & 7);
    key[i] = k;
}

// A key's cell in the key frame (particle_brick_keys' key with its cell part; bx, by the frame's bricks).
__device__ __forceinline__ void key_cell(int key, int bx, int by, int& x, int& y, int& z)
{
    const int b = key >> 9, l = key & 511;
    x = (b % bx) * 8 + (l & 7);
    y = ((b / bx) % by) * 8 + ((l >> 3) & 7);
    z = (b / (bx * by)) * 8 + (l >> 6);
}

extern "C" __global__ void key_jumps(const int* key, long long n, int bx, int by, unsigned long long* jumps)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    bool far = false;
    if (i > 0 && i < n) {
        int x0, y0, z0, x1, y1, z1;
        key_cell(key[i - 1], bx, by, x0, y0, z0);
        key_cell(key[i], bx, by, x1, y1, z1);
        far = abs(x1 - x0) > 1 || abs(y1 - y0) > 1 || abs(z1 - z0) > 1;
    }
    warp_count_into(jumps, far);
}

extern "C" __global__ void gather_particles(const long long* __restrict__ order, long long n,
                                            const float* __restrict__ pos, const float* __restrict__ vel,
                                            const float* __restrict__ c, int apic, float* __restrict__ spos,
                                            float* __restrict__ svel, float* __restrict__ sc)
{
    long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= n) return;
    const long long p = order[s] & 0xffffffffLL;
    for (int a = 0; a < 3; ++a) {
        spos[3 * s + a] = pos[3 * p + a];
        svel[3 * s + a] = vel[3 * p + a];
    }
    if (apic)
        for (int a = 0; a < 9; ++a) sc[9 * s + a] = c[9 * p + a];
}

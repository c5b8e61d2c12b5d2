// The block G2P kernel's push-out (flip_sparse_g2p_block.cu's notes; a part of that file kept apart for its
// length, issue 24: modules under ~500 lines, helper s23g): push_out_brick in 32-bit integers where it can, else
// out of line. Included by flip_sparse_g2p_block.cu after voxfx_g2p_home.cuh (Home, Sampler, Bricks,
// push_out_brick) and voxfx_sparse_index.cuh; callers define PUSH_EPSILON. Compiled with --fmad=false as the
// kernel file.
#pragma once

// A point (a slow path's result by value: arrays passed by address would live in local memory
// on the fast path too).
struct Point {
    float x[3];
};

// push_out_brick (voxfx_g2p_home.cuh) on home H's Sampler: out of line (the rare cases); its
// arguments by value.
__device__ __noinline__ Point block_push_out_slow(float x0, float x1, float x2, float f0, float f1, float f2,
                                                  const unsigned char* __restrict__ solid, Home H, int closed,
                                                  int nx, int ny, int nz, float o0, float o1, float o2, float h,
                                                  float inv_h)
{
    Sampler S;
    S.b = Bricks{H.keys, H.slots, H.n, H.nbr27};
    S.closed = closed;
    S.n[0] = nx;
    S.n[1] = ny;
    S.n[2] = nz;
    S.home = H.slot;  // (hb only read where home ≥ 0: g2p_advect_bricks' hb there)
    for (int a = 0; a < 3; ++a) S.hb[a] = H.hb[a];
    Point P{{x0, x1, x2}};
    const float f[3] = {f0, f1, f2}, oo[3] = {o0, o1, o2};
    push_out_brick(P.x, f, solid, S, oo, h, inv_h);
    return P;
}

// push_out_brick in 32-bit integers where the domain is closed, x finite and its cell's
// brick one of home's 27 and the cell not SOLID; else push_out_brick itself.
__device__ __forceinline__ void block_push_out(float x[3], const float fallback[3],
                                               const unsigned char* __restrict__ solid, const Home& H, int closed,
                                               const int n[3], const float o[3], float h, float inv_h)
{
    if (closed && H.slot >= 0 && isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2])) {
        float gc[3];
        int cell[3];
        bool moved = false;
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            const float g = (x[a] - o[a]) * inv_h;
            gc[a] = fminf(fmaxf(g, PUSH_EPSILON), (float)n[a] - PUSH_EPSILON);
            moved = moved || gc[a] != g;
            cell[a] = min((int)floorf(gc[a]), n[a] - 1);  // gc in [ε, n − ε]: no overflow
        }
        const int dx = (cell[0] >> 3) - H.hb[0], dy = (cell[1] >> 3) - H.hb[1], dz = (cell[2] >> 3) - H.hb[2];
        if ((unsigned)(dx + 1) <= 2u && (unsigned)(dy + 1) <= 2u && (unsigned)(dz + 1) <= 2u) {
            const int s = H.nbr27[27 * H.slot + sparse_offset_index(dx, dy, dz)];
            if (s < 0 || !solid[s * SPARSE_CELLS + (((cell[2] & 7) << 6) | ((cell[1] & 7) << 3) | (cell[0] & 7))]) {
                if (moved)
                    for (int a = 0; a < 3; ++a) x[a] = o[a] + gc[a] * h;
                return;
            }
        }
    }
    const Point P = block_push_out_slow(x[0], x[1], x[2], fallback[0], fallback[1], fallback[2], solid, H, closed,
                                        n[0], n[1], n[2], o[0], o[1], o[2], h, inv_h);
    for (int a = 0; a < 3; ++a) x[a] = P.x[a];
}

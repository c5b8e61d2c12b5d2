// Snow flakes (seed 002 §2.4.1, §3.3.1–3.3.2): one thread per flake, float32, structure of
// arrays as laid out in kernels/snow/domain.py. Mirrors kernels/snow/flakes.py term by term.
//
// Compiled with --fmad=false so spawning rounds exactly like NumPy (init is bit-identical to
// the CPU); the step uses sinf/cosf, whose last bits may differ from NumPy's, so the CPU and
// GPU steps agree to a few ulps per step and statistically thereafter.
//
// The landed counter is a uint64 unless the launcher compiles with -DLANDED_32 (uint32).

#ifdef LANDED_32
typedef unsigned int landed_t;
#else
typedef unsigned long long landed_t;
#endif

// Constants from one source (issue 19): the RNG streams STREAM_* and INIT_ATTEMPTS /
// INIT_ATTEMPT_STRIDE of kernels/snow/rng.py, GRAVITY, TWO_PI and NO_GROUND come as -D
// options from kernels/snow/flakes.py (the hash itself: include/voxfx_rng.cuh).
#if !defined(STREAM_PHASE) || !defined(INIT_ATTEMPTS) || !defined(NO_GROUND) || !defined(GRAVITY)
#error "snow_flakes.cu is compiled by kernels/snow/flakes.py, which passes its constants as -D options"
#endif

#include "voxfx_rng.cuh"  // RNG of rng.py

// ------------------------------------------------------------------------------ parameters

struct Spawning {  // everything a (re)spawn and the per-flake constants need
    unsigned int seed_key;
    float ox, oy, oz, lx, ly, top, drop;                       // domain box, respawn band
    float vmax_lo, vmax_span, radius_lo, radius_span, radius_scale, omega_lo, omega_span;
};

// Passed as scalars (the order of flakes.py's _spawning()), gathered into a Spawning.
#define SPAWNING_PARAMETERS                                                                                 \
    unsigned int seed_key, float ox, float oy, float oz, float lx, float ly, float top, float drop,          \
        float vmax_lo, float vmax_span, float radius_lo, float radius_span, float radius_scale, float omega_lo, \
        float omega_span
#define SPAWNING                                                                                             \
    Spawning{seed_key, ox, oy, oz, lx, ly, top, drop, vmax_lo, vmax_span, radius_lo, radius_span, radius_scale, \
             omega_lo, omega_span}

// Table 2.2: R ∈ (0, 2)·spiral_scale, |ω| ∈ [π/4, π/3] of either sign, V_max,z by preset.
__device__ __forceinline__ void flake_parameters(const Spawning& s, unsigned int key, float& vmax, float& radius,
                                                 float& omega)
{
    vmax = s.vmax_lo + rng_uniform(key, STREAM_VMAX) * s.vmax_span;
    radius = (s.radius_lo + rng_uniform(key, STREAM_RADIUS) * s.radius_span) * s.radius_scale;
    omega = s.omega_lo + rng_uniform(key, STREAM_OMEGA) * s.omega_span;
    if (rng_uniform(key, STREAM_OMEGA_SIGN) < 0.5f) omega = -omega;
}

// Table 2.2: V_snow = ([-1, 1], [-1, 1], -V_max,z) (z up), a random spiral phase.
__device__ __forceinline__ void spawn_velocity(const Spawning& s, unsigned int key, float v[3], float& phase)
{
    float vmax, radius, omega;
    flake_parameters(s, key, vmax, radius, omega);
    v[0] = 2.0f * rng_uniform(key, STREAM_VX) - 1.0f;
    v[1] = 2.0f * rng_uniform(key, STREAM_VY) - 1.0f;
    v[2] = -vmax;
    phase = rng_uniform(key, STREAM_PHASE) * TWO_PI;
}

__device__ __forceinline__ int nearest_vertex(float x, float origin, float cell, int n)
{
    float q = rintf((x - origin) / cell);  // round half to even, as np.rint
    q = fminf(fmaxf(q, 0.0f), (float)(n - 1));
    return (int)q;
}

// ------------------------------------------------------------------------------ wind lookup

#include "voxfx_lattice.cuh"  // sample_faces: the trilinear look-up of the wind
#include "voxfx_reduce.cuh"  // warp_count_into: the landed count

// ------------------------------------------------------------------------------ kernels

// Uniforms of the RNG for the CPU/GPU bit comparison (tests) and anyone who needs them.
// First spawn (spawn = 0): uniform in the part of the domain box above the ground
// (terrain + snow at the nearest vertex, when given), by rejection with INIT_ATTEMPTS
// tries; a flake whose tries all fall below the ground starts uniformly above the ground
// of its last column.
extern "C" __global__ void init_flakes(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ phase,
                                       unsigned int* __restrict__ spawn, long long n, SPAWNING_PARAMETERS,
                                       const float* __restrict__ terrain, const float* __restrict__ snow, int has_terrain,
                                       int gx, int gy, float gx0, float gy0, float gcell)
{
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= n) return;
    const Spawning s = SPAWNING;
    unsigned int key = rng_key(s.seed_key, (unsigned int)f, 0u);
    float x = 0.0f, y = 0.0f, z = 0.0f;
    for (unsigned int attempt = 0u; attempt < INIT_ATTEMPTS; ++attempt) {
        unsigned int o = attempt * INIT_ATTEMPT_STRIDE;
        x = s.ox + rng_uniform(key, STREAM_X + o) * s.lx;
        y = s.oy + rng_uniform(key, STREAM_Y + o) * s.ly;
        float uz = rng_uniform(key, STREAM_Z + o);
        float z_lo = s.oz;
        if (has_terrain) {
            long long c = (long long)nearest_vertex(y, gy0, gcell, gy) * gx + nearest_vertex(x, gx0, gcell, gx);
            float ground = terrain[c];
            if (ground != NO_GROUND) z_lo = fminf(fmaxf(ground + snow[c], s.oz), s.top);
        }
        z = s.oz + uz * (s.top - s.oz);
        if (z >= z_lo) break;
        z = z_lo + uz * (s.top - z_lo);  // kept only after the last try
    }
    float v[3], ph;
    spawn_velocity(s, key, v, ph);
    pos[3 * f] = x; pos[3 * f + 1] = y; pos[3 * f + 2] = z;
    vel[3 * f] = v[0]; vel[3 * f + 1] = v[1]; vel[3 * f + 2] = v[2];
    phase[f] = ph;
    spawn[f] = 0u;
}


// Index -1 → 1 and n → n - 2: a deposit weight that would fall off the lattice lands on
// the mirror vertex inside it (flakes.py deposit_units).
__device__ __forceinline__ int mirror_index(int i, int n)
{
    return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
}

// One time step of every flake, fused: wind lookup, Eq. 2.20–2.26, periodic x/y, collision
// with the height field, deposit into the 3×3 nearest vertices, respawn. No host sync.
// Launch with blockDim a multiple of 32 (the landed count is summed per warp).
extern "C" __global__ void step_flakes(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ phase,
                                       unsigned int* __restrict__ spawn, long long n, SPAWNING_PARAMETERS,
                                       const float* __restrict__ u, const float* __restrict__ v,
                                       const float* __restrict__ w, int nx, int ny, int nz, float inv_h,
                                       const float* __restrict__ terrain, const float* __restrict__ snow,
                                       unsigned int* __restrict__ deposit, int gx, int gy, float gx0, float gy0,
                                       float gcell, landed_t* __restrict__ landed, float dt)
{
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const Spawning s = SPAWNING;
    bool hit = false;  // landed on the ground this step
    if (f < n) {
        float p[3] = {pos[3 * f], pos[3 * f + 1], pos[3 * f + 2]};
        float V[3] = {vel[3 * f], vel[3 * f + 1], vel[3 * f + 2]};
        float ph = phase[f];
        unsigned int sp = spawn[f];
        float vmax, radius, omega;
        flake_parameters(s, rng_key(s.seed_key, (unsigned int)f, sp), vmax, radius, omega);

        // Wind at p: MAC faces, u-face (i, j, k) at (i, j + ½, k + ½)·h from the origin.
        float gxf = (p[0] - s.ox) * inv_h, gyf = (p[1] - s.oy) * inv_h, gzf = (p[2] - s.oz) * inv_h;
        float W[3];
        sample_faces(u, v, w, nx, ny, nz, gxf, gyf, gzf, W);

        float Vf[3] = {W[0] - V[0], W[1] - V[1], W[2] - V[2]};               // Eq. 2.20
        float fluid_speed = sqrtf(Vf[0] * Vf[0] + Vf[1] * Vf[1] + Vf[2] * Vf[2]);
        float snow_speed = sqrtf(V[0] * V[0] + V[1] * V[1] + V[2] * V[2]);
        // Eq. 2.21–2.23 per unit mass: a = g + k·V_fluid, k = g|V_fluid|/V_max,z².
        float k = GRAVITY * fluid_speed / (vmax * vmax);
        float a[3] = {k * Vf[0], k * Vf[1], k * Vf[2] - GRAVITY};
        // Eq. 2.26, linearly implicit in the drag: Δv = (I − Δt ∂a/∂V)⁻¹ a Δt with
        // ∂a/∂V = −k (I + ŵŵᵀ), ŵ = V_fluid/|V_fluid| (Sherman–Morrison). Stable for any Δt.
        float kdt = k * dt;
        float inv_speed = fluid_speed > 0.0f ? 1.0f / fluid_speed : 0.0f;
        float wh[3] = {Vf[0] * inv_speed, Vf[1] * inv_speed, Vf[2] * inv_speed};
        float along = kdt / (1.0f + 2.0f * kdt) * (wh[0] * a[0] + wh[1] * a[1] + wh[2] * a[2]);
        float damp = 1.0f + kdt;
        float dv[3] = {dt * (a[0] - along * wh[0]) / damp, dt * (a[1] - along * wh[1]) / damp,
                       dt * (a[2] - along * wh[2]) / damp};
        float Vn[3] = {V[0] + dv[0], V[1] + dv[1], V[2] + dv[2]};
        // Eq. 2.24, |V_snow| floored at V_max,z so a flake at rest is not flung by the spiral.
        float ratio = fluid_speed / fmaxf(snow_speed, vmax);
        float circ = ratio * omega * radius;
        float Vc[2] = {-circ * sinf(ph), circ * cosf(ph)};
        // Eq. 2.25 with a·Δt = Δv.
        float x = p[0] + (V[0] + Vc[0]) * dt + 0.5f * dv[0] * dt;
        float y = p[1] + (V[1] + Vc[1]) * dt + 0.5f * dv[1] * dt;
        float z = p[2] + V[2] * dt + 0.5f * dv[2] * dt;
        ph = ph + omega * dt;
        ph = ph - TWO_PI * floorf(ph / TWO_PI);

        bool finite = isfinite(x) && isfinite(y) && isfinite(z) && isfinite(Vn[0]) && isfinite(Vn[1]) &&
                      isfinite(Vn[2]) && isfinite(ph);
        // Periodic in x and y (seed 002 §3.3.1 moves flakes that leave the scene).
        float x1 = s.ox + s.lx, y1 = s.oy + s.ly;
        if (!(x >= s.ox && x < x1)) {
            float d = x - s.ox;
            d = d - s.lx * floorf(d / s.lx);
            x = (d >= 0.0f && d < s.lx) ? s.ox + d : s.ox;
        }
        if (!(y >= s.oy && y < y1)) {
            float d = y - s.oy;
            d = d - s.ly * floorf(d / s.ly);
            y = (d >= 0.0f && d < s.ly) ? s.oy + d : s.oy;
        }
        if (z > s.top) {  // lifted out of the top: held at the lid
            z = s.top;
            Vn[2] = fminf(Vn[2], 0.0f);
        }

        bool respawn = !finite;
        if (finite) {
            // §3.3.1: collide with the nearest vertex's terrain + snow.
            int ci = nearest_vertex(x, gx0, gcell, gx), cj = nearest_vertex(y, gy0, gcell, gy);
            long long c = (long long)cj * gx + ci;
            float ground = terrain[c];
            float surface = ground + snow[c];
            if (ground != NO_GROUND && z < surface) {
                if (p[2] < surface) {  // met a wall from the side: lands at its foot (issue 22 §4)
                    int pci = nearest_vertex(p[0], gx0, gcell, gx), pcj = nearest_vertex(p[1], gy0, gcell, gy);
                    long long pc = (long long)pcj * gx + pci;
                    if (terrain[pc] != NO_GROUND) {
                        ci = pci;
                        cj = pcj;
                        c = pc;
                    }
                }
                // §3.3.2: 16 units over the 3×3 nearest vertices (1-2-1 × 1-2-1), mirrored
                // into the lattice at its sides (a side vertex stands for half a cell, so the
                // depth stays even: issue 18), and onto the impact vertex where a neighbour
                // has no ground: exactly 16 per flake, none where nothing receives.
                for (int dj = -1; dj <= 1; ++dj) {
                    int jj = mirror_index(cj + dj, gy);
                    for (int di = -1; di <= 1; ++di) {
                        int ii = mirror_index(ci + di, gx);
                        long long at = (long long)jj * gx + ii;
                        if (terrain[at] == NO_GROUND) at = c;
                        atomicAdd(deposit + at, (unsigned int)((2 - abs(di)) * (2 - abs(dj))));
                    }
                }
                hit = true;
                respawn = true;
            } else if (z < s.oz) {
                respawn = true;  // fell out of the bottom where there is no ground
            }
        }
        if (respawn) {  // §3.3.1: a new life near the top, new x/y, new parameters
            sp += 1u;
            unsigned int key = rng_key(s.seed_key, (unsigned int)f, sp);
            x = s.ox + rng_uniform(key, STREAM_X) * s.lx;
            y = s.oy + rng_uniform(key, STREAM_Y) * s.ly;
            z = s.top - rng_uniform(key, STREAM_Z) * s.drop;
            spawn_velocity(s, key, Vn, ph);
            spawn[f] = sp;
        }
        pos[3 * f] = x; pos[3 * f + 1] = y; pos[3 * f + 2] = z;
        vel[3 * f] = Vn[0]; vel[3 * f + 1] = Vn[1]; vel[3 * f + 2] = Vn[2];
        phase[f] = ph;
    }
    // One atomic per warp for the landed count.
    warp_count_into(landed, hit);
}

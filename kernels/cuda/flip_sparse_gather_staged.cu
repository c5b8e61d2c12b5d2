// The sparse FLIP solver's staged P2G gather (seed 003 §6–7; kernels/flip/sparse_gpu.py
// launches it after its counting sort by pool cell, kernels/flip/sparse_transfer.py's
// particles_to_grid is the NumPy reference; compiled with --fmad=false so each float
// operation rounds as NumPy's does): p2g_gather_staged, one block per brick, the particles
// themselves staged in shared memory a slab of cell layers at a time; the bits of
// flip_sparse_gather.cu's p2g_gather_brick (the same terms in include/voxfx_gather.cuh's
// gather_cell order).

#include "voxfx_gather.cuh"  // GatherFrame, gather_cell, GATHER_HALO, halo_index
#include "voxfx_sparse.cuh"  // SPARSE_CELLS, sparse_cell_near

// p2g_gather_brick's threads each load the particles of their 27 cells from global memory,
// one scattered load after another (8M particles at 256³: 2.3 ms against a 0.07 ms floor).
// The staged gather loads each particle of a slab of the brick's cell layers once, with
// consecutive threads reading consecutive particles, into shared memory, and keeps there
// what gather_cell computes per particle before its per-node arithmetic: g = (x − o)/h and,
// per axis, the floor and fraction of the hat weight's coordinate on the component's own
// lattice and on the half-shifted ones. Each (component, node) item then walks its 18
// cells (offsets ≤ 0 along the component's axis) in gather_cell's z-y-x order and sums in
// its order: the same operations on the same values, the same bits.
//
// Measured (H200, 8M particles, bench/flip_sparse_p2g.py): 1.83 ms against the brick
// gather's 2.33; without the cells' masks (cell_masks) 2.48, so the loads were not what
// bound the brick gather: the walks are, 54 weight tests a particle of which 24 reach.
// With APIC a slab's particles and their C do not fit (22 words each): layers fall back
// to gather_cell one at a time, 23 ms, so APIC keeps the brick gather (sparse_gpu).
//
// Slabs: output layers z0 … z0 + s − 1 read halo layers z0 … z0 + s + 1 (halo z = local
// z + 1); s starts at `slab` and halves while the slab's entries exceed `capacity`; a
// single layer that still does not fit is gathered by gather_cell from global memory.
// Each staged cell's run of particles is followed by one unused entry: with 8 particles a
// cell (the usual seeding) the 32 lanes of a warp, 32 neighbouring nodes each reading
// particle k of its own cell, would otherwise read entries 8 apart, 8 lanes to a shared
// memory bank (8-way conflicts on every load); 9 apart, at most 2 (measured: 2.57 → 2.48
// ms without the masks). The spare entry also holds the cell's masks (cell_masks).
//
// Shared memory (dynamic, 4-byte words; sparse_gpu.staged_capacity):
//   first[GATHER_HALO]    each halo cell's first particle in the sorted arrays
//   pre[GATHER_HALO + 1]  exclusive prefix sum of the halo cells' counts in halo order
//                         (z-major: the cells of consecutive halo layers are one range)
//   part[STAGE_PARTS]     the prefix sum's partial sums
//   then `capacity` entries of each of (structure of arrays): bases, f_own[3], f_half[3],
//   vel[3] (STAGE_WORDS), with APIC also g[3] and C[9] (STAGE_APIC_WORDS).
#define STAGE_PARTS 256
#define STAGE_WORDS 10
#define STAGE_APIC_WORDS 12
#define STAGED_THREADS 768  // 3 components × 64 nodes × 4 layers: one item a thread at slab 4

#ifndef GATHER_SHARED  // the host harness (tests/unit) passes a buffer of its own
#define GATHER_SHARED(name) extern __shared__ int name[]
#endif

// A hat weight's base and fraction (hat_weight's operations: closed, g clamped to
// [−2, n + 2]; b = ⌊g⌋, f = g − b): f, and b relative to the brick's first node clamped to
// [−2, 9] plus 2, as 4 bits (a local node l ∈ [0, 7] takes weights from bases l − 1 and l
// only, so the clamp keeps every answer).
__device__ __forceinline__ int stage_axis(float g, int closed, int n, long long brick_node, float& f)
{
    if (closed) g = fminf(fmaxf(g, -2.0f), (float)(n + 2));
    const float b = floorf(g);
    f = g - b;
    const long long rel = (long long)b - brick_node;
    return (int)(min(max(rel, -2LL), 9LL) + 2);
}

// hat_weight for local node l from a staged base (4 bits) and fraction.
__device__ __forceinline__ bool staged_weight(int bits, float f, int l, float& w)
{
    const int a = l - (bits - 2);
    if (a == 0) w = 1.0f - f;
    else if (a == 1) w = f;
    else return false;
    return true;
}

// In place over pre[0 … GATHER_HALO): counts in, exclusive prefix sums out, and
// pre[GATHER_HALO] = the total. Per-thread chunks, a Hillis–Steele scan of the chunks'
// sums in part[], then each chunk written; any block size (the host harness runs one).
__device__ void halo_prefix(int* pre, int* part)
{
    const int parts = min((int)blockDim.x, STAGE_PARTS), chunk = (GATHER_HALO + parts - 1) / parts;
    const int t = (int)threadIdx.x, lo = min(t * chunk, GATHER_HALO), hi = min(lo + chunk, GATHER_HALO);
    if (t < parts) {
        int sum = 0;
        for (int q = lo; q < hi; ++q) sum += pre[q];
        part[t] = sum;
    }
    __syncthreads();
    for (int off = 1; off < parts; off <<= 1) {
        const int add = (t < parts && t >= off) ? part[t - off] : 0;
        __syncthreads();
        if (t < parts) part[t] += add;
        __syncthreads();
    }
    if (t < parts) {
        int run = t ? part[t - 1] : 0;
        for (int q = lo; q < hi; ++q) {
            const int c = pre[q];
            pre[q] = run;
            run += c;
        }
    }
    if (t == 0) pre[GATHER_HALO] = part[parts - 1];
    __syncthreads();
}

// The halo cells' spans from first[] and the prefix sums (the fallback's gather_cell).
struct PrefixSpan {
    const int* first;
    const int* pre;
    __device__ __forceinline__ void operator()(int x, int y, int z, int& f, int& l) const
    {
        const int q = halo_index(x, y, z);
        f = first[q];
        l = f + (pre[q + 1] - pre[q]);
    }
};

// The slab's staged particles (structure of arrays, `capacity` apart): particle k of the
// prefix sums (of halo cell q) at entry k − lo + q − q_lo (one unused entry after each cell).
struct Staged {
    int* bases;
    float *f_own, *f_half, *vel, *g, *c;
    int capacity, lo, q_lo, filter;
};

// Entries the slab of halo cells q_lo … q_hi − 1 takes: its particles and one a cell.
__device__ __forceinline__ int staged_entries(const int* pre, int q_lo, int q_hi)
{
    return pre[q_hi] - pre[q_lo] + (q_hi - q_lo);
}

// Stage the sorted particles [pre[q_lo], pre[q_hi]) of halo cells q_lo … q_hi − 1: thread
// i takes particle k = pre[q_lo] + i of the range, whose cell q is found by binary search
// on pre[] (the last q with pre[q] ≤ k), at first[q] + k − pre[q] in the sorted arrays.
__device__ void stage_particles(const float* __restrict__ spos, const float* __restrict__ svel,
                                const float* __restrict__ sc, const GatherFrame& F, const long long brick[3],
                                const int* first, const int* pre, int q_hi, const Staged& S)
{
    const int total = pre[q_hi] - S.lo;
    for (int t = threadIdx.x; t < total; t += blockDim.x) {
        const int k = S.lo + t;
        int a = S.q_lo, b = q_hi;
        while (b - a > 1) {
            const int m = (a + b) >> 1;
            if (pre[m] <= k) a = m;
            else b = m;
        }
        const long long p = (long long)first[a] + (k - pre[a]);
        const int i = t + (a - S.q_lo);
        int bits = 0;
        for (int ax = 0; ax < 3; ++ax) {
            const float g = (spos[3 * p + ax] - F.o[ax]) * F.inv_h;
            float f;
            bits |= stage_axis(g, F.closed, F.n[ax], brick[ax], f) << (4 * ax);
            S.f_own[ax * S.capacity + i] = f;
            bits |= stage_axis(g - 0.5f, F.closed, F.n[ax], brick[ax], f) << (4 * (ax + 3));
            S.f_half[ax * S.capacity + i] = f;
            S.vel[ax * S.capacity + i] = svel[3 * p + ax];
            if (F.apic) S.g[ax * S.capacity + i] = g;
        }
        S.bases[i] = bits;
        if (F.apic)
            for (int e = 0; e < 9; ++e) S.c[e * S.capacity + i] = sc[9 * p + e];
    }
}

// One staged particle s for component comp of local node lc: gather_cell's terms.
__device__ __forceinline__ void staged_visit(const GatherFrame& F, const Staged& S, int comp, const int lc[3],
                                             const float node_f[3], int s, double& num, double& den)
{
    const int bits = S.bases[s];
    float wt[3];
    bool touches = true;
    for (int a = 0; a < 3 && touches; ++a) {
        const bool own = a == comp;
        const float f = own ? S.f_own[a * S.capacity + s] : S.f_half[a * S.capacity + s];
        touches = staged_weight((bits >> (own ? 4 * a : 4 * (a + 3))) & 15, f, lc[a], wt[a]);
    }
    if (!touches) return;
    const float weight = wt[0] * wt[1] * wt[2];
    float q = S.vel[comp * S.capacity + s];
    if (F.apic) {
        float fa[3];
        for (int a = 0; a < 3; ++a) {
            const float g = S.g[a * S.capacity + s];
            fa[a] = a == comp ? g : g - 0.5f;
        }
        const float* r = S.c + 3 * comp * S.capacity + s;
        const float d0 = (node_f[0] - fa[0]) * F.h, d1 = (node_f[1] - fa[1]) * F.h, d2 = (node_f[2] - fa[2]) * F.h;
        q = q + (r[0] * d0 + r[S.capacity] * d1 + r[2 * S.capacity] * d2);
    }
    num += (double)(weight * q);
    den += (double)weight;
}

// Index of the lowest set bit of m ≠ 0.
__device__ __forceinline__ int lowest_bit(unsigned int m)
{
#ifdef __CUDA_ARCH__
    return __ffs((int)m) - 1;
#else
    return __builtin_ctz(m);
#endif
}

// The cells' masks (`filter`): a particle of cell c is regular when its floors are those
// of its cell (own lattice: c; half-shifted: c − 1 or c, each axis); then along a
// half-shifted axis it reaches node c + 1 only when its floor there is c ("up") and node
// c − 1 only when it is c − 1, while the own axis' two nodes (offsets −1, 0) and node c
// are always reached. Per cell of ≤ 32 particles, in its spare entry: bases = the
// irregular ones (clamped into a closed box: always visited), f_own[a] (as bits) = the up
// ones along a and the irregular ones. A node then skips the particles these say it does
// not reach (about half of its visits) and visits the rest in order: the same terms.
__device__ void cell_masks(const int* pre, int q_hi, const Staged& S)
{
    int* const up = reinterpret_cast<int*>(S.f_own);
    for (int q = S.q_lo + threadIdx.x; q < q_hi; q += blockDim.x) {
        const int n = pre[q + 1] - pre[q], first = pre[q] + (q - S.q_lo) - S.lo;
        if (n > 32) continue;  // visited in full
        const int cell[3] = {q % 10 - 1, (q / 10) % 10 - 1, q / 100 - 1};
        unsigned int irregular = 0u, ups[3] = {0u, 0u, 0u};
        for (int j = 0; j < n; ++j) {
            const int bits = S.bases[first + j];
            bool regular = true;
            for (int a = 0; a < 3; ++a) {
                const int own = ((bits >> (4 * a)) & 15) - 2, half = ((bits >> (4 * (a + 3))) & 15) - 2;
                regular = regular && own == cell[a] && (half == cell[a] || half == cell[a] - 1);
                if (half == cell[a]) ups[a] |= 1u << j;
            }
            if (!regular) irregular |= 1u << j;
        }
        S.bases[first + n] = (int)irregular;
        for (int a = 0; a < 3; ++a) up[a * S.capacity + first + n] = (int)(ups[a] | irregular);
    }
}

// Component comp of local node l from the staged particles: gather_cell's sum for comp.
__device__ void staged_face(const GatherFrame& F, const long long brick[3], const int* pre, const Staged& S, int comp,
                            int l, float* __restrict__ out, unsigned char* __restrict__ valid)
{
    const int lc[3] = {l & 7, (l >> 3) & 7, l >> 6};
    const long long node[3] = {brick[0] + lc[0], brick[1] + lc[1], brick[2] + lc[2]};
    bool has = true;  // closed: the face lattice (n + 1 along comp, n across)
    if (F.closed)
        for (int b = 0; b < 3; ++b) has = has && node[b] >= 0 && node[b] < F.n[b] + (comp == b);
    double num = 0.0, den = 0.0;
    if (has) {
        const float node_f[3] = {(float)node[0], (float)node[1], (float)node[2]};
        const int* const up = reinterpret_cast<const int*>(S.f_own);
        for (int dz = -1; dz <= 1; ++dz)
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    const int d[3] = {dx, dy, dz};
                    if ((comp == 0 ? dx : comp == 1 ? dy : dz) > 0) continue;  // both its nodes past the face
                    const int q = halo_index(lc[0] + dx, lc[1] + dy, lc[2] + dz);
                    const int shift = q - S.q_lo - S.lo, first = pre[q] + shift, end = pre[q + 1] + shift;
                    if (S.filter && end - first <= 32) {
                        unsigned int m = end - first == 32 ? 0xffffffffu : (1u << (end - first)) - 1u;
                        const unsigned int irregular = (unsigned int)S.bases[end];
                        for (int a = 0; a < 3; ++a) {
                            if (a == comp || d[a] == 0) continue;
                            const unsigned int ups = (unsigned int)up[a * S.capacity + end];
                            m &= d[a] < 0 ? ups : (~ups | irregular);
                        }
                        while (m) {
                            const int j = lowest_bit(m);
                            m &= m - 1u;
                            staged_visit(F, S, comp, lc, node_f, first + j, num, den);
                        }
                    } else {
                        for (int s = first; s < end; ++s) staged_visit(F, S, comp, lc, node_f, s, num, den);
                    }
                }
    }
    const bool ok = den > 0.0;
    *out = ok ? (float)(num / den) : 0.0f;
    *valid = ok;
}

// One thread block per pool slot (VOXFX_SPARSE_GATHER=staged; grid = slots, block of up to
// STAGED_THREADS threads, 192·slab for one (component, node) item a thread; dynamic shared
// memory for `capacity` staged entries; `filter`: skip by the cells' masks, cell_masks):
// p2g_gather_brick's bits.
extern "C" __global__ void __launch_bounds__(STAGED_THREADS)
    p2g_gather_staged(const float* __restrict__ spos, const float* __restrict__ svel, const float* __restrict__ sc,
                      int apic, const int* __restrict__ start, const int* __restrict__ count,
                      const unsigned char* __restrict__ used, const int* __restrict__ coords,
                      const int* __restrict__ nbr27, long long cells, int closed, int nx, int ny, int nz, float ox,
                      float oy, float oz, float h, float inv_h, float* __restrict__ u, float* __restrict__ v,
                      float* __restrict__ w, unsigned char* __restrict__ valid_u,
                      unsigned char* __restrict__ valid_v, unsigned char* __restrict__ valid_w, int slab,
                      int capacity, int filter)
{
    GATHER_SHARED(shared);
    const int slot = (int)blockIdx.x;
    if ((long long)slot * SPARSE_CELLS >= cells) return;
    const long long cell0 = (long long)slot * SPARSE_CELLS;
    if (!used[slot]) {  // a free slot (the same for the whole block): no faces
        for (long long t = cell0 + threadIdx.x; t < cell0 + SPARSE_CELLS; t += blockDim.x) {
            u[t] = v[t] = w[t] = 0.0f;
            valid_u[t] = valid_v[t] = valid_w[t] = 0;
        }
        return;
    }
    int* const first = shared;
    int* const pre = first + GATHER_HALO;
    int* const part = pre + GATHER_HALO + 1;
    Staged S;
    S.capacity = capacity;
    S.filter = filter;
    S.bases = part + STAGE_PARTS;
    S.f_own = reinterpret_cast<float*>(S.bases + capacity);
    S.f_half = S.f_own + 3 * capacity;
    S.vel = S.f_half + 3 * capacity;
    S.g = S.vel + 3 * capacity;  // APIC only
    S.c = S.g + 3 * capacity;
    for (int q = threadIdx.x; q < GATHER_HALO; q += blockDim.x) {  // the halo's spans; counts in pre for now
        const int cell = sparse_cell_near(nbr27, slot, q % 10 - 1, (q / 10) % 10 - 1, q / 100 - 1);
        first[q] = cell < 0 ? 0 : start[cell];
        pre[q] = cell < 0 ? 0 : count[cell];
    }
    __syncthreads();
    halo_prefix(pre, part);
    const GatherFrame F = {apic, closed, {nx, ny, nz}, {ox, oy, oz}, h, inv_h};
    const long long brick[3] = {8LL * coords[3 * slot], 8LL * coords[3 * slot + 1], 8LL * coords[3 * slot + 2]};
    const int per_comp = 64 * slab;
    for (int z0 = 0; z0 < 8;) {
        int s = min(slab, 8 - z0);
        while (s > 1 && staged_entries(pre, 100 * z0, 100 * (z0 + s + 2)) > capacity) s >>= 1;
        S.q_lo = 100 * z0;
        S.lo = pre[S.q_lo];
        if (staged_entries(pre, S.q_lo, S.q_lo + 300) > capacity) {  // one layer does not fit: from global memory
            const PrefixSpan span = {first, pre};
            for (int l = threadIdx.x; l < 64; l += blockDim.x)
                gather_cell(spos, svel, sc, F, coords, slot, true, cell0 + 64 * z0 + l, span, u, v, w, valid_u,
                            valid_v, valid_w);
            z0 += 1;
            continue;
        }
        stage_particles(spos, svel, sc, F, brick, first, pre, 100 * (z0 + s + 2), S);
        __syncthreads();
        if (filter) {
            cell_masks(pre, 100 * (z0 + s + 2), S);
            __syncthreads();
        }
        for (int item = threadIdx.x; item < 3 * per_comp; item += blockDim.x) {
            const int comp = item / per_comp, j = item - comp * per_comp;
            const long long at = cell0 + 64 * z0 + j;
            if (j < 64 * s)
                staged_face(F, brick, pre, S, comp, 64 * z0 + j, (comp == 0 ? u : comp == 1 ? v : w) + at,
                            (comp == 0 ? valid_u : comp == 1 ? valid_v : valid_w) + at);
        }
        __syncthreads();
        z0 += s;
    }
}

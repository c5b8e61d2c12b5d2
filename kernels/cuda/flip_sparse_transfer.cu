// The sparse FLIP solver's stages on bricks (seed 003 §5–7; kernels/flip/sparse_gpu.py
// launches them, kernels/flip/sparse_transfer.py and sparse_grid.py are the NumPy
// reference, mirrored term by term; compiled with --fmad=false so each float operation
// rounds as NumPy's does).
//
// Layout (kernels/grid/sparse_mac.py): every channel is flat over the pool, cell
// slot·512 + (lz·8 + ly)·8 + lx; a cell keeps the faces on its low sides. The brick tables
// (built once per topology by sparse.cu's brick_tables):
//   coords[3·slot]    brick coordinates of each pool slot (free slots: not read)
//   nbr27[27·slot + sparse_offset_index(dx, dy, dz)]  slot of the brick at offset
//                     (dx, dy, dz) ∈ {−1, 0, 1}³ (voxfx_sparse.cuh)
// so a stencil crosses a brick border with one table read, and a point finds its brick by a
// binary search on the sorted keys only when it lies beyond the bricks next to a known one.
// G2P and advection are flip_sparse_g2p.cu's; the topology's marking pipeline is
// flip_sparse_topology.cu's.
//
// Constants from Python (-D): AIR, FLUID, SOLID (kernels/grid/mac.py), PUSH_EPSILON
// (kernels/flip/particles.py).

#include "voxfx_bin.cuh"  // the scatter's |q| bound, warp and block sums and scans
#include "voxfx_cell_type.cuh"  // sparse_cell_type: classify_counts_sparse's cell
#include "voxfx_sparse.cuh"  // keys, slots, binary search
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS, INDEXED_SLOT: a closed domain's brick index
#include "voxfx_sparse_marks.cuh"  // sparse_store_wall_marks: mark_walls' cell

// One thread per key: its slot into the table (filled with −1 first); keys outside it skipped.
extern "C" __global__ void brick_index_fill(const long long* __restrict__ keys, const int* __restrict__ slots,
                                           long long n_keys, int* __restrict__ index, int lx, int ly, int lz,
                                           int dx, int dy, int dz)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_keys) return;
    long long x, y, z;  // the brick's place in the table
    sparse_brick_of_key(keys[t], x, y, z, lx, ly, lz);
    if (x >= 0 && x < dx && y >= 0 && y < dy && z >= 0 && z < dz) index[(z * dy + y) * dx + x] = slots[t];
}

// ------------------------------------------------------------------------------ marks

// SparseFlipGrid.update's marks: the faces that exist (a closed domain's face lattices, all
// active faces when open), the wall ring beyond a closed domain, and solid = wall.
extern "C" __global__ void mark_walls(const unsigned char* __restrict__ used, const int* __restrict__ coords,
                                      long long cells, int closed, int nx, int ny, int nz,
                                      unsigned char* __restrict__ exists_u, unsigned char* __restrict__ exists_v,
                                      unsigned char* __restrict__ exists_w, unsigned char* __restrict__ wall,
                                      unsigned char* __restrict__ solid)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    sparse_store_wall_marks(used, coords, t, closed, nx, ny, nz, exists_u, exists_v, exists_w, wall, solid);
}

// ------------------------------------------------------------------------------ binning (seed 003 §6)

// Counting sort by pool cell, step 1 (then flip_transfer.cu's place_particles,
// sort_cell_segments, copy_sorted_particles): each particle's cell ⌊(x − o)/h⌋ in the pool
// and its rank there; a particle without an active cell (or not finite) goes to the extra
// cell `cells`, which no stage reads. Zero count (cells + 1) first. The gathers that read
// the sorted particles are flip_sparse_gather.cu's and flip_sparse_gather_staged.cu's.
// Particle p's pool cell, or `cells` (module notes above).
__device__ __forceinline__ long long bin_cell(const float* __restrict__ pos, long long p, float ox, float oy,
                                              float oz, float inv_h, const long long* __restrict__ keys,
                                              const int* __restrict__ slots, long long n_keys, BRICK_INDEX_ARGS,
                                              long long cells)
{
    const float gx = (pos[3 * p] - ox) * inv_h, gy = (pos[3 * p + 1] - oy) * inv_h, gz = (pos[3 * p + 2] - oz) * inv_h;
    long long c = cells;
    if (isfinite(gx) && isfinite(gy) && isfinite(gz)) {
        const long long i = (long long)floorf(gx), j = (long long)floorf(gy), k = (long long)floorf(gz);
        const int s = INDEXED_SLOT(i >> 3, j >> 3, k >> 3);
        if (s >= 0) c = (long long)s * SPARSE_CELLS + sparse_local(i, j, k);
    }
    return c;
}

extern "C" __global__ void count_particles_sparse(const float* __restrict__ pos, long long n, float ox, float oy,
                                                  float oz, float inv_h, const long long* __restrict__ keys,
                                                  const int* __restrict__ slots, long long n_keys, BRICK_INDEX_ARGS,
                                                  long long cells, int* __restrict__ count, int* __restrict__ cell_of,
                                                  int* __restrict__ rank)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const long long c = bin_cell(pos, p, ox, oy, oz, inv_h, keys, slots, n_keys, index, index_lx, index_ly, index_lz,
                                 index_dx, index_dy, index_dz, cells);
    cell_of[p] = (int)c;
    rank[p] = atomicAdd(count + c, 1);
}

// The scatter's binning (sparse_gpu.bin_particles_order), step 1: count_particles_sparse
// with the scatter's bound on |q| fused in (flip_sparse_scatter.cu's scatter_bounds, the
// same bits: a max does not depend on the order): per warp the max of scatter_q_bits, one
// atomicMax into bounds[0] where it beats the value there (bounds zeroed first).
// bounds[1], the max particles a cell, comes from the scan (bin_scan_sums). Then
// bin_scan_sums + bin_scan (start), flip_transfer.cu's place_particles (order); no
// per-cell sort and no sorted copies: the scatter reads the particles through order.
// H200, 8M particles: 0.162 ms against count_particles_sparse's 0.103 + scatter_bounds' 0.040
// (the fusion saves a launch, not time); the scan 0.031 against cupy.cumsum's 0.049.
extern "C" __global__ void count_particles_bounds(const float* __restrict__ pos, const float* __restrict__ vel,
                                                  const float* __restrict__ c, int apic, long long n, float ox,
                                                  float oy, float oz, float inv_h, float h,
                                                  const long long* __restrict__ keys, const int* __restrict__ slots,
                                                  long long n_keys, BRICK_INDEX_ARGS, long long cells,
                                                  int* __restrict__ count, int* __restrict__ cell_of,
                                                  int* __restrict__ rank, unsigned int* __restrict__ bounds)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float q = 0.0f;
    if (p < n) {
        const long long cell = bin_cell(pos, p, ox, oy, oz, inv_h, keys, slots, n_keys, index, index_lx, index_ly,
                                        index_lz, index_dx, index_dy, index_dz, cells);
        cell_of[p] = (int)cell;
        rank[p] = atomicAdd(count + cell, 1);
        q = scatter_q_bound(vel, c, apic, p, h);
    }
    bin_warp_q_max(q, bounds);  // voxfx_bin.cuh; every lane present: no return above
}

// count_particles_bounds with the count's atomics grouped by warp (sparse_gpu.bin_count_mode
// "grouped", helper i24y): the lanes whose particles share a cell (neighbours in the
// particles' own order: seeded cell by cell, they stay together) take one atomicAdd for the
// group, and each lane its rank from the group's base and its place among the group's
// lanes (warp_grouped_rank). The same counts and bounds; the ranks another order within each
// cell (which the order binning leaves to the atomics anyway). Every lane reaches the warp
// functions (no return before them).
extern "C" __global__ void count_particles_grouped(const float* __restrict__ pos, const float* __restrict__ vel,
                                                   const float* __restrict__ c, int apic, long long n, float ox,
                                                   float oy, float oz, float inv_h, float h,
                                                   const long long* __restrict__ keys, const int* __restrict__ slots,
                                                   long long n_keys, BRICK_INDEX_ARGS, long long cells,
                                                   int* __restrict__ count, int* __restrict__ cell_of,
                                                   int* __restrict__ rank, unsigned int* __restrict__ bounds)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float q = 0.0f;
    long long cell = -1;
    if (p < n) {
        cell = bin_cell(pos, p, ox, oy, oz, inv_h, keys, slots, n_keys, index, index_lx, index_ly, index_lz, index_dx,
                        index_dy, index_dz, cells);
        cell_of[p] = (int)cell;
        q = scatter_q_bound(vel, c, apic, p, h);
    }
    const int r = warp_grouped_rank(count, cell);  // voxfx_reduce.cuh
    if (p < n) rank[p] = r;
    bin_warp_q_max(q, bounds);
}

// Step 2, the exclusive scan of count (n = cells + 1 entries) in two launches over tiles of
// `tile` entries: sums[b] = Σ of tile b, and bounds[1] = max count over the pool's cells
// (i < cells: the last bin, particles without an active cell, is not scattered).
extern "C" __global__ void bin_scan_sums(const int* __restrict__ count, int n, int tile, int cells,
                                         int* __restrict__ sums, unsigned int* __restrict__ bounds)
{
    const int lo = (int)blockIdx.x * tile, hi = min(n, lo + tile);
    int sum = 0;
    unsigned int most = 0u;
    for (int i = lo + (int)threadIdx.x; i < hi; i += (int)blockDim.x) {
        const int k = count[i];
        sum += k;
        if (i < cells) most = max(most, (unsigned int)max(k, 0));
    }
    bin_block_sum_max(sum, most);
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = sum;
        if (most) atomicMax(bounds + 1, most);
    }
}

// start[i] = Σ count[0..i) from the earlier tiles' sums and a block scan of the tile.
extern "C" __global__ void bin_scan(const int* __restrict__ count, int n, int tile, const int* __restrict__ sums,
                                    int* __restrict__ start)
{
    int carry = 0;
    unsigned int unused = 0u;
    for (int t = (int)threadIdx.x; t < (int)blockIdx.x; t += (int)blockDim.x) carry += sums[t];
    bin_block_sum_max(carry, unused);
    const int lo = (int)blockIdx.x * tile, hi = min(n, lo + tile);
    for (int at = lo; at < hi; at += (int)blockDim.x) {  // the same trip count in every thread
        const int i = at + (int)threadIdx.x;
        const int v = i < hi ? count[i] : 0;
        int chunk;
        const int x = bin_block_inclusive(v, chunk);
        if (i < hi) start[i] = carry + x - v;
        carry += chunk;
    }
}

// ------------------------------------------------------------------------------ cell types, boundaries

// sparse_transfer.classify, step 1: SOLID where solid, else AIR.
extern "C" __global__ void cells_from_solid_sparse(const unsigned char* __restrict__ solid,
                                                   unsigned char* __restrict__ cell, long long cells)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < cells) cell[t] = solid[t] ? SOLID : AIR;
}

// Step 2: every particle in an active cell (closed: inside the box) marks it FLUID unless
// it is solid (all writers store the same value).
extern "C" __global__ void mark_fluid_sparse(const float* __restrict__ pos, long long n, float ox, float oy, float oz,
                                             float inv_h, int closed, int nx, int ny, int nz,
                                             const long long* __restrict__ keys, const int* __restrict__ slots,
                                             long long n_keys, const unsigned char* __restrict__ solid,
                                             unsigned char* __restrict__ cell)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const float gx = (pos[3 * p] - ox) * inv_h, gy = (pos[3 * p + 1] - oy) * inv_h, gz = (pos[3 * p + 2] - oz) * inv_h;
    if (!(isfinite(gx) && isfinite(gy) && isfinite(gz))) return;
    const long long i = (long long)floorf(gx), j = (long long)floorf(gy), k = (long long)floorf(gz);
    if (closed && !(i >= 0 && i < nx && j >= 0 && j < ny && k >= 0 && k < nz)) return;
    const int s = sparse_slot(keys, slots, n_keys, sparse_key_of_voxel(i, j, k));
    if (s < 0) return;
    const long long c = (long long)s * SPARSE_CELLS + sparse_local(i, j, k);
    if (!solid[c]) cell[c] = FLUID;
}

// classify in one pass over the pool from the binning (bin_particles' count per pool cell:
// count_particles_sparse puts a particle in the cell ⌊(x − o)/h⌋ that mark_fluid_sparse
// marks, finite and active alike): FLUID where the cell holds a particle, is not solid and
// (closed) lies inside the box; else SOLID where solid, AIR elsewhere. No pass over the
// particles and no brick search per particle.
extern "C" __global__ void classify_counts_sparse(const int* __restrict__ count,
                                                  const unsigned char* __restrict__ solid,
                                                  const int* __restrict__ coords, long long cells, int closed,
                                                  int nx, int ny, int nz, unsigned char* __restrict__ cell)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    cell[t] = sparse_cell_type(count, solid, coords, t, closed, nx, ny, nz);  // voxfx_cell_type.cuh
}

// sparse_transfer.enforce_boundaries with the body force fused (sim's gravity step): every
// face adds add_u/v/w when `add` (the reference adds to every face, then overwrites the
// boundary faces: the same values), and a face with a solid cell on either side, or that
// does not exist, takes the solid's velocity (walls 0).
extern "C" __global__ void enforce_boundaries_sparse(float* __restrict__ u, float* __restrict__ v,
                                                     float* __restrict__ w, const float* __restrict__ solid_u,
                                                     const float* __restrict__ solid_v,
                                                     const float* __restrict__ solid_w,
                                                     const unsigned char* __restrict__ solid,
                                                     const unsigned char* __restrict__ exists_u,
                                                     const unsigned char* __restrict__ exists_v,
                                                     const unsigned char* __restrict__ exists_w,
                                                     const int* __restrict__ nbr27, long long cells, int add,
                                                     float add_u, float add_v, float add_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    float* const face[3] = {u, v, w};
    const float* const fixed[3] = {solid_u, solid_v, solid_w};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    const float force[3] = {add_u, add_v, add_w};
    const bool here = solid[t] != 0;
    for (int a = 0; a < 3; ++a) {
        const int lo = sparse_cell_step(nbr27, (int)t, 2 * a);
        if (here || (lo >= 0 && solid[lo]) || !exists[a][t]) face[a][t] = fixed[a][t];
        else if (add) face[a][t] = face[a][t] + force[a];
    }
}

// sparse_transfer.fluid_faces: faces with a FLUID cell on either side.
extern "C" __global__ void fluid_faces_sparse(const unsigned char* __restrict__ cell, const int* __restrict__ nbr27,
                                              long long cells, unsigned char* __restrict__ valid_u,
                                              unsigned char* __restrict__ valid_v, unsigned char* __restrict__ valid_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    for (int a = 0; a < 3; ++a) {
        const int lo = sparse_cell_step(nbr27, (int)t, 2 * a);
        valid[a][t] = cell[t] == FLUID || (lo >= 0 && cell[lo] == FLUID);
    }
}

// One face of one ring of sparse_transfer.extrapolate (component arrays src, mask, exists;
// nb the cell's six neighbours): a face that exists and is not valid, with valid neighbours
// (−x, +x, −y, +y, −z, +z, summed in that order), takes their mean and becomes valid; the
// value into dst[t] and whether it is valid (and exists) after the ring into out[t]; returns the value.
// With `live` (the idle-brick way, sparse_transfer.P2G_TAILS "live"), a neighbour in an idle brick
// (live[slot] == 0) counts as invalid without its mask being read: its cells hold no valid face
// (brick_live_sparse's notes), and the rings leave them unwritten.
template <bool LIVE>
__device__ __forceinline__ float sparse_extrapolate_face_in(const float* src, const unsigned char* mask,
                                                           const unsigned char* exists, const int* nb, long long t,
                                                           float* dst, unsigned char* out,
                                                           const unsigned char* live)
{
    const bool here = mask[t] && exists[t];
    float value = src[t];
    bool grow = false;
    if (!here && exists[t]) {
        float total = 0.0f;
        int count = 0;
        for (int d = 0; d < 6; ++d)
            if (nb[d] >= 0 && (!LIVE || live[nb[d] >> 9]) && mask[nb[d]] && exists[nb[d]]) {
                total += src[nb[d]];
                ++count;
            }
        if (count) {
            value = total / (float)count;
            grow = true;
        }
    }
    dst[t] = value;
    out[t] = here || grow;
    return value;
}

__device__ __forceinline__ float sparse_extrapolate_face(const float* src, const unsigned char* mask,
                                                        const unsigned char* exists, const int* nb, long long t,
                                                        float* dst, unsigned char* out)
{
    return sparse_extrapolate_face_in<false>(src, mask, exists, nb, t, dst, out, nullptr);
}

// One ring of sparse_transfer.extrapolate at pool cell t for the three components (sparse_extrapolate_face;
// valid means valid and existing): extrapolate_sparse's cell (IDLE 0), and for P2G_TAILS "live"
// (voxfx_sparse_live.cuh) with the idle bricks skipped, a neighbour there counting as invalid unread (1:
// extrapolate_live_sparse), or copied, src's value and mask 0 (2: extrapolate_copy_live_sparse).
template <int IDLE>
__device__ __forceinline__ void extrapolate_ring_cell(
    const float* __restrict__ su, const float* __restrict__ sv, const float* __restrict__ sw,
    const unsigned char* __restrict__ mu, const unsigned char* __restrict__ mv, const unsigned char* __restrict__ mw,
    const unsigned char* __restrict__ exists_u, const unsigned char* __restrict__ exists_v,
    const unsigned char* __restrict__ exists_w, const int* __restrict__ nbr27, long long cells, float* __restrict__ du,
    float* __restrict__ dv, float* __restrict__ dw, unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
    unsigned char* __restrict__ nw, const unsigned char* __restrict__ live)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells || (IDLE == 1 && !live[t >> 9])) return;
    const float* const src[3] = {su, sv, sw};
    float* const dst[3] = {du, dv, dw};
    unsigned char* const out[3] = {nu, nv, nw};
    if (IDLE == 2 && !live[t >> 9]) {
        for (int a = 0; a < 3; ++a) {
            dst[a][t] = src[a][t];
            out[a][t] = 0;
        }
        return;
    }
    const unsigned char* const mask[3] = {mu, mv, mw};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    int nb[6];
    for (int d = 0; d < 6; ++d) nb[d] = sparse_cell_step(nbr27, (int)t, d);
    for (int a = 0; a < 3; ++a) {
        if (IDLE == 1)
            sparse_extrapolate_face_in<true>(src[a], mask[a], exists[a], nb, t, dst[a], out[a], live);
        else
            sparse_extrapolate_face(src[a], mask[a], exists[a], nb, t, dst[a], out[a]);
    }
}

// One ring of sparse_transfer.extrapolate for the three components (sparse_extrapolate_face);
// valid means valid and existing.
extern "C" __global__ void extrapolate_sparse(const float* __restrict__ su, const float* __restrict__ sv,
                                              const float* __restrict__ sw, const unsigned char* __restrict__ mu,
                                              const unsigned char* __restrict__ mv,
                                              const unsigned char* __restrict__ mw,
                                              const unsigned char* __restrict__ exists_u,
                                              const unsigned char* __restrict__ exists_v,
                                              const unsigned char* __restrict__ exists_w,
                                              const int* __restrict__ nbr27, long long cells, float* __restrict__ du,
                                              float* __restrict__ dv, float* __restrict__ dw,
                                              unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
                                              unsigned char* __restrict__ nw)
{
    extrapolate_ring_cell<0>(su, sv, sw, mu, mv, mw, exists_u, exists_v, exists_w, nbr27, cells, du, dv, dw, nu, nv, nw,
                             nullptr);
}

// extrapolate_boundaries_sparse's cell, and (LIVE, P2G_TAILS "live": voxfx_sparse_live.cuh's
// extrapolate_boundaries_live_sparse) the same with an idle brick's cells written without reading them:
// P2G's 0, invalid, the old face 0 and the boundaries of a 0 face (only the −x, −y, −z neighbours, which
// the boundaries read, found there).
template <bool LIVE>
__device__ __forceinline__ void extrapolate_boundaries_cell(
    const float* __restrict__ su, const float* __restrict__ sv, const float* __restrict__ sw,
    const unsigned char* __restrict__ mu, const unsigned char* __restrict__ mv, const unsigned char* __restrict__ mw,
    const unsigned char* __restrict__ exists_u, const unsigned char* __restrict__ exists_v,
    const unsigned char* __restrict__ exists_w, const int* __restrict__ nbr27, long long cells,
    const float* __restrict__ solid_u, const float* __restrict__ solid_v, const float* __restrict__ solid_w,
    const unsigned char* __restrict__ solid, int add, float add_u, float add_v, float add_w,
    float* __restrict__ old_u, float* __restrict__ old_v, float* __restrict__ old_w, float* __restrict__ du,
    float* __restrict__ dv, float* __restrict__ dw, unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
    unsigned char* __restrict__ nw, const unsigned char* __restrict__ live)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    const float* const src[3] = {su, sv, sw};
    const unsigned char* const mask[3] = {mu, mv, mw};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    const float* const fixed[3] = {solid_u, solid_v, solid_w};
    const float force[3] = {add_u, add_v, add_w};
    float* const old[3] = {old_u, old_v, old_w};
    float* const dst[3] = {du, dv, dw};
    unsigned char* const out[3] = {nu, nv, nw};
    const bool busy = !LIVE || live[t >> 9] != 0;
    int nb[6];
    for (int d = 0; d < 6; ++d) nb[d] = busy || (d & 1) == 0 ? sparse_cell_step(nbr27, (int)t, d) : -1;
    const bool here = solid[t] != 0;
    for (int a = 0; a < 3; ++a) {
        float value = 0.0f;  // LIVE, an idle cell: P2G's 0, invalid through the rings
        if (!LIVE)
            value = sparse_extrapolate_face(src[a], mask[a], exists[a], nb, t, old[a], out[a]);
        else if (busy)
            value = sparse_extrapolate_face_in<true>(src[a], mask[a], exists[a], nb, t, old[a], out[a], live);
        else {
            old[a][t] = value;
            out[a][t] = 0;
        }
        const int lo = nb[2 * a];  // sparse_cell_step(nbr27, t, 2·a), as enforce_boundaries_sparse
        if (here || (lo >= 0 && solid[lo]) || !exists[a][t]) dst[a][t] = fixed[a][t];
        else dst[a][t] = add ? value + force[a] : value;
    }
}

// The P2G stage's tail in one pass (sparse_transfer.extrapolate_and_boundaries; helper i24a):
// the last ring of extrapolate_sparse, its faces written twice: as they are into old_u/v/w
// (the FLIP update's old velocity, the copy the sim took) and through
// enforce_boundaries_sparse (add_u/v/w added when `add`, a face with a solid cell on either
// side or that does not exist takes the solid's velocity) into du/dv/dw, with the ring's masks.
// The same operations in the same order as the three steps apart, so the same bits; it
// replaces a ring, three copies and the boundaries' launch (their reads of the faces and
// exists).
extern "C" __global__ void extrapolate_boundaries_sparse(
    const float* __restrict__ su, const float* __restrict__ sv, const float* __restrict__ sw,
    const unsigned char* __restrict__ mu, const unsigned char* __restrict__ mv, const unsigned char* __restrict__ mw,
    const unsigned char* __restrict__ exists_u, const unsigned char* __restrict__ exists_v,
    const unsigned char* __restrict__ exists_w, const int* __restrict__ nbr27, long long cells,
    const float* __restrict__ solid_u, const float* __restrict__ solid_v, const float* __restrict__ solid_w,
    const unsigned char* __restrict__ solid, int add, float add_u, float add_v, float add_w,
    float* __restrict__ old_u, float* __restrict__ old_v, float* __restrict__ old_w, float* __restrict__ du,
    float* __restrict__ dv, float* __restrict__ dw, unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
    unsigned char* __restrict__ nw)
{
    extrapolate_boundaries_cell<false>(su, sv, sw, mu, mv, mw, exists_u, exists_v, exists_w, nbr27, cells, solid_u,
                                       solid_v, solid_w, solid, add, add_u, add_v, add_w, old_u, old_v, old_w, du, dv,
                                       dw, nu, nv, nw, nullptr);
}

#include "voxfx_sparse_live.cuh"  // the idle-brick kernels (P2G_TAILS "live"): brick_live_sparse, …

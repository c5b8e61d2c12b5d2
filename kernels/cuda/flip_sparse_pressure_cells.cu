// The sparse pressure solve's set-up in four launches over the flat cells of a
// SparseFlipGrid (issue 24: it was ~4 ms of CuPy array code at 8M particles): the
// right-hand side b = −(h/Δt)·D (seed 003 §8), the "touches AIR" flag, and the sealed-region
// labels — each FLUID cell's 6-connected component, labelled by its lowest flat index — by a
// union-find straight on the flat cells (no compaction). kernels/flip/sparse_pressure.py
// (pressure_rhs, solver_cells, label_components) is the reference these kernels follow
// operation by operation; the module is compiled without FMA contraction, so b rounds as
// NumPy rounds it. Launched by kernels/flip/sparse_pressure_cells.py.
//
// Layout: flat cells c in [0, n); nbr[d·n + c] (d = −x, +x, −y, +y, −z, +z) the neighbour's
// flat index or −1 (a missing neighbour: its values read 0, its cell is AIR). Constants from
// Python as -D options: CELL_AIR, CELL_FLUID.

#include "voxfx_sparse.cuh"          // sparse_cell_step (project_faces_fluid)
#include "voxfx_pressure_cells.cuh"  // boundary_face, find_root_halving, unite

#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// The boundary face of the cell above c along axis a (nbr row 2a + 1), 0 where it is missing
// (grid.neighbour's fill).
__device__ __forceinline__ float face_above(const float* __restrict__ f, const float* __restrict__ solid_f,
                                            const unsigned char* __restrict__ exists,
                                            const unsigned char* __restrict__ solid, const int* __restrict__ nbr,
                                            int n, int c, int a)
{
    const int up = nbr[(size_t)(2 * a + 1) * n + c];
    if (up < 0) return 0.0f;
    return boundary_face(f, solid_f, exists, solid, up, nbr[(size_t)(2 * a) * n + up]);
}

// Per cell: b = D·scale on FLUID cells, 0 elsewhere, D the outgoing minus incoming face
// velocities added x, y, then z (sparse_pressure.face_sum); touch = a FLUID cell with a
// missing or AIR neighbour; parent = c (every cell its own root before cells_hook) or, with
// link_init, a FLUID cell's lowest FLUID neighbour below its own index (a union cells_hook
// need not make: shallower trees, fewer hooks and CAS retries; parents still point down).
// With crowd_on (the density correction, kernels/flip/density.py), a FLUID cell's b adds
// src_scale·s, s = max(crowd[c]·inv_n0 − one_tau, 0)·alpha_dt from its particle count
// (density.source then pressure_rhs's b + (h²/Δt)·s, the same float32 operations in order).
// reach (n + 1 bytes) and count (one int) are zeroed here for cells_label and cells_sealed, which
// run after it: the two cupy.zeros memsets (and their launches) folded into this pass (h21f).
extern "C" __global__ void cells_rhs(const unsigned char* __restrict__ cell, const unsigned char* __restrict__ solid,
                                     const float* __restrict__ u, const float* __restrict__ v,
                                     const float* __restrict__ w, const float* __restrict__ solid_u,
                                     const float* __restrict__ solid_v, const float* __restrict__ solid_w,
                                     const unsigned char* __restrict__ exists_u,
                                     const unsigned char* __restrict__ exists_v,
                                     const unsigned char* __restrict__ exists_w, const int* __restrict__ nbr, int n,
                                     float scale, int link_init, float* __restrict__ b,
                                     unsigned char* __restrict__ touch, int* __restrict__ parent,
                                     const int* __restrict__ crowd, int crowd_on, float inv_n0, float one_tau,
                                     float alpha_dt, float src_scale, unsigned char* __restrict__ reach,
                                     int* __restrict__ count)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // cells_label's reach has n + 1 entries; cells_sealed counts from 0
        reach[n] = 0;
        *count = 0;
    }
    RANGE(c, 0, n)
    {
        reach[c] = 0;  // cupy.zeros' values, written here: no memset launch before cells_label
        const bool fluid = cell[c] == CELL_FLUID;
        bool air = false;
        int low = c;
        for (int d = 0; d < 6; ++d) {
            const int o = nbr[(size_t)d * n + c];
            air = air || o < 0 || cell[o] == CELL_AIR;
            if (link_init && fluid && o >= 0 && o < low && cell[o] == CELL_FLUID) low = o;
        }
        parent[c] = low;
        touch[c] = fluid && air;
        if (!fluid) {
            b[c] = 0.0f;
            continue;
        }
        const float fu = boundary_face(u, solid_u, exists_u, solid, c, nbr[c]);
        const float fv = boundary_face(v, solid_v, exists_v, solid, c, nbr[(size_t)2 * n + c]);
        const float fw = boundary_face(w, solid_w, exists_w, solid, c, nbr[(size_t)4 * n + c]);
        const float du = face_above(u, solid_u, exists_u, solid, nbr, n, c, 0) - fu;
        const float dv = face_above(v, solid_v, exists_v, solid, nbr, n, c, 1) - fv;
        const float dw = face_above(w, solid_w, exists_w, solid, nbr, n, c, 2) - fw;
        float rhs = ((du + dv) + dw) * scale;
        if (crowd_on) {  // the density correction's source (density.py)
            const float excess = fmaxf((float)crowd[c] * inv_n0 - one_tau, 0.0f);
            rhs = rhs + src_scale * (excess * alpha_dt);
        }
        b[c] = rhs;
    }
}

// Union-find over the FLUID cells' +x, +y, +z links to FLUID neighbours (unite), so a root
// is its tree's lowest flat index.
extern "C" __global__ void cells_hook(const unsigned char* __restrict__ cell, const int* __restrict__ nbr, int n,
                                      int* parent)
{
    RANGE(c, 0, n)
    {
        if (cell[c] != CELL_FLUID) continue;
        for (int d = 1; d < 6; d += 2) {
            const int o = nbr[(size_t)d * n + c];
            if (o >= 0 && cell[o] == CELL_FLUID) unite(parent, c, o);
        }
    }
}

// cells_hook in two launches (sparse_pressure_cells.HOOK "bricks"): the links inside each 8³
// brick in shared memory, then those across brick faces on the flat cells. In one launch
// every link walks trees that span the liquid, a million cells hooking towards one root;
// here a brick's cells are joined to its own roots first (block-local atomics), so the
// global union-find sees 192 links a brick, not 1,536. The same roots: each component's
// lowest flat index, whatever the order of the unions. Flat cells are slot·512 + (lz·8 +
// ly)·8 + lx.

// One block a pool slot (n / 512 of them): each FLUID cell's parent its root among the
// brick's FLUID cells it links to inside the brick (+x, +y, +z neighbours in the same slot);
// the others keep cells_rhs's parent.
extern "C" __global__ void cells_hook_bricks(const unsigned char* __restrict__ cell, const int* __restrict__ nbr, int n,
                                             int* parent)
{
    __shared__ int up[512];
    __shared__ int any;
    const int first = (int)blockIdx.x * 512;
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x) {
        up[t] = t;
        if (cell[first + t] == CELL_FLUID) any = 1;
    }
    __syncthreads();
    if (!any) return;  // the whole block: any is shared
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x) {
        if (cell[first + t] != CELL_FLUID) continue;
        for (int d = 1; d < 6; d += 2) {
            const int o = nbr[(size_t)d * n + first + t];
            if (o >= first && o < first + 512 && cell[o] == CELL_FLUID) unite(up, t, o - first);
        }
    }
    __syncthreads();
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x)
        if (cell[first + t] == CELL_FLUID) parent[first + t] = first + find_root_halving(up, t);
}

// cells_hook_bricks without the neighbour table (sparse_pressure_cells.BRICK_LINKS "local"):
// a brick's inner links are its cells' +x, +y, +z neighbours at local + 1, + 8, + 64 (the pool
// layout above; sparse_cell_step gives exactly these inside an active slot and −1 in a free
// one), so the block reads its 512 cell bytes once into shared memory and no nbr rows.
// cells_hook_bricks reads nbr's three + rows (6 KiB a brick) and then cell[o] behind each,
// two dependent global reads a link; i24u's profile (8M dam break, H100): 0.080–0.087 ms over
// 3,564 blocks, ~0.65 TB/s — latency, not bandwidth. Here one global read of the brick's cells,
// then shared memory only: each cell's tree starts at the first FLUID cell of its run along x
// (the x links joined without atomics), then the y and z links by unite. One word of nbr (the
// brick's first cell's +x neighbour) tells an active slot's layout; any other value (a free
// slot, a table not of the pool's layout) takes cells_hook_bricks' links through nbr. The
// same roots (each in-brick component's lowest index) in any order of unions, so the same
// parents.
extern "C" __global__ void cells_hook_bricks_local(const unsigned char* __restrict__ cell,
                                                   const int* __restrict__ nbr, int n, int* parent)
{
    __shared__ int up[512];
    __shared__ unsigned char fluid[512];
    __shared__ int any;
    const int first = (int)blockIdx.x * 512;
    const bool pooled = nbr[(size_t)n + first] == first + 1;  // read beside the cells: no extra round trip
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x) {
        const bool f = cell[first + t] == CELL_FLUID;
        fluid[t] = f ? 1 : 0;
        if (f) any = 1;
    }
    __syncthreads();
    if (!any) return;  // the whole block: any is shared
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x) {
        int start = t;  // the first FLUID cell of t's run along x (t itself where not FLUID or not pooled)
        if (pooled && fluid[t])
            while ((start & 7) != 0 && fluid[start - 1]) --start;
        up[t] = start;
    }
    __syncthreads();
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x) {
        if (!fluid[t]) continue;
        if (pooled) {
            if (((t >> 3) & 7) != 7 && fluid[t + 8]) unite(up, t, t + 8);
            if ((t >> 6) != 7 && fluid[t + 64]) unite(up, t, t + 64);
            continue;
        }
        for (int d = 1; d < 6; d += 2) {
            const int o = nbr[(size_t)d * n + first + t];
            if (o >= first && o < first + 512 && fluid[o - first]) unite(up, t, o - first);
        }
    }
    __syncthreads();
    for (int t = (int)threadIdx.x; t < 512; t += (int)blockDim.x)
        if (fluid[t]) parent[first + t] = first + find_root_halving(up, t);
}

// The links across brick faces: per pool slot its 3 × 64 cells on the +x, +y and +z faces,
// each joined (unite) with its FLUID neighbour in the next brick (every other link of
// cells_hook lies inside a brick: a cell's +x neighbour is the next flat cell but on the face).
extern "C" __global__ void cells_hook_faces(const unsigned char* __restrict__ cell, const int* __restrict__ nbr, int n,
                                            int* parent)
{
    RANGE(s, 0, (n / 512) * 192)
    {
        const int slot = s / 192, axis = (s % 192) >> 6, q = s & 63;
        const int a = q & 7, b = q >> 3;  // the face's two other local coordinates, lower axis first
        const int local = axis == 0 ? (b * 8 + a) * 8 + 7 : axis == 1 ? (b * 8 + 7) * 8 + a : (7 * 8 + b) * 8 + a;
        const int c = slot * 512 + local;
        if (cell[c] != CELL_FLUID) continue;
        const int o = nbr[(size_t)(2 * axis + 1) * n + c];
        if (o >= 0 && cell[o] == CELL_FLUID) unite(parent, c, o);
    }
}

// label = the root of each FLUID cell (n elsewhere); reach[root] = 1 for the roots of cells
// that touch AIR (sparse_pressure.solver_cells: reaches[labels[touches]]).
extern "C" __global__ void cells_label(const unsigned char* __restrict__ cell, const unsigned char* __restrict__ touch,
                                       int n, int* parent, int* __restrict__ label,
                                       unsigned char* __restrict__ reach)
{
    RANGE(c, 0, n)
    {
        if (cell[c] != CELL_FLUID) {
            label[c] = n;
            continue;
        }
        const int root = find_root_halving(parent, c);
        label[c] = root;
        if (touch[c]) reach[root] = 1;
    }
}

// count[0] = FLUID cells whose component reaches no AIR (sealed), after cells_label, and the
// solver's cell types: kind[c] = cell[c], but AIR for each sealed region's pin, its lowest
// cell (label[c] = c; sparse_pressure.solver_cells) — so the unknowns need no host read of
// the count first.
extern "C" __global__ void cells_sealed(const unsigned char* __restrict__ cell, const int* __restrict__ label, int n,
                                        const unsigned char* __restrict__ reach, int* __restrict__ count,
                                        unsigned char* __restrict__ kind)
{
    RANGE(c, 0, n)
    {
        const bool sealed = cell[c] == CELL_FLUID && !reach[label[c]];
        if (sealed) atomicAdd(count, 1);
        kind[c] = sealed && label[c] == c ? (unsigned char)CELL_AIR : cell[c];
    }
}

// One cell's three faces of the projection (seed 003 §8; sparse_pressure.project): per axis a,
// the face below cell c (between c and lo, its neighbour along −a: nbr[2a·n + c], or with
// BRICKS sparse_cell_step(nbr, c, 2a) on the brick table nbr27, the same entries) takes
// u − (Δt/h)(p_c − p_lo) where c or lo is FLUID (p_lo = 0 where lo is missing), then the solid's
// velocity where it touches a SOLID cell or does not exist (boundary_face); with valid, also
// whether c or lo is FLUID (sparse_transfer.fluid_faces' mask of that face) into valid[a][c].
template <bool BRICKS>
__device__ __forceinline__ void project_cell(const unsigned char* __restrict__ cell,
                                             const unsigned char* __restrict__ solid, const float* const f[3],
                                             const float* const solid_f[3], const unsigned char* const exists[3],
                                             const int* __restrict__ nbr, int n, int c, const float* __restrict__ p,
                                             float dt_over_h, float* const out[3], unsigned char* const* valid)
{
    const bool fluid = cell[c] == CELL_FLUID;
    const float pc = p[c];
    for (int a = 0; a < 3; ++a) {
        const int lo = BRICKS ? sparse_cell_step(nbr, c, 2 * a) : nbr[(size_t)(2 * a) * n + c];
        float value = f[a][c];
        const bool touched = fluid || (lo >= 0 && cell[lo] == CELL_FLUID);
        if (touched)  // u* − (Δt/h)(p_hi − p_lo), rounded per operation
            value = value - dt_over_h * (pc - (lo >= 0 ? p[lo] : 0.0f));
        const bool solid_touch = solid[c] != 0 || (lo >= 0 && solid[lo] != 0) || exists[a][c] == 0;
        out[a][c] = solid_touch ? solid_f[a][c] : value;  // as boundary_face
        if (valid) valid[a][c] = touched;
    }
}

#define PROJECT_PARAMS                                                                                           \
    const unsigned char *__restrict__ cell, const unsigned char *__restrict__ solid, const float *__restrict__ u, \
        const float *__restrict__ v, const float *__restrict__ w, const float *__restrict__ solid_u,             \
        const float *__restrict__ solid_v, const float *__restrict__ solid_w,                                   \
        const unsigned char *__restrict__ exists_u, const unsigned char *__restrict__ exists_v,                 \
        const unsigned char *__restrict__ exists_w

// The projection in one pass over the flat cells (project_cell). The faces go to new arrays,
// as the reference replaces the grid's channels; p is the solve's flat pressure.
extern "C" __global__ void project_faces(PROJECT_PARAMS, const int* __restrict__ nbr, int n,
                                         const float* __restrict__ p, float dt_over_h, float* __restrict__ out_u,
                                         float* __restrict__ out_v, float* __restrict__ out_w)
{
    const float* const f[3] = {u, v, w};
    const float* const solid_f[3] = {solid_u, solid_v, solid_w};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    float* const out[3] = {out_u, out_v, out_w};
    RANGE(c, 0, n)
    project_cell<false>(cell, solid, f, solid_f, exists, nbr, n, c, p, dt_over_h, out, nullptr);
}

// project_faces with each face's lower neighbour from the brick table nbr27 (sparse_cell_step:
// the entries grid.nbr holds on the device, sparse_mac._brick_tables' cell_neighbours) instead
// of the 12 B a cell of the neighbour index, and the fluid faces' masks (fluid_faces_sparse's
// cell[c] == FLUID || cell[lo] == FLUID, the projection's own test) written in the same pass:
// sparse_pressure_cells.PROJECT_FLUID (issue 24, helper h21d); the same faces and masks.
extern "C" __global__ void project_faces_fluid(PROJECT_PARAMS, const int* __restrict__ nbr27, int n,
                                               const float* __restrict__ p, float dt_over_h,
                                               float* __restrict__ out_u, float* __restrict__ out_v,
                                               float* __restrict__ out_w, unsigned char* __restrict__ valid_u,
                                               unsigned char* __restrict__ valid_v,
                                               unsigned char* __restrict__ valid_w)
{
    const float* const f[3] = {u, v, w};
    const float* const solid_f[3] = {solid_u, solid_v, solid_w};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    float* const out[3] = {out_u, out_v, out_w};
    unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    RANGE(c, 0, n)
    project_cell<true>(cell, solid, f, solid_f, exists, nbr27, n, c, p, dt_over_h, out, valid);
}

// Around the solve (sparse_pressure_cells.WARM_KERNELS; issue 24: each replaces two to three
// CuPy array operations on the host-bound path between the set-up's read and the loop, or
// after the loop's last read). Selections only, no arithmetic: the reference's bits.
//
// warm_guess: the warm start's x₀ per flat cell (sparse_pressure_warm.initial_guess, new
// cells "zero"): the carried pressure where it is finite, 0 elsewhere (NaN: no value).
extern "C" __global__ void warm_guess(const float* __restrict__ carried, int n, float* __restrict__ x0)
{
    RANGE(c, 0, n)
    {
        const float v = carried[c];
        x0[c] = isfinite(v) ? v : 0.0f;
    }
}

// unknowns_scatter: the flat pressure from the solver's compacted x (Unknowns.scatter):
// x[position[c]] where c is one of the m unknowns (position[c] < m), 0 elsewhere.
extern "C" __global__ void unknowns_scatter(const int* __restrict__ position, const float* __restrict__ x, int m,
                                            int n, float* __restrict__ p)
{
    RANGE(c, 0, n)
    {
        const int u = position[c];
        p[c] = u < m ? x[u] : 0.0f;
    }
}

// unknowns_scatter_carry: unknowns_scatter and warm_carry in one pass (a warm solve without sealed
// regions, whose p goes unchanged to the carry; issue 24, h19b: one launch and one allocation fewer
// on the host-paced stretch after the pressure's last read): p as unknowns_scatter writes it, the
// carried pressure as warm_carry writes it from that p — the same values bit for bit.
extern "C" __global__ void unknowns_scatter_carry(const int* __restrict__ position, const float* __restrict__ x,
                                                  int m, int n, const unsigned char* __restrict__ cell, float none,
                                                  float* __restrict__ p, float* __restrict__ carried)
{
    RANGE(c, 0, n)
    {
        const int u = position[c];
        const float v = u < m ? x[u] : 0.0f;
        p[c] = v;
        carried[c] = cell[c] == CELL_FLUID ? v : none;
    }
}

// warm_carry: the pressure the next warm start reads (sparse_pressure_warm.carry): p on FLUID
// cells, *none* elsewhere (the caller's NaN: NumPy's bits).
extern "C" __global__ void warm_carry(const unsigned char* __restrict__ cell, const float* __restrict__ p, int n,
                                      float none, float* __restrict__ carried)
{
    RANGE(c, 0, n)
    {
        carried[c] = cell[c] == CELL_FLUID ? p[c] : none;
    }
}

// The warm start's x₀ relaxed where the liquid changed (sparse_pressure_warm.relax_guess, issue 24,
// h20b; its array code is the reference, operation by operation). CELL_SOLID as a -D option.
// An unknown: a FLUID cell of kind with a non-SOLID neighbour (a missing one is AIR).
__device__ __forceinline__ bool relax_unknown(const unsigned char* __restrict__ kind, const int* __restrict__ nbr,
                                              int n, int c)
{
    if (kind[c] != CELL_FLUID) return false;
    for (int d = 0; d < 6; ++d) {
        const int o = nbr[(size_t)d * n + c];
        if (o < 0 || kind[o] != CELL_SOLID) return true;
    }
    return false;
}

// warm_relax_mark: mark[c] = 1 where c is an unknown with no carried value (new to the liquid) or
// next to a cell that had one and is not FLUID now (it left the liquid), else 0.
extern "C" __global__ void warm_relax_mark(const float* __restrict__ carried, const unsigned char* __restrict__ kind,
                                           const int* __restrict__ nbr, int n, unsigned char* __restrict__ mark)
{
    RANGE(c, 0, n)
    {
        bool on = !isfinite(carried[c]);
        for (int d = 0; d < 6 && !on; ++d) {
            const int o = nbr[(size_t)d * n + c];
            on = o >= 0 && isfinite(carried[o]) && kind[o] != CELL_FLUID;
        }
        mark[c] = (on && relax_unknown(kind, nbr, n, c)) ? 1 : 0;
    }
}

// warm_relax_grow: the marked unknowns and the unknowns next to one (one cell of width).
extern "C" __global__ void warm_relax_grow(const unsigned char* __restrict__ mark, const unsigned char* __restrict__ kind,
                                           const int* __restrict__ nbr, int n, unsigned char* __restrict__ out)
{
    RANGE(c, 0, n)
    {
        bool on = mark[c] != 0;
        for (int d = 0; d < 6 && !on; ++d) {
            const int o = nbr[(size_t)d * n + c];
            on = o >= 0 && mark[o] != 0;
        }
        out[c] = (on && relax_unknown(kind, nbr, n, c)) ? 1 : 0;
    }
}

// warm_relax_sweep: one Jacobi sweep, x_out[c] = (b[c] + Σ x_in[o])/diag_c on the marked unknowns
// (the FLUID neighbours' values summed −x, +x, −y, +y, −z, +z, others 0; diag_c the non-SOLID
// neighbours), x_in[c] elsewhere.
extern "C" __global__ void warm_relax_sweep(const float* __restrict__ x_in, const float* __restrict__ b,
                                            const unsigned char* __restrict__ kind, const int* __restrict__ nbr,
                                            const unsigned char* __restrict__ mark, int n, float* __restrict__ x_out)
{
    RANGE(c, 0, n)
    {
        float v = x_in[c];
        if (mark[c]) {
            float s = 0.0f;
            int count = 0;
            for (int d = 0; d < 6; ++d) {
                const int o = nbr[(size_t)d * n + c];
                const float xo = (o >= 0 && kind[o] == CELL_FLUID) ? x_in[o] : 0.0f;
                s = d == 0 ? xo : s + xo;
                count += (o < 0 || kind[o] != CELL_SOLID) ? 1 : 0;
            }
            v = (b[c] + s) / (float)count;  // IEEE float32 (no contraction, --fmad=false)
        }
        x_out[c] = v;
    }
}

// The cells stage's first three launches in one (sparse_pressure_cells.CELLS_BRICK "fused", the
// default; issue 24, helper s22e): cells_rhs, cells_hook_bricks_local and cells_hook_faces of
// flip_sparse_pressure_cells.cu as cells_rhs_brick, a block a pool slot. The neighbours come from the
// brick table (nbr27: seven words a block, sparse_cell_step's entries) instead of the neighbour
// table's six rows (24 of cells_rhs's ~51 B a cell), the brick's cell types are read once into shared
// memory, bricks with no FLUID cell write b = 0 and reach = 0 alone, the brick's inner links are
// joined in shared memory (cells_hook_bricks_local's way, one link per pair of x runs), and the links
// across a brick face by whichever of its two bricks finishes second (below). Then cells_label and
// cells_sealed as before: three launches. Opt-in (sparse_pressure_cells.CELLS_PAIRS, helper s23i; proven
// on the CPU, not yet on a GPU): cells_rhs_brick_pairs (a face's links once per run of linked face cells)
// and cells_label_brick (cells_label a block a slot, one global root chase per brick-local root).
//
// H100 80GB HBM3, the 8M dam break's grid (bench/flip_cells_brick_phases.py, each launch alone,
// medians of 15): cells_rhs 0.083 + cells_hook_bricks_local 0.033 + cells_hook_faces 0.023 → this
// kernel 0.078–0.085 ms at 128 threads (256 and 512: no faster). Its phases, by builds that leave
// them out (CELLS_BRICK_SKIP): the cells, b = 0 and the parents alone 0.022, the face sums ~0.02, the
// inner links ~0.015, the links across faces ~0.025 (as cells_hook_faces apart: "inner").
//
// The same values: b by the same float operations in the same order (boundary_face, the module
// compiled without FMA contraction), touch on FLUID cells, and parents whose roots are each
// component's lowest flat index, so cells_label's labels and reach and cells_sealed's count and
// kinds are the same integers. parent and touch are left unwritten off FLUID (cells_label reads
// neither there).
//
// The face links without a grid-wide barrier: a brick's links across its face d need its
// neighbour's parents written. Each block, once its parents are written (and fenced), swaps the
// stage's epoch into the face's ticket (tickets[3·lower slot + axis], atomicExch): the block that
// finds the epoch already there is second and joins that face's 64 links (unite on the global
// parents); the first does nothing there. A block takes a face's ticket only where it has a FLUID
// cell on that face, so a face with FLUID on one side only (no link to join) is taken once and
// never joined. The tickets keep old epochs between stages (never the current one: the stage
// passes a new epoch each time), so they need no zeroing. Every tree a join walks belongs to bricks
// whose parents were fenced before their tickets (a hook is made only by a block that saw both
// bricks' tickets), so no block reads a parent not yet written.

#include "voxfx_sparse.cuh"          // SPARSE_CELLS, sparse_cell_step
#include "voxfx_pressure_cells.cuh"  // find_root_halving, unite

// nbr27's entry of the brick across face d (−x, +x, −y, +y, −z, +z: SparseMacGrid.nbr's order),
// and of the brick itself (13).
__device__ __forceinline__ int brick_face_offset(int d)
{
    const int step = (d & 1) ? 1 : -1, axis = d >> 1;
    return 13 + step * (axis == 0 ? 1 : axis == 1 ? 3 : 9);
}

// The local cell one step along d from local t, and whether it lies across the brick's face (then
// the local index is the one in the brick across: the coordinate wraps 7 ↔ 0).
__device__ __forceinline__ int local_step(int t, int d, bool& across)
{
    const int shift = 3 * (d >> 1), coord = (t >> shift) & 7;
    const bool plus = (d & 1) != 0;
    across = plus ? coord == 7 : coord == 0;
    const int one = 1 << shift;
    return across ? (plus ? t - 7 * one : t + 7 * one) : (plus ? t + one : t - one);
}

// The flat neighbour of local cell t along d (grid.nbr[d][first + t], as sparse_cell_step reads
// it; *across*: through the face): in the brick when *active* (nbr27's own entry is the slot; a free slot's entries are all
// −1, so its cells have no neighbours), else through the face's slot nb[d] (−1: missing).
__device__ __forceinline__ int brick_neighbour(const int* nb, bool active, int first, int t, int d, bool& across)
{
    const int l = local_step(t, d, across);
    if (!active) return -1;
    if (!across) return first + l;
    return nb[d] < 0 ? -1 : nb[d] * SPARSE_CELLS + l;
}

// Local cell i (0 … 63, the face's other two coordinates, lower axis first) of face d of a brick.
__device__ __forceinline__ int face_cell(int d, int i)
{
    const int axis = d >> 1, side = (d & 1) ? 7 : 0, a = i & 7, e = i >> 3;
    return axis == 0 ? (e * 8 + a) * 8 + side : axis == 1 ? (e * 8 + side) * 8 + a : (side * 8 + e) * 8 + a;
}

// boundary_face (voxfx_pressure_cells.cuh) with its loads issued together (no load waits on another's
// test; f[c] read where the solid's value is taken too): the same selection.
__device__ __forceinline__ float boundary_face_loads(const float* __restrict__ f, const float* __restrict__ solid_f,
                                                     const unsigned char* __restrict__ exists,
                                                     const unsigned char* __restrict__ solid, int c, int lo)
{
    const unsigned char solid_c = solid[c];
    const unsigned char solid_lo = lo >= 0 ? solid[lo] : 0;
    const unsigned char exists_c = exists[c];
    const float value = f[c];
    const bool touch = solid_c != 0 || solid_lo != 0 || exists_c == 0;
    return touch ? solid_f[c] : value;
}

// Bench builds (bench/flip_cells_brick_phases.py) leave phases out to time them: 1 b's face sums,
// 2 the links inside the brick, 4 those across its faces. Their outputs are wrong; 0 here.
#ifndef CELLS_BRICK_SKIP
#define CELLS_BRICK_SKIP 0
#endif

// One block a pool slot (n / 512 blocks, any width); tickets: 3 a slot, epoch: never a value any
// earlier stage left there; join_faces 0: the links across faces left to cells_hook_faces
// (CELLS_BRICK "inner"). The other arguments as cells_rhs's (flip_sparse_pressure_cells.cu).
// PAIRS (cells_rhs_brick_pairs, sparse_pressure_cells.CELLS_PAIRS "links" or "1"): of a face's links
// only those whose face predecessor along either face axis (i − 1, i − 8 of the 64) is no FLUID–FLUID
// link are joined — a link whose predecessor is one joins cells already joined: the two cells on each
// side are neighbours in one brick (both bricks active: their inner links made), and the predecessor's
// link is itself joined or has such a predecessor (lower i). A full face: 1 unite for 64.
template <bool PAIRS>
__device__ __forceinline__ void cells_rhs_brick_body(
    const unsigned char* __restrict__ cell, const unsigned char* __restrict__ solid, const float* __restrict__ u,
    const float* __restrict__ v, const float* __restrict__ w, const float* __restrict__ solid_u,
    const float* __restrict__ solid_v, const float* __restrict__ solid_w, const unsigned char* __restrict__ exists_u,
    const unsigned char* __restrict__ exists_v, const unsigned char* __restrict__ exists_w,
    const int* __restrict__ nbr27, int n, float scale, float* __restrict__ b, unsigned char* __restrict__ touch,
    int* parent, const int* __restrict__ crowd, int crowd_on, float inv_n0, float one_tau, float alpha_dt,
    float src_scale, unsigned char* __restrict__ reach, int* __restrict__ count, int* tickets, int epoch,
    int join_faces, int* up, unsigned char* types, int* nb, int* on_face, int* second, int& any)
{
    const int slot = (int)blockIdx.x, first = slot * SPARSE_CELLS;
    const float* const f[3] = {u, v, w};
    const float* const solid_f[3] = {solid_u, solid_v, solid_w};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    if (slot == 0 && threadIdx.x == 0) {  // cells_label's reach has n + 1 entries; cells_sealed counts from 0
        reach[n] = 0;
        *count = 0;
    }
    for (int k = (int)threadIdx.x; k < 7; k += (int)blockDim.x) {
        nb[k] = nbr27[27LL * slot + (k < 6 ? brick_face_offset(k) : 13)];
        if (k < 6) on_face[k] = 0;
    }
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x) {
        const unsigned char k = cell[first + t];
        types[t] = k;
        reach[first + t] = 0;  // cupy.zeros' values (cells_label writes the ones)
        if (k != CELL_FLUID) continue;
        any = 1;
        for (int d = 0; d < 6; ++d) {
            bool across;
            local_step(t, d, across);
            if (across) on_face[d] = 1;
        }
    }
    __syncthreads();
    if (!any) {  // the whole block (any is shared): no FLUID cell, b = 0
        for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x) b[first + t] = 0.0f;
        return;
    }
    const bool active = nb[6] == slot;
    // b, touch and each cell's tree started at the first FLUID cell of its x run (cells_hook_bricks_local)
    for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x) {
        const int c = first + t;
        const bool fluid = types[t] == CELL_FLUID;
        int start = t;
        if (active && fluid)
            while ((start & 7) != 0 && types[start - 1] == CELL_FLUID) --start;
        up[t] = start;
        if (!fluid || (CELLS_BRICK_SKIP & 1)) {
            b[c] = 0.0f;
            continue;
        }
        int o[6];  // grid.nbr[d][c]
        bool air = false, across[6];
        for (int d = 0; d < 6; ++d) {  // every neighbour's type read (no read waits on the one before)
            o[d] = brick_neighbour(nb, active, first, t, d, across[d]);
            const int k = o[d] < 0 ? CELL_AIR : across[d] ? cell[o[d]] : types[o[d] - first];
            air = air | (k == CELL_AIR);
        }
        touch[c] = air ? 1 : 0;
        float diff[3];
        for (int a = 0; a < 3; ++a) {  // the outgoing minus the incoming face (face_sum), as cells_rhs
            const float below = boundary_face_loads(f[a], solid_f[a], exists[a], solid, c, o[2 * a]);
            const int hi = o[2 * a + 1];  // face_above: 0 where missing; hi's lower neighbour c inside the brick,
            float above = 0.0f;           // else from the brick table (sparse_cell_step, as grid.nbr[2a][hi])
            if (hi >= 0)
                above = boundary_face_loads(f[a], solid_f[a], exists[a], solid, hi,
                                            across[2 * a + 1] ? sparse_cell_step(nbr27, hi, 2 * a) : c);
            diff[a] = above - below;
        }
        float rhs = ((diff[0] + diff[1]) + diff[2]) * scale;
        if (crowd_on) {  // the density correction's source (density.py)
            const float excess = fmaxf((float)crowd[c] * inv_n0 - one_tau, 0.0f);
            rhs = rhs + src_scale * (excess * alpha_dt);
        }
        b[c] = rhs;
    }
    __syncthreads();
    // The y and z links inside the brick, in shared memory: a link (t, t + s) whose cells' x
    // predecessors are FLUID and linked the same way joins trees already joined (each x run is one
    // tree), so only the first link of each pair of runs is made (56 of 448 a full brick's axis).
    if (active && !(CELLS_BRICK_SKIP & 2))
        for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x) {
            if (types[t] != CELL_FLUID) continue;
            const bool run = (t & 7) != 0 && types[t - 1] == CELL_FLUID;  // t continues an x run
            if (((t >> 3) & 7) != 7 && types[t + 8] == CELL_FLUID && !(run && types[t + 7] == CELL_FLUID))
                unite(up, t, t + 8);
            if ((t >> 6) != 7 && types[t + 64] == CELL_FLUID && !(run && types[t + 63] == CELL_FLUID))
                unite(up, t, t + 64);
        }
    __syncthreads();
    for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x)
        if (types[t] == CELL_FLUID) parent[first + t] = first + find_root_halving(up, t);
    if (!join_faces || (CELLS_BRICK_SKIP & 4)) return;  // "inner": cells_hook_faces joins them next
    __threadfence();  // the parents before this block's tickets
    __syncthreads();
    for (int d = (int)threadIdx.x; d < 6; d += (int)blockDim.x) {
        const int lower = (d & 1) ? slot : nb[d];
        second[d] = active && on_face[d] && nb[d] >= 0 && atomicExch(&tickets[3 * lower + (d >> 1)], epoch) == epoch;
    }
    __syncthreads();
    if (PAIRS) {
        __shared__ unsigned char link[6 * 64];  // face d's link i joins FLUID to FLUID
        for (int q = (int)threadIdx.x; q < 6 * 64; q += (int)blockDim.x) {
            const int d = q >> 6;
            link[q] = 0;
            if (!second[d]) continue;
            const int t = face_cell(d, q & 63);
            if (types[t] != CELL_FLUID) continue;
            bool across;
            link[q] = cell[brick_neighbour(nb, true, first, t, d, across)] == CELL_FLUID;
        }
        __syncthreads();
        for (int q = (int)threadIdx.x; q < 6 * 64; q += (int)blockDim.x) {
            const int d = q >> 6, i = q & 63;
            if (!link[q] || ((i & 7) != 0 && link[q - 1]) || (i >= 8 && link[q - 8])) continue;
            const int t = face_cell(d, i);
            bool across;
            unite(parent, first + t, brick_neighbour(nb, true, first, t, d, across));
        }
    } else {
        for (int q = (int)threadIdx.x; q < 6 * 64; q += (int)blockDim.x) {
            const int d = q >> 6, i = q & 63, axis = d >> 1;
            if (!second[d]) continue;
            const int side = (d & 1) ? 7 : 0, a = i & 7, e = i >> 3;  // the face's other two coordinates, lower first
            const int t =
                axis == 0 ? (e * 8 + a) * 8 + side : axis == 1 ? (e * 8 + side) * 8 + a : (side * 8 + e) * 8 + a;
            if (types[t] != CELL_FLUID) continue;
            bool across;
            const int o = brick_neighbour(nb, true, first, t, d, across);
            if (cell[o] == CELL_FLUID) unite(parent, first + t, o);
        }
    }
}

#define CELLS_RHS_BRICK_PARAMS                                                                                         \
    const unsigned char *__restrict__ cell, const unsigned char *__restrict__ solid, const float *__restrict__ u,     \
        const float *__restrict__ v, const float *__restrict__ w, const float *__restrict__ solid_u,                  \
        const float *__restrict__ solid_v, const float *__restrict__ solid_w,                                         \
        const unsigned char *__restrict__ exists_u, const unsigned char *__restrict__ exists_v,                       \
        const unsigned char *__restrict__ exists_w, const int *__restrict__ nbr27, int n, float scale,                \
        float *__restrict__ b, unsigned char *__restrict__ touch, int *parent, const int *__restrict__ crowd,         \
        int crowd_on, float inv_n0, float one_tau, float alpha_dt, float src_scale,                                   \
        unsigned char *__restrict__ reach, int *__restrict__ count, int *tickets, int epoch, int join_faces
#define CELLS_RHS_BRICK_ARGS                                                                                           \
    cell, solid, u, v, w, solid_u, solid_v, solid_w, exists_u, exists_v, exists_w, nbr27, n, scale, b, touch,         \
        parent, crowd, crowd_on, inv_n0, one_tau, alpha_dt, src_scale, reach, count, tickets, epoch, join_faces

// The block's shared arrays, declared in each kernel (their PTX names the kernel's own, as before the body
// was shared: cells_rhs_brick's PTX unchanged).
#define CELLS_RHS_BRICK_SHARED                                                                                         \
    __shared__ int up[SPARSE_CELLS];                                                                                   \
    __shared__ unsigned char types[SPARSE_CELLS]; /* the brick's cell types */                                         \
    __shared__ int nb[7];                /* the six faces' slots (d order), then the brick's own entry */              \
    __shared__ int on_face[6], second[6]; /* a FLUID cell on face d; this block joins face d's links */                \
    __shared__ int any

extern "C" __global__ void cells_rhs_brick(CELLS_RHS_BRICK_PARAMS)
{
    CELLS_RHS_BRICK_SHARED;
    cells_rhs_brick_body<false>(CELLS_RHS_BRICK_ARGS, up, types, nb, on_face, second, any);
}

extern "C" __global__ void cells_rhs_brick_pairs(CELLS_RHS_BRICK_PARAMS)
{
    CELLS_RHS_BRICK_SHARED;
    cells_rhs_brick_body<true>(CELLS_RHS_BRICK_ARGS, up, types, nb, on_face, second, any);
}

// label = the root of each FLUID cell (n elsewhere), reach[root] = 1 for the roots of cells that touch
// AIR: cells_label's values, a block a pool slot (sparse_pressure_cells.CELLS_PAIRS "label" or "1"). Each
// FLUID cell's parent is read once; the cells whose parent is itself or lies outside the brick (its
// local roots, hooked across faces, and face cells whose paths were halved) find their root on the
// global parents; every other cell follows its parents inside the brick in shared memory to one of
// those (parents only point to smaller indices, every one an ancestor: the same root). cells_label
// chases every cell's path on the global parents.
extern "C" __global__ void cells_label_brick(const unsigned char* __restrict__ cell,
                                             const unsigned char* __restrict__ touch, int n, int* parent,
                                             int* __restrict__ label, unsigned char* __restrict__ reach)
{
    __shared__ int up[SPARSE_CELLS];    // a FLUID cell's parent in the brick (local), or itself
    __shared__ int root[SPARSE_CELLS];  // its root where found on the global parents, else −1
    const int first = (int)blockIdx.x * SPARSE_CELLS;
    const volatile int* p = parent;
    for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x) {
        const int c = first + t;
        if (cell[c] != CELL_FLUID) {
            label[c] = n;
            continue;
        }
        const int above = p[c];
        const bool inside = above != c && above >= first && above < first + SPARSE_CELLS;
        up[t] = inside ? above - first : t;
        root[t] = inside ? -1 : above == c ? c : find_root_halving(parent, c);
    }
    __syncthreads();
    for (int t = (int)threadIdx.x; t < SPARSE_CELLS; t += (int)blockDim.x) {
        const int c = first + t;
        if (cell[c] != CELL_FLUID) continue;
        int r = t;
        while (root[r] < 0) r = up[r];
        label[c] = root[r];
        if (touch[c]) reach[root[r]] = 1;
    }
}

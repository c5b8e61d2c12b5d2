// The sparse pressure solve launched ahead of its set-up's host read (issue 24;
// kernels/flip/sparse_pressure_solve_ahead.py, VOXFX_SPARSE_SOLVE_AHEAD): a guessed solver's
// sizes and its right-hand side (and warm start) taken on the device from what the set-up left
// there, so that the solve's start and first iterations are queued before the host has the
// counts. kernels/flip/sparse_pressure_solve_ahead.py holds the NumPy reference of both
// (ahead_sizes_reference, and Unknowns.gather for unknowns_gather).
//
// Layout: cnt, the set-up workspace's counts (sparse_pressure_workspace.Workspace.sizes), 4 ints a
// level: m_red at 1, m at 2; after count levels of them 6 ints a level, its unknowns' span (entries
// a and a + 3 added: axis a's). ints, a solver's control ints (sparse_pressure_buffers'
// BufferLoads._set_state: state 0, 0, 0, max_iterations, then per level m_red, m).

#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// The V-cycle's level count the host will keep for these counts (sparse_pressure_workspace.build's
// extents and sparse_pressure_setup.levels_kept, then sparse_multigrid.VCycle._dense_levels'
// drop): one more level while the last kept one's unknowns span at least min_side cells (a
// level's extent: 0 where it has no unknown, else its widest axis's span + 1, an axis's span
// entries a and a + 3 of its six at cnt[4·count + 6·l] added), then one fewer where drop ≥ 0,
// more than two levels are kept and the last but one has at most drop unknowns. The adds wrap as
// the host's int32 do (unsigned), the + 1 does not (the host's Python int).
__device__ int ahead_depth(const int* __restrict__ cnt, int count, int drop, int min_side)
{
    const int* span = cnt + 4 * count;
    int kept = 1;
    while (kept < count) {
        const int l = kept - 1;
        long long extent = 0;  // the host's Python int: no wrap
        if (cnt[4 * l + 2] != 0) {
            int widest = (int)((unsigned)span[6 * l] + (unsigned)span[6 * l + 3]);
            for (int a = 1; a < 3; ++a) {
                const int w = (int)((unsigned)span[6 * l + a] + (unsigned)span[6 * l + a + 3]);
                widest = w > widest ? w : widest;
            }
            extent = (long long)widest + 1;
        }
        if (extent < min_side) break;
        ++kept;
    }
    if (drop >= 0 && kept > 2 && cnt[4 * (kept - 2) + 2] <= drop) --kept;
    return kept;
}

// The solver's control ints from the set-up's counts: _set_state's values, or — where a level's
// m + 1 passes its stride, or its m_red is not within [0, m] (the guessed solver does not hold
// this set-up), or, with count > 0 (the workspace's levels in cnt, their spans after them), the
// V-cycle the host will keep has another number of levels than the solver's (ahead_depth: the
// hierarchy gained or lost a level, another solver will solve) — every size 0, so that the
// launches queued on them touch nothing past a level's first entry (its sentinel), the start
// stops at once (b = 0: finish_init) and the host, once it has read the counts, solves again.
// Then, for each of the solver's vector_count float vectors (vectors[v], of level vector_levels[v]),
// its entry at that level's m just written — the sentinel every neighbour that is not an unknown
// points to (index 0 where every size is 0) — set to 0: the solver's vectors.fill(0) folded into
// this launch (sparse_pressure_solve_ahead.ZERO "sentinels", h21f). Every other entry below m is
// written by the start or the iteration before it is read (the NumPy reference's fresh zeros are
// never read there: each iteration reads only what it or the start wrote, the sentinels apart).
// One thread.
extern "C" __global__ void ahead_sizes(const int* __restrict__ cnt, const int* __restrict__ strides, int levels,
                                       int count, int drop, int min_side, int max_iterations, int* __restrict__ ints,
                                       float* const* __restrict__ vectors, const int* __restrict__ vector_levels,
                                       int vector_count)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    bool fits = count <= 0 || ahead_depth(cnt, count, drop, min_side) == levels;
    for (int l = 0; l < levels; ++l) {
        const int m_red = cnt[4 * l + 1], m = cnt[4 * l + 2];
        fits = fits && m >= 0 && m < strides[l] && m_red >= 0 && m_red <= m;
    }
    ints[0] = 0;
    ints[1] = 0;
    ints[2] = 0;
    ints[3] = max_iterations;
    for (int l = 0; l < levels; ++l) {
        ints[4 + 2 * l] = fits ? cnt[4 * l + 1] : 0;
        ints[5 + 2 * l] = fits ? cnt[4 * l + 2] : 0;
    }
    for (int v = 0; v < vector_count; ++v) vectors[v][ints[5 + 2 * vector_levels[v]]] = 0.0f;
}

// b and, where x0 is given (not null), x₀ at the m = sizes[1] unknowns from their flat arrays
// (cells: unknown → flat cell) into a solver's vectors: Unknowns.gather without its sentinel
// (the solver's fill, or ahead_sizes, left ub[m] and ux[m] 0), cupy.take's values. With guess,
// x0 is the carried pressure and ux takes warm_guess's value of it (finite, else 0: a selection,
// the same bits) — warm_guess's pass over every flat cell and its array folded into this gather
// (sparse_pressure_solve_ahead.GATHER_SWITCH "guess", h21f). Where udiag is given (not null),
// level 0's diag too, unk_diag_strided's values (diag8 at the cell, the sentinel 1 at m): that
// launch folded into this one, the same cells read once (GATHER_SWITCH "folded", the default).
// Grid-stride: launched over the solver's stride, not m.
extern "C" __global__ void unknowns_gather(const float* __restrict__ b, const float* __restrict__ x0,
                                           const long long* __restrict__ cells, const int* __restrict__ sizes,
                                           float* __restrict__ ub, float* __restrict__ ux, int guess,
                                           const unsigned char* __restrict__ diag8, float* __restrict__ udiag)
{
    const int m = sizes[1];
    if (udiag != nullptr && blockIdx.x == 0 && threadIdx.x == 0) udiag[m] = 1.0f;
    RANGE(u, 0, m)
    {
        const long long c = cells[u];
        ub[u] = b[c];
        if (x0 != nullptr) {
            const float v = x0[c];
            ux[u] = guess && !isfinite(v) ? 0.0f : v;
        }
        if (udiag != nullptr) udiag[u] = (float)diag8[c];
    }
}

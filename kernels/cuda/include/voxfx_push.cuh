// The particle push-out after advection (kernels/flip/pushout.py on the host: push_out_of
// and nearest_free_point), shared by the dense (flip_transfer.cu push_out) and the sparse
// (voxfx_g2p_home.cuh push_out_brick, flip_sparse_g2p_lean.cu lean_push_out) G2P kernels,
// each giving its own solid look-up. PUSH_EPSILON is the including module's -D constant.
#pragma once

// Out of a SOLID cell `cell` (grid coordinates gc): the nearest point, PUSH_EPSILON cells
// inside, of a 26-neighbour nb with is_free(nb) (ties: the first in z-y-x order) into
// target; false where no neighbour is free. I: the cell index type.
template <typename I, typename Free>
__device__ __forceinline__ bool nearest_free_point(const float gc[3], const I cell[3], Free is_free, float target[3])
{
    bool found = false;
    float best = 0.0f;
    for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                if (dx == 0 && dy == 0 && dz == 0) continue;
                const I nb[3] = {cell[0] + dx, cell[1] + dy, cell[2] + dz};
                if (!is_free(nb)) continue;
                float q[3];
                for (int a = 0; a < 3; ++a)
                    q[a] = fminf(fmaxf(gc[a], (float)nb[a] + PUSH_EPSILON), (float)(nb[a] + 1) - PUSH_EPSILON);
                const float dist = (q[0] - gc[0]) * (q[0] - gc[0]) + (q[1] - gc[1]) * (q[1] - gc[1]) +
                                   (q[2] - gc[2]) * (q[2] - gc[2]);
                if (!found || dist < best) {
                    found = true;
                    best = dist;
                    for (int a = 0; a < 3; ++a) target[a] = q[a];
                }
            }
    return found;
}

// pushout.push_out_of for one point x (world), in place: not finite: back to `fallback` (its
// position at the start of the step); closed: clamped into the box of n cells shrunk by
// PUSH_EPSILON cells (open: not clamped); in a SOLID cell (is_solid(cell)) moved to
// rescue(gc, cell, target)'s point (nearest_free_point with the grid's free test), or back
// to `fallback` where it finds none. I: the cell index type (int: the dense grid; long long:
// the brick lattice). The three kernels' earlier copies in one: the same operations in the
// same order (the dense kernel's cell was a truncation, here a floor: the same integer, its
// gc ≥ PUSH_EPSILON > 0), the same bits (sm_90 PTX of the sparse kernels the same but for
// register numbers; the dense push_out on the host against pushout.push_out_of).
template <typename I, typename Solid, typename Rescue>
__device__ __forceinline__ void push_out_point(float x[3], const float fallback[3], bool closed, const int n[3],
                                               const float o[3], float h, float inv_h, Solid is_solid, Rescue rescue)
{
    if (!(isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]))) {
        for (int a = 0; a < 3; ++a) x[a] = fallback[a];
        return;
    }
    float gc[3];
    I cell[3];
    bool moved = false;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const float g = (x[a] - o[a]) * inv_h;
        gc[a] = closed ? fminf(fmaxf(g, PUSH_EPSILON), (float)n[a] - PUSH_EPSILON) : g;
        moved = moved || gc[a] != g;
        cell[a] = (I)floorf(gc[a]);
        if (closed) cell[a] = min(cell[a], (I)n[a] - 1);
    }
    if (is_solid(cell)) {
        float target[3];
        if (!rescue(gc, cell, target)) {
            for (int a = 0; a < 3; ++a) x[a] = fallback[a];
            return;
        }
        for (int a = 0; a < 3; ++a) gc[a] = target[a];
        moved = true;
    }
    if (moved)
        for (int a = 0; a < 3; ++a) x[a] = o[a] + gc[a] * h;
}

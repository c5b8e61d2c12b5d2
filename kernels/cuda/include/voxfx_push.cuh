// The push-out's neighbour search (transfer.nearest_free_point on the host), shared by the
// dense (flip_transfer.cu push_out) and the sparse (flip_sparse_transfer.cu push_out_brick)
// G2P kernels. PUSH_EPSILON is the including module's -D constant.
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

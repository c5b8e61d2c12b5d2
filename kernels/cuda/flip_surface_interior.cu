// The particle level set's interior skip (kernels/flip/surface_interior.py states the rule):
// the binning cells whose cube of `reach` cells each side holds at least `full` points in
// every cell, by three passes of a box erosion (x from the counts, then y and z over the
// flags); the gathers (flip_surface.cu, flip_surface_lean.cu: interior_at) give a node whose
// own cell is marked φ = −band without gathering. Cells beyond the cell grid are not full.
// The same cells as surface_interior.interior_cells_cpu (integer counts, no rounding).

// out[c] = every cell c + d·x̂, |d| ≤ reach, lies in the grid and holds ≥ full points.
// 32-bit indices (surface_gpu keeps the cells below 2³¹): the first build, with 64-bit ones
// (three 64-bit divisions a cell), took 0.27 ms for the three passes at 8M (19M cells, H100);
// this one is not yet timed on a device.
extern "C" __global__ void interior_cells_x(const int* __restrict__ counts, int full, int cx, int cy, int cz,
                                            int reach, unsigned char* __restrict__ out)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cx * cy * cz) return;
    int i = c % cx;
    unsigned char all = i - reach >= 0 && i + reach < cx;
    for (int d = -reach; d <= reach && all; ++d) all = counts[c + d] >= full;
    out[c] = all;
}

// out[c] = every cell c + d·ê (ê along axis 1: y, 2: z), |d| ≤ reach, lies in the grid and is
// marked in *in*.
extern "C" __global__ void interior_cells_erode(const unsigned char* __restrict__ in, int cx, int cy, int cz,
                                                int axis, int reach, unsigned char* __restrict__ out)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cx * cy * cz) return;
    int plane = cx * cy;
    int at = axis == 1 ? (c / cx) % cy : c / plane;
    int n = axis == 1 ? cy : cz;
    int stride = axis == 1 ? cx : plane;
    unsigned char all = in[c] && at - reach >= 0 && at + reach < n;
    for (int d = 1; d <= reach && all; ++d) all = in[c - d * stride] && in[c + d * stride];
    out[c] = all;
}

// The liquid surface from FLIP particles (kernels/flip/surface.py): the Zhu–Bridson particle
// level set on the voxel centres of a GridSpec, and its light smoothing.
//
// Particles are binned into cells of edge max(R/2, voxel) (bin_particles → sort by key →
// cell starts by a scan, in Python), packed in cell order as float4 (x, y, z, r), and every
// node gathers over the cells its R-sphere touches: one thread per node, no atomics.
// Compiled with --fmad=false: node positions and particle offsets round as NumPy's, so a
// node sums exactly the particles the CPU reference sums.

// ---------------------------------------------------------------- binning

__device__ __forceinline__ int cell_of(float x, float origin, float inv_edge, int n)
{
    float f = floorf((x - origin) * inv_edge);
    return (f >= 0.0f && f < (float)n) ? (int)f : -1;
}

// key = linear cell index (x fastest), or n_cells for a particle outside every cell: it can
// reach no node and sorts to the end.
extern "C" __global__ void bin_particles(const float* __restrict__ pos, long long n, float cox, float coy,
                                         float coz, float inv_edge, int cx, int cy, int cz,
                                         int* __restrict__ keys)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    int i = cell_of(pos[3 * p + 0], cox, inv_edge, cx);
    int j = cell_of(pos[3 * p + 1], coy, inv_edge, cy);
    int k = cell_of(pos[3 * p + 2], coz, inv_edge, cz);
    keys[p] = (i < 0 || j < 0 || k < 0) ? cx * cy * cz : (k * cy + j) * cx + i;
}

// packed[s] = (x, y, z, r) of particle order[s]; radius_stride 0 = one radius for all.
extern "C" __global__ void pack_particles(const float* __restrict__ pos, const float* __restrict__ radii,
                                          int radius_stride, const long long* __restrict__ order, long long n,
                                          float4* __restrict__ packed)
{
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    long long p = order[s];
    packed[s] = make_float4(pos[3 * p + 0], pos[3 * p + 1], pos[3 * p + 2], radii[p * radius_stride]);
}

// ---------------------------------------------------------------- level set

// Cells are searched in cell units u = (x − origin)/edge, the units bin_particles assigned
// them in, so a particle of cell c has c ≤ u < c + 1 exactly as computed; the sphere of
// radius R (Rc cells) is culled row by row: a (y, z) row of cells is skipped when its
// nearest point is beyond Rc, and only the x-cells under the sphere's slice are read.
// SLACK (cells) keeps float rounding from culling a particle the node test would take.
#define SLACK 1e-3f

__device__ __forceinline__ float gap_to_cell(float u, int c)  // distance from u to [c, c + 1], less SLACK
{
    float g = fmaxf(fmaxf((float)c - u, u - (float)(c + 1)), 0.0f);
    return fmaxf(g - SLACK, 0.0f);
}

// phi = |x − x̄| − r̄ with x̄, r̄ the k(s) = (1 − s²)³ weighted means of the particles within R
// (Zhu & Bridson 2005, §4); summed as offsets x_p − x so far-from-origin worlds keep their
// precision. No particle within R: +band. Clamped to ±band.
extern "C" __global__ void particle_level_set(const float4* __restrict__ packed, const int* __restrict__ starts,
                                              int nx, int ny, int nz, float ox, float oy, float oz, float h,
                                              float cox, float coy, float coz, float inv_edge, int cx, int cy,
                                              int cz, float R, float band, float* __restrict__ phi)
{
    long long node = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= (long long)nx * ny * nz) return;
    int i = (int)(node % nx);
    int j = (int)((node / nx) % ny);
    int k = (int)(node / ((long long)nx * ny));
    float x = ((float)i + 0.5f) * h + ox;  // as surface._node_coordinate
    float y = ((float)j + 0.5f) * h + oy;
    float z = ((float)k + 0.5f) * h + oz;
    float R2 = R * R;
    float ux = (x - cox) * inv_edge, uy = (y - coy) * inv_edge, uz = (z - coz) * inv_edge;
    float Rc = R * inv_edge + SLACK;

    int klo = max((int)floorf(uz - Rc), 0), khi = min((int)floorf(uz + Rc), cz - 1);
    int jlo = max((int)floorf(uy - Rc), 0), jhi = min((int)floorf(uy + Rc), cy - 1);
    float W = 0.0f, sx = 0.0f, sy = 0.0f, sz = 0.0f, sr = 0.0f;
    for (int ck = klo; ck <= khi; ++ck) {
        float gz = gap_to_cell(uz, ck);
        float left_z = Rc * Rc - gz * gz;
        if (left_z <= 0.0f) continue;
        for (int cj = jlo; cj <= jhi; ++cj) {
            float gy = gap_to_cell(uy, cj);
            float left = left_z - gy * gy;
            if (left <= 0.0f) continue;
            float half = sqrtf(left);  // half-width of the sphere's slice over this row, in cells
            int ilo = max((int)floorf(ux - half - SLACK), 0), ihi = min((int)floorf(ux + half + SLACK), cx - 1);
            if (ilo > ihi) continue;
            int row = (ck * cy + cj) * cx;
            // Cells ilo..ihi of one row are contiguous in the sorted order.
            int first = starts[row + ilo], last = starts[row + ihi + 1];
            for (int s = first; s < last; ++s) {
                float4 q = packed[s];
                float dx = q.x - x, dy = q.y - y, dz = q.z - z;
                float d2 = (dx * dx + dy * dy) + dz * dz;
                if (d2 < R2) {
                    float t = 1.0f - d2 / R2;
                    float w = (t * t) * t;
                    W += w;
                    sx += w * dx;
                    sy += w * dy;
                    sz += w * dz;
                    sr += w * q.w;
                }
            }
        }
    }
    float value = band;
    if (W > 0.0f) value = sqrtf((sx * sx + sy * sy) + sz * sz) / W - sr / W;
    phi[node] = fminf(fmaxf(value, -band), band);
}

// ---------------------------------------------------------------- smoothing

// One explicit step of mean-curvature flow, phi + step·κ|∇phi| with
// κ|∇phi| = Δphi − ∇phiᵀ(∇²phi)∇phi / |∇phi|², central differences in voxel units, the edge
// value repeated outside the grid; nodes with |∇phi|² ≤ flat are left as they are. The
// same operations in the same order as surface._smooth_cpu.
extern "C" __global__ void smooth_level_set(const float* __restrict__ phi, int nx, int ny, int nz, float step,
                                            float flat, float band, float* __restrict__ out)
{
    long long node = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= (long long)nx * ny * nz) return;
    int i = (int)(node % nx);
    int j = (int)((node / nx) % ny);
    int k = (int)(node / ((long long)nx * ny));
    int im = max(i - 1, 0), ip = min(i + 1, nx - 1);
    int jm = max(j - 1, 0), jp = min(j + 1, ny - 1);
    int km = max(k - 1, 0), kp = min(k + 1, nz - 1);
#define AT(kk, jj, ii) phi[((long long)(kk) * ny + (jj)) * nx + (ii)]
    float c = AT(k, j, i);
    float xm = AT(k, j, im), xp = AT(k, j, ip);
    float ym = AT(k, jm, i), yp = AT(k, jp, i);
    float zm = AT(km, j, i), zp = AT(kp, j, i);
    float fx = (xp - xm) * 0.5f, fy = (yp - ym) * 0.5f, fz = (zp - zm) * 0.5f;
    float fxx = (xp + xm) - (c + c), fyy = (yp + ym) - (c + c), fzz = (zp + zm) - (c + c);
    float fxy = ((AT(k, jp, ip) - AT(k, jm, ip)) - (AT(k, jp, im) - AT(k, jm, im))) * 0.25f;
    float fxz = ((AT(kp, j, ip) - AT(km, j, ip)) - (AT(kp, j, im) - AT(km, j, im))) * 0.25f;
    float fyz = ((AT(kp, jp, i) - AT(km, jp, i)) - (AT(kp, jm, i) - AT(km, jm, i))) * 0.25f;
#undef AT
    float g2 = (fx * fx + fy * fy) + fz * fz;
    float num = (((fyy + fzz) * (fx * fx) + (fxx + fzz) * (fy * fy)) + (fxx + fyy) * (fz * fz))
              - 2.0f * (((fx * fy) * fxy + (fx * fz) * fxz) + (fy * fz) * fyz);
    float move = g2 > flat ? num / g2 : 0.0f;
    out[node] = fminf(fmaxf(c + step * move, -band), band);
}

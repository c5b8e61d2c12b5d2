// Wind drift of fallen snow (kernels/snow/drift.py): the airborne snow volume per wind cell
// exchanged with the ground lattice under it and carried by the wind's MAC faces.
// Mirrors the NumPy reference term by term; compiled with --fmad=false.

// NO_GROUND (kernels/snow/domain.py) comes as a -D option from its Python module.
#ifndef NO_GROUND
#error "compile with -DNO_GROUND (kernels/snow/domain.py's value)"
#endif

#include "voxfx_mac.cuh"  // cell and face indices of the wind's MAC grid

// ---------------------------------------------------------------- 1. air cells
//
// k of the lowest cell whose centre is at or above terrain + snow, stepping over solid
// cells; one thread per ground vertex.

extern "C" __global__ void air_cells(const float* __restrict__ terrain, const float* __restrict__ snow,
                                     const unsigned char* __restrict__ solid, const int* __restrict__ ci,
                                     const int* __restrict__ cj, int* __restrict__ k_out, int nx, int ny, int nz,
                                     double oz, double h, long long n)
{
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    float t = terrain[v];
    double top = t == NO_GROUND ? (double)(float)oz : (double)(t + snow[v]);
    double f = fmin(fmax(ceil((top - oz) / h - 0.5), 0.0), (double)(nz - 1));
    int k = (int)f;
    long long column = (long long)cj[v] * nx + ci[v];
    while (k < nz - 1 && solid[(long long)k * nx * ny + column]) ++k;
    k_out[v] = k;
}

// ---------------------------------------------------------------- 2. exchange
//
// Per vertex: δ = rate·(c − c_sat), c_sat from the Pomeroy & Gray (1990) saltation flux
// through the air cell; erosion at most the snow there. The cells gather −δ·cell² from
// their vertices in row-major order (the order of NumPy's add.at), one thread per column.

extern "C" __global__ void drift_exchange_ground(const float* __restrict__ terrain, float* __restrict__ snow,
                                                 const float* __restrict__ load, const float* __restrict__ wind,
                                                 const int* __restrict__ k, const int* __restrict__ ci,
                                                 const int* __restrict__ cj, float* __restrict__ delta, int nx,
                                                 int ny, float factor, float ustar_t, float flux, float rate,
                                                 float h, long long n)
{
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    float ux = wind[2 * v], uy = wind[2 * v + 1];
    float speed = sqrtf(ux * ux + uy * uy);
    float ustar = speed * factor;
    float c_sat = 0.0f;
    if (ustar > ustar_t) {
        float q_sat = (flux * (ustar_t / ustar)) * (ustar * ustar - ustar_t * ustar_t);  // m²/s of snow
        c_sat = q_sat / (speed * h);
    }
    float c = load[((long long)k[v] * ny + cj[v]) * nx + ci[v]] / (h * h * h);
    float sv = snow[v];
    float d = rate * (c - c_sat);
    d = fmaxf(d, -sv);  // erosion: at most the snow there
    if (terrain[v] == NO_GROUND) d = 0.0f;
    snow[v] = sv + d;
    delta[v] = d;
}

extern "C" __global__ void drift_exchange_air(const float* __restrict__ delta, const int* __restrict__ k,
                                              const int* __restrict__ ci, const int* __restrict__ cj,
                                              float* __restrict__ load, int nx, int ny, int nz, int gx, int gy,
                                              double ox, double oy, double h, double gox, double goy, double gcell,
                                              float cell2)
{
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)nx * ny) return;
    int i = (int)(c % nx), j = (int)(c / nx);
    // Candidate vertices: the footprint widened by one, to the lattice's ends at the grid's
    // edge columns (vertex_columns clips there); membership is read from ci, cj themselves.
    int ilo = i == 0 ? 0 : max(0, (int)floor((ox + i * h - gox) / gcell) - 1);
    int ihi = i == nx - 1 ? gx - 1 : min(gx - 1, (int)ceil((ox + (i + 1) * h - gox) / gcell) + 1);
    int jlo = j == 0 ? 0 : max(0, (int)floor((oy + j * h - goy) / gcell) - 1);
    int jhi = j == ny - 1 ? gy - 1 : min(gy - 1, (int)ceil((oy + (j + 1) * h - goy) / gcell) + 1);
    long long plane = (long long)nx * ny;
    for (int vj = jlo; vj <= jhi; ++vj) {
        for (int vi = ilo; vi <= ihi; ++vi) {
            long long v = (long long)vj * gx + vi;
            if (ci[v] != i || cj[v] != j) continue;
            long long cell = k[v] * plane + c;
            // the vertex's own area (ground.vertex_areas: halved on each lattice side it lies on)
            float w = ((vi == 0 || vi == gx - 1) ? 0.5f : 1.0f) * ((vj == 0 || vj == gy - 1) ? 0.5f : 1.0f);
            load[cell] = load[cell] + (-(delta[v] * (cell2 * w)));
        }
    }
    for (int kk = 0; kk < nz; ++kk) load[kk * plane + c] = fmaxf(load[kk * plane + c], 0.0f);
}

// ---------------------------------------------------------------- 3. transport
//
// Donor-cell finite volumes on the MAC faces: face Courant numbers C = u·dt/h (w − w_s on
// z faces), 0 on faces touching a solid cell and on the ground and lid; a cell's outflow
// is limited to its content (scale = 1/Σ outgoing C when that exceeds 1). Beyond the
// sides is clean air; what crosses an open side leaves.

__device__ __forceinline__ bool is_solid(const unsigned char* __restrict__ solid, int i, int j, int k, int nx,
                                         int ny, int nz)
{
    if (i < 0 || j < 0 || k < 0 || i >= nx || j >= ny || k >= nz) return false;
    return solid[((long long)k * ny + j) * nx + i] != 0;
}

// Courant number of face f of cell (i, j, k): 0/1 = x low/high, 2/3 = y, 4/5 = z.
__device__ __forceinline__ float face_courant(const float* __restrict__ u, const float* __restrict__ v,
                                              const float* __restrict__ w, const unsigned char* __restrict__ solid,
                                              int i, int j, int k, int f, int nx, int ny, int nz, float c, float ws)
{
    int axis = f >> 1, high = f & 1;
    int fi = i + (axis == 0 ? high : 0), fj = j + (axis == 1 ? high : 0), fk = k + (axis == 2 ? high : 0);
    // the two cells beside the face
    int ai = fi - (axis == 0), aj = fj - (axis == 1), ak = fk - (axis == 2);
    if (is_solid(solid, ai, aj, ak, nx, ny, nz) || is_solid(solid, fi, fj, fk, nx, ny, nz)) return 0.0f;
    if (axis == 0) return u[u_face_index(fi, fj, fk, nx, ny)] * c;
    if (axis == 1) return v[v_face_index(fi, fj, fk, nx, ny)] * c;
    if (fk == 0 || fk == nz) return 0.0f;
    return (w[cell_index(fi, fj, fk, nx, ny)] - ws) * c;
}

extern "C" __global__ void drift_limit(const float* __restrict__ u, const float* __restrict__ v,
                                       const float* __restrict__ w, const unsigned char* __restrict__ solid,
                                       float* __restrict__ scale, int nx, int ny, int nz, float c, float ws)
{
    long long id = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long long)nx * ny * nz) return;
    int i = (int)(id % nx), j = (int)((id / nx) % ny), k = (int)(id / ((long long)nx * ny));
    float x_hi = face_courant(u, v, w, solid, i, j, k, 1, nx, ny, nz, c, ws);
    float x_lo = face_courant(u, v, w, solid, i, j, k, 0, nx, ny, nz, c, ws);
    float y_hi = face_courant(u, v, w, solid, i, j, k, 3, nx, ny, nz, c, ws);
    float y_lo = face_courant(u, v, w, solid, i, j, k, 2, nx, ny, nz, c, ws);
    float z_hi = face_courant(u, v, w, solid, i, j, k, 5, nx, ny, nz, c, ws);
    float z_lo = face_courant(u, v, w, solid, i, j, k, 4, nx, ny, nz, c, ws);
    float out = ((((fmaxf(x_hi, 0.0f) + fmaxf(-x_lo, 0.0f)) + fmaxf(y_hi, 0.0f)) + fmaxf(-y_lo, 0.0f))
                 + fmaxf(z_hi, 0.0f)) + fmaxf(-z_lo, 0.0f);
    scale[id] = out > 1.0f ? 1.0f / out : 1.0f;
}

// Signed volume crossing a face from low to high: upwind content × its limiter × C.
__device__ __forceinline__ float face_flux(float cf, const float* __restrict__ V, const float* __restrict__ scale,
                                           long long lo, bool lo_in, long long hi, bool hi_in)
{
    float up = cf > 0.0f ? (lo_in ? V[lo] * scale[lo] : 0.0f) : (hi_in ? V[hi] * scale[hi] : 0.0f);
    return cf * up;
}

extern "C" __global__ void drift_advect(const float* __restrict__ u, const float* __restrict__ v,
                                        const float* __restrict__ w, const unsigned char* __restrict__ solid,
                                        const float* __restrict__ V, const float* __restrict__ scale,
                                        float* __restrict__ out, int nx, int ny, int nz, float c, float ws)
{
    long long id = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long long)nx * ny * nz) return;
    int i = (int)(id % nx), j = (int)((id / nx) % ny), k = (int)(id / ((long long)nx * ny));
    long long sx = 1, sy = nx, sz = (long long)nx * ny;
    float fx_lo = face_flux(face_courant(u, v, w, solid, i, j, k, 0, nx, ny, nz, c, ws), V, scale, id - sx, i > 0, id,
                            true);
    float fx_hi = face_flux(face_courant(u, v, w, solid, i, j, k, 1, nx, ny, nz, c, ws), V, scale, id, true, id + sx,
                            i < nx - 1);
    float fy_lo = face_flux(face_courant(u, v, w, solid, i, j, k, 2, nx, ny, nz, c, ws), V, scale, id - sy, j > 0, id,
                            true);
    float fy_hi = face_flux(face_courant(u, v, w, solid, i, j, k, 3, nx, ny, nz, c, ws), V, scale, id, true, id + sy,
                            j < ny - 1);
    float fz_lo = face_flux(face_courant(u, v, w, solid, i, j, k, 4, nx, ny, nz, c, ws), V, scale, id - sz, k > 0, id,
                            true);
    float fz_hi = face_flux(face_courant(u, v, w, solid, i, j, k, 5, nx, ny, nz, c, ws), V, scale, id, true, id + sz,
                            k < nz - 1);
    float net = ((fx_lo - fx_hi) + (fy_lo - fy_hi)) + (fz_lo - fz_hi);
    out[id] = fmaxf(V[id] + net, 0.0f);
}

// Level 0 dense in the pool's bricks: the probe's passes (bench/_dense_bricks.py's notes: the layout,
// what each pass computes, its NumPy reference). A block a brick of `bricks` (256 threads); a dense
// place is slot·512 + colour·256 + (lz·8 + ly)·4 + lx/2; nbr27[27·slot + (dz + 1)·9 + (dy + 1)·3 + dx + 1]
// the slot around (−1 none: reads 0). Compiled with --fmad=false and -DMG_OMEGA=<float>.

#ifndef MG_OMEGA
#define MG_OMEGA 1.3f
#endif

__device__ __forceinline__ int db_place(int lx, int ly, int lz)
{
    return (((lx + ly + lz) & 1) << 8) | (((lz << 3) | ly) << 2) | (lx >> 1);
}

// The thread's cell of colour `colour` (its place within the colour: t).
__device__ __forceinline__ void db_cell(int t, int colour, int& lx, int& ly, int& lz)
{
    lz = t >> 5;
    ly = (t >> 2) & 7;
    lx = ((t & 3) << 1) | ((ly + lz + colour) & 1);
}

// v at the face neighbour d (−x, +x, −y, +y, −z, +z) of cell (lx, ly, lz) of `slot`.
__device__ __forceinline__ float db_nb(const float* __restrict__ v, const int* __restrict__ nbr27, int slot, int lx,
                                       int ly, int lz, int d)
{
    const int axis = d >> 1, step = (d & 1) ? 1 : -1;
    int c[3] = {lx, ly, lz};
    const int to = c[axis] + step;
    int s = slot;
    if (to < 0 || to > 7) {
        s = __ldg(nbr27 + 27 * slot + 13 + step * (axis == 0 ? 1 : (axis == 1 ? 3 : 9)));
        if (s < 0) return 0.0f;
    }
    c[axis] = to & 7;
    return v[(long long)s * 512 + db_place(c[0], c[1], c[2])];
}

__device__ __forceinline__ float db_sum(const float* __restrict__ v, const int* __restrict__ nbr27, int slot, int lx,
                                        int ly, int lz)
{
    float s = db_nb(v, nbr27, slot, lx, ly, lz, 0);
#pragma unroll
    for (int d = 1; d < 6; ++d) s = s + db_nb(v, nbr27, slot, lx, ly, lz, d);
    return s;
}

// One colour of over-relaxed Gauss-Seidel (sparse_multigrid.sweep) on the unknowns; `first`: from x = 0
// (its old value 0; for red the black ones too, so Σ = 0).
extern "C" __global__ void db_sweep(float* __restrict__ x, const float* __restrict__ b,
                                    const unsigned char* __restrict__ diag, const int* __restrict__ nbr27,
                                    const int* __restrict__ bricks, int colour, int first)
{
    const int slot = bricks[blockIdx.x], t = threadIdx.x;
    const long long me = (long long)slot * 512 + (colour << 8) + t;
    const unsigned char dg = diag[me];
    if (!dg) return;
    int lx, ly, lz;
    db_cell(t, colour, lx, ly, lz);
    const float s = (first && !colour) ? 0.0f : db_sum(x, nbr27, slot, lx, ly, lz);
    const float g = (b[me] + s) / (float)dg;
    if (MG_OMEGA == 1.0f) {
        x[me] = g;
    } else {
        const float old = first ? 0.0f : x[me];
        x[me] = old + MG_OMEGA * (g - old);
    }
}

// r = b − (diag·x − Σ x) on the unknowns, 0 elsewhere (mg_residual's residual_value): a red and a black cell
// a thread.
extern "C" __global__ void db_residual(const float* __restrict__ x, const float* __restrict__ b,
                                       const unsigned char* __restrict__ diag, const int* __restrict__ nbr27,
                                       const int* __restrict__ bricks, float* __restrict__ r)
{
    const int slot = bricks[blockIdx.x], t = threadIdx.x;
#pragma unroll
    for (int colour = 0; colour < 2; ++colour) {
        const long long me = (long long)slot * 512 + (colour << 8) + t;
        const unsigned char dg = diag[me];
        float out = 0.0f;
        if (dg) {
            int lx, ly, lz;
            db_cell(t, colour, lx, ly, lz);
            out = b[me] - ((float)dg * x[me] - db_sum(x, nbr27, slot, lx, ly, lz));
        }
        r[me] = out;
    }
}

// q = diag·p − Σ p on the unknowns (0 elsewhere; apply_laplacian's) and the block's Σ p·q in double:
// each thread its two products, then a fixed tree; partials[blockIdx.x].
extern "C" __global__ void db_apply_dot(const float* __restrict__ p, float* __restrict__ q,
                                        const unsigned char* __restrict__ diag, const int* __restrict__ nbr27,
                                        const int* __restrict__ bricks, double* __restrict__ partials)
{
    __shared__ double acc[256];
    const int slot = bricks[blockIdx.x], t = threadIdx.x;
    double pq = 0.0;
#pragma unroll
    for (int colour = 0; colour < 2; ++colour) {
        const long long me = (long long)slot * 512 + (colour << 8) + t;
        const unsigned char dg = diag[me];
        float out = 0.0f;
        if (dg) {
            int lx, ly, lz;
            db_cell(t, colour, lx, ly, lz);
            const float pc = p[me];
            out = (float)dg * pc - db_sum(p, nbr27, slot, lx, ly, lz);
            pq += (double)pc * out;
        }
        q[me] = out;
    }
    acc[t] = pq;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (t < h) acc[t] += acc[t + h];
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = acc[0];
}

// Σ of n partials in a fixed order (a thread every 256th, then a tree) into out[0]: one block of 256.
extern "C" __global__ void db_sum_partials(const double* __restrict__ partials, int n, double* __restrict__ out)
{
    __shared__ double acc[256];
    const int t = threadIdx.x;
    double s = 0.0;
    for (int i = t; i < n; i += 256) s += partials[i];
    acc[t] = s;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (t < h) acc[t] += acc[t + h];
        __syncthreads();
    }
    if (t == 0) out[0] = acc[0];
}

__device__ __forceinline__ float db_axis_weight(int a) { return (a == 1 || a == 2) ? 0.75f : 0.25f; }

// Level 1's b = ½·Σ (¼, ¾, ¾, ¼)³ r over fine 2I − 1 … 2I + 2 per axis, separably (x, y, z), 0 off level 1's
// unknowns (diag1): the brick's 10³ fine r in shared memory from the 27 bricks around it.
extern "C" __global__ void db_restrict(const float* __restrict__ r, const unsigned char* __restrict__ diag1,
                                       const int* __restrict__ nbr27, const int* __restrict__ bricks,
                                       float* __restrict__ b1)
{
    __shared__ int around[27];
    __shared__ float tile[1000];  // (tz·10 + ty)·10 + tx: fine t − 1
    __shared__ float tx1[400];    // (tz·10 + ty)·4 + cx
    __shared__ float ty1[160];    // (tz·4 + cy)·4 + cx
    const int slot = bricks[blockIdx.x], t = threadIdx.x;
    if (t < 27) around[t] = nbr27[27 * slot + t];
    __syncthreads();
    for (int e = t; e < 1000; e += 256) {
        const int fz = e / 100 - 1, fy = (e / 10) % 10 - 1, fx = e % 10 - 1;
        const int o = 13 + (fx < 0 ? -1 : (fx > 7 ? 1 : 0)) + 3 * (fy < 0 ? -1 : (fy > 7 ? 1 : 0)) +
                      9 * (fz < 0 ? -1 : (fz > 7 ? 1 : 0));
        const int s = around[o];
        tile[e] = s < 0 ? 0.0f : r[(long long)s * 512 + db_place(fx & 7, fy & 7, fz & 7)];
    }
    __syncthreads();
    for (int e = t; e < 400; e += 256) {
        const int row = e >> 2, cx = e & 3;
        const float* v = tile + row * 10 + 2 * cx;
        float s = db_axis_weight(0) * v[0];
#pragma unroll
        for (int a = 1; a < 4; ++a) s = s + db_axis_weight(a) * v[a];
        tx1[e] = s;
    }
    __syncthreads();
    if (t < 160) {
        const int tz = t >> 4, cy = (t >> 2) & 3, cx = t & 3;
        const float* v = tx1 + (tz * 10 + 2 * cy) * 4 + cx;
        float s = db_axis_weight(0) * v[0];
#pragma unroll
        for (int a = 1; a < 4; ++a) s = s + db_axis_weight(a) * v[4 * a];
        ty1[t] = s;
    }
    __syncthreads();
    if (t < 64) {
        const int cz = t >> 4, c = t & 15;
        const float* v = ty1 + (2 * cz) * 16 + c;
        float s = db_axis_weight(0) * v[0];
#pragma unroll
        for (int a = 1; a < 4; ++a) s = s + db_axis_weight(a) * v[16 * a];
        const long long at = (long long)slot * 64 + t;
        b1[at] = diag1[at] ? 0.5f * s : 0.0f;
    }
}

// x += P x₁ on the unknowns: per fine cell its parent and the parent's neighbours on its side, rows
// (oz·2 + oy)·2 + ox in order (PROLONG_WEIGHTS); the brick's 6³ coarse x (−1 … 4) in shared memory.
extern "C" __global__ void db_prolong(const float* __restrict__ x1, const unsigned char* __restrict__ diag,
                                      const int* __restrict__ nbr27, const int* __restrict__ bricks,
                                      float* __restrict__ x)
{
    __shared__ int around[27];
    __shared__ float tile[216];  // (tz·6 + ty)·6 + tx: coarse t − 1
    const int slot = bricks[blockIdx.x], t = threadIdx.x;
    if (t < 27) around[t] = nbr27[27 * slot + t];
    __syncthreads();
    if (t < 216) {
        const int cz = t / 36 - 1, cy = (t / 6) % 6 - 1, cx = t % 6 - 1;
        const int o = 13 + (cx < 0 ? -1 : (cx > 3 ? 1 : 0)) + 3 * (cy < 0 ? -1 : (cy > 3 ? 1 : 0)) +
                      9 * (cz < 0 ? -1 : (cz > 3 ? 1 : 0));
        const int s = around[o];
        tile[t] = s < 0 ? 0.0f : x1[(long long)s * 64 + (((cz & 3) << 2) | (cy & 3)) * 4 + (cx & 3)];
    }
    __syncthreads();
#pragma unroll
    for (int colour = 0; colour < 2; ++colour) {
        const long long me = (long long)slot * 512 + (colour << 8) + t;
        if (!diag[me]) continue;
        int lx, ly, lz;
        db_cell(t, colour, lx, ly, lz);
        const int px = (lx >> 1) + 1, py = (ly >> 1) + 1, pz = (lz >> 1) + 1;
        const int sx = (lx & 1) ? 1 : -1, sy = (ly & 1) ? 6 : -6, sz = (lz & 1) ? 36 : -36;
        const int at = (pz * 6 + py) * 6 + px;
        float add = 0.0f;
#pragma unroll
        for (int row = 0; row < 8; ++row) {
            const int ox = row & 1, oy = (row >> 1) & 1, oz = row >> 2;
            const float w = (ox ? 0.25f : 0.75f) * (oy ? 0.25f : 0.75f) * (oz ? 0.25f : 0.75f);
            const float term = w * tile[at + ox * sx + oy * sy + oz * sz];
            add = row ? add + term : term;
        }
        x[me] = x[me] + add;
    }
}

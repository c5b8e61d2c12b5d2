// The sparse voxelizer on the device (issue 11; seed 003 §5.1, seed 004 §5): every voxel is
// decided by the exact device functions of voxelize.cu (make_setup, projection_test,
// plane_test, thin_test, make_yz_setup), over the whole grid's work items as the dense
// kernels launch them; only where a set bit is stored differs: an 8³ brick of a sorted
// list of bricks instead of a dense bit grid. Compiled with --fmad=false, as voxelize.cu.
//
// Bricks are numbered lin = (bz·nby + by)·nbx + bx over the grid's nbx × nby × nbz bricks
// (sorted lin = sorted SparseGrid keys). A brick's bits are 64 bytes: byte (z·8 + y), bit x;
// as uint32 words, word (z·8 + y) / 4, bit 8·((z·8 + y) mod 4) + x (little-endian).

#include "voxelize.cu"

// ------------------------------------------------------------------ surface topology

// Per triangle, the brick range of the voxels it may set (make_setup's touched range cut
// to the grid, as surface_column_counts cuts it) and the number of bricks in it.
extern "C" __global__ void sparse_surface_boxes(const double* __restrict__ pv, const int* __restrict__ tris,
                                                long long n_tris, long long n_vertices, int nx, int ny, int nz,
                                                long long* __restrict__ counts, int* __restrict__ bbox,
                                                unsigned long long* __restrict__ flags)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tris) return;
    counts[t] = 0;
    if (!valid_triangle(tris, t, n_vertices, flags)) return;
    Setup s;
    make_setup(pv, tris, t, nx, ny, nz, 0, s);
    clip_to_box(s, make_box(0, 0, 0, nx, ny, nz));
    long long n = 1;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        if (s.hi[a] < s.lo[a]) return;
        bbox[6 * t + a] = (int)(s.lo[a] >> 3);
        bbox[6 * t + 3 + a] = (int)(s.hi[a] >> 3);
        n *= (s.hi[a] >> 3) - (s.lo[a] >> 3) + 1;
    }
    counts[t] = n;
}

// The (brick, triangle) pairs as brick numbers: item → its triangle (owner_of), then the
// item's brick of that triangle's range, x fastest.
extern "C" __global__ void sparse_expand_bricks(const long long* __restrict__ ends, const long long* __restrict__ counts,
                                                const int* __restrict__ bbox, long long n_tris, long long n_items,
                                                long long nbx, long long nby, long long* __restrict__ out)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    const int* b = bbox + 6 * t;
    long long ex = b[3] - b[0] + 1, ey = b[4] - b[1] + 1;
    long long bx = b[0] + local % ex, by = b[1] + (local / ex) % ey, bz = b[2] + local / (ex * ey);
    out[item] = (bz * nby + by) * nbx + bx;
}

// ------------------------------------------------------------------ surface voxels

// Sorted brick numbers, with the first index of each brick row (bz·nby + by) in row_start
// (nby·nbz + 1 entries): a brick is found by a short binary search inside its row.
struct BrickIndex {
    const long long* lin;
    const long long* row_start;
    long long nbx, nby;
    unsigned int* pool;           // 16 words per brick
    unsigned long long* missing;  // voxels whose brick is not listed (a bug: never expected)
    long long last_lin, last_slot;
};

__device__ __forceinline__ void set_voxel(BrickIndex& ix, long long i, long long j, long long k)
{
    long long brow = (k >> 3) * ix.nby + (j >> 3);
    long long lin = brow * ix.nbx + (i >> 3);
    if (lin != ix.last_lin) {
        long long lo = ix.row_start[brow], hi = ix.row_start[brow + 1];
        while (lo < hi) {
            long long mid = (lo + hi) >> 1;
            if (ix.lin[mid] < lin) lo = mid + 1; else hi = mid;
        }
        if (lo >= ix.row_start[brow + 1] || ix.lin[lo] != lin) {
            atomicAdd(ix.missing, 1ull);
            return;
        }
        ix.last_lin = lin;
        ix.last_slot = lo;
    }
    unsigned int r = (unsigned int)(((k & 7) << 3) | (j & 7));
    unsigned int bit = 1u << (((r & 3u) << 3) | (unsigned int)(i & 7));
    unsigned int* w = ix.pool + ix.last_slot * 16 + (r >> 2);
    if (!(*w & bit)) atomicOr(w, bit);
}

// voxelize.cu's column<D, false> over the whole grid, storing into bricks: the same
// candidates and the same tests, in the same order.
template <int D>
__device__ __forceinline__ void sparse_column(const Setup& s, long long local, BrickIndex& ix)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    constexpr int pc = plane_of_axis(D), p1 = (pc + 1) % 3, p2 = (pc + 2) % 3;
    long long wu = s.hi[U] - s.lo[U] + 1;
    long long cu = s.lo[U] + local % wu;
    long long cv = s.lo[V] + local / wu;
    double q[3];
    q[D] = 0.0;
    q[U] = (double)cu;
    q[V] = (double)cv;
    if (!projection_test<pc>(s, q)) return;
    long long dlo, dhi;
    column_depths<D>(s, cu, cv, dlo, dhi);
    for (long long d = dlo; d <= dhi; ++d) {
        q[D] = (double)d;
        if (!projection_test<p1>(s, q) || !projection_test<p2>(s, q)) continue;
        if (s.thin && !thin_test(s, q)) continue;
        if (!plane_test(s, q)) continue;
        set_voxel(ix, (long long)q[0], (long long)q[1], (long long)q[2]);
    }
}

// The setups of every triangle, built once (make_setup cut to the grid, as the dense
// launch of the whole grid cuts it) into global memory: a Setup is large, and built per
// thread it lives in local memory (a 2 KB stack frame at 255 registers); read from one
// shared copy, threads on the same triangle hit the same cached lines.
extern "C" __global__ void sparse_setup_size(long long* __restrict__ out)
{
    out[0] = (long long)sizeof(Setup);
}

extern "C" __global__ void sparse_surface_setups(const double* __restrict__ pv, const int* __restrict__ tris,
                                                 long long n_tris, long long n_vertices, int nx, int ny, int nz,
                                                 int thin, Setup* __restrict__ setups,
                                                 unsigned long long* __restrict__ flags)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_tris) return;
    if (!valid_triangle(tris, t, n_vertices, flags)) return;  // no work items: never read
    Setup s;
    make_setup(pv, tris, t, nx, ny, nz, thin, s);
    clip_to_box(s, make_box(0, 0, 0, nx, ny, nz));
    setups[t] = s;
}

// Each thread takes ITEMS consecutive work items (columns, mostly of one triangle).
#ifndef VOXFX_SPARSE_ITEMS  // gpu_sparse.py passes ITEMS_PER_THREAD
#define VOXFX_SPARSE_ITEMS 1
#endif

extern "C" __global__ void sparse_surface_columns(const Setup* __restrict__ setups,
                                                  const long long* __restrict__ ends,
                                                  const long long* __restrict__ counts, long long n_tris,
                                                  long long n_items, const long long* __restrict__ lin,
                                                  const long long* __restrict__ row_start, long long nbx,
                                                  long long nby, unsigned int* __restrict__ pool,
                                                  unsigned long long* __restrict__ missing)
{
    long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * VOXFX_SPARSE_ITEMS;
    if (first >= n_items) return;
    long long last = first + VOXFX_SPARSE_ITEMS < n_items ? first + VOXFX_SPARSE_ITEMS : n_items;
    long long t = owner_of(ends, n_tris, first);
    BrickIndex ix = {lin, row_start, nbx, nby, pool, missing, -1, 0};
    for (long long item = first; item < last; ++item) {
        if (item >= ends[t]) t = owner_of(ends, n_tris, item);  // the next triangle with work
        const Setup& s = setups[t];
        long long local = item - (ends[t] - counts[t]);
        switch (s.dom) {
            case 0: sparse_column<0>(s, local, ix); break;
            case 1: sparse_column<1>(s, local, ix); break;
            default: sparse_column<2>(s, local, ix); break;
        }
    }
}

// ------------------------------------------------------------------ solid (§4.1, §5)

// solid_flip_starts over the whole grid (no box, nothing dropped), appending each flip
// start as one key: brick row, x, then the row r = (k mod 8)·8 + (j mod 8) inside it,
// key = (brow << (xbits + 6)) | (x << 6) | r. At most one key per work item. write = 0
// only counts them (n_out), so that the list is allocated at its size.
extern "C" __global__ void sparse_solid_crossings(const double* __restrict__ pv, const int* __restrict__ tris,
                                                  const long long* __restrict__ ends,
                                                  const long long* __restrict__ counts, long long n_tris,
                                                  long long n_items, int nx, int ny, int nz, int xbits,
                                                  int write, long long* __restrict__ out,
                                                  unsigned long long* __restrict__ n_out)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    YZSetup s;
    make_yz_setup(pv, tris, t, 0, 0, ny, nz, s);
    long long wj = s.jhi - s.jlo + 1;
    long long j = s.jlo + local % wj, k = s.klo + local / wj;
    double yc = (double)j + 0.5, zc = (double)k + 0.5;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        double E = s.sign[i] * ((s.q[i][0] - s.p[i][0]) * (zc - s.p[i][1]) - (s.q[i][1] - s.p[i][1]) * (yc - s.p[i][0]));
        if (!(E > 0 || (E == 0 && s.tl[i]))) return;
    }
    double q = ((s.nv0 - s.ny * yc) - s.nz * zc) / s.nx;
    double qbar = floor(q + 0.5);
    if (qbar >= (double)nx) return;
    long long x = qbar < 0.0 ? 0 : (long long)qbar;
    long long brow = (k >> 3) * (long long)(ny >> 3) + (j >> 3);
    long long key = (brow << (xbits + 6)) | (x << 6) | ((k & 7) << 3) | (j & 7);
    unsigned long long at = atomicAdd(n_out, 1ull);
    if (write) out[at] = key;
}

// 1 where a sorted key starts a new brick row (the first key too), else 0.
extern "C" __global__ void sparse_row_starts(const long long* __restrict__ keys, long long n, int xbits,
                                             unsigned char* __restrict__ starts)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    starts[i] = (i == 0 || (keys[i] >> (xbits + 6)) != (keys[i - 1] >> (xbits + 6))) ? 1 : 0;
}

// One thread per brick row (its sorted crossings keys[seg[g] .. seg[g + 1])): walk along x
// with the parity of its 64 rows as a mask (§4.1's prefix xor, a brick at a time). A brick
// where crossings land is stored bit by bit; between such bricks every row is constant:
// all set → one run of full bricks (a tile record), mixed → each brick stored, none → nothing.
// write = 0 counts bricks and runs per row; write = 1 writes them at the scanned offsets.
__device__ __forceinline__ unsigned int row_byte(unsigned long long mask, int r)
{
    return ((mask >> r) & 1ull) ? 0xffu : 0u;
}

extern "C" __global__ void sparse_solid_rows(const long long* __restrict__ keys, const long long* __restrict__ seg,
                                             long long n_segs, int xbits, long long nbx, long long nby, int write,
                                             long long* __restrict__ n_bricks, long long* __restrict__ n_runs,
                                             long long* __restrict__ brick_lin, unsigned char* __restrict__ brick_rows,
                                             long long* __restrict__ runs)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_segs) return;
    const long long s0 = seg[g], e = seg[g + 1];
    const long long xmask = (1ll << xbits) - 1;
    const long long brow = keys[s0] >> (xbits + 6);
    long long nb = 0, nr = 0;
    long long b_at = write ? n_bricks[g] : 0, r_at = write ? n_runs[g] : 0;
    unsigned long long mask = 0ull;
    long long cursor = 0, i = s0;
    while (true) {
        long long bx = i < e ? ((keys[i] >> 6) & xmask) >> 3 : nbx;
        if (bx > cursor && mask) {  // bricks cursor .. bx - 1: every row constant
            if (mask == ~0ull) {
                if (write) {
                    long long* o = runs + 4 * (r_at + nr);
                    o[0] = cursor; o[1] = bx; o[2] = brow % nby; o[3] = brow / nby;
                }
                ++nr;
            } else {
                for (long long b = cursor; b < bx; ++b, ++nb) {
                    if (!write) continue;
                    brick_lin[b_at + nb] = brow * nbx + b;
                    unsigned char* o = brick_rows + 64 * (b_at + nb);
                    for (int r = 0; r < 64; ++r) o[r] = (unsigned char)row_byte(mask, r);
                }
            }
        }
        if (i >= e) break;
        unsigned long long flip[8] = {0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull};  // byte r: starts in row r
        for (; i < e && (((keys[i] >> 6) & xmask) >> 3) == bx; ++i) {
            int r = (int)(keys[i] & 63);
            long long x = (keys[i] >> 6) & xmask;
            flip[r >> 3] ^= 1ull << (((r & 7) << 3) | (int)(x & 7));
        }
        // Twice: is any bit set (a brick whose rows all end unset is not stored), then write.
        for (int pass = 0; pass < 2; ++pass) {
            unsigned int any = 0u;
            for (int r = 0; r < 64; ++r) {  // prefix xor of the flips inside the brick, from the row's parity
                unsigned int f = (unsigned int)(flip[r >> 3] >> ((r & 7) << 3)) & 0xffu;
                unsigned int p = f;
                p ^= p << 1; p ^= p << 2; p ^= p << 4;
                p = (p ^ row_byte(mask, r)) & 0xffu;
                any |= p;
                if (pass) {
                    if (write) brick_rows[64 * (b_at + nb) + r] = (unsigned char)p;
                    mask ^= (unsigned long long)(__popc(f) & 1) << r;
                }
            }
            if (!pass && !any) {  // nothing stored; the parity still changes
                for (int r = 0; r < 64; ++r)
                    mask ^= (unsigned long long)(__popc((unsigned int)(flip[r >> 3] >> ((r & 7) << 3)) & 0xffu) & 1) << r;
                break;
            }
            if (pass) {
                if (write) brick_lin[b_at + nb] = brow * nbx + bx;
                ++nb;
            }
        }
        cursor = bx + 1;
    }
    if (!write) {
        n_bricks[g] = nb;
        n_runs[g] = nr;
    }
}

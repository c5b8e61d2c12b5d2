// The sparse voxelizer's solid on the device (issue 11; seed 004 §4.1, §5): voxelize.cu's
// flip starts over the whole grid (make_yz_setup, as solid_flip_starts tests them), appended
// as keys that gpu_sparse.py sorts instead of XORed into a dense bit grid; then one thread
// per brick row turns them into partial bricks (brick numbers and 64 row bytes, laid out as
// voxelize_sparse.cu's head says) and runs of full bricks. Compiled with --fmad=false, as
// voxelize.cu.

#include "voxfx_voxelize.cuh"  // the dense kernels' device functions (make_yz_setup, owner_of)

// Crossing keys. A flip start at voxel (x, j, k) of brick slice bz = k / 8, brick row
// by = j / 8, row r = (k mod 8)·8 + (j mod 8) inside the brick row, is the key
//   (((bz − z0) << ybits | by) << (xbits + 6)) | (x << 6) | r
// (ybits: the bits of nby − 1, xbits: of nx − 1), z0 the first slice of the key's sort group
// (gpu_sparse.py sorts the keys a group of whole slices at a time; slices are in key order).
// 64-bit keys take z0 = 0 (one group); 32-bit keys (half the memory) hold a group of up to
// 2^(32 − ybits − xbits − 6) slices, z0 from slice_z0. A key's group is found in gstart (the
// groups' first keys, then n) and gz0 (their z0).
template <typename K>
__device__ __forceinline__ K crossing_key(long long bz, long long z0, long long by, long long x, long long r,
                                          int xbits, int ybits)
{
    return (K)((((((bz - z0) << ybits) | by) << (xbits + 6)) | (x << 6)) | r);
}

// The group of key index i: the last g with gstart[g] ≤ i (a handful of groups), the owner
// of item i whose ends are gstart[1 ..] (gstart[n_groups] = n > i).
__device__ __forceinline__ long long key_group(const long long* __restrict__ gstart, long long n_groups, long long i)
{
    return owner_of(gstart + 1, n_groups, i);
}

// solid_flip_starts over the whole grid (no box, nothing dropped; the same centre_inside and
// flip_start), appending each flip start as one key. At most one key per work item. Keys are
// grouped by brick slice bz: slice_at[bz] counts the slice's keys (write = 0), or holds where
// its next key goes (write = 1: the counts' exclusive scan), so that the list is allocated at
// its size and sorted a group of slices at a time.
template <typename K>
__device__ __forceinline__ void solid_crossings(const double* __restrict__ pv, const int* __restrict__ tris,
                                                const long long* __restrict__ ends,
                                                const long long* __restrict__ counts, long long n_tris,
                                                long long n_items, int nx, int ny, int nz, int xbits, int ybits,
                                                const long long* __restrict__ slice_z0, int write,
                                                unsigned long long* __restrict__ slice_at, K* __restrict__ out)
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
    if (!centre_inside(s, yc, zc)) return;  // top-left fill rule: a centre on an edge counts once
    double qbar = flip_start(s, yc, zc);
    if (qbar >= (double)nx) return;
    long long x = qbar < 0.0 ? 0 : (long long)qbar;
    unsigned long long at = atomicAdd(slice_at + (k >> 3), 1ull);
    if (write)
        out[at] = crossing_key<K>(k >> 3, slice_z0[k >> 3], j >> 3, x, ((k & 7) << 3) | (j & 7), xbits, ybits);
}

// The index of every sorted key that starts a new brick row (the first key of each group
// too), appended to seg in any order (n_seg: how many; gpu_sparse.py sorts the few).
template <typename K>
__device__ __forceinline__ void row_segments(const K* __restrict__ keys, long long n, int xbits,
                                             const long long* __restrict__ gstart, long long n_groups,
                                             long long* __restrict__ seg, unsigned long long* __restrict__ n_seg)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool first = i == 0 || (keys[i] >> (xbits + 6)) != (keys[i - 1] >> (xbits + 6));
    if (!first && n_groups > 1) first = gstart[key_group(gstart, n_groups, i)] == i;
    if (first) seg[atomicAdd(n_seg, 1ull)] = i;
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

template <typename K>
__device__ __forceinline__ void solid_rows(const K* __restrict__ keys, const long long* __restrict__ seg,
                                           long long n_segs, int xbits, int ybits,
                                           const long long* __restrict__ gstart, const long long* __restrict__ gz0,
                                           long long n_groups, long long nbx, long long nby, int write,
                                           long long* __restrict__ n_bricks, long long* __restrict__ n_runs,
                                           long long* __restrict__ brick_lin, unsigned char* __restrict__ brick_rows,
                                           long long* __restrict__ runs)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_segs) return;
    const long long s0 = seg[g], e = seg[g + 1];
    const long long xmask = (1ll << xbits) - 1;
    const long long row = (long long)(keys[s0] >> (xbits + 6));
    const long long by = row & ((1ll << ybits) - 1);
    const long long bz = gz0[key_group(gstart, n_groups, s0)] + (row >> ybits);
    const long long brow = bz * nby + by;
    long long nb = 0, nr = 0;
    long long b_at = write ? n_bricks[g] : 0, r_at = write ? n_runs[g] : 0;
    unsigned long long mask = 0ull;
    long long cursor = 0, i = s0;
    while (true) {
        long long bx = i < e ? ((long long)(keys[i] >> 6) & xmask) >> 3 : nbx;
        if (bx > cursor && mask) {  // bricks cursor .. bx - 1: every row constant
            if (mask == ~0ull) {
                if (write) {
                    long long* o = runs + 4 * (r_at + nr);
                    o[0] = cursor; o[1] = bx; o[2] = by; o[3] = bz;
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
        for (; i < e && ((((long long)(keys[i] >> 6)) & xmask) >> 3) == bx; ++i) {
            int r = (int)(keys[i] & 63);
            long long x = (long long)(keys[i] >> 6) & xmask;
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

// The launches, for 64-bit keys and (suffix 32) for 32-bit keys.
#define VOXFX_SOLID_LAUNCHES(SUFFIX, K)                                                                              \
    extern "C" __global__ void sparse_solid_crossings##SUFFIX(                                                       \
        const double* __restrict__ pv, const int* __restrict__ tris, const long long* __restrict__ ends,             \
        const long long* __restrict__ counts, long long n_tris, long long n_items, int nx, int ny, int nz,           \
        int xbits, int ybits, const long long* __restrict__ slice_z0, int write,                                     \
        unsigned long long* __restrict__ slice_at, K* __restrict__ out)                                              \
    {                                                                                                                \
        solid_crossings<K>(pv, tris, ends, counts, n_tris, n_items, nx, ny, nz, xbits, ybits, slice_z0, write,       \
                           slice_at, out);                                                                           \
    }                                                                                                                \
    extern "C" __global__ void sparse_row_segments##SUFFIX(                                                          \
        const K* __restrict__ keys, long long n, int xbits, const long long* __restrict__ gstart,                    \
        long long n_groups, long long* __restrict__ seg, unsigned long long* __restrict__ n_seg)                     \
    {                                                                                                                \
        row_segments<K>(keys, n, xbits, gstart, n_groups, seg, n_seg);                                               \
    }                                                                                                                \
    extern "C" __global__ void sparse_solid_rows##SUFFIX(                                                            \
        const K* __restrict__ keys, const long long* __restrict__ seg, long long n_segs, int xbits, int ybits,       \
        const long long* __restrict__ gstart, const long long* __restrict__ gz0, long long n_groups, long long nbx,  \
        long long nby, int write, long long* __restrict__ n_bricks, long long* __restrict__ n_runs,                  \
        long long* __restrict__ brick_lin, unsigned char* __restrict__ brick_rows, long long* __restrict__ runs)      \
    {                                                                                                                \
        solid_rows<K>(keys, seg, n_segs, xbits, ybits, gstart, gz0, n_groups, nbx, nby, write, n_bricks, n_runs,     \
                      brick_lin, brick_rows, runs);                                                                  \
    }

VOXFX_SOLID_LAUNCHES(, long long)
VOXFX_SOLID_LAUNCHES(32, unsigned int)

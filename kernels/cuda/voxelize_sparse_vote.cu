// The 3-axis (hole-tolerant) vote of the sparse voxelizer on bricks (issue 11; seed 004
// §4.1 parity, §5 sparse): launched by kernels/voxelize/gpu_sparse_vote.py, which says the
// algorithm. Three sparse solids, one per parity axis a (the mesh relabelled so that axis a
// is x: frame coordinate f is world coordinate (f + a) % 3), each as partial bricks (sorted
// brick numbers, 64 row bytes) and runs of full bricks along its own x; the vote of a
// voxel is set where at least two of the three are.
//
// Brick numbers: (bz·nby + by)·nbx + bx over the grid's bricks (frame a: its own nb).
// Bitmaps: one bit per brick of the box, [bz][by][word of bx], `words` words a row.

#define VOTE_EMPTY (-1ll)
#define VOTE_FULL (-2ll)

// World coordinate w of frame coordinate f of axis a: w = (f + a) % 3.
__device__ __forceinline__ int vote_world_axis(int a, int f) { return (f + a) % 3; }

__device__ __forceinline__ void vote_set_bit(unsigned int* bitmap, long long word, unsigned int bit)
{
    atomicOr(bitmap + word, bit);
}

// One thread per run of axis a: the run's bricks set in the box's bitmap (bricks outside
// the box: no vote of two there, left out).
extern "C" __global__ void vote_fill_runs(const long long* __restrict__ runs, long long n_runs, int a,
                                          long long b0x, long long b0y, long long b0z, long long mx, long long my,
                                          long long mz, long long words, unsigned int* __restrict__ bitmap)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_runs) return;
    const long long* r = runs + 4 * g;
    long long frame[3] = {0, r[2], r[3]};
    const long long lo[3] = {b0x, b0y, b0z}, m[3] = {mx, my, mz};
    for (long long f0 = r[0]; f0 < r[1]; ++f0) {
        frame[0] = f0;
        long long w[3];
        bool inside = true;
        for (int f = 0; f < 3; ++f) {
            int wa = vote_world_axis(a, f);
            w[wa] = frame[f] - lo[wa];
            inside = inside && w[wa] >= 0 && w[wa] < m[wa];
        }
        if (inside) vote_set_bit(bitmap, (w[2] * my + w[1]) * words + (w[0] >> 5), 1u << (w[0] & 31));
    }
}

// Position of *key* in sorted keys[0 .. n), or −1.
__device__ __forceinline__ long long vote_find(const long long* __restrict__ keys, long long n, long long key)
{
    long long lo = 0, hi = n;
    while (lo < hi) {
        long long mid = lo + ((hi - lo) >> 1);
        if (keys[mid] < key) lo = mid + 1; else hi = mid;
    }
    return (lo < n && keys[lo] == key) ? lo : -1ll;
}

// One thread per brick of the union U of the three axes' partial bricks (world numbers):
// per axis a its state there: the partial brick's slot in axis a's list, VOTE_FULL where
// the brick lies in one of a's runs (its bitmap), else VOTE_EMPTY. slot: (n, 3).
extern "C" __global__ void vote_brick_slots(const long long* __restrict__ lin, long long n, long long nbx,
                                            long long nby, long long nbz, long long b0x, long long b0y,
                                            long long b0z, long long my, long long words,
                                            const long long* __restrict__ lin0, long long n0,
                                            const long long* __restrict__ lin1, long long n1,
                                            const long long* __restrict__ lin2, long long n2,
                                            const unsigned int* __restrict__ bitmaps, long long bitmap_words,
                                            long long* __restrict__ slot)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    const long long nb[3] = {nbx, nby, nbz};
    long long rest = lin[g] / nbx;
    const long long w[3] = {lin[g] - rest * nbx, rest % nby, rest / nby};
    const long long* lists[3] = {lin0, lin1, lin2};
    const long long counts[3] = {n0, n1, n2};
    const long long word = ((w[2] - b0z) * my + (w[1] - b0y)) * words + ((w[0] - b0x) >> 5);
    const unsigned int bit = 1u << ((w[0] - b0x) & 31);
    for (int a = 0; a < 3; ++a) {
        // the brick's number in frame a: frame f holds world axis (f + a) % 3
        long long f0 = w[vote_world_axis(a, 0)], f1 = w[vote_world_axis(a, 1)], f2 = w[vote_world_axis(a, 2)];
        long long n0a = nb[vote_world_axis(a, 0)], n1a = nb[vote_world_axis(a, 1)];
        long long s = vote_find(lists[a], counts[a], (f2 * n1a + f1) * n0a + f0);
        if (s < 0) s = (bitmaps[a * bitmap_words + word] & bit) ? VOTE_FULL : VOTE_EMPTY;
        slot[3 * g + a] = s;
    }
}

// Byte of world row (z, y) of a brick (bit x = voxel x) in axis a's state *s*: its partial
// brick's rows read across (frame f local coordinate = world local (f + a) % 3), or all
// set / all clear.
__device__ __forceinline__ unsigned int vote_row_of(const unsigned char* __restrict__ rows, long long s, int a,
                                                    int z, int y)
{
    if (s == VOTE_FULL) return 0xffu;
    if (s < 0) return 0u;
    const unsigned char* b = rows + 64 * s;
    if (a == 0) return b[8 * z + y];
    unsigned int out = 0u;
    for (int x = 0; x < 8; ++x) {
        const int w[3] = {x, y, z};
        const int f0 = w[vote_world_axis(a, 0)], f1 = w[vote_world_axis(a, 1)], f2 = w[vote_world_axis(a, 2)];
        out |= ((unsigned int)(b[8 * f2 + f1] >> f0) & 1u) << x;
    }
    return out;
}

// One thread per (brick of U, world row z·8 + y): the majority of the three axes' bits,
// maj(p, q, r) = (p & q) | (r & (p | q)) (at least two of three set).
extern "C" __global__ void vote_brick_rows(const long long* __restrict__ slot, long long n,
                                           const unsigned char* __restrict__ rows0,
                                           const unsigned char* __restrict__ rows1,
                                           const unsigned char* __restrict__ rows2, unsigned char* __restrict__ out)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= 64 * n) return;
    const long long b = g >> 6;
    const int z = (int)((g >> 3) & 7), y = (int)(g & 7);
    unsigned int p = vote_row_of(rows0, slot[3 * b], 0, z, y);
    unsigned int q = vote_row_of(rows1, slot[3 * b + 1], 1, z, y);
    unsigned int r = vote_row_of(rows2, slot[3 * b + 2], 2, z, y);
    out[g] = (unsigned char)((p & q) | (r & (p | q)));
}

// One thread per brick of U: its bit of the result's full bitmap is what its rows say
// (full: set; partial or empty: clear), whatever the three bitmaps' majority gave it.
extern "C" __global__ void vote_override(const long long* __restrict__ lin, const unsigned char* __restrict__ full,
                                         long long n, long long nbx, long long nby, long long b0x, long long b0y,
                                         long long b0z, long long my, long long words, unsigned int* __restrict__ bitmap)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    long long rest = lin[g] / nbx;
    const long long x = lin[g] - rest * nbx - b0x, y = rest % nby - b0y, z = rest / nby - b0z;
    const long long word = (z * my + y) * words + (x >> 5);
    const unsigned int bit = 1u << (x & 31);
    if (full[g]) atomicOr(bitmap + word, bit);
    else atomicAnd(bitmap + word, ~bit);
}

// One thread per bitmap row (by, bz) of the box: its runs of set bits, counted (write 0:
// count[g]) or written from offset at[g] (write 1) as (bx0, bx1, by, bz) world bricks.
extern "C" __global__ void vote_row_runs(const unsigned int* __restrict__ bitmap, long long n_rows, long long words,
                                         long long my, long long b0x, long long b0y, long long b0z, int write,
                                         long long* __restrict__ count, long long* __restrict__ runs)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_rows) return;
    const unsigned int* row = bitmap + g * words;
    const long long by = g % my + b0y, bz = g / my + b0z;
    long long k = 0, at = write ? count[g] : 0, start = 0;
    unsigned int carry = 0u;  // the bit before this word (set: a run is open)
    for (long long i = 0; i < words; ++i) {
        unsigned int v = row[i];
        unsigned int before = (v << 1) | carry;  // bit j: voxel j − 1 set
        unsigned int starts = v & ~before, ends = ~v & before;
        while (starts | ends) {  // in order along x: a run's end comes before the next start
            unsigned int s = starts ? (unsigned int)__ffs(starts) : 33u, e = ends ? (unsigned int)__ffs(ends) : 33u;
            if (e <= s) {  // bit e − 1: the first clear bit after a run
                if (write) {
                    long long* o = runs + 4 * (at + k);
                    o[0] = start; o[1] = b0x + 32 * i + (e - 1); o[2] = by; o[3] = bz;
                }
                ++k;
                ends &= ends - 1u;
            } else {
                start = b0x + 32 * i + (s - 1);
                starts &= starts - 1u;
            }
        }
        carry = v >> 31;
    }
    if (carry) {  // open to the row's end (padding bits are clear: only when it is a whole word)
        if (write) {
            long long* o = runs + 4 * (at + k);
            o[0] = start; o[1] = b0x + 32 * words; o[2] = by; o[3] = bz;
        }
        ++k;
    }
    if (!write) count[g] = k;
}

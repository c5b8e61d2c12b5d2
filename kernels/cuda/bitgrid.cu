// Packed bit grids: 32 voxels per 32-bit word along x, bit b of word w is voxel x = 32*w + b.
// Layout [z][y][word], x fastest (see kernels/grid/spec.py). One thread per word.

extern "C" __global__ void pack_bits(const unsigned char* __restrict__ dense,  // [rows][nx], 0/1
                                     unsigned int* __restrict__ words,        // [rows][words_x]
                                     long long rows, int nx, int words_x)
{
    long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= rows * words_x) return;
    long long row = w / words_x;
    int x0 = (int)(w % words_x) * 32;
    const unsigned char* src = dense + row * nx;
    unsigned int bits = 0u;
    int n = min(32, nx - x0);
    for (int b = 0; b < n; ++b)
        bits |= (src[x0 + b] != 0 ? 1u : 0u) << b;
    words[w] = bits;
}

extern "C" __global__ void unpack_bits(const unsigned int* __restrict__ words,
                                       unsigned char* __restrict__ dense,
                                       long long rows, int nx, int words_x)
{
    long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= rows * words_x) return;
    long long row = w / words_x;
    int x0 = (int)(w % words_x) * 32;
    unsigned int bits = words[w];
    unsigned char* dst = dense + row * nx;
    int n = min(32, nx - x0);
    for (int b = 0; b < n; ++b)
        dst[x0 + b] = (unsigned char)((bits >> b) & 1u);
}

// Set bits per word; an exclusive scan of these gives each word's first output slot.
extern "C" __global__ void popcount_words(const unsigned int* __restrict__ words,
                                          int* __restrict__ counts, long long n_words)
{
    long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n_words) return;
    counts[w] = __popc(words[w]);
}

// Voxel (i, j, k) of every set bit, in increasing linear order (z, y, x): the same order
// as numpy.nonzero on the unpacked grid, so both backends return identical arrays.
extern "C" __global__ void bits_to_coords(const unsigned int* __restrict__ words,
                                          const long long* __restrict__ first,  // exclusive scan
                                          int* __restrict__ ijk,                // [count][3]
                                          long long n_words, int words_x, int ny,
                                          int k0)  // z-layer of words[0]: a slab of the grid
{
    long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n_words) return;
    unsigned int bits = words[w];
    if (bits == 0u) return;
    long long row = w / words_x + (long long)k0 * ny;
    int i0 = (int)(w % words_x) * 32;
    int j = (int)(row % ny);
    int k = (int)(row / ny);
    long long out = first[w];
    while (bits) {
        int b = __ffs(bits) - 1;  // lowest set bit first: increasing x
        bits &= bits - 1u;
        ijk[3 * out + 0] = i0 + b;
        ijk[3 * out + 1] = j;
        ijk[3 * out + 2] = k;
        ++out;
    }
}

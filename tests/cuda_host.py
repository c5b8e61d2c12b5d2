"""What the sparse FLIP host harnesses (tests/unit/test_cuda_sparse_{flip,gather,scatter,
topology,topology_table}_host.py, test_cuda_brick_reach_host.py) compile the CUDA kernels
with, so that nvcc builds them as host functions: one block at a time, its one "thread"
taking every item (``LAUNCH``), atomics plain read-modify-writes, barriers no-ops, shared
memory static, the warp functions of include/voxfx_reduce.cuh compiled but not called.

    harness = STUBS + '#include "the kernels.cu"' + DRIVER + the driver's main()

(``tests.unit.test_cuda_exact._build`` builds and runs it.)"""

# Before the kernel files.
STUBS = r"""
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>
#undef __device__
#define __device__ __attribute__((host))
#define __global__
#undef __launch_bounds__
#define __launch_bounds__(...)
struct HostDim { unsigned x, y, z; };
static HostDim h_block, h_dim, h_thread, h_grid = {1, 1, 1};
#define gridDim h_grid
#define blockIdx h_block
#define blockDim h_dim
#define threadIdx h_thread
template <typename T> T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
#define atomicAdd plain_add
template <typename T> T plain_max(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
#define atomicMax plain_max
template <typename T> T plain_or(T* p, T v) { T o = *p; *p = o | v; return o; }
#define atomicOr plain_or
template <typename T> T plain_exch(T* p, T v) { T o = *p; *p = v; return o; }
#define atomicExch plain_exch
// include/voxfx_reduce.cuh's warp functions are compiled but not called on the host
#define __shfl_down_sync(mask, v, offset) ((v) * 0)
#define __ballot_sync(mask, flag) ((unsigned)(flag))
#define __popc __builtin_popcount
#define __ffs __builtin_ffs
static unsigned host_float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
#define __float_as_uint host_float_as_uint
#undef __shared__
#define __shared__ static
#define __syncthreads()
using std::isfinite;
"""

# After the kernel files: the launch loop and the drivers' input and output helpers.
DRIVER = r"""
typedef long long ll;
typedef unsigned char u8;
static void at(ll i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
#define LAUNCH(n, call) for (ll t_ = 0; t_ < (ll)(n); ++t_) { at(t_); call; }
static float rf() { float x; scanf("%a", &x); return x; }
template <class T> static void pr(const std::vector<T>& a) { for (auto x : a) printf("%d\n", (int)x); }
static void pf(const std::vector<float>& a) { for (float x : a) printf("%a\n", x); }
// The bricks as the harnesses take them: "n_keys capacity", the sorted keys, their slots.
static void read_bricks(ll& nk, ll& cap, std::vector<ll>& keys, std::vector<int>& slots) {
    scanf("%lld %lld", &nk, &cap);
    keys.resize(nk);
    slots.resize(nk);
    for (auto& k : keys) scanf("%lld", &k);
    for (auto& s : slots) scanf("%d", &s);
}
// The particles as the harnesses take them: "n", then pos (3n), vel (3n) and, with apic, C (9n;
// one 0 without); returns n.
static ll read_particles(int apic, std::vector<float>& pos, std::vector<float>& vel, std::vector<float>& c) {
    ll n;
    scanf("%lld", &n);
    pos.assign(3 * n, 0.0f);
    vel.assign(3 * n, 0.0f);
    c.assign(apic ? 9 * n : 1, 0.0f);
    for (auto& x : pos) x = rf();
    for (auto& x : vel) x = rf();
    if (apic) for (auto& x : c) x = rf();
    return n;
}
"""

# The voxelize harnesses' (tests/unit/test_cuda_slabs_host.py, test_cuda_sparse_host.py) stubs
# before voxelize.cu: device functions built for the host, one "thread" a call (the driver sets
# h_block.x), the atomics plain read-modify-writes.
VOXELIZE_STUBS = r"""
#undef __device__
#define __device__ __attribute__((host))
#define __global__
struct HostDim { unsigned x, y, z; };
static HostDim h_block, h_dim, h_thread;
#define blockIdx h_block
#define blockDim h_dim
#define threadIdx h_thread
template <typename T> T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> T plain_or(T* p, T v) { T o = *p; *p = o | v; return o; }
template <typename T> T plain_xor(T* p, T v) { T o = *p; *p = o ^ v; return o; }
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicAdd plain_add
#define atomicOr plain_or
#define atomicXor plain_xor
#define atomicMin plain_min
"""

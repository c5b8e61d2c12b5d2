// Shared searches over sorted arrays (voxelizer, line voxelizer, snow ground).
#pragma once

// Work balanced over variable-sized items: ends[] is the inclusive scan of each owner's
// item count, and a thread with global item number `item` finds its owner as the first
// o with ends[o] > item (0 ≤ item < ends[n_owners - 1]; n_owners ≥ 1).
__device__ __forceinline__ long long owner_of(const long long* __restrict__ ends, long long n_owners, long long item)
{
    long long lo = 0, hi = n_owners - 1;
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (ends[mid] > item) hi = mid; else lo = mid + 1;
    }
    return lo;
}

// First index i in [0, n) with sorted[i] >= key (n when every entry is smaller).
__device__ __forceinline__ long long lower_bound(const long long* __restrict__ sorted, long long n, long long key)
{
    long long lo = 0, hi = n;
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (sorted[mid] < key) lo = mid + 1; else hi = mid;
    }
    return lo;
}

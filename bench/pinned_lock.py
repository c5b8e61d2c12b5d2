"""What page-locking a host block costs and where (issue 24: a 65M level set's φ needing a
larger pinned block took ~60–140 ms once a size class, ``surface_host_copy.host_copy``): per size,
``cudaHostAlloc`` (CuPy's ``PinnedMemory``, as the pools make blocks), then the same bytes as
fresh NumPy memory written once (the pages faulted in and zeroed, no driver) and that memory
registered (``cudaHostRegister``: the pinning and the device's mapping alone), ms on the host.

    python3 bench/pinned_lock.py [--mib 64 256 768]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main():
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, nargs="+", default=[64, 256, 768])
    args = ap.parse_args()
    from cupy.cuda import pinned_memory, runtime

    cp.zeros(1).get()  # the context made before any timing
    print("MiB | cudaHostAlloc ms | NumPy fault-in ms | cudaHostRegister ms | unregister ms")
    print("--- | --- | --- | --- | ---")
    for mib in args.mib:
        size = mib << 20
        a = time.perf_counter()
        block = pinned_memory.PinnedMemory(size, runtime.hostAllocPortable)
        b = time.perf_counter()
        del block
        host = np.empty(size, np.uint8)
        c = time.perf_counter()
        host.fill(0)
        d = time.perf_counter()
        runtime.hostRegister(host.ctypes.data, size, 0)
        e = time.perf_counter()
        runtime.hostUnregister(host.ctypes.data)
        f = time.perf_counter()
        ms = [(y - x) * 1e3 for x, y in ((a, b), (c, d), (d, e), (e, f))]
        print(f"{mib} | " + " | ".join(f"{v:.1f}" for v in ms), flush=True)


if __name__ == "__main__":
    main()

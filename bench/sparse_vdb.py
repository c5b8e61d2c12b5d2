"""Write time of sparse grids to OpenVDB through Blender's bundled module (issue 11).

    .venv/bin/python bench/sparse_vdb.py [--max-bricks N]

Per case: bricks (random positions in a 4096³ lattice), kind (leaves with varying
values, or constant bricks written as tiles), seconds to build the VDB grid, seconds to
write the file, µs per brick, file size. Host only (bpy's openvdb module).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
import bpy  # noqa: E402,F401

from voxfx.addon import sparse_vdb  # noqa: E402
from voxfx.addon.writeback import openvdb_module  # noqa: E402
from voxfx.kernels.grid.sparse import SparseGrid, Topology, brick_keys  # noqa: E402


def shell_keys(n):
    """About *n* bricks on a spherical shell two bricks thick (a voxelized surface)."""
    r = np.sqrt(n / (4 * np.pi * 2))
    ax = np.arange(-int(r) - 3, int(r) + 4)
    b = np.stack(np.meshgrid(ax, ax, ax, indexing="ij"), -1).reshape(-1, 3)
    d = np.sqrt((b.astype(float) ** 2).sum(axis=1))
    return brick_keys(b[(d > r - 1) & (d <= r + 1)])


def grid_of(n, constant, layout, seed=0):
    rs = np.random.default_rng(seed)
    if layout == "shell":
        keys = np.sort(shell_keys(n))
    else:
        keys = np.unique(brick_keys(rs.integers(-256, 256, (int(n * 1.05) + 16, 3))))[:n]
    g = SparseGrid(Topology.from_keys(keys))
    d = g.add_channel("density", np.float32)
    d[:] = 1.0 if constant else rs.random(d.shape, np.float32) + np.float32(0.01)
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bricks", type=int, default=100_000)
    args = ap.parse_args()
    vdb = openvdb_module()
    print("bricks | layout | kind | build s | write s | µs per brick | file MiB")
    print("---|---|---|---|---|---|---")
    for n in (10_000, 100_000, 1_000_000):
        if n > args.max_bricks:
            continue
        for layout, constant in (("shell", False), ("shell", True), ("random", False)):
            if layout == "random" and n > 100_000:
                continue
            g = grid_of(n, constant, layout)
            n = g.topology.count
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                out = sparse_vdb._vdb_grid(vdb, "density", g, "density", "FOG_VOLUME")
                t1 = time.perf_counter()
                path = Path(tmp) / "b.vdb"
                vdb.write(str(path), [out])
                t2 = time.perf_counter()
                size = path.stat().st_size
            kind = "constant (tiles)" if constant else "leaves"
            print(f"{n:,} | {layout} | {kind} | {t1 - t0:.2f} | {t2 - t1:.2f} | "
                  f"{(t2 - t0) / n * 1e6:.1f} | {size / 2**20:.1f}", flush=True)
            del g, out


if __name__ == "__main__":
    main()

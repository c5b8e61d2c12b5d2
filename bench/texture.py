"""Texture colour benchmark (issue 15): ms to sample the texture colour of every surface
voxel of a UV sphere (lat-long UVs, 256 × 128 quads, a 2048² image) at resolution N.

    python3 bench/texture.py [--sizes 128 256] [--gpu]

Per N: surface voxels, ms of ``texture_colors`` alone (the owner triangles are computed
once before; best of 3; on the GPU after a warm-up, synchronised, inputs already on the
device), and ns per voxel. Run with --gpu --sizes 512 1024 on the GPU machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.grid import GridSpec  # noqa: E402
from voxfx.kernels.voxelize import voxelize  # noqa: E402
from voxfx.kernels.voxelize.attributes import owner_triangles  # noqa: E402
from voxfx.kernels.voxelize.texture import texture_colors, voxel_centres  # noqa: E402


def uv_sphere(segments=256, rings=128):
    """(vertices, triangles, corner uvs) of a unit sphere; the seam column is duplicated."""
    u = np.linspace(0, 1, segments + 1)
    v = np.linspace(0, 1, rings + 1)
    uu, vv = np.meshgrid(u, v)
    theta, phi = uu * 2 * np.pi, vv * np.pi
    verts = np.stack([np.sin(phi) * np.cos(theta), np.sin(phi) * np.sin(theta), -np.cos(phi)], -1).reshape(-1, 3)
    uvs = np.stack([uu, vv], -1).reshape(-1, 2)
    idx = np.arange((rings + 1) * (segments + 1)).reshape(rings + 1, segments + 1)
    a, b, c, d = idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]
    tris = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return verts.astype(np.float32), tris.astype(np.int32), uvs[tris].astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    xp, sync = np, lambda: None
    if args.gpu:
        import cupy

        xp, sync = cupy, cupy.cuda.Device().synchronize
    verts, tris, uvs = uv_sphere()
    image = np.random.default_rng(0).random((2048, 2048, 4)).astype(np.float32)
    image_of_triangle = np.zeros(len(tris), np.int32)
    print(f"{'N':>6}{'voxels':>12}{'ms':>10}{'ns/voxel':>10}  ({xp.__name__}, {len(tris):,} triangles, 2048² image)")
    for n in args.sizes:
        spec = GridSpec.around(np.full(3, -1.0), np.full(3, 1.0), 2.0 / n)
        grid = voxelize(verts, tris, spec, "surface", xp=xp)
        owner = owner_triangles(verts, tris, spec, grid.bits, xp=xp)
        centres = voxel_centres(backend_numpy(grid.coordinates()), spec)
        inputs = [xp.asarray(a) for a in (centres, owner, verts, tris, uvs, image_of_triangle)]
        if args.gpu:
            texture_colors(*inputs, [image], xp=xp)
        best = float("inf")
        for _ in range(3):
            sync()
            t = time.perf_counter()
            texture_colors(*inputs, [image], xp=xp)
            sync()
            best = min(best, time.perf_counter() - t)
        print(f"{n:>6}{len(owner):>12,}{best * 1e3:>10.1f}{best * 1e9 / len(owner):>10.1f}")


def backend_numpy(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


if __name__ == "__main__":
    main()

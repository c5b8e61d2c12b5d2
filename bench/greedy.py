"""Greedy block mesh benchmark (issue 15): ms and quads before/after for a solid sphere
with banded colours (eight labels by height) and for a terrain-like height field.

    python3 bench/greedy.py [--sizes 256 512] [--gpu]

Per case: exterior faces (the per-face block mesh, ``blocks.exterior_faces``), greedy
quads, ms of each (best of 3; on the GPU after a warm-up, synchronised). The 1024³ line
is an estimate: both face counts grow with the surface (N²) and the time with the face
count, so the 512³ numbers scale by 4 (quads too: from 256 to 512 both grow 4×); pass
--sizes 1024 to measure it (1 GiB of dense bools to build the test grid on the host).

--layers L (CPU) also times the split job's merge (``art_outputs``: the faces of z-slabs
of L rows merged in parts by ``GreedyBuilder``, runs joined across slab borders) and
checks that its mesh is the whole grid's.
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
from voxfx.kernels.grid import GridSpec, bitgrid  # noqa: E402
from voxfx.kernels.voxelize.blocks import exterior_faces  # noqa: E402
from voxfx.kernels.voxelize.greedy import GreedyBuilder, greedy_faces  # noqa: E402


def sphere(n):
    c = np.arange(n, dtype=np.float32) - (n - 1) / 2
    dense = np.zeros((n, n, n), bool)
    for k in range(n):  # slice by slice: no n³ float temporaries
        dense[k] = c[k] ** 2 + c[:, None] ** 2 + c[None, :] ** 2 <= (0.45 * n) ** 2
    k = np.nonzero(dense)[0]
    return dense, (k * 8 // n).astype(np.int64)


def terrain(n):
    i = np.arange(n)
    height = (0.3 + 0.15 * np.sin(i[None, :] * 6.0 / n) * np.cos(i[:, None] * 4.0 / n)) * n
    dense = np.arange(n)[:, None, None] < height[None, :, :]
    k = np.nonzero(dense)[0]
    return dense, (k * 5 // n).astype(np.int64)  # five strata


def timed(fn, sync, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        sync()
        t = time.perf_counter()
        out = fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return out, best * 1e3


def split_merge(bits, spec, labels, layers):
    """The greedy mesh from z-slabs of *layers* rows (the split job's way)."""
    from voxfx.kernels.voxelize.art_outputs import slab_exposed_faces

    builder, base, nz = GreedyBuilder(spec), 0, spec.shape[2]
    for k0 in range(0, nz, layers):
        k1 = min(k0 + layers, nz)
        for d, ijk, rank in slab_exposed_faces(bits, spec, k0, k1):
            builder.add(d, ijk, labels[rank + base], rank + base)
        base += bitgrid.count(bits[k0:k1])
    return builder.finish()[0]


def case(name, make, n, xp, sync, warm_up, layers=None):
    dense, labels = make(n)
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n, n))
    bits = xp.asarray(bitgrid.pack(dense))
    labels = xp.asarray(labels)
    del dense
    if warm_up:  # compile CuPy's kernels
        greedy_faces(bits, spec, labels)
    per_face, t_face = timed(lambda: exterior_faces(bits, spec), sync)
    mesh, t_greedy = timed(lambda: greedy_faces(bits, spec, labels), sync)
    assert mesh.faces_before == per_face.face_count
    split = ""
    if layers and xp is np:
        merged, t_split = timed(lambda: split_merge(bits, spec, labels, layers), sync, repeat=1)
        assert np.array_equal(merged.quads, mesh.quads) and np.array_equal(merged.vertices, mesh.vertices)
        split = f"{t_split:>12.0f}"
    print(f"{name:<14}{n:>6}{mesh.faces_before:>12,}{mesh.quad_count:>11,}"
          f"{mesh.faces_before / max(mesh.quad_count, 1):>8.1f}{t_face:>13.0f}{t_greedy:>11.0f}{split}")
    return n, mesh.faces_before, mesh.quad_count, t_face, t_greedy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--layers", type=int, help="also merge in z-slabs of this many rows (CPU)")
    args = parser.parse_args()
    xp, sync = np, lambda: None
    if args.gpu:
        import cupy

        xp, sync = cupy, cupy.cuda.Device().synchronize
    print(f"{'case':<14}{'N':>6}{'faces':>12}{'quads':>11}{'ratio':>8}{'per-face ms':>13}{'greedy ms':>11}"
          + (f"{'slabs ms':>12}" if args.layers and not args.gpu else "") + f"  ({xp.__name__})")
    for name, make in (("sphere", sphere), ("terrain", terrain)):
        last = None
        for n in args.sizes:
            last = case(name, make, n, xp, sync, args.gpu, args.layers)
        n, faces, quads, t_face, t_greedy = last
        if n < 1024:
            s = (1024 / n) ** 2
            print(f"{name + ' (est.)':<14}{1024:>6}{int(faces * s):>12,}{int(quads * s):>11,}"
                  f"{'':>8}{t_face * s:>13.0f}{t_greedy * s:>11.0f}   from N={n}: faces, quads, ms × (1024/N)²")


if __name__ == "__main__":
    main()

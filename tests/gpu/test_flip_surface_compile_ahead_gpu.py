"""The GPU level set makes the crowded cells' sort's kernels at its first call
(``surface_gpu._compile_crowded_order``), so a later level set whose binning cells are
crowded needs no kernel the process has not made yet (the 8M dam break's frame 5 with Fast
spent ~0.9 s compiling them). Each process here starts from an empty CuPy kernel cache
(``CUPY_CACHE_DIR`` a fresh folder): every kernel it makes is a new file there. Without the
compile-ahead (``VOXFX_LEVEL_SET_COMPILE_AHEAD=0``) the crowded level set adds files, so the
count can tell the two apart."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CROWDED_AFTER_FIRST = r"""
import json, os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[1])
from tools.package import load
load()
import cupy
from tests.gpu.test_flip_surface_bricks_gpu import liquid_in_a_box
from voxfx.kernels.flip import surface_gpu
from voxfx.kernels.flip.surface import closed_level_set, surface_radii

cache = Path(sys.argv[2])
rng = np.random.default_rng(5)
spec, pos = liquid_in_a_box(rng)  # ~8 points a binning cell, at most ~64 in a corner: none crowded
r, R = surface_radii(spec.voxel_size, 8)
origin, edge, _ = surface_gpu._cell_grid(spec, R)
middle = np.asarray(origin) + (np.floor((np.asarray(spec.origin) + np.asarray(spec.upper) - 2 * np.asarray(origin))
                                        / (2 * edge)) + 0.5) * edge  # a binning cell's centre near the box's


def pile(at):  # 1,100 points in the binning cell centred at *at*: over SORT_CELL_MAX
    return (at + rng.uniform(-0.2, 0.2, (1100, 3)) * edge).astype(np.float32)


one = np.concatenate([pos, pile(middle)])
two = np.concatenate([one, pile(middle + [2 * edge, 0, 0])])
out = {}
for mode in ("lean", "bricks"):  # 32-bit and 64-bit tags: a sort of each
    os.environ["VOXFX_LEVEL_SET"] = mode
    files = []
    for points, limit in ((pos, 1024), (one, 1024), (two, 1024), (pos, 2)):  # none, 1, 2, most cells crowded
        surface_gpu.SORT_CELL_MAX = limit
        closed_level_set(cupy.asarray(points), spec, r, R, xp=cupy)
        cupy.cuda.Device().synchronize()
        files.append(len(list(cache.glob("*.cubin"))))
    out[mode] = files
print("RESULT " + json.dumps(out))
"""


def _kernel_files(tmp_path, ahead):
    """{mode: [kernel cache files after a level set with none, one, two, most cells crowded]} in
    a fresh process (``VOXFX_LEVEL_SET_COMPILE_AHEAD`` *ahead*)."""
    cache = tmp_path / f"ahead{ahead}"
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CUPY_CACHE_IN_MEMORY", "VOXFX_KERNEL_CACHE")}
    env.update(CUPY_CACHE_DIR=str(cache), VOXFX_LEVEL_SET_COMPILE_AHEAD=str(ahead))
    run = subprocess.run([sys.executable, "-c", CROWDED_AFTER_FIRST, str(ROOT), str(cache)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_crowded_level_sets_make_no_kernel_after_the_first_level_set(tmp_path):
    ahead = _kernel_files(tmp_path, 1)
    without = _kernel_files(tmp_path, 0)
    for mode in ("lean", "bricks"):  # after the first: one, two and most cells crowded
        assert ahead[mode][0] > 0 and set(ahead[mode][1:]) == {ahead[mode][0]}, (mode, ahead)
    assert without["lean"][1] > without["lean"][0], without  # the count sees kernels made late

"""The big-scene rows of ``bench/flip_sparse.py`` (issue 12) are the scenes the issue
names: 65M particles at 512³, and a 2048-cell long box with ≥ 100M particles that the
dense solver cannot hold on one 80 GB GPU while the sparse one can (by the estimates)."""

import sys

import numpy as np

from tests.conftest import ROOT
from voxfx.kernels.flip.sim import flip_memory
from voxfx.kernels.flip.sparse_memory import sparse_flip_memory

sys.path.insert(0, str(ROOT / "bench"))
import flip_sparse  # noqa: E402

GPU = object()  # any module but NumPy: the estimates' device branch
GIB = 2 ** 30


def test_the_river_row_is_a_scene_dense_cannot_hold():
    n, particles = flip_sparse.ROWS["river"]
    spec, v, t = flip_sparse.river(n, particles)
    assert max(spec.shape) == 2048 and spec.shape[0] > spec.shape[1]  # a long box
    inside = np.minimum(v.max(axis=0), spec.upper) - np.maximum(v.min(axis=0), spec.origin)  # the box's part
    cells = float(np.prod(inside)) / spec.voxel_size ** 3
    assert 8 * cells >= 100_000_000
    assert flip_memory(spec, 8 * cells, xp=GPU) > 80 * GIB
    assert sparse_flip_memory(spec, 8 * cells, xp=GPU) < 40 * GIB


def test_the_65m_row_is_the_issues_scene():
    n, particles = flip_sparse.ROWS["65m"]
    spec, v, t = flip_sparse.scene(n, particles, "dam")
    assert spec.shape == (512, 512, 512) and 64e6 <= particles <= 66e6

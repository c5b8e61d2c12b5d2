"""The device topology past ``MAX_MARGIN`` (issue 24: the 65M dam break with Fast timing
moved spray ~100 cells a substep, past the masks' 64, and every frame from the fourth built
its bricks on the array path, 5–10 s a frame): ``VOXFX_SPARSE_REACH``'s classes
(``flip_sparse_reach.cu``) over a closed domain's brick index give the bricks, slots and
tables of the NumPy reference (``topology_keys(..., reach=)``) at per-brick margins up to
``CLASS_MAX_MARGIN`` on the device (no array fall-back), with the margin given and learned
on the device; at every margin they give the masks' topology; past the limit, with
the masks alone (``masks``) or in an open domain (no index), the array path builds the same
bricks."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_margins_gpu import counting, same, scene
from voxfx.kernels.flip import sparse_reach, sparse_topology_gpu
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid, speed_squared, substep_margin

DT, GRAVITY = 1 / 30, 9.81


def run(monkeypatch, closed, fast, steps=4, learn=False, mode=None):
    """The CPU and GPU grids through a first build (the liquid slow) and *steps* − 1 substeps
    with splash particles at up to *fast* m/s; the same topology after each. Returns (which
    substeps the device served, the margins)."""
    import cupy

    monkeypatch.delenv("VOXFX_SPARSE_TOPOLOGY", raising=False)
    if mode is None:
        monkeypatch.delenv("VOXFX_SPARSE_REACH", raising=False)
    else:
        monkeypatch.setenv("VOXFX_SPARSE_REACH", mode)
    served = counting(monkeypatch)
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, closed, fast, n=12000)
    cpu, gpu = SparseFlipGrid(spec, np, closed), SparseFlipGrid(spec, cupy, closed)
    margins = []
    v = (vel * np.float32(0.01)).astype(np.float32)  # the first build within the masks
    for step in range(steps):
        if step:  # a substep moves the particles within the last update's margins, then the splash is fast
            pos = (pos + v * np.float32(DT * 0.25)).astype(np.float32)
            vel = (vel * np.float32(0.97) + rng.normal(0, 0.05, vel.shape)).astype(np.float32)
            v = vel
        margin = substep_margin(float(np.sqrt(speed_squared(v, np).max())), DT, spec.voxel_size, GRAVITY)
        margins.append(margin)
        cpu.update(pos, margin, reach=BrickReach(v, DT, GRAVITY, spec.voxel_size))
        gpu.update(cupy.asarray(pos), None if learn and step else margin,
                   reach=BrickReach(cupy.asarray(v), DT, GRAVITY, spec.voxel_size))
        same(cpu, gpu)
    return served, margins


@pytest.mark.parametrize("fast", [40.0, 100.0])  # margins ~91 and ~219 cells: past the masks' 64
def test_classes_serve_margins_past_the_masks(monkeypatch, fast):
    served, margins = run(monkeypatch, True, fast)
    assert margins[0] <= sparse_topology_gpu.MAX_MARGIN < min(margins[1:])
    assert max(margins) <= sparse_reach.CLASS_MAX_MARGIN
    assert all(served) and len(served) == 4  # every substep on the device


def test_a_learned_margin_past_the_masks_moves_to_the_classes(monkeypatch):
    """margin None (``step``'s device margin): the masks at the last substep's radius find the
    splash beyond it, learn the true margin and run again by classes: no array fall-back."""
    served, margins = run(monkeypatch, True, 60.0, learn=True)
    assert min(margins[1:]) > sparse_topology_gpu.MAX_MARGIN
    assert all(served) and len(served) >= 4  # the first substep past the masks runs twice (beyond, then classes)


@pytest.mark.parametrize("fast", [2.0, 8.0, 27.5])
@pytest.mark.parametrize("update", ["fused", "table"])
@pytest.mark.parametrize("mode", ["classes", "masks"])
def test_classes_and_masks_give_the_same_topology(monkeypatch, fast, update, mode):
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_UPDATE", update)
    served, margins = run(monkeypatch, True, fast, steps=5, mode=mode)
    assert all(served) and max(margins) <= sparse_topology_gpu.MAX_MARGIN


@pytest.mark.parametrize("closed,mode", [(True, "masks"), (False, None)], ids=["masks", "open"])
def test_past_the_masks_without_classes_the_array_path_builds_the_same(monkeypatch, closed, mode):
    served, margins = run(monkeypatch, closed, 40.0, steps=2, mode=mode)
    assert margins[1] > sparse_topology_gpu.MAX_MARGIN
    assert served == [True, False]


@pytest.mark.parametrize("learn", [False, True], ids=["given", "learned"])
def test_classes_serve_margins_past_256_in_a_small_closed_box(monkeypatch, learn):
    """Past ``CLASS_MAX_MARGIN`` (h20g): the scene's closed 160×128×96 box (an index of 22×18×14 entries,
    fewer than a walk at 256 takes) serves splash margins of ~300–330 cells by classes (``class_limit``),
    the CPU's topology, no array fall-back — the 65M Fast frames 10–11 (~300 cells a substep) built on the
    array path for 22–34 s a frame."""
    served, margins = run(monkeypatch, True, 150.0, learn=learn)
    assert max(margins[1:]) > sparse_reach.CLASS_MAX_MARGIN
    assert all(served) and len(served) >= 4

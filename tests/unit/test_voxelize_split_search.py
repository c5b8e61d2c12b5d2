"""The resolution a refusal names is one that runs (issue 21 §6): for a .vox file over its
32-bit chunk sizes, the largest resolution whose exact voxel count fits (it is accepted,
the next one up is refused); for a Blocks/.vox or Volume + Blocks/.vox job whose split
does not fit even with one row per slab, the largest resolution whose job fits whole or
split (it passes the guard with its exact counts, and the next one up does not)."""

import re

import numpy as np
import pytest

from tests.unit.test_voxelize_slab_outputs import colored_soup
from tests.unit.test_voxelize_slabs import primitive
from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import bitgrid
from voxfx.kernels.voxelize import guard as guard_module
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.guard import MemoryGuard
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.slab_outputs import row_counts
from voxfx.kernels.voxelize.slabs import SplitMesh
from voxfx.kernels.voxelize.split_plan import attribute_split_estimate, mixed_split_estimate
from voxfx.kernels.voxelize.split_search import fit_powers


def guard_for(soup, request, usable):
    return MemoryGuard(soup, None, request, True, *soup.bounds, usable=usable)


def counts_at(guard, r):
    spec = guard.spec_at(r)
    bits = voxelize(guard.soup.vertices, guard.soup.triangles, spec, guard.request.mode, vote=True, xp=np).bits
    rows = row_counts(bits, "blocks" in guard.request.outputs)
    return spec, bits, bitgrid.count(bits), int(rows[1].sum()) if rows[1] is not None else None


def test_fit_powers_recovers_a_surface_and_volume_growth():
    n = lambda r: 7 * r * r + 3 * r ** 3  # noqa: E731
    fit = fit_powers(20, n(20), 90, n(90), 2, 3)
    assert all(fit(r) == n(r) for r in (5, 40, 64, 200))
    row = lambda r: 11 * r + 2 * r * r  # noqa: E731
    fit = fit_powers(16, row(16), 100, row(100), 1, 2)
    assert all(fit(r) == row(r) for r in (8, 50, 300))


@pytest.mark.parametrize("mode,outputs", [("solid+surface", {"vox"}), ("surface", {"vox", "blocks"})])
def test_the_vox_resolution_named_is_accepted_and_the_next_one_up_refused(monkeypatch, mode, outputs):
    v, t, spec = primitive("monkey", 40)
    soup = colored_soup(v, t)
    request = Request(mode=mode, resolution=40, outputs=outputs)
    probe = guard_for(soup, request, 1 << 40)
    _, bits, voxels, faces = counts_at(probe, 40)
    monkeypatch.setattr(guard_module, "VOX_MAX_VOXELS", voxels // 3)
    with pytest.raises(InputError) as refused:
        guard_for(soup, request, 1 << 40).check_after(spec, voxels, faces, bits)
    text = str(refused.value)
    assert "\n" not in text and "MagicaVoxel file holds at most" in text, text
    best = int(re.search(r"choose Resolution (\d+) or lower", text).group(1))
    assert 2 < best < 40
    for r, accepted in ((best, True), (best + 1, False)):
        g = guard_for(soup, request, 1 << 40)
        s, b, n, f = counts_at(g, r)
        assert (n <= voxels // 3) == accepted, (r, n)
        if accepted:
            g.check_after(s, n, f, b)
        else:
            with pytest.raises(InputError, match="MagicaVoxel file holds at most"):
                g.check_after(s, n, f, b)


def one_row(guard, spec, bits, faces):
    mesh = SplitMesh(guard.soup.vertices, guard.soup.triangles, spec)
    rows = row_counts(bits, "blocks" in guard.request.outputs)
    if "volume" in guard.request.outputs:
        return mixed_split_estimate(spec, guard.request, mesh, True, rows, faces or 0, 1, 1, base=guard.base_bytes())
    return attribute_split_estimate(spec, guard.request, mesh, rows, faces or 0, 1, base=guard.base_bytes())


@pytest.mark.parametrize("when", ["after a failed one-row split", "before voxelizing"])
@pytest.mark.parametrize("outputs", [{"blocks"}, {"blocks", "vox"}, {"volume", "blocks"}],
                         ids=lambda o: "+".join(sorted(o)))
def test_the_resolution_named_runs_whole_or_split_and_the_next_one_up_does_not(outputs, when):
    v, t, spec = primitive("monkey", 96)
    soup = colored_soup(v, t)
    request = Request(mode="solid+surface", resolution=96, outputs=outputs)
    probe = guard_for(soup, request, 1 << 40)
    _, bits, voxels, faces = counts_at(probe, 96)
    guard = guard_for(soup, request, 0)
    with pytest.raises(InputError) as refused:
        if when == "before voxelizing":
            guard.usable = probe.estimate(spec)["total"] - 1
            guard.check_before(spec)
        else:
            guard.usable = one_row(probe, spec, bits, faces) - 1  # not even one row per slab fits at 96
            guard.check_before(spec)
            guard.check_after(spec, voxels, faces, bits)
    usable = guard.usable
    text = str(refused.value)
    assert "\n" not in text, text
    best = int(re.search(r"largest resolution that fits, whole or split into z-slabs, is (\d+)", text).group(1))
    assert 2 < best < 96
    # the size named passes the guard (whole or split) with its own exact counts ...
    g = guard_for(soup, request, usable)
    s, b, n, f = counts_at(g, best)
    g.check_before(s)
    g.check_after(s, n, f, b)
    assert g.split_layers is not None or guard_for(soup, request, 1 << 40).estimate(s, n, f)["total"] <= usable
    # ... and is larger than the largest size whose whole job fits
    assert best > guard_for(soup, request, usable).largest_resolution(96, (voxels, faces))
    # the next one up is refused
    g = guard_for(soup, request, usable)
    s, b, n, f = counts_at(g, best + 1)
    with pytest.raises(InputError):
        g.check_before(s)
        g.check_after(s, n, f, b)


def test_a_sparse_vox_over_its_bound_names_the_largest_resolution_under_it(monkeypatch):
    """The sparse job's .vox (its exact count known after voxelizing, before any per-voxel
    array) is refused as the dense one is: the resolution named has at most the bound's
    voxels and the next one up more. It used to be refused only when the file was written,
    after every output was computed, with "lower the resolution" and no size."""
    from voxfx.kernels.voxelize.sparse_outputs import compute_group_sparse

    v, t, spec = primitive("monkey", 40)
    soup = colored_soup(v, t)
    request = Request(mode="solid+surface", resolution=40, outputs={"vox"}, sparse="always")
    probe = guard_for(soup, request, 1 << 40)
    spec, _, voxels, _ = counts_at(probe, 40)
    bound = voxels // 3
    monkeypatch.setattr(guard_module, "VOX_MAX_VOXELS", bound)
    with pytest.raises(InputError) as refused:
        compute_group_sparse("Suzanne", soup, spec, request, True)
    text = str(refused.value)
    assert "\n" not in text and "MagicaVoxel file holds at most" in text, text
    best = int(re.search(r"choose Resolution (\d+) or lower", text).group(1))
    assert 2 < best < 40
    assert counts_at(probe, best)[2] <= bound < counts_at(probe, best + 1)[2]
    accepted = compute_group_sparse("Suzanne", soup, probe.spec_at(best), request, True)
    assert accepted.count == counts_at(probe, best)[2]


def test_a_vox_with_a_point_cloud_refused_for_memory_names_a_resolution_under_the_vox_bound(monkeypatch):
    """Points + .vox (never split: the point cloud) refused for memory: the resolution
    named fits the memory and the .vox's bound, not the memory alone."""
    v, t, spec = primitive("monkey", 48)
    soup = colored_soup(v, t)
    request = Request(mode="solid+surface", resolution=48, outputs={"points", "vox"})
    probe = guard_for(soup, request, 1 << 40)
    bound = counts_at(probe, 24)[2]
    monkeypatch.setattr(guard_module, "VOX_MAX_VOXELS", bound)
    s30, _, n30, f30 = counts_at(probe, 30)
    usable = probe.estimate(s30, n30, f30)["total"]  # memory alone would name 30
    assert usable < probe.estimate(spec)["total"]  # refused before voxelizing at 48
    with pytest.raises(InputError) as refused:
        guard_for(soup, request, usable).check_before(spec)
    text = str(refused.value)
    assert "\n" not in text and "host memory" in text, text
    best = int(re.search(r"largest resolution that fits is (\d+)", text).group(1))
    assert counts_at(probe, best)[2] <= bound < counts_at(probe, best + 1)[2], best
    s, b, n, f = counts_at(probe, best)
    guard_for(soup, request, usable).check_after(s, n, f, b)  # accepted whole

"""The set-up's one-launch tail on one cluster of blocks, the fast block or both
(``VOXFX_SPARSE_SETUP_TAIL_GROUP`` "cluster", "cluster16", "fast", "hybrid", "hybrid16":
mgs_tail_levels_cluster* and mgs_tail_levels_fast*, sparse_pressure_workspace_levels._tail)
against the one block ("block", the default before session 22; both on threads on the host in
tests/unit/test_cuda_sparse_setup_cluster_host.py): on fresh random scenes the workspace's sizes
and spans and every table the same, with the default tail and one from level 2 (several of the
cluster's scan chunks), ahead of the read or after it, either restriction; and a dam break's
pressure and stats bit for bit, through the set-up graph too."""

import pytest

from tests.gpu.test_flip_sparse_pressure_fuse_gpu import assert_setups_agree
from tests.pressure_solves import assert_dam_break_ways_agree

VARIABLE = "VOXFX_SPARSE_SETUP_TAIL_GROUP"


@pytest.mark.parametrize("group", ["cluster", "cluster16", "fast", "hybrid", "hybrid16"])
@pytest.mark.parametrize("restrict", ["scatter", "search"])
@pytest.mark.parametrize("tail_bound", [16384, 1 << 22])
@pytest.mark.parametrize("ahead", [False, True])
def test_gpu_cluster_tail_gives_the_same_tables(monkeypatch, group, restrict, tail_bound, ahead):
    """Two set-ups of one grid with each group: the workspace's cnt and span rows and every level's
    m, nbr, diag, up and down the same."""
    assert_setups_agree(monkeypatch, VARIABLE, restrict, tail_bound, ahead, ways=("block", group))


@pytest.mark.parametrize("setting", [(), (("VOXFX_SPARSE_SETUP_GRAPH", "1"),)])
def test_gpu_cluster_tail_gives_the_dam_breaks_pressure_bit_for_bit(monkeypatch, setting):
    """A dam break (the defaults), three frames, every level launched and with the default tail,
    and through the set-up graph: every solve's pressure and stats the same with each group."""
    import cupy

    for name, value in setting:
        monkeypatch.setenv(name, value)
    assert_dam_break_ways_agree(monkeypatch, cupy, lambda way: monkeypatch.setenv(VARIABLE, way),
                                ("block", "cluster", "cluster16", "fast", "hybrid", "hybrid16"))

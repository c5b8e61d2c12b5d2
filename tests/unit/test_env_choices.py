"""The kernels' A/B switches (``settings.env_choice``): each reads its environment variable
per call, stripped and in lower case, defaults to its first way (the P2G gather: the scatter),
lets a way given by the caller win, and refuses anything else with an error naming the variable
and its ways."""

import pytest

from voxfx.kernels import settings
from voxfx.kernels.flip import (particle_sort, sparse_g2p_gpu, sparse_g2p_marks, sparse_grid, sparse_gpu,
                                sparse_multigrid_bricks,
                                sparse_multigrid_kept, sparse_pressure_buffers,
                                sparse_pressure_brick_smooth, sparse_pressure_cells, sparse_pressure_gpu,
                                sparse_pressure_scan, sparse_pressure_scatter_ahead, sparse_pressure_setup,
                                sparse_pressure_solve_ahead, sparse_pressure_workspace_levels, sparse_scatter,
                                sparse_topology_ahead, sparse_topology_gpu, sparse_topology_tables,
                                sparse_topology_tables_ahead,
                                sparse_topology_update, sparse_transfer,
                                surface_gpu, surface_host_copy, surface_overlap, surface_place, transfer)

SWITCHES = [  # (the switch, its variable, its ways, its default)
    (sparse_gpu.gather_mode, "VOXFX_SPARSE_GATHER", sparse_gpu.GATHERS, "scatter"),
    (sparse_gpu.binning_mode, "VOXFX_SPARSE_BINNING", sparse_gpu.BINNINGS, "order"),
    (sparse_gpu.bin_count_mode, "VOXFX_SPARSE_BIN_COUNT", sparse_gpu.BIN_COUNTS, "grouped"),
    (sparse_g2p_gpu.g2p_order, "VOXFX_SPARSE_G2P", sparse_g2p_gpu.G2P_ORDERS, "cell"),
    (sparse_g2p_gpu.g2p_kernel, "VOXFX_SPARSE_G2P_KERNEL", sparse_g2p_gpu.G2P_KERNELS, "auto"),
    (sparse_g2p_gpu.g2p_corners, "VOXFX_SPARSE_G2P_CORNERS", sparse_g2p_gpu.G2P_CORNERS, "auto"),
    (sparse_g2p_gpu.g2p_block_shape, "VOXFX_SPARSE_G2P_BLOCK_SHAPE", sparse_g2p_gpu.G2P_BLOCK_SHAPES, "8x128"),
    (lambda given=None: sparse_pressure_cells.PROJECT_FLUID[sparse_pressure_cells.project_fluid(given)],
     "VOXFX_SPARSE_PROJECT_FLUID", sparse_pressure_cells.PROJECT_FLUID, "0"),
    (sparse_scatter.atomics_mode, "VOXFX_SPARSE_SCATTER_ATOMICS", sparse_scatter.ATOMICS, "paired"),
    (sparse_scatter.banks_mode, "VOXFX_SPARSE_SCATTER_BANKS", sparse_scatter.BANK_MODES, "flip"),
    (sparse_scatter.split_mode, "VOXFX_SPARSE_SCATTER_SPLIT", sparse_scatter.SPLIT_MODES, "on"),
    (sparse_scatter.rezero_mode, "VOXFX_SPARSE_SCATTER_REZERO", sparse_scatter.REZERO_MODES, "0"),
    (sparse_g2p_gpu.g2p_table_code, "VOXFX_SPARSE_G2P_TABLE_CODE", sparse_g2p_gpu.G2P_TABLE_CODES, "centred"),
    (surface_gpu.level_set_mode, "VOXFX_LEVEL_SET", surface_gpu.LEVEL_SET_MODES, "lean"),
    (surface_place.place_way, "VOXFX_LEVEL_SET_PLACE", surface_place.PLACE_WAYS, "tags-plain"),
    (surface_gpu.level_set_sums, "VOXFX_LEVEL_SET_SUMS", surface_gpu.LEVEL_SET_SUMS, "fused"),
    (lambda given=None: str(surface_gpu.gather_split(given)), "VOXFX_LEVEL_SET_GATHER_SPLIT",
     surface_gpu.GATHER_SPLITS, "4"),
    (lambda given=None: str(surface_overlap.copy_chunks(given)), "VOXFX_LEVEL_SET_COPY_CHUNKS",
     surface_overlap.COPY_CHUNKS, "8"),
    (transfer.speed_max_mode, "VOXFX_MAX_SPEED", transfer.SPEED_MAXIMA, "blocks"),
    (sparse_pressure_solve_ahead.mode, "VOXFX_SPARSE_SOLVE_AHEAD", sparse_pressure_solve_ahead.MODES, "1"),
    (sparse_pressure_solve_ahead.zero, "VOXFX_SPARSE_AHEAD_ZERO", sparse_pressure_solve_ahead.ZEROS, "sentinels"),
    (sparse_pressure_solve_ahead.gather_mode, "VOXFX_SPARSE_AHEAD_GATHER", sparse_pressure_solve_ahead.GATHERS,
     "folded"),
    (sparse_pressure_scatter_ahead.mode, "VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD", sparse_pressure_scatter_ahead.MODES,
     "1"),
    (particle_sort.mode, "VOXFX_SPARSE_PARTICLE_SORT", particle_sort.SORTS, "off"),
    (particle_sort.path, "VOXFX_SPARSE_PARTICLE_SORT_PATH", particle_sort.PATHS, "argsort"),
    (sparse_topology_gpu.topology_mode, "VOXFX_SPARSE_TOPOLOGY", sparse_topology_gpu.TOPOLOGY_MODES, "device"),
    (sparse_topology_gpu.speed_max_mode, "VOXFX_SPARSE_SPEED_MAX", sparse_topology_gpu.SPEED_MAXIMA, "warp"),
    (sparse_topology_update.topology_update_mode, "VOXFX_SPARSE_TOPOLOGY_UPDATE",
     sparse_topology_update.TOPOLOGY_UPDATES, "fused"),
    (sparse_topology_tables.tables_mode, "VOXFX_SPARSE_TOPOLOGY_TABLES", sparse_topology_tables.TABLES, "fused"),
    (sparse_topology_ahead.ahead_mode, "VOXFX_SPARSE_OCCUPIED_AHEAD", sparse_topology_ahead.AHEAD_MODES, "1"),
    (sparse_g2p_marks.marks_mode, "VOXFX_SPARSE_G2P_MARKS", sparse_g2p_marks.MARKS_MODES, "1"),
    (sparse_topology_tables_ahead.mode, "VOXFX_SPARSE_TABLES_AHEAD", sparse_topology_tables_ahead.MODES, "1"),
    (sparse_grid.margin_mode, "VOXFX_SPARSE_MARGIN", sparse_grid.MARGIN_MODES, "brick"),
    (sparse_transfer.p2g_tail, "VOXFX_SPARSE_P2G_TAIL", sparse_transfer.P2G_TAILS, "live"),
    (sparse_pressure_cells.brick_links, "VOXFX_SPARSE_LABEL_BRICK_LINKS", sparse_pressure_cells.BRICK_LINKS, "local"),
    (sparse_pressure_cells.cells_brick, "VOXFX_SPARSE_CELLS_BRICK", sparse_pressure_cells.CELLS_BRICK, "fused"),
    (sparse_pressure_setup.scan_tile_floor, "VOXFX_SPARSE_SCAN_TILE", sparse_pressure_setup.SCAN_TILE_WIDTHS, "8"),
    (sparse_pressure_workspace_levels.fuse, "VOXFX_SPARSE_SETUP_FUSE", sparse_pressure_workspace_levels.FUSE, "1"),
    (sparse_pressure_scan.scan_join, "VOXFX_SPARSE_SCAN_JOIN", sparse_pressure_scan.SCAN_JOIN, "1"),
    (sparse_pressure_scan.scan_way, "VOXFX_SPARSE_SCAN_WAY", sparse_pressure_scan.SCAN_WAYS, "1"),
    (sparse_pressure_workspace_levels.tail_group, "VOXFX_SPARSE_SETUP_TAIL_GROUP",
     sparse_pressure_workspace_levels.TAIL_GROUPS, "fast"),
    (sparse_pressure_cells.cells_pairs, "VOXFX_SPARSE_CELLS_PAIRS", sparse_pressure_cells.CELLS_PAIRS, "1"),
    (sparse_pressure_buffers.first_caps, "VOXFX_SPARSE_SETUP_FIRST_CAPS", sparse_pressure_buffers.FIRST_MODES, "grown"),
    (lambda given=None: str(sparse_multigrid_kept.keep_every(given)), "VOXFX_SPARSE_MG_KEEP",
     sparse_multigrid_kept.KEEP_WAYS, "0"),
    (lambda given=None: str(sparse_multigrid_kept.keep_from(given)), "VOXFX_SPARSE_MG_KEEP_FROM",
     sparse_multigrid_kept.FROM_WAYS, "2"),
    (sparse_pressure_gpu.early_stop, "VOXFX_SPARSE_PCG_EARLY_STOP", sparse_pressure_gpu.EARLY_STOPS, "1"),
    (sparse_multigrid_bricks.smoother, "VOXFX_SPARSE_MG_SMOOTHER", sparse_multigrid_bricks.SMOOTHERS, "brick"),
    (sparse_pressure_brick_smooth.smooth_threads, "VOXFX_SPARSE_MG_BRICK_THREADS",
     sparse_pressure_brick_smooth.SMOOTH_THREAD_WAYS, "span12"),
]
NO_GIVEN = {transfer.speed_max_mode, sparse_topology_gpu.topology_mode, sparse_topology_gpu.speed_max_mode,  # no
            sparse_topology_update.topology_update_mode, sparse_topology_tables.tables_mode,  # caller's way
            sparse_grid.margin_mode}


@pytest.mark.parametrize("switch, variable, ways, default", SWITCHES, ids=[s[1] for s in SWITCHES])
def test_each_switch_reads_its_variable_defaults_to_its_first_way_and_refuses_others(monkeypatch, switch, variable,
                                                                                      ways, default):
    monkeypatch.delenv(variable, raising=False)
    assert switch() == default
    for way in ways:
        monkeypatch.setenv(variable, f"  {way.upper()} ")
        assert switch() == way
    monkeypatch.setenv(variable, "")
    assert switch() == default
    monkeypatch.setenv(variable, "sideways")
    with pytest.raises(ValueError, match=f"^{variable} must be one of {', '.join(ways)}, not 'sideways'$"):
        switch()
    if switch not in NO_GIVEN:  # the caller's way wins over the variable
        assert switch(ways[-1]) == ways[-1]


def test_env_choice_follows_every_change_of_the_environment(monkeypatch):
    """``env_choice`` reads the variable every call: a value set, changed or removed through
    ``os.environ`` (a test's monkeypatch, a bench's ``--ab``) is the next call's way; a bad value is
    refused every call; an ``os.environ`` replaced by a plain mapping is read too. The device
    margin's switch too (its ways "1" and "0")."""
    import os

    ways = ("one", "two")
    monkeypatch.delenv("VOXFX_TEST_SWITCH", raising=False)
    for _ in range(2):  # twice: nothing kept from the first round
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"
        os.environ["VOXFX_TEST_SWITCH"] = "two"
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"
        os.environ["VOXFX_TEST_SWITCH"] = " TWO"
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways, default="two") == "two"
        del os.environ["VOXFX_TEST_SWITCH"]
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways, default="two") == "two"
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"
        monkeypatch.setenv("VOXFX_TEST_SWITCH", "three")
        for _ in range(2):
            with pytest.raises(ValueError, match="^VOXFX_TEST_SWITCH must be one of one, two, not 'three'$"):
                settings.env_choice("VOXFX_TEST_SWITCH", ways)
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways, "two") == "two"  # the caller's way
        monkeypatch.delenv("VOXFX_TEST_SWITCH")
    assert settings.env_choice("VOXFX_TEST_SWITCH", ["one", "two"]) == "one"  # a list of ways
    monkeypatch.setattr(os, "environ", {"VOXFX_TEST_SWITCH": "two"})
    assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"
    monkeypatch.undo()
    monkeypatch.delenv("VOXFX_SPARSE_DEVICE_MARGIN", raising=False)
    assert sparse_topology_gpu.device_margin() is True
    monkeypatch.setenv("VOXFX_SPARSE_DEVICE_MARGIN", " 0 ")
    assert sparse_topology_gpu.device_margin() is False
    monkeypatch.setenv("VOXFX_SPARSE_DEVICE_MARGIN", "2")
    with pytest.raises(ValueError, match="^VOXFX_SPARSE_DEVICE_MARGIN must be one of 1, 0, not '2'$"):
        sparse_topology_gpu.device_margin()


def test_cluster_blocks_reads_its_variable_unless_the_module_names_them(monkeypatch):
    """sparse_pressure_vcycle.cluster_blocks (VOXFX_SPARSE_MG_CLUSTER_BLOCKS): 8 by default, 16
    by the variable, CLUSTER_BLOCKS (a bench's variant) over the variable, nothing else."""
    from voxfx.kernels.flip import sparse_pressure_vcycle as vc

    monkeypatch.setattr(vc, "CLUSTER_BLOCKS", None)
    monkeypatch.delenv("VOXFX_SPARSE_MG_CLUSTER_BLOCKS", raising=False)
    assert vc.cluster_blocks() == 8
    monkeypatch.setenv("VOXFX_SPARSE_MG_CLUSTER_BLOCKS", " 16 ")
    assert vc.cluster_blocks() == 16
    monkeypatch.setattr(vc, "CLUSTER_BLOCKS", 8)
    assert vc.cluster_blocks() == 8
    monkeypatch.setattr(vc, "CLUSTER_BLOCKS", None)
    monkeypatch.setenv("VOXFX_SPARSE_MG_CLUSTER_BLOCKS", "12")
    with pytest.raises(ValueError, match="^VOXFX_SPARSE_MG_CLUSTER_BLOCKS must be one of 8, 16, not '12'$"):
        vc.cluster_blocks()


def test_level_set_copy_switch(monkeypatch):
    """VOXFX_LEVEL_SET_COPY (surface_host_copy.host_copy's ways): pinned by default, pageable by the
    variable or the caller, overlap (surface_overlap) by the variable; anything else refused (before any device
    work)."""
    monkeypatch.delenv("VOXFX_LEVEL_SET_COPY", raising=False)
    assert surface_host_copy.COPY_WAYS == ("pinned", "pageable", "overlap")
    assert surface_host_copy.copy_way() == "pinned"
    monkeypatch.setenv("VOXFX_LEVEL_SET_COPY", "sideways")
    with pytest.raises(ValueError, match="^VOXFX_LEVEL_SET_COPY must be one of pinned, pageable, overlap, "
                                         "not 'sideways'$"):
        surface_host_copy.host_copy(None)


def test_level_set_sort_limit_and_pinned_switches(monkeypatch):
    """VOXFX_LEVEL_SET_SORT_CELL_MAX: unset, SORT_CELL_MAX (8192 since i24f; a test may set it);
    a listed limit over it; anything else refused. VOXFX_LEVEL_SET_PINNED: "domain" unless
    "class"; anything else refused."""
    monkeypatch.delenv("VOXFX_LEVEL_SET_SORT_CELL_MAX", raising=False)
    monkeypatch.delenv("VOXFX_LEVEL_SET_PINNED", raising=False)
    assert surface_gpu.sort_cell_max() == surface_gpu.SORT_CELL_MAX == 8192
    monkeypatch.setattr(surface_gpu, "SORT_CELL_MAX", 40)
    assert surface_gpu.sort_cell_max() == 40 and surface_gpu.sort_cell_max(4096) == 4096
    monkeypatch.setenv("VOXFX_LEVEL_SET_SORT_CELL_MAX", "1024")
    assert surface_gpu.sort_cell_max() == 1024
    monkeypatch.setenv("VOXFX_LEVEL_SET_SORT_CELL_MAX", "5000")
    with pytest.raises(ValueError, match="^VOXFX_LEVEL_SET_SORT_CELL_MAX must be one of default, 1024, 2048, "):
        surface_gpu.sort_cell_max()
    assert surface_host_copy.pinned_way() == "domain" and surface_host_copy.pinned_way("class") == "class"
    monkeypatch.setenv("VOXFX_LEVEL_SET_PINNED", "class")
    assert surface_host_copy.pinned_way() == "class"
    monkeypatch.setenv("VOXFX_LEVEL_SET_PINNED", "ahead")
    with pytest.raises(ValueError, match="^VOXFX_LEVEL_SET_PINNED must be one of domain, class, not 'ahead'$"):
        surface_host_copy.pinned_way()


def test_pinned_size_classes_round_up_by_at_most_half():
    """surface_host_copy.pinned_class_bytes: 2^k or 1.5·2^k bytes, at least 1 MiB, never below the
    request and at most 1.5× it above 1 MiB; a slowly growing level set keeps its class."""
    from voxfx.kernels.flip.surface_host_copy import pinned_class_bytes

    sizes = [1, 1 << 20, (1 << 20) + 1, 3 << 19, (3 << 19) + 1, 100_000_000, 135_200_000, 162_000_000]
    got = [pinned_class_bytes(n) for n in sizes]
    assert got == [1 << 20, 1 << 20, 3 << 19, 3 << 19, 1 << 21, 3 << 25, 3 << 26, 3 << 26]
    for n in range(1 << 20, 1 << 30, 7_654_321):
        c = pinned_class_bytes(n)
        assert n <= c <= 1.5 * n and (c & (c - 1) == 0 or (c // 3) & (c // 3 - 1) == 0)


@pytest.mark.parametrize("name, default", [("fold", True)])
def test_tail_switches_read_their_variable_unless_the_module_names_them(monkeypatch, name, default):
    """sparse_pressure_vcycle.tail_fold (VOXFX_SPARSE_MG_TAIL_FOLD): its default, the variable's 0
    or 1, the module's TAIL_FOLD (a bench's variant) over the variable, nothing else."""
    from voxfx.kernels.flip import sparse_pressure_vcycle as vc

    switch, attribute = getattr(vc, f"tail_{name}"), f"TAIL_{name.upper()}"
    variable = f"VOXFX_SPARSE_MG_{attribute}"
    monkeypatch.setattr(vc, attribute, None)
    monkeypatch.delenv(variable, raising=False)
    assert switch() is default
    for value in (False, True):
        monkeypatch.setenv(variable, f" {int(value)} ")
        assert switch() is value
        monkeypatch.setattr(vc, attribute, not value)
        assert switch() is (not value)
        monkeypatch.setattr(vc, attribute, None)
    monkeypatch.setenv(variable, "2")
    with pytest.raises(ValueError, match=f"^{variable} must be one of 0, 1, not '2'$"):
        switch()


def test_env_scope_reads_each_variable_once_and_keeps_nothing_after(monkeypatch):
    """Inside ``settings.env_scope`` a variable is read from ``os.environ`` once: a change made inside
    the scope is not seen before the outermost scope ends (nested scopes share the kept values), and
    is the next call's way after it; a bad value kept inside is refused at every call; the caller's
    way still wins; another thread reads its own."""
    import os
    import threading

    ways = ("one", "two")
    monkeypatch.setenv("VOXFX_TEST_SWITCH", "one")
    with settings.env_scope():
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"
        os.environ["VOXFX_TEST_SWITCH"] = "two"
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"  # kept
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways, "two") == "two"  # the caller's way
        seen = []
        thread = threading.Thread(target=lambda: seen.append(settings.env_choice("VOXFX_TEST_SWITCH", ways)))
        thread.start()
        thread.join()
        assert seen == ["two"]  # another thread: no scope of its own, a plain read
        with settings.env_scope():  # nested: the same kept value, and still kept after it ends
            assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"
    assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"  # the scope ended: read again
    with settings.env_scope():
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"  # nothing kept from the last scope
        monkeypatch.setenv("VOXFX_TEST_SWITCH", "three")
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"
    monkeypatch.setenv("VOXFX_TEST_SWITCH", "three")
    with pytest.raises(ValueError), settings.env_scope():
        settings.env_choice("VOXFX_TEST_SWITCH", ways)
    for _ in range(2):  # the scope that raised left nothing behind: a fresh read each call
        monkeypatch.setenv("VOXFX_TEST_SWITCH", "two")
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "two"
        monkeypatch.delenv("VOXFX_TEST_SWITCH")
        assert settings.env_choice("VOXFX_TEST_SWITCH", ways) == "one"
    monkeypatch.setenv("VOXFX_TEST_SWITCH", "three")
    with settings.env_scope():  # a bad value kept is refused at each call
        for _ in range(2):
            with pytest.raises(ValueError, match="^VOXFX_TEST_SWITCH must be one of one, two, not 'three'$"):
                settings.env_choice("VOXFX_TEST_SWITCH", ways)


class _CountingEnviron(dict):
    """A stand-in for ``os.environ`` that counts the reads of each VOXFX variable."""

    def __init__(self, *args):
        super().__init__(*args)
        self.reads = {}

    def get(self, key, default=None):
        if key.startswith("VOXFX_"):
            self.reads[key] = self.reads.get(key, 0) + 1
        return super().get(key, default)


def test_a_sparse_frame_reads_each_switch_once_and_sees_changes_between_frames(monkeypatch):
    """``SparseFlipSimulation.step`` and ``level_set`` read each A/B switch once a call (their
    ``env_scope``), however many substeps and calls read it; a switch changed between frames is the
    next frame's way (a bad value there is refused by that frame), as before the scope."""
    import os

    import numpy as np

    from tests.meshes import box
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation
    from voxfx.kernels.grid import GridSpec

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 12, 16))
    sim = FlipSimulation(spec, FlipSettings(cfl=1.0), *box((0.05, 0.05, 0.05), (0.4, 0.4, 0.4)), xp=np, sparse=True)
    environ = _CountingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", environ)
    stats = sim.step(1 / 24)
    assert stats["substeps"] > 1  # several substeps read the same switches
    assert environ.reads and max(environ.reads.values()) == 1, environ.reads
    environ.reads.clear()
    sim.level_set()
    assert max(environ.reads.values(), default=1) == 1, environ.reads
    environ.reads.clear()
    sim.step(1 / 24)
    assert max(environ.reads.values()) == 1
    switch = "VOXFX_SPARSE_MARGIN"  # sparse_grid.margin_mode: read in every substep
    environ[switch] = "sideways"
    with pytest.raises(ValueError, match=f"^{switch} must be one of"):
        sim.step(1 / 24)
    del environ[switch]
    sim.step(1 / 24)

"""``sparse_topology_lean`` on the CPU (``VOXFX_SPARSE_TOPOLOGY_LEAN``, issue 24, helper s23e): the one
allocation's layout is ``carve``'s (offsets, size class) and the tables' parts fit it; the switch's reads. The
device side (the same grids to the bit, addresses as arguments) is tests/gpu/test_flip_sparse_topology_lean_gpu.py."""

import numpy as np
import pytest

from voxfx.kernels.flip import sparse_topology_lean as lean
from voxfx.kernels.flip import sparse_topology_tables_ahead as ahead
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_gpu import CELLS
from voxfx.kernels.grid.sparse_mac import CARVE_ALIGN, carve_buffer, size_class


def _offsets(buf, views) -> dict:
    start = buf.__array_interface__["data"][0]
    return {name: v.__array_interface__["data"][0] - start for name, v in views.items()}


@pytest.mark.parametrize("slots", [1, 64, 3991, 5000])
def test_layout_is_carves(slots):
    """The offsets and the (size-classed) bytes of ``layout`` are those of ``carve_buffer`` (NumPy: its views'
    places in the allocation), for counts and shapes of several dtypes."""
    cells = slots * CELLS
    parts = {"coords": (np.int32, (slots, 3)), "a": (np.uint8, cells + 3), "nbr": (np.int32, 6 * cells),
             "f": (np.float32, cells), "b": (np.uint8, 1)}
    size, at = lean.layout(parts)
    buf, views = carve_buffer(np, parts, classed=True)
    assert size == buf.nbytes == size_class(size)
    assert {name: place[0] for name, place in at.items()} == _offsets(buf, views)
    assert all(place[0] % CARVE_ALIGN == 0 for place in at.values())
    assert {name: (place[1], place[2]) for name, place in at.items()} == {
        name: (np.dtype(d), s) for name, (d, s) in parts.items()}


@pytest.mark.parametrize("slots", [64, 3991])
def test_tables_layout_holds_each_table(slots):
    """The tables' one allocation (``_thin_layout``) holds coords, nbr27 and nbr and the eight marks for
    *slots* slots, each part past the one before it and inside the bytes."""
    size, at = ahead._thin_layout(SparseFlipGrid, slots)
    names = ["coords", "nbr27", "nbr", *SparseFlipGrid.EXISTS, "wall", "solid",
             *("solid_" + n for n in SparseFlipGrid.FACES)]
    assert list(at) == names
    cells = slots * CELLS
    need = {"coords": 12 * slots, "nbr27": 108 * slots, "nbr": 24 * cells, "solid_u": 4 * cells,
            "solid_v": 4 * cells, "solid_w": 4 * cells}
    ends = [at[n][0] + need.get(n, cells) for n in names]
    starts = [at[n][0] for n in names]
    assert starts[0] == 0 and all(e <= s for e, s in zip(ends, starts[1:])) and ends[-1] <= size


def test_lean_needs_the_mode_and_kept_scalars(monkeypatch):
    """``lean`` is the mode's "1" where the scalars are made once (*on*), never without them."""
    monkeypatch.delenv("VOXFX_SPARSE_TOPOLOGY_LEAN", raising=False)
    assert lean.mode() == "0" and not lean.lean(True)
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_LEAN", "1")
    assert lean.lean(True) and not lean.lean(False)
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_LEAN", "2")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_TOPOLOGY_LEAN"):
        lean.mode()

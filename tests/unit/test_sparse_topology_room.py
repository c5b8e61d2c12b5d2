"""``VOXFX_SPARSE_TOPOLOGY_ROOM``'s sizes and switch (``sparse_topology_update.room``, ``room_mode``):
the kept scratch and outputs made for a quarter more slots (at least 64), the switch one of its
ways. The room's buffers themselves are CuPy's (``tests/gpu/test_flip_sparse_topology_gpu.py``)."""

import pytest

from voxfx.kernels.flip import sparse_topology_update


def test_room_is_a_quarter_more_slots_at_least_64():
    assert [sparse_topology_update.room(n) for n in (0, 10, 256, 257, 4000)] == [64, 74, 320, 321, 5000]
    assert all(sparse_topology_update.room(n) > n for n in range(0, 3000, 7))


def test_room_mode_reads_the_switch(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_TOPOLOGY_ROOM", raising=False)
    assert sparse_topology_update.room_mode() == sparse_topology_update.ROOMS[0]
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ROOM", " ON ")
    assert sparse_topology_update.room_mode() == "on"
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ROOM", "sometimes")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_TOPOLOGY_ROOM"):
        sparse_topology_update.room_mode()

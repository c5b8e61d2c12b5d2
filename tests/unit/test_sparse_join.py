"""``sparse_join.join_arguments``: the joined kernels' channel arguments (``cuda/sparse.cu``
``fill_slots_joined``, ``topology_cell_tables``' fills): the count, the 1-byte channels' bit mask,
the arrays, then each background as the bits the kernels store (a float32's bits: −0.0 and NaN
exactly, not equal values), padded to ``JOIN_CHANNELS`` with null pointers and zeros."""

import importlib
import math

import numpy as np
import pytest

from voxfx.kernels.grid.sparse_join import JOIN_CHANNELS, join_arguments


def test_join_arguments_carry_each_backgrounds_bits():
    a, b, c, d = (np.zeros(4, t) for t in (np.float32, np.uint8, np.float32, np.float32))
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):  # equal values, different bits, either order
        args = join_arguments([[a, first], [b, 7], [c, math.nan], [d, second]])
        assert len(args) == 2 + 2 * JOIN_CHANNELS
        n, mask, arrays, bits = args[0], args[1], args[2:2 + JOIN_CHANNELS], args[2 + JOIN_CHANNELS:]
        assert (int(n), int(mask)) == (4, 0b10)
        assert arrays[:4] == (a, b, c, d) and all(int(p) == 0 for p in arrays[4:])
        want = [np.float32(first).view(np.uint32), 7, 0x7FC00000, np.float32(second).view(np.uint32)]
        assert [int(x) for x in bits] == [int(w) for w in want] + [0] * (JOIN_CHANNELS - 4)
        assert {int(bits[0]), int(bits[3])} == {0, 0x80000000}
        assert all(x.dtype == np.uint32 for x in bits)


@pytest.mark.parametrize("variable, read, ways", [
    ("VOXFX_SPARSE_KEPT_JOIN", "voxfx.kernels.grid.sparse_join:kept_join_mode", ("joined", "each")),
    ("VOXFX_SPARSE_TOPOLOGY_FILL", "voxfx.kernels.flip.sparse_topology_tables:fill_mode", ("tables", "retopologize"))])
def test_switches_read_their_ways(monkeypatch, variable, read, ways):
    """The defaults first (the ways the device A/B measured faster); any other value an error naming
    the switch."""
    module, name = read.split(":")
    mode = getattr(importlib.import_module(module), name)
    monkeypatch.delenv(variable, raising=False)
    assert mode() == ways[0]
    monkeypatch.setenv(variable, f" {ways[1].upper()} ")
    assert mode() == ways[1]
    monkeypatch.setenv(variable, "sometimes")
    with pytest.raises(ValueError, match=variable):
        mode()

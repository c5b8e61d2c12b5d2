"""The topology stage's host calls made fewer and cheaper (issue 24, helper s23e;
``VOXFX_SPARSE_TOPOLOGY_LEAN``, "0" the A/B baseline).

bench/RESULTS.md s23e (NVIDIA H100 80GB HBM3, driver 580.159.04, ``bench/flip_sparse_topology_stage.py --fine``
at 8M, marks between the stage's calls): the stage is paced by the host from its start to its end — the
device's kernels sum to ~0.22 ms a changed substep while the host takes 0.42–0.70 ms (the row's "update" in a
quick and a slow process), and the host reaches the flags read ~15 µs before the device is done. Its pieces (a
changed substep, the pool kept, µs with the marks' own cost): the tables queued ahead 128 (thirteen pool
allocations and two launches of 23 arrays), ``fused_tables``' take 85 (thirteen views and the frees of the
thirteen arrays they replace), the fused update's three launches 65, ``mark_occupied`` 52, the update's slices
47, the scratch's memset 25 (``fill(0)`` is CuPy's checks around ``memset_async``).

With "1" (``mode``):

- the tables queued ahead of the flags read (``sparse_topology_tables_ahead``) take one allocation at its size
  class (``size_class``) in place of thirteen (the layout of ``carve``, kept by room), and their launches take
  its parts' device addresses as kept 64-bit scalars (``address``): no array made for them before the read;
  ``take`` makes the views over it at the new capacity, as before, and the set is freed with its last view;
- the stage's other launches (``mark_occupied``, ``reach_slots``, the fused update's three) take their arrays
  as kept address scalars (``pointer``: one dictionary look-up, where CuPy makes a ``CArray`` of shape and
  strides for each array at each launch);
- the kept scratch is zeroed by ``memset_async`` itself.

The kernels get the same bytes: a ``T*`` parameter is the array's first element's address, which CuPy passes
as the first field of the ``CArray`` it makes and a ``CScalar`` of ``np.uint64(address)`` passes as its value
(``sparse_topology_update._NULL`` is such a pointer). The same tables, topology and channels to the bit
(``tests/gpu/test_flip_sparse_topology_lean_gpu.py``).
"""

from __future__ import annotations

import numpy as np

from ..grid.sparse_mac import CARVE_ALIGN, size_class
from ..settings import env_choice
from . import sparse_topology_args as topology_args

MODES = ("0", "1")  # VOXFX_SPARSE_TOPOLOGY_LEAN (module notes)
_TABLE_LIMIT = 4096  # addresses kept: the table is emptied past this
_addresses: dict = {}
_layouts: dict = {}


def mode(given=None) -> str:
    """``VOXFX_SPARSE_TOPOLOGY_LEAN`` (``MODES``; module notes), or *given*."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_LEAN", MODES, given, default="0")


def lean(on: bool) -> bool:
    """Whether the stage runs lean: ``mode()`` "1" and the launches' scalars made once (*on*,
    ``sparse_topology_args.kept()``: a CuPy whose ``CScalar`` takes a NumPy scalar)."""
    return bool(on) and mode() == "1"


def address(value: int):
    """A kept ``CScalar`` of the 64-bit device address *value* (a kernel's pointer argument)."""
    hit = _addresses.get(value)
    if hit is None:
        if len(_addresses) >= _TABLE_LIMIT:
            _addresses.clear()
        hit = _addresses[value] = topology_args._cscalar()(np.uint64(value))
    return hit


def pointer(a):
    """*a*'s (a CuPy array) first element's address as a kept scalar (``address``)."""
    value = a.data.ptr
    hit = _addresses.get(value)
    return address(value) if hit is None else hit


def layout(parts) -> tuple:
    """(bytes, {name: (offset, dtype, shape)}) of ``carve``'s allocation for *parts* (``{name: (dtype,
    count or shape)}``; each part at a ``CARVE_ALIGN``-byte boundary, the bytes at their size class), kept
    by the parts' sizes."""
    key = tuple((name, dtype, shape) for name, (dtype, shape) in parts.items())
    hit = _layouts.get(key)
    if hit is not None:
        return hit
    at, out = 0, {}
    for name, (dtype, shape) in parts.items():
        dtype = np.dtype(dtype)
        count = int(shape) if isinstance(shape, (int, np.integer)) else int(np.prod([int(n) for n in shape]))
        out[name] = (at, dtype, shape)
        at += -(-count * dtype.itemsize // CARVE_ALIGN) * CARVE_ALIGN
    if len(_layouts) >= 64:
        _layouts.clear()
    hit = _layouts[key] = (size_class(max(at, CARVE_ALIGN)), out)
    return hit


def zero(base) -> None:
    """*base* (a contiguous CuPy array) zeroed by one ``memset_async`` on the current stream."""
    base.data.memset_async(0, base.nbytes)

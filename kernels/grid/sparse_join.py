"""Several flat pool channels in one launch (``cuda/sparse.cu``'s joined kernels,
``include/voxfx_join.cuh``): ``SparseMacGrid.retopologize``'s kept channels (not rewritten, not
replaced) grown and filled with their backgrounds in one launch each for up to ``JOIN_CHANNELS``
channels (``VOXFX_SPARSE_KEPT_JOIN``), and the channel arguments ``topology_cell_tables`` takes for
the same fills (``flip/sparse_topology_tables.py``). Also the per-channel fill's slot lists.

Measured (NVIDIA H100 80GB HBM3, driver 580.159.04, 8M dam break, ``bench/flip_sparse_topology_stage.py
--kept-channels``: the seven channels a time-centred substep keeps, the ways alternating in one
simulation): with the tables' fills (``VOXFX_SPARSE_TOPOLOGY_FILL``) 14 → 8 launches a changed
substep, the stage 1.153 → 0.980 ms (host after the read 719 → 515 µs).
"""

from __future__ import annotations

import numpy as np

from .launch import Kernels

_K = Kernels("sparse.cu")  # sparse_mac imports it: one instance for its launches and these
CELLS = 512  # cells per brick (sparse_mac.CELLS)
_FILLS = {np.dtype(np.float32): "fill_slots_f32", np.dtype(np.uint8): "fill_slots_u8"}
# VOXFX_SPARSE_KEPT_JOIN (kept_join_mode): retopologize's kept channels (not rewritten, not replaced) grown and
# filled in one launch for all (``join_kept``; CuPy, two or more channels) or a copy and a fill launch each
KEPT_JOINS = ("joined", "each")
JOIN_CHANNELS = 8  # cuda/sparse.cu's: the channels one joined launch takes
_NULL = np.uint64(0)  # an unused channel's pointer


def kept_join_mode() -> str:
    """``VOXFX_SPARSE_KEPT_JOIN`` (``KEPT_JOINS``): ``joined`` (the default: on CuPy, where two or
    more channels are kept, their growth copies and their fills of the added and freed slots one
    launch each for up to ``JOIN_CHANNELS`` channels: ``copy_channels_joined``,
    ``fill_slots_joined``) or ``each`` (a device copy and a fill launch a channel, the A/B
    baseline): the same channels to the bit."""
    from ..settings import env_choice

    return env_choice("VOXFX_SPARSE_KEPT_JOIN", KEPT_JOINS)


def _joinable(a, cells: int) -> bool:
    """*a* is a channel the joined kernels take: flat, contiguous, float32 or uint8, of *cells*
    items, 4-byte aligned (CuPy; ``retopologize`` asks once a channel)."""
    return a.dtype in _FILLS and a.ndim == 1 and a.shape[0] == cells and a.flags.c_contiguous and not a.data.ptr % 4


def join_arguments(entries) -> tuple:
    """The joined kernels' channel arguments for *entries* ([array, background] each, at most
    ``JOIN_CHANNELS``): n, the 1-byte channels' bits, the pointers and the backgrounds' bits (padded)."""
    pad = JOIN_CHANNELS - len(entries)
    bytes_ = sum(1 << i for i, (a, _) in enumerate(entries) if a.dtype == np.uint8)
    return (np.int32(len(entries)), np.int32(bytes_), *(a for a, _ in entries), *(_NULL,) * pad,
            *(_bits(a, bg) for a, bg in entries), *(np.uint32(0),) * pad)


def _bits(arr, value) -> np.uint32:
    """*value* in *arr*'s dtype as the joined kernels write it: a float32's bits, a byte's value."""
    if arr.dtype == np.uint8:
        return np.uint32(np.uint8(value))
    return np.float32(value).view(np.uint32)


def join_kept(xp, copies, entries, fills, cells: int) -> None:
    """``retopologize``'s kept channels on CuPy in one launch per ``JOIN_CHANNELS`` (module notes of
    ``cuda/sparse.cu``): each (old, grown) of *copies* gets its old *cells* items
    (``copy_channels_joined``), then each of *entries* ([array, background], the grown ones
    installed) its background in the slots of *fills* (``fill_slots_joined``): ``_copy_into`` and
    ``_fill_slots`` of each channel, the same bytes."""
    for at in range(0, len(copies), JOIN_CHANNELS):
        part = copies[at:at + JOIN_CHANNELS]
        pad = (_NULL,) * (JOIN_CHANNELS - len(part))
        bytes_ = sum(1 << i for i, (a, _) in enumerate(part) if a.dtype == np.uint8)
        _K.launch("copy_channels_joined", cells, (np.int64(cells), np.int32(len(part)), np.int32(bytes_),
                                                  *(a for a, _ in part), *pad, *(g for _, g in part), *pad))
    if not fills:
        return
    first = _slot_list(fills[0], xp)
    second = _slot_list(fills[1], xp) if len(fills) > 1 else first
    m1, m2 = int(first.shape[0]), int(second.shape[0]) if len(fills) > 1 else 0
    for at in range(0, len(entries), JOIN_CHANNELS):
        _K.launch("fill_slots_joined", (m1 + m2) * CELLS, (first, np.int64(m1), second, np.int64(m2),
                                                          *join_arguments(entries[at:at + JOIN_CHANNELS])))


def _fill_slots(arr, lists, value, xp):
    """Every cell of the pool slots of *lists* (one or two int32 slot arrays; a slot may be in
    both) of the flat channel *arr* ← *value*, in place: on CuPy one launch for both (8M dam
    break, H100, ``bench/flip_sparse_topology_stage.py``: 1.25–1.75 fill launches a substep, each
    ~13 µs of host, then 1.00; two calls of i24t5)."""
    kernel = _FILLS.get(arr.dtype)
    if xp is not np and kernel and arr.shape[0] < 2 ** 31:
        first = _slot_list(lists[0], xp)
        second = _slot_list(lists[1], xp) if len(lists) > 1 else first
        m1, m2 = int(first.shape[0]), int(second.shape[0]) if len(lists) > 1 else 0
        _K.launch(kernel, (m1 + m2) * CELLS, (arr, first, np.int64(m1), second, np.int64(m2), arr.dtype.type(value)))
        return
    for slots in lists:
        cells = (slots.astype(xp.int64)[:, None] * CELLS + xp.arange(CELLS, dtype=xp.int64)).ravel()
        arr[cells] = value


def _slot_list(slots, xp):
    """*slots* as the fill kernels read them: int32, contiguous (as they come, without a call)."""
    if slots.dtype == np.int32 and slots.flags.c_contiguous:
        return slots
    return xp.ascontiguousarray(slots, dtype=xp.int32)

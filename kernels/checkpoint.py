"""Simulation states: checks on those read back from files (checkpoints are untrusted
input) and the host snapshot a checkpoint is (``gather``).

A checkpoint is gathered after every baked frame. At 8M liquid particles (the dam break
at 256³) it is 247 MB: positions and velocities 192 MB, the grid velocity's bricks 23,
the kept faces' 17, the carried pressure 15; each device array used to come back through
a pageable copy (``.get()``) and was copied again (``np.array(copy=True)``). ``gather``
copies each device array once, straight into a page-locked block reused in turn
(``HostRing``): 124 → 10 ms a frame (H100 80GB HBM3, ``bench/bake_frames.py``, one call).
"""

from __future__ import annotations

import threading

import numpy as np

from .backend import to_numpy
from .settings import env_choice


def check_state(state: dict, want: dict) -> None:
    """Raise ``ValueError`` unless *state* has every key of *want* with its shape and kind.

    *want* maps a key to ``(shape, kinds)``: the exact shape and the NumPy dtype kinds
    accepted (``"f"`` float, ``"i"`` signed, ``"u"`` unsigned integer).
    """
    missing = sorted(set(want) - set(state))
    if missing:
        raise ValueError(f"the state lacks {', '.join(missing)}")
    for key, (shape, kinds) in want.items():
        value = np.asarray(state[key])
        if value.dtype.kind not in kinds:
            raise ValueError(f"'{key}' holds {value.dtype} values, not {kinds!r}-kind numbers")
        if tuple(value.shape) != tuple(shape) or any(n < 0 for n in shape):
            raise ValueError(f"'{key}' has shape {value.shape}, expected {tuple(shape)}")
        if kinds == "f" and value.size and not np.isfinite(value).all():
            raise ValueError(f"'{key}' holds NaN or infinite values")


# --------------------------------------------------------------------------- host snapshots

GATHER_ENV = "VOXFX_CHECKPOINT"  # checkpoint_mode's ways ("legacy": the old gather, pageable copies each twice)
CHECKPOINT_MODES = ("before_step", "overlap", "legacy")
_ALIGN = 256


def checkpoint_mode() -> str:
    """``before_step`` (the default: a bake makes each frame's checkpoint durable and records
    it before the next frame steps, so a kill costs at most the frame being simulated, issue
    21 §1), ``overlap`` (the checkpoint written on the writer thread beside the frame's files
    while the next frame steps: faster, 8M 485 → 379 ms a frame, but a kill may then cost the
    frame being written too, one frame more than issue 21 §1 allows: opt-in) or ``legacy``
    (``before_step`` with the gather and the write as they were before: for the A/B,
    ``bench/bake_frames.py``); read at each checkpoint, so one process can run every way."""
    return env_choice(GATHER_ENV, CHECKPOINT_MODES)


class HostState(dict):
    """A checkpoint: NumPy arrays and scalars by name, a snapshot no later step changes.
    On a GPU its arrays are views of one page-locked block of its simulation's
    ``HostRing``: ``release()`` (by whoever wrote it, once written) hands the block back
    for a later checkpoint and empties the dict; a state never released keeps its block
    (collected with it), so no block is ever reused while anything still reads it."""

    def __init__(self, values=(), block=None, ring=None):
        super().__init__(values)
        self._block, self._ring = block, ring

    def release(self) -> None:
        block, ring = self._block, self._ring
        self._block = self._ring = None
        if block is not None:
            self.clear()  # no view of a block another checkpoint may fill outlives this
            ring.give_back(block)


class HostRing:
    """Page-locked host blocks for one simulation's checkpoints, reused in turn: a bake
    gathers frame N + 1 into one while its writer thread writes frame N from the other
    (``cache_writer``). A block is reused only after its state's ``release``; none free
    (or none big enough): a new one, so the gather never waits and never overwrites.
    Keeps at most *keep* free blocks."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self._free: list = []
        self._lock = threading.Lock()

    def take(self, nbytes: int):
        """A pinned uint8 host array of at least *nbytes* (CuPy's ``alloc_pinned_memory``;
        pageable when page-locked memory runs out)."""
        with self._lock:
            for i, block in enumerate(self._free):
                if block.nbytes >= nbytes:
                    return self._free.pop(i)
        import cupy as cp

        size = (int(nbytes * 1.125) + (1 << 20) - 1) >> 20 << 20  # 1/8 headroom: particles come and go
        try:
            return np.frombuffer(cp.cuda.alloc_pinned_memory(size), np.uint8, size)
        except cp.cuda.runtime.CUDARuntimeError:
            return np.empty(size, np.uint8)

    def give_back(self, block) -> None:
        with self._lock:
            self._free.append(block)
            del self._free[:-self.keep]


def gather(values: dict, ring: HostRing | None = None) -> HostState:
    """*values* (NumPy or CuPy arrays, scalars) as a ``HostState`` of NumPy copies.

    CuPy arrays go straight into one block of *ring* (each at a 256-byte offset): one
    asynchronous device → page-locked copy each on the current stream, after the work
    that made them, and one synchronisation. NumPy arrays are copied (the live state
    never leaks into a checkpoint). *ring* None or the legacy mode (``checkpoint_mode``):
    each array through ``backend.to_numpy`` and copied again, as before."""
    legacy = ring is None or checkpoint_mode() == "legacy"
    device = {k: v for k, v in values.items() if type(v).__module__.startswith("cupy")}
    if legacy or not device:
        return HostState({k: _host_copy(v) for k, v in values.items()})
    import cupy as cp

    offsets, total = {}, 0
    for key, a in device.items():
        offsets[key] = total
        total += -(-a.nbytes // _ALIGN) * _ALIGN
    block = ring.take(total)
    stream = cp.cuda.get_current_stream()
    out = {}
    for key, value in values.items():
        if key not in device:
            out[key] = _host_copy(value)
            continue
        a = cp.ascontiguousarray(value)
        view = np.frombuffer(block, a.dtype, a.size, offsets[key]).reshape(a.shape)
        if a.nbytes:
            cp.cuda.runtime.memcpyAsync(view.ctypes.data, a.data.ptr, a.nbytes,
                                        cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        out[key] = view
    stream.synchronize()
    return HostState(out, block, ring)


def _host_copy(value):
    if isinstance(value, np.generic):
        return value
    return np.array(to_numpy(value), copy=True)

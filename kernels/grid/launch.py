"""Launching CUDA kernels: one helper for every effect.

``Kernels(file, options, threads, defines)`` stands for the kernels of one ``.cu`` file of
``kernels/cuda/`` compiled once per device with fixed options (``backend.load_module``).
``k.launch(name, n, args)`` runs *name* with one thread per item (``blocks(n)`` blocks of
``threads``); ``k.launch_grid`` takes an explicit grid and block for the kernels that
need one (fixed-size reductions). ``defines`` become ``-DNAME=value`` options, so that a
constant lives in Python and reaches the CUDA code from there (``constants.py``).

``GraphLoop(record)`` is a fixed launch sequence (the inner loop of a solver) recorded
once as a CUDA graph by stream capture and replayed; where capture is not available (an
old CuPy or driver) it launches the sequence one kernel at a time instead. Compile every
kernel the sequence uses (``k.load``) before the first replay: compiling is not allowed
during capture. A loop holds its owner's method weakly (``record`` a bound method, *args*
for its arguments): a solver that keeps its loops would otherwise sit in a reference cycle,
and its device buffers would outlive it until Python's next cyclic collection (issue 21 §6:
at 65M particles two dropped PCG solvers, ~1.2 GiB, were still held at frame 14).
"""

from __future__ import annotations

import inspect
import weakref

import numpy as np

from .. import backend

THREADS = 256  # a multiple of 32: kernels that reduce per warp rely on it

_COMPILES: dict = {}  # .cu file → the option sets it is compiled with (``compiles``)


def blocks(n, threads: int = THREADS) -> tuple:
    """The grid of a one-thread-per-item launch over *n* items."""
    return ((int(n) + threads - 1) // threads,)


class Double(float):
    """A float define that the kernels use as a double: written as a double hex literal,
    the float64 value exactly (plain floats become float32 literals)."""


def define_options(defines) -> tuple:
    """``-DNAME=value`` compile options from a mapping (sorted: a stable kernel-cache key).
    Integers are written as such (NumPy unsigned ones with a ``u``: unsigned in CUDA too);
    floats as float32 hex literals (the float32 value exactly, no decimal rounding),
    ``Double`` floats as double hex literals."""
    out = []
    for name, value in sorted((defines or {}).items()):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"CUDA define {name} must be an int or a float, not {value!r}")
        if isinstance(value, Double):
            text = float(value).hex()
        elif isinstance(value, (float, np.floating)):
            text = float(np.float32(value)).hex() + "f"
        elif isinstance(value, np.unsignedinteger):
            text = f"{int(value)}u"
        else:
            text = str(int(value))
        out.append(f"-D{name}={text}")
    return tuple(out)


class Kernels:
    """The kernels of ``kernels/cuda/<filename>`` with one set of compile options."""

    def __init__(self, filename: str, options: tuple = (), threads: int = THREADS, defines=None):
        self.filename = filename
        self.options = tuple(options) + define_options(defines)
        self.threads = int(threads)
        self._functions = {}  # (name, device) → cupy Function: a launch skips the module look-up
        _COMPILES.setdefault(filename, set()).add(self.options)

    def get(self, name: str):
        """The compiled kernel *name* (compiled and cached at the first call). Kept per
        device: ``backend.get_kernel`` asks the module for a new function handle every time
        (~5 µs of host time a launch, which bounds substeps of many small launches)."""
        key = (name, _device())
        function = self._functions.get(key)
        if function is None:
            function = self._functions[key] = backend.get_kernel(self.filename, name, self.options)
        return function

    def load(self, *names: str) -> None:
        """Compile and load kernels now (before a graph capture)."""
        for name in names:
            self.get(name)

    def blocks(self, n) -> tuple:
        return blocks(n, self.threads)

    def launch(self, name: str, n, args) -> None:
        """*name* over *n* items, one thread each (nothing to do for n = 0). One look-up through
        ``get`` a launch (tests count launches there)."""
        n = int(n)
        if n > 0:
            threads = self.threads
            self.get(name)(((n + threads - 1) // threads,), (threads,), args)

    def launch_grid(self, name: str, grid: tuple, block: tuple, args, shared_mem: int = 0) -> None:
        """*name* with an explicit grid and block (and *shared_mem* bytes of dynamic shared memory)."""
        self.get(name)(grid, block, args, shared_mem=int(shared_mem))


def _device() -> int:
    """The current CUDA device's id: ``cupy.cuda.runtime.getDevice``, bound here at the first call
    (no import statement a launch; helper h21h: ~200 launches an 8M Fast frame, many of them on
    stretches where the device waits for the host)."""
    global _device
    import cupy as cp

    _device = cp.cuda.runtime.getDevice
    return _device()


# The modules that launch kernels (each creates its ``Kernels`` at import).
KERNEL_MODULES = ("rng", "grid.bitgrid", "grid.sparse_ops", "voxelize.gpu", "voxelize.gpu_sparse", "voxelize.lines",
                  "voxelize.gpu_sparse_vote",
                  "snow.flakes", "snow.wind", "snow.drift", "snow.ground", "flip.particles", "flip.pressure_gpu",
                  "flip.sparse_pressure_gpu", "flip.sparse_pressure_setup", "flip.sparse_pressure_scan",
                  "flip.sparse_pressure_cells",
                  "flip.surface_gpu", "flip.surface_place", "flip.sparse_gpu_base", "flip.sparse_gpu",
                  "flip.sparse_g2p_gpu",
                  "flip.sparse_topology_gpu", "flip.sparse_band_gpu", "flip.sparse_air_band_gpu",
                  "flip.sparse_pressure_solve_ahead", "flip.particle_sort")


def compiles() -> dict:
    """{.cu file: sorted option tuples} of every ``Kernels`` of ``KERNEL_MODULES``: what the
    compile check (tests/unit/test_cuda_sources.py) and tools/compare_ptx.py build."""
    import importlib

    kernels_package = __package__.rsplit(".", 1)[0]
    for name in KERNEL_MODULES:
        importlib.import_module(f"{kernels_package}.{name}")
    return {name: sorted(opts) for name, opts in sorted(_COMPILES.items())}


class GraphLoop:
    """A fixed launch sequence, ``record()``, captured once as a CUDA graph and replayed
    by ``run()`` on the current stream; launched directly where capture fails or when
    *enabled* is False. ``graph`` (None until captured), ``failed`` and ``launches``
    (graph replays) say which happened."""

    def __init__(self, record, enabled: bool = True, args: tuple = ()):
        # a bound method weakly (no cycle through its owner), anything else as given
        self._record = weakref.WeakMethod(record) if inspect.ismethod(record) else (lambda: record)
        self.args = tuple(args)
        self.enabled = bool(enabled)
        self.graph = None
        self.failed = False
        self.launches = 0

    def record(self) -> None:
        """Launch the sequence once, directly."""
        fn = self._record()
        if fn is None:
            raise ReferenceError("GraphLoop: the object whose launches it records is gone")
        fn(*self.args)

    def capture(self):
        """Record the sequence into a graph now (once); None if capture is not available."""
        if self.graph is None and self.enabled and not self.failed:
            import cupy as cp

            stream = cp.cuda.Stream(non_blocking=True)
            try:
                with stream:
                    stream.begin_capture()
                    try:
                        self.record()
                    finally:
                        graph = stream.end_capture()
                self.graph = graph
            except Exception:  # noqa: BLE001 - no capture on this CuPy/driver: launch one by one
                self.failed = True
        return self.graph

    def run(self) -> None:
        graph = self.capture()
        if graph is not None:
            import cupy as cp

            graph.launch(stream=cp.cuda.get_current_stream())
            self.launches += 1
        else:
            self.record()


class Repeat:
    """A ``GraphLoop`` run *times* in a row, as one loop: ``run_blocks``' block of a solver's
    iterations as that many replays of its one-iteration graph, with no graph of its own to
    capture (issue 24: a new sparse pressure solver's block of 10 iterations, ~260 launches,
    was recorded and instantiated at its first solve). The same launches in the same order;
    ``graph``, ``failed`` and ``capture`` are the repeated loop's, ``launches`` counts runs."""

    def __init__(self, loop: GraphLoop, times: int):
        self.loop = loop
        self.times = int(times)
        self.launches = 0

    @property
    def graph(self):
        return self.loop.graph

    @property
    def failed(self) -> bool:
        return self.loop.failed

    def capture(self):
        return self.loop.capture()

    def record(self) -> None:
        for _ in range(self.times):
            self.loop.record()

    def run(self) -> None:
        for _ in range(self.times):
            self.loop.run()
        self.launches += 1

"""The sparse pressure set-up's coarse levels as one CUDA graph replay (issue 24: the set-up
before the PCG loop is host-bound). ``sparse_pressure_workspace_levels._launch_levels`` queues
level 1 by bricks and then, per coarser level, ~9 small launches (coarsen, scan, parents,
level cells, scan, order, tables, prolongation and restriction, key span) and the one-block
tail: 8M dam break on an H100 (session 15, bench/flip_sparse_pressure_timeline.py), the coarse
levels 0.77 ms of host time for 0.72 of device time. From level 2 on, every argument of those
launches is the workspace's (its generation's buffers, its kept scratch, its counts: the kernels
read the sets' sizes from the device and pad past them) but for three host values: level 1's
key base, the level where the tail starts (from the host bounds) and which scan
(``sparse_pressure_setup.SCAN``, ``RESTRICT``). So they are captured once per such key
(``key``) and replayed as one graph; level 1 stays launch by launch (its grid follows the
topology's brick count and its arguments the topology's arrays, remade by each
retopologize).

What the capture needs and the plain launches did not:

* the coarse scratch kept with the generation's tables (``Workspace.scratch(keep=True)``, as
  ``VOXFX_SPARSE_SETUP_SCRATCH=kept``: one allocation a generation, not a set-up), so that its
  pointers hold from replay to replay;
* the set-up launched ahead guesses its key base from the last box (``guessed_base``, centred);
  kept while the new guess lies within an eighth of the keys' free room of it
  (``Workspace.sticky_guess``), so that the key stays the same while the liquid moves: any base
  that leaves every cell _MARGIN above it gives the same tables (``sparse_pressure_ahead``);
* the tail's record (``mgs_tail_levels``' pointers and bases) in a device array of the graph's
  own, written before the capture (a host copy cannot be captured);
* the look-back scan's state (``sparse_pressure_setup.lookback_state``) of the capture's stream,
  made before the capture and held here: the replays use it in stream order, as launches on one
  stream do.

A key is captured the second time it comes (the first time launched plainly, which also loads
every kernel it needs: nothing compiles during a capture); ``KEEP`` graphs at most; after
``_GIVE_UP`` captures of one generation with fewer than ``_PAYS`` replays each, the rest of that
generation launches plainly (a key that misses too often costs a capture each time).

``SWITCH`` ``VOXFX_SPARSE_SETUP_GRAPH``: "0" (default, launch by launch) or "1", read at each
set-up. The same launches on the same values in the same order: the same tables and pressure bit
for bit (tests/gpu/test_flip_sparse_setup_graph_gpu.py).

Measured on two H100 80GB HBM3 machines (driver 580.159.04, session 15, branch i24c; the 8M dam
break, graph on and off in separate processes; bench/flip_sparse_setup_graph_call.sh; call 2
its tests, then the timeline at --substeps 6). bench/flip_sparse_pressure_timeline.py, medians,
host Δ / device Δ ms of the coarse levels, the pressure stage:

* call 1 (4 substeps; one capture, the rest replays): launched 0.547 / 0.387, replayed 0.186 /
  0.368, pressure 3.88 → 3.91 ms: there the stage was device-bound after the levels (the host only
  waited longer for the unknowns' read, 0.105 → 0.413 ms), the levels' ~25 kernels ~0.37 ms of
  device time either way; bench/flip_sparse.py --row 8m --steps 8 --warm 2, pressure (substep) ms
  on/off/on/off: 3.74 (5.8), 4.32 (6.8: a slow run, every stage slower), 3.78 (6.0), 3.74 (5.8);
* call 2 (6 substeps, a slower host): launched 0.909 / 0.906 (host-bound: the device waited on
  the launches), replayed 0.324 / 0.514; pressure 4.58 → 4.32 ms, the stage's device span
  4.577 → 4.313 ms.

A gain where the host is the bottleneck, nothing where the device is. The kept scratch holds
~15 MiB more at 8M (pool 916 → 931 MiB); ``sparse_memory`` counts it (``GRAPH_SCRATCH_CELL``)
where this switch is on; without that term tests/gpu/test_liquid_memory_check_gpu.py's spreading
liquid peaked 1.6 MiB above the estimate at frame 11 (call 1), with it that test has not run on a
GPU. So "0" stays the default until it has (and an 8M A/B on one machine repeats call 2's gain).
Level 1 would not keep a key: over 6 set-ups (``--keys``) the class array's pointer changed at
every one, level 0's position at 4 of 5, the topology's arrays and the brick count at 3 of 5.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from ..settings import env_choice

SWITCH = "VOXFX_SPARSE_SETUP_GRAPH"
MODES = ("1", "0")
DEFAULT = "0"
KEEP = 4  # graphs kept per workspace (its generation's keys: one in a steady run)
_GIVE_UP = 3  # captures of one generation before ...
_PAYS = 4  # ... fewer replays than this many a capture stop them (plain launches)


def enabled(given=None) -> bool:
    """Whether the coarse levels go through a graph (``SWITCH``, read at each call)."""
    return env_choice(SWITCH, MODES, given, DEFAULT) == "1"


class Graphs:
    """One workspace's captured coarse-level sequences (module notes); holds nothing of the
    workspace itself (the workspace holds it: no cycle)."""

    def __init__(self):
        self.entries = OrderedDict()  # key → (graph, what its launches read that only it holds)
        self.seen = deque(maxlen=KEEP)  # keys launched plainly lately
        self.stream = None  # the capture stream (made at the first capture, kept: its look-back state)
        self.counts = {"replayed": 0, "captured": 0, "plain": 0, "failed": 0}
        self._generation = [0, 0]  # this generation's captures and replays
        self.off = False

    def clear(self):
        """A new generation of tables: every graph goes (its pointers are the old buffers')."""
        self.entries.clear()
        self.seen.clear()
        self._generation = [0, 0]
        self.off = False

    def run(self, key, launch, own):
        """Replay *key*'s graph, capturing it if *key* came before; else ``launch(*own())``
        plainly. *own()*: the launches' arguments a graph must hold (made outside the capture),
        *launch(*args)*: the sequence. True where a graph ran."""
        import cupy as cp

        entry = self.entries.get(key)
        if entry is None and not self.off and key in self.seen:
            entry = self._capture(key, launch, own)
        if entry is None:
            launch(*own())
            self.counts["plain"] += 1
            if key not in self.seen:
                self.seen.append(key)
            return False
        self.entries.move_to_end(key)
        entry[0].launch(stream=cp.cuda.get_current_stream())
        self.counts["replayed"] += 1
        self._generation[1] += 1
        return True

    def _capture(self, key, launch, own):
        import cupy as cp

        from .sparse_pressure_setup import SCAN, lookback_state

        if self.stream is None:
            self.stream = cp.cuda.Stream(non_blocking=True)
        args = own()
        with self.stream:  # it waits for nothing and runs nothing: its launches are only recorded
            try:
                held = lookback_state(cp) if SCAN == "lookback" else ()  # made (and zeroed) before the capture
                self.stream.synchronize()  # ... and done before a replay on another stream reads it
                self.stream.begin_capture()
                try:
                    launch(*args)
                finally:
                    graph = self.stream.end_capture()
            except Exception:  # noqa: BLE001 - no capture here (CuPy, driver): plain launches from now on
                self.counts["failed"] += 1
                self.off = True
                return None
        self.entries[key] = (graph, (args, held))
        while len(self.entries) > KEEP:
            self.entries.popitem(last=False)
        self.counts["captured"] += 1
        self._generation[0] += 1
        captures, replays = self._generation
        if captures >= _GIVE_UP and replays < _PAYS * captures:
            self.off = True  # this generation's keys miss too often
        return self.entries[key]

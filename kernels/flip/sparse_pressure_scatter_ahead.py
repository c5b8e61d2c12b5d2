"""The sparse pressure solve's scatter (and carry) queued ahead of the PCG's check reads (issue 24:
the work after the loop, host-paced).

After the PCG's last check read the device is idle: the host, back from the read, allocated the
flat pressure and the carried pressure and launched ``unknowns_scatter_carry`` (one kernel, ~0.011
ms of device at 8M), then returned through the stage. H100 80GB HBM3, 8M dam break
(bench/flip_sparse_pressure_timeline.py, session 21, h21e's first call; brick smoother, early
stop, the solve queued ahead, 11–12 CG iterations): from the last check read to the scatter's end
0.055 ms of host and 0.058 of device — the device waited at lag 0 for that launch —, and the
stage's device span ended 0.08–0.10 ms after the read. The set-up before the read is
device-bound on that host (the device 0.04–0.05 ms behind the host at the solve's launches), so
no host saving there shortens the stage; this stretch after the read is.

Where the stage's device time goes on that host (the same call; medians of 6 substeps, host Δ /
device Δ ms, launches): cells stage 0.117 / 0.168 (5), level 0's unknowns 0.215 / 0.118 (3), coarse
levels 0.607 / 0.404 (25: host-bound, but the device entered the stage 0.38–0.48 ms behind the host
and was still 0.04–0.05 behind at the solve's launches — it never waited during the set-up), the
solve queued ahead 0.191 / 2.466 (5 launches, the start and 11–12 graph replays), the host's wait at
the check read 2.28; after it the device waits at every mark: a round trip a further iteration where
the count passed the prediction (~0.02 ms of idle each) and the scatter's stretch above. Kernel by
kernel (bench/flip_sparse_setup_kernels.py): cells 0.169, unknowns 0.116, coarse levels 0.409 (the
one-block tail 0.094, six scans 0.063), the solve ahead's 0.059, plus ~0.1 of CuPy array code
between them — the set-up's ~0.85 ms is device work, which only kernel work shortens.

``SWITCH`` on (``VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD`` "1"): ``SparsePressureSolverGPU.solve``
hands ``run_blocks`` a ``Scatter`` as its *before_check*: it is queued (its arrays allocated
once, the launch written into them again) before every check read that follows launched
iterations — so the predicted iterations, the scatter, then the read; a solve that stops there
(the usual substep: the prediction is the last solve's count) finds p and the carry made when
the read returns. A solve that runs on launches more iterations and the scatter again after
them before its next read (one wasted ~0.011 ms kernel a round trip). A solve that stopped at
its start (no iteration launched) scatters after the read, as before. The same kernel on the
same final x: the same p and carried bits and iterations (tests/gpu/test_flip_sparse_pressure_scatter_ahead_gpu.py;
``run_blocks``' order on the host: tests/unit/test_flip_sparse_pressure_scatter_ahead.py).
"0": the scatter after the loop, as before. Read at each solve (an A/B in one process). **"1" the default** from
session 21's last call (its GPU files and the around test passed with "1" in call 3, 24 passed; the pressure,
flip and accuracy files with it the default in call 5: bench/RESULTS.md).

Measured (H100 80GB HBM3, driver 580.159.04; h21e's second call, bench/flip_h21e_scatter_ahead_call.sh):
the timeline with "0" and "1" alternating each substep on one simulation (8 substeps each) — from the
last check read to the stage's end 0.098 → 0.050 ms of device ("run_blocks < .. solver.solve <" 0.056 /
0.058 → 0.007 / 0.007 ms host / device; the scatter's launch now before the first read, "run_blocks > ..
check read >" 0.007 → 0.038 ms of host while the device runs the iterations); the whole stage's medians
3.337 / 3.359 ms are those substeps' CG counts (way "1" drew three 12-iteration substeps, their round
trips). The 8M row (``bench/flip_sparse.py --row 8m --steps 8 --warm 2``), separate processes "0", "1",
"0", "1": pressure 3.73 (a slow process: topology 0.67), 3.20, 3.24, 3.19 ms; the last pair, like hosts
(topology 0.49 / 0.49), lower in every substep (3.08 3.47 3.40 3.43 3.24 3.18 3.23 3.24 → 3.03 3.45 3.37
3.38 3.20 3.15 3.18 3.18: −0.041 ms on average), CG iterations [10, 12, 12, 12, 11, 11, 11, 11] in all
four. The pressure, workspace, memory-check, solve-ahead, early-stop, warm and persist GPU files passed
with "1" (68); this switch's own GPU file passed its cold case there, its other cases failed in the test's
spy (a channel record read as an array) and were mended after the call, not rerun on a GPU.
"""

from __future__ import annotations

from ..settings import env_choice

SWITCH = "VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD"
MODES = ("1", "0")  # the default first (session 21's last call)
DEFAULT = "1"


def mode(given=None) -> str:
    """``SWITCH``'s way: *given*, else ``VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD``, else ``DEFAULT``."""
    return env_choice(SWITCH, MODES, given, default=DEFAULT)


def enabled(given=None) -> bool:
    """Whether the scatter goes ahead of the check reads (``SWITCH``)."""
    return mode(given) == "1"


class Scatter:
    """The flat pressure (*size* cells; x at each unknown, *position*: flat → unknown, m where
    none) from the solver's *x*, and with *carry* (``SparsePressureSolverGPU.solve``'s) the
    carried pressure in the same launch; ``__call__`` queues it (``run_blocks``' *before_check*),
    ``result`` gives p (launching it where it was never queued) and puts "carried" in *carry*."""

    def __init__(self, position, x, m, size, carry):
        self.position, self.x, self.m, self.size, self.carry = position, x, int(m), int(size), carry
        self.p = self.carried = None
        self.queued = 0  # launches made (tests)

    def __call__(self) -> None:
        from .sparse_pressure_cells import unknowns_scatter, unknowns_scatter_carry

        args = (self.position, self.x, self.m, self.size)
        again = {} if self.p is None else {"out": self.p if self.carry is None else (self.p, self.carried)}
        if self.carry is not None:  # the first launch as after the loop; again into its arrays
            self.p, self.carried = unknowns_scatter_carry(*args, self.carry["cell"], **again)
        else:
            self.p = unknowns_scatter(*args, **again)
        self.queued += 1

    def result(self):
        """p after the loop: the last queued scatter (it followed the last iteration), else one now."""
        if self.p is None:
            self()
        if self.carry is not None:
            self.carry["carried"] = self.carried
        return self.p

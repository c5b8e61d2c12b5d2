"""The topology's first pass folded into G2P + advection (issue 24, helper s23j; ``VOXFX_SPARSE_G2P_MARKS``,
``MARKS_MODES``).

Each substep's topology starts with ``mark_occupied`` (flip_sparse_topology.cu; ``sparse_topology_gpu._reach``,
or queued ahead of the speed read by ``sparse_topology_ahead``): every particle marks its cell in the current
topology's ``occupied`` scratch, its brick's largest |v|² (``speed2``) and the ``missed`` count, ~114–135 µs of
device at 8M (NVIDIA H100 80GB HBM3, bench/RESULTS.md s23e); and the step reads the fastest particle's speed
(``transfer.max_speed``: another pass over the velocities) before it. Both re-read the positions and velocities
that the previous substep's G2P + advection has just written. With "1" the block G2P kernel writes them too
(flip_sparse_g2p_block.cu built with G2P_MARKS: ``mark_particle``, mark_occupied's own code, over each particle's
new position and velocity, and the largest |v|² bits of all): ``prepare`` zeroes the next pipeline's scratch
(``sparse_topology_gpu._reach_work``, as ``sparse_topology_ahead.launch`` does) and a word for that maximum, the
G2P writes into them, and ``hold`` keeps them on the grid under ``sparse_topology_ahead``'s launch key (the same
topology, position and velocity arrays, brick index, scratch ways and scalars), where ``sparse_topology_ahead.take``
hands them to ``incremental_keys`` in place of its ``mark_occupied``, and ``speed_read`` reads the step's speed
from the maximum in place of ``transfer.max_speed``'s pass.

Where anything changes the particles or the topology between the G2P and the next pipeline the key differs and
the pipeline marks as before (counted ``refused``; so too where the switch reads "0" at the next substep, as in
``bench/flip_sparse.py --ab``'s alternating substeps: that A/B times the G2P's marks without their gain, which
needs substeps in a row: ``--pace N --ab`` or ``--frames N --ab``): ``_kill_far``, the particle count control,
sources, a frame's particle sort (new arrays: the key holds the arrays themselves, not their values; nothing in
the sparse solver writes ``pos`` or ``vel`` in place but the G2P), a restore, another topology. No marks are
made with a narrow band (its update moves the deep region), the air-band prototype, margins not per brick, on
NumPy or where
``sparse_topology_ahead._plan`` says the pipeline would not take the ahead way; the first substep has none to
take. The same kernel code on the same values: the same flags, maxima and count (host harness
tests/unit/test_cuda_g2p_marks_host.py), so the same topology and particles to the bit
(tests/gpu/test_flip_sparse_g2p_marks_gpu.py). "1" the default since session 25 (H100 80GB HBM3, 8M dam break:
the G2P kernel 0.819 ms with the marks against 0.821 without, the topology's lag 0.068 → 0.007 ms and the paced
step's paired median −0.34 ms a substep with the device's events, +0.07 without (bench/flip_sparse.py --pace);
the substep-alternating A/B, the marks' cost alone, −0.17, −0.04, 0.00, −0.11 ms in four runs). "0": as before.
"""

from __future__ import annotations

import numpy as np

from ..settings import env_choice
from . import sparse_topology_ahead as ahead
from . import sparse_topology_args as topology_args

MARKS_MODES = ("0", "1")
counts = {"made": 0, "taken": 0, "refused": 0, "speeds": 0}  # marks written, taken by incremental_keys, dropped;
# speeds read from the G2P's maximum


def marks_mode(given=None) -> str:
    """``VOXFX_SPARSE_G2P_MARKS`` (or *given*): "1" writes the next topology's marks in the G2P."""
    return env_choice("VOXFX_SPARSE_G2P_MARKS", MARKS_MODES, given, default="1")


class Marks:
    """The G2P's marks of one substep: ``args`` (occupied, missed word, speed2, speed code, most) for the
    kernel, ``written`` once ``sparse_g2p_gpu.g2p_advect`` launched it, and the key and scratch to hold."""

    def __init__(self, key, work, most, args):
        self.key, self.work, self.most, self.args, self.written = key, work, most, args, False


def prepare(sim):
    """The marks for this substep's G2P of *sim*'s particles (scratch zeroed), or None where they would not be
    taken (module notes). Drops what the grid holds (an ahead, an earlier G2P's marks)."""
    from . import air_band
    from . import sparse_topology_gpu as tg
    from .sparse_g2p_gpu import g2p_kernel
    from .sparse_grid import margin_mode

    grid = sim.grid
    ahead.drop(grid)
    if (marks_mode() != "1" or sim.xp is np or sim.band is not None or air_band.enabled() or margin_mode() != "brick"
            or g2p_kernel() not in ("auto", "block")):
        return None
    plan = ahead._plan(grid, sim.pos, sim.vel)
    if plan is None:
        return None
    key, index, entries, ways, on = plan
    work = tg._reach_work(grid, None, True, entries, True, ways)  # by classes: one word a slot, speeds per slot
    most = getattr(grid, "_g2p_most", None)
    if most is None:
        most = grid._g2p_most = sim.xp.zeros(1, sim.xp.uint32)
    else:
        most.fill(0)
    args = (work["occupied"], topology_args.flag_words(work["flags"])[0], work["speed2"],
            topology_args.i32(key[1][5], on), most)
    return Marks(key, work, most, args)


def hold(sim, marks) -> None:
    """Keep *marks* on the grid for the next pipeline's ``sparse_topology_ahead.take`` and ``speed_read`` where
    the G2P wrote them (they are *sim*'s particles as the G2P left them)."""
    if marks is None or not marks.written:
        return
    sim.grid._occupied_ahead = (marks.key, marks.work, counts)
    sim.grid._g2p_marks_most = (marks.key, marks.most)
    counts["made"] += 1


def start(grid) -> None:
    """The substep's start: marks held while the switch now says "0" (``bench/flip_sparse.py --ab`` alternating
    substeps) are dropped, so that way marks as before (a "1" substep after a "0" one has none to take)."""
    held = getattr(grid, "_occupied_ahead", None)
    if held is not None and held[2] is counts and marks_mode() != "1":
        ahead.drop(grid)


def keep_end(grid) -> None:
    """The substep's end: an ahead not taken is dropped (``sparse_topology_ahead.drop``), the G2P's marks kept."""
    ahead.drop(grid, unless=counts)


def speed_read(sim):
    """The step's speed (``transfer.max_speed``'s float: √ of the largest |v|² bits) from the G2P's maximum where
    the grid holds marks of these very particles and topology (``_plan``'s key), else None (marks not of them
    are dropped: the pipeline marks as before)."""
    grid = sim.grid
    start(grid)
    held = getattr(grid, "_occupied_ahead", None)
    kept, grid._g2p_marks_most = getattr(grid, "_g2p_marks_most", None), None
    if held is None or held[2] is not counts or kept is None or kept[0] is not held[0]:
        return None
    plan = ahead._plan(grid, sim.pos, sim.vel)
    if plan is None or not ahead.same_key(held[0], plan[0]):
        ahead.drop(grid)
        return None
    counts["speeds"] += 1
    xp = sim.xp
    return float(xp.sqrt(kept[1].view(xp.float32)[0]))  # max_speed's sqrt of the bits, then its host read

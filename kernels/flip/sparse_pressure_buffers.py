"""The sparse GPU pressure solver's buffer sizes (``sparse_pressure_gpu.py``): strides that
grow geometrically and never shrink within a process, vectors carved out of one
allocation (``sparse_pressure_gpu.PERSIST``), the device bytes a solver takes."""

from __future__ import annotations


from .pressure_gpu import _MAX_BLOCKS

_HEADROOM = 1.25  # buffers take this much more than the solve needs
_GROWTH = 1.5  # a solver that outgrows its strides: at least this factor more
_ALIGN = 64  # float32 entries (256 B) between the starts of carved vectors


def grown_strides(needs, old=None, headroom=_HEADROOM, growth=_GROWTH) -> list:
    """Buffer strides for levels that need *needs* entries: *headroom* more than needed plus
    64; where an *old* solver of as many levels had strides, a level keeps its old stride
    while it fits and otherwise grows to at least *growth* times it (``PERSIST``)."""
    fresh = [int(int(n) * headroom) + 64 for n in needs]
    if old is None or len(old) != len(fresh):
        return fresh
    return [int(s) if int(n) <= int(s) else max(f, int(int(s) * growth)) for n, s, f in zip(needs, old, fresh)]


def table_caps(needs, old=None) -> tuple:
    """Capacities (0, C_1, …) of the set-up workspace's levels for coarse levels needing
    *needs* entries: ``grown_strides`` of *needs* against *old*'s C_1 … (the capacities the
    workspace holds, or None); C_0 is 0 (level 0's tables are the solver's)."""
    return (0,) + tuple(grown_strides(needs, None if old is None else old[1:]))


def carve(xp, lengths, dtype, align=_ALIGN):
    """(arena, views): one zeroed allocation holding arrays of *lengths* entries, each view
    starting *align* entries apart at least (``PERSIST``: one fill zeroes them all)."""
    starts, total = [], 0
    for n in lengths:
        starts.append(total)
        total += -(-int(n) // align) * align
    arena = xp.zeros(max(total, 1), dtype)
    return arena, [arena[at:at + int(n)] for at, n in zip(starts, lengths)]


def solver_memory_bytes(strides, preconditioner="mg") -> int:
    """Device bytes of a solver with these level strides: per level nbr (24 B), diag (4 B),
    b, x, r (12 B), the tables up (32 B) and down (256 B per coarse entry); the CG's six
    vectors on level 0."""
    total = 6 * 4 * strides[0] + 28 * strides[0]
    if preconditioner == "mg":
        total += 4 * strides[0]
        for s in strides[1:]:
            total += s * (28 + 12 + 256) + 32 * strides[0]
    return int(total + 2 * 8 * _MAX_BLOCKS + 1024)


class _Buffers:
    """One level's device buffers; *tables* (nbr, diag) where the caller owns them
    (``sparse_pressure_workspace``)."""

    def __init__(self, cp, stride, tables=None):
        self.stride = int(stride)
        if tables is None:
            self.nbr = cp.zeros((6, self.stride), cp.int32)
            self.diag = cp.ones(self.stride, cp.float32)
        else:
            self.nbr, self.diag = tables
        self.b = self.x = self.r = self.up = self.down = None

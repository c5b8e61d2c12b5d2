"""The time-centred advection's kept velocity on bricks (``FlipSettings.time_centred_advection``:
RK2 in time too, through the velocity linear in time from the last substep's, ``transfer``'s
module text): the sparse solver's twin of ``FlipSimulation``'s kept faces.
Each substep keeps its projected, extrapolated faces and fluid-face masks as grid channels
(``KEPT``), so kept bricks carry them across the next topology update and new bricks read a
fluid mask of 0 (u_{n+1} there); the next substep's u_n comes from them
(``transfer.start_velocity``'s values, ``start_velocity_into``).

Without copies (helper h18d): the kept faces are the grid's face arrays themselves, not copies
of them — nothing writes into those arrays after the keep (the next substep's P2G, extrapolation
and projection each make new ones; the topology update only fills kept channels' fresh and freed
slots with 0, the faces' own background), so they hold u_{n+1} until u_n is made — and u_n is
written into the kept faces in place (``start_velocity_into``: nothing reads them again before
this substep's keep replaces them). The 8M Fast frames after the splash spent ~0.06 ms a substep
of device time on the keep's three copies and ~0.1 on u_n's three selects into new arrays (H100:
``bench/flip_sparse.py --stages``' device between the stages, before the next speed and before
G2P). Checkpoints hold the bricks whose kept masks are not all 0
(``KEPT_KEYS``: their keys and each brick's 512 values a channel), written back onto the new
topology after a restore. ``KeptBricks`` is a base of ``sparse_sim.SparseFlipSimulation``
(its grid, ``xp`` and settings).
"""

from __future__ import annotations

import numpy as np

from ..backend import array_module
from ..checkpoint import check_state
from ..grid.sparse import BITS
from ..grid.sparse_mac import CELLS
from . import sparse_transfer
from .sim import FlipSimulation


class KeptBricks:
    """The kept faces of the time-centred advection on a sparse grid (module text)."""

    KEPT = ("kept_u", "kept_v", "kept_w", "kept_fluid_u", "kept_fluid_v", "kept_fluid_w")

    def _start_velocity(self, fluid=None):
        """u_n (``transfer.start_velocity``'s values) from the channels the last substep kept,
        written into the kept face channels and returned as them (``start_velocity_into``; the
        keep at this substep's end replaces them): kept bricks keep their slots and data across
        the topology update, new ones read a fluid mask of 0 (u_{n+1} there). None on the first
        substep. *fluid*: this substep's fluid-face masks (``sparse_transfer.fluid_faces`` of the
        grid's cell types now), where the caller has them."""
        g = self.grid
        if self.KEPT[0] not in g.channels:
            return None
        kept = (tuple(g[n] for n in self.KEPT[:3]), tuple(g[n] for n in self.KEPT[3:]))
        return start_velocity_into(g.faces(), sparse_transfer.fluid_faces(g) if fluid is None else fluid, kept)

    def _keep_velocity(self, fluid=None) -> None:
        """This substep's projected, extrapolated faces (the grid's face arrays themselves, no
        copy: module text) and fluid-face masks, for the next. *fluid*: the masks of the grid's
        cell types now, made this substep by ``sparse_transfer.fluid_faces`` and held by nothing
        else (kept as they are: the substep's one ``fluid_faces`` serves the extrapolation, u_n
        and this, helper h17b), or None (made here)."""
        g, xp = self.grid, self.xp
        if self.KEPT[0] not in g.channels:
            for n in self.KEPT:
                g.add(n, xp.uint8 if "fluid" in n else xp.float32, 0)
        for n, f in zip(self.KEPT[:3], g.faces()):
            g[n] = f
        for n, f in zip(self.KEPT[3:], sparse_transfer.fluid_faces(g) if fluid is None else fluid):
            g[n] = f

    def _drop_kept_velocity(self) -> None:
        for n in self.KEPT:
            self.grid.channels.pop(n, None)

    # in checkpoints: the bricks whose kept fluid masks are not all 0 (only there does u_n
    # read the kept faces), their keys (ascending) and each brick's 512 values a channel
    KEPT_KEYS = ("kept_bricks", *FlipSimulation.KEPT_KEYS)

    def _kept_state(self) -> dict:
        """``FlipSimulation._kept_state`` on bricks (15 bytes a cell of a brick the liquid
        touched): a restored state's while no substep has run since."""
        pending = getattr(self, "_kept", None)  # restored, waiting for the next topology update
        if pending is not None:
            return dict(zip(self.KEPT_KEYS, pending))
        g, xp = self.grid, self.xp
        if self.KEPT[0] not in g.channels:
            return {}
        slots = g.topology.slots.astype(xp.int64)
        values = [g[n].reshape(-1, CELLS)[slots] for n in self.KEPT]
        touched = xp.zeros(len(slots), bool)
        for mask in values[3:]:
            touched |= (mask != 0).any(axis=1)
        return dict(zip(self.KEPT_KEYS, (g.topology.keys[touched], *(v[touched] for v in values))))

    def _restore_kept(self, state: dict):
        """*state*'s kept bricks (checked; NumPy until the next topology update writes them
        into the grid: ``_restore_kept_velocity``), or None (the setting off, an older
        checkpoint)."""
        if not self.settings.time_centred_advection or not any(k in state for k in self.KEPT_KEYS):
            return None
        n = np.shape(state["kept_bricks"])[0] if np.ndim(state["kept_bricks"]) == 1 else -1
        check_state(state, {"kept_bricks": ((n,), "i"),
                            **{k: ((n, CELLS), "f" if i < 3 else "u") for i, k in enumerate(self.KEPT_KEYS[1:])}})
        keys = np.asarray(state["kept_bricks"], np.int64)
        if len(keys) and (keys.min() < 0 or keys.max() >= 1 << (3 * BITS) or (np.diff(keys) <= 0).any()):
            raise ValueError("'kept_bricks' are not ascending brick keys of the lattice")
        return (keys, *(np.array(state[k], np.float32 if i < 3 else np.uint8)
                        for i, k in enumerate(self.KEPT_KEYS[1:])))

    def _restore_kept_velocity(self) -> None:
        """After a restore, the kept bricks onto the new topology: the bricks an
        uninterrupted run keeps hold these values, new ones a fluid mask of 0."""
        pending, self._kept = getattr(self, "_kept", None), None
        if pending is None:
            return
        xp, g = self.xp, self.grid
        for n in self.KEPT:
            g.add(n, xp.uint8 if "fluid" in n else xp.float32, 0)
        slot = g.topology.lookup(xp.asarray(pending[0]))
        here = slot >= 0
        at = (slot[here].astype(xp.int64)[:, None] * CELLS + xp.arange(CELLS, dtype=xp.int64)[None, :]).ravel()
        for n, values in zip(self.KEPT, pending[1:]):
            g[n][at] = xp.asarray(values)[here].ravel()


def start_velocity_into(faces, fluid, kept):
    """``transfer.start_velocity(faces, fluid, kept)``'s u_n written into *kept*'s faces and
    returned as them: each kept face stays where it touched FLUID then and touches it now, the
    new face is copied in elsewhere — the same bits as the reference's ``where`` (a copy either
    way). NumPy: ``copyto`` where not both; CuPy: one elementwise kernel for the three
    components (``_into_kernel``: the new face read only where it is copied), where the arrays
    are the kernel's (flat, C-contiguous float32 faces and uint8 masks of one size), else
    ``copyto`` a component. None when nothing was kept."""
    if kept is None:
        return None
    prev, was = kept
    xp = array_module(prev[0])
    if xp is not np and all(_flat(p, np.float32, prev[0]) and _flat(f, np.float32, prev[0]) and
                            _flat(a, np.uint8, prev[0]) and _flat(b, np.uint8, prev[0])
                            for p, a, b, f in zip(prev, was, fluid, faces)):
        _into_kernel(xp)(*was, *fluid, *faces, *prev)
        return tuple(prev)
    for p, a, b, f in zip(prev, was, fluid, faces):
        xp.copyto(p, f, where=(a == 0) | (b == 0))
    return tuple(prev)


_INTO: dict = {}


def _into_kernel(cp):
    """CuPy: ``start_velocity_into``'s three components in one launch, the new faces raw (read at
    the index only where copied: ~7.6 B a face against the select into new arrays' 14, and no
    allocation)."""
    if "k" not in _INTO:
        body = "".join(f"if (was{a} == 0 || now{a} == 0) kept{a} = face{a}[i];\n" for a in range(3))
        _INTO["k"] = cp.ElementwiseKernel(
            "uint8 was0, uint8 was1, uint8 was2, uint8 now0, uint8 now1, uint8 now2, "
            "raw float32 face0, raw float32 face1, raw float32 face2",
            "float32 kept0, float32 kept1, float32 kept2", body, "voxfx_start_velocity_into")
    return _INTO["k"]


def _flat(a, dtype, like) -> bool:
    """*a* is a flat C-contiguous array of *dtype* with *like*'s length."""
    return a.dtype == dtype and a.ndim == 1 and a.flags.c_contiguous and a.shape == like.shape

"""The sparse solver's kept faces without copies on the GPU (``sparse_kept``, helper h18d): u_n
written into the kept faces by one elementwise kernel for the three components
(``start_velocity_into``) against NumPy's ``where`` bit for bit, and whole simulations the
kept-faces way against the copying way they replace, bit for bit
(tests/unit/test_flip_sparse_kept_faces.py runs the same on the CPU)."""

import numpy as np
import pytest

from tests.unit.test_flip_sparse_kept_faces import check_ways_agree, start_velocity_inputs
from voxfx.kernels.flip import transfer
from voxfx.kernels.flip.sparse_kept import start_velocity_into

cp = pytest.importorskip("cupy")


def test_start_velocity_into_is_the_references_where_bit_for_bit():
    """The kernel (flat float32 faces, uint8 masks) and the copyto way (bool masks) against
    ``transfer.start_velocity`` on NumPy: the kept arrays come back holding the same bits, NaN, ±0
    and masks of 0, 1 and 255 included."""
    faces, kept, was, now = start_velocity_inputs(np.random.default_rng(), 1_000_003, 500)
    want = transfer.start_velocity(faces, now, (kept, was))
    for masks in ([cp.asarray(m) for m in now], [cp.asarray(m != 0) for m in now]):
        prev = [cp.asarray(k) for k in kept]
        got = start_velocity_into([cp.asarray(f) for f in faces], masks, (prev, [cp.asarray(m) for m in was]))
        assert all(g is p for g, p in zip(got, prev))
        for w, g in zip(want, got):
            assert g.dtype == cp.float32 and np.array_equal(g.get().view(np.uint32), w.view(np.uint32))


@pytest.mark.parametrize("case", ["plain", "narrow band", "air band"])
def test_gpu_kept_faces_without_copies_move_the_liquid_as_copies_did(case, monkeypatch):
    check_ways_agree(case, monkeypatch, xp=cp, h=0.025, frames=(4, 2), resume_exact=False)

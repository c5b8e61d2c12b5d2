"""The device encoder of Compact frames needs what the liquid guard counts
(``compact_points.device_encoder_bytes``, issue 21 §6): its pool peak beyond the frame's
own arrays, at 8 particles a cell (a liquid) and at one (spray)."""

import numpy as np
import pytest

from tests.gpu.pool_peak import pool_peak
from voxfx.addon import compact_points
from voxfx.kernels import memory

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("per_cell", [8, 1])
def test_device_encoder_peak_is_within_its_count(per_cell):
    n = 4 << 20
    rng = np.random.default_rng(3)
    side = int(round((n / per_cell) ** (1 / 3)))
    pos = cp.asarray((rng.random((n, 3)) * side * 0.01).astype(np.float32))
    columns = {"velocity": cp.asarray(rng.normal(size=(n, 3)).astype(np.float32)),
               "size": cp.full(n, 0.0025, cp.float32)}
    pool = cp.get_default_memory_pool()

    cp.cuda.Device().synchronize()
    base = pool.used_bytes()
    with pool_peak() as hook:
        encoded = compact_points.encode_here(pos, columns, cell=0.01)
    measured = hook.peak - base
    estimate = compact_points.device_encoder_bytes(n)
    assert encoded == compact_points.encode(cp.asnumpy(pos), {k: cp.asnumpy(v) for k, v in columns.items()},
                                            cell=0.01)
    del pos, columns
    memory.release_gpu_pool()
    print(f"per_cell {per_cell}: measured {measured / n:.1f} B/particle, estimate {estimate / n:.1f}")
    assert measured <= estimate, f"measured {measured / n:.1f} B a particle, counted {estimate / n:.1f}"
    assert measured >= 0.4 * estimate, f"measured {measured / n:.1f} B a particle, counted {estimate / n:.1f}"

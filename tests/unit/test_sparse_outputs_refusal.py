"""The sparse outputs' refusal (``sparse_guard.check_outputs``, issue 21 §6: "the largest
size that fits" is a size that runs) searches the size it names and checks it with the
exact counts of the voxelization at that size, instead of scaling the refused one."""

import re
from pathlib import Path

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse_guard import BASE_BYTES, check_outputs, outputs_need, scaled_spec

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def sphere(res):
    v, t = PRIMS["ico_sphere_vertices"], PRIMS["ico_sphere_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


@pytest.mark.parametrize("mode,outputs", [("solid", {"points"}), ("surface", {"points", "blocks"})])
def test_the_named_size_runs_and_the_next_one_does_not(mode, outputs):
    v, t, spec = sphere(120)

    def at(r):
        return voxelize(v, t, scaled_spec(spec, r), mode, xp=np, sparse=True)

    result = at(120)
    need = outputs_need(result, outputs)
    usable = BASE_BYTES + (need - BASE_BYTES) // 3  # the outputs get a third of what they need
    with pytest.raises(InputError, match=r"largest size that fits is \d+ voxels") as e:
        check_outputs(result, spec, outputs, usable=usable, voxelize_at=at)
    best = int(re.search(r"fits is (\d+) voxels", str(e.value)).group(1))
    assert 2 <= best < 120
    assert outputs_need(at(best), outputs) <= usable < outputs_need(at(best + 1), outputs)


def test_nothing_fits_is_said_so():
    v, t, spec = sphere(64)
    result = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    with pytest.raises(InputError, match="not even the smallest grid fits"):
        check_outputs(result, spec, {"points"}, usable=BASE_BYTES // 2,
                      voxelize_at=lambda r: voxelize(v, t, scaled_spec(spec, r), "solid", xp=np, sparse=True))

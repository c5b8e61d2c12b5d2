"""Voxelize → Volume runs split into z-slabs where the whole job does not fit (issue 21
§6), through the real operator job in a fresh headless-Blender subprocess under a real
RLIMIT_AS (``bench/voxelize_split.py``): the guard reports the split instead of refusing,
and the VDB it writes, read back with the independent tinyvdb reader, holds exactly the
voxels and values of the unsplit job's VDB."""

import re
import sys

import numpy as np
import pytest

from .helpers import ROOT
from .test_writeback import tinyvdb_active_values, tinyvdb_grids

sys.path.insert(0, str(ROOT / "bench"))
import voxelize_split as bench  # noqa: E402

MiB = 1 << 20


@pytest.mark.parametrize("case", [
    {"shape": "cube", "mode": "surface", "res": 320, "headroom": 200 * MiB},
    {"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 120, "headroom": 150 * MiB},
], ids=lambda c: f"{c['shape']}-{c['mode']}")
def test_split_volume_under_a_real_limit_equals_the_unsplit_volume(case):
    out = bench.run_case({**case, "unsplit": True})
    whole, split = out["unsplit"], out["limited"]
    assert whole["state"] == "FINISHED", whole["error"]
    assert split["state"] == "FINISHED", split["error"]
    note = " ".join(split["warnings"])
    assert re.search(r"Volume split into \d+ z-slabs", note), split["warnings"]
    assert split["estimate"]["whole"] > split["estimate"]["total"]  # the whole job was over the limit
    assert split["count"] == whole["count"] > 0
    a, b = tinyvdb_grids(whole["files"][0]), tinyvdb_grids(split["files"][0])
    assert set(a) == set(b) == {"density"}
    va, vb = tinyvdb_active_values(a["density"][1]), tinyvdb_active_values(b["density"][1])
    assert len(va) > 0 and va == vb


def test_a_volume_too_large_even_split_names_a_resolution_that_runs():
    base = {"shape": "cube", "mode": "surface", "headroom": 60 * MiB}
    refused = bench.run_case({**base, "res": 1500})["limited"]
    assert refused["state"] == "FAILED"
    assert "split into z-slabs" in refused["error"], refused["error"]
    best = int(re.search(r"largest resolution that fits is (\d+)", refused["error"]).group(1))
    assert 32 < best < 1500
    ok = bench.run_case({**base, "res": best})["limited"]
    assert ok["state"] == "FINISHED", ok["error"]
    assert np.isfinite(ok["measured"])

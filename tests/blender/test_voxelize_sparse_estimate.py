"""The sparse job's estimate counts the solid modes' coverage (issue 11): a solid Volume or
Points job on the sparse path against the RSS high-water mark of a fresh Blender process
(``bench/memory.py``), within the band the dense guard is held to (0.67–1.5)."""

import sys

import pytest

from .helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import memory as bench  # noqa: E402


@pytest.mark.parametrize("case", [
    {"shape": "cube", "outputs": ["volume"], "mode": "solid", "res": 320},
    {"shape": "suzanne", "outputs": ["points"], "mode": "solid", "res": 200},
], ids=lambda c: f"{c['shape']}-{'+'.join(c['outputs'])}-{c['mode']}-{c['res']}")
def test_sparse_solid_job_estimate_with_its_coverage_is_within_the_band(case):
    r = bench.run_case({**case, "sparse": "always"})
    assert r["state"] == "FINISHED", r["error"]
    assert r["parts"].get("sparse") is True, r["parts"]
    assert bench.LOW <= r["estimate"] / r["measured"] <= bench.HIGH, r

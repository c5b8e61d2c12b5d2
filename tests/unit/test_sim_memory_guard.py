"""The snow and liquid memory guards on the CPU path estimate what a bake really takes
(issue 21 §6): the peak RSS of a small bake in a fresh process (``bench/memory_sim.py``'s
measurement: construct, steps, the frame outputs) lies within [0.67, 1.5]× the formula.
Before the CPU formulas existed the GPU ones were used: 0.08–0.45× the measured peak."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.memory_sim import HIGH, LOW, run_case  # noqa: E402


@pytest.mark.parametrize("case", [
    {"effect": "snow", "flakes": 100_000, "wind": 32, "ground": 129},
    {"effect": "snow", "flakes": 400_000, "wind": 48, "ground": 257},
    {"effect": "liquid", "res": 32},
    {"effect": "liquid", "res": 48},
], ids=lambda c: "-".join(str(v) for v in c.values()))
def test_cpu_bake_peak_within_the_guard(case):
    r = run_case(case, timeout=600)
    assert r["measured"] > 16 << 20  # a real working set, not allocator noise
    ratio = r["estimate"] / r["measured"]
    assert LOW <= ratio <= HIGH, f"estimate {r['estimate'] / 2**20:.0f} MiB, measured {r['measured'] / 2**20:.0f} MiB"

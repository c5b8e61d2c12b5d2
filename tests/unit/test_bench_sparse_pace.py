"""``bench/_sparse_pace.py``'s arithmetic (``bench/flip_sparse.py --pace``, issue 24): a substep's span,
idle (the device Δ of pieces in which nothing was queued), busy time and the device's lag behind the host,
on timelines written by hand (no GPU: the marks are numbers)."""

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import _sparse_pace as pace  # noqa: E402

LAT = 0.002  # ms from an event's record to the device running it, where the device waits


def _substep(h0, d0, k0, read_wait=0.05, after_read=0.30):
    """One substep's marks from host *h0* / device *d0* / launches *k0*: the device behind the host by
    d0 − h0 at the start; the topology's launches, the read (the device drains), *after_read* ms of host
    with nothing queued, then the tables' two launches (0.056 ms of device) and P2G (0.9 ms of device);
    (marks, host, device, launches) at its end."""
    m = [(pace.START, h0, d0, k0), ("topology >", h0 + 0.010, d0 + 0.010, k0)]
    h, d = h0 + 0.200, d0 + 0.250  # 5 launches queued over 0.19 ms of host, 0.24 of device work
    m.append(("fused update <", h, d, k0 + 5))
    h = max(h, d) + read_wait  # the read: the host waits for the device, then its own time
    d = h + LAT  # the device drained: the next event runs as it is recorded
    m.append(("after read >", h, d, k0 + 5))
    m.append(("tables >", h + after_read, d + after_read, k0 + 5))  # nothing queued: idle
    h, d = h + after_read + 0.040, d + after_read + 0.056  # two launches: the device behind again
    m.append(("tables <", h, d, k0 + 7))
    m.append(("p2g >", h + 0.010, max(d, h + 0.010 + LAT), k0 + 7))  # the device still on the tables: no idle
    h, d = h + 0.200, d + 0.900
    m.append(("p2g <", h, d, k0 + 12))
    return m, h, d, k0 + 12


def _block(n=2, **kw):
    marks, h, d, k = [], 0.0, LAT, 0  # the block starts on a drained device
    for _ in range(n):
        sub, h, d, k = _substep(h, d, k, **kw)
        marks += sub
    return marks, (h + 0.001, d + 0.001, k)


def test_the_idle_is_the_device_span_of_the_pieces_with_nothing_queued():
    marks, end = _block(after_read=0.30)
    subs = pace.analyse(marks, end)
    assert len(subs) == 2
    s = subs[0]
    # quiet pieces: START .. topology (0.010), fused update < .. after read > (the read), after read .. tables,
    # tables < .. p2g > (0: the device was behind)
    read_gap = 0.052  # the device from the read's event (0.250) to the read's return (0.250 + 0.05 + LAT)
    assert s["idle"] == pytest.approx(0.010 + read_gap + 0.30 + 0.0)
    assert s["pieces"]["after read > .. tables >"] == pytest.approx([0.30, 0.30, 0, 0.30])
    assert s["pieces"]["tables > .. tables <"][3] == 0.0  # two launches in it: none of it idle
    assert s["span"] == pytest.approx(marks[8][2] - marks[0][2])  # to the next substep's start
    assert s["busy"] == pytest.approx(s["span"] - s["idle"])
    assert s["busy"] == pytest.approx(0.250 - 0.010 + 0.056 + 0.900)  # the device's work, read to end


def test_a_longer_host_after_the_read_shows_as_idle_and_nowhere_else():
    short = pace.analyse(*_block(after_read=0.10))
    long = pace.analyse(*_block(after_read=0.40))
    for a, b in zip(short, long):
        assert b["idle"] - a["idle"] == pytest.approx(0.30)
        assert b["busy"] == pytest.approx(a["busy"])


def test_the_lag_is_less_the_blocks_least_and_zero_where_the_device_waits():
    subs = pace.analyse(*_block())
    lags = subs[0]["lags"]
    assert min(min(s["lags"].values()) for s in subs) == pytest.approx(0.0)
    assert lags["after read >"] == pytest.approx(0.0, abs=1e-9)  # after the read: LAT, the least
    assert lags["tables <"] == pytest.approx(0.016)  # the device 16 µs behind once the tables are queued
    assert lags["p2g <"] > 0.7  # P2G's device work runs on past the host
    assert "after read" in pace.lag_line(subs, ("after read >", "p2g >"))


def test_summary_takes_medians_and_counts_a_missing_piece_as_zero():
    subs = pace.analyse(*_block(n=3))
    subs[1]["pieces"]["rare .. piece"] = [1.0, 1.0, 0, 1.0]
    med, rows = pace.summary(subs, top=20)
    assert med["idle"] == pytest.approx(subs[0]["idle"])
    rare = [r for r in rows if r[0] == "rare .. piece"][0]
    assert rare[4] == 0.0  # in one substep of three: the median is 0
    assert rows[0][0] == "after read > .. tables >"  # the largest idle first
    assert pace.summary(subs, 3, by=2)[1][0][0] == "p2g > .. p2g <"  # by device Δ: P2G's 0.9 ms


def test_marks_before_the_first_substep_are_left_out():
    marks, end = _block(n=1)
    subs = pace.analyse([("before", -0.5, -0.5, 0)] + marks, end)
    assert len(subs) == 1 and "before .. substep >" not in subs[0]["pieces"]


def test_a_way_unsets_what_another_way_sets():
    """``use_way`` (the pace blocks' and ``flip_sparse.py --ab``'s): a variable another way sets goes back to
    unset unless this way sets it; (defaults) unsets every one."""
    import os

    a, b = "VOXFX_TEST_WAY_A", "VOXFX_TEST_WAY_B"
    ways = [[f"{a}=1"], [f"{b}=2", f"{a}=x=y"], []]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(a, "before")
        mp.setenv(b, "before")
        pace.use_way(ways, 0)
        assert os.environ[a] == "1" and b not in os.environ
        pace.use_way(ways, 1)
        assert os.environ[b] == "2" and os.environ[a] == "x=y"  # the value after the first "="
        pace.use_way(ways, 2)
        assert a not in os.environ and b not in os.environ


def test_paired_takes_each_rounds_difference_to_way_0():
    """Per round, way w's block less way 0's of the same kind; rounds missing a block left out; the median."""
    rounds = [{(0, "step"): 6.0, (1, "step"): 5.8, (0, "synced"): 7.0}, {(0, "step"): 7.0, (1, "step"): 7.3},
              {(1, "step"): 9.0}, {(0, "step"): 8.0, (1, "step"): 7.6}]
    out = pace.paired(rounds, "step", 2)
    assert out[1][0] == pytest.approx([-0.2, 0.3, -0.4])
    assert out[1][1] == pytest.approx(-0.2)
    assert pace.paired(rounds, "synced", 2)[1][0] == []

"""``run_blocks``' *before_check* (sparse_pressure_scatter_ahead, issue 24, h21e) on the host: a
scripted solver whose state stops after a given number of iterations; the hook is queued before
every check read that follows launched iterations, never twice without an iteration between, and
its last call follows the last iteration launched — so the scatter queued there is of the final x.
The device side (the same pressure and carry bit for bit): tests/gpu/test_flip_sparse_pressure_scatter_ahead_gpu.py."""

import numpy as np
import pytest

from voxfx.kernels.flip import sparse_pressure_scatter_ahead as after
from voxfx.kernels.flip.pressure_gpu import _D_BB, _D_RR, _S_CONVERGED, _S_IT, _S_STOPPED, run_blocks


class _Loop:
    def __init__(self, solver, times):
        self.solver, self.times = solver, times

    def capture(self):
        return None

    def run(self):
        for _ in range(self.times):
            self.solver.iterate()


class _Solver:
    """Iterations counted on the 'device' (stopped once *needs* ran, or at *limit*), every launch,
    hook and read in *log*."""

    persist = True

    def __init__(self, needs, check_every=10, limit=500):
        self.needs, self.check_every, self.limit = needs, check_every, limit
        self.it, self.log = 0, []
        self.loop = _Loop(self, check_every)
        self.single = _Loop(self, 1)

    def iterate(self):
        self.log.append("it")
        if self.it < min(self.needs, self.limit):
            self.it += 1

    def read_control(self):
        self.log.append("read")
        state = np.zeros(4, np.int32)
        state[_S_IT] = self.it
        state[_S_STOPPED] = self.it >= min(self.needs, self.limit)
        state[_S_CONVERGED] = self.it >= self.needs
        scal = np.zeros(8)
        scal[_D_BB], scal[_D_RR] = 1.0, 0.0 if state[_S_CONVERGED] else 1.0
        return state, scal


def _run(needs, predicted, limit=500, hook=True):
    solver = _Solver(needs, limit=limit)
    out = run_blocks(solver, limit, None, predicted, solver.single,
                     (lambda: solver.log.append("hook")) if hook else None)
    return solver.log, out


@pytest.mark.parametrize("needs, predicted", [(11, 11), (11, 12), (12, 10), (12, 11), (0, 0), (3, 0), (25, 0),
                                              (25, 11), (9, 12)])
def test_the_hook_follows_the_last_iteration_and_precedes_each_read_after_launches(needs, predicted):
    log, (iterations, _, converged) = _run(needs, predicted)
    plain, (iterations_plain, _, converged_plain) = _run(needs, predicted, hook=False)
    assert (iterations, converged) == (iterations_plain, converged_plain) == (needs, True)
    assert [e for e in log if e != "hook"] == plain  # the same launches and reads
    for at, event in enumerate(log):
        if event == "read":  # a read after launches has the hook just before it
            since = log[:at][::-1]
            launched = "it" in since[:since.index("read")] if "read" in since else "it" in since
            assert (log[at - 1] == "hook") == launched, log
        if event == "hook":
            assert log[at - 1] == "it" and log[at + 1] == "read", log  # never twice without an iteration between
    if "it" in log:  # the last hook follows the last iteration: its scatter is of the final x
        last_it = len(log) - 1 - log[::-1].index("it")
        assert "hook" in log[last_it:]
    else:  # stopped at the start: no hook, the scatter after the loop (Scatter.result)
        assert "hook" not in log


def test_a_solve_at_its_iteration_limit_gets_the_hook_after_its_last_iterations():
    log, (iterations, _, converged) = _run(40, 5, limit=17)
    assert iterations == 17 and not converged
    last_it = len(log) - 1 - log[::-1].index("it")
    assert log[last_it + 1:] == ["hook", "read"]


def test_the_switch_is_on_by_default_and_read_at_each_call(monkeypatch):
    monkeypatch.delenv(after.SWITCH, raising=False)
    assert after.enabled()
    monkeypatch.setenv(after.SWITCH, "0")
    assert not after.enabled()
    monkeypatch.setenv(after.SWITCH, "1")
    assert after.enabled()
    monkeypatch.setenv(after.SWITCH, "2")
    with pytest.raises(ValueError):
        after.enabled()


class _Launches:
    """unknowns_scatter(_carry) stand-ins: each call's out arrays and a count."""

    def __init__(self, monkeypatch):
        from voxfx.kernels.flip import sparse_pressure_cells

        self.calls = []
        monkeypatch.setattr(sparse_pressure_cells, "unknowns_scatter", self.scatter)
        monkeypatch.setattr(sparse_pressure_cells, "unknowns_scatter_carry", self.scatter_carry)

    def scatter(self, position, x, m, size, out=None):
        self.calls.append(("p", out))
        return np.full(size, len(self.calls), np.float32) if out is None else out

    def scatter_carry(self, position, x, m, size, cell, out=(None, None)):
        self.calls.append(("p+carry", out))
        made = tuple(np.full(size, len(self.calls), np.float32) if a is None else a for a in out)
        return made


def _fresh(out):
    """A launch's *out*: nothing given (new arrays)."""
    return out is None or all(a is None for a in out)


@pytest.mark.parametrize("carry", [None, {"cell": np.zeros(4, np.uint8)}])
def test_scatter_writes_into_its_first_arrays_and_launches_after_the_loop_only_where_never_queued(monkeypatch, carry):
    launches = _Launches(monkeypatch)
    s = after.Scatter(np.zeros(4, np.int32), np.zeros(5, np.float32), 4, 4, carry)
    p = s.result()  # never queued: one launch now
    assert s.queued == 1 and len(launches.calls) == 1 and _fresh(launches.calls[0][1])  # as after the loop
    s2 = after.Scatter(np.zeros(4, np.int32), np.zeros(5, np.float32), 4, 4, carry)
    s2()
    first = s2.p
    s2()  # queued again (a solve that ran on): into the same arrays
    out = launches.calls[-1][1]
    assert s2.p is first and not _fresh(out) and (out is first if carry is None else out[0] is first)
    assert s2.result() is first and s2.queued == 2 and len(launches.calls) == 3  # no launch after the loop
    if carry is not None:
        assert carry["carried"] is s2.carried and p is not None

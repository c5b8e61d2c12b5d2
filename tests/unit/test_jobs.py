"""The job runner (what both the synchronous and the modal operator paths drive)."""

import pytest

from voxfx.addon.jobs import CANCELLED, FAILED, FINISHED, RUNNING, JobRunner, format_duration
from voxfx.kernels.errors import Cancelled, InputError
from voxfx.kernels.progress import report


class FakeClock:  # a plain clock we advance by hand: ETA arithmetic becomes exact
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def counting_job(log, n=4, clock=None, fail_at=None):
    try:
        for i in range(n):
            if clock:
                clock.t += 2.0
            if i == fail_at:
                raise InputError("Object 'Cube' has 3 non-finite vertex coordinates")
            log.append(i)
            yield (i + 1) / n, f"frame {i + 1}/{n}"
        return "all done"
    finally:
        log.append("cleanup")


def test_runs_to_the_end_and_keeps_the_result():
    log = []
    r = JobRunner(counting_job(log))
    assert r.run() == FINISHED
    assert log == [0, 1, 2, 3, "cleanup"] and r.result == "all done" and r.fraction == 1.0


def test_eta_from_elapsed_time():
    clock, log = FakeClock(), []
    r = JobRunner(counting_job(log, clock=clock), clock=clock)
    assert r.eta() is None
    r.step()  # 2 s for the first quarter
    assert r.eta() == pytest.approx(6.0)
    assert "25%" in r.status_text() and "6s left" in r.status_text()


def test_cancel_between_steps_runs_cleanup_and_on_abort():
    log, aborted = [], []
    r = JobRunner(counting_job(log), on_abort=lambda: aborted.append(True))
    r.step()
    r.step()
    r.request_cancel()
    assert r.step() == CANCELLED
    assert log == [0, 1, "cleanup"] and aborted == [True]
    assert r.step() == CANCELLED  # stays cancelled


def test_progress_callback_false_cancels_the_synchronous_run():
    log = []
    r = JobRunner(counting_job(log))
    assert r.run(progress=lambda f, m: f < 0.5) == CANCELLED
    assert log == [0, 1, "cleanup"]


def test_kernel_progress_cancels_inside_a_step():
    seen = []

    def job(runner_box):
        for chunk in range(10):  # a kernel reporting progress within one step
            report(runner_box[0].kernel_progress, chunk / 10, f"chunk {chunk}")
            seen.append(chunk)
            if chunk == 2:
                runner_box[0].request_cancel()
        yield 1.0, "never reached"

    box = []
    r = JobRunner(job(box))
    box.append(r)
    assert r.step() == CANCELLED
    assert seen == [0, 1, 2]


def test_user_error_becomes_a_message_not_a_traceback():
    log, aborted = [], []
    r = JobRunner(counting_job(log, fail_at=2), on_abort=lambda: aborted.append(True))
    assert r.run() == FAILED
    assert r.error == "Object 'Cube' has 3 non-finite vertex coordinates"
    assert log == [0, 1, "cleanup"] and aborted == [True]


def test_internal_error_is_reported_with_its_type(capsys):
    def job():
        yield 0.5, "half"
        raise ZeroDivisionError("boom")

    r = JobRunner(job())
    assert r.run() == FAILED
    assert "ZeroDivisionError" in r.error and "console" in r.error
    assert "Traceback" in capsys.readouterr().err  # the details go to the console


def test_run_for_does_at_least_one_step_per_tick():
    clock, log = FakeClock(), []
    r = JobRunner(counting_job(log, n=10, clock=clock), clock=clock)
    assert r.run_for(0.0) == RUNNING and log == [0]
    assert r.run_for(5.0) == RUNNING and log == [0, 1, 2, 3]  # 2 s per step, 5 s budget


def test_cancelled_exception_from_a_step():
    def job():
        yield 0.1, "one"
        raise Cancelled("stop")

    assert JobRunner(job()).run() == CANCELLED


def test_format_duration():
    assert format_duration(5.4) == "5s"
    assert format_duration(75) == "1m 15s"
    assert format_duration(3725) == "1h 02m"


def test_a_real_memory_error_is_one_line_and_the_process_goes_on():
    """Under a real RLIMIT_AS a job's allocation fails: the runner reports one line
    ("Out of memory while …; try a lower resolution"), not an internal error, frees the
    job's arrays, and the next job in the same process runs."""
    import subprocess
    import sys
    import textwrap

    from voxfx.kernels import backend

    root = str(backend.CUDA_DIR.parent.parent)
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {root!r})
        from tools.package import load; load()
        import resource, numpy as np
        from voxfx.addon.jobs import JobRunner
        from voxfx.kernels import memory
        vm = memory._status_bytes("VmSize")
        resource.setrlimit(resource.RLIMIT_AS, (vm + 768 * 2**20, resource.RLIM_INFINITY))

        def greedy():
            keep = np.ones(400 * 2**20, np.uint8)  # fits
            yield 0.5, "filling the grid"
            more = np.ones(600 * 2**20, np.uint8)  # does not: MemoryError
            yield 1.0, "never"

        r = JobRunner(greedy(), title="Voxelize")
        print("STATE", r.run())
        print("ERROR", r.error)
        ok = JobRunner(iter([(0.5, "x")]))
        ok.run()
        a = np.ones(600 * 2**20, np.uint8)  # the first job's 400 MiB were given back
        print("AFTER", ok.state, int(a[-1]))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert lines["STATE"] == "FAILED"
    err = lines["ERROR"]
    assert err.startswith("Out of memory while filling the grid (Voxelize)"), err
    assert "try a lower resolution" in err and "Internal error" not in err and "\n" not in err
    assert lines["AFTER"] == "FINISHED 1"


def test_cached_pressure_solvers_are_dropped_after_finish_cancel_and_failure():
    """A bake's cached GPU pressure solvers must not outlive it (issue 21 §6): the runner
    drops them whichever way the job ends."""
    from voxfx.kernels.flip import pressure

    def one():
        yield 0.5, "a"

    def bad():
        yield 0.5, "a"
        raise InputError("no")

    def cancelled():
        r = JobRunner(one())
        r.request_cancel()
        r.step()

    for run in (lambda: JobRunner(one()).run(), lambda: JobRunner(bad()).run(), cancelled):
        pressure._gpu_solvers[("left", "behind")] = object()
        run()
        assert len(pressure._gpu_solvers) == 0

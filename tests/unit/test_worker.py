"""The threaded kernel runner of the interactive path (addon/worker.py and the threaded
JobRunner): cancel reaches a kernel mid-call, values and exceptions come back, and
nothing in a job after a cancelled kernel runs. Plain Python, no Blender."""

import threading
import time

import pytest

from voxfx.addon.jobs import CANCELLED, FAILED, FINISHED, RUNNING, JobRunner, Kernel
from voxfx.addon.worker import Worker
from voxfx.kernels.errors import Cancelled, InputError
from voxfx.kernels.progress import report

CHUNK_SECONDS = 0.01  # one chunk of the fake kernels below


def chunked_kernel(chunks, log, started=None, release=None):
    """A kernel of *chunks* chunks that reports after each one (like voxelize's batches)."""

    def run(progress):
        for i in range(chunks):
            if started is not None and i == 1:
                started.set()
                release.wait(5.0)  # hold mid-call until the test has asked to cancel
            time.sleep(CHUNK_SECONDS)
            log.append(i)
            report(progress, (i + 1) / chunks, f"chunk {i + 1}/{chunks}")
        return sum(log)

    return run


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_worker_returns_the_kernels_value():
    log = []
    w = Worker(chunked_kernel(5, log)).start()
    assert w.wait(5.0)
    assert w.result() == 0 + 1 + 2 + 3 + 4 and w.calls == 5 and w.fraction == 1.0


def test_result_before_the_end_is_refused():
    release = threading.Event()
    w = Worker(lambda progress: release.wait(5.0)).start()
    with pytest.raises(RuntimeError, match="still running"):
        w.result()
    release.set()
    assert w.wait(5.0) and w.result() is True


def test_worker_exception_is_raised_on_the_polling_thread():
    def boom(progress):
        report(progress, 0.5, "half")
        raise ZeroDivisionError("inside the kernel")

    w = Worker(boom).start()
    w.wait(5.0)
    with pytest.raises(ZeroDivisionError, match="inside the kernel") as info:
        w.result()
    assert any(frame.name == "boom" for frame in info.traceback)  # the kernel's own traceback


def cancel_latency(w, wait_s: float) -> float:
    """Cancel *w*, wait for it to end (at most *wait_s*), check that it ended with
    ``Cancelled``; returns the seconds from the cancel to the end."""
    asked = time.monotonic()
    w.cancel()
    assert w.wait(wait_s)
    latency = time.monotonic() - asked
    with pytest.raises(Cancelled):
        w.result()
    return latency


@pytest.mark.parametrize("chunks_before_cancel", [1, 3, 7])
def test_cancel_reaches_the_worker_at_its_next_chunk(chunks_before_cancel):
    log = []
    w = Worker(chunked_kernel(1000, log)).start()
    wait_until(lambda: w.calls >= chunks_before_cancel)
    latency = cancel_latency(w, 5.0)
    assert chunks_before_cancel <= len(log) <= chunks_before_cancel + 2  # stopped within a chunk or two
    assert latency < 0.5


def test_a_sink_answering_false_cancels():
    log = []
    w = Worker(chunked_kernel(100, log), sink=lambda f, m: f < 0.05).start()
    w.wait(5.0)
    with pytest.raises(Cancelled):
        w.result()
    assert len(log) == 5 and w.cancel_requested


# ----------------------------------------------------------------- the threaded JobRunner

def job_with_kernel(log, kernel, after=None):
    """bpy-like work before and after one Kernel item, with clean-up (like the bakes)."""
    try:
        log.append("extract")
        yield 0.1, "reading"
        try:
            value = yield Kernel(kernel, "voxelizing", 0.2, 0.9)
        except ZeroDivisionError as e:  # a job may turn a kernel's error into a message
            raise InputError(f"kernel failed: {e}") from e
        log.append(("write", value))  # only after a complete kernel call
        if after:
            yield 0.95, "writing"
        return value
    finally:
        log.append("cleanup")


def test_threaded_runner_returns_the_kernel_value_to_the_job():
    log, chunks = [], []
    r = JobRunner(job_with_kernel(log, chunked_kernel(4, chunks)), threaded=True)
    assert r.step() == RUNNING and r.worker is None  # the bpy part ran here
    assert r.step() == RUNNING and r.worker is not None  # the kernel is on its thread
    assert r.worker._thread is not threading.current_thread()
    r.wait(5.0)
    while r.step() == RUNNING:
        pass
    assert r.state == FINISHED and r.result == 0 + 1 + 2 + 3
    assert log == ["extract", ("write", 6), "cleanup"]


def test_threaded_progress_maps_into_the_kernels_span():
    seen = []
    release = threading.Event()

    def kernel(progress):
        report(progress, 0.5, "half")
        seen.append(threading.current_thread().name)
        release.wait(5.0)
        return 1

    r = JobRunner(job_with_kernel([], kernel), threaded=True)
    r.step()
    r.step()
    wait_until(lambda: seen)
    assert r.fraction == pytest.approx(0.2 + 0.5 * 0.7) and r.message == "voxelizing: half"
    assert "55%" in r.status_text()
    release.set()
    r.wait(5.0)
    assert r.run() == FINISHED and seen == ["voxfx-kernel"]


def test_cancel_from_the_main_thread_stops_the_kernel_mid_step():
    log, chunks = [], []
    started, release = threading.Event(), threading.Event()
    aborted = []
    r = JobRunner(job_with_kernel(log, chunked_kernel(1000, chunks, started, release)), threaded=True,
                  on_abort=lambda: aborted.append(True))
    r.step()
    r.step()
    assert started.wait(5.0)  # the kernel is inside its second chunk
    r.request_cancel()  # what Esc does
    release.set()
    assert r.step() in (RUNNING, CANCELLED)  # polling never blocks
    asked = time.monotonic()
    assert r.wait(5.0)
    assert time.monotonic() - asked < 0.5
    assert r.step() == CANCELLED
    assert len(chunks) <= 3  # stopped at the next chunk, not after 1000
    assert log == ["extract", "cleanup"] and aborted == [True]  # nothing written after the kernel
    assert r.worker is None


def test_a_kernel_that_ends_after_the_cancel_is_dropped():
    log = []
    release = threading.Event()
    r = JobRunner(job_with_kernel(log, lambda progress: release.wait(5.0)), threaded=True)
    r.step()
    r.step()
    r.request_cancel()  # the kernel never reports: it runs to its end
    release.set()
    r.wait(5.0)
    assert r.step() == CANCELLED
    assert log == ["extract", "cleanup"]


def test_kernel_exception_is_raised_inside_the_job():
    log = []

    def kernel(progress):
        raise ZeroDivisionError("boom")

    r = JobRunner(job_with_kernel(log, kernel), threaded=True)
    r.step()
    r.step()
    r.wait(5.0)
    assert r.step() == FAILED
    assert r.error == "kernel failed: boom" and log == ["extract", "cleanup"]


def test_an_internal_error_in_the_worker_is_reported_with_its_type(capsys):
    def job():
        yield Kernel(lambda progress: {}["missing"], "working", 0.0, 1.0)

    r = JobRunner(job(), threaded=True)
    r.step()
    r.wait(5.0)
    assert r.step() == FAILED and "KeyError" in r.error
    assert "Traceback" in capsys.readouterr().err


def test_run_for_returns_at_once_while_a_kernel_runs():
    release = threading.Event()
    r = JobRunner(job_with_kernel([], lambda progress: release.wait(5.0)), threaded=True)
    t0 = time.monotonic()
    assert r.run_for(10.0) == RUNNING and r.worker is not None  # one tick: no waiting for the kernel
    assert r.run_for(10.0) == RUNNING
    assert time.monotonic() - t0 < 1.0
    release.set()
    r.wait(5.0)
    assert r.run_for(10.0) == FINISHED


@pytest.mark.parametrize("threaded", [False, True])
def test_synchronous_run_gives_the_same_result_either_way(threaded):
    log = []
    r = JobRunner(job_with_kernel(log, chunked_kernel(3, []), after=True), threaded=threaded)
    assert r.run() == FINISHED and r.result == 3
    assert log == ["extract", ("write", 3), "cleanup"]


def test_synchronous_progress_false_cancels_inside_a_kernel():
    log, chunks = [], []
    r = JobRunner(job_with_kernel(log, chunked_kernel(100, chunks)))
    assert r.run(progress=lambda f, m: f < 0.3) == CANCELLED
    assert 1 <= len(chunks) <= 20 and log == ["extract", "cleanup"]

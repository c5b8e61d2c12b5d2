"""Long work: one job, two ways to run it.

A *job* is a generator that does its work in steps (a frame, a chunk) and yields
``(fraction, message)`` after each one. It cleans up in ``try/finally`` or through the
runner's ``on_abort``, and writes outputs atomically (``cache.BakeCache``), so stopping
it between steps leaves no half-written output.

A step may instead yield a ``Kernel``: array-only work (``run(progress)``, no ``bpy``)
whose value comes back as the value of the ``yield`` (or whose exception is raised
there). The runner runs it inline (synchronous path) or, with ``threaded=True`` (the
interactive path), on a ``worker.Worker`` thread that the modal timer polls, so Esc is
read while a long kernel runs and reaches it at its next chunk. Everything else in a
job (every ``bpy`` access) runs on the main thread.

``JobRunner`` drives a job without Blender (pure Python, testable): step by step, with
ETA, a kernel-level ``progress(fraction, message) -> bool`` callback (False cancels
inside a step) and cancel between steps.

``JobOperator`` is the operator mixin every bake uses:

* ``execute`` runs the whole job synchronously. Background mode (``blender -b``), the
  CLI and tests use it; there ``INVOKE_DEFAULT`` also ends up in ``execute`` and timers
  never fire.
* ``invoke`` (interactive) runs it step by step from a window timer, its kernels on a
  worker thread: progress bar (``window_manager.progress_*``), status-bar text with
  ETA, and ESC to cancel (within a chunk of the running kernel).
"""

from __future__ import annotations

import contextvars
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from ..kernels.backend import DeviceMemoryError
from ..kernels.errors import Cancelled, VoxFXError
from .worker import Worker

RUNNING, FINISHED, CANCELLED, FAILED = "RUNNING", "FINISHED", "CANCELLED", "FAILED"
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("voxfx_active_job", default=None)


def kernel_progress(start: float, end: float, what: str):
    """A ``progress(fraction, message)`` for a kernel called inside the running job's
    step, mapping its 0..1 onto *start*..*end* of the job (None outside a job)."""
    runner = _ACTIVE.get()
    if runner is None:
        return None
    return lambda f, m: runner.kernel_progress(start + (end - start) * float(f), f"{what}: {m}")


@dataclass
class Kernel:
    """What a job yields for array-only work: ``run(progress)`` touches no ``bpy`` (it
    may run on a worker thread) and reports into *start*..*end* of the job's progress,
    messages prefixed by *what*. The job gets its value back from the ``yield``."""

    run: Callable
    what: str
    start: float
    end: float


@dataclass
class BakeResult:
    """What a finished bake job returns: one line of what it did, where, and its notes
    (frames repaired, checkpoints skipped, manifest entries ignored)."""

    summary: str
    folder: str
    notes: list = field(default_factory=list)
    details: str = ""  # a further clause for the report, e.g. the liquid's substeps per frame

    def line(self, title: str) -> str:
        """The operator's final report line."""
        return f"{title}: {self.summary} in '{self.folder}'" + (f"; {self.details}" if self.details else "")


def report_bake(operator, result: BakeResult, title: str) -> None:
    """A bake operator's ``job_finished`` report: each of *result*'s notes as a warning, then
    its line under *title*."""
    for note in result.notes:
        operator.report({"WARNING"}, note)
    operator.report({"INFO"}, result.line(title))


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {s:02d}s"
    return f"{s}s"


class JobRunner:
    """Drives a job generator; knows its state, progress, ETA and error."""

    def __init__(self, steps: Iterator, *, title: str = "VoxFX", on_abort: Optional[Callable[[], None]] = None,
                 clock: Callable[[], float] = time.monotonic, threaded: bool = False):
        self.steps = steps
        self.threaded = threaded  # Kernel items on a worker thread (the interactive path)
        self.worker: Optional[Worker] = None  # the running kernel call, if any
        self._reply: Optional[tuple] = None  # ("send", value) or ("throw", exception) for the job
        self.title = title
        self.on_abort = on_abort
        self.clock = clock
        self.state = RUNNING
        self.fraction = 0.0
        self.message = "starting"
        self.error: Optional[str] = None
        self.result = None
        self._cancel_requested = False
        self._outer: Optional[Callable[[float, str], bool]] = None
        self._started = clock()

    # -------------------------------------------------------------- progress
    def kernel_progress(self, fraction: float, message: str) -> bool:
        """A ``progress`` callback for kernels inside a step: False once cancelled. The
        outer callback of ``run`` (console lines in the CLI) hears it too, so a long
        kernel is never silent."""
        self.fraction, self.message = float(fraction), message
        if self._outer is not None and self._outer(self.fraction, self.message) is False:
            self._cancel_requested = True
        return not self._cancel_requested

    def elapsed(self) -> float:
        return self.clock() - self._started

    def eta(self) -> Optional[float]:
        """Seconds left, extrapolated from the elapsed time; None before any progress."""
        if self.fraction <= 0.0:
            return None
        return self.elapsed() * (1.0 - self.fraction) / self.fraction

    def status_text(self) -> str:
        eta = self.eta()
        tail = f" — {format_duration(eta)} left" if eta is not None and self.state == RUNNING else ""
        return f"{self.title}: {self.message} — {100.0 * self.fraction:.0f}%{tail}"

    # -------------------------------------------------------------- control
    def request_cancel(self) -> None:
        """Ask to stop: honoured by the next kernel progress call or step boundary."""
        self._cancel_requested = True
        if self.worker is not None:
            self.worker.cancel()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def step(self) -> str:
        """Run one step of the job (or, while a kernel runs on its worker, look whether it
        has ended); return the state afterwards."""
        if self.state != RUNNING:
            return self.state
        if self.worker is not None:
            if not self.worker.done():
                return self.state
            self._take_worker()
        if self._cancel_requested:  # a kernel that ended anyway is dropped: nothing after it runs
            return self._cancel()
        try:
            token = _ACTIVE.set(self)  # kernels inside this step report through kernel_progress
            try:
                item = self._resume()
            finally:
                _ACTIVE.reset(token)
        except StopIteration as stop:
            self.state, self.fraction, self.result = FINISHED, 1.0, stop.value
            release_memory()  # the pool's free blocks and cached solvers: not kept past the bake
            return self.state
        # The job is closed and memory released after the ``except`` block: inside it the
        # exception's traceback still holds the job's frames, and with them its arrays.
        except Cancelled:
            failure = None
        except Exception as e:  # noqa: BLE001 - becomes one line (an internal error's traceback: console)
            failure = self._message_of(e)
        else:
            failure = False
        if failure is None:
            return self._cancel()
        if failure is not False:
            return self._fail(failure)
        if isinstance(item, Kernel):
            self._start_kernel(item)
        elif item is not None:
            self.fraction, self.message = float(item[0]), str(item[1])
        return self.state

    def _message_of(self, e: Exception) -> str:
        """The one-line report of the job's exception *e*."""
        if isinstance(e, (VoxFXError, DeviceMemoryError)):  # a guard refused before allocating
            return str(e)
        if isinstance(e, MemoryError) or is_out_of_memory(e):  # the process and the pool go on
            return out_of_memory_message(e, self.title, self.message)
        traceback.print_exc(file=sys.stderr)
        return f"Internal error ({type(e).__name__}: {e}); details in the console"

    def _resume(self):
        """Advance the job, handing it the last kernel's value (or exception)."""
        reply, self._reply = self._reply, None
        if reply is None:
            return next(self.steps)
        how, value = reply
        if how == "throw":
            return self.steps.throw(value)
        return self.steps.send(value)

    def _start_kernel(self, item: Kernel) -> None:
        """Run a Kernel item: on a worker thread (threaded) or here, at once."""
        self.fraction, self.message = float(item.start), item.what
        span = item.end - item.start

        def progress(f, m):
            return self.kernel_progress(item.start + span * float(f), f"{item.what}: {m}")

        def run(p):
            token = _ACTIVE.set(self)  # code that asks kernel_progress() finds this job on any thread
            try:
                return item.run(p)
            finally:
                _ACTIVE.reset(token)

        if self.threaded:
            self.worker = Worker(run, progress).start()
            if self._cancel_requested:
                self.worker.cancel()
            return
        try:
            self._reply = ("send", run(progress))
        except Exception as e:  # noqa: BLE001 - raised inside the job, where it can clean up
            self._reply = ("throw", e)

    def _take_worker(self) -> None:
        worker, self.worker = self.worker, None
        try:
            self._reply = ("send", worker.result())
        except BaseException as e:  # noqa: BLE001 - raised inside the job at its yield
            self._reply = ("throw", e)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block up to *timeout* seconds for the running kernel call (if any) to end."""
        return self.worker is None or self.worker.wait(timeout)

    def run(self, progress: Optional[Callable[[float, str], bool]] = None) -> str:
        """Run to the end (synchronous path); *progress* returning False cancels."""
        self._outer = progress
        while self.step() == RUNNING:
            self.wait()  # threaded: this path still waits for each kernel call
            if progress is not None and progress(self.fraction, self.message) is False:
                self.request_cancel()
        return self.state

    def run_for(self, seconds: float) -> str:
        """Run steps until *seconds* have passed (one at least): a modal timer tick."""
        deadline = self.clock() + seconds
        while self.step() == RUNNING and self.worker is None and self.clock() < deadline:
            pass  # a running worker ends the tick: the next timer event polls it
        return self.state

    def _cancel(self) -> str:
        self.state = CANCELLED
        self.message = "cancelled"
        return self._abort()

    def _fail(self, message: str) -> str:
        self.state, self.error = FAILED, message
        return self._abort()

    def _abort(self) -> str:
        """After a cancel or a failure: close the job, then ``on_abort``, then release the
        device memory, each even where the one before raised."""
        try:
            self.steps.close()  # runs the job's finally blocks now, not at garbage collection
        finally:
            try:
                if self.on_abort is not None:
                    self.on_abort()
            finally:
                release_memory()
        return self.state


def keep_frame_on_abort(scene, job):
    """Run the job generator *job* (``yield from``); if it is cancelled or fails, put
    *scene* back on the frame it showed before (bakes move it while reading the scene)."""
    frame, subframe = scene.frame_current, scene.frame_subframe
    finished = False
    try:
        result = yield from job
        finished = True
        return result
    finally:
        if not finished:
            scene.frame_set(frame, subframe=subframe)


def run_inline(job):
    """Drive a job generator to its end here, its ``Kernel`` items inline and unheard:
    its return value, or its exception raised (tests, scripts)."""
    value, error = None, None
    while True:
        try:
            item = job.throw(error) if error is not None else job.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        if isinstance(item, Kernel):
            try:
                value = item.run(None)
            except Exception as e:  # noqa: BLE001 - raised inside the job, where it can clean up
                error = e


def is_out_of_memory(e: BaseException) -> bool:
    """A MemoryError, or CuPy's OutOfMemoryError (looked up only when CuPy is already
    imported: VoxFX never imports it for this)."""
    if isinstance(e, MemoryError):
        return True
    cp = sys.modules.get("cupy")
    oom = getattr(getattr(getattr(cp, "cuda", None), "memory", None), "OutOfMemoryError", None)
    return isinstance(oom, type) and isinstance(e, oom)


def out_of_memory_message(e: BaseException, title: str, doing: str) -> str:
    """One line: what ran out, while doing what, and what to try."""
    where = "GPU memory" if type(e).__module__.startswith("cupy") else "memory"
    detail = str(e).splitlines()[0].strip() if str(e).strip() else type(e).__name__
    return f"Out of {where} while {doing or 'working'} ({title}): {detail}; try a lower resolution"


def release_memory() -> None:
    """After a failed, cancelled or finished job: drop reference cycles holding its arrays,
    give CuPy's free pool blocks back and drop cached GPU solvers (no-op without CuPy)."""
    import gc

    gc.collect()
    try:
        from ..kernels.memory import release_gpu_pool
    except ImportError:  # pragma: no cover - jobs.py used without the kernels package
        return
    release_gpu_pool()


def console_progress(title: str, every: float = 1.0, stream=None):
    """A progress callback that prints a line at most every *every* seconds (background)."""
    last = [-1e9]
    stream = stream or sys.stdout

    def progress(fraction: float, message: str) -> bool:
        now = time.monotonic()
        if now - last[0] >= every or fraction >= 1.0:
            last[0] = now
            print(f"{title}: {100.0 * fraction:5.1f}%  {message}", file=stream, flush=True)
        return True

    return progress


class JobOperator:
    """Mixin for ``bpy.types.Operator`` subclasses that run a job.

    Subclasses implement ``make_job(context) -> generator`` (raise ``VoxFXError`` for bad
    input: it becomes an error report, never a traceback) and may override
    ``job_finished(context, result)`` (on the main thread, after the last step: write
    results into the scene) and ``job_aborted(context)`` (after a cancel or failure).
    """

    job_title = "VoxFX"
    tick_seconds = 0.1  # work done per timer tick in the interactive path

    def make_job(self, context):  # pragma: no cover - abstract
        raise NotImplementedError

    def job_finished(self, context, result) -> None:
        pass

    def job_aborted(self, context) -> None:
        """Called after a cancel or a failure, once the job's own clean-up has run."""

    def _start(self, context, threaded: bool = False) -> Optional[JobRunner]:
        try:
            steps = self.make_job(context)
        except VoxFXError as e:
            self.report({"ERROR"}, str(e))
            return None
        return JobRunner(steps, title=self.job_title, on_abort=lambda: self.job_aborted(context), threaded=threaded)

    def _conclude(self, context, runner: JobRunner) -> set:
        if runner.state == FINISHED:
            self.job_finished(context, runner.result)
            self.report({"INFO"}, f"{self.job_title}: done in {format_duration(runner.elapsed())}")
            return {"FINISHED"}
        if runner.state == CANCELLED:
            self.report({"WARNING"}, f"{self.job_title}: cancelled")
        else:
            self.report({"ERROR"}, runner.error or f"{self.job_title} failed")
        return {"CANCELLED"}

    # ------------------------------------------------------- synchronous path
    def execute(self, context):
        import bpy

        runner = self._start(context)
        if runner is None:
            return {"CANCELLED"}
        self._runner = runner
        progress = console_progress(self.job_title) if bpy.app.background else None
        runner.run(progress)
        return self._conclude(context, runner)

    # ------------------------------------------------------ interactive path
    def invoke(self, context, event):
        import bpy

        if bpy.app.background or context.window is None:
            return self.execute(context)
        runner = self._start(context, threaded=True)
        if runner is None:
            return {"CANCELLED"}
        self._runner = runner
        self._area = context.area
        wm = context.window_manager
        wm.progress_begin(0, 100)
        self._timer = wm.event_timer_add(0.02, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        runner = self._runner
        if event.type == "ESC" and event.value == "PRESS":
            runner.request_cancel()  # a running kernel sees it at its next chunk
            runner.step()  # between steps: stops now
        elif event.type == "TIMER":
            runner.run_for(self.tick_seconds)  # returns at once while a kernel runs on its worker
        else:
            return {"PASS_THROUGH"}
        if runner.state == RUNNING:
            context.window_manager.progress_update(int(100 * runner.fraction))
            hint = " (cancelling…)" if runner.cancel_requested else " (Esc to cancel)"
            context.workspace.status_text_set(runner.status_text() + hint)
            self._header(runner.status_text())
            return {"RUNNING_MODAL"}
        self._end_modal(context)
        return self._conclude(context, runner)

    def _end_modal(self, context) -> None:
        wm = context.window_manager
        if getattr(self, "_timer", None) is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        context.workspace.status_text_set(None)
        self._header(None)

    def _header(self, text) -> None:
        """Header text of the area the job was started from (the Properties editor or
        the 3D View's sidebar), cleared with None."""
        area = getattr(self, "_area", None)
        try:
            if area is not None:
                area.header_text_set(text)
        except ReferenceError:  # the area went away (screen changed): the status bar still shows it
            self._area = None

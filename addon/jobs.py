"""Long work: one job, two ways to run it.

A *job* is a generator that does its work in steps (a frame, a chunk) and yields
``(fraction, message)`` after each one. It cleans up in ``try/finally`` or through the
runner's ``on_abort``, and writes outputs atomically (``cache.BakeCache``), so stopping
it between steps leaves no half-written output.

``JobRunner`` drives a job without Blender (pure Python, testable): step by step, with
ETA, a kernel-level ``progress(fraction, message) -> bool`` callback (False cancels
inside a step) and cancel between steps.

``JobOperator`` is the operator mixin every bake uses:

* ``execute`` runs the whole job synchronously. Background mode (``blender -b``), the
  CLI and tests use it; there ``INVOKE_DEFAULT`` also ends up in ``execute`` and timers
  never fire.
* ``invoke`` (interactive) runs it step by step from a window timer: progress bar
  (``window_manager.progress_*``), status-bar text with ETA, and ESC to cancel.
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
class BakeResult:
    """What a finished bake job returns: one line of what it did, where, and its notes
    (frames repaired, checkpoints skipped, manifest entries ignored)."""

    summary: str
    folder: str
    notes: list = field(default_factory=list)


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
                 clock: Callable[[], float] = time.monotonic):
        self.steps = steps
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

    def step(self) -> str:
        """Run one step of the job; return the state afterwards."""
        if self.state != RUNNING:
            return self.state
        if self._cancel_requested:
            return self._cancel()
        try:
            token = _ACTIVE.set(self)  # kernels inside this step report through kernel_progress
            try:
                item = next(self.steps)
            finally:
                _ACTIVE.reset(token)
        except StopIteration as stop:
            self.state, self.fraction, self.result = FINISHED, 1.0, stop.value
            release_memory()  # the pool's free blocks and cached solvers: not kept past the bake
            return self.state
        except Cancelled:
            return self._cancel()
        except VoxFXError as e:
            return self._fail(str(e))
        except DeviceMemoryError as e:  # a guard refused before allocating: its message says it all
            return self._fail(str(e))
        except MemoryError as e:  # a guard's estimate was not enough: one line, the process goes on
            return self._fail(out_of_memory_message(e, self.title, self.message))
        except Exception as e:  # noqa: BLE001 - shown as a message, traceback to the console
            if is_out_of_memory(e):
                return self._fail(out_of_memory_message(e, self.title, self.message))
            traceback.print_exc(file=sys.stderr)
            return self._fail(f"Internal error ({type(e).__name__}: {e}); details in the console")
        if item is not None:
            self.fraction, self.message = float(item[0]), str(item[1])
        return self.state

    def run(self, progress: Optional[Callable[[float, str], bool]] = None) -> str:
        """Run to the end (synchronous path); *progress* returning False cancels."""
        self._outer = progress
        while self.step() == RUNNING:
            if progress is not None and progress(self.fraction, self.message) is False:
                self.request_cancel()
        return self.state

    def run_for(self, seconds: float) -> str:
        """Run steps until *seconds* have passed (one at least): a modal timer tick."""
        deadline = self.clock() + seconds
        while self.step() == RUNNING and self.clock() < deadline:
            pass
        return self.state

    def _cancel(self) -> str:
        self.state = CANCELLED
        self.message = "cancelled"
        try:
            self.steps.close()  # runs the job's finally blocks now, not at garbage collection
        finally:
            try:
                if self.on_abort is not None:
                    self.on_abort()
            finally:
                release_memory()
        return self.state

    def _fail(self, message: str) -> str:
        self.state, self.error = FAILED, message
        try:
            self.steps.close()
        finally:
            try:
                if self.on_abort is not None:
                    self.on_abort()
            finally:
                release_memory()
        return self.state


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

    def _start(self, context) -> Optional[JobRunner]:
        try:
            steps = self.make_job(context)
        except VoxFXError as e:
            self.report({"ERROR"}, str(e))
            return None
        return JobRunner(steps, title=self.job_title, on_abort=lambda: self.job_aborted(context))

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
        runner = self._start(context)
        if runner is None:
            return {"CANCELLED"}
        self._runner = runner
        wm = context.window_manager
        wm.progress_begin(0, 100)
        self._timer = wm.event_timer_add(0.02, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        runner = self._runner
        if event.type == "ESC":
            runner.request_cancel()
            runner.step()
        elif event.type == "TIMER":
            runner.run_for(self.tick_seconds)
        else:
            return {"PASS_THROUGH"}
        if runner.state == RUNNING:
            context.window_manager.progress_update(int(100 * runner.fraction))
            context.workspace.status_text_set(runner.status_text() + " (Esc to cancel)")
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

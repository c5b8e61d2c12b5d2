"""One kernel call on a thread of its own, so a windowed Blender stays responsive.

Blender reads no events while Python runs on its main thread: a kernel call of a minute
would make Esc wait a minute. The interactive job path therefore hands each array-only
kernel call (``jobs.Kernel``) to a ``Worker`` and polls it from the modal timer:

* the worker runs ``fn(progress)`` on a daemon thread and touches arrays only (every
  ``bpy`` access stays on the main thread, before and after);
* ``progress(fraction, message)``, called by the kernel between its chunks, records
  where it is and answers False once ``cancel()`` was called (or the caller's *sink*
  said False), so the kernel raises ``Cancelled`` at its next chunk;
* ``result()``, on the polling thread once ``done()``, returns the value or raises the
  kernel's exception there (``Cancelled`` included), traceback kept.

Plain Python: no ``bpy``, testable anywhere.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

Progress = Callable[[float, str], bool]


class Worker:
    """Runs ``fn(progress)`` on a thread; cancel reaches it at its next progress call."""

    def __init__(self, fn: Callable[[Progress], Any], sink: Optional[Progress] = None, name: str = "voxfx-kernel"):
        self._fn = fn
        self._sink = sink
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self.fraction, self.message = 0.0, "starting"
        self.calls = 0  # progress calls heard: how often the kernel looked for a cancel
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> "Worker":
        self._thread.start()
        return self

    # ------------------------------------------------------------ worker thread
    def progress(self, fraction: float, message: str) -> bool:
        """The kernel's callback (worker thread): False once a cancel was asked for."""
        self.calls += 1
        self.fraction, self.message = float(fraction), str(message)
        if self._sink is not None and self._sink(self.fraction, self.message) is False:
            self._cancel.set()
        return not self._cancel.is_set()

    def _main(self) -> None:
        try:
            self._value = self._fn(self.progress)
        except BaseException as e:  # noqa: BLE001 - handed to the polling thread by result()
            self._error = e
        finally:
            self._done.set()

    # ------------------------------------------------------------ polling thread
    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block up to *timeout* seconds for the end; True once done."""
        return self._done.wait(timeout)

    def result(self) -> Any:
        """The value of ``fn``, or its exception raised here. Only once ``done()``."""
        if not self._done.is_set():
            raise RuntimeError("the kernel call is still running")
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

"""A bake's frames written on a thread of their own, one frame in flight.

Writing an 8M-particle liquid frame (compress, fsync, the VDB) takes seconds of CPU; the
simulation's next frame needs none of it. ``FrameWriter.write`` therefore returns as
soon as the frame is handed over, and the bake steps the next frame while a thread
finishes this one (``BakeCache.finish_frame``).

By default (``VOXFX_CHECKPOINT=before_step``) ``write`` makes the frame's checkpoint durable
and records it here, on the bake's thread, before the next frame steps
(``BakeCache.write_state``): a checkpoint holds everything the frame's files are computed
from (the liquid's grid velocity too), so a kill while the thread writes frame N's files
costs at most frame N + 1, the frame being simulated (N is rewritten from its checkpoint,
``sim_bake``): issue 21 §1's promise. ``VOXFX_CHECKPOINT=overlap`` (opt-in, issue 24: at 8M
liquid particles the checkpoint's durable write, ~250 MB and an fsync, is ~100 ms of the
frame the bake waits for) hands the checkpoint to the thread too: ``BakeCache.finish_frame``
writes it beside the frame's files, renames and records it, then renames and records the
files, so a kill while the thread writes frame N, before N's checkpoint is recorded, costs
frames N and N + 1 (the next Bake resumes from N − 1's checkpoint), once it is recorded only
N + 1: one frame more than issue 21 §1 allows, 485 → 379 ms a frame at 8M. Recorded frames
are never lost either way. The previous checkpoints
stay until the frame is recorded (``BakeCache._prune_checkpoints`` keeps those of frames
not recorded yet). Frames are recorded one after another, in order: ``write`` waits for
the frame before (the queue holds one frame) before it hands this one over, so the
manifest never records frame N + 1 before frame N and the cache's writes are one
sequence (the fault-injection steps of ``fsio`` too; the checkpoint's own thread has
one step, before the files' first).

Writers that use ``bpy`` (marked ``cache.on_main_thread``) run in ``write``, on the
bake's thread (``BakeCache.start_frame``). An error in the writer thread (a full disk:
the cache's one-line ``CacheError``) is raised on the bake's thread, by the next
``write`` or by ``wait``. ``close`` waits for the frame in flight whatever happens, so a
cancelled or failed bake never leaves a thread writing behind it.

The frame handed over must not change afterwards: its writers' arrays are the frame's
own (``kernels.flip.bake.frame_arrays`` and the snow's outputs are copies; device
arrays are encoded before the hand-over, a liquid's up to its raw block on the host,
which its writer compresses here: ``liquid_files``), and checkpoints are copies
(``checkpoint()``; on a GPU in a page-locked block the simulation reuses only once
the state is released: ``write`` and the thread release it once written or failed).

No ``bpy`` here.
"""

from __future__ import annotations

import threading
from typing import Callable, Mapping, Optional

from ..kernels.checkpoint import checkpoint_mode
from .cache import BakeCache, release


class FrameWriter:
    """Writes the frames of one *cache* in order, each on a thread, one in flight."""

    def __init__(self, cache: BakeCache):
        self.cache = cache
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    def write(self, frame: int, writers: Mapping[str, Callable[[str], None]], state: Mapping | None = None):
        """Hand frame *frame* over (``BakeCache.write_frame``'s arguments): wait for the
        frame before (raising its error), run the writers that need this thread, and
        finish the frame on a writer thread, its *state* (None: its checkpoint is
        recorded already) written here first, durable before the next frame steps (the default
        ``VOXFX_CHECKPOINT=before_step``, or ``legacy``), or with ``overlap`` there beside its
        files (module text). The state is released once written."""
        try:
            self.wait()  # one write at a time, in order: the fault steps of issue 21 §1 stay one sequence
            if state is not None and checkpoint_mode() != "overlap":
                self.cache.write_state(frame, state)  # durable before the next frame is simulated
                release(state)
                state = None
            pending = self.cache.start_frame(frame, writers)
            self._thread = threading.Thread(target=self._finish, args=(pending, state), name=f"voxfx-frame-{frame}")
            self._thread.start()
        except BaseException:
            release(state)
            raise

    def _finish(self, pending, state) -> None:
        try:
            self.cache.finish_frame(pending, state)
        except BaseException as e:  # noqa: BLE001 - raised on the bake's thread by wait()
            self._error = e
        finally:
            release(state)

    def wait(self) -> None:
        """Block until the frame in flight is recorded; raise its error here."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> Optional[BaseException]:
        """Wait for the frame in flight without raising (the bake is already ending, with
        an error or a cancel of its own); its error, if it had one, is returned."""
        try:
            self.wait()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            return e
        return None

"""The deferred compression's fault path (``liquid_files``), shared by the host test
(tests/unit/test_liquid_frame_outputs.py) and the GPU one
(tests/gpu/test_liquid_frame_outputs_gpu.py): a compact frame's ``pack`` failing on the
writer thread, then the frames on disk and the resumed bake."""

import contextlib
import threading

import pytest

from voxfx.addon import compact_points, fsio
from voxfx.addon.cache import BakeCache


@contextlib.contextmanager
def pack_failing_on_writer(monkeypatch, fail_at=None):
    """``RawFrame.pack`` raising at its *fail_at*-th call on a writer thread (the tests'
    reference encodes run on the main thread and are not counted); None: never."""
    real_pack = compact_points.RawFrame.pack
    packs = []

    def pack(frame):
        if threading.current_thread() is not threading.main_thread():
            packs.append(1)
            if len(packs) == fail_at:
                raise MemoryError("injected: no host memory to compress")
        return real_pack(frame)

    monkeypatch.setattr(compact_points.RawFrame, "pack", pack)
    try:
        yield
    finally:
        monkeypatch.setattr(compact_points.RawFrame, "pack", real_pack)


def assert_a_failed_pack_keeps_complete_frames_and_resumes(folder, bake):
    """*bake(expected, fail_at=None)* bakes frames 1–4 into *folder* (appending each frame's
    reference bytes to *expected*) and returns (frames written, its cache). The third
    compression on the writer thread fails: frames 1–2 stay whole, no temporary is left,
    and the next bake rewrites frame 3 from its checkpoint, the same bytes."""
    expected = []
    with pytest.raises(MemoryError, match="injected"):
        bake(expected, fail_at=3)
    cache = BakeCache(folder, "liquid", kind="flip")
    assert cache.frames_done() == [1, 2]
    assert not [p.name for p in folder.iterdir() if fsio.is_temporary(p.name)]
    assert [cache.frame_path(f, ".vxp").read_bytes() for f in (1, 2)] == expected[:2]
    again = []
    written, cache = bake(again)
    assert written == [3, 4] and cache.frames_done() == [1, 2, 3, 4]
    assert [cache.frame_path(f, ".vxp").read_bytes() for f in written] == again
    assert again[0] == expected[2]  # frame 3 rewritten from its checkpoint: the frame whose write failed

"""The launch helper (kernels/grid/launch.py) on the host: launch sizes, compile-time
defines, and the graph loop's plain path."""

import numpy as np
import pytest

from voxfx.kernels.grid import launch


def test_blocks_cover_every_item_with_no_spare_block():
    for threads in (32, 128, 256):
        for n in (1, threads - 1, threads, threads + 1, 10 * threads + 3):
            (b,) = launch.blocks(n, threads)
            assert b * threads >= n > (b - 1) * threads


def test_defines_are_exact_and_sorted():
    opts = launch.define_options({"SOLID": 2, "AIR": 0, "EPS": 1e-3})
    assert opts[0] == "-DAIR=0" and opts[2] == "-DSOLID=2"
    name, text = opts[1][2:].split("=")
    assert name == "EPS" and text.endswith("f")
    assert np.float32(float.fromhex(text[:-1])) == np.float32(1e-3)  # the float32 value, not a rounded decimal
    with pytest.raises(TypeError):
        launch.define_options({"FLAG": True})


def test_double_defines_are_the_float64_value_exactly():
    value = 0.1 + 2.0 ** -40  # not a float32 value
    (opt,) = launch.define_options({"X": launch.Double(value)})
    name, text = opt[2:].split("=")
    assert name == "X" and not text.endswith("f") and float.fromhex(text) == value


def test_voxelizer_constants_reach_the_kernels_from_python():
    """voxelize.cu (with its device functions' header) and lines.cu define no constants of
    their own: the kernel modules pass the filter factor and the candidate margin, as
    doubles, from their Python value."""
    from voxfx.kernels import backend
    from voxfx.kernels.voxelize import exact, gpu, lines

    for module, name, value, sources in ((gpu, "VOXFX_FILTER", exact.FILTER, ("voxelize.cu",
                                                                             "include/voxfx_voxelize.cuh")),
                                         (lines, "CANDIDATE_MARGIN", lines._MARGIN, ("lines.cu",))):
        (opt,) = launch.define_options({name: module.DEFINES[name]})
        assert float.fromhex(opt.split("=")[1]) == value
        assert opt in module._K.options
        for source in sources:
            assert f"#define {name}" not in (backend.CUDA_DIR / source).read_text()


def test_kernels_fold_defines_into_their_options_and_register_them(monkeypatch):
    monkeypatch.setattr(launch, "_COMPILES", {})  # leave the real registry alone
    monkeypatch.setattr(launch, "KERNEL_MODULES", ())
    k = launch.Kernels("probe.cu", ("--fmad=false",), 128, defines={"B": 1, "A": 2, "U": np.uint32(7)})
    assert k.options == ("--fmad=false", "-DA=2", "-DB=1", "-DU=7u") and k.threads == 128
    assert launch.compiles() == {"probe.cu": [k.options]}


def test_graph_loop_without_capture_launches_the_sequence_each_time():
    calls = []
    loop = launch.GraphLoop(lambda: calls.append(1), enabled=False)
    for _ in range(3):
        loop.run()
    assert calls == [1, 1, 1] and loop.graph is None and loop.launches == 0 and not loop.failed


class _Owner:
    """A solver-like owner: a buffer and a loop that records its own method."""

    def __init__(self, calls):
        self.calls = calls
        self.buffer = np.zeros(1 << 16, np.float32)
        self.loop = launch.GraphLoop(self._step, enabled=False, args=(2,))

    def _step(self, k):
        self.calls.append(k)


def test_graph_loop_passes_its_args_and_does_not_keep_its_owner_alive():
    """Issue 21 §6: an owner holding a loop over its own method must go (and its buffers with
    it) as soon as the last outside reference does, without a cyclic collection."""
    import gc
    import weakref

    calls = []
    owner = _Owner(calls)
    owner.loop.run()
    owner.loop.run()
    assert calls == [2, 2]
    loop, gone = owner.loop, weakref.ref(owner)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del owner
        assert gone() is None  # freed by reference counting alone
    finally:
        if enabled:
            gc.enable()
    with pytest.raises(ReferenceError):
        loop.run()  # the owner's launches are gone with it


def test_repeat_runs_its_loop_that_many_times_in_a_row_as_one_loop():
    """``Repeat``: a block of iterations as replays of the one-iteration loop (issue 24): each
    run the loop's launches *times*, nothing of its own to capture."""
    calls = []
    single = launch.GraphLoop(lambda: calls.append(1), enabled=False)
    block = launch.Repeat(single, 4)
    block.run()
    block.run()
    assert calls == [1] * 8 and block.launches == 2
    assert block.capture() is None and block.graph is None and not block.failed
    block.record()
    assert len(calls) == 12 and block.launches == 2

"""surface_overlap's chunks on the host: the z layers of tiles cut into near-equal chunks that cover every
layer once, in order, never more chunks than layers (the device copy is tests/gpu/test_flip_surface_overlap_gpu.py)."""

import numpy as np
import pytest

from voxfx.kernels.flip.surface_overlap import HostSink, chunk_layers


@pytest.mark.parametrize("layers", [1, 2, 3, 7, 8, 9, 130, 131])
@pytest.mark.parametrize("chunks", [1, 4, 8, 16])
def test_chunks_cover_every_layer_once_in_order(layers, chunks):
    marks = chunk_layers(layers, chunks)
    assert marks[0] == 0 and marks[-1] == layers
    sizes = np.diff(marks)
    assert (sizes > 0).all() and len(sizes) == min(chunks, layers)
    assert sizes.max() - sizes.min() <= 1


def test_sink_starts_unfilled():
    sink = HostSink(np.zeros((2, 3, 4), np.float32))
    assert not sink.filled and sink.array.shape == (2, 3, 4)

"""Connected components of cell masks (kernels/grid/components.py): lowest-index labels
for the FLIP pressure's sealed regions, reachability for the wind's sealed air pockets;
checked against SciPy's labelling and a breadth-first search."""

from collections import deque

import numpy as np
import pytest
from scipy import ndimage

from voxfx.kernels.grid import components
from voxfx.kernels.grid.components import label_components, reachable


def test_labels_are_region_minima():
    mask = np.zeros((3, 4, 5), bool)
    mask[0, 0, :] = True  # a row
    mask[2, 1:4, 2] = True  # a column elsewhere
    mask[1, 3, 4] = True  # a lone cell
    lab = label_components(mask).reshape(mask.shape)
    assert set(lab[0, 0, :]) == {0}
    assert set(lab[2, 1:4, 2]) == {int(np.ravel_multi_index((2, 1, 2), mask.shape))}
    assert lab[1, 3, 4] == np.ravel_multi_index((1, 3, 4), mask.shape)
    assert (lab[~mask] == mask.size).all()
    # a snake: a long path through the whole box is one region
    snake = np.zeros((1, 7, 9), bool)
    snake[0, ::2, :] = True
    for row in range(1, 7, 2):
        snake[0, row, 8 if row % 4 == 1 else 0] = True
    lab = label_components(snake)
    assert set(lab[snake.ravel()]) == {0}


@pytest.mark.parametrize("seed", range(4))
def test_labels_match_scipy_components_and_their_first_cell(seed):
    rng = np.random.default_rng(seed)
    mask = rng.random((6, 9, 11)) < 0.5
    lab = label_components(mask)
    ref = ndimage.label(mask)[0].ravel()
    assert lab.dtype == np.int32 and (lab[~mask.ravel()] == mask.size).all()
    for r in range(1, ref.max() + 1):
        cells = np.flatnonzero(ref == r)
        assert (lab[cells] == cells.min()).all()


def bfs(mask, seeds):
    nz, ny, nx = mask.shape
    out = np.zeros_like(mask)
    todo = deque(zip(*np.nonzero(seeds & mask)))
    for c in todo:
        out[c] = True
    while todo:
        k, j, i = todo.popleft()
        for dk, dj, di in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)):
            n = (k + dk, j + dj, i + di)
            if 0 <= n[0] < nz and 0 <= n[1] < ny and 0 <= n[2] < nx and mask[n] and not out[n]:
                out[n] = True
                todo.append(n)
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_ndimage", [True, False])
def test_reachable_is_what_a_flood_fill_reaches(seed, with_ndimage, monkeypatch):
    if not with_ndimage:  # the path for machines without SciPy (or CuPy's ndimage)
        monkeypatch.setattr(components, "_ndimage_labels", lambda mask, xp: None)
    rng = np.random.default_rng(seed)
    mask = rng.random((5, 8, 10)) < 0.55
    seeds = np.zeros_like(mask)
    seeds[:, :, 0] = True  # one side, as the wind's open sides
    assert (reachable(mask, seeds) == bfs(mask, seeds)).all()

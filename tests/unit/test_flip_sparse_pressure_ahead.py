"""The set-up launched ahead of its host read (sparse_pressure_ahead): the key
base it guesses from the last set-up's box, and the test after the read that decides
whether the tables built on that guess and the workspace's capacities stand or are rebuilt.
The tables themselves on a guessed base: tests/unit/test_cuda_sparse_pressure_bricks_host.py;
on the device: tests/gpu/test_flip_sparse_pressure_ahead_gpu.py."""

import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.flip.sparse_multigrid import _MARGIN, KEY_BITS
from voxfx.kernels.flip.sparse_pressure_buffers import grown_strides
from voxfx.kernels.flip.sparse_pressure_setup import level_bounds
from voxfx.kernels.flip.sparse_pressure_ahead import guessed_base, tables_stand


def _caps(n_set):
    return (0,) + tuple(grown_strides([b + 1 for b in level_bounds(n_set)[1:]]))


def _fits(lo, hi, base):
    """The exact base's condition (sparse_pressure_setup._level0_base) for another base."""
    return all(lo_ - _MARGIN >= b and hi_ - b + _MARGIN < 1 << KEY_BITS for lo_, hi_, b in zip(lo, hi, base))


@pytest.mark.parametrize("lo, hi", [((0, 0, 0), (255, 255, 255)), ((-700, 3, -2 ** 20), (-100, 900, -2 ** 20 + 5)),
                                    ((5, 5, 5), (5, 5, 5))])
def test_guessed_base_centres_the_last_box_in_the_keys_range(lo, hi):
    """The guess holds the box it came from, and the same box moved by up to ~2^20 cells
    either way (not by 2^21)."""
    base = guessed_base(lo, hi)
    assert _fits(lo, hi, base)
    for shift in (1, -1, 1000, -1000, 2 ** 20 - 2 ** 10, -(2 ** 20 - 2 ** 10)):
        assert _fits([v + shift for v in lo], [v + shift for v in hi], base), shift
    assert not _fits([v + 2 ** 21 for v in lo], [v + 2 ** 21 for v in hi], base)
    assert not _fits([v - 2 ** 21 for v in lo], [v - 2 ** 21 for v in hi], base)


def test_ahead_tables_stand_only_where_the_base_and_the_capacities_hold():
    """After the read: the guess and the capacities of the last set-up (1.2M cells in its set)
    stand for a set that moved a little and shrank or grew within the capacities' headroom;
    not for one that grew past them, gained a level, or left the guess's range; and a set too
    wide for the keys raises the exact base's message."""
    lo, hi = (10, 20, 30), (300, 200, 260)
    caps = _caps(1_200_000)
    guess = guessed_base(lo, hi)
    moved = ((12, 20, 28), (303, 200, 259))
    assert tables_stand(caps, *moved, level_bounds(1_200_000), guess)
    assert tables_stand(caps, *moved, level_bounds(1_000_000), guess)
    assert tables_stand(caps, *moved, level_bounds(1_400_000), guess)
    assert not tables_stand(caps, *moved, level_bounds(1_600_000), guess)  # past level 1's rows
    assert not tables_stand(caps, *moved, level_bounds(8 ** 7), guess)  # a level more
    far = tuple(v + 2 ** 21 for v in lo), tuple(v + 2 ** 21 for v in hi)
    assert not tables_stand(caps, *far, level_bounds(1_200_000), guess)
    with pytest.raises(InputError, match="spans more than"):
        tables_stand(caps, lo, (10 + 2 ** 21, 200, 260), level_bounds(1_200_000), guess)

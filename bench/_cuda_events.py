"""CUDA-event timing shared by the sparse FLIP transfer benches (flip_sparse_g2p.py,
flip_sparse_p2g.py and those that import ``timed`` from them)."""

from __future__ import annotations

import numpy as np


def timed(cp, fn, repeat, prepare=None):
    """The median over *repeat* calls of *fn*'s device time in ms (CUDA events around each
    call, synchronised after it); *prepare* (untimed) runs before each call."""
    a, b = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(out))

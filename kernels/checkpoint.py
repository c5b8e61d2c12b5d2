"""Checks on simulation states read back from files (checkpoints are untrusted input)."""

from __future__ import annotations

import numpy as np


def check_state(state: dict, want: dict) -> None:
    """Raise ``ValueError`` unless *state* has every key of *want* with its shape and kind.

    *want* maps a key to ``(shape, kinds)``: the exact shape and the NumPy dtype kinds
    accepted (``"f"`` float, ``"i"`` signed, ``"u"`` unsigned integer).
    """
    missing = sorted(set(want) - set(state))
    if missing:
        raise ValueError(f"the state lacks {', '.join(missing)}")
    for key, (shape, kinds) in want.items():
        value = np.asarray(state[key])
        if value.dtype.kind not in kinds:
            raise ValueError(f"'{key}' holds {value.dtype} values, not {kinds!r}-kind numbers")
        if tuple(value.shape) != tuple(shape) or any(n < 0 for n in shape):
            raise ValueError(f"'{key}' has shape {value.shape}, expected {tuple(shape)}")
        if kinds == "f" and value.size and not np.isfinite(value).all():
            raise ValueError(f"'{key}' holds NaN or infinite values")

"""The progress protocol shared by every long kernel pipeline.

A pipeline takes ``progress(fraction, message) -> bool``; ``fraction`` runs from 0 to 1
and a ``False`` answer cancels: the pipeline raises ``Cancelled`` at that point, having
written nothing it cannot take back.
"""

from __future__ import annotations

from typing import Callable, Optional

from .errors import Cancelled

Progress = Callable[[float, str], bool]


def no_progress(fraction: float, message: str) -> bool:
    return True


def report(progress: Optional[Progress], fraction: float, message: str) -> None:
    """Call *progress*; raise ``Cancelled`` if it answers False."""
    if progress is not None and progress(min(max(float(fraction), 0.0), 1.0), message) is False:
        raise Cancelled(f"cancelled during: {message}")


def scaled(progress: Optional[Progress], start: float, end: float) -> Progress:
    """A callback for a sub-stage that maps its 0..1 onto start..end of *progress*."""

    def sub(fraction: float, message: str) -> bool:
        if progress is None:
            return True
        return progress(start + (end - start) * fraction, message)

    return sub

"""The bake panels' one-line cache status (``status_line``): what a bake's folder holds
and which frames are damaged, by ``lstat`` alone (``CacheReader.quick_status``) and at
most every 2 s a bake (a panel redraws far more often). No ``bpy``."""

from __future__ import annotations

import time
from pathlib import Path

from .cache import BakeCache
from .cache_folder import CacheError, frame_ranges

_status_memo: dict = {}


def status_line(folder: Path, name: str, kind: str, now: float | None = None, suffixes=None) -> str | None:
    """One line for a panel: what the bake in *folder* holds and which frames are
    damaged (recomputed at most every 2 s; a panel redraws far more often)."""
    now = time.monotonic() if now is None else now
    key = (str(folder), name, kind)
    memo = _status_memo.get(key)
    if memo and now - memo[0] < 2.0:
        return memo[1]
    try:
        status = BakeCache(folder, name, kind, suffixes=suffixes).quick_status()
    except CacheError:
        status = None
    if status is None:
        line = None
    elif status[1]:
        line = f"Frames {frame_ranges(status[1])} damaged or missing: Bake repairs them"
    elif status[0]:
        line = f"Baked frames {frame_ranges(status[0])}"
    else:
        line = "Nothing baked yet"
    _status_memo[key] = (now, line)
    return line

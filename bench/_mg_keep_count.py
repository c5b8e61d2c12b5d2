"""bench/flip_sparse.py with the set-ups counted by what they did with levels ≥ 2
(``sparse_pressure_workspace_kept``, ``VOXFX_SPARSE_MG_KEEP``): kept, rebuilt, and the workspace
generations, printed at the end as ``levels >= 2: kept K, built B, generations G``. The same
arguments as flip_sparse.py; the counting wraps ``commit`` (a host call a set-up, no sync).

    VOXFX_SPARSE_MG_KEEP=3 python3 bench/_mg_keep_count.py --row 8m --steps 8 --warm 2
"""

from __future__ import annotations

import atexit
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_pressure_workspace_kept as held_levels  # noqa: E402

counts = {"kept": 0, "built": 0, "generations": set()}
_commit = held_levels.commit


def commit(ws, grid, level0, *args):
    counts["kept" if getattr(level0, "mg_keep", False) else "built"] += 1
    counts["generations"].add(ws.generation)
    return _commit(ws, grid, level0, *args)


held_levels.commit = commit
atexit.register(lambda: print(f"levels >= 2: kept {counts['kept']}, built {counts['built']}, "
                              f"generations {len(counts['generations'])}", flush=True))
sys.argv = [str(ROOT / "bench" / "flip_sparse.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")

"""What Voxelize Selected is asked for (``Request``) and the grid it voxelizes into:
plain data, shared by the add-on's operators, the CLI and the kernels' memory guard."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..grid import GridSpec


@dataclass
class Request:
    mode: str  # kernel mode name
    resolution: int | None = None
    voxel_size: float | None = None
    fill_holes: bool = False
    include_edges: bool = True
    combine: bool = True
    outputs: set = field(default_factory=lambda: {"points"})
    vox_path: str = ""
    cache_dir: str = "//voxfx_cache/{blend_name}/"
    sparse: str = "auto"  # "auto", "always" or "never" (the sparse voxelizer, issue 11)
    art: object = None  # the voxel art's memory (``art_cost.ArtCost``), for the guard; not a setting

    def settings(self) -> dict:
        return {k: (sorted(v) if isinstance(v, set) else v) for k, v in self.__dict__.items() if k != "art"}


def grid_for(lo, hi, request: Request) -> GridSpec:
    """Grid covering lo..hi with one voxel of padding, sized by voxel size or resolution."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if request.voxel_size:
        return GridSpec.around(lo, hi, request.voxel_size)
    extent = float(np.max(hi - lo))
    size = extent / max(request.resolution, 1) if extent > 0 else 1e-3
    return GridSpec.around(lo, hi, size)

"""Grids: geometry of a voxel grid (``GridSpec``), packed bit grids, dense fields."""

from .spec import GridSpec  # noqa: F401

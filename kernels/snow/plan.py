"""A snow bake's domain and its memory check, from arrays and numbers (issue 19: the
operator reads the scene, the kernels decide). The search for a wind resolution that
fits plans each candidate domain here, never by writing settings into the scene."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..memory import largest_that_fits
from .domain import SnowDomain


def domain_box(receivers_lo, receivers_hi, sky_height: float, box=None):
    """(lo, hi) of the domain: *box* (the Domain object's world bounds) where given, else
    the receivers' bounds raised by *sky_height* metres."""
    if box is not None:
        return np.asarray(box[0], np.float64), np.asarray(box[1], np.float64)
    lo, hi = np.asarray(receivers_lo, np.float64), np.asarray(receivers_hi, np.float64).copy()
    hi[2] += float(sky_height)
    return lo, hi


def plan_domain(lo, hi, receivers_lo, receivers_hi, wind_resolution: int, ground_resolution: int) -> SnowDomain:
    """The wind grid and ground lattice over lo..hi; the wind grid reaches one wind cell
    below the lowest receiver, so the air just above the ground is a cell layer of its own
    (issue 22 §5)."""
    rlo, rhi = np.asarray(receivers_lo), np.asarray(receivers_hi)
    if np.any(rhi[:2] < np.asarray(lo)[:2]) or np.any(rlo[:2] > np.asarray(hi)[:2]):
        raise InputError("The receivers lie outside the snow domain: move them or the Domain object")
    return SnowDomain.from_box(lo, hi, int(wind_resolution), int(ground_resolution), lowest_receiver=float(rlo[2]))


def check_memory(vertices, triangles, lo, hi, receivers_lo, receivers_hi, wind_resolution: int,
                 ground_resolution: int, flakes: int, free: int, device: str, xp=None,
                 with_encoder=None) -> SnowDomain:
    """The planned domain if the bake fits *free* bytes; else ``InputError`` naming the
    largest wind resolution (or flake count) that fits next to the other settings.
    *with_encoder*: on the GPU, frames are encoded on the device between steps:
    ``with_encoder(stages, flakes)`` is the peak with the encoder beside the state
    (``addon.compact_points.with_device_encoder``, as the liquid's guard)."""
    from .ground import terrain_items

    xp = xp or backend.xp()

    def plan(res):
        return plan_domain(lo, hi, receivers_lo, receivers_hi, res, ground_resolution)

    encoder = with_encoder if with_encoder is not None and xp is not np else None

    items: dict = {}

    def need_at(d: SnowDomain, n_flakes: int) -> int:
        key = (d.wind.shape, d.ground_shape, d.ground_cell)
        if key not in items:
            items[key] = terrain_items(vertices, triangles, d)
        need = d.nbytes(n_flakes, xp=xp, terrain_items=items[key],
                        triangles=len(triangles), parts=encoder is not None)
        return int(encoder(need, n_flakes)) if encoder is not None else need

    domain = plan(wind_resolution)
    need = need_at(domain, flakes)
    if need <= free:
        return domain
    what = (f"A snow simulation with {flakes:,} flakes, {'×'.join(map(str, domain.wind.shape))} wind cells and "
            f"{'×'.join(map(str, domain.ground_shape))} ground samples needs {backend.format_bytes(need)} but only "
            f"{backend.format_bytes(free)} is free on {device}")
    best = largest_that_fits(lambda res: need_at(plan(res), flakes), free, 8, wind_resolution - 1)
    if best is not None:
        raise InputError(f"{what}. The largest wind resolution that fits is {best}")
    smallest = plan(8)
    most = largest_that_fits(lambda n: need_at(smallest, n), free, 0, flakes)
    raise InputError(f"{what}. At most {most or 0:,} flakes fit")

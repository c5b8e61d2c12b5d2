"""Two classic liquid benchmarks run on ``FlipSimulation`` (dense or sparse, NumPy or
CuPy), shared by the CPU tests (tests/unit/test_flip_accuracy.py) and their GPU mirrors
(tests/gpu/test_flip_accuracy_gpu.py). Quasi-2D: the tank is two cells thick in y, between
free-slip walls.

* Martin & Moyce (1952) dam break: a column of width a and height 2a (their n² = 2)
  released at one end of a tank; the surge front Z = x/a against T = t·√(2g/a).
* Sloshing: the first standing mode of a rectangular tank (length L, depth d), surface
  η = A cos(kx), k = π/L; linear theory ω² = g k tanh(k d).
"""

from __future__ import annotations

import math

import numpy as np

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

G = 9.81

# Martin & Moyce (1952), "An experimental study of the collapse of liquid columns on a rigid
# horizontal plane", Phil. Trans. R. Soc. Lond. A 244, 312–324: the surge front of their
# n² = 2 columns (height 2a, width a) as (T, Z), T = n·t·√(g/a) = t·√(2g/a), Z = x/a.
# Values to two decimals of the series as later validations of particle methods reproduce
# it (no table of the paper was at hand to check them against: do so before tightening the
# tolerance). Independent of them, the shallow-water (Ritter) dry-bed front bounds Z above.
MARTIN_MOYCE = np.array([
    (0.00, 1.00), (0.41, 1.11), (0.84, 1.22), (1.19, 1.44), (1.43, 1.67), (1.63, 1.89),
    (1.83, 2.11), (1.98, 2.33), (2.20, 2.56), (2.32, 2.78), (2.51, 3.00), (2.65, 3.22),
    (2.83, 3.44), (2.98, 3.67), (3.11, 3.89),
])


def assert_front_follows_martin_moyce(T, Z, tolerance=0.12):
    """Every frame with 0.4 ≤ T ≤ 2.5 within *tolerance* (relative) of the experiment
    (linear between its points), and never beyond the shallow-water (Ritter) dry-bed front,
    which moves at 2√(g·2a): Z ≤ 1 + 2T, an upper bound no real collapse reaches."""
    reference = np.interp(T, MARTIN_MOYCE[:, 0], MARTIN_MOYCE[:, 1])
    window = (T >= 0.4) & (T <= 2.5)
    assert window.sum() >= 10
    deviation = Z[window] / reference[window] - 1
    print(f"\nMartin–Moyce front: {deviation.min():+.1%} to {deviation.max():+.1%} of the experiment")
    assert np.abs(deviation).max() <= tolerance, list(zip(T[window].round(2), Z[window].round(2)))
    assert (Z <= 1 + 2 * T + 1e-9).all()


def settings(gravity: float, **overrides) -> FlipSettings:
    """The liquid's default settings (CFL, Max Substeps, FLIP ratio...) under *gravity*."""
    return FlipSettings(gravity=(0.0, 0.0, -gravity), **overrides)


def dam_break_front(xp=np, sparse=False, gravity=G, cells_per_a=8, fps=60.0, until_T=2.55, a=0.2, **overrides):
    """Surge front of a Martin–Moyce column (width *a*, height 2a, *cells_per_a* cells
    across it) stepped at *fps* frames per second: arrays (T, Z) after each frame, T with
    the nominal g (so a wrong gravity shows as a wrong front), Z from the 99.5th percentile
    of the particles' x (a few spray particles ahead of the sheet do not count);
    *overrides*: other settings (``FlipSettings`` fields)."""
    h = a / cells_per_a
    spec = GridSpec((0.0, 0.0, 0.0), h, (5 * cells_per_a, 2, round(2.5 * cells_per_a)))
    sim = FlipSimulation(spec, settings(gravity, **overrides), *box((0.0, 0.0, 0.0), (a, 2 * h, 2 * a)), xp=xp,
                         sparse=sparse)
    scale = math.sqrt(2 * G / a)
    T, Z, t = [0.0], [1.0], 0.0
    while t * scale < until_T:
        sim.step(1.0 / fps)
        t += 1.0 / fps
        x = backend.to_numpy(sim.pos[:, 0]).astype(np.float64)
        T.append(t * scale)
        Z.append(float(np.percentile(x, 99.5)) / a)
    return np.array(T), np.array(Z)


def wavy_slab(length, width, depth, amplitude, segments=64):
    """Closed mesh of water in a tank, 0 ≤ x ≤ *length*, 0 ≤ y ≤ *width*, from z = 0 to the
    surface z = depth + amplitude·cos(πx/length) (outward winding)."""
    x = np.linspace(0.0, length, segments + 1)
    z = depth + amplitude * np.cos(np.pi * x / length)
    n = segments + 1
    bottom_front = [(xi, 0.0, 0.0) for xi in x]
    bottom_back = [(xi, width, 0.0) for xi in x]
    top_front = [(xi, 0.0, zi) for xi, zi in zip(x, z)]
    top_back = [(xi, width, zi) for xi, zi in zip(x, z)]
    vertices = np.array(bottom_front + bottom_back + top_front + top_back, np.float32)
    b0, b1, t0, t1 = 0, n, 2 * n, 3 * n
    quads = []
    for i in range(segments):
        j = i + 1
        quads += [(b0 + i, b1 + i, b1 + j, b0 + j), (t0 + i, t0 + j, t1 + j, t1 + i),
                  (b0 + i, b0 + j, t0 + j, t0 + i), (b1 + i, t1 + i, t1 + j, b1 + j)]
    quads += [(b0, t0, t1, b1), (b0 + segments, b1 + segments, t1 + segments, t0 + segments)]
    triangles = [(p, q, r) for p, q, r, _ in quads] + [(p, r, s) for p, _, r, s in quads]
    return vertices, np.array(triangles, np.int32)


def linear_sloshing_period(length, depth, gravity=G) -> float:
    """First mode of a rectangular tank: ω² = g k tanh(k d), k = π/L; period 2π/ω."""
    k = math.pi / length
    return 2 * math.pi / math.sqrt(gravity * k * math.tanh(k * depth))


def fit_damped_cosine(t, s, omega_guess):
    """(ω, β) of the least-squares fit s ≈ c + e^(−βt)(p cos ωt + q sin ωt): ω searched over
    ±50% of *omega_guess*, coarse then fine, β over 0–4 /s; c, p, q solved linearly."""
    t, s = np.asarray(t, np.float64), np.asarray(s, np.float64)

    def best(omegas, betas):
        result = (np.inf, 0.0, 0.0)
        for beta in betas:
            e = np.exp(-beta * t)
            for w in omegas:
                m = np.stack([np.ones_like(t), e * np.cos(w * t), e * np.sin(w * t)], axis=1)
                coef = np.linalg.lstsq(m, s, rcond=None)[0]
                r = float(((m @ coef - s) ** 2).sum())
                if r < result[0]:
                    result = (r, w, beta)
        return result

    _, w, beta = best(np.linspace(0.5, 1.5, 101) * omega_guess, np.linspace(0.0, 4.0, 41))
    _, w, beta = best(np.linspace(w - 0.01 * omega_guess, w + 0.01 * omega_guess, 41),
                      np.linspace(max(0.0, beta - 0.1), beta + 0.1, 21))
    return w, beta


def sloshing(xp=np, sparse=False, gravity=G, h=0.04, fps=60.0, periods=2.0, length=0.8, depth=0.32,
             amplitude=0.03, **overrides):
    """Period (s) of the first sloshing mode of a tank *length* × 2 cells × 1.5·*depth*
    with water *depth* deep, started at rest from η = A cos(kx): the mode's amplitude
    a₁(t) = (2/L)∫η cos(kx) dx, read from all particles (each h³/8 of water, so
    ∫η cos kx dx = Σ cos(k x_p)·h³/8 / width), fitted by a damped cosine over *periods*
    linear periods (under the nominal g); *overrides*: other settings (``FlipSettings``
    fields). Returns (period, damping rate β in 1/s)."""
    spec = GridSpec((0.0, 0.0, 0.0), h, (round(length / h), 2, round(1.5 * depth / h)))
    width = 2 * h
    sim = FlipSimulation(spec, settings(gravity, **overrides), *wavy_slab(length, width, depth, amplitude), xp=xp,
                         sparse=sparse)
    k = math.pi / length
    per_particle = h ** 3 / sim.settings.particles_per_cell / width

    def mode():
        x = backend.to_numpy(sim.pos[:, 0]).astype(np.float64)
        return 2.0 / length * per_particle * float(np.cos(k * x).sum())

    expected = linear_sloshing_period(length, depth)
    t, s = [0.0], [mode()]
    while t[-1] < periods * expected:
        sim.step(1.0 / fps)
        t.append(t[-1] + 1.0 / fps)
        s.append(mode())
    omega, beta = fit_damped_cosine(t, s, 2 * math.pi / expected)
    return 2 * math.pi / omega, beta

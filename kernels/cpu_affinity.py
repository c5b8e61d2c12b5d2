"""The CPU a GPU process's main thread runs on (issue 24, helper s23f).

A sparse FLIP substep is paced by its host where the host is slow: the 8M row read 5.2 ms in
processes whose main thread sat on a quick CPU and 6.6–7.5 ms on a slow one (session 23, call 1,
NVIDIA H100 80GB HBM3 in a 16-vCPU KVM guest, one NUMA node). There a vCPU is at any moment either
quick (a tiny RawKernel launch 11.5–12.5 µs, a fixed Python loop ~16 µs) or slow (18–20 µs, 28–33 µs:
the interpreter ~1.9× slower), and which vCPUs are quick changes within seconds (2 to 10 of 16);
the guest sees no frequency, one node and no SMT siblings, so only a probe tells them apart.

``VOXFX_CPU_AFFINITY`` (``settings.env_choice``) picks what :func:`place` does:

* ``off`` (the default): nothing;
* ``local``: the thread's CPUs narrowed to the GPU's local CPUs (``/sys/bus/pci/devices/<bus
  id>/local_cpulist``, the bus id from CuPy) — where the GPU hangs off one NUMA node of several;
* ``quick``: the thread pinned to the CPU, among the local ones, on which a fixed piece of Python
  runs quickest now (:func:`probe`, ~0.1–0.3 ms a CPU).

Only the calling thread moves (Linux: ``sched_setaffinity(0)`` is the thread); threads it starts
later inherit its set. No ``bpy``: benches and scripts call :func:`place` after their set-up.
"""

from __future__ import annotations

import os
import time

from .settings import env_choice

AFFINITIES = ("off", "local", "quick")
PCI_DEVICES = "/sys/bus/pci/devices"


def affinity_mode(given=None) -> str:
    """``VOXFX_CPU_AFFINITY``: "off" (default), "local" or "quick" (module notes)."""
    return env_choice("VOXFX_CPU_AFFINITY", AFFINITIES, given)


def parse_cpulist(text: str) -> list[int]:
    """The CPUs of a kernel cpulist ("0-3,8,10-11" → [0, 1, 2, 3, 8, 10, 11]), sorted, once each;
    a ValueError for anything that is not one."""
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, last = part.split("-") if "-" in part else (part, part)  # "0-2-4" does not unpack
        lo, hi = int(first), int(last)
        if lo < 0 or hi < lo:
            raise ValueError(f"not a cpulist range: {part!r}")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def sysfs_bus_id(bus_id: str) -> str:
    """A PCI bus id as sysfs names its device: CUDA's "0000:1B:00.0" or nvidia-smi's
    "00000000:1B:00.0" → "0000:1b:00.0" (the domain in four hex digits, lower case)."""
    domain, rest = bus_id.strip().split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


def local_cpus(bus_id: str, root: str = PCI_DEVICES) -> list[int] | None:
    """The CPUs local to the PCI device *bus_id* (its ``local_cpulist``), None where unreadable."""
    try:
        with open(os.path.join(root, sysfs_bus_id(bus_id), "local_cpulist")) as f:
            return parse_cpulist(f.read())
    except (OSError, ValueError):
        return None


def candidates(allowed, local) -> list[int]:
    """The CPUs to choose among: the allowed ones that are local, all allowed where none is
    (or the local set is unknown)."""
    both = sorted(set(allowed) & set(local or ()))
    return both or sorted(allowed)


def quickest(times: dict) -> int:
    """The CPU of the least time in *times* (CPU → µs); the lowest CPU among equals."""
    return min(sorted(times), key=lambda cpu: times[cpu])


def _work():
    d = {}
    for i in range(200):
        d[i & 31] = d.get(i & 31, 0) + i
    return d


def probe(cpu: int, repeats: int = 3, calls: int = 4) -> float:
    """µs the calling thread takes for a fixed piece of Python (dict traffic, as a substep's
    host code) on *cpu*, best of *repeats*; leaves the thread pinned there."""
    os.sched_setaffinity(0, {cpu})
    _work()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            _work()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def gpu_bus_id(xp) -> str | None:
    """The current CUDA device's PCI bus id through CuPy *xp*; None without one."""
    try:
        return xp.cuda.Device().pci_bus_id
    except Exception:  # NumPy, or no device: no locality to read
        return None


def place(xp=None, mode=None) -> str:
    """Apply ``VOXFX_CPU_AFFINITY`` (or *mode*) to the calling thread (module notes); *xp*
    (CuPy) names the GPU whose local CPUs count. Returns a line saying what was done."""
    mode = affinity_mode(mode)
    if mode == "off":
        return "CPU affinity off"
    allowed = sorted(os.sched_getaffinity(0))
    bus = gpu_bus_id(xp) if xp is not None else None
    local = local_cpus(bus) if bus else None
    cpus = candidates(allowed, local)
    if mode == "local":
        os.sched_setaffinity(0, set(cpus))
        return f"CPU affinity local: CPUs {cpus} (GPU {bus}: {local})"
    times = {cpu: probe(cpu) for cpu in cpus}
    cpu = quickest(times)
    os.sched_setaffinity(0, {cpu})
    return (f"CPU affinity quick: CPU {cpu} ({times[cpu]:.1f} µs; slowest {max(times.values()):.1f}, "
            f"{sum(t < 1.2 * times[cpu] for t in times.values())} of {len(times)} within 20%)")

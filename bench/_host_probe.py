"""The host's pace as a row reads it (issue 24, helper s23f): µs of a fixed piece of Python on the CPU
the thread runs on. On the H100 machines (16-vCPU KVM guests) a vCPU is at any moment quick (~13–16 µs)
or slow (~25–33 µs: another load on its physical core, which the guest cannot see; NumPy's chain of
dependent adds runs there at ~1.05×, the interpreter at ~1.9×), and the sparse 8M substep follows:
5.0–5.3 ms in a process on a quick vCPU, 6.6–7.5 on a slow one (session 23, s23f's calls 1–2).
"""

from __future__ import annotations

import os
import time


def work():
    """The fixed piece: dict traffic of 200 items, as a substep's host code does between launches."""
    d = {}
    for i in range(200):
        d[i & 31] = d.get(i & 31, 0) + i
    return d


def python_us(repeats: int = 3, calls: int = 4) -> float:
    """µs of :func:`work` on the CPU the thread runs on, best of *repeats* runs of *calls* calls."""
    work()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def probe(cpu: int, repeats: int = 3, calls: int = 4) -> float:
    """:func:`python_us` with the thread moved to *cpu* first (Linux: ``sched_setaffinity(0)`` is the
    calling thread); the thread stays there."""
    os.sched_setaffinity(0, {cpu})
    return python_us(repeats, calls)


def on_cpu() -> int:
    """The CPU this thread last ran on (/proc/thread-self/stat's 39th field)."""
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])

"""Kernels a CuPy process uses for the first time, for the benches (issue 24: a frame that
pays for a kernel the process had not used yet looks like a slow stage).

``CompileLog`` wraps, calling through, CuPy's one way into its kernel cache,
``cupy.cuda.compiler._compile_module_with_cache`` (CuPy 13 and 14: every ``RawModule``,
element-wise, reduction and fused kernel the first time a process uses it on a device,
the disk cache looked up there; CuPy's own CUB and Thrust routines are built in and never
pass), and NVRTC behind it (``_compile_using_nvrtc_no_warning``: a kernel not in the disk
cache). Each first use is noted under the caller's ``phase`` with its kernel names, host
ms and whether NVRTC compiled it; ``take()`` hands back and forgets the notes so far.
"""

from __future__ import annotations

import re
import time

_NAME = re.compile(r"__global__\s+void\s+(\w+)")


class CompileLog:
    def __init__(self):
        import cupy.cuda.compiler as compiler

        self.phase = ""
        self._notes = []
        self._compiled = [False]
        self._compiler = compiler
        self._module = compiler._compile_module_with_cache
        self._nvrtc = getattr(compiler, "_compile_using_nvrtc_no_warning", None)

        def module(source, *args, **kwargs):
            self._compiled[0] = False
            start = time.perf_counter()
            try:
                return self._module(source, *args, **kwargs)
            finally:
                names = _NAME.findall(source)
                self._notes.append((self.phase, names, (time.perf_counter() - start) * 1e3, self._compiled[0]))

        def nvrtc(*args, **kwargs):
            self._compiled[0] = True
            return self._nvrtc(*args, **kwargs)

        compiler._compile_module_with_cache = module
        if self._nvrtc is not None:
            compiler._compile_using_nvrtc_no_warning = nvrtc

    def close(self):
        """Put CuPy's own functions back."""
        self._compiler._compile_module_with_cache = self._module
        if self._nvrtc is not None:
            self._compiler._compile_using_nvrtc_no_warning = self._nvrtc

    def take(self) -> list:
        """[(phase, kernel names, ms, compiled by NVRTC)] since the last call."""
        notes, self._notes = self._notes, []
        return notes

    @staticmethod
    def summary(notes, phase) -> str:
        """One line for *phase*'s notes: how many modules, their ms, how many NVRTC compiled,
        the kernels' names (a module of many kernels by its first and their count)."""
        mine = [n for n in notes if n[0] == phase]
        if not mine:
            return f"{phase}: none"
        names = [(n[1][0] + (f" (+{len(n[1]) - 1})" if len(n[1]) > 1 else "")) if n[1] else "?" for n in mine]
        return (f"{phase}: {len(mine)} modules, {sum(n[2] for n in mine):.0f} ms, {sum(n[3] for n in mine)} compiled "
                f"[{', '.join(names)}]")

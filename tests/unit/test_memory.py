"""The real memory limit of the process: cgroup v2 / v1 files (crafted trees, real
parsing), RLIMIT_AS in a real subprocess, and the GPU pool release without CuPy."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from voxfx.kernels import backend, memory

MiB = 1 << 20
GiB = 1 << 30
ROOT = str(backend.CUDA_DIR.parent.parent)


def _tree(tmp_path, files: dict):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_cgroup_v2_limit_minus_usage_less_reclaimable_cache(tmp_path):
    root = _tree(tmp_path / "cg", {
        "cgroup.controllers": "cpu memory\n",
        "app/job/memory.max": f"{2 * GiB}\n",
        "app/job/memory.current": f"{700 * MiB}\n",
        "app/job/memory.stat": f"anon 500000\ninactive_file {200 * MiB}\nactive_file 1\n",
        "app/memory.max": "max\n",
    })
    own = _tree(tmp_path / "proc", {"cgroup": "0::/app/job\n"}) / "cgroup"
    room, why = memory.cgroup_headroom(root, own)
    assert room == 2 * GiB - 500 * MiB
    assert "memory.max" in why and "job" in why


def test_cgroup_v2_parent_limit_binds_the_child(tmp_path):
    root = _tree(tmp_path / "cg", {
        "cgroup.controllers": "memory\n",
        "app/memory.max": f"{1 * GiB}\n",
        "app/memory.current": f"{900 * MiB}\n",
        "app/job/memory.max": "max\n",
        "app/job/memory.current": f"{10 * MiB}\n",
    })
    own = _tree(tmp_path / "proc", {"cgroup": "0::/app/job\n"}) / "cgroup"
    assert memory.cgroup_headroom(root, own)[0] == 124 * MiB


def test_cgroup_v2_without_limit_and_namespaced_root(tmp_path):
    unlimited = _tree(tmp_path / "a", {"cgroup.controllers": "memory\n", "memory.max": "max\n",
                                       "memory.current": "123\n"})
    own = _tree(tmp_path / "p1", {"cgroup": "0::/\n"}) / "cgroup"
    assert memory.cgroup_headroom(unlimited, own) is None
    # inside a cgroup namespace /proc/self/cgroup names a path the mount does not show:
    # the mount's root is the process's own group
    limited = _tree(tmp_path / "b", {"cgroup.controllers": "memory\n", "memory.max": f"{3 * GiB}\n",
                                     "memory.current": f"{1 * GiB}\n"})
    own = _tree(tmp_path / "p2", {"cgroup": "0::/not/visible/here\n"}) / "cgroup"
    assert memory.cgroup_headroom(limited, own)[0] == 2 * GiB


def test_cgroup_v1_limit_and_unlimited_marker(tmp_path):
    root = _tree(tmp_path / "cg", {
        "memory/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "no limit"
        "memory/docker/abc/memory.limit_in_bytes": f"{4 * GiB}\n",
        "memory/docker/abc/memory.usage_in_bytes": f"{3 * GiB}\n",
        "memory/docker/abc/memory.stat": f"cache 5\ntotal_inactive_file {512 * MiB}\n",
    })
    own = _tree(tmp_path / "proc", {"cgroup": "12:cpu:/\n4:memory:/docker/abc\n0::/\n"}) / "cgroup"
    room, why = memory.cgroup_headroom(root, own)
    assert room == GiB + 512 * MiB and "v1" in why
    root2 = _tree(tmp_path / "cg2", {"memory/memory.limit_in_bytes": "9223372036854771712\n"})
    own2 = _tree(tmp_path / "proc2", {"cgroup": "4:memory:/\n"}) / "cgroup"
    assert memory.cgroup_headroom(root2, own2) is None


def test_host_memory_takes_the_tightest_limit(tmp_path):
    proc = _tree(tmp_path / "proc", {
        "meminfo": "MemTotal:       16000000 kB\nMemFree: 1000 kB\nMemAvailable:   12000000 kB\n",
        "self/cgroup": "0::/box\n",
        "self/status": "Name:\tpython\nVmSize:\t  100000 kB\nVmData:\t 5000 kB\n",
    })
    cg = _tree(tmp_path / "cg", {"cgroup.controllers": "memory\n", "box/memory.max": f"{6 * GiB}\n",
                                 "box/memory.current": f"{1 * GiB}\n"})
    host = memory.host_memory(cgroup_root=cg, proc=proc)
    assert host.total == 16000000 * 1024
    assert host.available == 5 * GiB and "cgroup v2" in host.limited_by
    (cg / "box" / "memory.max").write_text("max\n")
    host = memory.host_memory(cgroup_root=cg, proc=proc)
    assert host.available == 12000000 * 1024 and host.limited_by == "MemAvailable"


def _run(code: str):
    prelude = (f"import sys; sys.path.insert(0, {ROOT!r})\n"
               "from tools.package import load; load()\n")
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_rlimit_as_is_the_limit_the_guard_uses():
    """A real ``ulimit -v``: VmSize + 512 MiB. MemAvailable is far larger; the guard must
    see ~512 MiB (and a 1 GiB NumPy allocation really fails there)."""
    out = _run("""
        import resource, numpy as np
        from voxfx.kernels import backend, memory
        vm = memory._status_bytes("VmSize")
        resource.setrlimit(resource.RLIMIT_AS, (vm + 512 * 2**20, resource.RLIM_INFINITY))
        host = memory.host_memory()
        print("avail", host.available, host.limited_by)
        try:
            backend.ensure_fits(2**30, "a 1 GiB grid", xp=np)
            print("guard accepted")
        except backend.DeviceMemoryError as e:
            print("guard refused:", e)
        try:
            a = np.ones(2**30, np.uint8)
            print("allocated")
        except MemoryError:
            print("allocation failed")
    """)
    avail = int(out.split()[1])
    assert 400 * MiB < avail <= 512 * MiB, out
    assert "RLIMIT_AS" in out and "guard refused" in out and "limited by RLIMIT_AS" in out
    assert "allocation failed" in out  # the limit is real: the guard saw what binds


def test_cpu_device_info_reports_the_limit():
    info = backend._CPU.device_info()
    assert info.free_bytes == pytest.approx(memory.host_memory().available, rel=0.05)
    assert info.limited_by


def test_release_gpu_pool_without_cupy_empties_the_solver_cache():
    from voxfx.kernels.flip import pressure

    pressure._gpu_solvers[("fake", 1)] = object()  # what a bake leaves behind
    released = memory.release_gpu_pool()
    assert pressure._gpu_solvers == {}
    if "cupy" not in sys.modules:
        assert released == 0


def test_usable_bytes_applies_the_safety_margin():
    free = backend._CPU.device_info().free_bytes
    assert backend.usable_bytes(np) == pytest.approx(free * backend.SAFETY_FRACTION, rel=0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_heap_gives_freed_heap_pages_back():
    from voxfx.kernels.memory import trim_heap

    def rss():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS"))

    # 64 KiB arrays come from the heap (below glibc's mmap threshold); freeing every other
    # one leaves free pages between live chunks, which free() itself never returns
    arrays = [np.ones(1 << 13) for _ in range(4000)]
    del arrays[::2]
    held = rss()
    assert trim_heap()
    assert held - rss() > 64 << 20  # of the 125 MiB freed
    assert len(arrays) == 2000
